"""The separations of KLNRS, measured: LNI ⊊ LI (MASKED-PARITY, §5) and local ⊊ central (PARITY, §3.2).

For every learner and dimension d, the number of users needed to reach error ≤ α with success
probability ≥ 1 − β, by the success rule of ``ldp.learners.success_rule`` (issue 28): a size
passes when its successes k of T seeded trials give a one-sided ``confidence`` (95 %)
Clopper–Pearson lower bound ≥ 1 − β, so a learner whose true success is below 1 − β passes with
probability ≤ 5 % (the old "≥ 19 of 20" passed a learner of success 0.90 w.p. 0.39). With fewer
trials than that needs (59 at β = 0.05), a size passes only when every trial succeeds, and the
table says so. Trials at a size stop early once the rule is out of reach.

The search starts at the learner's plan (its predicted users for success 1 − β) when it has one
and steps ×1.5, else doubles n from ``start_users``, until the verdict changes; then geometric
bisection narrows [last failing n, first passing n] until its ratio is at most ``resolution``.
MASKED-PARITY learners at d ≤ ``multi_seed_max_d`` are searched once per seed (``seed_count``
seeds: targets, populations and coins all differ) and the table gives the median and the range.
A learner whose plan exceeds ``simulate_users_max`` users at some d is not simulated there: the
table gives its plan, marked "planned" (the plans are checked against simulation at the d where
both exist, and in the learners' own tests).

A one-round learner whose plan exceeds ``protocol_users_max`` users at d (LNI and LNI-shared from
d = 16: 3.9·10^9 reports through the protocol at d = 16 alone) is simulated at its sufficient
statistic: each trial draws its groups' counts of 1-reports from their exact law
(``ldp.learners.masked_parity_law``: the protocol's output law, the same decision functions, no
record, charge or report) instead of running the protocol, at any size up to 2^40 users; the
table marks those cells "(law)". ``evaluate_cell`` (``benchmarks/separation_cell.py``) runs any
cell through the protocol, to check one.

Learners (ldp.learners):
  MASKED-PARITY  LI-corr     the sharpest interactive learner: round 1 reads all of r through one
                             correlation query per user, round 2 is §5.1's a-query
                             (``masked_parity_correlation``; Θ(d² log d/ε²) users)
                 LI          the paper's 2-round learner, faithful to KLNRS §5.1 (Θ(d³ log d/ε²))
                 LNI         the fair one-round learner: d bit queries + the a-query of every one of
                             the 2^d candidates (``lni_plan``)
                 LNI-shared  one round, ONE query per user serving both the r part (correlation,
                             b = 1 half) and the a part (its candidate's a-query, b = 0 half)
                             (``masked_parity_shared``)
                 LNI-b       (optional) every user randomizes its whole record: a generic release
  PARITY         central-A*     Algorithm A* (Theorem 3.8), trusted curator
                 central-occam  exponential mechanism with WHT scores (Theorem 3.7), d ≤ 20
                 local-parity   correlation queries over all 2^d candidate parities (one local round)

The MASKED-PARITY table sets the learners beside three lower bounds on the users of ANY
non-interactive protocol (``ldp.learners.theorem51``: the corrected Theorem 5.1, its binary-KL
and its TV refinement) and says from which d a bound exceeds the interactive learner's users:
from there the separation is proven, not only shown by the learners we built.

Local learners run against an ``LROracle`` made by ``oracle_factory(population_spec)`` (an async
context manager; in-process by default, gRPC client processes under ``ldp-sim run separation``).
The curator learners read records directly (``generate_records``: the same records the users of
that population hold).

Trials of one size may run side by side (``Config.parallel_trials``, for trials of at most
``parallel_users`` users) when the factory serves several populations at once: ``run`` raises a
``GrpcOracleFactory``'s ``lanes`` to ``parallel_trials``, one cluster of client processes each.
A run is a pure function of (learner, d, n, trial, seed) and ``_evaluate`` reads the errors in
trial order, so early stopping, k/T, the intervals and every output are those of one trial at a
time, whatever the transport, the process count or the overlap (tests/learners/test_separation.py).

Writes ``result.json``, ``users_needed.csv`` (every search), ``summary.csv`` (per learner and d),
``separation.csv`` (the headline), ``curves.csv``, ``separation.png`` and ``table.md`` into ``out``
(``results/separation`` for the full sweep, ``results/demo/separation`` for the demo). Tables:
``ldp.simulations.separation_table``; figure: ``ldp.simulations.separation_plot``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ldp.core.audit import clopper_pearson
from ldp.core.concepts import ConceptClass, concept_class
from ldp.core.errors import ParameterError, require_epsilon, require_integer, require_probability
from ldp.core.learner_result import LearnerResult, true_error
from ldp.core.population import MAX_USERS, PopulationSpec, generate_records
from ldp.core.rng import generator
from ldp.experiment import ExperimentArgs, ExperimentResult, Simulation
from ldp.learners.masked_parity import (
    learn_masked_parity_interactive,
    learn_masked_parity_lni,
    learn_masked_parity_lni_record,
    li_lemma43_users,
    lni_lemma43_users,
    lni_users_for,
)
from ldp.learners.masked_parity_correlation import correlation_hoeffding_users, correlation_users_for, learn_masked_parity_correlation, li_users_for
from ldp.learners.masked_parity_law import learn_masked_parity_lni_from_law, learn_masked_parity_lni_shared_from_law
from ldp.learners.masked_parity_shared import learn_masked_parity_lni_shared, shared_users_for
from ldp.learners.occam import learn_occam, occam_sample_size
from ldp.learners.parity import PackedExamples, a_star_sample_size, algorithm_a_star
from ldp.learners.parity_local import learn_parity_local, parity_local_lemma43_users
from ldp.learners.success_rule import min_successes, success_lower_bound, trials_needed
from ldp.local.oracle import InProcessLROracle, LROracle
from ldp.simulations.reporting import save_figure, write_json
from ldp.simulations.separation_plot import MODEL_SHORT, plot
from ldp.simulations.separation_table import growth, markdown_table, proven_from, separation_ratios, summarize, write_tables

__all__ = ["Config", "quick_config", "run", "evaluate_cell", "main", "in_process_oracle", "LEARNERS", "EXPERIMENT", "growth", "plot", "write_outputs", "render"]

OracleFactory = Callable[[PopulationSpec], AbstractAsyncContextManager[LROracle]]


@contextlib.asynccontextmanager
async def in_process_oracle(spec: PopulationSpec):  # type: ignore[no-untyped-def]
    """The default transport: every user in this process (one shard)."""
    oracle = InProcessLROracle(spec, shards=1)
    try:
        yield oracle
    finally:
        await oracle.close()


@dataclass(frozen=True)
class Config:
    seed: int = 0
    epsilon: float = 1.0  # every user's budget ε (the curator learners are ε-DP)
    alpha: float = 0.1  # target error
    beta: float = 0.05  # allowed failure rate: "users needed" is for success ≥ 1 − β
    confidence: float = 0.95  # the success rule's one-sided Clopper–Pearson confidence
    trials: int = 100  # per size; the rule needs ≥ 59 at β = 0.05 (100: pass at ≥ 99/100)
    seed_count: int = 3  # seeds seed, seed + 1, … for MASKED-PARITY at d ≤ multi_seed_max_d
    multi_seed_max_d: int = 16
    simulate_users_max: int = 6_000_000  # a learner whose plan exceeds this at d is planned there, not simulated
    # A learner with a twin at its sufficient statistic (LNI, LNI-shared) whose plan exceeds this
    # at d draws its counts from their exact law there (ldp.learners.masked_parity_law), up to
    # MAX_USERS users, instead of running the protocol: the table marks those cells "(law)".
    protocol_users_max: int = 2_000_000
    cap: int = 2**26  # most users per trial (67,108,864: 2 client processes hold them in ≈ 8 GB)
    start_users: int = 16
    resolution: float = 1.25  # the search stops when (first passing n)/(last failing n) ≤ this
    masked_d: tuple[int, ...] = (8, 12, 16, 20, 24)
    central_parity_d: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512)
    occam_d: tuple[int, ...] = (4, 8, 12, 16)
    local_parity_d: tuple[int, ...] = (4, 8, 12)
    curve_d: int = 12
    curve_users: tuple[int, ...] = (10_000, 30_000, 100_000, 300_000, 1_000_000)
    curve_trials: int = 20
    full_at_cap: bool = True  # a learner failing at the cap: rerun all trials there for its success rate
    learners: tuple[str, ...] = ("LI-corr", "LI", "LNI", "LNI-shared", "central-A*", "central-occam", "local-parity")
    # Central baselines from the other seeds (BNS): POINT_d with pure ε-DP (exponential mechanism)
    # against (ε, δ)-DP (A_dist), measured by ldp.simulations.pure_vs_approximate's search. () skips them.
    point_bits: tuple[int, ...] = (8, 32, 128, 512)
    point_trials: int = 100
    out: str | None = "results/separation"
    # How the trials run (never what they give: a run is a pure function of (learner, d, n, trial, seed)):
    # up to ``parallel_trials`` trials of one size at once, each on its own population, when the
    # oracle factory can serve that many (``GrpcOracleFactory.lanes``: one cluster each) and the
    # trial has at most ``parallel_users`` users (larger ones run one at a time, on all the client
    # processes, so that one population's records are in memory at a time).
    parallel_trials: int = 2
    parallel_users: int = 1 << 21

    def __post_init__(self) -> None:
        """Every setting checked where it enters (``-o key=value`` lands here): one clear error."""
        require_epsilon(self.epsilon)
        require_probability("alpha", self.alpha)
        require_probability("beta", self.beta)
        require_probability("confidence", self.confidence)
        require_integer("separation: seed", self.seed, 0, 2**64 - 1, "[0, 2^64)")
        for name, most in INTEGER_LIMITS.items():  # an upper bound too: trials=10^20 would run forever
            require_integer(f"separation: {name}", getattr(self, name), 1, most, f"[1, {most:,}]")
        if isinstance(self.resolution, bool) or not isinstance(self.resolution, (int, float)) or not 1.0 < self.resolution <= 2.0:
            raise ParameterError(f"separation: resolution must be a ratio in (1, 2], got {self.resolution!r}")
        if self.start_users > self.cap:
            raise ParameterError(f"separation: start_users ({self.start_users}) exceeds cap ({self.cap})")
        for name in ("masked_d", "central_parity_d", "occam_d", "local_parity_d", "curve_users", "point_bits"):
            bad = [v for v in getattr(self, name) if isinstance(v, bool) or not isinstance(v, int) or v < 1]
            if bad:
                raise ParameterError(f"separation: {name} must hold integers ≥ 1, got {bad[0]!r}")
        bad_masked = [d for d in self.masked_d if not 2 <= d <= 62]
        if bad_masked:
            raise ParameterError(f"separation: masked_d must hold integers in [2, 62], got {bad_masked[0]!r}")
        if self.curve_d < 2:
            raise ParameterError(f"separation: curve_d must be ≥ 2, got {self.curve_d!r}")
        if not self.learners:
            raise ParameterError(f"separation: learners must name at least one of {list(LEARNERS)}")
        unknown = [name for name in self.learners if name not in LEARNERS]
        if unknown:
            raise ParameterError(f"unknown learner(s) {unknown}; learners: {list(LEARNERS)}")

    @property
    def seeds(self) -> tuple[int, ...]:
        """The seeds of the MASKED-PARITY searches at d ≤ ``multi_seed_max_d``."""
        return tuple((self.seed + k) % 2**64 for k in range(self.seed_count))  # seeds are 64-bit (ldp.core.rng)


# The most each integer setting may be (`-o KEY=VALUE` lands in Config): far above any run this
# sweep makes (100 trials, a 2^26 cap), and below what would make one run take years or ask for
# more users than a population may have (ldp.core.population.MAX_USERS = 2^40).
INTEGER_LIMITS: dict[str, int] = {
    "trials": 10_000,
    "seed_count": 1_000,
    "multi_seed_max_d": 62,
    "simulate_users_max": 2**40,
    "protocol_users_max": 2**40,
    "cap": 2**40,
    "start_users": 2**40,
    "curve_trials": 10_000,
    "point_trials": 1_000_000,
    "parallel_trials": 1_024,
    "parallel_users": 2**40,
}


def quick_config(seed: int = 0, out: str | None = "results/demo/separation") -> Config:
    """`make demo`: the full sweep's rule (95 % Clopper–Pearson lower bound ≥ 0.95) with 60 trials
    (the fewest that can pass, 60/60), one seed, MASKED-PARITY d ≤ 12, a 10^6 cap, and learners
    planned above 150,000 users (at d = 12 all but the correlation learner). It shows the four
    learners and the bounds side by side, but not the proof: the bounds exceed the interactive
    learner's users from d = 12–16 on (the full sweep)."""
    return Config(
        seed=seed,
        trials=60,
        seed_count=1,
        simulate_users_max=150_000,
        cap=1_000_000,
        masked_d=(4, 8, 12),
        central_parity_d=(8, 16, 32, 64),
        occam_d=(4, 8),
        local_parity_d=(4, 8),
        curve_d=8,
        curve_users=(5_000, 10_000, 20_000, 50_000, 100_000),
        curve_trials=10,
        full_at_cap=False,
        point_bits=(8, 32, 128),
        point_trials=50,
        out=out,
    )


