"""Exact, empirical, local and central SQ oracles: formulas, guarantees, sessions, refusals.

Statistical tests are seeded (deterministic); their stated false-alarm rate is what a fresh seed
would give. Each guarantee test also runs a deliberately broken variant that it must catch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ldp.core.errors import BudgetError, SessionError
from ldp.core.query_specs import affine, conjunction, field_query, label_query, parity
from ldp.local.messages import SessionKind
from ldp.local.oracle import InProcessLROracle
from ldp.sq.bounds import (
    central_users_needed,
    discrete_laplace_users,
    hoeffding_users,
    laplace_users,
    pm_magnitude,
    users_per_query,
)
from ldp.sq.central_sq_oracle import CentralSQOracle
from ldp.sq.empirical import EmpiricalSQOracle
from ldp.sq.exact import ExactSQOracle
from ldp.sq.local_sq_oracle import LocalSQOracle, split_epsilon
from ldp.sq.sq_oracle import InsufficientUsersError, RefusedUsersError
from tests.sq.sq_helpers import conjunction_population

# Means under Uniform on {0,1}^3 with y = x0 ∧ ¬x2: 1/4, 1/2, 1/4, 0, 0; every bound b = 1.
QUERIES = [
    label_query(),
    field_query("x", 1),
    conjunction(("x", 0, 1), ("y", 0, 1)),
    parity(np.array([True, True, False])),
    affine(field_query("x", 2), scale=2.0, offset=-1.0),
]
MEANS = np.array([0.25, 0.5, 0.25, 0.0, 0.0])


def test_bounds_closed_forms() -> None:
    big_b = pm_magnitude(1.0, 1.0)
    assert big_b == pytest.approx((math.e + 1) / (math.e - 1))
    assert users_per_query(1.0, 1.0, 0.1, 0.05, "pm_rr", 4) == math.ceil(2 * big_b**2 * math.log(2 * 4 / 0.05) / 0.01)
    # Laplace: 2 ln(2t/β)·(b² + (32/15)(2b/ε)²)/τ² in the τ² regime; heavier than ±b RR.
    n_lap = laplace_users(1.0, 1.0, 0.1, 0.05, 4)
    assert n_lap == math.ceil(2 * math.log(160) * (1 + 32 / 15 * 4) / 0.01)
    assert n_lap > users_per_query(1.0, 1.0, 0.1, 0.05, "pm_rr", 4)
    # Discrete Laplace (what users run): the same Chernoff count with ν² enlarged by r²/4 and the
    # scale 2b/(ε(1−η)), τ reduced by the clamp's tiny shift: within 0.1 % of the Laplace count.
    n_dlap = users_per_query(1.0, 1.0, 0.1, 0.05, "discrete_laplace", 4)
    assert n_lap <= n_dlap <= n_lap * 1.001
    assert discrete_laplace_users(1.0, 1.0, 0.1, 0.05, 4) == n_dlap
    assert hoeffding_users(2.0, 0.1, 0.05, 3) == math.ceil(2 * 4.0 * math.log(2 * 3 / 0.05) / 0.01)
    # Central: n is the smallest with sampling + noise ≤ τ.
    n = central_users_needed(1.0, 1.0, 0.1, 0.05, 8, 8)
    f = lambda m: math.sqrt(2 * math.log(4 * 8 / 0.05) / m) + 2 * 8 * math.log(2 * 8 / 0.05) / (m * 1.0)  # noqa: E731
    assert f(n) <= 0.1 < f(n - 1)


async def test_exact_oracle_enumerates() -> None:
    oracle = ExactSQOracle(conjunction_population(10))
    np.testing.assert_allclose(await oracle.ask(QUERIES, 0.01), MEANS, atol=1e-12)
    noisy = ExactSQOracle(conjunction_population(10).__class__(**{**conjunction_population(10).__dict__, "label_noise": 0.1}))
    assert (await noisy.ask([label_query()], 0.01))[0] == pytest.approx(0.25 * 0.9 + 0.75 * 0.1)
    shifted = ExactSQOracle(conjunction_population(10), shift=1.0, seed=3)
    answers = await shifted.ask(QUERIES, 0.05)
    np.testing.assert_allclose(np.abs(answers - MEANS), 0.05, atol=1e-12)  # valid, and as wrong as allowed


def _coverage_threshold(reps: int, beta: float, false_alarm: float = 1e-3) -> int:
    """Smallest coverage count a (1−β)-covering oracle reaches except with probability ≤ false_alarm."""
    return int(stats.binom.ppf(false_alarm, reps, 1.0 - beta))


async def _local_coverage(randomizer: str, n0_scale: float, reps: int, tau: float, beta: float) -> int:
    oracle_size = LocalSQOracle(InProcessLROracle(conjunction_population(10)), 1.0, randomizer=randomizer, n0_scale=n0_scale)
    per_step = int(oracle_size.required_users(QUERIES, tau, 1 - beta).sum())
    lr = InProcessLROracle(conjunction_population(reps * per_step, seed=7), shards=2)
    oracle = LocalSQOracle(lr, 1.0, randomizer=randomizer, n0_scale=n0_scale)
    covered = 0
    for _ in range(reps):  # every step uses fresh users: independent repetitions
        answers = await oracle.ask(QUERIES, tau, 1 - beta)
        covered += bool(np.all(np.abs(answers - MEANS) <= tau))
    assert oracle.users_used == reps * per_step
    return covered


@pytest.mark.parametrize("randomizer", ["pm_rr", "discrete_laplace"])
async def test_local_oracle_tolerance_guarantee(randomizer: str) -> None:
    """All t answers of a step within τ in ≥ 1 − β of the steps.

    Slack: we assert the coverage count is ≥ the 0.1% quantile of Binomial(R, 1 − β), so an oracle
    that meets its guarantee fails this test with probability ≤ 10^-3. Broken variant: n_0 ÷ 10
    (its coverage is ≈ 0.5–0.7 here) must fall below the same threshold.
    """
    reps, tau, beta = 500, 0.2, 0.1
    threshold = _coverage_threshold(reps, beta)
    covered = await _local_coverage(randomizer, 1.0, reps, tau, beta)
    assert covered >= threshold, f"coverage {covered}/{reps} below {threshold}"
    broken = await _local_coverage(randomizer, 0.1, reps, tau, beta)
    assert broken < threshold, f"n_0/10 was not caught: coverage {broken}/{reps}"


async def test_non_adaptive_is_one_non_interactive_round() -> None:
    lr = InProcessLROracle(conjunction_population(200_000))
    oracle = LocalSQOracle(lr, 1.0, adaptive=False)
    await oracle.ask(QUERIES[:3], 0.2, 0.9)
    rounds = lr.transcript.rounds
    assert len(rounds) == 1 and rounds[0]["kind"] == SessionKind.NON_INTERACTIVE.name
    assert [q["users"] for q in rounds[0]["requests"]] == list(oracle.log[0].users_per_query)
    with pytest.raises(SessionError):
        await oracle.ask(QUERIES[:1], 0.2, 0.9)
    assert len(lr.transcript.rounds) == 1
    # Adaptive: one INTERACTIVE session, one round per step, disjoint users.
    lr2 = InProcessLROracle(conjunction_population(200_000))
    adaptive = LocalSQOracle(lr2, 1.0)
    for _ in range(3):
        await adaptive.ask(QUERIES[:2], 0.3, 0.9)
    assert [r["round"] for r in lr2.transcript.rounds] == [0, 1, 2]
    assert {r["session"] for r in lr2.transcript.rounds} == {adaptive.session.session_id}
    assert int(lr2.ledger_spent_units().astype(bool).sum()) == adaptive.users_used  # each user asked once


async def test_insufficient_users_says_how_many() -> None:
    lr = InProcessLROracle(conjunction_population(5000))
    oracle = LocalSQOracle(lr, 1.0)
    need = int(oracle.required_users(QUERIES, 0.05, 0.95).sum())
    with pytest.raises(InsufficientUsersError, match=f"needs {need} fresh users") as info:
        await oracle.ask(QUERIES, 0.05, 0.95)
    assert info.value.needed == need and info.value.available == 5000
    assert not lr.ledger_spent_units().any()  # nothing was sent
    assert not hasattr(lr, "transcript") or not lr.transcript.rounds


async def test_budget_split_then_ledgers_refuse() -> None:
    n = 120_000
    lr = InProcessLROracle(conjunction_population(n, budget=1.0))
    oracle = LocalSQOracle(lr, 1.0, mode="budget_split")
    answers = await oracle.ask(QUERIES[:3], 0.2, 0.9)
    assert np.all(np.abs(answers - MEANS[:3]) <= 0.2)
    assert list(oracle.log[0].users_per_query) == [n] * 3
    share = split_epsilon(1.0, 3)
    assert 3 * share <= 1.0
    with pytest.raises(RefusedUsersError, match=f"{n} user\\(s\\) refused") as info:
        await oracle.ask(QUERIES[:1], 0.2, 0.9)  # every user's budget is spent
    assert info.value.refused == n
    small = LocalSQOracle(InProcessLROracle(conjunction_population(1000)), 1.0, mode="budget_split")
    with pytest.raises(InsufficientUsersError, match="needs"):
        await small.ask(QUERIES[:3], 0.2, 0.9)


async def _central_coverage(scale_users: float, reps: int, tau: float, beta: float) -> int:
    t = len(QUERIES)
    n = central_users_needed(1.0, 1.0, tau, beta, t, t)
    covered = 0
    for rep in range(reps):
        pop = conjunction_population(max(1, int(n * scale_users)), seed=1000 + rep)
        oracle = CentralSQOracle(pop, 1.0, max_queries=t, seed=rep, check=scale_users >= 1)
        covered += bool(np.all(np.abs(await oracle.ask(QUERIES, tau, 1 - beta) - MEANS) <= tau))
    return covered


async def test_central_oracle_tolerance_and_budget() -> None:
    """Same statistics as the local test (false alarm ≤ 10^-3); broken variant: n/10 users."""
    reps, tau, beta = 500, 0.2, 0.1
    threshold = _coverage_threshold(reps, beta)
    assert await _central_coverage(1.0, reps, tau, beta) >= threshold
    assert await _central_coverage(0.1, reps, tau, beta) < threshold
    oracle = CentralSQOracle(conjunction_population(100_000), 1.0, max_queries=5)
    await oracle.ask(QUERIES, 0.2, 0.9)
    with pytest.raises(BudgetError, match="T=5"):
        await oracle.ask(QUERIES[:1], 0.2, 0.9)
    with pytest.raises(InsufficientUsersError) as info:
        await CentralSQOracle(conjunction_population(100), 1.0, max_queries=5).ask(QUERIES, 0.2, 0.9)
    assert info.value.needed == central_users_needed(1.0, 1.0, 0.2, 0.1, 5, 5)


async def test_empirical_oracle_is_the_sample_mean() -> None:
    pop = conjunction_population(50_000, seed=5)
    oracle = EmpiricalSQOracle(pop)
    answers = await oracle.ask(QUERIES, 0.05, 0.95)
    from ldp.core.population import generate_records
    from ldp.core.queries import make_query

    records = generate_records(pop, 0, pop.size)
    np.testing.assert_allclose(answers, [make_query(q, pop.schema).evaluate(records).mean() for q in QUERIES])
    assert np.all(np.abs(answers - MEANS) <= 0.05)
    with pytest.raises(InsufficientUsersError, match="needs"):
        await EmpiricalSQOracle(conjunction_population(100)).ask(QUERIES, 0.05, 0.95)
