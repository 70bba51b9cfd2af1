"""Randomness is a pure function of (seed, stream, user, request, draw) — DESIGN.md §2."""

import numpy as np
import pytest

from ldp.core.rng import RandomSource, generator


def test_sharded_draws_equal_whole_population_in_any_order():
    source = RandomSource(seed=1234)
    n = 10_000
    whole = source.for_request("reports", 77, np.arange(n)).uniform(0)
    # three arbitrary shards, answered in a scrambled order, users inside each shuffled too
    cuts = [0, 1234, 7001, n]
    rng = np.random.default_rng(0)  # only to scramble the test's order
    pieces = {}
    for k in rng.permutation(3):
        users = rng.permutation(np.arange(cuts[k], cuts[k + 1]))
        pieces.update(zip(users.tolist(), source.for_request("reports", 77, users).uniform(0).tolist()))
    sharded = np.array([pieces[u] for u in range(n)])
    assert np.array_equal(whole, sharded)


def test_draws_depend_on_every_coordinate():
    s = RandomSource(seed=5)
    users = np.arange(1000)
    base = s.for_request("reports", 1, users).uniform(0)
    variants = [
        RandomSource(seed=6).for_request("reports", 1, users).uniform(0),
        s.for_request("records", 1, users).uniform(0),
        s.for_request("reports", 2, users).uniform(0),
        s.for_request("reports", 1, users).uniform(1),
        s.for_request("reports", 1, users + 1).uniform(0),
    ]
    for v in variants:
        assert not np.array_equal(base, v)
        # and they look independent: correlation near 0 (|r| < 0.15 has false-alarm ≈ 2e-6 at n=1000)
        assert abs(np.corrcoef(base, v)[0, 1]) < 0.15


def test_uniforms_are_uniform_and_open():
    u = RandomSource(seed=9).for_request("reports", 3, np.arange(200_000)).uniform(0)
    assert u.min() > 0.0 and u.max() < 1.0
    counts = np.histogram(u, bins=20, range=(0, 1))[0]
    expected = len(u) / 20
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 58.0  # χ²_19 at α = 1e-6 is ≈ 58: false-alarm rate 1e-6


def test_secure_mode_is_not_reproducible_but_uniform():
    s = RandomSource(seed=0, secure=True)
    a = s.for_request("reports", 1, np.arange(1000)).uniform(0)
    b = s.for_request("reports", 1, np.arange(1000)).uniform(0)
    assert not np.array_equal(a, b)
    assert 0.4 < a.mean() < 0.6


def test_generator_is_keyed_by_labels():
    a = generator(1, "x", 2).random(5)
    assert np.array_equal(a, generator(1, "x", 2).random(5))
    assert not np.array_equal(a, generator(1, "x", 3).random(5))


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, "3", True])
def test_bad_seeds_are_rejected(seed):
    with pytest.raises((TypeError, ValueError)):
        RandomSource(seed=seed)
