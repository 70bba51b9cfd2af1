"""TreeHist (Bassily, Nissim, Stemmer & Thakurta, NeurIPS 2017) as an INTERACTIVE session, one report per user.

Documented size (in process, OLH at every level): d = 20 bits, n = 2·10^5 users, ε = 2, beam 8,
β = 10^-3; PEM's four planted values (15, 12, 10, 8 %, the rest uniform on {0,1}^20,
tests/learners/test_heavy_hitters.py). 20 levels of 10^4 users; OLH at ε = 2 has g = 8, p* =
e²/(e² + 7), q* = 1/8, so one estimate's sd at frequency 0 is √(q*(1 − q*)/(10^4 (p* − q*)²)) =
0.0085, z = Φ⁻¹(1 − 10^-3/306) = 4.51 and τ = 0.0384. Margins: the 8 % value's prefixes clear τ by
≥ 4.8 sd at every level (miss ≤ 20·Φ(−4.8) < 2·10^-5); a value of frequency ≈ 0 is returned only if
it passes the last level (≤ 16 candidates at Φ(−4.51) = 3.2·10^-6 each, < 6·10^-5). So the check
"exactly the planted set" fails on a correct run with probability < 10^-4 (normal approximation,
union bound): its false-alarm rate. The estimates of the found values are checked within 5 sd of
the truth (5.7·10^-7 each).

Broken variants written here must fail those checks: pruning that keeps the wrong prefixes (the
beam smallest estimates, no threshold), and frequencies read without the oracle's debiasing (raw
support shares C/n). A hostile aggregator that asks one user at two levels is refused at the
second (budget ε: no report, no charge) or charged twice (budget 2ε): the ledger shows which.
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ldp
import ldp.learners.treehist as th
from ldp.core.budget import charge_units
from ldp.core.datafile import load_data
from ldp.core.errors import LDPError, ParameterError
from ldp.core.frequency_oracles import frequency_variance
from ldp.core.query_specs import prefix_index
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import derive_key_bytes
from ldp.learners.heavy_hitters import pem_groups
from ldp.learners.treehist import learn_heavy_hitters_treehist, treehist_lengths, union_bound_z
from ldp.local.messages import SessionKind
from ldp.local.session import Request, Session
from ldp.simulations.real_data import DataLROracle, data_oracle
from tests.learners.test_heavy_hitters import PLANTED, schema_file, write_users
from tests.waits import PROCESS_WAIT_S

pytestmark = pytest.mark.timeout(120)

N, BITS, EPS, BEAM, BETA = 200_000, 20, 2.0, 8, 1e-3


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, np.ndarray]:
    folder = tmp_path_factory.mktemp("treehist")
    values = write_users(folder / "users.csv", N, BITS, PLANTED, seed=11)
    return load_data(folder / "users.csv", schema_file(folder / "schema.json", BITS)), values


def _run(data: object, budget: float = EPS, **kw: object) -> tuple[th.TreeHistResult, DataLROracle]:
    oracle = DataLROracle(data, budget=budget, key=derive_key_bytes("treehist-test"), shards=2)  # type: ignore[arg-type]
    found = ldp.run(learn_heavy_hitters_treehist(oracle, bits=BITS, epsilon=EPS, beam=BEAM, beta=BETA, seed=5, **kw))  # type: ignore[arg-type]
    return found, oracle


def _spent(oracle: DataLROracle) -> np.ndarray:
    return np.concatenate([s.ledger.spent_units() for s in oracle._shards.values()])


def _frequencies_ok(found: th.TreeHistResult, values: np.ndarray, schema: object) -> bool:
    last = found.levels[-1]
    spec = RandomizerSpec("olh", prefix_index(BITS, list(range(last.candidates))), found.epsilon)
    olh = LocalRandomizer.build(spec, schema).randomizer  # type: ignore[arg-type]
    for item, estimate in zip(found.items, found.frequencies):
        truth = float(np.mean(values == item))
        if abs(estimate - truth) > 5 * math.sqrt(float(frequency_variance(olh, truth, last.answered))):
            return False
    return bool(found.items)


def test_treehist_finds_exactly_the_planted_values_charging_each_user_once(big: tuple[object, np.ndarray]) -> None:
    data, values = big
    found, oracle = _run(data)
    assert found.items == tuple(sorted(PLANTED, key=PLANTED.__getitem__, reverse=True)), found.summary()  # exactly, ranked
    assert _frequencies_ok(found, values, data.schema)  # type: ignore[attr-defined]
    assert [lv.length for lv in found.levels] == list(range(1, 21)) == treehist_lengths(20, 1)
    assert found.z == pytest.approx(union_bound_z(BETA, 20, BEAM, 1)) and 4.5 < found.z < 4.52
    assert all(lv.candidates <= 2 * BEAM and len(lv.kept) <= BEAM for lv in found.levels)
    assert all(0.035 < lv.threshold < 0.043 for lv in found.levels)  # τ = z·sd at 10^4 users (docstring; g = 4 at level 1)
    # One ε per user: every ledger holds exactly one charge, and the transcript says n·ε.
    spent = _spent(oracle)
    assert len(spent) == N and np.all(spent == charge_units(EPS))
    assert sum(lv.answered for lv in found.levels) == found.users == N
    assert oracle.transcript.epsilon_charged() == pytest.approx(EPS * N)
    # A second run finds nobody with budget left: refused, not charged again.
    with pytest.raises(LDPError, match="level 1: none of its .* users answered"):
        ldp.run(learn_heavy_hitters_treehist(oracle, bits=BITS, epsilon=EPS, beam=BEAM))
    assert np.all(_spent(oracle) == charge_units(EPS))


def test_the_checks_fail_on_broken_variants(big: tuple[object, np.ndarray], monkeypatch: pytest.MonkeyPatch) -> None:
    data, values = big
    with monkeypatch.context() as m:  # pruning that keeps the wrong prefixes: the beam weakest, no threshold
        m.setattr(th, "prune", lambda f, tau, beam: np.argsort(f, kind="stable")[:beam])
        assert not set(PLANTED) & set(_run(data)[0].items)
    with monkeypatch.context() as m:  # raw support shares C/n: no (C/n − q*)/(p* − q*)

        def raw(spec: RandomizerSpec, schema: object, reports: np.ndarray, candidates: int) -> tuple[np.ndarray, float]:
            randomizer = LocalRandomizer.build(spec, schema).randomizer  # type: ignore[arg-type]
            shares = np.asarray(randomizer.support_counts(reports), dtype=np.float64)[:candidates] / len(reports)  # type: ignore[attr-defined]
            return shares, float(np.sqrt(frequency_variance(randomizer, 0.0, len(reports))))

        m.setattr(th, "level_estimates", raw)
        found = _run(data)[0]
        assert set(PLANTED) <= set(found.items)  # the ranking survives ...
        assert found.items != tuple(sorted(PLANTED, key=PLANTED.__getitem__, reverse=True))  # ... the threshold does not (q* ≫ τ)
        assert not _frequencies_ok(found, values, data.schema)  # type: ignore[attr-defined]


@pytest.mark.parametrize("budget", [EPS, 2 * EPS])
def test_a_user_asked_at_two_levels_is_refused_or_charged_twice(big: tuple[object, np.ndarray], budget: float) -> None:
    """The hostile aggregator picks the levels: it asks level 1's users again at level 2. With a
    budget of ε the ledger refuses the second request (no report, no charge); with 2ε the user
    answers and is charged twice: the ledger, not the protocol, bounds what a user gives."""
    data, _ = big
    oracle = DataLROracle(data, budget=budget, key=derive_key_bytes("treehist-hostile"), shards=2)  # type: ignore[arg-type]
    group = pem_groups(N, 20, seed=5)[0]
    session = Session(oracle, SessionKind.INTERACTIVE, name="hostile")
    (first,) = ldp.run(session.round([Request.of(group, RandomizerSpec("olh", prefix_index(1, [0, 1]), EPS))]))
    (second,) = ldp.run(session.round([Request.of(group, RandomizerSpec("olh", prefix_index(2, [0, 1, 2, 3]), EPS))]))
    assert first.counts()["answered"] == len(group)
    spent = _spent(oracle)
    others = np.setdiff1d(np.arange(N), group)
    assert np.all(spent[others] == 0)
    if budget == EPS:
        assert second.counts()["refused"] == len(group) and second.counts()["answered"] == 0
        assert np.all(spent[group] == charge_units(EPS))
    else:
        assert second.counts()["answered"] == len(group)
        assert np.all(spent[group] == 2 * charge_units(EPS))
    assert oracle.transcript.epsilon_charged() == pytest.approx(EPS * len(group) * (1 if budget == EPS else 2))


def test_nothing_frequent_stops_early_and_charges_only_the_asked(tmp_path: Path) -> None:
    """A uniform population over 2^16: prefixes of length t hold 2^-t each, below τ from some level
    on; the run returns nothing and the later levels' users keep their whole budget."""
    write_users(tmp_path / "u.csv", 20_000, 16, {0: 1 / 20_000}, seed=3)  # one user holds 0, the rest uniform
    data = load_data(tmp_path / "u.csv", schema_file(tmp_path / "s.json", 16))
    oracle = DataLROracle(data, budget=1.0, key=derive_key_bytes("treehist-empty"), shards=1)
    found = ldp.run(learn_heavy_hitters_treehist(oracle, bits=16, epsilon=1.0, beam=8, seed=1))
    assert found.items == () and found.frequencies == () and 1 <= found.rounds < 16
    assert len(found.levels[-1].kept) == 0
    asked = np.concatenate(pem_groups(20_000, 16, seed=1)[: found.rounds])
    spent = _spent(oracle)
    assert np.all(spent[asked] == charge_units(1.0)) and int(np.count_nonzero(spent)) == len(asked) < 20_000


