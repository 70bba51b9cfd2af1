"""``grpc_oracle_factory(..., lanes=L)``: up to L populations at once, one cluster each.

Deterministic checks (no statistics): two populations served at once give the reports a fresh
in-process oracle gives each; a third at once is refused with a clear error; the first cluster
is reused whenever it is free, the second starts only when two are in use; every cluster stops
when the factory's block ends. The broken variant (lanes = 1) refuses the second population.
"""

from __future__ import annotations

import pytest

from ldp.core.errors import ParameterError
from ldp.local.messages import SessionKind
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session
from ldp.wire.launcher import grpc_oracle_factory
from tests.wire.wire_helpers import population, rr


async def _answer(oracle, n: int) -> bytes:  # type: ignore[no-untyped-def]
    (reports,) = await Session(oracle, SessionKind.NON_INTERACTIVE).round([Request.of(range(n), rr(0.5))])
    return reports.values.tobytes()


async def test_two_lanes_serve_two_populations_at_once_and_stop_together() -> None:
    first, second = population(n=120, seed=1), population(n=90, seed=2)
    async with grpc_oracle_factory(1, lanes=2) as factory:
        async with factory(population(n=50, seed=3)) as oracle:
            await _answer(oracle, 50)
        assert factory.clusters == 1  # one at a time so far: one cluster
        async with factory(first) as a, factory(second) as b:
            assert a is not b and factory.serving == 2 and factory.clusters == 2
            assert await _answer(a, 120) == await _answer(InProcessLROracle(first), 120)
            assert await _answer(b, 90) == await _answer(InProcessLROracle(second), 90)
            with pytest.raises(ParameterError, match="at most lanes = 2"):
                async with factory(population(n=60)):
                    pass
        async with factory(population(n=40, seed=4)) as again:
            assert again is a  # the first cluster is used whenever it is free
        assert factory.populations == 4
        clients = [*a.clients, *b.clients]
    assert all(c.process.poll() is not None for c in clients)


async def test_one_lane_serves_one_population_at_a_time() -> None:
    async with grpc_oracle_factory(1) as factory:
        assert factory.lanes == 1
        with pytest.raises(ParameterError, match="one population at a time"):
            async with factory(population(n=60)):
                async with factory(population(n=70)):
                    pass
    with pytest.raises(ParameterError, match="lanes"):
        async with grpc_oracle_factory(1, lanes=0):
            pass
