"""What every learner in ``ldp.learners`` returns, and the ⊥ hypothesis.

``LearnerResult`` is the local-model analogue of ``ldp.central.results.LearnerResult`` (same
``hypothesis``, ``epsilon``, ``delta``, ``algorithm``, ``details`` fields; ``users`` plays the
role of the central ``n``, available as ``.n`` too) plus what only a local protocol has: the
number of interaction ``rounds`` and of ``queries`` (requests / statistical queries) it made.
A central learner reports ``rounds = 0`` (the curator reads the data once, no protocol) and
``queries = 0``.

``NoHypothesis`` is the learner's ⊥ (KLNRS §3.2, Algorithm A). It predicts nothing; by
convention its error is 1/2 — exactly what a fair coin would score, and the value ``true_error``
reports — so that averages over trials stay meaningful. Calling ``predict`` on it raises, so a
Referee can never silently score ⊥ as if it were a real labeling.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldp.core.concepts import Referee
from ldp.core.errors import ParameterError

__all__ = ["LearnerResult", "NoHypothesis", "true_error", "BOTTOM_ERROR"]

BOTTOM_ERROR = 0.5
"""Error charged to ⊥ (``NoHypothesis``) by convention: the error of a fair coin."""


@dataclass(frozen=True)
class NoHypothesis:
    """⊥: the learner declined to output a hypothesis (``reason`` says why)."""

    reason: str = ""

    def predict(self, features: np.ndarray) -> np.ndarray:
        raise ParameterError(
            "⊥ (NoHypothesis) predicts nothing; score it with ldp.learners.true_error (error 1/2 by convention)"
        )

    def to_json(self) -> dict[str, Any]:
        return {"kind": "bottom", "reason": self.reason}


@dataclass(frozen=True)
class LearnerResult:
    """A hypothesis plus what the learner consumed.

    users: how many users (examples) the run used; rounds: interaction rounds of the local
    protocol (0 for a curator); queries: requests (local) or statistical queries (SQ) made;
    epsilon / delta: the privacy guarantee of the run per user (δ = 0: pure DP);
    model: "central", "local-interactive", "local-non-interactive" or "sq".
    """

    hypothesis: Any
    users: int
    rounds: int
    queries: int
    epsilon: float
    details: Mapping[str, Any] = field(default_factory=dict)
    delta: float = 0.0
    algorithm: str = ""
    model: str = ""

    @property
    def n(self) -> int:
        """Alias of ``users`` (the name ``ldp.central`` uses)."""
        return self.users

    @property
    def is_bottom(self) -> bool:
        return isinstance(self.hypothesis, NoHypothesis)

    def summary(self) -> dict[str, Any]:
        h = self.hypothesis
        return {
            "algorithm": self.algorithm,
            "model": self.model,
            "users": int(self.users),
            "rounds": int(self.rounds),
            "queries": int(self.queries),
            "epsilon": float(self.epsilon),
            "delta": float(self.delta),
            "hypothesis": h.to_json() if hasattr(h, "to_json") else repr(h),
        }


def true_error(referee: Referee, hypothesis: Any) -> float:
    """The Referee's exact error, with ⊥ charged ``BOTTOM_ERROR`` = 1/2 by convention."""
    if isinstance(hypothesis, NoHypothesis):
        return BOTTOM_ERROR
    return float(referee.error(hypothesis))