QUICK_CAPTION = (
    "Quick run (d ≤ 12, one seed, 60 trials, cap 10^6, plans above 150,000 users): the interactive learners against the one-round ones "
    "and the lower bounds for every one-round protocol. It cannot show the exponential gap: up to d = 12 a one-round learner costs "
    "a few times the interactive one, and the fits cannot tell 2^d from d^4. `make separation` runs d = 8 … 24 with 3 seeds "
    "(docs/learners.md has its table and time)."
)


# --- learners: (family, model, d range, runner, bound, plan) ---


@dataclass(frozen=True)
class LearnerSpec:
    name: str
    family: str  # concept class
    model: str
    dims: Callable[[Config], tuple[int, ...]]
    bound: Callable[[Config, int], tuple[int | None, str]]
    local: bool  # through the LR oracle (else: a curator reading records)
    plan: Callable[[Config, int], int] | None = None  # predicted users for success 1 − β (the search starts there)
    # The learner at its sufficient statistic: (target, d, ε, users, learner rng, law rng) → result
    # with the protocol's output law (ldp.learners.masked_parity_law); used past protocol_users_max.
    law: Callable[..., LearnerResult] | None = None


def _li_bound(c: Config, d: int) -> tuple[int | None, str]:
    return li_lemma43_users(d, c.epsilon, c.beta), "Lemma 4.3"


