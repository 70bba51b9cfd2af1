"""Apple's Count Mean Sketch (CMS) and Hadamard Count Mean Sketch (HCMS), exact on integer cells.

Source: Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine Learning
Journal 1(8), December 2017 (client, sketch and server algorithms for CMS and HCMS; the public
implementation pure-LDP 1.2.0 ``apple_cms`` follows the same pseudocode). Notation: ``hashes`` = K
is the paper's k (the number of hash functions, the sketch's rows), ``width`` = m the sketch's
width, and k (as everywhere in ldp) the number of categories, the query's finite values.

Public setup. A family h_1..h_K: [k] → [m] of **simple tabulation** hashes (Zobrist 1970;
Carter & Wegman 1979; Pătraşcu & Thorup 2012): a category index x < 2^16 is two bytes x_0, x_1 and
h_ℓ(x) = T_ℓ[0, x_0] ⊕ T_ℓ[1, x_1], with every table entry uniform on [m] (m a power of 2). The
tables are drawn from ``ldp.core.rng.generator(hash_seed, ...)``: a pure function of the public
``hash_seed`` in the spec, so the aggregator computes every h_ℓ and nothing about a user's draws
follows from them. Simple tabulation is 3-independent: for distinct keys x, d, d′ the values
h(x), h(d), h(d′) are independent and uniform, which is all the variance below uses.

Kinds (registered with ``@register_randomizer``; params ``hashes``, ``width``, ``hash_seed``):

- ``cms``   A user with category x draws a row j uniform on [K] (the top log2 K bits of draw 0)
            and reports (j, ṽ): v ∈ {±1}^m is −1 except v[h_j(x)] = +1, and each coordinate is
            flipped with probability ≈ 1/(1 + e^{ε/2}). The flips **are** symmetric unary encoding
            of h_j(x) over m categories (``SymmetricUnaryEncoding(ε, range(m))``, draws 1..):
            bit i of its report is 1[ṽ_i = +1], 1 w.p. (2^b − T)/2^b at i = h_j(x) and T/2^b
            elsewhere, T = ⌈2^b/(e^{ε/2} + 1)⌉ at the exact rational ε/2 on b-bit chunks of the
            user's 64-bit draws. Report: uint8 rows, j big-endian in 2 bytes, then the m bits packed.
- ``hcms``  A user draws j uniform on [K] (draw 0) and l uniform on [m] (the top log2 m bits of
            draw 1), takes the Hadamard coefficient w_l = H_m[l, h_j(x)] = (−1)^{popcount(l & h_j(x))}
            of the one-hot vector, and sends it through exact binary randomized response
            (``BinaryRandomizedResponse(ε)`` on draw 2: kept w.p. A/2^64 ≈ e^ε/(e^ε + 1), ``rr_cells``).
            Report: uint16 rows (j, l, y), y = 1[b·w_l = +1].

Privacy (exact, by structure; ``verify_sketch`` checks it, ``enumerated_sketch`` enumerates small
instances for the unchanged ``ldp.core.audit.verify_exact``).

- CMS: Pr[(j, y) | x] = (1/K)·Pr_SUE[y | h_j(x)]. j's law does not depend on x, and given j the
  bits are independent with bit i's law depending only on whether i = h_j(x). For x ≠ x′ every
  factor cancels except bits h_j(x) and h_j(x′) (all of them if the two collide), so the loss is
  exactly the SUE two-bit channel's: ln((2^b − T)²/T²) ≤ ε, by ``ceil_share``.
- HCMS: Pr[(j, l, y) | x] = (1/(K·m))·(A if y = 1[w_l(x) = +1] else B)/2^64: the loss is
  ln(A/B) ≤ ε, binary randomized response's.

Estimator (the paper's server; "(verify)" items of the reference checked here and in
tests/core/test_sketches.py). With the *realized* scale c (E[ṽ_i] = v_i/c):
CMS c = 2^b/(2^b − 2T) (ideal (e^{ε/2} + 1)/(e^{ε/2} − 1)); HCMS c = 2^64/(A − B) (ideal
(e^ε + 1)/(e^ε − 1)). CMS adds x̃ = K·((c/2)·ṽ + ½·𝟙) to row j of the K × m matrix M; HCMS adds
K·c·(±1) to M[j, l] and then sets M ← M·H_mᵀ. Both estimate the count of x as

    N̂(x) = (m/(m − 1))·[(1/K)·Σ_ℓ M[ℓ, h_ℓ(x)] − n/m].

Per user i, Z_i = (1/K)·(its contribution at h_{j_i}(x)) has E[Z_i | hashes] = q_i, the fraction of
rows on which x and x_i collide (1 when x_i = x); so E[N̂(x)] = N(x) over the random family
(pairwise independence alone gives E q_i = 1/m; Pan 2024, arXiv 2406.03785, says the same). The
variances, exact for a fixed population with counts N(d) (derived here; ``count_variance``):

    CMS:  Var N̂(x) = (m/(m−1))²·[n(c² − 1)/4 + (n − N(x))(m − 1)/m² + (m − 1)/(K m²)·Σ_{d≠x} N(d)(N(d) − 1)]
    HCMS: Var N̂(x) = (m/(m−1))²·[n c² − N(x) − (n − N(x))/m² + (m − 1)/(K m²)·Σ_{d≠x} N(d)(N(d) − 1)]

(per user: CMS Var Z_i = (c² − 1)/4 + q_i(1 − q_i), HCMS Var Z_i = c² − q_i², since Z_i = ±c; the
last term is the hash family's: all users holding d share its collisions with x). The reference's
formulas (longitudinal_and_multidimensional.md §4.1) are these without the last term: they treat
collisions as independent across users, exact only as K → ∞ or when every value is rare; at small
K and a skewed population they understate the variance (the test shows it). Given the hash family
(what a simulation with one public seed has), ``conditional_moments`` gives the exact mean and
variance; the mean then carries the family's collision bias (m/(m−1))·Σ_{d≠x} N(d)(q_d − 1/m).

Server cost: building the sketch is O(n·m) (CMS; the bits of every report) or O(n + K·m log m)
(HCMS: one Walsh–Hadamard transform per used row); estimating c candidates is O(K·c) table
lookups. The domain is never enumerated on the users' side; ``estimate_counts`` takes any set of
candidate values (the query's finite values, ≤ 2^16 of them: a value's key is its index).

Open string domains (kinds ``cms_string``, ``hcms_string``: ``StringCountMeanSketch``,
``StringHadamardCountMeanSketch``). As in Apple's deployment, a user's value is any string; on
the users' side it becomes the public 64-bit fingerprint fp(s) (``ldp.core.string_hashing``:
BLAKE2b of the UTF-8 bytes, personalized, one fixed public function), held as a record field of four
16-bit chunks and read through the ``record`` query. The sketch hashes the fingerprint by simple
tabulation over its **8 bytes**: h_ℓ(y) = T_ℓ[0, y_0] ⊕ ... ⊕ T_ℓ[7, y_7] (tables
``key_tables``: uniform on [m], drawn from ``generator(hash_seed, "ldp.sketches.tabulation64",
K, m)``, 4 KiB per hash function). Simple tabulation over any number of characters is
3-independent (Pătraşcu & Thorup 2012: of three distinct keys, one holds a character at some
position that neither other holds, and the other two differ somewhere: each entry XORed in is
fresh and uniform), so for distinct fingerprints the variance
above holds unchanged, with N(d) the counts of distinct strings. The report, its sampler (the
row, the SUE channel or the coin, on the same draws) and the privacy proof are CMS's and HCMS's
unchanged: the proof holds for every map x ↦ h_j(x), so it holds for y ↦ h_j(y) of a fingerprint,
and fp is a deterministic public pre-processing of the string. ``verify_sketch`` audits them by
the same structure and ``sketch_probe`` recomputes the 8-byte hash from its definition. The
server estimates the counts of any candidate strings: ``estimate_counts(reports, ["a", "b"])``
fingerprints them as the users did. Two strings with the same fingerprint (chance ≤ n²/2^65)
are one value to the sketch.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ldp.core.errors import ParameterError, require_epsilon, require_integer
from ldp.core.fourier import walsh_hadamard
from ldp.core.frequency_oracles import MAX_CATEGORIES, FrequencyOracle, SymmetricUnaryEncoding, checked_categories, unary_word, unary_word_draws
from ldp.core.queries import Query
from ldp.core.randomizer_base import TWO64, Randomizer, SpecView, check_params, register_randomizer, row_indices
from ldp.core.rng import Draws, block_pairs, draw_blocks, generator
from ldp.core.rr_mechanisms import BinaryRandomizedResponse
from ldp.core.string_hashing import FINGERPRINT_CHUNKS, FINGERPRINT_HIGH, FINGERPRINT_LOW, fingerprints, is_fingerprint_schema, key_records, record_keys

if TYPE_CHECKING:  # the audit layer (scipy) is imported by the audits below only, not by users' sampling
    from ldp.core.audit import ExactAudit

__all__ = [
    "APPLE_HASHES",
    "APPLE_WIDTH",
    "MAX_HASHES",
    "MAX_WIDTH",
    "SketchOracle",
    "CountMeanSketch",
    "HadamardCountMeanSketch",
    "OffsetDraws",
    "hash_tables",
    "key_tables",
    "tabulation64",
    "OpenDomainSketch",
    "StringCountMeanSketch",
    "StringHadamardCountMeanSketch",
    "sketch_probe",
    "verify_sketch",
    "enumerated_sketch",
    "build_sketch",
    "build_string_sketch",
]

APPLE_HASHES = 65536  # the paper's example deployment: k = 65,536 hash functions, m = 1,024, ε = 4
APPLE_WIDTH = 1024
MAX_HASHES = 1 << 16  # j travels in 16 bits
MAX_WIDTH = 1 << 15  # CMS reads 1 + unary_draws(m, b) ≤ 1 + m/2 draws per report, below the 2^16 draw indices of ``rng``
_LN2 = math.log(2.0)
_BLOCK = 1 << 22  # entries per block of the server's work arrays (memory bound)
SERVER_METHODS = ("auto", "rows", "reports")  # SketchOracle.estimate_counts' ways to the same totals


class OffsetDraws:
    """The draws of ``inner`` from index ``offset`` on: ``bits(d)`` is ``inner.bits(d + offset)``.

    How a sketch hands a sub-mechanism its own draws (CMS: draws 1.. to the SUE channel, draw 0
    being the row) without any draw being read twice."""

    def __init__(self, inner: Draws, offset: int) -> None:
        self.inner, self.offset = inner, int(offset)
        self.users = inner.users

    def bits(self, draw: int = 0) -> np.ndarray:
        return self.inner.bits(draw + self.offset)

    def uniform(self, draw: int = 0) -> np.ndarray:
        return self.inner.uniform(draw + self.offset)

    def block_matrix(self, first: int, count: int, rows: slice | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Forwarded (``ldp.core.rng.draw_blocks``): the inner object's blocks, its fast path."""
        return draw_blocks(self.inner, first + self.offset, count, rows, out)

    def pair_blocks(self, rows: np.ndarray, draws: np.ndarray) -> np.ndarray:
        """Forwarded (``ldp.core.rng.block_pairs``)."""
        return block_pairs(self.inner, rows, np.asarray(draws, dtype=np.int64) + self.offset)


