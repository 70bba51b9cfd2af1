"""Start an aggregator and P client processes on this machine, and stop all of it again.

What: ``async with launch_local(population, processes=P) as oracle:`` plays the experiment's
role (docs/design.md §2a): it starts a ``GrpcAggregator`` on 127.0.0.1 (port chosen by the OS)
that knows only the population's public description, spawns P client processes
(``python -m ldp.wire.client``, fresh interpreters: never fork, docs/design.md §3), hands each its
``ClientConfig`` (the population spec, a seal key) through its standard input — out of band: the
aggregator never sees it — waits until their shards cover every user, and yields a ``GrpcLROracle``. On exit — normal, error, cancellation or Ctrl-C — it sends Close,
waits briefly for the clients to exit, and kills any that do not. The Close says how the block
ended: normally (``failed = false``: the clients exit 0), or by an exception, a timeout,
cancellation or Ctrl-C (``failed = true``, the reason names it: the clients exit 3). A client
process that ends while the block runs (killed, crashed) is reported at once in one line naming
its claim and its exit code or signal (``on_client_exit``; default: standard error); its users
are then reported missing by the rounds, as the protocol says.
``async with grpc_oracle_factory(processes=P) as factory:`` keeps one such cluster for many
populations: ``async with factory(spec) as oracle:`` launches it the first time and afterwards
only relays ``spec``, sealed with the key the clients got at spawn, into the running clients
(``GrpcLROracle.load``), which is what experiments with hundreds of seeded trials need (``ldp.simulations.separation.run(config, factory)``);
with ``lanes=L`` it keeps up to L such clusters and serves L populations at once (trials side by side).
``wait_clients`` and ``clients_exit_code`` do the same reporting for ``ldp-sim clients``, whose
exit code says how its client processes ended (``EXIT_CLIENT_DIED`` when one was killed).
Guarantee: no child process outlives the block (tests/wire/test_cli.py checks after Ctrl-C);
children also exit on their own if the launching process dies (``--exit-with-parent``).
Source: docs/design.md §3 (spawn, loopback, bind :0, own Close message).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import IO, Any

from ldp.core.errors import LDPError, ParameterError
from ldp.core.population import PopulationSpec
from ldp.wire.aggregator import READY_TIMEOUT_S, GrpcAggregator, GrpcLROracle, ShardClaim
from ldp.wire.client_config import ClientConfig
from ldp.wire.factory import SealedOracleFactory
from ldp.wire.sealed import new_seal_key

__all__ = [
    "ClientProcess",
    "EXIT_CLIENT_DIED",
    "GrpcOracleFactory",
    "clients_exit_code",
    "describe_exit",
    "grpc_oracle_factory",
    "launch_local",
    "say_stderr",
    "spawn_clients",
    "stop_clients",
    "wait_clients",
    "wait_until_ready",
]

# `ldp-sim clients` exits with the largest of its client processes' exit codes (0 the run is
# over, 1 lost the aggregator, 2 turned away, 3 the run failed: ldp.wire.client.EXIT_*), or with
# this one when a client process was killed by a signal or ended with any other code.
EXIT_CLIENT_DIED = 4

_CLIENT_EXITS = {0: "the run is over", 1: "lost the aggregator", 2: "turned away", 3: "the run failed", 130: "interrupted"}


def describe_exit(code: int) -> str:
    """How a client process ended, in words: 'was killed by SIGKILL', 'exited with code 3 (the run failed)'."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    meaning = _CLIENT_EXITS.get(code)
    return f"exited with code {code}" + (f" ({meaning})" if meaning else "")


@dataclass
class ClientProcess:
    """A spawned client process and where its stderr goes."""

    claim: ShardClaim
    process: subprocess.Popen[bytes]
    log: IO[bytes] | None = None

    def describe(self) -> str:
        """One line: which claim, which process, how it ended (or that it still runs)."""
        code = self.process.poll()
        return f"client {self.claim.key} (pid {self.process.pid}) " + ("is running" if code is None else describe_exit(code))

    def log_tail(self, limit: int = 2000) -> str:
        if self.log is None:
            return ""
        self.log.flush()
        # pread: the child writes through the same open file (one shared offset), so seeking
        # here while it runs would make it write over the start of its own log.
        fd = self.log.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - 4 * limit)  # at most 4 bytes a character
        return os.pread(fd, size - start, start).decode(errors="replace")[-limit:].strip()


