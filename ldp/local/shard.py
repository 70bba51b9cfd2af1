"""The users' side: a shard of users answering rounds with their own records and ledgers.

One ``Shard`` object is what a client process hosts, and what the in-process oracle holds:
the same code answers in both transports, so they cannot disagree. A shard

- generates its users' records locally from the population spec (records never leave it),
- builds each requested ε-local randomizer itself and validates it (unknown kinds, bad
  parameters, ε that is NaN/inf/≤0/out of range → an error result, ledger unchanged),
- charges each user's ledger *before* producing the report, refusing users over budget
  (KLNRS Definition 4.4: the budget is enforced by the user, never trusted from the aggregator),
- enforces the session rules: one round in a NON_INTERACTIVE session; strictly increasing rounds
  in an INTERACTIVE one (a replayed round is refused, so it cannot draw fresh randomness).
"""

from __future__ import annotations


import numpy as np

from ldp.core import ratio_queries  # noqa: F401  (registers the lr_ratio query kind users may be asked)
from ldp.core.budget import Ledger, has_repeats
from ldp.core.errors import LDPError
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.randomizers import LocalRandomizer
from ldp.core.rng import Streams
from ldp.local.messages import Assignment, Result, RoundReply, RoundRequest
from ldp.local.rules import SessionRules

__all__ = ["Shard"]


class Shard:
    """Users first_user .. first_user+count−1 of a population, with records, ledgers, randomness."""

    def __init__(self, spec: PopulationSpec, first_user: int, count: int) -> None:
        self.spec = spec
        self.first_user = int(first_user)
        self.count = int(count)
        self._records = generate_records(spec, self.first_user, self.count)
        self.ledger = Ledger(self.first_user, self.count, spec.budget)
        self._randomness = spec.randomness()
        self._rules = SessionRules()

    @property
    def stop(self) -> int:
        return self.first_user + self.count

    def answer(self, request: RoundRequest) -> RoundReply:
        """Answer every assignment of one round (vectorized over each assignment's users)."""
        refusal = self._rules.admit(request)
        if refusal:
            return RoundReply(request.session_id, request.round, error=refusal)
        return RoundReply(request.session_id, request.round, tuple(self._answer_one(a) for a in request.assignments))

    def _answer_one(self, assignment: Assignment) -> Result:
        wanted = assignment.users
        outside = LDPError(f"request {assignment.request_id} names users outside this shard's {self.first_user}..{self.stop - 1}")
        # A range is checked by its ends before it is materialized: a hostile aggregator must not
        # be able to make a client allocate 10^12 ids.
        if wanted.ids is None and len(wanted) and (wanted.start < self.first_user or wanted.stop > self.stop):
            return Result(assignment.request_id, np.zeros(0), np.ones(0, dtype=bool), error=str(outside))
        users = wanted.array()
        no_values = np.zeros(0)
        all_refused = np.ones(len(users), dtype=bool)
        try:
            if users.size and (users.min() < self.first_user or users.max() >= self.stop):
                raise outside
            randomizer = LocalRandomizer.build(assignment.randomizer, self.spec.schema)
            if assignment.users.ids is not None and has_repeats(users):
                raise LDPError(f"request {assignment.request_id} names a user twice")
        except LDPError as exc:
            return Result(assignment.request_id, no_values, all_refused, error=str(exc))
        # Charge first (fail closed): a report exists only for users whose charge was recorded.
        charge = self.ledger.charge(users, randomizer.epsilon)
        accepted = users[charge.accepted]
        records = self._records[accepted - self.first_user]
        randomness = self._randomness.for_request(Streams.REPORTS, assignment.request_id, accepted)
        values = randomizer.apply(records, randomness)
        return Result(assignment.request_id, values, charge.refused)
