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
from ldp.core.errors import ParameterError, require_deadline, require_integer
from ldp.core.randomizers import RandomizerSpec

__all__ = ["SessionKind", "Users", "Assignment", "RoundRequest", "Result", "RoundReply", "Status"]


# User ids travel as int64 (packed ids) and uint64 (range ends): a range ends below 2^63, where
# ``len`` and an int64 id array would overflow. Ids past the population are the shards' to refuse
# ("no connected shard holds", "names users outside this shard"), with the users named.
ID_LIMIT = 1 << 63


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


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

    @classmethod
    def _missing_(cls, value: object) -> SessionKind:
        # Enum raises a bare ValueError for an unknown value; a user's mistake gets the allowed values.
        raise ParameterError(f"session kind must be SessionKind.NON_INTERACTIVE (1) or SessionKind.INTERACTIVE (2), got {value!r}")


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

    @classmethod
    def _missing_(cls, value: object) -> Status:
        raise ParameterError(f"a status must be 0 (ANSWERED), 1 (REFUSED), 2 (MISSING) or 3 (ERROR), got {value!r}")


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

    def __post_init__(self) -> None:
        # A range is checked by its ends wherever it is built (the API, a decoded wire message,
        # ``within``): at 2^63 ``len`` and int64 ids would overflow (an OverflowError as the text).
        if self.ids is None:
            start, stop = self.start, self.stop
            if not (_is_int(start) and _is_int(stop) and 0 <= start <= stop < ID_LIMIT):
                raise ParameterError(f"a user range needs integers 0 ≤ start ≤ stop < 2^63 (user ids are int64), got [{start!r}, {stop!r})")
            object.__setattr__(self, "start", int(start))
            object.__setattr__(self, "stop", int(stop))

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
            Unless start and stop are integers with 0 ≤ start ≤ stop < 2^63.

        Examples
        --------
        >>> import ldp
        >>> len(ldp.Users.range(0, 1000))
        1000
        >>> ldp.Users.range(5, 2)
        Traceback (most recent call last):
        ...
        ldp.core.errors.ParameterError: a user range needs integers 0 ≤ start ≤ stop < 2^63 (user ids are int64), got [5, 2)
        """
        return Users(start, stop, None)  # checked by __post_init__

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
            An id that is not an integer in [0, 2^63), or a repeated id.

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
        # Read without a dtype first: casting to int64 would wrap 2^63, truncate 1.5 and turn "8"
        # into user 8, so anything but integers is refused before the cast.
        if isinstance(ids, (str, bytes)) or ids is None:
            raise ParameterError(f"user ids must be a list or array of integers, got {ids!r}")
        try:
            raw = np.asarray(ids)
        except (TypeError, ValueError):  # ragged nesting
            raise ParameterError("user ids must be a flat list or array of integers") from None
        flat = raw.ravel()
        integers = flat.dtype.kind in "iu" or (flat.dtype.kind == "O" and all(_is_int(v) for v in flat))  # "O": Python ints past int64
        if flat.size and not integers:
            raise ParameterError(f"user ids must be integers, got {flat.dtype} values such as {flat[:3].tolist()}")
        if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= ID_LIMIT):
            raise ParameterError(f"user ids must be in [0, 2^63) (int64), got ids from {int(flat.min())} to {int(flat.max())}")
        arr = raw.astype(np.int64, copy=False).ravel()
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


# The wire's integer fields (proto/ldp/wire/v1/aggregator.proto): request and session ids are
# uint64, the round a uint32. A message that cannot be encoded is refused where it is built, with
# the field's name, not by the protobuf runtime on the way out.
UINT64_MAX = (1 << 64) - 1
UINT32_MAX = (1 << 32) - 1


@dataclass(frozen=True)
class Assignment:
    """One request for one shard: these users run this randomizer once each.

    ``into`` is the aggregator's side only, never sent: where a transport that receives reports
    as bytes may copy this part's reports as they arrive (rows of its users, in order; the
    answered ones first), a view of the request's final array (``LROracle.report_layout``)."""

    request_id: int
    users: Users
    randomizer: RandomizerSpec
    into: np.ndarray | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        require_integer("request_id", self.request_id, 0, UINT64_MAX, "[0, 2^64)")
        if not isinstance(self.users, Users):
            raise ParameterError(f"an assignment's users must be Users (Users.range or Users.of), got {self.users!r}")


@dataclass(frozen=True)
class RoundRequest:
    """One round: the session, its kind and round number, the assignments and the deadline.

    Checked where it is built, on both sides (the aggregator's API and a client decoding the
    wire): ids and the round fit their wire fields, and ``deadline_s`` is a finite number of
    seconds in (0, 10^6] (``require_deadline``). The session kind is carried as sent; the users'
    side answers an unknown kind with a round-level error (``ldp.local.rules``).
    """

    session_id: int
    session_kind: SessionKind
    round: int
    assignments: tuple[Assignment, ...]
    last_round: bool = False
    deadline_s: float = 30.0  # seconds from sending; a shard that misses it is reported missing

    def __post_init__(self) -> None:
        require_integer("session_id", self.session_id, 0, UINT64_MAX, "[0, 2^64)")
        require_integer("round", self.round, 0, UINT32_MAX, "[0, 2^32)")
        require_integer("session_kind", self.session_kind, -(1 << 31), (1 << 31) - 1, "[-2^31, 2^31)")  # int32 on the wire
        object.__setattr__(self, "deadline_s", require_deadline(self.deadline_s, "the round deadline deadline_s"))


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
