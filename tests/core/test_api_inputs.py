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

from ldp.core.budget import Ledger
from ldp.core.concepts import ConceptClass, MaskedParityConcept, Uniform, concept_class
from ldp.core.errors import LDPError, ParameterError, UnknownKindError
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.queries import QuerySpec, affine, conjunction, field_query, label_query, parity, product
from ldp.core.randomizers import (
    BinaryRandomizedResponse,
    DiscreteLaplaceRandomizer,
    KaryRandomizedResponse,
    LaplaceRandomizer,
    PlusMinusRandomizedResponse,
    RandomizerSpec,
    RecordRandomizedResponse,
)
from ldp.local.messages import SessionKind
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


CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    # --- RandomizerSpec ---
    *[(f"RandomizerSpec epsilon={e!r}", (lambda e=e: RandomizerSpec("binary_rr", BIT, e)), ParameterError, "epsilon")
      for e in (0, -1, NAN, INF, -INF, "abc", None, True, 1e-300, 2000.0, "0.5", [0.5])],
    ("RandomizerSpec unknown kind", lambda: RandomizerSpec("nosuch_rr", BIT, 0.5), UnknownKindError, "unknown randomizer kind 'nosuch_rr'; registered kinds are ['adaptive_fo', 'binary_rr'"),
    ("RandomizerSpec kind not a string", lambda: RandomizerSpec(5, BIT, 0.5), ParameterError, "randomizer kind must be a string"),
    ("RandomizerSpec query a string", lambda: RandomizerSpec("binary_rr", "b", 0.5), ParameterError, "query must be a QuerySpec"),
    ("RandomizerSpec params a list", lambda: RandomizerSpec("binary_rr", BIT, 0.5, [1, 2]), ParameterError, "params must be a mapping"),
    ("RandomizerSpec.from_json unknown kind", lambda: RandomizerSpec.from_json({"kind": "zz", "query": BIT.to_json(), "epsilon": 1}), UnknownKindError, "'zz'"),
    ("RandomizerSpec.from_json no epsilon", lambda: RandomizerSpec.from_json({"kind": "binary_rr", "query": BIT.to_json()}), ParameterError, "malformed randomizer spec"),
    ("RandomizerSpec.from_json nan", lambda: RandomizerSpec.from_json({"kind": "binary_rr", "query": BIT.to_json(), "epsilon": "nan"}), ParameterError, "nan"),
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
    ("LaplaceRandomizer bound 0", lambda: LaplaceRandomizer(1.0, 0), ParameterError, "bound b must be a finite number > 0, got 0.0"),
    ("LaplaceRandomizer bound nan", lambda: LaplaceRandomizer(1.0, NAN), ParameterError, "bound b must be a finite number > 0, got nan"),
    ("DiscreteLaplaceRandomizer epsilon 32", lambda: DiscreteLaplaceRandomizer(32.0, 1.0), ParameterError, "discrete_laplace supports ε ≤ 16"),
    ("DiscreteLaplaceRandomizer steps 3", lambda: DiscreteLaplaceRandomizer(1.0, 1.0, steps=3), ParameterError, "steps must be a power of two in [1, 2^20], got 3"),
    ("PlusMinusRandomizedResponse bound -1", lambda: PlusMinusRandomizedResponse(1.0, -1), ParameterError, "bound b must be a finite number > 0, got -1.0"),
    ("RecordRandomizedResponse empty", lambda: RecordRandomizedResponse(1.0, (), ()), ParameterError, "non-empty low and high bounds"),
    ("RecordRandomizedResponse high = low", lambda: RecordRandomizedResponse(1.0, (0,), (0,)), ParameterError, "every column needs high > low"),
    ("RecordRandomizedResponse step 0", lambda: RecordRandomizedResponse(1.0, (0,), (2,), (0,)), ParameterError, "step ≥ 1 that divides high − low"),
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


def _readme_tour() -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"## A short tour of the API\s+```python\n(.*?)```", text, re.S)
    assert match, "the README's tour moved"
    return match.group(1)


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
