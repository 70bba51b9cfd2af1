"""Each exact sampler against plain numpy's sampler of the same distribution (issue 27).

What is timed, per row, in CPU time (``time.process_time``: the machine may be shared), for one
call over n users (``--users``, default 10^6):

- **ldp**: ``R.sample(inputs, UserRandomness(key, users, nonces))`` — a fresh ``UserRandomness``
  per call (a shard makes one per chunk), per-user int64 nonces as a shard's ledger gives them,
  so every AES-256 PRF block the sampler reads (``ldp.core.rng.prf_words``) is inside the time:
  that is the sampler's cost. The inputs are built before the clock starts.
- **numpy**: the same distribution (the textbook mechanism, at the same ε, k and bound) drawn
  from one shared ``numpy.random.Generator`` (PCG64), vectorized in plain numpy, on the same
  inputs. It is not per-user, not shard-invariant and not keyed by a secret: it is the speed
  goal, not an alternative.

Rows are interleaved (every row's ldp and numpy call once per repetition, the order alternating),
``--repeats`` ≥ 3 repetitions. Each timed call follows an untimed call of the same side, so both
are timed in the steady state of a client that samples round after round (the memory a call
needs is already the allocator's, whatever the previous row freed; without this, one side's
page faults depended on what the other side's call had just freed). The table shows ns per
user, median (min), and the ratio of the medians (ldp ÷ numpy: how many times slower; issue 27's
goal is ≤ 2). ε = 1 throughout. Writes ``samplers.json`` under ``--out`` (default
results/samplers/). Run: ``make bench``, or ``python benchmarks/samplers.py --users 1000000``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from ldp.core.frequency_oracles import HadamardResponse, OptimizedLocalHashing, OptimizedUnaryEncoding
from ldp.core.laplace import DiscreteLaplaceRandomizer
from ldp.core.mean_estimation import HybridRandomizer, PiecewiseRandomizer, hybrid_weight
from ldp.core.plus_minus import PlusMinusRandomizedResponse
from ldp.core.randomizer_base import Randomizer
from ldp.core.rng import RandomSource, UserRandomness
from ldp.core.rr_mechanisms import BinaryRandomizedResponse, KaryRandomizedResponse

EPSILON = 1.0
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Row:
    """One sampler: ldp's call and numpy's, both over the same n users."""

    name: str
    ldp: Callable[[], object]
    numpy: Callable[[], object]


def _parity(x: np.ndarray) -> np.ndarray:
    return np.bitwise_count(x) & 1


def _grr(gen: np.random.Generator, idx: np.ndarray, k: int, p: float) -> np.ndarray:
    """k-ary randomized response in plain numpy: keep w.p. p, else uniform over the k − 1 others."""
    other = gen.integers(0, k - 1, len(idx))
    other += other >= idx
    return np.where(gen.random(len(idx)) < p, idx, other)


def _piecewise_numpy(gen: np.random.Generator, u: np.ndarray, epsilon: float, bound: float) -> np.ndarray:
    """Wang et al. (2019) Alg. 2, continuous: uniform on [l(t), r(t)] w.p. e^{ε/2}/(e^{ε/2}+1), else on the rest of [−C, C]."""
    h = math.exp(epsilon / 2.0)
    big_c = (h + 1.0) / (h - 1.0)
    t = u / bound
    left = (big_c + 1.0) / 2.0 * t - (big_c - 1.0) / 2.0
    x = gen.random(len(u))
    inside = gen.random(len(u)) < h / (h + 1.0)
    outer = -big_c + x * (big_c + 1.0)  # uniform on a segment of length C + 1, then the window skipped
    outer += np.where(outer >= left, big_c - 1.0, 0.0)
    return bound * np.where(inside, left + x * (big_c - 1.0), outer)


def _duchi_numpy(gen: np.random.Generator, u: np.ndarray, epsilon: float, bound: float) -> np.ndarray:
    """Duchi et al.'s ±M: Pr[+M] = 1/2 + u(e^ε−1)/(2b(e^ε+1))."""
    m = bound / math.tanh(epsilon / 2.0)
    return np.where(gen.random(len(u)) < 0.5 + u / (2.0 * m), m, -m)


