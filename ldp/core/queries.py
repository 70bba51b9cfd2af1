"""Query functions g: Z → [−b, b], named, parameterized and registered (KLNRS §4.1).

Only registered kinds can be named on the wire, so a client evaluates nothing it does not know.
A query is described by a JSON-able ``QuerySpec(name, params)``; ``make_query(spec, schema)``
validates it against a record ``Schema`` and returns a ``Query`` whose ``evaluate`` is vectorized
over records. Every query declares its bound b and, when finite, the set of values it can take
(randomized response needs the latter, the exact audit enumerates it).

Kinds: ``field`` (one column of a field, e.g. a bit of x), ``label``, ``conjunction`` of
literals, ``parity`` (−1)^⟨m, x⟩ over chosen bits, ``product`` and ``affine`` combinations, and
``record`` (the whole row, for randomizers that randomize a record once).
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from ldp.core.errors import LDPError, ParameterError, UnknownKindError
from ldp.core.schema import Schema

__all__ = [
    "QuerySpec",
    "Query",
    "register_query",
    "make_query",
    "query_kinds",
    "field_query",
    "label_query",
    "conjunction",
    "parity",
    "product",
    "affine",
    "record_query",
]

MAX_FINITE_VALUES = 4096


@dataclass(frozen=True)
class QuerySpec:
    """A query by name and JSON-able parameters; what travels on the wire."""

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
    def from_json(cls, data: Mapping[str, Any]) -> "QuerySpec":
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


class Query(ABC):
    """A validated query bound to a schema: g(z) for every record z, with |g| ≤ bound."""

    name: ClassVar[str]

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
    def evaluate(self, records: np.ndarray) -> np.ndarray:
        """g(z) for each row of ``records`` (shape (n, width)) → float64 array of shape (n,)."""

    @property
    def width(self) -> int:
        """Number of output coordinates (1 for every scalar query)."""
        return 1


_REGISTRY: dict[str, Callable[[QuerySpec, Schema], Query]] = {}


def register_query(cls: type[Query]) -> type[Query]:
    """Class decorator: make a Query kind nameable on the wire."""
    if cls.name in _REGISTRY:
        raise ValueError(f"query kind {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls
    return cls


def query_kinds() -> list[str]:
    return sorted(_REGISTRY)


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
    """g(z) = z[field][index]: one column, e.g. bit j of x. Params: field, index (default 0)."""

    name = "field"

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

    def evaluate(self, records: np.ndarray) -> np.ndarray:
        return records[:, self.column].astype(np.float64)


@register_query
class LabelQuery(FieldQuery):
    """g(z) = the label. Params: field (default "y")."""

    name = "label"

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
    z[field][index] == value (or != value when equal is false)."""

    name = "conjunction"

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        super().__init__(spec, schema)
        self.literals = _literals(spec, schema)

    @property
    def bound(self) -> float:
        return 1.0

    def values(self) -> np.ndarray:
        return np.array([0.0, 1.0])

    def evaluate(self, records: np.ndarray) -> np.ndarray:
        out = np.ones(len(records), dtype=bool)
        for column, value, equal in self.literals:
            hit = records[:, column] == value
            out &= hit if equal else ~hit
        return out.astype(np.float64)


@register_query
class ParityQuery(Query):
    """g(z) = (−1)^⟨m, z[field]⟩ ∈ {−1, +1} over the bits named by ``mask``.

    Params: field; mask as a list of indices into the field (empty list: the constant 1).
    ``output="bit"`` gives ⟨m, x⟩ mod 2 ∈ {0, 1} instead of the sign.
    """

    name = "parity"

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        super().__init__(spec, schema)
        field_name = _str_param(spec, "field", "x")
        mask = spec.params.get("mask")
        if not isinstance(mask, (list, tuple)):
            raise ParameterError(f"query 'parity' needs 'mask', a list of indices into field {field_name!r}")
        self.columns = np.array([schema.column(field_name, int(j)) for j in mask], dtype=np.int64)
        if len(set(self.columns.tolist())) != len(self.columns):
            raise ParameterError(f"query 'parity': mask indices must be distinct, got {list(mask)}")
        self.output = _str_param(spec, "output", "sign")
        if self.output not in ("sign", "bit"):
            raise ParameterError(f"query 'parity': output must be 'sign' or 'bit', got {self.output!r}")

    @property
    def bound(self) -> float:
        return 1.0

    def values(self) -> np.ndarray:
        return np.array([0.0, 1.0]) if self.output == "bit" else np.array([-1.0, 1.0])

    def evaluate(self, records: np.ndarray) -> np.ndarray:
        bits = (records[:, self.columns].sum(axis=1) & 1) if len(self.columns) else np.zeros(len(records), np.int64)
        return bits.astype(np.float64) if self.output == "bit" else 1.0 - 2.0 * bits


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

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        super().__init__(spec, schema)
        self.factors = _subqueries(spec, schema, "factors")

    @property
    def bound(self) -> float:
        return float(math.prod(q.bound for q in self.factors))

    def values(self) -> np.ndarray | None:
        return _combine_values([q.values() for q in self.factors], math.prod)

    def evaluate(self, records: np.ndarray) -> np.ndarray:
        out = np.ones(len(records), dtype=np.float64)
        for q in self.factors:
            out *= q.evaluate(records)
        return out


