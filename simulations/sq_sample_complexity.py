"""Users needed to answer t statistical queries within τ (w.p. ≥ 1 − β): local vs central.

For a step of t queries g ∈ [−b, b] (here b = 1, the worst-variance query g = ±1 with mean 0):

* **local** (``LocalSQOracle``, KLNRS Lemma 4.3, ±b randomized response, fresh users per query):
  the oracle's bound t·n_0, n_0 = ⌈2B²·ln(2t/β)/τ²⌉, B = b(e^ε+1)/(e^ε−1) — i.e. per query
  ∝ b²·log(t/β)/(ε²τ²); and the *exact* minimum: the smallest per-query n whose estimator (the mean
  of n reports ±B, Pr[+B] = 1/2) misses τ with probability p(n) satisfying 1 − (1 − p)^t ≤ β,
  from the Binomial distribution (no approximation).
* **central** (``CentralSQOracle``, SuLQ: sample mean + Lap(2bT/(nε)), T = t): the oracle's bound
  n_c and the exact minimum: the smallest n with t·Pr[|mean − μ + Lap| > τ] ≤ β, computed from the
  Binomial sample mean convolved with the Laplace CDF (union bound over the t queries).

For configurations up to ``run_up_to_users`` users, both oracles are also *run* (in process) on a
population of exactly the bound's size: the log's users and the largest error against the exact
expectation are reported (every answer must be within τ).

Three sweeps (vs t, vs τ, vs ε) are plotted side by side, with the scaling formulas drawn over the
points. Writes ``result.json``, ``users.csv``, ``users.png`` and ``table.md`` into ``--out``
(default ``results/sq-sample-complexity``, the experiment's name under ``ldp-sim run``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from ldp.core.concepts import ConjunctionConcept, Uniform, concept_class
from ldp.core.population import PopulationSpec
from ldp.core.queries import QuerySpec
from ldp.core.query_specs import parity
from ldp.experiment import ExperimentResult, Simulation
from ldp.local.oracle import InProcessLROracle
from ldp.simulations import reporting
from ldp.simulations.reporting import (
    Column,
    data_ticks,
    format_rows,
    log_decades,
    markdown_table,
    new_figure,
    readable_log_axis,
    save_figure,
    simulation_main,
    write_csv,
    write_json,
)
from ldp.sq.bounds import central_users_needed, pm_magnitude, users_per_query
from ldp.sq.central_sq_oracle import CentralSQOracle
from ldp.sq.local_sq_oracle import LocalSQOracle

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "Config",
    "Result",
    "quick_config",
    "local_failure_probability",
    "central_failure_probability",
    "local_exact_users",
    "central_exact_users",
    "run",
    "table_markdown",
    "plot",
    "write_outputs",
    "print_table",
    "main",
    "COLUMNS",
    "DEFAULT_OUT",
    "report",
    "EXPERIMENT",
]


@dataclass(frozen=True)
class Config:
    epsilon: float = 1.0
    tolerance: float = 0.1
    beta: float = 0.05
    bound: float = 1.0
    queries: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    tolerances: tuple[float, ...] = (0.4, 0.2, 0.1, 0.05, 0.025)
    epsilons: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)
    sweep_queries: int = 16  # t for the τ and ε sweeps
    run_up_to_users: int = 400_000
    seed: int = 0


def quick_config(seed: int = 0) -> Config:
    return Config(queries=(1, 4, 16, 64, 256), tolerances=(0.4, 0.2, 0.1, 0.05), epsilons=(0.5, 1.0, 2.0),
                  run_up_to_users=150_000, seed=seed)


@dataclass(frozen=True)
class Result:
    config: Config
    rows: tuple[dict, ...]
    seconds: float


def local_failure_probability(n: int, epsilon: float, tolerance: float, bound: float = 1.0) -> float:
    """Pr[|mean of n ±B reports − 0| > τ] for a query with mean 0 (Pr[+B] = 1/2), exactly."""
    big_b = pm_magnitude(bound, epsilon)
    # |B(2K/n − 1)| > τ  ⇔  K > n/2 + nτ/(2B)  or  K < n/2 − nτ/(2B)
    half_width = n * tolerance / (2.0 * big_b)
    upper = math.floor(n / 2 + half_width)
    lower = math.ceil(n / 2 - half_width)
    return float(stats.binom.sf(upper, n, 0.5) + stats.binom.cdf(lower - 1, n, 0.5))


def central_failure_probability(n: int, epsilon: float, tolerance: float, total_queries: int, bound: float = 1.0) -> float:
    """Pr[|(2K/n − 1)·b + Lap(2bT/(nε))| > τ], K ~ Bin(n, 1/2) (g = ±b, mean 0), exactly."""
    lam = 2.0 * bound * total_queries / (n * epsilon)
    sd = math.sqrt(n) / 2
    ks = np.arange(max(0, math.floor(n / 2 - 12 * sd)), min(n, math.ceil(n / 2 + 12 * sd)) + 1)
    pmf = stats.binom.pmf(ks, n, 0.5)
    m = bound * (2.0 * ks / n - 1.0)
    tail = stats.laplace.sf(tolerance - m, scale=lam) + stats.laplace.cdf(-tolerance - m, scale=lam)
    return float(np.dot(pmf, tail))


def _smallest(n_high: int, ok: Callable[[int], bool]) -> int:
    """Smallest n in [1, n_high] with ok(n) (bisection; ok is monotone up to lattice effects)."""
    lo, hi = 1, max(1, n_high)
    while not ok(hi):
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def local_exact_users(epsilon: float, tolerance: float, beta: float, queries: int, bound: float = 1.0) -> int:
    """Smallest per-query n with 1 − (1 − p(n))^t ≤ β (disjoint users: independent answers)."""
    return _smallest(
        users_per_query(bound, epsilon, tolerance, beta, "pm_rr", queries),
        lambda n: 1.0 - (1.0 - local_failure_probability(n, epsilon, tolerance, bound)) ** queries <= beta,
    )


def central_exact_users(epsilon: float, tolerance: float, beta: float, queries: int, bound: float = 1.0) -> int:
    """Smallest n with t·p(n) ≤ β for the SuLQ oracle with T = t."""
    return _smallest(
        central_users_needed(bound, epsilon, tolerance, beta, queries, queries),
        lambda n: queries * central_failure_probability(n, epsilon, tolerance, queries, bound) <= beta,
    )


def _population(size: int, seed: int) -> PopulationSpec:
    return PopulationSpec(concept_class("conjunction", 3), ConjunctionConcept(((0, 1),)), size, budget=4.0, seed=seed,
                          distribution=Uniform())


def _queries(t: int) -> list[QuerySpec]:
    # ±1 queries with mean 0 under the uniform distribution: parities of non-empty masks over x.
    masks = [m for m in range(1, 8)]
    return [parity(np.array([(masks[k % 7] >> j) & 1 for j in range(3)], dtype=bool)) for k in range(t)]


async def _run_oracles(cfg: Config, epsilon: float, tau: float, t: int, local_total: int, central_n: int) -> dict:
    out: dict = {"local_oracle_users": None, "local_max_error": None, "central_oracle_users": None, "central_max_error": None}
    queries = _queries(t)
    if local_total <= cfg.run_up_to_users:
        lr = InProcessLROracle(_population(local_total, cfg.seed * 7919 + t), shards=2)
        oracle = LocalSQOracle(lr, epsilon, adaptive=False)
        answers = await oracle.ask(queries, tau, 1.0 - cfg.beta)
        out["local_oracle_users"] = oracle.users_used
        out["local_max_error"] = float(np.max(np.abs(answers)))
    if central_n <= cfg.run_up_to_users:
        oracle2 = CentralSQOracle(_population(central_n, cfg.seed * 7919 + t + 1), epsilon, max_queries=t, seed=cfg.seed)
        answers = await oracle2.ask(queries, tau, 1.0 - cfg.beta)
        out["central_oracle_users"] = oracle2.n
        out["central_max_error"] = float(np.max(np.abs(answers)))
    return out


def _row(cfg: Config, sweep: str, epsilon: float, tau: float, t: int) -> dict:
    b, beta = cfg.bound, cfg.beta
    n0 = users_per_query(b, epsilon, tau, beta, "pm_rr", t)
    nc = central_users_needed(b, epsilon, tau, beta, t, t)
    row = {
        "sweep": sweep, "t": t, "tolerance": tau, "epsilon": epsilon,
        "local_per_query_bound": n0, "local_total_bound": t * n0,
        "local_per_query_exact": local_exact_users(epsilon, tau, beta, t, b),
        "central_bound": nc, "central_exact": central_exact_users(epsilon, tau, beta, t, b),
    }
    row["local_total_exact"] = t * row["local_per_query_exact"]
    row.update(asyncio.run(_run_oracles(cfg, epsilon, tau, t, t * n0, nc)))
    return row


def run(cfg: Config) -> Result:
    start = time.perf_counter()
    rows = [_row(cfg, "t", cfg.epsilon, cfg.tolerance, t) for t in cfg.queries]
    rows += [_row(cfg, "tolerance", cfg.epsilon, tau, cfg.sweep_queries) for tau in cfg.tolerances]
    rows += [_row(cfg, "epsilon", eps, cfg.tolerance, cfg.sweep_queries) for eps in cfg.epsilons]
    return Result(cfg, tuple(rows), time.perf_counter() - start)


def local_formula(b: float, epsilon: float, tau: float, beta: float, t: float) -> float:
    """t · 8·b²·ln(2t/β)/(ε²τ²): the small-ε form of t·n_0 for ±b randomized response."""
    return t * 8.0 * b**2 * math.log(2 * t / beta) / (epsilon**2 * tau**2)


def central_formula(b: float, epsilon: float, tau: float, beta: float, t: float) -> float:
    """max(2bt·ln(2t/β)/(ετ), 2b²·ln(4t/β)/τ²): privacy term ~ b·t/(ετ), and the sampling term."""
    return max(2 * b * t * math.log(2 * t / beta) / (epsilon * tau), 2 * b**2 * math.log(4 * t / beta) / tau**2)


DEFAULT_OUT = "results/sq-sample-complexity"  # results/<experiment name>, as `ldp-sim run sq-sample-complexity` writes

COLUMNS = [
    Column("sweep", "sweep"), Column("t", "t"), Column("tolerance", "τ", "{:g}"), Column("epsilon", "ε", "{:g}"),
    Column("local_total_bound", "local t·n₀ (bound)", "{:,}"), Column("local_total_exact", "local (exact min)", "{:,}"),
    Column("central_bound", "central (bound)", "{:,}"), Column("central_exact", "central (exact min)", "{:,}"),
    Column("local_max_error", "local max err (run)"), Column("central_max_error", "central max err (run)"),
]


def caption(result: Result) -> str:
    """The settings every row shares, one line."""
    c = result.config
    return f"b = {c.bound}, β = {c.beta}; defaults ε = {c.epsilon}, τ = {c.tolerance}, t = {c.sweep_queries}"


def table_markdown(result: Result) -> str:
    """The caption and the table of every row, as markdown."""
    return caption(result) + "\n\n" + markdown_table([c.header for c in COLUMNS], format_rows(result.rows, COLUMNS)) + "\n"


SWEEPS = (("t", "queries t (log scale)"), ("tolerance", "tolerance τ (log scale)"), ("epsilon", "ε (log scale)"))


def _formula_parameters(c: Config, sweep: str, x: float) -> dict[str, float]:
    """The formulas' arguments at x along ``sweep``, the other parameters at their defaults."""
    params = dict(b=c.bound, epsilon=c.epsilon, tau=c.tolerance, beta=c.beta, t=c.sweep_queries)
    params[{"t": "t", "tolerance": "tau", "epsilon": "epsilon"}[sweep]] = x
    return params


