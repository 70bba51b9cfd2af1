"""docs/theory_map.md cannot silently rot.

Every backticked dotted name ``ldp.…`` (``ldp.simulations.…`` included) must import (longest module prefix)
and resolve (attribute chain); every ``tests/….py::test_name`` must name an existing file that
defines that function; every repo path it cites must exist; and every KLNRS statement the map
promises has a row naming code and a test. Lab modules run their lab on import, so for
``ldp.simulations.labs.*`` only the file is checked.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from functools import cache, lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "theory_map.md"

# Row labels the map must contain (first cell of a table row), one per KLNRS statement.
REQUIRED_ROWS = [
    "Def 2.1", "Claim 2.1",
    "Def 3.1", "Def 3.2", "Def 3.3", "Def 3.4", "Def 3.5", "Thm 3.6", "Thm 3.7",
    "Lemma 3.1", "Lemma 3.2", "Claim 3.3", "Thm 3.8",
    "Def 4.1", "Def 4.2", "Def 4.3", "Def 4.4", "Claim 4.1", "Lemma 4.2", "Lemma 4.3",
    "Lemma 4.4", "Lemma 4.5", "Def 4.5", "Def 4.6", "Def 4.7", "Thm 4.8", "Cor 4.6",
    "§5.1 learner", "§5.1 typo", "Thm 5.1", "Cor 5.2",
]  # fmt: skip

DOTTED = re.compile(r"(?<![\w./])((?:ldp|simulations)(?:\.\w+)+)")
TEST_REF = re.compile(r"(?<![\w/])(tests/[\w/]+\.py)(?:::(\w+))?")
REPO_PATH = re.compile(r"(?<![\w/])((?:ldp|simulations|benchmarks|docs|tests)/[\w/.-]*\w\.(?:py|md))")


@lru_cache(maxsize=1)
def _text() -> str:
    """The doc without fenced code blocks (the appendix script is illustration, not a reference)."""
    return re.sub(r"^```.*?^```", "", DOC.read_text(encoding="utf-8"), flags=re.S | re.M)


def _spans() -> list[str]:
    return re.findall(r"`([^`\n]+)`", _text())


def _dotted_names() -> list[str]:
    return sorted({m.group(1) for span in _spans() for m in DOTTED.finditer(span)})


def _test_refs() -> list[tuple[str, str | None]]:
    return sorted({(m.group(1), m.group(2)) for m in TEST_REF.finditer(_text())}, key=str)


def _resolve(name: str) -> None:
    parts = name.split(".")
    if parts[:3] == ["ldp", "simulations", "labs"] and len(parts) >= 4:
        # ldp.simulations is the folder simulations/ (pyproject's package-dir)
        path = ROOT.joinpath("simulations", "labs", parts[3]).with_suffix(".py")
        assert path.is_file(), f"{name}: no lab file {path.relative_to(ROOT)}"
        return
    for i in range(len(parts), 0, -1):
        module_name = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module_name.startswith(exc.name):
                continue  # this prefix is not a module: try a shorter one
            raise
        break
    else:
        raise AssertionError(f"{name}: no importable module prefix")
    for attr in parts[i:]:
        if hasattr(obj, attr):
            obj = getattr(obj, attr)
        elif dataclasses.is_dataclass(obj) and attr in {f.name for f in dataclasses.fields(obj)}:
            return  # a dataclass field without a default: it exists, but has no class attribute
        else:
            raise AssertionError(f"{name}: {'.'.join(parts[: parts.index(attr)])} has no attribute {attr!r}")


@cache
def _functions(path: str) -> frozenset[str]:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"), filename=path)
    return frozenset(n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def test_the_map_is_not_trivially_empty() -> None:
    assert len(_dotted_names()) >= 100, "parsing found too few dotted names: is the regex broken?"
    assert sum(1 for _, fn in _test_refs() if fn) >= 60, "parsing found too few test references"


@pytest.mark.parametrize("name", _dotted_names())
def test_dotted_name_resolves(name: str) -> None:
    _resolve(name)


def test_test_references_exist() -> None:
    missing = []
    for path, fn in _test_refs():
        if not (ROOT / path).is_file():
            missing.append(f"{path} (no such file)")
        elif fn is not None and fn not in _functions(path):
            missing.append(f"{path}::{fn} (no such function)")
    assert not missing, "docs/theory_map.md cites missing tests:\n" + "\n".join(missing)


def test_repo_paths_exist() -> None:
    missing = sorted({m.group(1) for m in REPO_PATH.finditer(_text()) if not (ROOT / m.group(1)).exists()})
    assert not missing, f"docs/theory_map.md cites missing files: {missing}"


def test_every_klnrs_statement_has_a_row_with_code_and_a_test() -> None:
    rows: dict[str, str] = {}
    for line in _text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells:
            rows.setdefault(cells[0], line)
    problems = []
    for label in REQUIRED_ROWS:
        row = rows.get(label)
        if row is None:
            problems.append(f"{label}: no row")
            continue
        if not any(DOTTED.search(span) for span in re.findall(r"`([^`\n]+)`", row)):
            problems.append(f"{label}: no backticked ldp./simulations. name")
        if not any(fn for _, fn in (m.groups() for m in TEST_REF.finditer(row))):
            problems.append(f"{label}: no tests/…::test reference")
    assert not problems, "\n".join(problems)
