"""A generic SQ learner, written once against ``SQOracle``: CONJUNCTIONS by elimination.

The classic statistical-query learner for conjunctions over x ∈ {0,1}^d with labels y ∈ {0,1}
(Kearns 1998, §3; Kearns & Vazirani 1994, ch. 1 for the PAC version). For each of the 2d
literals ℓ = (x_j = v) it asks, in **one non-adaptive step** of t = 2d queries,

    p_ℓ = Pr_{(x,y)~Z}[x_j ≠ v ∧ y = 1]        (the ``conjunction`` query kind, b = 1)

with tolerance τ = α/(4d), and outputs the conjunction h of every literal with p̂_ℓ ≤ τ.

Guarantee (noise-free labels, any distribution D): if all 2d answers are within τ — probability
≥ 1 − β, the oracle's confidence — then every literal of the target c has p_ℓ = 0, hence
p̂_ℓ ≤ τ, so h contains c's literals and h(x) = 1 ⇒ c(x) = 1; every kept literal has
p_ℓ ≤ 2τ, so error(h) = Pr[c = 1 ∧ h = 0] ≤ Σ_{ℓ∈h} p_ℓ ≤ 2d·2τ = α.
Being non-adaptive, it runs over ``LocalSQOracle(adaptive=False)`` as a non-interactive local
algorithm (KLNRS Theorem 4.8 (iii)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldp.core.concepts import ConjunctionConcept
from ldp.core.errors import ParameterError, require_probability
from ldp.core.queries import QuerySpec
from ldp.core.query_specs import conjunction
from ldp.sq.sq_oracle import SQOracle

__all__ = ["ConjunctionLearnerResult", "conjunction_queries", "conjunction_tolerance", "learn_conjunction"]


@dataclass(frozen=True)
class ConjunctionLearnerResult:
    """The hypothesis, the parameters it was learned with, and what it cost."""

    hypothesis: ConjunctionConcept
    alpha: float
    beta: float
    tolerance: float
    queries: int
    steps: int
    estimates: np.ndarray  # p̂ for literals (j, v) in order j = 0..d−1, v = 0, 1
    users: int


def conjunction_tolerance(d: int, alpha: float) -> float:
    """τ = α/(4d): the tolerance at which elimination reaches error ≤ α."""
    return alpha / (4.0 * d)


def conjunction_queries(d: int, feature: str = "x", label: str = "y") -> list[QuerySpec]:
    """The 2d queries Pr[x_j ≠ v ∧ y = 1], in order (0,0), (0,1), (1,0), ..."""
    return [conjunction((feature, j, v, False), (label, 0, 1)) for j in range(d) for v in (0, 1)]


async def learn_conjunction(oracle: SQOracle, d: int, alpha: float, beta: float) -> ConjunctionLearnerResult:
    """Learn a conjunction over {0,1}^d to error ≤ α with probability ≥ 1 − β (one SQ step)."""
    if d < 1:
        raise ParameterError(f"d must be ≥ 1, got {d}")
    alpha = require_probability("α", alpha)
    beta = require_probability("β", beta)
    tau = conjunction_tolerance(d, alpha)
    users_before = oracle.users_used
    estimates = await oracle.ask(conjunction_queries(d), tau, confidence=1.0 - beta)
    kept = tuple((j, v) for k, (j, v) in enumerate((j, v) for j in range(d) for v in (0, 1)) if estimates[k] <= tau)
    return ConjunctionLearnerResult(
        ConjunctionConcept(kept), alpha, beta, tau, 2 * d, 1, estimates, oracle.users_used - users_before
    )
