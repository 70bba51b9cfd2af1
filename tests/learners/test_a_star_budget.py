"""A* (KLNRS Thm 3.8) spends ε over its k passes: the per-pass ε it REALLY uses must compose to ε.

A planted bug — ``algorithm_a_star`` running each of its k passes of Algorithm A at ε instead of ε/k —
survived the suite, because ``test_parity.py::test_a_star_is_eps_dp_exactly`` builds A*'s distribution
from an ε/k written in the test, never from what A* passes to A.

Here ``ldp.learners.parity.algorithm_a`` is replaced by a spy that records the arguments of every pass
A* makes (and forwards them to the real A). To see A*'s whole schedule, the spy can return a genuine ⊥
for every pass (the real A with its ⊥ coin forced): A* stops at its first non-⊥ answer, so the all-⊥
path is the longest one and every other path is a prefix of it. Two checks, both exact:

* accounting (KLNRS Claim 2.1, basic composition; A's privacy from Lemma 3.2): every pass runs the
  paper's A at some ε_i ≤ 2 on the whole database, and Σ ε_i ≤ ε;
* semantics: A*'s exact output distribution, composed from the exact per-pass distributions at the
  recorded arguments (Pr[⊥] = Π_i P_i(⊥), Pr[c_r] = Σ_i P_i(c_r)·Π_{j<i} P_j(⊥)), has
  max |ln P − ln P'| ≤ ε on neighbouring databases, among them a 12-example database with one conflict.

A faithful (unforced) spied run checks the structure the composition formula assumes. The broken
variant (a copy of A* with ε per pass) must fail both checks. No statistics: nothing here can
false-alarm.
"""

from __future__ import annotations

import inspect
import itertools
from dataclasses import dataclass

import numpy as np
import pytest

from ldp.central.privacy_checks import max_log_ratio
from ldp.core.concepts import ParityConcept
from ldp.core.learner_result import LearnerResult, NoHypothesis
from ldp.core.rng import generator
from ldp.learners import parity
from ldp.learners.parity import (
    MAX_EPSILON_A,
    PackedExamples,
    a_star_distribution,
    algorithm_a_distribution,
    algorithm_a_star,
)


@dataclass(frozen=True)
class _Pass:
    epsilon: float
    keep_probability: float | None
    bottom_probability: float
    whole_database: bool
    result: LearnerResult


class _PassRecorder:
    """Replaces ``parity.algorithm_a`` (looked up by A* at call time) by a recorder around the real one.

    Every call is recorded with its bound arguments; ``force_bottom`` turns each non-⊥ answer into a
    genuine ⊥ of A (the real A rerun with its coin forced), so that A* goes through all its passes.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, examples: PackedExamples, force_bottom: bool) -> None:
        self.real = parity.algorithm_a
        self.signature = inspect.signature(self.real)
        self.examples = examples
        self.force_bottom = force_bottom
        self.calls: list[_Pass] = []
        monkeypatch.setattr(parity, "algorithm_a", self)

    def __call__(self, *args, **kwargs) -> LearnerResult:
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        a = dict(bound.arguments)
        res = self.real(*args, **kwargs)
        if self.force_bottom and not res.is_bottom:
            res = self.real(**{**a, "bottom_probability": 1.0})
        self.calls.append(
            _Pass(float(a["epsilon"]), a["keep_probability"], float(a["bottom_probability"]),
                  a["examples"] is self.examples, res)
        )
        return res


def _schedule(a_star, monkeypatch, x: np.ndarray, y: np.ndarray, eps: float, beta: float) -> list[_Pass]:
    """Every pass A* makes on database (x, y) along its longest (all-⊥) path."""
    examples = PackedExamples.from_arrays(x, y)
    recorder = _PassRecorder(monkeypatch, examples, force_bottom=True)
    out = a_star(examples, eps, beta, generator(0, "a-star-schedule"))
    monkeypatch.undo()
    assert recorder.calls, "A* made no call to Algorithm A"
    assert out.is_bottom
    return recorder.calls


def _composed(per_pass: list[np.ndarray]) -> np.ndarray:
    """First non-⊥ answer of independent passes with the given exact distributions (⊥ last)."""
    out = np.zeros_like(per_pass[0])
    all_bottom = 1.0
    for p in per_pass:
        out[:-1] += all_bottom * p[:-1]
        all_bottom *= p[-1]
    out[-1] = all_bottom
    return out


def _domain(d: int) -> list[tuple[tuple[int, ...], int]]:
    return [(tuple(int(v) for v in x), y) for x in itertools.product((0, 1), repeat=d) for y in (0, 1)]


def _databases() -> list[tuple]:
    """Every 2-example database over d = 2, and (x, 1) + m·(x, 0) for m = 3, 11: one conflict among many
    agreeing examples makes ⊥ likely, and removing it (a neighbour) makes ⊥ rare; k passes multiply that
    ratio, which is where too much ε per pass shows."""
    dbs = list(itertools.combinations_with_replacement(_domain(2), 2))
    x = (1, 0)
    dbs += [((x, 1),) + ((x, 0),) * m for m in (3, 11)]
    return dbs


class _Audit:
    """A*'s exact output distribution on any database, from the passes it really makes there."""

    def __init__(self, a_star, monkeypatch, eps: float, beta: float) -> None:
        self.a_star, self.monkeypatch, self.eps, self.beta = a_star, monkeypatch, eps, beta
        self.cache: dict = {}
        self.schedules: dict = {}

    def schedule(self, db: tuple) -> list[_Pass]:
        key = tuple(sorted(db))
        if key not in self.schedules:
            x = np.array([e[0] for e in key], dtype=np.int64)
            y = np.array([e[1] for e in key], dtype=np.int64)
            self.schedules[key] = _schedule(self.a_star, self.monkeypatch, x, y, self.eps, self.beta)
        return self.schedules[key]

    def distribution(self, db: tuple) -> np.ndarray:
        key = tuple(sorted(db))  # A (hence A*) is symmetric in the order of its examples
        if key not in self.cache:
            x = np.array([e[0] for e in key], dtype=np.int64)
            y = np.array([e[1] for e in key], dtype=np.int64)
            per_pass = [
                algorithm_a_distribution(
                    x, y, c.epsilon, keep_probability=c.keep_probability, bottom_probability=c.bottom_probability
                )
                for c in self.schedule(db)
            ]
            self.cache[key] = _composed(per_pass)
        return self.cache[key]

    def spent(self, db: tuple) -> float:
        """Basic composition (KLNRS Claim 2.1) of the passes, each the paper's A (ε_i-DP by Lemma 3.2)."""
        total = 0.0
        for c in self.schedule(db):
            assert c.whole_database, "a pass ran on something other than the database A* was given"
            assert c.keep_probability is None and c.bottom_probability == 0.5, "a pass is not the paper's A"
            assert 0.0 < c.epsilon <= MAX_EPSILON_A, f"Lemma 3.2 does not cover a pass at ε = {c.epsilon}"
            total += c.epsilon
        return total

    def worst_log_ratio(self) -> float:
        domain = _domain(2)
        worst = 0.0
        for db in _databases():
            p = self.distribution(db)
            assert p.sum() == pytest.approx(1.0, abs=1e-12)
            for i, other in itertools.product(range(len(db)), domain):
                if other != db[i]:
                    worst = max(worst, max_log_ratio(p, self.distribution(db[:i] + (other,) + db[i + 1 :])))
        return worst