@register_query
class AffineQuery(Query):
    """g(z) = scale · h(z) + offset. Params: query (a spec), scale, offset."""

    name = "affine"

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        super().__init__(spec, schema)
        (self.inner,) = _subqueries(QuerySpec(spec.name, {"q": [spec.params.get("query")]}), schema, "q")
        self.scale = float(spec.params.get("scale", 1.0))
        self.offset = float(spec.params.get("offset", 0.0))
        if not (math.isfinite(self.scale) and math.isfinite(self.offset)):
            raise ParameterError(f"query 'affine': scale and offset must be finite, got {self.scale}, {self.offset}")

    @property
    def bound(self) -> float:
        vals = self.values()
        if vals is not None:
            return float(np.abs(vals).max())
        return abs(self.scale) * self.inner.bound + abs(self.offset)

    def values(self) -> np.ndarray | None:
        inner = self.inner.values()
        return None if inner is None else np.unique(self.scale * inner + self.offset)

    def evaluate(self, records: np.ndarray) -> np.ndarray:
        return self.scale * self.inner.evaluate(records) + self.offset


@register_query
class RecordQuery(Query):
    """The whole record (identity), for randomizers that randomize every field at once."""

    name = "record"

    @property
    def bound(self) -> float:
        low, high, _ = self.schema.column_bounds()
        return float(np.maximum(np.abs(low), np.abs(high)).max())

    @property
    def width(self) -> int:
        return self.schema.width

    def values(self) -> None:
        return None

    def evaluate(self, records: np.ndarray) -> np.ndarray:
        return records


# Spec builders: the one way to write queries in code. They check what needs no schema (types,
# identifier names, integer indices ≥ 0) and raise a ParameterError naming the value; a field a
# schema lacks is refused by ``Session.round`` (against the oracle's description) and by the users.


def _identifier(what: str, value: Any) -> str:
    if not isinstance(value, str) or not value.isidentifier():
        raise ParameterError(f"{what} must be a field name (an identifier such as 'x' or 'y'), got {value!r}")
    return value


def _index(what: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ParameterError(f"{what} must be an integer ≥ 0, got {value!r}")
    return int(value)


def _integer(what: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{what} must be an integer, got {value!r}")
    return int(value)


def _finite(what: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(value):
        raise ParameterError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _spec(what: str, value: Any) -> "QuerySpec":
    if not isinstance(value, QuerySpec):
        raise ParameterError(f"{what} must be a QuerySpec (e.g. field_query('x', 0)), got {type(value).__name__} {value!r}")
    return value


def field_query(name: str, index: int = 0) -> QuerySpec:
    return QuerySpec("field", {"field": _identifier("field_query: field", name), "index": _index(f"field_query({name!r}): index", index)})


def label_query(name: str = "y") -> QuerySpec:
    return QuerySpec("label", {"field": _identifier("label_query: field", name)})


def conjunction(*literals: tuple[str, int, int] | tuple[str, int, int, bool]) -> QuerySpec:
    if not literals:
        raise ParameterError("conjunction needs at least one literal (field, index, value[, equal])")
    out = []
    for k, lit in enumerate(literals):
        if not isinstance(lit, (list, tuple)) or len(lit) not in (3, 4):
            raise ParameterError(f"conjunction: literal {k} must be (field, index, value) or (field, index, value, equal), got {lit!r}")
        item: list[Any] = [
            _identifier(f"conjunction: literal {k} field", lit[0]),
            _index(f"conjunction: literal {k} index", lit[1]),
            _integer(f"conjunction: literal {k} value", lit[2]),
        ]
        if len(lit) == 4:
            if not isinstance(lit[3], (bool, np.bool_)):
                raise ParameterError(f"conjunction: literal {k} equal must be True or False, got {lit[3]!r}")
            item.append(bool(lit[3]))
        out.append(item)
    return QuerySpec("conjunction", {"literals": out})


def parity(mask: Sequence[int] | np.ndarray, field: str = "x", output: str = "sign") -> QuerySpec:
    """(−1)^⟨m, x⟩ (or the bit ⟨m, x⟩ with ``output="bit"``); ``mask`` is a list of indices into
    the field, or a bool vector over it."""
    if isinstance(mask, (str, bytes)):
        raise ParameterError(f"parity: mask must be a list of indices ≥ 0 or a bool vector, got {mask!r}")
    m = np.asarray(mask)
    if m.ndim != 1:
        raise ParameterError(f"parity: mask must be one-dimensional (a list of indices or a bool vector), got shape {m.shape}")
    if m.dtype == bool:
        indices = np.flatnonzero(m).tolist()
    elif m.size == 0:
        indices = []
    elif m.dtype.kind in "iu":
        indices = [int(j) for j in m]
        if min(indices) < 0:
            raise ParameterError(f"parity: mask indices must be ≥ 0, got {min(indices)}")
        if len(set(indices)) != len(indices):
            raise ParameterError(f"parity: mask indices must be distinct, got {indices[:16]}")
    else:
        raise ParameterError(f"parity: mask must be a list of integer indices ≥ 0 or a bool vector, got {mask!r}")
    if output not in ("sign", "bit"):
        raise ParameterError(f"parity: output must be 'sign' or 'bit', got {output!r}")
    return QuerySpec("parity", {"field": _identifier("parity: field", field), "mask": indices, "output": output})


def product(*factors: QuerySpec) -> QuerySpec:
    if not factors:
        raise ParameterError("product needs at least one factor (a QuerySpec)")
    return QuerySpec("product", {"factors": [_spec(f"product: factor {k}", f).to_json() for k, f in enumerate(factors)]})


def affine(query: QuerySpec, scale: float = 1.0, offset: float = 0.0) -> QuerySpec:
    return QuerySpec(
        "affine", {"query": _spec("affine: query", query).to_json(), "scale": _finite("affine: scale", scale), "offset": _finite("affine: offset", offset)}
    )


def record_query() -> QuerySpec:
    return QuerySpec("record", {})
