"""Private learners for convex k-gons and unions of polygons on X_d² = {0..d}² (KMMS §4–§5).

Concept classes (KMMS §4–5), all closed sets on the grid X_d² = {0..d}² (labels in {0,1}):

* HALFPLANE_d: ``ldp.central.halfplane.Halfplane`` (Obs 4.1).
* CONVEX-k-GON = HALFPLANE^{∧k}: ``ConvexPolygon`` (vertices counter-clockwise).
* k-UNION-GON ⊆ TRIANGLE^{∨k} ⊆ (HALFPLANE^{∧3})^{∨k}: ``PolygonUnion`` (a union of convex pieces;
  a simple k-gon is a union of ≤ k triangles).

``GridReferee`` computes error(h) = Pr_{(x,y)~D}[h(x) ≠ y] exactly by enumerating the (d + 1)² grid
points (the formula of ``ldp.core.concepts.Referee``: η + (1 − 2η)·Pr_D[h ≠ c]; the core Referee's
schemas are bit vectors, not the grid).

Learners (all SetCoverLearner, ``ldp.central.set_cover.set_cover_loop``):

* ``learn_convex_kgon`` (KMMS Thm 4.7): conjunction form over HALFPLANE_d, Select = SelectHalfplane.
* ``learn_polygon_union_exact`` (KMMS Thm 5.1, toy sizes): disjunction form over HALFPLANE_d^{∧3};
  the exact continuous mechanism over triples of dual points, O(n⁶): n ≤ 12.
* ``learn_polygon_union_grid`` [ENG, reference spec K5(b)]: disjunction form over the finite,
  data-independent family of triangles with vertices on a g×g grid, with the finite exponential
  mechanism. Exact DP; agnostic when the target's vertices are off that grid (the cost is measured
  by ``grid_snap_error``).

Accounting. ``accounting="claim34"``: Claim 3.4 / Claim 4.3, (ε,δ)-DP for ε ∈ (0,1), δ < 1/e, with
ε̂ = ε/(2 ln(e/δ)) per selection in the exp(ε̂ q/2) convention; SelectHalfplane's density exp(ε_s q) is
2ε_s-DP, so it runs at ε_s = ε̂/2 (the reference spec's ε/(4 ln(e/δ))). ``"basic"``: Laplace at ε/2, each
selection at ε/(2T), pure ε-DP by basic composition (any ε). ``"auto"`` (default): claim34 when it
applies, basic otherwise. The choice depends on (ε, δ) only, never on the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from ldp.central.halfplane import (
    CellTable,
    Halfplane,
    box_half_width,
    check_grid_points,
    halfplane_cell_table,
    sample_in_trapezoid,
    select_halfplane,
    select_halfplane_utility_loss,
)
from ldp.central.set_cover import set_cover_loop, set_cover_parameters
from ldp.core.errors import ParameterError, require_epsilon, require_integer, require_probability
from ldp.core.exponential_mechanism import exponential_log_probabilities, exponential_mechanism
from ldp.core.learner_result import LearnerResult

__all__ = [
    "ConvexPolygon",
    "PolygonUnion",
    "HalfplaneIntersection",
    "TriangleUnion",
    "GridReferee",
    "grid_points",
    "random_convex_polygon",
    "random_polygon_union",
    "geometry_parameters",
    "kgon_sample_complexity",
    "kgon_claim31_errors",
    "learn_convex_kgon",
    "grid_triangles",
    "triangle_covers",
    "grid_triangle_log_probabilities",
    "learn_polygon_union_grid",
    "grid_snap_error",
    "exact_triangle_patterns",
    "exact_triangle_log_weights",
    "learn_polygon_union_exact",
    "EXACT_TRIANGLE_MAX_N",
]

EXACT_TRIANGLE_MAX_N = 12
"""Largest sample the exact triangle selection accepts (O(n⁶) triples of dual cells)."""


def grid_points(d: int) -> np.ndarray:
    """All (d + 1)² points of X_d² as an int64 (N, 2) array, x major."""
    v = np.arange(require_integer("d", d, 1) + 1)
    return np.stack(np.meshgrid(v, v, indexing="ij"), axis=-1).reshape(-1, 2)


# --- concepts and hypotheses ---


@dataclass(frozen=True)
class ConvexPolygon:
    """Closed convex polygon = the intersection of the halfplanes left of its edges (vertices CCW)."""

    vertices: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        v = np.asarray(self.vertices, dtype=np.float64)
        if v.ndim != 2 or v.shape[1] != 2 or len(v) < 3:
            raise ParameterError(f"a convex polygon needs ≥ 3 vertices (x, y); got {self.vertices!r}")
        e = np.roll(v, -1, axis=0) - v
        turn = e[:, 0] * np.roll(e, -1, axis=0)[:, 1] - e[:, 1] * np.roll(e, -1, axis=0)[:, 0]
        if np.any(turn < 0):
            raise ParameterError("vertices must be in counter-clockwise order and convex")

    def predict(self, points: np.ndarray) -> np.ndarray:
        p = np.asarray(points, dtype=np.float64)
        v = np.asarray(self.vertices, dtype=np.float64)
        w = np.roll(v, -1, axis=0)
        cross = (w[:, 0] - v[:, 0])[None, :] * (p[:, 1:2] - v[None, :, 1]) - (w[:, 1] - v[:, 1])[None, :] * (p[:, 0:1] - v[None, :, 0])
        return np.all(cross >= 0, axis=1).astype(np.int8)

    def describe(self) -> str:
        return f"{len(self.vertices)}-gon " + " ".join(f"({x:.3g},{y:.3g})" for x, y in self.vertices)


@dataclass(frozen=True)
class PolygonUnion:
    """Union of convex pieces (e.g. the triangles of a simple polygon): k-UNION-GON (KMMS §5)."""

    pieces: tuple[ConvexPolygon, ...]

    def predict(self, points: np.ndarray) -> np.ndarray:
        p = np.asarray(points)
        out = np.zeros(len(p), dtype=bool)
        for piece in self.pieces:
            out |= piece.predict(p) == 1
        return out.astype(np.int8)

    def describe(self) -> str:
        return " ∪ ".join(piece.describe() for piece in self.pieces) or "∅"


@dataclass(frozen=True)
class HalfplaneIntersection:
    """AND of halfplanes (the convex k-gon learner's output); empty = constant 1."""

    halfplanes: tuple[Halfplane, ...]

    def predict(self, points: np.ndarray) -> np.ndarray:
        p = np.asarray(points)
        out = np.ones(len(p), dtype=bool)
        for h in self.halfplanes:
            out &= h.predict(p) == 1
        return out.astype(np.int8)

    def describe(self) -> str:
        return " ∧ ".join(f"[{h.describe()}]" for h in self.halfplanes) or "TRUE"


@dataclass(frozen=True)
class TriangleUnion:
    """OR of pieces (the union-of-polygons learners' output); empty = constant 0."""

    pieces: tuple[HalfplaneIntersection | ConvexPolygon, ...]

    def predict(self, points: np.ndarray) -> np.ndarray:
        p = np.asarray(points)
        out = np.zeros(len(p), dtype=bool)
        for piece in self.pieces:
            out |= piece.predict(p) == 1
        return out.astype(np.int8)

    def describe(self) -> str:
        return " ∨ ".join(f"({t.describe()})" for t in self.pieces) or "FALSE"


@dataclass(frozen=True)
class GridReferee:
    """Exact error(h) on X_d² under D (default uniform), labels by ``target``, label noise η.

    error(h) = η + (1 − 2η)·Pr_{x~D}[h(x) ≠ c(x)], the formula of ``ldp.core.concepts.Referee``,
    by enumeration of the (d + 1)² grid points. ``sample`` draws i.i.d. labelled examples from D.
    """

    d: int
    target: ConvexPolygon | PolygonUnion | Halfplane | HalfplaneIntersection | TriangleUnion
    weights: np.ndarray | None = None
    label_noise: float = 0.0
    _grid: np.ndarray = field(init=False, repr=False, compare=False)
    _prob: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        grid = grid_points(self.d)
        if self.weights is None:
            prob = np.full(len(grid), 1.0 / len(grid))
        else:
            w = np.asarray(self.weights, dtype=np.float64).ravel()
            if w.shape != (len(grid),) or np.any(w < 0) or not w.sum() > 0:
                raise ParameterError(f"weights must be {len(grid)} non-negative numbers (one per grid point), not all 0")
            prob = w / w.sum()
        if not 0.0 <= self.label_noise < 0.5:
            raise ParameterError(f"label_noise must be in [0, 1/2); got {self.label_noise!r}")
        object.__setattr__(self, "_grid", grid)
        object.__setattr__(self, "_prob", prob)

    def clean_error(self, hypothesis: object) -> float:
        wrong = np.asarray(hypothesis.predict(self._grid)) != self.target.predict(self._grid)  # type: ignore[attr-defined]
        return float(np.sum(self._prob * wrong))

    def error(self, hypothesis: object) -> float:
        return self.label_noise + (1.0 - 2.0 * self.label_noise) * self.clean_error(hypothesis)

    def positive_rate(self) -> float:
        return float(np.sum(self._prob * (self.target.predict(self._grid) == 1)))

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        idx = rng.choice(len(self._grid), size=require_integer("n", n, 1), p=self._prob)
        pts = self._grid[idx]
        y = self.target.predict(pts).astype(np.int8)
        if self.label_noise > 0:
            y ^= (rng.random(n) < self.label_noise).astype(np.int8)
        return pts, y


def random_convex_polygon(k: int, d: int, rng: np.random.Generator, radius: tuple[float, float] = (0.38, 0.46)) -> ConvexPolygon:
    """k vertices on a circle around the grid centre (off-grid reals), angles spread out; convex, CCW."""
    if require_integer("k", k, 1) < 3:
        raise ParameterError(f"a convex polygon needs k ≥ 3; got k={k}")
    base = np.sort(rng.uniform(0, 2 * math.pi / k, 1))[0]
    jitter = rng.uniform(-0.2, 0.2, k) * (2 * math.pi / k)
    ang = base + np.arange(k) * 2 * math.pi / k + jitter
    r = rng.uniform(*radius) * d
    c = d / 2 + rng.uniform(-0.05, 0.05, 2) * d
    v = np.stack([c[0] + r * np.cos(ang), c[1] + r * np.sin(ang)], axis=1)
    return ConvexPolygon(tuple((float(a), float(b)) for a, b in np.clip(v, 0, d)))


def random_polygon_union(pieces: int, d: int, rng: np.random.Generator) -> PolygonUnion:
    """``pieces`` random triangles, each inscribed in an ellipse filling its own vertical band of the grid
    (vertices off the grid, angles spread out): a union of polygons (2 pieces: Pr[c = 1] ≈ 0.2)."""
    out = []
    width = d / require_integer("pieces", pieces, 1)
    for i in range(pieces):
        rx, ry = rng.uniform(0.85, 0.95) * width / 2, rng.uniform(0.35, 0.45) * d
        cx, cy = (i + 0.5) * width, d / 2 + rng.uniform(-0.04, 0.04) * d
        ang = rng.uniform(0, 2 * math.pi / 3) + np.arange(3) * 2 * math.pi / 3 + rng.uniform(-0.15, 0.15, 3) * 2 * math.pi / 3
        v = np.stack([cx + rx * np.cos(ang), cy + ry * np.sin(ang)], axis=1)
        out.append(ConvexPolygon(tuple((float(a), float(b)) for a, b in np.clip(v, 0, d))))
    return PolygonUnion(tuple(out))


# --- accounting and sample complexity ---


def geometry_parameters(k: int, alpha: float, beta: float, epsilon: float, delta: float, accounting: str = "auto",
                        conservative: bool = False) -> dict[str, float | str]:
    """SetCoverLearner parameters (T, Laplace scale, offset Δ, ε̂) with the accounting named (module doc)."""
    eps = require_epsilon(epsilon)
    if accounting == "auto":
        accounting = "claim34" if eps < 1 and require_probability("delta", delta) < 1 / math.e else "basic"
    prm: dict[str, float | str] = dict(set_cover_parameters(k, alpha, beta, eps, delta, conservative, accounting=accounting))
    prm["accounting"] = accounting
    prm["delta"] = 0.0 if accounting == "basic" else float(delta)
    return prm


def kgon_sample_complexity(k: int, alpha: float, beta: float, epsilon: float, delta: float, d: int, constant: float = 1.0) -> float:
    """KMMS Thm 4.7 (also Thm 5.1): C·(k/(αε))·ln(1/α)·ln(1/δ)·ln((dk/β)·ln(1/α)), natural logs, C = ``constant``."""
    a = require_probability("alpha", alpha, high=0.5)
    return constant * require_integer("k", k, 1) / (a * require_epsilon(epsilon)) * math.log(1 / a) * math.log(1 / require_probability("delta", delta)) * math.log(
        require_integer("d", d, 1) * k / require_probability("beta", beta, high=0.5) * math.log(1 / a))


def kgon_claim31_errors(n: int, k: int, alpha: float, beta: float, epsilon: float, delta: float, d: int, accounting: str = "auto") -> float:
    """KMMS Claim 3.1's bound on the sample errors, max{αn/2, 4Δ} + 4kλ·ln(2/α), with λ from Lemma 4.6.

    λ = (8/ε_s)·ln(2d/β′), ε_s = ε̂/2 the SelectHalfplane parameter and β′ = β/(4k ln(2/α)) per call (Thm 3.2).
    """
    prm = geometry_parameters(k, alpha, beta, epsilon, delta, accounting)
    lam = select_halfplane_utility_loss(float(prm["eps_hat"]) / 2, beta / (4 * k * math.log(2 / alpha)), d)
    return max(alpha * n / 2, 4 * float(prm["offset"])) + 4 * k * lam * math.log(2 / alpha)


def _check_sample(points: np.ndarray, labels: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    p = check_grid_points(points, d)
    y = np.asarray(labels)
    if y.shape != (len(p),) or not np.all((y == 0) | (y == 1)):
        raise ParameterError(f"labels must be n = {len(p)} values in {{0, 1}}; got shape {y.shape}")
    return p, y.astype(np.int8)


def _result(h: object, n: int, epsilon: float, prm: dict[str, float | str], algorithm: str, **details: object) -> LearnerResult:
    return LearnerResult(h, n, float(epsilon), float(prm["delta"]), algorithm,
                         details={"T": prm["T"], "eps_hat": prm["eps_hat"], "accounting": prm["accounting"], **details})


# --- convex k-gons: SetCoverLearner ∧ SelectHalfplane (KMMS Thm 4.7) ---


def learn_convex_kgon(points: np.ndarray, labels: np.ndarray, k: int, alpha: float, beta: float, epsilon: float, delta: float,
                      d: int, rng: np.random.Generator, accounting: str = "auto", conservative: bool = False) -> LearnerResult:
    """KMMS Thm 4.7: SetCoverLearner (conjunction form) over HALFPLANE_d with SelectHalfplane.

    Privacy: (ε,δ)-DP by Claim 4.3 (ε̂ = ε/(2ln(e/δ)), SelectHalfplane at ε̂/2) or pure ε-DP ("basic").
    Output: an intersection of T = ⌈2k ln(2/α)⌉ halfplanes (improper). Cost: T selections on the
    examples still alive, each O(n³ log n).
    """
    p, y = _check_sample(points, labels, d)
    prm = geometry_parameters(k, alpha, beta, epsilon, delta, accounting, conservative)
    eps_select = float(prm["eps_hat"]) / 2  # density exp(ε_s q) is 2ε_s-DP: ε_s = ε̂/2 matches ExpMech(ε̂)
    slabs: list[int] = []
    # Examples at one grid point are one dual line: select over the distinct alive locations with
    # per-location counts (the same regions and qualities, so the same distribution).
    loc, inv = np.unique(p, axis=0, return_inverse=True)
    inv = inv.ravel()

    def select(alive: np.ndarray, to_cover: np.ndarray, b: float) -> tuple[object, np.ndarray]:
        cw = np.bincount(inv, weights=(alive & to_cover).astype(np.float64), minlength=len(loc))
        pw = np.bincount(inv, weights=(alive & ~to_cover).astype(np.float64), minlength=len(loc))
        live = (cw + pw) > 0

        def quality(counts: np.ndarray) -> np.ndarray:
            return np.minimum(counts[..., 0] - b / k, -counts[..., 1])

        if not np.any(live):  # nothing left: q is one constant, so the density is uniform on F × D
            sel = _uniform_halfplane(d, rng)
        else:
            s = select_halfplane(loc[live], np.stack([cw[live], pw[live]], axis=1), quality, eps_select, d, rng)
            slabs.append(s.n_slabs)
            sel = s.halfplane
        return sel, (sel.predict(loc) == 0)[inv]

    pieces = set_cover_loop(y, k, {kk: float(v) for kk, v in prm.items() if kk != "accounting"}, rng, select, "conjunction")
    h = HalfplaneIntersection(tuple(pc for pc in pieces if isinstance(pc, Halfplane)))
    return _result(h, len(p), epsilon, prm, "SetCoverLearner ∧ SelectHalfplane (KMMS Thm 4.7, Claim 4.3)", slabs=tuple(slabs))


def _uniform_halfplane(d: int, rng: np.random.Generator) -> Halfplane:
    """A uniform dual point of F × D (SelectHalfplane on an empty sample)."""
    h = box_half_width(d)
    return Halfplane(float(rng.uniform(-h, 3 * h)), float(rng.uniform(-h, h)), d)


# --- unions of polygons over a finite grid-triangle family [ENG] ---


def grid_triangles(g: int, d: int) -> np.ndarray:
    """All non-degenerate triangles (H, 3, 2) with vertices on the g×g grid {round(i·d/(g−1))}² ⊆ X_d² (CCW)."""
    if require_integer("g", g, 1) < 2:
        raise ParameterError(f"the triangle grid needs g ≥ 2; got g={g}")
    coords = np.unique(np.round(np.linspace(0, require_integer("d", d, 1), g)).astype(np.int64))
    verts = np.stack(np.meshgrid(coords, coords, indexing="ij"), axis=-1).reshape(-1, 2)
    tri = verts[np.array(list(combinations(range(len(verts)), 3)))]
    area2 = (tri[:, 1, 0] - tri[:, 0, 0]) * (tri[:, 2, 1] - tri[:, 0, 1]) - (tri[:, 1, 1] - tri[:, 0, 1]) * (tri[:, 2, 0] - tri[:, 0, 0])
    tri = tri[area2 != 0]
    flip = area2[area2 != 0] < 0
    tri[flip] = tri[flip][:, ::-1]
    return tri


def triangle_covers(triangles: np.ndarray, points: np.ndarray) -> np.ndarray:
    """(H, n) bool: closed triangle h contains point i; exact integer cross products."""
    t = np.asarray(triangles, dtype=np.int64)
    p = np.asarray(points, dtype=np.int64)
    inside = np.ones((len(t), len(p)), dtype=bool)
    for e in range(3):
        v, w = t[:, e], t[:, (e + 1) % 3]
        inside &= (w[:, 0:1] - v[:, 0:1]) * (p[None, :, 1] - v[:, 1:2]) - (w[:, 1:2] - v[:, 1:2]) * (p[None, :, 0] - v[:, 0:1]) >= 0
    return inside


def _grid_qualities(covers: np.ndarray, inv: np.ndarray, alive: np.ndarray, to_cover: np.ndarray, b: float, k: int) -> np.ndarray:
    """q(h) = min{c(h) − b/k, −p(h)} for every triangle: ``covers`` (H, L) float32 over the L distinct
    sample locations, ``inv`` maps examples to locations; two matrix-vector products (float32 sums of
    0/1 counts are exact below 2^24 examples)."""
    n_loc = covers.shape[1]
    cw = np.bincount(inv, weights=(alive & to_cover).astype(np.float64), minlength=n_loc).astype(np.float32)
    pw = np.bincount(inv, weights=(alive & ~to_cover).astype(np.float64), minlength=n_loc).astype(np.float32)
    return np.minimum((covers @ cw).astype(np.float64) - b / k, -(covers @ pw).astype(np.float64))


def _grid_family(triangles: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(covers over distinct locations as bool, the same as float32, example → location index)."""
    loc, inv = np.unique(np.asarray(points, dtype=np.int64), axis=0, return_inverse=True)
    covers = triangle_covers(triangles, loc)
    return covers, covers.astype(np.float32), inv.ravel()


def grid_triangle_log_probabilities(triangles: np.ndarray, points: np.ndarray, alive: np.ndarray, to_cover: np.ndarray, b: float,
                                    k: int, eps_hat: float) -> np.ndarray:
    """Exact log-probabilities of one grid-triangle selection, from the qualities the learner samples with:
    ExpMech(ε̂) over ``triangles``, Pr ∝ exp(ε̂ q/2); ε̂-DP for a fixed b (Δq = 1)."""
    _, covers_f, inv = _grid_family(triangles, points)
    q = _grid_qualities(covers_f, inv, np.asarray(alive, dtype=bool), np.asarray(to_cover, dtype=bool), b, k)
    return exponential_log_probabilities(q, eps_hat)


def learn_polygon_union_grid(points: np.ndarray, labels: np.ndarray, k: int, alpha: float, beta: float, epsilon: float,
                             delta: float, d: int, rng: np.random.Generator, grid: int = 6, accounting: str = "auto",
                             conservative: bool = False) -> LearnerResult:
    """SetCoverLearner (disjunction form) over the grid triangles with the finite exponential mechanism.

    Exact DP: Claim 3.4 applies verbatim (ExpMech at ε̂), or pure ε-DP ("basic"). The family is fixed
    before the data (g×g vertex grid, |H| ≤ C(g², 3)); utility is agnostic when the target's vertices
    are off the grid (``grid_snap_error``). λ = (2/ε̂)·ln(|H|·4k ln(2/α)/β) (Prop 2.5). Cost per
    selection: two (|H| × L) matrix-vector products, L ≤ (d + 1)² distinct sample points.
    """
    p, y = _check_sample(points, labels, d)
    prm = geometry_parameters(k, alpha, beta, epsilon, delta, accounting, conservative)
    tri = grid_triangles(grid, d)
    covers, covers_f, inv = _grid_family(tri, p)

    def select(alive: np.ndarray, to_cover: np.ndarray, b: float) -> tuple[object, np.ndarray]:
        i = exponential_mechanism(_grid_qualities(covers_f, inv, alive, to_cover, b, k), float(prm["eps_hat"]), rng)
        return ConvexPolygon(tuple((float(a), float(c)) for a, c in tri[i])), covers[i][inv]

    pieces = set_cover_loop(y, k, {kk: float(v) for kk, v in prm.items() if kk != "accounting"}, rng, select, "disjunction")
    h = TriangleUnion(tuple(pc for pc in pieces if isinstance(pc, ConvexPolygon)))
    return _result(h, len(p), epsilon, prm, f"SetCoverLearner ∨ grid triangles g={grid} (KMMS §5, finite ExpMech)", family_size=len(tri))


def grid_snap_error(target: ConvexPolygon | PolygonUnion, g: int, d: int) -> float:
    """The agnostic cost of the grid family: uniform-D error of the target with every vertex snapped to
    the nearest g×g grid vertex (an upper bound on the best grid-triangle union of the same shape)."""
    coords = np.unique(np.round(np.linspace(0, d, g)))

    def snap(poly: ConvexPolygon) -> list[ConvexPolygon]:
        v = np.asarray(poly.vertices)
        s = coords[np.abs(v[:, :, None] - coords[None, None, :]).argmin(axis=2)]
        out = []
        for j in range(1, len(s) - 1):  # fan triangulation of the snapped (possibly degenerate) polygon
            t = np.stack([s[0], s[j], s[j + 1]])
            a2 = (t[1, 0] - t[0, 0]) * (t[2, 1] - t[0, 1]) - (t[1, 1] - t[0, 1]) * (t[2, 0] - t[0, 0])
            if a2 > 0:
                out.append(ConvexPolygon(tuple((float(a), float(b)) for a, b in t)))
        return out

    pieces = [target] if isinstance(target, ConvexPolygon) else list(target.pieces)
    snapped = [t for poly in pieces for t in snap(poly)]
    return GridReferee(d, target).error(TriangleUnion(tuple(snapped)))


# --- unions of polygons, exact continuous selection over triples of dual points (toy sizes) ---


@dataclass(frozen=True)
class _Patterns:
    masks: np.ndarray  # (m, n) bool: examples labelled 1 by the halfplanes of pattern class j
    area: np.ndarray  # (m,) total area of the class in F × D
    cells: list[np.ndarray]  # per class: indices into the cell table
    table: CellTable


def exact_triangle_patterns(points: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct labellings (m, n) of the sample by HALFPLANE_d with their total dual areas (m,)."""
    pat = _patterns(check_grid_points(points, d), d)
    return pat.masks, pat.area


def _patterns(p: np.ndarray, d: int) -> _Patterns:
    n = len(p)
    table = halfplane_cell_table(p, np.eye(n), lambda c: np.zeros(c.shape[:-1]), 1.0, d)
    keep = table.area > 0
    ones = table.counts[keep] == 0  # labelled 1 = not labelled 0
    masks, inv = np.unique(ones, axis=0, return_inverse=True)
    inv = inv.ravel()
    area = np.bincount(inv, weights=table.area[keep], minlength=len(masks))
    kept = np.flatnonzero(keep)
    cells = [kept[inv == j] for j in range(len(masks))]
    return _Patterns(masks, area, cells, table)


def exact_triangle_log_weights(masks: np.ndarray, area: np.ndarray, alive: np.ndarray, to_cover: np.ndarray, b: float, k: int,
                               eps_select: float) -> np.ndarray:
    """(m, m, m) log-weights ln(A_i A_j A_l) + ε_s·q of the triples of labelling classes: the exact
    continuous selection over (F × D)³ with density ∝ exp(ε_s q(triangle)) (2ε_s-DP for Δq = 1).
    The triangle of a triple labels 1 the examples all three halfplanes label 1 (∨ form: it covers them)."""
    with np.errstate(divide="ignore"):
        la = np.log(area)
    tri = masks[:, None, None, :] & masks[None, :, None, :] & masks[None, None, :, :]  # (m, m, m, n)
    c = tri[..., alive & to_cover].sum(axis=-1)
    pr = tri[..., alive & ~to_cover].sum(axis=-1)
    return la[:, None, None] + la[None, :, None] + la[None, None, :] + eps_select * np.minimum(c - b / k, -pr.astype(np.float64))


def _uniform_point_in_class(pat: _Patterns, j: int, p: np.ndarray, d: int, rng: np.random.Generator) -> Halfplane:
    table = pat.table
    cells = pat.cells[j]
    c = cells[int(rng.choice(len(cells), p=table.area[cells] / table.area[cells].sum()))]
    s, r, z = int(table.slab[c]), int(table.rank[c]), int(table.z[c])
    h = box_half_width(d)
    p = np.unique(p, axis=0)  # the cell table merged duplicate examples into one line
    a0, a1 = float(table.edges[s]), float(table.edges[s + 1])
    beta = np.clip(p[:, 1] - 0.5 * (a0 + a1) * p[:, 0], -h, h)
    order = np.argsort(beta, kind="stable")  # the order the cell table used in this slab
    lo = int(order[r - 1]) if r > 0 else -1
    hi = int(order[r]) if r < len(order) else -1
    a, b = sample_in_trapezoid(p, lo, hi, a0, a1, h, rng)
    return Halfplane(a if z == 1 else a + 4.0 * d * d, b, d)


def learn_polygon_union_exact(points: np.ndarray, labels: np.ndarray, k: int, alpha: float, beta: float, epsilon: float,
                              delta: float, d: int, rng: np.random.Generator, accounting: str = "auto") -> LearnerResult:
    """KMMS Thm 5.1 at toy size: SetCoverLearner ∨ over HALFPLANE_d^{∧3}, exact continuous selection.

    Each selection draws three dual points with density ∝ exp(ε_s·q) on (F × D)³ (ε_s = ε̂/2, so
    2ε_s = ε̂ per selection as in Claim 3.4): a triple of labelling classes with probability
    ∝ area₁·area₂·area₃·exp(ε_s q), then a uniform point in each. O(n⁶): n ≤ ``EXACT_TRIANGLE_MAX_N``.
    """
    p, y = _check_sample(points, labels, d)
    if len(p) > EXACT_TRIANGLE_MAX_N:
        raise ParameterError(f"the exact triangle selection is O(n⁶); n = {len(p)} > {EXACT_TRIANGLE_MAX_N}: use learn_polygon_union_grid")
    prm = geometry_parameters(k, alpha, beta, epsilon, delta, accounting)
    eps_select = float(prm["eps_hat"]) / 2
    pat = _patterns(p, d)
    m = len(pat.area)

    def select(alive: np.ndarray, to_cover: np.ndarray, b: float) -> tuple[object, np.ndarray]:
        lw = exact_triangle_log_weights(pat.masks, pat.area, alive, to_cover, b, k, eps_select)
        flat = int(np.argmax(lw.ravel() + rng.gumbel(size=lw.size)))
        i, j, l_ = np.unravel_index(flat, (m, m, m))
        hs = tuple(_uniform_point_in_class(pat, int(t), p, d, rng) for t in (i, j, l_))
        piece = HalfplaneIntersection(hs)
        return piece, piece.predict(p) == 1

    pieces = set_cover_loop(y, k, {kk: float(v) for kk, v in prm.items() if kk != "accounting"}, rng, select, "disjunction")
    h = TriangleUnion(tuple(pc for pc in pieces if isinstance(pc, HalfplaneIntersection)))
    return _result(h, len(p), epsilon, prm, "SetCoverLearner ∨ exact HALFPLANE^{∧3} selection (KMMS Thm 5.1, toy)", patterns=m)

