"""Piecewise-constant RecConcave and exponential mechanism: BNS §3.3 at any domain size (Remark 3.17).

A quality ``Q`` on the solutions {0,…,T} that changes value only at a few breakpoints (e.g. the
threshold quality #correct, which changes only at sample points: ≤ m+1 pieces) is held as
:class:`PiecewiseQuality`: piece i covers [starts[i], starts[i+1] − 1] (the last one ends at T) and has
value ``values[i]``. Positions are Python ``int`` so T may be 2^1024.

* :func:`piecewise_exponential_mechanism` — the exponential mechanism over all T+1 solutions: a piece
  is drawn with log-weight ln(len) + εQ/2, then a solution uniformly inside it. Exactly the dense
  mechanism's distribution (ε-DP).
* :func:`rec_concave_piecewise` — RecConcave (reference spec M6, [RECON-H]) with the top level done per
  piece: L(j) by merging runs of pieces in decreasing value order (union–find), the top two interval
  maxima of each 8K-partition from the ranges of intervals each piece touches, and the final
  exponential mechanism over the chosen intervals' pieces. The recursive call works on
  {0,…,log₂T'} (≤ a few thousand solutions) and is the dense :func:`ldp.central.rec_concave.rec_concave`.
  Output distribution = the dense RecConcave's (tested against its exact distribution), so the
  guarantee is the same: **(3Nε, 3Nδ)-DP** (BNS Lemma 3.12, N the hard cap on levels).

Cost: O(P log P + log T) per top level for P pieces (Python loop over pieces), independent of T.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ldp.central.rec_concave import BASE_CASE_SIZE, rec_concave, rec_concave_parameters
from ldp.central.stability import a_dist_from_top_two
from ldp.core.exponential_mechanism import gumbel_argmax

__all__ = [
    "PiecewiseQuality",
    "uniform_below",
    "piecewise_exponential_mechanism",
    "piecewise_window_max_min",
    "piecewise_recursive_quality",
    "partition_top_two",
    "rec_concave_piecewise",
]


@dataclass(frozen=True)
class PiecewiseQuality:
    """Q on {0,…,T}: piece i = [starts[i], starts[i+1]−1] (last: [starts[−1], T]) has value values[i]."""

    starts: tuple[int, ...]
    values: tuple[float, ...]
    T: int

    def __post_init__(self) -> None:
        if len(self.starts) == 0 or len(self.starts) != len(self.values):
            raise ValueError(
                f"starts and values must be non-empty and of equal length; got {len(self.starts)} and {len(self.values)}"
            )
        if self.starts[0] != 0:
            raise ValueError(f"the first piece must start at 0; got starts[0]={self.starts[0]}")
        if any(b <= a for a, b in zip(self.starts, self.starts[1:])) or self.starts[-1] > self.T:
            raise ValueError("piece starts must be strictly increasing and ≤ T")
        if not all(math.isfinite(v) for v in self.values):
            raise ValueError("piece values must be finite")

    @property
    def ends(self) -> tuple[int, ...]:
        return tuple(s - 1 for s in self.starts[1:]) + (self.T,)

    @property
    def lengths(self) -> tuple[int, ...]:
        return tuple(e - s + 1 for s, e in zip(self.starts, self.ends))

    def at(self, i: int) -> float:
        """Q(i) (binary search over the piece starts)."""
        return self.values[bisect.bisect_right(self.starts, i) - 1]

    def dense(self) -> np.ndarray:
        """Q as a dense array (tests; small T only)."""
        return np.repeat(np.asarray(self.values, dtype=np.float64), [int(n) for n in self.lengths])

    def restrict(self, ranges: Sequence[tuple[int, int]]) -> tuple[list[int], list[int], list[float]]:
        """Pieces intersected with disjoint sorted ranges [lo, hi]: (starts, lengths, values)."""
        st, ln, vs = [], [], []
        for lo, hi in ranges:
            for s, e, v in zip(self.starts, self.ends, self.values):
                a, b = max(s, lo), min(e, hi)
                if a <= b:
                    st.append(a)
                    ln.append(b - a + 1)
                    vs.append(v)
        return st, ln, vs

    @staticmethod
    def from_dense(Q: np.ndarray) -> PiecewiseQuality:
        q = np.asarray(Q, dtype=np.float64)
        cut = np.flatnonzero(np.diff(q) != 0) + 1
        starts = (0, *(int(c) for c in cut))
        return PiecewiseQuality(starts, tuple(float(q[s]) for s in starts), q.size - 1)


def uniform_below(n: int, rng: np.random.Generator) -> int:
    """A uniform integer in [0, n) for any Python int n ≥ 1 (rejection sampling on random bytes)."""
    if n < 1:
        raise ValueError(f"uniform_below needs n ≥ 1; got n={n}")
    if n <= 1 << 62:
        return int(rng.integers(0, n))
    bits = (n - 1).bit_length()
    nbytes = (bits + 7) // 8
    mask = (1 << bits) - 1
    while True:  # acceptance probability > 1/2
        v = int.from_bytes(rng.bytes(nbytes), "little") & mask
        if v < n:
            return v


def _exp_mech_pieces(
    starts: Sequence[int], lengths: Sequence[int], values: Sequence[float], epsilon: float, rng: np.random.Generator
) -> int:
    lw = np.array([math.log(n) for n in lengths]) + epsilon * np.asarray(values, dtype=np.float64) / 2.0
    i = gumbel_argmax(lw, rng)
    return int(starts[i]) + uniform_below(int(lengths[i]), rng)


def piecewise_exponential_mechanism(Q: PiecewiseQuality, epsilon: float, rng: np.random.Generator) -> int:
    """ExpMech(ε) over {0,…,T} with quality Q (sensitivity 1): Pr[j] ∝ exp(ε·Q(j)/2). ε-DP."""
    return _exp_mech_pieces(Q.starts, Q.lengths, Q.values, epsilon, rng)


def _padded(Q: PiecewiseQuality) -> PiecewiseQuality:
    """Step 2: T' = smallest power of 2 ≥ T; Q(i) := min{0, Q(T)} for T < i ≤ T'."""
    T = Q.T
    Tp = 1 << (T - 1).bit_length() if T > 1 else 1
    if Tp == T:
        return Q
    return PiecewiseQuality((*Q.starts, T + 1), (*Q.values, min(0.0, Q.values[-1])), Tp)


def piecewise_window_max_min(Qp: PiecewiseQuality) -> np.ndarray:
    """L(j) = max over length-2^j windows of the window minimum, j = 0..log₂T' (T' = Qp.T a power of 2).

    L(j) ≥ x iff some run of consecutive pieces all ≥ x is ≥ 2^j long: pieces are switched on in
    decreasing value order and adjacent runs merged (union–find); L(j) is the value at which the longest
    run first reaches 2^j.
    """
    Tp = Qp.T
    levels = (Tp.bit_length() - 1) if Tp > 0 else 0
    vals = np.asarray(Qp.values, dtype=np.float64)
    lengths = Qp.lengths
    P = len(lengths)
    parent = list(range(P))
    run = list(lengths)
    on = [False] * P

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    order = np.argsort(-vals, kind="stable")
    best = 0
    marks: list[tuple[int, float]] = []  # (longest run after switching on all pieces ≥ value, value)
    idx = 0
    while idx < P:
        v = vals[order[idx]]
        while idx < P and vals[order[idx]] == v:
            i = int(order[idx])
            on[i] = True
            for nb in (i - 1, i + 1):
                if 0 <= nb < P and on[nb]:
                    a, b = find(i), find(nb)
                    if a != b:
                        parent[b] = a
                        run[a] += run[b]
            best = max(best, run[find(i)])
            idx += 1
        marks.append((best, float(v)))
    L = np.empty(levels + 1)
    k = 0
    for j in range(levels + 1):
        w = 1 << j
        while marks[k][0] < w:
            k += 1
        L[j] = marks[k][1]
    return L


def piecewise_recursive_quality(Q: PiecewiseQuality, r: float, alpha: float) -> np.ndarray:
    """Steps 2–4 per piece: q(j) = min{L(j) − (1−α)r, r − L(j+1)}, j = 0..log₂T' (Claim 3.13)."""
    L = piecewise_window_max_min(_padded(Q))
    L_ext = np.append(L, min(0.0, float(L[-1])))
    return np.minimum(L - (1.0 - alpha) * r, r - L_ext[1:])


