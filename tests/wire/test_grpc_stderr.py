"""What gRPC writes on an aggregator's stderr is said in words (``ldp.wire.grpc_stderr``).

The invariant: **a normal run's stderr holds no traceback that is not a bug of ours**, whatever
gRPC prints that no handler sees. Two classes reach fd 2 outside any handler: the C core's
"Handshake failed" line per refused TLS connection, and grpcio's ``traceback.print_exc()`` for a
call cut as it began or at the loop's end (``_schedule_rpc_coro``; CI saw it once at the end of a
class on a loaded machine, after the old filter, which covered only the server's stop, had been
removed from stderr). ``ldp-sim serve`` and ``ldp-sim classroom`` wrap their whole ``asyncio.run``
in ``grpc_stderr_in_words``.

The race that makes grpcio print cannot be forced from outside, so the traceback used here is the
one grpcio printed in that CI run, verbatim, written the way grpcio writes it (``sys.stderr``, line
by line) by a real process inside the real wrapper. Broken variants: the translator with the cut
check switched off, and the same process without the wrapper, both show the traceback.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import ldp.wire.grpc_stderr as gs
from ldp.wire.grpc_stderr import HANDSHAKE_REPEAT_S, GrpcStderr, grpc_stderr_in_words
from tests.waits import PROCESS_WAIT_S

# What grpcio's aio server printed on the teacher's stderr in CI (the run of 2026-11-26).
GRPC_CUT = (
    "Traceback (most recent call last):\n"
    '  File "src/python/grpcio/grpc/_cython/_cygrpc/aio/server.pyx.pxi", line 812, in grpc._cython.cygrpc._schedule_rpc_coro\n'
    "asyncio.exceptions.CancelledError\n"
)
OURS = 'Traceback (most recent call last):\n  File "x.py", line 1, in f\nValueError: a bug of ours\n'
OUR_CANCEL = 'Traceback (most recent call last):\n  File "ldp/wire/x.py", line 9, in g\nasyncio.exceptions.CancelledError\n'
HANDSHAKE = b"I1126 18:13:58.118072 23792 ssl_transport_security.cc:2563] Handshake failed with error SSL_ERROR_SSL: error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER\n"


def _through(words: GrpcStderr, text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return b"".join(words.line(raw) for raw in data.splitlines(keepends=True))


def test_grpcs_cut_call_tracebacks_are_one_counted_line_and_everything_else_passes_in_order() -> None:
    words = GrpcStderr("serve: ")
    out = _through(words, "a line before\n" + GRPC_CUT + OURS + GRPC_CUT + OUR_CANCEL + "a line after\n")
    out += words.end()
    assert words.cut == 2
    text = out.decode()
    assert text.startswith("a line before\n" + OURS + OUR_CANCEL + "a line after\n"), text  # ours, whole, in order
    assert "_schedule_rpc_coro" not in text
    assert text.endswith("serve: 2 client calls were cut (a client that left as its call began, or a call still open when the server stopped); gRPC's CancelledError traceback is not shown\n")


def test_a_traceback_the_process_never_finished_is_shown_at_the_end() -> None:
    words = GrpcStderr()
    assert _through(words, GRPC_CUT.splitlines(keepends=True)[0] + "  File \"y.py\", line 2\n") == b""
    assert words.end() == b'Traceback (most recent call last):\n  File "y.py", line 2\n'


def test_a_refused_handshake_is_one_line_and_repeats_within_the_window_are_counted() -> None:
    now = [0.0]
    words = GrpcStderr("serve: ", clock=lambda: now[0])
    first = words.line(HANDSHAKE)
    assert first.startswith(b"serve: refused a connection: a client that does not speak TLS") and b"[WRONG_VERSION_NUMBER]" in first
    now[0] = HANDSHAKE_REPEAT_S / 2
    assert words.line(HANDSHAKE) == b"" and words.line(HANDSHAKE) == b""
    now[0] = HANDSHAKE_REPEAT_S + 1
    assert b"(2 more time(s) since)" in words.line(HANDSHAKE)


def test_broken_variant_without_the_cut_check_shows_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gs, "is_cut_call", lambda block: False)
    words = GrpcStderr()
    assert b"_schedule_rpc_coro" in _through(words, GRPC_CUT) and words.cut == 0


WRITER = textwrap.dedent(
    """
    import os, sys
    from contextlib import nullcontext
    from ldp.wire.grpc_stderr import grpc_stderr_in_words
    wrap = grpc_stderr_in_words("serve: ") if sys.argv[1] == "wrapped" else nullcontext()
    with wrap:
        print("our line", file=sys.stderr)
        for line in sys.argv[2].splitlines(keepends=True):  # as traceback.print_exc writes it
            sys.stderr.write(line)
        os.write(2, sys.argv[3].encode())  # the C core writes on fd 2 itself
        print("our last line", file=sys.stderr, flush=True)
    """
)


def _process_stderr(mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", WRITER, mode, GRPC_CUT, HANDSHAKE.decode()], capture_output=True, text=True, timeout=PROCESS_WAIT_S, check=True
    )
    return done.stderr


def test_a_real_process_inside_the_wrapper_says_both_in_words() -> None:
    err = _process_stderr("wrapped")
    lines = err.splitlines()
    assert lines[0] == "our line" and lines[-2] == "our last line", err
    assert lines[1].startswith("serve: refused a connection: a client that does not speak TLS"), err
    assert lines[-1].startswith("serve: 1 client call was cut"), err
    assert "Traceback" not in err and "Handshake failed" not in err, err
    # the broken variant: the same process without the wrapper shows gRPC's raw output
    raw = _process_stderr("bare")
    assert "Traceback" in raw and "Handshake failed" in raw, raw


def test_the_wrapper_restores_fd_2() -> None:
    import os

    before = os.fstat(2)
    with grpc_stderr_in_words():
        assert os.fstat(2).st_ino != before.st_ino  # a pipe while inside
    assert os.fstat(2).st_ino == before.st_ino
