"""One column of a caller's data as users' records: what ``ldp.frequencies`` and ``ldp.mean`` ask.

The caller of the short API (``ldp.experiment.estimate``) holds its column in this process: it
is the data owner, and its users' records are built here, on the users' side, one user per
element (user ids 0..n−1 in order). A ``ColumnData`` is a ``Holdings`` (``ldp.local.shard``):
a ``Shard`` serves it in process, or it is written to a CSV file with a declared schema for
client processes (``write_csv``), which then hold the very same records.

Accepted columns: a numpy array, a pandas Series (``.to_numpy()``) or a pyarrow Array /
ChunkedArray (``.to_numpy(zero_copy_only=False)``); neither pandas nor pyarrow is imported
here, the object is asked for its values. A missing value (None, NaN, pandas NA, an Arrow null)
is refused in one line naming how many and the first row (row N is element N−1): drop them
first, or declare them as a category of their own (``categories=[..., None]`` is not taken: map
them to a string such as "missing").

Records (one int16 field of length 1, ``ldp.core.schema``):

- **categories** (strings, objects, booleans, or an explicit ``categories=`` that is not an
  arithmetic progression of integers): the record is the category's position 0..k−1 in the
  sorted distinct values (or in ``categories`` as given);
- **integers** (an integer column, or ``categories=`` an arithmetic progression low..high by
  step): the record is the value itself, the field low..high by step. Without ``categories`` the
  field follows ``ldp.core.datafile``'s inference rule (low = min, high = max, step = the gcd of
  the differences; a constant column c becomes c..c+1), so that a file read by ``ldp-sim
  estimate`` and the same column given to the API are the same records, and the same reports;
- **a mean's grid** (``mean_column``): an integer column with integer ``bounds`` inside int16
  is its values (field lo..hi); anything else (floats) is rounded to the nearest of the
  ``GRID + 1`` points lo + j·(hi − lo)/GRID: an error of at most (hi − lo)/(2·GRID), below
  10^-4 of the range and far below the sd of any ε-LDP estimate on 10^8 users.

Why the domain matters (docs/design.md §2a, invariant I3): without ``categories`` the domain is
computed from the values, which is fine here, in the data owner's process, but a served
deployment (``ldp-sim clients --data FILE --schema S``) must *declare* it: the schema is public
and leaves before any charge. ``ColumnData.declared`` says which it was.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

import numpy as np

from ldp.core.errors import ParameterError
from ldp.core.schema import RECORD_DTYPE, Field, Schema

__all__ = ["ColumnData", "column_values", "frequency_column", "held_records", "holdings_identity", "mean_column", "progression", "GRID", "INT16_RANGE"]

GRID = 1 << 14  # a mean's grid: 16384 steps (the field 0..GRID fits int16)
INT16_RANGE = (-(2**15), 2**15 - 1)
_IDENTITY_TAG = b"ldp.column/v1\n"


def holdings_identity(tag: bytes, schema: Schema, records: np.ndarray) -> str:
    """The ledger key of in-memory holdings: SHA-256 of a tag (what kind of holdings), the
    schema's JSON and the records' bytes. The same records under the same schema and tag are
    the same users' data; anything else is other data, with its own ledger."""
    h = hashlib.sha256(tag)
    h.update(json.dumps(schema.to_json(), sort_keys=True).encode())
    h.update(np.ascontiguousarray(records).tobytes())
    return h.hexdigest()


def held_records(records: np.ndarray, first_user: int, count: int) -> np.ndarray:
    """A copy of rows first_user .. first_user+count−1 of in-memory holdings' ``records``, or one
    line naming the users asked for and the users there are."""
    if first_user < 0 or count < 0 or first_user + count > len(records):
        raise ParameterError(f"users {first_user}..{first_user + count - 1} are outside the column's users 0..{len(records) - 1}")
    return records[first_user : first_user + count].copy()


