"""Scaling projection: one round at 10^8–10^9 users on 1–16 cores, from per-process costs measured here.

A **projection, not a measurement** (issue 27: "where a device machine is not lent, give a
projection from per-process costs, labelled as one"). On the 2-core machine it measures what one
round of ``benchmarks/scaling.py`` (a ``binary_rr`` round asking every user, one-byte reports) is
made of, through the same code paths (``InProcessLROracle``; ``launch_local`` with 1 and 2 client
processes on loopback; the population, the randomizer and the memory round are that benchmark's
own helpers), and projects the round's wall time on P cores from those costs.

What is measured (CPU time: ``time.process_time`` for this process — the aggregator and the
session, gRPC's threads included — and ``/proc/PID/stat`` utime + stime, summed over the client
processes, for the clients; wall time with ``time.perf_counter``), each cost the median of
``--reps`` ≥ 3 interleaved repetitions (the configurations take turns within every repetition),
each repetition a batch of rounds long enough for the clients' 10 ms clock ticks:

- ``c``, the clients' CPU per user and round (sampling, encoding the reply, writing it): the
  slope of the clients' CPU per round between the two largest sizes, with one process;
- ``a``, the aggregator's CPU per user and round (splitting, sending, receiving, checking and
  merging the reply parts, reassembling, the tally and the estimate — one ``count_nonzero``):
  the same slope for this process; and ``a_e``, the part of it spent after the last reply part
  arrived (from the last shard's reply, told by ``GrpcAggregator.add_reply_observer``, to the
  estimate's end: assembly, tally, estimate). The rest, ``a_s = a − a_e``, is spent on parts as they arrive;
- ``F``, the fixed wall time of a round (round trip, protobuf, the event loop): the round's wall
  time at the smallest size with one process, less that size's per-user part;
- ``r``, the aggregator's extra fixed CPU per additional client process and round: its CPU per
  round at the smallest size with two processes less with one;
- ``b`` and ``F_in``, the in-process round's CPU per user and its fixed wall time (the reference
  of the docs' "× in process" and efficiency);
- per process: start-up (interpreter, imports, connecting: the clients' CPU and the wall time to
  ready at the smallest size) and population load per user (the slope of the same between the
  two largest sizes); memory per user, clients (resident, loaded and at the round's peak) and
  aggregator (tracemalloc, beyond the one-byte reports, steady and peak).

The model (one round asking all N users, P client processes and the aggregator on a machine of
K cores, users split evenly)::

    T(P, N)  = F + r·(P − 1) + N·(max(c/P, a_s, (c + a_s)/K) + a_e)
    T_in(N)  = F_in + N·b
    E_in(P)  = T_in(N) / (P·T(P, N))       the docs' efficiency: × in process, divided by P
    E_1(P)   = T(1, N) / (P·T(P, N))       parallel efficiency against one client process

The clients stream their reply in parts as they draw it (``Shard.answer_in_parts``), so the
aggregator's passes over the parts (``a_s``) overlap the clients' sampling: that phase lasts as
long as the slower of the clients (c/P), the aggregator (a_s) and the machine's cores
((c + a_s)/K, all of it on K cores). Serial after it: ``a_e`` and the fixed work (``F``, ``r``).
The projection's machine has K = 16 cores for every P. With a_s = 0 and a_e = a it is the model
of the code before streaming (T = F + r·(P − 1) + N·(c/P + a)), which the 16-core check uses:
that machine ran it. Assumed parallel and contention-free: the clients' ``c`` (no
memory-bandwidth or cache contention between cores: the 16-core check below shows what that
leaves out). The wall times are at this machine's per-core speed; the efficiencies are ratios and
carry over to a machine whose cores are uniformly slower.

Checks, printed and written:

- against this machine: T(1) and T(2) predicted from the one-process costs alone (``r`` = 0:
  ``r`` is measured from the two-process run) on its K cores against the measured rounds, at
  each size (2 client processes and the aggregator share the 2 cores; the cores that other work
  on the shared machine held during the round — /proc/stat's busy time less this run's — are
  reported, with the prediction again on the cores left: K = cores − others);
- against the 16-core machine's measured run (docs/benchmarks.md, "Scaling", 10^8 users: 4.86×
  over in process at 14 processes, 35 %): the same model with that machine's costs — ``c + a``
  from its one-process round and ``a`` = 2.7 ns per user from its aggregator profile — against
  its rounds at P = 2 … 14, and the ``a`` that a least-squares fit of those rounds implies.

Usage::

    python benchmarks/scaling_projection.py            # 10^4 (fixed costs), 10^6, 10^7 users; ≈ 40 s
    python benchmarks/scaling_projection.py --quick    # 10^3, 10^4, 10^5: a smoke run (seconds)

Writes ``results/scaling_projection/scaling_projection.{csv,md,png}`` (``--out`` to move them).
Speed is measured here, never asserted in tests (tests/test_scaling_projection.py runs ``--quick``
as a process and checks the model against hand-computed values).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark scaling.py, run as a script or imported

from scaling import REPORT_BYTES, ROUND, bench_arguments, memory_round, population, process_cpu_s, process_status, write_results  # noqa: E402

from ldp.local.messages import SessionKind  # noqa: E402
from ldp.local.oracle import InProcessLROracle, LROracle  # noqa: E402
from ldp.local.session import Request, Session  # noqa: E402
from ldp.wire.launcher import launch_local  # noqa: E402

LABEL = "projection from per-process costs measured on a 2-core machine"
PROJECT_SIZES = (10**8, 10**9)
PROJECT_PROCESSES = (1, 2, 4, 8, 14, 16)
PROJECT_CORES = 16  # the projection's machine: 16 cores whatever P
TARGET_EFFICIENCY = 0.70  # issue 27: 16 cores at ≥ 70 % parallel efficiency at 10^8 users
FIELDS = [
    "n",
    "processes",
    "round_s",
    "in_process_s",
    "speedup_vs_in_process",
    "efficiency_vs_in_process",
    "efficiency_vs_one_process",
    "serial_share",
    "bound",
    "load_s",
    "memory_gib",
    "label",
]

# The 16-core machine's run (docs/benchmarks.md, "Scaling: 10^6 to 10^9 users", 10^8 users, one
# run): in process, then gRPC with P client processes; and its aggregator's own work per user
# from the cProfile of the 14-process round (same section, "≈ 2.7 ns per user").
SIXTEEN_CORE_N = 10**8
SIXTEEN_CORE_IN_PROCESS_S = 2.538
SIXTEEN_CORE_ROUNDS_S = {1: 2.935, 2: 1.821, 4: 1.071, 8: 0.672, 14: 0.522}
SIXTEEN_CORE_AGGREGATOR_S_PER_USER = 2.7e-9


@dataclass(frozen=True)
class Costs:
    """The per-round costs the model is made of (seconds; per user where named so).

    ``fixed_s`` F, ``per_process_s`` r, ``client_s_per_user`` c (CPU of all clients together),
    ``aggregator_s_per_user`` a, of which ``aggregator_after_s_per_user`` a_e after the last
    reply part (None: all of it, no overlap), ``in_process_fixed_s`` F_in,
    ``in_process_s_per_user`` b; and,
    for the start-up column, ``startup_s`` (one client process's start, wall) and
    ``load_s_per_user`` (population generation, CPU per user); for the memory column,
    ``client_bytes_per_user`` (round peak), ``client_fixed_bytes`` (per process) and
    ``aggregator_bytes_per_user`` (peak, the reports included).
    """

    fixed_s: float
    per_process_s: float
    client_s_per_user: float
    aggregator_s_per_user: float
    in_process_fixed_s: float
    in_process_s_per_user: float
    startup_s: float = 0.0
    load_s_per_user: float = 0.0
    client_bytes_per_user: float = 0.0
    client_fixed_bytes: float = 0.0
    aggregator_bytes_per_user: float = 0.0
    aggregator_after_s_per_user: float | None = None

    @property
    def after_s_per_user(self) -> float:
        """a_e: the aggregator's CPU per user after the last reply part (all of a when unknown)."""
        a = self.aggregator_s_per_user
        return a if self.aggregator_after_s_per_user is None else min(a, self.aggregator_after_s_per_user)

    @property
    def streamed_s_per_user(self) -> float:
        """a_s = a − a_e: the aggregator's CPU per user on reply parts as they arrive."""
        return self.aggregator_s_per_user - self.after_s_per_user


@dataclass(frozen=True)
class Projection:
    n: int
    processes: int
    round_s: float
    in_process_s: float
    speedup_vs_in_process: float
    efficiency_vs_in_process: float
    efficiency_vs_one_process: float
    serial_share: float  # the aggregator's serial part of T(P): (F + r·(P − 1) + N·a_e) / T(P)
    bound: str  # what limits the overlapped phase: "clients", "aggregator" or "cores"
    load_s: float
    memory_gib: float
    label: str = LABEL


def _overlapped(costs: Costs, processes: int, cores: int) -> tuple[float, str]:
    """Per user, the phase in which the clients sample and the aggregator checks the parts:
    max(c/P, a_s, (c + a_s)/K), and which of the three it is."""
    c, a_s = costs.client_s_per_user, costs.streamed_s_per_user
    return max((c / processes, "clients"), (a_s, "aggregator"), ((c + a_s) / cores, "cores"))


def round_seconds(costs: Costs, n: int, processes: int, cores: int = PROJECT_CORES) -> float:
    """T(P, N) = F + r·(P − 1) + N·(max(c/P, a_s, (c + a_s)/K) + a_e): one round asking all N users
    over P client processes on a machine of K cores."""
    return costs.fixed_s + costs.per_process_s * (processes - 1) + n * (_overlapped(costs, processes, cores)[0] + costs.after_s_per_user)


def in_process_seconds(costs: Costs, n: int) -> float:
    """T_in(N) = F_in + N·b: the same round in process (one shard, no transport)."""
    return costs.in_process_fixed_s + n * costs.in_process_s_per_user


def project(costs: Costs, n: int, processes: int) -> Projection:
    """The model at (N, P): round time, speedup and both efficiencies, serial share, load time
    (one process's start-up, then its N/P users generated) and memory (clients and aggregator)."""
    t = round_seconds(costs, n, processes)
    t_in = in_process_seconds(costs, n)
    serial = costs.fixed_s + costs.per_process_s * (processes - 1) + n * costs.after_s_per_user
    memory = processes * costs.client_fixed_bytes + n * (costs.client_bytes_per_user + costs.aggregator_bytes_per_user)
    return Projection(
        n,
        processes,
        t,
        t_in,
        t_in / t,
        t_in / (processes * t),
        round_seconds(costs, n, 1) / (processes * t),
        serial / t,
        _overlapped(costs, processes, PROJECT_CORES)[1],
        costs.startup_s + n / processes * costs.load_s_per_user,
        memory / 2**30,
    )


def serial_budget(costs: Costs, processes: int, target: float = TARGET_EFFICIENCY) -> float:
    """The largest serial aggregator CPU per user ``a_e`` for which E_in(P) ≥ ``target`` as N → ∞ on
    K = P cores, with m = max(c/P, a_s, (c + a_s)/P) the overlapped phase per user:
    b / (P·(m + a_e)) ≥ target ⇔ a_e ≤ b/(target·P) − m (negative: no ``a_e`` reaches it)."""
    overlapped = _overlapped(costs, processes, processes)[0]
    return costs.in_process_s_per_user / (target * processes) - overlapped


def serial_budget_one(costs: Costs, processes: int, target: float = TARGET_EFFICIENCY) -> float:
    """The largest ``a_e`` for which E_1(P) ≥ ``target`` as N → ∞ on K = P cores (T(1) = N·(c + a_e),
    m as in ``serial_budget``): (c + a_e)/(P·(m + a_e)) ≥ target ⇔ a_e ≤ (c − target·P·m)/(target·P − 1)."""
    overlapped = _overlapped(costs, processes, processes)[0]
    return (costs.client_s_per_user - target * processes * overlapped) / (target * processes - 1)


def sixteen_core_check() -> dict[str, Any]:
    """The model with the 16-core machine's own costs against its measured rounds at 10^8 users.

    c + a from its one-process round (F and r are a few ms, below the rounds' noise, and set
    to 0), a from its aggregator profile; and the (c, a) of a least-squares fit of
    T(P) = N·(c/P + a) to all its rounds (P = 1 … 14)."""
    n = SIXTEEN_CORE_N
    a = SIXTEEN_CORE_AGGREGATOR_S_PER_USER
    c = SIXTEEN_CORE_ROUNDS_S[1] / n - a
    costs = Costs(0.0, 0.0, c, a, 0.0, SIXTEEN_CORE_IN_PROCESS_S / n)
    ps = sorted(SIXTEEN_CORE_ROUNDS_S)
    design = np.array([[n / p, n] for p in ps], dtype=np.float64)
    (c_fit, a_fit), *_ = np.linalg.lstsq(design, np.array([SIXTEEN_CORE_ROUNDS_S[p] for p in ps]), rcond=None)
    fitted = Costs(0.0, 0.0, float(c_fit), float(a_fit), 0.0, SIXTEEN_CORE_IN_PROCESS_S / n)
    rows = []
    for p in ps:
        pred = round_seconds(costs, n, p)
        measured = SIXTEEN_CORE_ROUNDS_S[p]
        rows.append(
            {
                "processes": p,
                "measured_s": measured,
                "predicted_s": pred,
                "error": pred / measured - 1,
                "measured_efficiency": SIXTEEN_CORE_IN_PROCESS_S / (p * measured),
                "predicted_efficiency": SIXTEEN_CORE_IN_PROCESS_S / (p * pred),
                "fitted_s": round_seconds(fitted, n, p),
            }
        )
    return {"costs": asdict(costs), "fitted": asdict(fitted), "rows": rows, "projected_16": asdict(project(costs, n, 16)), "fitted_16": asdict(project(fitted, n, 16))}


# --- measurement ---------------------------------------------------------------------------------


def _batch(n: int) -> int:
    """Rounds per repetition: ≈ 5·10^7 user-rounds (≈ 1 s of client CPU against a 10 ms
    tick, and long enough that a burst of other work on the shared machine is averaged), 3 … 50
    rounds."""
    return max(3, min(50, math.ceil(5 * 10**7 / n)))


@dataclass
class Config:
    name: str  # "in process" or "gRPC P"
    processes: int  # 0 in process
    oracle: LROracle
    pids: list[int]
    session: Session
    ready_s: float = 0.0  # wall time to ready (load in process, launch over gRPC)
    startup_cpu_s: float = 0.0  # the clients' CPU at ready (this process's CPU in process)
    loaded_bytes: float = 0.0  # the clients' resident memory at ready


_CLOCK_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")  # /proc/stat counts in clock ticks


def _busy_s() -> float:
    """CPU seconds the whole machine has spent busy so far (/proc/stat: all but idle and iowait)."""
    values = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) * _CLOCK_TICK_S


