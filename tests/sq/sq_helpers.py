"""Shared helpers for tests/sq (a plain module, not a conftest, so names cannot clash)."""

from __future__ import annotations

from ldp.core.concepts import ConjunctionConcept, Uniform, concept_class
from ldp.core.population import PopulationSpec


def conjunction_population(size: int, seed: int = 0, budget: float = 1.0, d: int = 3,
                           literals: tuple[tuple[int, int], ...] = ((0, 1), (2, 0))) -> PopulationSpec:
    """Uniform x ∈ {0,1}^d labelled by a conjunction (default x0 ∧ ¬x2)."""
    return PopulationSpec(concept_class("conjunction", d), ConjunctionConcept(literals), size, budget=budget, seed=seed,
                          distribution=Uniform())
