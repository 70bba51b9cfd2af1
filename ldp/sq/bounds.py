"""Sample-size bounds for SQ oracles: explicit constants for KLNRS Lemmas 4.2/4.3 and SuLQ.

Every function returns the number of users (data points) that makes *all* ``queries`` answers of
one SQ step fall within τ of E[g] with probability ≥ 1 − β (union bound: β/queries each), for a
query g: Z → [−b, b]. Pure functions, no I/O. Derivations: docs/sq.md.

Local, ±b randomized response (``pm_rr``): reports are i.i.d. in {−B, +B}, B = b(e^ε+1)/(e^ε−1),
with mean E[g]. Hoeffding: Pr[|mean − E g| ≥ τ] ≤ 2·exp(−nτ²/(2B²)), so

    n_0 = ⌈2·B²·ln(2t/β)/τ²⌉                       (≈ 8·b²·ln(2t/β)/(ε²τ²) for small ε).

Local, Laplace (KLNRS Claim 4.1, Lemma 4.2): a report is Y = g(z) + η, η ~ Lap(λ), λ = 2b/ε.
The centred g(z) − E g lies in an interval of width 2b, so (Hoeffding's lemma) E e^{s(g−Eg)} ≤
e^{s²b²/2}. For the Laplace part E e^{sη} = 1/(1 − s²λ²); for |s| ≤ 1/(cλ), −ln(1−u) ≤ u/(1−u)
≤ u·c²/(c²−1) with u = s²λ² ≤ 1/c², so E e^{sη} ≤ exp(s²·(2c²/(c²−1))λ²/2). Y is therefore
sub-exponential with ν² = b² + (2c²/(c²−1))λ² and α = cλ (we take c = 4: ν² = b² + (32/15)λ²,
within 7% of the true variance b²+2λ² at most). Chernoff for the mean of n i.i.d. copies:
Pr[|Ȳ − E g| ≥ τ] ≤ 2·exp(−(n/2)·min(τ²/ν², τ/α)), hence

    n_0 = ⌈2·ln(2t/β)·max(ν²/τ², α/τ)⌉ = ⌈2·(1 + 128/(15ε²))·b²·ln(2t/β)/τ²⌉ when τ ≤ ν²/α,

i.e. the paper's C·log(1/β)·b²ε⁻²τ⁻² with C = 2(1 + 128/(15ε²))·ε² = 2ε² + 256/15 ≈ 17.1 + 2ε²
(and log(1/β) read as ln(2t/β)).

Central (SuLQ, Blum–Dwork–McSherry–Nissim 2005): a curator with n records answers each of at most
T queries with mean + Lap(2bT/(nε)) (the sum has sensitivity 2b under replace-one neighbours,
each query gets ε/T, basic composition). Split β in half: sampling error ≤ b·√(2 ln(4t/β)/n)
(Hoeffding, β/2 over t queries) and noise ≤ (2bT/(nε))·ln(2t/β) (Laplace tail e^{−x/λ}, β/2
over t queries); the smallest n whose sum is ≤ τ solves a quadratic in 1/√n:

    n_c ≈ max(2bT·ln(2t/β)/(ετ), 2b²·ln(4t/β)/τ²)   (exact form in ``central_users_needed``).
"""

from __future__ import annotations

import math

from ldp.core.errors import ParameterError, require_epsilon, require_positive_finite, require_probability

__all__ = [
    "LAPLACE_MGF_C",
    "pm_magnitude",
    "hoeffding_users",
    "pm_rr_users",
    "laplace_subexponential",
    "laplace_users",
    "users_per_query",
    "central_users_needed",
    "central_noise_scale",
    "LOCAL_RANDOMIZERS",
]

LAPLACE_MGF_C = 4.0
LOCAL_RANDOMIZERS = ("pm_rr", "laplace")


def _check(bound: float, tolerance: float, beta: float, queries: int) -> tuple[float, float, float, int]:
    b = require_positive_finite("bound b", bound)
    tau = require_positive_finite("tolerance τ", tolerance)
    beta = require_probability("failure probability β", beta)
    if isinstance(queries, bool) or int(queries) != queries or queries < 1:
        raise ParameterError(f"queries must be an integer ≥ 1, got {queries!r}")
    return b, tau, beta, int(queries)


