"""Options no other test passed, each run as a real process with the flag the docs show.

- ``ldp-sim certs DIR --days D``: the certificates it writes are valid for D days;
- ``ldp-sim classroom --pki DIR``: the class's CA, server certificate and token are kept in DIR
  (the default is a temporary folder removed at the end);
- ``python -m ldp.wire.client --sub j/P --exit-with-parent`` (what the launchers start): a bad
  sub-shard is one line; a client whose parent dies exits by itself instead of retrying forever.
Every wait is bounded (a hang guard); no duration is asserted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cryptography import x509

from tests.waits import PROCESS_WAIT_S

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

LDP_SIM = [sys.executable, "-m", "ldp.cli.main"]


def test_certs_days_sets_the_validity_of_every_certificate(tmp_path: Path) -> None:
    out = tmp_path / "pki"
    proc = subprocess.run([*LDP_SIM, "certs", str(out), "--server-host", "127.0.0.1", "--clients", "1", "--days", "3"], capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 0, proc.stderr
    def lifetime(name: str) -> int:
        cert = x509.load_pem_x509_certificate((out / name).read_bytes())
        return (cert.not_valid_after_utc - cert.not_valid_before_utc).days  # (its start is backdated minutes for clock skew)

    assert lifetime("server.pem") == lifetime("client-1.pem") == 3
    assert lifetime("ca.pem") == 365  # the CA outlives them (max(days, 365)), so clients can be added later


def test_certs_days_refuses_a_lifetime_that_is_not_a_positive_integer(tmp_path: Path) -> None:
    proc = subprocess.run([*LDP_SIM, "certs", str(tmp_path / "pki"), "--days", "0"], capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr


def test_classroom_pki_keeps_the_class_files_in_the_folder_named(tmp_path: Path) -> None:
    pki = tmp_path / "class-pki"
    # No student comes: the class gives up after --wait, having made its PKI first.
    proc = subprocess.run(
        [*LDP_SIM, "classroom", "--bind", "127.0.0.1", "--port", "0", "--http-port", "0", "--students", "1", "--wait", "1", "--pki", str(pki)],
        capture_output=True, text=True, timeout=PROCESS_WAIT_S, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2 and "only 0 of 1 students joined within 1 s: 0 seats given on the dashboard, 0 connected" in proc.stderr, proc.stdout + proc.stderr
    assert "no student's machine asked the dashboard for a seat" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert {"ca.pem", "server.pem", "token"} <= {p.name for p in pki.iterdir()}  # kept, unlike the default temporary folder


def test_client_refuses_a_sub_shard_outside_its_machine_share() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ldp.wire.client", "--connect", "127.0.0.1:9", "--config", "-", "--sub", "2/2"],
        capture_output=True, text=True, timeout=PROCESS_WAIT_S, input="{}",
    )
    assert proc.returncode == 2 and "sub-shard K/M needs 0 ≤ K < M, got '2/2'" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_client_with_exit_with_parent_exits_when_its_parent_dies(tmp_path: Path) -> None:
    """A parent starts the client as the launchers do (--sub 1/2 --exit-with-parent PID, an
    aggregator that never comes, a 10-minute connect timeout), prints its pid and waits; it is
    killed at once, possibly before the client has even started: naming the PID makes that no race."""
    from ldp.wire.client_config import ClientConfig
    from tests.wire.wire_helpers import population

    config = ClientConfig(population=population(n=100)).dumps()
    parent = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        child = subprocess.Popen(
            [sys.executable, "-m", "ldp.wire.client", "--connect", "127.0.0.1:9", "--config", "-",
             "--shard", "0/1", "--sub", "1/2", "--connect-timeout", "600", "--exit-with-parent", str(os.getpid())],
            stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
        child.stdin.write({config!r}.encode()); child.stdin.close()
        print(child.pid, flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=PROCESS_WAIT_S)
    end = time.monotonic() + 120  # a hang guard: a client that ignores its parent's death runs for 600 s
    while _alive(child):
        assert time.monotonic() < end, "the client outlived its parent (--exit-with-parent)"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, reaped by init later, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z" and os.path.exists(f"/proc/{pid}")
