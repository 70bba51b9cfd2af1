"""Place the client processes on a Ray cluster instead of by hand (the ``ray`` extra).

What: ``async with launch_ray(population, processes=P) as oracle:`` is ``launch_local`` with
the client processes placed by Ray (the engine Flower uses for its simulations): it plays the
experiment's role (docs/design.md §2a), starts a ``GrpcAggregator`` that knows only the
population's public description, and submits P Ray tasks. Each task runs on whichever node Ray
picks (``SPREAD`` by default) and starts there the same client main as a local launch,
``python -m ldp.wire.client --config -``, writing its ``ClientConfig`` into the child's standard
input. The config reaches the task as a task argument — through Ray, out of band, never through
the aggregator — and the client dials the aggregator back over gRPC (plaintext on loopback, or
TLS with the enrolment token or a client certificate, shipped the same way, so a remote client
still authenticates the aggregator: ``ldp.wire.tls``). ``ray_oracle_factory`` is
``grpc_oracle_factory`` over such a cluster (one set of client tasks, populations sealed and
relayed). ``ldp-sim run EXPERIMENT --launcher ray [--ray-address ADDR]`` uses them. For an
aggregator run by another party (``ldp-sim serve``), ``run_ray_clients`` (``ldp-sim clients
--ray``) has Ray place the users' side's client processes, which dial that aggregator.

Trust: the ClientConfig holds the users' data spec, budget, report key and seal key, so Ray's
control plane and object store (task arguments live there) see them. Ray's cluster is therefore
part of the users' and the experiment's trust domain, never the aggregator's
(docs/security.md, "Ray").

Contract (as ``launch_local``): the block waits until the clients cover every user (at most
``ready_timeout_s``: a task Ray cannot place, e.g. for lack of CPUs, fails the launch then, it
does not hang); a client that ends before it is ready fails the launch with its exit code and the
tail of its standard error; one that ends while the block runs is reported at once in one line
(``on_client_exit``). On exit — normal, error, cancellation, Ctrl-C — the clients get Close
(``failed`` set when the block raised), are given ``stop_timeout_s`` to exit, and tasks still
running are then cancelled (KeyboardInterrupt: the task kills its child) and finally
force-killed; a child whose task is killed exits on its own (``--exit-with-parent``).
Ray is imported only when used; without it the error says ``pip install 'ldp-sim[ray]'``.
Source: docs/design.md §2a–3; docs/protocol.md ("Running it: a Ray cluster").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ldp.core.errors import LDPError, ParameterError
from ldp.core.population import PopulationSpec
from ldp.wire.aggregator import READY_TIMEOUT_S, GrpcAggregator, GrpcLROracle, ShardClaim
from ldp.wire.client_config import ClientConfig
from ldp.wire.factory import SealedOracleFactory
from ldp.wire.launcher import EXIT_CLIENT_DIED, check_processes, describe_exit, say_stderr, serve_clients, wait_until_ready
from ldp.wire.sealed import new_seal_key

__all__ = ["RayClient", "RayOracleFactory", "import_ray", "launch_ray", "place_clients", "ray_oracle_factory", "run_ray_clients"]

INSTALL_HINT = "pip install 'ldp-sim[ray]'"
LOG_TAIL_CHARS = 2000  # of a client's standard error, returned by its task


def import_ray() -> Any:
    """The ``ray`` module, or a ``ParameterError`` saying how to install it (one line)."""
    try:
        import ray
    except ImportError:
        raise ParameterError(f"the Ray launcher needs Ray, which is not installed here: {INSTALL_HINT}") from None
    return ray


# --- the task: runs on a Ray worker, on any node ------------------------------------------------


def client_task(
    address: str,
    claim: tuple[int, int, int, int],
    config_text: str,
    connect_timeout_s: float,
    extra_args: list[str],
    tls_files: Mapping[str, bytes],
    tls_args: list[str],
) -> dict[str, Any]:
    """One client process on this node: ``python -m ldp.wire.client --config -`` with
    ``config_text`` written to its standard input (nothing of it on a command line or on disk).

    ``tls_files`` (ca.pem, and the token or this client's certificate and key) are written into
    a private temporary directory (0700, files 0600) that ``--tls`` names, and removed when the
    client ends. Returns ``{"code", "log", "host", "pid", "node"}``: the client's exit code (negative: a
    signal), the tail of its standard error, where it ran (host, Ray node id). A cancelled task (KeyboardInterrupt)
    kills its child first; a force-killed one leaves it to ``--exit-with-parent``.
    """
    k, m, j, p = claim
    with contextlib.ExitStack() as cleanup:
        tls: list[str] = []
        if tls_files:
            private = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="ldp-ray-client-"))  # mkdtemp: mode 0700
            for name, data in tls_files.items():
                fd = os.open(os.path.join(private, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
            tls = [a.replace("{dir}", private) for a in tls_args]
        cmd = [
            sys.executable, "-m", "ldp.wire.client", "--connect", address, "--config", "-",
            "--shard", f"{k}/{m}", "--sub", f"{j}/{p}", "--connect-timeout", str(connect_timeout_s),
            "--exit-with-parent", *tls, *extra_args,
        ]
        with tempfile.TemporaryFile() as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log, env=dict(os.environ, PYTHONUNBUFFERED="1"))
            assert proc.stdin is not None
            try:
                proc.stdin.write(config_text.encode())
                proc.stdin.close()
            except BrokenPipeError:  # the child died at once; its exit code and log say why
                pass
            try:
                while True:  # short waits: Ray's cancel (KeyboardInterrupt) is seen between them
                    try:
                        code = proc.wait(timeout=0.2)
                        break
                    except subprocess.TimeoutExpired:
                        continue
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            log.seek(max(0, os.fstat(log.fileno()).st_size - 4 * LOG_TAIL_CHARS))  # at most 4 bytes a character
            tail = log.read().decode(errors="replace")[-LOG_TAIL_CHARS:].strip()
    import ray  # on a Ray worker: always there

    node = ray.get_runtime_context().get_node_id()
    return {"code": int(code), "log": tail, "host": socket.gethostname(), "pid": proc.pid, "node": node}


# --- the experiment's side ----------------------------------------------------------------------


@dataclass
class RayClient:
    """One client placed by Ray: its claim and its task. ``poll()`` is None while it runs, else
    its exit code (``EXIT_CLIENT_DIED`` when Ray lost or killed the task itself)."""

    claim: ShardClaim
    ref: Any  # ray.ObjectRef of client_task's result
    ray: Any = field(repr=False)
    outcome: dict[str, Any] | None = None

    def poll(self) -> int | None:
        if self.outcome is None:
            done, _ = self.ray.wait([self.ref], timeout=0)
            if not done:
                return None
            try:
                self.outcome = dict(self.ray.get(self.ref))
            except self.ray.exceptions.TaskCancelledError:
                self.outcome = {"code": EXIT_CLIENT_DIED, "log": "its Ray task was cancelled", "host": "", "pid": 0}
            except self.ray.exceptions.RayError as exc:
                first = (str(exc).strip().splitlines() or [""])[0]
                self.outcome = {"code": EXIT_CLIENT_DIED, "log": f"its Ray task failed: {type(exc).__name__}: {first}", "host": "", "pid": 0}
        return int(self.outcome["code"])

    def describe(self) -> str:
        """One line: which claim, where, how it ended (or that it still runs)."""
        code = self.poll()
        if code is None:
            return f"client {self.claim.key} (Ray task) is running"
        assert self.outcome is not None
        if not self.outcome["pid"]:  # Ray cancelled or lost the task: its own words say how
            return f"client {self.claim.key} (Ray task) ended: {self.outcome['log']}"
        return f"client {self.claim.key} (Ray task, pid {self.outcome['pid']} on {self.outcome['host']}) {describe_exit(code)}"

    @property
    def node(self) -> str | None:
        """The id of the Ray node the client ran on (None until its task has reported)."""
        return None if not self.ran or self.outcome is None else str(self.outcome["node"])

    @property
    def ran(self) -> bool:
        """True once the task has reported how its client process ended (False: it runs, or Ray
        cancelled or lost the task)."""
        return self.outcome is not None and bool(self.outcome["pid"])

    def log_tail(self, limit: int = LOG_TAIL_CHARS) -> str:
        """The end of the client's standard error (known once it has ended; '' when the client
        process never ran or Ray lost the task, which ``describe`` then says)."""
        return str(self.outcome["log"])[-limit:] if self.ran and self.outcome is not None else ""


def _tls_payload(tls: str | None, token_file: str | None, client_name: str | None) -> tuple[Mapping[str, bytes], list[str]]:
    """What each task gets to authenticate the aggregator (and to enrol): files and ``--tls`` args.
    The files are checked here, on the experiment's machine (missing, unsafe modes: one line)."""
    if tls is None:
        if token_file is not None or client_name is not None:
            raise ParameterError("token_file and client_name need tls (a directory from `ldp-sim certs`)")
        return {}, []
    from ldp.wire.tls import CA_CERT, TOKEN_FILE, ca_paths, client_paths, client_tls

    client_tls(tls, client_name, token_file)  # validates every file (and the token's form) now
    files = {CA_CERT: ca_paths(tls)[0].read_bytes()}
    args = ["--tls", "{dir}"]
    if token_file is not None:
        files[TOKEN_FILE] = Path(token_file).read_bytes()
        args += ["--token-file", os.path.join("{dir}", TOKEN_FILE)]
    if client_name is not None:
        cert, key = client_paths(tls, client_name)
        files[cert.name], files[key.name] = cert.read_bytes(), key.read_bytes()
        args += ["--client-name", client_name]
    return files, args


