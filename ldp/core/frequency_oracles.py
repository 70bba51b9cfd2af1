"""Frequency oracles: unary encodings (OUE, SUE), local hashing (OLH), Hadamard Response, and an
adaptive choice between them and k-ary randomized response — exact on integer cells.

A frequency oracle is an ε-local randomizer R over k categories c_0 < ... < c_{k−1} whose report
w *supports* a set of categories, with two realized probabilities (Wang, Blocki, Li & Jha 2017,
"Locally differentially private protocols for frequency estimation", §3 "pure protocols"):

    p* = Pr[w supports x | u = x],     q* = Pr[w supports x | u = x′ ≠ x]   (the same for every x′).

Then the count C(x) of reports supporting x gives the unbiased estimate
f̂(x) = (C(x)/n − q*)/(p* − q*) of the fraction f(x) of users holding x, with the exact variance

    Var f̂(x) = [f(x)·p*(1 − p*) + (1 − f(x))·q*(1 − q*)] / (n·(p* − q*)²)

(each user's support indicator for x is Bernoulli(p*) or Bernoulli(q*), independently across
users). ``frequencies`` and ``frequency_variance`` compute these from the *realized* p*, q* (so the
estimate stays unbiased whatever the rounding of the cells); ``project_simplex`` is the
consistency post-processing (Euclidean projection onto the probability simplex), offered
separately: it is biased, the raw estimate is not.

Kinds (registered here with ``@register_randomizer``, built from a query's finite values like ``kary_rr``):

- ``oue``  optimized unary encoding (Wang et al. 2017 §4.3): k bits, the input's bit is 1 w.p. 1/2,
           every other bit w.p. q ≈ 1/(e^ε + 1). Reports: the k bits packed (uint8 rows).
- ``sue``  symmetric unary encoding, basic RAPPOR (Erlingsson, Pihur & Korolova 2014): the input's
           bit is 1 w.p. p ≈ e^{ε/2}/(e^{ε/2}+1), every other bit w.p. 1 − p.
- ``olh``  optimized local hashing (Wang et al. 2017 §4.4) with the exactly universal family of
           random GF(2)-linear maps h_A: {0,1}^m → {0,1}^l, g = 2^l ≈ e^ε + 1: report (A, y), y the
           exact g-ary randomized response of h_A(u). Reports: uint16 rows (A's l rows, y). The
           server is O(n·g + k log k) by a Walsh–Hadamard transform, never O(n·k) Python.
- ``hadamard_response``  Hadamard Response (Acharya, Sun & Zhang 2019, "Hadamard response:
           estimating distributions privately, efficiently, and with little communication"):
           one index j ∈ [K], K = 2^M > k, uniform on the +1 half of row x+1 of the Sylvester
           Hadamard matrix w.p. ≈ e^ε/(e^ε+1), else on the −1 half. Reports: uint32.
- ``subset_selection``  Subset Selection (Wang, Wu & Hu 2016; Ye & Barg 2018): a d-subset of the
           categories, d = round(k/(e^ε + 1)), holding the input w.p. ≈ de^ε/(de^ε + k − d); exact
           with a 2^-20 slack (``SubsetSelection``). Reports: the k bits of the subset, packed.
- ``adaptive_fo``  k-ary randomized response when k − 2 < 3e^ε (its variance is then the smaller,
           Wang et al. 2017 §5), else OLH (or OUE, ``params={"prefer": "oue"}``): ``choose_oracle``.

Exactness (docs/audit.md). The audits named below (``verify_structure``, ``enumerated``) live in
the audit layer, ``ldp.core.audit_structure``. Every sampler compares integers from its per-user 64-bit draws with
integer cells, as ``rr_cells`` does; no float threshold is ever compared with a draw.

- Unary encodings: bit j is y_j = 1[X_j < T_j] with T_j = T_in if j = u else T_out, X_j a
  uniform b-bit integer (b ∈ {16, 32, 64}, the smallest whose cells are tight, ``chunk_bits``),
  read top 16 bits first (``unary_coins``; issue 27): X_j = H_j·2^{b−16} + L_j, and
  X_j < T ⟺ H_j < T_hi or (H_j = T_hi and L_j < T_lo) with T = T_hi·2^{b−16} + T_lo, so L_j is
  read only on a tie (probability 2^-16) and the law of every bit is exactly T_j/2^b. At b = 16
  (every ε the unary encodings are used at in practice) H_j is X_j: one comparison, no tie.
  *Draw layout* (k bits, r = b − 16; every draw is a whole 128-bit AES block, both halves used;
  ``unary_draws`` = ⌈k/8⌉ + ⌈r·k/128⌉ draw indices, ≤ 2^15 for every k ≤ 2^16 and b;
  ``unary_word`` builds it from chosen X_j, for the audits): **main** blocks 0 .. ⌈k/8⌉ − 1,
  H_j = 16-bit lane (j mod 8) of block ⌊j/8⌋ (lanes 0–3 its first 64 bits, ``bits(d)``,
  little-endian); **fallback** blocks ⌈k/8⌉, … (b > 16 only), read as one little-endian bit
  stream (each block's low half, then its high half) in which L_j is bits r·j .. r·j + r − 1 (one
  slot per bit: two tied bits of a user never share a bit, and no bit of a main block is read
  again). The fallback blocks are computed only for the tied (user, bit) pairs
  (``ldp.core.rng.block_pairs``, one AES call for all of them), the main ones in few AES calls
  (``draw_blocks``): 8 coins per AES block. (An 8-bit head, 16 coins a block, was the layout
  before: it read half the blocks but tied 2^-8 of the coins, and finding and answering those
  ties cost more than the blocks saved: L-OUE at k = 1024 went 2.9 → 1.9 µs a user with this one,
  docs/benchmarks.md.) A ``Draws`` without block methods (the audits' stand-ins)
  is read through ``bits``: the high half of block d is ``bits(d + HIGH_HALF)``, HIGH_HALF = 2^15
  (``ldp.core.rng``), an index the real samplers never read.
  OUE: T_in = 2^{b−1}, T_out = ⌈2^b/(e^ε+1)⌉ (``ceil_share``); SUE: T_out = ⌈2^b/(e^{ε/2}+1)⌉
  at the exact rational ε/2, T_in = 2^b − T_out.
  *Theorem (exact audit by structure).* The bits are independent given u and bit j's law depends
  only on whether j = u. Hence for u ≠ u′ and any report y, every factor of Pr[y|u]/Pr[y|u′]
  cancels except bits u and u′, and the privacy loss is exactly that of the two-bit channel
  (y_u, y_{u′}), the same for every k ≥ 2:
      max ratio = max(T_in(2^b − T_out), T_out(2^b − T_in)) / min(...) ;
  OUE: (2^b − T_out)/T_out ≤ e^ε by ``ceil_share``; SUE: ((2^b − T_out)/T_out)² ≤ (e^{ε/2})².
  ``verify_structure`` checks that loss exactly at the randomizer's own (ε, b), checks the
  structure on the real sampler (bit j changes exactly when X_j crosses T_j, never when another
  X moves, the fallback bits included), and ``enumerated`` lets ``verify_exact`` enumerate every report on small k.
- OLH: the report is (A, y): A's rows a_r = bits(1 + r) >> (64 − m) are uniform and independent
  of u; y = exact g-ary RR (``rr_cells``(ε, g) on bits(0)) of h_A(u), h_A(x)_r = parity(a_r & x).
  Pr[(A, y)|u] = 2^{−ml}·(A_g if y = h_A(u) else B_g)/2^64, so the loss is exactly ln(A_g/B_g) ≤ ε,
  whatever k: the g-ary RR channel's (``verify_structure`` audits it with ``verify_exact``).
  Unbiasedness needs Pr_A[h_A(x) = h_A(x′)] = 2^{−l} exactly for x ≠ x′ (true: A(x ⊕ x′) is
  uniform on {0,1}^l), which gives q* = p/g + (1 − 1/g)·q = 1/g exactly.
- Hadamard Response: Pr[j|x] = (A if j ∈ C_x else B)/(2^64·2^{M−1}) with (A, B) = ``rr_cells``(ε, 2)
  and C_x = {j : ⟨x+1, j⟩ = 0 mod 2}, |C_x| = 2^{M−1}: loss ln(A/B) ≤ ε. ``verify_exact``
  audits it directly at every k (its per-output extremes are computed by structure).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from ldp.core.errors import ParameterError, require_epsilon
from ldp.core.fourier import walsh_hadamard
from ldp.core.queries import Query
from ldp.core.randomizer_base import (
    SAMPLER_BLOCK,
    TWO64,
    Randomizer,
    SpecView,
    ceil_share,
    check_params,
    register_randomizer,
    rr_cells,
    rr_draw,
    uniform_index,
    uniform_index_masses,
    uniform_index_starts,
)
from ldp.core.rng import HIGH_HALF, Draws, block_pairs, draw_blocks
from ldp.core.rr_mechanisms import KaryRandomizedResponse, category_index

__all__ = [
    "FrequencyOracle",
    "OptimizedUnaryEncoding",
    "SymmetricUnaryEncoding",
    "OptimizedLocalHashing",
    "HadamardResponse",
    "SubsetSelection",
    "choose_oracle",
    "frequency_estimates",
    "frequency_variance",
    "support_probabilities",
    "project_simplex",
    "walsh_hadamard",
    "build_frequency_oracle",
    "UnaryEncoding",
    "MAX_CATEGORIES",
    "checked_categories",
    "unary_coins",
    "unary_draws",
    "unary_word",
    "unary_word_draws",
]

MAX_CATEGORIES = 1 << 16  # a query's finite values: int16 fields give at most 2^16
_LN2 = math.log(2.0)


def checked_categories(kind: str, categories: tuple[float, ...]) -> tuple[float, ...]:
    """A frequency oracle's categories, sorted, or one line naming the kind and what is wrong:
    fewer than 2 or repeated, more than ``MAX_CATEGORIES``, or not finite."""
    cats = tuple(float(c) for c in categories)
    if len(cats) < 2 or len(set(cats)) != len(cats):
        raise ParameterError(f"{kind} needs k ≥ 2 distinct categories, got k={len(cats)}: {cats[:8]}")
    if len(cats) > MAX_CATEGORIES:
        raise ParameterError(f"{kind} takes at most {MAX_CATEGORIES} categories, got k={len(cats)}")
    if any(not math.isfinite(c) for c in cats):
        raise ParameterError(f"{kind} categories must be finite, got {cats[:8]}")
    return tuple(sorted(cats))


def project_simplex(f: np.ndarray) -> np.ndarray:
    """The Euclidean projection of estimates onto the probability simplex {p ≥ 0, Σp = 1}.

    Consistency post-processing (Wang et al. 2020, "Locally differentially private frequency
    estimation with consistency", Norm-Sub; the sort-based algorithm of Duchi, Shalev-Shwartz,
    Singer & Chandra 2008): p = max(f − τ, 0) with τ chosen so that Σp = 1. It is post-processing
    (no privacy cost), lowers the L2 error, and is **biased**; ``frequencies`` stays unbiased.

    >>> project_simplex(np.array([0.7, 0.5, -0.2])).tolist()
    [0.6, 0.4, 0.0]
    """
    v = np.asarray(f, dtype=np.float64).ravel()
    if v.size == 0 or not np.isfinite(v).all():
        raise ParameterError("project_simplex needs a non-empty vector of finite estimates")
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    ind = np.arange(1, len(u) + 1)
    rho = int(np.nonzero(u - css / ind > 0)[0][-1])
    tau = css[rho] / (rho + 1)
    return np.maximum(v - tau, 0.0)


# --- the common estimator ---


class FrequencyOracle(Randomizer):
    """A randomizer over k categories whose reports support categories (module docstring).

    Subclasses give ``support_counts(reports)`` (C(x) for every category) and the exact
    ``support_fractions()`` (p*, q*) as Fractions; reports are rows (``report_columns``)."""

    categories: tuple[float, ...]
    report_columns: ClassVar[int | None] = None  # overridden per instance where rows have a width

    @property
    def k(self) -> int:
        return len(self.categories)

    def input_domain(self) -> np.ndarray:
        return np.asarray(self.categories)

    def _index(self, values: np.ndarray) -> np.ndarray:
        """Each input's category index (``category_index``: an offset for consecutive integer
        categories, no search), or a one-line ParameterError for a value that is none of them."""
        return category_index(self.kind, self.categories, values)

    def report_domains(self) -> tuple[np.ndarray | None, ...]:
        """Per report column, the allowed values (None: any value of the dtype)."""
        raise NotImplementedError

    def support_fractions(self) -> tuple[Fraction, Fraction]:
        """(p*, q*) exactly: Pr[report supports x | u = x] and | u ≠ x."""
        raise NotImplementedError

    def support_counts(self, reports: np.ndarray) -> np.ndarray:
        """C(x): the number of reports supporting each category (int64, shape (k,))."""
        raise NotImplementedError

    def frequencies(self, reports: np.ndarray) -> np.ndarray:
        """Unbiased estimates f̂(x) = (C(x)/n − q*)/(p* − q*) of the fraction of users in each
        category, with the realized p*, q* (module docstring). They may be negative and need not
        sum to 1: ``project_simplex`` makes them consistent (biased)."""
        reports = np.asarray(reports)
        n = len(reports)
        if n == 0:
            raise ParameterError(f"{self.kind}: no reports to estimate from")
        p, q = (float(x) for x in self.support_fractions())
        return (self.support_counts(reports) / n - q) / (p - q)

    def frequency_variance(self, f: np.ndarray | float, n: int) -> np.ndarray:
        """Var f̂(x) = [f p*(1 − p*) + (1 − f) q*(1 − q*)]/(n (p* − q*)²), exactly."""
        return _variance(self.support_fractions(), f, n)


def _variance(pq: tuple[Fraction, Fraction], f: np.ndarray | float, n: int) -> np.ndarray:
    p, q = (float(x) for x in pq)
    f = np.asarray(f, dtype=np.float64)
    return (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * (p - q) ** 2)


def support_probabilities(R: Randomizer) -> tuple[Fraction, Fraction]:
    """(p*, q*) of a frequency oracle or of k-ary randomized response (p, q = its cells/2^64)."""
    if isinstance(R, FrequencyOracle):
        return R.support_fractions()
    if isinstance(R, KaryRandomizedResponse):
        a, b = R.cell_sizes
        return Fraction(a, TWO64), Fraction(b, TWO64)
    raise ParameterError(f"{type(R).__name__} is not a frequency oracle")


def frequency_estimates(R: Randomizer, reports: np.ndarray) -> np.ndarray:
    """Unbiased frequency estimates from any frequency oracle's reports (``kary_rr`` included):
    what the aggregator runs on an ``adaptive_fo`` request, whichever oracle it chose."""
    if isinstance(R, (FrequencyOracle, KaryRandomizedResponse)):
        return R.frequencies(reports)
    raise ParameterError(f"{type(R).__name__} is not a frequency oracle")


def frequency_variance(R: Randomizer, f: np.ndarray | float, n: int) -> np.ndarray:
    """The exact variance of ``frequency_estimates`` for n users at true frequencies f: the
    oracle's own (``FrequencyOracle.frequency_variance``, which a sketch overrides), else k-ary
    RR's from its cells."""
    if isinstance(R, FrequencyOracle):
        return R.frequency_variance(f, n)
    return _variance(support_probabilities(R), f, n)