def _partition_offsets(K: int) -> tuple[int, int]:
    """Step 7: the A partition starts at 0, the B partition at 4K (both of length-8K intervals)."""
    return 0, 4 * K


def partition_top_two(Qp: PiecewiseQuality, length: int, offset: int) -> tuple[int, float, float, int]:
    """Top two of u(I) = max_{i∈I} Q(i) over the intervals [offset + length·n, offset + length·(n+1) − 1] ∩ [0, T'].

    Returns (index of the best interval, lowest index on ties; its score; the runner-up score, −∞ if
    there is one interval; the number of intervals) — what ``top_two`` gives on the dense list, without
    listing the (possibly 2^1000) intervals: an interval's score is the max over the pieces it touches.
    """
    Tp = Qp.T
    if Tp < offset:
        return -1, -math.inf, -math.inf, 0
    count = (Tp - offset) // length + 1
    touched = []  # (value, first interval, last interval) per piece that meets the partition
    for s, e, v in zip(Qp.starts, Qp.ends, Qp.values):
        if e < offset:
            continue
        lo = (max(s, offset) - offset) // length
        hi = (e - offset) // length
        touched.append((v, lo, hi))
    s1 = max(t[0] for t in touched)
    i1 = min(t[1] for t in touched if t[0] == s1)
    if count == 1:
        return i1, s1, -math.inf, 1
    s2 = max((t[0] for t in touched if t[1] < i1 or t[2] > i1), default=-math.inf)
    return i1, s1, s2, count


