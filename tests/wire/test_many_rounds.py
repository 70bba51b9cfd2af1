"""Regression: many short rounds in a row over gRPC are all answered, bit-identical to in process.

A reply can arrive before the aggregator's last ``write()`` coroutine has returned; cancelling
that write used to break the stream (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS) and every later round
came back MISSING. Found by running lab 1 the classroom way.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldp.core.population import PopulationSpec, generate_records
from ldp.local.messages import SessionKind, Status, Users
from ldp.local.oracle import InProcessLROracle, LROracle
from ldp.local.session import Request, Session
from ldp.wire.launcher import launch_local
from tests.wire.wire_helpers import population, rr

ROUNDS = 40


async def many_rounds(oracle: LROracle, n: int, spec: PopulationSpec) -> list[np.ndarray]:
    out = []
    width = n // ROUNDS
    for k in range(ROUNDS):
        session = Session(oracle, SessionKind.NON_INTERACTIVE, deadline_s=10)
        (rep,) = await session.round([Request(Users.range(k * width, (k + 1) * width), rr(0.5))])
        assert (rep.status == Status.ANSWERED).all(), (k, rep.counts(), rep.errors)
        out.append(rep.values)
        generate_records(spec, 0, width)  # the loop is busy between rounds, as in lab 1
    return out


@pytest.mark.timeout(120)
async def test_forty_sequential_rounds_over_grpc() -> None:
    spec = population(n=ROUNDS * 20_000, budget=2.0)
    expected = await many_rounds(InProcessLROracle(spec), spec.size, spec)
    async with launch_local(spec, processes=2) as oracle:
        got = await many_rounds(oracle, spec.size, spec)
    assert all(np.array_equal(a, b) for a, b in zip(expected, got))
