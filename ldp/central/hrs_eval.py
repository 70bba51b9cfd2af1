"""HRS Theorem 3.9, step 3(d): PrivLearn with a learner that makes *evaluation queries* (HRS Def 3.6), and why
the threshold oracle (Figure 1) is the right interface for it.

Task: release k-way monotone-conjunction counting queries, G uniform over B_k = {q : |q| ≤ k} (HRS §5.1.2).
f^D(q) only decreases when a literal is added, so every threshold function f_t^D(q) = 1{f^D(q) ≥ t} is a
*monotone decreasing* Boolean function on B_k. :func:`learn_monotone_by_queries` learns such a function
exactly with evaluation queries: it asks the empty query, then level by level only those q all of whose
one-smaller sub-queries were answered 1 (any other q is 0 by monotonicity); a ⊥ answer (|f^D(q) − t| < α
under Γ, Lemma 4.3) is taken as 0. Its queries are adaptive — they depend on earlier labels and differ
between thresholds — which is what Theorem 3.9 (as opposed to Theorem 4.10's sampling-only learners) covers.
Step 3(d)'s oracle: :class:`RestrictedEvaluationOracle` answers (c·G[q], l) or (0, ⊥) (Def 3.6, c = 1 here).

Privacy is that of the data access alone (HRS Lemma 4.4: everything else is post-processing). Two accountings:

* ``reuse=True`` — through the threshold oracle TO (Figure 1), which keeps one noisy A_q per *distinct* q and
  answers every threshold from it (Lemma 4.1: ε-DP with Lap(b/(εn)) for b distinct queries). Every query lies
  in B_k, so b = |B_k| is a data-independent cap, whatever the learner asks at the k thresholds.
* ``reuse=False`` — an evaluation oracle that draws fresh noise per (q, t) call (Theorem 3.9's per-iteration
  charging, b_total = 2k·b_iter in the paper): the cap is k_thr·|B_k| calls, so the noise is k_thr× larger.

Compare :func:`ldp.central.hrs.priv_learn` (sampling-only LP learner, Theorem 4.10, noise 2·b_iter/(εn)) on
the same task (``tests/central/test_hrs_eval.py``, docs/central.md).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ldp.central.hrs import ThresholdOracle, central_answer
from ldp.core.errors import require_epsilon, require_integer, require_probability

__all__ = [
    "query_ball",
    "RestrictedEvaluationOracle",
    "learn_monotone_by_queries",
    "QueryRelease",
    "priv_learn_evaluation",
]


def query_ball(n_vars: int, k: int) -> np.ndarray:
    """B_k: every q ∈ {0,1}^d with at most k ones, by weight (rows uint8)."""
    d = require_integer("n_vars", n_vars, 1)
    if not 0 <= k <= d:
        raise ValueError(f"k must lie in [0, n_vars={d}]; got k={k}")
    rows = []
    for w in range(k + 1):
        for S in itertools.combinations(range(d), w):
            q = np.zeros(d, dtype=np.uint8)
            q[list(S)] = 1
            rows.append(q)
    return np.stack(rows)


@dataclass(frozen=True)
class RestrictedEvaluationOracle:
    """HRS Def 3.6 at threshold t: q ↦ (c·G[q], label) when G[q] > 0 and the label is not ⊥, else (0, ⊥ = −1)."""

    labels_at: Callable[[np.ndarray, float], np.ndarray]
    weight: Callable[[np.ndarray], np.ndarray]
    t: float

    def __call__(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q = np.asarray(queries, dtype=np.uint8)
        g = np.asarray(self.weight(q), dtype=np.float64)
        lab = np.where(g > 0, self.labels_at(q, self.t), -1).astype(np.int8)
        return np.where(lab >= 0, g, 0.0), lab


def learn_monotone_by_queries(
    oracle: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], n_vars: int, k: int
) -> frozenset[bytes]:
    """Exact evaluation-query learner for monotone decreasing f on B_k: the set of q it finds with f(q) = 1.

    Level w asks only the q of weight w whose every sub-query of weight w − 1 was found positive; with correct
    answers the output is exactly f^{-1}(1) ∩ B_k, using at most |B_k| queries. ⊥ (and weight 0) count as 0.
    """
    d = require_integer("n_vars", n_vars, 1)
    positives: set[bytes] = set()
    level = [np.zeros(d, dtype=np.uint8)]
    for _ in range(k + 1):  # levels 0..k
        if not level:
            break
        q = np.stack(level)
        weights, labels = oracle(q)
        found = [row for row, lab, g in zip(q, labels, weights) if lab == 1 and g > 0]
        positives.update(row.tobytes() for row in found)
        nxt: dict[bytes, np.ndarray] = {}
        for row in found:
            for i in np.flatnonzero(row == 0):
                cand = row.copy()
                cand[i] = 1
                key = cand.tobytes()
                if key in nxt:
                    continue
                subs = []
                for j in np.flatnonzero(cand):
                    s = cand.copy()
                    s[j] = 0
                    subs.append(s.tobytes())
                if all(s in positives for s in subs):
                    nxt[key] = cand
        level = list(nxt.values())
    return frozenset(positives)


@dataclass(frozen=True)
class QueryRelease:
    """The synopsis: per threshold t_i the learned set of positive queries; h(q) = t_c, c = #{i : q ∈ P_i}."""

    thresholds: tuple[float, ...]
    positives: tuple[frozenset[bytes], ...]
    noise_scale: float
    budget: int

    def estimate(self, queries: np.ndarray) -> np.ndarray:
        q = np.asarray(queries, dtype=np.uint8)
        c = np.array([sum(row.tobytes() in P for P in self.positives) for row in q], dtype=np.int64)
        return np.concatenate([[0.0], np.asarray(self.thresholds)])[c]

    def predict(self, queries: np.ndarray) -> np.ndarray:
        return self.estimate(queries)

    def describe(self) -> str:
        return f"HRS release (evaluation queries): {len(self.positives)} monotone sets, noise Lap({self.noise_scale:.3g})"


