"""TLS and enrolment end to end on loopback: real client processes and a real aggregator.

Only enrolled clients claim shards: with mTLS, a certificate from the experiment's CA; in token
mode, the shared token over TLS. An impostor (another CA's certificate, a wrong token, no TLS)
gets no range, the aggregator stays up, and the client says why in one line.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ldp.local.messages import SessionKind
from ldp.local.session import Request, Session
from ldp.wire.aggregator import GrpcAggregator, GrpcLROracle, ShardClaim
from ldp.wire.client_config import ClientConfig
from ldp.wire.launcher import ClientProcess, spawn_clients, stop_clients
from ldp.wire.tls import issue, make_ca, new_token, server_tls
from tests.wire.wire_helpers import population, rr

pytestmark = pytest.mark.timeout(90)

N = 1000


def _pki(directory: Path, *clients: str) -> Path:
    make_ca(directory)
    issue(directory, "server", "aggregator")
    for name in clients:
        issue(directory, "client", name)
    return directory


async def _exit_code(client: ClientProcess, timeout_s: float = 30.0) -> int:
    for _ in range(int(timeout_s / 0.05)):
        if client.process.poll() is not None:
            return client.process.returncode
        await asyncio.sleep(0.05)
    raise AssertionError("the client did not exit")


async def test_an_enrolled_client_serves_and_an_impostor_gets_no_range(tmp_path: Path) -> None:
    pki, other = _pki(tmp_path / "pki", "alice"), _pki(tmp_path / "other", "mallory")
    spec = population(n=N)
    async with GrpcAggregator(spec.description(), tls=server_tls(pki)) as aggregator:
        config = ClientConfig(population=spec)
        (alice,) = spawn_clients(aggregator.address, [ShardClaim(0, 1)], config, extra_args={"0/1": ["--tls", str(pki), "--client-name", "alice"]})
        try:
            await aggregator.wait_for_shards(30)
            assert any("alice" in e for e in aggregator.events)  # named by its certificate, not by what it says
            (reports,) = await Session(GrpcLROracle(aggregator), SessionKind.NON_INTERACTIVE).round([Request.of(range(N), rr(0.5))])
            assert reports.counts()["answered"] == N
            # The broken variant: a certificate from another CA. The TLS handshake fails; no range.
            (mallory,) = spawn_clients(
                aggregator.address, [ShardClaim(0, 1)], config, connect_timeout_s=2, extra_args={"0/1": ["--tls", str(other), "--client-name", "mallory"]}
            )
            assert await _exit_code(mallory) == 1
            assert "cannot reach the aggregator" in mallory.log_tail() and "Traceback" not in mallory.log_tail()
            stop_clients([mallory])
            assert [s.key for s in aggregator.shards] == ["0/1"]
        finally:
            await aggregator.close("done")
            stop_clients([alice])


async def test_token_mode_admits_the_token_and_refuses_a_wrong_one(tmp_path: Path) -> None:
    pki = _pki(tmp_path / "pki")
    token = new_token(pki)
    wrong = tmp_path / "wrong-token"
    wrong.write_text("x" * 43)  # well formed, but not the token
    wrong.chmod(0o600)
    spec = population(n=N)
    async with GrpcAggregator(spec.description(), tls=server_tls(pki, token)) as aggregator:
        config = ClientConfig(population=spec)
        (impostor,) = spawn_clients(aggregator.address, [ShardClaim(0, 1)], config, extra_args={"0/1": ["--tls", str(pki), "--token-file", str(wrong)]})
        try:
            assert await _exit_code(impostor) == 2
            assert "not enrolled" in impostor.log_tail()
            assert aggregator.shards == [] and any("not enrolled" in e for e in aggregator.events)
        finally:
            stop_clients([impostor])
        (student,) = spawn_clients(aggregator.address, [ShardClaim(0, 1)], config, extra_args={"0/1": ["--tls", str(pki), "--token-file", str(token)]})
        try:
            await aggregator.wait_for_shards(30)
            (reports,) = await Session(GrpcLROracle(aggregator), SessionKind.NON_INTERACTIVE).round([Request.of(range(N), rr(0.5))])
            assert reports.counts()["answered"] == N
        finally:
            await aggregator.close("done")
            stop_clients([student])


async def test_a_plaintext_client_cannot_reach_a_tls_aggregator(tmp_path: Path) -> None:
    pki = _pki(tmp_path / "pki")
    spec = population(n=N)
    async with GrpcAggregator(spec.description(), tls=server_tls(pki)) as aggregator:
        (plain,) = spawn_clients(aggregator.address, [ShardClaim(0, 1)], ClientConfig(population=spec), connect_timeout_s=2)
        try:
            assert await _exit_code(plain) in (1, 2)
            assert aggregator.shards == []
        finally:
            stop_clients([plain])
