"""Longitudinal, multidimensional and estimator protocols against multi-freq-ldpy 0.2.5 and pure-LDP 1.2.0.

Issue 26's "Against the peers", beside ``benchmarks/peers.py``'s frequency-oracle table and built
the same way: ldp runs here, the peers in .venv-peers (numpy < 2, their pins) through this script's
``--worker``, on the same Zipf(1.1) populations (``peers.truth_counts``; the multidimensional
records are written once to an .npy file that both sides read), CPU time of client + server
(``time.process_time``: the machine is shared), in one run. Three tables:

- **longitudinal**: ldp's L-GRR (published "paper" calibration, and "tight"), L-OUE, L-OSUE and
  L-SUE (``ldp.core.longitudinal``: a memoized PRR drawn once per (user, value) from the memo key,
  a fresh IRR per report) against multi-freq-ldpy's ``L_*_Client`` + ``L_*_Aggregator_MI`` at the
  same ε∞ and ε1 = ε∞/2. One period, and (ldp only) T periods of the same users: the mean of T
  per-period estimates, whose variance ``frequency_variance(..., periods=T)`` has the PRR's floor.
  multi-freq-ldpy has no memo: each ``L_*_Client`` call draws a new PRR, so T calls for one user
  are a T·ε∞ disclosure, not a T-period collection, and it has no T-period cell.
- **multidimensional**: ldp's SPL, SMP and the paper's RS+FD[GRR] and RS+FD[OUE-z] (the sampled
  attribute at ε′ = ln(d(e^ε − 1) + 1), as multi-freq-ldpy's ``RSpFD_*`` use) against
  multi-freq-ldpy's ``SPL_*``/``SMP_*``/``RSpFD_*`` at d ∈ {2, 5}, the per-attribute oracle
  chosen by ldp (``choose_oracle``: GRR or OUE) and the same one given to the peer.
- **estimators**: on GRR (and L-GRR) reports, ldp's ``mi``, ``norm_mul``, ``norm_sub``, ``mle`` and
  ``ibu`` (``ldp.core.frequency_estimators``) against their namesakes: pure-LDP's ``DEServer``
  ``estimate_all`` with normalization 0 (none = MI) and 2 (simplex projection = Norm-Sub),
  multi-freq-ldpy's ``GRR_Aggregator_MI`` (clip at 0 then renormalise = Norm-Mul) and
  ``GRR_Aggregator_IBU`` / ``L_GRR_Aggregator_IBU``. multi-freq-ldpy 0.2.5 ships no MLE. Both
  sides run the whole n here (a biased estimator's MSE ÷ theory depends on n). multi-freq-ldpy's
  IBU multiplies a dense k × k matrix per iteration (up to 10^4): 30–50 s per estimate at
  k = 1024, a 32 GiB matrix at 2^16; it runs at k ≤ 16, and at k = 1024 with 2 repetitions under
  ``--full`` only.

Per cell: **users/s** = users (× periods) ÷ CPU seconds of client + server over the cell's
repetitions; **MSE ÷ theory** = the mean over repetitions and values of (f̂ − f)² over the mean over
values of the protocol's exact variance (of the unbiased estimator: for the biased estimators, below
1 means better than MI), ± one standard error from the spread across repetitions; **n run**: a
cell whose full n × reps would pass its CPU budget runs fewer users (MSE ÷ theory is scale-free;
per-user cost is flat in n), at least 10 seeded repetitions (2 for multi-freq-ldpy's IBU at
k = 1024 under ``--full``). The peers' theory is the same
formula at ldp's realized parameters: the published ones (the peers' p1, q1, p2, q2 were checked
against them) on ldp's exact grids, within 1e-14 relative for L-GRR and 2.2e-4 for the unary
encodings' 16-bit cells, far below the standard errors.
multi-freq-ldpy's MI output is clipped and renormalised (biased), so its unbiased counterpart is
also shown: "raw MI" applies (C/n − q_s)/(p_s − q_s) to the peer's own reports.

``python benchmarks/peers_longitudinal.py`` (reduced grid, ≈ 2.5 min on 2 cores) prints the tables
and writes peers_longitudinal.csv, .md and .png under results/peers_longitudinal/
(``--out``); ``--full`` runs issue 26's grid (k ∈ {2, 16, 1024, 2^16}, ε ∈ {1, 4},
n ∈ {10^5, 10^6}; long); ``--quick`` is the tests' grid (k = 16, ε = 4, n = 20 000, d = 2).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark peers.py, run as a script or imported

from peers import run_worker, truth_counts  # noqa: E402  (numpy only: the peers' worker imports it too)

ROOT = Path(__file__).resolve().parents[1]
LONG = ["l_grr", "l_grr (tight)", "l_oue", "l_osue", "l_sue"]
MDIM = ["SPL", "SMP", "RS+FD[GRR]′", "RS+FD[OUE-z]′"]
EST = ["mi", "norm_mul", "norm_sub", "mle", "ibu"]
# ldp's estimator -> (the peer, the worker's name for it, what it calls)
PEER_EST = {
    "mi": ("pure-LDP", "DE 0", "DEServer.estimate_all(normalization=0)"),
    "norm_mul": ("multi-freq-ldpy", "MI", "GRR_Aggregator_MI (clip at 0, renormalise)"),
    "norm_sub": ("pure-LDP", "DE 2", "DEServer.estimate_all(normalization=2: simplex)"),
    "ibu": ("multi-freq-ldpy", "IBU", "GRR_Aggregator_IBU"),
}
MIN_REPS = 10
FIELDS = ["table", "protocol", "estimator", "k", "d", "eps", "eps_1", "periods", "n", "side", "peer_call", "users_per_s", "n_run", "reps", "mse_over_theory", "se", "se_model", "theory", "note"]


def capped_n(per_user: float, n: int, reps: int, budget_s: float, floor: int) -> int:
    """The users one repetition may run so that ``reps`` repetitions fit ``budget_s`` CPU seconds
    (at least ``floor``, at most n, a multiple of 1000 when capped)."""
    if per_user * n * reps <= budget_s:
        return n
    return max(floor, int(budget_s / (per_user * reps)) // 1000 * 1000)


def ratio_se(mse: list[float], theory: float) -> tuple[float, float]:
    """mean(MSE)/theory and its standard error across repetitions."""
    r = np.asarray(mse, dtype=np.float64) / theory
    return float(r.mean()), float(r.std(ddof=1) / math.sqrt(len(r))) if len(r) > 1 else float("nan")


def model_se(variances: np.ndarray, reps: int) -> float:
    """The standard error of mean(MSE)/theory if the estimates' errors were independent Gaussians
    with these variances: one repetition's ratio Σ v_i z_i² / Σ v_i has variance 2Σv²/(Σv)²."""
    v = np.asarray(variances, dtype=np.float64)
    return math.sqrt(2.0 * float(np.sum(v**2)) / float(np.sum(v)) ** 2 / reps)


