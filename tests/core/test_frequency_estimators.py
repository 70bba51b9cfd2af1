"""IBU, the closed-form MLE and the consistency post-processing (ldp.core.frequency_estimators).

Statistical checks are seeded (fixed report keys / numpy seeds, so each run is the same draw);
each states its false-alarm rate under the model, and each is run on a deliberately broken variant
to show it catches it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest

import ldp
from ldp.core.errors import ParameterError
from ldp.core.frequency_estimators import (
    ESTIMATORS,
    SymmetricChannel,
    base_pos,
    channel_of,
    estimate,
    estimate_frequencies,
    estimator_spec,
    ibu,
    ibu_run,
    mle_symmetric,
    norm,
    norm_cut,
    norm_mul,
    norm_sub,
    observed_distribution,
    post_pos,
    symmetric_channel,
)
from ldp.core.frequency_oracles import (
    OptimizedLocalHashing,
    OptimizedUnaryEncoding,
    frequency_estimates,
    frequency_variance,
    project_simplex,
    support_probabilities,
)
from ldp.core.rng import RandomSource

Z_BONF = 4.5  # |z| > 4.5 has probability 6.8e-6 per coordinate under a normal law: ≤ 1e-4 over ≤ 16 coordinates


# --- IBU ---


def _ibu_transposed(observed: np.ndarray, A: np.ndarray, iters: int = 20_000) -> np.ndarray:
    """Broken IBU: the channel used as A[v, y] (transposed) in the update."""
    B = A.T
    theta = np.full(B.shape[1], 1.0 / B.shape[1])
    for _ in range(iters):
        theta = theta * (B.T @ (observed / (B @ theta)))
        theta /= theta.sum()
    return theta


def _general_channel_sample(seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A non-symmetric 4 × 4 column-stochastic channel, a fixed population of n = 10^5 and one
    seeded draw of every user's output: (A, true f, observed ô, the MI estimate's sd)."""
    A = np.array([[0.55, 0.10, 0.20, 0.05], [0.25, 0.60, 0.05, 0.10], [0.15, 0.20, 0.65, 0.15], [0.05, 0.10, 0.10, 0.70]])
    counts = np.array([40_000, 30_000, 20_000, 10_000])
    n = int(counts.sum())
    rng = np.random.default_rng(seed)
    out = sum(rng.multinomial(c, A[:, v]) for v, c in enumerate(counts))
    o = np.asarray(out, dtype=np.float64) / n
    f = counts / n
    # Cov ô = Σ_v (n_v/n²)(diag a_v − a_v a_vᵀ) for a fixed population; MI = A⁻¹ô.
    cov = sum((c / n**2) * (np.diag(A[:, v]) - np.outer(A[:, v], A[:, v])) for v, c in enumerate(counts))
    Ainv = np.linalg.inv(A)
    sd = np.sqrt(np.diag(Ainv @ cov @ Ainv.T))
    return A, f, o, sd


def _within_ci(estimate_: np.ndarray, truth: np.ndarray, sd: np.ndarray) -> bool:
    return bool((np.abs(estimate_ - truth) <= Z_BONF * sd).all())


def test_ibu_recovers_a_general_channel_and_the_transposed_channel_is_caught() -> None:
    """False alarm ≤ 1e-4 (4 coordinates at 4.5 sd; the truth is interior, so IBU → MLE → MI's law)."""
    A, f, o, sd = _general_channel_sample()
    r = ibu_run(o, A)
    assert r.converged and r.iterations < 10_000
    assert _within_ci(r.estimate, f, sd)
    assert np.allclose(r.estimate, np.linalg.solve(A, o), atol=1e-9)  # interior: the MLE is the MI estimate
    assert not _within_ci(_ibu_transposed(o, A), f, sd)


