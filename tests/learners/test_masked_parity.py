"""MASKED-PARITY (KLNRS §5): the adaptive learner (exact SQ, Lemma 4.3 local SQ, direct LI
protocol), the two non-interactive learners and the Theorem 5.1 demonstration, with exact errors
from the Referee. Seeded; statistical thresholds are stated where used."""

from __future__ import annotations

import numpy as np
import pytest

from ldp.core.concepts import MaskedParityConcept, concept_class
from ldp.core.errors import SessionError
from ldp.core.learner_result import true_error
from ldp.core.population import PopulationSpec
from ldp.core.rng import generator
from ldp.learners.masked_parity import (
    a_query,
    bit_query,
    learn_masked_parity_interactive,
    learn_masked_parity_lni,
    learn_masked_parity_lni_record,
    learn_masked_parity_sq,
    li_allocation,
    li_lemma43_users,
    lni_plan,
    lni_success,
)
from ldp.learners.theorem51 import all_masked_parities, lni_query_set, theorem51_census
from ldp.local.oracle import InProcessLROracle
from ldp.sq.exact import ExactSQOracle
from ldp.sq.local_sq_oracle import LocalSQOracle


def _spec(d: int, target: MaskedParityConcept, n: int, seed: int = 1, budget: float = 1.0) -> PopulationSpec:
    return PopulationSpec(concept_class("masked_parity", d), target, size=n, budget=budget, seed=seed)


def test_query_expectations_match_section_5_1() -> None:
    """E[g_j] = r_j/(2d) (not 1/2^d: the paper's typo) and E[g_d] = a/2; wrong r gives 1/4."""
    d = 4
    target = MaskedParityConcept((1, 0, 1, 1), 1)
    oracle = ExactSQOracle(_spec(d, target, 1))
    for j in range(d):
        assert oracle.expectation(bit_query(j)) == pytest.approx(target.r[j] / (2 * d))
    assert oracle.expectation(a_query(target.r)) == pytest.approx(0.5)
    assert oracle.expectation(a_query((1, 1, 0, 0))) == pytest.approx(0.25)


@pytest.mark.parametrize("d", [2, 4])
async def test_sq_learner_is_exact_on_every_target(d: int) -> None:
    for target in all_masked_parities(d):
        spec = _spec(d, target, 1)
        oracle = ExactSQOracle(spec, shift=1.0, seed=d)  # answers off by exactly ±τ: still valid
        res = await learn_masked_parity_sq(oracle, d)
        assert res.hypothesis == target and spec.referee().error(res.hypothesis) == 0.0
        assert (res.rounds, res.queries) == (2, d + 1)


async def test_sq_learner_through_lemma_4_3_is_an_interactive_local_protocol() -> None:
    d = 4
    target = MaskedParityConcept((0, 1, 1, 0), 1)
    n = li_lemma43_users(d, 1.0, 0.1)
    lr = InProcessLROracle(_spec(d, target, n))
    oracle = LocalSQOracle(lr, 1.0, adaptive=True)
    res = await learn_masked_parity_sq(oracle, d, confidence=0.9)
    assert res.hypothesis == target  # fails w.p. ≤ 0.1 by Lemma 4.3; this seed is fixed
    assert res.users <= n and res.rounds == 2
    assert [r["kind"] for r in lr.transcript.rounds] == ["INTERACTIVE", "INTERACTIVE"]
    assert np.count_nonzero(lr.ledger_spent_units()) == res.users  # fresh users: one answer each


async def test_interactive_learner_learns_and_each_user_answers_once() -> None:
    d, n = 8, 120_000  # ≈ 3.3× the 36,864 users the separation search needs at d = 8
    rng = generator(2, "li-test")
    errors = []
    for trial in range(4):
        target = concept_class("masked_parity", d).random_target(rng)
        spec = _spec(d, target, n, seed=trial)
        lr = InProcessLROracle(spec, shards=2)
        res = await learn_masked_parity_interactive(lr, d, 1.0)
        errors.append(true_error(spec.referee(), res.hypothesis))
        assert res.rounds == 2 and res.queries == d + 1 and res.users == n
        spent = lr.ledger_spent_units()
        assert np.count_nonzero(spent) == sum(li_allocation(n, d)[0] for _ in range(d)) + li_allocation(n, d)[1]
    assert errors == [0.0] * 4


async def test_lni_learns_in_one_round_with_enough_users() -> None:
    d = 4
    rng = generator(3, "lni")
    for trial in range(4):
        target = concept_class("masked_parity", d).random_target(rng)
        spec = _spec(d, target, 40_000, seed=trial)
        assert lni_plan(spec.size, d, 1.0).predicted_success > 0.999
        lr = InProcessLROracle(spec)
        res = await learn_masked_parity_lni(lr, d, 1.0, rng)
        assert res.rounds == 1 and res.queries == d + 2**d and res.users == spec.size
        (round_,) = lr.transcript.rounds
        assert round_["kind"] == "NON_INTERACTIVE" and len(round_["requests"]) == d + 1  # d bit groups + one family
        assert true_error(spec.referee(), res.hypothesis) == 0.0


