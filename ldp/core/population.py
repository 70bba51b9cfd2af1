"""A population of simulated users: who they are and how their records come to be.

``PopulationSpec`` is everything a client process needs to create its users' records *on the
users' side*: the concept class and target, the distribution, label noise, the per-user budget ε
and the seed. Records of users first..first+count−1 are a pure function of (seed, user id), so a
shard generates exactly the records those users would have in any other split (docs/design.md §2).

A spec is a secret of the experiment and the users' side: whoever holds it can regenerate every
record (and, for a seeded spec, every report's randomness). The aggregator only ever sees its
``PopulationDescription`` (the schema and the number of users), docs/design.md §2a.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldp.core.concepts import (
    Concept,
    ConceptClass,
    Distribution,
    Referee,
    Uniform,
    check_labeled_examples,
    concept_from_json,
    distribution_from_json,
)
from ldp.core.errors import ParameterError, require_epsilon
from ldp.core.file_format import check_keys, read_format
from ldp.core.rng import RandomSource, Streams, derive_key_bytes, secret_key
from ldp.core.schema import RECORD_DTYPE, Schema

__all__ = ["PopulationSpec", "PopulationDescription", "generate_records"]

MAX_USERS = 1 << 40


@dataclass(frozen=True)
class PopulationDescription:
    """What the aggregator may know about the users: their record schema and how many there are.

    Nothing in it lets anyone compute a record or a draw (docs/design.md §2a).
    """

    size: int
    schema: Schema

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, (int, np.integer)) or not 1 <= self.size <= MAX_USERS:
            raise ParameterError(f"population size must be an integer in [1, 2^40], got {self.size!r}")

    def to_json(self) -> dict[str, Any]:
        return {"size": int(self.size), "schema": self.schema.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PopulationDescription:
        try:
            return cls(int(data["size"]), Schema.from_json(list(data["schema"])))
        except ParameterError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise ParameterError(f"malformed population description: {exc}") from None


@dataclass(frozen=True)
class PopulationSpec:
    """n users holding i.i.d. labeled examples (x, c(x)), x ~ D, labels flipped w.p. label_noise.

    Everything a client process needs to create its users' records *on the users' side*.
    Records of users first..first+count−1 are a pure function of (seed, user id), so a shard
    generates exactly the records those users would have in any other split (docs/design.md §2).
    A spec is a secret of the experiment and the users' side: whoever holds it can regenerate
    every record (and, for a seeded spec, every report's randomness); the aggregator only ever
    sees ``description()`` (docs/design.md §2a). A spec of up to 2^40 users is always
    constructible: machines each host a slice of it (``records`` refuses a slice too large for
    one process, where it is built).

    Parameters
    ----------
    concept_class : ConceptClass
        The class, e.g. ``concept_class("parity", 8)``; it fixes the record schema.
    target : Concept
        The target c, e.g. ``concept_class(...).random_target(rng)``.
    size : int
        n, the number of users: an integer in [1, 2^40].
    budget : float, default 1.0
        Each user's privacy budget ε, a finite number in [2^-30, 2^10].
    seed : int, default 0
        The population seed in [0, 2^64): records (and, unless ``secure``, report randomness)
        are derived from it.
    distribution : Distribution, default Uniform()
        D, the distribution of the features.
    label_noise : float, default 0.0
        η in [0, 0.5): each label is flipped with this probability (the agnostic setting).
    secure : bool, default False
        Take the report key from the OS (records stay seeded): reports are then not reproducible.

    Raises
    ------
    ParameterError
        Any argument of the wrong type or outside its range (the message names it).

    Examples
    --------
    >>> import ldp
    >>> cc = ldp.concept_class("parity", 3)
    >>> population = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "target")), size=1000, budget=0.5, seed=1)
    >>> population.size, population.budget, population.schema.width
    (1000, 0.5, 4)
    >>> ldp.PopulationSpec(cc, population.target, size=0)
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: population size must be an integer in [1, 2^40], got 0
    """

    concept_class: ConceptClass
    target: Concept
    size: int
    budget: float = 1.0
    seed: int = 0
    distribution: Distribution = field(default_factory=Uniform)
    label_noise: float = 0.0
    secure: bool = False  # a report key from the OS (records stay seeded): reports not reproducible

    def __post_init__(self) -> None:
        # A spec of up to 2^40 users is always constructible: machines each host a slice of it
        # (``generate_records`` refuses a slice too large for one process, where it is built).
        check_labeled_examples(self.concept_class, self.target, self.distribution, self.label_noise)
        if isinstance(self.size, bool) or not isinstance(self.size, (int, np.integer)) or not 1 <= self.size <= MAX_USERS:
            raise ParameterError(f"population size must be an integer in [1, 2^40], got {self.size!r}")
        object.__setattr__(self, "size", int(self.size))
        if isinstance(self.budget, (bool, str, bytes)):
            raise ParameterError(f"budget epsilon must be a finite number in [2^-30, 2^10], got {self.budget!r}")
        object.__setattr__(self, "budget", require_epsilon(self.budget, name="budget epsilon"))
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or not 0 <= self.seed < 2**64:
            raise ParameterError(f"population seed must be an integer in [0, 2^64), got {self.seed!r}")
        object.__setattr__(self, "seed", int(self.seed))
        if not isinstance(self.secure, (bool, np.bool_)):
            raise ParameterError(f"secure must be True or False, got {self.secure!r}")

    @property
    def schema(self) -> Schema:
        return self.concept_class.schema

    def referee(self) -> Referee:
        """The ground truth for this population (held by the experiment, never the aggregator).

        Returns
        -------
        Referee
            A referee of this class, target, distribution and label noise.

        Examples
        --------
        >>> import ldp
        >>> cc = ldp.concept_class("parity", 3)
        >>> population = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "target")), size=10, label_noise=0.25)
        >>> population.referee().error(population.target)  # the noise floor η
        0.25
        """
        return Referee(self.concept_class, self.target, self.distribution, self.label_noise)

    def description(self) -> PopulationDescription:
        """The public part: schema and size (what the aggregator is told).

        Nothing in it lets anyone compute a record or a draw (docs/design.md §2a): no target,
        no seed, no distribution, no budget.

        Returns
        -------
        PopulationDescription
            The number of users and their record schema.

        Examples
        --------
        >>> import ldp
        >>> cc = ldp.concept_class("parity", 3)
        >>> population = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "target")), size=10, seed=5)
        >>> public = population.description()
        >>> public.size, [f.name for f in public.schema]
        (10, ['x', 'y'])
        >>> public.to_json()["size"], sorted(public.to_json())
        (10, ['schema', 'size'])
        """
        return PopulationDescription(int(self.size), self.schema)

    @property
    def identity(self) -> str:
        """The identity of the data: SHA-256 of everything that determines the records
        (concept class, d, target, distribution, label noise, seed), not of the size, budget or
        report mode. Ledgers are keyed by it, so a reload of the same data continues them."""
        data = self.to_json()
        for key in ("format", "size", "budget", "secure"):  # "format" too: a ledger outlives the file format
            data.pop(key)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

    def report_key(self) -> bytes:
        """The secret key of the users' report randomness: derived from the seed (reproducible:
        the experiment owns the seed), or fresh from the operating system when ``secure``."""
        return secret_key() if self.secure else derive_key_bytes("ldp.report-key", self.identity)

    def records(self, first_user: int, count: int) -> np.ndarray:
        """Records of users first_user .. first_user+count−1 (``generate_records``).

        Features come from draw stream RECORDS/request 0, label noise from RECORDS/request 1:
        both keyed by the population seed only (never the secure flag), so records are
        reproducible, and a pure function of (seed, user id): any split of the users into
        ranges gives the same rows. They are generated RECORD_CHUNK users at a time, so memory
        is the records of the range asked for.

        Parameters
        ----------
        first_user : int
            The first user id, ≥ 0.
        count : int
            How many consecutive users, ≥ 0 (first_user + count ≤ size).

        Returns
        -------
        numpy.ndarray
            int16, shape (count, schema.width): the features, then the label in the last column.

        Raises
        ------
        ParameterError
            Non-integer arguments, users outside 0..size−1, or a range too large for this
            machine's memory (``check_hostable``), before anything is allocated.

        Examples
        --------
        >>> import ldp, numpy as np
        >>> cc = ldp.concept_class("parity", 3)
        >>> population = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "target")), size=100, seed=0)
        >>> records = population.records(0, 100)
        >>> records.shape, records.dtype
        ((100, 4), dtype('int16'))
        >>> bool((records[:, -1] == population.target.predict(records[:, :-1])).all())  # no label noise
        True
        >>> bool((population.records(40, 10) == records[40:50]).all())  # a pure function of (seed, user)
        True
        >>> population.records(95, 10)
        Traceback (most recent call last):
        ...
        ldp.core.errors.ParameterError: users 95..104 are outside the population 0..99
        """
        return generate_records(self, first_user, count)

    def to_json(self) -> dict[str, Any]:
        """The spec as JSON (what ``ldp-sim population`` writes), with its ``format`` version."""
        return {
            "format": SPEC_FORMAT,
            "concept_class": self.concept_class.name,
            "d": self.concept_class.d,
            "target": self.target.to_json(),
            "size": int(self.size),
            "budget": self.budget,
            "seed": int(self.seed),
            "distribution": self.distribution.to_json(),
            "label_noise": self.label_noise,
            "secure": self.secure,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PopulationSpec:
        """The spec ``to_json`` wrote, read strictly: a ParameterError names the key.

        Format ``SPEC_FORMAT`` (1) needs every key of ``to_json``, each of its JSON type, and
        no other key. A spec without a ``format`` key is the unversioned layout written before
        format 1 (the same keys, with ``distribution``, ``label_noise`` and ``secure`` optional):
        it is still read, deliberately, so that the specs users already hold keep their records
        and their ledgers (the identity leaves ``format`` out); unknown keys and wrong types are
        refused in it too. Any other ``format`` is refused, naming both versions.
        """
        if not isinstance(data, Mapping):
            raise ParameterError(f"malformed population spec: expected a JSON object, got {type(data).__name__}")
        version = read_format(data, what="population spec", version=SPEC_FORMAT, rewrite="write the spec again with this version's `ldp-sim population`")
        known = ["format", *_SPEC_TYPES]
        optional = _UNVERSIONED_DEFAULTS if version is None else {}
        check_keys(data, what="population spec", version=SPEC_FORMAT, known=known, required=[k for k in _SPEC_TYPES if k not in optional])
        values: dict[str, Any] = {}
        for key, (check, allowed) in _SPEC_TYPES.items():
            if key not in data:
                values[key] = optional[key]
                continue
            if not check(data[key]):
                raise ParameterError(f"population spec key {key!r} must be {allowed}, got {data[key]!r}"[:300])
            values[key] = data[key]
        concept_class = ConceptClass(values["concept_class"], values["d"])
        target = concept_from_json(values["target"], "population spec key 'target'")
        try:
            concept_class.check_target(target)
        except ParameterError as exc:
            raise ParameterError(f"population spec key 'target': {exc}") from None
        return cls(
            concept_class,
            target,
            values["size"],
            float(values["budget"]),
            values["seed"],
            distribution_from_json(values["distribution"], "population spec key 'distribution'"),
            float(values["label_noise"]),
            values["secure"],
        )


SPEC_FORMAT = 1  # the JSON layout PopulationSpec.to_json writes and from_json reads


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# key → (its check, what it must be), in the order to_json writes them
_SPEC_TYPES: dict[str, tuple[Callable[[object], bool], str]] = {
    "concept_class": (lambda v: isinstance(v, str), "a string (a concept class name)"),
    "d": (_is_int, "an integer"),
    "target": (lambda v: isinstance(v, dict), "a JSON object (a concept)"),
    "size": (_is_int, "an integer"),
    "budget": (lambda v: _is_int(v) or isinstance(v, float), "a number"),
    "seed": (_is_int, "an integer"),
    "distribution": (lambda v: isinstance(v, dict), "a JSON object (a distribution)"),
    "label_noise": (lambda v: _is_int(v) or isinstance(v, float), "a number"),
    "secure": (lambda v: isinstance(v, bool), "true or false"),
}
# what a spec written before format 1 (no "format" key) may leave out
_UNVERSIONED_DEFAULTS: dict[str, Any] = {"distribution": {"kind": "uniform"}, "label_noise": 0.0, "secure": False}


# What hosting one user costs a process, roughly: per record column its int16 cell and a float64
# query value in a round; per user its ledger (spent units and nonce, 16 bytes) and a round's ids,
# charges, nonces and report (about 48). Generation works in chunks of RECORD_CHUNK users, so its
# temporaries are bounded whatever the range.
HOSTING_BYTES_PER_COLUMN = 10
HOSTING_BYTES_PER_USER = 64
RECORD_CHUNK = 1 << 14  # 16,384 users: temporaries stay in the caches; fastest of 2^12 … 2^16 (docs/benchmarks.md)


def hosting_bytes(schema: Schema, count: int) -> int:
    """About how many bytes of memory a process needs to host ``count`` users of ``schema``."""
    return int(count) * (HOSTING_BYTES_PER_COLUMN * schema.width + HOSTING_BYTES_PER_USER)


def physical_memory_bytes() -> int | None:
    """This machine's physical memory, or None where the OS does not say."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None
    return pages * size if pages > 0 and size > 0 else None


