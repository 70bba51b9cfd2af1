"""Per-user privacy budgets and report nonces, enforced on the user's side (KLNRS Definition 4.4).

A local algorithm may invoke LR_z(i, R_1), ..., LR_z(i, R_k) on user i only while
ε_1 + ... + ε_k ≤ ε. The ``Ledger`` of a shard keeps, for each of its users, the budget spent,
in **integer fixed-point units of 2^-48** (docs/design.md §4):

- a charge ε_j costs ``ceil(ε_j · 2^48)`` units (rounded *up*),
- a budget ε allows ``floor(ε · 2^48)`` units (rounded *down*),

both computed exactly from the float's binary value with Python integers, so the accepted total
never exceeds the true budget, whatever the floating-point inputs.

How ten charges of 0.1 against a budget of 1.0 are decided: the float 0.1 is
0.1000000000000000055511151231257827…, slightly *more* than 1/10, so ten of them exceed 1.0
exactly; in units each costs ceil(0.1·2^48) = 28147497671066 and ten cost 281474976710660 >
2^48 = 281474976710656. **The tenth charge is refused.** This is the conservative answer
(Tumult and OpenDP decide the same way); ask for ε = 0.125 (exact in binary) eight times, or give
the budget a hair of slack, to spend it all.

A refused user gets no report and no charge; a charge is recorded before the report leaves.

**Nonces.** Each user also has a nonce: a counter the ledger advances by 1 at every accepted
charge. The charge returns, for each accepted report, the counter's value *before* the increment
(``Charge.nonces``); the report's randomness is keyed by (secret key, user, nonce), so no two
reports of a user ever share a draw, whatever ids the aggregator chooses. A charge that would
take a counter to 2^48 is refused (it cannot happen through budgets alone: a charge costs at
least 2^18 units and a budget allows at most 2^58, i.e. at most 2^40 charges).

**Pending charges and refunds.** A ledger opened by a ``LedgerStore`` (``journal=True``) keeps
the charges made since the store last committed (``pending()``); the store writes them and calls
``mark_committed()``. ``refund(charge)`` undoes a pending charge exactly (spent units and nonces
restored), for a caller whose sampling failed before any report left. A charge can be refunded
only while no later charge accepted any of its users (refund the most recent first, e.g. in
reverse order); anything else raises and changes nothing. A standalone ``Ledger`` (the default,
``journal=False``) keeps no pending list, so long simulations hold no history; it refunds under
the same nonce rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ldp.core.errors import LDPError, ParameterError, require_epsilon

__all__ = [
    "Ledger",
    "UNIT_BITS",
    "NONCE_BITS",
    "NONCE_LIMIT",
    "charge_units",
    "allowance_units",
    "Charge",
    "has_repeats",
    "contiguous_span",
]

UNIT_BITS = 48
_SCALE = 1 << UNIT_BITS
NONCE_BITS = 48
NONCE_LIMIT = 1 << NONCE_BITS  # a user's nonce counter always stays below this


def charge_units(epsilon: float) -> int:
    """ceil(ε · 2^48), exactly: the cost of a charge, rounded up."""
    eps = require_epsilon(epsilon)
    return math.ceil(Fraction(eps) * _SCALE)


def allowance_units(epsilon: float) -> int:
    """floor(ε · 2^48), exactly: the budget, rounded down."""
    eps = require_epsilon(epsilon, name="budget epsilon")
    return math.floor(Fraction(eps) * _SCALE)


@dataclass(frozen=True, eq=False)
class Charge:
    """The outcome of one charge over a set of users: who was accepted, who refused, and the
    nonce each accepted report uses. Compared by identity (a charge is one event)."""

    accepted: np.ndarray  # bool mask over the users named
    units: int  # what each accepted occurrence paid
    nonces: np.ndarray  # uint64, one per accepted occurrence, in order: the nonce its report uses
    users: np.ndarray | None  # int64, the users named (a copy), so refunds and stores know them; None when ``span`` says
    span: tuple[int, int] | None = None  # (lo, hi) when users is exactly lo, lo+1, …, hi−1 (set by the ledger)

    @property
    def refused(self) -> np.ndarray:
        return ~self.accepted

    def ids(self) -> np.ndarray:
        """The users named, in order (built from ``span`` for a range charge)."""
        if self.users is not None:
            return self.users
        assert self.span is not None  # the ledger sets one of the two
        return np.arange(self.span[0], self.span[1], dtype=np.int64)


def has_repeats(ids: np.ndarray) -> bool:
    """True if some id occurs twice. O(n) for ascending ids (the common case), else a sort."""
    if len(ids) < 2:
        return False
    steps = np.diff(ids)
    if (steps > 0).all():
        return False
    ordered = np.sort(ids)
    return bool((ordered[1:] == ordered[:-1]).any())


def contiguous_span(ids: np.ndarray) -> tuple[int, int] | None:
    """The half-open range a list of user ids spells out, if it is one.

    A charge over a contiguous range is stored as (lo, hi) instead of every id (the ledger and its
    on-disk store, ``ldp.local.ledger_store``, both use this).

    Parameters
    ----------
    ids : numpy.ndarray
        User ids, in the order given.

    Returns
    -------
    tuple of (int, int) or None
        (lo, hi) if ids are exactly lo, lo+1, …, hi−1 (checked in cache-sized blocks), else None
        (also for no ids).
    """
    n = len(ids)
    if n == 0:
        return None
    lo, hi = int(ids[0]), int(ids[-1]) + 1
    if hi - lo != n:
        return None
    block = 1 << 16
    for start in range(0, n - 1, block):
        part = ids[start : min(n, start + block + 1)]
        if not (part[1:] - part[:-1] == 1).all():
            return None
    return lo, hi


def _initial(values: object, count: int, name: str, low: int, high: int) -> np.ndarray:
    """A validated int64 copy of an initial per-user array, every value in [low, high)."""
    arr = np.asarray(values)
    if arr.shape != (count,) or not (arr.dtype.kind in "iu" or (arr.size == 0)):
        raise ParameterError(f"initial {name} must be {count} integers, got shape {arr.shape} of {arr.dtype}")
    if arr.size and (int(arr.min()) < low or int(arr.max()) >= high):
        raise ParameterError(f"initial {name} must lie in [{low}, {high}), got {int(arr.min())}..{int(arr.max())}")
    return arr.astype(np.int64, copy=True)


class Ledger:
    """Spent budget and nonce counter of ``count`` users with ids first_user .. first_user+count−1.

    Enforced on the user's side (KLNRS Definition 4.4): LR_z(i, R_1), ..., LR_z(i, R_k) may run
    on user i only while ε_1 + ... + ε_k ≤ ε. Budgets are kept in integer fixed-point units of
    2^-48: a charge ε_j costs ceil(ε_j · 2^48) units (rounded *up*), a budget ε allows
    floor(ε · 2^48) (rounded *down*), both exact, so the accepted total never exceeds the true
    budget whatever the floating-point inputs (ten charges of the float 0.1 against 1.0: the
    tenth is refused; see the module docstring). Each user also has a nonce, advanced at every
    accepted charge, that keys its report's randomness.

    Arrays of int64 units; the maximum budget 2^10 is 2^58 units, well inside int64, and a
    charge can never take a user past its allowance, so no sum overflows. ``spent`` and
    ``nonces`` give initial values (a store continuing a ledger); ``journal`` keeps the charges
    since the last ``mark_committed()`` for a store to write. Not thread-safe.

    Parameters
    ----------
    first_user : int
        The first user id, in [0, 2^40].
    count : int
        How many consecutive users, in [0, 2^40].
    budget : float
        Each user's budget ε, a finite number in [2^-30, 2^10].
    spent : numpy.ndarray, optional
        Initial spent units per user (integers in [0, 2^62)); default zeros.
    nonces : numpy.ndarray, optional
        Initial nonces per user (integers in [0, 2^48)); default zeros.
    journal : bool, default False
        Keep the pending charges for a ``LedgerStore``.

    Raises
    ------
    ParameterError
        A bad ``first_user``, ``count``, ``budget``, or initial array.

    Examples
    --------
    >>> import ldp
    >>> ledger = ldp.Ledger(0, 4, budget=1.0)
    >>> ledger.charge([0, 1, 2, 3], 0.75).accepted.tolist()
    [True, True, True, True]
    >>> ledger.charge([0, 1], 0.5).accepted.tolist()  # 0.75 + 0.5 > 1: refused, nothing charged
    [False, False]
    >>> ledger.remaining().tolist(), ledger.nonces().tolist()
    ([0.25, 0.25, 0.25, 0.25], [1, 1, 1, 1])
    >>> sum(bool(ledger.charge([3], 0.025).accepted[0]) for _ in range(10))  # 10·ceil(0.025·2^48) units > 0.25·2^48: the tenth is refused
    9
    """

    def __init__(
        self,
        first_user: int,
        count: int,
        budget: float,
        *,
        spent: np.ndarray | None = None,
        nonces: np.ndarray | None = None,
        journal: bool = False,
    ) -> None:
        for what, value in (("first_user", first_user), ("count", count)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= 1 << 40:
                raise ParameterError(f"ledger needs an integer {what} in [0, 2^40], got {value!r}")
        self.first_user = int(first_user)
        self.count = int(count)
        self.budget = require_epsilon(budget, name="budget epsilon")
        self.allowance = allowance_units(self.budget)
        self._spent = np.zeros(self.count, dtype=np.int64) if spent is None else _initial(spent, self.count, "spent", 0, 1 << 62)
        self._nonces = np.zeros(self.count, dtype=np.int64) if nonces is None else _initial(nonces, self.count, "nonces", 0, NONCE_LIMIT)
        self._journal = bool(journal)
        self._pending: list[Charge] = []
        self._closed = False

    # -- lookups -------------------------------------------------------------------------

    @property
    def stop(self) -> int:
        return self.first_user + self.count

    @property
    def closed(self) -> bool:
        return self._closed

    def _offsets(self, users: np.ndarray) -> np.ndarray:
        users = np.asarray(users, dtype=np.int64).reshape(-1)
        offsets = users - self.first_user
        if users.size and (offsets.min() < 0 or offsets.max() >= self.count):
            raise ParameterError(
                f"ledger holds users {self.first_user}..{self.first_user + self.count - 1}; asked about users outside that range"
            )
        return offsets

    def _room(self, spent: np.ndarray) -> np.ndarray:
        """Units each user may still spend (allowance − spent; may be negative)."""
        return self.allowance - spent

    def can_charge(self, users: np.ndarray, epsilon: float) -> np.ndarray:
        """Bool mask: which users could pay ε now (nothing is recorded).

        Parameters
        ----------
        users : numpy.ndarray
            User ids held by this ledger.
        epsilon : float
            The charge ε.

        Returns
        -------
        numpy.ndarray
            bool, one per user named.

        Raises
        ------
        ParameterError
            An invalid ε, or a user outside this ledger.

        Examples
        --------
        >>> import ldp, numpy as np
        >>> ledger = ldp.Ledger(10, 2, budget=1.0)
        >>> _ = ledger.charge([10], 0.5)
        >>> ledger.can_charge(np.array([10, 11]), 0.75).tolist()
        [False, True]
        """
        units = charge_units(epsilon)
        offsets = self._offsets(users)
        return (units <= self._room(self._spent[offsets])) & (self._nonces[offsets] < NONCE_LIMIT - 1)

    # -- charging ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise LDPError(f"this ledger (users {self.first_user}..{self.stop - 1}) was closed by its store; open it again")

    def charge(self, users: np.ndarray | range, epsilon: float) -> Charge:
        """Charge ε to every user that can afford it; refuse (no change) the others.

        Invalid ε (NaN, ±inf, ≤ 0, subnormal, > 2^10) raises ParameterError and changes nothing.
        A user named twice in one call is charged twice (each occurrence is one report, with its
        own nonce): occurrence by occurrence, so the k-th repeat sees the first k−1 charges.
        A user whose nonce would reach 2^48 is refused. The cost is ceil(ε · 2^48) units, rounded
        up, against an allowance rounded down: the accepted total never exceeds the budget.

        Parameters
        ----------
        users : numpy.ndarray or range
            User ids held by this ledger (array-like of int); repeats are separate charges. A
            ``range`` (step 1) is charged as a span, without an id array.
        epsilon : float
            The charge ε, a finite number in [2^-30, 2^10].

        Returns
        -------
        Charge
            ``accepted`` (bool mask over the users named), ``units`` paid by each accepted
            occurrence, and ``nonces``: per accepted occurrence, in order, the nonce its report
            uses (the counter before the increment).

        Raises
        ------
        ParameterError
            An invalid ε, or a user outside this ledger (nothing changes).
        LDPError
            The ledger was closed by its store.

        Examples
        --------
        >>> import ldp
        >>> ledger = ldp.Ledger(0, 2, budget=1.0)
        >>> charge = ledger.charge([0, 1, 1], 0.5)  # user 1 twice: two reports, two nonces
        >>> charge.accepted.tolist(), charge.nonces.tolist(), charge.units == 2**47
        ([True, True, True], [0, 0, 1], True)
        >>> ledger.spent().tolist()
        [0.5, 1.0]
        >>> ledger.charge([1], float("nan"))
        Traceback (most recent call last):
        ...
        ldp.core.errors.ParameterError: epsilon must be a finite number > 0, got nan
        """
        self._check_open()
        units = charge_units(epsilon)
        named: np.ndarray | None
        span: tuple[int, int] | None
        if isinstance(users, range) and users.step == 1 and len(users):
            # A range asked by range: no id array at all (8 bytes per user saved, and no check pass).
            named, span = None, (users.start, users.stop)
            if span[0] < self.first_user or span[1] > self.stop:
                self._offsets(np.array([span[0], span[1] - 1]))  # raises, naming the ledger's users
        else:
            named = np.array(users, dtype=np.int64, copy=True).reshape(-1)
            span = contiguous_span(named)
        if span is not None and span[0] >= self.first_user and span[1] <= self.stop:
            # A range of users (the common case): slices, no fancy indexing.
            lo, hi = span[0] - self.first_user, span[1] - self.first_user
            spent, nonce = self._spent[lo:hi], self._nonces[lo:hi]
            if units <= self._room(spent.max()) and nonce.max() < NONCE_LIMIT - 1:
                accepted = np.ones(hi - lo, dtype=bool)  # everyone can pay
                used = nonce.astype(np.uint64)
                spent += units
                nonce += 1
            else:
                accepted = (units <= self._room(spent)) & (nonce < NONCE_LIMIT - 1)
                idx = np.flatnonzero(accepted)
                used = nonce[idx].astype(np.uint64)
                spent[idx] += units
                nonce[idx] += 1
        else:
            assert named is not None  # a range is always a span
            offsets = self._offsets(named)
            if has_repeats(offsets):
                accepted, used = self._charge_repeats(offsets, units)
            else:
                accepted = (units <= self._room(self._spent[offsets])) & (self._nonces[offsets] < NONCE_LIMIT - 1)
                taken = offsets[accepted]
                used = self._nonces[taken].astype(np.uint64)
                self._spent[taken] += units
                self._nonces[taken] += 1
        charge = Charge(accepted, units, used, named, span)
        if self._journal:
            self._pending.append(charge)
        return charge

    def _charge_repeats(self, offsets: np.ndarray, units: int) -> tuple[np.ndarray, np.ndarray]:
        """Occurrence by occurrence, vectorized: the k-th occurrence (k = 0, 1, …) of a user is
        accepted iff the user can pay k+1 charges and its nonce can advance k+1 times. Acceptance
        is monotone in k (a refusal changes nothing), so this equals charging one at a time."""
        n = len(offsets)
        order = np.argsort(offsets, kind="stable")
        ordered = offsets[order]
        starts = np.ones(n, dtype=bool)
        starts[1:] = ordered[1:] != ordered[:-1]
        position = np.arange(n)
        rank_ordered = position - np.maximum.accumulate(np.where(starts, position, 0))
        rank = np.empty(n, dtype=np.int64)
        rank[order] = rank_ordered
        room = self._room(self._spent[offsets])
        budget_cap = np.where(room >= 0, room // units, 0)
        nonce_cap = (NONCE_LIMIT - 1) - self._nonces[offsets]
        accepted = (rank < budget_cap) & (rank < nonce_cap)
        taken = offsets[accepted]
        used = (self._nonces[taken] + rank[accepted]).astype(np.uint64)
        who, times = np.unique(taken, return_counts=True)
        self._spent[who] += times * units  # times ≤ room // units: no overflow
        self._nonces[who] += times
        return accepted, used

    def refund(self, charge: Charge) -> None:
        """Undo ``charge`` exactly: its users' spent units and nonces go back to what they were.

        Only for a charge whose reports never left: on a journaled (store-opened) ledger it must be
        pending (not yet committed), and on any ledger no later charge may have accepted one of
        its users (refund the most recent charges first). Otherwise LDPError, nothing changed.

        Parameters
        ----------
        charge : Charge
            A charge made by this ledger.

        Raises
        ------
        LDPError
            The charge cannot be refunded (see above), is malformed, or the ledger is closed.

        Examples
        --------
        >>> import ldp
        >>> ledger = ldp.Ledger(0, 2, budget=1.0)
        >>> first, second = ledger.charge([0, 1], 0.5), ledger.charge([0], 0.25)
        >>> ledger.refund(first)
        Traceback (most recent call last):
        ...
        ldp.core.errors.LDPError: this charge cannot be refunded: a later charge accepted some of its users (refund the most recent first) ...
        >>> ledger.refund(second); ledger.refund(first)
        >>> ledger.spent().tolist(), ledger.nonces().tolist()
        ([0.0, 0.0], [0, 0])
        """
        self._check_open()
        if self._journal and not any(c is charge for c in self._pending):
            raise LDPError("only a pending (uncommitted) charge of this ledger can be refunded")
        offsets = self._offsets(charge.ids())
        accepted = np.asarray(charge.accepted, dtype=bool)
        nonces = np.asarray(charge.nonces)
        if accepted.shape != offsets.shape or nonces.shape != (int(accepted.sum()),):
            raise LDPError("malformed charge: its mask, users and nonces disagree")
        taken = offsets[accepted]
        nonces = nonces.astype(np.int64)
        if has_repeats(taken):
            order = np.lexsort((nonces, taken))
            taken, nonces = taken[order], nonces[order]
            ends = np.ones(len(taken), dtype=bool)
            ends[:-1] = taken[1:] != taken[:-1]
            who, times = np.unique(taken, return_counts=True)
            last = nonces[ends]
            first = nonces[np.r_[True, ends[:-1]]]
            consecutive = bool((last - first + 1 == times).all())
        else:
            who, times, last, consecutive = taken, np.ones(len(taken), dtype=np.int64), nonces, True
        cost = times * charge.units
        if not consecutive or not (self._nonces[who] == last + 1).all() or not (self._spent[who] >= cost).all():
            raise LDPError("this charge cannot be refunded: a later charge accepted some of its users (refund the most recent first) or it was refunded already")
        self._spent[who] -= cost
        self._nonces[who] -= times
        if self._journal:
            self._pending = [c for c in self._pending if c is not charge]

    # -- the store's side ----------------------------------------------------------------

    def pending(self) -> list[Charge]:
        """The charges since the last ``mark_committed()`` (always empty unless journaled)."""
        return list(self._pending)

    def mark_committed(self) -> None:
        """The store made every pending charge durable: they can no longer be refunded."""
        self._pending.clear()

    def _close(self) -> None:
        """Called by the store: no further charges or refunds on this object."""
        self._pending.clear()
        self._closed = True

    # -- reading -------------------------------------------------------------------------

    def nonces(self, users: np.ndarray | None = None) -> np.ndarray:
        """Each user's next nonce (= its number of accepted charges, when opened fresh), uint64."""
        return (self._nonces if users is None else self._nonces[self._offsets(users)]).astype(np.uint64)

    def spent(self, users: np.ndarray | None = None) -> np.ndarray:
        """Spent ε per user as floats (rounded; the units are the exact record)."""
        units = self._spent if users is None else self._spent[self._offsets(users)]
        return units.astype(np.float64) / _SCALE

    def spent_units(self, users: np.ndarray | None = None) -> np.ndarray:
        return (self._spent if users is None else self._spent[self._offsets(users)]).copy()

    def remaining(self, users: np.ndarray | None = None) -> np.ndarray:
        """Remaining ε per user as floats: (allowance − spent units)·2^-48 (rounded).

        Parameters
        ----------
        users : numpy.ndarray, optional
            User ids held by this ledger; default every user, in id order.

        Returns
        -------
        numpy.ndarray
            float64, one per user.

        Raises
        ------
        ParameterError
            A user outside this ledger.

        Examples
        --------
        >>> import ldp
        >>> ledger = ldp.Ledger(0, 3, budget=1.0)
        >>> _ = ledger.charge([1], 0.375)
        >>> ledger.remaining().tolist(), ledger.remaining([1]).tolist()
        ([1.0, 0.625, 1.0], [0.625])
        """
        units = self._spent if users is None else self._spent[self._offsets(users)]
        return (self.allowance - units).astype(np.float64) / _SCALE
