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

Two more shapes of experiment (``mode``):

- ``needs_factory=True`` (mode ``"factory"``): ``runner(oracle_factory, args)``, for experiments over
  many populations (seeded trials). ``oracle_factory(spec)`` is an async context manager yielding
  an ``LROracle`` for ``spec``: in process, a fresh ``InProcessLROracle``; over gRPC, one cluster
  of client processes that each new population is loaded into (``ldp.wire.launcher.grpc_oracle_factory``).
  No ``population`` function is needed.
- ``uses_oracle=False`` (mode ``"standalone"``): a synchronous ``runner(args)`` that never touches
  the LR oracle (central-model experiments); it runs in process only, outside any event loop.

Experiment-specific settings arrive in ``args.options`` (``ldp-sim run NAME -o key=value``;
``apply_options`` applies them to a config dataclass) and ``args.quick`` (``--quick``).
Modules that register experiments are imported by ``ldp.cli.main`` (see ``EXPERIMENT_MODULES``).
Guarantee: names are unique; an unknown name is an ``UnknownKindError`` listing the known ones.
Source: docs/design.md §5.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

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
    "OracleFactory",
    "apply_options",
    "in_process_factory",
    "register_experiment",
    "get_experiment",
    "experiments",
]


def _no_progress(done: int, total: int) -> None:
    """Default progress callback: ignore."""


def _no_log(line: str) -> None:
    """Default log callback: ignore."""


@dataclass(frozen=True)
class ExperimentArgs:
    """Command-line parameters every experiment receives."""

    users: int
    epsilon: float  # the per-user budget ε
    seed: int = 0
    deadline_s: float = 30.0  # per-round deadline for Sessions
    progress: Callable[[int, int], None] = _no_progress  # call as progress(done, total)
    options: dict[str, Any] = field(default_factory=dict)  # experiment-specific extras (-o key=value)
    quick: bool = False  # --quick: small sizes (the experiment's quick configuration)
    out: str | None = None  # --out: where files go (None: the experiment's default)
    log: Callable[[str], None] = _no_log  # a line of progress text, shown above the bar


