"""Frequency oracles (``ldp.core.frequency_oracles``): exact privacy, unbiased estimates with their
stated variance, the fast servers, the consistency projection and the adaptive choice.

Exact audits are deterministic (no false alarms). Every statistical test is seeded and states its
false-alarm rate: the probability, were the code correct, that the test would fail for a fresh
seed. Each family runs a broken variant written here that the test must catch — among them
pure-LDP's old OUE bug (the true bit not cleared before the flip).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction
from typing import ClassVar

import numpy as np
import pytest
from scipy import stats

from ldp.core.audit import verify_exact
from ldp.core.audit_structure import enumerated, verify_structure
from ldp.core.errors import ParameterError
from ldp.core.frequency_oracles import (
    HadamardResponse,
    OptimizedLocalHashing,
    OptimizedUnaryEncoding,
    SubsetSelection,
    SymmetricUnaryEncoding,
    choose_oracle,
    frequency_estimates,
    frequency_variance,
    project_simplex,
    unary_coins,
    unary_draws,
    walsh_hadamard,
)
from ldp.core.queries import QuerySpec
from ldp.core.query_specs import field_query
from ldp.core.randomizer_base import ceil_share, rr_cells
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import Draws, RandomSource
from ldp.core.rr_mechanisms import KaryRandomizedResponse
from ldp.core.schema import Field, Schema

EPSILONS = [2.0**-6, 0.25, 1.0, 4.0, 12.0, 45.0, 710.0]
UNARY = [OptimizedUnaryEncoding, SymmetricUnaryEncoding]


# --- exact privacy: by enumeration on small k, by structure on any k ---


@pytest.mark.parametrize("eps", EPSILONS)
def test_enumerated_exact_audit_passes_on_small_k(eps: float) -> None:
    """verify_exact, unchanged, on every report of small instances: exact loss ≤ ε, rows sum
    exactly, log_prob is the realized log, and the sampler fed its cell boundaries emits the table."""
    for R in [cls(eps, tuple(range(k))) for cls in UNARY for k in (2, 3, 5)] + [OptimizedLocalHashing(eps, tuple(range(k))) for k in (2, 3, 4)]:
        audit = verify_exact(enumerated(R))
        assert audit.passed and audit.sampler_consistent is True, (R, audit)
        assert audit.max_log_ratio <= eps
    for k in (2, 3, 6, 100):
        audit = verify_exact(HadamardResponse(eps, tuple(range(k))))
        assert audit.passed and audit.sampler_consistent is True, (k, audit)
    if eps >= 0.25:  # below, subset selection's pick cells need a larger ε than 2^-6 to fit its slack at k = 6
        for k in (2, 3, 5, 6):
            audit = verify_exact(enumerated(SubsetSelection(eps, tuple(range(k)))))
            assert audit.passed and audit.sampler_consistent is True, (k, audit)
            assert eps > 16 or audit.max_log_ratio >= eps * (1 - 2**-19)  # ε(1 − 2^-20): the slack, and no more


def test_structure_audit_matches_enumeration_and_passes_at_large_k() -> None:
    """The loss by structure is the loss by enumeration (it does not depend on k), and the
    structural audit passes on large instances whose reports cannot be enumerated."""
    for eps in (0.25, 1.0, 4.0):
        for cls in UNARY:
            small = verify_exact(enumerated(cls(eps, tuple(range(4)))))
            big = verify_structure(cls(eps, tuple(range(4096))))
            assert big.passed and big.max_log_ratio == small.max_log_ratio
            assert big.max_log_ratio >= eps * (1 - 2**-7)  # tight: the chunk width is chosen for it
        olh = OptimizedLocalHashing(eps, tuple(range(1 << 16)))
        audit = verify_structure(olh)
        a, b = rr_cells(eps, olh.g)
        assert audit.passed and audit.max_log_ratio == pytest.approx(math.log(a / b), rel=1e-12)
        assert verify_structure(HadamardResponse(eps, tuple(range(4096)))).passed
    for eps in (0.25, 1.0, 4.0):
        audit = verify_structure(SubsetSelection(eps, tuple(range(4096))))
        assert audit.passed and eps * (1 - 2**-19) <= audit.max_log_ratio <= eps
    big_g = verify_structure(OptimizedLocalHashing(12.0, tuple(range(1 << 16))))  # g = 2^16: A/B without the g² table
    assert big_g.passed and 11.99 < big_g.max_log_ratio <= 12.0


@dataclass(frozen=True)
class _OUEBugHonest(OptimizedUnaryEncoding):
    """pure-LDP's old OUE: the input's bit is not cleared before the flip, then set w.p. 1/2, so it
    is 1 w.p. q + (1 − q)/2 = (1 + q)/2 — declared honestly (its table is what it samples)."""

    kind: ClassVar[str] = "oue"

    @staticmethod
    def _cells(epsilon: float, b: int) -> tuple[int, int]:
        t_in, t_out = OptimizedUnaryEncoding._cells(epsilon, b)
        return t_in + t_out // 2, t_out  # (1 + q)/2 on the 2^b grid (t_out even below)


@dataclass(frozen=True)
class _OUEBugSampler(OptimizedUnaryEncoding):
    """The same bug in the sampler only: every bit, the input's included, is drawn as 'other',
    then the input's bit is OR-ed with a fair coin from a separate draw; the table is OUE's."""

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        idx = self._index(inputs)
        t_in, t_out = self.thresholds
        bits = np.unpackbits(unary_coins(randomness, self.k, self.chunk_bits, t_out, t_out), axis=1, count=self.k).astype(bool)  # the true bit is not cleared
        coin = randomness.bits(unary_draws(self.k, self.chunk_bits)) < np.uint64(1 << 63)
        bits[np.arange(len(idx)), idx] |= coin
        return np.packbits(bits, axis=1)


def test_audits_catch_pure_ldps_oue_bug() -> None:
    for eps in (0.5, 1.0, 4.0):
        honest = _OUEBugHonest(eps, tuple(range(4)))
        for audit in (verify_exact(enumerated(honest)), verify_structure(_OUEBugHonest(eps, tuple(range(2048))))):
            assert not audit.passed and not audit.within_epsilon
            assert audit.max_log_ratio == pytest.approx(math.log(math.exp(eps) + 2), rel=1e-3)  # (1 + q)/q = e^ε + 2
        # the sampler-only bug: its table claims OUE, the sampler disagrees
        assert not verify_exact(enumerated(_OUEBugSampler(eps, tuple(range(4))))).passed
        structural = verify_structure(_OUEBugSampler(eps, tuple(range(2048))))
        assert not structural.passed and "its threshold" in structural.detail


@dataclass(frozen=True)
class _NoSkipOLH(OptimizedLocalHashing):
    """OLH whose randomized response forgets to skip the hashed value when it does not keep it:
    the "other" cell j reports j itself, so h_A(u) is reported more often than declared."""

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        out = super().sample(inputs, randomness)
        a, b = self.cell_sizes
        x = randomness.bits(0)
        keep = x < np.uint64(a)
        other = (np.where(keep, np.uint64(0), x - np.uint64(a)) // np.uint64(b)).astype(np.uint16)
        hashed = self.hash(out[:, : self.l], self._index(inputs))
        out[:, self.l] = np.where(keep, hashed, other)
        return out


@dataclass(frozen=True)
class _LeakySeedOLH(OptimizedLocalHashing):
    """OLH whose first hash row depends on the input (a seed that is not independent of u)."""

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        out = super().sample(inputs, randomness)
        out[:, 0] ^= (self._index(inputs) & 1).astype(np.uint16)
        out[:, self.l] = super().sample(inputs, randomness)[:, self.l]
        return out


@dataclass(frozen=True)
class _UniformOutsideHR(HadamardResponse):
    """Hadamard Response that, when it does not answer inside C_x, answers uniformly on all of [K]
    instead of on the complement: inside indices get (1 + p)/(1 − p) times the outside ones."""

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        j = super().sample(inputs, randomness)
        inside = randomness.bits(0) < np.uint64(self.cell_sizes[0])
        anywhere = (randomness.bits(1) >> np.uint64(64 - self.M)).astype(np.uint32)
        return np.where(inside, j, anywhere)


@dataclass(frozen=True)
class _SubsetSelectionWithoutSlack(SubsetSelection):
    """Subset selection whose coin is built for ε itself: the pick cells' rounding (2^-64) then
    pushes some ratio above e^ε — by 10^-19, which the exact audit sees."""

    @property
    def cell_sizes(self) -> tuple[int, int]:
        d = self.subset_size
        with localcontext() as ctx:
            ctx.prec, ctx.rounding = 80, ROUND_FLOOR
            shifted = Decimal(self.epsilon) + (Decimal(d) / Decimal(self.k - d)).ln()
        b = ceil_share(2**64, shifted, 2)
        return 2**64 - b, b


@dataclass(frozen=True)
class _SubsetSelectionWithTheTrueValue(SubsetSelection):
    """Subset selection that shuffles categories 0..k−2 instead of the k − 1 others (the true
    value can be picked as an 'other' and category k − 1 never is)."""

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        return SubsetSelection.sample(SubsetSelection(self.epsilon, self.categories), np.full(len(inputs), self.categories[-1]), randomness) | (
            np.packbits(np.eye(self.k, dtype=bool)[self._index(inputs)] & (randomness.bits(0) < np.uint64(self.cell_sizes[0]))[:, None], axis=1)
        )


def test_audits_catch_broken_subset_selection() -> None:
    for eps, k in ((0.25, 5), (0.25, 6), (1.0, 7)):
        audit = verify_exact(enumerated(_SubsetSelectionWithoutSlack(eps, tuple(range(k)))))
        assert not audit.passed and not audit.within_epsilon and audit.max_log_ratio == pytest.approx(eps, rel=1e-12)
    assert not verify_exact(enumerated(_SubsetSelectionWithTheTrueValue(1.0, tuple(range(5))))).passed
    assert not verify_structure(_SubsetSelectionWithTheTrueValue(1.0, tuple(range(1000)))).passed


def test_audits_catch_broken_olh_and_hadamard_samplers() -> None:
    for eps in (1.0, 4.0):
        for R in (_NoSkipOLH(eps, tuple(range(4))), _LeakySeedOLH(eps, tuple(range(4)))):
            assert not verify_exact(enumerated(R)).passed, R
        for R in (_NoSkipOLH(eps, tuple(range(1024))), _LeakySeedOLH(eps, tuple(range(1024)))):
            assert not verify_structure(R).passed, R
        assert not verify_exact(_UniformOutsideHR(eps, tuple(range(5)))).passed
        assert not verify_structure(_UniformOutsideHR(eps, tuple(range(300)))).passed
    assert not verify_structure(_NoSkipOLH(12.0, tuple(range(1 << 16)))).passed


# --- unbiasedness and variance (seeded statistical tests) ---


def _trials(R, f: np.ndarray, n: int, trials: int, seed: int, estimate=frequency_estimates) -> np.ndarray:
    """``trials`` independent estimates from n users whose values follow the exact counts n·f."""
    counts = np.round(f * n).astype(np.int64)
    counts[-1] = n - counts[:-1].sum()
    inputs = np.repeat(np.asarray(R.categories), counts)
    out = []
    for t in range(trials):
        reports = R.sample(inputs, RandomSource(seed).for_request("fo", t, np.arange(n)))
        out.append(estimate(R, reports))
    return np.array(out)


ALPHA = 1e-6  # per test, Bonferroni over the k coordinates and both statistics


def _check_unbiased_and_variance(R, f: np.ndarray, n: int, trials: int, seed: int, variance=frequency_variance, estimate=frequency_estimates) -> tuple[bool, bool]:
    """(mean ok, variance ok). Mean: each coordinate's z = (mean − f)/√(Var/T) within the two-sided
    normal quantile at α/(2k) (the estimates are sums of 10^4 independent bounded terms: normal to
    well within the margin). Variance: the sample variance per coordinate pooled over the k
    coordinates, (T − 1)·Σ s²/Var ~ χ²_{k(T−1)}, within its two-sided α/2 quantiles. False-alarm
    rate ≤ α = 10^-6 in all."""
    est = _trials(R, f, n, trials, seed, estimate)
    counts = np.round(f * n)
    counts[-1] = n - counts[:-1].sum()
    truth = counts / n
    var = variance(R, truth, n)
    k = len(f)
    z = (est.mean(axis=0) - truth) / np.sqrt(var / trials)
    mean_ok = bool(np.abs(z).max() <= stats.norm.isf(ALPHA / (4 * k)))
    pooled = ((trials - 1) * est.var(axis=0, ddof=1) / var).sum()
    df = k * (trials - 1)
    var_ok = bool(stats.chi2.ppf(ALPHA / 4, df) <= pooled <= stats.chi2.isf(ALPHA / 4, df))
    return mean_ok, var_ok


def _oracles(eps: float, k: int) -> list:
    cats = tuple(range(k))
    return [
        OptimizedUnaryEncoding(eps, cats),
        SymmetricUnaryEncoding(eps, cats),
        OptimizedLocalHashing(eps, cats),
        HadamardResponse(eps, cats),
        SubsetSelection(eps, cats),
        SubsetSelection(eps, cats, sampler="bernoulli"),
        KaryRandomizedResponse(eps, cats),
    ]


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_estimates_are_unbiased_with_the_stated_variance(eps: float) -> None:
    f = np.array([0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02] + [0.0] * 9)
    for R in _oracles(eps, 16):
        assert _check_unbiased_and_variance(R, f, 4000, 40, seed=int(eps * 10)) == (True, True), R


def _olh_without_the_hash_correction(R, reports: np.ndarray) -> np.ndarray:
    """The classic OLH slip: dividing by p − q of the g-ary RR instead of p − 1/g."""
    a, b = R.cell_sizes
    p, q = a / 2.0**64, b / 2.0**64
    return (R.support_counts(reports) / len(reports) - q) / (p - q)


def _oue_with_sue_parameters(R, reports: np.ndarray) -> np.ndarray:
    """OUE reports estimated with SUE's p (the parameters swapped between the two encodings)."""
    p = math.exp(R.epsilon / 2) / (math.exp(R.epsilon / 2) + 1)
    q = float(R.support_fractions()[1])
    return (R.support_counts(reports) / len(reports) - q) / (p - q)