def _all_nodes_here(ray: Any) -> bool:
    """True when every live node of the cluster runs on this machine (then loopback reaches them)."""
    here = ray.util.get_node_ip_address()
    return all(n.get("NodeManagerAddress") == here for n in ray.nodes() if n.get("Alive"))


@contextlib.contextmanager
def _ray_connection(ray: Any, address: str | None, init_kwargs: Mapping[str, Any] | None) -> Any:
    """Use the driver's Ray connection if there is one; else connect (``address``: an existing
    cluster, None: start a local one) and disconnect at the end."""
    if ray.is_initialized():
        yield
        return
    import logging

    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING, "log_to_driver": False}
    kwargs.update(init_kwargs or {})
    try:
        ray.init(address=address, **kwargs)
    except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError, ValueError: one line
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        raise LDPError(f"cannot connect to {where}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}") from None
    try:
        yield
    finally:
        ray.shutdown()


def place_clients(
    ray: Any,
    address: str,
    claims: list[ShardClaim],
    config: ClientConfig,
    *,
    num_cpus: float = 1.0,
    scheduling_strategy: str = "SPREAD",
    connect_timeout_s: float = 60.0,
    extra_args: dict[str, list[str]] | None = None,
    tls_files: Mapping[str, bytes] | None = None,
    tls_args: list[str] | None = None,
) -> list[RayClient]:
    """Submit one ``client_task`` per claim (the config as a task argument); returns at once.

    ``max_retries=0``: Ray never starts a client again after its node or worker dies. A retried
    task would be a second life of the same configuration; with the experiment's empty salt it
    would restart its nonces under the same key (invariant I1). A config whose ``key_salt`` is
    None (``ldp-sim clients --ray``) would be safe even then: every life draws its own salt."""
    task = ray.remote(num_cpus=num_cpus, max_retries=0, scheduling_strategy=scheduling_strategy)(client_task)
    text = config.dumps()
    out = []
    for claim in claims:
        extra = (extra_args or {}).get(claim.key, [])
        ref = task.remote(address, (claim.index, claim.count, claim.sub_index, claim.sub_count), text, connect_timeout_s, extra, dict(tls_files or {}), list(tls_args or []))
        out.append(RayClient(claim, ref, ray))
    return out


