"""HRS PrivLearn through the local model: one non-interactive SQ step answered by LocalSQOracle."""

from __future__ import annotations

import numpy as np
import pytest

from ldp.central.hrs import central_answer, priv_learn
from ldp.core.concepts import ConjunctionConcept, ProductBernoulli, concept_class
from ldp.core.errors import SessionError
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.rng import generator
from ldp.learners.hrs_local import PrefetchedAnswers, ask_conjunctions, conjunction_spec, priv_learn_local
from ldp.local.messages import SessionKind
from ldp.local.oracle import InProcessLROracle
from ldp.sq.local_sq_oracle import LocalSQOracle
from ldp.sq.sq_oracle import InsufficientUsersError

P = 0.8  # ProductBernoulli(p): E_u[∧_{i∈q} u_i] = p^|q|


def _population(d: int, size: int, seed: int) -> PopulationSpec:
    return PopulationSpec(
        concept_class("conjunction", d), ConjunctionConcept(((0, 1),)), size, 1.0, seed, distribution=ProductBernoulli(P)
    )


def _sampler(d: int, rate: float = 0.25):
    def sample(b: int, r: np.random.Generator) -> np.ndarray:
        return (r.random((b, d)) < rate).astype(np.uint8)

    return sample


async def _run(d: int, b_iter: int, size: int, seed: int, tau: float | None, confidence: float, n0_scale: float = 1.0):
    lr = InProcessLROracle(_population(d, size, seed))
    oracle = LocalSQOracle(lr, 1.0, adaptive=False, n0_scale=n0_scale)
    run = await priv_learn_local(
        oracle, d, 0.3, 0.1, b_iter, generator(seed, "hrs-local"), _sampler(d), tolerance=tau, confidence=confidence
    )
    return run, oracle, lr


async def test_local_answers_within_tolerance_one_noninteractive_step() -> None:
    """d = 6, b_iter = 30, τ = 0.05, β = 1e-3, ε = 1 (pm_rr), 5 seeds. Every answer A_q must lie within τ
    of p^|q|; LocalSQOracle's n_0 (Hoeffding + union bound) makes a violation in one run have
    probability ≤ β, so this test's false-alarm rate over seeds is ≤ 5β = 0.5%. One ask, one
    NON_INTERACTIVE round, each user spends ε once. Broken variant: n0_scale = 0.02 (2% of the users)
    must violate τ in every seed."""
    d, tau, beta = 6, 0.05, 1e-3
    for seed in range(5):
        run, oracle, lr = await _run(d, 30, 1_500_000, seed, tau, 1 - beta)
        truth = P ** run.answers.rows.sum(axis=1)
        err = np.abs(run.answers.values - truth)
        assert run.steps == 1 and oracle.steps == 1 and oracle.session_kind == SessionKind.NON_INTERACTIVE
        assert err.max() <= tau
        assert run.users_used == oracle.users_used == int(run.answers.users_per_query.sum()) > 0
        spent = lr.ledger_spent_units()
        assert int(np.count_nonzero(spent)) == run.users_used and spent.max() <= 2**48  # ε = 1 in 2^-48 units
        print(f"seed {seed}: {len(run.answers.rows)} distinct queries, {run.users_used} users, max error {err.max():.4f}")
        broken, _, _ = await _run(d, 30, 1_500_000, seed, tau, 1 - beta, n0_scale=0.02)
        assert np.abs(broken.answers.values - P ** broken.answers.rows.sum(axis=1)).max() > tau
    with pytest.raises(SessionError):  # the session is non-interactive: a second step is refused
        await oracle.ask([conjunction_spec(np.array([1, 0, 0, 0, 0, 0]))], tau, 1 - beta)


async def test_local_release_accuracy_vs_central() -> None:
    """d = 8, α = 0.3, γ = 0.1, b_iter = 50, τ = 0.05 (practical mode), ε = 1. Measured on 2000 fresh
    queries q ~ G against p^|q|: the local release and the central one (n = 2000 records of the same
    population, Lap(2·b_iter/(εn))) both reach P[|h − f| ≤ α] ≥ 0.95; the LP is consistent at every
    threshold; the local one used > 100× the central records."""
    d, b_iter = 8, 50
    run, oracle, _ = await _run(d, b_iter, 2_000_000, 3, 0.05, 0.99)
    tq = _sampler(d)(2000, generator(3, "test-queries"))
    f = P ** tq.sum(axis=1)
    err_local = np.abs(run.release.estimate(tq) - f)
    db = generate_records(_population(d, 2000, 3), 0, 2000)[:, :d]
    rel, _ = priv_learn(
        central_answer(db, 1.0, 2 * b_iter, generator(3, "central")), d, 0.3, 0.1, b_iter, generator(3, "hrs-local"), _sampler(d)
    )
    err_central = np.abs(rel.estimate(tq) - f)
    print(
        f"local: {run.users_used} users, P={np.mean(err_local <= 0.3):.3f}, mean {err_local.mean():.4f}; "
        f"central n=2000: P={np.mean(err_central <= 0.3):.3f}, mean {err_central.mean():.4f}"
    )
    assert np.mean(err_local <= 0.3) >= 0.95 and np.mean(err_central <= 0.3) >= 0.95
    assert run.release.constant is None and all(e == 0 for e in run.release.training_errors)
    assert run.users_used > 100 * 2000


async def test_guarantee_tolerance_needs_more_users_than_population() -> None:
    """Default τ = α/21 (Lemma 4.3's event Γ): a population of 10^6 is too small for b_iter = 50 at
    d = 8; the oracle refuses before sending anything and says how many users it needs."""
    lr = InProcessLROracle(_population(8, 1_000_000, 1))
    oracle = LocalSQOracle(lr, 1.0, adaptive=False)
    with pytest.raises(InsufficientUsersError) as info:
        await priv_learn_local(oracle, 8, 0.3, 0.1, 50, generator(1, "hrs-local"), _sampler(8))
    assert info.value.needed > 10**7 and info.value.available == 1_000_000 and oracle.steps == 0
    assert int(np.count_nonzero(lr.ledger_spent_units())) == 0


async def test_empty_conjunction_and_unknown_queries() -> None:
    """q = 0 is answered 1.0 with no users; a query outside the one step is refused."""
    lr = InProcessLROracle(_population(4, 200_000, 2))
    oracle = LocalSQOracle(lr, 1.0, adaptive=False)
    rows = np.array([[0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=np.uint8)
    got = await ask_conjunctions(oracle, rows, 0.1, 0.99)
    assert isinstance(got, PrefetchedAnswers) and len(got.rows) == 2 and oracle.steps == 1
    assert got(rows[:1]).tolist() == [1.0] and got.users_per_query[0] == 0 and got.users_per_query[1] > 0
    assert abs(got(rows[1:2])[0] - P) <= 0.1
    with pytest.raises(ValueError, match="not in the non-interactive step"):
        got(np.array([[0, 1, 0, 0]], dtype=np.uint8))
    with pytest.raises(ValueError, match="empty conjunction"):
        conjunction_spec(np.zeros(4))