def _corr_bound(c: Config, d: int) -> tuple[int | None, str]:
    return sum(correlation_hoeffding_users(d, c.epsilon, c.beta)), "Hoeffding"


def _lni_bound(c: Config, d: int) -> tuple[int | None, str]:
    return lni_lemma43_users(d, c.epsilon, c.beta), "Lemma 4.3 (2^d a-queries)"


def a_star_beta(c: Config) -> float:
    """The confidence A* is run with: β/10. A* repeats Algorithm A k = ⌈log2(2/β)⌉ times and each
    run returns ⊥ w.p. about ½ whatever n is, so it fails w.p. ≈ β/2 at EVERY size: run with β
    itself it would pass the success rule (≥ 99 of 100 at β = 0.05) only by luck, and its users
    needed would zigzag with d. At β/10 its failure floor is ≈ 2^{−9}."""
    return c.beta / 10


def _astar_bound(c: Config, d: int) -> tuple[int | None, str]:
    return a_star_sample_size(d, c.epsilon, c.alpha, a_star_beta(c)), "Thm 3.8 at β/10"


def _occam_bound(c: Config, d: int) -> tuple[int | None, str]:
    return occam_sample_size(2**d, c.epsilon, c.alpha, c.beta), "Thm 3.7"


def _local_parity_bound(c: Config, d: int) -> tuple[int | None, str]:
    return parity_local_lemma43_users(d, c.epsilon, c.beta), "Lemma 4.3 (2^d queries)"


def _masked(c: Config) -> tuple[int, ...]:
    return c.masked_d


