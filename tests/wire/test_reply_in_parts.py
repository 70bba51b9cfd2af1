"""Client processes stream a round's reply in parts as they draw it (issue 27), through the door:
real ``python -m ldp.wire.client`` processes.

- A raw aggregator written from the .proto (``tests/wire/hostile.py``) asks one real client a
  round larger than a part: the reply comes in many parts, only the last marked final, and
  joined they are exactly the reply ``Shard.answer`` gives in process for the same users, key
  and ledger — report for report. The client's ledger, queried after, has charged exactly the
  users whose reports came.
- The same client with its sampler failing in the second slice (``failing_client.py`` wraps the
  real client): the parts drawn before the failure arrive, then a final part with the error;
  the ledger the aggregator queries next charged exactly the users whose reports arrived (they
  left), and nobody else; the process stays up and answers the next round.
- The real aggregator (``launch_local``, 1 and 2 processes) over rounds of several parts per
  client: the reports are bit-identical to in process, so streaming changes no result.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from ldp.local.messages import Assignment, RoundRequest, SessionKind, Status, Users
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session
from ldp.local.shard import SAMPLE_CHUNK, Shard
from ldp.wire.client import REPLY_PART_BYTES
from ldp.wire.client_config import ClientConfig
from ldp.wire.launcher import launch_local
from ldp.wire.v1 import aggregator_pb2 as pb
from tests.local.test_memoized_reports import PREFIX
from tests.waits import PROCESS_WAIT_S
from tests.wire.hostile import HostileAggregator, Peer, assignment, randomizer
from tests.wire.proc_helpers import PYTHON, reap
from tests.wire.wire_helpers import population, rr

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

N = 2 * REPLY_PART_BYTES + 1000  # binary_rr: three parts of 1-byte reports; kary_rr (8-byte reports): 17
PREFIX_JSON = {"name": PREFIX.name, "params": PREFIX.params}
FAILING_CLIENT = Path(__file__).with_name("failing_client.py")


def _start(address: str, config: ClientConfig, fail_at: int = 0, extra: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    """A real client of all N users, on the raw aggregator; ``fail_at`` > 0: its sampler's
    ``fail_at``-th call raises (``failing_client.py``), else the client module itself."""
    head = [PYTHON, str(FAILING_CLIENT), str(fail_at), "--"] if fail_at else [PYTHON, "-m", "ldp.wire.client"]
    proc = subprocess.Popen([*head, "--connect", address, "--config", "-", "--shard", "0/1", *extra], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(config.dumps().encode())
    proc.stdin.close()
    return proc


async def _raw_reply(peer: Peer, session: int, rnd: int, assignments: list[pb.Assignment]) -> list[pb.RoundReply]:
    await peer.send(pb.ServerMessage(round=pb.RoundRequest(session_id=session, session_kind=2, round=rnd, deadline_s=60.0, assignments=assignments, final=True)))
    parts: list[pb.RoundReply] = []
    while not parts or not parts[-1].final:
        msg = await peer.recv(PROCESS_WAIT_S)
        if msg.WhichOneof("kind") == "reply":
            parts.append(msg.reply)
    return parts


def _joined(parts: list[pb.RoundReply]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Each request's (reports, refusal flags) over the parts, joined in order, as bytes are read."""
    out: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {}
    for part in parts:
        for r in part.results:
            values, refused = out.setdefault(int(r.request_id), ([], []))
            values.append(np.frombuffer(r.values, dtype=np.dtype(r.dtype)))
            refused.append(np.unpackbits(np.frombuffer(r.refused, dtype=np.uint8), count=int(r.user_count)).astype(bool))
    return {rid: (np.concatenate(v), np.concatenate(f)) for rid, (v, f) in out.items()}


ROUND = [
    assignment(1, 0, N, randomizer("binary_rr", 0.25)),
    assignment(2, 0, N, randomizer("kary_rr", 0.25, PREFIX_JSON)),
]


async def test_a_round_arrives_in_parts_that_join_to_the_in_process_answer() -> None:
    spec = population(n=N, budget=1.0, seed=31)
    async with HostileAggregator() as agg:
        proc = _start(agg.address, ClientConfig(population=spec, key_salt=b""))  # the experiment vouches: the seeded key, reproducible
        try:
            peer = await agg.accept()
            await peer.handshake(0, N)
            parts = await _raw_reply(peer, 5, 0, ROUND)
            units = await peer.ledger(PROCESS_WAIT_S)
        finally:
            reap(proc)
    assert len(parts) >= 2 + 8 * N // REPLY_PART_BYTES and [p.final for p in parts] == [False] * (len(parts) - 1) + [True]
    assert not any(p.error or any(r.error for r in p.results) for p in parts)
    got = _joined(parts)
    shard = Shard(spec, 0, N)  # the same users, key and (fresh) ledger, in process
    expected = shard.answer(
        RoundRequest(5, SessionKind.INTERACTIVE, 0, (Assignment(1, Users.range(0, N), rr(0.25)), Assignment(2, Users.range(0, N), rr(0.25, PREFIX, "kary_rr"))))
    )
    for r in expected.results:
        np.testing.assert_array_equal(got[r.request_id][0], np.asarray(r.values).ravel())
        np.testing.assert_array_equal(got[r.request_id][1], np.asarray(r.refused, dtype=bool))
    np.testing.assert_array_equal(units, shard.ledger.spent_units())


