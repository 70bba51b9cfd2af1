"""Pure-DP lower bounds of BNS as functions (packing arguments), and the k-point sanitizer's helpers.

BNS (Beimel, Nissim, Stemmer, *Private Learning and Sanitization: Pure vs. Approximate Differential
Privacy*) prove that every **pure** ε-DP learner or sanitizer for POINT_d, THRESH_d and k-POINT_d
needs a sample that grows with d, while the (ε,δ) algorithms of the same paper do not. The seed
text lost its inline math, so each formula below carries the provenance tag of the reference spec
(central learners, §B9, §B11) and, where the constant is not
recoverable, is **re-derived** here from the packing argument the surviving proof prose describes
([DERIVED]: a valid lower bound with our constants; the paper's own constant may differ).

All of them are one packing inequality (BNS Lemma 4.15's proof, Lemma 5.7's eq. (14)): K databases,
each within ``t`` entries of one common database, each reaching its own *disjoint* set of good outputs
with probability ≥ p; ε-DP moves each probability by at most e^{εt}, and the K disjoint sets share
one unit of probability, so 1 ≥ K·p·e^{−εt}, i.e. t ≥ ln(K·p)/ε (:func:`packing_distance`).

* :func:`sanitizer_lower_bound` — BNS Lemma 4.15 / Thm 4.16 [RECON-M]: an α-sanitizer for a class of
  effective size X_C needs m ≥ ln(X_C(1−β))/(3αε). POINT_d and THRESH_d have X_C = 2^d
  (:func:`point_sanitizer_lower_bound`).
* :func:`kpoint_learner_lower_bound` — BNS Lemma 5.7 [RECON-M, re-derived]: a proper ε-PPAC learner for
  k-POINT_d needs m ≥ ln(|B|/2)/(8αε), B a family of k-sets with pairwise intersections < k/2
  (:func:`kpoint_packing_log_size`). At k = 1 this is the Ω(d) bound for proper POINT_d learners of
  Beimel et al. [4] that BNS Lemma 3.2's A_dist learner escapes.
* :func:`threshold_learner_lower_bound` — [DERIVED] the same packing for proper THRESH_d learners
  (targets t ∈ {2..2^d}); the Ω(d) bound that BNS Thm 3.18 (RecConcave) escapes. The improper bound
  (Feldman–Xiao) is cited by BNS, not proved, and is not reproduced.
* :func:`kpoint_sanitizer_lower_bound` — [DERIVED] a direct packing for k-POINT_d sanitizers that gives
  the order Ω(kd/(αε)) of BNS Thm 5.10 (Thm 5.9's Ω(kd/ε) is weaker). BNS reach it through the
  learner reduction (Thm 5.5, Lemma 5.3 twice), whose constants are stripped; the direct packing
  needs none of them.

k-point sanitizer (BNS Thm 4.7; the mechanism is ``ldp.central.sanitizers.san_points`` at α/k):

* :func:`kpoint_sanitizer_sample_size` — the m at which Thm 4.7's sanitizer runs in theory mode (the
  Choosing Mechanism's Lemma 4.4 minimum for SanPoints at α/k); no d.
* :func:`kpoint_set_error` — sup over all sets Y with |Y| ≤ k of |Est(c_Y) − Q_{c_Y}(S)|, exactly.
* :func:`kpoint_erm` — post-processing of a sanitized labelled sample into the proper k-POINT ERM (BNS
  Lemma 5.3, the sanitizer ⇒ learner direction, as ``learn_point_by_sanitization`` does for k = 1).

The packing, checked exactly on a real pure sanitizer (reference spec §6.4):

* :func:`laplace_histogram_packing` — the pure Laplace histogram over all 2^d cells (Lap(2/ε) per cell,
  ε-DP under replace-one) on Lemma 4.15's databases, in closed form for any d: its success on its own
  S_x, the probability that S_{x0} lands in S_x's good set, and the sum of the latter over all x (the
  disjoint sets must share at most 1). :func:`laplace_histogram_m90` is its exact m_90, which the bound
  must not exceed.

Nothing here touches data except the two post-processing helpers; none draws randomness.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldp.central.sanitizers import PointSanitization, san_points_parameters
from ldp.core.errors import ParameterError, require_epsilon, require_integer, require_probability

__all__ = [
    "packing_distance",
    "log_comb",
    "kpoint_packing_log_size",
    "sanitizer_lower_bound",
    "sanitizer_packing_copies",
    "point_sanitizer_lower_bound",
    "kpoint_learner_lower_bound",
    "threshold_learner_lower_bound",
    "kpoint_sanitizer_copies",
    "kpoint_sanitizer_lower_bound",
    "kpoint_sanitizer_sample_size",
    "kpoint_set_error",
    "kpoint_erm",
    "laplace_interval_probability",
    "LaplaceHistogramPacking",
    "laplace_histogram_packing",
    "laplace_histogram_m90",
    "LEARNER_MASS",
]

LEARNER_MASS = 4.0
"""[DERIVED] The packing distributions of Lemma 5.7 put mass LEARNER_MASS·α on the target set (LEARNER_MASS·α/k
per point) and the rest on a fixed negative point x0: a hypothesis with error ≤ α then contains ≥ 3k/4 of the
target's points, so two targets meeting in < k/2 points have disjoint good sets."""