# This process's CPU time when a shard's reply was last resolved (its last part checked: the
# aggregator's public reply observer, ``GrpcAggregator.add_reply_observer``): the start of the
# aggregator's serial work after the parts (a_e).
_LAST_FINISH = [0.0]


def _note_finish(shard: str, reply: Any) -> None:
    _LAST_FINISH[0] = time.process_time()


async def _timed_batch(cfg: Config, n: int, rounds: int) -> tuple[float, float, float, float, float]:
    """Per round: wall seconds, this process's CPU seconds, the clients' CPU seconds (summed);
    the cores that other work on the machine kept busy meanwhile (its busy CPU less ours, over
    the wall time: the machine is shared, and the 2-process check needs to know); and this
    process's CPU seconds after the last shard's last reply part (a_e's share; 0 in process)."""
    m0 = _busy_s()
    c0 = sum(process_cpu_s(p) for p in cfg.pids)
    a0 = time.process_time()
    t0 = time.perf_counter()
    after = 0.0
    for _ in range(rounds):
        _LAST_FINISH[0] = math.nan
        (reports,) = await cfg.session.round([Request.of(range(n), ROUND)])
        counts = reports.counts()
        ones = int(np.count_nonzero(reports.values))  # the estimate's one pass (fraction of 1 reports)
        assert counts["answered"] == n and 0 <= ones <= n, counts
        del reports
        if cfg.processes:
            after += time.process_time() - _LAST_FINISH[0]
    wall = time.perf_counter() - t0
    agg = time.process_time() - a0
    clients = sum(process_cpu_s(p) for p in cfg.pids) - c0
    others = max(0.0, _busy_s() - m0 - agg - clients) / wall
    return wall / rounds, agg / rounds, clients / rounds, others, after / rounds