def _sweep_axes(ax: Axes, result: Result, sweep: str, xlabel: str) -> None:
    """One sweep: the bounds and exact minima as points, the two scaling formulas as lines."""
    rows = [r for r in result.rows if r["sweep"] == sweep]
    xs = np.array([r[sweep] for r in rows], dtype=float)
    ax.loglog(xs, [r["local_total_bound"] for r in rows], "o", color="C0", label="local: oracle bound t·n₀")
    ax.loglog(xs, [r["local_total_exact"] for r in rows], "x", color="C0", label="local: exact minimum")
    ax.loglog(xs, [r["central_bound"] for r in rows], "s", color="C1", label="central: oracle bound")
    ax.loglog(xs, [r["central_exact"] for r in rows], "+", color="C1", label="central: exact minimum")
    grid = np.geomspace(xs.min(), xs.max(), 60)
    c = result.config
    ax.loglog(grid, [local_formula(**_formula_parameters(c, sweep, x)) for x in grid], "-", color="C0", alpha=0.6,
              label="local scaling: t·8b²·ln(2t/β)/(ε²τ²)")
    ax.loglog(grid, [central_formula(**_formula_parameters(c, sweep, x)) for x in grid], "-", color="C1", alpha=0.6,
              label="central scaling: max(2bt·ln(2t/β)/(ετ), 2b²·ln(4t/β)/τ²)")
    data_ticks(ax.xaxis, xs)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("users (log scale)")
    ax.set_title(f"against {xlabel.split(' (')[0]}", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)


