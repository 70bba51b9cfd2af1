"""Private learning of disjunctions of k literals (KMMS Thm 1.3): exact error against n, and the n of first success.

For each distribution, k ∈ ``ks``, d ∈ ``ds`` and ε ∈ ``epsilons``: draws a random disjunction of k
literals over d variables under a product distribution that makes it positive with probability 1/2
(``ldp.central.disjunctions.balanced_disjunction_target``: under the uniform distribution a
4-literal disjunction is 1 with probability 0.94 and the constant 1 would already have error
≤ α). Two distributions: "fair" (the d − k other bits are fair coins: every other literal is 1 on
half the negatives, an easy selection whatever k is) and "distractors" (the other bits are 1 with
probability 1/(2k): their literals trail the target's by only ≈ n/(4k) in quality, where the k of
the theorem shows). Samples n labelled examples, runs ``learn_disjunction`` (SetCoverLearner in disjunction
form, Claim 3.4 accounting) and measures the exact error (``ProductReferee``). Each (k, d, ε)
gets its first-success n: the smallest n of the grid from which on at least 1 − β of the trials
reach error ≤ α. Beside it: Thm 1.3 as written, k·ln d/(αε) with constant 1, and the explicit
Thm 3.2 form (``disjunction_sample_complexity_explicit``, constant 1).

Claim 3.4 is stated for ε ∈ (0, 1) only (the conjunction learner refuses ε = 1), so the
"ε ≈ 1" column runs at ε = 0.99. By the exact reduction (``ldp.central.disjunctions``), the
conjunction learner on the complemented problem gives the same errors draw for draw.

Writes ``result.json``, ``errors.csv`` (one row per (k, d, ε, n)), ``first_success.csv`` (one row
per (k, d, ε)), ``table.md`` and ``errors.png`` into ``--out`` (default ``results/disjunctions``)
and prints the first-success table.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ldp.central.disjunctions import (
    balanced_disjunction_target,
    disjunction_sample_complexity,
    disjunction_sample_complexity_explicit,
    learn_disjunction,
)
from ldp.core.errors import ParameterError
from ldp.core.rng import generator
from ldp.experiment import ExperimentResult, Simulation
from ldp.simulations import reporting
from ldp.simulations.reporting import data_ticks, markdown_table, save_figure, simulation_main, write_csv, write_json

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Config", "Result", "run", "main", "quick_config", "plot", "write_outputs", "table_rows", "print_table", "first_success",
           "DEFAULT_OUT", "TABLE_HEADERS", "report", "EXPERIMENT"]


@dataclass(frozen=True)
class Config:
    distributions: tuple[str, ...] = ("fair", "distractors")
    ks: tuple[int, ...] = (1, 2, 4)
    ds: tuple[int, ...] = (16, 64)
    epsilons: tuple[float, ...] = (0.5, 0.99)
    ns: tuple[int, ...] = (500, 700, 1000, 1400, 2000, 2800, 4000, 5600, 8000, 11300, 16000, 22600, 32000)
    trials: int = 10
    alpha: float = 0.1
    beta: float = 0.1
    delta: float = 1e-6
    seed: int = 0


def quick_config(seed: int = 0) -> Config:
    """About 20 s on 2 cores: six sizes (doubling), three trials."""
    return Config(ns=(1000, 2000, 4000, 8000, 16000, 32000), trials=3, seed=seed)


@dataclass(frozen=True)
class Result:
    config: Config
    rows: tuple[dict, ...]
    first: tuple[dict, ...]
    seconds: float


DISTRACTOR_RATES = {"fair": lambda k: 0.5, "distractors": lambda k: 1 / (2 * k)}
"""Pr[x_j = 1] of the bits off the target, per distribution, as a function of k."""


def _measure(cfg: Config, dist: str, k: int, d: int, eps: float, n: int) -> dict:
    errs = []
    positive = []
    for t in range(cfg.trials):
        rng = generator(cfg.seed, "disjunctions", dist, k, d, eps, n, t)
        ref = balanced_disjunction_target(k, d, rng, DISTRACTOR_RATES[dist](k))
        x, y = ref.sample(n, rng)
        res = learn_disjunction(x, y, k, cfg.alpha, cfg.beta, eps, cfg.delta, rng)
        errs.append(ref.error(res.hypothesis))
        positive.append(ref.positive_rate())
    e = np.asarray(errs)
    return {"distribution": dist, "k": k, "d": d, "epsilon": eps, "n": n, "trials": cfg.trials, "mean_error": float(e.mean()), "max_error": float(e.max()),
            "success": float(np.mean(e <= cfg.alpha)), "constant_error": float(np.mean(positive))}


def first_success(rows: list[dict] | tuple[dict, ...], beta: float) -> int | None:
    """Smallest n from which on every measured n has success rate ≥ 1 − β (None: never)."""
    ordered = sorted(rows, key=lambda r: r["n"])
    for i, r in enumerate(ordered):
        if all(s["success"] >= 1 - beta for s in ordered[i:]):
            return int(r["n"])
    return None


def run(config: Config) -> Result:
    t0 = time.perf_counter()
    cfg = config
    rows: list[dict] = []
    first: list[dict] = []
    for dist in cfg.distributions:
        if dist not in DISTRACTOR_RATES:
            raise ParameterError(f"distributions must be among {sorted(DISTRACTOR_RATES)}; got {dist!r}")
    for dist, k, d, eps in itertools.product(cfg.distributions, cfg.ks, cfg.ds, cfg.epsilons):
        group = [_measure(cfg, dist, k, d, eps, n) for n in cfg.ns]
        rows.extend(group)
        n1 = first_success(group, cfg.beta)
        thm13 = disjunction_sample_complexity(k, d, cfg.alpha, eps)
        thm32 = disjunction_sample_complexity_explicit(k, d, cfg.alpha, cfg.beta, eps, cfg.delta)
        first.append({"distribution": dist, "k": k, "d": d, "epsilon": eps, "first_success_n": n1, "thm13_n": thm13, "thm32_n": thm32,
                      "ratio_thm13": None if n1 is None else n1 / thm13, "ratio_thm32": None if n1 is None else n1 / thm32})
    return Result(cfg, tuple(rows), tuple(first), time.perf_counter() - t0)


DEFAULT_OUT = "results/disjunctions"
CSV_COLUMNS = ("distribution", "k", "d", "epsilon", "n", "trials", "mean_error", "max_error", "success", "constant_error")
FIRST_COLUMNS = ("distribution", "k", "d", "epsilon", "first_success_n", "thm13_n", "thm32_n", "ratio_thm13", "ratio_thm32")
TABLE_HEADERS = ("distribution", "k", "d", "ε", "first n with P[err ≤ α] ≥ 1−β", "Thm 1.3 k·ln d/(αε)", "n ÷ Thm 1.3", "Thm 3.2 explicit", "n ÷ Thm 3.2")


def table_rows(result: Result) -> list[tuple[object, ...]]:
    """One row per (k, d, ε): the first-success n, Thm 1.3's n (constant 1), Thm 3.2's explicit n, the ratios."""
    def fmt(v: float | None, spec: str) -> str:
        return "—" if v is None else format(v, spec)

    return [(r["distribution"], r["k"], r["d"], r["epsilon"], fmt(r["first_success_n"], ","), f"{r['thm13_n']:.0f}", fmt(r["ratio_thm13"], ".0f"),
             f"{r['thm32_n']:,.0f}", fmt(r["ratio_thm32"], ".3f")) for r in result.first]


def _markdown(result: Result) -> str:
    cfg = result.config
    return "\n".join([
        f"# Disjunctions of k literals (KMMS Thm 1.3; α = {cfg.alpha}, β = {cfg.beta}, δ = {cfg.delta:g}, {cfg.trials} trials per n)",
        "",
        "Targets positive with probability 1/2; the bits off the target are fair coins (fair) or 1 with probability 1/(2k) "
        "(distractors). First n of the grid " + ", ".join(f"{n:,}" for n in cfg.ns) + " from which on at least 1 − β of the trials reach exact "
        "error ≤ α. Thm 1.3 n = k·ln d/(αε) (the theorem's Õ with constant 1); Thm 3.2 explicit = "
        "(k ln(1/α)/α)(VC ln k + λ + ln((k/β) ln(1/α))/ε), λ = (2/ε̂) ln(2d·4k ln(2/α)/β), ε̂ = ε/(2 ln(e/δ)), constant 1. "
        "Claim 3.4 needs ε < 1: the ε ≈ 1 rows run at 0.99.",
        "",
        markdown_table(TABLE_HEADERS, table_rows(result)),
        "",
        f"Run time: {result.seconds:.1f} s",
    ]) + "\n"


def plot(result: Result) -> Figure:
    """Mean exact error against n: one row of panels per distribution, one panel per k, one line per (d, ε); α dotted."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cfg = result.config
    fig = Figure(figsize=(4.4 * len(cfg.ks), 3.9 * len(cfg.distributions)), layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.subplots(len(cfg.distributions), len(cfg.ks), squeeze=False)
    ticks = [n for n in cfg.ns if n in (500, 1000, 2000, 4000, 8000, 16000, 32000)] or list(cfg.ns)
    for row, dist in zip(grid, cfg.distributions):
        for ax, k in zip(row, cfg.ks):
            for d in cfg.ds:
                for eps in cfg.epsilons:
                    rows = sorted((r for r in result.rows if (r["distribution"], r["k"], r["d"], r["epsilon"]) == (dist, k, d, eps)),
                                  key=lambda r: r["n"])
                    ax.plot([r["n"] for r in rows], [r["mean_error"] for r in rows], marker="o", markersize=3.5, label=f"d = {d}, ε = {eps:g}")
            ax.axhline(cfg.alpha, color="black", linewidth=0.8, linestyle=":")
            ax.annotate(f"α = {cfg.alpha}", (max(cfg.ns), cfg.alpha), textcoords="offset points", xytext=(-34, 4), fontsize=8)
            ax.set_xscale("log")
            data_ticks(ax.xaxis, ticks)
            ax.set_xlabel("n (examples, log scale)")
            ax.set_ylabel("exact error (mean over trials)")
            thm = [r["thm13_n"] for r in result.first if (r["distribution"], r["k"]) == (dist, k)]
            ax.set_title(f"{dist}, k = {k}: Thm 1.3 k·ln d/(αε) = {min(thm):.0f}–{max(thm):.0f}", fontsize=9)
            ax.set_ylim(-0.02, 0.6)
            ax.grid(True, alpha=0.3)
            ax.legend(loc="upper right", fontsize=8)
    return fig


def write_outputs(result: Result, out: Path) -> None:
    """result.json, errors.csv, first_success.csv, table.md and errors.png in ``out`` (created if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "result.json", {"config": asdict(result.config), "rows": list(result.rows), "first_success": list(result.first),
                                     "seconds": result.seconds})
    write_csv(out / "errors.csv", result.rows, CSV_COLUMNS)
    write_csv(out / "first_success.csv", result.first, FIRST_COLUMNS)
    (out / "table.md").write_text(_markdown(result))
    save_figure(plot(result), out / "errors.png")


def print_table(result: Result) -> None:
    reporting.print_table("private disjunctions (KMMS Thm 1.3): first-success n against the theorem", TABLE_HEADERS, table_rows(result))


def report(result: Result, config: Config) -> ExperimentResult:
    """``ldp-sim run disjunctions``'s table: the first-success n beside Thm 1.3's n."""
    notes = f"α = {config.alpha}, β = {config.beta}, δ = {config.delta:g}; {config.trials} trials per n; Claim 3.4 needs ε < 1"
    title = f"Disjunctions of k literals (KMMS Thm 1.3): first n with error ≤ α ({result.seconds:.1f} s)"
    return ExperimentResult(title, TABLE_HEADERS, tuple(table_rows(result)), notes=notes)


EXPERIMENT = Simulation.of(__name__, "disjunctions", "disjunction learner (KMMS Thm 1.3): exact error against n, first-success n next to the theorem",
                           files=("result.json", "errors.csv", "first_success.csv", "table.md", "errors.png"))  # entry point ldp_sim.experiments: disjunctions


def main(argv: list[str] | None = None) -> Result:
    return simulation_main(argv, EXPERIMENT, description=__doc__.splitlines()[0], quick_help="6 sizes, 3 trials (about 20 s)", show=print_table)


if __name__ == "__main__":
    main()
