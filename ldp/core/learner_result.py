"""What every learner returns, central or local, and the ⊥ hypothesis.

One ``LearnerResult`` serves both models. A curator (``ldp.central``) fills ``hypothesis``,
``users`` (the sample size n, also readable as ``.n``), ``epsilon``, ``delta``, ``algorithm``,
``privacy`` (the neighbouring relation: "replace-one" or "label") and ``details``; it reads the
data once, so ``rounds = 0`` and ``queries = 0``. A local protocol (``ldp.learners``) adds the
number of interaction ``rounds`` and of ``queries`` (requests / statistical queries) it made, and
its ``model``.

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
            "⊥ (NoHypothesis) predicts nothing; score it with ldp.core.learner_result.true_error (error 1/2 by convention)"
        )

    def to_json(self) -> dict[str, Any]:
        return {"kind": "bottom", "reason": self.reason}


@dataclass(frozen=True)
class LearnerResult:
    """A hypothesis plus what the learner consumed.

    Parameters
    ----------
    hypothesis : Any
        The output: a ``ldp.core.concepts`` concept, a central hypothesis, or ``NoHypothesis`` (⊥).
    users : int
        How many users (examples) the run used: the central n (``.n`` reads it too).
    epsilon, delta : float
        The privacy guarantee of the whole run, per user (δ = 0: pure DP).
    algorithm : str
        Which algorithm ran, with its source (e.g. "A_dist (BNS Lemma 3.2)").
    rounds : int
        Interaction rounds of the local protocol (0 for a curator).
    queries : int
        Requests (local) or statistical queries (SQ) made (0 for a curator).
    details : Mapping[str, Any]
        Diagnostics that are themselves private outputs or data-independent (e.g. which branch fired).
    model : str
        "central", "local-interactive", "local-non-interactive" or "sq" ("" when not stated).
    privacy : str
        The neighbouring relation the guarantee refers to: "replace-one" (default) or "label" (BNS §6).
    """

    hypothesis: Any
    users: int
    epsilon: float
    delta: float = 0.0
    algorithm: str = ""
    rounds: int = 0
    queries: int = 0
    details: Mapping[str, Any] = field(default_factory=dict)
    model: str = ""
    privacy: str = "replace-one"

    @property
    def n(self) -> int:
        """Alias of ``users`` (the sample size n of the central learners)."""
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
