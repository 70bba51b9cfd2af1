"""A hostile aggregator against real client processes: no over-spend, no leak, no crash.

The aggregator (``tests/wire/hostile.py``) speaks the .proto directly and chooses everything it
may choose: ids, ranges, ε, queries, parameters, replays, Loads, garbage. The users' side is a
real ``python -m ldp.wire.client`` configured out of band (its standard input), as
``launch_local`` and ``ldp-sim clients`` do. Every scenario asserts:

- no user's accepted ε exceeds the budget the users' side set (counted from the replies alone,
  in exact ledger units, independently of the client's ledger);
- nothing is charged without a report (the client's ledger equals that tally exactly);
- the client is still alive;
- reports of different requests are independent (the r1 ⊕ r2 check at the independent-coin rate).

Statistical checks are seeded (the population seed fixes the records and the report key) and
state their false-alarm rate; each is also run on a deliberately broken variant it must catch.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ldp.core.budget import charge_units
from ldp.core.population import PopulationSpec
from ldp.core.queries import QuerySpec
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import SessionKind
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session
from ldp.wire.aggregator import ShardClaim
from ldp.wire.client_config import ClientConfig
from ldp.wire.launcher import ClientProcess, spawn_clients, stop_clients
from ldp.wire.sealed import new_seal_key, seal_population
from ldp.wire.v1 import aggregator_pb2 as pb
from tests.waits import PROCESS_WAIT_S
from tests.wire.hostile import BIT0, BIT1, RECORD, HostileAggregator, Peer, Tally, assignment, randomizer
from tests.wire.wire_helpers import population

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

N = 2000


def _spawn(address: str, config: ClientConfig) -> ClientProcess:
    (client,) = spawn_clients(address, [ShardClaim(0, 1)], config, connect_timeout_s=30)
    return client


def _alive(client: ClientProcess) -> bool:
    return client.process.poll() is None


async def _spend_range(peer: Peer, tally: Tally, session: int, rnd: int, requests: list[tuple[int, str, float, object]], kind: int = 2) -> list:
    """Send one round of range requests over all users; add what was answered to the tally."""
    assignments = [assignment(rid, 0, N, randomizer(k, eps, q)) for rid, k, eps, q in requests]
    reply = await peer.round(session, rnd, assignments, kind)
    if reply.error:
        return []
    for (rid, _, eps, _), result in zip(requests, reply.results):
        assert result.request_id == rid
        tally.add(0, N, eps, result)
    return list(reply.results)


async def test_a_hostile_aggregator_cannot_overspend_leak_or_crash_a_client() -> None:
    spec = population(n=N, budget=1.0, seed=21)
    scenarios = 0
    async with HostileAggregator() as agg:
        client = _spawn(agg.address, ClientConfig(population=spec))
        try:
            peer = await agg.accept()
            ready = await peer.handshake(0, N)
            assert ready.budget == 1.0 and not ready.error
            tally = Tally(0, N, 1.0)

            # 1. Over budget in one round: 12 requests of ε = 0.25 to every user.
            results = await _spend_range(peer, tally, 1, 0, [(100 + j, "binary_rr", 0.25, BIT0) for j in range(12)])
            answered = [int((~r.refused).sum()) for r in results]
            assert answered[:4] == [N] * 4 and answered[4:] == [0] * 8
            scenarios += 1

            # 2. Across rounds, 3. across sessions (new ids every time), 4. replayed rounds.
            for rnd in range(1, 6):
                await _spend_range(peer, tally, 1, rnd, [(200 + rnd, "pm_rr", 0.5, BIT0)])
            for session in range(2, 12):
                await _spend_range(peer, tally, session, 0, [(1, "kary_rr", 0.125, BIT0)], kind=1)
            replay = await peer.round(1, 3, [assignment(7, 0, N, randomizer("binary_rr", 0.25))])
            assert "not after" in replay.error
            scenarios += 3

            # 5. Reused request ids: the same id twice in one round, and again in a new session.
            await _spend_range(peer, tally, 40, 0, [(9, "binary_rr", 0.01, BIT0), (9, "binary_rr", 0.01, BIT1)])
            await _spend_range(peer, tally, 41, 0, [(9, "binary_rr", 0.01, BIT0)])
            scenarios += 1

            # 6. Vector queries on scalar randomizers; the float Laplace; extreme and invalid ε;
            #    aggregator-chosen discrete Laplace steps; deep JSON; unknown kinds.
            bad = [
                randomizer(kind, 0.01, RECORD) for kind in ("laplace", "discrete_laplace", "pm_rr", "binary_rr", "kary_rr")
            ] + [
                randomizer("laplace", 0.01),
                *(randomizer("binary_rr", e) for e in (0.0, -1.0, math.nan, math.inf, -math.inf, 5e-324, 1025.0, 1e300)),
                randomizer("discrete_laplace", 0.01, BIT0, {"steps": 3}),
                randomizer("discrete_laplace", 0.01, BIT0, {"steps": 2**40}),
                randomizer("binary_rr", 0.01, "[" * 100_000),
                randomizer("binary_rr", 0.01, BIT0, "{" * 100_000),
                randomizer("nosuch_rr", 0.01),
                randomizer("binary_rr", 0.01, {"name": "nosuch"}),
            ]
            for j, r in enumerate(bad):
                reply = await peer.round(50 + j, 0, [assignment(1, 0, N, r)], kind=1)
                assert reply.error or (reply.results[0].error and len(reply.results[0].values) == 0), (r, reply)
                assert _alive(client)
            scenarios += len(bad)

            # 7. Extreme but valid ε are simply over budget now.
            for j, eps in enumerate((710.0, 1024.0)):
                results = await _spend_range(peer, tally, 90 + j, 0, [(1, "pm_rr", eps, BIT0)], kind=1)
                assert int((~results[0].refused).sum()) == 0
            scenarios += 2

            # 8. Huge ranges and id lists, ranges outside the shard, garbage bytes.
            huge = [
                pb.Assignment(request_id=1, range=pb.UserRange(start=0, stop=2**62), randomizer=randomizer("binary_rr", 0.01)),
                pb.Assignment(request_id=1, range=pb.UserRange(start=N, stop=N + 5), randomizer=randomizer("binary_rr", 0.01)),
                pb.Assignment(request_id=1, ids=np.random.default_rng(0).integers(0, 2**62, 1 << 20).astype("<i8").tobytes(), randomizer=randomizer("binary_rr", 0.01)),
                pb.Assignment(request_id=1, ids=b"\x01\x02\x03", randomizer=randomizer("binary_rr", 0.01)),
            ]
            for j, a in enumerate(huge):
                reply = await peer.round(100 + j, 0, [a], kind=1)
                assert reply.error or reply.results[0].error, reply
            await peer.send(b"\xff\xfe this is not a protobuf message")
            await peer.send(pb.ServerMessage(round=pb.RoundRequest(session_id=120, session_kind=7, round=0, final=True)))
            await peer.reply()
            scenarios += 6
            assert _alive(client)

            # The verdict: nobody over budget, and the client's own ledger equals the tally
            # exactly (no charge without a report, no report without a charge).
            assert tally.overspent() == 0
            ledger = await peer.ledger()
            np.testing.assert_array_equal(ledger.astype(object), tally.units)
            assert ledger.max() <= tally.allowance
        finally:
            stop_clients([client], timeout_s=1.0)
    assert scenarios >= 30


def _xor_agreement(r1: np.ndarray, r2: np.ndarray, x0: np.ndarray, x1: np.ndarray) -> float:
    return float(np.mean((r1 ^ r2) == (x0 ^ x1)))


def _independent_rate(epsilon: float) -> float:
    p = 1.0 / (1.0 + math.exp(-epsilon))
    return p * p + (1 - p) * (1 - p)


async def test_a_reused_request_id_gets_independent_coins_over_the_wire() -> None:
    """Two binary RR requests with the same id, in one round and across sessions: r1 ⊕ r2 agrees
    with x0 ⊕ x1 at the independent-coin rate p² + (1−p)², not always (the old, id-keyed draws).
    With 20,000 users the rate's sd is ≤ 0.0036; the band ±0.025 is ±7 sd (false alarm < 1e-11)."""
    n, eps = 20_000, 0.5
    spec = population(n=n, budget=4.0, seed=33)
    records = spec.records(0, n)
    x0, x1 = records[:, 0].astype(np.uint8), records[:, 1].astype(np.uint8)
    async with HostileAggregator() as agg:
        client = _spawn(agg.address, ClientConfig(population=spec))
        try:
            peer = await agg.accept()
            await peer.handshake(0, n)
            same_round = await peer.round(1, 0, [assignment(5, 0, n, randomizer("binary_rr", eps, BIT0)), assignment(5, 0, n, randomizer("binary_rr", eps, BIT1))], kind=1)
            again = await peer.round(2, 0, [assignment(5, 0, n, randomizer("binary_rr", eps, BIT1))], kind=1)
        finally:
            stop_clients([client], timeout_s=1.0)
    r1, r2, r3 = same_round.results[0].values, same_round.results[1].values, again.results[0].values
    assert abs(_xor_agreement(r1, r2, x0, x1) - _independent_rate(eps)) < 0.025
    assert abs(float(np.mean(r2 == r3)) - _independent_rate(eps)) < 0.025  # same id, new session: new coins


