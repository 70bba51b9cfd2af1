"""A client process: hosts one shard of users and answers the aggregator's rounds.

What: reads its ``ClientConfig`` (its users' data, budget, report key, ledger store and seal key)
from the users' side — a file or standard input, written by whoever runs it, never the
aggregator — and prepares its shard: the users of its claim K/M (sub-shard j/P) of its own data,
records ready and ledgers open. Then it connects to an aggregator (retrying with backoff while
it is not up yet), says Hello with its claim, checks that the range in Welcome is the one it
computed itself, declares its public description in Ready (schema, number of users, budget),
and answers every round with ``Shard.answer_in_parts`` — validated before any charge, each part
charged, sampled and committed (on disk first when durable) before it leaves, users over budget
refused, a second round of a non-interactive session refused. A round's first part is drawn on
the event loop's thread and each later one in a worker thread while the one before it is
written, so the aggregator checks one part while the users sample the next
(``REPLY_PART_BYTES``, ``--reply-part-bytes``). A ``Load`` carries a population sealed by the
experiment; the client opens it with its seal key, checks the range, and hosts it (ledgers of
data it has seen continue), or reports the failure in ``Ready.error`` and holds no users until
the next Load.
Guarantees: only reports, refusal bitmaps and ledger units ever leave the process, never a record,
seed or key (tests/wire/test_privacy_wire.py, tests/wire/test_hostile_aggregator.py); nothing the
aggregator sends crashes or hangs it, and its memory stays bounded (``ClientLimits``: a Welcome
timeout, one unfinished round request at a time, bounded in bytes and in time; replies quote at
most ``MAX_ERROR_CHARS`` of any error; tests/wire/test_client_bounds.py, test_fuzz_client.py). A
claim turned away because it overlaps a connected shard is retried with backoff until
``--connect-timeout`` is spent. It exits with a one-line message: 0 when the aggregator closes
the run (``Close``), 3 when it closes a failed run (``Close{failed}``), 2 when it turns the client
away or the configuration is wrong, 1 when it disappears, cannot be reached or sends no Welcome
in time — no hang, no traceback.
Source: docs/design.md §2a–3; KLNRS Definition 4.4 (budgets enforced by the user's side).

Usage: ``python -m ldp.wire.client --connect HOST:PORT --config FILE|- --shard K/M [--sub j/P]
[--connect-timeout S] [--welcome-timeout S] [--part-timeout S] [--max-request-bytes B]
[--reply-part-bytes B]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import os
import re
import socket
import sys
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import grpc
import numpy as np

from ldp.core.errors import LDPError, ParameterError
from ldp.local.messages import Result, RoundReply, RoundRequest
from ldp.local.shard import Holdings, ReplyPart, Shard
from ldp.wire import codec
from ldp.wire.aggregator import ShardClaim, shard_range
from ldp.wire.client_config import ClientConfig
from ldp.wire.tls import ClientMode, ClientTLS, client_mode, client_tls, diagnose
from ldp.wire.v1 import aggregator_pb2 as pb
from ldp.wire.v1 import aggregator_pb2_grpc as pb_grpc

__all__ = [
    "run_client",
    "main",
    "parse_fraction",
    "ClientLimits",
    "EXIT_CLOSED",
    "EXIT_LOST",
    "EXIT_REJECTED",
    "EXIT_RUN_FAILED",
]

EXIT_CLOSED = 0  # the aggregator said Close: the experiment is over
EXIT_LOST = 1  # the aggregator could not be reached, vanished mid-stream, or sent no Welcome in time
EXIT_REJECTED = 2  # turned away (protocol version, wrong range or description, a claim still overlapping) or bad arguments
EXIT_RUN_FAILED = 3  # the aggregator said Close{failed}: the experiment failed (timeout, interrupt, error)

_RETRY = -1  # internal: turned away because the claim overlaps a connected shard; try again later

# Errors may quote what the aggregator sent (a query's parameters, a kind): a reply quotes at most
# this many characters of each, so a hostile request cannot make the reply outgrow a message.
MAX_ERROR_CHARS = 1000
# A message line quotes at most this much of what the aggregator said (e.g. a Close reason).
_MAX_QUOTE_CHARS = 300
# A round is answered in parts of about this many bytes of reports (``Shard.answer_in_parts``),
# each written while the next is drawn, so the aggregator checks one part while the users sample
# the next. Measured (docs/benchmarks.md, "Reply parts"): 1 MiB parts (10^6 one-byte reports)
# gave the shortest rounds at 3·10^6–10^7 users; 256 KiB parts cost the aggregator ≈ 0.2 ms more
# CPU a part, and one part per round overlaps nothing.
REPLY_PART_BYTES = 1 << 20


@dataclass(frozen=True)
class ClientLimits:
    """What a client grants the aggregator, whatever it sends (docs/protocol.md, "Bounds").

    - ``welcome_timeout_s``: Hello → Welcome (or Close); then the client exits with ``EXIT_LOST``.
    - ``part_timeout_s``: the most it waits for the remaining parts of a round request split into
      parts (``final = false``), counted from the first part: the request's own ``deadline_s``
      (at least ``MIN_PART_TIMEOUT_S``) capped by this; then the unfinished request is dropped.
    - ``max_request_bytes``: the buffered parts of an unfinished request; beyond, it is dropped.
      At most one unfinished request is buffered: a part of another (session, round) drops it.
    - ``retry_first_s``/``retry_max_s``: the backoff between attempts when the aggregator turns
      the claim away because it overlaps a connected shard (retried until ``--connect-timeout``).
    - ``reply_part_bytes``: a round's reply is drawn, committed and written in parts of about
      this many bytes of reports (``Shard.answer_in_parts``; ``REPLY_PART_BYTES``).
    A dropped request whose final part arrives later is answered with a round-level error.
    """

    welcome_timeout_s: float = 30.0
    part_timeout_s: float = 60.0
    max_request_bytes: int = 256 << 20
    retry_first_s: float = 0.5
    retry_max_s: float = 8.0
    reply_part_bytes: int = REPLY_PART_BYTES

    MIN_PART_TIMEOUT_S = 1.0

    def __post_init__(self) -> None:
        for name in ("welcome_timeout_s", "part_timeout_s", "retry_first_s", "retry_max_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ParameterError(f"{name} must be a finite number of seconds > 0, got {value!r}")
        if self.max_request_bytes < 1:
            raise ParameterError(f"max_request_bytes must be ≥ 1, got {self.max_request_bytes}")
        if not 1 <= self.reply_part_bytes <= codec.MAX_MESSAGE_BYTES:
            raise ParameterError(f"reply_part_bytes must be in 1..{codec.MAX_MESSAGE_BYTES} (a part's reports fit one message), got {self.reply_part_bytes}")

    def part_timeout(self, deadline_s: float) -> float:
        """How long the rest of a request with this ``deadline_s`` may take to arrive."""
        if not (math.isfinite(deadline_s) and deadline_s > 0):
            return self.part_timeout_s
        return min(self.part_timeout_s, max(self.MIN_PART_TIMEOUT_S, deadline_s))


def _quote(text: str, limit: int = _MAX_QUOTE_CHARS) -> str:
    """Text from the aggregator, fit for one line of a message: no control characters, clipped."""
    flat = re.sub(r"[\x00-\x1f\x7f]+", " ", text)
    return flat if len(flat) <= limit else f"{flat[:limit]}... ({len(flat) - limit} more characters)"


def _clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


def _client_options() -> list[tuple[str, object]]:
    # Reconnect quickly while the aggregator is starting (gRPC's own default backoff starts at 1 s
    # and grows to 120 s); keepalive stays off (docs/design.md §3).
    return codec.channel_options() + [
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 2000),
    ]


def _round_error(request_parts: list[pb.RoundRequest], message: str) -> RoundReply:
    head = request_parts[0]
    return RoundReply(int(head.session_id), int(head.round), error=message)


async def _watch_parent(parent_pid: int) -> None:
    """Return when the launching process is gone (so a killed launcher leaves no orphan)."""
    while os.getppid() == parent_pid:
        await asyncio.sleep(0.5)


async def run_client(
    address: str,
    claim: ShardClaim,
    config: ClientConfig,
    *,
    connect_timeout_s: float = 60.0,
    limits: ClientLimits = ClientLimits(),
    answer_delay_s: float = 0.0,
    protocol_version: int = codec.PROTOCOL_VERSION,
    say: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True),
    exit_with_parent: int | None = None,
    tls: ClientTLS | None = None,
) -> int:
    """Serve one shard until the aggregator closes; returns an exit code (EXIT_*).

    ``tls`` (``ldp.wire.tls.client_tls``): a TLS channel that authenticates the aggregator, with
    this client's certificate (mTLS) and/or the enrolment token; None: plaintext (loopback).

    ``connect_timeout_s`` bounds the time spent reaching the aggregator and, when it turns the
    claim away because another client holds an overlapping one, retrying with backoff.
    ``limits``: what the aggregator is granted (``ClientLimits``).
    ``answer_delay_s`` delays every reply (fault injection for deadline tests only);
    ``protocol_version`` may be overridden only to test that a mismatch is turned away.
    """
    name = f"{socket.gethostname()}:{os.getpid()}"
    try:
        users = _UsersSide(config, claim)  # records and ledgers are ready before connecting
    except (LDPError, OSError) as exc:
        say(f"ldp client {claim.key}: cannot host its users: {exc}")
        return EXIT_REJECTED
    watcher = asyncio.ensure_future(_watch_parent(exit_with_parent)) if exit_with_parent else None
    try:
        body = asyncio.ensure_future(_connect(address, claim, users, name, connect_timeout_s, limits, answer_delay_s, protocol_version, say, tls))
        waiters = {body} | ({watcher} if watcher else set())
        done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if body in done:
            return body.result()
        body.cancel()
        with contextlib.suppress(BaseException):
            await body
        say(f"ldp client {claim.key}: the launching process is gone; exiting")
        return EXIT_LOST
    except Exception as exc:  # noqa: BLE001 - last resort: one line, never a traceback
        say(f"ldp client {claim.key}: stopped by an unexpected failure: {type(exc).__name__}: {_quote(str(exc))}; exiting")
        return EXIT_LOST
    finally:
        if watcher is not None:
            watcher.cancel()
        users.store.close()  # every charge is already committed; this compacts a durable ledger


async def _connect(
    address: str,
    claim: ShardClaim,
    users: _UsersSide,
    name: str,
    connect_timeout_s: float,
    limits: ClientLimits,
    answer_delay_s: float,
    protocol_version: int,
    say: Callable[[str], None],
    tls: ClientTLS | None = None,
) -> int:
    """Reach the aggregator, say Hello (again, with backoff, while the claim overlaps a connected
    shard and ``connect_timeout_s`` is not spent), then serve; returns an exit code."""
    loop = asyncio.get_running_loop()
    end = loop.time() + connect_timeout_s
    backoff = limits.retry_first_s
    mode = client_mode(tls)
    channel_cm = (
        grpc.aio.secure_channel(address, tls.credentials, options=_client_options())
        if tls is not None
        else grpc.aio.insecure_channel(address, options=_client_options())
    )
    async with channel_cm as channel:
        while True:
            if not await _wait_for_aggregator(channel, address, claim, end, connect_timeout_s, say, mode):
                # gRPC says only UNAVAILABLE: diagnose says which mismatch (plaintext/TLS, CA, host)
                why = await diagnose(channel, client=mode)
                say(f"ldp client {claim.key}: cannot reach the aggregator at {address} after {connect_timeout_s:g} s{': ' + why if why else ''}; giving up")
                return EXIT_LOST
            call = pb_grpc.AggregatorStub(channel).Connect(metadata=tls.metadata or None) if tls is not None else pb_grpc.AggregatorStub(channel).Connect()
            try:
                code = await _handshake(call, claim, users, name, limits, protocol_version, say)
                if code is None:
                    code = await _serve(call, claim, users, limits, answer_delay_s, say)
            except grpc.aio.AioRpcError as exc:
                say(f"ldp client {claim.key}: lost the aggregator at {address} ({exc.code().name}: {_quote(exc.details() or '')}); exiting")
                return EXIT_LOST
            finally:
                call.cancel()
            if code != _RETRY:
                return code
            left = end - loop.time()
            if left <= 0:
                say(f"ldp client {claim.key}: its claim still overlaps a connected shard after {connect_timeout_s:g} s; giving up")
                return EXIT_REJECTED
            say(f"ldp client {claim.key}: trying the claim again in {min(backoff, left):.3g} s")
            await asyncio.sleep(min(backoff, left))
            backoff = min(2 * backoff, limits.retry_max_s)


STATUS_EVERY_S = 10.0
"""While the aggregator is not up, a waiting client says so this often (no long silences)."""


async def _wait_for_aggregator(
    channel: grpc.aio.Channel,
    address: str,
    claim: ShardClaim,
    end: float,
    connect_timeout_s: float,
    say: Callable[[str], None],
    mode: ClientMode = "plaintext",
) -> bool:
    """Wait until the channel is ready or ``end`` (loop time) passes; a status line every
    ``STATUS_EVERY_S`` seconds, saying why it does not connect (``diagnose``). True when ready."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while True:
        left = end - loop.time()
        try:
            await asyncio.wait_for(channel.channel_ready(), max(min(left, STATUS_EVERY_S), 0.5))
            return True
        except TimeoutError:
            if end - loop.time() <= 0:
                return False
            why = await diagnose(channel, timeout_s=min(2.0, max(end - loop.time(), 0.1)), client=mode)
            say(
                f"ldp client {claim.key}: waiting for the aggregator at {address} ({loop.time() - started:.0f} s so far; "
                f"giving up after {connect_timeout_s:g} s){': ' + why if why else ''}"
            )


