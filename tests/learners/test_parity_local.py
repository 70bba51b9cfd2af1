"""The local attempt at PARITY: it learns only when it can afford all 2^d candidates."""

from __future__ import annotations

import numpy as np

from ldp.core.concepts import ParityConcept, concept_class
from ldp.core.learner_result import true_error
from ldp.core.population import PopulationSpec
from ldp.core.rng import generator
from ldp.learners.parity_local import correlation_family, correlation_query, learn_parity_local
from ldp.local.oracle import InProcessLROracle
from ldp.sq.exact import ExactSQOracle


def test_correlation_query_is_one_for_the_target_and_half_otherwise() -> None:
    d = 4
    target = ParityConcept((1, 0, 1, 1))
    oracle = ExactSQOracle(PopulationSpec(concept_class("parity", d), target, size=1))
    assert oracle.expectation(correlation_query(np.array(target.r))) == 1.0
    assert oracle.expectation(correlation_query(np.array([1, 1, 0, 0]))) == 0.5


async def test_learns_small_d_and_fails_when_candidates_do_not_fit() -> None:
    rng = generator(1, "parity-local")
    d = 4
    n = 2**d * 200  # 200 users per candidate: the right one wins by a gap of 1/2 (σ ≈ 0.08 per group)
    for trial in range(3):
        target = concept_class("parity", d).random_target(rng)
        spec = PopulationSpec(concept_class("parity", d), target, size=n, seed=trial)
        lr = InProcessLROracle(spec)
        res = await learn_parity_local(lr, d, 1.0, rng)
        assert res.details["covers_all"] and true_error(spec.referee(), res.hypothesis) == 0.0
        assert lr.transcript.rounds[0]["kind"] == "NON_INTERACTIVE"
    # d = 16 with 200 000 users: ≈ 3 users per candidate, so the target's group estimate is lost
    # among 2^16 noisy ones (each ±1.1 per report): wrong unless lucky (p < 1 % per trial).
    d = 16
    errors = []
    for trial in range(4):
        target = concept_class("parity", d).random_target(rng)
        spec = PopulationSpec(concept_class("parity", d), target, size=200_000, seed=trial)
        res = await learn_parity_local(InProcessLROracle(spec), d, 1.0, rng)
        assert res.details["group"] < 4
        errors.append(true_error(spec.referee(), res.hypothesis))
    assert np.mean(errors) == 0.5


def test_the_family_asks_each_group_its_own_candidate() -> None:
    """correlation_family gives group c exactly correlation_query(r_c) (r_c = c in binary, x's bit 0 first)."""
    from ldp.core.queries import make_query, user_parity_groups

    d, start, count = 3, 5, 21
    schema = concept_class("parity", d).schema
    records = generator(2, "family-records").integers(0, 2, (count, schema.width)).astype(np.int16)
    users = np.arange(start, start + count)
    family = make_query(correlation_family(start, count), schema).evaluate(records, users)
    bounds = user_parity_groups(count, 2**d)
    for c in range(2**d):
        r = (c >> np.arange(d - 1, -1, -1)) & 1
        rows = slice(int(bounds[c]), int(bounds[c + 1]))
        assert family[rows].tolist() == make_query(correlation_query(r), schema).evaluate(records[rows]).tolist()