@dataclass(frozen=True)
class ExperimentResult:
    """What the CLI prints: a titled table, and the paths of any files the experiment saved."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    files: tuple[Path, ...] = ()
    notes: str = ""


Runner = Callable[[LROracle, ExperimentArgs], Awaitable[ExperimentResult]]
OracleFactory = Callable[[PopulationSpec], AbstractAsyncContextManager[LROracle]]
FactoryRunner = Callable[[OracleFactory, ExperimentArgs], Awaitable[ExperimentResult]]
StandaloneRunner = Callable[[ExperimentArgs], ExperimentResult]
Mode = Literal["oracle", "factory", "standalone"]


@dataclass(frozen=True)
class Experiment:
    """A registered experiment. ``mode`` says what its runner takes: ``"oracle"`` one LR oracle for
    ``population(args)``; ``"factory"`` an ``OracleFactory``; ``"standalone"`` only the args."""

    name: str
    runner: Callable[..., Any]
    population: Callable[[ExperimentArgs], PopulationSpec] | None
    description: str = ""
    default_users: int | None = 100_000  # None: the experiment chooses its own sizes (--users refused)
    mode: Mode = "oracle"
    default_epsilon: float | None = 1.0  # --epsilon when not given; None: --epsilon refused
    takes_options: bool = False  # accepts -o key=value (else any option is a user mistake)

    @property
    def transports(self) -> tuple[str, ...]:
        return ("inprocess",) if self.mode == "standalone" else ("grpc", "inprocess")


_REGISTRY: dict[str, Experiment] = {}


def register_experiment(
    name: str,
    runner: Runner | FactoryRunner | StandaloneRunner,
    population: Callable[[ExperimentArgs], PopulationSpec] | None = None,
    description: str = "",
    default_users: int | None = 100_000,
    *,
    needs_factory: bool = False,
    uses_oracle: bool = True,
    default_epsilon: float | None = 1.0,
    takes_options: bool = False,
) -> Experiment:
    """Make ``name`` runnable as ``ldp-sim run NAME``; returns the registered ``Experiment``.

    Plain experiments give ``population`` and get one oracle; ``needs_factory=True`` gets an
    ``OracleFactory`` instead; ``uses_oracle=False`` is a synchronous in-process runner.
    """
    if name in _REGISTRY:
        raise ValueError(f"experiment {name!r} is already registered")
    if needs_factory and not uses_oracle:
        raise ValueError("an experiment that does not use the LR oracle needs no oracle factory")
    mode: Mode = "standalone" if not uses_oracle else "factory" if needs_factory else "oracle"
    if mode == "oracle" and population is None:
        raise ValueError(f"experiment {name!r} takes one oracle, so it needs a population function")
    exp = Experiment(name, runner, population, description, default_users, mode, default_epsilon, takes_options)
    _REGISTRY[name] = exp
    return exp


@asynccontextmanager
async def in_process_factory(population: PopulationSpec) -> AsyncIterator[LROracle]:
    """The in-process ``OracleFactory``: a fresh ``InProcessLROracle`` per population."""
    from ldp.local.oracle import InProcessLROracle

    oracle = InProcessLROracle(population)
    try:
        yield oracle
    finally:
        await oracle.close()


C = TypeVar("C")


def _convert(key: str, text: str, default: Any) -> Any:
    """``text`` as the type of ``default`` (tuples: comma-separated items like the default's)."""
    try:
        if isinstance(default, bool):
            if text.lower() not in {"true", "false", "1", "0", "yes", "no"}:
                raise ValueError(text)
            return text.lower() in {"true", "1", "yes"}
        if isinstance(default, tuple):
            item = type(default[0]) if default else str
            return tuple(_convert(key, part.strip(), item()) for part in text.split(",") if part.strip())
        if isinstance(default, (int, float)):
            return type(default)(text)
        return text
    except ValueError:
        raise ParameterError(f"option {key}={text!r}: expected {type(default).__name__}" + (" items, comma-separated" if isinstance(default, tuple) else "")) from None


def apply_options(config: C, options: Mapping[str, Any]) -> C:
    """A copy of the dataclass ``config`` with ``-o key=value`` options applied (strings are
    converted to the type of the field's current value). Unknown keys are a ``ParameterError``
    listing the known ones."""
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}  # type: ignore[arg-type]
    changes = {}
    for key, value in options.items():
        if key not in fields:
            raise ParameterError(f"unknown option {key!r} for this experiment; options: {sorted(fields)}")
        changes[key] = _convert(key, value, fields[key]) if isinstance(value, str) else value
    return dataclasses.replace(config, **changes)  # type: ignore[type-var]


def get_experiment(name: str) -> Experiment:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownKindError(f"unknown experiment {name!r}; known experiments: {sorted(_REGISTRY)}") from None


def experiments() -> list[Experiment]:
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


# --- built-in: rr-demo ---

RR_DEMO_P = 0.3  # each bit of x is 1 with this probability: the truth the demo estimates


def rr_demo_population(args: ExperimentArgs) -> PopulationSpec:
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
        missing = len(reports.asked) - m
        rows.append((f"{eps:.4g}", m, f"{estimate:.4f}", f"{RR_DEMO_P:.4f}", f"{abs(estimate - RR_DEMO_P):.4f}", f"{std:.4f}", missing))
        args.progress(k + 1, len(epsilons))
    return ExperimentResult(
        f"Randomized response of one bit: {n} users, budget ε = {args.epsilon:g}",
        ("ε", "reports", "estimate", "truth", "|error|", "std. error (theory)", "not answered"),
        tuple(rows),
        notes="truth = Pr[x_0 = 1] of the population's distribution; each ε uses a disjoint quarter of the users",
    )


# Registered by ``ldp.cli.catalog`` (as "rr-demo"), which also writes its table as files.
