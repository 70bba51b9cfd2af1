"""The aggregator's client streams: one bidirectional gRPC stream per client process.

What: ``ClientStreams.connect`` is the ``Connect`` handler: it runs the handshake
(``ldp.wire.handshake``), then reads the client's messages and hands each to the part that
handles it (replies → ``ldp.wire.rounds``, ledger parts → ``ldp.wire.ledger_reports``, Readies →
``ldp.wire.load_relay``) until the stream ends or the client is cut off; then the connection
departs and the event log says so.
Guarantees: nothing a client sends raises out of here (an undecodable or unexpected message is
dropped and counted; a bug in a handler cuts off that client only, its rounds ending in ERROR);
a reason from a handler (a reply or ledger report past its cap) cuts the client off.
Source: docs/design.md §3.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from ldp.wire.connections import Connection, ConnectionRegistry
from ldp.wire.handshake import Handshake
from ldp.wire.ledger_reports import LedgerReports
from ldp.wire.load_relay import LoadRelay
from ldp.wire.rounds import RoundExchange
from ldp.wire.v1 import aggregator_pb2 as pb

__all__ = ["ClientStreams"]

log = logging.getLogger("ldp.wire.aggregator")


def _log_stream_end(key: str, task: asyncio.Future[Any]) -> None:
    """Done-callback of a client stream's tasks: retrieve an exception that ended one (logged)."""
    if not task.cancelled() and task.exception() is not None:
        log.info("shard %s: stream ended: %s", key, task.exception())


class ClientStreams:
    """The ``Connect`` handler over the aggregator's parts."""

    def __init__(self, registry: ConnectionRegistry, handshake: Handshake, rounds: RoundExchange, ledgers: LedgerReports, loads: LoadRelay) -> None:
        self.registry = registry
        self.handshake = handshake
        self.rounds = rounds
        self.ledgers = ledgers
        self.loads = loads

    async def connect(self, request_iterator: AsyncIterator[pb.ClientMessage], context: grpc.aio.ServicerContext) -> None:
        conn: Connection | None = None
        tasks: list[asyncio.Future[Any]] = []
        try:
            conn = await self.handshake.run(context)
            if conn is None:
                return
            reader = asyncio.ensure_future(self._read_loop(conn))
            stopper = asyncio.ensure_future(conn.stop.wait())
            tasks = [reader, stopper]
            for t in tasks:
                # A read cancelled while the call is finishing ends with grpc's "RPC already
                # finished" instead of CancelledError: retrieve (and log) it whenever it ends, so
                # shutdown never prints "Task exception was never retrieved".
                t.add_done_callback(functools.partial(_log_stream_end, conn.key))
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # noqa: BLE001 - one broken client must not disturb the server
            log.warning("a client stream failed: %s: %s", type(exc).__name__, exc)
        finally:
            for t in tasks:
                t.cancel()
            if conn is not None:
                self._ended(conn)

    def _ended(self, conn: Connection) -> None:
        """The stream is over: the shard departs, whatever was pending on it resolves."""
        self.registry.depart(conn)
        conn.fail_pending()  # after depart: a round in flight sees the shard as departed
        conn.checks.clear()
        conn.ledger_parts.clear()
        self.registry.release(conn)
        why = f": {conn.close_reason}" if conn.close_reason else ""
        self.registry.notify(f"shard {conn.key} disconnected (users {conn.first_user}..{conn.first_user + conn.count - 1}){why}")

    async def _read_loop(self, conn: Connection) -> None:
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
                self.rounds.fail_all(conn, reason)
            if reason:
                await self.registry.expel(conn, reason)
                return

    def _on_message(self, conn: Connection, msg: pb.ClientMessage | None) -> str:
        """Handle one message from an established client; '' or the reason to cut it off."""
        if msg is None:
            conn.drop("a message that does not decode")
            return ""
        kind = msg.WhichOneof("kind")
        if kind == "reply":
            return self.rounds.on_reply(conn, msg.reply)
        if kind == "ledger":
            return self.ledgers.on_ledger(conn, msg.ledger)
        if kind == "ready":
            self.loads.on_ready(conn, msg.ready)
            return ""
        conn.drop(f"an unexpected {kind or 'empty'} message")
        return ""
