"""docs/design.md's layer drawing is the import contract that CI enforces.

``[tool.importlinter]`` in pyproject.toml lists ldp's layers, top first; ``lint-imports`` (make
lint) fails any import that points up. This test fails when the drawing in docs/design.md §2 and
that list disagree, so the picture a contributor reads is the rule the code obeys.

The folder simulations/ installs as ``ldp.simulations`` (pyproject's ``package-dir``). grimp, which
``lint-imports`` runs, reads only the files under ldp/, so in the checkout that layer is optional
(parenthesized) and unseen. ``test_the_layers_hold_where_the_wheel_puts_them`` runs the same
contracts on the layout the wheel installs (ldp/ with ldp/simulations/ in it, made of links to the
checkout's files), and shows that an upward import from ldp.simulations is caught there.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.waits import PROCESS_WAIT_S

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _pyproject() -> dict:  # type: ignore[type-arg]
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def mapped_packages() -> dict[str, str]:
    """pyproject's package-dir: a subpackage of ldp → the folder of the checkout it installs from."""
    return dict(_pyproject()["tool"]["setuptools"].get("package-dir", {}))


def _layer_name(part: str) -> str:
    """``ldp.sq`` → ``sq``; an optional layer ``(ldp.simulations)`` → ``(simulations)``."""
    part = part.strip()
    optional = part.startswith("(") and part.endswith(")")
    name = part.strip("()").removeprefix("ldp.")
    return f"({name})" if optional else name


def contract_layers() -> list[str]:
    """The layers of the import-linter contract, top first, without the ``ldp.`` prefix."""
    config = _pyproject()["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    return [" | ".join(_layer_name(part) for part in layer.split("|")) for layer in contract["layers"]]


def drawn_layers(design: str) -> list[str]:
    """The first column of the code block under '## 2. Layers' in docs/design.md."""
    section = design[design.index("## 2. Layers") :]
    block = section[section.index("```") + 3 :]
    block = block[: block.index("```")]
    return [re.split(r"\s{2,}", line.strip())[0] for line in block.strip().splitlines()]


def test_the_design_drawing_is_the_enforced_contract() -> None:
    assert drawn_layers((ROOT / "docs" / "design.md").read_text()) == contract_layers()


def test_every_package_of_ldp_is_in_a_layer() -> None:
    packages = {p.name for p in (ROOT / "ldp").iterdir() if (p / "__init__.py").exists()}
    packages |= {name.removeprefix("ldp.") for name in mapped_packages()}  # ldp.simulations: the folder simulations/
    layered = {name.strip().strip("()") for layer in contract_layers() for name in layer.split("|")}
    assert packages == layered, f"not layered: {sorted(packages - layered)}; no such package: {sorted(layered - packages)}"


def test_the_comparison_catches_a_drawing_that_drifted() -> None:
    # The drift this test was written for: the old drawing put wire below local.
    drifted = "## 2. Layers\n\n```\ncli   x\nlearners   x\nsq   x\nlocal   x\nwire   x\ncore   x\n```\n"
    assert drawn_layers(drifted) == ["cli", "learners", "sq", "local", "wire", "core"]
    assert drawn_layers(drifted) != contract_layers()


def _installed_layout(site: Path, broken: str | None = None) -> Path:
    """``site/ldp`` as the wheel installs it: links to ldp/'s entries, and each package-dir folder
    (simulations/) as ``ldp/<name>`` made of links to its files; ``broken``: one more module in
    ldp/simulations/ with that source (the variant the contract must catch)."""
    pkg = site / "ldp"
    pkg.mkdir(parents=True)
    for entry in (ROOT / "ldp").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    for name, folder in mapped_packages().items():
        target = site.joinpath(*name.split("."))
        target.mkdir()
        for entry in (ROOT / folder).iterdir():
            if entry.name != "__pycache__":
                (target / entry.name).symlink_to(entry)
    if broken is not None:
        (site / "ldp" / "simulations" / "upward_example.py").write_text(broken)
    return site


def _lint(site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    argv = [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(ROOT / "pyproject.toml")]
    return subprocess.run(argv, cwd=site, env=env, capture_output=True, text=True, timeout=PROCESS_WAIT_S)


@pytest.mark.timeout(400)
def test_the_layers_hold_where_the_wheel_puts_them(tmp_path: Path) -> None:
    assert "ldp.simulations" in mapped_packages()
    kept = _lint(_installed_layout(tmp_path / "site"))
    assert kept.returncode == 0 and "broken" not in kept.stdout.lower().replace("0 broken", ""), kept.stdout + kept.stderr
    # The broken variant: an experiment module that imports the command line (the upward import
    # that simulations/randomized_response.py once made) breaks the contract on this layout.
    broken = _lint(_installed_layout(tmp_path / "broken", broken="import ldp.cli.main  # upward\n"))
    assert broken.returncode != 0 and "ldp.simulations.upward_example -> ldp.cli.main" in broken.stdout, broken.stdout + broken.stderr
