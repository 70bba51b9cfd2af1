"""KLNRS Theorem 5.1, corrected: what non-adaptive queries (and non-interactive users) can learn
about MASKED-PARITY, computed exactly.

MASKED-PARITY_d: records z = (x, i, b), x uniform in {0,1}^d, i uniform in [0, d−1], b uniform;
label y = c_{r,a}(z) = (−1)^{⟨r,x⟩+a} if b = 0, (−1)^{r_i} if b = 1.

What the paper says, and why it is false
----------------------------------------
KLNRS Theorem 5.1: a non-adaptive SQ learner with advantage > 1/2 + 2^{−2d/3} and tolerance
τ ≥ 2^{−2d/3} needs more than 2^d − 1 queries. Its proof claims that a query's label-dependent part
"correlates beyond τ with at most one r", so that "each query can eliminate at most two (r, a)
pairs". That step is false for every τ < 1/4, and so is the theorem.

Write any query g(z, y) as E_c[g] = C_g + ⟨h_g, c⟩ with h_g(z) = (g(z,+1) − g(z,−1))/2. For
MASKED-PARITY,

    E_{r,a}[g] = C_g + B_g(r) + ½(−1)^a f̂_g(r),
    f_g(x) = E_i[h_g(x,i,0)],   f̂(r) = E_x[f(x)(−1)^{⟨r,x⟩}],   B_g(r) = ½ E_{x,i}[h_g(x,i,1)(−1)^{r_i}],

so E_{r,0}[g] − E_{r,1}[g] = f̂_g(r). A valid answer (within τ of the truth) can be consistent with
both (r, 0) and (r, 1) iff |f̂_g(r)| ≤ 2τ; the strongest adversary then answers their midpoint
C_g + B_g(r) (``run_against_adversary(adversary="midpoint")``), so a non-adaptive query set pins
a for target r iff some query has |f̂_g(r)| > 2τ. Parseval bounds how many r one query can
separate: Σ_r f̂_g(r)² = E_x[f_g(x)²] ≤ ‖h_g‖∞² ≤ 1/4 for a [0,1]-valued g, so **fewer than
1/(16τ²)** values of r (``parseval_separation_bound``), not one.

The bent counterexample (``bent_query``): with β(x) = Σ_k x_k x_{k+d/2} mod 2 (the inner-product
bent function), g_bent = 1[b=0]·1[y ≠ (−1)^{β(x)}] has h = −(−1)^{β(x)}/2 on b = 0 and
|f̂(r)| = 2^{−d/2−1} for EVERY r. With the d bit queries g_j = 1[i=j ∧ b=1 ∧ y=−1] (gap 1/(2d)):

* d = 4, τ = 0.9/(4d) = 0.05625: bent gap 1/8 > 2τ = 0.1125, so 5 non-adaptive queries determine
  every one of the 32 targets (the paper's counting predicts ≥ 2(2^d − 1) = 30 left open). This
  refutes the proof step (τ here is below the theorem's 2^{−8/3} ≈ 0.157).
* d = 16, τ = 9·10^{−4} ≥ 2^{−32/3} ≈ 6.2·10^{−4}: bent gap 2^{−9} ≈ 1.95·10^{−3} > 2τ and bit gap
  1/32 > 2τ: 17 queries learn all 2^17 targets exactly, against the claimed > 2^16 − 1. This
  refutes the theorem as stated (the smallest power of two where the bent family does so: it needs
  2^{−d/2−1} > 2·2^{−2d/3}, i.e. d > 12).

Corrected statement (SQ). A non-adaptive SQ learner that asks q queries with values in [0,1] at
tolerance τ and learns MASKED-PARITY to error < 1/4 on every target must have q > 16τ²·2^d
(``nasq_queries_lower_bound``: q ≥ ⌈2^d / k⌉ with k = ``parseval_separation_bound(τ)``). Reason:
c_{r,0} and c_{r,1} differ on the whole b = 0 half (distance 1/2), so no hypothesis is within 1/4
of both; against the midpoint adversary both give the same answers, hence every r must be
separated by some query, and each query separates fewer than 1/(16τ²) of the 2^d vectors. At
τ = 2^{−2d/3} this is vacuous for d > 12: the separation of non-adaptive from adaptive SQ needs
small τ.

Corrected statement (local, direct — no SQ simulation). Any NON-INTERACTIVE ε-LDP protocol whose
output has error ≤ α < 1/4 with probability ≥ 1 − β (β < 1/4) on every target — or on average over
a uniform target — needs

    n ≥ 4·2^d·ln(1/(4β)) / (e^ε − 1)²   users   (``lni_users_lower_bound``; ε = 1, β = 0.05: n ≥ 2.18·2^d).

Proof: for one user's ε-local randomizer Q, M_{r,a}(w) = E_z[Q(w | z, c_{r,a}(z))] satisfies
M_{r,0}(w) − M_{r,1}(w) = ½ ĝ_w(r), g_w(x) = E_i[Q(w|x,i,0,+1) − Q(w|x,i,0,−1)]. With
Q_min(w) = min_z Q(w|z) ≤ M_{r,1}(w): χ²(M_{r,0}‖M_{r,1}) ≤ Σ_w ĝ_w(r)²/(4 Q_min(w)). Parseval:
Σ_r ĝ_w(r)² ≤ (Q_max(w) − Q_min(w))² ≤ (e^ε − 1)² Q_min(w)², so Σ_r χ²_r ≤ (e^ε − 1)²/4 per user.
Non-interactive reports are independent, KL ≤ χ², and KL adds over users:
Σ_r KL(P_{r,0}‖P_{r,1}) ≤ n(e^ε − 1)²/4. The learner yields a test between (r, 0) and (r, 1) with
both errors ≤ β, so Bretagnolle–Huber gives KL_r ≥ ln(1/(4β)); sum over the 2^d vectors r.
Interaction escapes it: a later user's randomizer may depend on r (through earlier reports), so
the per-user sum over r is no longer over one fixed randomizer (§5.1's a-query concentrates all
its χ² on the learned r). docs/theorem51.md has every step.

The two adversaries
-------------------
``run_against_adversary`` / ``theorem51_census`` use by default the **midpoint adversary**:
for target (r, a), answer (E_{r,0}[g] + E_{r,1}[g])/2 = C_g + B_g(r) whenever |f̂_g(r)| ≤ 2τ (it is
then valid for both), else the exact E_{r,a}[g]. It is the strongest valid adversary for a:
``Outcome.a_undetermined`` means "no valid answers could pin a". ``adversary="paper"`` runs the
paper's oracle instead (``ldp.sq.adversarial.AdversarialSQOracle``, kept for fidelity): it answers
the target-independent C_g when that is within τ of the truth — which fails whenever B_g(r) is
large (the bit queries: |B| = 1/(4d)), so it then gives exact answers and can reveal more than
necessary; the paper's counting step rests on this oracle plus the false "one r per query".

Exact computation. ``query_expectations`` enumerates the domain per concept (small d only).
``separation_profile`` computes C_g, B_g(r) and f̂_g(r) for all 2^d vectors r from the query's
values on the (x, i, b, y) domain with one fast Walsh–Hadamard transform: exact up to float
rounding, vectorized, d = 16 in about a second. ``determined`` turns a profile into "a determined
for r" (exact) and "r determined" (exact pairwise for d ≤ 10, a coordinate certificate above).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ldp.core.concepts import MaskedParityConcept, concept_class, int_to_bits
from ldp.core.errors import ParameterError, require_epsilon, require_positive_finite, require_probability
from ldp.core.fourier import walsh_hadamard
from ldp.core.population import PopulationSpec
from ldp.core.queries import QuerySpec, make_query
from ldp.core.query_specs import affine, bent, conjunction, label_query, product
from ldp.core.schema import RECORD_DTYPE, Field, Schema
from ldp.learners.masked_parity import a_query, bit_query
from ldp.sq.adversarial import AdversarialSQOracle
from ldp.sq.exact import feature_domain

__all__ = [
    "Theorem51Outcome",
    "SeparationProfile",
    "Determination",
    "lni_query_set",
    "bent_query",
    "bent_query_set",
    "all_masked_parities",
    "query_expectations",
    "walsh_hadamard",
    "index_bits",
    "separation_profile",
    "determined",
    "parseval_separation_bound",
    "nasq_queries_lower_bound",
    "lni_users_lower_bound",
    "binary_kl",
    "per_user_chi2_bound",
    "lni_users_lower_bound_kl",
    "lni_users_lower_bound_tv",
    "LOWER_BOUNDS",
    "run_against_adversary",
    "theorem51_census",
    "ADVERSARIES",
    "SLACK",
]

SLACK = 1e-9
"""Relative slack for float equality: |Δ| ≤ τ·(1 + SLACK) counts as within τ (so a gap of exactly
2τ, which a valid midpoint answer can straddle, is never counted as a separation)."""

ADVERSARIES = ("midpoint", "paper")
PROFILE_MAX_D = 22  # (q, 2^22) float64 arrays: 32 MiB per query and field
PAIRWISE_MAX_D = 10  # exact r-determination compares all 2^{d+1} × 2^{d+1} concept pairs
CENSUS_MAX_D = 10  # the census lists a version space per target
_ROWS_PER_EVALUATION = 1 << 20  # records per query evaluation in the profile (≈ 50 MiB at d = 20)


# --- query families ---


def lni_query_set(d: int, candidates: Sequence[Sequence[int]]) -> list[QuerySpec]:
    """The LNI (a) query set: the d bit queries g_j and the a-query g_d^{(r')} per candidate r'.

    Each a-query separates (r, 0) from (r, 1) for its own r' only (f̂ = −½·1[r = r']), so with K
    distinct candidates exactly 2(2^d − K) targets keep a open — true for this family, not a
    general law (see ``bent_query``)."""
    return [bit_query(j) for j in range(d)] + [a_query(r) for r in candidates]


def bent_query() -> QuerySpec:
    """g_bent(x, i, b, y) = 1[b = 0 ∧ y ≠ (−1)^{β(x)}], β(x) = Σ_k x_k x_{k+d/2} mod 2 (d even).

    h = −(−1)^{β(x)}/2 on b = 0, so |f̂(r)| = 2^{−d/2−1} for every r: E_{r,0} − E_{r,1} = ±2^{−d/2−1}.
    One query separates all 2^d vectors r once τ < 2^{−d/2−2} — the counterexample to the "one r
    per query" step of KLNRS Theorem 5.1 (it meets the Parseval bound with equality)."""
    return product(conjunction(("b", 0, 0)), affine(product(label_query(), bent()), -0.5, 0.5))


