"""TreeHist beside PEM on one seeded Zipf population over a domain of 2^32: recall, precision, error.

Both learners (``ldp.learners.treehist.learn_heavy_hitters_treehist``, Bassily et al. 2017, and
``ldp.learners.heavy_hitters.learn_heavy_hitters_pem``, Wang, Li & Jha 2021) run on the SAME data
file (Parquet, 32 {0,1} columns x_0..x_31, one user per row) through ``DataLROracle`` (the data
path the gRPC clients host), each on a fresh set of ledgers (budget ε: each user answers once),
for n ∈ {10^5, 10^6} and ε ∈ {1, 4}. The population: ``--support`` (4,096) distinct uniform
32-bit values with Zipf(``--zipf`` = 1.1) weights, n users drawn from it (seeded); its true top k
(``--k`` = 10) is the known set of heavy hitters.

Columns (per learner and cell):

- found: how many values the learner returned (PEM always k; TreeHist those above τ).
- recall@k: |found ∩ true top k| / k; precision@k: the share of the (at most k) largest returned
  estimates that are true top-k values (1 when none returned).
- recall(f ≥ τ+4sd): the share of the values of true frequency ≥ τ_L + 4·sd_L that were returned
  (the values TreeHist's threshold promises to find; nan when there is none).
- false: returned values whose true frequency is below τ_L − 2·sd_L (TreeHist's last-level
  threshold and the sd of one estimate at frequency 0: a value that passes the last level with
  probability ≤ Φ(−2) = 2.3 %, which the threshold is meant to reject).
- max|err|/sd: the largest |f̂ − f| over the returned true top-k values, in units of the exact sd of
  that estimate (the oracle's ``frequency_variance`` at the true f over the last group).
- τ: TreeHist's last-level threshold (a frequency), z·sd_L; f_k: the k-th true frequency;
  θ_paper = √(L·ln(L/β)/n)/ε, the paper's Θ(√(n L log(L/β))/ε) count threshold as a frequency with
  constant 1 (for scale: τ/θ_paper is the constant this run's calibrated threshold has).
- s: wall seconds of the learner (in process, 1 shard), and TreeHist's ÷ PEM's (printed, never asserted).

``python benchmarks/treehist.py`` prints the table and writes treehist.csv and treehist.png under
results/treehist/ (``--out``); ``--quick`` runs n = 10^5 only.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import ldp
from ldp.core.datafile import load_data
from ldp.core.frequency_oracles import frequency_variance
from ldp.core.query_specs import prefix_index
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import derive_key_bytes
from ldp.learners.heavy_hitters import learn_heavy_hitters_pem
from ldp.learners.treehist import learn_heavy_hitters_treehist
from ldp.local.data_oracle import DataLROracle

BITS = 32


def zipf_values(n: int, support: int, exponent: float, seed: int, bits: int = BITS) -> np.ndarray:
    """n values drawn from ``support`` distinct uniform ``bits``-bit values with Zipf weights r^−s."""
    rng = np.random.default_rng(seed)
    items = np.unique(rng.integers(0, 1 << bits, size=2 * support, dtype=np.int64))
    items = rng.permutation(items)[:support]
    weights = np.arange(1, support + 1, dtype=np.float64) ** -exponent
    return items[rng.choice(support, size=n, p=weights / weights.sum())]


def write_bits(values: np.ndarray, bits: int, folder: Path) -> tuple[Path, Path]:
    """A Parquet file with columns x_0..x_{bits−1} (x_0 the most significant bit) and its schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shifts = bits - 1 - np.arange(bits)
    table = pa.table({f"x_{j}": ((values >> shifts[j]) & 1).astype(np.int8) for j in range(bits)})
    data = folder / "users.parquet"
    pq.write_table(table, data)
    schema = folder / "schema.json"
    schema.write_text(json.dumps({"fields": [{"name": "x", "length": bits}]}))
    return data, schema


def last_sd(epsilon: float, oracle: str, candidates: int, users: int, f: float, schema: object) -> float:
    """The exact sd of one last-level estimate at true frequency f (``candidates`` + "none" categories)."""
    spec = RandomizerSpec(oracle, prefix_index(BITS, list(range(candidates))), epsilon)
    randomizer = LocalRandomizer.build(spec, schema).randomizer  # type: ignore[arg-type]
    return float(np.sqrt(frequency_variance(randomizer, f, users)))


def score(
    found: tuple[int, ...], estimates: tuple[float, ...], truth: dict[int, float], top: set[int], k: int, tau: float, sd_tau: float, sd_of: object
) -> dict[str, float]:
    hits = [v for v in found[:k] if v in top]  # precision@k: the k largest estimates returned
    errors = [abs(e - truth[v]) / sd_of(truth[v]) for v, e in zip(found, estimates) if v in top]  # type: ignore[operator]
    false = [v for v in found if truth.get(v, 0.0) < tau - 2 * sd_tau]
    above = [v for v, f in truth.items() if f >= tau + 4 * sd_tau]
    return {
        "found": len(found),
        "above": len(above),
        "recall_above": sum(v in found for v in above) / len(above) if above else float("nan"),
        "recall": len(hits) / k,
        "precision": len(hits) / min(k, len(found)) if found else 1.0,
        "false": len(false),
        "max_err_sd": max(errors) if errors else float("nan"),
    }


