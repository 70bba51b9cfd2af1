"""Concept classes, example distributions, hypotheses and the ``Referee`` (KLNRS §3, §5).

A labeled example is a record: the *features* (every schema field but the last) and the label
(the last field, ``y``). A ``Concept`` labels features; a ``ConceptClass`` fixes the schema and
enumerates or draws targets; a ``Distribution`` draws features from per-user uniforms (so records
are a pure function of the population seed and the user id). A ``Hypothesis`` is anything with a
vectorized ``predict(features)``. The ``Referee`` knows D and the target and computes error(h) =
Pr_{(x,y)~D}[h(x) ≠ y] exactly (closed form or enumeration); learners and the aggregator never
see it.

Classes: PARITY (§3.2, labels in {0,1}), MASKED-PARITY (§5, features (x, i, b), labels ±1,
any d ≥ 2; KLNRS take a power of 2), POINT and THRESHOLD on {0,1}^d (labels in {0,1}), CONJUNCTION of literals.
Optional label noise (each label flipped w.p. η) gives the agnostic setting (Definition 3.2).
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ldp.core.errors import ParameterError, UnknownKindError
from ldp.core.rng import UserRandomness
from ldp.core.schema import Field, Schema

__all__ = [
    "Hypothesis",
    "Concept",
    "ConceptClass",
    "Distribution",
    "Uniform",
    "ProductBernoulli",
    "PointMixture",
    "ParityConcept",
    "MaskedParityConcept",
    "PointConcept",
    "ThresholdConcept",
    "ConjunctionConcept",
    "ConstantHypothesis",
    "concept_class",
    "Referee",
    "bits_to_int",
    "int_to_bits",
    "check_labeled_examples",
]


@runtime_checkable
class Hypothesis(Protocol):
    """Anything that labels features: ``predict(features) -> labels`` (vectorized)."""

    def predict(self, features: np.ndarray) -> np.ndarray: ...


def bits_to_int(bits: np.ndarray) -> np.ndarray:
    """Rows of bits (most significant first) → integers (d ≤ 62)."""
    bits = np.asarray(bits, dtype=np.int64)
    weights = 1 << np.arange(bits.shape[-1] - 1, -1, -1, dtype=np.int64)
    return bits @ weights


def int_to_bits(values: np.ndarray | int, d: int) -> np.ndarray:
    """Integers → rows of d bits, most significant first."""
    values = np.asarray(values, dtype=np.int64)
    return ((values[..., None] >> np.arange(d - 1, -1, -1, dtype=np.int64)) & 1).astype(np.int16)


# --- concepts (targets and proper hypotheses are the same objects) ---


def _parity_bits(features: np.ndarray, r: tuple[int, ...]) -> np.ndarray:
    """⟨r, x⟩ mod 2 for every row, x = the first len(r) columns: int16 in {0, 1}.

    For integer columns the sum mod 2 is the XOR of the low bits of the columns where r_j = 1
    (two's complement keeps x mod 2 in the low bit), so no int64 copy of x is made and no matrix
    product is taken (3× faster; record generation spends most of its time here). Other dtypes
    take the product. Either way the value is ``(x @ r) & 1`` for r ∈ {0,1}^d, bit for bit."""
    width = len(r)
    if not np.can_cast(features.dtype, np.int64) or any(v not in (0, 1) for v in r):
        return ((features[:, :width] @ np.asarray(r, dtype=np.int64)) & 1).astype(np.int16)
    support = [j for j, v in enumerate(r) if v]
    acc = np.zeros(len(features), dtype=np.int16)
    for j in support:
        np.bitwise_xor(acc, features[:, j], out=acc, casting="unsafe")
    acc &= 1
    return acc




class Concept(ABC):
    """A labeling function c: features → labels, usable as a hypothesis."""

    @abstractmethod
    def predict(self, features: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ConstantHypothesis(Concept):
    """h(x) = label for every x (e.g. a learner's fallback)."""

    label: int

    def predict(self, features: np.ndarray) -> np.ndarray:
        return np.full(len(features), self.label, dtype=np.int16)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "constant", "label": int(self.label)}


@dataclass(frozen=True)
class ParityConcept(Concept):
    """c_r(x) = ⟨r, x⟩ mod 2 (KLNRS §3.2). ``r`` is a tuple of d bits."""

    r: tuple[int, ...]

    def predict(self, features: np.ndarray) -> np.ndarray:
        return _parity_bits(features, self.r)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "parity", "r": list(self.r)}


