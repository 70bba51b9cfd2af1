"""Invariant I1 attacked through restarts: no (report key, user, nonce) is fed to the PRF twice.

The attack (issue 23, item 1): a hostile aggregator (``tests/wire/hostile.py``, the .proto
spoken directly) asks round 1 for ``binary_rr`` at ε = 1 of a *constant* query (``affine`` with
scale 0), so each report is the user's coin alone. It then closes the client (or it is killed
with SIGKILL); a supervisor on the users' side starts the very same command again, with the
same files; round 2 asks ``binary_rr`` at ε = 1 of x0 with the same ids. If the second life
reused the first life's coins, r1 ⊕ r2 = x0 for every user: two ε = 1 reports would publish x0.

With independent coins (keep probability p = e/(1+e)), r1 ⊕ r2 = x0 exactly when both coins
agree: rate q = p² + (1−p)² = (e² + 1)/(1 + e)² ≈ 0.6066. KLNRS's bound for two ε = 1 reports
(ε = 2 in all) is e²/(1 + e²) ≈ 0.881 for any decoder of x0. Each scenario measures the rate
over N = 4000 users and asserts |rate − q| < 0.05: a two-sided binomial tail (computed exactly
below, ``FALSE_ALARM``) below 1e-9 per check; every passing rate is thus far below 0.881 and
far from 1.0. The broken variant (the salt forced empty: nonces restart at 0 under the fixed
seeded key, what every client did before I1) gives rate 1.0 and the same check flags it.

Configurations (each a real ``ldp-sim clients`` process, restarted by the supervisor with the
same command): a seeded spec (in memory); ``--key-file`` (durable by default, and in memory when
asked by name); a data file with a declared schema; a ``secure`` spec; standby with the sealed
Load replayed after the restart (default and ``--one-load-ledgers``); a durable ``--ledger``
(clean restart and kill -9); two live processes hosting the same claim (in memory: independent;
durable: the second is refused). Each test prints its configuration → rate as it measures it
(``pytest -s`` shows them), so no test depends on another having run.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import binom

from ldp.core.population import PopulationSpec
from ldp.wire import codec
from ldp.wire.client_config import ClientConfig
from ldp.wire.sealed import new_seal_key, seal_population
from ldp.wire.v1 import aggregator_pb2 as pb
from tests.waits import PROCESS_WAIT_S
from tests.wire.hostile import BIT0, HostileAggregator, Peer, assignment, randomizer
from tests.wire.wire_helpers import population

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

N = 4000
EPS = 1.0
DATA_BIT = {"name": "field", "params": {"field": "x_0"}}  # x0 of the data file's columns x_0, x_1, y
P_KEEP = math.exp(EPS) / (1 + math.exp(EPS))
INDEPENDENT = P_KEEP**2 + (1 - P_KEEP) ** 2  # ≈ 0.6066
MAX_ALLOWED = math.exp(2 * EPS) / (1 + math.exp(2 * EPS))  # ≈ 0.881: any decoder of x0 from two ε = 1 reports
BAND = 0.05
# P(|X/N − q| ≥ BAND) for X ~ Binomial(N, q): the chance that a sound configuration fails a check.
FALSE_ALARM = float(binom.cdf(math.ceil(N * (INDEPENDENT - BAND)), N, INDEPENDENT) + binom.sf(math.floor(N * (INDEPENDENT + BAND)) - 1, N, INDEPENDENT))
CLI = [sys.executable, "-m", "ldp.cli.main"]
DEADLINE_S = PROCESS_WAIT_S  # a hang guard on a process, never a speed claim



def _report(configuration: str, rate: float) -> None:
    """One row of the restart table, printed where it is measured (``pytest -s`` shows it)."""
    print(f"\n{configuration:55s} {rate:.4f} (independent coins: {INDEPENDENT:.4f} ± {BAND}, false alarm {FALSE_ALARM:.1e}; max allowed {MAX_ALLOWED:.3f})")


def _constant(bit: Any) -> dict[str, Any]:
    """g(z) = 0·bit + 0 for every user: a binary_rr report of it is the user's coin alone."""
    return {"name": "affine", "params": {"query": bit, "scale": 0.0, "offset": 0.0}}


def check_independent(rate: float) -> None:
    """The verdict on one configuration: r1 ⊕ r2 agrees with x0 at the independent-coin rate."""
    assert abs(rate - INDEPENDENT) < BAND, f"r1 ⊕ r2 agrees with x0 for {rate:.4f} of users; independent coins give {INDEPENDENT:.4f} ± {BAND}"
    assert rate < MAX_ALLOWED


