"""Ledger store benchmark: rounds/s of charge + commit, in memory vs durable SQLite.

What: one "round" is what a shard does per assignment: ``ledger.charge(users, ε)`` of one ε to
n = 10^6 users (a contiguous range, everyone can pay), then ``store.commit()`` (for SQLite: the
round's log row written and fsync'd, WAL, synchronous=FULL). Prints rounds/s for
``MemoryLedgerStore`` and ``SqliteLedgerStore`` (in a temporary folder) and their ratio, from one
run (alternating blocks of rounds, so drift on a shared machine affects both alike); then the
time to reopen the identity after 100 rounds, (a) after ``close()`` (a snapshot is read) and
(b) after a crash (the store was never closed: the 100 log rows are replayed), and the file's
size. Also rounds of partly refused users (each a packed-bitmap row), for contrast. Then whole
rounds as a user sees them — a binary RR round to every user (plan, charge, sample, commit) —
in process and over gRPC with one client process, each with the in-memory and the durable
ledger, and their ratios.

Usage: ``python benchmarks/ledger.py [--users N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

import numpy as np

from ldp.core.population import PopulationSpec
from ldp.local.ledger_store import LedgerStore, MemoryLedgerStore, SqliteLedgerStore

IDENTITY = "benchmark-identity"
BUDGET = 1024.0
EPSILON = 2.0**-12  # 2^22 rounds before anyone is refused


def timed_rounds(store: LedgerStore, users: np.ndarray, rounds: int) -> float:
    """Seconds for ``rounds`` rounds of charge + commit on the store's ledger."""
    ledger = store.open(IDENTITY, 0, len(users), BUDGET)  # the same ledger object while open
    t = time.perf_counter()
    for _ in range(rounds):
        charge = ledger.charge(users, EPSILON)
        store.commit()
    elapsed = time.perf_counter() - t
    assert charge.accepted.all()
    return elapsed


def compare(stores: dict[str, LedgerStore], users: np.ndarray, rounds: int, blocks: int = 5) -> dict[str, float]:
    """Rounds/s of each store, measured in alternating blocks so drift on a shared machine
    affects both alike (after one warm-up round each)."""
    for store in stores.values():
        timed_rounds(store, users, 1)
    total = dict.fromkeys(stores, 0.0)
    for b in range(blocks):
        share = rounds // blocks + (1 if b < rounds % blocks else 0)
        for name, store in stores.items():
            total[name] += timed_rounds(store, users, share)
    return {name: rounds / seconds for name, seconds in total.items()}