@dataclass(frozen=True)
class MaskedParityConcept(Concept):
    """c_{r,a}(x, i, b) = (−1)^{⟨r,x⟩+a} if b = 0, (−1)^{r_i} if b = 1 (KLNRS §5)."""

    r: tuple[int, ...]
    a: int

    def predict(self, features: np.ndarray) -> np.ndarray:
        d = len(self.r)
        r = np.asarray(self.r, dtype=np.int64)
        i, b = features[:, d], features[:, d + 1]
        masked = _parity_bits(features, self.r)
        if self.a & 1:
            masked ^= 1  # (⟨r,x⟩ + a) mod 2
        revealed = r[i.astype(np.int64)]
        bit = np.where(b == 0, masked, revealed)
        return (1 - 2 * bit).astype(np.int16)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "masked_parity", "r": list(self.r), "a": int(self.a)}


@dataclass(frozen=True)
class PointConcept(Concept):
    """c_p(x) = 1 iff x = p, for p ∈ {0,1}^d (POINT_d)."""

    p: tuple[int, ...]

    def predict(self, features: np.ndarray) -> np.ndarray:
        return np.all(features[:, : len(self.p)] == np.asarray(self.p), axis=1).astype(np.int16)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "point", "p": list(self.p)}


@dataclass(frozen=True)
class ThresholdConcept(Concept):
    """c_t(x) = 1 iff int(x) < t, x read as a d-bit integer, most significant bit first
    (THRESH_d; t ∈ [0, 2^d])."""

    t: int
    d: int

    def predict(self, features: np.ndarray) -> np.ndarray:
        return (bits_to_int(features[:, : self.d]) < self.t).astype(np.int16)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "threshold", "t": int(self.t), "d": self.d}


@dataclass(frozen=True)
class ConjunctionConcept(Concept):
    """c(x) = AND of literals x_j = v_j over ``literals`` = ((j, v), ...); empty: always 1."""

    literals: tuple[tuple[int, int], ...]

    def predict(self, features: np.ndarray) -> np.ndarray:
        out = np.ones(len(features), dtype=bool)
        for j, v in self.literals:
            out &= features[:, j] == v
        return out.astype(np.int16)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "conjunction", "literals": [list(lit) for lit in self.literals]}


def _json_fields(data: object, what: str, fields: Mapping[str, str]) -> dict[str, Any]:
    """``data`` (a JSON object read from a file) as a dict holding exactly ``fields`` besides
    "kind", each of its JSON type: "int", "float" (an int is fine too), "bits" (a list of 0/1),
    "ints" or "pairs" (a list of [int, int]). A ParameterError names the key and what it holds."""
    if not isinstance(data, Mapping):
        raise ParameterError(f"{what} must be a JSON object, got {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in fields and k != "kind")
    if unknown:
        raise ParameterError(f"{what} has unknown keys {unknown}; it takes {['kind', *fields]}")
    out: dict[str, Any] = {}
    for key, kind in fields.items():
        if key not in data:
            raise ParameterError(f"{what} has no {key!r} key; it takes {['kind', *fields]}")
        value = data[key]

        def is_int(v: object) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        ok = {
            "int": is_int(value),
            "float": is_int(value) or (isinstance(value, float) and math.isfinite(value)),
            "bits": isinstance(value, list) and all(is_int(v) and v in (0, 1) for v in value),
            "pairs": isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 and all(is_int(v) for v in p) for p in value),
        }[kind]
        if not ok:
            allowed = {"int": "an integer", "float": "a finite number", "bits": "a list of 0s and 1s", "pairs": "a list of [index, value] pairs of integers"}[kind]
            raise ParameterError(f"{what} key {key!r} must be {allowed}, got {value!r}"[:300])
        out[key] = value
    return out


