"""The LR oracle LR_z(i, R) (KLNRS Definition 4.3), batched into rounds, over any transport.

``LROracle`` is the one interface every local algorithm is written against. Its single
primitive is ``await oracle.run_round(request)``: send a ``RoundRequest`` (a batch of
(users, randomizer) assignments), get back one ``Reports`` per assignment. Subclasses only
provide ``shards`` (which user ranges exist) and ``_exchange`` (deliver per-shard requests,
collect replies); splitting a round per shard and reassembling the answers in user order lives
here, once, so the in-process and gRPC transports return bit-identical results.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ldp.core.errors import ParameterError, require_integer
from ldp.core.population import PopulationDescription, PopulationSpec
from ldp.core.randomizers import RandomizerSpec
from ldp.local.ledger_store import LedgerStore
from ldp.local.messages import Assignment, Result, RoundReply, RoundRequest, SessionKind, Status, Users, refusals
from ldp.local.shard import Shard

__all__ = ["Reports", "ShardRange", "Transcript", "LROracle", "InProcessLROracle", "split_round", "assemble_round"]


@dataclass(frozen=True)
class ShardRange:
    """Users [first_user, first_user + count) held by one shard (one client process)."""

    key: str
    first_user: int
    count: int


@dataclass(frozen=True)
class Reports:
    """The answer to one request: per user asked, a status; reports of the answered ones.

    ``values[k]`` is the report of ``answered_users[k]`` (users in the order requested).
    REFUSED users (over budget) were not charged; for MISSING and ERROR users ``errors`` says
    which shard and why. ``Session.round`` returns one per request, in order.

    Parameters
    ----------
    request_id : int
        The request's id (derived from session, round and position).
    randomizer : RandomizerSpec
        The randomizer the users were asked to run.
    asked : Users or numpy.ndarray
        The users asked, in the order requested (``users`` reads them as an id array).
    status : numpy.ndarray
        uint8 ``Status`` per user asked.
    values : numpy.ndarray
        The reports of the answered users, in order (rows of the record width for ``record_rr``).
    errors : tuple of str, default ()
        Why users are MISSING or ERROR, one message per cause.

    Examples
    --------
    >>> import ldp
    >>> cc = ldp.concept_class("parity", 3)
    >>> population = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "target")), size=100, budget=1.0)
    >>> session = ldp.Session(ldp.InProcessLROracle(population), ldp.SessionKind.INTERACTIVE)
    >>> rr = ldp.RandomizerSpec("binary_rr", ldp.label_query(), epsilon=0.75)
    >>> (first,) = ldp.run(session.round([ldp.Request.of([3, 50, 99], rr)]))
    >>> first.counts(), first.answered_users.tolist(), first.values.dtype
    ({'answered': 3, 'refused': 0, 'missing': 0, 'error': 0}, [3, 50, 99], dtype('uint8'))
    >>> (second,) = ldp.run(session.round([ldp.Request.of(range(0, 5), rr)]))  # user 3 has 0.25 left
    >>> second.refused_users.tolist(), second.status.tolist(), len(second.values)
    ([3], [0, 0, 0, 1, 0], 4)
    """

    request_id: int
    randomizer: RandomizerSpec
    asked: Users
    status: np.ndarray  # uint8 Status per user
    values: np.ndarray
    errors: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not isinstance(self.asked, Users):  # an id array (in request order) is accepted too
            object.__setattr__(self, "asked", Users(0, 0, np.asarray(self.asked, dtype=np.int64).ravel()))

    @property
    def users(self) -> np.ndarray:
        """The users asked, in the order requested (a range is materialized only when read: a
        10^8-user round keeps 1 byte per user, its status, beside the reports)."""
        return self.asked.array()

    def _with(self, status: Status) -> np.ndarray:
        hit = self.status == status
        if self.asked.ids is None:  # a range: positions + start, never the whole id array
            return np.flatnonzero(hit) + self.asked.start
        return self.asked.ids[hit]

    @property
    def answered_users(self) -> np.ndarray:
        return self._with(Status.ANSWERED)

    @property
    def refused_users(self) -> np.ndarray:
        return self._with(Status.REFUSED)

    @property
    def missing_users(self) -> np.ndarray:
        return self._with(Status.MISSING)

    @property
    def error_users(self) -> np.ndarray:
        return self._with(Status.ERROR)

    def counts(self) -> dict[str, int]:
        """How many users asked ended in each ``Status``.

        Returns
        -------
        dict of str to int
            ``{"answered": ..., "refused": ..., "missing": ..., "error": ...}``.

        Examples
        --------
        >>> import ldp
        >>> cc = ldp.concept_class("parity", 3)
        >>> population = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "target")), size=100, budget=1.0)
        >>> session = ldp.Session(ldp.InProcessLROracle(population), ldp.SessionKind.NON_INTERACTIVE)
        >>> (reports,) = ldp.run(session.round([ldp.Request.of(range(100), ldp.RandomizerSpec("binary_rr", ldp.label_query(), 1.0))]))
        >>> reports.counts()
        {'answered': 100, 'refused': 0, 'missing': 0, 'error': 0}
        """
        return {s.name.lower(): int(n) for s, n in zip(Status, _tally(self.status))}


def _union(ranges: Sequence[ShardRange]) -> list[tuple[int, int]]:
    """The user ranges as disjoint sorted [lo, hi) intervals."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted((r.first_user, r.first_user + r.count) for r in ranges if r.count > 0):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def split_round(request: RoundRequest, shards: list[ShardRange], departed: Sequence[ShardRange] = ()) -> dict[str, RoundRequest]:
    """Per-shard requests: each assignment restricted to the users each shard holds.

    Users that no connected shard holds but a ``departed`` one did (a client lost earlier) are
    left out: nothing is sent for them and ``assemble_round`` reports them MISSING, naming the
    shard. Raises ParameterError before anything is sent if a request names a user that no shard,
    connected or departed, ever held (an id outside the population: a programming error).
    """
    per_shard: dict[str, list[Assignment]] = {s.key: [] for s in shards}
    for position, a in enumerate(request.assignments):
        covered = 0
        for s in shards:
            part = a.users.within(s.first_user, s.count)
            if len(part):
                per_shard[s.key].append(Assignment(a.request_id, part, a.randomizer))
                covered += len(part)
        if covered != len(a.users):
            known = sum(len(a.users.within(lo, hi - lo)) for lo, hi in _union([*shards, *departed])) if departed else covered
            if known != len(a.users):
                held = ", ".join(f"{s.first_user}..{s.first_user + s.count - 1}" for s in sorted(shards, key=lambda s: s.first_user)) or "none"
                gone = ", ".join(f"{d.key} {d.first_user}..{d.first_user + d.count - 1}" for d in departed)
                raise ParameterError(
                    # by its position in the round, as the caller wrote it (the request id is internal: session|round|position)
                    f"request {position} of round {request.round} names {len(a.users) - known} user(s) that no connected shard holds (held: {held}"
                    + (f"; departed: {gone}" if gone else "")
                    + ")"
                )
    return {
        key: RoundRequest(request.session_id, request.session_kind, request.round, tuple(assignments), request.last_round, request.deadline_s)
        for key, assignments in per_shard.items()
        if assignments
    }