def test_ibu_on_grr_reports_converges_to_the_truth() -> None:
    """k = 8 GRR at ε = 1, n = 10^5, one seeded draw; IBU within 4.5 exact MI sd of the truth
    (false alarm ≤ 8·6.8e-6 ≈ 5e-5) and equal to the closed-form MLE to 1e-8."""
    k, n = 8, 100_000
    rr = ldp.KaryRandomizedResponse(1.0, tuple(range(k)))
    counts = np.array([25_000, 20_000, 15_000, 12_000, 10_000, 8_000, 6_000, 4_000])
    inputs = np.repeat(np.arange(k, dtype=np.float64), counts)
    reports = rr.sample(inputs, RandomSource(11).for_request("ibu", 0, np.arange(n)))
    f = counts / n
    sd = np.sqrt(frequency_variance(rr, f, n))
    p, q = support_probabilities(rr)
    o = observed_distribution(frequency_estimates(rr, reports), p, q)
    assert np.allclose(o, np.bincount(reports.astype(int), minlength=k) / n, atol=1e-12)  # GRR: ô is the histogram
    channel = symmetric_channel(p, q, k)
    assert channel.p + (k - 1) * channel.q == pytest.approx(1.0, abs=1e-15)  # the exact transition
    r = ibu_run(o, channel)
    assert r.converged
    assert _within_ci(r.estimate, f, sd)
    assert np.allclose(r.estimate, mle_symmetric(o, channel), atol=1e-8)
    # the same check catches a channel built at the wrong ε (a mismatched p, q)
    wrong = symmetric_channel(*support_probabilities(ldp.KaryRandomizedResponse(2.0, tuple(range(k)))), k)
    assert not _within_ci(ibu(o, wrong), f, sd)