def within_ci(row: dict[str, Any], z: float = 4.0) -> bool:
    """|MSE ÷ theory − 1| ≤ z standard errors, the larger of the measured one and ``model_se``
    (10–20 repetitions estimate a spread poorly). At z = 4 a correct unbiased estimator fails
    with probability ≈ 1e-4 per cell (normal approximation of a mean of ≥ 10 repetitions; the
    χ² skew makes the upper tail a little heavier)."""
    return abs(row["mse_over_theory"] - 1.0) <= z * max(row["se"], row["se_model"])


# --- ldp's side ---


def long_oracle(protocol: str, k: int, eps: float) -> Any:
    from ldp.core.longitudinal import LongitudinalOracle

    base, _, cal = protocol.partition(" ")
    return LongitudinalOracle(base, k, eps, eps / 2, cal.strip("()") or "paper")


def ldp_longitudinal(protocol: str, k: int, eps: float, n: int, periods: int, reps: int, budget_s: float, estimator: Callable[[np.ndarray, Any], np.ndarray] | None = None) -> dict[str, Any]:
    """ldp's memoized protocol: per repetition a fresh memo key, one PRR per user, ``periods``
    fresh IRRs; the estimate is the mean of the per-period estimates. ``estimator`` replaces
    ``estimate_frequencies`` (tests pass a broken one)."""
    from ldp.core.longitudinal import estimate_frequencies, frequency_variance, instantaneous_response, memo_key, permanent_response
    from ldp.core.rng import RandomSource, derive_key_bytes

    o = long_oracle(protocol, k, eps)
    est_fn = estimator or estimate_frequencies

    def one(values: np.ndarray, rep: int) -> np.ndarray:
        users = np.arange(len(values), dtype=np.int64)
        prr = permanent_response(memo_key(derive_key_bytes("bench-peers-longitudinal", rep)), users, values, o)
        src = RandomSource(rep)
        return np.mean([est_fn(instantaneous_response(prr, src.for_request("irr", t, users), o), o) for t in range(periods)], axis=0)

    pilot = min(n, 2000)
    t0 = time.process_time()
    one(np.repeat(np.arange(k), truth_counts(k, pilot)), 10**6)
    n_run = capped_n((time.process_time() - t0) / pilot, n, reps, budget_s, pilot)
    counts = truth_counts(k, n_run)
    f = counts / n_run
    values = np.random.default_rng(1).permutation(np.repeat(np.arange(k), counts))
    mse, cpu = [], 0.0
    for rep in range(reps):
        t0 = time.process_time()
        est = one(values, rep)
        cpu += time.process_time() - t0
        mse.append(float(np.mean((est - f) ** 2)))
    var = frequency_variance(f, n_run, o, periods)
    theory = float(np.mean(var))
    m, se = ratio_se(mse, theory)
    return dict(users_per_s=n_run * periods * reps / cpu, n_run=n_run, reps=reps, mse_over_theory=m, se=se, se_model=model_se(var, reps), theory=theory)