@dataclass(frozen=True)
class ColumnData:
    """One column as users' records (module docstring): a ``Holdings`` for ``Shard``.

    ``kind`` is "categories" (records are positions in ``labels``), "values" (records are the
    integer values: the field ``span`` = (low, high, step); ``labels`` its values for a frequency
    oracle) or "grid" (a mean's grid 0..GRID over ``bounds``).
    ``declared`` is True when the caller declared the domain or bounds (``categories=``,
    ``bounds=``): only then may the schema be described to an aggregator outside this process.
    """

    name: str
    kind: str
    labels: tuple[Any, ...]
    span: tuple[int, int, int]
    bounds: tuple[float, float] | None
    declared: bool
    _records: np.ndarray = field(repr=False, compare=False)

    @property
    def field(self) -> Field:
        return self.schema.fields[0]

    @property
    def schema(self) -> Schema:
        low, high, step = self.span
        return Schema((Field(self.name, 1, low, high, step),))

    @property
    def size(self) -> int:
        return int(len(self._records))

    @property
    def identity(self) -> str:
        """SHA-256 of the records and the schema (the ledger key, as a data file's identity)."""
        return holdings_identity(_IDENTITY_TAG, self.schema, self._records)

    def records(self, first_user: int, count: int) -> np.ndarray:
        """Records of users first_user .. first_user+count−1: int16, shape (count, 1)."""
        return held_records(self._records, first_user, count)

    def grid_value(self, values: np.ndarray | float) -> np.ndarray:
        """A field value in the caller's unit: the grid point (kind "grid") or the value itself."""
        v = np.asarray(values, dtype=np.float64)
        if self.kind != "grid":
            return v
        assert self.bounds is not None
        lo, hi = self.bounds
        return lo + v * (hi - lo) / GRID

    def write_csv(self, folder: str | Path) -> tuple[Path, Path]:
        """The records as ``column.csv`` and their declared schema as ``schema.json`` in
        ``folder``: what client processes on this machine load (``ldp.core.datafile``)."""
        folder = Path(folder)
        data, schema = folder / "column.csv", folder / "schema.json"
        with data.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow([self.name])
            writer.writerows(self._records.tolist())
        low, high, step = self.span  # the schema-file layout of ldp.core.datafile, format 1
        schema.write_text(json.dumps({"format": 1, "fields": [{"name": self.name, "low": low, "high": high, "step": step}]}))
        return data, schema


def column_values(column: Any, what: str = "column") -> tuple[np.ndarray, str | None]:
    """The values of a numpy array, pandas Series or pyarrow Array/ChunkedArray, and its name.

    Missing values (None, NaN, pandas NA, Arrow nulls) are refused in one line: how many, and
    the first row (1-based). The result is one-dimensional: an integer, boolean, float or object
    array (strings and pandas categoricals become objects)."""
    name = getattr(column, "name", None)
    module = type(column).__module__.split(".")[0]
    if module == "pyarrow":
        nulls = int(column.null_count)
        if nulls:
            first = _first_arrow_null(column)
            raise ParameterError(f"the {what} has {nulls} missing value(s), the first at row {first}: drop them, or map them to a category such as 'missing'")
        values = np.asarray(column.to_numpy(zero_copy_only=False))
        name = getattr(column, "_name", None)
    elif module == "pandas":
        dtype_kind = getattr(column.dtype, "kind", "O")
        values = np.asarray(column.to_numpy(dtype=object if dtype_kind not in "biuf" else None))
        if values.dtype == object:  # pandas NA / None / NaN in an object column
            missing = np.fromiter((_is_missing(v) for v in values), dtype=bool, count=len(values))
            _refuse_missing(missing, what)
    else:
        values = np.asarray(column)
    if values.ndim != 1:
        raise ParameterError(f"the {what} must be one-dimensional (one value per user), got shape {values.shape}")
    if len(values) == 0:
        raise ParameterError(f"the {what} is empty: it needs at least one user")
    if values.dtype.kind == "f":
        _refuse_missing(~np.isfinite(values), what)
    elif values.dtype.kind == "O":
        _refuse_missing(np.fromiter((_is_missing(v) for v in values), dtype=bool, count=len(values)), what)
    elif values.dtype.kind not in "biuUS":
        raise ParameterError(f"the {what} holds {values.dtype} values: give numbers, booleans or strings")
    return values, name if isinstance(name, str) else None


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float):
        return not math.isfinite(v)
    return type(v).__name__ in ("NAType", "NaTType")


