"""Transparent ε-local randomizers (KLNRS Definitions 4.3 and 4.7).

A ``Randomizer`` maps a query value u = g(z) to a report w. Each one declares ``epsilon``,
samples vectorized over users from per-user randomness, and exposes its exact probabilities
``log_prob(u, w)`` (a log-density for continuous outputs) so that ``ldp.core.audit`` can check
every log-ratio log p(w|u) − log p(w|u′) ≤ ε over its whole input domain.

A ``LocalRandomizer`` is what a user actually runs: a registered query composed with a
randomizer, built from a JSON-able ``RandomizerSpec`` (what the aggregator sends). Privacy holds
for the composition because the randomizer is ε-private over *all* values the query can take,
and the query value is clipped to [−b, b] before randomizing (so a query that exceeded its
declared bound could not break privacy).

Kinds:
- ``binary_rr``   randomized response on a {0,1}-valued query (Warner 1965).
- ``kary_rr``     k-ary generalized randomized response over a query's finite values.
- ``laplace``     g(u) + Lap(2b/ε), the local randomizer of KLNRS Claim 4.1 (replace-one: a
                  single user's value can move by 2b).
- ``discrete_laplace``  Claim 4.1 on a public grid: randomized rounding, two-sided geometric
                  noise, a clamped window — finite, every probability exact, floating-point safe.
- ``pm_rr``       ±b randomized response: outputs ±b(e^ε+1)/(e^ε−1), unbiased for u
                  (Duchi, Jordan & Wainwright 2013); the bounded, light-tailed alternative to Laplace.
- ``record_rr``   every column of the record through k-ary randomized response with ε/width each
                  (basic composition, KLNRS Claim 2.1): the "randomize everything once" protocol.

Floating point: samplers compare a uniform in (0,1) on the 2^-53 grid with float probabilities,
so realised probabilities differ from the declared ones by at most 2^-53 absolute. The Laplace
sampler uses the inverse CDF on floats; its outputs are not snapped to a grid, so the Mironov
(2012) floating-point attack applies to it as to every textbook implementation: its declared
density is exact for the real-valued mechanism, not for the floats it emits. It is kept because it
is the paper's mechanism; for anything that matters use ``discrete_laplace`` (same noise shape,
exact) or ``pm_rr`` (bounded, exact; ``LocalSQOracle``'s default).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import numpy as np

from ldp.core.errors import ParameterError, UnknownKindError, require_epsilon, require_positive_finite
from ldp.core.queries import Query, QuerySpec, make_query
from ldp.core.rng import UserRandomness
from ldp.core.schema import Schema

__all__ = [
    "Randomizer",
    "BinaryRandomizedResponse",
    "KaryRandomizedResponse",
    "LaplaceRandomizer",
    "DiscreteLaplaceRandomizer",
    "PlusMinusRandomizedResponse",
    "RecordRandomizedResponse",
    "Interval",
    "RandomizerSpec",
    "LocalRandomizer",
    "randomizer_kinds",
    "kary_rr_probabilities",
]


@dataclass(frozen=True)
class Interval:
    """A closed real interval [low, high]: the input domain of a randomizer on a bounded query."""

    low: float
    high: float


def _log_keep_other(epsilon: float, k: int) -> tuple[float, float]:
    """log P(keep) and log P(one given other value) for k-ary RR: e^ε/(e^ε+k−1), 1/(e^ε+k−1).

    Computed as −log(1 + (k−1)e^−ε) and −ε − log(1 + (k−1)e^−ε) so the difference is exactly
    representable as ε up to one rounding.
    """
    log_norm = math.log1p((k - 1) * math.exp(-epsilon))
    return -log_norm, -epsilon - log_norm


def kary_rr_probabilities(epsilon: float, k: int | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, q) of k-ary randomized response at ε: keep the value w.p. p = e^ε/(e^ε+k−1), report each
    other value w.p. q = 1/(e^ε+k−1) (vectorized over k). The one place these are computed."""
    log_norm = np.log1p((np.asarray(k) - 1) * math.exp(-epsilon))
    return np.exp(-log_norm), np.exp(-epsilon - log_norm)


