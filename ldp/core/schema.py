"""Records: fixed-width rows of small integers, described by a ``Schema``.

A database z = (z_1, ..., z_n) (KLNRS §2.1) is held as one int16 numpy array of shape
(n, schema.width); a field such as x ∈ {0,1}^d occupies ``length`` consecutive columns.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldp.core.errors import ParameterError, UnknownKindError

__all__ = ["Field", "Schema", "RECORD_DTYPE"]

RECORD_DTYPE = np.int16


@dataclass(frozen=True)
class Field:
    """A named block of ``length`` integer columns, each with values low, low+step, ..., high.

    ``step`` lets a field hold e.g. a ±1 label exactly (low=−1, high=1, step=2).
    """

    name: str
    length: int = 1
    low: int = 0
    high: int = 1
    step: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ParameterError(f"field name must be an identifier, got {self.name!r}"[:300])
        for key in ("length", "low", "high", "step"):  # not a bool, float or string (issue 23, I6)
            value = getattr(self, key)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise ParameterError(f"field {self.name!r}: {key} must be an integer, got {value!r}"[:300])
        if self.length < 1:
            raise ParameterError(f"field {self.name!r}: length must be ≥ 1, got {self.length}")
        if not -(2**15) <= self.low < self.high < 2**15:
            raise ParameterError(
                f"field {self.name!r}: need -32768 ≤ low < high < 32768, got low={self.low}, high={self.high}"
            )
        if self.step < 1 or (self.high - self.low) % self.step:
            raise ParameterError(f"field {self.name!r}: step must be ≥ 1 and divide high − low, got step={self.step}")

    @property
    def cardinality(self) -> int:
        """Number of values one column can take."""
        return (self.high - self.low) // self.step + 1

    def values(self) -> np.ndarray:
        """The values one column can take, ascending."""
        return np.arange(self.low, self.high + 1, self.step, dtype=np.int64)


@dataclass(frozen=True)
class Schema:
    """An ordered tuple of fields; columns are laid out in field order."""

    fields: tuple[Field, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.fields, tuple) or not all(isinstance(f, Field) for f in self.fields):
            raise ParameterError(f"a schema's fields must be a tuple of Field, got {self.fields!r}"[:300])
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ParameterError(f"schema field names must be unique, got {names}")
        if not self.fields:
            raise ParameterError("a schema needs at least one field")

    def __iter__(self) -> Iterator[Field]:
        return iter(self.fields)

    @property
    def width(self) -> int:
        return sum(f.length for f in self.fields)

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise UnknownKindError(f"unknown field {name!r}; the schema has {[f.name for f in self.fields]}")

    def columns(self, name: str) -> slice:
        """The column slice of field ``name``."""
        start = 0
        for f in self.fields:
            if f.name == name:
                return slice(start, start + f.length)
            start += f.length
        raise UnknownKindError(f"unknown field {name!r}; the schema has {[f.name for f in self.fields]}")

    def column(self, name: str, index: int = 0) -> int:
        """The column of element ``index`` of field ``name``, with a clear error when out of range."""
        f = self.field(name)
        if not 0 <= int(index) < f.length:
            raise ParameterError(f"field {name!r} has indices 0..{f.length - 1}, got index {index}")
        return self.columns(name).start + int(index)

    def column_bounds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-column (low, high, step) arrays."""
        low = np.concatenate([np.full(f.length, f.low) for f in self.fields])
        high = np.concatenate([np.full(f.length, f.high) for f in self.fields])
        step = np.concatenate([np.full(f.length, f.step) for f in self.fields])
        return low.astype(np.int64), high.astype(np.int64), step.astype(np.int64)

    def validate_records(self, records: np.ndarray) -> None:
        if records.ndim != 2 or records.shape[1] != self.width:
            raise ParameterError(f"records must have shape (n, {self.width}), got {records.shape}")
        low, high, step = self.column_bounds()
        if records.size and ((records < low).any() or (records > high).any() or ((records - low) % step).any()):
            raise ParameterError("records hold values outside the schema's field ranges")

    def to_json(self) -> list[dict[str, Any]]:
        """The public description's layout: a bare list of fields with every key.

        Unversioned on purpose: it is what ``Ready.description_json`` carries and what a data
        file's identity hashes (``ldp.core.datafile``), so a ``format`` key here would change the
        wire and every data population's ledger identity. Schema *files* are versioned
        (``ldp.core.datafile.schema_to_json``: ``{"format": 1, "fields": [...]}``)."""
        return [dict(name=f.name, length=f.length, low=f.low, high=f.high, step=f.step) for f in self.fields]

    @classmethod
    def from_json(cls, data: list[dict[str, Any]]) -> Schema:
        """The list ``to_json`` wrote; a wrong shape, an unknown or missing key or a wrong type
        is a one-line ParameterError naming it (never a builtin TypeError)."""
        if isinstance(data, (str, bytes)) or not isinstance(data, (list, tuple)):
            raise ParameterError(f"a schema is a list of field objects, got {type(data).__name__}")
        fields = []
        for k, item in enumerate(data):
            if not isinstance(item, dict):
                raise ParameterError(f"schema field #{k + 1} must be an object with keys {list(_FIELD_KEYS)}, got {item!r}"[:300])
            unknown = sorted(str(key) for key in item if key not in _FIELD_KEYS)
            if unknown:
                raise ParameterError(f"schema field #{k + 1}: unknown keys {unknown} (a field has {list(_FIELD_KEYS)})")
            if "name" not in item:
                raise ParameterError(f"schema field #{k + 1} has no 'name' key")
            fields.append(Field(**item))
        return cls(tuple(fields))


_FIELD_KEYS = ("name", "length", "low", "high", "step")  # what Schema.to_json writes per field
