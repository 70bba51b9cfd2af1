"""Transport benchmark: reports/s in process vs over gRPC (1 and 2 client processes).

What: for a randomized-response round (binary_rr on one bit) and a Laplace round, at
n = 10^4, 10^5, 10^6 users, the median wall time of one full round (``Session.round``: split,
send, answer, gather, reassemble) on ``InProcessLROracle`` and over gRPC via ``launch_local``
with 1 and 2 client processes; prints reports/s and the gRPC / in-process ratio, then the
median latency of one interactive round at 10^5 users. Goals (issue 3): at 10^6 users gRPC
≥ 50 % of in-process throughput; an interactive round at 10^5 users under 20 ms.

Usage: ``python benchmarks/transport.py [--quick] [--repeats R]`` (``--quick``: n ≤ 10^5).
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import time
from typing import Any

from ldp.core.concepts import ConceptClass, ParityConcept, ProductBernoulli
from ldp.core.population import PopulationSpec
from ldp.core.queries import QuerySpec
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import SessionKind
from ldp.local.oracle import InProcessLROracle, LROracle
from ldp.local.session import Request, Session
from ldp.wire.launcher import launch_local

BIT = QuerySpec("field", {"field": "x", "index": 0})
ROUNDS = {
    "randomized response": RandomizerSpec("binary_rr", BIT, 2.0**-12),
    "discrete_laplace": RandomizerSpec("discrete_laplace", BIT, 2.0**-12),
}


def population(n: int) -> PopulationSpec:
    # A budget of 2^10 and ε = 2^-12 per round: no round is ever refused during the benchmark.
    return PopulationSpec(ConceptClass("parity", 8), ParityConcept((1, 0, 1, 0, 0, 0, 0, 1)), n, budget=1024.0, seed=1, distribution=ProductBernoulli(0.3))


async def time_rounds(oracle: LROracle, spec: RandomizerSpec, n: int, repeats: int) -> float:
    """Median seconds of one interactive round asking all n users (after one warm-up round)."""
    session = Session(oracle, SessionKind.INTERACTIVE)
    times = []
    for k in range(repeats + 1):
        t = time.perf_counter()
        (r,) = await session.round([Request.of(range(n), spec)])
        if k:
            times.append(time.perf_counter() - t)
        assert r.counts()["answered"] == n, r.counts()
    return statistics.median(times)


async def measure(transport: str, n: int, repeats: int) -> dict[str, float]:
    spec = population(n)
    if transport == "in-process":
        oracle = InProcessLROracle(spec)
        return {name: await time_rounds(oracle, r, n, repeats) for name, r in ROUNDS.items()}
    processes = int(transport.split()[1])
    async with launch_local(spec, processes=processes) as grpc_oracle:
        return {name: await time_rounds(grpc_oracle, r, n, repeats) for name, r in ROUNDS.items()}


async def main_async(sizes: list[int], repeats: int, latency_rounds: int) -> None:
    transports = ["in-process", "gRPC 1", "gRPC 2"]
    results: dict[tuple[str, int], dict[str, float]] = {}
    for n in sizes:
        reps = max(3, repeats * 10**4 // n) if n < 10**6 else repeats
        for t in transports:
            results[(t, n)] = await measure(t, n, reps)
    print(f"# transport benchmark ({platform.machine()}, {platform.python_version()}, median of rounds)\n")
    print("| round | n | in-process reports/s | gRPC 1 proc reports/s | gRPC 2 procs reports/s | gRPC 1 / in-process | gRPC 2 / in-process |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in ROUNDS:
        for n in sizes:
            rate = {t: n / results[(t, n)][name] for t in transports}
            print(
                f"| {name} | {n:.0e} | {rate['in-process']:.3g} | {rate['gRPC 1']:.3g} | {rate['gRPC 2']:.3g} "
                f"| {rate['gRPC 1'] / rate['in-process']:.0%} | {rate['gRPC 2'] / rate['in-process']:.0%} |"
            )
    n_lat = 10**5
    print(f"\n## latency of one interactive round at n = {n_lat:.0e} users (randomized response, median of {latency_rounds})\n")
    print("| transport | latency (ms) | transport overhead vs in-process (ms) |")
    print("|---|---:|---:|")
    lat: dict[str, float] = {}
    for t in transports:
        spec = population(n_lat)
        if t == "in-process":
            lat[t] = await time_rounds(InProcessLROracle(spec), ROUNDS["randomized response"], n_lat, latency_rounds)
        else:
            async with launch_local(spec, processes=int(t.split()[1])) as o:
                lat[t] = await time_rounds(o, ROUNDS["randomized response"], n_lat, latency_rounds)
        print(f"| {t} | {lat[t] * 1e3:.1f} | {(lat[t] - lat['in-process']) * 1e3:+.1f} |")


def main(argv: Any = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n ≤ 10^5 only")
    parser.add_argument("--repeats", type=int, default=5, help="rounds per measurement at 10^6 users (more at smaller n)")
    parser.add_argument("--latency-rounds", type=int, default=20)
    args = parser.parse_args(argv)
    sizes = [10**4, 10**5] if args.quick else [10**4, 10**5, 10**6]
    asyncio.run(main_async(sizes, args.repeats, args.latency_rounds))


if __name__ == "__main__":
    main()
