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
