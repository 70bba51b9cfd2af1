"""The users' side: a shard of users answering rounds with their own records, budgets and keys.

One ``Shard`` object is what a client process hosts, and what the in-process oracle holds:
the same code answers in both transports, so they cannot disagree. Everything a shard needs
comes from the users' side (docs/design.md §2a), never from the aggregator:

- its **records** come from the data it was given (a ``PopulationSpec`` it generates them from,
  or a ``DataPopulation`` read from a local file): records never leave it;
- its users' **budget** is the one it was configured with; a request cannot raise it;
- its **ledgers** live in a ``LedgerStore`` keyed by the identity of the data, so a reload of the
  same data continues them (and with a durable store, so does a restart);
- its **report randomness** is AES keyed by a secret report key and a per-user nonce that the
  ledger advances at every accepted charge (``ldp.core.rng``): ids the aggregator chooses never
  select a draw, so a reused request or session id gets fresh randomness. The key it draws with
  is ``life_key(report key, key_salt)`` (invariant I1, docs/design.md §2a): a process life
  started by a user gets a fresh salt, so nonces that restart at 0 with an in-memory ledger
  never meet the same key again; an empty salt (the experiment vouches) keeps the report key.

A round is answered in three phases, so that nothing is charged without a report:

1. *validate* every assignment: users inside the shard, each named once, a known randomizer with
   valid parameters, a query whose width and values the randomizer accepts, and every named
   user's input checked (``LocalRandomizer.inputs``). A failure is an error result for that
   assignment and touches no ledger;
2. *charge and sample*, assignment by assignment in request order: users over budget are refused
   (KLNRS Definition 4.4), the others are charged and their reports drawn with the charge's
   nonces;
3. *commit* the charges (on disk first when the store is durable), then the reply may leave.
   Should a sampler or the commit fail, every charge not yet committed is refunded and the
   round ends with an error: no charge stays for a report that does not leave.

``answer`` does phases 2 and 3 once for the whole round: all of it leaves, or none of it.
``answer_in_parts`` (the client processes) does them part by part, a few MiB of reports at a
time, each part charged, sampled and committed before it is yielded to leave: the aggregator
checks one part while the users sample the next. A failure then refunds the part being drawn;
the parts already sent stay charged, because their reports left.

Session rules: one round in a NON_INTERACTIVE session; strictly increasing rounds in an
INTERACTIVE one (``ldp.local.rules``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from ldp.core import ratio_queries  # noqa: F401  (registers the lr_ratio query kind users may be asked)
from ldp.core.budget import Charge, Ledger, has_repeats
from ldp.core.errors import LDPError, ParameterError, require_epsilon
from ldp.core.longitudinal import MEMO_REPEAT_EPSILON, memo_key, memo_ledger_identity
from ldp.core.population import PopulationDescription
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import KEY_BYTES, UserRandomness, life_key, secret_key
from ldp.core.schema import Schema
from ldp.local.ledger_store import LedgerStore, MemoryLedgerStore
from ldp.local.messages import Assignment, Result, RoundReply, RoundRequest, Users
from ldp.local.rules import SessionRules

__all__ = ["Shard", "Holdings", "ReplyPart", "RoundObserver"]

# What a round's observer is shown as each part of it leaves: the request, restricted to the users
# that part answers, the part, and the shard (``Shard.observer``).
RoundObserver = Callable[[RoundRequest, RoundReply, "Shard"], None]


class Holdings(Protocol):
    """The data a shard's users hold: a ``PopulationSpec`` or a ``DataPopulation``."""

    @property
    def size(self) -> int: ...

    @property
    def schema(self) -> Schema: ...

    @property
    def identity(self) -> str: ...

    def records(self, first_user: int, count: int) -> np.ndarray: ...


@dataclass(frozen=True)
class _Planned:
    """An assignment that passed validation: who, what, and every named user's input.

    ``users`` is a ``range`` for a range request (no id array is built for it) and an int64 id
    array otherwise."""

    assignment: Assignment
    users: range | np.ndarray
    randomizer: LocalRandomizer
    inputs: np.ndarray