def test_the_false_alarm_rate_is_below_1e_9() -> None:
    assert FALSE_ALARM < 1e-9
    assert INDEPENDENT + BAND < MAX_ALLOWED  # a passing rate is always within what ε = 2 allows


# -- the users' side: files and a supervisor -------------------------------------------------


@dataclass
class Supervisor:
    """The users' side's supervisor loop: runs ``argv`` (or ``python -m ldp.wire.client`` fed
    ``stdin``), and when that life ends, starts the very same command again."""

    argv: list[str]
    log_dir: Path
    stdin: bytes | None = None
    lives: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self) -> subprocess.Popen[bytes]:
        log = open(self.log_dir / f"life-{id(self)}-{len(self.lives)}.log", "wb")  # noqa: SIM115 - closed in stop()
        proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE if self.stdin is not None else subprocess.DEVNULL, stderr=log, stdout=log)
        log.close()  # the child holds its own descriptor
        if self.stdin is not None:
            assert proc.stdin is not None
            proc.stdin.write(self.stdin)
            proc.stdin.close()
        self.lives.append(proc)
        return proc

    async def wait_exit(self) -> int:
        """Wait (bounded) for the current life to end."""
        proc = self.lives[-1]
        return await asyncio.to_thread(proc.wait, DEADLINE_S)

    async def restart(self) -> subprocess.Popen[bytes]:
        await self.wait_exit()
        return self.start()

    def log(self, life: int = -1) -> str:
        return (self.log_dir / f"life-{id(self)}-{life % len(self.lives)}.log").read_text(errors="replace")

    def stop(self) -> None:
        for proc in self.lives:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def supervisors(tmp_path: Path) -> Iterator[list[Supervisor]]:
    made: list[Supervisor] = []
    yield made
    for s in made:
        s.stop()


def _clients(address: str, *args: str) -> list[str]:
    return [*CLI, "clients", "--connect", address, "--connect-timeout", "30", *args]


