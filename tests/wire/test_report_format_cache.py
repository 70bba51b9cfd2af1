"""The aggregator's report formats are remembered across populations of one schema, and only those.

A report format (what a correct reply carries: dtype, width, domains) depends on the randomizer
spec and the users' record schema alone (``ldp.wire.codec.report_format``). A sweep loads
thousands of populations of one schema into the same clients (``ldp.simulations.separation``),
and deriving a format builds the randomizer, which cost more than a small trial's round; so
``RoundExchange.population_changed`` forgets the formats only when the schema changes.

Deterministic checks (no statistics): over one cluster, the same spec asked of two populations
of one schema derives its format once; asked of a population with another schema (``record_rr``:
its report width is the schema's), the reports still equal a fresh in-process oracle's. Broken
variants: a cache that is never forgotten rejects the wider replies of the second schema; one
that is forgotten at every load derives the format again.
"""

from __future__ import annotations

from typing import Any

import pytest

from ldp.core.query_specs import record_query
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import SessionKind
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session
from ldp.wire import codec
from ldp.wire.launcher import grpc_oracle_factory
from ldp.wire.rounds import RoundExchange
from tests.wire.wire_helpers import population

RECORD_RR = RandomizerSpec("record_rr", record_query(), 0.5)  # within the users' budget of 1


async def _answer(oracle: Any, n: int) -> bytes:
    (reports,) = await Session(oracle, SessionKind.NON_INTERACTIVE).round([Request.of(range(n), RECORD_RR)])
    return bytes(reports.values.tobytes()) if reports.counts()["answered"] == n else b"not all answered"


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the formats the aggregator derives (``codec.report_format`` calls)."""
    calls: list[int] = []
    derive = codec.report_format

    def counted(spec: Any, schema: Any) -> Any:
        calls.append(schema.width)
        return derive(spec, schema)

    monkeypatch.setattr(codec, "report_format", counted)
    return calls


async def _two_schemas() -> tuple[bytes, bytes]:
    narrow, wide = population(n=60, seed=1, d=4), population(n=50, seed=2, d=7)
    async with grpc_oracle_factory(1) as factory:
        async with factory(narrow) as oracle:
            first = await _answer(oracle, 60)
        async with factory(wide) as oracle:
            second = await _answer(oracle, 50)
    assert first == await _answer(InProcessLROracle(narrow), 60)
    return first, second


async def test_one_schema_derives_each_format_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    async with grpc_oracle_factory(1) as factory:
        for seed in (1, 2, 3):
            spec = population(n=40, seed=seed)
            async with factory(spec) as oracle:
                assert await _answer(oracle, 40) == await _answer(InProcessLROracle(spec), 40)
    assert len(calls) == 1


async def test_a_new_schema_derives_its_formats_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    _, second = await _two_schemas()
    assert second == await _answer(InProcessLROracle(population(n=50, seed=2, d=7)), 50)
    assert calls == [5, 8]  # record width d + 1 of each schema


async def test_broken_variant_a_cache_never_forgotten_rejects_the_new_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RoundExchange, "_formats_for", lambda self, schema: None)
    _, second = await _two_schemas()  # the wider replies fail the stale check: no reports
    assert second != await _answer(InProcessLROracle(population(n=50, seed=2, d=7)), 50)


async def test_broken_variant_forgetting_at_every_load_derives_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    forget = RoundExchange.population_changed

    def always(self: RoundExchange) -> None:
        forget(self)
        self._formats.clear()  # the behaviour before: every load forgets every format

    monkeypatch.setattr(RoundExchange, "population_changed", always)
    async with grpc_oracle_factory(1) as factory:
        for seed in (1, 2):
            async with factory(population(n=40, seed=seed)) as oracle:
                await _answer(oracle, 40)
    assert len(calls) == 2