class Randomizer(ABC):
    """An ε-local randomizer R: U → W over query values (KLNRS Definition 4.3)."""

    kind: ClassVar[str]
    epsilon: float
    report_dtype: ClassVar[type[np.generic]] = np.float64
    continuous: ClassVar[bool] = False

    @abstractmethod
    def sample(self, inputs: np.ndarray, randomness: UserRandomness) -> np.ndarray:
        """One report per user: inputs[k] is user k's query value."""

    @abstractmethod
    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        """log Pr[R(u) = w] (log-density for continuous W), broadcast over u and w."""

    @abstractmethod
    def input_domain(self) -> np.ndarray | Interval:
        """Every value a user's input can take: a finite array, or an interval."""

    def output_domain(self) -> np.ndarray | None:
        """The finite output set, or None when W is continuous."""
        return None

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        """Per-report unbiased estimates of the input: E[estimate(R(u))] = u."""
        raise NotImplementedError(f"{type(self).__name__} has no unbiased per-report estimator")

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        """Var[estimate(R(u))], the exact per-report variance of the unbiased estimator."""
        raise NotImplementedError(f"{type(self).__name__} has no unbiased per-report estimator")


@dataclass(frozen=True)
class BinaryRandomizedResponse(Randomizer):
    """Randomized response on u ∈ {0, 1}: report u w.p. e^ε/(e^ε+1), else 1 − u.

    Privacy: p(w|u)/p(w|u′) ≤ e^ε exactly (the two probabilities' ratio is e^ε).
    Estimator: (w − q)/(p − q) with p = e^ε/(e^ε+1), q = 1 − p; variance pq/(p − q)^2.
    """

    epsilon: float
    kind: ClassVar[str] = "binary_rr"
    report_dtype: ClassVar[type[np.generic]] = np.uint8

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))

    @property
    def keep_probability(self) -> float:
        return 1.0 / (1.0 + math.exp(-self.epsilon))

    def sample(self, inputs: np.ndarray, randomness: UserRandomness) -> np.ndarray:
        keep = randomness.uniform(0) < self.keep_probability
        u = np.asarray(inputs).astype(np.uint8)
        return np.where(keep, u, 1 - u).astype(np.uint8)

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        log_keep, log_flip = _log_keep_other(self.epsilon, 2)
        return np.where(np.asarray(u) == np.asarray(w), log_keep, log_flip)

    def input_domain(self) -> np.ndarray:
        return np.array([0.0, 1.0])

    def output_domain(self) -> np.ndarray:
        return np.array([0.0, 1.0])

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        p = self.keep_probability
        return (np.asarray(reports, dtype=np.float64) - (1 - p)) / (2 * p - 1)

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        p = self.keep_probability
        return np.broadcast_to(p * (1 - p) / (2 * p - 1) ** 2, np.shape(u)).astype(np.float64)