def _with_destinations(sent: dict[str, RoundRequest], finals: dict[int, np.ndarray], request: RoundRequest) -> dict[str, RoundRequest]:
    """``sent`` with each range part of a request in ``finals`` given its rows of the final array
    (``Assignment.into``: users start − the range's start onwards)."""
    if not finals:
        return sent
    starts = {a.request_id: a.users.start for a in request.assignments}
    out = {}
    for key, r in sent.items():
        parts = []
        for a in r.assignments:
            final = finals.get(a.request_id)
            if final is not None and a.users.ids is None:
                lo = a.users.start - starts[a.request_id]
                a = Assignment(a.request_id, a.users, a.randomizer, into=final[lo : lo + len(a.users)])
            parts.append(a)
        out[key] = RoundRequest(r.session_id, r.session_kind, r.round, tuple(parts), r.last_round, r.deadline_s)
    return out


def _tally(status: np.ndarray, block: int = 1 << 22) -> np.ndarray:
    """How many entries of a uint8 ``Status`` array hold each status, in cache-sized blocks
    without widening the array: when every user answered (status all 0), one count."""
    tally = np.zeros(len(Status), dtype=np.int64)
    others = int(np.count_nonzero(status))
    tally[Status.ANSWERED] = len(status) - others
    if others:
        for lo in range(0, len(status), block):
            part = status[lo : lo + block]
            for s in (Status.REFUSED, Status.MISSING, Status.ERROR):
                tally[s] += int(np.count_nonzero(part == s))
    return tally


