"""Frequency oracles over gRPC: bit-identical to in process (reports, refusals, ledgers), and the
untrusted aggregator checks their report formats (packed-bit rows with zero padding, OLH rows of
hash words and a value, Hadamard indices) before it keeps a client's answer."""

from __future__ import annotations

import numpy as np
import pytest

from ldp.core.frequency_oracles import frequency_estimates, frequency_variance
from ldp.core.queries import QuerySpec
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import RandomSource
from ldp.local.messages import SessionKind, Status
from ldp.local.oracle import InProcessLROracle, LROracle
from ldp.local.session import Request, Session
from ldp.wire.codec import Expected, ReplyCheck, report_format
from ldp.wire.launcher import launch_local
from ldp.wire.v1 import aggregator_pb2 as pb
from tests.wire.wire_helpers import BIT0, Outcome, assert_identical, ledger_of, population

pytestmark = pytest.mark.timeout(120)

# 13 categories: which of 12 candidate 4-bit prefixes of x a user holds, or none of them
PREFIX = QuerySpec("prefix_index", {"field": "x", "length": 4, "candidates": list(range(12))})


def _spec(kind: str, eps: float, query: QuerySpec = PREFIX, **params: object) -> RandomizerSpec:
    return RandomizerSpec(kind, query, eps, params)


async def _script(oracle: LROracle) -> Outcome:
    n = oracle.user_count
    s = Session(oracle, SessionKind.INTERACTIVE, name="frequency oracles")
    out = await s.round(
        [
            Request.of(range(0, n // 2), _spec("oue", 0.25)),
            Request.of(range(n // 2, n), _spec("olh", 0.25)),
            Request.of(np.arange(0, n, 3)[::-1], _spec("hadamard_response", 0.25)),
        ]
    )
    out += await s.round(
        [
            Request.of(range(n), _spec("sue", 0.25)),
            Request.of(range(0, n, 2), _spec("adaptive_fo", 0.125, BIT0)),
            Request.of(range(1, n, 2), _spec("subset_selection", 0.125)),
        ]
    )
    # up to 0.25 + 0.25 + 0.25 + 0.125 spent of 1.0: asking 0.25 more refuses the users asked four times
    out += await s.round([Request.of(range(n), _spec("adaptive_fo", 0.25, prefer="oue"))])
    return Outcome(out, await ledger_of(oracle))


async def test_frequency_oracles_over_grpc_are_bit_identical_to_in_process() -> None:
    spec = population(n=2001, budget=1.0)
    reference = await _script(InProcessLROracle(spec))
    statuses = np.concatenate([r.status for r in reference.reports])
    assert (statuses == Status.REFUSED).any() and (statuses == Status.ANSWERED).any()
    assert {r.values.dtype.str for r in reference.reports} >= {"|u1", "<u2", "<u4"}
    assert any(r.values.ndim == 2 for r in reference.reports)
    async with launch_local(spec, processes=2) as oracle:
        assert_identical(reference, await _script(oracle))
    # the aggregator estimates from what it received, with the oracle the users built
    schema = spec.concept_class.schema
    for reports in reference.reports[:3]:
        local = LocalRandomizer.build(reports.randomizer, schema)
        est = frequency_estimates(local.randomizer, reports.values)
        # Σ f̂ has mean 1 and variance ≤ 13² × the largest per-value variance: 6 sd (false alarm < 10^-8)
        sd = 13 * float(np.sqrt(frequency_variance(local.randomizer, 0.5, len(reports.values))))
        assert est.shape == (13,) and abs(est.sum() - 1.0) < 6 * sd


def _result(values: np.ndarray, users: int) -> pb.Result:
    return pb.Result(request_id=7, user_count=users, refused=np.packbits(np.zeros(users, dtype=bool)).tobytes(), dtype=values.dtype.newbyteorder("<").str, width=values.shape[1] if values.ndim == 2 else 0, values=values.tobytes())


def _check(spec: RandomizerSpec, values: np.ndarray) -> str:
    schema = population(n=10).concept_class.schema
    check = ReplyCheck("c0", 1, 1, [Expected(7, len(values), report_format(spec, schema))])
    check.add(pb.RoundReply(session_id=1, round=1, results=[_result(values, len(values))]))
    result = check.finish().results[0]
    return result.error


def test_the_aggregator_checks_frequency_oracle_report_formats() -> None:
    schema = population(n=10).concept_class.schema
    honest = {}
    for kind in ("oue", "olh", "hadamard_response"):
        local = LocalRandomizer.build(_spec(kind, 1.0), schema)
        records = np.zeros((5, schema.width), dtype=np.int16)
        honest[kind] = local.apply(records, RandomSource(0).for_request("f", 0, np.arange(5)))
        assert _check(_spec(kind, 1.0), honest[kind]) == "", kind
    padded = honest["oue"].copy()
    padded[0, -1] |= 1  # 13 bits in 2 bytes: the last 3 bits are padding and must be zero
    assert "outside oue's output domain" in _check(_spec("oue", 1.0), padded)
    assert "width" in _check(_spec("oue", 1.0), honest["oue"][:, :1].copy())
    olh = honest["olh"].copy()
    olh[1, -1] = 1000  # y outside [g]
    assert "outside olh's output domain" in _check(_spec("olh", 1.0), olh)
    olh = honest["olh"].copy()
    olh[2, 0] = 16  # a hash row wider than m = 4 bits
    assert "outside olh's output domain" in _check(_spec("olh", 1.0), olh)
    hr = honest["hadamard_response"].copy()
    hr[3] = 16  # K = 16 for k = 13
    assert "outside hadamard_response's output domain" in _check(_spec("hadamard_response", 1.0), hr)


def test_the_aggregator_refuses_a_subset_selection_report_that_is_not_a_d_subset() -> None:
    """Every Subset Selection report names exactly d categories: a row with one member more or
    one fewer is outside its output domain, even when every byte on its own is allowed."""
    schema = population(n=10).concept_class.schema
    spec = _spec("subset_selection", 1.0)
    local = LocalRandomizer.build(spec, schema)
    d = local.randomizer.subset_size  # type: ignore[attr-defined]
    honest = local.apply(np.zeros((5, schema.width), dtype=np.int16), RandomSource(0).for_request("f", 0, np.arange(5)))
    assert _check(spec, honest) == ""
    assert (np.bitwise_count(honest).sum(axis=1) == d).all()
    for row, change in ((0, "add"), (4, "drop")):
        forged = honest.copy()
        bits = np.unpackbits(forged[row])
        at = np.flatnonzero(bits == (0 if change == "add" else 1))[0]
        bits[at] ^= 1
        forged[row] = np.packbits(bits)[: forged.shape[1]]
        members = d + 1 if change == "add" else d - 1
        assert f"sent a report with {members} categories, where subset_selection reports name exactly {d} for request" in _check(spec, forged)
