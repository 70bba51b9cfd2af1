"""The experiments ``ldp-sim list`` shows and ``ldp-sim run NAME`` starts, and how one joins them.

What: two doors, one registry.

- One call: ``ldp.register_experiment(experiment)`` (this module's ``register_experiment``), from
  a user's own code, before it calls ``ldp.cli.main.main`` or runs the experiment itself.
- An entry point in the group ``ldp_sim.experiments`` of any installed distribution (or any
  ``*.dist-info`` on ``sys.path``): ``name = "module:OBJECT"``, where ``OBJECT`` satisfies the
  ``Experiment`` protocol. The built-in experiments join this way too (pyproject.toml's
  ``[project.entry-points."ldp_sim.experiments"]``), so ``ldp-sim`` has no list of its own.

An entry point's module is imported only when its experiment is asked for (``get_experiment``)
or all are listed (``experiments``): ``ldp-sim run rr-demo`` imports no other simulation.
Guarantee: names are unique (a second experiment under a taken name is a ``ParameterError``); an
unknown name is an ``UnknownKindError`` listing the known ones; an entry point that fails to load
or is no ``Experiment`` is a ``ParameterError`` naming it.
Source: docs/design.md §5; importlib.metadata (Python Packaging User Guide, "Entry points").
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import EntryPoint, distributions

from ldp.core.errors import LDPError, ParameterError, UnknownKindError
from ldp.experiment.protocol import Experiment

__all__ = ["ENTRY_POINT_GROUP", "register_experiment", "unregister_experiment", "get_experiment", "experiment_names", "experiments"]

ENTRY_POINT_GROUP = "ldp_sim.experiments"

_REGISTRY: dict[str, Experiment] = {}  # registered by a call, or loaded from an entry point


def _entry_points() -> dict[str, EntryPoint]:
    """The group's entry points by name (the first of a name wins, in ``sys.path`` order).

    Every distribution is read, two of one name included: ``importlib.metadata.entry_points``
    keeps only the first, and a stale ``ldp_sim.egg-info`` left in a checkout by an old build
    (first on ``sys.path`` when Python runs from the checkout) would hide the installed metadata."""
    found: dict[str, EntryPoint] = {}
    for dist in distributions():
        for ep in dist.entry_points:
            if ep.group == ENTRY_POINT_GROUP:
                found.setdefault(ep.name, ep)
    return found


def _check(experiment: object, where: str) -> Experiment:
    if not isinstance(experiment, Experiment):
        raise ParameterError(
            f"{where} is not an experiment: {experiment!r} lacks name, description, shape, config_type, default_users, "
            "default_epsilon, population or run (the ldp.experiment.Experiment protocol)"
        )
    if experiment.shape not in ("oracle", "factory", "standalone"):
        raise ParameterError(f"{where}: shape must be 'oracle', 'factory' or 'standalone', got {experiment.shape!r}")
    return experiment


def register_experiment(experiment: Experiment) -> Experiment:
    """Make ``experiment`` runnable as ``ldp-sim run NAME`` and listed by ``ldp-sim list``.

    The one-call door for a user's own experiment (the other is the entry point group
    ``ldp_sim.experiments``). Registering the same object twice is harmless.

    Parameters
    ----------
    experiment : Experiment
        Anything that satisfies the ``ldp.experiment.Experiment`` protocol, e.g. a
        ``ldp.experiment.Simulation``; its ``name`` must not be taken.

    Returns
    -------
    Experiment
        ``experiment`` itself.

    Raises
    ------
    ParameterError
        If it is no ``Experiment``, or another experiment has its name.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> import ldp
    >>> from ldp.experiment import ExperimentArgs, ExperimentResult, Simulation, get_experiment
    >>> @dataclass(frozen=True)
    ... class Config:
    ...     seed: int = 0
    ...     flips: int = 1000  # ldp-sim run coin -o flips=4000
    >>> def compute(config):
    ...     return float(ldp.generator(config.seed, "coin").integers(0, 2, config.flips).mean())
    >>> def report(heads, config):
    ...     return ExperimentResult("a fair coin", ("flips", "heads"), ((config.flips, round(heads, 1)),))
    >>> coin = ldp.register_experiment(Simulation("coin", "flip a coin", Config, compute, report))
    >>> get_experiment("coin").run(None, ExperimentArgs(users=0, epsilon=1.0, options={"flips": "4000"})).rows
    ((4000, 0.5),)
    >>> unregister_experiment("coin")
    """
    _check(experiment, "register_experiment's argument")
    name = experiment.name
    current = _REGISTRY.get(name)
    if current is experiment:
        return experiment
    if current is not None or name in _entry_points():
        raise ParameterError(f"experiment {name!r} is already registered; choose another name (ldp-sim list shows the taken ones)")
    _REGISTRY[name] = experiment
    return experiment


def unregister_experiment(name: str) -> None:
    """Forget an experiment registered by a call (tests, notebooks that redefine one)."""
    _REGISTRY.pop(name, None)


def _load(ep: EntryPoint) -> Experiment:
    where = f"entry point {ep.name} = {ep.value} (group {ENTRY_POINT_GROUP})"
    try:
        obj = ep.load()
    except LDPError:
        raise
    except Exception as exc:  # a plug-in's import error: one line naming the plug-in, not a traceback
        raise ParameterError(f"{where} failed to load: {type(exc).__name__}: {exc}") from None
    experiment = _check(obj, where)
    if experiment.name != ep.name:
        raise ParameterError(f"{where} names an experiment called {experiment.name!r}: the entry point's name must be the experiment's")
    return experiment


def experiment_names() -> list[str]:
    """Every experiment's name, sorted, without importing any (entry points are not loaded)."""
    return sorted(set(_REGISTRY) | set(_entry_points()))


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name`` (its entry point loaded on first use)."""
    if name not in _REGISTRY:
        ep = _entry_points().get(name)
        if ep is None:
            raise UnknownKindError(f"unknown experiment {name!r}; known experiments: {experiment_names()}")
        _REGISTRY[name] = _load(ep)
    return _REGISTRY[name]


def experiments(on_error: Callable[[str, LDPError], None] | None = None) -> list[Experiment]:
    """Every experiment, sorted by name. A plug-in that fails to load is passed to ``on_error``
    (``ldp-sim list`` prints one line for it and lists the rest), or raises without one."""
    found = []
    for name in experiment_names():
        try:
            found.append(get_experiment(name))
        except LDPError as exc:
            if on_error is None:
                raise
            on_error(name, exc)
    return found
