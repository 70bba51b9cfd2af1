"""Every randomizer kind refuses parameters it does not declare (docs/security.md, I4).

A parameter nobody reads is a request the user did not agree to, silently changed: a typo
(``"step"`` for ``"steps"``) or a newer aggregator's option would run under defaults the
aggregator did not ask for. Each kind declares the names of its ``params`` where it is
registered (``@register_randomizer`` in ``ldp.core.randomizer_base``), and ``LocalRandomizer.build`` refuses every other
name before the kind's builder runs. The tests loop over the registry, so a kind registered later
is covered without being named here, and they build specs with ``RandomizerSpec.unchecked`` as the
wire codec decodes an aggregator's request.

Broken variant: ``check_params`` as a no-op (each builder left to its own devices, as before)
makes the main test fail for binary_rr, kary_rr, hybrid, discrete_laplace and the others that
never looked at their params (``test_the_check_is_what_refuses``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ldp.core import randomizers
from ldp.core.errors import ParameterError
from ldp.core.mean_estimation import unit_interval_query
from ldp.core.queries import QuerySpec
from ldp.core.query_specs import field_query, record_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec, randomizer_kinds, randomizer_params
from ldp.core.schema import Field, Schema
from ldp.core.string_hashing import fingerprint_schema

SCHEMA = Schema((Field("b", 1, 0, 1), Field("c", 1, 0, 3), Field("age", 1, 18, 90)))
# Queries a kind may take; the first that builds with no params is the kind's.
CANDIDATES: tuple[QuerySpec, ...] = (field_query("b", 0), field_query("c", 0), unit_interval_query("age", 18, 90), record_query())
UNKNOWN = {"zz_not_a_param": 1}
# The open-domain sketches read one fingerprint field (ldp.core.string_hashing): their own schema.
SCHEMAS = {"cms_string": fingerprint_schema("fp"), "hcms_string": fingerprint_schema("fp"), "treehist_prefix": Schema((Field("x", 4, 0, 1),))}


def _base(kind: str) -> QuerySpec:
    """A query ``kind`` builds on with no params; fails the test for a kind no candidate fits."""
    for query in (record_query(),) if kind in SCHEMAS else CANDIDATES:
        try:
            LocalRandomizer.build(RandomizerSpec.unchecked(kind, query, 1.0, {}), SCHEMAS.get(kind, SCHEMA), allow_unaudited=True)
        except ParameterError:
            continue
        return query
    raise AssertionError(f"no query in CANDIDATES builds {kind!r}: add one, so its params are tested")


def _refusals() -> Iterator[tuple[str, str | None]]:
    """(kind, the refusal's text or None when it built) for every kind, with one unknown param."""
    for kind in randomizer_kinds():
        spec = RandomizerSpec.unchecked(kind, _base(kind), 1.0, dict(UNKNOWN))
        try:
            LocalRandomizer.build(spec, SCHEMAS.get(kind, SCHEMA), allow_unaudited=True)
        except ParameterError as exc:
            yield kind, str(exc)
        else:
            yield kind, None


def test_every_kind_refuses_an_unknown_param_naming_it_and_what_is_allowed() -> None:
    built = [kind for kind, text in _refusals() if text is None]
    assert not built, f"kinds that ignored an unknown param: {built}"
    for kind, text in _refusals():
        assert text is not None and "zz_not_a_param" in text and "allowed:" in text and kind in text, (kind, text)


def test_declared_params_still_build_and_the_constructor_refuses_early() -> None:
    for kind in randomizer_kinds():
        declared = randomizer_params(kind)
        assert isinstance(declared, frozenset) and all(isinstance(name, str) for name in declared)
        with pytest.raises(ParameterError, match="unknown params"):
            RandomizerSpec(kind, _base(kind), 1.0, dict(UNKNOWN))  # the aggregator's programmer hears it first
    # a declared name passes the check (its value is the builder's to judge)
    LocalRandomizer.build(RandomizerSpec("hybrid", unit_interval_query("age", 18, 90), 1.0, {"steps": 64}), SCHEMA)
    LocalRandomizer.build(RandomizerSpec("discrete_laplace", unit_interval_query("age", 18, 90), 1.0, {"steps": 64}), SCHEMA)
    LocalRandomizer.build(RandomizerSpec("adaptive_fo", field_query("c", 0), 1.0, {"prefer": "oue"}), SCHEMA)


@pytest.mark.parametrize("params", [{1: 2}, {"steps": 64, "Steps": 64}, {"": 0}, {"hash_bits": 3}])
def test_odd_names_are_refused_in_one_line(params: dict[object, object]) -> None:
    spec = RandomizerSpec.unchecked("hybrid", unit_interval_query("age", 18, 90), 1.0, params)
    with pytest.raises(ParameterError, match=r"randomizer 'hybrid': unknown params .*allowed: \['steps'\]"):
        LocalRandomizer.build(spec, SCHEMA)


def test_params_that_are_not_a_mapping_are_refused() -> None:
    with pytest.raises(ParameterError, match="params must be a mapping"):
        LocalRandomizer.build(RandomizerSpec.unchecked("binary_rr", field_query("b", 0), 1.0, [("steps", 1)]), SCHEMA)


def test_the_check_is_what_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broken variant: without the registry's check, kinds whose builders never read params
    build an unknown one silently, and the main test's assertion is the one that fails."""
    monkeypatch.setattr(randomizers, "check_params", lambda kind, params: None)
    built = {kind for kind, text in _refusals() if text is None}
    assert {"binary_rr", "kary_rr", "hybrid", "discrete_laplace"} <= built
    with pytest.raises(AssertionError, match="kinds that ignored an unknown param"):
        test_every_kind_refuses_an_unknown_param_naming_it_and_what_is_allowed()
