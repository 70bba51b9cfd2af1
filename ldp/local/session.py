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

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ldp.core.errors import LDPError, ParameterError, SessionError, require_positive_finite
from ldp.core.queries import QuerySpec
from ldp.core.randomizers import RandomizerSpec
from ldp.core.schema import Schema
from ldp.local.messages import Assignment, RoundRequest, SessionKind, Users
from ldp.local.oracle import LROracle, Reports, users_for

__all__ = ["Request", "Session", "Transcript", "request_id"]

MAX_REQUESTS_PER_ROUND = 1 << 24
MAX_ROUNDS = 1 << 16


def request_id(session_id: int, round_index: int, position: int) -> int:
    """A 64-bit request id: session (24 bits) | round (16 bits) | position in round (24 bits)."""
    return (session_id << 40) | (round_index << 24) | position


@dataclass(frozen=True)
class Request:
    """Ask each of ``users`` once: run ``randomizer`` on your record."""

    users: Users
    randomizer: RandomizerSpec

    @staticmethod
    def of(users: Users | range | np.ndarray | list[int], randomizer: RandomizerSpec) -> "Request":
        return Request(users_for(users), randomizer)


@dataclass
class Transcript:
    """What happened, without any data: one entry per round."""

    rounds: list[dict[str, Any]] = field(default_factory=list)

    def record(self, session: "Session", request: RoundRequest, reports: list[Reports]) -> None:
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
                        "users": int(len(r.users)),
                        **r.counts(),
                    }
                    for r in reports
                ],
            }
        )

    def epsilon_charged(self) -> float:
        """Total ε charged over all answered reports (Σ over users and requests)."""
        return float(sum(q["epsilon"] * q["answered"] for rnd in self.rounds for q in rnd["requests"]))

    def to_json(self) -> dict[str, Any]:
        return {"rounds": self.rounds}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1))


def _check_fields(query: QuerySpec, schema: Schema, where: str, depth: int = 0) -> None:
    """Refuse, before anything is sent, a query naming a field the users' schema lacks or an index
    outside it (ParameterError). Only the field references of the registered kinds are checked
    here; everything else (unknown kinds, ill-typed parameters, values) is left to the users'
    side, which checks every query again and answers with an error result."""
    p = query.params
    refs: list[tuple[Any, Any]] = []
    subqueries: list[Any] = []
    if query.name == "field":
        refs = [(p.get("field"), p.get("index", 0))]
    elif query.name == "label":
        refs = [(p.get("field", "y"), 0)]
    elif query.name == "conjunction" and isinstance(p.get("literals"), (list, tuple)):
        refs = [(lit[0], lit[1]) for lit in p["literals"] if isinstance(lit, (list, tuple)) and len(lit) >= 2]
    elif query.name == "parity" and isinstance(p.get("mask"), (list, tuple)):
        refs = [(p.get("field", "x"), j) for j in p["mask"]]
    elif query.name in ("bent", "user_parity"):
        refs = [(p.get("field", "x"), 0)]
    elif query.name == "product" and isinstance(p.get("factors"), (list, tuple)):
        subqueries = list(p["factors"])
    elif query.name == "affine":
        subqueries = [p.get("query")]
    for name, index in refs:
        if not isinstance(name, str) or isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            continue  # ill-typed: the users' side says so
        try:
            schema.column(name, int(index))
        except LDPError as exc:
            raise ParameterError(f"{where}: {exc}") from None
    if depth >= 32:
        return
    for sub in subqueries:
        try:
            spec = sub if isinstance(sub, QuerySpec) else QuerySpec.from_json(sub)
        except LDPError:
            continue
        _check_fields(spec, schema, where, depth + 1)


class Session:
    """One run of a local algorithm against an ``LROracle``."""

    def __init__(self, oracle: LROracle, kind: SessionKind, name: str = "", deadline_s: float = 30.0) -> None:
        self.oracle = oracle
        self.kind = SessionKind(kind)
        self.name = name
        self.deadline_s = require_positive_finite("session deadline_s (seconds per round)", deadline_s)
        self.session_id = oracle.new_session_id()
        self.rounds_done = 0
        self.users_asked = 0
        self.epsilon_max = 0.0
        if not hasattr(oracle, "transcript"):
            oracle.transcript = Transcript()  # type: ignore[attr-defined]

    @property
    def transcript(self) -> Transcript:
        return self.oracle.transcript  # type: ignore[attr-defined,no-any-return]

    async def round(self, requests: Sequence[Request], last: bool | None = None) -> list[Reports]:
        """Send one round; returns one ``Reports`` per request, in order."""
        if self.kind == SessionKind.NON_INTERACTIVE and self.rounds_done:
            raise SessionError(
                f"session {self.session_id} ({self.name or 'unnamed'}) is non-interactive: it already ran its one round. "
                "A non-interactive local algorithm fixes all its requests before any reply (KLNRS Def. 4.4); "
                "open an INTERACTIVE session to ask again."
            )
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
