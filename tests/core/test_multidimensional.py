"""Multidimensional collection (``ldp.core.multidimensional``): SPL, SMP and RS+FD — exact privacy
of the whole record, the paper's formulas checked, unbiased estimates with their stated variance.

Exact audits are deterministic (no false alarms). Every statistical test is seeded and states its
false-alarm rate: the probability, were the code correct, that it would fail for a fresh seed.
Each check runs a broken variant written here that it must catch.
"""

from __future__ import annotations

import csv
import inspect
import math
import subprocess
import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ldp.core.audit import FixedRandomness, verify_exact
from ldp.core.errors import ParameterError
from ldp.core.frequency_oracles import frequency_variance, support_probabilities
from ldp.core.multidimensional import (
    RandomSamplingFakeData,
    RecordChannel,
    SampleOne,
    SplitBudget,
    amplified_epsilon,
    attribute_epsilon,
    one_attribute_loss,
)
from ldp.core.randomizer_base import TWO64, uniform_index, uniform_index_masses, uniform_index_starts
from ldp.core.rng import Draws, RandomSource
from tests.waits import PROCESS_WAIT_S

ROOT = Path(__file__).resolve().parents[2]


def _attrs(*ks: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(range(k)) for k in ks)


# --- exact helpers ---


def test_amplified_epsilon_is_the_papers_and_inverts() -> None:
    """ε′ = ln(d(e^ε − 1) + 1): 1.490 at d = 2 and 2.900 at d = 10 for ε = 1 (the reference's values)."""
    assert round(amplified_epsilon(1.0, 2), 3) == 1.490
    assert round(amplified_epsilon(1.0, 10), 3) == 2.900
    for d in (2, 5, 10):
        assert attribute_epsilon(amplified_epsilon(0.7, d), d) == pytest.approx(0.7, rel=1e-12)


def test_uniform_index_is_exact_multiply_high() -> None:
    """Value i is drawn exactly on [⌈i·2^64/m⌉, ⌈(i+1)·2^64/m⌉): its first and last draw, checked
    against Python's exact integers, for m up to 2^16."""
    for m in (2, 3, 7, 10, 64, 1000, 1 << 16):
        starts = uniform_index_starts(m)
        assert sum(uniform_index_masses(m)) == TWO64
        probe = [s for s in starts] + [s - 1 for s in starts[1:]] + [TWO64 - 1]
        got = uniform_index(np.array(probe, dtype=np.uint64), m)
        assert got.tolist() == [(x * m) >> 64 for x in probe]


# --- exact privacy of the whole record, by enumeration ---

CASES = [
    SplitBudget(1.0, _attrs(2, 3)),
    SplitBudget(2.0, _attrs(2, 2, 2)),
    SplitBudget(1.0, _attrs(2, 2), "oue"),
    SampleOne(1.0, _attrs(2, 3)),
    SampleOne(1.0, _attrs(2, 2), "oue"),
    RandomSamplingFakeData(1.0, _attrs(2, 3), "grr"),
    RandomSamplingFakeData(0.5, _attrs(2, 2, 3), "grr"),
    RandomSamplingFakeData(1.0, _attrs(2, 2), "oue-z"),
]


@pytest.mark.parametrize("protocol", CASES, ids=lambda p: f"{p.kind}-{getattr(p, 'variant', getattr(p, 'oracle', ''))}-{p.ks}")
def test_whole_record_loss_is_at_most_epsilon_and_tight(protocol: object) -> None:
    """``verify_exact``, unchanged, on the channel over whole records: the exact worst ratio over
    every pair of records and every whole report is ≤ e^ε, rows sum exactly, and the real sampler
    fed every cell of every draw (the index, each attribute's oracle, each fake) emits exactly the
    table composed from the oracles' realized masses (the proof's formula). The loss is tight:
    within the oracles' own grid rounding of ε (unary encodings: ≥ (1 − 2^-7)ε)."""
    channel = RecordChannel(protocol)
    audit = verify_exact(channel, check_inputs=4)
    assert audit.passed and audit.sampler_consistent is True, audit
    assert 0.99 * protocol.epsilon <= audit.max_log_ratio <= protocol.epsilon  # type: ignore[attr-defined]


def test_rsfd_oue_r_record_loss() -> None:
    """RS+FD[OUE-r]: the exact loss of its composed channel (the sampler check is the slow test below)."""
    audit = verify_exact(RecordChannel(RandomSamplingFakeData(1.0, _attrs(2, 2), "oue-r")), check_sampler=False)
    assert audit.passed and audit.max_log_ratio == pytest.approx(1.0, rel=1e-2)


