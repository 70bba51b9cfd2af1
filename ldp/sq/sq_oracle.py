"""The statistical-query oracle interface (KLNRS Definitions 4.1 and 4.2).

SQ_Z(g, τ) returns v with |v − E_{u~Z}[g(u)]| ≤ τ. Here one call
``await oracle.ask(queries, tolerance, confidence)`` answers a *batch* of queries g: Z → [−b, b]
(registered ``QuerySpec``s over the population's schema) and counts as **one adaptive step**:
an SQ algorithm whose queries all go into one call is non-adaptive (Definition 4.2).
``confidence`` is 1 − β: the probability that *all* answers of the call are within τ (oracles
that answer exactly ignore it).

Every implementation keeps a ``log`` of ``SQStep`` records (queries, τ, users consumed per
query), so experiments can report what an algorithm consumed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ldp.core.errors import LDPError, ParameterError, require_probability
from ldp.core.queries import QuerySpec
from ldp.core.schema import Schema

__all__ = ["SQOracle", "SQStep", "InsufficientUsersError", "RefusedUsersError"]


@dataclass(frozen=True)
class SQStep:
    """One adaptive step: the queries asked, the tolerance, and the users each one used."""

    queries: tuple[QuerySpec, ...]
    tolerance: float
    confidence: float
    answers: np.ndarray
    users_per_query: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


class SQOracle(ABC):
    """Answers batches of statistical queries within a tolerance."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.log: list[SQStep] = []

    @property
    def steps(self) -> int:
        """Number of adaptive steps so far (calls to ``ask``)."""
        return len(self.log)

    @property
    def queries_asked(self) -> int:
        return sum(len(s.queries) for s in self.log)

    @property
    def users_used(self) -> int:
        return int(sum(int(np.sum(s.users_per_query)) for s in self.log))

    async def ask(self, queries: Sequence[QuerySpec], tolerance: float, confidence: float = 0.99) -> np.ndarray:
        """One estimate per query, all within ``tolerance`` with probability ≥ ``confidence``."""
        queries = tuple(queries)
        if not queries:
            raise ParameterError("ask needs at least one query")
        tau = require_probability("tolerance τ", tolerance, low=0.0, high=float("inf"))
        conf = require_probability("confidence 1 − β", confidence)
        answers, users = await self._answer(queries, tau, conf)
        answers = np.asarray(answers, dtype=np.float64)
        self.log.append(SQStep(queries, tau, conf, answers, np.asarray(users, dtype=np.int64)))
        return answers

    @abstractmethod
    async def _answer(
        self, queries: tuple[QuerySpec, ...], tolerance: float, confidence: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """(answers, users used per query) for one validated batch."""


class InsufficientUsersError(LDPError):
    """The population is too small to answer a step within τ with the requested confidence.

    ``needed`` is the number of (further) users the step needs, ``available`` how many there are.
    """

    def __init__(self, message: str, needed: int, available: int) -> None:
        super().__init__(message)
        self.needed = int(needed)
        self.available = int(available)


class RefusedUsersError(LDPError):
    """Users refused (budget spent, per their own ledgers), went missing or errored, so an answer
    would rest on fewer reports than its guarantee needs. ``refused`` counts them."""

    def __init__(self, message: str, refused: int, missing: int = 0, errored: int = 0) -> None:
        super().__init__(message)
        self.refused = int(refused)
        self.missing = int(missing)
        self.errored = int(errored)
