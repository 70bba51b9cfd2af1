"""One cell of the separation sweep, through the protocol: a cell `make separation` plans, or draws from its law.

The sweep gives a learner's plan, not a measurement, where a trial would hold more than
``simulate_users_max`` users, and draws the one-round learners' counts from their exact law
(``ldp.learners.masked_parity_law``, "(law)" in docs/learners.md) where their plan exceeds
``protocol_users_max`` = 2·10^6 users. This runs all ``--trials`` seeded trials of one learner at
d and ``factor × plan`` users over gRPC with ``--processes`` client processes, exactly as the
sweep runs a size (``ldp.simulations.separation.evaluate_cell``: the same targets, populations
and success rule), and prints k/T, its 95 % Clopper–Pearson interval and the verdict. ``--law``
adds the same cell at its sufficient statistic (the sweep's own evaluation there: same targets,
other draws), so the two can be set side by side. d = 16 needs ≈ 5·10^8 reports per 100 trials
(a few minutes on 2 cores), d = 20 ≈ 5·10^9 (a 16-core machine: 2 min there).

Usage::

    python benchmarks/separation_cell.py --learner LNI-shared --d 16 --factor 1.5 --processes 2 --law
    python benchmarks/separation_cell.py --learner LNI --d 20 --factor 1.0 --processes 14
    python benchmarks/separation_cell.py --learner LNI --d 8 --trials 5 --processes 2   # small check
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from ldp.simulations import separation
from ldp.wire.launcher import grpc_oracle_factory


async def cell(learner: str, d: int, factor: float, trials: int, processes: int, seed: int, law: bool = False) -> dict[str, object]:
    config = separation.Config(seed=seed, trials=trials)
    plan_of = separation.LEARNERS[learner].plan
    assert plan_of is not None  # --learner offers only the learners with a plan
    plan = plan_of(config, d)
    users = int(plan * factor)
    start = time.perf_counter()
    async with grpc_oracle_factory(processes, load_timeout_s=600.0) as factory:
        result = await separation.evaluate_cell(config, factory, learner, d, users)
    out = {**result, "learner": learner, "d": d, "plan": plan, "factor": factor, "processes": processes, "seed": seed, "wall_s": round(time.perf_counter() - start, 1)}
    if law:  # the same cell as the sweep draws it (no process, no record: the counts' exact law)
        out["law"] = await separation.evaluate_cell(config, separation.in_process_oracle, learner, d, users, law=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learner", default="LNI", choices=[k for k, v in separation.LEARNERS.items() if v.plan])
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--factor", type=float, default=1.0, help="users = factor × the learner's plan")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--processes", type=int, default=14)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--law", action="store_true", help="also evaluate the cell at its sufficient statistic, as the sweep does past protocol_users_max")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    result = asyncio.run(cell(args.learner, args.d, args.factor, args.trials, args.processes, args.seed, args.law))
    print(json.dumps(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