def bent_query_set(d: int) -> list[QuerySpec]:
    """The d bit queries plus ``bent_query()``: d + 1 non-adaptive queries that learn every target
    of MASKED-PARITY_d exactly when 2τ < min(1/(2d), 2^{−d/2−1}) (d = 4: τ < 1/16; d = 16: τ < 2^{−10})."""
    return [bit_query(j) for j in range(d)] + [bent_query()]


def all_masked_parities(d: int) -> list[MaskedParityConcept]:
    """Every c_{r,a}, r in lexicographic order (r's bit 0 most significant), a inner: concept
    (r, a) is at row 2·int(r) + a."""
    return [MaskedParityConcept(tuple(r), a) for r in itertools.product((0, 1), repeat=d) for a in (0, 1)]


def query_expectations(d: int, queries: Sequence[QuerySpec]) -> tuple[list[MaskedParityConcept], np.ndarray]:
    """E_{c}[g] exactly for every concept c of MASKED-PARITY_d (rows) and query g (columns), by
    enumerating the feature domain once per concept (the reference; small d only)."""
    schema = concept_class("masked_parity", d).schema
    features = feature_domain(schema)
    built = [make_query(q, schema) for q in queries]
    concepts = all_masked_parities(d)
    values = np.empty((len(concepts), len(built)))
    for k, c in enumerate(concepts):
        records = np.concatenate([features, c.predict(features)[:, None]], axis=1).astype(RECORD_DTYPE)
        values[k] = [float(np.mean(q.evaluate(records))) for q in built]  # D is uniform over the domain
    return concepts, values


