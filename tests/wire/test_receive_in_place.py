"""The aggregator receives a range round's reply parts into the request's final array (issue 27).

Each reply part is checked, then copied once into the rows of the final array that belong to its
shard (``Assignment.into``, ``codec.Expected.into``); where every user answered, that array is
the round's reports, with no join of parts and no concatenation of shards
(``ldp.local.oracle._Assembly._in_place``). Checked here:
- part by part, the rows land in order, the result is a view of them, and a bad part still makes
  its request an error (nothing raises), whatever was copied before it;
- over gRPC with 1 and 3 client processes, rounds in which everyone answered are assembled in
  place (``_merge_values``, the concatenation, is never called for them), rounds with refusals
  are concatenated, and both are bit-identical to in process;
- an ``into`` of the wrong shape or dtype is not used (the parts are joined as before).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ldp.local.oracle as oracle_module
from ldp.core.randomizers import QuerySpec
from ldp.local.messages import Assignment, SessionKind, Users
from ldp.local.oracle import InProcessLROracle, LROracle, Reports
from ldp.local.session import Request, Session
from ldp.wire.codec import Expected, ReplyCheck, report_format
from ldp.wire.launcher import launch_local
from ldp.wire.rounds import _destination
from ldp.wire.v1 import aggregator_pb2 as pb
from tests.wire.wire_helpers import population, rr

pytestmark = pytest.mark.timeout(120)


def _part(values: np.ndarray, refused: np.ndarray, final: bool = False) -> pb.RoundReply:
    result = pb.Result(
        request_id=7,
        user_count=len(refused),
        refused=np.packbits(refused).tobytes(),
        dtype=values.dtype.newbyteorder("<").str,
        width=values.shape[1] if values.ndim == 2 else 0,
        values=values.tobytes(),
    )
    return pb.RoundReply(session_id=1, round=1, results=[result], final=final)


def test_parts_are_copied_into_their_rows_and_a_bad_part_is_still_an_error() -> None:
    schema = population(n=10).concept_class.schema
    spec = rr(1.0)
    fmt = report_format(spec, schema)
    assert fmt.dtype is not None
    rng = np.random.default_rng(3)
    chunks = [rng.integers(0, 2, m).astype(np.uint8) for m in (5, 8, 3)]
    into = np.full(16, 9, dtype=np.uint8)
    check = ReplyCheck("c0", 1, 1, [Expected(7, 16, fmt, into)])
    for i, c in enumerate(chunks):
        assert check.add(_part(c, np.zeros(len(c), dtype=bool), final=i == 2)) == ""
    (result,) = check.finish().results
    assert result.error == "" and np.array_equal(result.values, np.concatenate(chunks))
    assert np.shares_memory(result.values, into) and result.values.__array_interface__["data"][0] == into.__array_interface__["data"][0]
    # a refusal: its row is not filled, the answered ones come first
    into = np.full(4, 9, dtype=np.uint8)
    check = ReplyCheck("c0", 1, 1, [Expected(7, 4, fmt, into)])
    check.add(_part(np.array([1, 0, 1], dtype=np.uint8), np.array([False, True, False, False]), final=True))
    (result,) = check.finish().results
    assert result.values.tolist() == [1, 0, 1] and result.refused.tolist() == [False, True, False, False]
    # a part with a report outside the randomizer's domain, after a good one: the request is an error
    into = np.zeros(6, dtype=np.uint8)
    check = ReplyCheck("c0", 1, 1, [Expected(7, 6, fmt, into)])
    check.add(_part(np.array([1, 0, 1], dtype=np.uint8), np.zeros(3, dtype=bool)))
    check.add(_part(np.array([0, 7, 1], dtype=np.uint8), np.zeros(3, dtype=bool), final=True))
    (result,) = check.finish().results
    assert "outside binary_rr's output domain" in result.error and len(result.values) == 0


def test_an_unfit_destination_is_not_used() -> None:
    schema = population(n=10).concept_class.schema
    fmt = report_format(rr(1.0), schema)
    users = Users.range(0, 8)
    good = np.empty(8, dtype=np.uint8)
    assert _destination(Assignment(7, users, rr(1.0), into=good), fmt) is good
    assert _destination(Assignment(7, users, rr(1.0), into=np.empty(7, dtype=np.uint8)), fmt) is None  # one row short
    assert _destination(Assignment(7, users, rr(1.0), into=np.empty(8, dtype=np.float64)), fmt) is None  # another dtype
    frozen = np.empty(8, dtype=np.uint8)
    frozen.flags.writeable = False
    assert _destination(Assignment(7, users, rr(1.0), into=frozen), fmt) is None
    assert _destination(Assignment(7, users, rr(1.0)), fmt) is None


async def _rounds(oracle: LROracle) -> list[Reports]:
    """Rounds over ranges of users: ε 0.4 twice (everyone answers), then 0.4 again (budget 1.0:
    everyone refuses) beside 0.1 (everyone answers), then 2-D rows (``record_rr``) for most users."""
    session = Session(oracle, SessionKind.INTERACTIVE)
    n = oracle.user_count
    out: list[Reports] = []
    for eps in (0.4, 0.4):
        out += await session.round([Request.of(range(n), rr(eps))])
    out += await session.round([Request.of(range(n), rr(0.4)), Request.of(range(n), rr(0.1))])
    out += await session.round([Request.of(range(7, n - 5), rr(0.01, QuerySpec("record"), "record_rr"))])
    return out


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real: Callable[..., Any] = oracle_module._merge_values

    def merge(pieces: list[tuple[int, np.ndarray, np.ndarray]], ranged: bool) -> np.ndarray:
        calls.append(len(pieces))
        return real(pieces, ranged)

    monkeypatch.setattr(oracle_module, "_merge_values", merge)
    return calls


@pytest.mark.parametrize("processes", [1, 3])
async def test_grpc_rounds_are_assembled_in_place_and_identical(processes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = population(n=4001, budget=1.0)
    reference = await _rounds(InProcessLROracle(spec, shards=processes))
    assert [r.counts()["refused"] for r in reference] == [0, 0, 4001, 0, 0]
    calls = _spy(monkeypatch)
    async with launch_local(spec, processes=processes) as oracle:
        got = await _rounds(oracle)
    for a, b in zip(reference, got, strict=True):
        assert np.array_equal(a.status, b.status) and a.values.dtype == b.values.dtype and a.values.tobytes() == b.values.tobytes()
    assert got[-1].values.ndim == 2
    # everyone answered in rounds 1 and 2, the 0.1 request and the rows: in place, no merge; the
    # request everyone refused is merged from its shards' empty pieces
    assert calls == [processes], calls
