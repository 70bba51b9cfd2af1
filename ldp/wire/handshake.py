"""The aggregator's handshake and enrolment: Hello → (admission) → Welcome → Ready.

What: ``Handshake.run`` reads a client's Hello (within ``timeout_s``), checks enrolment over TLS
(``ldp.wire.tls.ServerTLS.problem``), the protocol version and the claim, reserves the claim's
user range, asks the registered *admission checks* (public hooks: ``Admission`` in, a reason
or '' out), sends Welcome and checks the Ready (``check_ready``: the range and the public
description the client declares). A refused client hears the reason in a Close.
Guarantees: nothing in a message is looked at before enrolment is checked; a Hello without
Ready holds its range for at most ``timeout_s`` (squatting), after which the range is free
again; a refused or failed handshake leaves no reservation behind; an admission check that
raises refuses the client (it never admits by accident).
Source: docs/design.md §3, docs/protocol.md ("Handshake"), docs/security.md (enrolment).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from ldp.core.errors import ParameterError
from ldp.core.population import PopulationDescription
from ldp.wire import codec
from ldp.wire.connections import Connection, ConnectionRegistry, ShardClaim, claim_span, shard_range
from ldp.wire.tls import ServerTLS
from ldp.wire.v1 import aggregator_pb2 as pb

__all__ = ["HANDSHAKE_TIMEOUT_S", "Admission", "AdmissionCheck", "Handshake"]

# How long the aggregator waits for each handshake message: Hello after the stream opens, Ready
# after Welcome. A client prepares its records before it connects, so an honest one answers at
# once; a Hello without Ready must not hold a range for long (squatting): its reservation
# expires after this and the range is free again (the event log says so).
HANDSHAKE_TIMEOUT_S = 10.0
TIMED_OUT = object()  # a handshake read that found nothing in time


@dataclass(frozen=True)
class Admission:
    """What an admission check sees of a client asking for a shard: its claim, the name it gave
    in Hello (its own word), the peer address, the identity TLS established (a certificate's
    name; None without TLS or in token mode) and the call's metadata (header, value) pairs."""

    claim: ShardClaim
    client_name: str
    peer: str
    identity: str | None
    metadata: tuple[tuple[str, str], ...]

    def header(self, name: str) -> str:
        """The first value of metadata header ``name`` ('' if absent)."""
        return next((v for k, v in self.metadata if k == name), "")


# An admission check: '' admits the client, anything else refuses it with that reason.
AdmissionCheck = Callable[[Admission], str]


def _safe(call: Callable[[], Any], default: Any) -> Any:
    """``call()``, or ``default`` if it raises (a test double, or a call already gone)."""
    try:
        return call()
    except Exception:  # noqa: BLE001 - the caller gets the default
        return default


