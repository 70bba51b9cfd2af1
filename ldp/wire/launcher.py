"""Start an aggregator and P client processes on this machine, and stop all of it again.

What: ``async with launch_local(population, processes=P) as oracle:`` starts a ``GrpcAggregator``
on 127.0.0.1 (port chosen by the OS), spawns P client processes (``python -m ldp.wire.client``,
fresh interpreters: never fork, DESIGN.md §3), waits until their shards cover every user, and
yields a ``GrpcLROracle``. On exit — normal, error, cancellation or Ctrl-C — it sends Close,
waits briefly for the clients to exit, and kills any that do not.
Guarantee: no child process outlives the block (tests/wire/test_cli.py checks after Ctrl-C);
children also exit on their own if the launching process dies (``--exit-with-parent``).
Source: DESIGN.md §3 (spawn, loopback, bind :0, own Close message).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import IO, AsyncIterator, Sequence

from ldp.core.errors import LDPError, ParameterError
from ldp.core.population import PopulationSpec
from ldp.wire.aggregator import GrpcAggregator, GrpcLROracle, ShardClaim

__all__ = ["ClientProcess", "launch_local", "spawn_clients", "stop_clients"]


@dataclass
class ClientProcess:
    """A spawned client process and where its stderr goes."""

    claim: ShardClaim
    process: subprocess.Popen[bytes]
    log: IO[bytes] | None = None

    def log_tail(self, limit: int = 2000) -> str:
        if self.log is None:
            return ""
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-limit:].strip()


def spawn_clients(
    address: str,
    claims: Sequence[ShardClaim],
    *,
    capture_stderr: bool = True,
    connect_timeout_s: float = 60.0,
    extra_args: dict[str, list[str]] | None = None,
) -> list[ClientProcess]:
    """Start one ``python -m ldp.wire.client`` per claim (fresh interpreters, never fork).

    ``extra_args`` maps a claim key to extra command-line arguments (tests inject faults).
    """
    out = []
    for claim in claims:
        log = tempfile.TemporaryFile() if capture_stderr else None
        cmd = [
            sys.executable,
            "-m",
            "ldp.wire.client",
            "--connect",
            address,
            "--shard",
            f"{claim.index}/{claim.count}",
            "--sub",
            f"{claim.sub_index}/{claim.sub_count}",
            "--connect-timeout",
            str(connect_timeout_s),
            "--exit-with-parent",
            *(extra_args or {}).get(claim.key, []),
        ]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log if log else None, env=env)
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


async def _wait_ready(aggregator: GrpcAggregator, clients: Sequence[ClientProcess], timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while aggregator.covered_users() < aggregator.population.size:
        dead = [c for c in clients if c.process.poll() is not None]
        if dead:
            c = dead[0]
            raise LDPError(f"client process {c.claim.key} exited with code {c.process.returncode} before it was ready: {c.log_tail() or '(no output)'}")
        if loop.time() > end:
            raise LDPError(f"client processes were not ready after {timeout_s:g} s (shards connected: {[s.key for s in aggregator.shards]})")
        try:
            await aggregator.wait_for_shards(0.2)
        except LDPError:
            pass


@asynccontextmanager
async def launch_local(
    population: PopulationSpec,
    processes: int = 1,
    *,
    ready_timeout_s: float = 120.0,
    capture: list[bytes] | None = None,
    extra_args: dict[str, list[str]] | None = None,
) -> AsyncIterator[GrpcLROracle]:
    """Aggregator + ``processes`` client processes on loopback; yields the ``GrpcLROracle``.

    Client k of P holds users [n·k/P, n·(k+1)/P) (shard key ``"k/P"``). The oracle's
    ``clients`` attribute lists the processes (tests kill one to simulate a crash).
    ``capture`` collects every raw message the clients send (see ``GrpcAggregator``).
    """
    if not isinstance(processes, int) or processes < 1:
        raise ParameterError(f"processes must be an integer ≥ 1, got {processes!r}")
    if processes > population.size:
        raise ParameterError(f"{processes} client processes for {population.size} users: each process needs at least one user")
    aggregator = GrpcAggregator(population, "127.0.0.1:0", capture=capture)
    await aggregator.start()
    clients: list[ClientProcess] = []
    try:
        clients = spawn_clients(aggregator.address, [ShardClaim(k, processes) for k in range(processes)], extra_args=extra_args)
        await _wait_ready(aggregator, clients, ready_timeout_s)
        oracle = GrpcLROracle(aggregator)
        oracle.clients = clients
        yield oracle
    finally:
        try:
            await asyncio.wait_for(aggregator.close("the experiment is over"), 5.0)
        except BaseException:  # noqa: BLE001 - cleanup must reach the children whatever happened
            pass
        finally:
            stop_clients(clients)
