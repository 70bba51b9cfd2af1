"""A client refuses a Welcome of another protocol version (docs/protocol.md, Versioning; I4).

Messages of another version mean other things: a client that served rounds under them could
answer a request it misreads. A hostile aggregator (the .proto spoken directly) sends Welcome
with versions 0, 2 and 99 to a real ``python -m ldp.wire.client`` process: the client answers
``Ready{error}`` naming both versions, serves no round, exits 2 (turned away) with one line. The
aggregator refuses a Hello of another version likewise (tests/wire/test_faults.py).

Broken variant: ``test_the_broken_client_would_serve_rounds`` runs the same script against a
client told to speak the aggregator's wrong version (``--protocol-version``), which therefore
accepts the Welcome: it answers Ready without error and then reports, which is what the
refusal above prevents when the versions differ.
"""

from __future__ import annotations

import pytest

from ldp.wire import codec
from ldp.wire.client import EXIT_REJECTED
from ldp.wire.launcher import stop_clients
from ldp.wire.v1 import aggregator_pb2 as pb
from tests.wire.hostile import BIT0, HostileAggregator, assignment, randomizer
from tests.wire.wire_helpers import client_exit_code, spawn_one_client

pytestmark = pytest.mark.timeout(120)

N = 100


@pytest.mark.parametrize("version", [0, 2, 99, 2**32 - 1])
async def test_a_welcome_of_another_version_is_refused_naming_both(version: int) -> None:
    assert version != codec.PROTOCOL_VERSION
    async with HostileAggregator() as agg:
        client = spawn_one_client(agg.address, n=N)
        try:
            peer = await agg.accept()
            assert (await peer.recv()).WhichOneof("kind") == "hello"
            await peer.send(pb.ServerMessage(welcome=pb.Welcome(protocol_version=version, first_user=0, user_count=N)))
            ready = (await peer.recv()).ready
            want = f"protocol version mismatch: the aggregator speaks version {version}, this client speaks version {codec.PROTOCOL_VERSION}"
            assert ready.error == want and not ready.description_json, ready
            assert await client_exit_code(client, 15) == EXIT_REJECTED
            log = client.log_tail()
            assert f"refusing: {want}" in log and "Traceback" not in log and len(log.splitlines()) == 1, log
        finally:
            stop_clients([client], timeout_s=1.0)


async def test_the_broken_client_would_serve_rounds() -> None:
    """The broken variant: a client speaking version 99 accepts a Welcome of version 99 and
    answers a round; the refusal above is what stands between a mismatch and that."""
    async with HostileAggregator() as agg:
        client = spawn_one_client(agg.address, "--protocol-version", "99", n=N)
        try:
            peer = await agg.accept()
            hello = (await peer.recv()).hello
            assert hello.protocol_version == 99
            await peer.send(pb.ServerMessage(welcome=pb.Welcome(protocol_version=99, first_user=0, user_count=N)))
            ready = (await peer.recv()).ready
            assert not ready.error and ready.user_count == N
            reply = await peer.round(1, 0, [assignment(1, 0, N, randomizer("binary_rr", 0.5, BIT0))])
            assert reply.results and not reply.error
        finally:
            stop_clients([client], timeout_s=1.0)
