"""Per-user privacy budgets, enforced on the user's side (KLNRS Definition 4.4).

A local algorithm may invoke LR_z(i, R_1), ..., LR_z(i, R_k) on user i only while
ε_1 + ... + ε_k ≤ ε. The ``Ledger`` of a shard keeps, for each of its users, the budget spent,
in **integer fixed-point units of 2^-48** (DESIGN.md §4):

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ldp.core.errors import ParameterError, require_epsilon

__all__ = ["Ledger", "UNIT_BITS", "charge_units", "allowance_units", "Charge", "has_repeats"]

UNIT_BITS = 48
_SCALE = 1 << UNIT_BITS


def charge_units(epsilon: float) -> int:
    """ceil(ε · 2^48), exactly: the cost of a charge, rounded up."""
    eps = require_epsilon(epsilon)
    return math.ceil(Fraction(eps) * _SCALE)


def allowance_units(epsilon: float) -> int:
    """floor(ε · 2^48), exactly: the budget, rounded down."""
    eps = require_epsilon(epsilon, name="budget epsilon")
    return math.floor(Fraction(eps) * _SCALE)


@dataclass(frozen=True)
class Charge:
    """The outcome of one charge over a set of users: who was accepted, who refused."""

    accepted: np.ndarray  # bool mask over the users named
    units: int

    @property
    def refused(self) -> np.ndarray:
        return ~self.accepted


def has_repeats(ids: np.ndarray) -> bool:
    """True if some id occurs twice. O(n) for ascending ids (the common case), else a sort."""
    if len(ids) < 2:
        return False
    steps = np.diff(ids)
    if (steps > 0).all():
        return False
    ordered = np.sort(ids)
    return bool((ordered[1:] == ordered[:-1]).any())


class Ledger:
    """Spent budget of ``count`` users with ids first_user .. first_user+count−1.

    Arrays of int64 units; the maximum budget 2^10 is 2^58 units, well inside int64, and a
    charge can never take a user past its allowance, so no sum overflows.
    """

    def __init__(self, first_user: int, count: int, budget: float) -> None:
        if count < 0 or first_user < 0:
            raise ParameterError(f"ledger needs first_user ≥ 0 and count ≥ 0, got {first_user}, {count}")
        self.first_user = int(first_user)
        self.count = int(count)
        self.budget = require_epsilon(budget, name="budget epsilon")
        self.allowance = allowance_units(self.budget)
        self._spent = np.zeros(self.count, dtype=np.int64)

    def _offsets(self, users: np.ndarray) -> np.ndarray:
        users = np.asarray(users, dtype=np.int64)
        offsets = users - self.first_user
        if users.size and (offsets.min() < 0 or offsets.max() >= self.count):
            raise ParameterError(
                f"ledger holds users {self.first_user}..{self.first_user + self.count - 1}; asked about users outside that range"
            )
        return offsets

    def can_charge(self, users: np.ndarray, epsilon: float) -> np.ndarray:
        """Bool mask: which users could pay ε now (nothing is recorded)."""
        units = charge_units(epsilon)
        return self._spent[self._offsets(users)] + units <= self.allowance

    def charge(self, users: np.ndarray, epsilon: float) -> Charge:
        """Charge ε to every user that can afford it; refuse (no change) the others.

        Invalid ε (NaN, ±inf, ≤ 0, subnormal, > 2^10) raises ParameterError and changes nothing.
        A user named twice in one call is charged twice (each occurrence is one report).
        """
        units = charge_units(epsilon)
        offsets = self._offsets(users)
        if has_repeats(offsets):
            # Charge occurrence by occurrence so the k-th repeat sees the first k−1 charges.
            accepted = np.zeros(len(offsets), dtype=bool)
            for k, off in enumerate(offsets):
                if self._spent[off] + units <= self.allowance:
                    self._spent[off] += units
                    accepted[k] = True
            return Charge(accepted, units)
        accepted = self._spent[offsets] + units <= self.allowance
        self._spent[offsets[accepted]] += units
        return Charge(accepted, units)

    def spent(self, users: np.ndarray | None = None) -> np.ndarray:
        """Spent ε per user as floats (rounded; the units are the exact record)."""
        units = self._spent if users is None else self._spent[self._offsets(users)]
        return units.astype(np.float64) / _SCALE

    def spent_units(self, users: np.ndarray | None = None) -> np.ndarray:
        return (self._spent if users is None else self._spent[self._offsets(users)]).copy()

    def remaining(self, users: np.ndarray | None = None) -> np.ndarray:
        units = self._spent if users is None else self._spent[self._offsets(users)]
        return (self.allowance - units).astype(np.float64) / _SCALE