_CONCEPT_FIELDS: dict[str, dict[str, str]] = {
    "parity": {"r": "bits"},
    "masked_parity": {"r": "bits", "a": "int"},
    "point": {"p": "bits"},
    "threshold": {"t": "int", "d": "int"},
    "conjunction": {"literals": "pairs"},
    "constant": {"label": "int"},
}


def concept_from_json(data: Mapping[str, Any], what: str = "a concept") -> Concept:
    """The concept ``to_json`` wrote: exactly its keys, each of its type, or a ParameterError
    naming the key (``what`` says where it was read, e.g. "population spec key 'target'")."""
    kind = data.get("kind") if isinstance(data, Mapping) else None
    if kind not in _CONCEPT_FIELDS:
        if not isinstance(data, Mapping):
            raise ParameterError(f"{what} must be a JSON object, got {type(data).__name__}")
        raise UnknownKindError(f"{what}: unknown concept kind {kind!r}; known: {sorted(_CONCEPT_FIELDS)}")
    f = _json_fields(data, f"{what} ({kind})", _CONCEPT_FIELDS[kind])
    if kind == "parity":
        return ParityConcept(tuple(f["r"]))
    if kind == "masked_parity":
        return MaskedParityConcept(tuple(f["r"]), f["a"])
    if kind == "point":
        return PointConcept(tuple(f["p"]))
    if kind == "threshold":
        return ThresholdConcept(f["t"], f["d"])
    if kind == "conjunction":
        return ConjunctionConcept(tuple((j, v) for j, v in f["literals"]))
    return ConstantHypothesis(f["label"])


# --- distributions over features ---


class Distribution(ABC):
    """A distribution D over feature vectors, drawn from per-user uniforms."""

    @abstractmethod
    def sample(self, schema: Schema, randomness: UserRandomness, target: Concept) -> np.ndarray:
        """Features for each user: int16 array (users, feature width)."""

    def sample_into(self, schema: Schema, randomness: UserRandomness, target: Concept, out: np.ndarray) -> None:
        """``sample``, written into ``out`` (shape (users, feature width), e.g. a view of the
        records being built): the same values; ``Uniform`` writes them in place, without a copy."""
        out[...] = self.sample(schema, randomness, target)

    @abstractmethod
    def probabilities(self, schema: Schema, features: np.ndarray, target: Concept) -> np.ndarray:
        """Exact Pr_D[features] for every row (for the Referee's enumeration)."""

    @abstractmethod
    def to_json(self) -> dict[str, Any]: ...


def _feature_fields(schema: Schema) -> tuple[Field, ...]:
    return schema.fields[:-1]


@dataclass(frozen=True)
class Uniform(Distribution):
    """Every feature column uniform over its field's range, independently.

    A column with k > 2 values takes ⌊u·k⌋ of one uniform draw u; a {0,1} field takes its bits
    64 at a time from one 64-bit draw (bit 63 − j for column j), so x ∈ {0,1}^24 costs one AES
    block per user instead of 24 (records are a function of (seed, user) all the same)."""

    def sample(self, schema: Schema, randomness: UserRandomness, target: Concept) -> np.ndarray:
        out = np.empty((len(randomness.users), schema.width - schema.fields[-1].length), dtype=np.int16)
        self.sample_into(schema, randomness, target, out)
        return out

    def sample_into(self, schema: Schema, randomness: UserRandomness, target: Concept, out: np.ndarray) -> None:
        column = draw = 0
        for f in _feature_fields(schema):
            plain = f.low == 0 and f.step == 1  # the value is the draw itself: no arithmetic
            if f.cardinality == 2:
                for lo in range(0, f.length, 64):
                    take = min(64, f.length - lo)
                    words = randomness.bits(draw)
                    if take == 1 and plain:  # one bit: the top one, without unpacking eight bytes
                        out[:, column] = words >> np.uint64(63)
                    else:
                        # big-endian bytes, unpacked most significant bit first: column j = bit 63 − j
                        bits = np.unpackbits(words.astype(">u8").view(np.uint8).reshape(-1, 8), axis=1, count=take)
                        out[:, column : column + take] = bits if plain else f.low + f.step * bits
                    draw += 1
                    column += take
                continue
            for _ in range(f.length):
                u = randomness.uniform(draw)
                u *= f.cardinality  # in place: the same product as u * k
                value = u.astype(np.int64)
                np.minimum(value, f.cardinality - 1, out=value)
                out[:, column] = value if plain else f.low + f.step * value
                draw += 1
                column += 1

    def probabilities(self, schema: Schema, features: np.ndarray, target: Concept) -> np.ndarray:
        size = math.prod(f.cardinality**f.length for f in _feature_fields(schema))
        return np.full(len(features), 1.0 / size)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "uniform"}


