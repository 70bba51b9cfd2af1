"""``ldp-sim run``, ``ldp-sim population`` and ``ldp-sim list``: experiments on this machine.

- ``ldp-sim run EXPERIMENT [--processes P] [--users N] [--epsilon E] [--seed S] [--transport grpc|inprocess]
  [--quick] [--out DIR] [-o KEY=VALUE ...]``
  starts the aggregator and P client processes on 127.0.0.1 (a free port, spawned fresh
  interpreters), shows progress, prints the result table, and shuts everything down. Experiments
  over many populations (``separation``) keep one cluster and load each population into it;
  experiments that do not use the LR oracle run in process. ``--launcher ray [--ray-address ADDR]
  [--tls DIR --token-file F | --client-name NAME]`` has Ray place the client processes as tasks on
  a Ray cluster instead (``ldp.wire.ray_launcher``; ``pip install 'ldp-sim[ray]'``).
- ``ldp-sim population EXPERIMENT [--users N] [--seed S] --out SPEC.json`` writes the population
  spec of an experiment (the experiment's secret: records and report keys follow from it; the
  seed is random unless ``--seed`` is given, so nobody can guess it) for
  ``clients --population`` on other machines; copy it there out of band, never through the aggregator.
- ``ldp-sim list`` lists the experiments: the built-in ones and any a user registered, with
  ``ldp.register_experiment`` or an entry point in the group ``ldp_sim.experiments``
  (``ldp.experiment.registry``).

``add_experiment_arguments``, ``experiment_args``, ``run_standalone``, ``awaited`` and
``print_result`` are shared with ``ldp-sim serve`` (``ldp.cli.serve``). See docs/protocol.md.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ldp.cli.argtypes import (
    epsilon_type,
    existing_dir,
    existing_file,
    option_pair,
    output_directory,
    output_file,
    process_count,
    seconds_type,
    seed_value,
    user_count,
)
from ldp.cli.command import Command, stdout_console
from ldp.core.errors import LDPError, ParameterError, require_epsilon
from ldp.experiment import Experiment, ExperimentArgs, ExperimentResult, experiments, get_experiment, in_process_factory, option_names, transports
from ldp.local.oracle import InProcessLROracle

__all__ = [
    "RUN", "POPULATION", "LIST", "add_experiment_arguments", "experiment_args", "awaited", "print_result", "run_standalone",
]



def add_experiment_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", help="experiment name (see `ldp-sim list`)")
    p.add_argument("--users", type=user_count, default=None, help="number of users n (default: the experiment's)")
    p.add_argument("--epsilon", type=epsilon_type("budget epsilon"), default=None, help="per-user privacy budget ε (default: the experiment's, usually 1)")
    p.add_argument("--seed", type=seed_value, default=None, help="population seed (default 0; `population`: a random one)")
    p.add_argument("--deadline", type=seconds_type("the round deadline"), default=30.0, help="per-round deadline in seconds (default 30)")
    p.add_argument("--quick", action="store_true", help="the experiment's small configuration")
    p.add_argument("--out", default=None, help="directory for the files it writes (default: results/<experiment>)")
    p.add_argument(
        "-o", "--option", dest="options", type=option_pair, action="append", default=[], metavar="KEY=VALUE",
        help="an experiment setting, e.g. -o trials=3 -o masked_d=2,4 (separation: any field of its Config)",
    )


def _run_arguments(run: argparse.ArgumentParser) -> None:
    add_experiment_arguments(run)
    run.add_argument("--processes", type=process_count, default=2, help="client processes for --transport grpc (default 2)")
    run.add_argument(
        "--transport", choices=("grpc", "inprocess"), default=None, help="grpc (default) or inprocess (the only one for experiments without an LR oracle)"
    )
    run.add_argument(
        "--launcher", choices=("local", "ray"), default="local",
        help="who places the client processes: local (default: on this machine) or ray (tasks on a Ray cluster; pip install 'ldp-sim[ray]')",
    )
    run.add_argument("--ray-address", metavar="ADDR", default=None, help="with --launcher ray: the cluster (auto, or the head's HOST:6379; default: start a local one)")
    run.add_argument("--tls", type=existing_dir("the --tls directory"), metavar="DIR", help="with --launcher ray: serve over TLS with DIR from `ldp-sim certs`; each client task gets ca.pem and its enrolment")
    run.add_argument("--token-file", type=existing_file("the token file"), metavar="F", help="with --launcher ray --tls: enrol the client tasks by this token")
    run.add_argument("--client-name", metavar="NAME", help="with --launcher ray --tls: the client certificate DIR/client-NAME.pem every client task presents (mTLS)")


def experiment_args(ns: argparse.Namespace, progress: Any, log: Any = None) -> tuple[Experiment, ExperimentArgs]:
    """The experiment and its arguments, every user mistake caught here (one clean line), in this
    order: users, ε, seed, ``-o`` options, transport, then (``run``) whether this machine can hold
    the users, then the output path."""
    exp = get_experiment(ns.experiment)
    users = _users_of(exp, ns)
    epsilon = _epsilon_of(exp, ns)
    seed = 0 if ns.seed is None else ns.seed
    if not 0 <= seed < 2**64:
        raise ParameterError(f"--seed must be in [0, 2^64), got {seed}")
    options = _options_of(exp, ns)
    transport = getattr(ns, "transport", None)
    if transport is not None and places_own_clients(exp):
        _fold_transport(exp, ns, options, transport)
    elif transport is not None and transport not in transports(exp):
        raise ParameterError(f"{exp.name} does not use the LR oracle: it runs in process only (drop --transport {transport})")
    args = ExperimentArgs(
        users=users, epsilon=epsilon, seed=seed, deadline_s=ns.deadline, progress=progress, options=options,
        quick=ns.quick, out=ns.out, log=log or (lambda line: None),
    )
    if ns.command == "run" and exp.shape == "oracle":
        _check_hostable_here(exp, args)
    if ns.out is not None:
        if ns.command == "population":
            output_file(ns.out)
        else:
            output_directory(ns.out)
    return exp, args


def _users_of(exp: Experiment, ns: argparse.Namespace) -> int:
    """``--users``, or the experiment's default; 0 for an experiment that chooses its own."""
    if exp.default_users is None:
        if ns.users is not None:
            raise ParameterError(f"--users does not apply to {exp.name} (it chooses its own numbers of users; see -o)")
        return 0
    users: int = exp.default_users if ns.users is None else ns.users
    if users < 1:
        raise ParameterError(f"--users must be ≥ 1, got {users}")
    return users


