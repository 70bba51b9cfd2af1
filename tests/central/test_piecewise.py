"""Piecewise RecConcave (BNS §3.3, Remark 3.17) and the THRESH_d learners at any d.

The piecewise top level must reproduce the dense RecConcave exactly (whose privacy is checked exactly in
test_learners.py): its pieces (L(j), the top two of each partition) are compared with the dense ones on
random inputs, and its sampled outputs against the dense exact distribution, with a broken variant
(unshifted second partition) caught by the same check.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldp.central import piecewise
from ldp.central.piecewise import (
    PiecewiseQuality,
    partition_top_two,
    piecewise_exponential_mechanism,
    piecewise_window_max_min,
    rec_concave_piecewise,
    uniform_below,
)
from ldp.central.rec_concave import _interval_max, _pad, interval_partitions, rec_concave_distribution, window_max_min
from ldp.central.stability import top_two
from ldp.central.thresholds import (
    learn_thresholds_approx,
    learn_thresholds_pure,
    threshold_qualities,
    threshold_quality_pieces,
)


def _random_pieces(rng: np.random.Generator) -> PiecewiseQuality:
    T = int(rng.integers(2, 300))
    cuts = sorted(set(rng.integers(1, T + 1, size=int(rng.integers(0, 8))).tolist()))
    starts = (0, *cuts)
    return PiecewiseQuality(starts, tuple(float(v) for v in rng.integers(-3, 10, size=len(starts))), T)


def test_piecewise_pieces_equal_dense_on_random_qualities() -> None:
    """L(j) (step 3) and the top two of both 8K-partitions (step 9) agree with the dense code on 200 random Q."""
    rng = np.random.default_rng(31)
    for _ in range(200):
        Q = _random_pieces(rng)
        Qd = _pad(Q.dense())
        Qp = piecewise._padded(Q)
        assert np.array_equal(Qp.dense(), Qd)
        assert np.array_equal(piecewise_window_max_min(Qp), window_max_min(Qd))
        Tp = Qd.size - 1
        for k in range(Tp.bit_length()):
            A, B = interval_partitions(Tp, 1 << k)
            for iv, off in ((A, 0), (B, 4 << k)):
                i1, s1, s2, count = partition_top_two(Qp, 8 << k, off)
                assert count == iv.shape[0]
                if count:
                    assert (i1, s1, s2) == top_two(_interval_max(Qd, iv))


def test_threshold_pieces_equal_dense_qualities() -> None:
    rng = np.random.default_rng(32)
    x = rng.integers(0, 2**10, size=300)
    y = (x < 400).astype(np.int8)
    y[:10] ^= 1
    assert np.array_equal(threshold_quality_pieces(x, y, 10).dense(), threshold_qualities(x, y, 10))


def _freq_gap(sampler, Q: PiecewiseQuality, exact: np.ndarray, n: int, rng: np.random.Generator) -> float:
    draws = np.array([sampler(Q, 40.0, 0.25, 0.5, 0.05, 2, rng) for _ in range(n)])
    freq = np.bincount(draws, minlength=exact.size) / n
    return float(np.max(np.abs(freq - exact) / (np.sqrt(exact * (1 - exact) / n) + 1e-3)))


def test_piecewise_sampler_matches_dense_exact_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    """T = 128, N = 2 (one recursion level): 8,000 draws of the piecewise sampler against the dense exact
    distribution, every outcome within 5 standard errors (+1e-3); false alarm < 129·6e-7 ≈ 1e-4.
    Broken variant: the second partition not shifted by 4K (both at offset 0) — caught by the same check."""
    x = np.array([40] * 30 + [41] * 30 + [90] * 3)
    y = np.array([1] * 30 + [0] * 30 + [1] * 3, dtype=np.int8)
    Q = threshold_quality_pieces(x, y, 7)
    exact = rec_concave_distribution(Q.dense(), 40.0, 0.25, 0.5, 0.05, 2)
    assert _freq_gap(rec_concave_piecewise, Q, exact, 8000, np.random.default_rng(33)) <= 5
    monkeypatch.setattr(piecewise, "_partition_offsets", lambda K: (0, 0))
    assert _freq_gap(rec_concave_piecewise, Q, exact, 8000, np.random.default_rng(33)) > 5


def test_piecewise_exponential_mechanism_big_domain() -> None:
    """T = 2^1000: exact piece probabilities (len·e^{εQ/2}) and uniform position inside the chosen piece."""
    T = 2**1000
    Q = PiecewiseQuality((0, 2**999, 2**999 + 1), (0.0, 30.0, 0.0), T)
    rng = np.random.default_rng(34)
    draws = [piecewise_exponential_mechanism(Q, 1.0, rng) for _ in range(2000)]
    # the single point 2^999 has weight e^15 against 2^1000 ≈ e^693 for the rest: never chosen
    assert all(0 <= j <= T for j in draws) and 2**999 not in draws
    assert 0.45 < np.mean([j < 2**999 for j in draws]) < 0.55
    assert uniform_below(1, rng) == 0 and 0 <= uniform_below(2**700, rng) < 2**700
    with pytest.raises(ValueError, match="strictly increasing"):
        PiecewiseQuality((0, 5, 5), (0.0, 1.0, 2.0), 10)


def test_threshold_learners_at_1024_bits_show_the_crossover() -> None:
    """Two-point hard distribution (t−1 labelled 1, t labelled 0), α = 0.1, ε = 1, δ = 1e-6, d = 1024 bits
    (N = 3 levels), m = 1600: RecConcave finds t in ≥ 27/30 runs (measured 40/40), the pure exponential
    mechanism in ≤ 3/30 (measured 0/40: it needs ≈ 4(d ln 2 + ln 10) ≈ 2,850). False alarms < 1e-3."""
    rng = np.random.default_rng(35)
    d, m = 1024, 1600
    t = 1 + uniform_below(2**d - 1, rng)
    wins = {"approx": 0, "pure": 0}
    for _ in range(30):
        y = (rng.random(m) < 0.5).astype(np.int8)
        x = np.full(m, t, dtype=object)
        x[y == 1] = t - 1
        res = learn_thresholds_approx(x, y, d, 0.1, 1.0, 1e-6, rng)
        wins["approx"] += res.hypothesis.threshold == t
        wins["pure"] += learn_thresholds_pure(x, y, d, 1.0, rng).hypothesis.threshold == t
    assert res.details["N"] == 3 and res.epsilon == 1.0
    assert wins["approx"] >= 27 and wins["pure"] <= 3
