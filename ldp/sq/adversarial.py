"""The target-independent SQ oracle of KLNRS Theorem 5.1 (what a non-adaptive learner can't learn).

For a query g(z, y) over features z and a binary label y ∈ {y₀, y₁}, write s_c(z) = +1 if
c(z) = y₁ and −1 otherwise. Then g(z, c(z)) = (g(z,y₁)+g(z,y₀))/2 + s_c(z)·(g(z,y₁)−g(z,y₀))/2, so

    E_{z~D}[g(z, c(z))] = C_g + ⟨h_g, s_c⟩,   C_g = E[(g(z,y₁)+g(z,y₀))/2],   h_g = (g(z,y₁)−g(z,y₀))/2,

with C_g independent of the target (the paper's h_g is this h_g for ±1-valued g: 0 where g
ignores the label, g(z, 1) where it does not). ``AdversarialSQOracle`` computes C_g and
⟨h_g, s_c⟩ by exact enumeration of the (small) feature domain and answers **C_g whenever that is
a valid answer** (|⟨h_g, s_c⟩| ≤ τ for the true target), else the exact E[g]. It records, per
step, which queries got the constant (``constant_answers``): a query that got the constant
eliminated no concept c′ with |⟨h_g, s_c′⟩| ≤ τ.

This is the paper's oracle, kept for fidelity. The counting step the paper builds on it — a query
correlates beyond τ with c_{r,·} for at most one r, so "each non-adaptive query eliminates at most
two (r, a) pairs" of MASKED-PARITY — is false for every τ < 1/4: by Parseval one [0,1]-valued query
can separate (r, 0) from (r, 1) for up to (fewer than) 1/(16τ²) vectors r, and the bent query does
so for all 2^d of them once τ < 2^{−d/2−2}. Nor is this oracle the strongest adversary: C_g is
invalid whenever the b = 1 part of ⟨h_g, s_c⟩ is large (the bit queries g_j: |·| = 1/(4d)), and
then it answers exactly. The corrected statement, the midpoint adversary and the exact census are
in ``ldp.learners.theorem51`` (docs/theorem51.md).
Noise-free labels only (label_noise = 0); any enumerable distribution D.
"""

from __future__ import annotations

import numpy as np

from ldp.core.errors import ParameterError
from ldp.core.population import PopulationSpec
from ldp.core.queries import QuerySpec, make_query
from ldp.core.schema import RECORD_DTYPE
from ldp.sq.exact import feature_domain
from ldp.sq.sq_oracle import SQOracle

__all__ = ["AdversarialSQOracle", "QueryDecomposition"]


class QueryDecomposition:
    """C_g, h_g and the exact value E[g] = C_g + ⟨h_g, s_c⟩ of one query."""

    def __init__(self, constant: float, correlation: float) -> None:
        self.constant = float(constant)
        self.correlation = float(correlation)

    @property
    def exact(self) -> float:
        return self.constant + self.correlation


class AdversarialSQOracle(SQOracle):
    """Answers C_g (target-independent) whenever valid, else E[g]: KLNRS Theorem 5.1's oracle, kept
    as the paper states it. It does not make the paper's "at most two (r, a) pairs per query" true
    (see the module docstring); ``ldp.learners.theorem51`` has the strongest (midpoint) adversary."""

    def __init__(self, population: PopulationSpec) -> None:
        super().__init__(population.schema)
        if population.label_noise:
            raise ParameterError("AdversarialSQOracle needs noise-free labels (label_noise = 0)")
        label = population.schema.fields[-1]
        if label.length != 1:
            raise ParameterError("the label field must be one column")
        self.y0, self.y1 = int(label.low), int(label.high)
        self.population = population
        self.features = feature_domain(population.schema)
        self.probabilities = np.asarray(
            population.distribution.probabilities(population.schema, self.features, population.target), dtype=np.float64
        )
        self.sign = np.where(population.target.predict(self.features).astype(np.int64) == self.y1, 1.0, -1.0)
        self.constant_answers: list[np.ndarray] = []

    def _with_label(self, y: int) -> np.ndarray:
        return np.concatenate([self.features, np.full((len(self.features), 1), y)], axis=1).astype(RECORD_DTYPE)

    def decompose(self, query: QuerySpec) -> QueryDecomposition:
        """C_g and ⟨h_g, s_c⟩ for the true target, by enumeration."""
        q = make_query(query, self.schema)
        if q.width != 1:
            raise ParameterError("an SQ oracle answers scalar queries only")
        g1 = q.evaluate(self._with_label(self.y1))
        g0 = q.evaluate(self._with_label(self.y0))
        constant = float(np.dot(self.probabilities, (g1 + g0) / 2))
        correlation = float(np.dot(self.probabilities, (g1 - g0) / 2 * self.sign))
        return QueryDecomposition(constant, correlation)

    async def _answer(
        self, queries: tuple[QuerySpec, ...], tolerance: float, confidence: float
    ) -> tuple[np.ndarray, np.ndarray]:
        parts = [self.decompose(q) for q in queries]
        use_constant = np.array([abs(p.correlation) <= tolerance for p in parts])
        self.constant_answers.append(use_constant)
        answers = np.array([p.constant if c else p.exact for p, c in zip(parts, use_constant)])
        return answers, np.zeros(len(queries), dtype=np.int64)