async def _handshake(
    call: grpc.aio.StreamStreamCall,
    claim: ShardClaim,
    users: _UsersSide,
    name: str,
    limits: ClientLimits,
    protocol_version: int,
    say: Callable[[str], None],
) -> int | None:
    """Hello → Welcome → Ready. None once the client is in; else an exit code (or ``_RETRY``)."""
    await call.write(
        pb.ClientMessage(
            hello=pb.Hello(
                protocol_version=protocol_version,
                shard_index=claim.index,
                shard_count=claim.count,
                sub_index=claim.sub_index,
                sub_count=claim.sub_count,
                client_name=name,
            )
        )
    )
    loop = asyncio.get_running_loop()
    end = loop.time() + limits.welcome_timeout_s
    while True:
        try:
            first = await asyncio.wait_for(call.read(), max(0.0, end - loop.time()))
        except TimeoutError:
            say(f"ldp client {claim.key}: no Welcome from the aggregator within {limits.welcome_timeout_s:g} s of Hello; exiting")
            return EXIT_LOST
        if first is not None:
            break
        say(f"ldp client {claim.key}: ignored a message that does not decode")  # then wait on for Welcome
    if first is grpc.aio.EOF:
        say(f"ldp client {claim.key}: the aggregator ended the stream before Welcome; exiting")
        return EXIT_LOST
    kind = first.WhichOneof("kind")
    if kind == "close":
        reason = _quote(first.close.reason)
        if "overlaps" in first.close.reason:  # another client holds the claim, perhaps briefly
            say(f"ldp client {claim.key}: turned away by the aggregator: {reason}")
            return _RETRY
        say(f"ldp client {claim.key}: turned away by the aggregator: {reason}")
        return EXIT_REJECTED
    if kind != "welcome":
        say(f"ldp client {claim.key}: protocol error: expected Welcome, got {kind}; exiting")
        return EXIT_REJECTED
    welcome = first.welcome
    if welcome.protocol_version != protocol_version:
        # Messages of another version mean other things (docs/protocol.md, Versioning): serve no
        # round under them. The aggregator hears why (Ready.error), like a wrong range.
        reason = (
            f"protocol version mismatch: the aggregator speaks version {welcome.protocol_version}, "
            f"this client speaks version {protocol_version}"
        )
        await call.write(pb.ClientMessage(ready=pb.Ready(error=reason)))
        say(f"ldp client {claim.key}: refusing: {reason}")
        await _finish_writing(call)
        return EXIT_REJECTED
    shard = users.shard
    if shard is None:  # standby (a seal key, no data of its own): it hosts what a Load brings, nothing yet
        await call.write(pb.ClientMessage(ready=pb.Ready(load_id=0)))
        return None
    if (welcome.first_user, welcome.user_count) != (shard.first_user, shard.count):
        reason = (
            f"the aggregator assigned users {welcome.first_user}+{welcome.user_count}, but claim {claim.key} of this client's "
            f"{shard.data.size} users is {shard.first_user}..{shard.stop - 1}"
        )
        await call.write(pb.ClientMessage(ready=pb.Ready(error=reason)))
        say(f"ldp client {claim.key}: refusing: {reason}")
        await _finish_writing(call)  # the refusal must reach the aggregator before the call is cancelled
        return EXIT_REJECTED
    await call.write(pb.ClientMessage(ready=users.ready(0)))
    return None


