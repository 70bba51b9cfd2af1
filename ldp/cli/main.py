"""``ldp-sim``: run experiments in process or over gRPC, on one machine or several.

Commands:
- ``ldp-sim run EXPERIMENT [--processes P] [--users N] [--epsilon E] [--seed S] [--transport grpc|inprocess]
  [--quick] [--out DIR] [-o KEY=VALUE ...]``
  starts the aggregator and P client processes on 127.0.0.1 (a free port, spawned fresh
  interpreters), shows progress, prints the result table, and shuts everything down. Experiments
  over many populations (``separation``) keep one cluster and load each population into it;
  experiments that do not use the LR oracle run in process. ``--launcher ray [--ray-address ADDR]
  [--tls DIR --token-file F | --client-name NAME]`` has Ray place the client processes as tasks on
  a Ray cluster instead (``ldp.wire.ray_launcher``; ``pip install 'ldp-sim[ray]'``).
- ``ldp-sim serve --bind HOST:PORT EXPERIMENT [...]`` runs the aggregator side alone: waits until
  client processes (started with ``ldp-sim clients``, possibly on other machines) hold every user,
  runs the experiment, sends Close.
- ``ldp-sim clients --connect HOST:PORT (--population SPEC.json | --data FILE [--schema S.json])
  --budget E [--key-file F] [--ledger PATH] --shard K/M --processes P`` runs P client processes
  that together hold machine shard K of M (users [n·K/M, n·(K+1)/M)) of *their own* data: the
  users' side is configured here, never by the aggregator (docs/design.md §2a). With ``--ray
  [--ray-address ADDR]`` Ray places the P processes on the nodes of a Ray cluster instead.
- ``ldp-sim population EXPERIMENT [--users N] [--seed S] --out SPEC.json`` writes the population
  spec of an experiment (the experiment's secret: records and report keys follow from it; the
  seed is random unless ``--seed`` is given, so nobody can guess it) for
  ``clients --population`` on other machines; copy it there out of band, never through the aggregator.
- ``ldp-sim list`` lists the experiments: the built-in ones and any a user registered, with
  ``ldp.register_experiment`` or an entry point in the group ``ldp_sim.experiments``
  (``ldp.experiment.registry``).

User mistakes (unknown experiment, bad parameters, an aggregator that cannot bind) print one
line ``ldp-sim: error: ...`` and exit with code 2, without a traceback; Ctrl-C exits with 130 and
leaves no child process behind. See docs/protocol.md.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import math
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ldp.core.errors import LDPError, ParameterError, require_epsilon
from ldp.experiment import Experiment, ExperimentArgs, ExperimentResult, experiments, get_experiment, in_process_factory, option_names, transports
from ldp.local.oracle import InProcessLROracle

__all__ = ["main"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


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
    if not key.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"the KEY of KEY=VALUE must be a setting's name (e.g. trials), got {key.strip()!r} in {text!r}")
    return key.strip(), value.strip()


# --- argument types: every option is checked where it enters (what, which value, what is allowed) ---

MAX_CLI_USERS = 1 << 40  # PopulationSpec's limit
MAX_SECONDS = 1e6  # about 11.5 days: any longer wait or deadline is a typo


class _Parser(argparse.ArgumentParser):
    """argparse whose usage mistakes are one line on stderr, ``ldp-sim: error: ...``, and exit 2."""

    def error(self, message: str) -> Any:  # argparse's NoReturn hook
        command = self.prog.removeprefix("ldp-sim").strip()
        name, sep, rest = message.removeprefix("argument ").partition(": ")
        if message.startswith("argument ") and sep and rest.startswith(f"{name} "):
            message = rest  # "argument --processes: --processes must be ..." says it once
        self.exit(EXIT_USAGE, f"ldp-sim: error: {message} (see `ldp-sim {command + ' ' if command else ''}--help`)\n")


def _integer_text(text: str, what: str, allowed: str = "") -> int:
    """An integer from the command line: 100000, 100_000 or 1e6 (a float with no fraction)."""
    try:
        return int(text.strip())
    except ValueError:
        pass
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if math.isfinite(x) and x.is_integer():
        return int(x)
    raise argparse.ArgumentTypeError(f"{what} must be an integer{allowed} (e.g. 100000, 100_000 or 1e5), got {text!r}")


def _users(text: str) -> int:
    n = _integer_text(text, "the number of users", " in [1, 2^40]")
    if not 1 <= n <= MAX_CLI_USERS:
        raise argparse.ArgumentTypeError(f"the number of users must be in [1, 2^40 = {MAX_CLI_USERS}], got {text!r}")
    return n


def _epsilon_type(what: str) -> Any:
    def parse(text: str) -> float:
        # the one ε check (ldp.core.errors.require_epsilon); argparse words it for the command line
        try:
            return require_epsilon(float(text), name=what)
        except (ValueError, ParameterError):
            raise argparse.ArgumentTypeError(f"{what} must be a finite number > 0 and ≤ 1024 (in [2^-30, 2^10]), got {text!r}") from None

    return parse


def _seed(text: str) -> int:
    s = _integer_text(text, "the seed", " in [0, 2^64)")
    if not 0 <= s < 2**64:
        raise argparse.ArgumentTypeError(f"the seed must be in [0, 2^64), got {text!r}")
    return s


def _seconds_type(what: str, *, zero: bool = False) -> Any:
    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            x = math.nan
        low_ok = x >= 0 if zero else x > 0
        if not (math.isfinite(x) and low_ok and x <= MAX_SECONDS):
            allowed = "[0, 10^6]" if zero else "(0, 10^6]"
            raise argparse.ArgumentTypeError(f"{what} must be a finite number of seconds in {allowed}, got {text!r}")
        return x

    return parse


def _processes(text: str) -> int:
    from ldp.wire.launcher import check_processes

    p = _integer_text(text, "--processes", " ≥ 1")
    try:
        return check_processes(p, "--processes")
    except ParameterError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _lab_number(text: str) -> int:
    n = _integer_text(text, "the lab number", " ≥ 1")
    if n < 1:
        raise argparse.ArgumentTypeError(f"the lab number must be ≥ 1 (see simulations/labs/), got {text!r}")
    return n


def _existing_file(what: str) -> Any:
    def parse(text: str) -> str:
        path = Path(text)
        if not text:
            raise argparse.ArgumentTypeError(f"{what} must name a file, got an empty path")
        if not path.exists():
            raise argparse.ArgumentTypeError(f"{what} {text!r} does not exist")
        if path.is_dir():  # pipes (e.g. <(...) for a key) and devices are fine
            raise argparse.ArgumentTypeError(f"{what} {text!r} is a directory, not a file")
        if not os.access(path, os.R_OK):
            raise argparse.ArgumentTypeError(f"{what} {text!r} cannot be read (permission denied)")
        return text

    return parse


def _existing_dir(what: str) -> Any:
    def parse(text: str) -> str:
        if not text or not Path(text).is_dir():
            raise argparse.ArgumentTypeError(f"{what} {text!r} is not a directory (make one with `ldp-sim certs DIR`)")
        return text

    return parse


def _ledger_path(text: str) -> str:
    path = Path(text)
    if not text:
        raise argparse.ArgumentTypeError("the ledger must name a file, got an empty path")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"the ledger {text!r} is a directory; name a file in it (e.g. {text.rstrip('/')}/ledger.sqlite)")
    parent = path.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"the ledger's directory {str(parent)!r} does not exist (create it first)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"the ledger's directory {str(parent)!r} is not writable (permission denied)")
    if path.is_file() and path.stat().st_size:
        try:
            with path.open("rb") as f:
                head = f.read(16)
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read the ledger {text!r}: {exc.strerror}") from None
        if head != b"SQLite format 3\x00":  # every SQLite database file starts so (sqlite.org/fileformat.html)
            raise argparse.ArgumentTypeError(f"the ledger {text!r} exists and is not an SQLite ledger: name a new file, or a ledger ldp-sim wrote")
    return text


def _output_directory(text: str, what: str = "--out") -> None:
    """Create the output directory ``text`` now, or a ParameterError naming it and the OS reason."""
    if not text:
        raise ParameterError(f"{what} must name a directory, got an empty path")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise ParameterError(f"{what} {text} is not a directory (a file of that name exists)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ParameterError(f"cannot create the {what} directory {text}: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ParameterError(f"cannot write to the {what} directory {text}: permission denied")


def _output_file(text: str, what: str = "--out") -> None:
    """A file that can be written: its directory exists and is writable, and it is no directory."""
    if not text:
        raise ParameterError(f"{what} must name a file, got an empty path")
    path = Path(text)
    if path.is_dir():
        raise ParameterError(f"{what} {text} is a directory; name a file (e.g. {text.rstrip('/')}/spec.json)")
    if not path.parent.is_dir():
        raise ParameterError(f"cannot write {what} {text}: its directory {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise ParameterError(f"cannot write {what} {text}: its directory {path.parent} is not writable (permission denied)")


def _experiment_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", help="experiment name (see `ldp-sim list`)")
    p.add_argument("--users", type=_users, default=None, help="number of users n (default: the experiment's)")
    p.add_argument("--epsilon", type=_epsilon_type("budget epsilon"), default=None, help="per-user privacy budget ε (default: the experiment's, usually 1)")
    p.add_argument("--seed", type=_seed, default=None, help="population seed (default 0; `population`: a random one)")
    p.add_argument("--deadline", type=_seconds_type("the round deadline"), default=30.0, help="per-round deadline in seconds (default 30)")
    p.add_argument("--quick", action="store_true", help="the experiment's small configuration")
    p.add_argument("--out", default=None, help="directory for the files it writes (default: results/<experiment>)")
    p.add_argument(
        "-o", "--option", dest="options", type=_option, action="append", default=[], metavar="KEY=VALUE",
        help="an experiment setting, e.g. -o trials=3 -o masked_d=2,4 (separation: any field of its Config)",
    )


def _run_arguments(run: argparse.ArgumentParser) -> None:
    _experiment_arguments(run)
    run.add_argument("--processes", type=_processes, default=2, help="client processes for --transport grpc (default 2)")
    run.add_argument(
        "--transport", choices=("grpc", "inprocess"), default=None, help="grpc (default) or inprocess (the only one for experiments without an LR oracle)"
    )
    run.add_argument(
        "--launcher", choices=("local", "ray"), default="local",
        help="who places the client processes: local (default: on this machine) or ray (tasks on a Ray cluster; pip install 'ldp-sim[ray]')",
    )
    run.add_argument("--ray-address", metavar="ADDR", default=None, help="with --launcher ray: the cluster (auto, or the head's HOST:6379; default: start a local one)")
    run.add_argument("--tls", type=_existing_dir("the --tls directory"), metavar="DIR", help="with --launcher ray: serve over TLS with DIR from `ldp-sim certs`; each client task gets ca.pem and its enrolment")
    run.add_argument("--token-file", type=_existing_file("the token file"), metavar="F", help="with --launcher ray --tls: enrol the client tasks by this token")
    run.add_argument("--client-name", metavar="NAME", help="with --launcher ray --tls: the client certificate DIR/client-NAME.pem every client task presents (mTLS)")


def _serve_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--bind", type=_host_port, required=True, help="HOST:PORT to listen on (port 0: any free port)")
    _experiment_arguments(serve)
    serve.add_argument("--wait", type=_seconds_type("the wait for client processes", zero=True), default=600.0, help="seconds to wait for client processes (default 600)")
    serve.add_argument("--seal-key-file", metavar="F", help="experiments over many populations: the key that seals them (created if missing; give the clients a copy)")
    serve.add_argument("--tls", type=_existing_dir("the --tls directory"), metavar="DIR", help="serve over TLS with DIR from `ldp-sim certs`: only enrolled clients (their certificates) may claim shards")
    serve.add_argument("--token-file", type=_existing_file("the token file"), metavar="F", help="with --tls: enrol clients by this shared token instead of certificates")


def _clients_arguments(clients: argparse.ArgumentParser) -> None:
    clients.add_argument("--connect", type=_host_port, required=True, help="aggregator HOST:PORT")
    clients.add_argument("--shard", type=_fraction, default=(0, 1), help="this machine's shard K/M (default 0/1)")
    clients.add_argument("--processes", type=_processes, default=1, help="client processes on this machine (default 1)")
    clients.add_argument("--connect-timeout", type=_seconds_type("the connect timeout"), default=60.0, help="seconds to retry while the aggregator is not up")
    held = clients.add_mutually_exclusive_group(required=True)
    held.add_argument("--seal-key-file", metavar="F", help="standby: hold no data, host the populations the experiment seals with this key")
    held.add_argument("--population", type=_existing_file("the population spec"), metavar="SPEC.json", help="a population spec to generate the users' records from (ldp-sim population)")
    held.add_argument("--data", type=_existing_file("the data file"), metavar="FILE", help="a CSV or Parquet file of the users' records, one user per row")
    clients.add_argument("--schema", type=_existing_file("the schema file"), metavar="S.json", help="the data file's declared schema, required with --data (the aggregator reads it before any ε is spent: write a draft with `ldp-sim schema infer FILE`, widen it to public ranges)")
    clients.add_argument("--budget", type=_epsilon_type("budget epsilon"), default=None, help="the users' per-user budget ε (required with --data; a cap with --population)")
    clients.add_argument(
        "--key-file", type=_existing_file("the key file"), metavar="F",
        help="32 random bytes: the users' long-term secret report key (default: from the spec's seed, or fresh); each process life draws under a key derived from it and a fresh salt",
    )
    where = clients.add_mutually_exclusive_group()
    where.add_argument(
        "--ledger", type=_ledger_path, metavar="PATH",
        help=f"the users' durable SQLite ledger: budget and nonces survive restarts (default with --data or --key-file: ledger.sqlite in ${STATE_DIR_ENV} or {_state_dir_hint()}; "
        "otherwise in memory)",
    )
    where.add_argument(
        "--budget-restarts-in-memory", action="store_true",
        help="keep the ledger in memory only: the users' budget restarts with every client process (for throw-away tests with --data or --key-file)",
    )
    clients.add_argument(
        "--one-load-ledgers",
        action="store_true",
        help="standby sweeps: drop a population's in-memory ledgers when the next is loaded, and refuse to load it again",
    )
    clients.add_argument("--tls", type=_existing_dir("the --tls directory"), metavar="DIR", help="connect over TLS with the files in DIR (ca.pem, and client-NAME.* or the token)")
    clients.add_argument(
        "--ray", action="store_true",
        help="have Ray place the P client processes on the nodes of a Ray cluster (pip install 'ldp-sim[ray]'); --data paths must exist on every node; no --ledger",
    )
    clients.add_argument("--ray-address", metavar="ADDR", default=None, help="with --ray: the cluster (auto, or the head's HOST:6379; default: start a local one)")
    clients.add_argument("--client-name", metavar="NAME", help="with --tls: this machine's client certificate DIR/client-NAME.pem (mTLS)")
    clients.add_argument("--token-file", type=_existing_file("the token file"), metavar="F", help="with --tls: the enrolment token (token mode)")


LAB_DESCRIPTION = (
    "Run lab N cell by cell: its narrative (the lab's markdown cells) printed between the outputs "
    "of its code cells, against client processes on loopback (or in process). "
    "Switches: quick sizes when --quick is given OR LDP_QUICK=1 is set; solutions hidden when "
    "--no-solutions is given OR LDP_SOLUTIONS=0 is set. A flag only turns its switch on; without "
    "it the environment decides (defaults: full sizes, solutions shown; the variables take "
    "1/0, true/false, yes/no or on/off)."
)


def _lab_arguments(lab: argparse.ArgumentParser) -> None:
    lab.add_argument("number", type=_lab_number, help="lab number (see simulations/labs/)")
    lab.add_argument("--quick", action="store_true", help="small sizes, every lab in under a minute (same as LDP_QUICK=1)")
    lab.add_argument("--processes", type=_processes, default=2, help="client processes (default 2)")
    lab.add_argument("--transport", choices=("grpc", "inprocess"), default="grpc", help="grpc (default) or inprocess")
    lab.add_argument("--no-solutions", action="store_true", help="print the exercises without solving them (same as LDP_SOLUTIONS=0)")
    lab.add_argument("--out", default="results/labs", help="where figures are saved (default results/labs)")


def _certs_arguments(certs: argparse.ArgumentParser) -> None:
    from ldp.cli.certs import add_certs_arguments

    add_certs_arguments(certs)


def _classroom_arguments(p: argparse.ArgumentParser) -> None:
    from ldp.classroom.cli import add_classroom_arguments

    add_classroom_arguments(p)


def _join_arguments(p: argparse.ArgumentParser) -> None:
    from ldp.classroom.cli import add_join_arguments

    add_join_arguments(p)


def _no_arguments(p: argparse.ArgumentParser) -> None:
    """``ldp-sim list`` takes none."""


def _parser() -> argparse.ArgumentParser:
    """``ldp-sim``'s parser: one subparser per entry of ``COMMANDS``, each with its help line, a
    description and an example (``ldp-sim COMMAND --help``)."""
    parser = _Parser(prog="ldp-sim", description="Simulate the local model of differential privacy (KLNRS).")
    from ldp import __version__

    parser.add_argument("--version", action="version", version=f"ldp-sim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        p = sub.add_parser(
            command.name, help=command.help, description=command.description, epilog="example:\n  " + "\n  ".join(command.examples),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.arguments(p)
    return parser


def lab_modules() -> dict[int, str]:
    """Lab number → module name, from simulations/labs/labN_*.py."""
    import ldp.simulations.labs as labs

    found = {}
    for path in sorted(Path(labs.__file__).parent.glob("lab*_*.py")):
        number = path.stem[3 : path.stem.index("_")]
        if number.isdigit():
            found[int(number)] = f"ldp.simulations.labs.{path.stem}"
    return found


def _lab(ns: argparse.Namespace, console: Console) -> int:
    """Run a lab in a child Python, cell by cell with its narrative (``ldp.simulations.labs.runner``).

    The switches combine as ``--help`` says: ``--quick`` or LDP_QUICK=1 → quick sizes,
    ``--no-solutions`` or LDP_SOLUTIONS=0 → solutions hidden; a bad value of either variable is a
    user mistake (one line). The child gets them normalized, with LDP_TRANSPORT, LDP_PROCESSES and
    LDP_LAB_OUT; the lab opens its oracle through ``ldp.simulations.labs.common.open_oracle``, which
    starts the aggregator and client processes on 127.0.0.1 when LDP_TRANSPORT=grpc. A fresh
    interpreter, because ``ldp.simulations.labs.common`` reads the switches once, when imported.
    """
    from ldp.simulations.labs.runner import env_switch

    labs = lab_modules()
    if ns.number not in labs:
        raise ParameterError(f"there is no lab {ns.number}; labs are {sorted(labs)}")
    if ns.processes < 1:
        raise ParameterError(f"--processes must be ≥ 1, got {ns.processes}")
    try:
        quick = ns.quick or env_switch("LDP_QUICK", False)
        solutions = not ns.no_solutions and env_switch("LDP_SOLUTIONS", True)
    except ValueError as exc:
        raise ParameterError(str(exc)) from None
    _output_directory(ns.out)
    env = dict(
        os.environ,
        LDP_TRANSPORT=ns.transport,
        LDP_PROCESSES=str(ns.processes),
        LDP_QUICK="1" if quick else "0",
        LDP_SOLUTIONS="1" if solutions else "0",
        LDP_LAB_OUT=ns.out,
        MPLBACKEND="Agg",
    )
    where = f"{ns.processes} client process(es) over gRPC" if ns.transport == "grpc" else "in process"
    mode = f"{'quick' if quick else 'full'} sizes, solutions {'shown' if solutions else 'hidden'}"
    console.print(f"[bold]Lab {ns.number}[/bold] ({labs[ns.number]}), {where}, {mode}")
    proc = subprocess.Popen([sys.executable, "-m", "ldp.simulations.labs.runner", labs[ns.number]], env=env)
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
    epsilon = require_epsilon(epsilon, "budget epsilon")
    seed = 0 if ns.seed is None else ns.seed
    if not 0 <= seed < 2**64:
        raise ParameterError(f"--seed must be in [0, 2^64), got {seed}")
    options = dict(ns.options)
    if options and not option_names(exp.config_type):
        raise ParameterError(f"{exp.name} takes no -o options (got {sorted(options)})")
    repeated = sorted({key for key, _ in ns.options if sum(k == key for k, _ in ns.options) > 1})
    if repeated:
        raise ParameterError(f"-o {repeated[0]}=... is given more than once; give each setting once (lists: -o {repeated[0]}=a,b)")
    transport = getattr(ns, "transport", None)
    if transport is not None and transport not in transports(exp):
        raise ParameterError(f"{exp.name} does not use the LR oracle: it runs in process only (drop --transport {transport})")
    args = ExperimentArgs(
        users=users, epsilon=epsilon, seed=seed, deadline_s=ns.deadline, progress=progress, options=options,
        quick=ns.quick, out=ns.out, log=log or (lambda line: None),
    )
    if ns.command == "run" and exp.shape == "oracle":
        # `run` holds every user on this machine, whatever the number of client processes.
        from ldp.core.population import check_hostable

        spec = exp.population(args)
        check_hostable(
            spec.schema, spec.size, where="on this machine",
            hint="use fewer users (--users), or serve them from several machines (`ldp-sim serve` here and "
            "`ldp-sim clients --shard K/M --processes P` on each of the others)",
        )
    if ns.out is not None:
        if ns.command == "population":
            _output_file(ns.out)
        else:
            _output_directory(ns.out)
    return exp, args


async def _awaited(value: Any) -> ExperimentResult:
    """An experiment's ``run`` gives its result or an awaitable of it (the Experiment protocol)."""
    result = await value if inspect.isawaitable(value) else value
    if not isinstance(result, ExperimentResult):
        raise ParameterError(f"an experiment's run must give an ExperimentResult (ldp.experiment), got {type(result).__name__}")
    return result


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
            result = await _awaited(exp.run(InProcessLROracle(spec), args))
        else:
            from ldp.wire.launcher import launch_local

            bar.update(task, description=f"{exp.name}: starting {ns.processes} client process(es){_where(ns)}")
            launched = launch_local(spec, processes=ns.processes) if ns.launcher == "local" else _launch_ray(ns, spec)
            async with launched as grpc_oracle:
                bar.update(task, description=f"{exp.name} (gRPC, {ns.processes} process(es){_where(ns)})")
                result = await _awaited(exp.run(grpc_oracle, args))
    _print_result(console, result, time.perf_counter() - start)
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
            result = await _awaited(exp.run(in_process_factory, args))
        else:
            from ldp.wire.launcher import grpc_oracle_factory

            bar.update(task, description=f"{exp.name} (gRPC: starting {ns.processes} client process(es){_where(ns)})")
            cluster = grpc_oracle_factory(ns.processes) if ns.launcher == "local" else _ray_factory(ns)
            async with cluster as factory:
                factory.on_launch = lambda oracle: bar.update(task, description=f"{exp.name} (gRPC, {ns.processes} process(es){_where(ns)})")
                result = await _awaited(exp.run(factory, args))
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
    if getattr(ns, "launcher", "local") != "local":
        raise ParameterError(f"{exp.name} uses no LR oracle and no client process: it runs in process (drop --launcher {ns.launcher})")
    start = time.perf_counter()
    with bar:
        result = exp.run(None, args)
        if inspect.isawaitable(result):  # a standalone experiment may compute with asyncio (no event loop runs here)
            result = asyncio.run(_awaited(result))
    _print_result(console, result, time.perf_counter() - start)
    return 0