def run_ray_clients(
    connect: str,
    claims: list[ShardClaim],
    config: ClientConfig,
    *,
    address: str | None = None,
    tls: str | None = None,
    token_file: str | None = None,
    client_name: str | None = None,
    num_cpus: float = 1.0,
    connect_timeout_s: float = 60.0,
    on_exit: Callable[[RayClient], None] | None = None,
    poll_s: float = 0.2,
) -> list[int]:
    """``ldp-sim clients --ray``: the users' side places its client processes with Ray; they
    connect to an aggregator at ``connect`` run by someone else (``ldp-sim serve``). Blocks until
    every client has ended; ``on_exit(c)`` as soon as one ends badly. Returns the exit codes
    (``EXIT_CLIENT_DIED`` for a task Ray cancelled or lost). Ctrl-C stops every task."""
    if config.ledger_path is not None:
        # Ray may place a client on another node, where the ledger at that path is another
        # file: its users' spent budget would start again. Durable ledgers stay by hand.
        raise ParameterError("a durable ledger (--ledger) cannot follow clients that Ray places on any node; run them by hand (ldp-sim clients without --ray)")
    tls_files, tls_args = _tls_payload(tls, token_file, client_name)
    ray = import_ray()
    with _ray_connection(ray, address, None):
        clients: list[RayClient] = []
        try:
            clients = place_clients(ray, connect, claims, config, num_cpus=num_cpus, connect_timeout_s=connect_timeout_s, tls_files=tls_files, tls_args=tls_args)
            reported: set[int] = set()
            while len(reported) < len(clients):
                for i, c in enumerate(clients):
                    code = c.poll()
                    if i not in reported and code is not None:
                        reported.add(i)
                        if code != 0 and on_exit is not None:
                            on_exit(c)
                time.sleep(poll_s)
            return [int(c.outcome["code"]) for c in clients if c.outcome is not None]
        finally:
            _stop(ray, clients, 0.0)  # all ended, or Ctrl-C: cancel the rest now (their children are killed)


