"""Every integer and float field of the wire messages at its edges: a clean refusal, a live client.

Issue 23, item 5 and invariant I6: a range stop ≥ 2^63 was answered with "OverflowError: cannot
fit 'int' into an index-sized integer" as its text, and deadlines of −1, 0 and inf were accepted.
The class is "a field at the edge of its wire type reaches code that assumed a sane value", so
the attack covers every numeric field the aggregator sends (proto/ldp/wire/v1/aggregator.proto)
at the edges of its type: 0, −1 (int32), 2^31, 2^32 − 1, 2^63 − 1, 2^63, 2^64 − 1 for integers,
and 0, −0, −1, the smallest subnormal, 1e300, NaN and ±inf for doubles.

- In process, with hypothesis: any mix of edge values in a RoundRequest, answered by the code a
  client runs (``ldp.wire.client.reply_parts`` over a ``Shard``, drawn through ``_draw``), gives a reply whose every error
  text is a validation message: no builtin exception's name (OverflowError, TypeError, ...) in
  it, nothing charged for a refused request, and nothing raises.
- The aggregator's API side: a ``RoundRequest`` either refuses an edge value with a
  ParameterError naming the field, or is encodable (the protobuf runtime never refuses it later).
- A real ``python -m ldp.wire.client`` process gets each field at each edge, one at a time
  (rounds, ledger queries, Loads, an out-of-place Welcome), and after all of them is alive,
  answers an honest round, and has logged no traceback.

Broken variant: without the range check in ``Users.__post_init__`` (ldp/local/messages.py) the
first test finds a range stop ≥ 2^63 answered with "OverflowError" (the example hypothesis
reports), and without ``require_deadline`` in ``RoundRequest`` the deadline rows of the second
and third tests fail (a deadline of −1, 0 or inf accepted).
"""

from __future__ import annotations

import asyncio
import builtins
import itertools
import math
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldp.core.errors import LDPError, ParameterError
from ldp.core.query_specs import field_query
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import Assignment, RoundReply, RoundRequest, SessionKind, Users
from ldp.local.shard import Shard
from ldp.wire import codec
from ldp.wire.aggregator import ShardClaim
from ldp.wire.client import _draw, reply_parts
from ldp.wire.client_config import ClientConfig
from ldp.wire.launcher import spawn_clients, stop_clients
from ldp.wire.sealed import new_seal_key, seal_population
from ldp.wire.v1 import aggregator_pb2 as pb
from tests.wire.hostile import BIT0, HostileAggregator, Peer, assignment, randomizer
from tests.wire.wire_helpers import population

pytestmark = pytest.mark.timeout(300)

N = 200
HONEST_EPSILON = 0.001

UINT64 = [0, 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1]
UINT32 = [0, 1, 2**31, 2**32 - 1]
INT32 = [-(2**31), -1, 0, 1, 2, 3, 2**31 - 1]
INT64 = [-(2**63), -1, 0, N - 1, N, 2**31, 2**63 - 1]
DOUBLE = [0.0, -0.0, -1.0, 5e-324, 1e300, math.nan, math.inf, -math.inf]

# Names of Python's own exceptions (and protobuf's): a refusal that shows one is an accident that
# leaked, not a validation message.
RAW = re.compile(r"\b(" + "|".join(sorted({n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException) and n.endswith("Error")} | {"DecodeError", "StopIteration"})) + r")\b")



def _answer(shard: Shard, part: pb.RoundRequest) -> RoundReply:
    """The client's reply to a one-part request, by the code it runs (a round this small is one part)."""
    only = _draw(reply_parts(shard, [part]), [part])
    assert only.final
    return only.reply

def clean(text: str) -> bool:
    return not RAW.search(text)


def texts(reply: Any) -> list[str]:
    return [reply.error, *(r.error for r in reply.results)]


# --- in process: any mix of edges, through the code a client runs ---

SPEC = population(n=N, budget=1.0, seed=5)


@st.composite
def edge_requests(draw: st.DrawFn) -> pb.RoundRequest:
    def pick(edges: list[Any], valid: Any) -> Any:
        return draw(st.one_of(st.just(valid), st.sampled_from(edges)))

    assignments = []
    for rid in range(draw(st.integers(1, 3))):
        r = randomizer("binary_rr", pick(DOUBLE, HONEST_EPSILON))
        users: dict[str, Any]
        if draw(st.booleans()):
            users = {"range": pb.UserRange(start=pick(UINT64, 0), stop=pick(UINT64, N))}
        else:
            users = {"ids": np.asarray(draw(st.lists(st.one_of(st.integers(0, N - 1), st.sampled_from(INT64)), max_size=6)), dtype="<i8").tobytes()}
        assignments.append(pb.Assignment(request_id=pick(UINT64, rid + 1), randomizer=r, **users))
    return pb.RoundRequest(
        session_id=pick(UINT64, draw(st.integers(10**6, 10**7))),
        session_kind=pick(INT32, 2),
        round=pick(UINT32, 0),
        deadline_s=pick(DOUBLE, 30.0),
        last_round=draw(st.booleans()),
        assignments=assignments,
        final=True,
    )


