"""The reference SQ oracle: exact expectations under a known distribution and target.

``ExactSQOracle`` answers SQ_Z(g, τ) (KLNRS Definition 4.1) with E_{z~Z}[g(z)] computed by
enumerating the record domain: every feature vector x with its probability Pr_D[x], labelled by
the target c (and, with label noise η, the flipped label with weight η). It ignores τ and the
confidence. With ``shift > 0`` it instead answers E[g] ± shift·τ with a seeded random sign per
query: still a *valid* SQ oracle (|v − E[g]| ≤ τ when shift ≤ 1), and the worst case used to
check the Lemma 4.4/4.5 simulations against biased oracles.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ldp.core.errors import ParameterError
from ldp.core.population import PopulationSpec
from ldp.core.queries import QuerySpec, make_query
from ldp.core.rng import generator
from ldp.core.schema import RECORD_DTYPE, Schema
from ldp.sq.sq_oracle import SQOracle

__all__ = ["ExactSQOracle", "enumerate_records", "feature_domain", "MAX_RECORDS"]

MAX_RECORDS = 1 << 22


def feature_domain(schema: Schema) -> np.ndarray:
    """Every feature vector (all fields but the last, the label), one per row, int16."""
    fields = schema.fields[:-1]
    size = math.prod(f.cardinality**f.length for f in fields)
    if size > MAX_RECORDS:
        raise ParameterError(f"the feature domain has {size} points > 2^22: too large to enumerate exactly")
    columns: list[np.ndarray] = []
    for f in fields:
        columns += [np.arange(f.low, f.high + 1, getattr(f, "step", 1))] * f.length
    if len(columns) <= 8:
        return np.array(list(itertools.product(*columns)), dtype=RECORD_DTYPE).reshape(-1, len(columns))
    mesh = np.meshgrid(*columns, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1).astype(RECORD_DTYPE)


def enumerate_records(population: PopulationSpec) -> tuple[np.ndarray, np.ndarray]:
    """(records, probabilities): the whole distribution Z of one user's record, exactly.

    Records are (x, y) with y = c(x), or with label noise η both labels, weights (1−η)·Pr[x] and
    η·Pr[x]. Probabilities sum to 1 (up to rounding).
    """
    schema = population.schema
    features = feature_domain(schema)
    probs = np.asarray(population.distribution.probabilities(schema, features, population.target), dtype=np.float64)
    labels = population.target.predict(features).astype(np.int64)
    records = np.concatenate([features, labels[:, None]], axis=1).astype(RECORD_DTYPE)
    eta = population.label_noise
    if eta > 0:
        label_field = schema.fields[-1]
        flipped = -labels if label_field.low == -1 else 1 - labels
        noisy = np.concatenate([features, flipped[:, None]], axis=1).astype(RECORD_DTYPE)
        records = np.concatenate([records, noisy])
        probs = np.concatenate([(1 - eta) * probs, eta * probs])
    keep = probs > 0
    return records[keep], probs[keep]


class ExactSQOracle(SQOracle):
    """E_{z~Z}[g(z)] by enumeration: the reference oracle (KLNRS Definition 4.1 with τ = 0).

    ``shift`` ∈ [0, 1]: answer E[g] + s·shift·τ with s = ±1 drawn per query from
    ``generator(seed, "exact-sq-shift", step)`` — a valid but deliberately biased oracle.
    Uses no users (``users_per_query`` is 0).
    """

    def __init__(self, population: PopulationSpec, shift: float = 0.0, seed: int = 0) -> None:
        super().__init__(population.schema)
        if not 0.0 <= shift <= 1.0:
            raise ParameterError(f"shift must be in [0, 1] (a fraction of τ), got {shift}")
        self.population = population
        self.shift = float(shift)
        self.seed = int(seed)
        self.records, self.probabilities = enumerate_records(population)

    def expectation(self, query: QuerySpec) -> float:
        """E_{z~Z}[g(z)] exactly (up to float summation)."""
        q = make_query(query, self.schema)
        if q.width != 1:
            raise ParameterError(f"query {query.name!r} is not scalar; an SQ oracle answers scalar queries only")
        return float(np.dot(self.probabilities, q.evaluate(self.records)))

    async def _answer(
        self, queries: tuple[QuerySpec, ...], tolerance: float, confidence: float
    ) -> tuple[np.ndarray, np.ndarray]:
        values = np.array([self.expectation(q) for q in queries])
        if self.shift > 0:
            signs = generator(self.seed, "exact-sq-shift", self.steps).choice([-1.0, 1.0], size=len(queries))
            values = values + signs * self.shift * tolerance
        return values, np.zeros(len(queries), dtype=np.int64)
