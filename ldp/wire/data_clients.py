"""The users of a data file, hosted by client processes on loopback: ``launch_data``; and the one
entry that picks a transport for them: ``data_oracle``.

``launch_data`` plays the experiment (docs/design.md §2a): it starts a ``GrpcAggregator`` that
knows only the file's public description (its *declared* schema and its number of rows), spawns
P client processes (``python -m ldp.wire.client``), each configured on the users' side through
its standard input with the file, the schema, the users' budget and the report key, and yields
the ``GrpcLROracle`` once their shards cover every user. It is ``launch_local``'s lifecycle
(``ldp.wire.launcher.serve_clients``) for a data file instead of a ``PopulationSpec``.

The experiment launches these clients and never restarts them: it vouches for their
(key, user, nonce) (an empty key salt, invariant I1), so they answer exactly as the same
shards in process (``ldp.local.data_oracle.DataLROracle``): bit-identical reports.

Moved from ``simulations/real_data.py`` into the library (issue 25).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from ldp.core.datafile import load_data
from ldp.core.errors import ParameterError
from ldp.core.population import PopulationDescription
from ldp.local.data_oracle import DataLROracle
from ldp.local.oracle import LROracle
from ldp.local.shard import Holdings
from ldp.wire.aggregator import GrpcAggregator, GrpcLROracle
from ldp.wire.client_config import ClientConfig
from ldp.wire.connections import ShardClaim
from ldp.wire.launcher import ClientProcess, check_processes, serve_clients, spawn_clients, stop_clients, wait_until_ready

__all__ = ["launch_data", "data_oracle", "TRANSPORTS"]

TRANSPORTS = ("grpc", "inprocess")


def _died(clients: Sequence[ClientProcess]) -> str | None:
    """Why the first client process that already exited did so (its log's tail), or None."""
    for c in clients:
        if c.process.poll() is not None:
            return f"client process {c.claim.key} exited with code {c.process.returncode} before it was ready: {c.log_tail() or '(no output)'}"
    return None


@asynccontextmanager
async def launch_data(
    data_path: str | Path,
    schema_path: str | Path,
    *,
    budget: float,
    key: bytes,
    processes: int = 2,
    ready_timeout_s: float = 120.0,
    loaded: Holdings | None = None,
) -> AsyncIterator[GrpcLROracle]:
    """Aggregator + ``processes`` client processes on 127.0.0.1 hosting a data file's users.

    Parameters
    ----------
    data_path, schema_path : str or Path
        The CSV or Parquet file and its declared schema (JSON): a served schema is never inferred
        (invariant I3; ``ClientConfig`` refuses a file without one).
    budget : float
        Each user's total ε (the clients' ledgers enforce it).
    key : bytes
        The users' report key (32 bytes), given to the clients out of band.
    processes : int, default 2
        P; client k holds users ⌊n·k/P⌋ .. ⌊n·(k+1)/P⌋ − 1 (it reads the file itself).
    ready_timeout_s : float, default 120.0
        The deadline for the clients to cover every user.
    loaded : Holdings, optional
        The same data, already read by the caller (``load_data(data_path, schema_path)``, or
        the ``ColumnData`` the file was written from): its size and schema make the
        aggregator's description, and the file is not read a second time here.

    Yields
    ------
    GrpcLROracle
        The oracle over the running clients; no child process outlives the block.

    Raises
    ------
    ParameterError
        A bad file or schema (read here first, for the description), or P out of range.
    LDPError
        A client exited, or the clients were not ready in time.

    Examples
    --------
    The first example is skipped by the doctests because it starts an aggregator and two client
    processes; it ran as shown when it was written (tests/cli/test_estimate_cli.py runs it):

    >>> import ldp, numpy as np
    >>> from ldp.core.column import frequency_column
    >>> from ldp.core.rng import derive_key_bytes
    >>> import tempfile
    >>> folder = tempfile.TemporaryDirectory()
    >>> path, schema = frequency_column(np.array([0, 1, 1, 2] * 250), categories=[0, 1, 2]).write_csv(folder.name)
    >>> async def main():
    ...     async with ldp.launch_data(path, schema, budget=1.0, key=derive_key_bytes("doc", 0), processes=2) as oracle:
    ...         session = ldp.Session(oracle, ldp.SessionKind.NON_INTERACTIVE)
    ...         (reports,) = await session.round([ldp.Request.of(range(1000), ldp.RandomizerSpec("kary_rr", ldp.field_query("value"), 1.0))])
    ...         return reports.counts(), [shard.key for shard in oracle.shards]
    >>> ldp.run(main())  # doctest: +SKIP
    ({'answered': 1000, 'refused': 0, 'missing': 0, 'error': 0}, ['0/2', '1/2'])

    Bad arguments are refused on entering the block, before any process starts:

    >>> three, three_schema = frequency_column(np.array([0, 1, 2])).write_csv(tempfile.mkdtemp(dir=folder.name))
    >>> async def too_many():
    ...     async with ldp.launch_data(three, three_schema, budget=1.0, key=derive_key_bytes("doc", 0), processes=4):
    ...         pass
    >>> ldp.run(too_many())
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: 4 client processes for 3 users: each process needs at least one user
    >>> folder.cleanup()
    """
    check_processes(processes)
    data = loaded if loaded is not None else load_data(data_path, schema_path)
    if processes > data.size:
        raise ParameterError(f"{processes} client processes for {data.size} users: each process needs at least one user")
    description = PopulationDescription(data.size, data.schema)
    config = ClientConfig(data_path=str(data_path), schema_path=str(schema_path), budget=budget, report_key=key, key_salt=b"")
    aggregator = GrpcAggregator(description, "127.0.0.1:0")
    await aggregator.start()
    claims = [ShardClaim(k, processes) for k in range(processes)]
    async with serve_clients(
        aggregator,
        start=lambda: spawn_clients(aggregator.address, claims, config),
        ready=lambda clients: wait_until_ready(
            aggregator, ready_timeout_s, died=lambda: _died(clients),
            late=lambda: f"client processes were not ready after {ready_timeout_s:g} s (shards connected: {[s.key for s in aggregator.shards]})",
        ),
        watch=None,
        stop=stop_clients,
    ) as oracle:
        yield oracle


@asynccontextmanager
async def data_oracle(
    data_path: str | Path, schema_path: str | Path | None, budget: float, key: bytes, transport: str = "grpc", processes: int = 2
) -> AsyncIterator[LROracle]:
    """An ``LROracle`` over the users of a data file: ``processes`` client processes on loopback
    (``"grpc"``, ``launch_data``), or the same shards in this process (``"inprocess"``,
    ``DataLROracle``; a schema may then be inferred, as the data stays here)."""
    if transport not in TRANSPORTS:
        raise ParameterError(f"transport must be 'grpc' or 'inprocess', got {transport!r}")
    if transport == "inprocess":
        yield DataLROracle(load_data(data_path, schema_path), budget, key, shards=processes)
        return
    if schema_path is None:
        from ldp.core.datafile import undeclared_schema_message

        raise ParameterError(undeclared_schema_message(data_path))
    async with launch_data(data_path, schema_path, budget=budget, key=key, processes=processes) as oracle:
        yield oracle