async def measure_size(n: int, processes: Sequence[int], reps: int, log: Any) -> dict[str, dict[str, float]]:
    """Every cost at n users, for in process and each P: medians over ``reps`` interleaved repetitions."""
    out: dict[str, dict[str, float]] = {}
    async with contextlib.AsyncExitStack() as stack:
        t0, c0 = time.perf_counter(), time.process_time()
        inproc = InProcessLROracle(population(n))
        configs = [Config("in process", 0, inproc, [], Session(inproc, SessionKind.INTERACTIVE), time.perf_counter() - t0, time.process_time() - c0)]
        for p in processes:
            t0 = time.perf_counter()
            oracle = await stack.enter_async_context(launch_local(population(n), processes=p, ready_timeout_s=1800.0))
            ready = time.perf_counter() - t0
            pids = [c.process.pid for c in oracle.clients]  # type: ignore[attr-defined]
            oracle.aggregator.add_reply_observer(_note_finish)  # type: ignore[attr-defined]
            cfg = Config(f"gRPC {p}", p, oracle, pids, Session(oracle, SessionKind.INTERACTIVE), ready)
            cfg.startup_cpu_s = sum(process_cpu_s(q) for q in pids)  # interpreter, imports, records, connecting
            cfg.loaded_bytes = sum(process_status(q, "VmRSS") for q in pids)
            configs.append(cfg)
        for cfg in configs:  # warm-up: first-round imports, gRPC channels, the shards' randomizer cache
            await _timed_batch(cfg, n, 1)
        rounds = _batch(n)
        samples: dict[str, list[tuple[float, float, float, float, float]]] = {cfg.name: [] for cfg in configs}
        for rep in range(reps):
            log(f"n = {n:.0e}: repetition {rep + 1}/{reps} ({rounds} rounds per configuration)")
            # Interleaved, and the order rotated each repetition, so that a slow spell of the
            # (shared) machine falls on every configuration alike.
            for cfg in configs[rep % len(configs) :] + configs[: rep % len(configs)]:
                samples[cfg.name].append(await _timed_batch(cfg, n, rounds))
        for cfg in configs:
            wall, agg, clients, others, after = (statistics.median(s[i] for s in samples[cfg.name]) for i in range(5))
            row = {"wall_s": wall, "aggregator_cpu_s": agg, "clients_cpu_s": clients, "others_cores": others, "aggregator_after_cpu_s": after, "ready_s": cfg.ready_s, "startup_cpu_s": cfg.startup_cpu_s}
            if cfg.processes:
                steady, peak, clients_peak = await memory_round(cfg.oracle, n, cfg.pids)
                row |= {"loaded_bytes": cfg.loaded_bytes, "clients_round_peak_bytes": clients_peak * n, "aggregator_peak_bytes": (peak + REPORT_BYTES) * n, "aggregator_steady_bytes": (steady + REPORT_BYTES) * n}
            out[cfg.name] = row
    return out


