"""Conversion between ``ldp.local.messages`` and the protobuf messages of ``ldp.wire.v1``.

What: encode a ``RoundRequest``/``RoundReply`` into a list of protobuf *parts*, each at most
about ``chunk_bytes`` of bulk data, and decode a list of parts back into exactly the same
transport-neutral object (same user ids, same report bytes and dtype, same refusal mask).
Guarantee: ``decode_reply(encode_reply(r))`` equals ``r`` field for field, arrays bit-identical
(tests/wire/test_codec.py). Bulk arrays travel as packed little-endian bytes, refusals as
``np.packbits`` bitmaps (docs/design.md §3: one message per report is ~10^4× slower).
Source: docs/design.md §3; proto/ldp/wire/v1/aggregator.proto.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from ldp.core.errors import ParameterError
from ldp.core.queries import QuerySpec
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import Assignment, Result, RoundReply, RoundRequest, Users
from ldp.wire.v1 import aggregator_pb2 as pb

__all__ = [
    "PROTOCOL_VERSION",
    "CHUNK_BYTES",
    "MAX_MESSAGE_BYTES",
    "channel_options",
    "encode_request",
    "decode_request",
    "encode_reply",
    "decode_reply",
    "encode_ledger",
    "decode_ledger",
]

# 2: Load/Ready{load_id} (a new population for connected clients). A version-1 client would
# ignore Load and leave the aggregator waiting, so the versions are told apart at Hello.
# 3: the users' side holds the trust: Welcome carries no population, Load a sealed one, Ready the
# client's public description. A version-2 client would wait for a spec that never comes.
PROTOCOL_VERSION = 3

# Bulk bytes per message part. Why 2 MiB: well under gRPC's 4 MiB default, and large enough that
# per-message overhead (~50 µs) is negligible against copying 2 MiB (docs/design.md §3).
CHUNK_BYTES = 2 << 20
# Both ends raise the limits explicitly anyway, so a slightly oversized part (headers, a huge
# record_rr row) never kills a stream.
MAX_MESSAGE_BYTES = 64 << 20

# Report dtypes a receiver accepts: numpy dtype.str of little-endian, fixed-size numbers only.
_ALLOWED_DTYPES = frozenset({"|u1", "|i1", "|b1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f4", "<f8"})


def channel_options() -> list[tuple[str, Any]]:
    """gRPC options for both server and channels: size limits raised explicitly (docs/design.md §3),
    keepalive left off (loopback clients pinging are cut off with too_many_pings)."""
    return [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ]


# --- arrays ---


def _le(values: np.ndarray) -> np.ndarray:
    """The same numbers with an explicit little-endian dtype (a no-op on x86/ARM)."""
    dt = values.dtype
    if dt.byteorder == ">" or (dt.byteorder == "=" and not np.little_endian):
        return values.astype(dt.newbyteorder("<"))
    return values


def _dtype_of(code: str) -> np.dtype:
    if code not in _ALLOWED_DTYPES:
        raise ParameterError(f"unsupported report dtype {code!r} on the wire; allowed: {sorted(_ALLOWED_DTYPES)}")
    return np.dtype(code)


def _join(parts: Sequence[bytes]) -> bytearray:
    """One writable buffer (arrays built on it are writable like in-process ones)."""
    return bytearray().join(parts) if len(parts) != 1 else bytearray(parts[0])


# --- requests ---


def _randomizer_pb(spec: RandomizerSpec) -> pb.Randomizer:
    return pb.Randomizer(
        kind=spec.kind,
        query_json=json.dumps(spec.query.to_json(), allow_nan=True),
        epsilon=float(spec.epsilon),
        params_json=json.dumps(dict(spec.params), allow_nan=True),
    )


def _randomizer_from_pb(msg: pb.Randomizer) -> RandomizerSpec:
    try:
        query = json.loads(msg.query_json)
        params = json.loads(msg.params_json) if msg.params_json else {}
    except json.JSONDecodeError as exc:
        raise ParameterError(f"malformed randomizer JSON from the aggregator: {exc}") from None
    if not isinstance(params, dict):
        raise ParameterError(f"randomizer params must be a JSON object, got {params!r}")
    return RandomizerSpec(msg.kind, QuerySpec.from_json(query), msg.epsilon, params)


def _pack(pieces: Iterable[tuple[Any, int]], new_part: Callable[[], Any], field: str, chunk_bytes: int) -> list[Any]:
    """Fill parts made by ``new_part`` with (piece, size) pairs in order, starting a new part when
    the next piece would pass ``chunk_bytes`` (a part always takes at least one piece); the last
    part gets ``final`` set. The one splitting rule for requests and replies."""
    parts = [new_part()]
    budget = chunk_bytes
    for piece, size in pieces:
        if size > budget and len(getattr(parts[-1], field)):
            parts.append(new_part())
            budget = chunk_bytes
        getattr(parts[-1], field).append(piece)
        budget -= size
    parts[-1].final = True
    return parts


def _assignment_pieces(a: Assignment, ids_per_part: int) -> Iterator[tuple[pb.Assignment, int]]:
    """An assignment as (piece, size): one piece for a range, ``ids_per_part`` ids per piece otherwise."""
    rnd = _randomizer_pb(a.randomizer)
    if a.users.ids is None:
        yield pb.Assignment(request_id=a.request_id, range=pb.UserRange(start=a.users.start, stop=a.users.stop), randomizer=rnd), 64
        return
    ids = _le(a.users.ids.astype(np.int64, copy=False))
    for lo in range(0, max(len(ids), 1), ids_per_part):
        chunk = ids[lo : lo + ids_per_part]
        yield pb.Assignment(request_id=a.request_id, ids=chunk.tobytes(), randomizer=rnd), chunk.nbytes + 64


def encode_request(request: RoundRequest, chunk_bytes: int = CHUNK_BYTES) -> list[pb.ServerMessage]:
    """A round request as one or more ``ServerMessage`` parts; the last has ``final`` set."""
    ids_per_part = max(1, chunk_bytes // 8)
    header = dict(
        session_id=int(request.session_id),
        session_kind=int(request.session_kind),
        round=int(request.round),
        last_round=bool(request.last_round),
        deadline_s=float(request.deadline_s),
    )
    pieces = (piece for a in request.assignments for piece in _assignment_pieces(a, ids_per_part))
    parts = _pack(pieces, lambda: pb.RoundRequest(**header), "assignments", chunk_bytes)
    return [pb.ServerMessage(round=p) for p in parts]


def decode_request(parts: Sequence[pb.RoundRequest]) -> RoundRequest:
    """The request carried by ``parts`` (in order). Raises ParameterError when malformed."""
    if not parts:
        raise ParameterError("empty round request")
    head = parts[0]
    merged: list[tuple[int, pb.Randomizer, list[bytes] | tuple[int, int]]] = []
    for part in parts:
        for a in part.assignments:
            which = a.WhichOneof("users")
            if which == "ids" and merged and merged[-1][0] == a.request_id and isinstance(merged[-1][2], list):
                merged[-1][2].append(a.ids)
            elif which == "ids":
                merged.append((a.request_id, a.randomizer, [a.ids]))
            else:
                merged.append((a.request_id, a.randomizer, (a.range.start, a.range.stop)))
    assignments = []
    for request_id, rnd, users in merged:
        if isinstance(users, tuple):
            u = Users.range(*users)
        else:
            buf = _join(users)
            if len(buf) % 8:
                raise ParameterError(f"request {request_id}: packed user ids are not a multiple of 8 bytes")
            u = Users(0, 0, np.frombuffer(buf, dtype="<i8").astype(np.int64, copy=False))
        assignments.append(Assignment(int(request_id), u, _randomizer_from_pb(rnd)))
    if math.isnan(head.deadline_s):
        raise ParameterError("round deadline is NaN")
    return RoundRequest(
        int(head.session_id),
        head.session_kind,  # validated by the Shard (unknown kinds get a round-level error)
        int(head.round),
        tuple(assignments),
        bool(head.last_round),
        float(head.deadline_s),
    )


# --- replies ---


def _result_parts(result: Result, chunk_bytes: int) -> list[pb.Result]:
    refused = np.asarray(result.refused, dtype=bool)
    values = _le(np.asarray(result.values))
    width = int(values.shape[1]) if values.ndim == 2 else 0
    dtype = values.dtype.str
    n = len(refused)
    row_bytes = max(1, values.itemsize * max(width, 1))
    users_per_part = max(1, chunk_bytes // row_bytes)
    if n <= users_per_part:
        return [
            pb.Result(
                request_id=result.request_id,
                error=result.error,
                user_count=n,
                refused=np.packbits(refused).tobytes(),
                dtype=dtype,
                width=width,
                values=values.tobytes(),
            )
        ]
    # Split by users: each part carries its users' refusal bits and the reports of its accepted
    # users (reports are in user order, so a part's reports are a contiguous slice).
    accepted_before = np.concatenate([[0], np.cumsum(~refused)])
    out = []
    for lo in range(0, n, users_per_part):
        hi = min(n, lo + users_per_part)
        vals = values[accepted_before[lo] : accepted_before[hi]]
        out.append(
            pb.Result(
                request_id=result.request_id,
                error=result.error,
                user_count=hi - lo,
                refused=np.packbits(refused[lo:hi]).tobytes(),
                dtype=dtype,
                width=width,
                values=vals.tobytes(),
            )
        )
    return out


def encode_reply(reply: RoundReply, chunk_bytes: int = CHUNK_BYTES) -> list[pb.ClientMessage]:
    """A round reply as one or more ``ClientMessage`` parts; the last has ``final`` set."""
    header = dict(session_id=int(reply.session_id), round=int(reply.round), error=reply.error)
    pieces = (
        (piece, len(piece.values) + len(piece.refused) + 64) for result in reply.results for piece in _result_parts(result, chunk_bytes)
    )
    parts = _pack(pieces, lambda: pb.RoundReply(**header), "results", chunk_bytes)
    return [pb.ClientMessage(reply=p) for p in parts]


def decode_reply(parts: Sequence[pb.RoundReply]) -> RoundReply:
    """The reply carried by ``parts`` (in order). Raises ParameterError when malformed."""
    if not parts:
        raise ParameterError("empty round reply")
    head = parts[0]
    groups: list[list[pb.Result]] = []
    for part in parts:
        for r in part.results:
            if groups and groups[-1][0].request_id == r.request_id:
                groups[-1].append(r)
            else:
                groups.append([r])
    results = []
    for group in groups:
        first = group[0]
        dtype = _dtype_of(first.dtype)
        width = int(first.width)
        masks = []
        for r in group:
            bits = np.frombuffer(r.refused, dtype=np.uint8)
            if len(bits) * 8 < r.user_count:
                raise ParameterError(f"request {r.request_id}: refusal bitmap shorter than its {r.user_count} users")
            masks.append(np.unpackbits(bits, count=int(r.user_count)).astype(bool))
        refused = np.concatenate(masks) if len(masks) != 1 else masks[0]
        buf = _join([r.values for r in group])
        row = dtype.itemsize * max(width, 1)
        if len(buf) % row:
            raise ParameterError(f"request {first.request_id}: {len(buf)} report bytes are not whole rows of {row} bytes")
        values = np.frombuffer(buf, dtype=dtype)
        if dtype.byteorder == "<" and not np.little_endian:  # pragma: no cover - big-endian hosts
            values = values.astype(dtype.newbyteorder("="))
        if width:
            values = values.reshape(-1, width)
        results.append(Result(int(first.request_id), values, refused, first.error))
    return RoundReply(int(head.session_id), int(head.round), tuple(results), head.error)


# --- ledger diagnostics ---


def encode_ledger(query_id: int, first_user: int, spent_units: np.ndarray, chunk_bytes: int = CHUNK_BYTES) -> list[pb.ClientMessage]:
    """A shard's spent budget units as ``LedgerReport`` parts."""
    units = _le(np.asarray(spent_units, dtype=np.int64))
    step = max(1, chunk_bytes // 8)
    out = []
    for lo in range(0, max(len(units), 1), step):
        out.append(pb.ClientMessage(ledger=pb.LedgerReport(query_id=query_id, first_user=first_user + lo, spent_units=units[lo : lo + step].tobytes())))
    out[-1].ledger.final = True
    return out


def decode_ledger(parts: Iterable[pb.LedgerReport]) -> np.ndarray:
    buf = _join([p.spent_units for p in parts])
    return np.frombuffer(buf, dtype="<i8").astype(np.int64, copy=False)
