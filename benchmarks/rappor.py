"""Full RAPPOR (Bloom filters, cohorts, memoized PRR, IRR): the decoder's detection and error,
and the longitudinal attack.

``ldp.core.rappor`` at the paper's example parameters f = 0.5, p = 0.5, q = 0.75, h = 2
(ε∞ = 4 ln 3 ≈ 4.39, ε1 ≈ 1.07), each user's PRR a pure function of a memo key, the user and
the string.

1. **Decoder**: n users (n ∈ {10^5, 10^6}); 90% hold one of 100 listed strings drawn from
   Zipf(1.1), 10% one of 1,000 unlisted strings (uniform); the candidate list is the 100 listed
   strings plus 50 decoys nobody holds. k ∈ {128, 256} bits, m ∈ {8, 64} cohorts, one report
   per user. Reported: how many candidates are detected (Bonferroni α = 0.05), precision (the
   detected that are held), recall (of the 100 listed, and of the top 10), decoys detected, the
   MSE of the 150 frequencies (undetected = 0) and of the detected ones, the mass found, the
   smallest true frequency detected and the largest missed, and decode.R's "detection frequency"
   z_{1−α/M}·sqrt(p*(1 − p*)·n)/(q* − p*)/n (one bit's count at the Bonferroni level).
2. **Attack, unchanged value**: users hold one of 10 candidates (uniform) and send T = 100 reports
   (k = 128, m = 8). The aggregator's optimal decoder (``decode_repeated``) against the bound
   e^ε∞/(e^ε∞ + 9) that ε∞ allows for any T, and against the broken variant without memoization
   (a fresh PRR every report), for which the decoder uses the composite one-report channel.

``python benchmarks/rappor.py`` prints the tables and writes rappor.csv, rappor_attack.csv and
rappor.png under results/rappor/ (``--out``); about 1–2 minutes on 2 cores with the defaults.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ldp.core.longitudinal import memo_key  # noqa: E402
from ldp.core.rappor import (  # noqa: E402
    Rappor,
    bloom_counts,
    cohorts,
    decode,
    decode_repeated,
    instantaneous_response,
    permanent_response,
)
from ldp.core.rng import RandomSource, derive_key_bytes, generator  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LISTED, DECOYS, UNLISTED, ZIPF, UNLISTED_SHARE = 100, 50, 1000, 1.1, 0.10


def population(n: int, seed: int) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(strings held, candidate list, true frequency of each candidate)."""
    listed = [f"https://site-{i:03d}.example/" for i in range(LISTED)]
    decoys = [f"https://decoy-{i:03d}.example/" for i in range(DECOYS)]
    w = 1.0 / np.arange(1, LISTED + 1) ** ZIPF
    w /= w.sum()
    rng = generator(seed, "rappor population", n)
    held = np.array(listed, dtype=object)[rng.choice(LISTED, n, p=w)]
    other = rng.random(n) < UNLISTED_SHARE
    held[other] = np.array([f"https://unlisted-{i:04d}.example/" for i in range(UNLISTED)], dtype=object)[rng.integers(0, UNLISTED, int(other.sum()))]
    values, counts = np.unique(held, return_counts=True)
    share = dict(zip(values.tolist(), (counts / n).tolist()))
    truth = np.array([share.get(s, 0.0) for s in listed + decoys])
    return held, listed + decoys, truth