async def test_a_sampler_failing_mid_round_charges_exactly_the_parts_that_left() -> None:
    spec = population(n=N, budget=1.0, seed=32)
    async with HostileAggregator() as agg:
        proc = _start(agg.address, ClientConfig(population=spec, key_salt=b""), fail_at=REPLY_PART_BYTES // SAMPLE_CHUNK + 1)
        try:
            peer = await agg.accept()
            await peer.handshake(0, N)
            failed = await _raw_reply(peer, 5, 0, [assignment(1, 0, N, randomizer("binary_rr", 0.25))])
            units = await peer.ledger(PROCESS_WAIT_S)
            after = await _raw_reply(peer, 5, 1, [assignment(2, 0, 10, randomizer("binary_rr", 0.25))])
            assert proc.poll() is None  # still up
        finally:
            reap(proc)
    # Slices of REPLY_PART_BYTES users, drawn SAMPLE_CHUNK at a time: the failure is the second slice's first call.
    assert [bool(p.results) for p in failed] == [True, False] and failed[-1].final
    assert f"the {REPLY_PART_BYTES} reports already sent stay charged; nothing else was" in failed[-1].error, failed[-1].error
    assert "RuntimeError: the sampler broke (failing_client.py)" in failed[-1].error
    sent = int(sum(r.user_count for p in failed for r in p.results))
    assert sent == REPLY_PART_BYTES
    assert (units[:sent] > 0).all() and not units[sent:].any()  # charged: exactly the users whose reports left
    assert not after[-1].error and len(_joined(after)[2][0]) == 10


async def test_reply_part_bytes_sets_the_parts() -> None:
    """``--reply-part-bytes 65536``: parts of 2^16 one-byte reports (a slice is at least
    SAMPLE_CHUNK users), the same reports as the default parts."""
    spec = population(n=N, budget=1.0, seed=34)
    got = []
    for extra in ((), ("--reply-part-bytes", str(1 << 16))):
        async with HostileAggregator() as agg:
            proc = _start(agg.address, ClientConfig(population=spec, key_salt=b""), extra=extra)
            try:
                peer = await agg.accept()
                await peer.handshake(0, N)
                got.append(await _raw_reply(peer, 5, 0, [assignment(1, 0, N, randomizer("binary_rr", 0.25))]))
            finally:
                reap(proc)
    default, small = got
    assert len(default) == -(-N // REPLY_PART_BYTES) and len(small) == -(-N // (1 << 16))
    assert [r.user_count for p in small for r in p.results][:-1] == [1 << 16] * (len(small) - 1)
    np.testing.assert_array_equal(_joined(default)[1][0], _joined(small)[1][0])


@pytest.mark.parametrize("value", ["0", "-1", str((64 << 20) + 1)])
def test_a_reply_part_size_out_of_range_is_one_line(value: str) -> None:
    out = subprocess.run(
        [PYTHON, "-m", "ldp.wire.client", "--connect", "127.0.0.1:1", "--config", "-", "--reply-part-bytes", value],
        input="{}", capture_output=True, text=True, timeout=PROCESS_WAIT_S,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"reply_part_bytes must be in 1..{64 << 20} (a part's reports fit one message), got {value}" in out.stderr, out.stderr


@pytest.mark.parametrize("processes", [1, 2])
async def test_rounds_of_many_parts_are_identical_over_grpc_and_in_process(processes: int) -> None:
    n = N
    spec = population(n=n, budget=1.0, seed=33)
    asked = [
        Request.of(range(n), rr(0.25)),
        Request.of(np.random.default_rng(1).permutation(n)[: n // 2], rr(0.25, PREFIX, "kary_rr")),
    ]
    outcomes = []
    for oracle in (InProcessLROracle(spec), None):
        if oracle is None:
            async with launch_local(spec, processes=processes) as grpc_oracle:
                outcomes.append(await Session(grpc_oracle, SessionKind.NON_INTERACTIVE).round(asked))
        else:
            outcomes.append(await Session(oracle, SessionKind.NON_INTERACTIVE).round(asked))
    for here, there in zip(*outcomes):
        assert (here.status == Status.ANSWERED).all() and (there.status == Status.ANSWERED).all()
        np.testing.assert_array_equal(np.asarray(here.values), np.asarray(there.values))


def test_failing_client_wraps_the_real_client() -> None:
    """The wrapper runs ``ldp.wire.client.main`` itself: its usage line is the client's."""
    out = subprocess.run([PYTHON, str(FAILING_CLIENT), "1", "--", "--help"], capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert out.returncode == 0 and "--connect" in out.stdout and "--shard" in out.stdout


def test_the_aggregator_takes_parts_then_a_final_error_as_the_rounds_error() -> None:
    """The real aggregator's check (``codec.ReplyCheck``) of what a failing client sends: parts
    copied into the final array, then a final part with a round-level error, is that error."""
    from ldp.wire.codec import Expected, ReplyCheck, report_format

    spec = population(n=10)
    fmt = report_format(rr(0.25), spec.concept_class.schema)
    into = np.zeros(16, dtype=np.uint8)
    check = ReplyCheck("0/1", 5, 0, [Expected(1, 16, fmt, into)])
    ok = pb.Result(request_id=1, user_count=8, refused=b"\x00", dtype=fmt.dtype.str if fmt.dtype else "", width=0, values=bytes(8))
    assert check.add(pb.RoundReply(session_id=5, round=0, results=[ok])) == ""
    assert check.add(pb.RoundReply(session_id=5, round=0, error="the shard failed to answer (the 8 reports already sent stay charged; nothing else was): RuntimeError: x", final=True)) == ""
    reply = check.finish()
    assert not reply.results and reply.error.startswith("shard 0/1: the shard failed to answer (the 8 reports already sent stay charged")
