"""BNS pure-DP lower bounds against the approximate learners and sanitizers that exist; BNS Thm 4.7's k-point sanitizer.

Part 1, lower bounds (``ldp.central.pure_lower_bounds``). For each task and domain size d (bits): the
sample size that **every** pure ε-DP learner or sanitizer needs (a packing bound, a theorem) next to the
measured m_90 of the (ε,δ) algorithm of BNS on the packing's own hard inputs, and the measured m_90 of the
pure exponential-mechanism learner where it runs (it must lie above the bound). m_90 is the smallest m
with success in ≥ 1 − β of seeded trials (``ldp.simulations.pure_vs_approximate.find_m90``).

* POINT_d learner: Lemma 5.7 at k = 1 (Beimel et al.'s Ω(d)) against A_dist (BNS Lemma 3.2).
  Inputs: 1 − 4α on x0 (label 0), 4α on the target j (label 1); success = output c_j.
* THRESH_d learner: the same packing for thresholds [DERIVED] against LearnThresholds (RecConcave, BNS
  Thm 3.18). Inputs: 1 − 4α on 0, 2α on t − 1 (label 1), 2α on t (label 0); success = output c_t.
* k-POINT_d learner, k ≥ 2: Lemma 5.7 against the sanitizer ⇒ ERM learner (stability histogram of the
  labelled sample, then ``kpoint_erm``; BNS Lemma 5.3). Inputs: 4α/k on each point of Y.
* POINT_d / THRESH_d sanitizer: Thm 4.16 (X_C = 2^d) against the stability histogram on Lemma 4.15's
  databases S_x (⌈3αm⌉ copies of x, the rest x0); success = sup point error ≤ α.
* k-POINT_d sanitizer: the direct packing [DERIVED] (order of Thm 5.10) against the stability histogram
  as a k-point sanitizer on the packing databases S_Y; success = sup over |Y| ≤ k of the error ≤ α.

Packing check (reference spec §6.4), exact: the pure Laplace histogram over all 2^d cells on Lemma 4.15's
databases, in closed form at any d (``laplace_histogram_packing``). Its exact m_90 must lie above the
Thm 4.16 bound; below the bound its success is e^{−huge}; the probabilities that S_{x0} lands in the
disjoint good sets G(x) sum to ≤ 1; and each is ≥ e^{−εc} times the success on S_x (ε-DP).

Part 2, BNS Thm 4.7: SanPoints at accuracy α/k (theory mode: it refuses m below the Choosing minimum),
answering a k-point query by summing its points; exact sup error over all |Y| ≤ k against n and k on
geometric data hashed onto 2^32 points, next to the stability histogram at the same n.

Writes ``result.json``, ``bounds.csv``, ``packing.csv``, ``kpoint.csv``, ``table.md`` and ``bounds.png`` into ``--out``
(default ``results/pure-lower-bounds``) and prints the bound table.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ldp.central.piecewise import uniform_below
from ldp.central.point import learn_point_approx, learn_point_pure, point_approx_sample_size, random_point
from ldp.central.pure_lower_bounds import (
    LEARNER_MASS,
    kpoint_erm,
    kpoint_learner_lower_bound,
    kpoint_sanitizer_copies,
    kpoint_sanitizer_lower_bound,
    kpoint_sanitizer_sample_size,
    kpoint_set_error,
    laplace_histogram_m90,
    laplace_histogram_packing,
    point_sanitizer_lower_bound,
    sanitizer_packing_copies,
    threshold_learner_lower_bound,
)
from ldp.central.sanitizers import point_max_error, san_points, stability_histogram
from ldp.central.thresholds import learn_thresholds_approx, learn_thresholds_pure
from ldp.core.errors import ParameterError
from ldp.core.rng import generator
from ldp.experiment import ExperimentResult, Simulation
from ldp.simulations import reporting
from ldp.simulations.pure_vs_approximate import find_m90
from ldp.simulations.reporting import data_ticks, legend_below, markdown_table, new_figure, save_figure, simulation_main, write_csv, write_json

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Config", "Result", "run", "main", "quick_config", "plot", "write_outputs", "table_rows", "kpoint_rows", "packing_rows", "print_table",
           "DEFAULT_OUT", "TABLE_HEADERS", "KPOINT_HEADERS", "PACKING_HEADERS", "TASKS", "report", "EXPERIMENT"]

TASKS = ("POINT learner", "THRESH learner", "k-POINT learner", "POINT sanitizer", "k-POINT sanitizer")


@dataclass(frozen=True)
class Config:
    bits: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
    ks: tuple[int, ...] = (2, 4)
    tasks: tuple[str, ...] = TASKS
    alpha: float = 0.1
    beta: float = 0.1
    epsilon: float = 1.0
    delta: float = 1e-6
    trials: int = 100
    threshold_trials: int = 40
    max_m: int = 1 << 15
    rel_tol: float = 0.05
    include_pure: bool = True
    pure_max_bits: int = 1024  # the pure exponential mechanism's m_90 is measured up to here (it grows ≈ 3.7·d)
    # Part 2 (Thm 4.7): sample sizes, k values and trials; n below a k's SanPoints minimum is reported refused
    kpoint_ks: tuple[int, ...] = (1, 2, 4)
    kpoint_ns: tuple[int, ...] = (650_000, 1_900_000, 5_700_000, 12_000_000)
    kpoint_trials: int = 3
    seed: int = 0


def quick_config(seed: int = 0) -> Config:
    """About 30 s on the shared 2-core machine: four d, fewer trials, one Thm 4.7 trial per cell."""
    return Config(bits=(8, 64, 256, 1024), ks=(4,), trials=40, threshold_trials=20, rel_tol=0.1,
                  kpoint_ns=(650_000, 1_900_000, 5_700_000), kpoint_trials=1, seed=seed)


@dataclass(frozen=True)
class Result:
    config: Config
    rows: tuple[dict, ...]
    kpoint: tuple[dict, ...]
    seconds: float
    packing: tuple[dict, ...] = ()


def _rng(cfg: Config, *key: object) -> np.random.Generator:
    return generator(cfg.seed, "pure-lower-bounds", *key)


def _fill(m: int, bits: int, background: int) -> np.ndarray:
    """A length-m array of ``background`` (object dtype above 62 bits, as the central learners expect)."""
    if bits > 62:
        x = np.empty(m, dtype=object)
        x[:] = background
        return x
    return np.full(m, background, dtype=np.int64)


def _point_learner(cfg: Config, learner: str, bits: int, m: int) -> float:
    rng = _rng(cfg, "point", learner, bits, m)
    j = random_point(bits, rng)
    x0 = random_point(bits, rng, exclude=np.array([j], dtype=object))
    wins = 0
    for _ in range(cfg.trials):
        y = (rng.random(m) < LEARNER_MASS * cfg.alpha).astype(np.int8)
        x = _fill(m, bits, x0)
        x[y == 1] = j
        fit = learn_point_pure if learner == "pure" else None
        h = fit(x, y, bits, cfg.epsilon, rng) if fit else learn_point_approx(x, y, bits, cfg.epsilon, cfg.delta, rng)
        wins += int(h.hypothesis.point == j)
    return wins / cfg.trials


def _thresh_learner(cfg: Config, learner: str, bits: int, m: int) -> float:
    rng = _rng(cfg, "thresh", learner, bits, m)
    t = 2 + uniform_below(2**bits - 1, rng)  # t ∈ {2..2^d}: t − 1 ≠ 0
    wins = 0
    for _ in range(cfg.trials if learner == "pure" else cfg.threshold_trials):
        u = rng.random(m)
        a2 = 2 * cfg.alpha
        x = _fill(m, bits, 0)
        x[u < a2] = t - 1
        x[(u >= a2) & (u < 2 * a2)] = t
        y = (u >= 2 * a2).astype(np.int8) | (u < a2).astype(np.int8)  # 0 and t − 1 are positive, t negative
        if learner == "pure":
            h = learn_thresholds_pure(x, y, bits, cfg.epsilon, rng).hypothesis
        else:
            h = learn_thresholds_approx(x, y, bits, cfg.alpha, cfg.epsilon, cfg.delta, rng).hypothesis
        wins += int(h.threshold == t)
    return wins / (cfg.trials if learner == "pure" else cfg.threshold_trials)


def _targets(bits: int, k: int, rng: np.random.Generator) -> tuple[int, list[int]]:
    x0 = random_point(bits, rng)
    Y: list[int] = []
    while len(Y) < k:
        Y.append(random_point(bits, rng, exclude=np.array([x0, *Y], dtype=object)))
    return x0, Y


def _kpoint_learner(cfg: Config, k: int, bits: int, m: int) -> float:
    rng = _rng(cfg, "kpoint-learner", k, bits, m)
    x0, Y = _targets(bits, k, rng)
    mass = LEARNER_MASS * cfg.alpha
    wins = 0
    for _ in range(cfg.trials):
        pos = rng.random(m) < mass
        which = rng.integers(0, k, size=m)
        x = _fill(m, bits, x0)
        for i, yv in enumerate(Y):
            x[pos & (which == i)] = yv
        y = pos.astype(np.int8)
        pairs = 2 * x + (y.astype(object) if x.dtype == object else y.astype(np.int64))
        Z = kpoint_erm(stability_histogram(pairs, bits + 1, cfg.epsilon, cfg.delta, rng), k)
        err = mass / k * len(set(Y) - Z) + (1 - mass) * (x0 in Z)
        wins += int(err <= cfg.alpha)
    return wins / cfg.trials


def _sanitizer(cfg: Config, k: int, bits: int, m: int) -> float:
    """k = 0: Lemma 4.15's S_x (⌈3αm⌉ copies), point queries; k ≥ 1: the k-point packing database S_Y."""
    rng = _rng(cfg, "sanitizer", k, bits, m)
    x0, Y = _targets(bits, max(k, 1), rng)
    copies = [sanitizer_packing_copies(m, cfg.alpha)] if k == 0 else [kpoint_sanitizer_copies(m, k, cfg.alpha)] * k
    if sum(copies) > m:
        return 0.0
    x = _fill(m, bits, x0)
    start = 0
    for yv, c in zip(Y, copies):
        x[start:start + c] = yv
        start += c
    wins = 0
    for _ in range(cfg.trials):
        san = stability_histogram(x, bits, cfg.epsilon, cfg.delta, rng)
        err = point_max_error(x, san) if k == 0 else kpoint_set_error(x, san, k)
        wins += int(err <= cfg.alpha)
    return wins / cfg.trials