def _task_died(clients: list[RayClient]) -> str | None:
    """Why the first client task that already ended did so, or None."""
    dead = [c for c in clients if c.poll() is not None]
    if not dead:
        return None
    c = dead[0]
    lines = c.log_tail().splitlines()
    # The client's own last line says why. gRPC's C core logs from its own threads, above it or
    # after it (a TLS handshake failure is logged while the channel closes), so the line is the
    # last one the client wrote ("ldp client K: ..."), else the last line.
    ours = [line for line in lines if line.startswith("ldp ")]
    why = f": {(ours or lines)[-1]}" if lines else (": (no output)" if c.ran else "")
    return f"{c.describe()} before it was ready{why}"


def _tasks_late(aggregator: GrpcAggregator, clients: list[RayClient], timeout_s: float, num_cpus: float, dial: str) -> str:
    connected = [s.key for s in aggregator.shards]
    return (
        f"the client tasks were not ready after {timeout_s:g} s (shards connected: {connected} of {len(clients)}); "
        f"each task asks Ray for {num_cpus:g} CPU(s): does the cluster have them free, and can its nodes reach the aggregator at {dial}?"
    )


async def _watch(clients: list[RayClient], on_exit: Callable[[str], None], poll_s: float = 0.25) -> None:
    reported: set[int] = set()
    while len(reported) < len(clients):
        for i, c in enumerate(clients):
            if i not in reported and c.poll() is not None:
                reported.add(i)
                tail = c.log_tail(400).splitlines()
                on_exit(f"ldp: {c.describe()} while the experiment ran" + (f": {tail[-1]}" if tail else ""))
        await asyncio.sleep(poll_s)


def _stop(ray: Any, clients: list[RayClient], timeout_s: float) -> None:
    """Wait up to ``timeout_s`` for the tasks to end (after Close); cancel the rest (their child
    is killed), then force-kill whatever still runs. Never waits more than ~timeout_s + 4 s."""
    refs = [c.ref for c in clients]
    if not refs:
        return
    _, running = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    for force, grace in ((False, 2.0), (True, 2.0)):
        if not running:
            return
        for ref in running:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=force)
        _, running = ray.wait(running, num_returns=len(running), timeout=grace)


