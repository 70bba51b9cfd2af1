"""Two-level longitudinal frequency oracles with memoization on the users' side: L-GRR, L-OUE,
L-OSUE and L-SUE (basic RAPPOR: one bit per category, no Bloom filter) — exact on integer cells.

The scheme (Erlingsson, Pihur & Korolova, "RAPPOR", CCS 2014, the memoization of its permanent
randomized response; Arcolezi, Couchot, Al Bouna & Xiao, "Improving the utility of locally
differentially private protocols for longitudinal and multidimensional frequency estimates",
Digital Communications and Networks 2022, arXiv 2111.04636, the L-protocols' parameters):

1. **Permanent randomized response (PRR)**, once per (user, value): x' = R1(v), the ε∞ oracle
   (k-ary RR for L-GRR, OUE for L-OUE and L-OSUE, SUE for L-SUE). It is *memoized*: every report
   of v, in every period, reuses the same x'.
2. **Instantaneous randomized response (IRR)**, fresh for every report: y = R2(x'), calibrated so
   that the composite v → y is ε1-LDP (0 < ε1 < ε∞).

Privacy (docs/longitudinal.md says what is and is not protected):

- one report is ε1-LDP: ``LongitudinalOracle.single_report_loss`` is its realized loss, exact
  (L-GRR's published calibration is *not* tight for k > 2: its real loss is below ε1);
- every report of one value, in any number of periods, is post-processing of x' (the IRR's coins
  are independent of v), so all of them together are ε∞-LDP: ``permanent_loss``;
- a change of value draws a new, independent x', and nothing hides *when* it changed: a user who
  reports d distinct values spends up to d·ε∞ (``longitudinal_charges``).

**Memoization lives on the users' side and never repeats a coin.** The PRR is not stored: it is a
pure function of a secret *memo key*, the user id and the value, ``permanent_response(memo_key,
user_ids, values, oracle)``: the ε∞ oracle's own exact sampler (``ldp.core.rr_mechanisms``,
``ldp.core.frequency_oracles``) fed ``UserRandomness(K_PRR, users, counters=value index)``, whose
draws are AES_{K_PRR}(user ‖ value ‖ draw) (``ldp.core.rng``). So the same (key, user, value)
gives the same x' after any restart (that *is* the memo: one coin, read again, never a second
coin for the same value), and two values get independent coins. K_PRR = HKDF-SHA256(memo key,
info = "ldp.longitudinal PRR v1" ‖ the oracle's label ‖ the question): domain-separated from the
report keys (``ldp.core.rng.life_key`` uses another info string, and report draws are keyed by
per-report nonces) and from every other question and ε∞, so no other randomizer ever reads these
words. The IRR reads the ordinary report draws, ``instantaneous_response(prr, draws, oracle)``
with ``draws = UserRandomness(life key, users, ledger nonces)``, exactly as every other report
does (a fresh nonce per accepted charge: a fresh coin per report, whoever repeats a request).

**Where the memo key comes from in a deployment.** From the users' side only, next to the
durable ledger, never from or through the aggregator:

- ``memo_key(report_key)`` = HKDF-SHA256 of the shard's *long-term* report key (the 32 bytes a
  client holds in ``ClientConfig.report_key`` / ``data.report_key()``, ``ldp.local.shard.Shard``),
  with its own info string. It must be derived from the long-term key, **never** from the
  process life's key ``life_key(report_key, key_salt)``: a fresh salt per life would draw a new
  x' at every restart, and each restart would spend another ε∞.
- When the long-term report key is itself fresh per process (``secret_key()``, no key in the
  config), the memo key must be made once (``secret_key()``) and kept in the durable ledger store
  with the users' ledgers (``ldp.local.ledger_store.SqliteLedgerStore``, keyed by the data's
  identity), read back on every restart, and never sent. Losing it costs a fresh ε∞ per value
  (the ledger must then charge it again); it never breaks privacy, only the budget.

Exactness (docs/audit.md). Every sampler compares integers from 64-bit draws with integer cells.
The PRR *is* the ε∞ oracle's audited sampler (``permanent_oracle``). The IRR's cells are chosen by
bisection on the *exact* composite ratio (Python integers, e^{ε1} bounded from below at 80
digits), so the realized one-report loss is ≤ ε1 by construction, and the closed forms of the
reference are only compared with it (tests/core/test_longitudinal.py). ``OneReportChannel``
and ``RepeatedReports`` show small instances to the unchanged ``ldp.core.audit.verify_exact``
(the real samplers fed their cell boundaries); at any k the loss reduces, by structure, to the
composite GRR channel (L-GRR) or to the two-bit channel (unary encodings: the bits are
independent given v, and bit j's law depends only on whether j = v).

Estimator: f̂_v = (C_v/n − q_s)/(p_s − q_s) with the *realized* composite p_s = p1 p2 + (1 − p1) q2
and q_s = q1 p2 + (1 − q1) q2 (``support_probabilities``), unbiased; its exact fixed-population
variance is ``frequency_variance`` (also for the mean over T periods of one memoized population,
whose variance does not fall below the PRR's floor: ``periods``).

L-ADP (Arcolezi et al. 2022, the adaptive protocol of ALLOMFREE; multi-freq-ldpy's ``L_ADP``):
``choose_longitudinal(k, ε∞, ε1)`` is L-GRR or L-OSUE, whichever has the smaller approximate
variance V* = q_s(1 − q_s)/[(p1 − q1)²(p2 − q2)²] (n = 1, f = 0; ``approximate_variance``, the
reference's closed forms), the tie to L-GRR. The kind ``l_adp`` resolves to the chosen kind when a
spec is built (public parameters only) and is that kind in every respect: its reports, its PRRs
(the same memo label: asking ``l_adp`` or the kind it chose is one question) and its charge.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from ldp.core.audit import log_ratio
from ldp.core.errors import LDPError, ParameterError, require_epsilon, require_integer
from ldp.core.frequency_oracles import (
    FrequencyOracle,
    OptimizedUnaryEncoding,
    SymmetricUnaryEncoding,
    UnaryEncoding,
    bit_column_counts,
    unary_coins,
    unary_word,
)
from ldp.core.queries import Query
from ldp.core.randomizer_base import DECIMAL_PREC, TWO64, Randomizer, SpecView, check_params, register_randomizer, rr_draw
from ldp.core.rng import KEY_BYTES, Draws, UserRandomness, derive_subkey
from ldp.core.rr_mechanisms import KaryRandomizedResponse, category_counts

__all__ = [
    "PROTOCOLS",
    "LongitudinalOracle",
    "memo_key",
    "permanent_key",
    "permanent_response",
    "instantaneous_response",
    "support_counts",
    "estimate_frequencies",
    "frequency_variance",
    "approximate_variance",
    "choose_longitudinal",
    "ADAPTIVE_PROTOCOLS",
    "longitudinal_charges",
    "decode_repeated",
    "OneReportChannel",
    "RepeatedReports",
    "MemoizedFrequencyOracle",
    "MEMO_REPEAT_EPSILON",
    "memo_ledger_identity",
]

PROTOCOLS = ("l_grr", "l_oue", "l_osue", "l_sue")
ADAPTIVE_PROTOCOLS = ("l_grr", "l_osue")  # L-ADP (ALLOMFREE's per-attribute choice) picks one of these
CALIBRATIONS = ("paper", "tight")
MAX_K = 1 << 16  # a value's index is the PRR's counter (< 2^48) and reports are int16-sized
_MEMO_INFO = b"ldp.longitudinal memo key v1"
_PRR_INFO = b"ldp.longitudinal PRR v1|"


# --- exact comparison with e^ε (the lower bound ``ceil_share`` uses: 80 digits, 10^-78 margin) ---


@functools.lru_cache(maxsize=1024)
def _exp_low(epsilon: float) -> Fraction:
    """A rational ≤ e^ε: Decimal's exp at 80 digits (correctly rounded) times (1 − 10^-78), floored."""
    with localcontext() as ctx:
        ctx.prec = DECIMAL_PREC
        e = Decimal(float(epsilon)).exp()
        ctx.rounding = ROUND_FLOOR
        return Fraction(e - e.scaleb(-(DECIMAL_PREC - 2)))


