"""What an experiment is: the ``Experiment`` protocol, the settings it runs with, its typed result.

What: an experiment is the third role of the trust model (docs/design.md §2a): it owns the seeds
and the ground truth, asks users for reports through an ``LROracle`` (or many, through an
``OracleFactory``) and measures. The command line (``ldp-sim run NAME``, ``ldp-sim serve``), the
labs, the classroom and a user's own code all drive one through this protocol:

- ``shape`` says what ``run`` takes: ``"oracle"`` one ``LROracle`` for ``population(args)``;
  ``"factory"`` an ``OracleFactory`` (many seeded populations); ``"standalone"`` nothing (central
  model or exact computations: in process, outside any event loop).
- ``config_type`` is a frozen dataclass (or None): its fields are the experiment's settings,
  ``ldp-sim run NAME -o KEY=VALUE`` (``ldp.experiment.options``).
- ``run(target, args)`` returns an ``ExperimentResult`` (``"standalone"``) or an awaitable of one.

Guarantee: nothing here imports a simulation, the transport, scipy or matplotlib.
Source: docs/design.md §5 (experiments), issue 24 (experiments as plug-ins).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from ldp.core.errors import ParameterError
from ldp.core.population import PopulationSpec
from ldp.local.oracle import LROracle

__all__ = ["Experiment", "ExperimentArgs", "ExperimentResult", "OracleFactory", "Shape", "FIGURE_SUFFIXES", "transports"]

Shape = Literal["oracle", "factory", "standalone"]
OracleFactory = Callable[[PopulationSpec], AbstractAsyncContextManager[LROracle]]
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def _no_progress(done: int, total: int) -> None:
    """Default progress callback: ignore."""


def _no_log(line: str) -> None:
    """Default log callback: ignore."""


@dataclass(frozen=True)
class ExperimentArgs:
    """The settings every experiment receives (``ldp-sim run``'s options, or a caller's own)."""

    users: int
    epsilon: float  # the per-user budget ε
    seed: int = 0
    deadline_s: float = 30.0  # per-round deadline for Sessions
    progress: Callable[[int, int], None] = _no_progress  # call as progress(done, total)
    options: Mapping[str, Any] = field(default_factory=dict)  # -o KEY=VALUE: fields of the experiment's config_type
    quick: bool = False  # --quick: small sizes (the experiment's quick configuration)
    out: str | None = None  # --out: where files go (None: the experiment's default)
    log: Callable[[str], None] = _no_log  # a line of progress text, shown above the bar


@dataclass(frozen=True)
class ExperimentResult:
    """An experiment's result: a titled table (``columns``, ``rows``), notes under it, and the
    files it wrote (figures among them); ``to_json`` is the same, as JSON."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    files: tuple[Path, ...] = ()
    notes: str = ""

    @property
    def figures(self) -> tuple[Path, ...]:
        """The files that are figures (PNG, SVG, PDF)."""
        return tuple(f for f in self.files if f.suffix in FIGURE_SUFFIXES)

    def to_json(self) -> dict[str, Any]:
        """Title, notes, the table as records (column → cell) and the files, JSON-ready."""
        records = [{str(c): v if isinstance(v, (int, float, str, bool)) or v is None else str(v) for c, v in zip(self.columns, row)} for row in self.rows]
        return {"title": self.title, "notes": self.notes, "columns": list(self.columns), "rows": records, "files": [str(f) for f in self.files]}

    @classmethod
    def from_json(cls, data: Any) -> ExperimentResult:
        """The result ``to_json`` wrote (e.g. by a lab run in a child process), rows back as tuples
        in column order. Raises ``ParameterError`` for anything else."""
        try:
            columns = tuple(str(c) for c in data["columns"])
            rows = tuple(tuple(record[c] for c in columns) for record in data["rows"])
            return cls(str(data["title"]), columns, rows, tuple(Path(f) for f in data["files"]), str(data.get("notes", "")))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ParameterError(f"not an experiment result (title, columns, rows, files, notes): {type(exc).__name__}: {exc}") from None


@runtime_checkable
class Experiment(Protocol):
    """An experiment that ``ldp-sim run``, the labs, the classroom and a user's code can drive.

    Register one with ``ldp.register_experiment(exp)`` or an entry point in the group
    ``ldp_sim.experiments`` (``ldp.experiment.registry``). ``ldp.experiment.Simulation`` implements
    it for the usual shape (a config dataclass, a compute function, a report).
    """

    @property
    def name(self) -> str: ...  # ``ldp-sim run NAME``

    @property
    def description(self) -> str: ...  # one line for ``ldp-sim list``

    @property
    def shape(self) -> Shape: ...

    @property
    def config_type(self) -> type | None: ...  # a frozen dataclass: its fields are the -o settings

    @property
    def default_users(self) -> int | None: ...  # None: it chooses its own numbers of users (--users refused)

    @property
    def default_epsilon(self) -> float | None: ...  # None: it sweeps its own ε (--epsilon refused)

    def population(self, args: ExperimentArgs) -> PopulationSpec: ...  # shape "oracle": the users it asks

    def run(self, target: Any, args: ExperimentArgs) -> ExperimentResult | Awaitable[ExperimentResult]: ...


def transports(experiment: Experiment) -> tuple[str, ...]:
    """The transports an experiment runs over: a standalone one uses no LR oracle (in process only)."""
    return ("inprocess",) if experiment.shape == "standalone" else ("grpc", "inprocess")
