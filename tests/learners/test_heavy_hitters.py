"""Heavy hitters by prefix extending (PEM) as an INTERACTIVE session, one report per user.

Documented size (in process): d = 20 bits (a domain of 2^20), n = 10^5 users, ε = 2, k = 4, η = 2
(9 rounds of ≈ 11,100 users, ≤ 16 candidates each): four planted values of frequency 15, 12, 10
and 8 % (the rest uniform on {0,1}^20) are all recovered. Margin: at every round each planted
prefix's frequency exceeds every other candidate's by ≥ 5.2 points (the 8 % value against a
background prefix of 0.45/16 at length 4), 4.8 sd of the difference of two GRR estimates (sd
0.0070–0.0081 each at 17 categories and 11,111 users); by the normal approximation and a union
bound over the ≈ 40 comparisons at that margin (the others are ≥ 7 sd) the seeded run fails with
probability < 10^-4 (the false-alarm rate of the recovery check). The frequency estimates of the found values are within 5 sd of the truth (5.7·10^-7 each).
Broken variants written here must fail the same checks: candidates extended with the wrong shift,
and frequencies read without GRR's debiasing.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import ldp.learners.heavy_hitters as hh
from ldp.core.budget import charge_units
from ldp.core.datafile import load_data
from ldp.core.errors import LDPError, ParameterError
from ldp.core.queries import make_query
from ldp.core.query_specs import prefix_index
from ldp.core.rng import derive_key_bytes
from ldp.core.schema import Field, Schema
from ldp.learners.heavy_hitters import grr_frequency_variance, learn_heavy_hitters_pem, pem_groups, pem_lengths
from ldp.simulations.real_data import DataLROracle, data_oracle

pytestmark = pytest.mark.timeout(90)

PLANTED = {0b1011_0011_1000_1111_0001: 0.15, 0b0110_1100_0101_0010_1110: 0.12, 0b1011_0011_0000_0000_1111: 0.10, 0b0000_0001_1111_1110_0000: 0.08}


def write_users(path: Path, n: int, bits: int, planted: dict[int, float], seed: int) -> np.ndarray:
    """A CSV of n users with a {0,1}^bits field x (columns x_0..x_{bits−1}, x_0 the most
    significant bit): each planted value in its share of the rows, the rest uniform; shuffled."""
    rng = np.random.default_rng(seed)
    counts = [int(round(f * n)) for f in planted.values()]
    values = np.concatenate([np.repeat(list(planted), counts), rng.integers(0, 2**bits, n - sum(counts))])
    rng.shuffle(values)
    matrix = ((values[:, None] >> (bits - 1 - np.arange(bits))[None, :]) & 1).astype(np.int8)
    header = ",".join(f"x_{j}" for j in range(bits))
    np.savetxt(path, matrix, fmt="%d", delimiter=",", header=header, comments="")
    return values


def schema_file(path: Path, bits: int) -> Path:
    path.write_text(json.dumps({"fields": [{"name": "x", "length": bits}]}))
    return path


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, np.ndarray]:
    folder = tmp_path_factory.mktemp("hh")
    values = write_users(folder / "users.csv", 100_000, 20, PLANTED, seed=1)
    return folder / "users.csv", schema_file(folder / "schema.json", 20), values


def _run(data_path: Path, schema: Path, epsilon: float = 2.0, **kw: object) -> tuple[hh.HeavyHitters, DataLROracle]:
    data = load_data(data_path, schema)
    oracle = DataLROracle(data, budget=epsilon, key=derive_key_bytes("hh-test"), shards=2)
    import ldp

    return ldp.run(learn_heavy_hitters_pem(oracle, bits=20, k=4, epsilon=epsilon, step=2, seed=7, **kw)), oracle  # type: ignore[arg-type]


def _recovered(found: hh.HeavyHitters) -> bool:
    return set(found.items) == set(PLANTED)


def _frequencies_ok(found: hh.HeavyHitters, values: np.ndarray) -> bool:
    last = found.levels[-1]
    for item, estimate in zip(found.items, found.frequencies):
        truth = float(np.mean(values == item))
        sd = math.sqrt(grr_frequency_variance(found.epsilon, last.candidates + 1, truth) / last.answered)
        if abs(estimate - truth) > 5 * sd:
            return False
    return True


def test_pem_recovers_the_planted_heavy_hitters_charging_each_user_once(big: tuple[Path, Path, np.ndarray]) -> None:
    data_path, schema, values = big
    found, oracle = _run(data_path, schema)
    assert _recovered(found), found.summary()
    assert list(found.items) == sorted(PLANTED, key=PLANTED.__getitem__, reverse=True)  # ranked by frequency
    assert _frequencies_ok(found, values)
    assert found.rounds == 9 and [lv.length for lv in found.levels] == pem_lengths(20, 4, 2) == list(range(4, 21, 2))
    assert all(lv.candidates <= 16 for lv in found.levels) and found.levels[0].candidates == 16
    # Each user answered exactly once, at ε: every ledger holds exactly one charge.
    spent = np.concatenate([s.ledger.spent_units() for s in oracle._shards.values()])
    assert len(spent) == 100_000 and np.all(spent == charge_units(2.0))
    assert sum(lv.answered for lv in found.levels) == found.users == 100_000
    assert oracle.transcript.epsilon_charged() == pytest.approx(2.0 * 100_000)
    # A second run finds nobody with budget left: refused, not charged again.
    with pytest.raises(LDPError, match="none of its .* users answered"):
        import ldp

        ldp.run(learn_heavy_hitters_pem(oracle, bits=20, k=4, epsilon=2.0, step=2))
    assert np.all(np.concatenate([s.ledger.spent_units() for s in oracle._shards.values()]) == charge_units(2.0))


@pytest.mark.parametrize("oracle", ["olh", "oue"])
def test_pem_runs_on_the_other_frequency_oracles(big: tuple[Path, Path, np.ndarray], oracle: str) -> None:
    """Each round through OLH or OUE (ldp.core.frequency_oracles) instead of GRR: the same users,
    one charge each, the same planted values found (measured in docs/mean_and_heavy_hitters.md:
    at ε = 1 they need half GRR's users, at ε = 2 GRR's 17 categories are the better choice)."""
    data_path, schema, _ = big
    found, lr = _run(data_path, schema, oracle=oracle)
    assert _recovered(found), found.summary()
    spent = np.concatenate([s.ledger.spent_units() for s in lr._shards.values()])
    assert np.all(spent == charge_units(2.0))


def test_the_checks_fail_on_broken_variants(big: tuple[Path, Path, np.ndarray], monkeypatch: pytest.MonkeyPatch) -> None:
    data_path, schema, values = big
    with monkeypatch.context() as m:  # extension with a shift one bit short: the prefixes no longer nest
        m.setattr(hh, "extend_candidates", lambda top, extra: np.unique((np.asarray(top)[:, None] * (1 << (extra - 1)) + np.arange(1 << extra)[None, :]).ravel()))
        assert not _recovered(_run(data_path, schema)[0])
    with monkeypatch.context() as m:  # raw report shares, no (share − q)/(p − q)
        m.setattr(hh, "estimate_frequencies", lambda reports, eps, count: np.bincount(reports.astype(np.int64), minlength=count + 1)[:count] / len(reports))
        found = _run(data_path, schema)[0]
        assert _recovered(found) and not _frequencies_ok(found, values)  # ranking survives, the numbers do not


async def test_grpc_run_is_bit_identical_to_in_process(tmp_path: Path) -> None:
    planted = {0b1010_1100_0011: 0.2, 0b0101_0000_1111: 0.1}
    write_users(tmp_path / "users.csv", 20_000, 12, planted, seed=2)
    schema = schema_file(tmp_path / "schema.json", 12)
    key = derive_key_bytes("hh-grpc")
    results = []
    for transport in ("inprocess", "grpc"):
        async with data_oracle(str(tmp_path / "users.csv"), str(schema), 4.0, key, transport, processes=2) as oracle:
            results.append(await learn_heavy_hitters_pem(oracle, bits=12, k=2, epsilon=4.0, step=3, seed=3))
            assert oracle.transcript.epsilon_charged() == pytest.approx(4.0 * 20_000)
    assert results[0] == results[1]  # items, frequency estimates (floats, exactly), every level
    assert set(results[0].items) == set(planted)


def test_groups_partition_the_users() -> None:
    groups = pem_groups(1001, 7, seed=0, first_user=5)
    ids = np.concatenate(groups)
    assert sorted(ids.tolist()) == list(range(5, 1006)) and {len(g) for g in groups} <= {143, 144}
    assert all(np.all(np.diff(g) > 0) for g in groups)


def test_prefix_index_query_and_bad_parameters() -> None:
    schema = Schema((Field("x", 5),))
    q = make_query(prefix_index(3, [5, 0, 7]), schema)
    records = np.array([[1, 0, 1, 1, 1], [0, 0, 0, 1, 0], [1, 1, 0, 0, 0]], dtype=np.int16)  # prefixes 101, 000, 110
    assert q.evaluate(records).tolist() == [0.0, 1.0, 3.0] and q.values().tolist() == [0, 1, 2, 3]
    for bad, match in (
        (lambda: prefix_index(0, [0]), "length must be ≥ 1"),
        (lambda: prefix_index(2, [4]), "distinct integers in \\[0, 2\\^2\\)"),
        (lambda: prefix_index(2, [1, 1]), "distinct"),
        (lambda: make_query(prefix_index(6, [1]), schema), "length must be in \\[1, 5\\]"),
        (lambda: make_query(prefix_index(2, [1], field="y"), Schema((Field("y", 2, 0, 3),))), "must take the values 0 and 1"),
    ):
        with pytest.raises(ParameterError, match=match):
            bad()
    import ldp

    lr = ldp.InProcessLROracle(ldp.PopulationSpec(ldp.concept_class("parity", 4), ldp.concept_class("parity", 4).random_target(ldp.generator(0, "t")), size=50, budget=1.0))
    for kwargs, match in (({"k": 512, "step": 3}, "at most 4095"), ({"k": 2, "bits": 70}, "bits must be"), ({"k": 2, "users": 5000}, "users must be")):
        with pytest.raises(ParameterError, match=match):
            ldp.run(learn_heavy_hitters_pem(lr, epsilon=1.0, **{"bits": 4, **kwargs}))  # type: ignore[arg-type]