def _epsilon_of(exp: Experiment, ns: argparse.Namespace) -> float:
    """``--epsilon``, or the experiment's default (1 for one that sweeps its own ε)."""
    if exp.default_epsilon is None and ns.epsilon is not None:
        raise ParameterError(f"--epsilon does not apply to {exp.name} (it sweeps its own ε; see -o)")
    epsilon = (exp.default_epsilon or 1.0) if ns.epsilon is None else ns.epsilon
    return require_epsilon(epsilon, "budget epsilon")


def places_own_clients(exp: Experiment) -> bool:
    """A standalone experiment that starts its own client processes (real-data, the labs): its
    configuration has a ``transport`` setting, which ``--transport`` and ``--processes`` set."""
    return exp.shape == "standalone" and "transport" in option_names(exp.config_type)


def _fold_transport(exp: Experiment, ns: argparse.Namespace, options: dict[str, str], transport: str) -> None:
    """``--transport T [--processes P]`` for an experiment that places its own clients: the same
    as ``-o transport=T [-o processes=P]`` (one of the two ways, not both)."""
    if "transport" in options:
        raise ParameterError(f"give {exp.name}'s transport once: --transport {transport} or -o transport={options['transport']}, not both")
    options["transport"] = transport
    if transport == "grpc" and "processes" in option_names(exp.config_type) and "processes" not in options:
        options["processes"] = str(ns.processes)