@functools.lru_cache(maxsize=4)
def hash_tables(hash_seed: int, hashes: int, width: int) -> np.ndarray:
    """The public simple-tabulation tables: uint16, shape (hashes, 2, 256), entries uniform on [width].

    A pure function of (hash_seed, hashes, width) through ``ldp.core.rng.generator`` (Philox keyed
    by SHA-256 of the labels): the aggregator and every user compute the same family. Read-only
    (cached and shared); 1 KiB per hash function (64 MiB at the paper's K = 65,536)."""
    rng = generator(hash_seed, "ldp.sketches.tabulation", hashes, width)
    tables = rng.integers(0, width, size=(hashes, 2, 256), dtype=np.uint16)
    tables.flags.writeable = False
    return tables


@functools.lru_cache(maxsize=4)
def key_tables(hash_seed: int, hashes: int, width: int) -> np.ndarray:
    """The public tables of simple tabulation over a 64-bit key's 8 bytes (the open-domain sketches):
    uint16, shape (hashes, 8, 256), entries uniform on [width]; a stream of their own (label
    "ldp.sketches.tabulation64"), so the 2-byte tables above, and every integer sketch's reports,
    are unchanged. 4 KiB per hash function (256 MiB at K = 65,536; 16 MiB at K = 4,096)."""
    rng = generator(hash_seed, "ldp.sketches.tabulation64", hashes, width)
    tables = rng.integers(0, width, size=(hashes, 8, 256), dtype=np.uint16)
    tables.flags.writeable = False
    return tables


