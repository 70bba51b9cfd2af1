"""What every lab shares: quick mode, the solutions switch, where figures go, and the oracle.

Environment variables (all optional):
- ``LDP_QUICK=1``       small sizes, each lab under a minute (the tests run labs this way);
- ``LDP_SOLUTIONS=0``   hide the solutions: exercise cells print their task instead of solving it;
- ``LDP_LAB_OUT=DIR``   where figures are saved (default ``results/labs``);
- ``LDP_TRANSPORT=grpc`` run against real client processes on loopback (``ldp-sim lab N`` sets it),
  ``LDP_PROCESSES=P``  how many (default 2).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import AsyncIterator, Iterable, Iterator, TypeVar

import matplotlib

matplotlib.use("Agg")  # labs run headless; figures are saved, never shown

from ldp.core.population import PopulationSpec  # noqa: E402
from ldp.local.oracle import InProcessLROracle, LROracle  # noqa: E402

T = TypeVar("T")

QUICK = os.environ.get("LDP_QUICK", "0") == "1"
SOLUTIONS = os.environ.get("LDP_SOLUTIONS", "1") != "0"
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
    """A progress bar over a lab's long loop (rich; plain lines when not on a terminal)."""
    from rich.progress import track as rich_track

    yield from rich_track(list(items), description=description)


def saved(path: Path) -> Path:
    print(f"figure saved: {path}")
    return path
