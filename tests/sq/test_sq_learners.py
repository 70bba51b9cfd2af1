"""The generic SQ conjunction learner, written once, learns to error ≤ α with every oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldp.core.population import PopulationSpec
from ldp.local.oracle import InProcessLROracle
from ldp.sq.adversarial import AdversarialSQOracle
from ldp.sq.bounds import central_users_needed, hoeffding_users, users_per_query
from ldp.sq.central_sq_oracle import CentralSQOracle
from ldp.sq.conjunction_learner import conjunction_tolerance, learn_conjunction
from ldp.sq.empirical import EmpiricalSQOracle
from ldp.sq.exact import ExactSQOracle
from ldp.sq.local_sq_oracle import LocalSQOracle
from ldp.sq.sq_oracle import SQOracle
from tests.sq.sq_helpers import conjunction_population

D, ALPHA, BETA, EPS = 3, 0.3, 0.1, 1.0
TARGETS = [((0, 1), (2, 0)), ((1, 1),), ()]


def _oracles(pop: PopulationSpec, seed: int) -> dict[str, SQOracle]:
    tau, t = conjunction_tolerance(D, ALPHA), 2 * D
    n_local = t * users_per_query(1.0, EPS, tau, BETA, "pm_rr", t)
    n_central = central_users_needed(1.0, EPS, tau, BETA, t, t)
    n_emp = hoeffding_users(1.0, tau, BETA, t)
    size = lambda n: PopulationSpec(**{**pop.__dict__, "size": n, "seed": seed})  # noqa: E731
    return {
        "exact": ExactSQOracle(pop),
        "exact-shifted": ExactSQOracle(pop, shift=1.0, seed=seed),  # every answer off by exactly τ
        "adversarial": AdversarialSQOracle(pop),
        "empirical": EmpiricalSQOracle(size(n_emp)),
        "central": CentralSQOracle(size(n_central), EPS, max_queries=t, seed=seed),
        "local": LocalSQOracle(InProcessLROracle(size(n_local), shards=2), EPS, adaptive=False),
    }


@pytest.mark.parametrize("literals", TARGETS)
async def test_conjunction_learner_with_every_oracle(literals: tuple[tuple[int, int], ...]) -> None:
    pop = conjunction_population(10, d=D, literals=literals)
    referee = pop.referee()
    for name, oracle in _oracles(pop, seed=len(literals)).items():
        result = await learn_conjunction(oracle, D, ALPHA, BETA)
        error = referee.error(result.hypothesis)
        assert error <= ALPHA, f"{name}: error {error} > α with {result.hypothesis}"
        assert set(literals) <= set(result.hypothesis.literals), name  # h ⊆ c on positives
        assert result.steps == 1 and result.queries == 2 * D and oracle.steps == 1


async def test_learner_reports_cost() -> None:
    pop = conjunction_population(10, d=D)
    tau, t = conjunction_tolerance(D, ALPHA), 2 * D
    n = t * users_per_query(1.0, EPS, tau, BETA, "pm_rr", t)
    lr = InProcessLROracle(PopulationSpec(**{**pop.__dict__, "size": n}))
    result = await learn_conjunction(LocalSQOracle(lr, EPS, adaptive=False), D, ALPHA, BETA)
    assert result.users == n and math.isclose(result.tolerance, ALPHA / (4 * D))
    assert len(lr.transcript.rounds) == 1  # non-adaptive → one non-interactive round
    assert np.all(result.estimates >= -1.0)
