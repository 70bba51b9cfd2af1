"""Exact privacy audits of the frequency oracles: by structure at any k (``verify_structure``) and
by enumeration on small k (``enumerated``, which shows the unchanged ``verify_exact`` every report).

The theorems behind each audit are in ``ldp.core.frequency_oracles``'s docstring and
docs/frequency_oracles.md: a unary encoding's loss is that of its two-bit channel, OLH's that of
its g-ary randomized response channel, Hadamard Response is audited directly, and Subset
Selection by its proven bound in exact arithmetic. Each structural audit also feeds the *real*
sampler boundary and random draws (``structure_probe``) and checks it emits what the structure
says, so a sampler that departs from its proof is caught.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import numpy as np

from ldp.core.audit import ExactAudit, FixedRandomness, exp_bounds, log_ratio, verify_exact
from ldp.core.errors import ParameterError
from ldp.core.frequency_oracles import (
    HEAD_BITS,
    FrequencyOracle,
    HadamardResponse,
    OptimizedLocalHashing,
    SubsetSelection,
    UnaryEncoding,
    unary_word,
    unary_word_draws,
)
from ldp.core.randomizer_base import TWO64, Randomizer, row_indices, rr_draw
from ldp.core.rng import HIGH_HALF, Draws
from ldp.core.rr_mechanisms import KaryRandomizedResponse

__all__ = ["Enumerated", "enumerated", "structure_probe", "verify_structure"]


class _VirtualRandomness:
    """Unary encodings on the audit's terms: virtual draw j's top b bits are bit j's X_j, placed
    where the real sampler reads it (``unary_word``: its top 16 bits in a main draw, its low b − 16
    bits, if any, in the fallback stream, read on a tie) — a fixed relabelling of the randomness, so the
    cells of every virtual draw are intervals [0, T_j·2^{64−b}) and [T_j·2^{64−b}, 2^64) and
    ``verify_exact`` enumerates both parts of X_j, the fallback bits included."""

    def __init__(self, virtual: Draws, b: int, k: int) -> None:
        self.virtual, self.b, self.k = virtual, b, k
        self.users = virtual.users

    def bits(self, draw: int = 0) -> np.ndarray:
        return unary_word(draw, self.k, self.b, lambda j: self.virtual.bits(j) >> np.uint64(64 - self.b))

    def uniform(self, draw: int = 0) -> np.ndarray:  # pragma: no cover - the samplers read bits only
        raise NotImplementedError


class _SubsetVirtualRandomness:
    """Subset Selection on the audit's terms: each virtual draw placed where the sampler reads it
    (``SubsetSelection.virtual_bits``: Floyd's pick s is one half of an AES block, a Bernoulli
    chunk one 16-bit lane); the cells of every virtual draw are ``SubsetSelection.draw_cells``'."""

    def __init__(self, virtual: Draws, R: SubsetSelection) -> None:
        self.virtual, self.R = virtual, R
        self.users = virtual.users

    def bits(self, draw: int = 0) -> np.ndarray:
        return self.R.virtual_bits(self.virtual, draw)

    def uniform(self, draw: int = 0) -> np.ndarray:  # pragma: no cover - the samplers read bits only
        raise NotImplementedError