async def _echo_events(aggregator: Any, console: Console) -> None:
    """Print the aggregator's connect/disconnect events as they happen (until cancelled)."""
    seen = 0
    while True:
        for event in aggregator.events[seen:]:
            console.print(event, markup=False, highlight=False)
        seen = len(aggregator.events)
        await asyncio.sleep(0.2)


def _serve_tls(ns: argparse.Namespace) -> Any:
    """``serve --tls DIR`` (mTLS) or ``--tls DIR --token-file F`` (token mode) as the library builds
    it (``ldp.wire.tls.server_tls``, the same object ``GrpcAggregator(tls=...)`` takes); None for a
    plaintext aggregator. A token without TLS is refused: it would travel in the clear, and nobody
    would be asked for it (docs/security.md, I4)."""
    if ns.tls is None:
        if ns.token_file is not None:
            raise ParameterError("--token-file needs --tls DIR: a token is checked only over TLS (serve --tls DIR --token-file F)")
        return None
    from ldp.wire.tls import server_tls

    return server_tls(ns.tls, ns.token_file)  # files read now: a missing or unsafe one is one line before binding


async def _serve(ns: argparse.Namespace, console: Console) -> int:
    """The aggregator side (with the experiment, which owns the seeds and the ground truth).
    Over TLS, a connection refused during the handshake (which no handler sees) is said in one
    line on stderr (``ldp.wire.tls.handshake_reasons``), as a refused enrolment is in the events."""
    server_tls = _serve_tls(ns)  # before anything else: a bad --tls/--token-file is one line, and nothing binds
    if server_tls is None:
        return await _serve_with(ns, console, None)
    from ldp.wire.tls import handshake_reasons

    with handshake_reasons("ldp-sim serve: "):
        return await _serve_with(ns, console, server_tls)


