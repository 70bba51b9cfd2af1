"""``ldp-sim certs DIR [--server-host H ...] [--clients N | --client NAME ...] [--token] [--days D]``.

What: the subcommand's arguments and its handler, built like every ``ldp-sim`` subcommand
(``CERTS``, listed in ``ldp.cli.main.COMMANDS``); the PKI itself (check, then write) is ``ldp.wire.tls.plan_pki`` and
``make_pki``, which know nothing of the command line.
Guarantee: everything is checked before any file is written; user mistakes raise
``ParameterError`` (one line, exit 2, from ``ldp-sim``).
Source: docs/security.md (TLS and enrolment).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from ldp.cli.command import Command, say, stdout_console

__all__ = ["CERTS", "add_certs_arguments", "run_certs", "main_certs"]


def add_certs_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of ``ldp-sim certs`` (for a subparser of the main CLI)."""
    parser.add_argument("directory", metavar="DIR", help="where to write the files (created 0700; an existing CA there is reused)")
    parser.add_argument(
        "--server-host", dest="server_hosts", action="append", default=None, metavar="H",
        help="a host name or IP address clients connect to (repeat; default 127.0.0.1 and localhost)",
    )
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--clients", type=int, default=None, metavar="N", help="issue client certificates client-1 .. client-N")
    who.add_argument("--client", dest="client_names", action="append", default=None, metavar="NAME", help="issue a client certificate for NAME (repeat)")
    parser.add_argument("--token", action="store_true", help="also write a shared enrolment token (token mode: clients need no certificate)")
    parser.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    return parser


def run_certs(ns: argparse.Namespace, say: Callable[[str], None] = print) -> int:
    """``ldp-sim certs`` with parsed arguments: plan everything, refuse before writing anything,
    then write and say what went where. User mistakes raise ``ParameterError``."""
    from ldp.wire.tls import make_pki, plan_pki

    plan = plan_pki(Path(ns.directory), server_hosts=ns.server_hosts, clients=ns.clients, client_names=ns.client_names, token=ns.token, days=ns.days)
    make_pki(plan, say)
    return 0


def main_certs(argv: Sequence[str] | None = None, *, say: Callable[[str], None] = print) -> int:
    """``ldp-sim certs ...`` from an argument list. Returns 0; user mistakes raise
    ``ParameterError`` (``ldp-sim`` prints one line, exit 2); bad option syntax exits 2 through argparse."""
    parser = add_certs_arguments(
        argparse.ArgumentParser(prog="ldp-sim certs", description="Make a CA, the aggregator's certificate, client certificates and an enrolment token.")
    )
    return run_certs(parser.parse_args(None if argv is None else list(argv)), say)


def certs_command(ns: argparse.Namespace) -> int:
    return run_certs(ns, say=say(stdout_console()))


CERTS = Command(
    "certs", "make a CA, a server certificate and client certificates (or a token) for TLS",
    "Write into DIR a CA, a server certificate for the aggregator's addresses, and client certificates or a shared enrolment "
    "token, for `serve --tls DIR` and `clients --tls DIR`.",
    ("ldp-sim certs pki --server-host 10.0.0.5 --clients 2", "ldp-sim certs pki --server-host 10.0.0.5 --token"),
    add_certs_arguments, certs_command,
)
