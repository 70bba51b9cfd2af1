"""The non-private baseline: the plain sample mean over the population's records.

``EmpiricalSQOracle`` reads the records of users 0..n−1 directly (no randomizer, no privacy:
a baseline, like ``ldp.central``) and answers every query with (1/n)·Σ g(z_i). With ``check``
(default) it refuses, with ``InsufficientUsersError``, a step whose t queries Hoeffding cannot
guarantee: n ≥ ⌈2b²·ln(2t/β)/τ²⌉ (``ldp.sq.bounds.hoeffding_users``). The same n records serve
every step; the bound is exact for a non-adaptive algorithm and heuristic across adaptive steps
(adaptively chosen queries over a reused sample; see docs/sq.md).
"""

from __future__ import annotations

import numpy as np

from ldp.core.errors import ParameterError
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.queries import QuerySpec, make_query
from ldp.sq.bounds import hoeffding_users
from ldp.sq.sq_oracle import InsufficientUsersError, SQOracle

__all__ = ["EmpiricalSQOracle"]


class EmpiricalSQOracle(SQOracle):
    """Sample mean of g over the first ``users`` records (default: the whole population)."""

    def __init__(self, population: PopulationSpec, users: int | None = None, check: bool = True) -> None:
        super().__init__(population.schema)
        n = population.size if users is None else int(users)
        if not 1 <= n <= population.size:
            raise ParameterError(f"users must be in [1, {population.size}], got {users}")
        self.population = population
        self.records = generate_records(population, 0, n)
        self.check = bool(check)

    @property
    def n(self) -> int:
        return len(self.records)

    async def _answer(
        self, queries: tuple[QuerySpec, ...], tolerance: float, confidence: float
    ) -> tuple[np.ndarray, np.ndarray]:
        built = [make_query(q, self.schema) for q in queries]
        if any(q.width != 1 for q in built):
            raise ParameterError("an SQ oracle answers scalar queries only")
        if self.check:
            needed = max(hoeffding_users(max(q.bound, 1e-12), tolerance, 1.0 - confidence, len(queries)) for q in built)
            if needed > self.n:
                raise InsufficientUsersError(
                    f"the sample mean of {len(queries)} queries at τ={tolerance:g}, β={1 - confidence:g} needs {needed} users "
                    f"(Hoeffding); the population has {self.n}",
                    needed=needed,
                    available=self.n,
                )
        answers = np.array([float(np.mean(q.evaluate(self.records))) for q in built])
        return answers, np.full(len(queries), self.n, dtype=np.int64)
