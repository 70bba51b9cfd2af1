"""Same seed, same program: bit-identical reports, refusals and ledgers in process and over
gRPC with 1 and 3 client processes (docs/design.md §2 "one LR-oracle interface, many transports")."""

from __future__ import annotations

import numpy as np
import pytest

from ldp.local.messages import Status
from ldp.local.oracle import InProcessLROracle
from ldp.wire.launcher import launch_local
from tests.wire.wire_helpers import assert_identical, population, scripted_sessions

pytestmark = pytest.mark.timeout(90)


async def test_inprocess_and_grpc_are_bit_identical() -> None:
    spec = population(n=3001)
    reference = await scripted_sessions(InProcessLROracle(spec))
    # The script really exercises refusals, several dtypes and a 2-D report matrix.
    statuses = np.concatenate([r.status for r in reference.reports])
    assert (statuses == Status.REFUSED).any() and (statuses == Status.ANSWERED).any()
    assert {r.values.dtype.str for r in reference.reports} >= {"|u1", "<f8", "<i2"}
    assert reference.ledger.any()
    for processes in (1, 3):
        async with launch_local(spec, processes=processes) as oracle:
            assert len(oracle.shards) == processes
            assert_identical(reference, await scripted_sessions(oracle))
