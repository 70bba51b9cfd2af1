"""Apple's sketches (``cms``, ``hcms``) over gRPC: bit-identical to in process (reports, refusals,
ledgers), and the untrusted aggregator keeps only reports of the declared format (issue 26)."""

from __future__ import annotations

import numpy as np
import pytest

from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import SessionKind, Status
from ldp.local.oracle import InProcessLROracle, LROracle
from ldp.local.session import Request, Session
from ldp.wire.launcher import launch_local
from tests.local.test_memoized_reports import PREFIX
from tests.waits import PROCESS_WAIT_S
from tests.wire.wire_helpers import Outcome, assert_identical, ledger_of, population

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds


async def _script(oracle: LROracle) -> Outcome:
    n = oracle.user_count
    s = Session(oracle, SessionKind.INTERACTIVE, name="sketches")
    params = {"hashes": 16, "width": 64, "hash_seed": 7}
    out = await s.round([Request.of(range(0, n // 2), RandomizerSpec("cms", PREFIX, 0.5, params)), Request.of(range(n // 2, n), RandomizerSpec("hcms", PREFIX, 0.5, params))])
    out += await s.round([Request.of(range(n), RandomizerSpec("cms", PREFIX, 0.75, params))])  # 1.25 > 1: refused
    return Outcome(out, await ledger_of(oracle))


async def test_sketches_over_grpc_are_bit_identical_to_in_process() -> None:
    spec = population(n=801, budget=1.0)
    reference = await _script(InProcessLROracle(spec))
    assert (reference.reports[0].status == Status.ANSWERED).all() and (reference.reports[-1].status == Status.REFUSED).all()
    assert all(len(r.values) for r in reference.reports[:2])
    async with launch_local(spec, processes=2) as oracle:
        assert_identical(reference, await _script(oracle))
    assert np.asarray(reference.ledger).max() > 0