@dataclass(frozen=True)
class ProductBernoulli(Distribution):
    """Bit features, each 1 independently with probability ``p`` (schema of one bit field x)."""

    p: float

    def __post_init__(self) -> None:
        value = self.p
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) or not 0.0 < value < 1.0:
            raise ParameterError(f"ProductBernoulli: p must be a number in (0, 1), got {value!r}")

    def sample(self, schema: Schema, randomness: UserRandomness, target: Concept) -> np.ndarray:
        width = schema.width - 1
        return np.stack([(randomness.uniform(j) < self.p) for j in range(width)], axis=1).astype(np.int16)

    def probabilities(self, schema: Schema, features: np.ndarray, target: Concept) -> np.ndarray:
        ones = features.sum(axis=1)
        width = features.shape[1]
        return self.p**ones * (1 - self.p) ** (width - ones)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "product_bernoulli", "p": self.p}


@dataclass(frozen=True)
class PointMixture(Distribution):
    """With probability ``weight`` the target point p itself, otherwise uniform on {0,1}^d.

    The usual hard-but-learnable distribution for POINT_d: positives are frequent enough to matter.
    """

    weight: float

    def __post_init__(self) -> None:
        value = self.weight
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) or not 0.0 < value < 1.0:
            raise ParameterError(f"PointMixture: weight must be a number in (0, 1), got {value!r}")

    def sample(self, schema: Schema, randomness: UserRandomness, target: Concept) -> np.ndarray:
        if not isinstance(target, PointConcept):
            raise ParameterError("PointMixture needs a POINT target")
        uniform = Uniform().sample(schema, randomness, target)
        at_point = randomness.uniform(schema.width + 1) < self.weight
        uniform[at_point] = np.asarray(target.p, dtype=np.int16)
        return uniform

    def probabilities(self, schema: Schema, features: np.ndarray, target: Concept) -> np.ndarray:
        assert isinstance(target, PointConcept)
        d = features.shape[1]
        base = (1 - self.weight) / 2.0**d
        return base + self.weight * np.all(features == np.asarray(target.p), axis=1)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "point_mixture", "weight": self.weight}


_DISTRIBUTION_FIELDS: dict[str, dict[str, str]] = {"uniform": {}, "product_bernoulli": {"p": "float"}, "point_mixture": {"weight": "float"}}


def distribution_from_json(data: Mapping[str, Any], what: str = "a distribution") -> Distribution:
    """The distribution ``to_json`` wrote: exactly its keys, each of its type, or a
    ParameterError naming the key."""
    kind = data.get("kind") if isinstance(data, Mapping) else None
    if kind not in _DISTRIBUTION_FIELDS:
        if not isinstance(data, Mapping):
            raise ParameterError(f"{what} must be a JSON object, got {type(data).__name__}")
        raise UnknownKindError(f"{what}: unknown distribution kind {kind!r}; known: uniform, product_bernoulli, point_mixture")
    f = _json_fields(data, f"{what} ({kind})", _DISTRIBUTION_FIELDS[kind])
    if kind == "product_bernoulli":
        return ProductBernoulli(float(f["p"]))
    if kind == "point_mixture":
        return PointMixture(float(f["weight"]))
    return Uniform()


# --- concept classes ---


MAX_D = 1 << 16


