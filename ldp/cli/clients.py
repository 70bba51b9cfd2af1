"""``ldp-sim clients --connect HOST:PORT (--population SPEC.json | --data FILE [--schema S.json] |
--seal-key-file F) --budget E [--key-file F] [--ledger PATH] --shard K/M --processes P``.

Runs P client processes that together hold machine shard K of M (users [n·K/M, n·(K+1)/M)) of
*their own* data: the users' side is configured here, never by the aggregator (docs/design.md
§2a). With ``--ray [--ray-address ADDR]`` Ray places the P processes on the nodes of a Ray cluster
instead. The exit code says how the run ended for these users (docs/protocol.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ldp.cli.argtypes import epsilon_type, existing_dir, existing_file, host_port, ledger_path, process_count, seconds_type, shard_fraction
from ldp.cli.command import Command
from ldp.core.errors import LDPError, ParameterError

__all__ = ["CLIENTS", "STATE_DIR_ENV"]

STATE_DIR_ENV = "LDP_STATE_DIR"



def _clients_arguments(clients: argparse.ArgumentParser) -> None:
    clients.add_argument("--connect", type=host_port, required=True, help="aggregator HOST:PORT")
    clients.add_argument("--shard", type=shard_fraction, default=(0, 1), help="this machine's shard K/M (default 0/1)")
    clients.add_argument("--processes", type=process_count, default=1, help="client processes on this machine (default 1)")
    clients.add_argument("--connect-timeout", type=seconds_type("the connect timeout"), default=60.0, help="seconds to retry while the aggregator is not up")
    held = clients.add_mutually_exclusive_group(required=True)
    held.add_argument("--seal-key-file", metavar="F", help="standby: hold no data, host the populations the experiment seals with this key")
    held.add_argument("--population", type=existing_file("the population spec"), metavar="SPEC.json", help="a population spec to generate the users' records from (ldp-sim population)")
    held.add_argument("--data", type=existing_file("the data file"), metavar="FILE", help="a CSV or Parquet file of the users' records, one user per row")
    clients.add_argument("--schema", type=existing_file("the schema file"), metavar="S.json", help="the data file's declared schema, required with --data (the aggregator reads it before any ε is spent: write a draft with `ldp-sim schema infer FILE`, widen it to public ranges)")
    clients.add_argument("--budget", type=epsilon_type("budget epsilon"), default=None, help="the users' per-user budget ε (required with --data; a cap with --population)")
    clients.add_argument(
        "--key-file", type=existing_file("the key file"), metavar="F",
        help="32 random bytes: the users' long-term secret report key (default: from the spec's seed, or fresh); each process life draws under a key derived from it and a fresh salt",
    )
    where = clients.add_mutually_exclusive_group()
    where.add_argument(
        "--ledger", type=ledger_path, metavar="PATH",
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
    clients.add_argument("--tls", type=existing_dir("the --tls directory"), metavar="DIR", help="connect over TLS with the files in DIR (ca.pem, and client-NAME.* or the token)")
    clients.add_argument(
        "--ray", action="store_true",
        help="have Ray place the P client processes on the nodes of a Ray cluster (pip install 'ldp-sim[ray]'); --data paths must exist on every node; no --ledger",
    )
    clients.add_argument("--ray-address", metavar="ADDR", default=None, help="with --ray: the cluster (auto, or the head's HOST:6379; default: start a local one)")
    clients.add_argument("--client-name", metavar="NAME", help="with --tls: this machine's client certificate DIR/client-NAME.pem (mTLS)")
    clients.add_argument("--token-file", type=existing_file("the token file"), metavar="F", help="with --tls: the enrolment token (token mode)")


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


def _clients(ns: argparse.Namespace) -> int:
    from ldp.wire.aggregator import ShardClaim
    from ldp.wire.launcher import ClientProcess, clients_exit_code, spawn_clients, stop_clients, wait_clients

    if ns.processes < 1:
        raise ParameterError(f"--processes must be ≥ 1, got {ns.processes}")
    config = _client_config(ns)
    holdings = config.holdings()  # a bad data file or spec is one clear line here, not one per process
    tls_args = _tls_args(ns)
    k, m = ns.shard
    claims = [ShardClaim(k, m, j, ns.processes) for j in range(ns.processes)]
    if holdings is not None:
        _check_every_process_holds_users(ns, holdings.size, claims)
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


def _tls_args(ns: argparse.Namespace) -> list[str]:
    """The client processes' TLS options (``--tls DIR`` and the enrolment), its files checked here."""
    if ns.tls is None:
        if ns.client_name or ns.token_file:
            raise ParameterError("--client-name and --token-file need --tls DIR")
        return []
    from ldp.wire.tls import client_tls

    client_tls(ns.tls, ns.client_name, ns.token_file)  # a missing or unsafe file: one line here
    # A refused handshake is explained in one line by each client (ldp.wire.tls.diagnose):
    # gRPC's own log line per retry is noise there (set GRPC_VERBOSITY to see it anyway).
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    # Paths only: the token itself never appears on a command line (ps shows those).
    return ["--tls", ns.tls] + (["--client-name", ns.client_name] if ns.client_name else []) + (["--token-file", ns.token_file] if ns.token_file else [])


def _check_every_process_holds_users(ns: argparse.Namespace, size: int, claims: list[Any]) -> None:
    """A process that would hold nobody: one line here, not one per process."""
    from ldp.wire.aggregator import shard_range

    empty = [c.key for c in claims if shard_range(size, c)[1] <= shard_range(size, c)[0]]
    if empty:
        k, m = ns.shard
        raise ParameterError(
            f"--shard {k}/{m} with --processes {ns.processes} leaves {len(empty)} client process(es) without users "
            f"(e.g. {empty[0]}) of the {size}: use fewer shards or processes"
        )


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


CLIENTS = Command(
    "clients", "run client processes for a remote aggregator",
    "Run --processes client processes that hold shard K/M of the users: records from a population spec, the users' own data "
    "file, or none on standby (sealed populations). The users' side is configured here, never by the aggregator.",
    ("ldp-sim clients --connect 10.0.0.5:50051 --population spec.json --shard 0/2 --processes 4",
     "ldp-sim clients --connect 10.0.0.5:50051 --data users.csv --schema schema.json --budget 2"),
    _clients_arguments, _clients,
)
