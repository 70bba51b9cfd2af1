"""Microsoft's telemetry mechanisms (``ldp.core.telemetry``; Ding, Kulkarni & Yekhanin, NeurIPS 2017):
the paper's formulas, the exact audit of the realized samplers, the memo on the users' side, and
the longitudinal attacks.

- "(verify)" checks: 1BitMean's bit probability and estimator are the paper's (and pm_rr's);
  dBitFlip's bits at ε/2 and its estimator are the paper's; the fixed-population variance equals
  the reference's closed form at the ideal p, q; α-point rounding with α ∈ {0..s−1} is exactly
  unbiased on integer counters.
- Exact audits are deterministic (no false alarm): 1BitMean by ``verify_exact`` and by its two
  extreme inputs; dBitFlip by enumerating every cell of every draw through the real sampler at
  small k (the realized table) and by structure at any k; the memoized transcript by
  ``memo_transcript_loss``. Broken variants caught: 1BitMean cells rounded down, dBitFlip bits at
  ε instead of ε/2, a dBitFlip sampler that uses the wrong threshold for the user's own bucket, a
  ledger that charges a changing history once.
- Statistical tests are seeded. Each |z| > 5 check has a two-sided false-alarm rate ≈ 5.7·10^-7;
  the χ² variance bands are at 10^-6 each; the attack bounds are one-sided z = 5 (2.9·10^-7). The
  whole file's false-alarm rate is below 10^-4 (Bonferroni over its ≈ 60 checks). Each statistical
  check is shown to fail on a broken variant (no memoization: the attack beats the ε bound;
  a forgotten factor in the estimator: biased).
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ldp.core.audit import FixedRandomness, exp_bounds, verify_exact
from ldp.core.errors import ParameterError
from ldp.core.plus_minus import PlusMinusRandomizedResponse
from ldp.core.randomizer_base import TWO53, TWO64, rr_cells, uniform_index
from ldp.core.rng import Draws, RandomSource, UserRandomness, derive_key_bytes, secret_key
from ldp.core.telemetry import (
    AlphaRoundedOneBitMean,
    DBitFlip,
    DBitFlipPM,
    DBitFlipReports,
    OneBitMean,
    alpha_masses,
    memo_charge,
    memo_subkey,
    memo_transcript_loss,
    one_bit_mean_extremes,
)
from tests.waits import PROCESS_WAIT_S

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

Z = 5.0  # two-sided 5.7e-7 per check
CHI2_ALPHA = 1e-6
DAYS = 100  # T: the longitudinal attacks' number of reports


def _rs(seed: int, n: int, request: int = 0) -> UserRandomness:
    return RandomSource(seed).for_request("telemetry-test", request, np.arange(n))


# --- 1BitMean: the paper's formulas, and pm_rr ---


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_one_bit_mean_is_the_papers_coin_and_estimator(epsilon: float) -> None:
    """(verify) Pr[b = 1] = 1/(e^ε+1) + (x/m)(e^ε−1)/(e^ε+1) (to the 2^-53 grid), and the per-report
    estimate m/2 + M(2b − 1) is the paper's m(b(e^ε+1) − 1)/(e^ε − 1) (to the realized cells)."""
    m = 86_400.0
    R = OneBitMean(epsilon, m)
    x = np.linspace(0.0, m, 97)
    e = math.exp(epsilon)
    paper = 1 / (e + 1) + x / m * (e - 1) / (e + 1)
    assert np.abs(R.bit_probabilities(x) - paper).max() <= 2.0**-52
    for b in (0, 1):
        ideal = m * (b * (e + 1) - 1) / (e - 1)
        assert R.estimate(np.array([b]))[0] == pytest.approx(ideal, rel=1e-12)
    # It is pm_rr at bound m/2 on x − m/2: same thresholds, same reports' signs on the same draws.
    pm = PlusMinusRandomizedResponse(epsilon, m / 2)
    draws = _rs(3, 5000)
    xs = np.random.default_rng(0).uniform(0, m, 5000)
    assert np.array_equal(R.sample(xs, draws), (pm.sample(xs - m / 2, draws) > 0).astype(np.uint8))
    # The variance bound of the paper: M² ≈ m²(e^ε+1)²/(4(e^ε−1)²) per user.
    assert float(R.variance(m / 2)) == pytest.approx(m**2 * (e + 1) ** 2 / (4 * (e - 1) ** 2), rel=1e-12)


