"""The separations of KLNRS, measured: LNI ⊊ LI (MASKED-PARITY, §5) and local ⊊ central (PARITY, §3.2).

For every learner and dimension d, the number of users needed to reach error ≤ α in at least a
(1 − β) fraction of T seeded trials, found by search: n doubles from a small start until the
success rate is met (trials at a size stop early once too many fail), then geometric bisection
narrows the bracket [last failing n, first passing n] until its ratio is at most ``resolution``.
Every size tried is reported with its successes k/T and the 95 % Clopper–Pearson interval. A
learner that still fails at ``cap`` users is reported as "> cap" with its success rate there.

Learners (ldp.learners):
  MASKED-PARITY  LI       2-round interactive local protocol (§5.1 through Lemma 4.3), ε per user
                 LNI      the fair one-round learner: d bit queries + the a-query of every one of
                          the 2^d candidates, users spread over them (``lni_plan``)
                 LNI-b    (optional) every user randomizes its whole record: a generic release,
                          not a witness of the separation
  PARITY         central-A*     Algorithm A* (Theorem 3.8), trusted curator
                 central-occam  exponential mechanism with WHT scores (Theorem 3.7), d ≤ 20
                 local-parity   correlation queries over all 2^d candidate parities (one local round)

Each MASKED-PARITY row also carries the corrected Theorem 5.1 lower bound for *any*
non-interactive protocol, n ≥ 4·2^d·ln(1/(4β))/(e^ε − 1)² (``ldp.learners.theorem51``), and the
fair learner's predicted users; the table fits the growth of each learner (log-log slope:
polynomial degree; log2-linear slope: doublings per unit of d).

Local learners run against an ``LROracle`` made by ``oracle_factory(population_spec)`` (an async
context manager; in-process by default, gRPC client processes under ``ldp-sim run separation``).
The curator learners read records directly (``generate_records``: the same records the users of
that population hold).

Trials of one size may run side by side (``Config.parallel_trials``, for trials of at most
``parallel_users`` users) when the factory serves several populations at once: ``run`` raises a
``GrpcOracleFactory``'s ``lanes`` to ``parallel_trials``, one cluster of client processes each.
A run is a pure function of (learner, d, n, trial) and ``_evaluate`` reads the errors in trial
order, so early stopping, k/T, the intervals and every output are those of one trial at a time,
whatever the transport, the process count or the overlap (tests/learners/test_separation.py).

Writes ``result.json``, ``users_needed.csv``, ``curves.csv``, ``separation.png`` and ``table.md``
into ``out`` (``results/separation`` for the full sweep, ``results/demo/separation`` for the demo).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import sys
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ldp.core.audit import clopper_pearson
from ldp.core.concepts import ConceptClass, concept_class
from ldp.core.errors import ParameterError, require_epsilon, require_integer, require_probability
from ldp.core.learner_result import LearnerResult, true_error
from ldp.core.population import PopulationSpec, generate_records
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
from ldp.learners.occam import learn_occam, occam_sample_size
from ldp.learners.parity import PackedExamples, a_star_sample_size, algorithm_a_star
from ldp.learners.parity_local import learn_parity_local, parity_local_lemma43_users
from ldp.learners.theorem51 import lni_users_lower_bound
from ldp.local.oracle import InProcessLROracle, LROracle
from ldp.simulations import reporting
from ldp.simulations.reporting import data_ticks, new_figure, readable_log_axis, save_figure, write_csv, write_json

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Config", "quick_config", "run", "main", "in_process_oracle", "LEARNERS", "EXPERIMENT"]

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
    beta: float = 0.05  # allowed failure rate: "users needed" is for ≥ 95 % success
    trials: int = 20
    cap: int = 2**26  # most users per trial (67,108,864: 2 client processes hold them in ≈ 8 GB)
    start_users: int = 16
    resolution: float = 1.25  # the search stops when (first passing n)/(last failing n) ≤ this
    masked_d: tuple[int, ...] = (2, 4, 8, 12, 16, 20, 24)
    central_parity_d: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512)
    occam_d: tuple[int, ...] = (4, 8, 12, 16)
    local_parity_d: tuple[int, ...] = (4, 8, 12, 16)
    curve_d: int = 16
    curve_users: tuple[int, ...] = (250_000, 1_000_000, 4_000_000, 8_000_000)
    curve_trials: int = 10
    full_at_cap: bool = True  # a learner failing at the cap: rerun all trials there for its success rate
    learners: tuple[str, ...] = ("LI", "LNI", "central-A*", "central-occam", "local-parity")
    # Central baselines from the other seeds (BNS): POINT_d with pure ε-DP (exponential mechanism)
    # against (ε, δ)-DP (A_dist), measured by ldp.simulations.pure_vs_approximate's search. () skips them.
    point_bits: tuple[int, ...] = (8, 32, 128, 512)
    point_trials: int = 100
    out: str | None = "results/separation"
    # How the trials run (never what they give: a run is a pure function of (learner, d, n, trial)):
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


# The most each integer setting may be (`-o KEY=VALUE` lands in Config): far above any run this
# sweep makes (20 trials, a 2^26 cap), and below what would make one run take years or ask for
# more users than a population may have (ldp.core.population.MAX_USERS = 2^40).
INTEGER_LIMITS: dict[str, int] = {
    "trials": 10_000,
    "cap": 2**40,
    "start_users": 2**40,
    "curve_trials": 10_000,
    "point_trials": 1_000_000,
    "parallel_trials": 1_024,
    "parallel_users": 2**40,
}


def quick_config(seed: int = 0, out: str | None = "results/demo/separation") -> Config:
    """`make demo`: the full sweep's rule (20 trials, 95 % success) at d ≤ 12 and a 10^6 cap (≈ 30 s
    in process on 2 cores). It shows LI and LNI side by side with intervals, but not the
    exponential gap: at d ≤ 12 the fair LNI costs about as much as LI (0.7–2.5×), and a fit over
    d ≤ 12 cannot tell 2^d from d^4; the gap is plain from d = 16 on (the full sweep)."""
    return Config(
        seed=seed,
        cap=1_000_000,
        masked_d=(2, 4, 8, 12),
        central_parity_d=(8, 16, 32, 64),
        occam_d=(4, 8),
        local_parity_d=(4, 8),
        curve_d=8,
        curve_users=(20_000, 50_000, 100_000, 200_000),
        curve_trials=5,
        full_at_cap=False,
        point_bits=(8, 32, 128),
        point_trials=50,
        out=out,
    )


QUICK_CAPTION = (
    "Quick run (d ≤ 12, cap 10^6): LI against the fair one-round LNI with 95 % intervals. It cannot "
    "show the exponential gap: up to d = 12 the two cost about the same, and the fits cannot tell "
    "2^d from d^4. The gap is plain from d = 16 on: `make separation` runs d = 2 … 24 "
    "(docs/learners.md has its table and times)."
)


# --- learners: (family, model, d range, runner, bound) ---


@dataclass(frozen=True)
class LearnerSpec:
    name: str
    family: str  # concept class
    model: str
    dims: Callable[[Config], tuple[int, ...]]
    bound: Callable[[Config, int], tuple[int | None, str]]
    local: bool  # through the LR oracle (else: a curator reading records)


def _li_bound(c: Config, d: int) -> tuple[int | None, str]:
    return li_lemma43_users(d, c.epsilon, c.beta), "Lemma 4.3"


def _lni_bound(c: Config, d: int) -> tuple[int | None, str]:
    return lni_lemma43_users(d, c.epsilon, c.beta), "Lemma 4.3 (2^d a-queries)"


def _astar_bound(c: Config, d: int) -> tuple[int | None, str]:
    return a_star_sample_size(d, c.epsilon, c.alpha, c.beta), "Thm 3.8"


def _occam_bound(c: Config, d: int) -> tuple[int | None, str]:
    return occam_sample_size(2**d, c.epsilon, c.alpha, c.beta), "Thm 3.7"


def _local_parity_bound(c: Config, d: int) -> tuple[int | None, str]:
    return parity_local_lemma43_users(d, c.epsilon, c.beta), "Lemma 4.3 (2^d queries)"


LEARNERS: dict[str, LearnerSpec] = {
    "LI": LearnerSpec("LI", "masked_parity", "local interactive", lambda c: c.masked_d, _li_bound, True),
    "LNI": LearnerSpec("LNI", "masked_parity", "local non-interactive", lambda c: c.masked_d, _lni_bound, True),
    "LNI-b": LearnerSpec("LNI-b", "masked_parity", "local non-interactive", lambda c: c.masked_d, lambda c, d: (None, "—"), True),
    "central-A*": LearnerSpec("central-A*", "parity", "central", lambda c: c.central_parity_d, _astar_bound, False),
    "central-occam": LearnerSpec("central-occam", "parity", "central", lambda c: c.occam_d, _occam_bound, False),
    "local-parity": LearnerSpec("local-parity", "parity", "local non-interactive", lambda c: c.local_parity_d, _local_parity_bound, True),
}


class _Trials:
    """Seeded trials: targets depend on (seed, family, d, trial) only, so the learners of one
    family face the same targets; each local learner's run at n users has users of its own.
    A run is a pure function of (learner, d, n, trial), so it is computed once and remembered
    (the search and the curves ask for some runs twice)."""

    def __init__(self, config: Config, oracle_factory: OracleFactory) -> None:
        self.config = config
        self.oracle_factory = oracle_factory
        self._features: dict[tuple[int, int], np.ndarray] = {}
        self._runs: dict[tuple[str, int, int, int], tuple[float, LearnerResult]] = {}

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
        if learner == "central-A*":
            res = algorithm_a_star(PackedExamples.from_records(self._central_records(d, trial, n)), c.epsilon, c.beta, rng)
        elif learner == "central-occam":
            rec = self._central_records(d, trial, n)
            res = learn_occam("parity", d, rec[:, :d], rec[:, d], c.epsilon, rng)
        else:
            async with self.oracle_factory(spec) as lr:
                if learner == "LI":
                    res = await learn_masked_parity_interactive(lr, d, c.epsilon)
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
    """k/T at n users. Trials are read in order 0, 1, …, and with ``early_stop`` the size is
    abandoned right after the failure that puts the success rate out of reach. Up to
    ``trials.width`` of them run at once; their errors are still read in trial order and the
    rule stops at the same trial, so the result is the sequential one, bit for bit (a run is a
    pure function of (learner, d, n, trial); runs past the stop are computed, remembered, not
    counted)."""
    c = trials.config
    allowed = math.floor(c.beta * c.trials + 1e-9)
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


async def users_needed(trials: _Trials, learner: str, d: int) -> dict[str, Any]:
    """Smallest n with success rate ≥ 1 − β over the trials: doubling, then geometric bisection of
    [last failing n, first passing n] until the ratio of its ends is ≤ ``resolution``."""
    c = trials.config
    evaluations: list[dict[str, Any]] = []
    n = max(c.start_users, 2 * (d + 1))
    found = None
    last_fail = None
    while True:
        ev = await _evaluate(trials, learner, d, n)
        evaluations.append(ev)
        if ev["ok"]:
            found = n
            break
        last_fail = n
        if n >= c.cap:
            break
        n = min(2 * n, c.cap)
    if found is not None and last_fail is not None:
        lo, hi = last_fail, found
        while hi > lo * c.resolution:
            mid = int(round(math.sqrt(lo * hi)))
            if mid <= lo or mid >= hi:
                break
            ev = await _evaluate(trials, learner, d, mid)
            evaluations.append(ev)
            lo, hi = (lo, mid) if ev["ok"] else (mid, hi)
        found, last_fail = hi, lo
    if found is None and c.full_at_cap and evaluations[-1]["trials"] < c.trials:
        evaluations.append(await _evaluate(trials, learner, d, evaluations[-1]["users"], early_stop=False))
    final = [e for e in evaluations if e["users"] == (found if found is not None else last_fail)][-1]
    below = [e for e in evaluations if found is not None and e["users"] == last_fail]
    bound, source = LEARNERS[learner].bound(c, d)
    row = {
        "learner": learner,
        "family": LEARNERS[learner].family,
        "model": LEARNERS[learner].model,
        "d": d,
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
        "bound": bound,
        "bound_source": source,
        "measured_over_bound": (found / bound) if (found is not None and bound) else None,
        "evaluations": evaluations,
    }
    if LEARNERS[learner].family == "masked_parity":
        row["lni_lower_bound"] = lni_users_lower_bound(d, c.epsilon, c.beta)
        if learner == "LNI":
            row["predicted"] = lni_users_for(d, c.epsilon, 1.0 - c.beta)
    return row


def growth(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Least-squares fits of the measured users n(d) over the rows that succeeded: log n against
    log d (slope = the polynomial degree) and log2 n against d (slope = doublings per unit of d,
    1 for 2^d). R² says which describes the data; None with fewer than 3 points."""
    pts = [(r["d"], r["users_needed"]) for r in rows if r["users_needed"] is not None]
    if len(pts) < 3:
        return None
    d = np.array([p[0] for p in pts], dtype=np.float64)
    n = np.array([p[1] for p in pts], dtype=np.float64)

    def fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        slope, intercept = np.polyfit(x, y, 1)
        residual = y - (slope * x + intercept)
        total = float(np.sum((y - y.mean()) ** 2))
        return float(slope), (1.0 - float(np.sum(residual**2)) / total) if total > 0 else 1.0

    loglog, loglog_r2 = fit(np.log(d), np.log(n))
    loglin, loglin_r2 = fit(d, np.log2(n))
    return {"d": [int(v) for v in d], "loglog_slope": loglog, "loglog_r2": loglog_r2, "log2_per_d": loglin, "log2_per_d_r2": loglin_r2}


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
    curves: list[dict[str, Any]] = []
    try:
        await _measure(config, oracle_factory, rows, curves, say)
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
        "rows": rows,
        "curves": curves,
        "growth": {name: growth([r for r in rows if r["learner"] == name]) for name in dict.fromkeys(r["learner"] for r in rows)},
        "ratios": separation_ratios(rows),
        "seconds": round(time.perf_counter() - started, 2),
    }
    result["table"] = markdown_table(result)
    if config.out:
        result["files"] = [str(p) for p in write_outputs(result, Path(config.out))]
    return result


