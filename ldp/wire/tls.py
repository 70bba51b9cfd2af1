"""TLS and enrolment for multi-host runs: only enrolled clients may claim shards (docs/security.md).

Two ways to enrol a client, both over TLS (gRPC's own, keys and certificates made with the
``cryptography`` package; no hand-written cryptography):

- **mTLS** (the default with ``--tls DIR``): a small CA (EC P-256) signs one certificate for the
  aggregator (SubjectAltNames: the hosts clients connect to) and one per client (CN = its name,
  OU = client, EKU clientAuth). The aggregator requires a client certificate signed by the CA; the
  client requires an aggregator certificate signed by the CA for the host it dialled.
- **token mode** (``--token-file F``): the aggregator has a CA-signed certificate, clients carry
  only ``ca.pem`` and a shared secret token (256 bits) sent as ``authorization: Bearer <token>``
  call metadata and compared in constant time.

The local model's guarantees do not depend on any of this: the aggregator stays untrusted.

Files, in one directory (``ldp-sim certs DIR`` writes them all; each machine gets a subset)::

    ca.pem            the CA certificate (every machine)
    ca.key            the CA's private key (stays where it was made: it mints enrolments)
    server.pem/.key   the aggregator's certificate and key (the aggregator's machine)
    client-NAME.pem/.key   one client's certificate and key (that client's machine)
    token             the shared enrolment token (the aggregator and every client, token mode)

Keys and the token are written 0600 and refused when group or others can read them.

The API, for ``ldp.wire.aggregator`` / ``ldp.wire.client`` / ``ldp.cli`` (``serve``, ``clients``):

- ``handshake_reason``: why gRPC refused a connection, from its log line (``ldp.wire.grpc_stderr``);
- ``make_ca``, ``issue``, ``new_token``, ``read_token``: files;
- ``server_credentials``, ``channel_credentials``: gRPC credentials from a directory;
- ``peer_identity``, ``token_ok``, ``enrolment_problem``: checks inside a stream handler;
  ``token_metadata``: the client's call metadata; ``diagnose``/``explain``: why a TLS channel
  does not connect (gRPC says only UNAVAILABLE);
- ``server_tls`` / ``client_tls``: the two flag combinations of the CLI, resolved once
  (``ServerTLS.credentials``, ``ServerTLS.problem(context)``; ``ClientTLS.credentials``,
  ``ClientTLS.metadata``);
- ``plan_pki`` / ``make_pki``: what ``ldp-sim certs DIR ...`` (``ldp.cli.certs``) checks, then writes.
"""

from __future__ import annotations

import datetime as _dt
import hmac
import ipaddress
import os
import re
import secrets
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ldp.core.errors import ParameterError

__all__ = [
    "CA_CERT",
    "CA_KEY",
    "TOKEN_FILE",
    "ClientTLS",
    "ServerTLS",
    "ca_paths",
    "channel_credentials",
    "client_paths",
    "client_tls",
    "diagnose",
    "enrolment_problem",
    "explain",
    "handshake_reason",
    "issue",
    "make_pki",
    "plan_pki",
    "PkiPlan",
    "make_ca",
    "new_token",
    "peer_identity",
    "read_token",
    "server_credentials",
    "server_paths",
    "server_tls",
    "token_text",
    "token_metadata",
    "token_ok",
    "token_problem",
]

CA_CERT = "ca.pem"
CA_KEY = "ca.key"
SERVER_STEM = "server"
CLIENT_PREFIX = "client-"
TOKEN_FILE = "token"
DEFAULT_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost")
MAX_DAYS = 3650
TOKEN_MIN_CHARS = 32  # token_urlsafe(32) gives 43 characters (256 bits)
TOKEN_MAX_CHARS = 1024  # gRPC refuses metadata past 16 KiB (RESOURCE_EXHAUSTED): refuse a long token where it is read

_ORG = "ldp"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")  # a CN and part of a file name: no '/', no spaces
_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
_TOKEN = re.compile(r"[A-Za-z0-9_-]+")
_SKEW = _dt.timedelta(minutes=5)  # certificates are valid from a little before now: clocks differ

Role = Literal["server", "client"]


# --- paths -------------------------------------------------------------------------------------