@pytest.mark.parametrize("epsilon", [2.0**-10, 1.0, 4.0, 16.0, 40.0])
@pytest.mark.parametrize("m", [1.0, 100.0, 86_400.0])
def test_one_bit_mean_exact_audit(epsilon: float, m: float) -> None:
    audit = verify_exact(OneBitMean(epsilon, m))
    assert audit.passed, audit
    lo, hi, den, ok = one_bit_mean_extremes(epsilon, m)
    assert ok and lo + hi == den == TWO53
    if epsilon <= 16:  # tight: T_lo = ⌈2^53/(e^ε+1)⌉
        assert lo == math.ceil(TWO53 / (math.exp(epsilon) + 1)) or abs(lo - TWO53 / (math.exp(epsilon) + 1)) < 2


class _FloorPM(PlusMinusRandomizedResponse):
    """Broken: T_lo = ⌊2^53/(e^ε+1)⌋ (rounded down), so T_hi/T_lo > e^ε."""

    @property
    def thresholds(self) -> tuple[int, int]:
        lo = math.floor(TWO53 / (math.exp(self.epsilon) + 1))
        return lo, TWO53 - lo

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        lo, hi = self.thresholds
        u = np.asarray(inputs, dtype=np.float64).ravel()
        t = np.clip(lo + np.floor((np.clip(u, -self.bound, self.bound) + self.bound) / (2 * self.bound) * (hi - lo) + 0.5), lo, hi).astype(np.int64)
        return self.output_domain(), np.stack([TWO53 - t, t], axis=1).astype(np.uint64), TWO53


class _BrokenOneBitMean(OneBitMean):
    @property
    def pm(self) -> PlusMinusRandomizedResponse:
        return _FloorPM(self.epsilon, self.m / 2.0)


def test_the_exact_audit_catches_cells_rounded_down() -> None:
    bad = _BrokenOneBitMean(1.0, 100.0)
    t = bad.thresholds(np.array([0.0, 100.0]))
    e_low, _ = exp_bounds(1.0)
    assert Fraction(int(t[1]), int(t[0])) > e_low  # the extremes already show it
    assert not verify_exact(bad).passed


def test_one_bit_mean_unbiased_with_its_variance() -> None:
    """R = 400 rounds of n = 10^4 users on a fixed population: z-test of the mean and χ² band of the
    variance against ``mean_variance``; a broken estimator (M without the realized cells' factor 2
    in 2b − 1) is caught by the same z-test."""
    m, eps, n, reps = 100.0, 1.0, 10_000, 400
    R = OneBitMean(eps, m)
    x = np.random.default_rng(1).integers(0, 101, n).astype(np.float64)
    est = np.array([R.mean(R.sample(x, _rs(7, n, r))) for r in range(reps)])
    var = R.mean_variance(x)
    z = (est.mean() - x.mean()) / math.sqrt(var / reps)
    assert abs(z) < Z, z
    stat = (reps - 1) * est.var(ddof=1) / var
    assert stats.chi2.ppf(CHI2_ALPHA / 2, reps - 1) <= stat <= stats.chi2.isf(CHI2_ALPHA / 2, reps - 1)
    broken = np.array([m / 2 + R.magnitude * (b.mean() - 1.0) for b in (R.sample(x, _rs(7, n, r)) for r in range(20))])
    assert abs(broken.mean() - x.mean()) / math.sqrt(var / 20) > Z


# --- dBitFlip: formulas, exact audit ---