def _m90(cfg: Config, success: object) -> int | None:
    return find_m90(success, 1 - cfg.beta, cfg.max_m, cfg.rel_tol)  # type: ignore[arg-type]


def _bound_rows(cfg: Config) -> list[dict]:
    a, b, e = cfg.alpha, cfg.beta, cfg.epsilon
    rows: list[dict] = []

    def add(task: str, k: int, bits: int, result: str, bound: float, approx: str, m90: int | None, theory: int | None,
            pure_m90: int | None) -> None:
        rows.append({"task": task, "k": k, "bits": bits, "result": result, "pure_bound": round(bound, 1), "approx_learner": approx,
                     "approx_m90": m90, "approx_theory": theory, "pure_m90": pure_m90,
                     "bound_over_approx": None if m90 is None else round(bound / m90, 3)})

    for bits in cfg.bits:
        measure_pure = cfg.include_pure and bits <= cfg.pure_max_bits
        if "POINT learner" in cfg.tasks:
            pure = _m90(cfg, lambda m, bits=bits: _point_learner(cfg, "pure", bits, m)) if measure_pure else None
            add("POINT learner", 1, bits, "BNS Lemma 5.7 (k = 1)", kpoint_learner_lower_bound(bits, 1, a, e), "A_dist (Lemma 3.2)",
                _m90(cfg, lambda m, bits=bits: _point_learner(cfg, "A_dist", bits, m)), point_approx_sample_size(a, b, e, cfg.delta), pure)
        if "THRESH learner" in cfg.tasks:
            pure = _m90(cfg, lambda m, bits=bits: _thresh_learner(cfg, "pure", bits, m)) if measure_pure else None
            add("THRESH learner", 1, bits, "packing of Lemma 5.7 [DERIVED]", threshold_learner_lower_bound(bits, a, e), "RecConcave (Thm 3.18)",
                _m90(cfg, lambda m, bits=bits: _thresh_learner(cfg, "RecConcave", bits, m)), None, pure)
        for k in cfg.ks:
            if "k-POINT learner" in cfg.tasks:
                add("k-POINT learner", k, bits, "BNS Lemma 5.7", kpoint_learner_lower_bound(bits, k, a, e), "sanitizer ⇒ ERM (Lemma 5.3)",
                    _m90(cfg, lambda m, bits=bits, k=k: _kpoint_learner(cfg, k, bits, m)), None, None)
        if "POINT sanitizer" in cfg.tasks:
            add("POINT sanitizer", 1, bits, "BNS Thm 4.16 (X_C = 2^d)", point_sanitizer_lower_bound(bits, a, b, e), "stability histogram",
                _m90(cfg, lambda m, bits=bits: _sanitizer(cfg, 0, bits, m)), kpoint_sanitizer_sample_size(1, a, b, e, cfg.delta), None)
        for k in cfg.ks:
            if "k-POINT sanitizer" in cfg.tasks:
                add("k-POINT sanitizer", k, bits, "packing, order of Thm 5.10 [DERIVED]", kpoint_sanitizer_lower_bound(bits, k, a, b, e),
                    "stability histogram", _m90(cfg, lambda m, bits=bits, k=k: _sanitizer(cfg, k, bits, m)),
                    kpoint_sanitizer_sample_size(k, a, b, e, cfg.delta), None)
    return rows


