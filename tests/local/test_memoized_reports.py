"""Memoized (longitudinal) reports through the users' side: ``l_grr``, ``l_oue``, ``l_osue`` and
``l_sue`` asked in rounds, answered by a ``Shard`` (issue 26).

The invariants, each checked through the door a round uses (sessions on an LR oracle; over gRPC
in tests/wire/test_memoized_grpc.py):

- **the memo lives on the users' side**: every report is the IRR, from the report's own nonce, of
  the user's PRR, a pure function of the memo key derived from the *long-term* report key
  (recomputed here with the public functions, bit for bit); a durable ledger and the same key
  give the same PRRs after a restart, whatever the life's salt;
- **the charge follows the coin, and never depends on a value**: a user's first report of a
  question costs ε∞, every later one ``MEMO_REPEAT_EPSILON``; another question (another query)
  is charged ε∞ again; a fresh long-term key (a new PRR) is charged ε∞ again; a user without
  ε∞ left is refused its first report; who paid is committed with the charge;
- **what ε∞ protects**: after T = 100 rounds of one unchanged value, the aggregator's best
  decoder is right about as often as one ε∞ report allows. Broken variant: the PRR keyed by the
  report's nonce (memoization off) is decoded nearly always.

Seeded and deterministic except the attack, whose false-alarm rate is stated there.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldp.core import longitudinal
from ldp.core.budget import charge_units
from ldp.core.longitudinal import MEMO_REPEAT_EPSILON, instantaneous_response, memo_key, permanent_response
from ldp.core.population import PopulationSpec
from ldp.core.queries import QuerySpec
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import UserRandomness, new_life_salt
from ldp.local.ledger_store import SqliteLedgerStore
from ldp.local.messages import SessionKind, Status
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session
from tests.wire.wire_helpers import population

# 13 categories: which of 12 candidate 4-bit prefixes of x a user holds, or none of them
PREFIX = QuerySpec("prefix_index", {"field": "x", "length": 4, "candidates": list(range(12))})
OTHER = QuerySpec("prefix_index", {"field": "x", "length": 3, "candidates": list(range(8))})
KINDS = ("l_grr", "l_oue", "l_osue", "l_sue")


def _spec(kind: str, eps_inf: float = 1.0, query: QuerySpec = PREFIX, eps_1: float = 0.5) -> RandomizerSpec:
    return RandomizerSpec(kind, query, eps_inf, {"epsilon_1": eps_1})


def _expected(spec: PopulationSpec, r: RandomizerSpec, users: np.ndarray, nonces: np.ndarray, key: bytes | None = None) -> np.ndarray:
    """What an honest shard must report: IRR(PRR(memo, user, value)) with the report key and nonces."""
    local = LocalRandomizer.build(r, spec.concept_class.schema)
    memoized = local.randomizer
    assert isinstance(memoized, longitudinal.MemoizedFrequencyOracle)
    values = local.inputs(spec.records(0, spec.size)[users], None)
    idx = np.searchsorted(np.asarray(memoized.categories), values)
    long_term = spec.report_key()
    prr = permanent_response(memo_key(long_term), users, idx, memoized.oracle, memoized.question)
    out = instantaneous_response(prr, UserRandomness(key or long_term, users, nonces), memoized.oracle)
    return out if memoized.oracle.unary else np.asarray(memoized.categories)[out]


async def _rounds(oracle: InProcessLROracle, specs: list[RandomizerSpec], users: np.ndarray) -> list[np.ndarray]:
    """One non-interactive session per spec, all users, in order; each session's reports."""
    out = []
    for r in specs:
        s = Session(oracle, SessionKind.NON_INTERACTIVE, name=r.kind)
        (rep,) = await s.round([Request.of(users, r)])
        out.append(rep)
    return out


@pytest.mark.parametrize("kind", KINDS)
async def test_every_report_is_the_irr_of_the_users_memoized_prr(kind: str) -> None:
    spec = population(n=400, budget=4.0)
    oracle = InProcessLROracle(spec)
    users = np.arange(spec.size)
    reps = await _rounds(oracle, [_spec(kind)] * 3, users)
    for t, rep in enumerate(reps):
        assert (rep.status == Status.ANSWERED).all()
        assert np.array_equal(rep.values, _expected(spec, _spec(kind), users, np.full(spec.size, t)))  # nonce t: round t's fresh IRR
    assert not np.array_equal(reps[0].values, reps[1].values)  # the IRR is fresh every round


async def test_the_first_report_of_a_question_costs_eps_inf_and_every_later_one_the_minimum() -> None:
    spec = population(n=200, budget=1.5)
    oracle = InProcessLROracle(spec)
    users = np.arange(spec.size)
    await _rounds(oracle, [_spec("l_grr")] * 5, users)
    spent = np.asarray(oracle.ledger_spent_units())
    assert (spent == charge_units(1.0) + 4 * charge_units(MEMO_REPEAT_EPSILON)).all()
    # 0.5 is left, less than ε∞: the paid question still answers, a new one (another query) is refused
    paid, other = await _rounds(oracle, [_spec("l_grr"), _spec("l_grr", query=OTHER)], users)
    assert (paid.status == Status.ANSWERED).all() and (other.status == Status.REFUSED).all()
    # another ε∞ is another question (its PRRs differ): charged again, and refused here too
    (again,) = await _rounds(oracle, [_spec("l_grr", eps_inf=1.25, eps_1=0.5)], users)
    assert (again.status == Status.REFUSED).all()