def _refuse_missing(missing: np.ndarray, what: str) -> None:
    count = int(np.count_nonzero(missing))
    if count:
        first = int(np.argmax(missing)) + 1
        raise ParameterError(f"the {what} has {count} missing or non-finite value(s), the first at row {first}: drop them, or map them to a category such as 'missing'")


def _first_arrow_null(column: Any) -> int:
    chunks = column.chunks if hasattr(column, "chunks") else [column]
    offset = 0
    for chunk in chunks:
        mask = np.asarray(chunk.is_null().to_numpy(zero_copy_only=False))
        if mask.any():
            return offset + int(np.argmax(mask)) + 1
        offset += len(chunk)
    return offset


def progression(values: Sequence[Any]) -> tuple[int, int, int] | None:
    """(low, high, step) when ``values`` are integers low, low+step, ..., high in order inside
    int16 (at least two), else None: such a domain is an integer field, not positions."""
    if len(values) < 2 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in values):
        return None
    ints = [int(v) for v in values]
    step = ints[1] - ints[0]
    if step < 1 or any(b - a != step for a, b in zip(ints, ints[1:])):
        return None
    if not (INT16_RANGE[0] <= ints[0] and ints[-1] <= INT16_RANGE[1]):
        return None
    return ints[0], ints[-1], step


def _field_name(name: str | None) -> str:
    return name if isinstance(name, str) and name.isidentifier() else "value"


def frequency_column(column: Any, categories: Sequence[Any] | None = None, name: str | None = None) -> ColumnData:
    """The column as records for a frequency oracle (module docstring: categories or integers).

    Raises ``ParameterError`` for missing values, a value outside ``categories``, fewer than two
    categories, more than 2^15, or integers beyond int16."""
    values, own = column_values(column)
    field_name = _field_name(name or own)
    if categories is not None:
        labels = tuple(v.item() if isinstance(v, np.generic) else v for v in categories)
        if len(labels) < 2 or len(set(labels)) != len(labels):
            raise ParameterError(f"categories must hold at least two distinct values, got {len(labels)} value(s) with {len(set(labels))} distinct")
        span = progression(labels)
        if span is not None and values.dtype.kind in "iu":
            low, high, step = span
            bad = (values < low) | (values > high) | ((values - low) % step != 0)
            _refuse_outside(bad, f"one of the declared categories {low}..{high} (step {step})")
            return ColumnData(field_name, "values", labels, span, None, True, values.astype(RECORD_DTYPE).reshape(-1, 1))
        return _positions(field_name, values, labels, declared=True)
    if values.dtype.kind in "iu":
        low, high = int(values.min()), int(values.max())
        if low < INT16_RANGE[0] or high > INT16_RANGE[1]:
            raise ParameterError(f"the column's integers span {low}..{high}, beyond int16 {INT16_RANGE[0]}..{INT16_RANGE[1]}: pass categories=[...] to name the values")
        step = reduce(math.gcd, np.unique(values - low).tolist(), 0) or 1
        if low == high:  # a constant column c becomes c..c+1 (c−1..c at the top), as a data file's
            low, high = (low, low + 1) if low < INT16_RANGE[1] else (low - 1, low)
        labels = tuple(range(low, high + 1, step))
        return ColumnData(field_name, "values", labels, (low, high, step), None, False, values.astype(RECORD_DTYPE).reshape(-1, 1))
    if values.dtype.kind == "f":
        raise ParameterError("the column holds floats: frequencies need categories (strings or integers); for a mean use ldp.mean(column, bounds=(lo, hi))")
    distinct, _ = _distinct(values)
    if len(distinct) < 2:  # one category: add a placeholder so the oracle has k = 2 (its frequency is 0)
        distinct.append(f"(not {distinct[0]})")
    return _positions(field_name, values, tuple(distinct), declared=False)


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _distinct(values: np.ndarray) -> tuple[list[Any], np.ndarray]:
    """The sorted distinct values (as Python objects) and each value's position among them.

    Numbers and booleans: ``np.unique``. Strings and objects: one pass through a dict (O(n); a
    sort of n Python objects would be O(n log n) comparisons), then the k distinct values are
    sorted, by type name first when the types are mixed (e.g. strings and numbers)."""
    if values.dtype.kind in "biuf":
        uniq, inverse = np.unique(values, return_inverse=True)
        return [_plain(v) for v in uniq], inverse.reshape(-1)
    seen: dict[Any, int] = {}
    first = np.fromiter((seen.setdefault(v, len(seen)) for v in values.tolist()), dtype=np.int64, count=len(values))
    found = list(seen)
    try:
        order = sorted(range(len(found)), key=lambda j: found[j])
    except TypeError:  # mixed types
        order = sorted(range(len(found)), key=lambda j: (type(found[j]).__name__, found[j]))
    rank = np.empty(len(found), dtype=np.int64)
    rank[order] = np.arange(len(found))
    return [found[j] for j in order], rank[first]