def rec_concave_piecewise(
    Q: PiecewiseQuality,
    r: float,
    alpha: float,
    epsilon: float,
    delta: float,
    N: int,
    rng: np.random.Generator,
) -> int:
    """RecConcave(Q, r, α, ε, δ, N) over {0,…,Q.T} for piecewise-constant Q; (3Nε, 3Nδ)-DP (BNS Lemma 3.12).

    Same output distribution as the dense :func:`ldp.central.rec_concave.rec_concave` on the dense Q.
    """
    eps, dlt, a, NN = rec_concave_parameters(r, alpha, epsilon, delta, N)
    T = Q.T
    if T <= BASE_CASE_SIZE or NN == 1:
        return piecewise_exponential_mechanism(Q, eps, rng)
    Qp = _padded(Q)
    qq = piecewise_recursive_quality(Q, r, a)
    k = rec_concave(qq, a * r / 2.0, 0.25, eps, dlt, NN - 1, rng)
    K = 1 << k
    ranges = []
    for off in _partition_offsets(K):
        i1, s1, s2, count = partition_top_two(Qp, 8 * K, off)
        if count == 0:
            continue  # no shifted interval fits (as in the dense code)
        chosen = a_dist_from_top_two(i1, s1, s2, eps, dlt, rng)
        if chosen is not None:
            lo = off + chosen * 8 * K
            if lo <= T:  # an interval wholly in the padding holds no solution
                ranges.append((lo, min(lo + 8 * K - 1, T)))
    if not ranges:
        return uniform_below(T + 1, rng)  # step 10 [ENG]: data-independent
    ranges.sort()
    if len(ranges) == 2 and ranges[1][0] <= ranges[0][1] + 1:
        ranges = [(ranges[0][0], max(ranges[0][1], ranges[1][1]))]
    st, ln, vs = Q.restrict(ranges)
    return _exp_mech_pieces(st, ln, vs, eps, rng)