@dataclass(frozen=True)
class KaryRandomizedResponse(Randomizer):
    """k-ary generalized randomized response over ``categories`` (k ≥ 2 distinct values).

    Report the true category w.p. e^ε/(e^ε+k−1), each other one w.p. 1/(e^ε+k−1). The report
    is the category *value*. Privacy: the largest ratio is e^ε (Kairouz, Oh & Viswanath 2014).
    Estimator of u: the frequency estimator f̂_j = (1[w=c_j] − q)/(p − q) combined as Σ c_j f̂_j.
    """

    epsilon: float
    categories: tuple[float, ...]
    kind: ClassVar[str] = "kary_rr"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        cats = tuple(float(c) for c in self.categories)
        if len(cats) < 2 or len(set(cats)) != len(cats):
            raise ParameterError(f"kary_rr needs k ≥ 2 distinct categories, got k={len(cats)}: {cats[:8]}")
        if any(not math.isfinite(c) for c in cats):
            raise ParameterError(f"kary_rr categories must be finite, got {cats[:8]}")
        object.__setattr__(self, "categories", tuple(sorted(cats)))

    @property
    def k(self) -> int:
        return len(self.categories)

    @property
    def keep_probability(self) -> float:
        return math.exp(_log_keep_other(self.epsilon, self.k)[0])

    def _index(self, values: np.ndarray) -> np.ndarray:
        cats = np.asarray(self.categories)
        idx = np.searchsorted(cats, values)
        idx = np.clip(idx, 0, self.k - 1)
        if not np.array_equal(cats[idx], values):
            raise ParameterError(f"kary_rr: an input is not one of the categories {self.categories[:8]}")
        return idx

    def sample(self, inputs: np.ndarray, randomness: UserRandomness) -> np.ndarray:
        idx = self._index(np.asarray(inputs, dtype=np.float64))
        keep = randomness.uniform(0) < self.keep_probability
        # An other category, uniform over the k−1 that are not the input.
        other = np.minimum((randomness.uniform(1) * (self.k - 1)).astype(np.int64), self.k - 2)
        other = other + (other >= idx)
        return np.asarray(self.categories)[np.where(keep, idx, other)]

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        log_keep, log_other = _log_keep_other(self.epsilon, self.k)
        return np.where(np.asarray(u) == np.asarray(w), log_keep, log_other)

    def input_domain(self) -> np.ndarray:
        return np.asarray(self.categories)

    def output_domain(self) -> np.ndarray:
        return np.asarray(self.categories)

    def frequencies(self, reports: np.ndarray) -> np.ndarray:
        """Unbiased estimates of the fraction of users in each category (KOV 2014)."""
        p = self.keep_probability
        q = (1 - p) / (self.k - 1)
        counts = np.array([(np.asarray(reports) == c).mean() if len(reports) else 0.0 for c in self.categories])
        return (counts - q) / (p - q)

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        p = self.keep_probability
        q = (1 - p) / (self.k - 1)
        cats = np.asarray(self.categories)
        # Σ_j c_j (1[w=c_j] − q)/(p − q) = (w − q Σ c)/(p − q)
        return (np.asarray(reports, dtype=np.float64) - q * cats.sum()) / (p - q)

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        p = self.keep_probability
        q = (1 - p) / (self.k - 1)
        cats = np.asarray(self.categories)
        u = np.asarray(u, dtype=np.float64)
        mean_w = p * u + q * (cats.sum() - u)
        second = p * u**2 + q * ((cats**2).sum() - u**2)
        return (second - mean_w**2) / (p - q) ** 2


@dataclass(frozen=True)
class LaplaceRandomizer(Randomizer):
    """R(u) = u + η, η ~ Lap(2b/ε), for u ∈ [−b, b] (KLNRS Claim 4.1).

    Privacy: log p(w|u) − log p(w|u′) = (|w−u′| − |w−u|)/(2b/ε) ≤ |u−u′|ε/(2b) ≤ ε.
    Estimator: w itself (unbiased), variance 2(2b/ε)^2.
    """

    epsilon: float
    bound: float
    kind: ClassVar[str] = "laplace"
    continuous: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "bound", require_positive_finite("bound b", self.bound))

    @property
    def scale(self) -> float:
        return 2.0 * self.bound / self.epsilon

    def sample(self, inputs: np.ndarray, randomness: UserRandomness) -> np.ndarray:
        centred = randomness.uniform(0) - 0.5  # never exactly 0 on the (k+1/2)·2^-53 grid
        noise = -self.scale * np.sign(centred) * np.log1p(-2.0 * np.abs(centred))
        return np.asarray(inputs, dtype=np.float64) + noise

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        return -math.log(2.0 * self.scale) - np.abs(np.asarray(w, dtype=np.float64) - np.asarray(u, dtype=np.float64)) / self.scale

    def input_domain(self) -> Interval:
        return Interval(-self.bound, self.bound)

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        return np.asarray(reports, dtype=np.float64)

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        return np.broadcast_to(2.0 * self.scale**2, np.shape(u)).astype(np.float64)


