"""Learners: MASKED-PARITY (interactive vs non-interactive local), PARITY (central Algorithm A/A*
and a local attempt), the generic private Occam learner, and the Theorem 5.1 demonstration.
See docs/learners.md."""

from ldp.learners.results import BOTTOM_ERROR, LearnerResult, NoHypothesis, true_error

__all__ = ["LearnerResult", "NoHypothesis", "true_error", "BOTTOM_ERROR"]
