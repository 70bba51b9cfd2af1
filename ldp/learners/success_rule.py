"""When does a learner "succeed with probability ≥ 1 − β" at a size? A rule that is not biased low
(issue 28).

The separation sweep used to call a size sufficient when ≥ 19 of 20 seeded trials learned the
target exactly. That rule passes a learner whose true success is 0.90 with probability
Pr[Bin(20, 0.9) ≥ 19] = 0.392 (``pass_probability(0.9, 20, rule=old_rule)``), so the "users needed" it
reports are biased low. The rule here passes a size only when the exact one-sided
Clopper–Pearson lower confidence bound on the success probability (``ldp.core.audit.clopper_pearson``,
the one implementation in the project) is ≥ 1 − β:

    pass(k, t) ⇔ CP_lower(k, t; 1 − α) ≥ 1 − β     (α = 0.05: a 95 % lower confidence bound).

By the exactness of Clopper–Pearson (Clopper & Pearson, Biometrika 26, 1934), a learner whose
true success p < 1 − β passes with probability ≤ α, whatever t: the false-pass rate is stated,
not estimated. The price is trials: with no failure at all the bound is α^{1/t}, so
t ≥ ln α/ln(1 − β) trials are needed before any size can pass (59 at β = α = 0.05;
``trials_needed``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.stats import binom

from ldp.core.audit import clopper_pearson
from ldp.core.errors import ParameterError, require_probability

__all__ = ["success_lower_bound", "passes", "min_successes", "pass_probability", "trials_needed", "old_rule"]


def _count(name: str, value: int, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ParameterError(f"{name} must be an integer ≥ {low}, got {value!r}")
    return int(value)


def success_lower_bound(k: int, t: int, alpha: float = 0.05) -> float:
    """The exact one-sided (1 − α) Clopper–Pearson lower bound on a success probability from k
    successes in t trials (``clopper_pearson(k, t, alpha)[0]``; α = 0.05: the 95 % bound)."""
    t = _count("trials", t, 1)
    k = _count("successes", k)
    if k > t:
        raise ParameterError(f"successes must be ≤ trials = {t}, got {k}")
    a = require_probability("alpha", alpha)
    return clopper_pearson(k, t, alpha=a)[0]


def passes(k: int, t: int, beta: float, alpha: float = 0.05) -> bool:
    """True iff k of t successes show success probability ≥ 1 − β at confidence 1 − α:
    ``success_lower_bound(k, t, α) ≥ 1 − β``. A learner with true success < 1 − β passes
    with probability ≤ α."""
    b = require_probability("beta", beta)
    return success_lower_bound(k, t, alpha) >= 1.0 - b


def min_successes(t: int, beta: float, alpha: float = 0.05) -> int | None:
    """The smallest k with ``passes(k, t, β, α)``, or None when even t of t does not pass
    (too few trials: see ``trials_needed``). The bound increases with k, so this is a bisection."""
    t = _count("trials", t, 1)
    if not passes(t, t, beta, alpha):
        return None
    lo, hi = -1, t  # passes(lo) is False (or lo = −1), passes(hi) is True
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if passes(mid, t, beta, alpha) else (mid, hi)
    return hi


def old_rule(k: int, t: int) -> bool:
    """The rule the sweep used: ≥ 19 of 20 (as a fraction ≥ 0.95). Biased low; kept to show it."""
    return 20 * k >= 19 * t


def pass_probability(p: float, t: int, beta: float = 0.05, alpha: float = 0.05, rule: Callable[[int, int], bool] | None = None) -> float:
    """Exact Pr[a learner of true success p passes] with t trials: Σ_k Bin(k; t, p)·1[rule(k, t)]
    (``rule`` defaults to ``passes`` at β and α)."""
    t = _count("trials", t, 1)
    ks = np.arange(t + 1)
    test = rule if rule is not None else (lambda k, n: passes(k, n, beta, alpha))
    ok = np.array([bool(test(int(k), t)) for k in ks])
    return float(binom.pmf(ks[ok], t, p).sum())


def trials_needed(beta: float, alpha: float = 0.05, true_success: float = 1.0, power: float = 0.9) -> int:
    """The fewest trials t at which a learner of success ``true_success`` (> 1 − β) passes with
    probability ≥ ``power``. With ``true_success`` = 1 that is the smallest t where t of t passes,
    ⌈ln α/ln(1 − β)⌉ (59 at β = 0.05, α = 0.05)."""
    b = require_probability("beta", beta)
    a = require_probability("alpha", alpha)
    if not 1.0 - b < true_success <= 1.0:
        raise ParameterError(f"true_success must be in (1 − β, 1] = ({1 - b:g}, 1], got {true_success!r}")
    t = max(1, math.ceil(math.log(a) / math.log(1 - b) - 1e-9))
    while not passes(t, t, b, a):
        t += 1
    if true_success == 1.0:
        return t
    pw = require_probability("power", power)
    while pass_probability(true_success, t, b, a) < pw:
        if t > 10**6:
            raise ParameterError(f"more than 10^6 trials needed for true_success={true_success} at β={b}")
        t += max(1, t // 50)
    return t
