"""The labs' exercises measure something and their texts say true things (issue 29, "The labs").

Each test runs one lab in quick mode, in process, through the cell-by-cell runner that
``ldp-sim lab N`` uses (so the narrative is printed too), and reads what a student would read.
Seeded: every lab keeps fixed seeds, so each run is the same run. Each check was run against the
labs as they were before issue 29 and fails there (noted per test).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ldp.core.audit import clopper_pearson
from tests.waits import PROCESS_WAIT_S

REPO = Path(__file__).parents[2]
LAB_DIR = REPO / "simulations" / "labs"
QUICK_ENV = {"LDP_QUICK": "1", "LDP_TRANSPORT": "inprocess", "MPLBACKEND": "Agg"}

# Runs a lab cell by cell (its markdown printed), then prints its RESULT and, per figure, whether
# it draws error bars (matplotlib's ErrorbarContainer).
_RUN = """
import json, sys
import matplotlib.pyplot as plt
from matplotlib.container import ErrorbarContainer
from ldp.simulations.labs.runner import run_lab
ns = run_lab(sys.argv[1])
bars = [any(isinstance(c, ErrorbarContainer) for ax in plt.figure(n).axes for c in ax.containers) for n in plt.get_fignums()]
print("LAB INFO " + json.dumps({"result": ns["RESULT"].to_json(), "errorbars": bars}))
"""


def run_lab(stem: str, tmp_path: Path, solutions: bool = True) -> tuple[str, dict]:
    """The lab's printed text (narrative and outputs) and its result and figures' error bars."""
    env = dict(os.environ, **QUICK_ENV, LDP_SOLUTIONS="1" if solutions else "0", LDP_LAB_OUT=str(tmp_path), COLUMNS="200")
    proc = subprocess.run([sys.executable, "-c", _RUN, str(LAB_DIR / f"{stem}.py")], env=env, capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    text, _, info = proc.stdout.rpartition("LAB INFO ")
    return text, json.loads(info)


# --- lab 1 ------------------------------------------------------------------------------------------


def rr_sd(eps: float, n: int) -> float:
    """sd of the debiased binary randomized response mean: sqrt(pq/n)/(p − q), p = e^ε/(e^ε + 1)."""
    p = 1 / (1 + math.exp(-eps))
    return math.sqrt(p * (1 - p) / n) / (2 * p - 1)


def stated_small_eps_coefficient(source: str) -> float:
    """c in the lab's "the sd grows like c/(ε·sqrt(n))"."""
    found = re.search(r"grows like (\d*\.?\d*)/\(ε·sqrt\(n\)\)", source)
    assert found, "lab 1 states its small-ε rule as c/(ε·sqrt(n))"
    return float(found.group(1))


def test_lab1_states_the_small_epsilon_rule_its_own_prediction_gives():
    """The rule must give the lab's predicted sd at ε = 0.25, n = 10^4 (0.0399) within 1 %
    (p = 1/2 + ε/4 + O(ε³): pq → 1/4, p − q → ε/2, so sd → 1/(ε√n)). Fails on the old text,
    which said 2/(ε·sqrt(n)): 0.08, twice the prediction."""
    def rule_matches(c: float) -> bool:
        return abs(c / (0.25 * math.sqrt(10_000)) / rr_sd(0.25, 10_000) - 1) < 0.01

    assert rule_matches(stated_small_eps_coefficient((LAB_DIR / "lab1_randomized_response.py").read_text(encoding="utf-8")))
    assert not rule_matches(stated_small_eps_coefficient("the sd grows like 2/(ε·sqrt(n))"))  # the old text