def _spec_file(tmp_path: Path, spec: PopulationSpec, name: str = "spec.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(spec.to_json()))
    return path


def _key_file(tmp_path: Path) -> Path:
    path = tmp_path / "report.key"
    path.write_bytes(os.urandom(32))
    return path


# -- the hostile aggregator's side --------------------------------------------------------------


async def _handshake(peer: Peer, n: int) -> tuple[int, pb.Ready]:
    """Hello → Welcome → Ready; returns the client process's pid (from its Hello) and Ready."""
    hello = (await peer.recv()).hello
    pid = int(hello.client_name.rsplit(":", 1)[1])
    await peer.send(pb.ServerMessage(welcome=pb.Welcome(protocol_version=codec.PROTOCOL_VERSION, first_user=0, user_count=n)))
    ready = (await peer.recv()).ready
    return pid, ready


async def _load(peer: Peer, blob: bytes, n: int, load_id: int) -> pb.Ready:
    await peer.send(pb.ServerMessage(load=pb.Load(load_id=load_id, sealed_population=blob, first_user=0, user_count=n)))
    return (await peer.recv()).ready


async def _ask(peer: Peer, query: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """One binary_rr request at ε = 1 to every user, always session 1, request 1 (the same ids
    in every life); returns (values of the answered users, refused flags)."""
    reply = await peer.round(1, 0, [assignment(1, 0, n, randomizer("binary_rr", EPS, query))], kind=1)
    assert not reply.error, reply.error
    (result,) = reply.results
    assert not result.error, result.error
    refused = np.asarray(result.refused, dtype=bool) if len(result.refused) else np.zeros(n, dtype=bool)
    return np.asarray(result.values, dtype=np.uint8), refused


async def _close(peer: Peer) -> None:
    await peer.send(pb.ServerMessage(close=pb.Close(reason="the aggregator closes this life", failed=False)))


@dataclass
class Attack:
    """What the restart attack measured."""

    rate: float
    answered: int  # users answered in round 2


def _agreement(r1: np.ndarray, r2: np.ndarray, refused2: np.ndarray, x0: np.ndarray) -> Attack:
    ok = ~refused2
    assert ok.sum() == len(r2)
    if not ok.any():
        return Attack(math.nan, 0)
    return Attack(float(np.mean((r1[ok] ^ r2) == x0[ok])), int(ok.sum()))


async def restart_attack(
    agg: HostileAggregator, sup: Supervisor, x0: np.ndarray, *, blob: bytes | None = None, kill: bool = False, bit: Any = BIT0
) -> Attack:
    """Round 1 (the coin: a constant query) in one life, round 2 (``bit``, x0) in the next life
    of the same command; ``blob``: a sealed population Loaded in each life; ``kill``: SIGKILL
    the client process instead of closing it."""
    n = len(x0)
    sup.start()
    peer = await agg.accept()
    pid, ready = await _handshake(peer, n)
    assert not ready.error or blob is not None, ready.error
    if blob is not None:
        assert not (await _load(peer, blob, n, 1)).error
    r1, refused1 = await _ask(peer, _constant(bit), n)
    assert not refused1.any()
    if kill:
        os.kill(pid, signal.SIGKILL)  # the client process itself, mid-session
    else:
        await _close(peer)
    await sup.restart()  # the supervisor: the same command, the same files
    peer = await agg.accept()
    _, ready = await _handshake(peer, n)
    if blob is not None:
        assert not (await _load(peer, blob, n, 1)).error  # the replayed sealed Load
    r2, refused2 = await _ask(peer, bit, n)
    await _close(peer)
    await sup.wait_exit()
    return _agreement(r1, r2, refused2, x0)


def _x0(spec: PopulationSpec) -> np.ndarray:
    return spec.records(0, spec.size)[:, 0].astype(np.uint8)


# -- the configurations --------------------------------------------------------------------


async def test_a_seeded_spec_in_memory(tmp_path: Path, supervisors: list[Supervisor]) -> None:
    spec = population(n=N, budget=2.0, seed=101)
    async with HostileAggregator() as agg:
        sup = Supervisor(_clients(agg.address, "--population", str(_spec_file(tmp_path, spec))), tmp_path)
        supervisors.append(sup)
        attack = await restart_attack(agg, sup, _x0(spec))
    _report("seeded spec, in memory", attack.rate)
    assert attack.answered == N  # in memory, the budget restarts (the spec's users are the experiment's)
    check_independent(attack.rate)


async def test_a_key_file_is_durable_by_default(tmp_path: Path, supervisors: list[Supervisor]) -> None:
    """--key-file: the ledger is durable by default (I2), in $LDP_STATE_DIR; with budget 2 both
    rounds are answered, with continued nonces, under fresh life keys."""
    spec = population(n=N, budget=2.0, seed=102)
    key = _key_file(tmp_path)
    async with HostileAggregator() as agg:
        sup = Supervisor(_clients(agg.address, "--population", str(_spec_file(tmp_path, spec)), "--key-file", str(key)), tmp_path)
        supervisors.append(sup)
        attack = await restart_attack(agg, sup, _x0(spec))
    assert (Path(os.environ["LDP_STATE_DIR"]) / "ledger.sqlite").is_file()  # the user's state directory (tests: a private one)
    _report("--key-file (durable by default)", attack.rate)
    check_independent(attack.rate)


async def test_a_key_file_in_memory_when_asked(tmp_path: Path, supervisors: list[Supervisor]) -> None:
    spec = population(n=N, budget=2.0, seed=103)
    key = _key_file(tmp_path)
    async with HostileAggregator() as agg:
        argv = _clients(agg.address, "--population", str(_spec_file(tmp_path, spec)), "--key-file", str(key), "--budget-restarts-in-memory")
        sup = Supervisor(argv, tmp_path)
        supervisors.append(sup)
        attack = await restart_attack(agg, sup, _x0(spec))
    assert not (Path(os.environ["LDP_STATE_DIR"]) / "ledger.sqlite").exists()
    _report("--key-file --budget-restarts-in-memory", attack.rate)
    check_independent(attack.rate)


def _write_data(tmp_path: Path, n: int) -> tuple[Path, Path, np.ndarray]:
    rng = np.random.default_rng(104)
    x = rng.integers(0, 2, size=(n, 2))
    y = np.where(x[:, 0] ^ x[:, 1], 1, -1)
    data = tmp_path / "users.csv"
    data.write_text("x_0,x_1,y\n" + "".join(f"{a},{b},{c}\n" for (a, b), c in zip(x, y)))
    schema = tmp_path / "users.schema.json"
    schema.write_text('{"fields": [{"name": "x_0"}, {"name": "x_1"}, {"name": "y", "low": -1, "high": 1, "step": 2}]}')
    return data, schema, x[:, 0].astype(np.uint8)


async def test_a_data_file_with_a_declared_schema(tmp_path: Path, supervisors: list[Supervisor]) -> None:
    """A data file's users bring their own key and ask, by name, for an in-memory ledger: the
    fresh salt of each life still keeps the coins apart."""
    data, schema, x0 = _write_data(tmp_path, N)
    key = _key_file(tmp_path)
    async with HostileAggregator() as agg:
        argv = _clients(agg.address, "--data", str(data), "--schema", str(schema), "--budget", "2", "--key-file", str(key), "--budget-restarts-in-memory")
        sup = Supervisor(argv, tmp_path)
        supervisors.append(sup)
        attack = await restart_attack(agg, sup, x0, bit=DATA_BIT)
    _report("--data --schema --key-file, in memory", attack.rate)
    check_independent(attack.rate)


async def test_a_data_file_durable_by_default(tmp_path: Path, supervisors: list[Supervisor]) -> None:
    data, schema, x0 = _write_data(tmp_path, N)
    async with HostileAggregator() as agg:
        sup = Supervisor(_clients(agg.address, "--data", str(data), "--schema", str(schema), "--budget", "2"), tmp_path)
        supervisors.append(sup)
        attack = await restart_attack(agg, sup, x0, bit=DATA_BIT)
    _report("--data --schema (durable by default)", attack.rate)
    check_independent(attack.rate)


async def test_a_secure_spec(tmp_path: Path, supervisors: list[Supervisor]) -> None:
    base = population(n=N, budget=2.0, seed=105)
    spec = PopulationSpec(base.concept_class, base.target, N, budget=2.0, seed=105, distribution=base.distribution, secure=True)
    async with HostileAggregator() as agg:
        sup = Supervisor(_clients(agg.address, "--population", str(_spec_file(tmp_path, spec))), tmp_path)
        supervisors.append(sup)
        attack = await restart_attack(agg, sup, _x0(spec))
    _report("secure spec", attack.rate)
    check_independent(attack.rate)


@pytest.mark.parametrize("one_load", [False, True], ids=["keep", "one-load"])
async def test_standby_with_a_replayed_sealed_load(tmp_path: Path, supervisors: list[Supervisor], one_load: bool) -> None:
    key = new_seal_key()
    key_path = tmp_path / "seal.key"
    key_path.write_bytes(key)
    spec = population(n=N, budget=2.0, seed=106)
    blob = seal_population(key, spec)
    async with HostileAggregator() as agg:
        sup = Supervisor(_clients(agg.address, "--seal-key-file", str(key_path), *(["--one-load-ledgers"] if one_load else [])), tmp_path)
        supervisors.append(sup)
        attack = await restart_attack(agg, sup, _x0(spec), blob=blob)
    _report(f"standby, replayed sealed Load ({'--one-load-ledgers' if one_load else 'default'})", attack.rate)
    check_independent(attack.rate)


@pytest.mark.parametrize("kill", [False, True], ids=["clean", "kill-9"])
async def test_a_durable_ledger(tmp_path: Path, supervisors: list[Supervisor], kill: bool) -> None:
    spec = population(n=N, budget=2.0, seed=107)
    async with HostileAggregator() as agg:
        argv = _clients(agg.address, "--population", str(_spec_file(tmp_path, spec)), "--ledger", str(tmp_path / "ledger.sqlite"))
        sup = Supervisor(argv, tmp_path)
        supervisors.append(sup)
        attack = await restart_attack(agg, sup, _x0(spec), kill=kill)
    _report(f"--ledger, {'kill -9' if kill else 'clean'} restart", attack.rate)
    check_independent(attack.rate)


async def test_a_durable_ledger_keeps_the_budget_across_a_kill_9(tmp_path: Path, supervisors: list[Supervisor]) -> None:
    """I2: budget 1 is spent by round 1 (ε = 1); after kill -9 and a restart, round 2 is refused
    for every user (nothing to decode from). The data file's ledger is durable by default."""
    data, schema, x0 = _write_data(tmp_path, N)
    async with HostileAggregator() as agg:
        argv = _clients(agg.address, "--data", str(data), "--schema", str(schema), "--budget", "1")
        sup = Supervisor(argv, tmp_path)
        supervisors.append(sup)
        sup.start()
        peer = await agg.accept()
        pid, ready = await _handshake(peer, N)
        assert not ready.error
        _, refused = await _ask(peer, _constant(DATA_BIT), N)
        assert not refused.any()
        os.kill(pid, signal.SIGKILL)
        await sup.restart()
        peer = await agg.accept()
        await _handshake(peer, N)
        values, refused = await _ask(peer, DATA_BIT, N)
        await _close(peer)
        await sup.wait_exit()
    assert refused.all() and len(values) == 0


@pytest.mark.parametrize("durable", [False, True], ids=["in-memory", "durable"])
async def test_two_live_processes_hosting_the_same_claim(tmp_path: Path, supervisors: list[Supervisor], durable: bool) -> None:
    """Twins: the same command started twice at once. In memory, each life has its own salt, so
    round 1 to one twin and round 2 to the other are independent. On one durable ledger, the
    second twin is refused before it connects (its users are claimed), in one line."""
    spec = population(n=N, budget=2.0, seed=108)
    spec_path = _spec_file(tmp_path, spec)
    async with HostileAggregator() as agg:
        extra = ["--key-file", str(_key_file(tmp_path))] if durable else []
        twins = [Supervisor(_clients(agg.address, "--population", str(spec_path), *extra), tmp_path) for _ in range(2)]
        supervisors.extend(twins)
        for t in twins:
            t.start()
        if durable:
            peer = await agg.accept()
            await _handshake(peer, N)
            loop = asyncio.get_running_loop()
            end = loop.time() + DEADLINE_S
            while not (refused := [t for t in twins if t.lives[0].poll() is not None]):
                assert loop.time() < end, "neither twin was refused"
                await asyncio.sleep(0.1)
            assert len(refused) == 1
            log = refused[0].log()
            assert refused[0].lives[0].returncode == 2, log
            assert "another live process holds users" in log and "Traceback" not in log, log
            await _close(peer)
            return
        a, b = await agg.accept(), await agg.accept()
        await _handshake(a, N)
        await _handshake(b, N)
        r1, _ = await _ask(a, _constant(BIT0), N)
        r2, refused2 = await _ask(b, BIT0, N)
        await _close(a)
        await _close(b)
        for t in twins:
            await t.wait_exit()
    attack = _agreement(r1, r2, refused2, _x0(spec))
    _report("two live processes, one claim (in memory)", attack.rate)
    check_independent(attack.rate)


# -- the broken variant: nonces restart at 0 under the fixed key -----------------------------


async def test_the_check_catches_nonces_restarting_under_a_fixed_key(tmp_path: Path, supervisors: list[Supervisor]) -> None:
    """The old behaviour, reproduced: the same seeded spec, in memory, with the salt forced empty
    (what the experiment may vouch for, wrongly here, since the process is restarted). Every
    user's second life draws the first life's coin: r1 ⊕ r2 = x0 for all, and the check fails."""
    spec = population(n=N, budget=2.0, seed=101)
    config = ClientConfig(population=spec, key_salt=b"")
    async with HostileAggregator() as agg:
        argv = [sys.executable, "-m", "ldp.wire.client", "--connect", agg.address, "--config", "-", "--connect-timeout", "30"]
        sup = Supervisor(argv, tmp_path, stdin=config.dumps().encode())
        supervisors.append(sup)
        attack = await restart_attack(agg, sup, _x0(spec))
    _report("broken: salt forced empty, in memory", attack.rate)
    assert attack.rate == 1.0
    with pytest.raises(AssertionError, match="agrees with x0"):
        check_independent(attack.rate)



# -- the command line: durable by default, in memory only by name (I2) ------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--ray"], "pass --budget-restarts-in-memory to accept that their budget restarts with every process"),
        (["--budget-restarts-in-memory", "--ledger", "{tmp}/l.sqlite"], "not allowed with argument"),
    ],
    ids=["ray", "both"],
)
def test_the_ledger_choice_is_one_clear_line(tmp_path: Path, extra: list[str], message: str) -> None:
    data, schema, _ = _write_data(tmp_path, 10)
    argv = _clients("127.0.0.1:9", "--data", str(data), "--schema", str(schema), "--budget", "1", *[a.replace("{tmp}", str(tmp_path)) for a in extra])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_one_load_ledgers_with_a_key_file_ask_for_memory_by_name(tmp_path: Path) -> None:
    seal = tmp_path / "seal.key"
    seal.write_bytes(new_seal_key())
    argv = _clients("127.0.0.1:9", "--seal-key-file", str(seal), "--key-file", str(_key_file(tmp_path)), "--one-load-ledgers")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 2 and "pass --budget-restarts-in-memory too" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_the_help_names_the_state_directory_and_what_memory_costs() -> None:
    out = subprocess.run([*CLI, "clients", "--help"], capture_output=True, text=True, timeout=PROCESS_WAIT_S).stdout
    assert "$LDP_STATE_DIR" in out and "budget restarts with every client process" in " ".join(out.split())
