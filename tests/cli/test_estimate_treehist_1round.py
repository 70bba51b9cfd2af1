"""``ldp-sim estimate --task heavy-hitters --method treehist-1round --bits B`` as a real process:
TreeHist in one non-interactive round, each user drawing its own level (docs/treehist.md).

Data (as tests/cli/test_estimate_cli.py's ``visits``): 20,000 users, page ids 0..4095 (12 bits),
four planted pages at 15/12/10/8 %. At ε = 4, L = 12 levels of ≈ 1,667 reports, OLH g = 64: one
estimate's sd at f = 0 is ≈ 0.0068 and τ = z·sd ≈ 0.026 (β = 0.05, z ≈ 3.8); the 8 % page clears it
by ≥ 5 sd at every level (miss < 12·Φ(−5) < 4·10^-6), and a frequency-0 value is returned with
probability ≤ β/M·(last level's candidates) < 5·10^-3. Seeded (``--seed 3``): the same reports
every run; the check "exactly the planted four" fails wrongly with probability < 5·10^-3 for an
unseeded run. Broken variant: ``--oracle oue`` (an oracle whose report cannot be evaluated at
candidates chosen afterwards) is refused in one line, exit 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ldp
from tests.waits import PROCESS_WAIT_S

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))

LDP_SIM = str(Path(sys.executable).with_name("ldp-sim"))
PLANTED = (1234, 777, 4000, 42)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pages1")
    rng = np.random.default_rng(11)
    page = rng.integers(0, 4096, 20_000)
    u = rng.random(20_000)
    for lo, hi, planted in ((0.0, 0.15, 1234), (0.15, 0.27, 777), (0.27, 0.37, 4000), (0.37, 0.45, 42)):
        page[(u >= lo) & (u < hi)] = planted
    (d / "pages.csv").write_text("page\n" + "".join(f"{p}\n" for p in page))
    return d


def run_estimate(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LDP_SIM, "estimate", *args], cwd=cwd, capture_output=True, text=True, timeout=PROCESS_WAIT_S, env=dict(os.environ))


def rows_of(out: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = json.loads((out / "result.json").read_text())["results"][0]["rows"]
    return rows


ARGS = ["--data", "pages.csv", "--column", "page", "--task", "heavy-hitters", "--method", "treehist-1round", "--bits", "12", "--epsilon", "4", "--seed", "3", "--top", "4"]


def test_one_round_finds_the_planted_pages_in_process_and_over_grpc(pages: Path) -> None:
    here = run_estimate([*ARGS, "-o", "out-1"], pages)
    served = run_estimate([*ARGS, "--processes", "2", "-o", "out-2"], pages)
    assert here.returncode == 0 and served.returncode == 0, (here.stderr, served.stderr)
    assert "heavy-hitters, treehist-1round over 12 bits of pages.csv" in here.stdout
    rows = rows_of(pages / "out-1")
    assert sorted(int(row["label"]) for row in rows) == sorted(PLANTED), rows  # type: ignore[call-overload]
    assert rows == rows_of(pages / "out-2")  # bit for bit: labels, estimates, sd, intervals
    result = json.loads((pages / "out-1" / "result.json").read_text())["results"][0]
    assert result["users"] == 20_000  # everyone answered once, in the one round
    page = np.loadtxt(pages / "pages.csv", skiprows=1, dtype=np.int64)
    api = ldp.heavy_hitters(page, 4.0, k=4, seed=3, method="treehist-1round", bits=12)
    assert list(api.labels) == [row["label"] for row in rows] and list(api.estimates) == [row["estimate"] for row in rows]


def test_another_oracle_is_refused_in_one_line(pages: Path) -> None:
    done = run_estimate([*ARGS, "--oracle", "oue", "-o", "out-bad"], pages)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "takes oracle 'auto' or 'olh'" in done.stderr, done.stderr
