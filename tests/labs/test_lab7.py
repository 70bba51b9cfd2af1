"""Lab 7, "why Chrome memoized" (issue 26, "For teaching"; issue 29, what a lab must be): the same
question every day, with ``l_grr`` (memoized) and with ``kary_rr`` (not), ledger and decoder watched.

What is checked, on what the student reads (the lab's printout and its ``RESULT``), in quick mode:

- with memoization the decoder's accuracy on the last day is within the PRR's bound
  e^ε∞/(e^ε∞ + k − 1), and has reached it; without, it is far above it; the ledgers read exactly
  ε∞ + (T − 1)·2^-30 and 20 (refused from day 21);
- the exercises' measurements agree with their predictions, and the checks fail on a broken
  variant: memoization switched off in the "with" arm (a new PRR for every report, as in
  tests/local/test_memoized_reports.py) is decoded far above the bound, and the lab's own
  exercise check stops it; a naive 1/√D prediction for the memoized mean is rejected; when the
  value changes (exercise 4, churn), a memo shared across the change makes equal reports twice as
  likely for an unchanged value, and the check rejects the no-memo prediction for it;
- the solutions are hidden with ``LDP_SOLUTIONS=0``;
- ``ldp-sim lab 7 --quick``, a real process over gRPC with 2 client processes, prints the
  in-process numbers and saves the figure.

The lab keeps fixed seeds, so every run is the same run; the statistical checks state their
false-alarm rate where they are made (each < 10^-4 for a correct lab, normal approximation).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ldp.core.budget import UNIT_BITS, charge_units
from ldp.core.longitudinal import MEMO_REPEAT_EPSILON
from tests.waits import PROCESS_WAIT_S

REPO = Path(__file__).parents[2]
LAB = REPO / "simulations" / "labs" / "lab7_why_memoize.py"
DAYS, USERS, K, EPS_INF, EPS_1, BUDGET = 30, 3_000, 8, 2.0, 1.0, 20.0  # the lab's quick settings
BOUND = math.exp(EPS_INF) / (math.exp(EPS_INF) + K - 1)
Z = 4.5  # one-sided normal tail beyond 4.5 sd: < 4·10^-6

# Runs the lab cell by cell (what `ldp-sim lab 7` runs), optionally with memoization switched off
# first, then prints its RESULT.
_RUN = """
import json, sys
if sys.argv[2] != "honest":  # memoization off: a new PRR for every report (the PRR keyed by a counter)
    from ldp.core import longitudinal
    real, report = longitudinal.permanent_response, iter(range(1 << 30))
    def per_report(memo, user_ids, values, oracle, question=""):
        if sys.argv[2] == "broken-change" and question != "v":  # only exercise 4's shared memo (question "v")
            return real(memo, user_ids, values, oracle, question)
        return real(memo, user_ids, values, oracle, f"{question}|report {next(report)}")
    longitudinal.permanent_response = per_report
from ldp.simulations.labs.runner import run_lab
ns = run_lab(sys.argv[1])
print("LAB INFO " + json.dumps(ns["RESULT"].to_json()))
"""


def _env(**extra: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LDP_")} | {"MPLBACKEND": "Agg", "COLUMNS": "200"} | extra


def run_lab7(out: Path, solutions: bool = True, broken: bool | str = False) -> subprocess.CompletedProcess[str]:
    env = _env(LDP_QUICK="1", LDP_TRANSPORT="inprocess", LDP_SOLUTIONS="1" if solutions else "0", LDP_LAB_OUT=str(out))
    return subprocess.run(
        [sys.executable, "-c", _RUN, str(LAB), broken if isinstance(broken, str) else "broken" if broken else "honest"], env=env, capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=out
    )


def last_day(text: str) -> dict[str, tuple[float, float]]:
    """Arm → (decoder accuracy, ledger ε) from the lab's "day T, ARM: decoder accuracy …" lines."""
    found = re.findall(rf"^day {DAYS}, (with memoization|without): decoder accuracy ([\d.]+), 95 % interval \[[\d.]+, [\d.]+\] \(PRR bound ([\d.]+)\); ledger ([\d.]+) ε$", text, re.MULTILINE)
    assert len(found) == 2, text[-3000:]
    for _arm, _acc, bound, _ledger in found:
        assert float(bound) == pytest.approx(BOUND, abs=1e-4)
    return {arm: (float(acc), float(ledger)) for arm, acc, _bound, ledger in found}


def within_bound(accuracy: float, bound: float, n: int) -> bool:
    """The decoder is right no more often than the bound allows: a correct lab's accuracy (a
    binomial proportion of n with mean ≤ bound) exceeds bound + 4.5 sd with probability < 10^-5."""
    return accuracy <= bound + Z * math.sqrt(bound * (1 - bound) / n)


