"""The Large Margin Mechanism (CHS Algorithm 1) and report-noisy-max, for private maximisation.

Setting (CHS Def. 2): scores ``f(i, D)`` for items i of a universe of size K, each (1/n)-Lipschitz in the
database D of n records (replace-one neighbours). **CHS calls the privacy parameter α; here it is
``epsilon``** to keep α for accuracy elsewhere in ``ldp.central``.

LMM(ε, δ) (CHS Algorithm 1; T(r), t(r) reconstructed in the reference spec §A2, noise 3/ε, 6/ε, 12/ε):

    m  = f^(1) + Lap(3/ε)/n                                  # noisy max value (ε/3)
    G ~ Lap(6/ε); Z_ℓ ~ Lap(12/ε)                            # sparse vector (ε/3)
    ℓ = first ℓ < K with  m − f^(ℓ+1) > (Z_ℓ + G)/n + T(ℓ),  else ℓ = K
    return ExpMech over the top-ℓ items, Pr ∝ exp(n·ε·f/6)    # ε/3

Privacy: (ε, δ)-DP (CHS Theorem 2). Utility (Theorem 3): under the (ℓ*, γ*)-margin condition with
γ* = 21·ln(3/η)/(nε) + T(ℓ*), w.p. ≥ 1−η the output has f ≥ f^(1) − 6·ln(2ℓ*/η)/(nε): no dependence on K.

Huge universes: pass the explicit scores plus a tail of ``tail_size`` items sharing ``tail_score``.
The margin scan is exact up to ``max_steps`` positions; if it reaches that cap without a pass, it
falls back to ℓ = K (exponential mechanism over the whole universe). The scan beyond the cap would pass
with probability that decays like cap^(−1.5) (reference spec §A2); the result records ``truncated=True``
so experiments can report it. Universes with K ≤ max_steps + 1 are handled exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ldp.central.laplace_mechanism import laplace_cdf
from ldp.core.errors import require_epsilon, require_integer, require_probability
from ldp.core.exponential_mechanism import TAIL, exponential_mechanism, exponential_probabilities

__all__ = [
    "lmm_t",
    "lmm_T",
    "LMMOutput",
    "large_margin_mechanism",
    "lmm_distribution",
    "report_noisy_max",
    "report_noisy_max_distribution",
    "lmm_theorem3_error",
    "lmm_theorem3_margin",
]


def lmm_t(r: ArrayLike, n: int, epsilon: float, delta: float) -> np.ndarray:
    """t(r) = (6/n)·(1 + ln(3r/δ)/ε) (CHS Algorithm 1, reconstructed; spec §A2)."""
    r_ = np.asarray(r, dtype=np.float64)
    return 6.0 / n * (1.0 + np.log(3.0 * r_ / delta) / epsilon)


def lmm_T(r: ArrayLike, n: int, epsilon: float, delta: float) -> np.ndarray:
    """T(r) = (3/(nε))ln(3/(2δ)) + (6/(nε))ln(3/δ) + (12/(nε))ln(3r(r+1)/δ) + t(r) (CHS Alg. 1).

    Check value: n·T(1) = 414.9 at ε = 1, δ = 1e-6.
    """
    r_ = np.asarray(r, dtype=np.float64)
    ne = n * epsilon
    return (
        3.0 / ne * math.log(3.0 / (2.0 * delta))
        + 6.0 / ne * math.log(3.0 / delta)
        + 12.0 / ne * (np.log(3.0 * r_) + np.log(r_ + 1.0) - math.log(delta))
        + lmm_t(r_, n, epsilon, delta)
    )


@dataclass(frozen=True)
class LMMOutput:
    """Selected item (index into the explicit scores, or ``TAIL``), the chosen ℓ, and whether the scan hit its cap."""

    index: int
    ell: int
    truncated: bool


def _sorted_values(fs: np.ndarray, tail_size: int, tail_score: float, positions: np.ndarray) -> np.ndarray:
    """Values of the merged descending order (explicit fs, then the tail block at its place)."""
    p = int(np.sum(fs >= tail_score)) if tail_size > 0 else fs.size
    out = np.empty(positions.size)
    a = positions < p
    out[a] = fs[positions[a]]
    end = p + tail_size
    if end > 2**62:  # huge implicit tail: every scanned position beyond p lies inside it
        out[positions >= p] = tail_score
        return out
    b = (positions >= p) & (positions < end)
    out[b] = tail_score
    c = positions >= end
    out[c] = fs[positions[c] - tail_size]
    return out


def large_margin_mechanism(
    scores: ArrayLike,
    n: int,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    tail_size: int = 0,
    tail_score: float = 0.0,
    max_steps: int = 1 << 20,
    chunk: int = 4096,
) -> LMMOutput:
    """Run LMM(ε, δ) (CHS Algorithm 1) on scores ``f(i, D)`` that are (1/n)-Lipschitz. (ε,δ)-DP (CHS Thm 2)."""
    nn, eps, dlt = require_integer("n", n, 1), require_epsilon(epsilon), require_probability("delta", delta)
    f = np.asarray(scores, dtype=np.float64).ravel()
    if tail_size < 0 or int(tail_size) != tail_size:
        raise ValueError(f"tail_size must be an integer ≥ 0; got tail_size={tail_size!r}")
    tail = int(tail_size)
    K = f.size + tail
    if K == 0:
        raise ValueError("LMM needs a non-empty universe")
    order = np.argsort(-f, kind="stable")
    fs = f[order]
    top = max(float(fs[0]) if fs.size else -math.inf, tail_score if tail > 0 else -math.inf)
    m_noisy = top + float(rng.laplace(0.0, 3.0 / eps)) / nn
    G = float(rng.laplace(0.0, 6.0 / eps))
    ell = K
    truncated = False
    limit = min(K - 1, max_steps)
    start = 1
    while start <= limit:
        stop = min(limit, start + chunk - 1)
        ells = np.arange(start, stop + 1, dtype=np.int64)
        nxt = _sorted_values(fs, tail, tail_score, ells)  # f^(ℓ+1) sits at 0-based position ℓ
        Z = rng.laplace(0.0, 12.0 / eps, size=ells.size)
        passed = (m_noisy - nxt) > (Z + G) / nn + lmm_T(ells.astype(np.float64), nn, eps, dlt)
        if np.any(passed):
            ell = int(ells[int(np.argmax(passed))])
            break
        start = stop + 1
        chunk = min(chunk * 2, 1 << 18)
    else:
        truncated = K - 1 > max_steps
    # exponential mechanism at ε/3 over the top-ℓ items: Pr ∝ exp(n·ε·f/6)
    p = int(np.sum(fs >= tail_score)) if tail > 0 else fs.size
    n_first = min(ell, p)
    n_tail = min(max(ell - p, 0), tail)
    n_rest = max(ell - p - tail, 0)
    expl_pos = np.concatenate([np.arange(n_first), p + np.arange(n_rest)]).astype(np.int64)
    j = exponential_mechanism(
        nn * fs[expl_pos], eps / 3.0, rng, tail_size=n_tail, tail_score=nn * tail_score
    )
    idx = TAIL if j == TAIL else int(order[expl_pos[j]])
    return LMMOutput(idx, ell, truncated)


def _w_density(w: np.ndarray, b1: float, b2: float) -> np.ndarray:
    """Density of Lap(b1) − Lap(b2) for b1 ≠ b2."""
    return (b1 * np.exp(-np.abs(w) / b1) - b2 * np.exp(-np.abs(w) / b2)) / (2.0 * (b1 * b1 - b2 * b2))


def lmm_distribution(
    scores: ArrayLike,
    n: int,
    epsilon: float,
    delta: float,
    T_func=None,
    grid_points: int = 400_001,
) -> tuple[np.ndarray, np.ndarray]:
    """Output distribution of LMM on a small explicit universe, by 1-D quadrature (error ≲ 1e-9).

    Returns ``(P[I = i] for each item, P[ℓ = r] for r = 1..K)``. With W = Z − G, the test at ℓ passes
    iff Z_ℓ < W + n(f^(1) − f^(ℓ+1) − T(ℓ)); given W the Z_ℓ are independent. ``T_func`` replaces T(r)
    (tests use it to build a deliberately broken variant).
    """
    nn, eps, dlt = require_integer("n", n, 1), require_epsilon(epsilon), require_probability("delta", delta)
    f = np.asarray(scores, dtype=np.float64).ravel()
    K = f.size
    order = np.argsort(-f, kind="stable")
    fs = f[order]
    Tf = T_func if T_func is not None else (lambda r: lmm_T(r, nn, eps, dlt))
    b1, b2, bz = 3.0 / eps, 6.0 / eps, 12.0 / eps
    w = np.linspace(-80.0 * b2, 80.0 * b2, grid_points)
    dw = w[1] - w[0]
    dens = _w_density(w, b1, b2) * dw
    dens /= dens.sum()
    ells = np.arange(1, K, dtype=np.float64)
    c = nn * (fs[0] - fs[1:] - Tf(ells))
    p_ell = np.zeros(K)
    survive = np.ones_like(w)
    for r in range(K - 1):
        pr = laplace_cdf(w + c[r], bz)
        p_ell[r] = float(np.sum(dens * survive * pr))
        survive = survive * (1.0 - pr)
    p_ell[K - 1] = float(np.sum(dens * survive))
    p_item_sorted = np.zeros(K)
    for r in range(1, K + 1):
        if p_ell[r - 1] > 0:
            p_item_sorted[:r] += p_ell[r - 1] * exponential_probabilities(nn * fs[:r], eps / 3.0)
    p_item = np.zeros(K)
    p_item[order] = p_item_sorted
    return p_item, p_ell


def lmm_theorem3_margin(ell_star: int, n: int, epsilon: float, delta: float, eta: float) -> float:
    """γ* = (21/(nε))·ln(3/η) + T(ℓ*) (CHS Theorem 3)."""
    return 21.0 / (n * epsilon) * math.log(3.0 / eta) + float(lmm_T(ell_star, n, epsilon, delta))


def lmm_theorem3_error(ell_star: int, n: int, epsilon: float, eta: float) -> float:
    """6·ln(2ℓ*/η)/(nε): the Theorem 3 error bound."""
    return 6.0 * math.log(2.0 * ell_star / eta) / (n * epsilon)


def report_noisy_max(scores: ArrayLike, n: int, epsilon: float, rng: np.random.Generator) -> int:
    """argmax_i f(i,D) + Lap(2/(εn)) (Bhaskar et al.; CHS §2.2 baseline). ε-DP for (1/n)-Lipschitz scores.

    Scale 2/(εn), not 1/(εn): the latter needs add/remove neighbours and monotone counts; replace-one
    neighbours can move two scores in opposite directions.
    """
    nn = require_integer("n", n, 1)
    eps = require_epsilon(epsilon)
    f = np.asarray(scores, dtype=np.float64).ravel()
    return int(np.argmax(f + rng.laplace(0.0, 2.0 / (eps * nn), size=f.shape)))


def report_noisy_max_distribution(
    counts: ArrayLike, scale: float, grid_points: int = 200_001
) -> np.ndarray:
    """Exact-by-quadrature P[argmax_i (c_i + Lap(scale)) = i] for a small vector of scores (in count units).

    P[i wins] = ∫ p(x − c_i) Π_{j≠i} F(x − c_j) dx.
    """
    c = np.asarray(counts, dtype=np.float64).ravel()
    x = np.linspace(c.min() - 60 * scale, c.max() + 60 * scale, grid_points)
    dx = x[1] - x[0]
    cdfs = np.stack([laplace_cdf(x - ci, scale) for ci in c])
    out = np.zeros(c.size)
    for i, ci in enumerate(c):
        dens = np.exp(-np.abs(x - ci) / scale) / (2 * scale)
        others = np.prod(np.delete(cdfs, i, axis=0), axis=0) if c.size > 1 else 1.0
        out[i] = float(np.sum(dens * others) * dx)
    return out / out.sum()