@pytest.mark.slow
def test_rsfd_oue_r_sampler_emits_its_channel() -> None:
    """RS+FD[OUE-r]'s sampler fed every cell tuple (~10^4 per record, two records: ~15 s)."""
    audit = verify_exact(RecordChannel(RandomSamplingFakeData(1.0, _attrs(2, 2), "oue-r")), check_inputs=2)
    assert audit.passed and audit.sampler_consistent is True, audit


def test_spl_attribute_budgets_sum_to_at_most_epsilon_exactly() -> None:
    """Σ ε_j ≤ ε in exact rationals for budgets whose float ε/d rounds up, and each oracle's own
    exact audit passes at its ε_j: the sum of realized losses is ≤ ε at any k."""
    from ldp.core.audit_structure import verify_structure

    for eps in (0.1, 0.3, 1.0, 4.0, 7.7):
        for d in (2, 3, 5, 7, 10):
            spl = SplitBudget(eps, _attrs(*([2] * d)))
            assert sum(Fraction(e) for e in spl.attribute_epsilons()) <= Fraction(eps)
    spl = SplitBudget(1.0, _attrs(64, 64, 64), "oue")
    audits = [verify_structure(R) for R in spl.oracles]  # type: ignore[arg-type]
    assert all(a.passed for a in audits) and sum(a.max_log_ratio for a in audits) <= 1.0


@dataclass(frozen=True)
class _SplitOverDMinus1(SplitBudget):
    """Broken: splits ε into ε/(d − 1) per attribute."""

    def attribute_epsilons(self) -> list[float]:
        return [self.epsilon / (self.d - 1)] * self.d


@dataclass(frozen=True)
class _FakeLooksAtTheValue(RandomSamplingFakeData):
    """Broken: the fake value is the true value when the fake draw's top bit is 0."""

    def fake(self, a: int, x: np.ndarray, randomness: Draws) -> np.ndarray:
        honest = super().fake(a, x, randomness)
        return np.where(randomness.bits(0) < np.uint64(1 << 63), x, honest)


@dataclass(frozen=True)
class _IndexFromTheRecord(SampleOne):
    """Broken: the attribute sent is chosen by the record (the first attribute's value), not by the
    user's draw: still ε per report, but the sampler no longer emits the audited channel."""

    def sample(self, records: np.ndarray, randomness: Draws):  # type: ignore[no-untyped-def]
        class Rigged:
            users = randomness.users

            def bits(self, draw: int = 0) -> np.ndarray:
                b = randomness.bits(draw)
                return np.where(np.asarray(records)[:, 0] == 0, np.uint64(0), b) if draw == 0 else b

            def uniform(self, draw: int = 0) -> np.ndarray:  # pragma: no cover
                raise NotImplementedError

        return super().sample(records, Rigged())


def test_the_record_audit_catches_broken_protocols() -> None:
    """Deterministic: SPL at ε/(d − 1) exceeds e^ε; a fake that reads the value and an index that
    reads the record make the sampler emit another channel than the audited one."""
    spl = verify_exact(RecordChannel(_SplitOverDMinus1(1.0, _attrs(2, 2, 2))), check_inputs=2)
    assert not spl.within_epsilon and not spl.passed and spl.max_log_ratio == pytest.approx(1.5, rel=1e-6)
    fake = verify_exact(RecordChannel(_FakeLooksAtTheValue(1.0, _attrs(2, 3), "grr")), check_inputs=4)
    assert fake.sampler_consistent is False and not fake.passed, fake
    index = verify_exact(RecordChannel(_IndexFromTheRecord(1.0, _attrs(2, 2))), check_inputs=4)
    assert index.sampler_consistent is False and not index.passed, index