@pytest.mark.parametrize("oracle", ["hadamard_response", "oue"])
def test_treehist_runs_on_other_frequency_oracles(big: tuple[object, np.ndarray], oracle: str) -> None:
    data, _ = big
    found, lr = _run(data, oracle=oracle)
    assert set(found.items) == set(PLANTED), found.summary()
    assert np.all(_spent(lr) == charge_units(EPS))


async def test_grpc_run_is_bit_identical_to_in_process(tmp_path: Path) -> None:
    planted = {0b1010_1100_0011: 0.25, 0b0101_0000_1111: 0.2}
    write_users(tmp_path / "users.csv", 20_000, 12, planted, seed=2)
    schema = schema_file(tmp_path / "schema.json", 12)
    key = derive_key_bytes("treehist-grpc")
    results = []
    for transport in ("inprocess", "grpc"):
        async with data_oracle(str(tmp_path / "users.csv"), str(schema), 4.0, key, transport, processes=2) as oracle:
            results.append(await learn_heavy_hitters_treehist(oracle, bits=12, epsilon=4.0, beam=4, seed=3))
            assert oracle.transcript.epsilon_charged() == pytest.approx(4.0 * 20_000)
    assert results[0] == results[1]  # items, frequency estimates (floats, exactly), every level
    assert set(results[0].items) == set(planted)


