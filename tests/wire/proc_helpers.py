"""Subprocess helpers for the wire tests: bounded reads, free ports, child listings."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

PYTHON = sys.executable


def read_until(stream: IO[bytes], needle: str, timeout_s: float) -> str:
    """Read from ``stream`` until ``needle`` appears; AssertionError after ``timeout_s``."""
    fd = stream.fileno()
    buf = b""
    end = time.monotonic() + timeout_s
    while needle.encode() not in buf:
        left = end - time.monotonic()
        assert left > 0, f"timed out waiting for {needle!r}; got {buf.decode(errors='replace')!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            assert chunk, f"stream closed before {needle!r}; got {buf.decode(errors='replace')!r}"
            buf += chunk
    return buf.decode(errors="replace")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def children_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            out.append(int(entry.name))
    return out


def alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"process {proc.args!r} did not exit within {timeout_s} s") from None


def reap(*procs: subprocess.Popen[bytes] | None) -> None:
    """Kill what still runs and close every pipe (no orphan, no ResourceWarning)."""
    for p in procs:
        if p is None:
            continue
        if p.poll() is None:
            p.kill()
            p.wait()
        for stream in (p.stdin, p.stdout, p.stderr):
            if stream is not None:
                stream.close()
