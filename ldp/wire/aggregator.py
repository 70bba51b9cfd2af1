"""The aggregator: a grpc.aio server that client processes (shards) connect to, and the
``GrpcLROracle`` that runs local algorithms over it.

What: ``GrpcAggregator`` accepts one bidirectional stream per client process, tells each the user
range of its claim (Welcome), checks the public description the client declares (Ready: schema,
number of users, budget), and keeps the connected shards. It knows only the
``PopulationDescription``: never a record, a seed, a budget it could set, or a key
(docs/design.md §2a). ``GrpcLROracle`` is the
``LROracle`` over those shards: ``LROracle.run_round`` splits a round per shard (users of a
departed shard are MISSING; an id no shard ever held is an error before anything is sent),
``exchange`` sends each part and gathers replies, and the base class reassembles them in
user order.
``GrpcAggregator.load`` / ``GrpcLROracle.load`` relay a new population, sealed by the experiment, to
the connected clients (Load → Ready), so one set of client processes serves many small populations
(seeded trials); the aggregator can neither read nor alter what it relays (``ldp.wire.sealed``).

``GrpcAggregator`` is a small facade over parts, each a module of its own (docs/design.md §3):
``ldp.wire.connections`` (the connection registry, shared state and event log),
``ldp.wire.handshake`` (Hello → admission → Welcome → Ready, enrolment),
``ldp.wire.streams`` (one client's stream: read and dispatch), ``ldp.wire.rounds`` (round
exchange and reply validation), ``ldp.wire.load_relay`` (Load → Ready) and
``ldp.wire.ledger_reports`` (LedgerQuery → LedgerReport). Public hooks, instead of overriding
anything: ``add_reply_observer`` (each shard's validated reply as it is resolved),
``add_event_observer`` (each connect/disconnect/refusal line), ``add_admission_check`` (admit or
refuse a claim, with a reason, before Welcome), ``connection``/``connections`` (read-only
``ConnectionView`` snapshots) and ``expel`` (cut one client off with a reason).

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
from collections.abc import Callable
from typing import Any

import grpc
import numpy as np

from ldp.core.errors import LDPError
from ldp.core.population import PopulationDescription
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import RoundReply, RoundRequest
from ldp.local.oracle import LROracle, ShardRange
from ldp.wire import codec
from ldp.wire.connections import (
    Connection,
    ConnectionRegistry,
    ConnectionView,
    EventObserver,
    ShardClaim,
    claim_span,
    shard_range,
)
from ldp.wire.handshake import HANDSHAKE_TIMEOUT_S, Admission, AdmissionCheck, Handshake
from ldp.wire.ledger_reports import LEDGER_SLACK_BYTES, LedgerReports
from ldp.wire.load_relay import READY_TIMEOUT_S, LoadRelay
from ldp.wire.rounds import ReplyObserver, RoundExchange
from ldp.wire.streams import ClientStreams
from ldp.wire.tls import ServerTLS
from ldp.wire.v1 import aggregator_pb2 as pb

__all__ = [
    "HANDSHAKE_TIMEOUT_S",
    "LEDGER_SLACK_BYTES",
    "READY_TIMEOUT_S",
    "Admission",
    "AdmissionCheck",
    "ConnectionView",
    "EventObserver",
    "GrpcAggregator",
    "GrpcLROracle",
    "ReplyObserver",
    "ShardClaim",
    "claim_span",
    "shard_range",
]

SERVICE = "ldp.wire.v1.Aggregator"


def bind_problem(bind: str) -> str:
    """Why ``bind`` (HOST:PORT) cannot be listened on, in words ('' when it can), found by trying the bind with a
    plain socket as gRPC would (``SO_REUSEADDR``, every address the host resolves to). gRPC's own
    error names no cause (``Failed to bind to address ...``)."""
    import errno
    import socket

    host, _, port_text = bind.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except ValueError:
        return f"the port {port_text!r} is not a number (expected HOST:PORT, e.g. 127.0.0.1:50051)"
    except (socket.gaierror, UnicodeError):
        return f"the host {host!r} is unknown (it does not resolve to an address; give an address of this machine, e.g. 127.0.0.1 or 0.0.0.0)"
    problems: list[str] = []
    for family, kind, proto, _, address in infos:
        try:
            with socket.socket(family, kind, proto) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                problems.append(f"port {port} is in use on {host or 'this machine'} (another aggregator? choose another port, or port 0 for any free one)")
            elif exc.errno == errno.EADDRNOTAVAIL:
                problems.append(f"{host} is not an address of this machine (bind one of its own addresses, 127.0.0.1 for loopback or 0.0.0.0 for all)")
            elif exc.errno == errno.EACCES:
                problems.append(f"permission denied for port {port} (ports below 1024 need privileges; choose a port ≥ 1024)")
            else:
                problems.append(str(exc.strerror or exc))
    # gRPC listens when at least one resolved address binds (localhost: ::1 and 127.0.0.1)
    return problems[0] if problems and len(problems) == len(infos) else ""


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
        self.tls = tls
        self.bind = bind
        self.capture = capture
        self.port = 0
        self._server: grpc.aio.Server | None = None
        self._registry = registry = ConnectionRegistry(description)
        self._handshake = Handshake(registry, tls, handshake_timeout_s)
        self._rounds = RoundExchange(registry)
        self._ledgers = LedgerReports(registry)
        self._loads = LoadRelay(registry, self._handshake.check_ready, self._rounds.population_changed)
        self._streams = ClientStreams(registry, self._handshake, self._rounds, self._ledgers, self._loads)

    # --- state ---

    @property
    def description(self) -> PopulationDescription | None:
        """The population being served (None on standby, before any Load)."""
        return self._registry.description

    @property
    def events(self) -> list[str]:
        """Human-readable log of connects, disconnects and refusals (the CLI shows it)."""
        return self._registry.events

    @property
    def handshake_timeout_s(self) -> float:
        """How long each handshake message may take (Hello; Ready after Welcome)."""
        return self._handshake.timeout_s

    @handshake_timeout_s.setter
    def handshake_timeout_s(self, value: float) -> None:
        self._handshake.timeout_s = float(value)

    # --- lifecycle ---

    async def start(self) -> int:
        """Bind and start serving; returns the port (chosen by the OS when the bind says :0)."""
        options = codec.channel_options() + [
            ("grpc.so_reuseport", 0),  # a second server must not silently share a busy port
            ("grpc.server.max_pending_requests", 4096),
        ]
        server = grpc.aio.server(options=options)
        handler = grpc.stream_stream_rpc_method_handler(
            self._streams.connect, request_deserializer=_deserializer(self.capture), response_serializer=pb.ServerMessage.SerializeToString
        )
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Connect": handler}),))
        problem = bind_problem(self.bind)  # checked first: gRPC's failed bind also logs a raw error line
        if problem:
            raise LDPError(f"cannot bind the aggregator to {self.bind}: {problem}")
        try:
            port = server.add_secure_port(self.bind, self.tls.credentials) if self.tls is not None else server.add_insecure_port(self.bind)
        except RuntimeError:  # gRPC says only "Failed to bind": find the OS's reason ourselves
            port = 0
        if port == 0:
            raise LDPError(f"cannot bind the aggregator to {self.bind}: {bind_problem(self.bind) or 'the address could not be bound (in use or not local?)'}")
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
        registry = self._registry
        registry.closing, registry.close_reason = True, reason
        conns = list(registry.connections.values())
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

    # --- public hooks ---

    def add_reply_observer(self, observer: ReplyObserver) -> None:
        """Call ``observer(shard_key, reply)`` with each shard's reply to a round the moment it is
        resolved, after validation (a bad reply arrives as the error reply that replaces it).
        It runs on the event loop and must be quick; an exception from it is logged in ``events``
        and never breaks the round."""
        self._rounds.reply_observers.append(observer)

    def add_event_observer(self, observer: EventObserver) -> None:
        """Call ``observer(event)`` with each connect/disconnect/refusal line as it is logged
        (after ``events`` has it and waiters are woken); an exception from it becomes an event."""
        self._registry.event_observers.append(observer)

    def add_admission_check(self, check: AdmissionCheck) -> None:
        """Ask ``check(Admission)`` before a client whose claim fits is welcomed: '' admits it,
        anything else refuses it with that reason (its range is released, the client hears the
        reason in Close, ``events`` says so). Checks run in the order added; the first refusal
        wins, and a check that raises refuses."""
        self._handshake.admission_checks.append(check)

    def connection(self, key: str) -> ConnectionView | None:
        """A read-only snapshot of the connection holding shard ``key`` (None if none is registered)."""
        conn = self._registry.connections.get(key)
        return None if conn is None else conn.view()

    def connections(self) -> list[ConnectionView]:
        """Read-only snapshots of every registered connection (reservations included), by shard key."""
        return [c.view() for _, c in sorted(self._registry.connections.items())]

    async def expel(self, key: str, reason: str) -> bool:
        """Cut the client holding shard ``key`` off: it is told ``reason`` (Close), its stream
        ends, its pending rounds resolve and its users are departed. False if none is connected."""
        conn = self._registry.connections.get(key)
        if conn is None or conn.closed:
            return False
        await self._registry.expel(conn, reason)
        return True

    # --- shards ---

    @property
    def shards(self) -> list[ShardRange]:
        return self._registry.shards

    def covered_users(self) -> int:
        return self._registry.covered_users()

    @property
    def departed(self) -> list[ShardRange]:
        """Shards that held users of the current population and are gone (disconnected or cut
        off) and have not come back: their users are MISSING in every round, with a reason."""
        return sorted(self._registry.lost.values(), key=lambda s: s.first_user)

    def buffered_bytes(self) -> int:
        """Bytes of unfinished reply and ledger parts held for all connections (each capped)."""
        return sum(c.buffered_bytes for c in self._registry.connections.values())

    def claims_cover_everyone(self) -> bool:
        """True when the established connections' claims tile [0, 1): every user of any
        population would be held (their spans never overlap: the handshake refuses that)."""
        return self._registry.claims_cover_everyone()

    async def wait_for_claims(self, timeout_s: float) -> list[str]:
        """Wait until the connected (standby) clients' claims cover every user; returns their keys."""

        def late() -> str:
            have = self._registry.established_keys()
            return f"timed out after {timeout_s:g} s waiting for client processes whose claims cover every user (connected: {have or 'none'})"

        await self._wait_until(self.claims_cover_everyone, timeout_s, late)
        return self._registry.established_keys()

    async def wait_for_shards(self, timeout_s: float, users: int | None = None) -> list[ShardRange]:
        """Wait until connected shards hold ``users`` users (default: the whole population)."""
        if self.description is None and users is None:
            raise LDPError("this aggregator serves standby clients: wait_for_claims, then load a population")
        want = self.description.size if users is None else users  # type: ignore[union-attr]

        def late() -> str:
            return (
                f"timed out after {timeout_s:g} s waiting for client processes: shards hold {self.covered_users()} of {want} users "
                f"(connected: {[s.key for s in self.shards] or 'none'})"
            )

        await self._wait_until(lambda: self.covered_users() >= want, timeout_s, late)
        return self.shards

    async def _wait_until(self, done: Callable[[], bool], timeout_s: float, late: Callable[[], str]) -> None:
        """Wait (woken by every connect/disconnect) until ``done()``; ``LDPError(late())`` after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        changed = self._registry.changed
        while not done():
            changed.clear()
            remaining = end - loop.time()
            if remaining <= 0:
                raise LDPError(late())
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                pass

    def loaded(self) -> PopulationDescription:
        """The description of the population being served; an ``LDPError`` on standby (before
        any Load), which is when no round can be asked."""
        return self._rounds.loaded()

    # --- rounds, loads, ledgers (each a part of its own) ---

    def report_layout(self, spec: RandomizerSpec) -> tuple[np.dtype[Any], int] | None:
        """``spec``'s report dtype and row width for the loaded population (None: no user can run
        it), so that a round's reply parts are copied, checked, into its final array."""
        return self._rounds.report_layout(spec)

    async def exchange(self, sent: dict[str, RoundRequest], deadline_s: float) -> dict[str, RoundReply | None]:
        """Send each shard its request; gather replies until the deadline (None = missing)."""
        return await self._rounds.exchange(sent, deadline_s)

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
        return await self._loads.load(description, sealed, timeout_s)

    async def ledger_spent_units(self, timeout_s: float = 30.0) -> np.ndarray:
        """Every user's spent budget (exact ledger units) in user order, asked from the shards.

        A diagnostic for tests and labs: the aggregator could compute the same numbers from its
        own requests and the refusals it saw, so it learns nothing new about any record.
        """
        return await self._ledgers.spent_units(timeout_s)

    async def ledger_units_by_shard(self, keys: list[str], deadline_s: float) -> dict[str, np.ndarray | None]:
        """Each named shard's spent budget units (its users, in order), asked of all of them at once
        under one deadline. A shard that has not reported by then, has left, or sent a malformed
        report maps to None, and a late report is dropped (not awaited). So a client
        that ignores ledger queries costs the caller at most ``deadline_s`` per call, where
        ``ledger_spent_units`` waits for every shard or fails (the classroom, docs/classroom.md).
        """
        return await self._ledgers.units_by_shard(keys, deadline_s)

    # --- for the tests that stage a race inside the registry (tests/wire/test_ledger_query_race.py) ---

    @property
    def _connections(self) -> dict[str, Connection]:
        return self._registry.connections

    def _depart(self, conn: Connection) -> None:
        self._registry.depart(conn)


def _deserializer(capture: list[bytes] | None) -> Callable[[bytes], pb.ClientMessage | None]:
    """The request deserializer: undecodable bytes become None (dropped by the reader); with
    ``capture``, every raw message is appended as the exact bytes that arrived."""

    def deserialize(data: bytes) -> pb.ClientMessage | None:
        if capture is not None:
            capture.append(bytes(data))
        try:
            return pb.ClientMessage.FromString(data)
        except Exception:  # noqa: BLE001 - undecodable bytes: None, which the reader drops
            return None

    return deserialize


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

    def report_layout(self, spec: RandomizerSpec) -> tuple[np.dtype[Any], int] | None:
        """Reports arrive as bytes: each checked part is copied into the request's final array
        (``ldp.wire.rounds.RoundExchange.report_layout``)."""
        return self.aggregator.report_layout(spec)

    async def ledger_spent_units(self, timeout_s: float = 30.0) -> np.ndarray:
        """Every user's spent budget units, in user order (asked from the client processes, each
        answer awaited at most ``timeout_s``, as ``GrpcAggregator.ledger_spent_units``)."""
        return await self.aggregator.ledger_spent_units(timeout_s)

    async def close(self) -> None:
        await self.aggregator.close("the session is over")
