"""``Simulation``: the ``Experiment`` protocol for the usual shape of a simulation module.

What: a simulation module has a frozen ``Config`` dataclass (its fields are the ``-o`` settings),
a ``quick_config(seed)`` for ``--quick``, a ``compute`` function, a ``write_outputs(result, out)``
and a ``report(result, config) -> ExperimentResult`` (title, table, notes). ``Simulation`` holds
them and does the rest the same way for every experiment: the config from the settings (seed,
ε where the experiment takes one, the output folder where the config has an ``out`` field, then
the options), where files go (``--out``, else the experiment's default, else
``results/<name>``), writing them, and listing what was written.

``compute`` takes, by ``shape``: ``"standalone"`` ``compute(config)`` (run in process, outside an
event loop; a coroutine is run to completion); ``"factory"`` ``compute(config, factory, args)``
and ``"oracle"`` ``compute(config, oracle, args)`` (awaited; ``args.progress``/``args.log`` for
the progress bar). A user's own experiment is one ``Simulation(...)`` and one
``ldp.register_experiment`` call (docs/design.md §5 has an example).

Source: docs/design.md §5; issue 24 (the nine hand-written adapters this replaces).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from ldp.core.errors import ParameterError
from ldp.core.population import PopulationSpec
from ldp.experiment.options import apply_options, option_names
from ldp.experiment.protocol import ExperimentArgs, ExperimentResult, Shape

__all__ = ["Simulation"]

C = TypeVar("C")
R = TypeVar("R")


@dataclass(frozen=True)
class Simulation(Generic[C, R]):
    """An ``Experiment`` built from a simulation's parts (see the module docstring)."""

    name: str
    description: str
    config_type: type[C]
    compute: Callable[..., Any]
    report: Callable[[R, C], ExperimentResult]
    quick: Callable[[int], C] | None = None  # quick_config(seed); None: the full config
    write: Callable[[R, Path], object] | None = None  # write_outputs(result, out)
    files: tuple[str, ...] = ()  # the names write puts in the output folder, in the order to list them
    out: str | None = None  # default output folder (None: results/<name>)
    quick_out: str | None = None  # --quick's default output folder, where it differs
    shape: Shape = "standalone"
    users: Callable[[C, ExperimentArgs], PopulationSpec] | None = None  # shape "oracle": the population
    default_users: int | None = None
    default_epsilon: float | None = None

    @classmethod
    def of(cls, module: str, name: str, description: str, **parts: Any) -> Simulation[Any, Any]:
        """The simulation of a module that follows the convention: ``Config``, ``run`` (the
        compute function), ``report``, and where it has them ``quick_config``, ``write_outputs``
        and ``DEFAULT_OUT``; ``parts`` name what differs (``files``, ``shape``, ``compute``, ...).
        Called at the end of the module itself: ``Simulation.of(__name__, "geometry", "...")``."""
        namespace = vars(sys.modules[module])
        found = {"config_type": namespace["Config"], "compute": namespace["run"], "report": namespace["report"], "quick": namespace.get("quick_config"),
                 "write": namespace.get("write_outputs"), "out": namespace.get("DEFAULT_OUT")}
        return cls(name, description, **{**found, **parts})

    def output_folder(self, args: ExperimentArgs) -> str:
        """``--out``, else the experiment's default for these settings."""
        if args.out:
            return args.out
        if args.quick and self.quick_out:
            return self.quick_out
        return self.out or f"results/{self.name}"

    def config(self, args: ExperimentArgs) -> C:
        """The typed config for ``args``: quick or full, the seed, ε (if the experiment takes
        ``--epsilon``), the output folder (if the config has ``out``), then the ``-o`` options."""
        base = self.quick(args.seed) if args.quick and self.quick is not None else self.config_type(seed=args.seed)  # type: ignore[call-arg]
        names = option_names(self.config_type)
        changes: dict[str, Any] = {}
        if self.default_epsilon is not None and "epsilon" in names:
            changes["epsilon"] = args.epsilon
        if "out" in names:
            changes["out"] = self.output_folder(args)
        return apply_options(dataclasses.replace(base, **changes), args.options)  # type: ignore[type-var]

    def population(self, args: ExperimentArgs) -> PopulationSpec:
        if self.users is None:
            raise ParameterError(f"{self.name} has no single population (it runs many or none)")
        return self.users(self.config(args), args)

    def _finish(self, result: R, config: C, args: ExperimentArgs) -> ExperimentResult:
        out = Path(getattr(config, "out", None) or self.output_folder(args))
        if self.write is not None:
            self.write(result, out)
        report = self.report(result, config)
        if report.files or not self.files:
            return report
        return dataclasses.replace(report, files=tuple(out / n for n in self.files if (out / n).exists()))

    def run(self, target: Any, args: ExperimentArgs) -> Any:
        """``ExperimentResult`` (standalone) or a coroutine of one (oracle, factory)."""
        config = self.config(args)
        if self.shape == "standalone":
            result = self.compute(config)
            if inspect.isawaitable(result):
                result = asyncio.run(result)  # type: ignore[arg-type]
            return self._finish(result, config, args)
        return self._run_async(config, target, args)

    async def _run_async(self, config: C, target: Any, args: ExperimentArgs) -> ExperimentResult:
        return self._finish(await self.compute(config, target, args), config, args)
