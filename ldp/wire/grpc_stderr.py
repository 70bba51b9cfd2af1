"""What gRPC writes on an aggregator's stderr, said in words.

An aggregator process (``ldp-sim serve``, ``ldp-sim classroom``) hosts gRPC's aio server, and
two things reach its stderr that no handler of ours ever sees:

- **a refused TLS handshake**: one C-core log line per attempt (``Handshake failed with error
  SSL_ERROR_SSL: ...``); it becomes ``{prefix}refused a connection: <why> [<TLS error>]``
  (``ldp.wire.tls.handshake_reason`` says why);
- **a call cut before or after its handler**: grpcio's ``_schedule_rpc_coro`` (``aio/server.pyx.pxi``)
  runs ``traceback.print_exc()`` when the task it awaits ends in ``CancelledError`` — a client
  that left while its call was starting, or a call still open when the event loop's last tasks
  are cancelled. That traceback is not an error of the run; it is counted, and the count said in
  one line at the end.

Everything else written to fd 2 (our own lines, any other traceback, gRPC's other log lines)
passes through unchanged and in order. The translation is ``GrpcStderr``, a pure line-by-line
function of what was written; ``grpc_stderr_in_words`` puts it between fd 2 and the terminal.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ldp.wire.tls import handshake_reason

__all__ = ["HANDSHAKE_REPEAT_S", "GrpcStderr", "grpc_stderr_in_words"]

HANDSHAKE_REPEAT_S = 10.0  # the same refusal reason again within this is counted, not printed
_TRACEBACK = b"Traceback (most recent call last):"
_CANCELLED = (b"asyncio.exceptions.CancelledError", b"concurrent.futures._base.CancelledError", b"CancelledError")


def is_cut_call(block: list[bytes]) -> bool:
    """Whether a whole traceback (header, frames, last line) is grpcio's print of a cancelled
    call: its last line is a bare ``CancelledError`` and a frame is inside grpcio's cython server.
    Our own CancelledError tracebacks (no grpcio frame) are not cut: they would be bugs to see."""
    last = block[-1].strip()
    return last in _CANCELLED and any(b"cygrpc" in line for line in block[1:-1])


@dataclass
class GrpcStderr:
    """The translation, one line of fd 2 at a time (``line`` returns what to write on).

    A traceback is held from its header to its last line (the first line not indented), then
    either cut (``is_cut_call``: counted in ``cut``) or passed on whole. ``end`` returns what is
    still held (a traceback the process never finished) and the one line that says the count.
    """

    prefix: str = ""
    clock: Callable[[], float] = time.monotonic
    cut: int = 0
    held: list[bytes] = field(default_factory=list)
    said: dict[str, tuple[float, int]] = field(default_factory=dict)  # reason -> (when last said, repeats since)

    def line(self, raw: bytes) -> bytes:
        if self.held:
            self.held.append(raw)
            if raw[:1] in (b" ", b"\t"):
                return b""
            block, self.held = self.held, []
            if is_cut_call(block):
                self.cut += 1
                return b""
            return b"".join(block)
        if raw.rstrip(b"\r\n") == _TRACEBACK:
            self.held = [raw]
            return b""
        reason = handshake_reason(raw)
        return raw if reason is None else self._refused(reason)

    def _refused(self, reason: str) -> bytes:
        now = self.clock()
        when, repeats = self.said.get(reason, (-math.inf, 0))
        if now - when < HANDSHAKE_REPEAT_S:
            self.said[reason] = (when, repeats + 1)
            return b""
        self.said[reason] = (now, 0)
        again = f" ({repeats} more time(s) since)" if repeats else ""
        return f"{self.prefix}refused a connection: {reason}{again}\n".encode()

    def end(self) -> bytes:
        held, self.held = b"".join(self.held), []
        if not self.cut:
            return held
        calls = "call was" if self.cut == 1 else "calls were"
        return held + (
            f"{self.prefix}{self.cut} client {calls} cut (a client that left as its call began, or a call "
            "still open when the server stopped); gRPC's CancelledError traceback is not shown\n"
        ).encode()


@contextlib.contextmanager
def grpc_stderr_in_words(prefix: str = "", clock: Callable[[], float] = time.monotonic) -> Iterator[GrpcStderr]:
    """While inside, fd 2 is a pipe read by a thread that writes ``GrpcStderr``'s translation to
    the real stderr; on exit fd 2 is restored and the thread drains the pipe before this returns
    (bounded: 5 s). Handshake lines come only at gRPC's default log verbosity (``GRPC_VERBOSITY``
    unset, or INFO/DEBUG). Wrap the whole ``asyncio.run``: grpcio's tracebacks can come as late as
    the loop's own shutdown."""
    words = GrpcStderr(prefix, clock)
    try:
        sys.stderr.flush()
        saved = os.dup(2)
        read_end, write_end = os.pipe()
    except OSError:  # no fd 2 to speak of (a closed stderr): nothing to translate
        yield words
        return
    os.dup2(write_end, 2)
    os.close(write_end)

    def write(data: bytes) -> None:
        if data:
            with contextlib.suppress(OSError):
                os.write(saved, data)

    def pump() -> None:
        with os.fdopen(read_end, "rb") as pipe:
            for raw in iter(pipe.readline, b""):
                try:
                    write(words.line(raw))
                except Exception:  # noqa: BLE001 - never lose stderr: pass the line on as it was
                    write(raw)
        write(words.end())

    thread = threading.Thread(target=pump, name="ldp-grpc-stderr", daemon=True)
    thread.start()
    try:
        yield words
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe's last write end closes: the thread reads to its end
        thread.join(timeout=5.0)
        if not thread.is_alive():
            os.close(saved)