async def _serve_with(ns: argparse.Namespace, console: Console, server_tls: Any) -> int:
    from ldp.wire.aggregator import GrpcAggregator, GrpcLROracle
    from ldp.wire.factory import RemoteOracleFactory
    from ldp.wire.sealed import seal_key_file

    exp, args = _experiment_args(ns, lambda done, total: None)
    seal_key = None
    if exp.shape == "factory":
        if ns.seal_key_file is None:
            raise ParameterError(
                f"{exp.name} runs many populations: serve it with --seal-key-file F (created if missing) and start the clients "
                "on standby with a copy of F: ldp-sim clients --connect HOST:PORT --seal-key-file F"
            )
        seal_key = seal_key_file(ns.seal_key_file, create=True)
        description = None  # the clients wait on standby; each population arrives sealed
    else:
        description = exp.population(args).description()  # the aggregator learns the description only
    aggregator = GrpcAggregator(description, ns.bind, tls=server_tls)
    await aggregator.start()
    echo = asyncio.ensure_future(_echo_events(aggregator, console))
    try:
        # Printed on stdout and flushed: scripts (and tests) read the port from this line.
        what = f"{description.size} users" if description is not None else "standby clients (sealed populations)"
        mode = ""
        if server_tls is not None:  # say which clients it admits, so a mismatch is easy to spot
            mode = " over TLS, admitting clients with the enrolment token" if server_tls.token is not None else " over TLS, admitting clients with a certificate from its CA"
        print(f"ldp-sim serve: listening on {aggregator.address} for {what}{mode}", flush=True)
        start = time.perf_counter()
        if seal_key is not None:
            factory = RemoteOracleFactory(aggregator, seal_key, wait_s=ns.wait)
            result = await _awaited(exp.run(factory, args))
        else:
            await aggregator.wait_for_shards(ns.wait)
            await asyncio.sleep(0.3)  # let the last connect event print before the table
            result = await _awaited(exp.run(GrpcLROracle(aggregator), args))
        echo.cancel()
        _print_result(console, result, time.perf_counter() - start)
    except BaseException as exc:
        echo.cancel()
        # The clients learn that the run failed (they exit 3), with the reason in one line.
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        await aggregator.close(f"the experiment failed: {reason}", failed=True)
        raise
    echo.cancel()
    await aggregator.close("the experiment is over")
    return 0