MIN_S_PER_USER = 1e-12  # the floor of a measured per-user cost (``derive_costs``)


def derive_costs(m: dict[int, dict[str, dict[str, float]]]) -> Costs:
    """The model's costs from the measurements (sizes: the smallest for the fixed costs, the two
    largest for the per-user slopes)."""
    sizes = sorted(m)
    small, lo, hi = sizes[0], sizes[-2], sizes[-1]

    def slope(name: str, key: str) -> float:
        return (m[hi][name][key] - m[lo][name][key]) / (hi - lo)

    # A per-user cost is positive; a slope at or below zero is noise (a loaded machine, CPU read in
    # 10 ms ticks, a --quick grid), so it is floored at 1 ps per user: the projection stays finite.
    c = max(slope("gRPC 1", "clients_cpu_s"), MIN_S_PER_USER)
    a = max(slope("gRPC 1", "aggregator_cpu_s"), MIN_S_PER_USER)
    a_after = min(a, max(slope("gRPC 1", "aggregator_after_cpu_s"), MIN_S_PER_USER))
    b = max(slope("in process", "aggregator_cpu_s"), MIN_S_PER_USER)  # in process, this process does everything
    fixed = m[small]["gRPC 1"]["wall_s"] - small * (c + a_after)
    fixed_in = m[small]["in process"]["wall_s"] - small * b
    r = m[small]["gRPC 2"]["aggregator_cpu_s"] - m[small]["gRPC 1"]["aggregator_cpu_s"] if "gRPC 2" in m[small] else 0.0
    load = (m[hi]["gRPC 1"]["startup_cpu_s"] - m[lo]["gRPC 1"]["startup_cpu_s"]) / (hi - lo)
    client_bytes = (m[hi]["gRPC 1"]["clients_round_peak_bytes"] - m[lo]["gRPC 1"]["clients_round_peak_bytes"]) / (hi - lo)
    client_fixed = m[small]["gRPC 1"]["loaded_bytes"]
    aggregator_bytes = m[hi]["gRPC 1"]["aggregator_peak_bytes"] / hi
    return Costs(
        max(fixed, 0.0),
        max(r, 0.0),  # a negative difference is noise: no process makes the aggregator cheaper
        c,
        a,
        max(fixed_in, 0.0),
        b,
        m[small]["gRPC 1"]["ready_s"],
        load,
        client_bytes,
        client_fixed,
        aggregator_bytes,
        a_after,
    )


