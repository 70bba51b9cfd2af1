"""Learners for THRESH_d = {c_j : 0 ≤ j ≤ 2^d}, c_j(x) = 1 iff x < j (BNS Def 3.4).

Data: ``x`` integer array of points in [0, 2^bits): int64 for ``bits ≤ 62``, or an object array of Python
``int`` for any ``bits ≤ MAX_BITS``; ``y`` int8 in {0,1}.

Q(j) = #{i : c_j(x_i) = y_i} changes only at j = x_i + 1, so it is held per piece
(:func:`threshold_quality_pieces`, ≤ m+1 pieces) and both learners run at any d:

* :func:`learn_thresholds_pure` — generic KLNRS learner (exponential mechanism over the 2^d + 1
  thresholds, q = #correct), ε-DP, sample size Θ(d). Exact piecewise sampler: a piece is chosen with
  log-weight ln(len) + εQ/2 and j uniformly inside it.
* :func:`learn_thresholds_approx` — BNS LearnThresholds (§3.4, Thm 3.18): RecConcave (piecewise top level,
  ``ldp.central.piecewise``) on Q with promise r = m, α' = α/2, N = levels for T = 2^d (2 for 6 ≤ d ≤ 32,
  3 for 33 ≤ d ≤ 2^32) and ε' = ε/(3N), δ' = δ/(3N), so the whole run is (ε,δ)-DP (Lemma 3.12).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldp.central.piecewise import PiecewiseQuality, piecewise_exponential_mechanism, rec_concave_piecewise
from ldp.central.rec_concave import rec_concave_levels
from ldp.core.errors import require_epsilon, require_integer, require_probability
from ldp.core.learner_result import LearnerResult

__all__ = [
    "ThresholdHypothesis",
    "threshold_qualities",
    "threshold_quality_pieces",
    "learn_thresholds_pure",
    "learn_thresholds_approx",
    "DENSE_MAX_BITS",
    "MAX_BITS",
]

DENSE_MAX_BITS: int = 22
"""Cap of the dense quality array :func:`threshold_qualities` (tests and small-d comparisons)."""
MAX_BITS: int = 4096
"""Cap of the piecewise learners (big-int positions; the recursion's second level is dense over d+1)."""


@dataclass(frozen=True)
class ThresholdHypothesis:
    """c_j: predicts 1 iff x < ``threshold``."""

    threshold: int
    bits: int

    def predict(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x) < self.threshold).astype(np.int8)

    def describe(self) -> str:
        return f"THRESH_{self.bits}: c_j(x) = [x < {self.threshold}]"


def _check_data(x: np.ndarray, y: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    xa = np.asarray(x)
    ya = np.asarray(y)
    if xa.ndim != 1 or ya.shape != xa.shape or xa.size == 0:
        raise ValueError(f"x and y must be non-empty 1-D arrays of equal length; got shapes {xa.shape}, {ya.shape}")
    if not np.all((ya == 0) | (ya == 1)):
        raise ValueError("labels y must be in {0,1}")
    xa = xa.astype(object) if bits > 62 else xa.astype(np.int64)
    if min(xa) < 0 or max(xa) >= 2**bits:
        raise ValueError(f"points must lie in [0, 2^{bits}); got range [{min(xa)}, {max(xa)}]")
    return xa, ya.astype(np.int8)


def threshold_qualities(x: np.ndarray, y: np.ndarray, bits: int) -> np.ndarray:
    """Dense Q(j) = #{i : c_j(x_i) = y_i} for j = 0..2^bits (prefix sums; BNS §3.4 step 2)."""
    d = require_integer("bits", bits, 1, DENSE_MAX_BITS)
    xa, ya = _check_data(x, y, d)
    size = 2**d
    pos = np.bincount(xa[ya == 1], minlength=size)
    neg = np.bincount(xa[ya == 0], minlength=size)
    pos_below = np.concatenate([[0], np.cumsum(pos)])  # #pos with x < j
    neg_below = np.concatenate([[0], np.cumsum(neg)])
    return (pos_below + (neg.sum() - neg_below)).astype(np.float64)


def threshold_quality_pieces(x: np.ndarray, y: np.ndarray, bits: int) -> PiecewiseQuality:
    """Q(j) = #correct on {0,…,2^d} per piece: [0, p_1], [p_1+1, p_2], …, [p_r+1, 2^d] (p = sorted distinct points)."""
    d = require_integer("bits", bits, 1, MAX_BITS)
    xa, ya = _check_data(x, y, d)
    pts, inv = np.unique(xa, return_inverse=True)
    inv = np.asarray(inv).ravel()
    pos = np.bincount(inv, weights=ya, minlength=len(pts))
    neg = np.bincount(inv, weights=1 - ya, minlength=len(pts))
    # on piece i (i = 0..r): #pos among the first i points + #neg among the rest
    values = np.concatenate([[0], np.cumsum(pos)]) + (neg.sum() - np.concatenate([[0], np.cumsum(neg)]))
    starts = (0, *(int(p) + 1 for p in pts))
    return PiecewiseQuality(starts, tuple(float(v) for v in values), 2**d)


def learn_thresholds_pure(
    x: np.ndarray, y: np.ndarray, bits: int, epsilon: float, rng: np.random.Generator
) -> LearnerResult:
    """Exponential mechanism over THRESH_d with q = #correct (KLNRS generic learner); ε-DP, proper."""
    eps = require_epsilon(epsilon)
    d = require_integer("bits", bits, 1, MAX_BITS)
    j = piecewise_exponential_mechanism(threshold_quality_pieces(x, y, d), eps, rng)  # validates x, y
    return LearnerResult(ThresholdHypothesis(j, d), int(np.asarray(x).size), eps, 0.0, "pure exponential mechanism (KLNRS)")


def learn_thresholds_approx(
    x: np.ndarray,
    y: np.ndarray,
    bits: int,
    alpha: float,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
) -> LearnerResult:
    """BNS LearnThresholds (Thm 3.18) via RecConcave; (ε,δ)-DP by Lemma 3.12 with ε' = ε/(3N), δ' = δ/(3N).

    N = number of RecConcave levels for T = 2^d (1 for d ≤ 5, 2 for d ≤ 32, 3 up to d = 2^32); the
    accounting uses this cap, not the depth a run reaches.
    """
    a = require_probability("alpha", alpha, high=0.5)
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    d = require_integer("bits", bits, 1, MAX_BITS)
    Q = threshold_quality_pieces(x, y, d)
    m = int(np.asarray(x).size)
    N = rec_concave_levels(2**d)
    j = rec_concave_piecewise(Q, float(m), a / 2.0, eps / (3 * N), dlt / (3 * N), N, rng)
    return LearnerResult(
        ThresholdHypothesis(int(j), d), m, eps, dlt, "LearnThresholds via RecConcave (BNS Thm 3.18)",
        details={"N": N},
    )
