"""Laplace on a bounded query: float ``laplace`` (KLNRS Claim 4.1 as printed, not auditable) and
``discrete_laplace`` (Claim 4.1 on a public grid, exact on integer cells).

Kinds registered here (``ldp.core.randomizer_base.register_randomizer``):

- ``discrete_laplace``  Claim 4.1 on a public grid: randomized rounding, two-sided geometric
                  noise from a finite integer table, a clamped window — exact, floating-point safe.
- ``laplace``     g(u) + Lap(2b/ε) in floats, KLNRS Claim 4.1 as printed. **Not auditable and not
                  requestable by users** (``auditable = False``): its float outputs are open to
                  Mironov's (2012) attack — at ε = 1 most reports are floats the other input cannot
                  produce. Kept in process for paper-fidelity demonstrations only
                  (``LocalRandomizer.build(..., allow_unaudited=True)``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal, localcontext
from typing import ClassVar, NamedTuple

import numpy as np

from ldp.core.errors import ParameterError, require_epsilon, require_positive_finite
from ldp.core.queries import Query
from ldp.core.randomizer_base import (
    DECIMAL_PREC,
    LN2,
    SAMPLER_BLOCK,
    SHIFT_53,
    TWO53,
    TWO64,
    U64_MAX,
    Interval,
    Randomizer,
    SpecView,
    register_randomizer,
)
from ldp.core.rng import Draws

__all__ = ["LaplaceRandomizer", "DiscreteLaplaceRandomizer", "dl_window_extension"]


@dataclass(frozen=True)
class LaplaceRandomizer(Randomizer):
    """R(u) = u + η, η ~ Lap(2b/ε), for u ∈ [−b, b] (KLNRS Claim 4.1) — **in floats: not auditable,
    not requestable by users.**

    Privacy of the real-valued mechanism: log p(w|u) − log p(w|u′) = (|w−u′| − |w−u|)/(2b/ε) ≤ ε.
    The float sampler (inverse CDF on the 2^-53 grid) does not emit that distribution: its outputs
    are not on a public grid, and Mironov's (2012) attack applies — at ε = 1, 83% of its reports
    are floats the other input cannot produce. ``auditable = False``: ``LocalRandomizer.build``
    refuses it unless ``allow_unaudited=True`` (in-process paper-fidelity demonstrations only),
    and ``verify_exact`` reports it as not auditable. Use ``discrete_laplace`` (same noise shape,
    exact) or ``pm_rr``.
    Estimator: w itself (unbiased), variance 2(2b/ε)^2.
    """

    epsilon: float
    bound: float
    kind: ClassVar[str] = "laplace"
    continuous: ClassVar[bool] = True
    auditable: ClassVar[bool] = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "bound", require_positive_finite("bound b", self.bound))

    @property
    def scale(self) -> float:
        return 2.0 * self.bound / self.epsilon

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        centred = randomness.uniform(0) - 0.5  # never exactly 0: uniforms are odd multiples of 2^-53
        noise = -self.scale * np.sign(centred) * np.log1p(-2.0 * np.abs(centred))
        return np.asarray(inputs, dtype=np.float64) + noise

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        """The declared density of the real-valued mechanism (not of the floats the sampler emits)."""
        return -math.log(2.0 * self.scale) - np.abs(np.asarray(w, dtype=np.float64) - np.asarray(u, dtype=np.float64)) / self.scale

    def input_domain(self) -> Interval:
        return Interval(-self.bound, self.bound)

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        return np.asarray(reports, dtype=np.float64)

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        return np.broadcast_to(2.0 * self.scale**2, np.shape(u)).astype(np.float64)


# --- discrete Laplace: the noise table ---


class _NoiseTable(NamedTuple):
    """Integer cells G(z), z ∈ [−T, T], of the two-sided geometric noise (sum exactly 2^64)."""

    a: float  # −ln α′ = ε(1 − η)/(2c)
    alpha: float  # α′
    window: int  # W
    half_width: int  # T = W + c
    cells: np.ndarray  # uint64, G(z) at index z + T
    boundaries: np.ndarray  # uint64, cumulative sums of cells, the final 2^64 excluded (2T entries)
    upper: np.ndarray  # uint64, U[d] = Σ_{z=d}^{T} G(z) for d = 0..T
    lower: np.ndarray  # uint64, L[d] = Σ_{z=−T}^{−d} G(z) for d = 0..T
    mean: float  # E[Z] under the table (≈ 0; the leftover makes it asymmetric by ≤ 2^-64·T²)
    variance: float  # Var Z under the table


def _end_error_factor(a: float, c: int) -> float:
    """max over 0 ≤ j ≤ 2c of (j + 1)·α′^j: the end cells' summed floor errors relative to the
    smallest end mass (the function is log-concave in j; its maximum is near j = 1/a − 1)."""
    top = 2 * c
    star = 1.0 / a - 1.0 if a > 0 else float(top)
    candidates = {0, top, min(top, max(0, math.floor(star))), min(top, max(0, math.ceil(star)))}
    return max((j + 1) * math.exp(-a * j) for j in candidates)


@functools.lru_cache(maxsize=1024)
def _dl_extension_or_none(epsilon: float, steps: int, slack: float, max_lambda: float, min_lambda: float, max_table: int) -> int | None:
    c = steps
    a = epsilon * (1.0 - slack) / (2 * c)
    x = epsilon * slack / 4.0
    if not x > 0 or not a > 0:
        return None
    ln64 = 64.0 * LN2
    ln_n0 = ln64 + math.log(math.tanh(a / 2.0))
    end_factor = _end_error_factor(a, c)
    t_interior = math.floor((ln_n0 - math.log(1.01 / x)) / a) + 1
    t_end = math.floor((ln64 - math.log1p(math.exp(-a)) - math.log(1.01 * end_factor / x)) / a)
    e = min(math.floor(max_lambda * 2 * c / epsilon), t_interior - 2 * c, t_end - 2 * c, max_table - 2 * c)

    def ok(e: int) -> bool:
        t = 2 * c + e
        n_int = math.exp(ln_n0 - a * (t - 1))
        n_end = math.exp(ln64 - a * t - math.log1p(math.exp(-a)))
        return 1.01 / n_int <= x and 1.01 * end_factor / n_end <= x

    while e >= 1 and not ok(e):  # guards the closed forms against float rounding
        e -= 1
    if e < 1 or e * epsilon / (2 * c) < min_lambda:
        return None
    return e


def dl_window_extension(epsilon: float, steps: int, slack: float, max_lambda: float, min_lambda: float, max_table: int) -> int:
    """e = W − c for discrete Laplace at (ε, c): the largest integer with λ = eε/(2c) ≤ max_lambda,
    T = 2c + e ≤ max_table, and both exactness conditions (``DiscreteLaplaceRandomizer``):

        interior:  1.01 / N(T − 1) ≤ εη/4,   N(z) = 2^64·tanh(a/2)·α′^|z|  (the ideal cell masses),
        ends:      1.01 · max_{0≤j≤2c} (j+1)α′^j / N_end ≤ εη/4,   N_end = 2^64·α′^T/(1 + α′).

    Raises ParameterError when the largest such e gives λ < min_lambda (or e < 1)."""
    e = _dl_extension_or_none(epsilon, steps, slack, max_lambda, min_lambda, max_table)
    if e is None:
        good = [2**p for p in range(21) if _dl_extension_or_none(epsilon, 2**p, slack, max_lambda, min_lambda, max_table) is not None]
        hint = (
            "no steps works at this ε (use pm_rr)"
            if not good
            else f"steps from {good[0]} to {good[-1]} work at this ε" if len(good) > 1 else f"steps={good[0]} works at this ε"
        )
        raise ParameterError(
            f"discrete_laplace cannot be made exact at ε={epsilon:g} with steps={steps}: its report window "
            f"would reach fewer than {min_lambda:g} noise scales 2b/ε past ±b within 64-bit cells and a noise table "
            f"of ≤ {max_table} cells per side; {hint}"
        )
    return e


@functools.lru_cache(maxsize=4)  # up to ~50 MB each at the 2^20 cap
def _noise_table(epsilon: float, steps: int, slack: float, extension: int) -> _NoiseTable:
    """The integer cells: G(z) = ⌊2^64·π′(z)⌋ for |z| < T, G(±T) = ⌊2^64·α′^T/(1+α′)⌋ (the tail
    beyond ±T, inclusive), π′(z) = tanh(a/2)·α′^|z|; the leftover L = 2^64 − ΣG (0 ≤ L ≤ 2T+1)
    is given out as +1 to the L cells nearest 0 (z = 0, 1, −1, 2, ...), so every cell is within 1
    of its ideal mass (lumping up to 2T + 1 onto G(0) would break the slack at small ε).

    π′(z) is computed in 128-bit fixed point (v_{z+1} = ⌊v_z·⌊α′·2^128⌋/2^128⌋ from 80-digit
    Decimal constants): after ≤ 2^20 steps the absolute error on 2^64·π′(z) is < 2^-32.
    """
    c = steps
    t = 2 * c + extension
    p = 128
    with localcontext() as ctx:
        ctx.prec = DECIMAL_PREC
        a = Decimal(epsilon) * (1 - Decimal(slack)) / (2 * c)
        alpha = (-a).exp()
        ctx.rounding = ROUND_FLOOR
        rho = int((alpha * (1 << p)).to_integral_value(ROUND_FLOOR))
        v = int(((1 - alpha) / (1 + alpha) * (1 << (64 + p))).to_integral_value(ROUND_FLOOR))
        tail = int(((-a * t).exp() / (1 + alpha) * TWO64).to_integral_value(ROUND_FLOOR))
    half = [0] * (t + 1)
    for z in range(t):
        half[z] = v >> p
        v = (v * rho) >> p
    half[t] = tail
    full = half[:0:-1] + half  # z = −T..T
    leftover = TWO64 - sum(full)
    if not 0 <= leftover <= 2 * t + 1:  # pragma: no cover - guarded by the error analysis
        raise AssertionError(f"discrete_laplace table: leftover {leftover} outside [0, {2 * t + 1}]")
    order = np.empty(2 * t + 1, dtype=np.int64)
    order[0] = t
    order[1::2] = t + np.arange(1, t + 1)
    order[2::2] = t - np.arange(1, t + 1)
    cells = np.array(full, dtype=np.uint64)
    cells[order[:leftover]] += np.uint64(1)
    boundaries = np.cumsum(cells[:-1], dtype=np.uint64)
    upper = np.cumsum(cells[t:][::-1], dtype=np.uint64)[::-1].copy()
    lower = np.cumsum(cells[: t + 1], dtype=np.uint64)[::-1].copy()
    support = np.arange(-t, t + 1, dtype=np.float64)
    prob = cells.astype(np.float64) / 2.0**64
    mean = float((support * prob).sum())
    return _NoiseTable(float(a), float(alpha), c + extension, t, cells, boundaries, upper, lower, mean, float((support**2 * prob).sum() - mean**2))


_GUIDE_BITS = 16  # the guide table: 2^16 int32 entries (256 KiB, cache-resident)
_GUIDE_SHIFT = np.uint64(64 - _GUIDE_BITS)


@functools.lru_cache(maxsize=4)
def _noise_guide(epsilon: float, steps: int, slack: float, extension: int) -> np.ndarray:
    """For each value v of the top 16 bits of a draw X, ``searchsorted(boundaries, X, "right")``
    when it is the same for every X with those top bits (int32), else −1 (a boundary lies inside:
    the sampler searches). A lookup instead of a binary search over 2T ≈ 2700 boundaries per
    user; the result is the search's, exactly (it is monotone in X, so equal at both ends of a
    bucket means constant on it)."""
    boundaries = _noise_table(epsilon, steps, slack, extension).boundaries
    first = np.arange(1 << _GUIDE_BITS, dtype=np.uint64) << _GUIDE_SHIFT
    lo = np.searchsorted(boundaries, first, side="right")
    hi = np.searchsorted(boundaries, first | ((np.uint64(1) << _GUIDE_SHIFT) - np.uint64(1)), side="right")
    return np.where(lo == hi, lo, -1).astype(np.int32)


def _sliding(x: np.ndarray, width: int, op: np.ufunc) -> np.ndarray:
    """op (np.maximum / np.minimum) over every window x[i : i + width] (van Herk / Gil–Werman, O(n))."""
    n = len(x)
    if width == 1:
        return x.copy()
    pad = np.uint64(0) if op is np.maximum else U64_MAX
    blocks = -(-n // width)
    padded = np.full(blocks * width, pad, dtype=x.dtype)
    padded[:n] = x
    grid = padded.reshape(blocks, width)
    prefix = op.accumulate(grid, axis=1).ravel()
    suffix = op.accumulate(grid[:, ::-1], axis=1)[:, ::-1].ravel()
    i = np.arange(n - width + 1)
    return op(suffix[i], prefix[i + width - 1])


@dataclass(frozen=True)
class DiscreteLaplaceRandomizer(Randomizer):
    """Laplace on a grid with every report probability an exact integer/2^117.

    Claim 4.1 made floating-point safe (Mironov 2012; Canonne, Kamath & Steinke 2020; KLNRS
    Claim 4.1).

    For u ∈ [−b, b], grid step r = b/c with c = ``steps`` (a power of two, default ≈ 32ε):

    1. randomized rounding: u/r = k0 + f, k = k0 + 1[X53 < F], F = round(f·2^53), X53 the top 53
       bits of draw 0, so k ∈ [−c, c] and E[r·k] = u up to r·2^-54;
    2. noise Z ∈ [−T, T] from a finite integer table (``_noise_table``): one 64-bit draw X
       (draw 1) lands in cell z of sizes G(z) summing to exactly 2^64 (np.searchsorted on the
       uint64 boundaries), G ≈ 2^64·π′ with π′ the two-sided geometric of ratio
       α′ = e^{−ε(1−η)/(2c)}, η = 2^-12; the end cells ±T hold the tails beyond them;
    3. report w = r·clamp(k + Z, −W, W), T = W + c, W = c + e, e = ``dl_window_extension``.

    Exactness. For k, k′ ∈ [−c, c] and every m ∈ [−W, W], Pr[m | k] is G(m − k) for |m| < W
    (|m − k| ≤ T − 1) and a sum S(d) = Σ_{z ≥ d} G(z), d = W ∓ k ∈ [T − 2c, T], at m = ±W. The ideal
    masses have ratio ≤ α′^{−2c} = e^{ε(1−η)} (interior: the geometric ratio; ends: tails
    α′^d/(1+α′)). Each realized cell is within 1(+2^-32) of its ideal mass N(z), so an interior
    ratio is at most e^{ε(1−η)}·(1+x)/(1−x) with x = 1.01/N(T−1), and an end ratio with
    x = 1.01·max_j (j+1)α′^j / N_end (j + 1 cells summed, j ≤ 2c). The window is chosen so that
    x ≤ εη/4, hence (1+x)/(1−x) ≤ 1 + 4x ≤ e^{εη} and every realized ratio is ≤ e^ε. Step 1
    is a mixture over k ∈ {k0, k0+1}, and a mixture's ratio never exceeds its worst component's,
    so rounding F only moves the bias. ``ldp.core.audit.verify_exact`` confirms all of this from
    the integers. The realized loss is ≈ ε(1 − η) — tight within 2^-12 relative.

    Window: e is the largest integer with λ = eε/(2c) ≤ 20 meeting both conditions and
    T ≤ 2^20 cells per side (memory and build time a client must spend); (ε, steps) for which
    λ < 8 are refused in ``__post_init__`` with a ParameterError (before any charge): that is ε
    below ≈ 2^-16 at steps = 1, steps ≳ 2^12·ε for small ε (table size), and steps = 1 at ε > 15.
    The default steps is always accepted for ε ∈ [2^-16, 16]. ε > 16 is refused (64-bit cells
    cannot hold a useful window there).

    Clamp bias (``clamp_bias_bound``): |E[w] − u| ≤ r·(α′^{W−c+1}/(1 − α′²) + 2(T+1)²/2^64 + 2^-54)
    ≈ (b/ε)·e^{−λ}: ≤ 2·10^-9·b/ε at λ = 20, ≤ 3.4·10^-4·b/ε at λ = 8.
    Estimator: w. Variance: r²(f(1−f) + Var Z) (clamping only shrinks it).

    Parameters
    ----------
    epsilon : float
        ε, a finite number in [2^-30, 16].
    bound : float
        b > 0, finite: inputs are clipped to [−b, b] (``check_inputs``).
    steps : int, optional
        c, grid steps per bound: a power of two in [1, 2^20]; None: 2^round(log2(32ε)) within
        [1, 2^20].

    Raises
    ------
    ParameterError
        An invalid ``epsilon`` or ``bound``; ε > 16; ``steps`` not a power of two in [1, 2^20];
        or (ε, steps) whose window would reach fewer than 8 noise scales (λ < 8).

    Examples
    --------
    >>> import ldp
    >>> dl = ldp.DiscreteLaplaceRandomizer(1.0, bound=1.0)
    >>> dl.steps, dl.grid, dl.tail_lambda  # c = 32, reports on the grid r = b/c, λ = 20
    (32, 0.03125, 20.0)
    >>> audit = ldp.verify_exact(dl)
    >>> audit.passed, round(audit.max_log_ratio, 4)  # ≈ ε(1 − 2^-12)
    (True, 0.9998)
    >>> ldp.DiscreteLaplaceRandomizer(1.0, 1.0, steps=3)
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: discrete_laplace: steps must be a power of two in [1, 2^20], got 3
    """

    epsilon: float
    bound: float
    steps: int | None = None  # c, a power of two; None: 2^round(log2(32ε)) within [1, 2^20]
    kind: ClassVar[str] = "discrete_laplace"

    MAX_EPSILON: ClassVar[float] = 16.0
    SLACK: ClassVar[float] = 2.0**-12  # η
    MAX_LAMBDA: ClassVar[float] = 20.0
    MIN_LAMBDA: ClassVar[float] = 8.0
    MAX_TABLE: ClassVar[int] = 2**20  # T ≤ this

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "bound", require_positive_finite("bound b", self.bound))
        if self.epsilon > self.MAX_EPSILON:
            raise ParameterError(f"discrete_laplace supports ε ≤ {self.MAX_EPSILON:g} (64-bit noise cells cannot hold its report window beyond); got ε = {self.epsilon!r}")
        if self.steps is None:
            object.__setattr__(self, "steps", 2 ** min(20, max(0, round(math.log2(32.0 * self.epsilon)))))
        c = self.steps
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 1 <= c <= 2**20 or c & (c - 1):
            raise ParameterError(f"discrete_laplace: steps must be a power of two in [1, 2^20], got {c!r}")
        object.__setattr__(self, "steps", int(c))
        self._table  # noqa: B018  (refuses (ε, steps) that cannot be made exact, before any charge)

    @property
    def c(self) -> int:
        """c, the number of grid steps per bound (``steps`` after construction, never None)."""
        assert self.steps is not None  # __post_init__ sets it
        return self.steps

    def _extension(self) -> int:
        return dl_window_extension(self.epsilon, self.c, self.SLACK, self.MAX_LAMBDA, self.MIN_LAMBDA, self.MAX_TABLE)

    @property
    def _table(self) -> _NoiseTable:
        return _noise_table(self.epsilon, self.c, self.SLACK, self._extension())

    @property
    def grid(self) -> float:
        """r = b/c: the report spacing."""
        return self.bound / self.c

    @property
    def alpha(self) -> float:
        """α′ = e^{−ε(1−η)/(2c)}: the noise table's geometric ratio."""
        return self._table.alpha

    @property
    def window(self) -> int:
        """W: reports are r·m for integers |m| ≤ W."""
        return self._table.window

    @property
    def table_half_width(self) -> int:
        """T = W + c: the noise table covers z ∈ [−T, T]."""
        return self._table.half_width

    @property
    def tail_lambda(self) -> float:
        """λ = (W − c)·ε/(2c): how many noise scales 2b/ε the window reaches past ±b."""
        return (self.window - self.c) * self.epsilon / (2 * self.c)

    @property
    def noise_scale(self) -> float:
        """r/a = 2b/(ε(1−η)): the Laplace scale whose MGF dominates r·Z's."""
        return self.grid / self._table.a

    @property
    def clamp_probability_bound(self) -> float:
        """An upper bound on Pr[k + Z > W − 1 + 1] (clamped at the top, any input; the bottom is the
        same): α′^{W−c+1}/(1+α′) plus the table's cell errors (T + 1)·1.01/2^64."""
        a, t = self._table.a, self.table_half_width
        return math.exp(-a * (self.window - self.c + 1)) / (1.0 + self.alpha) + (t + 1) * 1.01 / 2.0**64

    @property
    def clamp_bias_bound(self) -> float:
        """|E[w] − u| ≤ r·(α′^{W−c+1}/(1−α′²) + 2(T+1)²/2^64 + 2^-54): clamping, the table's cell
        errors (at most 1.01 per cell, over |z| ≤ T) and the 2^-53 rounding of F."""
        a, t = self._table.a, self.table_half_width
        overshoot = math.exp(-a * (self.window - self.c + 1)) / -math.expm1(-2.0 * a)
        return self.grid * (overshoot + 2.0 * (t + 1) ** 2 / 2.0**64 + 2.0**-54)

    def _rounding(self, u: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        """(k0, F): u/r = k0 + f, F = round(f·2^53) ∈ [0, 2^53]; k0 ∈ [−c, c−1]."""
        c = self.c
        x = np.clip(np.nan_to_num(np.asarray(u, dtype=np.float64) / self.grid), -c, c)  # type: ignore[call-overload]
        k0 = np.minimum(np.floor(x), c - 1)  # type: ignore[operator]  # u = +b: k0 = c − 1, f = 1
        f = x - k0
        return k0.astype(np.int64), np.rint(f * 2.0**53).astype(np.int64)

    def _pmk(self, k: np.ndarray, m: np.ndarray) -> np.ndarray:
        """Pr[m | k]·2^64 (uint64) for k ∈ [−c, c], m ∈ [−W, W], broadcast."""
        t = self._table
        w_, h = t.window, t.half_width
        k = np.asarray(k, dtype=np.int64)
        m = np.asarray(m, dtype=np.int64)
        interior = t.cells[np.clip(m - k + h, 0, 2 * h)]
        up = t.upper[np.clip(w_ - k, 0, h)]
        low = t.lower[np.clip(w_ + k, 0, h)]
        return np.where(m >= w_, up, np.where(m <= -w_, low, interior))

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        t = self._table
        u = np.asarray(inputs, dtype=np.float64)
        x0, x1 = randomness.bits(0), np.asarray(randomness.bits(1), dtype=np.uint64)
        if u.ndim != 1 or u.shape != x0.shape:  # broadcast inputs: the formula as written
            k0, f53 = self._rounding(u)
            k = k0 + ((x0 >> SHIFT_53).astype(np.int64) < f53)
            z = np.searchsorted(t.boundaries, x1, side="right").astype(np.int64) - t.half_width
            return np.clip(k + z, -t.window, t.window) * self.grid
        c, grid, guide = self.c, self.grid, _noise_guide(self.epsilon, self.c, self.SLACK, self._extension())
        out = np.empty(u.shape, dtype=np.float64)
        nan = u.size > 0 and bool(np.isnan(u.min()))  # min propagates NaN: one pass, not a mask per block
        for lo in range(0, len(u), SAMPLER_BLOCK):
            hi = lo + SAMPLER_BLOCK
            # ``_rounding``'s operations in its order (NaN → 0 after the clip, as nan_to_num first)
            s = np.divide(u[lo:hi], grid, out=out[lo:hi])
            np.clip(s, -c, c, out=s)
            if nan:
                np.copyto(s, 0.0, where=np.isnan(s))
            level = np.floor(s)
            np.minimum(level, c - 1, out=level)
            s -= level
            s *= 2.0**53
            np.rint(s, out=s)  # F, an integer ≤ 2^53: exact in a double and in an int64
            level += np.right_shift(x0[lo:hi], SHIFT_53).view(np.int64) < s.astype(np.int64)  # k (float: small integers are exact)
            # z + T = searchsorted(boundaries, X1, "right"), read from the guide table where the
            # top bits of X1 decide it, searched for the rest (≈ 1.5 % of users, for the default steps)
            x = x1[lo:hi]
            cell = guide[x >> _GUIDE_SHIFT]
            open_ = np.flatnonzero(cell < 0)
            if open_.size:
                cell[open_] = np.searchsorted(t.boundaries, x[open_], side="right")
            level += cell
            level -= t.half_width
            np.clip(level, -t.window, t.window, out=level)  # m
            np.multiply(level, grid, out=s)
        return out

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        """log of the realized ((2^53 − F)·Pr[m|k0] + F·Pr[m|k0+1]) / 2^117 (−inf off the grid)."""
        k0, f53 = self._rounding(u)
        w = np.asarray(w, dtype=np.float64)
        m = np.rint(w / self.grid)
        on_grid = (np.abs(m) <= self.window) & (m * self.grid == w)
        m = np.where(on_grid, m, 0).astype(np.int64)
        p0 = self._pmk(k0, m).astype(np.float64)
        p1 = self._pmk(np.minimum(k0 + 1, self.c), m).astype(np.float64)
        f = f53.astype(np.float64)
        with np.errstate(divide="ignore"):
            logp = np.log((2.0**53 - f) * p0 + f * p1) - 117 * LN2
        return np.where(on_grid, logp, -np.inf)

    def input_domain(self) -> Interval:
        return Interval(-self.bound, self.bound)

    def output_domain(self) -> np.ndarray:
        return np.arange(-self.window, self.window + 1) * self.grid

    def audit_inputs(self) -> np.ndarray:
        """The grid points k·r, k ∈ [−c, c]: every input's distribution is a mixture of two of these."""
        return np.arange(-self.c, self.c + 1) * self.grid

    def consistency_inputs(self, count: int) -> np.ndarray:
        """Points between grid points first (so that draw 0 matters), both ends, 0."""
        c, r, b = self.c, self.grid, self.bound
        pts = [-b + 0.5 * r, b, -b, b - r / 3.0, 0.0, 0.3 * r, (c // 2 + 0.75) * r, -(c // 3 + 0.125) * r]  # type: ignore[operator]
        return np.clip(np.array(pts[: max(1, count)], dtype=np.float64), -b, b)

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Masses over 2^64 (uint64) when every input is a grid point, else over 2^117 (Python ints)."""
        u = np.asarray(inputs, dtype=np.float64).ravel()
        k0, f53 = self._rounding(u)
        ms = np.arange(-self.window, self.window + 1)
        outputs = ms * self.grid
        if np.all((f53 == 0) | (f53 == TWO53)):
            return outputs, self._pmk((k0 + (f53 == TWO53))[:, None], ms[None, :]), TWO64
        p0 = self._pmk(k0[:, None], ms[None, :]).astype(object)
        p1 = self._pmk(np.minimum(k0 + 1, self.c)[:, None], ms[None, :]).astype(object)
        f = f53.astype(object)[:, None]
        return outputs, (TWO53 - f) * p0 + f * p1, TWO53 * TWO64

    def draw_cells(self, u: float) -> list[np.ndarray]:
        _, f53 = self._rounding(np.array([u]))
        f = int(f53[0])
        first = [0] if f in (0, TWO53) else [0, f << 11]
        return [np.array(first, dtype=np.uint64), np.concatenate([[np.uint64(0)], self._table.boundaries]).astype(np.uint64)]

    def realized_extremes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """Per output m, the max and min of Pr[m | k]·2^64 over k ∈ [−c, c], in O(T): interior
        m sees the window G[m−c .. m+c] (sliding max/min), the ends the suffix sums S(W−c .. W+c)."""
        t = self._table
        c, w_, h = self.c, t.window, t.half_width
        size = 2 * c + 1  # type: ignore[operator]
        hi_window = _sliding(t.cells, size, np.maximum)  # index i: cells[i .. i + 2c]
        lo_window = _sliding(t.cells, size, np.minimum)
        ms = np.arange(-w_ + 1, w_)
        start = ms - c + h  # type: ignore[operator]
        hi = np.empty(2 * w_ + 1, dtype=np.uint64)
        lo = np.empty(2 * w_ + 1, dtype=np.uint64)
        hi[1:-1], lo[1:-1] = hi_window[start], lo_window[start]
        top = t.upper[w_ - c : w_ + c + 1]  # type: ignore[operator]
        bottom = t.lower[w_ - c : w_ + c + 1]  # type: ignore[operator]
        hi[-1], lo[-1], hi[0], lo[0] = top.max(), top.min(), bottom.max(), bottom.min()
        return self.audit_inputs(), self.output_domain(), hi, lo, TWO64

    def realized_column(self, inputs: np.ndarray, j: int) -> np.ndarray:
        k0, f53 = self._rounding(inputs)
        return self._pmk(k0 + (f53 == TWO53), np.asarray(j - self.window, dtype=np.int64))

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        """Per-report estimates of the input: the report w itself.

        Unbiased up to the clamp bias, |E[w] − u| ≤ ``clamp_bias_bound`` ≈ (b/ε)·e^{−λ}.

        Parameters
        ----------
        reports : numpy.ndarray
            Reports w = r·m on the grid.

        Returns
        -------
        numpy.ndarray
            float64, the reports unchanged.

        Examples
        --------
        >>> import ldp, numpy as np
        >>> from ldp.core.rng import RandomSource
        >>> dl = ldp.DiscreteLaplaceRandomizer(1.0, bound=1.0)
        >>> reports = dl.sample(np.full(100_000, 0.3), RandomSource(0).for_request("demo", 0, np.arange(100_000)))
        >>> bool(abs(dl.estimate(reports).mean() - 0.3) < 0.05)  # Var w ≈ 2(2b/ε)² = 8 per report
        True
        """
        return np.asarray(reports, dtype=np.float64)

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        """r²(f(1−f) + Var Z), Var Z of the table, ignoring the clamped tail."""
        k0, f53 = self._rounding(u)
        f = f53 / 2.0**53
        return self.grid**2 * (f * (1 - f) + self._table.variance)



# --- building from a spec (the users' side: ``LocalRandomizer.build``) ---


@register_randomizer("laplace", requestable=False)
def build_laplace(spec: SpecView, query: Query) -> Randomizer:
    """Float ``laplace`` on [−b, b] (b = the query's bound, or 1 for a query bounded by 0)."""
    return LaplaceRandomizer(spec.epsilon, query.bound if query.bound > 0 else 1.0)


@register_randomizer("discrete_laplace", params=("steps",))
def build_discrete_laplace(spec: SpecView, query: Query) -> Randomizer:
    """``discrete_laplace`` on [−b, b]; ``params={"steps": c}`` sets the grid (default ≈ 32ε)."""
    steps = spec.params.get("steps")
    return DiscreteLaplaceRandomizer(spec.epsilon, query.bound if query.bound > 0 else 1.0, None if steps is None else steps)
