"""Laplace mechanism (BNS Thm 2.24; KMMS Thm 2.4).

``f(S) + (Y_1..Y_k)`` with ``Y_i ~ Lap(Δ/ε)`` i.i.d. is ε-DP when ``f`` has L1 sensitivity Δ.
Accuracy: ``Pr[max_i |Y_i| > (Δ/ε)·ln(k/β)] ≤ β``.

Replace-one neighbours: a *histogram* (vector of disjoint cell counts) has Δ = 2, a single
counting query Δ = 1.

Floating point: numpy's Laplace sampler has the Mironov (2012) least-significant-bit side channel.
That is accepted for a simulator; it is not a production mechanism.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ldp.core.errors import require_epsilon, require_positive_finite, require_probability

__all__ = [
    "laplace_scale",
    "laplace_mechanism",
    "laplace_cdf",
    "laplace_sf",
    "laplace_log_density",
    "laplace_accuracy_bound",
]


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Noise scale b = Δ/ε of the ε-DP Laplace mechanism (BNS Thm 2.24)."""
    eps = require_epsilon(epsilon)
    sens = require_positive_finite("sensitivity", sensitivity)
    return sens / eps


def laplace_mechanism(
    values: ArrayLike, sensitivity: float, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    """Release ``values + Lap(Δ/ε)`` (i.i.d. per coordinate). ε-DP if ``values`` has L1 sensitivity Δ."""
    b = laplace_scale(sensitivity, epsilon)
    v = np.asarray(values, dtype=np.float64)
    return v + rng.laplace(0.0, b, size=v.shape)


def laplace_cdf(x: ArrayLike, scale: float) -> np.ndarray:
    """Exact CDF of Lap(scale) (used by the exact privacy computations)."""
    z = np.asarray(x, dtype=np.float64) / scale
    neg = 0.5 * np.exp(np.minimum(z, 0.0))
    pos = 1.0 - 0.5 * np.exp(-np.maximum(z, 0.0))
    return np.where(z < 0.0, neg, pos)


def laplace_sf(x: ArrayLike, scale: float) -> np.ndarray:
    """Survival function Pr[Lap(scale) > x], computed without cancellation."""
    return laplace_cdf(-np.asarray(x, dtype=np.float64), scale)


def laplace_log_density(y: ArrayLike, loc: ArrayLike, scale: float) -> np.ndarray:
    """log of the Lap(scale) density at ``y − loc``."""
    d = np.abs(np.asarray(y, dtype=np.float64) - np.asarray(loc, dtype=np.float64))
    return -math.log(2.0 * scale) - d / scale


def laplace_accuracy_bound(sensitivity: float, epsilon: float, k: int, beta: float) -> float:
    """(Δ/ε)·ln(k/β): all k noisy values are within this of the truth w.p. ≥ 1−β (BNS Thm 2.24)."""
    require_probability("beta", beta, high=0.5)
    if k < 1:
        raise ValueError(f"k must be an integer ≥ 1; got k={k!r}")
    return laplace_scale(sensitivity, epsilon) * math.log(k / beta)