def choose_oracle(k: int, epsilon: float, prefer: str = "olh") -> str:
    """'kary_rr' when k − 2 < 3e^ε, else ``prefer`` ('olh' or 'oue').

    Wang et al. 2017 §5: per-value variances (f → 0) are (e^ε + k − 2)/(e^ε − 1)² for k-ary RR and
    4e^ε/(e^ε − 1)² for OUE and OLH, so RR wins exactly when k − 2 < 3e^ε. OLH and OUE tie;
    OLH's report is l + 1 16-bit words instead of k bits (its server costs O(n·g) instead of O(n·k)).
    """
    if prefer not in ("olh", "oue"):
        raise ParameterError(f"adaptive_fo: prefer must be 'olh' or 'oue', got {prefer!r}")
    return "kary_rr" if k - 2 < 3.0 * math.exp(min(float(epsilon), 700.0)) else prefer


# --- unary encodings ---


@dataclass(frozen=True)
class UnaryEncoding(FrequencyOracle):
    """k bits, bit j = 1[X_j < T_j], X_j uniform b-bit integers read top 16 bits first (``unary_coins``; module docstring)."""

    epsilon: float
    categories: tuple[float, ...]
    report_dtype: ClassVar[type[np.generic]] = np.uint8

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "categories", checked_categories(self.kind, self.categories))
        self.thresholds  # noqa: B018  (validates)

    @staticmethod
    def _cells(epsilon: float, b: int) -> tuple[int, int]:
        """(T_in, T_out) on the 2^b grid; ParameterError when the grid cannot express ε."""
        raise NotImplementedError

    @property
    def chunk_bits(self) -> int:
        """b: the smallest of 16, 32, 64 whose cells keep the realized loss ≥ (1 − 2^-7)·ε."""
        return _chunk_bits(type(self), self.epsilon)

    @property
    def thresholds(self) -> tuple[int, int]:
        """(T_in, T_out): bit u is 1 iff its chunk < T_in, every other bit iff < T_out."""
        return type(self)._cells(self.epsilon, self.chunk_bits)

    @property
    def report_columns(self) -> int:  # type: ignore[override]
        return (self.k + 7) // 8

    def report_domains(self) -> tuple[np.ndarray | None, ...]:
        """Every byte may take any value, except the padding bits of the last (zero)."""
        pad = 8 * self.report_columns - self.k
        last = None if pad == 0 else np.arange(0, 256, 1 << pad)
        return (None,) * (self.report_columns - 1) + (last,)

    def output_domain(self) -> None:
        return None  # 2^k reports: audited by structure (``verify_structure``) or ``enumerated``

    def bit_probabilities(self) -> tuple[Fraction, Fraction]:
        """(Pr[bit u = 1], Pr[other bit = 1]), exactly."""
        t_in, t_out = self.thresholds
        b = self.chunk_bits
        return Fraction(t_in, 1 << b), Fraction(t_out, 1 << b)

    def support_fractions(self) -> tuple[Fraction, Fraction]:
        return self.bit_probabilities()

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        """Packed bits: bit j = 1[X_j < T_j] (``unary_coins``: X_j's top 16 bits first, the rest only on a tie)."""
        idx = self._index(inputs)
        t_in, t_out = self.thresholds
        return unary_coins(randomness, self.k, self.chunk_bits, t_in, t_out, mine=idx)

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        """Σ_j log Pr[y_j] for packed reports w (rows of ``report_columns`` bytes), broadcast with u."""
        t_in, t_out = self.thresholds
        b = self.chunk_bits
        w = np.asarray(w, dtype=np.uint8)
        idx = self._index(np.asarray(u, dtype=np.float64).ravel()).reshape(np.shape(u))
        ones = np.bitwise_count(w).sum(axis=-1, dtype=np.int64)
        shape = np.broadcast_shapes(idx.shape, w.shape[:-1])
        wb = np.broadcast_to(w, shape + (w.shape[-1],))
        byte = np.take_along_axis(wb, np.broadcast_to(idx // 8, shape)[..., None], axis=-1)[..., 0]
        yu = (byte >> (7 - idx % 8)) & 1
        logs = [math.log(t_in), math.log((1 << b) - t_in), math.log(t_out), math.log((1 << b) - t_out)]
        other_ones = ones - yu
        return (
            np.where(yu == 1, logs[0], logs[1]) + other_ones * logs[2] + (self.k - 1 - other_ones) * logs[3] - self.k * b * _LN2
        )

    def support_counts(self, reports: np.ndarray) -> np.ndarray:
        """C(x) = Σ_i y_{i,x}: the column sums of the packed bits (``bit_column_counts``)."""
        w = np.asarray(reports, dtype=np.uint8)
        if w.ndim != 2 or w.shape[1] != self.report_columns:
            raise ParameterError(f"{self.kind}: reports must be rows of {self.report_columns} bytes, got shape {w.shape}")
        return bit_column_counts(w, self.k)

    # exact audit on small k (``enumerated``): one virtual draw per bit
    def _virtual_bits(self) -> int:
        return self.chunk_bits


_SS_GROUPED = 10  # Subset Selection groups its users by give-back and input above this many picks
# Subset Selection's blocks of users: 2^23 membership bytes (users × k), within 2^10 … 2^15 users
# (measured best on the 2-core box: 2^15 users at k = 16, 2^13 at k = 1,024, ≥ 2^10 at k = 2^16,
# where fewer users per step leave the numpy calls' overhead to a few)
_SS_BLOCK_BYTES = 1 << 23
_SS_BLOCK_USERS = (1 << 10, 1 << 15)
# Subset Selection by Bernoulli draws: blocks of users of 2^22 membership bytes (at most 2^15
# users), and its fix-up's Floyd steps taken 256 at a time (a bounded index array per step group)
_SS_BERNOULLI_BYTES = 1 << 22
_SS_FIX_STEPS = 256
SS_SAMPLERS = ("auto", "floyd", "bernoulli")
# _SELECT_BIT[v, q]: the position (0: the most significant, packbits' first) of the q-th set bit of byte v
_SELECT_BIT = np.array([[([p for p in range(8) if v >> (7 - p) & 1] + [0] * 8)[q] for q in range(8)] for v in range(256)], dtype=np.uint8)
HEAD_BITS = 16  # ``unary_coins`` compares the top 16 bits of each X_j first: all of it at b = 16
_UNARY_BLOCK = 1 << 18  # head bytes per row block of ``unary_coins`` (users × bits × 2): 256 KiB, in L2 (measured best of 2^17–2^20)
_UNARY_TIES = 1 << 16  # ``unary_coins`` answers its ties in batches of about this many (bounded memory, few calls)


def unary_draws(k: int, b: int) -> int:
    """How many draw indices (0, 1, …; whole AES blocks) ``unary_coins`` reads per report for k
    bits on b-bit cells: ⌈k/8⌉ main blocks, then ⌈(b − 16)·k/128⌉ fallback blocks (module
    docstring): b·k/128 in all, rounded up. At most 2^15 = ``HIGH_HALF`` for every k ≤ 2^16 and
    b ∈ {16, 32, 64}."""
    return -(-k // 8) + -(-(b - HEAD_BITS) * k // 128)


def unary_word_draws(k: int, b: int) -> list[int]:
    """The ``bits`` indices a stand-in without block methods is read at (``draw_blocks``): the
    low halves 0 .. D − 1 and the high halves HIGH_HALF .. HIGH_HALF + D − 1, D = ``unary_draws``."""
    d = unary_draws(k, b)
    return list(range(d)) + list(range(HIGH_HALF, HIGH_HALF + d))


def _below(heads: np.ndarray, t_hi: int, out: np.ndarray | None = None) -> np.ndarray:
    """heads < t_hi for 16-bit heads and t_hi ∈ [0, 2^16] (2^16: a threshold of 2^b, always
    below), into ``out`` when given (a reused buffer: fresh arrays of megabytes cost page faults)."""
    if t_hi > 0xFFFF:
        return np.ones(heads.shape, dtype=bool) if out is None else _fill(out, True)
    return np.less(heads, np.uint16(t_hi), out=out)


def _ties(heads: np.ndarray, t_hi: int, out: np.ndarray | None = None) -> np.ndarray:
    """heads == t_hi (never, for t_hi = 2^16), into ``out`` when given."""
    if t_hi > 0xFFFF:
        return np.zeros(heads.shape, dtype=bool) if out is None else _fill(out, False)
    return np.equal(heads, np.uint16(t_hi), out=out)


def _flat_ties(tie: np.ndarray) -> np.ndarray:
    """The flat indices of the True entries of a C-contiguous bool array, few of them (2^-16):
    first the 8-byte words holding one (one uint64 test per 8 entries), then their bytes, taken
    (``np.take``: ≈ 6× faster than fancy indexing here) and searched flat (a 2-D ``nonzero`` is
    ≈ 3.5× slower). ``np.flatnonzero`` alone reads every byte, ≈ 2× slower than this."""
    flat = tie.reshape(-1)
    if len(flat) % 8 or not flat.flags.c_contiguous:
        return np.flatnonzero(flat)
    words = np.flatnonzero(flat.view(np.uint64) != 0)
    at = np.flatnonzero(np.take(flat.reshape(-1, 8), words, axis=0))
    return words[at >> 3] * 8 + (at & 7)


def _fill(out: np.ndarray, value: bool) -> np.ndarray:
    out.fill(value)
    return out


def _tie_bits(randomness: Draws, rows: np.ndarray, j: np.ndarray, t_low: np.ndarray, main: int, r: int) -> np.ndarray:
    """The tied bits' answers: 1[L_j < T_j mod 2^r], L_j the r = b − 16 bits at offset r·j of the
    fallback stream (words 2e and 2e + 1 are the halves of block main + e, little-endian), read
    for the tied (user, bit) pairs only (``block_pairs``: one AES call for all of them)."""
    start = j.astype(np.int64) * r
    word = start >> 6
    shift = (start & 63).astype(np.uint64)
    halves = block_pairs(randomness, rows, main + (word >> 1))
    low = np.take(halves.reshape(-1), 2 * np.arange(len(rows)) + (word & 1)) >> shift  # flat: 2-D fancy indexing is slower
    cross = shift + np.uint64(r) > np.uint64(64)  # the slot runs on into the next word
    if cross.any():
        even = cross & ((word & 1) == 0)  # the next word is this block's high half
        low[even] |= halves[even, 1] << (np.uint64(64) - shift[even])
        odd = cross & ((word & 1) == 1)  # the next word is the next block's low half
        if odd.any():
            nxt = block_pairs(randomness, rows[odd], main + (word[odd] >> 1) + 1)[:, 0]
            low[odd] |= nxt << (np.uint64(64) - shift[odd])
    low &= np.uint64((1 << r) - 1)
    return low < t_low


def unary_coins(randomness: Draws, k: int, b: int, one: int, zero: int, *, mine: np.ndarray | None = None, chosen: np.ndarray | None = None) -> np.ndarray:
    """k independent exact coins per user, packed: bit j = 1[X_j < T_j], X_j uniform on [0, 2^b).

    T_j is ``one`` where user i's bit j is *chosen* — j = ``mine[i]`` (OUE/SUE: the input's
    bit), or bit j of the packed row ``chosen[i]`` (the longitudinal IRR, RAPPOR) — else
    ``zero``; thresholds are integers in [0, 2^b]. The layout (module docstring): X_j =
    H_j·2^{b−16} + L_j, H_j the 16-bit lane (j mod 8) of block ⌊j/8⌋, and L_j (b > 16 only) read
    only when H_j equals the threshold's top 16 bits (probability 2^-16), from the fallback
    stream. Every bit's law is exactly Pr[X_j < T_j] = T_j/2^b, and the bits are independent:
    X_j < T ⟺ H_j < T_hi or (H_j = T_hi and L_j < T_lo), T = T_hi·2^{b−16} + T_lo. At b = 16
    (OUE and SUE at every ε in [2^-6, 8]: ``chunk_bits``) H_j is all of X_j and nothing else is read.

    Parameters
    ----------
    randomness : Draws
        The users' draws, read as whole blocks (``draw_blocks``, ``block_pairs``).
    k, b : int
        Bits per report and the cell resolution (16, 32 or 64).
    one, zero : int
        The two thresholds.
    mine, chosen : numpy.ndarray, optional
        Which bits take ``one``: an index per user, or packed rows of ⌈k/8⌉ bytes (at most one).

    Returns
    -------
    numpy.ndarray
        uint8 rows of ⌈k/8⌉ bytes, bit j MSB-first in byte ⌊j/8⌋ (``np.packbits``).
    """
    n = len(randomness.users)
    r = b - HEAD_BITS
    main = -(-k // 8)
    hi1, lo1, hi0, lo0 = one >> r, one & ((1 << r) - 1), zero >> r, zero & ((1 << r) - 1)
    out = np.empty((n, main), dtype=np.uint8)
    idx = None if mine is None else np.asarray(mine, dtype=np.int64)
    packed = np.asarray(chosen, dtype=np.uint8) if chosen is not None else None
    # Row blocks of whole reports (every column block would cost a strided write and a short-row
    # packbits per user): at most _UNARY_BLOCK head bytes each, in cache; ≥ 1 user (128 KiB at k = 2^16).
    step = max(1, _UNARY_BLOCK // (16 * main))
    bits_buffer = np.empty((min(n, step), k), dtype=bool)
    tie_buffer = np.empty((min(n, step), k) if r else (0, k), dtype=bool)  # b = 16 has no ties: X_j is its head
    blocks = np.empty((min(n, step), 2 * main), dtype=np.uint64)  # reused: fresh ones cost page faults
    thresholds = np.empty((min(n, step), k) if packed is not None and r else (0, k), dtype=np.uint16)
    ties: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (rows, bits, thresholds' low parts) not yet answered
    pending = 0
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        m = r1 - r0
        # lane i of block d is H_{8d+i} (little-endian halves): the row's lanes are H_0, H_1, … in order
        got = draw_blocks(randomness, 0, main, slice(r0, r1) if m < n else None, blocks[:m])
        lanes = got.astype("<u8", copy=False).view("<u2")  # contiguous, 8·main lanes a row
        heads = lanes[:, :k] if k % 8 == 0 else np.ascontiguousarray(lanes[:, :k])  # one strided copy, then contiguous passes
        tie = None
        if packed is not None and not r:
            # b = 16: each threshold compared once over the row block, packed, and chosen per bit on
            # the packed bytes (⅔ of the time of unpacking the choice into per-bit thresholds)
            rows = np.ascontiguousarray(packed[r0:r1])
            ones, zeros = (_packed_rows(_below(heads, t, bits_buffer[:m]), k) for t in (hi1, hi0))
            out[r0:r1] = (ones & rows) | (zeros & ~rows)
        else:
            if packed is not None:
                # flat: unpacking along rows of a byte or two costs ≈ 20 ns a row
                pick = np.unpackbits(np.ascontiguousarray(packed[r0:r1]).reshape(-1)).reshape(m, -1)[:, :k].view(bool)
                if max(hi0, hi1) <= 0xFFFF:  # each bit's threshold head, without branches (np.where on a random mask mispredicts: ≈ 3× slower)
                    thr = np.multiply(pick.view(np.uint8), np.uint16((hi1 - hi0) & 0xFFFF), out=thresholds[:m])
                    thr += np.uint16(hi0)  # uint16 arithmetic mod 2^16: hi0 where not picked, hi1 where picked
                    bits = np.less(heads, thr, out=bits_buffer[:m])
                    tie = np.equal(heads, thr, out=tie_buffer[:m])
                else:
                    bits = (pick & _below(heads, hi1)) | (~pick & _below(heads, hi0))
                    tie = (pick & _ties(heads, hi1)) | (~pick & _ties(heads, hi0))
            else:
                bits = _below(heads, hi0, bits_buffer[:m])
                if r:
                    tie = _ties(heads, hi0, tie_buffer[:m])
                if idx is not None:  # the input's bit: its own head, threshold ``one`` (flat indices: 2-D fancy indexing is slower)
                    own = np.take(lanes.reshape(-1), np.arange(0, m * 8 * main, 8 * main) + idx[r0:r1])
                    at = np.arange(0, m * k, k) + idx[r0:r1]
                    np.put(bits, at, _below(own, hi1))
                    if tie is not None:
                        np.put(tie, at, _ties(own, hi1))
            out[r0:r1] = _packed_rows(bits, k)
        if tie is not None:
            flat = _flat_ties(tie)
            if len(flat):  # a tied bit is 0 here (H = T_hi is not below it); its answer is patched in below
                tr, j = np.divmod(flat, k)
                if packed is not None:
                    is_one = np.take(pick.reshape(-1), flat)
                elif idx is not None:
                    is_one = idx[r0 + tr] == j
                else:
                    is_one = np.zeros(len(tr), dtype=bool)
                ties.append((r0 + tr, j, np.where(is_one, np.uint64(lo1), np.uint64(lo0))))
                pending += len(flat)
        if pending >= _UNARY_TIES or (r1 == n and pending):
            _patch_ties(out, randomness, ties, main, r)
            ties, pending = [], 0
    return out


def _packed_rows(bits: np.ndarray, k: int) -> np.ndarray:
    """Rows of k bools packed MSB-first into ⌈k/8⌉ bytes, the padding bits 0: as one flat run
    (packbits along short rows is ≈ 40× slower)."""
    m = len(bits)
    if k % 8:
        whole = np.zeros((m, 8 * -(-k // 8)), dtype=bool)
        whole[:, :k] = bits
        bits = whole
    return np.packbits(bits.reshape(-1)).reshape(m, -1)


def _patch_ties(out: np.ndarray, randomness: Draws, ties: list[tuple[np.ndarray, np.ndarray, np.ndarray]], main: int, r: int) -> None:
    """Set the tied bits whose fallback bits are below the threshold's (``_tie_bits``), in the
    packed rows ``out``: many row blocks' ties at once (one AES call and a few numpy calls for
    all of them, not per block)."""
    rows, j, t_low = (np.concatenate(part) for part in zip(*ties, strict=True))
    yes = _tie_bits(randomness, rows, j, t_low, main, r)
    rows, j = rows[yes], j[yes]
    np.bitwise_or.at(out, (rows, j >> 3), np.uint8(0x80) >> (j & 7).astype(np.uint8))


def unary_word(draw: int, k: int, b: int, cell: Any) -> np.ndarray:
    """``bits(draw)`` of a stand-in that makes each bit's b-bit value X_j = ``cell(j)`` (uint64
    arrays), in ``unary_coins``' layout read through ``bits`` (``draw_blocks``: index d is the
    low half of block d, d + HIGH_HALF its high half). The audits' stand-ins
    (``ldp.core.audit_structure``, the longitudinal, RAPPOR, sketch and multidimensional audits)
    hand the real sampler these words, so its cells are the intervals [0, T_j), [T_j, 2^b) of X_j.

    Main block d (d < ⌈k/8⌉): 16-bit lane i of the block (lanes 0–3 its low half, little-endian)
    is the top 16 bits of X_{8d+i}. Fallback block ⌈k/8⌉ + e (b > 16 only): words 2e (low half)
    and 2e + 1 (high half) of the stream whose bits r·j .. r·j + r − 1 are the low r = b − 16 bits
    of X_j. Zeros outside the layout."""
    main, r = -(-k // 8), b - HEAD_BITS
    block, half = (draw - HIGH_HALF, 1) if draw >= HIGH_HALF else (draw, 0)
    out = np.zeros(len(np.asarray(cell(0))), dtype=np.uint64)
    if block < main:
        for i in range(4):
            j = 8 * block + 4 * half + i
            if j < k:
                out |= (np.asarray(cell(j), dtype=np.uint64) >> np.uint64(r)) << np.uint64(16 * i)
        return out
    if r == 0:  # b = 16: no fallback blocks
        return out
    lo = 64 * (2 * (block - main) + half)
    mask = np.uint64((1 << r) - 1)
    for j in range(max(0, (lo - r + 1) // r), min(k, (lo + 63) // r + 1)):
        s = r * j
        if s + r <= lo or s >= lo + 64:
            continue
        low = np.asarray(cell(j), dtype=np.uint64) & mask
        out |= low << np.uint64(s - lo) if s >= lo else low >> np.uint64(lo - s)
    return out


_BYTE_LANES = np.uint64(0x0101010101010101)  # bit 0 of each byte of a word
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.int64)  # [v, j] = bit j of v, MSB first


def bit_column_counts(packed: np.ndarray, k: int) -> np.ndarray:
    """Column sums of k bit columns packed MSB-first into rows of bytes (``np.packbits(…, axis=1)``
    rows): int64, shape (k,); equal to ``np.unpackbits(packed, axis=1, count=k).sum(axis=0)``.

    Rows of ≤ 2 bytes (k ≤ 16) are one ``np.bincount`` of the row as an integer, times each byte
    value's bits. Rows of 3–8 bytes are read as 64-bit words in blocks of 255 rows: for each bit
    position b, ``(word >> b) & 0x0101…01`` puts bit b of every byte in its own byte lane, and 255
    rows of those sum without carrying out of a lane (SWAR, "SIMD within a register"; Knuth, TAOCP
    4A §7.1.3). Wider rows are unpacked 255 rows at a time, in cache (≤ 256 KiB), and summed down
    the rows in uint8 (255 ones fit a byte), then widened to int64: per byte of reports ≈ 0.7–1.0
    ns at k ≥ 512, where the words took 1.7–2.1 (and 7–10 at k = 96–128, whose two-word rows
    leave the SWAR sums tiny inner loops). OUE's count costs 3.0 / 3.7 ms per 10^6 reports at
    k = 2 / 16 (CPU time; docs/benchmarks.md, "The estimators").

    Examples
    --------
    >>> rows = np.packbits(np.array([[1, 0, 1], [1, 1, 0]], dtype=np.uint8), axis=1)
    >>> bit_column_counts(rows, 3).tolist()
    [2, 1, 1]
    """
    w = np.asarray(packed, dtype=np.uint8)
    n, width = w.shape
    if width == 1:
        return (np.bincount(w[:, 0], minlength=256) @ _BYTE_BITS)[:k]
    if width == 2:
        pair = np.bincount((w[:, 0].astype(np.intp) << 8) | w[:, 1], minlength=1 << 16).reshape(256, 256)
        return np.concatenate([pair.sum(axis=1) @ _BYTE_BITS, pair.sum(axis=0) @ _BYTE_BITS])[:k]
    if width > 8:
        return _unpacked_column_counts(w, k)
    words = -(-width // 8)
    rows = 255 * max(1, min((1 << 18) // (255 * 8 * words), -(-n // 255)))  # whole 255-row groups, ≤ about 256 KiB: in cache
    buf = np.zeros((rows, 8 * words), dtype=np.uint8)  # zero padding (columns and the last rows) adds nothing
    as_words = buf.view(np.uint64)
    tmp = np.empty_like(as_words)
    per_bit = np.zeros((8, 8 * words), dtype=np.int64)  # [j, c]: ones in bit j (MSB first) of byte c
    groups = rows // 255
    for lo in range(0, n, rows):
        m = min(rows, n - lo)
        buf[:m, :width] = w[lo : lo + m]
        if m < rows:
            buf[m:] = 0
        for b in range(8):
            np.right_shift(as_words, np.uint64(b), out=tmp)
            np.bitwise_and(tmp, _BYTE_LANES, out=tmp)
            lanes = tmp.reshape(groups, 255, words).sum(axis=1)  # each byte lane ≤ 255: no carry
            per_bit[7 - b] += lanes.view(np.uint8).reshape(groups, 8 * words).sum(axis=0, dtype=np.int64)
    return per_bit.T.ravel()[:k]  # category 8c + j is bit j (MSB first) of byte c


def _unpacked_column_counts(w: np.ndarray, k: int) -> np.ndarray:
    """``bit_column_counts`` for rows wider than 8 bytes: groups of 255 rows unpacked (≤ 2^18
    bytes at a time, in cache) and summed down the rows in uint8, which cannot overflow."""
    n, width = w.shape
    columns = 8 * width
    groups = max(1, min((1 << 18) // (255 * columns), -(-n // 255)))
    counts = np.zeros(columns, dtype=np.int64)
    for lo in range(0, n, 255 * groups):
        m = min(255 * groups, n - lo)
        bits = np.unpackbits(w[lo : lo + m].reshape(-1))  # flat: unpacking along rows costs per row
        whole, rest = divmod(m, 255)
        if whole:
            counts += np.add.reduce(bits[: whole * 255 * columns].reshape(whole, 255, columns), axis=1, dtype=np.uint8).sum(axis=0, dtype=np.int64)
        if rest:
            counts += np.add.reduce(bits[whole * 255 * columns :].reshape(rest, columns), axis=0, dtype=np.uint8)
    return counts[:k]


@functools.lru_cache(maxsize=1024)
def _chunk_bits(cls: type[UnaryEncoding], epsilon: float) -> int:
    for b in (16, 32):
        try:
            t_in, t_out = cls._cells(epsilon, b)
        except ParameterError:
            continue
        top = 1 << b
        loss = math.log(max(t_in * (top - t_out), t_out * (top - t_in))) - math.log(min(t_in * (top - t_out), t_out * (top - t_in)))
        if loss >= (1 - 2**-7) * epsilon:
            return b
    return 64


def _binary_cells(total: int, epsilon: float | Fraction, kind: str) -> int:
    """⌈total/(e^ε + 1)⌉, refused when it is not below total/2 (ε under the grid's resolution)."""
    t = ceil_share(total, epsilon, 2)
    if 2 * t >= total:
        raise ParameterError(f"{kind} at ε={float(epsilon):.3g} is below the 2^-64 resolution of its draws; use a larger ε")
    return t


@dataclass(frozen=True)
class OptimizedUnaryEncoding(UnaryEncoding):
    """Optimized unary encoding (Wang et al. 2017 §4.3), exact on integer cells.

    The input's bit is 1 w.p. exactly 1/2, every other bit w.p. T_out/2^b, T_out = ⌈2^b/(e^ε+1)⌉:
    privacy loss ln((2^b − T_out)/T_out) ≤ ε exactly (module docstring, ``verify_structure``).
    Estimator: p* = 1/2, q* = T_out/2^b; Var f̂ ≈ 4e^ε/(n(e^ε − 1)²) at f → 0.

    >>> from ldp.core.audit_structure import verify_structure
    >>> R = OptimizedUnaryEncoding(1.0, tuple(range(16)))
    >>> R.chunk_bits, [round(float(x), 4) for x in R.bit_probabilities()]
    (16, [0.5, 0.269])
    >>> verify_structure(R).passed
    True
    """

    kind: ClassVar[str] = "oue"

    @staticmethod
    def _cells(epsilon: float, b: int) -> tuple[int, int]:
        return 1 << (b - 1), _binary_cells(1 << b, epsilon, "oue")


@dataclass(frozen=True)
class SymmetricUnaryEncoding(UnaryEncoding):
    """Symmetric unary encoding, basic one-time RAPPOR (Erlingsson et al. 2014), exact.

    Every bit is flipped with the same probability: the input's bit is 1 w.p. (2^b − T)/2^b, every
    other bit w.p. T/2^b, T = ⌈2^b/(e^{ε/2}+1)⌉ at the exact rational ε/2: privacy loss
    2·ln((2^b − T)/T) ≤ ε exactly. Var f̂ ≈ e^{ε/2}/(n(e^{ε/2} − 1)²) at f → 0.
    """

    kind: ClassVar[str] = "sue"

    @staticmethod
    def _cells(epsilon: float, b: int) -> tuple[int, int]:
        t = _binary_cells(1 << b, Fraction(epsilon) / 2, "sue")
        return (1 << b) - t, t


# --- optimized local hashing ---


def _parity(x: np.ndarray) -> np.ndarray:
    return (np.bitwise_count(x) & 1).astype(np.int64)


@dataclass(frozen=True)
class OptimizedLocalHashing(FrequencyOracle):
    """Optimized local hashing (Wang et al. 2017 §4.4) with random GF(2)-linear hashes, exact.

    Input index x < k as m = ⌈log2 k⌉ bits. Hash: A = (a_0, ..., a_{l−1}), a_r = bits(1 + r) >> (64 − m),
    h_A(x) = Σ_r parity(a_r & x)·2^r ∈ [g], g = 2^l (``hash_bits`` l; default round(log2(e^ε + 1))
    within [1, m]). Report: the row (a_0, ..., a_{l−1}, y), y = exact g-ary RR of h_A(x) on bits(0)
    (``rr_cells``(ε, g): keep A_g/2^64, each other B_g/2^64). Privacy: ln(A_g/B_g) ≤ ε exactly, for
    every k (module docstring). The family is exactly universal, so q* = 1/g and p* = A_g/2^64.
    Server (``support_counts``): C = 2^{−l}·H·F, F[z] = Σ_i Σ_{s ∈ [g]} (−1)^{⟨s, y_i⟩}·1[z = ⊕_{r∈s} a_{i,r}],
    in O(n·g + 2^m·m) (a Gray-code walk over s, one bincount each); ``support_counts_direct`` is
    the O(n·k) definition, used when it is cheaper and to check the transform.
    Var f̂ ≈ (g − 1 + e^ε)²/(n(e^ε − 1)²(g − 1)) at f → 0, = 4e^ε/(n(e^ε − 1)²) at g = e^ε + 1.
    """

    epsilon: float
    categories: tuple[float, ...]
    hash_bits: int | None = None
    kind: ClassVar[str] = "olh"
    report_dtype: ClassVar[type[np.generic]] = np.uint16

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "categories", checked_categories(self.kind, self.categories))
        m = self.m
        if self.hash_bits is None:
            default = round(math.log2(math.exp(min(self.epsilon, 700.0)) + 1.0))
            object.__setattr__(self, "hash_bits", max(1, min(m, default)))
        l_ = self.hash_bits
        if isinstance(l_, bool) or not isinstance(l_, (int, np.integer)) or not 1 <= l_ <= m:
            raise ParameterError(f"olh: hash_bits must be an integer in [1, {m}] (g = 2^hash_bits ≤ 2^⌈log2 k⌉), got {l_!r}")
        object.__setattr__(self, "hash_bits", int(l_))
        rr_cells(self.epsilon, self.g)  # validates

    @property
    def m(self) -> int:
        return max(1, (self.k - 1).bit_length())

    @property
    def l(self) -> int:  # noqa: E743 - the paper's name
        assert self.hash_bits is not None  # set in __post_init__
        return self.hash_bits

    @property
    def g(self) -> int:
        return 1 << self.l

    @property
    def cell_sizes(self) -> tuple[int, int]:
        return rr_cells(self.epsilon, self.g)

    @property
    def report_columns(self) -> int:  # type: ignore[override]
        return self.l + 1

    def report_domains(self) -> tuple[np.ndarray | None, ...]:
        return (np.arange(1 << self.m),) * self.l + (np.arange(self.g),)

    def output_domain(self) -> None:
        return None  # 2^{ml}·g reports: audited by structure or ``enumerated``

    def support_fractions(self) -> tuple[Fraction, Fraction]:
        return Fraction(self.cell_sizes[0], TWO64), Fraction(1, self.g)

    def hash(self, rows: np.ndarray, x: np.ndarray) -> np.ndarray:
        """h_A(x) for hash rows (…, l) and indices x, broadcast: Σ_r parity(a_r & x)·2^r."""
        a = np.asarray(rows, dtype=np.int64)
        x = np.asarray(x, dtype=np.int64)
        out = np.zeros(np.broadcast_shapes(a.shape[:-1], x.shape), dtype=np.int64)
        for r in range(self.l):
            out |= _parity(a[..., r] & x) << r
        return out

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        # a_r = the top m bits of draw 1 + r, h = Σ_r parity(a_r & x)·2^r (``hash``), y = RR of h
        # on draw 0: uint16 throughout (m ≤ 16), in cache-sized blocks; the same numbers.
        x = category_index(self.kind, self.categories, inputs).astype(np.uint16)  # x < k ≤ 2^16
        n, l_ = len(x), self.l
        out = np.empty((n, l_ + 1), dtype=np.uint16)
        hashed = np.zeros(n, dtype=np.uint16)
        shift = np.uint64(64 - self.m)
        draws = [randomness.bits(1 + r) for r in range(l_)]
        for lo in range(0, n, SAMPLER_BLOCK):
            hi = lo + SAMPLER_BLOCK
            h, xb = hashed[lo:hi], x[lo:hi]
            for r, draw in enumerate(draws):
                a_r = out[lo:hi, r]
                np.right_shift(draw[lo:hi], shift, out=a_r, casting="unsafe")
                bit = np.bitwise_count(a_r & xb)
                bit &= np.uint8(1)
                h |= np.left_shift(bit, r, dtype=np.uint16)
        a, b = self.cell_sizes
        out[:, l_] = rr_draw(hashed, randomness.bits(0), a, b)
        return out

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        w = np.asarray(w, dtype=np.int64)
        idx = self._index(np.asarray(u, dtype=np.float64).ravel()).reshape(np.shape(u))
        keep = self.hash(w[..., : self.l], idx) == w[..., self.l]
        a, b = self.cell_sizes
        return np.where(keep, math.log(a), math.log(b)) - (64 + self.m * self.l) * _LN2

    def _check_reports(self, reports: np.ndarray) -> np.ndarray:
        w = np.asarray(reports)
        if w.ndim != 2 or w.shape[1] != self.l + 1:
            raise ParameterError(f"olh: reports must be rows of {self.l + 1} values (hash rows, y), got shape {w.shape}")
        return w.astype(np.int64)

    def support_counts(self, reports: np.ndarray) -> np.ndarray:
        w = self._check_reports(reports)
        n = len(w)
        if 4 * n * self.k * self.l <= self.g * (n + (1 << self.m)) + (self.m << self.m):  # direct: ≈ 4× a transform step per entry
            return self.support_counts_direct(w)
        size = 1 << self.m
        # One unweighted bincount per s: the cell 2z + parity(s & y) holds z and the sign
        # (−1)^⟨s, y⟩ together, and column r of ``steps`` (2a_r + bit r of y) moves s_{t−1} to s_t.
        steps = (w[:, : self.l] << 1) | ((w[:, self.l, None] >> np.arange(self.l)) & 1)
        steps = np.ascontiguousarray(steps.T)
        cell = np.zeros(n, dtype=np.intp)
        hist = np.bincount(cell, minlength=2 * size)
        for t in range(1, self.g):  # Gray code: s_t = t ^ (t >> 1) differs from s_{t−1} in bit ctz(t)
            cell ^= steps[(t & -t).bit_length() - 1]
            hist += np.bincount(cell, minlength=2 * size)
        total = walsh_hadamard(hist[0::2] - hist[1::2])
        return (total >> self.l)[: self.k]  # exact: every entry is a multiple of g

    def support_counts_direct(self, reports: np.ndarray) -> np.ndarray:
        """C(x) = Σ_i 1[h_{A_i}(x) = y_i] by hashing every category for every report (O(n·k·l))."""
        w = self._check_reports(reports)
        counts = np.zeros(self.k, dtype=np.int64)
        xs = np.arange(self.k, dtype=np.int64)
        step = max(1, (1 << 22) // self.k)
        for lo in range(0, len(w), step):
            chunk = w[lo : lo + step]
            counts += (self.hash(chunk[:, None, : self.l], xs[None, :]) == chunk[:, self.l, None]).sum(axis=0)
        return counts

    def _virtual_bits(self) -> int:
        return 64


# --- Hadamard response ---


@dataclass(frozen=True)
class HadamardResponse(FrequencyOracle):
    """Hadamard Response (Acharya, Sun & Zhang 2019), exact on integer cells.

    K = 2^M with M = bit_length(k) (so K > k); input index x uses row a = x + 1 of the Sylvester
    Hadamard matrix, C_x = {j ∈ [K] : parity(a & j) = 0} (half of [K]). One draw decides "in C_x"
    (X0 < A, ``rr_cells``(ε, 2)); the top M − 1 bits of draw 1 pick t ∈ [2^{M−1}] uniformly, mapped
    to the t-th element of C_x (or of its complement) by inserting at a's lowest set bit p the
    bit that sets the parity. Pr[j|x] = (A or B)/(2^64·2^{M−1}): loss ln(A/B) ≤ ε exactly.
    Estimator: p* = A/2^64, q* = 1/2 exactly (two distinct rows' halves meet in K/4 places);
    C(x) = (n + (H·N)[x + 1])/2 with N the histogram of the reports. Var f̂ = [f p*(1−p*) + (1−f)/4]/(n(p* − 1/2)²),
    ≈ (e^ε+1)²/(n(e^ε−1)²) at f → 0.
    """

    epsilon: float
    categories: tuple[float, ...]
    kind: ClassVar[str] = "hadamard_response"
    report_dtype: ClassVar[type[np.generic]] = np.uint32

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "categories", checked_categories(self.kind, self.categories))
        rr_cells(self.epsilon, 2)

    @property
    def M(self) -> int:  # noqa: N802 - the paper's name
        return self.k.bit_length()

    @property
    def K(self) -> int:  # noqa: N802
        return 1 << self.M

    @property
    def cell_sizes(self) -> tuple[int, int]:
        return rr_cells(self.epsilon, 2)

    def output_domain(self) -> np.ndarray:
        return np.arange(self.K, dtype=np.float64)

    def report_domains(self) -> tuple[np.ndarray | None, ...]:
        return (np.arange(self.K),)

    def support_fractions(self) -> tuple[Fraction, Fraction]:
        return Fraction(self.cell_sizes[0], TWO64), Fraction(1, 2)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        # Row a = x + 1; t = the top M − 1 bits of draw 1; j = t with a zero inserted at a's lowest
        # set bit L: ((t − below) << 1) | below with below = t & (L − 1), which is t + (t & −L).
        # The report is j or j | L (setting L flips parity(a & ·)): j | L exactly when
        # parity(a & j) equals [X0 < A] (wanted: parity 0 inside C_x, 1 outside). uint32
        # throughout (K ≤ 2^17), in cache-sized blocks, without a branch per user.
        rows = category_index(self.kind, self.categories, inputs).astype(np.uint32)
        rows += np.uint32(1)
        a, _ = self.cell_sizes
        x0, x1 = randomness.bits(0), randomness.bits(1)
        a64, shift = np.uint64(a), np.uint64(65 - self.M)
        out = np.empty(len(rows), dtype=np.uint32)
        for lo in range(0, len(rows), SAMPLER_BLOCK):
            hi = lo + SAMPLER_BLOCK
            row, j = rows[lo:hi], out[lo:hi]
            np.right_shift(x1[lo:hi], shift, out=j, casting="unsafe")  # t < 2^(M−1)
            pivot = np.negative(row)
            pivot &= row  # L
            spread = np.negative(pivot)
            spread &= j
            j += spread  # t + (t & −L)
            parity = np.bitwise_count(np.bitwise_and(row, j, out=spread))
            parity &= np.uint8(1)
            wrong = np.equal(parity, x0[lo:hi] < a64)
            pivot *= wrong
            j |= pivot
        return out

    def _masses(self, rows: np.ndarray, j: np.ndarray) -> np.ndarray:
        a, b = self.cell_sizes
        return np.where(_parity(rows & j) == 0, np.uint64(a), np.uint64(b)).astype(np.uint64)

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        rows = self._index(np.asarray(u, dtype=np.float64).ravel()).reshape(np.shape(u)) + 1
        j = np.asarray(w).astype(np.int64)
        return np.log(self._masses(rows, j).astype(np.float64)) - (64 + self.M - 1) * _LN2

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        rows = self._index(np.asarray(inputs, dtype=np.float64).ravel()) + 1
        j = np.arange(self.K, dtype=np.int64)
        return self.output_domain(), self._masses(rows[:, None], j[None, :]), TWO64 << (self.M - 1)

    def realized_column(self, inputs: np.ndarray, j: int) -> np.ndarray:
        rows = self._index(np.asarray(inputs, dtype=np.float64).ravel()) + 1
        return self._masses(rows, np.asarray(j, dtype=np.int64))

    def realized_extremes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """Per output j, by structure: some row a ∈ [1, k] has parity(a & j) = 1 iff j ≠ 0 and j's
        lowest set bit is ≤ k (a = that bit; a smaller a misses every bit of j); some has parity 0
        iff k ≥ 3 (among a = 1, 2, 3 the parities are p1, p2, p1 ⊕ p2) or, for k ≤ 2, by listing."""
        a, b = self.cell_sizes
        j = np.arange(self.K, dtype=np.int64)
        has_odd = (j != 0) & ((j & -j) <= self.k)
        if self.k >= 3:
            has_even = np.ones(self.K, dtype=bool)
        else:
            rows = np.arange(1, self.k + 1, dtype=np.int64)
            has_even = (_parity(rows[:, None] & j[None, :]) == 0).any(axis=0)
        hi = np.where(has_even, np.uint64(a), np.uint64(b)).astype(np.uint64)
        lo = np.where(has_odd, np.uint64(b), np.uint64(a)).astype(np.uint64)
        return self.audit_inputs(), self.output_domain(), hi, lo, TWO64 << (self.M - 1)

    def draw_cells(self, u: float) -> list[np.ndarray]:
        step = np.uint64(1 << (65 - self.M))
        return [np.array([0, self.cell_sizes[0]], dtype=np.uint64), np.arange(1 << (self.M - 1), dtype=np.uint64) * step]

    def support_counts(self, reports: np.ndarray) -> np.ndarray:
        r = np.asarray(reports)
        j = r.astype(np.intp, copy=False).ravel()  # bincount's index type: one cast
        # No max pass (an index ≥ K lengthens the bincount), and no min pass for the uint32 reports.
        unsigned = r.dtype.kind == "u" and r.dtype.itemsize < np.dtype(np.intp).itemsize
        counts = np.bincount(j, minlength=self.K) if unsigned or j.size == 0 or j.min() >= 0 else None
        if counts is None or len(counts) > self.K:
            raise ParameterError(f"hadamard_response: reports must be indices in [0, {self.K}), got {int(j.min())}..{int(j.max())}")
        return (len(j) + walsh_hadamard(counts)[1 : self.k + 1]) // 2


# --- subset selection ---

SS_SLACK = 2.0**-20  # η: the in/out coin is built for ε(1 − η); the rest absorbs the pick cells


@functools.lru_cache(maxsize=1024)
def _ss_cells(epsilon: float, k: int, d: int) -> tuple[int, int]:
    """(A_in, A_out), A_in + A_out = 2^64, A_in/A_out ≤ e^{ε(1−η)}·d/(k − d): ``ceil_share`` at
    ε′ = ε(1 − η) + ln(d/(k − d)), computed in 80-digit Decimals rounded down."""
    from decimal import ROUND_FLOOR, Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 80
        ctx.rounding = ROUND_FLOOR
        shifted = Decimal(epsilon) * (1 - Decimal(SS_SLACK)) + (Decimal(d) / Decimal(k - d)).ln()
        shifted -= shifted.copy_abs().scaleb(-70) + Decimal(10) ** -70  # below the ln's rounding
    a_out = ceil_share(TWO64, shifted, 2)
    return TWO64 - a_out, a_out


@dataclass(frozen=True)
class SubsetSelection(FrequencyOracle):
    """Subset Selection (Wang, Wu & Hu 2016; Ye & Barg 2018), exact on integer cells.

    A report is a d-subset S of the k categories, d = max(1, round(k/(e^ε + 1))) (``subset_size``):
    Pr[S | x] ∝ e^ε if x ∈ S else 1. Draw 0 decides "x ∈ S" (X0 < A_in, ``_ss_cells``). The k − 1
    other categories, numbered o = 0 … k − 2 in order (category o + 1[o ≥ x]), give a uniform
    d-subset T by Floyd's algorithm: step s = 0 … d − 1 draws r = ⌊X·m_s/2^64⌋ uniform on
    [0, j], j = k − 1 − d + s, m_s = j + 1 (exact 64×32-bit multiply-high, ``uniform_index``), and
    inserts j if r is already in T, else r. The picks' words are both halves of the AES blocks
    from draw 2 on (``draw_blocks``: pick s is half s mod 2 of block 2 + ⌊s/2⌋). If x ∈ S, the
    user gives back pick g = ⌊X1·d/2^64⌋ (draw 1) — a uniform element of a uniform d-subset leaves
    a uniform (d − 1)-subset — and adds x. Every step's modulus is fixed in advance (none depends
    on draw 0), so the audit's cells are. Reports: the k bits of S, packed (as the unary encodings).

    Where d/k is large (``subset_sampler``: ``sampler="auto"``), T comes instead from Bernoulli
    draws and a fix-up (``sampler="bernoulli"``), in O(k) work a user with few numpy steps. Each
    other category c is in T₀ iff its 16-bit chunk L_c < t (``bernoulli_threshold``, t/2^16 ≈
    d/(k − 1)): chunk c is lane c mod 8 of block 1 + ⌊c/8⌋ (16-bit lanes, little-endian). The
    target size is m = d − 1[x ∈ S]. With f = |T₀| − m flips needed, the pool is T₀ (f > 0: some
    leave) or the other non-members (f < 0: some join), of size P, ranked by category. Floyd's
    algorithm picks s = min(|f|, P − |f|) ranks of the pool (step i: r = ⌊X·m_i/2^64⌋,
    m_i = P − s + i + 1, the word half i mod 2 of block 1 + ⌈k/8⌉ + ⌊i/2⌋); the picked ranks flip
    (s = |f|) or all the others do (s < |f|). T₀'s law is invariant under permutations of the
    others, and so is the fix-up's choice, so T is a uniform m-subset: exact but for the picks'
    rounding, of which there are at most ⌊(k − 1)/2⌋. The moduli depend on T₀, so the audit's
    cells for a fix-up draw are the union of ``uniform_index_starts(m)`` over m < k.

    Exactness (with slack, like ``discrete_laplace``). Each of the d + 1 uniform draws' cells has
    size ⌊2^64/m⌋ or ⌈2^64/m⌉ (m ≤ k), within a factor (1 ± k/2^64) of uniform; a set's
    probability is a sum over the draw sequences that give it, each within
    ((1 + k/2^64)/(1 − k/2^64))^{d+1} of its ideal share, so every realized subset probability is
    within that factor of the ideal uniform one, on either side. The ideal ratio is
    (A_in/A_out)·(k − d)/d ≤ e^{ε(1−η)}, so the realized loss is
    ≤ ε(1 − η) + 2(d + 1)·ln((1 + k/2^64)/(1 − k/2^64)) ≤ ε, which ``__post_init__`` checks (it
    refuses ε below ≈ 2^52·d·k/2^64, where the cells' rounding would not fit in εη).
    ``verify_structure`` computes that bound in exact arithmetic; ``enumerated`` audits small k
    exactly, every report and cell.
    With the Bernoulli sampler the same argument runs over its at most S = ⌊(k − 1)/2⌋ fix-up
    picks: a subset's realized probability is within [(1 − k/2^64)^S, (1 + k/2^64)^S] of the
    ideal, and the loss is ≤ ε(1 − η) + S·ln((2^64 + k)/(2^64 − k)) (``rounding_exponent``).
    Estimator: p* = A_in/2^64, q* = (A_in(d − 1) + A_out·d)/(2^64(k − 1)) (uniform picks; the pick
    cells' rounding biases f̂ by at most ≈ 2dk/2^64 relative, ≈ k²/2^64 with Bernoulli draws).
    """

    epsilon: float
    categories: tuple[float, ...]
    sampler: str = "auto"
    kind: ClassVar[str] = "subset_selection"
    report_dtype: ClassVar[type[np.generic]] = np.uint8

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "categories", checked_categories(self.kind, self.categories))
        if self.sampler not in SS_SAMPLERS:
            raise ParameterError(f"subset_selection: sampler must be one of {', '.join(SS_SAMPLERS)}, got {self.sampler!r}"[:300])
        a_in, a_out = self.cell_sizes
        if a_in <= 0 or a_out <= 0:
            raise ParameterError(f"subset_selection at ε={self.epsilon:g}, k={self.k} is beyond the 2^-64 resolution of its draws")
        if self.loss_bound() > self.epsilon:
            raise ParameterError(
                f"subset_selection at ε={self.epsilon:g} with k={self.k}: the pick cells' rounding does not fit the 2^-20 slack; use a larger ε"
            )

    @property
    def subset_size(self) -> int:
        """d = round(k/(e^ε + 1)) within [1, k − 1] (Wang et al. 2016's optimum)."""
        return max(1, min(self.k - 1, round(self.k / (math.exp(min(self.epsilon, 700.0)) + 1.0))))

    @property
    def cell_sizes(self) -> tuple[int, int]:
        return _ss_cells(self.epsilon, self.k, self.subset_size)

    @property
    def method(self) -> str:
        """The sampler in use: ``sampler``, or for "auto" ``subset_sampler(k, d)``."""
        return subset_sampler(self.k, self.subset_size) if self.sampler == "auto" else self.sampler

    @property
    def bernoulli_threshold(self) -> int:
        """t: a category joins T₀ iff its 16-bit chunk is < t; t/2^16 = d/(k − 1), rounded, in [1, 2^16 − 1]."""
        return min((1 << 16) - 1, max(1, round((1 << 16) * self.subset_size / (self.k - 1))))

    @property
    def rounding_exponent(self) -> int:
        """The power of (2^64 + k)/(2^64 − k) in the loss bound: 2(d + 1) for Floyd's d + 1 uniform
        draws, ⌊(k − 1)/2⌋ for the Bernoulli sampler's fix-up picks (class docstring)."""
        return 2 * (self.subset_size + 1) if self.method == "floyd" else (self.k - 1) // 2

    def loss_bound(self) -> float:
        """The proven bound on the realized loss: ln((A_in/A_out)(k − d)/d) + e·ln((2^64 + k)/(2^64 − k)),
        e = ``rounding_exponent``."""
        a_in, a_out = self.cell_sizes
        d = self.subset_size
        return math.log(a_in / a_out * (self.k - d) / d) + self.rounding_exponent * math.log1p(2 * self.k / (TWO64 - self.k))

    @property
    def report_columns(self) -> int:  # type: ignore[override]
        return (self.k + 7) // 8

    @property
    def report_bits_set(self) -> int:
        """Every report names exactly d categories: the aggregator refuses rows with another count."""
        return self.subset_size

    def report_domains(self) -> tuple[np.ndarray | None, ...]:
        pad = 8 * self.report_columns - self.k
        return (None,) * (self.report_columns - 1) + (None if pad == 0 else np.arange(0, 256, 1 << pad),)

    def output_domain(self) -> None:
        return None

    def support_fractions(self) -> tuple[Fraction, Fraction]:
        a_in, a_out = self.cell_sizes
        d = self.subset_size
        return Fraction(a_in, TWO64), Fraction(a_in * (d - 1) + a_out * d, TWO64 * (self.k - 1))

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        """Floyd's algorithm over the k − 1 others, one step per pick for a block of users at once,
        or Bernoulli draws and a fix-up (``method``; class docstring). Memory O(block·k) bytes (a
        membership byte per user and category of the block, packed to k/8 for the report)."""
        idx = self._index(inputs)
        n, k, d = len(idx), self.k, self.subset_size
        inside = randomness.bits(0) < np.uint64(self.cell_sizes[0])
        if self.method == "bernoulli":
            out = np.empty((n, (k + 7) // 8), dtype=np.uint8)
            step = max(1, min(n, 1 << 15, _SS_BERNOULLI_BYTES // k))
            words, below = np.empty((step, 2 * -(-k // 8)), dtype=np.uint64), np.empty((step, k), dtype=bool)
            for lo in range(0, n, step):
                rows = slice(lo, min(n, lo + step))
                out[rows] = self._bernoulli(idx[rows], inside[rows], randomness, rows if step < n else None, words, below)
            return out
        give_back = uniform_index(randomness.bits(1), d)
        out = np.empty((n, (k + 7) // 8), dtype=np.uint8)
        step = max(1, min(n, _SS_BLOCK_USERS[1], max(_SS_BLOCK_USERS[0], _SS_BLOCK_BYTES // k)))
        for lo in range(0, n, step):
            rows = slice(lo, min(n, lo + step))
            out[rows] = self._floyd(idx[rows], inside[rows], give_back[rows], randomness, rows if step < n else None)
        return out

    def _floyd(self, idx: np.ndarray, inside: np.ndarray, give_back: np.ndarray, randomness: Draws, rows: slice | None) -> np.ndarray:
        """The packed reports of one block of users (``rows`` of ``randomness``; None: all)."""
        n, k, d = len(idx), self.k, self.subset_size
        member = np.zeros(n * k, dtype=bool)
        base = np.arange(n, dtype=np.int64) * k
        first_j = k - 1 - d
        at_j = base + first_j + (idx <= first_j)  # the flat position of "other" j (its category j + 1[j ≥ x])
        # Many picks: users grouped once by the pick they give back and by their input (where at_j
        # skips x), so each step touches only its group (radix sorts of 16-bit keys, ≈ 10 ns a user);
        # a few picks: a whole-array comparison per step is cheaper than the sorts.
        grouped = d > _SS_GROUPED
        if grouped:
            by_pick = np.argsort(give_back.astype(np.uint16), kind="stable")
            pick_ends = np.searchsorted(give_back[by_pick], np.arange(d + 1))
            by_input = np.argsort(idx.astype(np.uint16), kind="stable")
            input_ends = np.searchsorted(idx[by_input], np.arange(k + 1))
        given = np.zeros(n, dtype=np.int64)
        pair = np.empty((n, 2), dtype=np.uint64)
        for s in range(d):
            if s % 2 == 0:  # one AES block per user serves picks s and s + 1 (its two halves)
                words = draw_blocks(randomness, 2 + s // 2, 1, rows, pair)
            j = first_j + s
            r = uniform_index(words[:, s % 2], j + 1)
            at = base + r + (r >= idx)
            at = np.where(member[at], at_j, at)  # Floyd: r already taken → j
            member[at] = True
            # the users who give back pick s remember it; at_j moves to j + 1 (one more past x)
            if grouped:
                mine = by_pick[pick_ends[s] : pick_ends[s + 1]]
                given[mine] = at[mine]
                at_j += 1
                at_j[by_input[input_ends[j + 1] : input_ends[j + 2]]] += 1
            else:
                given = np.where(give_back == s, at, given)
                at_j += 1 + (idx == j + 1)
        member[given[inside]] = False
        member[base[inside] + idx[inside]] = True
        if k % 8 == 0:  # rows of whole bytes pack as one flat run (along short rows: ≈ 40× slower)
            return np.packbits(member).reshape(n, k // 8)
        return np.packbits(member.reshape(n, k), axis=1)

    def _bernoulli(self, idx: np.ndarray, inside: np.ndarray, randomness: Draws, rows: slice | None, words: np.ndarray, below: np.ndarray) -> np.ndarray:
        """The packed reports of one block of users by Bernoulli draws and a fix-up (class
        docstring), all on packed bits; ``words`` and ``below`` are buffers reused across blocks
        (fresh arrays of megabytes cost more in page faults than the work)."""
        n, k, d = len(idx), self.k, self.subset_size
        blocks, row_bytes = -(-k // 8), (k + 7) // 8
        users = np.arange(n)
        # lane c of the user's blocks 1 .. ⌈k/8⌉, as 16-bit little-endian words (the layout on any host)
        lanes = draw_blocks(randomness, 1, blocks, rows, words[:n]).astype("<u8", copy=False).view("<u2")
        joined = np.less(lanes[:, :k], np.uint16(self.bernoulli_threshold), out=below[:n])
        packed = np.packbits(joined.reshape(-1)).reshape(n, row_bytes) if k % 8 == 0 else np.packbits(joined, axis=1)
        x_byte, x_mask = idx >> 3, (np.uint8(0x80) >> (idx & 7).astype(np.uint8))
        packed[users, x_byte] &= ~x_mask
        surplus = np.bitwise_count(packed).sum(axis=1, dtype=np.int64) - (d - inside.astype(np.int64))
        # the pool: the members when some must leave, the other non-members when some must join;
        # rows padded to whole 8-byte words (its ranks are counted a word at a time)
        row_words = -(-row_bytes // 8)
        pool = np.zeros((n, 8 * row_words), dtype=np.uint8)
        np.bitwise_xor(packed, np.where(surplus < 0, np.uint8(0xFF), np.uint8(0))[:, None], out=pool[:, :row_bytes])
        if k % 8:
            pool[:, row_bytes - 1] &= np.uint8((0xFF << (8 - k % 8)) & 0xFF)
        pool[users, x_byte] &= ~x_mask
        pool[surplus == 0] = 0
        per_word = np.bitwise_count(pool.view(np.uint64))
        size = per_word.sum(axis=1, dtype=np.int64)
        per_word = per_word.reshape(-1)
        ranks = np.cumsum(per_word, dtype=np.int64)  # the pool's ranks, over the whole block, in category order
        starts = ranks[row_words - 1 :: row_words] - size
        flips = np.abs(surplus)
        picks = np.minimum(flips, size - flips)
        if flips.any():
            total, most = int(ranks[-1]), int(picks.max())
            chosen = np.zeros(total + 1, dtype=bool)  # the last entry: where users done picking write
            for first in range(0, most, _SS_FIX_STEPS):
                steps = np.arange(first, min(most, first + _SS_FIX_STEPS))
                fix = draw_blocks(randomness, 1 + blocks + first // 2, -(-len(steps) // 2), rows)[:, : len(steps)]
                j = (size - picks)[:, None] + steps[None, :]
                active = steps[None, :] < picks[:, None]
                at_r = np.where(active, starts[:, None] + uniform_index(fix, j + 1), total).T.copy()
                at_j = np.where(active, starts[:, None] + j, total).T.copy()
                for t in range(len(steps)):  # Floyd: a rank already picked → rank j
                    at = np.where(chosen[at_r[t]], at_j[t], at_r[t])
                    chosen[at] = True
            # the picked ranks flip, or (picks = P − |f| < |f|) all the pool's other ranks do
            keep = flips > size - flips
            packed[keep] ^= pool[keep, :row_bytes]
            # rank → category: its word (the ranks' cumulative counts), byte (the word's), bit (a table)
            picked = np.flatnonzero(chosen[:-1])
            word = np.searchsorted(ranks, picked, side="right")
            within = picked - (ranks[word] - per_word[word])
            in_word = pool.reshape(-1, 8)[word]
            counts = np.cumsum(np.bitwise_count(in_word), axis=1, dtype=np.int64)
            byte = np.count_nonzero(counts <= within[:, None], axis=1)
            before = np.where(byte > 0, counts[np.arange(len(word)), np.maximum(byte - 1, 0)], 0)
            bit = _SELECT_BIT[in_word[np.arange(len(word)), byte], within - before]
            row, column = np.divmod(word * 8 + byte, 8 * row_words)
            np.bitwise_xor.at(packed, (row, column), np.uint8(0x80) >> bit)
        packed[users, x_byte] |= np.where(inside, x_mask, np.uint8(0))
        return packed

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        """The log of the *ideal* subset probability on the realized coin (the pick cells' rounding
        moves it by less than 2dk/2^64 relative); −inf off size d."""
        a_in, a_out = self.cell_sizes
        d, k = self.subset_size, self.k
        w = np.asarray(w, dtype=np.uint8)
        idx = self._index(np.asarray(u, dtype=np.float64).ravel()).reshape(np.shape(u))
        shape = np.broadcast_shapes(idx.shape, w.shape[:-1])
        byte = np.take_along_axis(np.broadcast_to(w, shape + (w.shape[-1],)), np.broadcast_to(idx // 8, shape)[..., None], axis=-1)[..., 0]
        has = ((byte >> (7 - idx % 8)) & 1) == 1
        size = np.bitwise_count(w).sum(axis=-1, dtype=np.int64)
        log_in = math.log(a_in) - 64 * _LN2 - _log_comb(k - 1, d - 1)
        log_out = math.log(a_out) - 64 * _LN2 - _log_comb(k - 1, d)
        with np.errstate(divide="ignore"):
            return np.where(size == d, np.where(has, log_in, log_out), -np.inf)

    def support_counts(self, reports: np.ndarray) -> np.ndarray:
        return UnaryEncoding.support_counts(self, reports)  # type: ignore[arg-type]

    @property
    def virtual_draws(self) -> int:
        """How many virtual draws the audit enumerates (``draw_cells``): d + 2 for Floyd's
        sampler; 1 + k + ⌊(k − 1)/2⌋ for the Bernoulli sampler (the coin, a chunk per category,
        the fix-up's picks)."""
        return self.subset_size + 2 if self.method == "floyd" else 1 + self.k + (self.k - 1) // 2

    def virtual_bits(self, virtual: Draws, draw: int) -> np.ndarray:
        """The words ``sample`` reads as ``bits(draw)`` when virtual draw v is ``virtual.bits(v)``
        (``draw_cells``' numbering), for the audit's stand-in: Floyd's through
        ``subset_virtual_draw``; the Bernoulli sampler's chunk c is the top 16 bits of virtual
        draw 1 + c, placed in its lane, and fix-up word i is virtual draw 1 + k + i."""
        if self.method == "floyd":
            return virtual.bits(subset_virtual_draw(draw))
        k, blocks = self.k, -(-self.k // 8)
        block, high = (draw - HIGH_HALF, 1) if draw >= HIGH_HALF else (draw, 0)
        n = len(np.asarray(virtual.users))
        if block == 0:
            return virtual.bits(0) if not high else np.zeros(n, dtype=np.uint64)
        if block <= blocks:
            word = np.zeros(n, dtype=np.uint64)
            for lane in range(4):
                c = 8 * (block - 1) + 4 * high + lane
                if c < k:
                    word |= (virtual.bits(1 + c) >> np.uint64(48)) << np.uint64(16 * lane)
            return word
        i = 2 * (block - 1 - blocks) + high
        return virtual.bits(1 + k + i) if i < (k - 1) // 2 else np.zeros(n, dtype=np.uint64)

    def draw_cells(self, u: float) -> list[np.ndarray]:
        """Virtual draws 0, 1, 2 + s: the coin, the give-back and pick s (``SubsetVirtualDraws``
        maps them to where ``sample`` reads them). Bernoulli sampler: 0 the coin, 1 + c category
        c's chunk (one cell for the input's own, unread), 1 + k + i fix-up pick i (the union of
        every modulus' cells: the moduli depend on the chunks)."""
        d, k = self.subset_size, self.k
        if self.method == "bernoulli":
            x = int(self._index(np.array([u], dtype=np.float64))[0])
            chunk = np.array([0, self.bernoulli_threshold << 48], dtype=np.uint64)
            fix = np.array(sorted({s for m in range(1, k) for s in uniform_index_starts(m)}), dtype=np.uint64)
            return [np.array([0, self.cell_sizes[0]], dtype=np.uint64)] + [np.zeros(1, dtype=np.uint64) if c == x else chunk for c in range(k)] + [fix] * ((k - 1) // 2)
        cells = [np.array([0, self.cell_sizes[0]], dtype=np.uint64), np.array(uniform_index_starts(d), dtype=np.uint64)]
        cells += [np.array(uniform_index_starts(k - d + s), dtype=np.uint64) for s in range(d)]
        return cells

    def ordered_masses(self, x: int) -> dict[bytes, int]:
        """Per packed report, its exact mass over 2^{64·virtual_draws}: every coin, give-back and
        sequence of pick cells, through Floyd's algorithm written out here (small k); for the
        Bernoulli sampler every chunk pattern, coin and fix-up (``_bernoulli_subset_masses``)."""
        if self.method == "bernoulli":
            return _bernoulli_subset_masses(self, x)
        k, d = self.k, self.subset_size
        a_in, a_out = self.cell_sizes
        others = [c for c in range(k) if c != x]
        back = uniform_index_masses(d)
        out: dict[bytes, int] = {}
        for taken, mass in _floyd_masses(k - 1, d):  # the d picks of the k − 1 others, in pick order
            for inside, coin in ((True, a_in), (False, a_out)):
                for g in range(d) if inside else range(1):
                    bits = np.zeros(k, dtype=bool)
                    bits[[others[o] for i, o in enumerate(taken) if not (inside and i == g)]] = True
                    bits[x] = inside
                    key = np.packbits(bits).tobytes()
                    out[key] = out.get(key, 0) + mass * coin * (back[g] if inside else TWO64)
        return out


def _floyd_masses(pool: int, picks: int) -> list[tuple[list[int], int]]:
    """Every outcome of Floyd's algorithm picking ``picks`` ranks of [0, pool) on
    ``uniform_index`` draws: (the ranks in pick order, the product of their cell masses)."""
    out: list[tuple[list[int], int]] = []

    def walk(step: int, taken: list[int], mass: int) -> None:
        if step == picks:
            out.append((taken, mass))
            return
        j = pool - picks + step
        for r, size in enumerate(uniform_index_masses(j + 1)):
            walk(step + 1, [*taken, j if r in taken else r], mass * size)

    walk(0, [], 1)
    return out


def _bernoulli_subset_masses(R: SubsetSelection, x: int) -> dict[bytes, int]:
    """``SubsetSelection.ordered_masses`` of the Bernoulli sampler, written out from the class docstring: every chunk
    pattern of the k − 1 others, the coin, and Floyd's picks of the pool (small k)."""
    import itertools

    k, d, t = R.k, R.subset_size, R.bernoulli_threshold
    a_in, a_out = R.cell_sizes
    most = (k - 1) // 2
    others = [c for c in range(k) if c != x]
    join, stay = t << 48, ((1 << 16) - t) << 48
    out: dict[bytes, int] = {}
    for pattern in itertools.product((False, True), repeat=k - 1):
        chunk_mass = math.prod(join if p else stay for p in pattern)
        first = [c for c, p in zip(others, pattern, strict=True) if p]
        for inside, coin in ((True, a_in), (False, a_out)):
            surplus = len(first) - (d - int(inside))
            pool = first if surplus > 0 else [c for c in others if c not in first]
            flips = abs(surplus)
            picks = min(flips, len(pool) - flips)
            for ranks, mass in _floyd_masses(len(pool), picks):
                picked = {pool[r] for r in ranks}
                flipped = set(pool) - picked if flips > len(pool) - flips else picked
                bits = np.zeros(k, dtype=bool)
                bits[sorted(set(first) ^ flipped)] = True
                bits[x] = inside
                key = np.packbits(bits).tobytes()
                out[key] = out.get(key, 0) + coin * chunk_mass * mass * TWO64 ** (1 + most - picks)
    return out


def subset_sampler(k: int, d: int) -> str:
    """Subset Selection's sampler for k categories and subsets of size d: "bernoulli" where its
    O(k) work a user beats Floyd's O(d) steps (measured on the 2-core box, where the break-even
    d was 4.7–5.6·√k at k = 2^10, 2^12, 2^14 and 2^16): k ≥ 1024 and d² ≥ 25·k; else "floyd". A function of (k, d) only, so a user's report
    depends on its draws alone."""
    return "bernoulli" if k >= 1024 and d * d >= 25 * k else "floyd"


def subset_virtual_draw(draw: int) -> int:
    """The virtual draw (``SubsetSelection.draw_cells``' numbering: 0 the coin, 1 the give-back,
    2 + s pick s) that a stand-in's ``bits(draw)`` serves when ``SubsetSelection.sample`` reads it
    through ``draw_blocks``: the low half of block 2 + b is pick 2b, ``bits(2 + b + HIGH_HALF)``
    (its high half) pick 2b + 1."""
    if draw >= HIGH_HALF:
        return 2 + 2 * (draw - HIGH_HALF - 2) + 1
    return draw if draw < 2 else 2 + 2 * (draw - 2)


def _log_comb(n: int, r: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(r + 1) - math.lgamma(n - r + 1)


# --- building from a spec (the users' side: ``LocalRandomizer.build``) ---

@register_randomizer("oue")
@register_randomizer("sue")
@register_randomizer("olh", params=("hash_bits",))
@register_randomizer("hadamard_response")
@register_randomizer("subset_selection")
@register_randomizer("adaptive_fo", params=("prefer",))
def build_frequency_oracle(spec: SpecView, query: Query) -> Randomizer:
    """The randomizer of an ``oue`` / ``sue`` / ``olh`` / ``hadamard_response`` / ``subset_selection`` / ``adaptive_fo``
    spec over the query's finite values (the categories); unknown params are refused."""
    check_params(spec.kind, spec.params)
    values = query.values()
    if values is None:
        raise ParameterError(f"{spec.kind} needs a query with a small finite set of values; {spec.query.name!r} has none")
    cats = tuple(values.tolist()) if len(values) >= 2 else (float(values[0]), float(values[0]) + 1.0)
    kind = spec.kind
    if kind == "adaptive_fo":
        kind = choose_oracle(len(cats), spec.epsilon, spec.params.get("prefer", "olh"))
        if kind == "kary_rr":
            return KaryRandomizedResponse(spec.epsilon, cats)
    if kind == "oue":
        return OptimizedUnaryEncoding(spec.epsilon, cats)
    if kind == "sue":
        return SymmetricUnaryEncoding(spec.epsilon, cats)
    if kind == "olh":
        return OptimizedLocalHashing(spec.epsilon, cats, spec.params.get("hash_bits"))
    if kind == "subset_selection":
        return SubsetSelection(spec.epsilon, cats)
    return HadamardResponse(spec.epsilon, cats)