def _a_star_each_pass_at_full_eps(examples, epsilon, beta, rng) -> LearnerResult:
    """``algorithm_a_star`` with the planted bug: all k passes at ε instead of ε/k."""
    k = parity.a_star_iterations(beta)
    res = None
    for _ in range(k):
        res = parity.algorithm_a(examples, epsilon, rng)
        if not res.is_bottom:
            return res
    return res


# (ε, β): k = 8, 8, 5. Measured exact loss of A*: 0.246, 0.124, 0.244; of the broken variant: 1.785, 0.942, 1.116.
_CASES = [(1.0, 0.01), (0.5, 0.01), (1.0, 0.1)]


@pytest.mark.parametrize("eps, beta", _CASES)
def test_a_star_passes_compose_to_eps(monkeypatch: pytest.MonkeyPatch, eps: float, beta: float) -> None:
    audit = _Audit(algorithm_a_star, monkeypatch, eps, beta)
    for db in _databases():
        assert audit.spent(db) <= eps * (1 + 1e-12)
    broken = _Audit(_a_star_each_pass_at_full_eps, monkeypatch, eps, beta)
    for db in _databases():
        assert broken.spent(db) > eps * 1.5, "the accounting check missed passes at full ε"


@pytest.mark.parametrize("eps, beta", _CASES)
def test_a_star_exact_privacy_from_recorded_passes(monkeypatch: pytest.MonkeyPatch, eps: float, beta: float) -> None:
    assert 0.0 < _Audit(algorithm_a_star, monkeypatch, eps, beta).worst_log_ratio() <= eps
    broken = _Audit(_a_star_each_pass_at_full_eps, monkeypatch, eps, beta).worst_log_ratio()
    assert broken > eps, f"the exact check missed passes at full ε: loss {broken} vs ε = {eps}"


def test_composition_formula_matches_the_module() -> None:
    """With a constant per-pass distribution ``_composed`` is ``a_star_distribution``."""
    x = np.array([[1, 0], [1, 1], [1, 0]])
    p = algorithm_a_distribution(x, np.array([1, 0, 0]), 0.3)
    assert _composed([p] * 6) == pytest.approx(a_star_distribution(p, 6), abs=1e-15)


def test_a_star_is_the_first_non_bottom_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unforced, seeded runs: A* returns exactly the first non-⊥ answer of its passes, makes no pass after
    it, runs its passes at the all-⊥ schedule (a prefix of it), reports ε as its budget and the per-pass ε
    it really used. Structural: each assertion holds on every seed."""
    eps, beta = 1.0, 0.1
    x = np.array([[1, 0], [0, 1], [1, 1], [1, 0]])
    y = np.array([1, 0, 1, 1])
    schedule = [c.epsilon for c in _schedule(algorithm_a_star, monkeypatch, x, y, eps, beta)]
    examples = PackedExamples.from_arrays(x, y)
    seen = {"bottom": 0, "hypothesis": 0}
    for trial in range(300):
        recorder = _PassRecorder(monkeypatch, examples, force_bottom=False)
        out = algorithm_a_star(examples, eps, beta, generator(1, "a-star-structure", trial))
        monkeypatch.undo()
        calls = recorder.calls
        assert [c.epsilon for c in calls] == schedule[: len(calls)]
        assert all(c.result.is_bottom for c in calls[:-1])
        assert out.epsilon == eps
        assert out.details["epsilon_per_run"] == pytest.approx(calls[0].epsilon, rel=1e-15)
        if out.is_bottom:
            assert len(calls) == len(schedule) and calls[-1].result.is_bottom
            assert isinstance(out.hypothesis, NoHypothesis)
            seen["bottom"] += 1
        else:
            assert not calls[-1].result.is_bottom
            assert isinstance(out.hypothesis, ParityConcept)
            assert out.hypothesis.r == calls[-1].result.hypothesis.r
            seen["hypothesis"] += 1
    assert seen["hypothesis"] > 0 and seen["bottom"] > 0  # seeded: both branches are exercised