# --- the Fourier profile ---


def index_bits(d: int, ints: np.ndarray | None = None) -> np.ndarray:
    """The d-bit vectors of ``ints`` (default all of 0..2^d − 1), one row each, bit 0 the most
    significant (``ldp.core.concepts.int_to_bits``; the convention of ``all_masked_parities`` and
    of the ``user_parity`` query family)."""
    ints = np.arange(2**d, dtype=np.int64) if ints is None else np.asarray(ints, dtype=np.int64)
    return int_to_bits(ints, d).astype(np.int64)


def _check_dimension(d: int, most: int, what: str) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 2 <= d <= most:
        raise ParameterError(f"{what}: d must be an integer in [2, {most}], got {d!r}")
    return int(d)


def _schema(d: int) -> Schema:
    """The MASKED-PARITY_d record schema (x, i, b, y). Same layout as
    ``concept_class("masked_parity", d).schema``, but for any d ≥ 2: the paper's power-of-2 d only
    serves to write i in log d bits."""
    return Schema((Field("x", d, 0, 1), Field("i", 1, 0, d - 1), Field("b", 1, 0, 1), Field("y", 1, -1, 1, step=2)))


@dataclass(frozen=True)
class SeparationProfile:
    """Per query g (rows) and vector r (columns, r = int with bit 0 most significant):
    E_{r,a}[g] = constant + bias[:, r] + ½(−1)^a·fourier[:, r] exactly.

    constant = C_g, bias = B_g(r) = ½E[h_g(x,i,1)(−1)^{r_i}], fourier = f̂_g(r) = E_{r,0}[g] − E_{r,1}[g]."""

    d: int
    constant: np.ndarray  # (q,)
    bias: np.ndarray  # (q, 2^d)
    fourier: np.ndarray  # (q, 2^d)

    def expectations(self, a: int) -> np.ndarray:
        """E_{r,a}[g] for every query (rows) and r (columns)."""
        if a not in (0, 1):
            raise ParameterError(f"a must be 0 or 1, got {a!r}")
        return self.constant[:, None] + self.bias + (0.5 if a == 0 else -0.5) * self.fourier

    def table(self) -> tuple[list[MaskedParityConcept], np.ndarray]:
        """(concepts, values) in the layout of ``query_expectations``: row 2·int(r) + a."""
        values = np.stack([self.expectations(0).T, self.expectations(1).T], axis=1)
        return all_masked_parities(self.d), values.reshape(2 ** (self.d + 1), -1)

    def separated(self, tolerance: float) -> np.ndarray:
        """(q, 2^d) bool: query g separates (r, 0) from (r, 1) at τ, i.e. |f̂_g(r)| > 2τ."""
        tau = require_positive_finite("tolerance", tolerance)
        return np.abs(self.fourier) > 2 * tau * (1 + SLACK)


