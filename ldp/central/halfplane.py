"""SelectHalfplane: the continuous exponential mechanism over HALFPLANE_d (KMMS §4).

HALFPLANE_d (KMMS Obs 4.1). With H = 2d², a halfplane is a dual point (â, b) ∈ F × D,
F = [−H, 3H], D = [−H, H]: for â ≤ H, a = â and z = +1; for â > H, a = â − 4d² and z = −1;
f_{â,b}(x, y) = 1 iff z·y ≥ z·(a·x + b). On X_d² = {0..d}² every real halfplane agrees with one of
these (Obs 4.1).

SelectHalfplane (KMMS §4, algorithm box). Every example (x, y) is the dual line
ℓ_{x,y} = {(a, b): b = y − x·a}. The lines cut D² into regions on which every f_{a,b} labels the sample
the same way (Obs 4.4), so a quality q of the sample is constant on each region. The mechanism outputs
(â, b) with density exp(ε·q(f_{â,b}))/N on F × D; equivalently it picks a region r with probability
∝ area(r)·exp(ε q(r)) and returns a uniform point of r.

Privacy: density ∝ exp(ε q) with Δq = 1, so the mechanism is **2ε-DP** (KMMS §4, "Privacy analysis").
Utility (Lemma 4.6): if some f has q(f) ≥ ν, the output has q ≥ ν − (8/ε)·ln(2d/β) with probability ≥ 1 − β
(box area 32d⁴, every region has area ≥ d⁻⁴/4 by Claim 4.5).

Exact implementation [ENG] (reference spec K3): a vertical slab decomposition of the arrangement.

1. Slab edges: the a-values of all pairwise crossings (y_i − y_j)/(x_i − x_j) (x_i ≠ x_j), of each
   line with the box edges b = ±H (a = (y_i ∓ H)/x_i), and ±H. Between two edges no two lines cross
   and no line leaves the box, so inside a slab β_i(a) = clip(y_i − a·x_i, ±H) are linear and keep
   their order.
2. In each slab, sort β_i at the slab's midpoint. The n + 1 gaps (with the box edges) are trapezoids of
   exact area width × gap(midpoint). For z = +1 the examples labelled 0 in gap r (b strictly between
   the r-th and (r+1)-th smallest β) are the r smallest; for z = −1 they are the other n − r.
3. Gumbel-max over ln(area) + ε·q of all 2 × slabs × (n + 1) cells (streamed over chunks of slabs,
   so the memory is O(chunk·n)); zero-area gaps get weight 0 and are never chosen.
4. A uniform point of the chosen trapezoid: a with density ∝ the linear gap height (closed-form
   inverse CDF), then b uniform between the two bounding lines.

Duplicate examples give identical lines: they are merged into one line carrying the summed weights,
so the cost depends on the number of distinct points (≤ (d + 1)²). Equal x gives parallel lines (no
crossing, no edge): no special case. Integer inputs make every edge a correctly rounded
quotient of integers, so equal rational edges are equal floats and deduplicate exactly.

Cost: O(n²) slabs × O(n log n) per slab = **O(n³ log n) time** for n distinct points (fewer slabs on a
small grid: slopes of grid differences repeat), vectorized over chunks of slabs. The
slab decomposition has Θ(n³) trapezoids although the arrangement has only O(n²) faces; a topological
sweep over the faces (O(n²) with O(1) updates per swap) would need a Python-level loop per event and was
not worth it at the sizes where the learner is usable (docs/central.md has the timings).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ldp.core.errors import ParameterError, require_epsilon, require_integer, require_probability

__all__ = [
    "Halfplane",
    "HalfplaneSelection",
    "CellTable",
    "Quality",
    "box_half_width",
    "check_grid_points",
    "slab_edges",
    "select_halfplane",
    "halfplane_cell_table",
    "halfplane_density",
    "zero_counts",
    "select_halfplane_utility_loss",
    "sample_in_trapezoid",
]

Quality = Callable[[np.ndarray], np.ndarray]
"""q as a function of the weighted counts of examples labelled 0: (..., m) → (...)."""

_CHUNK_ELEMENTS = 1 << 20  # slabs per chunk × (n + 1): bounds the working memory


def box_half_width(d: int) -> float:
    """H = 2d²: D = [−H, H], F = [−H, 3H] (KMMS Obs 4.1)."""
    return 2.0 * require_integer("d", d, 1) ** 2


@dataclass(frozen=True)
class Halfplane:
    """f_{â,b} ∈ HALFPLANE_d: 1 iff z·y ≥ z·(a·x + b), a = â (z = +1) or â − 4d² (z = −1) (KMMS Obs 4.1)."""

    a_hat: float
    b: float
    d: int

    @property
    def z(self) -> int:
        return -1 if self.a_hat > box_half_width(self.d) else 1

    @property
    def a(self) -> float:
        return self.a_hat - 4.0 * self.d**2 if self.z == -1 else self.a_hat

    def predict(self, points: np.ndarray) -> np.ndarray:
        p = np.asarray(points, dtype=np.float64)
        return (self.z * p[:, 1] >= self.z * (self.a * p[:, 0] + self.b)).astype(np.int8)

    def describe(self) -> str:
        return f"y {'≥' if self.z == 1 else '≤'} {self.a:.4g}·x + {self.b:.4g}"


def check_grid_points(points: np.ndarray, d: int) -> np.ndarray:
    """(n, 2) integer points of X_d² = {0..d}², as float64 (exact); clear error otherwise."""
    require_integer("d", d, 1)
    p = np.asarray(points)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ParameterError(f"points must be an (n, 2) array of grid points; got shape {p.shape}")
    if p.size and (not np.all(np.equal(np.mod(p, 1), 0)) or p.min() < 0 or p.max() > d):
        raise ParameterError(f"points must be integers in {{0..d}}² with d={d}; got values in [{p.min()}, {p.max()}]")
    return p.astype(np.float64)


def slab_edges(points: np.ndarray, d: int) -> np.ndarray:
    """Sorted distinct a-values where the order of the clipped dual lines can change (step 1 above)."""
    p = check_grid_points(points, d)
    h = box_half_width(d)
    x, y = p[:, 0], p[:, 1]
    i, j = np.triu_indices(len(x), k=1)
    dx = x[i] - x[j]
    keep = dx != 0
    cross = (y[i] - y[j])[keep] / dx[keep]
    nz = x != 0
    edge = np.concatenate([(y[nz] - h) / x[nz], (y[nz] + h) / x[nz]])
    a = np.concatenate([cross, edge, [-h, h]])
    return np.unique(a[(a >= -h) & (a <= h)])


def _clipped(p: np.ndarray, a: np.ndarray, h: float) -> np.ndarray:
    """β_i(a) = clip(y_i − a·x_i, ±H) for every a (rows) and example i (columns)."""
    return np.clip(p[None, :, 1] - a[:, None] * p[None, :, 0], -h, h)


@dataclass(frozen=True)
class _Chunk:
    start: int  # index of the first slab of the chunk
    order: np.ndarray  # (c, n) examples sorted by β at the slab midpoint
    area: np.ndarray  # (c, n + 1) trapezoid areas (z = ±1 share them)
    zeros_pos: np.ndarray  # (c, n + 1, m) weights of the examples labelled 0, z = +1
    zeros_neg: np.ndarray  # (c, n + 1, m) the same for z = −1


def _chunks(p: np.ndarray, weights: np.ndarray, edges: np.ndarray, h: float) -> Iterator[_Chunk]:
    n = len(p)
    total = weights.sum(axis=0)
    per = max(1, _CHUNK_ELEMENTS // (n + 1))
    for s in range(0, len(edges) - 1, per):
        a0, a1 = edges[s : s + per + 1][:-1], edges[s + 1 : s + per + 1]
        mid = 0.5 * (a0 + a1)
        beta = _clipped(p, mid, h)
        order = np.argsort(beta, axis=1, kind="stable")
        sb = np.take_along_axis(beta, order, axis=1)
        c = len(mid)
        bounds = np.concatenate([np.full((c, 1), -h), sb, np.full((c, 1), h)], axis=1)
        area = (a1 - a0)[:, None] * np.maximum(np.diff(bounds, axis=1), 0.0)
        cum = np.concatenate([np.zeros((c, 1, weights.shape[1])), np.cumsum(weights[order], axis=1)], axis=1)
        yield _Chunk(s, order, area, cum, total[None, None, :] - cum)


def _prepare(points: np.ndarray, weights: np.ndarray, epsilon: float, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    p = check_grid_points(points, d)
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim == 1:
        w = w[:, None]
    if w.shape[0] != len(p):
        raise ParameterError(f"weights must have one row per point; got {w.shape[0]} rows for {len(p)} points")
    if len(p) == 0:
        raise ParameterError("SelectHalfplane needs at least one example (n = 0)")
    # Duplicate examples are one dual line: merge them, summing their weights (same regions, same q).
    p, inv = np.unique(p, axis=0, return_inverse=True)
    w = np.stack([np.bincount(inv.ravel(), weights=w[:, j], minlength=len(p)) for j in range(w.shape[1])], axis=1)
    return p, w, slab_edges(p, d), box_half_width(d), require_epsilon(epsilon)


def _log_weights(area: np.ndarray, q: np.ndarray, epsilon: float) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(area) + epsilon * q  # log 0 = −inf: an empty gap is never chosen


def zero_counts(halfplane: Halfplane, points: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted counts of the examples that ``halfplane`` labels 0 (direct evaluation, no cells)."""
    w = np.asarray(weights, dtype=np.float64)
    w = w[:, None] if w.ndim == 1 else w
    return ((halfplane.predict(points) == 0)[:, None] * w).sum(axis=0)


