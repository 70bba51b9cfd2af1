"""Exact privacy accounting on explicit output distributions (for tests and audits).

Given the exact output distributions ``P = M(S)`` and ``P' = M(S')`` of a mechanism on neighbouring
databases (over the same finite list of outcomes, including ⊥):

* :func:`max_log_ratio` — ``max_w |ln P(w) − ln P'(w)|``, ≤ ε for an ε-DP mechanism;
* :func:`delta_at_epsilon` — ``δ(ε) = Σ_w max(0, P(w) − e^ε·P'(w))``: the smallest δ for which
  ``P(F) ≤ e^ε·P'(F) + δ`` holds for every event F (privacy-testing practices §4(a)).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["delta_at_epsilon", "symmetric_delta", "max_log_ratio", "delta_bounds_on_cells"]


def delta_at_epsilon(p: ArrayLike, q: ArrayLike, epsilon: float) -> np.ndarray:
    """δ(ε) of P against P' along the last axis (vectorised over leading axes)."""
    pp = np.asarray(p, dtype=np.float64)
    qq = np.asarray(q, dtype=np.float64)
    return np.sum(np.maximum(0.0, pp - math.exp(epsilon) * qq), axis=-1)


def symmetric_delta(p: ArrayLike, q: ArrayLike, epsilon: float) -> np.ndarray:
    """max(δ_{P‖P'}(ε), δ_{P'‖P}(ε))."""
    return np.maximum(delta_at_epsilon(p, q, epsilon), delta_at_epsilon(q, p, epsilon))


def max_log_ratio(p: ArrayLike, q: ArrayLike) -> float:
    """max over outcomes of |ln P(w) − ln P'(w)|; ``inf`` if one support is strictly larger."""
    pp = np.asarray(p, dtype=np.float64).ravel()
    qq = np.asarray(q, dtype=np.float64).ravel()
    if np.any((pp > 0) != (qq > 0)):
        return math.inf
    m = (pp > 0) & (qq > 0)
    if not np.any(m):
        return 0.0
    return float(np.max(np.abs(np.log(pp[m]) - np.log(qq[m]))))


def delta_bounds_on_cells(p: ArrayLike, q: ArrayLike, ratio_inf: ArrayLike, epsilon: float) -> tuple[float, float]:
    """Rigorous bounds on δ(ε) of P against P' for a mechanism with continuous outputs, from a partition into cells.

    ``p``, ``q``: the exact probabilities P(C), P'(C) of each cell; ``ratio_inf``: inf over the cell of the
    density ratio p'(w)/p(w) (0 where P' has no mass). Then
    ``Σ_C (P(C) − e^ε P'(C))_+ ≤ δ(ε) ≤ Σ_C P(C)·(1 − e^ε·inf_C p'/p)_+``: the lower bound is δ of the output
    rounded to its cell (post-processing), the upper bound holds pointwise in each cell.
    """
    pp = np.asarray(p, dtype=np.float64)
    qq = np.asarray(q, dtype=np.float64)
    rr = np.asarray(ratio_inf, dtype=np.float64)
    e = math.exp(epsilon)
    lower = float(np.sum(np.maximum(0.0, pp - e * qq)))
    upper = float(np.sum(pp * np.maximum(0.0, 1.0 - e * rr)))
    return lower, upper
