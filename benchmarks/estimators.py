"""Frequency estimators side by side: bias and variance of MI, IBU, MLE and the consistency methods
(Base-Cut and Norm-Hyb included: their threshold uses n = the number of reports, α = 0.05).

For GRR (``kary_rr``), OUE and OLH at k ∈ {2, 16, 1024}, ε ∈ {1, 4}, n = 10^5 users holding a
fixed Zipf(1.1) population (``peers.truth_counts``, the population of ``make bench-peers``), each of
R seeded repetitions draws every user's report with ldp's own exact samplers (``peers.ldp_counts``)
and applies every estimator of ``ldp.core.frequency_estimators`` to the same reports. Per cell:

- MSE ÷ theory: mean over repetitions and categories of (f̂ − f)², divided by the mean over
  categories of the MI estimator's exact variance [f p*(1−p*) + (1−f) q*(1−q*)]/(n(p* − q*)²) at the
  realized p*, q* (``frequency_variance``); ± one standard error from the spread across repetitions.
  MI itself should read 1 within its error; below 1 means the estimator beats MI's variance.
- bias² ÷ theory: mean over categories of the squared mean error, less its own sampling noise
  (s²_v/R), divided by the same theory: what systematic error contributes.
- var ÷ theory: mean over categories of the variance across repetitions (ddof = 1).
  MSE ≈ bias² + var (up to the ddof convention).

``python benchmarks/estimators.py`` prints the table and writes it as CSV and PNG under
results/estimators/ (``--out``). ``--reps`` sets R (default 40; the run takes about two minutes on 2 cores).
``--ibu-timing`` only times IBU, plain EM against its SQUAREM acceleration (``ibu_timing``).
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

from peers import ldp_counts, ldp_oracle, truth_counts  # noqa: E402

from ldp.core.frequency_estimators import ESTIMATORS, IBU_MAX_ITER, estimate, ibu_run, observed_distribution, symmetric_channel  # noqa: E402
from ldp.core.frequency_oracles import frequency_variance, support_probabilities  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ORACLES = ["GRR", "OUE", "OLH"]


def run_cell(oracle: str, k: int, eps: float, n: int, reps: int, seed: int = 1) -> dict[str, dict[str, float]]:
    """Every estimator's MSE, bias² and variance ÷ MI theory on ``reps`` seeded repetitions."""
    R = ldp_oracle(oracle, k, eps)
    p_star, q_star = support_probabilities(R)
    p, q = float(p_star), float(q_star)
    counts = truth_counts(k, n)
    inputs = np.repeat(np.arange(k, dtype=np.float64), counts)
    f = counts / n
    theory = float(np.mean(frequency_variance(R, f, n)))
    est: dict[str, list[np.ndarray]] = {name: [] for name in ESTIMATORS}
    iterations = []
    for trial in range(reps):
        c = ldp_counts(R, inputs, seed, trial)
        f_mi = (c / n - q) / (p - q)  # the MI estimate from the support counts (what frequency_estimates computes)
        run = ibu_run(observed_distribution(f_mi, p_star, q_star), symmetric_channel(p_star, q_star, k))  # = estimate("ibu", ...), with its count
        iterations.append(run.iterations)
        for name in ESTIMATORS:
            est[name].append(run.estimate if name == "ibu" else estimate(name, f_mi, p_star, q_star, n=n))  # n: Base-Cut's and Norm-Hyb's threshold
    out: dict[str, dict[str, float]] = {}
    for name, rows in est.items():
        e = np.asarray(rows) - f  # (reps, k) errors
        per_rep = (e**2).mean(axis=1) / theory
        var = e.var(axis=0, ddof=1)
        bias2 = e.mean(axis=0) ** 2 - var / reps  # unbiased for the squared bias (not clipped: MI's reads 0 ± noise)
        out[name] = dict(
            mse=float(per_rep.mean()),
            se=float(per_rep.std(ddof=1) / math.sqrt(reps)),
            bias2=float(bias2.mean() / theory),
            var=float(var.mean() / theory),
            sum_dev=float(np.abs(np.asarray(rows).sum(axis=1) - 1).max()),
            min=float(np.asarray(rows).min()),
            ibu_iterations=float(np.mean(iterations)) if name == "ibu" else float("nan"),
        )
    return out


