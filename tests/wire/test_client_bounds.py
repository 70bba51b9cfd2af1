"""A client's bounds against an aggregator that stalls, floods, squats or ends the run badly.

Real ``python -m ldp.wire.client`` processes, driven by the hostile aggregator of
``tests/wire/hostile.py`` (or the real one, for the claim contest). What is checked:

- no Welcome after Hello: the client exits 1 within ``--welcome-timeout``, with one clear line;
- a round request split into parts that never ends: dropped after its deadline (one log line), a
  late final part is answered with an error, and the next round is answered as usual; at most one
  unfinished request is buffered (a part of another round drops it);
- 300 MB of parts that are never final: the client's resident memory stays bounded (VmRSS from
  /proc) and it stays up;
- deep JSON in a query or in parameters: an error reply, nothing charged, the client stays up;
- errors that quote a huge request are clipped, so the reply still fits in a message;
- a Welcome for 2^40 users (or any range but its own): refused with Ready{error}, exit 2, no
  traceback;
- a claim turned away because another client holds an overlapping one: retried with backoff
  until the other lets go;
- ``Close{failed}`` → exit 3 with the reason on one line; ``Close`` → exit 0; ``launch_local``
  closes a run that raised with ``failed`` set;
- a client process killed: ``launch_local`` and ``ldp-sim clients`` name it (claim and signal) in
  one line, and ``ldp-sim clients`` exits with ``EXIT_CLIENT_DIED`` (never a raw negative code).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from ldp.core.budget import charge_units
from ldp.wire import codec
from ldp.wire.aggregator import GrpcAggregator, ShardClaim, shard_range
from ldp.wire.client import EXIT_CLOSED, EXIT_LOST, EXIT_REJECTED, EXIT_RUN_FAILED
from ldp.wire.launcher import EXIT_CLIENT_DIED, ClientProcess, launch_local, stop_clients
from ldp.wire.v1 import aggregator_pb2 as pb
from ldp.wire.v1 import aggregator_pb2_grpc as pb_grpc
from tests.waits import PROCESS_WAIT_S
from tests.wire.hostile import BIT0, HostileAggregator, Peer, assignment, randomizer
from tests.wire.proc_helpers import PYTHON, reap
from tests.wire.wire_helpers import client_exit_code, population, spawn_one_client

pytestmark = pytest.mark.timeout(120)

N = 1000


async def _log_has(client: ClientProcess, text: str, timeout_s: float = 10.0) -> str:
    end = time.monotonic() + timeout_s
    while text not in (log := client.log_tail(100_000)):
        assert time.monotonic() < end, f"{text!r} not in the client's log: {log}"
        await asyncio.sleep(0.05)
    return log


def _rss(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert match, status
    return int(match.group(1)) * 1024


def _part(session: int, rnd: int, a: list[pb.Assignment], *, final: bool, deadline_s: float = 30.0) -> pb.ServerMessage:
    return pb.ServerMessage(round=pb.RoundRequest(session_id=session, session_kind=2, round=rnd, deadline_s=deadline_s, assignments=a, final=final))


async def _honest_round(peer: Peer, session: int, epsilon: float = 0.01) -> None:
    reply = await peer.round(session, 0, [assignment(1, 0, N, randomizer("binary_rr", epsilon))])
    assert not reply.error and not reply.results[0].error, reply
    assert len(reply.results[0].values) == N


async def test_no_welcome_the_client_exits_1_within_the_timeout() -> None:
    async with HostileAggregator() as agg:
        client = spawn_one_client(agg.address, "--welcome-timeout", "2")
        try:
            peer = await agg.accept()
            assert (await peer.recv()).WhichOneof("kind") == "hello"
            assert await client_exit_code(client, 15) == EXIT_LOST  # (15 s bounds the wait; the log names the 2 s timeout)
            log = client.log_tail()
            assert "no Welcome from the aggregator within 2 s of Hello" in log and "Traceback" not in log, log
        finally:
            stop_clients([client], timeout_s=1.0)


async def test_a_partial_round_is_dropped_after_its_deadline_and_the_next_round_is_answered() -> None:
    async with HostileAggregator() as agg:
        client = spawn_one_client(agg.address)
        try:
            peer = await agg.accept()
            await peer.handshake(0, N)
            # The first part of a round whose deadline is 1.5 s; the rest never comes (in time).
            await peer.send(_part(1, 0, [assignment(1, 0, N // 2, randomizer("binary_rr", 0.25))], final=False, deadline_s=1.5))
            # The client's own line names the deadline it applied (its timing is not judged here).
            log = await _log_has(client, "dropped the unfinished request of session 1 round 0: its remaining parts did not arrive within 1.5 s")
            # Its final part, late: answered with an error, nothing charged.
            await peer.send(_part(1, 0, [assignment(2, N // 2, N, randomizer("binary_rr", 0.25))], final=True))
            late = await peer.reply()
            assert (late.session_id, late.round) == (1, 0) and "dropped the request" in late.error and not late.results
            # One unfinished request at a time: a part of another round drops the one buffered.
            await peer.send(_part(2, 0, [assignment(1, 0, N, randomizer("binary_rr", 0.25))], final=False))
            await peer.send(_part(3, 0, [assignment(1, 0, 10, randomizer("binary_rr", 0.25))], final=False))
            await peer.send(_part(3, 0, [assignment(2, 10, 20, randomizer("binary_rr", 0.25))], final=True))
            both = await peer.reply()
            assert (both.session_id, not both.error, [r.request_id for r in both.results]) == (3, True, [1, 2])
            await _log_has(client, "dropped the unfinished request of session 2 round 0: a part of session 3 round 0 came first")
            await _honest_round(peer, 4)
            expected = np.full(N, charge_units(0.01), dtype=np.int64)
            expected[:20] += charge_units(0.25)
            np.testing.assert_array_equal(await peer.ledger(), expected)  # the dropped requests charged nobody
            assert client.process.poll() is None and "Traceback" not in log
        finally:
            stop_clients([client], timeout_s=1.0)


async def test_300_mb_of_never_final_parts_keep_the_client_bounded_and_up() -> None:
    """150 parts of 2 MiB (explicit ids), never final: 100 for one round (200 MB: beyond the
    byte cap), then 50 each for a new round (100 MB: one unfinished request at a time). With a
    32 MiB cap the client's resident memory grows by less than the cap + 64 MiB (measured: ~50 MiB),
    where either rule alone would let it grow by 100 MB or more (the peer saw +490 MB)."""
    cap = 32 << 20
    async with HostileAggregator() as agg:
        client = spawn_one_client(agg.address, "--max-request-bytes", str(cap))
        try:
            peer = await agg.accept()
            await peer.handshake(0, N)
            await _honest_round(peer, 1)  # everything a round needs is imported and warm
            baseline = _rss(client.process.pid)
            ids = np.arange(2 << 20 >> 3, dtype="<i8").tobytes()  # 2 MiB of ids (all outside the shard)
            peak = baseline
            sent = 0
            for j in range(150):
                session = 2 if j < 100 else 100 + j
                await peer.send(_part(session, 0, [pb.Assignment(request_id=1, ids=ids, randomizer=randomizer("binary_rr", 0.01))], final=False))
                sent += len(ids)
                if j % 5 == 4:
                    await asyncio.sleep(0.02)
                    peak = max(peak, _rss(client.process.pid))
            await _honest_round(peer, 3)  # it has read everything, and answers
            peak = max(peak, _rss(client.process.pid))
            assert sent >= 300_000_000
            assert peak - baseline < cap + (64 << 20), (baseline, peak)
            assert client.process.poll() is None
            log = client.log_tail(100_000)
            assert f"dropped the unfinished request of session 2 round 0: its parts exceed {cap} bytes" in log, log
        finally:
            stop_clients([client], timeout_s=1.0)


async def test_deep_json_is_an_error_reply_and_charges_nobody() -> None:
    deep_dict = '{"a": ' * 900 + "1" + "}" * 900  # parses (under the recursion limit), then is refused
    deep_list = "[" * 5000 + "]" * 5000  # RecursionError where it is decoded
    bad = [
        randomizer("binary_rr", 0.01, deep_list),
        randomizer("binary_rr", 0.01, "[" * 200_000),
        randomizer("binary_rr", 0.01, json.dumps({"name": "field", "params": {"field": "x", "index": 0}})[:-1] + ', "deep": ' + deep_list + "}"),
        randomizer("binary_rr", 0.01, BIT0, deep_dict),
        randomizer("binary_rr", 0.01, BIT0, '{"steps": ' + deep_list + "}"),
        randomizer("discrete_laplace", 0.01, BIT0, {"steps": json.loads("[" * 500 + "]" * 500)}),
        randomizer("binary_rr", 0.01, '{"name": "field", "params": ' + deep_dict + "}"),
    ]
    async with HostileAggregator() as agg:
        client = spawn_one_client(agg.address)
        try:
            peer = await agg.accept()
            await peer.handshake(0, N)
            expected = np.zeros(N, dtype=np.int64)
            for j, r in enumerate(bad):
                reply = await peer.round(10 + j, 0, [assignment(1, 0, N, r)])
                if not reply.error and not reply.results[0].error:  # parameters it does not read (binary_rr ignores them)
                    assert j == 3 and len(reply.results[0].values) == N, (j, reply)
                    expected += charge_units(0.01)
                else:
                    assert reply.error or len(reply.results[0].values) == 0, (j, reply)
                assert len(reply.error) <= 1100 and all(len(x.error) <= 1100 for x in reply.results)  # errors are clipped
                assert client.process.poll() is None
            np.testing.assert_array_equal(await peer.ledger(), expected)  # charged exactly for what it answered
            await _honest_round(peer, 99)
            assert "Traceback" not in client.log_tail(100_000)
        finally:
            stop_clients([client], timeout_s=1.0)


async def test_errors_that_quote_a_huge_request_are_clipped_and_the_reply_is_sent() -> None:
    """Four parts of 20 MB, each an assignment whose query names a 20 MB kind: every error quotes
    it. Unclipped, the reply (80 MB in one part) exceeded the 64 MiB message limit and the client
    lost its stream (exit 1); clipped, it answers with four short errors and stays up."""
    big = '{"name": "' + "a" * (20 << 20) + '"}'
    async with HostileAggregator() as agg:
        client = spawn_one_client(agg.address)
        try:
            peer = await agg.accept()
            await peer.handshake(0, N)
            for j in range(4):
                await peer.send(_part(1, 0, [assignment(j, 0, N, randomizer("binary_rr", 0.01, big))], final=j == 3))
            reply = await peer.reply(timeout_s=30)
            assert [r.request_id for r in reply.results] == [0, 1, 2, 3]
            assert all(r.error and len(r.error) < 1100 and len(r.values) == 0 for r in reply.results), reply
            await _honest_round(peer, 2)
        finally:
            stop_clients([client], timeout_s=1.0)


@pytest.mark.parametrize("first, count", [(0, 2**40), (2**64 - 1, 2**64 - 1), (1, N), (0, N - 1)])
async def test_a_welcome_for_another_range_is_refused_cleanly(first: int, count: int) -> None:
    async with HostileAggregator() as agg:
        client = spawn_one_client(agg.address)
        try:
            peer = await agg.accept()
            assert (await peer.recv()).WhichOneof("kind") == "hello"
            await peer.send(pb.ServerMessage(welcome=pb.Welcome(protocol_version=codec.PROTOCOL_VERSION, first_user=first, user_count=count)))
            ready = (await peer.recv()).ready
            assert f"assigned users {first}+{count}" in ready.error and f"is 0..{N - 1}" in ready.error, ready
            assert await client_exit_code(client, 15) == EXIT_REJECTED
            log = client.log_tail()
            assert "refusing" in log and "Traceback" not in log and len(log.splitlines()) == 1, log
        finally:
            stop_clients([client], timeout_s=1.0)


async def test_a_claim_held_by_another_client_is_retried_until_it_is_free() -> None:
    """A squatter says Hello for the same claim and holds it (it never answers Welcome); the real
    client is turned away ("overlaps"), retries with backoff (0.5 s, 1 s, 2 s...), and gets in once
    the squatter lets go."""
    spec = population(n=N, seed=5)
    async with GrpcAggregator(spec.description()) as aggregator:
        channel = grpc.aio.insecure_channel(aggregator.address)
        squat = pb_grpc.AggregatorStub(channel).Connect()
        await squat.write(pb.ClientMessage(hello=pb.Hello(protocol_version=codec.PROTOCOL_VERSION, shard_index=0, shard_count=1, sub_count=1)))
        assert (await squat.read()).WhichOneof("kind") == "welcome"  # the aggregator holds 0..N-1 for it
        client = spawn_one_client(aggregator.address)
        try:
            log = await _log_has(client, "trying the claim again in 1 s", timeout_s=20)
            assert "overlaps connected shard 0/1" in log and "trying the claim again in 0.5 s" in log, log
            squat.cancel()  # the squatter lets go; the reservation is released
            await channel.close()
            await aggregator.wait_for_shards(20)
            assert [s.key for s in aggregator.shards] == ["0/1"]
            await aggregator.close("done")
            assert await client_exit_code(client, 10) == EXIT_CLOSED
        finally:
            stop_clients([client], timeout_s=1.0)


async def test_a_claim_that_stays_taken_gives_up_after_the_connect_timeout() -> None:
    async with HostileAggregator() as agg:
        client = spawn_one_client(agg.address, connect_timeout_s=2.5)
        try:
            started = time.monotonic()
            attempts = 0
            while client.process.poll() is None and time.monotonic() - started < 20:
                try:
                    peer = await agg.accept(timeout_s=0.5)
                except TimeoutError:
                    continue
                attempts += 1
                await peer.recv()
                await peer.send(pb.ServerMessage(close=pb.Close(reason="shard 0/1 (users 0..999) overlaps connected shard 0/1 (users 0..999)")))
                peer.done.set()
            assert await client_exit_code(client, 10) == EXIT_REJECTED
            assert 3 <= attempts <= 4  # 0 s, 0.5 s, 1.5 s, (2.5 s): then it is spent (the log names the 2.5 s)
            log = client.log_tail()
            assert "still overlaps a connected shard after 2.5 s; giving up" in log and "Traceback" not in log, log
        finally:
            stop_clients([client], timeout_s=1.0)


@pytest.mark.parametrize("failed, code, line", [(True, EXIT_RUN_FAILED, "the experiment failed: the deadline passed"), (False, EXIT_CLOSED, "closed the connection: the deadline passed")])
async def test_close_says_how_the_run_ended(failed: bool, code: int, line: str) -> None:
    async with HostileAggregator() as agg:
        client = spawn_one_client(agg.address)
        try:
            peer = await agg.accept()
            await peer.handshake(0, N)
            await peer.send(pb.ServerMessage(close=pb.Close(reason="the deadline passed\nand more", failed=failed)))
            assert await client_exit_code(client, 10) == code
            log = client.log_tail()
            assert line in log and len(log.splitlines()) == 1, log
        finally:
            stop_clients([client], timeout_s=1.0)


async def test_launch_local_closes_a_run_that_raised_as_failed() -> None:
    clients: list[ClientProcess] = []
    with pytest.raises(RuntimeError, match="boom"):
        async with launch_local(population(n=200), processes=2, on_client_exit=None) as oracle:
            clients = oracle.clients
            raise RuntimeError("boom")
    assert [c.process.returncode for c in clients] == [EXIT_RUN_FAILED, EXIT_RUN_FAILED]
    async with launch_local(population(n=200), processes=2, on_client_exit=None) as oracle:
        clients = oracle.clients
    assert [c.process.returncode for c in clients] == [EXIT_CLOSED, EXIT_CLOSED]


async def test_launch_local_names_a_client_killed_while_the_experiment_runs() -> None:
    lines: list[str] = []
    async with launch_local(population(n=200), processes=2, on_client_exit=lines.append) as oracle:
        victim = next(c for c in oracle.clients if c.claim.key == "1/2")
        victim.process.send_signal(signal.SIGKILL)
        end = time.monotonic() + PROCESS_WAIT_S
        while not lines:
            assert time.monotonic() < end, "the launcher did not report the killed client"
            await asyncio.sleep(0.05)
    assert len(lines) == 1 and f"client 1/2 (pid {victim.process.pid}) was killed by SIGKILL" in lines[0], lines


async def test_ldp_sim_clients_names_a_killed_client_and_exits_non_zero(tmp_path: Path) -> None:
    spec = population(n=N, seed=5)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.to_json()))
    async with HostileAggregator() as agg:
        parent = subprocess.Popen(
            [PYTHON, "-m", "ldp.cli.main", "clients", "--connect", agg.address, "--population", str(spec_file), "--processes", "2", "--connect-timeout", "30"],
            stderr=subprocess.PIPE,
        )
        try:
            peers: dict[int, tuple[Peer, int]] = {}
            for _ in range(2):
                peer = await agg.accept()
                hello = (await peer.recv()).hello
                lo, hi = shard_range(N, ShardClaim(hello.shard_index, hello.shard_count, hello.sub_index, hello.sub_count))
                await peer.send(pb.ServerMessage(welcome=pb.Welcome(protocol_version=codec.PROTOCOL_VERSION, first_user=lo, user_count=hi - lo)))
                assert not (await peer.recv()).ready.error
                peers[hello.sub_index] = (peer, int(hello.client_name.rsplit(":", 1)[1]))
            victim_pid = peers[1][1]
            os.kill(victim_pid, signal.SIGKILL)
            await asyncio.sleep(1.0)
            await peers[0][0].send(pb.ServerMessage(close=pb.Close(reason="the experiment is over")))
            end = time.monotonic() + PROCESS_WAIT_S
            while parent.poll() is None:
                assert time.monotonic() < end, "ldp-sim clients did not exit"
                await asyncio.sleep(0.05)
            err = parent.stderr.read().decode() if parent.stderr else ""
        finally:
            reap(parent)
    assert parent.returncode == EXIT_CLIENT_DIED, err
    killed = [line for line in err.splitlines() if "killed" in line]
    assert killed == [f"ldp-sim clients: client 0/1.1/2 (pid {victim_pid}) was killed by SIGKILL"], err
    assert "Traceback" not in err and "exit 4" in err, err