@dataclass(frozen=True)
class HalfplaneSelection:
    """The selected halfplane, its cell (z, slab, gap rank), the cell's counts and area, and the slab count."""

    halfplane: Halfplane
    z: int
    slab: int
    rank: int
    counts: np.ndarray
    area: float
    n_slabs: int


def sample_in_trapezoid(p: np.ndarray, lo: int, hi: int, a0: float, a1: float, h: float, rng: np.random.Generator) -> tuple[float, float]:
    """A uniform point (a, b) of the trapezoid {a0 ≤ a ≤ a1, L(a) ≤ b ≤ U(a)} of the line space.

    Used to draw a halfplane uniformly from a cell of the arrangement (KMMS SelectHalfplane)
    by ``select_halfplane`` and by the polygon learners of ``ldp.central.polygons``.

    Parameters
    ----------
    p : numpy.ndarray
        The (m, 2) points; the line of point i is b = p[i, 1] − a·p[i, 0].
    lo, hi : int
        Indices of the points whose lines bound the cell below (L) and above (U); −1: the box edge −h / +h.
    a0, a1 : float
        The slab's slope range.
    h : float
        The box half-width: lines are clipped to [−h, h].
    rng : numpy.random.Generator
        Two uniforms are drawn.

    Returns
    -------
    tuple of (float, float)
        (a, b), uniform on the trapezoid (inverse CDF in a, then uniform in b).
    """

    def bound(i: int, a: float, edge: float) -> float:
        return edge if i < 0 else float(np.clip(p[i, 1] - a * p[i, 0], -h, h))

    g0 = bound(hi, a0, h) - bound(lo, a0, -h)
    g1 = bound(hi, a1, h) - bound(lo, a1, -h)
    u, v = rng.random(2)
    # inverse CDF of the density ∝ g0 + (g1 − g0)·t on [0, 1], in a form stable when g1 ≈ g0
    t = u * (g0 + g1) / (g0 + math.sqrt(max((1 - u) * g0 * g0 + u * g1 * g1, 0.0)))
    a = a0 + min(max(t, 0.0), 1.0) * (a1 - a0)
    low, high = bound(lo, a, -h), bound(hi, a, h)
    return a, low + v * (high - low)


