"""Memoized (longitudinal) reports over gRPC: bit-identical to in process (reports, refusals,
ledgers), with the memo on the client's side, and the untrusted aggregator checks their formats
(category values for ``l_grr``, packed-bit rows with zero padding for the unary ones) before it
keeps a client's answer (issue 26)."""

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
from tests.local.test_memoized_reports import OTHER, PREFIX
from tests.waits import PROCESS_WAIT_S
from tests.wire.wire_helpers import Outcome, assert_identical, ledger_of, population

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds


def _spec(kind: str, eps_inf: float, query=PREFIX, **params: object) -> RandomizerSpec:  # type: ignore[no-untyped-def]
    return RandomizerSpec(kind, query, eps_inf, params)


async def _script(oracle: LROracle) -> Outcome:
    """Four rounds of the four kinds, two of them asked again (memoized: the minimum charge),
    then a new question that users without ε∞ left are refused."""
    n = oracle.user_count
    out = []
    for _ in range(2):
        s = Session(oracle, SessionKind.INTERACTIVE, name="memoized")
        out += await s.round(
            [
                Request.of(range(0, n // 2), _spec("l_grr", 0.5, epsilon_1=0.25)),
                Request.of(range(n // 2, n), _spec("l_oue", 0.5, epsilon_1=0.25, calibration="tight")),
            ]
        )
        out += await s.round([Request.of(np.arange(0, n, 3)[::-1], _spec("l_osue", 0.25)), Request.of(np.arange(1, n, 3), _spec("l_sue", 0.25))])
    # spent ≈ 0.75 by the users asked l_osue or l_sue, ≈ 0.5 by the others: a new question at
    # ε∞ = 0.4 refuses the first, answers the others
    out += await Session(oracle, SessionKind.NON_INTERACTIVE, name="new question").round([Request.of(range(n), _spec("l_grr", 0.4, OTHER))])
    return Outcome(out, await ledger_of(oracle))


async def test_memoized_reports_over_grpc_are_bit_identical_to_in_process() -> None:
    spec = population(n=1201, budget=1.0)
    reference = await _script(InProcessLROracle(spec))
    statuses = np.concatenate([r.status for r in reference.reports[-1:]])
    assert (statuses == Status.REFUSED).any() and (statuses == Status.ANSWERED).any()
    assert not np.array_equal(reference.reports[0].values, reference.reports[4].values)  # a fresh IRR the second time
    async with launch_local(spec, processes=2) as oracle:
        assert_identical(reference, await _script(oracle))


def _result(values: np.ndarray, users: int) -> pb.Result:
    return pb.Result(
        request_id=7, user_count=users, refused=np.packbits(np.zeros(users, dtype=bool)).tobytes(), dtype=values.dtype.newbyteorder("<").str,
        width=values.shape[1] if values.ndim == 2 else 0, values=values.tobytes(),
    )


def _check(spec: RandomizerSpec, values: np.ndarray) -> str:
    schema = population(n=10).concept_class.schema
    check = ReplyCheck("c0", 1, 1, [Expected(7, len(values), report_format(spec, schema))])
    check.add(pb.RoundReply(session_id=1, round=1, results=[_result(values, len(values))]))
    return "; ".join(check.failures)


def test_the_aggregator_checks_memoized_report_formats() -> None:
    """13 categories: an l_grr report is one of them; an l_oue row is 2 bytes whose 3 padding bits
    are zero. Broken variants — a value outside the categories, a padding bit set — are refused."""
    assert _check(_spec("l_grr", 1.0), np.array([0.0, 12.0, 5.0])) == ""
    assert "outside" in _check(_spec("l_grr", 1.0), np.array([0.0, 13.0, 5.0]))
    honest = np.array([[0b10100000, 0b00000000], [0xFF, 0b11111000]], dtype=np.uint8)
    assert _check(_spec("l_oue", 1.0), honest) == ""
    assert _check(_spec("l_oue", 1.0), np.array([[0, 0b00000001]], dtype=np.uint8)) != ""
