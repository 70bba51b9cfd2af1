"""HRS PrivLearn: exact privacy of the only data access, oracle budget, counting rule, end-to-end utility."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ldp.central.hrs import (
    HRSRelease,
    ThresholdOracle,
    central_answer,
    conjunction_counts,
    priv_learn,
)


def test_laplace_answers_exact_privacy_loss() -> None:
    """Privacy loss of the answer vector = ‖f(D) − f(D')‖₁ / scale, maximised over all replace-one
    neighbours of all databases of n = 3 records over d = 3 bits, all 8 queries (b = 8)."""
    d, n, eps = 3, 3, 1.0
    recs = np.array(list(itertools.product([0, 1], repeat=d)), dtype=np.uint8)
    Q = recs.copy()
    b = Q.shape[0]
    worst = 0.0
    for db in itertools.combinations_with_replacement(range(len(recs)), n):
        f = conjunction_counts(recs[list(db)], Q)
        for i in range(n):
            for r in range(len(recs)):
                db2 = list(db)
                db2[i] = r
                worst = max(worst, float(np.abs(f - conjunction_counts(recs[db2], Q)).sum()))
    good_loss = worst / (b / (eps * n))  # central_answer's scale b/(εn)
    broken_loss = worst / (1 / (eps * n))  # broken: per-query scale 1/(εn) (budget not split)
    assert good_loss <= eps + 1e-12 and broken_loss > eps


def test_oracle_budget_counts_distinct_queries() -> None:
    rng = np.random.default_rng(41)
    db = (rng.random((100, 4)) < 0.7).astype(np.uint8)
    ans = central_answer(db, 1.0, 3, rng)
    to = ThresholdOracle(ans, 0.1, 3)
    q = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0]], dtype=np.uint8)
    l1 = to.query(q, 0.5)
    l2 = to.query(q, 0.9)  # same distinct queries at another threshold: free
    assert to.distinct_queries == 2 and l1[0] == l1[2] and set(l2.tolist()) <= {-1, 0, 1}
    to.query(np.array([[0, 0, 1, 0]], dtype=np.uint8), 0.5)
    with pytest.raises(ValueError, match="budget"):
        to.query(np.array([[0, 0, 0, 1]], dtype=np.uint8), 0.5)


def test_counting_rule_single_flip_small_error() -> None:
    ts = tuple((i + 1) / 11 for i in range(10))
    rel = HRSRelease(ts, tuple(), 1, constant=None)
    assert rel.estimate(np.zeros((2, 3), dtype=np.uint8)).tolist() == [0.0, 0.0]


def test_priv_learn_end_to_end_central() -> None:
    """d = 10, n = 5·10^4 records with ≤ 2 zeros (f^D has degree 2), α = 0.2, b_iter = 1000, ε = 1."""
    rng = np.random.default_rng(42)
    d, n, alpha, b_iter = 10, 50_000, 0.2, 1000
    db = np.ones((n, d), dtype=np.uint8)
    zeros = rng.zipf(1.3, size=(n, 2)) % d
    for j in range(2):
        db[np.arange(n), zeros[:, j]] = 0

    def sample_queries(b: int, r: np.random.Generator) -> np.ndarray:
        return (r.random((b, d)) < 0.15).astype(np.uint8)

    ans = central_answer(db, 1.0, 2 * b_iter, rng)
    rel, to = priv_learn(ans, d, alpha, 0.1, b_iter, rng, sample_queries, degree=2)
    assert to.distinct_queries <= b_iter
    test_q = sample_queries(1000, rng)
    err = np.abs(rel.estimate(test_q) - conjunction_counts(db, test_q))
    print("HRS P[|h-f| <= alpha] =", np.mean(err <= alpha), "mean err", err.mean())
    assert np.mean(err <= alpha) >= 0.9
    with pytest.raises(ValueError, match="gamma"):
        priv_learn(ans, d, alpha, 0.0, b_iter, rng, sample_queries)


# --- the paper's LP learner (Theorem 5.10) vs the ridge alternative ---

from ldp.central.hrs import (  # noqa: E402
    chebyshev_step,
    fit_ptf_lp,
    fit_ptf_ridge,
    lemma53_ptf,
    monomial_features,
    paper_parameters,
)


def _all_queries(d: int) -> np.ndarray:
    return np.array(list(itertools.product([0, 1], repeat=d)), dtype=np.uint8)


def test_lp_learner_consistent_when_realizable_and_fails_when_degree_too_low() -> None:
    """D = {1010, 1001, 0110, 0101}, t = 1/4: f_t^D(q) = ¬((q1∧q2) ∨ (q3∧q4)) on all 16 queries.
    It has the degree-2 PTF 1/2 − q1q2 − q3q4 but no degree-1 PTF (not a linear threshold function).
    The LP returns a consistent hypothesis at degree 2; at degree 1 (broken) it cannot."""
    db = np.array([[1, 0, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0], [0, 1, 0, 1]], dtype=np.uint8)
    Q = _all_queries(4)
    labels = (conjunction_counts(db, Q) >= 0.25).astype(np.int8)
    expected = 1 - ((Q[:, 0] & Q[:, 1]) | (Q[:, 2] & Q[:, 3]))
    assert labels.tolist() == expected.tolist()
    fit2 = fit_ptf_lp(monomial_features(Q, 2), labels)
    assert fit2.consistent
    assert fit_ptf_lp(monomial_features(Q, 1), labels).training_errors > 0


def test_lp_learner_consistent_on_bk_with_degree_k() -> None:
    """On B_k, f^D is a degree-≤k polynomial, so f_t^D has a degree-k PTF (spec §B5): the LP must be
    consistent for every database and threshold tried (20 random D × 10 thresholds, d = 8, k = 2)."""
    rng = np.random.default_rng(5)
    Q = _all_queries(8)
    Q = Q[Q.sum(axis=1) <= 2]
    phi = monomial_features(Q, 2)
    for _ in range(20):
        db = (rng.random((int(rng.integers(5, 40)), 8)) < rng.uniform(0.3, 0.9)).astype(np.uint8)
        f = conjunction_counts(db, Q)
        for t in rng.uniform(0.05, 0.95, 10):
            assert fit_ptf_lp(phi, (f >= t).astype(np.int8)).consistent


def _central_instance(learner: str) -> tuple[HRSRelease, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(42)
    d, n, alpha, b_iter = 10, 50_000, 0.2, 1000
    db = np.ones((n, d), dtype=np.uint8)
    zeros = rng.zipf(1.3, size=(n, 2)) % d
    for j in range(2):
        db[np.arange(n), zeros[:, j]] = 0

    def sample_queries(b: int, r: np.random.Generator) -> np.ndarray:
        return (r.random((b, d)) < 0.15).astype(np.uint8)

    ans = central_answer(db, 1.0, 2 * b_iter, rng)
    rel, _ = priv_learn(ans, d, alpha, 0.1, b_iter, rng, sample_queries, degree=2, learner=learner)
    test_q = sample_queries(1000, rng)
    return rel, db, test_q


def test_ridge_alternative_accurate_but_not_consistent() -> None:
    """The named alternative ``learner="ridge"``: same seed and labelled samples as the LP run. The LP
    is consistent at every threshold (so those samples are realizable); ridge is not — the lost
    guarantee (Lemma 4.8 needs a consistent h_i). Its measured accuracy is still ≥ 0.9."""
    lp, db, test_q = _central_instance("lp")
    rg, _, _ = _central_instance("ridge")
    assert lp.labelled == rg.labelled and len(lp.training_errors) == 15
    assert all(e == 0 for e in lp.training_errors)
    assert sum(rg.training_errors) > 0
    err = np.abs(rg.estimate(test_q) - conjunction_counts(db, test_q))
    print("ridge: P[|h-f| <= 0.2] =", np.mean(err <= 0.2), "errors per threshold", rg.training_errors)
    assert np.mean(err <= 0.2) >= 0.9 and rg.learner == "ridge"
    with pytest.raises(ValueError, match="learner"):
        priv_learn(lambda q: np.zeros(len(q)), 3, 0.2, 0.1, 5, np.random.default_rng(0),
                   lambda b, r: np.zeros((b, 3), dtype=np.uint8), learner="svm")


def test_fit_ptf_rejects_bad_labels() -> None:
    with pytest.raises(ValueError, match="labels"):
        fit_ptf_lp(np.ones((3, 2)), np.array([0, 1, -1]))
    with pytest.raises(ValueError, match="ridge"):
        fit_ptf_ridge(np.ones((2, 2)), np.array([0, 1]), ridge=0.0)


# --- Chebyshev construction (Claim 5.4, Lemma 5.3) ---


def test_claim54_chebyshev_step() -> None:
    """s(k) = 1, max_{j<k}|s(j)| ≤ 1/(3n) for k ∈ {4,…,1024}, n ∈ {1e2, 1e4, 1e6}; C_r(1+1/k) ∈ [2.125, 2.178].
    Broken variant: without the (1+1/k) stretch (s(j) = C_r(j/k)^p) the bound fails: C_r(1) = 1 gives no gap."""
    from numpy.polynomial import chebyshev as C

    broken_violates = False
    for k in (4, 16, 64, 256, 1024):
        r = int(np.ceil(np.sqrt(k)))
        top = C.chebval(1 + 1 / k, np.eye(r + 1)[r])
        assert 2.125 <= top <= 2.178 + 1e-3
        for n in (10**2, 10**4, 10**6):
            eps = 1 / (3 * n)
            s = chebyshev_step(k, eps, np.arange(k + 1))
            assert s[k] == pytest.approx(1.0) and np.abs(s[:k]).max() <= eps
            p = int(np.ceil(np.log2(1 / eps)))
            unstretched = C.chebval(np.arange(k) / k, np.eye(r + 1)[r]) / C.chebval(1.0, np.eye(r + 1)[r])
            broken_violates |= bool(np.abs(unstretched**p).max() > eps)
    assert broken_violates


def test_lemma53_sign_equals_threshold_on_bk() -> None:
    """sign(A(q) − (⌈tn⌉ − 1/2)) = f_t^D(q) on all of B_3 (d = 10), 20 random D (n ≤ 50) × 10 thresholds.
    Broken variant (offset ⌈tn⌉, no −1/2) disagrees somewhere."""
    rng = np.random.default_rng(53)
    Q = _all_queries(10)
    Q = Q[Q.sum(axis=1) <= 3]
    broken_wrong = 0
    for _ in range(20):
        n = int(rng.integers(5, 51))
        db = (rng.random((n, 10)) < 0.7).astype(np.uint8)
        f = conjunction_counts(db, Q)
        for t in np.concatenate([rng.uniform(0.05, 0.95, 8), [f[5], f[40]]]):  # include exact ties f = t
            v = lemma53_ptf(db, Q, float(t), 3)
            assert ((v > 0) == (f >= t - 1e-12)).all()
            broken_wrong += int(np.sum(((v - 0.5) > 0) != (f >= t - 1e-12)))
    assert broken_wrong > 0
    with pytest.raises(ValueError, match="B_k"):
        lemma53_ptf(np.ones((2, 10)), np.ones((1, 10)), 0.5, 3)


def test_paper_parameters_worked_example() -> None:
    """Spec §B5 worked example: d = 16 (ln|Q| = 16 ln 2), F = 137, α = β = γ = 0.1, ε = 1."""
    pp = paper_parameters(0.1, 0.1, 0.1, 1.0, 16 * np.log(2), 137)
    assert pp.k == 30 and pp.gamma_prime == pytest.approx(0.1 / 30) and pp.beta_prime == pytest.approx(5.6e-4, rel=0.01)
    assert pp.n_prime == pytest.approx(4.9e6, rel=0.01) and pp.b_base == pytest.approx(2.0e6, rel=0.03)
    assert pp.b_iter == pytest.approx(1.5e10, rel=0.03) and pp.n_required == pytest.approx(1.8e15, rel=0.03)
    assert pp.n_laplace_all == pytest.approx(8.8e6, rel=0.01)
    assert paper_parameters(0.1, 0.1, 0.1, 1.0, 16 * np.log(2), 137, "3.9").n_required == pytest.approx(5.9e16, rel=0.01)
    with pytest.raises(ValueError, match="theorem"):
        paper_parameters(0.1, 0.1, 0.1, 1.0, 1.0, 3, "5.1")
