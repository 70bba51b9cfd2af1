"""Sessions, shards and the in-process LR oracle (KLNRS Def. 4.3, 4.4)."""

import json

import numpy as np
import pytest

from ldp.core.concepts import MaskedParityConcept, concept_class
from ldp.core.errors import ParameterError, SessionError
from ldp.core.population import PopulationSpec
from ldp.core.queries import QuerySpec
from ldp.core.query_specs import conjunction, field_query, label_query, record_query
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import Assignment, RoundRequest, SessionKind, Status, Users
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session


def population(n=3000, budget=1.0, seed=7):
    cc = concept_class("masked_parity", 4)
    return PopulationSpec(cc, MaskedParityConcept((1, 0, 1, 1), 1), n, budget=budget, seed=seed)


RR = RandomizerSpec("binary_rr", field_query("b"), 0.5)
LAP = RandomizerSpec("discrete_laplace", label_query(), 0.25)


async def run_script(oracle):
    """A 3-round interactive session and a non-interactive one; returns everything observable."""
    out = []
    s = Session(oracle, SessionKind.INTERACTIVE)
    out += await s.round([Request.of(range(0, 2000), RR), Request.of([5, 2999, 17], LAP)])
    out += await s.round([Request.of(range(1000, 3000), LAP)])
    out += await s.round([Request.of(range(0, 3000), RandomizerSpec("pm_rr", label_query(), 0.5))])
    ni = Session(oracle, SessionKind.NON_INTERACTIVE)
    out += await ni.round([Request.of(range(0, 3000), RandomizerSpec("record_rr", record_query(), 0.25))])
    return out


async def test_results_do_not_depend_on_how_users_are_sharded():
    spec = population()
    a = await run_script(InProcessLROracle(spec, shards=1))
    b_oracle = InProcessLROracle(spec, boundaries=[0, 7, 1500, 2999, 3000])
    b = await run_script(b_oracle)
    for x, y in zip(a, b):
        assert np.array_equal(x.users, y.users) and np.array_equal(x.status, y.status)
        assert np.array_equal(x.values, y.values)
    # budget 1.0. Round 3 (ε 0.5) refuses whoever already spent 0.75: users 1000..1999 (0.5 + 0.25)
    # and users 5, 17 (0.5 + 0.25 from the Laplace request of round 1).
    assert set(a[3].refused_users.tolist()) == set(range(1000, 2000)) | {5, 17}
    # record_rr (0.25) then refuses exactly those at 1.0: users 0..999 but 5 and 17, and user 2999.
    assert set(a[4].refused_users.tolist()) == (set(range(1000)) - {5, 17}) | {2999}
    assert np.array_equal(InProcessLROracle(spec).ledger_spent_units(), np.zeros(3000))  # a fresh oracle: fresh ledgers
    assert np.array_equal(b_oracle.ledger_spent_units(), (await _spent(spec)))


async def _spent(spec):
    o = InProcessLROracle(spec, shards=2)
    await run_script(o)
    return o.ledger_spent_units()


async def test_non_interactive_session_refuses_a_second_round_at_both_ends():
    oracle = InProcessLROracle(population())
    s = Session(oracle, SessionKind.NON_INTERACTIVE)
    await s.round([Request.of(range(10), RR)])
    with pytest.raises(SessionError, match="non-interactive"):
        await s.round([Request.of(range(10), RR)])
    # an aggregator that bypasses Session is refused by the users' side, ledger unchanged
    spent = oracle.ledger_spent_units().copy()
    forged = RoundRequest(s.session_id, SessionKind.NON_INTERACTIVE, 1, (Assignment(999, Users.range(0, 10), RR),))
    reports = await oracle.run_round(forged)
    assert (reports[0].status == Status.ERROR).all() and "non-interactive" in reports[0].errors[0]
    assert np.array_equal(oracle.ledger_spent_units(), spent)


async def test_replayed_interactive_round_is_refused():
    oracle = InProcessLROracle(population())
    s = Session(oracle, SessionKind.INTERACTIVE)
    await s.round([Request.of(range(10), RR)])
    replay = RoundRequest(s.session_id, SessionKind.INTERACTIVE, 0, (Assignment(1, Users.range(0, 10), RR),))
    reports = await oracle.run_round(replay)
    assert (reports[0].status == Status.ERROR).all() and "replays are refused" in reports[0].errors[0]


