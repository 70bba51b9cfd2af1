"""The aggregator: a grpc.aio server that client processes (shards) connect to, and the
``GrpcLROracle`` that runs local algorithms over it.

What: ``GrpcAggregator`` accepts one bidirectional stream per client process, tells each the user
range of its claim (Welcome), checks the public description the client declares (Ready: schema,
number of users, budget), and keeps the connected shards. It knows only the
``PopulationDescription``: never a record, a seed, a budget it could set, or a key
(docs/design.md §2a). ``GrpcLROracle`` is the
``LROracle`` over those shards: ``LROracle.run_round`` splits a round per shard (users of a
departed shard are MISSING; an id no shard ever held is an error before anything is sent),
``_exchange`` here sends each part and gathers replies, and the base class reassembles them in
user order.
``GrpcAggregator.load`` / ``GrpcLROracle.load`` relay a new population, sealed by the experiment, to
the connected clients (Load → Ready), so one set of client processes serves many small populations
(seeded trials); the aggregator can neither read nor alter what it relays (``ldp.wire.sealed``).
Guarantees: every round has a deadline — a shard that disconnects resolves to None at once, one
that misses the deadline resolves to None at the deadline, and its users are reported MISSING;
a late reply for an old round is discarded (replies are matched to (session, round)). Hostile
clients spoil only their own users' answers: every reply part is checked against what was asked
before any array is built (``codec.ReplyCheck``), buffers are capped, handshakes have deadlines,
and nothing a client sends raises out of the server (tests/wire/test_hostile_clients.py,
tests/wire/test_fuzz_aggregator.py). The aggregator never receives a record: clients only send
reports (tests/wire/test_privacy_wire.py).
Source: docs/design.md §3 (measured gRPC facts: create the server inside the running loop, bind
127.0.0.1:0 with so_reuseport=0, raise message limits, own Close message).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import grpc
import numpy as np

from ldp.core.errors import LDPError, ParameterError
from ldp.core.population import PopulationDescription
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import RoundReply, RoundRequest
from ldp.local.oracle import LROracle, ShardRange
from ldp.wire import codec
from ldp.wire.tls import ServerTLS
from ldp.wire.v1 import aggregator_pb2 as pb

__all__ = ["GrpcAggregator", "GrpcLROracle", "ShardClaim", "shard_range"]

log = logging.getLogger(__name__)
_TIMED_OUT = object()  # a handshake read that found nothing in time

SERVICE = "ldp.wire.v1.Aggregator"
# How long the clients may take to confirm a Load (each generates the new population's records).
READY_TIMEOUT_S = 300.0
# How long the aggregator waits for each handshake message: Hello after the stream opens, Ready
# after Welcome. A client prepares its records before it connects, so an honest one answers at
# once; a Hello without Ready must not hold a range for long (squatting): its reservation
# expires after this and the range is free again (the event log says so).
HANDSHAKE_TIMEOUT_S = 10.0
# Ledger reports beyond the 8 bytes per user they need (headers, parts).
LEDGER_SLACK_BYTES = 64 << 10


@dataclass(frozen=True)
class ShardClaim:
    """Which users a client asks for: machine shard K of M, sub-shard j of P on that machine."""

    index: int
    count: int
    sub_index: int = 0
    sub_count: int = 1

    def __post_init__(self) -> None:
        if not (0 <= self.index < self.count and 0 <= self.sub_index < self.sub_count):
            raise ParameterError(f"a shard is K/M with 0 ≤ K < M (and j/P likewise), got {self.index}/{self.count}, {self.sub_index}/{self.sub_count}")

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


@dataclass
class _Connection:
    """One connected client process (one stream)."""

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

    def forget_round(self, key: tuple[int, int]) -> asyncio.Future[RoundReply | None] | None:
        """Stop waiting for a round: later parts of its reply are dropped as they arrive."""
        self.checks.pop(key, None)
        return self.pending.pop(key, None)

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


def _log_stream_end(key: str, task: asyncio.Future[Any]) -> None:
    """Done-callback of a client stream's tasks: retrieve an exception that ended one (logged)."""
    if not task.cancelled() and task.exception() is not None:
        log.info("shard %s: stream ended: %s", key, task.exception())


