"""``ldp-sim``: run experiments in process or over gRPC, on one machine or several.

Commands:
- ``ldp-sim run EXPERIMENT [--processes P] [--users N] [--epsilon E] [--seed S] [--transport grpc|inprocess]
  [--quick] [--out DIR] [-o KEY=VALUE ...]``
  starts the aggregator and P client processes on 127.0.0.1 (a free port, spawned fresh
  interpreters), shows progress, prints the result table, and shuts everything down. Experiments
  over many populations (``separation``) keep one cluster and load each population into it;
  experiments that do not use the LR oracle run in process.
- ``ldp-sim serve --bind HOST:PORT EXPERIMENT [...]`` runs the aggregator side alone: waits until
  client processes (started with ``ldp-sim clients``, possibly on other machines) hold every user,
  runs the experiment, sends Close.
- ``ldp-sim clients --connect HOST:PORT (--population SPEC.json | --data FILE [--schema S.json])
  --budget E [--key-file F] [--ledger PATH] --shard K/M --processes P`` runs P client processes
  that together hold machine shard K of M (users [n·K/M, n·(K+1)/M)) of *their own* data: the
  users' side is configured here, never by the aggregator (docs/design.md §2a).
- ``ldp-sim population EXPERIMENT [--users N] [--seed S] --out SPEC.json`` writes the population
  spec of an experiment (the experiment's secret: records and report keys follow from it; the
  seed is random unless ``--seed`` is given, so nobody can guess it) for
  ``clients --population`` on other machines; copy it there out of band, never through the aggregator.
- ``ldp-sim list`` lists the registered experiments.

User mistakes (unknown experiment, bad parameters, an aggregator that cannot bind) print one
line ``ldp-sim: error: ...`` and exit with code 2, without a traceback; Ctrl-C exits with 130 and
leaves no child process behind. See docs/protocol.md.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ldp.cli.experiments import Experiment, ExperimentArgs, ExperimentResult, experiments, get_experiment, in_process_factory
from ldp.core.errors import LDPError, ParameterError
from ldp.local.oracle import InProcessLROracle

__all__ = ["main", "EXPERIMENT_MODULES"]

# Modules whose import registers more experiments; missing ones are skipped. ldp.cli.catalog
# registers the simulations lazily (their modules are imported only when they run).
EXPERIMENT_MODULES: tuple[str, ...] = ("ldp.cli.catalog",)

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _load_experiment_modules() -> None:
    for name in EXPERIMENT_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # the module exists but is broken: say so
                raise


def _host_port(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (e.g. 127.0.0.1:50051), got {text!r}")
    return text


def _fraction(text: str) -> tuple[int, int]:
    from ldp.wire.client import parse_fraction

    return parse_fraction(text)


def _option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. trials=3 or masked_d=2,4), got {text!r}")
    return key.strip(), value.strip()


def _experiment_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", help="experiment name (see `ldp-sim list`)")
    p.add_argument("--users", type=int, default=None, help="number of users n (default: the experiment's)")
    p.add_argument("--epsilon", type=float, default=None, help="per-user privacy budget ε (default: the experiment's, usually 1)")
    p.add_argument("--seed", type=int, default=None, help="population seed (default 0; `population`: a random one)")
    p.add_argument("--deadline", type=float, default=30.0, help="per-round deadline in seconds (default 30)")
    p.add_argument("--quick", action="store_true", help="the experiment's small configuration")
    p.add_argument("--out", default=None, help="directory for the files it writes (default: results/<experiment>)")
    p.add_argument(
        "-o", "--option", dest="options", type=_option, action="append", default=[], metavar="KEY=VALUE",
        help="an experiment setting, e.g. -o trials=3 -o masked_d=2,4 (separation: any field of its Config)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ldp-sim", description="Simulate the local model of differential privacy (KLNRS).")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run an experiment on this machine")
    _experiment_arguments(run)
    run.add_argument("--processes", type=int, default=2, help="client processes for --transport grpc (default 2)")
    run.add_argument(
        "--transport", choices=("grpc", "inprocess"), default=None, help="grpc (default) or inprocess (the only one for experiments without an LR oracle)"
    )
    serve = sub.add_parser("serve", help="run the aggregator for remote client processes")
    serve.add_argument("--bind", type=_host_port, required=True, help="HOST:PORT to listen on (port 0: any free port)")
    _experiment_arguments(serve)
    serve.add_argument("--wait", type=float, default=600.0, help="seconds to wait for client processes (default 600)")
    clients = sub.add_parser("clients", help="run client processes for a remote aggregator")
    clients.add_argument("--connect", type=_host_port, required=True, help="aggregator HOST:PORT")
    clients.add_argument("--shard", type=_fraction, default=(0, 1), help="this machine's shard K/M (default 0/1)")
    clients.add_argument("--processes", type=int, default=1, help="client processes on this machine (default 1)")
    clients.add_argument("--connect-timeout", type=float, default=60.0, help="seconds to retry while the aggregator is not up")
    held = clients.add_mutually_exclusive_group(required=True)
    held.add_argument("--population", metavar="SPEC.json", help="a population spec to generate the users' records from (ldp-sim population)")
    held.add_argument("--data", metavar="FILE", help="a CSV or Parquet file of the users' records, one user per row")
    clients.add_argument("--schema", metavar="S.json", help="the data file's schema (default: inferred from the file)")
    clients.add_argument("--budget", type=float, default=None, help="the users' per-user budget ε (required with --data; a cap with --population)")
    clients.add_argument("--key-file", metavar="F", help="32 random bytes: the secret key of report randomness (default: from the spec's seed, or fresh)")
    clients.add_argument("--ledger", metavar="PATH", help="a durable SQLite ledger (survives restarts; default: in memory)")
    pop = sub.add_parser("population", help="write an experiment's population spec for `clients --population`")
    _experiment_arguments(pop)
    sub.add_parser("list", help="list the registered experiments")
    lab = sub.add_parser("lab", help="run a teaching lab the classroom way (client processes on loopback)")
    lab.add_argument("number", type=int, help="lab number (see simulations/labs/)")
    lab.add_argument("--quick", action="store_true", help="small sizes: every lab in under a minute")
    lab.add_argument("--processes", type=int, default=2, help="client processes (default 2)")
    lab.add_argument("--transport", choices=("grpc", "inprocess"), default="grpc", help="grpc (default) or inprocess")
    lab.add_argument("--no-solutions", action="store_true", help="print the exercises without solving them")
    lab.add_argument("--out", default="results/labs", help="where figures are saved (default results/labs)")
    return parser


def lab_modules() -> dict[int, str]:
    """Lab number → module name, from simulations/labs/labN_*.py."""
    import simulations.labs as labs

    found = {}
    for path in sorted(Path(labs.__file__).parent.glob("lab*_*.py")):
        number = path.stem[3 : path.stem.index("_")]
        if number.isdigit():
            found[int(number)] = f"simulations.labs.{path.stem}"
    return found


def _lab(ns: argparse.Namespace, console: Console) -> int:
    """Run a lab script in a child Python with the lab's environment switches set.

    The lab opens its oracle through ``simulations.labs.common.open_oracle``, which starts the
    aggregator and client processes on 127.0.0.1 when LDP_TRANSPORT=grpc.
    """
    labs = lab_modules()
    if ns.number not in labs:
        raise ParameterError(f"there is no lab {ns.number}; labs are {sorted(labs)}")
    if ns.processes < 1:
        raise ParameterError(f"--processes must be ≥ 1, got {ns.processes}")
    env = dict(
        os.environ,
        LDP_TRANSPORT=ns.transport,
        LDP_PROCESSES=str(ns.processes),
        LDP_QUICK="1" if ns.quick else "0",
        LDP_SOLUTIONS="0" if ns.no_solutions else "1",
        LDP_LAB_OUT=ns.out,
        MPLBACKEND="Agg",
    )
    where = f"{ns.processes} client process(es) over gRPC" if ns.transport == "grpc" else "in process"
    console.print(f"[bold]Lab {ns.number}[/bold] ({labs[ns.number]}), {where}")
    proc = subprocess.Popen([sys.executable, "-m", labs[ns.number]], env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait(timeout=10)
        raise


def _experiment_args(ns: argparse.Namespace, progress: Any, log: Any = None) -> tuple[Experiment, ExperimentArgs]:
    """The experiment and its arguments, every user mistake caught here (one clean line)."""
    exp = get_experiment(ns.experiment)
    if exp.default_users is None:
        if ns.users is not None:
            raise ParameterError(f"--users does not apply to {exp.name} (it chooses its own numbers of users; see -o)")
        users = 0
    else:
        users = exp.default_users if ns.users is None else ns.users
        if users < 1:
            raise ParameterError(f"--users must be ≥ 1, got {users}")
    if exp.default_epsilon is None and ns.epsilon is not None:
        raise ParameterError(f"--epsilon does not apply to {exp.name} (it sweeps its own ε; see -o)")
    epsilon = (exp.default_epsilon or 1.0) if ns.epsilon is None else ns.epsilon
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError(f"budget epsilon must be a finite number > 0, got {epsilon!r}")
    seed = 0 if ns.seed is None else ns.seed
    if not 0 <= seed < 2**64:
        raise ParameterError(f"--seed must be in [0, 2^64), got {seed}")
    options = dict(ns.options)
    if options and not exp.takes_options:
        raise ParameterError(f"{exp.name} takes no -o options (got {sorted(options)})")
    transport = getattr(ns, "transport", None)
    if transport is not None and transport not in exp.transports:
        raise ParameterError(f"{exp.name} does not use the LR oracle: it runs in process only (drop --transport {transport})")
    return exp, ExperimentArgs(
        users=users, epsilon=epsilon, seed=seed, deadline_s=ns.deadline, progress=progress, options=options,
        quick=ns.quick, out=ns.out, log=log or (lambda line: None),
    )


def _print_result(console: Console, result: ExperimentResult, elapsed: float) -> None:
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
    return _experiment_args(
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
    if exp.mode == "factory":
        return await _run_factory(ns, console, bar, task, exp, args, transport)
    assert exp.population is not None
    spec = exp.population(args)
    if transport == "grpc" and not 1 <= ns.processes <= spec.size:
        raise ParameterError(f"--processes must be in [1, users = {spec.size}], got {ns.processes}")
    start = time.perf_counter()
    with bar:
        if transport == "inprocess":
            bar.update(task, description=f"{exp.name} (in process)")
            result = await exp.runner(InProcessLROracle(spec), args)
        else:
            from ldp.wire.launcher import launch_local

            bar.update(task, description=f"{exp.name}: starting {ns.processes} client process(es)")
            async with launch_local(spec, processes=ns.processes) as grpc_oracle:
                bar.update(task, description=f"{exp.name} (gRPC, {ns.processes} process(es))")
                result = await exp.runner(grpc_oracle, args)
    _print_result(console, result, time.perf_counter() - start)
    return 0


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
            result = await exp.runner(in_process_factory, args)
        else:
            from ldp.wire.launcher import grpc_oracle_factory

            bar.update(task, description=f"{exp.name} (gRPC: starting {ns.processes} client process(es))")
            async with grpc_oracle_factory(ns.processes) as factory:
                factory.on_launch = lambda oracle: bar.update(task, description=f"{exp.name} (gRPC, {ns.processes} process(es))")
                result = await exp.runner(factory, args)
                summary = (
                    f"{factory.populations} population(s) served by {ns.processes} client process(es) "
                    f"({factory.load_seconds:.2f} s starting them and loading populations)"
                )
    _print_result(console, result, time.perf_counter() - start)
    if summary:
        console.print(summary, markup=False, highlight=False)
    return 0


def _run_standalone(ns: argparse.Namespace, console: Console) -> int:
    """An experiment without an LR oracle: synchronous, in process (Ctrl-C interrupts it directly)."""
    bar = _progress(console)
    task = bar.add_task(f"{ns.experiment} (in process)", total=None)
    exp, args = _bar_args(ns, bar, task)
    start = time.perf_counter()
    with bar:
        result = exp.runner(args)
    _print_result(console, result, time.perf_counter() - start)
    return 0


async def _serve(ns: argparse.Namespace, console: Console) -> int:
    from ldp.wire.aggregator import GrpcAggregator, GrpcLROracle

    exp, args = _experiment_args(ns, lambda done, total: None)
    if exp.population is None or exp.mode != "oracle":
        raise ParameterError(f"{exp.name} cannot be served to remote clients yet (it runs many populations or none); use `ldp-sim run {exp.name}`")
    spec = exp.population(args)
    aggregator = GrpcAggregator(spec.description(), ns.bind)  # the aggregator learns the description only
    await aggregator.start()
    try:
        # Printed on stdout and flushed: scripts (and tests) read the port from this line.
        print(f"ldp-sim serve: listening on {aggregator.address} for {spec.size} users", flush=True)
        seen = 0
        loop = asyncio.get_running_loop()
        end = loop.time() + ns.wait
        while aggregator.covered_users() < spec.size:
            for event in aggregator.events[seen:]:
                console.print(event)
            seen = len(aggregator.events)
            if loop.time() > end:
                raise LDPError(f"timed out after {ns.wait:g} s: client processes hold {aggregator.covered_users()} of {spec.size} users")
            try:
                await aggregator.wait_for_shards(0.5)
            except LDPError:
                pass
        for event in aggregator.events[seen:]:
            console.print(event)
        start = time.perf_counter()
        result = await exp.runner(GrpcLROracle(aggregator), args)
        _print_result(console, result, time.perf_counter() - start)
    finally:
        await aggregator.close("the experiment is over")
    return 0


def _client_config(ns: argparse.Namespace) -> Any:
    """The users' side configuration from the command line and the users' own files."""
    import json

    from ldp.core.population import PopulationSpec
    from ldp.wire.client_config import ClientConfig

    population = None
    if ns.population is not None:
        try:
            population = PopulationSpec.from_json(json.loads(Path(ns.population).read_text()))
        except OSError as exc:
            raise ParameterError(f"cannot read --population {ns.population}: {exc.strerror}") from None
        except (ValueError, RecursionError) as exc:
            if isinstance(exc, LDPError):
                raise
            raise ParameterError(f"--population {ns.population} is not valid JSON: {exc}") from None
    key = None
    if ns.key_file is not None:
        try:
            key = Path(ns.key_file).read_bytes()
        except OSError as exc:
            raise ParameterError(f"cannot read --key-file {ns.key_file}: {exc.strerror}") from None
    return ClientConfig(
        population=population, data_path=ns.data, schema_path=ns.schema, budget=ns.budget, report_key=key, ledger_path=ns.ledger
    )


def _population(ns: argparse.Namespace, console: Console) -> int:
    import json

    import secrets

    if ns.seed is None:
        # Whoever knows the seed can regenerate the records and the report key: a spec meant for
        # client machines gets a seed nobody can guess, unless one is asked for (reproducibility).
        ns.seed = secrets.randbits(63)
    exp, args = _experiment_args(ns, lambda done, total: None)
    if exp.population is None:
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


def _clients(ns: argparse.Namespace, console: Console) -> int:
    from ldp.wire.aggregator import ShardClaim
    from ldp.wire.launcher import spawn_clients, stop_clients

    if ns.processes < 1:
        raise ParameterError(f"--processes must be ≥ 1, got {ns.processes}")
    config = _client_config(ns)
    config.holdings()  # a bad data file or spec is one clear line here, not one per process
    k, m = ns.shard
    claims = [ShardClaim(k, m, j, ns.processes) for j in range(ns.processes)]
    procs = spawn_clients(ns.connect, claims, config, capture_stderr=False, connect_timeout_s=ns.connect_timeout)
    try:
        codes = [c.process.wait() for c in procs]
    finally:
        stop_clients(procs, timeout_s=2.0)
    return max(codes)


def main(argv: Sequence[str] | None = None) -> int:
    console = Console(stderr=False)
    if not console.is_terminal:  # piped to a file: no terminal width to respect, keep rows whole
        console = Console(stderr=False, width=200)
    errors = Console(stderr=True)
    ns = _parser().parse_args(argv)
    try:
        if ns.command == "clients":  # client processes need no experiment: stay light
            return _clients(ns, console)
        if ns.command == "lab":
            return _lab(ns, console)
        _load_experiment_modules()
        if ns.command == "population":
            return _population(ns, console)
        if ns.command == "list":
            for exp in experiments():
                where = "in process only" if exp.mode == "standalone" else "grpc|inprocess"
                console.print(f"{exp.name:22s} [{where}] {exp.description}", markup=False, highlight=False, soft_wrap=True)
            return 0
        if ns.command == "run" and get_experiment(ns.experiment).mode == "standalone":
            return _run_standalone(ns, console)
        return asyncio.run(_run(ns, console) if ns.command == "run" else _serve(ns, console))
    except LDPError as exc:
        errors.print(f"ldp-sim: error: {exc}", markup=False, highlight=False, soft_wrap=True)  # one line, however long
        return EXIT_USAGE
    except KeyboardInterrupt:
        errors.print("ldp-sim: interrupted", markup=False, highlight=False)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
