"""Query kinds declare the record columns a spec names (``Query.reads``), and the session's check
before sending (``ldp.local.session._check_fields``) derives from that declaration alone, so a new
query kind is written in one layer (issue 24).

Deterministic: no randomness is involved in any verdict. Broken variants: a kind whose declaration
is taken away (``prefix_index`` back to the default that names nothing: the gap the old
hand-written check had) is then sent to the users instead of refused, and a kind class without its
own ``reads`` is flagged by the completeness check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from ldp.core import queries
from ldp.core.concepts import MaskedParityConcept, concept_class
from ldp.core.errors import LDPError, ParameterError
from ldp.core.population import PopulationSpec
from ldp.core.queries import FieldReads, PrefixIndexQuery, Query, QuerySpec, make_query, query_kinds, query_reads
from ldp.core.query_specs import affine, bent, conjunction, field_query, label_query, parity, prefix_index, product, user_parity
from ldp.core.randomizers import RandomizerSpec
from ldp.core.ratio_queries import ratio_query
from ldp.local.messages import SessionKind, Status
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session

pytestmark = pytest.mark.timeout(60)

CC = concept_class("masked_parity", 4)  # fields x (4 bits), i, b, y
POPULATION = PopulationSpec(CC, MaskedParityConcept((1, 0, 1, 1), 1), size=100, budget=1.0, seed=3)
BIT = field_query("b")

# One spec per registered kind that names a field the users' schema lacks ("nosuch").
BAD_SPECS: dict[str, QuerySpec] = {
    "field": field_query("nosuch"),
    "label": label_query("nosuch"),
    "conjunction": conjunction(("b", 0, 1), ("nosuch", 0, 1)),
    "parity": parity([0], field="nosuch"),
    "bent": bent(field="nosuch"),
    "user_parity": user_parity(0, 100, field="nosuch"),
    "prefix_index": prefix_index(1, [0, 1], field="nosuch"),
    "product": product(BIT, field_query("nosuch")),
    "affine": affine(field_query("nosuch")),
    "lr_ratio": ratio_query([(RandomizerSpec("binary_rr", field_query("nosuch"), 1.0), 1.0)]),
}
NAMES_NO_FIELD = {"record"}  # the whole record, of whatever schema: nothing to check by name


def _declares_reads(kind: type[Query]) -> bool:
    """Whether a kind class (or a registered kind it extends) declares its own ``reads``."""
    return any("reads" in vars(cls) for cls in kind.__mro__ if cls is not Query and issubclass(cls, Query))


def _round(query: QuerySpec, oracle: InProcessLROracle) -> Any:
    session = Session(oracle, SessionKind.INTERACTIVE)
    return asyncio.run(session.round([Request.of(range(10), RandomizerSpec("kary_rr", query, 0.5))]))


def test_every_registered_kind_is_covered_and_declares_its_reads() -> None:
    """A new kind must say what it names: it appears here (a bad spec) or names no field."""
    assert set(BAD_SPECS) | NAMES_NO_FIELD == set(query_kinds())
    undeclared = [name for name in query_kinds() if not _declares_reads(queries._REGISTRY[name])]
    assert not undeclared, undeclared


def test_the_completeness_check_catches_a_kind_without_a_declaration() -> None:
    """The broken variant: a kind class that inherits the default (names nothing) is flagged."""

    class Undeclared(Query):  # not registered: only the predicate is exercised
        name = "undeclared"

    assert not _declares_reads(Undeclared)
    assert _declares_reads(queries._REGISTRY["label"])


@pytest.mark.parametrize("kind", sorted(BAD_SPECS))
def test_a_missing_field_is_refused_before_sending_and_by_the_users(kind: str) -> None:
    spec = BAD_SPECS[kind]
    assert spec.name == kind
    with pytest.raises(LDPError, match="nosuch"):  # the users' side refuses it too: the declaration is not stricter
        make_query(spec, CC.schema)
    oracle = InProcessLROracle(POPULATION)
    with pytest.raises(ParameterError, match=rf"request 0 \(kary_rr of query '{kind}'\): unknown field 'nosuch'"):
        _round(spec, oracle)
    assert not oracle.transcript.rounds and not oracle.ledger_spent_units().any()  # nothing sent, nothing charged


def test_reads_never_raise_on_ill_typed_params() -> None:
    """Ill-typed params name nothing (the users' side refuses them with its own message)."""
    for name in query_kinds():
        for params in ({}, {"field": 3, "index": "0", "mask": "01", "literals": 5, "factors": [None, 1], "query": 7}, {"index": True}):
            reads = query_reads(QuerySpec(name, params))
            assert all(isinstance(f, str) and type(i) is int for f, i in reads.columns), (name, params, reads)


def test_taking_the_declaration_away_lets_the_bad_spec_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broken variant: prefix_index without its declaration (as the old hand-written check had
    it) is no longer refused before sending; the users then refuse it, one error per user."""
    monkeypatch.setattr(PrefixIndexQuery, "reads", classmethod(Query.reads.__func__))  # type: ignore[attr-defined]
    oracle = InProcessLROracle(POPULATION)
    (reports,) = _round(BAD_SPECS["prefix_index"], oracle)
    assert (reports.status == Status.ERROR).all() and len(oracle.transcript.rounds) == 1


def test_a_new_kind_needs_no_edit_in_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind added in the core alone (here: the sum of two columns) is checked by the session."""

    class PairSum(Query):
        name = "pair_sum"

        @classmethod
        def reads(cls, params: Mapping[str, Any]) -> FieldReads:
            return FieldReads.of([(params.get("first"), 0), (params.get("second"), 0)])

        def __init__(self, spec: QuerySpec, schema: Any) -> None:
            super().__init__(spec, schema)
            self.columns = [schema.column(spec.params["first"]), schema.column(spec.params["second"])]
            first, second = (schema.field(spec.params[k]).values() for k in ("first", "second"))
            self.sums = np.unique(np.add.outer(first, second)).astype(np.float64)

        @property
        def bound(self) -> float:
            return float(np.abs(self.sums).max())

        def values(self) -> np.ndarray:
            return self.sums

        def evaluate(self, records: np.ndarray, users: np.ndarray | None = None) -> np.ndarray:
            return records[:, self.columns].sum(axis=1).astype(np.float64)

    monkeypatch.setitem(queries._REGISTRY, "pair_sum", PairSum)  # undone after the test
    oracle = InProcessLROracle(POPULATION)
    with pytest.raises(ParameterError, match="unknown field 'nosuch'"):
        _round(QuerySpec("pair_sum", {"first": "b", "second": "nosuch"}), oracle)
    (reports,) = _round(QuerySpec("pair_sum", {"first": "b", "second": "y"}), oracle)
    assert (reports.status == Status.ANSWERED).all()
