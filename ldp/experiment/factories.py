"""The in-process ``OracleFactory``: a fresh ``InProcessLROracle`` per population.

What: ``async with in_process_factory(spec) as oracle`` for experiments over many populations
(``shape = "factory"``) run with ``--transport inprocess``; over gRPC the CLI passes
``ldp.wire.launcher.grpc_oracle_factory`` (one cluster of client processes, each population
loaded into it) instead. Source: docs/design.md §5.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ldp.core.population import PopulationSpec
from ldp.local.oracle import InProcessLROracle, LROracle

__all__ = ["in_process_factory"]


@asynccontextmanager
async def in_process_factory(population: PopulationSpec) -> AsyncIterator[LROracle]:
    """A fresh ``InProcessLROracle`` for ``population``, closed on exit."""
    oracle = InProcessLROracle(population)
    try:
        yield oracle
    finally:
        await oracle.close()
