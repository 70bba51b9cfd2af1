"""Privacy audits of ε-local randomizers: exact and statistical.

``verify_exact(R)`` computes max over input pairs (u, u′) and outputs w of
log p(w|u) − log p(w|u′) from the randomizer's *declared* exact probabilities and passes iff it
is ≤ ε·(1 + 1e−12) (the relative tolerance absorbs one or two float roundings of log/exp; any
real violation we test for is ≥ 1e−3 relative). Finite domains are enumerated completely. For an
interval input domain with continuous outputs (Laplace), it uses the randomizer's analytic
supremum **and** a dense grid check of the density ratio, and passes only if both do.

The statistical audit checks the *sampler* against what is declared (KLNRS Def. 4.3 is about
what the code does, not what it says):

- ``epsilon_lower_bound``: from N reports on input u and N on u′, count a distinguishing event E
  (by default the Neyman–Pearson optimal one computed from the exact probabilities) and return
  ε_lcb = ln(CP_lower(k₁/N) / CP_upper(k₂/N)) with Clopper–Pearson bounds at level α. If the
  sampler is ε-private, Pr[ε_lcb > ε] ≤ α (the false-alarm rate).
- ``chi_square_fit``: χ² goodness of fit of ``sample`` against ``log_prob``; the statistic is
  compared with the α-quantile of χ²_df.

These follow the practices of LDP-Auditor and DP-Sniper (see shared/reference/privacy_testing_practices.md §4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import stats

from ldp.core.randomizers import Interval, LaplaceRandomizer, Randomizer
from ldp.core.rng import RandomSource

__all__ = [
    "ExactAudit",
    "verify_exact",
    "RELATIVE_TOLERANCE",
    "clopper_pearson",
    "EpsilonAudit",
    "epsilon_lower_bound",
    "audit_epsilon",
    "ChiSquareAudit",
    "chi_square_fit",
    "sample_reports",
]

RELATIVE_TOLERANCE = 1e-12
GRID_INPUTS = 129
GRID_OUTPUTS = 4001


@dataclass(frozen=True)
class ExactAudit:
    """The largest privacy loss found and where: log p(w|u) − log p(w|u′) at (u, u′, w)."""

    epsilon: float
    max_log_ratio: float
    argmax: tuple[object, object, object]
    method: str
    normalization_error: float = 0.0  # max_u |Σ_w p(w|u) − 1| over finite outputs

    @property
    def passed(self) -> bool:
        """Every log-ratio ≤ ε (relative tolerance 1e−12) and every p(·|u) sums to 1 (±1e−9)."""
        return self.max_log_ratio <= self.epsilon * (1.0 + RELATIVE_TOLERANCE) and self.normalization_error <= 1e-9


def _log_prob_matrix(R: Randomizer, inputs: np.ndarray, outputs: np.ndarray) -> np.ndarray:
    if inputs.ndim == 2:  # record randomizers: rows are inputs and outputs
        return np.stack([R.log_prob(inputs, w[None, :]) for w in outputs], axis=1)
    return np.asarray(R.log_prob(inputs[:, None], outputs[None, :]), dtype=np.float64)  # (inputs, outputs)


def _normalization_error(R: Randomizer, inputs: np.ndarray, outputs: np.ndarray) -> float:
    return float(np.abs(np.exp(_log_prob_matrix(R, inputs, outputs)).sum(axis=1) - 1.0).max())


def _max_ratio_finite(R: Randomizer, inputs: np.ndarray, outputs: np.ndarray) -> tuple[float, tuple[object, object, object]]:
    logp = _log_prob_matrix(R, inputs, outputs)
    hi, lo = logp.argmax(axis=0), logp.argmin(axis=0)
    spread = logp[hi, np.arange(logp.shape[1])] - logp[lo, np.arange(logp.shape[1])]
    j = int(spread.argmax())
    return float(spread[j]), (_item(inputs[hi[j]]), _item(inputs[lo[j]]), _item(outputs[j]))


def _item(v: np.ndarray | float) -> object:
    arr = np.asarray(v)
    return arr.item() if arr.ndim == 0 else tuple(arr.tolist())


def verify_exact(R: Randomizer) -> ExactAudit:
    """Exact privacy-loss check of a randomizer over its whole input domain (see module doc)."""
    domain = R.input_domain()
    outputs = R.output_domain()
    if isinstance(domain, Interval):
        inputs = np.linspace(domain.low, domain.high, GRID_INPUTS)
        if outputs is not None:
            # Finite outputs with probabilities affine (hence monotone) in u: the grid contains
            # the endpoints, where the extremes are, so this is exact.
            ratio, arg = _max_ratio_finite(R, inputs, outputs)
            return ExactAudit(
                R.epsilon, ratio, arg, "interval inputs (endpoints included) × finite outputs", _normalization_error(R, inputs, outputs)
            )
        spread = max(abs(domain.low), abs(domain.high))
        scale = getattr(R, "scale", spread)
        ws = np.linspace(domain.low - 12 * scale, domain.high + 12 * scale, GRID_OUTPUTS)
        grid_ratio, arg = _max_ratio_finite(R, inputs, ws)
        analytic = _analytic_supremum(R, domain)
        ratio = max(grid_ratio, analytic)
        return ExactAudit(R.epsilon, ratio, arg, f"analytic supremum {analytic:.6g}; dense grid {grid_ratio:.6g}")
    assert outputs is not None, "a finite input domain needs a finite output domain"
    inputs, outs = np.asarray(domain), np.asarray(outputs)
    ratio, arg = _max_ratio_finite(R, inputs, outs)
    return ExactAudit(R.epsilon, ratio, arg, "full enumeration", _normalization_error(R, inputs, outs))


def _analytic_supremum(R: Randomizer, domain: Interval) -> float:
    """sup log-ratio for translation families with Laplace density: |u − u′|max / scale."""
    if isinstance(R, LaplaceRandomizer):
        return (domain.high - domain.low) / R.scale
    # Other continuous randomizers must declare one; none exist yet.
    raise NotImplementedError(f"no analytic privacy-loss supremum for {type(R).__name__}")


# --- statistical audit ---


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Two one-sided (1 − α) Clopper–Pearson bounds on a binomial proportion."""
    lower = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    upper = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return lower, upper


