"""Every lab is an experiment (``ldp.simulations.labs.experiments``): registered like the built-in
ones (entry points ``labN``), run through the one ``Experiment`` protocol by ``ldp-sim lab N``,
``ldp-sim run labN`` and a user's own code, each giving the lab's typed result (table, JSON,
figures). Every command runs as a real process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waits import PROCESS_WAIT_S

REPO = Path(__file__).parents[2]
LAB_FILES = sorted((REPO / "simulations" / "labs").glob("lab[0-9]*_*.py"))
CLI = [sys.executable, "-m", "ldp.cli.main"]


def _env(**extra: str) -> dict[str, str]:
    """This environment without the labs' switches (a test sets what it means), figures headless."""
    return {k: v for k, v in os.environ.items() if not k.startswith("LDP_")} | {"MPLBACKEND": "Agg"} | extra


def test_every_lab_file_is_a_registered_experiment() -> None:
    from ldp.experiment import experiment_names, get_experiment
    from ldp.simulations.labs.experiments import Lab, lab_modules

    numbers = sorted(int(p.stem[3 : p.stem.index("_")]) for p in LAB_FILES)
    assert numbers == sorted(lab_modules()) and len(numbers) >= 6
    assert {f"lab{n}" for n in numbers} <= set(experiment_names())  # an entry point each (pyproject.toml)
    for n in numbers:
        exp = get_experiment(f"lab{n}")
        assert isinstance(exp, Lab) and exp.name == f"lab{n}" and exp.shape == "standalone"
        assert exp.description.startswith(f"teaching lab: Lab {n} — ")
        assert exp.default_users is None and exp.default_epsilon is None  # --users/--epsilon refused


def test_ldp_sim_list_lists_the_labs() -> None:
    proc = subprocess.run([*CLI, "list"], capture_output=True, text=True, timeout=PROCESS_WAIT_S, env=_env())
    assert proc.returncode == 0, proc.stderr
    names = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert {f"lab{n}" for n in range(1, 7)} <= names


def test_ldp_sim_run_lab_prints_the_labs_table_and_saves_its_figure(tmp_path: Path) -> None:
    """`ldp-sim run lab2 --quick`: the lab's narrative and outputs, then its result table (the
    same rounds the lab printed), its figure listed as saved."""
    proc = subprocess.run([*CLI, "run", "lab2", "--quick", "--out", str(tmp_path)], capture_output=True, text=True, timeout=PROCESS_WAIT_S, env=_env())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = proc.stdout
    printed = re.findall(r"^round (\d): answered\s+(\d+), refused\s+(\d+)$", out, re.MULTILINE)
    assert len(printed) == 6 and printed[0] == ("1", "2000", "0") and printed[3] == ("4", "0", "2000")
    table = out[out.index("┃ round ┃ answered ┃ refused ┃") :]  # the table comes after the lab's own output
    assert "Lab 2 —" in out[out.rindex("[exercise]") : out.index("┃ round ┃")]  # its title (wrapped to the table's width)
    rows = re.findall(r"│\s*(\d)\s*│\s*(\d+)\s*│\s*(\d+)\s*│", table)
    assert rows == printed
    figure = tmp_path / "lab2" / "lab2_refusals.png"
    assert figure.exists() and f"saved {figure}" in out


_USER_CODE = """
import json, sys
from ldp.experiment import ExperimentArgs, get_experiment
lab = get_experiment("lab6")
args = ExperimentArgs(users=0, epsilon=1.0, quick=True, out=sys.argv[1], options={"solutions": "false"})
result = lab.run(None, args)
print("RESULT " + json.dumps(result.to_json()))
"""


def test_a_users_own_code_runs_a_lab_through_the_protocol(tmp_path: Path) -> None:
    """User code: ``get_experiment("lab6").run(...)`` with typed settings gives the typed result:
    the audit's table (the buggy randomizer flagged, the honest one not), JSON, the figure."""
    from ldp.experiment import ExperimentResult

    proc = subprocess.run([sys.executable, "-c", _USER_CODE, str(tmp_path)], capture_output=True, text=True, timeout=PROCESS_WAIT_S, env=_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "your turn" in proc.stdout and "true ε =" not in proc.stdout  # -o solutions=false reached the lab
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    result = ExperimentResult.from_json(json.loads(line.removeprefix("RESULT ")))
    assert result.title.startswith("Lab 6 — ")
    verdicts = {row[0]: row[-1] for row in result.rows}
    assert verdicts == {"honest": "not flagged", "buggy": "flagged"}
    assert result.figures == (tmp_path / "lab6" / "lab6_audit.png",) and result.figures[0].exists()
    assert ExperimentResult.from_json(result.to_json()) == result


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "lab1", "--seed", "3"], "lab1 keeps its fixed seeds"),
        (["run", "lab1", "-o", "transport=udp"], "a lab's transport must be grpc or inprocess, got 'udp'"),
        (["run", "lab1", "-o", "processes=0"], "a lab's processes must be an integer ≥ 1, got 0"),
        (["run", "lab1", "--users", "5"], "--users does not apply to lab1"),
        (["run", "lab1", "-o", "users=5"], "unknown option 'users'"),
    ],
)
def test_lab_settings_mistakes_are_one_line(args: list[str], message: str) -> None:
    proc = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=PROCESS_WAIT_S, env=_env())
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_a_lab_without_a_result_is_an_error() -> None:
    """The runner writes the lab's RESULT; a lab that defines none is a bug it names."""
    from ldp.simulations.labs.runner import write_result

    with pytest.raises(TypeError, match=r"defines no RESULT = lab_result"):
        write_result({"OUT": "x"}, "/nonexistent/never-written.json")


def test_a_failing_lab_raises_with_its_exit_code(tmp_path: Path) -> None:
    """A lab whose process fails (here: a module that does not exist, exit 2 from the runner)
    raises ``LabFailed`` with that exit code, which ``ldp-sim lab`` returns."""
    from ldp.experiment import ExperimentArgs
    from ldp.simulations.labs.experiments import Lab, LabFailed

    lab = Lab(1, "ldp.simulations.labs.lab1_randomized_response")
    lab.module = "ldp.simulations.labs.no_such_lab"
    with pytest.raises(LabFailed, match=r"lab 1 failed \(exit code 2\)") as failed:
        lab.run(None, ExperimentArgs(users=0, epsilon=1.0, out=str(tmp_path)))
    assert failed.value.code == 2