async def test_a_user_without_eps_inf_left_is_refused_the_first_report() -> None:
    spec = population(n=100, budget=0.75)
    (rep,) = await _rounds(InProcessLROracle(spec), [_spec("l_oue")], np.arange(100))
    assert (rep.status == Status.REFUSED).all()


async def test_a_restart_with_a_durable_ledger_keeps_the_prrs_and_what_was_paid(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Two process lives with fresh salts (as `ldp-sim clients` starts them) over one SQLite
    ledger: the second life's reports are IRRs of the same PRRs (the memo key comes from the
    long-term key, not the salted one), its nonces continue, and it pays only the minimum."""
    spec = population(n=300, budget=2.0)
    users = np.arange(spec.size)
    path = tmp_path / "ledger.sqlite"
    lives = []
    for _ in range(2):
        salt = new_life_salt()
        with SqliteLedgerStore(path) as store:
            oracle = InProcessLROracle(spec, store=store, key_salt=salt)
            lives.append((salt, (await _rounds(oracle, [_spec("l_osue")], users))[0], np.asarray(oracle.ledger_spent_units())))
    from ldp.core.rng import life_key

    for t, (salt, rep, _) in enumerate(lives):
        assert np.array_equal(rep.values, _expected(spec, _spec("l_osue"), users, np.full(spec.size, t), key=life_key(spec.report_key(), salt)))
    assert (lives[1][2] == charge_units(1.0) + charge_units(MEMO_REPEAT_EPSILON)).all()


async def test_a_fresh_long_term_key_is_a_fresh_prr_and_is_charged_again(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A `secure` spec takes its report key from the OS at every life: its PRRs are new, so the
    durable ledger charges ε∞ again (the charge follows the coin). Broken variant: who paid kept
    per question alone (without the memo key) would charge the minimum for a new PRR."""
    spec = PopulationSpec(population().concept_class, population().target, 150, budget=2.5, seed=3, secure=True)
    users = np.arange(spec.size)
    path = tmp_path / "ledger.sqlite"
    spent = []
    for _ in range(2):
        with SqliteLedgerStore(path) as store:
            oracle = InProcessLROracle(spec, store=store, key_salt=new_life_salt())
            (rep,) = await _rounds(oracle, [_spec("l_sue")], users)
            assert (rep.status == Status.ANSWERED).all()
            spent.append(np.asarray(oracle.ledger_spent_units()))
    assert (spent[1] == 2 * charge_units(1.0)).all()


async def test_what_eps_inf_protects_over_100_rounds_and_the_unmemoized_variant_is_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """k = 13 (PREFIX), ε∞ = 2, ε1 = 1 (calibration "tight": one report spends all of ε1), 3000
    users, T = 100 rounds of one unchanged value. The aggregator's best guess (the most reported
    value) cannot beat the PRR: Pr[PRR = value] = e²/(e² + 12) = 0.381; over 3000 users the
    accuracy is below 0.381 + 4.5 sd (sd ≤ 0.0089): false alarm < 10^-5. Broken variant: the PRR
    keyed by the report's nonce (a new PRR per round): the same decoder is right for more than
    0.9 of the users."""
    spec = population(n=3000, budget=3.0)
    users = np.arange(spec.size)
    asked = RandomizerSpec("l_grr", PREFIX, 2.0, {"epsilon_1": 1.0, "calibration": "tight"})
    local = LocalRandomizer.build(asked, spec.concept_class.schema)
    truth = local.inputs(spec.records(0, spec.size), None)
    bound = math.exp(2) / (math.exp(2) + 12)

    async def accuracy() -> float:
        reps = await _rounds(InProcessLROracle(spec), [asked] * 100, users)
        counts = np.zeros((spec.size, 13), dtype=np.int64)
        cats = np.asarray(local.randomizer.categories)  # type: ignore[attr-defined]
        for rep in reps:
            counts[users, np.searchsorted(cats, rep.values)] += 1
        return float((cats[counts.argmax(axis=1)] == truth).mean())

    memoized = await accuracy()
    print(f"T = 100: decoder accuracy {memoized:.4f} against the PRR bound {bound:.4f}")
    assert memoized < bound + 4.5 * math.sqrt(bound * (1 - bound) / spec.size)
    real = longitudinal.permanent_response
    report = iter(range(1 << 30))

    def per_report(memo, user_ids, values, oracle, question=""):  # type: ignore[no-untyped-def]
        return real(memo, user_ids, values, oracle, f"{question}|report {next(report)}")  # a new PRR every call

    monkeypatch.setattr(longitudinal, "permanent_response", per_report)
    broken = await accuracy()
    print(f"without memoization: {broken:.4f}")
    assert broken > 0.9
