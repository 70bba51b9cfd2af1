"""Scaling benchmark: one round to every user, in process and over gRPC with 1 … P client processes.

What: for n users (population: parity d = 8, one ``binary_rr`` round asking everyone, so each report
is one byte), the median wall time of ``Session.round`` (split, send, answer on the shards, gather,
reassemble) on ``InProcessLROracle`` (one shard, this process) and over gRPC with P client
processes (``launch_local``). It prints, in one run:

- reports/s in process, and the gRPC rate with P processes as a multiple of it (the parallel
  speedup; ``efficiency`` = speedup / P);
- the aggregator's bytes per user: its resident memory growth while it holds the round's
  ``Reports`` (steady) and its peak during the round, both *beyond the report bytes* (1 per user);
- the clients' bytes per user: resident memory after loading (records + ledgers + the
  interpreter), their resident peak during a round, and their peak while generating the
  records as a multiple of the loaded state;
- where the time goes at the largest n: the aggregator's share of a round (the clients' answer
  time is measured from their side of the round trip).

Memory is read from ``/proc/PID/status`` (VmRSS, VmHWM; peaks are reset through
``/proc/PID/clear_refs``), so this runs on Linux. Speed is measured here, never asserted in tests.

Usage::

    python benchmarks/scaling.py                      # 10^6 and 10^7 users, 1, 2 processes
    python benchmarks/scaling.py --sizes 1e6,1e7,1e8 --processes 1,2,4,8,14 --json results/scaling.json
    python benchmarks/scaling.py --sizes "" --requests 1000,8000   # rounds of many small requests
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ldp.core.concepts import ConceptClass, ParityConcept, ProductBernoulli
from ldp.core.population import PopulationSpec
from ldp.core.queries import QuerySpec
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import SessionKind
from ldp.local.oracle import InProcessLROracle, LROracle, Reports
from ldp.local.session import Request, Session
from ldp.wire.launcher import launch_local

ROUND = RandomizerSpec("binary_rr", QuerySpec("field", {"field": "x", "index": 0}), 2.0**-12)
REPORT_BYTES = 1  # a binary_rr report is one uint8


def population(n: int) -> PopulationSpec:
    # A budget of 2^10 and ε = 2^-12 per round: no round is ever refused during the benchmark.
    return PopulationSpec(ConceptClass("parity", 8), ParityConcept((1, 0, 1, 0, 0, 0, 0, 1)), n, budget=1024.0, seed=1, distribution=ProductBernoulli(0.3))


def process_status(pid: int | str, key: str) -> int:
    """A /proc/PID/status memory field (VmRSS, VmHWM) in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def write_results(out: Path, name: str, text: str, fields: Sequence[str], rows: Sequence[Any]) -> None:
    """``out/name.md`` (``text``) and ``out/name.csv`` (the dataclass ``rows``, columns ``fields``)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text(text, encoding="utf-8")
    with (out / f"{name}.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(fields))
        writer.writeheader()
        for row in rows:
            writer.writerow(asdict(row))


def bench_arguments(description: str, quick: str, reps: int, out: str, argv: Sequence[str] | None) -> argparse.Namespace:
    """The options every projection benchmark takes: ``--quick`` (its meaning: ``quick``), ``--reps``
    (≥ 3 interleaved repetitions, default ``reps``) and ``--out`` (default ``out``); a bad
    ``--reps`` is one line and exit 2."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--reps", type=int, default=reps, help=f"interleaved repetitions, ≥ 3 (default {reps})")
    parser.add_argument("--out", type=Path, default=Path(out), help=f"output folder (default {out})")
    args = parser.parse_args(argv)
    if args.reps < 3:
        parser.error(f"--reps must be ≥ 3 (a median of at least 3 repetitions), got {args.reps}")
    return args


