"""`ldp-sim run` for the simulations: separation (and sq-local) over gRPC client processes give
the same table as in process and leave no process; experiments without an LR oracle run in
process; user mistakes are one line with exit 2; Ctrl-C leaves no orphan; the CLI stays light."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ldp.core.errors import ParameterError
from ldp.experiment import apply_options
from tests.waits import PROCESS_WAIT_S
from tests.wire.proc_helpers import alive, children_of, reap, wait_exit

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

CLI = [sys.executable, "-m", "ldp.cli.main"]
TINY_SEPARATION = [
    "-o", "trials=2", "-o", "cap=4096", "-o", "resolution=2", "-o", "masked_d=2,4", "-o", "learners=LI,LNI",
    "-o", "curve_d=2", "-o", "curve_users=256,1024", "-o", "curve_trials=2", "-o", "point_bits=",
]  # fmt: skip


def _table(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("│")]


def _run_watching_children(args: list[str], timeout_s: float = 40) -> tuple[subprocess.Popen[bytes], str, str, list[int]]:
    """Run the CLI, noting its child processes while it runs; returns (proc, stdout, stderr, kids)."""
    proc = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kids: set[int] = set()
    end = time.monotonic() + timeout_s
    try:
        while proc.poll() is None and time.monotonic() < end:
            kids.update(children_of(proc.pid))
            time.sleep(0.05)
        out, err = proc.communicate(timeout=max(1.0, end - time.monotonic()))
    finally:
        reap(proc)
    return proc, out.decode(), err.decode(), sorted(kids)


def test_separation_over_grpc_prints_the_in_process_table_and_leaves_no_process(tmp_path: Path) -> None:
    grpc_run, out, err, kids = _run_watching_children(["run", "separation", "--processes", "2", "--out", str(tmp_path / "g"), *TINY_SEPARATION])
    assert grpc_run.returncode == 0, err
    assert len(kids) >= 2  # the client processes really ran
    assert not any(alive(k) for k in kids)
    local = subprocess.run([*CLI, "run", "separation", "--transport", "inprocess", "--out", str(tmp_path / "i"), *TINY_SEPARATION], capture_output=True, timeout=PROCESS_WAIT_S)
    assert local.returncode == 0, local.stderr.decode()
    rows = _table(out)
    assert len(rows) == 4 and "LNI" in out and "Lemma 4.3" in out
    assert rows == _table(local.stdout.decode())
    assert (tmp_path / "g" / "table.md").read_text() == (tmp_path / "i" / "table.md").read_text()
    assert f"saved {tmp_path / 'g' / 'separation.png'}" in out
    assert "population(s) served by 2 client process(es)" in out
    assert "LI d=4" in out + err  # the progress lines


def test_sq_local_over_grpc_equals_in_process(tmp_path: Path) -> None:
    args = ["run", "sq-local", "-o", "groups=1500", "--seed", "3"]
    a = subprocess.run([*CLI, *args, "--transport", "inprocess", "--out", str(tmp_path / "i")], capture_output=True, timeout=PROCESS_WAIT_S)
    b = subprocess.run([*CLI, *args, "--processes", "2", "--out", str(tmp_path / "g")], capture_output=True, timeout=PROCESS_WAIT_S)
    assert a.returncode == b.returncode == 0, (a.stderr.decode(), b.stderr.decode())
    assert _table(a.stdout.decode()) == _table(b.stdout.decode()) and len(_table(a.stdout.decode())) == 2


def test_an_experiment_without_an_lr_oracle_runs_in_process(tmp_path: Path) -> None:
    args = ["run", "pure-vs-approximate", "-o", "point_bits=8", "-o", "threshold_bits=6", "-o", "trials=10", "-o", "threshold_trials=10"]
    proc = subprocess.run([*CLI, *args, "--out", str(tmp_path)], capture_output=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "POINT_d" in proc.stdout.decode() and (tmp_path / "m90.csv").exists()
    listing = subprocess.run([*CLI, "list"], capture_output=True, timeout=PROCESS_WAIT_S).stdout.decode()
    lines = {line.split()[0]: line for line in listing.splitlines() if line.strip()}
    assert "[in process only]" in lines["pure-vs-approximate"] and "[in process only]" in lines["sq-sample-complexity"]
    assert "[grpc|inprocess]" in lines["separation"] and "[grpc|inprocess]" in lines["sq-local"]
    assert "[its own clients: grpc|inprocess]" in lines["real-data"] and "[its own clients: grpc|inprocess]" in lines["lab1"]


def test_transport_reaches_an_experiment_that_places_its_own_clients(tmp_path: Path) -> None:
    """`--transport inprocess` sets real-data's own transport (as `-o transport=inprocess` does):
    its shards are hosted in process, as its saved config and its caption say. Broken variant:
    the flag refused or ignored (the config then says grpc, real-data's default)."""
    proc = subprocess.run([*CLI, "run", "real-data", "--quick", "--transport", "inprocess", "--out", str(tmp_path)], capture_output=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads((tmp_path / "result.json").read_text())["config"]["transport"] == "inprocess"
    assert "in-process shard(s)" in proc.stdout.decode()


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "pure-vs-approximate", "--transport", "grpc"], "runs in process only"),
        (["run", "real-data", "--transport", "grpc", "-o", "transport=inprocess"], "give real-data's transport once"),
        (["run", "separation", "--users", "100"], "--users does not apply to separation"),
        (["run", "separation", "-o", "no_such=1"], "unknown option 'no_such'"),
        (["run", "separation", "-o", "trials=many"], "option trials='many': expected int"),
        (["run", "separation", "-o", "learners=LX", "--transport", "inprocess"], "unknown learner(s) ['LX']"),
        (["run", "rr-demo", "-o", "trials=2"], "rr-demo takes no -o options"),
        (["run", "separation", "--processes", "0"], "--processes must be ≥ 1"),
        (["serve", "--bind", "127.0.0.1:0", "separation"], "serve it with --seal-key-file F"),
    ],
)
def test_user_mistakes_exit_2_in_one_line(args: list[str], message: str) -> None:
    proc = subprocess.run([*CLI, *args], capture_output=True, timeout=PROCESS_WAIT_S)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_ctrl_c_during_separation_leaves_no_orphan(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*CLI, "run", "separation", "--quick", "--processes", "2", "--out", str(tmp_path)],
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
        time.sleep(1.5)  # populations are being loaded into the clients by now
        os.killpg(proc.pid, signal.SIGINT)
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


