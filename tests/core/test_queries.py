"""Registered, validated query kinds over records (KLNRS §4.1, §5.1)."""

import numpy as np
import pytest

from ldp.core.concepts import MaskedParityConcept, concept_class
from ldp.core.errors import ParameterError, UnknownKindError
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.queries import QuerySpec, make_query, query_kinds
from ldp.core.query_specs import affine, conjunction, field_query, label_query, parity, product


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


# --- per-user families and the bent query (the fair one-round learners, KLNRS §5) ---


def test_user_parity_groups_split_evenly_and_candidates_invert_them():
    from ldp.core.queries import user_parity_candidate, user_parity_groups

    for count, k in ((37, 16), (16, 16), (5, 16), (1_000_003, 1024), (64, 1)):
        bounds = user_parity_groups(count, k)
        sizes = np.diff(bounds)
        assert bounds[0] == 0 and bounds[-1] == count and sizes.max() - sizes.min() <= 1 and np.all(sizes[:-1] >= sizes[1:])
        offsets = np.arange(count)
        expected = np.repeat(np.arange(k), sizes)  # the group of every offset, from the boundaries
        assert np.array_equal(user_parity_candidate(offsets, count, k), expected)


def test_user_parity_gives_each_group_its_own_parity(masked):
    """Group c answers parity(r_c) with r_c = c in binary, x's bit 0 the most significant: compared
    with the fixed ``parity`` query group by group (a reversed bit order would fail for c = 1)."""
    from ldp.core.queries import user_parity_groups
    from ldp.core.query_specs import user_parity

    schema, _, records = masked
    start, count = 100, 1_000
    users = np.arange(start, start + count)
    family = make_query(user_parity(start, count), schema).evaluate(records[:count], users)
    bounds = user_parity_groups(count, 16)
    for c in range(16):
        r = np.array([(c >> (3 - k)) & 1 for k in range(4)], dtype=bool)
        rows = slice(int(bounds[c]), int(bounds[c + 1]))
        assert np.array_equal(family[rows], make_query(parity(r), schema).evaluate(records[rows]))


@pytest.mark.parametrize(
    "spec,users,match",
    [
        (QuerySpec("user_parity", {"start": 0, "count": 10}), None, "needs the users' ids"),
        (QuerySpec("user_parity", {"start": 0, "count": 10}), np.arange(5, 15), "users 0..9 only"),
        (QuerySpec("user_parity", {"start": -1, "count": 10}), np.arange(3), "start ≥ 0"),
        (QuerySpec("user_parity", {"start": 0, "count": 0}), np.arange(3), "1 ≤ count"),
        (QuerySpec("user_parity", {"field": "i", "start": 0, "count": 3}), np.arange(3), "must take the values 0 and 1"),
        (QuerySpec("user_parity", {"start": 0, "count": 3, "output": "int"}), np.arange(3), "'sign' or 'bit'"),
        (QuerySpec("bent", {"field": "b"}), None, "even number of bits"),
        (QuerySpec("bent", {"field": "y"}), None, "must take the values 0 and 1"),
    ],
)
def test_bad_family_and_bent_queries_are_clear_errors(masked, spec, users, match):
    schema, _, records = masked
    with pytest.raises(ParameterError, match=match):
        make_query(spec, schema).evaluate(records[: 10 if users is None else len(users)], users)


@pytest.mark.parametrize("length", [2, 4, 6])
def test_bent_query_has_every_walsh_coefficient_of_magnitude_two_to_minus_half_length(length):
    """Exhaustively over x ∈ {0,1}^L: |E_x[β(x)(−1)^⟨r,x⟩]| = 2^{−L/2} for all 2^L vectors r."""
    from ldp.core.query_specs import bent
    from ldp.core.schema import Field, Schema

    schema = Schema((Field("x", length, 0, 1), Field("y", 1, -1, 1, step=2)))
    xs = ((np.arange(2**length)[:, None] >> np.arange(length - 1, -1, -1)) & 1).astype(np.int16)
    values = make_query(bent(), schema).evaluate(np.concatenate([xs, np.ones((len(xs), 1), np.int16)], axis=1))
    for r in range(2**length):
        chi = 1 - 2 * (np.bitwise_count(np.arange(2**length) & r) & 1).astype(np.int64)
        assert abs(abs(float(np.mean(values * chi))) - 2.0 ** (-length / 2)) < 1e-12


async def test_a_family_request_reports_exactly_what_per_group_requests_report():
    """The users' side treats one ``user_parity`` family like the 2^d fixed requests it stands
    for: same users, same key and nonces, so the very same reports, bit for bit."""
    from ldp.core.queries import user_parity_groups
    from ldp.core.query_specs import user_parity
    from ldp.core.randomizers import RandomizerSpec
    from ldp.local.messages import SessionKind
    from ldp.local.oracle import InProcessLROracle
    from ldp.local.session import Request, Session

    d, n = 4, 3_000
    spec = PopulationSpec(concept_class("masked_parity", d), MaskedParityConcept((1, 1, 0, 1), 0), n, budget=1.0, seed=9)
    (family,) = await Session(InProcessLROracle(spec), SessionKind.NON_INTERACTIVE).round(
        [Request.of(range(n), RandomizerSpec("binary_rr", affine(user_parity(0, n), 0.5, 0.5), 1.0))]
    )
    bounds = user_parity_groups(n, 2**d)
    groups = [
        Request.of(range(int(bounds[c]), int(bounds[c + 1])), RandomizerSpec("binary_rr", affine(parity([k for k in range(d) if (c >> (d - 1 - k)) & 1]), 0.5, 0.5), 1.0))
        for c in range(2**d)
    ]
    separate = await Session(InProcessLROracle(spec), SessionKind.NON_INTERACTIVE).round(groups)
    assert np.array_equal(family.values, np.concatenate([r.values for r in separate]))
