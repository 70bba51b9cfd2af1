"""Randomized response, measured: the debiased estimate of a fraction against ε (Warner 1965).

Each of n users holds a bit x ~ Bernoulli(p) and answers once through ``binary_rr`` with ε;
the aggregator debiases: p̂ = (mean(w) − q)/(p_keep − q). The predicted standard deviation is
sqrt(p_keep·q / n) / (p_keep − q) with p_keep = e^ε/(e^ε+1), q = 1 − p_keep (exact variance of the
estimator given the users' bits, up to the O(1/n) term from the true fraction).
Runs on any ``LROracle``: one NON_INTERACTIVE session per ε, on disjoint users. ``--out DIR``
also writes ``table.md``, ``estimates.csv``, ``result.json`` and ``estimates.png``; the same writer
serves ``ldp-sim run rr-demo`` (``DEMO``, an ``ldp.experiment.Experiment`` written out by hand:
one oracle, no settings; ``write_demo_outputs``, default ``results/rr-demo``).
"""

from __future__ import annotations

import argparse
import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ldp.core.concepts import ConceptClass, ConjunctionConcept, ParityConcept, ProductBernoulli, concept_class
from ldp.core.errors import ParameterError
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.queries import QuerySpec
from ldp.core.query_specs import field_query
from ldp.core.randomizers import RandomizerSpec
from ldp.core.rr_mechanisms import BinaryRandomizedResponse
from ldp.experiment import ExperimentArgs, ExperimentResult, Shape
from ldp.local.messages import SessionKind, Users
from ldp.local.oracle import InProcessLROracle, LROracle
from ldp.local.session import Request, Session
from ldp.simulations.reporting import data_ticks, markdown_table, new_figure, save_figure, write_csv, write_json

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["RRRow", "Estimate", "population", "run", "referee", "table", "plot", "write_outputs", "write_rows", "write_demo_outputs", "main", "EPSILONS", "DEMO_OUT", "RRDemo", "DEMO"]

EPSILONS = (0.25, 0.5, 1.0, 2.0)


@dataclass(frozen=True)
class RRRow:
    epsilon: float
    users: int
    true_fraction: float
    estimate: float
    predicted_sd: float

    @property
    def error(self) -> float:
        return self.estimate - self.true_fraction


def population(users: int = 100_000, p: float = 0.3, seed: int = 0, budget: float = 2.0) -> PopulationSpec:
    """Users with one bit x ~ Bernoulli(p) (the label field is unused here)."""
    return PopulationSpec(concept_class("conjunction", 1), ConjunctionConcept(()), users, budget=budget, seed=seed, distribution=ProductBernoulli(p))


