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
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ldp.core.concepts import (
    Concept,
    ConceptClass,
    Distribution,
    Referee,
    Uniform,
    concept_from_json,
    distribution_from_json,
)
from ldp.core.errors import ParameterError, require_epsilon
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
    def from_json(cls, data: Mapping[str, Any]) -> "PopulationDescription":
        try:
            return cls(int(data["size"]), Schema.from_json(list(data["schema"])))
        except ParameterError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise ParameterError(f"malformed population description: {exc}") from None


@dataclass(frozen=True)
class PopulationSpec:
    """n users holding i.i.d. labeled examples (x, c(x)), x ~ D, labels flipped w.p. label_noise."""

    concept_class: ConceptClass
    target: Concept
    size: int
    budget: float = 1.0
    seed: int = 0
    distribution: Distribution = field(default_factory=Uniform)
    label_noise: float = 0.0
    secure: bool = False  # a report key from the OS (records stay seeded): reports not reproducible

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, (int, np.integer)) or not 1 <= self.size <= MAX_USERS:
            raise ParameterError(f"population size must be an integer in [1, 2^40], got {self.size!r}")
        object.__setattr__(self, "budget", require_epsilon(self.budget, name="budget epsilon"))
        if not 0.0 <= self.label_noise < 0.5:
            raise ParameterError(f"label_noise must be in [0, 0.5), got {self.label_noise}")

    @property
    def schema(self) -> Schema:
        return self.concept_class.schema

    def referee(self) -> Referee:
        """The ground truth for this population (held by the experiment, never the aggregator)."""
        return Referee(self.concept_class, self.target, self.distribution, self.label_noise)

    def description(self) -> PopulationDescription:
        """The public part: schema and size (what the aggregator is told)."""
        return PopulationDescription(int(self.size), self.schema)

    @property
    def identity(self) -> str:
        """The identity of the data: SHA-256 of everything that determines the records
        (concept class, d, target, distribution, label noise, seed), not of the size, budget or
        report mode. Ledgers are keyed by it, so a reload of the same data continues them."""
        data = self.to_json()
        for key in ("size", "budget", "secure"):
            data.pop(key)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

    def report_key(self) -> bytes:
        """The secret key of the users' report randomness: derived from the seed (reproducible:
        the experiment owns the seed), or fresh from the operating system when ``secure``."""
        return secret_key() if self.secure else derive_key_bytes("ldp.report-key", self.identity)

    def records(self, first_user: int, count: int) -> np.ndarray:
        """Records of users first_user .. first_user+count−1 (``generate_records``)."""
        return generate_records(self, first_user, count)

    def to_json(self) -> dict[str, Any]:
        return {
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
    def from_json(cls, data: Mapping[str, Any]) -> "PopulationSpec":
        try:
            return cls(
                ConceptClass(str(data["concept_class"]), int(data["d"])),
                concept_from_json(data["target"]),
                int(data["size"]),
                float(data["budget"]),
                int(data["seed"]),
                distribution_from_json(data.get("distribution", {"kind": "uniform"})),
                float(data.get("label_noise", 0.0)),
                bool(data.get("secure", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ParameterError):
                raise
            raise ParameterError(f"malformed population spec: {exc}") from None


def generate_records(spec: PopulationSpec, first_user: int, count: int) -> np.ndarray:
    """Records of users first_user .. first_user+count−1, shape (count, schema.width), int16.

    Features come from draw stream RECORDS/request 0, label noise from RECORDS/request 1: both
    keyed by the population seed only (never the secure flag), so records are reproducible.
    """
    if first_user < 0 or count < 0 or first_user + count > spec.size:
        raise ParameterError(f"users {first_user}..{first_user + count - 1} are outside the population 0..{spec.size - 1}")
    users = np.arange(first_user, first_user + count, dtype=np.int64)
    source = RandomSource(seed=int(spec.seed))
    features = spec.distribution.sample(spec.schema, source.for_request(Streams.RECORDS, 0, users), spec.target)
    labels = spec.target.predict(features).astype(np.int64)
    if spec.label_noise > 0:
        flip = source.for_request(Streams.RECORDS, 1, users).uniform(0) < spec.label_noise
        label_field = spec.schema.fields[-1]
        # {0,1} labels flip to 1−y; ±1 labels to −y.
        flipped = -labels if label_field.low == -1 else 1 - labels
        labels = np.where(flip, flipped, labels)
    return np.concatenate([features, labels[:, None]], axis=1).astype(RECORD_DTYPE)