@dataclass(frozen=True)
class Enumerated(Randomizer):
    """A frequency oracle with few reports, seen with scalar outputs (the index of each report in
    an enumeration) so that ``verify_exact`` runs on it unchanged: realized table, exact ratio,
    log_prob, and the sampler fed its cell boundaries. Small k only (``enumerated``)."""

    inner: FrequencyOracle
    kind: ClassVar[str] = "enumerated"

    @property
    def epsilon(self) -> float:  # type: ignore[override]
        return self.inner.epsilon

    def _rows(self) -> np.ndarray:
        R = self.inner
        if isinstance(R, (UnaryEncoding, SubsetSelection)):
            ints = np.arange(1 << R.k, dtype=np.int64)
            bits = ((ints[:, None] >> np.arange(R.k)[None, :]) & 1).astype(bool)
            return np.packbits(bits, axis=1)
        if isinstance(R, OptimizedLocalHashing):
            grids = np.meshgrid(*([np.arange(1 << R.m)] * R.l + [np.arange(R.g)]), indexing="ij")
            return np.stack([g.ravel() for g in grids], axis=1).astype(np.uint16)
        raise ParameterError(f"no enumeration for {type(R).__name__}")

    def _index_of(self, reports: np.ndarray) -> np.ndarray:
        return row_indices(self._rows(), reports)

    def input_domain(self) -> np.ndarray:
        return self.inner.input_domain()

    def output_domain(self) -> np.ndarray:
        return np.arange(len(self._rows()), dtype=np.float64)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        R = self.inner
        if isinstance(R, UnaryEncoding):
            randomness = _VirtualRandomness(randomness, R.chunk_bits, R.k)
        elif isinstance(R, SubsetSelection):
            randomness = _SubsetVirtualRandomness(randomness, R)
        return self._index_of(R.sample(inputs, randomness))

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        rows = self._rows()[np.asarray(w).astype(np.int64)]
        return self.inner.log_prob(u, rows)

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        R = self.inner
        rows = self._rows()
        u = np.asarray(inputs, dtype=np.float64).ravel()
        idx = R._index(u)
        masses = np.empty((len(u), len(rows)), dtype=object)
        if isinstance(R, UnaryEncoding):
            b = R.chunk_bits
            t_in, t_out = R.thresholds
            bits = np.unpackbits(rows, axis=1, count=R.k)
            for i, x in enumerate(idx):
                t = np.full(R.k, t_out, dtype=object)
                t[x] = t_in
                per = np.where(bits == 1, t[None, :], (1 << b) - t[None, :])
                masses[i] = [math.prod(int(v) for v in row) for row in per]
            return self.output_domain(), masses, 1 << (b * R.k)
        if isinstance(R, SubsetSelection):
            keys = {r.tobytes(): j for j, r in enumerate(rows)}
            for i, x in enumerate(idx):
                masses[i] = [0] * len(rows)
                for key, mass in R.ordered_masses(int(x)).items():
                    masses[i, keys[key]] = mass
            return self.output_domain(), masses, 1 << (64 * R.virtual_draws)
        assert isinstance(R, OptimizedLocalHashing)
        a, b_ = R.cell_sizes
        seed_mass = 1 << (64 - R.m)  # each hash row: one of 2^m equal intervals of its draw
        for i, x in enumerate(idx):
            keep = R.hash(rows[:, : R.l], np.asarray(x, dtype=np.int64)) == rows[:, R.l]
            masses[i] = [(a if kk else b_) * seed_mass**R.l for kk in keep]
        return self.output_domain(), masses, 1 << (64 * (R.l + 1))

    def draw_cells(self, u: float) -> list[np.ndarray]:
        R = self.inner
        if isinstance(R, SubsetSelection):
            return R.draw_cells(u)
        if isinstance(R, UnaryEncoding):
            b = R.chunk_bits
            t_in, t_out = R.thresholds
            x = int(R._index(np.array([u]))[0])
            return [np.array([0, (t_in if j == x else t_out) << (64 - b)], dtype=np.uint64) for j in range(R.k)]
        assert isinstance(R, OptimizedLocalHashing)
        a, b_ = R.cell_sizes
        grr = np.array([0] + [a + i * b_ for i in range(R.g - 1)], dtype=np.uint64)
        seed = np.arange(1 << R.m, dtype=np.uint64) * np.uint64(1 << (64 - R.m))
        return [grr] + [seed] * R.l


def enumerated(R: FrequencyOracle) -> Randomizer:
    """R with every report enumerated (2^k for unary encodings and subsets, 2^{ml}·g for OLH), for
    ``verify_exact`` on small k. Refuses more than 2^16 reports."""
    if isinstance(R, (UnaryEncoding, SubsetSelection)):
        size = 1 << R.k if R.k < 64 else math.inf
    elif isinstance(R, OptimizedLocalHashing):
        size = (1 << (R.m * R.l)) * R.g
    else:
        raise ParameterError(f"{type(R).__name__} needs no enumeration: verify_exact audits it directly")
    if size > 1 << 16:
        raise ParameterError(f"{R.kind} with k={R.k} has {size} reports; enumerate a smaller instance")
    return Enumerated(R)


def _random_words(rng: np.random.Generator, n: int) -> np.ndarray:
    """n uniform 64-bit words (numpy draws at most 63 bits at a time: 63 random bits, then the last)."""
    return rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64)