def _variance_without_the_signal_term(R, f, n):
    """The usual f → 0 approximation q*(1 − q*)/(n(p* − q*)²), claimed exact for every f."""
    return frequency_variance(R, np.zeros_like(np.asarray(f, dtype=float)), n)


def test_the_statistical_checks_catch_broken_estimators() -> None:
    f = np.array([0.6, 0.2, 0.1, 0.1] + [0.0] * 12)
    olh = OptimizedLocalHashing(1.0, tuple(range(16)))
    assert _check_unbiased_and_variance(olh, f, 4000, 30, seed=5, estimate=_olh_without_the_hash_correction)[0] is False
    oue = OptimizedUnaryEncoding(1.0, tuple(range(16)))
    assert _check_unbiased_and_variance(oue, f, 4000, 30, seed=6, estimate=_oue_with_sue_parameters)[0] is False
    kary = KaryRandomizedResponse(4.0, tuple(range(16)))  # large f·p(1 − p) at ε = 4
    assert _check_unbiased_and_variance(kary, f, 4000, 40, seed=7, variance=_variance_without_the_signal_term)[1] is False


def test_the_variance_formulas_match_the_papers() -> None:
    """At f → 0: OUE and OLH (g = e^ε + 1) 4e^ε/(e^ε−1)², SUE e^{ε/2}/(e^{ε/2}−1)², GRR
    (e^ε + k − 2)/(e^ε−1)² (Wang et al. 2017), up to the cells' rounding and g's power of two."""
    for eps in (1.0, 4.0):
        e = math.exp(eps)
        oue = float(frequency_variance(OptimizedUnaryEncoding(eps, tuple(range(64))), 0.0, 1))
        assert oue == pytest.approx(4 * e / (e - 1) ** 2, rel=1e-3)
        sue = float(frequency_variance(SymmetricUnaryEncoding(eps, tuple(range(64))), 0.0, 1))
        assert sue == pytest.approx(math.exp(eps / 2) / (math.exp(eps / 2) - 1) ** 2, rel=1e-3)
        olh = OptimizedLocalHashing(eps, tuple(range(1024)))
        g = olh.g
        assert float(frequency_variance(olh, 0.0, 1)) == pytest.approx((g - 1 + e) ** 2 / ((e - 1) ** 2 * (g - 1)), rel=1e-9)
        assert float(frequency_variance(olh, 0.0, 1)) <= 1.01 * 4 * e / (e - 1) ** 2
        grr = float(frequency_variance(KaryRandomizedResponse(eps, tuple(range(64))), 0.0, 1))
        assert grr == pytest.approx((e + 62) / (e - 1) ** 2, rel=1e-9)