def run_cell(data: object, values: np.ndarray, n: int, epsilon: float, k: int, seed: int, args: argparse.Namespace) -> list[dict[str, object]]:
    counts = dict(zip(*np.unique(values, return_counts=True)))
    truth = {int(v): c / n for v, c in counts.items()}
    ranked = sorted(truth, key=lambda v: (-truth[v], v))
    top, f_k = set(ranked[:k]), truth[ranked[k - 1]]
    schema = data.schema  # type: ignore[attr-defined]
    rows: list[dict[str, object]] = []
    key = derive_key_bytes("bench-treehist", seed)

    start = time.perf_counter()
    lr = DataLROracle(data, epsilon, key)  # type: ignore[arg-type]
    th = ldp.run(learn_heavy_hitters_treehist(lr, bits=BITS, epsilon=epsilon, beam=args.beam, step=args.step, seed=seed, oracle=args.oracle))
    th_s = time.perf_counter() - start
    start = time.perf_counter()
    lr = DataLROracle(data, epsilon, key)  # type: ignore[arg-type]  # fresh ledgers: the same users answer PEM once
    pem = ldp.run(learn_heavy_hitters_pem(lr, bits=BITS, k=k, epsilon=epsilon, step=args.pem_step, seed=seed, oracle=args.oracle))
    pem_s = time.perf_counter() - start

    levels = len(th.levels)
    last = th.levels[-1]
    tau, sd0 = last.threshold, last.sd
    theta = math.sqrt(math.ceil(BITS / args.step) * math.log(math.ceil(BITS / args.step) / 0.05) / n) / epsilon
    for name, result, seconds in (("treehist", th, th_s), ("pem", pem, pem_s)):
        lv = result.levels[-1]

        def sd_of(f: float, lv: object = lv) -> float:
            return last_sd(epsilon, args.oracle, lv.candidates, lv.answered, f, schema)  # type: ignore[attr-defined]

        s = score(result.items, result.frequencies, truth, top, k, tau, sd0, sd_of)
        complete = name == "pem" or levels == math.ceil(BITS / args.step)
        ratio = th_s / pem_s if name == "treehist" else 1.0
        common = {"levels": len(result.levels), "tau": tau, "f_k": f_k, "theta_paper": theta, "tau_over_theta": tau / theta}
        row = {"learner": name, "seed": seed, "n": n, "epsilon": epsilon, "k": k}
        rows.append({**row, **s, **common, "seconds": seconds, "time_ratio": ratio, "complete": complete})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 10^5 only")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--beam", type=int, default=32, help="TreeHist's beam (prefixes kept per level)")
    parser.add_argument("--step", type=int, default=1, help="TreeHist's bits per level")
    parser.add_argument("--pem-step", type=int, default=2, help="PEM's bits per round")
    parser.add_argument("--oracle", default="olh")
    parser.add_argument("--support", type=int, default=4096)
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument("--seeds", type=int, default=5, help="populations (each its own data, key and permutation)")
    parser.add_argument("--out", type=Path, default=Path("results/treehist"))
    args = parser.parse_args(argv)
    sizes = [10**5] if args.quick else [10**5, 10**6]
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            for seed in range(args.seeds):
                values = zipf_values(n, args.support, args.zipf, seed)
                data_path, schema_path = write_bits(values, BITS, Path(tmp))
                data = load_data(data_path, schema_path)
                for epsilon in (1.0, 4.0):
                    rows += run_cell(data, values, n, epsilon, args.k, seed, args)
    print(f"means over {args.seeds} seeds; false, runs complete: totals")
    print("learner | n | ε | found | recall@k | precision@k | recall(f ≥ τ+4sd) | false | max|err|/sd | complete | τ | f_k | τ/θ_paper | s | TreeHist÷PEM")
    for n in sizes:
        for epsilon in (1.0, 4.0):
            for learner in ("treehist", "pem"):
                cell = [r for r in rows if r["n"] == n and r["epsilon"] == epsilon and r["learner"] == learner]

                def mean(key: str, cell: list[dict[str, object]] = cell) -> float:
                    xs = [float(r[key]) for r in cell if not math.isnan(float(r[key]))]  # type: ignore[arg-type]
                    return sum(xs) / len(xs) if xs else float("nan")

                false = sum(int(r["false"]) for r in cell)  # type: ignore[call-overload]
                complete = sum(bool(r["complete"]) for r in cell)
                scores = [f"{mean('found'):.1f}"] + [f"{mean(key):.2f}" for key in ("recall", "precision", "recall_above")]
                sizes_ = [f"{mean('tau'):.4f}", f"{mean('f_k'):.4f}", f"{mean('tau_over_theta'):.2f}", f"{mean('seconds'):.2f}"]
                tail = [f"{mean('max_err_sd'):.2f}", str(complete), *sizes_]
                ratio = f"{mean('time_ratio'):.2f}" if learner == "treehist" else ""
                print(" | ".join([learner, str(n), f"{epsilon:g}", *scores, str(false), *tail, ratio]))
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "treehist.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, args.out / "treehist.png")
    print(f"wrote {args.out / 'treehist.csv'} and {args.out / 'treehist.png'}")
    return 0


def plot(rows: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for learner, marker in (("treehist", "o"), ("pem", "s")):
        for epsilon, style in ((1.0, "--"), (4.0, "-")):
            pts = [r for r in rows if r["learner"] == learner and r["epsilon"] == epsilon]
            ns = sorted({int(r["n"]) for r in pts})  # type: ignore[call-overload]
            for ax, key in zip(axes, ("recall", "precision")):  # the mean over seeds
                ax.plot(ns, [np.mean([float(r[key]) for r in pts if r["n"] == n]) for n in ns], style, marker=marker, label=f"{learner} ε={epsilon:g}")  # type: ignore[arg-type]
    for ax, title in zip(axes, ("recall@k (mean over seeds)", "precision@k (mean over seeds)")):
        ax.set_xscale("log")
        ax.set_xlabel("users n")
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(title)
        ax.legend(fontsize=7)
    fig.suptitle("TreeHist vs PEM, Zipf(1.1) over 2^32, d = 32 bits")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
