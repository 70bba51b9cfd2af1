"""±b randomized response (``pm_rr``; Duchi, Jordan & Wainwright 2013): unbiased for u ∈ [−b, b],
bounded, light-tailed, exact on the 53-bit grid.

Kind registered here (``ldp.core.randomizer_base.register_randomizer``):

- ``pm_rr``       ±b randomized response, unbiased for u; bounded, light-tailed, exact.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldp.core.errors import ParameterError, require_epsilon, require_positive_finite
from ldp.core.queries import Query
from ldp.core.randomizer_base import LN2, SAMPLER_BLOCK, SHIFT_53, TWO53, Interval, Randomizer, SpecView, ceil_share, register_randomizer
from ldp.core.rng import Draws

__all__ = ["PlusMinusRandomizedResponse"]

# --- ±b randomized response ---


@functools.lru_cache(maxsize=4096)
def _pm_thresholds(epsilon: float) -> tuple[int, int]:
    """(T_lo, T_hi): T_lo = ⌈2^53/(e^ε + 1)⌉ (``ceil_share``), T_hi = 2^53 − T_lo, so T_hi/T_lo ≤ e^ε."""
    t_lo = ceil_share(TWO53, epsilon, 2)
    t_hi = TWO53 - t_lo
    if t_hi <= t_lo:
        raise ParameterError(f"pm_rr at ε={epsilon:g} is below the 2^-53 resolution of its draws")
    return t_lo, t_hi


@dataclass(frozen=True)
class PlusMinusRandomizedResponse(Randomizer):
    """±b randomized response for u ∈ [−b, b] (Duchi, Jordan & Wainwright 2013), exact on the
    53-bit grid.

    X53 = bits(0) >> 11 is uniform on [0, 2^53). Report +M if X53 < T(u), else −M, with
    T(u) = clip(T_lo + ⌊frac(u)·(T_hi − T_lo) + 1/2⌋, T_lo, T_hi), frac(u) = (u + b)/(2b),
    T_lo = ⌈2^53/(e^ε+1)⌉, T_hi = 2^53 − T_lo, and M = b·2^53/(T_hi − T_lo).
    Privacy: every Pr[+M | u] = T(u)/2^53 and Pr[−M | u] = (2^53 − T(u))/2^53 lies in
    [T_lo, T_hi]/2^53 by the clip (float arithmetic on integers < 2^53 is exact), so every
    ratio is ≤ T_hi/T_lo ≤ e^ε exactly (``ceil_share``), at every ε: M never overflows (at
    ε ≥ 36.8, T_lo = 1 and the realized loss is ln(2^53 − 1) ≈ 36.7 < ε).
    Unbiased: E[w] = M·(2T(u) − 2^53)/2^53 = u up to 3M·2^-53 (T(u) is within 1.5 of
    T_lo + frac(u)·(T_hi − T_lo), float rounding of frac included);
    variance M² − E[w]² ≤ M² (bounded reports, sub-Gaussian averages).
    """

    epsilon: float
    bound: float
    kind: ClassVar[str] = "pm_rr"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "bound", require_positive_finite("bound b", self.bound))
        _pm_thresholds(self.epsilon)

    @property
    def thresholds(self) -> tuple[int, int]:
        """(T_lo, T_hi) on the 2^53 grid."""
        return _pm_thresholds(self.epsilon)

    @property
    def magnitude(self) -> float:
        """M = b·2^53/(T_hi − T_lo) ≈ b(e^ε+1)/(e^ε−1)."""
        t_lo, t_hi = self.thresholds
        return self.bound * 2.0**53 / (t_hi - t_lo)

    def _threshold(self, u: np.ndarray | float) -> np.ndarray:
        """T(u) ∈ [T_lo, T_hi] (int64): Pr[+M | u] = T(u)/2^53."""
        b = self.bound
        # t_lo + floor((clip(x) + b)/(2b)·(t_hi − t_lo) + 0.5), clipped to [t_lo, t_hi]: the same
        # float operations in the same order, in place (one array instead of six).
        given = np.array(u, dtype=np.float64, copy=True)
        x = np.nan_to_num(given.reshape(-1), copy=False)  # 1-D, so the in-place ufuncs also take a scalar
        self._cells_in_place(np.clip(x, -b, b, out=x))
        t = x.astype(np.int64).reshape(given.shape)
        return t if t.ndim else t[()]

    def _cells_in_place(self, x: np.ndarray) -> np.ndarray:
        """x ← clip(t_lo + floor((x + b)/(2b)·(t_hi − t_lo) + 0.5), t_lo, t_hi) for x already in
        [−b, b], in place: the one sequence of float operations ``_threshold`` and ``sample`` share
        (their reports are bit for bit those of this order of operations)."""
        t_lo, t_hi = self.thresholds
        b = self.bound
        x += b
        x /= 2.0 * b
        x *= float(t_hi - t_lo)
        x += 0.5
        np.floor(x, out=x)
        x += t_lo
        np.clip(x, t_lo, t_hi, out=x)
        return x

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        # +M iff X >> 11 < T(u): the float operations of ``_threshold`` in the same order (T is an
        # integer below 2^53, exact in a double), one int64 comparison and the sign of ±M, in
        # cache-sized blocks.
        u = np.asarray(inputs, dtype=np.float64)
        x = randomness.bits(0)
        if u.ndim != 1 or u.shape != x.shape:  # broadcast inputs: the formula as written
            return np.where((x >> SHIFT_53).astype(np.int64) < self._threshold(u), self.magnitude, -self.magnitude)
        b, m = self.bound, self.magnitude
        out = np.empty(u.shape, dtype=np.float64)
        nan = u.size > 0 and bool(np.isnan(u.min()))  # min propagates NaN: one pass, not a mask per block
        for lo in range(0, len(u), SAMPLER_BLOCK):
            hi = lo + SAMPLER_BLOCK
            t = np.clip(u[lo:hi], -b, b, out=out[lo:hi])  # ±inf → ±b, as nan_to_num then clip
            if nan:  # NaN → 0, as nan_to_num then clip
                np.copyto(t, 0.0, where=np.isnan(t))
            self._cells_in_place(t)
            plus = np.right_shift(x[lo:hi], SHIFT_53).view(np.int64) < t.astype(np.int64)  # T < 2^53: exact
            np.copysign(m, plus.view(np.int8) - np.int8(1), out=t)  # +M where plus (0 → +0.0), else −M
        return out

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        t = self._threshold(u).astype(np.float64)
        w = np.asarray(w, dtype=np.float64)
        with np.errstate(divide="ignore"):
            return np.where(w > 0, np.log(t), np.log(2.0**53 - t)) - 53 * LN2

    def input_domain(self) -> Interval:
        return Interval(-self.bound, self.bound)

    def output_domain(self) -> np.ndarray:
        return np.array([-self.magnitude, self.magnitude])

    def audit_inputs(self) -> np.ndarray:
        """A grid with both ends and their neighbours: T(u) is non-decreasing in u (every step is
        monotone), so its extremes over [−b, b] are at u = ±b."""
        b = self.bound
        grid = np.linspace(-b, b, 129)
        return np.unique(np.concatenate([grid, [np.nextafter(-b, 0.0), np.nextafter(b, 0.0)]]))

    def consistency_inputs(self, count: int) -> np.ndarray:
        b = self.bound
        return np.array([-b, b, 0.0, 0.3 * b, -0.77 * b, b / 3.0, np.nextafter(b, 0.0), -b / 7.0][: max(1, count)])

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        t = self._threshold(np.asarray(inputs, dtype=np.float64).ravel())
        return self.output_domain(), np.stack([TWO53 - t, t], axis=1).astype(np.uint64), TWO53

    def draw_cells(self, u: float) -> list[np.ndarray]:
        t = int(self._threshold(u))
        return [np.array([0] if t in (0, TWO53) else [0, t << 11], dtype=np.uint64)]

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        return np.asarray(reports, dtype=np.float64)

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        t = self._threshold(u).astype(np.float64)
        mean = self.magnitude * (2.0 * t - 2.0**53) / 2.0**53
        return self.magnitude**2 - mean**2



# --- building from a spec (the users' side: ``LocalRandomizer.build``) ---


@register_randomizer("pm_rr")
def build_pm(spec: SpecView, query: Query) -> Randomizer:
    """``pm_rr`` on [−b, b] (b = the query's bound, or 1 for a query bounded by 0)."""
    return PlusMinusRandomizedResponse(spec.epsilon, query.bound if query.bound > 0 else 1.0)
