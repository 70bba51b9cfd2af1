"""A round answered in parts (``Shard.answer_in_parts``): the same reports, and the charge
invariant part by part.

Issue 27: the client processes stream a round's reply in parts so that the aggregator checks one
part while the users sample the next. The invariant it must keep is the project's: *a charge is
made before a report leaves, committed (on disk first where durable) before it leaves, and only
for a report that leaves*. Part by part that reads:

- C1: when a part is yielded (free to leave), every one of its reports is charged and no charge
  is pending (the store committed it);
- C2: when the round ends — answered, or a sampler failing at any point — the users charged are
  exactly those whose reports were yielded, and the nonces of the others are where they were.

``_broken`` checks each half against a deliberately broken variant written here: a store whose
commit does nothing (C1 catches the parts leaving uncommitted), and a ledger whose refund does
nothing (C2 catches the users charged for reports that never left).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from ldp.core.budget import Ledger
from ldp.core.query_specs import field_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.local.ledger_store import MemoryLedgerStore, SqliteLedgerStore
from ldp.local.messages import Assignment, RoundReply, RoundRequest, SessionKind, Users
from ldp.local.shard import SAMPLE_CHUNK, ReplyPart, Shard
from tests.local.test_memoized_reports import PREFIX
from tests.wire.wire_helpers import population

N = 5 * SAMPLE_CHUNK + 123  # every assignment over all users is six slices
BIT0 = field_query("x", 0)
SPEC = population(n=N, budget=1.0, seed=5)


def _request(rnd: int, *assignments: Assignment) -> RoundRequest:
    return RoundRequest(1, SessionKind.INTERACTIVE, rnd, tuple(assignments))


def _round(rnd: int = 1) -> RoundRequest:
    """Every kind of step: a range, a permuted id set, an invalid assignment between them, a
    memoized randomizer, and users refused (the first SAMPLE_CHUNK spent 0.9 in round 0)."""
    ids = np.random.default_rng(3).permutation(N)[: 3 * SAMPLE_CHUNK]
    return _request(
        rnd,
        Assignment(10, Users.range(0, N), RandomizerSpec("binary_rr", BIT0, 0.25)),
        Assignment(11, Users.of(ids), RandomizerSpec("kary_rr", PREFIX, 0.05)),
        Assignment(12, Users.range(N - 5, N + 5), RandomizerSpec("binary_rr", BIT0, 0.25)),  # outside the shard: an error result
        Assignment(13, Users.range(0, N), RandomizerSpec("l_grr", PREFIX, 0.5, {"epsilon_1": 0.25})),
    )


def _shard(store: MemoryLedgerStore | SqliteLedgerStore | None = None) -> Shard:
    shard = Shard(SPEC, 0, N, store=store)
    (spent,) = shard.answer(_request(0, Assignment(1, Users.range(0, SAMPLE_CHUNK), RandomizerSpec("binary_rr", BIT0, 0.9)))).results
    assert not spent.error
    return shard


def _joined(replies: list[RoundReply]) -> dict[int, tuple[np.ndarray, np.ndarray, str]]:
    """Each request's (reports, refusal flags, error) over the parts, joined in order."""
    out: dict[int, tuple[list[np.ndarray], list[np.ndarray], str]] = {}
    for reply in replies:
        for r in reply.results:
            values, refused, _ = out.setdefault(r.request_id, ([], [], r.error))
            values.append(np.asarray(r.values))
            refused.append(np.asarray(r.refused, dtype=bool))
    return {rid: (np.concatenate(v), np.concatenate(f), e) for rid, (v, f, e) in out.items()}


def test_the_parts_joined_are_the_whole_answer_report_for_report() -> None:
    whole, streamed = _shard(), _shard()
    expected = _joined([whole.answer(_round())])
    parts = list(streamed.answer_in_parts(_round(), part_bytes=1))
    assert len(parts) >= 10 and [p.final for p in parts] == [False] * (len(parts) - 1) + [True]
    got = _joined([p.reply for p in parts])
    assert got.keys() == expected.keys() == {10, 11, 12, 13}
    for rid, (values, refused, error) in expected.items():
        np.testing.assert_array_equal(got[rid][0], values)
        np.testing.assert_array_equal(got[rid][1], refused)
        assert got[rid][2] == error
    assert "outside this shard" in expected[12][2]
    assert expected[10][1][:SAMPLE_CHUNK].all() and not expected[10][1][SAMPLE_CHUNK:].any()  # the spent users refused
    np.testing.assert_array_equal(streamed.ledger.spent_units(), whole.ledger.spent_units())
    np.testing.assert_array_equal(streamed.ledger.nonces(), whole.ledger.nonces())