async def test_the_independence_check_catches_id_keyed_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broken variant: report randomness keyed by the request id (the old design). The
    same check as above must see r1 ⊕ r2 = x0 ⊕ x1 for every user."""
    import ldp.local.shard as shard_module
    from ldp.core.rng import UserRandomness

    def id_keyed(key: bytes, users: np.ndarray, counters: object, memo: bytes | None = None) -> UserRandomness:
        return UserRandomness(key, users, 0, memo)  # ignores the nonce: every request reuses draws

    monkeypatch.setattr(shard_module, "UserRandomness", id_keyed)
    n, eps = 20_000, 0.5
    spec = population(n=n, budget=4.0, seed=33)
    records = spec.records(0, n)
    s = Session(InProcessLROracle(spec), SessionKind.NON_INTERACTIVE)
    r1, r2 = await s.round([Request.of(range(n), RandomizerSpec("binary_rr", QuerySpec("field", {"field": "x", "index": i}), eps)) for i in (0, 1)])
    agreement = _xor_agreement(r1.values, r2.values, records[:, 0].astype(np.uint8), records[:, 1].astype(np.uint8))
    assert agreement == 1.0 and abs(agreement - _independent_rate(eps)) >= 0.025


async def test_loads_cannot_reset_raise_or_forge_a_budget() -> None:
    """The aggregator replays a sealed population (the same data) 6 times and spends everything
    each time: the ledger continues, so each user answers at most budget/ε requests in all.
    Altered blobs, blobs sealed with another key and garbage are refused, and the client stays up."""
    key = new_seal_key()
    spec = population(n=N, budget=1.0, seed=44)
    blob = seal_population(key, spec)
    tally = Tally(0, N, 1.0)
    async with HostileAggregator() as agg:
        client = _spawn(agg.address, ClientConfig(population=spec, seal_key=key))
        try:
            peer = await agg.accept()
            await peer.handshake(0, N)
            for load in range(1, 7):
                await peer.send(pb.ServerMessage(load=pb.Load(load_id=load, sealed_population=blob, first_user=0, user_count=N)))
                ready = (await peer.recv()).ready
                assert ready.load_id == load and not ready.error and ready.budget == 1.0
                await _spend_range(peer, tally, 1, 0, [(1, "binary_rr", 0.25, BIT0), (2, "binary_rr", 0.25, BIT0), (3, "binary_rr", 0.5, BIT1)], kind=1)
            assert tally.overspent() == 0 and (tally.units == charge_units(0.25) * 2 + charge_units(0.5)).all()
            # Forgeries: a flipped bit, another key's seal (of a budget-1024 spec), garbage, a wrong range.
            rich = PopulationSpec(spec.concept_class, spec.target, N, budget=1024.0, seed=44, distribution=spec.distribution)
            flipped = bytes([blob[0] ^ 1]) + blob[1:-1] + bytes([blob[-1] ^ 1])
            for j, (forged, first, count) in enumerate(
                [(flipped, 0, N), (seal_population(new_seal_key(), rich), 0, N), (b"\x00" * 64, 0, N), (b"", 0, N), (blob, 0, N // 2)]
            ):
                await peer.send(pb.ServerMessage(load=pb.Load(load_id=100 + j, sealed_population=forged, first_user=first, user_count=count)))
                ready = (await peer.recv()).ready
                assert ready.error, j
                assert _alive(client)
            # After a refused Load the client holds no users; the real blob brings the same ledger back.
            await peer.send(pb.ServerMessage(load=pb.Load(load_id=200, sealed_population=blob, first_user=0, user_count=N)))
            assert not (await peer.recv()).ready.error
            np.testing.assert_array_equal((await peer.ledger()).astype(object), tally.units)
        finally:
            stop_clients([client], timeout_s=1.0)


async def test_one_load_ledgers_refuse_a_reload_that_would_restart_a_budget() -> None:
    """A sweep's clients keep only the live population's ledgers (``ledgers="one_load"``). The
    aggregator cycles A → B → A to get A's budget back: the second Load of A is refused (the
    client stays up and still serves B), so A's users never answer past their budget."""
    key = new_seal_key()
    a, b = population(n=N, budget=1.0, seed=45), population(n=N, budget=1.0, seed=46)
    tally = Tally(0, N, 1.0)
    async with HostileAggregator() as agg:
        client = _spawn(agg.address, ClientConfig(seal_key=key, ledgers="one_load"))
        try:
            peer = await agg.accept()
            await peer.handshake(0, N)
            await peer.send(pb.ServerMessage(load=pb.Load(load_id=1, sealed_population=seal_population(key, a), first_user=0, user_count=N)))
            assert not (await peer.recv()).ready.error
            await _spend_range(peer, tally, 1, 0, [(1, "binary_rr", 1.0, BIT0)], kind=1)
            await peer.send(pb.ServerMessage(load=pb.Load(load_id=2, sealed_population=seal_population(key, b), first_user=0, user_count=N)))
            assert not (await peer.recv()).ready.error
            await peer.send(pb.ServerMessage(load=pb.Load(load_id=3, sealed_population=seal_population(key, a), first_user=0, user_count=N)))
            ready = (await peer.recv()).ready
            assert ready.error and "refused" in ready.error
            assert _alive(client) and tally.overspent() == 0
        finally:
            stop_clients([client], timeout_s=1.0)