@dataclass(frozen=True)
class ConceptClass:
    """A family C_d: its name, dimension d, the record schema, and how to draw a target.

    The schema is fixed by the name: PARITY, POINT, THRESHOLD and CONJUNCTION records are
    (x ∈ {0,1}^d, y ∈ {0,1}); MASKED-PARITY records (KLNRS §5) are (x ∈ {0,1}^d, i ∈ [0, d−1],
    b ∈ {0,1}, y ∈ {−1, +1}). KLNRS §5 take d a power of 2 so that i is log d uniform bits; i is
    a field with d values here, so any d ≥ 2 gives the same class (≤ 62: candidates index an
    int64). ``concept_class(name, d)`` is the usual way to build one.

    Parameters
    ----------
    name : str
        One of ``"conjunction"``, ``"masked_parity"``, ``"parity"``, ``"point"``, ``"threshold"``.
    d : int
        The dimension, ≥ 1; MASKED-PARITY needs 2 ≤ d ≤ 62 (KLNRS §5), THRESHOLD d ≤ 62.

    Attributes
    ----------
    schema : Schema
        The record schema (features, then the label ``y`` as the last field); set from ``name``.

    Raises
    ------
    UnknownKindError
        ``name`` is not a known class (an ``LDPError`` and a ``KeyError``).
    ParameterError
        ``name`` is not a string, or ``d`` is not an integer in the range the class allows
        (at most 2^16 for every class).

    Examples
    --------
    >>> import ldp
    >>> cc = ldp.ConceptClass("masked_parity", 4)
    >>> [(f.name, f.length, f.low, f.high) for f in cc.schema]
    [('x', 4, 0, 1), ('i', 1, 0, 3), ('b', 1, 0, 1), ('y', 1, -1, 1)]
    >>> cc.feature_width  # x, i and b
    6
    >>> ldp.ConceptClass("masked_parity", 1)
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: masked_parity: d must be in [2, 62] (KLNRS §5), got 1
    """

    name: str
    d: int
    schema: Schema = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ParameterError(f"a concept class name must be a string, one of {sorted(_SCHEMAS)}; got {self.name!r}")
        if self.name not in _SCHEMAS:
            raise UnknownKindError(f"unknown concept class {self.name!r}; known: {sorted(_SCHEMAS)}")
        if isinstance(self.d, (bool, np.bool_)) or not isinstance(self.d, (int, np.integer)):
            raise ParameterError(f"{self.name}: d must be an integer ≥ 1, got {self.d!r}")
        if self.d < 1:
            raise ParameterError(f"{self.name}: d must be ≥ 1, got {self.d}")
        if self.d > MAX_D:
            # one int16 column per bit: 2^16 columns is already 128 KiB per record
            raise ParameterError(f"{self.name}: d must be ≤ 2^16 = {MAX_D}, got {self.d}")
        object.__setattr__(self, "d", int(self.d))
        if self.name == "masked_parity" and not 2 <= self.d <= 62:
            # KLNRS §5 take d a power of 2 so that i is log d uniform bits; i is a field with d
            # values here, so any d ≥ 2 gives the same class (≤ 62: candidates index an int64).
            raise ParameterError(f"masked_parity: d must be in [2, 62] (KLNRS §5), got {self.d}")
        if self.name == "threshold" and self.d > 62:
            raise ParameterError(f"threshold: d must be ≤ 62, got {self.d}")
        object.__setattr__(self, "schema", _SCHEMAS[self.name](self.d))

    @property
    def feature_width(self) -> int:
        """Number of feature columns: every record column but the label's."""
        return self.schema.width - 1

    def random_target(self, rng: np.random.Generator) -> Concept:
        """Draw a target concept of this class uniformly from its parameters.

        PARITY: r uniform in {0,1}^d; MASKED-PARITY: r uniform in {0,1}^d and a uniform bit a;
        POINT: p uniform in {0,1}^d; THRESHOLD: t uniform in [0, 2^d]; CONJUNCTION: each variable
        appears positively, negatively or not, with probabilities 1/4, 1/4, 1/2.

        Parameters
        ----------
        rng : numpy.random.Generator
            The experiment's randomness (e.g. ``ldp.generator(seed, "target")``).

        Returns
        -------
        Concept
            A ``ParityConcept``, ``MaskedParityConcept``, ``PointConcept``, ``ThresholdConcept``
            or ``ConjunctionConcept``, matching the class.

        Examples
        --------
        >>> import ldp
        >>> cc = ldp.concept_class("parity", 5)
        >>> target = cc.random_target(ldp.generator(0, "target"))
        >>> type(target).__name__, len(target.r)
        ('ParityConcept', 5)
        >>> target == cc.random_target(ldp.generator(0, "target"))  # same seed and labels, same target
        True
        """
        if not isinstance(rng, np.random.Generator):
            raise ParameterError(f"random_target needs a numpy Generator (e.g. ldp.generator(seed, 'target')), got {rng!r}")
        d = self.d
        if self.name == "parity":
            return ParityConcept(tuple(int(v) for v in rng.integers(0, 2, d)))
        if self.name == "masked_parity":
            return MaskedParityConcept(tuple(int(v) for v in rng.integers(0, 2, d)), int(rng.integers(0, 2)))
        if self.name == "point":
            return PointConcept(tuple(int(v) for v in rng.integers(0, 2, d)))
        if self.name == "threshold":
            return ThresholdConcept(int(rng.integers(0, 2**d + 1)), d)
        # conjunction: each variable appears positively, negatively or not, w.p. 1/4, 1/4, 1/2
        kinds = rng.integers(0, 4, d)
        return ConjunctionConcept(tuple((j, int(k)) for j, k in enumerate(kinds) if k < 2))


    def check_target(self, target: Concept) -> None:
        """A ParameterError unless ``target`` is a concept of this class in this dimension (or a
        constant): what a spec read from a file must hold before records are made from it."""
        expected = {"parity": ParityConcept, "masked_parity": MaskedParityConcept, "point": PointConcept, "threshold": ThresholdConcept, "conjunction": ConjunctionConcept}[self.name]
        if isinstance(target, ConstantHypothesis):
            return
        if not isinstance(target, expected):
            raise ParameterError(f"a {self.name} class needs a {self.name} target, got {target.to_json().get('kind')!r}")
        d = self.d
        if isinstance(target, (ParityConcept, MaskedParityConcept, PointConcept)):
            bits = target.p if isinstance(target, PointConcept) else target.r
            if len(bits) != d:
                raise ParameterError(f"a {self.name} target in dimension d = {d} needs {d} bits, got {len(bits)}")
        if isinstance(target, MaskedParityConcept) and target.a not in (0, 1):
            raise ParameterError(f"a masked_parity target's bit a must be 0 or 1, got {target.a}")
        if isinstance(target, ThresholdConcept) and (target.d != d or not 0 <= target.t <= 2**d):
            raise ParameterError(f"a threshold target in dimension d = {d} needs d = {d} and t in [0, 2^{d}], got d = {target.d}, t = {target.t}")
        if isinstance(target, ConjunctionConcept) and any(not 0 <= j < d or v not in (0, 1) for j, v in target.literals):
            raise ParameterError(f"a conjunction target in dimension d = {d} needs literals [j, v] with 0 ≤ j < {d} and v in {{0, 1}}, got {[list(lit) for lit in target.literals]}")


