"""The separations of KLNRS, measured: LNI ⊊ LI (MASKED-PARITY, §5) and local ⊊ central (PARITY, §3.2).

For every learner and dimension d, the number of users needed to reach error ≤ α in at least a
(1 − β) fraction of T seeded trials, found by search: n doubles from a small start until the
success rate is met (trials stop early once too many fail), then ``bisect`` halvings refine it.
A learner that still fails at ``cap`` users is reported as "> cap" with its mean error there.

Learners (ldp.learners):
  MASKED-PARITY  LI       2-round interactive local protocol (§5.1 through Lemma 4.3), ε per user
                 LNI-a    one round: d bit queries + a-queries for as many candidates as affordable
                 LNI-b    one round: every user randomizes its whole record (record_rr)
  PARITY         central-A*     Algorithm A* (Theorem 3.8), trusted curator
                 central-occam  exponential mechanism with WHT scores (Theorem 3.7), d ≤ 20
                 local-parity   correlation queries over candidate parities (one local round)

Local learners run against an ``LROracle`` made by ``oracle_factory(population_spec)`` (an async
context manager; in-process by default, gRPC client processes under ``ldp-sim run separation``).
The curator learners read records directly (``generate_records``: the same records the users of
that population hold).

Writes ``result.json``, ``users_needed.csv``, ``curves.csv``, ``separation.png`` (users needed
against d, log scale; error against users at fixed d) and ``table.md`` (with measured/bound for
Theorems 3.7, 3.8 and Lemma 4.3) into ``out``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, AsyncContextManager, Callable

import numpy as np

from ldp.core.concepts import ConceptClass, concept_class
from ldp.core.errors import ParameterError, require_epsilon, require_probability
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.rng import generator
from ldp.learners.masked_parity import (
    learn_masked_parity_interactive,
    learn_masked_parity_lni_candidates,
    learn_masked_parity_lni_record,
    li_lemma43_users,
    lni_lemma43_users,
)
from ldp.learners.occam import learn_occam, occam_sample_size
from ldp.learners.parity import PackedExamples, a_star_sample_size, algorithm_a_star
from ldp.learners.parity_local import learn_parity_local, parity_local_lemma43_users
from ldp.learners.results import LearnerResult, true_error
from ldp.local.oracle import InProcessLROracle, LROracle

__all__ = ["Config", "quick_config", "run", "main", "in_process_oracle", "LEARNERS"]

OracleFactory = Callable[[PopulationSpec], AsyncContextManager[LROracle]]


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
    beta: float = 0.1  # allowed failure rate
    trials: int = 10
    cap: int = 2_000_000  # most users per trial
    start_users: int = 16
    bisect: int = 2
    masked_d: tuple[int, ...] = (2, 4, 8, 16)
    central_parity_d: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512)
    occam_d: tuple[int, ...] = (4, 8, 12, 16)
    local_parity_d: tuple[int, ...] = (4, 8, 12, 16)
    curve_d: int = 16
    curve_users: tuple[int, ...] = (16_000, 64_000, 256_000, 1_024_000, 2_000_000)
    curve_trials: int = 5
    full_at_cap: bool = True  # a learner failing at the cap: rerun all trials there for its mean error
    learners: tuple[str, ...] = ("LI", "LNI-a", "LNI-b", "central-A*", "central-occam", "local-parity")
    # Central baselines from the other seeds (BNS): POINT_d with pure ε-DP (exponential mechanism)
    # against (ε, δ)-DP (A_dist), measured by simulations.pure_vs_approximate's search. () skips them.
    point_bits: tuple[int, ...] = (8, 32, 128, 512)
    point_trials: int = 100
    out: str | None = "results/separation"

    def __post_init__(self) -> None:
        """Every setting checked where it enters (``-o key=value`` lands here): one clear error."""
        require_epsilon(self.epsilon)
        require_probability("alpha", self.alpha)
        require_probability("beta", self.beta)
        for name in ("trials", "cap", "start_users", "curve_trials", "point_trials"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ParameterError(f"separation: {name} must be an integer ≥ 1, got {value!r}")
        if not isinstance(self.bisect, int) or self.bisect < 0:
            raise ParameterError(f"separation: bisect must be an integer ≥ 0, got {self.bisect!r}")
        if self.start_users > self.cap:
            raise ParameterError(f"separation: start_users ({self.start_users}) exceeds cap ({self.cap})")
        for name in ("masked_d", "central_parity_d", "occam_d", "local_parity_d", "curve_users", "point_bits"):
            bad = [v for v in getattr(self, name) if isinstance(v, bool) or not isinstance(v, int) or v < 1]
            if bad:
                raise ParameterError(f"separation: {name} must hold integers ≥ 1, got {bad[0]!r}")
        if self.curve_d < 1:
            raise ParameterError(f"separation: curve_d must be ≥ 1, got {self.curve_d!r}")
        if not self.learners:
            raise ParameterError(f"separation: learners must name at least one of {list(LEARNERS)}")
        unknown = [name for name in self.learners if name not in LEARNERS]
        if unknown:
            raise ParameterError(f"unknown learner(s) {unknown}; learners: {list(LEARNERS)}")


def quick_config(seed: int = 0, out: str | None = "results/separation") -> Config:
    """`make demo`: small ranges, few trials (≈ a minute in process on 2 cores)."""
    return Config(
        seed=seed,
        trials=5,
        cap=1_000_000,
        bisect=1,
        masked_d=(2, 4, 8, 16),
        central_parity_d=(8, 16, 32, 64),
        occam_d=(4, 8),
        local_parity_d=(4, 8, 12),
        curve_d=8,
        curve_users=(4_000, 16_000, 64_000, 256_000),
        curve_trials=3,
        full_at_cap=False,
        point_bits=(8, 32, 128),
        point_trials=50,
        out=out,
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


def _lnia_bound(c: Config, d: int) -> tuple[int | None, str]:
    return lni_lemma43_users(d, c.epsilon, c.beta), "Lemma 4.3 (2^d a-queries)"


def _astar_bound(c: Config, d: int) -> tuple[int | None, str]:
    return a_star_sample_size(d, c.epsilon, c.alpha, c.beta), "Thm 3.8"


def _occam_bound(c: Config, d: int) -> tuple[int | None, str]:
    return occam_sample_size(2**d, c.epsilon, c.alpha, c.beta), "Thm 3.7"


def _local_parity_bound(c: Config, d: int) -> tuple[int | None, str]:
    return parity_local_lemma43_users(d, c.epsilon, c.beta), "Lemma 4.3 (2^d queries)"


LEARNERS: dict[str, LearnerSpec] = {
    "LI": LearnerSpec("LI", "masked_parity", "local interactive", lambda c: c.masked_d, _li_bound, True),
    "LNI-a": LearnerSpec("LNI-a", "masked_parity", "local non-interactive", lambda c: c.masked_d, _lnia_bound, True),
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
                elif learner == "LNI-a":
                    res = await learn_masked_parity_lni_candidates(lr, d, c.epsilon, rng, beta=c.beta)
                elif learner == "LNI-b":
                    res = await learn_masked_parity_lni_record(lr, d, c.epsilon, rng)
                elif learner == "local-parity":
                    res = await learn_parity_local(lr, d, c.epsilon, rng, beta=c.beta)
                else:
                    raise KeyError(learner)
        return true_error(referee, res.hypothesis), res


async def _evaluate(trials: _Trials, learner: str, d: int, n: int, early_stop: bool = True) -> dict[str, Any]:
    c = trials.config
    allowed = math.floor(c.beta * c.trials + 1e-9)
    errors: list[float] = []
    failures = 0
    for t in range(c.trials):
        err, _ = await trials.run(learner, d, n, t)
        errors.append(err)
        failures += err > c.alpha
        if early_stop and failures > allowed:
            break
    return {
        "users": n,
        "trials": len(errors),
        "successes": len(errors) - failures,
        "success_rate": (len(errors) - failures) / len(errors),
        "ok": failures <= allowed and len(errors) == c.trials,
        "mean_error": float(np.mean(errors)),
    }


async def users_needed(trials: _Trials, learner: str, d: int) -> dict[str, Any]:
    """Smallest n (doubling, then bisection) with success rate ≥ 1 − β over the trials."""
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
        for _ in range(c.bisect):
            mid = (lo + hi) // 2
            if mid <= lo or mid >= hi:
                break
            ev = await _evaluate(trials, learner, d, mid)
            evaluations.append(ev)
            lo, hi = (lo, mid) if ev["ok"] else (mid, hi)
        found = hi
    if found is None and c.full_at_cap and evaluations[-1]["trials"] < c.trials:
        evaluations.append(await _evaluate(trials, learner, d, evaluations[-1]["users"], early_stop=False))
    final = [e for e in evaluations if e["users"] == (found if found is not None else last_fail)][-1]
    bound, source = LEARNERS[learner].bound(c, d)
    return {
        "learner": learner,
        "family": LEARNERS[learner].family,
        "model": LEARNERS[learner].model,
        "d": d,
        "users_needed": found,
        "status": "ok" if found is not None else "> cap",
        "success_rate": final["success_rate"],
        "successes": final["successes"],
        "trials": final["trials"],
        "mean_error": final["mean_error"],
        "bound": bound,
        "bound_source": source,
        "measured_over_bound": (found / bound) if (found is not None and bound) else None,
        "evaluations": evaluations,
    }


async def run(config: Config, oracle_factory: OracleFactory = in_process_oracle, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the whole experiment; returns the JSON-able result (and writes files if ``config.out``)."""
    say = log or (lambda s: None)
    started = time.perf_counter()
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
            needed = row["users_needed"] if row["users_needed"] is not None else f"> {config.cap}"
            say(f"{learner:>14} d={d:<4} users needed {needed!s:>10}  (mean error {row['mean_error']:.3f}, {row['seconds']} s)")
    curve_learners = [name for name in ("LI", "LNI-a", "LNI-b") if name in config.learners]
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
    from simulations import pure_vs_approximate as pva

    pconfig = pva.Config(
        point_bits=config.point_bits, threshold_bits=(), alpha=config.alpha, beta=config.beta, epsilon=config.epsilon,
        trials=config.point_trials, include_lmm=False, seed=config.seed,
    )
    started = time.perf_counter()
    result = pva.run(pconfig)
    rows = []
    for r in result.rows:
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