def _options_of(exp: Experiment, ns: argparse.Namespace) -> dict[str, str]:
    """The ``-o KEY=VALUE`` settings: only for an experiment with a configuration, each key once."""
    options = dict(ns.options)
    if options and not option_names(exp.config_type):
        raise ParameterError(f"{exp.name} takes no -o options (got {sorted(options)})")
    repeated = sorted({key for key, _ in ns.options if sum(k == key for k, _ in ns.options) > 1})
    if repeated:
        raise ParameterError(f"-o {repeated[0]}=... is given more than once; give each setting once (lists: -o {repeated[0]}=a,b)")
    return options


def _check_hostable_here(exp: Experiment, args: ExperimentArgs) -> None:
    """`run` holds every user on this machine, whatever the number of client processes."""
    from ldp.core.population import check_hostable

    spec = exp.population(args)
    check_hostable(
        spec.schema, spec.size, where="on this machine",
        hint="use fewer users (--users), or serve them from several machines (`ldp-sim serve` here and "
        "`ldp-sim clients --shard K/M --processes P` on each of the others)",
    )


async def awaited(value: Any) -> ExperimentResult:
    """An experiment's ``run`` gives its result or an awaitable of it (the Experiment protocol)."""
    result = await value if inspect.isawaitable(value) else value
    if not isinstance(result, ExperimentResult):
        raise ParameterError(f"an experiment's run must give an ExperimentResult (ldp.experiment), got {type(result).__name__}")
    return result


def print_result(console: Console, result: ExperimentResult, elapsed: float) -> None:
    table = Table(title=result.title)
    for c in result.columns:
        table.add_column(str(c), justify="right")
    for row in result.rows:
        table.add_row(*(str(v) for v in row))
    console.print(table)
    if result.notes:
        console.print(result.notes, markup=False, highlight=False)
    for f in result.files:
        console.print(f"saved {f}", markup=False, highlight=False)
    console.print(f"done in {elapsed:.2f} s")


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(), console=console)


def _bar_args(ns: argparse.Namespace, bar: Progress, task: TaskID) -> tuple[Experiment, ExperimentArgs]:
    return experiment_args(
        ns,
        lambda done, total: bar.update(task, completed=done, total=total),
        lambda line: bar.console.print(line, markup=False, highlight=False),  # printed above the bar
    )


async def _run(ns: argparse.Namespace, console: Console) -> int:
    bar = _progress(console)
    task = bar.add_task(f"{ns.experiment}: starting", total=None)
    # Validate everything before the bar appears, so a user mistake prints one clean line.
    exp, args = _bar_args(ns, bar, task)
    transport = ns.transport or "grpc"
    if transport == "grpc" and ns.processes < 1:
        raise ParameterError(f"--processes must be ≥ 1, got {ns.processes}")
    _check_launcher(ns, transport)
    if exp.shape == "factory":
        return await _run_factory(ns, console, bar, task, exp, args, transport)
    spec = exp.population(args)
    if transport == "grpc" and not 1 <= ns.processes <= spec.size:
        raise ParameterError(f"--processes must be in [1, users = {spec.size}], got {ns.processes}")
    start = time.perf_counter()
    with bar:
        if transport == "inprocess":
            bar.update(task, description=f"{exp.name} (in process)")
            result = await awaited(exp.run(InProcessLROracle(spec), args))
        else:
            from ldp.wire.launcher import launch_local

            bar.update(task, description=f"{exp.name}: starting {ns.processes} client process(es){_where(ns)}")
            launched = launch_local(spec, processes=ns.processes) if ns.launcher == "local" else _launch_ray(ns, spec)
            async with launched as grpc_oracle:
                bar.update(task, description=f"{exp.name} (gRPC, {ns.processes} process(es){_where(ns)})")
                result = await awaited(exp.run(grpc_oracle, args))
    print_result(console, result, time.perf_counter() - start)
    return 0


