"""Longitudinal collection as a protocol over gRPC (issue 26): a population whose values change by
a declared process (``churn(0.2)`` over k = 4, ldp.core.value_processes), written as one column per
period (``write_periods_csv``) and hosted by two client processes on loopback (``launch_data``),
asked one session per period.

Each period's value is its own column, so each period is its own question: ``kary_rr`` at ε1 costs
ε1 per period, and ``l_grr`` (the memoized alternative) costs its ε∞ per period, since its PRRs are
keyed to one question's value (docs/longitudinal.md: no memo is shared across periods whose values
change, because no sum of per-value charges bounds what the change pattern leaks).

Checked: (a) each period's estimates lie within their 99.9 % intervals of that period's true
frequencies; (b) the users' ledgers hold exactly T·ε1 after the ``kary_rr`` periods, then ε∞ per
``l_grr`` period until the budget runs out at the predicted period, where every user is refused;
(c) the aggregator's best guess of "did user u change between t and t + 1", from its two
``kary_rr`` reports, is right (balanced over changed and unchanged users) no more often than a
2ε1-LDP binary question allows, e^{2ε1}/(1 + e^{2ε1}). Broken variants: the raw report frequencies
(no debiasing) fall outside the intervals; the same guess from unrandomized values beats the bound.
Seeded; false-alarm rates are stated at each check. No timing is asserted.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ldp.core.budget import charge_units
from ldp.core.datafile import load_data
from ldp.core.frequency_oracles import frequency_estimates, frequency_variance, support_probabilities
from ldp.core.query_specs import field_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import derive_key_bytes
from ldp.core.schema import Schema
from ldp.core.value_processes import change_probabilities, period_values, value_process, write_periods_csv
from ldp.local.messages import SessionKind, Status
from ldp.local.oracle import Reports
from ldp.local.session import Request, Session
from ldp.wire.data_clients import launch_data
from tests.waits import PROCESS_WAIT_S

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

N, T, K = 3000, 12, 4
P = (0.55, 0.25, 0.15, 0.05)
EPS_1, EPS_INF = 0.5, 1.0
# The users' budget: 12 kary_rr periods (6.0) and 8 l_grr periods (8.0) fit in 14.5; the 9th
# l_grr period (index 8) would reach 15 and is refused to every user.
BUDGET = 14.5
REFUSED_FROM = 8
Z999 = 3.2905  # two-sided 99.9 % normal quantile
KEY = derive_key_bytes("test_periods_grpc", 0)


def _outside(estimates: np.ndarray, truth: np.ndarray, variances: np.ndarray) -> int:
    """How many (period, category) cells lie outside their 99.9 % interval."""
    return int(np.count_nonzero(np.abs(estimates - truth) > Z999 * np.sqrt(variances)))


def _change_guess_accuracy(reports: np.ndarray, values: np.ndarray, p: float, q: float) -> tuple[float, float]:
    """The aggregator's Bayes guess of "changed between t and t + 1" from the two reports (r, s),
    with equal priors on changed / unchanged and the true joint law of the values given each (more
    than an aggregator knows, which only helps it): guess "changed" iff P(r, s | changed) >
    P(r, s | unchanged) under k-ary RR (keep p, each other q). Returns the balanced accuracy
    ½(TPR + TNR) over all users and transitions, and its standard error."""
    channel = np.full((K, K), q) + np.eye(K) * (p - q)  # channel[a, r] = Pr[report r | value a]
    a, b = values[:, :-1].ravel(), values[:, 1:].ravel()
    r, s = reports[:, :-1].ravel(), reports[:, 1:].ravel()
    changed = a != b
    joint1 = np.zeros((K, K))
    np.add.at(joint1, (a[changed], b[changed]), 1.0)
    joint0 = np.diag(np.bincount(a[~changed], minlength=K).astype(float))
    like1 = channel.T @ (joint1 / joint1.sum()) @ channel  # like[r, s] = Σ_ab J[a, b] K(r|a) K(s|b)
    like0 = channel.T @ (joint0 / joint0.sum()) @ channel
    guess = (like1 > like0)[r, s]
    tpr, tnr = guess[changed].mean(), (~guess[~changed]).mean()
    se = 0.5 * math.sqrt(tpr * (1 - tpr) / changed.sum() + tnr * (1 - tnr) / (~changed).sum())
    return 0.5 * float(tpr + tnr), max(se, 0.5 / math.sqrt(len(a)))  # a floor, so a perfect guess is not "within 0 se"


def _estimates(spec: RandomizerSpec, schema: Schema, rep: Reports) -> tuple[np.ndarray, np.ndarray]:
    """The period's unbiased estimates and the raw report frequencies (the broken variant)."""
    R = LocalRandomizer.build(spec, schema).randomizer
    raw = np.bincount(np.asarray(rep.values, dtype=np.int64), minlength=K) / len(rep.values)
    return frequency_estimates(R, rep.values), raw


