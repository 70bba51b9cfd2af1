"""Proper learners for POINT_d = {c_j : j ∈ {0,…,2^d−1}}, c_j(x) = 1 iff x = j (BNS Def 3.1).

Data: ``x`` is a 1-D array of points in [0, 2^bits): an integer array when ``bits ≤ 62``, or an object
array of Python ``int`` for any ``bits`` (tested to 512). Labels ``y`` are int8 in {0,1}.

* :func:`learn_point_pure` — the generic KLNRS learner (exponential mechanism over all 2^d hypotheses,
  quality = −#mistakes), ε-DP; sample size Θ(d) (BNS §2.5.2 / Beimel et al. lower bound for proper).
* :func:`learn_point_approx` — BNS Lemma 3.2: A_dist over q(x) = #{(x,1) ∈ S}, random point on ⊥;
  (ε,δ)-DP; sample size O((1/(αε))·ln(1/(βδ))) independent of d.
* :func:`learn_point_lmm` — the Large Margin Mechanism (CHS Algorithm 1) over POINT_d with
  f = 1 − empirical error; (ε,δ)-DP; range independent once the margin test passes.

All run in O(m) for any d: the 2^d − #distinct points absent from the sample share one quality and are
handled as a single tail bucket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldp.central.large_margin import large_margin_mechanism
from ldp.central.stability import a_dist
from ldp.core.errors import require_epsilon, require_integer, require_probability
from ldp.core.exponential_mechanism import TAIL, exponential_mechanism
from ldp.core.learner_result import LearnerResult

__all__ = [
    "PointHypothesis",
    "point_counts",
    "learn_point_pure",
    "learn_point_approx",
    "learn_point_lmm",
    "point_pure_sample_size",
    "point_approx_sample_size",
    "random_point",
]


@dataclass(frozen=True)
class PointHypothesis:
    """c_j: predicts 1 exactly on ``point``."""

    point: int
    bits: int

    def predict(self, x: np.ndarray) -> np.ndarray:
        xa = np.asarray(x)
        return (xa == self.point).astype(np.int8)

    def describe(self) -> str:
        return f"POINT_{self.bits}: c_j with j = {self.point}"


def _check_data(x: np.ndarray, y: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    xa = np.asarray(x)
    ya = np.asarray(y)
    if xa.ndim != 1 or ya.shape != xa.shape or xa.size == 0:
        raise ValueError(f"x and y must be non-empty 1-D arrays of equal length; got shapes {xa.shape}, {ya.shape}")
    if not np.all((ya == 0) | (ya == 1)):
        raise ValueError("labels y must be in {0,1}")
    if bits > 62 and xa.dtype != object:
        xa = xa.astype(object)
    return xa, ya.astype(np.int8)


def point_counts(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct points of the sample with their positive and negative counts."""
    pts, inv = np.unique(np.asarray(x), return_inverse=True)
    inv = np.asarray(inv).ravel()
    y8 = np.asarray(y, dtype=np.int64)
    pos = np.bincount(inv, weights=y8, minlength=len(pts)).astype(np.int64)
    tot = np.bincount(inv, minlength=len(pts)).astype(np.int64)
    return pts, pos, tot - pos


def random_point(bits: int, rng: np.random.Generator, exclude: np.ndarray | None = None) -> int:
    """A uniformly random point of {0,…,2^bits−1} not in ``exclude`` (rejection sampling; any bits)."""
    excl = set(int(v) for v in exclude) if exclude is not None else set()
    if len(excl) >= 2**bits:
        raise ValueError("no point left to sample")
    nbytes = (bits + 7) // 8
    mask = (1 << bits) - 1
    while True:
        v = int.from_bytes(rng.bytes(nbytes), "little") & mask
        if v not in excl:
            return v