async def _measure(
    config: Config, oracle_factory: OracleFactory, rows: list[dict[str, Any]], curves: list[dict[str, Any]], say: Callable[[str], None]
) -> None:
    """The rows and curves of ``run``, appended as each is finished (so a failure keeps them)."""
    trials = _Trials(config, oracle_factory)
    for learner in config.learners:
        for d in LEARNERS[learner].dims(config):
            t0 = time.perf_counter()
            row = await users_needed(trials, learner, d)
            row["seconds"] = round(time.perf_counter() - t0, 2)
            rows.append(row)
            needed = f"{row['users_needed']:,}" if row["users_needed"] is not None else f"> {config.cap:,}"
            low, high = row["ci"]
            say(f"{learner:>14} d={d:<4} users needed {needed:>13}  (success {row['successes']}/{row['trials']}, 95 % CI {low:.2f}–{high:.2f}; {row['seconds']} s)")
    curve_learners = [name for name in ("LI", "LNI", "LNI-b") if name in config.learners]
    curve_config = replace(config, trials=config.curve_trials)
    curve_trials = _Trials(curve_config, oracle_factory)
    curve_trials._runs = trials._runs  # a run does not depend on the number of trials: share them
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
    as separation rows: users needed (m_90, the smallest n with error ≤ α in ≥ 1 − β of
    ``point_trials`` seeded trials on BNS's two-point hard distribution) against d = bits."""
    from ldp.simulations import pure_vs_approximate as pva

    pconfig = pva.Config(
        point_bits=config.point_bits, threshold_bits=(), alpha=config.alpha, beta=config.beta, epsilon=config.epsilon,
        trials=config.point_trials, include_lmm=False, seed=config.seed,
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


def separation_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per d measured by both: LNI's users over LI's (a lower limit "> …" when LNI failed at the
    cap) and the corrected Theorem 5.1 lower bound for any LNI protocol over LI's measured users."""
    li = {r["d"]: r for r in rows if r["learner"] == "LI"}
    lni = {r["d"]: r for r in rows if r["learner"] == "LNI"}
    out = []
    for d in sorted(set(li) & set(lni)):
        a, b = li[d], lni[d]
        if a["users_needed"] is None:
            continue
        at_least = b["users_needed"] is None
        numerator = b["users_needed"] if not at_least else b["last_failing"]
        out.append(
            {
                "d": d,
                "LI": a["users_needed"],
                "LNI": b["users_needed"],
                "LNI_failed_at": b["last_failing"] if at_least else None,
                "ratio": numerator / a["users_needed"],
                "ratio_is_lower_limit": at_least,
                "lower_bound_ratio": b["lni_lower_bound"] / a["users_needed"],
                "predicted_ratio": b.get("predicted", 0) / a["users_needed"] if b.get("predicted") else None,
            }
        )
    return out


def _fmt_users(row: dict[str, Any], cap: int) -> str:
    return f"{row['users_needed']:,}" if row["users_needed"] is not None else f"> {cap:,}"


def _fmt_success(entry: dict[str, Any] | None) -> str:
    if not entry or entry.get("successes") is None:
        return "—"
    low, high = entry["ci"]
    early = ", stopped early" if entry.get("stopped_early") else ""
    return f"{entry['successes']}/{entry['trials']} [{low:.2f}, {high:.2f}]{early}"


def _search_table(result: dict[str, Any]) -> str:
    """Every (learner, d): users needed, the bracket, successes with intervals, the bound."""
    c = result["config"]
    rows = []
    for r in result["rows"]:
        bound = f"{r['bound']:,} ({r['bound_source']})" if r["bound"] else "—"
        ratio = f"{r['measured_over_bound']:.3g}" if r["measured_over_bound"] is not None else "—"
        last = f"{r['last_failing']:,}" if r.get("last_failing") else "—"
        success = _fmt_success(r) if r.get("ci") else f"≥ {1 - c['beta']:.0%} of {r['trials']}"  # the POINT rows: m_90 of their own search
        rows.append((r["family"], r["learner"], r["model"], r["d"], _fmt_users(r, c["cap"]), last, success, _fmt_success(r.get("below")), bound, ratio))
    headers = ("class", "learner", "model", "d", "users needed", "last failing", "successes at users needed [95 % CI]",
               "successes at last failing", "bound (source)", "measured/bound")
    return reporting.markdown_table(headers, rows, align="lllrrrlllr")


def _ratio_table(result: dict[str, Any]) -> str:
    """Per d: LNI over LI, measured and against the Theorem 5.1 bound for any LNI protocol."""
    lower = {r["d"]: r["lni_lower_bound"] for r in result["rows"] if r["learner"] == "LNI"}
    rows = []
    for q in result["ratios"]:
        lni = f"{q['LNI']:,}" if q["LNI"] is not None else f"> {q['LNI_failed_at']:,}"
        ratio = f"{'> ' if q['ratio_is_lower_limit'] else ''}{q['ratio']:.3g}"
        predicted = f"{q['predicted_ratio']:.3g}" if q["predicted_ratio"] else "—"
        rows.append((q["d"], f"{q['LI']:,}", lni, ratio, f"{lower[q['d']]:,}", f"{q['lower_bound_ratio']:.3g}", predicted))
    headers = ("d", "LI users", "LNI users", "LNI / LI", "any LNI ≥", "(any LNI) / LI", "LNI predicted / LI")
    return reporting.markdown_table(headers, rows, align="r" * len(headers))


def _growth_table(fits: dict[str, Any]) -> str:
    """Per learner: the log-log and log2-linear fits of users against d, and the better one."""
    rows = []
    for name, g in fits.items():
        kind = "polynomial" if g["loglog_r2"] >= g["log2_per_d_r2"] else "exponential"
        rows.append((name, ", ".join(map(str, g["d"])), f"{g['loglog_slope']:.2f} ({g['loglog_r2']:.3f})",
                     f"{g['log2_per_d']:.3f} ({g['log2_per_d_r2']:.3f})", kind))
    return reporting.markdown_table(("learner", "d fitted", "log-log slope (R²)", "log2 n per unit d (R²)", "growth"), rows, align="llrrl")


def _tried_table(searched: list[dict[str, Any]]) -> str:
    """Every size each search tried, in order."""
    rows = []
    for r in searched:
        tried = "; ".join(
            f"{e['users']:,}: {e['successes']}/{e['trials']} [{e['ci'][0]:.2f}, {e['ci'][1]:.2f}]{'*' if e.get('stopped_early') else ''}" for e in r["evaluations"]
        )
        rows.append((r["learner"], r["d"], tried))
    return reporting.markdown_table(("learner", "d", "sizes tried"), rows, align="lrl")


def _curves_table(curves: list[dict[str, Any]]) -> str:
    """Success and mean error per learner (rows) and number of users (columns)."""
    users = sorted({e["users"] for e in curves})
    rows = []
    for learner in dict.fromkeys(e["learner"] for e in curves):
        by_n = {e["users"]: e for e in curves if e["learner"] == learner}
        rows.append((learner, *(f"{_fmt_success(by_n[u])}, error {by_n[u]['mean_error']:.3f}" for u in users)))
    return reporting.markdown_table(("learner", *(f"{u:,}" for u in users)), rows)


def markdown_table(result: dict[str, Any]) -> str:
    """table.md: the searches, the LNI/LI ratios, the growth fits, every size tried, the curves."""
    c = result["config"]
    lines = [
        f"Users needed for error ≤ α = {c['alpha']} in ≥ {1 - c['beta']:.0%} of {c['trials']} seeded trials "
        f"(ε = {c['epsilon']} per user; cap {c['cap']:,} users; seed {c['seed']}). The search doubles n, then "
        f"bisects geometrically until first passing n / last failing n ≤ {c['resolution']}: the true threshold "
        "(at this rule) lies in (last failing, users needed]. Successes are k/T with the 95 % Clopper–Pearson "
        "interval; sizes abandoned once the success rate was out of reach say \"stopped early\".",
        "",
        _search_table(result),
    ]
    if result.get("ratios"):
        lines += [
            "",
            "LI against the fair one-round LNI on MASKED-PARITY. \"Any LNI ≥\" is the corrected Theorem 5.1 lower bound "
            f"4·2^d·ln(1/(4β))/(e^ε − 1)² for every non-interactive protocol (β = {c['beta']}); \"predicted\" is the fair "
            "learner's normal-approximation sizing.",
            "",
            _ratio_table(result),
        ]
    fits = {k: v for k, v in (result.get("growth") or {}).items() if v}
    if fits:
        lines += [
            "",
            "Fitted growth of the users needed (least squares over the d that succeeded): log n against log d "
            "(slope = polynomial degree) and log2 n against d (slope 1 = doubling with every unit of d); the larger R² names the better description.",
            "",
            _growth_table(fits),
        ]
    searched = [r for r in result["rows"] if r.get("evaluations")]
    if searched:
        lines += [
            "",
            "Every size the search tried, in order: users: successes/trials [95 % Clopper–Pearson] (* stopped early once the success rate was out of reach; its interval ignores that stopping rule).",
            "",
            _tried_table(searched),
        ]
    if result["curves"]:
        lines += ["", f"Success rate and mean error against users at d = {result['curves'][0]['d']} ({c['curve_trials']} trials each):", "", _curves_table(result["curves"])]
    return "\n".join(lines) + "\n"


USERS_CSV = ("family", "learner", "model", "d", "users_needed", "last_failing", "status", "successes", "trials", "ci_low", "ci_high",
             "mean_error", "bound", "bound_source", "measured_over_bound", "lni_lower_bound", "predicted", "seconds")
CURVES_CSV = ("learner", "d", "users", "trials", "successes", "ci_low", "ci_high", "mean_error")


def _csv_rows(entries: list[dict[str, Any]], columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """``entries`` under ``columns``: the interval split into ci_low/ci_high, absent values empty."""
    rows = []
    for e in entries:
        low, high = e.get("ci") or (None, None)
        rows.append({k: e.get(k) for k in columns} | {"ci_low": low, "ci_high": high})
    return rows


def write_outputs(result: dict[str, Any], out: Path) -> list[Path]:
    """result.json, users_needed.csv, curves.csv, table.md and separation.png in ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [
        write_json(out / "result.json", {k: v for k, v in result.items() if k != "files"}),
        write_csv(out / "users_needed.csv", _csv_rows(result["rows"], USERS_CSV), USERS_CSV),
        write_csv(out / "curves.csv", _csv_rows(result["curves"], CURVES_CSV), CURVES_CSV),
        out / "table.md",
    ]
    paths[3].write_text(result["table"])
    save_figure(plot(result), out / "separation.png")
    return [*paths, out / "separation.png"]


STYLES = {
    "LI": ("tab:blue", "o"),
    "LNI": ("tab:orange", "s"),
    "LNI-b": ("tab:red", "D"),
    "central-A*": ("tab:green", "^"),
    "central-occam": ("tab:olive", "v"),
    "local-parity": ("tab:purple", "P"),
    "central-EM": ("tab:brown", "<"),
    "central-Adist": ("tab:gray", ">"),
}


def _users_axis(ax: Any, rows: list[dict[str, Any]], cap: int) -> None:
    """Measured users needed per learner, the search bracket as an error bar; "> cap" open markers."""
    for learner in dict.fromkeys(r["learner"] for r in rows):
        mine = [r for r in rows if r["learner"] == learner]
        color, marker = STYLES.get(learner, ("k", "x"))
        ok = [r for r in mine if r["users_needed"] is not None]
        if ok:
            d = [r["d"] for r in ok]
            n = np.array([r["users_needed"] for r in ok], dtype=float)
            low = np.array([r.get("last_failing") or r["users_needed"] for r in ok], dtype=float)
            family = mine[0]["family"].upper().replace("_", "-")
            ax.errorbar(d, n, yerr=[n - low, np.zeros_like(n)], color=color, marker=marker, capsize=3, label=f"{learner}: {family}, {MODEL_SHORT.get(mine[0]['model'], mine[0]['model'])}")
        failed = [r["d"] for r in mine if r["users_needed"] is None]
        if failed:
            ax.scatter(failed, [cap] * len(failed), color=color, marker=marker, facecolors="none", s=110, zorder=5, label=f"{learner}: fails at the cap")
    ax.axhline(cap, color="gray", ls=":", lw=1, label=f"cap: {cap:,} users, the most a search tries")
    ax.set_yscale("log")


def _masked_axes(ax: Any, result: dict[str, Any], masked: list[dict[str, Any]]) -> None:
    """MASKED-PARITY: LI and LNI against d, the Theorem 5.1 bound and the fair LNI's prediction."""
    c = result["config"]
    _users_axis(ax, masked, c["cap"])
    dims = sorted({r["d"] for r in masked})
    grid = np.arange(min(dims), max(dims) + 1)
    bound = [lni_users_lower_bound(int(d), c["epsilon"], c["beta"]) for d in grid]
    lone = "_" if len(grid) < 2 else None  # a line through one point draws nothing: mark it
    ax.plot(grid, bound, color="black", ls="--", lw=1.2, marker=lone, markersize=12, label="any LNI protocol needs ≥ (Thm 5.1, corrected)")
    predicted = [(r["d"], r["predicted"]) for r in masked if r.get("predicted")]
    if predicted:
        ax.plot(*zip(*predicted), color="tab:orange", ls=":", lw=1.2, marker="_" if len(predicted) < 2 else None, markersize=12, label="fair LNI, predicted")
    # where the gap has opened, as the legend's title: it moves with the legend, off the data
    gaps = [f"d = {q['d']}: {'> ' if q['ratio_is_lower_limit'] else ''}×{q['ratio']:.0f}" for q in result.get("ratios") or [] if q["ratio"] >= 4]
    data_ticks(ax.xaxis, dims)
    readable_log_axis(ax.yaxis)
    ax.set_xlabel("d (linear axis: a straight line is exponential growth)")
    ax.set_ylabel(f"users for error ≤ {c['alpha']} w.p. ≥ {1 - c['beta']:.0%} (log scale)")
    ax.set_title("MASKED-PARITY: interactive vs one round")
    ax.legend(fontsize=8, loc="best", title="LNI users / LI users:\n" + ", ".join(gaps) if gaps else None, title_fontsize=8)


def _parity_axes(ax: Any, result: dict[str, Any], others: list[dict[str, Any]]) -> None:
    """PARITY and POINT: the curator learners and the local one against d (log2 axis)."""
    c = result["config"]
    _users_axis(ax, others, c["cap"])
    ax.set_xscale("log", base=2)
    data_ticks(ax.xaxis, sorted({r["d"] for r in others}))
    readable_log_axis(ax.yaxis)
    ax.set_xlabel("d (bits, log scale)")
    ax.set_ylabel(f"users for error ≤ {c['alpha']} (log scale)")
    ax.set_title("PARITY and POINT: trusted curator vs local")
    ax.legend(fontsize=8, loc="best")


def _curves_axes(ax: Any, result: dict[str, Any]) -> None:
    """Success rate against users at one d, per learner (slightly apart in x so that none hides another)."""
    c = result["config"]
    learners = list(dict.fromkeys(e["learner"] for e in result["curves"]))
    for k, learner in enumerate(learners):
        pts = sorted((e["users"], e["success_rate"], *e["ci"]) for e in result["curves"] if e["learner"] == learner)
        n, rate, low, high = (np.array(v, dtype=float) for v in zip(*pts))
        color, marker = STYLES.get(learner, ("k", "x"))
        dodge = 1.04 ** (k - (len(learners) - 1) / 2)  # multiplicative: the same shift at every n on a log axis
        ax.errorbar(n * dodge, rate, yerr=[rate - low, high - rate], color=color, marker=marker, capsize=3, label=learner)
    ax.axhline(1 - c["beta"], color="gray", ls="--", lw=1, label=f"target success rate {1 - c['beta']:.0%}")
    ax.set_xscale("log")
    data_ticks(ax.xaxis, sorted({e["users"] for e in result["curves"]}))
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("users (log scale; learners drawn slightly apart)")
    ax.set_ylabel("success rate (95 % Clopper–Pearson)")
    ax.set_title(f"MASKED-PARITY, d = {result['curves'][0]['d']}: success against users")
    ax.legend(fontsize=8, loc="best")


def plot(result: dict[str, Any]) -> Figure:
    """Up to three panels: MASKED-PARITY users against d, PARITY/POINT users against d, and the
    success curves against users (a panel is left out when its rows are absent)."""
    masked = [r for r in result["rows"] if r["family"] == "masked_parity"]
    others = [r for r in result["rows"] if r["family"] != "masked_parity"]
    panels: list[Callable[[Any], None]] = []
    if masked:
        panels.append(lambda ax: _masked_axes(ax, result, masked))
    if others:
        panels.append(lambda ax: _parity_axes(ax, result, others))
    if result["curves"]:
        panels.append(lambda ax: _curves_axes(ax, result))
    if not panels:
        raise ParameterError("separation: the result has no rows and no curves: nothing to plot")
    fig, axes = new_figure(len(panels), 6.2, 5.2)
    for ax, draw in zip(axes, panels):
        draw(ax)
    return fig


MODEL_SHORT = {"local interactive": "LI", "local non-interactive": "LNI", "central": "CNI", "central (ε, δ = 1e-06)": "CNI(δ)"}
SUMMARY_COLUMNS = ("class", "learner", "model", "d", "users", "success", "÷ bound")
SUMMARY_CAPTION = (
    "users: needed for error ≤ α; success: k/T at that n, ≥ the lower end of its 95 % Clopper–Pearson interval; "
    "÷ bound: users / (Lemma 4.3 local, Thm 3.8 A*, Thm 3.7 Occam, BNS for POINT)"
)


def summary_rows(result: dict[str, Any]) -> tuple[tuple[str, ...], ...]:
    """The result as compact rows under ``SUMMARY_COLUMNS`` (the full table is ``result["table"]``);
    the class is named on its first row only."""
    cap = result["config"]["cap"]
    rows = []
    previous = None
    for r in result["rows"]:
        family = r["family"].upper().replace("_", "-")
        success = f"{r['successes']}/{r['trials']} ≥{r['ci'][0]:.2f}" if r.get("ci") else "—"
        rows.append(
            (
                "" if family == previous else family,
                r["learner"],
                MODEL_SHORT.get(r["model"], r["model"]),
                str(r["d"]),
                f"{r['users_needed']:,}" if r["users_needed"] is not None else f"> {cap:,}",
                success,
                f"{r['measured_over_bound']:.3f}" if r["measured_over_bound"] is not None else "—",
            )
        )
        previous = family
    return tuple(rows)


def render(out: str | Path) -> dict[str, Any]:
    """Rebuild table.md, the CSVs and the plot of a finished run from its result.json (after a
    change to the reporting, without rerunning an hour of trials)."""
    out = Path(out)
    try:
        result = json.loads((out / "result.json").read_text())
    except (OSError, ValueError) as exc:
        raise ParameterError(f"cannot read {out / 'result.json'}: {exc}") from None
    rows = result["rows"]
    result["growth"] = {name: growth([r for r in rows if r["learner"] == name]) for name in dict.fromkeys(r["learner"] for r in rows)}
    result["ratios"] = separation_ratios(rows)
    result["table"] = markdown_table(result)
    result["files"] = [str(p) for p in write_outputs(result, out)]
    return result


async def run_with_progress(config: Config, oracle_factory: OracleFactory, args: ExperimentArgs) -> dict[str, Any]:
    """``run`` with ``ldp-sim``'s progress bar: one step per (learner, d) row and per error curve."""
    total = sum(len(LEARNERS[name].dims(config)) for name in config.learners)
    total += sum(1 for name in ("LI", "LNI", "LNI-b") if name in config.learners and config.curve_users)
    done = 0

    def log(line: str) -> None:
        nonlocal done
        done += 1
        args.log(line)
        args.progress(done, total)

    args.progress(0, total)
    return await run(config, oracle_factory, log=log)


def report(result: dict[str, Any], config: Config) -> ExperimentResult:
    """The summary table, with the full table's caption and error curves as notes."""
    head, _, curves = result["table"].partition("\nMean error against users")
    notes = head.split("\n\n", 1)[0] + "\n" + SUMMARY_CAPTION
    if curves:
        notes += "\n\nMean error against users" + curves.rstrip()
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
    "users needed vs d with 95 % intervals: LI against the fair LNI on MASKED-PARITY (d ≤ 24), central/local PARITY",
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
