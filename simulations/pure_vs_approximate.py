"""Pure vs approximate central DP: users needed to learn POINT_d and THRESH_d properly, as d grows.

For each learner and domain size d (bit length), finds by search the smallest sample size m_90 with
true error ≤ α in at least a (1 − β) fraction of seeded trials, on the known hard distributions
(BNS spec §6):

* POINT_d: mass 2α on a target point j (label 1), the rest on a fixed negative point. Learners: the pure
  exponential-mechanism learner (ε-DP, m ≈ (1/(αε))(d ln 2 + ln(1/β)), grows with d), BNS A_dist
  (ε,δ)-learner (flat in d), the LMM learner (CHS, flat in d, larger constant) and the proper learner
  obtained from a sanitizer (BNS §5: ERM on the stability histogram of the labelled sample, flat in d).
* THRESH_d: ½ on t−1 (label 1), ½ on t (label 0). Learners: the pure exponential mechanism (grows with d)
  and LearnThresholds via the piecewise RecConcave (flat in d apart from one more recursion level at
  d ≥ 33), run to d = 1024 bits so the crossover, where approximate privacy needs fewer users than pure,
  is measured on the grid (``crossover`` in result.json and table.md).

Writes ``result.json``, ``m90.csv``, ``m90.png`` and ``table.md`` into ``--out`` (default
``results/pure-vs-approximate``, the experiment's name under ``ldp-sim run``) and prints the table.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ldp.central.piecewise import uniform_below
from ldp.central.point import (
    learn_point_approx,
    learn_point_lmm,
    learn_point_pure,
    point_approx_sample_size,
    point_pure_sample_size,
    random_point,
)
from ldp.central.sanitizers import learn_point_by_sanitization
from ldp.central.thresholds import learn_thresholds_approx, learn_thresholds_pure
from ldp.core.rng import generator
from ldp.experiment import ExperimentResult, Simulation
from ldp.simulations import reporting
from ldp.simulations.reporting import data_ticks, log_decades, markdown_table, new_figure, readable_log_axis, save_figure, write_csv, write_json

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Config", "Result", "run", "main", "quick_config", "plot", "write_outputs", "table_rows", "print_table", "DEFAULT_OUT", "TABLE_HEADERS", "report", "EXPERIMENT"]


@dataclass(frozen=True)
class Config:
    point_bits: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512)
    threshold_bits: tuple[int, ...] = (6, 8, 12, 16, 20, 32, 64, 128, 256, 384, 512, 768, 1024)
    alpha: float = 0.1
    beta: float = 0.1
    epsilon: float = 1.0
    delta: float = 1e-6
    trials: int = 200
    threshold_trials: int = 100
    include_lmm: bool = True
    max_m: int = 1 << 15
    rel_tol: float = 0.05
    seed: int = 0
    # POINT_d's success rule: the fewest of ``trials`` runs with error ≤ α that let a size pass.
    # None: a (1 − β) fraction (this experiment's own m_90). The separation sweep sets it from its
    # Clopper–Pearson rule (ldp.learners.success_rule.min_successes), so its POINT rows are judged
    # like its local rows.
    point_min_successes: int | None = None


def quick_config(seed: int = 0) -> Config:
    return Config(
        point_bits=(8, 16, 32, 64, 128, 256),
        threshold_bits=(6, 14, 64, 256, 1024),
        trials=100,
        threshold_trials=50,
        include_lmm=False,  # LMM scans dominate the run time; it is in the full run
        seed=seed,
    )


@dataclass(frozen=True)
class Result:
    config: Config
    rows: tuple[dict, ...]
    seconds: float
    baselines: tuple[dict, ...] = field(default_factory=tuple)

    @property
    def crossover(self) -> tuple[dict, ...]:
        return tuple(crossovers(self.rows))


def crossovers(rows: tuple[dict, ...] | list[dict]) -> list[dict]:
    """Per task and approximate learner: the last d on the grid where pure needs at most as many users, and
    the first d after it where the approximate learner needs fewer (pure's "> max" counts as more)."""
    out = []
    for task in dict.fromkeys(r["task"] for r in rows):
        pure = {r["bits"]: r["m90"] for r in rows if r["task"] == task and r["privacy"] == "pure"}
        for learner in dict.fromkeys(r["learner"] for r in rows if r["task"] == task and r["privacy"] == "approx"):
            approx = {r["bits"]: r["m90"] for r in rows if r["task"] == task and r["learner"] == learner}
            grid = sorted(set(pure) & set(approx))

            def wins(b: int, approx: dict = approx, pure: dict = pure) -> bool:
                return approx[b] is not None and (pure[b] is None or approx[b] < pure[b])

            last_pure = max((b for b in grid if not wins(b)), default=None)
            first = min((b for b in grid if wins(b) and (last_pure is None or b > last_pure)), default=None)
            out.append({"task": task, "learner": learner, "pure_at_most_until": last_pure, "approx_fewer_from": first})
    return out


def _trial_rng(cfg: Config, learner: str, bits: int, m: int) -> np.random.Generator:
    return generator(cfg.seed, "pure-vs-approximate", learner, bits, m)


def _point_success(cfg: Config, learner: str, bits: int, m: int, trials: int) -> float:
    rng = _trial_rng(cfg, learner, bits, m)
    j = random_point(bits, rng)
    x0 = random_point(bits, rng, exclude=np.array([j], dtype=object))
    p = 2 * cfg.alpha
    wins = 0
    for _ in range(trials):
        y = (rng.random(m) < p).astype(np.int8)
        if bits > 62:
            x = np.empty(m, dtype=object)
            x[:] = x0
            x[y == 1] = j
        else:
            x = np.where(y == 1, j, x0).astype(np.int64)
        if learner == "point/pure":
            h = learn_point_pure(x, y, bits, cfg.epsilon, rng).hypothesis
        elif learner == "point/A_dist":
            h = learn_point_approx(x, y, bits, cfg.epsilon, cfg.delta, rng).hypothesis
        elif learner == "point/sanitizer":
            h = learn_point_by_sanitization(x, y, bits, cfg.epsilon, cfg.delta, rng).hypothesis
        else:
            h = learn_point_lmm(x, y, bits, cfg.epsilon, cfg.delta, rng).hypothesis
        err = p * (h.point != j) + (1 - p) * (h.point == x0)
        wins += err <= cfg.alpha
    return wins / trials


def _thresh_success(cfg: Config, learner: str, bits: int, m: int, trials: int) -> float:
    rng = _trial_rng(cfg, learner, bits, m)
    t = 1 + uniform_below(2**bits - 1, rng)
    wins = 0
    for _ in range(trials):
        y = (rng.random(m) < 0.5).astype(np.int8)
        if bits > 62:
            x = np.empty(m, dtype=object)
            x[:] = t
            x[y == 1] = t - 1
        else:
            x = np.where(y == 1, t - 1, t).astype(np.int64)
        if learner == "thresh/pure":
            h = learn_thresholds_pure(x, y, bits, cfg.epsilon, rng).hypothesis
        else:
            h = learn_thresholds_approx(x, y, bits, cfg.alpha, cfg.epsilon, cfg.delta, rng).hypothesis
        k = h.threshold
        err = 0.5 * (k <= t - 1) + 0.5 * (k > t)
        wins += err <= cfg.alpha
    return wins / trials


def find_m90(success: Callable[[int], float], target: float, max_m: int, rel_tol: float) -> int | None:
    """Smallest m (to relative tolerance) with success(m) ≥ target: doubling, then bisection."""
    hi = 8
    while success(hi) < target:
        if hi >= max_m:
            return None
        hi *= 2
    lo = hi // 2
    if lo < 8 or success(lo) >= target:
        return hi if lo < 8 else lo
    while hi - lo > max(2, int(rel_tol * lo)):
        mid = (lo + hi) // 2
        if success(mid) >= target:
            hi = mid
        else:
            lo = mid
    return hi


def run(config: Config) -> Result:
    t0 = time.perf_counter()
    cfg = config
    target = 1 - cfg.beta
    # wins/trials ≥ k/trials ⇔ wins ≥ k: one denominator, so the float comparison is exact
    point_target = target if cfg.point_min_successes is None else cfg.point_min_successes / cfg.trials
    rows: list[dict] = []
    point_learners = ["point/pure", "point/A_dist", "point/sanitizer"] + (["point/LMM"] if cfg.include_lmm else [])
    for learner in point_learners:
        for bits in cfg.point_bits:
            m90 = find_m90(
                lambda m, learner=learner, bits=bits: _point_success(cfg, learner, bits, m, cfg.trials), point_target, cfg.max_m, cfg.rel_tol
            )
            theory = (
                point_pure_sample_size(cfg.alpha, cfg.beta, cfg.epsilon, bits)
                if learner == "point/pure"
                else point_approx_sample_size(cfg.alpha, cfg.beta, cfg.epsilon, cfg.delta)
                if learner == "point/A_dist"
                else None
            )
            rows.append(
                {"task": "POINT_d", "learner": learner.split("/")[1], "privacy": "pure" if "pure" in learner else "approx",
                 "bits": bits, "m90": m90, "theory": theory, "trials": cfg.trials}
            )
    for learner in ("thresh/pure", "thresh/RecConcave"):
        for bits in cfg.threshold_bits:
            m90 = find_m90(
                lambda m, learner=learner, bits=bits: _thresh_success(cfg, learner, bits, m, cfg.threshold_trials), target, cfg.max_m,
                cfg.rel_tol,
            )
            theory = (
                math.ceil(4 / cfg.epsilon * (bits * math.log(2) + math.log(1 / cfg.beta)))
                if learner == "thresh/pure"
                else None
            )
            rows.append(
                {"task": "THRESH_d", "learner": learner.split("/")[1],
                 "privacy": "pure" if "pure" in learner else "approx", "bits": bits, "m90": m90,
                 "theory": theory, "trials": cfg.threshold_trials}
            )
    return Result(cfg, tuple(rows), time.perf_counter() - t0, baselines=tuple(central_baselines()))


def central_baselines() -> list[dict]:
    """Rows for the separation table: the central learners as baselines (order of growth in d)."""
    return [
        {"class": "POINT_d", "model": "central ε-DP", "learner": "exponential mechanism (KLNRS)", "users": "Θ(d/(αε))"},
        {"class": "POINT_d", "model": "central (ε,δ)-DP", "learner": "A_dist (BNS Lemma 3.2)", "users": "O(log(1/(βδ))/(αε)), no d"},
        {"class": "POINT_d", "model": "central (ε,δ)-DP", "learner": "LMM (CHS Alg. 1)", "users": "O(log(1/δ)/(αε)), no d"},
        {"class": "POINT_d", "model": "central (ε,δ)-DP", "learner": "sanitizer ⇒ learner (BNS §5)", "users": "O(log(1/δ)/(αε)), no d"},
        {"class": "THRESH_d", "model": "central ε-DP", "learner": "exponential mechanism (KLNRS)", "users": "Θ(d/(αε))"},
        {"class": "THRESH_d", "model": "central (ε,δ)-DP", "learner": "RecConcave (BNS Thm 3.18)", "users": "Õ(8^{log* d})"},
        {"class": "THRESH_d", "model": "label-private ε-DP", "learner": "BNS §6", "users": "O(VC·log(1/α)/(αε)), no d"},
        {"class": "CONJ_{k,d}", "model": "central (ε,δ)-DP", "learner": "SetCoverLearner (KMMS Thm 3.5)", "users": "Õ(k·log d/(αε))"},
    ]


DEFAULT_OUT = "results/pure-vs-approximate"  # results/<experiment name>, as `ldp-sim run pure-vs-approximate` writes
CSV_COLUMNS = ("task", "learner", "privacy", "bits", "m90", "theory", "trials")
TABLE_HEADERS = ("task", "learner", "privacy", "d (bits)", "m_90", "theory")


def table_rows(result: Result) -> list[tuple[object, ...]]:
    """One row per (learner, d): m_90 ("> max" when never reached) and the theory bound ("–": none)."""
    return [(r["task"], r["learner"], r["privacy"], r["bits"], r["m90"] if r["m90"] is not None else "> max",
             r["theory"] if r["theory"] is not None else "–") for r in result.rows]


def _markdown(result: Result) -> str:
    cfg = result.config
    baselines = [(b["class"], b["model"], b["learner"], b["users"]) for b in result.baselines]
    return "\n".join([
        f"# Pure vs approximate central DP (α={cfg.alpha}, β={cfg.beta}, ε={cfg.epsilon}, δ={cfg.delta:g})",
        "",
        "m_90 = smallest sample size with true error ≤ α in ≥ 1−β of seeded trials.",
        "",
        markdown_table((*TABLE_HEADERS[:-1], "theory bound"), table_rows(result)),
        "",
        "## Measured crossover (approximate needs fewer users than pure from this d on the grid)",
        "",
        markdown_table(("task", "approximate learner", "pure ≤ approx up to d", "approx < pure from d"),
                       [(c["task"], c["learner"], c["pure_at_most_until"] if c["pure_at_most_until"] is not None else "–",
                         c["approx_fewer_from"] if c["approx_fewer_from"] is not None else "not on the grid")
                        for c in result.crossover]),
        "",
        "## Central baselines for the separation table",
        "",
        markdown_table(("class", "model", "learner", "users"), baselines),
        "",
        f"Run time: {result.seconds:.1f} s",
    ]) + "\n"


def plot(result: Result) -> Figure:
    """m_90 against d per learner, POINT_d and THRESH_d side by side (log users; d at the grid)."""
    fig, axes = new_figure(2, 5.6, 4.2)
    for ax, task in zip(axes, ("POINT_d", "THRESH_d")):
        _task_axes(ax, task, [r for r in result.rows if r["task"] == task])
    plain = all(log_decades(ax.yaxis) <= 3.0 for ax in axes if ax.get_lines())
    for ax in axes:
        if ax.get_lines():
            readable_log_axis(ax.yaxis, plain)
    return fig


def _task_axes(ax: Any, task: str, rows: list[dict[str, Any]]) -> None:
    """One task's panel: each learner's m_90 against d."""
    for learner in dict.fromkeys(r["learner"] for r in rows):
        pts = [(r["bits"], r["m90"]) for r in rows if r["learner"] == learner and r["m90"] is not None]
        if pts:
            xs, ys = zip(*pts)
            privacy = "ε-DP" if learner == "pure" else "(ε,δ)-DP"
            ax.plot(xs, ys, marker="o", label=f"{learner} ({privacy})")
    bits = sorted({r["bits"] for r in rows})
    doubling = len(bits) > 2 and bits[-1] / bits[0] >= 8  # a doubling grid reads best on a log2 axis
    if doubling:
        ax.set_xscale("log", base=2)
    if bits:
        data_ticks(ax.xaxis, bits)
    ax.set_yscale("log")
    ax.set_xlabel(f"d (bits{', log scale' if doubling else ''}; domain size 2^d)")
    ax.set_ylabel("users needed (m_90, log scale)")
    ax.set_title(task)
    ax.grid(True, which="major", alpha=0.3)
    if ax.get_lines():
        ax.legend(loc="best")


def write_outputs(result: Result, out: Path) -> None:
    """result.json, m90.csv, table.md and m90.png in ``out`` (created if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "result.json", {"config": asdict(result.config), "rows": list(result.rows), "seconds": result.seconds,
                                     "baselines": list(result.baselines), "crossover": list(result.crossover)})
    write_csv(out / "m90.csv", result.rows, CSV_COLUMNS)
    (out / "table.md").write_text(_markdown(result))
    save_figure(plot(result), out / "m90.png")


def print_table(result: Result) -> None:
    reporting.print_table("users needed (m_90): pure vs approximate central DP", TABLE_HEADERS, table_rows(result))


def report(result: Result, config: Config) -> ExperimentResult:
    """``ldp-sim run pure-vs-approximate``'s table, with the settings every row shares."""
    c = config
    settings = f"α = {c.alpha}, β = {c.beta}, ε = {c.epsilon}, δ = {c.delta:g}; {c.trials} trials per point"
    return ExperimentResult(f"Users needed (m_90): pure vs approximate central DP ({result.seconds:.1f} s)", TABLE_HEADERS, tuple(table_rows(result)), notes=settings)


# the entry point ldp_sim.experiments: pure-vs-approximate (pyproject.toml); in process only
EXPERIMENT = Simulation.of(__name__, "pure-vs-approximate", "POINT_d/THRESH_d learners, pure vs approximate central DP (no LR oracle)",
                           files=("result.json", "m90.csv", "table.md", "m90.png"))


def main(argv: list[str] | None = None) -> Result:
    return reporting.simulation_main(argv, EXPERIMENT, description=__doc__.splitlines()[0], quick_help="small grid, few trials (< 60 s)", show=print_table)


if __name__ == "__main__":
    main()