async def test_lni_reads_a_from_the_estimated_rs_own_group() -> None:
    """At ε = 20 randomized response is the identity but for ~10^-9 of the reports, so the group
    of the target's r reports E[g_d] = a/2 exactly: 0 when a = 0. A lookup of the wrong group (a
    deliberately broken variant: the candidate index with its bits reversed) reads ≈ 1/4 there,
    and all 40 of its users report 0 only w.p. (3/4)^40 ≈ 10^-5."""
    d, eps = 6, 20.0
    rng = generator(5, "lni-group")
    checked = 0
    for trial in range(6):
        target = MaskedParityConcept(tuple(int(v) for v in rng.integers(0, 2, d)), 0)
        spec = _spec(d, target, 2**d * 60 + d * 400, seed=200 + trial, budget=eps)
        lr = InProcessLROracle(spec)
        res = await learn_masked_parity_lni(lr, d, eps, rng)
        assert res.hypothesis == target and abs(res.details["a_estimate"]) < 1e-6 and res.details["group_size"] >= 40
        # the broken variant: read the group of r with its bit order reversed
        r = np.array(target.r)
        if np.array_equal(r, r[::-1]):
            continue
        plan = lni_plan(spec.size, d, eps)
        start = d * plan.m_bit
        from ldp.core.queries import user_parity_groups

        wrong = int(np.dot(r[::-1], 1 << np.arange(d - 1, -1, -1)))
        bounds = user_parity_groups(plan.a_users, 2**d)
        oracle = InProcessLROracle(_spec(d, target, spec.size, seed=200 + trial, budget=eps))
        from ldp.core.randomizers import RandomizerSpec
        from ldp.learners.masked_parity import a_query_family
        from ldp.local.messages import SessionKind
        from ldp.local.session import Request, Session

        (rep,) = await Session(oracle, SessionKind.NON_INTERACTIVE).round(
            [Request.of(range(start + int(bounds[wrong]), start + int(bounds[wrong + 1])), RandomizerSpec("binary_rr", a_query_family(start, plan.a_users), eps))]
        )
        assert np.mean(rep.values) > 0.05  # the wrong group does not look like a = 0
        checked += 1
    assert checked >= 3


async def test_lni_success_matches_its_prediction() -> None:
    """d = 6, n = 12,000 (≈ 34 users per candidate): ``lni_success`` predicts p ≈ 0.71; over 40
    seeded trials the number of exact targets must lie in the two-sided 99.9 % binomial interval
    of that prediction (a false alarm w.p. ≤ 10^-3 if the prediction is right). A learner that
    guesses a (a broken variant, p ≈ 0.38) would be outside that interval."""
    from scipy.stats import binom

    d, n, trials = 6, 12_000, 40
    plan = lni_plan(n, d, 1.0)
    p = float(lni_success(d, 1.0, plan.m_bit, plan.a_users))
    lo, hi = binom.ppf(0.0005, trials, p), binom.isf(0.0005, trials, p)
    rng = generator(6, "lni-prediction")
    exact = 0
    for trial in range(trials):
        target = concept_class("masked_parity", d).random_target(rng)
        spec = _spec(d, target, n, seed=300 + trial)
        res = await learn_masked_parity_lni(InProcessLROracle(spec), d, 1.0, rng)
        exact += res.hypothesis == target
    assert lo <= exact <= hi, (exact, lo, hi, p)
    coin = float(lni_success(d, 1.0, plan.m_bit, 0))  # no a-users: a is a coin
    assert not lo <= binom.median(trials, coin) <= hi


async def test_lni_sessions_refuse_a_second_round() -> None:
    d = 2
    spec = _spec(d, MaskedParityConcept((1, 0), 0), 5_000)
    lr = InProcessLROracle(spec)
    oracle = LocalSQOracle(lr, 1.0, adaptive=False, n0_scale=0.05)
    with pytest.raises(SessionError):
        await learn_masked_parity_sq(oracle, d)  # a non-adaptive oracle cannot run the 2-step learner


async def test_lni_b_estimators_are_correct_without_noise_and_fail_with_it() -> None:
    """With ε = 512 per user (ε/(d+3) ≈ 100 per column, essentially no noise) LNI (b) recovers the
    target exactly; at ε = 1 with 200 000 users it is no better than guessing a."""
    d = 2
    rng = generator(5, "lni-b")
    for target in all_masked_parities(d):
        spec = _spec(d, target, 4_000, budget=512.0)
        res = await learn_masked_parity_lni_record(InProcessLROracle(spec), d, 512.0, rng)
        assert res.hypothesis == target, (target, res.details)
    errors = []
    for trial in range(6):
        target = concept_class("masked_parity", 4).random_target(rng)
        spec = _spec(4, target, 200_000, seed=trial)
        res = await learn_masked_parity_lni_record(InProcessLROracle(spec), 4, 1.0, rng)
        errors.append(true_error(spec.referee(), res.hypothesis))
    assert np.mean(errors) > 0.2


@pytest.mark.parametrize("d", [2, 4])
async def test_theorem_5_1_non_adaptive_queries_leave_a_undetermined(d: int) -> None:
    tau = 0.9 / (4 * d)  # fine enough to learn r from the bit queries
    k = 2**d - 2 - d if 2**d - 2 - d > 0 else 1  # d + K < 2^d − 1 queries in all
    rng = np.random.default_rng(d)
    candidates = [tuple(int(v) for v in rng.integers(0, 2, d)) for _ in range(k)]
    queries = lni_query_set(d, candidates)
    assert len(queries) < 2**d - 1 or d == 2
    outcomes = await theorem51_census(d, queries, tau)
    undetermined = [o for o in outcomes if o.a_undetermined]
    covered = {tuple(c) for c in candidates}
    # Exactly the targets whose r is not a candidate keep a open — both a's of each such r.
    assert {o.target for o in undetermined} == {t for t in all_masked_parities(d) if t.r not in covered}
    assert len(undetermined) >= 2 * (2**d - k)
    for o in outcomes:
        assert all(c.r == o.target.r for c in o.version_space)  # r itself is always learned
    # With every candidate the version space is the target alone.
    full = await theorem51_census(d, lni_query_set(d, [tuple(r) for r in np.ndindex(*(2,) * d)]), tau)
    assert all(o.version_space == (o.target,) for o in full)