def rows(n: int, gen: np.random.Generator) -> list[Row]:
    """The issue's table: each sampler with its inputs, ldp's call and numpy's."""
    data = np.random.default_rng(7)
    users = np.arange(n, dtype=np.int64)
    nonces = data.integers(0, 1000, n)  # int64, as a shard's ledger gives them
    key = RandomSource(1).key("reports")

    def draws() -> UserRandomness:
        return UserRandomness(key, users, nonces)

    def ldp(R: Randomizer, inputs: np.ndarray) -> Callable[[], object]:
        return lambda: R.sample(inputs, draws())

    out: list[Row] = []
    bits = data.integers(0, 2, n).astype(np.float64)
    rr = BinaryRandomizedResponse(EPSILON)
    p2 = rr.keep_probability
    out.append(Row("binary_rr", ldp(rr, bits), lambda: ((bits != 0) ^ (gen.random(n) >= p2)).view(np.uint8)))

    k16 = KaryRandomizedResponse(EPSILON, tuple(range(16)))
    v16 = data.integers(0, 16, n).astype(np.float64)
    cats16 = np.asarray(k16.categories)
    p16 = k16.keep_probability
    out.append(Row("kary_rr, k = 16", ldp(k16, v16), lambda: cats16[_grr(gen, v16.astype(np.int64), 16, p16)]))

    dl = DiscreteLaplaceRandomizer(EPSILON, 1.0)
    u = data.uniform(-1.0, 1.0, n)
    r, w, alpha = dl.grid, dl.window, math.exp(-EPSILON / (2 * dl.c))

    def dl_numpy() -> np.ndarray:
        s = u / r
        k0 = np.floor(s)
        level = k0 + (gen.random(n) < s - k0)
        z = gen.geometric(1.0 - alpha, n) - gen.geometric(1.0 - alpha, n)
        return np.clip(level + z, -w, w) * r

    out.append(Row("discrete_laplace", ldp(dl, u), dl_numpy))

    pm = PlusMinusRandomizedResponse(EPSILON, 1.0)
    out.append(Row("pm_rr", ldp(pm, u), lambda: _duchi_numpy(gen, u, EPSILON, 1.0)))

    pw = PiecewiseRandomizer(EPSILON, 1.0)
    out.append(Row("piecewise", ldp(pw, u), lambda: _piecewise_numpy(gen, u, EPSILON, 1.0)))

    hy = HybridRandomizer(EPSILON, 1.0)
    beta = hybrid_weight(EPSILON)
    out.append(Row("hybrid", ldp(hy, u), lambda: np.where(gen.random(n) < beta, _piecewise_numpy(gen, u, EPSILON, 1.0), _duchi_numpy(gen, u, EPSILON, 1.0))))

    cats1024 = tuple(range(1024))
    v1024 = data.integers(0, 1024, n).astype(np.float64)
    olh = OptimizedLocalHashing(EPSILON, cats1024)
    l_, g, p_olh = olh.l, olh.g, olh.cell_sizes[0] / 2.0**64

    def olh_numpy() -> np.ndarray:
        # a uniformly random GF(2)-linear hash (l rows of m bits) and g-ary RR of the hashed value
        x = v1024.astype(np.int64)
        report = np.empty((n, l_ + 1), dtype=np.uint16)
        report[:, :l_] = gen.integers(0, 1 << olh.m, (n, l_), dtype=np.uint16)
        hashed = np.zeros(n, dtype=np.int64)
        for j in range(l_):
            hashed |= _parity(report[:, j] & x) << j
        report[:, l_] = _grr(gen, hashed, g, p_olh)
        return report

    out.append(Row("olh, k = 1024", ldp(olh, v1024), olh_numpy))

    hr = HadamardResponse(EPSILON, cats1024)
    p_hr, half = hr.cell_sizes[0] / 2.0**64, 1 << (hr.M - 1)

    def hr_numpy() -> np.ndarray:
        # Acharya et al.: uniform on C_x = {j : parity((x+1) & j) = 0} w.p. p, else on its complement
        row = v1024.astype(np.int64) + 1
        t = gen.integers(0, half, n)
        low = row & -row
        below = t & (low - 1)
        j = ((t - below) << 1) | below
        wrong = _parity(row & j) != (gen.random(n) >= p_hr)
        return (j | np.where(wrong, low, 0)).astype(np.uint32)

    out.append(Row("hadamard_response, k = 1024", ldp(hr, v1024), hr_numpy))

    oue = OptimizedUnaryEncoding(EPSILON, tuple(range(16)))
    p_in, p_out = (float(f) for f in oue.bit_probabilities())
    rows16 = np.arange(n)

    def oue_numpy() -> np.ndarray:
        x = v16.astype(np.int64)
        one_hot = gen.random((n, 16)) < p_out
        one_hot[rows16, x] = gen.random(n) < p_in
        return np.packbits(one_hot, axis=1)

    out.append(Row("oue, k = 16", ldp(oue, v16), oue_numpy))
    out.append(Row("one uniform per user", lambda: draws().uniform(0), lambda: gen.random(n)))
    return out


