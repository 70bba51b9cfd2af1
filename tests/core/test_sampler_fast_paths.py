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
