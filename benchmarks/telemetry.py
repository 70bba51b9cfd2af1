"""Microsoft's telemetry mechanisms (``ldp.core.telemetry``): MSE ÷ theory, and the T = 100-day attack.

- 1BitMean (and 1BitMean with α-point rounding and memoization, step s = 60 on m = 86,400 seconds)
  at ε ∈ {1, 4}, n ∈ {10^5, 10^6}: the mean estimate's MSE over trials ÷ the exact fixed-population
  variance Σ(M² − (x_i − m/2)²)/n² (``OneBitMean.mean_variance``, realized cells); ± one standard
  error √(2/trials) (the squared error of a normal estimate is σ²χ²_1). Each α-rounded trial is a
  fresh memo key (a fresh population of users' memos).
- dBitFlipPM at k ∈ {16, 1024}, d ∈ {1, 4}, ε ∈ {1, 4}, n = 10^5: the histogram MSE (mean over trials
  and buckets of (ĥ − h)², raw estimator, no clipping) ÷ the mean over buckets of the exact variance
  (``DBitFlip.frequency_variance``); ± √(2/(k·trials)) (buckets treated as independent).
- The attack: n = 20,000 users at x = 0 or x = m for T = 100 days; the aggregator's majority-vote
  decoder's accuracy with memoization (α-rounded 1BitMean) and without (a fresh bit each day),
  against e^ε/(1 + e^ε), the bound for any decoder of an ε-LDP transcript; and the mean absolute
  error of each user's 100-day average estimate.

The population: counters x_i = min(m, ⌊m·Beta(2, 5)⌋) (seconds of daily use), seeded; histogram
buckets are Zipf(1.1), as ``benchmarks/peers.py``. Everything is seeded (``--seed``). ``--out DIR``
writes telemetry.csv and telemetry.png there. ≈ 2.5 minutes of CPU with the defaults (wall time longer on a shared machine).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import time
from pathlib import Path

import numpy as np

from ldp.core.rng import RandomSource, derive_key_bytes
from ldp.core.telemetry import AlphaRoundedOneBitMean, DBitFlip, DBitFlipPM, OneBitMean

M_SECONDS = 86_400
STEP = 60


def counters(n: int, seed: int) -> np.ndarray:
    """Daily seconds of use: ⌊m·Beta(2, 5)⌋, integers in [0, m]."""
    return np.minimum(M_SECONDS, np.floor(M_SECONDS * np.random.default_rng(seed).beta(2.0, 5.0, n))).astype(np.int64)


def zipf_counts(k: int, n: int, seed: int) -> np.ndarray:
    w = 1.0 / np.arange(1, k + 1) ** 1.1
    f = np.random.default_rng(seed).permutation(w / w.sum())
    counts = np.floor(f * n).astype(np.int64)
    counts[np.argsort(-(f * n - counts))[: n - counts.sum()]] += 1
    return counts


def one_bit_rows(eps: float, n: int, trials: int, seed: int) -> list[dict[str, object]]:
    x = counters(n, seed)
    R = OneBitMean(eps, float(M_SECONDS))
    theory = R.mean_variance(x.astype(np.float64))
    users = np.arange(n)
    rows = []
    for name in ("1BitMean", f"1BitMean α-rounded s={STEP} (memo)"):
        t0 = time.process_time()
        errs = []
        for t in range(trials):
            if name == "1BitMean":
                bits = R.sample(x.astype(np.float64), RandomSource(seed).for_request("telemetry-bench", t, users))
            else:
                bits = AlphaRoundedOneBitMean(eps, M_SECONDS, STEP, derive_key_bytes("telemetry-bench memo", seed, t)).report(users, x)
            errs.append((R.mean(bits) - x.mean()) ** 2)
        cpu = time.process_time() - t0
        rows.append(dict(mechanism=name, eps=eps, n=n, k="", d="", trials=trials, mse=float(np.mean(errs)), theory=theory, se=math.sqrt(2.0 / trials), users_per_s=n * trials / max(cpu, 1e-9)))
    return rows


def dbitflip_rows(eps: float, k: int, d: int, n: int, trials: int, seed: int) -> dict[str, object]:
    counts = zipf_counts(k, n, seed)
    v = np.repeat(np.arange(k), counts)
    R = DBitFlip(eps, k, d)
    users = np.arange(n)
    t0 = time.process_time()
    sq = np.zeros(k)
    for t in range(trials):
        est = R.frequencies(DBitFlipPM(R, derive_key_bytes("telemetry-bench pm", seed, k, d, t)).report(users, v))
        sq += (est - counts / n) ** 2
    cpu = time.process_time() - t0
    theory = float(R.frequency_variance(counts).mean())
    return dict(mechanism=f"dBitFlipPM k={k} d={d}", eps=eps, n=n, k=k, d=d, trials=trials, mse=float(sq.mean() / trials), theory=theory, se=math.sqrt(2.0 / (k * trials)), users_per_s=n * trials / max(cpu, 1e-9))


def attack(eps: float, n: int = 20_000, days: int = 100, seed: int = 0) -> dict[str, float]:
    m = 1000
    users = np.arange(n)
    truth = users % 2 == 1
    x = np.where(truth, m, 0)
    A = AlphaRoundedOneBitMean(eps, m, 10, derive_key_bytes("telemetry-bench attack", seed))
    R = A.mechanism
    memo = np.stack([A.report(users, x) for _ in range(days)])
    fresh = np.stack([R.sample(x.astype(np.float64), RandomSource(seed).for_request("telemetry-bench attack", day, users)) for day in range(days)])

    def acc(b: np.ndarray) -> float:
        return float(((b.sum(axis=0) * 2 > days) == truth).mean())

    return dict(
        eps=eps,
        bound=math.exp(eps) / (1 + math.exp(eps)),
        memo_accuracy=acc(memo),
        fresh_accuracy=acc(fresh),
        memo_abs_error=float(np.abs(R.estimate(memo).mean(axis=0) - x).mean() / m),
        fresh_abs_error=float(np.abs(R.estimate(fresh).mean(axis=0) - x).mean() / m),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 4.0])
    parser.add_argument("--ns", type=int, nargs="*", default=[10**5, 10**6])
    parser.add_argument("--ks", type=int, nargs="*", default=[16, 1024])
    parser.add_argument("--ds", type=int, nargs="*", default=[1, 4])
    parser.add_argument("--hist-n", type=int, default=10**5, help="users in the dBitFlipPM rows")
    parser.add_argument("--trials", type=int, default=1000, help="trials per 1BitMean cell at n = 10^5 (÷10 per factor 10 of n, at least min(trials, 400))")
    parser.add_argument("--hist-trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write telemetry.csv and telemetry.png in this folder")
    args = parser.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    t0 = time.perf_counter()
    rows: list[dict[str, object]] = []
    for eps in args.epsilons:
        for n in args.ns:
            rows += one_bit_rows(eps, n, max(min(args.trials, 400), int(args.trials * 1e5 / n)), args.seed)
    for eps in args.epsilons:
        for k in args.ks:
            for d in args.ds:
                rows.append(dbitflip_rows(eps, k, d, args.hist_n, args.hist_trials, args.seed))
    attacks = [attack(eps, seed=args.seed) for eps in args.epsilons]
    elapsed = time.perf_counter() - t0

    console = Console(width=200)
    table = Table(title=f"ldp.core.telemetry: MSE ÷ theory ({os.cpu_count()} cores, {elapsed:.0f} s, seed {args.seed})")
    for h in ("mechanism", "ε", "n", "trials", "MSE", "theory", "MSE ÷ theory", "users/s"):
        table.add_column(h, justify="right")
    for r in rows:
        ratio = float(r["mse"]) / float(r["theory"])  # type: ignore[arg-type]
        table.add_row(str(r["mechanism"]), f"{r['eps']:g}", f"{r['n']:.0e}".replace("+0", ""), str(r["trials"]), f"{r['mse']:.4g}", f"{r['theory']:.4g}", f"{ratio:.3f} ± {r['se']:.3f}", f"{float(r['users_per_s']):.3g}")  # type: ignore[arg-type]
    console.print(table)
    at = Table(title="T = 100 days of a constant value, n = 20,000 (x = 0 or m): what the aggregator learns")
    for h in ("ε", "bound e^ε/(1+e^ε)", "accuracy, memoized", "accuracy, no memo (broken)", "|avg − x|/m memoized", "|avg − x|/m no memo"):
        at.add_column(h, justify="right")
    for a in attacks:
        at.add_row(f"{a['eps']:g}", f"{a['bound']:.4f}", f"{a['memo_accuracy']:.4f}", f"{a['fresh_accuracy']:.4f}", f"{a['memo_abs_error']:.3f}", f"{a['fresh_abs_error']:.3f}")
    console.print(at)

    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        with (args.out / "telemetry.csv").open("w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]) + ["ratio"])
            w.writeheader()
            for r in rows:
                w.writerow({**r, "ratio": float(r["mse"]) / float(r["theory"])})  # type: ignore[arg-type]
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(10, 4.5))
        labels = [f"{r['mechanism']}\nε={r['eps']:g} n={r['n']:.0e}".replace("+0", "") for r in rows]
        ratios = [float(r["mse"]) / float(r["theory"]) for r in rows]  # type: ignore[arg-type]
        ax.errorbar(range(len(rows)), ratios, yerr=[float(r["se"]) for r in rows], fmt="o", capsize=3)  # type: ignore[arg-type]
        ax.axhline(1.0, color="gray", lw=1, ls="--")
        ax.set_xticks(range(len(rows)), labels, rotation=90, fontsize=6)
        ax.set_ylabel("MSE ÷ theory (± 1 s.e.)")
        ax.set_title("ldp.core.telemetry: 1BitMean and dBitFlipPM against their exact variances")
        fig.tight_layout()
        fig.savefig(args.out / "telemetry.png", dpi=120)
        console.print(f"wrote {args.out / 'telemetry.csv'} and {args.out / 'telemetry.png'}")


if __name__ == "__main__":
    main()