def learn_point_pure(
    x: np.ndarray, y: np.ndarray, bits: int, epsilon: float, rng: np.random.Generator
) -> LearnerResult:
    """Generic KLNRS learner for POINT_d: ExpMech(ε) with q(c_j) = −#mistakes. ε-DP (pure), proper."""
    eps = require_epsilon(epsilon)
    d = require_integer("bits", bits, 1)
    xa, ya = _check_data(x, y, d)
    pts, pos, neg = point_counts(xa, ya)
    total_pos = int(ya.sum())
    scores = -(total_pos - pos + neg).astype(np.float64)
    tail = 2**d - len(pts)
    i = exponential_mechanism(scores, eps, rng, tail_size=tail, tail_score=-float(total_pos))
    j = random_point(d, rng, exclude=pts) if i == TAIL else int(pts[i])
    return LearnerResult(PointHypothesis(j, d), len(xa), eps, 0.0, "pure exponential mechanism (KLNRS)")


def learn_point_approx(
    x: np.ndarray,
    y: np.ndarray,
    bits: int,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
) -> LearnerResult:
    """BNS Lemma 3.2: r = A_dist(ε,δ) over q(x) = #{i : (x_i,y_i) = (x,1)}; c_r, or a random c_j on ⊥.

    (ε,δ)-DP (A_dist is the only data access; corrected A_dist constants, see ``stability``).
    """
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    d = require_integer("bits", bits, 1)
    xa, ya = _check_data(x, y, d)
    pts, pos, _ = point_counts(xa, ya)
    keep = pos > 0
    cand = pts[keep]
    r = a_dist(pos[keep].astype(np.float64), eps, dlt, rng, tail_size=2**d - len(cand), tail_score=0.0)
    if r is None or r == -1:
        j = random_point(d, rng)
        branch = "bottom"
    else:
        j = int(cand[r])
        branch = "selected"
    return LearnerResult(
        PointHypothesis(j, d), len(xa), eps, dlt, "A_dist (BNS Lemma 3.2)", details={"branch": branch}
    )


def learn_point_lmm(
    x: np.ndarray,
    y: np.ndarray,
    bits: int,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    max_steps: int = 1 << 16,
) -> LearnerResult:
    """LMM-based private PAC learner (CHS §A5.2 / Corollary 2) for POINT_d: LMM over H with f = 1 − err̂.

    (ε,δ)-DP (CHS Theorem 2). Absent points form the tail (all share f = 1 − #pos/m).
    """
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    d = require_integer("bits", bits, 1)
    xa, ya = _check_data(x, y, d)
    m = len(xa)
    pts, pos, neg = point_counts(xa, ya)
    total_pos = int(ya.sum())
    f = 1.0 - (total_pos - pos + neg) / m
    out = large_margin_mechanism(f, m, eps, dlt, rng, tail_size=2**d - len(pts), tail_score=1.0 - total_pos / m,
        max_steps=max_steps,
    )
    j = random_point(d, rng, exclude=pts) if out.index == TAIL else int(pts[out.index])
    return LearnerResult(
        PointHypothesis(j, d), m, eps, dlt, "Large Margin Mechanism (CHS Alg. 1)", details={"ell": out.ell}
    )


def point_pure_sample_size(alpha: float, beta: float, epsilon: float, bits: int) -> int:
    """[DERIVED] M3 bound for POINT_d: (4/(αε))·(d·ln 2 + ln(2/β)) (empirical-error part only)."""
    a = require_probability("alpha", alpha, high=0.5)
    b = require_probability("beta", beta, high=0.5)
    eps = require_epsilon(epsilon)
    return math.ceil(4.0 / (a * eps) * (require_integer("bits", bits, 1) * math.log(2) + math.log(2 / b)))


def point_approx_sample_size(alpha: float, beta: float, epsilon: float, delta: float) -> int:
    """[DERIVED] BNS Lemma 3.2 with the safe A_dist: max{(16/(αε))ln(2/(βδ)), (16/α)ln(2/β)}; no d."""
    a = require_probability("alpha", alpha, high=0.5)
    b = require_probability("beta", beta, high=0.5)
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    return math.ceil(max(16 / (a * eps) * math.log(2 / (b * dlt)), 16 / a * math.log(2 / b)))