def _positions(field_name: str, values: np.ndarray, labels: tuple[Any, ...], *, declared: bool) -> ColumnData:
    if len(labels) > INT16_RANGE[1] + 1:
        raise ParameterError(f"{len(labels)} categories: at most {INT16_RANGE[1] + 1} fit a record")
    index = {label: j for j, label in enumerate(labels)}
    distinct, inverse = _distinct(values)
    lookup = np.array([index.get(v, -1) for v in distinct], dtype=np.int64)
    codes = lookup[inverse]
    _refuse_outside(codes < 0, f"one of the {len(labels)} declared categories")
    return ColumnData(field_name, "categories", labels, (0, len(labels) - 1, 1), None, declared, codes.astype(RECORD_DTYPE).reshape(-1, 1))


def _refuse_outside(bad: np.ndarray, allowed: str) -> None:
    count = int(np.count_nonzero(bad))
    if count:
        raise ParameterError(f"{count} value(s) of the column are not {allowed}, the first at row {int(np.argmax(bad)) + 1}")


def mean_column(column: Any, bounds: tuple[float, float], out_of_range: str = "refuse", name: str | None = None) -> ColumnData:
    """The column as records for a mean on [lo, hi] (module docstring: values or the grid).

    ``out_of_range``: "refuse" (a ``ParameterError`` naming how many and the first row) or
    "clip" (each value outside is moved to the nearer bound: the estimate is then the mean of
    the clipped column)."""
    if out_of_range not in ("refuse", "clip"):
        raise ParameterError(f"out_of_range must be 'refuse' or 'clip', got {out_of_range!r}")
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ParameterError(f"bounds must be two numbers (lo, hi), got {bounds!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ParameterError(f"bounds must be finite with lo < hi, got {bounds!r}")
    values, own = column_values(column)
    if values.dtype.kind not in "biuf":
        raise ParameterError(f"a mean needs numbers, the column holds {values.dtype} values")
    x = values.astype(np.float64)
    outside = (x < lo) | (x > hi)
    if out_of_range == "refuse":
        _refuse_outside(outside, f"within the bounds [{lo:g}, {hi:g}] (pass out_of_range='clip' to clip them)")
    x = np.clip(x, lo, hi)
    field_name = _field_name(name or own)
    whole = lo.is_integer() and hi.is_integer() and INT16_RANGE[0] <= lo and hi <= INT16_RANGE[1]
    if values.dtype.kind in "biu" and whole:
        return ColumnData(field_name, "values", (), (int(lo), int(hi), 1), (lo, hi), True, x.astype(RECORD_DTYPE).reshape(-1, 1))
    codes = np.rint((x - lo) / (hi - lo) * GRID)
    return ColumnData(field_name, "grid", (), (0, GRID, 1), (lo, hi), True, codes.astype(RECORD_DTYPE).reshape(-1, 1))