def select_halfplane(
    points: np.ndarray,
    weights: np.ndarray,
    quality: Quality,
    epsilon: float,
    d: int,
    rng: np.random.Generator,
) -> HalfplaneSelection:
    """KMMS SelectHalfplane: (â, b) with density exp(ε·q(f_{â,b}))/N on F × D; **2ε-DP** for Δq ≤ 1.

    ``points`` are the examples (n, 2) in {0..d}²; ``weights`` (n, m) per-example weights (e.g. one-hot
    label columns); ``quality(counts)`` maps the weighted counts of the examples labelled 0 to q.
    Exact (slab decomposition, Gumbel-max, uniform point in the trapezoid); O(n³ log n) time.
    """
    p, w, edges, h, eps = _prepare(points, weights, epsilon, d)
    best = -math.inf
    pick: tuple[int, int, int] | None = None  # (z, slab, gap rank) of the best noisy cell so far
    chosen_counts = np.zeros(w.shape[1])
    chosen_area = 0.0
    lines: tuple[int, int] = (-1, -1)
    for ch in _chunks(p, w, edges, h):
        for z, zeros in ((1, ch.zeros_pos), (-1, ch.zeros_neg)):
            lw = _log_weights(ch.area, np.asarray(quality(zeros), dtype=np.float64), eps)
            noisy = lw + rng.gumbel(size=lw.shape)
            i = int(np.argmax(noisy))
            if noisy.flat[i] > best:
                best = float(noisy.flat[i])
                s, r = divmod(i, lw.shape[1])
                pick = (z, ch.start + s, r)
                chosen_counts = zeros[s, r].copy()
                chosen_area = float(ch.area[s, r])
                order = ch.order[s]
                lines = (int(order[r - 1]) if r > 0 else -1, int(order[r]) if r < len(order) else -1)
    if pick is None or not math.isfinite(best):
        raise ParameterError("SelectHalfplane found no cell of positive area (is d ≥ 1?)")
    z, slab, rank = pick
    a, b = sample_in_trapezoid(p, lines[0], lines[1], float(edges[slab]), float(edges[slab + 1]), h, rng)
    a_hat = a if z == 1 else a + 4.0 * d * d
    return HalfplaneSelection(Halfplane(a_hat, b, d), z, slab, rank, chosen_counts, chosen_area, len(edges) - 1)