def test_the_papers_amplified_rsfd_costs_epsilon_prime_per_record() -> None:
    """(verify) The paper's RS+FD runs the sampled attribute at ε′ = ln(d(e^ε − 1) + 1) and states
    ε-LDP. Exactly, over the realized channel:
    - records differing in ONE attribute, equal k: the loss is the paper's ε (its bound
      (e^{ε′} + d − 1)/d = e^ε is attained);
    - whole records (LDP's definition: any two records): the loss is ε′ > ε, which is what
      ``paper`` declares as ``epsilon`` (the charge), so the audit passes on it;
    - unequal k: RS+FD[GRR]'s one-attribute loss exceeds the paper's ε too."""
    for variant in ("grr", "oue-z"):
        rs = RandomSamplingFakeData.paper(1.0, _attrs(2, 2), variant)
        channel = RecordChannel(rs)
        audit = verify_exact(channel, check_sampler=False)
        assert audit.passed and audit.max_log_ratio == pytest.approx(amplified_epsilon(1.0, 2), rel=1e-2)
        assert audit.max_log_ratio > 1.4
        assert one_attribute_loss(channel) == pytest.approx(rs.attribute_epsilon, rel=1e-2)
        assert rs.attribute_epsilon == pytest.approx(1.0)
    grr = RecordChannel(RandomSamplingFakeData.paper(1.0, _attrs(2, 2), "grr"))
    assert one_attribute_loss(grr) == pytest.approx(1.0, abs=1e-9)  # GRR's cells are tight to 2^-60
    unequal = RecordChannel(RandomSamplingFakeData.paper(1.0, _attrs(8, 2), "grr"))
    assert one_attribute_loss(unequal) > 1.15  # ln 3.25 ≈ 1.18: (r⁺_8 + r⁻_2)/(r⁻_8 + r⁻_2)


def test_the_sampled_index_is_the_users_own_draw() -> None:
    """No argument of ``sample`` names the attribute: each user's index is ⌊X·d/2^64⌋ of its own
    draw 0, whatever the aggregator sends (SMP discloses it; RS+FD does not send it)."""
    for cls in (SampleOne, RandomSamplingFakeData):
        assert list(inspect.signature(cls.sample).parameters) == ["self", "records", "randomness"]
    smp = SampleOne(1.0, _attrs(2, 3, 4))
    rng = np.random.default_rng(3)
    n = 300
    draws = {i: rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) for i in range(12)}
    x = np.stack([rng.integers(0, k, n) for k in (2, 3, 4)], axis=1)
    reports = smp.sample(x, FixedRandomness(draws, n))
    assert np.array_equal(reports.sampled, uniform_index(draws[0], 3))  # type: ignore[arg-type]
    assert [len(c) for c in reports.columns] == np.bincount(reports.sampled, minlength=3).tolist()  # type: ignore[arg-type]


def test_records_are_checked_with_one_line_errors() -> None:
    spl = SplitBudget(1.0, _attrs(2, 3))
    with pytest.raises(ParameterError, match="attribute 1 value 5.0 is not one of its categories"):
        spl.sample(np.array([[0, 5]]), RandomSource(0).for_request("t", 0, np.arange(1)))
    with pytest.raises(ParameterError, match=r"records must be an \(n, 2\) array"):
        spl.sample(np.zeros((3, 3)), RandomSource(0).for_request("t", 0, np.arange(3)))
    with pytest.raises(ParameterError, match="variant must be one of"):
        RandomSamplingFakeData(1.0, _attrs(2, 2), "oue-x")
    with pytest.raises(ParameterError, match="d ≥ 2 attributes"):
        SampleOne(1.0, _attrs(4))
    smp = SampleOne(1.0, _attrs(2, 3))
    one = smp.sample(np.array([[0, 2]]), RandomSource(0).for_request("t", 0, np.arange(1)))
    with pytest.raises(ParameterError, match=r"smp: no user sent attribute \d \(n_j = 0\)"):
        smp.frequencies(one)


# --- the estimators: the paper's formulas, exact expectation, unbiasedness, variance ---


def test_the_estimators_are_the_papers_at_nominal_parameters() -> None:
    """(verify) f̂ = (C/n − πq − (1 − π)φ)/(π(p − q)) equals the paper's closed forms at π = 1/d,
    uniform fakes 1/k: GRR [dkC/n − (d−1) − qk]/[k(p−q)], OUE-z d(C/n − q)/(p−q), OUE-r
    [dkC/n − qk − (d−1)(qk + p − q)]/[k(p−q)] (Arcolezi et al. 2021; multi-freq-ldpy's aggregators)."""
    rng = np.random.default_rng(0)
    for d, k, eps in ((2, 2, 1.0), (5, 16, 0.5), (10, 64, 4.0)):
        c = rng.uniform(0, 1, 50)  # C/n
        pi = 1 / d
        e = math.exp(eps)
        p, q = e / (e + k - 1), 1 / (e + k - 1)
        ours = (c - pi * q - (1 - pi) / k) / (pi * (p - q))
        assert np.allclose(ours, (d * k * c - (d - 1) - q * k) / (k * (p - q)), rtol=1e-12)
        p, q = 0.5, 1 / (e + 1)
        assert np.allclose((c - pi * q - (1 - pi) * q) / (pi * (p - q)), d * (c - q) / (p - q), rtol=1e-12)
        phi = q + (p - q) / k
        ours = (c - pi * q - (1 - pi) * phi) / (pi * (p - q))
        assert np.allclose(ours, (d * k * c - q * k - (d - 1) * (q * k + p - q)) / (k * (p - q)), rtol=1e-12)