def _geometric_data(n: int, rng: np.random.Generator) -> np.ndarray:
    """Geometric(0.05) ranks hashed onto 2^32 points (a bijection of the ranks: multiply by an odd constant)."""
    return (rng.geometric(0.05, size=n).astype(np.int64) * 2654435761) % (1 << 32)


def _kpoint_rows(cfg: Config) -> list[dict]:
    rows: list[dict] = []
    for k in cfg.kpoint_ks:
        need = kpoint_sanitizer_sample_size(k, cfg.alpha, cfg.beta, cfg.epsilon, cfg.delta)
        for n in cfg.kpoint_ns:
            errs, hist = [], []
            for t in range(cfg.kpoint_trials if n >= need else 0):
                rng = _rng(cfg, "thm47", k, n, t)
                x = _geometric_data(n, rng)
                san = san_points(x, 32, cfg.alpha / k, cfg.beta, cfg.epsilon, cfg.delta, rng)
                errs.append(kpoint_set_error(x, san, k))
                hist.append(kpoint_set_error(x, stability_histogram(x, 32, cfg.epsilon, cfg.delta, rng), k))
            rows.append({"k": k, "n": n, "min_n": need, "trials": len(errs), "sanpoints_mean_error": float(np.mean(errs)) if errs else None,
                         "sanpoints_max_error": float(np.max(errs)) if errs else None,
                         "success": float(np.mean(np.asarray(errs) <= cfg.alpha)) if errs else None,
                         "histogram_max_error": float(np.max(hist)) if hist else None})
    return rows


