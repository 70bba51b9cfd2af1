"""Concept classes, record generation and the Referee's exact errors."""

import numpy as np
import pytest

from ldp.core.concepts import (
    ConjunctionConcept,
    MaskedParityConcept,
    ParityConcept,
    PointConcept,
    PointMixture,
    ProductBernoulli,
    Referee,
    ThresholdConcept,
    concept_class,
)
from ldp.core.errors import ParameterError
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.rng import generator


def test_records_are_shard_invariant_and_labeled_by_the_target():
    cc = concept_class("parity", 16)
    target = cc.random_target(generator(0, "t"))
    spec = PopulationSpec(cc, target, 5000, seed=4)
    whole = generate_records(spec, 0, 5000)
    parts = np.concatenate([generate_records(spec, a, b - a) for a, b in [(0, 17), (17, 3000), (3000, 5000)]])
    assert np.array_equal(whole, parts)
    assert np.array_equal(whole[:, -1], target.predict(whole[:, :-1]))


def test_label_noise_flips_the_stated_fraction():
    cc = concept_class("masked_parity", 4)
    target = MaskedParityConcept((1, 1, 0, 0), 0)
    spec = PopulationSpec(cc, target, 50_000, seed=1, label_noise=0.2)
    rec = generate_records(spec, 0, 50_000)
    flipped = (rec[:, -1] != target.predict(rec[:, :-1])).mean()
    assert abs(flipped - 0.2) < 0.011  # 6 standard errors


def test_masked_parity_closed_form_agrees_with_enumeration():
    cc = concept_class("masked_parity", 4)
    t = MaskedParityConcept((1, 0, 1, 1), 1)
    referee = Referee(cc, t)
    for h in [t, MaskedParityConcept(t.r, 0), MaskedParityConcept((0, 0, 1, 1), 1), MaskedParityConcept((0, 1, 0, 0), 0)]:
        by_enumeration = Referee.clean_error(referee, _Opaque(h))
        assert referee.error(h) == pytest.approx(by_enumeration)
    assert referee.error(t) == 0.0
    assert referee.error(MaskedParityConcept(t.r, 0)) == 0.5  # right r, wrong a: the whole b = 0 half


def test_parity_and_other_errors():
    cc = concept_class("parity", 6)
    t = ParityConcept((1, 0, 1, 0, 0, 1))
    assert Referee(cc, t).error(ParityConcept((1, 0, 1, 0, 0, 0))) == 0.5
    assert Referee(cc, t, label_noise=0.1).error(t) == pytest.approx(0.1)
    pc = concept_class("point", 5)
    p = PointConcept((1, 0, 1, 1, 0))
    assert Referee(pc, p, PointMixture(0.3)).error(PointConcept((0,) * 5)) == pytest.approx(0.3 + 0.7 / 32 * 2)
    th = concept_class("threshold", 4)
    assert Referee(th, ThresholdConcept(5, 4)).error(ThresholdConcept(7, 4)) == pytest.approx(2 / 16)
    cj = concept_class("conjunction", 3)
    assert Referee(cj, ConjunctionConcept(((0, 1),)), ProductBernoulli(0.5)).error(ConjunctionConcept(())) == pytest.approx(0.5)


class _Opaque:
    """Hides the hypothesis type so the Referee must enumerate."""

    def __init__(self, h):
        self.h = h

    def predict(self, features):
        return self.h.predict(features)


@pytest.mark.parametrize("name,d,match", [("masked_parity", 1, r"in \[2, 62\]"), ("nope", 3, "unknown concept class"), ("parity", 0, "d must be")])
def test_bad_concept_classes(name, d, match):
    with pytest.raises(Exception, match=match):
        concept_class(name, d)


def test_bad_population_parameters():
    cc = concept_class("parity", 3)
    with pytest.raises(ParameterError, match="population size"):
        PopulationSpec(cc, ParityConcept((1, 0, 0)), 0)
    with pytest.raises(ParameterError, match="label_noise"):
        PopulationSpec(cc, ParityConcept((1, 0, 0)), 10, label_noise=0.5)
