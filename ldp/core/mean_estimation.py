"""Mean estimation on a bounded numeric field, exact in the integers the samplers compare.

Three ε-LDP mechanisms for u ∈ [−b, b] whose reports are unbiased estimates of u:

- **Duchi et al. (1-D)** — Duchi, Jordan & Wainwright (2013/2018), §4.2.3 of Wang et al. (2019):
  report ±b(e^ε+1)/(e^ε−1), Pr[+] = 1/2 + u(e^ε−1)/(2b(e^ε+1)). This *is* the project's
  ``pm_rr`` (``ldp.core.plus_minus.PlusMinusRandomizedResponse``), exact on the 2^53 grid; it is
  not registered twice. ``duchi_variance`` is its continuous variance b²((e^ε+1)/(e^ε−1))² − u².
- **Piecewise mechanism** (``piecewise``, ``PiecewiseRandomizer``) — Wang, Xiao, Yang, Zhao, Hui,
  Shin, Shin & Yu, "Collecting and analyzing multidimensional data with local differential
  privacy", ICDE 2019, §III-A (Algorithm 2): for t = u/b, the report is uniform on a
  high-probability window [l(t), r(t)] of length C − 1 w.p. e^{ε/2}/(e^{ε/2}+1), else uniform on
  the rest of [−C, C], C = (e^{ε/2}+1)/(e^{ε/2}−1). Variance t²/(e^{ε/2}−1) + (e^{ε/2}+3)/(3(e^{ε/2}−1)²)
  (times b²): ``piecewise_variance``.
- **Hybrid mechanism** (``hybrid``, ``HybridRandomizer``) — Wang et al. 2019 §III-C: w.p.
  β = 1 − e^{−ε/2} the Piecewise mechanism, else Duchi's (β = 0 for ε ≤ ε* ≈ 0.61). Worst-case
  variance below both: ``hybrid_variance``.

Exactness (the project's rule: the audit checks what the sampler emits, float rounding included).
The continuous Piecewise mechanism outputs floats, which Mironov's (2012) attack applies to, so
it is **discretized**: its output range is cut into N = K + W cells and its input into K + 1
levels, everything decided by comparing 64-bit integers with integer cell boundaries.

1. *Randomized rounding of the input* (as ``discrete_laplace``): s = (u + b)/(2b)·K ∈ [0, K]
   (K a power of two, so s is exact for grid inputs), k = ⌊s⌋ + 1[X53 < F], F = round(frac(s)·2^53),
   X53 the top 53 bits of draw 0. E[k] = s up to 2^-54.
2. *A sliding window of W cells over N = K + W cells*: input level k has the high cells
   j ∈ [k, k + W), each of integer mass A, and the K other cells, each of mass B, where
   B = ⌈2^64/(W·e^ε + K)⌉ (computed rigorously in 80-digit decimals, ``piecewise_cells``),
   A = ⌊(2^64 − K·B)/W⌋ and the leftover L = 2^64 − W·A − K·B ∈ [0, W) goes to one extra
   "null" report whose mass is L under *every* input. One 64-bit draw X (draw 1): X < W·A → cell
   k + X // A; else j′ = (X − W·A) // B, cell j′ (j′ < k) or j′ + W (k ≤ j′ < K), or null (j′ = K).
   W : K ≈ 1 : e^{ε/2} (even W), the discrete twin of the window C − 1 sliding over C + 1.
3. *Reports*: cell j reports w = α·(j − (N − 1)/2), α = 2b·2^64/((A − B)·W·K); null reports 0
   (N is even, so no cell reports 0).

Privacy: every report has mass A or B (a cell) or L (null, the same under every input) for each
level k, and A ≤ e^ε·B because W·e^ε·B ≥ 2^64 − K·B ≥ W·A; an input's distribution is a mixture
over k ∈ {k0, k0 + 1} with input-independent components, so no ratio exceeds A/B ≤ e^ε.
``ldp.core.audit.verify_exact`` checks it from the integers (and that the sampler emits that table).
Unbiasedness: Σ_j x_j = 0 over the symmetric half-integers x_j = j − (N−1)/2, so
E[x | k] = (A − B)/2^64·Σ_{j=k}^{k+W−1} x_j = (A − B)·W·(k − K/2)/2^64 and E[w | k] = b(2k/K − 1):
E[w | u] = u exactly in real arithmetic (up to the 2^-54 rounding of F and the float rounding of α).
Variance: ``PiecewiseRandomizer.variance`` is the exact variance of the realized table; it tends
to ``piecewise_variance`` as K grows (within 0.1 % at the default K = 1024, checked by tests).

The Hybrid mechanism mixes the two exact samplers with an input-independent integer coin
(draw 1 < S, S = ⌊β·2^64⌋; Piecewise then reads its cell from draw 2): a mixture of ε-LDP mechanisms with fixed weights is ε-LDP, and its
realized masses are S·(Piecewise) + (2^64 − S)·(Duchi) over 2^181.

Queries: the mechanisms take a scalar query with bound b; to estimate the mean of a field with
values in [low, high], ask ``unit_interval_query(field, low, high)`` (an ``affine`` of the field
onto [−1, 1]) and map the estimate back with ``from_unit_interval``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from typing import ClassVar

import numpy as np

from ldp.core.errors import ParameterError, require_epsilon, require_positive_finite
from ldp.core.plus_minus import PlusMinusRandomizedResponse
from ldp.core.queries import Query, QuerySpec
from ldp.core.query_specs import affine, field_query
from ldp.core.randomizer_base import SAMPLER_BLOCK, TWO53, TWO64, Interval, Randomizer, SpecView, register_randomizer
from ldp.core.rng import Draws

__all__ = [
    "PiecewiseRandomizer",
    "HybridRandomizer",
    "piecewise_cells",
    "piecewise_window",
    "piecewise_variance",
    "duchi_variance",
    "hybrid_variance",
    "hybrid_weight",
    "HYBRID_EPSILON_STAR",
    "unit_interval_query",
    "from_unit_interval",
    "DEFAULT_STEPS",
]

DEFAULT_STEPS = 1024  # K: input levels − 1 (a power of two)
MAX_STEPS = 1 << 16
HYBRID_EPSILON_STAR = 0.61  # Wang et al. 2019 §III-C: below ε* Duchi's mechanism alone is better
_DECIMAL_PREC = 80
_S11 = np.uint64(11)
_LN2 = math.log(2.0)


# --- continuous variances (Wang et al. 2019), for comparison with the realized ones ---


def duchi_variance(t: np.ndarray | float, epsilon: float, bound: float = 1.0) -> np.ndarray:
    """Var of Duchi et al.'s 1-D report on u = t·b: b²((e^ε+1)/(e^ε−1))² − u² (Wang et al. 2019, Eq. 3)."""
    c = 1.0 / math.tanh(epsilon / 2.0)  # (e^ε + 1)/(e^ε − 1), without overflow
    u = np.asarray(t, dtype=np.float64) * bound
    return bound**2 * c**2 - u**2


