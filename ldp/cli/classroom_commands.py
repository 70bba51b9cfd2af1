"""``ldp-sim classroom`` (the teacher) and ``ldp-sim join HOST:PORT`` (a student): their arguments
and handlers. The classroom itself is ``ldp.classroom`` (``teacher.run_classroom``,
``student.run_join``), imported when the command runs: building the parser stays light (no
network imports). docs/classroom.md.
"""

from __future__ import annotations

import argparse

from ldp.classroom.enrol import FINGERPRINT_HEX
from ldp.cli.argtypes import port_number
from ldp.cli.command import Command

__all__ = ["CLASSROOM", "JOIN", "add_classroom_arguments", "add_join_arguments"]


def add_classroom_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of ``ldp-sim classroom`` (the teacher's machine)."""
    p.add_argument("--host", action="append", metavar="H", help="an address students dial (repeatable; default: this machine's address, 127.0.0.1 and localhost); the first is printed in the join command")
    p.add_argument("--bind", default="0.0.0.0", help="interface to listen on (default 0.0.0.0; 127.0.0.1 for a class on this machine only)")
    p.add_argument("--port", type=port_number, default=50051, help="the aggregator's gRPC port, 0..65535 (default 50051; 0: any free port)")
    p.add_argument("--http-port", type=port_number, default=8000, help="the dashboard's port, 0..65535 (default 8000; 0: any free port)")
    p.add_argument("--seats", type=int, default=40, help="the most students (default 40)")
    p.add_argument("--machine-users", type=int, default=1000, help="MASKED-PARITY records each student's machine generates (default 1000: with --d 5, lesson 4 shows the gap for 4 students or more)")
    p.add_argument("--d", type=int, default=5, help="MASKED-PARITY dimension (default 5)")
    p.add_argument("--students", type=int, default=0, help="start the lessons once this many students have joined (default: when the teacher presses Enter)")
    p.add_argument("--pace", type=float, default=None, help="seconds between lessons (default: wait for Enter)")
    p.add_argument("--linger", type=float, default=None, help="seconds to keep the dashboard up after the last lesson, then close with no confirmation (default: until Enter, then `end`)")
    p.add_argument("--wait", type=float, default=1800.0, help="seconds to wait for --students (default 1800)")
    p.add_argument("--seats-per-address", type=int, default=1, metavar="N", help="live seats one network address may hold (default 1: one student, one machine; more for several students on one machine)")
    p.add_argument("--seat-timeout", type=float, default=120.0, metavar="S", help="seconds after which a seat given and not connected (or whose connection ended) is free again (default 120)")
    p.add_argument("--round-deadline", type=float, default=60.0, metavar="S", help="seconds a lesson's round waits for the students' reports; a machine that misses it is MISSING for that round (default 60)")
    p.add_argument("--ledger-deadline", type=float, default=10.0, metavar="S", help="seconds to wait for the students' ledger reports after a round; a machine that misses it is not asked again (default 10)")
    p.add_argument("--out", metavar="DIR", default=None, help="where the class's record is saved when the lessons end: JSON of the dashboard's state, CSV tables and PNG charts (default: the current directory)")
    p.add_argument("--pki", metavar="DIR", help="keep the class's CA, certificate and token in DIR (created; default: a temporary directory, removed at the end)")
    return p


def add_join_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of ``ldp-sim join`` (a student's machine)."""
    p.add_argument("host", metavar="HOST:PORT", help="the classroom's dashboard address, as printed by the teacher")
    p.add_argument("--token", help="the class's enrolment token (from the join command)")
    p.add_argument("--token-file", metavar="F", help="read the token from F instead")
    p.add_argument("--ca", required=True, metavar="FINGERPRINT", help=f"the class CA's fingerprint ({FINGERPRINT_HEX} hex digits, from the join command)")
    p.add_argument("--name", default=None, help="the name the dashboard shows (default: your login name)")
    p.add_argument("--budget", type=float, default=4.0, help="your own budget ε: nothing beyond it is ever sent (default 4)")
    p.add_argument("--answers", metavar="FILE", help="read the answers from a JSON file instead of asking (scripted students)")
    p.add_argument("--transcript", metavar="FILE", help="also write every round as a JSON line to FILE")
    p.add_argument("--connect-timeout", type=float, default=60.0, help="seconds to keep trying to reach the teacher (default 60)")
    return p


def classroom_command(ns: argparse.Namespace) -> int:
    from ldp.classroom.teacher import run_classroom

    return run_classroom(ns)


def join_command(ns: argparse.Namespace) -> int:
    from ldp.classroom.student import run_join

    return run_join(ns)


CLASSROOM = Command(
    "classroom", "teach a class: aggregator, live dashboard and scripted lessons (docs/classroom.md)",
    "Teach a class: start the aggregator and the live dashboard, print the join command (and its QR code) for the students, "
    "and run the scripted lessons on their machines' reports (docs/classroom.md).",
    ("ldp-sim classroom --host 10.0.0.5",),
    add_classroom_arguments, classroom_command,
)
JOIN = Command(
    "join", "join a classroom from a student's machine (docs/classroom.md)",
    "Join a classroom from a student's machine: this machine's users answer the teacher's lessons within your own budget "
    "(the join command printed by the teacher has the address, the token and the CA's fingerprint).",
    ("ldp-sim join 10.0.0.5:8000 --token TOKEN --ca FINGERPRINT",),
    add_join_arguments, join_command,
)
