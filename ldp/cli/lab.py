"""``ldp-sim lab N [--quick] [--processes P] [--transport grpc|inprocess] [--no-solutions] [--out DIR]``:
a teaching lab (simulations/labs/labN_*.py) run cell by cell, with its narrative, in a child
Python against client processes on loopback (or in process); ``ldp.simulations.labs.runner``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from ldp.cli.argtypes import integer_text, output_directory, process_count
from ldp.cli.command import Command, stdout_console
from ldp.core.errors import ParameterError

__all__ = ["LAB", "LAB_DESCRIPTION", "lab_modules"]


def _lab_number(text: str) -> int:
    n = integer_text(text, "the lab number", " ≥ 1")
    if n < 1:
        raise argparse.ArgumentTypeError(f"the lab number must be ≥ 1 (see simulations/labs/), got {text!r}")
    return n


LAB_DESCRIPTION = (
    "Run lab N cell by cell: its narrative (the lab's markdown cells) printed between the outputs "
    "of its code cells, against client processes on loopback (or in process). "
    "Switches: quick sizes when --quick is given OR LDP_QUICK=1 is set; solutions hidden when "
    "--no-solutions is given OR LDP_SOLUTIONS=0 is set. A flag only turns its switch on; without "
    "it the environment decides (defaults: full sizes, solutions shown; the variables take "
    "1/0, true/false, yes/no or on/off)."
)


def _lab_arguments(lab: argparse.ArgumentParser) -> None:
    lab.add_argument("number", type=_lab_number, help="lab number (see simulations/labs/)")
    lab.add_argument("--quick", action="store_true", help="small sizes, every lab in under a minute (same as LDP_QUICK=1)")
    lab.add_argument("--processes", type=process_count, default=2, help="client processes (default 2)")
    lab.add_argument("--transport", choices=("grpc", "inprocess"), default="grpc", help="grpc (default) or inprocess")
    lab.add_argument("--no-solutions", action="store_true", help="print the exercises without solving them (same as LDP_SOLUTIONS=0)")
    lab.add_argument("--out", default="results/labs", help="where figures are saved (default results/labs)")


def lab_modules() -> dict[int, str]:
    """Lab number → module name, from simulations/labs/labN_*.py."""
    import ldp.simulations.labs as labs

    found = {}
    for path in sorted(Path(labs.__file__).parent.glob("lab*_*.py")):
        number = path.stem[3 : path.stem.index("_")]
        if number.isdigit():
            found[int(number)] = f"ldp.simulations.labs.{path.stem}"
    return found


def _lab(ns: argparse.Namespace, console: Console) -> int:
    """Run a lab in a child Python, cell by cell with its narrative (``ldp.simulations.labs.runner``).

    The switches combine as ``--help`` says: ``--quick`` or LDP_QUICK=1 → quick sizes,
    ``--no-solutions`` or LDP_SOLUTIONS=0 → solutions hidden; a bad value of either variable is a
    user mistake (one line). The child gets them normalized, with LDP_TRANSPORT, LDP_PROCESSES and
    LDP_LAB_OUT; the lab opens its oracle through ``ldp.simulations.labs.common.open_oracle``, which
    starts the aggregator and client processes on 127.0.0.1 when LDP_TRANSPORT=grpc. A fresh
    interpreter, because ``ldp.simulations.labs.common`` reads the switches once, when imported.
    """
    from ldp.simulations.labs.runner import env_switch

    labs = lab_modules()
    if ns.number not in labs:
        raise ParameterError(f"there is no lab {ns.number}; labs are {sorted(labs)}")
    if ns.processes < 1:
        raise ParameterError(f"--processes must be ≥ 1, got {ns.processes}")
    try:
        quick = ns.quick or env_switch("LDP_QUICK", False)
        solutions = not ns.no_solutions and env_switch("LDP_SOLUTIONS", True)
    except ValueError as exc:
        raise ParameterError(str(exc)) from None
    output_directory(ns.out)
    env = dict(
        os.environ,
        LDP_TRANSPORT=ns.transport,
        LDP_PROCESSES=str(ns.processes),
        LDP_QUICK="1" if quick else "0",
        LDP_SOLUTIONS="1" if solutions else "0",
        LDP_LAB_OUT=ns.out,
        MPLBACKEND="Agg",
    )
    where = f"{ns.processes} client process(es) over gRPC" if ns.transport == "grpc" else "in process"
    mode = f"{'quick' if quick else 'full'} sizes, solutions {'shown' if solutions else 'hidden'}"
    console.print(f"[bold]Lab {ns.number}[/bold] ({labs[ns.number]}), {where}, {mode}")
    proc = subprocess.Popen([sys.executable, "-m", "ldp.simulations.labs.runner", labs[ns.number]], env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait(timeout=10)
        raise


def lab_command(ns: argparse.Namespace) -> int:
    return _lab(ns, stdout_console())


LAB = Command(
    "lab", "run a teaching lab the classroom way (client processes on loopback)",
    LAB_DESCRIPTION,
    ("ldp-sim lab 1 --quick", "ldp-sim lab 4 --no-solutions --transport inprocess"),
    _lab_arguments, lab_command,
)