def _overlap(lo: int, hi: int, spans: Sequence[tuple[int, int]]) -> int:
    """How many of the integers in [lo, hi) lie in the disjoint intervals ``spans``."""
    return sum(max(0, min(hi, b) - max(lo, a)) for a, b in spans)


def assemble_round(
    request: RoundRequest,
    sent: dict[str, RoundRequest],
    replies: dict[str, RoundReply | None],
    departed: Sequence[ShardRange] = (),
    finals: dict[int, np.ndarray] | None = None,
) -> list[Reports]:
    """Reassemble per-shard replies into one ``Reports`` per assignment, in user order.

    A shard whose reply is None (disconnected, deadline missed) marks its users MISSING, and so
    do users held only by a ``departed`` shard (not sent at all); ``errors`` then says which shard
    and why (for a departed one, its user range). A round-level or assignment-level error marks
    the users ERROR and keeps the message. A result whose refusal flags or reports do not fit
    the users asked is an ERROR too (the transport checks replies first; this never raises).

    Cost: each shard's assignments and results are indexed by request id once (a round of m
    requests is O(m), not O(m²)). A range request (the common case) is O(n) with no sort and no
    id array: each shard's part is a slice, its status is written in place and the reports are
    concatenated in shard order, so beside the reports the aggregator keeps 1 byte per user
    (``status``). A request naming ids places each shard's ids by a search in the sorted ids.
    ``finals``: the arrays a transport filled in place (``LROracle.report_layout``); where every
    user of a range answered and each shard's reports sit in its own rows of it, that array is
    the reports, with no concatenation.
    """
    gone = {d.key: d for d in departed}
    asked_of = {key: {x.request_id: x for x in r.assignments} for key, r in sent.items()}
    results_of = {key: {r.request_id: r for r in reply.results} for key, reply in replies.items() if reply is not None}
    out = []
    for a in request.assignments:
        assembly = _Assembly(a, (finals or {}).get(a.request_id))
        for key in sent:
            mine = asked_of[key].get(a.request_id)
            if mine is not None:
                reply = replies.get(key)
                result = None if reply is None else results_of[key].get(a.request_id)
                assembly.take(key, mine.users, reply, result, gone.get(key), request.deadline_s)
        for d in gone.values():
            assembly.departed(d)
        out.append(assembly.reports())
    return out