async def test_an_aggregator_that_keeps_every_byte_decodes_no_better_than_epsilon_allows() -> None:
    """Everything the aggregator received — Hello, Ready, reports — holds neither the seed, the
    report key nor a record, and the best decoder of x_0 from a binary RR report at ε = 1 (report
    the report) is right with probability e/(1+e) ≈ 0.731 and no more: measured on 20,000 users,
    sd ≤ 0.0032, band +0.02 (6 sd; false alarm < 1e-9). The version-2 attack (regenerate the
    draws from the spec in Welcome) has nothing to start from: Welcome now comes from the
    aggregator, and the client sends no spec."""
    n, eps = 20_000, 1.0
    spec = population(n=n, budget=1.0, seed=987_654_321)
    records = spec.records(0, n)
    async with HostileAggregator() as agg:
        client = _spawn(agg.address, ClientConfig(population=spec, key_salt=b""))  # the seeded key as is, for the broken variant below
        try:
            peer = await agg.accept()
            await peer.handshake(0, n)
            reply = await peer.round(1, 0, [assignment(1, 0, n, randomizer("binary_rr", eps, BIT0))], kind=1)
        finally:
            stop_clients([client], timeout_s=1.0)
    received = b"".join(peer.received)
    for secret in (str(spec.seed).encode(), int(spec.seed).to_bytes(8, "little"), spec.report_key(), spec.identity.encode()):
        assert secret not in received
    reports = reply.results[0].values
    accuracy = float(np.mean(reports == records[:, 0]))
    bound = math.exp(eps) / (1 + math.exp(eps))
    assert accuracy <= bound + 0.02
    # The broken variant this guards against: a decoder that knows the report key recovers every bit.
    from ldp.core.rng import UserRandomness

    keep = UserRandomness(spec.report_key(), np.arange(n), np.zeros(n, dtype=np.uint64)).bits(0)
    from ldp.core.rr_mechanisms import BinaryRandomizedResponse

    R = BinaryRandomizedResponse(eps)
    flipped = ~_kept(R, keep)
    decoded = np.where(flipped, 1 - reports, reports)
    assert float(np.mean(decoded == records[:, 0])) == 1.0 > bound + 0.02


