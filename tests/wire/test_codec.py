"""Encoding rounds as protobuf parts and back loses nothing, and parts stay under the limit."""

from __future__ import annotations

import numpy as np
import pytest

from ldp.core.errors import ParameterError
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import Assignment, Result, RoundReply, RoundRequest, SessionKind, Users
from ldp.wire import codec
from ldp.wire.v1 import aggregator_pb2 as pb
from tests.wire.wire_helpers import BIT0, rr

pytestmark = pytest.mark.timeout(60)


def _reply(rng: np.random.Generator) -> RoundReply:
    refused = rng.random(1001) < 0.3
    k = int((~refused).sum())
    return RoundReply(
        7,
        3,
        (
            Result(1, rng.integers(0, 2, k).astype(np.uint8), refused),
            Result(2, rng.normal(size=k), refused),
            Result(3, rng.integers(-3, 3, (k, 5)).astype(np.int16), refused),
            Result(4, np.zeros(0), np.ones(4, dtype=bool), error="unknown query kind 'nope'"),
            Result(5, np.array([np.nan, -0.0, np.inf]), np.zeros(3, dtype=bool)),
        ),
    )


@pytest.mark.parametrize("chunk", [codec.CHUNK_BYTES, 256, 9])
def test_reply_round_trip_is_exact(chunk: int) -> None:
    reply = _reply(np.random.default_rng(1))
    parts = codec.encode_reply(reply, chunk_bytes=chunk)
    assert parts[-1].reply.final and not any(p.reply.final for p in parts[:-1])
    if chunk < 1000:
        assert len(parts) > 3
        assert max(len(r.values) for p in parts for r in p.reply.results) <= max(chunk, 10)
    back = codec.decode_reply([pb.ClientMessage.FromString(p.SerializeToString()).reply for p in parts])
    assert (back.session_id, back.round, back.error) == (7, 3, "")
    for a, b in zip(reply.results, back.results, strict=True):
        assert a.request_id == b.request_id and a.error == b.error
        assert a.values.dtype == b.values.dtype and a.values.shape == b.values.shape
        assert a.values.tobytes() == b.values.tobytes()
        np.testing.assert_array_equal(a.refused, b.refused)
        assert b.values.flags.writeable


@pytest.mark.parametrize("chunk", [codec.CHUNK_BYTES, 80])
def test_request_round_trip_is_exact(chunk: int) -> None:
    ids = np.array([5, 3, 99, 1 << 40, 0, 17, 18, 19, 20, 21, 22, 23], dtype=np.int64)
    request = RoundRequest(
        3,
        SessionKind.INTERACTIVE,
        2,
        (Assignment(10, Users.range(4, 1000), rr(0.5)), Assignment(11, Users.of(ids), RandomizerSpec.unchecked("laplace", BIT0, float("nan")))),
        last_round=True,
        deadline_s=2.5,
    )
    parts = codec.encode_request(request, chunk_bytes=chunk)
    back = codec.decode_request([pb.ServerMessage.FromString(p.SerializeToString()).round for p in parts])
    assert (back.session_id, back.session_kind, back.round, back.last_round, back.deadline_s) == (3, 2, 2, True, 2.5)
    assert back.assignments[0] == request.assignments[0]
    np.testing.assert_array_equal(back.assignments[1].users.array(), ids)
    assert np.isnan(back.assignments[1].randomizer.epsilon)
    assert back.assignments[1].randomizer.kind == "laplace"


def test_a_large_reply_is_split_under_the_grpc_default_limit() -> None:
    # 6·10^5 float64 reports = 4.8 MB > 4 MiB: must travel as several parts of ≤ ~2 MiB.
    n = 600_000
    reply = RoundReply(1, 0, (Result(1, np.arange(n, dtype=np.float64), np.zeros(n, dtype=bool)),))
    parts = codec.encode_reply(reply)
    assert len(parts) >= 3
    assert max(p.ByteSize() for p in parts) < 4 << 20
    assert codec.decode_reply([p.reply for p in parts]).results[0].values.tobytes() == reply.results[0].values.tobytes()


def test_bad_dtype_and_truncated_data_are_rejected() -> None:
    bad = pb.RoundReply(session_id=1, round=0, final=True, results=[pb.Result(request_id=1, user_count=1, refused=b"\x00", dtype="|O", values=b"")])
    with pytest.raises(ParameterError, match="dtype"):
        codec.decode_reply([bad])
    short = pb.RoundReply(session_id=1, round=0, final=True, results=[pb.Result(request_id=1, user_count=2, refused=b"\x00", dtype="<f8", values=b"123")])
    with pytest.raises(ParameterError, match="whole rows"):
        codec.decode_reply([short])
