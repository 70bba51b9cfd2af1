"""Multidimensional collection: MSE and MSE ÷ theory of SPL, SMP and RS+FD over d attributes.

What: ``ldp.core.multidimensional``'s protocols on the same seeded population — d ∈ {2, 5, 10}
attributes, each with k ∈ {2, 16, 64} categories (a Zipf(1.1) histogram, exact counts, its own
random order per attribute, the columns shuffled independently), ε ∈ {1, 4}, n = 10^5 users,
``--trials`` seeded runs each:

- SPL: every attribute at ε/d, the oracle ``choose_oracle`` picks at (k, ε/d) (GRR or OUE);
- SMP: one attribute at ε (GRR or OUE, the same choice at (k, ε)); the index is disclosed;
- RS+FD[GRR], RS+FD[OUE-z]: at ε, which is the whole record's exact loss;
- RS+FD[GRR]′, RS+FD[OUE-z]′: the paper's parameters (the sampled attribute at
  ε′ = ln(d(e^ε − 1) + 1)); their whole-record loss is ε′, shown in the "record ε" column, so
  they are *not* comparable with the rows above at the same ε (docs/multidimensional.md).

Columns: MSE = mean over trials, attributes and categories of (f̂ − f)² of the raw unbiased
estimates; MSE ÷ theory = that over the mean of each protocol's exact variance (SMP: conditional
on each run's n_j), ± one standard error over the trials (√(2/(d·k)) of the mean for one trial);
small tables get more trials (``--min-values``: at least 120 (trial, value) pairs per cell).
1 means unbiased with the stated variance.

Usage: ``python benchmarks/multidimensional.py [--trials T] [--out DIR]``: prints the table and
saves ``multidimensional.csv`` and ``multidimensional.png`` in ``--out`` (default
results/multidimensional). About a minute on 2 cores at the defaults.

``--adp-table`` prints instead docs/multidimensional.md's RS+FD[ADP] table (``adp_table``): the
paper's parameters (``RandomSamplingFakeData.paper``: the sampled attribute at ε′) for RS+FD[GRR],
RS+FD[OUE-z] and RS+FD[ADP] (``rsfd_adp_choice`` per attribute), d ∈ {2, 5} (``--ds``), every
attribute with the same k and the geometric histogram ∝ 0.8^v (``geometric_population``), n = 10^5,
20 seeded repetitions (``--trials``); cells are MSE × 10^5 with the exact variance
(``frequency_variance``) × 10^5 in brackets. The three variants read the same users' randomness
in each repetition, so ADP's cell equals its pick's. ``adp.csv`` goes to ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ldp.core.frequency_oracles import choose_oracle
from ldp.core.multidimensional import RandomSamplingFakeData, SampleOne, SplitBudget
from ldp.core.rng import RandomSource

PROTOCOLS = ["SPL", "SMP", "RS+FD[GRR]", "RS+FD[OUE-z]", "RS+FD[GRR]′", "RS+FD[OUE-z]′"]


def population(d: int, k: int, n: int, seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """n records of d attributes: each column a Zipf(1.1) histogram over k with exact counts, in
    its own random category order, shuffled independently of the other columns."""
    rng = np.random.default_rng([seed, d, k])
    w = 1.0 / np.arange(1, k + 1) ** 1.1
    cols, freqs = [], []
    for _ in range(d):
        f = rng.permutation(w / w.sum())
        counts = np.floor(f * n).astype(np.int64)
        counts[np.argsort(-(f * n - counts))[: n - counts.sum()]] += 1
        col = rng.permutation(np.repeat(np.arange(k), counts))
        cols.append(col)
        freqs.append(counts / n)
    return np.stack(cols, axis=1).astype(np.float64), freqs


def build(name: str, d: int, k: int, eps: float) -> Any:
    attrs = tuple(tuple(range(k)) for _ in range(d))
    if name == "SPL":
        kind = choose_oracle(k, eps / d, "oue")
        return SplitBudget(eps, attrs, "grr" if kind == "kary_rr" else kind)
    if name == "SMP":
        kind = choose_oracle(k, eps, "oue")
        return SampleOne(eps, attrs, "grr" if kind == "kary_rr" else kind)
    variant = "grr" if "GRR" in name else "oue-z"
    if name.endswith("′"):
        return RandomSamplingFakeData.paper(eps, attrs, variant)
    return RandomSamplingFakeData(eps, attrs, variant)


def run(name: str, d: int, k: int, eps: float, n: int, trials: int, seed: int, min_values: int = 0) -> dict[str, Any]:
    """One protocol at (d, k, ε): ``trials`` runs, more when d·k < ``min_values`` (small tables: the
    MSE of a few values needs more runs for a usable standard error)."""
    trials = max(trials, -(-min_values // (d * k)))
    x, f = population(d, k, n, seed)
    P = build(name, d, k, eps)
    users = np.arange(n)
    mse, ratio = [], []
    t0 = time.process_time()
    for t in range(trials):
        reports = P.sample(x, RandomSource(seed).for_request("reports", t, users))
        est = np.concatenate(P.frequencies(reports))
        if isinstance(P, SampleOne):
            var = P.frequency_variance(f, [len(c) for c in reports.columns], n)
        else:
            var = P.frequency_variance(f, n)
        m = float(np.mean((est - np.concatenate(f)) ** 2))
        mse.append(m)
        ratio.append(m / float(np.mean(np.concatenate(var))))
    r = np.asarray(ratio)
    se = float(r.std(ddof=1) / math.sqrt(len(r))) if len(r) > 1 else float(r[0]) * math.sqrt(2.0 / (d * k))
    oracle = getattr(P, "oracle", getattr(P, "variant", ""))
    return dict(
        d=d, k=k, epsilon=eps, protocol=name, oracle=oracle, record_epsilon=P.epsilon, mse=float(np.mean(mse)),
        mse_over_theory=float(r.mean()), se=se, trials=trials, users_per_s=n * trials / max(time.process_time() - t0, 1e-9),
    )


def geometric_population(d: int, k: int, n: int, seed: int, ratio: float = 0.8) -> tuple[np.ndarray, list[np.ndarray]]:
    """n records of d attributes, each column with exact counts ∝ ``ratio``^v over v = 0 … k − 1
    (largest remainders), shuffled independently of the other columns."""
    rng = np.random.default_rng([seed, d, k, 8])
    w = ratio ** np.arange(k, dtype=np.float64)
    f = w / w.sum()
    counts = np.floor(f * n).astype(np.int64)
    counts[np.argsort(-(f * n - counts), kind="stable")[: n - counts.sum()]] += 1
    cols = [rng.permutation(np.repeat(np.arange(k), counts)) for _ in range(d)]
    return np.stack(cols, axis=1).astype(np.float64), [counts / n] * d


ADP_VARIANTS = ("grr", "oue-z", "adp")


def adp_table(ds: list[int], ks: list[int], epsilons: list[float], n: int, trials: int, seed: int) -> list[dict[str, Any]]:
    """RS+FD[GRR], RS+FD[OUE-z] and RS+FD[ADP] with the paper's parameters at each (d, k, ε): the
    mean over ``trials`` seeded runs of the MSE (mean over attributes and categories of (f̂ − f)²)
    and the mean exact variance (``RandomSamplingFakeData.frequency_variance``). Every variant of a
    setting reads the same users' randomness in run t."""
    rows = []
    for d in ds:
        for k in ks:
            x, f = geometric_population(d, k, n, seed)
            truth = np.concatenate(f)
            attrs = tuple(tuple(range(k)) for _ in range(d))
            for eps in epsilons:
                row: dict[str, Any] = dict(d=d, k=k, epsilon=eps)
                for variant in ADP_VARIANTS:
                    P = RandomSamplingFakeData.paper(eps, attrs, variant)
                    mse = [
                        float(np.mean((np.concatenate(P.frequencies(P.sample(x, RandomSource(seed).for_request(f"adp-{d}-{k}-{eps:g}", t, np.arange(n))))) - truth) ** 2))
                        for t in range(trials)
                    ]
                    row.update({f"{variant}_mse": float(np.mean(mse)), f"{variant}_var": float(np.mean(np.concatenate(P.frequency_variance(f, n))))})
                    row["record_epsilon"] = P.epsilon
                    if variant == "adp":
                        row["adp_picks"] = "/".join(sorted(set(P.variants)))
                rows.append(row)
    return rows