def ibu_timing(ks: list[int], epsilons: list[float], n: int, repeats: int = 7) -> list[dict[str, Any]]:
    """CPU seconds (``time.process_time``) of ``estimate("ibu", ...)`` with plain EM
    (``accelerate=False``, the loop before SQUAREM, bit for bit) and with SQUAREM, on one seeded draw
    of n GRR reports per cell, the two interleaved ``repeats`` times in one process; medians."""
    rows = []
    for k in ks:
        for e in epsilons:
            R = ldp_oracle("GRR", k, e)
            p_star, q_star = support_probabilities(R)
            counts = truth_counts(k, n)
            c = ldp_counts(R, np.repeat(np.arange(k, dtype=np.float64), counts), 1, 0)
            f_mi = (c / n - float(q_star)) / (float(p_star) - float(q_star))
            times: dict[bool, list[float]] = {False: [], True: []}
            runs = {}
            for _ in range(repeats):
                for acc in (False, True):
                    t0 = time.process_time()
                    runs[acc] = ibu_run(observed_distribution(f_mi, p_star, q_star), symmetric_channel(p_star, q_star, k), accelerate=acc)
                    times[acc].append(time.process_time() - t0)
            mle = estimate("mle", f_mi, p_star, q_star)
            old, new = float(np.median(times[False])), float(np.median(times[True]))
            rows.append(
                dict(
                    k=k,
                    epsilon=e,
                    n=n,
                    old_s=old,
                    new_s=new,
                    speedup=old / new,
                    old_iterations=runs[False].iterations,
                    old_converged=runs[False].converged,
                    new_iterations=runs[True].iterations,
                    new_converged=runs[True].converged,
                    old_from_mle=float(np.abs(runs[False].estimate - mle).max()),
                    new_from_mle=float(np.abs(runs[True].estimate - mle).max()),
                )
            )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="*", default=[2, 16, 1024])
    parser.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 4.0])
    parser.add_argument("--n", type=int, default=10**5)
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--oracles", nargs="*", default=ORACLES, choices=ORACLES)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "estimators", help="folder for estimators.csv and estimators.png")
    parser.add_argument(
        "--ibu-timing", action="store_true", help="only time IBU, plain EM against SQUAREM (CPU, median of 7, interleaved) at --ks, --epsilons, --n"
    )
    args = parser.parse_args(argv)
    if args.ibu_timing:
        print(f"IBU CPU per estimate, GRR, n = {args.n:,} (median of 7, interleaved; {os.cpu_count()} cores)")
        print("   k    ε   plain EM (its updates)        SQUAREM (its updates)     speed-up   |plain − MLE|  |SQUAREM − MLE|")
        for r in ibu_timing(args.ks, args.epsilons, args.n):
            print(
                f"{r['k']:>5} {r['epsilon']:>4g}  {r['old_s'] * 1e3:8.2f} ms ({r['old_iterations']:>6,}{'' if r['old_converged'] else ', capped'})"
                f"   {r['new_s'] * 1e3:8.2f} ms ({r['new_iterations']:>6,}{'' if r['new_converged'] else ', capped'})   {r['speedup']:7.1f}×"
                f"   {r['old_from_mle']:.1e}        {r['new_from_mle']:.1e}"
            )
        return
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for k in args.ks:
        for e in args.epsilons:
            for o in args.oracles:
                cell = run_cell(o, k, e, args.n, args.reps)
                for name, m in cell.items():
                    rows.append(dict(oracle=o, k=k, epsilon=e, n=args.n, reps=args.reps, estimator=name, **m))
    elapsed = time.perf_counter() - t0
    names = list(ESTIMATORS)
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"MSE ÷ MI theory (bias² ÷ theory), n = {args.n:,}, {args.reps} repetitions ({os.cpu_count()} cores, {elapsed:.0f} s)")
    for h in ["k", "ε", "oracle"] + names:
        table.add_column(h, justify="right")
    for k in args.ks:
        for e in args.epsilons:
            for o in args.oracles:
                cells = {r["estimator"]: r for r in rows if r["oracle"] == o and r["k"] == k and r["epsilon"] == e}
                table.add_row(f"{k}", f"{e:g}", o, *[f"{cells[n_]['mse']:.3f} ± {cells[n_]['se']:.3f} ({cells[n_]['bias2']:.3f})" for n_ in names])
    Console(width=260).print(table)
    for r in rows:
        if r["estimator"] == "ibu" and r["ibu_iterations"] >= IBU_MAX_ITER:
            print(f"IBU stopped at its {IBU_MAX_ITER:,}-iteration cap, unconverged: {r['oracle']} k={r['k']} ε={r['epsilon']:g}")
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "estimators.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    _plot(rows, args, args.out / "estimators.png")
    print(f"wrote {args.out / 'estimators.csv'} and {args.out / 'estimators.png'}")


def _plot(rows: list[dict[str, Any]], args: argparse.Namespace, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(ESTIMATORS)
    fig, axes = plt.subplots(len(args.epsilons), len(args.ks), figsize=(4.2 * len(args.ks), 3.4 * len(args.epsilons)), squeeze=False)
    width = 0.8 / len(args.oracles)
    for i, e in enumerate(args.epsilons):
        for j, k in enumerate(args.ks):
            ax = axes[i][j]
            for t, o in enumerate(args.oracles):
                vals = [next(r["mse"] for r in rows if r["oracle"] == o and r["k"] == k and r["epsilon"] == e and r["estimator"] == n_) for n_ in names]
                ax.bar(np.arange(len(names)) + (t - (len(args.oracles) - 1) / 2) * width, vals, width, label=o)
            ax.axhline(1.0, color="black", lw=0.8, ls="--")
            ax.set_yscale("log")
            ax.set_xticks(np.arange(len(names)), names, rotation=45, ha="right", fontsize=8)
            ax.set_title(f"k = {k}, ε = {e:g}", fontsize=10)
            if j == 0:
                ax.set_ylabel("MSE ÷ MI theory")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"Frequency estimators, n = {args.n:,}, {args.reps} repetitions (dashed: MI's exact variance)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
