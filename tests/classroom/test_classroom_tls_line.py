"""A client that fails the classroom's TLS handshake is one line on the teacher's stderr.

The refusal happens inside gRPC's C core, before any handler runs; its only trace is gRPC's raw
``Handshake failed with error ...`` log line. ``ldp-sim classroom`` translates it the way
``ldp-sim serve`` does (``ldp.wire.grpc_stderr.grpc_stderr_in_words``): ``classroom: refused a connection:
a client that does not speak TLS ...``. The attack is real: a plaintext HTTP/2 connection to the
real classroom's gRPC port on loopback.

Broken variant: the same classroom with ``grpc_stderr_in_words`` replaced by a no-op (the classroom
before issue 24) prints gRPC's raw line and no translated one; the same check catches it.
No clock in any verdict: every wait is bounded generously (``WAIT_S``) on an event.
"""

from __future__ import annotations

import asyncio
import re
import socket
import sys

import pytest

from tests.classroom.test_classroom_abuse import ENV, WAIT_S, Teacher, _pump

pytestmark = pytest.mark.timeout(4 * int(WAIT_S))

ARGS = ["classroom", "--host", "127.0.0.1", "--bind", "127.0.0.1", "--port", "0", "--http-port", "0", "--seats", "2", "--machine-users", "10"]
TRANSLATED = "classroom: refused a connection: a client that does not speak TLS"
# The broken variant: the classroom command with the translation switched off.
NO_TRANSLATION = (
    "import contextlib, sys, ldp.classroom.teacher as t; "
    "t.grpc_stderr_in_words = lambda prefix='': contextlib.nullcontext(); "
    "from ldp.cli.main import main; sys.exit(main(sys.argv[1:]))"
)


async def _teacher(*cmd: str) -> Teacher:
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENV
    )
    t = Teacher(proc)
    t.readers = [asyncio.ensure_future(_pump(proc.stdout, t.out)), asyncio.ensure_future(_pump(proc.stderr, t.err))]
    return t


def _plaintext_hello(port: int) -> None:
    """What a plaintext gRPC client sends first (the HTTP/2 preface), to the TLS port."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        s.settimeout(WAIT_S)
        try:
            while s.recv(4096):  # the server answers with a TLS alert and closes
                pass
        except OSError:
            pass


async def _stderr_after_a_plaintext_client(*cmd: str, expect: str) -> str:
    """Start a classroom, dial it in plaintext, wait (bounded) until stderr holds ``expect``."""
    t = await _teacher(*cmd)
    try:
        port = int((await t.wait_out(r"classroom: aggregator on [\d.]+:(\d+)")).group(1))
        await asyncio.to_thread(_plaintext_hello, port)
        for _ in range(int(WAIT_S * 10)):
            if re.search(expect, "".join(t.err)):
                break
            await asyncio.sleep(0.1)
        return "".join(t.err)
    finally:
        t.kill()
        await asyncio.wait_for(t.proc.wait(), WAIT_S)


async def test_a_plaintext_client_is_one_line_on_the_teachers_stderr() -> None:
    err = await _stderr_after_a_plaintext_client(sys.executable, "-m", "ldp.cli.main", *ARGS, expect=re.escape(TRANSLATED))
    assert TRANSLATED in err, err
    assert "Handshake failed" not in err, err  # translated: no raw gRPC line
    assert "Traceback" not in err, err


async def test_the_broken_variant_without_translation_prints_grpcs_raw_line() -> None:
    err = await _stderr_after_a_plaintext_client(sys.executable, "-c", NO_TRANSLATION, *ARGS, expect="Handshake failed")
    assert "Handshake failed" in err and TRANSLATED not in err, err  # what the check above would fail on
