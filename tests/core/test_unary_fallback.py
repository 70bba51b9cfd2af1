"""The unary encodings' coins read X_j's top 16 bits first (all of X_j at b = 16) and its other
b − 16 bits only on a tie (``ldp.core.frequency_oracles.unary_coins``; issue 27, "Use every bit of
randomness").

What is checked:
- the fast block paths (``prf_block_matrix``, ``prf_pair_blocks``, ``draw_blocks``,
  ``block_pairs``) give the AES blocks whose low halves are ``prf_words``' words, and a ``Draws``
  without them is read through ``bits`` (high half of block d = ``bits(d + HIGH_HALF)``);
- the layout (``unary_word``, ``unary_draws``) puts every bit of every X_j in exactly one place,
  main and fallback blocks never overlap, and it fits below HIGH_HALF blocks at k = 2^16 and every b;
- the exact audits (the enumerated one at small k, which enumerates the fallback bits through the
  virtual draws, and ``verify_structure`` at large k and at b = 16, 32, 64) pass on the real
  sampler, and catch each broken variant at b = 32 and 64 (b = 16 has no fallback): a tie resolved
  as 1, or as 0, without a fallback; a fallback that reuses the main head's bits; one fallback slot
  shared by two tied bits of a user;
- a seeded frequency test of every bit's law (false-alarm rate below 10^-6 per run) passes on the
  real sampler and catches a comparison that reads only each head's top byte;
- a user's report does not depend on how users are batched.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np
import pytest

import ldp.core.frequency_oracles as fo
from ldp.core.audit import FixedRandomness, verify_exact
from ldp.core.audit_structure import enumerated, verify_structure
from ldp.core.frequency_oracles import OptimizedUnaryEncoding, SymmetricUnaryEncoding, unary_coins, unary_draws, unary_word, unary_word_draws
from ldp.core.longitudinal import LongitudinalOracle, OneReportChannel
from ldp.core.rng import (
    HIGH_HALF,
    MAX_DRAWS,
    Draws,
    RandomSource,
    UserRandomness,
    block_pairs,
    derive_key_bytes,
    draw_blocks,
    prf_block_matrix,
    prf_pair_blocks,
    prf_words,
)

TieRule = Callable[[Draws, np.ndarray, np.ndarray, np.ndarray, int, int], np.ndarray]


# --- the broken variants (each replaces ``_tie_bits``, the fallback read) ---


def _tie_one(randomness: Draws, rows: np.ndarray, j: np.ndarray, t_low: np.ndarray, main: int, r: int) -> np.ndarray:
    return np.ones(len(rows), dtype=bool)  # a tie resolved as 1, no fallback read


def _tie_zero(randomness: Draws, rows: np.ndarray, j: np.ndarray, t_low: np.ndarray, main: int, r: int) -> np.ndarray:
    return np.zeros(len(rows), dtype=bool)  # a tie resolved as 0


def _reuse_main(randomness: Draws, rows: np.ndarray, j: np.ndarray, t_low: np.ndarray, main: int, r: int) -> np.ndarray:
    """The fallback's bits taken from the main draw that holds the tied head (the bits above it)."""
    halves = block_pairs(randomness, rows, j // 8)
    word = halves[np.arange(len(rows)), (j % 8) // 4]
    return ((word >> np.uint64(16)) & np.uint64((1 << r) - 1)) < t_low


_HONEST: TieRule = fo._tie_bits


def _shared_slot(randomness: Draws, rows: np.ndarray, j: np.ndarray, t_low: np.ndarray, main: int, r: int) -> np.ndarray:
    """Every tied bit of a user reads the fallback slot of that user's first tied bit."""
    first: dict[int, int] = {}
    for row, jj in zip(rows.tolist(), j.tolist()):
        first.setdefault(row, jj)
    return _HONEST(randomness, rows, np.array([first[row] for row in rows.tolist()], dtype=np.int64), t_low, main, r)


BROKEN = {"tie as 1": _tie_one, "tie as 0": _tie_zero, "fallback reuses the main byte": _reuse_main, "one slot for two ties": _shared_slot}


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[TieRule], None]]:
    yield lambda rule: monkeypatch.setattr(fo, "_tie_bits", rule)


# --- the draws ---