class _Assembly:
    """One assignment's ``Reports`` as assembled from its shards' parts (``assemble_round``):
    the users' status (MISSING until a shard's part says otherwise), the reports received
    (first position, positions or an empty array for a range, values) and the errors to name."""

    def __init__(self, a: Assignment, final: np.ndarray | None = None) -> None:
        self.a = a
        self.final = final  # the array a transport copied the reports into, or None
        n = len(a.users)
        self.ranged = a.users.ids is None
        self.ids = a.users.ids
        self.sorter = None if self.ids is None else np.argsort(self.ids, kind="stable")
        self.status = np.full(n, Status.MISSING, dtype=np.uint8)
        self.asked_mask = None if self.ranged else np.zeros(n, dtype=bool)
        self.asked_spans: list[tuple[int, int]] = []  # for a range: the [lo, hi) user ids sent to some shard
        self.pieces: list[tuple[int, np.ndarray, np.ndarray]] = []  # (first position, positions or None, values)
        self.errors: list[str] = []

    def _place(self, users: Users) -> slice | np.ndarray:
        """Where a shard's users sit in the request (a slice for a range), noting them as asked."""
        if self.ranged:
            lo = users.start - self.a.users.start
            self.asked_spans.append((users.start, users.stop))
            return slice(lo, lo + len(users))
        # positions of this shard's ids within the request, vectorized
        assert self.ids is not None and self.sorter is not None and self.asked_mask is not None
        where = self.sorter[np.searchsorted(self.ids, users.array(), sorter=self.sorter)]
        self.asked_mask[where] = True
        return where

    def take(self, key: str, users: Users, reply: RoundReply | None, result: Result | None, departed: ShardRange | None, deadline_s: float) -> None:
        """Shard ``key``'s part for ``users``: its reports and refusals, or why its users are MISSING or ERROR."""
        where = self._place(users)
        rid, count = self.a.request_id, len(users)
        if reply is None:  # stays MISSING
            if departed is not None:
                d = departed
                self.errors.append(
                    f"shard {key} (users {d.first_user}..{d.first_user + d.count - 1}) disconnected before answering "
                    f"request {rid}: its {count} user(s) are MISSING"
                )
            else:
                self.errors.append(f"shard {key} did not answer request {rid} within the {deadline_s:g} s deadline: its {count} user(s) are MISSING")
            return
        if reply.error or result is None or result.error:
            self.status[where] = Status.ERROR
            self.errors.append(reply.error or (result.error if result is not None else f"shard {key} did not answer request {rid}"))
            return
        refused = np.asarray(result.refused, dtype=bool)
        values = np.asarray(result.values)
        problem = self._problem(key, refused, values, count)
        if problem:
            self.status[where] = Status.ERROR
            self.errors.append(problem)
            return
        # ANSWERED = 0 and REFUSED = 1: the refusal flags are the status, written in place.
        self.status[where] = refused.view(np.uint8)
        if isinstance(where, slice):
            self.pieces.append((where.start, np.empty(0, dtype=np.int64), values))
        else:
            self.pieces.append((0, where[~refused], values))

    def _problem(self, key: str, refused: np.ndarray, values: np.ndarray, count: int) -> str:
        """What does not fit in a shard's result: its flags and reports for ``count`` users, or
        reports unlike the other shards' ('' if nothing)."""
        rid = self.a.request_id
        if refused.shape != (count,) or values.ndim not in (1, 2) or len(values) != count - refusals(refused):
            return f"shard {key} answered request {rid} with {refused.size} refusal flag(s) and {len(values)} report(s) for its {count} user(s)"
        first = self.pieces[0][2] if self.pieces else None
        if first is not None and (values.dtype != first.dtype or values.shape[1:] != first.shape[1:]):
            return f"shard {key} sent reports of dtype {values.dtype.str} and shape {values.shape[1:]} for request {rid}, unlike the other shards'"
        return ""

    def departed(self, d: ShardRange) -> None:
        """Users only the departed shard ``d`` held: never sent, MISSING."""
        if self.ranged:
            lo, hi = max(self.a.users.start, d.first_user), min(self.a.users.stop, d.first_user + d.count)
            lost = max(0, hi - lo) - _overlap(lo, hi, self.asked_spans)
        else:
            assert self.ids is not None and self.asked_mask is not None
            lost = int(np.count_nonzero((self.ids >= d.first_user) & (self.ids < d.first_user + d.count) & ~self.asked_mask))
        if lost:
            self.errors.append(
                f"shard {d.key} (users {d.first_user}..{d.first_user + d.count - 1}) disconnected earlier: "
                f"{lost} user(s) of request {self.a.request_id} are MISSING"
            )

    def reports(self) -> Reports:
        a = self.a
        values = self.final if self.final is not None and self._in_place() else _merge_values(self.pieces, self.ranged)
        return Reports(a.request_id, a.randomizer, a.users, self.status, values, tuple(dict.fromkeys(self.errors)))

    def _in_place(self) -> bool:
        """Whether every user answered and each piece is its own rows of ``final``: then ``final``
        holds every report in request order."""
        final = self.final
        if final is None or not self.pieces or self.errors or sum(len(v) for _, _, v in self.pieces) != len(final):
            return False
        base, row = final.__array_interface__["data"][0], final.strides[0]
        for start, _, values in self.pieces:
            if values.dtype != final.dtype or values.shape[1:] != final.shape[1:] or values.__array_interface__["data"][0] != base + start * row:
                return False
        return True  # the pieces' reports number the users asked, so everyone answered


