"""The multidimensional kinds ``spl``, ``smp`` and ``rsfd`` asked over the ``record`` query of a
data file with four categorical columns, answered through a Session on a ``DataLROracle``
(issue 26; over gRPC in tests/wire/test_multidimensional_grpc.py).

- **the reports are the module's**: every row is ``encode_reports`` of the protocol's own
  ``sample`` with the shard's key and the users' nonces (recomputed here with the public
  functions, bit for bit); SMP's disclosed index is ``uniform_index`` of the user's own draw 0;
- **the charge is the spec's ε**, and the realized whole-record loss is at most it (exact, by
  ``RecordChannel``): ``rsfd`` with the paper's ``paper_epsilon`` is refused in one line unless
  its ε′ = ln(d(e^ε − 1) + 1) fits in the spec's ε;
- **the estimates are unbiased**: from the rows the aggregator receives (``decode_reports``),
  every attribute's f̂ lies within 5 exact standard deviations of the file's frequencies.
  False alarm: 5 sd two-sided is 5.7e-7 per coordinate, 12 coordinates × 8 configurations:
  < 6e-5 (and the run is seeded). Broken variants caught: RS+FD's fake data drawn from the true
  value, and an estimator that forgets the fake data (|z| > 5 somewhere);
- **a malformed report is refused** by ``decode_reports`` (and by the wire's format check).
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from ldp.core import multidimensional as md
from ldp.core.budget import charge_units
from ldp.core.datafile import load_data
from ldp.core.errors import ParameterError
from ldp.core.frequency_oracles import support_probabilities
from ldp.core.query_specs import field_query, record_query
from ldp.core.randomizer_base import uniform_index
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import UserRandomness, derive_key_bytes
from ldp.core.schema import Field, Schema
from ldp.local.data_oracle import DataLROracle
from ldp.local.messages import SessionKind, Status
from ldp.local.session import Request, Session

KEY = derive_key_bytes("multidimensional kinds", 0)
SPECIES = ("Adelie", "Chinstrap", "Gentoo")
ISLANDS = ("Biscoe", "Dream", "Torgersen")
SCHEMA_JSON = (
    '{"fields": ['
    '{"name": "species", "type": "category", "categories": ["Adelie", "Chinstrap", "Gentoo"]}, '
    '{"name": "island", "type": "category", "categories": ["Biscoe", "Dream", "Torgersen"]}, '
    '{"name": "female", "low": 0, "high": 1}, '
    '{"name": "chicks", "low": 0, "high": 3}]}'
)
# (kind, params): every protocol, each oracle and RS+FD variant at least once
CONFIGS: tuple[tuple[str, dict[str, object]], ...] = (
    ("spl", {}),
    ("spl", {"oracle": "oue"}),
    ("smp", {}),
    ("smp", {"oracle": "sue"}),
    ("rsfd", {}),
    ("rsfd", {"variant": "oue_z"}),
    ("rsfd", {"variant": "oue-r"}),
    ("rsfd", {"variant": "adp"}),
)


def write_penguins(path: Path, n: int, seed: int = 5) -> np.ndarray:
    """A CSV of n users with four categorical columns (k = 3, 3, 2, 4) and its declared schema
    (``path`` with suffix .schema.json); returns the records as the schema codes them."""
    rng = np.random.default_rng(seed)
    x = np.column_stack(
        [rng.choice(3, n, p=[0.5, 0.2, 0.3]), rng.choice(3, n, p=[0.1, 0.6, 0.3]), rng.random(n) < 0.45, rng.choice(4, n, p=[0.4, 0.3, 0.2, 0.1])]
    ).astype(np.int64)
    lines = ["species,island,female,chicks"] + [f"{SPECIES[a]},{ISLANDS[b]},{c},{d}" for a, b, c, d in x]
    path.write_text("\n".join(lines) + "\n")
    path.with_suffix(".schema.json").write_text(SCHEMA_JSON)
    return x


def spec(kind: str, epsilon: float = 1.0, **params: object) -> RandomizerSpec:
    return RandomizerSpec(kind, record_query(), epsilon, dict(params))


def expected_rows(local: LocalRandomizer, records: np.ndarray, users: np.ndarray, nonces: np.ndarray) -> np.ndarray:
    """What an honest shard must send: the module's sample with the report key and nonces."""
    protocol = local.randomizer.protocol  # type: ignore[attr-defined]
    x = records[users].astype(np.float64)
    return md.encode_reports(protocol, protocol.sample(x, UserRandomness(KEY, users, nonces)))