def _kept(R: object, bits: np.ndarray) -> np.ndarray:
    """Which users' binary RR kept its input, from the raw draw (the sampler's own rule)."""
    probe = R.sample(np.zeros(len(bits), dtype=np.uint8), _Fixed(bits))  # type: ignore[attr-defined]
    return np.asarray(probe) == 0


class _Fixed:
    def __init__(self, bits: np.ndarray) -> None:
        self.bits_ = bits
        self.users = np.arange(len(bits))

    def bits(self, draw: int = 0) -> np.ndarray:
        assert draw == 0
        return self.bits_

    def uniform(self, draw: int = 0) -> np.ndarray:
        return ((self.bits(draw) >> np.uint64(12)).astype(np.float64) * 2.0 + 1.0) * 2.0**-53


async def test_a_durable_ledger_survives_kill_9_of_a_client(tmp_path: Path) -> None:
    """Charges, then kill -9 mid-session; the restarted client (same configuration, same SQLite
    ledger) still holds every charge the aggregator saw reported, and refuses what would overspend."""
    spec = population(n=N, budget=1.0, seed=55)
    config = ClientConfig(population=spec, ledger_path=str(tmp_path / "ledger.sqlite"))
    tally = Tally(0, N, 1.0)
    async with HostileAggregator() as agg:
        client = _spawn(agg.address, config)
        try:
            peer = await agg.accept()
            await peer.handshake(0, N)
            for rnd in range(3):
                await _spend_range(peer, tally, 1, rnd, [(rnd + 1, "binary_rr", 0.25, BIT0)])
            os.kill(client.process.pid, signal.SIGKILL)
            client.process.wait()
        finally:
            stop_clients([client], timeout_s=1.0)
        client = _spawn(agg.address, config)
        try:
            peer = await agg.accept()
            await peer.handshake(0, N)
            np.testing.assert_array_equal((await peer.ledger()).astype(object), tally.units)
            results = await _spend_range(peer, tally, 1, 0, [(1, "binary_rr", 0.25, BIT0), (2, "binary_rr", 0.25, BIT0)], kind=1)
            assert [int((~r.refused).sum()) for r in results] == [N, 0]
            assert tally.overspent() == 0
        finally:
            stop_clients([client], timeout_s=1.0)


def test_a_client_with_a_bad_configuration_says_why_and_exits_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ldp.wire.client", "--connect", "127.0.0.1:9", "--config", "-"],
        input=b'{"format": 1, "population": null, "budget": 1.0}', capture_output=True, timeout=PROCESS_WAIT_S,
    )
    assert proc.returncode == 2
    assert b"was given none of them" in proc.stderr and b"Traceback" not in proc.stderr
