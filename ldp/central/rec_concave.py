"""RecConcave — private solution of quasi-concave promise problems (BNS §3.3, Fig. 5, Thm 3.15).

Input: a sensitivity-1 quality ``Q`` on the solutions {0,…,T} (dense numpy array of length T+1), a
promise ``r``, approximation ``α`` and a recursion bound ``N``. *If* Q is quasi-concave
(Q(ℓ) ≥ min{Q(i), Q(j)} for i ≤ ℓ ≤ j, Def 3.6) and max Q ≥ r, the output k has Q(k) ≥ (1−α)r w.h.p.;
privacy holds on every input.

Steps (reference spec M6, [RECON-H]):

1. T ≤ 32 or N = 1: exponential mechanism (ε) over {0..T}.
2. pad to T' = next power of 2 with Q(i) = min{0, Q(T)};
3. L(j) = max over length-2^j windows of the window minimum (j = 0..log T'), L(log T' + 1) = min{0, L(log T')};
4. q(j) = min{L(j) − (1−α)r, r − L(j+1)} (quasi-concave, sensitivity 1; Claim 3.13);
5./6. K = 2^k with k = RecConcave(q, promise αr/2, approximation 1/4, N−1);
7.–9. two partitions of [0,T'] into length-8K intervals (the second shifted by 4K); A_dist(ε,δ) on each
   with u(I) = max_{i∈I} Q(i);
10. [ENG] both ⊥ ⇒ uniform index in [0,T] (data-independent);
11. exponential mechanism (ε) over the indices of the chosen intervals (∩ [0,T]).

Privacy (Lemma 3.12): each level uses ≤ 3 mechanisms at (ε,δ) ⇒ **(3Nε, 3Nδ)-DP** overall (basic
composition; N is the hard cap, accounted whatever depth is actually used).
Utility (Thm 3.15 [RECON-M]): if max Q ≥ r ≥ 8^N·(4/(αε))·(ln(32/(βδ)) + log^{⌈N⌉}T), then Q(out) ≥ (1−α)r
except with probability ≤ 2βN.

Dense implementation: O(T log T) time and O(T) memory (practical for T ≤ 2^22).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ldp.central.stability import a_dist, a_dist_pass_probability, top_two
from ldp.core.errors import ParameterError, require_epsilon, require_integer, require_probability
from ldp.core.exponential_mechanism import exponential_mechanism, exponential_probabilities

__all__ = [
    "BASE_CASE_SIZE",
    "window_max_min",
    "recursive_quality",
    "interval_partitions",
    "rec_concave",
    "rec_concave_distribution",
    "rec_concave_levels",
    "rec_concave_promise",
    "rec_concave_parameters",
    "iterated_log2_ceil",
    "is_quasi_concave",
]

BASE_CASE_SIZE: int = 32
"""Step 1: the exponential mechanism is used directly when T ≤ 32 [RECON-H]."""


def iterated_log2_ceil(T: int, k: int) -> int:
    """log^{⌈k⌉}(T): k-fold iterate of ⌈log₂ ·⌉ (so log^{⌈1⌉}(2^d) = d)."""
    v = T
    for _ in range(k):
        v = max(0, math.ceil(math.log2(v))) if v > 1 else 0
    return v


def is_quasi_concave(Q: ArrayLike) -> bool:
    """Def 3.6: Q(ℓ) ≥ min{Q(i), Q(j)} for all i ≤ ℓ ≤ j (prefix max / suffix max test)."""
    q = np.asarray(Q, dtype=np.float64)
    pre = np.maximum.accumulate(q)
    suf = np.maximum.accumulate(q[::-1])[::-1]
    return bool(np.all(q >= np.minimum(pre, suf) - 1e-12))


def window_max_min(Q: np.ndarray) -> np.ndarray:
    """L(j) for j = 0..log2(len(Q)−1) (len(Q)−1 must be a power of two): max_a min Q[a : a+2^j]."""
    Tp = Q.size - 1
    levels = int(round(math.log2(Tp))) if Tp > 0 else 0
    L = np.empty(levels + 1)
    mins = Q.astype(np.float64).copy()
    L[0] = mins.max()
    for j in range(1, levels + 1):
        h = 1 << (j - 1)
        mins = np.minimum(mins[:-h], mins[h:])  # windows of length 2^j
        L[j] = mins.max()
    return L


def _pad(Q: np.ndarray) -> np.ndarray:
    T = Q.size - 1
    Tp = 1 << max(0, math.ceil(math.log2(T))) if T > 1 else 1
    if Tp == T:
        return Q.astype(np.float64)
    return np.concatenate([Q.astype(np.float64), np.full(Tp - T, min(0.0, float(Q[-1])))])


def recursive_quality(Q: np.ndarray, r: float, alpha: float) -> np.ndarray:
    """Steps 2–4: q(j) = min{L(j) − (1−α)r, r − L(j+1)} for j = 0..log2 T' (Claim 3.13: quasi-concave)."""
    Qp = _pad(np.asarray(Q, dtype=np.float64))
    L = window_max_min(Qp)
    L_ext = np.append(L, min(0.0, float(L[-1])))
    return np.minimum(L - (1.0 - alpha) * r, r - L_ext[1:])


