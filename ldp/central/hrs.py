"""HRS PrivLearn: private data release for monotone-conjunction counting queries via learning thresholds
(Hardt–Rothblum–Servedio, SODA 2012: Figure 1 threshold oracle, Figure 2 PrivLearn, Lemmas 4.1–4.5,
Theorem 4.10).

Queries q ∈ {0,1}^d (monotone conjunctions); a record u ∈ {0,1}^d satisfies q iff u_i = 1 for every i with
q_i = 1; f^D(q) = fraction of records satisfying q.

**The data is touched only through** ``answer(queries) -> estimates``: one call with the b distinct queries
(rows of a uint8 array) returning estimates of f^D. The central default (:func:`central_answer`) adds
Lap(b/(εn)) to each (Lemma 4.1: b Laplace mechanisms at ε/b each ⇒ ε-DP). A local-model implementation
can be plugged in (e.g. disjoint user groups through an SQ oracle): everything else is post-processing.

PrivLearn (practical mode, reference spec §B3/B5; privacy does not depend on these choices, Lemma 4.4):
  k = ⌈3/α⌉ thresholds t_i = i/(k+1); q_1..q_b ~ G drawn before seeing data (sampling-only learner, so
  Theorem 4.10's b_total = 2·b_iter noise scale); threshold oracle TO(D, α/7): label 1 if A_q ≥ t + 2α/21,
  0 if A_q ≤ t − 2α/21, ⊥ otherwise (one noisy A_q per *distinct* q, reused across thresholds — the
  budget counts distinct queries, fixing the paper's per-call count, see spec §0);
  per threshold: if < γ/2 of the labels are non-⊥, return the constant t_i (HRS step 3c); else fit a
  degree-≤a polynomial threshold function to the labelled queries (least squares on ±1 labels; an ERM
  stand-in for the paper's LP learner); combine by the counting rule h(q) = t_c, c = #{i : h_i(q) = 1}.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ldp.central._validate import check_epsilon, check_half_open_unit, check_positive_int

__all__ = [
    "AnswerFn",
    "conjunction_counts",
    "central_answer",
    "ThresholdOracle",
    "monomial_features",
    "HRSRelease",
    "priv_learn",
]

AnswerFn = Callable[[np.ndarray], np.ndarray]


def conjunction_counts(db: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Exact f^D(q) for monotone conjunctions: mean over records of ∏_{i: q_i=1} u_i."""
    u = np.asarray(db, dtype=np.uint8)
    q = np.asarray(queries, dtype=np.uint8)
    # record satisfies q iff no i with q_i = 1 and u_i = 0
    viol = (q.astype(np.int32) @ (1 - u.astype(np.int32)).T) > 0  # (b, n)
    return 1.0 - viol.mean(axis=1)


def central_answer(db: np.ndarray, epsilon: float, budget: int, rng: np.random.Generator) -> AnswerFn:
    """Central default: each of ≤ ``budget`` distinct queries gets f^D(q) + Lap(budget/(ε·n)). ε-DP (Lemma 4.1)."""
    eps = check_epsilon(epsilon)
    b = check_positive_int(budget, "budget")
    u = np.asarray(db, dtype=np.uint8)
    n = u.shape[0]
    used = [0]

    def answer(queries: np.ndarray) -> np.ndarray:
        q = np.asarray(queries, dtype=np.uint8)
        if used[0] + q.shape[0] > b:
            raise ValueError(f"query budget exhausted: {used[0]} + {q.shape[0]} distinct queries > budget {b}")
        used[0] += q.shape[0]
        return conjunction_counts(u, q) + rng.laplace(0.0, b / (eps * n), size=q.shape[0])

    return answer