def agrees(measured: float, predicted: float, rel: float) -> bool:
    """Exercise 3's check: a RMS error within 4 relative sampling errors of its prediction."""
    return abs(measured / predicted - 1) < 4 * rel


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict, Path]:
    """The lab in quick mode, in process, solutions shown: its printout, its RESULT, its output folder."""
    out = tmp_path_factory.mktemp("lab7")
    proc = run_lab7(out)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    text, _, info = proc.stdout.rpartition("LAB INFO ")
    return text, json.loads(info), out


def test_the_memoized_arm_stays_at_the_bound_and_the_plain_arm_does_not(shown: tuple[str, dict, Path]) -> None:
    text, result, out = shown
    seen = last_day(text)
    memo, plain = seen["with memoization"], seen["without"]
    sd = math.sqrt(BOUND * (1 - BOUND) / USERS)
    assert within_bound(memo[0], BOUND, USERS), memo
    assert memo[0] >= BOUND - Z * sd  # after 30 days the decoder reads the PRR: it reaches the bound
    assert plain[0] > BOUND + Z * sd, plain  # without memoization it is well past it (0.68)
    # the ledgers, as the users' side keeps them
    assert memo[1] == pytest.approx((charge_units(EPS_INF) + (DAYS - 1) * charge_units(MEMO_REPEAT_EPSILON)) / 2**UNIT_BITS, abs=1e-9)
    assert plain[1] == BUDGET
    assert f"without memoization the ledger refuses from day {int(BUDGET / EPS_1) + 1}: {USERS:,} of {USERS:,} users refused" in text
    rows = {row["arm"]: row for row in result["rows"]}
    assert rows["with memoization"]["days answered"] == DAYS and rows["without"]["days answered"] == int(BUDGET / EPS_1)
    figure = out / "lab7" / "lab7_memoization.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and result["files"] == [str(figure)]


def test_the_exercises_measure_what_they_predict(shown: tuple[str, dict, Path]) -> None:
    text, _, _ = shown
    # 1. k = 4 with memoization: the measured accuracy is within (and at) its own bound, not k = 8's
    bound4 = math.exp(EPS_INF) / (math.exp(EPS_INF) + 3)
    measured = float(re.search(rf"measured on day {DAYS}: ([\d.]+), 95 % interval", text).group(1))  # type: ignore[union-attr]
    assert within_bound(measured, bound4, USERS) and measured >= bound4 - Z * math.sqrt(bound4 * (1 - bound4) / USERS)
    assert f"e^2/(e^2 + 3) = {bound4:.4f}" in text and "post-processing of one ε∞-LDP" in text
    # 2. the memoized ledger, exactly, in units; and how long the budget lasts
    units = charge_units(EPS_INF) + (DAYS - 1) * charge_units(MEMO_REPEAT_EPSILON)
    assert f"measured after day {DAYS}: {units:,} units for every memoized user (max {units:,})" in text
    assert f"= {units:,} units" in text and f"{1 + 18 * 2**30:,} days" in text
    # 3. the mean of D days: each arm's RMS error agrees with its prediction ...
    rel = float(re.search(r"RMS over values and cohorts \(± (\d+)% sampling error\)", text).group(1)) / 100  # type: ignore[union-attr]
    arms = re.findall(r"(with memoization|without): one day's sd ([\d.]+); the mean of (\d+) days: predicted ([\d.]+) .*measured ([\d.]+) \(ratio", text)
    assert len(arms) == 2 and 0 < rel < 0.1, text[-3000:]
    got = {arm: (float(one), int(d), float(pred), float(meas)) for arm, one, d, pred, meas in arms}
    for _one, _d, predicted, measured_rms in got.values():
        assert agrees(measured_rms, predicted, rel)
    # ... and the naive prediction for the memoized arm (one day's sd/√D, as if the days were
    # independent) fails the same check: the check can tell them apart
    one, d, predicted, measured_rms = got["with memoization"]
    assert not agrees(measured_rms, one / math.sqrt(d), rel)
    assert predicted > 1.5 * one / math.sqrt(d)  # the PRR's floor
    # 4. when the value changes: each Pr[equal reports | unchanged / changed] within 4.5 binomial sd
    # of its exact prediction (two-sided, 7·10^-6 each) ...
    pairs, changed = re.search(r"([\d,]+) pairs of days, changed ([\d.]+) \(exactly 0\.4375", text).groups()  # type: ignore[union-attr]
    n = {"unchanged": int(pairs.replace(",", "")) * (1 - float(changed)), "changed": int(pairs.replace(",", "")) * float(changed)}
    rows = re.findall(r"^  measured +(fresh kary_rr at ε1|one memo, a PRR per value|each day its own question): ([\d.]+) \(predicted ([\d.]+)\)  ([\d.]+) \(([\d.]+)\)  ([\d.]+) \(predicted ([\d.]+)\)$", text, re.MULTILINE)
    assert len(rows) == 3 and n["changed"] > 30_000, text[-3000:]
    seen4 = {name: tuple(float(x) for x in rest) for name, *rest in rows}

    def close(measured: float, predicted: float, pairs_n: float) -> bool:
        return abs(measured - predicted) <= Z * math.sqrt(predicted * (1 - predicted) / pairs_n)

    for same, same_pred, moved, moved_pred, _acc, _acc_pred in seen4.values():
        assert close(same, same_pred, n["unchanged"]) and close(moved, moved_pred, n["changed"])
    bound2 = math.exp(2 * EPS_1) / (1 + math.exp(2 * EPS_1))
    assert seen4["fresh kary_rr at ε1"][4] <= bound2 and f"e^2ε1/(1 + e^2ε1) = {bound2:.4f}" in text
    # ... the memo's pattern leaks (equal reports far likelier when unchanged), and a broken
    # prediction for it — no memo, a PRR per report (the last row's law) — fails the same check
    memo4, daily4 = seen4["one memo, a PRR per value"], seen4["each day its own question"]
    assert memo4[0] > 1.5 * daily4[1] and memo4[4] > daily4[4] + 0.04
    assert not close(memo4[0], daily4[1], n["unchanged"])
    # the exact loss of (a, a) against (a, b), as tests/core/test_longitudinal.py computes it (2.669)
    assert re.search(r"at k = 16, ε∞ = 1, ε1 = 0\.9 it is 2\.66\d\d,", text), text[-2000:]


