"""The argument types every ``ldp-sim`` subcommand shares: each option is checked where it enters,
and a bad value is one line naming what, which value and what is allowed (argparse prints it as
``ldp-sim: error: ...``, exit 2; ``ldp.cli.main``). Also the output-path checks the handlers run
before any work (``output_directory``, ``output_file``: a ``ParameterError``).

Light on purpose: building the parser imports this module, so it imports nothing heavy (the wire
checks are imported when an option is parsed).
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from ldp.core.errors import ParameterError, require_epsilon

__all__ = [
    "MAX_CLI_USERS", "MAX_SECONDS", "host_port", "shard_fraction", "option_pair", "integer_text", "user_count", "epsilon_type",
    "seed_value", "seconds_type", "process_count", "port_number", "existing_file", "existing_dir", "ledger_path", "output_directory",
    "output_file",
]


def host_port(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (e.g. 127.0.0.1:50051), got {text!r}")
    return text


def shard_fraction(text: str) -> tuple[int, int]:
    from ldp.wire.client import parse_fraction

    return parse_fraction(text)


def option_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. trials=3 or masked_d=2,4), got {text!r}")
    if not key.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"the KEY of KEY=VALUE must be a setting's name (e.g. trials), got {key.strip()!r} in {text!r}")
    return key.strip(), value.strip()


# --- argument types: every option is checked where it enters (what, which value, what is allowed) ---

MAX_CLI_USERS = 1 << 40  # PopulationSpec's limit
MAX_SECONDS = 1e6  # about 11.5 days: any longer wait or deadline is a typo


def integer_text(text: str, what: str, allowed: str = "") -> int:
    """An integer from the command line: 100000, 100_000 or 1e6 (a float with no fraction)."""
    try:
        return int(text.strip())
    except ValueError:
        pass
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if math.isfinite(x) and x.is_integer():
        return int(x)
    raise argparse.ArgumentTypeError(f"{what} must be an integer{allowed} (e.g. 100000, 100_000 or 1e5), got {text!r}")


def user_count(text: str) -> int:
    n = integer_text(text, "the number of users", " in [1, 2^40]")
    if not 1 <= n <= MAX_CLI_USERS:
        raise argparse.ArgumentTypeError(f"the number of users must be in [1, 2^40 = {MAX_CLI_USERS}], got {text!r}")
    return n


def epsilon_type(what: str) -> Any:
    def parse(text: str) -> float:
        # the one ε check (ldp.core.errors.require_epsilon); argparse words it for the command line
        try:
            return require_epsilon(float(text), name=what)
        except (ValueError, ParameterError):
            raise argparse.ArgumentTypeError(f"{what} must be a finite number > 0 and ≤ 1024 (in [2^-30, 2^10]), got {text!r}") from None

    return parse


def seed_value(text: str) -> int:
    s = integer_text(text, "the seed", " in [0, 2^64)")
    if not 0 <= s < 2**64:
        raise argparse.ArgumentTypeError(f"the seed must be in [0, 2^64), got {text!r}")
    return s


def seconds_type(what: str, *, zero: bool = False) -> Any:
    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            x = math.nan
        low_ok = x >= 0 if zero else x > 0
        if not (math.isfinite(x) and low_ok and x <= MAX_SECONDS):
            allowed = "[0, 10^6]" if zero else "(0, 10^6]"
            raise argparse.ArgumentTypeError(f"{what} must be a finite number of seconds in {allowed}, got {text!r}")
        return x

    return parse


def process_count(text: str) -> int:
    from ldp.wire.launcher import check_processes

    p = integer_text(text, "--processes", " ≥ 1")
    try:
        return check_processes(p, "--processes")
    except ParameterError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def existing_file(what: str) -> Any:
    def parse(text: str) -> str:
        path = Path(text)
        if not text:
            raise argparse.ArgumentTypeError(f"{what} must name a file, got an empty path")
        if not path.exists():
            raise argparse.ArgumentTypeError(f"{what} {text!r} does not exist")
        if path.is_dir():  # pipes (e.g. <(...) for a key) and devices are fine
            raise argparse.ArgumentTypeError(f"{what} {text!r} is a directory, not a file")
        if not os.access(path, os.R_OK):
            raise argparse.ArgumentTypeError(f"{what} {text!r} cannot be read (permission denied)")
        return text

    return parse


def existing_dir(what: str) -> Any:
    def parse(text: str) -> str:
        if not text or not Path(text).is_dir():
            raise argparse.ArgumentTypeError(f"{what} {text!r} is not a directory (make one with `ldp-sim certs DIR`)")
        return text

    return parse


def ledger_path(text: str) -> str:
    path = Path(text)
    if not text:
        raise argparse.ArgumentTypeError("the ledger must name a file, got an empty path")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"the ledger {text!r} is a directory; name a file in it (e.g. {text.rstrip('/')}/ledger.sqlite)")
    parent = path.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"the ledger's directory {str(parent)!r} does not exist (create it first)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"the ledger's directory {str(parent)!r} is not writable (permission denied)")
    if path.is_file() and path.stat().st_size:
        try:
            with path.open("rb") as f:
                head = f.read(16)
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read the ledger {text!r}: {exc.strerror}") from None
        if head != b"SQLite format 3\x00":  # every SQLite database file starts so (sqlite.org/fileformat.html)
            raise argparse.ArgumentTypeError(f"the ledger {text!r} exists and is not an SQLite ledger: name a new file, or a ledger ldp-sim wrote")
    return text


def output_directory(text: str, what: str = "--out") -> None:
    """Create the output directory ``text`` now, or a ParameterError naming it and the OS reason."""
    if not text:
        raise ParameterError(f"{what} must name a directory, got an empty path")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise ParameterError(f"{what} {text} is not a directory (a file of that name exists)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ParameterError(f"cannot create the {what} directory {text}: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ParameterError(f"cannot write to the {what} directory {text}: permission denied")


def output_file(text: str, what: str = "--out") -> None:
    """A file that can be written: its directory exists and is writable, and it is no directory."""
    if not text:
        raise ParameterError(f"{what} must name a file, got an empty path")
    path = Path(text)
    if path.is_dir():
        raise ParameterError(f"{what} {text} is a directory; name a file (e.g. {text.rstrip('/')}/spec.json)")
    if not path.parent.is_dir():
        raise ParameterError(f"cannot write {what} {text}: its directory {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise ParameterError(f"cannot write {what} {text}: its directory {path.parent} is not writable (permission denied)")


def port_number(text: str) -> int:
    """A TCP port for ``--port`` / ``--http-port``: an integer in 0..65535 (0: any free port).
    Refused here, in one line, rather than by gRPC's bind, which only logs a warning for 99999
    and lets the class carry on without an aggregator (issue 23, invariant I6)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port must be an integer in 0..65535 (0: any free port), got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port must be an integer in 0..65535 (0: any free port), got {port}")
    return port