def _check_launcher(ns: argparse.Namespace, transport: str) -> None:
    """`run --launcher ray` and its options: each only where it applies (one clear line)."""
    ray_only = [flag for flag, value in (("--ray-address", ns.ray_address), ("--tls", ns.tls), ("--token-file", ns.token_file), ("--client-name", ns.client_name)) if value is not None]
    if ns.launcher != "ray" and ray_only:
        raise ParameterError(f"{ray_only[0]} applies to --launcher ray only")
    if ns.launcher == "ray":
        if transport != "grpc":
            raise ParameterError("--launcher ray places client processes: it needs --transport grpc")
        if ns.tls is None and (ns.token_file or ns.client_name):
            raise ParameterError("--token-file and --client-name need --tls DIR")
        if ns.tls is not None and ns.token_file is None and ns.client_name is None:
            raise ParameterError("--tls with --launcher ray needs --token-file F (token mode) or --client-name NAME (mTLS)")
        if ns.token_file is not None and ns.client_name is not None:
            # the aggregator this run starts admits one way: a token it would never ask for is refused
            raise ParameterError("--tls with --launcher ray takes --token-file F (token mode) or --client-name NAME (mTLS), not both")
        from ldp.wire.ray_launcher import import_ray

        import_ray()  # not installed: one line saying `pip install 'ldp-sim[ray]'`, before anything starts


def _where(ns: argparse.Namespace) -> str:
    return ", placed by Ray" if ns.launcher == "ray" else ""


def _ray_options(ns: argparse.Namespace) -> dict[str, Any]:
    return {"address": ns.ray_address, "tls": ns.tls, "token_file": ns.token_file, "client_name": ns.client_name}


def _launch_ray(ns: argparse.Namespace, spec: Any) -> Any:
    from ldp.wire.ray_launcher import launch_ray

    return launch_ray(spec, processes=ns.processes, **_ray_options(ns))


def _ray_factory(ns: argparse.Namespace) -> Any:
    from ldp.wire.ray_launcher import ray_oracle_factory

    return ray_oracle_factory(ns.processes, **_ray_options(ns))


async def _run_factory(
    ns: argparse.Namespace, console: Console, bar: Progress, task: TaskID, exp: Experiment, args: ExperimentArgs, transport: str
) -> int:
    """An experiment over many populations: one oracle per population from a factory. Over gRPC
    one cluster of client processes serves them all (each population is loaded into it) and is
    shut down when the experiment ends, fails or is interrupted."""
    start = time.perf_counter()
    summary = ""
    with bar:
        if transport == "inprocess":
            bar.update(task, description=f"{exp.name} (in process)")
            result = await awaited(exp.run(in_process_factory, args))
        else:
            from ldp.wire.launcher import grpc_oracle_factory

            bar.update(task, description=f"{exp.name} (gRPC: starting {ns.processes} client process(es){_where(ns)})")
            cluster = grpc_oracle_factory(ns.processes) if ns.launcher == "local" else _ray_factory(ns)
            async with cluster as factory:
                factory.on_launch = lambda oracle: bar.update(task, description=f"{exp.name} (gRPC, {ns.processes} process(es){_where(ns)})")
                result = await awaited(exp.run(factory, args))
                summary = (
                    f"{factory.populations} population(s) served by {ns.processes} client process(es) "
                    f"({factory.load_seconds:.2f} s starting them and loading populations)"
                )
    print_result(console, result, time.perf_counter() - start)
    if summary:
        console.print(summary, markup=False, highlight=False)
    return 0


def run_standalone(ns: argparse.Namespace, console: Console) -> int:
    """An experiment without an LR oracle: synchronous, in process (Ctrl-C interrupts it directly)."""
    bar = _progress(console)
    task = bar.add_task(f"{ns.experiment} (in process)", total=None)
    exp, args = _bar_args(ns, bar, task)
    if getattr(ns, "launcher", "local") != "local":
        raise ParameterError(f"{exp.name} uses no LR oracle and no client process: it runs in process (drop --launcher {ns.launcher})")
    start = time.perf_counter()
    with bar:
        result = exp.run(None, args)
        if inspect.isawaitable(result):  # a standalone experiment may compute with asyncio (no event loop runs here)
            result = asyncio.run(awaited(result))
    print_result(console, result, time.perf_counter() - start)
    return 0


