"""Why the Harmonic Sieve (HRS Theorems 1.5 / 6.1 / 6.2) is not run, with its cost computed and the one
quantity it rests on measured.

HRS release parity counting queries, P(q, u) = ⟨q, u⟩ mod 2 on U = Q = {0,1}^d, G uniform, by Theorem 3.9
with Jackson's Harmonic Sieve (HS) [Jac97] as the threshold learner. The seed gives only the shape
b = poly(d, n, 1/γ)·log(1/β) (Thm 6.2) and the fact that HS queries only g(q) = 2^d·f(q)·D'[q]. HS itself
(boost-by-majority F1 over a Kushilevitz–Mansour-style weak learner that *estimates* Fourier coefficients
of g from uniformly random evaluation queries) is published and fully specified in [Jac97], which is not
among the project's seeds, so its own constants cannot be checked here. What can be computed from the
seed alone already decides the question:

1. **The weak learner's target advantage** (the discriminator bound, the fact HS's analysis starts from):
   f_t^D(q) = 1{f^D(q) ≥ t} ⇔ S(q) = Σ_{u∈D} χ_u(q) ≤ n(1 − 2t), so in ±1 form F = sign(m − S) with a
   half-odd m chosen so that |m − S| ≥ 1 everywhere; then E_G[F·(m − S)] ≥ 1 for every distribution G,
   hence some parity χ_u of D (or the constant) has |E_G[F·χ]| ≥ θ = 1/(n + |m|) ≥ 1/(2n + 1).
   :func:`discriminator_advantage` gives θ; :func:`max_parity_correlation` measures the true maximum
   exactly (Walsh–Hadamard transform over all 2^d queries) for the tests. The reduction feeds HS the
   subsampled size n' = 4410·ln|Q|/α² (HRS eq. 6), so θ ≈ 1/(2n').
2. **One coefficient estimate** of g to ±θ/2 from random evaluation queries with |g·χ| ≤ L needs
   m = ⌈8L²·ln(2/β')/θ²⌉ calls (Hoeffding, the way KM sizes it); any estimator needs Ω(1/θ²). With the
   most favourable L = 1 this is a *lower bound* on HS's calls per weak-learner step (:func:`sieve_cost`).
3. **The distinct-query cap.** Through HRS's threshold oracle (Fig. 1, one A_q per distinct q) a learner
   pays for distinct queries only, at most |Q| = 2^d, and answering all 2^d queries once is *itself* a
   release with γ = 0 (h(q) = A_q). So HS can only beat the trivial release where its distinct queries are
   below 2^d, i.e. where m < 2^d (:func:`sieve_crossover_d`): d ≥ 50 at α = 0.3, β = γ = 0.1 — and
   there one coefficient estimate alone is ~6·10^14 oracle calls, before KM's d levels of buckets and
   F1's Θ(ln(1/γ')/θ²) boosting stages. At d = 8 one estimate is 1.7·10^13 calls, and all of them land
   on the 256 queries that the trivial release answers anyway.

Local users (KLNRS Lemma 4.3 through ``ldp.sq.bounds.users_per_query``, τ = α/21 for HRS Lemma 4.3's
event Γ): min(m, 2^d) distinct queries × n_0 each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldp.core.errors import require_epsilon, require_integer, require_probability
from ldp.core.fourier import walsh_hadamard
from ldp.sq.bounds import users_per_query

__all__ = [
    "parity_counts",
    "discriminator_advantage",
    "max_parity_correlation",
    "coefficient_samples",
    "SieveCost",
    "sieve_cost",
    "sieve_crossover_d",
]


def _index(rows: np.ndarray) -> np.ndarray:
    """Row x ∈ {0,1}^d ↦ Σ_i x_i·2^i, so popcount(u & q) = ⟨q, u⟩ as ``walsh_hadamard`` needs."""
    r = np.asarray(rows, dtype=np.int64)
    return r @ (1 << np.arange(r.shape[1], dtype=np.int64))


def parity_counts(db: np.ndarray) -> np.ndarray:
    """f^D(q) = (1/n)·Σ_u ⟨q, u⟩ mod 2 for every q ∈ {0,1}^d, indexed by Σ q_i 2^i.

    Exact identity used: f^D = 1/2 − (1/(2n))·Σ_u c_u χ_u(q) = 1/2 − WHT(c)/(2n), c the record histogram.
    """
    u = np.asarray(db, dtype=np.uint8)
    if u.ndim != 2 or u.shape[0] == 0:
        raise ValueError(f"db must be a non-empty (n, d) 0/1 array; got shape {u.shape}")
    d = u.shape[1]
    counts = np.bincount(_index(u), minlength=1 << d).astype(np.int64)
    return 0.5 - walsh_hadamard(counts) / (2.0 * u.shape[0])


def _threshold_sign(n: int, t: float) -> float:
    """m: the half-odd-integer level with F = sign(m − S) = 2·f_t^D − 1, S ∈ {−n, −n+2, …, n}."""
    level = n * (1.0 - 2.0 * t)  # f ≥ t ⇔ S ≤ level
    top = math.floor(level + 1e-12)
    if (top - n) % 2:  # S has the parity of n: the largest attainable S ≤ level
        top -= 1
    return top + 1.0  # strictly between attainable values: |m − S| ≥ 1


def discriminator_advantage(n: int, t: float) -> float:
    """θ = 1/(n + |m|): some parity (or the constant) has |E_G[F·χ]| ≥ θ under EVERY distribution G.

    Proof (module docstring, item 1): E_G[F·(m − S)] = E_G|m − S| ≥ 1 and m − S = m·χ_∅ − Σ_{u∈D} χ_u.
    """
    nn = require_integer("n", n, 1)
    if not 0.0 <= t <= 1.0:
        raise ValueError(f"t must lie in [0, 1]; got t={t!r}")
    return 1.0 / (nn + abs(_threshold_sign(nn, t)))


def max_parity_correlation(db: np.ndarray, t: float, weights: np.ndarray | None = None) -> float:
    """max_A |E_G[F(q)·χ_A(q)]| over all 2^d parities, F = 2·f_t^D − 1, exactly (one WHT).

    ``weights``: G as a probability vector over the 2^d queries (default uniform). Used to check
    :func:`discriminator_advantage` (a lower bound for this maximum under every G).
    """
    f = parity_counts(db)
    n = np.asarray(db).shape[0]
    # S ≤ level ⇔ f ≥ t, decided on the integer S = n − 2·n·f to avoid float ties
    s = np.rint(n - 2.0 * n * f)
    big_f = np.where(s <= n * (1.0 - 2.0 * t) + 1e-9, 1.0, -1.0)
    g = np.full(f.shape, 1.0 / f.size) if weights is None else np.asarray(weights, dtype=np.float64)
    if g.shape != f.shape or np.any(g < 0) or not math.isclose(float(g.sum()), 1.0, rel_tol=1e-9):
        raise ValueError(f"weights must be a probability vector of length 2^d = {f.size}")
    return float(np.abs(walsh_hadamard(big_f * g)).max())


def coefficient_samples(theta: float, beta: float, bound: float = 1.0) -> int:
    """⌈8L²·ln(2/β)/θ²⌉: uniform evaluation queries that estimate one Fourier coefficient E[g·χ] of a
    function with |g·χ| ≤ L to ±θ/2 with probability ≥ 1 − β (Hoeffding: 2·(2L)²·ln(2/β)/(θ/2)²/4)."""
    th = require_probability("theta", theta)
    b = require_probability("beta", beta)
    if not bound >= 1.0:
        raise ValueError(f"bound L must be ≥ 1 (g = 2^d·f·D' has E|g| = 1 on ±1 f); got {bound!r}")
    return math.ceil(8.0 * bound**2 * math.log(2.0 / b) / th**2)


@dataclass(frozen=True)
class SieveCost:
    """Lower bounds on the Harmonic Sieve inside HRS PrivLearn (Thm 3.9) at one parameter point.

    ``n_prime`` (eq. 6), ``theta`` (worst-case discriminator advantage 1/(2n'+1)), ``calls_per_estimate``
    (one coefficient of g to ±θ/2 at confidence 1 − β', L = 1), ``distinct_queries`` = min(calls, 2^d)
    (the threshold oracle's cap), ``users_sieve`` = distinct × n_0(τ = α/21) through KLNRS Lemma 4.3,
    ``users_all_queries`` = 2^d × n_0: the trivial release that answers every query once.
    """

    d: int
    n_prime: float
    theta: float
    beta_prime: float
    calls_per_estimate: int
    distinct_queries: int
    users_per_query: int
    users_sieve: int
    users_all_queries: int


def sieve_cost(d: int, alpha: float, beta: float, gamma: float, epsilon: float) -> SieveCost:
    """HS's inner loop, as lower bounds, at U = Q = {0,1}^d, G uniform (HRS Thm 6.1 through Thm 3.9).

    n' = 4410·ln|Q|/α² (HRS eq. 6, ln|Q| = d·ln 2, as ``ldp.central.hrs.paper_parameters``), θ = 1/(2n'+1),
    β' = β/(6k) with k = ⌈3/α⌉ (eq. 6), τ = α/21 (TO(D, α/7) needs |N_q| < α/21, Lemma 4.3),
    users through ``users_per_query(1, ε, τ, β, "pm_rr", distinct)``.
    """
    dd = require_integer("d", d, 1)
    a = require_probability("alpha", alpha, high=0.5)
    b = require_probability("beta", beta, high=0.5)
    require_probability("gamma", gamma, high=0.5)
    eps = require_epsilon(epsilon)
    k = math.ceil(3 / a)
    n_prime = 4410.0 * dd * math.log(2.0) / a**2
    theta = 1.0 / (2.0 * n_prime + 1.0)
    beta_prime = b / (6 * k)
    calls = coefficient_samples(theta, beta_prime)
    size_q = 1 << dd
    distinct = min(calls, size_q)
    n0 = users_per_query(1.0, eps, a / 21, b, "pm_rr", distinct)
    n0_all = users_per_query(1.0, eps, a / 21, b, "pm_rr", size_q)
    return SieveCost(dd, n_prime, theta, beta_prime, calls, distinct, n0, distinct * n0, size_q * n0_all)


def sieve_crossover_d(alpha: float, beta: float, gamma: float, epsilon: float, d_max: int = 200) -> int:
    """The smallest d at which one HS coefficient estimate needs fewer calls than |Q| = 2^d: the first d
    where the Sieve could touch fewer queries than the trivial all-queries release. Raises ``ValueError``
    if there is none up to ``d_max``."""
    for d in range(1, require_integer("d_max", d_max, 1) + 1):
        if sieve_cost(d, alpha, beta, gamma, epsilon).calls_per_estimate < (1 << d):
            return d
    raise ValueError(f"no crossover up to d_max={d_max}")
