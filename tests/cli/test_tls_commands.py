"""TLS and enrolment through the commands they are documented on (docs/security.md, I4).

Real processes on loopback: ``ldp-sim certs`` makes the files, ``ldp-sim serve --tls DIR
[--token-file F]`` is the aggregator, ``ldp-sim clients --tls DIR ...`` the users' side. Every
wait has a deadline. For each server mode (mTLS, token, plaintext) one ``serve`` stays up while
impostors are refused, then an enrolled client is admitted and the run completes; both sides
say why a client was refused, and the tests assert on the lines they print:

==================  =============================================  ==============================================
client              refused by an mTLS / token server: the client  ... and the server (stderr / events on stdout)
==================  =============================================  ==============================================
plaintext           "it serves TLS, and this client speaks         "refused a connection: a client that does not
                    plaintext"                                     speak TLS [WRONG_VERSION_NUMBER]"
token, mTLS server  "presented none (token mode)"                  "a client presented no certificate"
another CA's cert   "did not accept this client's certificate" /   "not signed by this aggregator's CA" /
                    token server: "no enrolment token"             "rejected a client at ...: no enrolment token"
another CA's ca.pem "not signed by this client's ca.pem"           (nothing: the client hung up; no TLS error)
wrong token         "not enrolled: a wrong enrolment token"        "rejected a client at ...: ... wrong ..."
empty, 64 KiB token ``clients`` refuses the file (exit 2); a raw     empty: "rejected a client at ...: ... wrong
                    gRPC client sending one is refused             ..."; 64 KiB: gRPC refuses the call before
                    (64 KiB: RESOURCE_EXHAUSTED from gRPC)         any handler (metadata > 16 KiB): no line
replayed handshake  (a recorded enrolled handshake, resent)        "refused a connection: ... [BAD_DECRYPT]"
==================  =============================================  ==============================================

A replayed handshake is meaningful for TLS 1.3 as gRPC runs it: there is no 0-RTT (early data is
off), so nothing a replay carries is processed before the handshake completes, and it cannot
complete: the server's fresh random and key share give new handshake keys, under which the
recorded client Certificate/CertificateVerify/Finished do not decrypt.

Broken variant: ``serve`` building its aggregator without TLS (``ldp.cli.serve.serve_tls`` returning None, the
bug of issue 23) admits the plaintext client, and ``_assert_plaintext_client_refused`` is the
assertion that fails (``test_the_broken_variant_serve_without_tls_is_caught``).
"""

from __future__ import annotations

import os
import re
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from ldp.wire.v1 import aggregator_pb2 as pb
from tests.waits import PROCESS_WAIT_S
from tests.wire.proc_helpers import PYTHON, reap, wait_exit

# One Ray cluster at a time on this machine: two at once (this file's `run --launcher ray` and
# tests/wire/test_ray_launcher.py's cluster, on two xdist workers) once lost a raylet
# (NodeDiedError); both files are one unit of the loadgroup scheduler (tests/conftest.py).
pytestmark = [pytest.mark.timeout(2 * int(PROCESS_WAIT_S)), pytest.mark.xdist_group("ray")]  # a hang guard, above the waits it holds

_SCRIPT = Path(sys.executable).parent / "ldp-sim"
LDP_SIM = [str(_SCRIPT)] if _SCRIPT.exists() else [PYTHON, "-m", "ldp.cli.main"]
USERS = 40
DEADLINE_S = PROCESS_WAIT_S  # any single wait on a process: a hang guard, never a speed claim
REFUSE_TIMEOUT = ["--connect-timeout", "2"]  # impostors give up after 2 s of refused handshakes
# The broken variant: the real command, with serve's TLS dropped as in issue 23.
BROKEN_SERVE = [PYTHON, "-c", "import sys, ldp.cli.main as m, ldp.cli.serve as s; s.serve_tls = lambda ns: None; sys.exit(m.main(sys.argv[1:]))"]


@dataclass(frozen=True)
class Files:
    root: Path
    pki: Path  # ldp-sim certs: CA, server, client-1, token
    other: Path  # another CA's full set (trusts only its own CA)
    mixed: Path  # our ca.pem with another CA's client certificate: an impostor that trusts our server
    wrong: Path  # a well-formed token that is not ours
    empty: Path
    huge: Path  # 64 KiB of token characters
    spec: Path


