"""The Python API refuses bad inputs where they enter, with one line naming the value and what is
allowed: randomizer and query specs, populations, sessions, the launcher, ledgers and the
randomizers themselves. Nothing is sent, spawned or charged for a refused input."""

from __future__ import annotations

import asyncio
import math
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ldp
from ldp.core.budget import Ledger
from ldp.core.concepts import ConceptClass, MaskedParityConcept, ProductBernoulli, Referee, Uniform, concept_class
from ldp.core.errors import LDPError, ParameterError, UnknownKindError
from ldp.core.laplace import DiscreteLaplaceRandomizer, LaplaceRandomizer
from ldp.core.plus_minus import PlusMinusRandomizedResponse
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.queries import QuerySpec
from ldp.core.query_specs import affine, conjunction, field_query, label_query, parity, product
from ldp.core.randomizers import RandomizerSpec
from ldp.core.rr_mechanisms import BinaryRandomizedResponse, KaryRandomizedResponse, RecordRandomizedResponse
from ldp.local.messages import Assignment, RoundRequest, SessionKind, Status, Users
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session
from ldp.wire.aggregator import ShardClaim
from ldp.wire.client_config import ClientConfig
from ldp.wire.launcher import grpc_oracle_factory, launch_local, spawn_clients

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
CC = concept_class("masked_parity", 4)
TARGET = MaskedParityConcept((1, 0, 1, 1), 1)
BIT = field_query("b")
NAN, INF = math.nan, math.inf
_RR = RandomizerSpec("binary_rr", BIT, 0.5)
_BRR = BinaryRandomizedResponse(1.0)


def spec_of(**changes: Any) -> PopulationSpec:
    kw: dict[str, Any] = dict(concept_class=CC, target=TARGET, size=1000, budget=1.0, seed=3)
    kw.update(changes)
    return PopulationSpec(**kw)


def _enter(cm: Any) -> None:
    async def go() -> None:
        async with cm:
            pass

    asyncio.run(go())


def _round(query: QuerySpec, deadline_s: float = 30.0) -> Callable[[], None]:
    """A Session round asking for ``query``; the oracle must still be untouched afterwards."""

    def go() -> None:
        oracle = InProcessLROracle(spec_of())
        session = Session(oracle, SessionKind.INTERACTIVE, deadline_s=deadline_s)
        try:
            asyncio.run(session.round([Request.of(range(10), RandomizerSpec("binary_rr", BIT, 0.5)), Request.of(range(10, 20), RandomizerSpec("binary_rr", query, 0.5))]))
        finally:
            assert not oracle.ledger_spent_units().any() and not oracle.transcript.rounds, "something was sent or charged"

    return go


def _round_users(users: range) -> Callable[[], None]:
    """A Session round whose second request names ``users``; nothing may be sent or charged."""

    def go() -> None:
        oracle = InProcessLROracle(spec_of())
        session = Session(oracle, SessionKind.INTERACTIVE)
        try:
            asyncio.run(session.round([Request.of(range(10), RandomizerSpec("binary_rr", BIT, 0.5)), Request.of(users, RandomizerSpec("binary_rr", BIT, 0.5))]))
        finally:
            assert not oracle.ledger_spent_units().any() and not oracle.transcript.rounds, "something was sent or charged"

    return go


def _spec_json(change: dict[str, Any] | None) -> Any:
    """The JSON of a valid spec with ``change`` applied (a None value removes the key); None: a list."""
    if change is None:
        return [1, 2]
    data = spec_of().to_json()
    for key, value in change.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    return data


CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    # --- RandomizerSpec ---
    *[(f"RandomizerSpec epsilon={e!r}", (lambda e=e: RandomizerSpec("binary_rr", BIT, e)), ParameterError, "epsilon")
      for e in (0, -1, NAN, INF, -INF, "abc", None, True, 1e-300, 2000.0, "0.5", [0.5])],
    ("RandomizerSpec unknown kind", lambda: RandomizerSpec("nosuch_rr", BIT, 0.5), UnknownKindError, "unknown randomizer kind 'nosuch_rr'; registered kinds are ['adaptive_fo', 'alpha_one_bit_mean', 'binary_rr'"),
    ("RandomizerSpec kind not a string", lambda: RandomizerSpec(5, BIT, 0.5), ParameterError, "randomizer kind must be a string"),
    ("RandomizerSpec query a string", lambda: RandomizerSpec("binary_rr", "b", 0.5), ParameterError, "query must be a QuerySpec"),
    ("RandomizerSpec params a list", lambda: RandomizerSpec("binary_rr", BIT, 0.5, [1, 2]), ParameterError, "params must be a mapping"),
    ("RandomizerSpec.from_json unknown kind", lambda: RandomizerSpec.from_json({"kind": "zz", "query": BIT.to_json(), "epsilon": 1}), UnknownKindError, "'zz'"),
    ("RandomizerSpec.from_json no epsilon", lambda: RandomizerSpec.from_json({"kind": "binary_rr", "query": BIT.to_json()}), ParameterError, "malformed randomizer spec"),
    ("RandomizerSpec.from_json nan", lambda: RandomizerSpec.from_json({"kind": "binary_rr", "query": BIT.to_json(), "epsilon": "nan"}), ParameterError, "nan"),
    ("RandomizerSpec.from_json None", lambda: RandomizerSpec.from_json(None), ParameterError, "malformed randomizer spec: expected a JSON object with keys ['kind', 'query', 'epsilon', 'params'], got NoneType None"),
    ("RandomizerSpec.from_json a list", lambda: RandomizerSpec.from_json([1, 2]), ParameterError, "expected a JSON object"),
    ("RandomizerSpec.from_json unknown key", lambda: RandomizerSpec.from_json({**_RR.to_json(), "colour": 1}), ParameterError, "malformed randomizer spec: unknown keys ['colour']"),
    ("RandomizerSpec.from_json epsilon None", lambda: RandomizerSpec.from_json({**_RR.to_json(), "epsilon": None}), ParameterError, "randomizer spec key 'epsilon' must be a number, got None"),
    ("RandomizerSpec.from_json params None", lambda: RandomizerSpec.from_json({**_RR.to_json(), "params": None}), ParameterError, "randomizer spec key 'params' must be a JSON object, got None"),
    ("RandomizerSpec.from_json query None", lambda: RandomizerSpec.from_json({**_RR.to_json(), "query": None}), ParameterError, "randomizer spec key 'query': a query spec must be an object"),
    # --- QuerySpec and the query constructors ---
    *[(f"QuerySpec name={n!r}", (lambda n=n: QuerySpec(n)), ParameterError, "a query name must be a non-empty identifier")
      for n in ("", "a-b", "two words", 5, None)],
    ("QuerySpec params a list", lambda: QuerySpec("field", [1]), ParameterError, "params must be a mapping"),
    ("QuerySpec params key not a string", lambda: QuerySpec("field", {1: 2}), ParameterError, "parameter names must be strings, got 1"),
    *[(f"field_query name={n!r}", (lambda n=n: field_query(n)), ParameterError, "must be a field name") for n in ("", "x y", None, 3)],
    *[(f"field_query index={i!r}", (lambda i=i: field_query("x", i)), ParameterError, "index must be an integer ≥ 0") for i in (-1, 1.5, "0", True, None)],
    ("label_query empty", lambda: label_query(""), ParameterError, "must be a field name"),
    ("conjunction without literals", lambda: conjunction(), ParameterError, "needs at least one literal"),
    ("conjunction short literal", lambda: conjunction(("x", 0)), ParameterError, "literal 0 must be (field, index, value)"),
    ("conjunction negative index", lambda: conjunction(("x", -1, 1)), ParameterError, "literal 0 index must be an integer ≥ 0, got -1"),
    ("conjunction float value", lambda: conjunction(("b", 0, 0), ("x", 0, 1.5)), ParameterError, "literal 1 value must be an integer, got 1.5"),
    ("conjunction equal not bool", lambda: conjunction(("x", 0, 1, "no")), ParameterError, "equal must be True or False"),
    ("parity negative index", lambda: parity([-1]), ParameterError, "mask indices must be ≥ 0, got -1"),
    ("parity repeated index", lambda: parity([0, 0]), ParameterError, "mask indices must be distinct"),
    ("parity float mask", lambda: parity([0.5]), ParameterError, "integer indices"),
    ("parity string mask", lambda: parity("01"), ParameterError, "mask must be a list"),
    ("parity 2-d mask", lambda: parity([[0, 1]]), ParameterError, "one-dimensional"),
    ("parity output", lambda: parity([0], output="xor"), ParameterError, "output must be 'sign' or 'bit', got 'xor'"),
    ("parity field", lambda: parity([0], field=""), ParameterError, "must be a field name"),
    ("product of nothing", lambda: product(), ParameterError, "at least one factor"),
    ("product of a string", lambda: product("x"), ParameterError, "factor 0 must be a QuerySpec"),
    ("affine of a string", lambda: affine("x"), ParameterError, "affine: query must be a QuerySpec"),
    ("affine scale nan", lambda: affine(BIT, scale=NAN), ParameterError, "affine: scale must be a finite number, got nan"),
    ("affine offset inf", lambda: affine(BIT, offset=INF), ParameterError, "affine: offset must be a finite number, got inf"),
    ("affine scale string", lambda: affine(BIT, scale="2"), ParameterError, "affine: scale must be a finite number, got '2'"),
    # --- Session: the deadline, and queries checked against the users' schema before sending ---
    *[(f"Session deadline_s={d!r}", (lambda d=d: Session(InProcessLROracle(spec_of()), SessionKind.INTERACTIVE, deadline_s=d)), ParameterError, "deadline_s")
      for d in (0, -1, NAN, INF, "abc")],
    ("Session.round unknown field", _round(field_query("nosuch")), ParameterError, "request 1 (binary_rr of query 'field'): unknown field 'nosuch'; the schema has ['x', 'i', 'b', 'y']"),
    ("Session.round index past the field", _round(field_query("x", 9)), ParameterError, "field 'x' has indices 0..3, got index 9"),
    ("Session.round conjunction field", _round(conjunction(("b", 0, 1), ("z", 0, 1))), ParameterError, "unknown field 'z'"),
    ("Session.round parity index", _round(parity([0, 7])), ParameterError, "field 'x' has indices 0..3, got index 7"),
    ("Session.round nested field", _round(product(BIT, affine(label_query("q")))), ParameterError, "unknown field 'q'"),
    ("Session.round not a Request", lambda: asyncio.run(Session(InProcessLROracle(spec_of()), SessionKind.INTERACTIVE).round(["b"])), ParameterError, "request 0 must be a Request"),
    # --- PopulationSpec ---
    *[(f"PopulationSpec size={n!r}", (lambda n=n: spec_of(size=n)), ParameterError, "population size must be an integer in [1, 2^40]")
      for n in (0, -1, 2**40 + 1, 1.5, "abc", True, None)],
    *[(f"PopulationSpec budget={b!r}", (lambda b=b: spec_of(budget=b)), ParameterError, "budget epsilon") for b in (0, NAN, INF, "abc", 2000.0)],
    *[(f"PopulationSpec seed={s!r}", (lambda s=s: spec_of(seed=s)), ParameterError, "population seed must be an integer in [0, 2^64)")
      for s in (-1, 2**64, "abc", 1.5)],
    *[(f"PopulationSpec label_noise={x!r}", (lambda x=x: spec_of(label_noise=x)), ParameterError, "label_noise must be a number in [0, 0.5)")
      for x in (0.5, -0.1, NAN, "abc")],
    ("PopulationSpec concept class a string", lambda: spec_of(concept_class="masked_parity"), ParameterError, "concept_class must be a ConceptClass"),
    ("PopulationSpec target None", lambda: spec_of(target=None), ParameterError, "target must be a Concept"),
    ("PopulationSpec distribution a string", lambda: spec_of(distribution="uniform"), ParameterError, "distribution must be a Distribution"),
    ("PopulationSpec secure a string", lambda: spec_of(secure="yes"), ParameterError, "secure must be True or False"),
    ("ConceptClass unknown", lambda: ConceptClass("nosuch", 4), UnknownKindError, "unknown concept class 'nosuch'"),
    # --- hosting more users than one process can hold: refused where the shard is built ---
    ("10^12 users in process", lambda: InProcessLROracle(spec_of(size=10**12)), ParameterError, "cannot host 1000000000000 users in one process"),
    ("10^12 records", lambda: generate_records(spec_of(size=10**12), 0, 10**12), ParameterError, "more client processes or machines"),
    ("records outside the population", lambda: generate_records(spec_of(), 990, 20), ParameterError, "outside the population 0..999"),
    ("records count not an integer", lambda: generate_records(spec_of(), 0, 1.5), ParameterError, "needs integers"),
    # --- the launcher: nothing is spawned for a bad number of processes ---
    *[(f"launch_local processes={p!r}", (lambda p=p: _enter(launch_local(spec_of(), processes=p))), ParameterError, "processes must be ≥ 1 and ≤")
      for p in (0, -1, 10**8, 1.5, "2", True)],
    ("launch_local more processes than users", lambda: _enter(launch_local(spec_of(size=3), processes=4)), ParameterError, "each process needs at least one user"),
    *[(f"grpc_oracle_factory processes={p!r}", (lambda p=p: _enter(grpc_oracle_factory(p))), ParameterError, "processes must be ≥ 1 and ≤") for p in (0, 10**8)],
    ("spawn_clients too many", lambda: spawn_clients("127.0.0.1:9", [ShardClaim(0, 1)] * 10**5, ClientConfig(population=spec_of())), ParameterError, "the number of client processes (claims) must be ≥ 1 and ≤"),
    ("spawn_clients connect timeout nan", lambda: spawn_clients("127.0.0.1:9", [ShardClaim(0, 1)], ClientConfig(population=spec_of()), connect_timeout_s=NAN), ParameterError, "connect_timeout_s must be a finite number of seconds > 0, got nan"),
    # --- Ledger ---
    ("Ledger count -1", lambda: Ledger(0, -1, 1.0), ParameterError, "integer count in [0, 2^40], got -1"),
    ("Ledger first_user -1", lambda: Ledger(-1, 5, 1.0), ParameterError, "integer first_user in [0, 2^40], got -1"),
    ("Ledger count 1.5", lambda: Ledger(0, 1.5, 1.0), ParameterError, "integer count"),
    ("Ledger count None", lambda: Ledger(0, None, 1.0), ParameterError, "integer count"),
    ("Ledger count 2^62", lambda: Ledger(0, 2**62, 1.0), ParameterError, "integer count"),
    ("Ledger budget '1'", lambda: Ledger(0, 5, "1"), ParameterError, "finite number > 0, got '1'"),
    *[(f"Ledger budget={b!r}", (lambda b=b: Ledger(0, 5, b)), ParameterError, "budget epsilon") for b in (0, NAN, INF, "abc", 2000.0)],
    # --- the randomizers ---
    *[(f"BinaryRandomizedResponse({e!r})", (lambda e=e: BinaryRandomizedResponse(e)), ParameterError, "epsilon") for e in (0, NAN, -INF, None)],
    ("KaryRandomizedResponse one category", lambda: KaryRandomizedResponse(1.0, (1,)), ParameterError, "k ≥ 2 distinct categories, got k=1"),
    ("KaryRandomizedResponse repeated category", lambda: KaryRandomizedResponse(1.0, (0, 0)), ParameterError, "k ≥ 2 distinct categories"),
    ("KaryRandomizedResponse nan category", lambda: KaryRandomizedResponse(1.0, (0, NAN)), ParameterError, "categories must be finite"),
    ("KaryRandomizedResponse nan epsilon", lambda: KaryRandomizedResponse(NAN, (0, 1)), ParameterError, "epsilon"),
    *[(f"KaryRandomizedResponse categories={c!r}", (lambda c=c: KaryRandomizedResponse(1.0, c)), ParameterError, "kary_rr categories must be a list or tuple of k ≥ 2 distinct numbers")
      for c in (None, 3, 1.5, "01", True)],
    ("KaryRandomizedResponse string categories", lambda: KaryRandomizedResponse(1.0, ["a", "b"]), ParameterError, "kary_rr categories must be numbers, got 'a'"),
    ("KaryRandomizedResponse 10^400 category", lambda: KaryRandomizedResponse(1.0, [10**400, 1]), ParameterError, "kary_rr categories must be finite"),
    ("KaryRandomizedResponse 2-d categories", lambda: KaryRandomizedResponse(1.0, np.zeros((2, 2))), ParameterError, "one-dimensional"),
    # --- generator and the audits (the sweep below tries every wrong value; these pin the words) ---
    *[(f"generator seed={s!r}", (lambda s=s: ldp.generator(s, "x")), ParameterError, "generator seed must be an integer in [0, 2^64)")
      for s in (None, NAN, INF, -1, 1.5, "8", True, 2**64)],
    ("verify_exact of a string", lambda: ldp.verify_exact("binary_rr"), ParameterError, "verify_exact: R must be a randomizer"),
    ("verify_exact check_inputs None", lambda: ldp.verify_exact(_BRR, check_inputs=None), ParameterError, "verify_exact: check_inputs must be an integer in [2, 2^20], got None"),
    ("verify_exact check_inputs 1", lambda: ldp.verify_exact(_BRR, check_inputs=1), ParameterError, "check_inputs must be an integer in [2, 2^20], got 1"),
    ("verify_exact check_sampler 'no'", lambda: ldp.verify_exact(_BRR, check_sampler="no"), ParameterError, "check_sampler must be True or False"),
    ("audit_epsilon of None", lambda: ldp.audit_epsilon(None, 1, 0), ParameterError, "audit_epsilon: R must be a randomizer"),
    ("audit_epsilon u None", lambda: ldp.audit_epsilon(_BRR, None, 0), ParameterError, "audit_epsilon: u must be a number in the input domain of binary_rr, got None"),
    ("audit_epsilon u_prime 2", lambda: ldp.audit_epsilon(_BRR, 1, 2), ParameterError, "audit_epsilon: u_prime = 2 is not an input of the randomizer: binary_rr: input 2.0 is not in its domain {0, 1}"),
    ("audit_epsilon u past a Laplace bound", lambda: ldp.audit_epsilon(LaplaceRandomizer(1.0, 1.0), 5.0, 0.0), ParameterError, "audit_epsilon: u must be in the input domain [-1, 1] of laplace, got 5.0"),
    ("audit_epsilon record of 1", lambda: ldp.audit_epsilon(RecordRandomizedResponse(1.0, (0, 0), (1, 1)), [0], [1, 1]), ParameterError, "audit_epsilon: u must be a list of 2 numbers (one record), got [0]"),
    *[(f"audit_epsilon n={n!r}", (lambda n=n: ldp.audit_epsilon(_BRR, 1, 0, n=n)), ParameterError, "audit_epsilon: n (reports per input) must be an integer in [1, 10^8]")
      for n in (0, -1, NAN, 1.5, "8", True, 10**8 + 1, 2**63)],
    *[(f"audit_epsilon alpha={a!r}", (lambda a=a: ldp.audit_epsilon(_BRR, 1, 0, n=10, alpha=a)), ParameterError, "audit_epsilon: alpha must be")
      for a in (0, 1, -1, NAN, INF, True, None, "0.01")],
    *[(f"audit_epsilon seed={s!r}", (lambda s=s: ldp.audit_epsilon(_BRR, 1, 0, n=10, seed=s)), ParameterError, "audit_epsilon: seed must be an integer in [0, 2^64)")
      for s in (-1, 1.5, None, True, 2**64)],
    ("audit_epsilon event a string", lambda: ldp.audit_epsilon(_BRR, 1, 0, n=10, event="w == 1"), ParameterError, "audit_epsilon: event must be a function"),
    ("LaplaceRandomizer bound 0", lambda: LaplaceRandomizer(1.0, 0), ParameterError, "bound b must be a finite number > 0, got 0.0"),
    ("LaplaceRandomizer bound nan", lambda: LaplaceRandomizer(1.0, NAN), ParameterError, "bound b must be a finite number > 0, got nan"),
    ("DiscreteLaplaceRandomizer epsilon 32", lambda: DiscreteLaplaceRandomizer(32.0, 1.0), ParameterError, "discrete_laplace supports ε ≤ 16"),
    ("DiscreteLaplaceRandomizer steps 3", lambda: DiscreteLaplaceRandomizer(1.0, 1.0, steps=3), ParameterError, "steps must be a power of two in [1, 2^20], got 3"),
    ("PlusMinusRandomizedResponse bound -1", lambda: PlusMinusRandomizedResponse(1.0, -1), ParameterError, "bound b must be a finite number > 0, got -1.0"),
    ("RecordRandomizedResponse empty", lambda: RecordRandomizedResponse(1.0, (), ()), ParameterError, "non-empty low and high bounds"),
    ("RecordRandomizedResponse high = low", lambda: RecordRandomizedResponse(1.0, (0,), (0,)), ParameterError, "every column needs high > low"),
    ("RecordRandomizedResponse step 0", lambda: RecordRandomizedResponse(1.0, (0,), (2,), (0,)), ParameterError, "step ≥ 1 that divides high − low"),
    # --- issue 23, items 5 and 6: the cases the hostile tester found, by name ---
    ("concept_class d a string", lambda: concept_class("masked_parity", "8"), ParameterError, "masked_parity: d must be an integer ≥ 1, got '8'"),
    ("concept_class d a float", lambda: concept_class("parity", 4.0), ParameterError, "parity: d must be an integer ≥ 1, got 4.0"),
    ("concept_class d 2^63", lambda: concept_class("parity", 2**63), ParameterError, "parity: d must be ≤ 2^16"),
    ("concept_class name a list", lambda: concept_class(["parity"], 4), ParameterError, "a concept class name must be a string"),
    ("InProcessLROracle(None)", lambda: InProcessLROracle(None), ParameterError, "population must be a PopulationSpec"),
    ("InProcessLROracle shards a string", lambda: InProcessLROracle(spec_of(), shards="2"), ParameterError, "shards must be an integer in [1, 1000]"),
    ("InProcessLROracle shards 2^63", lambda: InProcessLROracle(spec_of(), shards=2**63), ParameterError, "shards must be an integer in [1, 1000]"),
    ("Session.round users outside: named by position", _round_users(range(990, 1100)), ParameterError, "request 1 of round 0 names 100 user(s) that no connected shard holds (held: 0..999)"),
    ("Session.round range stop 2^63", lambda: Request.of(range(0, 2**63), RandomizerSpec("binary_rr", BIT, 0.5)), ParameterError, "a user range needs integers 0 ≤ start ≤ stop < 2^63 (user ids are int64), got [0, 9223372036854775808)"),
    ("Users.range stop 2^64-1", lambda: Users.range(0, 2**64 - 1), ParameterError, "stop < 2^63"),
    ("Users.of id 2^63", lambda: Users.of([2**63]), ParameterError, "user ids must be in [0, 2^63) (int64), got ids from 9223372036854775808"),
    ("Users.of id -1", lambda: Users.of([3, -1]), ParameterError, "user ids must be in [0, 2^63) (int64), got ids from -1 to 3"),
    ("Users.of a string", lambda: Users.of("12"), ParameterError, "user ids must be a list or array of integers, got '12'"),
    ("Users.of floats", lambda: Users.of([1.5, 2.0]), ParameterError, "user ids must be integers, got float64 values"),
    ("Users.of bools", lambda: Users.of([True, False]), ParameterError, "user ids must be integers, got bool values"),
    ("Request.of randomizer a string", lambda: Request.of(range(3), "binary_rr"), ParameterError, "a request's randomizer must be a RandomizerSpec"),
    ("Session oracle None", lambda: Session(None, SessionKind.INTERACTIVE), ParameterError, "oracle must be an LROracle"),
    ("Session kind 3", lambda: Session(InProcessLROracle(spec_of()), 3), ParameterError, "session kind must be SessionKind.NON_INTERACTIVE (1) or SessionKind.INTERACTIVE (2), got 3"),
    ("Session deadline 10^7", lambda: Session(InProcessLROracle(spec_of()), SessionKind.INTERACTIVE, deadline_s=1e7), ParameterError, "deadline_s (seconds per round) must be a finite number of seconds in (0, 10^6], got 10000000.0"),
    ("Session.round requests not a list", lambda: asyncio.run(Session(InProcessLROracle(spec_of()), SessionKind.INTERACTIVE).round(Request.of(range(3), RandomizerSpec("binary_rr", BIT, 0.5)))), ParameterError, "a round takes a list of requests"),
    *[(f"RoundRequest deadline_s={d!r}", (lambda d=d: RoundRequest(1, SessionKind.INTERACTIVE, 0, (), False, d)), ParameterError, "the round deadline deadline_s must be a finite number of seconds in (0, 10^6]")
      for d in (0, -1, NAN, INF, -INF, 1e7, "30", None)],
    ("RoundRequest session id 2^64", lambda: RoundRequest(2**64, SessionKind.INTERACTIVE, 0, ()), ParameterError, "session_id must be an integer in [0, 2^64), got 18446744073709551616"),
    ("RoundRequest round -1", lambda: RoundRequest(1, SessionKind.INTERACTIVE, -1, ()), ParameterError, "round must be an integer in [0, 2^32), got -1"),
    ("Assignment request id -1", lambda: Assignment(-1, Users.range(0, 1), RandomizerSpec("binary_rr", BIT, 0.5)), ParameterError, "request_id must be an integer in [0, 2^64), got -1"),
    ("SessionKind(0)", lambda: SessionKind(0), ParameterError, "session kind must be"),
    ("Status(9)", lambda: Status(9), ParameterError, "a status must be 0 (ANSWERED)"),
    ("Referee label_noise a string", lambda: Referee(CC, TARGET, label_noise="0.1"), ParameterError, "label_noise must be a number in [0, 0.5), got '0.1'"),
    ("Referee target None", lambda: Referee(CC, None), ParameterError, "target must be a Concept"),
    ("Referee.error of a string", lambda: Referee(CC, TARGET).error("h"), ParameterError, "a hypothesis needs a vectorized predict(features)"),
    ("random_target of a seed", lambda: CC.random_target(0), ParameterError, "random_target needs a numpy Generator"),
    ("ProductBernoulli p a string", lambda: ProductBernoulli("0.5"), ParameterError, "ProductBernoulli: p must be a number in (0, 1), got '0.5'"),
    ("ldp.run of a function", lambda: ldp.run(Session.round), ParameterError, "ldp.run takes a coroutine"),
    # --- spec files from another version: the key is named ---
    *[(f"PopulationSpec.from_json {why}", (lambda change=change: PopulationSpec.from_json(_spec_json(change))), ParameterError, fragment) for why, change, fragment in (
        ("unknown key", {"colour": "blue"}, "unknown population spec keys ['colour'] (format 1 has ['format', 'concept_class', 'd'"),
        ("missing key", {"seed": None}, "the population spec has no 'seed' key (format 1 needs"),
        ("missing label_noise", {"label_noise": None}, "the population spec has no 'label_noise' key"),
        ("string size", {"size": "1000"}, "population spec key 'size' must be an integer, got '1000'"),
        ("float seed", {"seed": 3.0}, "population spec key 'seed' must be an integer, got 3.0"),
        ("bool budget", {"budget": True}, "population spec key 'budget' must be a number, got True"),
        ("string secure", {"secure": "false"}, "population spec key 'secure' must be true or false, got 'false'"),
        ("format 2", {"format": 2}, "population spec key 'format' is 2; this version of ldp reads format 1"),
        ("format a string", {"format": "1"}, "population spec key 'format' is '1'"),
        ("target bits a string", {"target": {"kind": "masked_parity", "r": [1, 0, "1", 1], "a": 1}}, "population spec key 'target' (masked_parity) key 'r' must be a list of 0s and 1s"),
        ("target unknown key", {"target": {"kind": "masked_parity", "r": [1, 0, 1, 1], "a": 1, "b": 0}}, "population spec key 'target' (masked_parity) has unknown keys ['b']"),
        ("target missing key", {"target": {"kind": "masked_parity", "r": [1, 0, 1, 1]}}, "population spec key 'target' (masked_parity) has no 'a' key"),
        ("target of another dimension", {"target": {"kind": "masked_parity", "r": [1, 0, 1], "a": 1}}, "population spec key 'target': a masked_parity target in dimension d = 4 needs 4 bits, got 3"),
        ("target of another class", {"target": {"kind": "parity", "r": [1, 0, 1, 1]}}, "population spec key 'target': a masked_parity class needs a masked_parity target, got 'parity'"),
        ("target not an object", {"target": [1, 0]}, "population spec key 'target' must be a JSON object"),
        ("distribution unknown key", {"distribution": {"kind": "uniform", "p": 0.5}}, "population spec key 'distribution' (uniform) has unknown keys ['p']"),
        ("distribution p a string", {"distribution": {"kind": "product_bernoulli", "p": "0.5"}}, "population spec key 'distribution' (product_bernoulli) key 'p' must be a finite number, got '0.5'"),
        ("not an object", None, "malformed population spec: expected a JSON object, got list"),
    )],
    ("PopulationSpec.from_json unknown concept kind", lambda: PopulationSpec.from_json(_spec_json({"target": {"kind": "circle"}})), UnknownKindError, "population spec key 'target': unknown concept kind 'circle'"),
]  # fmt: skip