@pytest.mark.parametrize("variant", ["grr", "oue-z", "oue-r"])
def test_rsfd_expected_estimate_is_the_truth_exactly(variant: str) -> None:
    """Deterministic: from the exact realized channel (``RecordChannel``, checked against the
    sampler above), each attribute's expected support fraction E[C_v/n] over a population, put
    through the estimator, gives back its true frequencies to 1e-12; the estimator without the
    fake-data correction ((C/n − q)/(p − q), the single-attribute one) does not."""
    rs = RandomSamplingFakeData(1.0, _attrs(2, 3), variant)
    channel = RecordChannel(rs)
    weights = np.array([3, 1, 4, 1, 5, 9], dtype=np.float64)  # over the 6 records
    weights /= weights.sum()
    records = channel.records
    for a in range(rs.d):
        keys, _ = channel.tables[a]
        support = np.zeros(rs.ks[a])
        for r, row in enumerate(channel.channel):
            for key, prob in zip(channel.report_keys, row):
                w = keys[key[a]]
                col = np.frombuffer(w, dtype=np.float64) if variant == "grr" else np.frombuffer(w, dtype=np.uint8)[None, :]
                support += weights[r] * float(prob) * rs.support_counts(a, col)
        f_true = np.array([weights[records[:, a] == v].sum() for v in range(rs.ks[a])])
        p, q = (float(x) for x in support_probabilities(rs.oracles[a]))
        pi = float(rs.index_probability(a))
        est = (support - pi * q - (1 - pi) * rs.fake_support(a)) / (pi * (p - q))
        assert np.allclose(est, f_true, atol=1e-12)
        naive = (support - q) / (p - q)
        assert np.abs(naive - f_true).max() > 0.05