def test_dbitflip_bits_and_estimator_are_the_papers() -> None:
    """(verify) b = 1 w.p. e^{ε/2}/(e^{ε/2}+1) at the user's bucket, 1/(e^{ε/2}+1) elsewhere, and
    (b − q)/(p − q) = (b(e^{ε/2}+1) − 1)/(e^{ε/2} − 1); the variance is the reference's closed form."""
    for eps in (0.5, 2.0, 4.0):
        R = DBitFlip(eps, 16, 4)
        p, q = (float(v) for v in R.bit_probabilities())
        h = math.exp(eps / 2)
        assert p == pytest.approx(h / (h + 1), abs=2.0**-52) and q == pytest.approx(1 / (h + 1), abs=2.0**-52)
        for b in (0, 1):
            assert (b - q) / (p - q) == pytest.approx((b * (h + 1) - 1) / (h - 1), rel=1e-12)
        counts = np.array([500] + [100] * 15)
        n, k, d = counts.sum(), 16, 4
        ref = ((k / d) * (counts * (h * h - h + 1) + (n - counts) * h) / (h - 1) ** 2 - counts) / n**2
        assert np.allclose(R.frequency_variance(counts), ref, rtol=1e-12)
    # d = k is SUE on the buckets: q(1 − q)/(n(p − q)²) at n_v = 0.
    R = DBitFlip(2.0, 8, 8)
    p, q = (float(v) for v in R.bit_probabilities())
    assert R.frequency_variance(np.array([0] + [125] * 8))[0] == pytest.approx(q * (1 - q) / (1000 * (p - q) ** 2), rel=1e-12)


