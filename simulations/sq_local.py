"""Local → SQ, measured: run small local algorithms on users and through ``SQBackedLROracle``.

Two local algorithms over records (x ∈ {0,1}², y = x_0 ∧ x_1), x_i ~ Bernoulli(0.8):

* ``rr_histogram`` (non-interactive, one round): of n users, the first half report x_0 and the
  second half y through binary randomized response with ε; output (#1-reports of x_0, of y).
* ``adaptive_refinement`` (interactive, two rounds, the same users twice): round 1, each user
  reports x_0 with ε/2; m = majority of the reports; round 2, the same users report x_0 again
  (m = 1) or y (m = 0) with ε/2; output (#1-reports in round 1, #users whose two reports agree).
  Round 2's reports are correlated with round 1's through each user's record, which is what
  Lemma 4.5's conditioning on history must reproduce.

Each is run ``groups`` times directly (``InProcessLROracle``; groups run in parallel as disjoint
users in one session, which is exactly ``groups`` independent runs) and ``groups`` times through
``SQBackedLROracle`` over an ``ExactSQOracle`` that answers every query *as wrongly as allowed*
(E[g] ± τ, ``shift=1``), with τ from ``simulation_tolerance(β, reports, ε)``. The statistical
distance between the two empirical output distributions must be ≤ β + noise allowance, where the
allowance √(K/R) + √(ln(1/a)/R) covers the sampling error of two R-sample histograms over K
outcomes with false-alarm rate a (McDiarmid). Deliberately broken simulators (no e^ε envelope;
no conditioning on history) and a direct-vs-direct null distance are reported alongside.

Writes ``result.json``, ``distances.csv``, ``outputs.png`` and ``table.md`` into ``--out`` (default
``results/sq-local``, the experiment's name under ``ldp-sim run``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ldp.core.concepts import ConjunctionConcept, ProductBernoulli, concept_class
from ldp.core.population import PopulationSpec
from ldp.core.query_specs import field_query, label_query
from ldp.core.randomizers import RandomizerSpec
from ldp.core.rng import generator
from ldp.experiment import ExperimentArgs, ExperimentResult, Simulation
from ldp.local.messages import SessionKind
from ldp.local.oracle import InProcessLROracle, LROracle
from ldp.local.session import Request, Session
from ldp.simulations import reporting
from ldp.simulations.reporting import Column, data_ticks, format_rows, markdown_table, new_figure, save_figure, simulation_main, write_csv, write_json
from ldp.sq.exact import ExactSQOracle
from ldp.sq.simulation import SQBackedLROracle, simulation_tolerance

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "Config",
    "Result",
    "quick_config",
    "population",
    "rr_histogram",
    "adaptive_refinement",
    "ALGORITHMS",
    "tv_distance",
    "noise_allowance",
    "measure",
    "measure_all",
    "run",
    "report",
    "EXPERIMENT",
    "table_markdown",
    "plot",
    "write_outputs",
    "print_table",
    "main",
    "COLUMNS",
    "DEFAULT_OUT",
]

FALSE_ALARM = 1e-3


@dataclass(frozen=True)
class Config:
    epsilon: float = 2.0
    beta: float = 0.02
    groups: int = 40_000
    histogram_users: int = 4
    refinement_users: int = 3
    bit_probability: float = 0.8
    shift: float = 1.0
    seed: int = 0


def quick_config(seed: int = 0) -> Config:
    return Config(groups=20_000, seed=seed)


@dataclass(frozen=True)
class Result:
    config: Config
    rows: tuple[dict, ...]
    histograms: dict
    seconds: float


def population(size: int, seed: int, epsilon: float, p: float = 0.8) -> PopulationSpec:
    """x ∈ {0,1}² with independent Bernoulli(p) bits, y = x_0 ∧ x_1, budget ε."""
    return PopulationSpec(
        concept_class("conjunction", 2), ConjunctionConcept(((0, 1), (1, 1))), size, budget=epsilon, seed=seed,
        distribution=ProductBernoulli(p),
    )


async def rr_histogram(lr: LROracle, groups: int, n: int, epsilon: float) -> tuple[np.ndarray, int]:
    """Non-interactive: ``groups`` independent runs on n users each → (outcome codes, #outcomes)."""
    session = Session(lr, SessionKind.NON_INTERACTIVE, name="rr-histogram")
    ids = np.arange(groups * n).reshape(groups, n)
    half = n // 2
    x_reports, y_reports = await session.round(
        [
            Request.of(ids[:, :half].ravel(), RandomizerSpec("binary_rr", field_query("x", 0), epsilon)),
            Request.of(ids[:, half:].ravel(), RandomizerSpec("binary_rr", label_query(), epsilon)),
        ]
    )
    a = x_reports.values.reshape(groups, half).astype(np.int64).sum(axis=1)
    b = y_reports.values.reshape(groups, n - half).astype(np.int64).sum(axis=1)
    return a * (n - half + 1) + b, (half + 1) * (n - half + 1)


async def adaptive_refinement(lr: LROracle, groups: int, n: int, epsilon: float) -> tuple[np.ndarray, int]:
    """Interactive, two rounds on the same users (ε/2 each) → (outcome codes, #outcomes)."""
    session = Session(lr, SessionKind.INTERACTIVE, name="adaptive-refinement")
    ids = np.arange(groups * n).reshape(groups, n)
    half_eps = epsilon / 2
    (first,) = await session.round([Request.of(ids.ravel(), RandomizerSpec("binary_rr", field_query("x", 0), half_eps))])
    v1 = first.values.reshape(groups, n).astype(np.int64)
    c1 = v1.sum(axis=1)
    majority = (2 * c1 >= n).astype(np.int64)
    requests, selected = [], []
    for m, query in ((0, label_query()), (1, field_query("x", 0))):
        chosen = np.flatnonzero(majority == m)
        if len(chosen):
            requests.append(Request.of(ids[chosen].ravel(), RandomizerSpec("binary_rr", query, half_eps)))
            selected.append(chosen)
    second = await session.round(requests)
    agree = np.zeros(groups, dtype=np.int64)
    for chosen, reports in zip(selected, second):
        agree[chosen] = (reports.values.reshape(len(chosen), n).astype(np.int64) == v1[chosen]).sum(axis=1)
    return c1 * (n + 1) + agree, (n + 1) ** 2


Algorithm = Callable[[LROracle, int, int, float], Awaitable[tuple[np.ndarray, int]]]
# name → (function, interactive, reports per user)
ALGORITHMS: dict[str, tuple[Algorithm, bool, int]] = {
    "rr_histogram": (rr_histogram, False, 1),
    "adaptive_refinement": (adaptive_refinement, True, 2),
}


def tv_distance(a: np.ndarray, b: np.ndarray, outcomes: int) -> float:
    """Total-variation distance between the empirical distributions of two outcome samples."""
    pa = np.bincount(a, minlength=outcomes) / len(a)
    pb = np.bincount(b, minlength=outcomes) / len(b)
    return 0.5 * float(np.abs(pa - pb).sum())


def noise_allowance(outcomes: int, samples: int, false_alarm: float = FALSE_ALARM) -> float:
    """√(K/R) + √(ln(1/a)/R): if the true distance is ≤ β, the distance between two R-sample
    empirical histograms over K outcomes exceeds β + this with probability ≤ a.

    E TV(p̂, p) ≤ ½Σ_k √(p_k/R) ≤ ½√(K/R) per histogram (Cauchy–Schwarz); the empirical
    distance changes by ≤ 1/R when one of the 2R samples changes, so McDiarmid gives the tail.
    """
    return math.sqrt(outcomes / samples) + math.sqrt(math.log(1.0 / false_alarm) / samples)


async def measure(cfg: Config, name: str, oracle_factory: Callable[[PopulationSpec], AbstractAsyncContextManager[LROracle]] | None = None) -> tuple[dict, dict]:
    """One algorithm: direct vs simulated vs broken simulators; a table row and the histograms.

    ``oracle_factory`` (an async context manager per population; ``ldp-sim run sq-local`` passes
    gRPC client processes) serves the direct runs; default: ``InProcessLROracle``.
    """
    algorithm, interactive, per_user = ALGORITHMS[name]
    n = cfg.refinement_users if interactive else cfg.histogram_users
    g = cfg.groups
    pop = lambda seed: population(g * n, seed, cfg.epsilon, cfg.bit_probability)  # noqa: E731

    async def on_users(seed: int) -> tuple[np.ndarray, int]:
        if oracle_factory is None:
            return await algorithm(InProcessLROracle(pop(seed)), g, n, cfg.epsilon)
        async with oracle_factory(pop(seed)) as lr:
            return await algorithm(lr, g, n, cfg.epsilon)

    # Each run gets users of its own: the users' side keys ledgers by the data, so two runs on
    # the same users would share one budget (as they would in a deployment).
    users_seed = lambda k: int(generator(cfg.seed, "sq-local-users", name, k).integers(0, 2**62))  # noqa: E731
    direct, outcomes = await on_users(users_seed(1))
    direct2, _ = await on_users(users_seed(2))
    reports = n * per_user
    tau = simulation_tolerance(cfg.beta, reports, cfg.epsilon, interactive)
    confidence = 1.0 - 1e-12  # the exact oracle never fails
    sq = ExactSQOracle(population(1, 0, cfg.epsilon, cfg.bit_probability), shift=cfg.shift, seed=cfg.seed)
    sim = SQBackedLROracle(sq, g * n, cfg.epsilon, tau, confidence=confidence, seed=cfg.seed * 1000 + 3)
    simulated, _ = await algorithm(sim, g, n, cfg.epsilon)
    broken = {}
    for label, kwargs in (("no_envelope", {"envelope": False}), ("no_history", {"condition_on_history": False})):
        bad = SQBackedLROracle(ExactSQOracle(population(1, 0, cfg.epsilon, cfg.bit_probability)), g * n, cfg.epsilon, tau,
                               confidence=confidence, seed=cfg.seed * 1000 + 4, **kwargs)
        broken[label] = tv_distance(direct, (await algorithm(bad, g, n, cfg.epsilon))[0], outcomes)
    allowance = noise_allowance(outcomes, g)
    distance = tv_distance(direct, simulated, outcomes)
    row = {
        "algorithm": name,
        "interactive": interactive,
        "users_per_run": n,
        "reports_per_run": reports,
        "outcomes": outcomes,
        "runs": g,
        "tolerance": tau,
        "sq_steps": sim.sq_steps,
        "sq_queries": sq.queries_asked,
        "distance_bound_per_run": sim.report_distance_sum / g + sim.sq_steps * (1.0 - confidence),
        "beta": cfg.beta,
        "distance": distance,
        "null_distance": tv_distance(direct, direct2, outcomes),
        "allowance": allowance,
        "within": distance <= cfg.beta + allowance,
        "broken_no_envelope": broken["no_envelope"],
        "broken_no_history": broken["no_history"],
    }
    hist = {
        "direct": (np.bincount(direct, minlength=outcomes) / g).tolist(),
        "simulated": (np.bincount(simulated, minlength=outcomes) / g).tolist(),
    }
    return row, hist


async def measure_all(
    cfg: Config, oracle_factory: Callable[[PopulationSpec], AbstractAsyncContextManager[LROracle]] | None = None, args: ExperimentArgs | None = None
) -> Result:
    """Every algorithm through ``measure``; with ``args`` (``ldp-sim run sq-local``), one log line
    and one progress step per algorithm."""
    start = time.perf_counter()
    rows, hists = [], {}
    if args is not None:
        args.progress(0, len(ALGORITHMS))
    for k, name in enumerate(ALGORITHMS):
        row, hist = await measure(cfg, name, oracle_factory)
        rows.append(row)
        hists[name] = hist
        if args is not None:
            args.log(f"{name}: TV(direct, simulated) = {row['distance']:.4f} (β + allowance = {cfg.beta + row['allowance']:.4f})")
            args.progress(k + 1, len(ALGORITHMS))
    return Result(cfg, tuple(rows), hists, time.perf_counter() - start)


def run(cfg: Config) -> Result:
    """Every algorithm, the direct runs on ``InProcessLROracle`` users."""
    return asyncio.run(measure_all(cfg))


DEFAULT_OUT = "results/sq-local"  # results/<experiment name>, as `ldp-sim run sq-local` writes

COLUMNS = [
    Column("algorithm", "algorithm"),
    Column("reports_per_run", "reports/run"),
    Column("tolerance", "τ", "{:.2e}"),
    Column("sq_steps", "SQ steps"),
    Column("distance_bound_per_run", "bound", "{:.2e}"),
    Column("distance", "TV(direct, sim)", "{:.4f}"),
    Column("null_distance", "TV(direct, direct)", "{:.4f}"),
    Column("allowance", "noise allowance", "{:.4f}"),
    Column("within", "≤ β + allowance"),
    Column("broken_no_envelope", "TV no envelope", "{:.4f}"),
    Column("broken_no_history", "TV no history", "{:.4f}"),
]


def caption(result: Result) -> str:
    """The settings every row shares, one line."""
    c = result.config
    return f"β = {c.beta}, ε = {c.epsilon}, {c.groups} runs per side, SQ answers shifted by {c.shift}·τ"


def table_markdown(result: Result) -> str:
    """The caption and the table of every row, as markdown."""
    return caption(result) + "\n\n" + markdown_table([c.header for c in COLUMNS], format_rows(result.rows, COLUMNS)) + "\n"


# name → (what an output is, the radix of its code): code = first · radix + second
OUTPUTS: dict[str, tuple[str, Callable[[Config], int]]] = {
    "rr_histogram": ("output: (#1-reports of x₀, #1-reports of y)", lambda c: c.histogram_users - c.histogram_users // 2 + 1),
    "adaptive_refinement": ("output: (#1-reports in round 1, #users whose reports agree)", lambda c: c.refinement_users + 1),
}


def _output_axis(ax: Axes, cfg: Config, name: str, outcomes: int) -> None:
    """Ticks at every outcome, labelled as the pair it encodes; x-label saying what the pair is."""
    what, radix = OUTPUTS.get(name, ("output (code)", lambda c: 0))
    base = radix(cfg)
    labels = [f"{k // base},{k % base}" if base else str(k) for k in range(outcomes)]
    data_ticks(ax.xaxis, range(outcomes), labels)
    ax.set_xlabel(what)


def plot(result: Result) -> Figure:
    """Per algorithm, the empirical output distribution of the direct runs beside the simulated ones."""
    fig, axes = new_figure(len(result.histograms), 6.0, 3.8)
    for ax, (name, hist) in zip(axes, result.histograms.items()):
        k = np.arange(len(hist["direct"]))
        ax.bar(k - 0.2, hist["direct"], width=0.4, label="direct (users)")
        ax.bar(k + 0.2, hist["simulated"], width=0.4, label="simulated (SQBackedLROracle)")
        ax.set_title(name)
        _output_axis(ax, result.config, name, len(k))
        ax.set_ylabel(f"frequency over {result.config.groups:,} runs")
        ax.legend(loc="best")
    return fig


def write_outputs(result: Result, out: Path) -> None:
    """result.json, distances.csv, table.md and outputs.png in ``out`` (created if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "result.json", {"config": asdict(result.config), "rows": list(result.rows), "histograms": result.histograms,
                                     "seconds": result.seconds})
    write_csv(out / "distances.csv", result.rows)
    (out / "table.md").write_text(table_markdown(result))
    save_figure(plot(result), out / "outputs.png")


def print_table(result: Result) -> None:
    reporting.print_table(f"Local → SQ simulation (KLNRS Lemmas 4.4, 4.5), {result.seconds:.1f} s", [c.header for c in COLUMNS],
                          format_rows(result.rows, COLUMNS))


def report(result: Result, config: Config) -> ExperimentResult:
    """``ldp-sim run sq-local``'s table: TV distances, direct against simulated."""
    columns = tuple(c.header for c in COLUMNS)
    return ExperimentResult("Local → SQ simulation (KLNRS Lemmas 4.4, 4.5): direct (users) vs SQBackedLROracle", columns, tuple(format_rows(result.rows, COLUMNS)), notes=caption(result))


# The entry point ldp_sim.experiments: sq-local (pyproject.toml). The direct runs go to the users
# through the factory (in process, or gRPC client processes); the simulation runs in the aggregator.
EXPERIMENT = Simulation.of(
    __name__, "sq-local", "local algorithms on users vs simulated from SQ answers (TV distance ≤ β + noise)",
    compute=measure_all, files=("result.json", "distances.csv", "table.md", "outputs.png"), shape="factory", default_epsilon=2.0,
)


def main(argv: list[str] | None = None) -> Result:
    return simulation_main(argv, EXPERIMENT, description=__doc__.splitlines()[0], quick_help="fewer runs (< 60 s)", show=print_table)


if __name__ == "__main__":
    main()