class GrpcAggregator:
    """A grpc.aio server for one population; create and use it inside one running event loop.

    ``capture``: if a list is given, every raw message received from a client is appended as the
    exact bytes that arrived (for the test that no record ever crosses the wire).
    ``handshake_timeout_s``: how long each handshake message may take (Hello; Ready after
    Welcome); a client that says Hello and never Ready loses its reservation after it.
    ``description`` None: the clients wait on *standby* (no data of their own) until ``load``
    relays a sealed population; ``wait_for_claims`` waits until their claims cover everyone.
    ``tls`` (``ldp.wire.tls.server_tls``): serve over TLS, and only enrolled clients (a client
    certificate from the CA, or the shared token) may claim a shard; None: plaintext (loopback).

    Hostile clients (docs/protocol.md, "Validation"): every reply part is checked against what its
    shard was asked before any array is built (``codec.ReplyCheck``); a bad one makes that shard's
    users of that request ERROR, with a reason naming the shard and the problem, and touches
    nothing else; parts for a round not awaited, unsolicited ledger parts and undecodable
    messages are dropped at once; the bytes a round's reply may take are capped (past the cap the
    shard's users are ERROR and the client is cut off). Nothing a client sends raises out of here.
    """

    def __init__(
        self,
        description: PopulationDescription | None,
        bind: str = "127.0.0.1:0",
        capture: list[bytes] | None = None,
        *,
        handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
        tls: ServerTLS | None = None,
    ) -> None:
        self.description = description
        self.tls = tls
        self.bind = bind
        self.capture = capture
        self.port = 0
        self._server: grpc.aio.Server | None = None
        self._connections: dict[str, _Connection] = {}
        self._changed = asyncio.Event()
        self._closing = False
        self._close_reason = ""
        self._ledger_ids = itertools.count(1)
        self._load_ids = itertools.count(1)  # 0 is the Ready that answers Welcome
        self._departed: set[str] = set()  # shards that disconnected and have not come back (named in load errors)
        self._lost: dict[str, ShardRange] = {}  # their user ranges: users of these are MISSING, not an error
        self._formats: dict[str, codec.ReportFormat] = {}  # report format per randomizer spec (cache)
        self.handshake_timeout_s = float(handshake_timeout_s)  # per handshake message (Hello; Ready after Welcome)
        self.events: list[str] = []  # human-readable log of connects/disconnects (CLI shows it)
        self._background: set[asyncio.Future[Any]] = set()  # writes still finishing after a round ended

    # --- lifecycle ---

    async def start(self) -> int:
        """Bind and start serving; returns the port (chosen by the OS when the bind says :0)."""
        options = codec.channel_options() + [
            ("grpc.so_reuseport", 0),  # a second server must not silently share a busy port
            ("grpc.server.max_pending_requests", 4096),
        ]
        server = grpc.aio.server(options=options)
        capture = self.capture

        def deserialize(data: bytes) -> pb.ClientMessage | None:
            if capture is not None:
                capture.append(bytes(data))
            try:
                return pb.ClientMessage.FromString(data)
            except Exception:  # noqa: BLE001 - undecodable bytes: None, which the reader drops
                return None

        handler = grpc.stream_stream_rpc_method_handler(
            self._connect, request_deserializer=deserialize, response_serializer=pb.ServerMessage.SerializeToString
        )
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Connect": handler}),))
        port = server.add_secure_port(self.bind, self.tls.credentials) if self.tls is not None else server.add_insecure_port(self.bind)
        if port == 0:
            raise LDPError(f"cannot bind the aggregator to {self.bind} (address in use or not local?)")
        await server.start()
        self._server, self.port = server, port
        return port

    @property
    def address(self) -> str:
        host = self.bind.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    async def close(self, reason: str = "the aggregator is shutting down", grace_s: float = 1.0, failed: bool = False) -> None:
        """Send Close to every client, end their streams, stop the server.

        ``failed=True`` says the experiment failed (timeout, interrupt, error): the clients then
        exit with code 3 (``EXIT_RUN_FAILED``) instead of 0."""
        self._closing, self._close_reason = True, reason
        conns = list(self._connections.values())
        close = pb.ServerMessage(close=pb.Close(reason=reason, failed=failed))
        try:
            await asyncio.gather(*(c.send([close]) for c in conns), return_exceptions=True)
        finally:
            # Even when the sends are cancelled (Ctrl-C during a run), the server is stopped here:
            # left to the garbage collector after the loop closes, grpc's Server.__del__ prints a
            # traceback ("Event loop is closed").
            for c in conns:
                c.stop.set()
                c.fail_pending()
            if self._server is not None:
                server, self._server = self._server, None
                await server.stop(grace_s)

    async def __aenter__(self) -> GrpcAggregator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- shards ---

    @property
    def shards(self) -> list[ShardRange]:
        live = [c for c in self._connections.values() if c.ready and not c.closed]
        return [ShardRange(c.key, c.first_user, c.count) for c in sorted(live, key=lambda c: c.first_user)]

    def covered_users(self) -> int:
        return sum(s.count for s in self.shards)

    @property
    def departed(self) -> list[ShardRange]:
        """Shards that held users of the current population and are gone (disconnected or cut
        off) and have not come back: their users are MISSING in every round, with a reason."""
        return sorted(self._lost.values(), key=lambda s: s.first_user)

    def buffered_bytes(self) -> int:
        """Bytes of unfinished reply and ledger parts held for all connections (each capped)."""
        return sum(c.buffered_bytes for c in self._connections.values())

    def claims_cover_everyone(self) -> bool:
        """True when the established connections' claims tile [0, 1): every user of any
        population would be held (their spans never overlap: ``_handshake`` refuses that)."""
        spans = sorted(claim_span(c.claim) for c in self._connections.values() if c.established and not c.closed)
        return sum((hi - lo for lo, hi in spans), Fraction(0)) == 1

    async def wait_for_claims(self, timeout_s: float) -> list[str]:
        """Wait until the connected (standby) clients' claims cover every user; returns their keys."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        while not self.claims_cover_everyone():
            self._changed.clear()
            remaining = end - loop.time()
            if remaining <= 0:
                have = sorted(c.key for c in self._connections.values() if c.established)
                raise LDPError(f"timed out after {timeout_s:g} s waiting for client processes whose claims cover every user (connected: {have or 'none'})")
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                pass
        return sorted(c.key for c in self._connections.values() if c.established)

    async def wait_for_shards(self, timeout_s: float, users: int | None = None) -> list[ShardRange]:
        """Wait until connected shards hold ``users`` users (default: the whole population)."""
        if self.description is None and users is None:
            raise LDPError("this aggregator serves standby clients: wait_for_claims, then load a population")
        want = self.description.size if users is None else users  # type: ignore[union-attr]
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        while self.covered_users() < want:
            self._changed.clear()
            remaining = end - loop.time()
            if remaining <= 0:
                raise LDPError(
                    f"timed out after {timeout_s:g} s waiting for client processes: shards hold {self.covered_users()} of {want} users "
                    f"(connected: {[s.key for s in self.shards] or 'none'})"
                )
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                pass
        return self.shards

    def _notify(self, event: str) -> None:
        self.events.append(event)
        log.info(event)
        self._changed.set()

    # --- the stream of one client process ---

    async def _connect(self, request_iterator: AsyncIterator[pb.ClientMessage], context: grpc.aio.ServicerContext) -> None:
        conn: _Connection | None = None
        tasks: list[asyncio.Future[Any]] = []
        try:
            conn = await self._handshake(context)
            if conn is None:
                return
            key = conn.key
            reader = asyncio.ensure_future(self._read_loop(conn))
            stopper = asyncio.ensure_future(conn.stop.wait())
            tasks = [reader, stopper]
            for t in tasks:
                # A read cancelled while the call is finishing ends with grpc's "RPC already
                # finished" instead of CancelledError: retrieve (and log) it whenever it ends, so
                # shutdown never prints "Task exception was never retrieved".
                t.add_done_callback(functools.partial(_log_stream_end, key))
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # noqa: BLE001 - one broken client must not disturb the server
            log.warning("a client stream failed: %s: %s", type(exc).__name__, exc)
        finally:
            for t in tasks:
                t.cancel()
            if conn is not None:
                self._depart(conn)
                conn.fail_pending()  # after _depart: a round in flight sees the shard as departed
                conn.checks.clear()
                conn.ledger_parts.clear()
                if self._connections.get(conn.key) is conn:
                    del self._connections[conn.key]
                why = f": {conn.close_reason}" if conn.close_reason else ""
                self._notify(f"shard {conn.key} disconnected (users {conn.first_user}..{conn.first_user + conn.count - 1}){why}")

    def _depart(self, conn: _Connection) -> None:
        """The connection is over (or being cut off): no round is offered to it any more, and its
        users are MISSING from now on (``departed``), until a client holds them again."""
        if conn.closed:
            return
        conn.closed = True
        if conn.established:
            self._departed.add(conn.key)
            if conn.ready and self._connections.get(conn.key) is conn:  # its users of the current population
                self._lost[conn.key] = ShardRange(conn.key, conn.first_user, conn.count)

    async def _reject(self, context: grpc.aio.ServicerContext, reason: str) -> None:
        self.events.append(f"rejected a client: {reason}")
        try:
            await context.write(pb.ServerMessage(close=pb.Close(reason=reason)))
        except Exception:  # noqa: BLE001 - the client may already be gone; nothing to do
            pass

    async def _read_within(self, context: grpc.aio.ServicerContext) -> Any:
        """The next message of a handshake (None: undecodable), or _TIMED_OUT if none comes in time."""
        try:
            return await asyncio.wait_for(context.read(), self.handshake_timeout_s)
        except TimeoutError:
            return _TIMED_OUT

    async def _handshake(self, context: grpc.aio.ServicerContext) -> _Connection | None:
        msg = await self._read_within(context)
        if msg is _TIMED_OUT:
            await self._reject(context, f"protocol error: no Hello within {self.handshake_timeout_s:g} s")
            return None
        if msg is grpc.aio.EOF or msg is None or msg.WhichOneof("kind") != "hello":
            await self._reject(context, "protocol error: the first message must be Hello")
            return None
        hello = msg.hello
        if self.tls is not None:
            problem = self.tls.problem(context)
            if problem:  # not enrolled: no claim, no range, and the reason says why
                await self._reject(context, problem)
                return None
        if hello.protocol_version != codec.PROTOCOL_VERSION:
            await self._reject(
                context,
                f"protocol version mismatch: the client speaks version {hello.protocol_version}, "
                f"this aggregator speaks version {codec.PROTOCOL_VERSION}",
            )
            return None
        if self._closing:
            await self._reject(context, self._close_reason or "the aggregator is shutting down")
            return None
        try:
            claim = ShardClaim(hello.shard_index, hello.shard_count, hello.sub_index, hello.sub_count or 1)
        except ParameterError as exc:
            await self._reject(context, str(exc))
            return None
        if self.description is None:  # standby: claims are fractions of whatever population comes
            span = claim_span(claim)
            for other in self._connections.values():
                other_span = claim_span(other.claim)
                if span[0] < other_span[1] and other_span[0] < span[1]:
                    await self._reject(context, f"shard {claim.key} overlaps connected shard {other.key}")
                    return None
            lo = hi = 0
        else:
            lo, hi = shard_range(self.description.size, claim)
            for other in self._connections.values():
                if lo < other.first_user + other.count and other.first_user < hi:
                    await self._reject(
                        context, f"shard {claim.key} (users {lo}..{hi - 1}) overlaps connected shard {other.key} (users {other.first_user}..{other.first_user + other.count - 1})"
                    )
                    return None
            if hi <= lo:
                await self._reject(context, f"shard {claim.key} holds no users of a population of {self.description.size}")
                return None
        conn = _Connection(claim.key, claim, context, lo, hi - lo)
        self._connections[conn.key] = conn  # reserve the range while the client generates records
        try:
            return await self._welcome(context, conn, hello.client_name)
        except BaseException:
            if self._connections.get(conn.key) is conn:  # release the reservation
                del self._connections[conn.key]
            raise

    async def _welcome(self, context: grpc.aio.ServicerContext, conn: _Connection, client_name: str) -> _Connection | None:
        lo, hi = conn.first_user, conn.first_user + conn.count
        welcome = pb.Welcome(protocol_version=codec.PROTOCOL_VERSION, first_user=lo, user_count=hi - lo, shard_key=conn.key)
        if not await conn.send([pb.ServerMessage(welcome=welcome)]):
            del self._connections[conn.key]
            return None
        msg = await self._read_within(context)
        if msg is _TIMED_OUT:  # a Hello without Ready must not squat a range: the reservation expires
            if self._connections.get(conn.key) is conn:
                del self._connections[conn.key]
            problem = f"no Ready within {self.handshake_timeout_s:g} s after Welcome; users {lo}..{hi - 1} are free again"
            self._notify(f"shard {conn.key} reservation expired: {problem}")  # logged before the client hears it
            await self._reject(context, f"shard {conn.key}: {problem}")
            return None
        problem = "" if msg is not grpc.aio.EOF and msg is not None and msg.WhichOneof("kind") == "ready" else "expected Ready"
        if not problem:
            problem = self._check_ready(msg.ready, lo, hi)
        if problem:
            del self._connections[conn.key]
            self._notify(f"shard {conn.key} refused: {problem}")  # logged before the client hears it
            await self._reject(context, f"shard {conn.key}: {problem}")
            return None
        conn.budget = msg.ready.budget
        conn.established = True
        conn.ready = self.description is not None  # a standby client holds no users until a Load
        self._departed.discard(conn.key)
        self._lost.pop(conn.key, None)
        who = self.tls.identity(context) if self.tls is not None else None
        held = f"users {lo}..{hi - 1}" if conn.ready else "standby"
        self._notify(f"shard {conn.key} connected ({who or client_name or 'client'}, {held})")
        return conn

    def _check_ready(self, ready: pb.Ready, lo: int, hi: int) -> str:
        """'' if a Ready confirms users [lo, hi) of the expected population, else what is wrong."""
        if ready.error:
            return f"the client could not host users {lo}..{hi - 1}: {codec.clip_text(ready.error)}"
        if (ready.first_user, ready.user_count) != (lo, hi - lo):
            return f"the client confirmed users {ready.first_user}+{ready.user_count} instead of {lo}..{hi - 1}"
        if self.description is None:
            return "" if not ready.description_json else "this aggregator serves standby clients, but the client holds data of its own"
        try:
            declared = PopulationDescription.from_json(json.loads(ready.description_json))
        except Exception as exc:  # noqa: BLE001 - whatever a client declares, the answer is a reason
            return f"the client's description does not parse: {codec.clip_text(str(exc), 300)}"
        if declared != self.description:
            return (
                f"the client holds {declared.size} users with fields {[f.name for f in declared.schema]}, "
                f"but this experiment expects {self.description.size} users with fields {[f.name for f in self.description.schema]}"
            )
        return ""

    async def _read_loop(self, conn: _Connection) -> None:
        """Read one client's messages until its stream ends or it is cut off. Each message is
        handled by ``_on_message``, which never raises on anything a client sends; a reason from it
        (a reply past its byte cap) cuts the client off."""
        while True:
            msg = await conn.context.read()
            if msg is grpc.aio.EOF:
                return
            try:
                reason = self._on_message(conn, msg)
            except Exception as exc:  # noqa: BLE001 - a bug here must not take the server down
                log.exception("shard %s: a message could not be handled", conn.key)
                reason = f"shard {conn.key}: the aggregator could not handle a message ({type(exc).__name__}); the connection is closed"
                for key in list(conn.pending):
                    self._resolve(conn, key, RoundReply(key[0], key[1], error=reason))
            if reason:
                await self._expel(conn, reason)
                return

    def _drop(self, conn: _Connection, what: str) -> None:
        conn.dropped += 1
        if conn.dropped <= 3 or conn.dropped % 1000 == 0:
            log.info("shard %s: dropped %s (%d dropped so far)", conn.key, what, conn.dropped)

    def _on_message(self, conn: _Connection, msg: pb.ClientMessage | None) -> str:
        """Handle one message from an established client; '' or the reason to cut it off."""
        if msg is None:
            self._drop(conn, "a message that does not decode")
            return ""
        kind = msg.WhichOneof("kind")
        if kind == "reply":
            return self._on_reply(conn, msg.reply)
        if kind == "ledger":
            return self._on_ledger(conn, msg.ledger)
        if kind == "ready":
            # The answer to a Load (sent only while no round or ledger query is in flight).
            rfut = conn.load_pending.pop(msg.ready.load_id, None)
            if rfut is not None and not rfut.done():
                rfut.set_result(msg.ready)
            else:
                self._drop(conn, f"a Ready for load {msg.ready.load_id}, which is not awaited")
            return ""
        self._drop(conn, f"an unexpected {kind or 'empty'} message")
        return ""

    def _on_reply(self, conn: _Connection, part: pb.RoundReply) -> str:
        key = (int(part.session_id), int(part.round))
        fut, check = conn.pending.get(key), conn.checks.get(key)
        if fut is None or fut.done() or check is None:  # a late reply, or one never asked for
            self._drop(conn, f"a reply part for session {key[0]} round {key[1]}, which is not awaited")
            return ""
        reason = check.add(part)
        if reason:
            self._resolve(conn, key, check.fail_all(reason))
            return reason
        if part.final:
            reply = check.finish()
            for failure in check.failures:
                log.warning("%s", failure)
                self.events.append(failure)
            self._resolve(conn, key, reply)
        return ""

    def _resolve(self, conn: _Connection, key: tuple[int, int], reply: RoundReply) -> None:
        fut = conn.forget_round(key)
        if fut is not None and not fut.done():
            fut.set_result(reply)

    def _on_ledger(self, conn: _Connection, part: pb.LedgerReport) -> str:
        qid = int(part.query_id)
        fut = conn.ledger_pending.get(qid)
        if fut is None or fut.done():
            self._drop(conn, f"a ledger part for query {qid}, which is not awaited")
            return ""
        parts, size = conn.ledger_parts.setdefault(qid, ([], [0]))
        size[0] += part.ByteSize() + codec.PART_OVERHEAD_BYTES
        cap = conn.count * 8 + LEDGER_SLACK_BYTES
        if size[0] > cap:
            reason = f"shard {conn.key} sent more than {cap} bytes of ledger report for its {conn.count} users; the connection is closed"
            conn.ledger_parts.pop(qid, None)
            conn.ledger_pending.pop(qid, None)
            fut.set_exception(LDPError(reason))
            return reason
        parts.append(part)
        if not part.final:
            return ""
        conn.ledger_parts.pop(qid, None)
        conn.ledger_pending.pop(qid, None)
        units = codec.decode_ledger(parts) if sum(len(p.spent_units) for p in parts) % 8 == 0 else None
        if units is None or len(units) != conn.count or parts[0].first_user != conn.first_user:
            fut.set_exception(
                LDPError(
                    f"shard {conn.key} sent a malformed ledger report: {sum(len(p.spent_units) for p in parts)} bytes from user "
                    f"{parts[0].first_user} for its users {conn.first_user}..{conn.first_user + conn.count - 1} ({conn.count * 8} bytes)"
                )
            )
        else:
            fut.set_result(units)
        return ""

    async def _expel(self, conn: _Connection, reason: str) -> None:
        """Cut a client off: Close{reason} (if it can be written within 2 s), end its stream. Its
        pending rounds resolve (MISSING unless already answered) and its users are departed."""
        conn.close_reason = reason
        self._depart(conn)  # before anything awaits: the next round already sees it gone
        self.events.append(f"closed shard {conn.key}: {reason}")
        log.warning("closing shard %s: %s", conn.key, reason)
        try:
            await asyncio.wait_for(conn.send([pb.ServerMessage(close=pb.Close(reason=reason))]), 2.0)
        except (TimeoutError, Exception):  # noqa: BLE001 - it is being cut off anyway
            pass
        conn.stop.set()

    # --- rounds ---

    async def exchange(self, sent: dict[str, RoundRequest], deadline_s: float) -> dict[str, RoundReply | None]:
        """Send each shard its request; gather replies until the deadline (None = missing)."""
        if not sent:  # every user asked is held by a departed shard: nothing to send
            return {}
        loop = asyncio.get_running_loop()
        futures: dict[str, asyncio.Future[RoundReply | None]] = {}
        sends = []
        for key, request in sent.items():
            conn = self._connections.get(key)
            if conn is not None and (request.session_id, request.round) in conn.pending:
                raise ParameterError(f"session {request.session_id} round {request.round} is already in flight to shard {key}")
        for key, request in sent.items():
            fut: asyncio.Future[RoundReply | None] = loop.create_future()
            futures[key] = fut
            conn = self._connections.get(key)
            if conn is None or conn.closed:
                fut.set_result(None)
                continue
            conn.pending[(request.session_id, request.round)] = fut
            conn.checks[(request.session_id, request.round)] = self._reply_check(conn, request)
            sends.append(self._send_round(conn, request, fut))
        # Encoding and writing happen concurrently per shard; the deadline covers both.
        gathered = asyncio.gather(*sends)
        try:
            await asyncio.wait(futures.values(), timeout=max(0.0, float(deadline_s)))
        except BaseException:
            # Cancelled (Ctrl-C, an enclosing timeout): forget this round, so the connections do
            # not look busy forever (a later Load refuses to run while a round is in flight).
            for key, fut in futures.items():
                fut.cancel()
                conn = self._connections.get(key)
                if conn is not None:
                    conn.forget_round((sent[key].session_id, sent[key].round))
            raise
        finally:
            if not gathered.done():
                # Never cancel a write in flight: a cancelled grpc.aio write leaves the call
                # unusable (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS on the next write), and replies can
                # arrive before the last write() has returned. Let the writes finish in the
                # background; the connection's write lock orders later rounds after them, and a
                # shard that stopped reading only makes its own later rounds miss their deadlines.
                self._background.add(gathered)
                gathered.add_done_callback(self._forget_background)
        out: dict[str, RoundReply | None] = {}
        for key, fut in futures.items():
            if fut.done():
                out[key] = fut.result()
            else:
                fut.cancel()
                out[key] = None
                request = sent[key]
                conn = self._connections.get(key)
                if conn is not None:  # a late reply for this round will find no future: dropped
                    conn.forget_round((request.session_id, request.round))
                self.events.append(f"shard {key} missed the {deadline_s:g} s deadline of session {request.session_id} round {request.round}")
        return out

    def _reply_check(self, conn: _Connection, request: RoundRequest) -> codec.ReplyCheck:
        """What a correct reply of ``conn`` to ``request`` carries (checked part by part)."""
        expected = [codec.Expected(a.request_id, len(a.users), self._report_format(a.randomizer)) for a in request.assignments]
        return codec.ReplyCheck(conn.key, request.session_id, request.round, expected)

    def loaded(self) -> PopulationDescription:
        """The description of the population being served; an ``LDPError`` on standby (before
        any Load), which is when no round can be asked."""
        if self.description is None:
            raise LDPError("the aggregator is on standby: no population has been loaded yet")
        return self.description

    def _report_format(self, spec: RandomizerSpec) -> codec.ReportFormat:
        """``codec.report_format`` for the current population's schema, cached per spec."""
        try:
            key = json.dumps(spec.to_json(), sort_keys=True, allow_nan=True, default=repr)
        except Exception:  # noqa: BLE001 - an unusual spec is derived every time
            return codec.report_format(spec, self.loaded().schema)
        fmt = self._formats.get(key)
        if fmt is None:
            if len(self._formats) >= 1024:
                self._formats.clear()
            fmt = self._formats[key] = codec.report_format(spec, self.loaded().schema)
        return fmt

    def _forget_background(self, task: asyncio.Future[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a failed write already marked its shard missing

    async def _send_round(self, conn: _Connection, request: RoundRequest, fut: asyncio.Future[RoundReply | None]) -> None:
        ok = await conn.send(codec.encode_request(request))
        if not ok and not fut.done():
            fut.set_result(None)

    # --- a new population for the connected clients ---

    async def load(self, description: PopulationDescription, sealed: bytes, timeout_s: float = READY_TIMEOUT_S) -> list[ShardRange]:
        """Relay a new population, sealed by the experiment, to every connected client; returns
        the new shard ranges.

        ``description`` is the public part the experiment tells the aggregator (schema, size);
        ``sealed`` is opaque here (``ldp.wire.sealed``). Each client keeps its claim K/M (j/P),
        opens the blob, hosts that part of the new population (ledgers of data it has seen
        continue; session state is new) and confirms with Ready, declaring the description,
        which must match. Guarantees: nothing is sent (and nothing changes) unless every connected client would
        hold at least one user, together they would hold every user, and no round, ledger query or
        load is in flight (else ``LDPError``/``ParameterError``, naming shards that disconnected);
        the call returns within ``timeout_s`` — a client that fails, disconnects or does not
        confirm in time is named in an ``LDPError`` (and holds no users until the next load).
        On success the connected shards cover the whole new population.
        """
        conns, ranges = self._load_plan(description)
        # From here on the aggregator speaks about the new population: clients that connect now
        # are welcomed into it, and no old shard is offered to a round until it confirms.
        self.description = description
        self._formats.clear()  # report formats depend on the schema
        self._lost.clear()  # ranges of shards gone before name users of the old population
        confirmations = await self._relay_load(conns, ranges, sealed, timeout_s)
        failures = self._accept_readies(confirmations, ranges, timeout_s)
        if failures:
            raise LDPError(f"loading a population of {description.size} users into the client processes failed: " + "; ".join(failures))
        log.info("loaded a population of %d users into %d shard(s)", description.size, len(conns))
        self._changed.set()
        if self.covered_users() != description.size:
            gone = f" (disconnected: {sorted(self._departed)})" if self._departed else ""
            raise LDPError(
                f"the connected shards {[s.key for s in self.shards]} hold {self.covered_users()} of {description.size} users of the new population{gone}"
            )
        return self.shards

    def _load_plan(self, description: PopulationDescription) -> tuple[list[_Connection], dict[str, tuple[int, int]]]:
        """The connected clients and the user range each would hold of the new population, or an
        error before anything is sent: closed, nobody connected, a client still connecting, a
        round/ledger query/load in flight, a shard left empty, overlapping or uncovered users."""
        if self._closing:
            raise LDPError("the aggregator is closed; cannot load a population")
        conns = sorted((c for c in self._connections.values() if not c.closed), key=lambda c: c.first_user)
        gone = f" (disconnected: {sorted(self._departed)})" if self._departed else ""
        if not conns:
            raise LDPError(f"cannot load a population: no client process is connected{gone}")
        connecting = [c.key for c in conns if not c.established]
        if connecting:
            raise LDPError(f"cannot load a population while client(s) {connecting} are still connecting; wait for them first")
        busy = [c.key for c in conns if c.pending or c.ledger_pending or c.load_pending]
        if busy:
            raise LDPError(f"cannot load a population while a round, ledger query or load is in flight (shards {busy})")
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
                f"the connected shards {[k for k, _ in spans]} would hold {covered} of the {description.size} users of the new population{gone}"
            )
        return conns, ranges

    async def _relay_load(
        self, conns: list[_Connection], ranges: dict[str, tuple[int, int]], sealed: bytes, timeout_s: float
    ) -> dict[str, tuple[_Connection, asyncio.Future[pb.Ready | None]]]:
        """Send each client its Load and wait (≤ ``timeout_s``) for the Readies; a future not
        done by then is cancelled. Writes in flight are never cancelled (see ``exchange``)."""
        loop = asyncio.get_running_loop()
        futures: dict[str, tuple[_Connection, int, asyncio.Future[pb.Ready | None]]] = {}
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
            if not gathered.done():
                self._background.add(gathered)
                gathered.add_done_callback(self._forget_background)
        return {key: (c, fut) for key, (c, _, fut) in futures.items()}

    def _accept_readies(
        self, confirmations: dict[str, tuple[_Connection, asyncio.Future[pb.Ready | None]]], ranges: dict[str, tuple[int, int]], timeout_s: float
    ) -> list[str]:
        """Take each confirmed shard's new range and budget; one line per shard that failed."""
        failures = []
        for key, (c, fut) in confirmations.items():
            lo, hi = ranges[key]
            ready = None if fut.cancelled() else fut.result()
            if fut.cancelled():
                failures.append(f"shard {key} did not confirm within {timeout_s:g} s")
            elif ready is None:
                failures.append(f"shard {key} disconnected")
            elif problem := self._check_ready(ready, lo, hi):
                failures.append(f"shard {key}: {problem}")
            else:
                c.first_user, c.count, c.budget, c.ready = lo, hi - lo, ready.budget, True
        return failures

    async def _send_load(self, conn: _Connection, message: pb.ServerMessage, fut: asyncio.Future[pb.Ready | None]) -> None:
        if not await conn.send([message]) and not fut.done():
            fut.set_result(None)

    async def ledger_spent_units(self, timeout_s: float = 30.0) -> np.ndarray:
        """Every user's spent budget (exact ledger units) in user order, asked from the shards.

        A diagnostic for tests and labs: the aggregator could compute the same numbers from its
        own requests and the refusals it saw, so it learns nothing new about any record.
        """
        loop = asyncio.get_running_loop()
        shards = self.shards
        futs = []
        for s in shards:
            fut: asyncio.Future[np.ndarray | None] = loop.create_future()
            conn = self._connections.get(s.key)
            if conn is None:  # it left while the queries were being sent: reported below
                fut.set_result(None)
                futs.append(fut)
                continue
            qid = next(self._ledger_ids)
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # a malformed report may go unawaited
            conn.ledger_pending[qid] = fut
            futs.append(fut)
            await conn.send([pb.ServerMessage(ledger_query=pb.LedgerQuery(query_id=qid))])
        parts = await asyncio.wait_for(asyncio.gather(*futs), timeout_s)
        missing = [s.key for s, p in zip(shards, parts) if p is None]
        if missing:
            raise LDPError(f"shards {missing} disconnected before reporting their ledgers")
        return np.concatenate([p for p in parts if p is not None]) if parts else np.zeros(0, dtype=np.int64)


class GrpcLROracle(LROracle):
    """The LR oracle over a ``GrpcAggregator``'s connected shards (same interface and results
    as ``InProcessLROracle``)."""

    def __init__(self, aggregator: GrpcAggregator) -> None:
        super().__init__()
        self.aggregator = aggregator
        self.clients: list[Any] = []  # ClientProcess handles when started by launch_local

    @property
    def description(self) -> PopulationDescription:
        return self.aggregator.loaded()

    @property
    def shards(self) -> list[ShardRange]:
        return self.aggregator.shards

    @property
    def departed(self) -> list[ShardRange]:
        return self.aggregator.departed

    async def load(self, description: PopulationDescription, sealed: bytes, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Serve another population from now on, with the same client processes
        (``GrpcAggregator.load``): ``sealed`` comes from the experiment (``seal_population``).

        Afterwards session ids start again at 1 and the transcript is empty, so a program run
        after a load issues the same requests as on a fresh oracle; the clients' ledgers (and
        with them the nonces that key report randomness) continue for data they have seen, and
        are fresh for new data — so a load of new data gives the same results as a fresh
        ``InProcessLROracle`` (tests/wire/test_load.py).
        """
        await self.aggregator.load(description, sealed, timeout_s)
        self.restart_sessions()

    async def _exchange(self, sent: dict[str, RoundRequest], deadline_s: float) -> dict[str, RoundReply | None]:
        return await self.aggregator.exchange(sent, deadline_s)

    async def ledger_spent_units(self) -> np.ndarray:
        """Every user's spent budget units, in user order (asked from the client processes)."""
        return await self.aggregator.ledger_spent_units()

    async def close(self) -> None:
        await self.aggregator.close("the session is over")
