"""KLNRS Theorem 5.1, demonstrated exactly on small d: a non-adaptive query set leaves a undetermined.

A non-adaptive SQ learner fixes its queries g_1..g_q before any answer. Against the adversarial
oracle of Theorem 5.1 (``ldp.sq.adversarial.AdversarialSQOracle``: answer the target-independent
constant C_g whenever that is within τ of the truth), a query on the b = 0 half correlates beyond
τ with c_{r,·} for at most one r — so each query pins down a for at most one r. We run a query set
against that oracle for every target (r, a) of MASKED-PARITY_d, and compute by enumeration the
*version space*: every (r', a') whose exact expectations are within τ of all the answers. If it
holds both (r, 0) and (r, 1), no learner — however clever its post-processing — can know a.

``lni_query_set(d, candidates)`` is the LNI (a) query set (d bit queries, τ < 1/(4d), plus an
a-query per candidate); with fewer than 2^d − 1 candidates at least 2(2^d − K) targets keep a
undetermined; with all 2^d, none does (at 2^d + d queries: the bound is tight up to d + 1).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ldp.core.concepts import MaskedParityConcept, concept_class
from ldp.core.population import PopulationSpec
from ldp.core.queries import QuerySpec, make_query
from ldp.core.schema import RECORD_DTYPE
from ldp.learners.masked_parity import a_query, bit_query
from ldp.sq.adversarial import AdversarialSQOracle
from ldp.sq.exact import feature_domain

__all__ = ["Theorem51Outcome", "lni_query_set", "all_masked_parities", "query_expectations", "run_against_adversary", "theorem51_census"]


@dataclass(frozen=True)
class Theorem51Outcome:
    """One target run through the adversary: its answers, the version space, and whether a is open."""

    target: MaskedParityConcept
    answers: np.ndarray
    constant_answers: int  # queries answered with the target-independent C_g
    version_space: tuple[MaskedParityConcept, ...]

    @property
    def a_undetermined(self) -> bool:
        return {c.a for c in self.version_space if c.r == self.target.r} == {0, 1}


def lni_query_set(d: int, candidates: Sequence[Sequence[int]]) -> list[QuerySpec]:
    """The d bit queries g_j and the a-query g_d^{(r')} for each candidate r'."""
    return [bit_query(j) for j in range(d)] + [a_query(r) for r in candidates]


def all_masked_parities(d: int) -> list[MaskedParityConcept]:
    return [MaskedParityConcept(tuple(r), a) for r in itertools.product((0, 1), repeat=d) for a in (0, 1)]


def query_expectations(d: int, queries: Sequence[QuerySpec]) -> tuple[list[MaskedParityConcept], np.ndarray]:
    """E_{c}[g] exactly for every concept c of MASKED-PARITY_d (rows) and query g (columns)."""
    schema = concept_class("masked_parity", d).schema
    features = feature_domain(schema)
    built = [make_query(q, schema) for q in queries]
    concepts = all_masked_parities(d)
    values = np.empty((len(concepts), len(built)))
    for k, c in enumerate(concepts):
        records = np.concatenate([features, c.predict(features)[:, None]], axis=1).astype(RECORD_DTYPE)
        values[k] = [float(np.mean(q.evaluate(records))) for q in built]  # D is uniform over the domain
    return concepts, values


async def run_against_adversary(
    target: MaskedParityConcept, queries: Sequence[QuerySpec], tolerance: float, table: tuple[list[MaskedParityConcept], np.ndarray] | None = None
) -> Theorem51Outcome:
    """One non-adaptive step against the Theorem 5.1 oracle, then the exact version space."""
    d = len(target.r)
    oracle = AdversarialSQOracle(PopulationSpec(concept_class("masked_parity", d), target, size=1))
    answers = await oracle.ask(list(queries), tolerance)
    concepts, values = table if table is not None else query_expectations(d, queries)
    consistent = np.all(np.abs(values - answers[None, :]) <= tolerance * (1 + 1e-9), axis=1)
    return Theorem51Outcome(target, answers, int(oracle.constant_answers[-1].sum()), tuple(c for c, ok in zip(concepts, consistent) if ok))


async def theorem51_census(d: int, queries: Sequence[QuerySpec], tolerance: float) -> list[Theorem51Outcome]:
    """Every target of MASKED-PARITY_d against the adversary with the same (non-adaptive) queries."""
    table = query_expectations(d, queries)
    return [await run_against_adversary(t, queries, tolerance, table) for t in all_masked_parities(d)]