LEARNERS: dict[str, LearnerSpec] = {
    "LI-corr": LearnerSpec("LI-corr", "masked_parity", "local interactive", _masked, _corr_bound, True,
                           lambda c, d: correlation_users_for(d, c.epsilon, 1 - c.beta)),
    "LI": LearnerSpec("LI", "masked_parity", "local interactive", _masked, _li_bound, True, lambda c, d: li_users_for(d, c.epsilon, 1 - c.beta)),
    "LNI": LearnerSpec("LNI", "masked_parity", "local non-interactive", _masked, _lni_bound, True, lambda c, d: lni_users_for(d, c.epsilon, 1 - c.beta),
                       learn_masked_parity_lni_from_law),
    "LNI-shared": LearnerSpec("LNI-shared", "masked_parity", "local non-interactive", _masked, lambda c, d: (None, "—"), True,
                              lambda c, d: shared_users_for(d, c.epsilon, 1 - c.beta), learn_masked_parity_lni_shared_from_law),
    "LNI-b": LearnerSpec("LNI-b", "masked_parity", "local non-interactive", _masked, lambda c, d: (None, "—"), True),
    "central-A*": LearnerSpec("central-A*", "parity", "central", lambda c: c.central_parity_d, _astar_bound, False),
    "central-occam": LearnerSpec("central-occam", "parity", "central", lambda c: c.occam_d, _occam_bound, False),
    "local-parity": LearnerSpec("local-parity", "parity", "local non-interactive", lambda c: c.local_parity_d, _local_parity_bound, True),
}


def success_rule(config: Config) -> dict[str, Any]:
    """The rule the searches use: the fewest successes of ``trials`` that pass
    (``ldp.learners.success_rule.min_successes``), or all of them when the trials are too few for
    the Clopper–Pearson rule (then ``clopper_pearson`` is False and the table says so)."""
    alpha = 1 - config.confidence
    k = min_successes(config.trials, config.beta, alpha)
    return {
        "clopper_pearson": k is not None,
        "min_successes": k if k is not None else config.trials,
        "trials_needed": trials_needed(config.beta, alpha),
        "lower_bound": success_lower_bound(k if k is not None else config.trials, config.trials, alpha),
    }


class _Trials:
    """Seeded trials of one seed (``config.seed``): targets depend on (seed, family, d, trial) only, so the learners of one
    family face the same targets; each local learner's run at n users has users of its own.
    A run is a pure function of (learner, d, n, trial), so it is computed once and remembered
    (the search and the curves ask for some runs twice)."""

    def __init__(self, config: Config, oracle_factory: OracleFactory, *, simulation: str = "sweep") -> None:
        self.config = config
        self.oracle_factory = oracle_factory
        # "sweep": by the plan (``by_law``); "protocol" or "law": every cell so (evaluate_cell)
        self.simulation = simulation
        self._by_law: dict[tuple[str, int], bool] = {}
        self._features: dict[tuple[int, int], np.ndarray] = {}
        self._runs: dict[tuple[str, int, int, int], tuple[float, LearnerResult]] = {}
        self.rule = success_rule(config)

    def by_law(self, learner: str, d: int) -> bool:
        """Whether (learner, d) draws its counts from their exact law: it has a twin at its
        sufficient statistic and its plan exceeds ``protocol_users_max``."""
        key = (learner, d)
        if key not in self._by_law:  # asked once per trial: the plan's search is not repeated
            if LEARNERS[learner].law is None or self.simulation == "protocol":
                self._by_law[key] = False
            else:
                self._by_law[key] = self.simulation == "law" or (_plan(self.config, learner, d) or 0) > self.config.protocol_users_max
        return self._by_law[key]

    def share_runs(self, other: _Trials) -> None:
        """Use ``other``'s remembered runs (same seed: a run does not depend on the number of trials)."""
        if other.config.seed != self.config.seed:
            raise ParameterError(f"separation: runs of seed {other.config.seed} cannot serve seed {self.config.seed}")
        self._runs = other._runs

    def width(self, learner: str, n: int) -> int:
        """How many trials of (learner, n) may run at once: ``parallel_trials`` for a local learner
        with at most ``parallel_users`` users, if the factory serves that many populations at once
        (``lanes``; a factory without it serves one), else 1. Curator learners run in this process."""
        c = self.config
        if not LEARNERS[learner].local or n > c.parallel_users:
            return 1
        lanes = getattr(self.oracle_factory, "lanes", 1)
        return max(1, min(c.parallel_trials, lanes if isinstance(lanes, int) else 1))

    def population(self, family: str, d: int, trial: int, size: int, *users: object) -> PopulationSpec:
        """Trial ``trial``'s target; ``users`` labels whose data it is. A local learner's run gets
        users of its own (labelled by learner and n): the users' side keys ledgers by the data,
        so two runs on the same users would share one budget, as they would in a deployment."""
        cc: ConceptClass = concept_class(family, d)
        target = cc.random_target(generator(self.config.seed, "separation-target", family, d, trial))
        pop_seed = int(generator(self.config.seed, "separation-population", family, d, trial, *users).integers(0, 2**62))
        return PopulationSpec(cc, target, size=size, budget=self.config.epsilon, seed=pop_seed)

    def _central_records(self, d: int, trial: int, n: int) -> np.ndarray:
        """Records of users 0..n−1 (cached and extended: records are a function of (seed, user))."""
        key = (d, trial)
        have = self._features.get(key)
        if have is None or len(have) < n:
            spec = self.population("parity", d, trial, max(n, self.config.cap))
            first = 0 if have is None else len(have)
            size = max(n, 2 * first)
            size = min(size, spec.size)
            parts = [have] if have is not None else []
            for lo in range(first, size, 1 << 15):
                parts.append(generate_records(spec, lo, min(1 << 15, size - lo)).astype(np.uint8))
            self._features[key] = np.concatenate(parts) if len(parts) > 1 else parts[0]
        return self._features[key][:n]

    async def run(self, learner: str, d: int, n: int, trial: int) -> tuple[float, LearnerResult]:
        key = (learner, d, n, trial)
        if key not in self._runs:
            self._runs[key] = await self._run(learner, d, n, trial)
        return self._runs[key]

    async def _run(self, learner: str, d: int, n: int, trial: int) -> tuple[float, LearnerResult]:
        c = self.config
        spec_def = LEARNERS[learner]
        rng = generator(c.seed, "separation-learner", learner, d, n, trial)
        spec = self.population(spec_def.family, d, trial, n, learner, n)
        referee = spec.referee()
        if self.by_law(learner, d):  # the protocol's output law at its sufficient statistic: no records, no reports
            law = generator(c.seed, "separation-law", learner, d, n, trial)
            res = spec_def.law(spec.target, d, c.epsilon, n, rng, law)  # type: ignore[misc]
        elif learner == "central-A*":
            res = algorithm_a_star(PackedExamples.from_records(self._central_records(d, trial, n)), c.epsilon, a_star_beta(c), rng)
        elif learner == "central-occam":
            rec = self._central_records(d, trial, n)
            res = learn_occam("parity", d, rec[:, :d], rec[:, d], c.epsilon, rng)
        else:
            async with self.oracle_factory(spec) as lr:
                if learner == "LI-corr":
                    res = await learn_masked_parity_correlation(lr, d, c.epsilon)
                elif learner == "LI":
                    res = await learn_masked_parity_interactive(lr, d, c.epsilon)
                elif learner == "LNI-shared":
                    res = await learn_masked_parity_lni_shared(lr, d, c.epsilon, rng)
                elif learner == "LNI":
                    res = await learn_masked_parity_lni(lr, d, c.epsilon, rng)
                elif learner == "LNI-b":
                    res = await learn_masked_parity_lni_record(lr, d, c.epsilon, rng)
                elif learner == "local-parity":
                    res = await learn_parity_local(lr, d, c.epsilon, rng)
                else:
                    raise KeyError(learner)
        return true_error(referee, res.hypothesis), res


