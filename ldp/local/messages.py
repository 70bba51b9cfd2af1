"""Transport-neutral round messages: what an aggregator asks a shard, and what it answers.

The in-process oracle passes these objects directly; the gRPC transport (``ldp.wire``) encodes
exactly these fields as protobuf with packed numpy bytes. Keeping one definition means the two
transports cannot drift apart.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from ldp.core.budget import has_repeats
from ldp.core.errors import ParameterError
from ldp.core.randomizers import RandomizerSpec

__all__ = ["SessionKind", "Users", "Assignment", "RoundRequest", "Result", "RoundReply", "Status"]


class SessionKind(enum.IntEnum):
    """KLNRS Definition 4.4: non-interactive = all requests fixed before any reply (one round)."""

    NON_INTERACTIVE = 1
    INTERACTIVE = 2


class Status(enum.IntEnum):
    """Per-user outcome of one request."""

    ANSWERED = 0
    REFUSED = 1  # over budget: no report, no charge
    MISSING = 2  # the shard holding the user disconnected (now or earlier) or missed the deadline
    ERROR = 3  # the request was invalid for this shard (unknown query, bad parameters, ...), or its reply was malformed
    # For MISSING and ERROR users, ``Reports.errors`` says which shard and why.


@dataclass(frozen=True)
class Users:
    """A set of distinct user ids: a contiguous range [start, stop) or an explicit id array."""

    start: int = 0
    stop: int = 0
    ids: np.ndarray | None = None

    @staticmethod
    def range(start: int, stop: int) -> "Users":
        if not 0 <= start <= stop:
            raise ParameterError(f"a user range needs 0 ≤ start ≤ stop, got [{start}, {stop})")
        return Users(int(start), int(stop), None)

    @staticmethod
    def of(ids: np.ndarray | list[int]) -> "Users":
        arr = np.asarray(ids, dtype=np.int64).ravel()
        if arr.size and arr.min() < 0:
            raise ParameterError("user ids must be ≥ 0")
        if has_repeats(arr):
            raise ParameterError("a request must name each user at most once (one report per user per request)")
        return Users(0, 0, arr)

    def array(self) -> np.ndarray:
        return np.arange(self.start, self.stop, dtype=np.int64) if self.ids is None else self.ids

    def __len__(self) -> int:
        return self.stop - self.start if self.ids is None else len(self.ids)

    def within(self, first: int, count: int) -> "Users":
        """The users of this set that lie in [first, first+count), in order."""
        if self.ids is None:
            lo, hi = max(self.start, first), min(self.stop, first + count)
            return Users.range(lo, max(lo, hi))
        ids = self.ids[(self.ids >= first) & (self.ids < first + count)]
        return Users(0, 0, ids)


@dataclass(frozen=True)
class Assignment:
    """One request for one shard: these users run this randomizer once each."""

    request_id: int
    users: Users
    randomizer: RandomizerSpec


@dataclass(frozen=True)
class RoundRequest:
    session_id: int
    session_kind: SessionKind
    round: int
    assignments: tuple[Assignment, ...]
    last_round: bool = False
    deadline_s: float = 30.0  # seconds from sending; a shard that misses it is reported missing


@dataclass(frozen=True)
class Result:
    """A shard's answer to one assignment. ``values`` holds reports of the accepted users only,
    in the order of the assignment's users; ``refused`` is a bool mask over those users."""

    request_id: int
    values: np.ndarray
    refused: np.ndarray
    error: str = ""


@dataclass(frozen=True)
class RoundReply:
    session_id: int
    round: int
    results: tuple[Result, ...] = field(default_factory=tuple)
    error: str = ""  # a round-level refusal (e.g. second round of a non-interactive session)