def test_one_part_without_a_size_and_parts_of_a_size() -> None:
    (only,) = _shard().answer_in_parts(_round())
    assert only.final and len(only.reply.results) == 4
    per_part = [sum(np.asarray(r.values).nbytes for r in p.reply.results) for p in _shard().answer_in_parts(_round(), part_bytes=1 << 19)]
    assert len(per_part) > 1 and all(size >= 1 << 19 for size in per_part[:-1])


# --- the charge invariant, part by part ---


def _reported(parts: list[ReplyPart], request: RoundRequest) -> np.ndarray:
    """Per user, how many of its reports the parts carry (a user answers up to three requests)."""
    count = np.zeros(N, dtype=np.int64)
    offsets: dict[int, int] = {}
    asked = {a.request_id: a.users.array() for a in request.assignments}
    for part in parts:
        for r in part.reply.results:
            if r.error:
                continue
            lo = offsets.get(r.request_id, 0)
            users = asked[r.request_id][lo : lo + len(r.refused)]
            offsets[r.request_id] = lo + len(r.refused)
            count[users[~np.asarray(r.refused, dtype=bool)]] += 1
    return count


def _check(shard: Shard, request: RoundRequest, fail_at: int | None, part_bytes: int) -> list[str]:
    """Answer ``request`` in parts with the sampler failing at its ``fail_at``-th call (None:
    never); what broke C1 or C2, in words."""
    problems: list[str] = []
    before_units, before_nonces = shard.ledger.spent_units().copy(), shard.ledger.nonces().copy()
    parts: list[ReplyPart] = []
    with _failing_sampler(fail_at) as calls:
        for part in shard.answer_in_parts(request, part_bytes):
            parts.append(part)
            if shard.ledger.pending():
                problems.append(f"C1: part {len(parts)} was yielded with {len(shard.ledger.pending())} charges still pending")
            charged = shard.ledger.nonces() - before_nonces
            short = np.flatnonzero(_reported(parts, request) > charged)
            if len(short):
                problems.append(f"C1: part {len(parts)} carries reports of {len(short)} users not charged for them (user {short[0]})")
    assert parts[-1].final
    if fail_at is not None and calls[0] >= fail_at:
        assert parts[-1].reply.error and "RuntimeError: the sampler broke" in parts[-1].reply.error
        sent = "nothing was charged" if len(parts) == 1 else "already sent stay charged"
        assert sent in parts[-1].reply.error, parts[-1].reply.error
    reported = _reported(parts, request)
    charged = shard.ledger.nonces() - before_nonces
    extra = np.flatnonzero(charged != reported)
    if len(extra):
        u = int(extra[0])
        problems.append(f"C2: {len(extra)} users charged for {charged[u]} reports but {reported[u]} left (user {u})")
    spent = shard.ledger.spent_units() - before_units
    if ((spent > 0) != (reported > 0)).any():
        problems.append("C2: spent units where no report left, or a report without spent units")
    return problems


@contextmanager
def _failing_sampler(fail_at: int | None) -> Iterator[list[int]]:
    """Every ``LocalRandomizer.sample`` call counted (the count is yielded); the ``fail_at``-th raises."""
    real = LocalRandomizer.sample
    calls = [0]

    def sample(self: LocalRandomizer, inputs: np.ndarray, randomness: object) -> np.ndarray:
        calls[0] += 1
        if fail_at is not None and calls[0] == fail_at:
            raise RuntimeError("the sampler broke")
        return real(self, inputs, randomness)  # type: ignore[arg-type]

    LocalRandomizer.sample = sample  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        LocalRandomizer.sample = real  # type: ignore[method-assign]


