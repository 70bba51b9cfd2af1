"""Invalid requests over gRPC: clear per-request errors or refusals, ledgers unchanged, client
processes alive (one shared cluster of 2 client processes and 6·10^5 users)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
import pytest
import pytest_asyncio

from ldp.core.errors import ParameterError, SessionError
from ldp.core.queries import QuerySpec
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import Assignment, RoundRequest, SessionKind, Status, Users
from ldp.local.session import Request, Session
from ldp.wire.aggregator import GrpcLROracle
from ldp.wire.launcher import launch_local
from tests.wire.wire_helpers import BIT0, ledger_of, population, rr

N = 600_000
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def oracle() -> AsyncIterator[GrpcLROracle]:
    async with launch_local(population(n=N, budget=1.0, seed=5), processes=2) as o:
        yield o


async def _alive(oracle: GrpcLROracle) -> None:
    """Both client processes still answer."""
    assert [c.process.poll() for c in oracle.clients] == [None, None]
    s = Session(oracle, SessionKind.INTERACTIVE)
    (r,) = await s.round([Request.of([0, N - 1], rr(2.0**-20))])
    assert r.counts()["answered"] == 2


async def test_a_large_round_is_split_under_the_size_limit(oracle: GrpcLROracle) -> None:
    # 6·10^5 float64 reports (4.8 MB) exceed gRPC's 4 MiB default: they arrive in parts.
    s = Session(oracle, SessionKind.INTERACTIVE)
    (r,) = await s.round([Request.of(range(N), rr(2.0**-10, BIT0, "discrete_laplace"))])
    assert r.counts()["answered"] == N and r.values.dtype == np.float64 and len(r.values) == N
    assert np.isfinite(r.values).all()
    # 6·10^5 explicit ids (4.8 MB) in the request: split into parts too, reassembled in order.
    ids = np.arange(N, dtype=np.int64)[::-1]
    (r2,) = await s.round([Request.of(ids, rr(2.0**-10))])
    np.testing.assert_array_equal(r2.users, ids)
    assert r2.counts()["answered"] == N and r2.values.dtype == np.uint8


async def test_unknown_query_kind(oracle: GrpcLROracle) -> None:
    before = await ledger_of(oracle)
    s = Session(oracle, SessionKind.INTERACTIVE)
    bad, good = await s.round(
        [Request.of(range(10, 20), RandomizerSpec("binary_rr", QuerySpec("no_such_query"), 0.5)), Request.of(range(20, 30), rr(2.0**-12))]
    )
    assert (bad.status == Status.ERROR).all() and len(bad.values) == 0
    assert any("unknown query kind 'no_such_query'" in e for e in bad.errors)
    assert (good.status == Status.ANSWERED).all()  # the other request of the round is answered
    after = await ledger_of(oracle)
    np.testing.assert_array_equal(after[10:20], before[10:20])
    await _alive(oracle)


async def test_unknown_randomizer_kind(oracle: GrpcLROracle) -> None:
    s = Session(oracle, SessionKind.INTERACTIVE)
    (bad,) = await s.round([Request.of(range(5), RandomizerSpec.unchecked("telepathy", BIT0, 0.5))])
    assert (bad.status == Status.ERROR).all() and any("unknown randomizer kind 'telepathy'" in e for e in bad.errors)


@pytest.mark.parametrize("epsilon", [float("nan"), float("inf"), 0.0, -1.0])
async def test_invalid_epsilon(oracle: GrpcLROracle, epsilon: float) -> None:
    before = await ledger_of(oracle)
    s = Session(oracle, SessionKind.INTERACTIVE)
    users = [1, 2, N // 2 + 1]  # on both shards
    (r,) = await s.round([Request.of(users, RandomizerSpec.unchecked("binary_rr", BIT0, epsilon))])  # a hostile aggregator's spec
    assert (r.status == Status.ERROR).all()
    assert any("epsilon must be a finite number > 0" in e for e in r.errors), r.errors
    np.testing.assert_array_equal(await ledger_of(oracle), before)
    await _alive(oracle)


async def test_over_budget_users_are_refused_and_ledger_unchanged(oracle: GrpcLROracle) -> None:
    s = Session(oracle, SessionKind.INTERACTIVE)
    spenders = np.array([100, 101, N // 2 + 100], dtype=np.int64)
    (first,) = await s.round([Request.of(spenders, rr(0.75))])
    assert (first.status == Status.ANSWERED).all()
    before = await ledger_of(oracle)
    asked = np.arange(98, 104, dtype=np.int64).tolist() + [N // 2 + 100]
    (r,) = await s.round([Request.of(asked, rr(0.5))])
    np.testing.assert_array_equal(np.sort(r.refused_users), np.sort(spenders))
    np.testing.assert_array_equal(np.sort(r.answered_users), [98, 99, 102, 103])
    assert len(r.values) == 4
    after = await ledger_of(oracle)
    np.testing.assert_array_equal(after[spenders], before[spenders])  # refused: no charge
    assert (after[[98, 99, 102, 103]] > before[[98, 99, 102, 103]]).all()


async def test_second_round_of_a_non_interactive_session_is_refused(oracle: GrpcLROracle) -> None:
    s = Session(oracle, SessionKind.NON_INTERACTIVE)
    (r,) = await s.round([Request.of(range(200, 210), rr(2.0**-12))])
    assert (r.status == Status.ANSWERED).all()
    with pytest.raises(SessionError, match="non-interactive"):
        await s.round([Request.of(range(200, 210), rr(2.0**-12))])
    # The client processes refuse it on their own too (a misbehaving aggregator cannot bypass it).
    before = await ledger_of(oracle)
    raw = RoundRequest(s.session_id, SessionKind.NON_INTERACTIVE, 1, (Assignment(1 << 60, Users.range(200, 210), rr(2.0**-12)),), True, 5.0)
    (r2,) = await oracle.run_round(raw)
    assert (r2.status == Status.ERROR).all()
    assert any("non-interactive" in e and "refusing round 1" in e for e in r2.errors), r2.errors
    np.testing.assert_array_equal(await ledger_of(oracle), before)


async def test_users_held_by_no_shard_are_an_error_before_sending(oracle: GrpcLROracle) -> None:
    s = Session(oracle, SessionKind.INTERACTIVE)
    with pytest.raises(ParameterError, match="no connected shard holds"):
        await s.round([Request.of([0, N + 5], rr(0.5))])
    assert s.rounds_done == 0
    await _alive(oracle)
