"""Declared data: the schema file of a data file, and how one column's cells become records.

A schema file (JSON, written by ``ldp-sim schema infer FILE`` and reviewed by the user) declares
each field of the users' records and, per field, how the file's cells map onto the small
integers records hold (``ldp.core.schema.RECORD_DTYPE``, int16). Everything it declares is
public: the aggregator reads the schema in ``Ready`` before any ε is spent (invariant I3,
docs/security.md), so a declaration names ranges, grids and labels that are public knowledge,
never ones read off the data.

Format 1
--------
::

    {"format": 1, "fields": [
        {"name": "x", "length": 3, "low": 0, "high": 1},
        {"name": "y", "low": -1, "high": 1, "step": 2, "columns": ["label"]},
        {"name": "species", "type": "category", "categories": ["Adelie", "Chinstrap", "Gentoo"],
         "missing": "category", "columns": [" Species "]},
        {"name": "income", "low": 0, "high": 2000000, "step": 1000, "out_of_range": "clip"},
        {"name": "mass", "type": "float", "low": 2.5, "high": 6.5, "resolution": 0.1,
         "out_of_range": "clip", "missing": "drop"}
    ]}

Keys of a field: ``name`` (an identifier, required), ``length`` (default 1), ``columns`` (the
``length`` file columns holding the field, in order; default ``name``, or ``name_0 ..
name_{L−1}``), ``type`` (default ``"integer"``) and, by type:

* ``"integer"``: ``low`` (default 0), ``high`` (default 1), ``step`` (default 1): the values
  low, low+step, …, high, of any width within int64. A cell holds an integer as Python's
  ``int()`` reads it, or a float holding a whole number (``3.0``, as pandas writes an integer
  column with gaps), in CSV and Parquet alike (Parquet: also a boolean).
* ``"category"``: ``categories``, the list of labels (unique strings without surrounding spaces).
  A cell is matched as text, after stripping surrounding spaces (a Parquet column of another type
  is read as text: ``1``, ``2.5``, ``true``).
* ``"float"``: ``low``, ``high`` (numbers) and ``resolution`` (> 0; (high − low) / resolution a
  whole number): the grid low, low+resolution, …, high. A value is rounded to the nearest grid
  point (ties to even).

and for every type, ``missing``: what an empty cell (a Parquet null; a float NaN) means:

* ``"refuse"`` (default): it is an error naming the cell;
* ``"category"``: a value of its own, the *missing slot*, after the declared values;
* ``"drop"``: the user is left out of this field's statistics but not out of the population: it
  keeps its row and holds the missing slot as with ``"category"``, so that the number of users,
  which the aggregator reads in ``Ready`` before any ε is spent, stays the number of rows and does
  not depend on the values (I3). An estimate of the field's values reports the users with a
  value (the missing slot is estimated like any value and left out, as post-processing); the
  exact number of empty cells is ``DataPopulation.missing_counts()``, on the data owner's
  machine only.

and, for ``"integer"`` and ``"float"``, ``out_of_range``: ``"refuse"`` (default: a value outside
low..high is an error) or ``"clip"`` (it becomes low or high).

What records hold
-----------------
A field that declares only name, length, low, high, step, columns, within int16 and with
``"missing": "refuse"``, holds its values as before (``Field(name, length, low, high, step)``;
the schema files written before these keys keep their records and identity). Every other field
holds the *index* of the value: 0 … k−1 for the k declared values in order (categories in the
order listed), and k for the missing slot; its public ``Field`` is ``(name, length, 0, k−1 or k,
1)``. An index needs k (+1) ≤ 32768 (``MAX_CODES``): a wider declaration is refused, naming what
to change. ``ColumnSpec.values()`` and ``ColumnSpec.labels`` say what each record value stands for.

Why offsets and not wider records: records are int16 throughout the library (randomizers,
queries, samplers: ``RECORD_DTYPE``); an LDP field of more than 32768 values is not estimable
at useful ε anyway, so a wide integer is declared with a step (or as a float grid) instead.

``format`` is the layout's version (``SCHEMA_FORMAT``, 1): another value, an unknown key, a
missing key or a wrong type is refused naming the key. A file without ``format`` (written before
format 1: ``{"fields": [...]}``, or ``Schema.to_json()``'s bare list) is read deliberately, so
that declared schemas keep working.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import numpy as np

from ldp.core import file_format
from ldp.core.errors import ParameterError
from ldp.core.schema import Field, Schema

__all__ = [
    "ColumnSpec",
    "DeclaredSchema",
    "SCHEMA_FORMAT",
    "MAX_CODES",
    "MISSING_LABEL",
    "MISSING_POLICIES",
    "OUT_OF_RANGE_POLICIES",
    "TYPES",
    "INT16_LOW",
    "INT16_HIGH",
    "default_columns",
    "parse_declaration",
    "parse_schema_json",
    "schema_from_json",
    "read_declaration",
    "read_schema_file",
    "schema_to_json",
    "declared_from_schema",
    "one_line",
    "inference_spec",
    "require_unique_columns",
    "show_value",
]

INT16_LOW, INT16_HIGH = -(2**15), 2**15 - 1
INT64_LOW, INT64_HIGH = -(2**63), 2**63 - 1
MAX_CODES = 2**15  # an index field holds 0..MAX_CODES−1 (int16 records are signed)
MISSING_LABEL = "(missing)"  # the label of the missing slot (ColumnSpec.labels)
SCHEMA_FORMAT = 1  # the schema-file layout schema_to_json writes and parse_schema_json reads
TYPES = ("integer", "category", "float")
MISSING_POLICIES = ("refuse", "category", "drop")
OUT_OF_RANGE_POLICIES = ("refuse", "clip")
_PLAIN_KEYS = ("name", "length", "low", "high", "step", "columns")
_FIELD_KEYS = (*_PLAIN_KEYS, "type", "categories", "resolution", "out_of_range", "missing")
_KEYS_BY_TYPE = {
    "integer": {"low", "high", "step", "out_of_range"},
    "category": {"categories"},
    "float": {"low", "high", "resolution", "out_of_range"},
}
_TYPED_KEYS = {"low", "high", "step", "categories", "resolution", "out_of_range"}
_SCHEMA_KEYS = ("format", "fields")
_INFERRING = ""  # the name of inference_spec(): any int16, with the int16 message
_REWRITE_SCHEMA = "write it again with this version's `ldp-sim schema infer FILE`, or set \"format\": 1 by hand"
_GRID_TOLERANCE = 1e-9  # relative: (high − low) / resolution must be this close to a whole number

PathLike = Union[str, "os.PathLike[str]"]
Bad = tuple[int, str]  # (index in the column, problem)


def one_line(exc: BaseException) -> str:
    """An exception's text on one line (or its type's name when it has none)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def show_value(value: Any) -> str:
    """A cell's value for an error message, at most 40 characters."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _number(value: float | int) -> str:
    return repr(value) if isinstance(value, float) and not float(value).is_integer() else str(int(value))


@dataclass(frozen=True)
class ColumnSpec:
    """How one field's cells become record values: the declaration of a schema-file field.

    Parameters
    ----------
    name : str
        The field's name (for messages).
    type : {"integer", "category", "float"}
    low, high : int or float
        The declared range (integer, float); 0 and k−1 for a category.
    step : int or float
        The integer step, or the float grid's ``resolution``; 1 for a category.
    categories : tuple of str
        The labels of a category field, in index order.
    out_of_range : {"refuse", "clip"}
    missing : {"refuse", "category", "drop"}

    Notes
    -----
    Construct one through ``parse_declaration`` (which checks the declaration) or
    ``ColumnSpec.plain(field)``.
    """

    name: str
    type: str = "integer"
    low: Any = 0
    high: Any = 1
    step: Any = 1
    categories: tuple[str, ...] = ()
    out_of_range: str = "refuse"
    missing: str = "refuse"

    @classmethod
    def plain(cls, f: Field) -> ColumnSpec:
        """The declaration of a plain integer ``Field`` (records hold the values)."""
        return cls(f.name, "integer", int(f.low), int(f.high), int(f.step))

    @property
    def count(self) -> int:
        """k: the number of declared values (without the missing slot)."""
        if self.type == "category":
            return len(self.categories)
        if self.type == "float":
            return int(round((self.high - self.low) / self.step)) + 1
        return (int(self.high) - int(self.low)) // int(self.step) + 1

    @property
    def has_slot(self) -> bool:
        """True when an empty cell is kept (``missing`` is "category" or "drop")."""
        return self.missing != "refuse"

    @property
    def missing_slot(self) -> int | None:
        """The record value an empty cell becomes (k), or None when empty cells are refused."""
        return self.count if self.has_slot else None

    @property
    def coded(self) -> bool:
        """True when records hold the value's index 0..k−1 (k: missing) rather than the value."""
        return not (
            self.type == "integer"
            and not self.has_slot
            and INT16_LOW <= self.low
            and self.high <= INT16_HIGH
        )

    @property
    def plain_declaration(self) -> bool:
        """True when the declaration is what a schema file before these keys could say."""
        return not self.coded and self.out_of_range == "refuse"

    def field(self, length: int = 1) -> Field:
        """The public ``Field`` of this declaration (what the aggregator reads)."""
        if not self.coded:
            return Field(self.name, length, int(self.low), int(self.high), int(self.step))
        return Field(self.name, length, 0, self.count - 1 + (1 if self.has_slot else 0), 1)

    @property
    def labels(self) -> tuple[str, ...] | None:
        """A category field's label for each record value 0..k (the missing slot is
        ``MISSING_LABEL``); None for a numeric field (see ``values``)."""
        if self.type != "category":
            return None
        return self.categories + ((MISSING_LABEL,) if self.has_slot else ())

    def values(self) -> np.ndarray:
        """What each record value of the field stands for, in the order of ``field().values()``:
        the integers (int64) or the float grid (float64, NaN for the missing slot), or the labels
        (an object array) of a category."""
        if self.type == "category":
            return np.array(self.labels, dtype=object)
        if self.type == "float":
            grid = self.low + self.step * np.arange(self.count, dtype=np.float64)
            grid[-1] = self.high  # exact at the top, whatever the rounding of low + (k−1)·resolution
            return np.append(grid, np.nan) if self.has_slot else grid
        if not self.coded:
            return np.arange(int(self.low), int(self.high) + 1, int(self.step), dtype=np.int64)
        grid_i = int(self.low) + int(self.step) * np.arange(self.count, dtype=np.int64)
        return np.append(grid_i.astype(np.float64), np.nan) if self.has_slot else grid_i

    def allowed(self) -> str:
        """What a cell of this field may hold, for an error message (declared: public)."""
        if self.type == "category":
            shown = ", ".join(repr(c) for c in self.categories[:8]) + (", ..." if len(self.categories) > 8 else "")
            return f"one of the {len(self.categories)} categories of field {self.name!r}: {shown}"
        if self.type == "float":
            return f"a number in {_number(self.low)}..{_number(self.high)} (field {self.name!r}, resolution {_number(self.step)})"
        return f"an integer in {self.low}..{self.high}" + (f" in steps of {self.step}" if self.step != 1 else "") + f" (field {self.name!r})"

    def to_json(self, length: int = 1, columns: Sequence[str] | None = None) -> dict[str, Any]:
        """This field in the schema-file format; ``columns`` are written when given."""
        d: dict[str, Any] = {"name": self.name, "length": length}
        if self.type != "integer":
            d["type"] = self.type
        if self.type == "category":
            d["categories"] = list(self.categories)
        elif self.type == "float":
            d.update(low=self.low, high=self.high, resolution=self.step)
        else:
            d.update(low=int(self.low), high=int(self.high), step=int(self.step))
        if self.out_of_range != "refuse":
            d["out_of_range"] = self.out_of_range
        if self.missing != "refuse":
            d["missing"] = self.missing
        if columns is not None:
            d["columns"] = list(columns)
        return d

    # -- cells → records (shared by CSV and Parquet) ---------------------------------------

    def encode_numbers(self, a: np.ndarray, empty: np.ndarray | None, quote: bool) -> tuple[np.ndarray, int, Bad | None]:
        """Numeric cells (int, uint, float or bool) → (int64 record values, empty cells kept,
        first bad cell). ``empty`` marks cells that are empty (null); NaN is empty for a float
        field and for a field that keeps empty cells. ``quote`` False: no problem names a value."""
        if a.dtype == np.bool_:
            a = a.astype(np.int8)
        n = len(a)
        empty = np.zeros(n, dtype=bool) if empty is None else empty.copy()
        if a.dtype.kind == "f" and (self.type == "float" or self.has_slot):
            empty |= np.isnan(a)
        if self.type == "category":  # a numeric column read as text (1, 2.5)
            return self.encode_text([str(v) for v in a.tolist()], empty, quote)
        if self.type == "float":
            return self._encode_float(a.astype(np.float64, copy=False), empty, quote)
        return self._encode_integer(a, empty, quote)

    def encode_text(self, cells: Sequence[str | None] | np.ndarray, empty: np.ndarray | None, quote: bool) -> tuple[np.ndarray, int, Bad | None]:
        """Text cells (CSV, or a Parquet string column; None is a null) → as ``encode_numbers``.
        A cell is read after stripping surrounding spaces; an empty one is a missing value."""
        if self.type == "category":
            return self._encode_labels(cells, empty, quote)
        n = len(cells)
        parse: Callable[[Any], Any] = int if self.type == "integer" else float
        dtype = np.int64 if self.type == "integer" else np.float64
        try:  # the common case: every cell a number (int() and float() ignore surrounding spaces)
            values = np.fromiter(map(parse, cells), dtype=dtype, count=n)
            return self.encode_numbers(values, empty, quote)
        except (ValueError, OverflowError, TypeError):
            pass
        # empty cells ("" from a CSV, None for a null; a CSV cell of spaces only is "" too, as
        # the reader skips initial spaces) read as 0 and are marked empty
        blank = np.fromiter(map(operator.not_, cells), dtype=bool, count=n)
        if empty is not None:
            blank |= empty
        filled = [c or "0" for c in cells]
        try:
            values = np.fromiter(map(parse, filled), dtype=dtype, count=n)
        except (ValueError, OverflowError, TypeError):
            pass
        else:
            return self.encode_numbers(values, blank, quote)
        if self.type == "integer":
            read = self._integers_written_as_floats(cells, filled, blank, quote)
            if read is not None:
                return read
        return self._encode_cells_slowly(cells, blank, quote)

    def _encode_labels(self, cells: Sequence[str | None] | np.ndarray, empty: np.ndarray | None, quote: bool) -> tuple[np.ndarray, int, Bad | None]:
        """A category field's text cells → label indices (an empty cell or a null is missing)."""
        lookup: dict[Any, int] = {c: i for i, c in enumerate(self.categories)}
        lookup[""] = -2
        lookup[None] = -2
        codes = np.fromiter(map(lookup.get, cells, itertools.repeat(-1)), dtype=np.int64, count=len(cells))
        for i in np.flatnonzero(codes == -1).tolist():  # a label with spaces around it, or none
            cell = cells[i]
            codes[i] = lookup.get(cell.strip(), -1) if isinstance(cell, str) else -1
        if empty is not None:
            codes[empty] = -2
        return self._finish(codes, codes == -2, codes == -1, lambda i: self._not_allowed(cells[i], quote), quote)

    def _integers_written_as_floats(
        self, cells: Sequence[str | None] | np.ndarray, filled: list[str], blank: np.ndarray, quote: bool
    ) -> tuple[np.ndarray, int, Bad | None] | None:
        """"3.0": an integer written as a float (pandas writes an integer column with gaps so),
        read as Parquet's float columns are; exact while |v| < 2^53 (None: read cell by cell)."""
        try:
            floats = np.fromiter(map(float, filled), dtype=np.float64, count=len(filled))
        except (ValueError, OverflowError, TypeError):
            return None
        if (np.abs(floats[np.isfinite(floats)]) >= 2.0**53).any():
            return None
        codes, kept, bad = self.encode_numbers(floats, blank, quote)
        if bad is not None and quote and bad[1].endswith(" is not an integer"):
            bad = (bad[0], f"value {show_value(cells[bad[0]])} is not an integer")  # as the cell is written
        return codes, kept, bad

    def _encode_cells_slowly(self, cells: Sequence[str | None] | np.ndarray, blank: np.ndarray, quote: bool) -> tuple[np.ndarray, int, Bad | None]:
        """Cell by cell: a cell that is not a number (or an integer beyond int64) is found here."""
        out = np.zeros(len(cells), dtype=np.float64 if self.type == "float" else np.int64)
        what = "an integer" if self.type == "integer" else "a number"
        for i, cell in enumerate(cells):
            if blank[i] or cell is None or not cell.strip():
                blank[i] = True
                continue
            problem = None
            v: int | float | None
            shown: Any = None  # the cell as written, when it was read through float ("1e30")
            try:
                v = int(cell) if self.type == "integer" else float(cell)
            except ValueError:
                v = _whole(cell) if self.type == "integer" else None
                shown = cell.strip()
            if v is None:
                problem = f"value {show_value(cell)} is not {what}" if quote else f"the cell is not {what}"
            elif self.type == "integer" and not INT64_LOW <= v <= INT64_HIGH:
                if self.out_of_range == "clip":
                    v = INT64_LOW if v < 0 else INT64_HIGH
                else:  # beyond int64 is beyond any declared range
                    problem = self._out_of_range(v if shown is None else shown, quote)
            if problem is not None:
                # the first bad cell may lie before this one (a value out of range, an empty
                # cell): the head before it is all numbers, so the fast path checks it
                _, _, bad = self.encode_text(cells[:i], blank[:i], quote)
                return np.zeros(0, np.int64), 0, (bad if bad is not None else (i, problem))
            assert v is not None  # a problem returned above
            out[i] = v
        return self.encode_numbers(out, blank, quote)

    def _encode_integer(self, a: np.ndarray, empty: np.ndarray, quote: bool) -> tuple[np.ndarray, int, Bad | None]:
        low, high, step = int(self.low), int(self.high), int(self.step)
        not_integer = np.zeros(len(a), dtype=bool)
        if a.dtype.kind == "f":
            finite = np.isfinite(a)
            not_integer = ~empty & (~finite | (a != np.floor(np.where(finite, a, 0.0))))
            af = np.where(not_integer | empty, float(low), a)
            below, above = af < low, af > high  # exact for |bounds| < 2^53; beyond, float cells are inexact anyway
            values = np.clip(af, max(low, INT64_LOW), min(high, 2.0**63 - 1024)).astype(np.int64)
        elif a.dtype.kind == "u":
            big = a > np.uint64(INT64_HIGH)
            a64 = np.where(big, 0, a).astype(np.int64)
            below = ~big & (a64 < low)
            above = big | (a64 > high)
            values = np.clip(a64, low, high)
        else:
            a64 = a.astype(np.int64, copy=False)
            below, above = a64 < low, a64 > high
            values = np.clip(a64, low, high)
        below &= ~empty
        above &= ~empty
        clip = self.out_of_range == "clip"
        out_of_range = np.zeros(len(a), dtype=bool) if clip else (below | above)
        # offset from low, exact in uint64 arithmetic (values are clipped into low..high)
        offset = values.astype(np.uint64) - np.uint64(low % 2**64)
        off_grid = ~empty & ~not_integer & ~out_of_range & (offset % np.uint64(step) != 0) if step > 1 else np.zeros(len(a), dtype=bool)
        codes = values if not self.coded else (offset // np.uint64(step)).astype(np.int64)
        bad_mask = not_integer | out_of_range | off_grid

        def problem(i: int) -> str:
            if not_integer[i]:
                return f"value {show_value(a[i].item())} is not an integer" if quote else "the cell is not an integer"
            shown = a[i].item()
            return self._out_of_range(int(shown) if isinstance(shown, float) else shown, quote)

        return self._finish(codes, empty, bad_mask, problem, quote)

    def _encode_float(self, a: np.ndarray, empty: np.ndarray, quote: bool) -> tuple[np.ndarray, int, Bad | None]:
        low, high, res = float(self.low), float(self.high), float(self.step)
        v = np.where(empty, low, a)
        outside = ~((v >= low) & (v <= high))  # inf is outside; NaN is empty here
        if self.out_of_range == "clip":
            v = np.clip(v, low, high)
            bad_mask = np.zeros(len(a), dtype=bool)
        else:
            bad_mask = outside & ~empty
            v = np.where(bad_mask, low, v)
        codes = np.clip(np.rint((v - low) / res), 0, self.count - 1).astype(np.int64)

        def problem(i: int) -> str:
            return self._out_of_range(a[i].item(), quote)

        return self._finish(codes, empty, bad_mask, problem, quote)

    def _finish(self, codes: np.ndarray, empty: np.ndarray, bad_mask: np.ndarray, problem: Any, quote: bool) -> tuple[np.ndarray, int, Bad | None]:
        """Apply the missing policy; the first bad cell (a bad value or a refused empty cell)."""
        if self.has_slot:
            codes = np.where(empty, self.count, codes)
        else:
            bad_mask = bad_mask | empty
        if not bad_mask.any():
            return codes, int(empty.sum()) if self.has_slot else 0, None
        i = int(np.argmax(bad_mask))
        if empty[i] and not self.has_slot:
            return codes, 0, (i, self._empty_refused())
        return codes, 0, (i, problem(i))

    def _empty_refused(self) -> str:
        what = "an integer" if self.type == "integer" else ("a number" if self.type == "float" else "a category")
        return (
            f"the cell is empty; every cell must hold {what} (field {self.name!r} declares no missing values: "
            "a schema may declare \"missing\": \"category\" or \"drop\")"
        )

    def _not_allowed(self, cell: Any, quote: bool) -> str:
        head = f"value {show_value(cell.strip() if isinstance(cell, str) else cell)}" if quote else "the cell"
        return f"{head} is not {self.allowed()}"

    def _out_of_range(self, value: Any, quote: bool) -> str:
        head = f"value {show_value(value)}" if quote else "the value"
        if self.type == "integer" and self.name == _INFERRING:
            return f"{head} is beyond the int16 range {INT16_LOW}..{INT16_HIGH}"
        if self.type == "integer" and not self.coded and self.out_of_range == "refuse":
            f = self.field()
            if f.cardinality <= 8:
                allowed = "one of " + ", ".join(str(v) for v in f.values().tolist())
            elif f.step == 1:
                allowed = f"an integer in {f.low}..{f.high}"
            else:
                allowed = f"{f.low}..{f.high} in steps of {f.step}"
            return f"{head} is not allowed by field {f.name!r} (low={f.low}, high={f.high}, step={f.step}: {allowed})"
        hint = "" if self.out_of_range == "clip" else " (a schema may declare \"out_of_range\": \"clip\")"
        return f"{head} is not {self.allowed()}{hint}"


def _whole(cell: str) -> int | None:
    """The integer a cell such as ``"3.0"`` or ``"1e3"`` writes, or None (not a whole number)."""
    try:
        v = float(cell)
    except ValueError:
        return None
    return int(v) if math.isfinite(v) and v.is_integer() else None


def inference_spec() -> ColumnSpec:
    """What a column may hold when no schema is declared: any int16 (``load_data`` infers)."""
    return ColumnSpec(_INFERRING, "integer", INT16_LOW, INT16_HIGH, 1)


@dataclass(frozen=True)
class DeclaredSchema:
    """A declared schema: the public ``Schema``, the file column behind each schema column, and
    each field's ``ColumnSpec`` (how its cells become records)."""

    schema: Schema
    columns: tuple[str, ...]
    specs: tuple[ColumnSpec, ...]

    @property
    def plain(self) -> bool:
        """True when every field is a plain integer field (records hold the values)."""
        return all(s.plain_declaration for s in self.specs)

    def spec(self, name: str) -> ColumnSpec:
        """The declaration of field ``name``."""
        for f, s in zip(self.schema, self.specs):
            if f.name == name:
                return s
        self.schema.field(name)  # raises UnknownKindError naming the fields
        raise AssertionError("unreachable")  # pragma: no cover

    def column_specs(self) -> list[ColumnSpec]:
        """One ``ColumnSpec`` per schema column (a field of length L repeats L times)."""
        return [s for f, s in zip(self.schema, self.specs) for _ in range(f.length)]

    def to_json(self) -> dict[str, Any]:
        """The schema-file format; ``columns`` are written per field only where they differ from
        the default. A plain schema is written exactly as before these keys."""
        out = []
        start = 0
        for f, s in zip(self.schema, self.specs):
            mine = list(self.columns[start : start + f.length])
            cols = None if tuple(mine) == default_columns(Schema((f,))) else mine
            out.append(s.to_json(f.length, cols))
            start += f.length
        return {"format": SCHEMA_FORMAT, "fields": out}

    def identity_json(self) -> Any:
        """What a population's identity hashes of the declaration beyond ``Schema.to_json``:
        None for a plain schema (so that its identity, and its users' ledgers, are unchanged)."""
        return None if self.plain else [s.to_json() for s in self.specs]


def default_columns(schema: Schema) -> tuple[str, ...]:
    """The file columns a schema reads by default: ``x`` for a field of length 1, else ``x_0..``."""
    names: list[str] = []
    for f in schema:
        names.extend([f.name] if f.length == 1 else [f"{f.name}_{i}" for i in range(f.length)])
    return tuple(names)


def declared_from_schema(schema: Schema, columns: Sequence[str] | None = None) -> DeclaredSchema:
    """A plain ``Schema`` as a declaration (every field a plain integer field)."""
    cols = tuple(columns) if columns is not None else default_columns(schema)
    return DeclaredSchema(schema, cols, tuple(ColumnSpec.plain(f) for f in schema))


def _require_int(where: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(f"{where}: {key!r} must be an integer, got {value!r}"[:300])
    return value


def _require_number(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ParameterError(f"{where}: {key!r} must be a finite number, got {value!r}"[:300])
    return float(value)


def _choice(where: str, item: Mapping[str, Any], key: str, allowed: Sequence[str]) -> str:
    value = item.get(key, allowed[0])
    if value not in allowed:
        raise ParameterError(f"{where}: {key!r} must be one of {list(allowed)}, got {value!r}"[:300])
    return str(value)


def _parse_field(item: Mapping[str, Any], where: str) -> tuple[Field, ColumnSpec]:
    """One schema-file field: its type's keys checked, then parsed by its type's parser."""
    kind = _choice(where, item, "type", TYPES)
    wrong = sorted((set(item) & _TYPED_KEYS) - _KEYS_BY_TYPE[kind])
    if wrong:
        raise ParameterError(f"{where}: key(s) {wrong} do not apply to type {kind!r} (it takes {sorted(_KEYS_BY_TYPE[kind])})")
    length = _require_int(where, "length", item.get("length", 1))
    missing = _choice(where, item, "missing", MISSING_POLICIES)
    out_of_range = _choice(where, item, "out_of_range", OUT_OF_RANGE_POLICIES)
    spec = _FIELD_PARSERS[kind](item, where, missing, out_of_range)
    if kind == "integer" and not spec.coded:
        return Field(spec.name, length, spec.low, spec.high, spec.step), spec  # raises ParameterError naming the field, as before
    return spec.field(length), spec


def _integer_spec(item: Mapping[str, Any], where: str, missing: str, out_of_range: str) -> ColumnSpec:
    """``"type": "integer"``: low..high in steps (any width within int64; beyond int16, coded)."""
    name = item["name"]
    low, high, step = (_require_int(where, k, item.get(k, d)) for k, d in (("low", 0), ("high", 1), ("step", 1)))
    spec = ColumnSpec(name, "integer", low, high, step, out_of_range=out_of_range, missing=missing)
    if not spec.coded:
        return spec
    slot = 1 if missing != "refuse" else 0
    if not INT64_LOW <= low < high <= INT64_HIGH:
        raise ParameterError(f"{where}: need low < high within int64, got low={low}, high={high}")
    if step < 1 or (high - low) % step:
        raise ParameterError(f"{where}: step must be ≥ 1 and divide high − low, got step={step}")
    k = (high - low) // step + 1
    if k + slot > MAX_CODES:
        raise ParameterError(
            f"{where}: {low}..{high} in steps of {step} is {k} values{' and the missing slot' if slot else ''}; "
            f"a record holds at most {MAX_CODES} per column: declare a step of at least "
            f"{-(-(high - low) // (MAX_CODES - 1 - slot))} dividing high − low, or type \"float\" with a resolution"
        )
    return spec


def _category_spec(item: Mapping[str, Any], where: str, missing: str, out_of_range: str) -> ColumnSpec:
    """``"type": "category"``: the listed labels, record values 0..k−1 (the missing slot k)."""
    cats = item.get("categories")
    if isinstance(cats, (str, bytes)) or not isinstance(cats, Sequence) or not all(isinstance(c, str) for c in cats):
        raise ParameterError(f"{where}: type \"category\" needs \"categories\", a list of label strings, got {cats!r}"[:300])
    labels = tuple(cats)
    slot = 1 if missing != "refuse" else 0
    for c in labels:
        if not c.strip() or c != c.strip():
            raise ParameterError(f"{where}: category {c!r} is empty or has surrounding spaces (cells are matched after stripping them)")
    if len(set(labels)) != len(labels):
        raise ParameterError(f"{where}: categories must be unique, got {[c for c in labels if labels.count(c) > 1][0]!r} twice")
    if slot and MISSING_LABEL in labels:
        raise ParameterError(f"{where}: {MISSING_LABEL!r} is the missing slot's label; name the category otherwise")
    if len(labels) + slot < 2:
        raise ParameterError(f"{where}: a category field needs at least 2 values, got {list(labels)}{' and no missing slot' if not slot else ''}")
    if len(labels) + slot > MAX_CODES:
        raise ParameterError(f"{where}: {len(labels)} categories{' and the missing slot' if slot else ''}; a record holds at most {MAX_CODES} per column")
    return ColumnSpec(item["name"], "category", 0, len(labels) - 1, 1, labels, missing=missing)


def _float_spec(item: Mapping[str, Any], where: str, missing: str, out_of_range: str) -> ColumnSpec:
    """``"type": "float"``: low..high on a grid of ``resolution`` (values round to the nearest point)."""
    if "resolution" not in item:
        raise ParameterError(f"{where}: type \"float\" needs \"resolution\", the grid's step (e.g. 0.1)")
    flow, fhigh = (_require_number(where, k, item.get(k, d)) for k, d in (("low", 0), ("high", 1)))
    res = _require_number(where, "resolution", item["resolution"])
    slot = 1 if missing != "refuse" else 0
    if not flow < fhigh:
        raise ParameterError(f"{where}: need low < high, got low={_number(flow)}, high={_number(fhigh)}")
    if res <= 0:
        raise ParameterError(f"{where}: resolution must be > 0, got {_number(res)}")
    steps = (fhigh - flow) / res
    if abs(steps - round(steps)) > _GRID_TOLERANCE * max(1.0, steps):
        raise ParameterError(f"{where}: resolution {_number(res)} must divide high − low = {_number(fhigh - flow)} (a whole number of grid steps)")
    if round(steps) + 1 + slot > MAX_CODES:
        raise ParameterError(
            f"{where}: {_number(flow)}..{_number(fhigh)} at resolution {_number(res)} is {round(steps) + 1} values"
            f"{' and the missing slot' if slot else ''}; a record holds at most {MAX_CODES} per column: declare a coarser resolution"
        )
    return ColumnSpec(item["name"], "float", item.get("low", 0), item.get("high", 1), item["resolution"], out_of_range=out_of_range, missing=missing)


# One parser per declared type (a registry, not a switch): each checks its keys and returns the spec.
_FIELD_PARSERS: dict[str, Callable[[Mapping[str, Any], str, str, str], ColumnSpec]] = {"integer": _integer_spec, "category": _category_spec, "float": _float_spec}


def parse_declaration(data: Any) -> DeclaredSchema:
    """A declared schema from the schema-file format (see the module docstring).

    Format ``SCHEMA_FORMAT`` (1) is ``{"format": 1, "fields": [...]}``: both keys, no other.
    Without ``format`` (files written before format 1: ``{"fields": [...]}``, or the bare list
    of ``Schema.to_json()``) the file is still read, deliberately, so that the schemas users
    already declared keep working (their populations keep their identity and ledgers); unknown
    keys are refused there too. Another ``format``, an unknown or missing key, or a wrong type is
    a one-line ParameterError naming the key (``ldp.core.file_format``).

    >>> d = parse_declaration({"format": 1, "fields": [
    ...     {"name": "island", "type": "category", "categories": ["Biscoe", "Dream"], "missing": "drop"},
    ...     {"name": "mass", "type": "float", "low": 2.5, "high": 6.5, "resolution": 0.5, "out_of_range": "clip"}]})
    >>> [(f.name, f.low, f.high) for f in d.schema], d.spec("island").labels, d.spec("mass").values().tolist()
    ([('island', 0, 2), ('mass', 0, 8)], ('Biscoe', 'Dream', '(missing)'), [2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 6.5])
    """
    if isinstance(data, Mapping):
        version = file_format.read_format(data, what="schema", version=SCHEMA_FORMAT, rewrite=_REWRITE_SCHEMA)
        required = _SCHEMA_KEYS if version is not None else ("fields",)
        file_format.check_keys(data, what="schema", version=SCHEMA_FORMAT, known=_SCHEMA_KEYS, required=required)
        items = data["fields"]
    else:
        items = data
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise ParameterError(f"schema key 'fields' must be a list of field objects, got {type(items).__name__}")
    fields: list[Field] = []
    specs: list[ColumnSpec] = []
    columns: list[str] = []
    for k, item in enumerate(items):
        where = f"schema field #{k + 1}"
        if not isinstance(item, Mapping):
            raise ParameterError(f"{where}: must be an object with keys {list(_FIELD_KEYS)}, got {item!r}"[:300])
        if isinstance(item.get("name"), str):
            where = f"schema field {item['name']!r}"
        extra = sorted(set(item) - set(_FIELD_KEYS))
        if extra:
            raise ParameterError(f"{where}: unknown key(s) {extra}; allowed keys are {list(_FIELD_KEYS)}")
        if not isinstance(item.get("name"), str):
            raise ParameterError(f"{where}: needs a \"name\" string, got {item.get('name')!r}"[:300])
        f, spec = _parse_field(item, where)
        fields.append(f)
        specs.append(spec)
        if "columns" in item:
            cols = item["columns"]
            if (
                isinstance(cols, (str, bytes))
                or not isinstance(cols, Sequence)
                or not all(isinstance(c, str) for c in cols)
                or len(cols) != f.length
            ):
                raise ParameterError(f"{where}: \"columns\" must be a list of {f.length} column name(s), got {cols!r}"[:300])
            columns.extend(c.strip() for c in cols)  # header names are read stripped (CSV and Parquet alike)
        else:
            columns.extend(default_columns(Schema((f,))))
    schema = Schema(tuple(fields))
    require_unique_columns(columns, "schema")
    return DeclaredSchema(schema, tuple(columns), tuple(specs))


def parse_schema_json(data: Any) -> tuple[Schema, tuple[str, ...]]:
    """A schema and its file columns (one per schema column) from the schema-file format
    (``parse_declaration`` without the per-field declarations)."""
    declared = parse_declaration(data)
    return declared.schema, declared.columns


def schema_from_json(data: Any) -> Schema:
    """The schema of the schema-file format (``{"fields": [...]}`` or ``Schema.to_json()``'s list)."""
    return parse_declaration(data).schema


def read_declaration(path: PathLike) -> DeclaredSchema:
    """Read a JSON schema file (``parse_declaration``); errors start with the file's path."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ParameterError(f"schema file {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterError(f"schema file {str(p)!r} cannot be read: {one_line(exc)}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParameterError(f"{p}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    try:
        return parse_declaration(data)
    except ParameterError as exc:
        raise ParameterError(f"{p}: {exc}") from None


def read_schema_file(path: PathLike) -> tuple[Schema, tuple[str, ...]]:
    """Read a JSON schema file: the schema and the file columns it reads."""
    declared = read_declaration(path)
    return declared.schema, declared.columns


def schema_to_json(schema: Schema, columns: Sequence[str] | None = None) -> dict[str, Any]:
    """The schema-file format (``{"format": 1, "fields": [...]}``) of a plain schema; ``columns``
    are written per field only where they differ from the default (``DeclaredSchema.to_json``
    writes a declaration with types)."""
    cols = tuple(columns) if columns is not None else default_columns(schema)
    if len(cols) != schema.width:
        raise ParameterError(f"schema has {schema.width} columns, got {len(cols)} column names")
    return declared_from_schema(schema, cols).to_json()


def require_unique_columns(columns: Sequence[str], where: str) -> None:
    """Refuse a file column that two schema columns would read."""
    seen: set[str] = set()
    for c in columns:
        if c in seen:
            raise ParameterError(f"{where}: column {c!r} is used twice; each schema column needs its own file column")
        seen.add(c)
