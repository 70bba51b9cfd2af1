"""Exact privacy checks of the Laplace / exponential mechanisms, A_dist and the Choosing Mechanism.

Every privacy test also runs a deliberately broken variant (written here) through the same harness
and asserts that it is caught, so the harness can fail.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ldp.central.choosing import (
    choosing_distribution,
    choosing_mechanism,
    choosing_min_sample_size,
)
from ldp.central.laplace_mechanism import laplace_log_density, laplace_mechanism, laplace_sf
from ldp.central.privacy_checks import max_log_ratio, symmetric_delta
from ldp.central.stability import (
    a_dist,
    a_dist_pass_probability,
    a_dist_success_gap,
    a_dist_threshold,
)
from ldp.core.exponential_mechanism import (
    TAIL,
    exponential_log_probabilities,
    exponential_mechanism,
    exponential_probabilities,
)

# ----------------------------------------------------------------------------------------------------
# exponential mechanism: exhaustive check (d = 2 bits, n = 3 labelled examples, POINT_2 ∪ THRESH_2 as H)


def _all_hypotheses_d2() -> np.ndarray:
    """Prediction table of every Boolean function on {0,1,2,3} (16 hypotheses × 4 points)."""
    return np.array(list(itertools.product([0, 1], repeat=4)), dtype=np.int8)


def _em_dist(db: tuple[tuple[int, int], ...], eps: float, broken: bool = False) -> np.ndarray:
    H = _all_hypotheses_d2()
    x = np.array([e[0] for e in db])
    y = np.array([e[1] for e in db])
    correct = (H[:, x] == y).sum(axis=1)
    if broken:  # ε/Δ instead of ε/(2Δ)
        return exponential_probabilities(correct, eps, exponent_scale=1.0)
    return exponential_probabilities(correct, eps)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_exponential_mechanism_exhaustive_pure_dp(eps: float) -> None:
    examples = [(x, y) for x in range(4) for y in (0, 1)]
    worst, worst_broken = 0.0, 0.0
    for db in itertools.product(examples, repeat=3):
        p = _em_dist(db, eps)
        pb = _em_dist(db, eps, broken=True)
        assert abs(p.sum() - 1) < 1e-12
        for i in range(3):
            for e in examples:
                nb = db[:i] + (e,) + db[i + 1 :]
                worst = max(worst, max_log_ratio(p, _em_dist(nb, eps)))
                worst_broken = max(worst_broken, max_log_ratio(pb, _em_dist(nb, eps, broken=True)))
    assert worst <= eps + 1e-12
    assert worst >= 0.5 * eps  # a large part of the bound is attained: the check is not vacuous
    assert worst_broken > eps  # the broken variant (ε/Δ instead of ε/(2Δ)) is caught


def test_exponential_sampler_matches_definition_and_tail() -> None:
    rng = np.random.default_rng(1)
    scores = np.array([3.0, 1.0, 0.0, 2.5])
    p = exponential_probabilities(scores, 1.0, tail_size=10, tail_score=1.5)
    n = 200_000
    draws = np.array([exponential_mechanism(scores, 1.0, rng, tail_size=10, tail_score=1.5) for _ in range(n)])
    freq = np.array([(draws == i).mean() for i in range(4)] + [(draws == TAIL).mean()])
    # 6-sigma binomial bands: false-alarm rate < 1e-8 per cell.
    sd = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(freq - p) <= 6 * sd)


def test_exponential_handles_huge_domains() -> None:
    rng = np.random.default_rng(2)
    # POINT_512: one point with quality 0, 2^512 − 1 points with quality −300 (ε = 1)
    lp = exponential_log_probabilities([0.0], 1.0, tail_size=2**512 - 1, tail_score=-300.0)
    expected_tail = 512 * math.log(2) - 150
    assert lp[1] == pytest.approx(expected_tail - np.logaddexp(0, expected_tail), rel=1e-12)
    assert exponential_mechanism([1e7, 0.0], 1.0, rng) == 0


@pytest.mark.parametrize(
    "kwargs,msg",
    [
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=float("nan")), "epsilon"),
        (dict(epsilon=float("inf")), "epsilon"),
        (dict(epsilon=1.0, tail_size=-1), "tail_size"),
    ],
)
def test_exponential_validation(kwargs: dict, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        exponential_probabilities([1.0, 2.0], **kwargs)


# ----------------------------------------------------------------------------------------------------
# Laplace mechanism: exact density ratio on a fine output grid, neighbouring counts 0/1, and a halved scale


def test_laplace_density_ratio_and_halved_scale_caught() -> None:
    eps = 0.7
    ys = np.linspace(-50, 50, 20001)
    good = np.max(np.abs(laplace_log_density(ys, 0.0, 1 / eps) - laplace_log_density(ys, 1.0, 1 / eps)))
    broken = np.max(np.abs(laplace_log_density(ys, 0, 0.5 / eps) - laplace_log_density(ys, 1, 0.5 / eps)))
    assert good <= eps + 1e-12 and good >= eps - 1e-9
    assert broken > 1.9 * eps
    rng = np.random.default_rng(3)
    out = laplace_mechanism(np.zeros(200_000), 1.0, eps, rng)
    # Pr[|Y| > 1/eps] = e^{-1}; 6-sigma band
    frac = np.mean(np.abs(out) > 1 / eps)
    assert abs(frac - math.exp(-1)) < 6 * math.sqrt(0.25 / 200_000)


# ----------------------------------------------------------------------------------------------------
# A_dist: exact δ at stated ε over all count vectors of 3 bins (c ≤ 80), replace-one neighbours


def _adist_exact(counts: np.ndarray, pass_prob) -> np.ndarray:
    """Output distribution over (bin0, bin1, bin2, ⊥) for all count vectors (rows)."""
    order = np.argsort(-counts, axis=1, kind="stable")
    s = np.take_along_axis(counts, order, axis=1)
    p1 = pass_prob(s[:, 0] - s[:, 1])
    out = np.zeros((counts.shape[0], 4))
    out[np.arange(counts.shape[0]), order[:, 0]] = p1
    out[:, 3] = 1 - p1
    return out


def _adist_worst_delta(pass_prob, eps: float, cmax: int = 80) -> float:
    g = np.arange(cmax + 1)
    c = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    P = _adist_exact(c, pass_prob)
    worst = 0.0
    moves = [(i, j) for i in range(3) for j in range(3) if i != j] + [(i, None) for i in range(3)]
    for i, j in moves:  # replace one element of bin i by one of bin j (or by an element of no bin)
        c2 = c.copy()
        c2[:, i] -= 1
        if j is not None:
            c2[:, j] += 1
        ok = (c2 >= 0).all(1) & (c2 <= cmax).all(1)
        P2 = _adist_exact(c2[ok], pass_prob)
        worst = max(worst, float(symmetric_delta(P[ok], P2, eps).max()))
    return worst


def test_a_dist_exact_delta_safe_constants() -> None:
    eps, delta = 1.0, 1e-6
    worst = _adist_worst_delta(lambda gap: a_dist_pass_probability(gap, eps, delta), eps)
    assert worst <= delta
    assert worst > 1e-7  # close to the target: the computation is not vacuous (reference: 8.2e-7)


def test_a_dist_printed_bns_constants_are_not_private() -> None:
    eps, delta = 1.0, 1e-6
    # Broken variant = BNS as printed: Lap(1/ε), threshold ln(1/δ)/ε.
    printed = lambda gap: laplace_sf(math.log(1 / delta) / eps - gap, 1 / eps)  # noqa: E731
    worst = _adist_worst_delta(printed, eps)
    assert worst > 0.3  # reference spec: 0.363


def test_a_dist_sampler_matches_exact_pass_probability() -> None:
    eps, delta = 1.0, 1e-6
    thr = a_dist_threshold(eps, delta)
    rng = np.random.default_rng(4)
    scores = np.array([thr + 1.0, 0.0, 0.0])
    n = 100_000
    hits = sum(a_dist(scores, eps, delta, rng) == 0 for _ in range(n))
    p = float(a_dist_pass_probability(thr + 1.0, eps, delta))
    assert abs(hits / n - p) < 6 * math.sqrt(p * (1 - p) / n)
    # utility statement: gap ≥ (4/ε)ln(1/(βδ)) ⇒ success ≥ 1 − β/2
    beta = 0.1
    assert a_dist_pass_probability(a_dist_success_gap(eps, delta, beta), eps, delta) >= 1 - beta / 2
    assert a_dist([5.0], eps, delta, rng) == 0  # single solution
    assert a_dist([], eps, delta, rng, tail_size=1, tail_score=0.0) == -1


@pytest.mark.parametrize("eps,delta", [(0.0, 1e-6), (1.0, 0.0), (1.0, 1.0), (2.0, 1e-6), (float("nan"), 0.1)])
def test_a_dist_validation(eps: float, delta: float) -> None:
    with pytest.raises(ValueError):
        a_dist([1.0, 0.0], eps, delta, np.random.default_rng(0))


# ----------------------------------------------------------------------------------------------------
# Choosing mechanism: exact δ on the worst-case family; refusal below the minimum sample size


def _choosing_family_delta(m: int, alpha: float, eps: float) -> float:
    """Worst δ(ε) over the structured family: j heavy elements of count c, plus s singletons.

    Neighbour: one singleton x is replaced by another copy of a heavy element, so x leaves G(S)
    (the event with unbounded privacy loss that the minimum sample size controls), and vice versa.
    """
    worst = 0.0
    for c in range(1, m + 1, max(1, m // 200)):
        for s in (1, 2, 3, 5, 10):
            j, rem = divmod(m - s, c)
            if j < 1:
                continue
            counts = np.array([c] * j + ([rem] if rem else []) + [1] * s, dtype=float)
            nb = counts.copy()
            nb[-1] = 0.0
            nb[0] += 1.0
            pb, pf = choosing_distribution(counts, m, alpha, eps)
            qb, qf = choosing_distribution(nb, m, alpha, eps)
            P = np.append(pf, pb)
            Q = np.append(qf, qb)
            worst = max(worst, float(symmetric_delta(P, Q, eps)))
    return worst


def test_choosing_exact_delta_above_and_below_minimum() -> None:
    alpha, eps, delta = 0.1, 1.0, 1e-6
    m_min = choosing_min_sample_size(alpha, eps, delta)
    assert m_min == 3023  # reference spec M5
    assert _choosing_family_delta(m_min, alpha, eps) <= delta
    # Broken variant: the mechanism run below its minimum sample size (reference: δ ≈ 1.4e-2 at m = 100).
    d100 = _choosing_family_delta(100, alpha, eps)
    assert 5e-3 < d100 < 5e-2
    assert _choosing_family_delta(400, alpha, eps) > 1e-4


def test_choosing_refuses_below_minimum_with_message() -> None:
    rng = np.random.default_rng(5)
    with pytest.raises(ValueError, match=r"needs m ≥ 3023 .* got m=100"):
        choosing_mechanism([60.0, 40.0], 100, 0.1, 1.0, 1e-6, rng)
    counts = np.array([2000.0, 1000.0, 23.0])
    out = choosing_mechanism(counts, 3023, 0.1, 1.0, 1e-6, rng)
    assert out == 0
