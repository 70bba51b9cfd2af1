"""Generic label-private learner (BNS §6.1, Def 6.1, Fig. 13, Thm 6.2), instantiated for THRESH_d and POINT_d.

Label privacy: neighbouring databases differ in one *label*; the points are public.

    1. split S into S1 (first m1 examples) and S2 (the rest)
    2. P = points of S1 (labels of S1 ignored)
    3. H = one hypothesis of C per labelling of P realised by C (Π_C(P))
    4. return ExpMech(ε) over H on S2 with q(h) = #{(x,y) ∈ S2 : h(x) = y}

Privacy: ε-label-DP (steps 1–3 do not look at labels). It is **not** DP for the points.
Utility (Thm 6.2 [RECON-M]): m = O((VC·log(1/α) + log(1/β))/(αε)), independent of the domain size.
|Π_C(P)| = |P| + 1 for thresholds and for points.
"""

from __future__ import annotations

import numpy as np

from ldp.central.point import PointHypothesis, random_point
from ldp.central.thresholds import ThresholdHypothesis
from ldp.core.errors import require_epsilon, require_integer
from ldp.core.exponential_mechanism import exponential_mechanism, exponential_probabilities
from ldp.core.learner_result import LearnerResult

__all__ = [
    "threshold_candidates",
    "label_private_threshold_distribution",
    "learn_thresholds_label_private",
    "learn_points_label_private",
]


def threshold_candidates(points: np.ndarray) -> np.ndarray:
    """One threshold per labelling of P realised by THRESH: j ∈ {0} ∪ {p+1 : p ∈ P} (label-independent)."""
    p = np.unique(np.asarray(points, dtype=np.int64))
    return np.concatenate([[0], p + 1])


def _split(x: np.ndarray, y: np.ndarray, m1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xa = np.asarray(x)
    ya = np.asarray(y)
    if xa.ndim != 1 or ya.shape != xa.shape:
        raise ValueError(f"x and y must be 1-D arrays of equal length; got shapes {xa.shape}, {ya.shape}")
    if not np.all((ya == 0) | (ya == 1)):
        raise ValueError("labels y must be in {0,1}")
    m1 = require_integer("m1", m1, 1)
    if m1 >= xa.size:
        raise ValueError(f"m1 must be < n so that S2 is non-empty; got m1={m1}, n={xa.size}")
    return xa[:m1], xa[m1:], ya[m1:].astype(np.int8)


def label_private_threshold_distribution(
    x: np.ndarray, y: np.ndarray, m1: int, epsilon: float
) -> tuple[np.ndarray, np.ndarray]:
    """Exact output distribution (candidates, probabilities) of :func:`learn_thresholds_label_private`."""
    eps = require_epsilon(epsilon)
    x1, x2, y2 = _split(x, y, m1)
    H = threshold_candidates(x1)
    q = ((x2[None, :] < H[:, None]) == (y2[None, :] == 1)).sum(1)
    return H, exponential_probabilities(q, eps)


def learn_thresholds_label_private(
    x: np.ndarray, y: np.ndarray, bits: int, m1: int, epsilon: float, rng: np.random.Generator
) -> LearnerResult:
    """BNS Fig. 13 for THRESH_d; ε-label-DP (BNS Thm 6.2). ``x`` int array in [0, 2^bits), bits ≤ 62."""
    d = require_integer("bits", bits, 1, 62)
    H, p = label_private_threshold_distribution(x, y, m1, epsilon)
    i = int(np.searchsorted(np.cumsum(p), rng.random() * p.sum(), side="right"))
    i = min(i, H.size - 1)
    return LearnerResult(
        ThresholdHypothesis(int(H[i]), d), int(np.asarray(x).size), float(epsilon), 0.0,
        "label-private learner (BNS §6)", privacy="label",
    )


def learn_points_label_private(
    x: np.ndarray, y: np.ndarray, bits: int, m1: int, epsilon: float, rng: np.random.Generator
) -> LearnerResult:
    """BNS Fig. 13 for POINT_d: H = {c_p : p ∈ P} plus one point outside P (the all-0 labelling of P).

    ε-label-DP. The outside point is drawn uniformly, label-independently.
    """
    eps = require_epsilon(epsilon)
    d = require_integer("bits", bits, 1)
    x1, x2, y2 = _split(x, y, m1)
    P = np.unique(x1)
    outside = random_point(d, rng, exclude=P)
    H = list(P) + [outside]
    q = np.array([int(np.sum((x2 == h) == (y2 == 1))) for h in H])
    i = exponential_mechanism(q, eps, rng)
    return LearnerResult(
        PointHypothesis(int(H[i]), d), int(np.asarray(x).size), eps, 0.0, "label-private learner (BNS §6)",
        privacy="label",
    )
