"""The project points at nothing outside itself: a clone has no ../shared, no seeds/ folder."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r"\.\./shared|shared/(DESIGN|reference|seeds)|seeds/00\d_|DESIGN\.md")


def _files() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for folder in ("ldp", "simulations", "benchmarks"):
        found += sorted((ROOT / folder).rglob("*.py"))
    return found


def test_docs_and_code_reference_only_files_in_the_repo() -> None:
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in _files() for n, line in enumerate(p.read_text().splitlines(), 1) if OUTSIDE.search(line)]
    assert not hits, "references outside the repository:\n" + "\n".join(hits)


def test_the_check_finds_such_a_reference() -> None:
    assert OUTSIDE.search("see `../shared/DESIGN.md` §3") and OUTSIDE.search("KLNRS (seeds/004_50f1.txt)")
