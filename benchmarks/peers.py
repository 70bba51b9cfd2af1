"""Frequency oracles against the libraries LDP practitioners use: users/s and MSE ÷ theoretical variance.

ldp's oracles (``ldp.core.frequency_oracles`` and ``kary_rr``: exact integer cells, per-user AES
randomness, vectorized clients and servers) side by side with pure-LDP 1.2.0 and multi-freq-ldpy
0.2.5 (run in their own virtual environment, .venv-peers, pinned to numpy < 2 and xxhash < 4, which
they need) at k ∈ {2, 16, 1024, 2^16}, ε ∈ {1, 4}, n ∈ {10^5, 10^6}. ``make bench-peers`` builds
.venv-peers and runs this; the table goes in docs/benchmarks.md.

- users/s: n / (client + server CPU time, ``time.process_time``: the machine may be shared) for
  one estimate of all k frequencies.
- MSE ÷ theory: the mean over trials and categories of (f̂ − f)², divided by the mean over
  categories of that oracle's exact variance [f p*(1−p*) + (1−f) q*(1−q*)]/(n(p* − q*)²) at its own
  nominal (peers) or realized (ldp) p*, q* (``ldp.core.frequency_oracles``); ± one standard error
  (√(2/(k·trials)), coordinates treated as independent). 1 means the estimator is unbiased with
  the stated variance; multi-freq-ldpy's MI estimator clips and renormalises (biased).
- Capped runs: where a full run would take longer than its time budget (every peer at large k,
  ldp's unary encodings at k = 2^16), the cell is measured on the n shown in "n run" and its
  users/s are the measured rate (extrapolated to the row's n: per-user cost is flat in n for every
  oracle here; pure-LDP OLH's server is O(n·k) Python, multi-freq-ldpy's O(n·k) too).
  MSE ÷ theory is scale-free, so a capped run still measures it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PEERS_PY = ROOT / ".venv-peers" / "bin" / "python"
ORACLES = ["GRR", "OUE", "SUE", "OLH", "HR", "SS"]
PEER_LIBS = {"pure-LDP": ["GRR", "OUE", "SUE", "OLH", "HR"], "multi-freq-ldpy": ["GRR", "OUE", "SUE", "OLH", "SS"]}


def truth_counts(k: int, n: int, seed: int = 0) -> np.ndarray:
    """Exact counts n·f for a Zipf(1.1) distribution over k categories (randomly permuted)."""
    w = 1.0 / np.arange(1, k + 1) ** 1.1
    f = np.random.default_rng(seed).permutation(w / w.sum())
    counts = np.floor(f * n).astype(np.int64)
    counts[np.argsort(-(f * n - counts))[: n - counts.sum()]] += 1
    return counts


def theory(p: float, q: float, f: np.ndarray, n: int) -> float:
    return float(np.mean((f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * (p - q) ** 2)))


def nominal_pq(oracle: str, k: int, eps: float) -> tuple[float, float]:
    """The peers' nominal (p*, q*): the textbook parameters they use."""
    e = math.exp(eps)
    if oracle == "GRR":
        return e / (e + k - 1), 1 / (e + k - 1)
    if oracle == "OUE":
        return 0.5, 1 / (e + 1)
    if oracle == "SUE":
        return math.exp(eps / 2) / (math.exp(eps / 2) + 1), 1 / (math.exp(eps / 2) + 1)
    if oracle == "OLH":
        g = int(round(e)) + 1
        return e / (e + g - 1), 1 / g
    if oracle == "SS":
        d = max(1, min(k - 1, round(k / (e + 1))))
        return d * e / (d * e + k - d), ((d - 1) * d * e + (k - d) * d) / ((k - 1) * (d * e + k - d))
    return e / (e + 1), 0.5  # HR (the basic construction's; see docs/benchmarks.md)


# --- ldp's side ---


