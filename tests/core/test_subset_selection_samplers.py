"""Subset Selection's two samplers (``ldp.core.frequency_oracles.SubsetSelection``): Floyd's
algorithm, and Bernoulli draws with a fix-up where d/k is large (``subset_sampler``).

Exact audits are deterministic (no false alarms): the Bernoulli sampler is enumerated at small k
(every chunk pattern, coin and fix-up pick, the sampler fed its cell boundaries) and audited by
its proven bound and a probe of the real sampler at large k. Broken variants written here must be
caught. The one statistical test is seeded and states its false-alarm rate.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ldp.core import frequency_oracles as fo
from ldp.core.audit import verify_exact
from ldp.core.audit_structure import enumerated, verify_structure
from ldp.core.errors import ParameterError
from ldp.core.frequency_oracles import SubsetSelection, frequency_estimates, frequency_variance, subset_sampler
from ldp.core.rng import RandomSource


@pytest.mark.parametrize("k", [3, 4, 5, 6])
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_the_bernoulli_sampler_is_exact_on_every_report(k: int, eps: float) -> None:
    """verify_exact, unchanged, through every report: the realized loss is Floyd's (ε(1 − 2^-20):
    the coin's slack and no more), and the sampler fed every chunk and pick cell's boundaries
    emits the table computed independently from the class docstring."""
    R = SubsetSelection(eps, tuple(range(k)), sampler="bernoulli")
    audit = verify_exact(enumerated(R))
    assert audit.passed and audit.sampler_consistent is True, audit
    floyd = verify_exact(enumerated(SubsetSelection(eps, tuple(range(k)), sampler="floyd")))
    assert audit.max_log_ratio == pytest.approx(floyd.max_log_ratio, abs=1e-15)
    assert eps * (1 - 2**-19) <= audit.max_log_ratio <= eps


def test_the_enumeration_catches_a_fix_up_that_is_not_uniform(monkeypatch: pytest.MonkeyPatch) -> None:
    """Broken variants of the sampler alone (its table stays the definition's): Floyd's picks on
    a biased index (always the largest rank), and a wrong rank → category table (a picked rank
    flips its neighbour). The sampler no longer emits its table, and the audit fails."""
    R = SubsetSelection(1.0, tuple(range(5)), sampler="bernoulli")
    monkeypatch.setattr(fo, "uniform_index", lambda bits, m: np.asarray(m, dtype=np.int64) - 1 + 0 * np.asarray(bits, dtype=np.int64))
    audit = verify_exact(enumerated(R))
    assert not audit.passed and audit.sampler_consistent is False
    monkeypatch.undo()

    monkeypatch.setattr(fo, "_SELECT_BIT", np.roll(fo._SELECT_BIT, 1, axis=1))
    audit = verify_exact(enumerated(R))
    assert not audit.passed and audit.sampler_consistent is False


@pytest.mark.parametrize(("k", "eps"), [(1000, 1.0), (4096, 1.0), (4096, 0.5)])
def test_the_structure_audit_passes_and_catches_broken_samplers_at_large_k(k: int, eps: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """At large k: the proven bound (ε(1 − 2^-20) + ⌊(k − 1)/2⌋·ln((2^64 + k)/(2^64 − k)), exact
    arithmetic) is ≤ ε, and the real sampler, fed chunks at the threshold and random fix-up words,
    reports the definition's subset. A wrong rank → category table, and picks on a biased index,
    are caught by the probe."""
    R = SubsetSelection(eps, tuple(range(k)), sampler="bernoulli")
    audit = verify_structure(R)
    assert audit.passed and audit.sampler_consistent, audit
    assert "bernoulli" in audit.method and audit.max_log_ratio <= eps
    monkeypatch.setattr(fo, "_SELECT_BIT", np.roll(fo._SELECT_BIT, 1, axis=1))
    assert not verify_structure(R).passed
    monkeypatch.undo()
    real = fo.uniform_index
    monkeypatch.setattr(fo, "uniform_index", lambda bits, m: np.minimum(real(bits, m) + 1, np.asarray(m, dtype=np.int64) - 1))
    assert not verify_structure(R).passed


def test_the_sampler_choice_and_its_refusals() -> None:
    """"auto" is ``subset_sampler(k, d)``: Bernoulli where k ≥ 1024 and d² ≥ 25·k (the issue's
    k = 2^16, ε = 1 cell), else Floyd. An unknown sampler is refused in one line."""
    assert subset_sampler(16, 4) == "floyd" and subset_sampler(512, 500) == "floyd"
    assert subset_sampler(1024, 159) == "floyd"  # 159² < 25,600
    assert subset_sampler(1024, 160) == "bernoulli"
    assert subset_sampler(1 << 16, 17_625) == "bernoulli" and subset_sampler(1 << 16, 1_179) == "floyd"
    assert SubsetSelection(1.0, tuple(range(1 << 16))).method == "bernoulli"
    assert SubsetSelection(4.0, tuple(range(1 << 16))).method == "floyd"
    with pytest.raises(ParameterError, match=r"sampler must be one of auto, floyd, bernoulli, got 'fisher'"):
        SubsetSelection(1.0, tuple(range(8)), sampler="fisher")


@pytest.mark.parametrize(("k", "eps"), [(37, 0.7), (1000, 1.0), (2048, 1.0)])
def test_bernoulli_reports_do_not_depend_on_the_blocks(k: int, eps: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same reports, bit for bit, whatever the block of users and the fix-up's step groups
    (k not a multiple of 8 included); each names exactly d categories."""
    R = SubsetSelection(eps, tuple(float(c) for c in range(k)), sampler="bernoulli")
    n = 1_500
    inputs = (np.arange(n) * 7 % k).astype(np.float64)
    draws = RandomSource(3).for_request("ss-bernoulli", 0, np.arange(n))
    want = R.sample(inputs, draws)
    assert (np.unpackbits(want, axis=1, count=k).sum(axis=1) == R.subset_size).all()
    monkeypatch.setattr(fo, "_SS_BERNOULLI_BYTES", 7 * k)
    monkeypatch.setattr(fo, "_SS_FIX_STEPS", 2)
    assert np.array_equal(R.sample(inputs, draws), want)


def test_bernoulli_estimates_are_unbiased_with_the_stated_variance(monkeypatch: pytest.MonkeyPatch) -> None:
    """k = 2048, ε = 1 (the "auto" choice there): over 30 trials of 3,000 users each, the
    per-category z of the mean estimate within the two-sided normal quantile at α/(2k), and the
    pooled variance (T − 1)·Σ s²/Var ~ χ²_{k(T − 1)} within its two-sided α/2 quantiles.
    False-alarm rate ≤ α = 10^-6. A broken variant — the fix-up's picks on an index stuck at 0
    (Floyd then flips rank 0 and the pool's top ranks: the high categories' members) — is caught."""
    k, n, trials, alpha = 2048, 3_000, 30, 1e-6
    R = SubsetSelection(1.0, tuple(range(k)))
    assert R.method == "bernoulli"
    f = np.zeros(k)
    f[:5] = [0.4, 0.3, 0.2, 0.07, 0.03]
    x = np.repeat(np.arange(k), np.round(f * n).astype(int))
    truth = np.bincount(x, minlength=k) / n

    def estimates(sample) -> np.ndarray:  # type: ignore[no-untyped-def]
        out = np.empty((trials, k))
        for t in range(trials):
            draws = RandomSource(21).for_request("ss-stat", t, np.arange(len(x)))
            out[t] = frequency_estimates(R, sample(x.astype(np.float64), draws))
        return out

    def check(est: np.ndarray) -> bool:
        var = frequency_variance(R, truth, len(x))
        z = (est.mean(axis=0) - truth) / np.sqrt(var / trials)
        pooled = ((trials - 1) * est.var(axis=0, ddof=1) / var).sum()
        df = k * (trials - 1)
        return bool(np.abs(z).max() <= stats.norm.isf(alpha / (4 * k)) and stats.chi2.ppf(alpha / 4, df) <= pooled <= stats.chi2.isf(alpha / 4, df))

    assert check(estimates(R.sample))
    monkeypatch.setattr(fo, "uniform_index", lambda bits, m: np.zeros(np.broadcast_shapes(np.shape(bits), np.shape(m)), dtype=np.int64))
    assert not check(estimates(R.sample))
