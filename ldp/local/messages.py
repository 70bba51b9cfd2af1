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
    """KLNRS Definition 4.4: non-interactive = all requests fixed before any reply (one round).

    A NON_INTERACTIVE session has exactly one round, carrying all its requests; an INTERACTIVE
    session takes any number of rounds, each of which may depend on earlier replies (rounds in
    strictly increasing order: a replayed round is refused). The users' side enforces both
    (``ldp.local.rules``), and ``Session.round`` refuses a second non-interactive round before
    sending it.

    Parameters
    ----------
    value : int
        1 (NON_INTERACTIVE) or 2 (INTERACTIVE), the value sent on the wire.

    Attributes
    ----------
    NON_INTERACTIVE : SessionKind
        One round (value 1).
    INTERACTIVE : SessionKind
        Any number of adaptive rounds (value 2).

    Examples
    --------
    >>> import ldp
    >>> ldp.SessionKind(2), int(ldp.SessionKind.NON_INTERACTIVE)
    (<SessionKind.INTERACTIVE: 2>, 1)
    """

    NON_INTERACTIVE = 1
    INTERACTIVE = 2


class Status(enum.IntEnum):
    """Per-user outcome of one request (``Reports.status`` holds one uint8 per user asked).

    For MISSING and ERROR users, ``Reports.errors`` says which shard and why.

    Parameters
    ----------
    value : int
        0 to 3, as below.

    Attributes
    ----------
    ANSWERED : Status
        0: the user reported (and was charged).
    REFUSED : Status
        1: over budget: no report, no charge.
    MISSING : Status
        2: the shard holding the user disconnected (now or earlier) or missed the deadline.
    ERROR : Status
        3: the request was invalid for this shard (unknown query, bad parameters, ...), or its
        reply was malformed.

    Examples
    --------
    >>> import ldp
    >>> [status.name for status in ldp.Status]
    ['ANSWERED', 'REFUSED', 'MISSING', 'ERROR']
    >>> ldp.Status(1)
    <Status.REFUSED: 1>
    """

    ANSWERED = 0
    REFUSED = 1  # over budget: no report, no charge
    MISSING = 2  # the shard holding the user disconnected (now or earlier) or missed the deadline
    ERROR = 3  # the request was invalid for this shard (unknown query, bad parameters, ...), or its reply was malformed
    # For MISSING and ERROR users, ``Reports.errors`` says which shard and why.


@dataclass(frozen=True)
class Users:
    """A set of distinct user ids: a contiguous range [start, stop) or an explicit id array.

    Build one with ``Users.range`` or ``Users.of`` (which check the ids); ``Request.of`` also
    accepts a ``range``, a list or an array directly.

    Parameters
    ----------
    start : int, default 0
        First id of a range (ignored when ``ids`` is given).
    stop : int, default 0
        One past the last id of a range (ignored when ``ids`` is given).
    ids : numpy.ndarray, optional
        Explicit int64 ids, each at most once; None for a range.

    Examples
    --------
    >>> import ldp
    >>> users = ldp.Users.range(3, 7)
    >>> len(users), users.array().tolist()
    (4, [3, 4, 5, 6])
    >>> ldp.Users.of([9, 2, 5]).within(0, 6).array().tolist()  # the ids in [0, 6), in order
    [2, 5]
    """

    start: int = 0
    stop: int = 0
    ids: np.ndarray | None = None

    @staticmethod
    def range(start: int, stop: int) -> Users:
        """The contiguous users start, start+1, ..., stop−1.

        Parameters
        ----------
        start : int
            The first id, ≥ 0.
        stop : int
            One past the last id, ≥ start.

        Returns
        -------
        Users
            The range (no id array is built).

        Raises
        ------
        ParameterError
            Unless 0 ≤ start ≤ stop.

        Examples
        --------
        >>> import ldp
        >>> len(ldp.Users.range(0, 1000))
        1000
        >>> ldp.Users.range(5, 2)
        Traceback (most recent call last):
        ...
        ldp.core.errors.ParameterError: a user range needs 0 ≤ start ≤ stop, got [5, 2)
        """
        if not 0 <= start <= stop:
            raise ParameterError(f"a user range needs 0 ≤ start ≤ stop, got [{start}, {stop})")
        return Users(int(start), int(stop), None)

    @staticmethod
    def of(ids: np.ndarray | list[int]) -> Users:
        """Explicit user ids, in the order given: each at most once (one report per user per request).

        Parameters
        ----------
        ids : numpy.ndarray or list of int
            User ids ≥ 0, distinct.

        Returns
        -------
        Users
            The ids as an int64 array.

        Raises
        ------
        ParameterError
            A negative or repeated id.

        Examples
        --------
        >>> import ldp
        >>> ldp.Users.of([7, 3]).array().tolist()
        [7, 3]
        >>> ldp.Users.of([7, 7])
        Traceback (most recent call last):
        ...
        ldp.core.errors.ParameterError: a request must name each user at most once (one report per user per request)
        """
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

    def within(self, first: int, count: int) -> Users:
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


def refusals(refused: np.ndarray) -> int:
    """How many users a refusal mask flags. A zero-stride view (what a shard sends when nobody
    was refused) holds one value, so it is read once rather than n times."""
    mask = np.asarray(refused, dtype=bool)
    if mask.ndim == 1 and mask.size and mask.strides[0] == 0:
        return mask.size if bool(mask[0]) else 0
    return int(np.count_nonzero(mask))


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
