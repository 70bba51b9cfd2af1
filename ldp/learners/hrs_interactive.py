"""HRS PrivLearn with an *evaluation-query* learner as an **interactive** local protocol (HRS Theorem 3.9
step 3(d) through KLNRS Lemma 4.3; reference spec §B6.3).

HRS's release touches the data only through its threshold oracle TO(D, α/7, b) (Figure 1), and TO only
through noisy counting queries A_q ≈ f(q) = E_u[∧_{i: q_i=1} u_i]. With a sampling-only learner those q are
drawn before any data is seen, so the local release is one non-interactive round
(:mod:`ldp.learners.hrs_local`). An evaluation-query learner (HRS Def 3.6) chooses its next queries from
the labels of its earlier ones, so each adaptive batch is a new **round** answered by **fresh** users:
"an interactive SQ algorithm becomes an interactive local algorithm with the same number of rounds"
(KLNRS Lemma 4.3), and the project's INTERACTIVE sessions carry exactly that.

The learner is :func:`ldp.central.hrs_eval.learn_monotone_by_queries`, unchanged: it learns each threshold
function f_t^D (a monotone decreasing function on B_k = {q : |q| ≤ k}, G uniform on B_k, HRS §5.1.2) level by
level, asking only the q whose one-smaller sub-queries were all positive. The protocol runs it for all
k_thr = ⌈3/α⌉ thresholds in lockstep:

    round r: run every threshold's learner on the answers cached so far; a query it asks that is not yet
    cached is recorded (and read as ⊥ for now); ask all recorded queries in ONE ``SQOracle.ask``
    (through ``LocalSQOracle(lr, ε, adaptive=True)``: one INTERACTIVE round, disjoint groups of fresh users,
    one ε-local report each); stop when a pass asks nothing new.

Each pass reaches one level further than the previous one, so the protocol takes at most k rounds (level 0,
the empty conjunction, is answered 1.0 by the server at no cost), and the final pass *is* the learner of
``hrs_eval`` run on the cached answers — the release is exactly the central evaluation-query release with
A_q taken from the users.

Accounting (HRS Fig. 1, Lemma 4.1 with distinct-query reuse): one A_q per **distinct** q, reused for every
threshold; so the queries asked are at most |B_k| − 1, whatever the learner's adaptivity, and every user
answers one query once (ε-LDP by parallel composition, charged by the users' own ledgers). Confidence: each
step of t queries is asked at confidence 1 − β·t/(|B_k| − 1), so every query gets the same n_0 as in the
one-round path that asks all of B_k at 1 − β (``users_per_query``'s union bound is over ln(2t/β_step) =
ln(2(|B_k| − 1)/β)), and a union bound over the ≤ |B_k| − 1 distinct queries gives: with probability ≥ 1 − β
every A_q is within τ of the population mean. With τ = α/21 (default) that is HRS Lemma 4.3's event Γ for
TO(D, α/7), so Claim 4.9's accuracy argument applies; a larger τ is "practical mode".

:func:`priv_learn_eval_one_round` is the non-interactive comparison: ask all of B_k \\ {0} in one
NON_INTERACTIVE round, then run the same learner. :func:`per_call_users` is the paper's per-call charging
(Theorem 3.9's b_total = 2k·b_iter counts learner calls, not distinct queries).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldp.central.hrs import ThresholdOracle
from ldp.central.hrs_eval import QueryRelease, RestrictedEvaluationOracle, learn_monotone_by_queries, query_ball
from ldp.core.errors import require_integer, require_probability
from ldp.learners.hrs_local import conjunction_spec
from ldp.sq.sq_oracle import SQOracle

__all__ = [
    "InteractiveHRSRun",
    "priv_learn_interactive",
    "priv_learn_eval_one_round",
    "per_call_users",
]


@dataclass(frozen=True)
class InteractiveHRSRun:
    """A local evaluation-query release and what it consumed.

    ``release``: the synopsis (``hrs_eval.QueryRelease``; ``noise_scale`` is the tolerance τ here).
    ``answers``: A_q per distinct query (bytes of the uint8 row → value), the empty conjunction at 1.0.
    ``rounds``: SQ steps = local rounds used. ``queries_per_round``: how many queries each asked.
    ``users_used``: users consumed (each answered one query once). ``users_per_query``: per asked query.
    ``learner_calls``: evaluation-oracle calls of the final pass, summed over thresholds (what per-call
    charging, Theorem 3.9's b_total, would pay for). ``ball_size``: |B_k|.
    """

    release: QueryRelease
    answers: dict[bytes, float]
    rounds: int
    queries_per_round: tuple[int, ...]
    users_used: int
    users_per_query: tuple[int, ...]
    learner_calls: int
    ball_size: int

    @property
    def distinct_queries(self) -> int:
        """Non-empty queries the users answered (≤ |B_k| − 1)."""
        return sum(self.queries_per_round)


def _thresholds(alpha: float) -> tuple[float, ...]:
    k_thr = math.ceil(3 / alpha)
    return tuple((i + 1) / (k_thr + 1) for i in range(k_thr))


def _run_learners(
    answers: dict[bytes, float], n_vars: int, k_way: int, alpha: float, ball: np.ndarray
) -> tuple[tuple[frozenset[bytes], ...], dict[bytes, np.ndarray], int]:
    """One pass of ``learn_monotone_by_queries`` per threshold on the cached answers.

    Returns the positive sets, the uncached queries the learners asked (read as ⊥ in this pass), and the
    number of oracle calls. TO(D, α/7): labels at t ± 2α/21, one A_q per distinct q (HRS Fig. 1).
    """
    missing: dict[bytes, np.ndarray] = {}
    calls = [0]

    def lookup(q: np.ndarray) -> np.ndarray:
        out = np.empty(q.shape[0])
        for j, row in enumerate(q):
            key = row.tobytes()
            if key in answers:
                out[j] = answers[key]
            else:  # not yet asked: record it, and keep it out of every band (⊥) for this pass
                missing.setdefault(key, row.copy())
                out[j] = np.nan
        return out

    # the budget is the cap |B_k| (data-independent); NaN compares False with both bands → ⊥
    to = ThresholdOracle(lookup, alpha / 7, len(ball))
    in_ball = {row.tobytes() for row in ball}

    def labels_at(q: np.ndarray, t: float) -> np.ndarray:
        calls[0] += q.shape[0]
        return to.query(q, t)  # HRS Fig. 1 bands; an uncached q is NaN here, so ⊥

    def weight(q: np.ndarray) -> np.ndarray:  # G = uniform over B_k (public, no user cost)
        return np.array([1.0 / len(ball) if row.tobytes() in in_ball else 0.0 for row in q])

    positives = tuple(
        learn_monotone_by_queries(RestrictedEvaluationOracle(labels_at, weight, t), n_vars, k_way)
        for t in _thresholds(alpha)
    )
    return positives, missing, calls[0]


def _check(n_vars: int, k_way: int, alpha: float, confidence: float, tolerance: float | None) -> tuple[np.ndarray, float, float]:
    d = require_integer("n_vars", n_vars, 1)
    require_integer("k_way", k_way, 1)
    if k_way > d:
        raise ValueError(f"k_way must lie in [1, n_vars={d}]; got k_way={k_way}")
    a = require_probability("alpha", alpha, high=0.5)
    require_probability("confidence", confidence)
    tau = a / 21 if tolerance is None else float(tolerance)
    if not tau > 0:
        raise ValueError(f"tolerance must be > 0; got tolerance={tolerance!r}")
    return query_ball(d, k_way), a, tau


async def priv_learn_interactive(
    oracle: SQOracle,
    n_vars: int,
    k_way: int,
    alpha: float,
    *,
    tolerance: float | None = None,
    confidence: float = 0.99,
    field: str = "x",
) -> InteractiveHRSRun:
    """HRS PrivLearn (Fig. 2, Thm 3.9 step 3(d)) with ``learn_monotone_by_queries`` as an interactive protocol.

    Parameters
    ----------
    oracle : SQOracle
        The data access; for the local model ``LocalSQOracle(lr, ε, adaptive=True)`` (in process or over gRPC).
    n_vars, k_way : int
        d, and the query class B_k (k-way monotone conjunctions, G uniform on B_k).
    alpha : float
        Accuracy α ∈ (0, 0.5]; k_thr = ⌈3/α⌉ thresholds, TO(D, α/7).
    tolerance : float, optional
        τ per answer; default α/21 (HRS Lemma 4.3's event Γ).
    confidence : float
        1 − β: all answers within τ with probability ≥ 1 − β (see the module docstring).

    Returns
    -------
    InteractiveHRSRun
        Rounds ≤ k_way; distinct queries asked ≤ |B_k| − 1; privacy that of the oracle's steps (split mode:
        every user answers one query once, ε-LDP).
    """
    ball, a, tau = _check(n_vars, k_way, alpha, confidence, tolerance)
    cap = len(ball) - 1  # non-empty queries: the most the learners can make the users answer
    beta = 1.0 - confidence
    empty = np.zeros(n_vars, dtype=np.uint8).tobytes()
    answers: dict[bytes, float] = {empty: 1.0}  # f ≡ 1 on the empty conjunction: no users
    per_round: list[int] = []
    users: list[int] = []
    for _ in range(k_way + 1):  # each pass reaches one level further; k_way + 1 passes always suffice
        positives, missing, calls = _run_learners(answers, n_vars, k_way, a, ball)
        if not missing:
            break
        rows = np.stack(list(missing.values()))
        t = rows.shape[0]
        before = len(oracle.log)
        values = await oracle.ask([conjunction_spec(r, field) for r in rows], tau, 1.0 - beta * t / cap)
        step = oracle.log[before]
        answers.update(zip(missing.keys(), np.asarray(values, dtype=np.float64).tolist()))
        per_round.append(t)
        users.extend(step.users_per_query.tolist() if step.users_per_query.size == t else [0] * t)
    else:  # pragma: no cover - the learner reaches level k_way within k_way + 1 passes
        raise RuntimeError("the evaluation-query learner did not settle within k_way + 1 rounds")
    release = QueryRelease(_thresholds(a), positives, tau, cap)
    return InteractiveHRSRun(release, answers, len(per_round), tuple(per_round), int(sum(users)), tuple(users), calls, len(ball))


async def priv_learn_eval_one_round(
    oracle: SQOracle,
    n_vars: int,
    k_way: int,
    alpha: float,
    *,
    tolerance: float | None = None,
    confidence: float = 0.99,
    field: str = "x",
) -> InteractiveHRSRun:
    """The non-interactive comparison: all of B_k \\ {0} in ONE ``ask`` (``LocalSQOracle(adaptive=False)``:
    one NON_INTERACTIVE round), then the same learner on the answers. Same per-query n_0 as
    :func:`priv_learn_interactive`; it pays for every query the learner *could* ask."""
    ball, a, tau = _check(n_vars, k_way, alpha, confidence, tolerance)
    rows = ball[1:]
    before = len(oracle.log)
    values = await oracle.ask([conjunction_spec(r, field) for r in rows], tau, confidence)
    step = oracle.log[before]
    answers = {ball[0].tobytes(): 1.0}
    answers.update(zip((r.tobytes() for r in rows), np.asarray(values, dtype=np.float64).tolist()))
    positives, missing, calls = _run_learners(answers, n_vars, k_way, a, ball)
    assert not missing  # every query of B_k is cached
    users = step.users_per_query.tolist() if step.users_per_query.size == len(rows) else [0] * len(rows)
    release = QueryRelease(_thresholds(a), positives, tau, len(rows))
    return InteractiveHRSRun(release, answers, 1, (len(rows),), int(sum(users)), tuple(users), calls, len(ball))


def per_call_users(run: InteractiveHRSRun) -> int:
    """Users if every learner call were answered by its own fresh group (HRS Theorem 3.9's per-call charging,
    b_total = 2k·b_iter, instead of Fig. 1's one A_q per distinct q): calls × the per-query n_0."""
    n0 = max(run.users_per_query) if run.users_per_query else 0
    return run.learner_calls * n0