@dataclass(frozen=True)
class DiscreteLaplaceRandomizer(Randomizer):
    """Laplace on a grid, with every output probability exact: the floating-point-safe version
    of Claim 4.1 (Mironov 2012; Canonne, Kamath & Steinke 2020; Google's and OpenDP's practice).

    For u ∈ [−b, b], grid step r = b/c with c = ``steps`` (a power of two, ≈ 32ε by default, so
    r ≈ 1/64 of the noise scale 2b/ε):

    1. randomized rounding: k = ⌊u/r⌋ + Bernoulli(frac(u/r)), so E[r·k] = u and |k| ≤ c;
    2. noise: Z two-sided geometric, Pr[Z = z] = (1−α)/(1+α)·α^|z| with α = e^{−ε/(2c)};
    3. report w = r·clamp(k + Z, −W, W), W = c + ⌈20·2c/ε⌉ (clamping is post-processing).

    Privacy: for any k, k′ ∈ [−c, c] and every m ∈ [−W, W], Pr[m | k]/Pr[m | k′] ≤ α^{−|k−k′|} ≤ e^ε
    (interior: the geometric ratio; the two ends: tails α^{W∓k}/(1+α)), and a mixture over k
    (step 1) cannot exceed its worst component; b on the grid makes the bound tight at u = ±b.
    The report set {r·m : |m| ≤ W} is the same for every input, and the sampler
    (G = ⌊ln U / ln α⌋ per geometric) reaches every point of it: |Z| up to 37/(−ln α) ≥
    2c + 20·2c/ε while ε ≤ 16. So unlike float Laplace, no report reveals which inputs could
    have produced it.

    Estimator: w, unbiased up to the clamped tail (mass ≤ e^−20 ≈ 2·10^−9 per side).
    """

    epsilon: float
    bound: float
    steps: int | None = None  # c, a power of two; None: 2^round(log2(32ε)) within [1, 2^20]
    kind: ClassVar[str] = "discrete_laplace"

    MAX_EPSILON: ClassVar[float] = 16.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "bound", require_positive_finite("bound b", self.bound))
        if self.epsilon > self.MAX_EPSILON:
            raise ParameterError(f"discrete_laplace supports ε ≤ {self.MAX_EPSILON:g} (its sampler must reach its whole report window); got ε = {self.epsilon!r}")
        if self.steps is None:
            object.__setattr__(self, "steps", 2 ** min(20, max(0, round(math.log2(32.0 * self.epsilon)))))
        c = self.steps
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 1 <= c <= 2**20 or c & (c - 1):
            raise ParameterError(f"discrete_laplace: steps must be a power of two in [1, 2^20], got {c!r}")

    @property
    def grid(self) -> float:
        """r = b/c: the report spacing."""
        return self.bound / self.steps  # type: ignore[operator]

    @property
    def alpha(self) -> float:
        return math.exp(-self.epsilon / (2 * self.steps))  # type: ignore[operator]

    @property
    def window(self) -> int:
        """W: reports are r·m for integers |m| ≤ W."""
        return self.steps + math.ceil(20.0 * 2 * self.steps / self.epsilon)  # type: ignore[operator]

    def _rounding(self, u: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        """(k0, f): u/r = k0 + f with 0 ≤ f < 1 (k0 clipped into [−c, c])."""
        x = np.clip(np.asarray(u, dtype=np.float64) / self.grid, -self.steps, self.steps)  # type: ignore[operator]
        k0 = np.minimum(np.floor(x), self.steps - 1)  # u = +b: k0 = c − 1 with f = 1, so k0 + 1 ≤ c
        return k0, x - k0

    def _log_pmf_given_k(self, k: np.ndarray, m: np.ndarray) -> np.ndarray:
        log_a = -self.epsilon / (2 * self.steps)  # type: ignore[operator]
        W = self.window
        interior = math.log1p(-self.alpha) - math.log1p(self.alpha) + np.abs(m - k) * log_a
        upper = (W - k) * log_a - math.log1p(self.alpha)
        lower = (W + k) * log_a - math.log1p(self.alpha)
        return np.where(m >= W, upper, np.where(m <= -W, lower, interior))

    def sample(self, inputs: np.ndarray, randomness: UserRandomness) -> np.ndarray:
        k0, f = self._rounding(inputs)
        k = k0 + (randomness.uniform(0) < f)
        log_a = math.log(self.alpha)
        g1 = np.floor(np.log(randomness.uniform(1)) / log_a)
        g2 = np.floor(np.log(randomness.uniform(2)) / log_a)
        m = np.clip(k + g1 - g2, -self.window, self.window)
        return m * self.grid  # exact: integers times a power of two

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        k0, f = self._rounding(u)
        m = np.rint(np.asarray(w, dtype=np.float64) / self.grid)  # type: ignore[operator]
        on_grid = (np.abs(m) <= self.window) & (m * self.grid == np.asarray(w, dtype=np.float64))
        low = self._log_pmf_given_k(k0, m)
        high = self._log_pmf_given_k(k0 + 1, m)
        with np.errstate(divide="ignore"):
            mixed = np.logaddexp(np.log1p(-f) + low, np.log(f) + high)
        return np.where(on_grid, mixed, -np.inf)

    def input_domain(self) -> np.ndarray:
        """Every grid point of [−b, b] and every midpoint: the loss is a mixture of grid-point
        losses, so these (the end points of each mixing segment, and one interior point each)
        contain the worst case."""
        c = self.steps
        return np.arange(-2 * c, 2 * c + 1) * (self.grid / 2)  # type: ignore[operator]

    def output_domain(self) -> np.ndarray:
        return np.arange(-self.window, self.window + 1) * self.grid  # type: ignore[operator]

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        return np.asarray(reports, dtype=np.float64)

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        """r²(f(1−f) + 2α/(1−α)²), ignoring the clamped tail."""
        _, f = self._rounding(u)
        a = self.alpha
        return self.grid**2 * (f * (1 - f) + 2 * a / (1 - a) ** 2)


@dataclass(frozen=True)
class PlusMinusRandomizedResponse(Randomizer):
    """±b randomized response for u ∈ [−b, b] (Duchi, Jordan & Wainwright 2013).

    Output ±B with B = b(e^ε+1)/(e^ε−1); Pr[+B | u] = 1/2 + u(e^ε−1)/(2b(e^ε+1)).
    Privacy: the probabilities range over [1/(e^ε+1), e^ε/(e^ε+1)], so every ratio ≤ e^ε.
    Unbiased: E[w] = u; variance B^2 − u^2 ≤ B^2 (bounded reports, sub-Gaussian averages).
    """

    epsilon: float
    bound: float
    kind: ClassVar[str] = "pm_rr"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "bound", require_positive_finite("bound b", self.bound))

    @property
    def magnitude(self) -> float:
        """B = b(e^ε+1)/(e^ε−1), written with expm1 for small ε."""
        return self.bound * (math.expm1(self.epsilon) + 2.0) / math.expm1(self.epsilon)

    def _p_plus(self, u: np.ndarray | float) -> np.ndarray:
        return 0.5 + np.asarray(u, dtype=np.float64) / (2.0 * self.magnitude)

    def sample(self, inputs: np.ndarray, randomness: UserRandomness) -> np.ndarray:
        u = np.clip(np.asarray(inputs, dtype=np.float64), -self.bound, self.bound)
        plus = randomness.uniform(0) < self._p_plus(u)
        return np.where(plus, self.magnitude, -self.magnitude)

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        p = self._p_plus(u)
        w = np.asarray(w, dtype=np.float64)
        return np.where(w > 0, np.log(p), np.log1p(-p))

    def input_domain(self) -> Interval:
        return Interval(-self.bound, self.bound)

    def output_domain(self) -> np.ndarray:
        return np.array([-self.magnitude, self.magnitude])

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        return np.asarray(reports, dtype=np.float64)

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        return self.magnitude**2 - np.asarray(u, dtype=np.float64) ** 2