def test_fast_block_paths_give_the_aes_blocks() -> None:
    key = derive_key_bytes("unary fallback test")
    users = np.arange(300, dtype=np.int64) * 7 + 3
    counters = np.arange(300, dtype=np.int64) * 11
    for ctr in (counters, 9):
        m = prf_block_matrix(key, users, ctr, 5, 40)
        assert all(np.array_equal(m[:, 2 * j], prf_words(key, users, ctr, 5 + j)) for j in range(40))
        assert not any(np.array_equal(m[:, 2 * j + 1], m[:, 2 * j]) for j in range(40))
    rng = np.random.default_rng(0)
    rows, draws = rng.integers(0, 300, 500), rng.integers(0, 40, 500)
    m = prf_block_matrix(key, users, counters, 0, 40)
    pairs = prf_pair_blocks(key, users[rows], counters[rows], draws)
    assert np.array_equal(pairs, np.stack([m[rows, 2 * draws], m[rows, 2 * draws + 1]], axis=1))
    real = UserRandomness(key, users, counters)
    assert np.array_equal(block_pairs(real, rows, draws), pairs) and np.array_equal(draw_blocks(real, 0, 40), m)
    # no block methods: read through bits(), the high half of block d at bits(d + HIGH_HALF)
    plain = FixedRandomness({**{d: m[:, 2 * d] for d in range(40)}, **{d + HIGH_HALF: m[:, 2 * d + 1] for d in range(40)}}, 300)
    assert np.array_equal(draw_blocks(plain, 2, 10), m[:, 4:24])
    assert np.array_equal(block_pairs(plain, rows, draws), pairs)
    with pytest.raises(ValueError, match="draw indices"):
        prf_block_matrix(key, users, 0, MAX_DRAWS - 1, 2)
    # many chunks (blocks built and encrypted in place, chunk by chunk; the last block through a
    # scratch), into a caller's buffer: the same blocks
    many = np.arange(9000, dtype=np.int64) * 3
    buffer = np.empty((9000, 2 * 12), dtype=np.uint64)
    got = prf_block_matrix(key, many, 4, 1, 12, buffer)
    assert got is buffer
    assert all(np.array_equal(got[:, 2 * j], prf_words(key, many, 4, 1 + j)) for j in range(12))
    assert np.array_equal(got[-1, 22:], prf_pair_blocks(key, many[-1:], 4, np.array([12]))[0])  # the very last block


def test_each_chunk_hands_over_the_draws_as_the_prf_makes_them() -> None:
    """``each_chunk``: the real draws chunk by chunk (together ``bits(draw)``), a stand-in's in one
    call; binary randomized response, which reads its draw this way, reports the same through both."""
    from ldp.core.rng import each_chunk
    from ldp.core.rr_mechanisms import BinaryRandomizedResponse

    key = derive_key_bytes("chunks")
    users = np.arange(100_000, dtype=np.int64)
    real = UserRandomness(key, users, users % 13)
    seen: list[tuple[int, int]] = []
    words = np.zeros(len(users), dtype=np.uint64)

    def keep(chunk: np.ndarray, lo: int, hi: int) -> None:
        seen.append((lo, hi))
        words[lo:hi] = chunk

    each_chunk(real, 3, keep)
    assert len(seen) > 1 and seen[0][0] == 0 and seen[-1][1] == len(users)
    assert all(a[1] == b[0] for a, b in zip(seen, seen[1:], strict=False))
    assert np.array_equal(words, real.bits(3))
    seen.clear()
    each_chunk(FixedRandomness({3: words}, len(users)), 3, keep)
    assert seen == [(0, len(users))]
    R = BinaryRandomizedResponse(0.8)
    x = (users % 2).astype(np.float64)
    assert np.array_equal(R.sample(x, real), R.sample(x, FixedRandomness({0: real.bits(0)}, len(users))))


# --- the layout ---


