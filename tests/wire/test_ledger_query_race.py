"""A client that leaves while the aggregator is asking the shards for their ledgers is named in a
clear error; the aggregator does not crash on it (it raised KeyError before)."""

from __future__ import annotations

import pytest

from ldp.core.errors import LDPError
from ldp.wire.launcher import launch_local
from tests.wire.wire_helpers import population

pytestmark = pytest.mark.timeout(60)


async def test_a_client_leaving_during_a_ledger_query_is_named() -> None:
    async with launch_local(population(n=100), processes=2, on_client_exit=None) as oracle:
        aggregator = oracle.aggregator  # type: ignore[attr-defined]
        first, second = (s.key for s in aggregator.shards)
        send = aggregator._connections[first].send

        async def send_then_lose_the_other(messages):  # type: ignore[no-untyped-def]
            sent = await send(messages)
            gone = aggregator._connections[second]  # the second client leaves meanwhile, as its stream's end does it
            aggregator._depart(gone)
            gone.fail_pending()
            del aggregator._connections[second]
            return sent

        aggregator._connections[first].send = send_then_lose_the_other
        with pytest.raises(LDPError, match=f"shards \\['{second}'\\] disconnected before reporting their ledgers"):
            await aggregator.ledger_spent_units(timeout_s=10.0)
