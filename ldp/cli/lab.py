"""``ldp-sim lab N [--quick] [--processes P] [--transport grpc|inprocess] [--no-solutions] [--out DIR]``:
a teaching lab (simulations/labs/labN_*.py) run cell by cell, with its narrative, in a child
Python against client processes on loopback (or in process); ``ldp.simulations.labs.runner``.
Every lab is an experiment (``labN``, ``ldp.simulations.labs.experiments``): this command runs it
through the ``Experiment`` protocol, as ``ldp-sim run labN`` does, and prints its result table.
"""

from __future__ import annotations

import argparse
import re
import time

from rich.console import Console

from ldp.cli.argtypes import integer_text, output_directory, process_count
from ldp.cli.command import Command, stdout_console
from ldp.cli.run import print_result
from ldp.core.errors import LDPError, ParameterError
from ldp.experiment import ExperimentArgs, ExperimentResult, experiment_names, get_experiment

__all__ = ["LAB", "LAB_DESCRIPTION", "lab_numbers", "lab_titles"]


def _lab_number(text: str) -> int:
    n = integer_text(text, "the lab number", " ≥ 1")
    if n < 1:
        raise argparse.ArgumentTypeError(f"the lab number must be ≥ 1 (see simulations/labs/), got {text!r}")
    return n


LAB_DESCRIPTION = (
    "Run lab N cell by cell: its narrative (the lab's markdown cells) printed between the outputs "
    "of its code cells, against client processes on loopback (or in process), then the lab's result table "
    "(every lab is an experiment: `ldp-sim run labN` runs the same one). "
    "Switches: quick sizes when --quick is given OR LDP_QUICK=1 is set; solutions hidden when "
    "--no-solutions is given OR LDP_SOLUTIONS=0 is set. A flag only turns its switch on; without "
    "it the environment decides (defaults: full sizes, solutions shown; the variables take "
    "1/0, true/false, yes/no or on/off)."
)


def lab_titles() -> dict[int, str]:
    """Lab number → its title ("Randomized response and debiasing"), from each lab experiment's
    ``title`` (``ldp.simulations.labs.experiments.Lab``: the lab file's first heading, read without
    running the lab); a lab whose plug-in fails to load is listed by its number only."""
    titles = {}
    for n in lab_numbers():
        try:
            title = str(getattr(get_experiment(f"lab{n}"), "title", f"lab {n}"))
        except LDPError:
            title = f"lab {n} (its plug-in does not load: `ldp-sim list` says why)"
        titles[n] = re.sub(rf"^Lab {n}\s*[—–-]\s*", "", title)
    return titles


def _lab_arguments(lab: argparse.ArgumentParser) -> None:
    titles = lab_titles()
    # The labs, numbered, above the examples (the parser's formatter keeps the epilog's lines).
    lab.epilog = "labs:\n" + "\n".join(f"  {n}  {title}" for n, title in titles.items()) + "\n\n" + (lab.epilog or "")
    lab.add_argument("number", type=_lab_number, help=f"lab number, {min(titles, default=1)}–{max(titles, default=1)} (listed below)")
    lab.add_argument("--quick", action="store_true", help="small sizes, every lab in under a minute (same as LDP_QUICK=1)")
    lab.add_argument("--processes", type=process_count, default=2, help="client processes (default 2)")
    lab.add_argument("--transport", choices=("grpc", "inprocess"), default="grpc", help="grpc (default) or inprocess")
    lab.add_argument("--no-solutions", action="store_true", help="print the exercises without solving them (same as LDP_SOLUTIONS=0)")
    lab.add_argument("--out", default="results/labs", help="where figures are saved (default results/labs)")


def lab_numbers() -> list[int]:
    """The labs' numbers: the experiments named ``labN`` (entry points; none is imported)."""
    return sorted(int(name[3:]) for name in experiment_names() if re.fullmatch(r"lab\d+", name))


def _lab(ns: argparse.Namespace, console: Console) -> int:
    """Run a lab through its experiment (``get_experiment("labN")``, the protocol ``ldp-sim run``
    and a user's code use too: ``ldp.simulations.labs.experiments.Lab``), then print its table.

    The switches combine as ``--help`` says: ``--quick`` or LDP_QUICK=1 → quick sizes,
    ``--no-solutions`` or LDP_SOLUTIONS=0 → solutions hidden; a bad value of either variable is a
    user mistake (one line). The lab runs in a fresh Python, cell by cell with its narrative
    (``ldp.simulations.labs.runner``), and opens its oracle through
    ``ldp.simulations.labs.common.open_oracle``, which starts the aggregator and client processes
    on 127.0.0.1 with ``--transport grpc``. A lab that fails exits with its own code (its
    traceback is printed); Ctrl-C stops it.
    """
    from ldp.simulations.labs.runner import env_switch

    labs = lab_numbers()
    if ns.number not in labs:
        raise ParameterError(f"there is no lab {ns.number}; labs are {labs}")
    if ns.processes < 1:
        raise ParameterError(f"--processes must be ≥ 1, got {ns.processes}")
    try:
        quick = ns.quick or env_switch("LDP_QUICK", False)
        solutions = not ns.no_solutions and env_switch("LDP_SOLUTIONS", True)
    except ValueError as exc:
        raise ParameterError(str(exc)) from None
    output_directory(ns.out)
    exp = get_experiment(f"lab{ns.number}")
    args = ExperimentArgs(
        users=0, epsilon=1.0, quick=quick, out=ns.out, options={"solutions": solutions, "transport": ns.transport, "processes": ns.processes}
    )
    where = f"{ns.processes} client process(es) over gRPC" if ns.transport == "grpc" else "in process"
    mode = f"{'quick' if quick else 'full'} sizes, solutions {'shown' if solutions else 'hidden'}"
    console.print(f"[bold]Lab {ns.number}[/bold] ({getattr(exp, 'module', exp.name)}), {where}, {mode}")
    start = time.perf_counter()
    try:
        result = exp.run(None, args)
    except LDPError as exc:
        code = getattr(exc, "code", None)  # LabFailed: the lab's own exit code, its traceback printed
        if code is None:
            raise
        return int(code)
    if not isinstance(result, ExperimentResult):  # a lab is standalone: its run returns the result itself
        raise ParameterError(f"lab {ns.number}'s experiment gave {type(result).__name__}, not an ExperimentResult")
    print_result(console, result, time.perf_counter() - start)
    return 0


def lab_command(ns: argparse.Namespace) -> int:
    return _lab(ns, stdout_console())


LAB = Command(
    "lab", "run a teaching lab the classroom way (client processes on loopback)",
    LAB_DESCRIPTION,
    ("ldp-sim lab 1 --quick", "ldp-sim lab 4 --no-solutions --transport inprocess"),
    _lab_arguments, lab_command,
)
