"""The MASKED-PARITY learners remember their query specs, and a remembered spec is the one the
builders make.

A sweep asks the same few specs in thousands of trials (``ldp.simulations.separation``), and
building one (each builder serializes its children) cost more than a small trial's round, so
``bit_query``, ``a_query``, ``a_query_family``, ``correlation_query`` and ``shared_query`` are
remembered (``functools.lru_cache``). Deterministic checks: the same arguments give the same
object, whatever their container (list, tuple, numpy array); that object serializes exactly as
the spec built from the query builders afresh; different arguments give different specs; a bad
argument is still refused every time (nothing is remembered for it). The broken variant (a cache
keyed on the wrong thing: v's length only) is shown to hand out a wrong spec.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldp.core.errors import ParameterError
from ldp.core.queries import QuerySpec
from ldp.core.query_specs import affine, conjunction, label_query, parity, product, user_parity
from ldp.learners.masked_parity import a_query, a_query_family, bit_query
from ldp.learners.masked_parity_correlation import correlation_design, correlation_query
from ldp.learners.masked_parity_shared import shared_query


def _fresh_correlation(v: np.ndarray) -> QuerySpec:
    minus = [int(j) for j in np.flatnonzero(np.asarray(v) == -1)]
    if not minus:
        return conjunction(("b", 0, 1), ("y", 0, 1))
    sign_at_i = affine(conjunction(*[("i", 0, j, False) for j in minus]), 2.0, -1.0)
    return product(conjunction(("b", 0, 1)), affine(product(label_query(), sign_at_i), 0.5, 0.5))


def _fresh_family(start: int, count: int) -> QuerySpec:
    return product(conjunction(("b", 0, 0)), affine(product(label_query(), user_parity(start, count)), -0.5, 0.5))


def _fresh_shared(v: np.ndarray, start: int, count: int) -> QuerySpec:
    both = product(affine(_fresh_correlation(v), -1.0, 1.0), affine(_fresh_family(start, count), -1.0, 1.0))
    return affine(both, -1.0, 1.0)


@pytest.mark.parametrize("d", [4, 8, 16])
def test_remembered_specs_are_the_builders_specs(d: int) -> None:
    design = correlation_design(d)
    for k, v in enumerate(design):
        assert correlation_query(v) is correlation_query(list(v)) is correlation_query(tuple(int(x) for x in v))
        assert correlation_query(v).to_json() == _fresh_correlation(v).to_json()
        assert shared_query(v, 3, 1000 + k) is shared_query(list(v), np.int64(3), 1000 + k)  # type: ignore[arg-type]
        assert shared_query(v, 3, 1000 + k).to_json() == _fresh_shared(v, 3, 1000 + k).to_json()
    assert len({str(correlation_query(v).to_json()) for v in design}) == len(design)  # one spec per row
    r = np.arange(d) % 3 == 0
    assert a_query(r) is a_query(r.astype(int).tolist())
    fresh_a = product(conjunction(("b", 0, 0)), affine(product(label_query(), parity(r)), -0.5, 0.5))
    assert a_query(r).to_json() == fresh_a.to_json()
    assert a_query_family(5, 777) is a_query_family(5, 777)
    assert a_query_family(5, 777).to_json() == _fresh_family(5, 777).to_json()
    assert a_query_family(5, 778).to_json() != a_query_family(5, 777).to_json()
    assert bit_query(2) is bit_query(np.int64(2))  # type: ignore[arg-type]
    assert bit_query(2).to_json() == conjunction(("i", 0, 2), ("b", 0, 1), ("y", 0, -1)).to_json()


def test_a_bad_argument_is_refused_every_time() -> None:
    for _ in range(2):
        with pytest.raises(ParameterError, match="±1 vector"):
            correlation_query([1, 0, -1])
        with pytest.raises(ParameterError, match="±1 vector"):
            shared_query(np.array([1, 2]), 0, 10)


def test_broken_variant_a_cache_keyed_on_the_wrong_thing_hands_out_a_wrong_spec() -> None:
    wrong: dict[int, QuerySpec] = {}

    def broken(v: np.ndarray) -> QuerySpec:  # remembered by v's length only
        return wrong.setdefault(len(v), _fresh_correlation(v))

    design = correlation_design(8)
    caught = [k for k, v in enumerate(design) if broken(v).to_json() != _fresh_correlation(v).to_json()]
    assert caught == list(range(1, len(design)))  # the check of the first test catches every wrong row