def decoder_cell(n: int, k: int, m: int, f: float, p: float, q: float, seed: int = 1) -> dict[str, Any]:
    R = Rappor(k=k, h=2, m=m, f=f, p=p, q=q)
    held, cands, truth = population(n, seed)
    users = np.arange(n, dtype=np.int64)
    memo = memo_key(derive_key_bytes("bench-rappor", seed, n))
    t0 = time.process_time()
    c = cohorts(memo, users, R)
    y = instantaneous_response(permanent_response(memo, users, list(held), c, R), RandomSource(seed).for_request(f"rappor {n} {k} {m}", 0, users), R)
    t1 = time.process_time()
    counts, N = bloom_counts(y, c, R)
    out = decode(counts, N, cands, R)
    t2 = time.process_time()
    held_mask = truth > 0
    det = out.detected
    top10 = np.argsort(-truth)[:10]
    qs, ps = (float(x) for x in R.report_probabilities())
    limit = NormalDist().inv_cdf(1 - 0.05 / len(cands)) * math.sqrt(ps * (1 - ps) * n) / (qs - ps) / n  # decode.R's detection frequency
    return dict(
        n=n, k=k, m=m, h=2, f=f, p=p, q=q, eps_inf=R.epsilon_inf, eps_1=R.epsilon_1,
        detected=int(det.sum()), precision=float((det & held_mask).sum() / det.sum()) if det.any() else float("nan"),
        recall=float((det & held_mask).sum() / held_mask.sum()), recall_top10=float(det[top10].mean()),
        decoys_detected=int(det[LISTED:].sum()), mse=float(np.mean((out.frequencies - truth) ** 2)),
        mse_detected=float(np.mean((out.frequencies[det] - truth[det]) ** 2)) if det.any() else float("nan"),
        mass_found=float(out.frequencies.sum()), mass_listed=float(truth.sum()),
        smallest_detected=float(truth[det].min()) if det.any() else float("nan"),
        largest_missed=float(truth[~det & held_mask].max()) if (~det & held_mask).any() else 0.0, detection_limit=limit,
        client_s=t1 - t0, decode_s=t2 - t1,
    )


