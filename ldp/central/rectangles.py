"""Axis-aligned rectangles RECTANGLE_d^ℓ (BNS §3.5, Thm 3.21/3.22): c_{a,b}(x) = 1 iff a_i ≤ x_i ≤ b_i for all i.

BNS gives only a sketch (sanitize each axis with the THRESH sanitizer, keep the intervals holding
significant positive mass, compose over the ℓ axes). Implemented as reference spec B4 [ENG/DERIVED]:

1. per axis i: z_n = x_n[i] + 1 if y_n = 1 else 0 (0 = "negative" sentinel; domain {0,…,2^d}, size m fixed,
   so neighbouring samples give neighbouring z);
2. F_i = RecSanitizer(z^(i)) (practical mode, ``ldp.central.sanitizers.rec_sanitizer``) with accuracy
   ``alpha_sanitizer`` (default α/(4ℓ): the spec's α/(16ℓ) needs m ≳ 10^7 at ℓ = 2) at (ε0, δ0);
3. P_i = F_i(2^d) − F_i(0) estimates the positive mass; if P_i < α/2 return the empty rectangle;
4. a_i = min{t ≥ 1 : F_i(t) − F_i(0) ≥ α/(4ℓ)} − 1, b_i = max{t : F_i(2^d) − F_i(t−1) ≥ α/(4ℓ)} − 1.

Privacy: ℓ sanitizer runs, each (ε0, δ0)-DP; (ε0, δ0) is the better of basic composition (ε/ℓ, δ/ℓ) and
advanced composition (ε/(2·sqrt(2ℓ ln(2/δ))), δ/(2ℓ); spec M8, valid for ε ≤ 1), so the learner is (ε,δ)-DP.
Utility (Thm 3.22 [RECON-M]): m = Õ(ℓ³·8^{log* d}); here measured (``tests/central/test_rectangles.py``).
Proper: the output is a rectangle (or the empty concept, which a rectangle with a > b represents).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldp.central.sanitizers import rec_sanitizer
from ldp.core.errors import require_epsilon, require_integer, require_probability
from ldp.core.learner_result import LearnerResult

__all__ = ["RectangleHypothesis", "rectangle_composition", "learn_rectangles"]


@dataclass(frozen=True)
class RectangleHypothesis:
    """∏_i [lower_i, upper_i] (empty when some lower_i > upper_i)."""

    lower: tuple[int, ...]
    upper: tuple[int, ...]
    bits: int

    @property
    def empty(self) -> bool:
        return any(lo > hi for lo, hi in zip(self.lower, self.upper))

    def predict(self, x: np.ndarray) -> np.ndarray:
        xa = np.asarray(x)
        if xa.ndim != 2 or xa.shape[1] != len(self.lower):
            raise ValueError(f"x must have shape (n, {len(self.lower)}); got {xa.shape}")
        inside = np.all((xa >= np.array(self.lower)) & (xa <= np.array(self.upper)), axis=1)
        return inside.astype(np.int8)

    def describe(self) -> str:
        sides = " × ".join(f"[{lo}, {hi}]" for lo, hi in zip(self.lower, self.upper))
        return f"RECTANGLE_{self.bits}^{len(self.lower)}: {sides}" + (" (empty)" if self.empty else "")


def rectangle_composition(ell: int, epsilon: float, delta: float) -> tuple[float, float]:
    """(ε0, δ0) per axis: the larger ε0 of basic (ε/ℓ, δ/ℓ) and advanced (ε/(2√(2ℓ ln(2/δ))), δ/(2ℓ)) composition."""
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    k = require_integer("ell", ell, 1)
    basic = (eps / k, dlt / k)
    if eps > 1.0:  # the advanced form's ε²/(4 ln(2/δ)) ≤ ε/2 step needs ε ≤ 1
        return basic
    advanced = (eps / (2.0 * math.sqrt(2.0 * k * math.log(2.0 / dlt))), dlt / (2.0 * k))
    return max(basic, advanced)


def learn_rectangles(
    x: np.ndarray,
    y: np.ndarray,
    bits: int,
    alpha: float,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    alpha_sanitizer: float | None = None,
) -> LearnerResult:
    """Proper (ε,δ)-DP learner for axis-aligned rectangles in ℓ = x.shape[1] dimensions over {0,…,2^d−1}^ℓ, d ≤ 31."""
    a = require_probability("alpha", alpha, high=0.5)
    d = require_integer("bits", bits, 1, 31)  # z lives on {0,…,2^d}: d + 1 ≤ 32 bits for RecSanitizer
    xa = np.asarray(x)
    ya = np.asarray(y)
    if xa.ndim != 2 or xa.shape[0] == 0 or ya.shape != (xa.shape[0],):
        raise ValueError(f"x must be (m, ℓ) and y (m,); got shapes {xa.shape}, {ya.shape}")
    if not np.all((ya == 0) | (ya == 1)):
        raise ValueError("labels y must be in {0,1}")
    if xa.min() < 0 or xa.max() >= 2**d:
        raise ValueError(f"points must lie in [0, 2^{d})^ℓ")
    ell = xa.shape[1]
    a_s = a / (4 * ell) if alpha_sanitizer is None else require_probability("alpha_sanitizer", alpha_sanitizer, high=0.5)
    eps0, dlt0 = rectangle_composition(ell, epsilon, delta)
    top = 1 << d
    lower, upper = [], []
    mass = []
    for i in range(ell):
        z = np.where(ya == 1, xa[:, i].astype(np.int64) + 1, 0)
        san = rec_sanitizer(z, d + 1, a_s, eps0, dlt0, rng)

        def F(t: np.ndarray, san=san) -> np.ndarray:  # fraction of z ≤ t
            return san.cdf(np.asarray(t) + 1)

        ts = np.unique(np.concatenate([san.points, san.points - 1, [0, 1, top]]))
        ts = ts[(ts >= 0) & (ts <= top)]
        f0, ftop = float(F(np.array([0]))[0]), float(F(np.array([top]))[0])
        mass.append(ftop - f0)
        # F is a step function: the extreme t with the property lie at its steps (or at the ends)
        left = ts[(ts >= 1) & (F(ts) - f0 >= a / (4 * ell))]
        right = ts[(ts >= 1) & (ftop - F(ts - 1) >= a / (4 * ell))]
        lower.append(int(left.min()) - 1 if left.size else top)
        upper.append(int(right.max()) - 1 if right.size else -1)
    if min(mass) < a / 2:
        lower, upper = [1] * ell, [0] * ell  # the empty rectangle
    return LearnerResult(
        RectangleHypothesis(tuple(lower), tuple(upper), d), int(xa.shape[0]), float(epsilon), float(delta),
        "LearnRectangles via per-axis RecSanitizer (BNS §3.5)",
        details={"epsilon0": eps0, "delta0": dlt0, "alpha_sanitizer": a_s, "positive_mass": tuple(mass)},
    )
