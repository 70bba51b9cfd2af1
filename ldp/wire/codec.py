"""Conversion between ``ldp.local.messages`` and the protobuf messages of ``ldp.wire.v1``.

What: encode a ``RoundRequest``/``RoundReply`` into a list of protobuf *parts*, each at most
about ``chunk_bytes`` of bulk data, and decode a list of parts back into exactly the same
transport-neutral object (same user ids, same report bytes and dtype, same refusal mask).
Guarantee: ``decode_reply(encode_reply(r))`` equals ``r`` field for field, arrays bit-identical
(tests/wire/test_codec.py). Bulk arrays travel as packed little-endian bytes, refusals as
``np.packbits`` bitmaps (docs/design.md §3: one message per report is ~10^4× slower).
``ReplyCheck`` is the aggregator's side of a reply: it checks every part against what the shard
was asked (request ids, user counts, bitmap lengths, the dtype, width and output domain of the
requested randomizer, ``report_format``) before building any array, and bounds the bytes it takes,
so a hostile client can spoil only its own users' answers (tests/wire/test_hostile_clients.py).
Source: docs/design.md §3; proto/ldp/wire/v1/aggregator.proto.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ldp.core.errors import ParameterError
from ldp.core.queries import QuerySpec
from ldp.core.randomizer_base import member_mask
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.local.messages import Assignment, Result, RoundReply, RoundRequest, SessionKind, Users, refusals
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
    "ReportFormat",
    "report_format",
    "Expected",
    "ReplyCheck",
    "clip_text",
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
    # Carried as sent: the users' side validates it when it builds the randomizer
    # (LocalRandomizer.build), so one bad request is an error for that request, not the round.
    return RandomizerSpec.unchecked(msg.kind, QuerySpec.from_json(query), msg.epsilon, params)


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
    header: dict[str, Any] = dict(
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
    # RoundRequest checks the deadline (a finite number of seconds in (0, 10^6]) and the ids.
    return RoundRequest(
        int(head.session_id),
        cast(SessionKind, head.session_kind),  # an int: validated by the Shard (unknown kinds get a round-level error)
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
    # (a running count per part, not a cumulative sum of 8 bytes per user)
    everyone = refusals(refused) == 0
    first = 0  # reports of the users before this part
    out = []
    for lo in range(0, n, users_per_part):
        hi = min(n, lo + users_per_part)
        answered = hi - lo if everyone else hi - lo - int(np.count_nonzero(refused[lo:hi]))
        vals = values[first : first + answered]
        first += answered
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
    header: dict[str, Any] = dict(session_id=int(reply.session_id), round=int(reply.round), error=reply.error)
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


# --- checking a shard's reply against what it was asked (the aggregator's side) ---

# A client's error text is kept (prefixed with its shard key) but clipped and made printable.
MAX_ERROR_CHARS = 1000
# What a reply may carry beyond the bytes its users' reports and refusal bits need: headers,
# error texts, part overheads. Past it the shard is cut off (docs/protocol.md, "Validation").
REPLY_SLACK_BYTES = 1 << 20
REPLY_SLACK_PER_REQUEST = 16 << 10
# What one received part, and each result in it, costs beyond its bytes fields (objects, lists,
# varints), when counting.
PART_OVERHEAD_BYTES = 256
RESULT_OVERHEAD_BYTES = 64


def clip_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """A client's free text, safe to log and show: at most ``limit`` characters, printable only."""
    clipped = text[:limit]
    clean = "".join(ch if ch.isprintable() else "?" for ch in clipped)
    return clean + (f"… ({len(text) - limit} more characters)" if len(text) > limit else "")


def _domain_of(randomizer: Any) -> np.ndarray | None:
    """A randomizer's finite output set as a sorted 1-D array, or None (continuous, or too big)."""
    try:
        domain = randomizer.output_domain()
    except Exception:  # noqa: BLE001 - e.g. a record domain too large to enumerate: no check
        return None
    if domain is None:
        return None
    domain = np.asarray(domain)
    if domain.ndim != 1 or domain.size == 0:
        return None
    return np.unique(domain)