def max_processes() -> int:
    """The most client processes one machine may start: max(64, 8 × CPU cores). More would only
    thrash (each is a Python interpreter holding a slice of the users); use more machines."""
    return max(64, 8 * (os.cpu_count() or 1))


def check_processes(processes: object, what: str = "processes") -> int:
    """``processes`` if it is an integer in [1, ``max_processes()``], else a ParameterError saying so."""
    limit = max_processes()
    if isinstance(processes, bool) or not isinstance(processes, int) or not 1 <= processes <= limit:
        raise ParameterError(
            f"{what} must be ≥ 1 and ≤ {limit}, an integer (client processes on one machine: at most max(64, 8 × CPU cores); "
            f"use more machines for more), got {processes!r}"
        )
    return processes


def spawn_clients(
    address: str,
    claims: Sequence[ShardClaim],
    config: ClientConfig,
    *,
    capture_stderr: bool = True,
    connect_timeout_s: float = 60.0,
    extra_args: dict[str, list[str]] | None = None,
) -> list[ClientProcess]:
    """Start one ``python -m ldp.wire.client`` per claim (fresh interpreters, never fork), each
    reading ``config`` from its standard input (a pipe only this process holds).

    ``extra_args`` maps a claim key to extra command-line arguments (tests inject faults).
    """
    check_processes(len(claims), "the number of client processes (claims)")
    if isinstance(connect_timeout_s, bool) or not isinstance(connect_timeout_s, (int, float)) or not 0 < connect_timeout_s < float("inf"):
        raise ParameterError(f"connect_timeout_s must be a finite number of seconds > 0, got {connect_timeout_s!r}")
    out = []
    text = config.dumps().encode()
    for claim in claims:
        log = tempfile.TemporaryFile() if capture_stderr else None
        cmd = [
            sys.executable,
            "-m",
            "ldp.wire.client",
            "--connect",
            address,
            "--config",
            "-",
            "--shard",
            f"{claim.index}/{claim.count}",
            "--sub",
            f"{claim.sub_index}/{claim.sub_count}",
            "--connect-timeout",
            str(connect_timeout_s),
            "--exit-with-parent",
            str(os.getpid()),  # named, not read by the child at start: a launcher that dies first still counts
            *(extra_args or {}).get(claim.key, []),
        ]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log if log else None, env=env)
        assert proc.stdin is not None
        try:
            proc.stdin.write(text)
            proc.stdin.close()
        except BrokenPipeError:  # the child died at once; its exit code and log tell why
            pass
        out.append(ClientProcess(claim, proc, log))
    return out


def stop_clients(clients: Sequence[ClientProcess], timeout_s: float = 5.0) -> None:
    """Wait up to ``timeout_s`` for the clients to exit (after Close), then kill the rest."""
    end = time.monotonic() + timeout_s
    for c in clients:
        try:
            c.process.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for c in clients:
        if c.process.poll() is None:
            c.process.kill()
            c.process.wait()
        if c.log is not None:
            c.log.close()


def wait_clients(clients: Sequence[ClientProcess], on_exit: Callable[[ClientProcess], None] | None = None, poll_s: float = 0.2) -> list[int]:
    """Wait until every client process has ended; ``on_exit(c)`` is called as soon as one ends
    with a non-zero code or a signal (so a killed client is named at once, not at the end).
    Returns the exit codes in order (negative: killed by that signal)."""
    reported: set[int] = set()
    while True:
        for i, c in enumerate(clients):
            if i not in reported and c.process.poll() is not None:
                reported.add(i)
                if c.process.returncode != 0 and on_exit is not None:
                    on_exit(c)
        if len(reported) == len(clients):
            return [int(c.process.returncode) for c in clients]
        time.sleep(poll_s)


def clients_exit_code(codes: Sequence[int]) -> int:
    """The exit code of a parent of client processes: the largest of theirs (0–3, see
    ``ldp.wire.client``), or ``EXIT_CLIENT_DIED`` if one was killed or ended with another code."""
    mapped = [c if 0 <= c <= 3 else EXIT_CLIENT_DIED for c in codes]
    return max(mapped, default=0)