class Handshake:
    """Hello → admission → Welcome → Ready for one stream, against the shared registry."""

    def __init__(self, registry: ConnectionRegistry, tls: ServerTLS | None, timeout_s: float = HANDSHAKE_TIMEOUT_S) -> None:
        self.registry = registry
        self.tls = tls
        self.timeout_s = float(timeout_s)  # per handshake message (Hello; Ready after Welcome)
        self.admission_checks: list[AdmissionCheck] = []

    async def reject(self, context: grpc.aio.ServicerContext, reason: str) -> None:
        """Tell a client why it is refused (Close), and log who was refused."""
        peer = _safe(context.peer, "")  # the operator reads this line (the client hears the reason)
        peer_text = f" at {codec.clip_text(str(peer), 80)}" if peer else ""
        self.registry.events.append(f"rejected a client{peer_text}: {reason}")
        with contextlib.suppress(Exception):  # the client may already be gone; nothing to do
            await context.write(pb.ServerMessage(close=pb.Close(reason=reason)))

    async def _read_within(self, context: grpc.aio.ServicerContext) -> Any:
        """The next message of a handshake (None: undecodable), or TIMED_OUT if none comes in time."""
        try:
            return await asyncio.wait_for(context.read(), self.timeout_s)
        except TimeoutError:
            return TIMED_OUT

    async def run(self, context: grpc.aio.ServicerContext) -> Connection | None:
        """The handshake of one stream: its established ``Connection``, or None (refused; told why)."""
        msg = await self._read_within(context)  # read first: a Close sent before the client's Hello races its write
        problem = self._hello_problem(context, msg)
        if problem:
            await self.reject(context, problem)
            return None
        hello = msg.hello
        try:
            claim = ShardClaim(hello.shard_index, hello.shard_count, hello.sub_index, hello.sub_count or 1)
        except ParameterError as exc:
            await self.reject(context, str(exc))
            return None
        placed = self._place(claim)
        if isinstance(placed, str):
            await self.reject(context, placed)
            return None
        lo, hi = placed
        conn = Connection(claim.key, claim, context, lo, hi - lo)
        self.registry.connections[conn.key] = conn  # reserve the range while the client generates records
        try:
            return await self._welcome(context, conn, hello.client_name)
        except BaseException:
            self.registry.release(conn)  # the reservation
            raise

    def _hello_problem(self, context: grpc.aio.ServicerContext, msg: Any) -> str:
        """Why the stream's first message does not open a handshake ('' if it does)."""
        if self.tls is not None:
            # Enrolment before anything in the message is looked at, so a caller that is not
            # enrolled hears that (not a protocol error), whatever it sent; a call whose metadata
            # gRPC dropped (a token past its 16 KiB limit) is told "no enrolment token".
            problem = self.tls.problem(context)
            if problem:  # not enrolled: no claim, no range, and the reason says why
                return problem
        if msg is TIMED_OUT:
            return f"protocol error: no Hello within {self.timeout_s:g} s"
        if msg is grpc.aio.EOF or msg is None or msg.WhichOneof("kind") != "hello":
            return "protocol error: the first message must be Hello"
        if msg.hello.protocol_version != codec.PROTOCOL_VERSION:
            return (
                f"protocol version mismatch: the client speaks version {msg.hello.protocol_version}, "
                f"this aggregator speaks version {codec.PROTOCOL_VERSION}"
            )
        if self.registry.closing:
            return self.registry.close_reason or "the aggregator is shutting down"
        return ""

    def _place(self, claim: ShardClaim) -> tuple[int, int] | str:
        """The users [lo, hi) ``claim`` holds of the current population ((0, 0) on standby), or
        why it cannot be placed (it overlaps a connected shard, or holds nobody)."""
        description = self.registry.description
        if description is None:  # standby: claims are fractions of whatever population comes
            span = claim_span(claim)
            for other in self.registry.connections.values():
                other_span = claim_span(other.claim)
                if span[0] < other_span[1] and other_span[0] < span[1]:
                    return f"shard {claim.key} overlaps connected shard {other.key}"
            return 0, 0
        lo, hi = shard_range(description.size, claim)
        for other in self.registry.connections.values():
            if lo < other.first_user + other.count and other.first_user < hi:
                return f"shard {claim.key} (users {lo}..{hi - 1}) overlaps connected shard {other.key} (users {other.first_user}..{other.first_user + other.count - 1})"
        if hi <= lo:
            return f"shard {claim.key} holds no users of a population of {description.size}"
        return lo, hi

    def admission_problem(self, context: grpc.aio.ServicerContext, claim: ShardClaim, client_name: str) -> str:
        """The first refusal of the registered admission checks ('' when all admit, or none is registered)."""
        if not self.admission_checks:
            return ""
        metadata = tuple((str(k), str(v)) for k, v in (_safe(context.invocation_metadata, None) or ()))
        tls = self.tls
        identity = _safe(lambda: tls.identity(context), None) if tls is not None else None
        admission = Admission(claim, client_name, str(_safe(context.peer, "")), identity, metadata)
        for check in list(self.admission_checks):
            try:
                problem = check(admission)
            except Exception as exc:  # noqa: BLE001 - a broken check refuses; it never admits by accident
                problem = f"the aggregator's admission check failed ({type(exc).__name__})"
            if problem:
                return str(problem)
        return ""

    async def _welcome(self, context: grpc.aio.ServicerContext, conn: Connection, client_name: str) -> Connection | None:
        registry = self.registry
        problem = self.admission_problem(context, conn.claim, client_name)
        if problem:  # before the Welcome: the range reserved for the claim is released
            registry.release(conn)
            registry.events.append(f"refused shard {conn.key}: {problem}")
            await self.reject(context, problem)
            return None
        lo, hi = conn.first_user, conn.first_user + conn.count
        welcome = pb.Welcome(protocol_version=codec.PROTOCOL_VERSION, first_user=lo, user_count=hi - lo, shard_key=conn.key)
        if not await conn.send([pb.ServerMessage(welcome=welcome)]):
            registry.release(conn)
            return None
        msg = await self._read_within(context)
        if msg is TIMED_OUT:  # a Hello without Ready must not squat a range: the reservation expires
            registry.release(conn)
            problem = f"no Ready within {self.timeout_s:g} s after Welcome; users {lo}..{hi - 1} are free again"
            registry.notify(f"shard {conn.key} reservation expired: {problem}")  # logged before the client hears it
            await self.reject(context, f"shard {conn.key}: {problem}")
            return None
        problem = "" if msg is not grpc.aio.EOF and msg is not None and msg.WhichOneof("kind") == "ready" else "expected Ready"
        if not problem:
            problem = self.check_ready(msg.ready, lo, hi)
        if problem:
            registry.release(conn)
            registry.notify(f"shard {conn.key} refused: {problem}")  # logged before the client hears it
            await self.reject(context, f"shard {conn.key}: {problem}")
            return None
        conn.budget = msg.ready.budget
        conn.established = True
        conn.ready = registry.description is not None  # a standby client holds no users until a Load
        registry.arrive(conn)
        who = self.tls.identity(context) if self.tls is not None else None
        held = f"users {lo}..{hi - 1}" if conn.ready else "standby"
        registry.notify(f"shard {conn.key} connected ({who or client_name or 'client'}, {held})")
        return conn

    def check_ready(self, ready: pb.Ready, lo: int, hi: int) -> str:
        """'' if a Ready confirms users [lo, hi) of the expected population, else what is wrong."""
        if ready.error:
            return f"the client could not host users {lo}..{hi - 1}: {codec.clip_text(ready.error)}"
        if (ready.first_user, ready.user_count) != (lo, hi - lo):
            return f"the client confirmed users {ready.first_user}+{ready.user_count} instead of {lo}..{hi - 1}"
        expected = self.registry.description
        if expected is None:
            return "" if not ready.description_json else "this aggregator serves standby clients, but the client holds data of its own"
        try:
            declared = PopulationDescription.from_json(json.loads(ready.description_json))
        except Exception as exc:  # noqa: BLE001 - whatever a client declares, the answer is a reason
            return f"the client's description does not parse: {codec.clip_text(str(exc), 300)}"
        if declared != expected:
            return (
                f"the client holds {declared.size} users with fields {[f.name for f in declared.schema]}, "
                f"but this experiment expects {expected.size} users with fields {[f.name for f in expected.schema]}"
            )
        return ""