def _bisect(lo: int, hi: int, ok: Any) -> int:
    """The largest integer x in [lo, hi] with ok(x), for ok true on [lo, x*] and false above
    (``ok(lo)`` must hold)."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _ue_ratio(p1: Fraction, q1: Fraction, s1: Fraction, s0: Fraction) -> Fraction:
    """The two-bit channel's worst ratio of a two-level unary encoding: P(1−Q)/(Q(1−P)) with the
    composite bit probabilities P = p1 s1 + (1 − p1) s0 (own bit), Q = q1 s1 + (1 − q1) s0."""
    big_p, big_q = p1 * s1 + (1 - p1) * s0, q1 * s1 + (1 - q1) * s0
    a, b = big_p * (1 - big_q), big_q * (1 - big_p)
    return max(a, b) / min(a, b)


@dataclass(frozen=True)
class LongitudinalOracle:
    """A two-level longitudinal frequency oracle over the values 0..k−1 (module docstring).

    Parameters
    ----------
    protocol : str
        'l_grr', 'l_oue', 'l_osue' or 'l_sue' (Arcolezi et al. 2022; 'l_sue' is basic RAPPOR).
    k : int
        The number of values, in [2, 2^16].
    epsilon_inf : float
        ε∞: the PRR's budget, which bounds every report of one value together.
    epsilon_1 : float
        ε1: one report's budget, 0 < ε1 < ε∞.
    calibration : str, default 'paper'
        L-GRR only. 'paper': the published p2 (it solves the binary-style ratio
        (p1p2 + q1q2)/(p1q2 + q1p2) = e^{ε1}; the real k-ary loss is below ε1 for k > 2);
        'tight': p2 solves the exact composite ratio p_s/q_s = e^{ε1}. The unary encodings are
        always tight (their composite is the two-bit channel, which their papers solve exactly).

    Raises
    ------
    ParameterError
        An unknown protocol or calibration, k outside [2, 2^16], ε outside [2^-30, 2^10],
        ε1 ≥ ε∞, or a pair (ε∞, ε1) the protocol cannot reach (L-OUE's q2 would be negative; the
        2^-64 grid cannot express it): one line naming the values and what is allowed.

    Examples
    --------
    >>> o = LongitudinalOracle("l_grr", 10, 4.0, 1.0)
    >>> [round(float(x), 6) for x in o.first_round() + o.second_round()]  # the reference's worked vector
    [0.858486, 0.015724, 0.239957, 0.084449]
    >>> round(o.single_report_loss, 4), round(o.permanent_loss, 6)  # the published p2 is not tight at k = 10
    (0.9196, 4.0)
    """

    protocol: str
    k: int
    epsilon_inf: float
    epsilon_1: float
    calibration: str = "paper"

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ParameterError(f"longitudinal protocol must be one of {list(PROTOCOLS)}, got {self.protocol!r}")
        if self.calibration not in CALIBRATIONS:
            raise ParameterError(f"longitudinal calibration must be one of {list(CALIBRATIONS)}, got {self.calibration!r}")
        object.__setattr__(self, "k", require_integer(f"{self.protocol} k", self.k, 2, MAX_K, "[2, 2^16]"))
        object.__setattr__(self, "epsilon_inf", require_epsilon(self.epsilon_inf, name=f"{self.protocol} epsilon_inf"))
        object.__setattr__(self, "epsilon_1", require_epsilon(self.epsilon_1, name=f"{self.protocol} epsilon_1"))
        if not self.epsilon_1 < self.epsilon_inf:
            raise ParameterError(f"{self.protocol} needs epsilon_1 < epsilon_inf (one report may not cost more than every report), got epsilon_1={self.epsilon_1!r}, epsilon_inf={self.epsilon_inf!r}")
        _second_round_cells(self.protocol, self.k, self.epsilon_inf, self.epsilon_1, self.calibration)  # validates

    # --- the two rounds ---

    @property
    def label(self) -> str:
        """What fixes the PRR's law: the protocol's first round, k and ε∞ (the PRR key's domain)."""
        return f"{self.protocol}|k={self.k}|eps_inf={float(self.epsilon_inf).hex()}"

    @property
    def unary(self) -> bool:
        return self.protocol != "l_grr"

    @functools.cached_property
    def permanent_oracle(self) -> Randomizer:
        """The ε∞ oracle whose exact sampler draws the PRR: k-ary RR, OUE or SUE over 0..k−1."""
        cats = tuple(float(i) for i in range(self.k))
        if self.protocol == "l_grr":
            return KaryRandomizedResponse(self.epsilon_inf, cats)
        if self.protocol == "l_sue":
            return SymmetricUnaryEncoding(self.epsilon_inf, cats)
        return OptimizedUnaryEncoding(self.epsilon_inf, cats)

    @property
    def second_round_cells(self) -> tuple[int, int, int]:
        """(keep, other, b): L-GRR: the IRR keeps the PRR's value iff X < keep (64-bit X), else
        reports one of the k − 1 others (cells of size ``other``), b = 64. Unary encodings: an IRR
        bit is 1 iff its b-bit X < keep (PRR bit 1) or X < other (PRR bit 0) (``unary_coins``)."""
        return _second_round_cells(self.protocol, self.k, self.epsilon_inf, self.epsilon_1, self.calibration)

    def first_round(self) -> tuple[Fraction, Fraction]:
        """(p1, q1), realized: Pr[PRR supports v | v] and | another value."""
        R = self.permanent_oracle
        if isinstance(R, KaryRandomizedResponse):
            a, b = R.cell_sizes
            return Fraction(a, TWO64), Fraction(b, TWO64)
        assert isinstance(R, UnaryEncoding)
        return R.bit_probabilities()

    def second_round(self) -> tuple[Fraction, Fraction]:
        """(p2, q2), realized: Pr[IRR supports x | the PRR supports x] and | it does not."""
        keep, other, b = self.second_round_cells
        return Fraction(keep, 1 << b), Fraction(other, 1 << b)

    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        """(p_s, q_s), realized and exact: p1 p2 + (1 − p1) q2 and q1 p2 + (1 − q1) q2."""
        (p1, q1), (p2, q2) = self.first_round(), self.second_round()
        return p1 * p2 + (1 - p1) * q2, q1 * p2 + (1 - q1) * q2

    @property
    def single_report_ratio(self) -> Fraction:
        """The exact worst ratio of one report: p_s/q_s (L-GRR: the composite is k-ary RR with
        keep p_s and each other value q_s), or the two-bit channel's (unary encodings)."""
        if not self.unary:
            p_s, q_s = self.support_probabilities()
            return p_s / q_s
        (p1, q1), (p2, q2) = self.first_round(), self.second_round()
        return _ue_ratio(p1, q1, p2, q2)

    @property
    def single_report_loss(self) -> float:
        """ln of ``single_report_ratio``: one report's realized privacy loss, ≤ ε1."""
        return log_ratio(self.single_report_ratio)

    @property
    def permanent_ratio(self) -> Fraction:
        """The PRR channel's exact worst ratio: A1/B1 (k-ary RR) or the unary two-bit channel's."""
        p1, q1 = self.first_round()
        if not self.unary:
            return p1 / q1
        return max(p1 * (1 - q1), q1 * (1 - p1)) / min(p1 * (1 - q1), q1 * (1 - p1))

    @property
    def permanent_loss(self) -> float:
        """ln of ``permanent_ratio``: the realized loss of every report of one value together, ≤ ε∞."""
        return log_ratio(self.permanent_ratio)

    @property
    def report_columns(self) -> int:
        """Bytes per unary report (packed bits); L-GRR reports are one int64 index."""
        return (self.k + 7) // 8


@functools.lru_cache(maxsize=512)
def _second_round_cells(protocol: str, k: int, eps_inf: float, eps_1: float, calibration: str) -> tuple[int, int, int]:
    """The IRR's integer cells: the least-noisy cells whose exact composite ratio is ≤ e^{ε1}.

    Each composite ratio is monotone in the cell searched (it grows with the IRR's keep cell, or
    shrinks with its 'other' cell), so bisection on integers finds the extreme feasible cell
    exactly; the reference's closed forms are only compared with it (the tests)."""
    bound = _exp_low(eps_1)
    cats = tuple(float(i) for i in range(k))
    if protocol == "l_grr":
        a1, b1 = KaryRandomizedResponse(eps_inf, cats).cell_sizes
        p1, q1 = Fraction(a1, TWO64), Fraction(b1, TWO64)

        def ratio(other: int) -> Fraction:
            keep = TWO64 - (k - 1) * other
            p2, q2 = Fraction(keep, TWO64), Fraction(other, TWO64)
            if calibration == "paper":  # Arcolezi et al.'s equation: binary-style, ≥ the exact k-ary ratio
                return (p1 * p2 + q1 * q2) / (p1 * q2 + q1 * p2)
            return (p1 * p2 + (1 - p1) * q2) / (q1 * p2 + (1 - q1) * q2)

        # the largest 'other' cell is uniform (ratio 1); find the smallest whose ratio ≤ e^{ε1}
        top = TWO64 // k
        if ratio(top) > bound:  # pragma: no cover - ratio(top) is 1 or just above at k ∤ 2^64
            raise ParameterError(f"l_grr over k={k} at epsilon_1={eps_1!r} is below the 2^-64 resolution of its draws; use a larger epsilon_1")
        other = top - _bisect(0, top - 1, lambda d: ratio(top - d) <= bound)
        keep = TWO64 - (k - 1) * other
        if keep <= other:
            raise ParameterError(f"l_grr over k={k} at epsilon_1={eps_1!r} is below the 2^-64 resolution of its draws; use a larger epsilon_1")
        return keep, other, 64
    R1: UnaryEncoding = SymmetricUnaryEncoding(eps_inf, cats[:2]) if protocol == "l_sue" else OptimizedUnaryEncoding(eps_inf, cats[:2])
    p1, q1 = R1.bit_probabilities()
    for b in (16, 32, 64):
        top = 1 << b
        if protocol == "l_oue":  # p2 = 1/2 exactly; the smallest q2 (fewest false ones) with ratio ≤ e^{ε1}
            half = top >> 1
            if _ue_ratio(p1, q1, Fraction(1, 2), Fraction(0)) <= bound:
                raise ParameterError(
                    f"l_oue cannot spend epsilon_1={eps_1!r} with epsilon_inf={eps_inf!r}: its q2 would be negative "
                    f"(even q2 = 0 gives a one-report loss below epsilon_1); use l_osue, or a smaller epsilon_1/epsilon_inf ratio"
                )
            if _ue_ratio(p1, q1, Fraction(1, 2), Fraction(half - 1, top)) > bound:
                continue
            # ratio decreases in q2: the smallest feasible S0 = half − 1 − (largest d with ratio(half − 1 − d) ≤ bound)
            s0 = half - 1 - _bisect(0, half - 1, lambda d, h=half, t=top: _ue_ratio(p1, q1, Fraction(1, 2), Fraction(h - 1 - d, t)) <= bound)
            cells = (half, s0)
        else:  # symmetric IRR (L-OSUE, L-SUE): the largest S1 > 2^{b−1} with ratio ≤ e^{ε1}, S0 = 2^b − S1
            half = top >> 1
            if _ue_ratio(p1, q1, Fraction(half + 1, top), Fraction(half - 1, top)) > bound:
                continue
            s1 = _bisect(half + 1, top - 1, lambda s, t=top: _ue_ratio(p1, q1, Fraction(s, t), Fraction(t - s, t)) <= bound)
            cells = (s1, top - s1)
        loss = log_ratio(_ue_ratio(p1, q1, Fraction(cells[0], top), Fraction(cells[1], top)))
        if loss >= (1 - 2**-7) * eps_1 or b == 64:  # as ``UnaryEncoding.chunk_bits``: the smallest b that is tight
            return cells[0], cells[1], b
    raise ParameterError(f"{protocol} at epsilon_1={eps_1!r} is below the 2^-64 resolution of its draws; use a larger epsilon_1")


# --- keys: where the memo lives ---


def memo_key(report_key: bytes) -> bytes:
    """The users' memo key from their *long-term* report key: HKDF-SHA256 with its own info string.

    Parameters
    ----------
    report_key : bytes
        The shard's long-term report key (``KEY_BYTES``), never a process life's
        ``life_key(report_key, salt)`` (module docstring: a salted key would redraw every PRR
        at each restart).

    Returns
    -------
    bytes
        ``KEY_BYTES`` bytes, independent (as a PRF output) of every report key derived from
        ``report_key``.

    Examples
    --------
    >>> from ldp.core.rng import derive_key_bytes
    >>> m = memo_key(derive_key_bytes("demo", 1))
    >>> len(m), m == memo_key(derive_key_bytes("demo", 1)), m == derive_key_bytes("demo", 1)
    (32, True, False)
    """
    if not isinstance(report_key, bytes) or len(report_key) != KEY_BYTES:
        raise ParameterError(f"a report key has {KEY_BYTES} bytes, got {report_key!r}"[:200])
    return derive_subkey(report_key, _MEMO_INFO)


@functools.lru_cache(maxsize=256)
def permanent_key(memo: bytes, oracle: LongitudinalOracle, question: str = "") -> bytes:
    """K_PRR: HKDF-SHA256(memo key, info = "ldp.longitudinal PRR v1|" ‖ oracle label ‖ question).

    One key per (memo key, protocol, k, ε∞, question): a PRR is never shared between two
    questions or two budgets (each is charged on its own), and no report key equals it."""
    if not isinstance(memo, bytes) or len(memo) != KEY_BYTES:
        raise ParameterError(f"a memo key has {KEY_BYTES} bytes, got {memo!r}"[:200])
    return derive_subkey(memo, _PRR_INFO + f"{oracle.label}|{question}".encode())


def _indices(oracle: LongitudinalOracle, values: np.ndarray) -> np.ndarray:
    v = np.asarray(values)
    if v.ndim != 1:
        raise ParameterError(f"{oracle.protocol}: values must be a one-dimensional array of indices, got shape {v.shape}")
    if v.size and (v.dtype.kind not in "iu" or int(v.min()) < 0 or int(v.max()) >= oracle.k):
        bad = v.ravel()[0] if v.dtype.kind not in "iu" else v[(v < 0) | (v >= oracle.k)][0]
        raise ParameterError(f"{oracle.protocol}: value {bad!r} is not an integer in [0, {oracle.k})")
    return v.astype(np.int64, copy=False)


def permanent_response(memo: bytes, user_ids: np.ndarray, values: np.ndarray, oracle: LongitudinalOracle, question: str = "") -> np.ndarray:
    """The memoized PRR of each (user, value): a pure function of the memo key, the user id and
    the value (module docstring), drawn by the ε∞ oracle's own exact sampler.

    Parameters
    ----------
    memo : bytes
        The users' memo key (``memo_key``), held on the users' side only.
    user_ids : numpy.ndarray
        int64 user ids (< 2^63), one per value.
    values : numpy.ndarray
        The users' values, integers in [0, k).
    oracle : LongitudinalOracle
        The protocol.
    question : str, default ''
        What is asked (a query's name): separate questions get independent PRRs.

    Returns
    -------
    numpy.ndarray
        L-GRR: int64 indices in [0, k); unary encodings: packed bits, uint8 rows of
        ``oracle.report_columns`` bytes.

    Examples
    --------
    >>> import numpy as np
    >>> from ldp.core.rng import derive_key_bytes
    >>> o = LongitudinalOracle("l_grr", 16, 2.0, 1.0)
    >>> m = memo_key(derive_key_bytes("demo", 1))
    >>> a = permanent_response(m, np.arange(5), np.array([3, 3, 3, 3, 3]), o)
    >>> bool((a == permanent_response(m, np.arange(5), np.array([3, 3, 3, 3, 3]), o)).all())  # memoized
    True
    """
    idx = _indices(oracle, values)
    users = np.asarray(user_ids, dtype=np.int64)
    if users.shape != idx.shape:
        raise ParameterError(f"{oracle.protocol}: {len(users)} user ids for {len(idx)} values")
    draws = UserRandomness(permanent_key(memo, oracle, question), users, idx)  # counter = the value: one coin per (user, value)
    return _prr_sample(oracle, idx, draws)


def _prr_sample(oracle: LongitudinalOracle, idx: np.ndarray, draws: Draws) -> np.ndarray:
    out = oracle.permanent_oracle.sample(idx.astype(np.float64), draws)
    return np.asarray(out).astype(np.int64) if not oracle.unary else np.asarray(out, dtype=np.uint8)


def instantaneous_response(prr: np.ndarray, draws: Draws, oracle: LongitudinalOracle) -> np.ndarray:
    """One report: a fresh IRR of each user's PRR, from the report's own draws.

    Parameters
    ----------
    prr : numpy.ndarray
        ``permanent_response``'s output for these users.
    draws : Draws
        The report's randomness: ``UserRandomness(life key, users, ledger nonces)`` on the users'
        side (a fresh nonce per accepted charge), or a seeded ``RandomSource`` stream in tests.
    oracle : LongitudinalOracle
        The protocol.

    Returns
    -------
    numpy.ndarray
        L-GRR: the exact k-ary RR (``rr_draw``, 64-bit cells ``second_round_cells``) of the PRR's
        index, int64; unary encodings: packed bits, bit j = 1[X_j < S1 if PRR bit j else S0], X_j
        the b-bit values of ``ldp.core.frequency_oracles.unary_coins`` (top 16 bits first).
    """
    keep, other, b = oracle.second_round_cells
    if not oracle.unary:
        x = np.asarray(prr, dtype=np.int64)
        return rr_draw(x, draws.bits(0), keep, other)
    w = np.asarray(prr, dtype=np.uint8)
    k = oracle.k
    if w.ndim != 2 or w.shape[1] != oracle.report_columns:
        raise ParameterError(f"{oracle.protocol}: a PRR is a row of {oracle.report_columns} bytes, got shape {w.shape}")
    return unary_coins(draws, k, b, keep, other, chosen=w)  # the PRR's bit picks each coin's threshold


# --- the aggregator's estimator ---


def support_counts(reports: np.ndarray, oracle: LongitudinalOracle) -> np.ndarray:
    """C_v: how many reports support each value (int64, shape (k,))."""
    r = np.asarray(reports)
    if oracle.unary:
        if r.ndim != 2 or r.shape[1] != oracle.report_columns:
            raise ParameterError(f"{oracle.protocol}: reports must be rows of {oracle.report_columns} bytes, got shape {r.shape}")
        return bit_column_counts(r.astype(np.uint8, copy=False), oracle.k)
    return np.bincount(_indices(oracle, r.ravel()), minlength=oracle.k).astype(np.int64)


def estimate_frequencies(reports: np.ndarray, oracle: LongitudinalOracle) -> np.ndarray:
    """Unbiased f̂_v = (C_v/n − q_s)/(p_s − q_s), with the realized composite (p_s, q_s).

    Arcolezi et al. 2022's estimator (the single-round one with q replaced by q_s and p − q by
    (p1 − q1)(p2 − q2) = p_s − q_s), on this module's realized probabilities.

    Examples
    --------
    >>> import numpy as np
    >>> from ldp.core.rng import RandomSource, derive_key_bytes
    >>> o = LongitudinalOracle("l_osue", 4, 4.0, 2.0)
    >>> users = np.arange(100_000)
    >>> values = users % 4
    >>> prr = permanent_response(memo_key(derive_key_bytes("demo", 2)), users, values, o)
    >>> y = instantaneous_response(prr, RandomSource(0).for_request("irr", 0, users), o)
    >>> bool(np.abs(estimate_frequencies(y, o) - 0.25).max() < 0.02)
    True
    """
    n = len(np.asarray(reports))
    if n == 0:
        raise ParameterError(f"{oracle.protocol}: no reports to estimate from")
    p_s, q_s = (float(x) for x in oracle.support_probabilities())
    return (support_counts(reports, oracle) / n - q_s) / (p_s - q_s)


def frequency_variance(f: np.ndarray | float, n: int, oracle: LongitudinalOracle, periods: int = 1) -> np.ndarray:
    """The exact variance of ``estimate_frequencies`` (or of its mean over ``periods`` reports of
    the same memoized population) for n users, a fraction f of whom hold v.

    Each user's support indicator for v in one report is Bernoulli: given the PRR's support bit
    s ~ Bernoulli(r) (r = p1 if the user holds v, else q1) it is Bernoulli(p2 if s else q2), fresh
    per report. Its mean over T reports has, by the law of total variance,
    a(r) = (p2 − q2)² r(1 − r) + [r p2(1 − p2) + (1 − r) q2(1 − q2)]/T, and users are independent:
    Var = [f·a(p1) + (1 − f)·a(q1)] / (n (p_s − q_s)²). At T = 1, a(r) = σ(1 − σ) with
    σ = r p2 + (1 − r) q2: the single-round fixed-population form. As T → ∞ it tends to the PRR's
    floor (p2 − q2)² r(1 − r): memoization is why averaging periods cannot undo ε∞.
    """
    n = require_integer("n", n, 1)
    periods = require_integer("periods", periods, 1)
    (p1, q1), (p2, q2) = (tuple(float(x) for x in pair) for pair in (oracle.first_round(), oracle.second_round()))
    p_s, q_s = (float(x) for x in oracle.support_probabilities())

    def a(r: float) -> float:
        return (p2 - q2) ** 2 * r * (1 - r) + (r * p2 * (1 - p2) + (1 - r) * q2 * (1 - q2)) / periods

    f = np.asarray(f, dtype=np.float64)
    return (f * a(p1) + (1 - f) * a(q1)) / (n * (p_s - q_s) ** 2)


# --- L-ADP: the adaptive choice between L-GRR and L-OSUE ---


def _ideal_rounds(protocol: str, k: int, eps_inf: float, eps_1: float, calibration: str) -> tuple[float, float, float, float]:
    """(p1, q1, p2, q2) by the reference's closed forms (§1.2), written with a = e^{−ε∞},
    b = e^{−ε1} so that every ε up to 2^10 stays finite."""
    a, b = math.exp(-eps_inf), math.exp(-eps_1)
    if protocol == "l_osue":  # OUE at ε∞, then SUE with p2 = (AB − 1)/((B + 1)(A − 1))
        p1, q1 = 0.5, a / (1 + a)
        p2 = (1 - a * b) / ((1 + b) * (1 - a))
        return p1, q1, p2, 1 - p2
    p1 = 1 / (1 + (k - 1) * a)
    q1 = a * p1
    if calibration == "paper":  # p2 = (AB − 1)/(AB + (k−1)A − (k−1)B − 1), divided through by AB
        p2 = (1 - a * b) / (1 + (k - 1) * b - (k - 1) * a - a * b)
    else:  # tight: p_s/q_s = e^{ε1} with q2 = (1 − p2)/(k − 1), a linear equation in p2, divided by B
        p2 = ((1 - q1) - b * (1 - p1)) / ((k - 1) * (b * p1 - q1) - b * (1 - p1) + (1 - q1))
    return p1, q1, p2, (1 - p2) / (k - 1)


def approximate_variance(protocol: str, k: int, epsilon_inf: float, epsilon_1: float, calibration: str = "paper") -> float:
    """V*: the variance of one user's f̂_v at f_v = 0 (n = 1) for a two-level protocol,
    q_s(1 − q_s)/[(p1 − q1)²(p2 − q2)²] with q_s = q1 p2 + (1 − q1) q2, at the *ideal* (closed-form)
    p1, q1, p2, q2 of the reference (§1.2; Arcolezi et al. 2022; multi-freq-ldpy's ``VAR_Long_Pure``
    at f = 0, where its f-coefficient, a discrepancy of the reference, does not enter).

    *Checked (verify):* it equals this module's exact ``frequency_variance(0, 1, oracle)`` on the
    realized cells, within their grid (tests/core/test_longitudinal_adp.py).

    Parameters
    ----------
    protocol : str
        'l_grr' or 'l_osue' (``ADAPTIVE_PROTOCOLS``).
    k : int
        The number of values, in [2, 2^16].
    epsilon_inf, epsilon_1 : float
        ε∞ and ε1 (0 < ε1 < ε∞).
    calibration : str, default 'paper'
        L-GRR's p2 ('paper' or 'tight', as ``LongitudinalOracle``); L-OSUE ignores it.

    Examples
    --------
    >>> round(approximate_variance("l_grr", 2, 4.0, 2.0), 4), round(approximate_variance("l_osue", 2, 4.0, 2.0), 4)
    (0.181, 0.7241)
    """
    if protocol not in ADAPTIVE_PROTOCOLS:
        raise ParameterError(f"approximate_variance: protocol must be one of {list(ADAPTIVE_PROTOCOLS)}, got {protocol!r}")
    if calibration not in CALIBRATIONS:
        raise ParameterError(f"longitudinal calibration must be one of {list(CALIBRATIONS)}, got {calibration!r}")
    k = require_integer(f"{protocol} k", k, 2, MAX_K, "[2, 2^16]")
    eps_inf = require_epsilon(epsilon_inf, name="epsilon_inf")
    eps_1 = require_epsilon(epsilon_1, name="epsilon_1")
    if not eps_1 < eps_inf:
        raise ParameterError(f"{protocol} needs epsilon_1 < epsilon_inf, got epsilon_1={eps_1!r}, epsilon_inf={eps_inf!r}")
    p1, q1, p2, q2 = _ideal_rounds(protocol, k, eps_inf, eps_1, calibration)
    q_s = q1 * p2 + (1 - q1) * q2
    return q_s * (1 - q_s) / ((p1 - q1) ** 2 * (p2 - q2) ** 2)


def choose_longitudinal(k: int, epsilon_inf: float, epsilon_1: float, calibration: str = "paper") -> str:
    """L-ADP: 'l_grr' if V*(L-GRR) ≤ V*(L-OSUE) (``approximate_variance``; the tie to L-GRR, as the
    authors' library), else 'l_osue'. A function of public parameters only, never of data.

    Examples
    --------
    >>> [choose_longitudinal(k, 2.0, 1.0) for k in (2, 4, 16, 256)]
    ['l_grr', 'l_grr', 'l_osue', 'l_osue']
    """
    v_grr = approximate_variance("l_grr", k, epsilon_inf, epsilon_1, calibration)
    return "l_grr" if v_grr <= approximate_variance("l_osue", k, epsilon_inf, epsilon_1, calibration) else "l_osue"


# --- accounting: what a sequence of reports costs ---


def longitudinal_charges(values: Iterable[Hashable], epsilon_inf: float, epsilon_1: float) -> np.ndarray:
    """The charge of each report of one user's value sequence (one value per period), exact.

    Proven bounds, per distinct value v reported m_v times: one report alone is ε1-LDP; any
    number of reports of v together are ε∞-LDP (post-processing of v's PRR). Reports of distinct
    values use independent PRRs and fresh IRR coins, so their losses add. Hence the charge made
    before each report leaves:

    - the first report of a value: ε1;
    - its second report: ε∞ − ε1 (the value's total becomes ε∞);
    - every later report of it: 0.

    The total is Σ_v (ε1 if m_v = 1 else ε∞) ≤ d·ε∞ for d distinct values. m_v·ε1 is *not*
    claimed for 2 ≤ m_v: the reports of one value share its PRR, and composition needs fresh
    coins. What it bounds is the values, given *when* the value changed: the pattern of changes
    is not protected (docs/longitudinal.md).

    Parameters
    ----------
    values : iterable of hashable
        The user's value in each period, in order.
    epsilon_inf : float
        ε∞, the budget of every report of one value together.
    epsilon_1 : float
        ε1, one report's budget (ε1 < ε∞).

    Returns
    -------
    numpy.ndarray
        float64, one charge per period; its sum is the user's longitudinal spend.

    Examples
    --------
    >>> longitudinal_charges([3, 3, 3, 5, 3, 7], 4.0, 1.0).tolist()
    [1.0, 3.0, 0.0, 1.0, 0.0, 1.0]
    """
    eps_inf = require_epsilon(epsilon_inf, name="epsilon_inf")
    eps_1 = require_epsilon(epsilon_1, name="epsilon_1")
    if not eps_1 < eps_inf:
        raise ParameterError(f"longitudinal charges need epsilon_1 < epsilon_inf, got epsilon_1={eps_1!r}, epsilon_inf={eps_inf!r}")
    seen: dict[Hashable, int] = {}
    out = []
    for v in values:
        m = seen.get(v, 0)
        out.append(eps_1 if m == 0 else (eps_inf - eps_1 if m == 1 else 0.0))
        seen[v] = m + 1
    return np.asarray(out, dtype=np.float64)


def decode_repeated(reports: Sequence[np.ndarray], oracle: LongitudinalOracle, rng: np.random.Generator) -> np.ndarray:
    """The aggregator's optimal (MAP, uniform prior) guess of each user's value from T reports of it.

    For every protocol here the posterior of v is increasing in c_v, the number of the T reports
    that support v (L-GRR: Σ_x' P(x'|v) Π_t P(y_t|x') ∝ q1·Z + (p1 − q1)(p2/q2)^{c_v}; unary
    encodings: the factor of bit v is (p1 r_v + 1 − p1)/(q1 r_v + 1 − q1) with r_v increasing in
    c_v, and p1 > q1), so the MAP guess is a most-supported value, ties broken uniformly (``rng``,
    the aggregator's own randomness). With a memoized PRR its accuracy is at most
    e^{ε∞}/(e^{ε∞} + k − 1), for any T (any ε∞-LDP view of a uniform value).

    Parameters
    ----------
    reports : sequence of numpy.ndarray
        T arrays of reports, one per period, users in the same order.
    oracle : LongitudinalOracle
        The protocol.
    rng : numpy.random.Generator
        For the ties.

    Returns
    -------
    numpy.ndarray
        int64, one guess per user.
    """
    if not reports:
        raise ParameterError("decode_repeated needs at least one period of reports")
    n = len(reports[0])
    counts = np.zeros((n, oracle.k), dtype=np.int32)
    for r in reports:
        if oracle.unary:
            counts += np.unpackbits(np.asarray(r, dtype=np.uint8), axis=1, count=oracle.k)
        else:
            counts[np.arange(n), np.asarray(r, dtype=np.int64)] += 1
    noise = rng.random((n, oracle.k))  # uniform tie-breaking among the most supported values
    best = counts == counts.max(axis=1, keepdims=True)
    return np.argmax(np.where(best, noise, -1.0), axis=1).astype(np.int64)


# --- exact audits of the realized samplers (small instances, the unchanged ``verify_exact``) ---


class _Offset:
    """Draw j of the view = draw ``first + j`` of the given randomness."""

    def __init__(self, draws: Draws, first: int) -> None:
        self.draws, self.first, self.users = draws, first, draws.users

    def bits(self, draw: int = 0) -> np.ndarray:
        return self.draws.bits(self.first + draw)

    def uniform(self, draw: int = 0) -> np.ndarray:  # pragma: no cover - the samplers read bits only
        return self.draws.uniform(self.first + draw)


class _Chunked:
    """Unary encodings on the audit's terms (as ``ldp.core.audit_structure``): bit j's b-bit X_j
    is the top b bits of virtual draw ``first + j``, placed where the real sampler reads it
    (``unary_word``: its top 16 bits in a main draw, the rest in the fallback stream). A fixed
    relabelling of the randomness, so every virtual draw's cells are intervals and
    ``verify_exact`` can enumerate them (the fallback bits included)."""

    def __init__(self, virtual: Draws, first: int, b: int, k: int) -> None:
        self.virtual, self.first, self.b, self.k, self.users = virtual, first, b, k, virtual.users

    def bits(self, draw: int = 0) -> np.ndarray:
        return unary_word(draw, self.k, self.b, lambda j: self.virtual.bits(self.first + j) >> np.uint64(64 - self.b))

    def uniform(self, draw: int = 0) -> np.ndarray:  # pragma: no cover - the samplers read bits only
        raise NotImplementedError


def _grr_starts(a: int, b: int, k: int) -> np.ndarray:
    return np.array([0] + [a + j * b for j in range(k - 1)], dtype=np.uint64)


@dataclass(frozen=True)
class RepeatedReports(Randomizer):
    """T reports of one unchanged value, as one randomizer with scalar outputs (the index of the
    T-tuple of reports), for ``verify_exact``: its ε is ε∞ and its realized loss must be ≤ ε∞ for
    every T. With ``memoized=False`` (the broken variant: a PRR redrawn for every report) each
    report gets its own PRR and the loss grows like T·ε1. T = 1 is the one-report channel
    (``OneReportChannel``, whose ε is ε1). Small instances only: L-GRR with k^T ≤ 4096 outputs,
    unary encodings with k ≤ 3 and T = 1.

    Draws: L-GRR reads the PRR from draw 0 and report t's IRR from draw 1 + t (memoized), or PRR t
    from draw 2t and IRR t from 2t + 1 (not memoized). Unary encodings read virtual draw j for
    PRR bit j and k + j for IRR bit j (``_Chunked``). The samplers are the module's own
    (``_prr_sample``, ``instantaneous_response``)."""

    oracle: LongitudinalOracle
    periods: int = 1
    memoized: bool = True
    kind: ClassVar[str] = "longitudinal reports"

    def __post_init__(self) -> None:
        o = self.oracle
        if o.unary and (o.k > 3 or self.periods != 1):
            raise ParameterError("the enumerated audit of a unary encoding takes k ≤ 3 and one period")
        if not o.unary and o.k**self.periods > 4096:
            raise ParameterError(f"l_grr with k={o.k} and {self.periods} periods has {o.k**self.periods} > 4096 outputs; enumerate a smaller instance")

    @property
    def epsilon(self) -> float:  # type: ignore[override]
        return self.oracle.epsilon_1 if self.periods == 1 else self.oracle.epsilon_inf

    def input_domain(self) -> np.ndarray:
        return np.arange(self.oracle.k, dtype=np.float64)

    def output_domain(self) -> np.ndarray:
        o = self.oracle
        return np.arange((1 << o.k) if o.unary else o.k**self.periods, dtype=np.float64)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        o = self.oracle
        idx = np.asarray(inputs, dtype=np.float64).astype(np.int64)
        if o.unary:
            b1 = o.permanent_oracle.chunk_bits  # type: ignore[attr-defined]
            b2 = o.second_round_cells[2]
            prr = _prr_sample(o, idx, _Chunked(randomness, 0, b1, o.k))
            y = instantaneous_response(prr, _Chunked(randomness, o.k, b2, o.k), o)
            bits = np.unpackbits(y, axis=1, count=o.k).astype(np.int64)
            return (bits << np.arange(o.k)).sum(axis=1).astype(np.float64)  # bit j of the index = report bit j
        code = np.zeros(len(idx), dtype=np.int64)
        prr = _prr_sample(o, idx, randomness)
        for t in range(self.periods):
            if self.memoized:
                y = instantaneous_response(prr, _Offset(randomness, 1 + t), o)
            else:
                y = instantaneous_response(_prr_sample(o, idx, _Offset(randomness, 2 * t)), _Offset(randomness, 2 * t + 1), o)
            code = code * o.k + y
        return code.astype(np.float64)

    def _table(self, u: int) -> list[int]:
        """Exact masses of every output index for input u (denominators: ``_denominator``)."""
        o = self.oracle
        if o.unary:
            b1, b2 = o.permanent_oracle.chunk_bits, o.second_round_cells[2]  # type: ignore[attr-defined]
            keep, other, _ = o.second_round_cells
            t_in, t_out = o.permanent_oracle.thresholds  # type: ignore[attr-defined]
            one = [(t_in if j == u else t_out) * keep + ((1 << b1) - (t_in if j == u else t_out)) * other for j in range(o.k)]
            full = 1 << (b1 + b2)
            return [math.prod(one[j] if (w >> j) & 1 else full - one[j] for j in range(o.k)) for w in range(1 << o.k)]
        a1, b1_ = o.permanent_oracle.cell_sizes  # type: ignore[attr-defined]
        keep, other, _ = o.second_round_cells
        prr = [a1 if x == u else b1_ for x in range(o.k)]
        out = []
        for code in range(o.k**self.periods):
            ys = [(code // o.k ** (self.periods - 1 - t)) % o.k for t in range(self.periods)]
            if self.memoized:
                out.append(sum(prr[x] * math.prod(keep if y == x else other for y in ys) for x in range(o.k)))
            else:
                out.append(math.prod(sum(prr[x] * (keep if y == x else other) for x in range(o.k)) for y in ys))
        return out

    def _denominator(self) -> int:
        o = self.oracle
        if o.unary:
            return 1 << (o.k * (o.permanent_oracle.chunk_bits + o.second_round_cells[2]))  # type: ignore[attr-defined]
        draws = self.periods + 1 if self.memoized else 2 * self.periods
        return 1 << (64 * draws)

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        u = np.asarray(inputs, dtype=np.float64).ravel().astype(np.int64)
        masses = np.empty((len(u), len(self.output_domain())), dtype=object)
        for i, x in enumerate(u):
            masses[i] = self._table(int(x))
        return self.output_domain(), masses, self._denominator()

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        uu, ww = np.broadcast_arrays(np.asarray(u, dtype=np.float64), np.asarray(w, dtype=np.float64))
        den = self._denominator()
        tables = {int(x): self._table(int(x)) for x in np.unique(uu)}
        flat = [log_ratio(Fraction(tables[int(a)][int(b)], den)) if tables[int(a)][int(b)] else -math.inf for a, b in zip(uu.ravel(), ww.ravel())]
        return np.asarray(flat, dtype=np.float64).reshape(uu.shape)

    def draw_cells(self, u: float) -> list[np.ndarray]:
        o = self.oracle
        keep, other, b2 = o.second_round_cells
        if o.unary:
            b1 = o.permanent_oracle.chunk_bits  # type: ignore[attr-defined]
            t_in, t_out = o.permanent_oracle.thresholds  # type: ignore[attr-defined]
            prr = [np.array([0, (t_in if j == int(u) else t_out) << (64 - b1)], dtype=np.uint64) for j in range(o.k)]
            irr = np.array(sorted({0, other << (64 - b2), keep << (64 - b2)}), dtype=np.uint64)
            return prr + [irr] * o.k
        a1, b1_ = o.permanent_oracle.cell_sizes  # type: ignore[attr-defined]
        first, second = _grr_starts(a1, b1_, o.k), _grr_starts(keep, other, o.k)
        if self.memoized:
            return [first] + [second] * self.periods
        return [first, second] * self.periods


def OneReportChannel(oracle: LongitudinalOracle) -> RepeatedReports:  # noqa: N802 - reads as a class
    """One report (PRR then IRR) as a randomizer at ε1, for ``verify_exact`` (small instances)."""
    return RepeatedReports(oracle, 1, True)


# --- the registered kinds: l_grr, l_oue, l_osue, l_sue over any query with finite values ---

# What a memoized report costs after its question's first: the smallest ε a ledger takes. Every
# report of one unchanged value together is ε∞-LDP (post-processing of its PRR), which the first
# report paid; this charge only advances the user's nonce (a fresh IRR coin) and is conservative.
MEMO_REPEAT_EPSILON = 2.0**-30


def memo_ledger_identity(data_identity: str, memo: bytes, memo_label: str) -> str:
    """The identity of the ledger that records which users have paid ε∞ for one memoized question.

    A pure function of the data's identity, the memo key (by its SHA-256, never the key itself)
    and the randomizer's ``memo_label`` (what fixes its permanent responses: protocol, k, ε∞, the
    question): the same PRRs ⇔ the same identity. So a new memo key (a process life whose report
    key is fresh, ``secure`` specs) or another question is a new ledger, unpaid: **the charge
    follows the coin** (a PRR drawn anew is charged ε∞ anew).

    A randomizer is *memoized* when it has a ``memo_label`` (str) and keys its permanent coins by
    ``UserRandomness.memo`` and that label: ``ldp.local.shard.Shard`` then charges its ``epsilon``
    for a user's first report of the label and ``MEMO_REPEAT_EPSILON`` after it."""
    import hashlib

    digest = hashlib.sha256(memo + b"|" + memo_label.encode()).hexdigest()[:32]
    return f"{data_identity}|memo|{digest}"


@dataclass(frozen=True)
class MemoizedFrequencyOracle(FrequencyOracle):
    """A longitudinal oracle as a randomizer a round can ask for: ``l_grr``, ``l_oue``, ``l_osue``
    or ``l_sue`` at ε = ε∞ with ``params={"epsilon_1": ε1}`` (default ε∞/2) and
    ``"calibration"`` (``paper``, the default, or ``tight``; ``LongitudinalOracle``).

    Each report is ``instantaneous_response(permanent_response(memo, user, value), draws)``: the
    PRR from the users' memo key (``UserRandomness.memo``, which only a shard holds: the
    aggregator builds this randomizer to check reply formats and never samples it), the IRR from
    the report's own draws. Reports are those of the ε∞ oracle: category values (L-GRR) or
    packed bits (the unary encodings).

    **What the ledger charges** (``ldp.local.shard.Shard``, data-independent as every charge must
    be: a refusal must not depend on a value): ε∞ for a user's first report of this question
    (``memo_ledger_identity`` remembers who paid, in the same store, committed with the charge),
    then ``MEMO_REPEAT_EPSILON`` per report. That is RAPPOR's statement, exactly: every report
    of an unchanged value, in any number of rounds and sessions, is ε∞-LDP; a value that
    changes is *not* protected beyond it (each new value has its own PRR; docs/longitudinal.md,
    ``longitudinal_charges`` gives what a change really costs). The question is the query (its
    JSON) with the protocol, k and ε∞: asking another query, or at another ε∞, is another
    question and is charged ε∞ again.

    Exact audits: ``OneReportChannel`` (one report ≤ ε1) and ``RepeatedReports`` (T reports of a
    value ≤ ε∞), on the module's own samplers.
    """

    kind: ClassVar[str] = ""
    epsilon: float
    epsilon_1: float
    categories: tuple[float, ...]
    calibration: str = "paper"
    question: str = ""

    def __post_init__(self) -> None:
        cats = tuple(sorted(float(c) for c in self.categories))
        if len(cats) < 2 or len(set(cats)) != len(cats) or not all(math.isfinite(c) for c in cats):
            raise ParameterError(f"{self.kind} needs k ≥ 2 distinct finite categories, got {self.categories[:8]}")
        object.__setattr__(self, "categories", cats)
        self.oracle  # noqa: B018  (validates ε∞, ε1, k and the calibration)

    @functools.cached_property
    def oracle(self) -> LongitudinalOracle:
        return LongitudinalOracle(self.kind, len(self.categories), self.epsilon, self.epsilon_1, self.calibration)

    @property
    def memo_label(self) -> str:
        """What fixes this randomizer's PRRs (``memo_ledger_identity``): the protocol, k, ε∞ and the question."""
        return f"{self.oracle.label}|{self.question}"

    @property
    def report_columns(self) -> int | None:  # type: ignore[override]
        return self.oracle.report_columns if self.oracle.unary else None

    def report_domains(self) -> tuple[np.ndarray | None, ...]:
        """Unary encodings: every byte free but the last's padding bits (zero), as the ε∞ oracle's."""
        pad = 8 * self.oracle.report_columns - self.k
        last = None if pad == 0 else np.arange(0, 256, 1 << pad)
        return (None,) * (self.oracle.report_columns - 1) + (last,)

    def output_domain(self) -> np.ndarray | None:
        return None if self.oracle.unary else np.asarray(self.categories)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        memo = getattr(randomness, "memo", None)
        if memo is None:
            raise LDPError(f"{self.kind}: a memoized report needs the users' memo key, which only a shard holds (UserRandomness.memo)")
        idx = self._index(np.asarray(inputs))
        prr = permanent_response(memo, np.asarray(randomness.users, dtype=np.int64), idx, self.oracle, self.question)
        out = instantaneous_response(prr, randomness, self.oracle)
        return out if self.oracle.unary else np.asarray(self.categories)[out]

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        """ln Pr[one report w | value u], the composite channel's (PRR then IRR): k-ary RR with
        keep p_s and each other q_s (L-GRR); independent bits, 1 w.p. p_s at u and q_s elsewhere
        (unary encodings; w a packed row)."""
        p_s, q_s = (float(x) for x in self.oracle.support_probabilities())
        if not self.oracle.unary:
            return np.where(np.asarray(u) == np.asarray(w), math.log(p_s), math.log(q_s))
        bits = np.unpackbits(np.asarray(w, dtype=np.uint8), axis=-1, count=self.k).astype(bool)
        at_u = np.asarray(self.categories) == np.asarray(u, dtype=np.float64)[..., None]
        p = np.where(at_u, p_s, q_s)
        return np.log(np.where(bits, p, 1 - p)).sum(axis=-1)

    def support_fractions(self) -> tuple[Fraction, Fraction]:
        return self.oracle.support_probabilities()

    def support_counts(self, reports: np.ndarray) -> np.ndarray:
        if self.oracle.unary:
            return support_counts(reports, self.oracle)
        return category_counts(np.asarray(reports, dtype=np.float64).ravel(), self.categories)


class LongitudinalGRR(MemoizedFrequencyOracle):
    kind: ClassVar[str] = "l_grr"
    report_dtype: ClassVar[type[np.generic]] = np.float64


class LongitudinalOUE(MemoizedFrequencyOracle):
    kind: ClassVar[str] = "l_oue"
    report_dtype: ClassVar[type[np.generic]] = np.uint8


class LongitudinalOSUE(MemoizedFrequencyOracle):
    kind: ClassVar[str] = "l_osue"
    report_dtype: ClassVar[type[np.generic]] = np.uint8


class LongitudinalSUE(MemoizedFrequencyOracle):
    kind: ClassVar[str] = "l_sue"
    report_dtype: ClassVar[type[np.generic]] = np.uint8


_KIND_CLASSES: dict[str, type[MemoizedFrequencyOracle]] = {c.kind: c for c in (LongitudinalGRR, LongitudinalOUE, LongitudinalOSUE, LongitudinalSUE)}


@register_randomizer("l_grr", params=("epsilon_1", "calibration"))
@register_randomizer("l_oue", params=("epsilon_1", "calibration"))
@register_randomizer("l_osue", params=("epsilon_1", "calibration"))
@register_randomizer("l_sue", params=("epsilon_1", "calibration"))
@register_randomizer("l_adp", params=("epsilon_1", "calibration"))
def build_memoized(spec: SpecView, query: Query) -> Randomizer:
    """The memoized oracle of an ``l_grr`` / ``l_oue`` / ``l_osue`` / ``l_sue`` spec over the query's
    finite values; the question its PRRs are keyed by is the query's JSON. ``l_adp`` is built as
    ``choose_longitudinal(k, ε∞, ε1, calibration)``'s kind (L-ADP): that kind's randomizer, its
    memo label and its charge, exactly."""
    import json

    check_params(spec.kind, spec.params)
    values = query.values()
    if values is None:
        raise ParameterError(f"{spec.kind} needs a query with a small finite set of values; {spec.query.name!r} has none")
    cats = tuple(values.tolist()) if len(values) >= 2 else (float(values[0]), float(values[0]) + 1.0)
    eps_1 = spec.params.get("epsilon_1", spec.epsilon / 2)
    if isinstance(eps_1, bool) or not isinstance(eps_1, int | float):
        raise ParameterError(f"{spec.kind} epsilon_1 must be a number, got {eps_1!r}")
    calibration = spec.params.get("calibration", "paper")
    question = json.dumps(spec.query.to_json(), sort_keys=True, allow_nan=True)
    kind = spec.kind
    if kind == "l_adp":  # resolved here, from public parameters: the chosen kind in every respect
        if calibration not in CALIBRATIONS:
            raise ParameterError(f"longitudinal calibration must be one of {list(CALIBRATIONS)}, got {calibration!r}")
        kind = choose_longitudinal(len(cats), spec.epsilon, float(eps_1), str(calibration))
    return _KIND_CLASSES[kind](spec.epsilon, float(eps_1), cats, str(calibration), question)
