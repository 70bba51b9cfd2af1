"""What every lab shares: quick mode, the solutions switch, where figures go, the oracle,
``run`` (``asyncio.run`` that also works inside a notebook's kernel) and ``lab_result`` (the
lab's table and figures as an ``ExperimentResult``: every lab is an experiment, ``ldp-sim run labN``).

Environment variables (all optional):
- ``LDP_QUICK=1``       small sizes, each lab under a minute (the tests run labs this way);
- ``LDP_SOLUTIONS=0``   hide the solutions: exercise cells print their task instead of solving it
  (both switches take 1/0, true/false, yes/no or on/off; another value is an error, see
  ``ldp.simulations.labs.runner.env_switch``);
- ``LDP_LAB_OUT=DIR``   where figures are saved (default ``results/labs``);
- ``LDP_TRANSPORT=grpc`` run against real client processes on loopback (``ldp-sim lab N`` sets it),
  ``LDP_PROCESSES=P``  how many (default 2).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import matplotlib


def headless_unless_chosen() -> str | None:
    """Select matplotlib's Agg backend, unless a backend is already chosen; the one chosen, or None.

    A backend is chosen by ``MPLBACKEND``, a ``matplotlibrc``, ``matplotlib.use`` or ``%matplotlib``,
    and in a Jupyter kernel, which sets ``MPLBACKEND`` to the inline backend: there the figures of
    each cell are shown under it (and still saved as PNG files). Only a plain ``python`` run with
    nothing chosen (``python -m ldp.simulations.labs.labN``, ``ldp-sim lab N``) gets Agg, where
    the figures are saved, never shown. ``matplotlib.get_backend(auto_select=False)`` (matplotlib
    3.10) says whether a backend was chosen without choosing one.
    """
    chosen = matplotlib.get_backend(auto_select=False)
    if chosen is None:
        matplotlib.use("Agg")
    return chosen


headless_unless_chosen()  # before pyplot draws anything: a lab's first figure uses the backend kept

from ldp import run  # noqa: E402,F401  (the labs call run(...): asyncio.run that also works in a notebook)
from ldp.core.population import PopulationSpec  # noqa: E402
from ldp.experiment.factories import in_process_factory  # noqa: E402
from ldp.experiment.protocol import ExperimentResult, OracleFactory  # noqa: E402
from ldp.local.oracle import InProcessLROracle, LROracle  # noqa: E402
from ldp.simulations.labs.runner import env_switch  # noqa: E402

T = TypeVar("T")

QUICK = env_switch("LDP_QUICK", False)
SOLUTIONS = env_switch("LDP_SOLUTIONS", True)
TRANSPORT = os.environ.get("LDP_TRANSPORT", "inprocess")
PROCESSES = int(os.environ.get("LDP_PROCESSES", "2"))


def out_dir(lab: str) -> Path:
    path = Path(os.environ.get("LDP_LAB_OUT", "results/labs")) / lab
    path.mkdir(parents=True, exist_ok=True)
    return path


def exercise(text: str) -> bool:
    """Print an exercise; True when its solution should run (solutions switch on)."""
    print(f"\n[exercise] {text}")
    if not SOLUTIONS:
        print("  → your turn: write the code in this cell (set LDP_SOLUTIONS=1 to see ours)")
    return SOLUTIONS


@contextlib.asynccontextmanager
async def open_oracle(population: PopulationSpec) -> AsyncIterator[LROracle]:
    """An LR oracle over the population: in process, or over gRPC with client processes."""
    if TRANSPORT == "grpc":
        from ldp.wire.launcher import launch_local

        async with launch_local(population, processes=PROCESSES) as oracle:
            yield oracle
    else:
        yield InProcessLROracle(population)


@contextlib.asynccontextmanager
async def oracle_factory() -> AsyncIterator[OracleFactory]:
    """Oracles for a lab's many populations (trials, sizes): ``async with oracle_factory() as
    factory:`` then ``async with factory(spec) as oracle:`` for each population, one at a time.

    Over gRPC one cluster of ``PROCESSES`` client processes serves them all: the first population
    launches it, every later one arrives sealed with a key the clients got out of band
    (``ldp.wire.launcher.grpc_oracle_factory``), so a lab with 16 trials starts 2 processes, not
    32. In process, a fresh ``InProcessLROracle`` each (``ldp.experiment.factories``). Either way a
    population's ledgers and nonces start fresh, so the numbers are those of ``open_oracle``'s
    fresh launch and the same on both transports (ldp/wire/factory.py, tests/wire/test_load.py).
    """
    if TRANSPORT == "grpc":
        from ldp.wire.launcher import grpc_oracle_factory

        async with grpc_oracle_factory(PROCESSES) as factory:
            yield factory
    else:
        yield in_process_factory


def track(items: Iterable[T], description: str) -> Iterator[T]:
    """A progress bar over a lab's long loop (rich; plain lines when not on a terminal).

    In a notebook rich draws its bar with ipywidgets; without them (they are not a dependency) it
    would only warn, so there the loop just says what it does.
    """
    from rich import get_console
    from rich.progress import track as rich_track

    if get_console().is_jupyter and importlib.util.find_spec("ipywidgets") is None:
        print(f"{description} …", flush=True)
        yield from items
        return
    yield from rich_track(list(items), description=description)


def saved(path: Path) -> None:
    """Say where a figure was saved (returns nothing: a notebook cell ending with it shows no repr)."""
    print(f"figure saved: {path}")


def lab_result(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], notes: str = "", figures: Iterable[Path] = ()) -> ExperimentResult:
    """The lab's result as every experiment's (``ldp.experiment.ExperimentResult``): its main
    table, a note under it and the figures it saved.

    A lab's main part ends with ``RESULT = lab_result(...)`` (never in an exercise cell: the
    result is the same with solutions hidden). ``ldp-sim lab N``, ``ldp-sim run labN`` and a
    user's ``get_experiment("labN").run(...)`` return it (``ldp.simulations.labs.experiments``).
    Cells become plain Python numbers and text (numpy scalars included), so the JSON is exact.
    """

    def plain(v: Any) -> Any:
        v = v.item() if hasattr(v, "item") and getattr(v, "ndim", None) == 0 else v
        return v if isinstance(v, (int, float, str, bool)) or v is None else str(v)

    table = tuple(tuple(plain(v) for v in row) for row in rows)
    return ExperimentResult(title, tuple(columns), table, tuple(Path(f) for f in figures), notes)