def attack(users: int, periods: int, f: float, p: float, q: float, seed: int = 11) -> dict[str, Any]:
    R = Rappor(k=128, h=2, m=8, f=f, p=p, q=q)
    cands = [f"secret-{i}" for i in range(10)]
    ids = np.arange(users, dtype=np.int64)
    truth = generator(seed, "rappor attack").integers(0, len(cands), users)
    strings = [cands[v] for v in truth]
    memo = memo_key(derive_key_bytes("bench-rappor-attack", seed))
    c = cohorts(memo, ids, R)
    prr = permanent_response(memo, ids, strings, c, R)
    src = RandomSource(seed)
    acc: dict[bool, float] = {}
    seen_prr = float("nan")
    for memoized in (True, False):
        counts = np.zeros((users, R.k), dtype=np.int64)
        for t in range(periods):
            base = prr if memoized else permanent_response(memo, ids, strings, c, R, question=f"period {t}")  # broken: a new PRR per report
            counts += np.unpackbits(instantaneous_response(base, src.for_request("reports", t, ids), R), axis=1, count=R.k)
        acc[memoized] = float((decode_repeated(counts, periods, c, cands, R, memoized=memoized) == truth).mean())
    # the T → ∞ limit of the memoized decoder: the aggregator sees B' itself (IRR = identity)
    direct = Rappor(k=128, h=2, m=8, f=f, p=0.0, q=1.0)
    seen_prr = float((decode_repeated(np.unpackbits(prr, axis=1, count=R.k), 1, c, cands, direct) == truth).mean())
    e = math.exp(R.epsilon_inf)
    return dict(
        users=users, periods=periods, candidates=len(cands), eps_inf=R.epsilon_inf, eps_1=R.epsilon_1, accuracy=acc[True],
        se=math.sqrt(acc[True] * (1 - acc[True]) / users), seen_prr_accuracy=seen_prr, bound=e / (e + len(cands) - 1),
        one_report_bound=math.exp(R.epsilon_1) / (math.exp(R.epsilon_1) + len(cands) - 1), broken_accuracy=acc[False],
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ns", type=int, nargs="*", default=[10**5, 10**6])
    parser.add_argument("--ks", type=int, nargs="*", default=[128, 256])
    parser.add_argument("--ms", type=int, nargs="*", default=[8, 64])
    parser.add_argument("--f", type=float, default=0.5)
    parser.add_argument("--p", type=float, default=0.5)
    parser.add_argument("--q", type=float, default=0.75)
    parser.add_argument("--attack-users", type=int, default=5000)
    parser.add_argument("--periods", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "rappor", help="folder for the CSV files and rappor.png")
    args = parser.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    console = Console(width=220)
    t0 = time.perf_counter()
    rows = [decoder_cell(n, k, m, args.f, args.p, args.q) for n in args.ns for k in args.ks for m in args.ms]
    r0 = rows[0]
    table = Table(
        title=f"RAPPOR decoder: f = {args.f:g}, p = {args.p:g}, q = {args.q:g}, h = 2 (ε∞ = {r0['eps_inf']:.4f}, ε1 = {r0['eps_1']:.4f}); "
        f"{LISTED} listed Zipf({ZIPF}) + {DECOYS} decoy candidates, {UNLISTED_SHARE:.0%} unlisted ({os.cpu_count()} cores, {time.perf_counter() - t0:.0f} s)"
    )
    for h in ["n", "k", "m", "detected", "precision", "recall", "recall top 10", "decoys", "MSE (all 150)", "MSE (detected)", "mass found / listed", "smallest detected", "largest missed", "detection limit", "client s", "decode s"]:
        table.add_column(h, justify="right")
    for r in rows:
        table.add_row(
            f"{r['n']:,}", f"{r['k']}", f"{r['m']}", f"{r['detected']}", f"{r['precision']:.3f}", f"{r['recall']:.3f}", f"{r['recall_top10']:.2f}",
            f"{r['decoys_detected']}", f"{r['mse']:.2e}", f"{r['mse_detected']:.2e}", f"{r['mass_found']:.3f} / {r['mass_listed']:.3f}",
            f"{r['smallest_detected']:.4f}", f"{r['largest_missed']:.4f}", f"{r['detection_limit']:.4f}", f"{r['client_s']:.1f}", f"{r['decode_s']:.1f}",
        )
    console.print(table)
    t1 = time.perf_counter()
    att = [attack(args.attack_users, args.periods, args.f, args.p, args.q)]
    table = Table(title=f"Longitudinal attack: {args.attack_users:,} users, 10 candidates, T = {args.periods} reports of one value, k = 128, m = 8 ({time.perf_counter() - t1:.0f} s)")
    for h in ["decoder accuracy (memoized)", "seeing B' itself (T → ∞)", "bound e^ε∞/(e^ε∞+9)", "one report: e^ε1/(e^ε1+9)", "without memo (broken)"]:
        table.add_column(h, justify="right")
    for a in att:
        table.add_row(f"{a['accuracy']:.4f} ± {a['se']:.4f}", f"{a['seen_prr_accuracy']:.4f}", f"{a['bound']:.4f}", f"{a['one_report_bound']:.4f}", f"{a['broken_accuracy']:.4f}")
    console.print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in (("rappor.csv", rows), ("rappor_attack.csv", att)):
        with open(args.out / name, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(data[0]))
            writer.writeheader()
            writer.writerows(data)
    _plot(rows, att, args.out / "rappor.png")
    print(f"wrote {args.out / 'rappor.csv'}, {args.out / 'rappor_attack.csv'} and {args.out / 'rappor.png'}")


def _plot(rows: list[dict[str, Any]], att: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [3, 1]})
    x = np.arange(len(rows))
    left.bar(x - 0.2, [r["precision"] for r in rows], 0.4, label="precision")
    left.bar(x + 0.2, [r["recall"] for r in rows], 0.4, label="recall (100 listed)")
    left.set_xticks(x, [f"n={r['n']:.0e}\nk={r['k']} m={r['m']}" for r in rows], fontsize=7)
    left.set_ylim(0, 1.05)
    left.set_title("Decoder: detection (Bonferroni α = 0.05); MSE on the right axis", fontsize=10)
    ax2 = left.twinx()
    ax2.plot(x, [r["mse"] for r in rows], "k.-", label="MSE of the 150 frequencies")
    ax2.set_yscale("log")
    left.legend(fontsize=7, loc="lower left")
    ax2.legend(fontsize=7, loc="lower right")
    a = att[0]
    names = ["memoized", "B' seen", "broken"]
    right.bar(names, [a["accuracy"], a["seen_prr_accuracy"], a["broken_accuracy"]], color=["C0", "C2", "C3"])
    right.axhline(a["bound"], color="black", ls="--", lw=0.8, label="ε∞ bound")
    right.set_ylim(0, 1.05)
    right.set_title(f"T = {a['periods']} reports of one value", fontsize=10)
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