def piecewise_variance(t: np.ndarray | float, epsilon: float, bound: float = 1.0) -> np.ndarray:
    """Var of the continuous Piecewise mechanism on u = t·b (Wang et al. 2019, Lemma 2):
    b²·(t²/(e^{ε/2} − 1) + (e^{ε/2} + 3)/(3(e^{ε/2} − 1)²))."""
    h = math.expm1(min(epsilon, 700.0) / 2.0)  # h² = e^700 is still a float
    t = np.asarray(t, dtype=np.float64)
    return bound**2 * (t**2 / h + (h + 4.0) / (3.0 * h**2))


def hybrid_weight(epsilon: float) -> float:
    """β, the probability that the Hybrid mechanism uses Piecewise: 1 − e^{−ε/2} for ε > ε*, else 0."""
    return -math.expm1(-epsilon / 2.0) if epsilon > HYBRID_EPSILON_STAR else 0.0


def hybrid_variance(t: np.ndarray | float, epsilon: float, bound: float = 1.0) -> np.ndarray:
    """Var of the continuous Hybrid mechanism: β·Var_PM + (1 − β)·Var_Duchi (both unbiased, so
    the mixture's variance is the mixture of variances); Wang et al. 2019, Lemma 4."""
    beta = hybrid_weight(epsilon)
    return beta * piecewise_variance(t, epsilon, bound) + (1.0 - beta) * duchi_variance(t, epsilon, bound)


# --- the integer cells ---


def piecewise_window(epsilon: float, steps: int) -> int:
    """W, the window in cells: an even number ≥ 2 closest to 2·round(K/(2e^{ε/2})) (W : K ≈ 1 : e^{ε/2},
    the continuous mechanism's (C − 1) : (C + 1)); at most K."""
    if epsilon / 2.0 > math.log(steps):  # K/(2e^{ε/2}) < 1/2: the smallest even window
        return 2
    return min(steps, max(2, 2 * round(steps / (2.0 * math.exp(epsilon / 2.0)))))