def process_cpu_s(pid: int) -> float:
    """A process's CPU seconds so far, all its threads (utime + stime of /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S  # fields 14 and 15 of proc(5), counted after the name


def _reset_peak(pid: int | str) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS


@dataclass
class Row:
    n: int
    transport: str  # "in process" or "gRPC P"
    processes: int
    seconds: float  # median seconds of one round
    aggregator_steady_bytes_per_user: float = 0.0  # beyond the report bytes
    aggregator_peak_bytes_per_user: float = 0.0  # beyond the report bytes
    client_bytes_per_user: float = 0.0  # resident, all clients, after loading
    client_generation_peak_ratio: float = 0.0  # peak while generating / steady, worst client
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.n / self.seconds


async def _rounds(oracle: LROracle, n: int, repeats: int) -> tuple[float, Reports]:
    """Median seconds of one round asking all n users (after one warm-up round)."""
    session = Session(oracle, SessionKind.INTERACTIVE)
    times: list[float] = []
    reports: Reports | None = None
    for k in range(repeats + 1):
        reports = None  # drop the previous round's reports before the next
        t = time.perf_counter()
        (reports,) = await session.round([Request.of(range(n), ROUND)])
        if k:
            times.append(time.perf_counter() - t)
        counts = reports.counts()
        assert counts["answered"] == n, counts
    assert reports is not None
    return statistics.median(times), reports


async def memory_round(oracle: LROracle, n: int, pids: list[int]) -> tuple[float, float, float]:
    """One more round: the aggregator's (steady, peak) bytes per user beyond the reports, from
    tracemalloc (numpy's arrays and Python's objects; gRPC's C buffers are not counted), and the
    clients' resident peak during the round, bytes per user over all clients."""
    session = Session(oracle, SessionKind.INTERACTIVE)
    for p in pids:
        _reset_peak(p)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        (reports,) = await session.round([Request.of(range(n), ROUND)])
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    clients_peak = sum(process_status(p, "VmHWM") for p in pids)
    assert reports.counts()["answered"] == n
    return (after - before - REPORT_BYTES * n) / n, (peak - before - REPORT_BYTES * n) / n, clients_peak / n


async def measure_in_process(n: int, repeats: int) -> Row:
    oracle = InProcessLROracle(population(n))
    seconds, reports = await _rounds(oracle, n, repeats)
    del reports
    return Row(n, "in process", 1, seconds)


async def measure_grpc(n: int, processes: int, repeats: int) -> Row:
    async with launch_local(population(n), processes=processes, ready_timeout_s=1800.0) as oracle:
        pids = [c.process.pid for c in oracle.clients]  # type: ignore[attr-defined]
        steady = sum(process_status(p, "VmRSS") for p in pids)
        generation = max(process_status(p, "VmHWM") / process_status(p, "VmRSS") for p in pids)
        seconds, reports = await _rounds(oracle, n, repeats)
        del reports
        agg_steady, agg_peak, clients_round = await memory_round(oracle, n, pids)
        return Row(n, f"gRPC {processes}", processes, seconds, agg_steady, agg_peak, steady / n, generation, {"client_round_peak_bytes_per_user": clients_round})


async def main_async(sizes: list[int], processes: list[int], repeats: int, out: Path | None, in_process_max: int = 10**8) -> list[Row]:
    rows: list[Row] = []
    console = Console(width=None if sys.stdout.isatty() else 200)  # a log keeps the whole table
    for n in sizes:
        reps = max(3, repeats * 10**6 // n) if n < 10**6 else repeats
        if n <= in_process_max:
            console.print(f"[dim]n = {n:.0e}: in process …[/dim]")
            rows.append(await measure_in_process(n, reps))
        for p in processes:
            if p > n:
                continue
            console.print(f"[dim]n = {n:.0e}: gRPC with {p} client process(es) …[/dim]")
            rows.append(await measure_grpc(n, p, reps))
    table = Table(title=f"One binary_rr round to every user ({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, median)")
    for col in ("n", "transport", "round (s)", "reports/s", "× in process", "efficiency", "aggregator B/user steady (peak)", "clients B/user loaded (round peak)", "generation peak / loaded"):
        table.add_column(col, justify="right")
    for n in sizes:
        # Above --in-process-max the in-process rate of the largest n measured is the reference.
        base = max((r for r in rows if r.transport == "in process" and r.n <= n), key=lambda r: r.n)
        for r in (r for r in rows if r.n == n):
            ratio = r.rate / base.rate
            grpc = r.transport != "in process"
            table.add_row(
                f"{n:.0e}",
                r.transport,
                f"{r.seconds:.3f}",
                f"{r.rate:.3g}",
                f"{ratio:.2f}×",
                f"{ratio / r.processes:.0%}" if grpc else "",
                f"{r.aggregator_steady_bytes_per_user:.2f} ({r.aggregator_peak_bytes_per_user:.2f})" if grpc else "",
                f"{r.client_bytes_per_user:.1f} ({r.extra.get('client_round_peak_bytes_per_user', 0):.1f})" if grpc else "",
                f"{r.client_generation_peak_ratio:.2f}" if grpc else "",
            )
    console.print(table)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"machine": platform.machine(), "cores": os.cpu_count(), "rows": [asdict(r) for r in rows]}, indent=1))
        console.print(f"wrote {out}")
    return rows


async def requests_round(counts: list[int], processes: int = 2, users_each: int = 10) -> None:
    """One round of m small requests (``users_each`` users each), in process and over gRPC: the
    time should grow linearly in m (matching replies to requests was quadratic: 0.39 s at 1,000
    requests, 7.9 s at 8,000)."""
    table = Table(title=f"One round of m requests of {users_each} users each (median of 3)")
    for col in ("m requests", "in process (s)", f"gRPC {processes} (s)", "gRPC per request (µs)"):
        table.add_column(col, justify="right")
    for m in counts:
        n = m * users_each
        times = {}
        for transport in ("in process", "gRPC"):
            async def once(oracle: LROracle, m: int = m) -> float:
                session = Session(oracle, SessionKind.INTERACTIVE)
                spent = []
                for _ in range(4):
                    t = time.perf_counter()
                    out = await session.round([Request.of(range(k * users_each, (k + 1) * users_each), ROUND) for k in range(m)])
                    spent.append(time.perf_counter() - t)
                    assert len(out) == m and all(r.counts()["answered"] == users_each for r in out)
                return statistics.median(spent[1:])

            if transport == "in process":
                times[transport] = await once(InProcessLROracle(population(n)))
            else:
                async with launch_local(population(n), processes=processes) as oracle:
                    times[transport] = await once(oracle)
        table.add_row(f"{m:,}", f"{times['in process']:.3f}", f"{times['gRPC']:.3f}", f"{times['gRPC'] / m * 1e6:.0f}")
    Console(width=None if sys.stdout.isatty() else 200).print(table)


def _sizes(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",") if x]


def main(argv: Any = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=_sizes, default=_sizes("1e6,1e7"), help="comma-separated user counts (default 1e6,1e7)")
    parser.add_argument("--processes", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2], help="comma-separated client process counts (default 1,2)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per measurement at n ≥ 10^6 (more below)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    parser.add_argument(
        "--in-process-max", type=float, default=1e8, help="measure in process only up to this n; above it, compare with the largest n measured (default 1e8)"
    )
    parser.add_argument("--requests", type=_sizes, default=[], help="also time one round of m small requests for each m given (e.g. 1000,8000)")
    args = parser.parse_args(argv)
    if args.requests:
        asyncio.run(requests_round(args.requests))
    if args.sizes:
        asyncio.run(main_async(args.sizes, args.processes, args.repeats, args.json, int(args.in_process_max)))


if __name__ == "__main__":
    main()
