"""Base-Cut and Norm-Hyb (Wang et al., NDSS 2020; Norm-Hyb from the authors' code), and the
registry's number-of-reports argument (ldp.core.frequency_estimators).

Random inputs are seeded (each run is the same draw); the statistical check states its false-alarm
rate, and each check is run on a deliberately broken variant written here to show it catches it.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

import ldp
from ldp.core.errors import ParameterError
from ldp.core.frequency_estimators import (
    BASE_CUT_ALPHA,
    ESTIMATORS,
    base_cut,
    base_pos,
    cut_threshold,
    estimate,
    estimate_frequencies,
    norm_hyb,
    norm_sub,
)
from ldp.core.frequency_oracles import OptimizedUnaryEncoding, frequency_estimates, frequency_variance, support_probabilities
from ldp.core.rng import RandomSource


def _is_distribution(f: np.ndarray) -> bool:
    return bool(f.min() >= 0 and abs(f.sum() - 1) <= 1e-9)


def _random_estimates(rng: np.random.Generator, trial: int) -> np.ndarray:
    """Noisy estimates of a distribution: small or large noise, some with large negative mass
    (a block of values near −0.3), some with values above 1 (tiny n)."""
    k = int(rng.integers(2, 60))
    f = rng.dirichlet(np.full(k, 0.3)) + rng.normal(0, (0.3, 0.02, 0.1)[trial % 3], size=k)
    if trial % 4 == 0:
        f[: max(1, k // 3)] -= 0.3  # large negative mass
    if trial % 7 == 0:
        f[0] += 1.2  # an estimate above 1
    return f


# --- Norm-Hyb ---


def _norm_hyb_moving_fixed(f: np.ndarray, threshold: float) -> np.ndarray:
    """Broken Norm-Hyb: the shift also goes to the estimates above θ (that is, Norm-Sub's
    positives-only iteration, with nothing held fixed)."""
    est = f.copy()
    for _ in range(len(est) + 2):
        est[est <= 0] = 0.0
        change = est > 0
        est[change] += (1.0 - est.sum()) / change.sum()
        if abs(est.sum() - 1) <= 1e-12 and est.min() >= 0:
            break
    return est


def _norm_hyb_one_pass(f: np.ndarray, threshold: float) -> np.ndarray:
    """Broken Norm-Hyb: one shift of the adjustable estimates, no repeat (negatives can remain)."""
    theta = min(1.0, threshold)
    est = np.maximum(f, 0.0)
    change = (est > 0) & (f <= theta)
    if change.any():
        est[change] += (1.0 - est.sum()) / change.sum()
    return est


def test_norm_hyb_is_a_distribution_and_keeps_the_significant_estimates() -> None:
    """600 seeded random f̃ and thresholds: the output sums to 1 (1e-9) and is non-negative; when the
    estimates above θ = min(1, threshold) sum to less than 1 and some estimate lies in (0, θ], they
    are returned unchanged (bit for bit: the corner case is the only one that moves them). The
    broken variants fail: the one that moves the fixed estimates the second check, the one-pass
    one the first."""
    rng = np.random.default_rng(26)
    checked = moved = not_dist = 0
    for trial in range(600):
        f = _random_estimates(rng, trial)
        threshold = float(rng.choice([0.0, rng.uniform(0, 0.1), rng.uniform(0, 0.3), rng.uniform(0, 2.0)]))
        out = norm_hyb(f, threshold)
        assert _is_distribution(out), (trial, f, threshold)
        theta = min(1.0, threshold)
        fixed = f > theta
        if fixed.any() and f[fixed].sum() < 1 and ((f > 0) & ~fixed).any():
            checked += 1
            assert np.array_equal(out[fixed], f[fixed]), trial
            moved += not np.array_equal(_norm_hyb_moving_fixed(f, threshold)[fixed], f[fixed])
        not_dist += not _is_distribution(_norm_hyb_one_pass(f, threshold))
    assert checked > 80 and moved > 0.9 * checked and not_dist > 50, (checked, moved, not_dist)


def test_norm_hyb_hand_computed() -> None:
    # θ = 0.15: 0.7 is fixed; total 1.07 → shift −0.0175 to the four others; 0.01 goes to −0.0075,
    # is zeroed; total 1.0075 → shift −0.0025 to the remaining three.
    f = np.array([0.7, 0.12, 0.1, 0.01, 0.14])
    assert norm_hyb(f, 0.15) == pytest.approx([0.7, 0.1, 0.08, 0.0, 0.12], abs=1e-12)
    assert norm_hyb(f, 0.15)[0] == 0.7  # exactly
    assert norm_sub(f) != pytest.approx(norm_hyb(f, 0.15), abs=1e-6)  # Norm-Sub moves 0.7 too
    assert norm_hyb(f, 0.0) == pytest.approx(norm_sub(f), abs=1e-12)  # θ = 0: all fixed, total > 1: the projection
    below = np.array([0.5, -0.1, -0.2])  # nothing in (0, θ] and the fixed 0.5 < 1: the corner case,
    assert norm_hyb(below, 0.3) == pytest.approx([2 / 3, 1 / 6, 1 / 6], abs=1e-12)  # Norm-Sub of [0.5, 0, 0]
    assert norm_hyb(np.array([1.5, -0.5]), 10.0) == pytest.approx([1.0, 0.0], abs=1e-12)  # θ = min(1, 10)
    already = np.array([0.5, 0.3, 0.2])
    assert np.array_equal(norm_hyb(already, 0.25), already)


# --- Base-Cut ---


def _base_cut_two_sided(f: np.ndarray, threshold: float) -> np.ndarray:
    """Broken Base-Cut: a two-sided test, keeping estimates with |f̂| > θ (large negatives survive)."""
    return np.where(np.abs(f) > threshold, f, 0.0)


def test_base_cut_limits() -> None:
    """θ → ∞ zeroes everything; θ → 0 is Base-Pos; the two-sided variant fails the second."""
    rng = np.random.default_rng(3)
    caught = 0
    for trial in range(200):
        f = _random_estimates(rng, trial)
        assert not base_cut(f, np.inf).any() and not base_cut(f, 1e300).any()
        assert np.array_equal(base_cut(f, 0.0), base_pos(f))
        assert np.array_equal(base_cut(f, 1e-300), base_pos(f)) or (np.abs(f) <= 1e-300).any()
        caught += not np.array_equal(_base_cut_two_sided(f, 0.0), base_pos(f))
    assert caught > 150
    assert base_cut(np.array([0.7, 0.1, 0.3, -0.05]), 0.1).tolist() == [0.7, 0.0, 0.3, 0.0]  # > θ, not ≥


def test_cut_threshold_is_the_bonferroni_quantile_of_the_null_sd() -> None:
    R = ldp.KaryRandomizedResponse(1.0, tuple(range(64)))
    p, q = support_probabilities(R)
    n = 100_000
    sd0 = float(np.sqrt(frequency_variance(R, 0.0, n)))  # the MI's exact sd at f = 0
    z = NormalDist().inv_cdf(1 - BASE_CUT_ALPHA / 64)
    assert cut_threshold(64, n, p, q) == pytest.approx(z * sd0, rel=1e-12)
    assert cut_threshold(64, n, p, q, alpha=0.01) > cut_threshold(64, n, p, q)
    with pytest.raises(ParameterError, match="k must be"):
        cut_threshold(0, n, p, q)
    with pytest.raises(ParameterError, match="number of reports"):
        cut_threshold(64, 0, p, q)
    with pytest.raises(ParameterError, match="alpha"):
        cut_threshold(64, n, p, q, alpha=1.0)


def _cut_without_bonferroni(f: np.ndarray, n: int, p: float, q: float) -> np.ndarray:
    """Broken Base-Cut: the per-value level α instead of α/k."""
    sigma = np.sqrt(q * (1 - q) / (n * (p - q) ** 2))
    return base_cut(f, NormalDist().inv_cdf(1 - BASE_CUT_ALPHA) * sigma)


def test_base_cut_family_wise_error_is_at_most_alpha() -> None:
    """GRR, k = 64, ε = 1, n = 10^5 users of whom 56 values are held by nobody; 400 seeded
    draws of the report histogram (the exact multinomial law of ldp's realized p*, q*). Bonferroni
    bounds the chance that any of the 56 true zeros survives by 56·α/64 = 0.044 (normal
    approximation; the binomial skew at n·q* ≈ 1500 adds a few per cent). The check allows 36 of 400
    (P[Binomial(400, 0.046) > 36] = 6e-5: the false-alarm rate). Without the Bonferroni correction
    the rate is ≈ 1 − 0.95^56 = 0.94, and the same check catches it. The three largest true values
    (f ≥ 0.15, 7 sd above θ = 0.047) always survive."""
    k, n, eps = 64, 100_000, 1.0
    R = ldp.KaryRandomizedResponse(eps, tuple(range(k)))
    p_star, q_star = support_probabilities(R)
    p, q = float(p_star), float(q_star)
    counts = np.zeros(k, dtype=int)
    counts[:8] = [40_000, 20_000, 15_000, 10_000, 6_000, 4_000, 3_000, 2_000]
    A = np.full((k, k), q) + (p - q) * np.eye(k)
    rng = np.random.default_rng(2026)
    false_any = broken_any = 0
    for _ in range(400):
        hist = sum(rng.multinomial(m, A[:, v]) for v, m in enumerate(counts) if m)
        f_mi = (np.asarray(hist) / n - q) / (p - q)
        out = estimate("base_cut", f_mi, p_star, q_star, n=n)
        assert (out[:3] > 0).all()
        false_any += bool(out[8:].any())
        broken_any += bool(_cut_without_bonferroni(f_mi, n, p, q)[8:].any())
    assert false_any <= 36
    assert broken_any > 36


# --- the registry: n ---


def test_registry_needs_n_for_the_cut_methods() -> None:
    f = np.array([0.6, 0.3, 0.05, 0.1, -0.05])
    for name in ("base_cut", "norm_hyb"):
        assert ESTIMATORS[name].needs_n
        with pytest.raises(ParameterError, match=f"{name} needs the number of reports n"):
            estimate(name, f, 0.5, 0.25)
        for bad in (0, -3, True, 2.5):
            with pytest.raises(ParameterError, match="must be an integer ≥ 1"):
                estimate(name, f, 0.5, 0.25, n=bad)  # type: ignore[arg-type]
    assert [s.name for s in ESTIMATORS.values() if s.needs_n] == ["base_cut", "norm_hyb"]
    for name in ESTIMATORS:  # the others ignore n: the same bits with and without it
        if not ESTIMATORS[name].needs_n:
            assert np.array_equal(estimate(name, f, 0.5, 0.25), estimate(name, f, 0.5, 0.25, n=10))
    theta = cut_threshold(5, 1000, 0.5, 0.25)
    assert np.array_equal(estimate("base_cut", f, 0.5, 0.25, n=1000), base_cut(f, theta))
    assert np.array_equal(estimate("norm_hyb", f, 0.5, 0.25, n=1000), norm_hyb(f, theta))


def test_estimate_frequencies_passes_the_number_of_reports() -> None:
    """OUE reports are rows of packed bits: n is the number of rows (users), not of bytes."""
    k, n = 32, 20_000
    R = OptimizedUnaryEncoding(1.0, tuple(range(k)))
    inputs = np.repeat(np.arange(4, dtype=np.float64), n // 4)  # 28 of 32 values held by nobody
    reports = R.sample(inputs, RandomSource(4).for_request("cut", 0, np.arange(n)))
    mi = frequency_estimates(R, reports)
    p, q = support_probabilities(R)
    theta = cut_threshold(k, n, p, q)
    assert np.array_equal(estimate_frequencies(R, reports, "base_cut"), base_cut(mi, theta))
    hyb = estimate_frequencies(R, reports, "norm_hyb")
    assert np.array_equal(hyb, norm_hyb(mi, theta)) and _is_distribution(hyb)
    assert np.array_equal(hyb[:4], mi[:4])  # the four held values are significant and kept as they are
