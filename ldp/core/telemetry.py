"""Microsoft's telemetry mechanisms (Ding, Kulkarni & Yekhanin, "Collecting Telemetry Data
Privately", NeurIPS 2017, pp. 3571–3580; arXiv 1712.01524), exact on integer cells, with the
memo kept on the users' side.

- **1BitMean** (``OneBitMean``): a counter x ∈ [0, m] is reported as one bit, 1 with probability
  1/(e^ε+1) + (x/m)·(e^ε−1)/(e^ε+1); the mean estimate is (1/n)·Σ m·(b_i(e^ε+1) − 1)/(e^ε−1).
  It is **not new code**: this is Duchi et al.'s one-dimensional mechanism, already the
  project's ``pm_rr`` (``ldp.core.plus_minus.PlusMinusRandomizedResponse``; ``ldp.core.mean_estimation``
  says so too) applied to u = x − m/2 with bound b = m/2. Its coin is pm_rr's: Pr[+] =
  1/2 + u(e^ε−1)/(2b(e^ε+1)) = 1/(e^ε+1) + (x/m)(e^ε−1)/(e^ε+1), and the bit is "report is +".
  The paper's estimator m(b(e^ε+1) − 1)/(e^ε−1) equals m/2 + M(2b − 1) with M = b(e^ε+1)/(e^ε−1)
  pm_rr's magnitude (checked in tests/core/test_telemetry.py); ``OneBitMean.estimate`` uses the
  *realized* M = (m/2)·2^53/(T_hi − T_lo), so it stays unbiased whatever the rounding of the cells.
- **dBitFlip** (``DBitFlip``): histogram over k buckets. A user draws d distinct buckets
  j_1..j_d uniformly without replacement and sends (j_p, b_p) for each, b_p = 1 w.p. e^{ε/2}/(e^{ε/2}+1)
  if its bucket is j_p, else w.p. 1/(e^{ε/2}+1). Estimator ĥ(v) = (k/(nd))·Σ_{i: v sampled}
  (b_{i,v}(e^{ε/2}+1) − 1)/(e^{ε/2} − 1) (= (k/(nd))·(C_v − q·N_v)/(p − q) with the realized p, q).
- **dBitFlipPM** (``DBitFlipPM``): permanent memoization. The sample is drawn once per user; the d
  response bits are a fixed function of the user's *state* (which sampled bucket it is in, or
  "none of them": d + 1 states).
- **α-point rounding with memoized 1BitMean** (``AlphaRoundedOneBitMean``): integer counters
  x ∈ {0, …, m} and a step s dividing m; each user draws α ∈ {0, …, s − 1} once and rounds
  x = L + r (L = s⌊x/s⌋, 0 ≤ r < s) to L + s if r + α ≥ s, else to L (the "α-point" rule), then
  reports the memoized 1BitMean bit of the rounded value (one bit per grid point 0, s, …, m).

Checked against the paper (the "(verify)" items of the shared reference, §1.3 and §6.3):

- 1BitMean's probability, estimator and ε-LDP: as above; the ε is exact on the realized cells
  (``ldp.core.audit.verify_exact`` on ``OneBitMean``; the two extreme inputs' probabilities are
  T_lo/2^53 and T_hi/2^53 with T_hi/T_lo ≤ e^ε, ``one_bit_mean_extremes``).
- dBitFlip's bit probabilities at ε/2 and its estimator agree with the paper and with
  multi-freq-ldpy's ``dBitFlipPM.py`` (its client and aggregator use the same formulas); the
  fixed-population variance (the reference's, re-derived with the realized p, q) is
  ``DBitFlip.frequency_variance``. The paper's error bound's constants were *not* re-checked
  (only the exact variance is used here).
- α: the reference wrote α continuous in [0, 1) with s intervals and asked whether the paper
  takes α from s discrete levels. Here s is the paper's *discretization granularity* (the grid
  step, so the grid has m/s + 1 points) and α is uniform on the s integers {0, …, s − 1}, rounding
  up iff x + α ≥ L + s: for integer counters this makes the rounding exactly unbiased
  (Pr[up] = r/s, E[x̃] = x), which is the form of a public reimplementation of the paper's α-point
  rounding ("each user gets a custom scale in [0, s)", rounding up iff x + a ≥ R) and of Microsoft's
  patent US 10,776,242 (an "upward-rounding window smaller than the segment size" added to the
  value). α is drawn here from one 64-bit word, α = ⌊X·s/2^64⌋: exactly uniform when s is a
  power of two, else within s/2^64 of uniform (it only biases the estimate, by ≤ s²/2^64 per user,
  ``alpha_masses``; it never touches privacy, α being independent of the data).
- dBitFlipPM's guarantee: the form below (ε per distinct state, for histories with the same
  pattern of states; nothing for the pattern itself); the paper states its theorem through users'
  "behaviour patterns" (histories that move through states in the same pattern), the same
  partition condition. ``memo_transcript_loss`` computes it exactly for α-rounded 1BitMean; for
  dBitFlipPM the same argument holds given the sample (each state's bits are an independent
  dBitFlip response), and the tests check it by attack.

What ε protects over time, and what it does not (docs/telemetry.md):

- **Protected: a value that stays put.** Any number of reports made while the memo state (the
  rounded value; dBitFlipPM: the bucket's state) is unchanged are a deterministic function of
  one ε-report: the whole transcript is ε-LDP about that value, for T = 1 or T = 10^6 reports.
- **Protected at ε per state: the values visited.** Two histories whose days fall into the same
  pattern of equal-state blocks (c blocks) give transcripts whose likelihood ratio is at most
  e^{c·ε} (exactly the product of the per-state ratios, ``memo_transcript_loss``): the ledger must
  charge ε per *distinct* state a user reports from, never once for the whole history.
- **Not protected: when and whether the state changes.** The memo makes repeated reports equal;
  a change of state changes the response with positive probability and a constant state never
  does, so an aggregator tells "changed" from "constant" histories with an unbounded likelihood
  ratio (``memo_transcript_loss`` returns None). α-point rounding narrows this (a value moving
  within one grid step changes its rounded value only when α falls between), it does not remove it.
  The paper's output perturbation (a fresh flip per report) is not implemented here.

Where the memo lives. Every memoized draw is a pure deterministic function of a secret **memo
key**, the user id and the memo state: AES under an HKDF-SHA256 subkey of the memo key, one
subkey per purpose (``memo_subkey``: "alpha", "one-bit", "dbitflip-sample", "dbitflip-bits"), so
the draws are domain-separated from each other and from every report and record draw (those are
keyed by the report key, ``ldp.core.rng.life_key``, or by ``derive_key_bytes``; the memo PRF's
inputs repeat by design, so it must never share a key with the report PRF, whose (user, nonce)
must not). Nothing is stored but the key: a restarted process with the same key reads the same
α, the same sample and the same bits, and no API here takes a day or a nonce, so a memoized
response cannot be redrawn. In a deployment the memo key is a users'-side secret kept with the
users' **durable ledger** (the same store and permissions as the ledger's budget records, written
before the first memoized report leaves and never sent); the aggregator never receives it, nor α,
nor the state: it receives the bits (and dBitFlip's sampled bucket indices, which are
independent of the data, as in the paper).

Exactness. Every coin compares a 64-bit word of the user's draws with an integer cell: 1BitMean
uses pm_rr's 53-bit thresholds; dBitFlip's bits use ``rr_cells`` at the exact rational ε/2 (keep
cell A, flip cell B, A/B ≤ e^{ε/2}); the bucket sample is a partial Fisher–Yates shuffle whose
index draws are ⌊X·m/2^64⌋ (exact multiply-high). The sample is independent of the data, so it
cancels in every privacy ratio; a report's loss is that of its bits, at most two of which depend
on which of two buckets the user holds: ≤ (A/B)² ≤ e^ε (``DBitFlip.realized_loss``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar, NamedTuple

import numpy as np

from ldp.core.audit import exp_bounds, log_ratio
from ldp.core.errors import LDPError, ParameterError, require_epsilon, require_integer, require_positive_finite
from ldp.core.plus_minus import PlusMinusRandomizedResponse
from ldp.core.queries import Query
from ldp.core.randomizer_base import TWO53, TWO64, Interval, Randomizer, SpecView, check_params, register_randomizer, rr_cells, uniform_index
from ldp.core.rng import KEY_BYTES, Draws, UserRandomness, derive_subkey

__all__ = [
    "OneBitMean",
    "one_bit_mean_extremes",
    "DBitFlip",
    "DBitFlipReports",
    "DBitFlipPM",
    "AlphaRoundedOneBitMean",
    "alpha_masses",
    "memo_subkey",
    "memo_transcript_loss",
    "memo_charge",
    "MAX_SAMPLED",
    "MAX_COUNTER_BOUND",
    "MemoizedDBitFlip",
    "MemoizedAlphaOneBitMean",
    "build_dbitflip_pm",
    "build_alpha_one_bit_mean",
    "value_grid",
]

MAX_SAMPLED = 256  # d: the sampler is O(n·d²); the paper's d is small (1–4 in its experiments)
MAX_BUCKETS = 1 << 16
MAX_COUNTER_BOUND = 1 << 40  # m: grid levels m/s + 1 are memo counters (< 2^48)
MAX_STEP = (1 << 32) - 1  # s: α = ⌊X·s/2^64⌋ with a 64×32-bit multiply-high
_MEMO_INFO = "ldp.telemetry memo {purpose} v1"


# --- the memo key and its subkeys ---


@functools.lru_cache(maxsize=256)
def memo_subkey(memo_key: bytes, purpose: str) -> bytes:
    """The AES key of one memoized purpose: HKDF-SHA256 (RFC 5869) of the memo key, with the
    purpose in HKDF's info ("ldp.telemetry memo <purpose> v1"). Distinct purposes give
    independent pseudorandom keys, so α, the sample and the bits never share a draw, and none of
    them shares one with a report or record draw (module docstring). The HKDF is the
    ``cryptography`` package's.

    Parameters
    ----------
    memo_key : bytes
        The users' secret memo key (``KEY_BYTES`` = 32 bytes; ``ldp.core.rng.secret_key()``).
    purpose : str
        What the draws are for.

    Returns
    -------
    bytes
        32 bytes.
    """
    if not isinstance(memo_key, (bytes, bytearray)) or len(memo_key) != KEY_BYTES:
        raise ParameterError(f"a memo key is {KEY_BYTES} bytes, got {type(memo_key).__name__} of length {len(memo_key) if hasattr(memo_key, '__len__') else '?'}")
    return derive_subkey(bytes(memo_key), _MEMO_INFO.format(purpose=purpose).encode())


def _memo_draws(memo_key: bytes, purpose: str, users: np.ndarray, counters: np.ndarray | int) -> UserRandomness:
    """The memoized draws of ``purpose``: AES_subkey(user ‖ state ‖ draw), a pure function."""
    return UserRandomness(memo_subkey(bytes(memo_key), purpose), np.asarray(users, dtype=np.int64), counters)


# --- 1BitMean: pm_rr on x − m/2 ---


@dataclass(frozen=True)
class OneBitMean(Randomizer):
    """1BitMean (Ding et al. 2017): x ∈ [0, m] → one bit; exactly ``pm_rr`` at bound m/2 on x − m/2.

    Pr[b = 1 | x] = T(x)/2^53 with pm_rr's integer threshold T ∈ [T_lo, T_hi], T_lo = ⌈2^53/(e^ε+1)⌉,
    T_hi = 2^53 − T_lo: the paper's 1/(e^ε+1) + (x/m)(e^ε−1)/(e^ε+1) on the 53-bit grid. The privacy
    loss is ln(T_hi/T_lo) ≤ ε exactly (``ldp.core.audit.verify_exact`` audits it).
    Estimator: m/2 + M(2b − 1), M = (m/2)·2^53/(T_hi − T_lo) the realized magnitude (the paper's
    m(b(e^ε+1) − 1)/(e^ε−1) with the realized cells); variance M² − (x − m/2)² per report, at most
    M² ≈ m²(e^ε+1)²/(4(e^ε−1)²) (the paper's bound, per user).

    Parameters
    ----------
    epsilon : float
        ε, a finite number in [2^-30, 2^10].
    m : float
        The counter bound m > 0 (inputs are clipped to [0, m], ``check_inputs``).

    Examples
    --------
    >>> import ldp, numpy as np
    >>> from ldp.core.telemetry import OneBitMean
    >>> from ldp.core.rng import RandomSource
    >>> R = OneBitMean(1.0, 100.0)
    >>> [round(float(p), 4) for p in R.bit_probabilities(np.array([0.0, 50.0, 100.0]))]  # 1/(e+1), 1/2, e/(e+1)
    [0.2689, 0.5, 0.7311]
    >>> ldp.verify_exact(R).passed
    True
    >>> x = np.full(100_000, 30.0)
    >>> bits = R.sample(x, RandomSource(0).for_request("demo", 0, np.arange(100_000)))
    >>> bool(abs(R.mean(bits) - 30.0) < 2.0)  # sd of the mean ≈ 0.4
    True
    """

    epsilon: float
    m: float
    kind: ClassVar[str] = "one_bit_mean"
    report_dtype: ClassVar[type[np.generic]] = np.uint8

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "m", require_positive_finite("counter bound m", self.m))
        self.pm  # noqa: B018  (refuses an ε below the 2^-53 grid)

    @property
    def pm(self) -> PlusMinusRandomizedResponse:
        """The ``pm_rr`` this is: bound m/2, on u = x − m/2."""
        return PlusMinusRandomizedResponse(self.epsilon, self.m / 2.0)

    @property
    def magnitude(self) -> float:
        """M = (m/2)·2^53/(T_hi − T_lo) ≈ (m/2)(e^ε+1)/(e^ε−1)."""
        return self.pm.magnitude

    def _centered(self, x: np.ndarray | float) -> np.ndarray:
        return np.asarray(x, dtype=np.float64) - self.m / 2.0

    def thresholds(self, x: np.ndarray | float) -> np.ndarray:
        """T(x) (int64): Pr[b = 1 | x] = T(x)/2^53, from pm_rr's realized table."""
        xs = np.atleast_1d(np.asarray(x, dtype=np.float64))
        _, masses, _ = self.pm.realized(self._centered(xs))
        return masses[:, 1].astype(np.int64).reshape(np.shape(x))

    def bit_probabilities(self, x: np.ndarray | float) -> np.ndarray:
        """Pr[b = 1 | x] as floats (T(x)/2^53)."""
        return self.thresholds(x) / float(TWO53)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        return (self.pm.sample(self._centered(inputs), randomness) > 0).astype(np.uint8)

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        m = self.magnitude
        return self.pm.log_prob(self._centered(u), np.where(np.asarray(w) == 1, m, -m))

    def input_domain(self) -> Interval:
        return Interval(0.0, self.m)

    def output_domain(self) -> np.ndarray:
        return np.array([0.0, 1.0])

    def audit_inputs(self) -> np.ndarray:
        """pm_rr's (its threshold is monotone: the extremes are x = 0 and x = m), shifted by m/2."""
        return np.clip(self.pm.audit_inputs() + self.m / 2.0, 0.0, self.m)

    def consistency_inputs(self, count: int) -> np.ndarray:
        return np.clip(self.pm.consistency_inputs(count) + self.m / 2.0, 0.0, self.m)

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        _, masses, den = self.pm.realized(self._centered(np.asarray(inputs, dtype=np.float64).ravel()))
        return self.output_domain(), masses, den

    def draw_cells(self, u: float) -> list[np.ndarray]:
        return self.pm.draw_cells(float(self._centered(u)))

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        """Per-report unbiased estimates of x: m/2 + M(2b − 1)."""
        b = np.asarray(reports, dtype=np.float64)
        return self.m / 2.0 + self.magnitude * (2.0 * b - 1.0)

    def mean(self, reports: np.ndarray) -> float:
        """The paper's mean estimate (1/n)Σ estimate(b_i), with the realized M."""
        b = np.asarray(reports)
        if b.size == 0:
            raise ParameterError("one_bit_mean: no reports to estimate from")
        return float(self.m / 2.0 + self.magnitude * (2.0 * b.mean() - 1.0))

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        """Var[estimate(R(x))] = M² − E[estimate]² centred: pm_rr's exact M² − E[w]²."""
        return self.pm.variance(self._centered(u))

    def mean_variance(self, x: np.ndarray) -> float:
        """Var of ``mean`` over a fixed population x (independent users): Σ variance(x_i)/n²."""
        x = np.asarray(x, dtype=np.float64)
        return float(self.variance(x).sum() / len(x) ** 2)


def one_bit_mean_extremes(epsilon: float, m: float) -> tuple[int, int, int, bool]:
    """(T(0), T(m), 2^53, ok): the two extreme inputs' bit-1 masses and whether T(m)/T(0) ≤ e^ε,
    decided in exact arithmetic (``ldp.core.audit.exp_bounds``; T(0)/T(m) for b = 0 is the same ratio
    since T(0) + T(m) = 2^53)."""
    R = OneBitMean(epsilon, m)
    t = R.thresholds(np.array([0.0, R.m]))
    lo, hi = int(t[0]), int(t[1])
    e_low, _ = exp_bounds(R.epsilon)
    ok = Fraction(hi, lo) <= e_low and Fraction(TWO53 - lo, TWO53 - hi) <= e_low
    return lo, hi, TWO53, ok


# --- dBitFlip ---


class DBitFlipReports(NamedTuple):
    """What a dBitFlip user sends: the d sampled buckets and one bit for each (rows per user)."""

    buckets: np.ndarray  # int64 (n, d): distinct bucket indices j_1..j_d
    bits: np.ndarray  # uint8 (n, d): b_p for bucket j_p


@dataclass(frozen=True)
class DBitFlip:
    """dBitFlip (Ding et al. 2017): d sampled buckets of k, one ε/2 bit each; exact cells.

    Draws: 0..d−1 pick the buckets (partial Fisher–Yates: step s swaps slot s with slot
    s + ⌊X_s·(k − s)/2^64⌋), d..2d−1 the bits (bit p is 1 iff X_{d+p} < A when the user's bucket is
    j_p, else iff X_{d+p} < B; (A, B) = ``rr_cells``(ε/2 exactly, 2), A + B = 2^64, A/B ≤ e^{ε/2}).

    Privacy (by structure, ``realized_loss``): the sample's law does not depend on the bucket, the
    bits are independent given (sample, bucket), and bit p's law depends only on whether j_p is the
    user's bucket. For buckets v ≠ v′ and any report, every factor cancels except the bits of v and
    v′ when sampled: the loss is ≤ (A/B)² ≤ e^ε, attained when both are sampled (d ≥ 2); at d = 1
    only one bucket is sampled, so only one bit's law can differ: the loss is A/B ≤ e^{ε/2} (the
    formula keeps ε/2 per bit at d = 1 too, so it is ε/2-LDP: more private than declared).

    Parameters
    ----------
    epsilon : float
        ε, in [2^-30, 2^10].
    k : int
        Buckets, 2 ≤ k ≤ 2^16 (a value's bucket is the caller's: ⌊value/(domain/k)⌋ in the paper).
    d : int
        Sampled buckets per user, 1 ≤ d ≤ min(k, 256).

    Examples
    --------
    >>> import numpy as np
    >>> from ldp.core.telemetry import DBitFlip
    >>> from ldp.core.rng import RandomSource
    >>> R = DBitFlip(2.0, k=8, d=3)
    >>> [round(float(x), 4) for x in R.bit_probabilities()]  # e/(e+1), 1/(e+1) at ε/2 = 1
    [0.7311, 0.2689]
    >>> R.realized_loss() <= 2.0
    True
    >>> v = np.arange(80_000) % 8  # uniform over the buckets
    >>> rep = R.sample(v, RandomSource(0).for_request("demo", 0, np.arange(80_000)))
    >>> bool(np.abs(R.frequencies(rep) - 1 / 8).max() < 0.03)
    True
    """

    epsilon: float
    k: int
    d: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "k", require_integer("dbitflip buckets k", self.k, 2, MAX_BUCKETS, "[2, 2^16]"))
        object.__setattr__(self, "d", require_integer("dbitflip sampled buckets d", self.d, 1, min(self.k, MAX_SAMPLED), f"[1, min(k, {MAX_SAMPLED})] = [1, {min(self.k, MAX_SAMPLED)}]"))
        self.cells  # noqa: B018  (validates ε/2 against the 2^-64 grid)

    @property
    def cells(self) -> tuple[int, int]:
        """(A, B): a bit is 1 iff its draw is < A (own bucket) or < B (another bucket)."""
        return rr_cells(Fraction(self.epsilon) / 2, 2)

    def bit_probabilities(self) -> tuple[Fraction, Fraction]:
        """(p, q) exactly: Pr[b = 1] at the user's bucket and at another sampled bucket."""
        a, b = self.cells
        return Fraction(a, TWO64), Fraction(b, TWO64)

    def realized_loss(self) -> float:
        """ln of the worst realized ratio, (A/B)² (d ≥ 2) or A/B (d = 1), exactly via Fractions."""
        a, b = self.cells
        ratio = Fraction(a, b) ** (2 if self.d >= 2 else 1)
        return float(_ln(ratio))

    def worst_ratio(self) -> Fraction:
        """The exact worst likelihood ratio of one report (see the class docstring)."""
        a, b = self.cells
        return Fraction(a, b) ** (2 if self.d >= 2 else 1)

    def is_private(self) -> bool:
        """Whether ``worst_ratio`` ≤ e^ε, decided in exact arithmetic."""
        return self.worst_ratio() <= exp_bounds(self.epsilon)[0]

    def _index(self, buckets: np.ndarray) -> np.ndarray:
        v = np.asarray(buckets)
        if v.ndim != 1:
            raise ParameterError(f"dbitflip takes one bucket per user; got an array of shape {v.shape}")
        if v.size and (v.dtype.kind not in "iu" and not np.array_equal(v, np.floor(v))):
            raise ParameterError(f"dbitflip buckets must be integers in [0, {self.k}), got {v[v != np.floor(v)][0]!r}")
        vi = v.astype(np.int64)
        bad = (vi < 0) | (vi >= self.k)
        if bad.any():
            raise ParameterError(f"dbitflip buckets must be integers in [0, {self.k}), got {vi[bad][0]}")
        return vi

    def pick(self, randomness: Draws, first_draw: int = 0) -> np.ndarray:
        """The d distinct sampled buckets (int64, (n, d)): a partial Fisher–Yates shuffle of 0..k−1
        read lazily (slot p holds p unless a swap moved something there), O(n·d²), memory O(n·d)."""
        n = len(randomness.users)
        k, d = self.k, self.d
        targets = np.empty((n, d), dtype=np.int64)  # j_t: the slot swapped with slot t at step t
        moved = np.empty((n, d), dtype=np.int64)  # the value slot t held before step t (now at j_t)
        out = np.empty((n, d), dtype=np.int64)

        def value_at(slot: np.ndarray, steps: int) -> np.ndarray:
            val = slot.copy()
            for t in range(steps):  # the latest swap into this slot wins
                np.copyto(val, moved[:, t], where=targets[:, t] == slot)
            return val

        for s in range(d):
            j = s + uniform_index(randomness.bits(first_draw + s), k - s)
            here = value_at(np.full(n, s, dtype=np.int64), s)
            out[:, s] = value_at(j, s)
            targets[:, s], moved[:, s] = j, here
        return out

    def flip(self, buckets: np.ndarray, picked: np.ndarray, randomness: Draws, first_draw: int = 0) -> np.ndarray:
        """The bits (uint8, (n, d)): bit p = 1 iff draw first_draw + p < (A if j_p = bucket else B)."""
        a, b = self.cells
        own = picked == np.asarray(buckets, dtype=np.int64)[:, None]
        bits = np.empty(picked.shape, dtype=np.uint8)
        for p in range(self.d):
            x = randomness.bits(first_draw + p)
            bits[:, p] = x < np.where(own[:, p], np.uint64(a), np.uint64(b))
        return bits

    def sample(self, buckets: np.ndarray, randomness: Draws) -> DBitFlipReports:
        """One round: draws 0..d−1 pick the buckets, d..2d−1 flip the bits."""
        v = self._index(buckets)
        picked = self.pick(randomness, 0)
        return DBitFlipReports(picked, self.flip(v, picked, randomness, self.d))

    def check_reports(self, reports: DBitFlipReports) -> tuple[np.ndarray, np.ndarray]:
        """(buckets, bits) as int64 / uint8 arrays of shape (n, d), or a ParameterError naming the
        first malformed field (the aggregator reads untrusted reports)."""
        j, b = np.asarray(reports.buckets), np.asarray(reports.bits)
        if j.ndim != 2 or j.shape[1] != self.d or b.shape != j.shape:
            raise ParameterError(f"dbitflip reports must be (n, {self.d}) buckets and bits, got {j.shape} and {b.shape}")
        if j.size and (j.min() < 0 or j.max() >= self.k):
            raise ParameterError(f"dbitflip report buckets must be in [0, {self.k}), got {int(j.min())}..{int(j.max())}")
        if b.size and not np.isin(b, (0, 1)).all():
            raise ParameterError("dbitflip report bits must be 0 or 1")
        return j.astype(np.int64), b.astype(np.uint8)

    def frequencies(self, reports: DBitFlipReports) -> np.ndarray:
        """ĥ(v) = (k/(n d))·(C_v − q·N_v)/(p − q) for every bucket (float64, (k,)): unbiased for the
        fraction of users in v (the paper's estimator with the realized p, q). C_v: reports of
        bit 1 for v; N_v: reports that sampled v. Raw (may be negative; no clipping)."""
        j, b = self.check_reports(reports)
        n = len(j)
        if n == 0:
            raise ParameterError("dbitflip: no reports to estimate from")
        p, q = (float(x) for x in self.bit_probabilities())
        sampled = np.bincount(j.ravel(), minlength=self.k)
        ones = np.bincount(j.ravel(), weights=b.ravel().astype(np.float64), minlength=self.k)
        return self.k / (n * self.d) * (ones - q * sampled) / (p - q)

    def frequency_variance(self, counts: np.ndarray) -> np.ndarray:
        """Exact Var ĥ(v) for a fixed population with n_v users in bucket v (Pr[v sampled] = d/k):
        (1/n²)·[(k/d)·(n_v(p(1−q)² + (1−p)q²) + (n − n_v)q(1−q))/(p − q)² − n_v]; at the ideal
        p = e/(e+1), q = 1/(e+1) (e = e^{ε/2}) this is the reference's
        (1/n²)[(k/d)(n_v(e² − e + 1) + (n − n_v)e)/(e − 1)² − n_v]."""
        nv = np.asarray(counts, dtype=np.float64)
        n = nv.sum()
        p, q = (float(x) for x in self.bit_probabilities())
        own = p * (1 - q) ** 2 + (1 - p) * q**2
        return ((self.k / self.d) * (nv * own + (n - nv) * q * (1 - q)) / (p - q) ** 2 - nv) / n**2


