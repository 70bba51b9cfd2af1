"""Longitudinal frequency oracles with memoization: the estimator's MSE ÷ theory, and the two attacks.

The protocols of ``ldp.core.longitudinal`` (L-GRR, L-OUE, L-OSUE, L-SUE = basic RAPPOR, with the
published calibrations, and L-GRR calibrated on its exact k-ary ratio, "l_grr (tight)"), each
user's permanent randomized response a pure function of a memo key, the user and the value;
ε1 = ε∞/2.

1. **MSE ÷ theory** at k ∈ {2, 16, 1024}, ε∞ ∈ {1, 4}, n = 10^5 users holding the fixed Zipf(1.1)
   population of ``make bench-peers`` (``peers.truth_counts``), R seeded repetitions (a fresh memo
   key and fresh report draws each): the mean over repetitions and values of (f̂ − f)², divided by
   the mean over values of the exact variance ``frequency_variance`` (realized two-level
   probabilities); ± one standard error from the spread across repetitions. 1 means unbiased with
   the stated variance. Beside it: the realized one-report loss ÷ ε1 and the PRR's loss ÷ ε∞.
2. **Attack 1, unchanged value**: N users with uniform values report T = 100 periods; the
   aggregator's optimal decoder (``decode_repeated``: the most supported value) against the bound
   e^ε∞/(e^ε∞ + k − 1) that ε∞ allows for any number of periods, and the same decoder against the
   broken variant without memoization (a new PRR every period).
3. **Attack 2, a value that changes**: v1 for 50 periods, then v2 for 50 (independent uniform,
   k = 4). The aggregator, told when the change happened (that is not protected), decodes the pair;
   against what one ε∞ over the pair would allow, e^ε∞/(e^ε∞ + k² − 1), and what the ledger's
   charge (``longitudinal_charges``: 2ε∞ when v1 ≠ v2) allows, e^{2ε∞}/(e^{2ε∞} + k² − 1); and how
   often it tells correctly whether the user changed.

``python benchmarks/longitudinal.py`` prints the tables and writes longitudinal.csv,
longitudinal_attacks.csv and longitudinal.png under results/longitudinal/ (``--out``); about a
few minutes on 2 cores with the defaults (``--reps 10``).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark peers.py, run as a script or imported

from peers import truth_counts  # noqa: E402

from ldp.core.longitudinal import (  # noqa: E402
    PROTOCOLS,
    LongitudinalOracle,
    decode_repeated,
    estimate_frequencies,
    frequency_variance,
    instantaneous_response,
    longitudinal_charges,
    memo_key,
    permanent_response,
)
from ldp.core.rng import RandomSource, derive_key_bytes, generator  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# (protocol, calibration): every protocol as published, and L-GRR calibrated on its exact k-ary ratio
VARIANTS = [(p, "paper") for p in PROTOCOLS] + [("l_grr", "tight")]


def name(protocol: str, calibration: str) -> str:
    return protocol if calibration == "paper" else f"{protocol} ({calibration})"


def mse_cell(protocol: str, calibration: str, k: int, eps_inf: float, ratio: float, n: int, reps: int, seed: int = 1) -> dict[str, Any]:
    """MSE ÷ theory of one protocol on ``reps`` seeded repetitions of a fixed population."""
    o = LongitudinalOracle(protocol, k, eps_inf, eps_inf * ratio, calibration)
    counts = truth_counts(k, n)
    f = counts / n
    values = np.repeat(np.arange(k), counts)
    users = np.arange(n, dtype=np.int64)
    theory = float(np.mean(frequency_variance(f, n, o)))
    mse = []
    t0 = time.process_time()
    for r in range(reps):
        prr = permanent_response(memo_key(derive_key_bytes("bench-longitudinal", seed, r)), users, values, o)
        y = instantaneous_response(prr, RandomSource(seed).for_request(f"reports {protocol} {k} {eps_inf}", r, users), o)
        mse.append(float(np.mean((estimate_frequencies(y, o) - f) ** 2)))
    cpu = time.process_time() - t0
    ratios = np.asarray(mse) / theory
    return dict(
        protocol=name(protocol, calibration), k=k, eps_inf=eps_inf, eps_1=o.epsilon_1, n=n, reps=reps,
        mse_over_theory=float(ratios.mean()), se=float(ratios.std(ddof=1) / math.sqrt(reps)) if reps > 1 else float("nan"),
        theory=theory, one_report_loss_over_eps1=o.single_report_loss / o.epsilon_1, prr_loss_over_eps_inf=o.permanent_loss / eps_inf,
        users_per_s=n * reps / cpu if cpu > 0 else float("nan"),
    )


def attack_unchanged(protocol: str, calibration: str, k: int, eps_inf: float, ratio: float, users: int, periods: int, seed: int = 11) -> dict[str, Any]:
    """Attack 1: the optimal decoder of an unchanged uniform value from ``periods`` reports."""
    o = LongitudinalOracle(protocol, k, eps_inf, eps_inf * ratio, calibration)
    ids = np.arange(users, dtype=np.int64)
    values = generator(seed, "values", k).integers(0, k, users)
    memo = memo_key(derive_key_bytes("bench-attack", seed))
    src = RandomSource(seed)
    prr = permanent_response(memo, ids, values, o)
    acc = {}
    for memoized in (True, False):
        reports = []
        for t in range(periods):
            p = prr if memoized else permanent_response(memo, ids, values, o, question=f"period {t}")  # broken: a new PRR per report
            reports.append(instantaneous_response(p, src.for_request("reports", t, ids), o))
        acc[memoized] = float((decode_repeated(reports, o, generator(seed, "ties", memoized)) == values).mean())
    bound = math.exp(eps_inf) / (math.exp(eps_inf) + k - 1)
    return dict(
        attack="unchanged", protocol=name(protocol, calibration), k=k, eps_inf=eps_inf, eps_1=o.epsilon_1, users=users, periods=periods,
        accuracy=acc[True], se=math.sqrt(acc[True] * (1 - acc[True]) / users), bound=bound, bound_other="", broken_accuracy=acc[False],
        change_detection="", mean_charge=float(longitudinal_charges([0] * periods, eps_inf, o.epsilon_1).sum()),
    )


def attack_changing(protocol: str, calibration: str, k: int, eps_inf: float, ratio: float, users: int, periods: int, seed: int = 21) -> dict[str, Any]:
    """Attack 2: v1 for half the periods, then v2; the pair decoded knowing when it changed."""
    o = LongitudinalOracle(protocol, k, eps_inf, eps_inf * ratio, calibration)
    ids = np.arange(users, dtype=np.int64)
    rng = generator(seed, "pairs", k)
    v1, v2 = rng.integers(0, k, users), rng.integers(0, k, users)
    memo = memo_key(derive_key_bytes("bench-change", seed))
    prr1, prr2 = permanent_response(memo, ids, v1, o), permanent_response(memo, ids, v2, o)
    src = RandomSource(seed)
    half = periods // 2
    first = [instantaneous_response(prr1, src.for_request("reports", t, ids), o) for t in range(half)]
    second = [instantaneous_response(prr2, src.for_request("reports", half + t, ids), o) for t in range(half)]
    g1, g2 = decode_repeated(first, o, generator(seed, "ties", 1)), decode_repeated(second, o, generator(seed, "ties", 2))
    pair = float(((g1 == v1) & (g2 == v2)).mean())
    e, k2 = math.exp(eps_inf), k * k
    charges = [longitudinal_charges([a] * half + [b] * half, eps_inf, o.epsilon_1).sum() for a, b in zip(v1[:2000], v2[:2000])]
    return dict(
        attack="changing", protocol=name(protocol, calibration), k=k, eps_inf=eps_inf, eps_1=o.epsilon_1, users=users, periods=periods,
        accuracy=pair, se=math.sqrt(pair * (1 - pair) / users), bound=e * e / (e * e + k2 - 1), bound_other=e / (e + k2 - 1), broken_accuracy="",
        change_detection=float(((g1 != g2) == (v1 != v2)).mean()), mean_charge=float(np.mean(charges)),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="*", default=[2, 16, 1024])
    parser.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 4.0], help="ε∞ values")
    parser.add_argument("--ratio", type=float, default=0.5, help="ε1 = ratio·ε∞")
    parser.add_argument("--n", type=int, default=10**5)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--attack-users", type=int, default=20000)
    parser.add_argument("--periods", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "longitudinal", help="folder for the CSV files and longitudinal.png")
    args = parser.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    console = Console(width=220)
    t0 = time.perf_counter()
    rows = [mse_cell(p, c, k, e, args.ratio, args.n, args.reps) for k in args.ks for e in args.epsilons for p, c in VARIANTS]
    table = Table(title=f"Longitudinal oracles: MSE ÷ theory, n = {args.n:,}, {args.reps} repetitions, ε1 = {args.ratio:g}·ε∞ ({os.cpu_count()} cores, {time.perf_counter() - t0:.0f} s)")
    for h in ["k", "ε∞", "ε1", "protocol", "MSE ÷ theory", "theory (mean Var f̂)", "one-report loss ÷ ε1", "PRR loss ÷ ε∞", "users/s (CPU)"]:
        table.add_column(h, justify="right")
    for r in rows:
        table.add_row(
            f"{r['k']}", f"{r['eps_inf']:g}", f"{r['eps_1']:g}", r["protocol"], f"{r['mse_over_theory']:.3f} ± {r['se']:.3f}", f"{r['theory']:.3g}",
            f"{r['one_report_loss_over_eps1']:.4f}", f"{r['prr_loss_over_eps_inf']:.6f}", f"{r['users_per_s'] / 1e6:.2f}M",
        )
    console.print(table)
    t1 = time.perf_counter()
    attacks = [attack_unchanged(p, c, k, e, args.ratio, args.attack_users, args.periods) for k in (2, 16) for e in args.epsilons for p, c in VARIANTS]
    attacks += [attack_changing(p, c, 4, e, args.ratio, args.attack_users, args.periods) for e in args.epsilons for p, c in VARIANTS]
    table = Table(title=f"Memoization attacks: {args.attack_users:,} users, T = {args.periods} periods ({time.perf_counter() - t1:.0f} s)")
    for h in ["attack", "k", "ε∞", "protocol", "decoder accuracy", "bound ε∞ allows", "without memo", "pair: one-ε∞ bound", "change told right", "mean charge"]:
        table.add_column(h, justify="right")
    for a in attacks:
        unchanged = a["attack"] == "unchanged"
        table.add_row(
            a["attack"], f"{a['k']}", f"{a['eps_inf']:g}", a["protocol"], f"{a['accuracy']:.4f} ± {a['se']:.4f}",
            f"{a['bound']:.4f}" + ("" if unchanged else " (2ε∞)"), f"{a['broken_accuracy']:.4f}" if unchanged else "—",
            "—" if unchanged else f"{a['bound_other']:.4f}", "—" if unchanged else f"{a['change_detection']:.4f}", f"{a['mean_charge']:.3g}",
        )
    console.print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in (("longitudinal.csv", rows), ("longitudinal_attacks.csv", attacks)):
        with open(args.out / name, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(data[0]))
            writer.writeheader()
            writer.writerows(data)
    _plot(rows, attacks, args, args.out / "longitudinal.png")
    print(f"wrote {args.out / 'longitudinal.csv'}, {args.out / 'longitudinal_attacks.csv'} and {args.out / 'longitudinal.png'}")


def _plot(rows: list[dict[str, Any]], attacks: list[dict[str, Any]], args: argparse.Namespace, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    cells = [(k, e) for k in args.ks for e in args.epsilons]
    names = [name(p, c) for p, c in VARIANTS]
    width = 0.8 / len(names)
    for t, p in enumerate(names):
        vals = [next(r for r in rows if r["protocol"] == p and r["k"] == k and r["eps_inf"] == e) for k, e in cells]
        x = np.arange(len(cells)) + (t - (len(names) - 1) / 2) * width
        left.bar(x, [v["mse_over_theory"] for v in vals], width, yerr=[v["se"] for v in vals], label=p)
    left.axhline(1.0, color="black", lw=0.8, ls="--")
    left.set_xticks(np.arange(len(cells)), [f"k={k}\nε∞={e:g}" for k, e in cells], fontsize=8)
    left.set_ylabel("MSE ÷ exact variance")
    left.set_title(f"Estimator, n = {args.n:,}, {args.reps} reps, ε1 = {args.ratio:g}·ε∞", fontsize=10)
    left.legend(fontsize=8)
    unchanged = [a for a in attacks if a["attack"] == "unchanged"]
    pos = np.arange(len(unchanged))
    right.bar(pos - 0.2, [a["accuracy"] for a in unchanged], 0.4, label="memoized (decoder)")
    right.bar(pos + 0.2, [a["broken_accuracy"] for a in unchanged], 0.4, label="no memoization (broken)")
    right.scatter(pos - 0.2, [a["bound"] for a in unchanged], marker="_", s=200, color="black", zorder=3, label="bound e^ε∞/(e^ε∞+k−1)")
    right.set_xticks(pos, [f"{a['protocol']}\nk={a['k']} ε∞={a['eps_inf']:g}" for a in unchanged], fontsize=6, rotation=90)
    right.set_ylabel("decoding accuracy")
    right.set_title(f"Attack: T = {args.periods} periods of an unchanged value", fontsize=10)
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