def ldp_multidimensional(name: str, d: int, k: int, eps: float, records: np.ndarray, reps: int, budget_s: float) -> dict[str, Any]:
    from multidimensional import build  # the sibling benchmark (ldp's protocols as docs/multidimensional.md runs them)

    from ldp.core.multidimensional import SampleOne
    from ldp.core.rng import RandomSource

    P = build(name, d, k, eps)
    n = len(records)
    x = records.astype(np.float64)
    pilot = min(n, 2000)
    t0 = time.process_time()
    P.frequencies(P.sample(x[:pilot], RandomSource(99).for_request("pilot", 0, np.arange(pilot))))
    n_run = capped_n((time.process_time() - t0) / pilot, n, reps, budget_s, pilot)
    x = x[:n_run]
    f = [np.bincount(x[:, j].astype(np.int64), minlength=k) / n_run for j in range(d)]
    truth = np.concatenate(f)
    users = np.arange(n_run)
    mse, ratio, cpu = [], [], 0.0
    for rep in range(reps):
        t0 = time.process_time()
        reports = P.sample(x, RandomSource(rep).for_request("reports", 0, users))
        est = np.concatenate(P.frequencies(reports))
        cpu += time.process_time() - t0
        var = P.frequency_variance(f, [len(c) for c in reports.columns], n_run) if isinstance(P, SampleOne) else P.frequency_variance(f, n_run)
        m = float(np.mean((est - truth) ** 2))
        mse.append(m)
        ratio.append(m / float(np.mean(np.concatenate(var))))
    r = np.asarray(ratio)
    oracle = getattr(P, "oracle", getattr(P, "variant", ""))
    v = np.concatenate(var)
    return dict(users_per_s=n_run * reps / cpu, n_run=n_run, reps=reps, mse_over_theory=float(r.mean()), se=float(r.std(ddof=1) / math.sqrt(reps)), se_model=model_se(v, reps), theory=float(np.mean(v)), oracle=oracle)


def mdim_theory(name: str, d: int, k: int, eps: float, records: np.ndarray) -> float:
    """The mean exact variance of ldp's same protocol on these records (SMP: at n_j = n/d, the
    peer's sampled counts being unknown here; E[1/n_j] differs by O(d/n))."""
    from multidimensional import build

    from ldp.core.multidimensional import SampleOne

    P = build(name, d, k, eps)
    n = len(records)
    f = [np.bincount(records[:, j].astype(np.int64), minlength=k) / n for j in range(d)]
    var = P.frequency_variance(f, [round(n / d)] * d, n) if isinstance(P, SampleOne) else P.frequency_variance(f, n)
    return float(np.mean(np.concatenate(var)))


def ldp_estimators(kind: str, k: int, eps: float, n: int, reps: int) -> dict[str, dict[str, Any]]:
    """Every estimator of EST on the same reports: GRR (``kary_rr``) or L-GRR (paper) at (ε, ε/2).
    users/s per estimator = users ÷ (client CPU + that estimator's CPU)."""
    from peers import ldp_counts, ldp_oracle

    from ldp.core.frequency_estimators import estimate
    from ldp.core.frequency_oracles import frequency_variance as fo_variance
    from ldp.core.frequency_oracles import support_probabilities
    from ldp.core.longitudinal import estimate_frequencies, frequency_variance, instantaneous_response, memo_key, permanent_response
    from ldp.core.rng import RandomSource, derive_key_bytes

    if kind == "GRR":
        R = ldp_oracle("GRR", k, eps)
        p, q = support_probabilities(R)

        def client(values: np.ndarray, rep: int) -> np.ndarray:
            c = ldp_counts(R, values.astype(np.float64), 1, rep)
            return (c / len(values) - float(q)) / (float(p) - float(q))

    else:
        o = long_oracle("l_grr", k, eps)
        p, q = o.support_probabilities()

        def client(values: np.ndarray, rep: int) -> np.ndarray:
            users = np.arange(len(values), dtype=np.int64)
            prr = permanent_response(memo_key(derive_key_bytes("bench-peers-est", rep)), users, values, o)
            return estimate_frequencies(instantaneous_response(prr, RandomSource(rep).for_request("irr", 0, users), o), o)

    n_run = n  # never capped: a biased estimator's MSE ÷ theory depends on n, so both sides run the whole n
    counts = truth_counts(k, n_run)
    f = counts / n_run
    values = np.random.default_rng(1).permutation(np.repeat(np.arange(k), counts))
    var = fo_variance(R, f, n_run) if kind == "GRR" else frequency_variance(f, n_run, o)
    theory = float(np.mean(var))
    mse: dict[str, list[float]] = {e: [] for e in EST}
    cpu = dict.fromkeys(EST, 0.0)
    for rep in range(reps):
        # one untimed call first, so that the timed one finds its caches and heap as a steady
        # client would. (The timed client once measured 56–88 ms at 10^6 users, k = 2^16, against
        # 30 ms alone. The cause was not the heap: IBU's dot products ran threaded in OpenBLAS,
        # whose workers then spun, counted in this process's CPU time; ldp's IBU now sums with
        # numpy, ``ldp.core.frequency_estimators._dot``.)
        client(values, rep)
        t0 = time.process_time()
        f_mi = client(values, rep)
        c = time.process_time() - t0
        for e in EST:
            t0 = time.process_time()
            est = estimate(e, f_mi, p, q)  # L-GRR's composite is k-ary RR: p_s + (k − 1)q_s = 1
            cpu[e] += c + time.process_time() - t0
            mse[e].append(float(np.mean((est - f) ** 2)))
    out = {}
    for e in EST:
        m, se = ratio_se(mse[e], theory)
        out[e] = dict(users_per_s=n_run * reps / cpu[e], n_run=n_run, reps=reps, mse_over_theory=m, se=se, se_model=model_se(var, reps), theory=theory)
    return out


