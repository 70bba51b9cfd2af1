"""Sessions: a local algorithm's conversation with the users (KLNRS Definition 4.4).

A ``Session`` of kind NON_INTERACTIVE takes exactly one round that carries all its requests and
refuses a second with a ``SessionError`` (the shards refuse it too, independently); an
INTERACTIVE session takes any number of rounds, each of which may depend on earlier replies.
Request ids are derived from (session id, round, position), so every per-user random draw is the
same on every transport for the same program.

Every round is written to the oracle's ``Transcript`` (rounds, requests, ε, counts — never a
record or a report), which experiments save as JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ldp.core.errors import LDPError, ParameterError, SessionError, require_deadline
from ldp.core.queries import QuerySpec, query_reads
from ldp.core.randomizers import RandomizerSpec
from ldp.core.schema import Schema
from ldp.local.messages import Assignment, RoundRequest, SessionKind, Users
from ldp.local.oracle import LROracle, Reports, Transcript, users_for

__all__ = ["Request", "Session", "Transcript", "request_id"]

MAX_REQUESTS_PER_ROUND = 1 << 24
MAX_ROUNDS = 1 << 16


def request_id(session_id: int, round_index: int, position: int) -> int:
    """A 64-bit request id: session (24 bits) | round (16 bits) | position in round (24 bits)."""
    return (session_id << 40) | (round_index << 24) | position


@dataclass(frozen=True)
class Request:
    """Ask each of ``users`` once: run ``randomizer`` on your record.

    One request of a round (``Session.round``); its users each report at most once (a user
    over budget is refused, not charged). Build it with ``Request.of``.

    Parameters
    ----------
    users : Users
        The users asked, each at most once.
    randomizer : RandomizerSpec
        What they run on their records.

    Examples
    --------
    >>> import ldp
    >>> request = ldp.Request.of(range(10, 20), ldp.RandomizerSpec("binary_rr", ldp.label_query(), 1.0))
    >>> request.users, request.randomizer.kind
    (Users(start=10, stop=20, ids=None), 'binary_rr')
    """

    users: Users
    randomizer: RandomizerSpec

    def __post_init__(self) -> None:
        if not isinstance(self.users, Users):
            raise ParameterError(f"a request's users must be Users (or use Request.of with a range, list or array), got {self.users!r}")
        if not isinstance(self.randomizer, RandomizerSpec):
            raise ParameterError(f"a request's randomizer must be a RandomizerSpec (e.g. RandomizerSpec('binary_rr', field_query('x'), 1.0)), got {self.randomizer!r}")

    @staticmethod
    def of(users: Users | range | np.ndarray | list[int], randomizer: RandomizerSpec) -> Request:
        """A request from any description of the users: a ``range``, a list or array of ids, or ``Users``.

        A ``range`` of step 1 stays a range (no id array is built); any other range, list or
        array becomes explicit ids (``Users.of``), each allowed once.

        Parameters
        ----------
        users : Users, range, numpy.ndarray or list of int
            The users asked.
        randomizer : RandomizerSpec
            What they run on their records.

        Returns
        -------
        Request
            The request.

        Raises
        ------
        ParameterError
            An id that is not an integer in [0, 2^63), a repeated id, a range with start > stop,
            or a randomizer that is not a ``RandomizerSpec``.

        Examples
        --------
        >>> import ldp
        >>> rr = ldp.RandomizerSpec("binary_rr", ldp.label_query(), 1.0)
        >>> ldp.Request.of(range(5), rr).users
        Users(start=0, stop=5, ids=None)
        >>> ldp.Request.of([4, 1], rr).users.array().tolist()
        [4, 1]
        >>> ldp.Request.of([1, 1], rr)
        Traceback (most recent call last):
        ...
        ldp.core.errors.ParameterError: a request must name each user at most once (one report per user per request)
        """
        return Request(users_for(users), randomizer)


def _check_fields(query: QuerySpec, schema: Schema, where: str, depth: int = 0) -> None:
    """Refuse, before anything is sent, a query naming a field the users' schema lacks or an index
    outside it (ParameterError). What a spec names is what its registered kind declares
    (``Query.reads``, ``ldp.core.queries.query_reads``), so a new query kind is written in one
    place; everything else (unknown kinds, ill-typed parameters, values) is left to the users'
    side, which checks every query again and answers with an error result."""
    reads = query_reads(query)
    for name, index in reads.columns:
        try:
            schema.column(name, index)
        except LDPError as exc:
            raise ParameterError(f"{where}: {exc}") from None
    if depth >= 32:
        return
    for sub in reads.subqueries:
        try:
            spec = sub if isinstance(sub, QuerySpec) else QuerySpec.from_json(sub)
        except LDPError:
            continue
        _check_fields(spec, schema, where, depth + 1)


class Session:
    """One run of a local algorithm against an ``LROracle``: its conversation with the users.

    A session of kind NON_INTERACTIVE takes exactly one round that carries all its requests and
    refuses a second with a ``SessionError`` (the shards refuse it too, independently); an
    INTERACTIVE session takes any number of rounds, each of which may depend on earlier replies
    (KLNRS Definition 4.4). Request ids are derived from (session id, round, position), so
    every per-user random draw is the same on every transport for the same program. Every round
    is written to the oracle's ``Transcript`` (rounds, requests, ε, counts — never a record or
    a report).

    Parameters
    ----------
    oracle : LROracle
        The users, e.g. ``InProcessLROracle(population)`` or the oracle of ``launch_local``.
    kind : SessionKind
        ``SessionKind.NON_INTERACTIVE`` (one round) or ``SessionKind.INTERACTIVE``.
    name : str, default ""
        A label for the transcript and error messages.
    deadline_s : float, default 30.0
        Seconds each round may take; a shard that misses it has its users reported MISSING.

    Raises
    ------
    ParameterError
        ``oracle`` is not an ``LROracle``, ``kind`` is not a ``SessionKind`` value, ``name`` is
        not a string, or ``deadline_s`` is not a finite number of seconds in (0, 10^6].

    Examples
    --------
    >>> import ldp
    >>> cc = ldp.concept_class("parity", 3)
    >>> population = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "target")), size=100, budget=1.0)
    >>> oracle = ldp.InProcessLROracle(population)
    >>> session = ldp.Session(oracle, ldp.SessionKind.INTERACTIVE, name="demo")
    >>> rr = ldp.RandomizerSpec("binary_rr", ldp.label_query(), epsilon=0.25)
    >>> for _ in range(3):  # three adaptive rounds of ε = 0.25 each
    ...     (reports,) = ldp.run(session.round([ldp.Request.of(range(100), rr)]))
    >>> session.rounds_done, session.epsilon_max, session.transcript.epsilon_charged()
    (3, 0.25, 75.0)
    """

    def __init__(self, oracle: LROracle, kind: SessionKind, name: str = "", deadline_s: float = 30.0) -> None:
        if not isinstance(oracle, LROracle):
            raise ParameterError(f"oracle must be an LROracle (e.g. ldp.InProcessLROracle(population) or the oracle of ldp.launch_local), got {oracle!r}")
        if not isinstance(name, str):
            raise ParameterError(f"a session name must be a string, got {name!r}")
        self.oracle = oracle
        self.kind = SessionKind(kind)  # an unknown kind: a ParameterError naming the two kinds
        self.name = name
        self.deadline_s = require_deadline(deadline_s, "session deadline_s (seconds per round)")
        self.session_id = oracle.new_session_id()
        self.rounds_done = 0
        self.users_asked = 0
        self.epsilon_max = 0.0

    @property
    def transcript(self) -> Transcript:
        """The oracle's transcript (the oracle owns it: every session on it records there)."""
        return self.oracle.transcript

    async def round(self, requests: Sequence[Request], last: bool | None = None) -> list[Reports]:
        """Send one round; returns one ``Reports`` per request, in order (a coroutine).

        All requests of a round are fixed before any reply; each user's report depends only on
        its own record and draws. Before anything is sent, the round is refused if it breaks a
        session rule or names a field the users' schema lacks (against the oracle's public
        description). Users over budget are REFUSED (no report, no charge), not an error. The
        round is recorded in the transcript. From synchronous code, run it with ``ldp.run``.

        Parameters
        ----------
        requests : sequence of Request
            At least one, fewer than 2^24.
        last : bool, optional
            The ``last_round`` flag of the round message; default True for a NON_INTERACTIVE
            session, False for an INTERACTIVE one.

        Returns
        -------
        list of Reports
            One per request, in order.

        Raises
        ------
        SessionError
            A second round in a NON_INTERACTIVE session (KLNRS Def. 4.4).
        ParameterError
            No requests, too many requests or rounds (a session holds at most 2^16 rounds), an
            element that is not a ``Request``, a query naming a field or index the schema
            lacks, or a user that no shard holds.

        Examples
        --------
        >>> import ldp
        >>> cc = ldp.concept_class("parity", 3)
        >>> population = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "target")), size=100, budget=1.0)
        >>> session = ldp.Session(ldp.InProcessLROracle(population), ldp.SessionKind.NON_INTERACTIVE)
        >>> bits = [ldp.RandomizerSpec("binary_rr", ldp.field_query("x", j), epsilon=1.0) for j in range(3)]
        >>> reports = ldp.run(session.round([ldp.Request.of(range(33 * j, 33 * j + 33), rr) for j, rr in enumerate(bits)]))
        >>> [r.counts()["answered"] for r in reports]
        [33, 33, 33]
        >>> ldp.run(session.round([ldp.Request.of(range(99, 100), bits[0])]))
        Traceback (most recent call last):
        ...
        ldp.core.errors.SessionError: session 1 (unnamed) is non-interactive: it already ran its one round. ...
        >>> other = ldp.Session(ldp.InProcessLROracle(population), ldp.SessionKind.INTERACTIVE)
        >>> ldp.run(other.round([ldp.Request.of(range(10), ldp.RandomizerSpec("binary_rr", ldp.field_query("z"), 1.0))]))
        Traceback (most recent call last):
        ...
        ldp.core.errors.ParameterError: request 0 (binary_rr of query 'field'): unknown field 'z'; the schema has ['x', 'y']
        """
        if self.kind == SessionKind.NON_INTERACTIVE and self.rounds_done:
            raise SessionError(
                f"session {self.session_id} ({self.name or 'unnamed'}) is non-interactive: it already ran its one round. "
                "A non-interactive local algorithm fixes all its requests before any reply (KLNRS Def. 4.4); "
                "open an INTERACTIVE session to ask again."
            )
        if isinstance(requests, (str, bytes, Request)) or not isinstance(requests, Sequence):
            raise ParameterError(f"a round takes a list of requests ([Request.of(users, RandomizerSpec(...)), ...]), got {requests!r}")
        if not requests:
            raise ParameterError("a round needs at least one request")
        if len(requests) >= MAX_REQUESTS_PER_ROUND:
            raise ParameterError(f"a round holds at most {MAX_REQUESTS_PER_ROUND - 1} requests, got {len(requests)}")
        if self.rounds_done >= MAX_ROUNDS:
            raise ParameterError(f"a session holds at most {MAX_ROUNDS} rounds")
        description = self.oracle.description
        for k, r in enumerate(requests):
            if not isinstance(r, Request) or not isinstance(r.randomizer, RandomizerSpec):
                raise ParameterError(f"request {k} must be a Request (Request.of(users, RandomizerSpec(...))), got {r!r}")
            if description is not None and isinstance(r.randomizer.query, QuerySpec):
                _check_fields(r.randomizer.query, description.schema, f"request {k} ({r.randomizer.kind} of query {r.randomizer.query.name!r})")
        assignments = tuple(
            Assignment(request_id(self.session_id, self.rounds_done, k), r.users, r.randomizer) for k, r in enumerate(requests)
        )
        is_last = self.kind == SessionKind.NON_INTERACTIVE if last is None else last
        message = RoundRequest(self.session_id, self.kind, self.rounds_done, assignments, is_last, self.deadline_s)
        reports = await self.oracle.run_round(message)
        self.rounds_done += 1
        self.users_asked += sum(len(r.users) for r in requests)
        self.epsilon_max = max([self.epsilon_max] + [r.randomizer.epsilon for r in requests])
        self.transcript.record(self, message, reports)
        return reports
