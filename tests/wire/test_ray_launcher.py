"""Client processes placed by Ray (``ldp.wire.ray_launcher``) on a local Ray cluster (2 nodes, 1 CPU each).

The same experiment gives bit-identical reports, refusals and ledgers through Ray-placed clients
as through ``launch_local``, and the two clients land on the two nodes; a client that fails, is
killed or cannot be placed is reported in one line and nothing hangs; Ctrl-C leaves no client;
TLS (token mode and mTLS) works through Ray, and a client with another CA refuses the aggregator;
`ldp-sim clients --ray` serves an aggregator run elsewhere; without Ray the error says how to
install it. Ray's startup (about 2.5 s on an idle 2-core
machine, far more on a loaded one) is paid once for the module.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldp.core.errors import LDPError, ParameterError
from ldp.local.messages import SessionKind, Status
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session
from ldp.wire.launcher import launch_local
from tests.waits import PROCESS_WAIT_S
from tests.wire.wire_helpers import assert_identical, population, rr, scripted_sessions

ray = pytest.importorskip("ray")  # the `test` extra installs it; skipped only where it is absent

from ldp.wire.ray_launcher import import_ray, launch_ray, ray_oracle_factory  # noqa: E402

# One Ray cluster at a time on this machine (see tests/cli/test_tls_commands.py): one xdist unit.
pytestmark = [pytest.mark.timeout(2 * int(PROCESS_WAIT_S)), pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module", autouse=True)
def ray_cluster() -> Any:
    """A local Ray cluster of two nodes (two raylets on this machine) with 1 CPU each, for this
    module; each client task asks for 1 CPU, so two clients run on two nodes."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False, logging_level="WARNING")
    yield cluster.address  # the cluster's GCS address, for other drivers (--ray-address)
    ray.shutdown()
    cluster.shutdown()


async def test_ray_placed_clients_are_bit_identical_to_local_processes() -> None:
    spec = population(n=3001)
    async with launch_local(spec, processes=2) as oracle:
        local = await scripted_sessions(oracle)
    # A loaded machine is slow, not broken: the tasks get a generous while to end after Close.
    async with launch_ray(spec, processes=2, stop_timeout_s=PROCESS_WAIT_S) as oracle:
        assert [s.key for s in oracle.shards] == ["0/2", "1/2"]
        placed = await scripted_sessions(oracle)
        clients = oracle.clients
    # The script exercises refusals, several dtypes and a ledger (else the comparison is weak).
    statuses = np.concatenate([r.status for r in placed.reports])
    assert (statuses == Status.REFUSED).any() and (statuses == Status.ANSWERED).any()
    assert_identical(local, placed)
    # After the block, every client ended by the aggregator's Close (exit 0), each in a Ray task.
    assert [c.poll() for c in clients] == [0, 0]
    assert len({c.node for c in clients}) == 2  # SPREAD: one client on each node of the cluster
    assert all("Ray task, pid" in c.describe() and "exited with code 0" in c.describe() for c in clients)


async def test_ray_factory_serves_many_populations_with_one_set_of_tasks() -> None:
    request = rr(0.5)
    got, want = [], []
    async with ray_oracle_factory(2) as factory:
        for seed in (1, 2):
            spec = population(n=800, seed=seed)
            async with factory(spec) as oracle:
                (reports,) = await Session(oracle, SessionKind.NON_INTERACTIVE).round([Request.of(range(800), request)])
                got.append(reports.values.tobytes())
            (ref,) = await Session(InProcessLROracle(spec), SessionKind.NON_INTERACTIVE).round([Request.of(range(800), request)])
            want.append(ref.values.tobytes())
        assert factory.populations == 2
        assert factory.oracle is not None and [c.poll() for c in factory.oracle.clients] == [None, None]  # the same two tasks, still running
    assert got == want and got[0] != got[1]


async def test_a_client_turned_away_fails_the_launch_with_its_exit_code_and_reason() -> None:
    # (No clock assert: "exited ... before it was ready" says the exit, not the ready timeout, ended it.)
    with pytest.raises(LDPError, match=r"client 1/2 .*exited with code 2 \(turned away\) before it was ready: .*protocol version"):
        async with launch_ray(population(n=100), processes=2, extra_args={"1/2": ["--protocol-version", "99"]}):
            pass


async def test_a_client_killed_while_the_experiment_runs_is_named_and_its_users_are_missing() -> None:
    lines: list[str] = []
    async with launch_ray(population(n=400), processes=2, on_client_exit=lines.append) as oracle:
        ray.cancel(oracle.clients[1].ref, force=True)  # kills the Ray worker; its child follows its parent
        deadline = time.monotonic() + PROCESS_WAIT_S
        while not lines and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert lines == ["ldp: client 1/2 (Ray task) ended: its Ray task was cancelled while the experiment ran"]
        (reports,) = await Session(oracle, SessionKind.INTERACTIVE, deadline_s=PROCESS_WAIT_S).round([Request.of(range(400), rr(0.1))])
        assert (reports.status[:200] == Status.ANSWERED).all() and (reports.status[200:] == Status.MISSING).all()