def packing_distance(log_count: float, success: float, epsilon: float) -> float:
    """Smallest distance t allowed by the packing inequality 1 ≥ K·p·e^{−εt}: t ≥ ln(K·p)/ε.

    Parameters
    ----------
    log_count : ln K, the number of databases whose good output sets are pairwise disjoint.
    success : p, the probability each reaches its own good set.
    epsilon : the pure privacy parameter.

    Returns
    -------
    float
        ln(K·p)/ε (0 when K·p ≤ 1: the packing then says nothing). BNS Lemma 4.15's proof, Lemma 5.7's eq. (14).
    """
    eps = require_epsilon(epsilon)
    if not 0.0 < success <= 1.0:
        raise ParameterError(f"success must be in (0, 1]; got {success!r}")
    return max(0.0, (log_count + math.log(success)) / eps)


def log_comb(n: int, k: int) -> float:
    """ln C(n, k) for huge n (2^1024) and small k, exact in integers before the log."""
    if k < 0 or k > n:
        return -math.inf
    return math.log(math.comb(n, k))


def kpoint_packing_log_size(universe: int, k: int) -> float:
    """ln of the greedy lower bound on |B|, B ⊆ k-subsets of a ``universe``-point set with |Y ∩ Y'| < k/2.

    BNS Lemma 5.7's proof builds B greedily: pick a k-set, remove every k-set meeting it in ≥ k/2 points,
    repeat. Each step removes at most R = Σ_{j ≥ k/2} C(k, j)·C(T − k, k − j) sets, so
    |B| ≥ ⌈C(T, k)/R⌉ ([DERIVED]: the count itself; the reference's closed form is "about (2^d/k)^{k/2}").
    k = 1 gives R = 1, |B| = T.
    """
    T = require_integer("universe", universe, 1)
    kk = require_integer("k", k, 1)
    if 2 * kk > T:
        raise ParameterError(f"k-point packing needs a universe of at least 2k points; got universe={T}, k={kk}")
    removed = sum(math.comb(kk, j) * math.comb(T - kk, kk - j) for j in range((kk + 1) // 2, kk + 1))
    size = -(-math.comb(T, kk) // removed)  # ceiling division in exact integers
    return math.log(size)


def _alpha_eps(alpha: float, epsilon: float, high: float) -> tuple[float, float]:
    return require_probability("alpha", alpha, high=high), require_epsilon(epsilon)


def sanitizer_lower_bound(log_effective_size: float, alpha: float, beta: float, epsilon: float) -> float:
    """BNS Lemma 4.15 / Thm 4.16 [RECON-M]: every ε-DP (α, β)-sanitizer needs m ≥ ln(X_C(1−β))/(3αε).

    The packing: S_x has 3αm copies of x and the rest x0; for x ≠ x' ∈ X' (the effective-size set) some
    concept separates them, so Q_c(S_x) and Q_c(S_x') differ by 3α > 2α and the α-balls are disjoint;
    each S_x is 3αm entries from S_{x0}, so 1 ≥ X_C·(1−β)·e^{−3αεm}.

    Parameters
    ----------
    log_effective_size : ln X_C (Def 4.14; d·ln 2 for POINT_d and THRESH_d).
    alpha, beta, epsilon : accuracy, failure probability, privacy (α ≤ 1/3 so that 3αm ≤ m).
    """
    a, eps = _alpha_eps(alpha, epsilon, 1.0 / 3.0)
    b = require_probability("beta", beta, high=0.5)
    return packing_distance(log_effective_size, 1.0 - b, eps) / (3.0 * a)


def sanitizer_packing_copies(m: int, alpha: float) -> int:
    """⌈3αm⌉, the copies of x in Lemma 4.15's S_x (3αm rounded to 1e-9 first: 3·0.1·40 is 12, not 13)."""
    mm = require_integer("m", m, 1)
    a = require_probability("alpha", alpha, high=1.0 / 3.0)
    return math.ceil(round(3.0 * a * mm, 9))


def point_sanitizer_lower_bound(bits: int, alpha: float, beta: float, epsilon: float) -> float:
    """Thm 4.16 for POINT_d and THRESH_d: X_C = 2^d (every two points are separated by a point or a threshold)."""
    d = require_integer("bits", bits, 1)
    return sanitizer_lower_bound(d * math.log(2.0), alpha, beta, epsilon)


def kpoint_learner_lower_bound(bits: int, k: int, alpha: float, epsilon: float) -> float:
    """BNS Lemma 5.7 [RECON-M; re-derived]: every proper ε-PPAC learner for k-POINT_d needs m ≥ ln(|B|/2)/(8αε).

    Derivation ([DERIVED], the steps of the surviving proof prose): D_Y puts 4α/k on each y ∈ Y (label 1)
    and 1 − 4α on a fixed x0 (label 0). A hypothesis c_Z with error ≤ α excludes x0 (α < 1/5) and misses
    ≤ k/4 points of Y, so two targets with |Y ∩ Y'| < k/2 have disjoint good sets. A sample is "good" when at
    most 8αm entries avoid x0 (Chernoff: probability ≥ 1 − e^{−4αm/3}); some good S_Y then succeeds with
    probability ≥ 1 − β − e^{−4αm/3} ≥ 1/2 (β ≤ 1/4, αm ≥ 1.04), and it is ≤ 8αm entries from the all-x0
    sample. Packing over B (:func:`kpoint_packing_log_size` with T = 2^d − 1 points besides x0).

    k = 1 is the proper POINT_d bound of Beimel et al. [4] (B = all singletons, |B| = 2^d − 1).
    Valid for α < 1/5, β ≤ 1/4.
    """
    d = require_integer("bits", bits, 1)
    a, eps = _alpha_eps(alpha, epsilon, 0.2)
    return packing_distance(kpoint_packing_log_size(2**d - 1, k), 0.5, eps) / (2.0 * LEARNER_MASS * a)


def threshold_learner_lower_bound(bits: int, alpha: float, epsilon: float) -> float:
    """[DERIVED] Lemma 5.7's packing for proper THRESH_d learners: m ≥ ln((2^d − 1)/2)/(8αε).

    D_t puts 1 − 4α on the point 0 (label 1), 2α on t − 1 (label 1) and 2α on t (label 0), t ∈ {2..2^d}.
    A threshold with error ≤ α < 2α labels both t − 1 and t right, so it is c_t itself: the 2^d − 1 good
    sets are disjoint. The rest is Lemma 5.7's argument with k = 1. Proper learners only (BNS cite the
    improper Ω(d) of Feldman–Xiao without proof). Valid for α < 1/5, β ≤ 1/4.
    """
    d = require_integer("bits", bits, 2)
    a, eps = _alpha_eps(alpha, epsilon, 0.2)
    return packing_distance(math.log(2**d - 1), 0.5, eps) / (2.0 * LEARNER_MASS * a)


def kpoint_sanitizer_copies(m: int, k: int, alpha: float) -> int:
    """Copies of each point of Y in the packing database S_Y: t = ⌊2αm/h⌋ + 1 with h = ⌊k/2⌋ + 1.

    Two targets with |Y ∩ Y'| < k/2 differ on ≥ h points, so the query c_{Y∖Y'} tells S_Y and S_Y' apart by
    h·t/m > 2α, and their α-balls are disjoint. Needs k·t ≤ m.
    """
    mm = require_integer("m", m, 1)
    kk = require_integer("k", k, 1)
    a = require_probability("alpha", alpha, high=0.5)
    return math.floor(2.0 * a * mm / (kk // 2 + 1)) + 1


def kpoint_sanitizer_lower_bound(bits: int, k: int, alpha: float, beta: float, epsilon: float) -> float:
    """[DERIVED] Direct packing for ε-DP (α, β)-sanitizers of k-POINT_d: m ≥ (ln(|B|(1−β))/ε − k)·h/(2αk), h = ⌊k/2⌋ + 1.

    S_Y: :func:`kpoint_sanitizer_copies` copies of each y ∈ Y, the rest on x0; it is k·t ≤ 2αkm/h + k entries
    from the all-x0 database, the good sets are disjoint over B, so k·t ≥ ln(|B|(1−β))/ε. The order is
    BNS Thm 5.10's Ω(kd/(αε)) (|B| ≥ (2^d/k)^{Θ(k)}); the classes of concepts |Y| ≤ k or |Y| = k both work
    (pad c_{Y∖Y'} with points outside Y ∪ Y' ∪ {x0}, which needs 2^d ≥ 3k + 1).
    """
    d = require_integer("bits", bits, 1)
    kk = require_integer("k", k, 1)
    a, eps = _alpha_eps(alpha, epsilon, 0.5)
    b = require_probability("beta", beta, high=0.5)
    if 2**d < 3 * kk + 1:
        raise ParameterError(f"the k-point packing needs 2^d ≥ 3k + 1; got bits={d}, k={kk}")
    need = packing_distance(kpoint_packing_log_size(2**d - 1, kk), 1.0 - b, eps) - kk
    return max(0.0, need * (kk // 2 + 1) / (2.0 * a * kk))


def kpoint_sanitizer_sample_size(k: int, alpha: float, beta: float, epsilon: float, delta: float) -> int:
    """BNS Thm 4.7's sanitizer in theory mode: SanPoints at accuracy α/k runs from this m on (no d).

    The minimum is the Choosing Mechanism's Lemma 4.4 condition at (α/(2k), ε1, δ1)
    (``san_points_parameters``); SanPoints refuses smaller m because its privacy depends on m.
    """
    kk = require_integer("k", k, 1)
    a = require_probability("alpha", alpha, high=0.5)
    return san_points_parameters(a / kk, beta, epsilon, delta).min_m


def kpoint_set_error(x: np.ndarray, san: PointSanitization, k: int) -> float:
    """sup over |Y| ≤ k of |Σ_{y∈Y} (Est(y) − freq_S(y))|, exactly (BNS Thm 4.7's error).

    Per-point errors e(y) are 0 off the support of S and Est, so the sup is the larger of the sum of the k
    largest positive e(y) and the sum of the k largest positive −e(y).
    """
    kk = require_integer("k", k, 1)
    xa = np.asarray(x)
    pts, counts = np.unique(xa, return_counts=True)
    err: dict[int, float] = {int(p): -c / xa.size for p, c in zip(pts, counts)}
    for p, f in zip(san.points, san.frequencies):
        err[int(p)] = err.get(int(p), 0.0) + float(f)
    e = np.fromiter(err.values(), dtype=np.float64, count=len(err))
    up = np.sort(np.clip(e, 0.0, None))[::-1][:kk].sum()
    down = np.sort(np.clip(-e, 0.0, None))[::-1][:kk].sum()
    return float(max(up, down))


def kpoint_erm(san: PointSanitization, k: int) -> frozenset[int]:
    """Proper k-POINT ERM on a sanitized labelled sample (BNS Lemma 5.3; post-processing only).

    ``san`` sanitizes the pairs 2x + y (as ``learn_point_by_sanitization`` encodes them). The sanitized error of
    c_Z is P̂(y=1) − Σ_{z∈Z} (f̂(z,1) − f̂(z,0)), so the ERM over |Z| ≤ k takes the ≤ k points with the largest
    positive score f̂(z,1) − f̂(z,0) (ties: smaller point first). Reads nothing but the released sanitization.
    """
    kk = require_integer("k", k, 1)
    score: dict[int, float] = {}
    for p, f in zip(san.points, san.frequencies):
        z = int(p) >> 1
        score[z] = score.get(z, 0.0) + (float(f) if int(p) & 1 else -float(f))
    ranked = sorted((kv for kv in score.items() if kv[1] > 0), key=lambda kv: (-kv[1], kv[0]))
    return frozenset(z for z, _ in ranked[:kk])


def laplace_interval_probability(lo: float, hi: float, scale: float) -> float:
    """ln Pr[lo ≤ L ≤ hi] for L ~ Lap(scale), in log space (−inf when lo > hi).

    An interval on one side of 0 is 0.5·e^{−near/b}·(1 − e^{−width/b}), computed without subtracting two
    numbers near 1 (the far tails of a packing database would cancel to 0 otherwise).
    """
    if lo > hi:
        return -math.inf
    if lo >= 0:
        return math.log(0.5) - lo / scale + math.log1p(-math.exp(-(hi - lo) / scale)) if hi > lo else -math.inf
    if hi <= 0:
        return laplace_interval_probability(-hi, -lo, scale)
    return math.log1p(-0.5 * math.exp(lo / scale) - 0.5 * math.exp(-hi / scale))


def _log_cell_times(log_count: float, u: float) -> float:
    """count·ln(1 − e^{−u}) for a count given by its log (2^4096 cells): −inf when it overflows.

    ln(−ln(1 − e^{−u})) is taken as −u + ln(1 + e^{−u}/2) for u > 30 (the series of −ln(1 − x) = x + x²/2 + …),
    so e^{−u} below the float range still counts.
    """
    log_neg = -u + math.log1p(0.5 * math.exp(-u)) if u > 30.0 else math.log(-math.log1p(-math.exp(-u)))
    power = log_count + log_neg
    return -math.inf if power > 709.0 else -math.exp(power)


@dataclass(frozen=True)
class LaplaceHistogramPacking:
    """The packing of Lemma 4.15 evaluated exactly for the pure Laplace histogram (all values natural logs).

    ``copies``: c = ⌈3αm⌉ copies of x in S_x. ``log_self``: ln Pr[A(S_x) ∈ G(x)] (every cell within α).
    ``log_cross``: ln Pr[A(S_{x0}) ∈ G(x)]. ``log_sum``: ln Σ_{x ≠ x0} Pr[A(S_{x0}) ∈ G(x)], ≤ 0 because the
    G(x) are disjoint. ε-DP over the c replaced entries gives ``log_cross`` ≥ ``log_self`` − ε·c.
    """

    bits: int
    m: int
    copies: int
    log_self: float
    log_cross: float
    log_sum: float


def laplace_histogram_packing(bits: int, m: int, alpha: float, epsilon: float) -> LaplaceHistogramPacking:
    """Lemma 4.15's packing on the pure Laplace histogram over POINT_d (Lap(2/ε) per cell; ε-DP), exactly.

    G(x) = estimates within α of S_x on every point query. On S_x every cell needs |noise| ≤ αm:
    Pr = (1 − e^{−αm/b})^{2^d}, b = 2/ε. On S_{x0} (all x0), cell x needs noise ∈ [c − αm, c + αm], cell x0
    noise ∈ [−c − αm, −c + αm], every other cell |noise| ≤ αm. Independent cells, so the logs add; the
    2^d − 2 identical cells are one term times their count (any d, in log space).
    """
    d = require_integer("bits", bits, 2)
    mm = require_integer("m", m, 1)
    a, eps = _alpha_eps(alpha, epsilon, 1.0 / 3.0)
    b = 2.0 / eps
    t = a * mm
    c = sanitizer_packing_copies(mm, a)
    log_cells = d * math.log(2.0)
    log_rest = math.log1p(-2.0 * math.exp(-log_cells)) + log_cells  # ln(2^d − 2), d ≥ 2
    log_self = _log_cell_times(log_cells, t / b)  # each cell: ln Pr[|L| ≤ αm] = ln(1 − e^{−αm/b})
    log_cross = laplace_interval_probability(c - t, c + t, b) + laplace_interval_probability(-c - t, -c + t, b) + _log_cell_times(log_rest, t / b)
    log_others = math.log1p(-math.exp(-log_cells)) + log_cells  # ln(2^d − 1)
    return LaplaceHistogramPacking(d, mm, c, log_self, log_cross, log_others + log_cross)


def laplace_histogram_m90(bits: int, alpha: float, beta: float, epsilon: float) -> int:
    """Smallest m at which the pure Laplace histogram is α-accurate on every point query w.p. ≥ 1 − β, exactly.

    (1 − e^{−αmε/2})^{2^d} ≥ 1 − β ⇔ m ≥ (2/(αε))·ln(1/q), q = 1 − (1 − β)^{2^−d}; the ceiling, checked by
    :func:`laplace_histogram_packing`. Its own input databases need no sampling, so this is its m_90 on
    Lemma 4.15's databases; the Thm 4.16 bound must not exceed it.
    """
    d = require_integer("bits", bits, 2)
    a, eps = _alpha_eps(alpha, epsilon, 1.0 / 3.0)
    bb = require_probability("beta", beta, high=0.5)
    y = math.ldexp(math.log1p(-bb), -d)  # 2^−d·ln(1 − β), may underflow to 0 at large d
    # q = −expm1(y); for |y| below 1e-300, ln(1/q) = −ln(−y) = d·ln 2 − ln(−ln(1 − β)) to double precision
    log_inv_q = -math.log(-math.expm1(y)) if y < -1e-300 else d * math.log(2.0) - math.log(-math.log1p(-bb))
    m = max(1, math.ceil(2.0 / (a * eps) * log_inv_q))
    while laplace_histogram_packing(d, m, a, eps).log_self < math.log1p(-bb):  # guard the float ceiling
        m += 1
    return m
