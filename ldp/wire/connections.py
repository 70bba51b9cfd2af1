"""The aggregator's connection registry: who is connected, which users each holds, what happened.

What: ``ShardClaim`` (which users a client asks for) and the arithmetic of claims
(``claim_span``, ``shard_range``); ``Connection``, the aggregator's mutable record of one client
stream (its range, its pending rounds, ledger queries and loads, its write lock), which stays
inside ``ldp.wire``; ``ConnectionView``, the frozen, public snapshot of one connection that
observers and the classroom read; and ``ConnectionRegistry``, the state the aggregator's parts
share: the population served, the connections, the shards that departed, the event log and its
observers, and writes still finishing in the background.
Guarantees: a shard that departs is never offered a round again and its users are MISSING (with
a reason) until a client holds them again (``depart``); an event observer that raises never
breaks the aggregator (the failure becomes an event).
Source: docs/design.md §3 (the aggregator in parts).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import grpc
import numpy as np

from ldp.core.errors import ParameterError
from ldp.core.population import PopulationDescription
from ldp.local.messages import RoundReply
from ldp.local.oracle import ShardRange
from ldp.wire import codec
from ldp.wire.v1 import aggregator_pb2 as pb

__all__ = ["Connection", "ConnectionRegistry", "ConnectionView", "EventObserver", "ShardClaim", "claim_span", "shard_range"]

log = logging.getLogger("ldp.wire.aggregator")  # one logger for the aggregator's parts (operators filter on it)

# An event observer: called with each connect/disconnect/refusal line as it is logged.
EventObserver = Callable[[str], None]


@dataclass(frozen=True)
class ShardClaim:
    """Which users a client asks for: machine shard K of M, sub-shard j of P on that machine."""

    index: int
    count: int
    sub_index: int = 0
    sub_count: int = 1

    def __post_init__(self) -> None:
        # M and P travel as uint32 in Hello: a larger one is refused here, by name, not by protobuf
        if not (0 <= self.index < self.count < 2**32 and 0 <= self.sub_index < self.sub_count < 2**32):
            raise ParameterError(f"a shard is K/M with 0 ≤ K < M < 2^32 (and j/P likewise), got {self.index}/{self.count}, {self.sub_index}/{self.sub_count}")

    @property
    def key(self) -> str:
        return f"{self.index}/{self.count}" if self.sub_count == 1 else f"{self.index}/{self.count}.{self.sub_index}/{self.sub_count}"


def claim_span(claim: ShardClaim) -> tuple[Fraction, Fraction]:
    """The fraction [lo, hi) of any population that claim K/M (sub-shard j/P) holds."""
    width = Fraction(1, claim.count * claim.sub_count)
    lo = Fraction(claim.index, claim.count) + claim.sub_index * width
    return lo, lo + width


def shard_range(n: int, claim: ShardClaim) -> tuple[int, int]:
    """Users [lo, hi) of shard K/M (sub-shard j/P): client K of M holds [n·K/M, n·(K+1)/M)."""
    lo, hi = n * claim.index // claim.count, n * (claim.index + 1) // claim.count
    width = hi - lo
    return lo + width * claim.sub_index // claim.sub_count, lo + width * (claim.sub_index + 1) // claim.sub_count


@dataclass(frozen=True)
class ConnectionView:
    """A read-only snapshot of one client connection, for observers and the classroom.

    ``key`` is the shard key (``ShardClaim.key``); ``first_user``/``count`` the users it holds of
    the current population (0 users on standby); ``budget`` the per-user budget the client
    declared (its own: no message changes it); ``ready``: it holds the current population;
    ``established``: its handshake is over; ``closed``: it left or was cut off.
    """

    key: str
    claim: ShardClaim
    first_user: int
    count: int
    budget: float
    ready: bool
    established: bool
    closed: bool


@dataclass
class Connection:
    """One connected client process (one stream): the aggregator's own, mutable record of it.
    Only ``ldp.wire``'s aggregator parts use it; everyone else reads a ``ConnectionView``."""

    key: str
    claim: ShardClaim
    context: grpc.aio.ServicerContext
    first_user: int
    count: int
    budget: float = 0.0  # the per-user budget the client declared (its own; no message changes it)
    ready: bool = False  # holds the aggregator's current population (Welcome or Load confirmed)
    established: bool = False  # the handshake is over (a Load may be sent)
    closed: bool = False
    pending: dict[tuple[int, int], asyncio.Future[RoundReply | None]] = field(default_factory=dict)
    checks: dict[tuple[int, int], codec.ReplyCheck] = field(default_factory=dict)  # what each pending round asked
    ledger_pending: dict[int, asyncio.Future[np.ndarray | None]] = field(default_factory=dict)
    ledger_parts: dict[int, tuple[list[pb.LedgerReport], list[int]]] = field(default_factory=dict)  # parts, [bytes]
    load_pending: dict[int, asyncio.Future[pb.Ready | None]] = field(default_factory=dict)
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    close_reason: str = ""  # why the aggregator cut this client off (empty: it left by itself)
    dropped: int = 0  # messages dropped: undecodable, unsolicited, or for a round not awaited

    def view(self) -> ConnectionView:
        return ConnectionView(self.key, self.claim, self.first_user, self.count, float(self.budget), self.ready, self.established, self.closed)

    def forget_round(self, key: tuple[int, int]) -> asyncio.Future[RoundReply | None] | None:
        """Stop waiting for a round: later parts of its reply are dropped as they arrive."""
        self.checks.pop(key, None)
        return self.pending.pop(key, None)

    @property
    def busy(self) -> bool:
        """A round, ledger query or load is in flight."""
        return bool(self.pending or self.ledger_pending or self.load_pending)

    @property
    def buffered_bytes(self) -> int:
        """Bytes of reply and ledger parts received and not yet handed over (bounded by caps)."""
        return sum(c.bytes for c in self.checks.values()) + sum(b[0] for _, b in self.ledger_parts.values())

    async def send(self, messages: list[pb.ServerMessage]) -> bool:
        """Write messages in order; False if the stream is gone."""
        async with self.write_lock:  # parts of one round must not interleave with another's
            try:
                for m in messages:
                    await self.context.write(m)
                return True
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError, RuntimeError) as exc:
                log.info("shard %s: write failed (%s)", self.key, exc)
                return False

    def fail_pending(self) -> None:
        futures: list[asyncio.Future[Any]] = [*self.pending.values(), *self.ledger_pending.values(), *self.load_pending.values()]
        for fut in futures:
            if not fut.done():
                fut.set_result(None)

    def drop(self, what: str) -> None:
        """Count (and now and then log) a message dropped from this client."""
        self.dropped += 1
        if self.dropped <= 3 or self.dropped % 1000 == 0:
            log.info("shard %s: dropped %s (%d dropped so far)", self.key, what, self.dropped)


