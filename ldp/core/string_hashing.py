"""Strings of an open domain as public 64-bit fingerprints, and fingerprints as users' records.

What Apple's deployment does (Apple Differential Privacy Team, "Learning with Privacy at Scale",
Apple Machine Learning Journal 1(8), 2017): a user's value is an arbitrary string (an emoji, a
word, a URL) that the server does not know in advance; the client hashes it, the sketch
(``ldp.core.sketches``, kinds ``cms_string`` and ``hcms_string``) randomizes the hash, and the
server estimates the counts of candidate strings it names afterwards, hashing each the same way.

The fingerprint of a string s is

    fp(s) = BLAKE2b(UTF-8(s), digest_size = 8, person = b"ldp.sketch.fp.v1"), read as a big-endian uint64

(``hashlib.blake2b``, RFC 7693: a well-kept hash in the standard library; the personalization
makes it this use's own function). The string is encoded code point for code point
(``surrogatepass``, as RAPPOR's ``ldp.core.rappor`` does): no Unicode normalization, so "é"
precomposed and decomposed are two strings; normalize both the column and the candidates
(``unicodedata.normalize``) to merge them.

**Why the hash may be public.** It protects nothing: privacy comes from the sketch's
randomization, which is ε-LDP for *every* map from values to hash positions (the structural proof
in ``ldp.core.sketches`` holds whatever h_j(x) is), so a deterministic public pre-processing
s ↦ fp(s) keeps the same ε for strings (two strings are two inputs of the randomizer; the loss
between any two inputs is at most ε). The server must compute fp(c) for its candidates, so the
function is public by design, as Apple's and RAPPOR's hashes are. What BLAKE2b buys is that
distinct strings get distinct fingerprints but for chance (Pr ≤ n²/2^65 for n distinct strings:
2.7·10^-8 at n = 10^6; strings that do collide are counted as one value).

**Why it is not keyed by the sketch's ``hash_seed``.** Users fingerprint their strings when they
load them, before any question is asked, so the function is fixed; what varies per deployment is
the public tabulation family drawn from ``hash_seed`` (``ldp.core.sketches.key_tables``), and the
sketch's estimate is unbiased over that draw for distinct fingerprints. Whoever chooses the seed
— even an adversarial aggregator — cannot raise any user's loss above ε (the proof holds for every
family); a seed chosen against a population can only spoil accuracy, which users could spoil
anyway by lying (poisoning is outside local DP's guarantee). A user could craft two strings with
one fingerprint (≈ 2^32 work): that too only moves counts.

Records. A fingerprint travels inside the users' side as one record field of length 4 (the
16-bit chunks, most significant first, each stored as chunk − 32768 in int16: ``key_records``),
so the users' records, the ledger's identity and the data file written for client processes are
the ones every other field uses. The field's public description (``FINGERPRINT_LOW`` ..
``FINGERPRINT_HIGH``, length 4) is the same for every column: nothing about the strings is in it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np

from ldp.core.errors import ParameterError
from ldp.core.schema import RECORD_DTYPE, Field, Schema

__all__ = [
    "FINGERPRINT_PERSON",
    "FINGERPRINT_CHUNKS",
    "FINGERPRINT_LOW",
    "FINGERPRINT_HIGH",
    "fingerprint",
    "fingerprints",
    "key_records",
    "record_keys",
    "fingerprint_field",
    "fingerprint_schema",
    "is_fingerprint_schema",
]

FINGERPRINT_PERSON = b"ldp.sketch.fp.v1"  # BLAKE2b's personalization (16 bytes): this use of the hash only
FINGERPRINT_CHUNKS = 4  # 16-bit chunks per 64-bit fingerprint
FINGERPRINT_LOW, FINGERPRINT_HIGH = -(2**15), 2**15 - 1
_OFFSET = 1 << 15


def _text(s: object, what: str) -> bytes:
    if not isinstance(s, str):
        raise ParameterError(f"{what} must be a string, got {type(s).__name__} {s!r}"[:200])
    return s.encode("utf-8", "surrogatepass")


def fingerprint(s: str) -> int:
    """fp(s): the public 64-bit fingerprint of one string (module docstring).

    >>> fingerprint("😀") == int(fingerprints(["😀"])[0]) != fingerprint("😁")
    True
    """
    digest = hashlib.blake2b(_text(s, "a value"), digest_size=8, person=FINGERPRINT_PERSON).digest()
    return int.from_bytes(digest, "big")


def fingerprints(strings: Iterable[object], what: str = "a value") -> np.ndarray:
    """fp of every string, as uint64 (each distinct string hashed once).

    Raises
    ------
    ParameterError
        An element that is not a string (one line naming it and ``what`` it is)."""
    items = list(strings)
    memo: dict[str, int] = {}
    for s in dict.fromkeys(items):
        digest = hashlib.blake2b(_text(s, what), digest_size=8, person=FINGERPRINT_PERSON).digest()
        memo[s] = int.from_bytes(digest, "big")  # type: ignore[index]
    return np.fromiter((memo[s] for s in items), dtype=np.uint64, count=len(items))  # type: ignore[index]


def key_records(keys: np.ndarray) -> np.ndarray:
    """(n, 4) int16 records of uint64 keys: chunk c = bits 63−16c .. 48−16c, minus 32768."""
    k = np.asarray(keys, dtype=np.uint64).ravel()
    out = np.empty((len(k), FINGERPRINT_CHUNKS), dtype=RECORD_DTYPE)
    for c in range(FINGERPRINT_CHUNKS):
        chunk = (k >> np.uint64(48 - 16 * c)) & np.uint64(0xFFFF)
        out[:, c] = (chunk.astype(np.int64) - _OFFSET).astype(RECORD_DTYPE)
    return out


def record_keys(records: np.ndarray) -> np.ndarray:
    """The uint64 keys of records (..., 4) (ints, or floats as a query gives them): ``key_records``'s inverse."""
    r = np.asarray(records)
    if r.shape[-1:] != (FINGERPRINT_CHUNKS,):
        raise ParameterError(f"a fingerprint record has {FINGERPRINT_CHUNKS} columns, got shape {r.shape}")
    chunks = (r.astype(np.int64) + _OFFSET).astype(np.uint64)
    out = np.zeros(r.shape[:-1], dtype=np.uint64)
    for c in range(FINGERPRINT_CHUNKS):
        out |= chunks[..., c] << np.uint64(48 - 16 * c)
    return out


def fingerprint_field(name: str = "fp") -> Field:
    """The public field of a fingerprint: length 4, each column −32768..32767 (module docstring)."""
    return Field(name, FINGERPRINT_CHUNKS, FINGERPRINT_LOW, FINGERPRINT_HIGH)


def fingerprint_schema(name: str = "fp") -> Schema:
    """A schema of one fingerprint field: what users holding strings describe to an aggregator."""
    return Schema((fingerprint_field(name),))


def is_fingerprint_schema(schema: Schema) -> bool:
    """Whether ``schema`` is one fingerprint field (any name)."""
    fields: Sequence[Field] = tuple(schema.fields)
    if len(fields) != 1:
        return False
    f = fields[0]
    return (f.length, f.low, f.high, f.step) == (FINGERPRINT_CHUNKS, FINGERPRINT_LOW, FINGERPRINT_HIGH, 1)
