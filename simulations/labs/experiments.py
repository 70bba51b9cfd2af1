"""Every lab is an experiment: ``Lab`` implements ``ldp.experiment.Experiment`` for a lab script.

What: ``LAB1`` … ``LAB7`` are registered like the built-in experiments (entry points
``lab1`` … ``lab7`` of the group ``ldp_sim.experiments`` in pyproject.toml), so one protocol
runs a lab wherever it is asked for:

- ``ldp-sim lab N [--quick] [--no-solutions] [--transport grpc|inprocess] [--processes P] [--out DIR]``
  (``ldp.cli.lab``: the classroom way, its flags and environment switches as documented there);
- ``ldp-sim run labN [--quick] [--out DIR] [-o solutions=false] [-o transport=grpc] [-o processes=P]``;
- a user's own code: ``get_experiment("lab4").run(None, ExperimentArgs(users=0, epsilon=1.0, quick=True))``.

``Lab.run`` starts the lab in a fresh Python (``python -m ldp.simulations.labs.runner MODULE
--result FILE``): its narrative and outputs go to this process's terminal as before, and the
lab's ``RESULT`` (``common.lab_result``: its main table and the figures it saved) comes back as
the ``ExperimentResult``. A fresh interpreter, because ``ldp.simulations.labs.common`` reads the
switches once, when imported, and a lab's figures and module state must not leak into the caller.
The labs keep fixed seeds (they are scripts people read and rerun): ``--seed`` does not apply.

Guarantee: a setting out of range is a ``ParameterError`` (one line); a lab that fails raises
``LabFailed`` with the child's exit code after the child printed its traceback; Ctrl-C stops the
child and raises ``KeyboardInterrupt``.
Source: issue 24 (experiments as plug-ins: the labs use the same protocol); docs/design.md §5.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ldp.core.errors import LDPError, ParameterError
from ldp.core.population import PopulationSpec
from ldp.experiment.options import apply_options
from ldp.experiment.protocol import ExperimentArgs, ExperimentResult, Shape

__all__ = ["LabConfig", "Lab", "LabFailed", "lab_modules", "LAB1", "LAB2", "LAB3", "LAB4", "LAB5", "LAB6", "LAB7"]

LAB_DIR = Path(__file__).parent
EXIT_INTERRUPTED = 130  # the runner's exit code after Ctrl-C


def lab_modules() -> dict[int, str]:
    """Lab number → module name, from simulations/labs/labN_*.py."""
    found = {}
    for path in sorted(LAB_DIR.glob("lab*_*.py")):
        number = path.stem[3 : path.stem.index("_")]
        if number.isdigit():
            found[int(number)] = f"ldp.simulations.labs.{path.stem}"
    return found


@dataclass(frozen=True)
class LabConfig:
    """A lab's settings (``-o KEY=VALUE`` for ``ldp-sim run labN``)."""

    quick: bool = False  # small sizes, every lab in under a minute (LDP_QUICK)
    solutions: bool = True  # False: exercise cells print their task instead of solving it (LDP_SOLUTIONS)
    transport: str = "inprocess"  # or grpc: client processes on loopback (LDP_TRANSPORT; `ldp-sim lab` defaults to grpc)
    processes: int = 2  # client processes for transport grpc (LDP_PROCESSES)
    out: str = "results/labs"  # where figures go: OUT/labN/ (LDP_LAB_OUT)

    def __post_init__(self) -> None:
        if self.transport not in ("grpc", "inprocess"):
            raise ParameterError(f"a lab's transport must be grpc or inprocess, got {self.transport!r}")
        if isinstance(self.processes, bool) or not isinstance(self.processes, int) or self.processes < 1:
            raise ParameterError(f"a lab's processes must be an integer ≥ 1, got {self.processes!r}")

    def environment(self) -> dict[str, str]:
        """The switches as the lab's process reads them (``ldp.simulations.labs.common``)."""
        return {
            "LDP_TRANSPORT": self.transport,
            "LDP_PROCESSES": str(self.processes),
            "LDP_QUICK": "1" if self.quick else "0",
            "LDP_SOLUTIONS": "1" if self.solutions else "0",
            "LDP_LAB_OUT": self.out,
            "MPLBACKEND": "Agg",
        }


class LabFailed(LDPError):
    """A lab's process ended with an error (its traceback is already on stderr); ``code`` is its exit code."""

    def __init__(self, number: int, code: int) -> None:
        super().__init__(f"lab {number} failed (exit code {code}); its traceback is above")
        self.code = code


def _title(path: Path) -> str:
    """The lab's first heading, "Lab N — ...", from its file (no import)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        found = re.match(r"^# #\s+(.*)$", line)
        if found:
            return found.group(1).strip()
    return path.stem


class Lab:
    """The ``Experiment`` of lab ``number`` (``module``): standalone (the lab opens its own oracles,
    in process or over gRPC), no ``--users`` and no ``--epsilon`` (the lab chooses its own)."""

    shape: Shape = "standalone"
    config_type = LabConfig
    default_users = None
    default_epsilon = None

    def __init__(self, number: int, module: str) -> None:
        self.number = number
        self.module = module
        self.name = f"lab{number}"
        self.path = LAB_DIR / f"{module.rsplit('.', 1)[1]}.py"
        self.title = _title(self.path)  # "Lab N — ..." (``ldp-sim lab --help`` lists them)
        self.description = f"teaching lab: {self.title} (ldp-sim lab {number})"

    def __repr__(self) -> str:
        return f"Lab({self.number}, {self.module!r})"

    def config(self, args: ExperimentArgs) -> LabConfig:
        """The settings for ``args``: ``--quick``, ``--out``, then the ``-o`` options."""
        if args.seed != 0:
            raise ParameterError(f"{self.name} keeps its fixed seeds (a lab is a script people read and rerun): drop --seed {args.seed}")
        return apply_options(LabConfig(quick=args.quick, out=args.out or LabConfig.out), args.options)

    def population(self, args: ExperimentArgs) -> PopulationSpec:
        raise ParameterError(f"{self.name} has no single population (the lab opens its own)")

    def run(self, target: Any, args: ExperimentArgs) -> ExperimentResult:
        """Run the lab in a fresh Python, its narrative and outputs on this terminal; its ``RESULT``."""
        config = self.config(args)
        Path(config.out).mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, **config.environment())
        with tempfile.TemporaryDirectory(prefix="ldp-lab-") as tmp:
            result_file = Path(tmp) / "result.json"
            sys.stdout.flush()
            proc = subprocess.Popen([sys.executable, "-m", "ldp.simulations.labs.runner", self.module, "--result", str(result_file)], env=env)
            try:
                code = proc.wait()
            except KeyboardInterrupt:
                proc.terminate()
                proc.wait(timeout=10)
                raise
            if code == EXIT_INTERRUPTED:
                raise KeyboardInterrupt
            if code != 0:
                raise LabFailed(self.number, code)
            return ExperimentResult.from_json(json.loads(result_file.read_text(encoding="utf-8")))


_LABS = {number: Lab(number, module) for number, module in lab_modules().items()}
# One name per entry point (pyproject.toml: lab1 = "ldp.simulations.labs.experiments:LAB1", ...);
# tests/labs/test_lab_experiments.py checks that every labN_*.py has one.
LAB1, LAB2, LAB3, LAB4, LAB5, LAB6 = (_LABS[n] for n in range(1, 7))
LAB7 = _LABS[7]  # why Chrome memoized (issue 26, "For teaching")