async def test_periods_of_a_changing_population_over_grpc(tmp_path: Path) -> None:
    process = value_process("churn", P, rate=0.2)
    values = period_values(process, N, T, seed=26)
    path, schema_path = write_periods_csv(tmp_path, values, k=K)
    schema = load_data(path, schema_path).schema
    truth = np.stack([np.bincount(values[:, t], minlength=K) / N for t in range(T)])
    kary = [RandomizerSpec("kary_rr", field_query(f"v{t}"), EPS_1) for t in range(T)]
    memo = [RandomizerSpec("l_grr", field_query(f"v{t}"), EPS_INF, {"epsilon_1": EPS_1}) for t in range(T)]
    async with launch_data(path, schema_path, budget=BUDGET, key=KEY, processes=2, ready_timeout_s=PROCESS_WAIT_S) as oracle:
        kary_reps, memo_reps = [], []
        for t in range(T):  # one session per period
            (rep,) = await Session(oracle, SessionKind.NON_INTERACTIVE, name=f"period {t}").round([Request.of(range(N), kary[t])])
            kary_reps.append(rep)
        after_kary = np.asarray(await oracle.ledger_spent_units())
        for t in range(T):
            (rep,) = await Session(oracle, SessionKind.NON_INTERACTIVE, name=f"period {t}, memoized").round([Request.of(range(N), memo[t])])
            memo_reps.append(rep)
        after_memo = np.asarray(await oracle.ledger_spent_units())

    # (b) the ledgers: T·ε1 for kary_rr; ε∞ per l_grr period (each period is another question),
    # then every user refused from the predicted period on (nothing charged for a refusal)
    assert all(r.counts()["answered"] == N for r in kary_reps)
    assert np.all(after_kary == T * charge_units(EPS_1))
    for t, rep in enumerate(memo_reps):
        assert np.all(rep.status == (Status.ANSWERED if t < REFUSED_FROM else Status.REFUSED)), t
    assert np.all(after_memo == T * charge_units(EPS_1) + REFUSED_FROM * charge_units(EPS_INF))

    # (a) each period's estimates against that period's truth, 99.9 % intervals: 48 kary_rr cells and
    # 32 l_grr cells; at most one outside in each (false alarm ≈ 1.1e-3 for 48 independent cells)
    est, raw = zip(*(_estimates(kary[t], schema, kary_reps[t]) for t in range(T)))
    R = LocalRandomizer.build(kary[0], schema).randomizer
    var = np.stack([frequency_variance(R, truth[t], N) for t in range(T)])
    assert _outside(np.stack(est), truth, var) <= 1
    assert _outside(np.stack(raw), truth, var) > 1  # broken: no debiasing
    answered = range(REFUSED_FROM)
    m_est = np.stack([_estimates(memo[t], schema, memo_reps[t])[0] for t in answered])
    M = LocalRandomizer.build(memo[0], schema).randomizer
    m_var = np.stack([frequency_variance(M, truth[t], N) for t in answered])
    assert _outside(m_est, truth[:REFUSED_FROM], m_var) <= 1

    # (c) "did u change between t and t + 1?" from two kary_rr reports: a 2ε1-LDP binary question,
    # so balanced accuracy ≤ e^{2ε1}/(1 + e^{2ε1}); checked at + 4 se (false alarm < 1e-4)
    p, q = (float(x) for x in support_probabilities(R))
    reports = np.stack([np.asarray(r.values, dtype=np.int64) for r in kary_reps], axis=1)
    bound = math.exp(2 * EPS_1) / (1 + math.exp(2 * EPS_1))
    accuracy, se = _change_guess_accuracy(reports, values, p, q)
    assert accuracy <= bound + 4 * se, (accuracy, se, bound)
    # broken: the same guess from unrandomized reports (the values themselves) beats the bound
    leaked, leaked_se = _change_guess_accuracy(values, values, 1.0, 0.0)
    assert leaked > bound + 4 * leaked_se
    # the population did change as declared (≈ 0.2·(1 − Σp²) = 0.122 per period)
    fraction = (values[:, 1:] != values[:, :-1]).mean()
    assert abs(fraction - change_probabilities(process, T)[0]) < 4 * math.sqrt(0.122 * 0.878 / (N * (T - 1)))
    print(f"\nkary_rr outside {_outside(np.stack(est), truth, var)}/48, raw {_outside(np.stack(raw), truth, var)}/48, "
          f"l_grr outside {_outside(m_est, truth[:REFUSED_FROM], m_var)}/32, change guess {accuracy:.4f} ± {se:.4f} "
          f"(bound {bound:.4f}), leaked {leaked:.4f}, change fraction {fraction:.4f}")