def test_the_table_is_large() -> None:
    assert len(CASES) >= 40
    assert len({name for name, *_ in CASES}) == len(CASES)


@pytest.mark.parametrize("name, call, error, fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_with_a_clear_message(name: str, call: Callable[[], Any], error: type[Exception], fragment: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning on the way to the error
        with pytest.raises(error) as info:
            call()
    message = str(info.value)
    assert isinstance(info.value, LDPError), f"{name}: {type(info.value).__name__}: {message}"
    assert "\n" not in message and fragment in message, (name, message)


def test_a_spec_of_10_to_the_12_users_is_constructible_and_hosts_a_slice() -> None:
    """Remote machines each hold a slice of a huge population: the spec itself is fine."""
    spec = spec_of(size=10**12)
    assert spec.size == 10**12 and spec.description().size == 10**12
    tail = spec.records(10**12 - 5, 5)
    assert tail.shape == (5, spec.schema.width)
    assert np.array_equal(spec.records(10**12 - 2, 2), tail[3:])  # records depend on the user only


def test_records_in_chunks_equal_records_in_one_piece() -> None:
    spec = PopulationSpec(concept_class("parity", 5), concept_class("parity", 5).random_target(np.random.default_rng(0)), 200_000, seed=9, label_noise=0.1, distribution=Uniform())
    whole = spec.records(0, 200_000)
    parts = np.concatenate([spec.records(lo, min(70_001, 200_000 - lo)) for lo in range(0, 200_000, 70_001)])
    assert np.array_equal(whole, parts)


def test_good_inputs_still_pass() -> None:
    spec = RandomizerSpec("binary_rr", field_query("x", np.int64(2)), np.float64(0.5))
    assert type(spec.epsilon) is float and RandomizerSpec.from_json(spec.to_json()) == spec
    assert parity(np.array([True, False, True])).params["mask"] == [0, 2] and parity([]).params["mask"] == []
    assert conjunction(("y", 0, -1), ("x", np.int64(1), 0, False)).params["literals"] == [["y", 0, -1], ["x", 1, 0, False]]
    assert affine(label_query(), -2, 1).params["scale"] == -2.0


def test_unchecked_specs_still_reach_the_users_side() -> None:
    """``RandomizerSpec.unchecked`` lets tests prove that the users refuse what a hostile
    aggregator could send (a spec the constructor would refuse)."""
    from ldp.core.randomizers import LocalRandomizer

    for bad, fragment in ((RandomizerSpec.unchecked("binary_rr", BIT, NAN), "epsilon"), (RandomizerSpec.unchecked("nope", BIT, 0.5), "unknown randomizer kind")):
        with pytest.raises(LDPError, match=fragment):
            LocalRandomizer.build(bad, CC.schema)


def _readme_tour(which: int = 1) -> str:
    """The README tour's python blocks: 0, the user's own column in three lines; 1, the same
    question asked by hand (sessions, randomizers, estimators)."""
    text = (ROOT / "README.md").read_text()
    section = re.search(r"## A short tour of the API\n(.*?)\n## ", text, re.S)
    assert section, "the README's tour moved"
    blocks = re.findall(r"```python\n(.*?)```", section.group(1), re.S)
    assert len(blocks) >= 2, "the README's tour lost a block"
    return blocks[which]


def test_the_readme_tour_starts_with_the_users_own_column(capsys: pytest.CaptureFixture[str]) -> None:
    """The tour's first block, three lines on a column: it prints the estimates of each colour."""
    code = _readme_tour(0)
    assert len([line for line in code.splitlines() if line.strip()]) == 3, code
    exec(compile(code, "README.md", "exec"), {"__name__": "tour"})
    out = capsys.readouterr().out
    assert all(colour in out for colour in ("red", "green", "blue")) and "95 %" in out, out


def test_the_readme_tour_runs(capsys: pytest.CaptureFixture[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec(compile(_readme_tour(), "README.md", "exec"), {"__name__": "tour"})
    out = capsys.readouterr().out
    assert re.search(r"Pr\[b = 1\] ≈ 0\.\d{3}", out), out


def test_the_readme_tour_with_nan_is_refused_at_construction(capsys: pytest.CaptureFixture[str]) -> None:
    code = _readme_tour()
    assert code.count("epsilon=0.5") == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy RuntimeWarning: nothing gets that far
        with pytest.raises(ParameterError, match=r"randomizer 'binary_rr': epsilon must be a finite number > 0, got nan"):
            exec(compile(code.replace("epsilon=0.5", "epsilon=float('nan')"), "README.md", "exec"), {"__name__": "tour"})
    assert "Pr[b = 1]" not in capsys.readouterr().out  # no "≈ nan" line


# --- the sweep: every public constructor and function, one argument at a time made wrong ---
#
# Each entry: a call, its valid keyword arguments, and per argument the words the refusal must
# contain (naming the parameter). Every argument in turn gets each value of WRONG; the call may
# accept a value (a name "8" is a fine name) but must never fail with anything but a one-line
# LDPError naming the argument: no TypeError, AttributeError, OverflowError, MemoryError or
# numpy warning from inside. Broken variant: undo any one fix (e.g. ConceptClass without its type
# check) and its row fails with the raw builtin exception's name in the message.

WRONG: list[Any] = [None, "8", -1, NAN, INF, 1.5, [], object(), True, 2**63, -(2**63)]


def _api(name: str) -> Any:
    return getattr(ldp, name)


def _sweep() -> dict[str, tuple[Callable[..., Any], dict[str, Any], dict[str, str]]]:
    oracle = InProcessLROracle(spec_of())
    return {
        "concept_class": (ldp.concept_class, dict(name="parity", d=4), dict(name="concept class", d="d must be")),
        "ConceptClass": (ldp.ConceptClass, dict(name="parity", d=4), dict(name="concept class", d="d must be")),
        "ConceptClass.random_target": (lambda rng: CC.random_target(rng), dict(rng=np.random.default_rng(0)), dict(rng="Generator")),
        "Referee": (ldp.Referee, dict(concept_class=CC, target=TARGET, distribution=Uniform(), label_noise=0.1),
                    dict(concept_class="concept_class", target="target", distribution="distribution", label_noise="label_noise")),
        "Referee.error": (lambda hypothesis: ldp.Referee(CC, TARGET).error(hypothesis), dict(hypothesis=TARGET), dict(hypothesis="hypothesis")),
        "PopulationSpec": (ldp.PopulationSpec, dict(concept_class=CC, target=TARGET, size=100, budget=1.0, seed=0, distribution=Uniform(), label_noise=0.0, secure=False),
                           dict(concept_class="concept_class", target="target", size="population size", budget="budget epsilon", seed="population seed",
                                distribution="distribution", label_noise="label_noise", secure="secure")),
        "PopulationSpec.from_json": (ldp.PopulationSpec.from_json, dict(data=spec_of().to_json()), dict(data="population spec")),
        "generator": (ldp.generator, dict(seed=0), dict(seed="seed")),
        "QuerySpec": (ldp.QuerySpec, dict(name="field", params={"field": "b"}), dict(name="query name", params="params")),
        "field_query": (ldp.field_query, dict(name="b", index=0), dict(name="field", index="index")),
        "label_query": (ldp.label_query, dict(name="y"), dict(name="field")),
        "parity": (ldp.parity, dict(mask=[0, 1], field="x", output="sign"), dict(mask="mask", field="field", output="output")),
        "bent": (ldp.bent, dict(field="x", output="sign"), dict(field="field", output="output")),
        "user_parity": (ldp.user_parity, dict(start=0, count=2, field="x", output="sign"), dict(start="start", count="count", field="field", output="output")),
        "affine": (ldp.affine, dict(query=BIT, scale=1.0, offset=0.0), dict(query="query", scale="scale", offset="offset")),
        "RandomizerSpec": (ldp.RandomizerSpec, dict(kind="binary_rr", query=BIT, epsilon=0.5, params={}), dict(kind="kind", query="query", epsilon="epsilon", params="params")),
        "BinaryRandomizedResponse": (ldp.BinaryRandomizedResponse, dict(epsilon=1.0), dict(epsilon="epsilon")),
        "KaryRandomizedResponse": (ldp.KaryRandomizedResponse, dict(epsilon=1.0, categories=(0, 1, 2)), dict(epsilon="epsilon", categories="categor")),
        "DiscreteLaplaceRandomizer": (ldp.DiscreteLaplaceRandomizer, dict(epsilon=1.0, bound=1.0, steps=4), dict(epsilon="epsilon", bound="bound", steps="steps")),
        "verify_exact": (ldp.verify_exact, dict(R=_BRR, check_inputs=8), dict(R="randomizer", check_inputs="check_inputs")),
        "audit_epsilon": (ldp.audit_epsilon, dict(R=_BRR, u=0, u_prime=1, n=1000, alpha=1e-6, seed=0),
                          dict(R="randomizer", u="u", u_prime="u_prime", n="n", alpha="alpha", seed="seed")),
        "Ledger": (ldp.Ledger, dict(first_user=0, count=5, budget=1.0), dict(first_user="first_user", count="count", budget="budget")),
        "InProcessLROracle": (ldp.InProcessLROracle, dict(population=spec_of(), shards=1), dict(population="population", shards="shards")),
        "Session": (ldp.Session, dict(oracle=oracle, kind=SessionKind.INTERACTIVE, name="s", deadline_s=30.0),
                    dict(oracle="oracle", kind="session kind", name="session name", deadline_s="deadline_s")),
        "Session.round": (lambda requests: ldp.run(ldp.Session(InProcessLROracle(spec_of()), SessionKind.INTERACTIVE).round(requests)),
                          dict(requests=[Request.of(range(10), _RR)]), dict(requests="request")),
        "Request.of": (ldp.Request.of, dict(users=range(10), randomizer=_RR), dict(users="user", randomizer="randomizer")),
        "Users.range": (ldp.Users.range, dict(start=0, stop=10), dict(start="user range", stop="user range")),
        "Users.of": (ldp.Users.of, dict(ids=[1, 2]), dict(ids="user ids")),
        "SessionKind": (ldp.SessionKind, dict(value=1), dict(value="session kind")),
        "Status": (ldp.Status, dict(value=1), dict(value="status")),
        "launch_local": (lambda population, processes: _enter(ldp.launch_local(population, processes)), dict(population=spec_of(size=3), processes=1),
                         dict(population="PopulationSpec", processes="processes")),
        "grpc_oracle_factory": (lambda processes: _enter(ldp.grpc_oracle_factory(processes)), dict(processes=1), dict(processes="processes")),
        "load_data": (ldp.load_data, dict(path=str(ROOT / "no-such-file.csv")), dict(path="data file")),
        "run": (ldp.run, dict(coroutine=None), dict(coroutine="coroutine")),
        "frequencies": (ldp.frequencies, dict(column=COLUMN, epsilon=1.0, oracle="grr", processes=None, seed=0, truth=False),
                        dict(column="column", epsilon="epsilon", oracle="oracle", processes="processes", seed="seed", truth="truth")),
        "heavy_hitters": (ldp.heavy_hitters, dict(column=COLUMN, epsilon=1.0, k=2, oracle="grr", seed=0),
                          dict(column="column", epsilon="epsilon", k="k", oracle="oracle", seed="seed")),
        "sketch_frequencies": (ldp.sketch_frequencies, dict(column=np.array(["a", "b", "c", "b"] * 250), candidates=["a", "b"], epsilon=1.0, oracle="hcms", hashes=16, width=64,
                                                       hash_seed=0, processes=None, seed=0, truth=False),
                               dict(column="column", candidates="candidates", epsilon="epsilon", oracle="oracle", hashes="hashes", width="width",
                                    hash_seed="hash_seed", processes="processes", seed="seed", truth="truth")),
        "mean": (ldp.mean, dict(column=COLUMN, epsilon=1.0, bounds=(0, 2), oracle="duchi", out_of_range="clip", seed=0),
                 dict(column="column", epsilon="epsilon", bounds="bounds", oracle="oracle", out_of_range="out_of_range", seed="seed")),
        "DataLROracle": (ldp.DataLROracle, dict(data=_penguins(), budget=1.0, key=bytes(32), shards=1), dict(data="data", budget="budget", key="key", shards="shards")),
        "launch_data": (lambda data_path, budget, processes: _enter(ldp.launch_data(data_path, PENGUINS.with_suffix(".schema.json"), budget=budget, key=bytes(32), processes=processes)),
                        dict(data_path=PENGUINS, budget=1.0, processes=1), dict(data_path="data file", budget="budget", processes="processes")),
        "register_experiment": (ldp.register_experiment, dict(experiment=_registered_experiment()), dict(experiment="experiment")),
    }  # fmt: skip


COLUMN = np.array([0, 1, 2, 1] * 250)  # 1,000 users, three categories
PENGUINS = ROOT / "simulations" / "data" / "penguins.csv"


def _penguins() -> Any:
    return ldp.load_data(PENGUINS, PENGUINS.with_suffix(".schema.json"))


def _registered_experiment() -> Any:
    """An experiment already registered (registering it again is harmless): the valid value."""
    from ldp.experiment import get_experiment

    return get_experiment("rr-demo")


SWEEP_ROWS = [(name, arg) for name, (_, _, args) in _sweep().items() for arg in args]


def test_the_sweep_covers_the_public_api() -> None:
    """Every public name that takes arguments has a row (classes with no constructor of their
    own, the errors and the version are the exceptions)."""
    covered = {name.split(".")[0] for name in _sweep()}
    exempt = {"LDPError", "ParameterError", "LROracle", "LocalRandomizer", "Reports", "Estimates", "randomizer_kinds", "record_query", "conjunction", "product", "__version__", "Request"}
    assert set(ldp.__all__) - covered - exempt == set()


@pytest.mark.parametrize(
    "name, arg",
    SWEEP_ROWS,
    ids=[f"{n}-{a}" for n, a in SWEEP_ROWS],
)
def test_every_wrong_argument_is_an_ldp_error_naming_it(name: str, arg: str) -> None:
    call, valid, names = _sweep()[name]
    raw: list[str] = []
    for wrong in WRONG:
        kwargs = {**valid, arg: wrong}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                call(**kwargs)
        except LDPError as exc:
            message = str(exc)
            if "\n" in message or names[arg] not in message:
                raw.append(f"{arg}={wrong!r}: {message!r} does not name {names[arg]!r} in one line")
        except Exception as exc:  # noqa: BLE001 - what the test is looking for
            raw.append(f"{arg}={wrong!r}: {type(exc).__name__}: {exc}")
    assert not raw, f"{name}: " + "; ".join(raw)


def test_a_spec_written_before_format_1_is_still_read_with_the_same_records_and_ledgers() -> None:
    """Deliberate backward compatibility: a spec without "format" is the unversioned layout
    (written before format 1), whose distribution, label_noise and secure may be absent. It is
    read with the same identity (ledgers continue) and the same records; its unknown keys and
    wrong types are still refused."""
    spec = spec_of(label_noise=0.1)
    written = spec.to_json()
    assert written["format"] == 1 and PopulationSpec.from_json(written) == spec
    legacy = {k: v for k, v in written.items() if k != "format"}
    again = PopulationSpec.from_json(legacy)
    assert again == spec and again.identity == spec.identity
    assert np.array_equal(again.records(0, 50), spec.records(0, 50))
    minimal = {k: v for k, v in legacy.items() if k not in ("distribution", "label_noise", "secure")}
    assert PopulationSpec.from_json(minimal) == spec_of()
    with pytest.raises(ParameterError, match="unknown population spec keys \\['colour'\\]"):
        PopulationSpec.from_json({**legacy, "colour": 1})
    with pytest.raises(ParameterError, match="population spec key 'size' must be an integer, got '1000'"):
        PopulationSpec.from_json({**legacy, "size": "1000"})
    with pytest.raises(ParameterError, match="the population spec has no 'label_noise' key"):
        PopulationSpec.from_json({k: v for k, v in written.items() if k != "label_noise"})  # format 1: every key