async def run(
    oracle: LROracle, epsilons: tuple[float, ...] = EPSILONS, true_fraction: Callable[[int, int], float] | None = None
) -> list[RRRow]:
    """One round per ε over a disjoint slice [lo, hi) of the users; ``true_fraction(lo, hi)``
    (the experiment's referee, never the aggregator) gives the truth printed beside the estimate."""
    n = oracle.user_count
    slices = [(n * k // len(epsilons), n * (k + 1) // len(epsilons)) for k in range(len(epsilons))]
    rows = []
    for eps, (lo, hi) in zip(epsilons, slices):
        session = Session(oracle, SessionKind.NON_INTERACTIVE, name=f"rr eps={eps}")
        (reports,) = await session.round([Request(Users.range(lo, hi), RandomizerSpec("binary_rr", field_query("x"), eps))])
        R = BinaryRandomizedResponse(eps)
        answered = len(reports.values)
        estimate = float(R.estimate(reports.values).mean()) if answered else math.nan
        p = R.keep_probability
        sd = math.sqrt(p * (1 - p) / max(answered, 1)) / (2 * p - 1)
        rows.append(RRRow(eps, answered, math.nan if true_fraction is None else true_fraction(lo, hi), estimate, sd))
    return rows


def referee(spec: PopulationSpec) -> Callable[[int, int], float]:
    """The experiment's ground truth: the exact fraction of users lo..hi−1 with x = 1 (records
    are generated here only to measure the error; the oracle never shows them)."""

    def true_fraction(lo: int, hi: int) -> float:
        return float(generate_records(spec, lo, hi - lo)[:, 0].mean())

    return true_fraction


COLUMNS = ("ε", "users", "true fraction", "estimate", "error", "predicted sd", "|error|/sd")
DEMO_OUT = "results/rr-demo"  # where `ldp-sim run rr-demo` writes (results/<experiment name>)
TITLE = "Randomized response: debiased estimates"


def cells(r: RRRow) -> tuple[str, ...]:
    """One row of the table under ``COLUMNS``, as printed."""
    return (f"{r.epsilon:g}", f"{r.users:,}", f"{r.true_fraction:.4f}", f"{r.estimate:.4f}", f"{r.error:+.4f}", f"{r.predicted_sd:.4f}",
            f"{abs(r.error) / r.predicted_sd:.2f}")


def table(rows: list[RRRow], title: str = TITLE):  # -> rich.table.Table
    from rich.table import Table

    t = Table(title=title)
    for col in COLUMNS:
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(*cells(r))
    return t


@dataclass(frozen=True)
class Estimate:
    """What the figure draws per ε: the estimate, its standard error and the truth."""

    epsilon: float
    estimate: float
    sd: float
    truth: float


def plot(estimates: Sequence[Estimate], title: str) -> Figure:
    """Estimates with 95 % normal intervals (± 1.96 standard errors) against ε, the truth beside them."""
    fig, (ax,) = new_figure(1, 6.4, 4.2)
    eps = np.array([e.epsilon for e in estimates], dtype=float)
    ax.errorbar(eps, [e.estimate for e in estimates], yerr=[1.96 * e.sd for e in estimates], fmt="o", capsize=4, color="C0",
                label="debiased estimate ± 1.96 standard errors (95 %)")
    ax.plot(eps, [e.truth for e in estimates], "_", markersize=22, markeredgewidth=2, color="C3", label="true fraction")
    ax.set_xscale("log", base=2)
    data_ticks(ax.xaxis, eps)
    ax.set_xlabel("ε of each report (log scale; each ε asks its own users)")
    ax.set_ylabel("fraction of users whose bit is 1")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return fig


def _number(cell: object) -> object:
    """A table cell as a number when it reads as one ("100,000" → 100000, "nan" → None), else as is."""
    text = str(cell).replace(",", "")
    for kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            continue
        return None if isinstance(value, float) and not math.isfinite(value) else value
    return cell


def write_outputs(out: Path, title: str, columns: Sequence[str], rows: Sequence[Sequence[object]], estimates: Sequence[Estimate],
                  notes: str = "") -> tuple[Path, ...]:
    """table.md (title, notes, the table as printed), estimates.csv and result.json (the cells as
    numbers where they are numbers) and estimates.png in ``out`` (created); their paths."""
    out.mkdir(parents=True, exist_ok=True)
    records = [{c: _number(v) for c, v in zip(columns, row)} for row in rows]
    (out / "table.md").write_text(f"# {title}\n\n" + (f"{notes}\n\n" if notes else "") + markdown_table(columns, rows) + "\n")
    write_csv(out / "estimates.csv", records, columns)
    write_json(out / "result.json", {"title": title, "notes": notes, "columns": list(columns), "rows": records})
    save_figure(plot(estimates, title), out / "estimates.png")
    return tuple(out / name for name in ("table.md", "estimates.csv", "result.json", "estimates.png"))


def write_rows(rows: list[RRRow], out: Path, title: str = TITLE) -> tuple[Path, ...]:
    """This simulation's rows written by ``write_outputs``."""
    estimates = [Estimate(r.epsilon, r.estimate, r.predicted_sd, r.true_fraction) for r in rows]
    return write_outputs(out, title, COLUMNS, [cells(r) for r in rows], estimates)


DEMO_COLUMNS = {"epsilon": "ε", "estimate": "estimate", "sd": "std. error (theory)", "truth": "truth"}  # Estimate field → rr-demo header


def write_demo_outputs(result: ExperimentResult, out: Path) -> tuple[Path, ...]:
    """``ldp-sim run rr-demo``'s table written by ``write_outputs``; the figure reads the columns
    named in ``DEMO_COLUMNS`` (one missing is a ParameterError naming it)."""
    missing = [h for h in DEMO_COLUMNS.values() if h not in result.columns]
    if missing:
        raise ParameterError(f"rr-demo's table has no column(s) {missing} to plot; its columns: {list(result.columns)}")
    at = {field: result.columns.index(header) for field, header in DEMO_COLUMNS.items()}
    estimates = [Estimate(**{field: float(str(row[k]).replace(",", "")) for field, k in at.items()}) for row in result.rows]
    return write_outputs(out, result.title, result.columns, result.rows, estimates, result.notes)


# --- ``ldp-sim run rr-demo``: the Experiment protocol written out by hand (one oracle, no settings) ---

RR_DEMO_P = 0.3  # each bit of x is 1 with this probability: the truth the demo estimates


@dataclass(frozen=True)
class RRDemo:
    """Randomized response of one bit (Warner 1965; KLNRS §4.1): estimate the fraction of users
    whose bit x_0 is 1, at ε = budget/8, /4, /2, /1, each on its own quarter of the users (so no
    user spends more than its budget), one non-interactive session per ε; the table is also
    written as table.md, estimates.csv, result.json and estimates.png (``--out``, default
    ``results/rr-demo``)."""

    name: str = "rr-demo"
    description: str = "randomized response of a bit: estimate vs truth per ε"
    shape: Shape = "oracle"
    config_type: type | None = None
    default_users: int | None = 100_000
    default_epsilon: float | None = 1.0

    def population(self, args: ExperimentArgs) -> PopulationSpec:
        if args.users < 4:
            raise ParameterError(f"rr-demo needs at least 4 users (one group per ε), got {args.users}")
        return PopulationSpec(
            ConceptClass("parity", 4), ParityConcept((1, 0, 1, 1)), args.users, budget=args.epsilon, seed=args.seed, distribution=ProductBernoulli(RR_DEMO_P)
        )

    async def run(self, oracle: LROracle, args: ExperimentArgs) -> ExperimentResult:
        n = oracle.user_count
        epsilons = [args.epsilon / 8, args.epsilon / 4, args.epsilon / 2, args.epsilon]
        bounds = [n * k // len(epsilons) for k in range(len(epsilons) + 1)]
        query = QuerySpec("field", {"field": "x", "index": 0})
        rows = []
        for k, eps in enumerate(epsilons):
            session = Session(oracle, SessionKind.NON_INTERACTIVE, name=f"rr-demo ε={eps:g}", deadline_s=args.deadline_s)
            (reports,) = await session.round([Request.of(range(bounds[k], bounds[k + 1]), RandomizerSpec("binary_rr", query, eps))])
            rr = BinaryRandomizedResponse(eps)
            m = len(reports.values)
            estimate = float(rr.estimate(reports.values).mean()) if m else math.nan
            std = math.sqrt(float(rr.variance(np.array(RR_DEMO_P))) / m) if m else math.nan
            missing = len(reports.asked) - m
            rows.append((f"{eps:.4g}", m, f"{estimate:.4f}", f"{RR_DEMO_P:.4f}", f"{abs(estimate - RR_DEMO_P):.4f}", f"{std:.4f}", missing))
            args.progress(k + 1, len(epsilons))
        result = ExperimentResult(
            f"Randomized response of one bit: {n} users, budget ε = {args.epsilon:g}",
            ("ε", "reports", "estimate", "truth", "|error|", "std. error (theory)", "not answered"),
            tuple(rows),
            notes="truth = Pr[x_0 = 1] of the population's distribution; each ε uses a disjoint quarter of the users",
        )
        return replace(result, files=write_demo_outputs(result, Path(args.out or DEMO_OUT)))


DEMO = RRDemo()  # the entry point ldp_sim.experiments: rr-demo (pyproject.toml)


def main(argv: list[str] | None = None) -> None:
    from rich.console import Console

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100_000, help="users per ε (default 10^5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="also write table.md, estimates.csv, result.json and estimates.png here")
    args = parser.parse_args(argv)
    spec = population(args.users * len(EPSILONS), seed=args.seed)
    rows = asyncio.run(run(InProcessLROracle(spec), EPSILONS, referee(spec)))
    Console().print(table(rows))
    if args.out is not None:
        for path in write_rows(rows, args.out):
            print(f"saved {path}")


if __name__ == "__main__":
    main()
