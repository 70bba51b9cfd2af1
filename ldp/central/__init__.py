"""Central-model (trusted-curator) baselines: mechanisms and learners from BNS, KMMS, CHS and HRS.

Modules: ``laplace``, ``exponential``, ``stability`` (A_dist), ``choosing``, ``rec_concave``,
``large_margin`` (LMM + report-noisy-max), ``point``, ``thresholds``, ``label_private``, ``set_cover``,
``halfplane`` (SelectHalfplane), ``polygons`` (convex k-gons, unions of polygons),
``hrs``, ``audit`` (exact δ(ε) / log-ratio on explicit distributions), ``results``. See docs/central.md.
"""

__all__ = [
    "audit",
    "choosing",
    "exponential",
    "halfplane",
    "hrs",
    "label_private",
    "laplace",
    "large_margin",
    "point",
    "polygons",
    "rec_concave",
    "results",
    "set_cover",
    "stability",
    "thresholds",
]
