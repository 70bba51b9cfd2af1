"""Where `ldp-sim run` writes: ``--out DIR`` when given, else ``results/<experiment name>/``
(README: "Results go to results/<experiment>/"), and the simulations' own ``--out`` defaults agree."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waits import PROCESS_WAIT_S

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

CLI = [sys.executable, "-m", "ldp.cli.main", "run"]
RR_FILES = {"table.md", "estimates.csv", "result.json", "estimates.png"}

# The smallest settings of each experiment, and the files it writes.
EXPERIMENTS = {
    "rr-demo": (["--transport", "inprocess", "--users", "2000"], RR_FILES),
    "sq-sample-complexity": (
        ["-o", "queries=1,4", "-o", "tolerances=0.2,0.1", "-o", "epsilons=1.0,2.0", "-o", "run_up_to_users=0"],
        {"result.json", "users.csv", "table.md", "users.png"},
    ),
    "sq-local": (["--transport", "inprocess", "-o", "groups=500"], {"result.json", "distances.csv", "table.md", "outputs.png"}),
    "pure-vs-approximate": (
        ["-o", "point_bits=8", "-o", "threshold_bits=6", "-o", "trials=10", "-o", "threshold_trials=10"],
        {"result.json", "m90.csv", "table.md", "m90.png"},
    ),
    "geometry": (["--quick"], {"result.json", "errors.csv", "table.md", "errors.png", "polygons.png"}),
    "sanitization": (["--quick"], {"result.json", "errors.csv", "table.md", "errors.png"}),
    "real-data": (["--quick"], {"result.json", "estimates.csv", "table.md", "estimates.png"}),
    "frequent-itemsets": (["--quick"], {"result.json", "itemsets.csv", "table.md", "itemsets.png"}),
    "disjunctions": (["--quick"], {"result.json", "errors.csv", "first_success.csv", "table.md", "errors.png"}),
    "pure-lower-bounds": (["--quick"], {"result.json", "bounds.csv", "packing.csv", "kpoint.csv", "table.md", "bounds.png"}),
}


def _run(args: list[str], cwd: Path) -> str:
    proc = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_without_out_an_experiment_writes_to_results_slash_its_name(name: str, tmp_path: Path) -> None:
    args, files = EXPERIMENTS[name]
    out = _run([name, *args], tmp_path)
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert written == {f"results/{name}/{f}" for f in files}
    if name == "rr-demo":
        assert all(f"saved results/rr-demo/{f}" in out for f in files)


def test_rr_demo_writes_its_table_to_out(tmp_path: Path) -> None:
    out = tmp_path / "rr"
    printed = _run(["rr-demo", "--transport", "inprocess", "--users", "4000", "--seed", "5", "--out", str(out)], tmp_path)
    assert {p.name for p in out.iterdir()} == RR_FILES
    assert not (tmp_path / "results").exists()
    rows = list(csv.DictReader((out / "estimates.csv").open()))
    data = json.loads((out / "result.json").read_text())
    assert [r["ε"] for r in rows] == ["0.125", "0.25", "0.5", "1"] and [r["ε"] for r in data["rows"]] == [0.125, 0.25, 0.5, 1]
    assert data["title"] == "Randomized response of one bit: 4000 users, budget ε = 1"
    table = (out / "table.md").read_text()
    assert table.startswith("# Randomized response of one bit") and "| ε | reports | estimate | truth | \\|error\\| |" in table
    # the numbers in the files are the ones printed
    estimates = [line.split("│")[3].strip() for line in printed.splitlines() if line.startswith("│")]
    assert estimates == [f"{float(r['estimate']):.4f}" for r in rows]


def test_the_sq_sample_complexity_module_writes_where_the_cli_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from ldp.simulations import sq_sample_complexity

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sq_sample_complexity, "quick_config", lambda seed: sq_sample_complexity.Config(
        queries=(1, 4), tolerances=(0.2, 0.1), epsilons=(1.0, 2.0), run_up_to_users=0, seed=seed))  # fmt: skip
    sq_sample_complexity.main(["--quick"])
    capsys.readouterr()
    assert sq_sample_complexity.DEFAULT_OUT == "results/sq-sample-complexity"
    assert {p.name for p in (tmp_path / "results" / "sq-sample-complexity").iterdir()} == {"result.json", "users.csv", "table.md", "users.png"}
    assert [p.name for p in (tmp_path / "results").iterdir()] == ["sq-sample-complexity"]