async def test_tasks_ray_cannot_place_fail_the_launch_at_the_deadline() -> None:
    with pytest.raises(LDPError, match=r"not ready after 2 s .*each task asks Ray for 64 CPU\(s\)"):
        async with launch_ray(population(n=100), processes=2, num_cpus=64, ready_timeout_s=2.0, stop_timeout_s=0.5):
            pass
    # The pending tasks were cancelled (no clock assert: the module's timeout catches a hang), and
    # the cluster's 2 CPUs are free again: a normal launch still works
    async with launch_ray(population(n=100), processes=2) as oracle:
        assert oracle.user_count == 100


async def test_tls_token_and_mtls_through_ray(tmp_path: Path) -> None:
    from ldp.wire.tls import issue, make_ca, new_token

    pki = tmp_path / "pki"
    make_ca(pki)
    issue(pki, "server", "aggregator", hosts=("127.0.0.1",))
    token = new_token(pki)
    spec = population(n=500)
    async with launch_ray(spec, processes=2, tls=str(pki), token_file=str(token)) as oracle:
        assert oracle.aggregator.tls is not None
        (reports,) = await Session(oracle, SessionKind.NON_INTERACTIVE).round([Request.of(range(500), rr(0.5))])
    (want,) = await Session(InProcessLROracle(spec), SessionKind.NON_INTERACTIVE).round([Request.of(range(500), rr(0.5))])
    assert reports.values.tobytes() == want.values.tobytes()
    # mTLS: every task presents the client certificate client-ray.pem, and the aggregator names it.
    issue(pki, "client", "ray")
    async with launch_ray(spec, processes=1, tls=str(pki), client_name="ray") as oracle:
        assert oracle.aggregator.tls is not None and oracle.aggregator.tls.require_client_cert
        assert any("connected (ray, " in event for event in oracle.aggregator.events), oracle.aggregator.events
    # Broken variant: a client whose ca.pem is another CA's refuses the aggregator (it cannot verify it).
    other = tmp_path / "other"
    make_ca(other)
    (other / "token").write_bytes(token.read_bytes())
    (other / "token").chmod(0o600)
    import ldp.wire.ray_launcher as rl

    real = rl._tls_payload

    def wrong_ca(tls: Any, token_file: Any, client_name: Any) -> Any:
        files, args = real(tls, token_file, client_name)
        return dict(files, **{"ca.pem": (other / "ca.pem").read_bytes()}), args

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rl, "_tls_payload", wrong_ca)
        with pytest.raises(LDPError, match=r"client 0/1 .*exited with code 1 .*cannot reach the aggregator.*not signed by this client's ca.pem"):
            async with launch_ray(spec, processes=1, tls=str(pki), token_file=str(token), connect_timeout_s=1.0):
                pass


def test_without_ray_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` then raises ImportError, as where it is absent
    with pytest.raises(ParameterError, match=r"^the Ray launcher needs Ray, which is not installed here: pip install 'ldp-sim\[ray\]'$"):
        import_ray()
    with pytest.raises(ParameterError, match=r"pip install 'ldp-sim\[ray\]'"):  # refused before anything starts
        asyncio.run(launch_ray(population(n=10)).__aenter__())


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from ldp.cli.main import main

    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_ldp_sim_run_with_the_ray_launcher_prints_the_same_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["run", "rr-demo", "--users", "4000", "--processes", "2", "--seed", "3"]
    # the reference in process (cheaper than local processes; tests/wire/test_cli.py shows those print the same)
    code, local, _ = _cli(base + ["--transport", "inprocess", "--out", str(tmp_path / "local")], capsys)
    assert code == 0
    code, placed, err = _cli(base + ["--launcher", "ray", "--out", str(tmp_path / "ray")], capsys)  # the module's Ray cluster
    assert code == 0, err
    assert (tmp_path / "ray" / "estimates.csv").read_text() == (tmp_path / "local" / "estimates.csv").read_text()
    table = [line for line in placed.splitlines() if "│" in line]
    assert len(table) == 4 and table == [line for line in local.splitlines() if "│" in line]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--ray-address", "auto"], "--ray-address applies to --launcher ray only"),
        (["--launcher", "ray", "--transport", "inprocess"], "--launcher ray places client processes: it needs --transport grpc"),
        (["--launcher", "ray", "--token-file", "pyproject.toml"], "--token-file and --client-name need --tls DIR"),
    ],
)
def test_ldp_sim_run_refuses_ray_options_where_they_do_not_apply(extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(["run", "rr-demo", "--users", "100", *extra], capsys)
    assert code == 2 and err.strip() == f"ldp-sim: error: {message}"


def test_ldp_sim_run_without_ray_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` then raises ImportError
    code, _, err = _cli(["run", "rr-demo", "--users", "100", "--launcher", "ray"], capsys)
    assert code == 2 and err.strip() == "ldp-sim: error: the Ray launcher needs Ray, which is not installed here: pip install 'ldp-sim[ray]'"