def _inside(values: np.ndarray, domain: np.ndarray | None) -> np.ndarray:
    """Mask of ``values`` that lie in ``domain`` (None: any finite number)."""
    if domain is None:
        return np.isfinite(values) if values.dtype.kind == "f" else np.ones(values.shape, dtype=bool)
    if len(domain) <= 8:
        return member_mask(values, domain)
    # A grid (discrete_laplace): guess each value's index arithmetically, confirm it exactly, and
    # search only what the guess missed (10× faster than a search over 10^6 values).
    step = (float(domain[-1]) - float(domain[0])) / (len(domain) - 1)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        pos = np.rint((values.astype(np.float64) - float(domain[0])) / step) if step > 0 else np.zeros(values.shape)
    ok = np.isfinite(pos) & (pos >= 0) & (pos < len(domain))
    ok &= domain[np.where(ok, pos, 0).astype(np.int64)] == values
    if not ok.all():
        rest = ~ok
        idx = np.minimum(np.searchsorted(domain, values[rest]), len(domain) - 1)
        ok[rest] = domain[idx] == values[rest]
    return ok


def _within_run(values: np.ndarray, domain: np.ndarray | None) -> bool:
    """True when ``domain`` is a run of consecutive integers (binary RR's {0, 1}, a record
    column) and every integer value lies between its ends: two reductions, about 30× faster
    than the membership mask at 10^8 one-byte reports. False means: check value by value."""
    if domain is None or values.dtype.kind not in "iu" or values.size == 0:
        return False
    low, high = domain[0], domain[-1]
    if not (float(low).is_integer() and float(high).is_integer() and high - low + 1 == len(domain)):
        return False
    return bool(values.min() >= low and values.max() <= high)


def _show_domain(domain: np.ndarray | None) -> str:
    if domain is None:
        return "the finite numbers"
    shown = ", ".join(f"{x:g}" for x in domain[:6].tolist())
    return "{" + shown + (f", ... ({len(domain)} values)" if len(domain) > 6 else "") + "}"


@dataclass(frozen=True)
class ReportFormat:
    """What a correct ``Result`` for one randomizer spec carries on the wire: the dtype and width
    the users' ``LocalRandomizer`` emits and, where finite, its output domain per column.

    ``dtype`` is None when no user can run the spec (``problem`` says why): then the only correct
    answer is an error Result.
    """

    kind: str
    dtype: np.dtype | None
    width: int = 0  # 0: one value per report; w > 0: rows of w values
    domains: tuple[np.ndarray | None, ...] = ()  # per column (one for scalar reports); None: any finite number
    problem: str = ""
    bits_set: int | None = None  # rows of packed bits with exactly this many set (a Subset Selection d-subset)

    @property
    def row_bytes(self) -> int:
        return 0 if self.dtype is None else self.dtype.itemsize * max(self.width, 1)

    def first_outside(self, values: np.ndarray) -> tuple[int, Any, np.ndarray | None] | None:
        """(column, value, domain) of the first report value outside the output domain, or None."""
        columns = [values] if self.width == 0 else [values[:, j] for j in range(self.width)]
        for j, (column, domain) in enumerate(zip(columns, self.domains)):
            if _within_run(column, domain):
                continue
            ok = _inside(column, domain)
            if not ok.all():
                return j, column[int(np.argmin(ok))].item(), domain
        return None

    def row_problem(self, values: np.ndarray) -> str:
        """'' or what is wrong with a row as a whole (a d-subset with other than d members)."""
        if self.bits_set is None or values.size == 0:
            return ""
        members = np.bitwise_count(values.reshape(len(values), -1)).sum(axis=1, dtype=np.int64)
        wrong = np.flatnonzero(members != self.bits_set)
        if not len(wrong):
            return ""
        return f"a report with {int(members[wrong[0]])} categories, where {self.kind} reports name exactly {self.bits_set}"