class ThresholdOracle:
    """TO(D, α, b) (HRS Figure 1) with the budget counted over *distinct* queries (Lemma 4.1).

    Noisy values are fetched in batches through ``answer`` and reused for every threshold.
    """

    def __init__(self, answer: AnswerFn, alpha: float, budget: int) -> None:
        self._answer = answer
        self.alpha = float(alpha)
        self.budget = check_positive_int(budget, "budget")
        self._cache: dict[bytes, float] = {}

    def prefetch(self, queries: np.ndarray) -> None:
        q = np.asarray(queries, dtype=np.uint8)
        new = [kk for kk in dict.fromkeys(row.tobytes() for row in q) if kk not in self._cache]
        if not new:
            return
        if len(self._cache) + len(new) > self.budget:
            raise ValueError(f"threshold oracle budget of {self.budget} distinct queries exceeded")
        rows = np.stack([np.frombuffer(kk, dtype=np.uint8) for kk in new])
        vals = np.asarray(self._answer(rows), dtype=np.float64)
        self._cache.update(zip(new, vals.tolist()))

    def query(self, queries: np.ndarray, t: float) -> np.ndarray:
        """Labels 1 / 0 / −1 (⊥) for each query at threshold t (bands ±2α/3)."""
        self.prefetch(queries)
        a = np.array([self._cache[row.tobytes()] for row in np.asarray(queries, dtype=np.uint8)])
        out = np.full(a.shape, -1, dtype=np.int8)
        out[a >= t + 2 * self.alpha / 3] = 1
        out[a <= t - 2 * self.alpha / 3] = 0
        return out

    @property
    def distinct_queries(self) -> int:
        return len(self._cache)


def monomial_features(queries: np.ndarray, degree: int) -> np.ndarray:
    """All monotone monomials of degree ≤ ``degree`` of the query bits (including the constant)."""
    q = np.asarray(queries, dtype=np.float64)
    cols = [np.ones(q.shape[0])]
    for a in range(1, degree + 1):
        for S in itertools.combinations(range(q.shape[1]), a):
            cols.append(np.prod(q[:, S], axis=1))
    return np.stack(cols, axis=1)


@dataclass(frozen=True)
class HRSRelease:
    """The synopsis: per-threshold PTF weights (or a constant), evaluated by the counting rule."""

    thresholds: tuple[float, ...]
    weights: tuple[tuple[float, ...], ...]
    degree: int
    constant: float | None

    def estimate(self, queries: np.ndarray) -> np.ndarray:
        q = np.asarray(queries, dtype=np.uint8)
        if self.constant is not None:
            return np.full(q.shape[0], self.constant)
        phi = monomial_features(q, self.degree)
        c = np.zeros(q.shape[0], dtype=np.int64)
        for w in self.weights:
            c += (phi @ np.asarray(w)) > 0
        t = np.concatenate([[0.0], np.asarray(self.thresholds)])
        return t[c]

    def predict(self, queries: np.ndarray) -> np.ndarray:
        return self.estimate(queries)

    def describe(self) -> str:
        if self.constant is not None:
            return f"HRS release: constant {self.constant:.3f}"
        return f"HRS release: {len(self.weights)} degree-{self.degree} PTFs, counting rule"


def priv_learn(
    answer: AnswerFn | None,
    n_vars: int,
    alpha: float,
    gamma: float,
    b_iter: int,
    rng: np.random.Generator,
    sample_queries: Callable[[int, np.random.Generator], np.ndarray],
    degree: int = 2,
    ridge: float = 1e-3,
) -> tuple[HRSRelease, ThresholdOracle]:
    """HRS PrivLearn (Figure 2, Theorem 4.10, practical mode). Returns the release and the oracle used.

    ``answer`` is the only data access (≤ b_iter distinct queries); build the central one with
    ``central_answer(db, ε, 2·b_iter, rng)`` (Theorem 4.10 noise scale 2·b_iter/(εn)).
    ``sample_queries(b, rng)`` draws the public query sample q_1..q_b ~ G.
    """
    a = check_half_open_unit(alpha, "alpha")
    g = check_half_open_unit(gamma, "gamma")
    bi = check_positive_int(b_iter, "b_iter")
    if answer is None:
        raise ValueError("answer must be a callable; build the central one with central_answer(db, ε, 2·b_iter, rng)")
    k = math.ceil(3 / a)
    ts = tuple((i + 1) / (k + 1) for i in range(k))
    to = ThresholdOracle(answer, a / 7, bi)
    Q = np.asarray(sample_queries(bi, rng), dtype=np.uint8)
    to.prefetch(Q)
    phi = monomial_features(Q, degree)
    weights = []
    for t in ts:
        lab = to.query(Q, t)
        ok = lab >= 0
        if ok.mean() < g / 2:
            return HRSRelease(ts, tuple(), degree, constant=t), to
        s = np.where(lab[ok] == 1, 1.0, -1.0)
        X = phi[ok]
        w = np.linalg.solve(X.T @ X + ridge * np.eye(X.shape[1]), X.T @ s)
        weights.append(tuple(float(v) for v in w))
    return HRSRelease(ts, tuple(weights), degree, constant=None), to
