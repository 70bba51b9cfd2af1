"""The kind ``l_adp`` (L-ADP: L-GRR or L-OSUE by the smaller approximate variance) over gRPC:
bit-identical to in process (reports, refusals, ledgers), as tests/wire/test_memoized_grpc.py
checks for the kinds it resolves to (issue 26)."""

from __future__ import annotations

import numpy as np
import pytest

from ldp.core.longitudinal import choose_longitudinal
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import SessionKind, Status
from ldp.local.oracle import InProcessLROracle, LROracle
from ldp.local.session import Request, Session
from ldp.wire.launcher import launch_local
from tests.local.test_memoized_reports import OTHER, PREFIX
from tests.waits import PROCESS_WAIT_S
from tests.wire.wire_helpers import Outcome, assert_identical, ledger_of, population

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds


async def _script(oracle: LROracle) -> Outcome:
    """Two rounds of l_adp choosing L-OSUE (ε∞ = 0.5, k = 13) and L-GRR (ε∞ = 4, k = 9) on two
    halves, the second a memoized repeat; then a new question that the ε∞ = 4 users cannot pay."""
    n = oracle.user_count
    out = []
    for _ in range(2):
        s = Session(oracle, SessionKind.INTERACTIVE, name="l_adp")
        out += await s.round(
            [
                Request.of(range(0, n // 2), RandomizerSpec("l_adp", PREFIX, 0.5, {"epsilon_1": 0.25})),
                Request.of(np.arange(n // 2, n)[::-1], RandomizerSpec("l_adp", OTHER, 4.0, {"epsilon_1": 2.0})),
            ]
        )
    out += await Session(oracle, SessionKind.NON_INTERACTIVE, name="new question").round([Request.of(range(n), RandomizerSpec("l_adp", OTHER, 1.0, {}))])
    return Outcome(out, await ledger_of(oracle))


async def test_l_adp_over_grpc_is_bit_identical_to_in_process() -> None:
    assert (choose_longitudinal(13, 0.5, 0.25), choose_longitudinal(9, 4.0, 2.0)) == ("l_osue", "l_grr")  # PREFIX: 13 values, OTHER: 9
    spec = population(n=801, budget=4.5)
    reference = await _script(InProcessLROracle(spec))
    last = reference.reports[-1].status
    assert (last == Status.REFUSED).any() and (last == Status.ANSWERED).any()
    async with launch_local(spec, processes=2) as oracle:
        assert_identical(reference, await _script(oracle))