def test_memoization_switched_off_is_decoded_past_the_bound_and_the_lab_says_so(tmp_path: Path) -> None:
    """Broken variant: a new PRR for every report in the "with" arm (the ledger still charges as
    if memoized). The last day's decoder accuracy is far above the bound (the check above fails
    on it), and the lab's own check in exercise 1 stops the lab with an AssertionError."""
    proc = run_lab7(tmp_path, broken=True)
    assert proc.returncode != 0 and "AssertionError" in proc.stderr and str(LAB) in proc.stderr, proc.stderr[-3000:]
    accuracy, ledger = last_day(proc.stdout)["with memoization"]
    assert not within_bound(accuracy, BOUND, USERS), accuracy
    assert accuracy > 0.75 and ledger < EPS_INF + 1e-6  # decoded as 30 fresh ε1 reports are (0.80), charged as if memoized


def test_a_memo_not_shared_across_the_change_is_caught_by_exercise_4(tmp_path: Path) -> None:
    """Broken variant of exercise 4 only: its "one memo" arm draws a new PRR for every report. Its
    equal reports are then no likelier than two independent reports make them, and the exercise's
    own check (4.5 sd from the one-memo prediction) stops the lab on that row."""
    proc = run_lab7(tmp_path, broken="broken-change")
    assert proc.returncode != 0 and "AssertionError: ('one memo, a PRR per value'" in proc.stderr, proc.stderr[-3000:]
    assert "measured  one memo, a PRR per value: 0.15" in proc.stdout and "each day its own question:" not in proc.stdout


def test_the_solutions_are_hidden_when_asked(tmp_path: Path, shown: tuple[str, dict, Path]) -> None:
    proc = run_lab7(tmp_path, solutions=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text, _, info = proc.stdout.rpartition("LAB INFO ")
    assert text.count("[exercise]") == 4 and text.count("your turn") == 4
    bound4 = f"{math.exp(EPS_INF) / (math.exp(EPS_INF) + 3):.4f}"
    for answer in (bound4, "post-processing of one ε∞-LDP", f"{1 + 18 * 2**30:,}", "frequency_variance(..., periods=D)", "Pr[equal | unchanged]", "2.6687"):
        assert answer not in text, answer
    assert json.loads(info)["rows"] == shown[1]["rows"]  # the result is the same with solutions hidden


def _table(text: str) -> list[str]:
    """The lab's numbers: its per-day table rows, last-day lines and exercise measurements."""
    return [line.rstrip() for line in text.splitlines() if re.match(r"^\s*\d+ │|^day \d+, |^  measured|^\s+(with memoization|without): one day", line)]


def test_ldp_sim_lab_7_over_grpc_prints_the_in_process_numbers(tmp_path: Path, shown: tuple[str, dict, Path]) -> None:
    """`ldp-sim lab 7 --quick`: a real process, the lab against 2 client processes on loopback,
    bit-identical to the in-process run (same seeds, same coins), its figure saved."""
    proc = subprocess.run(
        [sys.executable, "-m", "ldp.cli.main", "lab", "7", "--quick", "--processes", "2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=PROCESS_WAIT_S, env=_env(), cwd=tmp_path,
    )
    assert "there is no lab 7" not in proc.stderr, 'lab 7 has no entry point: pyproject.toml needs lab7 = "ldp.simulations.labs.experiments:LAB7" (then reinstall)'
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Lab 7 (ldp.simulations.labs.lab7_why_memoize), 2 client process(es) over gRPC, quick sizes, solutions shown" in proc.stdout
    figure = tmp_path / "lab7" / "lab7_memoization.png"
    assert f"figure saved: {figure}" in proc.stdout and figure.exists()
    assert _table(proc.stdout) == _table(shown[0]) and len(_table(shown[0])) >= 12