def _ln(r: Fraction) -> float:
    return log_ratio(r)


# --- dBitFlipPM: the memoized sample and per-state bits ---


@dataclass(frozen=True)
class DBitFlipPM:
    """dBitFlipPM (Ding et al. 2017): dBitFlip with permanent memoization, memo on the users' side.

    The sample is memo draws 0..d−1 of purpose "dbitflip-sample" (state 0); a user's *state* is the
    position p of its bucket among j_1..j_d, or d when the bucket is not sampled; the bits for a
    state σ are memo draws 0..d−1 of purpose "dbitflip-bits" at counter σ, compared with
    ``DBitFlip.cells`` as in one round. All of it is a pure function of (memo key, user, state):
    one round of ``DBitFlipPM`` has exactly dBitFlip's law (ε-LDP), and every later report from the
    same state repeats it. Buckets outside the sample share the state d: moving between them
    changes nothing the aggregator sees. The memo key lives with the users' durable ledger (module
    docstring); the aggregator sees (j_p, b_p) only.

    Parameters
    ----------
    oracle : DBitFlip
        ε, k, d.
    memo_key : bytes
        The users' 32-byte secret memo key.
    """

    oracle: DBitFlip
    memo_key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        memo_subkey(bytes(self.memo_key), "dbitflip-sample")  # validates the key

    def sampled(self, users: np.ndarray) -> np.ndarray:
        """Each user's memoized d buckets (int64, (n, d)): the same on every call, in every process."""
        return self.oracle.pick(_memo_draws(self.memo_key, "dbitflip-sample", users, 0))

    def states(self, users: np.ndarray, buckets: np.ndarray) -> np.ndarray:
        """σ ∈ {0..d}: which sampled slot holds the bucket (d: none). Users'-side only."""
        v = self.oracle._index(buckets)
        picked = self.sampled(users)
        hit = picked == v[:, None]
        return np.where(hit.any(axis=1), hit.argmax(axis=1), self.oracle.d).astype(np.int64)

    def report(self, users: np.ndarray, buckets: np.ndarray) -> DBitFlipReports:
        """This period's reports: the memoized sample and the memoized bits of the current state."""
        users = np.asarray(users, dtype=np.int64)
        v = self.oracle._index(buckets)
        picked = self.sampled(users)
        hit = picked == v[:, None]
        state = np.where(hit.any(axis=1), hit.argmax(axis=1), self.oracle.d).astype(np.int64)
        bits = self.oracle.flip(v, picked, _memo_draws(self.memo_key, "dbitflip-bits", users, state), 0)
        return DBitFlipReports(picked, bits)


