"""benchmarks/reply_parts.py (issue 27) as a process: ``--quick`` writes its table, CSV and plot
(a bad ``--reps``: tests/test_scaling_projection.py, for both benchmarks). No timing is
asserted: the measured costs are whatever the machine gives."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

from tests.waits import PROCESS_WAIT_S

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "reply_parts.py"
FIELDS = ["n", "processes", "part_bytes", "wall_s", "wall_vs_one_part", "aggregator_ns_per_user", "clients_ns_per_user", "rounds", "reps"]


def test_quick_run_as_a_process(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--reps", "3", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=ROOT, check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    md = (tmp_path / "reply_parts.md").read_text(encoding="utf-8")
    assert md.startswith("Grid: N ∈ {3e+05}, P ∈ {1}, median of 3 interleaved repetitions") and "| one part |" in md
    with (tmp_path / "reply_parts.csv").open(encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == FIELDS
        rows = list(reader)
    assert [int(r["part_bytes"]) for r in rows] == [1 << 16, 1 << 18, 64 << 20]
    assert all(int(r["n"]) == 3 * 10**5 and int(r["processes"]) == 1 and int(r["reps"]) == 3 for r in rows)  # the grid, not the timings
    assert (tmp_path / "reply_parts.png").stat().st_size > 10_000

