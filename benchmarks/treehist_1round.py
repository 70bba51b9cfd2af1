"""TreeHist in one non-interactive round (each user draws its own level) beside the interactive,
aggregator-partitioned TreeHist, through ``ldp.heavy_hitters``, on the population of
benchmarks/treehist.py: ``zipf_values(n, 4096, 1.1, seed)`` (4,096 uniform 32-bit values under
Zipf(1.1), d = 32), k = 10, OLH, beam 32, β = 0.05, in process.

For n ∈ {10^5, 10^6}, ε ∈ {1, 4} and seeds 0..4 (each its own data, report key and partition),
both methods run on the same data and seed. Columns, per method (docs/treehist.md):

- found: the mean number of values returned;
- recall@10: the mean share of the true top 10 returned;
- false +: the values returned over the seeds whose true frequency is below f_10/2;
- users/s: n over the CPU seconds (``time.process_time``) of one run, the median over the seeds
  (the two methods interleaved: seed s runs one, then the other; other processes share the
  machine, so the ratio of the two is the number to read).

``python benchmarks/treehist_1round.py`` prints the Markdown table (``--quick``: n = 10^5 only).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import ldp

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark treehist.py, run as a script or imported
from treehist import zipf_values  # noqa: E402

METHODS = ("treehist", "treehist-1round")


def cell(n: int, epsilon: float, seeds: int, k: int = 10) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, list[float]]] = {m: {"found": [], "recall": [], "false": [], "rate": []} for m in METHODS}
    for seed in range(seeds):
        values = zipf_values(n, 4096, 1.1, seed)
        items, counts = np.unique(values, return_counts=True)
        order = np.argsort(-counts, kind="stable")
        top = set(items[order[:k]].tolist())
        f_k = counts[order[k - 1]] / n
        share = dict(zip(items.tolist(), (counts / n).tolist()))
        for method in METHODS:
            start = time.process_time()
            got = ldp.heavy_hitters(values, epsilon, k=k, method=method, bits=32, seed=seed)
            spent = time.process_time() - start
            labels = [int(v) for v in got.labels]
            row = out[method]
            row["found"].append(len(labels))
            row["recall"].append(len(top & set(labels)) / k)
            row["false"].append(sum(share.get(v, 0.0) < f_k / 2 for v in labels))
            row["rate"].append(n / spent)
    return {
        m: {"found": float(np.mean(r["found"])), "recall": float(np.mean(r["recall"])), "false": float(np.sum(r["false"])), "rate": statistics.median(r["rate"])}
        for m, r in out.items()
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n = 10^5 only")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args(argv)
    sizes = (100_000,) if args.quick else (100_000, 1_000_000)
    print("| n | ε | TreeHist found | recall@10 | false + | users/s | one-round found | recall@10 | false + | users/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        for eps in (1.0, 4.0):
            r = cell(n, eps, args.seeds)
            a, b = r["treehist"], r["treehist-1round"]
            print(
                f"| 10^{round(np.log10(n))} | {eps:g} | {a['found']:.1f} | {a['recall']:.2f} | {a['false']:.0f} | {a['rate']:,.0f} "
                f"| {b['found']:.1f} | {b['recall']:.2f} | {b['false']:.0f} | {b['rate']:,.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
