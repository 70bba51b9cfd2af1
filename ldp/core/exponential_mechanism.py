"""Exponential mechanism (McSherry–Talwar; BNS §2.5.2; KMMS Prop 2.5) with samplers for huge domains.

Output ``f`` with probability ∝ ``exp(s·ε·q(S,f)/Δ)`` where ``s`` is ``exponent_scale``.

* ``exponent_scale = 1/2`` (default, the textbook form ``exp(ε q / 2Δ)``) is ε-DP.
* In general the mechanism is ``(2·s·ε)``-DP; KMMS SelectHalfplane uses ``s = 1`` and states 2ε-DP.

Utility (KMMS Prop 2.5): ``Pr[q(out) ≤ max q − λ] ≤ |F|·exp(−ελ/(2Δ))``.

Sampling is done in log space with the Gumbel-max trick, so qualities of size 10^6·ε are fine.
For very large domains the caller passes the explicitly enumerated qualities plus a *tail*: ``tail_size``
(a Python ``int``, may exceed 2^63) solutions that all share ``tail_score``. The tail is one bucket of
log-weight ``ln(tail_size) + s·ε·tail_score/Δ`` (BNS-spec "structured samplers"); index ``-1`` means
"some member of the tail", and the caller draws the member uniformly.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ldp.core.errors import require_epsilon, require_positive_finite, require_probability

__all__ = [
    "TAIL",
    "exponential_log_weights",
    "exponential_log_probabilities",
    "exponential_probabilities",
    "exponential_mechanism",
    "gumbel_argmax",
    "exponential_utility_bound",
]

TAIL: int = -1
"""Index returned when the sampled solution lies in the implicit tail bucket."""


def _check_tail(tail_size: int) -> int:
    if isinstance(tail_size, bool) or int(tail_size) != tail_size or tail_size < 0:
        raise ValueError(f"tail_size must be an integer ≥ 0; got tail_size={tail_size!r}")
    return int(tail_size)


def exponential_log_weights(
    scores: ArrayLike,
    epsilon: float,
    sensitivity: float = 1.0,
    exponent_scale: float = 0.5,
    tail_size: int = 0,
    tail_score: float = 0.0,
) -> np.ndarray:
    """Unnormalised log-weights ``s·ε·q/Δ``; if ``tail_size > 0`` the tail bucket is appended last."""
    eps = require_epsilon(epsilon)
    sens = require_positive_finite("sensitivity", sensitivity)
    scale = require_positive_finite("exponent_scale", exponent_scale)
    q = np.asarray(scores, dtype=np.float64).ravel()
    if q.size and not np.all(np.isfinite(q)):
        raise ValueError("scores must be finite")
    tail = _check_tail(tail_size)
    if q.size == 0 and tail == 0:
        raise ValueError("the exponential mechanism needs at least one candidate (scores empty, tail_size=0)")
    lw = scale * eps * q / sens
    if tail > 0:
        lw = np.append(lw, math.log(tail) + scale * eps * float(tail_score) / sens)
    return lw


def _logsumexp(lw: np.ndarray) -> float:
    mx = float(np.max(lw))
    return mx + math.log(float(np.sum(np.exp(lw - mx))))


def exponential_log_probabilities(
    scores: ArrayLike,
    epsilon: float,
    sensitivity: float = 1.0,
    exponent_scale: float = 0.5,
    tail_size: int = 0,
    tail_score: float = 0.0,
) -> np.ndarray:
    """Exact log output probabilities (the definition), for tests and exact privacy checks.

    With a tail, the last entry is the log-probability of the whole tail bucket.
    """
    lw = exponential_log_weights(scores, epsilon, sensitivity, exponent_scale, tail_size, tail_score)
    return lw - _logsumexp(lw)


def exponential_probabilities(
    scores: ArrayLike,
    epsilon: float,
    sensitivity: float = 1.0,
    exponent_scale: float = 0.5,
    tail_size: int = 0,
    tail_score: float = 0.0,
) -> np.ndarray:
    """Exact output probabilities ``exp(log_probabilities)``."""
    return np.exp(
        exponential_log_probabilities(scores, epsilon, sensitivity, exponent_scale, tail_size, tail_score)
    )


def gumbel_argmax(log_weights: ArrayLike, rng: np.random.Generator) -> int:
    """Sample index i with probability ∝ exp(log_weights[i]) (Gumbel-max trick; exact)."""
    lw = np.asarray(log_weights, dtype=np.float64)
    return int(np.argmax(lw + rng.gumbel(size=lw.shape)))


def exponential_mechanism(
    scores: ArrayLike,
    epsilon: float,
    rng: np.random.Generator,
    sensitivity: float = 1.0,
    exponent_scale: float = 0.5,
    tail_size: int = 0,
    tail_score: float = 0.0,
) -> int:
    """Sample from the exponential mechanism; ``(2·exponent_scale·ε)``-DP (ε-DP by default).

    Returns an index into ``scores``, or ``TAIL`` (−1) if the tail bucket was chosen.
    Source: McSherry–Talwar, as quoted in BNS §2.5.2 and KMMS Prop 2.5.
    """
    lw = exponential_log_weights(scores, epsilon, sensitivity, exponent_scale, tail_size, tail_score)
    i = gumbel_argmax(lw, rng)
    n_explicit = np.asarray(scores).size
    return TAIL if i >= n_explicit else i


def exponential_utility_bound(
    n_candidates: int | float, epsilon: float, beta: float, sensitivity: float = 1.0
) -> float:
    """λ = (2Δ/ε)·ln(|F|/β): ``Pr[q(out) ≤ max q − λ] ≤ β`` (KMMS Prop 2.5). ``n_candidates`` may be a big int."""
    eps = require_epsilon(epsilon)
    require_probability("beta", beta, high=0.5)
    return 2.0 * sensitivity / eps * (math.log(n_candidates) + math.log(1.0 / beta))
