"""Counter-based randomness keyed by a secret: every draw is AES_key(user, counter, draw).

Why counter-based: a user's report must not depend on how users are split across client
processes, batched, or ordered (DESIGN §2). A draw is computed, not consumed from a shared state,
so user 17's coin for its 5th report is the same whether user 17 sits in one process with a
million others or alone in a shard of three.

Why a block cipher: the aggregator is untrusted (docs/design.md §2a). It sees reports, and a
report is a function of a record and of draws; if it could compute the draws it could invert
the randomizer. Each draw is therefore one AES-256 block, ``AES_K(user ‖ counter ‖ draw)``, under
a 32-byte key K that only the users' side (and the experiment that configured it) knows. AES is
a pseudorandom permutation, and distinct inputs give outputs indistinguishable from independent
uniform ones without K; the 128-bit block is (user id: 64 bits, counter: 48 bits, draw: 16 bits),
so the PRF is evaluated on distinct inputs as long as counters never repeat for a user. The
cipher is the ``cryptography`` package's (OpenSSL, AES-NI): no cryptography is written here. ECB
mode over distinct blocks is exactly a PRF evaluation per block (it is not used to encrypt data).

Where counters come from:
- **reports**: the users' side advances a per-user counter (the nonce kept by the ``Ledger``)
  at every accepted charge, so a report's draws can never repeat, whatever ids the aggregator
  chooses (a reused request id or session id gets fresh draws);
- **records and tests**: ``RandomSource(seed).for_request(stream, request, users)`` keys the
  cipher by (seed, stream) and uses ``request`` as every user's counter: reproducible
  simulation randomness for the experiment's side.

Keys: ``derive_key(*labels)`` (SHA-256 of the labels) gives reproducible keys from an
experiment's seed; ``secret_key()`` gives 32 bytes from the operating system's CSPRNG.

Process lives (invariant I1, docs/design.md §2a): a (key, user, nonce) must never reach the PRF
twice, but a process that restarts with an in-memory ledger starts its nonces at 0 again. So the
key a process life actually draws reports with is ``life_key(long_term_key, salt)``, HKDF-SHA256
(RFC 5869) of the long-term report key and a salt: ``new_life_salt()`` (16 fresh bytes from the
OS) for every life a user starts, so two lives never share a key even when their nonces repeat;
an empty salt (the experiment vouches that its launches never repeat a life: seeded simulations)
leaves the key unchanged, so seeded runs stay reproducible bit for bit.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ldp.core.errors import require_integer

__all__ = [
    "Draws",
    "Streams",
    "RandomSource",
    "UserRandomness",
    "generator",
    "derive_key",
    "derive_key_bytes",
    "secret_key",
    "life_key",
    "derive_subkey",
    "new_life_salt",
    "KEY_BYTES",
    "SALT_BYTES",
    "MAX_COUNTER",
    "MAX_DRAWS",
]

KEY_BYTES = 32
SALT_BYTES = 16  # a process life's salt: 128 random bits, so two lives collide with probability 2^-128
COUNTER_BITS = 48
DRAW_BITS = 16
MAX_COUNTER = 1 << COUNTER_BITS  # counters are < 2^48 (the Ledger refuses a charge past that)
MAX_DRAWS = 1 << DRAW_BITS  # draw indices are < 2^16 per report
_MASK64 = (1 << 64) - 1
_S12 = np.uint64(12)
_S16 = np.uint64(DRAW_BITS)


class Streams:
    """Named streams, so that data generation and randomizers never share draws."""

    RECORDS = "records"
    REPORTS = "reports"


def derive_key(*labels: object) -> int:
    """A 64-bit integer from any labels (ints, strings), by SHA-256 of their repr."""
    return int.from_bytes(derive_key_bytes(*labels)[:8], "little")


def derive_key_bytes(*labels: object) -> bytes:
    """A 32-byte key from any labels, by SHA-256 of their repr: reproducible, for seeded runs."""
    return hashlib.sha256(repr(tuple(labels)).encode()).digest()


def secret_key() -> bytes:
    """A fresh 32-byte key from the operating system's CSPRNG: not reproducible."""
    return os.urandom(KEY_BYTES)


def new_life_salt() -> bytes:
    """A fresh salt for one process life (``SALT_BYTES`` from the OS CSPRNG), for ``life_key``."""
    return os.urandom(SALT_BYTES)


_LIFE_INFO = b"ldp.rng report key of one process life v1"