def _all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _is_our_client(pid: int) -> bool:
    """A client process placed by this module's cluster (its raylet is a child of this process;
    other client processes on the machine are not ours)."""
    from tests.wire.proc_helpers import children_of

    try:
        if b"ldp.wire.client" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return False
        env = dict(v.partition(b"=")[::2] for v in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if v)
        return int(env.get(b"RAY_RAYLET_PID", b"0")) in children_of(os.getpid())
    except (OSError, ValueError):
        return False


def test_ctrl_c_stops_a_run_on_an_existing_ray_cluster_and_leaves_no_client(ray_cluster: str, tmp_path: Path) -> None:
    """Ctrl-C of `ldp-sim run --launcher ray --ray-address ADDR` (a second driver on the module's
    cluster): it exits 130 in one line, its client tasks are stopped and no client process is left
    (the cluster itself, not the run's, stays up)."""
    import signal
    import subprocess

    from tests.wire.proc_helpers import PYTHON, alive, reap, wait_exit

    before = {p for p in _all_pids() if _is_our_client(p)}
    proc = subprocess.Popen(
        [PYTHON, "-m", "ldp.cli.main", "run", "separation", "--quick", "--processes", "2", "--launcher", "ray", "--ray-address", ray_cluster, "--out", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        end = time.monotonic() + PROCESS_WAIT_S
        clients: set[int] = set()
        while len(clients) < 2:
            assert time.monotonic() < end and proc.poll() is None, "the Ray-placed clients did not start"
            time.sleep(0.2)
            clients = {p for p in _all_pids() if _is_our_client(p)} - before
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        code = wait_exit(proc, PROCESS_WAIT_S)
        err = proc.stderr.read().decode() if proc.stderr else ""
        assert code == 130 and "ldp-sim: interrupted" in err and "Traceback" not in err, err
        deadline = time.monotonic() + PROCESS_WAIT_S
        while any(alive(p) for p in clients) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(p) for p in clients), "a client outlived the run"
    finally:
        reap(proc)


async def test_ldp_sim_clients_with_ray_serves_an_aggregator_run_elsewhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The users' side places its clients with Ray (`ldp-sim clients --ray`) for an aggregator it
    does not run (here one in this process, as `ldp-sim serve` would be): every user answers as
    in the in-process run, under its own life's key, and the clients exit 0 on Close."""
    import json

    from ldp.cli.main import main
    from ldp.wire.aggregator import GrpcAggregator, GrpcLROracle

    spec = population(n=600)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec.to_json()))
    aggregator = GrpcAggregator(spec.description(), "127.0.0.1:0")
    await aggregator.start()
    clients = asyncio.ensure_future(asyncio.to_thread(main, ["clients", "--connect", aggregator.address, "--population", str(path), "--processes", "2", "--ray"]))
    try:
        await aggregator.wait_for_shards(60)
        assert sorted(s.key for s in aggregator.shards) == ["0/1.0/2", "0/1.1/2"]
        (reports,) = await Session(GrpcLROracle(aggregator), SessionKind.NON_INTERACTIVE).round([Request.of(range(600), rr(0.5))])
    finally:
        await aggregator.close("the experiment is over")
    assert await asyncio.wait_for(clients, PROCESS_WAIT_S) == 0
    (want,) = await Session(InProcessLROracle(spec), SessionKind.NON_INTERACTIVE).round([Request.of(range(600), rr(0.5))])
    # Everyone answered, as in process; but with other coins: clients a user starts by hand draw
    # under a fresh salt in every process life (invariant I1), never the seeded key's coins
    # (identical reports of 600 users by chance: probability < 0.6^600).
    assert (reports.status == want.status).all() and reports.values.tobytes() != want.values.tobytes()
    # A durable ledger cannot follow clients Ray may place on any node: refused in one line.
    code, _, err = _cli(["clients", "--connect", aggregator.address, "--population", str(path), "--ray", "--ledger", str(tmp_path / "l.sqlite")], capsys)
    assert code == 2 and "a durable ledger (--ledger) cannot follow clients that Ray places on any node" in err


def test_a_task_that_died_is_named_by_its_own_last_line_not_grpcs() -> None:
    """gRPC's C core may log after the client's last line (a TLS handshake failure is logged while
    the channel closes): the reason given is the client's own last line. Broken variant: the last
    line of the log, which here is gRPC's."""
    import types

    import ldp.wire.ray_launcher as rl

    ours = "ldp client 0/1: cannot reach the aggregator at 127.0.0.1:1 after 1 s: its certificate is not signed by this client's ca.pem; giving up"
    grpc_line = "I1126 18:13:58.118072 23792 ssl_transport_security.cc:2563] Handshake failed with error SSL_ERROR_SSL"
    dead = types.SimpleNamespace(poll=lambda: 1, log_tail=lambda: f"starting\n{ours}\n{grpc_line}", describe=lambda: "client 0/1 exited with code 1", ran=True)
    why = rl._task_died([dead])  # type: ignore[list-item]
    assert why is not None and why.endswith(ours) and grpc_line not in why