# --- α-point rounding with memoized 1BitMean ---


def alpha_masses(step: int) -> list[int]:
    """Pr[α = a]·2^64 for a = 0..s−1 (α = ⌊X·s/2^64⌋): the cells ⌈(a+1)·2^64/s⌉ − ⌈a·2^64/s⌉."""
    s = int(step)
    starts = [-(-a * TWO64 // s) for a in range(s + 1)]
    return [starts[a + 1] - starts[a] for a in range(s)]


@dataclass(frozen=True)
class AlphaRoundedOneBitMean:
    """1BitMean with α-point rounding and memoization (Ding et al. 2017), memo on the users' side.

    Integer counters x ∈ {0, …, m}, grid step s (s divides m; grid points 0, s, …, m). Each user's
    α ∈ {0, …, s−1} is memo draw 0 of purpose "alpha" (never sent); x rounds to x̃ = L + s if
    (x − L) + α ≥ s, else L (L = s⌊x/s⌋): E_α[x̃] = x exactly for uniform α. The report is the
    1BitMean bit of x̃ drawn from memo draw 0 of purpose "one-bit" at counter x̃/s: one fixed bit
    per (user, grid point), read again — never redrawn — whenever the user is at that point.

    Accuracy: for one round, Var[estimate] = E_α[M² − (x̃ − m/2)²] + Var_α(x̃) = M² − (x − m/2)²,
    exactly 1BitMean's (the rounding's variance r(s − r) cancels against E[(x̃ − m/2)²]):
    ``OneBitMean.mean_variance`` of the unrounded values is the theory (up to α's ≤ s/2^64 non-uniformity).

    Parameters
    ----------
    epsilon : float
        ε of the memoized bit.
    m : int
        The counter bound (1 ≤ m ≤ 2^40).
    step : int
        s, the discretization granularity: 1 ≤ s ≤ min(m, 2^32 − 1), dividing m (s = 1: no rounding).
    memo_key : bytes
        The users' 32-byte secret memo key.

    Examples
    --------
    >>> import numpy as np
    >>> from ldp.core.telemetry import AlphaRoundedOneBitMean
    >>> from ldp.core.rng import derive_key_bytes
    >>> R = AlphaRoundedOneBitMean(1.0, m=100, step=10, memo_key=derive_key_bytes("demo memo"))
    >>> users = np.arange(5)
    >>> day1 = R.report(users, np.array([0, 35, 35, 99, 100]))
    >>> day2 = R.report(users, np.array([0, 35, 35, 99, 100]))
    >>> bool((day1 == day2).all())  # the same value: the same bit, every day
    True
    >>> sorted(set(R.rounded(np.arange(2000), np.full(2000, 35)).tolist()))
    [30, 40]
    """

    epsilon: float
    m: int
    step: int
    memo_key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "m", require_integer("counter bound m", self.m, 1, MAX_COUNTER_BOUND, "[1, 2^40]"))
        object.__setattr__(self, "step", require_integer("rounding step s", self.step, 1, min(self.m, MAX_STEP), f"[1, {min(self.m, MAX_STEP)}]"))
        if self.m % self.step:
            raise ParameterError(f"rounding step s must divide the counter bound m={self.m}, got s={self.step}")
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        memo_subkey(bytes(self.memo_key), "alpha")  # validates the key

    @property
    def mechanism(self) -> OneBitMean:
        return OneBitMean(self.epsilon, float(self.m))

    @property
    def levels(self) -> int:
        """Grid points 0, s, …, m: m/s + 1 memo states per user."""
        return self.m // self.step + 1

    def check_values(self, values: np.ndarray) -> np.ndarray:
        """Integer counters in [0, m] as int64, or a ParameterError naming the first bad one."""
        x = np.asarray(values)
        if x.ndim != 1:
            raise ParameterError(f"alpha-rounded 1BitMean takes one counter per user; got shape {x.shape}")
        if x.dtype.kind == "f":
            ok = np.isfinite(x) & (x == np.floor(np.nan_to_num(x)))
            if not ok.all():
                raise ParameterError(f"counters must be integers in [0, {self.m}], got {x[~ok][0]!r}")
        elif x.size and x.dtype.kind not in "iu":
            raise ParameterError(f"counters must be integers in [0, {self.m}], got dtype {x.dtype}")
        xi = x.astype(np.int64)
        bad = (xi < 0) | (xi > self.m)
        if bad.any():
            raise ParameterError(f"counters must be integers in [0, {self.m}], got {xi[bad][0]}")
        return xi

    def alpha(self, users: np.ndarray) -> np.ndarray:
        """Each user's α ∈ [0, s) (int64): memoized, users'-side only, never sent."""
        return uniform_index(_memo_draws(self.memo_key, "alpha", users, 0).bits(0), self.step)

    def rounded(self, users: np.ndarray, values: np.ndarray) -> np.ndarray:
        """x̃ (int64): the α-point rounding of each user's counter to the grid."""
        x = self.check_values(values)
        s = self.step
        low = (x // s) * s
        return np.where(x - low + self.alpha(users) >= s, low + s, low)

    def report(self, users: np.ndarray, values: np.ndarray) -> np.ndarray:
        """This period's bits (uint8): the memoized 1BitMean bit of each user's rounded counter."""
        users = np.asarray(users, dtype=np.int64)
        xt = self.rounded(users, values)
        draws = _memo_draws(self.memo_key, "one-bit", users, xt // self.step)
        return self.mechanism.sample(xt.astype(np.float64), draws)

    def mean(self, reports: np.ndarray) -> float:
        """The 1BitMean estimate of the mean counter (unbiased: E[x̃] = x, E[estimate | x̃] = x̃)."""
        return self.mechanism.mean(reports)


# --- what the memo protects: the exact transcript loss, and the ledger's charge ---


def _pattern(levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first-occurrence labels per day, the distinct levels in order of first occurrence)."""
    lv = np.asarray(levels).ravel()
    uniq, first, inv = np.unique(lv, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inv], uniq[order]


def memo_transcript_loss(mechanism: OneBitMean, history_a: np.ndarray, history_b: np.ndarray) -> Fraction | None:
    """The exact worst likelihood ratio, over every transcript of T memoized reports, between two
    histories of memo states (the rounded counters of one user, day by day); None if unbounded.

    A transcript is the bit of each day; with memoization it is determined by one bit per
    *distinct* state, drawn independently. If the two histories split the days into different
    equal-state blocks, some transcript is possible under one and impossible under the other
    (the memo makes equal states give equal bits): the loss is unbounded (None) — changes of
    state are not protected. Otherwise the blocks' bits are independent, so the worst ratio is,
    in each direction, the product over blocks of max(T_a/T_b, (2^53 − T_a)/(2^53 − T_b)) ≥ 1
    (T the blocks' 1BitMean thresholds); the larger direction is returned: at most e^{c·ε} for c blocks, and
    exactly 1BitMean's single-report loss for c = 1, whatever T.
    """
    a, b = np.asarray(history_a, dtype=np.float64).ravel(), np.asarray(history_b, dtype=np.float64).ravel()
    if a.shape != b.shape or a.size == 0:
        raise ParameterError(f"memo_transcript_loss needs two histories of the same length ≥ 1, got {a.size} and {b.size} days")
    pa, la = _pattern(a)
    pb, lb = _pattern(b)
    if not np.array_equal(pa, pb):
        return None
    ta, tb = mechanism.thresholds(la), mechanism.thresholds(lb)
    forward, backward = Fraction(1), Fraction(1)  # max over transcripts of P_a/P_b, and of P_b/P_a
    for x, y in zip(ta.tolist(), tb.tolist()):
        forward *= max(Fraction(x, y), Fraction(TWO53 - x, TWO53 - y))
        backward *= max(Fraction(y, x), Fraction(TWO53 - y, TWO53 - x))
    return max(forward, backward)


def memo_charge(history: np.ndarray, epsilon: float) -> float:
    """What a ledger must charge for a memoized history: ε per distinct memo state reported from
    (``memo_transcript_loss`` ≤ e^{that} for any two histories of the same pattern). It does not
    cover *when* the state changed (unbounded, never chargeable)."""
    return float(epsilon) * len(np.unique(np.asarray(history)))


# --- the registered kinds: dbitflip_pm and alpha_one_bit_mean, memoized, asked in rounds ---


def _question(spec: SpecView) -> str:
    """The question a memoized kind's coins are keyed by: the query's JSON (as ``l_grr``'s)."""
    import json

    return json.dumps(spec.query.to_json(), sort_keys=True, allow_nan=True)


def _memo_of(kind: str, randomness: Draws) -> bytes:
    memo = getattr(randomness, "memo", None)
    if memo is None:
        raise LDPError(f"{kind}: a memoized report needs the users' memo key, which only a shard holds (UserRandomness.memo)")
    return bytes(memo)


def _padding_domain(bits: int) -> np.ndarray | None:
    """The allowed values of the last byte of ``bits`` packed bits: its padding bits are zero."""
    pad = -bits % 8
    return None if pad == 0 else np.arange(0, 256, 1 << pad)


def _index_domains(k: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The allowed (high, low) bytes of an index in [0, k) written big-endian in two bytes."""
    return np.arange(((k - 1) >> 8) + 1), (np.arange(k) if k <= 256 else None)


@dataclass(frozen=True)
class MemoizedDBitFlip(Randomizer):
    """``dbitflip_pm``: dBitFlipPM (Ding et al. 2017) over a query's finite values as a randomizer a
    round can ask, memoized on the users' side (``RandomizerSpec("dbitflip_pm", query, ε, {"d": d})``).

    Buckets are the query's values in order (k of them; the paper's ⌊value/(domain/k)⌋ is the
    query's business). A report is ``DBitFlipPM(DBitFlip(ε, k, d), K).report(users, buckets)``
    with K = ``memo_subkey(memo, "kind " + memo_label)``: the memo key (``UserRandomness.memo``,
    only a shard holds it) and the label fix every coin — the sample and each state's bits —
    so every report of one value repeats the first, in any round, session or process life.
    dBitFlipPM without output perturbation has no per-report coins (the paper's §3): the report's
    own draws are not read, its nonce only advances.

    **Charge** (``ldp.local.shard.Shard``): ε for a user's first report of the label, then
    ``MEMO_REPEAT_EPSILON``: every report from one state is the first (ε-LDP, ``DBitFlip``);
    a user's value is fixed for the life of their data, so the state does not change between
    rounds (a changed state would cost ε per state, ``memo_charge``; not protected: *when*).

    Wire: rows of 2d + ⌈d/8⌉ bytes: the d sampled buckets big-endian in two bytes each, then
    the d bits packed (``unpack`` gives a ``DBitFlipReports``).
    """

    epsilon: float
    categories: tuple[float, ...]
    d: int = 1
    question: str = ""
    kind: ClassVar[str] = "dbitflip_pm"
    report_dtype: ClassVar[type[np.generic]] = np.uint8

    def __post_init__(self) -> None:
        cats = tuple(sorted(float(c) for c in self.categories))
        if len(cats) < 2 or len(set(cats)) != len(cats):
            raise ParameterError(f"dbitflip_pm needs k ≥ 2 distinct categories, got {self.categories[:8]}")
        object.__setattr__(self, "categories", cats)
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        self.oracle  # noqa: B018  (validates k, d and ε/2's cells)

    @functools.cached_property
    def oracle(self) -> DBitFlip:
        return DBitFlip(self.epsilon, len(self.categories), self.d)

    @property
    def k(self) -> int:
        return len(self.categories)

    @property
    def memo_label(self) -> str:
        """What fixes the memoized coins (``ldp.core.longitudinal.memo_ledger_identity``): ε, k, d, the question."""
        return f"dbitflip_pm|eps={float(self.epsilon).hex()}|k={self.k}|d={self.d}|{len(self.question)}:{self.question}"

    def memoized(self, memo: bytes) -> DBitFlipPM:
        """The users' ``DBitFlipPM`` under this label (users' side only)."""
        return DBitFlipPM(self.oracle, memo_subkey(bytes(memo), "kind " + self.memo_label))

    def input_domain(self) -> np.ndarray:
        return np.asarray(self.categories)

    def buckets(self, inputs: np.ndarray) -> np.ndarray:
        return np.searchsorted(np.asarray(self.categories), np.asarray(inputs, dtype=np.float64)).astype(np.int64)

    @property
    def report_columns(self) -> int:
        return 2 * self.d + (self.d + 7) // 8

    def report_domains(self) -> tuple[np.ndarray | None, ...]:
        hi, lo = _index_domains(self.k)
        return (hi, lo) * self.d + (None,) * ((self.d + 7) // 8 - 1) + (_padding_domain(self.d),)

    def pack(self, reports: DBitFlipReports) -> np.ndarray:
        """(n, 2d + ⌈d/8⌉) uint8 rows: buckets big-endian, then the packed bits."""
        j = np.asarray(reports.buckets, dtype=">u2").view(np.uint8).reshape(len(reports.buckets), 2 * self.d)
        return np.concatenate([j, np.packbits(np.asarray(reports.bits, dtype=np.uint8), axis=1)], axis=1)

    def unpack(self, rows: np.ndarray) -> DBitFlipReports:
        """The ``DBitFlipReports`` of wire rows (checked: ``DBitFlip.check_reports``)."""
        w = np.ascontiguousarray(np.asarray(rows, dtype=np.uint8))
        if w.ndim != 2 or w.shape[1] != self.report_columns:
            raise ParameterError(f"dbitflip_pm reports are rows of {self.report_columns} bytes, got shape {w.shape}")
        j = w[:, : 2 * self.d].copy().view(">u2").astype(np.int64)
        bits = np.unpackbits(w[:, 2 * self.d :], axis=1, count=self.d)
        j_, b_ = self.oracle.check_reports(DBitFlipReports(j, bits))
        return DBitFlipReports(j_, b_)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        memo = _memo_of(self.kind, randomness)
        users = np.asarray(randomness.users, dtype=np.int64)
        return self.pack(self.memoized(memo).report(users, self.buckets(inputs)))

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        """ln Pr[one report w | value u] (w a wire row): the sample's nominal 1/(k(k−1)…(k−d+1))
        times the bits' realized p (own bucket) or q (another)."""
        rows = np.atleast_2d(np.asarray(w, dtype=np.uint8))
        rep = self.unpack(rows.reshape(-1, self.report_columns))
        v = self.buckets(np.broadcast_to(np.asarray(u, dtype=np.float64), (len(rep.buckets),)).ravel())
        p, q = (float(x) for x in self.oracle.bit_probabilities())
        prob = np.where(rep.buckets == v[:, None], p, q)
        bits = np.log(np.where(rep.bits == 1, prob, 1.0 - prob)).sum(axis=1)
        sample = -sum(np.log(self.k - t) for t in range(self.d))
        return bits + sample

    def frequencies(self, rows: np.ndarray) -> np.ndarray:
        """The paper's unbiased frequency of each category (``DBitFlip.frequencies``)."""
        return self.oracle.frequencies(self.unpack(rows))


@dataclass(frozen=True)
class MemoizedAlphaOneBitMean(Randomizer):
    """``alpha_one_bit_mean``: 1BitMean with α-point rounding, memoized (Ding et al. 2017), over a
    query whose finite values lie on an evenly spaced grid v_0 + iΔ, i = 0..m
    (``RandomizerSpec("alpha_one_bit_mean", query, ε, {"s": s})``).

    A value v is the counter x = (v − v_0)/Δ ∈ {0, …, m}; the report is
    ``AlphaRoundedOneBitMean(ε, m, s, K).report(users, x)``, one bit, with
    K = ``memo_subkey(memo, "kind " + memo_label)``: α and each grid point's bit are fixed by the
    memo key and the label, so every report of one value repeats the first; no per-report coin
    (the report's nonce only advances). The mean of the query is v_0 + Δ·(the 1BitMean mean)
    (``mean``). Charge as ``MemoizedDBitFlip``: ε for the first report of the label, then
    ``MEMO_REPEAT_EPSILON`` (one state per question while the data are fixed).
    """

    epsilon: float
    low: float
    spacing: float
    m: int
    s: int = 1
    question: str = ""
    values: tuple[float, ...] = ()  # the query's values (a subset of the grid); () = the whole grid
    kind: ClassVar[str] = "alpha_one_bit_mean"
    report_dtype: ClassVar[type[np.generic]] = np.uint8

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        AlphaRoundedOneBitMean(self.epsilon, self.m, self.s, bytes(KEY_BYTES))  # validates m, s (and ε)

    @property
    def memo_label(self) -> str:
        """What fixes α and the bits: ε, the grid (v_0, Δ, m), s and the question."""
        return f"alpha_one_bit_mean|eps={float(self.epsilon).hex()}|v0={float(self.low).hex()}|dv={float(self.spacing).hex()}|m={self.m}|s={self.s}|{len(self.question)}:{self.question}"

    def memoized(self, memo: bytes) -> AlphaRoundedOneBitMean:
        """The users' ``AlphaRoundedOneBitMean`` under this label (users' side only)."""
        return AlphaRoundedOneBitMean(self.epsilon, self.m, self.s, memo_subkey(bytes(memo), "kind " + self.memo_label))

    def input_domain(self) -> np.ndarray:
        """The query's values (never the whole grid, which may have up to 2^40 + 1 points)."""
        if self.values:
            return np.asarray(self.values, dtype=np.float64)
        return self.low + self.spacing * np.arange(self.m + 1, dtype=np.float64)

    def counters(self, inputs: np.ndarray) -> np.ndarray:
        return np.rint((np.asarray(inputs, dtype=np.float64) - self.low) / self.spacing).astype(np.int64)

    def output_domain(self) -> np.ndarray:
        return np.array([0.0, 1.0])

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        memo = _memo_of(self.kind, randomness)
        return self.memoized(memo).report(np.asarray(randomness.users, dtype=np.int64), self.counters(inputs))

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        """ln Pr[one report w | value u], averaged over α: Pr[1 | x] = E_α[T(x̃)]/2^53, 1BitMean's at
        x up to the cells' rounding (T is affine in x but for it, and E_α[x̃] = x for uniform α)."""
        x = self.counters(np.asarray(u, dtype=np.float64))
        one = OneBitMean(self.epsilon, float(self.m)).bit_probabilities(x.astype(np.float64))
        return np.log(np.where(np.asarray(w) == 1, one, 1.0 - one))

    def mean(self, reports: np.ndarray) -> float:
        """The unbiased estimate of the query's mean: v_0 + Δ·(the memoized 1BitMean mean)."""
        return float(self.low + self.spacing * OneBitMean(self.epsilon, float(self.m)).mean(np.asarray(reports)))


def value_grid(kind: str, values: np.ndarray) -> tuple[float, float, int]:
    """(v_0, Δ, m) with values ⊆ {v_0 + iΔ: i = 0..m}, Δ the smallest gap; or a ParameterError."""
    v = np.unique(np.asarray(values, dtype=np.float64))
    if len(v) == 1:
        return float(v[0]), 1.0, 1
    delta = float(np.diff(v).min())
    steps = (v - v[0]) / delta
    idx = np.rint(steps)
    if not np.allclose(v[0] + idx * delta, v, rtol=1e-9, atol=1e-9 * delta) or idx[-1] > MAX_COUNTER_BOUND:
        raise ParameterError(f"{kind} needs a query whose values lie on an evenly spaced grid of at most 2^40 steps; got {v[:4].tolist()}... (smallest gap {delta!r})")
    return float(v[0]), delta, int(idx[-1])


@register_randomizer("dbitflip_pm", params=("d",))
def build_dbitflip_pm(spec: SpecView, query: Query) -> Randomizer:
    """dBitFlipPM over the query's finite values (``MemoizedDBitFlip``); params: d (default 1)."""
    check_params(spec.kind, spec.params)
    values = query.values()
    if values is None:
        raise ParameterError(f"dbitflip_pm needs a query with a small finite set of values; {spec.query.name!r} has none")
    cats = tuple(values.tolist()) if len(values) >= 2 else (float(values[0]), float(values[0]) + 1.0)
    d = spec.params.get("d", 1)
    if isinstance(d, bool) or not isinstance(d, int):
        raise ParameterError(f"dbitflip_pm d (sampled buckets) must be an integer, got {d!r}")
    return MemoizedDBitFlip(spec.epsilon, cats, d, _question(spec))


@register_randomizer("alpha_one_bit_mean", params=("s",))
def build_alpha_one_bit_mean(spec: SpecView, query: Query) -> Randomizer:
    """α-rounded memoized 1BitMean over a query with evenly spaced finite values
    (``MemoizedAlphaOneBitMean``); params: s, the grid step in counter units (default 1: no rounding)."""
    check_params(spec.kind, spec.params)
    values = query.values()
    if values is None:
        raise ParameterError(f"alpha_one_bit_mean needs a query with finite, evenly spaced values; {spec.query.name!r} has none")
    low, spacing, m = value_grid(spec.kind, values)
    s = spec.params.get("s", 1)
    if isinstance(s, bool) or not isinstance(s, int):
        raise ParameterError(f"alpha_one_bit_mean s (the grid step) must be an integer, got {s!r}")
    return MemoizedAlphaOneBitMean(spec.epsilon, low, spacing, m, s, _question(spec), tuple(np.unique(values).tolist()))