def _cpu(fn: Callable[[], object]) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def measure(table: list[Row], n: int, repeats: int) -> list[dict[str, object]]:
    """ns per user of every row's two calls, interleaved over ``repeats`` repetitions."""
    times: dict[str, dict[str, list[float]]] = {r.name: {"ldp": [], "numpy": []} for r in table}
    # One allocator state for both sides: glibc serves an array above its mmap threshold with
    # fresh pages (page faults at every call) and raises the threshold to the largest such array
    # freed so far, up to 32 MiB. Without this, whether an 8 MB array faulted depended on which
    # code had run before in the process (measured: the same numpy calls 30–40 % slower after
    # the new samplers than after the old ones, which freed 16 MB arrays). One freed array just
    # under 32 MiB puts the threshold at its ceiling: every array here then reuses memory.
    ceiling = np.ones((32 << 20) - (1 << 16), dtype=np.uint8)
    del ceiling
    for row in table:  # warm-up: caches (noise tables, cells), first-touch memory
        row.ldp(), row.numpy()
    for rep in range(repeats):
        for row in table:
            sides = ("ldp", "numpy") if rep % 2 == 0 else ("numpy", "ldp")
            for side in sides:
                call = getattr(row, side)
                call()  # untimed: the allocator then holds what the timed call needs, whatever ran before
                times[row.name][side].append(_cpu(call) / n * 1e9)
    result = []
    for row in table:
        t = times[row.name]
        med = {side: statistics.median(v) for side, v in t.items()}
        result.append(
            {
                "sampler": row.name,
                "ldp_ns_median": med["ldp"],
                "ldp_ns_min": min(t["ldp"]),
                "numpy_ns_median": med["numpy"],
                "numpy_ns_min": min(t["numpy"]),
                "ratio": med["ldp"] / med["numpy"] if med["numpy"] > 0 else float("nan"),  # below the clock's resolution: no ratio
                "ldp_ns": t["ldp"],
                "numpy_ns": t["numpy"],
            }
        )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1_000_000, help="users per call (default 10^6)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repetitions, at least 3 (default 5)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "samplers", help="folder for samplers.json")
    args = parser.parse_args(argv)
    if args.users < 1:
        parser.error(f"--users must be at least 1, got {args.users}")
    if args.repeats < 3:
        parser.error(f"--repeats must be at least 3 (the table shows a median), got {args.repeats}")
    n = args.users
    load0 = os.getloadavg()[0]
    result = measure(rows(n, np.random.default_rng(1)), n, args.repeats)
    load1 = os.getloadavg()[0]
    table = Table(title=f"Samplers against plain numpy: ns per user, CPU, n = {n:,}, ε = {EPSILON:g}, median (min) of {args.repeats}")
    for col in ("sampler", "ldp", "numpy", "ratio"):
        table.add_column(col, justify="right" if col != "sampler" else "left")
    for r in result:
        table.add_row(
            str(r["sampler"]),
            f"{r['ldp_ns_median']:.1f} ({r['ldp_ns_min']:.1f})",
            f"{r['numpy_ns_median']:.1f} ({r['numpy_ns_min']:.1f})",
            f"{r['ratio']:.2f}",
        )
    Console().print(table)
    print(f"load average {load0:.2f} → {load1:.2f} (CPU time; other processes still share caches and memory bandwidth)")
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"users": n, "repeats": args.repeats, "epsilon": EPSILON, "numpy": np.__version__, "python": platform.python_version(), "load": [load0, load1]}
    (args.out / "samplers.json").write_text(json.dumps({"meta": meta, "rows": result}, indent=1), encoding="utf-8")
    print(f"wrote {args.out / 'samplers.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