def _bits_schema(d: int) -> Schema:
    return Schema((Field("x", d, 0, 1), Field("y", 1, 0, 1)))


def _masked_parity_schema(d: int) -> Schema:
    return Schema((Field("x", d, 0, 1), Field("i", 1, 0, d - 1), Field("b", 1, 0, 1), Field("y", 1, -1, 1, step=2)))


_SCHEMAS = {
    "parity": _bits_schema,
    "point": _bits_schema,
    "threshold": _bits_schema,
    "conjunction": _bits_schema,
    "masked_parity": _masked_parity_schema,
}


def concept_class(name: str, d: int) -> ConceptClass:
    """The concept class ``name`` in dimension ``d`` (``ConceptClass(name, d)``).

    Classes: PARITY (KLNRS §3.2, labels in {0,1}), MASKED-PARITY (§5, features (x, i, b),
    labels ±1, any d ≥ 2; KLNRS take a power of 2), POINT and THRESHOLD on {0,1}^d (labels in
    {0,1}), CONJUNCTION of literals.

    Parameters
    ----------
    name : str
        ``"parity"``, ``"masked_parity"``, ``"point"``, ``"threshold"`` or ``"conjunction"``.
    d : int
        The dimension of x ∈ {0,1}^d: ≥ 1 (MASKED-PARITY: 2 ≤ d ≤ 62; THRESHOLD: d ≤ 62).

    Returns
    -------
    ConceptClass
        The class, with its record schema and ``random_target``.

    Raises
    ------
    UnknownKindError
        ``name`` is not a known class (an ``LDPError`` and a ``KeyError``).
    ParameterError
        ``d`` is outside the range the class allows.

    Examples
    --------
    >>> import ldp
    >>> cc = ldp.concept_class("parity", 3)
    >>> [(f.name, f.length) for f in cc.schema]
    [('x', 3), ('y', 1)]
    >>> ldp.concept_class("parity", 0)
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: parity: d must be ≥ 1, got 0
    >>> ldp.concept_class("halfspace", 3)
    Traceback (most recent call last):
    ...
    ldp.core.errors.UnknownKindError: unknown concept class 'halfspace'; known: [...]
    """
    return ConceptClass(name, d)