@dataclass(frozen=True)
class RecordRandomizedResponse(Randomizer):
    """Every column j of the record through k_j-ary RR with ε/width (basic composition).

    Input and output: rows of ``width`` integers, column j in {low_j, low_j+step_j, ..., high_j}. Privacy: a record
    pair differs in at most all columns, each contributing ≤ ε/width (KLNRS Claim 2.1), so the
    total log-ratio is ≤ ε. ``log_prob`` sums the per-column log-probabilities.
    """

    epsilon: float
    low: tuple[int, ...]
    high: tuple[int, ...]
    step: tuple[int, ...] | None = None  # None: all 1
    kind: ClassVar[str] = "record_rr"
    report_dtype: ClassVar[type[np.generic]] = np.int16

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        if len(self.low) != len(self.high) or not self.low:
            raise ParameterError("record_rr needs equal-length, non-empty low and high bounds")
        if any(h <= lo for lo, h in zip(self.low, self.high)):
            raise ParameterError("record_rr: every column needs high > low")
        if self.step is None:
            object.__setattr__(self, "step", (1,) * len(self.low))
        if len(self.step) != len(self.low) or any(s < 1 or (h - lo) % s for lo, h, s in zip(self.low, self.high, self.step)):  # type: ignore[arg-type]
            raise ParameterError("record_rr: every column needs a step ≥ 1 that divides high − low")

    @property
    def width(self) -> int:
        return len(self.low)

    @property
    def column_epsilon(self) -> float:
        return self.epsilon / self.width

    def _k(self) -> np.ndarray:
        return (np.asarray(self.high, dtype=np.int64) - np.asarray(self.low, dtype=np.int64)) // self._step() + 1

    def _step(self) -> np.ndarray:
        return np.asarray(self.step, dtype=np.int64)

    def column_values(self, column: int) -> np.ndarray:
        return np.arange(self.low[column], self.high[column] + 1, self._step()[column])

    def sample(self, inputs: np.ndarray, randomness: UserRandomness) -> np.ndarray:
        x = np.asarray(inputs, dtype=np.int64)
        low = np.asarray(self.low, dtype=np.int64)
        step = self._step()
        k = self._k()
        keep_p, _ = kary_rr_probabilities(self.column_epsilon, k)
        out = np.empty_like(x)
        for j in range(self.width):  # two draws per column: keep?, which other value
            keep = randomness.uniform(2 * j) < keep_p[j]
            idx = (x[:, j] - low[j]) // step[j]
            other = np.minimum((randomness.uniform(2 * j + 1) * (k[j] - 1)).astype(np.int64), k[j] - 2)
            other = other + (other >= idx)
            out[:, j] = np.where(keep, idx, other) * step[j] + low[j]
        return out.astype(self.report_dtype)

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        u = np.asarray(u)
        w = np.asarray(w)
        k = self._k()
        log_norm = np.log1p((k - 1) * math.exp(-self.column_epsilon))
        per_column = np.where(u == w, -log_norm, -self.column_epsilon - log_norm)
        return per_column.sum(axis=-1)

    def input_domain(self) -> np.ndarray:
        sizes = self._k()
        if int(np.prod(sizes)) > 4096:
            raise ParameterError(f"record_rr: the record domain has {int(np.prod(sizes))} > 4096 points; enumerate a smaller schema")
        grids = np.meshgrid(*[self.column_values(j) for j in range(self.width)], indexing="ij")
        return np.stack([g.ravel() for g in grids], axis=1)

    def output_domain(self) -> np.ndarray:
        return self.input_domain()

    def column_frequencies(self, reports: np.ndarray, column: int) -> np.ndarray:
        """Unbiased estimates of the fraction of users with each value of one column."""
        k = int(self._k()[column])
        p, q = kary_rr_probabilities(self.column_epsilon, k)
        values = self.column_values(column)
        counts = (np.asarray(reports)[:, column][:, None] == values[None, :]).mean(axis=0)
        return (counts - q) / (p - q)


