"""Reply parts: a gRPC round's wall time and CPU by the size of the parts clients stream it in.

What: client processes answer a round part by part (``Shard.answer_in_parts``), drawing the next
part in a worker thread while the event loop writes this one, so the aggregator checks and
copies one part while the users sample the next (issue 27: "overlap the aggregator's passes with
the clients' sampling"). Smaller parts overlap more but cost more per part. This measures the
trade-off and the gain: for each (N users, P client processes) it launches one ``launch_local``
per part size (``python -m ldp.wire.client --reply-part-bytes B``) on the same population, plus
one whose single part holds the whole reply (nothing overlaps: the order of the code before
streaming), and times the same ``binary_rr`` round asking every user (1-byte reports) on each,
interleaved — the configurations take turns within every repetition, the order rotated — the
median of ``--reps`` repetitions of a batch of rounds. Per configuration it prints the round's
wall time, its ratio to the one-part round of the same run, the aggregator's CPU per user (this
process, gRPC's threads included) and the clients' CPU per user (``/proc/PID/stat``, summed).

Usage::

    python benchmarks/reply_parts.py            # N ∈ {10^6, 3·10^6, 10^7}, P ∈ {1, 2}; ≈ 4 min
    python benchmarks/reply_parts.py --quick    # N = 3·10^5, P = 1, three sizes: a smoke run

Writes ``results/reply_parts/reply_parts.{md,csv,png}`` (``--out`` to move them). Timings are
measured here and printed, never asserted (tests/test_reply_parts_bench.py runs ``--quick``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark scaling.py, run as a script or imported

from scaling import ROUND, bench_arguments, population, process_cpu_s, write_results  # noqa: E402

from ldp.local.messages import SessionKind  # noqa: E402
from ldp.local.session import Request, Session  # noqa: E402
from ldp.wire.client import REPLY_PART_BYTES  # noqa: E402
from ldp.wire.codec import MAX_MESSAGE_BYTES  # noqa: E402
from ldp.wire.launcher import launch_local  # noqa: E402

ONE_PART = MAX_MESSAGE_BYTES  # a part as large as a client may write: the whole reply of ≤ 6.7·10^7 one-byte reports
PART_SIZES = (1 << 18, 1 << 19, 1 << 20, 1 << 21, ONE_PART)
FIELDS = ["n", "processes", "part_bytes", "wall_s", "wall_vs_one_part", "aggregator_ns_per_user", "clients_ns_per_user", "rounds", "reps"]


@dataclass(frozen=True)
class Row:
    n: int
    processes: int
    part_bytes: int
    wall_s: float
    wall_vs_one_part: float
    aggregator_ns_per_user: float
    clients_ns_per_user: float
    rounds: int
    reps: int


def _label(part_bytes: int) -> str:
    return "one part" if part_bytes == ONE_PART else f"{part_bytes >> 10} KiB"


async def measure(n: int, processes: int, sizes: Sequence[int], reps: int, log: Any) -> list[Row]:
    """Every part size at (n, P): medians over ``reps`` interleaved repetitions."""
    rounds = max(3, min(30, round(3 * 10**7 / n)))
    async with contextlib.AsyncExitStack() as stack:
        configs = []
        for size in sizes:
            extra = {f"{k}/{processes}": ["--reply-part-bytes", str(size)] for k in range(processes)}
            oracle = await stack.enter_async_context(launch_local(population(n), processes=processes, ready_timeout_s=900.0, extra_args=extra))
            session = Session(oracle, SessionKind.INTERACTIVE)
            pids = [c.process.pid for c in oracle.clients]  # type: ignore[attr-defined]
            for _ in range(2):  # warm-up: imports, channels, the shards' randomizer cache
                await session.round([Request.of(range(n), ROUND)])
            configs.append((size, session, pids))
        samples: dict[int, list[tuple[float, float, float]]] = {size: [] for size in sizes}
        for rep in range(reps):
            log(f"N = {n:.0e}, P = {processes}: repetition {rep + 1}/{reps} ({rounds} rounds per part size)")
            for size, session, pids in configs[rep % len(configs) :] + configs[: rep % len(configs)]:
                c0, a0, t0 = sum(process_cpu_s(p) for p in pids), time.process_time(), time.perf_counter()
                for _ in range(rounds):
                    (reports,) = await session.round([Request.of(range(n), ROUND)])
                    assert reports.counts()["answered"] == n and 0 <= int(np.count_nonzero(reports.values)) <= n
                    del reports
                wall = (time.perf_counter() - t0) / rounds
                samples[size].append((wall, (time.process_time() - a0) / rounds / n, (sum(process_cpu_s(p) for p in pids) - c0) / rounds / n))
    medians = {size: tuple(statistics.median(s[i] for s in samples[size]) for i in range(3)) for size in sizes}
    base = medians[ONE_PART][0] if ONE_PART in medians else float("nan")
    return [Row(n, processes, size, m[0], m[0] / base, m[1] * 1e9, m[2] * 1e9, rounds, reps) for size, m in medians.items()]


def markdown(rows: list[Row], grid: str, load: str) -> str:
    lines = [
        f"Grid: {grid}; {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average {load}. "
        f"The default part is {_label(REPLY_PART_BYTES)}.",
        "",
        "| N | P | part | round (ms) | ÷ one part | aggregator CPU (ns/user) | clients' CPU (ns/user) |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.n:.0e} | {r.processes} | {_label(r.part_bytes)} | {r.wall_s * 1e3:.1f} | {r.wall_vs_one_part:.2f} | {r.aggregator_ns_per_user:.2f} | {r.clients_ns_per_user:.2f} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    groups = sorted({(r.n, r.processes) for r in rows})
    for i, (n, p) in enumerate(groups):
        streamed = [r for r in rows if (r.n, r.processes) == (n, p) and r.part_bytes != ONE_PART]
        ax.plot([r.part_bytes >> 10 for r in streamed], [r.wall_vs_one_part for r in streamed], "o-", color=f"C{i}", label=f"N = {n:.0e}, P = {p}")
    ax.axhline(1.0, color="grey", linestyle=":", label="one part: nothing overlaps")
    ax.axvline(REPLY_PART_BYTES >> 10, color="grey", linestyle="--", linewidth=0.8, label="the default part")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("reply part (KiB of reports)")
    ax.set_ylabel("round wall time ÷ the one-part round's")
    ax.set_title("A gRPC round by reply part size (binary_rr, every user asked)", fontsize=10)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(sizes_n: Sequence[int], processes: Sequence[int], part_sizes: Sequence[int], reps: int, out: Path) -> list[Row]:
    from rich.console import Console
    from rich.markdown import Markdown

    console = Console(width=None if sys.stdout.isatty() else 160)
    started, load0 = time.perf_counter(), os.getloadavg()[0]
    rows = [row for n in sizes_n for p in processes for row in asyncio.run(measure(n, p, part_sizes, reps, lambda s: console.print(f"[dim]{s}[/dim]")))]
    grid = f"N ∈ {{{', '.join(f'{n:.0e}' for n in sizes_n)}}}, P ∈ {{{', '.join(map(str, processes))}}}, median of {reps} interleaved repetitions"
    text = markdown(rows, grid, f"{load0:.2f} → {os.getloadavg()[0]:.2f}")
    write_results(out, "reply_parts", text, FIELDS, rows)
    plot(rows, out / "reply_parts.png")
    console.print(Markdown(text))
    console.print(f"wrote {out}/reply_parts.{{md,csv,png}} in {time.perf_counter() - started:.0f} s")
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    args = bench_arguments(__doc__.splitlines()[0], "N = 3·10^5, P = 1, parts of 64 KiB, 256 KiB and one part: a smoke run", 7, "results/reply_parts", argv)
    if args.quick:
        run([3 * 10**5], [1], [1 << 16, 1 << 18, ONE_PART], args.reps, args.out)
    else:
        run([10**6, 3 * 10**6, 10**7], [1, 2], PART_SIZES, args.reps, args.out)


if __name__ == "__main__":
    main()
