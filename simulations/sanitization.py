"""Sanitization error against the domain size d: central sanitizers (BNS §4) beside the local frequency oracle.

POINT_d (point queries, error = max over all 2^d points of |estimated − true frequency|), on the same data
(geometric(0.05) ranks hashed onto {0,…,2^d−1}), for:

* the stability histogram (reference spec M7; central (ε,δ)-DP; no d in its error),
* SanPoints (BNS Thm 4.6; central (ε,δ)-DP, theory mode: only where m meets the Choosing minimum),
* the Laplace histogram over all 2^d cells (central ε-DP; the pure baseline whose max error grows with d,
  BNS Thm 4.16; dense, d ≤ ``dense_max_bits``),
* k-ary randomized response (GRR) with the unbiased frequency estimate (``ldp.core.randomizers``
  ``kary_rr``; local ε-LDP, every user one report; k = 2^d categories, d ≤ ``grr_max_bits``).

THRESH_d (range queries, error = max over all 2^d + 1 thresholds of the CDF error), Gaussian data, for
RecSanitizer (BNS Thm 4.13, practical mode) and the pure Laplace histogram's prefix sums.

Writes ``result.json``, ``errors.csv``, ``table.md`` and ``errors.png`` into ``--out`` (default
``results/sanitization``).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ldp.central.laplace_mechanism import laplace_mechanism
from ldp.central.sanitizers import (
    cdf_max_error,
    point_max_error,
    rec_sanitizer,
    san_points,
    san_points_parameters,
    stability_histogram,
)
from ldp.core.rng import RandomSource, generator
from ldp.core.rr_mechanisms import KaryRandomizedResponse
from ldp.experiment import ExperimentResult, Simulation
from ldp.simulations import reporting
from ldp.simulations.reporting import data_ticks, markdown_table, new_figure, save_figure, simulation_main, write_csv, write_json

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Config", "Result", "run", "main", "quick_config", "plot", "write_outputs", "table_rows", "DEFAULT_OUT", "report", "EXPERIMENT"]

DEFAULT_OUT = "results/sanitization"


@dataclass(frozen=True)
class Config:
    point_bits: tuple[int, ...] = (4, 8, 12, 16, 20, 32, 64, 128)
    point_users: tuple[int, ...] = (10_000, 1_000_000)
    threshold_bits: tuple[int, ...] = (8, 12, 16, 20, 24, 32)
    threshold_users: int = 100_000
    alpha: float = 0.1
    beta: float = 0.1
    epsilon: float = 1.0
    delta: float = 1e-6
    trials: int = 3
    dense_max_bits: int = 20
    grr_max_bits: int = 16
    seed: int = 0


def quick_config(seed: int = 0) -> Config:
    return Config(point_bits=(4, 8, 12, 32), point_users=(10_000, 1_000_000), threshold_bits=(8, 16),
                  threshold_users=20_000, trials=1, grr_max_bits=12, seed=seed)


@dataclass(frozen=True)
class Result:
    config: Config
    rows: tuple[dict, ...]
    seconds: float


def _point_data(bits: int, m: int, rng: np.random.Generator) -> np.ndarray:
    ranks = rng.geometric(0.05, size=m).astype(np.int64)
    if bits > 62:  # Python ints (object array) above int64
        return (ranks.astype(object) * 2654435761) % (1 << bits)
    return (ranks * 2654435761) % (1 << bits)  # an injective-enough spread of the heavy ranks over the domain


def _laplace_histogram_point_error(x: np.ndarray, bits: int, eps: float, rng: np.random.Generator) -> float:
    counts = np.bincount(x, minlength=1 << bits).astype(np.float64)
    noisy = laplace_mechanism(counts, 2.0, eps, rng)  # a histogram has L1 sensitivity 2 (replace-one)
    return float(np.max(np.abs(noisy - counts))) / x.size


def _grr_point_error(x: np.ndarray, bits: int, eps: float, seed: int, trial: int) -> float:
    k = 1 << bits
    rr = KaryRandomizedResponse(eps, tuple(range(k)))
    reports = rr.sample(x.astype(np.float64), RandomSource(seed).for_request(f"grr-{bits}", trial, np.arange(x.size)))
    truth = np.bincount(x, minlength=k) / x.size
    return float(np.max(np.abs(rr.frequencies(reports) - truth)))


def _row(task: str, method: str, model: str, bits: int, m: int, errs: list[float]) -> dict:
    return {"task": task, "method": method, "model": model, "bits": bits, "m": m,
            "max_error": float(np.max(errs)), "mean_error": float(np.mean(errs)), "trials": len(errs)}


def run(config: Config) -> Result:
    cfg = config
    t0 = time.perf_counter()
    rows: list[dict] = []
    min_m = san_points_parameters(cfg.alpha, cfg.beta, cfg.epsilon, cfg.delta).min_m
    for m in cfg.point_users:
        for bits in cfg.point_bits:
            errs: dict[str, list[float]] = {}
            for trial in range(cfg.trials):
                rng = generator(cfg.seed, "sanitization", "point", bits, m, trial)
                x = _point_data(bits, m, rng)
                errs.setdefault("stability histogram", []).append(
                    point_max_error(x, stability_histogram(x, bits, cfg.epsilon, cfg.delta, rng)))
                if m >= min_m:
                    errs.setdefault("SanPoints", []).append(
                        point_max_error(x, san_points(x, bits, cfg.alpha, cfg.beta, cfg.epsilon, cfg.delta, rng)))
                if bits <= cfg.dense_max_bits:
                    errs.setdefault("Laplace histogram", []).append(_laplace_histogram_point_error(x, bits, cfg.epsilon, rng))
                if bits <= cfg.grr_max_bits:
                    errs.setdefault("GRR (kary_rr)", []).append(_grr_point_error(x, bits, cfg.epsilon, cfg.seed, trial))
            for method, e in errs.items():
                model = ("local ε-LDP" if method.startswith("GRR") else
                         "central ε-DP" if method.startswith("Laplace") else "central (ε,δ)-DP")
                rows.append(_row("POINT_d", method, model, bits, m, e))
    m = cfg.threshold_users
    for bits in cfg.threshold_bits:
        rec, lap = [], []
        for trial in range(cfg.trials):
            rng = generator(cfg.seed, "sanitization", "thresh", bits, m, trial)
            size = 1 << bits
            x = np.clip(rng.normal(size / 2, size / 16, size=m), 0, size - 1).astype(np.int64)
            rec.append(cdf_max_error(x, rec_sanitizer(x, bits, cfg.alpha, cfg.epsilon, cfg.delta, rng)))
            if bits <= cfg.dense_max_bits:
                counts = np.bincount(x, minlength=size).astype(np.float64)
                noisy = laplace_mechanism(counts, 2.0, cfg.epsilon, rng)
                lap.append(float(np.max(np.abs(np.cumsum(noisy) - np.cumsum(counts)))) / m)
        rows.append(_row("THRESH_d", "RecSanitizer (practical)", "central (ε,δ)-DP", bits, m, rec))
        if lap:
            rows.append(_row("THRESH_d", "Laplace histogram CDF", "central ε-DP", bits, m, lap))
    return Result(cfg, tuple(rows), time.perf_counter() - t0)


TABLE_HEADERS = ("task", "method", "model", "d (bits)", "m", "max error", "mean error")


def table_rows(result: Result) -> list[tuple[object, ...]]:
    return [(r["task"], r["method"], r["model"], r["bits"], r["m"], f"{r['max_error']:.4g}", f"{r['mean_error']:.4g}")
            for r in result.rows]


_COLORS = {"stability histogram": "C0", "SanPoints": "C1", "Laplace histogram": "C2", "GRR (kary_rr)": "C3",
           "RecSanitizer (practical)": "C0", "Laplace histogram CDF": "C2"}  # one colour per method in every panel


def plot(result: Result) -> Figure:
    """Max error against d: POINT_d at each m, and THRESH_d (log error)."""
    cfg = result.config
    panels = [("POINT_d", m) for m in cfg.point_users] + [("THRESH_d", cfg.threshold_users)]
    fig, axes = new_figure(len(panels), 5.0, 4.2)
    for ax, (task, m) in zip(axes, panels):
        rows = [r for r in result.rows if r["task"] == task and r["m"] == m]
        for method in dict.fromkeys(r["method"] for r in rows):
            pts = [(r["bits"], r["max_error"]) for r in rows if r["method"] == method]
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", label=method, color=_COLORS.get(method))
        ax.set_yscale("log")
        ax.set_xscale("log", base=2)  # the d grid roughly doubles
        data_ticks(ax.xaxis, sorted({r["bits"] for r in rows}))
        ax.set_xlabel("d (bits, log scale; domain size 2^d)")
        ax.set_ylabel("max error over all queries (log scale)")
        ax.set_title(f"{task}, m = {m:,}")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    return fig


def write_outputs(result: Result, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "result.json", {"config": asdict(result.config), "rows": list(result.rows), "seconds": result.seconds})
    write_csv(out / "errors.csv", result.rows, ("task", "method", "model", "bits", "m", "max_error", "mean_error", "trials"))
    cfg = result.config
    (out / "table.md").write_text("\n".join([
        f"# Sanitization error vs d (α={cfg.alpha}, β={cfg.beta}, ε={cfg.epsilon}, δ={cfg.delta:g}; {cfg.trials} trials)",
        "",
        "max error = worst trial's sup over all queries (points, or thresholds) of |estimate − truth|.",
        "",
        markdown_table(TABLE_HEADERS, table_rows(result)),
        "",
        f"Run time: {result.seconds:.1f} s",
    ]) + "\n")
    save_figure(plot(result), out / "errors.png")


def print_table(result: Result) -> None:
    reporting.print_table("sanitization error vs d: central sanitizers and the local GRR oracle", TABLE_HEADERS,
                          table_rows(result))


def report(result: Result, config: Config) -> ExperimentResult:
    """``ldp-sim run sanitization``'s table; the notes say α, ε, δ and the trials."""
    return ExperimentResult(
        f"Sanitization error vs d: central sanitizers and local GRR ({result.seconds:.1f} s)", TABLE_HEADERS, tuple(table_rows(result)),
        notes=f"α = {config.alpha}, ε = {config.epsilon}, δ = {config.delta:g}; {config.trials} trials per cell",
    )


EXPERIMENT = Simulation.of(  # the entry point ldp_sim.experiments: sanitization (pyproject.toml); in process only
    __name__, "sanitization", "POINT_d/THRESH_d sanitization error vs d: BNS sanitizers vs local GRR (no LR oracle)",
    files=("result.json", "errors.csv", "table.md", "errors.png"),
)


def main(argv: list[str] | None = None) -> Result:
    return simulation_main(argv, EXPERIMENT, description=__doc__.splitlines()[0], quick_help="small grid, one trial (< 30 s)", show=print_table)


if __name__ == "__main__":
    main()
