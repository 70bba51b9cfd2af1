"""PARITY with a trusted curator: Algorithm A and the amplified A* of KLNRS §3.2.

Algorithm A(z, ε)                                        (KLNRS §3.2, Lemmas 3.1 and 3.2)
  1. with probability 1/2 output ⊥;
  2. keep each example independently with probability p = ε/4 (the set S);
  3. Gaussian elimination over GF(2) on {⟨x_i, r⟩ = y_i : i ∈ S}: the affine space V_S;
  4. output a uniform point of V_S, or ⊥ if V_S = ∅.
A*(z, ε, α, β): β' = β/2, k = ⌈log2(1/β')⌉ runs of A with ε' = ε/k; the first non-⊥ answer
(Theorem 3.8: n = O(log(1/β)/(εα)·(d + log(1/β))) examples; ε-DP by composition).

Privacy range: Lemma 3.2 bounds every probability ratio by 1 + 2p/(1−p); with p = ε/4 that is
≤ 1 + ε ≤ e^ε whenever ε ≤ 2 (the paper states ε ≤ 1/2, which is sufficient). We accept ε ≤ 2;
``algorithm_a_distribution`` gives the exact output distribution so tests check the ratios.

Speed: examples are bit-packed, 64 coordinates per uint64 word (bit c of a row is x_c, bit d is the
label), and elimination XORs whole rows with vectorized numpy operations. Rows are eliminated in
chunks; as soon as the rank reaches d the solution is unique and the remaining rows are only
checked against it (one popcount pass), so d = 512 with 10^5 examples takes milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldp.core.concepts import ParityConcept, bits_to_int
from ldp.core.errors import ParameterError, require_epsilon
from ldp.core.learner_result import LearnerResult, NoHypothesis

__all__ = [
    "PackedExamples",
    "AffineSolution",
    "pack_bits",
    "solve_gf2",
    "algorithm_a",
    "algorithm_a_star",
    "a_star_iterations",
    "algorithm_a_sample_size",
    "a_star_sample_size",
    "algorithm_a_distribution",
    "a_star_distribution",
    "MAX_EPSILON_A",
]

MAX_EPSILON_A = 2.0
"""Largest ε for which p = ε/4 keeps Algorithm A ε-DP (1 + 2p/(1−p) ≤ 1 + ε ≤ e^ε)."""


def pack_bits(bits: np.ndarray) -> np.ndarray:
    """Rows of 0/1 values (n, k) → (n, ⌈k/64⌉) uint64 words; column c is bit c % 64 of word c // 64."""
    bits = np.asarray(bits)
    if bits.ndim != 2:
        raise ParameterError(f"pack_bits needs a 2-d array of bits, got shape {bits.shape}")
    n, k = bits.shape
    words = max(1, (k + 63) // 64)
    packed = np.packbits(bits.astype(np.uint8, copy=False), axis=1, bitorder="little")
    out = np.zeros((n, words * 8), dtype=np.uint8)
    out[:, : packed.shape[1]] = packed
    return out.view("<u8").astype(np.uint64, copy=False)


def _unpack(words: np.ndarray, k: int) -> np.ndarray:
    raw = np.ascontiguousarray(words, dtype="<u8").view(np.uint8)
    return np.unpackbits(raw, axis=-1, bitorder="little")[..., :k]


def _parity_rows(rows: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """⟨row, vector⟩ mod 2 for every packed row."""
    return (np.bitwise_count(rows & vector).sum(axis=-1, dtype=np.int64) & 1).astype(np.uint8)


def _pack_points(points: np.ndarray, d: int) -> np.ndarray:
    """Points r ∈ {0,1}^d as packed rows with the same word count as examples (label bit clear)."""
    points = np.atleast_2d(np.asarray(points, dtype=np.uint8))
    return pack_bits(np.concatenate([points, np.zeros((len(points), 1), dtype=np.uint8)], axis=1))


def _bit(column: int) -> tuple[int, np.uint64]:
    return column >> 6, np.uint64(1 << (column & 63))


@dataclass(frozen=True)
class PackedExamples:
    """n labelled examples (x ∈ {0,1}^d, y ∈ {0,1}) packed as rows of uint64 words."""

    d: int
    rows: np.ndarray  # (n, words) uint64

    @classmethod
    def from_arrays(cls, features: np.ndarray, labels: np.ndarray) -> PackedExamples:
        features = np.asarray(features)
        labels = np.asarray(labels).reshape(-1, 1)
        if features.ndim != 2 or len(features) != len(labels):
            raise ParameterError(f"features (n, d) and labels (n,) must agree, got {features.shape} and {labels.shape}")
        return cls(features.shape[1], pack_bits(np.concatenate([features, labels], axis=1)))

    @classmethod
    def from_records(cls, records: np.ndarray) -> PackedExamples:
        """PARITY records: d bit columns x, then the label y ∈ {0, 1}."""
        records = np.asarray(records)
        return cls(records.shape[1] - 1, pack_bits(records))

    @classmethod
    def concatenate(cls, parts: list[PackedExamples]) -> PackedExamples:
        if not parts:
            raise ParameterError("nothing to concatenate")
        return cls(parts[0].d, np.concatenate([p.rows for p in parts], axis=0))

    @property
    def n(self) -> int:
        return int(self.rows.shape[0])

    def labels(self) -> np.ndarray:
        w, bit = _bit(self.d)
        return ((self.rows[:, w] & bit) != 0).astype(np.uint8)

    def features(self) -> np.ndarray:
        return _unpack(self.rows, self.d)


@dataclass(frozen=True)
class AffineSolution:
    """The affine space V = {r : ⟨x_i, r⟩ = y_i for all rows} in reduced row-echelon form.

    ``rows`` are the rank independent equations (packed, label at bit d), row k having its
    leading 1 in column ``pivots[k]`` and zeros in every other pivot column.
    """

    d: int
    rows: np.ndarray
    pivots: np.ndarray

    @property
    def rank(self) -> int:
        return len(self.pivots)

    @property
    def dimension(self) -> int:
        """log2 |V|."""
        return self.d - self.rank

    def free_columns(self) -> np.ndarray:
        mask = np.ones(self.d, dtype=bool)
        mask[self.pivots] = False
        return np.flatnonzero(mask)

    def _labels(self) -> np.ndarray:
        w, bit = _bit(self.d)
        return ((self.rows[:, w] & bit) != 0).astype(np.uint8)

    def _complete(self, free_bits: np.ndarray) -> np.ndarray:
        """Points of V for given values of the free coordinates (one row per point)."""
        free_bits = np.atleast_2d(free_bits).astype(np.uint8)
        r = np.zeros((len(free_bits), self.d), dtype=np.uint8)
        r[:, self.free_columns()] = free_bits
        if self.rank:
            packed = _pack_points(r, self.d)  # only free coordinates set, label bit clear
            par = (np.bitwise_count(packed[:, None, :] & self.rows[None, :, :]).sum(axis=-1) & 1).astype(np.uint8)
            r[:, self.pivots] = self._labels()[None, :] ^ par
        return r

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """A uniform point of V (d bits)."""
        return self._complete(rng.integers(0, 2, self.dimension, dtype=np.uint8))[0]

    def enumerate(self) -> np.ndarray:
        """Every point of V, shape (2^dimension, d); for small dimensions only."""
        k = self.dimension
        if k > 20:
            raise ParameterError(f"the solution space has 2^{k} points; enumerate only up to 2^20")
        free = ((np.arange(1 << k)[:, None] >> np.arange(k)) & 1).astype(np.uint8)
        return self._complete(free)

    def contains(self, r: np.ndarray) -> bool:
        if not self.rank:
            return True
        packed = _pack_points(r, self.d)[0]
        return bool(np.array_equal(_parity_rows(self.rows, packed), self._labels()))


def _rref(matrix: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """Reduced row-echelon form over GF(2) on columns 0..d−1 (column d is the right-hand side).

    Returns (independent rows, pivot columns, inconsistent?). Vectorized over rows: one XOR of
    all rows having the pivot bit per column.
    """
    m = matrix.copy()
    rank = 0
    pivots: list[int] = []
    n_rows = m.shape[0]
    for c in range(d):
        if rank == n_rows:
            break
        w, bit = _bit(c)
        has = (m[:, w] & bit) != 0
        below = np.flatnonzero(has[rank:])
        if below.size == 0:
            continue
        p = rank + int(below[0])
        if p != rank:
            m[[rank, p]] = m[[p, rank]]
            has[[rank, p]] = has[[p, rank]]
        has[rank] = False
        if has.any():
            m[has] ^= m[rank]
        pivots.append(c)
        rank += 1
    w, bit = _bit(d)
    inconsistent = bool(np.any(m[rank:, w] & bit))
    return m[:rank], np.asarray(pivots, dtype=np.int64), inconsistent


def solve_gf2(examples: PackedExamples, chunk: int | None = None) -> AffineSolution | None:
    """V = {r : ⟨x_i, r⟩ = y_i ∀i}, or None when the system is inconsistent (V = ∅)."""
    d, rows = examples.d, examples.rows
    chunk = chunk or max(256, 2 * d + 64)
    basis = rows[:0]
    pivots = np.zeros(0, dtype=np.int64)
    start = 0
    while start < len(rows):
        block = rows[start : start + chunk]
        start += len(block)
        basis, pivots, bad = _rref(np.concatenate([basis, block]), d)
        if bad:
            return None
        if len(pivots) == d and start < len(rows):
            # Unique solution r: RREF rows are e_k + label; every other row must agree with r.
            solution = AffineSolution(d, basis, pivots)
            r = _pack_points(solution._complete(np.zeros(0, dtype=np.uint8)), d)[0]
            w, bit = _bit(d)
            for lo in range(start, len(rows), 1 << 16):
                rest = rows[lo : lo + (1 << 16)]
                if np.any(_parity_rows(rest, r) != ((rest[:, w] & bit) != 0)):
                    return None
            return solution
    return AffineSolution(d, basis, pivots)


# --- Algorithm A and A* ---


def _algorithm_a_epsilon(epsilon: float) -> float:
    """ε for Algorithm A: the common check (``require_epsilon``), then Lemma 3.2's limit ε ≤ 2."""
    eps = require_epsilon(epsilon)
    if eps > MAX_EPSILON_A:
        raise ParameterError(f"Algorithm A needs 0 < ε ≤ {MAX_EPSILON_A} (p = ε/4 keeps it ε-DP), got ε={epsilon!r}")
    return eps


def algorithm_a(
    examples: PackedExamples,
    epsilon: float,
    rng: np.random.Generator,
    *,
    keep_probability: float | None = None,
    bottom_probability: float = 0.5,
) -> LearnerResult:
    """One run of Algorithm A (KLNRS §3.2): ε-DP; outputs a uniform consistent parity or ⊥.

    ``keep_probability`` / ``bottom_probability`` exist to build the broken variants the privacy
    tests must catch; the defaults (ε/4 and 1/2) are the paper's algorithm.
    """
    eps = _algorithm_a_epsilon(epsilon)
    p = eps / 4.0 if keep_probability is None else float(keep_probability)
    common = dict(users=examples.n, rounds=0, queries=0, epsilon=eps, algorithm="parity-A", model="central")
    if rng.random() < bottom_probability:
        return LearnerResult(NoHypothesis("coin"), details={"outcome": "coin", "kept": 0}, **common)  # type: ignore[arg-type]
    keep = rng.random(examples.n) < p
    solution = solve_gf2(PackedExamples(examples.d, examples.rows[keep]))
    kept = int(keep.sum())
    if solution is None:
        return LearnerResult(NoHypothesis("inconsistent"), details={"outcome": "inconsistent", "kept": kept}, **common)  # type: ignore[arg-type]
    r = solution.sample(rng)
    details = {"outcome": "hypothesis", "kept": kept, "rank": solution.rank, "dimension": solution.dimension}
    return LearnerResult(ParityConcept(tuple(int(v) for v in r)), details=details, **common)  # type: ignore[arg-type]


def a_star_iterations(beta: float) -> int:
    """k = ⌈log2(1/β')⌉ with β' = β/2 (Theorem 3.8)."""
    if not 0.0 < beta < 1.0:
        raise ParameterError(f"β must be in (0, 1), got {beta!r}")
    return max(1, math.ceil(math.log2(2.0 / beta) - 1e-12))


def algorithm_a_star(examples: PackedExamples, epsilon: float, beta: float, rng: np.random.Generator) -> LearnerResult:
    """A* (Theorem 3.8): k = ⌈log2(2/β)⌉ runs of A with ε/k each; the first answer that is not ⊥.

    ε-DP by basic composition (Claim 2.1); fails (⊥ or a bad parity) w.p. ≤ β when
    n ≥ ``a_star_sample_size``.
    """
    k = a_star_iterations(beta)
    eps = _algorithm_a_epsilon(epsilon)
    run_eps = eps / k
    kept = []
    for it in range(k):
        res = algorithm_a(examples, run_eps, rng)
        kept.append(res.details["kept"])
        if not res.is_bottom:
            details = {**res.details, "iterations": it + 1, "k": k, "epsilon_per_run": run_eps, "kept_per_run": kept}
            return LearnerResult(res.hypothesis, users=examples.n, epsilon=eps, details=details, algorithm="parity-A*", model="central")
    return LearnerResult(
        NoHypothesis("all runs ⊥"),
        users=examples.n,
        epsilon=eps,
        details={"outcome": "bottom", "iterations": k, "k": k, "epsilon_per_run": run_eps, "kept_per_run": kept},
        algorithm="parity-A*",
        model="central",
    )


def algorithm_a_sample_size(d: int, epsilon: float, alpha: float, beta_prime: float) -> int:
    """Lemma 3.1: n ≥ 8/(εα)·(d ln 2 + ln(1/β')) gives Pr[error ≤ α] ≥ 1/2 − β'."""
    return math.ceil(8.0 / (epsilon * alpha) * (d * math.log(2) + math.log(1.0 / beta_prime)))


def a_star_sample_size(d: int, epsilon: float, alpha: float, beta: float) -> int:
    """Theorem 3.8: n = 8/(ε'α)·(d ln 2 + ln(1/β')) with β' = β/2, ε' = ε/⌈log2(1/β')⌉."""
    k = a_star_iterations(beta)
    return algorithm_a_sample_size(d, epsilon / k, alpha, beta / 2.0)


# --- exact output distributions (small d and n), for the privacy tests ---


def algorithm_a_distribution(
    features: np.ndarray,
    labels: np.ndarray,
    epsilon: float,
    *,
    keep_probability: float | None = None,
    bottom_probability: float = 0.5,
) -> np.ndarray:
    """Exact Pr[A(z) = ·] over {c_r : r ∈ {0,1}^d} ∪ {⊥}: an array of length 2^d + 1, entry
    ``bits_to_int(r)`` for c_r and the last entry for ⊥.

    Enumerates every subset S ⊆ [n] with weight p^|S|(1−p)^(n−|S|) and V_S by intersecting the
    sets of parities consistent with each example (independent of the elimination code), so
    Pr[c_r] = (1 − b)·Σ_S w_S·1[r ∈ V_S]/|V_S| and Pr[⊥] = b + (1 − b)·Σ_{S: V_S = ∅} w_S.
    """
    features = np.asarray(features, dtype=np.int64)
    labels = np.asarray(labels, dtype=np.int64).ravel()
    n, d = features.shape
    if n > 12 or d > 10:
        raise ParameterError(f"exact enumeration is for n ≤ 12, d ≤ 10; got n={n}, d={d}")
    p = float(epsilon) / 4.0 if keep_probability is None else float(keep_probability)
    rs = np.arange(1 << d)
    x_int = bits_to_int(features) if d else np.zeros(n, dtype=np.int64)
    inner = np.bitwise_count(rs[None, :] & x_int[:, None]) & 1  # (n, 2^d)
    consistent = inner == labels[:, None]
    spaces = np.ones((1 << n, 1 << d), dtype=bool)
    for s in range(1, 1 << n):
        low = (s & -s).bit_length() - 1
        spaces[s] = spaces[s & (s - 1)] & consistent[low]
    sizes = np.bitwise_count(np.arange(1 << n))
    weights = p**sizes * (1.0 - p) ** (n - sizes)
    counts = spaces.sum(axis=1)
    out = np.zeros((1 << d) + 1)
    nonempty = counts > 0
    out[:-1] = (1.0 - bottom_probability) * (weights[nonempty, None] * spaces[nonempty] / counts[nonempty, None]).sum(axis=0)
    out[-1] = bottom_probability + (1.0 - bottom_probability) * weights[~nonempty].sum()
    return out


def a_star_distribution(a_distribution: np.ndarray, iterations: int) -> np.ndarray:
    """Exact output distribution of A* from that of one run of A (same ε per run):
    Pr[⊥] = P(⊥)^k and Pr[c_r] = P(c_r)·(1 + P(⊥) + … + P(⊥)^(k−1))."""
    bottom = float(a_distribution[-1])
    geometric = sum(bottom**j for j in range(iterations))
    out = a_distribution.astype(np.float64) * geometric
    out[-1] = bottom**iterations
    return out