def separation_profile(d: int, queries: Sequence[QuerySpec]) -> SeparationProfile:
    """C_g, B_g(r) and f̂_g(r) for every query and all 2^d vectors r, exactly (KLNRS Theorem 5.1's
    decomposition E_c[g] = C_g + ⟨h_g, c⟩, split by b).

    Evaluates each query on the whole (x, i, b, y) domain in chunks of ≤ 2^20 records: on b = 0,
    f_g(x) = E_i[h_g(x,i,0)] and f̂_g = WHT(f_g)/2^d; on b = 1, the per-i means m_i = E_x[h_g(x,i,1)]
    give B_g(r) = (1/(2d)) Σ_i m_i (−1)^{r_i}. Queries must be scalar statistical queries."""
    d = _check_dimension(d, PROFILE_MAX_D, "separation_profile")
    schema = _schema(d)
    built = [make_query(q, schema) for q in queries]
    if any(q.width != 1 for q in built):
        raise ParameterError("separation_profile: only scalar queries have a profile")
    q_count, size = len(built), 2**d
    col_i, col_b, col_y = schema.column("i"), schema.column("b"), schema.column("y")
    sums = np.zeros(q_count)  # Σ over the domain of (g(+1) + g(−1))/2
    f = np.zeros((q_count, size))  # Σ_i h(x, i, 0)
    m = np.zeros((q_count, d))  # Σ_x h(x, i, 1)
    block = max(1, min(size, _ROWS_PER_EVALUATION // d))
    for start in range(0, size, block):
        xs = np.arange(start, min(size, start + block), dtype=np.int64)
        records = np.zeros((len(xs) * d, schema.width), dtype=RECORD_DTYPE)
        records[:, :d] = np.repeat(index_bits(d, xs), d, axis=0)  # rows (x, i), i fastest
        records[:, col_i] = np.tile(np.arange(d), len(xs))
        for b in (0, 1):
            records[:, col_b] = b
            for k, query in enumerate(built):
                records[:, col_y] = 1
                plus = query.evaluate(records)
                records[:, col_y] = -1
                minus = query.evaluate(records)
                sums[k] += float(np.sum(plus + minus)) / 2
                h = ((plus - minus) / 2).reshape(len(xs), d)
                if b == 0:
                    f[k, xs] = h.sum(axis=1)
                else:
                    m[k] += h.sum(axis=0)
    constant = sums / (size * d * 2)
    fourier = walsh_hadamard(f / d) / size
    signs = 1.0 - 2.0 * index_bits(d)  # (2^d, d): (−1)^{r_i}
    bias = (m / size) @ signs.T / (2 * d)
    return SeparationProfile(d, constant, bias, fourier)


# --- what a query set determines ---


@dataclass(frozen=True)
class Determination:
    """What a non-adaptive query set at tolerance τ determines against every valid SQ oracle.

    ``a_determined[r]``: some query has |f̂_g(r)| > 2τ (exact: otherwise the midpoint answers are
    valid for both (r, 0) and (r, 1)). ``r_determined[r]``: for both a, no (r', a') with r' ≠ r has
    all expectations within 2τ of (r, a)'s. With ``r_method == "pairwise"`` (d ≤ 10) that is
    computed exactly over all pairs; with ``"coordinate certificate"`` (larger d) True proves it
    (every coordinate j has a query whose values for r_j = 0 and r_j = 1 are 2τ apart, e.g. the
    bit queries) and False only means "not certified"."""

    d: int
    tolerance: float
    a_determined: np.ndarray  # (2^d,) bool
    r_determined: np.ndarray  # (2^d,) bool
    r_method: str
    separated: np.ndarray  # (q,) number of r each query separates

    @property
    def a_undetermined_targets(self) -> int:
        """Targets (r, a) whose a no valid answers could pin: 2·#{r not separated}."""
        return 2 * int(np.count_nonzero(~self.a_determined))

    @property
    def learns_every_target(self) -> bool:
        """Every target (r, a) is the only concept consistent with any valid answers."""
        return bool(self.a_determined.all() and self.r_determined.all())


def _coordinate_certificate(profile: SeparationProfile, tau: float) -> bool:
    """True iff for every coordinate j some query's values over {r: r_j = 0} and {r: r_j = 1}
    (both a) lie in ranges more than 2τ apart: then any r' ≠ r is separated from r."""
    d = profile.d
    e = np.stack([profile.expectations(0), profile.expectations(1)], axis=1)  # (q, 2, 2^d)
    for j in range(d):
        split = e.reshape(e.shape[0], 2, 2**j, 2, 2 ** (d - 1 - j))  # axis 3: coordinate j of r
        lo = split.min(axis=(1, 2, 4))
        hi = split.max(axis=(1, 2, 4))
        gap = np.maximum(lo[:, 1] - hi[:, 0], lo[:, 0] - hi[:, 1])
        if not np.any(gap > 2 * tau * (1 + SLACK)):
            return False
    return True


def _pairwise_r_determined(profile: SeparationProfile, tau: float) -> np.ndarray:
    """Exact: r_determined[r] iff no (r', a') with r' ≠ r is within 2τ of (r, a) on every query, a = 0, 1."""
    _, values = profile.table()  # (2^{d+1}, q), row 2r + a
    size = 2**profile.d
    owner = np.repeat(np.arange(size), 2)
    out = np.ones(size, dtype=bool)
    chunk = max(1, (1 << 22) // max(1, values.size))
    for start in range(0, 2 * size, chunk):
        rows = values[start : start + chunk]
        close = np.all(np.abs(rows[:, None, :] - values[None, :, :]) <= 2 * tau * (1 + SLACK), axis=2)
        close &= owner[start : start + chunk, None] != owner[None, :]
        out[owner[start : start + chunk][close.any(axis=1)]] = False
    return out


def determined(d: int, queries: Sequence[QuerySpec], tolerance: float, profile: SeparationProfile | None = None) -> Determination:
    """For each r: is a determined, and is r determined, by these non-adaptive queries at tolerance
    τ against every valid SQ oracle (KLNRS Theorem 5.1, corrected). See ``Determination``."""
    tau = require_positive_finite("tolerance", tolerance)
    profile = profile if profile is not None else separation_profile(d, queries)
    if profile.d != d or profile.fourier.shape[0] != len(queries):
        raise ParameterError(f"determined: the profile is for d={profile.d} and {profile.fourier.shape[0]} queries, not d={d} and {len(queries)}")
    sep = profile.separated(tau)
    if d <= PAIRWISE_MAX_D:
        r_det, method = _pairwise_r_determined(profile, tau), "pairwise"
    else:
        r_det, method = np.full(2**d, _coordinate_certificate(profile, tau)), "coordinate certificate"
    return Determination(d, tau, np.asarray(sep.any(axis=0)), r_det, method, np.asarray(sep.sum(axis=1)))


# --- the bounds ---


def parseval_separation_bound(tolerance: float, value_range: float = 1.0) -> int:
    """The most vectors r one query can separate at tolerance τ: the largest integer k with
    k·(2τ)² < L²/4, i.e. k < L²/(16τ²), for a query whose values lie in an interval of length L
    (L = 1 for [0,1] queries: < 1/(16τ²); L = 2 for [−1,1] queries: < 1/(4τ²)). Exact rational
    arithmetic on the float inputs.

    Guarantee (KLNRS Theorem 5.1, corrected): separating r needs |f̂_g(r)| > 2τ, and Parseval gives
    Σ_r f̂_g(r)² = E_x[f_g(x)²] ≤ ‖h_g‖∞² ≤ L²/4. The paper's proof claims k ≤ 1; the bent query
    attains this bound (d = 4, τ slightly below 1/16: 16 of 16)."""
    tau = Fraction(require_positive_finite("tolerance", tolerance))
    length = Fraction(require_positive_finite("value_range", value_range))
    return math.ceil(length**2 / (16 * tau**2)) - 1


def nasq_queries_lower_bound(d: int, tolerance: float) -> int:
    """Queries ([0,1]-valued, tolerance τ) any non-adaptive SQ learner needs to learn every target
    of MASKED-PARITY_d to error < 1/4: ⌈2^d / k⌉ with k = ``parseval_separation_bound(τ)`` — at
    least 16τ²·2^d (KLNRS Theorem 5.1 corrected; the paper claims > 2^d − 1 for τ ≥ 2^{−2d/3}).
    ParameterError when τ ≥ 1/4 (then no query separates any r: a cannot be learned at all)."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ParameterError(f"nasq_queries_lower_bound: d must be an integer ≥ 1, got {d!r}")
    k = parseval_separation_bound(tolerance)
    if k == 0:
        raise ParameterError(f"tolerance {tolerance!r} ≥ 1/4: no [0,1] query separates (r, 0) from (r, 1), so no number of non-adaptive queries learns a")
    return -(-(2 ** int(d)) // k)


def lni_users_lower_bound(d: int, epsilon: float, beta: float) -> int:
    """Users any NON-INTERACTIVE ε-LDP protocol needs to learn MASKED-PARITY_d to error < 1/4 with
    probability ≥ 1 − β (every target, or a uniform one): ⌈4·2^d·ln(1/(4β)) / (e^ε − 1)²⌉.

    KLNRS Theorem 5.1, corrected and proved directly in the local model (no SQ simulation):
    per user Σ_r χ²(M_{r,0}‖M_{r,1}) ≤ (e^ε − 1)²/4 (Parseval over r), KL ≤ χ² adds over
    independent users, and Bretagnolle–Huber needs KL_r ≥ ln(1/(4β)) for each of the 2^d vectors r.
    Needs β ∈ (0, 1/4) (at β ≥ 1/4 a coin already succeeds) and ε a valid privacy parameter."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ParameterError(f"lni_users_lower_bound: d must be an integer ≥ 1, got {d!r}")
    eps = require_epsilon(epsilon)
    b = require_probability("beta", beta, low=0.0, high=0.25)
    return math.ceil(4 * 2.0 ** int(d) * math.log(1 / (4 * b)) / math.expm1(eps) ** 2)


def binary_kl(p: float, q: float) -> float:
    """kl(p‖q) = p ln(p/q) + (1 − p) ln((1 − p)/(1 − q)), the KL divergence between Bernoulli(p)
    and Bernoulli(q) (0 ln 0 = 0), for p ∈ [0, 1], q ∈ (0, 1)."""
    if not (0.0 <= p <= 1.0 and 0.0 < q < 1.0):
        raise ParameterError(f"binary_kl needs p in [0, 1] and q in (0, 1), got p={p!r}, q={q!r}")
    return float((p * math.log(p / q) if p > 0 else 0.0) + ((1 - p) * math.log((1 - p) / (1 - q)) if p < 1 else 0.0))


def per_user_chi2_bound(epsilon: float, step: str = "tv") -> float:
    """The per-user bound on Σ_r χ²(M_{r,0}‖M_{r,1}) for ONE fixed ε-local randomizer.

    ``step="parseval"`` (docs/theorem51.md, step 3): (e^ε − 1)²/4.
    ``step="tv"`` (step 3′, tighter): (e^ε − 1)²/(2(e^ε + 1)). Jensen over i gives
    Σ_r ĝ_w(r)² ≤ E_z[D_w(z)²] with D_w(z) = Q(w|z,+1) − Q(w|z,−1); Q_min(w) ≥ e^{−ε}max(Q(w|z,±1))
    gives D_w²/Q_min ≤ (e^ε − 1)|D_w|; and Σ_w |D_w(z)| = 2·TV ≤ 2(e^ε − 1)/(e^ε + 1) for two
    inputs of an ε-LDP randomizer. Binary randomized response on a bent query attains it up to
    the factor (e^ε + 1)/2 lost in M_{r,1} ≥ Q_min."""
    eps = require_epsilon(epsilon)
    if step == "parseval":
        return math.expm1(eps) ** 2 / 4
    if step == "tv":
        return math.expm1(eps) ** 2 / (2 * (math.exp(eps) + 1))
    raise ParameterError(f"per_user_chi2_bound: step must be 'parseval' or 'tv', got {step!r}")


def _lower_bound_args(d: int, epsilon: float, beta: float, where: str) -> tuple[int, float, float]:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ParameterError(f"{where}: d must be an integer ≥ 1, got {d!r}")
    return int(d), require_epsilon(epsilon), require_probability("beta", beta, low=0.0, high=0.5)


def lni_users_lower_bound_kl(d: int, epsilon: float, beta: float) -> int:
    """The corrected Theorem 5.1 bound with Bretagnolle–Huber replaced by the binary-KL
    data-processing inequality: ⌈4·2^d·kl(β‖1 − β)/(e^ε − 1)²⌉ = ⌈4·2^d·(1 − 2β)ln((1 − β)/β)/(e^ε − 1)²⌉.

    Step 6′ (docs/theorem51.md): the test φ has P_{r,0}(φ = 1) ≤ β and P_{r,1}(φ = 1) ≥ 1 − β, so
    KL(P_{r,0}‖P_{r,1}) ≥ kl(P_{r,0}(φ=1)‖P_{r,1}(φ=1)) ≥ kl(β‖1 − β) (data processing, then
    monotonicity of kl away from the diagonal). At ε = 1, β = 0.05: 3.5902·2^d (BH: 2.1804·2^d).
    Valid for β ∈ (0, ½), where BH needs β < ¼."""
    d, eps, b = _lower_bound_args(d, epsilon, beta, "lni_users_lower_bound_kl")
    return math.ceil(2.0**d * binary_kl(b, 1 - b) / per_user_chi2_bound(eps, "parseval"))


def lni_users_lower_bound_tv(d: int, epsilon: float, beta: float) -> int:
    """The tightest bound here: steps 3′ and 6′ together, ⌈2^d·kl(β‖1 − β)·2(e^ε + 1)/(e^ε − 1)²⌉.

    The per-user χ² budget (e^ε − 1)²/(2(e^ε + 1)) (``per_user_chi2_bound(ε, "tv")``) replaces
    (e^ε − 1)²/4: a factor 2/(e^ε + 1) smaller (0.538 at ε = 1), so the bound is (e^ε + 1)/2 times
    ``lni_users_lower_bound_kl``: 6.6746·2^d at ε = 1, β = 0.05. Valid for β ∈ (0, ½)."""
    d, eps, b = _lower_bound_args(d, epsilon, beta, "lni_users_lower_bound_tv")
    return math.ceil(2.0**d * binary_kl(b, 1 - b) / per_user_chi2_bound(eps, "tv"))


LOWER_BOUNDS = {
    "bretagnolle-huber": lni_users_lower_bound,
    "binary-kl": lni_users_lower_bound_kl,
    "binary-kl+tv": lni_users_lower_bound_tv,
}
"""The three non-interactive lower bounds by name, loosest first (all hold; the last is the tightest)."""


# --- the census against an adversary ---


@dataclass(frozen=True)
class Theorem51Outcome:
    """One target run through an adversary: its answers, the version space, and whether a is open.

    ``withheld_answers``: queries answered by the adversary's rule instead of the exact value (the
    midpoint, when |f̂_g(r)| ≤ 2τ; or the paper's C_g when valid)."""

    target: MaskedParityConcept
    answers: np.ndarray
    withheld_answers: int
    version_space: tuple[MaskedParityConcept, ...]
    adversary: str = "midpoint"

    @property
    def a_undetermined(self) -> bool:
        """Both (r, 0) and (r, 1) are consistent with the answers (for the midpoint adversary:
        no valid answers could pin a)."""
        return {c.a for c in self.version_space if c.r == self.target.r} == {0, 1}


def _table(d: int, queries: Sequence[QuerySpec]) -> tuple[list[MaskedParityConcept], np.ndarray]:
    return separation_profile(d, queries).table()


def _midpoint_outcomes(
    concepts: list[MaskedParityConcept], values: np.ndarray, targets: Sequence[MaskedParityConcept], tau: float
) -> list[Theorem51Outcome]:
    row = {c: k for k, c in enumerate(concepts)}
    missing = [t for t in targets if t not in row or MaskedParityConcept(t.r, 1 - t.a) not in row]
    if missing:
        raise ParameterError(f"the expectation table has no row for {missing[0]} or its other a")
    own = values[[row[t] for t in targets]]
    e0 = values[[row[MaskedParityConcept(t.r, 0)] for t in targets]]
    e1 = values[[row[MaskedParityConcept(t.r, 1)] for t in targets]]
    hide = np.abs(e0 - e1) <= 2 * tau * (1 + SLACK)
    answers = np.where(hide, (e0 + e1) / 2, own)
    out = []
    for k, t in enumerate(targets):
        consistent = np.all(np.abs(values - answers[k][None, :]) <= tau * (1 + SLACK), axis=1)
        out.append(Theorem51Outcome(t, answers[k], int(hide[k].sum()), tuple(c for c, ok in zip(concepts, consistent) if ok), "midpoint"))
    return out


def _check_adversary(adversary: str) -> None:
    if adversary not in ADVERSARIES:
        raise ParameterError(f"adversary must be one of {ADVERSARIES}, got {adversary!r}")


async def run_against_adversary(
    target: MaskedParityConcept,
    queries: Sequence[QuerySpec],
    tolerance: float,
    table: tuple[list[MaskedParityConcept], np.ndarray] | None = None,
    adversary: str = "midpoint",
) -> Theorem51Outcome:
    """One non-adaptive step against an adversarial valid SQ oracle, then the exact version space
    (every (r', a') whose exact expectations are within τ of all the answers).

    ``adversary="midpoint"`` (default, the strongest for a): answer (E_{r,0} + E_{r,1})/2 when
    |E_{r,0} − E_{r,1}| ≤ 2τ, else E_{r,a}. ``"paper"``: KLNRS Theorem 5.1's oracle
    (``AdversarialSQOracle``: C_g when valid, else E_{r,a}). ``table`` defaults to the exact
    Fourier table (``separation_profile(...).table()``)."""
    _check_adversary(adversary)
    tau = require_positive_finite("tolerance", tolerance)
    d = len(target.r)
    concepts, values = table if table is not None else _table(d, queries)
    if adversary == "midpoint":
        return _midpoint_outcomes(concepts, values, [target], tau)[0]
    oracle = AdversarialSQOracle(PopulationSpec(concept_class("masked_parity", d), target, size=1))
    answers = await oracle.ask(list(queries), tau)
    consistent = np.all(np.abs(values - answers[None, :]) <= tau * (1 + SLACK), axis=1)
    return Theorem51Outcome(
        target, answers, int(oracle.constant_answers[-1].sum()), tuple(c for c, ok in zip(concepts, consistent) if ok), "paper"
    )


async def theorem51_census(
    d: int,
    queries: Sequence[QuerySpec],
    tolerance: float,
    adversary: str = "midpoint",
    table: tuple[list[MaskedParityConcept], np.ndarray] | None = None,
) -> list[Theorem51Outcome]:
    """Every target of MASKED-PARITY_d (in ``all_masked_parities`` order) against the adversary
    with the same non-adaptive queries. With the midpoint adversary, ``a_undetermined`` holds
    exactly for the r that no query separates (|f̂_g(r)| ≤ 2τ for all g). ``table``: the exact
    expectations to use (default the Fourier table; ``query_expectations(d, queries)`` gives the
    enumerated one). d ≤ 10."""
    _check_adversary(adversary)
    d = _check_dimension(d, CENSUS_MAX_D, "theorem51_census")
    tau = require_positive_finite("tolerance", tolerance)
    table = table if table is not None else _table(d, queries)
    targets = all_masked_parities(d)
    if adversary == "midpoint":
        return _midpoint_outcomes(table[0], table[1], targets, tau)
    return [await run_against_adversary(t, queries, tau, table, "paper") for t in targets]