def ca_paths(directory: str | os.PathLike[str]) -> tuple[Path, Path]:
    """(DIR/ca.pem, DIR/ca.key)."""
    d = Path(directory)
    return d / CA_CERT, d / CA_KEY


def server_paths(directory: str | os.PathLike[str]) -> tuple[Path, Path]:
    """(DIR/server.pem, DIR/server.key)."""
    d = Path(directory)
    return d / f"{SERVER_STEM}.pem", d / f"{SERVER_STEM}.key"


def client_paths(directory: str | os.PathLike[str], name: str) -> tuple[Path, Path]:
    """(DIR/client-NAME.pem, DIR/client-NAME.key); ``ParameterError`` for a bad name."""
    _check_name(name)
    d = Path(directory)
    return d / f"{CLIENT_PREFIX}{name}.pem", d / f"{CLIENT_PREFIX}{name}.key"


# --- validation --------------------------------------------------------------------------------


def _check_name(name: object, what: str = "name") -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ParameterError(
            f"a certificate {what} must be 1-63 letters, digits, '.', '_' or '-' starting with a letter or digit, got {name!r}"
        )
    return name


def _check_role(role: object) -> Role:
    if role not in ("server", "client"):
        raise ParameterError(f"a certificate role must be 'server' or 'client', got {role!r}")
    return role


def _check_days(days: object) -> int:
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise ParameterError(f"days must be an integer in [1, {MAX_DAYS}], got {days!r}")
    return days


def _san(host: object) -> x509.GeneralName:
    """One SubjectAltName entry for a host clients dial: an IP address or a DNS name."""
    if not isinstance(host, str) or not host:
        raise ParameterError(f"a server host must be an IP address or a DNS name, got {host!r}")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None:
        if ip.is_unspecified:
            raise ParameterError(
                f"server host {host!r} is a bind-everything address, not one clients can connect to: "
                "give the machine's name or address (as clients write it in --connect)"
            )
        return x509.IPAddress(ip)
    name = host[:-1] if host.endswith(".") else host
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        hint = " (give the host without :PORT)" if ":" in host else ""
        raise ParameterError(f"server host {host!r} is neither an IP address nor a DNS name{hint}")
    return x509.DNSName(name.lower())


# --- files -------------------------------------------------------------------------------------


def _ensure_dir(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise ParameterError(f"{directory} exists and is not a directory")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)


def _refuse_existing(paths: Sequence[Path]) -> None:
    for p in paths:
        if p.exists():
            raise ParameterError(f"{p} already exists: remove it first to issue a new one (nothing was written)")


