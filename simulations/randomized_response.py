"""Randomized response, measured: the debiased estimate of a fraction against ε (Warner 1965).

Each of n users holds a bit x ~ Bernoulli(p) and answers once through ``binary_rr`` with ε;
the aggregator debiases: p̂ = (mean(w) − q)/(p_keep − q). The predicted standard deviation is
sqrt(p_keep·q / n) / (p_keep − q) with p_keep = e^ε/(e^ε+1), q = 1 − p_keep (exact variance of the
estimator given the users' bits, up to the O(1/n) term from the true fraction).
Runs on any ``LROracle``: one NON_INTERACTIVE session per ε, on disjoint users.
"""

from __future__ import annotations

import argparse
import asyncio
import math
from dataclasses import dataclass
from typing import Callable


from ldp.core.concepts import ConjunctionConcept, ProductBernoulli, concept_class
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.queries import field_query
from ldp.core.randomizers import BinaryRandomizedResponse, RandomizerSpec
from ldp.local.messages import SessionKind, Users
from ldp.local.oracle import InProcessLROracle, LROracle
from ldp.local.session import Request, Session

__all__ = ["RRRow", "population", "run", "referee", "table", "main", "EPSILONS"]

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


def table(rows: list[RRRow], title: str = "Randomized response: debiased estimates"):  # -> rich.table.Table
    from rich.table import Table

    t = Table(title=title)
    for col in ("ε", "users", "true fraction", "estimate", "error", "predicted sd", "|error|/sd"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(
            f"{r.epsilon:g}", f"{r.users:,}", f"{r.true_fraction:.4f}", f"{r.estimate:.4f}", f"{r.error:+.4f}", f"{r.predicted_sd:.4f}", f"{abs(r.error) / r.predicted_sd:.2f}"
        )
    return t


def main(argv: list[str] | None = None) -> None:
    from rich.console import Console

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100_000, help="users per ε (default 10^5)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    spec = population(args.users * len(EPSILONS), seed=args.seed)
    rows = asyncio.run(run(InProcessLROracle(spec), EPSILONS, referee(spec)))
    Console().print(table(rows))


if __name__ == "__main__":
    main()
