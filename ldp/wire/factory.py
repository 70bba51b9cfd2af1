"""Oracle factories over one set of client processes: each population arrives sealed.

What: an experiment over many populations (``separation``, ``sq-local``) takes an oracle factory:
``async with factory(spec) as oracle:`` serves ``spec``. Over gRPC one set of client processes
serves them all: the experiment seals each spec with a key it gave the clients out of band, and
the aggregator relays the blob (``GrpcLROracle.load``), reading and altering nothing
(docs/design.md §2a). ``SealedOracleFactory`` is that loop, once; ``GrpcOracleFactory``
(``ldp.wire.launcher``) launches its clients on this machine the first time, and
``RemoteOracleFactory`` (``ldp-sim serve``) waits for clients started elsewhere on standby
(``ldp-sim clients --seal-key-file F``: no data of their own).
Guarantee: one population at a time; each population is new data, so its ledgers and nonces
start fresh and the results equal a fresh ``InProcessLROracle``'s (tests/wire/test_load.py,
tests/cli/test_serve_remote.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator

from ldp.core.errors import LDPError, ParameterError
from ldp.core.population import PopulationSpec
from ldp.wire.aggregator import READY_TIMEOUT_S, GrpcAggregator, GrpcLROracle
from ldp.wire.sealed import seal_population

__all__ = ["SealedOracleFactory", "RemoteOracleFactory"]


class SealedOracleFactory:
    """``factory(spec)``: an async context manager yielding a ``GrpcLROracle`` for ``spec``.
    Subclasses say how the first population is served (``_first``)."""

    def __init__(self, seal_key: bytes, load_timeout_s: float = READY_TIMEOUT_S) -> None:
        self.load_timeout_s = load_timeout_s
        self.oracle: GrpcLROracle | None = None  # None until the first use
        self.populations = 0  # populations served so far
        self.load_seconds = 0.0  # wall time spent starting and loading (diagnostic)
        self._seal_key = seal_key  # the experiment's: the clients got it out of band only
        self._in_use = False
        self._closed = False

    def __call__(self, population: PopulationSpec) -> contextlib.AbstractAsyncContextManager[GrpcLROracle]:
        return self._use(population)

    async def _first(self, population: PopulationSpec) -> GrpcLROracle:
        """Serve the first population; returns the oracle every later one is loaded into."""
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def _use(self, population: PopulationSpec) -> AsyncIterator[GrpcLROracle]:
        if self._closed:
            raise LDPError("this oracle factory's client processes are shut down (its `async with` block has ended)")
        if self._in_use:
            raise ParameterError("an oracle factory over one cluster serves one population at a time: leave the previous `async with` first")
        self._in_use = True
        try:
            started = time.perf_counter()
            if self.oracle is None:
                self.oracle = await self._first(population)
            else:
                await self.oracle.load(population.description(), seal_population(self._seal_key, population), self.load_timeout_s)
            self.populations += 1
            self.load_seconds += time.perf_counter() - started
            yield self.oracle
        finally:
            self._in_use = False


class RemoteOracleFactory(SealedOracleFactory):
    """The experiment's side of ``ldp-sim serve`` for experiments over many populations: the
    clients connected to ``aggregator`` on standby; the first use waits (``wait_s``) until their
    claims cover every user, then every population is sealed and relayed."""

    def __init__(self, aggregator: GrpcAggregator, seal_key: bytes, *, wait_s: float = 600.0, load_timeout_s: float = READY_TIMEOUT_S) -> None:
        super().__init__(seal_key, load_timeout_s)
        self.aggregator = aggregator
        self.wait_s = wait_s

    async def _first(self, population: PopulationSpec) -> GrpcLROracle:
        await self.aggregator.wait_for_claims(self.wait_s)
        oracle = GrpcLROracle(self.aggregator)
        await oracle.load(population.description(), seal_population(self._seal_key, population), self.load_timeout_s)
        return oracle