async def _watch_clients(clients: Sequence[ClientProcess], on_exit: Callable[[str], None], poll_s: float = 0.25) -> None:
    """Report each client process that ends while the experiment runs (until cancelled)."""
    reported: set[int] = set()
    while len(reported) < len(clients):
        for i, c in enumerate(clients):
            if i not in reported and c.process.poll() is not None:
                reported.add(i)
                tail = c.log_tail(400).splitlines()
                on_exit(f"ldp: {c.describe()} while the experiment ran" + (f": {tail[-1]}" if tail else ""))
        await asyncio.sleep(poll_s)


def say_stderr(line: str) -> None:
    """Print one line to stderr at once: the default ``on_client_exit`` of the launchers (here and
    ``ldp.wire.ray_launcher``), so a client that dies mid-experiment is reported while it runs."""
    print(line, file=sys.stderr, flush=True)


def _failure(exc: BaseException) -> str:
    """The Close reason for an experiment that ended by ``exc``."""
    if isinstance(exc, KeyboardInterrupt):
        return "the experiment failed: interrupted (Ctrl-C)"
    if isinstance(exc, asyncio.CancelledError):
        return "the experiment failed: interrupted or cancelled"
    if isinstance(exc, GeneratorExit):
        return "the experiment failed: abandoned before it ended"
    text = " ".join(str(exc).split())
    text = text if len(text) <= 300 else text[:300] + "..."
    return f"the experiment failed: {type(exc).__name__}" + (f": {text}" if text else "")