def life_key(key: bytes, salt: bytes | None) -> bytes:
    """The report key one process life draws with: HKDF-SHA256 of ``key`` and ``salt``.

    Parameters
    ----------
    key : bytes
        The long-term report key (``KEY_BYTES``): derived from a seeded spec, read from a key
        file, or fresh.
    salt : bytes or None
        The life's salt (``new_life_salt()``). None or empty: the experiment vouches that no
        (key, user, nonce) repeats (its launches are never restarted with the same nonces), and
        ``key`` is returned unchanged, so seeded simulations are reproducible.

    Returns
    -------
    bytes
        ``KEY_BYTES`` bytes. HKDF (RFC 5869, Krawczyk 2010) with the salt as HKDF's salt: lives
        with different salts get keys that are independent pseudorandom functions of ``key``, so
        nonces that restart at 0 in a new life select fresh draws. The HKDF is the
        ``cryptography`` package's.
    """
    if len(key) != KEY_BYTES:
        raise ValueError(f"a report key has {KEY_BYTES} bytes, got {len(key)}")
    if not salt:
        return key
    return derive_subkey(key, _LIFE_INFO, salt=bytes(salt))


def derive_subkey(key: bytes, info: bytes, salt: bytes | None = None) -> bytes:
    """HKDF-SHA256 (RFC 5869, the ``cryptography`` package's) of ``key``: ``KEY_BYTES`` bytes for
    the purpose named by ``info``. The one way a key is derived from another here: a process
    life's report key (``life_key``), the memo key and the keys of memoized coins
    (``ldp.core.longitudinal``, ``ldp.core.telemetry``, ``ldp.core.rappor``). Distinct ``info``
    strings give independent pseudorandom keys."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=salt, info=info).derive(bytes(key))


@lru_cache(maxsize=256)
def _cipher(key: bytes) -> Cipher[modes.ECB]:
    if len(key) != KEY_BYTES:
        raise ValueError(f"a randomness key has {KEY_BYTES} bytes, got {len(key)}")
    return Cipher(algorithms.AES(key), modes.ECB())


@lru_cache(maxsize=256)
def _encryptor(key: bytes) -> Any:
    """One ECB encryption context per key, reused: ECB keeps no state between whole blocks (every
    call feeds whole 16-byte blocks), so reuse gives the same bytes as a fresh context, without
    the ≈ 40 µs of making one per call (a 10^8-user round draws in 1,500 chunks)."""
    return _cipher(key).encryptor()


def prf_words(key: bytes, users: np.ndarray, counters: np.ndarray | int, draw: int) -> np.ndarray:
    """AES_key(user ‖ counter ‖ draw) for every user: one uniformly random uint64 each.

    Block layout (little-endian): bytes 0–7 the user id, bytes 8–15 ``counter·2^16 + draw``.
    The first 64 bits of each ciphertext block are returned.
    """
    if not 0 <= int(draw) < MAX_DRAWS:
        raise ValueError(f"draw index must be in [0, 2^{DRAW_BITS}), got {draw}")
    n = len(users)
    blocks = np.empty((n, 2), dtype="<u8")
    blocks[:, 0] = users
    if np.ndim(counters) == 0:
        blocks[:, 1] = (int(counters) << DRAW_BITS) | int(draw)
    else:  # in place: no temporaries of 8 bytes per user
        np.left_shift(np.asarray(counters, dtype=np.uint64), _S16, out=blocks[:, 1])
        if draw:
            blocks[:, 1] |= np.uint64(draw)
    # update_into writes the ciphertext straight into a numpy buffer: no bytes objects, no copies
    # (8× faster than update() at 10^6 blocks). Its output needs room for one extra block.
    out = np.empty(2 * n + 2, dtype="<u8")
    if n:
        _encryptor(key).update_into(blocks.data.cast("B"), out.data.cast("B"))
    return out[: 2 * n : 2].view(np.uint64)


class Draws(Protocol):
    """What a sampler reads: one uint64 (``bits``) or one uniform float (``uniform``) per user and
    draw index. ``UserRandomness`` is the real thing; the exact audit feeds fixed stand-ins
    (``ldp.core.audit.FixedRandomness``) through the same samplers."""

    @property
    def users(self) -> np.ndarray: ...

    def bits(self, draw: int = 0) -> np.ndarray: ...

    def uniform(self, draw: int = 0) -> np.ndarray: ...


@dataclass(frozen=True)
class UserRandomness:
    """The random draws of a set of users for one report each.

    ``bits(draw)``: one uniformly random uint64 per user; ``uniform(draw)``: one float per user
    in the open interval (0, 1). Draw indices (0, 1, ...) are how a randomizer asks for several
    independent numbers per user; the user's ``counters`` entry makes each report's draws new.
    """

    key: bytes
    users: np.ndarray  # int64 user ids
    counters: np.ndarray | int = 0  # per user (or one for all): the report's nonce
    # The users' memo key (``ldp.core.longitudinal.memo_key``): what a memoized randomizer keys
    # its permanent responses by. Only a shard sets it; no draw of this object reads it.
    memo: bytes | None = None

    def bits(self, draw: int = 0) -> np.ndarray:
        return prf_words(self.key, np.asarray(self.users, dtype=np.int64), self.counters, draw)

    def uniform(self, draw: int = 0) -> np.ndarray:
        """(2k + 1)·2^-53 with k the top 52 bits: strictly inside (0, 1) (the largest value is
        1 − 2^-53, exactly representable), symmetric about 1/2, on a grid of step 2^-52."""
        return ((self.bits(draw) >> _S12).astype(np.float64) * 2.0 + 1.0) * (2.0**-53)

    def uniform_matrix(self, draws: int, first_draw: int = 0) -> np.ndarray:
        """Shape (users, draws): column j is ``uniform(first_draw + j)``."""
        out = np.empty((len(self.users), draws), dtype=np.float64)
        for j in range(draws):
            out[:, j] = self.uniform(first_draw + j)
        return out


@dataclass(frozen=True)
class RandomSource:
    """Seeded simulation randomness (the experiment's side: records, audits, tests).

    ``for_request(stream, request_id, users)`` keys the cipher by (seed, stream) and uses the
    request id as every user's counter: draws are a pure function of (seed, stream, user id,
    request id, draw index). Reports on the users' side are keyed by a secret report key and
    per-user nonces instead (``ldp.local.shard``).
    """

    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.seed, (int, np.integer)) or isinstance(self.seed, bool):
            raise TypeError(f"seed must be an int, got {type(self.seed).__name__}")
        if not 0 <= int(self.seed) <= _MASK64:
            raise ValueError(f"seed must be in [0, 2^64), got {self.seed}")

    def key(self, stream: str) -> bytes:
        return derive_key_bytes("ldp.rng", int(self.seed), stream)

    def for_request(self, stream: str, request_id: int, users: np.ndarray) -> UserRandomness:
        if not 0 <= int(request_id) < MAX_COUNTER:
            raise ValueError(f"request id must be in [0, 2^{COUNTER_BITS}), got {request_id}")
        return UserRandomness(self.key(stream), np.asarray(users, dtype=np.int64), int(request_id))


def generator(seed: int, *labels: object) -> np.random.Generator:
    """A numpy Generator (Philox) for curator- or aggregator-side randomness, keyed by labels.

    One way to get non-per-user randomness: e.g. ``generator(seed, "parity-learner", trial)``.
    Never share one Generator across processes; derive one per purpose instead. The Philox key
    is two 64-bit ``derive_key`` values (SHA-256 of the seed and the labels), so the stream is a
    pure function of (seed, labels): the same arguments give the same draws, and different
    labels give independent-looking streams. This is not the users' report randomness (that is
    keyed by a secret, ``UserRandomness``).

    Parameters
    ----------
    seed : int
        The experiment's seed: an integer in [0, 2^64), as ``RandomSource`` takes (a Python or
        numpy integer; not a bool, a float or a string, whose ``int()`` would silently pick a
        different stream or raise a builtin error).
    *labels : object
        What the randomness is for (strings, ints: their ``repr`` is hashed), e.g. a purpose
        and a trial number.

    Returns
    -------
    numpy.random.Generator
        A fresh Generator over ``numpy.random.Philox``.

    Raises
    ------
    ParameterError
        ``seed`` is not an integer in [0, 2^64) (issue 23, invariant I6: one line naming it).

    Examples
    --------
    >>> import ldp
    >>> a = ldp.generator(7, "trial", 3).integers(0, 2**32, 4)
    >>> b = ldp.generator(7, "trial", 3).integers(0, 2**32, 4)
    >>> c = ldp.generator(7, "trial", 4).integers(0, 2**32, 4)
    >>> bool((a == b).all()), bool((a == c).all())
    (True, False)
    """
    seed = require_integer("generator seed", seed, 0, _MASK64, "[0, 2^64)")
    key = [derive_key("ldp.generator", int(seed), *labels), derive_key("ldp.generator.hi", int(seed), *labels)]
    return np.random.Generator(np.random.Philox(key=np.array(key, dtype=np.uint64)))