@pytest.mark.parametrize("b", [16, 32, 64])
def test_layout_places_every_bit_once_and_fits_the_draw_indices(b: int) -> None:
    assert unary_draws(1 << 16, b) <= HIGH_HALF
    for k in (2, 9, 64, 100):
        draws = unary_word_draws(k, b)
        assert len(draws) == 2 * unary_draws(k, b)
        seen = np.zeros(len(draws), dtype=np.uint64)
        for j in range(k):
            ones = [unary_word(d, k, b, lambda i, j=j: np.full(1, np.uint64((1 << b) - 1) if i == j else np.uint64(0)))[0] for d in draws]
            words = np.array(ones, dtype=np.uint64)
            assert int(np.bitwise_count(words).sum()) == b  # all b bits of X_j, somewhere
            assert not (words & seen).any()  # and nowhere another X_i is
            seen |= words
            main = -(-k // 8)  # its top 16 bits: lane j mod 8 of main block ⌊j/8⌋ (lanes 4–7: the high half)
            where = draws.index(j // 8 + (HIGH_HALF if j % 8 >= 4 else 0))
            assert words[where] == np.uint64(0xFFFF << (16 * (j % 4))) and int(np.bitwise_count(words[[draws.index(d) for d in draws if d % HIGH_HALF < main]]).sum()) == 16
        assert not unary_word(2 * HIGH_HALF - 1, k, b, lambda i: np.full(1, np.uint64((1 << b) - 1))).any()  # outside the layout: zeros


# --- the exact audits pass, and catch every broken variant ---


@pytest.mark.parametrize("cls", [OptimizedUnaryEncoding, SymmetricUnaryEncoding])
@pytest.mark.parametrize("eps", [1.0, 0.003, 1e-8])  # b = 16, 32 (SUE) and 64
def test_real_sampler_passes_the_exact_audits(cls: type, eps: float) -> None:
    R = cls(eps, (0.0, 1.0, 2.0))
    audit = verify_exact(enumerated(R))
    assert audit.passed, audit.detail
    structural = verify_structure(cls(eps, tuple(range(300))))
    assert structural.passed, structural.detail


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_the_audits_catch_each_broken_fallback(name: str, broken: Callable[[TieRule], None]) -> None:
    """At b = 64 (OUE, ε = 10^-8) and b = 32 (SUE, ε = 0.003; OUE, ε = 0.001; L-SUE's PRR at
    ε∞ = 0.01): the cells whose heads tie with the threshold's are decided by the fallback."""
    broken(BROKEN[name])
    for R in (OptimizedUnaryEncoding(1e-8, (0.0, 1.0, 2.0)), SymmetricUnaryEncoding(0.003, (0.0, 1.0, 2.0))):
        assert R.chunk_bits > 16
        audit = verify_exact(enumerated(R))
        assert not audit.passed and not audit.sampler_consistent, name
    assert not verify_structure(OptimizedUnaryEncoding(0.001, tuple(range(300)))).passed
    o = LongitudinalOracle("l_sue", 2, 0.01, 0.003)  # the PRR reads 32-bit coins, the IRR the same layout
    assert o.permanent_oracle.chunk_bits == 32
    assert not verify_exact(OneReportChannel(o)).passed


def test_b16_reads_no_fallback() -> None:
    """At b = 16 the head is all of X_j: no fallback block exists, and none is read."""
    assert unary_draws(1024, 16) == 128 and unary_word_draws(1024, 16) == [*range(128), *range(HIGH_HALF, HIGH_HALF + 128)]

    class Counting(UserRandomness):
        def pair_blocks(self, rows: np.ndarray, draws: np.ndarray) -> np.ndarray:
            raise AssertionError("a fallback block was read at b = 16")

    users = np.arange(5000, dtype=np.int64)
    R = OptimizedUnaryEncoding(1.0, tuple(range(1000)))
    R.sample((users % 1000).astype(np.float64), Counting(derive_key_bytes("b16"), users, 3))
    unary_coins(Counting(derive_key_bytes("b16"), users, 3), 1000, 16, 40_000, 9_000, chosen=np.packbits(users[:, None] % 3 == np.arange(1000) % 3, axis=1))


def test_the_longitudinal_one_report_channel_passes() -> None:
    for protocol in ("l_oue", "l_osue", "l_sue"):
        assert verify_exact(OneReportChannel(LongitudinalOracle(protocol, 2, 4.0, 2.0))).passed


# --- the law of every bit, measured (seeded) ---


def _bit_rates(R: OptimizedUnaryEncoding, n: int) -> tuple[np.ndarray, np.ndarray]:
    users = np.arange(n)
    x = users % R.k
    y = np.unpackbits(R.sample(x.astype(np.float64), RandomSource(11).for_request("reports", 0, users)), axis=1, count=R.k).astype(bool)
    own = y[users, x]
    y[users, x] = False
    return own, y


def _z(ones: int, trials: int, p: float) -> float:
    return (ones - trials * p) / math.sqrt(trials * p * (1 - p))


def _top_byte_below(heads: np.ndarray, t_hi: int, out: np.ndarray | None = None) -> np.ndarray:
    """Broken: each 16-bit head compared with the threshold by their top bytes only."""
    if t_hi > 0xFFFF:
        return np.ones(heads.shape, dtype=bool) if out is None else fo._fill(out, True)
    return np.less(heads >> 8, np.uint16(t_hi >> 8), out=out)


def test_every_bit_has_its_law_and_a_truncated_comparison_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """z-scores of the input's bits and of the others' (n·(k − 1) = 6.3·10^6 bits) against
    T/2^b: |z| > 5 has probability < 6·10^-7 per score under the true law. The variant that
    compares only the heads' top bytes moves the others' rate by −(T_out mod 2^8)/2^16
    (T_out = 17,626 = 68·2^8 + 218 at ε = 1): −0.0033, z ≈ −19."""
    R = OptimizedUnaryEncoding(1.0, tuple(range(64)))
    assert R.chunk_bits == 16
    p_in, p_out = (float(v) for v in R.bit_probabilities())
    n = 100_000
    own, other = _bit_rates(R, n)
    assert abs(_z(int(own.sum()), n, p_in)) < 5
    assert abs(_z(int(other.sum()), n * (R.k - 1), p_out)) < 5
    monkeypatch.setattr(fo, "_below", _top_byte_below)
    _, other = _bit_rates(R, n)
    assert _z(int(other.sum()), n * (R.k - 1), p_out) < -5


# --- reports do not depend on batching ---


@pytest.mark.parametrize("k", [16, 1000])
def test_a_users_report_does_not_depend_on_the_batch(k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nor on how many tied bits are answered at once (every row block's, or the whole call's),
    nor on the row blocks themselves; a PRR-chosen threshold (the longitudinal IRR) likewise."""
    R = OptimizedUnaryEncoding(1.0, tuple(range(k)))
    users = np.arange(3000, dtype=np.int64) * 5 + 1
    counters = np.arange(3000, dtype=np.int64) % 17
    x = (users % k).astype(np.float64)
    key = derive_key_bytes("batching")
    whole = R.sample(x, UserRandomness(key, users, counters))
    parts = [R.sample(x[s], UserRandomness(key, users[s], counters[s])) for s in (slice(0, 7), slice(7, 2000), slice(2000, None))]
    assert np.array_equal(whole, np.concatenate(parts))
    blocks = draw_blocks(UserRandomness(key, users, counters), 0, unary_draws(k, 16))
    plain = FixedRandomness({d: blocks[:, 2 * (d % HIGH_HALF) + d // HIGH_HALF] for d in unary_word_draws(k, 16)}, len(users))
    assert np.array_equal(whole, R.sample(x, plain))  # the same blocks through bits(): the same report
    assert np.array_equal(unary_coins(plain, k, 16, *R.thresholds, mine=(users % k)), whole)
    chosen = np.packbits((np.arange(3000)[:, None] * 31 + np.arange(k)[None, :]) % 7 == 0, axis=1)
    irr = unary_coins(UserRandomness(key, users, counters), k, 16, 40_000, 9_000, chosen=chosen)
    for ties, block in ((1, 1 << 18), (1 << 40, 1 << 18), (1, 1 << 12)):
        monkeypatch.setattr(fo, "_UNARY_TIES", ties)
        monkeypatch.setattr(fo, "_UNARY_BLOCK", block)
        assert np.array_equal(R.sample(x, UserRandomness(key, users, counters)), whole), (ties, block)
        assert np.array_equal(unary_coins(UserRandomness(key, users, counters), k, 16, 40_000, 9_000, chosen=chosen), irr), (ties, block)
    # b = 32, a third of the heads tied with their threshold's (so the fallback decides them)
    one, zero = 3_000_000_000, 1_000_000_000
    blocks = draw_blocks(UserRandomness(key, users, counters), 0, unary_draws(k, 32))
    heads = blocks[:, : 2 * -(-k // 8)].view("<u2")[:, :k]
    rng = np.random.default_rng(5)
    picked = np.unpackbits(chosen, axis=1, count=k).astype(bool)
    forced = rng.random(heads.shape) < 1 / 3
    tied = np.where(picked, one >> 16, zero >> 16).astype(np.uint16)
    heads[forced] = tied[forced]
    plain = FixedRandomness({d: blocks[:, 2 * (d % HIGH_HALF) + d // HIGH_HALF] for d in unary_word_draws(k, 32)}, len(users))
    results = []
    for ties, block in ((1 << 16, 1 << 18), (1, 1 << 18), (1 << 40, 1 << 18), (1, 1 << 12)):
        monkeypatch.setattr(fo, "_UNARY_TIES", ties)
        monkeypatch.setattr(fo, "_UNARY_BLOCK", block)
        results.append((unary_coins(plain, k, 32, one, zero, chosen=chosen), unary_coins(plain, k, 32, one, zero, mine=users % k)))
    assert all(np.array_equal(a, results[0][0]) and np.array_equal(b, results[0][1]) for a, b in results)
