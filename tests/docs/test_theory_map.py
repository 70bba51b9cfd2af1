"""docs/theory_map.md cannot silently rot.

Every backticked dotted name ``ldp.…`` (``ldp.simulations.…`` included) must import (longest module prefix)
and resolve (attribute chain); every ``tests/….py::test_name`` must name an existing file that
defines that function; every repo path it cites must exist; and every KLNRS statement the map
promises has a row naming code and a test. Every numbered result of the four other seeds (BNS,
KMMS, CHS, HRS) is named by a row of the "Other seeds" table that is built, a lower bound shown by
experiment, or "not built: why", and the counts the map states are the ones it has. Lab modules run their lab on import, so for
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


# --- Completeness for the four other seeds (issue 30) ---------------------------------------------
# Every numbered result of each paper, found by grepping the seed texts in /work/shared/seeds for
# Definition/Theorem/Lemma/Claim/Corollary/Proposition/Observation/Remark/Example headers and for the
# figures that are algorithms (BNS Figs 1–4 and 7 are illustrations; 6 and 10 are never referenced;
# KMMS's two algorithm boxes are unnumbered). Each must be named in the "result" cell of a row of the
# "Other seeds" table, and every row there must be built (code and a test), a lower bound shown by
# experiment, or "not built: why".
SEED_RESULTS: dict[str, str] = {
    "BNS": (
        "Def 2.1, 2.2, 2.6, 2.7, 2.8, 2.9, 2.10, 2.11, 2.15, 2.16, 2.17, 2.22, 2.23, 3.1, 3.4, 3.6, 3.7, 3.20,"
        " 4.1, 4.2, 4.14, 6.1; Thm 2.3, 2.4, 2.5, 2.12, 2.13, 2.14, 2.19, 2.20, 2.21, 2.24, 3.15, 3.18, 3.21,"
        " 3.22, 4.6, 4.7, 4.13, 4.16, 5.5, 5.9, 5.10, 6.2; Prop 2.25, 2.26; Lemma 3.2, 3.12, 3.14, 4.4, 4.5,"
        " 4.8, 4.12, 4.15, 5.1, 5.3, 5.4, 5.7; Claim 3.13, 4.9, 4.10, 4.11, 5.2; Obs 3.10, 3.11;"
        " Remark 2.18, 3.3, 3.5, 3.9, 3.16, 3.17, 3.19, 5.6, 5.8; Example 3.8, 4.3, 6.3; Fig 5, 8, 9, 11, 12, 13"
    ),
    "KMMS": (
        "Def 1.1, 2.1; Thm 1.2, 1.3, 1.4, 2.4, 3.2, 3.5, 4.7, 5.1; Remark 1.5, 4.2; Obs 2.2, 4.1, 4.4;"
        " Example 2.3, 3.3; Prop 2.5; Claim 3.1, 3.4, 4.3, 4.5; Lemma 4.6"
    ),
    "CHS": "Alg 1; Prop 1; Thm 1, 2, 3; Remark 1; Cor 1, 2",
    "HRS": (
        "Def 2.1, 3.1, 3.2, 3.3, 3.5, 3.6, 3.8, 5.2, 5.6; Remark 3.4, 3.7, 3.10; Thm 1.1, 1.2, 1.4, 1.5, 1.6,"
        " 3.9, 4.10, 5.1, 5.10, 6.1, 6.2, 6.3, 6.4; Cor 1.3, 5.5; Lemma 4.1, 4.2, 4.3, 4.4, 4.5, 4.7, 4.8, 5.3,"
        " 5.7, 5.8, 5.9; Claim 4.6, 4.9, 5.4; Fig 1, 2"
    ),
}
PAPERS = ("BNS", "KMMS", "CHS", "HRS", "KLNRS")
KINDS = {  # spelling in the map -> canonical kind
    "definition": "Def", "def": "Def", "theorem": "Thm", "thm": "Thm", "lemma": "Lemma", "claim": "Claim",
    "corollary": "Cor", "corollarie": "Cor", "cor": "Cor", "proposition": "Prop", "prop": "Prop",
    "observation": "Obs", "obs": "Obs", "remark": "Remark", "figure": "Fig", "fig": "Fig",
    "algorithm": "Alg", "alg": "Alg", "example": "Example", "ex": "Example",
}  # fmt: skip
_NUM = r"\d+(?:\.\d+)?"
LABEL = re.compile(
    rf"(?:\b(?P<paper>{'|'.join(PAPERS)}) )?\b(?P<kind>{'|'.join(sorted(KINDS, key=len, reverse=True))})s?\b\.? ?"
    rf"(?P<nums>{_NUM}(?:\s*(?:/|,|–|and)\s*{_NUM}(?![\w(]))*)",
    flags=re.I,
)
COUNTS = re.compile(
    r"\*\*(?P<paper>\w+)\*\*: (?P<found>\d+) numbered results: (?P<built>\d+) built, "
    r"(?P<experiment>\d+) lower bounds? shown by experiment, (?P<not_built>\d+) not built"
)


def _expected(paper: str) -> set[tuple[str, str]]:
    out = set()
    for group in SEED_RESULTS[paper].split(";"):
        kind, nums = group.strip().split(" ", 1)
        out |= {(kind, n.strip()) for n in nums.split(",")}
    return out


def _expand(nums: str) -> list[str]:
    """'4.4–4.5' -> 4.4, 4.5; '2/3' -> 2, 3; '4.10, 5.10' -> both (ranges only within one section)."""
    out: list[str] = []
    for part in re.split(r"\s*(?:/|,|and)\s*", nums):
        lo, _, hi = part.partition("–")
        if hi and lo.rsplit(".", 1)[:-1] == hi.rsplit(".", 1)[:-1]:
            head = lo.rsplit(".", 1)[0] + "." if "." in lo else ""
            a, b = int(lo.rsplit(".", 1)[-1]), int(hi.rsplit(".", 1)[-1])
            out += [f"{head}{i}" for i in range(a, b + 1)]
        else:
            out += [x for x in (lo, hi) if x]
    return out


def _other_seed_rows(text: str) -> list[list[str]]:
    section = text.split("## Other seeds", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            if cells[0] != "seed":
                rows.append(cells)
    return rows


def _row_kind(cells: list[str]) -> str | None:
    row = " | ".join(cells)
    if "not built" in row.lower():
        return "not_built"
    if re.search(r"lower bounds? shown by experiment", row, flags=re.I):
        return "experiment"
    code = any(DOTTED.search(s) for s in re.findall(r"`([^`\n]+)`", row))
    test = any(fn for _, fn in (m.groups() for m in TEST_REF.finditer(row)))
    return "built" if code and test else None


def _coverage(text: str) -> tuple[dict[str, dict[tuple[str, str], str]], list[str]]:
    """Per paper: label -> best status over the rows naming it (experiment > built > not built)."""
    rank = {"not_built": 0, "built": 1, "experiment": 2}
    found: dict[str, dict[tuple[str, str], str]] = {p: {} for p in SEED_RESULTS}
    problems = []
    for cells in _other_seed_rows(text):
        kind = _row_kind(cells)
        if kind is None:
            problems.append(f"row {cells[0]!r} / {cells[1][:60]!r}: neither built (code and test), "
                            "a lower bound shown by experiment, nor 'not built: why'")  # fmt: skip
            continue
        row_paper = cells[0].split()[0]
        for m in LABEL.finditer(cells[1]):
            paper = (m.group("paper") or row_paper).upper()
            if paper not in found:
                continue
            for num in _expand(m.group("nums")):
                key = (KINDS[m.group("kind").lower()], num)
                if rank[kind] >= rank.get(found[paper].get(key, ""), -1):
                    found[paper][key] = kind
    for paper in SEED_RESULTS:
        missing = sorted(_expected(paper) - set(found[paper]))
        problems += [f"{paper} {k} {n}: no row of the Other seeds table names it" for k, n in missing]
    return found, problems


def test_every_numbered_result_of_the_other_seeds_has_a_row_of_one_of_three_kinds() -> None:
    _, problems = _coverage(_text())
    assert not problems, "\n".join(problems)


def test_the_completeness_statement_states_the_counts_the_map_has() -> None:
    found, _ = _coverage(_text())
    stated = {m.group("paper"): m for m in COUNTS.finditer(_text())}
    assert set(stated) == set(SEED_RESULTS), f"counts stated for {sorted(stated)}"
    for paper, m in stated.items():
        status = [found[paper].get(label) for label in _expected(paper)]
        actual = {
            "found": len(status),
            "built": status.count("built"),
            "experiment": status.count("experiment"),
            "not_built": status.count("not_built"),
        }
        assert {k: int(m.group(k)) for k in actual} == actual, f"{paper}: the map has {actual}"


def test_completeness_check_catches_a_removed_row_and_an_unclassified_row() -> None:
    """Broken variants: the map with one row dropped, or with one row's 'not built' reason dropped."""
    text = _text()
    lmm_row = next(line for line in text.splitlines() if line.startswith("| CHS (Large Margin) |"))
    _, problems = _coverage(text.replace(lmm_row + "\n", ""))
    assert "CHS Alg 1: no row of the Other seeds table names it" in problems
    vc_row = next(line for line in text.splitlines() if "Def 2.9, Def 2.10, Def 2.11" in line)
    _, problems = _coverage(text.replace(vc_row, vc_row.replace("not built: ", "")))
    assert any(p.startswith("row 'BNS' / 'VC theory") for p in problems), problems
    assert any("BNS Def 2.9" in p for p in problems)
    assert _expand("4.4–4.5") == ["4.4", "4.5"] and _expand("2/3") == ["2", "3"]
    assert _expand("1.6/6.3–6.4") == ["1.6", "6.3", "6.4"] and _expand("4.10, 5.10") == ["4.10", "5.10"]
