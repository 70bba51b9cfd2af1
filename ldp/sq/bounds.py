"""Sample-size bounds for SQ oracles: explicit constants for KLNRS Lemmas 4.2/4.3 and SuLQ.

Every function returns the number of users (data points) that makes *all* ``queries`` answers of
one SQ step fall within τ of E[g] with probability ≥ 1 − β (union bound: β/queries each), for a
query g: Z → [−b, b]. Pure functions, no I/O. Derivations: docs/sq.md.

Local, ±b randomized response (``pm_rr``): reports are i.i.d. in {−B, +B}, B = b(e^ε+1)/(e^ε−1)
(as realized on the 53-bit grid: ``pm_magnitude``), with mean E[g] up to 3B·2^-53 (subtracted from
τ). Hoeffding: Pr[|mean − E g| ≥ τ] ≤ 2·exp(−nτ²/(2B²)), so

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
(and log(1/β) read as ln(2t/β)). This is the bound of the real-valued mechanism; the float
``laplace`` randomizer is not requestable by users (Mironov's attack), so the local SQ oracle uses:

Local, discrete Laplace (``discrete_laplace``, Claim 4.1 on a grid r = b/c): a report is
Y = r·clamp(k + Z, −W, W) with k the randomized rounding of g/r and Z from an integer table close
to the two-sided geometric π′ of ratio α′ = e^{−a}, a = ε(1−η)/(2c). The Laplace count still
applies, with a slightly larger ν² and τ reduced by a tiny shift (``discrete_laplace_users``):
(i) the geometric's MGF is dominated by Laplace's at scale λ′ = r/a = 2b/(ε(1−η)): ln E e^{tZ} =
−ln(1 − sinh²(t/2)/sinh²(a/2)) ≤ −ln(1 − t²/a²) because sinh(x)/x increases; (ii) the rounding
r(k − g/r) is, given g, confined to an interval of length r with mean within r·2^-54 of 0
(Hoeffding's lemma: variance proxy r²/4), so ν² = b² + r²/4 + (2C²/(C²−1))λ′², α = Cλ′;
(iii) clamping to [L, H] = [−rW, rW] ∋ E g: for s > 0, Y − E g ≤ X − E g unless X < L (X the
unclamped report), and there e^{s(L−Eg)} − e^{s(X−Eg)} ≤ s(L − X), so E e^{s(Y−Eg)} ≤
E e^{s(X−Eg)} + s·E(L − X)^+ ≤ E e^{s(X−Eg)} + s·r·α′^{W−c+1}/(1−α′²) (s < 0 alike);
(iv) the table differs from π′ (tails lumped at ±T) by ≤ 1.01·2^-64 per cell, which changes
E e^{srZ} by at most s·r(2T+1)²·1.01·2^-64·e^{aT/C} + s·r·α′^{T+1}/(1−α′²) for |s| ≤ 1/α.
Each additive s·D is a mean shift: with e^q + sD ≤ e^{q+sD}, E e^{s(Y−Eg)} ≤ e^{s²ν²/2 + sD} for
D = the sum of the shifts, and the Chernoff bound of the Laplace case holds with τ′ = τ − D:

    n_0 = ⌈2·ln(2t/β)·max(ν²/τ′², α/τ′)⌉       (D ≈ (b/ε)e^{−20}: within 0.1 % of the Laplace n_0).

Central (SuLQ, Blum–Dwork–McSherry–Nissim 2005): a curator with n records answers each of at most
T queries with mean + Lap(2bT/(nε)) (the sum has sensitivity 2b under replace-one neighbours,
each query gets ε/T, basic composition). Split β in half: sampling error ≤ b·√(2 ln(4t/β)/n)
(Hoeffding, β/2 over t queries) and noise ≤ (2bT/(nε))·ln(2t/β) (Laplace tail e^{−x/λ}, β/2
over t queries); the smallest n whose sum is ≤ τ solves a quadratic in 1/√n:

    n_c ≈ max(2bT·ln(2t/β)/(ετ), 2b²·ln(4t/β)/τ²)   (exact form in ``central_users_needed``).
"""

