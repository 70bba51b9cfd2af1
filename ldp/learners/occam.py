"""The generic private agnostic learner (KLNRS Theorem 3.7, "private Occam's razor").

The exponential mechanism (``ldp.core.exponential_mechanism``) over a finite class H with score
q(z, h) = −#{i : h(x_i) ≠ y_i}; Δq = 1, so choosing h with probability ∝ exp(ε·q(z,h)/2) is ε-DP
(Theorem 3.6). With n ≥ (ln|H| + ln(2/β))·max(4/(εα), 2/α²) examples the output has error
≤ OPT + α with probability ≥ 1 − β — with or without label noise (agnostic).

Scores for a whole class are computed from the histogram of x (x ∈ {0,1}^d read as an integer,
most significant bit first, as ``ldp.core.concepts.bits_to_int``), never hypothesis by hypothesis:

* PARITY (|H| = 2^d): #mis(r) = (n − Σ_i (−1)^{y_i + ⟨r,x_i⟩})/2, and Σ_i (−1)^{y_i+⟨r,x_i⟩} for
  every r at once is the Walsh–Hadamard transform of the label-signed histogram: O(d·2^d).
* POINT (|H| = 2^d): #mis(p) = #positives − pos(p) + neg(p).
* THRESHOLD (t ∈ [0, 2^d], c_t(x) = 1 iff int(x) < t): prefix sums of the histograms.
* CONJUNCTION (|H| = 3^d, each variable absent, positive or negated): a 3^d × 2^d table (d ≤ 9).

Central model (a trusted curator sees the examples); the baseline the local learners are
compared with.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ldp.core.concepts import (
    Concept,
    ConjunctionConcept,
    ParityConcept,
    PointConcept,
    ThresholdConcept,
    bits_to_int,
    int_to_bits,
)
from ldp.core.errors import ParameterError
from ldp.core.exponential_mechanism import exponential_log_probabilities, exponential_mechanism
from ldp.core.fourier import walsh_hadamard
from ldp.core.learner_result import LearnerResult

__all__ = [
    "walsh_hadamard",
    "occam_scores",
    "occam_hypothesis",
    "occam_output_probabilities",
    "learn_occam",
    "occam_sample_size",
    "class_size",
    "OCCAM_CLASSES",
]

OCCAM_CLASSES = ("parity", "point", "threshold", "conjunction")
_MAX_D = {"parity": 24, "point": 24, "threshold": 24, "conjunction": 9}


def class_size(name: str, d: int) -> int:
    return {"parity": 2**d, "point": 2**d, "threshold": 2**d + 1, "conjunction": 3**d}[name]


def _require_occam_class(name: str, d: int) -> None:
    """Refuse a class the Occam learner does not know, or a d too large to score exhaustively."""
    if name not in OCCAM_CLASSES:
        raise ParameterError(f"the Occam learner knows {OCCAM_CLASSES}, got {name!r}")
    if not 1 <= d <= _MAX_D[name]:
        raise ParameterError(f"{name}: d must be in [1, {_MAX_D[name]}] for exhaustive scoring, got {d}")


def _conjunction_table(d: int) -> np.ndarray:
    """Codes (3^d, d): 0 absent, 1 requires x_j = 1, 2 requires x_j = 0 (index order = itertools.product)."""
    return np.array(list(itertools.product(range(3), repeat=d)), dtype=np.int64).reshape(-1, d)


def occam_scores(name: str, d: int, features: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """q(z, h) = −#misclassified for every h in the class, indexed as ``occam_hypothesis`` decodes."""
    _require_occam_class(name, d)
    features = np.asarray(features)[:, :d]
    labels = np.asarray(labels).astype(np.int64).ravel()
    n = len(labels)
    x = bits_to_int(features) if n else np.zeros(0, dtype=np.int64)
    size = 1 << d
    pos = np.bincount(x[labels == 1], minlength=size).astype(np.float64)
    neg = np.bincount(x[labels == 0], minlength=size).astype(np.float64)
    if name == "parity":
        correlation = walsh_hadamard(neg - pos)  # Σ_i (−1)^{y_i + ⟨r, x_i⟩}
        return -(n - correlation) / 2.0
    if name == "point":
        return -(pos.sum() - pos + neg)
    if name == "threshold":
        neg_below = np.concatenate([[0.0], np.cumsum(neg)])  # #neg with x < t, t = 0..2^d
        pos_below = np.concatenate([[0.0], np.cumsum(pos)])
        return -(neg_below + (pos.sum() - pos_below))
    codes = _conjunction_table(d)
    xs = int_to_bits(np.arange(size), d).astype(np.int64)  # (2^d, d)
    ok = (codes[:, None, :] == 0) | ((codes[:, None, :] == 1) & (xs[None] == 1)) | ((codes[:, None, :] == 2) & (xs[None] == 0))
    predicts_one = ok.all(axis=2)  # (3^d, 2^d)
    return -(predicts_one @ neg + (~predicts_one) @ pos)


def occam_hypothesis(name: str, d: int, index: int) -> Concept:
    """The hypothesis with index ``index`` in ``occam_scores`` order."""
    _require_occam_class(name, d)
    if name == "parity":
        return ParityConcept(tuple(int(v) for v in int_to_bits(index, d)))
    if name == "point":
        return PointConcept(tuple(int(v) for v in int_to_bits(index, d)))
    if name == "threshold":
        return ThresholdConcept(int(index), d)
    code = np.base_repr(int(index), 3).rjust(d, "0")
    return ConjunctionConcept(tuple((j, 1 if c == "1" else 0) for j, c in enumerate(code) if c != "0"))


def occam_output_probabilities(name: str, d: int, features: np.ndarray, labels: np.ndarray, epsilon: float) -> np.ndarray:
    """Exact output distribution: Pr[h] = exp(ε q(z,h)/2) / Σ_h' exp(ε q(z,h')/2)."""
    return np.exp(exponential_log_probabilities(occam_scores(name, d, features, labels), epsilon, sensitivity=1.0))


def learn_occam(name: str, d: int, features: np.ndarray, labels: np.ndarray, epsilon: float, rng: np.random.Generator) -> LearnerResult:
    """Theorem 3.7: the exponential mechanism with score −#misclassified (Δq = 1), ε-DP."""
    scores = occam_scores(name, d, features, labels)
    index = exponential_mechanism(scores, epsilon, rng, sensitivity=1.0)
    return LearnerResult(
        occam_hypothesis(name, d, index),
        users=len(np.asarray(labels)),
        rounds=0,
        queries=0,
        epsilon=float(epsilon),
        details={"class": name, "class_size": class_size(name, d), "score": float(scores[index]), "best_score": float(scores.max())},
        algorithm=f"occam-{name}",
        model="central",
    )


def occam_sample_size(class_size_: int, epsilon: float, alpha: float, beta: float) -> int:
    """Theorem 3.7: n ≥ (ln|H| + ln(2/β))·max(4/(εα), 2/α²)."""
    return math.ceil((math.log(class_size_) + math.log(2.0 / beta)) * max(4.0 / (epsilon * alpha), 2.0 / alpha**2))