def _enumerate_reports(R: DBitFlip, bucket: int) -> dict[tuple[int, ...], int]:
    """The realized law of one report, by feeding the real sampler every cell of every draw:
    {(j_1..j_d, b_1..b_d): mass over 2^{64·2d}}."""
    k, d = R.k, R.d
    a, b = R.cells
    pick_cells = [[-(-i * TWO64 // (k - s)) for i in range(k - s)] + [TWO64] for s in range(d)]
    bit_cells = [0, b, a, TWO64]  # every bit's draw is constant on [0, B), [B, A), [A, 2^64)
    axes = [[(c[i], c[i + 1] - c[i]) for i in range(len(c) - 1)] for c in pick_cells] + [[(bit_cells[i], bit_cells[i + 1] - bit_cells[i]) for i in range(3)]] * d
    combos = list(itertools.product(*axes))
    out: dict[tuple[int, ...], int] = {}
    for edge in ("first", "last"):  # every cell's first and last value must give the same report
        draws = {j: np.array([c[j][0] if edge == "first" else c[j][0] + c[j][1] - 1 for c in combos], dtype=np.uint64) for j in range(2 * d)}
        rep = R.sample(np.full(len(combos), bucket), FixedRandomness(draws))
        keys = [tuple(r) for r in np.concatenate([rep.buckets, rep.bits], axis=1).tolist()]
        if edge == "first":
            first_keys = keys
            for key, c in zip(keys, combos):
                out[key] = out.get(key, 0) + math.prod(size for _, size in c)
        else:
            assert keys == first_keys, "the sampler's output changes inside a cell"
    return out


@pytest.mark.parametrize(("k", "d"), [(3, 1), (3, 2), (4, 2), (4, 3)])
@pytest.mark.parametrize("epsilon", [0.5, 2.0, 8.0])
def test_dbitflip_exact_audit_by_enumeration(k: int, d: int, epsilon: float) -> None:
    """Every report's realized mass under every bucket, from the real sampler: the worst ratio is
    exactly ``worst_ratio`` ((A/B)² for d ≥ 2, A/B at d = 1) and ≤ e^ε."""
    R = DBitFlip(epsilon, k, d)
    tables = [_enumerate_reports(R, v) for v in range(k)]
    total = 1 << (64 * 2 * d)
    assert all(sum(t.values()) == total for t in tables)
    keys = set().union(*tables)
    worst = max(Fraction(max(t.get(key, 0) for t in tables), min(t.get(key, 0) for t in tables)) for key in keys)
    assert worst == R.worst_ratio()
    assert worst <= exp_bounds(epsilon)[0] and R.is_private()
    # the sample does not depend on the bucket: its marginal is the same table for every v
    marginals = [{kk: 0 for kk in itertools.permutations(range(k), d)} for _ in range(k)]
    for v, t in enumerate(tables):
        for key, mass in t.items():
            marginals[v][key[:d]] += mass
    assert all(mv == marginals[0] for mv in marginals)


class _BitsAtEpsilon(DBitFlip):
    """Broken: each bit at ε instead of ε/2 (the loss doubles)."""

    @property
    def cells(self) -> tuple[int, int]:
        return rr_cells(self.epsilon, 2)


class _OwnBucketWrongThreshold(DBitFlip):
    """Broken sampler: the user's own bucket is compared with A + 2^60 instead of its cell A."""

    def flip(self, buckets: np.ndarray, picked: np.ndarray, randomness: Draws, first_draw: int = 0) -> np.ndarray:
        a, b = self.cells
        own = picked == np.asarray(buckets, dtype=np.int64)[:, None]
        bits = np.empty(picked.shape, dtype=np.uint8)
        for p in range(self.d):
            x = randomness.bits(first_draw + p)
            bits[:, p] = x < np.where(own[:, p], np.uint64(min(TWO64 - 1, a + (1 << 60))), np.uint64(b))
        return bits


def test_the_dbitflip_audits_catch_broken_variants() -> None:
    bad = _BitsAtEpsilon(1.0, 4, 2)
    assert not bad.is_private()
    tables = [_enumerate_reports(bad, v) for v in range(4)]
    worst = max(Fraction(max(t[key] for t in tables), min(t[key] for t in tables)) for key in tables[0])
    assert worst > exp_bounds(1.0)[1]
    # A sampler departing from its cells: the enumeration sees the output change inside a cell.
    with pytest.raises(AssertionError, match="changes inside a cell"):
        _enumerate_reports(_OwnBucketWrongThreshold(1.0, 3, 2), 0)


def test_dbitflip_structure_at_large_k() -> None:
    """At k = 1024: the bits change exactly at their cells (A for the own bucket, B elsewhere),
    independently of the other draws; the loss is (A/B)² ≤ e^ε by structure."""
    R = DBitFlip(1.0, 1024, 4)
    a, b = R.cells
    n = 6
    base = {s: np.array([0, 1, 2**63, TWO64 - 1, 12345, 2**40], dtype=np.uint64) for s in range(4)}
    picked = R.pick(FixedRandomness(base, n))
    for own in (True, False):
        cut = a if own else b
        v = picked[:, 1] if own else np.full(n, int(np.setdiff1d(np.arange(1024), picked.ravel())[0]))
        for x, expect in ((cut - 1, 1), (cut, 0)):
            draws = dict(base)
            draws.update({4 + p: np.full(n, 2**62 if p != 1 else x, dtype=np.uint64) for p in range(4)})
            bits = R.sample(v, FixedRandomness(draws, n)).bits
            assert (bits[:, 1] == expect).all()
    assert R.realized_loss() <= 1.0 and R.is_private()


def test_dbitflip_unbiased_with_its_variance() -> None:
    """k = 8, d = 3, ε = 2, n = 3000, R = 600 rounds (the reference's Monte Carlo setting)."""
    R, n, reps = DBitFlip(2.0, 8, 3), 3000, 600
    counts = np.array([900, 600, 450, 300, 300, 150, 150, 150])
    v = np.repeat(np.arange(8), counts)
    est = np.array([R.frequencies(R.sample(v, _rs(11, n, r))) for r in range(reps)])
    var = R.frequency_variance(counts)
    z = (est.mean(axis=0) - counts / n) / np.sqrt(var / reps)
    assert np.abs(z).max() < Z, z
    stat = (reps - 1) * est.var(axis=0, ddof=1) / var
    lo, hi = stats.chi2.ppf(CHI2_ALPHA / 16, reps - 1), stats.chi2.isf(CHI2_ALPHA / 16, reps - 1)
    assert ((lo <= stat) & (stat <= hi)).all(), stat


def test_dbitflip_refuses_bad_parameters_and_reports() -> None:
    with pytest.raises(ParameterError, match="d must be an integer"):
        DBitFlip(1.0, 4, 5)
    with pytest.raises(ParameterError, match="buckets k"):
        DBitFlip(1.0, 1, 1)
    R = DBitFlip(1.0, 4, 2)
    with pytest.raises(ParameterError, match=r"buckets must be integers in \[0, 4\)"):
        R.sample(np.array([0, 4]), _rs(0, 2))
    with pytest.raises(ParameterError, match="report buckets"):
        R.frequencies(DBitFlipReports(np.array([[0, 9]]), np.array([[0, 1]], dtype=np.uint8)))
    with pytest.raises(ParameterError, match="bits must be 0 or 1"):
        R.frequencies(DBitFlipReports(np.array([[0, 1]]), np.array([[0, 2]], dtype=np.uint8)))


# --- the memo: users' side, deterministic, domain-separated ---


def test_memo_is_a_pure_function_of_key_user_and_state() -> None:
    key = derive_key_bytes("telemetry-test memo", 1)
    users = np.arange(2000)
    x = np.random.default_rng(2).integers(0, 1001, 2000)
    A = AlphaRoundedOneBitMean(1.0, 1000, 50, key)
    first = A.report(users, x)
    again = AlphaRoundedOneBitMean(1.0, 1000, 50, bytes(key))  # a restarted process, same key
    assert all(np.array_equal(again.report(users, x), first) for _ in range(3))
    assert np.array_equal(again.alpha(users), A.alpha(users))
    # Users are independent of how they are batched: user 17 alone gets the same bit.
    assert A.report(np.array([17]), x[17:18])[0] == first[17]
    other = AlphaRoundedOneBitMean(1.0, 1000, 50, derive_key_bytes("telemetry-test memo", 2))
    assert not np.array_equal(other.report(users, x), first)
    # Domain separation: one subkey per purpose, none equal to the memo key itself.
    subkeys = {memo_subkey(key, p) for p in ("alpha", "one-bit", "dbitflip-sample", "dbitflip-bits")}
    assert len(subkeys) == 4 and key not in subkeys
    with pytest.raises(ParameterError, match="memo key is 32 bytes"):
        AlphaRoundedOneBitMean(1.0, 1000, 50, b"short")
    PM = DBitFlipPM(DBitFlip(1.0, 64, 4), key)
    v = np.random.default_rng(3).integers(0, 64, 2000)
    rep = PM.report(users, v)
    rep2 = DBitFlipPM(DBitFlip(1.0, 64, 4), bytes(key)).report(users, v)
    assert np.array_equal(rep.buckets, rep2.buckets) and np.array_equal(rep.bits, rep2.bits)


def test_dbitflip_pm_state_semantics() -> None:
    """Moving between buckets outside the sample changes nothing; into the sample, the response
    changes to that state's (fixed) bits."""
    key = secret_key()
    PM = DBitFlipPM(DBitFlip(2.0, 32, 3), key)
    users = np.arange(500)
    picked = PM.sampled(users)
    outside = np.array([np.setdiff1d(np.arange(32), row)[:2] for row in picked])
    r1, r2 = PM.report(users, outside[:, 0]), PM.report(users, outside[:, 1])
    assert np.array_equal(r1.bits, r2.bits) and np.array_equal(r1.buckets, picked)
    assert (PM.states(users, outside[:, 0]) == 3).all() and (PM.states(users, picked[:, 2]) == 2).all()
    inside = PM.report(users, picked[:, 0])
    assert np.array_equal(inside.bits, PM.report(users, picked[:, 0]).bits)


def test_dbitflip_pm_one_round_is_unbiased() -> None:
    """One round of dBitFlipPM has dBitFlip's law: the estimate over 10^5 users is within 5 sd."""
    R = DBitFlip(2.0, 16, 4)
    n = 100_000
    counts = np.full(16, n // 16)
    v = np.repeat(np.arange(16), counts)
    est = R.frequencies(DBitFlipPM(R, derive_key_bytes("pm-unbiased")).report(np.arange(n), v))
    assert (np.abs(est - 1 / 16) / np.sqrt(R.frequency_variance(counts)) < Z).all()


# --- α-point rounding ---


@pytest.mark.parametrize("step", [1, 2, 7, 10, 64, 1000])
def test_alpha_point_rounding_is_unbiased_exactly(step: int) -> None:
    """(verify) α ∈ {0..s−1}, round up iff r + α ≥ s: E[x̃] = x exactly for uniform α; the realized
    α (cells of ⌊X·s/2^64⌋) biases it by at most s²/2^64, and not at all for s a power of two."""
    masses = alpha_masses(step)
    assert sum(masses) == TWO64 and max(masses) - min(masses) <= 1
    for r in range(step):
        up = sum(masses[a] for a in range(step) if r + a >= step)
        bias = Fraction(up * step, TWO64) - r  # E[x̃] − x for x = L + r
        if step & (step - 1) == 0:
            assert bias == 0
        assert abs(bias) <= Fraction(step * step, TWO64)
    # the sampler: α's cells are those of uniform_index
    starts = np.array([-(-a * TWO64 // step) for a in range(step)], dtype=np.uint64)
    assert np.array_equal(uniform_index(starts, step), np.arange(step))
    assert np.array_equal(uniform_index(np.maximum(starts[1:], 1) - np.uint64(1), step), np.arange(step - 1))


def test_alpha_rounded_mean_is_unbiased_with_1bitmean_variance() -> None:
    """R = 300 populations of memo keys, n = 10^4 integer counters, s = 25: the mean estimate is
    unbiased and its variance is 1BitMean's on the unrounded values (the rounding adds none)."""
    m, s, n, reps = 1000, 25, 10_000, 300
    x = np.random.default_rng(5).integers(0, m + 1, n)
    est = np.array([AlphaRoundedOneBitMean(1.0, m, s, derive_key_bytes("alpha-var", r)).report(np.arange(n), x) for r in range(reps)])
    R = OneBitMean(1.0, m)
    means = np.array([R.mean(b) for b in est])
    var = R.mean_variance(x.astype(np.float64))
    assert abs(means.mean() - x.mean()) / math.sqrt(var / reps) < Z
    stat = (reps - 1) * means.var(ddof=1) / var
    assert stats.chi2.ppf(CHI2_ALPHA / 2, reps - 1) <= stat <= stats.chi2.isf(CHI2_ALPHA / 2, reps - 1)


def test_alpha_rounding_refuses_bad_parameters() -> None:
    key = derive_key_bytes("bad")
    with pytest.raises(ParameterError, match="must divide"):
        AlphaRoundedOneBitMean(1.0, 100, 7, key)
    with pytest.raises(ParameterError, match="counters must be integers"):
        AlphaRoundedOneBitMean(1.0, 100, 10, key).report(np.arange(2), np.array([3.5, 1.0]))
    with pytest.raises(ParameterError, match=r"counters must be integers in \[0, 100\], got 101"):
        AlphaRoundedOneBitMean(1.0, 100, 10, key).report(np.arange(2), np.array([3, 101]))


# --- what the memo protects over time: exact ---


def test_memo_transcript_loss_constant_value_is_one_report() -> None:
    """A constant state over T = 1 or 100 days: the exact loss is one report's, ln(T_hi/T_lo) ≤ ε."""
    R = OneBitMean(1.0, 100.0)
    lo, hi, _, _ = one_bit_mean_extremes(1.0, 100.0)
    for days in (1, DAYS):
        loss = memo_transcript_loss(R, np.zeros(days), np.full(days, 100.0))
        assert loss == Fraction(hi, lo) and loss <= exp_bounds(1.0)[0]


def test_memo_transcript_loss_changes_are_not_protected_and_charged_per_state() -> None:
    R, eps = OneBitMean(1.0, 100.0), 1.0
    e_low, _ = exp_bounds(eps)
    alternating = np.tile([0.0, 100.0], DAYS // 2)
    swapped = np.tile([100.0, 0.0], DAYS // 2)
    loss = memo_transcript_loss(R, alternating, swapped)  # same pattern, 2 states
    assert loss is not None and e_low < loss <= exp_bounds(2 * eps)[0]
    # whether it changed is not protected: an unbounded ratio
    assert memo_transcript_loss(R, alternating, np.zeros(DAYS)) is None
    # The ledger's charge (ε per distinct state) covers the loss; charging once does not (broken).
    assert math.log(float(loss)) <= memo_charge(alternating, eps)
    charge_once = eps
    assert math.log(float(loss)) > charge_once


# --- the attacks: T = 100 days, what the aggregator learns ---


def _one_bit_attack(days_bits: np.ndarray, truth: np.ndarray) -> float:
    """The aggregator's decoder: majority of the T bits → "x = m" (the best decoder for the memoized
    transcript, which is one bit repeated; the likelihood-ratio test for i.i.d. daily bits)."""
    guess = days_bits.sum(axis=0) * 2 > days_bits.shape[0]
    return float((guess == truth).mean())


def test_attack_memoized_alpha_rounded_1bitmean_learns_one_report() -> None:
    """n = 20,000 users, half at x = 0 and half at x = m, T = 100 days of the same value. Any
    decoder's accuracy is ≤ e^ε/(1 + e^ε) if the transcript is ε-LDP; with memoization the
    measured accuracy is within 5 sd below that bound (and at it: the bound is reached by reading
    the one bit). The broken variant without memoization (a fresh 1BitMean bit every day) decodes
    almost every user, and its 100-day average estimates each user's value nearly exactly."""
    eps, m, s, n = 1.0, 1000, 10, 20_000
    users = np.arange(n)
    truth = users % 2 == 1
    x = np.where(truth, m, 0)
    A = AlphaRoundedOneBitMean(eps, m, s, derive_key_bytes("attack memo"))
    memo = np.stack([A.report(users, x) for _ in range(DAYS)])
    bound = math.exp(eps) / (1 + math.exp(eps))
    sd = math.sqrt(bound * (1 - bound) / n)
    acc = _one_bit_attack(memo, truth)
    assert acc <= bound + Z * sd, (acc, bound)
    assert acc >= bound - Z * sd  # the bound is tight: one ε-report is learned, no less
    R = A.mechanism
    fresh = np.stack([R.sample(x.astype(np.float64), _rs(21, n, day)) for day in range(DAYS)])
    broken_acc = _one_bit_attack(fresh, truth)
    assert broken_acc > bound + Z * sd and broken_acc > 0.999
    # value recovery: the per-user average of 100 daily estimates
    memo_err = np.abs(R.estimate(memo).mean(axis=0) - x).mean()
    fresh_err = np.abs(R.estimate(fresh).mean(axis=0) - x).mean()
    assert fresh_err < memo_err / 5  # ≈ 1/√T of the memoized error


def test_attack_a_changing_value_is_detected() -> None:
    """Not protected: a user whose rounded value alternates between 0 and m is told apart from a
    constant user by "the transcript changed", probability 0 under constant and
    (T_lo² + T_hi²)/2^106 under alternating (exact); measured within 5 sd."""
    eps, m, n = 1.0, 100, 20_000
    A = AlphaRoundedOneBitMean(eps, m, 10, derive_key_bytes("change memo"))
    users = np.arange(n)
    const = np.stack([A.report(users, np.zeros(n, dtype=np.int64)) for _ in range(10)])
    alt = np.stack([A.report(users, np.full(n, m * (d % 2))) for d in range(10)])
    assert not (const != const[0]).any()
    lo, hi, _, _ = one_bit_mean_extremes(eps, m)
    p = (lo * lo + hi * hi) / 2.0**106
    changed = (alt != alt[0]).any(axis=0).mean()
    assert abs(changed - p) < Z * math.sqrt(p * (1 - p) / n)


def test_attack_dbitflip_pm_constant_bucket_learns_one_report() -> None:
    """dBitFlipPM, buckets 0 vs 1 held for T = 100 days: the likelihood-ratio decoder over the whole
    transcript is ≤ e^ε/(1 + e^ε) (+5 sd) with memoization; the broken variant (fresh dBitFlip
    every day) beats it."""
    eps, n = 1.0, 20_000
    R = DBitFlip(eps, 4, 2)
    PM = DBitFlipPM(R, derive_key_bytes("pm attack"))
    users = np.arange(n)
    truth = (users % 2).astype(np.int64)
    p, q = (float(v) for v in R.bit_probabilities())
    llr_bit = {1: math.log(p / q), 0: math.log((1 - p) / (1 - q))}

    def decode(reports: list[DBitFlipReports]) -> float:
        score = np.zeros(n)
        for rep in reports:
            w = np.where(rep.bits == 1, llr_bit[1], llr_bit[0])
            score += (w * (rep.buckets == 1)).sum(axis=1) - (w * (rep.buckets == 0)).sum(axis=1)
        return float(((score > 0) == (truth == 1)).mean())  # a tie guesses bucket 0

    bound = math.exp(eps) / (1 + math.exp(eps))
    sd = math.sqrt(bound * (1 - bound) / n)
    memo = decode([PM.report(users, truth) for _ in range(DAYS)])
    fresh = decode([R.sample(truth, _rs(31, n, day)) for day in range(DAYS)])
    assert memo <= bound + Z * sd, (memo, bound)
    assert fresh > bound + Z * sd and fresh > 0.99


def test_attack_alpha_rounding_bounds_a_fluctuating_counter() -> None:
    """Why α-point rounding: a counter that fluctuates inside one grid step (x_t = L + U{0..s−1}
    daily, L = 0 or m − s) visits at most 2 rounded values, so 100 days reveal at most 2 ε-reports:
    the decoder's accuracy is ≤ e^{2ε}/(1 + e^{2ε}) (+5 sd). The broken variant memoizes the raw
    counter (s = 1): every distinct raw value gets a fresh bit, and the majority decodes beyond it."""
    eps, m, s, n = 1.0, 1000, 20, 20_000
    users = np.arange(n)
    truth = users % 2 == 1
    low = np.where(truth, m - s, 0)
    rng = np.random.default_rng(8)
    days = [low + rng.integers(0, s, n) for _ in range(DAYS)]
    key = derive_key_bytes("fluctuating memo")
    rounded = AlphaRoundedOneBitMean(eps, m, s, key)
    raw = AlphaRoundedOneBitMean(eps, m, 1, key)
    assert max(len(np.unique(col)) for col in np.stack([rounded.rounded(users, x) for x in days]).T[:200]) <= 2
    bound = math.exp(2 * eps) / (1 + math.exp(2 * eps))
    sd = math.sqrt(bound * (1 - bound) / n)
    acc = _one_bit_attack(np.stack([rounded.report(users, x) for x in days]), truth)
    broken = _one_bit_attack(np.stack([raw.report(users, x) for x in days]), truth)
    assert acc <= bound + Z * sd, (acc, bound)
    assert broken > bound + Z * sd, (broken, bound)


def test_the_benchmark_command_runs_as_a_process(tmp_path: Path) -> None:
    """docs/telemetry.md's command, small: the table prints and the CSV and PNG are written."""
    root = Path(__file__).resolve().parents[2]
    out = Path(tmp_path) / "bench"
    args = ["--epsilons", "1", "--ns", "2000", "--trials", "5", "--ks", "4", "--ds", "1", "--hist-n", "2000", "--hist-trials", "3", "--out", str(out)]
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "telemetry.py"), *args], cwd=root, capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "MSE ÷ theory" in done.stdout and "what the aggregator learns" in done.stdout
    rows = (out / "telemetry.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0].startswith("mechanism,") and len(rows) == 1 + 2 + 1
    assert (out / "telemetry.png").stat().st_size > 1000
