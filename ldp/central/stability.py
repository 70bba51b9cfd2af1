"""A_dist — stability-based selection (Smith–Thakurta; BNS §2.5.3, Prop 2.26), with corrected constants.

Algorithm (BNS, four steps):

1. f1, f2 = the two highest-scoring solutions (ties broken by index order, data-independent);
2. gap* = q(f1) − q(f2) + Lap(b);
3. if gap* < thr: return ⊥ (``None``);
4. return f1.

**Constants.** BNS as printed uses ``b = 1/ε``, ``thr = ln(1/δ)/ε``. Under replace-one neighbours the gap
has sensitivity 2 and the exact worst-case additive δ of the printed version at ε = 1, δ = 1e-6 is ≈ 0.36
(reference spec M4, reproduced in ``tests/central/test_stability.py``), i.e. it is *not* (ε,δ)-DP.
We implement the safe version ``b = 4/ε``, ``thr = (4/ε)·ln(1/δ)`` (as restated by Bun–Nissim–Stemmer–
Vadhan 2015): (ε,δ)-DP for ε ≤ 2·ln 2; returns f1 w.p. ≥ 1−β/2 when gap ≥ (4/ε)·ln(1/(βδ)).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ldp.central.laplace_mechanism import laplace_sf
from ldp.core.errors import ParameterError, require_epsilon, require_probability

__all__ = [
    "ADIST_NOISE_FACTOR",
    "a_dist_noise_scale",
    "a_dist_threshold",
    "a_dist_success_gap",
    "top_two",
    "a_dist_pass_probability",
    "a_dist",
    "a_dist_from_top_two",
]

ADIST_NOISE_FACTOR: float = 4.0
"""Corrected factor: Lap(4/ε) and threshold (4/ε)ln(1/δ). BNS prints 1 (not private under replace-one)."""

_MAX_EPSILON = 2.0 * math.log(2.0)


def _a_dist_parameters(epsilon: float, delta: float) -> tuple[float, float]:
    """(ε, δ) for A_dist: the common checks, plus the range where Lap(4/ε) keeps it (ε,δ)-DP."""
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    if eps > _MAX_EPSILON:
        raise ParameterError(
            f"A_dist with Lap(4/ε) is (ε,δ)-DP only for ε ≤ 2·ln 2 ≈ {_MAX_EPSILON:.4f}; got epsilon={epsilon!r}"
        )
    return eps, dlt


def a_dist_noise_scale(epsilon: float) -> float:
    """Laplace scale b = 4/ε of the noisy gap (corrected constant; BNS prints 1/ε)."""
    return ADIST_NOISE_FACTOR / require_epsilon(epsilon)


def a_dist_threshold(epsilon: float, delta: float) -> float:
    """Threshold thr = (4/ε)·ln(1/δ) (corrected constant; BNS prints ln(1/δ)/ε)."""
    eps, dlt = _a_dist_parameters(epsilon, delta)
    return ADIST_NOISE_FACTOR / eps * math.log(1.0 / dlt)


def a_dist_success_gap(epsilon: float, delta: float, beta: float) -> float:
    """Gap (4/ε)·ln(1/(βδ)) above which A_dist returns f1 w.p. ≥ 1 − β/2 (BNS Prop 2.26, corrected)."""
    eps, dlt = _a_dist_parameters(epsilon, delta)
    b = require_probability("beta", beta, high=0.5)
    return ADIST_NOISE_FACTOR / eps * math.log(1.0 / (b * dlt))


def top_two(
    scores: ArrayLike, tail_size: int = 0, tail_score: float = 0.0
) -> tuple[int, float, float]:
    """Index of the best solution, its score and the runner-up score (``inf`` gap if only one solution).

    Ties are broken by index order; the tail (implicit solutions all scoring ``tail_score``) ranks after
    every explicit solution and can only contribute the runner-up score. Returns index −1 if the best
    solution is in the tail.
    """
    q = np.asarray(scores, dtype=np.float64).ravel()
    n = q.size
    if n == 0:
        if tail_size <= 0:
            raise ValueError("A_dist needs at least one solution")
        return -1, float(tail_score), float(tail_score) if tail_size >= 2 else -math.inf
    order = np.argsort(-q, kind="stable")
    i1 = int(order[0])
    s1 = float(q[i1])
    s2 = float(q[order[1]]) if n >= 2 else -math.inf
    if tail_size > 0:
        if tail_score > s1:
            s2 = s1
            s1 = float(tail_score)
            i1 = -1
            if tail_size >= 2:
                s2 = s1
        else:
            s2 = max(s2, float(tail_score))
    return i1, s1, s2


def a_dist_pass_probability(gap: ArrayLike, epsilon: float, delta: float) -> np.ndarray:
    """Exact Pr[A_dist returns f1] = Pr[gap + Lap(4/ε) ≥ thr] (``gap = inf`` ⇒ 1)."""
    eps, dlt = _a_dist_parameters(epsilon, delta)
    g = np.asarray(gap, dtype=np.float64)
    b = ADIST_NOISE_FACTOR / eps
    thr = b * math.log(1.0 / dlt)
    finite = np.isfinite(g)
    return np.where(finite, laplace_sf(np.where(finite, thr - g, 0.0), b), 1.0)


def a_dist(
    scores: ArrayLike,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    tail_size: int = 0,
    tail_score: float = 0.0,
) -> int | None:
    """A_dist(ε, δ): the index of the best solution if its lead is stably large, else ``None`` (⊥).

    Privacy: (ε,δ)-DP for sensitivity-1 qualities under replace-one neighbours, ε ≤ 2 ln 2
    (corrected constants, see module docstring). ``tail_size``/``tail_score`` describe implicit
    solutions that share one score (e.g. points absent from the sample); cost O(len(scores)).
    If there is only one solution it is returned (gap = +∞; reveals nothing).
    """
    i1, s1, s2 = top_two(scores, tail_size, tail_score)
    return a_dist_from_top_two(i1, s1, s2, epsilon, delta, rng)


def a_dist_from_top_two(
    i1: int, s1: float, s2: float, epsilon: float, delta: float, rng: np.random.Generator
) -> int | None:
    """Steps 2–4 of A_dist given step 1's result (best index, best and runner-up scores; s2 = −∞: one solution).

    For callers that find the top two without listing every solution (e.g. the piecewise RecConcave,
    whose partitions can hold 2^1000 intervals). Same guarantee as :func:`a_dist`.
    """
    eps, dlt = _a_dist_parameters(epsilon, delta)
    if not math.isfinite(s2):
        return i1
    b = ADIST_NOISE_FACTOR / eps
    noisy_gap = (s1 - s2) + float(rng.laplace(0.0, b))
    if noisy_gap < b * math.log(1.0 / dlt):
        return None
    return i1