def test_bad_parameters() -> None:
    cc = ldp.concept_class("parity", 4)
    lr = ldp.InProcessLROracle(ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "t")), size=50, budget=1.0))
    for kwargs, match in (
        ({"beam": 2048}, "beam must be"),
        ({"beam": 512, "step": 3}, "at most 4095"),
        ({"bits": 70}, "bits must be"),
        ({"users": 5000}, "users must be"),
        ({"beta": 1.5}, "beta must be"),
        ({"threshold": float("nan")}, "threshold must be"),
        ({"users": 3}, "at least one user per level"),
    ):
        with pytest.raises(ParameterError, match=match):
            ldp.run(learn_heavy_hitters_treehist(lr, epsilon=1.0, **{"bits": 4, **kwargs}))  # type: ignore[arg-type]


def test_over_many_runs_recall_is_one_and_false_alarms_stay_below_beta(tmp_path: Path) -> None:
    """20 runs (each its own report key and level permutation) on one population over 2^12: two
    values at 25 and 20 %, the rest uniform (≤ 1.5·10^-4 of the users per value, 0.01 sd: zero
    for the threshold). About 1,667 users per level; τ = z·sd between 0.027 and 0.050 (sd ≤ 0.0152,
    z = 3.26), so each planted prefix clears τ by ≥ 9 sd at every level (a run misses one with
    probability < 10^-18). β = 0.05 bounds each run's chance of keeping any frequency-0 value (union
    bound); the check allows 5 runs of 20 that return anything else (P[Binomial(20, 0.05) ≥ 6] =
    3·10^-4: the false-alarm rate of this test)."""
    planted = {0b1010_1100_0011: 0.25, 0b0101_0000_1111: 0.2}
    write_users(tmp_path / "users.csv", 20_000, 12, planted, seed=4)
    data = load_data(tmp_path / "users.csv", schema_file(tmp_path / "schema.json", 12))

    def false_runs(**kw: object) -> int:
        count = 0
        for run in range(20):
            oracle = DataLROracle(data, budget=4.0, key=derive_key_bytes("treehist-runs", run), shards=1)
            found = ldp.run(learn_heavy_hitters_treehist(oracle, bits=12, epsilon=4.0, beam=4, beta=0.05, seed=run, **kw))  # type: ignore[arg-type]
            assert set(planted) <= set(found.items), (run, found.summary())
            if not kw:
                assert found.z == pytest.approx(3.2608, abs=1e-4) and all(0.026 < lv.threshold < 0.051 for lv in found.levels)
            count += len(found.items) > len(planted)
        return count

    assert false_runs() <= 5
    # Broken: a threshold that ignores the noise (τ = 0, keep every positive estimate up to the beam).
    assert false_runs(threshold=0.0) > 5


def test_the_benchmark_runs_as_documented(tmp_path: Path) -> None:
    """``python benchmarks/treehist.py`` (docs/treehist.md), a small run as a real process: it prints
    the table and saves the CSV and the PNG in ``--out`` (the timings are printed, never asserted)."""
    out = tmp_path / "th"
    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, str(root / "benchmarks" / "treehist.py"), "--quick", "--seeds", "1", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=root)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "recall@k" in proc.stdout and "TreeHist÷PEM" in proc.stdout
    with open(out / "treehist.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["learner"], r["epsilon"]) for r in rows] == [("treehist", "1.0"), ("pem", "1.0"), ("treehist", "4.0"), ("pem", "4.0")]
    assert all(r["false"] == "0" for r in rows if r["learner"] == "treehist")
    assert (out / "treehist.png").stat().st_size > 0
