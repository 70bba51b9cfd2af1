"""The randomizer registry (issue 24): every mechanism family registers its kinds with
``@register_randomizer``, and the kind list in ``ldp.core.randomizers``'s docstring cannot drift
from the registry (each kind with the family module that registers it).

Deterministic. Broken variants: a docstring that forgot a kind, or names the wrong family, is
caught by the same comparison; a second registration of a kind is refused.
"""

from __future__ import annotations

import re

import pytest

from ldp.core import randomizer_base, randomizers
from ldp.core.randomizer_base import register_randomizer, registered_randomizers
from ldp.core.randomizers import randomizer_kinds


def documented_kinds(doc: str) -> dict[str, str]:
    """kind → module, from the "Kinds:" list of a docstring (``- ``kind`` text ... ``module``)."""
    section = doc[doc.index("Kinds:") :]
    out: dict[str, str] = {}
    for entry in re.split(r"\n- ", section)[1:]:
        kind = re.match(r"``(\w+)``", entry)
        modules = re.findall(r"``(ldp\.[\w.]+)``", entry)
        assert kind and modules, entry
        out[kind.group(1)] = modules[-1]
    return out


def registered_modules() -> dict[str, str]:
    return {name: kind.module for name, kind in registered_randomizers().items()}


def test_the_docstring_lists_every_registered_kind_with_its_family() -> None:
    assert randomizers.__doc__ is not None
    assert documented_kinds(randomizers.__doc__) == registered_modules()
    assert sorted(registered_modules()) == randomizer_kinds() and len(randomizer_kinds()) == 30


def test_the_comparison_catches_a_drifted_list() -> None:
    assert randomizers.__doc__ is not None
    forgot = re.sub(r"\n- ``olh``[^\n]*", "", randomizers.__doc__)
    assert documented_kinds(forgot) != registered_modules()
    wrong_family = randomizers.__doc__.replace("``pm_rr``              ±b randomized response (Duchi, Jordan & Wainwright 2013). ``ldp.core.plus_minus``",
                                               "``pm_rr``              ±b randomized response. ``ldp.core.rr_mechanisms``")
    assert wrong_family != randomizers.__doc__ and documented_kinds(wrong_family) != registered_modules()


def test_what_the_kinds_declare() -> None:
    kinds = registered_randomizers()
    assert [k for k, v in kinds.items() if not v.requestable] == ["laplace"]
    assert sorted(k for k, v in kinds.items() if v.record_input) == ["cms_string", "hcms_string", "record_rr", "rsfd", "smp", "spl", "treehist_prefix"]
    assert {k: sorted(v.params) for k, v in kinds.items() if v.params} == {
        "discrete_laplace": ["steps"], "piecewise": ["steps"], "hybrid": ["steps"], "olh": ["hash_bits"], "adaptive_fo": ["prefer"],
        **{k: ["calibration", "epsilon_1"] for k in ("l_grr", "l_oue", "l_osue", "l_sue", "l_adp")},
        "cms": ["hash_seed", "hashes", "width"], "hcms": ["hash_seed", "hashes", "width"],
        "cms_string": ["hash_seed", "hashes", "width"], "treehist_prefix": ["bits", "field", "step"], "hcms_string": ["hash_seed", "hashes", "width"],
        "spl": ["oracle"], "smp": ["oracle"], "rsfd": ["paper_epsilon", "variant"],
        "rappor": ["f", "h", "hash_seed", "k", "m", "p", "q"], "dbitflip_pm": ["d"], "alpha_one_bit_mean": ["s"],
    }


def test_a_kind_is_registered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(randomizer_base, "_KINDS", dict(registered_randomizers()))  # the real registry stays untouched
    with pytest.raises(ValueError, match="randomizer kind 'binary_rr' is already registered"):
        register_randomizer("binary_rr")(lambda spec, query: None)  # type: ignore[arg-type, return-value]