def _write(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` (never overwrite) with ``mode`` from the start: no moment where a key is readable."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise ParameterError(f"{path} already exists: remove it first to issue a new one") from None
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, mode)  # the umask may have removed bits from a certificate's 0644: put them back
        with os.fdopen(fd, "wb") as f:
            fd = -1
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    finally:
        if fd >= 0:
            os.close(fd)


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ParameterError(f"{what} {path} is missing (`ldp-sim certs DIR` makes it; docs/security.md says which machine needs which file)") from None
    except OSError as exc:
        raise ParameterError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def _read_secret(path: Path, what: str) -> bytes:
    """A key or token file, refused when group or others may read it (like ssh does)."""
    data = _read(path, what)
    if os.name == "posix":
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise ParameterError(f"{what} {path} is readable by others (mode {mode:04o}): run `chmod 600 {path}`")
    return data


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def _load_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = ca_paths(directory)
    cert_bytes = _read(cert_path, "the CA certificate")  # outside the try: ParameterError is a ValueError
    try:
        cert = x509.load_pem_x509_certificate(cert_bytes)
    except ValueError:
        raise ParameterError(f"{cert_path} is not a PEM certificate") from None
    key_bytes = _read_secret(key_path, "the CA key")
    try:
        key = serialization.load_pem_private_key(key_bytes, password=None)
    except (ValueError, TypeError):
        raise ParameterError(f"{key_path} is not an unencrypted PEM private key") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key().public_numbers() != cert.public_key().public_numbers():  # type: ignore[union-attr]
        raise ParameterError(f"{key_path} is not the key of {cert_path}")
    return cert, key


# --- the CA and leaf certificates --------------------------------------------------------------


def make_ca(directory: str | os.PathLike[str], *, name: str = "ldp classroom CA", days: int = 365) -> Path:
    """A new CA in ``directory``: an EC P-256 key (``ca.key``, 0600) and a self-signed certificate
    (``ca.pem``), valid ``days`` days. Refuses to replace an existing CA. Returns ``ca.pem``'s path."""
    if not isinstance(name, str) or not name.strip() or len(name) > 64:
        raise ParameterError(f"a CA name must be 1-64 characters, got {name!r}")
    days = _check_days(days)
    d = Path(directory)
    cert_path, key_path = ca_paths(d)
    _ensure_dir(d)
    _refuse_existing([cert_path, key_path])
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, _ORG), x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _SKEW)
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(key_path, _key_pem(key), 0o600)
    _write(cert_path, _cert_pem(cert), 0o644)
    return cert_path


def issue(
    directory: str | os.PathLike[str],
    role: Role,
    name: str,
    *,
    hosts: Sequence[str] = DEFAULT_HOSTS,
    days: int = 365,
) -> tuple[Path, Path]:
    """A leaf certificate signed by the CA in ``directory`` (which must hold ca.pem and ca.key).

    ``role="server"``: ``server.pem``/``server.key``, CN ``name``, OU server, EKU serverAuth,
    SubjectAltNames = ``hosts`` (IP addresses and DNS names: every host clients write in
    ``--connect``). ``role="client"``: ``client-NAME.pem``/``client-NAME.key``, CN ``name``, OU
    client, EKU clientAuth (``hosts`` is ignored). The key is EC P-256, written 0600. Validity:
    ``days`` days, never beyond the CA's. Refuses to replace existing files.
    Returns (cert_path, key_path).
    """
    role = _check_role(role)
    name = _check_name(name, f"{role} name")
    days = _check_days(days)
    d = Path(directory)
    if role == "server":
        if isinstance(hosts, str):
            hosts = (hosts,)
        sans = list(dict.fromkeys(_san(h) for h in hosts))
        if not sans:
            raise ParameterError("a server certificate needs at least one host (an IP address or DNS name clients connect to)")
        cert_path, key_path = server_paths(d)
        usage, ku_extra = ExtendedKeyUsageOID.SERVER_AUTH, True
    else:
        sans = []
        cert_path, key_path = client_paths(d, name)
        usage, ku_extra = ExtendedKeyUsageOID.CLIENT_AUTH, False
    ca_cert, ca_key = _load_ca(d)
    _refuse_existing([cert_path, key_path])
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    not_after = min(now + _dt.timedelta(days=days), ca_cert.not_valid_after_utc)
    if not_after <= now:
        raise ParameterError(f"the CA in {d} has expired ({ca_cert.not_valid_after_utc:%Y-%m-%d}): make a new one")
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, _ORG),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, role),
            x509.NameAttribute(NameOID.COMMON_NAME, name),
        ]
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(max(now - _SKEW, ca_cert.not_valid_before_utc))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=ku_extra, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write(key_path, _key_pem(key), 0o600)
    _write(cert_path, _cert_pem(cert), 0o644)
    return cert_path, key_path


# --- the enrolment token -----------------------------------------------------------------------


def token_text() -> str:
    """A fresh enrolment token: ``secrets.token_urlsafe(32)`` (256 bits, 43 characters), drawn
    again while it begins with ``-``.

    A token is typed on command lines (``ldp-sim join HOST --token TOKEN``), and a command-line
    parser reads a word that begins with ``-`` as an option, not as the value before it: one
    token in 64 would make the printed join command fail for every student. Redrawing keeps the
    token uniform over the URL-safe strings that do not begin with ``-`` (log2(63/64) ≈ 0.02 bits
    fewer)."""
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token


def new_token(directory: str | os.PathLike[str]) -> Path:
    """A fresh shared enrolment token (``token_text``: 256 bits, never beginning with ``-``) in DIR/token, 0600."""
    d = Path(directory)
    _ensure_dir(d)
    path = d / TOKEN_FILE
    _refuse_existing([path])
    _write(path, (token_text() + "\n").encode("ascii"), 0o600)
    return path


def read_token(path: str | os.PathLike[str]) -> str:
    """The token in ``path`` (surrounding whitespace ignored); ``ParameterError`` when the file is
    missing, readable by others, or does not hold a token of 32 to 1024 URL-safe characters."""
    p = Path(path)
    try:
        text = _read_secret(p, "the token file").decode("ascii").strip()
    except UnicodeDecodeError:
        text = ""
    if not TOKEN_MIN_CHARS <= len(text) <= TOKEN_MAX_CHARS or not _TOKEN.fullmatch(text):
        got = "is empty" if not text else f"holds {len(text)} characters" if _TOKEN.fullmatch(text) else "holds other characters"
        raise ParameterError(
            f"the token file {p} must hold one token of at least {TOKEN_MIN_CHARS} characters and at most {TOKEN_MAX_CHARS}, A-Z a-z 0-9 _ -, but {got} "
            "(`ldp-sim certs DIR --token` makes one)"
        )
    return text


def token_metadata(token: str) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying the token, for the client: ``stub.Connect(metadata=token_metadata(t))``.
    Send it only over a TLS channel (``channel_credentials``): in plaintext anyone on the path reads it."""
    if not isinstance(token, str) or not token or not _TOKEN.fullmatch(token):
        raise ParameterError("an enrolment token must be a non-empty string of A-Z a-z 0-9 _ -")
    return (("authorization", f"Bearer {token}"),)


# --- gRPC credentials --------------------------------------------------------------------------


def server_credentials(directory: str | os.PathLike[str], require_client_auth: bool = True) -> grpc.ServerCredentials:
    """The aggregator's TLS credentials: DIR/server.pem + server.key. With ``require_client_auth``
    (mTLS, the default) the handshake also requires a client certificate signed by DIR/ca.pem;
    without it (token mode) no client certificate is asked for and ca.pem is not needed."""
    d = Path(directory)
    cert_path, key_path = server_paths(d)
    chain = _read(cert_path, "the server certificate")
    key = _read_secret(key_path, "the server key")
    root = _read(ca_paths(d)[0], "the CA certificate") if require_client_auth else None
    return grpc.ssl_server_credentials([(key, chain)], root_certificates=root, require_client_auth=bool(require_client_auth))


def channel_credentials(directory: str | os.PathLike[str], name: str | None = None) -> grpc.ChannelCredentials:
    """A client's TLS credentials: trusts only DIR/ca.pem (an aggregator whose certificate the CA did
    not sign for the dialled host is refused); with ``name``, presents DIR/client-NAME.pem + .key
    (mTLS). ``name=None``: no client certificate (token mode)."""
    d = Path(directory)
    root = _read(ca_paths(d)[0], "the CA certificate")
    if name is None:
        return grpc.ssl_channel_credentials(root_certificates=root)
    cert_path, key_path = client_paths(d, name)
    chain = _read(cert_path, f"the certificate of client {name!r}")
    key = _read_secret(key_path, f"the key of client {name!r}")
    return grpc.ssl_channel_credentials(root_certificates=root, private_key=key, certificate_chain=chain)


# --- checks inside a stream handler ------------------------------------------------------------


def _auth(context: Any) -> dict[str, list[bytes]]:
    try:
        return dict(context.auth_context() or {})
    except Exception:  # noqa: BLE001 - no auth context (e.g. a test double): nothing is authenticated
        return {}


def _is_tls(auth: dict[str, list[bytes]]) -> bool:
    return list(auth.get("transport_security_type") or []) == [b"ssl"]


def peer_identity(context: Any) -> str | None:
    """The enrolled client's name: the CN of its certificate, when the call came over mTLS with a
    client certificate that gRPC verified against the CA (``server_credentials(..., True)``), marked
    OU=client and carrying the clientAuth EKU (so the aggregator's own certificate is no client
    identity). ``None`` otherwise (plaintext, token mode, any other certificate)."""
    auth = _auth(context)
    if not _is_tls(auth):
        return None
    pems = auth.get("x509_pem_cert") or []
    if len(pems) != 1:
        return None
    try:
        cert = x509.load_pem_x509_certificate(pems[0])
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except (ValueError, x509.ExtensionNotFound):
        return None
    roles = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)]
    names = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if roles != ["client"] or ExtendedKeyUsageOID.CLIENT_AUTH not in eku or len(names) != 1:
        return None
    name = names[0]
    return name if isinstance(name, str) and _NAME.fullmatch(name) else None


def token_problem(context: Any, token: str, *, require_tls: bool = True) -> str:
    """'' when the call carries exactly one ``authorization: Bearer <token>`` metadata entry equal
    to ``token`` (compared with ``hmac.compare_digest``), else which of these it is not, in words
    that never echo either token. An empty ``token`` enrols nobody (misconfigured), and unless
    ``require_tls=False`` a call that did not come over TLS is refused (a token sent in plaintext
    is no secret any more)."""
    if not isinstance(token, str) or not token:
        return "this aggregator has no enrolment token (misconfigured): nobody is enrolled"
    if require_tls and not _is_tls(_auth(context)):
        return "the call did not come over TLS"
    try:
        metadata = context.invocation_metadata() or ()
    except Exception:  # noqa: BLE001
        return "the call carries no metadata"
    values = [value for key, value in metadata if key == "authorization"]
    if not values:
        return "no enrolment token (this aggregator admits clients by token: --tls DIR --token-file F)"
    if len(values) != 1:
        return f"{len(values)} authorization entries (one enrolment token is allowed)"
    got = values[0] if isinstance(values[0], bytes) else str(values[0]).encode("utf-8", "replace")
    if not hmac.compare_digest(got, f"Bearer {token}".encode()):
        return "a wrong enrolment token (not the one in this aggregator's --token-file)"
    return ""


def token_ok(context: Any, token: str, *, require_tls: bool = True) -> bool:
    """Whether the call carries exactly one ``authorization: Bearer <token>`` metadata entry equal to
    ``token`` (compared with ``hmac.compare_digest``). False for an empty ``token`` (misconfigured:
    nobody is enrolled) and, unless ``require_tls=False``, for a call that did not come over TLS (a
    token sent in plaintext is no secret any more)."""
    return not token_problem(context, token, require_tls=require_tls)


def enrolment_problem(context: Any, *, require_client_cert: bool, token: str | None = None) -> str:
    """'' when the caller is enrolled, else a one-line reason to send back (never the token).
    ``require_client_cert``: an mTLS identity (``peer_identity``) is required; ``token``: the call
    must carry it (``token_ok``). Both may be required."""
    if require_client_cert and peer_identity(context) is None:
        return "not enrolled: this aggregator admits only clients with a certificate from its CA (--tls DIR --client-name NAME)"
    if token is not None and (why := token_problem(context, token)):
        return f"not enrolled: {why}"
    return ""


@dataclass(frozen=True)
class ServerTLS:
    """The aggregator's side of ``--tls DIR [--token-file F]``: credentials for ``add_secure_port``
    and the enrolment rule its stream handler applies (``problem``)."""

    credentials: grpc.ServerCredentials
    require_client_cert: bool
    token: str | None = field(default=None, repr=False)  # never in a log line

    def identity(self, context: Any) -> str | None:
        return peer_identity(context)

    def problem(self, context: Any) -> str:
        """'' when the caller is enrolled, else the reason (``enrolment_problem``)."""
        return enrolment_problem(context, require_client_cert=self.require_client_cert, token=self.token)


@dataclass(frozen=True)
class ClientTLS:
    """The client's side of ``--tls DIR [--client-name NAME] [--token-file F]``: channel credentials
    for ``grpc.aio.secure_channel`` and the call metadata for ``Connect``."""

    credentials: grpc.ChannelCredentials
    metadata: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # carries the token
    name: str | None = None


def server_tls(directory: str | os.PathLike[str], token_file: str | os.PathLike[str] | None = None) -> ServerTLS:
    """``serve --tls DIR``: mTLS (a client certificate from DIR/ca.pem required).
    ``serve --tls DIR --token-file F``: token mode (TLS, no client certificate asked for, the token
    required). Files are read now: a missing or unsafe file is a ``ParameterError`` before binding."""
    if token_file is None:
        return ServerTLS(server_credentials(directory, require_client_auth=True), require_client_cert=True)
    token = read_token(token_file)
    return ServerTLS(server_credentials(directory, require_client_auth=False), require_client_cert=False, token=token)


def client_tls(
    directory: str | os.PathLike[str], name: str | None = None, token_file: str | os.PathLike[str] | None = None
) -> ClientTLS:
    """``clients --tls DIR --client-name NAME`` (mTLS) and/or ``--token-file F`` (token mode): at
    least one of the two; the aggregator is always authenticated against DIR/ca.pem."""
    if name is None and token_file is None:
        raise ParameterError("--tls needs --client-name NAME (this machine's client certificate) or --token-file F (token mode)")
    metadata = token_metadata(read_token(token_file)) if token_file is not None else ()
    return ClientTLS(channel_credentials(directory, name), metadata, name)


# --- why a TLS connection fails ----------------------------------------------------------------

# gRPC reports a failed TLS handshake as UNAVAILABLE, like an unreachable host, and
# channel_ready() just never completes: these turn its "last error" into a reason and a fix.
_HINTS: tuple[tuple[str, str], ...] = (
    ("Hostname Verification Check failed", "the host in --connect is not one of the names in the aggregator's certificate (reissue it with `ldp-sim certs DIR --server-host HOST`)"),
    ("unsupported certificate purpose", "the aggregator presented a certificate that is not a server certificate (an impostor, or the wrong files in its --tls directory)"),
    ("unable to get local issuer certificate", "the aggregator's certificate is not signed by this client's ca.pem (another CA: an old ca.pem, or an impostor)"),
    ("CERTIFICATE_VERIFY_FAILED", "the aggregator's certificate does not verify against this client's ca.pem"),
    ("WRONG_VERSION_NUMBER", "the aggregator does not speak TLS (started without --tls?)"),
    ("Socket closed", "the aggregator closed the connection during the handshake: it requires TLS (--tls DIR) and a client certificate from its CA (--client-name NAME, with that CA's files)"),
    ("Connection refused", "nothing listens at that address (the aggregator is not up, or another port)"),
)

ClientMode = Literal["plaintext", "mtls", "token"]

# "Socket closed" during the handshake means different things for different clients: the
# aggregator hung up on what this client sent. What it sent says what it most likely refused.
_CLOSED: dict[str, str] = {
    "plaintext": "the aggregator closed the connection before any message: it serves TLS, and this client speaks plaintext "
    "(connect with --tls DIR and --client-name NAME or --token-file F)",
    "token": "the aggregator closed the connection during the TLS handshake: it admits only clients with a certificate "
    "from its CA (mTLS: --client-name NAME), and this client presented none (token mode)",
    "mtls": "the aggregator closed the connection during the TLS handshake: it did not accept this client's certificate "
    "(not signed by its CA: another CA's files?)",
}


def client_mode(tls: ClientTLS | None) -> ClientMode:
    """How a client presents itself: plaintext, with a certificate (mTLS), or with a token only."""
    if tls is None:
        return "plaintext"
    return "mtls" if tls.name is not None else "token"


def explain(details: str, client: ClientMode | None = None) -> str:
    """A one-line reason for a gRPC error's details (``AioRpcError.details()``) from a channel
    that does not connect: the hint that applies, then gRPC's own last error; the details unchanged
    when no hint applies. ``client`` (``client_mode``) sharpens what a closed connection means."""
    last = details.split("last error:", 1)[-1].strip() if details else ""
    for needle, hint in _HINTS:
        if needle in details:
            if needle == "Socket closed" and client is not None:
                hint = _CLOSED[client]
            return f"{hint} [{last}]"
    return details


async def diagnose(channel: grpc.aio.Channel, timeout_s: float = 2.0, client: ClientMode | None = None) -> str:
    """'' if ``channel`` connects (TCP and TLS handshake), else why not (``explain``). For a client
    whose ``channel_ready()`` timed out: one call of a method no server has, so a working
    connection answers UNIMPLEMENTED and reaches no handler."""
    try:
        await channel.unary_unary("/ldp.wire.tls.Diagnose/Probe")(b"", timeout=timeout_s)
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
            return ""
        return explain(exc.details() or exc.code().name, client)
    return ""


# --- the aggregator's side of a failed handshake -----------------------------------------------

# A TLS handshake fails inside gRPC's C core, before any handler runs: the only trace is one log
# line per attempt on the process's stderr (fd 2), e.g. ``I1126 ... ssl_transport_security.cc:2563]
# Handshake failed with error SSL_ERROR_SSL: error:100000f7:SSL routines:OPENSSL_internal:
# WRONG_VERSION_NUMBER: ...``. ``ldp.wire.grpc_stderr`` turns those into one line that says why.
_HANDSHAKE_LINE = re.compile(rb"Handshake failed with error (?P<error>.*)$")
_SERVER_HINTS: tuple[tuple[str, str], ...] = (
    ("WRONG_VERSION_NUMBER", "a client that does not speak TLS (a plaintext client: started without --tls DIR?)"),
    ("HTTP_REQUEST", "a client that does not speak TLS (a plaintext client: started without --tls DIR?)"),
    ("PEER_DID_NOT_RETURN_A_CERTIFICATE", "a client presented no certificate; this aggregator admits only clients with a certificate from its CA (--client-name NAME; a token-mode client?)"),
    ("CERTIFICATE_VERIFY_FAILED", "a client's certificate is not signed by this aggregator's CA (another CA's certificate: an impostor, or files of another `ldp-sim certs`)"),
    ("ALERT_UNKNOWN_CA", "a client does not trust this aggregator's certificate (its ca.pem is another CA's)"),
    ("ALERT_BAD_CERTIFICATE", "a client does not accept this aggregator's certificate (another CA's ca.pem, or a host not in the certificate)"),
    ("ALERT_CERTIFICATE_UNKNOWN", "a client does not accept this aggregator's certificate (another CA's ca.pem, or a host not in the certificate)"),
    ("DECRYPT_ERROR", "a handshake whose signatures do not verify (replayed or tampered with?)"),
    ("BAD_DECRYPT", "a handshake whose records do not decrypt (replayed or tampered with?)"),
    ("DIGEST_CHECK_FAILED", "a handshake whose transcript does not verify (replayed or tampered with?)"),
)


def handshake_reason(line: bytes) -> str | None:
    """Why gRPC refused a connection, from one of its log lines; None for any other line."""
    m = _HANDSHAKE_LINE.search(line.rstrip(b"\r\n"))
    if m is None:
        return None
    error = m.group("error").decode("utf-8", "replace")
    code = next((needle for needle, _ in _SERVER_HINTS if needle in error), None)
    if code is None:
        return f"a TLS handshake failed: {error}"
    return f"{dict(_SERVER_HINTS)[code]} [{code}]"


# --- ldp-sim certs -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PkiPlan:
    """What ``make_pki`` will write into ``directory``, checked before anything is written."""

    directory: Path
    days: int
    names: tuple[str, ...]  # clients to issue certificates for
    hosts: tuple[str, ...]  # the names in the aggregator's certificate
    new_ca: bool
    with_server: bool
    token: bool
    hosts_given: bool


def _client_names(clients: int | None, client_names: Sequence[str] | None) -> list[str]:
    if clients is not None and not 1 <= clients <= 10_000:
        raise ParameterError(f"--clients must be in [1, 10000], got {clients}")
    names = [str(i) for i in range(1, clients + 1)] if clients is not None else list(client_names or [])
    for n in names:
        _check_name(n, "client name")
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ParameterError(f"client name {dup!r} is given twice")
    return names


def _has_new_ca(d: Path) -> bool:
    """True when ``d`` has no CA yet; an existing one is loaded (refused if broken or unsafe)."""
    ca_cert, ca_key = ca_paths(d)
    if d.exists() and not d.is_dir():
        raise ParameterError(f"{d} exists and is not a directory")
    new_ca = not ca_cert.exists() and not ca_key.exists()
    if not new_ca and not (ca_cert.exists() and ca_key.exists()):
        have, missing = (ca_cert, ca_key) if ca_cert.exists() else (ca_key, ca_cert)
        raise ParameterError(
            f"{d} has {have.name} but no {missing.name}: certificates can only be issued where the CA key is "
            "(on a client or aggregator machine, run nothing: just use the copied files)"
        )
    if not new_ca:
        _load_ca(d)  # a broken or unsafe CA is refused before anything is written
    return new_ca


def plan_pki(
    directory: Path, *, server_hosts: Sequence[str] | None = None, clients: int | None = None, client_names: Sequence[str] | None = None,
    token: bool = False, days: int = 365,
) -> PkiPlan:
    """Check everything ``make_pki`` would do (names, hosts, the CA there, files it would
    overwrite) and say what it will write; user mistakes raise ``ParameterError``."""
    days = _check_days(days)
    names = _client_names(clients, client_names)
    hosts = list(server_hosts) if server_hosts else list(DEFAULT_HOSTS)
    for h in hosts:
        _san(h)
    new_ca = _has_new_ca(directory)
    with_server = new_ca or bool(server_hosts)
    if new_ca and not names and not token:
        raise ParameterError("nothing would enrol a client: give --clients N, --client NAME or --token")
    if not (with_server or names or token):
        raise ParameterError(f"nothing to do: {directory} already has a CA; give --server-host H, --clients N, --client NAME or --token")
    plan = PkiPlan(directory, days, tuple(names), tuple(hosts), new_ca, with_server, token, bool(server_hosts))
    _refuse_existing(_planned_files(plan))
    return plan


def _planned_files(plan: PkiPlan) -> list[Path]:
    planned: list[Path] = list(ca_paths(plan.directory)) if plan.new_ca else []
    if plan.with_server:
        planned += list(server_paths(plan.directory))
    for n in plan.names:
        planned += list(client_paths(plan.directory, n))
    if plan.token:
        planned.append(plan.directory / TOKEN_FILE)
    return planned


def make_pki(plan: PkiPlan, say: Callable[[str], None] = print) -> None:
    """Write what ``plan`` says (a CA if there is none, the aggregator's certificate, client
    certificates, a token), then say what went where and which machine needs which file."""
    d, days = plan.directory, plan.days
    ca_cert, ca_key = ca_paths(d)
    if plan.new_ca:
        make_ca(d, days=max(days, 365))
        say(f"wrote {ca_cert} (the CA certificate: every machine needs it)")
        say(f"wrote {ca_key} (the CA key, 0600: keep it here, copy it nowhere)")
    else:
        say(f"using the CA in {d}")
    if plan.with_server:
        cert, key = issue(d, "server", "ldp-aggregator", hosts=list(plan.hosts), days=days)
        say(f"wrote {cert} and {key} (the aggregator, for {', '.join(plan.hosts)})")
    for n in plan.names:
        cert, key = issue(d, "client", n, days=days)
        say(f"wrote {cert} and {key} (client {n!r})")
    if plan.token:
        say(f"wrote {new_token(d)} (the shared enrolment token, 0600)")
    say(_copy_instructions(d, plan.names, plan.token, plan.hosts if plan.with_server else None))
    if plan.with_server and not plan.hosts_given:
        say("note: the aggregator's certificate names only 127.0.0.1 and localhost; for clients on other machines issue it with --server-host NAME-OR-IP")


def _copy_instructions(directory: Path, names: Sequence[str], token: bool, hosts: Sequence[str] | None) -> str:
    """One paragraph: which files go to which machine, and the commands that use them there."""
    mtls = bool(names) or not token  # certificates issued now or earlier; token mode only when asked for alone
    if names:
        who = f"client-{names[0]}" if len(names) == 1 else "client-NAME"
        client_files = f"ca.pem, {who}.pem and {who}.key (its own, one machine each)"
    else:
        client_files = "ca.pem and its own client-NAME.pem and client-NAME.key, as issued before"
    parts = ["Copy, keeping modes (scp -p), into a directory DIR on each machine:"]
    if mtls:
        parts.append(f"for mTLS, the aggregator's machine gets ca.pem, server.pem and server.key; each client machine gets {client_files}.")
    if token:
        parts.append(
            ("For token mode instead, " if mtls else "")
            + "the aggregator's machine gets ca.pem, server.pem, server.key and token; each client machine gets ca.pem and token."
        )
    parts.append(f"ca.key goes nowhere: it stays in {directory} (whoever has it can enrol anyone).")
    if mtls:
        name = names[0] if len(names) == 1 else "NAME"
        parts.append(f"Run `ldp-sim serve --tls DIR ...` and `ldp-sim clients --tls DIR --client-name {name} --connect HOST:PORT ...`" + (";" if token else "."))
    if token:
        parts.append(
            ("in token mode " if mtls else "Run ")
            + "`ldp-sim serve --tls DIR --token-file DIR/token ...` and `ldp-sim clients --tls DIR --token-file DIR/token --connect HOST:PORT ...`."
        )
    if hosts is not None:
        parts.append(f"HOST is one of the names in the aggregator's certificate: {', '.join(hosts)}.")
    return " ".join(parts)
