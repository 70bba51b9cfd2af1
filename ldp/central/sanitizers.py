"""Private sanitizers (BNS §4) for POINT_d and THRESH_d, and sanitization ⇒ proper learning on POINT_d (BNS §5).

A sanitizer releases a data structure Est with sup_c |Q_c(S) − Est(c)| ≤ α w.p. ≥ 1−β, where
Q_c(S) = |{x ∈ S : c(x) = 1}|/m (BNS Def 2.16). Data: ``x`` a 1-D integer array of points in [0, 2^bits)
(int64, or an object array of Python ints for POINT_d with bits > 62). Neighbours are replace-one.

POINT_d (point queries, Q_{c_j}(S) = frequency of j):

* :func:`stability_histogram` — the stability-based histogram (reference spec M7 [ENG], not in BNS):
  c_x + Lap(2/ε) released iff it exceeds 1 + (2/ε)ln(2/δ). (ε,δ)-DP: the two counts a replacement moves
  shift by 1 (density ratio ≤ e^{ε/2} each), and a count that is 0 on one side is released with probability
  ≤ δ/4. Error O(log(1/δ)/(εm)), no d. Any m.
* :func:`san_points` — SanPoints (BNS §4.2, Fig. 9, Thm 4.6; structure [RECON-H], ε1/δ1 [RECON-M]):
  ⌈2/α⌉ rounds of the Choosing Mechanism (α/2) over the not-yet-chosen points, each chosen point's count
  released with Lap(1/ε1). 4/α mechanisms at (ε1, δ1) compose (advanced composition, δ' = δ/5) to (ε,δ)
  (:func:`san_points_parameters`). **Theory mode only:** the Choosing Mechanism refuses m below its
  Lemma 4.4 minimum (≈ 6.2·10^5 at α = 0.1, ε = 1, δ = 1e-6); use the stability histogram below it.

Both return a :class:`PointSanitization`; a k-point set's frequency is the sum of its points' estimates
(BNS Thm 4.7: run with accuracy α/k).

THRESH_d (range queries, Q_{c_j}(S) = fraction of points < j):

* :func:`rec_sanitizer` — RecSanitizer (BNS §4.3, Fig. 11, Thm 4.13; [RECON-M] constants αm/8, αm/32,
  3αm/32) in **practical mode** (reference spec B8 [ENG]): the Choosing Mechanism of steps 9–10 is replaced
  by the exponential mechanism over all candidates (pure, no m-condition), and the call budget is
  N = ⌈10/α⌉ instead of 77/α. Each call uses ≤ 4 pure ε0-DP mechanisms (two Laplace counts, the
  exponential mechanism over the interval length 2^k — RecConcave's base case, since log(range) ≤ 32 —
  and the exponential mechanism over candidates). **Privacy is accounted for the hard cap** of 4N
  mechanisms (advanced composition, BNS Thm 2.5 as restated in spec M8), never for the calls a run makes:
  the released ε0 is a function of (α, ε, δ) only. Releases a multiset Ŝ (a proper sanitizer).

Sanitization ⇒ proper learning (BNS §5, Lemma 5.3 with C^label; [ENG] simulator version):

* :func:`learn_point_by_sanitization` — sanitize the labelled sample as points of X × {0,1} with the
  stability histogram, then output the empirical-risk minimiser over POINT_d *on the sanitized data*:
  err_S(c_j) = P̂(y=1) − f̂(j,1) + f̂(j,0), so the ERM is argmax_j f̂(j,1) − f̂(j,0) (an unreleased point if
  no released value is positive). (ε,δ)-DP (post-processing of one sanitizer run), proper, no d.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ldp.central.choosing import choosing_mechanism, choosing_min_sample_size
from ldp.central.point import PointHypothesis, random_point
from ldp.core.errors import require_epsilon, require_integer, require_probability
from ldp.core.exponential_mechanism import TAIL, exponential_mechanism
from ldp.core.learner_result import LearnerResult

__all__ = [
    "PointSanitization",
    "ThresholdSanitization",
    "stability_histogram_threshold",
    "stability_histogram",
    "SanPointsParameters",
    "san_points_parameters",
    "san_points",
    "point_max_error",
    "pure_composition_epsilon0",
    "rec_sanitizer_budget",
    "window_counts",
    "sanitizer_length_quality",
    "sanitizer_candidates",
    "rec_sanitizer",
    "cdf_max_error",
    "learn_point_by_sanitization",
]


def _check_points(x: np.ndarray, bits: int, allow_big: bool) -> np.ndarray:
    xa = np.asarray(x)
    if xa.ndim != 1 or xa.size == 0:
        raise ValueError(f"x must be a non-empty 1-D array of points; got shape {xa.shape}")
    if bits > 62:
        if not allow_big:
            raise ValueError(f"this sanitizer needs bits ≤ 62 (int64 points); got bits={bits}")
        xa = xa.astype(object)
    else:
        xa = xa.astype(np.int64)
    lo, hi = min(xa), max(xa)
    if lo < 0 or hi >= 2**bits:
        raise ValueError(f"points must lie in [0, 2^{bits}); got range [{lo}, {hi}]")
    return xa


@dataclass(frozen=True)
class PointSanitization:
    """Est for POINT_d: ``frequencies[i]`` estimates the frequency of ``points[i]``; every other point gets 0."""

    points: np.ndarray
    frequencies: np.ndarray
    m: int
    epsilon: float
    delta: float
    algorithm: str
    details: dict = field(default_factory=dict)

    def estimate(self, queries: np.ndarray) -> np.ndarray:
        """Est(c_j) for each j in ``queries`` (0 for unreleased points)."""
        lookup = {int(p): float(f) for p, f in zip(self.points, self.frequencies)}
        return np.array([lookup.get(int(q), 0.0) for q in np.asarray(queries).ravel()])

    def estimate_set(self, Y: np.ndarray) -> float:
        """Est(c_Y) = Σ_{x∈Y} Est(x) for a k-point concept (BNS Thm 4.7; run the sanitizer with α/k)."""
        return float(np.sum(self.estimate(np.unique(np.asarray(Y)))))


def point_max_error(x: np.ndarray, san: PointSanitization) -> float:
    """sup over all 2^d point queries of |Q_{c_j}(S) − Est(c_j)| (points absent from S and Est score 0)."""
    pts, counts = np.unique(np.asarray(x), return_counts=True)
    truth = {int(p): c / len(x) for p, c in zip(pts, counts)}
    est = {int(p): float(f) for p, f in zip(san.points, san.frequencies)}
    keys = set(truth) | set(est)
    return max((abs(truth.get(k, 0.0) - est.get(k, 0.0)) for k in keys), default=0.0)


# ----------------------------------------------------------------------------------------------------
# stability histogram (M7)


def stability_histogram_threshold(epsilon: float, delta: float) -> float:
    """Release threshold 1 + (2/ε)·ln(2/δ) on the noisy count (reference spec M7)."""
    return 1.0 + 2.0 / require_epsilon(epsilon) * math.log(2.0 / require_probability("delta", delta))


def stability_histogram(x: np.ndarray, bits: int, epsilon: float, delta: float, rng: np.random.Generator) -> PointSanitization:
    """Stability-based histogram: c_x + Lap(2/ε) for each x in S, kept iff above 1 + (2/ε)ln(2/δ). (ε,δ)-DP.

    Points absent from S are never released (that is where δ goes: a count of 1 passes w.p. δ/4).
    Frequencies are noisy counts / m. Works for any d (object arrays of ints above 62 bits).
    """
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    d = require_integer("bits", bits, 1)
    xa = _check_points(x, d, allow_big=True)
    pts, counts = np.unique(xa, return_counts=True)
    noisy = counts + rng.laplace(0.0, 2.0 / eps, size=counts.size)
    keep = noisy > stability_histogram_threshold(eps, dlt)
    return PointSanitization(pts[keep], noisy[keep] / xa.size, int(xa.size), eps, dlt, "stability histogram (M7)")


# ----------------------------------------------------------------------------------------------------
# SanPoints (BNS Thm 4.6)


@dataclass(frozen=True)
class SanPointsParameters:
    """Per-mechanism (ε1, δ1), failure β1, rounds ⌈2/α⌉, and the Choosing minimum m for α/2 at (ε1, δ1)."""

    epsilon1: float
    delta1: float
    beta1: float
    rounds: int
    min_m: int
    epsilon_total: float
    delta_total: float


def san_points_parameters(alpha: float, beta: float, epsilon: float, delta: float) -> SanPointsParameters:
    """ε1 = ε/sqrt(8k ln(5/δ)), δ1 = 4δ/(5k), β1 = αβ/4 and the composed guarantee, for the
    k = 2⌈2/α⌉ mechanisms SanPoints runs.

    k mechanisms at (ε1, δ1) with δ' = δ/5 give ε_total = sqrt(2k ln(5/δ))·ε1 + 2k·ε1² ≤ ε and
    δ_total = k·δ1 + δ/5 = δ (advanced composition, BNS Thm 2.5; spec B6). When 2/α is an integer
    this is [RECON-M, pydp]'s ε1 = ε/sqrt(32 ln(5/δ)/α), δ1 = αδ/5 (k = 4/α). When it is not,
    their 4/α undercounts the ⌈2/α⌉ rounds of two mechanisms each: at α = 0.45 their δ1 composes
    to 10·δ1 + δ/5 = 0.11 > δ = 0.1 (tests/central/test_san_points_emitted_exact.py).
    """
    a = require_probability("alpha", alpha, high=0.5)
    b = require_probability("beta", beta, high=0.5)
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    k = 2.0 * math.ceil(2.0 / a)  # each of the ⌈2/α⌉ rounds: Choosing, then a Laplace count
    eps1 = eps / math.sqrt(8.0 * k * math.log(5.0 / dlt))
    delta1 = 4.0 * dlt / (5.0 * k)
    eps_total = math.sqrt(2.0 * k * math.log(5.0 / dlt)) * eps1 + 2.0 * k * eps1**2
    return SanPointsParameters(
        eps1, delta1, a * b / 4.0, math.ceil(2.0 / a), choosing_min_sample_size(a / 2.0, eps1, delta1, 1),
        eps_total, k * delta1 + dlt / 5.0,
    )


def san_points(
    x: np.ndarray, bits: int, alpha: float, beta: float, epsilon: float, delta: float, rng: np.random.Generator
) -> PointSanitization:
    """SanPoints (BNS Fig. 9): ⌈2/α⌉ × [Choosing(α/2) over unchosen points, then count + Lap(1/ε1)]. (ε,δ)-DP.

    Raises ``ValueError`` when m is below the Choosing Mechanism's Lemma 4.4 minimum at (α/2, ε1, δ1)
    (privacy depends on m there). A round that returns ⊥ releases nothing but is still charged.
    """
    prm = san_points_parameters(alpha, beta, epsilon, delta)
    d = require_integer("bits", bits, 1)
    xa = _check_points(x, d, allow_big=True)
    m = int(xa.size)
    if m < prm.min_m:
        raise ValueError(
            f"SanPoints needs m ≥ {prm.min_m} (Choosing Mechanism at α/2={alpha / 2:g}, ε1={prm.epsilon1:.4g}, "
            f"δ1={prm.delta1:.3g}; BNS Lemma 4.4); got m={m}. Below it use stability_histogram"
        )
    pts, counts = np.unique(xa, return_counts=True)
    available = np.ones(pts.size, dtype=bool)
    chosen, values = [], []
    for _ in range(prm.rounds):
        scores = np.where(available, counts, 0).astype(np.float64)  # q|_F: 1-bounded growth
        i = choosing_mechanism(scores, m, alpha / 2.0, prm.epsilon1, prm.delta1, rng, k=1)
        if i is None:
            continue
        available[i] = False
        chosen.append(i)
        values.append((counts[i] + float(rng.laplace(0.0, 1.0 / prm.epsilon1))) / m)
    idx = np.array(chosen, dtype=np.int64)
    return PointSanitization(
        pts[idx], np.array(values), m, float(epsilon), float(delta), "SanPoints (BNS Thm 4.6)",
        details={"epsilon1": prm.epsilon1, "delta1": prm.delta1, "rounds": prm.rounds},
    )


# ----------------------------------------------------------------------------------------------------
# RecSanitizer (BNS Thm 4.13), practical mode


def pure_composition_epsilon0(k: int, epsilon: float, delta: float) -> float:
    """Largest ε0 with sqrt(2k ln(1/δ))·ε0 + 2k·ε0² ≤ ε: k adaptive ε0-DP mechanisms are (ε, δ)-DP (BNS Thm 2.5)."""
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    if k < 1:
        raise ValueError(f"k must be ≥ 1; got k={k}")
    b = math.sqrt(2.0 * k * math.log(1.0 / dlt))
    return (-b + math.sqrt(b * b + 8.0 * k * eps)) / (4.0 * k)


def rec_sanitizer_budget(alpha: float, budget_factor: float = 10.0) -> int:
    """Hard cap N = ⌈budget_factor/α⌉ on RecSanitizer calls (practical 10/α; the paper's [RECON-M] 77/α)."""
    a = require_probability("alpha", alpha, high=0.5)
    if not budget_factor > 0:
        raise ValueError(f"budget_factor must be > 0; got {budget_factor!r}")
    return math.ceil(budget_factor / a)


def window_counts(points: np.ndarray, a: int, b: int, levels: int) -> np.ndarray:
    """L(j) = max_x |S ∩ [x, x+2^j−1] ∩ [a,b]| for j = −1..levels (L(−1) = 0); ``points`` sorted (step 5)."""
    lo, hi = np.searchsorted(points, a, "left"), np.searchsorted(points, b, "right")
    p = points[lo:hi]
    L = np.zeros(levels + 2)
    if p.size:
        for j in range(levels + 1):  # an optimal window can start at a sample point
            ends = np.minimum(p + (1 << j) - 1, b)
            L[j + 1] = float(np.max(np.searchsorted(p, ends, "right") - np.arange(p.size)))
    return L


def sanitizer_length_quality(L: np.ndarray, alpha: float, m: int) -> np.ndarray:
    """Step 6: Q(j) = min{L(j) − αm/32, 3αm/32 − L(j−1)}, j = 0..l (Claim 4.9: quasi-concave, sensitivity 1)."""
    return np.minimum(L[1:] - alpha * m / 32.0, 3.0 * alpha * m / 32.0 - L[:-1])


def _uniform_absent(a: int, b: int, present: np.ndarray, rng: np.random.Generator) -> int:
    taken = set(int(v) for v in present)
    while True:  # absent points are a tail of size ≥ 1 here
        v = int(rng.integers(a, b + 1))
        if v not in taken:
            return v


def sanitizer_candidates(a: int, b: int, k: int) -> np.ndarray:
    """Steps 9–10's candidates listed explicitly (small ranges; tests): [x, x] for x ∈ [a, b] if k = 0, else the
    length-2^{k+1} intervals tiling [a, b] from a, then those from a + 2^k (trimmed to b). Rows (start, end).

    The sampler below draws from the same exponential mechanism without listing the empty candidates.
    """
    if k == 0:
        x = np.arange(a, b + 1)
        return np.stack([x, x], axis=1)
    length, shift = 1 << (k + 1), 1 << k
    starts = np.concatenate([np.arange(a, b + 1, length), np.arange(a + shift, b + 1, length)])
    return np.stack([starts, np.minimum(starts + length - 1, b)], axis=1)


def _choose_interval(p: np.ndarray, a: int, b: int, k: int, eps0: float, rng: np.random.Generator) -> tuple[int, int]:
    """Steps 9–10 (practical mode): ExpMech(ε0) over the candidates, q = |S ∩ candidate| (sensitivity 1)."""
    if k == 0:  # candidates: the points of [a, b]
        pts, cnt = np.unique(p, return_counts=True)
        i = exponential_mechanism(cnt.astype(np.float64), eps0, rng, tail_size=(b - a + 1) - pts.size, tail_score=0.0)
        c = _uniform_absent(a, b, pts, rng) if i == TAIL else int(pts[i])
        return c, c
    length, shift = 1 << (k + 1), 1 << k
    n_a = (b - a) // length + 1
    n_b = (b - a - shift) // length + 1 if b - a >= shift else 0
    ia, ca = np.unique((p - a) // length, return_counts=True)
    pb = p[p >= a + shift]
    ib, cb = np.unique((pb - a - shift) // length, return_counts=True)
    scores = np.concatenate([ca, cb]).astype(np.float64)
    i = exponential_mechanism(scores, eps0, rng, tail_size=n_a + n_b - scores.size, tail_score=0.0)
    if i == TAIL:  # a uniformly random empty interval of either partition
        used = set(int(v) for v in ia) | set(n_a + int(v) for v in ib)
        while True:
            g = int(rng.integers(0, n_a + n_b))
            if g not in used:
                break
    else:
        g = int(ia[i]) if i < ia.size else n_a + int(ib[i - ia.size])
    start = a + g * length if g < n_a else a + shift + (g - n_a) * length
    return start, min(start + length - 1, b)


@dataclass(frozen=True)
class ThresholdSanitization:
    """Ŝ as sorted distinct points with multiplicities; Q_j(Ŝ) = |{x ∈ Ŝ : x < j}| / |Ŝ|."""

    points: np.ndarray
    counts: np.ndarray
    m: int
    epsilon: float
    delta: float
    epsilon0: float
    budget: int
    details: dict = field(default_factory=dict)

    def cdf(self, j: np.ndarray) -> np.ndarray:
        """Q_{c_j}(Ŝ) for each j (0 everywhere if Ŝ is empty)."""
        total = int(self.counts.sum())
        if total == 0:
            return np.zeros(np.asarray(j).shape)
        cum = np.concatenate([[0], np.cumsum(self.counts)])
        return cum[np.searchsorted(self.points, np.asarray(j), "left")] / total

    def range_query(self, lo: int, hi: int) -> float:
        """Fraction of Ŝ in [lo, hi) = Q_{c_hi}(Ŝ) − Q_{c_lo}(Ŝ)."""
        v = self.cdf(np.array([lo, hi]))
        return float(v[1] - v[0])


def cdf_max_error(x: np.ndarray, san: ThresholdSanitization) -> float:
    """sup_j |Q_{c_j}(S) − Q_{c_j}(Ŝ)| over all thresholds (both are step functions: check every step)."""
    xs = np.sort(np.asarray(x, dtype=np.int64))
    js = np.unique(np.concatenate([xs, xs + 1, san.points, san.points + 1, [0]]))
    truth = np.searchsorted(xs, js, "left") / xs.size
    return float(np.max(np.abs(truth - san.cdf(js))))


def rec_sanitizer(
    x: np.ndarray,
    bits: int,
    alpha: float,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    budget_factor: float = 10.0,
) -> ThresholdSanitization:
    """RecSanitizer for THRESH_d (BNS Fig. 11), practical mode; (ε,δ)-DP for every input, d ≤ 32.

    ε0 = :func:`pure_composition_epsilon0` (4N, ε, δ) with N = :func:`rec_sanitizer_budget` — the cap, so
    the guarantee does not depend on how many calls the run makes (``details['calls']``, data-dependent and
    therefore *not* part of the privacy claim; it is reported for diagnosis only).
    """
    a_ = require_probability("alpha", alpha, high=0.5)
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    d = require_integer("bits", bits, 1, 32)
    xs = np.sort(_check_points(x, d, allow_big=False))
    m = int(xs.size)
    N = rec_sanitizer_budget(a_, budget_factor)
    eps0 = pure_composition_epsilon0(4 * N, eps, dlt)
    out: dict[int, int] = {}
    stack = [(0, (1 << d) - 1)]
    calls = 0
    while stack and calls < N:  # step 1: halt when the budget is spent
        a, b = stack.pop()
        calls += 1
        lo, hi = np.searchsorted(xs, a, "left"), np.searchsorted(xs, b, "right")
        m_hat = (hi - lo) + float(rng.laplace(0.0, 1.0 / eps0))  # step 2
        if m_hat < a_ * m / 8.0:  # step 3: [c,d] = [a,b]
            out[b] = out.get(b, 0) + max(0, round(m_hat))
            continue
        levels = math.ceil(math.log2(b - a + 1)) if b > a else 0  # step 4
        Q = sanitizer_length_quality(window_counts(xs, a, b, levels), a_, m)  # steps 5–7
        k = exponential_mechanism(Q, eps0, rng)  # step 8: RecConcave's base case (l ≤ 32)
        c, e = _choose_interval(xs[lo:hi], a, b, k, eps0, rng)  # steps 9–10
        c_hat = int(np.searchsorted(xs, e, "right") - np.searchsorted(xs, c, "left")) + float(
            rng.laplace(0.0, 1.0 / eps0)
        )  # step 11
        out[e] = out.get(e, 0) + max(0, round(c_hat))
        if e < b:  # step 12 (left part first: pushed last)
            stack.append((e + 1, b))
        if c > a:
            stack.append((a, c - 1))
    keys = np.array(sorted(out), dtype=np.int64)
    return ThresholdSanitization(
        keys, np.array([out[k] for k in keys.tolist()], dtype=np.int64), m, eps, dlt, eps0, N,
        details={"calls": calls, "unfinished_intervals": len(stack)},
    )


# ----------------------------------------------------------------------------------------------------
# sanitization ⇒ proper learning (BNS §5) on POINT_d


def learn_point_by_sanitization(
    x: np.ndarray, y: np.ndarray, bits: int, epsilon: float, delta: float, rng: np.random.Generator
) -> LearnerResult:
    """Proper POINT_d learner from a sanitizer (BNS Lemma 5.3): ERM on the stability histogram of (x, y).

    Sanitizes the labelled points as the POINT sanitizer over X × {0,1} (the pair (x,y) is the element;
    replacing one example moves two cells, as for any histogram), then returns the c_j minimising the
    sanitized empirical error, i.e. maximising f̂(j,1) − f̂(j,0); a uniformly random unreleased point when no
    released j has a positive score (its sanitized error equals the baseline P̂(y=1)). (ε,δ)-DP, no d.
    """
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    d = require_integer("bits", bits, 1)
    xa = _check_points(x, d, allow_big=True)
    ya = np.asarray(y)
    if ya.shape != xa.shape or not np.all((ya == 0) | (ya == 1)):
        raise ValueError(f"labels y must be a 0/1 array of the same shape as x; got shape {ya.shape}")
    pairs = 2 * xa + (ya.astype(object) if xa.dtype == object else ya.astype(np.int64))  # (x, y) ↦ 2x + y
    san = stability_histogram(pairs, d + 1, eps, dlt, rng)
    score: dict[int, float] = {}
    for p, f in zip(san.points, san.frequencies):
        j = int(p) >> 1
        score[j] = score.get(j, 0.0) + (f if int(p) & 1 else -f)
    best = max(score.items(), key=lambda kv: (kv[1], -kv[0]), default=(None, 0.0))
    if best[0] is not None and best[1] > 0:
        j, branch = int(best[0]), "released"
    else:
        released = np.array(sorted(score), dtype=object)
        j, branch = random_point(d, rng, exclude=released if released.size else None), "baseline"
    return LearnerResult(
        PointHypothesis(j, d), int(xa.size), eps, dlt, "ERM on a sanitized sample (BNS §5, Lemma 5.3)",
        details={"branch": branch, "released_cells": int(san.points.size)},
    )
