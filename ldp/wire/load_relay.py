"""The aggregator's load relay: a new population, sealed by the experiment, to the connected clients.

What: ``LoadRelay.load`` checks that the connected clients can host a new population (each keeps
its claim K/M, j/P; together they hold every user), sends each its Load (the sealed blob and its
new range) and takes each Ready (``Handshake.check_ready``) that confirms it; ``on_ready`` takes
a Ready from a client's stream. The aggregator can neither read nor alter what it relays
(``ldp.wire.sealed``), so one set of client processes serves many small populations.
Guarantees: nothing is sent (and nothing changes) unless every connected client would hold at
least one user, together they would hold every user, and no round, ledger query or load is in
flight; the call returns within its timeout, naming every client that failed, disconnected or
did not confirm; writes in flight are never cancelled.
Source: docs/design.md §3, docs/protocol.md ("Load").
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable

from ldp.core.errors import LDPError, ParameterError
from ldp.core.population import PopulationDescription
from ldp.local.oracle import ShardRange
from ldp.wire.connections import Connection, ConnectionRegistry, shard_range
from ldp.wire.v1 import aggregator_pb2 as pb

__all__ = ["READY_TIMEOUT_S", "LoadRelay"]

log = logging.getLogger("ldp.wire.aggregator")

# How long the clients may take to confirm a Load (each generates the new population's records).
READY_TIMEOUT_S = 300.0

_Asked = dict[str, tuple[Connection, asyncio.Future[pb.Ready | None]]]


class LoadRelay:
    """Load → Ready for every connected client; ``check_ready`` says what is wrong with a Ready
    ('' if nothing), ``population_changed`` is called once the new population is being served."""

    def __init__(self, registry: ConnectionRegistry, check_ready: Callable[[pb.Ready, int, int], str], population_changed: Callable[[], None]) -> None:
        self.registry = registry
        self.check_ready = check_ready
        self.population_changed = population_changed
        self._load_ids = itertools.count(1)  # 0 is the Ready that answers Welcome

    async def load(self, description: PopulationDescription, sealed: bytes, timeout_s: float = READY_TIMEOUT_S) -> list[ShardRange]:
        """Relay a new population to every connected client; returns the new shard ranges
        (``GrpcAggregator.load`` says what is guaranteed)."""
        registry = self.registry
        conns, ranges = self.plan(description)
        # From here on the aggregator speaks about the new population: clients that connect now
        # are welcomed into it, and no old shard is offered to a round until it confirms.
        registry.description = description
        self.population_changed()
        registry.lost.clear()  # ranges of shards gone before name users of the old population
        confirmations = await self._relay(conns, ranges, sealed, timeout_s)
        failures = self._accept(confirmations, ranges, timeout_s)
        if failures:
            raise LDPError(f"loading a population of {description.size} users into the client processes failed: " + "; ".join(failures))
        log.info("loaded a population of %d users into %d shard(s)", description.size, len(conns))
        registry.changed.set()
        if registry.covered_users() != description.size:
            raise LDPError(
                f"the connected shards {[s.key for s in registry.shards]} hold {registry.covered_users()} of {description.size} users "
                f"of the new population{registry.gone_text()}"
            )
        return registry.shards

    def plan(self, description: PopulationDescription) -> tuple[list[Connection], dict[str, tuple[int, int]]]:
        """The connected clients and the user range each would hold of the new population, or an
        error before anything is sent: closed, nobody connected, a client still connecting, a
        round/ledger query/load in flight, a shard left empty, overlapping or uncovered users."""
        if self.registry.closing:
            raise LDPError("the aggregator is closed; cannot load a population")
        conns = self.registry.live()
        self._refuse_unsettled(conns)
        return conns, self._ranges(description, conns)

    def _refuse_unsettled(self, conns: list[Connection]) -> None:
        """An ``LDPError`` unless clients are connected, all established, none busy."""
        if not conns:
            raise LDPError(f"cannot load a population: no client process is connected{self.registry.gone_text()}")
        connecting = [c.key for c in conns if not c.established]
        if connecting:
            raise LDPError(f"cannot load a population while client(s) {connecting} are still connecting; wait for them first")
        busy = [c.key for c in conns if c.busy]
        if busy:
            raise LDPError(f"cannot load a population while a round, ledger query or load is in flight (shards {busy})")

    def _ranges(self, description: PopulationDescription, conns: list[Connection]) -> dict[str, tuple[int, int]]:
        """Each client's users of the new population; an error if one is empty, two overlap, or some user is held by nobody."""
        ranges: dict[str, tuple[int, int]] = {}
        for c in conns:
            lo, hi = shard_range(description.size, c.claim)
            if hi <= lo:
                raise ParameterError(
                    f"a population of {description.size} users leaves shard {c.key} with no users; use fewer client processes or more users"
                )
            ranges[c.key] = (lo, hi)
        spans = sorted(ranges.items(), key=lambda kv: kv[1])
        for (k1, (_, hi1)), (k2, (lo2, _)) in zip(spans, spans[1:]):
            if lo2 < hi1:
                raise LDPError(f"shards {k1} and {k2} would overlap in a population of {description.size} users")
        covered = sum(hi - lo for lo, hi in ranges.values())
        if covered != description.size:  # checked before anything is sent: the clients keep their population
            raise LDPError(
                f"the connected shards {[k for k, _ in spans]} would hold {covered} of the {description.size} users of the new population{self.registry.gone_text()}"
            )
        return ranges

    async def _relay(self, conns: list[Connection], ranges: dict[str, tuple[int, int]], sealed: bytes, timeout_s: float) -> _Asked:
        """Send each client its Load and wait (≤ ``timeout_s``) for the Readies; a future not
        done by then is cancelled. Writes in flight are never cancelled."""
        loop = asyncio.get_running_loop()
        futures: dict[str, tuple[Connection, int, asyncio.Future[pb.Ready | None]]] = {}
        sends = []
        for c in conns:
            c.ready = False
            lid = next(self._load_ids)
            fut: asyncio.Future[pb.Ready | None] = loop.create_future()
            c.load_pending[lid] = fut
            futures[c.key] = (c, lid, fut)
            lo, hi = ranges[c.key]
            message = pb.ServerMessage(load=pb.Load(load_id=lid, sealed_population=sealed, first_user=lo, user_count=hi - lo))
            sends.append(self._send_load(c, message, fut))
        gathered = asyncio.gather(*sends)
        try:
            await asyncio.wait([f for _, _, f in futures.values()], timeout=max(0.0, float(timeout_s)))
        finally:
            for c, lid, fut in futures.values():
                c.load_pending.pop(lid, None)
                if not fut.done():
                    fut.cancel()
            self.registry.finish_in_background(gathered)
        return {key: (c, fut) for key, (c, _, fut) in futures.items()}

    def _accept(self, confirmations: _Asked, ranges: dict[str, tuple[int, int]], timeout_s: float) -> list[str]:
        """Take each confirmed shard's new range and budget; one line per shard that failed."""
        failures = []
        for key, (c, fut) in confirmations.items():
            lo, hi = ranges[key]
            ready = None if fut.cancelled() else fut.result()
            if fut.cancelled():
                failures.append(f"shard {key} did not confirm within {timeout_s:g} s")
            elif ready is None:
                failures.append(f"shard {key} disconnected")
            elif problem := self.check_ready(ready, lo, hi):
                failures.append(f"shard {key}: {problem}")
            else:
                c.first_user, c.count, c.budget, c.ready = lo, hi - lo, ready.budget, True
        return failures

    async def _send_load(self, conn: Connection, message: pb.ServerMessage, fut: asyncio.Future[pb.Ready | None]) -> None:
        if not await conn.send([message]) and not fut.done():
            fut.set_result(None)

    def on_ready(self, conn: Connection, ready: pb.Ready) -> None:
        """A Ready from an established client: the answer to a Load (sent only while nothing else is in flight)."""
        fut = conn.load_pending.pop(ready.load_id, None)
        if fut is not None and not fut.done():
            fut.set_result(ready)
        else:
            conn.drop(f"a Ready for load {ready.load_id}, which is not awaited")