# --- the peers' side (runs in .venv-peers: numpy and the peers only) ---


_NUMBA_SEED: list[Any] = []


def _seed(rep: int) -> None:  # pragma: no cover - runs in .venv-peers
    """Seed numpy's global generator and numba's own (multi-freq-ldpy's UE clients are @jit)."""
    if not _NUMBA_SEED:
        import numba

        @numba.njit
        def seed_numba(s: int) -> None:
            np.random.seed(s)

        _NUMBA_SEED.append(seed_numba)
    np.random.seed(rep)
    _NUMBA_SEED[0](rep)


def _long_peer(protocol: str, k: int, eps: float) -> tuple[Any, Any, bool]:  # pragma: no cover - runs in .venv-peers
    import importlib

    name = {"l_grr": "L_GRR", "l_oue": "L_OUE", "l_osue": "L_OSUE", "l_sue": "L_SUE"}[protocol]
    mod = importlib.import_module(f"multi_freq_ldpy.long_freq_est.{name}")
    client, agg = getattr(mod, f"{name}_Client"), getattr(mod, f"{name}_Aggregator_MI")
    if protocol == "l_grr":
        return (lambda v: client(v, k, eps, eps / 2)), (lambda reps: agg(reps, k, eps, eps / 2)), False
    return (lambda v: client(v, k, eps, eps / 2)), (lambda reps: agg(reps, eps, eps / 2)), True


def _mdim_peer(name: str, oracle: str, d: int, k: int, eps: float) -> tuple[Any, Any]:  # pragma: no cover - runs in .venv-peers
    from multi_freq_ldpy.mdim_freq_est import RSpFD_solution as rs
    from multi_freq_ldpy.mdim_freq_est import SMP_solution as smp
    from multi_freq_ldpy.mdim_freq_est import SPL_solution as spl

    ks = [k] * d
    if name == "RS+FD[GRR]′":
        return (lambda x: rs.RSpFD_GRR_Client(x, ks, d, eps)), (lambda r: rs.RSpFD_GRR_Aggregator_MI(r, ks, d, eps))
    if name == "RS+FD[OUE-z]′":
        return (lambda x: rs.RSpFD_UE_zero_Client(x, ks, d, eps, True)), (lambda r: rs.RSpFD_UE_zero_Aggregator_MI(r, ks, d, eps, True))
    mod, pre = (spl, "SPL") if name == "SPL" else (smp, "SMP")
    if oracle == "grr":
        return (lambda x: getattr(mod, f"{pre}_GRR_Client")(x, ks, d, eps)), (lambda r: getattr(mod, f"{pre}_GRR_Aggregator_MI")(r, ks, d, eps))
    return (lambda x: getattr(mod, f"{pre}_UE_Client")(x, ks, d, eps, True)), (lambda r: getattr(mod, f"{pre}_UE_Aggregator_MI")(r, d, eps, True))


def _est_peer(kind: str, estimator: str, k: int, eps: float) -> tuple[Any, Any]:  # pragma: no cover - runs in .venv-peers
    if estimator.startswith("DE"):
        from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer

        client = DEClient(eps, k, index_mapper=lambda x: x)
        norm = int(estimator.split()[-1])

        def agg(reports: list[Any]) -> np.ndarray:
            server = DEServer(eps, k, index_mapper=lambda x: x)
            for r in reports:
                server.aggregate(r)
            return np.asarray(server.estimate_all(range(k), normalization=norm), dtype=np.float64) / len(reports)

        return client.privatise, agg
    if kind == "L-GRR":
        from multi_freq_ldpy.long_freq_est.L_GRR import L_GRR_Aggregator_IBU, L_GRR_Client

        return (lambda v: L_GRR_Client(v, k, eps, eps / 2)), (lambda r: L_GRR_Aggregator_IBU(r, k, eps, eps / 2))
    from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_IBU, GRR_Aggregator_MI, GRR_Client

    aggregate = GRR_Aggregator_IBU if estimator == "IBU" else GRR_Aggregator_MI
    return (lambda v: GRR_Client(v, k, eps)), (lambda r: aggregate(r, k, eps))


