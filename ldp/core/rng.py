"""Counter-based randomness: every draw is a pure function of (seed, stream, user, request, draw).

Why counter-based: a user's report must not depend on how users are split across client
processes, batched, or ordered (DESIGN.md §2). A draw is computed, not consumed from a shared
state, so user 17's coin for request 5 is the same whether user 17 sits in one process with a
million others or alone in a shard of three.

The mixing function is SplitMix64's finalizer (Steele, Lea & Flood, "Fast splittable
pseudorandom number generators", OOPSLA 2014), applied to a key derived from
(seed, stream, request) and a counter built from (user, draw). It is vectorized over users with
numpy uint64 arithmetic (wrap-around multiplication is the intended modular arithmetic).

This generator is for *simulation*: reproducible, fast, statistically good, **not**
cryptographic. ``secure=True`` switches to the operating system's CSPRNG (``os.urandom``),
which is not reproducible; use it when running a client for real.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np

__all__ = ["Streams", "RandomSource", "UserRandomness", "generator", "derive_key"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_DRAW = np.uint64(0xD1B54A32D192ED03)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_MASK64 = (1 << 64) - 1


class Streams:
    """Named streams, so that data generation and randomizers never share draws."""

    RECORDS = "records"
    REPORTS = "reports"


def derive_key(*labels: object) -> int:
    """A 64-bit key from any labels (ints, strings), by SHA-256 of their repr.

    Used once per request or per population, never per user, so its cost is irrelevant.
    """
    digest = hashlib.sha256(repr(tuple(labels)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer, elementwise on uint64 (modular arithmetic is intended)."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def _bits_to_open_unit(bits: np.ndarray) -> np.ndarray:
    """Top 53 bits → a float in the open interval (0, 1): (k + 1/2)·2^-53."""
    return ((bits >> _S11).astype(np.float64) + 0.5) * (2.0**-53)


@dataclass(frozen=True)
class UserRandomness:
    """The random draws available to a set of users answering one request.

    ``uniform(draw)`` returns one float per user in (0, 1); ``bits(draw)`` one uint64 per user.
    Draw indices are how a randomizer asks for several independent numbers per user.
    """

    key: int
    users: np.ndarray  # int64 user ids
    secure: bool = False

    def bits(self, draw: int = 0) -> np.ndarray:
        if self.secure:
            return np.frombuffer(os.urandom(8 * len(self.users)), dtype=np.uint64).copy()
        with np.errstate(over="ignore"):
            counter = self.users.astype(np.uint64) * _GOLDEN + np.uint64(draw) * _DRAW
            return _mix(_mix(counter ^ np.uint64(self.key)) + _GOLDEN)

    def uniform(self, draw: int = 0) -> np.ndarray:
        return _bits_to_open_unit(self.bits(draw))

    def uniform_matrix(self, draws: int, first_draw: int = 0) -> np.ndarray:
        """Shape (users, draws): column j is ``uniform(first_draw + j)``."""
        out = np.empty((len(self.users), draws), dtype=np.float64)
        for j in range(draws):
            out[:, j] = self.uniform(first_draw + j)
        return out


@dataclass(frozen=True)
class RandomSource:
    """The randomness of one population: a seed, or the OS when ``secure``.

    ``for_request(stream, request_id, users)`` gives the per-user draws for one request.
    With a seed, results are a pure function of (seed, stream, user id, request id, draw index).
    """

    seed: int = 0
    secure: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.seed, (int, np.integer)) or isinstance(self.seed, bool):
            raise TypeError(f"seed must be an int, got {type(self.seed).__name__}")
        if not 0 <= int(self.seed) <= _MASK64:
            raise ValueError(f"seed must be in [0, 2^64), got {self.seed}")

    def for_request(self, stream: str, request_id: int, users: np.ndarray) -> UserRandomness:
        key = derive_key("ldp.rng", int(self.seed), stream, int(request_id))
        return UserRandomness(key=key, users=np.asarray(users, dtype=np.int64), secure=self.secure)


def generator(seed: int, *labels: object) -> np.random.Generator:
    """A numpy Generator (Philox) for curator- or aggregator-side randomness, keyed by labels.

    One way to get non-per-user randomness: e.g. ``generator(seed, "parity-learner", trial)``.
    Never share one Generator across processes; derive one per purpose instead.
    """
    key = [derive_key("ldp.generator", int(seed), *labels), derive_key("ldp.generator.hi", int(seed), *labels)]
    return np.random.Generator(np.random.Philox(key=np.array(key, dtype=np.uint64)))
