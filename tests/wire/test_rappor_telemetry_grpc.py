"""``rappor``, ``dbitflip_pm`` and ``alpha_one_bit_mean`` over gRPC: bit-identical to in process
(reports, refusals, ledgers), with the memo on the clients' side, and the untrusted aggregator
checks their formats before it keeps a client's answer (issue 26)."""

from __future__ import annotations

import numpy as np
import pytest

from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import SessionKind, Status
from ldp.local.oracle import InProcessLROracle, LROracle
from ldp.local.session import Request, Session
from ldp.wire.codec import Expected, ReplyCheck, report_format
from ldp.wire.launcher import launch_local
from ldp.wire.v1 import aggregator_pb2 as pb
from tests.local.test_memoized_rappor_telemetry import OTHER, PREFIX
from tests.waits import PROCESS_WAIT_S
from tests.wire.wire_helpers import Outcome, assert_identical, ledger_of, population

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

RAPPOR = RandomizerSpec("rappor", PREFIX, 0.5, {"k": 20, "h": 2, "m": 300})  # 3 IRR bytes (4 padding bits), 2 cohort bytes
DBITFLIP = RandomizerSpec("dbitflip_pm", PREFIX, 0.5, {"d": 3})  # 3 × 2 bucket bytes, 1 bit byte
ALPHA = RandomizerSpec("alpha_one_bit_mean", PREFIX, 0.25, {"s": 4})


async def _script(oracle: LROracle) -> Outcome:
    """Each kind asked twice (the second time at the minimum charge), then a new question that
    the users without its ε left are refused."""
    n = oracle.user_count
    out = []
    for _ in range(2):
        s = Session(oracle, SessionKind.INTERACTIVE, name="memoized")
        out += await s.round([Request.of(range(0, n // 2), RAPPOR), Request.of(range(n // 2, n), DBITFLIP)])
        out += await s.round([Request.of(np.arange(0, n, 3)[::-1], ALPHA)])
    # spent ≈ 0.75 by every third user, ≈ 0.5 by the others: a question at 0.4 refuses the first
    out += await Session(oracle, SessionKind.NON_INTERACTIVE, name="new question").round([Request.of(range(n), RandomizerSpec("rappor", OTHER, 0.4))])
    return Outcome(out, await ledger_of(oracle))


async def test_rappor_and_telemetry_reports_over_grpc_are_bit_identical_to_in_process() -> None:
    spec = population(n=1201, budget=1.0)
    reference = await _script(InProcessLROracle(spec))
    last = reference.reports[-1].status
    assert (last == Status.REFUSED).any() and (last == Status.ANSWERED).any()
    assert not np.array_equal(reference.reports[0].values, reference.reports[3].values)  # RAPPOR: a fresh IRR
    assert np.array_equal(reference.reports[1].values, reference.reports[4].values)  # dBitFlipPM: the memoized report
    async with launch_local(spec, processes=2) as oracle:
        assert_identical(reference, await _script(oracle))


def _check(spec: RandomizerSpec, values: np.ndarray) -> str:
    """The aggregator's failures for one shard's reply carrying ``values`` (as test_memoized_grpc's)."""
    users = len(values)
    result = pb.Result(
        request_id=7, user_count=users, refused=np.packbits(np.zeros(users, dtype=bool)).tobytes(), dtype=values.dtype.newbyteorder("<").str,
        width=values.shape[1] if values.ndim == 2 else 0, values=values.tobytes(),
    )
    check = ReplyCheck("c0", 1, 1, [Expected(7, users, report_format(spec, population(n=10).concept_class.schema))])
    check.add(pb.RoundReply(session_id=1, round=1, results=[result]))
    return "; ".join(check.failures)


def test_the_aggregator_checks_the_report_formats() -> None:
    """Honest rows pass; broken variants are refused: a RAPPOR padding bit set or a cohort ≥ m,
    a dBitFlip bucket ≥ k or a padding bit set, a 1BitMean report of 2."""
    rap = np.array([[0xFF, 0xFF, 0xF0, 1, 43], [0, 0, 0, 0, 0]], dtype=np.uint8)  # cohort 299
    assert _check(RAPPOR, rap) == ""
    assert _check(RAPPOR, np.array([[0, 0, 0x01, 0, 0]], dtype=np.uint8)) != ""  # padding
    assert _check(RAPPOR, np.array([[0, 0, 0, 2, 0]], dtype=np.uint8)) != ""  # cohort 512
    dbf = np.array([[0, 12, 0, 0, 0, 5, 0b10100000]], dtype=np.uint8)
    assert _check(DBITFLIP, dbf) == ""
    assert _check(DBITFLIP, np.array([[0, 13, 0, 0, 0, 5, 0]], dtype=np.uint8)) != ""  # bucket 13 of 13
    assert _check(DBITFLIP, np.array([[0, 1, 0, 0, 0, 5, 0b00010000]], dtype=np.uint8)) != ""  # padding
    assert _check(ALPHA, np.array([0, 1, 1], dtype=np.uint8)) == ""
    assert "outside" in _check(ALPHA, np.array([0, 2], dtype=np.uint8))
