"""Learners: MASKED-PARITY (interactive vs non-interactive local), PARITY (central Algorithm A/A*
and a local attempt), the generic private Occam learner, the HRS release through the local model
(``hrs_local``), its interactive evaluation-query protocol (``hrs_interactive``), and the Theorem 5.1 demonstration. What they return (``LearnerResult``,
``NoHypothesis``, ``true_error``) lives in ``ldp.core.learner_result``. See docs/learners.md."""