@pytest.mark.parametrize(
    "spec,match",
    [
        (RandomizerSpec("binary_rr", QuerySpec("nope", {}), 0.5), "unknown query kind"),
        (RandomizerSpec.unchecked("nope", label_query(), 0.5), "unknown randomizer kind"),
        (RandomizerSpec.unchecked("binary_rr", label_query(), float("nan")), "epsilon"),
        (RandomizerSpec("binary_rr", label_query(), 0.5), "binary_rr needs a {0,1}-valued query"),
        (RandomizerSpec("discrete_laplace", conjunction(("b", 0, 7)), 0.5), "takes values"),
        (RandomizerSpec("laplace", label_query(), 0.5), "not auditable"),
        (RandomizerSpec("pm_rr", record_query(), 0.5), "record"),
    ],
)
async def test_invalid_requests_are_errors_and_charge_nothing(spec, match):
    oracle = InProcessLROracle(population(), shards=2)
    s = Session(oracle, SessionKind.INTERACTIVE)
    (reports,) = await s.round([Request.of(range(0, 3000), spec)])
    assert (reports.status == Status.ERROR).all()
    assert match in reports.errors[0]
    assert not oracle.ledger_spent_units().any()


async def test_over_budget_users_are_refused_without_charge():
    oracle = InProcessLROracle(population(budget=0.5))
    s = Session(oracle, SessionKind.INTERACTIVE)
    await s.round([Request.of(range(0, 100), RR)])
    spent = oracle.ledger_spent_units().copy()
    (r,) = await s.round([Request.of(range(50, 150), RR)])
    assert r.refused_users.tolist() == list(range(50, 100))
    assert r.answered_users.tolist() == list(range(100, 150)) and len(r.values) == 50
    assert np.array_equal(oracle.ledger_spent_units()[:100], spent[:100])


async def test_unknown_users_are_an_error_before_anything_is_sent():
    oracle = InProcessLROracle(population(n=100))
    s = Session(oracle, SessionKind.INTERACTIVE)
    with pytest.raises(ParameterError, match="no connected shard holds"):
        await s.round([Request.of(range(90, 110), RR)])
    assert not oracle.ledger_spent_units().any()


def test_a_request_names_each_user_once():
    with pytest.raises(ParameterError, match="at most once"):
        Users.of([1, 2, 2])


async def test_transcript_is_json_and_carries_no_data():
    spec = population()
    oracle = InProcessLROracle(spec)
    await run_script(oracle)
    text = json.dumps(oracle.transcript.to_json())
    assert [r["kind"] for r in oracle.transcript.rounds] == ["INTERACTIVE"] * 3 + ["NON_INTERACTIVE"]
    assert '"values"' not in text and '"records"' not in text
    assert oracle.transcript.epsilon_charged() > 0


async def test_a_huge_forged_range_is_refused_without_materializing_it():
    """A hostile aggregator asks for users 0..10^12: the shard answers with an error at once
    (it would need 8 TB to list them) and stays usable."""
    oracle = InProcessLROracle(population(n=100))
    forged = RoundRequest(77, SessionKind.INTERACTIVE, 0, (Assignment(1, Users.range(0, 10**12), RR),))
    reply = oracle.shard("shard-0").answer(forged)
    assert "outside this shard's 0..99" in reply.results[0].error
    s = Session(oracle, SessionKind.INTERACTIVE)
    (ok,) = await s.round([Request.of(range(100), RR)])
    assert ok.counts()["answered"] == 100


async def test_an_input_the_randomizer_refuses_is_an_error_that_does_not_name_the_value(monkeypatch):
    """Were a user's input outside the randomizer's domain (a query breaking its word), the error
    that reaches the aggregator says so without the value, and nothing is charged."""
    from ldp.core.queries import make_query

    oracle = InProcessLROracle(population(), shards=2)
    spec = RandomizerSpec("kary_rr", label_query(), 0.5)
    label_cls = type(make_query(label_query(), population().schema))
    monkeypatch.setattr(label_cls, "evaluate", lambda self, records, users=None: np.full(len(records), 12345.0))
    (reports,) = await Session(oracle, SessionKind.INTERACTIVE).round([Request.of(range(0, 3000), spec)])
    assert (reports.status == Status.ERROR).all() and "not reported" in reports.errors[0]
    assert "12345" not in " ".join(reports.errors)
    assert not oracle.ledger_spent_units().any()


async def test_a_failed_commit_refunds_the_round_and_sends_no_report(tmp_path, monkeypatch):
    """A durable store whose commit fails (a full disk): the round is an error, no report leaves,
    and every charge of the round is refunded (the earlier, committed round stays charged)."""
    from ldp.local.ledger_store import SqliteLedgerStore

    path = tmp_path / "ledger.sqlite"
    store = SqliteLedgerStore(path)
    oracle = InProcessLROracle(population(), store=store)
    s = Session(oracle, SessionKind.INTERACTIVE)
    await s.round([Request.of(range(0, 100), RR)])

    def full_disk() -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "commit", full_disk)
    (r,) = await s.round([Request.of(range(0, 3000), RR)])
    assert (r.status == Status.ERROR).all() and len(r.values) == 0 and "nothing was charged" in r.errors[0]
    spent = oracle.ledger_spent_units()
    assert (spent[:100] > 0).all() and not spent[100:].any()
