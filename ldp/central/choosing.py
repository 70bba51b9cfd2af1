"""The Choosing Mechanism (BNS §4.1, Fig. 8, Lemmas 4.4–4.5) for k-bounded-growth qualities.

    1. best = max_f q(S,f) + Lap(4/ε);  if best < α·m/2: return ⊥
    2. G(S) = {f : q(S,f) ≥ 1};  return ExpMech(ε/2) over G(S)     (Pr ∝ exp(ε·q/4))

q is *k-bounded-growth* (q(∅,·) = 0, adding one element raises at most k qualities by exactly 1), e.g.
``q(S,x) = #occurrences of x`` (k = 1). Only solutions with positive quality are ever output, so the cost
depends on k·m, not on the size of the solution set.

**Privacy is conditional on the sample size** (Lemma 4.4): the mechanism is (ε,δ)-DP only when
``m ≥ (16/(αε))·ln(16k/(αεδ))``. :func:`choosing_mechanism` refuses smaller m with a ``ValueError`` that
gives the minimum. (Exact δ below the minimum is far above the target, see ``tests/central/test_mechanisms.py``;
the law the sampler really emits is audited exactly in ``tests/central/test_choosing_exact.py``.)
Utility (Lemma 4.5): for ``m ≥ (16/(αε))·ln(16k/(αβεδ))`` the output is α-good (q ≥ opt − αm) w.p. ≥ 1−β.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ldp.central.laplace_mechanism import laplace_cdf
from ldp.core.errors import require_epsilon, require_integer, require_probability
from ldp.core.exponential_mechanism import exponential_probabilities, gumbel_argmax

__all__ = [
    "choosing_min_sample_size",
    "choosing_utility_sample_size",
    "choosing_distribution",
    "choosing_mechanism",
]


def choosing_min_sample_size(alpha: float, epsilon: float, delta: float, k: int = 1) -> int:
    """⌈(16/(αε))·ln(16k/(αεδ))⌉: the smallest m for which Lemma 4.4 gives (ε,δ)-DP."""
    a = require_probability("alpha", alpha, high=0.5)
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    kk = require_integer("k", k, 1)
    return math.ceil(16.0 / (a * eps) * math.log(16.0 * kk / (a * eps * dlt)))


def choosing_utility_sample_size(alpha: float, beta: float, epsilon: float, delta: float, k: int = 1) -> int:
    """⌈(16/(αε))·ln(16k/(αβεδ))⌉: sample size of Lemma 4.5 (α-good w.p. ≥ 1−β)."""
    b = require_probability("beta", beta, high=0.5)
    a = require_probability("alpha", alpha, high=0.5)
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    kk = require_integer("k", k, 1)
    return math.ceil(16.0 / (a * eps) * math.log(16.0 * kk / (a * b * eps * dlt)))


def _require_sample_size(m: int, alpha: float, epsilon: float, delta: float, k: int) -> None:
    need = choosing_min_sample_size(alpha, epsilon, delta, k)
    if m < need:
        raise ValueError(
            f"Choosing mechanism needs m ≥ {need} for (ε={epsilon:g}, δ={delta:g})-privacy with "
            f"α={alpha:g}, k={k} (BNS Lemma 4.4: m ≥ (16/(αε))·ln(16k/(αεδ))); got m={m}"
        )


def choosing_distribution(
    scores: ArrayLike, m: int, alpha: float, epsilon: float
) -> tuple[float, np.ndarray]:
    """Exact output distribution ``(Pr[⊥], Pr[f] for each f)`` — the definition, for exact privacy checks.

    ``scores`` are the qualities of the enumerated solutions (solutions with q ≤ 0 get probability 0).
    This analysis helper does *not* enforce the minimum sample size.
    """
    eps = require_epsilon(epsilon)
    a = require_probability("alpha", alpha, high=0.5)
    q = np.asarray(scores, dtype=np.float64).ravel()
    best = float(q.max()) if q.size else 0.0
    best = max(best, 0.0)
    p_bot = float(laplace_cdf(a * m / 2.0 - best, 4.0 / eps))
    probs = np.zeros(q.size)
    good = q >= 1
    if np.any(good):
        probs[good] = (1.0 - p_bot) * exponential_probabilities(q[good], eps / 2.0)
    else:
        p_bot = 1.0  # G(S) empty: nothing to choose (only possible when the max quality is 0)
    return p_bot, probs


def choosing_mechanism(
    scores: ArrayLike,
    m: int,
    alpha: float,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    k: int = 1,
) -> int | None:
    """Run the Choosing Mechanism; returns an index into ``scores`` or ``None`` (⊥).

    ``scores``: the qualities of (at least) every solution with q(S,f) ≥ 1, for a k-bounded-growth q on a
    database of ``m`` elements. Privacy: (ε,δ)-DP (BNS Lemma 4.4) — raises ``ValueError`` if ``m`` is below
    ``choosing_min_sample_size(alpha, epsilon, delta, k)``.
    """
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    a = require_probability("alpha", alpha, high=0.5)
    kk = require_integer("k", k, 1)
    mm = require_integer("m", m, 1)
    _require_sample_size(mm, a, eps, dlt, kk)
    q = np.asarray(scores, dtype=np.float64).ravel()
    best = max(float(q.max()) if q.size else 0.0, 0.0)
    if best + float(rng.laplace(0.0, 4.0 / eps)) < a * mm / 2.0:
        return None
    good = np.flatnonzero(q >= 1)
    if good.size == 0:
        return None
    j = gumbel_argmax(eps / 4.0 * q[good], rng)  # ExpMech at ε/2: Pr ∝ exp((ε/2)·q/2)
    return int(good[j])
