"""The samplers' fast paths give, bit for bit, what their plain formulas give.

The clients' hot path was made faster (binary RR as one comparison and an XOR, k = 2 inside
``rr_draw``, in-place arithmetic for ``pm_rr``, integer checks and sampling for ``record_rr``,
a few comparisons instead of a search for small categorical domains, chunked sampling in the
shard). Seeded reports must not change: each fast path is compared here with the textbook formula
it replaces, written out in the test, over every input value and a million AES draws. A broken
shortcut (for instance the XOR the wrong way round) fails these.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldp.core.errors import ParameterError
from ldp.core.plus_minus import PlusMinusRandomizedResponse
from ldp.core.randomizer_base import rr_cells, rr_draw
from ldp.core.rng import RandomSource, UserRandomness
from ldp.core.rr_mechanisms import BinaryRandomizedResponse, KaryRandomizedResponse, RecordRandomizedResponse
from ldp.local.shard import sample_reports

N = 1 << 20
USERS = np.arange(N, dtype=np.int64)
DRAWS = RandomSource(11).for_request("fast-paths", 2, USERS)


def reference_rr_draw(idx: np.ndarray, bits: np.ndarray, a: int, b: int) -> np.ndarray:
    """Exact RR as written in its docstring: idx if X < A, else j + (j ≥ idx), j = (X − A) // B."""
    x = bits.astype(np.uint64)
    keep = x < np.uint64(a)
    offset = np.where(keep, np.uint64(0), x - np.uint64(a))
    j = (offset // np.uint64(b)).astype(np.int64)
    return np.where(keep, idx, j + (j >= idx))


@pytest.mark.parametrize("k", [2, 3, 5, 16])
@pytest.mark.parametrize("epsilon", [0.05, 1.0, 4.0])
def test_rr_draw_is_the_formula(k: int, epsilon: float) -> None:
    a, b = rr_cells(epsilon, k)
    idx = np.arange(N, dtype=np.int64) % k
    bits = DRAWS.bits(0)
    got = rr_draw(idx, bits, a, b)
    assert got.dtype == np.int64
    assert np.array_equal(got, reference_rr_draw(idx, bits, a, b))


@pytest.mark.parametrize("epsilon", [0.05, 1.0, 4.0])
def test_binary_rr_flips_exactly_when_the_draw_leaves_the_keep_cell(epsilon: float) -> None:
    rr = BinaryRandomizedResponse(epsilon)
    u = (np.arange(N) % 2).astype(np.float64)
    a, b = rr.cell_sizes
    expected = reference_rr_draw(u.astype(np.int64), DRAWS.bits(0), a, b).astype(np.uint8)
    got = rr.sample(u, DRAWS)
    assert got.dtype == np.uint8 and np.array_equal(got, expected)


@pytest.mark.parametrize("categories", [(0.0, 1.0), (-1.0, 1.0), (0.0, 1.0, 2.0), (-2.0, 0.5, 3.0, 7.0), tuple(float(c) for c in range(9))])
def test_kary_rr_indexes_and_reports_like_a_search(categories: tuple[float, ...]) -> None:
    rr = KaryRandomizedResponse(1.0, categories)
    cats = np.asarray(rr.categories)
    values = cats[np.arange(N) % len(cats)]
    a, b = rr.cell_sizes
    idx = np.searchsorted(cats, values)
    assert np.array_equal(rr._index(values), idx)
    assert np.array_equal(rr.sample(values, DRAWS), cats[reference_rr_draw(idx, DRAWS.bits(0), a, b)])


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_pm_rr_threshold_is_the_same_float_arithmetic(epsilon: float) -> None:
    pm = PlusMinusRandomizedResponse(epsilon, 1.5)
    x = np.concatenate([np.linspace(-3, 3, 10_001), [np.nan, np.inf, -np.inf, 0.0, 1.5, -1.5]])
    t_lo, t_hi = pm.thresholds
    clipped = np.clip(np.nan_to_num(x), -1.5, 1.5)
    expected = np.clip(t_lo + np.floor((clipped + 1.5) / 3.0 * float(t_hi - t_lo) + 0.5), t_lo, t_hi).astype(np.int64)
    assert np.array_equal(pm._threshold(x), expected)
    assert pm._threshold(float(x[3])) == expected[3] and pm._threshold(x.reshape(-1, 1)).shape == (len(x), 1)  # scalars and shapes too


def test_record_rr_samples_integer_records_like_the_float_path() -> None:
    rr = RecordRandomizedResponse(1.5, (0, -1, 0), (1, 1, 8), (1, 1, 2))
    rng = np.random.default_rng(3)
    records = np.stack([rng.integers(0, 2, N), rng.integers(-1, 2, N), 2 * rng.integers(0, 5, N)], axis=1).astype(np.int16)
    checked = rr.check_inputs(records)
    assert checked.dtype == np.int16  # integers pass through: no int64 copy of the records
    expected = np.empty_like(records)
    for j, (a, b) in enumerate(rr.column_cells):
        low, step = rr.low[j], rr.step[j]  # type: ignore[index]
        idx = (records[:, j].astype(np.int64) - low) // step
        expected[:, j] = reference_rr_draw(idx, DRAWS.bits(j), a, b) * step + low
    assert np.array_equal(rr.sample(checked, DRAWS), expected)
    assert np.array_equal(rr.sample(records.astype(np.float64).astype(np.int64), DRAWS), expected)
    with pytest.raises(Exception, match="column 2 value 3"):
        rr.check_inputs(np.array([[0, 0, 3]], dtype=np.int16))  # off the step grid


def test_chunked_sampling_in_the_shard_is_one_call_over_everyone() -> None:
    """``sample_reports`` draws 2^16 users at a time, by range or by ids; the reports equal one
    call over all of them with the same key and nonces."""
    from ldp.core.query_specs import label_query
    from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
    from ldp.core.schema import Field, Schema

    schema = Schema((Field("y"),))
    local = LocalRandomizer.build(RandomizerSpec("binary_rr", label_query(), 0.5), schema)
    n = 200_003
    inputs = (np.arange(n) % 3 == 0).astype(np.float64)
    nonces = np.random.default_rng(0).integers(0, 9, n).astype(np.uint64)
    key = bytes(range(32))
    whole = local.sample(inputs, UserRandomness(key, np.arange(5, 5 + n), nonces))
    assert np.array_equal(sample_reports(local, inputs, key, range(5, 5 + n), nonces), whole)
    assert np.array_equal(sample_reports(local, inputs, key, np.arange(5, 5 + n), nonces), whole)


@pytest.mark.parametrize("width", [0, 1, 7, 8, 9, 24, 62])
def test_pack_bits_is_one_shift_and_or_per_column(width: int) -> None:
    """``_pack_bits`` (np.packbits, read big-endian) equals column 0 as the top bit, column by column
    — on a strided view of int16 records, across its block boundary."""
    from ldp.core.queries import _PACK_BLOCK, _pack_bits

    rng = np.random.default_rng(width)
    records = rng.integers(0, 2, (_PACK_BLOCK + 1_001, width + 3)).astype(np.int16)
    columns = records[:, 2 : 2 + width]
    expected = np.zeros(len(columns), dtype=np.int64)
    for k in range(width):
        expected |= columns[:, k].astype(np.int64) << (width - 1 - k)
    assert np.array_equal(_pack_bits(columns), expected)


def reference_category_counts(reports: np.ndarray, categories: tuple[float, ...]) -> np.ndarray:
    """The plain count: for each category, how many reports equal it (a search per report)."""
    cats = np.asarray(categories, dtype=np.float64)
    r = np.asarray(reports, dtype=np.float64)
    return np.array([(r == c).sum() for c in cats], dtype=np.int64)


@pytest.mark.parametrize("categories", [(0.0, 1.0), (0.0, 1.0, 2.0, 3.0), (-2.0, -1.0, 0.0, 1.0), (3.0, 4.0, 5.0), (0.5, 1.5, 2.5), (0.0, 2.0, 5.0)])
@pytest.mark.parametrize("dtype", [np.int16, np.int64, np.float64])
def test_grr_estimator_counts_are_the_plain_counts(categories: tuple[float, ...], dtype: type) -> None:
    """GRR's estimator counts with one bincount for consecutive integer categories (the usual
    case) and a search otherwise: the counts equal the plain per-category count on reports with
    every kind of junk a float column can hold (values outside, fractions, NaN, ±inf). A broken
    shortcut that keeps fractional reports (drops the integral test) fails the float64 case."""
    from ldp.core.rr_mechanisms import category_counts

    rng = np.random.default_rng(5)
    reports = rng.integers(-6, 9, 20_000).astype(dtype)
    if dtype is np.float64:
        reports[::7] += 0.5
        reports[::11] = np.nan
        reports[::13] = np.inf
        reports[::17] = -np.inf
    assert category_counts(reports, categories).tolist() == reference_category_counts(reports, categories).tolist()
    if dtype is np.float64 and float(categories[0]).is_integer() and categories[-1] - categories[0] == len(categories) - 1:
        low = categories[0]
        broken = np.bincount((reports[np.isfinite(reports)] - low).astype(np.int64).clip(-1, len(categories)) + 1, minlength=len(categories) + 2)[1:-1]
        assert broken.tolist() != reference_category_counts(reports, categories).tolist()


def test_grr_frequencies_use_the_counts() -> None:
    """The estimator on seeded reports is unchanged: (count/n − q)/(p − q) from the plain counts."""
    rr = KaryRandomizedResponse(1.0, tuple(float(c) for c in range(16)))
    inputs = (np.arange(N) % 16).astype(np.float64)
    reports = rr.sample(inputs, DRAWS)
    p, q = rr.keep_probability, rr.other_probability
    expected = (reference_category_counts(reports, rr.categories) / N - q) / (p - q)
    np.testing.assert_allclose(rr.frequencies(reports), expected, rtol=0, atol=1e-12)


# --- the frequency oracles' estimators (bincount-shaped, issue 27) ---


def reference_bit_counts(packed: np.ndarray, k: int) -> np.ndarray:
    """The plain column sums: unpack every bit, sum each category's column."""
    return np.unpackbits(packed, axis=1, count=k).sum(axis=0, dtype=np.int64)


@pytest.mark.parametrize("k", [2, 7, 16, 17, 24, 64, 70, 1024])
def test_bit_column_counts_are_the_unpacked_column_sums(k: int) -> None:
    """``bit_column_counts`` (bincount of the row for k ≤ 16, byte lanes of 64-bit words above)
    equals the unpacked sum on random rows over several 255-row groups and a ragged last block.
    A broken lane sum (one 256-row group: a lane of 256 ones wraps to 0) differs."""
    from ldp.core.frequency_oracles import bit_column_counts

    rng = np.random.default_rng(k)
    n = 70_001
    packed = np.packbits(rng.random((n, k)) < 0.9, axis=1)  # dense: lanes near their 255 limit
    expected = reference_bit_counts(packed, k)
    assert bit_column_counts(packed, k).tolist() == expected.tolist()
    assert bit_column_counts(packed[:1], k).tolist() == reference_bit_counts(packed[:1], k).tolist()
    ones = np.full((256, (k + 7) // 8), 0xFF, dtype=np.uint8)
    broken = ones.astype(np.uint64).sum(axis=0).astype(np.uint8)  # 256 ones in one byte lane
    assert broken.tolist() != reference_bit_counts(ones, 8 * ones.shape[1])[::8].tolist()


@pytest.mark.parametrize("oracle", ["oue", "sue", "subset_selection"])
@pytest.mark.parametrize("k", [2, 16, 1024])
def test_packed_oracles_count_like_the_unpacked_bits(oracle: str, k: int) -> None:
    """OUE, SUE and Subset Selection count seeded reports exactly as the unpacked column sums,
    so their estimates (count/n − q*)/(p* − q*) are unchanged."""
    from ldp.core.frequency_oracles import OptimizedUnaryEncoding, SubsetSelection, SymmetricUnaryEncoding

    cls = {"oue": OptimizedUnaryEncoding, "sue": SymmetricUnaryEncoding, "subset_selection": SubsetSelection}[oracle]
    R = cls(2.0, tuple(float(c) for c in range(k)))
    n = 4_000 if k == 1024 else 100_000
    reports = R.sample((np.arange(n) % k).astype(np.float64), RandomSource(7).for_request("fo", 1, np.arange(n)))
    counts = reference_bit_counts(reports, k)
    assert R.support_counts(reports).tolist() == counts.tolist()
    p, q = (float(x) for x in R.support_fractions())
    np.testing.assert_array_equal(R.frequencies(reports), (counts / n - q) / (p - q))


@pytest.mark.parametrize(("k", "epsilon"), [(2, 1.0), (16, 1.0), (16, 4.0), (1024, 4.0)])
def test_olh_transform_counts_are_the_hash_definition(k: int, epsilon: float) -> None:
    """OLH's transform (one unweighted bincount of 2z + sign per Gray-code step) equals
    C(x) = Σ_i 1[h_{A_i}(x) = y_i] written out here; a broken transform that drops the sign
    (counts every z as +1) differs."""
    from ldp.core.frequency_oracles import OptimizedLocalHashing

    R = OptimizedLocalHashing(epsilon, tuple(float(c) for c in range(k)))
    n = 20_000
    reports = R.sample((np.arange(n) % k).astype(np.float64), RandomSource(8).for_request("olh", 1, np.arange(n)))
    w = reports.astype(np.int64)
    xs = np.arange(k, dtype=np.int64)
    h = np.zeros((n, k), dtype=np.int64)
    for r in range(R.l):
        h |= (np.bitwise_count(w[:, r, None] & xs[None, :]) & 1).astype(np.int64) << r
    expected = (h == w[:, R.l, None]).sum(axis=0)
    assert R.support_counts(reports).tolist() == expected.tolist()
    if R.g > 1:
        from ldp.core.fourier import walsh_hadamard

        z = np.zeros(n, dtype=np.int64)
        unsigned = np.bincount(z, minlength=1 << R.m)
        for t in range(1, R.g):
            z ^= w[:, (t & -t).bit_length() - 1]
            unsigned += np.bincount(z, minlength=1 << R.m)
        assert (walsh_hadamard(unsigned) >> R.l)[:k].tolist() != expected.tolist()


@pytest.mark.parametrize("k", [2, 16, 1024, 1 << 16])
def test_hadamard_counts_are_the_membership_sums(k: int) -> None:
    """Hadamard Response's C(x) = #{i: parity((x + 1) & j_i) = 0} (reports in x's half), written
    out; reports outside [0, K) are refused, signed or not. A broken row offset (x instead of
    x + 1) differs."""
    from ldp.core.errors import ParameterError
    from ldp.core.frequency_oracles import HadamardResponse

    R = HadamardResponse(1.0, tuple(float(c) for c in range(k)))
    n = 50_000
    reports = R.sample((np.arange(n) % k).astype(np.float64), RandomSource(9).for_request("hr", 1, np.arange(n)))
    j = reports.astype(np.int64)
    xs = np.arange(k, dtype=np.int64)[:64]  # the first 64 categories, written out
    expected = [(np.bitwise_count((x + 1) & j) % 2 == 0).sum() for x in xs]
    broken = [(np.bitwise_count(x & j) % 2 == 0).sum() for x in xs]
    got = R.support_counts(reports)
    assert got[:64].tolist() == expected and broken != expected
    for bad in (np.array([R.K], dtype=np.uint32), np.array([-1], dtype=np.int64), np.array([R.K], dtype=np.int64)):
        with pytest.raises(ParameterError, match="reports must be indices"):
            R.support_counts(bad)


@pytest.mark.parametrize("categories", [tuple(float(c) for c in range(16)), tuple(float(c) for c in range(-3, 1021)), (0.0, 1.0, 2.0, 5.0, 9.0)])
def test_grr_input_index_is_the_search(categories: tuple[float, ...]) -> None:
    """GRR's users look their input up by its offset when the categories are consecutive integers
    (no search): the reports equal those of the plain search written here, bit for bit, and every
    value that is not a category (between two, outside, NaN, ±inf) is still refused. A broken
    offset (off by one) changes the reports."""
    rr = KaryRandomizedResponse(1.0, categories)
    cats = np.asarray(rr.categories)
    inputs = cats[np.arange(N) % len(cats)]
    a, b = rr.cell_sizes
    expected = cats[reference_rr_draw(np.searchsorted(cats, inputs), DRAWS.bits(0), a, b)]
    assert np.array_equal(rr.sample(inputs, DRAWS), expected)
    broken = cats[reference_rr_draw(np.minimum(np.searchsorted(cats, inputs) + 1, len(cats) - 1), DRAWS.bits(0), a, b)]
    assert not np.array_equal(broken, expected)
    for bad in (cats[0] + 0.5, cats[0] - 1.0, cats[-1] + 1.0, np.nan, np.inf, -np.inf):
        with pytest.raises(ParameterError, match="not one of the categories"):
            rr.sample(np.array([cats[0], bad]), RandomSource(1).for_request("bad", 0, np.arange(2)))


# --- issue 27: the PRF in cache-sized chunks, the samplers in blocks, bit for bit the same ---
#
# Every reference below is the previous implementation, copied here. Each fast path is compared
# with it on seeded draws that include the edge values (0, 2^64 − 1, every cell edge ± 1, the
# guide table's bucket edges) and on edge inputs (±b, 0, −0, NaN, ±inf), once with the default
# block size and once with blocks of 7 users (ragged last blocks). A broken variant of each
# comparison (an off-by-one at a cell edge, a wrong constant) is shown to differ.

from pathlib import Path  # noqa: E402

from ldp.core import laplace as laplace_module  # noqa: E402
from ldp.core import randomizer_base, rng  # noqa: E402
from ldp.core.audit import FixedRandomness  # noqa: E402
from ldp.core.frequency_oracles import HadamardResponse, OptimizedLocalHashing  # noqa: E402
from ldp.core.laplace import DiscreteLaplaceRandomizer  # noqa: E402
from ldp.core.mean_estimation import HybridRandomizer, PiecewiseRandomizer  # noqa: E402

BLOCK_USERS = ("ldp.core.rr_mechanisms", "ldp.core.frequency_oracles", "ldp.core.plus_minus", "ldp.core.mean_estimation", "ldp.core.laplace", "ldp.core.randomizer_base")
U64 = np.uint64
TOP = (1 << 64) - 1


@pytest.fixture(params=["default blocks", "blocks of 7"])
def blocks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a test with the samplers' default blocks, then with blocks of 7 users."""
    if request.param == "blocks of 7":
        import importlib

        for name in BLOCK_USERS:
            monkeypatch.setattr(importlib.import_module(name), "SAMPLER_BLOCK", 7)


def reference_prf_words(key: bytes, users: np.ndarray, counters: np.ndarray | int, draw: int) -> np.ndarray:
    """The previous ``prf_words``: one ECB call over an (n, 2) block array, strided result."""
    n = len(users)
    blocks = np.empty((n, 2), dtype="<u8")
    blocks[:, 0] = users
    if np.ndim(counters) == 0:
        blocks[:, 1] = (int(counters) << 16) | int(draw)
    else:
        np.left_shift(np.asarray(counters, dtype=np.uint64), U64(16), out=blocks[:, 1])
        if draw:
            blocks[:, 1] |= U64(draw)
    out = np.empty(2 * n + 2, dtype="<u8")
    if n:
        rng._cipher(key).encryptor().update_into(blocks.data.cast("B"), out.data.cast("B"))
    return out[: 2 * n : 2].view(np.uint64)


def reference_uniform(bits: np.ndarray) -> np.ndarray:
    return ((bits >> U64(12)).astype(np.float64) * 2.0 + 1.0) * (2.0**-53)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal dtype, shape and bytes (so −0.0 ≠ 0.0 and NaN payloads count)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("n", [0, 1, 5, 9, 12, 13, 1 << 15, (1 << 15) + 3])
def test_prf_in_chunks_is_one_ecb_call(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``prf_words`` / ``uniform`` / ``uniform_matrix`` in chunks of 4 users (small n) or the
    default 2^15 (large n) give the previous single call's words and uniforms, for scalar and
    per-user counters of several dtypes, draws 0, 1 and 2^16 − 1, negative and int32 user ids."""
    if n < 100:
        monkeypatch.setattr(rng, "_PRF_CHUNK", 4)
    key = bytes(range(32))
    gen = np.random.default_rng(n)
    users = gen.integers(-(1 << 40), 1 << 40, n)
    counter_cases: list[np.ndarray | int] = [0, (1 << 48) - 1, gen.integers(0, 1 << 48, n), gen.integers(0, 1 << 48, n).astype(np.uint64), gen.integers(0, 1 << 30, n).astype(np.int32), np.array([7])]
    for counters in counter_cases:
        for draw in (0, 1, (1 << 16) - 1):
            want = reference_prf_words(key, users, counters, draw)
            assert same_bits(rng.prf_words(key, users, counters, draw), want)
            assert same_bits(rng.prf_words(key, users.astype(np.int32), counters, draw), reference_prf_words(key, users.astype(np.int32), counters, draw))
            draws = UserRandomness(key, users, counters)
            assert same_bits(draws.uniform(draw), reference_uniform(want))
    matrix = UserRandomness(key, users, 3).uniform_matrix(3, 5)
    assert same_bits(matrix, np.stack([reference_uniform(reference_prf_words(key, users, 3, 5 + j)) for j in range(3)], axis=1).reshape(n, 3))
    # broken: the counter shifted by 15 instead of 16 changes every word
    if n:
        monkeypatch.setattr(rng, "_S16", U64(15))
        assert not np.array_equal(rng.prf_words(key, users, counter_cases[2], 1), reference_prf_words(key, users, counter_cases[2], 1))


def test_uniform_float_trick_is_exact_at_the_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    """(k | exponent of 1.0) as a double, minus (1 − 2^-53), equals (2k + 1)·2^-53 for every k —
    checked at the edges k = 0, 1, 2^51 ± 1, 2^52 − 1 with every low 12 bits pattern, and at a
    million random words; all inside (0, 1). Subtracting 1.0 instead (the broken variant) differs."""
    ks = np.array([0, 1, 2, 3, (1 << 51) - 1, 1 << 51, (1 << 51) + 1, (1 << 52) - 2, (1 << 52) - 1], dtype=np.uint64)
    low = np.array([0, 1, 0x800, 0xFFF], dtype=np.uint64)
    edges = ((ks[:, None] << U64(12)) | low[None, :]).ravel()
    words = np.concatenate([edges, np.random.default_rng(0).integers(0, TOP, 1 << 20, dtype=np.uint64, endpoint=True)])
    out = np.empty(len(words), dtype=np.float64)
    rng._uniform_from_words(words, out.view(np.uint64))
    assert same_bits(out, reference_uniform(words))
    assert out.min() == 2.0**-53 and out.max() == 1.0 - 2.0**-53
    monkeypatch.setattr(rng, "_HALF_ULP_BELOW_ONE", 1.0)
    rng._uniform_from_words(edges, out[: len(edges)].view(np.uint64))
    assert not same_bits(out[: len(edges)], reference_uniform(edges))


def edge_draws(cells: list[int], n: int, seed: int) -> np.ndarray:
    """n draws: each cell edge c − 1, c, c + 1 (clipped to [0, 2^64)), 0 and 2^64 − 1, then seeded
    random words; the edges repeat so that every input meets every edge."""
    edge = sorted({min(TOP, max(0, c + d)) for c in cells for d in (-1, 0, 1)} | {0, TOP})
    x = np.random.default_rng(seed).integers(0, TOP, n, dtype=np.uint64, endpoint=True)
    x[: min(n, 4 * len(edge))] = np.resize(np.array(edge, dtype=np.uint64), min(n, 4 * len(edge)))
    return x


def edge_inputs(bound: float, n: int, seed: int) -> np.ndarray:
    special = [-bound, bound, 0.0, -0.0, bound / 3, -bound / 7, np.nan, np.inf, -np.inf, 2 * bound, np.nextafter(bound, 0), np.nextafter(-bound, 0)]
    u = np.random.default_rng(seed).uniform(-bound, bound, n)
    u[::5] = np.resize(np.array(special), len(u[::5]))
    return u


@pytest.mark.parametrize("epsilon, k", [(0.5, 3), (1.0, 16), (4.0, 5)])
def test_rr_draw_in_blocks_is_the_formula_at_every_cell_edge(epsilon: float, k: int, blocks: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept users (X < A; X − A wraps for them) are reported by j − kept·(j − idx), without a
    branch: the formula's reports at X = 0, A − 1, A, A + jB ± 1, 2^64 − 1, for every input.
    Calling X = A "kept" (broken) misreports it."""
    a, b = rr_cells(epsilon, k)
    n = 3 * k * (6 * k + 2)
    x = edge_draws([a + j * b for j in range(k - 1)], n, k)
    idx = np.arange(n, dtype=np.int64) % k
    assert np.array_equal(rr_draw(idx, x, a, b), reference_rr_draw(idx, x, a, b))

    def off_by_one(x: np.ndarray, idx: np.ndarray, a64: np.uint64, b64: np.uint64, j: np.ndarray) -> np.ndarray:
        kept = x <= a64
        j //= b64
        j += j >= idx
        step = j - idx
        step *= kept
        j -= step
        return j.view(np.int64)

    monkeypatch.setattr(randomizer_base, "_rr_draw_block", off_by_one)
    assert not np.array_equal(rr_draw(idx, x, a, b), reference_rr_draw(idx, x, a, b))


def test_binary_rr_in_blocks_is_the_formula(blocks: None) -> None:
    rr = BinaryRandomizedResponse(1.0)
    a, b = rr.cell_sizes
    n = 4099
    x = edge_draws([a], n, 1)
    u = (np.arange(n) % 2).astype(np.float64)
    want = reference_rr_draw(u.astype(np.int64), x, a, b).astype(np.uint8)
    assert same_bits(rr.sample(u, FixedRandomness({0: x})), want)
    assert not same_bits(rr.sample(1.0 - u, FixedRandomness({0: x})), want)  # broken: the XOR the wrong way round


def reference_hadamard(hr: HadamardResponse, inputs: np.ndarray, x0: np.ndarray, x1: np.ndarray, flip: bool = False) -> np.ndarray:
    """The previous ``HadamardResponse.sample``; ``flip`` (broken) asks for the other parity."""
    a_row = np.searchsorted(np.asarray(hr.categories), inputs).astype(np.int64) + 1
    a, _ = hr.cell_sizes
    inside = x0 < U64(a)
    t = (x1 >> U64(65 - hr.M)).astype(np.int64)
    low_bit = a_row & -a_row
    below = t & (low_bit - 1)
    j = ((t - below) << 1) | below
    parity = (np.bitwise_count(a_row & j) & 1).astype(np.int64)
    wrong = parity != np.where(inside, 1 if flip else 0, 0 if flip else 1)
    return (j | np.where(wrong, low_bit, 0)).astype(np.uint32)


@pytest.mark.parametrize("k", [2, 3, 1000, 1024, 1 << 16])
def test_hadamard_response_in_blocks_is_the_formula(k: int, blocks: None) -> None:
    hr = HadamardResponse(1.0, tuple(range(k)))
    n = 20_011
    inputs = (np.arange(n) * 7919 % k).astype(np.float64)
    x0 = edge_draws([hr.cell_sizes[0]], n, 2)
    x1 = edge_draws([t << (65 - hr.M) for t in (0, 1, (1 << (hr.M - 1)) - 1)], n, 3)
    got = hr.sample(inputs, FixedRandomness({0: x0, 1: x1}))
    assert same_bits(got, reference_hadamard(hr, inputs, x0, x1))
    assert not same_bits(got, reference_hadamard(hr, inputs, x0, x1, flip=True))
    with pytest.raises(ParameterError, match="hadamard_response: an input is not one of the categories"):
        hr.sample(np.array([0.0, 0.5]), FixedRandomness({}, 2))


def reference_olh(olh: OptimizedLocalHashing, inputs: np.ndarray, draws: FixedRandomness, shift: int = 0) -> np.ndarray:
    """The previous ``OptimizedLocalHashing.sample``; ``shift`` ≠ 0 (broken) reads other bits."""
    idx = np.searchsorted(np.asarray(olh.categories), inputs).astype(np.int64)
    n, l_ = len(idx), olh.l
    out = np.empty((n, l_ + 1), dtype=np.uint16)
    for r in range(l_):
        out[:, r] = draws.bits(1 + r) >> U64(64 - olh.m + shift)
    hashed = olh.hash(out[:, :l_], idx)
    a, b = olh.cell_sizes
    out[:, l_] = reference_rr_draw(hashed, draws.bits(0), a, b)
    return out


@pytest.mark.parametrize("k, epsilon, hash_bits", [(2, 1.0, None), (16, 1.0, None), (1024, 4.0, None), (1000, 1.0, 5), (1 << 16, 2.0, None)])
def test_olh_in_blocks_is_the_formula(k: int, epsilon: float, hash_bits: int | None, blocks: None) -> None:
    olh = OptimizedLocalHashing(epsilon, tuple(range(k)), hash_bits)
    a, b = olh.cell_sizes
    n = 20_011
    inputs = (np.arange(n) * 7919 % k).astype(np.float64)
    bits = {0: edge_draws([a + j * b for j in range(olh.g - 1)], n, 4)} | {1 + r: edge_draws([], n, 5 + r) for r in range(olh.l)}
    got = olh.sample(inputs, FixedRandomness(bits))
    assert same_bits(got, reference_olh(olh, inputs, FixedRandomness(bits)))
    assert not same_bits(got, reference_olh(olh, inputs, FixedRandomness(bits), shift=1))


def reference_pm(pm: PlusMinusRandomizedResponse, u: np.ndarray, x0: np.ndarray, le: bool = False) -> np.ndarray:
    """The previous ``pm_rr`` sample; ``le`` (broken) compares X >> 11 ≤ T(u)."""
    top = (x0 >> U64(11)).astype(np.int64)
    t = pm._threshold(u)
    return np.where(top <= t if le else top < t, pm.magnitude, -pm.magnitude)


def pm_edges(thresholds: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Draws at T·2^11 − 1, T·2^11 and T·2^11 + 2^11 for each user's own threshold T (one of
    the three per user), random words for every fourth user."""
    t = thresholds.astype(np.uint64) << U64(11)
    x = np.random.default_rng(seed).integers(0, TOP, n, dtype=np.uint64, endpoint=True)
    pick = np.arange(n) % 4
    x = np.where(pick == 0, t - U64(1), np.where(pick == 1, t, np.where(pick == 2, t + U64(2048), x)))
    return x


@pytest.mark.parametrize("epsilon, bound", [(0.5, 1.0), (2.0, 3.5), (40.0, 1.0)])
def test_pm_rr_in_blocks_is_the_formula(epsilon: float, bound: float, blocks: None) -> None:
    """X >> 11 < T ⇔ X < T·2^11, NaN → 0 after the clip, ±M by its sign: the previous reports at
    X = T·2^11 − 1, T·2^11, T·2^11 + 2^11 for every input, edge inputs included."""
    pm = PlusMinusRandomizedResponse(epsilon, bound)
    n = 9_973
    u = edge_inputs(bound, n, 6)
    x0 = pm_edges(pm._threshold(u), n, 7)
    got = pm.sample(u, FixedRandomness({0: x0}))
    assert same_bits(got, reference_pm(pm, u, x0))
    assert not same_bits(got, reference_pm(pm, u, x0, le=True))


def reference_piecewise(pw: PiecewiseRandomizer, u: np.ndarray, x0: np.ndarray, x: np.ndarray, le: bool = False) -> np.ndarray:
    """The previous ``PiecewiseRandomizer.sample``; ``le`` (broken) counts X = W·A as inside."""
    a, b, _ = pw.masses
    k0, f53 = pw._rounding(u)
    level = k0 + ((x0 >> U64(11)).astype(np.int64) < f53)
    high = U64(pw.window * a)
    inside = x <= high if le else x < high
    rest = np.where(inside, U64(0), x - high) // U64(b)
    other = rest.astype(np.int64)
    j = np.where(inside, level + (np.where(inside, x, U64(0)) // U64(a)).astype(np.int64), np.where(other < level, other, other + pw.window))
    j = np.where(~inside & (other >= pw.k), pw.cells, j)
    return pw._report(j)


def piecewise_draws(pw: PiecewiseRandomizer, u: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    a, b, leftover = pw.masses
    _, f53 = pw._rounding(u)
    x0 = pm_edges(np.clip(f53, 0, (1 << 53) - 1), len(u), seed)
    cells = [i * a for i in range(pw.window + 1)] + [pw.window * a + i * b for i in range(pw.k + 1)]
    return x0, edge_draws(cells, len(u), seed + 1)


@pytest.mark.parametrize("epsilon, bound, steps", [(1.0, 1.0, None), (4.0, 2.5, 4), (0.3, 1.0, 2), (8.0, 1.0, 64)])
def test_piecewise_in_blocks_is_the_formula(epsilon: float, bound: float, steps: int | None, blocks: None) -> None:
    """The cell without a branch per user (inside iff X // A < W; j_out = r + W·[r ≥ level], N for
    r = K) and the report by table lookup: the previous reports at every cell edge ± 1."""
    pw = PiecewiseRandomizer(epsilon, bound, steps)
    n = 12_007
    u = edge_inputs(bound, n, 8)
    x0, x1 = piecewise_draws(pw, u, 9)
    got = pw.sample(u, FixedRandomness({0: x0, 1: x1}))
    assert same_bits(got, reference_piecewise(pw, u, x0, x1))
    assert not same_bits(got, reference_piecewise(pw, u, x0, x1, le=True))


@pytest.mark.parametrize("epsilon", [0.3, 2.0, 6.0])
def test_hybrid_in_blocks_is_the_formula(epsilon: float, blocks: None) -> None:
    """The select on the doubles' bits and the shared draw 0: the previous np.where(X1 < S, …)."""
    hy = HybridRandomizer(epsilon, 1.5)
    n = 12_007
    u = edge_inputs(1.5, n, 10)
    x0, x2 = piecewise_draws(hy.piecewise, u, 11)
    x1 = edge_draws([hy.select], n, 12)
    draws = FixedRandomness({0: x0, 1: x1, 2: x2})
    want = np.where(x1 < U64(hy.select), reference_piecewise(hy.piecewise, u, x0, x2), reference_pm(hy.duchi, u, x0))
    got = hy.sample(u, draws)
    assert same_bits(got, want)
    broken = np.where(x1 <= U64(hy.select), reference_piecewise(hy.piecewise, u, x0, x2), reference_pm(hy.duchi, u, x0))
    assert hy.select == 0 or not same_bits(got, broken)


def reference_discrete_laplace(dl: DiscreteLaplaceRandomizer, u: np.ndarray, x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """The previous ``DiscreteLaplaceRandomizer.sample``: a binary search over the boundaries."""
    t = dl._table
    k0, f53 = dl._rounding(u)
    k = k0 + ((x0 >> U64(11)).astype(np.int64) < f53)
    z = np.searchsorted(t.boundaries, x1, side="right").astype(np.int64) - t.half_width
    return np.clip(k + z, -t.window, t.window) * dl.grid


@pytest.mark.parametrize("epsilon, steps", [(1.0, None), (0.1, None), (4.0, 8), (1.0, 1), (12.0, None)])
def test_discrete_laplace_guide_table_is_the_search(epsilon: float, steps: int | None, blocks: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The noise cell read from the 2^16-entry guide table (a search only where a boundary lies
    in the draw's bucket) is the binary search's, at every boundary ± 1 and at both ends of every
    bucket that holds a boundary. A guide without its "search here" marks (broken) differs."""
    dl = DiscreteLaplaceRandomizer(epsilon, 1.0, steps)
    boundaries = dl._table.boundaries
    buckets = np.unique(boundaries >> U64(48))
    bucket_ends = np.concatenate([buckets << U64(48), (buckets << U64(48)) | U64((1 << 48) - 1)])
    x1 = np.concatenate([boundaries - U64(1), boundaries, boundaries + U64(1), bucket_ends, np.array([0, TOP], dtype=np.uint64)])
    n = len(x1)
    u = edge_inputs(1.0, n, 13)
    _, f53 = dl._rounding(u)
    x0 = pm_edges(np.clip(f53, 0, (1 << 53) - 1), n, 14)
    draws = FixedRandomness({0: x0, 1: x1})
    got = dl.sample(u, draws)
    assert same_bits(got, reference_discrete_laplace(dl, u, x0, x1))
    guide = laplace_module._noise_guide(dl.epsilon, dl.c, dl.SLACK, dl._extension())
    assert (guide < 0).mean() < 0.05  # the search is the exception: the few buckets that hold a boundary
    unmarked = np.searchsorted(boundaries, np.arange(1 << 16, dtype=np.uint64) << U64(48), side="right").astype(np.int32)
    monkeypatch.setattr(laplace_module, "_noise_guide", lambda *args: unmarked)
    assert not same_bits(dl.sample(u, draws), reference_discrete_laplace(dl, u, x0, x1))


def test_the_samplers_at_a_million_aes_draws_are_the_formulas() -> None:
    """Seeded AES draws (not chosen ones) through every fast sampler at 2^16 + 5 users: the reports
    of the previous implementations, bit for bit."""
    users = USERS[: (1 << 16) + 5]
    n = len(users)
    draws = RandomSource(11).for_request("fast-paths", 3, users)
    fixed = FixedRandomness({d: draws.bits(d) for d in range(4)})
    u = edge_inputs(1.0, n, 15)
    v = (np.arange(n) * 7919 % 1024).astype(np.float64)
    hr, olh = HadamardResponse(1.0, tuple(range(1024))), OptimizedLocalHashing(1.0, tuple(range(1024)))
    assert same_bits(hr.sample(v, draws), reference_hadamard(hr, v, fixed.bits(0), fixed.bits(1)))
    assert same_bits(olh.sample(v, draws), reference_olh(olh, v, fixed))
    pm, pw, hy, dl = PlusMinusRandomizedResponse(1.0, 1.0), PiecewiseRandomizer(1.0, 1.0), HybridRandomizer(1.0, 1.0), DiscreteLaplaceRandomizer(1.0, 1.0)
    assert same_bits(pm.sample(u, draws), reference_pm(pm, u, fixed.bits(0)))
    assert same_bits(pw.sample(u, draws), reference_piecewise(pw, u, fixed.bits(0), fixed.bits(1)))
    hybrid = np.where(fixed.bits(1) < U64(hy.select), reference_piecewise(hy.piecewise, u, fixed.bits(0), fixed.bits(2)), reference_pm(hy.duchi, u, fixed.bits(0)))
    assert same_bits(hy.sample(u, draws), hybrid)
    assert same_bits(dl.sample(u, draws), reference_discrete_laplace(dl, u, fixed.bits(0), fixed.bits(1)))


def test_the_sampler_benchmark_runs_as_documented(tmp_path: Path) -> None:
    """``python benchmarks/samplers.py`` (docs/benchmarks.md, "Samplers against plain numpy") as
    a process, at a small size: every row of issue 27's table, timed (no time is asserted), in
    the table and in samplers.json. A --repeats below 3 is refused in one line, exit code 2."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    script = root / "benchmarks" / "samplers.py"
    out = subprocess.run([sys.executable, str(script), "--users", "3000", "--repeats", "3", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=root, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = json.loads((tmp_path / "samplers.json").read_text(encoding="utf-8"))["rows"]
    names = ["binary_rr", "kary_rr, k = 16", "discrete_laplace", "pm_rr", "piecewise", "hybrid", "olh, k = 1024", "hadamard_response, k = 1024", "oue, k = 16", "one uniform per user"]
    assert [r["sampler"] for r in rows] == names
    assert all(len(r["ldp_ns"]) == 3 and len(r["numpy_ns"]) == 3 and r["ratio"] >= 0 for r in rows)
    assert all(name in out.stdout for name in ("binary_rr", "hadamard_response", "ratio"))
    refused = subprocess.run([sys.executable, str(script), "--repeats", "2"], capture_output=True, text=True, timeout=120, cwd=root, check=False)
    assert refused.returncode == 2 and "--repeats must be at least 3" in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.parametrize(("k", "epsilon"), [(16, 1.0), (16, 4.0), (300, 1.0), (1024, 4.0)])
def test_subset_selection_reports_do_not_depend_on_its_blocks_or_its_bookkeeping(k: int, epsilon: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """Subset Selection's Floyd steps run per block of users, with the give-back and the input
    tracked by groups (many picks) or by whole-array comparisons (few): every choice gives the same
    reports, bit for bit, and each report names exactly d categories. A broken variant — the
    give-back forgotten (an inside user keeps all d picks, d + 1 members) — is caught."""
    from ldp.core import frequency_oracles as fo

    R = fo.SubsetSelection(epsilon, tuple(float(c) for c in range(k)), sampler="floyd")
    n = 3_000
    inputs = (np.arange(n) % k).astype(np.float64)
    draws = RandomSource(11).for_request("ss", 0, np.arange(n))
    want = R.sample(inputs, draws)
    assert (np.unpackbits(want, axis=1, count=k).sum(axis=1) == R.subset_size).all()
    for users, grouped in (((1, 7), 10), ((1 << 10, 1 << 15), 0), ((1 << 10, 1 << 15), 10**9)):
        monkeypatch.setattr(fo, "_SS_BLOCK_USERS", users)
        monkeypatch.setattr(fo, "_SS_BLOCK_BYTES", 1 << 23 if users[1] > 7 else 1)
        monkeypatch.setattr(fo, "_SS_GROUPED", grouped)
        assert np.array_equal(R.sample(inputs, draws), want), (users, grouped)
    monkeypatch.undo()
    real = fo.uniform_index
    monkeypatch.setattr(fo, "uniform_index", lambda bits, m: np.full(len(bits), m, dtype=np.int64) if m == R.subset_size else real(bits, m))
    sizes = np.unpackbits(R.sample(inputs, draws), axis=1, count=k).sum(axis=1)
    assert (sizes > R.subset_size).any()  # the broken give-back: inside users report d + 1 categories
