"""Load: one set of client processes serves one population after another.

After ``oracle.load(description, sealed)`` of new data the same program gives bit-identical
reports, refusals and ledgers as a fresh ``InProcessLROracle(spec)`` (session ids from 1, ledgers
fresh because the data is new); a reload of data seen before continues its ledgers; a load is
refused while a
round is in flight or when a shard would hold no users; a client that stops or dies during a load
is named in the error, within the deadline; the oracle factory reuses one cluster and leaves no
process behind.
"""

from __future__ import annotations

import asyncio
import os
import signal

import numpy as np
import pytest

from ldp.core.errors import LDPError, ParameterError
from ldp.core.population import PopulationSpec
from ldp.local.messages import SessionKind
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session
from ldp.wire.launcher import grpc_oracle_factory, launch_local
from ldp.wire.sealed import new_seal_key, seal_population
from tests.wire.wire_helpers import assert_identical, population, rr, scripted_sessions

KEY = new_seal_key()


async def load(oracle, spec: PopulationSpec, timeout_s: float) -> None:  # type: ignore[no-untyped-def]
    """What the experiment does: seal the spec with the clients' key, let the aggregator relay it."""
    await oracle.load(spec.description(), seal_population(KEY, spec), timeout_s=timeout_s)

pytestmark = pytest.mark.timeout(60)


async def test_after_a_load_results_equal_a_fresh_in_process_oracle() -> None:
    first, second = population(n=2000, seed=5), population(n=3001, budget=1.5, seed=8)
    reference = await scripted_sessions(InProcessLROracle(second))
    async with launch_local(first, processes=2, seal_key=KEY) as oracle:
        spent = (await scripted_sessions(oracle)).ledger  # spends budget and uses session ids 1, 2
        assert oracle.transcript.rounds and spent.any()
        await load(oracle, second, timeout_s=30)
        assert [(s.first_user, s.count) for s in oracle.shards] == [(0, 1500), (1500, 1501)]
        assert oracle.description == second.description() and oracle.user_count == 3001
        assert not oracle.transcript.rounds  # as on a fresh oracle
        assert_identical(reference, await scripted_sessions(oracle))
        # And back to the first population: its ledgers continue where they were (the same data).
        await load(oracle, first, timeout_s=30)
        np.testing.assert_array_equal(await oracle.ledger_spent_units(), spent)


async def test_a_load_is_refused_while_a_round_is_in_flight_or_a_shard_would_be_empty() -> None:
    spec = population(n=400)
    async with launch_local(spec, processes=2, extra_args={"1/2": ["--answer-delay", "1.0"]}, seal_key=KEY) as oracle:
        session = Session(oracle, SessionKind.NON_INTERACTIVE, deadline_s=10)
        pending = asyncio.ensure_future(session.round([Request.of(range(400), rr(0.5))]))
        await asyncio.sleep(0.3)
        with pytest.raises(LDPError, match="in flight"):
            await load(oracle, population(n=500), timeout_s=10)
        (reports,) = await pending
        assert reports.counts()["answered"] == 400  # the round was not disturbed
        with pytest.raises(ParameterError, match="leaves shard 0/2 with no users"):
            await load(oracle, population(n=1), timeout_s=10)
        assert oracle.user_count == 400  # nothing changed: the old population still answers
        (again,) = await Session(oracle, SessionKind.NON_INTERACTIVE).round([Request.of(range(400), rr(0.25))])
        assert again.counts()["answered"] == 400


async def test_a_stopped_client_is_named_at_the_load_deadline_and_a_dead_one_at_once() -> None:
    async with launch_local(population(n=300), processes=2, seal_key=KEY) as oracle:
        stopped = oracle.clients[1].process
        os.kill(stopped.pid, signal.SIGSTOP)
        try:
            with pytest.raises(LDPError, match=r"shard 1/2 did not confirm within 1 s"):
                await load(oracle, population(n=600), timeout_s=1.0)
            assert [s.key for s in oracle.shards] == ["0/2"]  # the other one holds the new population
        finally:
            os.kill(stopped.pid, signal.SIGCONT)
        await load(oracle, population(n=700), timeout_s=30)  # the late Ready of the failed load is discarded
        assert oracle.user_count == 700
        (reports,) = await Session(oracle, SessionKind.NON_INTERACTIVE).round([Request.of(range(700), rr(0.5))])
        assert reports.counts()["answered"] == 700
        oracle.clients[1].process.kill()
        oracle.clients[1].process.wait()
        with pytest.raises(LDPError, match=r"1/2"):
            await load(oracle, population(n=800), timeout_s=10)


async def test_the_factory_reuses_one_cluster_and_stops_it_on_exit() -> None:
    sizes = [50, 300, 120]
    seen = []
    async with grpc_oracle_factory(2) as factory:
        for n in sizes:
            spec = population(n=n, seed=n)
            async with factory(spec) as oracle:
                (reports,) = await Session(oracle, SessionKind.NON_INTERACTIVE).round([Request.of(range(n), rr(0.5))])
                ref = await Session(InProcessLROracle(spec), SessionKind.NON_INTERACTIVE).round([Request.of(range(n), rr(0.5))])
                assert reports.values.tobytes() == ref[0].values.tobytes()
                seen.append(oracle)
        assert factory.populations == 3 and len({id(o) for o in seen}) == 1
        clients = seen[0].clients
        with pytest.raises(ParameterError, match="one population at a time"):
            async with factory(population(n=60)):
                async with factory(population(n=70)):
                    pass
    assert all(c.process.poll() is not None for c in clients)
    with pytest.raises(LDPError, match="shut down"):
        async with factory(population(n=60)):
            pass


async def test_an_error_inside_the_factory_stops_every_client() -> None:
    clients = []
    with pytest.raises(RuntimeError, match="boom"):
        async with grpc_oracle_factory(2) as factory:
            async with factory(population(n=100)) as oracle:
                clients = oracle.clients
            async with factory(population(n=200)):
                raise RuntimeError("boom")
    assert len(clients) == 2 and all(c.process.poll() is not None for c in clients)


async def test_separation_is_identical_in_process_and_over_grpc(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ldp.simulations.separation import Config, run

    config = Config(
        trials=2, cap=4096, resolution=2.0, masked_d=(2, 4), learners=("LI", "LNI"), curve_d=2, curve_users=(256, 1024), curve_trials=2, point_bits=(), out=None
    )
    in_process = await run(config)
    async with grpc_oracle_factory(2) as factory:
        over_grpc = await run(config, factory)
        assert factory.populations > 20  # one per trial: the cluster was reused, not relaunched
    assert over_grpc["table"] == in_process["table"]
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    assert strip(over_grpc["rows"]) == strip(in_process["rows"]) and over_grpc["curves"] == in_process["curves"]
    assert np.isfinite([r["mean_error"] for r in over_grpc["rows"]]).all()
