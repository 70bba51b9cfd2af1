"""The Harmonic Sieve's cost inside HRS PrivLearn (ldp.central.harmonic_sieve): the discriminator advantage
it rests on, checked exactly, and the cost numbers quoted in docs/central_hrs_rest.md."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ldp.central.harmonic_sieve import (
    coefficient_samples,
    discriminator_advantage,
    max_parity_correlation,
    parity_counts,
    sieve_cost,
    sieve_crossover_d,
)
from ldp.core.fourier import walsh_hadamard


def test_parity_counts_match_brute_force() -> None:
    """f^D(q) = mean_u ⟨q,u⟩ mod 2 for all q (d = 4), by enumeration. Broken variant: indexing q with the
    bits reversed (the WHT's order) disagrees on the same database."""
    rng = np.random.default_rng(0)
    db = (rng.random((9, 4)) < 0.4).astype(np.uint8)
    brute = np.array([np.mean((db @ np.array(q)) % 2) for q in itertools.product((0, 1), repeat=4)])
    # itertools.product is big-endian (q_0 most significant); the module indexes q by Σ q_i 2^i
    order = np.array([sum(b << i for i, b in enumerate(q)) for q in itertools.product((0, 1), repeat=4)])
    got = parity_counts(db)
    np.testing.assert_allclose(got[order], brute, atol=1e-12)
    counts = np.bincount(db @ (1 << np.arange(4)[::-1]), minlength=16)  # broken: reversed bit order
    broken = 0.5 - walsh_hadamard(counts) / (2.0 * len(db))
    assert np.abs(broken[order] - brute).max() > 0.1


def test_discriminator_advantage_is_a_tight_lower_bound() -> None:
    """Deterministic (seeded instances, an exact theorem, no false alarms): for 200 random databases
    (d = 5, n ∈ [1, 11]) × 10 thresholds × a random query distribution G, the best parity's |E_G[F·χ]|
    (exact, one WHT) is ≥ θ = 1/(n + |m|); and θ is attained on some instance, so a claimed advantage of
    2θ (broken variant) is violated on some of them."""
    rng = np.random.default_rng(1)
    ratios = []
    for _ in range(200):
        n = int(rng.integers(1, 12))
        db = (rng.random((n, 5)) < 0.5).astype(np.uint8)
        for t in np.linspace(0.05, 0.95, 10):
            weights = rng.dirichlet(np.full(32, 0.3))
            best = max_parity_correlation(db, float(t), weights)
            theta = discriminator_advantage(n, float(t))
            assert theta >= 1.0 / (2 * n + 1) - 1e-15
            assert best >= theta - 1e-12
            ratios.append(best / theta)
    assert min(ratios) < 2.0  # the broken "2θ" is caught
    assert math.isclose(min(ratios), 1.0, rel_tol=1e-9)  # tight


def test_sieve_cost_at_a_small_case() -> None:
    """d = 8, α = 0.3, β = γ = 0.1, ε = 1: one coefficient estimate is ≥ 1.6·10^13 evaluation queries,
    all of them on the 256 queries of Q, so its users through KLNRS Lemma 4.3 equal those of the trivial
    release that answers every query once; the first d where one estimate is below 2^d is 50."""
    c = sieve_cost(8, 0.3, 0.1, 0.1, 1.0)
    assert c.n_prime == pytest.approx(4410 * 8 * math.log(2) / 0.09)
    assert c.theta == pytest.approx(1 / (2 * c.n_prime + 1))
    assert c.calls_per_estimate == coefficient_samples(c.theta, 0.1 / 60) > 1.6e13
    assert c.distinct_queries == 256 and c.users_sieve == c.users_all_queries == 256 * c.users_per_query
    assert c.users_per_query == 391_946
    assert sieve_crossover_d(0.3, 0.1, 0.1, 1.0) == 50
    big = sieve_cost(50, 0.3, 0.1, 0.1, 1.0)
    assert big.calls_per_estimate < 2**50 and big.calls_per_estimate > 6e14
    with pytest.raises(ValueError, match="bound L"):
        coefficient_samples(0.1, 0.1, bound=0.5)
