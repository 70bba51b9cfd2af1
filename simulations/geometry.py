"""Private learning of convex k-gons and unions of polygons (KMMS Thm 4.7, Thm 5.1): error against n.

For each k ∈ ``ks`` and ε ∈ ``epsilons``, draws a random convex k-gon (vertices off the grid) on
X_d² = {0..d}², samples n labelled examples from the uniform distribution on the grid, runs the convex
k-gon learner (SetCoverLearner ∧ SelectHalfplane, exact continuous exponential mechanism) and measures
the exact error with ``GridReferee``. Next to it: the paper's sample complexity (Thm 4.7 with constant 1)
and the all-zero error Pr[c = 1] (what the learner collapses to when n is too small).

Unions of polygons (Thm 5.1): the grid-triangle variant (finite exponential mechanism over the triangles
with vertices on a g×g grid) on a union of ``union_pieces`` random triangles, with the agnostic cost of
the grid (the target's error after snapping its vertices to the grid); the exact O(n⁶) variant runs at
toy size n = ``exact_n`` only.

Accounting (``ldp.central.polygons.geometry_parameters``, "auto"): Claim 3.4 / 4.3, (ε,δ)-DP, for
ε < 1; pure ε-DP by basic composition for ε ≥ 1 (Claim 3.4 is stated for ε < 1 only).

Writes ``result.json``, ``errors.csv``, ``table.md``, ``errors.png`` (error against n) and
``polygons.png`` (target and learned region over the sample) into ``--out`` (default
``results/geometry``) and prints the table.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ldp.central.polygons import (
    ConvexPolygon,
    GridReferee,
    PolygonUnion,
    geometry_parameters,
    grid_points,
    grid_snap_error,
    kgon_sample_complexity,
    learn_convex_kgon,
    learn_polygon_union_exact,
    learn_polygon_union_grid,
    random_convex_polygon,
    random_polygon_union,
)
from ldp.core.rng import generator
from ldp.experiment import ExperimentResult, Simulation
from ldp.simulations import reporting
from ldp.simulations.reporting import data_ticks, markdown_table, new_figure, save_figure, simulation_main, write_csv, write_json

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["Config", "Result", "run", "main", "quick_config", "plot", "plot_polygons", "write_outputs", "table_rows", "print_table",
           "DEFAULT_OUT", "TABLE_HEADERS", "report", "EXPERIMENT"]


@dataclass(frozen=True)
class Config:
    d: int = 24
    ks: tuple[int, ...] = (3, 4, 6)
    epsilons: tuple[float, ...] = (0.5, 1.0, 2.0)
    ns: tuple[int, ...] = (1000, 4000, 16000, 64000, 256000)
    trials: int = 4
    alpha: float = 0.1
    beta: float = 0.1
    delta: float = 1e-6
    union_pieces: int = 2
    union_grid: int = 7
    union_ns: tuple[int, ...] = (1000, 4000, 16000, 64000)
    exact_n: int = 8
    seed: int = 0


def quick_config(seed: int = 0) -> Config:
    """Well under a minute on 2 cores: a 13×13 grid, two sample sizes, one trial."""
    return Config(d=12, ns=(1000, 50000), trials=1, union_ns=(20000,), union_grid=7, exact_n=6, seed=seed)


@dataclass(frozen=True)
class Result:
    config: Config
    rows: tuple[dict, ...]
    seconds: float
    pictures: tuple[dict, ...]


def _rng(cfg: Config, *key: object) -> np.random.Generator:
    return generator(cfg.seed, "geometry", *key)


def _measure(cfg: Config, variant: str, k: int, eps: float, n: int, target: ConvexPolygon | PolygonUnion) -> tuple[dict, dict]:
    ref = GridReferee(cfg.d, target)
    errs, secs = [], []
    picture: dict = {}
    prm = geometry_parameters(k, cfg.alpha, cfg.beta, eps, cfg.delta)
    for t in range(cfg.trials):
        rng = _rng(cfg, variant, k, eps, n, t)
        pts, y = ref.sample(n, rng)
        t0 = time.perf_counter()
        if variant == "k-gon":
            res = learn_convex_kgon(pts, y, k, cfg.alpha, cfg.beta, eps, cfg.delta, cfg.d, rng)
        elif variant == "union/grid":
            res = learn_polygon_union_grid(pts, y, k, cfg.alpha, cfg.beta, eps, cfg.delta, cfg.d, rng, grid=cfg.union_grid)
        else:
            res = learn_polygon_union_exact(pts, y, k, cfg.alpha, cfg.beta, eps, cfg.delta, cfg.d, rng)
        secs.append(time.perf_counter() - t0)
        errs.append(ref.error(res.hypothesis))
        if t == 0:
            keep = min(n, 1500)
            picture = {"variant": variant, "k": k, "epsilon": eps, "n": n, "target": target, "hypothesis": res.hypothesis,
                       "points": pts[:keep], "labels": y[:keep], "error": errs[-1]}
    row = {
        "variant": variant, "k": k, "epsilon": eps, "accounting": prm["accounting"], "delta": prm["delta"], "n": n,
        "trials": cfg.trials, "mean_error": float(np.mean(errs)), "success": float(np.mean(np.asarray(errs) <= cfg.alpha)),
        "all_zero_error": ref.positive_rate(), "thm47_n": round(kgon_sample_complexity(k, cfg.alpha, cfg.beta, eps, cfg.delta, cfg.d)),
        "seconds_per_run": float(np.mean(secs)),
        "grid_snap_error": grid_snap_error(target, cfg.union_grid, cfg.d) if variant == "union/grid" else None,
    }
    return row, picture


def run(config: Config) -> Result:
    t0 = time.perf_counter()
    cfg = config
    rows: list[dict] = []
    pictures: list[dict] = []
    for k in cfg.ks:
        target = random_convex_polygon(k, cfg.d, _rng(cfg, "target", k))
        for eps in cfg.epsilons:
            for n in cfg.ns:
                row, pic = _measure(cfg, "k-gon", k, eps, n, target)
                rows.append(row)
                if eps == max(cfg.epsilons) and n == max(cfg.ns) and k in (cfg.ks[-1],):
                    pictures.append(pic)
    union = random_polygon_union(cfg.union_pieces, cfg.d, _rng(cfg, "union-target"))
    for eps in cfg.epsilons:
        for n in cfg.union_ns:
            row, pic = _measure(cfg, "union/grid", cfg.union_pieces, eps, n, union)
            rows.append(row)
            if eps == max(cfg.epsilons) and n == max(cfg.union_ns):
                pictures.append(pic)
    row, _ = _measure(cfg, "union/exact", cfg.union_pieces, min(cfg.epsilons), cfg.exact_n, union)
    rows.append(row)
    return Result(cfg, tuple(rows), time.perf_counter() - t0, tuple(pictures))


DEFAULT_OUT = "results/geometry"
CSV_COLUMNS = ("variant", "k", "epsilon", "accounting", "delta", "n", "trials", "mean_error", "success", "all_zero_error", "thm47_n",
               "seconds_per_run", "grid_snap_error")
TABLE_HEADERS = ("variant", "k", "ε", "accounting", "n", "mean error", "P[err ≤ α]", "Pr[c=1]", "Thm 4.7 n", "s/run")


def table_rows(result: Result) -> list[tuple[object, ...]]:
    """One row per (variant, k, ε, n): mean exact error over the trials, success rate, the all-zero error,
    the paper's n (constant 1) and the seconds per learner run."""
    return [(r["variant"], r["k"], r["epsilon"], r["accounting"], r["n"], f"{r['mean_error']:.3f}", f"{r['success']:.2f}",
             f"{r['all_zero_error']:.3f}", r["thm47_n"], f"{r['seconds_per_run']:.2f}") for r in result.rows]