def _probe_unary(R: UnaryEncoding, rng: np.random.Generator, x: np.ndarray, inputs: np.ndarray) -> str:
    """Bit j of the report must be 1[X_j < T_j], X_j read where the layout puts it (``unary_word``:
    top 16 bits in a main draw, low b − 16 bits, if any, in the fallback stream). A third of the X_j
    tie the threshold's top 16 bits (so the fallback decides; at b = 16 they equal the threshold),
    and each user's own X and one other sit right at a threshold (T − 1 or T)."""
    n = len(x)
    b, k = R.chunk_bits, R.k
    r = b - HEAD_BITS
    t_in, t_out = R.thresholds
    j = np.arange(k)
    t = np.where(j[None, :] == x[:, None], np.uint64(t_in), np.uint64(t_out))
    X = _random_words(rng, n * k).reshape(n, k) >> np.uint64(64 - b)
    tie = rng.integers(0, 3, (n, k)) == 0
    X[tie] = ((t[tie] >> np.uint64(r)) << np.uint64(r)) | (X[tie] & np.uint64((1 << r) - 1))
    rows = np.arange(n)
    for target in (x, (x + 1 + rng.integers(0, k - 1, n)) % k):
        X[rows, target] = t[rows, target] - rng.integers(0, 2, n, dtype=np.uint64)
    bits = {d: unary_word(d, k, b, lambda jj: X[:, jj]) for d in unary_word_draws(k, b)}
    got = np.unpackbits(R.sample(inputs, FixedRandomness(bits, n)), axis=1, count=k).astype(bool)
    if not np.array_equal(got, X < t):
        return "a bit of the sampler is not 1[its own X_j < its threshold] (top 16 bits first, the fallback bits on a tie)"
    return ""


def _probe_olh(R: OptimizedLocalHashing, rng: np.random.Generator, x: np.ndarray, inputs: np.ndarray) -> str:
    """The report must be (the top m bits of draws 1..l, exact g-ary RR of h_A(u) on draw 0), with
    draw 0 often at a cell edge; the hash is computed here bit by bit, by its definition."""
    n = len(x)
    a, b_ = R.cell_sizes
    starts = np.array([0] + [a + i * b_ for i in range(R.g - 1)], dtype=object)
    edges = np.array([int(s) for s in starts] + [int(s) - 1 for s in starts[1:]] + [TWO64 - 1], dtype=np.uint64)
    bits = {0: np.where(rng.integers(0, 2, n) == 1, edges[rng.integers(0, len(edges), n)], rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2))}
    for r in range(R.l):
        bits[1 + r] = _random_words(rng, n)
    got = R.sample(inputs, FixedRandomness(bits, n)).astype(np.int64)
    rows = np.stack([(bits[1 + r] >> np.uint64(64 - R.m)).astype(np.int64) for r in range(R.l)], axis=1)
    hashed = np.zeros(n, dtype=np.int64)
    for r in range(R.l):
        dot = np.zeros(n, dtype=np.int64)
        for bit in range(R.m):
            dot ^= (rows[:, r] >> bit) & (x >> bit) & 1
        hashed |= dot << r
    y = rr_draw(hashed, bits[0], a, b_)
    if not np.array_equal(got[:, : R.l], rows):
        return "the reported hash is not the top m bits of its draws"
    if not np.array_equal(got[:, R.l], y):
        return "y is not the exact g-ary randomized response of h_A(u)"
    return ""


def _floyd_reference(words: list[int], pool: int, picks: int) -> list[int]:
    """Floyd's algorithm by its definition, in Python: ``picks`` ranks of [0, pool) in pick order,
    pick s from word s as ⌊X·(j + 1)/2^64⌋, j = pool − picks + s (j itself if already taken)."""
    taken: list[int] = []
    for s in range(picks):
        j = pool - picks + s
        r = words[s] * (j + 1) >> 64
        taken.append(j if r in taken else r)
    return taken


def _subset_reference(R: SubsetSelection, x_i: int, coin: int, back: int, picks: list[int]) -> np.ndarray:
    """The subset Subset Selection must report, by its definition: Floyd's algorithm over the
    k − 1 other categories with these pick words, then, iff the coin is inside, the pick ``back``
    selects given back and the input added."""
    d, k = R.subset_size, R.k
    others = [c for c in range(k) if c != x_i]
    taken = _floyd_reference(picks, k - 1, d)
    inside = coin < R.cell_sizes[0]
    if inside:
        del taken[back * d >> 64]
    want = np.zeros(k, dtype=bool)
    want[[others[o] for o in taken]] = True
    want[x_i] = inside
    return want