def report_format(spec: RandomizerSpec, schema: Any) -> ReportFormat:
    """The ``ReportFormat`` of ``spec`` for users of ``schema``, derived the way users build it
    (``LocalRandomizer.build``, so the aggregator expects exactly what an honest client emits)."""
    try:
        local = LocalRandomizer.build(spec, schema)
    except Exception as exc:  # noqa: BLE001 - any spec no user can run: error Results only
        return ReportFormat(str(spec.kind), None, problem=f"{type(exc).__name__}: {exc}")
    randomizer = local.randomizer
    dtype = np.dtype(local.report_dtype).newbyteorder("<")
    columns = getattr(randomizer, "report_columns", None)  # frequency oracles: rows of packed bits, or (hash, y)
    if columns is not None:
        bits_set = getattr(randomizer, "report_bits_set", None)  # Subset Selection: every report names d categories
        return ReportFormat(spec.kind, dtype, int(columns), tuple(cast(Any, randomizer).report_domains()), bits_set=bits_set)
    factors = randomizer.factors()
    rows = randomizer.input_width > 1 or factors is not None  # record_rr reports rows, even of width 1
    if not rows:
        return ReportFormat(spec.kind, dtype, 0, (_domain_of(randomizer),))
    width = int(local.report_width)
    if factors is not None and len(factors) == width:
        domains = tuple(_domain_of(f) for f in factors)
    else:
        domains = (None,) * width
    return ReportFormat(spec.kind, dtype, width, domains)


@dataclass(frozen=True)
class Expected:
    """What one shard was asked for one request: how many users, and the report format; ``into``,
    where its reports go as each part is checked (``Assignment.into``: rows for its users, in
    the format's dtype and width), or None to keep the parts and join them at the end."""

    request_id: int
    users: int
    format: ReportFormat
    into: np.ndarray | None = field(default=None, compare=False, repr=False)


def _refusal_mask(bitmap_bytes: bytes, count: int) -> tuple[np.ndarray, bool]:
    """The refusal flags of ``count`` users from their bitmap, and whether anyone refused. Nobody
    refused (the common case): a read-only zero-stride view, no byte per user."""
    bitmap = np.frombuffer(bitmap_bytes, dtype=np.uint8)
    if bitmap.any():
        return np.unpackbits(bitmap, count=count).astype(bool), True
    return np.broadcast_to(np.False_, (count,)), False


class _Answer:
    """One request's answer as it arrives, part by part."""

    __slots__ = ("users", "masks", "values", "error", "failure", "started", "refusals", "placed")

    def __init__(self) -> None:
        self.users = 0
        self.placed = 0  # reports copied into ``Expected.into`` so far
        self.refusals = False  # whether any part flagged a refusal (else the flags cost no memory)
        self.masks: list[np.ndarray] = []
        self.values: list[bytes] = []
        self.error = ""  # the client's own error text (prefixed)
        self.failure = ""  # what was wrong with what it sent
        self.started = False

    def fail(self, reason: str) -> None:
        if not self.failure:
            self.failure = reason
        self.masks, self.values = [], []