def _population(ns: argparse.Namespace, console: Console) -> int:
    import json
    import secrets

    if ns.seed is None:
        # Whoever knows the seed can regenerate the records and the report key: a spec meant for
        # client machines gets a seed nobody can guess, unless one is asked for (reproducibility).
        ns.seed = secrets.randbits(63)
    exp, args = experiment_args(ns, lambda done, total: None)
    if exp.shape != "oracle":
        raise ParameterError(f"{exp.name} has no single population (it runs many or none)")
    if ns.out is None:
        raise ParameterError("say where to write the spec: --out SPEC.json")
    spec = exp.population(args)
    try:
        Path(ns.out).write_text(json.dumps(spec.to_json(), indent=1))
    except OSError as exc:
        raise ParameterError(f"cannot write --out {ns.out}: {exc.strerror}") from None
    console.print(
        f"wrote the spec of {spec.size} users (seed {spec.seed}) to {ns.out}: a secret of the experiment and the users "
        "(records and report keys follow from it); give it to client machines only, never to the aggregator",
        markup=False, highlight=False,
    )
    return 0


def _list(ns: argparse.Namespace, console: Console) -> int:
    """Every experiment, built-in or a plug-in's; a plug-in that fails to load is one line on stderr."""
    errors = Console(stderr=True)

    def broken(name: str, exc: LDPError) -> None:
        errors.print(f"ldp-sim: warning: experiment {name} is not listed: {exc}", markup=False, highlight=False, soft_wrap=True)

    for exp in experiments(on_error=broken):
        where = "its own clients: grpc|inprocess" if places_own_clients(exp) else "in process only" if exp.shape == "standalone" else "grpc|inprocess"
        console.print(f"{exp.name:22s} [{where}] {exp.description}", markup=False, highlight=False, soft_wrap=True)
    return 0


def run_command(ns: argparse.Namespace) -> int:
    """`ldp-sim run`. An experiment without an LR oracle runs in process (``run_standalone``)."""
    console = stdout_console()
    if get_experiment(ns.experiment).shape == "standalone":
        return run_standalone(ns, console)
    return asyncio.run(_run(ns, console))


def population_command(ns: argparse.Namespace) -> int:
    return _population(ns, stdout_console())


def list_command(ns: argparse.Namespace) -> int:
    return _list(ns, stdout_console())


def _no_arguments(p: argparse.ArgumentParser) -> None:
    """``ldp-sim list`` takes none."""


RUN = Command(
    "run", "run an experiment on this machine",
    "Run EXPERIMENT here: the aggregator and --processes client processes on 127.0.0.1 (or in process with --transport inprocess), "
    "a progress bar, the result table, and its files in --out. `ldp-sim list` names the experiments; -o KEY=VALUE sets a field of "
    "the experiment's configuration.",
    ("ldp-sim run rr-demo --users 100000 --epsilon 1 --processes 4", "ldp-sim run separation --quick -o trials=5"),
    _run_arguments, run_command,
)
POPULATION = Command(
    "population", "write an experiment's population spec for `clients --population`",
    "Write the population spec of EXPERIMENT (its users' records and report keys follow from it: a secret of the experiment and "
    "the users) for client machines; copy it there out of band, never through the aggregator.",
    ("ldp-sim population rr-demo --users 100000 --out spec.json",),
    add_experiment_arguments, population_command,
)
LIST = Command(
    "list", "list the experiments",
    "List the experiments `ldp-sim run` knows: the built-in ones and any a plug-in registered, with ldp.register_experiment or an "
    "entry point in the group ldp_sim.experiments (docs/design.md §5).",
    ("ldp-sim list",),
    _no_arguments, list_command,
)
