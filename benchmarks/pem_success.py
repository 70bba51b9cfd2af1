"""PEM heavy hitters: how often all four planted values are found, per oracle, ε and n.

What (docs/mean_and_heavy_hitters.md, "Heavy hitters: PEM as an interactive session"):
``ldp.learners.heavy_hitters.learn_heavy_hitters_pem`` (Wang, Li & Jha 2021) in process over
``DataLROracle``, d = 20 bits (a domain of 2^20), k = 4, η = 2 (9 rounds of ≤ 16 candidates, 17
categories), on n users holding four planted values at 15 / 12 / 10 / 8 % (those of
tests/learners/test_heavy_hitters.py), the rest uniform over 2^20. Each seed s has its own data
(``numpy.random.default_rng([s, n])``), its own report key (``derive_key_bytes("bench-pem-success",
s, n)``) and its own group permutation (PEM's ``seed=s``); every oracle and ε of a (seed, n) runs on
the same data and key, each on fresh ledgers (every user answers once). A run succeeds when the
learner's k = 4 values are exactly the planted four.

``python benchmarks/pem_success.py`` prints the markdown table of successes out of ``--seeds``
(10) for every oracle (``--oracles``: kary_rr, olh, oue) at ε ∈ {1, 2} and n ∈ {10^4 … 4·10^5}, and
writes pem_success.csv under ``--out`` (results/pem_success).
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark treehist.py

from treehist import write_bits  # noqa: E402

import ldp  # noqa: E402
from ldp.core.datafile import load_data  # noqa: E402
from ldp.core.rng import derive_key_bytes  # noqa: E402
from ldp.learners.heavy_hitters import learn_heavy_hitters_pem  # noqa: E402
from ldp.local.data_oracle import DataLROracle  # noqa: E402

BITS, K, STEP = 20, 4, 2
PLANTED = {0b1011_0011_1000_1111_0001: 0.15, 0b0110_1100_0101_0010_1110: 0.12, 0b1011_0011_0000_0000_1111: 0.10, 0b0000_0001_1111_1110_0000: 0.08}
NAMES = {"kary_rr": "GRR", "olh": "OLH", "oue": "OUE"}


def planted_values(n: int, seed: int) -> np.ndarray:
    """n values: each planted value in round(share·n) rows, the rest uniform over 2^20; shuffled."""
    rng = np.random.default_rng([seed, n])
    counts = [int(round(f * n)) for f in PLANTED.values()]
    values = np.concatenate([np.repeat(np.array(list(PLANTED), dtype=np.int64), counts), rng.integers(0, 1 << BITS, n - sum(counts))])
    rng.shuffle(values)
    return values


def run(ns: list[int], epsilons: list[float], oracles: list[str], seeds: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in ns:
            for seed in range(seeds):
                folder = Path(tmp) / f"{n}-{seed}"
                folder.mkdir()
                data = load_data(*write_bits(planted_values(n, seed), BITS, folder))
                key = derive_key_bytes("bench-pem-success", seed, n)
                for epsilon in epsilons:
                    for oracle in oracles:
                        lr = DataLROracle(data, epsilon, key)  # fresh ledgers
                        found = ldp.run(learn_heavy_hitters_pem(lr, bits=BITS, k=K, epsilon=epsilon, step=STEP, seed=seed, oracle=oracle))
                        rows.append({"n": n, "seed": seed, "epsilon": epsilon, "oracle": oracle, "success": set(found.items) == set(PLANTED)})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ns", type=int, nargs="*", default=[10_000, 25_000, 50_000, 100_000, 200_000, 400_000])
    parser.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 2.0])
    parser.add_argument("--oracles", nargs="*", default=list(NAMES), choices=list(NAMES))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("results/pem_success"))
    args = parser.parse_args(argv)
    t0 = time.process_time()
    rows = run(args.ns, args.epsilons, args.oracles, args.seeds)
    cols = [(e, o) for e in args.epsilons for o in args.oracles]
    print("| users n | " + " | ".join(f"{NAMES[o]}, ε = {e:g}" for e, o in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for n in args.ns:
        hits = [sum(bool(r["success"]) for r in rows if r["n"] == n and r["epsilon"] == e and r["oracle"] == o) for e, o in cols]
        print(f"| {n:,} | " + " | ".join(f"{h}/{args.seeds}" for h in hits) + " |")
    print(f"({time.process_time() - t0:.0f} s CPU)")
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "pem_success.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