class ReplyCheck:
    """Checks one shard's reply to one round, part by part, against what it was asked.

    Every part is checked before any array is built from it: each Result must name a request this
    shard was asked in this round (others are noted and dropped), once (the parts of one result
    consecutive), with user counts summing exactly to the users asked, a refusal bitmap of
    ceil(users/8) bytes, the dtype and width the requested randomizer emits, one report per
    accepted user and every report inside the randomizer's finite output domain. A bad part
    makes *that request* an error Result whose text names the shard and what was wrong; the
    other requests are unaffected. The bytes received are counted: past ``cap`` (what the round
    can need plus slack) ``add`` returns a reason and the shard should be cut off.
    Nothing here raises on anything a client sends.
    """

    def __init__(self, shard: str, session_id: int, round: int, expected: Sequence[Expected], slack_bytes: int = REPLY_SLACK_BYTES) -> None:
        self.shard = shard
        self.session_id = int(session_id)
        self.round = int(round)
        self.expected: dict[int, Expected] = {}
        for e in expected:
            self.expected.setdefault(int(e.request_id), e)
        self.cap = int(slack_bytes) + sum(e.users * (e.format.row_bytes + 1) + REPLY_SLACK_PER_REQUEST for e in self.expected.values())
        self.bytes = 0  # received so far for this round (an upper bound on what is buffered)
        self.parts = 0
        self.error = ""  # a round-level error text from the client (prefixed)
        self.problems: list[str] = []  # about the reply as a whole (results for requests not asked)
        self.failures: list[str] = []  # every validation failure, for the log
        self._answers = {rid: _Answer() for rid in self.expected}
        self._last: int | None = None

    @property
    def where(self) -> str:
        return f"session {self.session_id} round {self.round}"

    def add(self, part: pb.RoundReply) -> str:
        """Take one part; '' or, when the reply passed its byte cap, the reason to cut the shard off."""
        # Counted field by field as they are read (ByteSize() would walk the whole message
        # again: 3 ms per 10^7 reports), each report buffer read out of the message once.
        self.bytes += len(part.error) + PART_OVERHEAD_BYTES
        self.parts += 1
        if part.error and not self.error:
            self.error = f"shard {self.shard}: {clip_text(part.error)}"
        for result in part.results:
            values = result.values
            self.bytes += len(values) + len(result.refused) + len(result.error) + len(result.dtype) + RESULT_OVERHEAD_BYTES
            if self.bytes > self.cap:
                return (
                    f"shard {self.shard} sent more than {self.cap} bytes in reply to {self.where}, more than its "
                    f"{sum(e.users for e in self.expected.values())} users' reports can need; the connection is closed"
                )
            self._take(result, values)
        return ""

    def _fail(self, answer: _Answer, reason: str) -> None:
        if not answer.failure:
            self.failures.append(reason)
        answer.fail(reason)

    def _take(self, r: pb.Result, raw_values: bytes) -> None:
        rid = int(r.request_id)
        expected = self.expected.get(rid)
        if expected is None:
            self._unasked(rid)
            return
        answer = self._answers[rid]
        consecutive, self._last = self._last == rid, rid
        s = f"shard {self.shard}"
        if answer.started and not consecutive:
            self._fail(answer, f"{s} sent two results for request {rid} (the parts of one result must be consecutive)")
        answer.started = True
        if answer.failure:
            return
        count = int(r.user_count)
        if answer.users + count > expected.users:
            self._fail(answer, f"{s} sent {answer.users + count} users for request {rid}, which asked it for {expected.users}")
            return
        answer.users += count
        if r.error or answer.error:
            if not answer.error:
                answer.error = f"{s}: {clip_text(r.error)}"
                answer.masks, answer.values = [], []
            return  # an error result carries no reports
        problem = self._layout_problem(r, expected.format, count, f"{s} sent", f"request {rid}")
        if problem:
            self._fail(answer, problem)
            return
        mask, refused = _refusal_mask(r.refused, count)
        answer.refusals = answer.refusals or refused
        problem = self._reports_problem(raw_values, expected.format, count - refusals(mask), f"{s} sent", f"request {rid}")
        if problem:
            self._fail(answer, problem)
            return
        answer.masks.append(mask)
        into = expected.into
        if into is None:
            answer.values.append(raw_values)
            return
        # Received into the final array as the part arrives: one copy, no join, no concatenation.
        # The checks above bound the rows (users counted ≤ asked, one report per accepted user),
        # and ``into`` is a view of this shard's rows only (``rounds._destination``).
        got = np.frombuffer(raw_values, dtype=expected.format.dtype)
        rows = len(got) // expected.format.width if expected.format.width else len(got)
        into[answer.placed : answer.placed + rows] = got.reshape(into[:rows].shape)
        answer.placed += rows

    def _unasked(self, rid: int) -> None:
        """A result for a request this shard was not asked: noted (the first few) and dropped."""
        if len(self.problems) < 4:
            problem = f"shard {self.shard} sent a result for request {rid}, which it was not asked in {self.where}"
            self.problems.append(problem)
            self.failures.append(problem)
        self._last = None

    @staticmethod
    def _layout_problem(r: pb.Result, fmt: ReportFormat, count: int, sent: str, request: str) -> str:
        """What is wrong with a part's dtype, width or refusal bitmap for ``count`` users ('' if nothing)."""
        if fmt.dtype is None:
            return f"{sent} reports for {request}, which no user can run ({clip_text(fmt.problem, 200)})"
        if r.dtype != fmt.dtype.str:
            return f"{sent} reports of dtype {clip_text(r.dtype, 40)!r} for {request}; {fmt.kind} reports are {fmt.dtype.str!r}"
        if r.width != fmt.width:
            shape = "one value per report" if fmt.width == 0 else f"rows of {fmt.width} values"
            return f"{sent} rows of width {r.width} for {request}; {fmt.kind} reports are {shape} (width {fmt.width})"
        need = (count + 7) // 8
        if len(r.refused) != need:
            return f"{sent} a refusal bitmap of {len(r.refused)} byte(s) for {count} users of {request} (needs {need})"
        return ""

    @staticmethod
    def _reports_problem(raw_values: bytes, fmt: ReportFormat, answered: int, sent: str, request: str) -> str:
        """What is wrong with a part's reports for ``answered`` users: their size, a value outside
        the randomizer's output domain, a row it cannot emit ('' if nothing)."""
        assert fmt.dtype is not None  # checked by _layout_problem
        if len(raw_values) != answered * fmt.row_bytes:
            size = fmt.dtype.itemsize
            what = f"{len(raw_values) // size} values" if len(raw_values) % size == 0 else f"{len(raw_values)} bytes of reports (not whole values)"
            rows = f" (rows of {fmt.width})" if fmt.width else ""
            return f"{sent} {what} for {answered} answered users of {request}{rows}"
        values = np.frombuffer(raw_values, dtype=fmt.dtype)
        if fmt.width:
            values = values.reshape(-1, fmt.width)
        bad = fmt.first_outside(values)
        if bad is not None:
            column, value, domain = bad
            where = f" in column {column}" if fmt.width else ""
            return f"{sent} the value {value!r}{where} for {request}, outside {fmt.kind}'s output domain {_show_domain(domain)}"
        row = fmt.row_problem(values)
        return f"{sent} {row} for {request}" if row else ""

    def finish(self) -> RoundReply:
        """The reply as the aggregator keeps it: valid results as sent, every bad or missing one an
        error Result naming the shard and what was wrong."""
        if self.error:
            return RoundReply(self.session_id, self.round, error=self.error)
        results = []
        extra = "".join("; it " + p.removeprefix(f"shard {self.shard} ") for p in self.problems)
        for rid, expected in self.expected.items():
            answer = self._answers[rid]
            error = answer.failure or answer.error
            if not error and not answer.started:
                error = f"shard {self.shard} did not answer request {rid}{extra}"
                self.failures.append(error)
            elif not error and answer.users != expected.users:
                error = f"shard {self.shard} sent {answer.users} of the {expected.users} users of request {rid}"
                self.failures.append(error)
            if error:
                results.append(Result(rid, np.zeros(0), np.zeros(0, dtype=bool), error=error))
                continue
            fmt = expected.format
            assert fmt.dtype is not None
            if not answer.refusals:
                refused = np.broadcast_to(np.False_, (answer.users,))
            else:
                refused = np.concatenate(answer.masks) if len(answer.masks) != 1 else answer.masks[0]
            if expected.into is not None:
                values = expected.into[: answer.placed]
                results.append(Result(rid, values, refused))
                continue
            values = np.frombuffer(_join(answer.values), dtype=fmt.dtype)
            if fmt.dtype.byteorder == "<" and not np.little_endian:  # pragma: no cover - big-endian hosts
                values = values.astype(fmt.dtype.newbyteorder("="))
            if fmt.width:
                values = values.reshape(-1, fmt.width)
            results.append(Result(rid, values, refused))
        return RoundReply(self.session_id, self.round, tuple(results))

    def fail_all(self, reason: str) -> RoundReply:
        """The reply when the shard is cut off: every one of its users an error with ``reason``."""
        return RoundReply(self.session_id, self.round, error=reason)


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
