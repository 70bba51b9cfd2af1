"""The aggregator: a grpc.aio server that client processes (shards) connect to, and the
``GrpcLROracle`` that runs local algorithms over it.

What: ``GrpcAggregator`` accepts one bidirectional stream per client process, tells each the user
range of its claim (Welcome), checks the public description the client declares (Ready: schema,
number of users, budget), and keeps the connected shards. It knows only the
``PopulationDescription``: never a record, a seed, a budget it could set, or a key
(docs/design.md §2a). ``GrpcLROracle`` is the
``LROracle`` over those shards: ``LROracle.run_round`` splits a round per shard (an error before
anything is sent if a user is held by no connected shard), ``_exchange`` here sends each part and
gathers replies, and the base class reassembles them in user order.
``GrpcAggregator.load`` / ``GrpcLROracle.load`` relay a new population, sealed by the experiment, to
the connected clients (Load → Ready), so one set of client processes serves many small populations
(seeded trials); the aggregator can neither read nor alter what it relays (``ldp.wire.sealed``).
Guarantees: every round has a deadline — a shard that disconnects resolves to None at once, one
that misses the deadline resolves to None at the deadline, and its users are reported MISSING;
a late reply for an old round is discarded (replies are matched to (session, round)). The
aggregator never receives a record: clients only send reports (tests/wire/test_privacy_wire.py).
Source: docs/design.md §3 (measured gRPC facts: create the server inside the running loop, bind
127.0.0.1:0 with so_reuseport=0, raise message limits, own Close message).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

import grpc
import numpy as np

from ldp.core.errors import LDPError, ParameterError
from ldp.core.population import PopulationDescription
from ldp.local.messages import RoundReply, RoundRequest
from ldp.local.oracle import LROracle, ShardRange
from ldp.wire import codec
from ldp.wire.v1 import aggregator_pb2 as pb

__all__ = ["GrpcAggregator", "GrpcLROracle", "ShardClaim", "shard_range"]

log = logging.getLogger(__name__)

SERVICE = "ldp.wire.v1.Aggregator"
# How long a connecting client may take between Hello and Ready (it generates its records).
READY_TIMEOUT_S = 300.0


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
    ledger_pending: dict[int, asyncio.Future[np.ndarray | None]] = field(default_factory=dict)
    load_pending: dict[int, asyncio.Future[pb.Ready | None]] = field(default_factory=dict)
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

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


class GrpcAggregator:
    """A grpc.aio server for one population; create and use it inside one running event loop.

    ``capture``: if a list is given, every raw message received from a client is appended as the
    exact bytes that arrived (for the test that no record ever crosses the wire).
    """

    def __init__(self, description: PopulationDescription, bind: str = "127.0.0.1:0", capture: list[bytes] | None = None) -> None:
        self.description = description
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

        def deserialize(data: bytes) -> pb.ClientMessage:
            if capture is not None:
                capture.append(bytes(data))
            return pb.ClientMessage.FromString(data)

        handler = grpc.stream_stream_rpc_method_handler(
            self._connect, request_deserializer=deserialize, response_serializer=pb.ServerMessage.SerializeToString
        )
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Connect": handler}),))
        port = server.add_insecure_port(self.bind)
        if port == 0:
            raise LDPError(f"cannot bind the aggregator to {self.bind} (address in use or not local?)")
        await server.start()
        self._server, self.port = server, port
        return port

    @property
    def address(self) -> str:
        host = self.bind.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    async def close(self, reason: str = "the aggregator is shutting down", grace_s: float = 1.0) -> None:
        """Send Close to every client, end their streams, stop the server."""
        self._closing, self._close_reason = True, reason
        conns = list(self._connections.values())
        await asyncio.gather(*(c.send([pb.ServerMessage(close=pb.Close(reason=reason))]) for c in conns), return_exceptions=True)
        for c in conns:
            c.stop.set()
            c.fail_pending()
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None

    async def __aenter__(self) -> "GrpcAggregator":
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

    async def wait_for_shards(self, timeout_s: float, users: int | None = None) -> list[ShardRange]:
        """Wait until connected shards hold ``users`` users (default: the whole population)."""
        want = self.description.size if users is None else users
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
            except asyncio.TimeoutError:
                pass
        return self.shards

    def _notify(self, event: str) -> None:
        self.events.append(event)
        log.info(event)
        self._changed.set()

    # --- the stream of one client process ---

    async def _connect(self, request_iterator: AsyncIterator[pb.ClientMessage], context: grpc.aio.ServicerContext) -> None:
        conn: _Connection | None = None
        try:
            conn = await self._handshake(context)
            if conn is None:
                return
            reader = asyncio.ensure_future(self._read_loop(conn))
            stopper = asyncio.ensure_future(conn.stop.wait())
            await asyncio.wait({reader, stopper}, return_when=asyncio.FIRST_COMPLETED)
            for t in (reader, stopper):
                t.cancel()
            if reader.done() and not reader.cancelled() and reader.exception() is not None:
                log.info("shard %s: stream ended: %s", conn.key, reader.exception())
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # noqa: BLE001 - one broken client must not disturb the server
            log.warning("a client stream failed: %s: %s", type(exc).__name__, exc)
        finally:
            if conn is not None:
                conn.closed = True
                conn.fail_pending()
                if self._connections.get(conn.key) is conn:
                    del self._connections[conn.key]
                if conn.established:
                    self._departed.add(conn.key)
                self._notify(f"shard {conn.key} disconnected (users {conn.first_user}..{conn.first_user + conn.count - 1})")

    async def _reject(self, context: grpc.aio.ServicerContext, reason: str) -> None:
        self.events.append(f"rejected a client: {reason}")
        try:
            await context.write(pb.ServerMessage(close=pb.Close(reason=reason)))
        except Exception:  # noqa: BLE001 - the client may already be gone; nothing to do
            pass

    async def _handshake(self, context: grpc.aio.ServicerContext) -> _Connection | None:
        msg = await asyncio.wait_for(context.read(), READY_TIMEOUT_S)
        if msg is grpc.aio.EOF or msg.WhichOneof("kind") != "hello":
            await self._reject(context, "protocol error: the first message must be Hello")
            return None
        hello = msg.hello
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
        msg = await asyncio.wait_for(context.read(), READY_TIMEOUT_S)
        problem = "" if msg is not grpc.aio.EOF and msg is not None and msg.WhichOneof("kind") == "ready" else "expected Ready"
        if not problem:
            problem = self._check_ready(msg.ready, lo, hi)
        if problem:
            del self._connections[conn.key]
            await self._reject(context, f"shard {conn.key}: {problem}")
            self._notify(f"shard {conn.key} refused: {problem}")
            return None
        conn.budget = msg.ready.budget
        conn.ready = conn.established = True
        self._departed.discard(conn.key)
        self._notify(f"shard {conn.key} connected ({client_name or 'client'}, users {lo}..{hi - 1})")
        return conn

    def _check_ready(self, ready: pb.Ready, lo: int, hi: int) -> str:
        """'' if a Ready confirms users [lo, hi) of the expected population, else what is wrong."""
        if ready.error:
            return f"the client could not host users {lo}..{hi - 1}: {ready.error}"
        if (ready.first_user, ready.user_count) != (lo, hi - lo):
            return f"the client confirmed users {ready.first_user}+{ready.user_count} instead of {lo}..{hi - 1}"
        try:
            declared = PopulationDescription.from_json(json.loads(ready.description_json))
        except (ValueError, RecursionError) as exc:
            return f"the client's description does not parse: {exc}"
        if declared != self.description:
            return (
                f"the client holds {declared.size} users with fields {[f.name for f in declared.schema]}, "
                f"but this experiment expects {self.description.size} users with fields {[f.name for f in self.description.schema]}"
            )
        return ""

    async def _read_loop(self, conn: _Connection) -> None:
        reply_parts: dict[tuple[int, int], list[pb.RoundReply]] = {}
        ledger_parts: dict[int, list[pb.LedgerReport]] = {}
        while True:
            msg = await conn.context.read()
            if msg is grpc.aio.EOF:
                return
            kind = msg.WhichOneof("kind")
            if kind == "reply":
                key = (msg.reply.session_id, msg.reply.round)
                parts = reply_parts.setdefault(key, [])
                parts.append(msg.reply)
                if not msg.reply.final:
                    continue
                del reply_parts[key]
                fut = conn.pending.pop(key, None)
                if fut is None or fut.done():
                    log.info("shard %s: discarded a late reply for session %d round %d", conn.key, *key)
                    continue
                try:
                    fut.set_result(codec.decode_reply(parts))
                except LDPError as exc:
                    fut.set_result(RoundReply(key[0], key[1], error=f"shard {conn.key} sent a malformed reply: {exc}"))
            elif kind == "ready":
                # The answer to a Load. The client handles messages in order, so every reply it
                # sent for the old population arrived before this: unfinished parts are garbage.
                reply_parts.clear()
                ledger_parts.clear()
                rfut = conn.load_pending.pop(msg.ready.load_id, None)
                if rfut is not None and not rfut.done():
                    rfut.set_result(msg.ready)
                else:
                    log.info("shard %s: discarded a late Ready for load %d", conn.key, msg.ready.load_id)
            elif kind == "ledger":
                lp = ledger_parts.setdefault(msg.ledger.query_id, [])
                lp.append(msg.ledger)
                if msg.ledger.final:
                    lfut = conn.ledger_pending.pop(msg.ledger.query_id, None)
                    parts_l = ledger_parts.pop(msg.ledger.query_id)
                    if lfut is not None and not lfut.done():
                        lfut.set_result(codec.decode_ledger(parts_l))
            else:
                log.warning("shard %s: unexpected %s message ignored", conn.key, kind)

    # --- rounds ---

    async def exchange(self, sent: dict[str, RoundRequest], deadline_s: float) -> dict[str, RoundReply | None]:
        """Send each shard its request; gather replies until the deadline (None = missing)."""
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
                    conn.pending.pop((sent[key].session_id, sent[key].round), None)
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
                    conn.pending.pop((request.session_id, request.round), None)
                self.events.append(f"shard {key} missed the {deadline_s:g} s deadline of session {request.session_id} round {request.round}")
        return out

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
        # From here on the aggregator speaks about the new population: clients that connect now
        # are welcomed into it, and no old shard is offered to a round until it confirms.
        self.description = description
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
            message = pb.ServerMessage(
                load=pb.Load(load_id=lid, sealed_population=sealed, first_user=lo, user_count=hi - lo)
            )
            sends.append(self._send_load(c, message, fut))
        gathered = asyncio.gather(*sends)
        try:
            await asyncio.wait([f for _, _, f in futures.values()], timeout=max(0.0, float(timeout_s)))
        finally:
            for c, lid, fut in futures.values():
                c.load_pending.pop(lid, None)
                if not fut.done():
                    fut.cancel()
            if not gathered.done():  # never cancel a write in flight (see exchange)
                self._background.add(gathered)
                gathered.add_done_callback(self._forget_background)
        failures = []
        for key, (c, _, fut) in futures.items():
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
            conn = self._connections[s.key]
            qid = next(self._ledger_ids)
            fut: asyncio.Future[np.ndarray | None] = loop.create_future()
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
        return self.aggregator.description

    @property
    def shards(self) -> list[ShardRange]:
        return self.aggregator.shards

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
        self._next_session = 0  # LROracle's counter: a fresh oracle's first session is 1
        self.__dict__.pop("transcript", None)  # Session creates the transcript on first use

    async def _exchange(self, sent: dict[str, RoundRequest], deadline_s: float) -> dict[str, RoundReply | None]:
        return await self.aggregator.exchange(sent, deadline_s)

    async def ledger_spent_units(self) -> np.ndarray:
        """Every user's spent budget units, in user order (asked from the client processes)."""
        return await self.aggregator.ledger_spent_units()

    async def close(self) -> None:
        await self.aggregator.close("the session is over")
