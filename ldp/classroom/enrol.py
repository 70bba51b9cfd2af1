"""How a student's machine recognizes the teacher's, and proves the class token without sending it.

- ``ca_fingerprint``: the first ``FINGERPRINT_HEX`` hex digits (128 bits) of SHA-256 of the class
  CA's certificate; the join command carries it, so a CA fetched over plain HTTP is checked
  before anything is trusted to it (the gRPC connection then authenticates the aggregator by it).
- ``seat_proof``: HMAC-SHA256 under the token of the student's name and a fresh nonce; the
  dashboard's plaintext HTTP port sees the proof, never the token.

Light on purpose (standard library only): every student process imports it.
"""

from __future__ import annotations

import hashlib
import hmac

from ldp.classroom.cli import FINGERPRINT_HEX

__all__ = ["FINGERPRINT_HEX", "ca_fingerprint", "seat_proof"]


def seat_proof(token: str, name: str, nonce: str) -> str:
    """HMAC-SHA256(token, "ldp-classroom-seat|name|nonce") in hex: proves the token, reveals nothing of it."""
    return hmac.new(token.encode("ascii"), f"ldp-classroom-seat|{name}|{nonce}".encode(), hashlib.sha256).hexdigest()


def ca_fingerprint(ca_pem: bytes) -> str:
    """The first 128 bits of SHA-256 of the CA certificate (PEM bytes as served), in hex."""
    return hashlib.sha256(ca_pem).hexdigest()[:FINGERPRINT_HEX]