def _population(ks: tuple[int, ...], n: int, seed: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
    """A fixed population: each attribute Zipf-like and correlated with the first."""
    rng = np.random.default_rng(seed)
    cols = []
    for k in ks:
        w = 1.0 / np.arange(1, k + 1) ** 1.1
        cols.append(rng.choice(k, size=n, p=w / w.sum()))
    x = np.stack(cols, axis=1)
    x[: n // 4, 1] = x[: n // 4, 0] % ks[1]  # some correlation between attributes
    f = [np.bincount(x[:, j], minlength=k) / n for j, k in enumerate(ks)]
    return x.astype(np.float64), f


KS = (2, 5, 8)
PROTOCOLS = [
    SplitBudget(2.0, _attrs(*KS)),
    SplitBudget(2.0, _attrs(*KS), "oue"),
    SampleOne(2.0, _attrs(*KS)),
    SampleOne(2.0, _attrs(*KS), "olh"),
    RandomSamplingFakeData(2.0, _attrs(*KS), "grr"),
    RandomSamplingFakeData(2.0, _attrs(*KS), "oue-z"),
    RandomSamplingFakeData(2.0, _attrs(*KS), "oue-r"),
]
RUNS, N = 40, 10_000
ALPHA = 1e-3  # family-wise false-alarm rate of each statistical test below


def _runs(P: object, estimator: str = "frequencies") -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """RUNS seeded reports of one fixed population: (estimates, variances) of shape (RUNS, Σk)."""
    x, f = _population(KS, N)
    users = np.arange(N)
    est, var = [], []
    for r in range(RUNS):
        reports = P.sample(x, RandomSource(11).for_request("reports", r, users))  # type: ignore[attr-defined]
        est.append(np.concatenate(getattr(P, estimator)(reports)))
        if isinstance(P, SampleOne):
            v = P.frequency_variance(f, [len(c) for c in reports.columns], N)
        else:
            v = P.frequency_variance(f, N)  # type: ignore[attr-defined]
        var.append(np.concatenate(v))
    return np.array(est), np.array(var), f


def _z(est: np.ndarray, var: np.ndarray, f: list[np.ndarray]) -> np.ndarray:
    """z of the mean over runs: (mean f̂ − f)/√(mean Var/RUNS) (runs independent)."""
    return (est.mean(axis=0) - np.concatenate(f)) / np.sqrt(var.mean(axis=0) / len(est))


Z_CRIT = float(stats.norm.isf(ALPHA / (2 * len(PROTOCOLS) * sum(KS))))  # Bonferroni over every value of every protocol


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: f"{p.kind}-{getattr(p, 'variant', getattr(p, 'oracle', ''))}")
def test_estimates_are_unbiased_with_the_stated_variance(protocol: object) -> None:
    """Seeded, 40 runs of 10^4 users (d = 3, k = 2, 5, 8, ε = 2), fixed population.
    Unbiased: every value's mean estimate is within Z_CRIT (≈ 4.6) standard errors of the truth
    (Bonferroni over the 7 × 15 values: false alarm ≤ 10^-3 in all). Variance: the pooled
    Σ (f̂ − f)²/Var over runs, per attribute, lies in its χ² band at false alarm 10^-3 over the 21 attributes: the mean over an attribute's k values of
    Σ_runs z²/RUNS, each value's Σ_runs z² being χ²_RUNS (Gaussian estimates); the values of one
    attribute are correlated, so each side is taken at level α/(42k) (the mean exceeds c only if
    some value does: a union bound over the k values)."""
    est, var, f = _runs(protocol)
    z = _z(est, var, f)
    assert np.abs(z).max() < Z_CRIT, z
    sq = (est - np.concatenate(f)) ** 2 / var
    at = 0
    a_crit = ALPHA / (2 * 21)
    for k in KS:
        s = sq[:, at : at + k].sum(axis=1).mean() / k  # mean over values: its mean is 1
        at += k
        lo, hi = stats.chi2.ppf(a_crit / k, RUNS) / RUNS, stats.chi2.isf(a_crit / k, RUNS) / RUNS
        assert lo <= s <= hi, (k, s, lo, hi)


@dataclass(frozen=True)
class _NoFakeCorrection(RandomSamplingFakeData):
    """Broken: the single-attribute estimator (C/n − q)/(p − q), as if no fake data were sent."""

    def frequencies(self, reports):  # type: ignore[no-untyped-def]
        out = []
        for a, col in enumerate(reports.columns):
            p, q = (float(v) for v in support_probabilities(self.oracles[a]))
            out.append((self.support_counts(a, col) / reports.n - q) / (p - q))
        return out


@dataclass(frozen=True)
class _WrongVarianceSMP(SampleOne):
    """Broken: SMP's variance as the FO variance with all n users (forgetting the sampling)."""

    def frequency_variance(self, f, counts, n):  # type: ignore[no-untyped-def]
        return [frequency_variance(R, fj, n) for R, fj in zip(self.oracles, f)]


def test_the_statistical_checks_catch_broken_estimators() -> None:
    """The checks above, run on broken variants, fail: RS+FD without the fake-data correction
    (biased) and SMP's variance computed as if every user reported every attribute (too small)."""
    est, var, f = _runs(_NoFakeCorrection(2.0, _attrs(*KS), "grr"))
    assert np.abs(_z(est, var, f)).max() > Z_CRIT
    est, var, f = _runs(_WrongVarianceSMP(2.0, _attrs(*KS)))
    sq = (est - np.concatenate(f)) ** 2 / var
    assert sq[:, :2].sum(axis=1).mean() / 2 > stats.chi2.isf(ALPHA / (42 * 2), RUNS) / RUNS


def test_the_benchmark_runs_as_documented(tmp_path: Path) -> None:
    """``python benchmarks/multidimensional.py`` (docs/multidimensional.md), a small run as a real
    process: it prints the table and saves the CSV and the PNG in ``--out``."""
    out = tmp_path / "md"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "multidimensional.py"), "--ds", "2", "--ks", "2", "--epsilons", "1", "--n", "2000", "--trials", "2", "--min-values", "0", "--out", str(out)],
        capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "MSE ÷ theory" in proc.stdout and "RS+FD[OUE-z]′" in proc.stdout
    with open(out / "multidimensional.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["protocol"] for r in rows] == ["SPL", "SMP", "RS+FD[GRR]", "RS+FD[OUE-z]", "RS+FD[GRR]′", "RS+FD[OUE-z]′"]
    assert (out / "multidimensional.png").stat().st_size > 0