def peer_cell(job: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover - runs in .venv-peers
    """``peer_worker``, or ``{"error": …}`` when the peer's own code raises (multi-freq-ldpy's
    RS+FD[OUE-z] aggregator divides by the sum of its estimates, which is 0 at k = 2 on a few
    users): the cell is reported as the peer's failure, and the other cells still run."""
    try:
        return peer_worker(job)
    except Exception as exc:  # noqa: BLE001 - any failure of the peer's code is that cell's result
        return {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}


def peer_worker(job: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover - runs in .venv-peers
    """One peer cell: warm up, a pilot to size n, then ``reps`` seeded repetitions; MSE against the
    exact frequencies of the data run. Longitudinal cells also return the support counts of the
    peer's own reports (for the unbiased "raw MI")."""
    import warnings

    warnings.filterwarnings("ignore")
    table, k, eps, n, reps, budget = job["table"], job["k"], job["eps"], job["n"], job["reps"], job["budget_s"]
    counts_out: list[list[float]] = []
    if table == "mdim":
        records = np.load(job["data"])
        d = records.shape[1]
        client, agg = _mdim_peer(job["protocol"], job["oracle"], d, k, eps)
        rows = [tuple(int(v) for v in r) for r in records.tolist()]

        def run(m: int) -> np.ndarray:
            return np.concatenate([np.asarray(a, dtype=np.float64) for a in agg([client(x) for x in rows[:m]])])

        def truth(m: int) -> np.ndarray:
            return np.concatenate([np.bincount(records[:m, j], minlength=k) / m for j in range(d)])

        unary = False
    else:
        if table == "long":
            client, agg, unary = _long_peer(job["protocol"], k, eps)
        else:
            client, agg = _est_peer(job["kind"], job["estimator"], k, eps)
            unary = False
        data_all: dict[int, list[int]] = {}

        def values(m: int) -> list[int]:
            if m not in data_all:
                data_all[m] = np.random.default_rng(1).permutation(np.repeat(np.arange(k), truth_counts(k, m))).tolist()
            return data_all[m]

        last: list[Any] = []

        def run(m: int) -> np.ndarray:
            reports = [client(v) for v in values(m)]
            last[:] = [reports]
            return np.asarray(agg(reports), dtype=np.float64)

        def truth(m: int) -> np.ndarray:
            return truth_counts(k, m) / m

    run(min(n, 50))  # warm up (numba compiles the UE clients)
    if job.get("uncapped"):  # a server whose cost does not shrink with n: the whole n, no pilot
        n_run = n
    else:
        pilot = max(20, min(n, 200_000 // k, 2000))
        t0 = time.process_time()
        run(pilot)
        n_run = capped_n((time.process_time() - t0) / pilot, n, reps, budget, pilot)
    f = truth(n_run)
    mse, cpu = [], 0.0
    for rep in range(reps):
        _seed(rep)
        t0 = time.process_time()
        est = run(n_run)
        cpu += time.process_time() - t0
        mse.append(float(np.mean((est - f) ** 2)))
        if table == "long":
            r = last[0]
            counts_out.append((np.sum(np.asarray(r), axis=0) if unary else np.bincount(np.asarray(r, dtype=np.int64), minlength=k)).astype(float).tolist())
    return dict(users_per_s=n_run * len(mse) / cpu, n_run=n_run, reps=len(mse), mse=mse, counts=counts_out)


# --- the run ---


def grids(full: bool, quick: bool = False) -> dict[str, Any]:
    """The default (reduced) grid, issue 26's whole grid (``--full``) or the tests' (``--quick``)."""
    if quick:
        return dict(ks=[16], epsilons=[4.0], ns=[20_000], periods=[1, 10], ds=[2], mdim_ks=[16], est_ks=[16])
    if full:
        return dict(ks=[2, 16, 1024, 1 << 16], epsilons=[1.0, 4.0], ns=[10**5, 10**6], periods=[1, 10], ds=[2, 5], mdim_ks=[2, 16, 1024], est_ks=[16, 1024, 1 << 16])
    return dict(ks=[2, 16, 1024], epsilons=[1.0, 4.0], ns=[10**5], periods=[1, 10], ds=[2, 5], mdim_ks=[16], est_ks=[16, 1024])


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--full", action="store_true", help="issue 26's whole grid (k up to 2^16, n up to 10^6; long)")
    parser.add_argument("--quick", action="store_true", help="the smallest grid (k = 16, ε = 4, n = 20000, d = 2: the tests')")
    parser.add_argument("--ks", type=int, nargs="*", help="longitudinal k values (default: 2 16 1024)")
    parser.add_argument("--epsilons", type=float, nargs="*", help="ε (ε∞ for longitudinal; ε1 = ε∞/2) (default: 1 4)")
    parser.add_argument("--ns", type=int, nargs="*", help="users (default: 100000)")
    parser.add_argument("--periods", type=int, nargs="*", help="T for ldp's longitudinal cells (default: 1 10)")
    parser.add_argument("--ds", type=int, nargs="*", help="attributes for the multidimensional table (default: 2 5)")
    parser.add_argument("--mdim-ks", type=int, nargs="*", help="k per attribute (default: 16)")
    parser.add_argument("--est-ks", type=int, nargs="*", help="k for the estimators table (default: 16 1024)")
    parser.add_argument("--tables", nargs="*", default=["long", "mdim", "est"], choices=["long", "mdim", "est"])
    parser.add_argument("--reps", type=int, default=MIN_REPS, help=f"seeded repetitions per cell (≥ {MIN_REPS} unless told)")
    parser.add_argument("--budget", type=float, default=1.0, help="CPU seconds per ldp cell (caps n run)")
    parser.add_argument("--peer-budget", type=float, default=1.5, help="CPU seconds per peer cell (caps n run)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "peers_longitudinal")
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args(argv)
    if args.worker:  # pragma: no cover - runs in .venv-peers
        import json

        print(json.dumps([peer_cell(j) for j in json.loads(sys.stdin.read())]))
        return []
    g = grids(args.full, args.quick)
    for key in g:
        if getattr(args, key) is not None:
            g[key] = getattr(args, key)
    if args.reps < 2:
        raise SystemExit(f"--reps must be at least 2 (a standard error needs two repetitions), got {args.reps}")
    t_start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    jobs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        mdim_data: dict[tuple[int, int, int], Path] = {}
        if "mdim" in args.tables:
            from multidimensional import population

            for d in g["ds"]:
                for k in g["mdim_ks"]:
                    for n in g["ns"]:
                        x, _ = population(d, k, n, seed=7)
                        path = Path(tmp) / f"records_{d}_{k}_{n}.npy"
                        np.save(path, x.astype(np.int64))
                        mdim_data[(d, k, n)] = path
        for e in g["epsilons"]:
            for n in g["ns"]:
                if "long" in args.tables:
                    for k in g["ks"]:
                        for p in LONG:
                            if "tight" not in p and reachable(p, k, e):
                                jobs.append(dict(table="long", protocol=p, k=k, eps=e, n=n, reps=args.reps, budget_s=args.peer_budget))
                if "mdim" in args.tables:
                    from multidimensional import build

                    for d in g["ds"]:
                        for k in g["mdim_ks"]:
                            for name in MDIM:
                                P = build(name, d, k, e)
                                jobs.append(dict(table="mdim", protocol=name, oracle=str(getattr(P, "oracle", getattr(P, "variant", ""))), k=k, d=d, eps=e, n=n, reps=args.reps, budget_s=args.peer_budget, data=str(mdim_data[(d, k, n)])))
                if "est" in args.tables:
                    for k in g["est_ks"]:
                        # multi-freq-ldpy's IBU is a dense k × k product per iteration (numba), up to
                        # 10^4 iterations: 30–50 s per estimate at k = 1024, a k² matrix at 2^16
                        # (uncapped: a biased estimator's MSE ÷ theory depends on n, so the peers run ldp's n)
                        dense_ibu = dict(uncapped=True, reps=2) if args.full and k <= 1024 else None
                        for est, (lib, worker_name, call) in PEER_EST.items():
                            if est == "ibu" and k > 16 and dense_ibu is None:
                                continue
                            jobs.append(dict(dict(table="est", kind="GRR", lib=lib, estimator=worker_name, ldp_estimator=est, call=call, k=k, eps=e, n=n, reps=args.reps, budget_s=args.peer_budget, uncapped=True), **(dense_ibu if est == "ibu" and k > 16 and dense_ibu else {})))
                        if k <= 16 or dense_ibu is not None:
                            jobs.append(dict(dict(table="est", kind="L-GRR", lib="multi-freq-ldpy", estimator="IBU", ldp_estimator="ibu", call="L_GRR_Aggregator_IBU", k=k, eps=e, n=n, reps=args.reps, budget_s=args.peer_budget, uncapped=True), **(dense_ibu if k > 16 and dense_ibu else {})))
        results = run_worker(Path(__file__), jobs) if jobs else []
        rows += peer_rows(jobs, results)
        rows += ldp_rows(args, g, mdim_data)
    write_csv(rows, args.out / "peers_longitudinal.csv")
    write_markdown(rows, args.out / "peers_longitudinal.md")
    print_table(rows, time.perf_counter() - t_start)
    if not args.no_plot:
        plot(rows, args.out / "peers_longitudinal.png")
    return rows


def reachable(protocol: str, k: int, eps: float) -> bool:
    from ldp.core.errors import ParameterError

    try:
        long_oracle(protocol, k, eps)
    except ParameterError:
        return False
    return True


def peer_rows(jobs: list[dict[str, Any]], results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from ldp.core.longitudinal import frequency_variance

    out = []
    for j, r in zip(jobs, results):
        if "error" in r:  # the peer's code failed on this cell: shown as such, no rate
            protocol = j.get("protocol") or j.get("kind")
            estimator = j.get("ldp_estimator") or ("mi (clipped+renormalised)" if j["table"] == "long" else f"mi/{j.get('oracle')} (clipped+renormalised)")
            out.append(dict(table=j["table"], protocol=protocol, estimator=estimator, k=j["k"], d=j.get("d", 1), eps=j["eps"], eps_1="", periods=1, n=j["n"], side=j.get("lib", "multi-freq-ldpy"), peer_call=j.get("call", protocol), note=f"the peer failed: {r['error']}"))
            continue
        k, e, n_run = j["k"], j["eps"], r["n_run"]
        base = dict(k=k, d=j.get("d", 1), eps=e, eps_1=e / 2 if j["table"] == "long" or j.get("kind") == "L-GRR" else "", periods=1, n=j["n"], n_run=n_run, reps=r["reps"], users_per_s=r["users_per_s"])
        if j["table"] == "long":
            o = long_oracle(j["protocol"], k, e)
            f = truth_counts(k, n_run) / n_run
            theory = float(np.mean(frequency_variance(f, n_run, o)))
            m, se = ratio_se(r["mse"], theory)
            out.append(dict(base, table="long", protocol=j["protocol"], estimator="mi (clipped+renormalised)", side="multi-freq-ldpy", peer_call=f"L_{j['protocol'][2:].upper()}_Client + _Aggregator_MI", mse_over_theory=m, se=se, theory=theory, note="biased: clip at 0 + renormalise"))
            p_s, q_s = (float(x) for x in o.support_probabilities())
            raw = [float(np.mean(((np.asarray(c) / n_run - q_s) / (p_s - q_s) - f) ** 2)) for c in r["counts"]]
            m, se = ratio_se(raw, theory)
            out.append(dict(base, table="long", protocol=j["protocol"], estimator="mi (raw, on the peer's reports)", side="multi-freq-ldpy", peer_call="L_*_Client; ldp's (C/n − q_s)/(p_s − q_s)", mse_over_theory=m, se=se, theory=theory, note="unbiased MI on the peer's reports"))
        elif j["table"] == "mdim":
            records = np.load(j["data"])[:n_run]
            theory = mdim_theory(j["protocol"], j["d"], k, e, records)
            m, se = ratio_se(r["mse"], theory)
            out.append(dict(base, table="mdim", protocol=j["protocol"], estimator=f"mi/{j['oracle']} (clipped+renormalised)", side="multi-freq-ldpy", peer_call=j["protocol"], mse_over_theory=m, se=se, theory=theory, note="biased: clip at 0 + renormalise per attribute"))
        else:
            f = truth_counts(k, n_run) / n_run
            if j["kind"] == "GRR":
                ee = math.exp(e)
                p, q = ee / (ee + k - 1), 1 / (ee + k - 1)
                theory = float(np.mean((f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n_run * (p - q) ** 2)))
            else:
                theory = float(np.mean(frequency_variance(f, n_run, long_oracle("l_grr", k, e))))
            m, se = ratio_se(r["mse"], theory)
            out.append(dict(base, table="est", protocol=j["kind"], estimator=j["ldp_estimator"], side=j["lib"], peer_call=j["call"], mse_over_theory=m, se=se, theory=theory, note="" if j["ldp_estimator"] == "mi" else "biased estimator: ÷ MI theory"))
    return out


def ldp_rows(args: argparse.Namespace, g: dict[str, Any], mdim_data: dict[tuple[int, int, int], Path]) -> list[dict[str, Any]]:
    out = []
    for e in g["epsilons"]:
        for n in g["ns"]:
            if "long" in args.tables:
                for k in g["ks"]:
                    for p in LONG:
                        if not reachable(p, k, e):
                            out.append(dict(table="long", protocol=p, estimator="mi", k=k, d=1, eps=e, eps_1=e / 2, periods=1, n=n, side="ldp", note="unreachable: no q2 ≥ 0 at ε1 = ε∞/2"))
                            continue
                        for T in g["periods"]:
                            if T > 1 and k > 16 and not args.full:
                                continue  # T periods cost T reports each: small k only on the reduced grid
                            r = ldp_longitudinal(p, k, e, n, T, args.reps, args.budget * min(T, 2))
                            out.append(dict(table="long", protocol=p, estimator="mi", k=k, d=1, eps=e, eps_1=e / 2, periods=T, n=n, side="ldp", peer_call="", note="users/s = user-reports/s" if T > 1 else "", **r))
            if "mdim" in args.tables:
                for d in g["ds"]:
                    for k in g["mdim_ks"]:
                        records = np.load(mdim_data[(d, k, n)])
                        for name in MDIM:
                            r = ldp_multidimensional(name, d, k, e, records, args.reps, args.budget)
                            oracle = r.pop("oracle")
                            out.append(dict(table="mdim", protocol=name, estimator=f"mi/{oracle}", k=k, d=d, eps=e, eps_1="", periods=1, n=n, side="ldp", peer_call="", note="", **r))
            if "est" in args.tables:
                for k in g["est_ks"]:
                    for kind in ("GRR", "L-GRR"):
                        res = ldp_estimators(kind, k, e, n, args.reps)
                        for est, r in res.items():
                            if kind == "L-GRR" and est != "ibu":
                                continue
                            out.append(dict(table="est", protocol=kind, estimator=est, k=k, d=1, eps=e, eps_1=e / 2 if kind == "L-GRR" else "", periods=1, n=n, side="ldp", peer_call="", note="" if est == "mi" else "biased estimator: ÷ MI theory", **r))
    return out


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({f: r.get(f, "") for f in FIELDS})


def write_markdown(rows: list[dict[str, Any]], path: Path) -> None:
    """The paired table as markdown (docs/benchmarks.md): one line per (ldp cell, peer)."""
    header = ["table", "protocol", "estimator", "k", "d", "ε", "T", "ldp users/s", "ldp MSE÷theory", "ldp n run", "peer", "peer users/s", "peer MSE÷theory", "peer n run", "ldp ÷ faster peer"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for x in paired(rows):
        r = x["ldp"]
        for i, p in enumerate(x["peers"] or [None]):
            rate, mse = _cell(r) if i == 0 else ("", "")
            prate, pmse = _cell(p)
            cells = [r["table"], r["protocol"], r["estimator"], str(r["k"]), str(r["d"]), f"{r['eps']:g}", str(r["periods"]), rate, mse, f"{r.get('n_run', 0):,}" if i == 0 else ""]
            cells += [f"{p['side']}: {p['estimator']}" if p else "—", prate, pmse if p is None or "users_per_s" in p else p["note"], f"{p['n_run']:,}" if p and "n_run" in p else "—"]
            cells.append((f"**{x['ratio']:.1f}×**" if x["ratio"] == x["ratio"] else "—") if i == 0 else "")
            lines.append("| " + " | ".join(cells) + " |")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _rate(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.1f}k" if x >= 1e3 else f"{x:.0f}"


def _cell(r: dict[str, Any] | None) -> tuple[str, str]:
    if r is None or "users_per_s" not in r:
        return "—", "—"
    return _rate(r["users_per_s"]), f"{r['mse_over_theory']:.3f} ± {r['se']:.3f}"


def paired(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per ldp cell with its peers beside it: ldp ÷ faster peer's users/s."""
    lines = []
    for r in (x for x in rows if x["side"] == "ldp"):
        key = (r["table"], r["protocol"], r["k"], r["d"], r["eps"], r["n"])
        peers = [x for x in rows if x["side"] != "ldp" and (x["table"], x["protocol"], x["k"], x["d"], x["eps"], x["n"]) == key and r.get("periods", 1) == 1]
        if r["table"] == "est":
            peers = [x for x in peers if x["estimator"] == r["estimator"]]
        elif r["table"] == "long":
            peers = [x for x in peers if x["protocol"] == r["protocol"]]
        faster = max((x["users_per_s"] for x in peers if "users_per_s" in x), default=float("nan"))
        ratio = r["users_per_s"] / faster if "users_per_s" in r and faster == faster else float("nan")
        lines.append(dict(ldp=r, peers=peers, ratio=ratio))
    return lines


def print_table(rows: list[dict[str, Any]], seconds: float) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    titles = {"long": "Longitudinal (ε1 = ε∞/2; multi-freq-ldpy has no memo, so no T > 1 cell)", "mdim": "Multidimensional (RS+FD: the paper's ε′, as multi-freq-ldpy)", "est": "Estimators on GRR / L-GRR reports (biased ones ÷ MI theory)"}
    console = Console(width=250)
    for table in ("long", "mdim", "est"):
        lines = [x for x in paired(rows) if x["ldp"]["table"] == table]
        if not lines:
            continue
        t = Table(title=f"{titles[table]}: ldp vs multi-freq-ldpy 0.2.5 / pure-LDP 1.2.0 ({os.cpu_count()} cores, whole run {seconds:.0f} s)")
        for h in ["protocol", "estimator", "k", "d", "ε", "T", "ldp users/s", "ldp MSE÷theory", "ldp n run", "peer", "peer users/s", "peer MSE÷theory", "peer n run", "ldp ÷ faster peer"]:
            t.add_column(h, justify="right")
        for x in lines:
            r = x["ldp"]
            rate, mse = _cell(r)
            ps = x["peers"] or [None]
            for i, p in enumerate(ps):
                prate, pmse = _cell(p)
                cells = [r["protocol"], r["estimator"], str(r["k"]), str(r["d"]), f"{r['eps']:g}", str(r["periods"]), rate, mse, f"{r.get('n_run', 0):,}"] if i == 0 else [""] * 9
                cells += [p["side"] + ": " + p["estimator"] if p else "—", prate, pmse if p is None or "users_per_s" in p else p["note"], f"{p['n_run']:,}" if p and "n_run" in p else "—"]
                cells.append((f"{x['ratio']:.1f}×" if x["ratio"] == x["ratio"] else "—") if i == 0 else "")
                t.add_row(*map(escape, cells))
        console.print(t)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [x for x in paired(rows) if x["ratio"] == x["ratio"]]
    fig, axes = plt.subplots(1, 2, figsize=(14, 0.22 * len(lines) + 2))
    labels = [f"{x['ldp']['table']} {x['ldp']['protocol']} {x['ldp']['estimator'].split(' ')[0]} k={x['ldp']['k']} d={x['ldp']['d']} ε={x['ldp']['eps']:g}" for x in lines]
    y = np.arange(len(lines))
    axes[0].barh(y, [x["ratio"] for x in lines], color=["tab:green" if x["ratio"] >= 10 else "tab:orange" for x in lines])
    axes[0].axvline(10, color="k", linestyle="--", linewidth=0.8)
    axes[0].set_xscale("log")
    axes[0].set_yticks(y, labels, fontsize=6)
    axes[0].invert_yaxis()
    axes[0].set_xlabel("ldp users/s ÷ faster peer's (dashed: the 10× target)")
    for off, side, key in ((-0.2, "ldp", "ldp"), (0.2, "peer", "peers")):
        vals, errs = [], []
        for x in lines:
            r = x[key] if key == "ldp" else (x[key][0] if x[key] else None)
            vals.append(r.get("mse_over_theory", np.nan) if r else np.nan)
            errs.append(r.get("se", 0.0) if r else 0.0)
        axes[1].errorbar(vals, y + off, xerr=errs, fmt="o", markersize=3, label=side)
    axes[1].axvline(1, color="k", linestyle="--", linewidth=0.8)
    axes[1].set_xscale("log")
    axes[1].set_yticks(y, [""] * len(y))
    axes[1].invert_yaxis()
    axes[1].set_xlabel("MSE ÷ theory (± 1 s.e.; biased estimators ÷ MI theory)")
    axes[1].legend(fontsize=7)
    fig.suptitle("Issue 26 against the peers: multi-freq-ldpy 0.2.5 / pure-LDP 1.2.0")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
