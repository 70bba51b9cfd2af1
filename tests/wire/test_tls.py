"""TLS and enrolment (ldp.wire.tls): only enrolled clients get through, impostors on either side
are refused, and `ldp-sim certs` writes what each machine needs.

Over loopback with a tiny grpc.aio service defined here (generic handlers, bytes in and out, a
bidirectional stream like the aggregator's Connect). Every refusal test is a deliberately broken
variant — a certificate from another CA, no certificate, plaintext, a wrong or missing token, a
certificate of the wrong role — that the checks must catch; every call has an explicit deadline.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ldp.cli import certs
from ldp.core.errors import ParameterError
from ldp.wire import tls

pytestmark = pytest.mark.timeout(30)

DEADLINE_S = 3.0
METHOD = "/ldp.test.Echo/Connect"


def _quiet(_: str) -> None:
    pass


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, the aggregator's certificate for 127.0.0.1 and localhost, client alice, a token."""
    d = tmp_path_factory.mktemp("pki")
    certs.main_certs([str(d), "--client", "alice", "--token"], say=_quiet)
    return d


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another CA with the same names: everything here looks right and is signed by the wrong CA."""
    d = tmp_path_factory.mktemp("other")
    certs.main_certs([str(d), "--client", "alice", "--token"], say=_quiet)
    return d


class Echo:
    """A stream handler shaped like the aggregator's Connect: check enrolment first, then answer
    each message with ``<peer identity>|<message>``. ``calls`` counts the calls that reached it."""

    def __init__(self, enrol: Callable[[Any], str] | None = None) -> None:
        self.enrol = enrol
        self.calls = 0

    async def connect(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        self.calls += 1
        if self.enrol is not None:
            problem = self.enrol(context)
            if problem:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, problem)
        await context.send_initial_metadata((("admitted", "1"),))  # the client may now write (see talk)
        who = (tls.peer_identity(context) or "-").encode()
        async for message in requests:
            yield who + b"|" + message


@asynccontextmanager
async def serving(credentials: grpc.ServerCredentials | None, echo: Echo) -> AsyncIterator[int]:
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    handler = grpc.stream_stream_rpc_method_handler(echo.connect)  # no (de)serializers: bytes
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("ldp.test.Echo", {"Connect": handler}),))
    port = server.add_secure_port("127.0.0.1:0", credentials) if credentials is not None else server.add_insecure_port("127.0.0.1:0")
    assert port
    await server.start()
    try:
        yield port
    finally:
        await server.stop(0)


async def talk(target: str, credentials: grpc.ChannelCredentials | None, metadata: tuple[tuple[str, str], ...] = ()) -> bytes | grpc.aio.AioRpcError:
    """One message over a Connect-like stream: the reply, or the error the call ended with."""
    channel = grpc.aio.secure_channel(target, credentials) if credentials is not None else grpc.aio.insecure_channel(target)
    async with channel:
        call = channel.stream_stream(METHOD)(metadata=metadata, timeout=DEADLINE_S)
        try:
            # Wait for the server's verdict before writing: headers when admitted, the status when
            # refused. A write racing a refusal can fail with INTERNAL on a loaded machine.
            headers = await call.initial_metadata()
            if ("admitted", "1") not in list(headers or ()):
                code, details = await call.code(), await call.details()
                return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)
            await call.write(b"hello")
            reply = await call.read()
            await call.done_writing()
        except grpc.aio.AioRpcError as exc:
            return exc
        assert reply is not grpc.aio.EOF, await call.code()
        return bytes(reply)


def refused(result: bytes | grpc.aio.AioRpcError, code: grpc.StatusCode, *fragments: str) -> bool:
    return isinstance(result, grpc.aio.AioRpcError) and result.code() == code and all(f in (result.details() or "") for f in fragments)


# --- (a)-(c), (e): mTLS ------------------------------------------------------------------------


async def test_an_enrolled_client_connects_and_is_known_by_its_certificate_name(pki: Path) -> None:
    echo = Echo(lambda ctx: tls.enrolment_problem(ctx, require_client_cert=True))
    async with serving(tls.server_credentials(pki), echo) as port:
        assert await talk(f"127.0.0.1:{port}", tls.channel_credentials(pki, "alice")) == b"alice|hello"
        assert await talk(f"localhost:{port}", tls.channel_credentials(pki, "alice")) == b"alice|hello"  # both SANs
    assert echo.calls == 2


async def test_a_client_certificate_from_another_ca_is_refused_at_the_handshake(pki: Path, other: Path) -> None:
    # Broken variant: a client with a well-formed certificate named "alice", signed by the wrong CA
    # (its ca.pem is replaced by ours so that the client itself trusts the aggregator).
    impostor = other.parent / "impostor-wrong-ca"
    impostor.mkdir()
    shutil.copy(pki / "ca.pem", impostor / "ca.pem")
    for suffix in ("pem", "key"):
        shutil.copy(other / f"client-alice.{suffix}", impostor / f"client-alice.{suffix}")
    os.chmod(impostor / "client-alice.key", 0o600)
    echo = Echo()
    async with serving(tls.server_credentials(pki), echo) as port:
        result = await talk(f"127.0.0.1:{port}", tls.channel_credentials(impostor, "alice"))
    assert refused(result, grpc.StatusCode.UNAVAILABLE), result
    assert echo.calls == 0  # refused by TLS: the handler never ran


async def test_a_client_without_a_certificate_is_refused_under_mtls(pki: Path) -> None:
    echo = Echo()
    async with serving(tls.server_credentials(pki), echo) as port:
        result = await talk(f"127.0.0.1:{port}", tls.channel_credentials(pki))  # trusts the CA, presents nothing
    assert refused(result, grpc.StatusCode.UNAVAILABLE), result
    assert echo.calls == 0


async def test_a_plaintext_client_cannot_talk_to_the_tls_server(pki: Path) -> None:
    echo = Echo()
    async with serving(tls.server_credentials(pki), echo) as port:
        result = await talk(f"127.0.0.1:{port}", None, tls.token_metadata(tls.read_token(pki / "token")))
    assert refused(result, grpc.StatusCode.UNAVAILABLE), result
    assert echo.calls == 0


async def test_an_impostor_aggregator_is_refused_by_the_client(pki: Path, other: Path) -> None:
    # Broken variants on the server side: an aggregator certificate from another CA, and an
    # enrolled client's own certificate (a student posing as the aggregator).
    async with serving(tls.server_credentials(other, require_client_auth=False), Echo()) as port:
        assert refused(await talk(f"127.0.0.1:{port}", tls.channel_credentials(pki, "alice")), grpc.StatusCode.UNAVAILABLE)
    student = grpc.ssl_server_credentials([((pki / "client-alice.key").read_bytes(), (pki / "client-alice.pem").read_bytes())])
    echo = Echo()
    async with serving(student, echo) as port:
        assert refused(await talk(f"127.0.0.1:{port}", tls.channel_credentials(pki, "alice")), grpc.StatusCode.UNAVAILABLE)
    assert echo.calls == 0


async def test_a_host_missing_from_the_server_certificate_is_refused(tmp_path: Path) -> None:
    certs.main_certs([str(tmp_path), "--client", "bob", "--server-host", "127.0.0.1"], say=_quiet)  # no "localhost"
    async with serving(tls.server_credentials(tmp_path), Echo()) as port:
        assert await talk(f"127.0.0.1:{port}", tls.channel_credentials(tmp_path, "bob")) == b"bob|hello"
        assert refused(await talk(f"localhost:{port}", tls.channel_credentials(tmp_path, "bob")), grpc.StatusCode.UNAVAILABLE)


async def test_a_failed_handshake_is_explained_not_just_unavailable(pki: Path) -> None:
    async with serving(tls.server_credentials(pki), Echo()) as port, serving(None, Echo()) as plain_port:
        cases = [
            (f"127.0.0.1:{port}", tls.channel_credentials(pki, "alice"), ""),
            (f"127.0.0.1:{port}", tls.channel_credentials(pki), "a client certificate from its CA"),
            (f"127.0.0.1:{plain_port}", tls.channel_credentials(pki, "alice"), "does not speak TLS"),
        ]
        for target, credentials, expected in cases:
            async with grpc.aio.secure_channel(target, credentials) as channel:
                reason = await tls.diagnose(channel, timeout_s=DEADLINE_S)
            assert (expected in reason) if expected else reason == "", (target, reason)
    assert "--server-host HOST" in tls.explain("last error: UNKNOWN: ipv4:1.2.3.4:5: Custom verification check failed with error: UNAUTHENTICATED: Hostname Verification Check failed.")
    assert tls.explain("something else") == "something else"


# --- (d): token mode ---------------------------------------------------------------------------


async def test_token_mode_admits_the_right_token_and_refuses_a_wrong_or_missing_one(pki: Path, other: Path) -> None:
    server = tls.server_tls(pki, token_file=pki / "token")
    assert not server.require_client_cert and server.token == tls.read_token(pki / "token")
    assert server.token not in repr(server) and server.token not in repr(tls.client_tls(pki, token_file=pki / "token"))
    echo = Echo(server.problem)
    right = tls.client_tls(pki, token_file=pki / "token")
    assert right.metadata == (("authorization", f"Bearer {server.token}"),)
    async with serving(server.credentials, echo) as port:
        target = f"127.0.0.1:{port}"
        assert await talk(target, right.credentials, right.metadata) == b"-|hello"  # no client certificate
        wrong = tls.token_metadata(tls.read_token(other / "token"))
        assert refused(await talk(target, right.credentials, wrong), grpc.StatusCode.UNAUTHENTICATED, "wrong enrolment token")
        assert refused(await talk(target, right.credentials), grpc.StatusCode.UNAUTHENTICATED, "no enrolment token")
        twice = right.metadata + right.metadata
        assert refused(await talk(target, right.credentials, twice), grpc.StatusCode.UNAUTHENTICATED)
        prefix = (("authorization", f"Bearer {server.token[:-1]}"),)
        assert refused(await talk(target, right.credentials, prefix), grpc.StatusCode.UNAUTHENTICATED)
    assert echo.calls == 5  # TLS let them all in; the token check turned four away
    assert server.token not in tls.enrolment_problem(object(), require_client_cert=False, token=server.token)  # reasons never echo it


async def test_a_token_sent_in_plaintext_is_refused_unless_explicitly_allowed(pki: Path) -> None:
    token = tls.read_token(pki / "token")
    seen: list[tuple[bool, bool]] = []

    def check(ctx: Any) -> str:
        seen.append((tls.token_ok(ctx, token), tls.token_ok(ctx, token, require_tls=False)))
        return ""

    async with serving(None, Echo(check)) as port:
        assert await talk(f"127.0.0.1:{port}", None, tls.token_metadata(token)) == b"-|hello"
    assert seen == [(False, True)]  # over plaintext the token no longer proves anything


async def test_mtls_and_a_token_can_both_be_required(pki: Path) -> None:
    token = tls.read_token(pki / "token")
    echo = Echo(lambda ctx: tls.enrolment_problem(ctx, require_client_cert=True, token=token))
    async with serving(tls.server_credentials(pki), echo) as port:
        target = f"127.0.0.1:{port}"
        creds = tls.client_tls(pki, "alice", pki / "token")
        assert creds.name == "alice"
        assert await talk(target, creds.credentials, creds.metadata) == b"alice|hello"
        assert refused(await talk(target, creds.credentials), grpc.StatusCode.UNAUTHENTICATED)


class FakeContext:
    """What peer_identity and token_ok read from a servicer context, set by hand."""

    def __init__(self, auth: dict[str, list[bytes]], metadata: tuple[tuple[str, str], ...] = ()) -> None:
        self._auth, self._metadata = auth, metadata

    def auth_context(self) -> dict[str, list[bytes]]:
        return self._auth

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata


def test_peer_identity_requires_the_client_role_marker(pki: Path) -> None:
    def ctx(cert: Path, security: bytes = b"ssl") -> FakeContext:
        return FakeContext({"transport_security_type": [security], "x509_pem_cert": [cert.read_bytes()]})

    assert tls.peer_identity(ctx(pki / "client-alice.pem")) == "alice"
    # Broken variants: the aggregator's certificate (OU=server, serverAuth), a CA certificate, plaintext.
    assert tls.peer_identity(ctx(pki / "server.pem")) is None
    assert tls.peer_identity(ctx(pki / "ca.pem")) is None
    assert tls.peer_identity(ctx(pki / "client-alice.pem", b"insecure")) is None
    assert tls.peer_identity(FakeContext({})) is None and tls.peer_identity(object()) is None


def test_token_ok_compares_the_whole_bearer_value() -> None:
    token = "A" * 43
    tls_auth = {"transport_security_type": [b"ssl"]}
    assert tls.token_ok(FakeContext(tls_auth, (("authorization", f"Bearer {token}"),)), token)
    for value in (token, f"bearer {token}", f"Bearer {token} ", f"Bearer {token}A", "Bearer ", ""):
        assert not tls.token_ok(FakeContext(tls_auth, (("authorization", value),)), token), value
    assert not tls.token_ok(FakeContext(tls_auth, (("authorization", "Bearer "),)), "")  # no token configured: nobody
    assert not tls.token_ok(FakeContext(tls_auth, (("x-token", f"Bearer {token}"),)), token)


# --- files and validation ----------------------------------------------------------------------


def test_certificates_carry_the_roles_names_and_hosts(tmp_path: Path) -> None:
    tls.make_ca(tmp_path, days=30)
    server_cert, _ = tls.issue(tmp_path, "server", "agg", hosts=("10.1.2.3", "lab.example.org", "::1"))
    client_cert, client_key = tls.issue(tmp_path, "client", "student-7", days=400)
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.pem").read_bytes())
    server = x509.load_pem_x509_certificate(server_cert.read_bytes())
    client = x509.load_pem_x509_certificate(client_cert.read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["10.1.2.3", "::1"]
    assert san.get_values_for_type(x509.DNSName) == ["lab.example.org"]
    assert server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH])
    assert client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])
    assert client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "student-7"
    assert client.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value == "client"
    assert client.not_valid_after_utc <= ca.not_valid_after_utc  # a leaf never outlives its CA
    assert client_key == tmp_path / "client-student-7.key" and stat.S_IMODE(client_key.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "ca.key").stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda d: tls.issue(d, "admin", "x"),  # type: ignore[arg-type]
         "role must be 'server' or 'client', got 'admin'"),
        (lambda d: tls.issue(d, "client", "../etc"), "got '../etc'"),
        (lambda d: tls.issue(d, "client", "two words"), "got 'two words'"),
        (lambda d: tls.issue(d, "client", ""), "got ''"),
        (lambda d: tls.issue(d, "server", "agg", hosts=("0.0.0.0",)), "'0.0.0.0' is a bind-everything address"),
        (lambda d: tls.issue(d, "server", "agg", hosts=("lab.example.org:50051",)), "without :PORT"),
        (lambda d: tls.issue(d, "server", "agg", hosts=("bad_host!",)), "'bad_host!' is neither an IP address nor a DNS name"),
        (lambda d: tls.issue(d, "server", "agg", hosts=()), "at least one host"),
        (lambda d: tls.issue(d, "client", "x", days=0), "days must be an integer in [1, 3650], got 0"),
        (lambda d: tls.make_ca(d), "ca.pem already exists"),
    ],
)
def test_bad_roles_names_and_hosts_are_refused_naming_the_value(tmp_path: Path, call: Callable[[Path], Any], message: str) -> None:
    tls.make_ca(tmp_path)
    with pytest.raises(ParameterError) as info:
        call(tmp_path)
    assert message in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.key", "ca.pem"]  # nothing else written


def test_missing_files_and_keys_readable_by_others_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="server.pem is missing"):
        tls.server_credentials(tmp_path)
    with pytest.raises(ParameterError, match="ca.pem is missing"):
        tls.issue(tmp_path, "client", "alice")
    certs.main_certs([str(tmp_path), "--client", "alice"], say=_quiet)
    os.chmod(tmp_path / "client-alice.key", 0o644)  # broken variant: a key anyone on the machine can read
    with pytest.raises(ParameterError, match=r"readable by others \(mode 0644\): run `chmod 600"):
        tls.channel_credentials(tmp_path, "alice")
    with pytest.raises(ParameterError, match="--client-name NAME"):
        tls.client_tls(tmp_path)
    token = tmp_path / "token"
    token.write_text("short\n")
    token.chmod(0o600)
    with pytest.raises(ParameterError, match="at least 32 characters"):
        tls.read_token(token)
    token.write_text("x" * 43)
    token.chmod(0o640)
    with pytest.raises(ParameterError, match="readable by others"):
        tls.read_token(token)


# --- (f): ldp-sim certs ------------------------------------------------------------------------


def test_certs_writes_the_files_with_private_keys_0600_and_says_what_goes_where(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "pki"
    assert certs.main_certs([str(d), "--server-host", "lab.example.org", "--server-host", "10.0.0.5", "--clients", "3", "--token"]) == 0
    out = capsys.readouterr().out
    names = sorted(p.name for p in d.iterdir())
    assert names == sorted(["ca.pem", "ca.key", "server.pem", "server.key", "token"] + [f"client-{i}.{s}" for i in (1, 2, 3) for s in ("pem", "key")])
    for p in d.iterdir():
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (0o600 if p.suffix == ".key" or p.name == "token" else 0o644), (p.name, oct(mode))
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    for name in names:
        assert str(d / name) in out
    paragraph = next(line for line in out.splitlines() if line.startswith("Copy"))
    for fragment in ("the aggregator's machine gets ca.pem, server.pem and server.key", "each client machine gets ca.pem, client-NAME.pem and client-NAME.key",
                     "ca.key goes nowhere", "`ldp-sim serve --tls DIR ...`", "`ldp-sim clients --tls DIR --client-name NAME --connect HOST:PORT ...`",
                     "each client machine gets ca.pem and token", "--token-file DIR/token", "lab.example.org, 10.0.0.5"):
        assert fragment in paragraph, fragment
    assert "note:" not in out  # hosts were given
    # The files work: the aggregator for lab.example.org / 10.0.0.5, client 2.
    server = x509.load_pem_x509_certificate((d / "server.pem").read_bytes())
    assert server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName) == ["lab.example.org"]
    tls.server_credentials(d), tls.channel_credentials(d, "2"), tls.read_token(d / "token")

    # A second run reuses the CA and issues only what is asked.
    assert certs.main_certs([str(d), "--client", "late-student"]) == 0
    out = capsys.readouterr().out
    assert f"using the CA in {d}" in out and "client-late-student.pem" in out and "server.pem" not in out.split("Copy")[0]
    # Refusals are one ParameterError naming the value, and write nothing.
    before = sorted(p.name for p in d.iterdir())
    for argv, message in [
        ([str(d), "--client", "2"], "client-2.pem already exists"),
        ([str(d), "--client", "a b"], "got 'a b'"),
        ([str(d), "--client", "x", "--client", "x"], "client name 'x' is given twice"),
        ([str(d), "--server-host", "0.0.0.0"], "'0.0.0.0' is a bind-everything address"),
        ([str(d)], "nothing to do"),
        ([str(tmp_path / "fresh")], "nothing would enrol a client"),
        ([str(tmp_path / "fresh"), "--clients", "0"], "--clients must be in [1, 10000], got 0"),
    ]:
        with pytest.raises(ParameterError) as info:
            certs.main_certs(argv)
        assert message in str(info.value), (argv, str(info.value))
    assert sorted(p.name for p in d.iterdir()) == before and not (tmp_path / "fresh" / "ca.pem").exists()
    # On a machine that received only copies (no ca.key), certs refuses to pretend to be the CA.
    client_machine = tmp_path / "client-machine"
    client_machine.mkdir()
    shutil.copy(d / "ca.pem", client_machine / "ca.pem")
    with pytest.raises(ParameterError, match="has ca.pem but no ca.key"):
        certs.main_certs([str(client_machine), "--client", "me"])


def test_certs_without_hosts_warns_that_the_certificate_is_for_loopback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert certs.main_certs([str(tmp_path), "--token"]) == 0
    out = capsys.readouterr().out
    assert "note: the aggregator's certificate names only 127.0.0.1 and localhost" in out
    assert "--token-file DIR/token" in out and "--client-name" not in out  # token mode only: no certificates to name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.key", "ca.pem", "server.key", "server.pem", "token"]


def test_certs_arguments_fit_a_subparser() -> None:
    parser = argparse.ArgumentParser(prog="ldp-sim")
    certs.add_certs_arguments(parser.add_subparsers(dest="command").add_parser("certs"))
    ns = parser.parse_args(["certs", "D", "--client", "a", "--client", "b", "--token"])
    assert (ns.directory, ns.client_names, ns.clients, ns.token, ns.server_hosts) == ("D", ["a", "b"], None, True, None)
    with pytest.raises(SystemExit):
        parser.parse_args(["certs", "D", "--clients", "2", "--client", "a"])  # one or the other