def pm_magnitude(bound: float, epsilon: float) -> float:
    """B = b(e^ε+1)/(e^ε−1): the report magnitude of ±b randomized response."""
    eps = require_epsilon(epsilon)
    return float(bound) * (math.expm1(eps) + 2.0) / math.expm1(eps)


def hoeffding_users(report_bound: float, tolerance: float, beta: float, queries: int = 1) -> int:
    """⌈2B²·ln(2t/β)/τ²⌉: i.i.d. reports in [−B, B] whose means are all within τ w.p. ≥ 1−β."""
    big_b, tau, beta, t = _check(report_bound, tolerance, beta, queries)
    return max(1, math.ceil(2.0 * big_b**2 * math.log(2.0 * t / beta) / tau**2))


def pm_rr_users(bound: float, epsilon: float, tolerance: float, beta: float, queries: int = 1) -> int:
    """n_0 for ±b randomized response (Hoeffding on reports in ±B)."""
    return hoeffding_users(pm_magnitude(bound, epsilon), tolerance, beta, queries)


def laplace_subexponential(bound: float, epsilon: float, c: float = LAPLACE_MGF_C) -> tuple[float, float]:
    """(ν², α) with E e^{s(Y − E g)} ≤ e^{s²ν²/2} for |s| ≤ 1/α, Y = g(z) + Lap(2b/ε)."""
    b = require_positive_finite("bound b", bound)
    lam = 2.0 * b / require_epsilon(epsilon)
    return b**2 + (2.0 * c**2 / (c**2 - 1.0)) * lam**2, c * lam


def laplace_users(bound: float, epsilon: float, tolerance: float, beta: float, queries: int = 1) -> int:
    """n_0 for the Laplace randomizer of KLNRS Claim 4.1: ⌈2 ln(2t/β)·max(ν²/τ², α/τ)⌉."""
    b, tau, beta, t = _check(bound, tolerance, beta, queries)
    nu2, alpha = laplace_subexponential(b, epsilon)
    return max(1, math.ceil(2.0 * math.log(2.0 * t / beta) * max(nu2 / tau**2, alpha / tau)))


def users_per_query(
    bound: float, epsilon: float, tolerance: float, beta: float, randomizer: str = "pm_rr", queries: int = 1
) -> int:
    """Users each query needs (KLNRS Lemma 4.3 with explicit constants): with n_0 fresh users per
    query, each applying the ε-local ``randomizer`` ("pm_rr" or "laplace") to g ∈ [−b, b], all
    ``queries`` averages are within τ of E[g] with probability ≥ 1 − β."""
    if randomizer == "pm_rr":
        return pm_rr_users(bound, epsilon, tolerance, beta, queries)
    if randomizer == "laplace":
        return laplace_users(bound, epsilon, tolerance, beta, queries)
    raise ParameterError(f"randomizer must be one of {LOCAL_RANDOMIZERS}, got {randomizer!r}")


def central_noise_scale(bound: float, epsilon: float, users: int, total_queries: int) -> float:
    """λ = 2bT/(nε): Laplace scale on the mean of n records, ε/T per query (SuLQ)."""
    return 2.0 * float(bound) * total_queries / (users * require_epsilon(epsilon))


def central_users_needed(
    bound: float, epsilon: float, tolerance: float, beta: float, queries: int = 1, total_queries: int | None = None
) -> int:
    """Smallest n with b√(2 ln(4t/β)/n) + (2bT/(nε))·ln(2t/β) ≤ τ (sampling + Laplace, β/2 each)."""
    b, tau, beta, t = _check(bound, tolerance, beta, queries)
    eps = require_epsilon(epsilon)
    total = t if total_queries is None else int(total_queries)
    if total < t:
        raise ParameterError(f"total_queries T = {total} is less than this step's {t} queries")
    lin = b * math.sqrt(2.0 * math.log(4.0 * t / beta))  # coefficient of u = 1/√n
    quad = 2.0 * b * total * math.log(2.0 * t / beta) / eps  # coefficient of u²
    u = (-lin + math.sqrt(lin**2 + 4.0 * quad * tau)) / (2.0 * quad)
    n = max(1, math.ceil(1.0 / u**2))
    while lin / math.sqrt(n) + quad / n > tau:  # guard against rounding in the closed form
        n += 1
    return n