async def _evaluate(trials: _Trials, learner: str, d: int, n: int, early_stop: bool = True) -> dict[str, Any]:
    """k/T at n users, judged by ``success_rule``. Trials are read in order 0, 1, …, and with
    ``early_stop`` the size is abandoned right after the failure that puts the rule out of reach.
    Up to ``trials.width`` of them run at once; their errors are still read in trial order and the
    rule stops at the same trial, so the result is the sequential one, bit for bit (a run is a
    pure function of (learner, d, n, trial, seed); runs past the stop are computed, remembered,
    not counted)."""
    c = trials.config
    allowed = c.trials - trials.rule["min_successes"]
    errors: list[float] = []
    failures = 0
    width = trials.width(learner, n)
    t = 0
    stopped = False
    while t < c.trials and not stopped:
        batch = range(t, min(t + width, c.trials))
        if len(batch) == 1:
            done = [await trials.run(learner, d, n, t)]
        else:
            try:
                async with asyncio.TaskGroup() as group:  # one failure cancels the others
                    tasks = [group.create_task(trials.run(learner, d, n, k)) for k in batch]
            except BaseExceptionGroup as failed:  # the first failure, as one trial at a time would raise it
                raise failed.exceptions[0] from None
            done = [task.result() for task in tasks]
        for err, _ in done:
            errors.append(err)
            failures += err > c.alpha
            if early_stop and failures > allowed:
                stopped = True
                break
        t += len(batch)
    successes = len(errors) - failures
    return {
        "users": n,
        "trials": len(errors),
        "successes": successes,
        "success_rate": successes / len(errors),
        "ci": clopper_pearson(successes, len(errors)),  # 95 %: two one-sided 97.5 % bounds
        "stopped_early": len(errors) < c.trials,
        "ok": failures <= allowed and len(errors) == c.trials,
        "mean_error": float(np.mean(errors)),
    }


async def evaluate_cell(config: Config, oracle_factory: OracleFactory, learner: str, d: int, users: int, *, law: bool = False) -> dict[str, Any]:
    """All ``config.trials`` seeded trials of ``learner`` at d and ``users``, without early stopping:
    k/T, its 95 % Clopper–Pearson interval and the sweep's verdict (``ok``), exactly as the sweep
    evaluates a size (the same targets, populations and success rule). Through the protocol, also
    where the sweep draws the cell from its law or plans it (``benchmarks/separation_cell.py``
    checks such a cell); ``law=True`` draws it from its law, as the sweep does past
    ``protocol_users_max`` (learners with a twin at their sufficient statistic only)."""
    if learner not in LEARNERS:
        raise ParameterError(f"unknown learner {learner!r}; learners: {list(LEARNERS)}")
    if law and LEARNERS[learner].law is None:
        raise ParameterError(f"{learner} has no twin at its sufficient statistic; those that do: {[k for k, v in LEARNERS.items() if v.law]}")
    return await _evaluate(_Trials(config, oracle_factory, simulation="law" if law else "protocol"), learner, d, users, early_stop=False)