# --- specs: what travels on the wire, and how a user builds what it runs ---


@dataclass(frozen=True)
class RandomizerSpec:
    """A randomizer by kind, query and ε; JSON-able. The *client* derives the ε it charges
    from this spec through the randomizer it builds, never from a separate field."""

    kind: str
    query: QuerySpec
    epsilon: float
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "query": self.query.to_json(), "epsilon": self.epsilon, "params": dict(self.params)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RandomizerSpec":
        try:
            return cls(str(data["kind"]), QuerySpec.from_json(data["query"]), float(data["epsilon"]), dict(data.get("params", {})))
        except (KeyError, TypeError, ValueError) as exc:
            raise ParameterError(f"malformed randomizer spec {data!r}: {exc}") from None


def _build_binary(spec: RandomizerSpec, query: Query) -> Randomizer:
    values = query.values()
    if values is None or not set(values.tolist()) <= {0.0, 1.0}:
        raise ParameterError(f"binary_rr needs a {{0,1}}-valued query; {spec.query.name!r} takes values {None if values is None else values.tolist()[:8]}")
    return BinaryRandomizedResponse(spec.epsilon)


def _build_kary(spec: RandomizerSpec, query: Query) -> Randomizer:
    values = query.values()
    if values is None:
        raise ParameterError(f"kary_rr needs a query with a small finite set of values; {spec.query.name!r} has none")
    if len(values) < 2:
        values = np.array([values[0], values[0] + 1.0])  # a constant query: add a dummy category
    return KaryRandomizedResponse(spec.epsilon, tuple(values.tolist()))