# A part per slice of 1-byte reports (SAMPLE_CHUNK users), and parts of several slices.
PART_BYTES = [1, 3 * SAMPLE_CHUNK]
# Calls of the sampler (one per SAMPLE_CHUNK users drawn): the first ones, across the first
# request's slices, into the second and third requests, and past the last call (no failure).
FAILURES = [None, 1, 2, 6, 7, 9, 10, 12, 99]


@pytest.mark.parametrize("part_bytes", PART_BYTES)
@pytest.mark.parametrize("fail_at", FAILURES)
def test_every_part_leaves_charged_and_committed_and_a_failure_refunds_only_what_did_not_leave(tmp_path: Path, fail_at: int | None, part_bytes: int) -> None:
    store = SqliteLedgerStore(tmp_path / "ledger.sqlite")
    try:
        assert _check(_shard(store), _round(), fail_at, part_bytes) == []
    finally:
        store.close()


def test_a_failure_leaves_the_durable_ledger_with_exactly_the_parts_that_left(tmp_path: Path) -> None:
    """After a failure at the third slice, a fresh process reading the store sees the second
    slice charged (the first one's users were over budget) and nothing else of the round."""
    path = tmp_path / "ledger.sqlite"
    store = SqliteLedgerStore(path)
    shard = _shard(store)
    request = _request(1, Assignment(10, Users.range(0, N), RandomizerSpec("binary_rr", BIT0, 0.25)))
    with _failing_sampler(3):
        parts = list(shard.answer_in_parts(request, part_bytes=1))
    assert [bool(p.reply.error) for p in parts] == [False, True]  # the first slice's users refused: it joined the second's part
    store.close()
    with SqliteLedgerStore(path) as again:
        units = again.open(SPEC.identity, 0, N, 1.0).spent_units()
    rr = Shard(SPEC, 0, N).ledger
    rr.charge(range(0, SAMPLE_CHUNK), 0.9)
    rr.charge(range(SAMPLE_CHUNK, 2 * SAMPLE_CHUNK), 0.25)  # the first slice's users were refused (0.9 + 0.25 > 1)
    np.testing.assert_array_equal(units, rr.spent_units())


@pytest.mark.parametrize("broken", ["commit does nothing", "refund does nothing"])
def test_broken(broken: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks above fail on a store that does not commit and on a ledger that does not refund."""
    if broken == "commit does nothing":
        monkeypatch.setattr(MemoryLedgerStore, "commit", lambda self: None)
        problems = _check(_shard(MemoryLedgerStore()), _round(), None, 1)
        assert any(p.startswith("C1: part 1 was yielded with") for p in problems), problems
    else:
        monkeypatch.setattr(Ledger, "refund", lambda self, charge: None)
        problems = _check(_shard(MemoryLedgerStore()), _round(), 7, 1)
        assert any(p.startswith("C2:") for p in problems), problems


def test_the_observer_sees_each_part_with_the_users_it_answers() -> None:
    seen: list[tuple[RoundRequest, RoundReply]] = []
    shard = _shard()
    shard.observer = lambda request, reply, s: seen.append((request, reply))
    parts = list(shard.answer_in_parts(_round(), part_bytes=3 * SAMPLE_CHUNK))
    assert [reply for _, reply in seen] == [p.reply for p in parts] and len(seen) > 1
    for request, reply in seen:
        assert [a.request_id for a in request.assignments] == [r.request_id for r in reply.results]
        for a, r in zip(request.assignments, reply.results):
            assert r.error or len(a.users) == len(r.refused)
    whole: list[RoundRequest] = []
    shard.observer = lambda request, reply, s: whole.append(request)
    shard.answer(_round(2))
    assert len(whole) == 1 and whole[0] is not None and len(whole[0].assignments) == 4  # a round in one part: the request itself


def test_an_observer_that_fails_changes_nothing_sent(capsys: pytest.CaptureFixture[str]) -> None:
    quiet, loud = _shard(), _shard()
    loud.observer = lambda request, reply, s: 1 / 0
    a, b = _joined([quiet.answer(_round())]), _joined([loud.answer(_round())])
    for rid in a:
        np.testing.assert_array_equal(a[rid][0], b[rid][0])
    assert "(could not show the round: ZeroDivisionError" in capsys.readouterr().err