# --- the servers ---


def test_olh_transform_server_equals_the_direct_definition() -> None:
    rng = np.random.default_rng(3)
    for eps, k in ((1.0, 37), (4.0, 300), (8.0, 1024)):
        R = OptimizedLocalHashing(eps, tuple(range(k)))
        inputs = rng.integers(0, k, 3000).astype(float)
        reports = R.sample(inputs, RandomSource(1).for_request("olh", 0, np.arange(3000)))
        direct = R.support_counts_direct(reports)
        np.testing.assert_array_equal(direct, R.support_counts(reports))
        np.testing.assert_array_equal(direct[inputs.astype(int)] >= 0, True)


def test_hadamard_server_counts_the_reports_in_each_half() -> None:
    R = HadamardResponse(1.0, tuple(range(11)))
    reports = R.sample(np.arange(11.0).repeat(50), RandomSource(2).for_request("hr", 0, np.arange(550)))
    j = reports.astype(np.int64)
    rows = np.arange(1, 12)
    brute = (np.bitwise_count(rows[:, None] & j[None, :]) % 2 == 0).sum(axis=1)
    np.testing.assert_array_equal(R.support_counts(reports), brute)
    assert walsh_hadamard(np.eye(4, dtype=np.int64)[1]).tolist() == [1, -1, 1, -1]


