"""The one-round MASKED-PARITY learners at their sufficient statistic
(``ldp.learners.masked_parity_law``) have the protocol's output law.

Each statistical check compares 400 protocol runs (in process, real records, coins and reports)
with 400 law runs on the same targets, by a two-sample z statistic at |z| ≤ 4.42 (a false alarm
of 10^-5 per check, about 10^-4 over this file), and fails on a broken law written here:
bit groups with twice their mean (E[g_j] = r_j/d), a coin for a, and the shared learner's wrong
block drawn at the target's rate instead of as the hypergeometric share of its design groups."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import numpy as np
import pytest

from ldp.core.concepts import MaskedParityConcept, concept_class
from ldp.core.population import PopulationSpec
from ldp.core.queries import user_parity_groups
from ldp.core.rng import generator
from ldp.learners import masked_parity_law as law_module
from ldp.learners.masked_parity import learn_masked_parity_lni, lni_users_for
from ldp.learners.masked_parity_law import (
    block_bounds,
    block_in_design_groups,
    learn_masked_parity_lni_from_law,
    learn_masked_parity_lni_shared_from_law,
)
from ldp.learners.masked_parity_shared import learn_masked_parity_lni_shared, shared_users_for
from ldp.local.oracle import InProcessLROracle

D, EPSILON, TRIALS = 4, 1.0, 400
USERS = {"LNI": 5_000, "LNI-shared": 900}  # success ≈ 0.9 and ≈ 0.8: the shared learner often reads a wrong block
Z = 4.42  # two-sided 10^-5


def _target(t: int) -> MaskedParityConcept:
    return concept_class("masked_parity", D).random_target(generator(28, "law-target", t))  # type: ignore[return-value]


async def _protocol(learner: Any, users: int) -> list[tuple[MaskedParityConcept, Any]]:
    out = []
    for t in range(TRIALS):
        target = _target(t)
        lr = InProcessLROracle(PopulationSpec(concept_class("masked_parity", D), target, size=users, budget=EPSILON, seed=10_000 + t), shards=1)
        try:
            out.append((target, await learner(lr, D, EPSILON, generator(28, "coin", t))))
        finally:
            await lr.close()
    return out


def _law(learner: Any, users: int) -> list[tuple[MaskedParityConcept, Any]]:
    return [(_target(t), learner(_target(t), D, EPSILON, users, generator(28, "coin", t), generator(28, "law", t))) for t in range(TRIALS)]


@pytest.fixture(scope="module")
def protocol_runs() -> dict[str, list[tuple[MaskedParityConcept, Any]]]:
    return {
        "LNI": asyncio.run(_protocol(learn_masked_parity_lni, USERS["LNI"])),
        "LNI-shared": asyncio.run(_protocol(learn_masked_parity_lni_shared, USERS["LNI-shared"])),
    }


def _z(x: np.ndarray, y: np.ndarray) -> float:
    """Two-sample z of the means (Welch's standard error)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return float((x.mean() - y.mean()) / math.sqrt(x.var(ddof=1) / len(x) + y.var(ddof=1) / len(y)))


def _success(runs: list[tuple[MaskedParityConcept, Any]]) -> np.ndarray:
    return np.array([res.hypothesis == target for target, res in runs], dtype=np.float64)


def _lni_statistics(runs: list[tuple[MaskedParityConcept, Any]]) -> dict[str, np.ndarray]:
    bits = np.array([res.details["bit_estimates"] for _, res in runs])
    r = np.array([target.r for target, _ in runs])
    return {"bit r=1": bits[r == 1], "bit r=0": bits[r == 0], "success": _success(runs)}


def _shared_statistics(runs: list[tuple[MaskedParityConcept, Any]]) -> dict[str, np.ndarray]:
    signed = np.array([np.asarray(res.details["correlations"]) * (1 - 2 * np.asarray(target.r)) for target, res in runs])
    wrong = [res for target, res in runs if tuple(res.hypothesis.r) != target.r and res.details["block_size"]]
    return {
        "correlation": signed.ravel(),
        "wrong block rate": np.array([res.details["block_ones"] / res.details["block_size"] for res in wrong]),
        "success": _success(runs),
    }


def test_blocks_are_user_parity_groups_and_their_design_groups_are_counted_exactly() -> None:
    for count, candidates in ((900, 16), (17, 16), (5, 16), (1_000_003, 2**10)):
        bounds = user_parity_groups(count, candidates)
        for c in (0, 1, candidates // 2, candidates - 1):
            lo, hi = block_bounds(count, candidates, c)
            assert (lo, hi) == (bounds[c], bounds[c + 1])
            if hi - lo < 10_000:
                assert block_in_design_groups(lo, hi, 8).tolist() == np.bincount(np.arange(lo, hi) % 8, minlength=8).tolist()


@pytest.mark.parametrize(
    ("learner", "users_for"), [(learn_masked_parity_lni_from_law, lni_users_for), (learn_masked_parity_lni_shared_from_law, shared_users_for)]
)
def test_exact_on_every_target_at_large_epsilon(learner: Any, users_for: Any) -> None:
    """ε = 20 (RR flips 2·10^-9 of the reports) with the users the plan needs for 0.99999: every
    one of the 2^{d+1} targets at d = 3 is learned exactly, a read from its group or block."""
    d, eps = 3, 20.0
    users = users_for(d, eps, 0.99999)
    for r in range(2**d):
        for a in (0, 1):
            target = MaskedParityConcept(tuple((r >> j) & 1 for j in range(d)), a)
            res = learner(target, d, eps, users, generator(1, r, a), generator(2, r, a))
            assert res.hypothesis == target and res.details["simulation"] == "law", (r, a, res.details)
            assert res.details["a_from"] in ("group", "block")


def test_the_fair_learners_law_is_the_protocols_and_a_broken_law_is_not(protocol_runs, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Bit estimates (for r_j = 1 and r_j = 0) and success: law ≈ protocol. Broken: bit groups
    with twice their mean (their estimates move by 1/(2d) = 0.125, z ≈ 30); a coin for a (success
    halves)."""
    protocol = _lni_statistics(protocol_runs["LNI"])
    law = _lni_statistics(_law(learn_masked_parity_lni_from_law, USERS["LNI"]))
    for name in protocol:
        assert abs(_z(law[name], protocol[name])) <= Z, name
    real_rate = law_module._rate

    def doubled(p: float, q: float, mean: Any) -> np.ndarray:
        mean = np.asarray(mean, dtype=np.float64)
        return real_rate(p, q, np.where(mean < 0.2, 2 * mean, mean))  # the bit groups only (their means are ≤ 1/(2d))

    monkeypatch.setattr(law_module, "_rate", doubled)
    broken = _lni_statistics(_law(learn_masked_parity_lni_from_law, USERS["LNI"]))
    assert abs(_z(broken["bit r=1"], protocol["bit r=1"])) > Z
    monkeypatch.undo()
    coin = [(t, res) for t, res in _law(learn_masked_parity_lni_from_law, USERS["LNI"])]
    flipped = np.array([res.hypothesis.r == t.r and np.random.default_rng(i).integers(0, 2) == t.a for i, (t, res) in enumerate(coin)], dtype=np.float64)
    assert abs(_z(flipped, protocol["success"])) > Z


class _TargetRateForWrongBlocks:
    """A broken law: a wrong estimate's block drawn as Binomial(its size, ¼) — the rate of the
    target's block with a = 0 — instead of the hypergeometric share of its design groups' 1-reports."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def binomial(self, n: Any, p: Any) -> Any:
        return self.rng.binomial(n, p)

    def hypergeometric(self, good: int, bad: int, sample: int) -> int:
        return int(self.rng.binomial(sample, 0.25))


def test_the_shared_learners_law_is_the_protocols_and_a_broken_law_is_not(protocol_runs) -> None:  # type: ignore[no-untyped-def]
    """Signed correlations X_j·s_j, the 1-rate of a wrong estimate's block (the hypergeometric
    branch, ≈ 20 % of the trials here) and success: law ≈ protocol. Broken: the wrong block at
    the target's rate (its 1-rate moves from ≈ ½ to ≈ 0.34)."""
    protocol = _shared_statistics(protocol_runs["LNI-shared"])
    law = _shared_statistics(_law(learn_masked_parity_lni_shared_from_law, USERS["LNI-shared"]))
    assert len(protocol["wrong block rate"]) >= 30 and len(law["wrong block rate"]) >= 30  # the branch is exercised
    for name in protocol:
        assert abs(_z(law[name], protocol[name])) <= Z, name
    broken = _shared_statistics(
        [
            (
                _target(t),
                learn_masked_parity_lni_shared_from_law(_target(t), D, EPSILON, USERS["LNI-shared"], generator(28, "coin", t), _TargetRateForWrongBlocks(t)),
            )
            for t in range(TRIALS)
        ]  # type: ignore[arg-type]
    )
    assert abs(_z(broken["wrong block rate"], protocol["wrong block rate"])) > Z


def test_a_target_of_the_wrong_class_is_refused() -> None:
    from ldp.core.errors import ParameterError

    with pytest.raises(ParameterError, match="MASKED-PARITY target with d = 4"):
        learn_masked_parity_lni_from_law(MaskedParityConcept((0, 1, 1), 0), 4, 1.0, 1_000, generator(1), generator(2))
