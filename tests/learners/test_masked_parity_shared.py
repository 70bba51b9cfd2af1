"""The shared one-round learner for MASKED-PARITY (``ldp.learners.masked_parity_shared``, issue 28):
one query per user serving both the r part and the a part. Its query's values, exactness at
ε = 2^10, one NON_INTERACTIVE round with each user charged once, measured against predicted
success (with a broken variant: a coin for a), its plan against the fair one-round learner's,
and the same run over gRPC and in process. Seeded; every statistical threshold states its
false-alarm rate."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from ldp.core.concepts import Concept, MaskedParityConcept, concept_class
from ldp.core.errors import ParameterError
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.queries import make_query, user_parity_groups
from ldp.core.rng import generator
from ldp.learners.masked_parity import lni_users_for
from ldp.learners.masked_parity_correlation import correlation_design
from ldp.learners.masked_parity_shared import (
    learn_masked_parity_lni_shared,
    shared_plan,
    shared_query,
    shared_success,
    shared_users_for,
)
from ldp.learners.theorem51 import all_masked_parities, index_bits
from ldp.local.oracle import InProcessLROracle


def _spec(d: int, target: Concept, n: int, seed: int = 1, budget: float = 1.0) -> PopulationSpec:
    return PopulationSpec(concept_class("masked_parity", d), target, size=n, budget=budget, seed=seed)


def test_the_query_is_the_correlation_on_b1_and_the_candidates_a_query_on_b0() -> None:
    """On 4,000 records of d = 4, for every user u of a 64-user family: g = 1[b = 1 ∧ y = v_i] +
    1[b = 0 ∧ y ≠ (−1)^{⟨r(u), x⟩}] value by value (the product form of the disjoint sum), r(u)
    the candidate of u's block."""
    d, count = 4, 64
    target = MaskedParityConcept((1, 0, 1, 1), 1)
    spec = _spec(d, target, 4_000)
    records = generate_records(spec, 0, 4_000)
    schema = concept_class("masked_parity", d).schema
    x, i, b, y = records[:, :d].astype(np.int64), records[:, d].astype(np.int64), records[:, d + 1], records[:, d + 2]
    bounds = user_parity_groups(count, 2**d)
    for v in correlation_design(d):
        query = make_query(shared_query(v, 100, count), schema)
        users = 100 + np.arange(len(records)) % count
        got = query.evaluate(records, users=users)
        candidate = np.searchsorted(bounds, users - 100, side="right") - 1
        r_u = index_bits(d, candidate)
        parity = 1 - 2 * ((x * r_u).sum(axis=1) % 2)
        want = np.where(b == 1, y == v[i], y != parity).astype(float)
        assert np.array_equal(got, want)


@pytest.mark.parametrize("d", [2, 4])
async def test_exact_on_every_target_at_large_epsilon(d: int) -> None:
    """ε = 2^10 (RR is the identity but for 2^-64 of the reports) with the users the plan needs
    for 0.99999: every one of the 2^{d+1} targets is learned in one round."""
    eps = 2.0**10
    n = shared_users_for(d, eps, 0.99999)
    for t, target in enumerate(all_masked_parities(d)):
        lr = InProcessLROracle(_spec(d, target, n, seed=60 + t, budget=eps))
        res = await learn_masked_parity_lni_shared(lr, d, eps, generator(1, "coin", t))
        assert res.hypothesis == target, (target, res.details)
        assert res.rounds == 1 and res.details["a_from"] == "block"


async def test_is_one_non_interactive_round_and_charges_each_user_once() -> None:
    d, n = 6, 6_003
    target = MaskedParityConcept((1, 0, 1, 1, 0, 1), 1)
    lr = InProcessLROracle(_spec(d, target, n, seed=3))
    res = await learn_masked_parity_lni_shared(lr, d, 1.0, generator(3, "coin"))
    assert [r["kind"] for r in lr.transcript.rounds] == ["NON_INTERACTIVE"]
    k = correlation_design(d).shape[0]
    assert res.users == k * (n // k) == np.count_nonzero(lr.ledger_spent_units()) and res.queries == k
    with pytest.raises(ParameterError, match="needs ≥ K"):
        shared_plan(k - 1, d, 1.0)


async def test_measured_success_matches_the_prediction_and_a_coin_for_a_does_not() -> None:
    """d = 6, ε = 1, n sized for predicted success ≈ 0.7; 200 seeded trials. The exact count must
    lie in the two-sided 99.9 % binomial interval of the prediction (false alarm ≤ 10^-3 if the
    prediction is right). The broken variant — the same runs with a replaced by a fair coin, true
    success ≈ half the prediction — must fall outside it."""
    d, eps, trials = 6, 1.0, 200
    n = shared_users_for(d, eps, 0.7)
    p = shared_plan(n, d, eps).predicted_success
    assert shared_success(d, eps, shared_plan(n, d, eps).users) == pytest.approx(p)
    lo, hi = binom.ppf(0.0005, trials, p), binom.isf(0.0005, trials, p)
    rng = generator(28, "shared-prediction")
    exact = coin = 0
    for trial in range(trials):
        target = concept_class("masked_parity", d).random_target(rng)
        res = await learn_masked_parity_lni_shared(InProcessLROracle(_spec(d, target, n, seed=700 + trial)), d, eps, rng)
        exact += res.hypothesis == target
        coin += MaskedParityConcept(res.hypothesis.r, int(rng.integers(0, 2))) == target
    assert lo <= exact <= hi, (exact, lo, hi, p)
    assert not lo <= coin <= hi, (coin, lo, hi)


def test_fewer_users_than_candidates_leave_a_to_a_coin_in_the_prediction() -> None:
    """With N < 2^d most blocks are empty: the a decision is a coin there (success ≤ ½ + N/2^{d+1})."""
    assert shared_success(12, 1.0, 2_048) <= 0.5 + 2_048 / 2**13


def test_planned_users_beat_the_fair_one_round_learner_where_the_bits_dominate() -> None:
    """The numbers in docs/learners.md (95 % predicted success, ε = 1): 2–6× fewer than the fair
    learner at d ≤ 12, about the same from d = 16 on, where the a part (≈ 50·2^d) dominates."""
    ours = [shared_users_for(d, 1.0) for d in (8, 12, 16)]
    fair = [lni_users_for(d, 1.0) for d in (8, 12, 16)]
    assert ours == [13056, 200704, 3211264]
    assert fair == [73728, 462592, 3864576]
    assert fair[0] / ours[0] > 5 and fair[1] / ours[1] > 2 and 0.8 < ours[2] / fair[2] < 1.0


async def test_over_grpc_it_gives_the_in_process_result_bit_for_bit() -> None:
    """Strided user ids (design group k: users k, k + K, …) travel as explicit ids over gRPC."""
    from ldp.wire.launcher import grpc_oracle_factory

    d, n = 4, 1_200
    target = MaskedParityConcept((0, 1, 1, 0), 1)
    spec = _spec(d, target, n, seed=11)
    in_process = await learn_masked_parity_lni_shared(InProcessLROracle(spec), d, 1.0, generator(5, "coin"))
    async with grpc_oracle_factory(1) as factory, factory(spec) as oracle:
        over_grpc = await learn_masked_parity_lni_shared(oracle, d, 1.0, generator(5, "coin"))
    assert over_grpc.hypothesis == in_process.hypothesis
    assert over_grpc.details == in_process.details