def tabulation64(tables: np.ndarray, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """h_rows(keys) = ⊕_b T[rows, b, byte b of key] (byte 0 the least significant), broadcast (int64)."""
    rows = np.asarray(rows, dtype=np.int64)
    k = np.asarray(keys, dtype=np.uint64)
    out = np.zeros(np.broadcast_shapes(rows.shape, k.shape), dtype=np.uint16)
    for b in range(8):
        out ^= tables[rows, b, ((k >> np.uint64(8 * b)) & np.uint64(255)).astype(np.intp)]
    return out.astype(np.int64)


def _power_of_two(kind: str, name: str, value: object, low: int, high: int) -> int:
    v = require_integer(f"{kind}: {name}", value, low, high, f"powers of 2 in [{low}, {high}]")
    if v & (v - 1):
        raise ParameterError(f"{kind}: {name} must be a power of 2 in [{low}, {high}], got {v}")
    return v


@dataclass(frozen=True)
class SketchOracle(FrequencyOracle):
    """What CMS and HCMS share: the public hash family, the row draw and the estimator.

    Subclasses give the report layout, the sampler, ``scale()`` (the realized c) and the per-user
    variance; the estimate of a count is N̂(x) = (m/(m−1))·(S(x) − n/m) with S(x) = (1/K)Σ_ℓ M[ℓ, h_ℓ(x)]
    (module docstring)."""

    epsilon: float
    categories: tuple[float, ...]
    hashes: int = APPLE_HASHES
    width: int = APPLE_WIDTH
    hash_seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "categories", checked_categories(self.kind, self.categories))
        object.__setattr__(self, "hashes", _power_of_two(self.kind, "hashes", self.hashes, 1, MAX_HASHES))
        object.__setattr__(self, "width", _power_of_two(self.kind, "width", self.width, 2, MAX_WIDTH))
        object.__setattr__(self, "hash_seed", require_integer(f"{self.kind}: hash_seed", self.hash_seed, 0, (1 << 64) - 1, "[0, 2^64)"))

    # --- the public hash family ---

    @property
    def tables(self) -> np.ndarray:
        return hash_tables(self.hash_seed, self.hashes, self.width)

    def hash(self, rows: np.ndarray, x: np.ndarray) -> np.ndarray:
        """h_rows(x) for row indices and category indices, broadcast (int64)."""
        t = self.tables
        rows = np.asarray(rows, dtype=np.int64)
        x = np.asarray(x, dtype=np.int64)
        return (t[rows, 0, x & 255] ^ t[rows, 1, x >> 8]).astype(np.int64)

    def _rows_of(self, randomness: Draws) -> np.ndarray:
        """j: the top log2 K bits of draw 0, exactly uniform on [K] and independent of the input."""
        shift = 64 - (self.hashes.bit_length() - 1)
        if shift == 64:  # K = 1 (a shift by 64 is undefined in numpy)
            return np.zeros(len(randomness.users), dtype=np.int64)
        return (randomness.bits(0) >> np.uint64(shift)).astype(np.int64)

    # --- the estimator ---

    def scale(self) -> Fraction:
        """The realized c: E[ṽ_i] = v_i/c (CMS), E[b] = 1/c (HCMS), exactly."""
        raise NotImplementedError

    def support_fractions(self) -> tuple[Fraction, Fraction]:
        """A sketch has no (p*, q*): a report adds ±c-scaled values, not a set of supported categories."""
        raise ParameterError(f"{self.kind} is a sketch, with no support probabilities (p*, q*); its variance is {type(self).__name__}.frequency_variance")

    def _check_rows(self, reports: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _row_ids(self, w: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _row_block(self, w: np.ndarray, rows: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Per used row (sorted reports grouped by ``starts``), the integer row of the sketch."""
        raise NotImplementedError

    def _from_integer(self, total: np.ndarray, n: int) -> np.ndarray:
        """S(x) from the integer Σ_ℓ R[ℓ, h_ℓ(x)] of the rows ``_row_block`` gives."""
        raise NotImplementedError

    def _candidate_indices(self, candidates: np.ndarray | Sequence[Any] | None) -> np.ndarray:
        if candidates is None:
            return np.arange(self.k, dtype=np.int64)
        return self._index(np.asarray(candidates, dtype=np.float64).ravel())

    def _report_values(self, w: np.ndarray, h: np.ndarray) -> np.ndarray:
        """Each report's integer contribution at position h (its row's h_j(x)), shape of ``h``:
        what its row of ``_row_block`` holds at h, for this report alone."""
        raise NotImplementedError

    def _report_totals(self, w: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """Σ_ℓ R[ℓ, h_ℓ(x)] for each candidate x, summed over the reports instead of the rows: each
        report's value at h_j(x) of its own row j (``_report_values``). The same integers as
        ``_integer_totals``' rows (R[ℓ] is the sum of row ℓ's reports, and the transform of
        HCMS is linear), with no row built or transformed: n·|candidates| work instead of the
        rows' n·m (CMS) or min(K, n)·m·log2 m (HCMS). Blocked to _BLOCK entries."""
        j = self._row_ids(w)
        total = np.zeros(len(cand), dtype=np.int64)
        step = max(1, _BLOCK // max(1, len(cand)))  # reports per block, with every candidate
        for u0 in range(0, len(w), step):
            ju = j[u0 : u0 + step]
            width = max(1, _BLOCK // len(ju))
            for c0 in range(0, len(cand), width):
                h = self.hash(ju[:, None], cand[None, c0 : c0 + width])
                total[c0 : c0 + width] += self._report_values(w[u0 : u0 + len(ju)], h).sum(axis=0, dtype=np.int64)
        return total

    def _rows_cost(self, n: int, candidates: int) -> float:
        """The rows path's work, in units of the reports path's per report and candidate (≈ 25 ns:
        one hash and one entry). Measured on the 2-core box (x86-64, numpy 2.4); it decides only
        which path runs, never what it returns."""
        raise NotImplementedError

    def _integer_totals(self, reports: np.ndarray, cand: np.ndarray, method: str = "auto") -> tuple[np.ndarray, int]:
        """(Σ_ℓ R[ℓ, h_ℓ(x)] for each candidate x, n), through the rows (``method="rows"``: each
        used row built, for HCMS transformed, then K lookups per candidate) or through the reports
        (``"reports"``: ``_report_totals``); ``"auto"`` takes the one with less work. The same
        integers either way. Blocked so that no work array passes _BLOCK entries."""
        if method not in SERVER_METHODS:
            raise ParameterError(f"{self.kind}: method must be one of {list(SERVER_METHODS)}, got {method!r}")
        w = self._check_rows(reports)
        n = len(w)
        if n == 0:
            raise ParameterError(f"{self.kind}: no reports to estimate from")
        if method == "reports" or (method == "auto" and n * len(cand) <= self._rows_cost(n, len(cand))):
            return self._report_totals(w, cand), n
        j = self._row_ids(w)
        order = np.argsort(j, kind="stable")
        used, starts = np.unique(j[order], return_index=True)
        ends = np.append(starts[1:], n)
        total = np.zeros(len(cand), dtype=np.int64)
        per = max(1, _BLOCK // self.width)  # rows, and reports, per block
        r = 0
        while r < len(used):
            # rows r..r2 − 1: at most ``per`` rows, whose reports start within ``per`` of the first
            r2 = int(np.searchsorted(starts, starts[r] + per, side="left"))
            r2 = min(max(r2, r + 1), r + per)
            lo, hi = int(starts[r]), int(ends[r2 - 1])
            rows = used[r:r2]
            part = self._row_block(w[order[lo:hi]], rows, starts[r:r2] - lo)
            step = max(1, _BLOCK // len(rows))
            for c0 in range(0, len(cand), step):
                h = self.hash(rows[:, None], cand[None, c0 : c0 + step])
                total[c0 : c0 + step] += np.take_along_axis(part, h, axis=1).sum(axis=0)
            r = r2
        return total, n

    def estimate_counts(self, reports: np.ndarray, candidates: np.ndarray | Sequence[Any] | None = None, *, method: str = "auto") -> np.ndarray:
        """N̂(x) = (m/(m−1))·(S(x) − n/m) for each candidate value (default: every category; the
        open-domain kinds take candidate strings, and have no default).

        The paper's server (sketch, then its estimator), computed from integer row sums without
        materializing the K × m matrix (``sketch_matrix`` does, for small K·m). Unbiased over the
        random public hash family (module docstring); may be negative.

        ``method``: "rows" builds every used row of the sketch (HCMS: and transforms it), then
        reads K entries per candidate — for many candidates; "reports" sums each report's entry at
        its row's h_j(x) — n per candidate, for a few (the question "how many users sent these
        strings?" costs no sketch); "auto" (default) takes the one with less work. Bit for bit the
        same estimates (the same integer totals)."""
        cand = self._candidate_indices(candidates)
        total, n = self._integer_totals(reports, cand, method)
        m = self.width
        return (m / (m - 1)) * (self._from_integer(total, n) - n / m)

    def frequencies(self, reports: np.ndarray) -> np.ndarray:
        """N̂(x)/n for every category: unbiased estimates of the fractions (may be negative)."""
        n = len(np.asarray(reports))
        if n == 0:
            raise ParameterError(f"{self.kind}: no reports to estimate from")
        return self.estimate_counts(reports) / n

    def counts_from_sketch(self, sketch: np.ndarray, n: int, candidates: np.ndarray | None = None) -> np.ndarray:
        """The paper's server estimator on a materialized sketch M: (m/(m−1))·((1/K)Σ_ℓ M[ℓ, h_ℓ(x)] − n/m)."""
        M = np.asarray(sketch, dtype=np.float64)
        if M.shape != (self.hashes, self.width):
            raise ParameterError(f"{self.kind}: the sketch must have shape ({self.hashes}, {self.width}), got {M.shape}")
        cand = self._candidate_indices(candidates)
        rows = np.arange(self.hashes)[:, None]
        mean = M[rows, self.hash(rows, cand[None, :])].sum(axis=0) / self.hashes
        m = self.width
        return (m / (m - 1)) * (mean - n / m)

    # --- variances (module docstring) ---

    def _per_user(self, q: np.ndarray) -> np.ndarray:
        """Var Z_i for a user whose collision fraction with the candidate is q."""
        raise NotImplementedError

    def count_variance(self, true_counts: np.ndarray) -> np.ndarray:
        """Var N̂(x) for every category, exact over users' draws and the random hash family, for a
        fixed population with these counts (module docstring)."""
        N = np.asarray(true_counts, dtype=np.float64)
        if N.shape != (self.k,):
            raise ParameterError(f"{self.kind}: true_counts must have one count per category ({self.k}), got shape {N.shape}")
        m, K = self.width, self.hashes
        pairs = float((N * (N - 1)).sum()) - N * (N - 1)  # Σ_{d≠x} N(d)(N(d) − 1)
        return self.reference_count_variance(N) + (m / (m - 1)) ** 2 * (m - 1) / (K * m**2) * pairs

    def reference_count_variance(self, true_counts: np.ndarray) -> np.ndarray:
        """The reference's approximate variance (collisions independent across users): the exact
        one without the hash family's Σ_{d≠x} N(d)(N(d) − 1) term."""
        raise NotImplementedError

    def frequency_variance(self, f: np.ndarray | float, n: int) -> np.ndarray:
        """Var f̂(x): exact (``count_variance``/n²) when f has one entry per category; for a single
        frequency, the reference's approximation (collisions independent across users)."""
        fa = np.asarray(f, dtype=np.float64)
        if fa.shape == (self.k,):
            return self.count_variance(fa * n) / n**2
        counts = np.zeros(self.k)
        out = np.empty(fa.shape)
        for i, fx in np.ndenumerate(fa):
            counts[0] = fx * n
            counts[1] = (1 - fx) * n  # the rest of the population, its collisions independent
            out[i] = self.reference_count_variance(counts)[0] / n**2
        return out

    def conditional_moments(self, true_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(E, Var) of N̂(x) for every category given *this* hash family (users' draws only).

        q_d(x) = (1/K)·#{ℓ : h_ℓ(d) = h_ℓ(x)}; E = (m/(m−1))·(Σ_d N(d) q_d(x) − n/m) and
        Var = (m/(m−1))²·Σ_d N(d)·Var Z(q_d(x)). O(K·k²): for tests on small instances."""
        N = np.asarray(true_counts, dtype=np.float64)
        x = np.arange(self.k)
        h = self.hash(np.arange(self.hashes)[:, None], x[None, :])  # (K, k)
        q = np.zeros((self.k, self.k))
        for ell in range(self.hashes):
            q += h[ell][:, None] == h[ell][None, :]
        q /= self.hashes  # q[x, d]
        m, n = self.width, N.sum()
        mean = (m / (m - 1)) * (q @ N - n / m)
        var = (m / (m - 1)) ** 2 * (self._per_user(q) @ N)
        return mean, var

    # --- the paper's matrix ---

    def sketch_matrix(self, reports: np.ndarray) -> np.ndarray:
        """The paper's K × m sketch M (float64), materialized: refused above 2^24 entries."""
        if self.hashes * self.width > 1 << 24:
            raise ParameterError(f"{self.kind}: a {self.hashes} × {self.width} sketch is too large to materialize; use estimate_counts")
        w = self._check_rows(reports)
        j = self._row_ids(w)
        order = np.argsort(j, kind="stable")
        used, starts = np.unique(j[order], return_index=True)
        M = np.zeros((self.hashes, self.width))
        if len(w):
            rows = self._row_block(w[order], used, starts)
            counts = np.diff(np.append(starts, len(w)))
            M[used] = self._matrix_rows(rows, counts)
        return M

    def _matrix_rows(self, rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def output_domain(self) -> None:
        return None  # K·2^m (CMS) or 2Km (HCMS) reports: ``verify_sketch``, ``enumerated_sketch``


@dataclass(frozen=True)
class CountMeanSketch(SketchOracle):
    """Apple's Count Mean Sketch (module docstring), exact on integer cells.

    >>> R = CountMeanSketch(4.0, tuple(range(16)), hashes=64, width=32)
    >>> R.report_columns, round(float(R.scale()), 4)  # 2 + 32/8 bytes; c = (e² + 1)/(e² − 1)
    (6, 1.3131)
    >>> verify_sketch(R).passed
    True
    """

    kind: ClassVar[str] = "cms"
    report_dtype: ClassVar[type[np.generic]] = np.uint8

    @property
    def channel(self) -> SymmetricUnaryEncoding:
        """The flips: SUE over the m positions (bit i = 1[ṽ_i = +1]), at ε (flip ≈ 1/(1 + e^{ε/2}))."""
        return _sue(self.epsilon, self.width)

    @property
    def report_columns(self) -> int:  # type: ignore[override]
        return 2 + self.channel.report_columns

    def report_domains(self) -> tuple[np.ndarray | None, ...]:
        K = self.hashes
        head: tuple[np.ndarray | None, ...] = (np.zeros(1, dtype=np.int64), np.arange(K)) if K <= 256 else (np.arange(K >> 8), None)
        return head + self.channel.report_domains()

    def scale(self) -> Fraction:
        t_in, t_out = self.channel.thresholds
        top = 1 << self.channel.chunk_bits
        return Fraction(top, top - 2 * t_out)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        idx = self._index(inputs)
        j = self._rows_of(randomness)
        h = self.hash(j, idx).astype(np.float64)  # the one-hot position, as the channel's category
        bits = self.channel.sample(h, OffsetDraws(randomness, 1))
        out = np.empty((len(idx), self.report_columns), dtype=np.uint8)
        out[:, 0] = j >> 8
        out[:, 1] = j & 255
        out[:, 2:] = bits
        return out

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        w = np.asarray(w, dtype=np.uint8)
        idx = self._index(np.asarray(u, dtype=np.float64).ravel()).reshape(np.shape(u))
        j = (w[..., 0].astype(np.int64) << 8) | w[..., 1]
        h = self.hash(j, idx).astype(np.float64)
        return self.channel.log_prob(h, w[..., 2:]) - (self.hashes.bit_length() - 1) * _LN2

    def _check_rows(self, reports: np.ndarray) -> np.ndarray:
        w = np.asarray(reports)
        if w.ndim != 2 or w.shape[1] != self.report_columns or w.dtype.kind not in "ui":
            raise ParameterError(f"cms: reports must be rows of {self.report_columns} bytes (j, then {self.width} bits), got shape {w.shape}")
        w = w.astype(np.uint8, copy=False)
        j = self._row_ids(w)
        if len(j) and int(j.max()) >= self.hashes:
            raise ParameterError(f"cms: a report names row {int(j.max())}, the sketch has {self.hashes}")
        return w

    def _row_ids(self, w: np.ndarray) -> np.ndarray:
        return (w[:, 0].astype(np.int64) << 8) | w[:, 1]

    def _row_block(self, w: np.ndarray, rows: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """ones[ℓ, i]: how many of row ℓ's reports have bit i = 1 (ṽ_i = +1), for every used row.

        One sparse product (row-membership matrix × the unpacked bits): ``np.add.reduceat`` over
        these short segments cost ≈ 10 ns a bit, the product ≈ 1 (16-bit sums where no row has
        2^15 reports, else 32-bit)."""
        import scipy.sparse  # the server's only use of scipy.sparse: not loaded by clients

        n = len(w)
        sizes = np.diff(np.append(starts, n))
        dtype = np.int16 if int(sizes.max()) < 1 << 15 else np.int32
        bits = np.unpackbits(w[:, 2:], axis=1, count=self.width).astype(dtype)
        member = scipy.sparse.csr_matrix((np.ones(n, dtype=dtype), np.arange(n), np.append(starts, n)), shape=(len(starts), n))
        return np.asarray(member @ bits, dtype=np.int64)

    def _report_values(self, w: np.ndarray, h: np.ndarray) -> np.ndarray:
        """Bit h of each report's m bits (1[ṽ_h = +1])."""
        byte = np.take_along_axis(w[:, 2:], h >> 3, axis=1)
        return (byte >> (7 - (h & 7)).astype(np.uint8)) & np.uint8(1)

    def _rows_cost(self, n: int, candidates: int) -> float:
        # rows: every report's m bits unpacked and summed per row (≈ 1.5 µs a report at m = 1,024),
        # then a lookup per used row and candidate (≈ 10 ns)
        rows = min(self.hashes, n)
        return 0.06 * self.width * n + 0.4 * candidates * rows

    def _from_integer(self, total: np.ndarray, n: int) -> np.ndarray:
        # S(x) = Σ_i [(c/2)(2 y_i − 1) + 1/2] over users' bits at h_{j_i}(x) = (c/2)(2·O(x) − n) + n/2
        c = float(self.scale())
        return (c / 2) * (2 * total - n) + n / 2

    def _matrix_rows(self, rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
        c = float(self.scale())
        K = self.hashes
        return K * ((c / 2) * (2 * rows - counts[:, None]) + counts[:, None] / 2)

    def _per_user(self, q: np.ndarray) -> np.ndarray:
        c = float(self.scale())
        return (c * c - 1) / 4 + q * (1 - q)

    def reference_count_variance(self, true_counts: np.ndarray) -> np.ndarray:
        N = np.asarray(true_counts, dtype=np.float64)
        n, m, c = N.sum(), self.width, float(self.scale())
        return (m / (m - 1)) ** 2 * (n * (c * c - 1) / 4 + (n - N) * (m - 1) / m**2)

    def ideal_scale(self) -> float:
        """The paper's c_ε = (e^{ε/2} + 1)/(e^{ε/2} − 1) (the realized ``scale`` differs by the cells' rounding: relative 2^-12 or less at ε ≥ 1/2)."""
        return 1.0 / math.tanh(self.epsilon / 4)


@dataclass(frozen=True)
class HadamardCountMeanSketch(SketchOracle):
    """Apple's Hadamard Count Mean Sketch (module docstring), exact on integer cells.

    >>> R = HadamardCountMeanSketch(4.0, tuple(range(16)), hashes=64, width=32)
    >>> R.report_columns, round(float(R.scale()), 4)  # (j, l, y); c = (e⁴ + 1)/(e⁴ − 1)
    (3, 1.0373)
    >>> verify_sketch(R).passed
    True
    """

    kind: ClassVar[str] = "hcms"
    report_dtype: ClassVar[type[np.generic]] = np.uint16
    report_columns: ClassVar[int] = 3  # type: ignore[misc]

    @property
    def coin(self) -> BinaryRandomizedResponse:
        """The one flip: exact binary randomized response of the coefficient's bit, at ε."""
        return BinaryRandomizedResponse(self.epsilon)

    def report_domains(self) -> tuple[np.ndarray | None, ...]:
        return (np.arange(self.hashes), np.arange(self.width), np.arange(2))

    def scale(self) -> Fraction:
        a, b = self.coin.cell_sizes
        return Fraction(TWO64, a - b)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        idx = self._index(inputs)
        j = self._rows_of(randomness)
        l_ = (randomness.bits(1) >> np.uint64(64 - (self.width.bit_length() - 1))).astype(np.int64)
        plus = (np.bitwise_count(l_ & self.hash(j, idx)) & 1) == 0  # w_l = H_m[l, h_j(x)] = +1
        y = self.coin.sample(plus.astype(np.float64), OffsetDraws(randomness, 2))
        return np.stack([j, l_, y.astype(np.int64)], axis=1).astype(np.uint16)

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        w = np.asarray(w, dtype=np.int64)
        idx = self._index(np.asarray(u, dtype=np.float64).ravel()).reshape(np.shape(u))
        plus = (np.bitwise_count(w[..., 1] & self.hash(w[..., 0], idx)) & 1) == 0
        a, b = self.coin.cell_sizes
        keep = plus == (w[..., 2] == 1)
        return np.where(keep, math.log(a), math.log(b)) - 64 * _LN2 - (self.hashes.bit_length() + self.width.bit_length() - 2) * _LN2

    def _check_rows(self, reports: np.ndarray) -> np.ndarray:
        w = np.asarray(reports)
        if w.ndim != 2 or w.shape[1] != 3 or w.dtype.kind not in "ui":
            raise ParameterError(f"hcms: reports must be rows (j, l, y) of 3 integers, got shape {w.shape}")
        w = w.astype(np.int64)
        if len(w) and (w.min() < 0 or w[:, 0].max() >= self.hashes or w[:, 1].max() >= self.width or w[:, 2].max() > 1):
            raise ParameterError(f"hcms: reports must have j < {self.hashes}, l < {self.width}, y ∈ {{0, 1}}")
        return w

    def _row_ids(self, w: np.ndarray) -> np.ndarray:
        return w[:, 0]

    def _row_block(self, w: np.ndarray, rows: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """(D·H_mᵀ)[ℓ] for every used row: D[ℓ, l] = Σ (2y − 1) over its reports, transformed exactly."""
        m = self.width
        slot = np.repeat(np.arange(len(rows)), np.diff(np.append(starts, len(w))))
        D = np.bincount(slot * m + w[:, 1], weights=2 * w[:, 2] - 1, minlength=len(rows) * m)
        return walsh_hadamard(np.rint(D).astype(np.int64).reshape(len(rows), m))

    def _report_values(self, w: np.ndarray, h: np.ndarray) -> np.ndarray:
        """(2y − 1)·H_m[l, h] of each report (j, l, y): its entry of (D H_mᵀ)[j] at h."""
        plus = (np.bitwise_count(w[:, 1:2] & h) & 1) == 0
        return np.where(plus, 1, -1) * (2 * w[:, 2:3] - 1)

    def _rows_cost(self, n: int, candidates: int) -> float:
        # rows: each used row's D built and transformed (≈ 35 µs a row at m = 1,024: m·log2 m
        # butterflies), then a lookup per used row and candidate
        rows = min(self.hashes, n)
        return 0.14 * rows * self.width * (self.width.bit_length() - 1) + 0.3 * candidates * rows

    def _from_integer(self, total: np.ndarray, n: int) -> np.ndarray:
        return float(self.scale()) * total  # S(x) = c·Σ_ℓ (D H_mᵀ)[ℓ, h_ℓ(x)]

    def _matrix_rows(self, rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
        return self.hashes * float(self.scale()) * rows

    def _per_user(self, q: np.ndarray) -> np.ndarray:
        c = float(self.scale())
        return c * c - q * q

    def reference_count_variance(self, true_counts: np.ndarray) -> np.ndarray:
        N = np.asarray(true_counts, dtype=np.float64)
        n, m, c = N.sum(), self.width, float(self.scale())
        return (m / (m - 1)) ** 2 * (n * c * c - N - (n - N) / m**2)

    def ideal_scale(self) -> float:
        """The paper's c_ε = (e^ε + 1)/(e^ε − 1)."""
        return 1.0 / math.tanh(self.epsilon / 2)


@dataclass(frozen=True)
class OpenDomainSketch(SketchOracle):
    """What the open-domain sketches change (module docstring, "Open string domains"): a user's
    input is a record of the four 16-bit chunks of its string's fingerprint (``ldp.core.string_hashing``),
    the key is that 64-bit fingerprint, the hash is simple tabulation over its 8 bytes
    (``key_tables``), and the server's candidates are strings. The sampler is CMS's or HCMS's,
    unchanged (it calls ``_index`` and ``hash``, overridden here); there are no categories."""

    categories: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if tuple(self.categories):
            raise ParameterError(f"{self.kind} has an open domain (strings, by fingerprint): it takes no categories, got {len(tuple(self.categories))}")
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "categories", ())
        object.__setattr__(self, "hashes", _power_of_two(self.kind, "hashes", self.hashes, 1, MAX_HASHES))
        object.__setattr__(self, "width", _power_of_two(self.kind, "width", self.width, 2, MAX_WIDTH))
        object.__setattr__(self, "hash_seed", require_integer(f"{self.kind}: hash_seed", self.hash_seed, 0, (1 << 64) - 1, "[0, 2^64)"))

    @property
    def tables(self) -> np.ndarray:
        return key_tables(self.hash_seed, self.hashes, self.width)

    def hash(self, rows: np.ndarray, x: np.ndarray) -> np.ndarray:
        """h_rows(y) for row indices and 64-bit keys y (uint64), broadcast (int64)."""
        return tabulation64(self.tables, rows, x)

    @property
    def input_width(self) -> int:
        return FINGERPRINT_CHUNKS

    def input_domain(self) -> np.ndarray:
        """Every record of four chunks in [−32768, 32767] (2^64 of them: not listed; an empty array)."""
        return np.zeros((0, FINGERPRINT_CHUNKS))

    def check_inputs(self, values: np.ndarray) -> np.ndarray:
        v = np.asarray(values, dtype=np.float64)
        if v.ndim != 2 or v.shape[1] != FINGERPRINT_CHUNKS:
            raise ParameterError(f"{self.kind} takes fingerprint records of {FINGERPRINT_CHUNKS} columns; got an array of shape {v.shape}")
        ok = np.isfinite(v) & (v == np.round(v)) & (v >= FINGERPRINT_LOW) & (v <= FINGERPRINT_HIGH)
        if not ok.all():
            bad = v[~ok][0]
            raise ParameterError(f"{self.kind}: a fingerprint chunk must be an integer in [{FINGERPRINT_LOW}, {FINGERPRINT_HIGH}], got {bad!r}")
        return v

    def _index(self, values: np.ndarray) -> np.ndarray:
        """The 64-bit keys (uint64) of fingerprint records (..., 4)."""
        return record_keys(np.asarray(values, dtype=np.float64))

    def _candidate_indices(self, candidates: np.ndarray | Sequence[Any] | None) -> np.ndarray:
        """The candidates' fingerprints (``ldp.core.string_hashing.fingerprint``: the users' function)."""
        if candidates is None or isinstance(candidates, (str, bytes)):
            raise ParameterError(f"{self.kind}: name the candidate strings to estimate (a list of str); an open domain has no list of its own")
        cands = list(candidates)
        if not cands:
            raise ParameterError(f"{self.kind}: no candidate strings to estimate")
        return fingerprints(cands, "a candidate")

    def frequencies(self, reports: np.ndarray) -> np.ndarray:
        raise ParameterError(f"{self.kind} has an open domain: estimate candidate strings with estimate_counts(reports, candidates)")

    def count_variance(self, true_counts: np.ndarray) -> np.ndarray:
        """The exact variance of N̂ (module docstring) for each distinct value of a population
        with these counts (its distinct strings, any order): N̂ of a value absent from it is
        ``candidate_count_variance``'s."""
        N = np.asarray(true_counts, dtype=np.float64).ravel()
        return self.candidate_count_variance(N, float(N.sum()), float((N * (N - 1)).sum()))

    def candidate_count_variance(self, counts: np.ndarray, n: float, pair_sum: float) -> np.ndarray:
        """Var N̂(x) for distinct candidates with true counts ``counts`` in a population of n users
        whose distinct values' counts have Σ_d N(d)(N(d) − 1) = ``pair_sum`` (module docstring)."""
        N = np.asarray(counts, dtype=np.float64).ravel()
        rest = max(0.0, n - float(N.sum()))  # the other users, as one more value: only n and N(x) enter the reference's part
        m, K = self.width, self.hashes
        ref = self.reference_count_variance(np.append(N, rest))[:-1]
        return ref + (m / (m - 1)) ** 2 * (m - 1) / (K * m**2) * (pair_sum - N * (N - 1))

    def conditional_moments(self, true_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise ParameterError(f"{self.kind}: conditional moments are for the integer sketches (cms, hcms)")


@dataclass(frozen=True)
class StringCountMeanSketch(OpenDomainSketch, CountMeanSketch):
    """Apple's Count Mean Sketch over an open domain of strings (kind ``cms_string``): CMS's
    report and sampler, keyed by the string's 64-bit fingerprint (module docstring).

    >>> import numpy as np
    >>> from ldp.core.rng import RandomSource
    >>> from ldp.core.string_hashing import fingerprints, key_records
    >>> R = StringCountMeanSketch(4.0, hashes=64, width=32, hash_seed=5)
    >>> words = np.array(["🙂", "😀", "cat"] * 1000, dtype=object)
    >>> inputs = R.check_inputs(key_records(fingerprints(words)))
    >>> reports = R.sample(inputs, RandomSource(0).for_request("demo", 0, np.arange(3000)))
    >>> est = R.estimate_counts(reports, ["🙂", "dog"])
    >>> bool(abs(est[0] - 1000) < 400 and abs(est[1]) < 400), verify_sketch(R).passed
    (True, True)
    """

    kind: ClassVar[str] = "cms_string"

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        w = np.asarray(w, dtype=np.uint8)
        keys = self._index(np.asarray(u))
        j = (w[..., 0].astype(np.int64) << 8) | w[..., 1]
        h = self.hash(j, keys).astype(np.float64)
        return self.channel.log_prob(h, w[..., 2:]) - (self.hashes.bit_length() - 1) * _LN2


@dataclass(frozen=True)
class StringHadamardCountMeanSketch(OpenDomainSketch, HadamardCountMeanSketch):
    """Apple's Hadamard Count Mean Sketch over an open domain of strings (kind ``hcms_string``):
    HCMS's report and sampler, keyed by the string's 64-bit fingerprint (module docstring).

    >>> R = StringHadamardCountMeanSketch(4.0, hashes=64, width=32)
    >>> R.report_columns, verify_sketch(R).passed
    (3, True)
    """

    kind: ClassVar[str] = "hcms_string"

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        w = np.asarray(w, dtype=np.int64)
        keys = self._index(np.asarray(u))
        plus = (np.bitwise_count(w[..., 1] & self.hash(w[..., 0], keys)) & 1) == 0
        a, b = self.coin.cell_sizes
        keep = plus == (w[..., 2] == 1)
        return np.where(keep, math.log(a), math.log(b)) - 64 * _LN2 - (self.hashes.bit_length() + self.width.bit_length() - 2) * _LN2


@functools.lru_cache(maxsize=64)
def _sue(epsilon: float, width: int) -> SymmetricUnaryEncoding:
    return SymmetricUnaryEncoding(epsilon, tuple(float(i) for i in range(width)))


# --- exact audits ---


def _random_words(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64)


def _edges(starts: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """Words that are cell edges (a start, or the word just below one) half of the time."""
    s = np.asarray(starts, dtype=np.uint64)
    edges = np.concatenate([s, s[1:] - np.uint64(1), [np.uint64(TWO64 - 1)]])
    return np.where(rng.integers(0, 2, n) == 1, edges[rng.integers(0, len(edges), n)], _random_words(rng, n))


def sketch_probe(R: SketchOracle, seed: int = 7) -> str:
    """Feed the real sampler random and cell-edge draws: '' if it emits what its structure says
    (module docstring), else what disagrees. The hash is recomputed here from the tables by its
    definition, the row from the top bits of draw 0, the coefficient bit by bit."""
    from ldp.core.audit import FixedRandomness

    rng = np.random.default_rng(seed)
    n = 512
    open_domain = isinstance(R, OpenDomainSketch)
    if open_domain:  # random 64-bit keys, given to the sampler as the users' fingerprint records
        x = _random_words(rng, n)
        inputs = key_records(x).astype(np.float64)
    else:
        x = rng.integers(0, R.k, n)
        inputs = np.asarray(R.categories)[x]
    t = R.tables
    log_k = R.hashes.bit_length() - 1
    row_starts = np.arange(R.hashes, dtype=object) * (TWO64 >> log_k)
    bits = {0: _edges(np.array([int(s) for s in row_starts], dtype=np.uint64), rng, n)}
    j = (bits[0] >> np.uint64(64 - log_k)).astype(np.int64) if log_k else np.zeros(n, dtype=np.int64)
    if open_domain:  # h_j(y) = ⊕ over the key's 8 bytes, byte b = (y >> 8b) & 255
        h = np.array([functools.reduce(operator.xor, (int(t[jj, b, (xx >> (8 * b)) & 255]) for b in range(8))) for jj, xx in zip(j.tolist(), x.tolist())], dtype=np.int64)
    else:
        h = np.array([int(t[jj, 0, xx & 255]) ^ int(t[jj, 1, xx >> 8]) for jj, xx in zip(j.tolist(), x.tolist())], dtype=np.int64)
    if isinstance(R, CountMeanSketch):
        words = unary_word_draws(R.width, R.channel.chunk_bits)  # the channel's draws, read through bits: 1 + these here
        for d in words:
            bits[1 + d] = _random_words(rng, n)
        got = R.sample(inputs, FixedRandomness(bits, n))
        if not np.array_equal((got[:, 0].astype(np.int64) << 8) | got[:, 1], j):
            return "the reported row is not the top log2 K bits of draw 0"
        want = R.channel.sample(h.astype(np.float64), FixedRandomness({d - 1: b for d, b in bits.items() if d >= 1}, n))
        if not np.array_equal(got[:, 2:], want):
            return "the bits are not the SUE channel of h_j(u) on draws 1.., or the hash is not the tabulation's"
        return ""
    assert isinstance(R, HadamardCountMeanSketch)
    a, _ = R.coin.cell_sizes
    log_m = R.width.bit_length() - 1
    bits[1] = _random_words(rng, n)
    bits[2] = _edges(np.array([0, a], dtype=np.uint64), rng, n)
    got = R.sample(inputs, FixedRandomness(bits, n)).astype(np.int64)
    l_ = (bits[1] >> np.uint64(64 - log_m)).astype(np.int64)
    parity = np.zeros(n, dtype=np.int64)
    for bit in range(log_m):
        parity ^= (l_ >> bit) & (h >> bit) & 1
    y = ((parity == 0) == (bits[2] < np.uint64(a))).astype(np.int64)
    if not (np.array_equal(got[:, 0], j) and np.array_equal(got[:, 1], l_)):
        return "(j, l) are not the top bits of draws 0 and 1"
    if not np.array_equal(got[:, 2], y):
        return "y is not binary randomized response (draw 2) of the Hadamard coefficient H_m[l, h_j(u)]"
    return ""


def verify_sketch(R: SketchOracle) -> ExactAudit:
    """The exact privacy audit of a sketch at any K, m, k, by its structure (module docstring).

    CMS: the loss is the SUE two-bit channel's, computed exactly from the randomizer's own
    thresholds and compared with e^ε (the *sketch's* ε) rigorously; the channel itself is audited
    by ``verify_structure`` (exact, with its sampler probed at width m), and the sketch's sampler by
    ``sketch_probe``. HCMS: the loss is ln(A/B) of the coin it really uses, compared with e^ε;
    the coin is audited by ``verify_exact``; the sampler by ``sketch_probe``."""
    from ldp.core.audit import structure_audit, verify_exact
    from ldp.core.audit_structure import verify_structure

    if isinstance(R, CountMeanSketch):
        ch = R.channel
        t_in, t_out = ch.thresholds
        top = 1 << ch.chunk_bits
        ratio = max(Fraction(t_in * (top - t_out), t_out * (top - t_in)), Fraction(t_out * (top - t_in), t_in * (top - t_out)))
        core = verify_structure(ch)
        what = f"SUE two-bit channel (b = {ch.chunk_bits}) of the one-hot position h_j(u)"
    elif isinstance(R, HadamardCountMeanSketch):
        a, b = R.coin.cell_sizes
        ratio = Fraction(max(a, b), min(a, b))
        core = verify_exact(R.coin)
        what = "binary randomized response of the Hadamard coefficient"
    else:
        raise ParameterError(f"no sketch audit for {type(R).__name__}")
    return structure_audit(R.epsilon, ratio, core, what, sketch_probe(R))


class _VirtualBits:
    """CMS on the audit's terms: virtual draw 1 + i's top b bits become the channel's X_i, where its
    sampler reads it (``unary_word``: the top 16 bits in a main draw, the rest in the fallback stream;
    a fixed relabelling of the randomness), so every virtual draw has two or three cells."""

    def __init__(self, virtual: Draws, b: int, m: int) -> None:
        self.virtual, self.b, self.m = virtual, b, m
        self.users = virtual.users

    def bits(self, draw: int = 0) -> np.ndarray:
        if draw == 0:
            return self.virtual.bits(0)
        return unary_word(draw - 1, self.m, self.b, lambda i: self.virtual.bits(1 + i) >> np.uint64(64 - self.b))

    def uniform(self, draw: int = 0) -> np.ndarray:  # pragma: no cover - the samplers read bits only
        raise NotImplementedError


@dataclass(frozen=True)
class EnumeratedSketch(Randomizer):
    """A small sketch with every report enumerated as a scalar output (its index), so that
    ``verify_exact`` runs on it unchanged: realized table, exact ratio, log_prob and the sampler
    fed its cell boundaries (``enumerated_sketch``)."""

    inner: SketchOracle
    kind: ClassVar[str] = "enumerated sketch"

    @property
    def epsilon(self) -> float:  # type: ignore[override]
        return self.inner.epsilon

    def _rows(self) -> np.ndarray:
        R = self.inner
        K, m = R.hashes, R.width
        if isinstance(R, CountMeanSketch):
            ints = np.arange(1 << m, dtype=np.int64)
            packed = np.packbits(((ints[:, None] >> np.arange(m)[None, :]) & 1).astype(np.uint8), axis=1)
            j = np.repeat(np.arange(K), len(packed))
            out = np.empty((len(j), R.report_columns), dtype=np.uint8)
            out[:, 0], out[:, 1] = j >> 8, j & 255
            out[:, 2:] = np.tile(packed, (K, 1))
            return out
        g = np.stack([a.ravel() for a in np.meshgrid(np.arange(K), np.arange(m), np.arange(2), indexing="ij")], axis=1)
        return g.astype(np.uint16)

    def _index_of(self, reports: np.ndarray) -> np.ndarray:
        return row_indices(self._rows(), reports)

    def input_domain(self) -> np.ndarray:
        return self.inner.input_domain()

    def output_domain(self) -> np.ndarray:
        return np.arange(len(self._rows()), dtype=np.float64)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        R = self.inner
        if isinstance(R, CountMeanSketch):
            randomness = _VirtualBits(randomness, R.channel.chunk_bits, R.width)
        return self._index_of(R.sample(inputs, randomness))

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        return self.inner.log_prob(u, self._rows()[np.asarray(w).astype(np.int64)])

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        R = self.inner
        rows = self._rows()
        idx = R._index(np.asarray(inputs, dtype=np.float64).ravel())
        K, m = R.hashes, R.width
        masses = np.empty((len(idx), len(rows)), dtype=object)
        row_mass = TWO64 // K  # draw 0: K equal cells
        if isinstance(R, CountMeanSketch):
            b = R.channel.chunk_bits
            t_in, t_out = R.channel.thresholds
            j = (rows[:, 0].astype(np.int64) << 8) | rows[:, 1]
            bits = np.unpackbits(rows[:, 2:], axis=1, count=m)
            for i, x in enumerate(idx):
                h = R.hash(j, np.full(len(j), x))
                t = np.full((len(j), m), t_out, dtype=object)  # Python ints: T may pass 2^63 (b = 64)
                t[np.arange(m)[None, :] == h[:, None]] = t_in
                per = np.where(bits == 1, t, (1 << b) - t)
                masses[i] = [row_mass * math.prod(int(v) for v in r) for r in per]
            return self.output_domain(), masses, TWO64 << (b * m)
        assert isinstance(R, HadamardCountMeanSketch)
        a, b_ = R.coin.cell_sizes
        l_mass = TWO64 // m
        j, l_, y = (rows[:, c].astype(np.int64) for c in range(3))
        for i, x in enumerate(idx):
            plus = (np.bitwise_count(l_ & R.hash(j, np.full(len(j), x))) & 1) == 0
            masses[i] = [row_mass * l_mass * (a if k else b_) for k in (plus == (y == 1))]
        return self.output_domain(), masses, 1 << 192

    def draw_cells(self, u: float) -> list[np.ndarray]:
        R = self.inner
        K = R.hashes
        rows = np.arange(K, dtype=np.uint64) * np.uint64(TWO64 // K) if K > 1 else np.zeros(1, dtype=np.uint64)
        if isinstance(R, CountMeanSketch):
            b = R.channel.chunk_bits
            t_in, t_out = R.channel.thresholds
            # the threshold of position i is T_in or T_out depending on j: both edges, three cells
            cut = np.array(sorted({0, t_out << (64 - b), t_in << (64 - b)}), dtype=np.uint64)
            return [rows] + [cut] * R.width
        assert isinstance(R, HadamardCountMeanSketch)
        m = R.width
        return [rows, np.arange(m, dtype=np.uint64) * np.uint64(TWO64 // m), np.array([0, R.coin.cell_sizes[0]], dtype=np.uint64)]


def enumerated_sketch(R: SketchOracle) -> Randomizer:
    """R with every report enumerated (K·2^m for CMS, 2·K·m for HCMS), for ``verify_exact`` on
    small instances. Refuses more than 2^12 reports, and the open-domain kinds (2^64 inputs: their
    audit is ``verify_sketch``'s structure, the same as CMS's and HCMS's, and ``sketch_probe``)."""
    if isinstance(R, OpenDomainSketch):
        raise ParameterError(f"{R.kind} has 2^64 inputs (fingerprints): audit it by structure with verify_sketch")
    size = R.hashes * (1 << R.width) if isinstance(R, CountMeanSketch) else 2 * R.hashes * R.width
    if size > 1 << 12:
        raise ParameterError(f"{R.kind} with K={R.hashes}, m={R.width} has {size} reports; enumerate a smaller instance")
    return EnumeratedSketch(R)


# --- building from a spec (the users' side: ``LocalRandomizer.build``) ---


@register_randomizer("cms", params=("hashes", "width", "hash_seed"))
@register_randomizer("hcms", params=("hashes", "width", "hash_seed"))
def build_sketch(spec: SpecView, query: Query) -> Randomizer:
    """The ``cms`` / ``hcms`` randomizer over the query's finite values (the categories), with the
    public ``hashes`` (default 65,536), ``width`` (default 1,024) and ``hash_seed`` (default 0)."""
    check_params(spec.kind, spec.params)
    values = query.values()
    if values is None:
        raise ParameterError(f"{spec.kind} needs a query with a finite set of values (at most {MAX_CATEGORIES}); {spec.query.name!r} has none")
    cats = tuple(values.tolist()) if len(values) >= 2 else (float(values[0]), float(values[0]) + 1.0)
    p: dict[str, Any] = dict(spec.params)
    cls = CountMeanSketch if spec.kind == "cms" else HadamardCountMeanSketch
    return cls(spec.epsilon, cats, p.get("hashes", APPLE_HASHES), p.get("width", APPLE_WIDTH), p.get("hash_seed", 0))


@register_randomizer("cms_string", params=("hashes", "width", "hash_seed"), record_input=True)
@register_randomizer("hcms_string", params=("hashes", "width", "hash_seed"), record_input=True)
def build_string_sketch(spec: SpecView, query: Query) -> Randomizer:
    """The ``cms_string`` / ``hcms_string`` randomizer over the ``record`` query of a schema that is
    one fingerprint field (``ldp.core.string_hashing.fingerprint_schema``: the users' strings,
    fingerprinted on their side), with the public ``hashes`` (default 65,536), ``width`` (default
    1,024) and ``hash_seed`` (default 0: the tabulation tables' seed)."""
    check_params(spec.kind, spec.params)
    if query.name != "record" or not is_fingerprint_schema(query.schema):
        raise ParameterError(
            f"{spec.kind} randomizes a string's fingerprint: use the 'record' query over a schema of one fingerprint field "
            f"(length 4, each column -32768..32767; ldp.core.string_hashing.fingerprint_schema), got query {spec.query.name!r}"
        )
    p: dict[str, Any] = dict(spec.params)
    cls = StringCountMeanSketch if spec.kind == "cms_string" else StringHadamardCountMeanSketch
    return cls(spec.epsilon, (), p.get("hashes", APPLE_HASHES), p.get("width", APPLE_WIDTH), p.get("hash_seed", 0))