async def _answer(data, r: RandomizerSpec, users: np.ndarray, budget: float = 8.0):  # type: ignore[no-untyped-def]
    oracle = DataLROracle(data, budget=budget, key=KEY, shards=2)
    (rep,) = await Session(oracle, SessionKind.NON_INTERACTIVE, name=r.kind).round([Request.of(users, r)])
    return oracle, rep


@pytest.mark.parametrize(("kind", "params"), CONFIGS)
async def test_every_report_is_the_modules_from_the_users_key_and_nonces(tmp_path: Path, kind: str, params: dict) -> None:
    write_penguins(tmp_path / "p.csv", 500)
    data = load_data(tmp_path / "p.csv", tmp_path / "p.schema.json")
    users = np.arange(data.size)
    r = spec(kind, **params)
    local = LocalRandomizer.build(r, data.schema)
    oracle = DataLROracle(data, budget=8.0, key=KEY, shards=2)
    session = Session(oracle, SessionKind.INTERACTIVE, name=kind)
    for nonce in range(2):  # the second round: fresh nonces, fresh reports
        (rep,) = await session.round([Request.of(users, r)])
        assert (rep.status == Status.ANSWERED).all()
        want = expected_rows(local, data.records(0, data.size), users, np.full(len(users), nonce))
        assert rep.values.dtype == np.uint16 and np.array_equal(rep.values, want)
        if kind == "smp":  # the disclosed index is the user's own draw 0, nothing the aggregator chose
            assert np.array_equal(rep.values[:, 0], uniform_index(UserRandomness(KEY, users, np.full(len(users), nonce)).bits(0), 4))
    spent = np.concatenate([s.ledger.spent_units() for s in oracle._shards.values()])  # noqa: SLF001 - the test reads the users' ledgers
    assert (spent == 2 * charge_units(1.0)).all()  # the spec's ε, per report


def _z(rows: np.ndarray, local: LocalRandomizer, truth: np.ndarray, decode=md.decode_reports) -> float:  # type: ignore[no-untyped-def]
    """The largest |f̂ − f|/sd over every attribute and category, sd the protocol's exact one."""
    P = local.randomizer.protocol  # type: ignore[attr-defined]
    reports = decode(P, rows)
    est = P.frequencies(reports)
    f = [np.bincount(truth[:, a], minlength=k) / len(truth) for a, k in enumerate(P.ks)]
    if isinstance(P, md.SampleOne):
        # which users sent j is part of the noise: the exact variance is given n_j
        var = P.frequency_variance(f, [int((reports.sampled == a).sum()) for a in range(P.d)], len(truth))
    else:
        var = P.frequency_variance(f, len(truth))
    return max(float(np.max(np.abs(e - fa) / np.sqrt(v))) for e, fa, v in zip(est, f, var))


N_BIG = 20000


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("md") / "big.csv"
    truth = write_penguins(path, N_BIG, seed=9)
    return load_data(path, path.with_suffix(".schema.json")), truth


@pytest.mark.parametrize(("kind", "params"), CONFIGS)
async def test_the_estimates_from_the_received_rows_are_unbiased(big, kind: str, params: dict) -> None:  # type: ignore[no-untyped-def]
    data, truth = big
    r = spec(kind, 2.0, **params)
    _, rep = await _answer(data, r, np.arange(N_BIG))
    assert _z(rep.values, LocalRandomizer.build(r, data.schema), truth) < 5