@dataclass(frozen=True)
class ReplyPart:
    """One part of a shard's answer to a round, committed and free to leave.

    ``reply`` carries whole results or consecutive slices of one assignment's users, in request
    and user order, so the parts of a round, joined in order, are the round's reply; ``final``
    marks the round's last part (it may carry a round-level error)."""

    reply: RoundReply
    final: bool


# Reports are drawn this many users at a time: the AES blocks and the sampler's temporaries
# (≈ 60 bytes per user) then stay in the allocator's reused memory and the CPU caches, instead
# of page-faulting fresh memory every round. Every draw is a function of (user, nonce), so the
# chunking changes no report.
SAMPLE_CHUNK = 1 << 16


def sample_reports(
    randomizer: LocalRandomizer, inputs: np.ndarray, key: bytes, users: range | np.ndarray, nonces: np.ndarray, memo: bytes | None = None
) -> np.ndarray:
    """Each user's report, drawn with its own AES-keyed randomness (``UserRandomness``), in
    chunks of SAMPLE_CHUNK users: the same reports as one call over all of them, bit for bit.
    ``memo``: the users' memo key, for memoized randomizers (``ldp.core.longitudinal``)."""
    n = len(users)
    if n <= SAMPLE_CHUNK:
        return randomizer.sample(inputs, UserRandomness(key, _ids(users), nonces, memo))
    out: np.ndarray | None = None
    for lo in range(0, n, SAMPLE_CHUNK):
        hi = min(n, lo + SAMPLE_CHUNK)
        part = randomizer.sample(inputs[lo:hi], UserRandomness(key, _ids(users[lo:hi]), nonces[lo:hi], memo))
        if out is None:
            out = np.empty((n, *part.shape[1:]), dtype=part.dtype)
        out[lo:hi] = part
    assert out is not None
    return out


