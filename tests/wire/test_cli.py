"""`ldp-sim`: a run prints a table and leaves no process; user mistakes exit 2 without a
traceback; Ctrl-C and errors leave no orphan client process."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from ldp.experiment import ExperimentArgs, get_experiment
from ldp.wire.launcher import launch_local
from tests.waits import PROCESS_WAIT_S
from tests.wire.proc_helpers import PYTHON, alive, children_of, reap, wait_exit
from tests.wire.wire_helpers import population

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

CLI = [PYTHON, "-m", "ldp.cli.main"]


def test_run_grpc_prints_a_table_and_leaves_no_process(tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.Popen(
        [*CLI, "run", "rr-demo", "--processes", "2", "--users", "20000", "--seed", "3", "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    time.sleep(0.5)
    kids = children_of(proc.pid)
    try:
        out, err = proc.communicate(timeout=PROCESS_WAIT_S)
    finally:
        reap(proc)
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert "Randomized response of one bit: 20000 users" in text and "estimate" in text and "0.3000" in text
    assert not any(alive(k) for k in kids)


def test_inprocess_and_grpc_runs_print_the_same_numbers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    args = ["run", "rr-demo", "--users", "4000", "--epsilon", "2", "--seed", "9", "--out", str(tmp_path)]
    a = subprocess.run([*CLI, *args, "--transport", "inprocess"], capture_output=True, timeout=PROCESS_WAIT_S)
    b = subprocess.run([*CLI, *args, "--transport", "grpc", "--processes", "3"], capture_output=True, timeout=PROCESS_WAIT_S)
    assert a.returncode == b.returncode == 0
    table = lambda t: [line for line in t.decode().splitlines() if line.startswith("│")]  # noqa: E731
    assert table(a.stdout) == table(b.stdout) and len(table(a.stdout)) == 4


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "no-such-experiment"], "unknown experiment 'no-such-experiment'"),
        (["run", "rr-demo", "--epsilon", "nan", "--transport", "inprocess"], "budget epsilon must be a finite number > 0"),
        (["run", "rr-demo", "--users", "10", "--processes", "11"], "--processes must be in [1, users = 10]"),
        (["serve", "--bind", "nonsense", "rr-demo"], "expected HOST:PORT"),
    ],
)
def test_user_mistakes_exit_2_without_traceback(args: list[str], message: str) -> None:
    proc = subprocess.run([*CLI, *args], capture_output=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 2
    assert message in proc.stderr.decode() and "Traceback" not in proc.stderr.decode()


@pytest.mark.parametrize("whole_group", [True, False], ids=["terminal-ctrl-c", "sigint-to-launcher-only"])
def test_ctrl_c_leaves_no_orphan(whole_group: bool) -> None:
    proc = subprocess.Popen(
        # 10^7 users: the run takes ~3 s on 2 cores, so the interrupt lands while it runs (3·10^6
        # users finished in ~1 s, before the interrupt, once rounds got faster).
        [*CLI, "run", "rr-demo", "--processes", "2", "--users", "10000000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, like a shell job
    )
    try:
        end = time.monotonic() + PROCESS_WAIT_S
        kids: list[int] = []
        while len(kids) < 2:
            assert time.monotonic() < end and proc.poll() is None, "client processes did not start"
            time.sleep(0.1)
            kids = children_of(proc.pid)
        time.sleep(0.3)
        if whole_group:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        code = wait_exit(proc, PROCESS_WAIT_S)
        err = proc.stderr.read().decode() if proc.stderr else ""
        assert code == 130, err
        assert "interrupted" in err and "Traceback" not in err, err
        deadline = time.monotonic() + PROCESS_WAIT_S
        while any(alive(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(k) for k in kids), "a client process outlived the launcher"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        reap(proc)


async def test_an_error_inside_launch_local_stops_every_client() -> None:
    clients = []
    with pytest.raises(RuntimeError, match="boom"):
        async with launch_local(population(n=100), processes=2) as oracle:
            clients = oracle.clients
            raise RuntimeError("boom")
    assert len(clients) == 2 and all(c.process.poll() is not None for c in clients)


async def test_rr_demo_runs_in_process(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ldp.local.oracle import InProcessLROracle

    exp = get_experiment("rr-demo")
    args = ExperimentArgs(users=40_000, epsilon=1.0, seed=2, out=str(tmp_path))
    result = await exp.run(InProcessLROracle(exp.population(args)), args)
    assert len(result.rows) == 4
    errors = [float(row[4]) for row in result.rows]
    stds = [float(row[5]) for row in result.rows]
    assert all(e < 5 * s for e, s in zip(errors, stds))  # within 5 standard errors