def _merge_values(pieces: list[tuple[int, np.ndarray, np.ndarray]], ranged: bool) -> np.ndarray:
    """The answered users' reports in request order. A range's pieces are disjoint slices: sorted
    by where they start and concatenated (O(n), no sort of users); ids are merged by position."""
    if not pieces:
        return np.zeros(0)
    if len(pieces) == 1:
        return pieces[0][2]
    if ranged:
        return np.concatenate([v for _, _, v in sorted(pieces, key=lambda p: p[0])])
    positions = np.concatenate([p for _, p, _ in pieces])
    values = np.concatenate([v for _, _, v in pieces])
    return values[np.argsort(positions, kind="stable")]


class SessionLabel(Protocol):
    """What a transcript records of a session (``ldp.local.session.Session`` has these): a
    protocol, so this module need not import the session module, which imports it."""

    @property
    def session_id(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> SessionKind: ...


@dataclass
class Transcript:
    """What happened, without any data: one entry per round."""

    rounds: list[dict[str, Any]] = field(default_factory=list)

    def record(self, session: SessionLabel, request: RoundRequest, reports: list[Reports]) -> None:
        self.rounds.append(
            {
                "session": session.session_id,
                "name": session.name,
                "kind": session.kind.name,
                "round": request.round,
                "requests": [
                    {
                        "request_id": r.request_id,
                        "randomizer": r.randomizer.kind,
                        "query": r.randomizer.query.name,
                        "epsilon": r.randomizer.epsilon,
                        "users": len(r.asked),
                        **r.counts(),
                    }
                    for r in reports
                ],
            }
        )

    def epsilon_charged(self) -> float:
        """Total ε asked for over all answered reports (Σ over users and requests): what the users
        charged, except for memoized kinds (``l_grr`` …, ``ldp.core.longitudinal``), whose users
        charge ε∞ once per question and 2^-30 per later report: an upper bound there."""
        return float(sum(q["epsilon"] * q["answered"] for rnd in self.rounds for q in rnd["requests"]))

    def to_json(self) -> dict[str, Any]:
        return {"rounds": self.rounds}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1))