def sample_reports(R: Randomizer, u: float | np.ndarray, n: int, seed: int, request: int) -> np.ndarray:
    """n reports of R on the same input u, one per simulated user, from per-user randomness."""
    users = np.arange(n, dtype=np.int64)
    randomness = RandomSource(seed).for_request("audit", request, users)
    inputs = np.repeat(np.asarray(u)[None, ...], n, axis=0) if np.ndim(u) else np.full(n, float(u))
    return R.sample(inputs, randomness)


@dataclass(frozen=True)
class EpsilonAudit:
    epsilon: float
    epsilon_lower_bound: float
    hits_u: int
    hits_u_prime: int
    n: int
    alpha: float

    @property
    def passed(self) -> bool:
        """True unless the samples prove (at level α) that the privacy loss exceeds ε."""
        return self.epsilon_lower_bound <= self.epsilon


def epsilon_lower_bound(k1: int, k2: int, n: int, alpha: float) -> float:
    """ε_lcb = ln(CP_lower(k1/n) / CP_upper(k2/n)); −inf when k1 = 0."""
    lower1, _ = clopper_pearson(k1, n, alpha)
    _, upper2 = clopper_pearson(k2, n, alpha)
    return -math.inf if lower1 == 0.0 else math.log(lower1 / upper2)


def best_event(R: Randomizer, u: float, u_prime: float) -> Callable[[np.ndarray], np.ndarray]:
    """The Neyman–Pearson event for (u, u′): the outputs with the largest declared ratio."""
    outputs = R.output_domain()
    if outputs is not None:
        ratio = R.log_prob(u, outputs) - R.log_prob(u_prime, outputs)
        chosen = outputs[ratio >= ratio.max() - 1e-12]
        return lambda w: np.isin(w, chosen)
    # Laplace-type: the ratio is maximal (and flat) beyond u on the side away from u′.
    if u >= u_prime:
        return lambda w: np.asarray(w) >= u
    return lambda w: np.asarray(w) <= u


def audit_epsilon(
    R: Randomizer,
    u: float,
    u_prime: float,
    n: int = 100_000,
    alpha: float = 1e-6,
    seed: int = 0,
    event: Callable[[np.ndarray], np.ndarray] | None = None,
) -> EpsilonAudit:
    """Statistical lower bound on R's ε from n samples on u and n on u′ (false alarm ≤ α)."""
    event = event or best_event(R, u, u_prime)
    k1 = int(np.sum(event(sample_reports(R, u, n, seed, 1))))
    k2 = int(np.sum(event(sample_reports(R, u_prime, n, seed, 2))))
    return EpsilonAudit(R.epsilon, epsilon_lower_bound(k1, k2, n, alpha), k1, k2, n, alpha)


@dataclass(frozen=True)
class ChiSquareAudit:
    statistic: float
    df: int
    critical: float
    alpha: float

    @property
    def passed(self) -> bool:
        return self.statistic <= self.critical


def chi_square_fit(R: Randomizer, u: float, n: int = 100_000, alpha: float = 1e-6, seed: int = 0) -> ChiSquareAudit:
    """χ² goodness of fit of n samples of R(u) against exp(log_prob(u, ·)).

    Finite outputs: one cell per output. Continuous outputs: 40 cells between the 0.5 % and
    99.5 % points plus two tail cells, cell probabilities by numerical integration of the density.
    Cells with expected count < 5 are merged into their neighbour.
    """
    w = sample_reports(R, u, n, seed, 3)
    outputs = R.output_domain()
    if outputs is not None:
        probs = np.exp(R.log_prob(u, outputs))
        observed = np.array([np.sum(w == o) for o in outputs], dtype=np.float64)
    else:
        scale = getattr(R, "scale", 1.0)
        edges = np.linspace(u - 5 * scale, u + 5 * scale, 41)
        fine = np.linspace(edges[0], edges[-1], 40 * 400 + 1)
        density = np.exp(R.log_prob(u, fine))
        cdf = np.concatenate([[0.0], np.cumsum((density[1:] + density[:-1]) / 2 * np.diff(fine))])
        inner = np.diff(cdf[::400])
        tail = (1.0 - inner.sum()) / 2
        probs = np.concatenate([[tail], inner, [tail]])
        observed = np.histogram(w, bins=np.concatenate([[-np.inf], edges, [np.inf]]))[0].astype(np.float64)
    expected = probs * n
    observed, expected = _merge_small(observed, expected)
    stat = float(np.sum((observed - expected) ** 2 / expected))
    df = len(expected) - 1
    return ChiSquareAudit(stat, df, float(stats.chi2.isf(alpha, df)), alpha)


def _merge_small(observed: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    obs, exp = list(observed), list(expected)
    k = 0
    while k < len(exp) and len(exp) > 2:
        if exp[k] < 5:
            j = k + 1 if k + 1 < len(exp) else k - 1
            exp[j] += exp[k]
            obs[j] += obs[k]
            del exp[k], obs[k]
            k = 0
        else:
            k += 1
    return np.array(obs), np.array(exp)
