"""Central-model (trusted-curator) baselines: mechanisms and learners from BNS, KMMS, CHS and HRS.

Modules: ``laplace_mechanism``, ``stability`` (A_dist), ``choosing``, ``rec_concave``,
``large_margin`` (LMM + report-noisy-max), ``point``, ``thresholds``, ``label_private``, ``set_cover``, ``disjunctions`` (KMMS Thm 1.3), ``frequent_itemsets`` (CHS §4.1),
``halfplane`` (SelectHalfplane), ``polygons`` (convex k-gons, unions of polygons),
``hrs``, ``harmonic_sieve`` (its cost, and why it is not built), ``pure_lower_bounds`` (BNS pure-DP packing lower bounds: Thm 4.16, Lemma 5.7, Thm 5.10's order; Thm 4.7 helpers), ``privacy_checks`` (exact δ(ε) / log-ratio on explicit distributions). See docs/central.md.
The exponential mechanism they share is ``ldp.core.exponential_mechanism``; what the learners return
is ``ldp.core.learner_result.LearnerResult``; HRS through the local model is ``ldp.learners.hrs_local``.
"""

__all__ = [
    "choosing",
    "disjunctions",
    "frequent_itemsets",
    "halfplane",
    "harmonic_sieve",
    "hrs",
    "label_private",
    "laplace_mechanism",
    "large_margin",
    "point",
    "polygons",
    "privacy_checks",
    "pure_lower_bounds",
    "rec_concave",
    "set_cover",
    "stability",
    "thresholds",
]