class Shard:
    """Users first_user .. first_user+count−1 of some data, with their ledgers and report key.

    ``budget`` defaults to the data's own (a ``PopulationSpec`` carries one), ``key`` to the
    data's report key (seeded specs derive it from the seed, so runs are reproducible; anything
    else gets a fresh secret), ``store`` to a fresh in-memory ``LedgerStore``. ``key_salt`` is
    this process life's salt (``ldp.core.rng.new_life_salt``): reports are drawn under
    ``life_key(key, key_salt)``; None or empty means the experiment vouches that this life's
    (key, user, nonce) never repeat (seeded in-process runs), and the key is used unchanged.
    ``observer`` (a public hook: the classroom's student terminal) is shown every part of every
    answer as it leaves (``RoundObserver``).
    """

    def __init__(
        self,
        data: Holdings,
        first_user: int,
        count: int,
        *,
        budget: float | None = None,
        key: bytes | None = None,
        store: LedgerStore | None = None,
        key_salt: bytes | None = None,
        observer: RoundObserver | None = None,
    ) -> None:
        if first_user < 0 or count < 1 or first_user + count > data.size:
            raise ParameterError(f"users {first_user}..{first_user + count - 1} are outside the data's users 0..{data.size - 1}")
        if budget is None:
            budget = getattr(data, "budget", None)
            if budget is None:
                raise ParameterError("a shard of this data needs a per-user budget (e.g. --budget 1.0)")
        self.data = data
        self.first_user = int(first_user)
        self.count = int(count)
        self.budget = require_epsilon(budget, name="budget epsilon")
        self._records = data.records(self.first_user, self.count)
        self._store = store if store is not None else MemoryLedgerStore()
        self.ledger: Ledger = self._store.open(data.identity, self.first_user, self.count, self.budget)
        make_key = getattr(data, "report_key", None)
        long_term = key if key is not None else (make_key() if make_key is not None else secret_key())
        if not isinstance(long_term, bytes) or len(long_term) != KEY_BYTES:
            got = f"{len(long_term)} bytes" if isinstance(long_term, bytes) else f"{type(long_term).__name__} {long_term!r}"[:80]
            raise ParameterError(f"a report key has {KEY_BYTES} bytes, got {got}")
        self._key = life_key(long_term, key_salt)  # I1: a fresh salt makes every process life's draws new
        # Memoized randomizers key their permanent responses by the *long-term* key: a salted
        # life key would redraw every PRR at each restart (ldp.core.longitudinal.memo_key).
        self._memo = memo_key(long_term)
        self._rules = SessionRules()
        self._built: dict[str, LocalRandomizer] = {}  # randomizers by spec: a round of 10^4 alike requests builds one
        self.observer = observer

    @property
    def stop(self) -> int:
        return self.first_user + self.count

    def description(self) -> PopulationDescription:
        """What this shard declares to the aggregator: the schema and the data's size.

        A data file's schema must have been declared by its user: one ``load_data`` inferred
        is refused here (``DataPopulation.require_declared_schema``, invariant I3), the
        one place every description sent in Ready is built."""
        require_declared = getattr(self.data, "require_declared_schema", None)
        if require_declared is not None:
            require_declared()
        return PopulationDescription(int(self.data.size), self.data.schema)

    def answer(self, request: RoundRequest) -> RoundReply:
        """Answer every assignment of one round (vectorized over each assignment's users), as one
        reply: every report leaves with it, or none does and nothing stays charged."""
        (part,) = self.answer_in_parts(request)
        return part.reply

    def answer_in_parts(self, request: RoundRequest, part_bytes: int | None = None) -> Generator[ReplyPart, None, None]:
        """Answer one round part by part: each part charged, sampled and committed (on disk first
        when the store is durable) before it is yielded, free to leave.

        Parameters
        ----------
        request : RoundRequest
            The round; validated whole (phase 1) before anything is charged.
        part_bytes : int or None
            Close a part once its reports hold this many bytes; an assignment larger than that is
            answered in slices of its users (at least ``SAMPLE_CHUNK`` each). None: one part.

        Yields
        ------
        ReplyPart
            The round's parts in order, the last with ``final``. Their results joined are the
            reply ``answer`` gives, report for report: every draw is a function of (user,
            nonce), and the ledger gives each user the same nonce whatever the slicing.

        Notes
        -----
        The charge invariant holds part by part: a part's users are charged before its reports
        are drawn and committed before it is yielded; should a sampler or a commit fail, the
        charges of the part being drawn are refunded (they are not committed yet), the parts
        already yielded stay charged, and a final part carries the error. A consumer that stops
        early leaves the parts it took charged, as they may have left.
        """
        session, round_ = request.session_id, request.round
        refusal = self._rules.admit(request)
        if refusal:
            yield self._observed(request, ReplyPart(RoundReply(session, round_, error=refusal), True))
            return
        steps = [(a, step) for a in request.assignments for step in _slices(self._plan(a), part_bytes)]
        charges: list[tuple[Ledger, Charge]] = []  # (the ledger charged, the charge) of this part: for a refund
        results: list[Result] = []
        asked: list[Assignment] = []  # what this part answers, for the observer
        size = sent = start = 0  # this part's report bytes; reports already yielded; this part's first step
        for i, (assignment, step) in enumerate(steps):
            final = i == len(steps) - 1
            try:
                result = step if isinstance(step, Result) else self._sample(step, charges)
                results.append(result)
                size += result.values.nbytes
                closes = final or (part_bytes is not None and size >= part_bytes)
                if closes:
                    self._store.commit()  # durable stores: the part's charges are on disk before its reports leave
            except Exception as exc:  # noqa: BLE001 - a sampler bug or a failed commit must not leave charges without reports
                for ledger, charge in reversed(charges):
                    ledger.refund(charge)
                done = "nothing was charged" if not sent else f"the {sent} reports already sent stay charged; nothing else was"
                failed = RoundReply(session, round_, error=f"the shard failed to answer ({done}): {type(exc).__name__}: {exc}")
                yield self._observed(request, ReplyPart(failed, True))
                return
            if self.observer is not None:
                asked.append(assignment if isinstance(step, Result) else _slice_of(assignment, step.users))
            if closes:
                charges.clear()  # committed: they go with the part
                part = ReplyPart(RoundReply(session, round_, tuple(results)), final)
                yield self._observed(request, part, None if start == 0 and final else asked)
                sent += sum(len(r.values) for r in results)
                results, asked, size, start = [], [], 0, i + 1
        if not steps:
            yield self._observed(request, ReplyPart(RoundReply(session, round_), True))

    def _sample(self, plan: _Planned, charges: list[tuple[Ledger, Charge]]) -> Result:
        """Charge ``plan``'s users and draw the accepted users' reports with the charge's nonces."""
        accepted, nonces = self._charge(plan, charges)
        everyone = bool(accepted.all())  # the common case: no mask copies
        users = plan.users if everyone else _ids(plan.users)[accepted]
        inputs = plan.inputs if everyone else plan.inputs[accepted]
        values = sample_reports(plan.randomizer, inputs, self._key, users, nonces, self._memo)
        # Nobody refused: the flags are a zero-stride view (no byte per user to build or keep).
        refused = np.broadcast_to(np.False_, (len(plan.users),)) if everyone else ~accepted
        return Result(plan.assignment.request_id, values, refused)

    def _observed(self, request: RoundRequest, part: ReplyPart, asked: list[Assignment] | None = None) -> ReplyPart:
        """Show ``part`` to ``observer`` with the request it answers: ``request`` restricted to
        ``asked`` (None: the whole request, for a round answered in one part or a round-level
        error). An observer that fails changes nothing that is sent."""
        if self.observer is not None:
            try:
                self.observer(request if asked is None else replace(request, assignments=tuple(asked)), part.reply, self)
            except Exception as exc:  # noqa: BLE001 - showing a round must never change it
                print(f"(could not show the round: {type(exc).__name__}: {exc})", file=sys.stderr)
        return part

    def _charge(self, plan: _Planned, charges: list[tuple[Ledger, Charge]]) -> tuple[np.ndarray, np.ndarray]:
        """Charge one assignment's users (each charge appended to ``charges``, for the refund):
        the accepted mask over ``plan.users`` and, per accepted user in order, its report's nonce.

        A memoized randomizer (one with a ``memo_label``: ``ldp.core.longitudinal``) costs its ε
        (ε∞) for a user's first report of its label and ``MEMO_REPEAT_EPSILON`` after it; who has
        paid is a ledger of its own in the same store (``memo_ledger_identity``), charged in the
        same commit. Both depend on what was asked before, never on a value."""
        memoized = plan.randomizer.randomizer
        label = getattr(memoized, "memo_label", None)
        if not isinstance(label, str):
            charge = self.ledger.charge(plan.users, plan.randomizer.epsilon)
            charges.append((self.ledger, charge))
            return charge.accepted, charge.nonces
        ids = _ids(plan.users)
        paid = self._store.open(memo_ledger_identity(self.data.identity, self._memo, label), self.first_user, self.count, 1.0)
        first = paid.can_charge(ids, 1.0)  # not paid yet: their report is this question's first
        accepted = np.zeros(len(ids), dtype=bool)
        nonces = np.zeros(len(ids), dtype=np.int64)
        for mask, epsilon in ((first, plan.randomizer.epsilon), (~first, MEMO_REPEAT_EPSILON)):
            if not mask.any():
                continue
            charge = self.ledger.charge(ids[mask], epsilon)
            charges.append((self.ledger, charge))
            where = np.flatnonzero(mask)[charge.accepted]
            accepted[where] = True
            nonces[where] = charge.nonces
            if epsilon == plan.randomizer.epsilon and len(where):
                charges.append((paid, paid.charge(ids[where], 1.0)))  # they have paid ε∞: later reports cost the minimum
        return accepted, nonces[accepted]

    def _build(self, spec: RandomizerSpec) -> LocalRandomizer:
        """``LocalRandomizer.build`` for this shard's schema, remembered by the spec's JSON (a
        build is a pure function of the two; it raises before anything is remembered)."""
        try:
            key = json.dumps(spec.to_json(), sort_keys=True, allow_nan=True)
        except (TypeError, ValueError):  # params JSON cannot express: build it every time
            return LocalRandomizer.build(spec, self.data.schema)
        randomizer = self._built.get(key)
        if randomizer is None:
            randomizer = LocalRandomizer.build(spec, self.data.schema)
            if len(self._built) >= 1024:
                self._built.clear()
            self._built[key] = randomizer
        return randomizer

    def _plan(self, assignment: Assignment) -> _Planned | Result:
        """Validate one assignment completely, before any charge; an error ``Result`` if invalid."""
        wanted = assignment.users
        try:
            # A range is checked by its ends before it is materialized: a hostile aggregator must
            # not be able to make a client allocate 10^12 ids.
            if len(wanted) and wanted.ids is None and (wanted.start < self.first_user or wanted.stop > self.stop):
                raise LDPError(f"request {assignment.request_id} names users outside this shard's {self.first_user}..{self.stop - 1}")
            users: range | np.ndarray
            if wanted.ids is None:
                users = range(wanted.start, wanted.stop)
            else:
                users = wanted.ids
                if users.size and (users.min() < self.first_user or users.max() >= self.stop):
                    raise LDPError(f"request {assignment.request_id} names users outside this shard's {self.first_user}..{self.stop - 1}")
                if has_repeats(users):
                    raise LDPError(f"request {assignment.request_id} names a user twice")
            randomizer = self._build(assignment.randomizer)
            try:
                # A range reads a view of the records (no copy of 10^8 rows); ids gather theirs.
                rows = self._records[wanted.start - self.first_user : wanted.stop - self.first_user] if wanted.ids is None else self._records[wanted.ids - self.first_user]
                inputs = randomizer.inputs(rows, _ids(users) if randomizer.query.per_user else None)
            except (LDPError, ArithmeticError, ValueError):
                # The detailed message names a user's input value: it stays on the users' side
                # (so does the text of a numeric failure on the records: I3, nothing from values leaves).
                raise LDPError(
                    f"request {assignment.request_id}: some users' inputs are outside what {assignment.randomizer.kind!r} accepts "
                    "(the values are not reported)"
                ) from None
        except LDPError as exc:
            n = len(wanted) if wanted.ids is not None or len(wanted) <= self.count else 0
            return Result(assignment.request_id, np.zeros(0), np.ones(n, dtype=bool), error=str(exc))
        return _Planned(assignment, users, randomizer, inputs)