def test_lab1_prints_sentences_not_reprs_and_explains_why_not_64(tmp_path):
    """No dataclass repr (the old lab printed ``ExactAudit(epsilon=1.0, …)``); the solution gives
    the exact variance factor e^ε/(e^ε − 1)² at both ε, whose ratio is the 87.9 it reports, and
    says why it is not 64 (the old solution only said "quadratic in 1/ε")."""
    text, _ = run_lab("lab1_randomized_response", tmp_path)
    assert not re.search(r"\b[A-Z]\w+\(\w+=", text), "a dataclass repr is printed"
    assert "largest privacy loss ln p(w|u)/p(w|u′) = 1.0000" in text
    factors = {float(e): float(v) for e, v in re.findall(r"ε = ([\d.]+): e\^ε/\(e\^ε − 1\)² = ([\d.]+)", text)}
    assert set(factors) == {0.25, 2.0}, text[-2000:]
    for eps, value in factors.items():
        assert value == pytest.approx(math.exp(eps) / math.expm1(eps) ** 2, abs=1e-4)
    ratio = float(re.search(r"n\(ε=0\.25\) / n\(ε=2\) = \S+ = ([\d.]+), not \(2/0\.25\)² = 64", text).group(1))
    assert ratio == pytest.approx(factors[0.25] / factors[2.0], abs=0.05)
    assert "2/(ε" not in text


# --- lab 3 ------------------------------------------------------------------------------------------


def slope_check(ns: list[int], sds: list[float], groups: int) -> tuple[float, float, bool]:
    """From measured sds of answers over ``groups`` groups per n: d log n / d log τ = 1/s (s the
    least-squares slope of log sd on log n), the standard error of s (each log sd has sampling sd
    1/sqrt(2(R − 1))), and whether s is within 3 of them of the theory's −1/2, i.e. 1/s = −2
    (false alarm for a correct simulation ≈ 0.3 %)."""
    x = np.log(ns)
    s = float(np.polyfit(x, np.log(sds), 1)[0])
    se_s = (1 / math.sqrt(2 * (groups - 1))) / math.sqrt(float(np.sum((x - x.mean()) ** 2)))
    return (1 / s if s else math.inf), se_s, abs(s + 0.5) < 3 * se_s


def test_lab3_measures_the_slope_from_simulated_answers(tmp_path):
    """The slope is fitted to sds measured from simulated local answers (the old exercise fitted
    ``users_per_query``, a formula, and printed "−2.00" by construction: its output has no
    measured sds, and this test fails on it). The printed slope must be the fit of the printed
    sds and agree with −2 within its stated tolerance; a broken simulation that reuses the same
    users for every group of a size (so its answers' sd does not shrink with n) is caught."""
    text, _ = run_lab("lab3_sq_and_local", tmp_path)
    found = re.search(r"R = (\d+) groups per n; sd of the answers: (.*)", text)
    assert found, text[-2000:]
    groups = int(found.group(1))
    pairs = re.findall(r"n = ([\d,]+): ([\d.]+)", found.group(2))
    ns, sds = [int(n.replace(",", "")) for n, _ in pairs], [float(sd) for _, sd in pairs]
    assert len(ns) >= 3 and ns[-1] / ns[0] >= 16
    printed = float(re.search(r"so d log n / d log τ = (-?[\d.]+) ± ([\d.]+)", text.replace("−", "-")).group(1))
    measured, se, ok = slope_check(ns, sds, groups)
    assert printed == pytest.approx(measured, abs=0.02)
    assert ok, (measured, se)
    # broken variants: answers that do not average over n fresh users (the same sd at every n),
    # and a wrong normalisation (sd ∝ 1/n)
    assert not slope_check(ns, [sds[0]] * len(ns), groups)[2]
    assert not slope_check(ns, [sds[0] * (ns[0] / n) for n in ns], groups)[2]


# --- lab 4 ------------------------------------------------------------------------------------------


def test_lab4_labels_its_numbers_and_shows_trials_and_error_bars(tmp_path):
    """Every measured row says what it is, how many trials, and its exact 95 % Clopper–Pearson
    interval (recomputed here); the figure draws error bars; the result table has the trials and
    the interval. Fails on the old lab, which printed ``n=4,000: 0.50 (0.49), err 0.162``."""
    text, info = run_lab("lab4_interaction_helps", tmp_path)
    header = re.search(r"T = (\d+) seeded trials per learner and size", text)
    assert header, text[:3000]
    trials = int(header.group(1))
    assert re.search(r"learner\s+users n\s+exact target \(won/T\)\s+95 % interval\s+predicted\s+mean true error", text)
    rows = re.findall(r"(interactive|one-round)\s+([\d,]+)\s+(\d+)/(\d+) = ([\d.]+)\s+\[([\d.]+), ([\d.]+)\]", text)
    assert len(rows) >= 6, text[:3000]
    for _learner, _n, won, t, _rate, lo, hi in rows:
        assert int(t) == trials
        expected = clopper_pearson(int(won), trials)
        assert (float(lo), float(hi)) == pytest.approx(expected, abs=0.006)
    assert not re.search(r"n=[\d,]+: [\d.]+ \(", text), "an unlabelled number"
    assert info["errorbars"] and info["errorbars"][0], "the success figure has error bars"
    result = info["result"]
    assert {"trials", "95 % interval"} <= set(result["columns"]), result["columns"]


