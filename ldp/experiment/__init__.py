"""Experiments as plug-ins: the ``Experiment`` protocol, its typed settings and result, and the
registry that ``ldp-sim list`` / ``ldp-sim run``, the labs, the classroom and a user's code share.

- ``ldp.experiment.protocol``: ``Experiment``, ``ExperimentArgs``, ``ExperimentResult``, ``OracleFactory``.
- ``ldp.experiment.options``: ``-o KEY=VALUE`` from the fields of an experiment's config dataclass.
- ``ldp.experiment.simulation``: ``Simulation``, the protocol for a config + compute + report.
- ``ldp.experiment.registry``: ``register_experiment`` (one call) and the entry point group
  ``ldp_sim.experiments``.

A user's own experiment, registered with one call and run from ``ldp-sim``'s own command line::

    from dataclasses import dataclass
    import ldp
    from ldp.experiment import ExperimentResult, Simulation

    @dataclass(frozen=True)
    class Config:
        seed: int = 0
        flips: int = 1000          # ldp-sim run coin -o flips=5000

    def compute(config: Config) -> float:
        return float(ldp.generator(config.seed, "coin").integers(0, 2, config.flips).mean())

    def report(heads: float, config: Config) -> ExperimentResult:
        return ExperimentResult("a fair coin", ("flips", "heads"), ((config.flips, f"{heads:.3f}"),))

    ldp.register_experiment(Simulation("coin", "flip a coin", Config, compute, report))
    ldp.cli.main.main(["run", "coin", "-o", "flips=5000"])  # or: the entry point group, for `ldp-sim`

Layer: below the classroom and the simulations, above the learners (pyproject's [tool.importlinter]).
"""

from __future__ import annotations

from ldp.experiment.factories import in_process_factory
from ldp.experiment.options import apply_options, option_names
from ldp.experiment.protocol import Experiment, ExperimentArgs, ExperimentResult, OracleFactory, Shape, transports
from ldp.experiment.registry import ENTRY_POINT_GROUP, experiment_names, experiments, get_experiment, register_experiment, unregister_experiment
from ldp.experiment.simulation import Simulation

__all__ = [
    "ENTRY_POINT_GROUP",
    "Experiment",
    "ExperimentArgs",
    "ExperimentResult",
    "OracleFactory",
    "Shape",
    "Simulation",
    "apply_options",
    "experiment_names",
    "experiments",
    "get_experiment",
    "in_process_factory",
    "option_names",
    "register_experiment",
    "transports",
    "unregister_experiment",
]

