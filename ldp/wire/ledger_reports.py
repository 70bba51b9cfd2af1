"""The aggregator's ledger reports: each user's spent budget, asked from the client processes.

What: ``LedgerReports.spent_units`` (every shard, in user order, or an error) and
``units_by_shard`` (the named shards under one deadline, None for a shard that did not answer)
send ``LedgerQuery`` and gather the parts of each ``LedgerReport``; ``on_ledger`` takes one part
from a client's stream. A diagnostic for tests, labs and the classroom: the aggregator could
compute the same numbers from its own requests and the refusals it saw, so it learns nothing new.
Guarantees: a report is capped at 8 bytes per user plus ``LEDGER_SLACK_BYTES`` (past it the client
is cut off); a malformed report is an error for that shard only; a late report is dropped.
Source: docs/design.md §3, docs/protocol.md ("Ledger query").
"""

from __future__ import annotations

import asyncio
import itertools

import numpy as np

from ldp.core.errors import LDPError
from ldp.wire import codec
from ldp.wire.connections import Connection, ConnectionRegistry
from ldp.wire.v1 import aggregator_pb2 as pb

__all__ = ["LEDGER_SLACK_BYTES", "LedgerReports"]

# Ledger reports beyond the 8 bytes per user they need (headers, parts).
LEDGER_SLACK_BYTES = 64 << 10


def _retrieve(fut: asyncio.Future[np.ndarray | None]) -> None:
    """Done-callback: a malformed report may go unawaited; its exception is retrieved here."""
    if not fut.cancelled():
        fut.exception()


class LedgerReports:
    """LedgerQuery → LedgerReport parts over the registry's connections."""

    def __init__(self, registry: ConnectionRegistry) -> None:
        self.registry = registry
        self._ids = itertools.count(1)

    def _ask(self, conn: Connection) -> tuple[int, asyncio.Future[np.ndarray | None]]:
        qid = next(self._ids)
        fut: asyncio.Future[np.ndarray | None] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(_retrieve)
        conn.ledger_pending[qid] = fut
        return qid, fut

    async def spent_units(self, timeout_s: float = 30.0) -> np.ndarray:
        """Every user's spent budget (exact ledger units) in user order, asked from the shards;
        an ``LDPError`` naming the shards that disconnected before reporting."""
        loop = asyncio.get_running_loop()
        shards = self.registry.shards
        futs = []
        for s in shards:
            conn = self.registry.connections.get(s.key)
            if conn is None:  # it left while the queries were being sent: reported below
                fut: asyncio.Future[np.ndarray | None] = loop.create_future()
                fut.set_result(None)
                futs.append(fut)
                continue
            qid, fut = self._ask(conn)
            futs.append(fut)
            await conn.send([pb.ServerMessage(ledger_query=pb.LedgerQuery(query_id=qid))])
        parts = await asyncio.wait_for(asyncio.gather(*futs), timeout_s)
        missing = [s.key for s, p in zip(shards, parts) if p is None]
        if missing:
            raise LDPError(f"shards {missing} disconnected before reporting their ledgers")
        return np.concatenate([p for p in parts if p is not None]) if parts else np.zeros(0, dtype=np.int64)

    async def units_by_shard(self, keys: list[str], deadline_s: float) -> dict[str, np.ndarray | None]:
        """Each named shard's spent units, asked of all at once under one deadline; None for a
        shard that has not reported by then, has left, or sent a malformed report."""
        asked: dict[str, tuple[Connection, int, asyncio.Future[np.ndarray | None]]] = {}
        for key in keys:
            conn = self.registry.connections.get(key)
            if conn is None or conn.closed or not conn.ready:
                continue
            qid, fut = self._ask(conn)
            asked[key] = (conn, qid, fut)
        # The writes run concurrently and are never cancelled: the deadline covers them.
        sends = asyncio.gather(*(c.send([pb.ServerMessage(ledger_query=pb.LedgerQuery(query_id=q))]) for c, q, _ in asked.values()))
        if asked:
            await asyncio.wait([f for _, _, f in asked.values()], timeout=max(0.0, float(deadline_s)))
        self.registry.finish_in_background(sends)
        return {key: self._collect(asked.get(key)) for key in keys}

    @staticmethod
    def _collect(entry: tuple[Connection, int, asyncio.Future[np.ndarray | None]] | None) -> np.ndarray | None:
        """One shard's answer after the deadline (None: not asked, late, gone or malformed); a late report is dropped."""
        if entry is None:
            return None
        conn, qid, fut = entry
        conn.ledger_pending.pop(qid, None)  # a late report is dropped, and a Load is not kept waiting
        conn.ledger_parts.pop(qid, None)
        if not fut.done():
            fut.cancel()
        return None if fut.cancelled() or fut.exception() is not None else fut.result()

    def on_ledger(self, conn: Connection, part: pb.LedgerReport) -> str:
        """Take one ledger report part; '' or the reason to cut the client off (past its cap)."""
        qid = int(part.query_id)
        fut = conn.ledger_pending.get(qid)
        if fut is None or fut.done():
            conn.drop(f"a ledger part for query {qid}, which is not awaited")
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