class LROracle(ABC):
    """Access to a population only through ε-local randomizers, one round at a time.

    The LR oracle LR_z(i, R) of KLNRS Definition 4.3, batched into rounds, over any transport:
    the one interface every local algorithm is written against. Its single primitive is
    ``await oracle.run_round(request)``; algorithms usually go through a ``Session``.
    Subclasses only provide ``shards`` (which user ranges exist) and ``_exchange`` (deliver
    per-shard requests, collect replies); splitting a round per shard and reassembling the
    answers in user order lives here, once, so the in-process (``InProcessLROracle``) and gRPC
    (``ldp.wire``) transports return bit-identical results. ``transcript`` records every round
    (never a record or a report).

    Examples
    --------
    >>> import ldp
    >>> ldp.LROracle()  # abstract: use InProcessLROracle, or launch_local for gRPC
    Traceback (most recent call last):
    ...
    TypeError: Can't instantiate abstract class LROracle ...
    >>> cc = ldp.concept_class("parity", 3)
    >>> population = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "target")), size=100, budget=1.0)
    >>> isinstance(ldp.InProcessLROracle(population), ldp.LROracle)
    True
    """

    def __init__(self) -> None:
        self._next_session = 0
        self.transcript = Transcript()

    def restart_sessions(self) -> None:
        """Session ids start again at 1 and the transcript is emptied (a transport that serves
        another population calls this, so a program issues the same requests as on a fresh
        oracle)."""
        self._next_session = 0
        self.transcript = Transcript()

    @property
    @abstractmethod
    def shards(self) -> list[ShardRange]:
        """The connected shards (which users can be asked)."""

    @property
    def user_count(self) -> int:
        return sum(s.count for s in self.shards)

    @property
    def description(self) -> PopulationDescription | None:
        """The users' public description (schema, size), when this oracle has one."""
        return None

    def new_session_id(self) -> int:
        """Session ids are issued in program order, so request ids (and hence every draw) are
        the same on every transport for the same program."""
        self._next_session += 1
        return self._next_session

    @property
    def departed(self) -> list[ShardRange]:
        """Shards that held users and are gone (their users are MISSING, with a reason); none in process."""
        return []

    async def run_round(self, request: RoundRequest) -> list[Reports]:
        """Send one round to the shards; one ``Reports`` per assignment, in order (a coroutine).

        The round is split per shard (each assignment restricted to the users each shard holds),
        delivered, and the replies reassembled in user order. A shard that does not answer by
        the deadline, or held users and is gone, makes its users MISSING; a refused round or
        assignment makes them ERROR (the reason in ``Reports.errors``). ``Session.round`` builds
        the ``RoundRequest`` and enforces the session rules first: use it rather than this.

        Parameters
        ----------
        request : RoundRequest
            Session id and kind, round number, assignments (request id, users, randomizer),
            and the deadline.

        Returns
        -------
        list of Reports
            One per assignment.

        Raises
        ------
        ParameterError
            An assignment names a user that no shard, connected or departed, ever held (before
            anything is sent).

        Examples
        --------
        >>> import ldp
        >>> cc = ldp.concept_class("parity", 3)
        >>> population = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "target")), size=100, budget=1.0)
        >>> from ldp.local.messages import Assignment, RoundRequest
        >>> oracle = ldp.InProcessLROracle(population, shards=2)
        >>> spec = ldp.RandomizerSpec("binary_rr", ldp.label_query(), 0.5)
        >>> request = RoundRequest(oracle.new_session_id(), ldp.SessionKind.NON_INTERACTIVE, 0, (Assignment(7, ldp.Users.range(0, 100), spec),))
        >>> (reports,) = ldp.run(oracle.run_round(request))
        >>> reports.request_id, reports.counts()["answered"]
        (7, 100)
        >>> (again,) = ldp.run(oracle.run_round(request))  # the shards refuse a second round
        >>> again.counts()["error"], again.errors[0]
        (100, 'session 1 is non-interactive and already answered its one round; ...')
        """
        sent = split_round(request, self.shards, self.departed)
        finals = self._final_arrays(request, sent)
        replies = await self._exchange(_with_destinations(sent, finals, request), request.deadline_s)
        return assemble_round(request, sent, replies, self.departed, finals)

    def report_layout(self, spec: RandomizerSpec) -> tuple[np.dtype[Any], int] | None:
        """The dtype and row width (0: one value per report) of ``spec``'s reports, for a
        transport that receives reports as bytes and copies each reply part, as it arrives, into
        the request's final array (``Assignment.into``); None (the default, and in process): the
        transport hands back its own arrays and the shards' parts are concatenated."""
        return None

    def _final_arrays(self, request: RoundRequest, sent: dict[str, RoundRequest]) -> dict[int, np.ndarray]:
        """For each range assignment sent to some shard whose report layout is known: an empty
        array of one report per user of the range (``report_layout``), by request id."""
        finals: dict[int, np.ndarray] = {}
        if not sent:
            return finals
        for a in request.assignments:
            if a.users.ids is not None or not len(a.users):
                continue
            layout = self.report_layout(a.randomizer)
            if layout is not None:
                dtype, width = layout
                finals[a.request_id] = np.empty((len(a.users), width) if width else len(a.users), dtype=dtype)
        return finals

    @abstractmethod
    async def _exchange(self, sent: dict[str, RoundRequest], deadline_s: float) -> dict[str, RoundReply | None]:
        """Deliver each shard its request; a reply per shard, or None if it did not answer in time."""

    async def close(self) -> None:  # noqa: B027 - a hook with a default, not abstract: in process there is nothing to release
        """Release the transport (no-op in process)."""


