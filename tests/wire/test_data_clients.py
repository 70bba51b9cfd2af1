"""Real data: client processes host records from their own CSV file, configured on their side.

The aggregator knows only the description the experiment tells it (schema, number of users);
the clients read their file, enforce the budget they were given, and answer rounds. A value out
of range is a clear one-line error naming the file, the row and the column.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ldp.core.datafile import load_data
from ldp.core.population import PopulationDescription
from ldp.core.query_specs import field_query
from ldp.core.randomizers import RandomizerSpec
from ldp.core.rr_mechanisms import BinaryRandomizedResponse
from ldp.local.messages import SessionKind
from ldp.local.session import Request, Session
from ldp.wire.aggregator import GrpcAggregator, GrpcLROracle, ShardClaim
from ldp.wire.client_config import ClientConfig
from ldp.wire.launcher import spawn_clients, stop_clients
from tests.waits import PROCESS_WAIT_S

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds


def _write_csv(path: Path, n: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.random((n, 2)) < [0.2, 0.7]).astype(int)
    y = np.where(x[:, 0] ^ x[:, 1], 1, -1)
    lines = ["x_0,x_1,y"] + [f"{a},{b},{c}" for (a, b), c in zip(x, y)]
    path.write_text("\n".join(lines) + "\n")
    # Its declared schema, next to it (a served file needs one: invariant I3, docs/design.md §2a).
    path.with_suffix(".schema.json").write_text(
        '{"fields": [{"name": "x_0"}, {"name": "x_1"}, {"name": "y", "low": -1, "high": 1, "step": 2}]}'
    )
    return np.column_stack([x, y])


async def test_clients_serve_their_own_csv_with_their_own_budget(tmp_path: Path) -> None:
    n = 6000
    truth = _write_csv(tmp_path / "users.csv", n)
    data = load_data(tmp_path / "users.csv", tmp_path / "users.schema.json")
    description = PopulationDescription(data.size, data.schema)
    config = ClientConfig(data_path=str(tmp_path / "users.csv"), schema_path=str(tmp_path / "users.schema.json"), budget=0.5)
    async with GrpcAggregator(description) as aggregator:
        clients = spawn_clients(aggregator.address, [ShardClaim(0, 2), ShardClaim(1, 2)], config)
        try:
            await aggregator.wait_for_shards(60)
            assert {c.budget for c in aggregator._connections.values()} == {0.5}  # declared by the clients
            oracle = GrpcLROracle(aggregator)
            session = Session(oracle, SessionKind.INTERACTIVE)
            spec = RandomizerSpec("binary_rr", field_query("x_1"), 0.5)  # declared: one field per column
            (first,) = await session.round([Request.of(range(n), spec)])
            (second,) = await session.round([Request.of(range(n), spec)])
        finally:
            await aggregator.close("done")
            stop_clients(clients)
    assert first.counts()["answered"] == n and second.counts()["refused"] == n  # the users' budget, 0.5
    # The estimate of Pr[x_1 = 1] is within 5 sd of the file's truth (false alarm < 1e-6).
    rr = BinaryRandomizedResponse(spec.epsilon)
    estimate = float(rr.estimate(first.values).mean())
    sd = float(np.sqrt(rr.variance(0.5) / n))
    assert abs(estimate - truth[:, 1].mean()) < 5 * sd


def test_a_value_out_of_range_names_the_file_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("x_0,x_1,y\n0,1,1\n1,0,-1\n0,7,1\n")
    schema = tmp_path / "schema.json"
    schema.write_text('{"fields": [{"name": "x", "length": 2}, {"name": "y", "low": -1, "high": 1, "step": 2}]}')
    proc = subprocess.run(
        [sys.executable, "-m", "ldp.cli.main", "clients", "--connect", "127.0.0.1:9", "--data", str(path), "--schema", str(schema), "--budget", "1"],
        capture_output=True,
        timeout=PROCESS_WAIT_S,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "bad.csv" in err and "row 3" in err and "x_1" in err and "Traceback" not in err
    # a served file's error names the cell and what is allowed, never its value (I3)
    assert "the value is not allowed by field 'x' (low=0, high=1, step=1: one of 0, 1)" in err and "value 7" not in err


def test_a_data_file_without_a_budget_is_refused_before_anything_runs(tmp_path: Path) -> None:
    _write_csv(tmp_path / "users.csv", 10)
    proc = subprocess.run(
        [sys.executable, "-m", "ldp.cli.main", "clients", "--connect", "127.0.0.1:9", "--data", str(tmp_path / "users.csv")],
        capture_output=True,
        timeout=PROCESS_WAIT_S,
    )
    assert proc.returncode == 2 and "needs its users' budget" in proc.stderr.decode()



async def test_a_client_whose_data_is_not_what_the_experiment_expects_is_refused_by_both_sides(tmp_path: Path) -> None:
    """The aggregator expects 5,000 users; the client holds 6,000 of its own. The client refuses
    the range it is offered (it computes its own), the aggregator names the shard, and nobody
    answers a round."""
    _write_csv(tmp_path / "users.csv", 6000)
    data = load_data(tmp_path / "users.csv", tmp_path / "users.schema.json")
    config = ClientConfig(data_path=str(tmp_path / "users.csv"), schema_path=str(tmp_path / "users.schema.json"), budget=1.0)
    async with GrpcAggregator(PopulationDescription(5000, data.schema)) as aggregator:
        (client,) = spawn_clients(aggregator.address, [ShardClaim(0, 1)], config)
        try:
            for _ in range(200):
                if client.process.poll() is not None:
                    break
                await asyncio.sleep(0.05)
            assert client.process.returncode == 2
            assert "refusing" in client.log_tail() and "0..5999" in client.log_tail()
            assert aggregator.shards == [] and any("could not host" in e for e in aggregator.events)
        finally:
            stop_clients([client])