def test_ibu_on_oue_pseudo_likelihood_is_near_the_truth() -> None:
    """OUE k = 16 at ε = 2, n = 10^5: the pseudo-likelihood IBU within 4.5 MI sd of the truth
    (false alarm ≤ 16·6.8e-6 ≈ 1e-4; an interior truth, so IBU ≈ MI to first order)."""
    k, n = 16, 100_000
    R = OptimizedUnaryEncoding(2.0, tuple(range(k)))
    counts = np.full(k, n // k)
    reports = R.sample(np.repeat(np.arange(k, dtype=np.float64), counts), RandomSource(5).for_request("oue", 0, np.arange(n)))
    f = counts / n
    sd = np.sqrt(frequency_variance(R, f, n))
    est = estimate_frequencies(R, reports, "ibu")
    assert est.min() >= 0 and est.sum() == pytest.approx(1.0, abs=1e-12)
    assert _within_ci(est, f, sd)


def test_ibu_is_deterministic_and_stops_by_its_rule() -> None:
    A, _, o, _ = _general_channel_sample()
    a, b = ibu_run(o, A), ibu_run(o, A)
    assert a.iterations == b.iterations and np.array_equal(a.estimate, b.estimate)
    capped = ibu_run(o, A, max_iter=3)
    assert (capped.iterations, capped.converged) == (3, False)
    loose = ibu_run(o, A, tol=1e-3)
    assert loose.converged and loose.iterations < a.iterations


def test_ibu_refuses_bad_input() -> None:
    A, _, o, _ = _general_channel_sample()
    with pytest.raises(ParameterError, match="columns"):
        ibu(o, A.T * 1.5)
    with pytest.raises(ParameterError, match="distribution"):
        ibu(o * 2, A)
    with pytest.raises(ParameterError, match="max_iter"):
        ibu(o, A, max_iter=0)
    with pytest.raises(ParameterError, match="probability 0"):
        ibu(np.array([0.5, 0.5]), np.array([[1.0, 1.0], [0.0, 0.0]]))


# --- IBU acceleration (SQUAREM): the same fixed point as plain EM ---


def _plain_em(o: np.ndarray, A: np.ndarray, tol: float, max_iter: int) -> tuple[np.ndarray, int]:
    """The plain IBU loop as it was before acceleration (dense channel): the reference for bits."""
    theta = np.full(A.shape[1], 1.0 / A.shape[1])
    support = o > 0
    for t in range(1, max_iter + 1):
        ratio = np.zeros_like(o)
        np.divide(o, A @ theta, out=ratio, where=support)
        nxt = theta * (A.T @ ratio)
        if np.abs(nxt - theta).max() < tol:
            return nxt, t
        theta = nxt
    return theta, max_iter


def _grr_observed(k: int, eps: float, seed: int) -> tuple[np.ndarray, SymmetricChannel]:
    """ô of one seeded draw of n = 10^5 GRR reports (ldp's realized p*, q*) from a Zipf(1.5) population."""
    c = channel_of(ldp.KaryRandomizedResponse(eps, tuple(range(k))))
    w = np.arange(1, k + 1) ** -1.5
    counts = np.round(100_000 * w / w.sum()).astype(int)
    A = c.matrix()
    rng = np.random.default_rng(seed)
    out = sum(rng.multinomial(m, A[:, v]) for v, m in enumerate(counts) if m)
    return np.asarray(out, dtype=np.float64) / float(np.sum(out)), c


def _squarem_without_stepback(o: np.ndarray, c: SymmetricChannel, tol: float = 1e-12, max_iter: int = 10_000) -> np.ndarray:
    """Broken acceleration: ``_ibu_squarem`` less its step back into the open simplex (the
    extrapolation θ0 − 2αr + α²v is used even where it is ≤ 0)."""
    F = lambda t: t * c.apply(o / c.apply(t))  # noqa: E731
    loglik = lambda t: float(o @ np.log(np.abs(c.apply(t))))  # noqa: E731
    theta, done, step_max = np.full(c.k, 1.0 / c.k), 0, 1.0
    ll0 = loglik(theta)
    while done < max_iter:
        t1, t2 = F(theta), F(F(theta))
        done += 2
        if np.abs(t2 - t1).max() < tol:
            return t2
        r, v = t1 - theta, t2 - 2 * t1 + theta
        alpha = max(min(-np.sqrt((r @ r) / (v @ v)), -1.0), -step_max)
        nxt = F(theta - 2 * alpha * r + alpha**2 * v)
        done += 1
        ll = loglik(nxt)
        if not ll >= ll0:
            nxt, ll, step_max = t2, loglik(t2), max(1.0, step_max / 4)
        elif alpha == -step_max:
            step_max *= 4
        theta, ll0 = nxt, ll
    return theta


def test_plain_ibu_is_the_previous_loop_bit_for_bit() -> None:
    A, _, o, _ = _general_channel_sample()
    ref, t = _plain_em(o, A, 1e-12, 10_000)
    r = ibu_run(o, A, accelerate=False)
    assert r.iterations == t and np.array_equal(r.estimate, ref)
    o16, c16 = _grr_observed(16, 4.0, 0)
    ref16, t16 = _plain_em(o16, c16.matrix(), 1e-12, 10_000)
    r16 = ibu_run(o16, c16, accelerate=False)
    assert r16.iterations == t16 and np.allclose(r16.estimate, ref16, atol=1e-15, rtol=0)  # O(k) products: rounding only


@pytest.mark.parametrize("k,eps,seed", [(8, 1.0, 0), (32, 2.0, 2), (128, 4.0, 4)])
def test_accelerated_ibu_reaches_plain_ibus_fixed_point(k: int, eps: float, seed: int) -> None:
    """SQUAREM and plain EM, both run to a step < 1e-14, agree to 1e-9 with each other and with the
    closed-form MLE (these cells have boundary zeros at k = 32 and 128), in far fewer updates.
    Deterministic (no false alarm: one seeded ô per cell)."""
    o, c = _grr_observed(k, eps, seed)
    fast = ibu_run(o, c, tol=1e-14)
    slow = ibu_run(o, c, tol=1e-14, accelerate=False, max_iter=200_000)
    assert fast.converged and slow.converged and fast.iterations * 10 < slow.iterations
    mle = mle_symmetric(o, c)
    assert np.abs(fast.estimate - slow.estimate).max() <= 1e-9
    assert np.abs(fast.estimate - mle).max() <= 1e-9
    assert fast.estimate.min() >= 0 and fast.estimate.sum() == pytest.approx(1.0, abs=1e-12)


def test_accelerated_ibu_on_a_dense_channel() -> None:
    A, _, o, _ = _general_channel_sample()
    fast, slow = ibu_run(o, A), ibu_run(o, A, accelerate=False)
    assert fast.converged and fast.iterations < slow.iterations
    assert np.abs(fast.estimate - slow.estimate).max() <= 1e-9
    assert np.abs(fast.estimate - np.linalg.solve(A, o)).max() <= 1e-9


@pytest.mark.parametrize("seed", [5, 7, 9])
def test_accelerated_ibu_stays_on_the_simplex_and_the_no_stepback_variant_is_caught(seed: int) -> None:
    """k = 1024, ε = 1 (most of the MLE on the boundary, where plain EM stays capped far away): the
    accelerated IBU converges at the default tol, is a distribution, is within 1e-5 of the MLE (the
    stopping rule on one EM step leaves the slowest boundary values, EM rate up to 0.99999, at most
    that far: plain EM at the same rule would stop there too, after ~10^6 updates) and has a higher
    likelihood than plain EM capped at 10^4. Without the step back, extrapolations below 0 are
    kept, and EM cannot leave them: the broken variant ends with negative entries."""
    o, c = _grr_observed(1024, 1.0, seed)
    r = ibu_run(o, c)
    assert r.converged and r.estimate.min() >= 0 and r.estimate.sum() == pytest.approx(1.0, abs=1e-12)
    mle = mle_symmetric(o, c)
    assert np.abs(r.estimate - mle).max() <= 1e-5
    assert _loglik(o, c, r.estimate) >= _loglik(o, c, ibu(o, c, accelerate=False))
    assert _squarem_without_stepback(o, c).min() < 0


def test_the_module_examples_run() -> None:
    import doctest

    import ldp.core.frequency_estimators as module

    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted >= 10


# --- MLE ---


def _loglik(o: np.ndarray, c: SymmetricChannel, theta: np.ndarray) -> float:
    return float(np.sum(o * np.log(c.q + (c.p - c.q) * theta)))


def _grid_argmax(o: np.ndarray, c: SymmetricChannel, steps: int) -> tuple[np.ndarray, float]:
    """Brute force: the likelihood on every point of the simplex grid with spacing 1/steps."""
    best, arg = -np.inf, np.zeros(c.k)
    for head in itertools.product(range(steps + 1), repeat=c.k - 1):
        if sum(head) > steps:
            continue
        theta = np.array(list(head) + [steps - sum(head)]) / steps
        ll = _loglik(o, c, theta)
        if ll > best:
            best, arg = ll, theta
    return arg, best


def _mle_as_clipped_mi(o: np.ndarray, c: SymmetricChannel) -> np.ndarray:
    """Broken MLE: the MI estimate clipped at 0 and renormalized (Norm-Mul), a common stand-in."""
    return norm_mul((o - c.q) / (c.p - c.q))


@pytest.mark.parametrize("k,eps,seed", [(3, 0.5, 0), (3, 2.0, 1), (4, 1.0, 2), (4, 0.3, 3)])
def test_mle_is_the_brute_force_argmax(k: int, eps: float, seed: int) -> None:
    """Small-sample ô (n = 30, so MI often goes negative) on GRR channels: the closed form's
    likelihood is ≥ every grid point's, and it lies within one grid cell of the grid argmax;
    the broken variant (clipped, renormalized MI) is caught by the same likelihood check."""
    p, q = support_probabilities(ldp.KaryRandomizedResponse(eps, tuple(range(k))))
    c = symmetric_channel(p, q, k)
    rng = np.random.default_rng(seed)
    caught = 0
    for _ in range(5):
        o = rng.multinomial(30, rng.dirichlet(np.ones(k))) / 30
        theta = mle_symmetric(o, c)
        assert theta.min() >= 0 and theta.sum() == pytest.approx(1.0, abs=1e-12)
        steps = 120 if k == 3 else 40
        arg, best = _grid_argmax(o, c, steps)
        assert _loglik(o, c, theta) >= best - 1e-12
        assert np.abs(theta - arg).max() <= 1.5 / steps + 1e-12 or _loglik(o, c, arg) >= _loglik(o, c, theta) - 1e-9
        caught += _loglik(o, c, _mle_as_clipped_mi(o, c)) < best - 1e-9
    assert caught > 0


def test_mle_equals_mi_when_every_mi_estimate_is_positive_and_ibu_at_convergence() -> None:
    c = symmetric_channel(0.5, 0.1, 6)  # 0.5 + 5·0.1 = 1: a GRR channel
    o = c.apply(np.array([0.3, 0.2, 0.2, 0.1, 0.1, 0.1]))  # the exact expected output: MI is interior
    assert np.allclose(mle_symmetric(o, c), (o - c.q) / (c.p - c.q), atol=1e-14)
    o2 = np.array([0.5, 0.3, 0.2])
    c2 = symmetric_channel(0.5, 0.25, 3)
    assert mle_symmetric(o2, c2) == pytest.approx([0.875, 0.125, 0.0], abs=1e-12)  # hand-computed, §3.3
    assert ibu(o2, c2, max_iter=100_000) == pytest.approx([0.875, 0.125, 0.0], abs=1e-6)


# --- consistency post-processing: hand-computed from the paper's definitions ---

F1 = np.array([0.6, 0.3, -0.1, 0.4])  # Σ = 1.2
F2 = np.array([0.6, 0.5, 0.2, -0.3])  # Σ = 1.0


def test_hand_computed_examples() -> None:
    assert base_pos(F1) == pytest.approx([0.6, 0.3, 0.0, 0.4])
    assert norm(F1) == pytest.approx([0.55, 0.25, -0.15, 0.35])  # shift (1 − 1.2)/4
    assert norm_mul(F1) == pytest.approx(np.array([6, 3, 0, 4]) / 13)  # positives / 1.3
    assert norm_cut(F2) == pytest.approx(np.array([6, 5, 0, 0]) / 11)  # 0.6 + 0.5 passes 1: keep both, /1.1
    assert norm_cut(F1) == pytest.approx(np.array([6, 3, 0, 4]) / 13)  # 0.6, +0.4 = 1.0 (not > 1), +0.3 passes
    assert norm_sub(F2) == pytest.approx([0.5, 0.4, 0.1, 0.0])  # ρ = 3, τ = (1.3 − 1)/3 = 0.1
    assert post_pos(F2, np.array([[0, 0, 1, 1], [1, 0, 0, 0]])) == pytest.approx([0.0, 0.6])  # max(0.2 − 0.3, 0), max(0.6, 0)


def _is_distribution(f: np.ndarray) -> bool:
    return bool(f.min() >= 0 and abs(f.sum() - 1) <= 1e-9)


def _norm_sub_without_shift(f: np.ndarray) -> np.ndarray:
    """Broken Norm-Sub: clip at 0, no shift δ."""
    return np.maximum(f, 0.0)


def _norm_sub_positives_only(f: np.ndarray) -> np.ndarray:
    """The authors' iterative Norm-Sub (shift only the positive entries; never lift a zeroed one)."""
    e = np.array(f, dtype=np.float64)
    while abs(e.sum() - 1) > 1e-12 or (e < 0).any():
        e[e < 0] = 0
        mask = e > 0
        e[mask] += (1 - e.sum()) / mask.sum()
    return e


def _qp_projection(f: np.ndarray) -> np.ndarray:
    """argmin ‖x − f‖² on the simplex by bisection on the KKT multiplier (independent of the sort)."""
    lo, hi = f.min() - 1.0, f.max()
    for _ in range(200):
        tau = (lo + hi) / 2
        lo, hi = (tau, hi) if np.maximum(f - tau, 0).sum() > 1 else (lo, tau)
    return np.maximum(f - (lo + hi) / 2, 0)


def test_consistent_methods_return_distributions_and_the_broken_ones_fail() -> None:
    rng = np.random.default_rng(7)
    fails_shift = 0
    for trial in range(300):
        k = int(rng.integers(2, 40))
        f = rng.normal(1.0 / k, 0.3 if trial % 2 else 0.02, size=k)  # half with large negative mass
        f += (1.0 - f.sum()) * (trial % 3 == 0) / k  # a third sum to exactly 1 (GRR-like)
        for name, spec in ESTIMATORS.items():
            if spec.consistent and name not in ("ibu", "mle"):
                assert _is_distribution(spec.compute(f, 0.5, 0.25, 1000)), name
        assert norm(f).sum() == pytest.approx(1.0, abs=1e-9)
        assert np.allclose(norm_sub(f), _qp_projection(f), atol=1e-8)
        assert np.array_equal(norm_sub(f), project_simplex(f))  # one implementation
        if np.maximum(f, 0).sum() >= 1:  # the authors' iteration agrees with the paper's definition here
            assert np.allclose(_norm_sub_positives_only(f), norm_sub(f), atol=1e-9)
        fails_shift += not _is_distribution(_norm_sub_without_shift(f))
    assert fails_shift > 250
    below = np.array([0.5, 0.3, -0.01, 0.1])  # positives sum to 0.9 < 1: the two Norm-Sub readings differ
    assert norm_sub(below) == pytest.approx([0.5275, 0.3275, 0.0175, 0.1275], abs=1e-12)  # ρ = 4, τ = −0.11/4
    assert _norm_sub_positives_only(below) == pytest.approx([0.5 + 0.1 / 3, 0.3 + 0.1 / 3, 0.0, 0.1 + 0.1 / 3], abs=1e-12)


def test_norm_keeps_the_mean_of_unbiased_estimates() -> None:
    """Monte Carlo: E[norm(f̂)] = E[f̂] when E Σ f̂ = 1 (tolerance 4.5 sd of the mean: false alarm ≤ 1e-4)."""
    rng = np.random.default_rng(9)
    f = np.array([0.5, 0.3, 0.15, 0.05])
    draws = f + rng.normal(0, 0.05, size=(20_000, 4))
    out = np.array([norm(d) for d in draws])
    assert (np.abs(out.mean(axis=0) - f) <= Z_BONF * out.std(axis=0) / np.sqrt(len(out))).all()
    clipped = np.array([norm_mul(d) for d in draws])  # Norm-Mul is biased: the same check catches it
    assert not (np.abs(clipped.mean(axis=0) - f) <= Z_BONF * clipped.std(axis=0) / np.sqrt(len(out))).all()


# --- the registry and the oracles ---


def test_registry_names_and_unknown_name() -> None:
    assert set(ESTIMATORS) == {"mi", "ibu", "mle", "base_pos", "norm", "norm_mul", "norm_cut", "norm_sub", "base_cut", "norm_hyb"}
    with pytest.raises(ParameterError, match=r"estimator must be one of mi, ibu, mle, .*got 'nrom_sub'"):
        estimator_spec("nrom_sub")


@pytest.mark.parametrize("make", [lambda: ldp.KaryRandomizedResponse(1.0, tuple(range(16))), lambda: OptimizedUnaryEncoding(1.0, tuple(range(16))),
                                  lambda: OptimizedLocalHashing(1.0, tuple(range(16)))])
def test_every_estimator_on_real_reports(make: Callable[[], ldp.KaryRandomizedResponse]) -> None:
    R = make()
    n = 20_000
    inputs = np.repeat(np.arange(16, dtype=np.float64), n // 16)
    reports = R.sample(inputs, RandomSource(1).for_request("est", 0, np.arange(n)))
    mi = frequency_estimates(R, reports)
    assert np.array_equal(estimate_frequencies(R, reports, "mi"), mi)  # the MI is the same bits
    p, q = support_probabilities(R)
    for name, spec in ESTIMATORS.items():
        out = estimate_frequencies(R, reports, name)
        assert np.array_equal(out, estimate(name, mi, p, q, n=n))
        if spec.consistent:
            assert _is_distribution(out), name