class InProcessLROracle(LROracle):
    """Every shard in this process: fast, for tests and sweeps.

    ``shards`` > 1 splits users the way client processes would (results are identical either
    way).

    This oracle plays all three roles in one process (it holds the spec), so it suits
    simulations, not a deployment: over gRPC the aggregator never holds the spec. ``store``
    keeps the ledgers (default: in memory, per shard; a shared durable store continues them
    across oracles of the same data).

    Parameters
    ----------
    population : PopulationSpec
        The users (records, budget, seed).
    shards : int, default 1
        Split the users into this many equal shards, ≥ 1 (ignored when ``boundaries`` is given).
    boundaries : list of int, optional
        Explicit shard boundaries, rising from 0 to the population size.
    store : LedgerStore, optional
        Where the shards' ledgers live; default in memory, per shard.
    key_salt : bytes, optional
        The salt of the report key (``ldp.core.rng.life_key``, invariant I1). None: the
        experiment vouches that this oracle's (key, user, nonce) never repeat, and the seeded
        key is used as is (the same reports as ``launch_local``, bit for bit).

    Raises
    ------
    ParameterError
        ``population`` is not a ``PopulationSpec``, ``shards`` is not an integer in [1, size], or
        boundaries that do not rise from 0 to the population size.

    Examples
    --------
    >>> import ldp
    >>> cc = ldp.concept_class("parity", 3)
    >>> population = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "target")), size=100, budget=1.0)
    >>> oracle = ldp.InProcessLROracle(population, shards=2)
    >>> [(s.key, s.first_user, s.count) for s in oracle.shards]
    [('shard-0', 0, 50), ('shard-1', 50, 50)]
    >>> oracle.description.size, oracle.user_count
    (100, 100)
    >>> session = ldp.Session(oracle, ldp.SessionKind.NON_INTERACTIVE)
    >>> (reports,) = ldp.run(session.round([ldp.Request.of(range(100), ldp.RandomizerSpec("binary_rr", ldp.label_query(), 0.5))]))
    >>> one = ldp.InProcessLROracle(population)  # one shard: the same reports, bit for bit
    >>> (same,) = ldp.run(ldp.Session(one, ldp.SessionKind.NON_INTERACTIVE).round([ldp.Request.of(range(100), reports.randomizer)]))
    >>> bool((same.values == reports.values).all())
    True
    >>> ldp.InProcessLROracle(population, shards=0)
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: shards must be an integer in [1, 100] (one shard per user at most), got 0
    """

    def __init__(
        self, population: PopulationSpec, shards: int = 1, boundaries: list[int] | None = None, store: LedgerStore | None = None, key_salt: bytes | None = None
    ) -> None:
        super().__init__()
        if not isinstance(population, PopulationSpec):
            raise ParameterError(f"population must be a PopulationSpec (e.g. ldp.PopulationSpec(cc, target, size=1000)), got {population!r}")
        n = population.size
        if boundaries is None:
            # at most one shard per user: a typo like 2^63 must not build 2^63 boundaries
            shards = require_integer("shards", shards, 1, n, f"[1, {n}] (one shard per user at most)")
            boundaries = [n * k // shards for k in range(shards + 1)]
        if boundaries[0] != 0 or boundaries[-1] != n or any(b > c for b, c in zip(boundaries, boundaries[1:])):
            raise ParameterError(f"shard boundaries must rise from 0 to {n}, got {boundaries}")
        self.population = population
        self._shards = {
            # key_salt: the experiment's (None: it vouches, reproducible runs; invariant I1, ldp.core.rng.life_key)
            f"shard-{k}": Shard(population, lo, hi - lo, store=store, key_salt=key_salt) for k, (lo, hi) in enumerate(zip(boundaries, boundaries[1:])) if hi > lo
        }

    @property
    def shards(self) -> list[ShardRange]:
        return [ShardRange(key, s.first_user, s.count) for key, s in self._shards.items()]

    @property
    def description(self) -> PopulationDescription:
        return self.population.description()

    def shard(self, key: str) -> Shard:
        return self._shards[key]

    def ledger_spent_units(self) -> np.ndarray:
        """Every user's spent budget (exact units), in user order; for tests and labs."""
        return np.concatenate([s.ledger.spent_units() for s in sorted(self._shards.values(), key=lambda s: s.first_user)])

    async def _exchange(self, sent: dict[str, RoundRequest], deadline_s: float) -> dict[str, RoundReply | None]:
        replies: dict[str, RoundReply | None] = {key: self._shards[key].answer(request) for key, request in sent.items()}
        await asyncio.sleep(0)  # stay a well-behaved coroutine
        return replies


def users_for(request_users: Users | range | np.ndarray | list[int]) -> Users:
    """Accept a range, id array or Users for convenience in algorithms."""
    if isinstance(request_users, Users):
        return request_users
    if isinstance(request_users, range):
        if request_users.step != 1:
            return Users.of(np.arange(request_users.start, request_users.stop, request_users.step))
        return Users.range(request_users.start, request_users.stop)
    return Users.of(np.asarray(request_users))