class ConnectionRegistry:
    """What the aggregator's parts share: the population served (``description``, None on
    standby), the connections by shard key, the shards that departed and their users, the
    event log (``events``) with its observers, and writes still finishing in the background."""

    def __init__(self, description: PopulationDescription | None) -> None:
        self.description = description
        self.connections: dict[str, Connection] = {}
        self.changed = asyncio.Event()
        self.closing = False
        self.close_reason = ""
        self.departed: set[str] = set()  # shards that disconnected and have not come back (named in load errors)
        self.lost: dict[str, ShardRange] = {}  # their user ranges: users of these are MISSING, not an error
        self.events: list[str] = []  # human-readable log of connects/disconnects (CLI shows it)
        self.event_observers: list[EventObserver] = []
        self.background: set[asyncio.Future[Any]] = set()  # writes still finishing after a round ended

    # --- events ---

    def notify(self, event: str) -> None:
        """Log a connect/disconnect/refusal, wake whoever waits for shards, tell the observers."""
        self.events.append(event)
        log.info(event)
        self.changed.set()
        for observer in list(self.event_observers):
            try:
                observer(event)
            except Exception as exc:  # noqa: BLE001 - an observer (a dashboard) must never break the server
                self.events.append(f"an event observer failed: {type(exc).__name__}: {codec.clip_text(str(exc), 200)}")

    # --- who holds what ---

    def live(self) -> list[Connection]:
        """Connections not closed, in user order."""
        return sorted((c for c in self.connections.values() if not c.closed), key=lambda c: c.first_user)

    @property
    def shards(self) -> list[ShardRange]:
        live = [c for c in self.connections.values() if c.ready and not c.closed]
        return [ShardRange(c.key, c.first_user, c.count) for c in sorted(live, key=lambda c: c.first_user)]

    def covered_users(self) -> int:
        return sum(s.count for s in self.shards)

    def established_keys(self) -> list[str]:
        return sorted(c.key for c in self.connections.values() if c.established)

    def claims_cover_everyone(self) -> bool:
        spans = sorted(claim_span(c.claim) for c in self.connections.values() if c.established and not c.closed)
        return sum((hi - lo for lo, hi in spans), Fraction(0)) == 1

    def gone_text(self) -> str:
        """' (disconnected: [...])' naming departed shards, for error messages ('' if none)."""
        return f" (disconnected: {sorted(self.departed)})" if self.departed else ""

    # --- comings and goings ---

    def release(self, conn: Connection) -> None:
        """Forget ``conn`` if it is still the registered one (a reservation, or a stream that ended)."""
        if self.connections.get(conn.key) is conn:
            del self.connections[conn.key]

    def depart(self, conn: Connection) -> None:
        """The connection is over (or being cut off): no round is offered to it any more, and its
        users are MISSING from now on (``departed``), until a client holds them again."""
        if conn.closed:
            return
        conn.closed = True
        if conn.established:
            self.departed.add(conn.key)
            if conn.ready and self.connections.get(conn.key) is conn:  # its users of the current population
                self.lost[conn.key] = ShardRange(conn.key, conn.first_user, conn.count)

    def arrive(self, conn: Connection) -> None:
        """A client holds ``conn``'s shard again: it is no longer departed."""
        self.departed.discard(conn.key)
        self.lost.pop(conn.key, None)

    async def expel(self, conn: Connection, reason: str) -> None:
        """Cut a client off: Close{reason} (if it can be written within 2 s), end its stream. Its
        pending rounds resolve (MISSING unless already answered) and its users are departed."""
        conn.close_reason = reason
        self.depart(conn)  # before anything awaits: the next round already sees it gone
        self.events.append(f"closed shard {conn.key}: {reason}")
        log.warning("closing shard %s: %s", conn.key, reason)
        try:
            await asyncio.wait_for(conn.send([pb.ServerMessage(close=pb.Close(reason=reason))]), 2.0)
        except (TimeoutError, Exception):  # noqa: BLE001 - it is being cut off anyway
            pass
        conn.stop.set()

    # --- writes that outlive the call that started them ---

    def finish_in_background(self, gathered: asyncio.Future[Any]) -> None:
        """Keep ``gathered`` (writes in flight) alive until done. Never cancel a write in flight: a
        cancelled grpc.aio write leaves the call unusable (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS on
        the next write); the connection's write lock orders later messages after it."""
        if gathered.done():
            return
        self.background.add(gathered)
        gathered.add_done_callback(self._forget_background)

    def _forget_background(self, task: asyncio.Future[Any]) -> None:
        self.background.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a failed write already marked its shard missing