def test_the_cli_and_the_client_import_no_simulation() -> None:
    code = (
        "import sys, ldp.cli.main, ldp.experiment, ldp.wire.client; "
        "print(sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in ('scipy', 'matplotlib') or m.startswith('ldp.simulations.')}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=PROCESS_WAIT_S)
    assert out.returncode == 0 and out.stdout.decode().strip() == "[]", out.stderr.decode()


@dataclass(frozen=True)
class _Cfg:
    trials: int = 10
    alpha: float = 0.1
    dims: tuple[int, ...] = (2, 4)
    names: tuple[str, ...] = ("a",)
    full: bool = True
    out: str | None = "x"


def test_apply_options_converts_by_the_current_type() -> None:
    cfg = apply_options(_Cfg(), {"trials": "3", "alpha": "0.25", "dims": "8, 16", "names": "LI,LNI-a", "full": "false", "out": "here"})
    assert cfg == _Cfg(3, 0.25, (8, 16), ("LI", "LNI-a"), False, "here")
    with pytest.raises(ParameterError, match=r"unknown option 'trial'.*'trials'"):
        apply_options(_Cfg(), {"trial": "3"})
    with pytest.raises(ParameterError, match="expected bool"):
        apply_options(_Cfg(), {"full": "maybe"})


def test_version_is_the_installed_one(capsys) -> None:  # type: ignore[no-untyped-def]
    from importlib.metadata import version

    from ldp.cli.main import main

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"ldp-sim {version('ldp-sim')}"
