"""One cell of the separation sweep that `make separation` plans instead of simulating, simulated.

The sweep gives a one-round learner's plan, not a measurement, where a trial would hold more than
``simulate_users_max`` = 6·10^6 users (docs/learners.md, "(planned)"). This runs all ``--trials``
seeded trials of one learner at d and ``factor × plan`` users over gRPC with ``--processes``
client processes, exactly as the sweep runs a size (``ldp.simulations.separation.evaluate_cell``:
the same targets, populations and success rule), and prints k/T, its 95 % Clopper–Pearson interval
and the verdict. d = 20 needs ≈ 5·10^9 reports per 100 trials: a 16-core machine (2 min there).

Usage::

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


async def cell(learner: str, d: int, factor: float, trials: int, processes: int, seed: int) -> dict[str, object]:
    config = separation.Config(seed=seed, trials=trials)
    plan_of = separation.LEARNERS[learner].plan
    assert plan_of is not None  # --learner offers only the learners with a plan
    plan = plan_of(config, d)
    users = int(plan * factor)
    start = time.perf_counter()
    async with grpc_oracle_factory(processes, load_timeout_s=600.0) as factory:
        result = await separation.evaluate_cell(config, factory, learner, d, users)
    return {**result, "learner": learner, "d": d, "plan": plan, "factor": factor, "processes": processes, "seed": seed, "wall_s": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learner", default="LNI", choices=[k for k, v in separation.LEARNERS.items() if v.plan])
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--factor", type=float, default=1.0, help="users = factor × the learner's plan")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--processes", type=int, default=14)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    result = asyncio.run(cell(args.learner, args.d, args.factor, args.trials, args.processes, args.seed))
    print(json.dumps(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