def priv_learn_evaluation(
    db: np.ndarray, n_vars: int, k_way: int, alpha: float, epsilon: float, rng: np.random.Generator, reuse: bool = True
) -> tuple[QueryRelease, int]:
    """PrivLearn (HRS Fig. 2) with the evaluation-query learner on G = uniform(B_k); ε-DP (Lemma 4.1 / 4.4).

    Returns the release and the number of oracle calls the learner made (data-dependent, reported only: the
    accounting uses the cap, |B_k| distinct queries with ``reuse``, k_thr·|B_k| calls without).
    """
    a = require_probability("alpha", alpha, high=0.5)
    eps = require_epsilon(epsilon)
    u = np.asarray(db, dtype=np.uint8)
    if u.ndim != 2 or u.shape[1] != n_vars or u.shape[0] == 0:
        raise ValueError(f"db must be a non-empty (n, n_vars={n_vars}) 0/1 array; got shape {u.shape}")
    ball = query_ball(n_vars, k_way)
    k_thr = math.ceil(3 / a)
    ts = tuple((i + 1) / (k_thr + 1) for i in range(k_thr))
    band = 2 * (a / 7) / 3  # TO(D, α/7): labels at t ± 2α/21
    in_ball = {row.tobytes() for row in ball}

    def weight(q: np.ndarray) -> np.ndarray:  # G = uniform over B_k
        return np.array([1.0 / len(ball) if row.tobytes() in in_ball else 0.0 for row in q])

    calls = [0]
    if reuse:
        budget = len(ball)
        to = ThresholdOracle(central_answer(u, eps, budget, rng), a / 7, budget)

        def labels_at(q: np.ndarray, t: float) -> np.ndarray:
            calls[0] += q.shape[0]
            return to.query(q, t)
    else:
        budget = k_thr * len(ball)
        fresh = central_answer(u, eps, budget, rng)  # fresh Lap(budget/(εn)) per call

        def labels_at(q: np.ndarray, t: float) -> np.ndarray:
            calls[0] += q.shape[0]
            A = fresh(q)
            return np.where(A >= t + band, 1, np.where(A <= t - band, 0, -1)).astype(np.int8)

    positives = tuple(
        learn_monotone_by_queries(RestrictedEvaluationOracle(labels_at, weight, t), n_vars, k_way) for t in ts
    )
    return QueryRelease(ts, positives, budget / (eps * u.shape[0]), budget), calls[0]
