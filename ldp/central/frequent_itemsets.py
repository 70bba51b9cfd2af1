"""Private frequent itemset mining with the Large Margin Mechanism (CHS §4.1, Corollary 1), against the
exponential mechanism and report-noisy-max (max-of-Laplaces), over astronomically large itemset universes.

Setting (CHS §4.1). A catalogue I of items; each of n users holds a basket (a set of at most B items); the
universe U = (I choose r) holds every r-itemset, K = |U| = C(|I|, r); the score of an itemset i is its
support ``f(i, D)`` = the fraction of baskets that contain it. Replacing one basket moves every support by at
most 1/n (an r-subset of a set is counted once per basket), so f(i, ·) is (1/n)-Lipschitz (CHS Def. 2).
Only the L ≤ n·C(B, r) itemsets that occur are enumerated; the K − L others share support 0 and are the
*tail* block of the mechanisms (``tail_size``), so K may be 10^300 or more.

Selection (``select_frequent_itemset``): privately pick an itemset of (near-)maximal support with

* ``"lmm"``: ``ldp.central.large_margin.large_margin_mechanism`` at (ε, δ): (ε, δ)-DP (CHS Theorem 2). Under
  Corollary 1's condition it stops at some ℓ ≤ L and its output law does not depend on K;
* ``"em"``: ``ldp.core.exponential_mechanism.exponential_mechanism`` on the counts, Pr ∝ exp(ε·n·f/2)
  (CHS §2.2): ε-DP; fails once ln K ≳ ε·n·f_max/2 (the itemsets of support 0 outweigh the top one);
* ``"rnm"``: report-noisy-max, argmax f + Lap(2/(εn)) (CHS §2.2, Bhaskar et al.; the replace-one scale of
  ``ldp.central.large_margin.report_noisy_max``), with the tail's maximum drawn in one step from its exact
  law (``report_noisy_max_tail``): ε-DP; fails once the largest of K Laplaces, ≈ (2/(εn))·ln(K/2),
  exceeds f_max.

When a mechanism picks the tail block, the itemset is a uniformly random member of the K − L unobserved
r-itemsets of the catalogue (``draw_unobserved``): a token "some unobserved itemset" would not be private
(the set of unobserved itemsets is data-dependent), and neither would a universe restricted to the observed
itemsets (``tests/central/test_frequent_itemsets.py`` audits both broken variants). So the selection needs
the catalogue size |I| even for LMM: its fallback ℓ = K is the exponential mechanism over all of U. CHS's
remark that LMM "does not need to know I" holds for the event that its margin test passes before the tail.

Data (``planted_baskets``): a documented, seeded generator of baskets with planted patterns of exactly known
support (a simplified IBM Quest-style generator), so that the data's margin is fixed while the universe grows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from numpy.typing import ArrayLike

from ldp.central.large_margin import large_margin_mechanism, report_noisy_max
from ldp.core.errors import ParameterError, require_epsilon, require_integer, require_positive_finite, require_probability
from ldp.core.exponential_mechanism import TAIL, exponential_mechanism
from ldp.core.rng import generator

__all__ = [
    "MECHANISMS",
    "ItemsetSupports",
    "ItemsetSelection",
    "planted_baskets",
    "itemset_supports",
    "universe_size",
    "max_laplace_of",
    "report_noisy_max_tail",
    "draw_unobserved",
    "select_frequent_itemset",
]

MECHANISMS: tuple[str, ...] = ("lmm", "em", "rnm")
"""The selections: Large Margin Mechanism, exponential mechanism, report-noisy-max."""

_ENUMERATE_BELOW = 1 << 16  # universes this small: draw an unobserved itemset from the explicit list


def planted_baskets(
    n: int,
    active_items: int,
    basket_size: int,
    r: int,
    pattern_counts: Sequence[int],
    zipf_exponent: float = 0.5,
    seed: int = 0,
) -> list[tuple[int, ...]]:
    """n baskets with planted r-itemsets of exactly known support, plus Zipf-distributed noise items.

    A simplified IBM Quest-style generator (Agrawal–Srikant 1994 plant "potentially large itemsets" in
    transactions; here the planting is exact). Pattern j is the r-itemset {j·r, …, j·r + r − 1}. A seeded
    permutation of the baskets gives pattern j to exactly ``pattern_counts[j]`` baskets, at most one pattern
    per basket (so no two patterns combine into a frequent mixed itemset). Every basket then gets
    ``basket_size − r`` noise slots (``basket_size`` without a pattern), each an item of the noise pool
    {P·r, …, active_items − 1} drawn with probability ∝ rank^(−zipf_exponent), with replacement; repeats
    are merged, so a basket holds at most ``basket_size`` items. Noise never uses a pattern item, so
    pattern j's support count is exactly ``pattern_counts[j]``. Deterministic: a pure function of its
    arguments (``ldp.core.rng.generator(seed, "planted-baskets")``).

    Parameters
    ----------
    n : int
        Number of baskets (users).
    active_items : int
        Items that occur at all: ids 0 … active_items − 1 (the catalogue may be much larger).
    basket_size : int
        B, the most items in one basket (≥ r).
    r : int
        Pattern length (the itemset length mined).
    pattern_counts : sequence of int
        Support count of each planted pattern; their sum is at most n.
    zipf_exponent : float
        s ≥ 0 of the noise pool's Zipf law (0: uniform).
    seed : int
        The seed.

    Returns
    -------
    list of tuple of int
        The baskets, each a sorted tuple of distinct item ids.
    """
    nn = require_integer("n", n, 1)
    rr = require_integer("r", r, 1)
    bs = require_integer("basket_size", basket_size, rr)
    counts = [require_integer("pattern_counts[j]", c, 0) for c in pattern_counts]
    if sum(counts) > nn:
        raise ParameterError(f"pattern_counts must sum to at most n = {nn} (one pattern per basket), got {sum(counts)}")
    first_noise = len(counts) * rr
    pool = require_integer("active_items", active_items, 1)
    if pool < first_noise + bs:
        raise ParameterError(f"active_items must be ≥ {first_noise + bs} (the patterns' {first_noise} items + one basket of noise), got {pool}")
    s = float(zipf_exponent)
    if not (math.isfinite(s) and s >= 0):
        raise ParameterError(f"zipf_exponent must be a finite number ≥ 0, got {zipf_exponent!r}")
    rng = generator(seed, "planted-baskets")
    owner = np.full(nn, -1, dtype=np.int64)
    perm = rng.permutation(nn)
    start = 0
    for j, c in enumerate(counts):
        owner[perm[start : start + c]] = j
        start += c
    weights = np.arange(1, pool - first_noise + 1, dtype=np.float64) ** (-s)
    noise = first_noise + rng.choice(pool - first_noise, size=(nn, bs), p=weights / weights.sum())
    baskets: list[tuple[int, ...]] = []
    for b in range(nn):
        j = int(owner[b])
        planted = range(j * rr, (j + 1) * rr) if j >= 0 else range(0)
        extra = noise[b, : bs - len(planted)]
        baskets.append(tuple(sorted(set(planted) | {int(x) for x in extra})))
    return baskets


@dataclass(frozen=True)
class ItemsetSupports:
    """The observed r-itemsets (rows of ``itemsets``, sorted item ids, lexicographic order) and their support counts.

    ``n`` is the number of baskets (the Lipschitz constant of the frequencies is 1/n).
    """

    itemsets: np.ndarray
    counts: np.ndarray
    n: int
    r: int

    @property
    def frequencies(self) -> np.ndarray:
        """f(i, D) = count / n for the observed itemsets."""
        return self.counts / self.n

    @property
    def max_item(self) -> int:
        """The largest item id that occurs in an observed itemset (−1 if none)."""
        return int(self.itemsets.max()) if self.itemsets.size else -1


def itemset_supports(baskets: Iterable[Iterable[int]], r: int) -> ItemsetSupports:
    """Support counts of every r-itemset that occurs in ``baskets`` (CHS §4.1's f, times n).

    A basket is a set: an item listed twice counts once, so each basket adds at most 1 to each itemset's
    count and replacing one basket moves each count by at most 1 (sensitivity 1; f = count/n is
    (1/n)-Lipschitz). Baskets are grouped by length and each group's r-subsets are taken with one fancy
    index, then counted with ``np.unique(axis=0)``.
    """
    rr = require_integer("r", r, 1)
    by_length: dict[int, list[list[int]]] = {}
    n = 0
    for basket in baskets:
        items = sorted({int(x) for x in basket})
        if items and items[0] < 0:
            raise ParameterError(f"item ids must be integers ≥ 0, got {items[0]} in basket {n}")
        n += 1
        if len(items) >= rr:
            by_length.setdefault(len(items), []).append(items)
    if n == 0:
        raise ParameterError("itemset_supports needs at least one basket")
    parts = []
    for length, group in by_length.items():
        idx = np.array(list(combinations(range(length), rr)), dtype=np.intp)
        parts.append(np.asarray(group, dtype=np.int64)[:, idx].reshape(-1, rr))
    if not parts:
        return ItemsetSupports(np.empty((0, rr), dtype=np.int64), np.empty(0, dtype=np.int64), n, rr)
    itemsets, counts = np.unique(np.concatenate(parts), axis=0, return_counts=True)
    return ItemsetSupports(itemsets.astype(np.int64), counts.astype(np.int64), n, rr)


def universe_size(catalogue_size: int, r: int) -> int:
    """K = C(|I|, r), the number of r-itemsets of a catalogue of |I| items (an exact Python int)."""
    return math.comb(require_integer("catalogue_size", catalogue_size, 1), require_integer("r", r, 1))


def max_laplace_of(count: int, scale: float, rng: np.random.Generator) -> float:
    """One draw of max(X_1, …, X_count) for iid Lap(scale), exactly, for any ``count`` ≥ 1 (a Python int).

    P[max ≤ x] = F(x)^count, so with E ~ Exp(1) the draw solves 1 − F(x) = s := −expm1(−E/count)
    (inverse-CDF; −ln U ~ Exp(1)). ln s is computed in log space so that count may exceed 10^308; then
    x = −scale·ln(2s) if s ≤ 1/2, else scale·ln(2(1 − s)) (the Laplace quantile).
    """
    m = require_integer("count", count, 1)
    b = require_positive_finite("scale", scale)
    e = float(rng.standard_exponential())
    log_y = math.log(e) - math.log(m) if e > 0 else -math.inf  # y = E / count
    if log_y < -30.0:
        log_s = log_y - math.exp(log_y) / 2.0  # ln(1 − e^{−y}) = ln y − y/2 + O(y²)
    else:
        log_s = math.log(-math.expm1(-math.exp(log_y)))
    if log_s <= -math.log(2.0):
        return -b * (math.log(2.0) + log_s)
    return b * (math.log(2.0) + math.log1p(-math.exp(log_s)))


def report_noisy_max_tail(
    scores: ArrayLike,
    n: int,
    epsilon: float,
    rng: np.random.Generator,
    tail_size: int = 0,
    tail_score: float = 0.0,
) -> int:
    """Report-noisy-max over the explicit ``scores`` plus ``tail_size`` items sharing ``tail_score``.

    Every score gets Lap(2/(εn)) (the replace-one scale of ``ldp.central.large_margin.report_noisy_max``,
    which this calls when there is no tail); the tail's largest noisy score is one draw of
    ``max_laplace_of(tail_size, ·)``, which has the law of the maximum over its members, so the output law
    is that of report-noisy-max over the whole universe. Returns an index into ``scores`` or ``TAIL``.
    ε-DP for (1/n)-Lipschitz scores (Bhaskar et al.; CHS §2.2).
    """
    nn = require_integer("n", n, 1)
    eps = require_epsilon(epsilon)
    f = np.asarray(scores, dtype=np.float64).ravel()
    tail = require_integer("tail_size", tail_size, 0)
    if tail == 0:
        if f.size == 0:
            raise ParameterError("report-noisy-max needs at least one candidate (scores empty, tail_size=0)")
        return report_noisy_max(f, nn, eps, rng)
    scale = 2.0 / (eps * nn)
    tail_top = float(tail_score) + max_laplace_of(tail, scale, rng)
    if f.size == 0:
        return TAIL
    noisy = f + rng.laplace(0.0, scale, size=f.shape)
    i = int(np.argmax(noisy))
    return i if noisy[i] > tail_top else TAIL


def _uniform_below(m: int, rng: np.random.Generator) -> int:
    """A uniform integer in [0, m) for any Python int m ≥ 1 (rejection from random bits)."""
    if m <= 1 << 62:
        return int(rng.integers(m))
    bits = (m - 1).bit_length()
    nbytes = (bits + 7) // 8
    while True:
        x = int.from_bytes(rng.bytes(nbytes), "little") >> (8 * nbytes - bits)
        if x < m:
            return x


def draw_unobserved(supports: ItemsetSupports, catalogue_size: int, rng: np.random.Generator) -> tuple[int, ...]:
    """A uniformly random r-itemset of the catalogue {0, …, |I| − 1} that does not occur in the data.

    This is how a tail output of a mechanism becomes an itemset: the mechanisms' laws treat the tail's
    members alike, so the member is uniform. Small universes (K < 2^16) are enumerated; larger ones use
    rejection (a uniform r-subset, redrawn while it occurs; L ≪ K there, so few redraws).
    """
    r = supports.r
    K = universe_size(catalogue_size, r)
    L = supports.counts.size
    if K - L <= 0:
        raise ParameterError(f"every one of the K = {K} itemsets occurs: there is no unobserved itemset to draw")
    observed = {tuple(int(v) for v in row) for row in supports.itemsets} if K < _ENUMERATE_BELOW else None
    if observed is not None:
        rest = [c for c in combinations(range(catalogue_size), r) if c not in observed]
        return rest[int(rng.integers(len(rest)))]
    while True:
        items = {_uniform_below(catalogue_size, rng) for _ in range(r)}
        if len(items) < r:
            continue  # a repeated item: not a uniform r-subset, redraw
        cand = tuple(sorted(items))
        if L and cand[-1] <= supports.max_item and np.any(np.all(supports.itemsets == np.array(cand, dtype=np.int64), axis=1)):
            continue  # it occurs in the data
        return cand


@dataclass(frozen=True)
class ItemsetSelection:
    """A selected itemset, its true support count and frequency, and how it was found.

    ``observed``: whether it occurs in the data (else it is a uniform unobserved itemset, support 0);
    ``ell``, ``truncated``: LMM's chosen ℓ and whether its margin scan hit its cap (None / False otherwise).
    """

    mechanism: str
    itemset: tuple[int, ...]
    count: int
    frequency: float
    observed: bool
    ell: int | None = None
    truncated: bool = False


def select_frequent_itemset(
    supports: ItemsetSupports,
    catalogue_size: int,
    mechanism: str,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    max_steps: int = 1 << 12,
) -> ItemsetSelection:
    """Privately select an r-itemset of (near-)maximal support over U = (I choose r) (CHS §4.1, Corollary 1).

    Parameters
    ----------
    supports : ItemsetSupports
        The data's observed itemsets and counts (``itemset_supports``).
    catalogue_size : int
        |I|, fixed before seeing the data (a Python int; may be astronomically large). Items of the data
        must lie in {0, …, |I| − 1}.
    mechanism : {"lmm", "em", "rnm"}
        LMM at (ε, δ) (CHS Alg. 1), the exponential mechanism at ε, or report-noisy-max at ε.
    epsilon : float
        The privacy parameter ε (CHS calls it α).
    delta : float
        The δ of LMM's (ε, δ)-DP; the pure mechanisms ignore it.
    rng : numpy.random.Generator
        The curator's randomness.
    max_steps : int
        LMM's margin-scan cap (``large_margin_mechanism``); recorded as ``truncated`` when reached.

    Returns
    -------
    ItemsetSelection
    """
    if mechanism not in MECHANISMS:
        raise ParameterError(f"mechanism must be one of {', '.join(MECHANISMS)}; got {mechanism!r}")
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    require_integer("catalogue_size", catalogue_size, supports.r)  # K = C(|I|, r) ≥ 1
    if supports.max_item >= catalogue_size:
        raise ParameterError(f"catalogue_size must exceed every item id; got {catalogue_size} with item {supports.max_item} in the data")
    n = supports.n
    counts = supports.counts.astype(np.float64)
    f = counts / n
    # every r-itemset of the catalogue that does not occur has support 0: one tail block
    tail = universe_size(catalogue_size, supports.r) - supports.counts.size
    ell: int | None = None
    truncated = False
    if mechanism == "lmm":
        out = large_margin_mechanism(f, n, eps, dlt, rng, tail_size=tail, tail_score=0.0, max_steps=max_steps)
        idx, ell, truncated = out.index, out.ell, out.truncated
    elif mechanism == "em":
        # Pr ∝ exp(ε·count/2) = exp(n·ε·f/2) (CHS §2.2); counts have sensitivity 1 under replace-one
        idx = exponential_mechanism(counts, eps, rng, tail_size=tail, tail_score=0.0)
    else:
        idx = report_noisy_max_tail(f, n, eps, rng, tail_size=tail, tail_score=0.0)
    if idx == TAIL:
        return ItemsetSelection(mechanism, draw_unobserved(supports, catalogue_size, rng), 0, 0.0, False, ell, truncated)
    c = int(supports.counts[idx])
    return ItemsetSelection(mechanism, tuple(int(v) for v in supports.itemsets[idx]), c, c / n, True, ell, truncated)
