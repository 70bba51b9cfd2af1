"""benchmarks/peers_longitudinal.py (issue 26 against the peers): the table, and its MSE ÷ theory check.

The process test runs the script's smallest grid (``--quick``: k = 16, ε = 4, n = 20 000, d = 2,
T ∈ {1, 10}, 20 seeded repetitions) exactly as documented in docs/benchmarks.md, with the peers
in .venv-peers; it is skipped where that venv is missing (``make bench-peers`` builds it; CI has
none). It checks the CSV's columns, that every table has ldp and peer rows, and that each of ldp's
unbiased (MI) cells has MSE ÷ theory within its CI of 1: ``within_ci``, |r − 1| ≤ 4 standard
errors (the larger of the measured and the Gaussian model's). A correct estimator fails one cell
with probability ≈ 1e-4 (normal approximation of a mean of 20 repetitions), so the 15 cells
give a false-alarm rate ≈ 0.2 %; the seeds are fixed, so a pass is reproducible.

The broken variant (no peers needed): the longitudinal estimator with the first round's (p1, q1)
in place of the composite (p_s, q_s) — the IRR forgotten, a wrong q — is measured on the same
seeded cell and ``within_ci`` rejects it, while the correct estimator on the same reports passes.
"""

from __future__ import annotations

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "peers_longitudinal.py"
PEERS_PY = ROOT / ".venv-peers" / "bin" / "python"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("peers_longitudinal", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not PEERS_PY.exists(), reason=".venv-peers is missing: `make bench-peers` builds the peers' venv (numpy < 2); CI has none")
def test_quick_grid_as_a_process(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--reps", "20", "--budget", "0.5", "--peer-budget", "0.5", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ldp ÷ faster peer" in out.stdout
    assert (tmp_path / "peers_longitudinal.png").stat().st_size > 10_000
    assert (tmp_path / "peers_longitudinal.md").read_text(encoding="utf-8").startswith("| table | protocol |")
    with (tmp_path / "peers_longitudinal.csv").open(encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == _script().FIELDS
        rows = list(reader)
    sides = {(r["table"], r["side"]) for r in rows}
    assert sides == {("long", "ldp"), ("long", "multi-freq-ldpy"), ("mdim", "ldp"), ("mdim", "multi-freq-ldpy"), ("est", "ldp"), ("est", "multi-freq-ldpy"), ("est", "pure-LDP")}
    within_ci = _script().within_ci
    checked = 0
    for r in rows:
        assert float(r["users_per_s"]) > 0 and int(r["reps"]) == 20, r
        if r["side"] == "ldp" and r["estimator"].startswith("mi"):
            cell = {"mse_over_theory": float(r["mse_over_theory"]), "se": float(r["se"]), "se_model": float(r["se_model"])}
            assert within_ci(cell), r
            checked += 1
    assert checked == 5 * 2 + 4 + 1  # longitudinal (5 protocols × T ∈ {1, 10}), multidimensional (4), GRR's MI


def test_wrong_q_is_caught() -> None:
    from ldp.core.longitudinal import estimate_frequencies, support_counts

    script = _script()

    def first_round_only(reports: np.ndarray, oracle: Any) -> np.ndarray:  # broken: the IRR's second round forgotten
        p1, q1 = (float(x) for x in oracle.first_round())
        return (support_counts(reports, oracle) / len(reports) - q1) / (p1 - q1)

    cell: dict[str, Any] = dict(protocol="l_oue", k=16, eps=4.0, n=20_000, periods=1, reps=20, budget_s=60.0)
    good = script.ldp_longitudinal(**cell, estimator=estimate_frequencies)
    broken = script.ldp_longitudinal(**cell, estimator=first_round_only)
    assert script.within_ci(good), good
    assert not script.within_ci(broken), broken
    assert broken["mse_over_theory"] > 10


def test_a_peer_that_fails_is_shown_as_failed_and_the_run_goes_on(tmp_path: Path) -> None:
    """A peer whose own code raises on a cell (multi-freq-ldpy's RS+FD[OUE-z] aggregator divides by
    the sum of its estimates, 0 at k = 2 on its 50-user warm-up: ``--full`` stopped there) is that
    cell's result: ``peer_cell`` returns the error, the table shows it in place of the peer's rate
    and no ratio, and every other cell is paired as before."""
    script = _script()

    def boom(job: dict[str, Any]) -> dict[str, Any]:
        raise ZeroDivisionError("division by zero")

    script.peer_worker = boom
    assert script.peer_cell({"table": "mdim"}) == {"error": "ZeroDivisionError: division by zero"}
    job = dict(table="mdim", protocol="RS+FD[OUE-z]′", oracle="oue-z", d=2, k=2, eps=1.0, n=100_000, reps=10, budget_s=1.0)
    rows = script.peer_rows([job], [{"error": "ZeroDivisionError: division by zero"}])
    assert len(rows) == 1 and "users_per_s" not in rows[0] and rows[0]["note"] == "the peer failed: ZeroDivisionError: division by zero"
    ldp = dict(table="mdim", protocol="RS+FD[OUE-z]′", estimator="mi/oue-z", k=2, d=2, eps=1.0, eps_1="", periods=1, n=100_000, side="ldp", users_per_s=1e6, n_run=100_000, mse_over_theory=1.0, se=0.01, note="")
    (line,) = script.paired([ldp, *rows])
    assert line["ratio"] != line["ratio"]  # NaN: no peer rate to divide by
    script.write_markdown([ldp, *rows], tmp_path / "t.md")
    text = (tmp_path / "t.md").read_text(encoding="utf-8")
    assert "the peer failed: ZeroDivisionError" in text and "| — |" in text
    script.write_csv([ldp, *rows], tmp_path / "t.csv")
    script.plot([ldp, *rows], tmp_path / "t.png")