def interval_partitions(Tp: int, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Step 7: starts/ends of A_i = [8Ki, 8K(i+1)−1] and B_i = [4K + 8Ki, …], trimmed to [0, T']."""
    L8 = 8 * K
    a_start = np.arange(0, Tp + 1, L8)
    a_end = np.minimum(a_start + L8 - 1, Tp)
    b_start = np.arange(4 * K, Tp + 1, L8)
    b_end = np.minimum(b_start + L8 - 1, Tp)
    return np.stack([a_start, a_end], 1), np.stack([b_start, b_end], 1)


def _interval_max(Qp: np.ndarray, iv: np.ndarray) -> np.ndarray:
    return np.maximum.reduceat(Qp, iv[:, 0]) if iv.shape[0] and iv[-1, 1] == Qp.size - 1 and np.all(
        iv[1:, 0] == iv[:-1, 1] + 1
    ) else np.array([Qp[s : e + 1].max() for s, e in iv])


def rec_concave_parameters(r: float, alpha: float, epsilon: float, delta: float, N: int) -> tuple[float, float, float, int]:
    """Validate RecConcave's parameters (BNS Fig. 5), for the dense and the piecewise versions alike.

    Parameters
    ----------
    r : float
        The promise (finite).
    alpha : float
        The approximation parameter, in (0, 1/2] (the recursion itself calls with 1/4).
    epsilon, delta : float
        The per-mechanism privacy parameters (``ldp.core.errors.require_epsilon``, δ in (0, 1)).
    N : int
        The recursion cap, ≥ 1.

    Returns
    -------
    tuple of (float, float, float, int)
        (ε, δ, α, N) as numbers; a ``ParameterError`` (a ``ValueError``) names the first bad one.
    """
    if not math.isfinite(float(r)):
        raise ParameterError(f"promise r must be finite; got r={r!r}")
    if not 0.0 < float(alpha) <= 0.5 or not math.isfinite(float(alpha)):
        raise ParameterError(f"alpha must lie in (0, 1/2]; got alpha={alpha!r}")
    return require_epsilon(epsilon), require_probability("delta", delta), float(alpha), require_integer("N", N, 1)


def rec_concave(
    Q: ArrayLike,
    r: float,
    alpha: float,
    epsilon: float,
    delta: float,
    N: int,
    rng: np.random.Generator,
) -> int:
    """RecConcave(Q, r, α, ε, δ, N) over solutions {0,…,len(Q)−1}. (3Nε, 3Nδ)-DP (BNS Lemma 3.12)."""
    eps, dlt, a, NN = rec_concave_parameters(r, alpha, epsilon, delta, N)
    q = np.asarray(Q, dtype=np.float64)
    T = q.size - 1
    if T <= BASE_CASE_SIZE or NN == 1:
        return exponential_mechanism(q, eps, rng)
    Qp = _pad(q)
    Tp = Qp.size - 1
    qq = recursive_quality(q, r, a)
    k = rec_concave(qq, a * r / 2.0, 0.25, eps, dlt, NN - 1, rng)
    A, B = interval_partitions(Tp, 1 << k)
    ia = a_dist(_interval_max(Qp, A), eps, dlt, rng)
    ib = a_dist(_interval_max(Qp, B), eps, dlt, rng) if B.shape[0] else None  # no shifted interval fits
    cand = _candidates(A, B, ia, ib, T)
    if cand.size == 0:
        return int(rng.integers(0, T + 1))
    return int(cand[exponential_mechanism(q[cand], eps, rng)])


def _candidates(A: np.ndarray, B: np.ndarray, ia: int | None, ib: int | None, T: int) -> np.ndarray:
    parts = []
    for iv, i in ((A, ia), (B, ib)):
        if i is not None:
            s, e = iv[i]
            parts.append(np.arange(s, min(e, T) + 1))
    if not parts:
        return np.empty(0, dtype=np.int64)
    return np.unique(np.concatenate(parts))


def rec_concave_distribution(
    Q: ArrayLike, r: float, alpha: float, epsilon: float, delta: float, N: int
) -> np.ndarray:
    """Exact output distribution of :func:`rec_concave` (finite branching; for tests on small T)."""
    eps, dlt, a, NN = rec_concave_parameters(r, alpha, epsilon, delta, N)
    q = np.asarray(Q, dtype=np.float64)
    T = q.size - 1
    if T <= BASE_CASE_SIZE or NN == 1:
        return exponential_probabilities(q, eps)
    Qp = _pad(q)
    Tp = Qp.size - 1
    pk = rec_concave_distribution(recursive_quality(q, r, a), a * r / 2.0, 0.25, eps, dlt, NN - 1)
    out = np.zeros(T + 1)
    for k, wk in enumerate(pk):
        if wk == 0:
            continue
        A, B = interval_partitions(Tp, 1 << k)
        outcomes: list[tuple[tuple[int | None, float], ...]] = []
        for iv in (A, B):
            if iv.shape[0] == 0:
                outcomes.append(((None, 1.0),))
                continue
            u = _interval_max(Qp, iv)
            i1, s1, s2 = top_two(u)
            p1 = float(a_dist_pass_probability(s1 - s2, eps, dlt))
            outcomes.append(((i1, p1), (None, 1.0 - p1)))
        for ia, pa in outcomes[0]:
            for ib, pb in outcomes[1]:
                w = wk * pa * pb
                if w == 0:
                    continue
                cand = _candidates(A, B, ia, ib, T)
                if cand.size == 0:
                    out += w / (T + 1)
                else:
                    out[cand] += w * exponential_probabilities(q[cand], eps)
    return out


def rec_concave_levels(T: int) -> int:
    """Levels actually used for range size T (base case at ≤ 32): 1 if T ≤ 32, else 1 + levels(⌈log₂T⌉)."""
    return 1 if T <= BASE_CASE_SIZE else 1 + rec_concave_levels(math.ceil(math.log2(T)))


def rec_concave_promise(T: int, alpha: float, beta: float, epsilon: float, delta: float, N: int) -> float:
    """Thm 3.15 promise: 8^N·(4/(αε))·(ln(32/(βδ)) + log^{⌈N⌉}(T)) [RECON-M]."""
    a = require_probability("alpha", alpha, high=0.5)
    b = require_probability("beta", beta, high=0.5)
    eps = require_epsilon(epsilon)
    dlt = require_probability("delta", delta)
    return 8.0**N * 4.0 / (a * eps) * (math.log(32.0 / (b * dlt)) + iterated_log2_ceil(T, N))