@settings(derandomize=True, database=None, max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(part=edge_requests())
def test_edge_values_get_a_validation_message_and_charge_nothing_refused(part: pb.RoundRequest) -> None:
    shard = Shard(SPEC, 0, N)
    part = pb.RoundRequest.FromString(part.SerializeToString())  # what the client reads
    reply = _answer(shard, part)  # never raises: the client's own handler
    assert all(clean(t) for t in texts(reply)), texts(reply)
    spent = int(shard.ledger.spent_units().sum())
    if reply.error:
        assert spent == 0 and not reply.results
        return
    answered = sum(len(r.values) for r in reply.results if not r.error)
    assert all(len(r.values) == 0 for r in reply.results if r.error)
    assert (spent > 0) == (answered > 0)


@pytest.mark.parametrize("stop", [2**63, 2**63 + 1, 2**64 - 1])
def test_a_range_at_or_past_2_63_is_a_validation_message(stop: int) -> None:
    """The case the hostile tester found, by name."""
    shard = Shard(SPEC, 0, N)
    part = pb.RoundRequest(session_id=1, session_kind=2, round=0, deadline_s=30.0, final=True, assignments=[assignment(1, 0, stop, randomizer("binary_rr", 0.5))])
    reply = _answer(shard, part)
    assert f"a user range needs integers 0 ≤ start ≤ stop < 2^63 (user ids are int64), got [0, {stop})" in reply.error, reply.error
    assert clean(reply.error) and not shard.ledger.spent_units().any()


@pytest.mark.parametrize("deadline", [-1.0, 0.0, -0.0, math.inf, -math.inf, math.nan, 1e300])
def test_a_deadline_outside_0_to_10_6_seconds_is_refused_by_the_client(deadline: float) -> None:
    shard = Shard(SPEC, 0, N)
    part = pb.RoundRequest(session_id=1, session_kind=2, round=0, deadline_s=deadline, final=True, assignments=[assignment(1, 0, N, randomizer("binary_rr", 0.5))])
    reply = _answer(shard, part)
    assert "the round deadline deadline_s must be a finite number of seconds in (0, 10^6]" in reply.error, reply.error
    assert not reply.results and not shard.ledger.spent_units().any()


# --- the aggregator's API side: refused by name, or encodable ---

RR = RandomizerSpec("binary_rr", field_query("x"), 0.5)


@pytest.mark.parametrize(
    "field, values",
    [("session_id", [-1, *UINT64]), ("round", [-1, *UINT32, 2**32, 2**63]), ("session_kind", [*INT32, 2**31, 2**63]),
     ("deadline_s", [*DOUBLE, 30.0, 1e6, 1e6 + 1]), ("request_id", [-1, *UINT64, 2**64]), ("start", [-1, *UINT64]), ("stop", [-1, *UINT64])],
)  # fmt: skip
def test_a_round_request_is_refused_by_field_name_or_encodes(field: str, values: list[Any]) -> None:
    for value in values:
        header: dict[str, Any] = dict(session_id=1, session_kind=SessionKind.INTERACTIVE, round=0, deadline_s=30.0)
        users: dict[str, Any] = dict(start=0, stop=N)
        request_id = 1
        if field in header:
            header[field] = value
        elif field in users:
            users[field] = value
        else:
            request_id = value
        try:
            request = RoundRequest(header["session_id"], header["session_kind"], header["round"],
                                   (Assignment(request_id, Users.range(users["start"], users["stop"]), RR),), False, header["deadline_s"])  # fmt: skip
        except ParameterError as exc:
            named = "user range" if field in users else field
            assert named in str(exc) and "\n" not in str(exc), (field, value, str(exc))
            continue
        parts = codec.encode_request(request)  # the protobuf runtime accepts every field
        back = codec.decode_request([pb.ServerMessage.FromString(p.SerializeToString()).round for p in parts])
        assert back.deadline_s == request.deadline_s and back.assignments[0].request_id == request.assignments[0].request_id


def test_the_api_deadlines_the_issue_names_are_refused() -> None:
    for deadline in (-1, 0, math.inf):
        with pytest.raises(ParameterError, match=r"the round deadline deadline_s must be a finite number of seconds in \(0, 10\^6\]"):
            RoundRequest(1, SessionKind.INTERACTIVE, 0, (), False, deadline)


# --- a real client process, each field at each edge ---


def _edge_messages(blob: bytes) -> list[tuple[str, pb.ServerMessage]]:
    """(what, message) for every numeric field at every edge of its type, one field at a time."""
    sessions = itertools.count(10**6)

    def rnd(**change: Any) -> pb.ServerMessage:
        a = {k: change.pop(k) for k in ("request_id", "start", "stop", "epsilon", "ids") if k in change}
        r = randomizer("binary_rr", a.get("epsilon", HONEST_EPSILON), BIT0)
        users = {"ids": np.asarray(a["ids"], dtype="<i8").tobytes()} if "ids" in a else {"range": pb.UserRange(start=a.get("start", 0), stop=a.get("stop", N))}
        header = dict(session_id=next(sessions), session_kind=2, round=0, deadline_s=30.0, final=True) | change
        return pb.ServerMessage(round=pb.RoundRequest(assignments=[pb.Assignment(request_id=a.get("request_id", 1), randomizer=r, **users)], **header))

    out: list[tuple[str, pb.ServerMessage]] = []
    out += [(f"session_id={v}", rnd(session_id=v)) for v in UINT64]
    out += [(f"session_kind={v}", rnd(session_kind=v)) for v in INT32]
    out += [(f"round={v}", rnd(round=v)) for v in UINT32]
    out += [(f"deadline_s={v}", rnd(deadline_s=v)) for v in DOUBLE]
    out += [(f"request_id={v}", rnd(request_id=v)) for v in UINT64]
    out += [(f"range start={v}", rnd(start=v)) for v in UINT64]
    out += [(f"range stop={v}", rnd(stop=v)) for v in UINT64]
    out += [(f"range [{v}, {v})", rnd(start=v, stop=v)) for v in UINT64]
    out += [(f"epsilon={v}", rnd(epsilon=v)) for v in DOUBLE]
    out += [(f"ids [{v}]", rnd(ids=[v])) for v in INT64]
    out += [(f"ledger query_id={v}", pb.ServerMessage(ledger_query=pb.LedgerQuery(query_id=v))) for v in UINT64]
    welcome: list[dict[str, Any]] = [{f: v} for f in ("first_user", "user_count") for v in UINT64]
    out += [(f"welcome {w}", pb.ServerMessage(welcome=pb.Welcome(protocol_version=codec.PROTOCOL_VERSION, **w))) for w in welcome]
    out += [(f"load {f}={v}", pb.ServerMessage(load=pb.Load(sealed_population=blob, **({"load_id": 1, "first_user": 0, "user_count": N} | {f: v}))))
            for f in ("load_id", "first_user", "user_count") for v in UINT64]  # fmt: skip
    return out


async def _ready(peer: Peer) -> pb.Ready:
    msg = await peer.recv()
    assert msg.WhichOneof("kind") == "ready", msg
    return msg.ready


async def _exchange(peer: Peer, message: pb.ServerMessage, restore: pb.ServerMessage) -> list[str]:
    """Send one message; the texts of what the client answers (a reply, a ledger report or a
    Ready). A message that gets no answer (an out-of-place Welcome) is followed by a ledger query,
    so the next message starts from a quiet stream."""
    kind = message.WhichOneof("kind")
    await peer.send(message)
    if kind == "round":
        reply = await peer.reply()
        return texts(reply)
    if kind == "load":
        ready = await _ready(peer)
        if ready.error:  # the client now holds no users: give them back
            await peer.send(restore)
            again = await _ready(peer)
            assert not again.error, again.error
        return [ready.error]
    if kind == "ledger_query":  # answered by ledger parts, the last one final
        while not ((msg := await peer.recv()).WhichOneof("kind") == "ledger" and msg.ledger.final):
            pass
        assert msg.ledger.query_id == message.ledger_query.query_id
        return []
    await peer.ledger()
    return []


async def test_a_real_client_refuses_every_edge_cleanly_and_stays_up() -> None:
    key = new_seal_key()
    spec = population(n=N, budget=1.0, seed=71)
    blob = seal_population(key, spec)
    restore = pb.ServerMessage(load=pb.Load(load_id=2**20, sealed_population=blob, first_user=0, user_count=N))
    async with HostileAggregator() as agg:
        (client,) = spawn_clients(agg.address, [ShardClaim(0, 1)], ClientConfig(population=spec, seal_key=key), connect_timeout_s=30)
        try:
            peer = await agg.accept()
            ready = await peer.handshake(0, N)
            assert not ready.error
            leaked: list[str] = []
            messages = _edge_messages(blob)
            for what, message in messages:
                for text in await asyncio.wait_for(_exchange(peer, message, restore), 30):
                    if not clean(text):
                        leaked.append(f"{what}: {text}")
                assert client.process.poll() is None, f"the client died after {what}"
            assert not leaked, leaked
            # alive and answering: an honest round, charged as asked
            reply = await peer.round(10**9, 0, [assignment(1, 0, N, randomizer("binary_rr", HONEST_EPSILON))])
            assert not reply.error and not reply.results[0].error and len(reply.results[0].values) == N, reply
            log = client.log_tail(1_000_000)
            assert "Traceback" not in log and "unexpected failure" not in log, log[-3000:]
            assert len(messages) >= 120
        finally:
            stop_clients([client], timeout_s=2.0)


def test_the_raw_pattern_catches_what_it_must() -> None:
    """The detector itself: it flags the text the issue quotes and passes validation messages."""
    assert not clean("the shard failed to answer: OverflowError: cannot fit 'int' into an index-sized integer")
    assert not clean("malformed round request: TypeError: bad")
    assert clean("malformed round request: ParameterError: a user range needs integers 0 ≤ start ≤ stop < 2^63")
    assert issubclass(ParameterError, LDPError)
