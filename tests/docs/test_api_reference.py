"""The documentation site builds with warnings as errors, and its API reference covers every module.

``make docs`` (and CI, through ``.ci/run``) runs ``mkdocs build --strict`` over ``mkdocs.yml``:
the pages of docs/ and an API reference generated from the docstrings by mkdocstrings (numpy
style), one page per layer in docs/reference/. Here the same build runs into a temporary folder
(about 10 s), and two deliberately broken sites built with the project's own configuration show
that --strict fails on what it should: a relative link to a missing page, and a docstring whose
``Parameters`` name a parameter the function does not have.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waits import PROCESS_WAIT_S

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["core", "local", "wire", "sq", "central", "learners", "experiment", "classroom", "cli"]

needs_mkdocs = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings_handlers") is None,
    reason="mkdocs / mkdocstrings are not installed (the 'docs' extra: pip install -e '.[docs]'; make test installs it)",
)


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``site``, as ``make docs`` runs it."""
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=PROCESS_WAIT_S,
    )


def warnings(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]


@needs_mkdocs
def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    site = tmp_path / "site"
    proc = build(ROOT / "mkdocs.yml", site)
    assert proc.returncode == 0 and not warnings(proc), "\n".join(warnings(proc)) or proc.stderr[-3000:]
    for layer in LAYERS:  # every layer's page has the reference of its modules in it
        page = (site / "reference" / layer / "index.html").read_text(encoding="utf-8")
        assert f'id="ldp.{layer}' in page, layer
    budget = (site / "reference" / "core" / "index.html").read_text(encoding="utf-8")
    assert 'id="ldp.core.budget.Ledger"' in budget  # a class, rendered from its numpy docstring
    assert (site / "quickstart" / "index.html").is_file()


def test_the_reference_names_every_module_of_every_layer() -> None:
    """A module added to a layer must be added to its reference page (one ``::: ldp.layer.module``
    line in docs/reference/LAYER.md); the generated protobuf code (ldp.wire.v1) is left out."""
    missing = []
    for layer in LAYERS:
        page = (ROOT / "docs" / "reference" / f"{layer}.md").read_text(encoding="utf-8")
        directives = {line.split()[1] for line in page.splitlines() if line.startswith("::: ")}
        for path in sorted((ROOT / "ldp" / layer).glob("*.py")):
            name = f"ldp.{layer}" if path.stem == "__init__" else f"ldp.{layer}.{path.stem}"
            if name not in directives:
                missing.append(f"docs/reference/{layer}.md lacks '::: {name}'")
    assert not missing, "\n".join(missing)


def _python_handler(config: dict) -> dict:
    """The mkdocstrings python handler's settings in a loaded mkdocs.yml."""
    (plugin,) = [p["mkdocstrings"] for p in config["plugins"] if isinstance(p, dict) and "mkdocstrings" in p]
    return plugin["handlers"]["python"]


@needs_mkdocs
def test_the_navigation_lists_every_page() -> None:
    """mkdocs --strict warns about a page left out of the nav (validation.omitted_files): this only
    checks the configuration still asks for it, and that the nav names the reference pages."""
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["strict"] is True and config["validation"]["omitted_files"] == "warn"
    assert _python_handler(config)["options"]["docstring_style"] == "numpy"
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for layer in LAYERS:
        assert f"reference/{layer}.md" in text, layer


# --- the strict build fails on what it should ------------------------------------------------------

_BROKEN_MODULE = '''"""A module with one broken docstring."""


def scale(value: float, factor: float = 2.0) -> float:
    """The value times a factor.

    Parameters
    ----------
    value : float
        What to scale.
    factr : float
        A misspelt parameter name: the signature has ``factor``.

    Returns
    -------
    float
        ``value * factor``.
    """
    return value * factor
'''


def _broken_site(tmp_path: Path, page: str) -> Path:
    """A one-page site built with the project's own mkdocs configuration (its theme, plugins,
    numpy docstrings and validation), over a tiny package ``brokenpkg``; returns its mkdocs.yml."""
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(page, encoding="utf-8")
    (tmp_path / "brokenpkg").mkdir()
    (tmp_path / "brokenpkg" / "__init__.py").write_text(_BROKEN_MODULE, encoding="utf-8")
    config["nav"] = [{"Home": "index.md"}]
    _python_handler(config)["paths"] = ["."]
    path = tmp_path / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return path


@needs_mkdocs
@pytest.mark.parametrize(
    ("page", "expected"),
    [
        ("# Home\n\nSee [the design](design.md).\n", "contains a link 'design.md', but the target is not found"),
        ("# Home\n\n::: brokenpkg\n", "Parameter 'factr' does not appear in the function signature"),
    ],
    ids=["broken-link", "docstring-names-a-missing-parameter"],
)
def test_the_strict_build_fails_on_a_broken_site(tmp_path: Path, page: str, expected: str) -> None:
    proc = build(_broken_site(tmp_path, page), tmp_path / "site")
    assert proc.returncode != 0, proc.stderr[-3000:]
    assert any(expected in line for line in warnings(proc)), proc.stderr[-3000:]
