"""LMM (CHS Algorithm 1) and report-noisy-max: constants, exact privacy, utility vs the exponential mechanism."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldp.central.large_margin import (
    large_margin_mechanism,
    lmm_distribution,
    lmm_T,
    lmm_t,
    lmm_theorem3_error,
    lmm_theorem3_margin,
    report_noisy_max,
    report_noisy_max_distribution,
)
from ldp.central.privacy_checks import symmetric_delta
from ldp.core.exponential_mechanism import exponential_probabilities


def test_lmm_constants_match_reference() -> None:
    assert float(lmm_T(1, 1, 1.0, 1e-6)) == pytest.approx(414.9, abs=0.05)
    assert float(lmm_T(10, 1, 1.0, 1e-6)) == pytest.approx(476.8, abs=0.05)
    assert float(lmm_T(100, 1, 1.0, 1e-6)) == pytest.approx(544.9, abs=0.05)
    assert float(lmm_T(1000, 1, 1.0, 1e-6)) == pytest.approx(613.8, abs=0.05)
    assert float(lmm_t(1, 1, 1.0, 1e-6)) == pytest.approx(95.5, abs=0.05)
    assert float(lmm_T(1, 1, 1.0, 1e-3)) == pytest.approx(228.4, abs=0.05)
    assert float(lmm_T(1, 1, 0.5, 1e-6)) == pytest.approx(823.8, abs=0.05)
    assert float(lmm_T(1, 1, 0.1, 1e-6)) == pytest.approx(4095.2, abs=0.05)


def _family(n: int) -> list[np.ndarray]:
    """Histogram count vectors (K = 3) around ties and around the margin threshold n·T(1) ≈ 123."""
    out = []
    for g1 in (0, 1, 2, 5, 20, 60, 100, 120, 125, 130, 150, 200):
        for g2 in (0, 1, 3, 30, 125):
            c1 = (n + g1 + g1 + g2) // 3 + 1
            c2 = c1 - g1
            c3 = n - c1 - c2
            if c3 >= 0 and c3 <= c2:
                out.append(np.array([c1, c2, c3], dtype=float))
    return out


def _worst_delta(n: int, eps: float, delta: float, T_func=None) -> float:
    worst = 0.0
    for c in _family(n):
        p, _ = lmm_distribution(c / n, n, eps, delta, T_func=T_func, grid_points=20_001)
        for i in range(3):
            for j in range(3):
                if i == j or c[i] == 0:
                    continue
                c2 = c.copy()
                c2[i] -= 1
                c2[j] += 1
                q, _ = lmm_distribution(c2 / n, n, eps, delta, T_func=T_func, grid_points=20_001)
                worst = max(worst, float(symmetric_delta(p, q, eps)))
    return worst


def test_lmm_exact_delta_and_broken_variant_caught() -> None:
    n, eps, delta = 300, 1.0, 0.05
    worst = _worst_delta(n, eps, delta)
    assert worst <= delta  # CHS Theorem 2 (measured: LMM is very conservative)
    # Broken variant: margin test without the offset T(ℓ) — the top-ℓ set becomes unstable.
    broken = _worst_delta(n, eps, delta, T_func=lambda r: np.zeros_like(r))
    assert broken > delta


def test_lmm_distribution_matches_sampler() -> None:
    n, eps, delta = 200, 1.0, 0.05
    f = np.array([150, 30, 20]) / n
    p, _ = lmm_distribution(f, n, eps, delta)
    rng = np.random.default_rng(11)
    N = 20_000
    draws = np.array([large_margin_mechanism(f, n, eps, delta, rng).index for _ in range(N)])
    freq = np.bincount(draws, minlength=3) / N
    assert np.all(np.abs(freq - p) <= 6 * np.sqrt(p * (1 - p) / N) + 1e-9)  # 6σ: false alarm < 1e-8


def test_lmm_beats_exponential_mechanism_when_lnK_exceeds_n_eps_over_2() -> None:
    """CHS eq. (1): D = (1,…,1), f(1) = 1, all other K−1 items 0. ln K = 277 > nε/2 = 250."""
    n, eps, delta, K = 500, 1.0, 1e-6, 2**400
    em_success = float(exponential_probabilities([n * 1.0], eps, tail_size=K - 1, tail_score=0.0)[0])
    assert em_success < 1e-10
    assert em_success == pytest.approx(math.exp(n * eps / 2) / (K - 1 + math.exp(n * eps / 2)), rel=1e-9)
    rng = np.random.default_rng(12)
    wins = sum(
        large_margin_mechanism([1.0], n, eps, delta, rng, tail_size=K - 1).index == 0 for _ in range(60)
    )
    assert wins >= 57  # reference success 1.000; if p ≥ 0.99, P[wins < 57] < 0.003
    # below the margin threshold (n = 300) LMM cannot pass its test and falls back (fails like EM)
    out = large_margin_mechanism([1.0], 300, eps, delta, rng, tail_size=K - 1, max_steps=1 << 12)
    assert out.truncated


def test_lmm_theorem3_bound() -> None:
    n, eps, delta, eta, ell_star = 2000, 1.0, 1e-6, 0.1, 20
    gamma = lmm_theorem3_margin(ell_star, n, eps, delta, eta)
    bound = lmm_theorem3_error(ell_star, n, eps, eta)
    assert gamma == pytest.approx(0.284, abs=1e-3) and bound == pytest.approx(0.018, abs=1e-3)
    rng = np.random.default_rng(13)
    f = np.full(2000, 0.9 - gamma - 0.01)
    f[:ell_star] = np.linspace(0.89, 0.9, ell_star)
    errs = [0.9 - f[large_margin_mechanism(f, n, eps, delta, rng).index] for _ in range(200)]
    assert np.mean(np.array(errs) <= bound) >= 0.95


def _rnm_worst_log_ratio(scale: float) -> float:
    worst = 0.0
    for c in ([0, 0, 0], [3, 0, 0], [6, 5, 0], [10, 2, 1], [4, 4, 4]):
        c = np.array(c, dtype=float)
        p = report_noisy_max_distribution(c, scale)
        for i in range(3):
            for j in range(3):
                if i != j:
                    c2 = c.copy()
                    c2[i] -= 1
                    c2[j] += 1
                    q = report_noisy_max_distribution(c2, scale)
                    worst = max(worst, float(np.max(np.abs(np.log(p) - np.log(q)))))
    return worst


def test_report_noisy_max_exact_and_textbook_scale_caught() -> None:
    eps = 1.0
    assert _rnm_worst_log_ratio(2.0 / eps) <= eps + 1e-6
    # Broken variant: the textbook Lap(1/ε), valid only for add/remove + monotone counts.
    assert _rnm_worst_log_ratio(1.0 / eps) > eps
    rng = np.random.default_rng(14)
    assert sum(report_noisy_max([0.5, 0.1, 0.2], 100, eps, rng) == 0 for _ in range(200)) >= 190


def test_lmm_validation() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="delta"):
        large_margin_mechanism([1.0, 0.0], 10, 1.0, 0.0, rng)
    with pytest.raises(ValueError, match="epsilon"):
        large_margin_mechanism([1.0, 0.0], 10, -1.0, 0.1, rng)
