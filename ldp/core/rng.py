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
import sys
from collections.abc import Callable
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
    "HIGH_HALF",
    "prf_block_matrix",
    "prf_pair_blocks",
    "draw_blocks",
    "block_pairs",
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


# Users per AES call: the chunk's blocks and ciphertexts (16 bytes per user each, 512 KiB) stay
# in the L2 cache while they are built, encrypted and read out, so a draw writes its 8 bytes per
# user once to memory instead of building and encrypting two fresh arrays of 16 bytes per user
# (issue 27; measured at 10^6 users, one idle core: 7.2 → 3.6 ns per user with per-user
# counters, 5.2 → 2.6 with one counter for all; AES itself is 1.8).
_PRF_CHUNK = 1 << 15
_EXPONENT_ONE = np.uint64(0x3FF0000000000000)  # the bits of 1.0: exponent 0, mantissa 0
_HALF_ULP_BELOW_ONE = 1.0 - 2.0**-53  # exactly representable (53 significant bits)


def _as_words(values: np.ndarray | int, n: int) -> np.ndarray:
    """``values`` as n uint64 words, bit for bit what assigning them into a uint64 column gives
    (int64 and uint64 arrays are viewed, not copied)."""
    a = np.asarray(values)
    if a.dtype == np.int64 or a.dtype == np.uint64:
        a = a.view(np.uint64)
    else:
        a = a.astype(np.uint64)
    return a if a.shape == (n,) else np.broadcast_to(a, (n,))


def _prf_into(
    key: bytes, users: np.ndarray, counters: np.ndarray | int, draw: int, out: np.ndarray | None, uniform: bool,
    consume: Callable[[np.ndarray, int, int], None] | None = None,
) -> None:
    """AES_key(user ‖ counter ‖ draw) for every user, written into ``out`` (n entries, any
    strides): the first 64 bits of each ciphertext block (``uniform=False``, ``out`` uint64), or
    the uniform (2k + 1)·2^-53 of their top 52 bits k (``uniform=True``, ``out`` float64); or,
    with ``consume`` (and ``out`` None), handed chunk by chunk to ``consume(words, lo, hi)`` (the
    words of users lo .. hi − 1, a strided view valid during the call only).

    The blocks are built, encrypted (ECB) and read out in chunks of ``_PRF_CHUNK`` users, in two
    scratch buffers of this call (nothing is shared between calls or threads). The words are
    the same whatever the chunking: each block is encrypted on its own.
    """
    if not 0 <= int(draw) < MAX_DRAWS:
        raise ValueError(f"draw index must be in [0, 2^{DRAW_BITS}), got {draw}")
    n = len(users)
    if n == 0:
        return
    ids = _as_words(users, n)
    size = min(n, _PRF_CHUNK)
    # update_into writes the ciphertext straight into a numpy buffer: no bytes objects, no
    # copies. Its output needs room for one extra block, hence the 2 spare words.
    blocks = np.empty((size, 2), dtype="<u8")
    cipher = np.empty(2 * size + 2, dtype="<u8")
    plain, raw = blocks.data.cast("B"), cipher.data.cast("B")
    first = cipher[: 2 * size : 2]
    encrypt = _encryptor(key).update_into
    per_user = np.ndim(counters) != 0
    if per_user:
        high = _as_words(counters, n)
        low = np.uint64(draw)
    else:
        blocks[:, 1] = (int(counters) << DRAW_BITS) | int(draw)
    words = out.view(np.uint64) if out is not None else np.empty(0, dtype=np.uint64)  # unused with ``consume``
    for lo in range(0, n, size):
        hi = min(n, lo + size)
        b = blocks[: hi - lo]
        b[:, 0] = ids[lo:hi]
        if per_user:  # in place: counter·2^16 + draw
            np.left_shift(high[lo:hi], _S16, out=b[:, 1])
            if draw:
                b[:, 1] |= low
        encrypt(plain[: 16 * (hi - lo)], raw[: 16 * (hi - lo) + 16])
        if consume is not None:
            consume(first[: hi - lo], lo, hi)
        elif uniform:
            _uniform_from_words(first[: hi - lo], words[lo:hi])
        else:
            words[lo:hi] = first[: hi - lo]


