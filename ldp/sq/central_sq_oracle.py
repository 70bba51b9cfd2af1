"""The central baseline: a trusted curator answering SQs with Laplace noise (SuLQ style).

``CentralSQOracle`` holds the records of n users (a curator sees raw data: baseline only) and
answers each query g ∈ [−b, b] with (1/n)·Σ g(z_i) + Lap(2bT/(nε)): the sum has sensitivity 2b
under replace-one neighbours, each of at most T = ``max_queries`` queries gets ε/T, and basic
composition (KLNRS Claim 2.1; Blum, Dwork, McSherry & Nissim, "Practical privacy: the SuLQ
framework", PODS 2005) makes the whole interaction ε-differentially private. A query beyond T is
refused with ``BudgetError``.

Accuracy: a step of t queries is within τ w.p. ≥ 1 − β when
n ≥ ``central_users_needed(b, ε, τ, β, t, T)`` ≈ max(2bT·ln(2t/β)/(ετ), 2b²·ln(4t/β)/τ²);
otherwise ``InsufficientUsersError`` says how many users are needed. Noise comes from
``generator(seed, "central-sq", step)``.
"""

from __future__ import annotations

import numpy as np

from ldp.core.errors import BudgetError, ParameterError, require_epsilon
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.queries import QuerySpec, make_query
from ldp.core.rng import generator
from ldp.sq.bounds import central_noise_scale, central_users_needed
from ldp.sq.sq_oracle import InsufficientUsersError, SQOracle

__all__ = ["CentralSQOracle"]


class CentralSQOracle(SQOracle):
    """SuLQ-style curator: sample mean + Lap(2bT/(nε)) per query, at most ``max_queries`` queries.

    Args:
        population: the users (the curator reads users 0..users−1).
        epsilon: the total privacy budget of the whole interaction.
        max_queries: T, the number of queries the budget is split over.
        seed: noise seed.
        users: n (default: the whole population).
        check: refuse steps that n cannot answer within τ w.p. ≥ 1 − β (default True).
    """

    def __init__(
        self,
        population: PopulationSpec,
        epsilon: float,
        max_queries: int,
        seed: int = 0,
        users: int | None = None,
        check: bool = True,
    ) -> None:
        super().__init__(population.schema)
        if isinstance(max_queries, bool) or int(max_queries) != max_queries or max_queries < 1:
            raise ParameterError(f"max_queries must be an integer ≥ 1, got {max_queries!r}")
        n = population.size if users is None else int(users)
        if not 1 <= n <= population.size:
            raise ParameterError(f"users must be in [1, {population.size}], got {users}")
        self.population = population
        self.epsilon = require_epsilon(epsilon)
        self.max_queries = int(max_queries)
        self.seed = int(seed)
        self.check = bool(check)
        self.records = generate_records(population, 0, n)

    @property
    def n(self) -> int:
        return len(self.records)

    @property
    def epsilon_spent(self) -> float:
        return self.epsilon * self.queries_asked / self.max_queries

    async def _answer(
        self, queries: tuple[QuerySpec, ...], tolerance: float, confidence: float
    ) -> tuple[np.ndarray, np.ndarray]:
        t = len(queries)
        if self.queries_asked + t > self.max_queries:
            raise BudgetError(
                f"the curator's budget ε={self.epsilon:g} is split over T={self.max_queries} queries; "
                f"{self.queries_asked} were asked, this step asks {t} more"
            )
        built = [make_query(q, self.schema) for q in queries]
        if any(q.width != 1 for q in built):
            raise ParameterError("an SQ oracle answers scalar queries only")
        bounds = np.array([q.bound if q.bound > 0 else 1.0 for q in built])
        if self.check:
            needed = max(central_users_needed(b, self.epsilon, tolerance, 1.0 - confidence, t, self.max_queries) for b in bounds)
            if needed > self.n:
                raise InsufficientUsersError(
                    f"the central oracle (ε={self.epsilon:g} over T={self.max_queries} queries) needs {needed} users for "
                    f"{t} queries at τ={tolerance:g}, β={1 - confidence:g}; it has {self.n}",
                    needed=needed,
                    available=self.n,
                )
        means = np.array([float(np.mean(q.evaluate(self.records))) for q in built])
        scales = np.array([central_noise_scale(b, self.epsilon, self.n, self.max_queries) for b in bounds])
        noise = generator(self.seed, "central-sq", self.steps).laplace(0.0, scales)
        return means + noise, np.full(t, self.n, dtype=np.int64)
