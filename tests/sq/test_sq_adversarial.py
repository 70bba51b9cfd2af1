"""KLNRS Theorem 5.1's oracle: target-independent answers C_g whenever valid."""

from __future__ import annotations

import numpy as np

from ldp.core.concepts import MaskedParityConcept, concept_class
from ldp.core.population import PopulationSpec
from ldp.core.queries import QuerySpec
from ldp.core.query_specs import affine, conjunction, field_query, label_query, parity, product
from ldp.core.rng import generator
from ldp.sq.adversarial import AdversarialSQOracle
from ldp.sq.exact import ExactSQOracle

D = 4


def _population(r: tuple[int, ...], a: int) -> PopulationSpec:
    return PopulationSpec(concept_class("masked_parity", D), MaskedParityConcept(r, a), 10)


def reveal_queries() -> list[QuerySpec]:
    """g_j = (i = j) ∧ (b = 1) ∧ (y = −1): E = 1/(2d) if r_j = 1 else 0 (KLNRS §5.1, typo fixed)."""
    return [conjunction(("i", 0, j), ("b", 0, 1), ("y", 0, -1)) for j in range(D)]


def mask_query(r: tuple[int, ...]) -> QuerySpec:
    """(b = 0) ∧ (y ≠ (−1)^⟨r,x⟩): E = a/2 for the true r, 1/4 for any other r."""
    return product(conjunction(("b", 0, 0)), affine(product(label_query(), parity(np.array(r, dtype=bool))), -0.5, 0.5))


async def test_answers_are_always_valid() -> None:
    rng = generator(0, "adversarial-test")
    for trial in range(4):
        r = tuple(int(v) for v in rng.integers(0, 2, D))
        pop = _population(r, trial % 2)
        adversary, exact = AdversarialSQOracle(pop), ExactSQOracle(pop)
        queries = reveal_queries() + [mask_query(tuple(int(v) for v in rng.integers(0, 2, D))) for _ in range(6)]
        queries += [mask_query(r), product(field_query("x", 0), label_query()), label_query()]
        for tau in (0.01, 1 / (4 * D) - 1e-9, 1 / (4 * D), 0.3):
            answers = await adversary.ask(queries, tau)
            truth = await exact.ask(queries, tau)
            assert np.all(np.abs(answers - truth) <= tau + 1e-12)
            used = adversary.constant_answers[-1]
            # Valid answers either way; the constant is used exactly when it is valid.
            assert np.array_equal(used, np.array([abs(adversary.decompose(q).correlation) <= tau for q in queries]))


async def test_non_adaptive_queries_learn_nothing_about_a() -> None:
    """A non-adaptive learner fixes its mask queries before knowing r: unless it guessed r, they all
    get the constant 1/4, so targets (r, 0) and (r, 1) produce identical transcripts."""
    r = (1, 0, 1, 1)
    guesses = [(0, 0, 0, 1), (1, 1, 0, 0), (0, 1, 1, 1)]  # fixed in advance, none equal r
    tau = 1 / (4 * D) - 1e-9  # fine enough to read r from the reveal queries
    transcripts = []
    for a in (0, 1):
        adversary = AdversarialSQOracle(_population(r, a))
        transcripts.append(await adversary.ask(reveal_queries() + [mask_query(g) for g in guesses], tau))
        assert adversary.constant_answers[-1][D:].all()
    assert np.array_equal(transcripts[0], transcripts[1])
    # Adaptive (KLNRS §5.1): read r at τ < 1/(4d), then ask the mask query for that r at τ < 1/4.
    for a in (0, 1):
        adversary = AdversarialSQOracle(_population(r, a))
        revealed = await adversary.ask(reveal_queries(), tau)
        learned_r = tuple(int(v > 1 / (4 * D)) for v in revealed)
        assert learned_r == r
        (value,) = await adversary.ask([mask_query(learned_r)], 0.24)
        assert int(value > 0.25) == a and not adversary.constant_answers[-1][0]