async def wait_until_ready(aggregator: GrpcAggregator, timeout_s: float, died: Callable[[], str | None], late: Callable[[], str]) -> None:
    """Wait until the connected client shards cover every loaded user (how both launchers, processes
    here and Ray tasks in ``ldp.wire.ray_launcher``, know their clients are ready).

    Parameters
    ----------
    aggregator : GrpcAggregator
        The started aggregator the clients connect to.
    timeout_s : float
        The deadline of the whole wait.
    died : Callable[[], str | None]
        Asked every 0.2 s: why a client already ended (the message), or None while all run.
    late : Callable[[], str]
        The message once ``timeout_s`` has passed (called then, so it names the shards connected).

    Raises
    ------
    LDPError
        With ``died()``'s message as soon as a client ended, or ``late()``'s after the deadline.
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while aggregator.covered_users() < aggregator.loaded().size:
        why = died()
        if why is not None:
            raise LDPError(why)
        if loop.time() > end:
            raise LDPError(late())
        with contextlib.suppress(LDPError):
            await aggregator.wait_for_shards(0.2)


def _process_died(clients: Sequence[ClientProcess]) -> str | None:
    """Why the first client process that already exited did so, or None."""
    dead = [c for c in clients if c.process.poll() is not None]
    if not dead:
        return None
    c = dead[0]
    return f"client process {c.claim.key} exited with code {c.process.returncode} before it was ready: {c.log_tail() or '(no output)'}"


@asynccontextmanager
async def launch_local(
    population: PopulationSpec,
    processes: int = 1,
    *,
    ready_timeout_s: float = 120.0,
    capture: list[bytes] | None = None,
    extra_args: dict[str, list[str]] | None = None,
    seal_key: bytes | None = None,
    ledger_path: str | None = None,
    ledgers: str = "keep",
    on_client_exit: Callable[[str], None] | None = say_stderr,
    key_salt: bytes = b"",
) -> AsyncIterator[GrpcLROracle]:
    """Aggregator + ``processes`` client processes on loopback; yields the ``GrpcLROracle``.

    An async context manager: ``async with launch_local(population, processes=P) as oracle:``
    plays the experiment's role (docs/design.md §2a). It starts a ``GrpcAggregator`` on
    127.0.0.1 (port chosen by the OS) that knows only the population's public description,
    spawns P client processes (``python -m ldp.wire.client``, fresh interpreters: never fork,
    docs/design.md §3), waits until their shards cover every user, and yields the oracle.
    The clients get ``population`` (and ``seal_key``, which lets them open sealed Loads, and
    ``ledger_path``, a durable ledger, or ``ledgers="one_load"``, in-memory ledgers dropped when
    the next population is loaded) through their standard input; the aggregator gets only
    ``population.description()``.

    Client k of P holds users [n·k/P, n·(k+1)/P) (shard key ``"k/P"``). The oracle's
    ``clients`` attribute lists the processes (tests kill one to simulate a crash).
    ``capture`` collects every raw message the clients send (see ``GrpcAggregator``).
    ``on_client_exit`` gets one line for each client process that ends while the block runs
    (None: silent); its users are then reported missing by the rounds. On exit the clients get
    Close, with ``failed`` set (and the reason naming the exception) when the block ended by an
    exception, a timeout, cancellation or Ctrl-C; the launcher waits briefly for them to exit
    and kills any that do not. Guarantee: no child process outlives the block
    (tests/wire/test_cli.py checks after Ctrl-C); children also exit on their own if the
    launching process dies (``--exit-with-parent``).

    Parameters
    ----------
    population : PopulationSpec
        The users; only the client processes see it.
    processes : int, default 1
        P, the number of client processes: in [1, max(64, 8 × CPU cores)], at most one per user.
    ready_timeout_s : float, default 120.0
        How long to wait for the clients to cover every user.
    capture : list of bytes, optional
        Collects every raw message the clients send.
    extra_args : dict of str to list of str, optional
        Extra command-line arguments per shard key (tests inject faults).
    seal_key : bytes, optional
        The key with which the clients open sealed Loads (``grpc_oracle_factory`` sets it).
    ledger_path : str, optional
        A durable ledger file for the clients.
    ledgers : str, default "keep"
        ``"keep"``, or ``"one_load"``: in-memory ledgers dropped when the next population is loaded.
    on_client_exit : callable, optional
        Called with one line for each client process that ends while the block runs; default
        prints it on standard error; None: silent.
    key_salt : bytes, default b""
        The salt of the clients' report keys (``ldp.core.rng.life_key``, invariant I1). Empty:
        the experiment vouches that these process lives never repeat a (key, user, nonce) (the
        launcher never restarts a client; a new launch over the same seed and an in-memory
        ledger replays the same simulation, which is what makes it reproducible, bit for bit
        across transports and process counts). 16 bytes: a salt of the experiment's choosing
        (e.g. ``ldp.core.rng.new_life_salt()`` for runs that must not repeat one another).

    Yields
    ------
    GrpcLROracle
        The oracle over the running clients (an ``LROracle``).

    Raises
    ------
    ParameterError
        ``processes`` out of range or above the number of users, or ``population`` not a
        ``PopulationSpec`` (on entering the block, before anything starts).
    LDPError
        A client process exited, or the clients were not ready within ``ready_timeout_s``.

    Examples
    --------
    The first example is skipped by the doctests because it starts an aggregator and two client
    processes (fresh interpreters, a loopback port); it ran as shown when it was written:

    >>> import ldp
    >>> cc = ldp.concept_class("parity", 3)
    >>> population = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "target")), size=1000, budget=1.0)
    >>> async def main():
    ...     async with ldp.launch_local(population, processes=2) as oracle:
    ...         session = ldp.Session(oracle, ldp.SessionKind.NON_INTERACTIVE)
    ...         rr = ldp.RandomizerSpec("binary_rr", ldp.label_query(), epsilon=0.5)
    ...         (reports,) = await session.round([ldp.Request.of(range(1000), rr)])
    ...         return reports.counts(), [shard.key for shard in oracle.shards]
    >>> ldp.run(main())  # doctest: +SKIP
    ({'answered': 1000, 'refused': 0, 'missing': 0, 'error': 0}, ['0/2', '1/2'])

    Bad arguments are refused on entering the block, before any process starts:

    >>> three_users = ldp.PopulationSpec(cc, population.target, size=3)
    >>> async def too_many():
    ...     async with ldp.launch_local(three_users, processes=4):
    ...         pass
    >>> ldp.run(too_many())
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: 4 client processes for 3 users: each process needs at least one user
    """
    check_processes(processes)
    if not isinstance(population, PopulationSpec):
        raise ParameterError(f"launch_local needs a PopulationSpec, got {type(population).__name__}")
    if processes > population.size:
        raise ParameterError(f"{processes} client processes for {population.size} users: each process needs at least one user")
    aggregator = GrpcAggregator(population.description(), "127.0.0.1:0", capture=capture)
    # The experiment launches these lives and gives them their salt (never None: None would be
    # "draw a fresh one in each child", which is for lives a user starts, not reproducible).
    config = ClientConfig(population=population, seal_key=seal_key, ledger_path=ledger_path, ledgers=ledgers, key_salt=bytes(key_salt))
    await aggregator.start()
    claims = [ShardClaim(k, processes) for k in range(processes)]
    async with serve_clients(
        aggregator,
        start=lambda: spawn_clients(aggregator.address, claims, config, extra_args=extra_args),
        ready=lambda clients: wait_until_ready(
            aggregator,
            ready_timeout_s,
            died=lambda: _process_died(clients),
            late=lambda: f"client processes were not ready after {ready_timeout_s:g} s (shards connected: {[s.key for s in aggregator.shards]})",
        ),
        watch=None if on_client_exit is None else (lambda clients: _watch_clients(clients, on_client_exit)),
        stop=stop_clients,
    ) as oracle:
        yield oracle


@asynccontextmanager
async def serve_clients(
    aggregator: GrpcAggregator,
    start: Callable[[], list[Any]],
    ready: Callable[[list[Any]], Awaitable[None]],
    watch: Callable[[list[Any]], Awaitable[None]] | None,
    stop: Callable[[list[Any]], None],
) -> AsyncIterator[GrpcLROracle]:
    """The launchers' one lifecycle (``launch_local``, ``ldp.wire.ray_launcher.launch_ray``):
    ``start`` the clients, wait until they are ``ready``, yield the oracle (``oracle.clients``
    lists them) while ``watch`` reports clients that end; on the way out, however it ends, close
    the aggregator (Close tells the clients whether the run failed, and why) and ``stop`` every
    client that is left."""
    clients: list[Any] = []
    watcher: asyncio.Future[None] | None = None
    failure: str | None = None
    try:
        clients = start()
        await ready(clients)
        oracle = GrpcLROracle(aggregator)
        oracle.clients = clients
        if watch is not None:
            watcher = asyncio.ensure_future(watch(clients))
        yield oracle
    except BaseException as exc:
        failure = _failure(exc)
        raise
    finally:
        if watcher is not None:
            watcher.cancel()
        try:
            reason = failure or "the experiment is over"
            await asyncio.wait_for(aggregator.close(reason, failed=failure is not None), 5.0)
        except BaseException:  # noqa: BLE001 - cleanup must reach the clients whatever happened
            pass
        finally:
            stop(clients)


class GrpcOracleFactory(SealedOracleFactory):
    """An oracle factory over clusters of client processes on this machine: ``factory(spec)`` is
    an async context manager yielding a ``GrpcLROracle`` for ``spec``.

    The first use launches the aggregator and the clients (``launch_local``), giving the clients
    a fresh seal key out of band; every later use seals the new population with it and relays it
    through the aggregator (``ldp.wire.factory.SealedOracleFactory``). A cluster serves one
    population at a time: the oracle of a previous ``async with`` must not be used after the
    next one starts. With ``lanes`` = L > 1 the factory serves up to L populations at once
    (independent trials of a sweep, ``ldp.simulations.separation``), each on a cluster of its own
    (an aggregator and ``processes`` clients, launched the first time that many populations are
    in use at once; every cluster gets the same seal key out of band). The first cluster is
    used whenever it is free, so a caller that runs its large populations one at a time keeps
    them on it. ``lanes`` may be raised between uses. Made by ``grpc_oracle_factory``, which
    shuts every cluster down on exit.
    """

    def __init__(
        self,
        stack: contextlib.AsyncExitStack,
        processes: int,
        ready_timeout_s: float,
        load_timeout_s: float,
        extra_args: dict[str, list[str]] | None,
        lanes: int = 1,
    ) -> None:
        super().__init__(new_seal_key(), load_timeout_s)
        self._stack = stack
        self.processes = processes
        self.ready_timeout_s = ready_timeout_s
        self.extra_args = extra_args
        self.lanes = check_lanes(lanes)
        self._more: list[_Lane] = []  # the clusters beyond the first, in launch order
        self.on_launch: Callable[[GrpcLROracle], None] | None = None  # called once a cluster is up

    def __call__(self, population: PopulationSpec) -> contextlib.AbstractAsyncContextManager[GrpcLROracle]:
        if not self._in_use or self._closed:
            return self._use(population)
        for lane in self._more:
            if not lane._in_use:
                return lane._use(population)
        if 1 + len(self._more) < check_lanes(self.lanes):
            lane = _Lane(self)
            self._more.append(lane)
            return lane._use(population)
        if self.lanes == 1:
            return self._use(population)  # the cluster's own refusal: one population at a time
        raise ParameterError(f"this oracle factory serves at most lanes = {self.lanes} populations at a time: leave one `async with` first")

    @property
    def serving(self) -> int:
        """How many populations are in use right now (at most ``lanes``)."""
        return int(self._in_use) + sum(lane._in_use for lane in self._more)

    @property
    def clusters(self) -> int:
        """How many clusters (aggregator + ``processes`` clients) have been launched so far."""
        return int(self.oracle is not None) + sum(lane.oracle is not None for lane in self._more)

    # ``populations`` and ``load_seconds`` (SealedOracleFactory's counters) count every cluster:
    # the first one's own counts are kept apart, the other lanes keep theirs.
    @property  # type: ignore[override]
    def populations(self) -> int:
        return self._own_populations + sum(lane.populations for lane in getattr(self, "_more", ()))

    @populations.setter
    def populations(self, value: int) -> None:
        self._own_populations = value - sum(lane.populations for lane in getattr(self, "_more", ()))

    @property  # type: ignore[override]
    def load_seconds(self) -> float:
        return self._own_load_seconds + sum(lane.load_seconds for lane in getattr(self, "_more", ()))

    @load_seconds.setter
    def load_seconds(self, value: float) -> None:
        self._own_load_seconds = value - sum(lane.load_seconds for lane in getattr(self, "_more", ()))

    async def _first(self, population: PopulationSpec) -> GrpcLROracle:
        return await self._launch(population)

    async def _launch(self, population: PopulationSpec) -> GrpcLROracle:
        oracle = await self._stack.enter_async_context(
            # One-load ledgers: a sweep loads thousands of populations, each used by one run; the
            # experiment (the users' side here) chooses this at spawn, never the aggregator.
            launch_local(population, self.processes, ready_timeout_s=self.ready_timeout_s, extra_args=self.extra_args, seal_key=self._seal_key, ledgers="one_load")
        )
        if self.on_launch is not None:
            self.on_launch(oracle)
        return oracle

    def _close(self) -> None:
        self._closed = True
        for lane in self._more:
            lane._closed = True


class _Lane(SealedOracleFactory):
    """A further cluster of a ``GrpcOracleFactory`` (its lanes beyond the first): same seal key,
    same processes per cluster, launched on the owner's exit stack (so it stops with it)."""

    def __init__(self, owner: GrpcOracleFactory) -> None:
        super().__init__(owner._seal_key, owner.load_timeout_s)
        self._owner = owner

    async def _first(self, population: PopulationSpec) -> GrpcLROracle:
        return await self._owner._launch(population)