def _packing_rows(cfg: Config) -> list[dict]:
    """Per d: the Thm 4.16 bound, the pure Laplace histogram's exact m_90, and the packing's three facts (natural logs)."""
    rows = []
    for bits in cfg.bits:
        bound = point_sanitizer_lower_bound(bits, cfg.alpha, cfg.beta, cfg.epsilon)
        m90 = laplace_histogram_m90(bits, cfg.alpha, cfg.beta, cfg.epsilon)
        below = laplace_histogram_packing(bits, max(1, math.floor(bound)), cfg.alpha, cfg.epsilon)
        at = laplace_histogram_packing(bits, m90, cfg.alpha, cfg.epsilon)
        rows.append({"bits": bits, "bound": round(bound, 1), "laplace_m90": m90, "m90_over_bound": round(m90 / bound, 3),
                     "log_success_below_bound": below.log_self, "log_sum_at_m90": at.log_sum,
                     "dp_slack_at_m90": at.log_cross - (at.log_self - cfg.epsilon * at.copies)})
    return rows


def run(config: Config) -> Result:
    t0 = time.perf_counter()
    unknown = [t for t in config.tasks if t not in TASKS]
    if unknown:
        raise ParameterError(f"tasks must be among {list(TASKS)}; got {unknown}")
    rows, kpoint, packing = _bound_rows(config), _kpoint_rows(config), _packing_rows(config)
    return Result(config, tuple(rows), tuple(kpoint), time.perf_counter() - t0, tuple(packing))