# --- consistency post-processing ---


def test_project_simplex_is_the_euclidean_projection() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        v = rng.normal(0, 0.5, rng.integers(1, 40))
        p = project_simplex(v)
        assert p.min() >= 0 and p.sum() == pytest.approx(1.0)
        # KKT: p = max(v − τ, 0) with one τ: on the support v − p is constant, off it v ≤ τ
        support = p > 0
        tau = (v - p)[support]
        assert np.ptp(tau) < 1e-12 and (v[~support] <= tau[0] + 1e-12).all()
        np.testing.assert_allclose(project_simplex(p), p, atol=1e-15)
    with pytest.raises(ParameterError):
        project_simplex(np.array([np.nan, 1.0]))


def test_projection_is_offered_separately_from_the_unbiased_estimate() -> None:
    R = OptimizedLocalHashing(1.0, tuple(range(64)))
    reports = R.sample(np.zeros(2000), RandomSource(4).for_request("p", 0, np.arange(2000)))
    raw = frequency_estimates(R, reports)
    assert raw.min() < 0  # the unbiased estimate is not clipped
    assert project_simplex(raw).min() == 0.0


# --- specs, the adaptive choice, bad inputs ---

SCHEMA = Schema((Field("x", 1, 0, 999),))


def test_adaptive_choice_follows_wang_et_al() -> None:
    assert choose_oracle(16, 4.0) == "kary_rr" and choose_oracle(1024, 4.0) == "olh" and choose_oracle(11, 1.0) == "olh"
    assert choose_oracle(10, 1.0) == "kary_rr" and choose_oracle(1024, 1.0, prefer="oue") == "oue"
    for eps, kind in ((1.0, OptimizedLocalHashing), (8.0, KaryRandomizedResponse)):
        local = LocalRandomizer.build(RandomizerSpec("adaptive_fo", field_query("x", 0), eps), SCHEMA)
        assert isinstance(local.randomizer, kind)
    local = LocalRandomizer.build(RandomizerSpec("adaptive_fo", field_query("x", 0), 1.0, {"prefer": "oue"}), SCHEMA)
    assert isinstance(local.randomizer, OptimizedUnaryEncoding)


