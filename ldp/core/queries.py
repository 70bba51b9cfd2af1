"""Query functions g: Z → [−b, b], named, parameterized and registered (KLNRS §4.1).

Only registered kinds can be named on the wire, so a client evaluates nothing it does not know.
A query is described by a JSON-able ``QuerySpec(name, params)``; ``make_query(spec, schema)``
validates it against a record ``Schema`` and returns a ``Query`` whose ``evaluate`` is vectorized
over records. Every query declares its bound b and, when finite, the set of values it can take
(randomized response needs the latter, the exact audit enumerates it).

Kinds: ``field`` (one column of a field, e.g. a bit of x), ``label``, ``conjunction`` of
literals, ``parity`` (−1)^⟨m, x⟩ over chosen bits, ``bent`` (the inner-product bent function),
``user_parity`` (a per-user family: each group of users gets its own parity, for non-interactive
rounds that ask 2^d questions at once), ``product`` and ``affine`` combinations, ``record``
(the whole row, for randomizers that randomize a record once), and ``prefix_index`` (which of a
public candidate set the leading bits of a field are: a round of prefix-extending heavy hitters).

Write specs with the builders of ``ldp.core.query_specs`` (``field_query``, ``parity``, ...).
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ldp.core.errors import LDPError, ParameterError, UnknownKindError
from ldp.core.schema import Schema

__all__ = [
    "QuerySpec",
    "Query",
    "FieldReads",
    "register_query",
    "query_reads",
    "make_query",
    "query_kinds",
    "user_parity_groups",
    "user_parity_candidate",
]

MAX_FINITE_VALUES = 4096


@dataclass(frozen=True)
class QuerySpec:
    """A query by name and JSON-able parameters; what travels on the wire.

    Only registered kinds can be named on the wire, so a client evaluates nothing it does not
    know: ``make_query(spec, schema)`` (the users' side) validates the spec against a record
    ``Schema`` and returns a ``Query`` whose ``evaluate`` is vectorized over records. Build specs
    with the builders (``field_query``, ``parity``, ...) rather than by hand.

    Parameters
    ----------
    name : str
        The registered kind (an identifier), e.g. ``"field"``; ``query_kinds()`` lists them.
    params : mapping of str to JSON-able values, default {}
        The kind's parameters.

    Raises
    ------
    ParameterError
        ``name`` is not an identifier, or ``params`` is not a mapping with string keys. Unknown
        kinds and parameters a kind does not accept are refused by ``make_query``.

    Examples
    --------
    >>> import ldp
    >>> spec = ldp.QuerySpec("field", {"field": "x", "index": 1})
    >>> spec == ldp.field_query("x", 1), spec.to_json()
    (True, {'name': 'field', 'params': {'field': 'x', 'index': 1}})
    >>> ldp.QuerySpec.from_json(spec.to_json()) == spec
    True
    >>> ldp.QuerySpec("two words")
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: a query name must be a non-empty identifier (one of [...]), got 'two words'
    """

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """What can be checked without a schema or the registry: the name is an identifier
        (e.g. "field"), the params a mapping with string keys. Unknown kinds and parameters a
        kind does not accept are refused by ``make_query`` (the users' side)."""
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ParameterError(f"a query name must be a non-empty identifier (one of {query_kinds()}), got {self.name!r}")
        if not isinstance(self.params, Mapping):
            raise ParameterError(f"query {self.name!r}: params must be a mapping (a dict), got {type(self.params).__name__} {self.params!r}")
        bad = [k for k in self.params if not isinstance(k, str)]
        if bad:
            raise ParameterError(f"query {self.name!r}: parameter names must be strings, got {bad[0]!r}")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "params": _jsonable(self.params)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QuerySpec:
        if not isinstance(data, Mapping) or "name" not in data:
            raise ParameterError(f"a query spec must be an object with a 'name', got {data!r}")
        params = data.get("params", {})
        if not isinstance(params, Mapping):
            raise ParameterError(f"query params must be an object, got {params!r}")
        return cls(str(data["name"]), dict(params))


def _jsonable(value: Any) -> Any:
    if isinstance(value, QuerySpec):
        return value.to_json()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


@dataclass(frozen=True)
class FieldReads:
    """The record columns a query spec names, read from its params alone (no schema).

    A kind declares them (``Query.reads``) where it is defined, so that whoever checks a spec
    against a schema before sending it (``ldp.local.session.Session.round``) derives the check
    from the kind instead of writing each kind out again. Only well-typed references are kept:
    an ill-typed spec is the users' side's to refuse (it checks every query again).

    Attributes
    ----------
    columns : tuple of (str, int)
        (field, index) pairs the spec reads.
    subqueries : tuple
        Nested query specs (``QuerySpec`` or their JSON), whose reads count too.
    """

    columns: tuple[tuple[str, int], ...] = ()
    subqueries: tuple[Any, ...] = ()

    @classmethod
    def of(cls, columns: Iterable[tuple[Any, Any]] = (), subqueries: Iterable[Any] = ()) -> FieldReads:
        """The reads, keeping the (field, index) pairs with a string field and an integer index."""
        typed = tuple(
            (name, int(index))
            for name, index in columns
            if isinstance(name, str) and not isinstance(index, (bool, np.bool_)) and isinstance(index, (int, np.integer))
        )
        return cls(typed, tuple(subqueries))


def _sequence(value: Any) -> list[Any]:
    """A list/tuple parameter as a list; anything else (ill-typed) as no entries."""
    return list(value) if isinstance(value, (list, tuple)) else []


class Query(ABC):
    """A validated query bound to a schema: g(z) for every record z, with |g| ≤ bound."""

    name: ClassVar[str]

    @classmethod
    def reads(cls, params: Mapping[str, Any]) -> FieldReads:
        """The record columns a spec of this kind names (``FieldReads``), from its params alone.

        Never raises: ill-typed params name nothing (the users' side refuses them). The default
        names nothing; every kind that reads a named field overrides it."""
        return FieldReads()

    @property
    def per_user(self) -> bool:
        """Whether ``evaluate`` needs the users' ids (a per-user family such as ``user_parity``,
        or a query built from one); the users' side builds an id array only then."""
        return False

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        self.spec = spec
        self.schema = schema

    @property
    @abstractmethod
    def bound(self) -> float:
        """b with g: Z → [−b, b]."""

    @abstractmethod
    def values(self) -> np.ndarray | None:
        """The sorted finite set of values g can take, or None when it is not small and finite."""

    @abstractmethod
    def evaluate(self, records: np.ndarray, users: np.ndarray | None = None) -> np.ndarray:
        """g(z) for each row of ``records`` (shape (n, width)) → float64 array of shape (n,).

        ``users`` (the row's user ids) matters only to a per-user family such as
        ``user_parity``; every other kind ignores it."""

    @property
    def width(self) -> int:
        """Number of output coordinates (1 for every scalar query)."""
        return 1


_REGISTRY: dict[str, type[Query]] = {}


def register_query(cls: type[Query]) -> type[Query]:
    """Class decorator: make a Query kind nameable on the wire. The class declares what it is
    (``name``), how it is built from a spec and a schema (its constructor), and which record
    columns a spec names (``reads``): a new kind is written in this one place."""
    if cls.name in _REGISTRY:
        raise ValueError(f"query kind {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls
    return cls


def query_kinds() -> list[str]:
    return sorted(_REGISTRY)


def query_reads(spec: QuerySpec) -> FieldReads:
    """The record columns ``spec`` names, as its registered kind declares them (``Query.reads``);
    nothing for an unknown kind (the users' side refuses it).

    Examples
    --------
    >>> import ldp
    >>> from ldp.core.queries import query_reads
    >>> query_reads(ldp.parity([0, 2])).columns
    (('x', 0), ('x', 2))
    >>> query_reads(ldp.product(ldp.label_query(), ldp.field_query("b"))).subqueries[1]  # JSON, as on the wire
    {'name': 'field', 'params': {'field': 'b', 'index': 0}}
    """
    kind = _REGISTRY.get(spec.name)
    return FieldReads() if kind is None else kind.reads(spec.params)


def make_query(spec: QuerySpec | Mapping[str, Any], schema: Schema) -> Query:
    """Build and validate a query; unknown names and bad parameters are ``LDPError``s."""
    if not isinstance(spec, QuerySpec):
        spec = QuerySpec.from_json(spec)
    try:
        factory = _REGISTRY[spec.name]
    except KeyError:
        raise UnknownKindError(f"unknown query kind {spec.name!r}; registered kinds are {query_kinds()}") from None
    try:
        return factory(spec, schema)
    except LDPError:
        raise
    except (KeyError, TypeError, ValueError) as exc:  # missing or ill-typed parameter
        raise ParameterError(f"query {spec.name!r}: bad parameters {dict(spec.params)!r} ({exc})") from None


def _int_param(spec: QuerySpec, key: str, default: int | None = None) -> int:
    if key not in spec.params:
        if default is None:
            raise ParameterError(f"query {spec.name!r} needs parameter {key!r}")
        return default
    value = spec.params[key]
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"query {spec.name!r}: parameter {key!r} must be an integer, got {value!r}")
    return int(value)


def _str_param(spec: QuerySpec, key: str, default: str | None = None) -> str:
    value = spec.params.get(key, default)
    if not isinstance(value, str):
        raise ParameterError(f"query {spec.name!r}: parameter {key!r} must be a string, got {value!r}")
    return value


@register_query
class FieldQuery(Query):
    """g(z) = ``z[field][index]``: one column, e.g. bit j of x. Params: field, index (default 0)."""

    name = "field"

    @classmethod
    def reads(cls, params: Mapping[str, Any]) -> FieldReads:
        return FieldReads.of([(params.get("field"), params.get("index", 0))])

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        super().__init__(spec, schema)
        self.field_name = _str_param(spec, "field")
        self.column = schema.column(self.field_name, _int_param(spec, "index", 0))
        self.field = schema.field(self.field_name)

    @property
    def bound(self) -> float:
        return float(max(abs(self.field.low), abs(self.field.high)))

    def values(self) -> np.ndarray:
        return self.field.values().astype(np.float64)

    def evaluate(self, records: np.ndarray, users: np.ndarray | None = None) -> np.ndarray:
        return records[:, self.column].astype(np.float64)


@register_query
class LabelQuery(FieldQuery):
    """g(z) = the label. Params: field (default "y")."""

    name = "label"

    @classmethod
    def reads(cls, params: Mapping[str, Any]) -> FieldReads:
        return FieldReads.of([(params.get("field", "y"), 0)])

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        super().__init__(QuerySpec(spec.name, {"field": spec.params.get("field", "y"), "index": 0}), schema)
        self.spec = spec


def _literals(spec: QuerySpec, schema: Schema) -> list[tuple[int, int, bool]]:
    raw = spec.params.get("literals")
    if not isinstance(raw, (list, tuple)) or not raw:
        raise ParameterError(f"query {spec.name!r} needs a non-empty list 'literals' of [field, index, value, equal]")
    out = []
    for lit in raw:
        if not isinstance(lit, (list, tuple)) or len(lit) not in (3, 4):
            raise ParameterError(f"query {spec.name!r}: a literal is [field, index, value] or [field, index, value, equal], got {lit!r}")
        name, index, value = lit[0], lit[1], lit[2]
        equal = bool(lit[3]) if len(lit) == 4 else True
        f = schema.field(str(name))
        if int(value) not in f.values():
            raise ParameterError(f"query {spec.name!r}: field {name!r} takes values {f.values().tolist()[:16]}, literal tests {value}")
        out.append((schema.column(str(name), int(index)), int(value), equal))
    return out


@register_query
class ConjunctionQuery(Query):
    """g(z) = 1 if every literal holds else 0. A literal (field, index, value, equal) tests
    ``z[field][index] == value`` (or ``!=`` when equal is false)."""

    name = "conjunction"

    @classmethod
    def reads(cls, params: Mapping[str, Any]) -> FieldReads:
        literals = _sequence(params.get("literals"))
        return FieldReads.of((lit[0], lit[1]) for lit in literals if isinstance(lit, (list, tuple)) and len(lit) >= 2)

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        super().__init__(spec, schema)
        self.literals = _literals(spec, schema)

    @property
    def bound(self) -> float:
        return 1.0

    def values(self) -> np.ndarray:
        return np.array([0.0, 1.0])

    def evaluate(self, records: np.ndarray, users: np.ndarray | None = None) -> np.ndarray:
        out = np.ones(len(records), dtype=bool)
        for column, value, equal in self.literals:
            hit = records[:, column] == value
            out &= hit if equal else ~hit
        return out.astype(np.float64)


class _SignOrBitQuery(Query):
    """A query whose value is a bit β: the sign (−1)^β (``output="sign"``) or β itself ("bit")."""

    output: str = "sign"

    @property
    def bound(self) -> float:
        return 1.0

    def values(self) -> np.ndarray:
        return np.array([0.0, 1.0]) if self.output == "bit" else np.array([-1.0, 1.0])

    def _signed(self, bits: np.ndarray) -> np.ndarray:
        return bits.astype(np.float64) if self.output == "bit" else 1.0 - 2.0 * bits


@register_query
class ParityQuery(_SignOrBitQuery):
    """g(z) = (−1)^⟨m, z[field]⟩ ∈ {−1, +1} over the bits named by ``mask``.

    Params: field; mask as a list of indices into the field (empty list: the constant 1).
    ``output="bit"`` gives ⟨m, x⟩ mod 2 ∈ {0, 1} instead of the sign.
    """

    name = "parity"

    @classmethod
    def reads(cls, params: Mapping[str, Any]) -> FieldReads:
        return FieldReads.of((params.get("field", "x"), j) for j in _sequence(params.get("mask")))

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        super().__init__(spec, schema)
        field_name = _str_param(spec, "field", "x")
        mask = spec.params.get("mask")
        if not isinstance(mask, (list, tuple)):
            raise ParameterError(f"query 'parity' needs 'mask', a list of indices into field {field_name!r}")
        self.columns = np.array([schema.column(field_name, int(j)) for j in mask], dtype=np.int64)
        if len(set(self.columns.tolist())) != len(self.columns):
            raise ParameterError(f"query 'parity': mask indices must be distinct, got {list(mask)}")
        self.output = _sign_or_bit(spec)


    def evaluate(self, records: np.ndarray, users: np.ndarray | None = None) -> np.ndarray:
        bits = (records[:, self.columns].sum(axis=1) & 1) if len(self.columns) else np.zeros(len(records), np.int64)
        return self._signed(bits)


def _binary_field(spec: QuerySpec, schema: Schema, most: int) -> tuple[slice, int]:
    """The columns of a {0,1} field named by ``spec.params["field"]`` (default "x"), ≤ ``most`` long."""
    name = _str_param(spec, "field", "x")
    f = schema.field(name)
    if (f.low, f.high, f.step) != (0, 1, 1):
        raise ParameterError(f"query {spec.name!r}: field {name!r} must take the values 0 and 1, it takes {f.values().tolist()[:8]}")
    if f.length > most:
        raise ParameterError(f"query {spec.name!r}: field {name!r} has {f.length} bits; at most {most} are allowed")
    return schema.columns(name), f.length


_PACK_BLOCK = 1 << 14  # rows per np.packbits call: its (rows × 8)-byte buffer stays in cache


def _pack_bits(columns: np.ndarray) -> np.ndarray:
    """Each row's {0,1} columns as one int64 (column 0 the most significant bit; ≤ 62 columns).

    ``np.packbits`` writes column 0 into the top bit of a row's first byte; eight bytes read
    big-endian and shifted right by 64 − L are the row's L-bit number: 3× faster than one shift
    and OR per column (90–155 ns per user at L = 24, the separation's hot spot). The columns must
    hold only 0 and 1 (``_binary_field`` checks the field; any non-zero reads as 1)."""
    n, width = columns.shape
    packed = np.empty(n, dtype=np.int64)
    if width == 0:
        packed[:] = 0
        return packed
    shift = np.uint64(64 - width)
    buffer = np.zeros((min(n, _PACK_BLOCK), 8), dtype=np.uint8)
    for lo in range(0, n, _PACK_BLOCK):
        hi = min(n, lo + _PACK_BLOCK)
        part = np.packbits(columns[lo:hi] != 0, axis=1)  # from bool: 2× faster than from int16
        view = buffer[: hi - lo]
        view[:, : part.shape[1]] = part
        packed[lo:hi] = (view.view(">u8").ravel() >> shift).astype(np.int64)
    return packed


def _sign_or_bit(spec: QuerySpec) -> str:
    output = _str_param(spec, "output", "sign")
    if output not in ("sign", "bit"):
        raise ParameterError(f"query {spec.name!r}: output must be 'sign' or 'bit', got {output!r}")
    return output


@register_query
class BentQuery(_SignOrBitQuery):
    """g(z) = (−1)^{Σ_k x_k·x_{k+L/2}}: the inner-product (Maiorana–McFarland) bent function on a
    {0,1} field x of even length L. Every Walsh coefficient has magnitude exactly 2^{−L/2}, so one
    such query correlates equally with *all* 2^L parities: the query family that refutes the
    "one r per query" step of KLNRS Theorem 5.1 (docs/theorem51.md). Params: field (default "x"),
    output ("sign" or "bit")."""

    name = "bent"

    @classmethod
    def reads(cls, params: Mapping[str, Any]) -> FieldReads:
        return FieldReads.of([(params.get("field", "x"), 0)])

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        super().__init__(spec, schema)
        self.columns, length = _binary_field(spec, schema, most=124)  # each half packs into an int64
        if length % 2:
            raise ParameterError(f"query 'bent': bent functions exist only on an even number of bits; field has {length}")
        self.half = length // 2
        self.output = _sign_or_bit(spec)


    def evaluate(self, records: np.ndarray, users: np.ndarray | None = None) -> np.ndarray:
        x = records[:, self.columns]
        bits = np.bitwise_count(_pack_bits(x[:, : self.half]) & _pack_bits(x[:, self.half :])) & 1
        return self._signed(bits)


def user_parity_groups(count: int, candidates: int) -> np.ndarray:
    """Boundaries of ``candidates`` consecutive groups that split ``count`` users as evenly as
    possible (the first ``count mod candidates`` groups get one user more; with fewer users than
    candidates the last ones get none): group c is users ``start + bounds[c] .. start + bounds[c+1] − 1``."""
    count, candidates = int(count), int(candidates)
    if count < 0 or candidates < 1:
        raise ParameterError(f"user_parity_groups: need count ≥ 0 and candidates ≥ 1, got {count}, {candidates}")
    base, extra = divmod(count, candidates)
    c = np.arange(candidates + 1, dtype=np.int64)
    return c * base + np.minimum(c, extra)


def user_parity_candidate(offsets: np.ndarray, count: int, candidates: int) -> np.ndarray:
    """The group (candidate index) of each user at ``offsets`` (= user − start) in the split of
    ``user_parity_groups``; the inverse of its boundaries, computed without a table."""
    base, extra = divmod(int(count), int(candidates))
    offsets = np.asarray(offsets, dtype=np.int64)
    if base == 0:
        return offsets
    wide = extra * (base + 1)  # users in the groups that have one more
    return np.where(offsets < wide, offsets // (base + 1), extra + (offsets - wide) // base)


@register_query
class UserParityQuery(_SignOrBitQuery):
    """A per-user family of parities: user u ∈ [start, start + count) gets the candidate vector
    r(u) ∈ {0,1}^L, the L-bit binary expansion (x's bit 0 first) of its group in the even split of
    ``user_parity_groups(count, 2^L)``, and answers (−1)^⟨r(u), x⟩ (or the bit, ``output="bit"``).

    One request then asks 2^L different non-adaptive questions, one per group of users: the
    non-interactive local model lets every user run a randomizer of its own, fixed before any
    report (KLNRS Definition 4.4: LR_z(i, R) names the user i and its randomizer R), and this sends them in one message instead of 2^L requests.
    The value any one user reports about still depends on its own record alone, so a randomizer
    over it is exactly as private as over a fixed ``parity``. Params: field (default "x", at most
    62 bits), start, count, output. Needs the users' ids: it is not a statistical query."""

    name = "user_parity"

    @classmethod
    def reads(cls, params: Mapping[str, Any]) -> FieldReads:
        return FieldReads.of([(params.get("field", "x"), 0)])

    @property
    def per_user(self) -> bool:
        return True

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        super().__init__(spec, schema)
        self.columns, self.bits = _binary_field(spec, schema, most=62)
        self.start = _int_param(spec, "start")
        self.count = _int_param(spec, "count")
        if self.start < 0 or self.count < 1 or self.start + self.count > 2**62:
            raise ParameterError(f"query 'user_parity': need start ≥ 0 and 1 ≤ count (start + count ≤ 2^62), got start={self.start}, count={self.count}")
        self.output = _sign_or_bit(spec)


    def candidates(self, users: np.ndarray) -> np.ndarray:
        """Each user's candidate index c (its vector r is the binary expansion of c)."""
        offsets = np.asarray(users, dtype=np.int64) - self.start
        if offsets.size and (offsets.min() < 0 or offsets.max() >= self.count):
            raise ParameterError(f"query 'user_parity' is defined for users {self.start}..{self.start + self.count - 1} only")
        return user_parity_candidate(offsets, self.count, 2**self.bits)

    def evaluate(self, records: np.ndarray, users: np.ndarray | None = None) -> np.ndarray:
        if users is None:
            raise ParameterError("query 'user_parity' is a per-user family (a local round's assignment), not a statistical query: it needs the users' ids")
        if len(users) != len(records):
            raise ParameterError(f"query 'user_parity': {len(users)} user ids for {len(records)} records")
        c = self.candidates(users)
        packed = _pack_bits(records[:, self.columns])  # x's bit 0 is the most significant, as in c
        bits = np.bitwise_count(packed & c) & 1
        return self._signed(bits)


def _subqueries(spec: QuerySpec, schema: Schema, key: str) -> list[Query]:
    raw = spec.params.get(key)
    if not isinstance(raw, (list, tuple)) or not raw:
        raise ParameterError(f"query {spec.name!r} needs a non-empty list {key!r} of query specs")
    subs = [make_query(s, schema) for s in raw]
    if any(q.width != 1 for q in subs):
        raise ParameterError(f"query {spec.name!r}: only scalar queries can be combined")
    return subs


def _combine_values(parts: Sequence[np.ndarray | None], op: Callable[[Sequence[float]], float]) -> np.ndarray | None:
    if any(p is None for p in parts):
        return None
    if math.prod(len(p) for p in parts if p is not None) > MAX_FINITE_VALUES:
        return None
    return np.unique(np.array([op(c) for c in itertools.product(*parts)], dtype=np.float64))  # type: ignore[arg-type]


@register_query
class ProductQuery(Query):
    """g(z) = Π_k g_k(z). Params: factors, a list of query specs. Bound: the product of bounds."""

    name = "product"

    @classmethod
    def reads(cls, params: Mapping[str, Any]) -> FieldReads:
        return FieldReads.of(subqueries=_sequence(params.get("factors")))

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        super().__init__(spec, schema)
        self.factors = _subqueries(spec, schema, "factors")

    @property
    def per_user(self) -> bool:
        return any(q.per_user for q in self.factors)

    @property
    def bound(self) -> float:
        return float(math.prod(q.bound for q in self.factors))

    def values(self) -> np.ndarray | None:
        return _combine_values([q.values() for q in self.factors], math.prod)

    def evaluate(self, records: np.ndarray, users: np.ndarray | None = None) -> np.ndarray:
        out = np.ones(len(records), dtype=np.float64)
        for q in self.factors:
            out *= q.evaluate(records, users)
        return out


@register_query
class AffineQuery(Query):
    """g(z) = scale · h(z) + offset. Params: query (a spec), scale, offset."""

    name = "affine"

    @classmethod
    def reads(cls, params: Mapping[str, Any]) -> FieldReads:
        return FieldReads.of(subqueries=[params.get("query")])

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        super().__init__(spec, schema)
        (self.inner,) = _subqueries(QuerySpec(spec.name, {"q": [spec.params.get("query")]}), schema, "q")
        self.scale = float(spec.params.get("scale", 1.0))
        self.offset = float(spec.params.get("offset", 0.0))
        if not (math.isfinite(self.scale) and math.isfinite(self.offset)):
            raise ParameterError(f"query 'affine': scale and offset must be finite, got {self.scale}, {self.offset}")

    @property
    def per_user(self) -> bool:
        return self.inner.per_user

    @property
    def bound(self) -> float:
        vals = self.values()
        if vals is not None:
            return float(np.abs(vals).max())
        return abs(self.scale) * self.inner.bound + abs(self.offset)

    def values(self) -> np.ndarray | None:
        inner = self.inner.values()
        return None if inner is None else np.unique(self.scale * inner + self.offset)

    def evaluate(self, records: np.ndarray, users: np.ndarray | None = None) -> np.ndarray:
        return self.scale * self.inner.evaluate(records, users) + self.offset


@register_query
class RecordQuery(Query):
    """The whole record (identity), for randomizers that randomize every field at once."""

    name = "record"

    @classmethod
    def reads(cls, params: Mapping[str, Any]) -> FieldReads:
        return FieldReads()  # every column of whatever schema the users have: no name to check

    @property
    def bound(self) -> float:
        low, high, _ = self.schema.column_bounds()
        return float(np.maximum(np.abs(low), np.abs(high)).max())

    @property
    def width(self) -> int:
        return self.schema.width

    def values(self) -> None:
        return None

    def evaluate(self, records: np.ndarray, users: np.ndarray | None = None) -> np.ndarray:
        return records


@register_query
class PrefixIndexQuery(Query):
    """g(z) = the position of the first ``length`` bits of a {0,1} field among ``candidates``, or
    len(candidates) when they are none of them: a prefix of x (bit 0 the most significant) mapped
    onto {0, 1, ..., m}, m = len(candidates) ("none" is m). The query of one level of a
    prefix-extending heavy-hitters protocol (``ldp.learners.heavy_hitters``): the aggregator
    names a public candidate set, each user reports (through k-ary RR) which candidate its own
    prefix is. Params: field (default "x", at most 62 bits), length (1..L), candidates (distinct
    integers in [0, 2^length), at most 4095)."""

    name = "prefix_index"

    @classmethod
    def reads(cls, params: Mapping[str, Any]) -> FieldReads:
        return FieldReads.of([(params.get("field", "x"), 0)])

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        super().__init__(spec, schema)
        columns, bits = _binary_field(spec, schema, most=62)
        self.length = _int_param(spec, "length")
        if not 1 <= self.length <= bits:
            raise ParameterError(f"query 'prefix_index': length must be in [1, {bits}] (the field's bits), got {self.length}")
        self.columns = np.arange(columns.start, columns.start + self.length)
        raw = spec.params.get("candidates")
        if not isinstance(raw, (list, tuple)) or not 1 <= len(raw) < MAX_FINITE_VALUES:
            raise ParameterError(f"query 'prefix_index' needs 'candidates', a list of 1 to {MAX_FINITE_VALUES - 1} prefixes")
        if any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 0 <= c < 2**self.length for c in raw):
            raise ParameterError(f"query 'prefix_index': candidates must be integers in [0, 2^{self.length}), got {list(raw)[:8]}")
        self.candidates = np.asarray(raw, dtype=np.int64)
        if len(np.unique(self.candidates)) != len(self.candidates):
            raise ParameterError("query 'prefix_index': candidates must be distinct")
        self._order = np.argsort(self.candidates, kind="stable")
        self._sorted = self.candidates[self._order]

    @property
    def bound(self) -> float:
        return float(len(self.candidates))

    def values(self) -> np.ndarray:
        return np.arange(len(self.candidates) + 1, dtype=np.float64)

    def evaluate(self, records: np.ndarray, users: np.ndarray | None = None) -> np.ndarray:
        prefix = _pack_bits(records[:, self.columns])
        pos = np.clip(np.searchsorted(self._sorted, prefix), 0, len(self._sorted) - 1)
        found = self._sorted[pos] == prefix
        return np.where(found, self._order[pos], len(self.candidates)).astype(np.float64)