DEFAULT_OUT = "results/pure-lower-bounds"
CSV_COLUMNS = ("task", "k", "bits", "result", "pure_bound", "approx_learner", "approx_m90", "approx_theory", "pure_m90", "bound_over_approx")
PACKING_COLUMNS = ("bits", "bound", "laplace_m90", "m90_over_bound", "log_success_below_bound", "log_sum_at_m90", "dp_slack_at_m90")
PACKING_HEADERS = ("d (bits)", "Thm 4.16 bound", "Laplace histogram exact m_90", "m_90 ÷ bound", "ln P[success] at ⌊bound⌋",
                   "ln Σ_x P[A(S_x0) ∈ G(x)] at m_90 (≤ 0)", "ln P_cross − (ln P_self − εc) (≥ 0)")
KPOINT_COLUMNS = ("k", "n", "min_n", "trials", "sanpoints_mean_error", "sanpoints_max_error", "success", "histogram_max_error")
TABLE_HEADERS = ("task", "k", "d (bits)", "lower bound for ANY pure algorithm", "approximate algorithm", "its m_90",
                 "bound ÷ m_90", "pure exp. mech. m_90", "approx. theory m")
KPOINT_HEADERS = ("k", "n", "SanPoints(α/k) minimum n", "trials", "mean sup error", "max sup error", "P[error ≤ α]", "stability histogram max error")


def _num(v: float | None, spec: str = ",") -> str:
    return "—" if v is None else format(v, spec)


def table_rows(result: Result) -> list[tuple[object, ...]]:
    """One row per (task, k, d): the pure bound, the approximate algorithm's m_90 ("> max": never), their ratio."""
    return [(r["task"], r["k"], r["bits"], f"{r['pure_bound']:,.0f} ({r['result']})", r["approx_learner"],
             "> max" if r["approx_m90"] is None else f"{r['approx_m90']:,}", _num(r["bound_over_approx"], ".2f"),
             _num(r["pure_m90"]), _num(r["approx_theory"])) for r in result.rows]


def packing_rows(result: Result) -> list[tuple[object, ...]]:
    """One row per d of the exact packing check on the pure Laplace histogram."""
    return [(r["bits"], f"{r['bound']:,.1f}", f"{r['laplace_m90']:,}", f"{r['m90_over_bound']:.2f}", f"{r['log_success_below_bound']:.3g}",
             f"{r['log_sum_at_m90']:.4g}", f"{r['dp_slack_at_m90']:.4g}") for r in result.packing]


