"""TreeHist's one-round report: each user draws its own level of the prefix tree and reports its
prefix of that length through OLH (kind ``treehist_prefix``), exact on integer cells.

Source: Bassily, Nissim, Stemmer & Thakurta, "Practical Locally Private Heavy Hitters" (NeurIPS
2017; arXiv 1707.04982), TreeHist: the users are split across the tree's L levels at random,
each user reports once, and the server descends the tree from those reports alone. The inner
oracle is OLH (Wang, Blocki, Li & Jha 2017, §4.4; the paper's Hashtogram is not built): its
report (A, y) can be evaluated for any candidate after the fact, so one round serves every level.

Kind ``treehist_prefix`` over the ``record`` query (params ``bits``, the prefix tree's depth d,
1..62; ``step``, ℓ bits per level, default 1; ``field``, the {0,1} field, default "x"). A user
with value x (the field's first d bits, bit 0 the most significant):

1. draws its level t = ⌊X_0·L/2^64⌋ from its own draw 0 (``uniform_index``; L = ⌈d/ℓ⌉ levels of
   prefix lengths m_t = min(d, (t+1)·ℓ), ``prefix_lengths``). Level t has exactly
   π_t = ``uniform_index_masses(L)[t]``/2^64, which is 1/L when L is a power of two and otherwise
   ⌊2^64/L⌋/2^64 or ⌈2^64/L⌉/2^64 (1/L within 2^-64); the server counts the n_t reports it got
   at each level, so the realized π_t never enters an estimate. Nothing in the request names t.
2. reports its m_t-bit prefix x_t = x >> (d − m_t) through OLH at ε on its draws 1, 2, …:
   a_r = the top m_t bits of draw 2 + r (r < l), h_A(x_t) = Σ_r parity(a_r & x_t)·2^r ∈ [g],
   g = 2^l (l = round(log2(e^ε + 1)) in [1, 16]), y = exact g-ary RR of h_A(x_t) on draw 1
   (``rr_cells``(ε, g): kept A_g/2^64, each other value B_g/2^64).

The report is one uint64 row (t, a_0, …, a_{l−1}, y). The level and the hash rows are drawn by the
user, not asked for: a hostile aggregator cannot choose who answers which level, and a repeated
request gets a fresh level (new draws: a coin is never drawn twice).

Privacy (exact, by structure). The level's draw is read by nothing else, and its law does not
depend on x. So Pr[(t, A, y) | x] = π_t·2^{−m_t·l}·(A_g if y = h_A(x_t) else B_g)/2^64, and for any
x, x′ the ratio is (A_g or B_g)/(A_g or B_g) ≤ A_g/B_g ≤ e^ε (``rr_cells``). The loss is exactly
ln(A_g/B_g), the max over levels of the inner oracle's loss (the same at every level): a mixture
over t with data-independent weights π_t. ``verify_prefix_reports`` computes it in exact
arithmetic and probes the real sampler for that structure (level from draw 0 only, independent
of x; the inner report unmoved by draw 0 within a level cell; y's cells; a_r's bits);
``enumerated_prefix_reports`` drives the real sampler through every cell of every draw at small
d and computes the loss from the resulting table, with no structural assumption. Broken variants
(a level that depends on the value, the inner oracle at 2ε, the level read from the draw y also
reads) fail both (tests/core/test_prefix_reports.py).

Estimator (the server). Level t's reports are a uniform random sample of the users, independent
of the data. Over its n_t reports, C(c) = #{i : h_{A_i}(c) = y_i} for any m_t-bit candidate c, and
f̂(c) = (C(c)/n_t − 1/g)/(p* − 1/g), p* = A_g/2^64 (OLH is exactly universal: q* = 1/g). Given n_t
it is unbiased for the population's share f(c), with
Var = [f p*(1 − p*) + (1 − f)(1/g)(1 − 1/g)]/(n_t(p* − 1/g)²) + f(1 − f)(n − n_t)/(n_t(n − 1)) (the
oracle's noise plus which users drew t, as ``ldp.core.multidimensional``'s SMP). At f = 0 the
second term is 0: the threshold of ``ldp.learners.treehist`` uses the first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ldp.core.errors import ParameterError, require_epsilon, require_integer
from ldp.core.queries import Query
from ldp.core.randomizer_base import (
    TWO64,
    Randomizer,
    SpecView,
    register_randomizer,
    rr_cells,
    rr_draw,
    uniform_index,
    uniform_index_masses,
    uniform_index_starts,
)
from ldp.core.rng import Draws

if TYPE_CHECKING:  # the audit layer is imported by the audits below only, not by users' sampling
    from ldp.core.audit import ExactAudit

__all__ = [
    "PREFIX_ORACLES",
    "MAX_HASH_BITS",
    "prefix_lengths",
    "TreeHistPrefix",
    "verify_prefix_reports",
    "prefix_probe",
    "enumerated_prefix_reports",
    "build_treehist_prefix",
]

PREFIX_ORACLES = ("olh",)  # an inner oracle whose report can be evaluated at any candidate later
MAX_HASH_BITS = 16
_LN2 = math.log(2.0)
_CHUNK = 1 << 20  # reports × candidates per block of the server's count (a few MiB of uint8)
_PACK_ROWS = 1 << 14  # records per np.packbits call


def prefix_lengths(bits: int, step: int) -> tuple[int, ...]:
    """The prefix length of each level: ℓ, 2ℓ, ..., d (the last one min(d, L·ℓ)).

    >>> prefix_lengths(10, 4)
    (4, 8, 10)
    """
    return tuple(min(bits, t) for t in range(step, bits + step, step))


def _default_hash_bits(epsilon: float) -> int:
    """l = round(log2(e^ε + 1)) in [1, 16]: OLH's optimal g ≈ e^ε + 1 (Wang et al. 2017 §4.4)."""
    return max(1, min(MAX_HASH_BITS, round(math.log2(math.exp(min(epsilon, 700.0)) + 1.0))))


