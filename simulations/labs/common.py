"""What every lab shares: quick mode, the solutions switch, where figures go, the oracle, and
``run`` (``asyncio.run`` that also works inside a notebook's kernel).

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
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import matplotlib

matplotlib.use("Agg")  # labs run headless; figures are saved, never shown

from ldp import run  # noqa: E402,F401  (the labs call run(...): asyncio.run that also works in a notebook)
from ldp.core.population import PopulationSpec  # noqa: E402
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