def ldp_oracle(oracle: str, k: int, eps: float) -> Any:
    from ldp.core.frequency_oracles import HadamardResponse, OptimizedLocalHashing, OptimizedUnaryEncoding, SubsetSelection, SymmetricUnaryEncoding
    from ldp.core.rr_mechanisms import KaryRandomizedResponse

    cats = tuple(range(k))
    make = {
        "GRR": KaryRandomizedResponse,
        "OUE": OptimizedUnaryEncoding,
        "SUE": SymmetricUnaryEncoding,
        "OLH": OptimizedLocalHashing,
        "HR": HadamardResponse,
        "SS": SubsetSelection,
    }[oracle]
    return make(eps, cats)


def ldp_counts(R: Any, inputs: np.ndarray, seed: int, trial: int) -> np.ndarray:
    """Support counts from every user's report, in batches of users (a unary report is k bits)."""
    from ldp.core.frequency_oracles import FrequencyOracle
    from ldp.core.rng import RandomSource

    n, k = len(inputs), R.k
    batch = n
    if isinstance(R, FrequencyOracle) and R.report_columns and R.report_columns > 8:  # k-bit reports (and SS's k-entry shuffle)
        batch = max(1024, (1 << 25) // max(1, k // 8))  # the packed reports' memory (Subset Selection blocks its own work)
    counts = np.zeros(k, dtype=np.int64)
    source = RandomSource(seed)
    for lo in range(0, n, batch):
        users = np.arange(lo, min(n, lo + batch))
        reports = R.sample(inputs[users], source.for_request("bench", trial, users))
        if isinstance(R, FrequencyOracle):
            counts += R.support_counts(reports)
        else:  # kary_rr reports are category values
            counts += np.bincount(reports.astype(np.int64), minlength=k)
    return counts


def run_ldp(oracle: str, k: int, eps: float, n: int, budget_s: float) -> dict[str, Any]:
    from ldp.core.frequency_oracles import support_probabilities

    R = ldp_oracle(oracle, k, eps)
    p, q = (float(x) for x in support_probabilities(R))
    pilot_n = min(n, 2000)
    t = time.process_time()
    ldp_counts(R, np.repeat(np.arange(k, dtype=np.float64), truth_counts(k, pilot_n)), 99, 0)
    per_user = (time.process_time() - t) / pilot_n
    n_run = n if per_user * n <= budget_s else max(pilot_n, int(budget_s / per_user) // 1000 * 1000)
    counts = truth_counts(k, n_run)
    inputs = np.repeat(np.arange(k, dtype=np.float64), counts)
    f = counts / n_run
    errors, seconds, trials = [], 0.0, 0
    while trials < 2000 and (trials == 0 or seconds < budget_s):
        t = time.process_time()
        c = ldp_counts(R, inputs, 1, trials)
        est = (c / n_run - q) / (p - q)
        seconds += time.process_time() - t
        errors.append(float(np.mean((est - f) ** 2)))
        trials += 1
    return dict(users_per_s=n_run * trials / seconds, mse=errors, theory=theory(p, q, f, n_run), trials=trials, n_run=n_run)


# --- the peers' side (runs in .venv-peers) ---


def peer_worker(job: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover - runs in .venv-peers
    import warnings

    warnings.filterwarnings("ignore")
    lib, oracle, k, eps, n, budget_s = job["lib"], job["oracle"], job["k"], job["eps"], job["n"], job["budget_s"]
    run = _pure_ldp(oracle, k, eps) if lib == "pure-LDP" else _multi_freq(oracle, k, eps)
    run(np.arange(min(k, 20)))  # warm up (numba compiles multi-freq-ldpy's UE client)
    pilot_n = max(5, min(200, 2_000_000 // k))  # pure-LDP's OLH server hashes every user against every value
    t = time.process_time()
    run(np.repeat(np.arange(k), truth_counts(k, pilot_n)))
    per_user = (time.process_time() - t) / pilot_n
    n_run = n if per_user * n <= budget_s else max(pilot_n, int(budget_s / per_user))
    counts = truth_counts(k, n_run)
    data = np.random.default_rng(1).permutation(np.repeat(np.arange(k), counts))
    f = counts / n_run
    errors, seconds, trials = [], 0.0, 0
    while trials < 200 and (trials == 0 or seconds < budget_s):
        t = time.process_time()
        est = run(data)
        seconds += time.process_time() - t
        errors.append(float(np.mean((est - f) ** 2)))
        trials += 1
    return dict(users_per_s=n_run * trials / seconds, mse=errors, trials=trials, n_run=n_run)


def _pure_ldp(oracle: str, k: int, eps: float) -> Any:  # pragma: no cover - runs in .venv-peers
    from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer
    from pure_ldp.frequency_oracles.hadamard_response import HadamardResponseClient, HadamardResponseServer
    from pure_ldp.frequency_oracles.local_hashing import LHClient, LHServer
    from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer

    def run(data: np.ndarray) -> np.ndarray:
        if oracle == "GRR":
            client, server = DEClient(eps, k, index_mapper=lambda x: x), DEServer(eps, k, index_mapper=lambda x: x)
        elif oracle in ("OUE", "SUE"):
            client, server = UEClient(eps, k, use_oue=oracle == "OUE", index_mapper=lambda x: x), UEServer(eps, k, use_oue=oracle == "OUE", index_mapper=lambda x: x)
        elif oracle == "OLH":
            client, server = LHClient(eps, k, use_olh=True, index_mapper=lambda x: x), LHServer(eps, k, use_olh=True, index_mapper=lambda x: x)
        else:
            server = HadamardResponseServer(eps, k, index_mapper=lambda x: x)
            client = HadamardResponseClient(eps, k, server.get_hash_funcs(), index_mapper=lambda x: x)
        for v in data.tolist():
            server.aggregate(client.privatise(v))
        server.check_and_update_estimates()
        return np.asarray(server.estimated_data, dtype=np.float64)[:k] / len(data)

    return run


def _multi_freq(oracle: str, k: int, eps: float) -> Any:  # pragma: no cover - runs in .venv-peers
    from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_MI, GRR_Client
    from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Aggregator_MI, LH_Client
    from multi_freq_ldpy.pure_frequency_oracles.SS import SS_Aggregator_MI, SS_Client
    from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Aggregator_MI, UE_Client

    def run(data: np.ndarray) -> np.ndarray:
        values = data.tolist()
        if oracle == "GRR":
            return np.asarray(GRR_Aggregator_MI([GRR_Client(v, k, eps) for v in values], k, eps))
        if oracle in ("OUE", "SUE"):
            opt = oracle == "OUE"
            return np.asarray(UE_Aggregator_MI([UE_Client(v, k, eps, opt) for v in values], eps, opt))
        if oracle == "SS":
            return np.asarray(SS_Aggregator_MI([SS_Client(v, k, eps) for v in values], k, eps))
        return np.asarray(LH_Aggregator_MI([LH_Client(v, k, eps, True) for v in values], k, eps, True))

    return run


def run_worker(script: Path, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run ``script --worker`` under .venv-peers' Python with ``jobs`` as JSON on stdin; its last
    stdout line is the JSON list of results (one per job). Shared with benchmarks/peers_longitudinal.py."""
    if not PEERS_PY.exists():
        raise SystemExit(f"{PEERS_PY} is missing: run `make bench-peers` (it builds .venv-peers with the peers' pins)")
    out = subprocess.run([str(PEERS_PY), str(Path(script).resolve()), "--worker"], input=json.dumps(jobs), capture_output=True, text=True, check=False, cwd=ROOT)
    if out.returncode:
        raise SystemExit(f"the peers' worker failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_peers(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return run_worker(Path(__file__), jobs)


# --- the table ---


def _rate(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.1f}k" if x >= 1e3 else f"{x:.0f}"


def _ratio(mse: list[float], var: float, k: int) -> str:
    """mean(MSE)/theory ± one standard error: from the spread of the per-trial MSEs (which
    accounts for correlated categories), or √(2/k) of the mean for a single trial."""
    r = np.asarray(mse) / var
    se = float(r.std(ddof=1) / math.sqrt(len(r))) if len(r) > 1 else float(r[0]) * math.sqrt(2.0 / k)
    return f"{r.mean():.3f} ± {se:.3f}"


def _times(ratio: float) -> str:
    """A ratio as the table prints it: one decimal below 100× (so a cell at the 10× line reads
    9.6× or 10.4×, not 10×), whole numbers above."""
    return f"{ratio:.1f}×" if ratio < 100 else f"{ratio:.0f}×"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ks", type=int, nargs="*", default=[2, 16, 1024, 1 << 16])
    parser.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 4.0])
    parser.add_argument("--ns", type=int, nargs="*", default=[10**5, 10**6])
    parser.add_argument("--oracles", nargs="*", default=ORACLES, choices=ORACLES)
    parser.add_argument("--budget", type=float, default=3.0, help="seconds per ldp cell (trials until spent; ×3 at k ≤ 16)")
    parser.add_argument("--peer-budget", type=float, default=2.0, help="seconds per peer cell")
    parser.add_argument("--markdown", type=Path, help="also write the table as markdown here")
    args = parser.parse_args(argv)
    if args.worker:  # pragma: no cover - runs in .venv-peers
        jobs = json.loads(sys.stdin.read())
        print(json.dumps([peer_worker(j) for j in jobs]))
        return
    from rich.console import Console
    from rich.table import Table

    jobs = [
        dict(lib=lib, oracle=o, k=k, eps=e, n=max(args.ns), budget_s=args.peer_budget)
        for k in args.ks
        for e in args.epsilons
        for lib, os_ in PEER_LIBS.items()
        for o in os_
        if o in args.oracles
    ]
    t0 = time.perf_counter()
    peers = {(j["lib"], j["oracle"], j["k"], j["eps"]): r for j, r in zip(jobs, run_peers(jobs))}
    rows = []
    for k in args.ks:
        for e in args.epsilons:
            for n in args.ns:
                for o in args.oracles:
                    ours = run_ldp(o, k, e, n, args.budget * (3 if k <= 16 else 1))  # small k: more trials for a precise MSE
                    cells = {}
                    for lib in PEER_LIBS:
                        r = peers.get((lib, o, k, e))
                        if r is None:
                            cells[lib] = ("—", "—", "—")
                            continue
                        p, q = nominal_pq(o, k, e)
                        f = truth_counts(k, r["n_run"]) / r["n_run"]
                        cells[lib] = (_rate(r["users_per_s"]), _ratio(r["mse"], theory(p, q, f, r["n_run"]), k), f"{r['n_run']:,}")
                    faster = max((peers[(lib, o, k, e)]["users_per_s"] for lib in PEER_LIBS if (lib, o, k, e) in peers), default=float("nan"))
                    rows.append(
                        [f"{k}", f"{e:g}", f"{n:.0e}".replace("+0", ""), o, _rate(ours["users_per_s"]), _ratio(ours["mse"], ours["theory"], k), f"{ours['n_run']:,}"]
                        + [c for lib in PEER_LIBS for c in cells[lib]]
                        + [_times(ours["users_per_s"] / faster) if faster == faster else "—"]
                    )
    header = ["k", "ε", "n", "oracle", "ldp users/s", "ldp MSE÷theory", "ldp n run"] + [f"{lib} {c}" for lib in PEER_LIBS for c in ("users/s", "MSE÷theory", "n run")] + ["ldp ÷ faster peer"]
    table = Table(title=f"Frequency oracles: ldp vs pure-LDP 1.2.0 and multi-freq-ldpy 0.2.5 ({os.cpu_count()} cores, {time.perf_counter() - t0:.0f} s)")
    for h in header:
        table.add_column(h, justify="right")
    for r in rows:
        table.add_row(*r)
    Console(width=260).print(table)
    if args.markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]
        args.markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
