"""TreeHist's one-round report (kind ``treehist_prefix``, ``ldp.core.prefix_reports``): each user
draws its own level and sends one OLH report of its prefix of that length.

Exact audits (deterministic): the structure audit at every size the CLI and the learner use,
L a power of two or not (the level's exact law is ``uniform_index_masses``), and the enumerated
channel at small d, which drives the real sampler through every cell of every draw it reads.
Broken variants, each caught by both audits: a level that depends on the value, the inner oracle
at 2ε, and the level read from the draw the inner RR also reads.

Statistical checks (seeded; false-alarm rates stated at each): the level counts pass a χ² test
of uniformity (broken variant: a level with one doubled cell, caught); a repeated request to the
same users gives them fresh levels (broken variant: a level computed from the user id, which
the aggregator knows, is caught); each level's estimates are unbiased within 5 sd.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2

from ldp.core.errors import ParameterError
from ldp.core.prefix_reports import TreeHistPrefix, enumerated_prefix_reports, prefix_probe, verify_prefix_reports
from ldp.core.query_specs import field_query, record_query
from ldp.core.randomizer_base import rr_cells, uniform_index, uniform_index_masses
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import RandomSource
from ldp.core.schema import Field, Schema


class ValueLevel(TreeHistPrefix):
    """Broken: users whose top bit is 1 never take level 0 (the level tells the top bit)."""

    def draw_level(self, values: np.ndarray, randomness: object) -> np.ndarray:
        t = super().draw_level(values, randomness)  # type: ignore[arg-type]
        top = (np.asarray(values) >> (self.bits - 1)) & 1
        return np.where((t == 0) & (top == 1), 1, t)


class DoubleEpsilon(TreeHistPrefix):
    """Broken: the inner RR runs at 2ε while ε is declared (and charged)."""

    def inner_cells(self) -> tuple[int, int]:
        return rr_cells(2 * self.epsilon, self.g)


class SharedDraw(TreeHistPrefix):
    """Broken: the level is read from draw 1, which the inner RR reads too."""

    level_draw = 1


class IdLevel(TreeHistPrefix):
    """Broken: the level is a function of the user id (the aggregator knows it and can pick users)."""

    def draw_level(self, values: np.ndarray, randomness: object) -> np.ndarray:
        return np.asarray(randomness.users, dtype=np.int64) % self.levels  # type: ignore[attr-defined]


class LopsidedLevel(TreeHistPrefix):
    """Broken: L + 1 equal cells, the last two both read as level L − 1."""

    def draw_level(self, values: np.ndarray, randomness: object) -> np.ndarray:
        return np.minimum(uniform_index(randomness.bits(0), self.levels + 1), self.levels - 1)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("epsilon", "bits", "step"), [(1.0, 32, 1), (4.0, 32, 1), (4.0, 12, 1), (2.0, 20, 2), (0.5, 62, 5), (8.0, 3, 1)])
def test_the_structure_audit_passes_at_every_size(epsilon: float, bits: int, step: int) -> None:
    R = TreeHistPrefix(epsilon, bits, step)
    audit = verify_prefix_reports(R)
    assert audit.passed, audit.detail
    a, b = R.cell_sizes
    assert audit.max_log_ratio == pytest.approx(math.log(a / b)) and audit.max_log_ratio <= epsilon * (1 + 1e-12)


@pytest.mark.parametrize(("epsilon", "bits", "step", "hash_bits"), [(1.0, 3, 1, None), (2.0, 3, 1, None), (1.0, 3, 2, None), (4.0, 2, 1, 2), (0.7, 4, 3, 1)])
def test_the_enumerated_channel_is_within_epsilon(epsilon: float, bits: int, step: int, hash_bits: int | None) -> None:
    """L = 3 (bits 3, step 1) is not a power of two: its levels have unequal exact masses, and the loss is unchanged."""
    R = TreeHistPrefix(epsilon, bits, step, hash_bits=hash_bits)
    audit = enumerated_prefix_reports(R)
    assert audit.passed, (audit.max_log_ratio, audit.argmax)
    assert audit.max_log_ratio == pytest.approx(verify_prefix_reports(R).max_log_ratio)
    if R.levels == 3:
        assert len(set(uniform_index_masses(3))) == 2  # ⌊2^64/3⌋ and ⌈2^64/3⌉: the realized law the enumeration used


@pytest.mark.parametrize("broken", [ValueLevel, DoubleEpsilon, SharedDraw])
def test_broken_variants_are_caught_by_both_audits(broken: type[TreeHistPrefix]) -> None:
    R = broken(1.0, 3)
    assert not verify_prefix_reports(R).passed and prefix_probe(R)  # the probe names what the sampler does wrong
    enumerated = enumerated_prefix_reports(R)
    assert not enumerated.passed and enumerated.max_log_ratio > 1.0 + 1e-9


def test_log_prob_is_the_enumerated_channel() -> None:
    R = TreeHistPrefix(1.0, 3)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 8, 2000)
    w = R.sample(x, RandomSource(1).for_request("lp", 0, np.arange(2000)))
    a, b = R.cell_sizes
    t = w[:, 0].astype(np.int64)
    m = np.asarray(R.lengths)[t]
    keep = R.hash(w[:, 1:-1], x >> (3 - m)) == w[:, -1].astype(np.int64)
    expected = np.log(np.asarray(uniform_index_masses(3), dtype=np.float64)[t]) - 128 * math.log(2) - m * R.l * math.log(2) + np.where(keep, math.log(a), math.log(b))
    assert np.allclose(R.log_prob(x, w), expected, rtol=1e-12)
    assert np.all(np.isneginf(R.log_prob(x[:1], np.array([[3, 0, 0, 0]], dtype=np.uint64))))  # level 3 of 3: impossible


def _levels(R: TreeHistPrefix, n: int, request: int, first: int = 0) -> np.ndarray:
    return R.sample(np.zeros(n, dtype=np.int64), RandomSource(5).for_request("levels", request, np.arange(first, first + n)))[:, 0].astype(np.int64)


def test_the_levels_are_uniform_chi_square() -> None:
    """χ² over L = 20 levels at n = 2·10^5: the test's false-alarm rate is 10^-4 (the 1 − 10^-4
    quantile, 19 df). The lopsided variant (level 19 twice as likely) is ≈ 10^4 above it."""
    limit = chi2.ppf(1 - 1e-4, 19)
    for cls, ok in ((TreeHistPrefix, True), (LopsidedLevel, False)):
        counts = np.bincount(_levels(cls(1.0, 20), 200_000, 0), minlength=20)
        stat = float(((counts - 10_000) ** 2 / 10_000).sum())
        assert bool(stat < limit) is ok, (cls.__name__, stat, limit)


def test_a_repeated_request_draws_fresh_levels_and_the_request_names_none() -> None:
    """The same 20,000 users asked twice (request ids 0 and 1, as two sessions): their levels
    agree for ≈ 1/L = 5 % (binomial sd 0.15 %; the check at < 8 % fails wrongly with probability
    < 10^-50). A level from the user id (which the aggregator knows) agrees for all, and is caught."""
    spec = RandomizerSpec("treehist_prefix", record_query(), 1.0, {"bits": 20})
    assert set(spec.params) == {"bits"} and "level" not in str(spec.to_json())  # the request carries no level
    for cls, fresh in ((TreeHistPrefix, True), (IdLevel, False)):
        R = cls(1.0, 20)
        same = float(np.mean(_levels(R, 20_000, 0) == _levels(R, 20_000, 1)))
        assert (same < 0.08) is fresh, (cls.__name__, same)


def test_each_level_estimates_its_prefixes_without_bias() -> None:
    """n = 2·10^5 users, 30 % hold 0xABCDE (20 bits), the rest uniform; at every level the planted
    prefix's estimate and one absent prefix's are within 5 sd of the truth (40 checks at
    5.7·10^-7 each: false alarm < 3·10^-5)."""
    n, d = 200_000, 20
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2**d, n)
    x[: int(0.3 * n)] = 0xABCDE
    R = TreeHistPrefix(2.0, d)
    rows = R.sample(x, RandomSource(9).for_request("unbiased", 0, np.arange(n)))
    for t, m in enumerate(R.lengths):
        mine = 0xABCDE >> (d - m)
        other = mine ^ 1
        freq, sd0, n_t = R.level_estimates(rows, t, [mine, other])
        truths = [float(np.mean(x >> (d - m) == c)) for c in (mine, other)]
        sds = np.sqrt(R.frequency_variance(np.array(truths), n_t, n))
        assert np.all(np.abs(freq - truths) < 5 * sds), (t, freq, truths, sds)
        assert sd0 == pytest.approx(float(np.sqrt(R.frequency_variance(0.0, n_t))))


def test_built_from_a_spec_on_the_users_schema() -> None:
    schema = Schema((Field("y", 1, -1, 1, 2), Field("v", 10, 0, 1)))
    local = LocalRandomizer.build(RandomizerSpec("treehist_prefix", record_query(), 2.0, {"bits": 8, "step": 2, "field": "v"}), schema)
    R = local.randomizer
    assert isinstance(R, TreeHistPrefix) and (R.bits, R.step, R.width, R.offset, R.lengths) == (8, 2, 11, 1, (2, 4, 6, 8))
    records = np.zeros((3, 11), dtype=np.int16)
    records[:, 0] = 1
    records[1, 1:9] = 1
    assert local.inputs(records).tolist() == [0, 255, 0]
    bad = records.copy()
    bad[2, 3] = 2
    with pytest.raises(ParameterError, match="the field must hold 0 or 1; record 2 holds 2"):
        local.inputs(bad)


@pytest.mark.parametrize(
    ("params", "query", "message"),
    [
        ({"bits": 11}, record_query(), r"bits must be an integer in \[1, 10\]"),
        ({"bits": 8, "step": 9}, record_query(), r"step must be an integer in \[1, bits = 8\]"),
        ({"field": "y"}, record_query(), "field 'y' must take the values 0 and 1"),
        ({}, field_query("v", 0), "use the 'record' query"),
        ({"field": "x"}, record_query(), r"the users' schema has no field 'x' \(it has \['y', 'v'\]\)"),
    ],
)
def test_bad_specs_are_refused_in_one_line(params: dict[str, object], query: object, message: str) -> None:
    schema = Schema((Field("y", 1, -1, 1, 2), Field("v", 10, 0, 1)))
    with pytest.raises(ParameterError, match=message):
        LocalRandomizer.build(RandomizerSpec("treehist_prefix", query, 1.0, {"field": "v", **params}), schema)  # type: ignore[arg-type]


def test_the_server_refuses_malformed_rows() -> None:
    R = TreeHistPrefix(1.0, 8, 2)  # levels of 2, 4, 6, 8 bits; l = 2, g = 4
    good = np.array([[0, 3, 1, 2], [3, 255, 0, 3]], dtype=np.uint64)
    assert R.decode(good).shape == (2, 4)
    for bad, message in (
        ([[4, 0, 0, 0]], "names level 4, outside 0..3"),
        ([[0, 4, 0, 0]], "hash row wider than its level's prefix"),
        ([[0, 0, 0, 4]], "y outside 0..3"),
    ):
        with pytest.raises(ParameterError, match=message):
            R.decode(np.array(bad, dtype=np.uint64))
    with pytest.raises(ParameterError, match="rows of 4 values"):
        R.decode(np.zeros((2, 3), dtype=np.uint64))


def test_the_servers_count_is_the_definition() -> None:
    """``support_counts`` (bit by bit, uint8) equals #{i : h_{A_i}(c) = y_i} computed by ``hash``."""
    R = TreeHistPrefix(4.0, 12, 3)
    x = np.random.default_rng(2).integers(0, 2**12, 5000)
    by_level = R.split_levels(R.sample(x, RandomSource(4).for_request("count", 0, np.arange(5000))))
    for t, rows in enumerate(by_level):
        c = np.arange(2 ** R.lengths[t])[:300]
        direct = (R.hash(rows[:, None, 1:-1], c[None, :]) == rows[:, -1, None].astype(np.int64)).sum(axis=0)
        assert np.array_equal(R.support_counts(rows, c), direct)
        assert np.all(rows[:, 0] == t)