from __future__ import annotations

import math

from ldp.core.errors import ParameterError, require_epsilon, require_integer, require_positive_finite, require_probability

__all__ = [
    "LAPLACE_MGF_C",
    "pm_magnitude",
    "hoeffding_users",
    "pm_rr_users",
    "laplace_subexponential",
    "laplace_users",
    "discrete_laplace_subexponential",
    "discrete_laplace_users",
    "users_per_query",
    "central_users_needed",
    "central_noise_scale",
    "LOCAL_RANDOMIZERS",
]

LAPLACE_MGF_C = 4.0
LOCAL_RANDOMIZERS = ("pm_rr", "discrete_laplace")  # what a LocalSQOracle may request from users
PAPER_RANDOMIZERS = ("laplace",)  # bounds of the paper's real-valued mechanism, for comparison only


def _bound_parameters(bound: float, tolerance: float, beta: float, queries: int) -> tuple[float, float, float, int]:
    """(b, τ, β, t) checked with the common validators of ``ldp.core.errors``."""
    b = require_positive_finite("bound b", bound)
    tau = require_positive_finite("tolerance τ", tolerance)
    beta = require_probability("failure probability β", beta)
    return b, tau, beta, require_integer("queries", queries, 1)


def pm_magnitude(bound: float, epsilon: float) -> float:
    """B: the report magnitude of ±b randomized response as realized by ``pm_rr``,
    b·2^53/(T_hi − T_lo) — b(e^ε+1)/(e^ε−1) up to 2^-52 relative (never below it), finite at every ε."""
    from ldp.core.plus_minus import PlusMinusRandomizedResponse  # local import: bounds stays light

    return PlusMinusRandomizedResponse(require_epsilon(epsilon), require_positive_finite("bound b", bound)).magnitude


def hoeffding_users(report_bound: float, tolerance: float, beta: float, queries: int = 1) -> int:
    """⌈2B²·ln(2t/β)/τ²⌉: i.i.d. reports in [−B, B] whose means are all within τ w.p. ≥ 1−β."""
    big_b, tau, beta, t = _bound_parameters(report_bound, tolerance, beta, queries)
    return max(1, math.ceil(2.0 * big_b**2 * math.log(2.0 * t / beta) / tau**2))


def pm_rr_users(bound: float, epsilon: float, tolerance: float, beta: float, queries: int = 1) -> int:
    """n_0 for ±b randomized response (Hoeffding on reports in ±B), with τ reduced by the
    3B·2^-53 by which the 53-bit threshold can move a report's mean."""
    big_b = pm_magnitude(bound, epsilon)
    tau = require_positive_finite("tolerance τ", tolerance) - 3.0 * big_b * 2.0**-53
    if tau <= 0:
        raise ParameterError(f"pm_rr at ε={epsilon:g} cannot reach τ={tolerance:g}: below its 2^-53 resolution")
    return hoeffding_users(big_b, tau, beta, queries)


def laplace_subexponential(bound: float, epsilon: float, c: float = LAPLACE_MGF_C) -> tuple[float, float]:
    """(ν², α) with E e^{s(Y − E g)} ≤ e^{s²ν²/2} for |s| ≤ 1/α, Y = g(z) + Lap(2b/ε)."""
    b = require_positive_finite("bound b", bound)
    lam = 2.0 * b / require_epsilon(epsilon)
    return b**2 + (2.0 * c**2 / (c**2 - 1.0)) * lam**2, c * lam


def laplace_users(bound: float, epsilon: float, tolerance: float, beta: float, queries: int = 1) -> int:
    """n_0 for the Laplace randomizer of KLNRS Claim 4.1: ⌈2 ln(2t/β)·max(ν²/τ², α/τ)⌉."""
    b, tau, beta, t = _bound_parameters(bound, tolerance, beta, queries)
    nu2, alpha = laplace_subexponential(b, epsilon)
    return max(1, math.ceil(2.0 * math.log(2.0 * t / beta) * max(nu2 / tau**2, alpha / tau)))


