"""Local → SQ (KLNRS Lemmas 4.4, 4.5): SQBackedLROracle reproduces local algorithms within β.

The distance tests compare R = 20 000 runs on users with R runs through the simulator over an
exact oracle that answers every query off by exactly τ (the worst valid oracle). The test passes
when TV ≤ β + allowance, allowance = √(K/R) + √(ln(10^3)/R) (``noise_allowance``): if the true
distance is ≤ β, this fails with probability ≤ 10^-3 (McDiarmid). Broken simulators (no e^ε
envelope; no conditioning on the user's history) must exceed the same threshold.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldp.core.concepts import concept_class
from ldp.core.errors import SessionError
from ldp.core.population import PopulationSpec
from ldp.core.queries import make_query
from ldp.core.query_specs import field_query, label_query
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import SessionKind, Status
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session
from ldp.simulations.sq_local import Config, measure
from ldp.sq.exact import ExactSQOracle
from ldp.sq.local_sq_oracle import LocalSQOracle
from ldp.sq.simulation import RatioQuery, SQBackedLROracle, ratio_query, report_distance_bound, simulation_tolerance
from tests.sq.sq_helpers import conjunction_population


@pytest.mark.parametrize("name", ["rr_histogram", "adaptive_refinement"])
async def test_simulated_output_distribution_within_beta(name: str) -> None:
    cfg = Config(groups=20_000, beta=0.02, seed=1)
    row, _ = await measure(cfg, name)
    threshold = cfg.beta + row["allowance"]
    assert row["distance"] <= threshold, row
    assert row["distance_bound_per_run"] <= cfg.beta + 1e-12
    assert row["broken_no_envelope"] > threshold, row  # rejection sampling without e^ε
    if row["interactive"]:
        assert row["broken_no_history"] > threshold, row  # Lemma 4.4 misapplied to interaction
        assert row["sq_steps"] == 2  # one SQ step per round
    else:
        assert row["sq_steps"] == 1  # a non-interactive algorithm → a non-adaptive SQ algorithm


def test_ratio_query_is_valid_and_registered() -> None:
    pop = conjunction_population(10)
    spec = ratio_query([(RandomizerSpec("binary_rr", field_query("x", 0), 0.5), 1.0),
                        (RandomizerSpec("pm_rr", label_query(), 0.7), -1.0)])
    q = make_query(spec.to_json(), pop.schema)  # by name, as a client would
    assert isinstance(q, RatioQuery) and q.epsilon == pytest.approx(1.2)
    oracle = ExactSQOracle(pop)
    values = q.evaluate(oracle.records)
    assert np.all(np.abs(values) <= q.bound + 1e-12) and q.bound < 1
    assert q.evaluate(q.reference[None, :])[0] == pytest.approx(0.0)
    # p̃ from the exact answer is the exact E[r(z)]
    expected = float(np.dot(oracle.probabilities, np.exp(q.log_r(oracle.records))))
    assert q.probability(oracle.expectation(spec)) == pytest.approx(expected)


async def test_ratio_queries_served_by_a_local_oracle() -> None:
    """Any SQ oracle can serve the simulation's queries: here a LocalSQOracle (±b RR, b = e^ε/(e^ε+1))."""
    pop = conjunction_population(400_000, seed=3)
    spec = ratio_query([(RandomizerSpec("binary_rr", field_query("x", 0), 1.0), 1.0)])
    local = LocalSQOracle(InProcessLROracle(pop, shards=2), 1.0)
    answer = (await local.ask([spec], 0.05, 0.99))[0]
    assert abs(answer - ExactSQOracle(pop).expectation(spec)) <= 0.05


async def test_simulator_enforces_sessions_and_budgets() -> None:
    pop = conjunction_population(10, budget=1.0)
    sim = SQBackedLROracle(ExactSQOracle(pop), users=50, budget=1.0, tolerance=1e-4)
    session = Session(sim, SessionKind.NON_INTERACTIVE)
    (reports,) = await session.round([Request.of(range(50), RandomizerSpec("binary_rr", label_query(), 0.75))])
    assert len(reports.answered_users) == 50 and set(np.unique(reports.values)) <= {0, 1}
    with pytest.raises(SessionError):
        await session.round([Request.of(range(50), RandomizerSpec("binary_rr", label_query(), 0.25))])
    interactive = Session(sim, SessionKind.INTERACTIVE)
    (over,) = await interactive.round([Request.of(range(50), RandomizerSpec("binary_rr", label_query(), 0.5))])
    assert len(over.refused_users) == 50  # 0.75 + 0.5 > 1: the simulated ledgers refuse
    (laplace,) = await interactive.round([Request.of(range(50), RandomizerSpec("laplace", label_query(), 0.1))])
    assert np.all(laplace.status == Status.ERROR) and "not auditable" in laplace.errors[0]  # float Laplace: refused at build
    assert sim.distance_bound == pytest.approx(50 * report_distance_bound(1e-4, 0.75) + (1 - 0.99))


def test_simulation_tolerance_inverts_the_bound() -> None:
    for interactive in (False, True):
        tau = simulation_tolerance(0.05, 30, 1.0, interactive)
        per = report_distance_bound(tau, 1.0, 1.0 if interactive else 0.0)
        assert 30 * per <= 0.05 and 30 * report_distance_bound(tau * 1.01, 1.0, 1.0 if interactive else 0.0) > 0.05 * 0.99


async def test_theorem_4_8_the_interactive_learner_runs_on_sq_answers_alone() -> None:
    """KLNRS Theorem 4.8 (LI = SQ), the local → SQ direction on a real learner: the two-round
    MASKED-PARITY learner of §5.1, written against LROracle, runs on SQBackedLROracle (Lemma 4.5:
    every report simulated by rejection sampling from SQ answers, no user touched) and learns
    every target exactly, with one SQ step per local round — also when every SQ answer is off by
    a valid τ = 10^-3. Deterministic given the seeds (exact errors, no false alarms).
    Broken variant: rejection sampling without the e^ε envelope (Lemma 4.4's acceptance
    probability p/(q·e^ε) taken as p/q) distorts the reports and the learner fails."""
    from ldp.core.learner_result import true_error
    from ldp.core.rng import generator
    from ldp.learners.masked_parity import learn_masked_parity_interactive

    cc = concept_class("masked_parity", 4)

    async def errors(envelope: bool, tolerance: float, shift: float) -> list[float]:
        out = []
        for t in range(8):
            spec = PopulationSpec(cc, cc.random_target(generator(7, "theorem-4.8", t)), 6000, budget=1.0, seed=t)
            lr = SQBackedLROracle(ExactSQOracle(spec, shift=shift, seed=t), users=6000, budget=1.0, tolerance=tolerance, seed=t, envelope=envelope)
            result = await learn_masked_parity_interactive(lr, 4, 1.0)
            assert lr.sq_steps == result.rounds == 2
            out.append(true_error(spec.referee(), result.hypothesis))
        return out

    assert await errors(True, 1e-6, 0.0) == [0.0] * 8
    assert await errors(True, 1e-3, 1.0) == [0.0] * 8
    assert min(await errors(False, 1e-6, 0.0)) >= 0.25
