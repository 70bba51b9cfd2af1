"""A tiny registry of experiments that ``ldp-sim run NAME`` (and ``ldp-sim serve``) can start.

What: an experiment is a name, an async ``runner(oracle, args) -> ExperimentResult`` written
against ``LROracle`` only (so it runs unchanged in process or over gRPC), and a function that
builds its ``PopulationSpec`` from the command-line arguments. Register one with
``register_experiment``; the CLI builds the population, starts the transport, calls the runner
and prints the result as a table.

Adding an experiment (e.g. in ``simulations/separation.py``)::

    from ldp.cli.experiments import ExperimentArgs, ExperimentResult, register_experiment

    async def run(oracle: LROracle, args: ExperimentArgs) -> ExperimentResult:
        ...  # open Sessions on `oracle`; call args.progress(done, total) as you go
        return ExperimentResult("title", ("col", ...), ((value, ...), ...), files=(path,))

    register_experiment("separation", run, population=lambda a: PopulationSpec(...),
                        description="one line for `ldp-sim list`")

Modules that register experiments are imported by ``ldp.cli.main`` (see ``EXPERIMENT_MODULES``).
Guarantee: names are unique; an unknown name is an ``UnknownKindError`` listing the known ones.
Source: DESIGN.md §5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

import numpy as np

from ldp.core.concepts import ConceptClass, ParityConcept, ProductBernoulli
from ldp.core.errors import ParameterError, UnknownKindError
from ldp.core.population import PopulationSpec
from ldp.core.queries import QuerySpec
from ldp.core.randomizers import BinaryRandomizedResponse, RandomizerSpec
from ldp.local.messages import SessionKind
from ldp.local.oracle import LROracle
from ldp.local.session import Request, Session

__all__ = [
    "ExperimentArgs",
    "ExperimentResult",
    "Experiment",
    "register_experiment",
    "get_experiment",
    "experiments",
]


def _no_progress(done: int, total: int) -> None:
    """Default progress callback: ignore."""


@dataclass(frozen=True)
class ExperimentArgs:
    """Command-line parameters every experiment receives."""

    users: int
    epsilon: float  # the per-user budget ε
    seed: int = 0
    deadline_s: float = 30.0  # per-round deadline for Sessions
    progress: Callable[[int, int], None] = _no_progress  # call as progress(done, total)
    options: dict[str, Any] = field(default_factory=dict)  # experiment-specific extras


@dataclass(frozen=True)
class ExperimentResult:
    """What the CLI prints: a titled table, and the paths of any files the experiment saved."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    files: tuple[Path, ...] = ()
    notes: str = ""


Runner = Callable[[LROracle, ExperimentArgs], Awaitable[ExperimentResult]]


@dataclass(frozen=True)
class Experiment:
    name: str
    runner: Runner
    population: Callable[[ExperimentArgs], PopulationSpec]
    description: str = ""
    default_users: int = 100_000


_REGISTRY: dict[str, Experiment] = {}


def register_experiment(
    name: str,
    runner: Runner,
    population: Callable[[ExperimentArgs], PopulationSpec],
    description: str = "",
    default_users: int = 100_000,
) -> Experiment:
    """Make ``name`` runnable as ``ldp-sim run NAME``; returns the registered ``Experiment``."""
    if name in _REGISTRY:
        raise ValueError(f"experiment {name!r} is already registered")
    exp = Experiment(name, runner, population, description, default_users)
    _REGISTRY[name] = exp
    return exp


def get_experiment(name: str) -> Experiment:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownKindError(f"unknown experiment {name!r}; known experiments: {sorted(_REGISTRY)}") from None


def experiments() -> list[Experiment]:
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


# --- built-in: rr-demo ---

RR_DEMO_P = 0.3  # each bit of x is 1 with this probability: the truth the demo estimates


def _rr_demo_population(args: ExperimentArgs) -> PopulationSpec:
    if args.users < 4:
        raise ParameterError(f"rr-demo needs at least 4 users (one group per ε), got {args.users}")
    return PopulationSpec(
        ConceptClass("parity", 4), ParityConcept((1, 0, 1, 1)), args.users, budget=args.epsilon, seed=args.seed, distribution=ProductBernoulli(RR_DEMO_P)
    )


async def rr_demo(oracle: LROracle, args: ExperimentArgs) -> ExperimentResult:
    """Randomized response of one bit (Warner 1965; KLNRS §4.1): estimate the fraction of users
    whose bit x_0 is 1, at ε = budget/8, /4, /2, /1, each on its own quarter of the users (so no
    user spends more than its budget), one non-interactive session per ε."""
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
        missing = len(reports.users) - m
        rows.append((f"{eps:.4g}", m, f"{estimate:.4f}", f"{RR_DEMO_P:.4f}", f"{abs(estimate - RR_DEMO_P):.4f}", f"{std:.4f}", missing))
        args.progress(k + 1, len(epsilons))
    return ExperimentResult(
        f"Randomized response of one bit: {n} users, budget ε = {args.epsilon:g}",
        ("ε", "reports", "estimate", "truth", "|error|", "std. error (theory)", "not answered"),
        tuple(rows),
        notes="truth = Pr[x_0 = 1] of the population's distribution; each ε uses a disjoint quarter of the users",
    )


register_experiment(
    "rr-demo",
    rr_demo,
    _rr_demo_population,
    description="randomized response of a bit: estimate vs truth per ε",
    default_users=100_000,
)