def _gib(n: float) -> str:
    return f"{n / 2**40:.1f} TiB" if n >= 2**40 else f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def check_hostable(schema: Schema, count: int, *, where: str = "in one process", hint: str | None = None) -> None:
    """A ParameterError, naming the users and the memory needed, when ``count`` users of ``schema``
    cannot fit in this machine's physical memory (``hosting_bytes``)."""
    memory = physical_memory_bytes()
    needed = hosting_bytes(schema, count)
    if memory is not None and needed > memory:
        per_user = needed // max(1, int(count))
        raise ParameterError(
            f"cannot host {count} users {where}: they need about {_gib(needed)} ({per_user} bytes per user), "
            f"and this machine has {_gib(memory)} of memory; "
            + (hint or "split them over more client processes or machines (ldp-sim clients --processes P --shard K/M: each holds a slice)")
        )


def generate_records(spec: PopulationSpec, first_user: int, count: int) -> np.ndarray:
    """Records of users first_user .. first_user+count−1, shape (count, schema.width), int16.

    Features come from draw stream RECORDS/request 0, label noise from RECORDS/request 1: both
    keyed by the population seed only (never the secure flag), so records are reproducible.
    Records are a pure function of (seed, user id): they are generated RECORD_CHUNK users at a
    time, so memory is the records of the range asked for; a range too large for this machine
    is a ParameterError (``check_hostable``) before anything is allocated.
    """
    if isinstance(first_user, bool) or isinstance(count, bool) or not isinstance(first_user, (int, np.integer)) or not isinstance(count, (int, np.integer)):
        raise ParameterError(f"records(first_user, count) needs integers, got {first_user!r}, {count!r}")
    first_user, count = int(first_user), int(count)
    if first_user < 0 or count < 0 or first_user + count > spec.size:
        raise ParameterError(f"users {first_user}..{first_user + count - 1} are outside the population 0..{spec.size - 1}")
    check_hostable(spec.schema, count)
    out = np.empty((count, spec.schema.width), dtype=RECORD_DTYPE)
    source = RandomSource(seed=int(spec.seed))
    for lo in range(0, count, RECORD_CHUNK):
        hi = min(count, lo + RECORD_CHUNK)
        _generate_chunk(spec, source, first_user + lo, out[lo:hi])
    return out


def _generate_chunk(spec: PopulationSpec, source: RandomSource, first_user: int, out: np.ndarray) -> None:
    """Records of users first_user .. first_user+len(out)−1, written into ``out`` (a slice of the
    records being built): features straight into their columns, the label into the last one, so
    no chunk is concatenated or copied (the values are those of sample → predict → concatenate)."""
    users = np.arange(first_user, first_user + len(out), dtype=np.int64)
    features = out[:, :-1]
    spec.distribution.sample_into(spec.schema, source.for_request(Streams.RECORDS, 0, users), spec.target, features)
    labels = spec.target.predict(features)
    if spec.label_noise > 0:
        labels = labels.astype(np.int64)
        flip = source.for_request(Streams.RECORDS, 1, users).uniform(0) < spec.label_noise
        label_field = spec.schema.fields[-1]
        # {0,1} labels flip to 1−y; ±1 labels to −y.
        flipped = -labels if label_field.low == -1 else 1 - labels
        labels = np.where(flip, flipped, labels)
    out[:, -1] = labels
