"""Throughput of each randomizer with per-user counter-based randomness, next to plain numpy.

For n users: reports/s of ``LocalRandomizer.apply`` (query evaluation + per-user draws + sampling)
against the same sampling done with one shared ``numpy.random.Generator`` (no per-user streams,
hence not shard-invariant). The ratio is the price of reproducibility across process layouts.
Prints a rich table; `make bench` runs it. Numbers go in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from rich.console import Console
from rich.table import Table

from ldp.core.concepts import ConjunctionConcept, ProductBernoulli, concept_class
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.query_specs import field_query, record_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import RandomSource


def best_of(fn: Callable[[], object], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    n = args.users
    cc = concept_class("conjunction", 8)
    spec = PopulationSpec(cc, ConjunctionConcept(((0, 1),)), n, distribution=ProductBernoulli(0.5))
    records = generate_records(spec, 0, n)
    users = np.arange(n, dtype=np.int64)
    randomness = RandomSource(1).for_request("reports", 1, users)
    gen = np.random.default_rng(1)
    bits = records[:, 0].astype(np.float64)
    p_keep = 1 / (1 + np.exp(-1.0))
    plain: dict[str, Callable[[], object]] = {
        "binary_rr": lambda: np.where(gen.random(n) < p_keep, bits, 1 - bits),
        "kary_rr": lambda: np.where(gen.random(n) < p_keep, bits, (gen.random(n) * 1).astype(np.int64)),
        "laplace": lambda: bits + gen.laplace(0.0, 2.0, n),
        "discrete_laplace": lambda: bits + (gen.geometric(1 - np.exp(-1 / 64), n) - gen.geometric(1 - np.exp(-1 / 64), n)) / 32,
        "pm_rr": lambda: np.where(gen.random(n) < 0.5 + bits / 4, 2.16, -2.16),
        "record_rr": lambda: np.where(gen.random((n, records.shape[1])) < 0.6, records, 1 - records),
    }
    table = Table(title=f"Randomizer throughput, n = {n:,} users (best of 3)")
    for col in ("randomizer", "per-user streams (reports/s)", "plain numpy (reports/s)", "ratio", "exact log_prob (evals/s)"):
        table.add_column(col, justify="right")
    for kind in ("binary_rr", "kary_rr", "laplace", "discrete_laplace", "pm_rr", "record_rr"):
        query = record_query() if kind == "record_rr" else field_query("x", 0)
        # float laplace is not requestable by users (not auditable); benchmarked in process only
        R = LocalRandomizer.build(RandomizerSpec(kind, query, 1.0), spec.schema, allow_unaudited=kind == "laplace")
        ours = best_of(lambda R=R: R.apply(records, randomness))
        theirs = best_of(plain[kind])
        # Transparency (KLNRS Def. 4.7): Pr[R(u) = w] for every (input, report) pair, vectorized.
        inputs, reports = R.inputs(records), R.apply(records, randomness)
        exact = best_of(lambda R=R, inputs=inputs, reports=reports: R.randomizer.log_prob(inputs, reports))
        table.add_row(kind, f"{n / ours:,.0f}", f"{n / theirs:,.0f}", f"{theirs / ours:.2f}", f"{n / exact:,.0f}")
    draws = best_of(lambda: randomness.uniform(0))
    table.add_row("(one uniform per user)", f"{n / draws:,.0f}", f"{n / best_of(lambda: gen.random(n)):,.0f}", "", "")
    Console().print(table)


if __name__ == "__main__":
    main()
