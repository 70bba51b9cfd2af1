"""Fuzzing a real client process with what a hostile aggregator may send after a valid handshake.

One ``python -m ldp.wire.client`` (2,000 users, budget 1, a seal key) is driven through the hostile
aggregator of ``tests/wire/hostile.py``. Hypothesis (derandomized, a bounded number of examples,
a deadline per example) makes each example a few hostile inputs: random ``ServerMessage``s built
field by field (round requests in one part or several, with any ids, ranges, kinds, queries,
parameters, ε, deadlines, session kinds; ledger queries; Loads of garbage; out-of-place Welcomes;
unknown fields), byte-level mutations of valid messages, and raw bytes. A message that decodes
as Close is not sent (Close ends a client by design). After every example:

- the client is still running (no crash) and answers an honest round (no hang: every wait has a
  deadline, and hypothesis's per-example deadline bounds the whole example);
- its ledger, asked with a LedgerQuery, equals exactly what the replies show it answered: for
  every result without an error, ε charged to each accepted user of the assignment it answers
  (nothing charged without a report, no report without a charge), and nobody is over budget.

Which request a reply answers: the client handles messages in order and answers each round
request when its final part arrives; the parts it joined are found with its own bookkeeping of
unfinished requests (``ldp.wire.client._PendingRound``, same limits; its bounds are tested on their
own in test_client_bounds.py). Every decoded request is the protobuf runtime's reading of the same
bytes the client read.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import threading
from collections.abc import Coroutine
from typing import Any

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldp.core.budget import allowance_units, charge_units
from ldp.local.messages import RoundReply
from ldp.wire import codec
from ldp.wire.aggregator import ShardClaim
from ldp.wire.client import ClientLimits, _PendingRound
from ldp.wire.client_config import ClientConfig
from ldp.wire.launcher import ClientProcess, spawn_clients, stop_clients
from ldp.wire.sealed import new_seal_key, seal_population
from ldp.wire.v1 import aggregator_pb2 as pb
from tests.wire.hostile import BIT0, BIT1, RECORD, HostileAggregator, Peer, assignment, randomizer
from tests.wire.wire_helpers import population

pytestmark = pytest.mark.timeout(300)

N = 2000
BUDGET = 1.0
HONEST_EPSILON = 0.001
EXAMPLES = 600


class _Rig:
    """The hostile aggregator and one client process, served by an event loop in a thread (so
    that hypothesis drives plain synchronous examples)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.key = new_seal_key()
        self.spec = population(n=N, budget=BUDGET, seed=71)
        self.blob = seal_population(self.key, self.spec)
        self.agg = HostileAggregator()
        self.client: ClientProcess | None = None
        self.peer: Peer | None = None
        self.model = _PendingRound(ClientLimits(), lambda line: None)  # which parts the client joins
        self.expected: list[tuple[list[pb.RoundRequest], str]] = []  # requests it will answer, in order
        self.tally = np.zeros(N, dtype=object)  # exact units, from the replies alone
        self.honest_ids = itertools.count(10**12)
        self.load_ids = itertools.count(1)
        self.tried = 0  # hostile inputs sent
        self.skipped_close = 0
        self.answered = 0  # hostile requests the client answered with reports
        self.restores = 0  # real Loads sent after a hostile Load emptied the client

    def run(self, coro: Coroutine[Any, Any, Any], timeout_s: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    async def start(self) -> None:
        await self.agg.__aenter__()
        (self.client,) = spawn_clients(
            self.agg.address, [ShardClaim(0, 1)], ClientConfig(population=self.spec, seal_key=self.key), connect_timeout_s=30
        )
        self.peer = await self.agg.accept()
        ready = await self.peer.handshake(0, N)
        assert not ready.error and ready.budget == BUDGET

    def stop(self) -> None:
        if self.client is not None:
            stop_clients([self.client], timeout_s=1.0)
        self.run(self.agg.__aexit__(None, None, None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    def alive(self) -> bool:
        return self.client is not None and self.client.process.poll() is None

    # --- one example ---

    async def example(self, inputs: list[bytes]) -> None:
        peer = self.peer
        assert peer is not None
        for data in inputs:
            try:
                msg: pb.ServerMessage | None = pb.ServerMessage.FromString(data)
            except DecodeError:
                msg = None  # the client cannot decode it either: it ignores it
            kind = msg.WhichOneof("kind") if msg is not None else None
            if kind == "close":
                self.skipped_close += 1
                continue
            await peer.send(data)
            self.tried += 1
            if msg is not None and kind == "round":
                handled = self.model.add(msg.round, 0.0)
                if handled is not None:
                    self.expected.append(handled)
            elif kind == "load":
                self.model.clear()
        await self.honest_round()
        ledger = await peer.ledger()
        np.testing.assert_array_equal(ledger.astype(object), self.tally)
        assert int(ledger.max()) <= allowance_units(BUDGET)

    async def honest_round(self) -> None:
        """An honest round after the hostile inputs: it must be answered (after restoring the
        population with a real Load if a hostile Load left the client without users)."""
        peer = self.peer
        assert peer is not None
        for _ in range(2):
            sid = next(self.honest_ids)
            part = pb.RoundRequest(
                session_id=sid, session_kind=2, round=0, deadline_s=30.0, final=True,
                assignments=[assignment(1, 0, N, randomizer("binary_rr", HONEST_EPSILON))],
            )
            handled = self.model.add(part, 0.0)
            assert handled is not None
            self.expected.append(handled)
            await peer.send(pb.ServerMessage(round=part))
            reply = await self.read_replies_until(sid)
            if not reply.error:
                assert not reply.results[0].error and len(reply.results[0].values) + int(reply.results[0].refused.sum()) == N
                return
            assert "holds no users" in reply.error, reply.error
            self.restores += 1
            await peer.send(pb.ServerMessage(load=pb.Load(load_id=next(self.load_ids), sealed_population=self.blob, first_user=0, user_count=N)))
            self.model.clear()
            ready = await peer.recv()
            assert ready.WhichOneof("kind") == "ready" and not ready.ready.error, ready
        raise AssertionError("the client did not answer an honest round after a real Load")

    async def read_replies_until(self, sid: int) -> RoundReply:
        """Read everything the client sends until the reply for session ``sid``; tally every reply."""
        peer = self.peer
        assert peer is not None
        parts: list[pb.RoundReply] = []
        while True:
            msg = await peer.recv(timeout_s=20)
            if msg.WhichOneof("kind") != "reply":
                continue  # Ready (after a hostile Load), LedgerReport (a hostile ledger query)
            parts.append(msg.reply)
            if not msg.reply.final:
                continue
            head = parts[0]
            results = [codec.decode_reply([pb.RoundReply(results=[r])]).results[0] for p in parts for r in p.results]
            reply = RoundReply(int(head.session_id), int(head.round), tuple(results), head.error)
            parts = []
            self.account(reply)
            if reply.session_id == sid:
                return reply

    def account(self, reply: RoundReply) -> None:
        """Charge, in the tally, what this reply shows the client answered."""
        assert self.expected, f"a reply nobody asked for: {reply}"
        request_parts, refusal = self.expected.pop(0)
        head = request_parts[0]
        assert (reply.session_id, reply.round) == (int(head.session_id), int(head.round)), (reply, head)
        answered = [r for r in reply.results if not r.error]
        if not answered:
            assert all(len(r.values) == 0 for r in reply.results)
            return
        assert not reply.error and not refusal, (reply, refusal)
        request = codec.decode_request(request_parts)  # what the client decoded
        assert len(reply.results) == len(request.assignments)
        for a, r in zip(request.assignments, reply.results):
            if r.error:
                assert len(r.values) == 0
                continue
            users = a.users.array()
            refused = np.asarray(r.refused, dtype=bool)
            assert len(refused) == len(users) and len(r.values) == int((~refused).sum())
            self.tally[users[~refused]] += charge_units(a.randomizer.epsilon)
        if reply.session_id < 10**12:
            self.answered += 1


@pytest.fixture(scope="module")
def rig() -> Any:
    r = _Rig()
    try:
        r.run(r.start())
        yield r
    finally:
        r.stop()
    print(f"\nfuzzed the client with {r.tried} hostile inputs ({r.answered} requests answered, {r.restores} restores, {r.skipped_close} Close skipped)")


# --- strategies: what a hostile aggregator may send ---

KINDS = ["binary_rr", "kary_rr", "pm_rr", "discrete_laplace", "record_rr", "laplace", "nosuch_rr", ""]
QUERIES = [json.dumps(BIT0), json.dumps(BIT1), json.dumps(RECORD), '{"name": "label"}', '{"name": "nosuch"}', "", "null", "[", "[" * 3000,
           '{"name": "field", "params": {"field": "x", "index": 99}}', '{"name": "field", "params": {"field": "x", "index": -1}}', '{"name": 7}']
PARAMS = ["", "{}", '{"steps": 3}', '{"steps": 1024}', '{"steps": 1e300}', "[]", "null", '{"categories": [0]}', '{"low": [0], "high": [0]}', "{" * 3000]
EPSILONS = [HONEST_EPSILON, 0.01, 0.1, 0.5, 2.0, 0.0, -1.0, math.nan, math.inf, -math.inf, 5e-324, 1e300, 2.0**-60]
HUGE = [N, N + 1, 2**31, 2**62, 2**63 - 1, 2**64 - 1]

user_index = st.one_of(st.integers(0, N), st.sampled_from(HUGE))
epsilons = st.one_of(st.sampled_from(EPSILONS), st.floats(allow_nan=True, allow_infinity=True))


@st.composite
def randomizers(draw: st.DrawFn) -> pb.Randomizer:
    return pb.Randomizer(
        kind=draw(st.one_of(st.sampled_from(KINDS), st.text(max_size=12))),
        query_json=draw(st.one_of(st.sampled_from(QUERIES), st.text(max_size=40))),
        epsilon=draw(epsilons),
        params_json=draw(st.one_of(st.sampled_from(PARAMS), st.text(max_size=40))),
    )


@st.composite
def assignments(draw: st.DrawFn) -> pb.Assignment:
    rid = draw(st.one_of(st.integers(0, 4), st.sampled_from([2**64 - 1])))
    users = draw(st.sampled_from(["range", "ids", "raw", "none"]))
    r = draw(randomizers())
    if users == "range":
        return pb.Assignment(request_id=rid, range=pb.UserRange(start=draw(user_index), stop=draw(user_index)), randomizer=r)
    if users == "ids":
        ids = draw(st.lists(st.one_of(st.integers(0, N - 1), st.integers(-(2**63), 2**63 - 1)), max_size=40))
        return pb.Assignment(request_id=rid, ids=np.asarray(ids, dtype="<i8").tobytes(), randomizer=r)
    if users == "raw":
        return pb.Assignment(request_id=rid, ids=draw(st.binary(max_size=40)), randomizer=r)
    return pb.Assignment(request_id=rid, randomizer=r)


@st.composite
def round_parts(draw: st.DrawFn) -> pb.ServerMessage:
    return pb.ServerMessage(
        round=pb.RoundRequest(
            session_id=draw(st.one_of(st.integers(0, 6), st.sampled_from([2**64 - 1]))),
            session_kind=draw(st.sampled_from([1, 2, 0, 3, -1, 2**31 - 1])),
            round=draw(st.integers(0, 3)),
            last_round=draw(st.booleans()),
            deadline_s=draw(st.sampled_from([30.0, 0.0, -1.0, math.nan, math.inf, 1e-9, 1e300])),
            assignments=draw(st.lists(assignments(), max_size=4)),
            final=draw(st.sampled_from([True, True, False])),
        )
    )


def _valid_round() -> st.SearchStrategy[pb.ServerMessage]:
    """Requests an honest aggregator could send (so that mutations start from something valid)."""
    return st.builds(
        lambda s, r, eps, lo, q: pb.ServerMessage(
            round=pb.RoundRequest(session_id=s, session_kind=2, round=r, deadline_s=30.0, final=True,
                                  assignments=[assignment(1, lo, N, randomizer("binary_rr", eps, q)), assignment(2, 0, lo, randomizer("kary_rr", eps, q))])
        ),
        st.integers(1, 6), st.integers(0, 3), st.sampled_from([0.001, 0.01, 0.05]), st.integers(0, N), st.sampled_from([BIT0, BIT1]),
    )


others = st.one_of(
    st.builds(lambda q: pb.ServerMessage(ledger_query=pb.LedgerQuery(query_id=q)), st.integers(0, 2**64 - 1)),
    st.builds(
        lambda lid, blob, first, count: pb.ServerMessage(load=pb.Load(load_id=lid, sealed_population=blob, first_user=first, user_count=count)),
        st.integers(0, 2**64 - 1), st.binary(max_size=80), st.sampled_from([0, 1, 2**64 - 1]), st.sampled_from([0, N, 2**40, 2**64 - 1]),
    ),
    st.builds(lambda first, count: pb.ServerMessage(welcome=pb.Welcome(protocol_version=codec.PROTOCOL_VERSION, first_user=first, user_count=count)),
              st.sampled_from([0, 2**64 - 1]), st.sampled_from([0, N, 2**40])),
    st.just(pb.ServerMessage()),
)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.one_of(_valid_round(), round_parts())).SerializeToString())
    for op, where, value in draw(st.lists(st.tuples(st.sampled_from(["flip", "set", "delete", "insert", "truncate"]), st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4)):
        if not data:
            break
        i = where % len(data)
        if op == "flip":
            data[i] ^= 1 << (value % 8)
        elif op == "set":
            data[i] = value
        elif op == "delete":
            del data[i : i + 1 + value % 8]
        elif op == "insert":
            data[i:i] = bytes([value]) * (1 + value % 5)
        else:
            del data[i:]
    return bytes(data)


def _split(message: pb.ServerMessage) -> list[bytes]:
    """A valid request sent in two parts (one assignment each): the first not final."""
    first, second = pb.RoundRequest(), pb.RoundRequest()
    first.CopyFrom(message.round)
    second.CopyFrom(message.round)
    del first.assignments[1:]
    del second.assignments[:1]
    first.final = False
    return [pb.ServerMessage(round=first).SerializeToString(), pb.ServerMessage(round=second).SerializeToString()]


one = lambda strategy: strategy.map(lambda data: [data])  # noqa: E731 - one input

hostile_inputs = st.lists(
    st.one_of(
        one(round_parts().map(lambda m: m.SerializeToString())),
        one(others.map(lambda m: m.SerializeToString())),
        one(mutated()),
        one(st.binary(max_size=300)),
        one(st.builds(lambda tag, body: bytes([tag]) + body, st.integers(0, 255), st.binary(max_size=40))),  # any field number / wire type
        one(_valid_round().map(lambda m: m.SerializeToString())),  # replays and reused ids, charged when valid
        _valid_round().map(_split),
    ),
    min_size=1,
    max_size=5,
).map(lambda groups: [data for group in groups for data in group])


@settings(
    derandomize=True,
    database=None,
    max_examples=EXAMPLES,
    deadline=10_000,  # ms per example: a hang fails the example instead of the whole run
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(inputs=hostile_inputs)
def _fuzz(rig: _Rig, inputs: list[bytes]) -> None:
    assert rig.alive(), "the client died before this example"
    rig.run(rig.example(inputs), timeout_s=9.0)
    assert rig.alive(), f"the client died after: {inputs!r}"


def test_a_fuzzed_client_stays_up_answers_and_charges_only_what_it_reported(rig: _Rig) -> None:
    """The fuzzing, then (in the same test, so that no test order or worker split can separate
    them) its aftermath: nothing escaped as a traceback, and every example was tried."""
    _fuzz(rig)
    assert rig.client is not None
    log = rig.client.log_tail(10_000_000)
    assert "Traceback" not in log and "unexpected failure" not in log, log[-3000:]
    assert rig.alive()
    assert rig.tried >= EXAMPLES, rig.tried
