"""Reassembling a round (``assemble_round``) at scale: O(n) for ranges, linear in requests.

These check the *structure* that makes the aggregator scale (issue: 10^8–10^9 users), not its
speed (speed is measured in benchmarks/scaling.py): a range request is reassembled without a sort
and without an id array, a round of many requests matches replies in one pass, the status tally
agrees with a plain count, and every shortcut gives what the general path gives.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldp.core.concepts import ConceptClass, ParityConcept
from ldp.core.population import PopulationSpec
from ldp.core.query_specs import label_query
from ldp.core.randomizers import RandomizerSpec
from ldp.local import oracle as oracle_module
from ldp.local.messages import Assignment, Result, RoundReply, RoundRequest, SessionKind, Status, Users, refusals
from ldp.local.oracle import InProcessLROracle, Reports, ShardRange, _tally, assemble_round, split_round
from ldp.local.session import Request, Session

RR = RandomizerSpec("binary_rr", label_query(), 0.25)


def population(n: int, budget: float = 1.0) -> PopulationSpec:
    return PopulationSpec(ConceptClass("parity", 4), ParityConcept((1, 0, 1, 1)), n, budget=budget, seed=3)


def test_tally_counts_every_status_like_a_plain_count():
    rng = np.random.default_rng(0)
    for status in (np.zeros(10_000, dtype=np.uint8), rng.integers(0, 4, 3_000_001).astype(np.uint8), np.zeros(0, dtype=np.uint8)):
        assert _tally(status, block=1 << 16).tolist() == [int(np.count_nonzero(status == s)) for s in Status]


def test_refusals_reads_a_zero_stride_mask_once_and_counts_any_other():
    assert refusals(np.broadcast_to(np.False_, (10**9,))) == 0  # would take seconds if read element by element
    assert refusals(np.broadcast_to(np.True_, (7,))) == 7
    assert refusals(np.array([True, False, True])) == 2
    assert refusals(np.zeros(0, dtype=bool)) == 0


async def test_a_range_round_is_reassembled_without_a_sort_or_an_id_array(monkeypatch):
    """Range requests over 4 shards: no argsort anywhere, ``Reports`` keeps the range (no ids),
    and the result is the one-shard result, bit for bit."""
    n = 20_000
    one = InProcessLROracle(population(n))
    (expected,) = await Session(one, SessionKind.INTERACTIVE).round([Request.of(range(100, n), RR)])

    def no_sort(*args: object, **kwargs: object) -> None:
        raise AssertionError("a range round must not sort")

    monkeypatch.setattr(oracle_module.np, "argsort", no_sort)
    four = InProcessLROracle(population(n), shards=4)
    (got,) = await Session(four, SessionKind.INTERACTIVE).round([Request.of(range(100, n), RR)])
    assert got.asked.ids is None and (got.asked.start, got.asked.stop) == (100, n)
    assert np.array_equal(got.values, expected.values) and np.array_equal(got.status, expected.status)
    assert np.array_equal(got.users, np.arange(100, n)) and np.array_equal(got.answered_users, np.arange(100, n))


async def test_refused_missing_and_error_users_land_where_they_belong_in_a_range_round():
    """One shard refuses some users (over budget), one does not answer, one errs: the statuses,
    the reports of the answered users and the tally match a user-by-user reconstruction."""
    n = 400
    oracle = InProcessLROracle(population(n, budget=0.5), shards=4)
    session = Session(oracle, SessionKind.INTERACTIVE)
    await session.round([Request.of(range(0, 50), RandomizerSpec("binary_rr", label_query(), 0.5))])  # users 0..49 now over budget
    request = RoundRequest(1, SessionKind.INTERACTIVE, 5, (Assignment(77, Users.range(0, n), RR),))
    shards = oracle.shards
    sent = split_round(request, shards)
    replies: dict[str, RoundReply | None] = {key: oracle.shard(key).answer(r) for key, r in sent.items()}
    replies["shard-2"] = None  # deadline missed
    replies["shard-3"] = RoundReply(1, 5, error="shard-3 broke")
    (reports,) = assemble_round(request, sent, replies)
    status = reports.status
    assert (status[:50] == Status.REFUSED).all() and (status[50:200] == Status.ANSWERED).all()
    assert (status[200:300] == Status.MISSING).all() and (status[300:] == Status.ERROR).all()
    assert reports.counts() == {"answered": 150, "refused": 50, "missing": 100, "error": 100}
    assert len(reports.values) == 150 and np.array_equal(reports.answered_users, np.arange(50, 200))
    assert np.array_equal(reports.refused_users, np.arange(50)) and np.array_equal(reports.error_users, np.arange(300, 400))
    assert any("shard-2" in e and "deadline" in e for e in reports.errors) and "shard-3 broke" in reports.errors


async def test_ids_and_ranges_reassemble_alike():
    """A request naming ids (shuffled, across shards) gets each user's report at its position: the
    same report that user gets in a range request of the same round program."""
    n = 3_000
    ids = np.random.default_rng(1).permutation(n)[:1_000]
    (by_range,) = await Session(InProcessLROracle(population(n), shards=3), SessionKind.INTERACTIVE).round([Request.of(range(n), RR)])
    (by_ids,) = await Session(InProcessLROracle(population(n), shards=3), SessionKind.INTERACTIVE).round([Request.of(ids, RR)])
    assert np.array_equal(by_ids.users, ids)
    assert np.array_equal(by_ids.values, by_range.values[ids])


def test_a_round_of_many_requests_matches_replies_by_request_id():
    """2,000 requests over 3 shards: each reply is matched to its request (a shard answering its
    results in reverse order changes nothing). The matching is one dictionary per shard, not a
    scan per request (that was quadratic: 7.9 s at 8,000 requests)."""
    m = 2_000
    request = RoundRequest(1, SessionKind.INTERACTIVE, 0, tuple(Assignment(k, Users.range(3 * k, 3 * k + 3), RR) for k in range(m)))
    shards = [ShardRange("a", 0, 2_000), ShardRange("b", 2_000, 2_000), ShardRange("c", 4_000, 2_000)]
    sent = split_round(request, shards)
    replies: dict[str, RoundReply | None] = {}
    for key, r in sent.items():
        results = [Result(a.request_id, np.full(len(a.users), a.request_id % 2, dtype=np.uint8), np.zeros(len(a.users), dtype=bool)) for a in r.assignments]
        replies[key] = RoundReply(1, 0, tuple(reversed(results)))
    out = assemble_round(request, sent, replies)
    assert [r.request_id for r in out] == list(range(m))
    assert all(r.counts()["answered"] == 3 and (r.values == r.request_id % 2).all() for r in out)


def test_reports_accept_an_id_array_and_keep_a_range_lazily():
    ranged = Reports(1, RR, Users.range(5, 9), np.zeros(4, dtype=np.uint8), np.zeros(4, dtype=np.uint8))
    assert ranged.asked.ids is None and ranged.users.tolist() == [5, 6, 7, 8]
    named = Reports(1, RR, np.array([9, 2]), np.array([0, 1], dtype=np.uint8), np.zeros(1, dtype=np.uint8))  # type: ignore[arg-type]
    assert named.answered_users.tolist() == [9] and named.refused_users.tolist() == [2]


@pytest.mark.parametrize("everyone", [True, False])
def test_a_shard_sends_a_zero_stride_refusal_mask_only_when_nobody_was_refused(everyone: bool):
    n = 1_000
    oracle = InProcessLROracle(population(n, budget=0.5))
    shard = oracle.shard("shard-0")
    if not everyone:
        shard.ledger.charge(np.arange(10), 0.5)
    reply = shard.answer(RoundRequest(1, SessionKind.INTERACTIVE, 0, (Assignment(3, Users.range(0, n), RandomizerSpec("binary_rr", label_query(), 0.25)),)))
    (result,) = reply.results
    assert (result.refused.strides == (0,)) is everyone
    assert refusals(result.refused) == (0 if everyone else 10) and len(result.values) == n - refusals(result.refused)
