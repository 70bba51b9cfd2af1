"""How a student's machine recognizes the teacher's, proves the class token without sending it, and
holds on to its seat.

- ``ca_fingerprint``: the first ``FINGERPRINT_HEX`` hex digits (128 bits) of SHA-256 of the class
  CA's certificate; the join command carries it, so a CA fetched over plain HTTP is checked
  before anything is trusted to it (the gRPC connection then authenticates the aggregator by it).
- ``seat_proof``: HMAC-SHA256 under the token of the student's name, a fresh nonce and the seat
  commitment; the dashboard's plaintext HTTP port sees the proof, never the token.
- ``seat_commit``: SHA-256 of a secret the student's machine draws and keeps. The seat request
  carries only the commitment (plain HTTP); the gRPC connection, over TLS, carries the secret
  (``SEAT_SECRET_HEADER``), and the aggregator admits a connection for a seat only with the secret
  whose commitment that seat was given for. So nobody else — an eavesdropper on the plain HTTP
  port, or another enrolled student — can connect as that seat (docs/classroom.md, "Seats").

Light on purpose (standard library only): every student process imports it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata

__all__ = ["FINGERPRINT_HEX", "MAX_NAME", "SEAT_SECRET_HEADER", "ca_fingerprint", "name_problem", "seat_commit", "seat_proof", "is_seat_secret"]

FINGERPRINT_HEX = 32  # hex digits of the CA fingerprint in the join command (128 bits)
SEAT_SECRET_HEADER = "ldp-seat-secret"  # gRPC call metadata (lower case, as gRPC requires)
_SECRET = re.compile(r"[0-9a-f]{64}")
MAX_NAME = 40


def name_problem(name: str) -> str:
    """'' if ``name`` may be shown as a student's name, else why not: letters of any script
    (``Zoë Ünïcode``, ``陈 Chen``), digits, punctuation and spaces; 1..40 characters; no control
    or format characters (Unicode category C: terminal escapes, bidirectional overrides). The
    student's ``join`` checks it before asking anything, the dashboard again on ``POST /seat``;
    markup needs no rule here: the page only ever shows a name as text."""
    if not 1 <= len(name) <= MAX_NAME or name != name.strip():
        return f"name: 1 to {MAX_NAME} characters, no leading or trailing space, got {len(name)} characters"
    if any(unicodedata.category(c).startswith("C") for c in name):
        return "name: letters of any script, digits, punctuation and spaces; no control or format characters"
    return ""


def seat_proof(token: str, name: str, nonce: str, commit: str) -> str:
    """HMAC-SHA256(token, "ldp-classroom-seat|name|nonce|commit") in hex: proves the token, reveals
    nothing of it, and binds the request's name and commitment (a replay cannot swap them)."""
    return hmac.new(token.encode("ascii"), f"ldp-classroom-seat|{name}|{nonce}|{commit}".encode(), hashlib.sha256).hexdigest()


def seat_commit(secret: str) -> str:
    """SHA-256 of the seat secret (64 hex digits, ``secrets.token_hex(32)``), domain-separated, in hex."""
    return hashlib.sha256(f"ldp-classroom-seat-secret|{secret}".encode()).hexdigest()


def is_seat_secret(text: str) -> bool:
    """Whether ``text`` has the form of a seat secret (64 lower-case hex digits)."""
    return bool(_SECRET.fullmatch(text))


def ca_fingerprint(ca_pem: bytes) -> str:
    """The first 128 bits of SHA-256 of the CA certificate (PEM bytes as served), in hex."""
    return hashlib.sha256(ca_pem).hexdigest()[:FINGERPRINT_HEX]
