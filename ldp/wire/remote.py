"""Serving experiments over many populations to client processes on other machines.

What: ``RemoteOracleFactory`` is the experiment's side of ``ldp-sim serve`` for experiments that
run many populations (``separation``, ``sq-local``): the client processes were started elsewhere
on standby (``ldp-sim clients --seal-key-file F``: no data of their own, only the key that opens
sealed populations); ``factory(spec)`` seals ``spec`` with that key, has the aggregator relay it
(``GrpcLROracle.load``) and yields the oracle. The aggregator never reads a spec; each client
hosts its claim's part of every population and keeps its ledgers by the data's identity.
Guarantee: the same experiment gives the same results as in process (each population is new
data, so its ledgers and nonces start fresh, as a fresh ``InProcessLROracle``'s do).
Source: docs/design.md §2a (sealed Loads), docs/protocol.md ("Several machines").
"""

from __future__ import annotations

import contextlib
import time
from typing import AsyncIterator

from ldp.core.errors import ParameterError
from ldp.core.population import PopulationSpec
from ldp.wire.aggregator import READY_TIMEOUT_S, GrpcAggregator, GrpcLROracle
from ldp.wire.sealed import seal_population

__all__ = ["RemoteOracleFactory"]


class RemoteOracleFactory:
    """``factory(spec)``: an async context manager yielding a ``GrpcLROracle`` that serves ``spec``
    through the standby clients connected to ``aggregator`` (one population at a time)."""

    def __init__(self, aggregator: GrpcAggregator, seal_key: bytes, *, wait_s: float = 600.0, load_timeout_s: float = READY_TIMEOUT_S) -> None:
        self.aggregator = aggregator
        self.oracle = GrpcLROracle(aggregator)
        self.wait_s = wait_s
        self.load_timeout_s = load_timeout_s
        self.populations = 0
        self.load_seconds = 0.0
        self._seal_key = seal_key
        self._ready = False
        self._in_use = False

    def __call__(self, population: PopulationSpec) -> contextlib.AbstractAsyncContextManager[GrpcLROracle]:
        return self._use(population)

    @contextlib.asynccontextmanager
    async def _use(self, population: PopulationSpec) -> AsyncIterator[GrpcLROracle]:
        if self._in_use:
            raise ParameterError("an oracle factory serves one population at a time: leave the previous `async with` first")
        self._in_use = True
        try:
            started = time.perf_counter()
            if not self._ready:
                await self.aggregator.wait_for_claims(self.wait_s)
                self._ready = True
            await self.oracle.load(population.description(), seal_population(self._seal_key, population), self.load_timeout_s)
            self.populations += 1
            self.load_seconds += time.perf_counter() - started
            yield self.oracle
        finally:
            self._in_use = False