def check_two(costs: Costs, m: dict[int, dict[str, dict[str, float]]]) -> list[dict[str, float]]:
    """T(1) and T(2) predicted from the one-process costs (r = 0) on this machine's K cores
    against the measured rounds; and T(2) again on the cores that other work left."""
    one = replace(costs, per_process_s=0.0)
    cores = os.cpu_count() or 2
    rows = []
    for n in sorted(m)[1:]:
        if "gRPC 2" not in m[n]:
            continue
        pred = round_seconds(one, n, 2, cores)
        measured = m[n]["gRPC 2"]["wall_s"]
        # The cores left while other work ran: K becomes cores − others (at least 1), all else the same.
        free = max(1.0, cores - m[n]["gRPC 2"]["others_cores"])
        c, a_s = one.client_s_per_user, one.streamed_s_per_user
        adjusted = one.fixed_s + n * (max(c / 2, a_s, (c + a_s) / free) + one.after_s_per_user)
        rows.append(
            {
                "n": n,
                "measured_s": measured,
                "predicted_s": pred,
                "error": pred / measured - 1,
                "others_cores": m[n]["gRPC 2"]["others_cores"],
                "predicted_free_s": adjusted,
                "error_free": adjusted / measured - 1,
                "measured_one_s": m[n]["gRPC 1"]["wall_s"],
                "predicted_one_s": round_seconds(one, n, 1, cores),
                "client_cpu_per_user_2_over_1": (m[n]["gRPC 2"]["clients_cpu_s"] / m[n]["gRPC 1"]["clients_cpu_s"]),
            }
        )
    return rows