def plot(result: Result) -> Figure:
    """The three sweeps side by side, one legend for all of them below."""
    c = result.config
    fig, axes = new_figure(len(SWEEPS), 5.4, 4.6)
    for ax, (sweep, xlabel) in zip(axes, SWEEPS):
        _sweep_axes(ax, result, sweep, xlabel)
    plain = all(log_decades(ax.yaxis) <= 3.0 for ax in axes)  # the panels' users read alike
    for ax in axes:
        readable_log_axis(ax.yaxis, plain)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=3, fontsize=9)
    fig.suptitle(f"Users to answer t SQs within τ w.p. ≥ 1−β (b = {c.bound}, β = {c.beta}; "
                 f"else ε = {c.epsilon}, τ = {c.tolerance}, t = {c.sweep_queries})")
    return fig


def write_outputs(result: Result, out: Path) -> None:
    """result.json, users.csv, table.md and users.png in ``out`` (created if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "result.json", {"config": asdict(result.config), "rows": list(result.rows), "seconds": result.seconds})
    write_csv(out / "users.csv", result.rows)
    (out / "table.md").write_text(table_markdown(result))
    save_figure(plot(result), out / "users.png")


def print_table(result: Result) -> None:
    reporting.print_table(f"SQ sample complexity, local vs central ({result.seconds:.1f} s)", [c.header for c in COLUMNS],
                          format_rows(result.rows, COLUMNS), width=200)


def report(result: Result, config: Config) -> ExperimentResult:
    """``ldp-sim run sq-sample-complexity``'s table."""
    title = f"SQ sample complexity, local vs central ({result.seconds:.1f} s)"
    return ExperimentResult(title, tuple(c.header for c in COLUMNS), tuple(format_rows(result.rows, COLUMNS)), notes=caption(result))


# the entry point ldp_sim.experiments: sq-sample-complexity (pyproject.toml); in process only
EXPERIMENT = Simulation.of(__name__, "sq-sample-complexity", "users for t SQs within τ: local vs central (no LR oracle)",
                           files=("result.json", "users.csv", "table.md", "users.png"))


def main(argv: list[str] | None = None) -> Result:
    return simulation_main(argv, EXPERIMENT, description=__doc__.splitlines()[0], quick_help="smaller grids (< 60 s)", show=print_table)


if __name__ == "__main__":
    main()
