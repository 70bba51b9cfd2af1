"""A user's own experiment joins ``ldp-sim list`` and ``ldp-sim run`` (issue 24: experiments as plug-ins).

Two doors (``ldp.experiment.registry``): an entry point in the group ``ldp_sim.experiments``, and
one call, ``ldp.register_experiment``. Each test writes the user's module into a temporary folder
(nothing of it is in the repository) and runs ``ldp-sim`` as a real process: the entry point is a
``*.dist-info`` folder beside the module on ``PYTHONPATH`` (what ``pip install`` of the user's
package would leave in site-packages). The broken variants: the same commands without the
dist-info know no such experiment, and an entry point that names no experiment is one clear line
(exit 2) while ``ldp-sim list`` still lists the rest. Deterministic: seeded, no clock.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waits import PROCESS_WAIT_S

LDP_SIM = Path(sys.executable).with_name("ldp-sim")

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

# The user's module: one standalone experiment built with Simulation, and one that asks users
# through the LR oracle (the protocol written out by hand), so it runs over gRPC client processes.
USER_MODULE = '''
from dataclasses import dataclass

import ldp
from ldp.experiment import ExperimentArgs, ExperimentResult, Simulation


@dataclass(frozen=True)
class Config:
    seed: int = 0
    flips: int = 1000


def compute(config: Config) -> float:
    return float(ldp.generator(config.seed, "coin").integers(0, 2, config.flips).mean())


def report(heads: float, config: Config) -> ExperimentResult:
    return ExperimentResult("plug-in coin", ("flips", "heads"), ((config.flips, f"{heads:.3f}"),))


COIN = Simulation("coin", "flip a seeded coin (a user's plug-in)", Config, compute, report)


@dataclass(frozen=True)
class Ask:
    seed: int = 0
    field_index: int = 0  # ldp-sim run ask-users -o field_index=1


def population(config: Ask, args: ExperimentArgs) -> ldp.PopulationSpec:
    cc = ldp.concept_class("parity", 2)
    return ldp.PopulationSpec(cc, cc.random_target(ldp.generator(config.seed, "target")), args.users, budget=args.epsilon, seed=config.seed)


async def ask(config: Ask, oracle: ldp.LROracle, args: ExperimentArgs) -> tuple[int, float]:
    session = ldp.Session(oracle, ldp.SessionKind.NON_INTERACTIVE, deadline_s=args.deadline_s)
    rr = ldp.RandomizerSpec("binary_rr", ldp.field_query("x", config.field_index), epsilon=args.epsilon)
    (reports,) = await session.round([ldp.Request.of(range(oracle.user_count), rr)])
    return len(reports.values), float(ldp.BinaryRandomizedResponse(args.epsilon).estimate(reports.values).mean())


def answered(result: tuple[int, float], config: Ask) -> ExperimentResult:
    return ExperimentResult("plug-in users", ("reports", f"Pr[x_{config.field_index} = 1]"), ((result[0], f"{result[1]:.2f}"),))


# an experiment that asks users through the LR oracle: it runs over gRPC client processes too
ASK = Simulation("ask-users", "one round of binary randomized response (a user's plug-in)", Ask, ask, answered,
                 shape="oracle", users=population, default_users=2_000, default_epsilon=1.0)
NOT_AN_EXPERIMENT = 42
'''

ENTRY_POINTS = """[ldp_sim.experiments]
coin = my_plugin:COIN
ask-users = my_plugin:ASK
"""


def _user_folder(tmp_path: Path, *, dist_info: bool = True, broken: bool = False) -> Path:
    folder = tmp_path / "user"
    folder.mkdir()
    (folder / "my_plugin.py").write_text(USER_MODULE)
    if dist_info:
        info = folder / "my_plugin-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugin\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(ENTRY_POINTS + ("not-one = my_plugin:NOT_AN_EXPERIMENT\n" if broken else ""))
    return folder


def _run(argv: list[str], folder: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(folder), "MPLBACKEND": "Agg"}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=PROCESS_WAIT_S)


def test_an_entry_point_experiment_is_listed_and_runs(tmp_path: Path) -> None:
    folder = _user_folder(tmp_path)
    listed = _run([str(LDP_SIM), "list"], folder, tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]
    assert "coin" in names and "ask-users" in names and "rr-demo" in names, listed.stdout
    ran = _run([str(LDP_SIM), "run", "coin", "-o", "flips=4000", "--seed", "3"], folder, tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "plug-in coin" in ran.stdout and "4000" in ran.stdout
    # A setting that is no field of its config is refused in one line, as for a built-in experiment.
    bad = _run([str(LDP_SIM), "run", "coin", "-o", "tosses=5"], folder, tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "unknown option 'tosses'" in bad.stderr, bad.stderr


def test_an_entry_point_experiment_asks_users_over_grpc(tmp_path: Path) -> None:
    folder = _user_folder(tmp_path)
    ran = _run([str(LDP_SIM), "run", "ask-users", "--transport", "grpc", "--processes", "2", "--users", "2000"], folder, tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "plug-in users" in ran.stdout and "2000" in ran.stdout


def test_one_call_registers_an_experiment_for_the_command_line(tmp_path: Path) -> None:
    folder = _user_folder(tmp_path, dist_info=False)
    script = folder / "my_script.py"
    script.write_text("import sys\n\nimport ldp\nimport my_plugin\nfrom ldp.cli.main import main\n\nldp.register_experiment(my_plugin.COIN)\nsys.exit(main(sys.argv[1:]))\n")
    listed = _run([sys.executable, str(script), "list"], folder, tmp_path)
    assert listed.returncode == 0 and any(line.startswith("coin ") for line in listed.stdout.splitlines()), listed.stdout + listed.stderr
    ran = _run([sys.executable, str(script), "run", "coin", "--quick"], folder, tmp_path)
    assert ran.returncode == 0 and "plug-in coin" in ran.stdout, ran.stdout + ran.stderr


def test_without_its_entry_point_the_experiment_is_unknown(tmp_path: Path) -> None:
    # The broken variant of the first test: the same module, not installed.
    folder = _user_folder(tmp_path, dist_info=False)
    listed = _run([str(LDP_SIM), "list"], folder, tmp_path)
    assert listed.returncode == 0 and "coin" not in [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]
    ran = _run([str(LDP_SIM), "run", "coin"], folder, tmp_path)
    assert ran.returncode == 2 and "unknown experiment 'coin'" in ran.stderr, ran.stderr


def test_an_entry_point_that_is_no_experiment_is_one_line(tmp_path: Path) -> None:
    folder = _user_folder(tmp_path, broken=True)
    listed = _run([str(LDP_SIM), "list"], folder, tmp_path)
    assert listed.returncode == 0 and "coin" in listed.stdout and "rr-demo" in listed.stdout, listed.stdout
    assert "not-one" in listed.stderr and "is not an experiment" in listed.stderr and "Traceback" not in listed.stderr, listed.stderr
    ran = _run([str(LDP_SIM), "run", "not-one"], folder, tmp_path)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr and "entry point not-one = my_plugin:NOT_AN_EXPERIMENT" in ran.stderr, ran.stderr


def test_a_taken_name_is_refused() -> None:
    from ldp.core.errors import ParameterError
    from ldp.experiment import get_experiment, register_experiment
    from ldp.simulations.randomized_response import RRDemo

    assert register_experiment(get_experiment("rr-demo")) is get_experiment("rr-demo")  # the same object: harmless
    with pytest.raises(ParameterError, match="already registered"):
        register_experiment(RRDemo())  # another object under the name rr-demo
    with pytest.raises(ParameterError, match="is not an experiment"):
        register_experiment(42)  # type: ignore[arg-type]