# --- output --------------------------------------------------------------------------------------


def _ns(x: float) -> str:
    return f"{x * 1e9:.1f}"


def markdown(costs: Costs, a_two: float, table: list[Projection], two: list[dict[str, float]], sixteen: dict[str, Any], grid: str, load: str) -> str:
    lines = [
        f"**{LABEL[0].upper() + LABEL[1:]}** — not a measurement. Grid: {grid}; {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average {load}.",
        "",
        f"Model: T(P, N) = F + r·(P − 1) + N·(max(c/P, a_s, (c + a_s)/K) + a_e) on K = {PROJECT_CORES} cores; T_in(N) = F_in + N·b; E_in = T_in/(P·T(P)); E_1 = T(1)/(P·T(P)).",
        "",
        "| cost | value |",
        "|---|---:|",
        f"| c, clients' CPU per user (sample, encode, send) | {_ns(costs.client_s_per_user)} ns |",
        f"| a, aggregator's CPU per user (receive, check, merge, tally, estimate) | {_ns(costs.aggregator_s_per_user)} ns |",
        f"| a_s, of it on reply parts as they arrive (overlaps the clients' sampling) | {_ns(costs.streamed_s_per_user)} ns |",
        f"| a_e, of it after the last part (assembly, tally, estimate): serial | {_ns(costs.after_s_per_user)} ns |",
        f"| b, in-process round per user | {_ns(costs.in_process_s_per_user)} ns |",
        f"| F, fixed wall per round (gRPC 1) | {costs.fixed_s * 1e3:.2f} ms |",
        f"| r, aggregator CPU per extra process and round | {costs.per_process_s * 1e3:.3f} ms |",
        f"| F_in, fixed wall per round in process | {costs.in_process_fixed_s * 1e3:.2f} ms |",
        f"| client start-up to ready (wall, one process) | {costs.startup_s:.2f} s |",
        f"| population load, client CPU per user | {_ns(costs.load_s_per_user)} ns |",
        f"| clients' memory per user, round peak / per process | {costs.client_bytes_per_user:.1f} B / {costs.client_fixed_bytes / 2**20:.0f} MiB |",
        f"| aggregator's memory per user, peak (reports included) | {costs.aggregator_bytes_per_user:.2f} B |",
        f"| a with 2 client processes (diagnostic: the merge of 2 shards' parts; the model uses a) | {_ns(a_two)} ns |",
        f"| a_e allowed for E_in(16) ≥ 70 %: b/(0.7·16) − m, m = max(c/16, a_s, (c + a_s)/16) | {_ns(serial_budget(costs, 16))} ns |",
        f"| a_e allowed for E_1(16) ≥ 70 %: (c − 0.7·16·m)/(0.7·16 − 1) | {_ns(serial_budget_one(costs, 16))} ns |",
        "",
        "| N | P | round (s) | in process (s) | × in process | E_in | E_1 | serial share | overlapped phase bound by | load (s) | memory (GiB) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for p in table:
        lines.append(
            f"| 10^{round(math.log10(p.n))} | {p.processes} | {p.round_s:.3f} | {p.in_process_s:.3f} | {p.speedup_vs_in_process:.2f} | "
            f"{p.efficiency_vs_in_process:.0%} | {p.efficiency_vs_one_process:.0%} | {p.serial_share:.0%} | {p.bound} | {p.load_s:.1f} | {p.memory_gib:.1f} |"
        )
    lines += ["", f"Check on this machine (K = {os.cpu_count()} cores): T(1) and T(2) predicted from the one-process costs (r = 0) against measured rounds.", ""]
    lines += [
        "| N | T(1) measured (s) | T(1) model (s) | T(2) measured (s) | T(2) predicted (s) | error | cores busy with other work | T(2) predicted on the cores left (s) | error | clients' CPU, 2 ÷ 1 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in two:
        lines.append(
            f"| {r['n']:.0e} | {r['measured_one_s']:.4f} | {r['predicted_one_s']:.4f} | {r['measured_s']:.4f} | {r['predicted_s']:.4f} | {r['error']:+.0%} | "
            f"{r['others_cores']:.2f} | {r['predicted_free_s']:.4f} | {r['error_free']:+.0%} | {r['client_cpu_per_user_2_over_1']:.2f} |"
        )
    sc = sixteen["costs"]
    fit = sixteen["fitted"]
    lines += [
        "",
        f"Check against the 16-core machine's run at 10^8 (docs/benchmarks.md): c = {_ns(sc['client_s_per_user'])} ns, a = {_ns(sc['aggregator_s_per_user'])} ns "
        f"(its one-process round and its aggregator profile); least squares over P = 1 … 14: c = {_ns(fit['client_s_per_user'])} ns, a = {_ns(fit['aggregator_s_per_user'])} ns. "
        "That machine ran the code before replies were streamed: the model there has a_s = 0, a_e = a.",
        "",
        "| P | measured (s) | model (s) | error | E_in measured | E_in model | fitted model (s) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sixteen["rows"]:
        lines.append(
            f"| {r['processes']} | {r['measured_s']:.3f} | {r['predicted_s']:.3f} | {r['error']:+.0%} | {r['measured_efficiency']:.0%} | {r['predicted_efficiency']:.0%} | {r['fitted_s']:.3f} |"
        )
    p16, f16 = sixteen["projected_16"], sixteen["fitted_16"]
    lines.append(f"| 16 (projected) | | {p16['round_s']:.3f} | | | {p16['efficiency_vs_in_process']:.0%} | {f16['round_s']:.3f} ({f16['efficiency_vs_in_process']:.0%}) |")
    return "\n".join(lines) + "\n"


def plot(table: list[Projection], sixteen: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for n, style in zip(PROJECT_SIZES, ("-", "--"), strict=True):
        rows = [p for p in table if p.n == n]
        ps = [p.processes for p in rows]
        ax.plot(ps, [p.efficiency_vs_in_process for p in rows], "o" + style, color="C0", label=f"E_in (vs in process), N = 10^{round(math.log10(n))}")
        ax.plot(ps, [p.efficiency_vs_one_process for p in rows], "s" + style, color="C1", label=f"E_1 = T(1)/(P·T(P)), N = 10^{round(math.log10(n))}")
    rows16 = sixteen["rows"]
    ax.plot([r["processes"] for r in rows16], [r["measured_efficiency"] for r in rows16], "x", color="k", markersize=9, label="16-core machine, measured, N = 10^8 (E_in)")
    ax.axhline(TARGET_EFFICIENCY, color="grey", linestyle=":", label="issue 27 goal (70 %)")
    ax.set_xlabel(f"P, client processes (on {PROJECT_CORES} cores, with the aggregator)")
    ax.set_ylabel("parallel efficiency")
    ax.set_ylim(0, 1.05)
    ax.set_xticks(list(PROJECT_PROCESSES))
    ax.set_title(LABEL[0].upper() + LABEL[1:], fontsize=10)
    ax.legend(fontsize=7.5, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(sizes: Sequence[int], processes: Sequence[int], reps: int, out: Path) -> dict[str, Any]:
    from rich.console import Console
    from rich.markdown import Markdown

    console = Console(width=None if sys.stdout.isatty() else 160)
    started = time.perf_counter()
    load0 = os.getloadavg()[0]
    measured = {n: asyncio.run(measure_size(n, processes, reps, lambda s: console.print(f"[dim]{s}[/dim]"))) for n in sizes}
    load1 = os.getloadavg()[0]
    costs = derive_costs(measured)
    table = [project(costs, n, p) for n in PROJECT_SIZES for p in PROJECT_PROCESSES]
    two = check_two(costs, measured)
    sixteen = sixteen_core_check()
    grid = f"N ∈ {{{', '.join(f'{n:.0e}' for n in sizes)}}} (the smallest for the fixed costs), in process and gRPC {', '.join(map(str, processes))}, median of {reps} interleaved repetitions"
    lo, hi = sorted(measured)[-2:]
    a_two = (measured[hi]["gRPC 2"]["aggregator_cpu_s"] - measured[lo]["gRPC 2"]["aggregator_cpu_s"]) / (hi - lo) if 2 in processes else float("nan")
    text = markdown(costs, a_two, table, two, sixteen, grid, f"{load0:.2f} → {load1:.2f}")
    write_results(out, "scaling_projection", text, FIELDS, table)
    (out / "scaling_projection.json").write_text(
        json.dumps({"label": LABEL, "costs": asdict(costs), "measured": {str(n): v for n, v in measured.items()}, "check_two": two, "sixteen_core": sixteen}, indent=1),
        encoding="utf-8",
    )
    plot(table, sixteen, out / "scaling_projection.png")
    console.print(Markdown(text))
    console.print(f"wrote {out}/scaling_projection.{{md,csv,json,png}} in {time.perf_counter() - started:.0f} s")
    return {"costs": costs, "table": table, "check_two": two, "sixteen_core": sixteen}


def main(argv: Sequence[str] | None = None) -> None:
    args = bench_arguments(__doc__.splitlines()[0], "10^3, 10^4, 10^5 users (a smoke run; the costs are then dominated by fixed costs)", 5, "results/scaling_projection", argv)
    sizes = [10**3, 10**4, 10**5] if args.quick else [10**4, 10**6, 10**7]
    run(sizes, [1, 2], args.reps, args.out)


if __name__ == "__main__":
    main()