def _ids(users: range | np.ndarray) -> np.ndarray:
    """The users as an int64 id array (a range is materialized only where ids are needed)."""
    return np.arange(users.start, users.stop, dtype=np.int64) if isinstance(users, range) else users


def _slices(plan: _Planned | Result, part_bytes: int | None) -> list[_Planned | Result]:
    """``plan`` as consecutive slices of its users whose reports fill about ``part_bytes`` each (at
    least ``SAMPLE_CHUNK`` users); one slice for None, an error Result, or a small assignment."""
    if part_bytes is None or isinstance(plan, Result) or len(plan.users) <= SAMPLE_CHUNK:  # a slice is at least SAMPLE_CHUNK users
        return [plan]
    randomizer = plan.randomizer
    columns = getattr(randomizer.randomizer, "report_columns", None)  # rows of packed bits or (hash, y)
    row_bytes = np.dtype(randomizer.report_dtype).itemsize * max(int(columns if columns is not None else randomizer.report_width), 1)
    per = max(SAMPLE_CHUNK, int(part_bytes) // row_bytes)
    n = len(plan.users)
    if n <= per:
        return [plan]
    return [_Planned(plan.assignment, plan.users[lo : lo + per], randomizer, plan.inputs[lo : lo + per]) for lo in range(0, n, per)]


def _slice_of(assignment: Assignment, users: range | np.ndarray) -> Assignment:
    """``assignment`` restricted to ``users`` (a slice of its own users, in order)."""
    if len(users) == len(assignment.users):
        return assignment
    part = Users.range(users.start, users.stop) if isinstance(users, range) else Users(0, 0, users)
    return replace(assignment, users=part)