def kpoint_rows(result: Result) -> list[tuple[object, ...]]:
    """One row per (k, n) of the Thm 4.7 experiment ("refused": n below SanPoints' minimum at α/k)."""
    return [(r["k"], f"{r['n']:,}", f"{r['min_n']:,}", r["trials"] or "refused", _num(r["sanpoints_mean_error"], ".4f"),
             _num(r["sanpoints_max_error"], ".4f"), _num(r["success"], ".2f"), _num(r["histogram_max_error"], ".2e")) for r in result.kpoint]


def _markdown(result: Result) -> str:
    c = result.config
    return "\n".join([
        f"# BNS pure-DP lower bounds against the approximate algorithms (α = {c.alpha}, β = {c.beta}, ε = {c.epsilon}, δ = {c.delta:g})",
        "",
        f"m_90 = smallest m with success in ≥ 1 − β of {c.trials} seeded trials ({c.threshold_trials} for RecConcave), on the packing's own "
        "hard inputs. The bound is a theorem about every pure ε-DP algorithm; the pure exponential mechanism's measured m_90 must lie above it.",
        "",
        markdown_table(TABLE_HEADERS, table_rows(result)),
        "",
        "## Packing check, exact: the pure Laplace histogram (Lap(2/ε) on all 2^d cells) on Lemma 4.15's databases",
        "",
        markdown_table(PACKING_HEADERS, packing_rows(result)),
        "",
        f"## BNS Thm 4.7: SanPoints at α/k as a k-point sanitizer (sup error over all |Y| ≤ k; α = {c.alpha})",
        "",
        markdown_table(KPOINT_HEADERS, kpoint_rows(result)),
        "",
        f"Run time: {result.seconds:.1f} s",
    ]) + "\n"


