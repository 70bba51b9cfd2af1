"""``ldp-sim classroom``: the teacher's aggregator, dashboard and scripted lessons.

What: makes a fresh class CA, a server certificate for the addresses students dial and a shared
enrolment token (``ldp.wire.tls``: token over TLS, docs/security.md); starts a ``GrpcAggregator``
that knows only the class's public description (``ClassPlan``) and admits only enrolled clients;
starts the dashboard (``ldp.classroom.dashboard``); prints the join command and its QR code;
then, once the class has joined, runs the scripted lessons (docs/classroom.md):

1. randomized response on a sensitive yes/no question (binary RR, ε = 1);
2. a histogram: GRR (``kary_rr``) against OUE — or, while ``oue`` is not a registered randomizer
   kind, against one binary RR question per category at ε/k each;
3. the ledger says no: the teacher asks for ε = 2 more, which every student's own ledger refuses;
4. interaction helps (lab 4 run by the class): the sharpest pair — the two-round correlation
   learner (its second question depends on the first round's answers) and the fair one-round
   learner — each on as many machine users as the interactive one needs for 95 % (at most half
   the class each), graded against the class's target.

Each lesson returns its result as an ``ExperimentResult`` (``ldp.experiment``: the type every
experiment and lab returns): a table and its result line; the dashboard shows the line as
before. At the end the class's record (one row per lesson) is printed, and the record, with
each lesson's table, is in the dashboard's state as JSON (``record``); the teacher's Enter at the
end of the class saves it to ``--out`` (``Teacher.save_record``: the state as JSON, CSV tables)
and says where before the dashboard stops.

Each reply is shown as it arrives (a reply observer on the ``GrpcAggregator``, told the moment a
shard's reply has passed validation), with the debiased estimate and its 95 % interval recomputed from the reports
so far; after every round the budget each participant spent is read from their ledgers
(``LedgerQuery``, a diagnostic the aggregator could compute itself).
Guarantees: the teacher's side never holds a record, a report key or a student's budget it could
change; every report is the student's process's (``ldp.wire.client``), validated by the
aggregator's usual checks (``codec.ReplyCheck``) before the dashboard sees it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ldp.classroom.dashboard import ClassState, Dashboard, SeatRequest, ca_fingerprint, clean_text
from ldp.classroom.enrol import SEAT_SECRET_HEADER, is_seat_secret, seat_commit
from ldp.classroom.lessons import (
    TRAVEL,
    ClassPlan,
    class_target,
    estimate_reports,
    histogram_kind,
    question_of,
    report_text,
    sensitive_spec,
    travel_grr_spec,
    travel_indicator_specs,
    travel_oue_spec,
    warm_up,
)
from ldp.core.budget import UNIT_BITS
from ldp.core.errors import LDPError, ParameterError
from ldp.core.queries import QuerySpec
from ldp.experiment.protocol import ExperimentResult
from ldp.local.messages import RoundReply, RoundRequest, SessionKind
from ldp.local.oracle import Reports
from ldp.local.session import Request, Session
from ldp.wire.aggregator import HANDSHAKE_TIMEOUT_S, Admission, GrpcAggregator, GrpcLROracle, ShardClaim
from ldp.wire.grpc_stderr import grpc_stderr_in_words
from ldp.wire.tls import ServerTLS, issue, make_ca, new_token, read_token, server_tls

__all__ = ["GAP_INTERACTIVE", "GAP_ONE_ROUND", "ParityLessonSize", "Teacher", "classroom_aggregator", "join_command", "parity_lesson_size", "query_label", "run_classroom", "short_query", "smallest_class_for_gap"]

_SCALE = float(1 << UNIT_BITS)
MAX_CHIPS = 60  # raw reports listed per request on the dashboard (the rest are counted)
ROUND_DEADLINE_S = 60.0  # a student's laptop that has not answered a lesson's round by then is MISSING
# A seat given and not connected within this (or whose connection ended this long ago) is free
# again: a `join` that asked and then failed, or a student who took a seat and never came, leaves no hole.
SEAT_TIMEOUT_S = 120.0
# How long the teacher waits for the students' ledger reports after a round (all asked at once).
# A student whose machine misses it is marked on the dashboard and not asked again: one student
# who ignores ledger queries costs the class this once, not once per round.
LEDGER_DEADLINE_S = 10.0
# How long the end of the class waits for the students' machines to leave on Close before their
# connections are cut (the server's stop grace; it returns as soon as all have left).
CLOSE_GRACE_S = 5.0


# Lesson 4 shows the gap only where the interactive learner is predicted to learn the target at
# least this often ...
GAP_INTERACTIVE = 0.9
# ... and the one-round learner, on as many users, at most this often (else the dashboard says
# plainly that the class is too small, instead of a lesson whose two learners both fail or both win).
GAP_ONE_ROUND = 0.5


@dataclass(frozen=True)
class ParityLessonSize:
    """How lesson 4 splits the class (``parity_lesson_size``): ``users`` machine users for each
    learner, the interactive one asking users 0..users−1 and the one-round one the next ``users``
    (user ranges of the contiguous connected seats from 0, so both get exactly as many even when
    the halves split a seat); their predicted success (``correlation_plan``, ``lni_plan``: over a
    uniform target), and ``needed``, the users the interactive learner needs for 95 %."""

    students: int
    users: int
    interactive: float
    one_round: float
    needed: int

    @property
    def shows_gap(self) -> bool:
        return self.interactive >= GAP_INTERACTIVE and self.one_round <= GAP_ONE_ROUND


def parity_lesson_size(plan: ClassPlan, students: int, epsilon: float = 1.0) -> ParityLessonSize:
    """Lesson 4's users per learner for ``students`` contiguous seats from 0: as many as the
    interactive (correlation) learner needs for 95 % (``correlation_users_for``), at most half of
    those seats' users each (``students·(1 + machine_users) // 2``). At the class's defaults
    (d = 5, 1000 machine users, ε = 1) that is 2,538 users (95 % against 37 %) from 6 students
    on and 2,502 (95 % against 36 %) with 5: the gap shows from 4 students (tests/classroom/
    test_lesson_gap.py). KLNRS §5; the predictions are the learners' own plans (issue 28)."""
    from ldp.learners.masked_parity import lni_plan  # SciPy: loaded when the lesson runs
    from ldp.learners.masked_parity_correlation import correlation_design, correlation_plan, correlation_users_for

    d = plan.d
    needed = correlation_users_for(d, epsilon)
    users = max(0, min(needed, students * plan.per_seat // 2))
    if users < int(correlation_design(d).shape[0]) + 1:  # fewer than one user per group and one for round 2
        return ParityLessonSize(students, users, 0.0, 0.0, needed)
    return ParityLessonSize(students, users, correlation_plan(users, d, epsilon).predicted_success, lni_plan(users, d, epsilon).predicted_success, needed)


def smallest_class_for_gap(plan: ClassPlan, epsilon: float = 1.0) -> int | None:
    """The fewest students (contiguous seats from 0) for which lesson 4 shows the gap, or None
    when even ``plan.seats`` students do not (then the class needs more --machine-users)."""
    for students in range(2, plan.seats + 1):
        size = parity_lesson_size(plan, students, epsilon)
        if size.shows_gap:
            return students
        if size.users >= size.needed:  # more students add no users: it never shows
            return None
    return None


class ClassroomOracle(GrpcLROracle):
    """The LR oracle the lessons use: registers each round on the dashboard before it is sent."""

    def __init__(self, aggregator: GrpcAggregator, teacher: Teacher) -> None:
        super().__init__(aggregator)
        self.teacher = teacher

    async def run_round(self, request: RoundRequest) -> list[Reports]:
        self.teacher.round_started(request)
        reports = await super().run_round(request)
        self.teacher.round_finished(request, reports)
        return reports


def short_query(query: QuerySpec | dict[str, Any]) -> str:
    """A query in a few symbols, for the dashboard (e.g. ``i=2 ∧ b=1 ∧ y=-1``, ``(y) · ((-1)^(x1+x3))``)."""
    q = query.to_json() if isinstance(query, QuerySpec) else query
    name, p = q.get("name"), q.get("params", {})
    if name == "field":
        return str(p.get("field")) + (f"[{p['index']}]" if p.get("index") else "")
    if name == "label":
        return "y"
    if name == "conjunction":
        parts = []
        for lit in p.get("literals", []):
            field, index, value = lit[0], lit[1], lit[2]
            eq = lit[3] if len(lit) > 3 else True
            parts.append(f"{field}{f'[{index}]' if index else ''}{'=' if eq else '≠'}{value}")
        return " ∧ ".join(parts)
    if name == "parity":  # mask: the indices j with r_j = 1
        mask = p.get("mask", [])
        terms = "+".join(f"x{int(j)}" for j in mask) if isinstance(mask, list) else str(mask)
        return f"(-1)^({terms or '0'})"
    if name == "user_parity":
        return "(-1)^<r_g,x>, r_g = your group's candidate r"
    if name == "product":
        return " · ".join(f"({short_query(f)})" for f in p.get("factors", []))
    if name == "affine":
        return f"{p.get('scale', 1):g}·({short_query(p.get('query', {}))}) + {p.get('offset', 0):g}"
    return str(name)



def _sign_words(q: dict[str, Any]) -> str | None:
    """A ±1-valued factor of a MASKED-PARITY query in words, or None for another shape."""
    name, p = q.get("name"), q.get("params", {})
    if name == "label":
        return "your label"
    if name == "parity":
        mask = p.get("mask", [])
        terms = " + ".join(f"x{int(j)}" for j in mask) if isinstance(mask, list) else ""
        return f"the sign of the parity of {terms}" if terms else "+1"
    if name == "user_parity":
        return "the sign of your group's parity (each group tries its own candidate r)"
    if name == "affine" and p.get("scale") == 2 and p.get("offset") == -1:
        inner = p.get("query", {})
        lits = inner.get("params", {}).get("literals", []) if inner.get("name") == "conjunction" else []
        if lits and all(lit[0] == "i" and len(lit) > 3 and lit[3] is False for lit in lits):
            where = ", ".join(str(lit[2]) for lit in lits)
            return f"your group's sign at your index i (− at i = {where}, + elsewhere)"
    return None


def _literal_words(lit: Sequence[Any]) -> str:
    """One literal of a conjunction as "subject value" ("your label -1", "your index i not 2")."""
    field, index, value = lit[0], lit[1], lit[2]
    eq = lit[3] if len(lit) > 3 else True
    shown = f"{int(value):+d}" if field == "y" else f"'{TRAVEL[int(value)]}'" if field == "travel" and 0 <= int(value) < len(TRAVEL) else str(value)
    subject = {"y": "your label", "i": "your index i", "travel": "your way here"}.get(field) or (f"bit {index} of your x" if field == "x" else f"{field}{f'[{index}]' if index else ''}")
    return f"{subject} {'' if eq else 'not '}{shown}"


def _is_b_literal(lit: Sequence[Any]) -> bool:
    return bool(lit[0] == "b" and (len(lit) < 4 or lit[3]))


def _b_scope(q: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """A leading ``1[b = v]`` factor of a two-factor product: ([v...], the other factor); else ([], q)."""
    factors = q.get("params", {}).get("factors", []) if q.get("name") == "product" else []
    if len(factors) == 2:
        lits = factors[0].get("params", {}).get("literals", []) if factors[0].get("name") == "conjunction" else []
        if lits and all(_is_b_literal(lit) for lit in lits):
            return [str(lit[2]) for lit in lits], factors[1]
    return [], q


def _conjunction_words(p: dict[str, Any], scope: list[str]) -> str | None:
    lits = p.get("literals", [])
    scope += [str(lit[2]) for lit in lits if _is_b_literal(lit)]
    rest = [_literal_words(lit) for lit in lits if not _is_b_literal(lit)]
    return f"is {' and '.join(rest)}?" if rest else "every record"


def _agreement_words(p: dict[str, Any], scope: list[str]) -> str | None:
    """``(1 ± A·B)/2`` of two ±1 factors: "does A agree with / differ from B?"."""
    if not (abs(p.get("scale", 0)) == 0.5 and p.get("offset") == 0.5):
        return None
    inner = p.get("query", {})
    parts = inner.get("params", {}).get("factors", []) if inner.get("name") == "product" else []
    words = [_sign_words(f) for f in parts]
    if len(words) == 2 and all(words):
        return f"does {words[0]} {'agree with' if p['scale'] > 0 else 'differ from'} {words[1]}?"
    return None


def _field_words(p: dict[str, Any], scope: list[str]) -> str | None:
    if p.get("field") in ("sensitive", "travel"):
        return question_of(QuerySpec.from_json({"name": "field", "params": p}))
    return None


# The query shapes the lessons ask, each put in words by its describer (None: not this shape).
_DESCRIBERS: dict[str, Callable[[dict[str, Any], list[str]], str | None]] = {
    "conjunction": _conjunction_words,
    "affine": _agreement_words,
    "field": _field_words,
}


def query_label(query: QuerySpec | dict[str, Any]) -> str:
    """A query in plain words, for the projector (issue 29: "readable query labels"), e.g.
    ``does your label differ from the parity (-1)^(x0+x2)? (only b = 0 records)``; the formula
    stays in ``short_query``, which the dashboard shows smaller under it. Recognizes the shapes
    the lessons ask (a conjunction; a ±1 agreement ``(1 ± A·B)/2`` of two ±1 factors; either
    restricted to the b = 0 or b = 1 half of the records by a leading ``1[b = v]`` factor) and
    falls back to ``short_query`` for anything else."""
    scope, q = _b_scope(query.to_json() if isinstance(query, QuerySpec) else query)
    describe = _DESCRIBERS.get(str(q.get("name")))
    body = describe(q.get("params", {}), scope) if describe is not None else None
    if body is None:
        return short_query(query)
    if len(set(scope)) == 1:
        body += f" (only b = {scope[0]} records)"
    return body


def _seat_of_key(key: str) -> int:
    return int(key.split("/", 1)[0])


@dataclass
class Seat:
    """A seat the teacher gave: to whom (the name, the request's nonce, the commitment to the
    secret the student's machine keeps, the address the request came from), and since when it is
    idle (given and not connected yet, or its connection ended): ``monotonic`` seconds."""

    name: str
    nonce: str
    commit: str
    address: str
    idle_since: float | None
    connected: bool = False


class Teacher:
    """The classroom's state machine: seats, rounds on the dashboard, the scripted lessons.

    Seats (docs/classroom.md, "Seats"): at most ``seats_per_address`` live seats per source
    address; a seat idle for ``seat_timeout_s`` is freed (``expire_seats``); the teacher removes
    one with ``remove`` (the console's ``remove N``); a gRPC connection is admitted only for a
    live seat and with its secret (``admit``). Ledger reports are asked with one deadline,
    ``ledger_deadline_s``, and a student whose machine misses it is not asked again."""

    def __init__(
        self,
        plan: ClassPlan,
        token: str,
        state: ClassState,
        *,
        say: Callable[[str], None] = print,
        seats_per_address: int = 1,
        seat_timeout_s: float = SEAT_TIMEOUT_S,
        ledger_deadline_s: float = LEDGER_DEADLINE_S,
        round_deadline_s: float = ROUND_DEADLINE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.plan = plan
        self.token = token
        self.state = state
        self.say = say
        self.schema = plan.schema
        self.seats_per_address = seats_per_address
        self.seat_timeout_s = seat_timeout_s
        self.ledger_deadline_s = ledger_deadline_s
        self.round_deadline_s = round_deadline_s
        self.clock = clock
        self.aggregator: GrpcAggregator | None = None
        self.oracle: ClassroomOracle | None = None
        self._seats: dict[int, Seat] = {}
        self._by_nonce: dict[str, int] = {}
        self._silent: set[str] = set()  # shard keys whose machine missed a ledger deadline: not asked again
        self._rounds: dict[tuple[int, int], dict[str, Any]] = {}  # (session, round) -> round record
        self._requests: dict[int, dict[str, Any]] = {}  # request id -> request record
        self._values: dict[int, list[np.ndarray]] = {}  # request id -> report arrays received so far
        self._labels: list[str] | None = None  # labels for the next round's requests (lessons set them)
        self.grpc_port = 0
        self.results: list[ExperimentResult] = []  # each lesson's result, in order (the class's record)
        self.reply_times: list[tuple[int, int, float]] = []  # (request id, seat, arrival time.time())

    # --- seats (dashboard POST /seat; the aggregator's admission; the teacher's console) ---

    def allocate(self, request: SeatRequest) -> dict[str, Any]:
        """A seat for a verified request: the same request gets the same seat back; otherwise the
        lowest free seat, unless the request's address already holds ``seats_per_address`` seats
        (raises ``ParameterError``, which the student sees)."""
        self.expire_seats()
        seat = self._by_nonce.get(request.nonce)
        if seat is not None:
            if self._seats[seat].commit != request.commit:
                raise ParameterError("this seat request was already answered for another secret: ask again with a fresh nonce")
            return self._seat_answer(seat)
        held = sorted(s for s, info in self._seats.items() if info.address == request.address)
        if len(held) >= self.seats_per_address:
            raise ParameterError(
                f"the machine at {request.address} already holds seat{'s' if len(held) > 1 else ''} {', '.join(map(str, held))}: "
                f"one student, one seat (a seat nobody connects to is freed after {self.seat_timeout_s:g} s; "
                "a teacher running several students on one machine starts the classroom with --seats-per-address N)"
            )
        free = [s for s in range(self.plan.seats) if s not in self._seats]
        if not free:
            raise ParameterError(f"the class is full: all {self.plan.seats} seats are taken (start the classroom with more --seats)")
        seat = free[0]
        name = clean_text(request.name, 40)
        self._seats[seat] = Seat(name, request.nonce, request.commit, request.address, idle_since=self.clock())
        self._by_nonce[request.nonce] = seat
        self.refresh_students()
        self.state.event(f"{name} took seat {seat}")
        return self._seat_answer(seat)

    def _seat_answer(self, seat: int) -> dict[str, Any]:
        return {"seat": seat, "seats": self.plan.seats, "grpc_port": self.grpc_port, "plan": self.plan.to_json(), "seat_timeout_s": self.seat_timeout_s}

    def admit(self, claim: ShardClaim, secret: str) -> str:
        """'' when a gRPC connection claiming ``claim`` may proceed, else the reason: the claim must
        be one whole seat of this class, given by the teacher and not expired or removed, and the
        call must carry the secret whose commitment that seat was given for."""
        self.expire_seats()
        if claim.count != self.plan.seats or claim.sub_count != 1:
            return f"a classroom connection claims one seat of {self.plan.seats} (shard K/{self.plan.seats}), not {claim.key}"
        info = self._seats.get(claim.index)
        if info is None:
            return f"seat {claim.index} was not given to anyone (or was freed): ask the dashboard for a seat (ldp-sim join)"
        if not is_seat_secret(secret) or seat_commit(secret) != info.commit:
            return f"seat {claim.index} belongs to another student: this connection does not carry its secret"
        if not info.connected:
            info.idle_since = self.clock()  # its connection is under way: the seat does not expire during the handshake
        return ""

    def admission(self, request: Admission) -> str:
        """The aggregator's admission check (``GrpcAggregator.add_admission_check``): ``admit``
        with the seat secret the call carries in its metadata (``enrol.SEAT_SECRET_HEADER``), so
        an enrolled student cannot take another's seat over gRPC."""
        return self.admit(request.claim, request.header(SEAT_SECRET_HEADER))

    def expire_seats(self) -> list[int]:
        """Free every seat idle (no connection) for ``seat_timeout_s``; returns them."""
        now = self.clock()
        gone = [s for s, info in self._seats.items() if not info.connected and info.idle_since is not None and now - info.idle_since >= self.seat_timeout_s]
        for seat in gone:
            info = self._free(seat)
            self.state.event(f"seat {seat} ({info.name}) is free again: no connection for {self.seat_timeout_s:g} s")
        if gone:
            self.refresh_students()
        return gone

    def _free(self, seat: int) -> Seat:
        info = self._seats.pop(seat)
        self._by_nonce.pop(info.nonce, None)
        self.state.data["students"].pop(str(seat), None)
        self._silent.discard(self._key(seat))
        return info

    def _key(self, seat: int) -> str:
        return f"{seat}/{self.plan.seats}"

    async def remove(self, seat: int) -> str:
        """The teacher removes a seat: its student's connection (if any) is closed with a reason,
        and the seat, its secret revoked, is free for someone else. Returns what happened."""
        info = self._seats.get(seat)
        if info is None:
            return f"seat {seat} is not taken (seats taken: {sorted(self._seats) or 'none'})"
        self._free(seat)
        closed = False
        if self.aggregator is not None:
            closed = await self.aggregator.expel(self._key(seat), "the teacher removed this seat")
        self.refresh_students()
        self.state.event(f"the teacher removed seat {seat} ({info.name})")
        return f"removed seat {seat} ({info.name}){'; its connection is closed' if closed else ''}"

    def seat_lines(self) -> list[str]:
        """The seats, one line each, for the teacher's console (the address is not on the projected page)."""
        now = self.clock()
        lines = []
        for seat in sorted(self._seats):
            info = self._seats[seat]
            if info.connected:
                status = "connected"
            else:
                idle = now - (info.idle_since or now)
                status = f"not connected for {idle:.0f} s (freed after {self.seat_timeout_s:g} s)"
            silent = "; ledger: no answer" if self._key(seat) in self._silent else ""
            lines.append(f"  seat {seat}: {info.name!r} from {info.address}, {status}{silent}")
        return lines or ["  no seat is taken"]

    def join_shortfall(self, students: int, waited_s: float) -> str:
        """Why fewer than ``students`` joined within ``waited_s``: how many seats were given and how
        many of those connected, and the aggregator's last refusals (a wrong CA, a seat secret that
        does not match, a handshake that timed out), so a teacher sees where joining stops."""
        connected = self.connected_seats()
        given = len(self._seats)
        refusals = [e for e in (self.aggregator.events if self.aggregator is not None else []) if e.startswith(("rejected", "refused"))]
        lines = [f"only {len(connected)} of {students} students joined within {waited_s:g} s: {given} seat{'' if given == 1 else 's'} given on the dashboard, {len(connected)} connected"]
        if given == 0:
            lines.append("no student's machine asked the dashboard for a seat (is the join command's address reachable from the students' machines?)")
        if refusals:
            lines.append(f"{len(refusals)} connection{'s were' if len(refusals) > 1 else ' was'} refused; the last: " + "; ".join(clean_text(r, 200) for r in refusals[-3:]))
        elif given > len(connected):
            lines.append("no connection was refused: the seats' machines have not reached the aggregator's port (a firewall between them, or machines still starting)")
        return "\n".join(lines)

    def connected_seats(self) -> list[int]:
        if self.aggregator is None:
            return []
        return sorted(_seat_of_key(s.key) for s in self.aggregator.shards if s.key.endswith(f"/{self.plan.seats}"))

    def refresh_students(self) -> None:
        connected = set(self.connected_seats())
        students = self.state.data["students"]
        now = self.clock()
        for seat, info in self._seats.items():
            if info.connected and seat not in connected:
                info.idle_since = now  # its connection ended: freed after the timeout unless it comes back
            elif seat in connected:
                info.idle_since = None
            info.connected = seat in connected
            entry = students.setdefault(str(seat), {"seat": seat, "name": info.name, "spent": 0.0, "machine_spent": 0.0, "budget": None})
            entry["connected"] = info.connected
            entry["ledger"] = "no answer" if self._key(seat) in self._silent else "ok"
            if info.connected and self.aggregator is not None:
                view = self.aggregator.connection(self._key(seat))  # a read-only snapshot
                entry["budget"] = None if view is None else view.budget
        self.state.data["joined"] = len(connected)
        self.state.changed()

    def on_change(self, event: str) -> None:
        self.refresh_students()
        if event.startswith("shard ") and (" connected " in event or "disconnected" in event):
            with contextlib.suppress(ValueError, IndexError):
                seat = _seat_of_key(event.split()[1])
                info = self._seats.get(seat)
                name = info.name if info is not None else f"seat {seat}"
                self.state.event(f"{name} {'joined' if ' connected ' in event else 'left'}")

    # --- rounds on the dashboard ---

    def _current_step(self) -> dict[str, Any]:
        if not self.state.data["steps"]:
            self.state.data["steps"].append({"title": "(before the lessons)", "say": "", "rounds": [], "status": "running"})
        step: dict[str, Any] = self.state.data["steps"][-1]
        return step

    def round_started(self, request: RoundRequest) -> None:
        students_only = self._labels is not None  # the lessons' own rounds ask the students' own users only
        labels = self._labels or []
        self._labels = None
        step = self._current_step()
        record: dict[str, Any] = {
            "session": request.session_id, "round": request.round, "last": request.last_round, "started": time.time(), "requests": [], "done": False,
            "title": _round_title(step, request),
        }
        for pos, a in enumerate(request.assignments):
            spec = a.randomizer
            req = {
                "id": str(a.request_id),  # JSON numbers lose 64-bit ids in the browser
                # A lesson's own question is labelled by the lesson; a learner's (lesson 4) in plain
                # words, its formula ("query") shown smaller under it (issue 29).
                "label": labels[pos] if pos < len(labels) else query_label(spec.query),
                "question": question_of(spec.query) if pos < len(labels) else "",
                "query": short_query(spec.query),
                "kind": spec.kind,
                "epsilon": spec.epsilon,
                "asked": len(a.users),
                "answered": 0,
                "refused": 0,
                "missing": 0,
                "chips": [],
                "estimate": None,
                "students_only": students_only,
            }
            record["requests"].append(req)
            self._requests[a.request_id] = {"record": req, "spec": spec}
            self._values[a.request_id] = []
        self._rounds[(request.session_id, request.round)] = record
        step["rounds"].append(record)
        self.state.changed()

    def on_reply(self, key: str, reply: RoundReply) -> None:
        """One student's validated reply: its reports join the estimate at once."""
        now = time.time()
        seat = _seat_of_key(key)
        info = self._seats.get(seat)
        name = info.name if info is not None else f"seat {seat}"
        if reply.error:  # the student's machine's text: cleaned here, escaped where it is shown
            self.state.event(f"{name}'s machine refused the round: {clean_text(reply.error, 200)}")
            return
        for result in reply.results:
            entry = self._requests.get(result.request_id)
            if entry is None:
                continue
            req = entry["record"]
            refused = int(np.count_nonzero(result.refused))
            values = np.asarray(result.values)
            req["answered"] += int(values.shape[0]) if values.ndim else 0
            req["refused"] += refused
            if result.error:
                req["missing"] += len(result.refused)
            self.reply_times.append((result.request_id, seat, now))
            if len(req["chips"]) < MAX_CHIPS:
                if req["students_only"] and len(result.refused) == 1:  # the student's own answer: one report, or a refusal
                    shown = None if refused else report_text(entry["spec"].kind, values[0])
                    req["chips"].append({"seat": seat, "name": name, "value": shown, "refused": bool(refused), "time": now})
                else:
                    req["chips"].append({"seat": seat, "name": name, "value": f"{values.shape[0]} report{'' if values.shape[0] == 1 else 's'}", "refused": refused > 0, "time": now})
            if values.size:
                self._values[result.request_id].append(values)
                self._update_estimate(result.request_id)
        self.state.changed()

    def _update_estimate(self, request_id: int) -> None:
        entry = self._requests[request_id]
        values = np.concatenate(self._values[request_id]) if self._values[request_id] else np.zeros(0)
        est = estimate_reports(entry["spec"], self.schema, values, label=entry["record"]["label"])
        entry["record"]["estimate"] = None if est is None else est.to_json()

    def round_finished(self, request: RoundRequest, reports: list[Reports]) -> None:
        record = self._rounds.get((request.session_id, request.round))
        if record is None:
            return
        for req, rep in zip(record["requests"], reports):
            counts = rep.counts()
            req["answered"], req["refused"], req["missing"] = counts["answered"], counts["refused"], counts["missing"] + counts["error"]
            req["errors"] = [clean_text(e, 300) for e in list(rep.errors)[:3]]  # they may quote a student's machine
        record["done"] = True
        record["finished"] = time.time()
        self.state.changed()

    async def update_budgets(self) -> None:
        """Every participant's spent ε, read from their own ledgers (a diagnostic query), all asked
        at once with one short deadline (``ledger_deadline_s``). A student whose machine does not
        answer in time is marked ("ledger: no answer") and not asked again, so one machine that
        ignores ledger queries costs the class one deadline, not one per round."""
        assert self.aggregator is not None
        shards = [s for s in self.aggregator.shards if s.key not in self._silent]
        if not shards:
            return
        units = await self.aggregator.ledger_units_by_shard([s.key for s in shards], self.ledger_deadline_s)
        for s in shards:
            part = units.get(s.key)
            seat = _seat_of_key(s.key)
            if part is None or len(part) != s.count:
                if s.key in {x.key for x in self.aggregator.shards}:  # still connected: it did not answer
                    self._silent.add(s.key)
                    info = self._seats.get(seat)
                    who = info.name if info is not None else f"seat {seat}"
                    self.state.event(f"{who}'s machine did not report its ledger within {self.ledger_deadline_s:g} s: not asked again")
                continue
            entry = self.state.data["students"].get(str(seat))
            if entry is not None:
                entry["spent"] = float(part[0]) / _SCALE
                entry["machine_spent"] = float(part[1:].max()) / _SCALE if len(part) > 1 else 0.0  # the most any of its users spent
        self.refresh_students()

    # --- the lessons ---

    async def round(self, session: Session, requests: list[Request], labels: list[str] | None = None, last: bool | None = None) -> list[Reports]:
        self._labels = labels
        reports = await session.round(requests, last=last)
        await self.update_budgets()
        return reports

    def begin_step(self, title: str, say: str) -> dict[str, Any]:
        steps = self.state.data["steps"]
        if steps and steps[-1]["title"] == "(before the lessons)" and not steps[-1]["rounds"]:
            steps.pop()
        for s in steps:
            s["status"] = "done"
        number = sum(1 for s in steps if s.get("lesson")) + 1  # the lessons are numbered as in docs/classroom.md
        step: dict[str, Any] = {"title": title, "say": say, "rounds": [], "status": "running", "result": None, "lesson": number}
        steps.append(step)
        self.state.changed()
        self.say(f"\n== {title}\n{say}")
        return step

    def students(self) -> list[int]:
        """The user ids of the connected students' own answers."""
        return [self.plan.student_user(s) for s in self.connected_seats()]

    async def lesson_sensitive(self, epsilon: float = 1.0) -> ExperimentResult:
        step = self.begin_step(
            "Lesson 1 — randomized response",
            f"Everyone answers the sensitive question on their own machine. Each machine tells the truth with "
            f"probability e^ε/(1+e^ε) = {math.exp(epsilon) / (1 + math.exp(epsilon)):.2f} and lies otherwise (ε = {epsilon:g}). "
            "No single report says what anyone answered; the debiased average of all of them estimates the class's fraction of 'yes'.",
        )
        assert self.oracle is not None
        session = Session(self.oracle, SessionKind.NON_INTERACTIVE, name="randomized-response", deadline_s=self.round_deadline_s)
        (rep,) = await self.round(session, [Request.of(self.students(), sensitive_spec(epsilon))], ["yes"])
        est = estimate_reports(sensitive_spec(epsilon), self.schema, rep.values, label="yes")
        step["result"] = {"text": f"estimated fraction of 'yes': {_fmt_est(est, 0)} from {len(rep.values)} reports"}
        self.state.changed()
        rows = [] if est is None else [("yes", est.values[0], est.low[0], est.high[0], est.n)]
        return self._lesson_result(step, ("answer", "estimated fraction", "95 % low", "95 % high", "reports"), rows)

    async def lesson_histogram(self, epsilon: float = 1.0) -> ExperimentResult:
        other = histogram_kind()
        versus = "OUE" if other == "oue" else f"binary RR per category ({len(TRAVEL)} questions at ε/{len(TRAVEL)} each)"
        step = self.begin_step(
            f"Lesson 2 — a histogram: GRR against {versus}",
            f"Same question, same ε = {epsilon:g}, two randomizers. GRR (k-ary randomized response) reports one category, "
            f"true with probability e^ε/(e^ε+k−1); {versus} spends the same ε differently. Compare the interval widths.",
        )
        assert self.oracle is not None
        users = self.students()
        session = Session(self.oracle, SessionKind.NON_INTERACTIVE, name="histogram-grr", deadline_s=self.round_deadline_s)
        (grr,) = await self.round(session, [Request.of(users, travel_grr_spec(epsilon))], ["GRR"])
        session = Session(self.oracle, SessionKind.NON_INTERACTIVE, name=f"histogram-{other}", deadline_s=self.round_deadline_s)
        if other == "oue":
            spec = travel_oue_spec(epsilon)
            (oue,) = await self.round(session, [Request.of(users, spec)], ["OUE"])
            widths = _widths(estimate_reports(spec, self.schema, oue.values))
        else:
            specs = travel_indicator_specs(epsilon)
            reps = await self.round(session, [Request.of(users, s) for s in specs], list(TRAVEL))
            ests = [estimate_reports(s, self.schema, r.values) for s, r in zip(specs, reps)]
            widths = [w for e in ests for w in _widths(e)]
        grr_widths = _widths(estimate_reports(travel_grr_spec(epsilon), self.schema, grr.values))
        step["result"] = {
            "text": f"mean 95 % interval width: GRR {_f2(_mean(grr_widths))}, {versus} {_f2(_mean(widths))} (narrower is better)",
            "grr_width": _mean(grr_widths),
            "other_width": _mean(widths),
            "other": other,
        }
        self.state.changed()
        return self._lesson_result(step, ("randomizer", "mean 95 % interval width"), [("GRR", _mean(grr_widths)), (versus, _mean(widths))])

    async def lesson_over_asking(self, epsilon: float = 2.0) -> ExperimentResult:
        step = self.begin_step(
            "Lesson 3 — the ledger says no",
            f"The teacher asks the sensitive question once more, with ε = {epsilon:g}. Each student's machine keeps its own "
            "ledger: whoever has less than that left refuses — no report, no charge — and the teacher can do nothing about it.",
        )
        assert self.oracle is not None
        session = Session(self.oracle, SessionKind.NON_INTERACTIVE, name="over-asking", deadline_s=self.round_deadline_s)
        (rep,) = await self.round(session, [Request.of(self.students(), sensitive_spec(epsilon))], ["yes (again)"])
        counts = rep.counts()
        step["result"] = {"text": f"refused by {counts['refused']} of {len(rep.users)} students' own ledgers; {counts['answered']} answered", **counts}
        self.state.changed()
        return self._lesson_result(step, ("ε asked", "students asked", *counts), [(epsilon, len(rep.users), *counts.values())])

    async def lesson_masked_parity(self, epsilon: float = 1.0) -> ExperimentResult:
        """Lab 4 run by the class, with the sharpest pair (issue 28): the correlation learner
        (interactive, ``ldp.learners.masked_parity_correlation``) against the fair one-round
        learner (``ldp.learners.masked_parity``), each on the same number of machine users: as
        many as the interactive learner needs for 95 %, at most half the connected seats' users
        each, as user ranges (``parity_lesson_size``), where the one-round learner's predicted
        success is far lower. Fewer users than half the class each also keep the lesson short.
        A class too small for the gap (interactive < 90 % or one round > 50 % predicted) is told
        so on the dashboard, with the class size that shows it, and the learners are not run."""
        from ldp.core.rng import generator
        from ldp.learners.masked_parity import learn_masked_parity_lni, lni_users_for  # SciPy: loaded when the lesson runs
        from ldp.learners.masked_parity_correlation import correlation_design, learn_masked_parity_correlation

        d = self.plan.d
        seats = self.connected_seats()
        # The learners ask contiguous users: the longest run of connected seats from seat 0.
        run = 0
        while run < len(seats) and seats[run] == run:
            run += 1
        size = parity_lesson_size(self.plan, run, epsilon)
        n = size.users
        groups = int(correlation_design(d).shape[0])
        m = self.plan.per_seat
        step = self.begin_step(
            "Lesson 4 — interaction helps (MASKED-PARITY, lab 4)",
            f"Your machines generated {self.plan.machine_users} records each of a hidden concept c_(r,a) on {{0,1}}^{d}. "
            f"The first {n:,} machine users (seats 0–{max(0, n - 1) // m}) run the interactive learner: in round 1 each answers one "
            f"question about the coordinate of r it holds (its group's public ± signs; {groups} groups), and the counts, added "
            f"with those signs, give every bit of r at once; round 2's question depends on the r that round 1 found. The next "
            f"{n:,} (seats {n // m}–{max(0, 2 * n - 1) // m}) run the one-round learner, which must ask about all 2^{d} = {2**d} "
            f"candidate r at once. Each gets {n:,} users: about what the interactive one needs for 95 % ({size.needed:,}); "
            f"the one-round one needs ≈ {lni_users_for(d, epsilon):,}. Predicted: interactive {size.interactive:.0%}, "
            f"one round {size.one_round:.0%}.",
        )
        assert self.oracle is not None
        columns = ("learner", "rounds", "users", "r", "a", "right", "predicted success")
        if not size.shows_gap:
            # Say plainly why nothing runs: a lesson whose two learners both fail (or both win) shows nothing.
            least = smallest_class_for_gap(self.plan, epsilon)
            fix = (f"it shows from {least} students in seats 0–{least - 1}" if least is not None
                   else f"no class of at most {self.plan.seats} seats shows it at {self.plan.machine_users} machine users each")
            step["result"] = {
                "text": f"this class is too small to show the gap: {run} student{'' if run == 1 else 's'} in seats from 0 give each learner "
                f"{n:,} users, where the interactive learner is predicted to learn the target {size.interactive:.0%} of the time and the "
                f"one-round learner {size.one_round:.0%} (the gap needs ≥ {GAP_INTERACTIVE:.0%} against ≤ {GAP_ONE_ROUND:.0%}); {fix} "
                "(or start the classroom with more --machine-users). The learners were not run.",
                "too_small": True, "users": n, "interactive_predicted": size.interactive, "one_round_predicted": size.one_round,
            }
            self.state.changed()
            return self._lesson_result(step, columns, [])
        target = class_target(self.token, d)
        interactive = await learn_masked_parity_correlation(self.oracle, d, epsilon, users=n, first_user=0)
        await self.update_budgets()
        one_round = await learn_masked_parity_lni(self.oracle, d, epsilon, generator(0, "classroom-lni"), users=n, first_user=n)
        await self.update_budgets()
        truth = target.to_json()

        def verdict(result: Any) -> dict[str, Any]:
            got = result.hypothesis.to_json()
            return {"r": "".join(map(str, got["r"])), "a": got["a"], "right": got == truth}

        step["result"] = {
            "text": "",
            "truth": {"r": "".join(map(str, truth["r"])), "a": truth["a"]},
            "interactive": {**verdict(interactive), "users": n, "predicted_success": size.interactive},
            "one_round": {**verdict(one_round), "users": n, "predicted_success": size.one_round},
        }
        res = step["result"]
        res["text"] = (
            f"target r={res['truth']['r']}, a={res['truth']['a']}; interactive ({n} users): r={res['interactive']['r']}, a={res['interactive']['a']} "
            f"{'✓' if res['interactive']['right'] else '✗'}; one round ({n} users): r={res['one_round']['r']}, a={res['one_round']['a']} "
            f"{'✓' if res['one_round']['right'] else '✗'}"
        )
        self.state.changed()
        rows = [
            (name, rounds, n, res[key]["r"], res[key]["a"], res[key]["right"], round(res[key]["predicted_success"], 3))
            for name, key, rounds in (("interactive (correlation)", "interactive", 2), ("one round (fair)", "one_round", 1))
        ]
        return self._lesson_result(step, columns, rows)

    @staticmethod
    def _lesson_result(step: dict[str, Any], columns: tuple[str, ...], rows: Sequence[tuple[Any, ...]]) -> ExperimentResult:
        """A lesson's result in the experiments' type: the step's title, a table, its result line.
        An undefined number (an interval from one report) is None: the dashboard's JSON has no NaN."""
        table = tuple(tuple(None if isinstance(v, float) and not math.isfinite(v) else v for v in row) for row in rows)
        return ExperimentResult(step["title"], columns, table, notes=step["result"]["text"])

    def record(self) -> ExperimentResult:
        """The class's record: one row per lesson run so far (its title and result line)."""
        return ExperimentResult(
            f"The class's record ({len(self.connected_seats())} students connected, d = {self.plan.d})",
            ("lesson", "result"),
            tuple((r.title, r.notes) for r in self.results),
        )

    def save_record(self, out_dir: Path, stamp: str | None = None) -> list[Path]:
        """The class's work, kept (issue 29): in ``out_dir`` (``--out``, default the current
        directory), ``class-record-STAMP.json`` (the dashboard's whole state, every report,
        estimate and refusal it showed, with the record), ``class-record-STAMP.csv`` (one row per
        lesson: its number, title and result line), ``class-record-STAMP-lesson-N.csv`` (each
        lesson's table) and ``class-record-STAMP-lesson-N.png`` (the dashboard's charts of lesson
        N: each question's estimate with its 95 % interval; only for a lesson that has one). Nothing in them is more than the projector showed: the state never holds
        the token (withheld again here, as the dashboard does). Returns the paths written;
        a directory that cannot be written is one line (``LDPError``)."""
        import csv
        import json

        stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
        base = Path(out_dir) / f"class-record-{stamp}"
        paths = [base.with_suffix(".json"), base.with_suffix(".csv")]
        try:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            text = json.dumps(self.state.snapshot(), ensure_ascii=False, indent=1, allow_nan=False)
            paths[0].write_text(text.replace(self.token, "<token withheld>") if self.token else text, encoding="utf-8")
            with paths[1].open("w", newline="", encoding="utf-8") as f:
                w = csv.writer(f)
                w.writerow(("lesson", "title", "result"))
                w.writerows((k + 1, r.title, r.notes) for k, r in enumerate(self.results))
            for k, r in enumerate(self.results):
                path = Path(f"{base}-lesson-{k + 1}.csv")
                with path.open("w", newline="", encoding="utf-8") as f:
                    w = csv.writer(f)
                    w.writerow(r.columns)
                    w.writerows(r.rows)
                paths.append(path)
            steps = {step["title"]: step for step in self.state.data["steps"]}
            for k, r in enumerate(self.results):
                panels = _chart_panels(steps.get(r.title, {}))
                if panels:
                    paths.append(save_lesson_chart(Path(f"{base}-lesson-{k + 1}.png"), r.title, panels))
        except OSError as exc:
            raise LDPError(f"cannot save the class's record in {out_dir}: {exc.strerror or exc} (choose another --out)") from None
        return paths

    async def run_lessons(self, pause: Callable[[str], Any]) -> None:
        lessons = [self.lesson_sensitive, self.lesson_histogram, self.lesson_over_asking, self.lesson_masked_parity]
        for k, lesson in enumerate(lessons):
            self.results.append(await lesson())
            step = self.state.data["steps"][-1]
            if step.get("result"):
                self.say(f"   → {step['result']['text']}")
            if k + 1 < len(lessons):
                await pause("next lesson")
        for s in self.state.data["steps"]:
            s["status"] = "done"
        record = self.record()
        # The record as JSON in the dashboard's state (GET /state): the summary and each lesson's table.
        self.state.data["record"] = {"summary": record.to_json(), "lessons": [r.to_json() for r in self.results]}
        self.say(f"\n== {record.title}\n" + "\n".join(f"   {title}: {line}" for title, line in record.rows))
        self.state.data["finished"] = True
        self.state.changed()


MAX_CHART_PANELS = 12  # a lesson's PNG shows at most this many questions (lesson 4 asks many): a page stays readable


def _chart_panels(step: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The charts the dashboard drew for one lesson (``app.js``'s ``chart``): every question of
    its rounds, oldest first, that has an estimate, as (label, estimate JSON)."""
    return [
        (str(req.get("label", "")), req["estimate"])
        for rnd in step.get("rounds", [])
        for req in rnd.get("requests", [])
        if req.get("estimate") and req["estimate"].get("labels")
    ]


def save_lesson_chart(path: Path, title: str, panels: list[tuple[str, dict[str, Any]]]) -> Path:
    """One lesson's charts as a PNG (issue 29's export): a panel per question, each label's
    debiased estimate with its 95 % interval (an undefined one is drawn as the point alone) and
    the parameter's range shaded, as the dashboard draws them. Matplotlib is imported here, with
    the Agg backend (no display: the teacher's terminal may have none), only when a class ends."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = panels[:MAX_CHART_PANELS]
    fig, axes = plt.subplots(len(shown), 1, figsize=(7.0, 1.2 + 2.4 * len(shown)), squeeze=False)
    for ax, (label, est) in zip(axes[:, 0], shown):
        labels = [str(x) for x in est["labels"]]
        x = list(range(len(labels)))
        low_b, high_b = est.get("bounds") or (0.0, 1.0)
        ax.axhspan(low_b, high_b, color="0.93", label="the parameter's range")
        for j, v in enumerate(est["values"]):
            if v is None:
                continue
            lo, hi = est["low"][j], est["high"][j]
            err = None if lo is None or hi is None else [[v - lo], [hi - v]]
            ax.errorbar([j], [v], yerr=err, fmt="o", color="C0", capsize=4)
        ax.set_xticks(x, labels)
        ax.set_ylabel("estimate (95 % interval)")
        n = int(est.get("n", 0))
        ax.set_title(f"{label} — {n} report{'' if n == 1 else 's'}", fontsize=10)
        ax.legend(fontsize=8, loc="upper right")
    more = f" (the first {MAX_CHART_PANELS} of {len(panels)} questions)" if len(panels) > len(shown) else ""
    fig.suptitle(title + more, fontsize=11)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)
    return path


def classroom_aggregator(teacher: Teacher, bind: str, tls: ServerTLS) -> GrpcAggregator:
    """The class's ``GrpcAggregator`` (the class's public description only, TLS with enrolment),
    configured through its public hooks: every validated reply goes to the dashboard as it
    arrives (``Teacher.on_reply``), every connect/disconnect to the seats (``Teacher.on_change``),
    and a connection is admitted only for a seat the teacher gave and with that seat's secret
    (``Teacher.admission``); the teacher removes a seat with ``GrpcAggregator.expel``.

    A student's machine has ``seat_timeout_s`` (``--seat-timeout``) for each handshake message,
    not the aggregator's 10 s: what a slow handshake holds here is its seat, which the class
    already lets a student hold that long unconnected (a student's laptop that stalls between
    Hello and Ready is slow, not a squatter, and is not turned away)."""
    aggregator = GrpcAggregator(teacher.plan.description(), bind, tls=tls, handshake_timeout_s=max(HANDSHAKE_TIMEOUT_S, teacher.seat_timeout_s))
    aggregator.add_reply_observer(teacher.on_reply)
    aggregator.add_event_observer(teacher.on_change)
    aggregator.add_admission_check(teacher.admission)
    return aggregator


def _round_title(step: dict[str, Any], request: RoundRequest) -> str:
    """A round in plain words, for the projector: "question 2 of lesson 4", and for the second
    round of an interactive session, that its question depends on the answers to the one before
    (not "session 1, round 0": the protocol's numbering means nothing to a class)."""
    k = len(step["rounds"]) + 1
    where = f"lesson {step['lesson']}" if step.get("lesson") else "the class"
    text = f"question {k} of {where}"
    if request.round > 0 and k > 1:
        text += f": chosen from the answers to question {k - 1}"
    return text


def _widths(est: Any) -> list[float]:
    if est is None:
        return []
    return [h - lo for lo, h in zip(est.low, est.high) if math.isfinite(h - lo)]


def _mean(xs: Sequence[float]) -> float | None:
    """The mean, or None (JSON null) for no values."""
    return float(np.mean(xs)) if len(xs) else None


def _f2(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _fmt_est(est: Any, j: int) -> str:
    if est is None:
        return "—"
    return f"{est.values[j]:.2f} [{est.low[j]:.2f}, {est.high[j]:.2f}]"


# --- the command ---


def local_address() -> str:
    """This machine's address on its default route (no packet is sent), else 127.0.0.1."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # TEST-NET-1: only picks the interface
        return str(s.getsockname()[0])
    return "127.0.0.1"


def join_command(host: str, token: str, fingerprint: str) -> str:
    """The command a student types, accepted by ``ldp-sim join`` exactly as printed, whatever the
    token: one that begins with ``-`` (never one ``token_text`` draws, but a token file is the
    teacher's to keep) is written ``--token=TOKEN``, since a parser reads a word beginning with
    ``-`` as an option, not as the value of ``--token``."""
    token_part = f"--token={token}" if token.startswith("-") else f"--token {token}"
    return f"ldp-sim join {host} {token_part} --ca {fingerprint}"


def _print_join(command: str, dashboard_url: str, say: Callable[[str], None]) -> None:
    import segno

    qr = segno.make(command, error="m")
    lines: list[str] = []
    # Two modules per character cell row (upper/lower half blocks), light quiet zone: scannable on a projector.
    matrix = [list(row) for row in qr.matrix]
    border = 2
    size = len(matrix)
    padded = [[0] * (size + 2 * border) for _ in range(border)] + [[0] * border + r + [0] * border for r in matrix] + [[0] * (size + 2 * border) for _ in range(border + 1)]
    for y in range(0, len(padded) - 1, 2):
        top, bottom = padded[y], padded[y + 1]
        lines.append("".join({(0, 0): "█", (1, 0): "▄", (0, 1): "▀", (1, 1): " "}[(t, b)] for t, b in zip(top, bottom)))
    say("\n".join(lines))
    say(f"\nStudents join with:\n\n    {command}\n\nDashboard (for the projector): {dashboard_url}\n")


class Console:
    """The teacher's terminal while the class runs: Enter advances (the lessons, the next lesson,
    the end of the class); ``seats`` lists the seats with their addresses (not on the projected
    page); ``remove N`` removes seat N (``Teacher.remove``); ``help``; at the end of the class,
    ``end`` (or a second Enter) confirms the end (``confirm``). Teacher-only by where it is: the
    terminal of the process that holds the class's keys (docs/classroom.md, "Seats").

    Lines are read by a daemon thread from file descriptor 0 (unbuffered, so no lock is held at
    exit, and the process never waits for a line at the end of the class); at end of input every
    ``enter`` returns at once, as before."""

    def __init__(self, teacher: Teacher, say: Callable[[str], None]) -> None:
        self.teacher = teacher
        self.say = say
        self._enters: asyncio.Queue[None] = asyncio.Queue()
        self._eof = False
        self._tasks: set[asyncio.Future[Any]] = set()
        self._loop = asyncio.get_running_loop()
        self.ending = False  # the lessons are over: ``end`` confirms the end of the class

    def start(self) -> None:
        threading.Thread(target=self._read, name="ldp-classroom-console", daemon=True).start()

    def _read(self) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(0, 4096)
            except OSError:
                chunk = b""
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop() if chunk else b""
            try:
                for line in lines:
                    self._loop.call_soon_threadsafe(self._line, line.decode(errors="replace").strip())
                if not chunk:
                    self._loop.call_soon_threadsafe(self._line, None)
                    return
            except RuntimeError:  # the loop is closed: the class is over
                return

    def _line(self, text: str | None) -> None:
        if text is None:
            self._eof = True
            self._enters.put_nowait(None)
        elif not text or (self.ending and text.split() == ["end"]):
            self._enters.put_nowait(None)
        else:
            task = asyncio.ensure_future(self.command(text))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def command(self, text: str) -> None:
        """One console command; a mistake is one line, never a traceback."""
        words = text.split()
        if words == ["seats"]:
            self.say("\n".join(self.teacher.seat_lines()))
        elif len(words) == 2 and words[0] == "remove" and words[1].isdigit():
            self.say(await self.teacher.remove(int(words[1])))
        elif words == ["help"]:
            self.say("commands: Enter (go on), seats (list the seats), remove N (remove seat N), help; "
                     "after the lessons, Enter then `end` (or Enter again) ends the class and closes the dashboard")
        elif words == ["end"]:
            self.say("`end` ends the class once the lessons are over; Enter goes on")
        else:
            self.say(f"unknown command {clean_text(text, 60)!r}: Enter (go on), seats, remove N, help")

    async def enter(self, what: str) -> None:
        self.say(f"(press Enter for the {what}; `seats` lists the seats, `remove N` removes seat N)")
        if not self._eof:
            await self._enters.get()

    async def confirm(self) -> None:
        """The end of the class, confirmed: Enter asked, then ``end`` or a second Enter closes
        the dashboard (a stray Enter does not take the projected class away). Lines that are
        neither (``seats``, ``remove N``) are commands as before; end of input confirms, as
        every ``enter`` returns at end of input."""
        self.ending = True
        await self.enter("end of the class: the dashboard stays up until you confirm")
        self.say("end the class and close the dashboard? type `end` (or press Enter again)")
        if not self._eof:
            await self._enters.get()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def _housekeeping(teacher: Teacher, every_s: float = 1.0) -> None:
    """Free expired seats while the class runs (the dashboard shows it within ``every_s``)."""
    while True:
        await asyncio.sleep(every_s)
        teacher.expire_seats()


def _check_options(ns: argparse.Namespace) -> None:
    """The classroom's numeric options, each refused with its name and what is allowed."""
    if ns.seats_per_address < 1:
        raise ParameterError(f"--seats-per-address must be at least 1, got {ns.seats_per_address}")
    for flag, value in (("--seat-timeout", ns.seat_timeout), ("--ledger-deadline", ns.ledger_deadline), ("--round-deadline", ns.round_deadline)):
        if not (math.isfinite(value) and value > 0):
            raise ParameterError(f"{flag} must be a finite number of seconds > 0, got {value}")


def _quiet_shutdown(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler: a cancellation while the class shuts down (a stream's
    task cut off when the server stops) is expected and says nothing; anything else is one line."""
    exc = context.get("exception")
    if isinstance(exc, asyncio.CancelledError):
        return
    message = context.get("message", "")
    print(f"ldp-sim classroom: {message}{f': {type(exc).__name__}: {clean_text(exc, 200)}' if exc is not None else ''}", file=sys.stderr, flush=True)


async def classroom(ns: argparse.Namespace, say: Callable[[str], None] = print) -> int:
    _check_options(ns)
    plan = ClassPlan(ns.seats, ns.machine_users, ns.d)
    warm_up(plan.schema)  # the aggregator checks replies with the randomizers' formats: import them now
    hosts = ns.host or [local_address(), "127.0.0.1", "localhost"]
    hosts = list(dict.fromkeys(hosts))
    temporary = ns.pki is None
    pki = Path(tempfile.mkdtemp(prefix="ldp-classroom-")) if temporary else Path(ns.pki)
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_quiet_shutdown)
    try:
        make_ca(pki, name="ldp classroom CA", days=2)
        issue(pki, "server", "classroom", hosts=hosts, days=2)
        token_path = new_token(pki)
        token = read_token(token_path)
        ca_pem = (pki / "ca.pem").read_bytes()
        fingerprint = ca_fingerprint(ca_pem)
        info: dict[str, Any] = {"plan": plan.to_json(), "hosts": hosts, "fingerprint": fingerprint, "histogram": histogram_kind(), "started": time.time()}
        state = ClassState(info)
        teacher = Teacher(
            plan, token, state, say=say, seats_per_address=ns.seats_per_address, seat_timeout_s=ns.seat_timeout, ledger_deadline_s=ns.ledger_deadline,
            round_deadline_s=ns.round_deadline,
        )
        aggregator = classroom_aggregator(teacher, f"{ns.bind}:{ns.port}", server_tls(pki, token_path))
        teacher.aggregator = aggregator
        try:
            teacher.grpc_port = await aggregator.start()
        except (LDPError, RuntimeError) as exc:  # a busy or foreign --port: one line, no traceback
            raise LDPError(f"cannot serve the classroom's aggregator on {ns.bind}:{ns.port} ({exc}); choose another --port") from None
        teacher.oracle = ClassroomOracle(aggregator, teacher)
        dashboard = Dashboard(state, token=token, ca_pem=ca_pem, allocate=teacher.allocate)
        try:
            http_port = await dashboard.start(ns.bind, ns.http_port)
        except OSError as exc:
            await aggregator.close("the classroom could not start")
            raise LDPError(f"cannot serve the dashboard on {ns.bind}:{ns.http_port} ({exc.strerror or exc}); choose another --http-port") from None
        command = join_command(f"{hosts[0]}:{http_port}", token, fingerprint)
        # The page is plain HTTP: it shows the command without the token (the terminal has it).
        info["join"] = f"ldp-sim join {hosts[0]}:{http_port} --token TOKEN --ca {fingerprint}"
        info["dashboard"] = f"http://{hosts[0]}:{http_port}/"
        info["grpc_port"] = teacher.grpc_port
        state.changed()
        say(f"classroom: aggregator on {ns.bind}:{teacher.grpc_port} (TLS, token enrolment), dashboard on {ns.bind}:{http_port}")
        _print_join(command, info["dashboard"], say)
        console = Console(teacher, say)
        console.start()
        housekeeping = asyncio.ensure_future(_housekeeping(teacher))

        try:
            if ns.students > 0:
                say(f"waiting for {ns.students} students ...")
                end = loop.time() + ns.wait
                while len(teacher.connected_seats()) < ns.students:
                    if loop.time() > end:
                        raise LDPError(teacher.join_shortfall(ns.students, ns.wait))
                    await asyncio.sleep(0.05)
            else:
                await console.enter("lessons, once everyone has joined")
            say(f"{len(teacher.connected_seats())} students joined")

            async def pause(what: str) -> None:
                if ns.pace is None:
                    await console.enter(what)
                else:
                    await asyncio.sleep(ns.pace)

            await teacher.run_lessons(pause)
            # The class's work is kept as soon as the lessons end, while the dashboard stays up
            # (issue 29): a teacher who closes the terminal later has lost nothing.
            saved = teacher.save_record(Path(getattr(ns, "out", None) or "."))
            charts = [p for p in saved if p.suffix == ".png"]
            say(f"the class's record is saved: {saved[0]} (everything the dashboard showed, JSON), {saved[1]} (one row per lesson)"
                + (f" and each lesson's table, {saved[2].name[: -len('1.csv')]}N.csv" if len(saved) > 2 else "")
                + (f"; its charts: {', '.join(p.name for p in charts)}" if charts else ""))
            if ns.linger is None:
                await console.confirm()
            else:
                await asyncio.sleep(ns.linger)
        finally:
            housekeeping.cancel()
            await asyncio.gather(housekeeping, return_exceptions=True)
            await console.close()
            # A grace long enough for every student to leave on Close by itself; a call still
            # open after it is cut, and grpcio's traceback for it is one counted line
            # (ldp.wire.grpc_stderr, around the whole run below).
            await aggregator.close("the class is over", grace_s=CLOSE_GRACE_S)
            await dashboard.stop()
        return 0
    finally:
        if temporary:
            shutil.rmtree(pki, ignore_errors=True)


def run_classroom(ns: argparse.Namespace, say: Callable[[str], None] = print) -> int:
    """``ldp-sim classroom``: returns the exit code. What gRPC writes on stderr that no handler
    sees is said in words (``ldp.wire.grpc_stderr``, as ``ldp-sim serve`` does): a connection
    refused during the TLS handshake (a student with a wrong CA, a plaintext client) is one line,
    not gRPC's raw "Handshake failed" lines, and grpcio's CancelledError traceback for a call cut
    as it began or at the end is one counted line."""

    def line(text: str) -> None:
        say(text)
        sys.stdout.flush()

    with grpc_stderr_in_words("classroom: "):
        return asyncio.run(classroom(ns, line))
