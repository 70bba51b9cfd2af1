"""Apple's Count Mean Sketch and Hadamard CMS: MSE ÷ theory and users/s, ldp beside pure-LDP 1.2.0.

ldp's sketches (``ldp.core.sketches``: exact integer cells, per-user AES randomness, public
tabulation hashes, a blocked integer server) at k ∈ {16, 1024, 2^16} candidate values, ε ∈ {1, 4},
n ∈ {10^5, 10^6}, with the paper's example sketch (K = 65,536 hash functions, m = 1,024 columns:
Apple, "Learning with Privacy at Scale", 2017), on the Zipf(1.1) population of ``make bench-peers``
(``peers.truth_counts``). pure-LDP's ``apple_cms`` runs in .venv-peers (built by ``make bench-peers``)
when it is there, side by side, with the same K and m.

- users/s: users / (client + server CPU time for one candidate's count, ``time.process_time``) on
  the row's n: what each user's report costs, client and server together. ldp's server is
  ``estimate_counts`` of one candidate (``method="auto"``: for a few candidates it sums each
  report's entry, with no sketch built); pure-LDP's is its per-report ``aggregate``, which builds
  the sketch.
- µs/candidate: ldp: the server's CPU time for all k candidates, divided by k (``"auto"``: the
  reports for a few, the rows of the sketch for many; at k = 2^16 the rows path, timed on 1,024
  candidates on top of its build); pure-LDP: the cost of one more candidate once its sketch is
  built (K Python hash calls; its HCMS transform of the K × m matrix is paid once and counted in
  its first candidate).
- all-k time ÷: pure-LDP's CPU time over ldp's for n users and an estimate of all k values: ldp's
  measured (client + server for all k), pure-LDP's from its rates (n/users/s + k·µs/candidate).
- MSE ÷ theory: the mean over trials and candidates of (N̂ − N)², divided by the mean over the
  same candidates of the exact variance ``count_variance`` (ldp: realized c, a fresh public hash
  family every trial; pure-LDP: the paper's c_ε, its one fixed family, whose extra collision term is
  negligible at K = 65,536); ± one standard error, the squared errors treated as independent.
- Reductions, to keep the run near 3 minutes of CPU on 2 cores: ldp runs trials until its cell's
  budget is spent (``--budget``, at least one trial; ×4 at k ≤ 16), so n = 10^6 cells often have one;
  at k = 2^16 the server estimates a uniform sample of ``--candidates`` (1,024) values, not all
  65,536 (its cost is K lookups per candidate: 2^32 for all of them); pure-LDP runs at the largest n
  only, on as many users as its client budget allows ("pure-LDP n run": its per-user cost is flat
  in n), and estimates ``--peer-candidates`` (16) values per cell (≈ 70–270 ms each).

``python benchmarks/sketches.py`` prints the table and writes sketches.csv and sketches.png under
results/sketches/ (``--out``); ``--markdown`` also writes the table as markdown.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark peers.py

from peers import truth_counts  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PEERS_PY = ROOT / ".venv-peers" / "bin" / "python"
PROTOCOLS = ["CMS", "HCMS"]


def _candidates(k: int, limit: int) -> np.ndarray:
    """Every category, or a fixed uniform sample of ``limit`` of them (sorted)."""
    if k <= limit:
        return np.arange(k)
    return np.sort(np.random.default_rng(0).choice(k, limit, replace=False))


def exact_theory(proto: str, counts: np.ndarray, eps: float, hashes: int, width: int, c: float | None = None) -> np.ndarray:
    """Var N̂ per category (``ldp.core.sketches`` module docstring) at scale c (default: ldp's realized)."""
    from ldp.core.sketches import CountMeanSketch, HadamardCountMeanSketch

    cls = CountMeanSketch if proto == "CMS" else HadamardCountMeanSketch
    R = cls(eps, tuple(range(len(counts))), hashes=hashes, width=width)
    if c is None:
        return R.count_variance(counts)
    N = np.asarray(counts, dtype=np.float64)
    n, m = N.sum(), width
    base = n * (c * c - 1) / 4 + (n - N) * (m - 1) / m**2 if proto == "CMS" else n * c * c - N - (n - N) / m**2
    pairs = float((N * (N - 1)).sum()) - N * (N - 1)
    return (m / (m - 1)) ** 2 * (base + (m - 1) / (hashes * m**2) * pairs)


def run_ldp(proto: str, k: int, eps: float, n: int, hashes: int, width: int, budget_s: float, limit: int) -> dict[str, Any]:
    """Trials at the row's n until ``budget_s`` CPU seconds are spent (at least one): a fresh public
    hash family and fresh user draws each. The first trial also times one candidate's count and
    the estimate of all k values (at k > ``limit``: the rows path's build and 1,024 candidates on
    top of it, extrapolated to k)."""
    from ldp.core.rng import RandomSource
    from ldp.core.sketches import CountMeanSketch, HadamardCountMeanSketch

    cls = CountMeanSketch if proto == "CMS" else HadamardCountMeanSketch
    cats = tuple(range(k))
    cand = _candidates(k, limit)
    counts = truth_counts(k, n)
    theory = float(np.mean(exact_theory(proto, counts, eps, hashes, width)[cand]))
    errors: list[np.ndarray] = []
    seconds, trials = 0.0, 0
    users_per_s = per_cand = all_k_s = math.nan
    while trials < 50 and (trials == 0 or seconds < budget_s):
        R = cls(eps, cats, hashes=hashes, width=width, hash_seed=trials + 1)
        R.tables  # noqa: B018  (public setup, once per deployment: not timed)
        inputs = np.random.default_rng(trials).permutation(np.repeat(np.arange(k, dtype=np.float64), counts))
        t = time.process_time()
        reports = R.sample(inputs, RandomSource(1).for_request("bench", trials, np.arange(n)))
        client = time.process_time() - t
        if trials == 0:  # one candidate's count, then every value's
            t = time.process_time()
            R.estimate_counts(reports, cand[:1].astype(np.float64))
            users_per_s = n / (client + time.process_time() - t)
            if k <= limit:
                t = time.process_time()
                R.estimate_counts(reports, np.arange(k, dtype=np.float64))
                all_k = time.process_time() - t
            else:  # 2^16 values: the rows path (what "auto" takes there), its build and 1,024 lookups extrapolated
                t = time.process_time()
                R.estimate_counts(reports, cand[:1].astype(np.float64), method="rows")
                build = time.process_time() - t
                many = np.tile(cand, -(-1024 // len(cand))).astype(np.float64)
                t = time.process_time()
                R.estimate_counts(reports, many, method="rows")
                all_k = build + max(0.0, time.process_time() - t - build) / len(many) * k
            per_cand = all_k / k * 1e6
            all_k_s = client + all_k
        t = time.process_time()
        est = R.estimate_counts(reports, cand.astype(np.float64))
        seconds += client + time.process_time() - t
        errors.append((est - counts[cand]) ** 2)
        trials += 1
    return dict(users_per_s=users_per_s, us_per_candidate=per_cand, all_k_s=all_k_s, sq_errors=np.concatenate(errors).tolist(), theory=theory, trials=trials, n_run=n,
                candidates=len(cand))


# --- pure-LDP (runs in .venv-peers) ---


def peer_worker(job: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover - runs in .venv-peers
    import warnings

    warnings.filterwarnings("ignore")
    from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer  # type: ignore[import-not-found]

    proto, k, eps, n, hashes, width, budget_s, limit = (job[x] for x in ("proto", "k", "eps", "n", "hashes", "width", "budget_s", "limit"))
    had = proto == "HCMS"
    cand = _candidates(k, limit)
    server = CMSServer(eps, hashes, width, is_hadamard=had)
    client = CMSClient(eps, server.get_hash_funcs(), width, is_hadamard=had)
    pilot = 500
    t = time.process_time()
    for v in range(pilot):
        server.aggregate(client.privatise(v % k))
    per_user = (time.process_time() - t) / pilot
    n_run = n if per_user * n <= budget_s else max(pilot, int(budget_s / per_user) // 100 * 100)
    counts = truth_counts(k, n_run)
    data = np.random.default_rng(1).permutation(np.repeat(np.arange(k), counts)).tolist()
    server.reset()
    t = time.process_time()
    for v in data:
        server.aggregate(client.privatise(v))
    agg = time.process_time() - t
    t = time.process_time()
    est = np.array([server.estimate(int(x), suppress_warnings=True) for x in cand])
    per_cand = (time.process_time() - t) / len(cand) * 1e6
    return dict(users_per_s=n_run / agg, us_per_candidate=per_cand, sq_errors=((est - counts[cand]) ** 2).tolist(), n_run=n_run, candidates=len(cand))


def run_peers(jobs: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    if not PEERS_PY.exists():
        print(f"{PEERS_PY} is missing: pure-LDP columns left empty (`make bench-peers` builds .venv-peers)")
        return None
    out = subprocess.run([str(PEERS_PY), str(Path(__file__).resolve()), "--worker"], input=json.dumps(jobs), capture_output=True, text=True, check=False, cwd=ROOT)
    if out.returncode:
        raise SystemExit(f"the pure-LDP worker failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- the table ---


def _rate(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.1f}k" if x >= 1e3 else f"{x:.0f}"


def _ratio(sq_errors: list[float], var: float) -> tuple[float, float]:
    """mean(squared error)/theory ± one standard error, the squared errors (trials × candidates)
    treated as independent (candidates' estimates are nearly uncorrelated at K = 65,536)."""
    r = np.asarray(sq_errors) / var
    return float(r.mean()), float(r.std(ddof=1) / math.sqrt(len(r)))


def end_to_end(users_per_s: float, us_per_candidate: float, n: int, k: int) -> float:
    """pure-LDP's CPU seconds for n users and an estimate of all k values, from its measured rates."""
    return n / users_per_s + k * us_per_candidate * 1e-6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ks", type=int, nargs="*", default=[16, 1024, 1 << 16])
    parser.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 4.0])
    parser.add_argument("--ns", type=int, nargs="*", default=[10**5, 10**6])
    parser.add_argument("--protocols", nargs="*", default=PROTOCOLS, choices=PROTOCOLS)
    parser.add_argument("--hashes", type=int, default=65536, help="K, the number of hash functions (the paper's example: 65,536)")
    parser.add_argument("--width", type=int, default=1024, help="m, the sketch width (the paper's example: 1,024)")
    parser.add_argument("--budget", type=float, default=2.0, help="CPU seconds per ldp cell (trials until spent; ×4 at k ≤ 16)")
    parser.add_argument("--peer-budget", type=float, default=1.5, help="CPU seconds of pure-LDP clients per cell")
    parser.add_argument("--candidates", type=int, default=1024, help="most candidates ldp estimates per cell")
    parser.add_argument("--peer-candidates", type=int, default=16, help="candidates pure-LDP estimates per cell")
    parser.add_argument("--no-peers", action="store_true", help="skip pure-LDP")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "sketches", help="folder for sketches.csv and sketches.png")
    parser.add_argument("--markdown", type=Path, help="also write the table as markdown here")
    args = parser.parse_args(argv)
    if args.worker:  # pragma: no cover - runs in .venv-peers
        jobs = json.loads(sys.stdin.read())
        print(json.dumps([peer_worker(j) for j in jobs]))
        return
    from rich.console import Console
    from rich.table import Table

    t0 = time.perf_counter()
    jobs = [
        dict(proto=p, k=k, eps=e, n=max(args.ns), hashes=args.hashes, width=args.width, budget_s=args.peer_budget, limit=args.peer_candidates)
        for k in args.ks
        for e in args.epsilons
        for p in args.protocols
    ]
    got = None if args.no_peers else run_peers(jobs)
    peers = {} if got is None else {(j["proto"], j["k"], j["eps"]): r for j, r in zip(jobs, got)}
    rows: list[dict[str, Any]] = []
    for k in args.ks:
        for e in args.epsilons:
            for n in args.ns:
                for p in args.protocols:
                    ours = run_ldp(p, k, e, n, args.hashes, args.width, args.budget * (4 if k <= 16 else 1), args.candidates)
                    mean, se = _ratio(ours["sq_errors"], ours["theory"])
                    row = dict(
                        protocol=p, k=k, epsilon=e, n=n, hashes=args.hashes, width=args.width,
                        ldp_users_per_s=ours["users_per_s"], ldp_us_per_candidate=ours["us_per_candidate"], ldp_mse_over_theory=mean, ldp_se=se,
                        ldp_n_run=ours["n_run"], ldp_trials=ours["trials"], ldp_candidates=ours["candidates"],
                    )  # fmt: skip
                    r = peers.get((p, k, e)) if n == max(args.ns) else None
                    if r is not None:
                        c_nominal = 1 / math.tanh(e / (4 if p == "CMS" else 2))
                        cand = _candidates(k, args.peer_candidates)
                        var = float(np.mean(exact_theory(p, truth_counts(k, r["n_run"]), e, args.hashes, args.width, c_nominal)[cand]))
                        pm, ps = _ratio(r["sq_errors"], var)
                        speedup = end_to_end(r["users_per_s"], r["us_per_candidate"], n, k) / ours["all_k_s"]
                        row.update(
                            peer_users_per_s=r["users_per_s"], peer_us_per_candidate=r["us_per_candidate"], peer_mse_over_theory=pm, peer_se=ps,
                            peer_n_run=r["n_run"], speedup_all_k=speedup,
                        )  # fmt: skip
                    rows.append(row)
    elapsed = time.perf_counter() - t0
    header = ["k", "ε", "n", "sketch", "ldp users/s", "ldp µs/cand", "ldp MSE÷theory", "ldp trials", "pure-LDP users/s", "pure-LDP µs/cand", "pure-LDP MSE÷theory", "pure-LDP n run", "users/s ÷", "all-k time ÷"]
    lines = []
    for r in rows:
        peer = "peer_users_per_s" in r
        lines.append(
            [
                f"{r['k']}", f"{r['epsilon']:g}", f"{r['n']:.0e}".replace("+0", ""), r["protocol"],
                _rate(r["ldp_users_per_s"]), f"{r['ldp_us_per_candidate']:.0f}", f"{r['ldp_mse_over_theory']:.3f} ± {r['ldp_se']:.3f}", f"{r['ldp_trials']}",
                _rate(r["peer_users_per_s"]) if peer else "—", f"{r['peer_us_per_candidate']:.0f}" if peer else "—",
                f"{r['peer_mse_over_theory']:.3f} ± {r['peer_se']:.3f}" if peer else "—", f"{r['peer_n_run']:,}" if peer else "—",
                f"{r['ldp_users_per_s'] / r['peer_users_per_s']:.1f}×" if peer else "—", f"{r['speedup_all_k']:.0f}×" if peer else "—",
            ]
        )  # fmt: skip
    table = Table(title=f"CMS / HCMS, K = {args.hashes:,}, m = {args.width:,}: ldp vs pure-LDP 1.2.0 ({os.cpu_count()} cores, {elapsed:.0f} s)")
    for h in header:
        table.add_column(h, justify="right")
    for line in lines:
        table.add_row(*line)
    Console(width=240).print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    fields = sorted({key for r in rows for key in r}, key=lambda x: list(rows[0]).index(x) if x in rows[0] else 100 + len(x))
    with open(args.out / "sketches.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    _plot(rows, args, args.out / "sketches.png")
    if args.markdown:
        md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(line) + " |" for line in lines]
        args.markdown.write_text("\n".join(md) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'sketches.csv'} and {args.out / 'sketches.png'}")


def _plot(rows: list[dict[str, Any]], args: argparse.Namespace, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    labels = [f"{r['protocol']} k={r['k']} ε={r['epsilon']:g} n={r['n']:.0e}".replace("+0", "") for r in rows]
    x = np.arange(len(rows))
    axes[0].errorbar(x, [r["ldp_mse_over_theory"] for r in rows], yerr=[2 * r["ldp_se"] for r in rows], fmt="o", label="ldp")
    peer = [i for i, r in enumerate(rows) if "peer_mse_over_theory" in r]
    if peer:
        axes[0].errorbar(x[peer], [rows[i]["peer_mse_over_theory"] for i in peer], yerr=[2 * rows[i]["peer_se"] for i in peer], fmt="s", label="pure-LDP")
    axes[0].axhline(1.0, color="black", lw=0.8, ls="--")
    axes[0].set_ylabel("MSE ÷ exact variance (± 2 se)")
    axes[1].bar(x - 0.2, [r["ldp_users_per_s"] for r in rows], 0.4, label="ldp")
    if peer:
        axes[1].bar(x[peer] + 0.2, [rows[i]["peer_users_per_s"] for i in peer], 0.4, label="pure-LDP")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("users/s (client + sketch, CPU)")
    for ax in axes:
        ax.set_xticks(x, labels, rotation=90, fontsize=6)
        ax.legend(fontsize=8)
    fig.suptitle(f"Apple's CMS and HCMS, K = {args.hashes:,}, m = {args.width:,}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