@functools.lru_cache(maxsize=1024)
def piecewise_cells(epsilon: float, steps: int, window: int) -> tuple[int, int, int]:
    """(A, B, L): window-cell mass, other-cell mass and null mass over 2^64, W·A + K·B + L = 2^64.

    B = ⌈2^64/(W·e^ε + K)⌉ with e^ε bounded *below* rigorously (80-digit correctly rounded
    exp, minus a 10^-78 relative margin; denominators rounded down, the quotient up), so
    W·e^ε·B ≥ 2^64 − K·B ≥ W·A, i.e. A ≤ e^ε·B exactly. L = 2^64 − W·A − K·B ∈ [0, W).
    Raises ParameterError when A ≤ B (ε too small for the 2^-64 grid at this size).
    """
    k, w = int(steps), int(window)
    with localcontext() as ctx:
        ctx.prec = _DECIMAL_PREC
        e = Decimal(float(epsilon)).exp()
        ctx.rounding = ROUND_FLOOR
        e_low = e - e.scaleb(-(_DECIMAL_PREC - 2))
        denominator = e_low * w + k
        ctx.rounding = ROUND_CEILING
        b = int((Decimal(TWO64) / denominator).to_integral_value(rounding=ROUND_CEILING))
    a = (TWO64 - k * b) // w
    leftover = TWO64 - w * a - k * b
    if a <= b:
        raise ParameterError(f"piecewise at ε={epsilon:g} with steps={k} is below the 2^-64 resolution of its draws; use a larger ε or fewer steps")
    return a, b, leftover


def _check_steps(kind: str, steps: object) -> int:
    if steps is None:
        return DEFAULT_STEPS
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or not 2 <= steps <= MAX_STEPS or int(steps) & (int(steps) - 1):
        raise ParameterError(f"{kind}: steps must be a power of two in [2, 2^16], got {steps!r}")
    return int(steps)