# --- lab 6 ------------------------------------------------------------------------------------------

FORMULA = re.compile(r"p\s*\(\s*1\s*[−-]\s*q\s*\)\s*/\s*\(\s*q\s*\(\s*1\s*[−-]\s*p")


def test_lab6_does_not_give_its_answer_away(tmp_path):
    """With solutions hidden, nothing before or in the exercises says VIOLATION, gives the buggy
    randomizer's exact loss or its formula; with solutions shown, the solution does, after the
    exercise. Fails on the old lab (``buggy: … VIOLATION`` in section 1, the formula in the text)."""
    from math import exp, log

    q = 1 / (exp(1.0) + 1)
    answer = f"{log(0.6 * (1 - q) / (q * 0.4)):.4f}"  # the buggy randomizer's true ε, 1.4055
    hidden, info = run_lab("lab6_find_the_bug", tmp_path, solutions=False)
    assert "VIOLATION" not in hidden and answer not in hidden and not FORMULA.search(hidden), hidden
    assert answer not in json.dumps(info["result"])  # the result table is printed with solutions hidden too
    shown, _ = run_lab("lab6_find_the_bug", tmp_path, solutions=True)
    first_exercise = shown.index("[exercise]")
    assert "VIOLATION" not in shown[:first_exercise] and answer not in shown[:first_exercise]
    solution = shown[first_exercise:]
    assert "VIOLATION" in solution and answer in solution and FORMULA.search(solution), solution


# --- ldp-sim lab --help and the README's notebook command -------------------------------------------


def lab_titles_from_files() -> dict[int, str]:
    titles = {}
    for path in sorted(LAB_DIR.glob("lab*_*.py")):
        heading = next(line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("# # "))
        found = re.match(r"# # Lab (\d+) — (.*)", heading)
        assert found, heading
        titles[int(found.group(1))] = found.group(2).strip()
    return titles


def test_ldp_sim_lab_help_lists_every_lab_by_number_and_title():
    """Fails on the old help, which said only "lab number (see simulations/labs/)"."""
    proc = subprocess.run([sys.executable, "-m", "ldp.cli.main", "lab", "--help"], capture_output=True, text=True, timeout=PROCESS_WAIT_S, env=dict(os.environ, COLUMNS="200"))
    assert proc.returncode == 0, proc.stderr
    titles = lab_titles_from_files()
    assert len(titles) >= 6
    for n, title in titles.items():
        assert re.search(rf"^\s+{n}\s+{re.escape(title)}\s*$", proc.stdout, re.MULTILINE), (n, title, proc.stdout)


def readme_notebook_command() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Labs") :]
    found = re.search(r"as a notebook: `([^`]*jupytext[^`]*)`", section)
    assert found, "the README's Labs section gives a jupytext command"
    return found.group(1)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to read .gitignore")
def test_readme_notebook_command_writes_no_notebook_among_the_sources(tmp_path):
    """The README's jupytext command, run as a real process in a copy of the sources, writes its
    notebook outside simulations/ and into a path the repository's .gitignore ignores. The old
    command (``jupytext --to notebook simulations/labs/lab1_….py``) wrote it next to the lab."""
    command = readme_notebook_command()
    (tmp_path / "simulations" / "labs").mkdir(parents=True)
    shutil.copy(LAB_DIR / "lab1_randomized_response.py", tmp_path / "simulations" / "labs")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 0, proc.stderr
    made = [p.relative_to(tmp_path) for p in tmp_path.rglob("*.ipynb")]
    assert len(made) == 1, made
    assert not any(p.parts[0] == "simulations" for p in made), made
    ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", str(made[0])], timeout=PROCESS_WAIT_S)
    assert ignored.returncode == 0, f"{made[0]} is not gitignored"