def plot(result: Result) -> Figure:
    """Left: learners, centre: sanitizers (users against d, bound dashed, measured solid); right: Thm 4.7 error against n."""
    fig, axes = new_figure(3, 5.4, 4.4)
    styles = {"POINT learner": "C0", "THRESH learner": "C1", "k-POINT learner": "C2", "POINT sanitizer": "C0", "k-POINT sanitizer": "C2"}
    for ax, kind in zip(axes[:2], ("learner", "sanitizer")):
        groups = dict.fromkeys((r["task"], r["k"]) for r in result.rows if r["task"].endswith(kind))
        for (task, k), shade in zip(groups, range(len(groups))):
            rows = sorted((r for r in result.rows if (r["task"], r["k"]) == (task, k)), key=lambda r: r["bits"])
            name = task.replace("k-POINT", f"{k}-POINT")
            color = styles[task] if not task.startswith("k-") else f"C{2 + shade}"
            if task == "k-POINT learner" and k == 2:  # |B| ≈ 2^d/4 pairs: within ±2 users of the k = 1 line
                name = "2-POINT learner (≈ k = 1 line)"
            if task == "POINT learner":  # THRESH's packing bound is the same number (2^d − 1 targets each): one line for both
                name = "POINT & THRESH learners"
            if task != "THRESH learner" or not any(r["task"] == "POINT learner" for r in result.rows):
                ax.plot([r["bits"] for r in rows], [r["pure_bound"] for r in rows], linestyle="--", color=color, marker="x",
                        label=f"{name}: any pure (bound)")
            name = task.replace("k-POINT", f"{k}-POINT")
            pts = [(r["bits"], r["approx_m90"]) for r in rows if r["approx_m90"] is not None]
            if pts:
                ax.plot(*zip(*pts), linestyle="-", color=color, marker="o", label=f"{name}: {rows[0]['approx_learner']} (measured)")
            pure = [(r["bits"], r["pure_m90"]) for r in rows if r["pure_m90"] is not None]
            if pure:
                ax.plot(*zip(*pure), linestyle=":", color=color, marker="s", markersize=4, label=f"{name}: pure exp. mech. (measured)")
        if kind == "sanitizer" and result.packing:
            ax.plot([r["bits"] for r in result.packing], [r["laplace_m90"] for r in result.packing], linestyle=":", color="C0", marker="s",
                    markersize=4, label="POINT sanitizer: pure Laplace histogram (exact m_90)")
        bits = sorted({r["bits"] for r in result.rows})
        ax.set_xscale("log", base=2)
        data_ticks(ax.xaxis, bits, [str(b) for b in bits])  # "1024", not "1,024": a doubling grid's labels stay apart
        ax.set_yscale("log")
        ax.set_xlabel("d (bits, log scale; domain size 2^d)")
        ax.set_ylabel("users needed (log scale)")
        ax.set_title(f"{kind}s: pure lower bound vs approximate m_90", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize=7)
        legend_below(ax, columns=1)  # the bound lines cross the whole panel: no corner is free of data
    ax = axes[2]
    for k in dict.fromkeys(r["k"] for r in result.kpoint):
        pts = [(r["n"], r["sanpoints_max_error"]) for r in result.kpoint if r["k"] == k and r["sanpoints_max_error"] is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=f"k = {k}: SanPoints(α/k), max sup error")
    ax.axhline(result.config.alpha, color="black", linewidth=0.8, linestyle=":")
    ax.annotate(f"α = {result.config.alpha}", (min(r["n"] for r in result.kpoint), result.config.alpha), textcoords="offset points",
                xytext=(2, 4), fontsize=8)
    ax.set_xscale("log")
    data_ticks(ax.xaxis, sorted({r["n"] for r in result.kpoint}))
    ax.set_ylim(0, 1.5 * result.config.alpha)
    ax.set_xlabel("n (log scale)")
    ax.set_ylabel("sup over |Y| ≤ k of |Est(c_Y) − Q_Y|")
    ax.set_title("BNS Thm 4.7: k-point sanitizer error", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    return fig


def write_outputs(result: Result, out: Path) -> None:
    """result.json, bounds.csv, packing.csv, kpoint.csv, table.md and bounds.png in ``out`` (created if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "result.json", {"config": asdict(result.config), "rows": list(result.rows), "kpoint": list(result.kpoint),
                                     "packing": list(result.packing), "seconds": result.seconds})
    write_csv(out / "bounds.csv", result.rows, CSV_COLUMNS)
    write_csv(out / "kpoint.csv", result.kpoint, KPOINT_COLUMNS)
    write_csv(out / "packing.csv", result.packing, PACKING_COLUMNS)
    (out / "table.md").write_text(_markdown(result))
    save_figure(plot(result), out / "bounds.png")


def print_table(result: Result) -> None:
    reporting.print_table("BNS pure lower bounds vs measured approximate m_90", TABLE_HEADERS, table_rows(result))
    reporting.print_table("packing check, exact: pure Laplace histogram", PACKING_HEADERS, packing_rows(result))
    reporting.print_table("BNS Thm 4.7: k-point sanitizer error", KPOINT_HEADERS, kpoint_rows(result))


def report(result: Result, config: Config) -> ExperimentResult:
    """``ldp-sim run pure-lower-bounds``'s table: the bound beside the approximate algorithm's m_90."""
    notes = f"α = {config.alpha}, β = {config.beta}, ε = {config.epsilon}, δ = {config.delta:g}; {config.trials} trials per m"
    return ExperimentResult(f"BNS pure-DP lower bounds vs approximate m_90 ({result.seconds:.1f} s)", TABLE_HEADERS,
                            tuple(table_rows(result)), notes=notes)


EXPERIMENT = Simulation.of(__name__, "pure-lower-bounds", "BNS pure-DP lower bounds (packing) against the approximate learners/sanitizers; Thm 4.7",
                           files=("result.json", "bounds.csv", "packing.csv", "kpoint.csv", "table.md", "bounds.png"))  # entry point ldp_sim.experiments: pure-lower-bounds


def main(argv: list[str] | None = None) -> Result:
    return simulation_main(argv, EXPERIMENT, description=__doc__.splitlines()[0], quick_help="four d, few trials (about 30 s)", show=print_table)


if __name__ == "__main__":
    main()