def discrete_laplace_subexponential(bound: float, epsilon: float, steps: int | None = None, c: float = LAPLACE_MGF_C) -> tuple[float, float, float]:
    """(ν², α, D) for Y = the ``discrete_laplace`` report (module doc): E e^{s(Y − E g)} ≤
    e^{s²ν²/2 + |s|·D} for |s| ≤ 1/α."""
    from ldp.core.laplace import DiscreteLaplaceRandomizer  # local import: bounds stays light

    b = require_positive_finite("bound b", bound)
    R = DiscreteLaplaceRandomizer(require_epsilon(epsilon), b, steps)
    lam, r, t = R.noise_scale, R.grid, R.table_half_width
    a = r / lam
    nu2 = b**2 + r**2 / 4.0 + (2.0 * c**2 / (c**2 - 1.0)) * lam**2
    clamp = math.exp(-a * (R.window - R.c + 1)) / -math.expm1(-2.0 * a)
    lump = math.exp(-a * (t + 1)) / -math.expm1(-2.0 * a)
    table = (2 * t + 1) ** 2 * 1.01 * 2.0**-64 * math.exp(a * t / c)
    return nu2, c * lam, r * (2.0**-54 + clamp + lump + table)


def discrete_laplace_users(bound: float, epsilon: float, tolerance: float, beta: float, queries: int = 1, steps: int | None = None) -> int:
    """n_0 for ``discrete_laplace`` (the exact, grid version of Claim 4.1; module doc):
    ⌈2 ln(2t/β)·max(ν²/τ′², α/τ′)⌉ with τ′ = τ − D."""
    b, tau, beta, t = _bound_parameters(bound, tolerance, beta, queries)
    nu2, alpha, shift = discrete_laplace_subexponential(b, epsilon, steps)
    tau_eff = tau - shift
    if tau_eff <= 0:
        raise ParameterError(f"discrete_laplace at ε={epsilon:g}, b={b:g} cannot reach τ={tau:g}: its clamped tail shifts reports by up to {shift:.3g}")
    return max(1, math.ceil(2.0 * math.log(2.0 * t / beta) * max(nu2 / tau_eff**2, alpha / tau_eff)))


def users_per_query(
    bound: float, epsilon: float, tolerance: float, beta: float, randomizer: str = "pm_rr", queries: int = 1
) -> int:
    """Users each query needs (KLNRS Lemma 4.3 with explicit constants): with n_0 fresh users per
    query, each applying the ε-local ``randomizer`` ("pm_rr" or "discrete_laplace"; "laplace",
    the paper's real-valued mechanism, for comparison) to g ∈ [−b, b], all ``queries`` averages
    are within τ of E[g] with probability ≥ 1 − β."""
    if randomizer == "pm_rr":
        return pm_rr_users(bound, epsilon, tolerance, beta, queries)
    if randomizer == "discrete_laplace":
        return discrete_laplace_users(bound, epsilon, tolerance, beta, queries)
    if randomizer == "laplace":
        return laplace_users(bound, epsilon, tolerance, beta, queries)
    raise ParameterError(f"randomizer must be one of {LOCAL_RANDOMIZERS + PAPER_RANDOMIZERS}, got {randomizer!r}")


def central_noise_scale(bound: float, epsilon: float, users: int, total_queries: int) -> float:
    """λ = 2bT/(nε): Laplace scale on the mean of n records, ε/T per query (SuLQ)."""
    return 2.0 * float(bound) * total_queries / (users * require_epsilon(epsilon))


def central_users_needed(
    bound: float, epsilon: float, tolerance: float, beta: float, queries: int = 1, total_queries: int | None = None
) -> int:
    """Smallest n with b√(2 ln(4t/β)/n) + (2bT/(nε))·ln(2t/β) ≤ τ (sampling + Laplace, β/2 each)."""
    b, tau, beta, t = _bound_parameters(bound, tolerance, beta, queries)
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