def check_lanes(lanes: object) -> int:
    """``lanes`` if it is an integer in [1, 64], else a ParameterError saying so."""
    if isinstance(lanes, bool) or not isinstance(lanes, int) or not 1 <= lanes <= 64:
        raise ParameterError(f"lanes (populations served at once, one cluster each) must be an integer in [1, 64], got {lanes!r}")
    return lanes


@contextlib.asynccontextmanager
async def grpc_oracle_factory(
    processes: int = 1,
    *,
    ready_timeout_s: float = 120.0,
    load_timeout_s: float = READY_TIMEOUT_S,
    extra_args: dict[str, list[str]] | None = None,
    lanes: int = 1,
) -> AsyncIterator[GrpcOracleFactory]:
    """One cluster of P client processes for many populations: an oracle factory.

    ``async with grpc_oracle_factory(P) as factory: await separation.run(config, factory)``.
    ``async with factory(spec) as oracle:`` launches the aggregator and the clients the first
    time (``launch_local``, with a fresh seal key given to the clients out of band and one-load
    ledgers) and afterwards only relays ``spec``, sealed with that key, into the running clients
    (``GrpcLROracle.load``), which is what experiments with hundreds of seeded trials need
    (``ldp.simulations.separation.run(config, factory)``). One population at a time per cluster: the
    oracle of a previous ``async with`` must not be used after the next one starts; with
    ``lanes`` = L the factory serves up to L at once, each on a cluster of its own.

    Launches nothing until the factory is first used; on exit (normal, error, cancellation,
    Ctrl-C) sends Close and stops every client process it started (``launch_local``'s cleanup).

    Parameters
    ----------
    processes : int, default 1
        P, the number of client processes: in [1, max(64, 8 × CPU cores)].
    ready_timeout_s : float, default 120.0
        How long the first launch waits for the clients to cover every user.
    load_timeout_s : float, default ``READY_TIMEOUT_S``
        How long a later population may take to load into the running clients.
    extra_args : dict of str to list of str, optional
        Extra command-line arguments per shard key (tests inject faults).
    lanes : int, default 1
        How many populations the factory may serve at once, each on a cluster of its own
        (``processes`` clients each, launched only when that many are in use at once): an
        integer in [1, 64]. ``factory.lanes`` may also be raised later (the separation sweep
        does, to run small trials side by side).

    Yields
    ------
    GrpcOracleFactory
        ``factory(spec)`` is an async context manager yielding a ``GrpcLROracle`` for ``spec``.

    Raises
    ------
    ParameterError
        ``processes`` out of range (on entering the block).

    Examples
    --------
    The first example is skipped by the doctests because it starts an aggregator and two client
    processes (fresh interpreters, a loopback port); it ran as shown when it was written:

    >>> import ldp
    >>> cc = ldp.concept_class("parity", 3)
    >>> rr = ldp.RandomizerSpec("binary_rr", ldp.label_query(), epsilon=0.5)
    >>> async def sweep():
    ...     answered = []
    ...     async with ldp.grpc_oracle_factory(processes=2) as factory:
    ...         for seed in range(3):  # three populations, one cluster
    ...             spec = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(seed, "target")), size=1000, seed=seed)
    ...             async with factory(spec) as oracle:
    ...                 session = ldp.Session(oracle, ldp.SessionKind.NON_INTERACTIVE)
    ...                 (reports,) = await session.round([ldp.Request.of(range(1000), rr)])
    ...                 answered.append(reports.counts()["answered"])
    ...     return answered
    >>> ldp.run(sweep())  # doctest: +SKIP
    [1000, 1000, 1000]

    A bad process count is refused on entering the block, before any process starts:

    >>> async def none():
    ...     async with ldp.grpc_oracle_factory(processes=0):
    ...         pass
    >>> ldp.run(none())
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: processes must be ≥ 1 and ≤ ..., got 0
    """
    check_processes(processes)
    check_lanes(lanes)
    async with contextlib.AsyncExitStack() as stack:
        factory = GrpcOracleFactory(stack, processes, ready_timeout_s, load_timeout_s, extra_args, lanes)
        try:
            yield factory
        finally:
            factory._close()


def quiet_grpc_after_interrupt() -> None:
    """After Ctrl-C the event loop is closed and the client processes are stopped; a grpc server
    object whose stop was cut short by the interrupt then tries, when garbage-collected, to
    schedule its shutdown on that closed loop and prints a traceback. That one message, and the
    warning about the shutdown coroutine it could not schedule, are dropped; anything else still
    reaches the default hook."""
    default = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        obj = unraisable.object
        grpc_server_del = getattr(obj, "__qualname__", "") == "Server.__del__" and str(getattr(obj, "__module__", "")).startswith("grpc")
        if grpc_server_del and isinstance(unraisable.exc_value, RuntimeError) and "Event loop is closed" in str(unraisable.exc_value):
            return
        default(unraisable)

    sys.unraisablehook = hook
    # the shutdown coroutine that __del__ built and could not schedule is then never awaited
    warnings.filterwarnings("ignore", message="coroutine 'AioServer.shutdown' was never awaited", category=RuntimeWarning)
