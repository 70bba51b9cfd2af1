"""`benchmarks/separation_cell.py` (one cell of the separation sweep through the protocol) as a real
process: its result is the sweep's own evaluation of that size (``evaluate_cell``), bit for bit,
over every trial, and with ``--law`` the sweep's evaluation at the cell's sufficient statistic.

Deterministic (seeded trials). The size is chosen to fail early in the trials, so a command that
stopped early, as the sweep's search does, would report fewer trials: the comparison catches it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ldp.core.errors import ParameterError
from ldp.simulations import separation
from tests.waits import PROCESS_WAIT_S

ROOT = Path(__file__).resolve().parents[1]
TRIALS = 6


def test_the_command_prints_the_sweeps_own_evaluation_over_every_trial(tmp_path: Path) -> None:
    out = tmp_path / "cell.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "separation_cell.py"), "--learner", "LNI", "--d", "8", "--factor", "0.25",
               "--trials", str(TRIALS), "--processes", "1", "--law", "--json", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    assert printed == json.loads(out.read_text())
    config = separation.Config(seed=0, trials=TRIALS)
    plan = separation.LEARNERS["LNI"].plan
    assert plan is not None
    users = int(plan(config, 8) * 0.25)
    expected = asyncio.run(separation.evaluate_cell(config, separation.in_process_oracle, "LNI", 8, users))  # in process: transport-invariant
    for key in ("users", "trials", "successes", "ok", "mean_error"):
        assert printed[key] == expected[key], key
    assert printed["trials"] == TRIALS and not printed["ok"]
    assert printed["successes"] <= TRIALS - 2  # ≥ 2 failures: an early stop (none allowed at 6 trials) reads fewer
    # --law: the same cell at its sufficient statistic, as the sweep evaluates it past protocol_users_max
    at_law = asyncio.run(separation.evaluate_cell(config, separation.in_process_oracle, "LNI", 8, users, law=True))
    assert printed["law"] == json.loads(json.dumps(at_law)) and printed["law"]["trials"] == TRIALS
    assert printed["law"]["mean_error"] != printed["mean_error"]  # drawn from the law, not the protocol again


def test_an_unknown_learner_is_refused_in_one_line() -> None:
    with pytest.raises(ParameterError, match="unknown learner 'nobody'"):
        asyncio.run(separation.evaluate_cell(separation.Config(trials=2), separation.in_process_oracle, "nobody", 8, 10))
    with pytest.raises(ParameterError, match="LI has no twin at its sufficient statistic; those that do: \\['LNI', 'LNI-shared'\\]"):
        asyncio.run(separation.evaluate_cell(separation.Config(trials=2), separation.in_process_oracle, "LI", 8, 10, law=True))
