"""Apple's sketches over an open string domain (``cms_string``, ``hcms_string``): MSE ÷ theory and
users/s of the string path against the integer path (docs/sketches.md, "Open string domains").

Population: n users over 5,000 distinct URL-like strings with Zipf(1.1) shares (seeded); the
server estimates the 200 most frequent strings and 50 absent ones. Each trial draws a fresh
public hash family (``hash_seed`` = trial) and fresh report keys, so the squared errors are
compared with the exact variance over the family (``candidate_count_variance``). MSE ÷ theory is
the mean over trials of each trial's mean of (N̂ − N)²/Var, ± Student's t 95 % half-width across trials.

users/s: CPU time (``time.process_time``) of the users' side for n users, interleaved, the median
(and min) of ``--reps`` repetitions: the string path fingerprints every string (BLAKE2b, each
distinct string once), builds the records and samples; the integer path samples the same
population as category indices (``cms``/``hcms`` over k = 5,000 categories). µs/candidate: the
server's estimate of the 250 candidates (the string path fingerprints them too).

    python benchmarks/string_sketches.py [--n 100000] [--trials 8] [--reps 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from ldp.core.rng import RandomSource
from ldp.core.sketches import CountMeanSketch, HadamardCountMeanSketch, StringCountMeanSketch, StringHadamardCountMeanSketch
from ldp.core.string_hashing import fingerprints, key_records

DISTINCT = 5000


def population(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(strings, category index per user, the distinct strings by rank)."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, DISTINCT + 1, dtype=np.float64)
    p = ranks**-1.1
    idx = rng.choice(DISTINCT, size=n, p=p / p.sum())
    names = [f"https://site{i}.example/page?id={i * 7919 % 10007}" for i in range(DISTINCT)]
    return np.array(names, dtype=object)[idx], idx, names


def mse_over_theory(cls: type, eps: float, n: int, trials: int, K: int, m: int) -> tuple[float, float]:
    strings, idx, names = population(n)
    counts = np.bincount(idx, minlength=DISTINCT).astype(np.float64)
    top = np.argsort(-counts, kind="stable")[:200]
    cands = [names[i] for i in top] + [f"absent-{j}" for j in range(50)]
    truth = np.append(counts[top], np.zeros(50))
    pairs = float((counts * (counts - 1)).sum())
    inputs = key_records(fingerprints(strings)).astype(np.float64)
    users = np.arange(n)
    per_trial = []
    for t in range(trials):
        R = cls(eps, hashes=K, width=m, hash_seed=t)
        reports = R.sample(inputs, RandomSource(1000 + t).for_request("bench", t, users))
        est = R.estimate_counts(reports, cands)
        per_trial.append(float(np.mean((est - truth) ** 2 / R.candidate_count_variance(truth, float(n), pairs))))
    mean = float(np.mean(per_trial))
    from scipy import stats  # Student's t: 8 trials are few for 1.96

    half = float(stats.t.ppf(0.975, trials - 1)) * float(np.std(per_trial, ddof=1)) / np.sqrt(trials) if trials > 1 else float("nan")
    return mean, half


def users_per_second(eps: float, n: int, reps: int, K: int, m: int) -> dict[str, tuple[float, float]]:
    strings, idx, names = population(n)
    cands = names[:200] + [f"absent-{j}" for j in range(50)]
    users = np.arange(n)
    cats = tuple(float(i) for i in range(DISTINCT))
    sketches = {
        "CMS string": StringCountMeanSketch(eps, hashes=K, width=m),
        "CMS integer": CountMeanSketch(eps, cats, hashes=K, width=m),
        "HCMS string": StringHadamardCountMeanSketch(eps, hashes=K, width=m),
        "HCMS integer": HadamardCountMeanSketch(eps, cats, hashes=K, width=m),
    }
    for R in sketches.values():
        R.tables  # noqa: B018 - build the public tables outside the timings
    client: dict[str, list[float]] = {k: [] for k in sketches}
    server: dict[str, list[float]] = {k: [] for k in sketches}
    for r in range(reps):  # interleaved: every path once per repetition
        for name, R in sketches.items():
            source = RandomSource(r).for_request("speed", r, users)
            t0 = time.process_time()
            if "string" in name:
                reports = R.sample(R.check_inputs(key_records(fingerprints(strings))), source)
            else:
                reports = R.sample(idx.astype(np.float64), source)
            t1 = time.process_time()
            R.estimate_counts(reports, cands if "string" in name else np.arange(250, dtype=np.float64))
            t2 = time.process_time()
            client[name].append(t1 - t0)
            server[name].append(t2 - t1)
    out = {}
    for name in sketches:
        out[name] = (n / statistics.median(client[name]), n / min(client[name]))
        out[name + " µs/cand"] = (1e6 * statistics.median(server[name]) / 250, 1e6 * min(server[name]) / 250)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--hashes", type=int, default=4096)
    p.add_argument("--width", type=int, default=1024)
    a = p.parse_args()
    print(f"n = {a.n}, K = {a.hashes}, m = {a.width}, {a.trials} trials (fresh hash_seed each), 250 candidates (200 present, 50 absent)")
    print("| sketch | ε | MSE ÷ theory (± 95 %) |")
    print("|---|---|---|")
    for cls, name in ((StringCountMeanSketch, "CMS"), (StringHadamardCountMeanSketch, "HCMS")):
        for eps in (1.0, 4.0):
            mean, half = mse_over_theory(cls, eps, a.n, a.trials, a.hashes, a.width)
            print(f"| {name} string | {eps:g} | {mean:.3f} ± {half:.3f} |", flush=True)
    speeds = users_per_second(4.0, a.n, a.reps, a.hashes, a.width)
    print(f"\nε = 4, CPU time, median (best) of {a.reps} interleaved repetitions")
    print("| path | users/s | server µs/candidate |")
    print("|---|---|---|")
    for name in ("CMS string", "CMS integer", "HCMS string", "HCMS integer"):
        (u, ub), (c, cb) = speeds[name], speeds[name + " µs/cand"]
        print(f"| {name} | {u / 1e3:.1f}k ({ub / 1e3:.1f}k) | {c:.0f} ({cb:.0f}) |")
    for kind in ("CMS", "HCMS"):
        print(f"{kind}: string ÷ integer users/s = {speeds[kind + ' string'][0] / speeds[kind + ' integer'][0]:.2f}")


if __name__ == "__main__":
    main()