def main_adp(args: argparse.Namespace) -> None:
    """``--adp-table``: docs/multidimensional.md's RS+FD[ADP] table, as markdown on stdout."""
    t0 = time.process_time()
    rows = adp_table(args.ds or [2, 5], args.ks, args.epsilons, args.n, args.trials or 20, args.seed)
    header = ["d", "k", "ε", "ε′", "ADP picks", "RS+FD[GRR]", "RS+FD[OUE-z]", "RS+FD[ADP]"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        cells = [f"{r[v + '_mse'] * 1e5:.3g} ({r[v + '_var'] * 1e5:.3g})" for v in ADP_VARIANTS]
        lines.append(f"| {r['d']} | {r['k']} | {r['epsilon']:g} | {r['record_epsilon']:.2f} | {r['adp_picks']} | " + " | ".join(cells) + " |")
    better = sum(min(("grr", "oue-z"), key=lambda v: r[v + "_var"]) == r["adp_picks"] for r in rows)
    print(f"RS+FD with the paper's ε′, n = {args.n:,}, {args.trials or 20} runs; cells MSE × 10^5 (exact variance × 10^5)")
    print("\n".join(lines))
    print(f"ADP picks the variant of smaller exact variance in {better} of {len(rows)} settings ({time.process_time() - t0:.0f} s CPU)")
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "adp.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps_values = sorted({r["epsilon"] for r in rows})
    k_values = sorted({r["k"] for r in rows})
    fig, axes = plt.subplots(len(eps_values), len(k_values), figsize=(4 * len(k_values), 3.2 * len(eps_values)), squeeze=False, sharex=True)
    for i, e in enumerate(eps_values):
        for j, k in enumerate(k_values):
            ax = axes[i][j]
            for name in PROTOCOLS:
                pts = sorted((r["d"], r["mse"]) for r in rows if r["epsilon"] == e and r["k"] == k and r["protocol"] == name)
                if pts:
                    ax.plot(*zip(*pts), marker="o", linestyle="--" if name.endswith("′") else "-", label=name)
            ax.set_yscale("log")
            ax.set_title(f"ε = {e:g}, k = {k}")
            ax.set_xlabel("d")
            ax.set_ylabel("MSE")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Multidimensional frequency estimation (′: the paper's ε′, whole-record loss ε′ > ε)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ds", type=int, nargs="*", help="attribute counts (default 2 5 10; --adp-table: 2 5)")
    parser.add_argument("--ks", type=int, nargs="*", default=[2, 16, 64])
    parser.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 4.0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--trials", type=int, help="seeded runs per cell (default 3; --adp-table: 20)")
    parser.add_argument("--min-values", type=int, default=120, help="at least this many (run, value) pairs per cell: more runs at small d·k")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--protocols", nargs="*", default=PROTOCOLS, choices=PROTOCOLS)
    parser.add_argument("--out", type=Path, default=Path("results/multidimensional"))
    parser.add_argument("--markdown", type=Path, help="also write the table as markdown here")
    parser.add_argument("--adp-table", action="store_true", help="print docs/multidimensional.md's RS+FD[ADP] table instead")
    args = parser.parse_args(argv)
    if args.adp_table:
        main_adp(args)
        return
    args.ds = args.ds or [2, 5, 10]
    args.trials = args.trials or 3
    from rich.console import Console
    from rich.table import Table

    t0 = time.perf_counter()
    rows = [run(p, d, k, e, args.n, args.trials, args.seed, args.min_values) for e in args.epsilons for k in args.ks for d in args.ds for p in args.protocols]
    header = ["d", "k", "ε", "protocol", "oracle", "record ε", "MSE", "MSE ÷ theory"]
    cells = [
        [str(r["d"]), str(r["k"]), f"{r['epsilon']:g}", r["protocol"], r["oracle"], f"{r['record_epsilon']:.3f}", f"{r['mse']:.3e}", f"{r['mse_over_theory']:.3f} ± {r['se']:.3f}"]
        for r in rows
    ]
    table = Table(title=f"Multidimensional: SPL vs SMP vs RS+FD, n = {args.n:,}, {args.trials} trials ({os.cpu_count()} cores, {time.perf_counter() - t0:.0f} s)")
    for h in header:
        table.add_column(h, justify="right")
    for c in cells:
        table.add_row(*c)
    Console(width=200).print(table)
    best: dict[tuple[int, int, float], dict[str, Any]] = {}
    for r in rows:
        if not r["protocol"].endswith("′"):
            key = (r["d"], r["k"], r["epsilon"])
            if key not in best or r["mse"] < best[key]["mse"]:
                best[key] = r
    print("lowest MSE at the same whole-record ε: " + "; ".join(f"d={d} k={k} ε={e:g}: {b['protocol']}" for (d, k, e), b in sorted(best.items())))
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "multidimensional.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, args.out / "multidimensional.png")
    print(f"saved {args.out / 'multidimensional.csv'} and {args.out / 'multidimensional.png'}")
    if args.markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(c) + " |" for c in cells]
        args.markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
