"""The success rule of issue 28 (``ldp.learners.success_rule``): a size passes when the exact
95 % Clopper–Pearson lower bound on its success probability is ≥ 1 − β. Tested on a simulated
learner of known success p, against the old "≥ 19 of 20" rule (the broken variant)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldp.core.audit import clopper_pearson
from ldp.core.errors import ParameterError
from ldp.learners.success_rule import min_successes, old_rule, pass_probability, passes, success_lower_bound, trials_needed


def _simulated_pass_rate(p: float, t: int, rule: object, replicates: int, seed: int) -> float:
    """A learner of true success p run t times, ``replicates`` times over (seeded): the fraction
    of replicates the rule passes."""
    rng = np.random.default_rng(seed)
    successes = (rng.random((replicates, t)) < p).sum(axis=1)
    verdicts = {int(k): bool(rule(int(k), t)) for k in np.unique(successes)}  # type: ignore[operator]
    return float(np.mean([verdicts[int(k)] for k in successes]))


def test_the_rule_is_the_one_clopper_pearson_lower_bound() -> None:
    for k, t in [(59, 59), (58, 59), (190, 200), (0, 10)]:
        assert success_lower_bound(k, t) == clopper_pearson(k, t, alpha=0.05)[0]
    assert success_lower_bound(59, 59) == pytest.approx(0.05 ** (1 / 59))
    assert passes(59, 59, 0.05) and not passes(58, 59, 0.05) and not passes(58, 58, 0.05)
    assert min_successes(58, 0.05) is None and min_successes(59, 0.05) == 59 and min_successes(200, 0.05) == 196
    for bad in [(3, 2), (-1, 5), (1, 0)]:
        with pytest.raises(ParameterError):
            success_lower_bound(*bad)


def test_trials_needed() -> None:
    """With no failures the bound is 0.05^{1/t}: t ≥ ln 0.05/ln 0.95 = 58.4, so 59 trials; a
    learner of success 0.99 needs 153 to pass with probability ≥ 0.9."""
    assert trials_needed(0.05) == 59 == math.ceil(math.log(0.05) / math.log(0.95))
    assert trials_needed(0.1) == 29
    t = trials_needed(0.05, true_success=0.99, power=0.9)
    assert pass_probability(0.99, t) >= 0.9 > pass_probability(0.99, t - 10)
    with pytest.raises(ParameterError):
        trials_needed(0.05, true_success=0.9)


@pytest.mark.parametrize("t", [20, 59, 100, 200])
def test_a_learner_of_success_090_passes_at_most_5_percent_and_the_old_rule_39_percent(t: int) -> None:
    """p = 0.90 < 1 − β = 0.95. Exact pass probability ≤ 0.05 at every t (Clopper–Pearson is
    exact), and a seeded simulation of 20,000 replicates agrees within 0.01 (its standard error
    is ≤ 0.0016: a false alarm w.p. < 10^-9). The old rule passes the same learner with
    probability Pr[Bin(20, 0.9) ≥ 19] = 0.392 (exact) — the simulated rate is within 0.02."""
    p, beta = 0.90, 0.05
    exact = pass_probability(p, t, beta)
    assert exact <= 0.05
    simulated = _simulated_pass_rate(p, t, lambda k, n: passes(k, n, beta), 20_000, seed=t)
    assert simulated <= 0.05 and abs(simulated - exact) < 0.01
    if t == 20:
        old = pass_probability(p, 20, rule=old_rule)
        assert round(old, 3) == 0.392
        assert abs(_simulated_pass_rate(p, 20, old_rule, 20_000, seed=1) - old) < 0.02
        assert old > 0.05  # the broken variant fails the requirement the new rule meets


def test_the_worst_case_just_below_the_requirement_is_still_at_most_5_percent() -> None:
    """The false-pass rate is largest just below 1 − β; it stays ≤ 5 % there (exact tails)."""
    for p in (0.94, 0.945, 0.949):
        assert max(pass_probability(p, t) for t in (59, 100, 200, 400, 1000)) <= 0.05
    assert pass_probability(0.99, 400) > 0.99  # and a good learner does pass with enough trials
