"""Sealed populations: what the experiment hands the users' side through an untrusted aggregator.

One set of client processes can serve many populations (the seeded trials of a sweep): the
experiment seals each ``PopulationSpec`` with a key it gave the clients when it spawned them
(out of band, never through the aggregator), the aggregator relays the blob in a ``Load``, and
each client opens it. AES-256-GCM (the ``cryptography`` package, no hand-written cryptography)
makes the blob unreadable and unalterable without the key: the aggregator learns nothing from
it beyond its length, and any change it makes is detected and refused. Replaying an old blob
only reloads data the clients have seen, whose ledgers continue (``ldp.local.ledger_store``).
"""

from __future__ import annotations

import json
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ldp.core.errors import ParameterError
from ldp.core.population import PopulationSpec

__all__ = ["SEAL_KEY_BYTES", "new_seal_key", "seal_population", "open_population", "seal_key_file"]

SEAL_KEY_BYTES = 32
_NONCE_BYTES = 12
_CONTEXT = b"ldp.wire.v1 sealed population"  # associated data: a blob is for this purpose only
MAX_SEALED_BYTES = 1 << 20


def new_seal_key() -> bytes:
    """A fresh AES-256-GCM key from the operating system (the experiment makes one per cluster)."""
    return AESGCM.generate_key(bit_length=8 * SEAL_KEY_BYTES)


def seal_key_file(path: str | os.PathLike[str], *, create: bool = False) -> bytes:
    """The seal key stored in ``path`` (32 raw bytes). With ``create``, a missing file is made
    with a fresh key, readable by its owner only (0600): the experiment then copies it to the
    client machines out of band (``ldp-sim serve --seal-key-file``, ``ldp-sim clients --seal-key-file``)."""
    where = os.fspath(path)
    if create and not os.path.exists(where):
        key = new_seal_key()
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        return key
    try:
        with open(where, "rb") as f:
            key = f.read(SEAL_KEY_BYTES + 1)
    except OSError as exc:
        raise ParameterError(f"cannot read the seal key file {where}: {exc.strerror}") from None
    if len(key) != SEAL_KEY_BYTES:
        raise ParameterError(f"the seal key file {where} must hold exactly {SEAL_KEY_BYTES} bytes, it holds {len(key)}{'+' if len(key) > SEAL_KEY_BYTES else ''}")
    return key


def seal_population(key: bytes, population: PopulationSpec) -> bytes:
    """nonce ‖ AES-GCM(key, spec JSON): opaque to whoever relays it."""
    nonce = os.urandom(_NONCE_BYTES)
    plaintext = json.dumps(population.to_json(), sort_keys=True).encode()
    return nonce + AESGCM(key).encrypt(nonce, plaintext, _CONTEXT)


def open_population(key: bytes, blob: bytes) -> PopulationSpec:
    """The spec inside a sealed blob; ``ParameterError`` if it was altered or sealed with another key."""
    if not isinstance(blob, (bytes, bytearray)) or not _NONCE_BYTES + 16 <= len(blob) <= MAX_SEALED_BYTES:
        raise ParameterError(f"a sealed population has {_NONCE_BYTES + 16}..{MAX_SEALED_BYTES} bytes, got {len(blob) if isinstance(blob, (bytes, bytearray)) else type(blob).__name__}")
    try:
        plaintext = AESGCM(key).decrypt(bytes(blob[:_NONCE_BYTES]), bytes(blob[_NONCE_BYTES:]), _CONTEXT)
    except InvalidTag:
        raise ParameterError("the sealed population does not open with this client's key: it was altered, or sealed for other clients") from None
    try:
        return PopulationSpec.from_json(json.loads(plaintext))
    except ValueError as exc:  # a sealed blob is the experiment's own: malformed only through a bug
        raise ParameterError(f"the sealed population is not a population spec: {exc}") from None
