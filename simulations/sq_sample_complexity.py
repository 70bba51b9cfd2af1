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
points. Writes ``result.json``, ``users.csv``, ``users.png`` and ``table.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from scipy import stats

from ldp.core.concepts import ConjunctionConcept, Uniform, concept_class
from ldp.core.population import PopulationSpec
from ldp.core.queries import QuerySpec, parity
from ldp.local.oracle import InProcessLROracle
from ldp.sq.bounds import central_users_needed, pm_magnitude, users_per_query
from ldp.sq.central import CentralSQOracle
from ldp.sq.local import LocalSQOracle

__all__ = [
    "Config",
    "Result",
    "quick_config",
    "local_failure_probability",
    "central_failure_probability",
    "local_exact_users",
    "central_exact_users",
    "run",
    "write_outputs",
    "main",
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


COLUMNS = [
    ("sweep", "sweep", "{}"), ("t", "t", "{}"), ("tolerance", "τ", "{:g}"), ("epsilon", "ε", "{:g}"),
    ("local_total_bound", "local t·n₀ (bound)", "{:,}"), ("local_total_exact", "local (exact min)", "{:,}"),
    ("central_bound", "central (bound)", "{:,}"), ("central_exact", "central (exact min)", "{:,}"),
    ("local_max_error", "local max err (run)", "{}"), ("central_max_error", "central max err (run)", "{}"),
]


def _fmt(value: object, fmt: str) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and fmt == "{}":
        return f"{value:.4f}"
    return fmt.format(value)


def table_markdown(result: Result) -> str:
    head = "| " + " | ".join(h for _, h, _ in COLUMNS) + " |"
    lines = [head, "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_fmt(r[k], f) for k, _, f in COLUMNS) + " |" for r in result.rows]
    c = result.config
    return f"b = {c.bound}, β = {c.beta}; defaults ε = {c.epsilon}, τ = {c.tolerance}, t = {c.sweep_queries}\n\n" + "\n".join(lines) + "\n"


def write_outputs(result: Result, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps({"config": asdict(result.config), "rows": list(result.rows),
                                                 "seconds": result.seconds}, indent=1))
    with open(out / "users.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(result.rows[0]))
        writer.writeheader()
        writer.writerows(result.rows)
    (out / "table.md").write_text(table_markdown(result))
    c = result.config
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    for ax, (sweep, key, label) in zip(axes, (("t", "t", "queries t"), ("tolerance", "tolerance", "tolerance τ"),
                                              ("epsilon", "epsilon", "ε"))):
        rows = [r for r in result.rows if r["sweep"] == sweep]
        xs = np.array([r[key] for r in rows], dtype=float)
        ax.loglog(xs, [r["local_total_bound"] for r in rows], "o", color="C0", label="local: oracle bound t·n₀")
        ax.loglog(xs, [r["local_total_exact"] for r in rows], "x", color="C0", label="local: exact minimum")
        ax.loglog(xs, [r["central_bound"] for r in rows], "s", color="C1", label="central: oracle bound")
        ax.loglog(xs, [r["central_exact"] for r in rows], "+", color="C1", label="central: exact minimum")
        grid = np.geomspace(xs.min(), xs.max(), 60)
        params = lambda x: {  # noqa: E731
            "t": dict(b=c.bound, epsilon=c.epsilon, tau=c.tolerance, beta=c.beta, t=x),
            "tolerance": dict(b=c.bound, epsilon=c.epsilon, tau=x, beta=c.beta, t=c.sweep_queries),
            "epsilon": dict(b=c.bound, epsilon=x, tau=c.tolerance, beta=c.beta, t=c.sweep_queries),
        }[sweep]
        ax.loglog(grid, [local_formula(**params(x)) for x in grid], "-", color="C0", alpha=0.6,
                  label="t·8b²ln(2t/β)/(ε²τ²)")
        ax.loglog(grid, [central_formula(**params(x)) for x in grid], "-", color="C1", alpha=0.6,
                  label="max(2bt·ln(2t/β)/(ετ), 2b²ln(4t/β)/τ²)")
        ax.set_xlabel(label)
        ax.set_ylabel("users")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Users to answer t SQs within τ w.p. ≥ 1−β (b = {c.bound}, β = {c.beta})")
    fig.tight_layout()
    fig.savefig(out / "users.png", dpi=120)
    plt.close(fig)


def _print_table(result: Result) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"SQ sample complexity, local vs central ({result.seconds:.1f} s)")
    for _, header, _ in COLUMNS:
        table.add_column(header)
    for r in result.rows:
        table.add_row(*[_fmt(r[k], f) for k, _, f in COLUMNS])
    Console(width=200).print(table)


def main(argv: list[str] | None = None) -> Result:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller grids (< 60 s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("results/sq_sample_complexity"))
    args = ap.parse_args(argv)
    cfg = quick_config(args.seed) if args.quick else Config(seed=args.seed)
    result = run(cfg)
    write_outputs(result, args.out)
    _print_table(result)
    return result


if __name__ == "__main__":
    main()