def _markdown(result: Result) -> str:
    cfg = result.config
    snaps = {r["grid_snap_error"] for r in result.rows if r["grid_snap_error"] is not None}
    return "\n".join([
        f"# Convex k-gons and unions of polygons on {{0..{cfg.d}}}² (KMMS Thm 4.7, 5.1; α={cfg.alpha}, β={cfg.beta}, δ={cfg.delta:g})",
        "",
        "Exact error under the uniform distribution on the grid; mean over the trials. Pr[c=1] is the error of the all-zero "
        "hypothesis (what the learner collapses to at small n). Thm 4.7 n is the paper's bound with constant 1 (natural logs). "
        "Accounting: claim34 = (ε,δ)-DP by Claim 3.4/4.3; basic = pure ε-DP by basic composition (ε ≥ 1).",
        "",
        markdown_table(TABLE_HEADERS, table_rows(result)),
        "",
        f"Grid-triangle family g = {cfg.union_grid}: agnostic cost (target with vertices snapped to the grid) = "
        + ", ".join(f"{s:.3f}" for s in sorted(snaps)) + ".",
        "",
        f"Run time: {result.seconds:.1f} s",
    ]) + "\n"


def plot(result: Result) -> Figure:
    """Mean error against n, one panel per k (convex k-gon), one line per ε; the all-zero error dashed."""
    cfg = result.config
    fig, axes = new_figure(len(cfg.ks), 4.4, 3.8)
    for ax, k in zip(axes, cfg.ks):
        rows = [r for r in result.rows if r["variant"] == "k-gon" and r["k"] == k]
        for eps in cfg.epsilons:
            pts = sorted((r["n"], r["mean_error"]) for r in rows if r["epsilon"] == eps)
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", label=f"ε = {eps:g}")
        ax.plot(sorted(cfg.ns), [rows[0]["all_zero_error"]] * len(cfg.ns), linestyle="--", color="gray", label="all-zero (Pr[c=1])")
        ax.axhline(cfg.alpha, color="black", linewidth=0.8, linestyle=":")
        ax.annotate(f"α = {cfg.alpha}", (min(cfg.ns), cfg.alpha), textcoords="offset points", xytext=(2, 3), fontsize=8)
        ax.set_xscale("log")
        data_ticks(ax.xaxis, sorted(cfg.ns))
        ax.set_xlabel("n (examples, log scale)")
        ax.set_ylabel("exact error")
        ax.set_title(f"convex {k}-gon (Thm 4.7 n ≈ {min(r['thm47_n'] for r in rows):,}–{max(r['thm47_n'] for r in rows):,})", fontsize=9)
        ax.set_ylim(0, 1.15 * max(max(r["mean_error"] for r in rows), rows[0]["all_zero_error"], cfg.alpha))
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    return fig


