"""TreeHist in one NON-INTERACTIVE round (``learn_heavy_hitters_treehist_1round``): every user
draws its own level (kind ``treehist_prefix``) and the server descends the tree from the reports.

Documented size (as tests/learners/test_treehist.py): d = 20, n = 2·10^5, ε = 2, beam 8, β = 10^-3,
PEM's four planted values (15, 12, 10, 8 %, the rest uniform). Level t gets n_t ≈ 10^4 reports
(binomial: within ±5 % of 10^4 except with probability < 10^-6), so sd ≈ 0.0085 at f = 0 and
τ ≈ 0.0384 as there: the 8 % value clears τ by ≥ 4.5 sd at every level (miss ≤ 20·Φ(−4.5) <
7·10^-5) and a frequency-0 value passes the last level with probability < 6·10^-5. So "exactly the
planted set" fails on a correct run with probability < 2·10^-4: its false-alarm rate. Broken
variant: the threshold set to 0 returns extra values (caught by the same check).

Trust: one request, fixed before any reply (one round of a NON_INTERACTIVE session); each ledger
holds exactly one charge of ε; the request names no level; an aggregator that asks again is
refused at budget ε (no report, no charge) and at budget 2ε gets a fresh level from each user
(it cannot choose it), each ledger then holding two charges.
"""

from __future__ import annotations

import numpy as np
import pytest

import ldp
from ldp.core.budget import charge_units
from ldp.core.datafile import load_data
from ldp.core.errors import ParameterError
from ldp.core.query_specs import record_query
from ldp.core.randomizers import RandomizerSpec
from ldp.core.rng import derive_key_bytes
from ldp.learners.treehist import learn_heavy_hitters_treehist_1round
from ldp.local.messages import SessionKind
from ldp.local.session import Request, Session
from ldp.simulations.real_data import DataLROracle
from tests.learners.test_heavy_hitters import PLANTED, schema_file, write_users

pytestmark = pytest.mark.timeout(120)

N, BITS, EPS, BEAM, BETA = 200_000, 20, 2.0, 8, 1e-3


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, np.ndarray]:
    folder = tmp_path_factory.mktemp("treehist1")
    values = write_users(folder / "users.csv", N, BITS, PLANTED, seed=11)
    return load_data(folder / "users.csv", schema_file(folder / "schema.json", BITS)), values


def _oracle(data: object, budget: float = EPS, label: str = "treehist-1round") -> DataLROracle:
    return DataLROracle(data, budget=budget, key=derive_key_bytes(label), shards=2)  # type: ignore[arg-type]


def _spent(oracle: DataLROracle) -> np.ndarray:
    return np.concatenate([s.ledger.spent_units() for s in oracle._shards.values()])


def test_one_round_finds_exactly_the_planted_values_and_charges_each_user_once(big: tuple[object, np.ndarray]) -> None:
    data, values = big
    oracle = _oracle(data)
    found = ldp.run(learn_heavy_hitters_treehist_1round(oracle, bits=BITS, epsilon=EPS, beam=BEAM, beta=BETA))
    assert set(found.items) == set(PLANTED) and found.rounds == BITS
    assert list(found.items) == sorted(PLANTED, key=PLANTED.__getitem__, reverse=True)
    last = found.levels[-1]
    for item, estimate in zip(found.items, found.frequencies):
        truth = float(np.mean(values == item))
        assert abs(estimate - truth) < 5 * (truth * (1 - truth) / last.answered + last.sd**2) ** 0.5
    # every level's users drew it themselves: about N/L each, all N answered once
    assert sum(lv.answered for lv in found.levels) == N == found.users
    assert all(9_500 < lv.answered < 10_500 for lv in found.levels)
    # one request in one round: the transcript holds one non-interactive round, n·ε charged
    (only,) = oracle.transcript.rounds
    assert only["kind"] == "NON_INTERACTIVE" and [q["randomizer"] for q in only["requests"]] == ["treehist_prefix"]
    assert oracle.transcript.epsilon_charged() == pytest.approx(N * EPS)
    spent = _spent(oracle)
    assert len(spent) == N and np.all(spent == charge_units(EPS))


def test_a_zero_threshold_is_caught(big: tuple[object, np.ndarray]) -> None:
    data, _ = big
    found = ldp.run(learn_heavy_hitters_treehist_1round(_oracle(data, label="t0"), bits=BITS, epsilon=EPS, beam=BEAM, beta=BETA, threshold=0.0))
    assert set(found.items) > set(PLANTED)


@pytest.mark.parametrize("budget", [EPS, 2 * EPS])
def test_a_hostile_aggregator_cannot_choose_the_level(big: tuple[object, np.ndarray], budget: float) -> None:
    """It sends the same request twice, in two sessions. Budget ε: the second is refused (no
    report, no charge). Budget 2ε: both answered, charged twice, and the levels are fresh: the
    same user's two levels agree for ≈ 1/20 of the users (binomial sd 0.05 %: the check < 7 %
    fails wrongly with probability < 10^-100)."""
    data, _ = big
    oracle = _oracle(data, budget=budget, label="t-hostile")
    spec = RandomizerSpec("treehist_prefix", record_query(), EPS, {"bits": BITS})
    assert set(spec.params) == {"bits"}  # nothing in the request names a level

    async def ask(name: str) -> object:
        session = Session(oracle, SessionKind.NON_INTERACTIVE, name=name)
        (reports,) = await session.round([Request.of(range(N), spec)], last=True)
        return reports

    first = ldp.run(ask("first"))
    second = ldp.run(ask("second"))
    spent = _spent(oracle)
    if budget == EPS:
        assert len(second.values) == 0 and second.counts()["refused"] == N  # type: ignore[attr-defined]
        assert np.all(spent == charge_units(EPS))
    else:
        assert np.all(spent == 2 * charge_units(EPS))
        a = np.asarray(first.values)[:, 0]  # type: ignore[attr-defined]
        b = np.asarray(second.values)[:, 0]  # type: ignore[attr-defined]
        assert float(np.mean(a == b)) < 0.07


def test_a_uniform_population_returns_nothing_after_one_round(tmp_path: object) -> None:
    rng = np.random.default_rng(4)
    values = rng.integers(0, 2**12, 20_000)
    held = ldp.heavy_hitters(values, 1.0, method="treehist-1round", bits=12, seed=1)
    assert held.labels == () and held.users == 20_000  # everyone answered once, in the one round


def test_bad_parameters_are_refused_in_one_line(big: tuple[object, np.ndarray]) -> None:
    data, _ = big
    with pytest.raises(ParameterError, match=r"oracle must be one of \['olh'\]"):
        ldp.run(learn_heavy_hitters_treehist_1round(_oracle(data), bits=BITS, epsilon=EPS, oracle="oue"))
    with pytest.raises(ParameterError, match="beta must be a probability"):
        ldp.run(learn_heavy_hitters_treehist_1round(_oracle(data), bits=BITS, epsilon=EPS, beta=1.5))
    with pytest.raises(ParameterError, match="takes oracle 'auto' or 'olh'"):
        ldp.heavy_hitters(np.arange(100), 1.0, method="treehist-1round", bits=7, oracle="oue")
