"""The aggregator's round exchange: send each shard its part of a round, gather validated replies.

What: ``RoundExchange.exchange`` sends each shard its ``RoundRequest`` and waits (≤ the round's
deadline) for the replies; ``on_reply`` takes a reply part from a client, checks it against what
that shard was asked (``codec.ReplyCheck``) and, on the final part, resolves the round for that
shard. *Reply observers* (public hooks, ``ReplyObserver``) are told each shard's reply the moment
it is resolved, after validation (the classroom's dashboard shows replies as they arrive).
Guarantees: a shard that disconnects resolves to None at once, one that misses the deadline
resolves to None at the deadline, and a late reply is dropped (replies are matched to (session,
round)); a bad part makes that shard's users of that request ERROR and touches nothing else;
past a round's byte cap the client is cut off; a reply observer that raises never breaks a
round. Writes in flight are never cancelled (``ConnectionRegistry.finish_in_background``).
Source: docs/design.md §3, docs/protocol.md ("Validation").
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import numpy as np

from ldp.core.errors import LDPError, ParameterError
from ldp.core.population import PopulationDescription
from ldp.core.randomizers import RandomizerSpec
from ldp.core.schema import Schema
from ldp.local.messages import Assignment, RoundReply, RoundRequest
from ldp.wire import codec
from ldp.wire.connections import Connection, ConnectionRegistry
from ldp.wire.v1 import aggregator_pb2 as pb

__all__ = ["ReplyObserver", "RoundExchange"]

log = logging.getLogger("ldp.wire.aggregator")

# A reply observer: called with the shard key and its validated reply (or the error reply that
# replaces a bad one) when a shard's part of a round is resolved.
ReplyObserver = Callable[[str, RoundReply], None]


class RoundExchange:
    """Rounds over the registry's connections: requests out, checked replies in."""

    def __init__(self, registry: ConnectionRegistry) -> None:
        self.registry = registry
        self.reply_observers: list[ReplyObserver] = []
        self._formats: dict[str, codec.ReportFormat] = {}  # report format per randomizer spec (cache)
        self._formats_schema: Schema | None = None  # the schema the cached formats are for

    def loaded(self) -> PopulationDescription:
        """The description of the population being served; an ``LDPError`` on standby."""
        if self.registry.description is None:
            raise LDPError("the aggregator is on standby: no population has been loaded yet")
        return self.registry.description

    def population_changed(self) -> None:
        """Report formats depend on the schema alone: forget them when a population of another
        schema is served (a sweep loads thousands of populations of one schema, and deriving a
        format builds the randomizer: it cost more than a small trial's round)."""
        description = self.registry.description
        self._formats_for(description.schema if description is not None else None)

    def _formats_for(self, schema: Schema | None) -> None:
        """Keep the remembered formats if they are for ``schema``, else forget them."""
        if schema is None or schema != self._formats_schema:
            self._formats.clear()
            self._formats_schema = schema

    async def exchange(self, sent: dict[str, RoundRequest], deadline_s: float) -> dict[str, RoundReply | None]:
        """Send each shard its request; gather replies until the deadline (None = missing)."""
        if not sent:  # every user asked is held by a departed shard: nothing to send
            return {}
        connections = self.registry.connections
        for key, request in sent.items():
            conn = connections.get(key)
            if conn is not None and (request.session_id, request.round) in conn.pending:
                raise ParameterError(f"session {request.session_id} round {request.round} is already in flight to shard {key}")
        futures, sends = self._ask(sent)
        return await self._gather(sent, futures, sends, deadline_s)

    def _ask(self, sent: dict[str, RoundRequest]) -> tuple[dict[str, asyncio.Future[RoundReply | None]], list[Coroutine[Any, Any, None]]]:
        """Register each shard's pending round; its reply future, and the writes still to start."""
        loop = asyncio.get_running_loop()
        futures: dict[str, asyncio.Future[RoundReply | None]] = {}
        sends = []
        for key, request in sent.items():
            fut: asyncio.Future[RoundReply | None] = loop.create_future()
            futures[key] = fut
            conn = self.registry.connections.get(key)
            if conn is None or conn.closed:
                fut.set_result(None)
                continue
            conn.pending[(request.session_id, request.round)] = fut
            conn.checks[(request.session_id, request.round)] = self._reply_check(conn, request)
            sends.append(self._send_round(conn, request, fut))
        return futures, sends

    async def _gather(
        self,
        sent: dict[str, RoundRequest],
        futures: dict[str, asyncio.Future[RoundReply | None]],
        sends: list[Coroutine[Any, Any, None]],
        deadline_s: float,
    ) -> dict[str, RoundReply | None]:
        # Encoding and writing happen concurrently per shard; the deadline covers both.
        gathered = asyncio.gather(*sends)
        try:
            await asyncio.wait(futures.values(), timeout=max(0.0, float(deadline_s)))
        except BaseException:
            # Cancelled (Ctrl-C, an enclosing timeout): forget this round, so the connections do
            # not look busy forever (a later Load refuses to run while a round is in flight).
            for key, fut in futures.items():
                fut.cancel()
                self._forget(key, sent[key])
            raise
        finally:
            # Replies can arrive before the last write() has returned: let the writes finish in
            # the background; a shard that stopped reading only makes its own later rounds miss.
            self.registry.finish_in_background(gathered)
        out: dict[str, RoundReply | None] = {}
        for key, fut in futures.items():
            if fut.done():
                out[key] = fut.result()
                continue
            fut.cancel()
            out[key] = None
            request = sent[key]
            self._forget(key, request)  # a late reply for this round will find no future: dropped
            self.registry.events.append(f"shard {key} missed the {deadline_s:g} s deadline of session {request.session_id} round {request.round}")
        return out

    def _forget(self, key: str, request: RoundRequest) -> None:
        conn = self.registry.connections.get(key)
        if conn is not None:
            conn.forget_round((request.session_id, request.round))

    async def _send_round(self, conn: Connection, request: RoundRequest, fut: asyncio.Future[RoundReply | None]) -> None:
        ok = await conn.send(codec.encode_request(request))
        if not ok and not fut.done():
            fut.set_result(None)

    def _reply_check(self, conn: Connection, request: RoundRequest) -> codec.ReplyCheck:
        """What a correct reply of ``conn`` to ``request`` carries (checked part by part)."""
        expected = []
        for a in request.assignments:
            fmt = self._report_format(a.randomizer)
            expected.append(codec.Expected(a.request_id, len(a.users), fmt, _destination(a, fmt)))
        return codec.ReplyCheck(conn.key, request.session_id, request.round, expected)

    def report_layout(self, spec: RandomizerSpec) -> tuple[np.dtype[Any], int] | None:
        """``spec``'s report dtype (native byte order) and row width for the current population,
        or None when no user can run it (``LROracle.report_layout``)."""
        fmt = self._report_format(spec)
        if fmt.dtype is None:
            return None
        return fmt.dtype.newbyteorder("="), fmt.width

    def _report_format(self, spec: RandomizerSpec) -> codec.ReportFormat:
        """``codec.report_format`` for the current population's schema, cached per spec."""
        try:
            key = json.dumps(spec.to_json(), sort_keys=True, allow_nan=True, default=repr)
        except Exception:  # noqa: BLE001 - an unusual spec is derived every time
            return codec.report_format(spec, self.loaded().schema)
        schema = self.loaded().schema
        self._formats_for(schema)  # the first population's schema (later ones: population_changed)
        fmt = self._formats.get(key)
        if fmt is None:
            if len(self._formats) >= 1024:
                self._formats.clear()
            fmt = self._formats[key] = codec.report_format(spec, schema)
        return fmt

    # --- replies from a client ---

    def on_reply(self, conn: Connection, part: pb.RoundReply) -> str:
        """Take one reply part; '' or the reason to cut the client off (past its byte cap)."""
        key = (int(part.session_id), int(part.round))
        fut, check = conn.pending.get(key), conn.checks.get(key)
        if fut is None or fut.done() or check is None:  # a late reply, or one never asked for
            conn.drop(f"a reply part for session {key[0]} round {key[1]}, which is not awaited")
            return ""
        reason = check.add(part)
        if reason:
            self.resolve(conn, key, check.fail_all(reason))
            return reason
        if part.final:
            reply = check.finish()
            for failure in check.failures:
                log.warning("%s", failure)
                self.registry.events.append(failure)
            self.resolve(conn, key, reply)
        return ""

    def fail_all(self, conn: Connection, reason: str) -> None:
        """Every round pending on ``conn`` ends with ``reason`` for its users (ERROR)."""
        for key in list(conn.pending):
            self.resolve(conn, key, RoundReply(key[0], key[1], error=reason))

    def resolve(self, conn: Connection, key: tuple[int, int], reply: RoundReply) -> None:
        """The shard's part of round ``key`` is ``reply``: tell the observers, then the round."""
        fut = conn.pending.get(key)
        if fut is None or fut.done():
            conn.forget_round(key)
            return
        for observer in list(self.reply_observers):
            try:
                observer(conn.key, reply)
            except Exception as exc:  # noqa: BLE001 - an observer (a dashboard) must never break a round
                self.registry.events.append(f"a reply observer failed: {type(exc).__name__}: {codec.clip_text(str(exc), 200)}")
        conn.forget_round(key)
        fut.set_result(reply)


def _destination(a: Assignment, fmt: codec.ReportFormat) -> np.ndarray | None:
    """``a.into`` when it can hold this part's reports as ``fmt`` says (one row per user, the
    dtype in native order, writable), else None (the parts are then joined at the end)."""
    into = a.into
    if into is None or fmt.dtype is None:
        return None
    shape = (len(a.users), fmt.width) if fmt.width else (len(a.users),)
    if into.shape != shape or into.dtype != fmt.dtype.newbyteorder("=") or not into.flags.writeable:
        return None
    return into
