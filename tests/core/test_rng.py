"""Randomness is a pure function of (key, user, counter, draw) — docs/design.md §2."""

import numpy as np
import pytest

from ldp.core.rng import RandomSource, UserRandomness, generator, secret_key


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


def test_draws_are_keyed_by_the_secret_and_the_counter():
    """The same user and draw index under another key, or another counter, is a new draw."""
    users = np.arange(1000)
    key = secret_key()
    a = UserRandomness(key, users, 0).bits(0)
    assert np.array_equal(a, UserRandomness(key, users, 0).bits(0))
    for other in (UserRandomness(secret_key(), users, 0), UserRandomness(key, users, 1), UserRandomness(key, users, np.arange(1000, dtype=np.uint64))):
        assert (other.bits(0) != a).mean() > 0.99
    assert 0.4 < UserRandomness(key, users, 0).uniform(0).mean() < 0.6


def test_the_largest_uniform_is_below_one():
    """The old (k + 1/2)·2^-53 rounded up to exactly 1.0 at k = 2^53 − 1; the 52-bit grid cannot."""
    from ldp.core import rng

    top = np.array([np.uint64(2**64 - 1)])
    assert ((top >> np.uint64(12)).astype(np.float64) * 2.0 + 1.0) * 2.0**-53 < 1.0
    old = ((top >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53
    assert old[0] == 1.0  # the broken variant this guards against
    class Top:
        users = np.zeros(1, dtype=np.int64)
        key = b"\0" * 32
        counters = 0

        def bits(self, draw: int = 0) -> np.ndarray:
            return top

    assert rng.UserRandomness.uniform(Top(), 0)[0] == 1.0 - 2.0**-53  # type: ignore[arg-type]


def test_generator_is_keyed_by_labels():
    a = generator(1, "x", 2).random(5)
    assert np.array_equal(a, generator(1, "x", 2).random(5))
    assert not np.array_equal(a, generator(1, "x", 3).random(5))


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, "3", True])
def test_bad_seeds_are_rejected(seed):
    with pytest.raises((TypeError, ValueError)):
        RandomSource(seed=seed)