async def _finish_writing(call: grpc.aio.StreamStreamCall, timeout_s: float = 2.0) -> None:
    """Half-close the stream and give the aggregator a moment to read what was written (a
    cancelled call can drop its last message on a loaded machine); never raises, never waits long."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(call.done_writing(), timeout_s)
        await asyncio.wait_for(call.read(), timeout_s)  # the aggregator's Close, or the end of the stream


class _PendingRound:
    """The parts of at most one unfinished round request, bounded in bytes and in time
    (``ClientLimits``). ``add`` says what to do with each part that arrives."""

    def __init__(self, limits: ClientLimits, log: Callable[[str], None]) -> None:
        self.limits = limits
        self.log = log
        self.key: tuple[int, int] | None = None
        self.parts: list[pb.RoundRequest] = []
        self.size = 0
        self.expires = 0.0
        self.timeout = 0.0
        self.dropped: tuple[int, int] | None = None  # the last dropped request: its later parts are ignored
        self.dropped_why = ""

    def clear(self) -> None:
        self.key, self.parts, self.size = None, [], 0

    def _drop(self, key: tuple[int, int], why: str) -> None:
        self.log(f"dropped the unfinished request of session {key[0]} round {key[1]}: {why}")
        self.dropped, self.dropped_why = key, why
        self.clear()

    def time_left(self, now: float) -> float | None:
        """Seconds until the unfinished request expires; None when there is none."""
        return None if self.key is None else max(0.0, self.expires - now)

    def expire(self, now: float) -> None:
        if self.key is not None and now >= self.expires:
            self._drop(self.key, f"its remaining parts did not arrive within {self.timeout:g} s")

    def add(self, part: pb.RoundRequest, now: float) -> tuple[list[pb.RoundRequest], str] | None:
        """A request to handle — (its parts, "") to answer, or ([part], why) to refuse — or None
        while more parts are expected (or the part belongs to a dropped request)."""
        key = (int(part.session_id), int(part.round))
        if key == self.dropped:
            if not part.final:
                return None
            self.dropped = None
            return [part], self.dropped_why
        if self.key is not None and key != self.key:
            self._drop(self.key, f"a part of session {key[0]} round {key[1]} came first (one unfinished request at a time)")
        size = part.ByteSize()
        if self.size + size > self.limits.max_request_bytes:
            self._drop(key, f"its parts exceed {self.limits.max_request_bytes} bytes")
            if not part.final:
                return None
            self.dropped = None
            return [part], self.dropped_why
        if self.key is None:
            if part.final:
                return [part], ""  # the usual case: a request in one part
            self.key, self.timeout = key, self.limits.part_timeout(part.deadline_s)
            self.expires = now + self.timeout
        self.parts.append(part)
        self.size += size
        if not part.final:
            return None
        parts = self.parts
        self.clear()
        return parts, ""


async def _serve(
    call: grpc.aio.StreamStreamCall,
    claim: ShardClaim,
    users: _UsersSide,
    limits: ClientLimits,
    answer_delay_s: float,
    say: Callable[[str], None],
) -> int:
    """Answer rounds, ledger queries and Loads until Close; returns an exit code. Nothing the
    aggregator sends raises out of here (only a broken stream, as ``AioRpcError``)."""
    loop = asyncio.get_running_loop()
    pending = _PendingRound(limits, lambda line: say(f"ldp client {claim.key}: {line}"))
    stream = _Stream(call, claim, users, pending, answer_delay_s, say)
    reading: asyncio.Future[Any] | None = None
    try:
        while True:
            if reading is None:
                reading = asyncio.ensure_future(call.read())
            # Never cancel a read (it would break the call): wait for it with a timeout instead.
            done, _ = await asyncio.wait({reading}, timeout=pending.time_left(loop.time()))
            if not done:
                pending.expire(loop.time())
                continue
            task, reading = reading, None
            code = await stream.handle(task.result())
            if code is not None:
                return code
    finally:
        if reading is not None and not reading.done():
            reading.cancel()  # the client is leaving: the call is cancelled next anyway


@dataclass
class _Stream:
    """What ``_serve`` answers with: the call, this client's claim and users, the request being
    assembled from its parts, the answer delay (tests) and where lines go."""

    call: grpc.aio.StreamStreamCall
    claim: ShardClaim
    users: _UsersSide
    pending: _PendingRound
    answer_delay_s: float
    say: Callable[[str], None]

    async def handle(self, msg: Any) -> int | None:
        """One message from the aggregator: the exit code when the client leaves, else None."""
        key = self.claim.key
        if msg is grpc.aio.EOF:
            self.say(f"ldp client {key}: the aggregator ended the stream without Close; exiting")
            return EXIT_LOST
        if msg is None:  # undecodable bytes: the message is dropped, the client stays up
            self.say(f"ldp client {key}: ignored a message that does not decode")
            return None
        kind = msg.WhichOneof("kind")
        if kind == "close":
            return self.closed(msg.close)
        if kind == "load":
            await self.load(msg.load)
        elif kind == "ledger_query":
            await self.ledger(msg.ledger_query)
        elif kind == "round":
            await self.round(msg.round)
        return None  # other kinds: unknown or out of place, ignored (forward compatible)

    def closed(self, close: pb.Close) -> int:
        if close.failed:
            self.say(f"ldp client {self.claim.key}: the experiment failed: {_quote(close.reason)}; exiting")
            return EXIT_RUN_FAILED
        self.say(f"ldp client {self.claim.key}: the aggregator closed the connection: {_quote(close.reason)}")
        return EXIT_CLOSED

    async def load(self, load: pb.Load) -> None:
        self.pending.clear()  # unfinished requests belong to the old population
        ready = self.users.load(load)
        ready.error = _clip(ready.error)
        await self.call.write(pb.ClientMessage(ready=ready))
        if ready.error:
            self.say(f"ldp client {self.claim.key}: cannot load the new population: {_quote(ready.error)}")

    async def ledger(self, query: pb.LedgerQuery) -> None:
        current = self.users.shard
        first_user, units = (current.first_user, current.ledger.spent_units()) if current is not None else (0, np.zeros(0, dtype=np.int64))
        for m in codec.encode_ledger(query.query_id, first_user, units):
            await self.call.write(m)

    async def round(self, part: pb.RoundRequest) -> None:
        current = self.users.shard
        handled = self.pending.add(part, asyncio.get_running_loop().time())
        if handled is None:
            return
        parts, refusal = handled
        if refusal:
            reply = _round_error(parts, f"this client dropped the request: {refusal}")
        elif current is None:
            reply = _round_error(parts, "this client holds no users (on standby, or its last Load failed)")
        else:
            await self.answer(current, parts)
            return
        if self.answer_delay_s > 0:
            await asyncio.sleep(self.answer_delay_s)
        for m in _encode_reply(reply):
            await self.call.write(m)

    async def answer(self, shard: Shard, request_parts: list[pb.RoundRequest]) -> None:
        """Answer one round in parts (``reply_parts``): the first drawn here (a round of one part,
        the common small round, never leaves the event loop's thread), each later one in a worker
        thread while the one before it is written, so the loop stays free to write and to keep
        the call alive. The generator is advanced by one thread at a time, and closed only once
        no thread runs it."""
        loop = asyncio.get_running_loop()
        parts = reply_parts(shard, request_parts, self.pending.limits.reply_part_bytes)
        drawing: asyncio.Future[ReplyPart] | None = None
        try:
            part = _draw(parts, request_parts)
            if self.answer_delay_s > 0:
                await asyncio.sleep(self.answer_delay_s)
            while True:
                drawing = None if part.final else loop.run_in_executor(None, _draw, parts, request_parts)  # the next part, drawn while this one is written
                for m in _encode_reply(part.reply, final=part.final):
                    await self.call.write(m)
                if drawing is None:
                    return
                part = await drawing
        finally:
            if drawing is not None and not drawing.done():
                with contextlib.suppress(BaseException):
                    await asyncio.shield(drawing)  # a part still being drawn: let it finish
            if drawing is None or drawing.done():  # never close a generator a thread is running (it closes itself when dropped)
                parts.close()  # the parts drawn stay charged (they may have left); nothing else was charged


def _draw(parts: Generator[ReplyPart, None, None], request_parts: list[pb.RoundRequest]) -> ReplyPart:
    """The next part of a reply; an unexpected failure becomes the round's final, error part (the
    one guard of a round's answer: the process stays up and the round ends, whatever happens)."""
    try:
        return next(parts)
    except Exception as exc:  # noqa: BLE001 - StopIteration included: a reply always ends with a final part
        return ReplyPart(_round_error(request_parts, f"the shard failed to answer: {type(exc).__name__}: {exc}"), True)


def reply_parts(shard: Shard, request_parts: list[pb.RoundRequest], part_bytes: int = REPLY_PART_BYTES) -> Generator[ReplyPart, None, None]:
    """The parts of ``shard``'s reply to a round request (``Shard.answer_in_parts``, parts of
    about ``part_bytes`` of reports), ending with the final one; a malformed request is a final
    error part. Drawn through ``_draw``, which turns any other failure into one."""
    try:
        request: RoundRequest = codec.decode_request(request_parts)
    except Exception as exc:  # noqa: BLE001 - ParameterError, ValueError, RecursionError (deep JSON), MemoryError...
        yield ReplyPart(_round_error(request_parts, f"malformed round request: {type(exc).__name__}: {exc}"), True)
        return
    yield from shard.answer_in_parts(request, part_bytes)


def _encode_reply(reply: RoundReply, final: bool = True) -> list[pb.ClientMessage]:
    """``codec.encode_reply`` with every error clipped to ``MAX_ERROR_CHARS`` and the results
    batched so that the parts stay a few MiB even when most of a reply is error text (the codec
    sizes parts by their reports). The decoded reply is the same, errors clipped. ``final``:
    whether this reply is the round's last part (else no message of it is marked final)."""
    results = tuple(r if len(r.error) <= MAX_ERROR_CHARS else dataclasses.replace(r, error=_clip(r.error)) for r in reply.results)
    reply = RoundReply(reply.session_id, reply.round, results, _clip(reply.error))
    batches: list[list[Result]] = [[]]
    size = 0
    for r in results:
        cost = 4 * len(r.error) + 64  # UTF-8 bytes, at most
        if batches[-1] and size + cost > codec.CHUNK_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(r)
        size += cost
    if len(batches) == 1:
        out = codec.encode_reply(reply)
    else:
        out = [m for b in batches for m in codec.encode_reply(RoundReply(reply.session_id, reply.round, tuple(b), reply.error))]
    for m in out[:-1] if final else out:
        m.reply.final = False
    return out


class _UsersSide:
    """The client's users: its configuration, its ledger store, and the shard it hosts now."""

    def __init__(self, config: ClientConfig, claim: ShardClaim) -> None:
        self.config = config
        self.claim = claim
        self.store = config.open_store()
        data = config.holdings()  # None on standby: no users until a sealed population arrives
        self.shard: Shard | None = None if data is None else self._host(data)
        if self.shard is not None:
            self.shard.description()  # an inferred data schema is refused here, before connecting (I3)

    def _host(self, data: Holdings) -> Shard:
        lo, hi = shard_range(data.size, self.claim)
        if hi <= lo:
            raise ParameterError(f"shard {self.claim.key} holds no users of data with {data.size} users")
        return self.config.shard(data, lo, hi - lo, self.store)

    def ready(self, load_id: int) -> pb.Ready:
        shard = self.shard
        assert shard is not None
        return pb.Ready(
            load_id=load_id,
            first_user=shard.first_user,
            user_count=shard.count,
            budget=shard.budget,
            description_json=json.dumps(shard.description().to_json()),
        )

    def load(self, load: pb.Load) -> pb.Ready:
        """Host the population sealed in a Load (or say why not: the process stays up)."""
        self.shard = None  # free the old records before generating the new ones
        try:
            spec = self.config.open_sealed(load.sealed_population)
            lo, hi = shard_range(spec.size, self.claim)
            if (load.first_user, load.user_count) != (lo, hi - lo):
                raise ParameterError(
                    f"the Load names users {load.first_user}+{load.user_count}, but claim {self.claim.key} of the sealed population is {lo}..{hi - 1}"
                )
            self.shard = self._host(spec)
        except Exception as exc:  # noqa: BLE001 - a bad blob or a failed generation is reported, not fatal
            return pb.Ready(load_id=load.load_id, first_user=load.first_user, user_count=load.user_count, error=f"{type(exc).__name__}: {exc}")
        return self.ready(load.load_id)


def parse_fraction(text: str, what: str = "shard") -> tuple[int, int]:
    """'K/M' → (K, M) with 0 ≤ K < M."""
    try:
        k, m = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} must look like K/M (e.g. 0/2), got {text!r}") from None
    if not 0 <= k < m:
        raise argparse.ArgumentTypeError(f"{what} K/M needs 0 ≤ K < M, got {text!r}")
    return k, m


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ldp.wire.client", description="Host one shard of users for an ldp aggregator.")
    parser.add_argument("--connect", required=True, help="aggregator address HOST:PORT")
    parser.add_argument("--config", required=True, help="the users' side configuration (ClientConfig JSON): a file, or - for standard input")
    parser.add_argument("--shard", type=parse_fraction, default=(0, 1), help="machine shard K/M (default 0/1)")
    parser.add_argument("--sub", type=lambda t: parse_fraction(t, "sub-shard"), default=(0, 1), help="process j/P on this machine (default 0/1)")
    parser.add_argument(
        "--connect-timeout", type=float, default=60.0,
        help="seconds to keep retrying while the aggregator is not up, or while it turns the claim away because another client holds an overlapping one",
    )
    defaults = ClientLimits()
    parser.add_argument("--welcome-timeout", type=float, default=defaults.welcome_timeout_s, help=f"seconds to wait for Welcome after Hello (default {defaults.welcome_timeout_s:g})")
    parser.add_argument(
        "--part-timeout", type=float, default=defaults.part_timeout_s,
        help=f"at most this many seconds (or the request's own deadline) for the rest of a round request sent in parts (default {defaults.part_timeout_s:g})",
    )
    parser.add_argument(
        "--max-request-bytes", type=int, default=defaults.max_request_bytes,
        help=f"bytes of one unfinished round request the client buffers (default {defaults.max_request_bytes})",
    )
    parser.add_argument(
        "--reply-part-bytes", type=int, default=defaults.reply_part_bytes, metavar="B",
        help=f"write a round's reply in parts of about B bytes of reports, each drawn while the one before is sent (default {defaults.reply_part_bytes})",
    )
    parser.add_argument("--answer-delay", type=float, default=0.0, help=argparse.SUPPRESS)  # fault injection (tests)
    parser.add_argument("--protocol-version", type=int, default=codec.PROTOCOL_VERSION, help=argparse.SUPPRESS)  # tests
    parser.add_argument(
        "--exit-with-parent", nargs="?", type=int, const=0, default=None, metavar="PID",
        help="exit when the launching process is gone: PID (what the launchers pass: no race with a parent that dies first), or this process's parent at start",
    )
    parser.add_argument("--tls", metavar="DIR", help="connect over TLS with the certificates in DIR (ldp-sim certs); see docs/security.md")
    parser.add_argument("--client-name", metavar="NAME", help="with --tls: this client's certificate DIR/client-NAME.pem (mTLS)")
    parser.add_argument("--token-file", metavar="F", help="with --tls: the enrolment token (token mode)")
    args = parser.parse_args(argv)
    claim = ShardClaim(args.shard[0], args.shard[1], args.sub[0], args.sub[1])
    try:
        limits = ClientLimits(args.welcome_timeout, args.part_timeout, args.max_request_bytes, reply_part_bytes=args.reply_part_bytes)
    except ParameterError as exc:
        parser.error(str(exc))
    try:
        config = ClientConfig.loads(sys.stdin.read() if args.config == "-" else open(args.config, encoding="utf-8").read())
        if args.tls is None and (args.client_name or args.token_file):
            raise ParameterError("--client-name and --token-file need --tls DIR")
        tls = client_tls(args.tls, args.client_name, args.token_file) if args.tls is not None else None
    except (LDPError, OSError) as exc:
        print(f"ldp client {claim.key}: bad configuration: {exc}", file=sys.stderr, flush=True)
        return EXIT_REJECTED
    try:
        return asyncio.run(
            run_client(
                args.connect,
                claim,
                config,
                connect_timeout_s=args.connect_timeout,
                limits=limits,
                answer_delay_s=args.answer_delay,
                protocol_version=args.protocol_version,
                exit_with_parent=None if args.exit_with_parent is None else (args.exit_with_parent or os.getppid()),
                tls=tls,
            )
        )
    except KeyboardInterrupt:
        print(f"ldp client {claim.key}: interrupted; exiting", file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
