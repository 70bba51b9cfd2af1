"""``ldp-sim``: run experiments in process or over gRPC, on one machine or several.

Every subcommand is a ``Command`` (``ldp.cli.command``: help line, description, examples,
``add_arguments(parser)``, ``run(ns)``) defined in a module of its own and listed in ``COMMANDS``:

- ``run``, ``population``, ``list``: ``ldp.cli.run``;
- ``serve``: ``ldp.cli.serve``; ``clients``: ``ldp.cli.clients``;
- ``estimate``: ``ldp.cli.estimate``; ``certs``: ``ldp.cli.certs``; ``schema``: ``ldp.cli.schema``; ``lab``: ``ldp.cli.lab``;
- ``classroom``, ``join``: ``ldp.cli.classroom_commands``.

The argument types they share are ``ldp.cli.argtypes``. This module builds the parser from the
table and runs the command. User mistakes (unknown experiment, bad parameters, an aggregator that
cannot bind) print one line ``ldp-sim: error: ...`` and exit with code 2, without a traceback;
Ctrl-C exits with 130 and leaves no child process behind. See docs/protocol.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console

from ldp.cli.certs import CERTS
from ldp.cli.classroom_commands import CLASSROOM, JOIN
from ldp.cli.clients import CLIENTS
from ldp.cli.command import Command
from ldp.cli.estimate import ESTIMATE
from ldp.cli.lab import LAB
from ldp.cli.run import LIST, POPULATION, RUN
from ldp.cli.schema import SCHEMA
from ldp.cli.serve import SERVE
from ldp.core.errors import LDPError

__all__ = ["COMMANDS", "EXIT_USAGE", "EXIT_INTERRUPTED", "main"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

COMMANDS: tuple[Command, ...] = (RUN, ESTIMATE, SERVE, CLIENTS, CERTS, POPULATION, LIST, SCHEMA, LAB, CLASSROOM, JOIN)


class _Parser(argparse.ArgumentParser):
    """argparse whose usage mistakes are one line on stderr, ``ldp-sim: error: ...``, and exit 2."""

    def error(self, message: str) -> Any:  # argparse's NoReturn hook
        command = self.prog.removeprefix("ldp-sim").strip()
        name, sep, rest = message.removeprefix("argument ").partition(": ")
        if message.startswith("argument ") and sep and rest.startswith(f"{name} "):
            message = rest  # "argument --processes: --processes must be ..." says it once
        self.exit(EXIT_USAGE, f"ldp-sim: error: {message} (see `ldp-sim {command + ' ' if command else ''}--help`)\n")


def _parser() -> argparse.ArgumentParser:
    """``ldp-sim``'s parser: one subparser per entry of ``COMMANDS``, each with its help line, a
    description and an example (``ldp-sim COMMAND --help``)."""
    parser = _Parser(prog="ldp-sim", description="Simulate the local model of differential privacy (KLNRS).")
    from ldp import __version__

    parser.add_argument("--version", action="version", version=f"ldp-sim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        p = sub.add_parser(
            command.name, help=command.help, description=command.description, epilog="example:\n  " + "\n  ".join(command.examples),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    errors = Console(stderr=True)
    ns = _parser().parse_args(argv)
    command = next(c for c in COMMANDS if c.name == ns.command)
    try:
        return command.run(ns)
    except LDPError as exc:
        errors.print(f"ldp-sim: error: {exc}", markup=False, highlight=False, soft_wrap=True)  # one line, however long
        return EXIT_USAGE
    except MemoryError:
        users = getattr(ns, "users", None)
        who = f"{users} users" if users is not None else "the experiment's users"
        errors.print(
            f"ldp-sim: error: not enough memory for {who} in one process: "
            "this machine ran out while holding them; use more client processes or machines "
            "(`ldp-sim serve` here, `ldp-sim clients --shard K/M --processes P` on each of the others) or fewer users",
            markup=False, highlight=False, soft_wrap=True,
        )
        return EXIT_USAGE
    except KeyboardInterrupt:
        from ldp.wire.launcher import quiet_grpc_after_interrupt

        quiet_grpc_after_interrupt()
        errors.print("ldp-sim: interrupted", markup=False, highlight=False)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
