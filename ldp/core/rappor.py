"""Full RAPPOR: strings in Bloom filters, cohorts, the memoized permanent randomized response,
the instantaneous randomized response, and the decoder for a list of candidate strings — exact
on integer cells.

Source: Erlingsson, Pihur & Korolova, "RAPPOR: Randomized Aggregatable Privacy-Preserving Ordinal
Response", ACM CCS 2014 (the algorithm, its two privacy bounds and the decoding by regression),
and Google's reference implementation (github.com/google/rappor, ``analysis/R/decode.R``:
``EstimateBloomCounts``, ``ComputePrivacyGuarantees``, ``FitDistribution``), whose formulas the
two budgets below were checked against (the reference text marks the paper's section numbers
"(verify)"; the formulas themselves agree with decode.R line for line).

The client (parameters k bits, h hashes, m cohorts, f, p, q; ``Rappor``):

1. **Cohort**, once per user: c = ⌊X·m/2^64⌋ (``uniform_index``) of one draw under the users' memo
   subkey "rappor cohort": a users'-side secret choice; the cohort's h hash functions are public
   (SHAKE-128 of the public ``hash_seed``, the cohort and the string, ``bloom_bits``).
2. **Bloom filter** B of the string x: k bits, B[H_{c,j}(x)] = 1 for j < h.
3. **PRR**, memoized per (user, x): B'_i = 1 with probability 1 − f/2 if B_i = 1, f/2 if B_i = 0
   (the paper's "with probability f a fair coin, else B_i", merged into one coin per bit). It is
   not stored: it is a pure function of the users' memo key, the user id and x
   (``permanent_response``), exactly as ``ldp.core.longitudinal`` memoizes (its ``memo_key``
   from the *long-term* report key, module docstring there), drawn under an HKDF subkey per
   (parameters, question, string) (``ldp.core.telemetry.memo_subkey``), so two strings never
   share a coin and no report or record draw ever reads these words.
4. **IRR**, fresh for every report: S_i = 1 with probability q if B'_i = 1, p if B'_i = 0, from
   the report's own draws (``instantaneous_response``; a fresh ledger nonce per report).
   The report is (c, S).

Exact cells. Each coin compares a uniform b-bit integer X (b ∈ {16, 32, 64}, the smallest at
which every cell is exact; ``chunk_bits``; X's top 16 bits from a draw holding 8 coins' heads, its
other b − 16 bits read only on a tie, ``ldp.core.frequency_oracles.unary_coins``) with an integer
threshold: T0 = ⌈(f/2)·2^b⌉ and
T1 = 2^b − T0 for the PRR, P = ⌈p·2^b⌉ and Q = ⌊q·2^b⌋ for the IRR. Rounding moves each pair
*toward the other* (f/2 up, p up, q down), which can only lower both losses; at the paper's
parameters (f = 1/2, p = 1/2, q = 3/4) b = 16 and every cell is exact.

Privacy (the paper's Theorems, as in decode.R's ``ComputePrivacyGuarantees``):

- ε∞ = 2h·ln[(1 − f/2)/(f/2)]: every report of x, in any number of periods, is post-processing
  of B'; two strings' filters differ in at most 2h bits, each PRR bit has ratio (1 − f/2)/(f/2).
- ε1 = h·ln[q*(1 − p*)/(p*(1 − q*))], q* = ½f(p + q) + (1 − f)q = P(S_i = 1 | B_i = 1),
  p* = ½f(p + q) + (1 − f)p: one report alone. The h bits x sets and x' does not contribute
  q*/p* each, the h bits x' sets contribute (1 − p*)/(1 − q*) each.

Both are *declared* from the nominal f, p, q at 80 digits, rounded up to the next float, and the
realized losses (``permanent_loss``, ``single_report_loss``: from the integer cells, exact) never
exceed them. Given the Bloom pattern the bits are independent, so the loss of any pair of strings
is that of the bits where their patterns differ (``pair_loss``), and the worst case is 2h such
bits; ``ReportChannel`` shows small instances (k ≤ 4) to the unchanged
``ldp.core.audit.verify_exact`` (the real samplers fed their cell boundaries).

**Not protected** (as in ``ldp.core.longitudinal``): a new string draws a new, independent B'
(another ε∞); the cohort is sent in the clear (it is independent of the value); when the value
changed is visible.

The aggregator: per cohort j with N_j reports and c_ij of them with bit i set, the unbiased
estimate of the fraction of the cohort's users whose true bit is 1 is
t̂_ij = (c_ij/N_j − p*)/(q* − p*) (``estimate_bloom``, decode.R's ``EstimateBloomCounts``, with
the realized p*, q*). ``decode`` regresses the stacked t̂ on the candidates' Bloom patterns
(the design matrix, m·k rows): non-negative least squares (``scipy.optimize.nnls``; scipy is a
dependency, scikit-learn is not), weighted by the estimates' standard deviations; a candidate is
*detected* when its coefficient's z-score exceeds the one-sided Bonferroni quantile
z_{1 − α/M}; the detected columns are refit. decode.R selects by LASSO only when M > 0.8·m·k (an
underdetermined system); ``decode`` refuses such a list instead (one line saying so).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from fractions import Fraction
from statistics import NormalDist
from typing import Any, ClassVar

import numpy as np

from ldp.core.audit import log_ratio
from ldp.core.errors import ParameterError, require_integer, require_probability
from ldp.core.frequency_oracles import bit_column_counts, unary_coins, unary_word
from ldp.core.queries import Query
from ldp.core.randomizer_base import DECIMAL_PREC, Randomizer, SpecView, check_params, register_randomizer, uniform_index
from ldp.core.rng import Draws, UserRandomness, block_pairs, draw_blocks
from ldp.core.telemetry import memo_subkey

__all__ = [
    "Rappor",
    "bloom_bits",
    "bloom_matrix",
    "design_matrix",
    "cohorts",
    "permanent_response",
    "instantaneous_response",
    "bloom_counts",
    "estimate_bloom",
    "Decoded",
    "decode",
    "decode_repeated",
    "ReportChannel",
    "DEFAULTS",
    "f_for_epsilon",
    "category_string",
    "MemoizedRappor",
    "build_rappor",
]

MAX_K = 4096  # Bloom bits
MAX_H = 16
MAX_M = 1 << 16
_CHUNK_DTYPES: dict[int, Any] = {16: np.uint16, 32: np.uint32, 64: np.uint64}
_USER_BLOCK = 1 << 16  # users per block of the samplers: bounds the (users × k) temporaries


def _log_up(r: Fraction) -> float:
    """ln r (r ≥ 1) at 80 digits, rounded up to a float: a declared ε never below the true one."""
    with localcontext() as ctx:
        ctx.prec = DECIMAL_PREC
        x = Decimal(r.numerator).ln() - Decimal(r.denominator).ln()
    y = float(x)
    return y if Decimal(y) >= x else math.nextafter(y, math.inf)


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def _floor(x: Fraction) -> int:
    return x.numerator // x.denominator


@dataclass(frozen=True)
class Rappor:
    """RAPPOR's parameters and its realized cells (module docstring).

    Parameters
    ----------
    k : int
        Bloom filter bits, in [2, 4096].
    h : int
        Hash functions per cohort, in [1, min(k, 16)].
    m : int
        Cohorts, in [1, 2^16].
    f : float
        The PRR's noise: each bit is replaced by a fair coin with probability f, in (0, 1).
    p : float
        The IRR: P(S_i = 1 | B'_i = 0), in [0, 1).
    q : float
        The IRR: P(S_i = 1 | B'_i = 1), in (p, 1].
    hash_seed : str, default 'ldp.rappor'
        Public: fixes every cohort's hash functions (client and aggregator must agree).
    chunk : int or None, default None
        b, the bits per coin: None picks the smallest of 16, 32, 64 at which every cell is exact;
        16, 32 or 64 forces it (cells rounded toward each other: only more private).

    Raises
    ------
    ParameterError
        A value out of range, p ≥ q, or cells the 2^-b grid cannot express (one line).

    Examples
    --------
    >>> r = Rappor(k=128, h=2, m=64, f=0.5, p=0.5, q=0.75)  # the paper's example
    >>> round(r.epsilon_inf, 4), round(r.epsilon_1, 4), r.chunk_bits
    (4.3944, 1.0743, 16)
    >>> r.permanent_loss <= r.epsilon_inf and r.single_report_loss <= r.epsilon_1
    True
    """

    k: int
    h: int
    m: int
    f: float
    p: float
    q: float
    hash_seed: str = "ldp.rappor"
    chunk: int | None = field(default=None)

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", require_integer("rappor k (Bloom bits)", self.k, 2, MAX_K))
        object.__setattr__(self, "h", require_integer("rappor h (hash functions)", self.h, 1, min(self.k, MAX_H)))
        object.__setattr__(self, "m", require_integer("rappor m (cohorts)", self.m, 1, MAX_M))
        object.__setattr__(self, "f", require_probability("rappor f", self.f))
        p = _prob("rappor p", self.p)
        q = _prob("rappor q", self.q)
        if not p < q:
            raise ParameterError(f"rappor needs p < q (p = P(report 1 | PRR bit 0), q = P(report 1 | PRR bit 1)), got p={p!r}, q={q!r}")
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "q", q)
        if not isinstance(self.hash_seed, str):
            raise ParameterError(f"rappor hash_seed must be a string, got {self.hash_seed!r}"[:200])
        if self.chunk is not None and self.chunk not in _CHUNK_DTYPES:
            raise ParameterError(f"rappor chunk must be 16, 32, 64 or None, got {self.chunk!r}")
        self.cells  # noqa: B018  (validates)

    # --- the realized cells ---

    @property
    def chunk_bits(self) -> int:
        """b: bits per coin (``chunk``, or the smallest of 16, 32, 64 at which every cell is exact)."""
        return self.cells[4]

    @functools.cached_property
    def cells(self) -> tuple[int, int, int, int, int]:
        """(T1, T0, Q, P, b): PRR bit = 1[chunk < T1 if B_i else T0]; IRR bit = 1[chunk < Q if
        B'_i else P]; all on the 2^b grid, rounded toward each other (module docstring)."""
        f2, p, q = Fraction(self.f) / 2, Fraction(self.p), Fraction(self.q)
        for b in (self.chunk,) if self.chunk else (16, 32, 64):
            top = 1 << b
            t0, pc, qc = _ceil(f2 * top), _ceil(p * top), _floor(q * top)
            exact = t0 == f2 * top and pc == p * top and qc == q * top
            if self.chunk or exact or b == 64:
                if not (0 < t0 < top - t0 and pc < qc):
                    raise ParameterError(f"rappor f={self.f!r}, p={self.p!r}, q={self.q!r} cannot be expressed on a 2^-{b} grid; use chunk=64 or less extreme values")
                cells = (top - t0, t0, qc, pc, b)
                if not (self._ratios(cells)[0] <= self._nominal()[0] and self._ratios(cells)[1] <= self._nominal()[1]):  # pragma: no cover - rounding inward
                    raise ParameterError(f"rappor f={self.f!r}, p={self.p!r}, q={self.q!r}: the 2^-{b} cells would exceed the declared budgets; use chunk=64")
                return cells
        raise AssertionError("unreachable")  # pragma: no cover

    def prr_probabilities(self) -> tuple[Fraction, Fraction]:
        """(P(B' = 1 | B = 1), P(B' = 1 | B = 0)), realized: 1 − f/2 and f/2."""
        t1, t0, _, _, b = self.cells
        return Fraction(t1, 1 << b), Fraction(t0, 1 << b)

    def irr_probabilities(self) -> tuple[Fraction, Fraction]:
        """(q, p), realized: P(S = 1 | B' = 1) and P(S = 1 | B' = 0)."""
        _, _, qc, pc, b = self.cells
        return Fraction(qc, 1 << b), Fraction(pc, 1 << b)

    def report_probabilities(self) -> tuple[Fraction, Fraction]:
        """(q*, p*), realized: P(S_i = 1 | B_i = 1) and P(S_i = 1 | B_i = 0), one report."""
        (a1, a0), (s1, s0) = self.prr_probabilities(), self.irr_probabilities()
        return a1 * s1 + (1 - a1) * s0, a0 * s1 + (1 - a0) * s0

    def _ratios(self, cells: tuple[int, int, int, int, int]) -> tuple[Fraction, Fraction]:
        t1, t0, qc, pc, b = cells
        top = 1 << b
        a1, a0, s1, s0 = (Fraction(x, top) for x in (t1, t0, qc, pc))
        qs, ps = a1 * s1 + (1 - a1) * s0, a0 * s1 + (1 - a0) * s0
        return (a1 / a0) ** (2 * self.h), (qs * (1 - ps) / (ps * (1 - qs))) ** self.h

    def _nominal(self) -> tuple[Fraction, Fraction]:
        """The paper's ratios e^{ε∞} and e^{ε1} at the nominal f, p, q (exact rationals)."""
        f, p, q = Fraction(self.f), Fraction(self.p), Fraction(self.q)
        qs, ps = f / 2 * (p + q) + (1 - f) * q, f / 2 * (p + q) + (1 - f) * p
        return ((1 - f / 2) / (f / 2)) ** (2 * self.h), (qs * (1 - ps) / (ps * (1 - qs))) ** self.h

    # --- the budgets: declared (the paper's formulas) and realized (the cells) ---

    @property
    def epsilon_inf(self) -> float:
        """ε∞ = 2h·ln[(1 − f/2)/(f/2)] (the paper; decode.R), rounded up: every report of one string."""
        return _log_up(self._nominal()[0])

    @property
    def epsilon_1(self) -> float:
        """ε1 = h·ln[q*(1 − p*)/(p*(1 − q*))] (the paper; decode.R), rounded up: one report."""
        return _log_up(self._nominal()[1])

    @property
    def permanent_ratio(self) -> Fraction:
        """The PRR's exact worst ratio over two strings: (T1/T0)^{2h}."""
        return self._ratios(self.cells)[0]

    @property
    def permanent_loss(self) -> float:
        return log_ratio(self.permanent_ratio)

    @property
    def single_report_ratio(self) -> Fraction:
        """One report's exact worst ratio: [q*(1 − p*)/(p*(1 − q*))]^h, realized."""
        return self._ratios(self.cells)[1]

    @property
    def single_report_loss(self) -> float:
        return log_ratio(self.single_report_ratio)

    def pair_loss(self, x: str, y: str, cohort: int, *, memoized: bool = True, periods: int = 1) -> float:
        """The worst loss between strings x and y in one cohort, by structure: the bits are
        independent given the Bloom pattern, so only the bits where the patterns differ count —
        ``a`` bits set by x only and ``d`` by y only give
        max(a·ln ρ1 + d·ln ρ0, d·ln ρ1 + a·ln ρ0) with the per-bit worst ratios ρ.

        One period, or ``memoized=False`` (the broken variant: a PRR per report, ``periods``
        independent composite reports): exact. ``memoized=True`` with periods > 1: the bound
        (a + d)·ln[(1 − f/2)/(f/2)] of B' (every report is post-processing of it), realized."""
        bx, by = set(self.bloom(x, cohort)), set(self.bloom(y, cohort))
        a, d = len(bx - by), len(by - bx)
        if memoized and periods > 1:
            (a1, a0) = self.prr_probabilities()
            r = a1 / a0
            return (a + d) * log_ratio(r)
        qs, ps = self.report_probabilities()
        r1, r0 = qs / ps, (1 - ps) / (1 - qs)
        one = max(a * log_ratio(r1) + d * log_ratio(r0), d * log_ratio(r1) + a * log_ratio(r0))
        return periods * one

    # --- the public hashes ---

    def bloom(self, x: str, cohort: int) -> tuple[int, ...]:
        """The h bit positions of string x in cohort c (with repeats when two hashes collide)."""
        return _bloom(self.hash_seed, self.k, self.h, int(cohort), x)

    @property
    def label(self) -> str:
        """What fixes the PRR's law (the PRR subkey's domain)."""
        return f"k={self.k}|h={self.h}|m={self.m}|f={float(self.f).hex()}|seed={len(self.hash_seed)}:{self.hash_seed}"

    @property
    def report_columns(self) -> int:
        return (self.k + 7) // 8


def _prob(name: str, value: object) -> float:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number in [0, 1], got {value!r}") from None
    if not 0.0 <= x <= 1.0:
        raise ParameterError(f"{name} must be in [0, 1], got {x!r}")
    return x


@functools.lru_cache(maxsize=1 << 16)
def _bloom(seed: str, k: int, h: int, cohort: int, x: str) -> tuple[int, ...]:
    msg = f"{len(seed)}:{seed}|{cohort}|".encode() + x.encode("utf-8", "surrogatepass")
    words = np.frombuffer(hashlib.shake_128(msg).digest(8 * h), dtype="<u8")
    return tuple(int(i) for i in uniform_index(words, k))


def bloom_bits(strings: Sequence[str], cohorts_: np.ndarray, rappor: Rappor) -> np.ndarray:
    """The (n, h) bit positions of each string under its cohort's public hashes (int64)."""
    c = np.asarray(cohorts_, dtype=np.int64)
    if len(strings) != len(c):
        raise ParameterError(f"rappor: {len(strings)} strings for {len(c)} cohorts")
    return np.array([rappor.bloom(s, int(j)) for s, j in zip(strings, c)], dtype=np.int64).reshape(len(c), rappor.h)


def bloom_matrix(positions: np.ndarray, k: int) -> np.ndarray:
    """Boolean (n, k) Bloom filters from (n, h) bit positions."""
    pos = np.asarray(positions, dtype=np.int64)
    out = np.zeros((len(pos), k), dtype=bool)
    out[np.arange(len(pos))[:, None], pos] = True
    return out


def design_matrix(candidates: Sequence[str], rappor: Rappor) -> np.ndarray:
    """X, (m·k, M) float64: X[j·k + i, s] = 1 iff bit i is set in candidate s's filter in cohort j."""
    X = np.zeros((rappor.m * rappor.k, len(candidates)), dtype=np.float64)
    for s, x in enumerate(candidates):
        for j in range(rappor.m):
            X[[j * rappor.k + i for i in rappor.bloom(x, j)], s] = 1.0
    return X


# --- the users' side: cohort, PRR, IRR ---


def cohorts(memo: bytes, user_ids: np.ndarray, rappor: Rappor) -> np.ndarray:
    """Each user's cohort, uniform on [0, m): ``uniform_index`` of one memoized draw under the
    subkey "rappor cohort|m|seed" of the users' memo key. Fixed for the user's life (restarts
    included); the aggregator learns it from the reports, and it is independent of the value."""
    users = np.asarray(user_ids, dtype=np.int64)
    key = memo_subkey(memo, f"rappor cohort|m={rappor.m}|seed={len(rappor.hash_seed)}:{rappor.hash_seed}")
    return uniform_index(UserRandomness(key, users, 0).bits(0), rappor.m)


def _coins(bits: np.ndarray, draws: Draws, one: int, zero: int, b: int, k: int) -> np.ndarray:
    """bit_i' = 1[X_i < (one if bit_i else zero)], X_i the b-bit values of ``unary_coins`` (its
    top 16 bits from draw ⌊i/8⌋, the rest only on a tie, as ``UnaryEncoding.sample``). bits: bool
    (n, k); returns bool."""
    packed = unary_coins(draws, k, b, one, zero, chosen=np.packbits(bits, axis=1))
    return np.unpackbits(packed, axis=1, count=k).view(bool)


def permanent_response(memo: bytes, user_ids: np.ndarray, strings: Sequence[str], cohorts_: np.ndarray, rappor: Rappor, question: str = "") -> np.ndarray:
    """The memoized PRR B' of each (user, string): packed bits, uint8 rows of ``report_columns``.

    A pure function of the memo key, the user id, the string (and the parameters and question):
    the coins of string x are the words AES_{K_x}(user ‖ 0 ‖ word) with K_x =
    ``memo_subkey(memo, "rappor prr|<label>|<question>|<x>")`` (HKDF-SHA256): the same (key,
    user, string) gives the same B' after any restart — the memo is the key, never a second coin
    for the same value — and two strings, questions or parameter sets never share a coin.

    Parameters
    ----------
    memo : bytes
        The users' memo key (``memo_key(long-term report key)``, ``ldp.core.longitudinal``).
    user_ids : numpy.ndarray
        int64 user ids.
    strings : sequence of str
        Each user's value.
    cohorts_ : numpy.ndarray
        Each user's cohort (``cohorts``).
    rappor : Rappor
        The parameters.
    question : str, default ''
        What is asked: separate questions get independent PRRs.
    """
    users = np.asarray(user_ids, dtype=np.int64)
    c = np.asarray(cohorts_, dtype=np.int64)
    if not (len(users) == len(strings) == len(c)):
        raise ParameterError(f"rappor: {len(users)} users, {len(strings)} strings and {len(c)} cohorts")
    t1, t0, _, _, b = rappor.cells
    out = np.zeros((len(users), rappor.report_columns), dtype=np.uint8)
    uniq, inverse = np.unique(np.asarray(strings, dtype=object), return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
    prefix = f"rappor prr|{rappor.label}|{len(question)}:{question}|"
    if len(c) and (c.min() < 0 or c.max() >= rappor.m):
        raise ParameterError(f"rappor: a cohort outside [0, {rappor.m})")
    for s in range(len(uniq)):
        rows = order[bounds[s] : bounds[s + 1]]
        x = str(uniq[s])
        key = memo_subkey(memo, prefix + x)
        table = np.array([rappor.bloom(x, j) for j in range(rappor.m)], dtype=np.int64)  # (m, h): the public hashes
        for lo in range(0, len(rows), _USER_BLOCK):
            r = rows[lo : lo + _USER_BLOCK]
            pos = table[c[r]]
            bloom = np.packbits(bloom_matrix(pos, rappor.k), axis=1)
            out[r] = unary_coins(UserRandomness(key, users[r], 0), rappor.k, b, t1, t0, chosen=bloom)
    return out


def instantaneous_response(prr: np.ndarray, draws: Draws, rappor: Rappor) -> np.ndarray:
    """One report's bits S: a fresh IRR of each user's B' from the report's own draws
    (``UserRandomness(life key, users, ledger nonces)`` on the users' side, or a seeded
    ``RandomSource`` stream in tests); packed like the PRR."""
    w = np.asarray(prr, dtype=np.uint8)
    if w.ndim != 2 or w.shape[1] != rappor.report_columns:
        raise ParameterError(f"rappor: a PRR is a row of {rappor.report_columns} bytes, got shape {w.shape}")
    _, _, qc, pc, b = rappor.cells
    out = np.empty_like(w)
    users = np.asarray(draws.users)
    for lo in range(0, len(w), _USER_BLOCK):  # blocks of users: the (users × k) temporaries stay small
        sl = slice(lo, lo + _USER_BLOCK)
        out[sl] = unary_coins(_Rows(draws, sl, users), rappor.k, b, qc, pc, chosen=w[sl])
    return out


class _Rows:
    """Rows ``sl`` of a Draws (a block of its users): the same words, fewer of them computed."""

    def __init__(self, draws: Draws, sl: slice, users: np.ndarray) -> None:
        self.draws, self.sl = draws, sl
        self.users = users[sl]
        self.sub: Draws | None = None
        if isinstance(draws, UserRandomness):  # compute only this block's words
            ctr = draws.counters
            self.sub = UserRandomness(draws.key, np.asarray(draws.users)[sl], ctr if np.ndim(ctr) == 0 else np.asarray(ctr)[sl])

    def bits(self, draw: int = 0) -> np.ndarray:
        return self.sub.bits(draw) if self.sub is not None else self.draws.bits(draw)[self.sl]

    def block_matrix(self, first: int, count: int, rows: slice | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Whole blocks, forwarded (``ldp.core.rng.draw_blocks``): the block keeps the fast path."""
        if self.sub is not None:
            return draw_blocks(self.sub, first, count, rows, out)
        return draw_blocks(self.draws, first, count)[self.sl][slice(None) if rows is None else rows]

    def pair_blocks(self, rows: np.ndarray, draws: np.ndarray) -> np.ndarray:
        """Chosen (user, block) pairs, forwarded (``ldp.core.rng.block_pairs``)."""
        if self.sub is not None:
            return block_pairs(self.sub, rows, draws)
        return block_pairs(self.draws, np.arange(len(self.draws.users))[self.sl][rows], draws)

    def uniform(self, draw: int = 0) -> np.ndarray:  # pragma: no cover - the samplers read bits only
        raise NotImplementedError


# --- the aggregator ---


def bloom_counts(reports: np.ndarray, report_cohorts: np.ndarray, rappor: Rappor) -> tuple[np.ndarray, np.ndarray]:
    """(c, N): c[j, i] = reports of cohort j with bit i set (int64, (m, k)); N[j] = cohort j's reports."""
    w = np.asarray(reports, dtype=np.uint8)
    c = np.asarray(report_cohorts, dtype=np.int64)
    if w.ndim != 2 or w.shape[1] != rappor.report_columns or len(c) != len(w):
        raise ParameterError(f"rappor: reports must be rows of {rappor.report_columns} bytes with one cohort each, got shape {w.shape} and {len(c)} cohorts")
    if len(c) and (c.min() < 0 or c.max() >= rappor.m):
        raise ParameterError(f"rappor: a cohort outside [0, {rappor.m}) in the reports")
    order = np.argsort(c, kind="stable")
    N = np.bincount(c, minlength=rappor.m).astype(np.int64)
    edges = np.concatenate([[0], np.cumsum(N)])
    counts = np.zeros((rappor.m, rappor.k), dtype=np.int64)
    for j in range(rappor.m):
        if N[j]:
            counts[j] = bit_column_counts(w[order[edges[j] : edges[j + 1]]], rappor.k)
    return counts, N


def estimate_bloom(counts: np.ndarray, N: np.ndarray, rappor: Rappor) -> tuple[np.ndarray, np.ndarray]:
    """(t̂, sd), (m, k): the unbiased fraction of cohort j's users whose true bit i is 1,
    t̂ = (c/N − p*)/(q* − p*) with the realized p*, q*, and its standard deviation
    sqrt(r(1 − r)/N)/(q* − p*) with r = p* + (q* − p*)·clip(t̂, 0, 1) (decode.R's plug-in).
    A cohort without reports has t̂ = 0 and sd = inf (it carries no weight)."""
    qs, ps = (float(x) for x in rappor.report_probabilities())
    n = np.asarray(N, dtype=np.float64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (np.asarray(counts, dtype=np.float64) / n - ps) / (qs - ps)
        r = ps + (qs - ps) * np.clip(t, 0.0, 1.0)
        sd = np.sqrt(r * (1 - r) / n) / (qs - ps)
    empty = (n == 0).ravel()
    t[empty], sd[empty] = 0.0, np.inf
    return t, sd


@dataclass(frozen=True)
class Decoded:
    """The decoder's answer: per candidate, the estimated frequency (fraction of all users; 0 when
    not detected), whether it was detected, the first fit's coefficient and its z-score."""

    candidates: tuple[str, ...]
    frequencies: np.ndarray
    detected: np.ndarray
    coefficients: np.ndarray
    z: np.ndarray
    threshold: float


def decode(counts: np.ndarray, N: np.ndarray, candidates: Sequence[str], rappor: Rappor, alpha: float = 0.05) -> Decoded:
    """Candidate strings' frequencies from the cohorts' bit counts (module docstring).

    1. t̂ and its sd per (cohort, bit) (``estimate_bloom``); rows weighted by 1/sd.
    2. NNLS of t̂ on the design matrix (``scipy.optimize.nnls``): coefficients ≥ 0.
    3. On the positive coefficients, the weighted least-squares covariance (XᵀWX)⁻¹: a
       candidate is detected iff coefficient/se > z_{1 − α/M} (one-sided, Bonferroni over the M
       candidates; approximately level α for the family of absent candidates, as it ignores the
       selection by NNLS and strings outside the list).
    4. NNLS again on the detected columns: their frequencies; the others are 0.

    Raises
    ------
    ParameterError
        No candidates, duplicates, α outside (0, 1), or M > 0.8·m·k (decode.R switches to LASSO
        there; this decoder does not do an underdetermined fit).
    """
    from scipy.optimize import nnls

    alpha = require_probability("rappor decode alpha", alpha)
    cands = tuple(str(c) for c in candidates)
    M = len(cands)
    if M == 0 or len(set(cands)) != M:
        raise ParameterError(f"rappor decode needs a non-empty list of distinct candidate strings, got {M} with {M - len(set(cands))} repeats")
    if M > 0.8 * rappor.m * rappor.k:
        raise ParameterError(f"rappor decode: {M} candidates for m·k = {rappor.m * rappor.k} equations; at most 0.8·m·k = {int(0.8 * rappor.m * rappor.k)} (the reference decodes more by LASSO, not done here)")
    t, sd = estimate_bloom(counts, N, rappor)
    X = design_matrix(cands, rappor)
    w = 1.0 / sd.ravel()
    keep = np.isfinite(w) & (w > 0)
    Xw, yw = X[keep] * w[keep, None], t.ravel()[keep] * w[keep]
    beta, _ = nnls(Xw, yw, maxiter=50 * M)
    z = np.zeros(M)
    support = np.nonzero(beta > 0)[0]
    if len(support):
        cov = np.linalg.pinv(Xw[:, support].T @ Xw[:, support])
        se = np.sqrt(np.maximum(np.diag(cov), 1e-300))
        z[support] = beta[support] / se
    threshold = NormalDist().inv_cdf(1 - alpha / M)
    detected = z > threshold
    freq = np.zeros(M)
    if detected.any():
        sel = np.nonzero(detected)[0]
        freq[sel], _ = nnls(Xw[:, sel], yw, maxiter=50 * len(sel))
    return Decoded(cands, freq, detected, beta, z, threshold)


def decode_repeated(counts: np.ndarray, periods: int, report_cohorts: np.ndarray, candidates: Sequence[str], rappor: Rappor, *, memoized: bool = True) -> np.ndarray:
    """The aggregator's optimal (MAP, uniform prior over the candidates) guess of each user's
    string from ``periods`` reports of it: counts[u, i] = how many of user u's reports have bit i set.

    memoized=True (RAPPOR): the bits are independent given the pattern; bit i's likelihood is
    Σ_{b'} P(b' | B_i) q^{c}(1 − q)^{T−c} (b' = 1) or p^{c}(1 − p)^{T−c} (b' = 0); any T is
    post-processing of B', so the accuracy is at most e^{ε∞}/(e^{ε∞} + M − 1).
    memoized=False (the broken variant: a fresh PRR each report): bit i's reports are T
    independent Bernoulli(q* if B_i else p*); the accuracy tends to 1 as T grows.

    Returns the index of the best candidate per user (ties: the first)."""
    T = require_integer("periods", periods, 1)
    c = np.asarray(counts, dtype=np.float64)
    coh = np.asarray(report_cohorts, dtype=np.int64)
    (a1, a0), (s1, s0) = (tuple(float(x) for x in pair) for pair in (rappor.prr_probabilities(), rappor.irr_probabilities()))
    from scipy.special import xlogy  # 0·log 0 = 0: p = 0 or q = 1 are allowed

    def binom(prob: float) -> np.ndarray:  # log prob^c (1 − prob)^(T − c)
        return np.asarray(xlogy(c, prob) + xlogy(T - c, 1.0 - prob))

    if memoized:
        l1, l0 = binom(s1), binom(s0)
        on = np.logaddexp(math.log(a1) + l1, math.log1p(-a1) + l0)  # log P(reports | B_i = 1)
        off = np.logaddexp(math.log(a0) + l1, math.log1p(-a0) + l0)
    else:
        qs, ps = (float(x) for x in rappor.report_probabilities())
        on, off = binom(qs), binom(ps)
    gain = on - off  # log-likelihood of a set bit over an unset one
    base = off.sum(axis=1)
    scores = np.empty((len(c), len(candidates)))
    for s, x in enumerate(candidates):
        sets = [sorted(set(rappor.bloom(x, j))) for j in range(rappor.m)]  # a bit two hashes hit counts once
        pos = np.array([z + [-1] * (rappor.h - len(z)) for z in sets], dtype=np.int64)[coh]
        g = np.take_along_axis(gain, np.maximum(pos, 0), axis=1) * (pos >= 0)
        scores[:, s] = base + g.sum(axis=1)
    return np.argmax(scores, axis=1).astype(np.int64)


# --- exact audit of small instances (the unchanged ``verify_exact``) ---


class _VirtualChunks:
    """The real samplers on the audit's terms: coin j's b-bit X_j (``unary_word``: its top 16 bits in
    a main draw, the rest in the fallback stream) is the top b bits of virtual draw ``first + j``,
    so each virtual draw's cells are intervals ``verify_exact`` can enumerate, the fallback bits
    included (as ``ldp.core.longitudinal``'s audit does)."""

    def __init__(self, virtual: Draws, first: int, b: int, k: int) -> None:
        self.virtual, self.first, self.b, self.k, self.users = virtual, first, b, k, virtual.users

    def bits(self, draw: int = 0) -> np.ndarray:
        return unary_word(draw, self.k, self.b, lambda j: self.virtual.bits(self.first + j) >> np.uint64(64 - self.b))

    def uniform(self, draw: int = 0) -> np.ndarray:  # pragma: no cover - the samplers read bits only
        raise NotImplementedError


@dataclass(frozen=True)
class ReportChannel(Randomizer):
    """Small RAPPOR instances as one randomizer for ``verify_exact``: the input is the index of a
    Bloom pattern (``patterns``: tuples of set bits, k ≤ 4), the output the integer whose bit
    t·k + i is report t's bit i (or the PRR's bit i, ``prr_only``).

    ``prr_only`` or ``periods`` > 1 with ``memoized``: ε = ε∞ (B' and every report of it).
    One period: ε = ε1. ``memoized=False`` (the broken variant: a fresh PRR per report) still
    claims ε∞ for its ``periods`` reports, and fails once periods·ε1 > ε∞.

    Draws (virtual, one per coin): PRR bit i reads draw i and report t's IRR bit i reads
    k(1 + t) + i (memoized); unmemoized, report t's PRR reads 2kt + i and its IRR 2kt + k + i.
    The samplers are the module's own (``_coins``, ``instantaneous_response``)."""

    rappor: Rappor
    patterns: tuple[tuple[int, ...], ...]
    periods: int = 1
    memoized: bool = True
    prr_only: bool = False
    kind: ClassVar[str] = "rappor reports"

    def __post_init__(self) -> None:
        R = self.rappor
        if R.k > 4 or R.k * (1 if self.prr_only else self.periods) > 12:
            raise ParameterError(f"the enumerated rappor audit takes k ≤ 4 and k·periods ≤ 12, got k={R.k}, periods={self.periods}")
        if not self.patterns or any(not all(0 <= i < R.k for i in pat) for pat in self.patterns):
            raise ParameterError(f"rappor audit patterns must be tuples of bits in [0, {R.k})")

    @property
    def epsilon(self) -> float:  # type: ignore[override]
        if self.prr_only or self.periods > 1:
            return self.rappor.epsilon_inf
        return self.rappor.epsilon_1

    def _pattern(self, u: int) -> np.ndarray:
        bits = np.zeros(self.rappor.k, dtype=bool)
        bits[list(self.patterns[u])] = True
        return bits

    def input_domain(self) -> np.ndarray:
        return np.arange(len(self.patterns), dtype=np.float64)

    def output_domain(self) -> np.ndarray:
        width = self.rappor.k * (1 if self.prr_only else self.periods)
        return np.arange(1 << width, dtype=np.float64)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        R = self.rappor
        k, (t1, t0, _, _, b) = R.k, R.cells
        idx = np.asarray(inputs, dtype=np.float64).astype(np.int64)
        B = np.stack([self._pattern(int(u)) for u in idx]) if len(idx) else np.zeros((0, k), dtype=bool)
        weights = 1 << np.arange(k, dtype=np.int64)
        prr = _coins(B, _VirtualChunks(randomness, 0, b, k), t1, t0, b, k)
        if self.prr_only:
            return (prr @ weights).astype(np.float64)
        code = np.zeros(len(idx), dtype=np.int64)
        for t in range(self.periods):
            if self.memoized:
                y = instantaneous_response(np.packbits(prr, axis=1), _VirtualChunks(randomness, k * (1 + t), b, k), R)
            else:
                fresh = _coins(B, _VirtualChunks(randomness, 2 * k * t, b, k), t1, t0, b, k)
                y = instantaneous_response(np.packbits(fresh, axis=1), _VirtualChunks(randomness, 2 * k * t + k, b, k), R)
            code += (np.unpackbits(y, axis=1, count=k).astype(np.int64) @ weights) << (k * t)
        return code.astype(np.float64)

    def _denominator(self) -> int:
        R = self.rappor
        coins = R.k * (1 if self.prr_only else (1 + self.periods if self.memoized else 2 * self.periods))
        return 1 << (R.chunk_bits * coins)

    def _table(self, u: int) -> list[int]:
        """Exact masses of every output for pattern u: a product over bits (independent given B)."""
        R = self.rappor
        k, (t1, t0, qc, pc, b) = R.k, R.cells
        top = 1 << b
        B = self._pattern(u)
        T = 1 if self.prr_only else self.periods
        out = []
        for code in range(1 << (k * T)):
            total = 1
            for i in range(k):
                a = t1 if B[i] else t0  # P(B'_i = 1) · 2^b
                ys = [(code >> (k * t + i)) & 1 for t in range(T)]
                if self.prr_only:
                    total *= a if ys[0] else top - a
                elif self.memoized:
                    total *= a * math.prod(qc if y else top - qc for y in ys) + (top - a) * math.prod(pc if y else top - pc for y in ys)
                else:
                    one = a * qc + (top - a) * pc
                    total *= math.prod(one if y else top * top - one for y in ys)
            out.append(total)
        return out

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        u = np.asarray(inputs, dtype=np.float64).ravel().astype(np.int64)
        masses = np.empty((len(u), len(self.output_domain())), dtype=object)
        for row, x in enumerate(u):
            masses[row] = self._table(int(x))
        return self.output_domain(), masses, self._denominator()

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        uu, ww = np.broadcast_arrays(np.asarray(u, dtype=np.float64), np.asarray(w, dtype=np.float64))
        den = self._denominator()
        tables = {int(x): self._table(int(x)) for x in np.unique(uu)}
        flat = [log_ratio(Fraction(tables[int(a)][int(c)], den)) if tables[int(a)][int(c)] else -math.inf for a, c in zip(uu.ravel(), ww.ravel())]
        return np.asarray(flat, dtype=np.float64).reshape(uu.shape)

    def draw_cells(self, u: float) -> list[np.ndarray]:
        R = self.rappor
        k, (t1, t0, qc, pc, b) = R.k, R.cells
        B = self._pattern(int(u))
        sh = 64 - b
        prr = [np.array([0, (t1 if B[i] else t0) << sh], dtype=np.uint64) for i in range(k)]
        irr = [np.array(sorted({0, pc << sh, qc << sh} - {1 << 64}), dtype=np.uint64)] * k
        if self.prr_only:
            return prr
        if self.memoized:
            return prr + irr * self.periods
        return (prr + irr) * self.periods


# --- the registered kind: rappor over a query's finite values, memoized, asked in rounds ---

DEFAULTS: dict[str, Any] = {"k": 128, "h": 2, "m": 64, "p": 0.5, "q": 0.75, "hash_seed": "ldp.rappor"}
_F_GRID = 32  # f/2 derived from ε lies on the 2^-32 grid: T0/2^32, so f = T0/2^31 is an exact float


def f_for_epsilon(epsilon: float, h: int) -> float:
    """The f whose PRR spends ε∞ ≤ ε and as close as the 2^-32 grid allows: f/2 = T0/2^32 with T0
    the smallest integer such that ((2^32 − T0)/T0)^{2h} ≤ e^ε (decided exactly, ``exp_bounds``'s
    lower bound of e^ε). At ε = ``Rappor(f=0.5, h=2, ...).epsilon_inf`` it gives the paper's 0.5.

    Raises
    ------
    ParameterError
        ε so small that even T0 = 2^31 − 1 (f just below 1) exceeds it.
    """
    from ldp.core.audit import exp_bounds

    h = require_integer("rappor h (hash functions)", h, 1, MAX_H)
    top = 1 << _F_GRID
    bound = exp_bounds(epsilon)[0]

    def ok(t0: int) -> bool:
        return Fraction(top - t0, t0) ** (2 * h) <= bound

    guess = max(1, min(top // 2 - 1, math.ceil(top / (1.0 + math.exp(min(epsilon / (2 * h), 700.0))))))
    if not ok(top // 2 - 1):
        raise ParameterError(f"rappor: epsilon={epsilon!r} is below what f < 1 on the 2^-{_F_GRID} grid allows with h={h}; ask a larger epsilon")
    t0 = guess
    while not ok(t0):  # the float guess was a little low: move up to the first T0 that fits
        t0 += 1
    while t0 > 1 and ok(t0 - 1):  # a little high: move down while it still fits
        t0 -= 1
    return t0 / float(top // 2)


def category_string(value: float) -> str:
    """A query value's RAPPOR string: ``str(int(v))`` for an integral value, else ``repr(float(v))``."""
    v = float(value)
    return str(int(v)) if v.is_integer() else repr(v)


@dataclass(frozen=True)
class MemoizedRappor(Randomizer):
    """``rappor``: full RAPPOR (Erlingsson et al. 2014) over a query's finite values, as a
    randomizer a round can ask (``RandomizerSpec("rappor", query, ε∞, {k, h, m, f, p, q, hash_seed})``).

    Each value is the string ``category_string(v)``. A report is the IRR (from the report's own
    draws) of the user's PRR, ``permanent_response(memo, user, x, cohort, rappor, question)``, with
    the cohort ``cohorts(memo, user, rappor)``: both keyed by the users' memo key
    (``UserRandomness.memo``, only a shard holds it) through ``memo_subkey``; the question is the
    query's JSON. The cohort is the user's secret draw, so the report carries it, as the paper's:
    a wire row is the ⌈k/8⌉ IRR bytes then the cohort in one byte (m ≤ 256) or two (big-endian)
    (``split`` undoes it for ``bloom_counts`` and ``decode``).

    **Budget.** ``epsilon`` is ε∞ (what the ledger charges a user's first report of the label;
    later reports cost ``MEMO_REPEAT_EPSILON``, ``ldp.local.shard.Shard``). The realized PRR
    ratio (T1/T0)^{2h} never exceeds e^ε (exactly). Without ``f`` in the params, f is derived
    from ε (``f_for_epsilon``); with it, the spec's ε must be the paper's ε∞ = 2h·ln[(1 − f/2)/(f/2)]
    (``Rappor.epsilon_inf``) to 10^-9 relative, else the builder refuses naming both. The single
    report's ε1 (``Rappor.epsilon_1``) is what one report alone reveals; it is not charged.
    """

    epsilon: float
    rappor: Rappor
    categories: tuple[float, ...]
    question: str = ""
    kind: ClassVar[str] = "rappor"
    report_dtype: ClassVar[type[np.generic]] = np.uint8

    def __post_init__(self) -> None:
        from ldp.core.audit import exp_bounds

        cats = tuple(sorted(float(c) for c in self.categories))
        if len(cats) < 1 or len(set(cats)) != len(cats):
            raise ParameterError(f"rappor needs distinct categories, got {self.categories[:8]}")
        object.__setattr__(self, "categories", cats)
        if not self.rappor.permanent_ratio <= exp_bounds(self.epsilon)[0]:
            raise ParameterError(f"rappor: the PRR's realized ε∞ = {self.rappor.permanent_loss!r} exceeds the spec's epsilon={self.epsilon!r}")

    @functools.cached_property
    def strings(self) -> tuple[str, ...]:
        """Each category's RAPPOR string (``category_string``), in the categories' order."""
        return tuple(category_string(c) for c in self.categories)

    @property
    def memo_label(self) -> str:
        """What fixes the PRRs and cohorts (``ldp.core.longitudinal.memo_ledger_identity``): the
        Bloom parameters, f, the hash seed (``Rappor.label``) and the question."""
        return f"rappor|{self.rappor.label}|{len(self.question)}:{self.question}"

    @property
    def cohort_bytes(self) -> int:
        return 1 if self.rappor.m <= 256 else 2

    @property
    def report_columns(self) -> int:
        return self.rappor.report_columns + self.cohort_bytes

    def report_domains(self) -> tuple[np.ndarray | None, ...]:
        """IRR bytes free but the last's padding bits (zero); the cohort's bytes below m."""
        k, m = self.rappor.k, self.rappor.m
        pad = -k % 8
        bits = (None,) * (self.rappor.report_columns - 1) + (None if pad == 0 else np.arange(0, 256, 1 << pad),)
        if self.cohort_bytes == 1:
            return bits + (np.arange(m),)
        return bits + (np.arange(((m - 1) >> 8) + 1), None)

    def input_domain(self) -> np.ndarray:
        return np.asarray(self.categories)

    def split(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(IRR bit rows, cohorts) of wire rows, for ``bloom_counts``; a ParameterError if malformed."""
        w = np.asarray(rows, dtype=np.uint8)
        if w.ndim != 2 or w.shape[1] != self.report_columns:
            raise ParameterError(f"rappor reports are rows of {self.report_columns} bytes, got shape {w.shape}")
        cols = self.rappor.report_columns
        c = w[:, cols].astype(np.int64) if self.cohort_bytes == 1 else (w[:, cols].astype(np.int64) << 8) | w[:, cols + 1]
        return np.ascontiguousarray(w[:, :cols]), c

    def join(self, bits: np.ndarray, cohorts_: np.ndarray) -> np.ndarray:
        """Wire rows from IRR bit rows and cohorts (``split``'s inverse)."""
        c = np.asarray(cohorts_, dtype=np.int64)
        tail = c[:, None].astype(np.uint8) if self.cohort_bytes == 1 else np.stack([(c >> 8).astype(np.uint8), (c & 0xFF).astype(np.uint8)], axis=1)
        return np.concatenate([np.asarray(bits, dtype=np.uint8), tail], axis=1)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        from ldp.core.errors import LDPError

        memo = getattr(randomness, "memo", None)
        if memo is None:
            raise LDPError("rappor: a memoized report needs the users' memo key, which only a shard holds (UserRandomness.memo)")
        users = np.asarray(randomness.users, dtype=np.int64)
        idx = np.searchsorted(np.asarray(self.categories), np.asarray(inputs, dtype=np.float64))
        strings = [self.strings[i] for i in idx.tolist()]
        c = cohorts(bytes(memo), users, self.rappor)
        prr = permanent_response(bytes(memo), users, strings, c, self.rappor, self.question)
        return self.join(instantaneous_response(prr, randomness, self.rappor), c)

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        """ln Pr[one report w | value u]: the cohort's 1/m (nominal) times the bits' realized q*
        (set in u's Bloom pattern in that cohort) or p* (unset), independent given the pattern."""
        bits, c = self.split(np.atleast_2d(np.asarray(w, dtype=np.uint8)))
        uu = np.broadcast_to(np.asarray(u, dtype=np.float64), (len(c),)).ravel()
        qs, ps = (float(x) for x in self.rappor.report_probabilities())
        idx = np.searchsorted(np.asarray(self.categories), uu)
        B = bloom_matrix(bloom_bits([self.strings[i] for i in idx.tolist()], c, self.rappor), self.rappor.k)
        S = np.unpackbits(bits, axis=1, count=self.rappor.k).astype(bool)
        p = np.where(B, qs, ps)
        return np.log(np.where(S, p, 1.0 - p)).sum(axis=1) - math.log(self.rappor.m)

    def decode(self, rows: np.ndarray, alpha: float = 0.05) -> Decoded:
        """The categories' frequencies from wire rows (``split``, ``bloom_counts``, ``decode``)."""
        bits, c = self.split(rows)
        counts, N = bloom_counts(bits, c, self.rappor)
        return decode(counts, N, self.strings, self.rappor, alpha)


def _param(spec: Any, name: str, kind: type) -> Any:
    value = spec.params.get(name, DEFAULTS.get(name))
    ok = isinstance(value, str) if kind is str else (not isinstance(value, bool) and isinstance(value, (int, float) if kind is float else int))
    if not ok:
        raise ParameterError(f"rappor {name} must be {'a string' if kind is str else 'an integer' if kind is int else 'a number'}, got {value!r}"[:200])
    return value


@register_randomizer("rappor", params=("k", "h", "m", "f", "p", "q", "hash_seed"))
def build_rappor(spec: SpecView, query: Query) -> Randomizer:
    """Full RAPPOR over the query's finite values (``MemoizedRappor``); params default to the
    paper's k = 128, h = 2, m = 64, p = 0.5, q = 0.75 and f from the spec's ε (``f_for_epsilon``)."""
    import json

    check_params(spec.kind, spec.params)
    values = query.values()
    if values is None:
        raise ParameterError(f"rappor needs a query with a small finite set of values; {spec.query.name!r} has none")
    k, h, m = _param(spec, "k", int), _param(spec, "h", int), _param(spec, "m", int)
    p, q, seed = _param(spec, "p", float), _param(spec, "q", float), _param(spec, "hash_seed", str)
    if "f" in spec.params:
        f = _param(spec, "f", float)
        R = Rappor(k, h, m, f, p, q, seed)
        if not math.isclose(R.epsilon_inf, spec.epsilon, rel_tol=1e-9):
            raise ParameterError(
                f"rappor: the spec's epsilon={spec.epsilon!r} is not the ε∞ = 2h·ln[(1 − f/2)/(f/2)] = {R.epsilon_inf!r} of f={f!r}, h={h}; ask epsilon={R.epsilon_inf!r} or leave f out"
            )
    else:
        R = Rappor(k, h, m, f_for_epsilon(spec.epsilon, h), p, q, seed)
    question = json.dumps(spec.query.to_json(), sort_keys=True, allow_nan=True)
    return MemoizedRappor(spec.epsilon, R, tuple(values.tolist()), question)
