"""HRS's evaluation-query release as an interactive local protocol (ldp.learners.hrs_interactive).

Population: ProductBernoulli(p) over x ∈ {0,1}^d, so f(q) = E_u[∧_{i∈q} u_i] = p^|q| exactly (the
population mean the users' reports estimate). ε = 1 (pm_rr), α = 0.3: k_thr = 10 thresholds
t_i = i/11, TO(D, α/7) bands ±2α/21.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldp.central.hrs import ThresholdOracle
from ldp.central.hrs_eval import RestrictedEvaluationOracle, learn_monotone_by_queries, query_ball
from ldp.core.concepts import ConjunctionConcept, ProductBernoulli, concept_class
from ldp.core.errors import SessionError
from ldp.core.population import PopulationSpec
from ldp.learners.hrs_interactive import (
    InteractiveHRSRun,
    per_call_users,
    priv_learn_eval_one_round,
    priv_learn_interactive,
)
from ldp.local.messages import SessionKind
from ldp.local.oracle import InProcessLROracle
from ldp.sq.local_sq_oracle import LocalSQOracle
from ldp.sq.sq_oracle import RefusedUsersError

ALPHA = 0.3
BAND = 2 * (ALPHA / 7) / 3
THRESHOLDS = tuple((i + 1) / 11 for i in range(10))
UNIT = 2**48  # ε = 1 in the ledger's units


def _population(d: int, size: int, seed: int, p: float) -> PopulationSpec:
    return PopulationSpec(
        concept_class("conjunction", d), ConjunctionConcept(((0, 1),)), size, 1.0, seed, distribution=ProductBernoulli(p)
    )


def _truth(run: InteractiveHRSRun, p: float) -> tuple[np.ndarray, np.ndarray]:
    rows = np.stack([np.frombuffer(k, dtype=np.uint8) for k in run.answers])
    return np.array(list(run.answers.values())), p ** rows.sum(axis=1)


def _gamma_implication(run: InteractiveHRSRun, p: float, d: int, k: int, tau: float) -> None:
    """Under 'every A_q within τ' (Lemma 4.3's event, at tolerance τ) the learned sets are pinned down:
    q ∈ P_i ⇒ f(q) > t_i + band − τ, and f(q) ≥ t_i + band + τ ⇒ q ∈ P_i (f is monotone decreasing, so
    every sub-query of such a q also clears the band, and the level-by-level learner reaches it)."""
    ball = query_ball(d, k)
    f = p ** ball.sum(axis=1)
    for t, pos in zip(THRESHOLDS, run.release.positives):
        member = np.array([row.tobytes() in pos for row in ball])
        assert np.all(f[member] > t + BAND - tau)
        assert np.all(member[f >= t + BAND + tau])


def _is_the_hrs_eval_learner(run: InteractiveHRSRun, d: int, k: int) -> None:
    """The final pass is exactly ``hrs_eval.learn_monotone_by_queries`` on the cached answers through TO."""
    ball = query_ball(d, k)
    to = ThresholdOracle(lambda q: np.array([run.answers[r.tobytes()] for r in q]), ALPHA / 7, len(ball))

    def weight(q: np.ndarray) -> np.ndarray:
        return np.full(q.shape[0], 1.0 / len(ball))

    for t, pos in zip(THRESHOLDS, run.release.positives):
        assert learn_monotone_by_queries(RestrictedEvaluationOracle(to.query, weight, t), d, k) == pos


async def test_interactive_protocol_asks_fewer_queries_with_the_same_guarantee() -> None:
    """d = 8, B_4 (|B_4| = 163), p = 0.2, τ = 0.05, β = 10⁻³, 3 seeds.

    * Every answer within τ of p^|q|: LocalSQOracle's n_0 makes a violation in one run have probability
      ≤ β (union bound over the ≤ 162 distinct queries), so this test's false-alarm rate is ≤ 4β = 0.4% (3 interactive runs and one one-round run).
    * Under that event the run is deterministic: level 1 (f = 0.2 ≥ t_1 + band + τ = 0.169) is positive,
      level 2 (f = 0.04 ≤ t_1 + band − τ = 0.069) is negative, so exactly 2 INTERACTIVE rounds of 8 and 28
      queries, against 162 in the one-round path, at the same n_0 per query (4.5× fewer users).
    * Each user is charged ε once (ledger), the release is the hrs_eval learner run on the answers.
    Broken variant: n0_scale = 0.01 (1% of the users) violates τ in every seed."""
    d, k, p, tau, beta = 8, 4, 0.2, 0.05, 1e-3
    for seed in range(3):
        lr = InProcessLROracle(_population(d, 1_800_000, seed, p))
        oracle = LocalSQOracle(lr, 1.0, adaptive=True)
        run = await priv_learn_interactive(oracle, d, k, ALPHA, tolerance=tau, confidence=1 - beta)
        got, truth = _truth(run, p)
        assert np.abs(got - truth).max() <= tau
        assert oracle.session_kind == SessionKind.INTERACTIVE and oracle.steps == run.rounds == 2
        assert run.queries_per_round == (8, 28) and run.ball_size == 163
        n0 = run.users_per_query[0]
        assert set(run.users_per_query) == {n0} and run.users_used == 36 * n0 == oracle.users_used
        # one query per user, once: the users' own ledgers show ε exactly, for exactly the users used
        spent = lr.ledger_spent_units()
        assert int(np.count_nonzero(spent)) == run.users_used and int(spent.max()) == UNIT
        # every distinct query asked once across the rounds (one A_q per q, HRS Fig. 1)
        asked = [repr(q.params) for step in oracle.log for q in step.queries]
        assert len(asked) == len(set(asked)) == run.distinct_queries
        _gamma_implication(run, p, d, k, tau)
        _is_the_hrs_eval_learner(run, d, k)
        assert per_call_users(run) > run.users_used
        if seed == 0:  # the one-round path: same n_0 per query, all 162 queries (its own false alarm ≤ β)
            lr1 = InProcessLROracle(_population(d, 7_800_000, seed, p))
            one = await priv_learn_eval_one_round(
                LocalSQOracle(lr1, 1.0, adaptive=False), d, k, ALPHA, tolerance=tau, confidence=1 - beta
            )
            assert one.rounds == 1 and one.distinct_queries == 162 and set(one.users_per_query) == {n0}
            assert one.users_used == 162 * n0
            _gamma_implication(one, p, d, k, tau)
            print(f"one round: {one.users_used} users, {one.learner_calls} learner calls")
        print(
            f"seed {seed}: interactive {run.rounds} rounds {run.queries_per_round}, {run.users_used} users; "
            f"per-call charging {per_call_users(run)} ({run.learner_calls} calls)"
        )
        broken = await priv_learn_interactive(
            LocalSQOracle(InProcessLROracle(_population(d, 1_800_000, seed, p)), 1.0, n0_scale=0.01),
            d, k, ALPHA, tolerance=tau, confidence=1 - beta,
        )
        got, truth = _truth(broken, p)
        assert np.abs(got - truth).max() > tau


class _ReusingOracle(LocalSQOracle):
    """Broken protocol: every round asks the SAME users again (instead of fresh ones)."""

    async def _answer(self, queries, tolerance, confidence):  # type: ignore[no-untyped-def]
        self.next_user = self.first_user
        return await super()._answer(queries, tolerance, confidence)


async def test_users_ledgers_refuse_a_protocol_that_reuses_users() -> None:
    """Broken variant: reusing round-1 users in round 2 would spend 2ε; the users' own ledgers (budget ε)
    refuse, so the run fails with RefusedUsersError instead of releasing. Deterministic."""
    d, k, p = 6, 3, 0.2
    lr = InProcessLROracle(_population(d, 400_000, 1, p))
    with pytest.raises(RefusedUsersError) as info:
        await priv_learn_interactive(_ReusingOracle(lr, 1.0), d, k, ALPHA, tolerance=0.1, confidence=0.99)
    assert info.value.refused > 0
    assert int(lr.ledger_spent_units().max()) == UNIT  # nobody was charged twice


async def test_the_protocol_needs_an_interactive_session() -> None:
    """Its second round is adaptive: a NON_INTERACTIVE session refuses it (KLNRS Def 4.4)."""
    d, k, p = 6, 3, 0.2
    oracle = LocalSQOracle(InProcessLROracle(_population(d, 400_000, 2, p)), 1.0, adaptive=False)
    with pytest.raises(SessionError):
        await priv_learn_interactive(oracle, d, k, ALPHA, tolerance=0.1, confidence=0.99)
    assert oracle.steps == 1


async def test_guarantee_mode_user_count() -> None:
    """τ = α/21 (Lemma 4.3's event Γ): the per-query n_0 the protocol asks for, and the totals of the
    table in docs/central_hrs_rest.md (d = 8, B_4, β = 0.01): a population of 10⁶ is refused before any
    report is sent, naming how many users round 1 needs."""
    from ldp.sq.bounds import users_per_query
    from ldp.sq.sq_oracle import InsufficientUsersError

    n0 = users_per_query(1.0, 1.0, ALPHA / 21, 0.01 * 8 / 162, "pm_rr", 8)
    assert n0 == users_per_query(1.0, 1.0, ALPHA / 21, 0.01, "pm_rr", 162)  # same n_0 as the one-round path
    lr = InProcessLROracle(_population(8, 1_000_000, 3, 0.2))
    with pytest.raises(InsufficientUsersError) as info:
        await priv_learn_interactive(LocalSQOracle(lr, 1.0), 8, 4, ALPHA)
    assert info.value.needed == 8 * n0 and int(np.count_nonzero(lr.ledger_spent_units())) == 0
    print(f"n_0 = {n0}; interactive (36 queries) {36 * n0}, one round (162) {162 * n0}")


async def test_input_errors() -> None:
    oracle = LocalSQOracle(InProcessLROracle(_population(4, 1000, 0, 0.5)), 1.0)
    with pytest.raises(ValueError, match="k_way"):
        await priv_learn_interactive(oracle, 4, 5, ALPHA)
    with pytest.raises(ValueError, match="tolerance"):
        await priv_learn_interactive(oracle, 4, 2, ALPHA, tolerance=0.0)
    assert oracle.steps == 0 and math.isclose(ALPHA, 0.3)


async def test_over_grpc_bit_identical_to_in_process() -> None:
    """The same program over real client processes (loopback) gives the same answers, release, per-round
    counts, transcript rounds and ledgers, bit for bit: no new wire code, only LR-oracle rounds."""
    launcher = pytest.importorskip("ldp.wire.launcher")
    from tests.wire.wire_helpers import ledger_of

    d, k, p, tau = 5, 3, 0.25, 0.3
    spec = _population(d, 40_000, 7, p)
    ref_lr = InProcessLROracle(spec)
    reference = await priv_learn_interactive(LocalSQOracle(ref_lr, 1.0), d, k, ALPHA, tolerance=tau, confidence=0.99)
    ref_ledger = await ledger_of(ref_lr)
    assert reference.rounds >= 2
    async with launcher.launch_local(spec, processes=2) as lr:
        run = await priv_learn_interactive(
            LocalSQOracle(lr, 1.0, schema=spec.schema), d, k, ALPHA, tolerance=tau, confidence=0.99
        )
        assert len(lr.transcript.rounds) == reference.rounds
        np.testing.assert_array_equal(await ledger_of(lr), ref_ledger)
    assert run.answers == reference.answers  # float equality: bit-identical reports
    assert run.release == reference.release
    assert (run.queries_per_round, run.users_used, run.learner_calls) == (
        reference.queries_per_round,
        reference.users_used,
        reference.learner_calls,
    )