def reopen_seconds(path: str, users: np.ndarray, rounds: int, *, close: bool) -> tuple[float, int]:
    store = SqliteLedgerStore(path)
    ledger = store.open(IDENTITY, 0, len(users), BUDGET)
    for _ in range(rounds):
        ledger.charge(users, EPSILON)
        store.commit()
    if close:
        store.close()
    else:  # a crash: nothing is closed or compacted (the connection is dropped)
        store._db.close()
    t = time.perf_counter()
    again = SqliteLedgerStore(path)
    reopened = again.open(IDENTITY, 0, len(users), BUDGET)
    elapsed = time.perf_counter() - t
    assert int(reopened.nonces()[0]) == rounds and int(reopened.nonces()[-1]) == rounds
    size = sum(os.path.getsize(path + suffix) for suffix in ("", "-wal") if os.path.exists(path + suffix))
    again.close()
    return elapsed, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=10**6)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    n, rounds = args.users, args.rounds
    users = np.arange(n, dtype=np.int64)
    print(f"ledger stores: charge + commit of one ε to {n:,} users (contiguous), {rounds} rounds; {platform.processor() or platform.machine()}, numpy {np.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        durable_store = SqliteLedgerStore(os.path.join(tmp, "ledgers.sqlite"))
        rates = compare({"memory": MemoryLedgerStore(), "sqlite": durable_store}, users, rounds)
        durable_store.close()
        memory, durable = rates["memory"], rates["sqlite"]
        print(f"  memory : {memory:8.1f} rounds/s  ({memory * n / 1e6:,.0f} M user-charges/s)")
        print(f"  sqlite : {durable:8.1f} rounds/s  ({durable * n / 1e6:,.0f} M user-charges/s)  (WAL, synchronous=FULL: one fsync'd row per round)")
        print(f"  sqlite / memory = {durable / memory:.2f}")

        # Partly refused rounds: half the users are out of budget, so every row carries a bitmap.
        store = SqliteLedgerStore(os.path.join(tmp, "partial.sqlite"))
        ledger = store.open(IDENTITY, 0, n, 1.0)
        ledger.charge(users[: n // 2], 1.0)  # these users are spent
        store.commit()
        t = time.perf_counter()
        k = max(1, rounds // 4)
        for _ in range(k):
            ledger.charge(users, 2.0**-20)
            store.commit()
        partial = k / (time.perf_counter() - t)
        store.close()
        print(f"  sqlite, half refused (bitmap rows): {partial:8.1f} rounds/s")

        for close in (True, False):
            path = os.path.join(tmp, f"reopen-{close}.sqlite")
            seconds, size = reopen_seconds(path, users, 100, close=close)
            how = "after close (snapshot)" if close else "after a crash (log replay)"
            print(f"  reopen after 100 rounds, {how}: {seconds * 1e3:7.1f} ms  (file {size / 2**10:,.0f} KiB)")


def _population(n: int) -> PopulationSpec:
    from ldp.core.concepts import concept_class
    from ldp.core.rng import generator

    cc = concept_class("parity", 8)
    return PopulationSpec(cc, cc.random_target(generator(0, "bench-target")), size=n, budget=BUDGET, seed=0)


async def _session_rounds(oracle: object, n: int, rounds: int) -> float:
    from ldp.core.query_specs import field_query
    from ldp.core.randomizers import RandomizerSpec
    from ldp.local.messages import SessionKind
    from ldp.local.session import Request, Session

    session = Session(oracle, SessionKind.INTERACTIVE)  # type: ignore[arg-type]
    spec = RandomizerSpec("binary_rr", field_query("x", 0), EPSILON)
    await session.round([Request.of(range(n), spec)])  # warm up
    t = time.perf_counter()
    for _ in range(rounds):
        (reports,) = await session.round([Request.of(range(n), spec)])
    elapsed = time.perf_counter() - t
    assert reports.counts()["answered"] == n
    return rounds / elapsed


async def whole_rounds(n: int, rounds: int, tmp: str) -> None:
    """Rounds/s of a binary RR round to all n users, memory vs durable ledger, in process and over gRPC."""
    from ldp.local.oracle import InProcessLROracle
    from ldp.wire.launcher import launch_local

    spec = _population(n)
    rates = {}
    for name, store in (("memory", MemoryLedgerStore()), ("sqlite", SqliteLedgerStore(os.path.join(tmp, "inprocess.sqlite")))):
        rates[("in process", name)] = await _session_rounds(InProcessLROracle(spec, store=store), n, rounds)
        store.close()
    for name, path in (("memory", None), ("sqlite", os.path.join(tmp, "grpc.sqlite"))):
        async with launch_local(spec, processes=1, ledger_path=path) as oracle:
            rates[("gRPC, 1 process", name)] = await _session_rounds(oracle, n, rounds)
    print(f"whole rounds: binary RR to {n:,} users (plan, charge, sample, commit, reply), {rounds} rounds")
    for where in ("in process", "gRPC, 1 process"):
        memory, durable = rates[(where, "memory")], rates[(where, "sqlite")]
        print(f"  {where:16s}: memory {memory:6.2f} rounds/s, durable {durable:6.2f} rounds/s, durable / memory = {durable / memory:.2f}")


if __name__ == "__main__":
    main()
    import asyncio

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(whole_rounds(10**6, 10, tmp))
