"""Shared helpers for the wire tests: a small population and a scripted local algorithm."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldp.core.concepts import ConceptClass, ParityConcept, ProductBernoulli
from ldp.core.population import PopulationSpec
from ldp.core.queries import QuerySpec
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import SessionKind
from ldp.local.oracle import LROracle, Reports
from ldp.local.session import Request, Session
from ldp.wire.aggregator import ShardClaim
from ldp.wire.client_config import ClientConfig
from ldp.wire.launcher import ClientProcess, spawn_clients

D = 6
BIT0 = QuerySpec("field", {"field": "x", "index": 0})
LABEL = QuerySpec("label")


def population(n: int = 3000, budget: float = 1.0, seed: int = 11, d: int = D) -> PopulationSpec:
    target = ParityConcept(tuple([1, 0, 1] + [0] * (d - 3)))
    return PopulationSpec(ConceptClass("parity", d), target, n, budget=budget, seed=seed, distribution=ProductBernoulli(0.3))


def rr(epsilon: float, query: QuerySpec = BIT0, kind: str = "binary_rr") -> RandomizerSpec:
    return RandomizerSpec(kind, query, epsilon)


@dataclass
class Outcome:
    reports: list[Reports]
    ledger: np.ndarray


async def ledger_of(oracle: LROracle) -> np.ndarray:
    result: Any = oracle.ledger_spent_units()  # sync in process, async over gRPC
    if hasattr(result, "__await__"):
        result = await result
    return np.asarray(result)


async def scripted_sessions(oracle: LROracle) -> Outcome:
    """A 3-round interactive session (adaptive: round 2 depends on round 1's reports; round 3
    overspends some users, so refusals appear) and a non-interactive session."""
    n = oracle.user_count
    out: list[Reports] = []
    s = Session(oracle, SessionKind.INTERACTIVE, name="interactive")
    r1 = await s.round(
        [
            Request.of(range(0, n // 2), rr(0.25)),
            Request.of(np.arange(n // 2, n, 3)[::-1], rr(0.5, LABEL, "kary_rr")),  # explicit ids, descending
        ]
    )
    out += r1
    # Adaptive: the users who reported 1 in round 1 are asked a (discrete) Laplace question next.
    chosen = r1[0].answered_users[r1[0].values == 1]
    r2 = await s.round([Request.of(chosen, rr(0.25, BIT0, "discrete_laplace")), Request.of(range(n // 2, n), rr(0.125, QuerySpec("record"), "record_rr"))])
    out += r2
    # Users in `chosen` have spent 0.5 of their budget 1.0: asking them 0.75 more is refused.
    out += await s.round([Request.of(range(0, n), rr(0.75, BIT0, "pm_rr"))])
    ni = Session(oracle, SessionKind.NON_INTERACTIVE, name="non-interactive")
    out += await ni.round(
        [Request.of(range(1, n, 2), rr(0.125)), Request.of(range(0, n, 2), rr(0.125, LABEL)), Request.of(range(0, n, 3), rr(0.0625, LABEL, "discrete_laplace"))]
    )
    return Outcome(out, await ledger_of(oracle))


def assert_identical(a: Outcome, b: Outcome) -> None:
    assert len(a.reports) == len(b.reports)
    for x, y in zip(a.reports, b.reports):
        assert x.request_id == y.request_id
        assert x.randomizer == y.randomizer
        np.testing.assert_array_equal(x.users, y.users)
        np.testing.assert_array_equal(x.status, y.status)
        assert x.values.dtype == y.values.dtype and x.values.shape == y.values.shape
        assert x.values.tobytes() == y.values.tobytes()  # bit-identical, NaN-safe
        assert x.errors == y.errors
    assert a.ledger.dtype == b.ledger.dtype
    np.testing.assert_array_equal(a.ledger, b.ledger)


def spawn_one_client(address: str, *args: str, n: int = 1000, connect_timeout_s: float = 30) -> ClientProcess:
    """One real client process hosting users 0..n−1 of a seeded population (shard 0/1), with
    extra command-line ``args`` (e.g. ``--welcome-timeout 2``)."""
    (client,) = spawn_clients(
        address, [ShardClaim(0, 1)], ClientConfig(population=population(n=n, seed=5)), connect_timeout_s=connect_timeout_s, extra_args={"0/1": list(args)}
    )
    return client


async def client_exit_code(client: ClientProcess, timeout_s: float) -> int:
    """The client's exit code, waiting at most ``timeout_s`` (a hang guard, not a speed claim)."""
    end = time.monotonic() + timeout_s
    while client.process.poll() is None:
        assert time.monotonic() < end, f"the client did not exit within {timeout_s} s: {client.log_tail()}"
        await asyncio.sleep(0.05)
    return int(client.process.returncode)