def _fmt_users(row: dict[str, Any], cap: int) -> str:
    return f"{row['users_needed']:,}" if row["users_needed"] is not None else f"> {cap:,}"


def markdown_table(result: dict[str, Any]) -> str:
    c = result["config"]
    lines = [
        f"Users needed for error ≤ α = {c['alpha']} in ≥ {1 - c['beta']:.0%} of {c['trials']} seeded trials "
        f"(ε = {c['epsilon']} per user; cap {c['cap']:,} users; seed {c['seed']}). "
        "A row at \"> cap\" gives successes and mean error of the trials run at the cap"
        + ("." if c["full_at_cap"] else " (stopped early once the success rate was out of reach)."),
        "",
        "| class | learner | model | d | users needed | successes (at that n) | mean error | bound (source) | measured/bound |",
        "|---|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for r in result["rows"]:
        bound = f"{r['bound']:,} ({r['bound_source']})" if r["bound"] else "—"
        ratio = f"{r['measured_over_bound']:.3g}" if r["measured_over_bound"] is not None else "—"
        successes = f"{r['successes']}/{r['trials']}" if r["successes"] is not None else f"≥ {1 - c['beta']:.0%} of {r['trials']}"
        error = f"{r['mean_error']:.3f}" if r["mean_error"] is not None else "—"
        lines.append(
            f"| {r['family']} | {r['learner']} | {r['model']} | {r['d']} | {_fmt_users(r, c['cap'])} | "
            f"{successes} | {error} | {bound} | {ratio} |"
        )
    if result["curves"]:
        lines += ["", f"Mean error against users at d = {result['curves'][0]['d']} ({c['curve_trials']} trials each):", ""]
        users = sorted({e["users"] for e in result["curves"]})
        lines.append("| learner | " + " | ".join(f"{u:,}" for u in users) + " |")
        lines.append("|---|" + "---:|" * len(users))
        for learner in dict.fromkeys(e["learner"] for e in result["curves"]):
            by_n = {e["users"]: e["mean_error"] for e in result["curves"] if e["learner"] == learner}
            lines.append(f"| {learner} | " + " | ".join(f"{by_n[u]:.3f}" for u in users) + " |")
    return "\n".join(lines) + "\n"


def write_outputs(result: dict[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "result.json", out / "users_needed.csv", out / "curves.csv", out / "table.md", out / "separation.png"]
    paths[0].write_text(json.dumps({k: v for k, v in result.items() if k != "files"}, indent=1, default=str))
    with paths[1].open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["family", "learner", "model", "d", "users_needed", "status", "success_rate", "mean_error", "bound", "bound_source", "measured_over_bound", "seconds"])
        for r in result["rows"]:
            w.writerow([r["family"], r["learner"], r["model"], r["d"], r["users_needed"] or "", r["status"], r["success_rate"], r["mean_error"], r["bound"] or "", r["bound_source"], r["measured_over_bound"] or "", r["seconds"]])
    with paths[2].open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["learner", "d", "users", "trials", "success_rate", "mean_error"])
        for e in result["curves"]:
            w.writerow([e["learner"], e["d"], e["users"], e["trials"], e["success_rate"], e["mean_error"]])
    paths[3].write_text(result["table"])
    _plot(result, paths[4])
    return paths


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cap = result["config"]["cap"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    ax = axes[0]
    styles = {
        "LI": ("tab:blue", "o"),
        "LNI-a": ("tab:orange", "s"),
        "LNI-b": ("tab:red", "D"),
        "central-A*": ("tab:green", "^"),
        "central-occam": ("tab:olive", "v"),
        "local-parity": ("tab:purple", "P"),
        "central-EM": ("tab:brown", "<"),
        "central-Adist": ("tab:gray", ">"),
    }
    for learner in dict.fromkeys(r["learner"] for r in result["rows"]):
        rows = [r for r in result["rows"] if r["learner"] == learner]
        color, marker = styles.get(learner, ("k", "x"))
        label = f"{learner} ({rows[0]['family'].replace('_', '-')})"
        ok = [(r["d"], r["users_needed"]) for r in rows if r["users_needed"] is not None]
        failed = [r["d"] for r in rows if r["users_needed"] is None]
        if ok:
            ax.plot(*zip(*ok), color=color, marker=marker, label=label)
        if failed:
            ax.scatter(failed, [cap] * len(failed), color=color, marker=marker, facecolors="none", s=90, label=f"{learner}: > cap" if not ok else None)
    ax.axhline(cap, color="gray", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("d")
    ax.set_ylabel(f"users for error ≤ {result['config']['alpha']} w.p. ≥ {1 - result['config']['beta']:.0%}")
    ax.set_title("Users needed (open markers: failed at the cap)")
    ax.legend(fontsize=7)
    ax = axes[1]
    for learner in dict.fromkeys(e["learner"] for e in result["curves"]):
        pts = sorted((e["users"], e["mean_error"]) for e in result["curves"] if e["learner"] == learner)
        color, marker = styles.get(learner, ("k", "x"))
        ax.plot(*zip(*pts), color=color, marker=marker, label=learner)
    if result["curves"]:
        ax.axhline(0.25, color="gray", ls="--", lw=1)
        ax.set_title(f"MASKED-PARITY, d = {result['curves'][0]['d']}: mean error against users")
    ax.set_xscale("log")
    ax.set_xlabel("users")
    ax.set_ylabel("mean true error")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


MODEL_SHORT = {"local interactive": "LI", "local non-interactive": "LNI", "central": "CNI", "central (ε, δ = 1e-06)": "CNI(δ)"}
SUMMARY_COLUMNS = ("class", "learner", "model", "d", "users", "error", "÷ bound")
SUMMARY_CAPTION = "users: needed for error ≤ α; ÷ bound: users / (Lemma 4.3 local, Thm 3.8 A*, Thm 3.7 Occam, BNS for POINT)"


def summary_rows(result: dict[str, Any]) -> tuple[tuple[str, ...], ...]:
    """The result as compact rows under ``SUMMARY_COLUMNS`` (the full table is ``result["table"]``);
    the class is named on its first row only."""
    cap = result["config"]["cap"]
    rows = []
    previous = None
    for r in result["rows"]:
        family = r["family"].upper().replace("_", "-")
        rows.append(
            (
                "" if family == previous else family,
                r["learner"],
                MODEL_SHORT.get(r["model"], r["model"]),
                str(r["d"]),
                f"{r['users_needed']:,}" if r["users_needed"] is not None else f"> {cap:,}",
                f"{r['mean_error']:.3f}" if r["mean_error"] is not None else "—",
                f"{r['measured_over_bound']:.3f}" if r["measured_over_bound"] is not None else "—",
            )
        )
        previous = family
    return tuple(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small ranges and few trials (make demo)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results/separation", help="output directory (default results/separation)")
    args = parser.parse_args(argv)
    config = quick_config(args.seed, args.out) if args.quick else Config(seed=args.seed, out=args.out)
    result = asyncio.run(run(config, log=lambda s: print(s, file=sys.stderr, flush=True)))
    print(result["table"])
    print(f"plot: {Path(args.out) / 'separation.png'}   ({result['seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
