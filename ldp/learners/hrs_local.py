"""HRS PrivLearn as a non-interactive local workload (HRS Theorem 4.10 through KLNRS Lemma 4.3).

HRS's release touches the data only through the counting queries f(q) = E_u[∧_{i: q_i=1} u_i] of its
threshold oracle, and with a sampling-only learner (the PTF LP) those queries q_1..q_b ~ G are drawn
before any data is seen (reference spec §B6.1–2). So the whole data access is **one non-adaptive SQ
step**: each distinct non-empty q becomes the registered query ``conjunction(("x", i, 1) for i ∈ q)``
and all of them go into **one** ``SQOracle.ask`` call. Through ``LocalSQOracle(lr, ε,
adaptive=False)`` that is one NON_INTERACTIVE round in which disjoint groups of fresh users each
answer one query with one ε-local report (KLNRS Lemma 4.3; ε-LDP by parallel composition). The
thresholds, ⊥ bands, learner and counting rule are server-side post-processing (HRS Lemma 4.4).

Guarantee: with probability ≥ ``confidence`` every noisy answer satisfies |A_q − E_u g_q| ≤ τ
(``LocalSQOracle``'s n_0 with explicit constants, ``ldp.sq.bounds``). With τ = α/21 (the default)
this is the event Γ of HRS Lemma 4.3 for TO(D, α/7, ·) — relative to the population mean, which the
users' i.i.d. records estimate — so Lemma 4.5's accuracy argument goes through unchanged; with a
larger τ ("practical mode") accuracy is measured, not guaranteed.

The empty conjunction (q = 0) has f ≡ 1 on every database; it is answered 1.0 by the server and
costs no users.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ldp.central.hrs import AnswerFn, HRSRelease, ThresholdOracle, priv_learn
from ldp.core.errors import require_probability
from ldp.core.queries import QuerySpec
from ldp.core.query_specs import conjunction
from ldp.sq.sq_oracle import SQOracle

__all__ = ["conjunction_spec", "PrefetchedAnswers", "ask_conjunctions", "LocalHRSRun", "priv_learn_local"]


def conjunction_spec(query: np.ndarray, field: str = "x") -> QuerySpec:
    """The registered query for the monotone conjunction q: ``conjunction((field, i, 1) for q_i = 1)``.

    Raises ``ValueError`` for the empty conjunction (constant 1, needs no users) or a non-0/1 row.
    """
    q = np.asarray(query)
    if q.ndim != 1 or not np.all((q == 0) | (q == 1)):
        raise ValueError(f"query must be a 0/1 vector; got {q!r}")
    idx = np.flatnonzero(q)
    if idx.size == 0:
        raise ValueError("query is the empty conjunction (f ≡ 1); answer it without users")
    return conjunction(*[(field, int(i), 1) for i in idx])


@dataclass(frozen=True)
class PrefetchedAnswers:
    """Noisy answers fetched in one SQ step, served as an ``AnswerFn`` (only for the rows fetched).

    ``rows`` are the distinct queries (uint8), ``values`` their answers, ``users_per_query`` the users
    each one consumed (0 for the empty conjunction, and 0 everywhere if the oracle logs no user counts).
    """

    rows: np.ndarray
    values: np.ndarray
    users_per_query: np.ndarray
    tolerance: float
    confidence: float

    def __call__(self, queries: np.ndarray) -> np.ndarray:
        table = {r.tobytes(): float(v) for r, v in zip(self.rows, self.values)}
        q = np.asarray(queries, dtype=np.uint8)
        out = np.empty(q.shape[0])
        for j, row in enumerate(q):
            try:
                out[j] = table[row.tobytes()]
            except KeyError:
                raise ValueError(
                    f"query {row.tolist()} was not in the non-interactive step; the local release can only "
                    f"use the {len(self.rows)} queries asked up front"
                ) from None
        return out


async def ask_conjunctions(
    oracle: SQOracle, queries: np.ndarray, tolerance: float, confidence: float, field: str = "x"
) -> PrefetchedAnswers:
    """Answer every distinct row of ``queries`` with ONE ``oracle.ask`` (one non-adaptive SQ step).

    Guarantee: that of the oracle — all answers within ``tolerance`` of E_u[g_q] with probability
    ≥ ``confidence``. The empty conjunction is answered exactly (1.0) without asking.
    """
    q = np.asarray(queries, dtype=np.uint8)
    if q.ndim != 2 or q.shape[0] == 0:
        raise ValueError(f"queries must be a non-empty (b, d) 0/1 array; got shape {q.shape}")
    rows = np.unique(q, axis=0)
    values = np.ones(rows.shape[0])
    users = np.zeros(rows.shape[0], dtype=np.int64)
    nonempty = rows.any(axis=1)
    if nonempty.any():
        before = len(oracle.log)
        specs = [conjunction_spec(r, field) for r in rows[nonempty]]
        values[nonempty] = await oracle.ask(specs, tolerance, confidence)
        step = oracle.log[before]
        if step.users_per_query.size == int(nonempty.sum()):
            users[nonempty] = step.users_per_query
    return PrefetchedAnswers(rows, values, users, float(tolerance), float(confidence))


@dataclass(frozen=True)
class LocalHRSRun:
    """A local HRS release and what it consumed.

    ``answers`` is the one SQ step's answers; ``users_used`` the users it consumed (sum of
    ``answers.users_per_query``); ``steps`` the SQ steps (rounds) it took — always 1.
    """

    release: HRSRelease
    oracle: ThresholdOracle
    answers: PrefetchedAnswers
    queries: np.ndarray
    users_used: int
    steps: int


async def priv_learn_local(
    oracle: SQOracle,
    n_vars: int,
    alpha: float,
    gamma: float,
    b_iter: int,
    rng: np.random.Generator,
    sample_queries: Callable[[int, np.random.Generator], np.ndarray],
    *,
    tolerance: float | None = None,
    confidence: float = 0.99,
    degree: int = 2,
    learner: str = "lp",
    field: str = "x",
) -> LocalHRSRun:
    """HRS PrivLearn (Figure 2, Theorem 4.10) with its threshold oracle served by ``oracle``.

    Draws q_1..q_{b_iter} = ``sample_queries(b_iter, rng)`` (public), asks all distinct ones in one
    ``ask`` at ``tolerance`` (default α/21: HRS Lemma 4.3's event Γ for TO(D, α/7)) and
    ``confidence``, then runs ``priv_learn`` on the fetched answers (post-processing).
    Privacy: that of the oracle's single step (for ``LocalSQOracle``: each user sends one ε-local
    report). Use ``LocalSQOracle(lr, ε, adaptive=False)`` for a NON_INTERACTIVE session.
    """
    a = require_probability("alpha", alpha, high=0.5)
    tau = a / 21 if tolerance is None else float(tolerance)
    if not tau > 0:
        raise ValueError(f"tolerance must be > 0; got tolerance={tolerance!r}")
    q = np.asarray(sample_queries(b_iter, rng), dtype=np.uint8)
    if q.ndim != 2 or q.shape[1] != n_vars:
        raise ValueError(f"sample_queries must return a (b_iter, n_vars={n_vars}) 0/1 array; got shape {q.shape}")
    steps_before = oracle.steps
    fetched = await ask_conjunctions(oracle, q, tau, confidence, field)
    answer: AnswerFn = fetched
    release, to = priv_learn(answer, n_vars, a, gamma, b_iter, rng, lambda b, r: q, degree=degree, learner=learner)
    return LocalHRSRun(release, to, fetched, q, int(fetched.users_per_query.sum()), oracle.steps - steps_before)