async def users_needed(trials: _Trials, learner: str, d: int, plan: int | None = None) -> dict[str, Any]:
    """Smallest n that passes the success rule: from ``plan`` (×1.5 steps) or from ``start_users``
    (doubling) until the verdict changes, then geometric bisection of [last failing n, first
    passing n] until the ratio of its ends is ≤ ``resolution``. The search stops at ``cap``
    users, or at MAX_USERS for a cell drawn from its law (no process holds its users)."""
    by_law = trials.by_law(learner, d)
    c = replace(trials.config, cap=MAX_USERS) if by_law else trials.config
    evaluations: list[dict[str, Any]] = []

    async def evaluate(n: int, early_stop: bool = True) -> bool:
        ev = await _evaluate(trials, learner, d, n) if early_stop else await _evaluate(trials, learner, d, n, early_stop=False)
        evaluations.append(ev)
        return bool(ev["ok"])

    least = max(c.start_users, 4 * d + 8)  # every learner's smallest plan (K + 1 ≤ 2d + 3 users) fits
    if plan is not None:
        found, last_fail = await _bracket_from_plan(evaluate, min(max(int(plan), least), c.cap), least, c.cap)
    else:
        found, last_fail = await _bracket_by_doubling(evaluate, max(c.start_users, 2 * (d + 1)), c.cap)
    if found is not None and last_fail is not None:
        last_fail, found = await _bisect(evaluate, last_fail, found, c.resolution)
    if found is None and c.full_at_cap and evaluations[-1]["trials"] < c.trials:
        await evaluate(evaluations[-1]["users"], early_stop=False)
    record = _search_record(c, learner, d, plan, found, last_fail, evaluations)
    record["simulation"] = "law" if by_law else "protocol" if LEARNERS[learner].local else "curator"
    return record


async def _bracket_from_plan(evaluate: Callable[[int], Awaitable[bool]], n: int, least: int, cap: int, step: float = 1.5) -> tuple[int | None, int | None]:
    """From the plan ``n``: down by ``step`` while it passes, or up while it fails (within
    [least, cap]); (first passing n, last failing n), either None if never seen."""
    found: int | None = None
    last_fail: int | None = None
    if await evaluate(n):
        found = n
        while n > least:  # down until a size fails
            n = max(least, int(round(n / step)))
            if not await evaluate(n):
                return found, n
            found = n
        return found, last_fail
    last_fail = n
    while n < cap:
        n = min(cap, int(round(n * step)))
        if await evaluate(n):
            return n, last_fail
        last_fail = n
    return found, last_fail


async def _bracket_by_doubling(evaluate: Callable[[int], Awaitable[bool]], n: int, cap: int) -> tuple[int | None, int | None]:
    """No plan: double from ``n`` until a size passes or ``cap`` fails; (first passing, last failing)."""
    last_fail: int | None = None
    while True:
        if await evaluate(n):
            return n, last_fail
        last_fail = n
        if n >= cap:
            return None, last_fail
        n = min(2 * n, cap)


async def _bisect(evaluate: Callable[[int], Awaitable[bool]], lo: int, hi: int, resolution: float) -> tuple[int, int]:
    """Geometric bisection of [lo failing, hi passing] until hi/lo ≤ ``resolution``."""
    while hi > lo * resolution:
        mid = int(round(math.sqrt(lo * hi)))
        if mid <= lo or mid >= hi:
            break
        lo, hi = (lo, mid) if await evaluate(mid) else (mid, hi)
    return lo, hi


def _search_record(c: Config, learner: str, d: int, plan: int | None, found: int | None, last_fail: int | None, evaluations: list[dict[str, Any]]) -> dict[str, Any]:
    """One search's row of result.json: the verdict, its evaluation at the answer and just below."""
    final = [e for e in evaluations if e["users"] == (found if found is not None else last_fail)][-1]
    below = [e for e in evaluations if found is not None and e["users"] == last_fail]
    bound, source = LEARNERS[learner].bound(c, d)
    return {
        "learner": learner,
        "family": LEARNERS[learner].family,
        "model": LEARNERS[learner].model,
        "d": d,
        "seed": c.seed,
        "users_needed": found,
        "last_failing": last_fail,
        "bracket_ratio": (found / last_fail) if (found is not None and last_fail) else None,
        "status": "ok" if found is not None else "> cap",
        "success_rate": final["success_rate"],
        "successes": final["successes"],
        "trials": final["trials"],
        "ci": final["ci"],
        "below": {k: below[-1][k] for k in ("users", "successes", "trials", "ci", "stopped_early")} if below else None,
        "mean_error": final["mean_error"],
        "planned": plan,
        "bound": bound,
        "bound_source": source,
        "measured_over_bound": (found / bound) if (found is not None and bound) else None,
        "evaluations": evaluations,
    }


def _plan(config: Config, learner: str, d: int) -> int | None:
    """The learner's predicted users for success 1 − β, or None (no plan, or a plan that fails)."""
    plan = LEARNERS[learner].plan
    if plan is None:
        return None
    try:
        return int(plan(config, d))
    except ParameterError:
        return None


