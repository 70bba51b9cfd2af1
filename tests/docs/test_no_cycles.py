"""No import cycle anywhere in ldp, lazy imports inside functions included (issue 24).

The rule is the ``acyclic_siblings`` contract in pyproject.toml's ``[tool.importlinter]`` (id
``acyclic``): among the children of every package of ldp, at every depth, the imports (grimp's
graph: every import statement, at module level or inside a function) form no cycle. ``lint-imports``
runs it in ``make lint`` and CI; this test runs it as a real process, and runs the *same* contract
on two tiny synthetic packages to show that it catches a cycle closed by a lazy import inside a
function (the broken variant: the way ``randomizers`` ↔ ``frequency_oracles`` was closed) and
keeps the same package once the cycle is cut. Deterministic: no randomness, no clock.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.waits import PROCESS_WAIT_S

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds


def acyclic_contract() -> dict[str, Any]:
    """The ``acyclic`` contract of pyproject.toml."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c.get("id") == "acyclic"]
    return contract


def lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=PROCESS_WAIT_S)


def test_ldp_has_no_import_cycle() -> None:
    contract = acyclic_contract()
    assert contract["type"] == "acyclic_siblings" and contract["ancestors"] == ["ldp"]
    result = lint(ROOT, "--contract", "acyclic")
    assert result.returncode == 0 and "KEPT" in result.stdout, result.stdout + result.stderr


def _package(tmp_path: Path, lazy_import: bool) -> Path:
    """pkg.a imports pkg.b at module level; pkg.b imports pkg.a inside a function or not at all;
    the same contract as pyproject's, with the synthetic package as its ancestor."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import helper\n\n\ndef use() -> int:\n    return helper()\n")
    body = "def helper() -> int:\n"
    body += "    from pkg.a import use  # the lazy import that closes the cycle\n\n    return 1 if use else 0\n" if lazy_import else "    return 1\n"
    (pkg / "b.py").write_text(body)
    contract = acyclic_contract()
    (tmp_path / ".importlinter").write_text(
        f"[importlinter]\nroot_package = pkg\n\n[importlinter:contract:{contract['id']}]\n"
        f"name = {contract['name']}\ntype = {contract['type']}\nancestors = pkg\n"
    )
    return tmp_path


def test_the_contract_catches_a_cycle_closed_by_a_lazy_import(tmp_path: Path) -> None:
    result = lint(_package(tmp_path, lazy_import=True), ".importlinter")
    assert result.returncode != 0 and "No cycles are allowed in pkg" in result.stdout, result.stdout + result.stderr


def test_the_contract_keeps_the_same_package_without_the_cycle(tmp_path: Path) -> None:
    result = lint(_package(tmp_path, lazy_import=False), ".importlinter")
    assert result.returncode == 0 and "KEPT" in result.stdout, result.stdout + result.stderr