@dataclass(frozen=True)
class CellTable:
    """Every cell of the mechanism (tiny n only): z, slab, rank, area, counts and log-weight ln(area) + ε q."""

    edges: np.ndarray
    z: np.ndarray
    slab: np.ndarray
    rank: np.ndarray
    area: np.ndarray
    counts: np.ndarray
    log_weight: np.ndarray

    def probabilities(self) -> np.ndarray:
        """Exact cell probabilities of the mechanism (softmax of the log-weights)."""
        lw = self.log_weight
        mx = np.max(lw)
        e = np.exp(lw - mx)
        return e / e.sum()


def halfplane_cell_table(points: np.ndarray, weights: np.ndarray, quality: Quality, epsilon: float, d: int) -> CellTable:
    """All cells with the log-weights the sampler uses (same code path), for exact privacy checks."""
    p, w, edges, h, eps = _prepare(points, weights, epsilon, d)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("z", "slab", "rank", "area", "counts", "lw")}
    for ch in _chunks(p, w, edges, h):
        c, g = ch.area.shape
        for z, zeros in ((1, ch.zeros_pos), (-1, ch.zeros_neg)):
            parts["z"].append(np.full(c * g, z))
            parts["slab"].append(np.repeat(np.arange(ch.start, ch.start + c), g))
            parts["rank"].append(np.tile(np.arange(g), c))
            parts["area"].append(ch.area.ravel())
            parts["counts"].append(zeros.reshape(c * g, -1))
            parts["lw"].append(_log_weights(ch.area, np.asarray(quality(zeros), dtype=np.float64), eps).ravel())
    cat = {k: np.concatenate(v) for k, v in parts.items()}
    return CellTable(edges, cat["z"], cat["slab"], cat["rank"], cat["area"], cat["counts"], cat["lw"])


def halfplane_density(table: CellTable, points: np.ndarray, d: int, a_hat: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The mechanism's output density at dual points (â, b): P(cell)/area(cell) of the cell holding each.

    Locates each query in the table's slab (searchsorted on the edges) and gap (rank = number of clipped
    dual lines strictly below b at that a). Query points must not lie on a dual line or slab edge.
    """
    p = np.unique(check_grid_points(points, d), axis=0)  # the lines the table was built from
    h = box_half_width(d)
    ah = np.asarray(a_hat, dtype=np.float64)
    bb = np.asarray(b, dtype=np.float64)
    z = np.where(ah > h, -1, 1)
    a = np.where(z == -1, ah - 4.0 * d * d, ah)
    slab = np.searchsorted(table.edges, a, side="right") - 1
    rank = (_clipped(p, a, h) < bb[:, None]).sum(axis=1)
    key = {(int(zz), int(s), int(r)): i for i, (zz, s, r) in enumerate(zip(table.z, table.slab, table.rank))}
    idx = np.array([key[(int(zz), int(s), int(r))] for zz, s, r in zip(z, slab, rank)])
    prob = table.probabilities()
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(table.area[idx] > 0, prob[idx] / table.area[idx], 0.0)


def select_halfplane_utility_loss(epsilon: float, beta: float, d: int) -> float:
    """λ = (8/ε)·ln(2d/β): Pr[q(out) < max q − λ] ≤ β (KMMS Lemma 4.6, density ∝ exp(ε q))."""
    return 8.0 / require_epsilon(epsilon) * math.log(2 * require_integer("d", d, 1) / require_probability("beta", beta, high=0.5))