async def run(config: Config, oracle_factory: OracleFactory = in_process_oracle, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the whole experiment; returns the JSON-able result (and writes files if ``config.out``)."""
    say = log or (lambda s: None)
    started = time.perf_counter()
    # A factory of clusters (GrpcOracleFactory) serves ``lanes`` populations at once: let it serve
    # as many trials as may run side by side (its extra clusters start only when needed).
    lanes = getattr(oracle_factory, "lanes", None)
    if isinstance(lanes, int) and lanes < config.parallel_trials:
        oracle_factory.lanes = config.parallel_trials  # type: ignore[attr-defined]
    rows: list[dict[str, Any]] = []
    planned: list[dict[str, Any]] = []
    curves: list[dict[str, Any]] = []
    try:
        await _measure(config, oracle_factory, rows, planned, curves, say)
    except BaseException as exc:  # a lost client, a timeout, Ctrl-C: keep what was measured
        if config.out and (rows or curves):
            path = Path(config.out) / "partial.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            stopped = f"{type(exc).__name__}: {exc}".splitlines()[0]
            partial = {"config": asdict(config), "rows": rows, "curves": curves, "stopped_by": stopped, "seconds": round(time.perf_counter() - started, 2)}
            path.write_text(json.dumps(partial, indent=1, default=str))
            say(f"the run stopped ({stopped}); the {len(rows)} finished row(s) and {len(curves)} curve point(s) are in {path}")
        raise
    result = {
        "config": asdict(config),
        "seeds": list(config.seeds),
        "rule": success_rule(config),
        "rows": rows,
        "planned": planned,
        "curves": curves,
        "seconds": round(time.perf_counter() - started, 2),
    }
    _derive(result)
    if config.out:
        result["files"] = [str(p) for p in write_outputs(result, Path(config.out))]
    return result


def _derive(result: dict[str, Any]) -> None:
    """The summary, the ratios and bounds, the growth fits and table.md from rows and plans."""
    c = result["config"]
    result["summary"] = summarize(result["rows"], result["planned"])
    result["growth"] = {name: growth([e for e in result["summary"] if e["learner"] == name]) for name in dict.fromkeys(e["learner"] for e in result["summary"])}
    result["ratios"] = separation_ratios(result["summary"], c["epsilon"], c["beta"])
    result["proven_from"] = proven_from(result["ratios"])
    result["table"] = markdown_table(result)


async def _measure(
    config: Config,
    oracle_factory: OracleFactory,
    rows: list[dict[str, Any]],
    planned: list[dict[str, Any]],
    curves: list[dict[str, Any]],
    say: Callable[[str], None],
) -> None:
    """The searches, plans and curves of ``run``, appended as each is finished (so a failure keeps them)."""
    per_seed = {s: _Trials(replace(config, seed=s), oracle_factory) for s in dict.fromkeys((config.seed, *config.seeds))}
    for learner in config.learners:
        spec = LEARNERS[learner]
        for d in spec.dims(config):
            plan = _plan(config, learner, d)
            if plan is not None and plan > config.simulate_users_max and not per_seed[config.seed].by_law(learner, d):
                bound, source = spec.bound(config, d)
                planned.append({"learner": learner, "family": spec.family, "model": spec.model, "d": d, "planned": plan, "bound": bound, "bound_source": source})
                say(f"{learner:>14} d={d:<4} planned {plan:>13,} users (not simulated: plan > simulate_users_max)")
                continue
            seeds = config.seeds if spec.family == "masked_parity" and d <= config.multi_seed_max_d else (config.seed,)
            for s in seeds:
                t0 = time.perf_counter()
                row = await users_needed(per_seed[s], learner, d, plan)
                row["seconds"] = round(time.perf_counter() - t0, 2)
                rows.append(row)
                needed = f"{row['users_needed']:,}" if row["users_needed"] is not None else f"> {config.cap:,}"
                low, high = row["ci"]
                say(f"{learner:>14} d={d:<4} seed {s}: users needed {needed:>13}  (success {row['successes']}/{row['trials']}, 95 % CI {low:.3f}–{high:.3f}; {row['seconds']} s)")
    curve_learners = [name for name in ("LI-corr", "LI", "LNI", "LNI-shared", "LNI-b") if name in config.learners]
    curve_trials = _Trials(replace(config, trials=config.curve_trials), oracle_factory)
    curve_trials.share_runs(per_seed[config.seed])  # a run does not depend on the number of trials: share them
    for learner in curve_learners:
        for n in config.curve_users:
            ev = await _evaluate(curve_trials, learner, config.curve_d, n, early_stop=False)
            curves.append({"learner": learner, "d": config.curve_d, **ev})
        say(f"{learner:>14} curve at d={config.curve_d} done")
    if config.point_bits:
        point_rows = await asyncio.to_thread(central_point_baselines, config)
        rows += point_rows
        for row in point_rows:
            say(f"{row['learner']:>14} d={row['d']:<4} users needed {row['users_needed'] or '> max'!s:>10}")


def central_point_baselines(config: Config) -> list[dict[str, Any]]:
    """POINT_d learned by a trusted curator, pure against approximate DP (BNS §3.1; KLNRS Thm 3.7),
    as separation rows: users needed (the smallest n that passes this sweep's success rule,
    ``success_rule`` at ``point_trials`` seeded trials on BNS's two-point hard distribution: the
    Clopper–Pearson rule of the local rows, or all trials when they are too few for it) against d = bits."""
    from ldp.simulations import pure_vs_approximate as pva

    rule = success_rule(replace(config, trials=config.point_trials))
    pconfig = pva.Config(
        point_bits=config.point_bits, threshold_bits=(), alpha=config.alpha, beta=config.beta, epsilon=config.epsilon,
        trials=config.point_trials, include_lmm=False, seed=config.seed, point_min_successes=rule["min_successes"],
    )
    started = time.perf_counter()
    result = pva.run(pconfig)
    rows = []
    for r in result.rows:
        if r["learner"] not in ("pure", "A_dist"):  # the two baselines of this table; pva runs others too
            continue
        pure = r["privacy"] == "pure"
        needed = r["m90"]
        rows.append(
            {
                "learner": "central-EM" if pure else "central-Adist",
                "family": "point",
                "model": "central" if pure else f"central (ε, δ = {pconfig.delta:g})",
                "d": r["bits"],
                "users_needed": needed,
                "status": "ok" if needed is not None else "> cap",
                "success_rate": None,
                "successes": None,
                "trials": r["trials"],
                "mean_error": None,
                "bound": r["theory"],
                "bound_source": "BNS (pure, Thm 3.7)" if pure else "BNS Lemma 3.2 (A_dist)",
                "measured_over_bound": needed / r["theory"] if needed and r["theory"] else None,
                "seconds": round((time.perf_counter() - started) / max(len(result.rows), 1), 2),
            }
        )
    return rows


# --- outputs ---


def write_outputs(result: dict[str, Any], out: Path) -> list[Path]:
    """result.json, the CSV files (``separation_table.write_tables``), table.md and separation.png in ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [write_json(out / "result.json", {k: v for k, v in result.items() if k != "files"}), *write_tables(result, out), out / "table.md"]
    paths[-1].write_text(result["table"])
    save_figure(plot(result), out / "separation.png")
    return [*paths, out / "separation.png"]


SUMMARY_COLUMNS = ("class", "learner", "model", "d", "users", "source", "÷ bound")
SUMMARY_CAPTION = (
    "users: needed for error ≤ α, by the success rule (95 % Clopper–Pearson lower bound ≥ 1 − β); the median [min–max] over seeds "
    "where several ran; planned: the learner's analytic plan, not simulated. ÷ bound: users / (Lemma 4.3 local, Hoeffding LI-corr, "
    "Thm 3.8 A*, Thm 3.7 Occam, BNS for POINT)"
)


def summary_rows(result: dict[str, Any]) -> tuple[tuple[str, ...], ...]:
    """One compact row per (learner, d) under ``SUMMARY_COLUMNS`` (the full table is
    ``result["table"]``); the class is named on its first row only."""
    cap = result["config"]["cap"]
    rows = []
    previous = None
    for e in result["summary"]:
        family = e["family"].upper().replace("_", "-")
        if e["source"] == "planned":
            users = f"≈ {e['users_needed']:,}"
        elif e["users_needed"] is None:
            users = f"> {e.get('failed_at') or cap:,}"
        elif len(e["seeds"]) > 1:
            users = f"{e['users_needed']:,} [{e['users_min']:,}–{e['users_max']:,}]"
        else:
            users = f"{e['users_needed']:,}"
        source = "planned" if e["source"] == "planned" else f"{len(e['seeds'])} seed(s)" if e["seeds"] else "simulated"
        source += ", law" if e.get("simulation") == "law" else ""
        ratio = f"{e['users_needed'] / e['bound']:.3f}" if e["users_needed"] and e.get("bound") else "—"
        rows.append(("" if family == previous else family, e["learner"], MODEL_SHORT.get(e["model"], e["model"]), str(e["d"]), users, source, ratio))
        previous = family
    return tuple(rows)


def render(out: str | Path) -> dict[str, Any]:
    """Rebuild table.md, the CSVs and the plot of a finished run from its result.json (after a
    change to the reporting, without rerunning the trials)."""
    out = Path(out)
    try:
        result = json.loads((out / "result.json").read_text())
    except (OSError, ValueError) as exc:
        raise ParameterError(f"cannot read {out / 'result.json'}: {exc}") from None
    _derive(result)
    result["files"] = [str(p) for p in write_outputs(result, out)]
    return result


async def run_with_progress(config: Config, oracle_factory: OracleFactory, args: ExperimentArgs) -> dict[str, Any]:
    """``run`` with ``ldp-sim``'s progress bar: one step per search or plan and per error curve."""
    total = 0
    for name in config.learners:
        spec = LEARNERS[name]
        for d in spec.dims(config):
            multi = spec.family == "masked_parity" and d <= config.multi_seed_max_d
            total += config.seed_count if multi else 1
    total += sum(1 for name in ("LI-corr", "LI", "LNI", "LNI-shared", "LNI-b") if name in config.learners and config.curve_users)
    done = 0

    def log(line: str) -> None:
        nonlocal done
        done += 1
        args.log(line)
        args.progress(min(done, total), total)

    args.progress(0, total)
    return await run(config, oracle_factory, log=log)


def report(result: dict[str, Any], config: Config) -> ExperimentResult:
    """The summary table, with the full table's caption and the separation's first proven d as notes."""
    head = result["table"].split("\n\n", 1)[0]
    proven = result.get("proven_from") or {}
    notes = head + "\n" + SUMMARY_CAPTION
    if proven:
        notes += "\nSeparation proven (a lower bound for every one-round protocol > the interactive learner's users) from " + ", ".join(
            f"{name}: d = {d}" if d is not None else f"{name}: not in this sweep" for name, d in proven.items()
        )
    return ExperimentResult(
        f"Users needed: LNI ⊊ LI (MASKED-PARITY) and local ⊊ central (PARITY), {result['seconds']} s",
        SUMMARY_COLUMNS,
        summary_rows(result),
        files=tuple(Path(f) for f in result.get("files", ())),
        notes=notes,
    )


# The entry point ldp_sim.experiments: separation (pyproject.toml). Many seeded populations, each
# served in process or by one cluster of gRPC client processes that every population is loaded into.
EXPERIMENT: Simulation[Config, dict[str, Any]] = Simulation(
    "separation",
    "users needed vs d with 95 % intervals: the sharpest interactive and one-round MASKED-PARITY learners against the lower bounds (d ≤ 24), central/local PARITY",
    Config,
    run_with_progress,
    report,
    quick=quick_config,
    out="results/separation",
    quick_out="results/demo/separation",
    shape="factory",
    default_epsilon=1.0,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small ranges and few trials (make demo)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="output directory (default results/separation, or results/demo/separation with --quick)")
    parser.add_argument("--render", metavar="DIR", help="only rebuild the table and plot of a finished run in DIR from its result.json")
    args = parser.parse_args(argv)
    if args.render:
        print(render(args.render)["table"])
        return 0
    args.out = args.out or ("results/demo/separation" if args.quick else "results/separation")
    config = quick_config(args.seed, args.out) if args.quick else Config(seed=args.seed, out=args.out)
    result = asyncio.run(run(config, log=lambda s: print(s, file=sys.stderr, flush=True)))
    print(result["table"])
    print(f"plot: {Path(args.out) / 'separation.png'}   ({result['seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
