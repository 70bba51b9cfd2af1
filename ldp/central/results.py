"""Frozen records shared by the central learners."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = ["Hypothesis", "LearnerResult"]


class Hypothesis(Protocol):
    """What every learner returns (structurally matches ``ldp.core.concepts.Hypothesis``)."""

    def predict(self, x: np.ndarray) -> np.ndarray: ...

    def describe(self) -> str: ...


@dataclass(frozen=True)
class LearnerResult:
    """A hypothesis plus what the learner consumed.

    ``epsilon``/``delta`` are the guarantee of the whole run (δ = 0 for pure DP); ``privacy`` says what
    neighbouring relation it refers to ("replace-one" or "label"); ``details`` holds diagnostics that are
    themselves private outputs or data-independent (e.g. which branch fired).
    """

    hypothesis: Any
    n: int
    epsilon: float
    delta: float
    algorithm: str
    privacy: str = "replace-one"
    details: Mapping[str, Any] = field(default_factory=dict)
