"""SQ → local: answering statistical queries with ε-local randomizers (KLNRS Lemma 4.3).

``LocalSQOracle`` answers one SQ step through an ``LROracle`` (in process or over gRPC):

- ``mode="split"`` (the paper's simulation): each query g_k ∈ [−b_k, b_k] is answered by a fresh,
  disjoint range of n_0(b_k) users who each run the ε-local randomizer once (``pm_rr``: ±b
  randomized response, default; ``discrete_laplace``: Claim 4.1 on a grid, g + exact two-sided
  geometric noise of scale ≈ 2b/ε — the float ``laplace`` is not requestable); the answer is the
  mean of the unbiased reports. n_0 = ``users_per_query(b, ε, τ, β, randomizer, queries=t)`` (explicit
  constants, ``ldp.sq.bounds``), so all t answers of the step are within τ w.p. ≥ 1 − β.
  Each user is asked once, so each spends ε at most once.
- ``mode="budget_split"``: every one of ``users`` users answers every query of the step with
  ε/t (basic composition, KLNRS Claim 2.1). It needs n ≥ n_0(b, ε/t, τ, β, t). The users' own
  ledgers decide whether a later step can still be paid for: refusals surface as
  ``RefusedUsersError`` naming how many users refused.

Sessions: the oracle opens one session on the first ``ask``: NON_INTERACTIVE when constructed
with ``adaptive=False`` (a non-adaptive SQ algorithm becomes a non-interactive local algorithm:
one round; a second ``ask`` is refused by the session and the clients), INTERACTIVE otherwise,
with one round per ``ask``.

A population too small for a step raises ``InsufficientUsersError`` saying how many users the
step needs and how many are left; nothing is sent then.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ldp.core.errors import ParameterError, require_epsilon, require_positive_finite
from ldp.core.queries import QuerySpec, make_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.schema import Schema
from ldp.local.messages import SessionKind, Users
from ldp.local.oracle import LROracle, Reports
from ldp.local.session import Request, Session
from ldp.sq.bounds import LOCAL_RANDOMIZERS, users_per_query
from ldp.sq.sq_oracle import InsufficientUsersError, RefusedUsersError, SQOracle

__all__ = ["LocalSQOracle", "users_per_query", "split_epsilon"]

_UNIT = 2.0**-48  # the ledger's fixed-point unit (ldp.core.budget.UNIT_BITS)


def split_epsilon(epsilon: float, parts: int) -> float:
    """ε/parts rounded *down* to the ledger's 2^-48 grid, so ``parts`` charges of it always fit in
    a budget of ε (the ledger rounds charges up and allowances down)."""
    eps = require_epsilon(epsilon)
    share = math.floor(eps / parts / _UNIT) * _UNIT
    while share * parts > eps:  # float division can round up by one unit
        share -= _UNIT
    return require_epsilon(share, name=f"ε/{parts}")


def _schema_of(lr: LROracle, schema: Schema | None) -> Schema:
    if schema is not None:
        return schema
    description = getattr(lr, "description", None)
    if description is None:
        raise ParameterError("LocalSQOracle needs the record schema: pass schema=... (this LR oracle does not describe its users)")
    return description.schema  # type: ignore[no-any-return]


class LocalSQOracle(SQOracle):
    """SQ_Z(g, τ) simulated by a local algorithm (KLNRS Lemma 4.3), through any ``LROracle``.

    Args:
        lr: the users, through any transport.
        epsilon: ε each user spends (split: on its one query; budget_split: per step, ε/t per query).
        schema: the record schema (default: ``lr.description.schema``).
        randomizer: "pm_rr" (±b randomized response, default) or "discrete_laplace" (Claim 4.1 on a grid).
        mode: "split" (fresh users per query) or "budget_split" (all users, ε/t each).
        adaptive: False → one NON_INTERACTIVE session (exactly one ``ask``); True → INTERACTIVE.
        first_user: the first user id this oracle may use; split mode consumes ids upwards.
        users: budget_split only: how many users (from ``first_user``) answer; default all.
        n0_scale: multiplies n_0 (1.0 keeps the guarantee; < 1 voids it — for experiments/tests).
        name: session name, for transcripts.
    """

    def __init__(
        self,
        lr: LROracle,
        epsilon: float,
        *,
        schema: Schema | None = None,
        randomizer: str = "pm_rr",
        mode: str = "split",
        adaptive: bool = True,
        first_user: int = 0,
        users: int | None = None,
        n0_scale: float = 1.0,
        name: str = "local-sq",
    ) -> None:
        super().__init__(_schema_of(lr, schema))
        if randomizer not in LOCAL_RANDOMIZERS:
            raise ParameterError(f"randomizer must be one of {LOCAL_RANDOMIZERS}, got {randomizer!r}")
        if mode not in ("split", "budget_split"):
            raise ParameterError(f"mode must be 'split' or 'budget_split', got {mode!r}")
        if not 0 <= first_user < lr.user_count:
            raise ParameterError(f"first_user must be in [0, {lr.user_count}), got {first_user}")
        self.lr = lr
        self.epsilon = require_epsilon(epsilon)
        self.randomizer = randomizer
        self.mode = mode
        self.adaptive = bool(adaptive)
        self.first_user = int(first_user)
        self.next_user = int(first_user)
        self.users = lr.user_count - self.first_user if users is None else int(users)
        if not 1 <= self.users <= lr.user_count - self.first_user:
            raise ParameterError(f"users must be in [1, {lr.user_count - self.first_user}], got {users}")
        self.n0_scale = require_positive_finite("n0_scale", n0_scale)
        self.name = name
        self.session: Session | None = None

    @property
    def session_kind(self) -> SessionKind:
        return SessionKind.INTERACTIVE if self.adaptive else SessionKind.NON_INTERACTIVE

    @property
    def users_left(self) -> int:
        """Users not yet consumed (split mode)."""
        return self.first_user + self.users - self.next_user

    def required_users(self, queries: Sequence[QuerySpec], tolerance: float, confidence: float) -> np.ndarray:
        """Users each query of a step would use (split: n_0 each; budget_split: the common n)."""
        beta = 1.0 - confidence
        t = len(queries)
        bounds = [self._bound(q) for q in queries]
        if self.mode == "split":
            need = [users_per_query(b, self.epsilon, tolerance, beta, self.randomizer, t) for b in bounds]
            return np.array([max(1, math.ceil(n * self.n0_scale)) for n in need], dtype=np.int64)
        share = split_epsilon(self.epsilon, t)
        n = max(users_per_query(b, share, tolerance, beta, self.randomizer, t) for b in bounds)
        return np.full(t, max(1, math.ceil(n * self.n0_scale)), dtype=np.int64)

    def _bound(self, query: QuerySpec) -> float:
        q = make_query(query, self.schema)
        if q.width != 1:
            raise ParameterError(f"query {query.name!r} is not scalar; an SQ oracle answers scalar queries only")
        return q.bound if q.bound > 0 else 1.0

    async def _answer(
        self, queries: tuple[QuerySpec, ...], tolerance: float, confidence: float
    ) -> tuple[np.ndarray, np.ndarray]:
        need = self.required_users(queries, tolerance, confidence)
        t = len(queries)
        if self.mode == "split":
            total = int(need.sum())
            if total > self.users_left:
                raise InsufficientUsersError(
                    f"this step of {t} queries at τ={tolerance:g}, β={1 - confidence:g}, ε={self.epsilon:g} ({self.randomizer}) "
                    f"needs {total} fresh users ({', '.join(map(str, need[:5]))}{', ...' if t > 5 else ''} per query); "
                    f"only {self.users_left} are left (users {self.next_user}..{self.first_user + self.users - 1})",
                    needed=total,
                    available=self.users_left,
                )
            starts = self.next_user + np.concatenate([[0], np.cumsum(need)[:-1]])
            groups = [Users.range(int(s), int(s + n)) for s, n in zip(starts, need)]
            self.next_user += total
            eps = self.epsilon
        else:
            if need[0] > self.users:
                raise InsufficientUsersError(
                    f"budget splitting {t} queries (ε/{t} each) at τ={tolerance:g}, β={1 - confidence:g} needs {int(need[0])} users; "
                    f"the oracle has {self.users}",
                    needed=int(need[0]),
                    available=self.users,
                )
            groups = [Users.range(self.first_user, self.first_user + self.users)] * t
            need = np.full(t, self.users, dtype=np.int64)
            eps = split_epsilon(self.epsilon, t)
        specs = [RandomizerSpec(self.randomizer, q, eps) for q in queries]
        if self.session is None:
            self.session = Session(self.lr, self.session_kind, name=self.name)
        reports = await self.session.round([Request(g, s) for g, s in zip(groups, specs)])
        _raise_on_refusals(reports, self.steps)
        answers = np.array([self._mean(r) for r in reports])
        return answers, need

    def _mean(self, reports: Reports) -> float:
        randomizer = LocalRandomizer.build(reports.randomizer, self.schema).randomizer
        return float(np.mean(randomizer.estimate(np.asarray(reports.values, dtype=np.float64))))


def _raise_on_refusals(reports: list[Reports], step: int) -> None:
    refused = sum(len(r.refused_users) for r in reports)
    missing = sum(len(r.missing_users) for r in reports)
    errored = sum(len(r.error_users) for r in reports)
    if not (refused or missing or errored):
        return
    distinct_refused = len(np.unique(np.concatenate([r.refused_users for r in reports]))) if refused else 0
    parts = []
    if refused:
        parts.append(f"{distinct_refused} user(s) refused ({refused} report(s)): their budget is spent, per their own ledgers")
    if missing:
        parts.append(f"{missing} report(s) missing (shard disconnected or missed the deadline)")
    if errored:
        errors = sorted({e for r in reports for e in r.errors})
        parts.append(f"{errored} report(s) errored: {'; '.join(errors)}")
    raise RefusedUsersError(
        f"SQ step {step}: " + "; ".join(parts) + " — the answers would not meet their guarantee",
        refused=distinct_refused,
        missing=missing,
        errored=errored,
    )