def check_labeled_examples(concept_class: object, target: object, distribution: object, label_noise: object) -> None:
    """The one check of what defines labeled examples (x ~ D, y = c(x) flipped w.p. η), for
    ``Referee`` and ``PopulationSpec``: a ParameterError naming the first argument of the wrong
    type or out of range."""
    if not isinstance(concept_class, ConceptClass):
        raise ParameterError(f"concept_class must be a ConceptClass (e.g. concept_class('parity', 8)), got {concept_class!r}")
    if not isinstance(target, Concept):
        raise ParameterError(f"target must be a Concept (e.g. concept_class(...).random_target(rng)), got {target!r}")
    if not isinstance(distribution, Distribution):
        raise ParameterError(f"distribution must be a Distribution (e.g. Uniform()), got {distribution!r}")
    noise = label_noise
    if isinstance(noise, (bool, np.bool_)) or not isinstance(noise, (int, float, np.integer, np.floating)) or not 0.0 <= noise < 0.5:
        raise ParameterError(f"label_noise must be a number in [0, 0.5), got {noise!r}")


# --- the referee ---

MAX_ENUMERATION = 1 << 22


@dataclass(frozen=True)
class Referee:
    """Ground truth for measuring a learner: error(h) = Pr_{(x,y)~D}[h(x) ≠ y], exactly.

    With label noise η the labels are flipped w.p. η independently of x, so
    error(h) = η + (1 − 2η)·Pr_D[h(x) ≠ c(x)] (the agnostic error; ``clean_error`` gives the
    second factor). Closed forms for PARITY and MASKED-PARITY under the uniform distribution;
    exact enumeration of the feature domain otherwise (up to 2^22 points). The Referee knows D
    and the target; learners and the aggregator never see it (``PopulationSpec.referee()`` is
    the experiment's copy).

    Parameters
    ----------
    concept_class : ConceptClass
        The class (its schema defines the feature domain).
    target : Concept
        The target concept c.
    distribution : Distribution, default Uniform()
        The distribution D of the features.
    label_noise : float, default 0.0
        η: each label is flipped with this probability, independently of x.

    Examples
    --------
    >>> import ldp
    >>> from ldp.core.concepts import ConstantHypothesis, ParityConcept
    >>> cc = ldp.concept_class("parity", 3)
    >>> referee = ldp.Referee(cc, ParityConcept((1, 0, 1)), label_noise=0.1)
    >>> referee.error(ParityConcept((1, 0, 1))), referee.clean_error(ParityConcept((1, 0, 1)))
    (0.1, 0.0)
    >>> round(referee.error(ConstantHypothesis(0)), 12)  # wrong on half the inputs
    0.5
    """

    concept_class: ConceptClass
    target: Concept
    distribution: Distribution = field(default_factory=Uniform)
    label_noise: float = 0.0

    def __post_init__(self) -> None:
        check_labeled_examples(self.concept_class, self.target, self.distribution, self.label_noise)

    def error(self, hypothesis: Hypothesis) -> float:
        """error(h) = Pr_{(x,y)~D}[h(x) ≠ y] = η + (1 − 2η)·``clean_error(h)``, exactly.

        Parameters
        ----------
        hypothesis : Hypothesis
            Anything with a vectorized ``predict(features)``.

        Returns
        -------
        float
            The error against the (noisy) labels.

        Raises
        ------
        ParameterError
            No closed form applies and the feature domain has more than 2^22 points.

        Examples
        --------
        >>> import ldp
        >>> from ldp.core.concepts import ParityConcept
        >>> referee = ldp.Referee(ldp.concept_class("parity", 4), ParityConcept((1, 1, 0, 0)))
        >>> referee.error(ParityConcept((1, 1, 0, 0))), referee.error(ParityConcept((0, 1, 0, 0)))
        (0.0, 0.5)
        """
        clean = self.clean_error(hypothesis)
        return self.label_noise + (1.0 - 2.0 * self.label_noise) * clean

    def clean_error(self, hypothesis: Hypothesis) -> float:
        """Pr_{x~D}[h(x) ≠ c(x)]: the disagreement with the target, without label noise.

        Closed form for PARITY and MASKED-PARITY hypotheses against a target of the same kind
        under the uniform distribution; otherwise exact enumeration of the feature domain.

        Parameters
        ----------
        hypothesis : Hypothesis
            Anything with a vectorized ``predict(features)``.

        Returns
        -------
        float
            The probability, exactly (up to float rounding of the sum).

        Raises
        ------
        ParameterError
            Enumeration is needed and the feature domain has more than 2^22 points.

        Examples
        --------
        >>> import ldp
        >>> from ldp.core.concepts import ConstantHypothesis, PointConcept
        >>> referee = ldp.Referee(ldp.concept_class("point", 3), PointConcept((1, 0, 1)), label_noise=0.2)
        >>> referee.clean_error(ConstantHypothesis(0))  # wrong only at x = p: 1/8 of the cube
        0.125
        """
        if not isinstance(hypothesis, Hypothesis):
            raise ParameterError(f"a hypothesis needs a vectorized predict(features) (e.g. a Concept), got {hypothesis!r}")
        closed = self._closed_form(hypothesis)
        if closed is not None:
            return closed
        features = self._enumerate()
        probs = self.distribution.probabilities(self.concept_class.schema, features, self.target)
        wrong = np.asarray(hypothesis.predict(features)) != self.target.predict(features)
        return float(np.sum(probs * wrong))

    def _closed_form(self, h: Hypothesis) -> float | None:
        t = self.target
        if not isinstance(self.distribution, Uniform):
            return None
        if isinstance(t, ParityConcept) and isinstance(h, ParityConcept):
            return 0.0 if h.r == t.r else 0.5
        if isinstance(t, MaskedParityConcept) and isinstance(h, MaskedParityConcept):
            d = len(t.r)
            # b = 0 half: equal parities agree (a = a') or always disagree; different r: 1/2.
            if h.r == t.r:
                masked = 0.0 if h.a == t.a else 1.0
            else:
                masked = 0.5
            revealed = float(np.mean(np.asarray(h.r) != np.asarray(t.r)))
            del d
            return 0.5 * masked + 0.5 * revealed
        return None

    def _enumerate(self) -> np.ndarray:
        fields = _feature_fields(self.concept_class.schema)
        size = math.prod(f.cardinality**f.length for f in fields)
        if size > MAX_ENUMERATION:
            raise ParameterError(
                f"the feature domain has {size} points > 2^22; the Referee computes exact errors only in closed form there"
            )
        columns = []
        for f in fields:
            columns += [f.values()] * f.length
        grid = np.array(list(itertools.product(*columns)), dtype=np.int16) if len(columns) <= 8 else _product_grid(columns)
        return grid


def _product_grid(columns: list[np.ndarray]) -> np.ndarray:
    mesh = np.meshgrid(*columns, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1).astype(np.int16)
