"""`make demo` (``python -m ldp.simulations.demo``) saves every table it prints, where it says.

The demo runs as a real process with ``--out`` in a temporary folder. Its separation is shrunk
(MASKED-PARITY at d = 4 with the interactive learner, one central baseline: a few seconds instead
of the quick sweep's minutes) by replacing ``separation.quick_config`` before ``demo.main`` runs;
everything the demo itself does, printing and saving, is unchanged. For each table printed, the
markdown file saved holds its title and exactly its rows, cell for cell, and the CSV and JSON
have one record per row. The check is shown to fail on the demo as it was (the randomized
response table printed, not saved).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waits import PROCESS_WAIT_S

_TINY_DEMO = """
import dataclasses, sys
from ldp.simulations import demo, separation

quick = separation.quick_config

def tiny(seed=0, out=None):
    return dataclasses.replace(quick(seed, out), masked_d=(4,), central_parity_d=(8,), occam_d=(4,), local_parity_d=(4,),
                               learners=("LI", "central-occam"), curve_users=(1_000, 2_000), curve_trials=2, curve_d=4,
                               point_bits=(8,), point_trials=10)

separation.quick_config = tiny
sys.exit(demo.main(sys.argv[1:]))
"""

RR_TITLE = "Randomized response: debiased estimates"
SUMMARY_TITLE = "Users needed: error ≤ 0.1"


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """(stdout, --out folder) of one demo run."""
    out = tmp_path_factory.mktemp("demo") / "results-demo"
    proc = subprocess.run([sys.executable, "-c", _TINY_DEMO, "--out", str(out)], capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout, out


def _md_rows(text: str) -> list[list[str]]:
    """The data rows of the markdown table in ``text`` (header and rule skipped), as cells."""
    rows = [line for line in text.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in rows[2:]]


def _printed_rows(stdout: str, title: str) -> list[str]:
    """The lines of the printed table whose title line contains ``title``: from its header's rule
    (a line of ━ or ─) to the table's end (a closing └ line or a blank line)."""
    lines = stdout.splitlines()
    start = next(k for k, line in enumerate(lines) if title in line)
    rule = next(k for k in range(start, len(lines)) if set(lines[k].strip()) <= set("┡━╇┩─ ") and lines[k].strip())
    rows = []
    for line in lines[rule + 1 :]:
        if not line.strip() or line.lstrip().startswith("└"):
            break
        rows.append(line)
    return rows


def unsaved(stdout: str, md: Path, title: str, csv_path: Path, json_path: Path) -> list[str]:
    """What of the printed table titled ``title`` is not saved in ``md``, ``csv_path`` and ``json_path``."""
    printed = _printed_rows(stdout, title)
    if not md.is_file():
        return [f"{title!r} is printed but {md} was not written"]
    text = md.read_text(encoding="utf-8")
    problems = [] if text.startswith(f"# {title}") else [f"{md} does not start with the title {title!r}"]
    saved = _md_rows(text)
    if len(saved) != len(printed):
        problems.append(f"{md}: {len(saved)} rows saved, {len(printed)} printed")
    for cells, line in zip(saved, printed):
        at = 0
        for cell in filter(None, cells):  # each saved cell on the printed line, in order
            at = line.find(cell, at)
            if at < 0:
                problems.append(f"{md}: the saved row {cells} is not the printed {line.strip()!r}")
                break
            at += len(cell)
    for path, count in ((csv_path, lambda p: len(list(csv.DictReader(p.open(encoding="utf-8"))))), (json_path, lambda p: len(json.loads(p.read_text(encoding="utf-8"))["rows"]))):
        if not path.is_file():
            problems.append(f"{path} was not written")
        elif count(path) != len(printed):
            problems.append(f"{path}: {count(path)} records for {len(printed)} printed rows")
    return problems


def _tables(out: Path) -> dict[str, tuple[Path, Path, Path]]:
    rr, sep = out / "randomized_response", out / "separation"
    return {
        RR_TITLE: (rr / "table.md", rr / "estimates.csv", rr / "result.json"),
        SUMMARY_TITLE: (sep / "demo_summary.md", sep / "demo_summary.csv", sep / "demo_summary.json"),
    }


def test_the_demo_saves_every_table_it_prints(demo_run: tuple[str, Path]) -> None:
    stdout, out = demo_run
    for title, (md, csv_path, json_path) in _tables(out).items():
        assert unsaved(stdout, md, title, csv_path, json_path) == [], title
    assert len(_printed_rows(stdout, RR_TITLE)) == 4  # one row per ε
    saved = [Path(p) for line in stdout.splitlines() if line.startswith("saved: ") for p in line[len("saved: ") :].split()]
    assert saved and all(p.is_file() and p.is_relative_to(out) for p in saved), saved
    assert {p.name for p in saved} >= {"table.md", "estimates.csv", "result.json", "estimates.png", "demo_summary.md"}
    assert (out / "separation" / "table.md").is_file() and (out / "separation" / "separation.png").is_file()


def test_the_check_finds_a_table_printed_but_not_saved(demo_run: tuple[str, Path], tmp_path: Path) -> None:
    """The demo as it was: the randomized-response table printed, nothing written for it; and a
    saved table that lost a row."""
    stdout, out = demo_run
    md, csv_path, json_path = _tables(out)[RR_TITLE]
    assert unsaved(stdout, tmp_path / "table.md", RR_TITLE, tmp_path / "estimates.csv", tmp_path / "result.json") == [
        f"{RR_TITLE!r} is printed but {tmp_path / 'table.md'} was not written"
    ]
    short = tmp_path / "short.md"
    short.write_text("\n".join(md.read_text(encoding="utf-8").splitlines()[:-1]) + "\n", encoding="utf-8")
    assert unsaved(stdout, short, RR_TITLE, csv_path, json_path) == [f"{short}: 3 rows saved, 4 printed"]


def test_the_demo_refuses_an_unknown_flag_in_one_line() -> None:
    proc = subprocess.run([sys.executable, "-m", "ldp.simulations.demo", "--bogus"], capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 2 and "unrecognized arguments: --bogus" in proc.stderr and "Traceback" not in proc.stderr