def _draw_polygon(ax: Axes, pic: dict, d: int) -> None:
    grid = grid_points(d)
    inside = pic["hypothesis"].predict(grid) == 1
    ax.scatter(grid[inside, 0], grid[inside, 1], s=14, marker="s", color="#9ecae1", label="learned h(x) = 1", zorder=1)
    pts, y = pic["points"], pic["labels"]
    jitter = (np.random.default_rng(0).random(pts.shape) - 0.5) * 0.5  # duplicates: spread them a little
    for lab, color, name in ((1, "#d62728", "sample, label 1"), (0, "#555555", "sample, label 0")):
        sel = y == lab
        ax.scatter(pts[sel, 0] + jitter[sel, 0], pts[sel, 1] + jitter[sel, 1], s=2, color=color, alpha=0.5, label=name, zorder=2)
    target = pic["target"]
    pieces = [target] if isinstance(target, ConvexPolygon) else list(target.pieces)
    # every piece's outline in one line (NaN breaks between pieces): one legend entry for the target
    outline = np.concatenate([np.vstack([piece.vertices, piece.vertices[:1], [(np.nan, np.nan)]]) for piece in pieces])
    ax.plot(outline[:, 0], outline[:, 1], color="black", linewidth=1.6, label="target", zorder=3)
    ax.set_xlim(-1, d + 1)
    ax.set_ylim(-1, d + 1)
    ax.set_aspect("equal")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title(f"{pic['variant']}, k = {pic['k']}, ε = {pic['epsilon']:g}, n = {pic['n']:,}: error {pic['error']:.3f}", fontsize=9)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=8, markerscale=3)


def plot_polygons(result: Result) -> Figure:
    """Target outline and the learned region over (up to 1500 of) the sample, one panel per picture."""
    fig, axes = new_figure(max(1, len(result.pictures)), 4.6, 5.4)
    for ax, pic in zip(axes, result.pictures):
        _draw_polygon(ax, pic, result.config.d)
    return fig


def write_outputs(result: Result, out: Path) -> None:
    """result.json, errors.csv, table.md, errors.png and polygons.png in ``out`` (created if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "result.json", {"config": asdict(result.config), "rows": list(result.rows), "seconds": result.seconds,
                                     "pictures": [{"variant": p["variant"], "k": p["k"], "epsilon": p["epsilon"], "n": p["n"],
                                                   "target": p["target"].describe(), "hypothesis": p["hypothesis"].describe(),
                                                   "error": p["error"]} for p in result.pictures]})
    write_csv(out / "errors.csv", result.rows, CSV_COLUMNS)
    (out / "table.md").write_text(_markdown(result))
    save_figure(plot(result), out / "errors.png")
    save_figure(plot_polygons(result), out / "polygons.png")


def print_table(result: Result) -> None:
    reporting.print_table("private convex k-gons / unions of polygons: exact error against n", TABLE_HEADERS, table_rows(result))


def report(result: Result, config: Config) -> ExperimentResult:
    """``ldp-sim run geometry``'s table: the exact error against n, beside Thm 4.7's n."""
    grid = f"grid {{0..{config.d}}}²"
    notes = f"{grid}, α = {config.alpha}, β = {config.beta}, δ = {config.delta:g}; {config.trials} trials per point"
    title = f"Convex k-gons and unions of polygons (KMMS Thm 4.7, 5.1): exact error against n ({result.seconds:.1f} s)"
    return ExperimentResult(title, TABLE_HEADERS, tuple(table_rows(result)), notes=notes)


EXPERIMENT = Simulation.of(__name__, "geometry", "convex k-gon / union-of-polygons learners (KMMS): exact error against n, next to Thm 4.7 (no LR oracle)",
                           files=("result.json", "errors.csv", "table.md", "errors.png", "polygons.png"))  # the entry point ldp_sim.experiments: geometry


def main(argv: list[str] | None = None) -> Result:
    return simulation_main(argv, EXPERIMENT, description=__doc__.splitlines()[0], quick_help="13×13 grid, 2 sizes, 1 trial (< 30 s)", show=print_table)


if __name__ == "__main__":
    main()