async def test_a_fake_that_reads_the_true_value_is_caught(big, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Broken variant: RS+FD[GRR]'s fake data is the user's true value (it leaks, and biases)."""
    data, truth = big
    monkeypatch.setattr(md.RandomSamplingFakeData, "fake", lambda self, a, x, randomness: x)
    r = spec("rsfd", 2.0)
    _, rep = await _answer(data, r, np.arange(N_BIG))
    assert _z(rep.values, LocalRandomizer.build(r, data.schema), truth) > 5


async def test_an_estimator_that_forgets_the_fake_data_is_caught(big) -> None:  # type: ignore[no-untyped-def]
    """Broken variant: RS+FD's rows read as SPL-style oracle reports, (C/n − q*)/(p* − q*)."""
    data, truth = big
    r = spec("rsfd", 2.0)
    local = LocalRandomizer.build(r, data.schema)
    _, rep = await _answer(data, r, np.arange(N_BIG))
    P = local.randomizer.protocol  # type: ignore[attr-defined]
    reports = md.decode_reports(P, rep.values)
    naive = []
    for a, col in enumerate(reports.columns):
        p, q = (float(v) for v in support_probabilities(P.oracles[a]))
        naive.append((P.support_counts(a, col) / reports.n - q) / (p - q))
    f = [np.bincount(truth[:, a], minlength=k) / N_BIG for a, k in enumerate(P.ks)]
    var = P.frequency_variance(f, N_BIG)
    assert max(float(np.max(np.abs(e - fa) / np.sqrt(v))) for e, fa, v in zip(naive, f, var)) > 5
    assert _z(rep.values, local, truth) < 5  # the honest estimator on the same rows


SMALL = Schema((Field("a", 1, 0, 1), Field("b", 1, 0, 2)))


def _record_loss(local: LocalRandomizer) -> Fraction:
    """The exact worst ratio Pr[w|x]/Pr[w|x′] over whole records, from the realized channel."""
    table = md.RecordChannel(local.randomizer.protocol).channel  # type: ignore[attr-defined]
    worst = Fraction(1)
    for col in zip(*table):
        assert min(col) > 0
        worst = max(worst, max(col) / min(col))
    return worst


@pytest.mark.parametrize(("kind", "params"), [("spl", {}), ("smp", {"oracle": "oue"}), ("rsfd", {}), ("rsfd", {"variant": "oue-z"}), ("rsfd", {"paper_epsilon": 0.5})])
def test_the_charged_epsilon_bounds_the_whole_records_realized_loss(kind: str, params: dict) -> None:
    eps = md.amplified_epsilon(0.5, 2) if "paper_epsilon" in params else 1.0
    local = LocalRandomizer.build(spec(kind, eps, **params), SMALL)
    assert local.epsilon == eps  # what the ledger charges
    ratio = _record_loss(local)
    assert math.log(ratio.numerator) - math.log(ratio.denominator) <= eps * (1 + 1e-12)


def test_the_papers_amplified_epsilon_is_refused_unless_the_spec_charges_it() -> None:
    with pytest.raises(ParameterError, match=r"rsfd: paper_epsilon=0.5 over d=2 attributes runs at ε′ .* above the spec's ε=0.5; ask for ε ≥"):
        LocalRandomizer.build(spec("rsfd", 0.5, paper_epsilon=0.5), SMALL)
    local = LocalRandomizer.build(spec("rsfd", 1.0, paper_epsilon=0.5), SMALL)
    assert local.epsilon == 1.0 and local.randomizer.protocol.epsilon == md.amplified_epsilon(0.5, 2)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("r", "message"),
    [
        (spec("spl", oracle="olh"), r"spl: oracle must be one of \['grr', 'oue', 'sue'\], got 'olh'"),
        (spec("rsfd", variant="oue"), r"rsfd: variant must be one of \['grr', 'oue-z', 'oue-r', 'adp'\], got 'oue'"),
        (spec("rsfd", paper_epsilon="1"), "rsfd: paper_epsilon must be a number, got '1'"),
        (RandomizerSpec("smp", field_query("a"), 1.0), "smp randomizes whole records; use the 'record' query, got 'field'"),
    ],
)
def test_bad_requests_are_refused_in_one_line(r: RandomizerSpec, message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        LocalRandomizer.build(r, SMALL)


def test_a_single_column_schema_is_refused() -> None:
    with pytest.raises(ParameterError, match="needs d ≥ 2 attributes"):
        LocalRandomizer.build(spec("spl"), Schema((Field("a", 1, 0, 3),)))


def test_a_malformed_report_is_refused_by_the_decoder(tmp_path: Path) -> None:
    """SMP rows of [j, index]: attribute 2 (female) has 2 categories, so [2, 3] does not fit it
    although 3 is a fine index of attribute 3; an index 4 names no attribute; RS+FD rows have 4
    columns, one per attribute."""
    write_penguins(tmp_path / "p.csv", 10)
    schema = load_data(tmp_path / "p.csv", tmp_path / "p.schema.json").schema
    smp = LocalRandomizer.build(spec("smp"), schema).randomizer
    rsfd = LocalRandomizer.build(spec("rsfd"), schema).randomizer
    assert [d.tolist() for d in smp.report_domains()] == [[0, 1, 2, 3], [0, 1, 2, 3]]  # type: ignore[attr-defined]
    smp.frequencies(np.array([[0, 2], [1, 0], [2, 1], [3, 3]], dtype=np.uint16))  # type: ignore[attr-defined]
    with pytest.raises(ParameterError, match="smp: report of attribute 2 column 0 holds 3, outside"):
        smp.frequencies(np.array([[0, 2], [1, 0], [2, 3], [3, 3]], dtype=np.uint16))  # type: ignore[attr-defined]
    with pytest.raises(ParameterError, match="smp: report index column 0 holds 4"):
        smp.frequencies(np.array([[4, 0]], dtype=np.uint16))  # type: ignore[attr-defined]
    with pytest.raises(ParameterError, match="rs\\+fd: reports must be rows of 4 values"):
        rsfd.frequencies(np.zeros((3, 3), dtype=np.uint16))  # type: ignore[attr-defined]
