"""A hostile aggregator, speaking the .proto directly to real client processes.

It is the untrusted analyst of KLNRS: it chooses every id, range, ε, query and parameter, may
send malformed or oversized messages, and keeps every byte it receives. The tests in
``test_hostile_aggregator.py`` drive real ``python -m ldp.wire.client`` processes through it and
keep their own tally of what each user reported, independently of the client's ledger.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np

from ldp.core.budget import allowance_units, charge_units
from ldp.local.messages import RoundReply
from ldp.wire import codec
from ldp.wire.aggregator import SERVICE
from ldp.wire.v1 import aggregator_pb2 as pb

BIT0 = {"name": "field", "params": {"field": "x", "index": 0}}
BIT1 = {"name": "field", "params": {"field": "x", "index": 1}}
RECORD = {"name": "record", "params": {}}


def randomizer(kind: str, epsilon: float, query: Any = BIT0, params: Any = None) -> pb.Randomizer:
    query_json = query if isinstance(query, str) else json.dumps(query)
    params_json = params if isinstance(params, str) else json.dumps(params or {})
    return pb.Randomizer(kind=kind, query_json=query_json, epsilon=epsilon, params_json=params_json)


def assignment(request_id: int, start: int, stop: int, r: pb.Randomizer) -> pb.Assignment:
    return pb.Assignment(request_id=request_id, range=pb.UserRange(start=start, stop=stop), randomizer=r)


class Peer:
    """One client's stream, seen from the hostile server: raw bytes in and out."""

    def __init__(self, context: grpc.aio.ServicerContext) -> None:
        self.context = context
        self.received: list[bytes] = []  # every byte that arrived, for the decoding tests
        self.done = asyncio.Event()

    async def send(self, message: pb.ServerMessage | bytes) -> None:
        await self.context.write(message if isinstance(message, bytes) else message.SerializeToString())

    async def recv(self, timeout_s: float = 20.0) -> pb.ClientMessage:
        data = await asyncio.wait_for(self.context.read(), timeout_s)
        if data is grpc.aio.EOF:
            raise EOFError("the client ended the stream")
        self.received.append(bytes(data))
        return pb.ClientMessage.FromString(data)

    async def handshake(self, first_user: int, user_count: int) -> pb.Ready:
        hello = await self.recv()
        assert hello.WhichOneof("kind") == "hello"
        await self.send(pb.ServerMessage(welcome=pb.Welcome(protocol_version=codec.PROTOCOL_VERSION, first_user=first_user, user_count=user_count)))
        ready = await self.recv()
        assert ready.WhichOneof("kind") == "ready", ready
        return ready.ready

    async def round(self, session_id: int, rnd: int, assignments: list[pb.Assignment], kind: int = 2, timeout_s: float = 20.0) -> RoundReply:
        request = pb.RoundRequest(session_id=session_id, session_kind=kind, round=rnd, deadline_s=30.0, assignments=assignments, final=True)
        await self.send(pb.ServerMessage(round=request))
        return await self.reply(timeout_s)

    async def reply(self, timeout_s: float = 20.0) -> RoundReply:
        parts = []
        while True:
            msg = await self.recv(timeout_s)
            if msg.WhichOneof("kind") != "reply":
                continue
            parts.append(msg.reply)
            if msg.reply.final:
                # Each Result on its own: the codec would join consecutive results that share a
                # request id (the parts of one result), and this aggregator reuses ids on purpose.
                head = parts[0]
                results = [codec.decode_reply([pb.RoundReply(results=[r])]).results[0] for part in parts for r in part.results]
                return RoundReply(int(head.session_id), int(head.round), tuple(results), head.error)

    async def ledger(self, timeout_s: float = 20.0) -> np.ndarray:
        await self.send(pb.ServerMessage(ledger_query=pb.LedgerQuery(query_id=1)))
        parts = []
        while True:
            msg = await self.recv(timeout_s)
            if msg.WhichOneof("kind") == "ledger":
                parts.append(msg.ledger)
                if msg.ledger.final:
                    return codec.decode_ledger(parts)


class HostileAggregator:
    """A grpc.aio server whose streams are handed to the test as ``Peer``s (raw bytes both ways)."""

    def __init__(self) -> None:
        self.peers: asyncio.Queue[Peer] = asyncio.Queue()
        self._all: list[Peer] = []
        self.server: grpc.aio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> HostileAggregator:
        server = grpc.aio.server(options=codec.channel_options() + [("grpc.so_reuseport", 0)])

        async def connect(request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
            peer = Peer(context)
            self._all.append(peer)
            await self.peers.put(peer)
            await peer.done.wait()  # the stream stays open until the test lets it go

        handler = grpc.stream_stream_rpc_method_handler(connect, request_deserializer=lambda b: b, response_serializer=lambda b: b)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Connect": handler}),))
        self.port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self.server = server
        return self

    async def __aexit__(self, *exc: object) -> None:
        for p in self._all:
            p.done.set()
        if self.server is not None:
            await self.server.stop(0.5)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def accept(self, timeout_s: float = 30.0) -> Peer:
        return await asyncio.wait_for(self.peers.get(), timeout_s)


@dataclass
class Tally:
    """What each user reported, counted by the aggregator from the replies alone."""

    first_user: int
    count: int
    budget: float
    units: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.units = np.zeros(self.count, dtype=object)  # exact Python ints

    def add(self, start: int, stop: int, epsilon: float, reply_result: Any) -> None:
        """Charge the users answered in one result (a range request) by the ε it asked."""
        answered = np.arange(start, stop)[~np.asarray(reply_result.refused, dtype=bool)] if len(reply_result.refused) else np.zeros(0, dtype=np.int64)
        if reply_result.error:
            assert len(reply_result.values) == 0
            return
        assert len(answered) == len(reply_result.values)
        self.units[answered - self.first_user] += charge_units(epsilon)

    @property
    def allowance(self) -> int:
        return allowance_units(self.budget)

    def overspent(self) -> int:
        return int(sum(1 for u in self.units if u > self.allowance))