def _build_laplace(spec: RandomizerSpec, query: Query) -> Randomizer:
    return LaplaceRandomizer(spec.epsilon, query.bound if query.bound > 0 else 1.0)


def _build_discrete_laplace(spec: RandomizerSpec, query: Query) -> Randomizer:
    steps = spec.params.get("steps")
    return DiscreteLaplaceRandomizer(spec.epsilon, query.bound if query.bound > 0 else 1.0, None if steps is None else steps)


def _build_pm(spec: RandomizerSpec, query: Query) -> Randomizer:
    return PlusMinusRandomizedResponse(spec.epsilon, query.bound if query.bound > 0 else 1.0)


def _build_record(spec: RandomizerSpec, query: Query) -> Randomizer:
    if query.name != "record":
        raise ParameterError(f"record_rr randomizes whole records; use the 'record' query, got {spec.query.name!r}")
    low, high, step = query.schema.column_bounds()
    return RecordRandomizedResponse(spec.epsilon, tuple(low.tolist()), tuple(high.tolist()), tuple(step.tolist()))


_BUILDERS = {
    "binary_rr": _build_binary,
    "kary_rr": _build_kary,
    "laplace": _build_laplace,
    "discrete_laplace": _build_discrete_laplace,
    "pm_rr": _build_pm,
    "record_rr": _build_record,
}


def randomizer_kinds() -> list[str]:
    return sorted(_BUILDERS)


@dataclass(frozen=True)
class LocalRandomizer:
    """R = randomizer ∘ query: the ε-local randomizer a user runs on its own record.

    Built and validated on the user's side from a ``RandomizerSpec``; ``epsilon`` is the
    randomizer's declared ε, which is what the user's ledger charges.
    """

    spec: RandomizerSpec
    query: Query
    randomizer: Randomizer

    @classmethod
    def build(cls, spec: RandomizerSpec, schema: Schema) -> "LocalRandomizer":
        epsilon = require_epsilon(spec.epsilon)
        try:
            builder = _BUILDERS[spec.kind]
        except KeyError:
            raise UnknownKindError(f"unknown randomizer kind {spec.kind!r}; registered kinds are {randomizer_kinds()}") from None
        query = make_query(spec.query, schema)
        spec = RandomizerSpec(spec.kind, spec.query, epsilon, spec.params)
        return cls(spec, query, builder(spec, query))

    @property
    def epsilon(self) -> float:
        return self.randomizer.epsilon

    @property
    def report_dtype(self) -> type[np.generic]:
        return self.randomizer.report_dtype

    @property
    def report_width(self) -> int:
        return self.query.width

    def inputs(self, records: np.ndarray) -> np.ndarray:
        """The randomizer's inputs g(z_i), clipped to [−b, b] for bounded-input randomizers:
        privacy must not depend on the query keeping its word."""
        values = self.query.evaluate(records)
        if isinstance(self.randomizer, (LaplaceRandomizer, DiscreteLaplaceRandomizer, PlusMinusRandomizedResponse)):
            values = np.clip(values, -self.randomizer.bound, self.randomizer.bound)
        return values

    def apply(self, records: np.ndarray, randomness: UserRandomness) -> np.ndarray:
        """Each user's report: R(z_i) for every row of ``records``."""
        return self.randomizer.sample(self.inputs(records), randomness).astype(self.report_dtype, copy=False)