def _uniform_from_words(x: np.ndarray, out: np.ndarray) -> None:
    """``out`` (uint64 words of float64 storage) = (2k + 1)·2^-53 for k = x >> 12, the top 52 bits.

    Computed as 1 + k·2^-52 (k put in the mantissa of a double in [1, 2)) minus (1 − 2^-53):
    both terms are exact doubles and so is their difference (2k + 1)·2^-53 (an integer below
    2^53 times a power of two), and IEEE subtraction returns an exact difference exactly. So this
    is the same double as ((x >> 12)·2 + 1)·2^-53 computed in floats, bit for bit, without an
    int → float conversion.
    """
    np.right_shift(x, _S12, out=out)
    out |= _EXPONENT_ONE
    np.subtract(out.view(np.float64), _HALF_ULP_BELOW_ONE, out=out.view(np.float64))


def prf_words(key: bytes, users: np.ndarray, counters: np.ndarray | int, draw: int) -> np.ndarray:
    """AES_key(user ‖ counter ‖ draw) for every user: one uniformly random uint64 each.

    Block layout (little-endian): bytes 0–7 the user id, bytes 8–15 ``counter·2^16 + draw``.
    The first 64 bits of each ciphertext block are returned (a contiguous uint64 array).
    """
    out = np.empty(len(users), dtype=np.uint64)
    _prf_into(key, users, counters, draw, out, uniform=False)
    return out


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

    def bits_chunks(self, draw: int, consume: Callable[[np.ndarray, int, int], None]) -> None:
        """``bits(draw)`` handed over chunk by chunk, as the PRF makes it: ``consume(words, lo, hi)``
        for users lo .. hi − 1 (``words`` valid during the call only). A sampler that reads one
        word per user fuses its arithmetic with the draw this way (no word array written and read
        back); ``each_chunk`` falls back to one call on ``bits(draw)`` for a stand-in."""
        if type(self).bits is not UserRandomness.bits:
            consume(self.bits(draw), 0, len(self.users))
            return
        _prf_into(self.key, np.asarray(self.users, dtype=np.int64), self.counters, draw, None, uniform=False, consume=consume)

    def uniform(self, draw: int = 0) -> np.ndarray:
        """(2k + 1)·2^-53 with k the top 52 bits of ``bits(draw)``: strictly inside (0, 1) (the
        largest value is 1 − 2^-53, exactly representable), symmetric about 1/2, on a grid of
        step 2^-52. Computed chunk by chunk with the PRF, by exact float arithmetic
        (``_prf_into``), when ``bits`` is this class's; from ``bits(draw)`` otherwise (a stand-in
        or subclass with its own draws gets the uniforms of those)."""
        if type(self).bits is not UserRandomness.bits:
            x = np.asarray(self.bits(draw), dtype=np.uint64)
            theirs = np.empty(x.shape, dtype=np.float64)
            _uniform_from_words(x, theirs.view(np.uint64))
            return theirs
        out = np.empty(len(self.users), dtype=np.float64)
        _prf_into(self.key, np.asarray(self.users, dtype=np.int64), self.counters, draw, out, uniform=True)
        return out

    def uniform_matrix(self, draws: int, first_draw: int = 0) -> np.ndarray:
        """Shape (users, draws): column j is ``uniform(first_draw + j)``, written in place."""
        out = np.empty((len(self.users), draws), dtype=np.float64)
        users = np.asarray(self.users, dtype=np.int64)
        for j in range(draws):
            if type(self).bits is not UserRandomness.bits:  # a stand-in's own draws (``uniform``)
                out[:, j] = self.uniform(first_draw + j)
            else:
                _prf_into(self.key, users, self.counters, first_draw + j, out[:, j], uniform=True)
        return out

    def block_matrix(self, first: int, count: int, rows: slice | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Shape (users, 2·count): both halves of blocks first .. first + count − 1 (``prf_block_matrix``),
        of the users ``rows`` only when given, into ``out`` when given."""
        users = np.asarray(self.users, dtype=np.int64)
        ctr = self.counters
        if rows is not None:
            users, ctr = users[rows], ctr if np.ndim(ctr) == 0 else np.asarray(ctr)[rows]
        return prf_block_matrix(self.key, users, ctr, first, count, out)

    def pair_blocks(self, rows: np.ndarray, draws: np.ndarray) -> np.ndarray:
        """Shape (len(rows), 2): both halves of block ``draws[i]`` of user ``rows[i]``, for those pairs only (``prf_pair_blocks``)."""
        r = np.asarray(rows, dtype=np.int64)
        ctr = self.counters if np.ndim(self.counters) == 0 else np.asarray(self.counters)[r]
        return prf_pair_blocks(self.key, np.asarray(self.users, dtype=np.int64)[r], ctr, draws)


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


# --- whole 128-bit blocks: several draws per call, and chosen (user, draw) pairs (the unary encodings) ---
#
# ``bits(d)`` is the first 64 bits of block d; these give both halves of the same blocks (the same
# AES inputs as ``prf_words``), with fewer calls. The unary encodings read k/8 whole blocks per
# report and, at b > 16, for the few (user, bit) pairs whose first 16 bits tie with the threshold's,
# one more block each (``ldp.core.frequency_oracles.unary_coins``): one AES call for all those pairs.
#
# A ``Draws`` without these methods (the audits' stand-ins) is read through ``bits`` alone: the
# high half of its block d is ``bits(d + HIGH_HALF)`` (``draw_blocks``, ``block_pairs``). A
# wrapper of real randomness forwards ``block_matrix`` and ``pair_blocks`` (``OffsetDraws``,
# ``DrawBlock``, RAPPOR's row blocks do), so that the real words are the blocks' own halves and
# index d + HIGH_HALF is never read; the unary encodings use fewer than HIGH_HALF blocks.

HIGH_HALF = 1 << 15  # for a Draws without block methods: the high half of block d is bits(d + HIGH_HALF)
_MATRIX_BLOCKS = 1 << 15  # blocks per AES call of ``prf_block_matrix``: 512 KiB of scratch, in L2


def prf_block_matrix(key: bytes, users: np.ndarray, counters: np.ndarray | int, first: int, count: int, out: np.ndarray | None = None) -> np.ndarray:
    """Shape (users, 2·count) uint64: words 2j and 2j + 1 are the low and high halves of the block
    AES_key(user ‖ counter ‖ first + j); word 2j is ``prf_words(key, users, counters, first + j)``.

    One ECB call per ``_MATRIX_BLOCKS`` blocks (users × draws, row-major), so many draws of few
    users cost one call, not one each. Viewed as bytes, row i is the blocks' 16·count bytes in order.
    ``out``: a C-contiguous uint64 buffer of that shape to write into (a caller that reuses one
    saves the page faults of a fresh result of hundreds of KiB per call).
    """
    first, count = int(first), int(count)
    if first < 0 or count < 0 or first + count > MAX_DRAWS:
        raise ValueError(f"draw indices must be in [0, 2^{DRAW_BITS}), got {first}..{first + count - 1}")
    n = len(users)
    if out is None:
        out = np.empty((n, 2 * count), dtype=np.uint64)
    elif out.shape != (n, 2 * count) or out.dtype != np.uint64 or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous uint64 array of shape {(n, 2 * count)}")
    if n == 0 or count == 0:
        return out
    ids = _as_words(np.asarray(users, dtype=np.int64), n)
    per_user = np.ndim(counters) != 0
    high: Any = np.left_shift(_as_words(counters, n), _S16) if per_user else np.uint64(int(counters) << DRAW_BITS)
    draws = np.arange(first, first + count, dtype=np.uint64)
    if not per_user:
        draws |= high  # one counter for all: every row's high words are this same run (a copy per row, not an OR)
    rows = max(1, _MATRIX_BLOCKS // count)
    # The blocks are built in ``out`` itself and encrypted in place, a chunk at a time while it is
    # in cache (OpenSSL allows output = input), with no copy out of a scratch buffer. update_into
    # wants room for one block more than its input: the last block of ``out`` goes through a
    # 32-byte scratch instead.
    blocks = out.reshape(n, count, 2).view(np.dtype("<u8"))  # the blocks' bytes are little-endian words
    raw = out.data.cast("B")
    total = 16 * n * count
    tail = bytearray(32)
    encrypt = _encryptor(key).update_into
    for lo in range(0, n, rows):
        hi = min(n, lo + rows)
        b = blocks[lo:hi]
        b[:, :, 0] = ids[lo:hi, None]
        if per_user:
            np.bitwise_or(high[lo:hi, None], draws[None, :], out=b[:, :, 1])
        else:
            np.copyto(b[:, :, 1], draws[None, :])
        start, end = 16 * lo * count, 16 * hi * count
        if end < total:
            encrypt(raw[start:end], raw[start : end + 16])
            continue
        if end - 16 > start:
            encrypt(raw[start : end - 16], raw[start:end])
        tail[:16] = raw[end - 16 : end]
        encrypt(bytes(tail[:16]), tail)
        raw[end - 16 : end] = tail[:16]
    if sys.byteorder != "little":  # pragma: no cover - the words are the little-endian reading of the bytes
        out.byteswap(inplace=True)
    return out


def prf_pair_blocks(key: bytes, users: np.ndarray, counters: np.ndarray | int, draws: np.ndarray) -> np.ndarray:
    """Shape (len(draws), 2) uint64: row i is the block AES_key(users[i] ‖ counters[i] ‖ draws[i])
    (its first word is ``prf_words``'), for aligned arrays (``counters`` an array of the same
    length, or one int for all): one ECB call."""
    d = np.asarray(draws, dtype=np.int64)
    n = len(d)
    if len(users) != n or (np.ndim(counters) != 0 and len(counters) != n):  # type: ignore[arg-type]
        raise ValueError(f"users, counters and draws must align, got {len(users)}, {np.shape(counters)}, {n}")
    if n and (d.min() < 0 or d.max() >= MAX_DRAWS):
        raise ValueError(f"draw indices must be in [0, 2^{DRAW_BITS})")
    blocks = np.empty(2 * n + 2, dtype="<u8")
    pairs = blocks[: 2 * n].reshape(n, 2)
    pairs[:, 0] = _as_words(np.asarray(users, dtype=np.int64), n)
    if np.ndim(counters) != 0:
        np.left_shift(_as_words(counters, n), _S16, out=pairs[:, 1])
        pairs[:, 1] |= d.view(np.uint64)
    else:
        np.bitwise_or(np.uint64(int(counters) << DRAW_BITS), d.view(np.uint64), out=pairs[:, 1])
    if n:
        raw = blocks.data.cast("B")
        _encryptor(key).update_into(raw[: 16 * n], raw)
    return pairs.astype(np.uint64, copy=True)


def each_chunk(randomness: Draws, draw: int, consume: Callable[[np.ndarray, int, int], None]) -> None:
    """``consume(words, lo, hi)`` over all users' ``bits(draw)``: chunk by chunk through the
    object's own ``bits_chunks`` when it has one (``UserRandomness``), else once, on ``bits(draw)``
    (the audits' stand-ins)."""
    fast = getattr(randomness, "bits_chunks", None)
    if fast is not None:
        fast(int(draw), consume)
        return
    consume(np.asarray(randomness.bits(int(draw)), dtype=np.uint64), 0, len(np.asarray(randomness.users)))


def draw_blocks(randomness: Draws, first: int, count: int, rows: slice | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """Shape (users, 2·count) uint64: the low and high halves of blocks first .. first + count − 1,
    for the users ``rows`` (a slice) only when given; written into ``out`` when given (a
    C-contiguous uint64 buffer of that shape, reused by the caller).

    Through the object's own ``block_matrix`` when it has one (``UserRandomness``: the AES
    blocks, few calls, the selected users only; wrappers that forward it), else from ``bits``: the
    low half of block d is ``bits(d)``, the high half ``bits(d + HIGH_HALF)`` (the audits' stand-ins)."""
    fast = getattr(randomness, "block_matrix", None)
    if fast is not None:
        return np.asarray(fast(int(first), int(count), rows, out), dtype=np.uint64)
    sl = slice(None) if rows is None else rows
    if out is None:
        out = np.empty((len(np.asarray(randomness.users)[sl]), 2 * int(count)), dtype=np.uint64)
    for j in range(int(count)):
        out[:, 2 * j] = randomness.bits(int(first) + j)[sl]
        out[:, 2 * j + 1] = randomness.bits(int(first) + j + HIGH_HALF)[sl]
    return out


def block_pairs(randomness: Draws, rows: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Shape (len(rows), 2) uint64: the halves of block ``draws[i]`` of user ``rows[i]`` only.

    Through the object's own ``pair_blocks`` when it has one (``UserRandomness``: one AES call
    for all the pairs), else from ``bits`` of each distinct index, halves as ``draw_blocks``."""
    r = np.asarray(rows, dtype=np.int64)
    d = np.asarray(draws, dtype=np.int64)
    fast = getattr(randomness, "pair_blocks", None)
    if fast is not None:
        return np.asarray(fast(r, d), dtype=np.uint64)
    out = np.empty((len(r), 2), dtype=np.uint64)
    for v in np.unique(d):
        sel = d == v
        out[sel, 0] = randomness.bits(int(v))[r[sel]]
        out[sel, 1] = randomness.bits(int(v) + HIGH_HALF)[r[sel]]
    return out