@asynccontextmanager
async def launch_ray(
    population: PopulationSpec,
    processes: int = 1,
    *,
    address: str | None = None,
    bind: str | None = None,
    connect_host: str | None = None,
    num_cpus: float = 1.0,
    scheduling_strategy: str = "SPREAD",
    ray_init: Mapping[str, Any] | None = None,
    tls: str | None = None,
    token_file: str | None = None,
    client_name: str | None = None,
    ready_timeout_s: float = 120.0,
    connect_timeout_s: float = 60.0,
    stop_timeout_s: float = 5.0,
    capture: list[bytes] | None = None,
    extra_args: dict[str, list[str]] | None = None,
    seal_key: bytes | None = None,
    ledgers: str = "keep",
    on_client_exit: Callable[[str], None] | None = say_stderr,
    key_salt: bytes = b"",
) -> AsyncIterator[GrpcLROracle]:
    """Aggregator here + ``processes`` client processes placed by Ray; yields the ``GrpcLROracle``.

    The same experiment (population, P, program) gives bit-identical reports, refusals and ledgers
    as ``launch_local`` (client k of P holds users [n·k/P, n·(k+1)/P) of the same ``ClientConfig``;
    tests/wire/test_ray_launcher.py).

    Parameters
    ----------
    population : PopulationSpec
        The users; only the client tasks see it (as a task argument), never the aggregator.
    processes : int, default 1
        P, the number of client tasks, at most one per user.
    address : str, optional
        The Ray cluster (``ray.init(address=...)``: "auto", or the head's "HOST:6379");
        None starts a local Ray instance. A Ray connection the caller already made is used as is
        (and left open).
    bind : str, optional
        Where the aggregator listens. Default: 127.0.0.1:0 when every Ray node runs on this
        machine, else this node's Ray address (``ray.util.get_node_ip_address()``) port 0.
    connect_host : str, optional
        The host the clients dial (default: the bind host, or this node's address for 0.0.0.0);
        with ``tls``, a name in the server certificate.
    num_cpus : float, default 1.0
        CPUs each client task asks Ray for.
    scheduling_strategy : str, default "SPREAD"
        Ray's placement of the tasks ("SPREAD" across nodes, or "DEFAULT").
    ray_init : mapping, optional
        More ``ray.init`` arguments when this call connects (e.g. ``num_cpus``).
    tls, token_file, client_name : str, optional
        ``ldp-sim certs`` files (as ``serve --tls DIR [--token-file F]``): the aggregator serves
        TLS; each task gets ca.pem and the token (token mode) or client-NAME.pem/.key (mTLS), so
        every client authenticates the aggregator and enrols.
    ready_timeout_s : float, default 120.0
        How long Ray may take to place the tasks and the clients to cover every user.
    connect_timeout_s : float, default 60.0
        Each client's ``--connect-timeout``.
    stop_timeout_s : float, default 5.0
        After Close, how long the tasks get to end before they are cancelled.
    capture, extra_args, seal_key, ledgers, on_client_exit, key_salt
        As in ``launch_local``. The experiment vouches for an empty ``key_salt`` (invariant I1):
        Ray never restarts a client task here (``max_retries=0`` in ``place_clients``), so no
        process life repeats another's (key, user, nonce).

    Raises
    ------
    ParameterError
        Ray is not installed (``pip install 'ldp-sim[ray]'``), or a bad argument (before anything starts).
    LDPError
        Ray cannot be reached, a client ended before it was ready (its exit code and standard
        error), or the clients were not ready within ``ready_timeout_s``.
    """
    check_processes(processes)
    if not isinstance(population, PopulationSpec):
        raise ParameterError(f"launch_ray needs a PopulationSpec, got {type(population).__name__}")
    if processes > population.size:
        raise ParameterError(f"{processes} client processes for {population.size} users: each process needs at least one user")
    if scheduling_strategy not in ("SPREAD", "DEFAULT"):
        raise ParameterError(f"scheduling_strategy must be 'SPREAD' or 'DEFAULT', got {scheduling_strategy!r}")
    if isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float)) or not 0 <= num_cpus < float("inf"):
        raise ParameterError(f"num_cpus must be a finite number ≥ 0 of CPUs per client task, got {num_cpus!r}")
    config = ClientConfig(population=population, seal_key=seal_key, ledgers=ledgers, key_salt=bytes(key_salt))
    tls_files, tls_args = _tls_payload(tls, token_file, client_name)
    server_tls = None
    if tls is not None:
        from ldp.wire.tls import server_tls as make_server_tls

        server_tls = make_server_tls(tls, token_file if client_name is None else None)
    ray = import_ray()
    with _ray_connection(ray, address, ray_init):
        local = _all_nodes_here(ray)
        if bind is None:
            bind = "127.0.0.1:0" if local else f"{ray.util.get_node_ip_address()}:0"
        aggregator = GrpcAggregator(population.description(), bind, capture=capture, tls=server_tls)
        await aggregator.start()
        host = connect_host or aggregator.address.rsplit(":", 1)[0]
        if host in ("0.0.0.0", "[::]", "::"):
            host = ray.util.get_node_ip_address()
        dial = f"{host}:{aggregator.port}"
        if server_tls is None and not local and on_client_exit is not None:
            on_client_exit(f"ldp: the aggregator at {dial} is plaintext for Ray nodes on other machines; use tls= (ldp-sim certs) across machines")
        claims = [ShardClaim(k, processes) for k in range(processes)]
        async with serve_clients(
            aggregator,
            start=lambda: place_clients(
                ray, dial, claims, config, num_cpus=num_cpus, scheduling_strategy=scheduling_strategy,
                connect_timeout_s=connect_timeout_s, extra_args=extra_args, tls_files=tls_files, tls_args=tls_args,
            ),
            ready=lambda clients: wait_until_ready(
                aggregator,
                ready_timeout_s,
                died=lambda: _task_died(clients),
                late=lambda: _tasks_late(aggregator, clients, ready_timeout_s, num_cpus, dial),
            ),
            watch=None if on_client_exit is None else (lambda clients: _watch(clients, on_client_exit)),
            stop=lambda clients: _stop(ray, clients, stop_timeout_s),
        ) as oracle:
            yield oracle