def _schema_arguments(schema: argparse.ArgumentParser) -> None:
    """`ldp-sim schema infer FILE [--out F] [--columns A,B]` (invariant I3, docs/design.md §2a)."""
    sub = schema.add_subparsers(dest="schema_command", required=True, metavar="infer")
    infer = sub.add_parser(
        "infer",
        help="a draft schema of FILE's integer columns, written on this machine for you to review and widen",
        description=(
            "Write a draft schema of a CSV or Parquet data file (one field per column), on this machine. "
            "The schema you declare with `clients --data FILE --schema S.json` is public: the aggregator reads it "
            "before any ε is spent. The draft does not copy your data's min, max or step (each range is widened to "
            "0..2^k-1, or -(2^k-1)..2^k-1, around the values, step 1), but it still tells their magnitude: widen "
            "each range to the column's public range before you declare it."
        ),
    )
    infer.add_argument("file", type=_existing_file("the data file"), metavar="FILE", help="a CSV or Parquet file of the users' records")
    infer.add_argument("--out", metavar="F", default=None, help="write the draft to F (default: standard output)")
    infer.add_argument("--columns", metavar="A,B,...", default=None, help="the columns to describe, in order (default: all)")


def _schema(ns: argparse.Namespace) -> int:
    """`ldp-sim schema infer`: the draft (``ldp.core.datafile.draft_schema``) to --out or stdout,
    and on stderr a review note with the values it was drawn from (this terminal only: the
    inference never leaves the user's machine)."""
    from ldp.core.datafile import draft_schema

    columns = None if ns.columns is None else [c.strip() for c in ns.columns.split(",")]
    if ns.out is not None:
        _output_file(ns.out)
    draft = draft_schema(ns.file, columns)
    text = draft.text()
    if ns.out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        try:
            Path(ns.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ParameterError(f"cannot write --out {ns.out}: {exc.strerror}") from None
    where = "standard output" if ns.out is None else ns.out
    rows = f"{draft.rows} row{'s' if draft.rows != 1 else ''}"
    lines = [
        f"ldp-sim schema: wrote a draft schema of {len(draft.observed)} column(s) of {ns.file} ({rows}) to {where}.",
        "ldp-sim schema: review it before you declare it: the schema is public, the aggregator reads it before any ε is spent.",
        "ldp-sim schema: the draft does not copy your values' min, max or step (ranges 0..2^k-1 or -(2^k-1)..2^k-1, step 1),",
        "ldp-sim schema: but it tells their magnitude. Your values (shown here only) and the draft:",
    ]
    for seen, f in zip(draft.observed, draft.schema):
        step = "one value" if seen.step == 0 else f"step {seen.step}"
        lines.append(f"  {seen.column}: values {seen.low}..{seen.high} ({step}) -> draft {f.low}..{f.high}")
    lines.append(
        "ldp-sim schema: widen each range to what the column may publicly hold (e.g. ages 0..120), set a step > 1 only where "
        f"that is public knowledge, then declare it: ldp-sim clients --data {ns.file} --schema {'schema.json' if ns.out is None else ns.out} ..."
    )
    print("\n".join(lines), file=sys.stderr, flush=True)
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
    seal_key = None
    if ns.seal_key_file is not None:
        from ldp.wire.sealed import seal_key_file

        seal_key = seal_key_file(ns.seal_key_file)
    # I2: the budget of users who bring their own data or key is theirs across restarts, so their
    # ledger is durable unless they say, by name, that the budget restarts. A spec's users (and a
    # standby client's sealed specs) are the experiment's simulated users: in memory by default.
    ledger = ns.ledger
    if ledger is None and not ns.budget_restarts_in_memory and (ns.data is not None or key is not None):
        if getattr(ns, "ray", False):
            raise ParameterError(
                "with --data or --key-file the users' ledger is durable, and a durable ledger cannot follow clients that Ray places on any node: "
                "run them without --ray, or pass --budget-restarts-in-memory to accept that their budget restarts with every process"
            )
        if ns.one_load_ledgers:
            raise ParameterError(
                "--one-load-ledgers keeps ledgers in memory, but with --data or --key-file the ledger is durable by default: "
                "pass --budget-restarts-in-memory too to accept that the budget restarts with every process"
            )
        ledger = str(_state_dir() / "ledger.sqlite")  # (`ldp-sim clients --help` names the directory)
    # I1: key_salt None = every client process life draws its own fresh salt, so a restarted or
    # twin process (even one fed this same configuration) never repeats a report's coins.
    return ClientConfig(
        population=population, data_path=ns.data, schema_path=ns.schema, budget=ns.budget, report_key=key, ledger_path=ledger, seal_key=seal_key,
        ledgers="one_load" if ns.one_load_ledgers else "keep", key_salt=None,
    )


STATE_DIR_ENV = "LDP_STATE_DIR"


def _state_dir_hint() -> str:
    """Where durable ledgers go by default, for the help text (nothing is created)."""
    import platformdirs

    return platformdirs.user_state_dir("ldp")


def _state_dir() -> Path:
    """The users' state directory (``$LDP_STATE_DIR``, else ``platformdirs.user_state_dir("ldp")``),
    created private (0700) if missing; a ParameterError naming it if it cannot be."""
    text = os.environ.get(STATE_DIR_ENV) or _state_dir_hint()
    path = Path(text)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ParameterError(f"cannot create the state directory {text} for the users' ledger: {exc.strerror or exc} (set {STATE_DIR_ENV} or pass --ledger PATH)") from None
    if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
        raise ParameterError(f"the state directory {text} for the users' ledger is not a writable directory (set {STATE_DIR_ENV} or pass --ledger PATH)")
    return path


def _population(ns: argparse.Namespace, console: Console) -> int:
    import json
    import secrets

    if ns.seed is None:
        # Whoever knows the seed can regenerate the records and the report key: a spec meant for
        # client machines gets a seed nobody can guess, unless one is asked for (reproducibility).
        ns.seed = secrets.randbits(63)
    exp, args = _experiment_args(ns, lambda done, total: None)
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


def _clients(ns: argparse.Namespace, console: Console) -> int:
    from ldp.wire.aggregator import ShardClaim
    from ldp.wire.launcher import ClientProcess, clients_exit_code, spawn_clients, stop_clients, wait_clients

    if ns.processes < 1:
        raise ParameterError(f"--processes must be ≥ 1, got {ns.processes}")
    config = _client_config(ns)
    holdings = config.holdings()  # a bad data file or spec is one clear line here, not one per process
    tls_args: list[str] = []
    if ns.tls is not None:
        from ldp.wire.tls import client_tls

        client_tls(ns.tls, ns.client_name, ns.token_file)  # a missing or unsafe file: one line here
        # Paths only: the token itself never appears on a command line (ps shows those).
        tls_args = ["--tls", ns.tls] + (["--client-name", ns.client_name] if ns.client_name else []) + (["--token-file", ns.token_file] if ns.token_file else [])
        # A refused handshake is explained in one line by each client (ldp.wire.tls.diagnose):
        # gRPC's own log line per retry is noise there (set GRPC_VERBOSITY to see it anyway).
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    elif ns.client_name or ns.token_file:
        raise ParameterError("--client-name and --token-file need --tls DIR")
    k, m = ns.shard
    claims = [ShardClaim(k, m, j, ns.processes) for j in range(ns.processes)]
    if holdings is not None:  # a process that would hold nobody: one line here, not one per process
        from ldp.wire.aggregator import shard_range

        empty = [c.key for c in claims if shard_range(holdings.size, c)[1] <= shard_range(holdings.size, c)[0]]
        if empty:
            raise ParameterError(
                f"--shard {k}/{m} with --processes {ns.processes} leaves {len(empty)} client process(es) without users "
                f"(e.g. {empty[0]}) of the {holdings.size}: use fewer shards or processes"
            )
    if ns.ray_address is not None and not ns.ray:
        raise ParameterError("--ray-address applies to --ray only")
    if ns.ray:
        return _ray_clients(ns, claims, config)
    procs = spawn_clients(
        ns.connect, claims, config, capture_stderr=False, connect_timeout_s=ns.connect_timeout, extra_args={c.key: tls_args for c in claims}
    )

    def ended(c: ClientProcess) -> None:  # one line as soon as a client ends badly (a killed one says nothing itself)
        print(f"ldp-sim clients: {c.describe()}", file=sys.stderr, flush=True)

    try:
        codes = wait_clients(procs, ended)
    finally:
        stop_clients(procs, timeout_s=2.0)
    # The exit code says how the run ended for these users: 0 over, 1 lost, 2 turned away, 3 the
    # run failed, 4 a client process killed (docs/protocol.md); never a raw negative code.
    code = clients_exit_code(codes)
    if code:
        bad = [c for c in procs if c.process.returncode != 0]
        print(f"ldp-sim clients: exit {code}: {len(bad)} of {len(procs)} client process(es) did not end normally", file=sys.stderr, flush=True)
    return code


def _ray_clients(ns: argparse.Namespace, claims: list[Any], config: Any) -> int:
    """`ldp-sim clients --ray`: the same client processes, placed by Ray (ldp.wire.ray_launcher)."""
    from ldp.wire.launcher import clients_exit_code
    from ldp.wire.ray_launcher import RayClient, run_ray_clients

    def ended(c: RayClient) -> None:
        print(f"ldp-sim clients: {c.describe()}", file=sys.stderr, flush=True)

    codes = run_ray_clients(
        ns.connect, claims, config, address=ns.ray_address, tls=ns.tls, token_file=ns.token_file, client_name=ns.client_name,
        connect_timeout_s=ns.connect_timeout, on_exit=ended,
    )
    code = clients_exit_code(codes)
    if code:
        bad = sum(c != 0 for c in codes)
        print(f"ldp-sim clients: exit {code}: {bad} of {len(codes)} client process(es) placed by Ray did not end normally", file=sys.stderr, flush=True)
    return code


def _certs(ns: argparse.Namespace, console: Console) -> int:
    from ldp.cli.certs import run_certs

    return run_certs(ns, say=lambda line: console.print(line, markup=False, highlight=False))


def _schema_command(ns: argparse.Namespace, console: Console) -> int:
    return _schema(ns)


def _classroom(ns: argparse.Namespace, console: Console) -> int:
    from ldp.classroom.teacher import run_classroom

    return run_classroom(ns)


def _join(ns: argparse.Namespace, console: Console) -> int:
    from ldp.classroom.student import run_join

    return run_join(ns)


def _list(ns: argparse.Namespace, console: Console) -> int:
    """Every experiment, built-in or a plug-in's; a plug-in that fails to load is one line on stderr."""
    errors = Console(stderr=True)

    def broken(name: str, exc: LDPError) -> None:
        errors.print(f"ldp-sim: warning: experiment {name} is not listed: {exc}", markup=False, highlight=False, soft_wrap=True)

    for exp in experiments(on_error=broken):
        where = "in process only" if exp.shape == "standalone" else "grpc|inprocess"
        console.print(f"{exp.name:22s} [{where}] {exp.description}", markup=False, highlight=False, soft_wrap=True)
    return 0


def _experiment_command(ns: argparse.Namespace, console: Console) -> int:
    """`run` and `serve`. An experiment without an LR oracle runs here, in process, either way."""
    if get_experiment(ns.experiment).shape == "standalone":
        if ns.command == "serve":  # nothing to serve: it runs where it is served
            _serve_tls(ns)  # still, --token-file without --tls (or a bad file) is refused, as for any serve
            console.print(f"{ns.experiment} uses no LR oracle: it runs here, in process, and needs no client", markup=False, highlight=False)
        return _run_standalone(ns, console)
    return asyncio.run(_run(ns, console) if ns.command == "run" else _serve(ns, console))


@dataclass(frozen=True)
class Command:
    """One ``ldp-sim`` subcommand: its help line, description and examples (``--help``), how its
    arguments are declared, and the name of the function of this module that runs it
    (``handler(ns, console)`` → exit code; looked up when the command runs, so a test can replace it)."""

    name: str
    help: str
    summary: str
    examples: tuple[str, ...]
    arguments: Callable[[argparse.ArgumentParser], None]
    handler: str

    @property
    def description(self) -> str:
        return textwrap.fill(self.summary, width=100)


COMMANDS: tuple[Command, ...] = (
    Command(
        "run", "run an experiment on this machine",
        "Run EXPERIMENT here: the aggregator and --processes client processes on 127.0.0.1 (or in process with --transport inprocess), "
        "a progress bar, the result table, and its files in --out. `ldp-sim list` names the experiments; -o KEY=VALUE sets a field of "
        "the experiment's configuration.",
        ("ldp-sim run rr-demo --users 100000 --epsilon 1 --processes 4", "ldp-sim run separation --quick -o trials=5"),
        _run_arguments, "_experiment_command",
    ),
    Command(
        "serve", "run the aggregator for remote client processes",
        "Run the aggregator side of EXPERIMENT alone: wait until client processes (`ldp-sim clients`, here or on other machines) hold "
        "every user, run it, print the table and close. Experiments over many populations need --seal-key-file.",
        ("ldp-sim serve --bind 0.0.0.0:50051 rr-demo --users 100000",),
        _serve_arguments, "_experiment_command",
    ),
    Command(
        "clients", "run client processes for a remote aggregator",
        "Run --processes client processes that hold shard K/M of the users: records from a population spec, the users' own data "
        "file, or none on standby (sealed populations). The users' side is configured here, never by the aggregator.",
        ("ldp-sim clients --connect 10.0.0.5:50051 --population spec.json --shard 0/2 --processes 4",
         "ldp-sim clients --connect 10.0.0.5:50051 --data users.csv --schema schema.json --budget 2"),
        _clients_arguments, "_clients",
    ),
    Command(
        "certs", "make a CA, a server certificate and client certificates (or a token) for TLS",
        "Write into DIR a CA, a server certificate for the aggregator's addresses, and client certificates or a shared enrolment "
        "token, for `serve --tls DIR` and `clients --tls DIR`.",
        ("ldp-sim certs pki --server-host 10.0.0.5 --clients 2", "ldp-sim certs pki --server-host 10.0.0.5 --token"),
        _certs_arguments, "_certs",
    ),
    Command(
        "population", "write an experiment's population spec for `clients --population`",
        "Write the population spec of EXPERIMENT (its users' records and report keys follow from it: a secret of the experiment and "
        "the users) for client machines; copy it there out of band, never through the aggregator.",
        ("ldp-sim population rr-demo --users 100000 --out spec.json",),
        _experiment_arguments, "_population",
    ),
    Command(
        "list", "list the experiments",
        "List the experiments `ldp-sim run` knows: the built-in ones and any a plug-in registered, with ldp.register_experiment or an "
        "entry point in the group ldp_sim.experiments (docs/design.md §5).",
        ("ldp-sim list",),
        _no_arguments, "_list",
    ),
    Command(
        "schema", "write a draft schema of a data file, to review and widen before `clients --schema`",
        "Draft the declared schema of a CSV or Parquet data file on this machine; review it and widen each range to what the column "
        "may publicly hold before `clients --data FILE --schema S.json`.",
        ("ldp-sim schema infer users.csv --out schema.json",),
        _schema_arguments, "_schema_command",
    ),
    Command(
        "lab", "run a teaching lab the classroom way (client processes on loopback)",
        LAB_DESCRIPTION,
        ("ldp-sim lab 1 --quick", "ldp-sim lab 4 --no-solutions --transport inprocess"),
        _lab_arguments, "_lab",
    ),
    Command(
        "classroom", "teach a class: aggregator, live dashboard and scripted lessons (docs/classroom.md)",
        "Teach a class: start the aggregator and the live dashboard, print the join command (and its QR code) for the students, "
        "and run the scripted lessons on their machines' reports (docs/classroom.md).",
        ("ldp-sim classroom --host 10.0.0.5",),
        _classroom_arguments, "_classroom",
    ),
    Command(
        "join", "join a classroom from a student's machine (docs/classroom.md)",
        "Join a classroom from a student's machine: this machine's users answer the teacher's lessons within your own budget "
        "(the join command printed by the teacher has the address, the token and the CA's fingerprint).",
        ("ldp-sim join 10.0.0.5:8000 --token TOKEN --ca FINGERPRINT",),
        _join_arguments, "_join",
    ),
)
HANDLERS: dict[str, str] = {c.name: c.handler for c in COMMANDS}


def main(argv: Sequence[str] | None = None) -> int:
    console = Console(stderr=False)
    if not console.is_terminal:  # piped to a file: no terminal width to respect, keep rows whole
        console = Console(stderr=False, width=200)
    errors = Console(stderr=True)
    ns = _parser().parse_args(argv)
    try:
        handler: Callable[[argparse.Namespace, Console], int] = globals()[HANDLERS[ns.command]]
        return handler(ns, console)
    except LDPError as exc:
        errors.print(f"ldp-sim: error: {exc}", markup=False, highlight=False, soft_wrap=True)  # one line, however long
        return EXIT_USAGE
    except MemoryError:
        users = getattr(ns, "users", None)
        who = f"{users} users" if users is not None else "the experiment's users"
        errors.print(
            f"ldp-sim: error: not enough memory for {who} in one process: "
            "this machine ran out while holding them; use more client processes or machines "
            "(`ldp-sim serve` here, `ldp-sim clients --shard K/M --processes P` on each of the others) or fewer users",
            markup=False, highlight=False, soft_wrap=True,
        )
        return EXIT_USAGE
    except KeyboardInterrupt:
        from ldp.wire.launcher import quiet_grpc_after_interrupt

        quiet_grpc_after_interrupt()
        errors.print("ldp-sim: interrupted", markup=False, highlight=False)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