@dataclass(frozen=True)
class TreeHistPrefix(Randomizer):
    """The user's own level and OLH report of its prefix of that length (module docstring).

    Input: a record of ``width`` columns whose columns ``offset`` .. ``offset + bits − 1`` are the
    {0,1} field (``check_inputs`` packs them into the d-bit value x). Output: a uint64 row
    (t, a_0, ..., a_{l−1}, y).

    >>> import numpy as np
    >>> from ldp.core.rng import RandomSource
    >>> R = TreeHistPrefix(2.0, bits=8, step=2)
    >>> R.lengths, R.g, R.report_columns
    ((2, 4, 6, 8), 8, 5)
    >>> records = np.array([[1, 0, 1, 1, 0, 0, 1, 0]] * 40_000, dtype=np.int16)  # x = 178
    >>> rows = R.sample(R.check_inputs(records), RandomSource(0).for_request("demo", 0, np.arange(40_000)))
    >>> freq, sd, n_t = R.level_estimates(rows, 1, [178 >> 4, 0])  # level 1: 4-bit prefixes
    >>> bool(abs(freq[0] - 1) < 5 * sd and abs(freq[1]) < 5 * sd), 9_000 < n_t < 11_000
    (True, True)
    >>> verify_prefix_reports(R).passed
    True
    """

    epsilon: float
    bits: int
    step: int = 1
    width: int | None = None
    offset: int = 0
    hash_bits: int | None = None
    kind: ClassVar[str] = "treehist_prefix"
    report_dtype: ClassVar[type[np.generic]] = np.uint64
    level_draw: ClassVar[int] = 0  # the draw the level reads; the inner OLH reads draws 1 .. l + 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "bits", require_integer("treehist_prefix: bits", self.bits, 1, 62))
        object.__setattr__(self, "step", require_integer("treehist_prefix: step", self.step, 1, self.bits, f"[1, bits = {self.bits}]"))
        width = self.bits if self.width is None else require_integer("treehist_prefix: width", self.width, 1)
        offset = require_integer("treehist_prefix: offset", self.offset, 0)
        if offset + self.bits > width:
            raise ParameterError(f"treehist_prefix: the field's {self.bits} bits from column {offset} do not fit in a record of {width} columns")
        object.__setattr__(self, "width", width)
        hash_bits = _default_hash_bits(self.epsilon) if self.hash_bits is None else self.hash_bits
        object.__setattr__(self, "hash_bits", require_integer("treehist_prefix: hash_bits", hash_bits, 1, MAX_HASH_BITS))
        rr_cells(self.epsilon, self.g)  # validates ε against the g-ary grid

    # --- public parameters ---

    @property
    def lengths(self) -> tuple[int, ...]:
        return prefix_lengths(self.bits, self.step)

    @property
    def levels(self) -> int:
        return len(self.lengths)

    @property
    def l(self) -> int:  # noqa: E743 - OLH's name
        assert self.hash_bits is not None  # set in __post_init__
        return self.hash_bits

    @property
    def g(self) -> int:
        return 1 << self.l

    @property
    def cell_sizes(self) -> tuple[int, int]:
        """(A_g, B_g): the inner g-ary RR's keep and other cells (``rr_cells`` at ε)."""
        return rr_cells(self.epsilon, self.g)

    @property
    def level_masses(self) -> list[int]:
        """π_t·2^64 for each level: ``uniform_index_masses(L)``."""
        return uniform_index_masses(self.levels)

    def support_fractions(self) -> tuple[Fraction, Fraction]:
        """(p*, q*) of the inner OLH: (A_g/2^64, 1/g), exactly."""
        return Fraction(self.cell_sizes[0], TWO64), Fraction(1, self.g)

    @property
    def input_width(self) -> int:
        assert self.width is not None
        return self.width

    @property
    def report_columns(self) -> int:
        return self.l + 2

    def report_domains(self) -> tuple[np.ndarray | None, ...]:
        """The level, the hash rows (< 2^{m_t}: checked per level by ``decode``), y."""
        return (np.arange(self.levels),) + (None,) * self.l + (np.arange(self.g),)

    def input_domain(self) -> np.ndarray:
        """Every record whose field is {0,1} (2^d of them: not listed; an empty array)."""
        return np.zeros((0, self.input_width))

    def check_inputs(self, values: np.ndarray) -> np.ndarray:
        """The field's first d bits of each record as one int64 x (bit 0 the most significant), or
        a ParameterError naming a record that is not {0,1} there."""
        v = np.asarray(values)
        if v.ndim != 2 or v.shape[1] != self.input_width:
            raise ParameterError(f"treehist_prefix takes records of {self.input_width} columns; got an array of shape {v.shape}")
        cols = v[:, self.offset : self.offset + self.bits]
        if cols.size and not (cols.min() >= 0 and cols.max() <= 1):  # two reductions; the mask only to name the bad record
            ok = (cols == 0) | (cols == 1)
            row = int(np.argmin(ok.all(axis=1)))
            raise ParameterError(f"treehist_prefix: the field must hold 0 or 1; record {row} holds {cols[row][~ok[row]][0].item()!r}")
        # bit 0 first: np.packbits puts column 0 in the top bit of a row's first byte, and eight
        # bytes read big-endian, shifted right by 64 − d, are the d-bit number
        x = np.empty(len(v), dtype=np.int64)
        for lo in range(0, len(v), _PACK_ROWS):
            part = np.packbits(cols[lo : lo + _PACK_ROWS] != 0, axis=1)
            word = np.zeros((len(part), 8), dtype=np.uint8)
            word[:, : part.shape[1]] = part
            x[lo : lo + _PACK_ROWS] = (word.view(">u8").ravel() >> np.uint64(64 - self.bits)).astype(np.int64)
        return x

    # --- the sampler ---

    def draw_level(self, values: np.ndarray, randomness: Draws) -> np.ndarray:
        """Each user's level t ∈ [0, L), from its own ``level_draw`` only: never from ``values``."""
        return uniform_index(randomness.bits(self.level_draw), self.levels)

    def inner_cells(self) -> tuple[int, int]:
        """The cells of the inner RR (a test's broken variant changes them)."""
        return self.cell_sizes

    def hash(self, rows: np.ndarray, x: np.ndarray) -> np.ndarray:
        """h_A(x) = Σ_r parity(a_r & x)·2^r for hash rows (..., l) and prefixes x, broadcast (int64)."""
        a = np.asarray(rows, dtype=np.uint64)
        xx = np.asarray(x).astype(np.uint64)
        out = np.zeros(np.broadcast_shapes(a.shape[:-1], xx.shape), dtype=np.int64)
        for r in range(self.l):
            out |= (np.bitwise_count(a[..., r] & xx) & 1).astype(np.int64) << r
        return out

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        x = np.asarray(inputs, dtype=np.int64)
        n, l_ = len(x), self.l
        t = self.draw_level(x, randomness)
        m = np.asarray(self.lengths, dtype=np.uint64)[t]
        prefix = x.view(np.uint64) >> (np.uint64(self.bits) - m)
        out = np.empty((n, l_ + 2), dtype=np.uint64)
        out[:, 0] = t
        shift = np.uint64(64) - m  # a_r = the top m_t bits of draw 2 + r
        h = np.zeros(n, dtype=np.int64)
        for r in range(l_):
            a_r = randomness.bits(2 + r) >> shift
            out[:, 1 + r] = a_r
            h |= (np.bitwise_count(a_r & prefix) & 1).astype(np.int64) << r
        a, b = self.inner_cells()
        out[:, l_ + 1] = rr_draw(h, randomness.bits(1), a, b)
        return out

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        """ln Pr[w | x] = ln π_t − m_t·l·ln 2 + ln(A_g or B_g) − 64 ln 2 (−inf off the support)."""
        w = np.asarray(w, dtype=np.uint64)
        x = np.asarray(u, dtype=np.int64)
        t = w[..., 0].astype(np.int64)
        valid = t < self.levels
        t = np.where(valid, t, 0)
        m = np.asarray(self.lengths, dtype=np.int64)[t]
        rows = w[..., 1 : 1 + self.l]
        valid &= (rows >> m[..., None].astype(np.uint64) == 0).all(axis=-1) & (w[..., -1] < self.g)
        keep = self.hash(rows, x.view(np.uint64) >> (np.uint64(self.bits) - m.astype(np.uint64))) == w[..., -1].astype(np.int64)
        a, b = self.inner_cells()
        log_pi = np.log(np.asarray(self.level_masses, dtype=np.float64))[t] - 64 * _LN2
        out = log_pi - m * self.l * _LN2 + np.where(keep, math.log(a), math.log(b)) - 64 * _LN2
        return np.where(valid, out, -np.inf)

    # --- the server ---

    def decode(self, reports: np.ndarray) -> np.ndarray:
        """The rows as int64-safe uint64 (n, l + 2), or a ParameterError (one line) for a row of
        the wrong width, a level ≥ L, a hash row of more than m_t bits or a y ≥ g."""
        w = np.asarray(reports)
        if w.ndim != 2 or w.shape[1] != self.report_columns:
            raise ParameterError(f"treehist_prefix: reports must be rows of {self.report_columns} values (level, {self.l} hash rows, y), got shape {w.shape}")
        w = w.astype(np.uint64, copy=False)
        bad = w[:, 0] >= np.uint64(self.levels)
        if bad.any():
            raise ParameterError(f"treehist_prefix: report {int(np.argmax(bad))} names level {w[bad, 0][0]}, outside 0..{self.levels - 1}")
        m = np.asarray(self.lengths, dtype=np.uint64)[w[:, 0].astype(np.int64)]
        bad = ((w[:, 1 : 1 + self.l] >> m[:, None]) != 0).any(axis=1) | (w[:, -1] >= np.uint64(self.g))
        if bad.any():
            raise ParameterError(f"treehist_prefix: report {int(np.argmax(bad))} has a hash row wider than its level's prefix or a y outside 0..{self.g - 1}")
        return w

    def support_counts(self, rows: np.ndarray, candidates: Sequence[int] | np.ndarray) -> np.ndarray:
        """C(c) = #{i : h_{A_i}(c) = y_i} over the given rows (one level's), for each candidate."""
        c = np.asarray(candidates, dtype=np.int64).ravel()
        counts = np.zeros(len(c), dtype=np.int64)
        if not len(c):
            return counts
        c64 = c.astype(np.uint64)[None, :]
        step = max(1, _CHUNK // len(c))
        one = np.uint8(1)
        for lo in range(0, len(rows), step):
            chunk = rows[lo : lo + step]
            y = chunk[:, -1]
            # bit 0 of ``miss`` is 1 where some bit r of h_A(c) differs from bit r of y: uint8 throughout
            miss = np.zeros((len(chunk), len(c)), dtype=np.uint8)
            for r in range(self.l):
                bit = np.bitwise_count(chunk[:, 1 + r, None] & c64)
                bit ^= ((y >> np.uint64(r)) & np.uint64(1)).astype(np.uint8)[:, None]
                miss |= bit
            counts += len(chunk) - (miss & one).sum(axis=0, dtype=np.int64)
        return counts

    def split_levels(self, reports: np.ndarray) -> list[np.ndarray]:
        """The ``decode``d rows grouped by level (row order kept): one decode for the whole descent."""
        w = self.decode(reports)
        t = w[:, 0].astype(np.int64)
        order = np.argsort(t, kind="stable")
        bounds = np.searchsorted(t[order], np.arange(self.levels + 1))
        return [w[order[bounds[i] : bounds[i + 1]]] for i in range(self.levels)]

    def estimates(self, rows: np.ndarray, candidates: Sequence[int] | np.ndarray) -> tuple[np.ndarray, float, int]:
        """(f̂ of each candidate, the sd of one estimate at f = 0, n_t) from one level's decoded
        rows (``split_levels``; module docstring). f̂ is nan and sd inf when no user drew the level."""
        n_t = len(rows)
        c = np.asarray(candidates, dtype=np.int64).ravel()
        if not n_t:
            return np.full(len(c), np.nan), math.inf, 0
        p, q = (float(v) for v in self.support_fractions())
        freq = (self.support_counts(rows, c) / n_t - q) / (p - q)
        return freq, math.sqrt(q * (1 - q) / (n_t * (p - q) ** 2)), n_t

    def level_estimates(self, reports: np.ndarray, level: int, candidates: Sequence[int] | np.ndarray) -> tuple[np.ndarray, float, int]:
        """``estimates`` from the reports (all levels' rows) of level ``level`` only."""
        return self.estimates(self.split_levels(reports)[level], candidates)

    def frequency_variance(self, f: np.ndarray | float, n_t: int, n: int | None = None) -> np.ndarray:
        """Var f̂ at true share f over n_t reports of one level; with ``n`` (all users) plus the
        sampling term f(1 − f)(n − n_t)/(n_t(n − 1)) of which users drew the level."""
        p, q = (float(v) for v in self.support_fractions())
        f = np.asarray(f, dtype=np.float64)
        var = (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n_t * (p - q) ** 2)
        if n is not None and n > 1:
            var = var + f * (1 - f) * (n - n_t) / (n_t * (n - 1))
        return var


# --- audits (exact) ---


def prefix_probe(R: TreeHistPrefix, seed: int = 7) -> str:
    """'' or what the real sampler does against the structure of the module docstring, probed
    at every level cell's first and last draw, for two values x ≠ x′ and random other draws:
    the level is the cell of draw 0, the same for x and x′, unmoved by draws 1 ..; within a
    level cell the inner report does not move with draw 0; y is kept exactly on [0, A_g);
    a_r is the top m_t bits of draw 2 + r."""
    from ldp.core.audit import FixedRandomness

    rng = np.random.default_rng(seed)
    L, l_ = R.levels, R.l
    starts = uniform_index_starts(L) + [TWO64]
    first = np.array(starts[:-1], dtype=np.uint64)
    last = np.array([s - 1 for s in starts[1:]], dtype=np.uint64)
    level0 = np.concatenate([first, last])
    want = np.concatenate([np.arange(L), np.arange(L)])
    n = len(level0)
    top = (1 << R.bits) - 1
    x = np.full(n, top, dtype=np.int64)
    x2 = np.zeros(n, dtype=np.int64)

    def words() -> np.ndarray:
        return rng.integers(0, TWO64, size=n, dtype=np.uint64)

    others = {d: words() for d in range(1, l_ + 2)}
    base = R.sample(x, FixedRandomness({0: level0, **others}))
    if not np.array_equal(base[:, 0].astype(np.int64), want):
        return "the level is not the uniform_index cell of draw 0"
    if not np.array_equal(R.sample(x2, FixedRandomness({0: level0, **others}))[:, 0], base[:, 0]):
        return "the level depends on the value"
    moved = R.sample(x, FixedRandomness({0: level0, **{d: words() for d in range(1, l_ + 2)}}))
    if not np.array_equal(moved[:, 0], base[:, 0]):
        return "the level moves with the inner oracle's draws"
    if not np.array_equal(base[:L, 1:], R.sample(x[:L], FixedRandomness({0: last, **{d: v[:L] for d, v in others.items()}}))[:, 1:]):
        return "the inner report moves with draw 0 within a level cell"
    m = np.asarray(R.lengths, dtype=np.uint64)[want]
    for r in range(l_):
        if not np.array_equal(base[:, 1 + r], others[2 + r] >> (np.uint64(64) - m)):
            return f"hash row {r} is not the top m_t bits of draw {2 + r}"
    a, b = R.cell_sizes
    prefix = (x.view(np.uint64) >> (np.uint64(R.bits) - m)).astype(np.int64)
    h = R.hash(base[:, 1 : 1 + l_], prefix)
    for y_draw, kept in ((np.full(n, a - 1, dtype=np.uint64), True), (np.full(n, a, dtype=np.uint64), False)):
        got = R.sample(x, FixedRandomness({0: level0, **others, 1: y_draw}))[:, -1].astype(np.int64)
        if kept != bool(np.all(got == h)) or (not kept and bool(np.any(got == h))):
            return f"y at draw 1 = {'A − 1' if kept else 'A'} is {'not ' if kept else ''}the hash (A = {a}, B = {b})"
    return ""


def verify_prefix_reports(R: TreeHistPrefix) -> ExactAudit:
    """The exact privacy audit of ``treehist_prefix`` at any d, by its structure: the loss is
    ln(A_g/B_g) of the inner RR it really uses (the max over levels of the inner oracle's loss,
    the level's weights being data-independent), compared with e^ε rigorously; the g-ary RR is
    audited by ``verify_exact``, and the sampler by ``prefix_probe``."""
    from ldp.core.audit import structure_audit, verify_exact
    from ldp.core.rr_mechanisms import KaryRandomizedResponse

    a, b = R.inner_cells()
    ratio = Fraction(max(a, b), min(a, b))
    core = verify_exact(KaryRandomizedResponse(R.epsilon, tuple(float(v) for v in range(R.g))))
    what = f"a data-independent level (draw 0, {R.levels} levels) and OLH's {R.g}-ary RR of h_A(prefix)"
    return structure_audit(R.epsilon, ratio, core, what, prefix_probe(R))


def enumerated_prefix_reports(R: TreeHistPrefix) -> ExactAudit:
    """The exact privacy audit of ``treehist_prefix`` by enumeration (small d and l only): the
    real sampler is run at the first and the last draw of every cell of every draw it reads
    (draw 0: the L level cells; draw 1: the g RR cells; draws 2 ..: the 2^d cells on which the
    top d bits are constant), for every value x ∈ [0, 2^d). The two runs must agree (the sampler
    is constant on each cell), and Pr[w | x] is the sum of the cells' masses that emit w. The
    loss is the largest ratio over x, x′, w, in exact integers, with no structural assumption."""
    from ldp.core.audit import ExactAudit, FixedRandomness, exp_bounds, log_ratio

    L, l_, d = R.levels, R.l, R.bits
    a, b = R.inner_cells()
    # draws 0 and 1 on the common refinement of the level cells and the RR cells, so that a
    # sampler reading either draw for either purpose is constant on every cell it is run on
    bounds = sorted(set(uniform_index_starts(L)) | {0} | {a + j * b for j in range(R.g - 1)}) + [TWO64]
    shared = (bounds[:-1], [bounds[i + 1] - bounds[i] for i in range(len(bounds) - 1)])
    combos = len(shared[0]) ** 2 * (1 << (d * l_))
    if combos * (1 << d) > 1 << 22:
        raise ParameterError(f"enumerated_prefix_reports: {combos} cell combinations × 2^{d} values is too many; use a smaller bits or hash_bits")
    size = 1 << (64 - d)
    cells: list[tuple[list[int], list[int]]] = [shared, shared] + [([i * size for i in range(1 << d)], [size] * (1 << d)) for _ in range(l_)]
    grids = np.meshgrid(*[np.arange(len(c[0])) for c in cells], indexing="ij")
    index = [g.ravel() for g in grids]
    first = {draw: np.array(cells[draw][0], dtype=np.uint64)[index[draw]] for draw in range(len(cells))}
    ends = {draw: np.array([s + m - 1 for s, m in zip(*cells[draw])], dtype=np.uint64)[index[draw]] for draw in range(len(cells))}
    # every combination's mass, up to the common factor size^l: π-cell × RR-cell
    mass = np.array(cells[0][1], dtype=object)[index[0]] * np.array(cells[1][1], dtype=object)[index[1]]
    table: dict[bytes, list[int]] = {}
    consistent = True
    for x in range(1 << d):
        xs = np.full(len(index[0]), x, dtype=np.int64)
        out = R.sample(xs, FixedRandomness(first))
        consistent &= bool(np.array_equal(out, R.sample(xs, FixedRandomness(ends))))
        for row, mm in zip(out, mass):
            table.setdefault(row.tobytes(), [0] * (1 << d))[x] += mm
    denominator = TWO64 * TWO64 * (1 << (d * l_))
    worst, where = Fraction(1), ("", 0, 0)
    for key, per_x in table.items():
        hi, lo = max(per_x), min(per_x)
        if lo == 0:
            worst, where = Fraction(10**30), (key.hex(), per_x.index(hi), per_x.index(lo))
            break
        if Fraction(hi, lo) > worst:
            worst, where = Fraction(hi, lo), (key.hex(), per_x.index(hi), per_x.index(lo))
    normalized = {sum(v[x] for v in table.values()) for x in range(1 << d)} == {denominator}
    infinite = worst == Fraction(10**30)
    return ExactAudit(
        R.epsilon,
        math.inf if infinite else log_ratio(worst),
        where,
        f"enumerated: {len(table)} reports × {1 << d} values over {combos} cell combinations",
        0.0 if normalized else 1.0,
        (not infinite) and worst <= exp_bounds(R.epsilon)[0],
        0.0,
        consistent,
    )


# --- building from a spec (the users' side: ``LocalRandomizer.build``) ---


@register_randomizer("treehist_prefix", params=("bits", "step", "field"), record_input=True)
def build_treehist_prefix(spec: SpecView, query: Query) -> Randomizer:
    """``treehist_prefix`` over the ``record`` query: params ``bits`` (d, default the field's
    length), ``step`` (ℓ, default 1), ``field`` (a {0,1} field of ≥ d bits, default "x")."""
    if query.name != "record":
        raise ParameterError(f"treehist_prefix reads the user's whole record; use the 'record' query, got {spec.query.name!r}")
    name: Any = spec.params.get("field", "x")
    if not isinstance(name, str):
        raise ParameterError(f"treehist_prefix: field must be a field's name, got {name!r}")
    schema = query.schema
    names = [fd.name for fd in schema.fields]
    if name not in names:
        raise ParameterError(f"treehist_prefix: the users' schema has no field {name!r} (it has {names}); name the {{0,1}} field with params field")
    f = schema.field(name)
    if (f.low, f.high, f.step) != (0, 1, 1):
        raise ParameterError(f"treehist_prefix: field {name!r} must take the values 0 and 1, it takes {f.values().tolist()[:8]}")
    bits = require_integer("treehist_prefix: bits", spec.params.get("bits", min(f.length, 62)), 1, min(62, f.length), f"[1, {min(62, f.length)}] (field {name!r} has {f.length} bits)")
    step = spec.params.get("step", 1)
    cols = schema.columns(name)
    return TreeHistPrefix(spec.epsilon, bits, step, width=schema.width, offset=int(cols.start))
