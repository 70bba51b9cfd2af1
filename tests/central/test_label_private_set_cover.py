"""Label-private learner (BNS §6) and SetCoverLearner (KMMS §3): exact privacy + reference utility."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ldp.central.label_private import (
    label_private_threshold_distribution,
    learn_points_label_private,
    learn_thresholds_label_private,
    threshold_candidates,
)
from ldp.central.privacy_checks import max_log_ratio, symmetric_delta
from ldp.central.set_cover import (
    ConjunctionHypothesis,
    learn_conjunction_set_cover,
    set_cover_iterations,
    set_cover_parameters,
    set_cover_sequence_distribution,
)
from ldp.core.exponential_mechanism import exponential_probabilities


def test_label_private_exact_label_dp() -> None:
    """All 2^8 labelings of fixed points; neighbours flip one label. Broken: ε/Δ instead of ε/(2Δ)."""
    x = np.array([3, 9, 1, 12, 5, 9, 14, 2])
    eps, m1 = 0.8, 3
    worst, worst_b = 0.0, 0.0
    for labels in itertools.product([0, 1], repeat=8):
        y = np.array(labels, dtype=np.int8)
        H, p = label_private_threshold_distribution(x, y, m1, eps)
        assert H.tolist() == threshold_candidates(x[:m1]).tolist()  # H ignores labels
        q = ((x[m1:][None, :] < H[:, None]) == (y[m1:][None, :] == 1)).sum(1)
        pb = exponential_probabilities(q, eps, exponent_scale=1.0)
        for i in range(8):
            y2 = y.copy()
            y2[i] ^= 1
            _, p2 = label_private_threshold_distribution(x, y2, m1, eps)
            q2 = ((x[m1:][None, :] < H[:, None]) == (y2[m1:][None, :] == 1)).sum(1)
            worst = max(worst, max_log_ratio(p, p2))
            worst_b = max(worst_b, max_log_ratio(pb, exponential_probabilities(q2, eps, exponent_scale=1.0)))
    assert worst <= eps + 1e-12 and worst_b > eps


def test_label_private_utility_flat_in_domain() -> None:
    """Thm 6.2: sample size independent of |X|; same m works at d = 8 and d = 60."""
    rng = np.random.default_rng(31)
    for d in (8, 60):
        wins = 0
        for _ in range(30):
            t = int(rng.integers(1, 2**d))
            x = rng.integers(0, 2**d, size=300)
            x[:150] = np.clip(t + rng.integers(-40, 40, size=150), 0, 2**d - 1)  # mass around t
            y = (x < t).astype(np.int8)
            h = learn_thresholds_label_private(x, y, d, 100, 1.0, rng).hypothesis
            err = np.mean(h.predict(x[100:]) != y[100:])
            wins += err <= 0.1
        assert wins >= 27
    xp = np.array([5, 5, 7, 5, 5, 5, 7, 5])
    yp = (xp == 5).astype(np.int8)
    assert learn_points_label_private(xp, yp, 16, 3, 2.0, rng).privacy == "label"


def _set_cover_delta(eps_hat: float | None) -> float:
    types = [((a, b), c) for a in (0, 1) for b in (0, 1) for c in (0, 1)]
    msets = list(itertools.combinations_with_replacement(range(8), 3))
    dists = {}
    for ms in msets:
        x = np.array([types[i][0] for i in ms], dtype=np.uint8)
        y = np.array([types[i][1] for i in ms])
        dists[ms] = set_cover_sequence_distribution(x, y, 1, 0.45, 0.45, 0.5, 0.1, eps_hat=eps_hat)
    keys = sorted(dists[msets[0]])
    vec = {ms: np.array([dists[ms].get(k, 0.0) for k in keys]) for ms in msets}
    worst = 0.0
    for ms in msets:
        assert abs(vec[ms].sum() - 1) < 1e-9
        for i in range(3):
            for t in range(8):
                nb = tuple(sorted(ms[:i] + ms[i + 1 :] + (t,)))
                worst = max(worst, float(symmetric_delta(vec[ms], vec[nb], 0.5)))
    return worst


def test_set_cover_exact_privacy_tiny_instance() -> None:
    """d = 2, k = 1, α = 0.45 (T = 3), n = 3, all 120 multisets × all replace-one neighbours, (0.5, 0.1)."""
    assert _set_cover_delta(None) <= 0.1
    assert _set_cover_delta(5.0) > 0.1  # broken: selection at ε̂ = 10ε instead of ε/(2 ln(e/δ))


def test_set_cover_parameters_and_reference_utility() -> None:
    prm = set_cover_parameters(3, 0.1, 0.1, 0.99, 1e-6)
    assert prm["T"] == set_cover_iterations(3, 0.1) == 18
    assert prm["eps_hat"] == pytest.approx(0.99 / (2 * (1 + np.log(1e6))), rel=1e-12)
    with pytest.raises(ValueError, match="epsilon in \\(0, 1\\)"):
        set_cover_parameters(3, 0.1, 0.1, 1.0, 1e-6)
    with pytest.raises(ValueError, match="delta < 1/e"):
        set_cover_parameters(3, 0.1, 0.1, 0.5, 0.4)
    rng = np.random.default_rng(32)
    d = 50
    res = {}
    for n in (2000, 10_000):
        wins = 0
        for _ in range(8):
            lits = rng.choice(2 * d, 3, replace=False)
            target = ConjunctionHypothesis(tuple(int(v) for v in lits), d)
            x = (rng.random((n, d)) < 0.5).astype(np.uint8)
            h = learn_conjunction_set_cover(x, target.predict(x), 3, 0.1, 0.1, 0.99, 1e-6, rng).hypothesis
            xt = (rng.random((20_000, d)) < 0.5).astype(np.uint8)
            wins += np.mean(h.predict(xt) != target.predict(xt)) <= 0.1
        res[n] = wins
    assert res[10_000] >= 7 and res[2000] <= 3  # reference: n = 1e4 succeeds, n ≤ 2e3 collapses
