"""Faults: wrong protocol version, a client killed mid-round, a missed deadline (late reply
discarded), the aggregator killed, an aggregator that is not up yet."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from ldp.core.errors import ParameterError
from ldp.local.messages import SessionKind, Status
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session
from ldp.wire import codec
from ldp.wire.aggregator import GrpcAggregator
from ldp.wire.client_config import ClientConfig
from ldp.wire.launcher import launch_local
from tests.waits import PROCESS_WAIT_S
from tests.wire.proc_helpers import PYTHON, free_port, read_until, reap, wait_exit
from tests.wire.wire_helpers import ledger_of, population, rr

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds


async def _wait_process(proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    end = time.monotonic() + timeout_s
    while proc.poll() is None:
        assert time.monotonic() < end, "client process did not exit"
        await asyncio.sleep(0.05)
    return proc.returncode


async def test_wrong_protocol_version_is_turned_away_naming_both_versions() -> None:
    async with GrpcAggregator(population(n=100).description()) as aggregator:
        proc = subprocess.Popen(
            [PYTHON, "-m", "ldp.wire.client", "--connect", aggregator.address, "--config", "-", "--protocol-version", "99", "--connect-timeout", "10"],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdin is not None
        proc.stdin.write(ClientConfig(population=population(n=100)).dumps().encode())
        proc.stdin.close()
        try:
            code = await _wait_process(proc, 20)
            err = proc.stderr.read().decode() if proc.stderr else ""
        finally:
            reap(proc)
        assert code == 2, err
        assert "client speaks version 99" in err and f"aggregator speaks version {codec.PROTOCOL_VERSION}" in err, err
        assert aggregator.shards == []
        assert any("version 99" in e for e in aggregator.events)


async def test_client_killed_mid_round_is_reported_missing_and_the_session_goes_on() -> None:
    """SIGKILL a client while it works on a round: that round returns at once with its users
    MISSING (the reason names the shard and its range), later rounds report them MISSING too (not
    an exception), the session goes on with the other shard; the time from the kill to the
    round's report is measured (docs/protocol.md quotes it)."""
    n = 2000
    deadline = 10.0
    async with launch_local(population(n=n), processes=2, extra_args={"1/2": ["--answer-delay", "20"]}) as oracle:
        s = Session(oracle, SessionKind.INTERACTIVE, deadline_s=deadline)
        task = asyncio.ensure_future(s.round([Request.of(range(n), rr(0.25))]))
        await asyncio.sleep(0.5)  # shard 1/2 has the request and is "working" (delayed)
        victim = next(c for c in oracle.clients if c.claim.key == "1/2")
        killed = time.monotonic()
        victim.process.send_signal(signal.SIGKILL)
        (r,) = await asyncio.wait_for(task, deadline + 30.0)
        death_to_report = time.monotonic() - killed
        print(f"\nSIGKILL to the round's report: {death_to_report * 1000:.1f} ms (round deadline {deadline:g} s)")
        # No clock assert: the reason below ("disconnected", not "missed the deadline") says the kill
        # ended the round, not its deadline; wait_for above only bounds the wait.
        np.testing.assert_array_equal(r.missing_users, np.arange(n // 2, n))
        np.testing.assert_array_equal(r.answered_users, np.arange(0, n // 2))
        assert any("shard 1/2 (users 1000..1999) disconnected" in e for e in r.errors), r.errors
        # The session goes on with the rest; the dead shard's users are no longer held.
        assert [sh.key for sh in oracle.shards] == ["0/2"]
        assert [(d.key, d.first_user, d.count) for d in oracle.departed] == [("1/2", n // 2, n // 2)]
        (r2,) = await s.round([Request.of(range(0, n // 2), rr(0.25))])
        assert (r2.status == Status.ANSWERED).all() and r2.errors == ()
        # Users only the dead shard held: MISSING with a reason naming it and its range, no exception.
        both, lost_only = await s.round([Request.of(range(n), rr(0.25)), Request.of([n - 1, n // 2], rr(0.25))])
        np.testing.assert_array_equal(both.answered_users, np.arange(0, n // 2))
        np.testing.assert_array_equal(both.missing_users, np.arange(n // 2, n))
        assert (lost_only.status == Status.MISSING).all()
        assert lost_only.errors == (f"shard 1/2 (users 1000..1999) disconnected earlier: 2 user(s) of request {lost_only.request_id} are MISSING",)
        assert any("1000 user(s)" in e and "shard 1/2 (users 1000..1999)" in e for e in both.errors), both.errors
        # An id no shard ever held is still a programming error, before anything is sent.
        with pytest.raises(ParameterError, match="no connected shard holds"):
            await s.round([Request.of([n + 5], rr(0.25))])
        assert any("shard 1/2 disconnected" in e for e in oracle.aggregator.events)


async def test_missed_deadline_reports_missing_and_a_late_reply_is_discarded() -> None:
    n = 1000
    spec = population(n=n)

    async def program(oracle: object, deadline0: float) -> tuple[list, float]:
        s = Session(oracle, SessionKind.INTERACTIVE, deadline_s=deadline0)  # type: ignore[arg-type]
        t = time.monotonic()
        r0 = await s.round([Request.of(range(n), rr(0.25))])
        took = time.monotonic() - t
        s.deadline_s = 10.0
        r1 = await s.round([Request.of(range(0, n, 3), rr(0.25, kind="discrete_laplace"))])
        return r0 + r1, took

    reference, _ = await program(InProcessLROracle(spec), 30.0)
    async with launch_local(spec, processes=2, extra_args={"1/2": ["--answer-delay", "1.5"]}) as oracle:
        (r0, r1), took = await program(oracle, 0.5)
        # No clock assert on `took`: shard 1 answers after 1.5 s, so its users being MISSING (not
        # ANSWERED) is what says the round did not wait for it past the 0.5 s deadline.
        np.testing.assert_array_equal(r0.missing_users, np.arange(n // 2, n))
        np.testing.assert_array_equal(r0.answered_users, np.arange(n // 2))
        # Round 1 gets the right answer, not shard 1's late round-0 reply.
        assert (r1.status == Status.ANSWERED).all()
        assert r1.values.tobytes() == reference[1].values.tobytes()
        assert any("missed the 0.5 s deadline" in e for e in oracle.aggregator.events)
        # The late shard did answer round 0 on its side (it charged its users): ledgers agree.
        np.testing.assert_array_equal(await ledger_of(oracle), await _reference_ledger(spec))


async def _reference_ledger(spec: object) -> np.ndarray:
    o = InProcessLROracle(spec)  # type: ignore[arg-type]
    s = Session(o, SessionKind.INTERACTIVE)
    await s.round([Request.of(range(spec.size), rr(0.25))])  # type: ignore[attr-defined]
    await s.round([Request.of(range(0, spec.size, 3), rr(0.25, kind="discrete_laplace"))])  # type: ignore[attr-defined]
    return o.ledger_spent_units()


def _spec_config(tmp_path: Path, users: int) -> tuple[Path, Path]:
    """The experiment's side: `ldp-sim population` writes rr-demo's spec; a client config holds it."""
    spec = tmp_path / "spec.json"
    subprocess.run([PYTHON, "-m", "ldp.cli.main", "population", "rr-demo", "--users", str(users), "--out", str(spec)], check=True, capture_output=True, timeout=PROCESS_WAIT_S)
    config = tmp_path / "client.json"
    config.write_text(json.dumps({"format": 1, "population": json.loads(spec.read_text())}))
    return spec, config


def test_aggregator_killed_clients_exit_with_a_clear_message(tmp_path: Path) -> None:
    _, config = _spec_config(tmp_path, 1000)
    serve = subprocess.Popen(
        [PYTHON, "-m", "ldp.cli.main", "serve", "--bind", "127.0.0.1:0", "rr-demo", "--users", "1000", "--out", str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    client = None
    try:
        line = read_until(serve.stdout, "for 1000 users", 20)  # type: ignore[arg-type]
        address = line.split("listening on ")[1].split()[0]
        # Half the users only: the aggregator keeps waiting for the other half.
        client = subprocess.Popen([PYTHON, "-m", "ldp.wire.client", "--connect", address, "--config", str(config), "--shard", "0/2"], stderr=subprocess.PIPE)
        read_until(serve.stdout, "shard 0/2 connected", 20)  # type: ignore[arg-type]
        serve.send_signal(signal.SIGKILL)
        code = wait_exit(client, PROCESS_WAIT_S)
        err = client.stderr.read().decode() if client.stderr else ""
        assert code == 1, err
        assert "lost the aggregator" in err or "ended the stream" in err, err
        assert "Traceback" not in err
    finally:
        reap(serve, client)


def test_clients_wait_for_a_late_aggregator_then_exit_on_close(tmp_path: Path) -> None:
    """`ldp-sim clients` (configured with their own spec file) started first retries with
    backoff; `ldp-sim serve` then runs the experiment over them and sends Close; all exit 0."""
    spec, _ = _spec_config(tmp_path, 4000)
    port = free_port()
    address = f"127.0.0.1:{port}"
    clients = subprocess.Popen(
        [PYTHON, "-m", "ldp.cli.main", "clients", "--connect", address, "--population", str(spec), "--shard", "0/1", "--processes", "2", "--connect-timeout", "30"],
        stderr=subprocess.PIPE,
    )
    serve = None
    try:
        time.sleep(1.5)
        assert clients.poll() is None
        serve = subprocess.Popen(
            [PYTHON, "-m", "ldp.cli.main", "serve", "--bind", address, "rr-demo", "--users", "4000", "--wait", "30", "--out", str(tmp_path / "out")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert wait_exit(serve, PROCESS_WAIT_S) == 0, serve.stderr.read() if serve.stderr else b""
        out = serve.stdout.read().decode() if serve.stdout else ""
        assert "Randomized response of one bit" in out and "shard 0/1.1/2 connected" in out, out
        assert wait_exit(clients, PROCESS_WAIT_S) == 0
        err = clients.stderr.read().decode() if clients.stderr else ""
        assert err.count("the aggregator closed the connection") == 2, err
    finally:
        reap(serve, clients)


def test_unreachable_aggregator_gives_up_with_a_message(tmp_path: Path) -> None:
    _, config = _spec_config(tmp_path, 100)
    proc = subprocess.run(
        [PYTHON, "-m", "ldp.wire.client", "--connect", f"127.0.0.1:{free_port()}", "--config", str(config), "--connect-timeout", "1"],
        capture_output=True,
        timeout=PROCESS_WAIT_S,
    )
    assert proc.returncode == 1
    assert b"cannot reach the aggregator" in proc.stderr and b"Traceback" not in proc.stderr


async def test_a_waiting_client_says_so_instead_of_staying_silent(monkeypatch: pytest.MonkeyPatch) -> None:
    """No long silences: while the aggregator is not up, a client prints a status line every
    ``STATUS_EVERY_S`` (1 s here) and then gives up with the usual message."""
    import ldp.wire.client as client_module
    from ldp.wire.client import EXIT_LOST, ShardClaim, run_client
    from ldp.wire.client_config import ClientConfig

    monkeypatch.setattr(client_module, "STATUS_EVERY_S", 1.0)
    lines: list[str] = []
    spec = population(n=100)
    code = await run_client(f"127.0.0.1:{free_port()}", ShardClaim(0, 1), ClientConfig(population=spec), connect_timeout_s=3.5, say=lines.append)
    assert code == EXIT_LOST
    waiting = [line for line in lines if "waiting for the aggregator" in line]
    assert len(waiting) >= 2 and "giving up after 3.5 s" in waiting[0], lines
    assert "cannot reach the aggregator" in lines[-1]


def test_after_an_interrupt_only_grpcs_closed_loop_shutdown_message_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C: grpc's Server.__del__ may try to schedule its shutdown on the closed loop and print
    a traceback; ``quiet_grpc_after_interrupt`` drops that one message, and any other unraisable
    exception (the broken variant would swallow everything) still reaches the previous hook."""
    import sys
    import types
    import warnings

    from ldp.wire.launcher import quiet_grpc_after_interrupt

    seen: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    with warnings.catch_warnings():
        quiet_grpc_after_interrupt()

        def server_del(self: object) -> None: ...

        server_del.__qualname__, server_del.__module__ = "Server.__del__", "grpc.aio._server"  # as grpc's own

        def mine(self: object) -> None: ...

        mine.__qualname__ = "Server.__del__"  # same name, not grpc's: reported

        grpc_case = types.SimpleNamespace(exc_value=RuntimeError("Event loop is closed"), object=server_del)
        other_error = types.SimpleNamespace(exc_value=RuntimeError("something else"), object=server_del)
        not_grpc = types.SimpleNamespace(exc_value=RuntimeError("Event loop is closed"), object=mine)
        for case in (grpc_case, other_error, not_grpc):
            sys.unraisablehook(case)  # type: ignore[arg-type]
    assert seen == [other_error, not_grpc]