class RayOracleFactory(SealedOracleFactory):
    """``GrpcOracleFactory`` with the client processes placed by Ray (``launch_ray``): the first
    use launches them with a fresh seal key (a task argument) and one-load ledgers; every later
    population is sealed and relayed through the aggregator. Made by ``ray_oracle_factory``."""

    def __init__(self, stack: contextlib.AsyncExitStack, processes: int, launch: Mapping[str, Any], load_timeout_s: float) -> None:
        super().__init__(new_seal_key(), load_timeout_s)
        self._stack = stack
        self.processes = processes
        self.launch = dict(launch)
        self.on_launch: Callable[[GrpcLROracle], None] | None = None  # called once the cluster is up

    async def _first(self, population: PopulationSpec) -> GrpcLROracle:
        oracle = await self._stack.enter_async_context(launch_ray(population, self.processes, seal_key=self._seal_key, ledgers="one_load", **self.launch))
        if self.on_launch is not None:
            self.on_launch(oracle)
        return oracle


@contextlib.asynccontextmanager
async def ray_oracle_factory(processes: int = 1, *, load_timeout_s: float = READY_TIMEOUT_S, **launch: Any) -> AsyncIterator[RayOracleFactory]:
    """``grpc_oracle_factory`` over client processes placed by Ray: ``async with
    ray_oracle_factory(P, address=...) as factory: await separation.run(config, factory)``.
    ``launch`` takes ``launch_ray``'s keyword arguments (address, tls, num_cpus, ...). Ray is
    imported (and a missing Ray reported) on entering the block; nothing is launched until the
    factory is first used; on exit the clients get Close and their tasks are stopped."""
    check_processes(processes)
    import_ray()
    async with contextlib.AsyncExitStack() as stack:
        factory = RayOracleFactory(stack, processes, launch, load_timeout_s)
        try:
            yield factory
        finally:
            factory._closed = True