def _sh(args: list[str], cwd: Path, timeout_s: float = DEADLINE_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LDP_SIM, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout_s)


def _secret(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    root = tmp_path_factory.mktemp("tls-commands")
    for name in ("pki", "other"):
        done = _sh(["certs", str(root / name), "--clients", "1", "--token"], root)
        assert done.returncode == 0 and "wrote" in done.stdout, done.stderr
    mixed = root / "mixed"
    mixed.mkdir(mode=0o700)
    shutil.copy2(root / "pki" / "ca.pem", mixed / "ca.pem")
    for suffix in ("pem", "key"):
        shutil.copy2(root / "other" / f"client-1.{suffix}", mixed / f"client-1.{suffix}")
    spec = root / "spec.json"
    done = _sh(["population", "rr-demo", "--users", str(USERS), "--seed", "1", "--out", str(spec)], root)
    assert done.returncode == 0, done.stderr
    return Files(
        root, root / "pki", root / "other", mixed,
        _secret(root / "wrong.token", (root / "other" / "token").read_text()),
        _secret(root / "empty.token", ""),
        _secret(root / "huge.token", "A" * 65536 + "\n"),
        spec,
    )


class Server:
    """One ``ldp-sim serve`` (or the broken variant) with its stdout and stderr in files."""

    def __init__(self, files: Files, mode: list[str], name: str, command: list[str] = LDP_SIM) -> None:
        self.out_path, self.err_path = files.root / f"{name}.out", files.root / f"{name}.err"
        args = ["serve", "--bind", "127.0.0.1:0", "rr-demo", "--users", str(USERS), "--seed", "1", "--wait", str(DEADLINE_S),
                "--out", str(files.root / f"{name}-results"), *mode]  # fmt: skip
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen([*command, *args], cwd=files.root, stdout=out, stderr=err)
        m = re.search(r"listening on (127\.0\.0\.1:\d+)", self.wait_for("listening on"))
        assert m, self.out()
        self.address = m.group(1)

    def out(self) -> str:
        return self.out_path.read_text(errors="replace")

    def err(self) -> str:
        return self.err_path.read_text(errors="replace")

    def wait_for(self, needle: str, stream: str = "out", timeout_s: float = DEADLINE_S) -> str:
        end = time.monotonic() + timeout_s
        while True:
            text = self.out() if stream == "out" else self.err()
            if needle in text:
                return text
            assert self.proc.poll() is None or needle in (self.out() if stream == "out" else self.err()), (
                f"serve exited ({self.proc.returncode}) before printing {needle!r}: {self.out()} {self.err()}"
            )
            assert time.monotonic() < end, f"serve printed no {needle!r} within {timeout_s} s: {self.out()} {self.err()}"
            time.sleep(0.1)

    def finish(self) -> int:
        return wait_exit(self.proc, DEADLINE_S)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    reap(*(s.proc for s in started))


def _clients(files: Files, address: str, *tls: str, shard: str = "0/1", timeout: list[str] = REFUSE_TIMEOUT) -> subprocess.Popen[str]:
    args = ["clients", "--connect", address, "--population", str(files.spec), "--shard", shard, *timeout, *tls]
    return subprocess.Popen([*LDP_SIM, *args], cwd=files.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _ended(proc: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"{proc.args!r} did not exit within {DEADLINE_S} s: {out}") from None
    assert "Traceback" not in out, out
    return proc.returncode, out


def _refused(files: Files, address: str, cases: dict[str, list[str]]) -> dict[str, tuple[int, str]]:
    """Start every impostor at once (they are refused before any claim), then collect them."""
    procs = {name: _clients(files, address, *tls) for name, tls in cases.items()}
    return {name: _ended(p) for name, p in procs.items()}


def _assert_plaintext_client_refused(files: Files, server: Server) -> None:
    """The check the broken variant fails: a plaintext client gets nothing from ``serve --tls``."""
    code, out = _ended(_clients(files, server.address))
    assert "connected" not in server.out(), f"a plaintext client was admitted by serve --tls: {server.out()}"
    assert code == 1 and "it serves TLS, and this client speaks plaintext" in out, out
    server.wait_for("refused a connection: a client that does not speak TLS", "err")


def _admitted(files: Files, server: Server, *tls: str) -> None:
    code, out = _ended(_clients(files, server.address, *tls, timeout=["--connect-timeout", str(DEADLINE_S)]))
    assert code == 0 and "the experiment is over" in out, out
    assert server.finish() == 0, server.err()
    assert "done in" in server.out(), server.out()


# --- the matrix ------------------------------------------------------------------------------


def test_mtls_serve_admits_the_enrolled_client_and_refuses_every_impostor(files: Files, servers: list[Server]) -> None:
    server = Server(files, ["--tls", str(files.pki)], "mtls")
    servers.append(server)
    assert "over TLS, admitting clients with a certificate from its CA" in server.out()
    _assert_plaintext_client_refused(files, server)
    got = _refused(
        files, server.address,
        {
            "token": ["--tls", str(files.pki), "--token-file", str(files.pki / "token")],
            "other CA's certificate": ["--tls", str(files.mixed), "--client-name", "1"],
            "another CA entirely": ["--tls", str(files.other), "--client-name", "1"],
        },
    )  # fmt: skip
    want = {
        "token": "this client presented none (token mode)",
        "other CA's certificate": "it did not accept this client's certificate",
        "another CA entirely": "the aggregator's certificate is not signed by this client's ca.pem",
    }
    for name, (code, out) in got.items():
        assert code == 1 and want[name] in out and "cannot reach the aggregator" in out, (name, out)
        assert out.count("Handshake failed") == 0, out  # gRPC's raw line per retry stays quiet on the clients
    server.wait_for("refused a connection: a client presented no certificate; this aggregator admits only clients with a certificate", "err")
    server.wait_for("refused a connection: a client's certificate is not signed by this aggregator's CA", "err")
    assert "Handshake failed" not in server.err(), server.err()  # translated, one line per reason
    assert "connected" not in server.out() and "rejected a client" not in server.out(), server.out()  # no handler reached
    _admitted(files, server, "--tls", str(files.pki), "--client-name", "1")
    assert "shard 0/1 connected (1, users 0..39)" in server.out()  # named by its certificate's CN


def test_token_serve_admits_the_token_and_refuses_wrong_empty_and_huge_tokens(files: Files, servers: list[Server]) -> None:
    server = Server(files, ["--tls", str(files.pki), "--token-file", str(files.pki / "token")], "token")
    servers.append(server)
    assert "over TLS, admitting clients with the enrolment token" in server.out()
    _assert_plaintext_client_refused(files, server)
    got = _refused(
        files, server.address,
        {
            "wrong token": ["--tls", str(files.pki), "--token-file", str(files.wrong)],
            "certificate, no token": ["--tls", str(files.pki), "--client-name", "1"],
            "another CA entirely": ["--tls", str(files.other), "--token-file", str(files.pki / "token")],
        },
    )  # fmt: skip
    code, out = got["wrong token"]
    assert code == 2 and "turned away by the aggregator: not enrolled: a wrong enrolment token" in out, out
    code, out = got["certificate, no token"]
    assert code == 2 and "not enrolled: no enrolment token" in out, out
    code, out = got["another CA entirely"]
    assert code == 1 and "not signed by this client's ca.pem" in out, out
    server.wait_for("rejected a client at ipv4:127.0.0.1:")
    events = [line for line in server.out().splitlines() if line.startswith("rejected a client")]
    assert sum("not enrolled: a wrong enrolment token" in e for e in events) == 1, events
    assert sum("not enrolled: no enrolment token" in e for e in events) == 1, events
    assert all(str((files.pki / "token").read_text().strip()) not in e for e in events)  # never the token
    # An empty or a 64 KiB token file: the command refuses it in one line before connecting...
    for path, why in ((files.empty, "is empty"), (files.huge, "holds 65536 characters")):
        done = _sh(["clients", "--connect", server.address, "--population", str(files.spec), "--tls", str(files.pki), "--token-file", str(path)], files.root)
        assert done.returncode == 2 and done.stderr.startswith("ldp-sim: error: the token file") and why in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    # ...and a raw gRPC client that sends one anyway is refused: an empty token by serve, which
    # says why; a 64 KiB one by gRPC itself (metadata past its 16 KiB limit), before any handler.
    assert _raw_hello(server.address, files.pki, "Bearer ") == "not enrolled: a wrong enrolment token (not the one in this aggregator's --token-file)"
    assert _raw_hello(server.address, files.pki, "Bearer " + "A" * 65536).startswith("RESOURCE_EXHAUSTED: received metadata size exceeds")
    end = time.monotonic() + DEADLINE_S
    while sum("not enrolled: a wrong enrolment token" in line for line in server.out().splitlines() if line.startswith("rejected a client")) < 2:
        assert time.monotonic() < end, server.out()
        time.sleep(0.1)
    assert "connected" not in server.out(), server.out()
    _admitted(files, server, "--tls", str(files.pki), "--token-file", str(files.pki / "token"))


def _raw_hello(address: str, pki: Path, authorization: str) -> str:
    """A hand-made client (TLS, our CA, no certificate) sending ``authorization`` and Hello; the
    Close reason it gets back, or the gRPC status when the call itself is refused."""
    credentials = grpc.ssl_channel_credentials(root_certificates=(pki / "ca.pem").read_bytes())
    with grpc.secure_channel(address, credentials) as channel:
        connect = channel.stream_stream(
            "/ldp.wire.v1.Aggregator/Connect", request_serializer=pb.ClientMessage.SerializeToString, response_deserializer=pb.ServerMessage.FromString
        )
        hello = pb.ClientMessage(hello=pb.Hello(protocol_version=3, shard_index=0, shard_count=1, sub_count=1, client_name="raw"))
        try:
            for message in connect(iter([hello]), metadata=(("authorization", authorization),), timeout=DEADLINE_S / 2):
                return message.close.reason if message.WhichOneof("kind") == "close" else f"got {message.WhichOneof('kind')}"
        except grpc.RpcError as exc:
            return f"{exc.code().name}: {exc.details()}"  # type: ignore[attr-defined]
    return "the stream ended with no message"


def test_plaintext_serve_admits_plaintext_and_tls_clients_say_it_does_not_speak_tls(files: Files, servers: list[Server]) -> None:
    server = Server(files, [], "plain")
    servers.append(server)
    assert "over TLS" not in server.out()
    got = _refused(
        files, server.address,
        {"mtls": ["--tls", str(files.pki), "--client-name", "1"], "token": ["--tls", str(files.pki), "--token-file", str(files.pki / "token")]},
    )  # fmt: skip
    for name, (code, out) in got.items():
        assert code == 1 and "the aggregator does not speak TLS (started without --tls?)" in out, (name, out)
        assert "nothing listens" not in out and "WRONG_VERSION_NUMBER" in out and out.count("\n") <= 3, out  # one line, not ~30
    _admitted(files, server)


class RecordingProxy:
    """Forwards one TCP connection to ``target`` and records what the client sent."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.sent = bytearray()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.listener.settimeout(DEADLINE_S)
        try:
            client, _ = self.listener.accept()
        except OSError:
            return
        with client, socket.create_connection(self.target, timeout=DEADLINE_S) as upstream:
            while not self.stop.is_set():
                ready, _, _ = select.select([client, upstream], [], [], 0.2)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is client:
                        with self.lock:
                            self.sent.extend(data)
                        upstream.sendall(data)
                    else:
                        client.sendall(data)

    def recorded(self) -> bytes:
        with self.lock:
            return bytes(self.sent)

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        self.thread.join(timeout=5)


def test_a_replayed_mtls_handshake_is_refused_and_serve_says_why(files: Files, servers: list[Server]) -> None:
    server = Server(files, ["--tls", str(files.pki)], "replay")
    servers.append(server)
    proxy = RecordingProxy(server.address)
    first = _clients(files, proxy.address, "--tls", str(files.pki), "--client-name", "1", shard="0/2", timeout=["--connect-timeout", str(DEADLINE_S)])
    try:
        server.wait_for("shard 0/2 connected (1, users 0..19)")
        recorded = proxy.recorded()  # ClientHello, the client's certificate flight, Finished, then application data
        assert len(recorded) > 1000
        host, port = server.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=DEADLINE_S) as replay:
            replay.sendall(recorded)
            answered = b""
            while chunk := replay.recv(65536):  # the server hangs up (bounded by the socket timeout)
                answered += chunk
        server.wait_for("refused a connection: a handshake whose records do not decrypt (replayed or tampered with?) [BAD_DECRYPT]", "err")
        assert server.out().count("connected (") == 1 and "rejected a client" not in server.out(), server.out()
        second = _clients(files, server.address, "--tls", str(files.pki), "--client-name", "1", shard="1/2", timeout=["--connect-timeout", str(DEADLINE_S)])
        assert _ended(second)[0] == 0
        assert _ended(first)[0] == 0
        assert server.finish() == 0, server.err()
        assert server.out().count("connected (") == 2  # the two honest shards, never the replay
    finally:
        proxy.close()
        if first.poll() is None:
            first.kill()
        first.communicate(timeout=DEADLINE_S)


# --- options that make no sense alone ----------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "--bind", "127.0.0.1:0", "rr-demo", "--token-file", "{token}"], "--token-file needs --tls DIR"),
        (["clients", "--connect", "127.0.0.1:9", "--population", "{spec}", "--token-file", "{token}"], "need --tls DIR"),
        (["clients", "--connect", "127.0.0.1:9", "--population", "{spec}", "--client-name", "1"], "need --tls DIR"),
        (["clients", "--connect", "127.0.0.1:9", "--population", "{spec}", "--tls", "{pki}"], "--tls needs --client-name NAME"),
        (["run", "rr-demo", "--users", "100", "--launcher", "ray", "--token-file", "{token}"], "--token-file and --client-name need --tls DIR"),
        (["run", "rr-demo", "--users", "100", "--launcher", "ray", "--client-name", "1"], "--token-file and --client-name need --tls DIR"),
        (["run", "rr-demo", "--users", "100", "--launcher", "ray", "--tls", "{pki}"], "needs --token-file F (token mode) or --client-name NAME"),
        (["run", "rr-demo", "--users", "100", "--launcher", "ray", "--tls", "{pki}", "--token-file", "{token}", "--client-name", "1"], "not both"),
        (["run", "rr-demo", "--users", "100", "--tls", "{pki}", "--token-file", "{token}"], "--tls applies to --launcher ray only"),
        (["serve", "--bind", "127.0.0.1:0", "rr-demo", "--tls", "{other}", "--token-file", "{empty}"], "is empty"),
    ],
)
def test_options_that_make_no_sense_alone_are_refused_in_one_line(files: Files, args: list[str], message: str) -> None:
    values = {"token": files.pki / "token", "spec": files.spec, "pki": files.pki, "other": files.other, "empty": files.empty}
    done = _sh([a.format(**values) for a in args], files.root)
    assert done.returncode == 2 and done.stderr.startswith("ldp-sim: error: ") and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr and "listening" not in done.stdout


def test_serve_bind_mistakes_are_one_line(files: Files) -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        for bind, why in ((f"127.0.0.1:{port}", f"port {port} is in use"), ("192.0.2.1:5000", "192.0.2.1 is not an address of this machine")):
            done = _sh(["serve", "--bind", bind, "rr-demo", "--users", "100", "--wait", "1", "--tls", str(files.pki)], files.root)
            assert done.returncode == 2 and done.stderr.startswith(f"ldp-sim: error: cannot bind the aggregator to {bind}: {why}"), done.stderr
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # not even gRPC's own "Failed to add port" line


# --- the broken variant ----------------------------------------------------------------------


def test_the_broken_variant_serve_without_tls_is_caught(files: Files, servers: list[Server]) -> None:
    """``serve --tls`` building its aggregator without TLS (issue 23): the plaintext client is
    admitted, and the assertion that fails is the matrix's own check."""
    server = Server(files, ["--tls", str(files.pki)], "broken", command=BROKEN_SERVE)
    servers.append(server)
    with pytest.raises(AssertionError, match="a plaintext client was admitted by serve --tls"):
        _assert_plaintext_client_refused(files, server)


# --- run --launcher ray --tls ------------------------------------------------------------------


@pytest.mark.skipif(os.environ.get("LDP_SKIP_RAY") == "1", reason="LDP_SKIP_RAY=1")
def test_run_with_ray_over_tls_completes(files: Files) -> None:
    pytest.importorskip("ray")
    done = _sh(
        ["run", "rr-demo", "--users", "200", "--processes", "1", "--out", str(files.root / "ray-results"), "--launcher", "ray",
         "--tls", str(files.pki), "--token-file", str(files.pki / "token")],
        files.root,
    )  # fmt: skip
    assert done.returncode == 0 and "done in" in done.stdout, done.stdout + done.stderr