@dataclass(frozen=True)
class PiecewiseRandomizer(Randomizer):
    """The Piecewise mechanism (Wang et al. 2019, Alg. 2) on a grid, exact on 64-bit draws.

    For u ∈ [−b, b]: randomized rounding to one of K + 1 levels (draw 0), then one of N = K + W
    cells, the W cells of the level's window each with mass A/2^64 and the K others B/2^64, or a
    null report of mass L/2^64 (draw 1); see the module docstring for the construction and the
    proofs. Report: α·(j − (N−1)/2) (null: 0), an unbiased estimate of u.

    Privacy: A ≤ e^ε·B exactly (``piecewise_cells``), so every realized ratio is ≤ e^ε.
    Estimator: the report itself. Variance: ``variance`` (exact for the realized table), close
    to ``piecewise_variance`` (the continuous mechanism's).

    Parameters
    ----------
    epsilon : float
        ε, a finite number in [2^-30, 2^10].
    bound : float
        b > 0: inputs are clipped to [−b, b] (``check_inputs``).
    steps : int, optional
        K, a power of two in [2, 2^16] (default 1024): the input grid 2b/K and, with W, the
        report grid.

    Raises
    ------
    ParameterError
        An invalid ε, bound or steps; or an ε too small for the 2^-64 grid.

    Examples
    --------
    >>> import ldp
    >>> from ldp.core.mean_estimation import PiecewiseRandomizer, piecewise_variance
    >>> pm = PiecewiseRandomizer(1.0, bound=1.0)
    >>> pm.steps, pm.window, pm.cells  # K, W (W : K ≈ 1 : e^{1/2}), N
    (1024, 622, 1646)
    >>> ldp.verify_exact(pm).passed
    True
    >>> round(float(pm.variance(0.5)) / float(piecewise_variance(0.5, 1.0)), 4)  # realized / continuous
    0.9998
    """

    epsilon: float
    bound: float
    steps: int | None = None
    cell_draw: int = field(default=1, repr=False)  # which draw picks the cell (the Hybrid puts its coin on draw 1)
    kind: ClassVar[str] = "piecewise"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "bound", require_positive_finite("bound b", self.bound))
        object.__setattr__(self, "steps", _check_steps(self.kind, self.steps))
        if self.cell_draw not in (1, 2):
            raise ParameterError(f"piecewise: cell_draw must be 1 or 2, got {self.cell_draw!r}")
        self.masses  # noqa: B018  (refuses an ε the grid cannot express, before any charge)

    @property
    def k(self) -> int:
        """K, the number of input steps (levels 0..K)."""
        assert self.steps is not None  # __post_init__ sets it
        return self.steps

    @property
    def window(self) -> int:
        """W, the cells of high mass per level."""
        return piecewise_window(self.epsilon, self.k)

    @property
    def cells(self) -> int:
        """N = K + W report cells (the null report aside)."""
        return self.k + self.window

    @property
    def masses(self) -> tuple[int, int, int]:
        """(A, B, L) over 2^64: window cell, other cell, null."""
        return piecewise_cells(self.epsilon, self.k, self.window)

    @property
    def scale(self) -> float:
        """α = 2b·2^64/((A − B)·W·K): the report per cell."""
        a, b, _ = self.masses
        return 2.0 * self.bound * (TWO64 / ((a - b) * self.window * self.k))

    def _offset(self) -> float:
        return (self.cells - 1) / 2.0

    def _rounding(self, u: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        """(k0, F): s = (u + b)/(2b)·K = k0 + f, F = round(f·2^53) ∈ [0, 2^53]; k0 ∈ [0, K − 1]."""
        b, k = self.bound, self.k
        x = np.clip(np.nan_to_num(np.asarray(u, dtype=np.float64)), -b, b)
        s = np.clip((x + b) / (2.0 * b) * k, 0.0, float(k))
        k0 = np.minimum(np.floor(s), k - 1)
        return k0.astype(np.int64), np.rint((s - k0) * 2.0**53).astype(np.int64)

    def _cell_mass(self, level: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Mass·2^64 (uint64) of cell j (0..N−1; N = null; −1 = not a report) under level k."""
        a, b, leftover = self.masses
        level, j = np.asarray(level, dtype=np.int64), np.asarray(j, dtype=np.int64)
        inside = (j >= level) & (j < level + self.window)
        cell = np.where(inside, np.uint64(a), np.uint64(b))
        return np.where(j == self.cells, np.uint64(leftover), np.where(j < 0, np.uint64(0), cell)).astype(np.uint64)

    def _report(self, j: np.ndarray) -> np.ndarray:
        j = np.asarray(j, dtype=np.int64)
        return np.where(j == self.cells, 0.0, self.scale * (j - self._offset()))

    def _cell_of(self, w: np.ndarray | float) -> np.ndarray:
        """The cell index of each report (N for null, −1 for anything that is not a report)."""
        w = np.asarray(w, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            j = np.rint(np.nan_to_num(w / self.scale) + self._offset())
        j = np.where((j >= 0) & (j < self.cells), j, -1).astype(np.int64)
        j = np.where((j >= 0) & (self._report(np.maximum(j, 0)) == w), j, -1)
        return np.where(w == 0.0, self.cells, j)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        # ``_sample_formula`` in cache-sized blocks, without a branch per user (issue 27): the
        # same reports bit for bit (tests/core/test_sampler_fast_paths.py).
        u = np.asarray(inputs, dtype=np.float64)
        x0, x1 = randomness.bits(0), np.asarray(randomness.bits(self.cell_draw), dtype=np.uint64)
        if u.ndim != 1 or u.shape != x0.shape:  # broadcast inputs: the formula as written
            return self._sample_formula(u, x0, x1)
        a, b, _ = self.masses
        bound, k, w = self.bound, self.k, self.window
        a64, b64, w64, high = np.uint64(a), np.uint64(b), np.uint64(w), np.uint64(w * a)  # W·A < 2^64: K·B ≥ 2
        # Every report by its cell j (null: j = N), the same float operations as ``_report``.
        reports = self._report(np.arange(self.cells + 1))
        out = np.empty(u.shape, dtype=np.float64)
        nan = u.size > 0 and bool(np.isnan(u.min()))  # min propagates NaN: one pass, not a mask per block
        for lo in range(0, len(u), SAMPLER_BLOCK):
            hi = lo + SAMPLER_BLOCK
            # ``_rounding``'s operations in its order (NaN → 0 after the clip, as nan_to_num first)
            s = np.clip(u[lo:hi], -bound, bound, out=out[lo:hi])
            if nan:
                np.copyto(s, 0.0, where=np.isnan(s))
            s += bound
            s /= 2.0 * bound
            s *= k
            np.clip(s, 0.0, float(k), out=s)
            k0 = np.floor(s)
            np.minimum(k0, k - 1, out=k0)
            s -= k0
            s *= 2.0**53
            np.rint(s, out=s)  # F, an integer ≤ 2^53: exact in a double and in an int64
            up = np.right_shift(x0[lo:hi], _S11).view(np.int64) < s.astype(np.int64)
            k0 += up
            level = k0.astype(np.uint64)
            # The cell, without a branch per user: inside the window iff q = X1 // A < W (then
            # j = level + q); else r = (X1 − W·A) // B and j = r + W·[r ≥ level], which is N for
            # r = K (the null report: level ≤ K). X1 − W·A wraps inside the window, where the
            # select j_out + inside·(j_in − j_out) (mod 2^64) discards it.
            x = x1[lo:hi]
            q = x // a64
            inside = q < w64
            q += level  # j_in
            j = np.subtract(x, high)
            j //= b64
            past = np.greater_equal(j, level)  # the window's W cells are skipped from the level on
            j += past * w64  # j_out
            q -= j
            q *= inside
            j += q
            np.take(reports, j.view(np.int64), out=out[lo:hi])
        return out

    def _sample_formula(self, u: np.ndarray, x0: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The sampler as the module docstring writes it, on the draws x0 (rounding) and x (cell)."""
        a, b, _ = self.masses
        k0, f53 = self._rounding(u)
        level = k0 + ((x0 >> _S11).astype(np.int64) < f53)
        high = np.uint64(self.window * a)  # < 2^64: K·B ≥ 2
        inside = x < high
        rest = np.where(inside, np.uint64(0), x - high) // np.uint64(b)  # X − W·A wraps when inside: masked
        other = rest.astype(np.int64)
        j = np.where(inside, level + (np.where(inside, x, np.uint64(0)) // np.uint64(a)).astype(np.int64), np.where(other < level, other, other + self.window))
        j = np.where(~inside & (other >= self.k), self.cells, j)  # the leftover L: null
        return self._report(j)

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        """log of the realized ((2^53 − F)·m(k0, j) + F·m(k0 + 1, j)) / 2^117 (−inf off the reports)."""
        k0, f53 = self._rounding(u)
        j = self._cell_of(w)
        m0 = self._cell_mass(k0, j).astype(np.float64)
        m1 = self._cell_mass(np.minimum(k0 + 1, self.k), j).astype(np.float64)
        f = f53.astype(np.float64)
        with np.errstate(divide="ignore"):
            return np.log((2.0**53 - f) * m0 + f * m1) - 117 * _LN2

    def input_domain(self) -> Interval:
        return Interval(-self.bound, self.bound)

    def output_domain(self) -> np.ndarray:
        return np.sort(self._report(np.arange(self.cells + 1)))

    def audit_inputs(self) -> np.ndarray:
        """The levels b(2k/K − 1), k = 0..K: every input's distribution is a mixture of two of them."""
        return self.bound * (2.0 * np.arange(self.k + 1) / self.k - 1.0)

    def consistency_inputs(self, count: int) -> np.ndarray:
        """Points between levels first (so that draw 0 matters), both ends, 0."""
        b, r = self.bound, 2.0 * self.bound / self.k
        pts = [-b + 0.5 * r, b, -b, b - r / 3.0, 0.0, 0.3 * r, 0.37 * b + 0.25 * r, -0.6 * b - 0.125 * r]
        return np.clip(np.array(pts[: max(1, count)], dtype=np.float64), -b, b)

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Masses over 2^64 (uint64) when every input is a level, else over 2^117 (Python ints)."""
        k0, f53 = self._rounding(np.asarray(inputs, dtype=np.float64).ravel())
        outputs = self.output_domain()
        j = self._cell_of(outputs)[None, :]
        if np.all((f53 == 0) | (f53 == TWO53)):
            return outputs, self._cell_mass((k0 + (f53 == TWO53))[:, None], j), TWO64
        m0 = self._cell_mass(k0[:, None], j).astype(object)
        m1 = self._cell_mass(np.minimum(k0 + 1, self.k)[:, None], j).astype(object)
        f = f53.astype(object)[:, None]
        return outputs, (TWO53 - f) * m0 + f * m1, TWO53 * TWO64

    def draw_cells(self, u: float) -> list[np.ndarray]:
        a, b, leftover = self.masses
        _, f53 = self._rounding(np.array([u]))
        f = int(f53[0])
        first = [0] if f in (0, TWO53) else [0, f << 11]
        window = [i * a for i in range(self.window)]
        rest = [self.window * a + i * b for i in range(self.k + (1 if leftover else 0))]
        cells = [np.array(first, dtype=np.uint64), np.array(window + rest, dtype=np.uint64)]
        return cells if self.cell_draw == 1 else [cells[0], np.array([0], dtype=np.uint64), cells[1]]

    def realized_extremes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """Per report, the largest and smallest mass over the levels k = 0..K, in O(N): every cell
        is in some level's window (A) and, since W ≤ K, outside another's (B); null is L for all."""
        a, b, leftover = self.masses
        outputs = self.output_domain()
        j = self._cell_of(outputs)
        null = j == self.cells
        outside_some = (j < self.k) | (j >= self.window)
        hi = np.where(null, np.uint64(leftover), np.uint64(a)).astype(np.uint64)
        lo = np.where(null, np.uint64(leftover), np.where(outside_some, np.uint64(b), np.uint64(a))).astype(np.uint64)
        return self.audit_inputs(), outputs, hi, lo, TWO64

    def _moments(self, u: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        """(E[w | u], E[w² | u]) of the realized table, in floats."""
        a, b, _ = self.masses
        k0, f53 = self._rounding(u)
        f = f53 / 2.0**53
        n, w, c = self.cells, self.window, self._offset()

        def second(level: np.ndarray) -> np.ndarray:
            # Σ over the window j = level..level+W−1 of (j − c)², and over all N cells
            lo = level - c
            window_sq = w * lo**2 + lo * w * (w - 1) + (w - 1) * w * (2 * w - 1) / 6.0
            all_sq = n * (n * n - 1) / 12.0
            return (b * all_sq + (a - b) * window_sq) / 2.0**64

        level0 = k0.astype(np.float64)
        ex2 = (1 - f) * second(level0) + f * second(np.minimum(level0 + 1, self.k))
        mean = self.bound * (2.0 * (level0 + f) / self.k - 1.0)
        return mean, self.scale**2 * ex2

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        """Per-report unbiased estimates of u: the reports themselves (E[w | u] = u).

        Examples
        --------
        >>> import numpy as np
        >>> from ldp.core.mean_estimation import PiecewiseRandomizer
        >>> from ldp.core.rng import RandomSource
        >>> pm = PiecewiseRandomizer(2.0, bound=1.0)
        >>> reports = pm.sample(np.full(100_000, 0.3), RandomSource(0).for_request("demo", 0, np.arange(100_000)))
        >>> bool(abs(pm.estimate(reports).mean() - 0.3) < 0.02)  # sd of the mean ≈ 0.005
        True
        """
        return np.asarray(reports, dtype=np.float64)

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        """Var[w | u] of the realized table: E[w²] − E[w]² (mixture over the two levels of u)."""
        mean, ex2 = self._moments(u)
        return ex2 - mean**2


class _EachDrawOnce:
    """The draws of one report, each computed once however often it is read (``Draws``): the
    Hybrid's Piecewise rounding and Duchi coin both read draw 0. Lives for one ``sample`` call;
    the samplers only read the arrays it hands out."""

    def __init__(self, randomness: Draws) -> None:
        self._randomness = randomness
        self._bits: dict[int, np.ndarray] = {}

    @property
    def users(self) -> np.ndarray:
        return self._randomness.users

    def bits(self, draw: int = 0) -> np.ndarray:
        if draw not in self._bits:
            self._bits[draw] = self._randomness.bits(draw)
        return self._bits[draw]

    def uniform(self, draw: int = 0) -> np.ndarray:
        return self._randomness.uniform(draw)


@dataclass(frozen=True)
class HybridRandomizer(Randomizer):
    """The Hybrid mechanism (Wang et al. 2019 §III-C), exact: w.p. S/2^64 (S = ⌊β·2^64⌋,
    β = ``hybrid_weight(ε)``) the exact Piecewise report, else Duchi's (``pm_rr``).

    Draws: 0 (Piecewise's rounding, or Duchi's coin — only one is used per report), 1 (the coin
    X1 < S), 2 (Piecewise's cell; last, so the audit's sampler check enumerates it vectorized). Realized masses: S·m_PM·2^53 + (2^64 − S)·m_D·2^64
    over 2^181 (m_PM at a level over 2^64; m_D over 2^53). A fixed-weight mixture of two ε-LDP
    mechanisms is ε-LDP; Duchi's reports ±M are never Piecewise reports (checked at construction),
    so each report's extremes are its own mechanism's. Estimator: the report (both parts unbiased).

    Parameters
    ----------
    epsilon : float
        ε, a finite number in [2^-30, 2^10].
    bound : float
        b > 0.
    steps : int, optional
        K of the Piecewise part (default 1024).

    Examples
    --------
    >>> import ldp
    >>> from ldp.core.mean_estimation import HybridRandomizer, hybrid_variance
    >>> hm = HybridRandomizer(2.0, bound=1.0)
    >>> round(hm.weight, 4), ldp.verify_exact(hm).passed  # β = 1 − e^{−1}
    (0.6321, True)
    >>> round(float(hm.variance(1.0)) / float(hybrid_variance(1.0, 2.0)), 3)  # realized / continuous
    1.001
    """

    epsilon: float
    bound: float
    steps: int | None = None
    kind: ClassVar[str] = "hybrid"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "bound", require_positive_finite("bound b", self.bound))
        object.__setattr__(self, "steps", _check_steps(self.kind, self.steps))
        pm_out = self.piecewise.output_domain()
        if np.isin([-self.duchi.magnitude, self.duchi.magnitude], pm_out).any():  # pragma: no cover - measure zero
            raise ParameterError(f"hybrid at ε={self.epsilon:g}, steps={self.steps}: a Duchi report coincides with a Piecewise report; use other steps")

    @property
    def piecewise(self) -> PiecewiseRandomizer:
        return PiecewiseRandomizer(self.epsilon, self.bound, self.steps, cell_draw=2)

    @property
    def duchi(self) -> PlusMinusRandomizedResponse:
        return PlusMinusRandomizedResponse(self.epsilon, self.bound)

    @property
    def select(self) -> int:
        """S: the Piecewise part is used when draw 1 < S."""
        return min(TWO64 - 1, int(math.floor(hybrid_weight(self.epsilon) * 2.0**64)))

    @property
    def weight(self) -> float:
        """The realized β = S/2^64."""
        return self.select / 2.0**64

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        draws = _EachDrawOnce(randomness)  # both parts read draw 0: one PRF pass, not two
        x1 = np.asarray(draws.bits(1), dtype=np.uint64)
        pm, duchi = self.piecewise.sample(inputs, draws), self.duchi.sample(inputs, draws)
        if pm.shape != x1.shape or duchi.shape != x1.shape:  # broadcast inputs: the formula as written
            return np.where(x1 < np.uint64(self.select), pm, duchi)
        # np.where(X1 < S, pm, duchi) as a select on the doubles' bits, in cache-sized blocks
        # (no branch per user): duchi ^ ((pm ^ duchi) & mask), mask all ones where X1 < S.
        s64 = np.uint64(self.select)
        mixed, p, d = pm.view(np.uint64), pm.view(np.uint64), duchi.view(np.uint64)
        for lo in range(0, len(x1), SAMPLER_BLOCK):
            hi = lo + SAMPLER_BLOCK
            mask = (x1[lo:hi] < s64).astype(np.uint64)
            np.negative(mask, out=mask)
            block = np.bitwise_xor(p[lo:hi], d[lo:hi], out=mixed[lo:hi])
            block &= mask
            block ^= d[lo:hi]
        return pm

    def _is_duchi(self, w: np.ndarray | float) -> np.ndarray:
        m = self.duchi.magnitude
        w = np.asarray(w, dtype=np.float64)
        return (w == m) | (w == -m)

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        s, rest = self.weight, (TWO64 - self.select) / 2.0**64  # 1 − s rounds to 0 at large ε; rest does not
        pm = np.exp(self.piecewise.log_prob(u, w))
        duchi = np.where(self._is_duchi(w), np.exp(self.duchi.log_prob(u, w)), 0.0)
        with np.errstate(divide="ignore"):
            return np.log(s * pm + rest * duchi)

    def input_domain(self) -> Interval:
        return Interval(-self.bound, self.bound)

    def output_domain(self) -> np.ndarray:
        return np.sort(np.concatenate([self.piecewise.output_domain(), self.duchi.output_domain()]))

    def audit_inputs(self) -> np.ndarray:
        """Piecewise's levels (its worst cases), which include ±b (Duchi's: T(u) is monotone)."""
        return self.piecewise.audit_inputs()

    def consistency_inputs(self, count: int) -> np.ndarray:
        return self.piecewise.consistency_inputs(count)

    def _combine(self, pm_mass: np.ndarray, pm_den: int, duchi_mass: np.ndarray, outputs: np.ndarray) -> np.ndarray:
        """Per-output masses over 2^181 from the parts' (object arrays)."""
        s = self.select
        pm_part = np.asarray(pm_mass).astype(object) * (s * ((1 << 117) // pm_den))
        d_part = np.asarray(duchi_mass).astype(object) * ((TWO64 - s) * TWO64)
        pm_idx = np.searchsorted(outputs, self.piecewise.output_domain())
        d_idx = np.searchsorted(outputs, self.duchi.output_domain())
        out = np.zeros(pm_part.shape[:-1] + (len(outputs),), dtype=object)
        out[..., pm_idx] = pm_part
        out[..., d_idx] = d_part
        return out

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        u = np.asarray(inputs, dtype=np.float64).ravel()
        outputs = self.output_domain()
        _, pm_mass, pm_den = self.piecewise.realized(u)
        _, d_mass, _ = self.duchi.realized(u)
        return outputs, self._combine(pm_mass, pm_den, d_mass, outputs), 1 << 181

    def draw_cells(self, u: float) -> list[np.ndarray]:
        pm0, _, pm2 = self.piecewise.draw_cells(u)
        t = int(self.duchi._threshold(np.array([u], dtype=np.float64))[0])  # Duchi's coin: bits(0) >> 11 < T(u)
        d0 = np.array([0] if t in (0, TWO53) else [0, t << 11], dtype=np.uint64)
        s = self.select
        return [np.unique(np.concatenate([pm0, d0])).astype(np.uint64), np.array([0] if s == 0 else [0, s], dtype=np.uint64), pm2]

    def realized_extremes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        inputs, _, pm_hi, pm_lo, _ = self.piecewise.realized_extremes()
        t_lo, t_hi = self.duchi.thresholds
        outputs = self.output_domain()
        hi = self._combine(pm_hi, TWO64, np.array([TWO53 - t_lo, t_hi], dtype=object), outputs)
        lo = self._combine(pm_lo, TWO64, np.array([TWO53 - t_hi, t_lo], dtype=object), outputs)
        return inputs, outputs, hi, lo, 1 << 181

    def realized_column(self, inputs: np.ndarray, j: int) -> np.ndarray:
        return self.realized(inputs)[1][:, j]

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        """Per-report unbiased estimates of u: the reports themselves."""
        return np.asarray(reports, dtype=np.float64)

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        """β·E_PM[w²] + (1 − β)·E_D[w²] − E[w]², with the realized β, tables and thresholds."""
        s, rest = self.weight, (TWO64 - self.select) / 2.0**64
        x = np.atleast_1d(np.asarray(u, dtype=np.float64))
        pm_mean, pm_ex2 = self.piecewise._moments(x)
        m = self.duchi.magnitude
        d_mean = m * (2.0 * self.duchi._threshold(x) - 2.0**53) / 2.0**53  # Duchi's E[w²] is M²
        mean = s * pm_mean + rest * d_mean
        return (s * pm_ex2 + rest * m**2 - mean**2).reshape(np.shape(u))


# --- queries: a bounded field onto [−1, 1] ---


def unit_interval_query(field: str, low: float, high: float, index: int = 0) -> QuerySpec:
    """g(z) = (2·``z[field][index]`` − low − high)/(high − low) ∈ [−1, 1]: a field with values in
    [low, high] as the input of a mean-estimation randomizer (an ``affine`` query, bound 1).

    Examples
    --------
    >>> import ldp, numpy as np
    >>> from ldp.core.queries import make_query
    >>> from ldp.core.schema import Field, Schema
    >>> q = make_query(unit_interval_query("age", 20, 60), Schema((Field("age", 1, 20, 60),)))
    >>> q.evaluate(np.array([[20], [40], [60]], dtype=np.int16)).tolist(), q.bound
    ([-1.0, 0.0, 1.0], 1.0)
    """
    if not (math.isfinite(low) and math.isfinite(high) and high > low):
        raise ParameterError(f"unit_interval_query: need finite low < high, got low={low!r}, high={high!r}")
    width = float(high) - float(low)
    return affine(field_query(field, index), scale=2.0 / width, offset=-(float(low) + float(high)) / width)


def from_unit_interval(value: np.ndarray | float, low: float, high: float) -> np.ndarray:
    """The inverse map of ``unit_interval_query``: low + (v + 1)(high − low)/2 (means and their
    standard errors scale by (high − low)/2)."""
    return float(low) + (np.asarray(value, dtype=np.float64) + 1.0) * (float(high) - float(low)) / 2.0


# --- building from a spec (the users' side: ``LocalRandomizer.build``) ---


@register_randomizer("piecewise", params=("steps",))
@register_randomizer("hybrid", params=("steps",))
def build_mean(spec: SpecView, query: Query) -> Randomizer:
    """``piecewise`` or ``hybrid`` on [−b, b] (b = the query's bound, or 1 for a query bounded by
    0); ``params={"steps": c}`` sets the grid."""
    make = PiecewiseRandomizer if spec.kind == "piecewise" else HybridRandomizer
    return make(spec.epsilon, query.bound if query.bound > 0 else 1.0, spec.params.get("steps"))