def test_every_kind_builds_from_a_spec_and_estimates_from_its_reports() -> None:
    records = (np.arange(3000) % 7).reshape(-1, 1).astype(np.int16)
    for kind in ("oue", "sue", "olh", "hadamard_response", "subset_selection", "adaptive_fo"):
        local = LocalRandomizer.build(RandomizerSpec(kind, field_query("x", 0), 4.0), SCHEMA)
        reports = local.apply(records, RandomSource(0).for_request(kind, 0, np.arange(3000)))
        est = frequency_estimates(local.randomizer, reports)
        assert est.shape == (1000,) and abs(est[:7].sum() - 1.0) < 0.35, kind


def test_bad_inputs_get_clear_errors() -> None:
    with pytest.raises(ParameterError, match="hash_bits must be an integer in"):
        OptimizedLocalHashing(1.0, tuple(range(8)), 4)
    with pytest.raises(ParameterError, match="at most 65536 categories"):
        OptimizedUnaryEncoding(1.0, tuple(range(70000)))
    with pytest.raises(ParameterError, match="not one of the categories"):
        HadamardResponse(1.0, (0, 1, 2)).sample(np.array([5.0]), RandomSource(0).for_request("x", 0, np.arange(1)))
    with pytest.raises(ParameterError, match="unknown params"):
        LocalRandomizer.build(RandomizerSpec("oue", field_query("x", 0), 1.0, {"hash_bits": 3}), SCHEMA)
    with pytest.raises(ParameterError, match="prefer must be"):
        LocalRandomizer.build(RandomizerSpec("adaptive_fo", field_query("x", 0), 1.0, {"prefer": "grr"}), SCHEMA)
    with pytest.raises(ParameterError, match="small finite set of values"):
        LocalRandomizer.build(RandomizerSpec("olh", QuerySpec("record"), 1.0), SCHEMA)
    with pytest.raises(ParameterError, match="rows of 2 bytes"):
        OptimizedUnaryEncoding(1.0, tuple(range(9))).support_counts(np.zeros((3, 1), dtype=np.uint8))
    assert Fraction(1, 2) == OptimizedUnaryEncoding(1.0, (0, 1)).bit_probabilities()[0]
