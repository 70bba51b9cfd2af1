"""Every registered experiment can be served to remote clients, with the in-process results.

`ldp-sim serve` plays the experiment and the aggregator; `ldp-sim clients` (here on loopback,
as on other machines) plays the users' side. Experiments over many populations are served to
clients on standby (`--seal-key-file`): each population arrives sealed, and the aggregator can
read none of them. Experiments without an LR oracle run where they are served.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.waits import PROCESS_WAIT_S
from tests.wire.proc_helpers import PYTHON, free_port, reap, wait_exit

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

CLI = [PYTHON, "-m", "ldp.cli.main"]
SMALL = ["-o", "trials=2", "-o", "cap=4096", "-o", "resolution=2", "-o", "masked_d=2,4", "-o", "learners=LI,LNI", "-o", "curve_d=2",
         "-o", "curve_users=256,1024", "-o", "curve_trials=2", "-o", "point_bits="]


def _table(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("│") or line.startswith("┃")]


def test_a_separation_served_to_standby_clients_equals_the_in_process_run(tmp_path: Path) -> None:
    key = tmp_path / "seal.key"
    address = f"127.0.0.1:{free_port()}"
    reference = subprocess.run(
        [*CLI, "run", "separation", "--transport", "inprocess", "--seed", "3", "--out", str(tmp_path / "a"), *SMALL], capture_output=True, timeout=PROCESS_WAIT_S
    )
    assert reference.returncode == 0, reference.stderr.decode()
    serve = subprocess.Popen(
        [*CLI, "serve", "--bind", address, "separation", "--seed", "3", "--out", str(tmp_path / "b"), "--seal-key-file", str(key), "--wait", "60", *SMALL],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    clients = None
    try:
        for _ in range(100):  # serve creates the key file; the clients get a copy (here: the same path)
            if key.exists():
                break
            serve.poll()
            assert serve.returncode is None, serve.stderr.read() if serve.stderr else b""
            time.sleep(0.1)
        clients = subprocess.Popen(
            [*CLI, "clients", "--connect", address, "--seal-key-file", str(key), "--processes", "2", "--connect-timeout", "30"],
            stderr=subprocess.PIPE,
        )
        assert wait_exit(serve, 150) == 0, serve.stderr.read().decode() if serve.stderr else ""
        out = serve.stdout.read().decode() if serve.stdout else ""
        assert wait_exit(clients, PROCESS_WAIT_S) == 0
    finally:
        reap(serve, clients)
    # The same experiment, rows and columns; not the same numbers bit for bit: clients a user
    # starts by hand draw under a fresh salt in every process life (invariant I1, docs/design.md
    # §2a), so their coins are another draw than the in-process run's (launch_local's clients,
    # launched by the experiment, still match it bit for bit: tests/wire/test_equivalence.py).
    assert _keys(out) == _keys(reference.stdout.decode()) and len(_table(out)) > 4, out
    assert "standby" in out and "shard 0/1.1/2 connected" in out


def _keys(text: str) -> list[list[str]]:
    """Each table row's first four cells (class, learner, model, d)."""
    return [[cell.strip() for cell in line.replace("┃", "│").split("│")[1:5]] for line in _table(text)]


def test_an_experiment_without_an_lr_oracle_is_served_where_it_runs(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*CLI, "serve", "--bind", f"127.0.0.1:{free_port()}", "sq-sample-complexity", "--quick", "--out", str(tmp_path)], capture_output=True, timeout=PROCESS_WAIT_S
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert "needs no client" in proc.stdout.decode() and (tmp_path / "table.md").exists()


def test_serving_many_populations_without_a_seal_key_is_a_one_line_mistake() -> None:
    proc = subprocess.run([*CLI, "serve", "--bind", f"127.0.0.1:{free_port()}", "separation", "--quick"], capture_output=True, timeout=PROCESS_WAIT_S)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "--seal-key-file" in err and "Traceback" not in err
