"""Registered, validated query kinds over records (KLNRS §4.1, §5.1)."""

import numpy as np
import pytest

from ldp.core.concepts import MaskedParityConcept, concept_class
from ldp.core.errors import ParameterError, UnknownKindError
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.queries import (
    QuerySpec,
    affine,
    conjunction,
    field_query,
    label_query,
    make_query,
    parity,
    product,
    query_kinds,
)


@pytest.fixture
def masked():
    cc = concept_class("masked_parity", 4)
    target = MaskedParityConcept((1, 0, 1, 1), 1)
    records = generate_records(PopulationSpec(cc, target, 20_000, seed=2), 0, 20_000)
    return cc.schema, target, records


def test_registry_lists_the_kinds():
    assert {"field", "label", "conjunction", "parity", "product", "affine", "record"} <= set(query_kinds())


def test_klnrs_section_5_1_queries_have_the_stated_means(masked):
    """E[g_j] = 1/(2d) when r_j = 1 (the paper's '1/2^d' is a typo), 0 otherwise; E[g_d] = a/2."""
    schema, target, records = masked
    d = 4
    for j in range(d):
        g = make_query(conjunction(("i", 0, j), ("b", 0, 1), ("y", 0, -1)), schema)
        mean = g.evaluate(records).mean()
        expected = 1 / (2 * d) if target.r[j] else 0.0
        assert abs(mean - expected) < 0.012  # ≈ 6 standard errors at n = 2·10^4
    g_d = make_query(
        product(conjunction(("b", 0, 0)), affine(product(label_query(), parity(np.array(target.r, bool))), -0.5, 0.5)), schema
    )
    assert set(g_d.values().tolist()) == {0.0, 1.0}
    assert abs(g_d.evaluate(records).mean() - target.a / 2) < 0.02


def test_parity_query_matches_the_concept(masked):
    schema, target, records = masked
    q = make_query(parity([0, 2, 3]), schema)
    x = records[:, :4]
    assert np.array_equal(q.evaluate(records), 1 - 2 * ((x[:, 0] + x[:, 2] + x[:, 3]) % 2))
    assert q.bound == 1.0 and q.values().tolist() == [-1.0, 1.0]


def test_spec_round_trips_through_json(masked):
    schema, _, records = masked
    spec = product(field_query("x", 1), affine(label_query(), 2.0, 1.0))
    again = QuerySpec.from_json(spec.to_json())
    assert np.array_equal(make_query(again, schema).evaluate(records), make_query(spec, schema).evaluate(records))
    assert make_query(spec, schema).bound == 3.0


@pytest.mark.parametrize(
    "spec,error,match",
    [
        (QuerySpec("nope", {}), UnknownKindError, "unknown query kind 'nope'"),
        (field_query("z"), UnknownKindError, "unknown field 'z'"),
        (field_query("x", 9), ParameterError, "indices 0..3"),
        (QuerySpec("conjunction", {"literals": []}), ParameterError, "non-empty"),
        (conjunction(("b", 0, 5)), ParameterError, r"takes values \[0, 1\]"),
        (QuerySpec("parity", {"field": "x"}), ParameterError, "mask"),
        (QuerySpec("field", {"field": "x", "index": "0"}), ParameterError, "integer"),
    ],
)
def test_bad_queries_are_clear_errors(masked, spec, error, match):
    schema, _, _ = masked
    with pytest.raises(error, match=match):
        make_query(spec, schema)