def _bernoulli_subset_reference(R: SubsetSelection, x_i: int, coin: int, chunks: np.ndarray, fix: list[int]) -> np.ndarray:
    """The subset Subset Selection's Bernoulli sampler must report, by its definition (class
    docstring): T₀ = the others whose chunk is below the threshold, then Floyd's picks of the pool
    ranks with these fix-up words, flipped (or all the pool's others flipped), then the input iff
    the coin is inside."""
    k, d = R.k, R.subset_size
    member = chunks < R.bernoulli_threshold
    member[x_i] = False
    inside = coin < R.cell_sizes[0]
    surplus = int(member.sum()) - (d - int(inside))
    others = np.arange(k) != x_i
    pool = np.flatnonzero(member if surplus > 0 else ~member & others)
    flips = abs(surplus)
    taken = _floyd_reference(fix, len(pool), min(flips, len(pool) - flips))
    flipped = np.zeros(k, dtype=bool)
    flipped[pool[taken]] = True
    if flips > len(pool) - flips:
        flipped[pool] ^= True
    member ^= flipped
    member[x_i] = inside
    return member


def _probe_bernoulli_subset(R: SubsetSelection, rng: np.random.Generator, x: np.ndarray, inputs: np.ndarray) -> str:
    """A few users (a reference each, in Python), half with the coin at its boundary and a third
    of the chunks at the threshold (t − 1 or t); every word read where the sampler reads it."""
    k, t = R.k, R.bernoulli_threshold
    users = min(len(x), 16)
    blocks = -(-k // 8)
    chunks = rng.integers(0, 1 << 16, (users, 8 * blocks), dtype=np.uint64)
    edge = rng.integers(0, 3, chunks.shape) == 0
    chunks[edge] = np.uint64(t) - rng.integers(0, 2, int(edge.sum()), dtype=np.uint64)
    coin = _random_words(rng, users)
    coin[: users // 2] = np.uint64(R.cell_sizes[0]) - rng.integers(0, 2, users // 2, dtype=np.uint64)
    bits = {0: coin}
    lanes = chunks.reshape(users, blocks, 2, 4) << (np.uint64(16) * np.arange(4, dtype=np.uint64))
    words = np.bitwise_or.reduce(lanes, axis=3)
    for b in range(blocks):
        bits[1 + b], bits[1 + b + HIGH_HALF] = words[:, b, 0], words[:, b, 1]
    fix = [_random_words(rng, users) for _ in range((k - 1) // 2 + 1)]
    for i, word in enumerate(fix):
        bits[1 + blocks + i // 2 + (HIGH_HALF if i % 2 else 0)] = word
    got = np.unpackbits(R.sample(inputs[:users], FixedRandomness(bits, users)), axis=1, count=k).astype(bool)
    for i in range(users):
        want = _bernoulli_subset_reference(R, int(x[i]), int(coin[i]), chunks[i, :k].astype(np.int64), [int(f[i]) for f in fix])
        if not np.array_equal(got[i], want):
            return "the sampler's subset is not its Bernoulli chunks fixed up by Floyd's picks of the pool (and the coin)"
    return ""


def _probe_subset(R: SubsetSelection, rng: np.random.Generator, x: np.ndarray, inputs: np.ndarray) -> str:
    """A few users (a reference Floyd each, in Python), half with the coin at its boundary; the
    picks read where the sampler reads them (both halves of the blocks from draw 2 on). The
    Bernoulli sampler: ``_probe_bernoulli_subset``."""
    if R.method == "bernoulli":
        return _probe_bernoulli_subset(R, rng, x, inputs)
    d = R.subset_size
    users = min(len(x), 16)
    picks = [_random_words(rng, users) for _ in range(d)]
    bits = {0: _random_words(rng, users), 1: _random_words(rng, users)}
    bits[0][: users // 2] = np.uint64(R.cell_sizes[0]) - rng.integers(0, 2, users // 2, dtype=np.uint64)
    for s, word in enumerate(picks):
        bits[2 + s // 2 + (HIGH_HALF if s % 2 else 0)] = word
    got = np.unpackbits(R.sample(inputs[:users], FixedRandomness(bits, users)), axis=1, count=R.k).astype(bool)
    for i in range(users):
        want = _subset_reference(R, int(x[i]), int(bits[0][i]), int(bits[1][i]), [int(p[i]) for p in picks])
        if not np.array_equal(got[i], want):
            return "the sampler's subset is not the coin plus Floyd's algorithm on its draws (and the give-back)"
    return ""


def structure_probe(R: FrequencyOracle, seed: int = 7) -> str:
    """Feed the real sampler boundary and random draws: '' if it emits what its structure says
    (module docstring), else what disagrees. Hadamard Response needs no probe ('')."""
    rng = np.random.default_rng(seed)
    n = int(min(4096, max(64, (1 << 21) // R.k)))
    x = rng.integers(0, R.k, n)
    inputs = np.asarray(R.categories)[x]
    if isinstance(R, UnaryEncoding):
        return _probe_unary(R, rng, x, inputs)
    if isinstance(R, OptimizedLocalHashing):
        return _probe_olh(R, rng, x, inputs)
    if isinstance(R, SubsetSelection):
        return _probe_subset(R, rng, x, inputs)
    return ""


def verify_structure(R: FrequencyOracle) -> ExactAudit:
    """The exact privacy audit of a frequency oracle at any k, by its structure (module docstring).

    Unary encodings: the loss is that of the two-bit channel (y_u, y_{u′}); it is computed from the
    randomizer's own integer thresholds and compared with e^ε exactly by ``verify_exact`` on the
    same mechanism with k = 2 (enumerated: every report, the sampler fed its cell boundaries), and
    the structure itself — bit j = 1[chunk j < T_j] — is checked on the real sampler at this k.
    OLH: the g-ary randomized response channel is audited exactly (``verify_exact`` of k-ary RR
    over g categories: the same ``rr_cells`` and ``rr_draw``), and the real sampler is checked to
    report the top m bits of its draws and y = RR(h_A(u)) at this k. Hadamard Response:
    ``verify_exact`` directly (its per-output extremes are structural, its sampler enumerable).
    """
    if isinstance(R, HadamardResponse):
        return verify_exact(R)
    if isinstance(R, SubsetSelection):
        # the proven bound, in exact arithmetic: (A_in/A_out)(k − d)/d · ((2^64 + k)/(2^64 − k))^e,
        # e = 2(d + 1) (Floyd) or ⌊(k − 1)/2⌋ (Bernoulli draws): ``rounding_exponent``
        a_in, a_out = R.cell_sizes
        d = R.subset_size
        ratio = Fraction(a_in * (R.k - d), a_out * d) * Fraction(TWO64 + R.k, TWO64 - R.k) ** R.rounding_exponent
        problem = structure_probe(R)
        return ExactAudit(
            R.epsilon, log_ratio(ratio), (0.0, 1.0, 0.0), f"by structure: subset selection (d = {d}, {R.method}), proven bound in exact arithmetic",
            within_epsilon=ratio <= exp_bounds(R.epsilon)[0], sampler_consistent=not problem, detail=problem,
        )
    if isinstance(R, UnaryEncoding):
        core: Randomizer = enumerated(type(R)(R.epsilon, (0.0, 1.0)))
        same = type(R)(R.epsilon, (0.0, 1.0)).thresholds == R.thresholds
        what = f"two-bit channel (k = 2, b = {R.chunk_bits})"
    elif isinstance(R, OptimizedLocalHashing) and R.g > 1024:
        # the g-ary channel's table (g² entries) is too big to list: its worst ratio is A_g/B_g
        # (keep over any other cell), compared with e^ε exactly; its sampler is ``rr_draw``, probed below
        a, b = R.cell_sizes
        ratio = Fraction(a, b)
        problem = structure_probe(R)
        return ExactAudit(
            R.epsilon, log_ratio(ratio), (0.0, 1.0, 0.0), f"by structure: g-ary randomized response (g = {R.g}), cells A/B exact",
            within_epsilon=ratio <= exp_bounds(R.epsilon)[0], sampler_consistent=not problem, detail=problem,
        )
    elif isinstance(R, OptimizedLocalHashing):
        core = KaryRandomizedResponse(R.epsilon, tuple(float(i) for i in range(R.g)))
        same = core.cell_sizes == R.cell_sizes  # type: ignore[attr-defined]
        what = f"g-ary randomized response (g = {R.g})"
    else:
        raise ParameterError(f"no structural audit for {type(R).__name__}")
    audit = verify_exact(core)
    problem = structure_probe(R) or ("" if same else "the core channel's cells differ from the randomizer's")
    return ExactAudit(
        R.epsilon,
        audit.max_log_ratio,
        audit.argmax,
        f"by structure: {what}, {audit.method}",
        audit.normalization_error,
        audit.within_epsilon,
        audit.log_prob_error,
        bool(audit.sampler_consistent) and not problem,
        "; ".join(x for x in (audit.detail, problem) if x),
    )

