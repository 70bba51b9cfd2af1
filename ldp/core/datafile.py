"""Real data: users' records from a local CSV or Parquet file.

A client process may host real users instead of simulated ones: one user per data row, user ids
0..n−1 in file order. The records stay on the client; only ``DataPopulation.public_description()``
(the schema and the number of users) is shown to the aggregator.

Files
-----
* **CSV** (any name but ``*.parquet`` / ``*.pq``): UTF-8 text (a BOM is allowed), comma separated,
  standard quoting, a header row naming the columns. Every cell of a used column must hold an
  integer as Python's ``int()`` reads it (optional sign, decimal digits, surrounding spaces).
  Completely blank lines are skipped and are not rows. Columns the records do not use are ignored
  (but every row must have as many cells as the header).
* **Parquet** (``*.parquet``, ``*.pq``, or any file that starts with ``PAR1``): needs pyarrow, the
  ``parquet`` extra (``pip install 'ldp-sim[parquet]'``). Used columns may be integer, boolean (0/1),
  floating point holding whole numbers, or strings read as in a CSV file. ``records()`` reads only
  the row groups and columns it needs.

Rows are counted the way a person reads the file: **row N is the N-th data row, from 1** (the
header is not a row), i.e. user N−1. CSV errors also give the file's physical ``line``.

Schema file (JSON)
------------------
::

    {"format": 1, "fields": [
        {"name": "x", "length": 3, "low": 0, "high": 1},
        {"name": "y", "low": -1, "high": 1, "step": 2, "columns": ["label"]}
    ]}

``format`` is the layout's version (``SCHEMA_FORMAT``, 1): another value, an unknown key, a
missing key or a wrong type is refused naming the key. A file without ``format`` (written before
format 1) is read deliberately, as before, so that declared schemas keep working.

Keys of a field: ``name`` (an identifier, required), ``length`` (default 1), ``low`` (default 0),
``high`` (default 1), ``step`` (default 1) — the meaning of ``ldp.core.schema.Field`` — and
optionally ``columns``: the ``length`` file columns holding the field, in order. Without
``columns`` a field of length 1 is read from the column named like the field, and a field ``x`` of
length L from columns ``x_0 .. x_{L−1}``. The bare list that ``Schema.to_json()`` writes (the
public description's layout, unversioned) is accepted too. ``schema_to_json`` writes this format
(e.g. to save an inferred schema and edit it).

Inference, and why a served schema must be declared
---------------------------------------------------
Without a schema, ``load_data`` infers one for use in this process: every chosen column (default:
all, in file order) becomes a field of length 1 named like the column, with low = min, high = max
and step = the gcd of the differences between its values (a ±1 label becomes low −1, high 1,
step 2). A constant column c becomes c..c+1 (or c−1..c when c = 32767), as a field needs
low < high. Values must fit int16.

Such a schema is computed from the data's values: a one-row file ``37,1,52`` gives ranges
37..38, 1..2, 52..53, the whole record. The schema is public (the aggregator reads it in
``Ready`` before any ε is spent), so an inferred one must never be served (docs/design.md §2a,
invariant I3). A ``DataPopulation`` remembers whether its schema was declared
(``schema_declared``); ``public_description`` and ``require_declared_schema`` refuse an
inferred one with ``undeclared_schema_message``, and so do ``ClientConfig`` (a data file without
``schema_path``) and ``Shard.description``, the only way a description reaches the wire.

To write one: ``ldp-sim schema infer FILE > schema.json`` (``draft_schema``) runs on the user's
machine and writes a *draft* that does not copy the data's extremes: each column's range is
widened to 0..2^k−1 (or −(2^k−1)..2^k−1 when it holds negative values) for the smallest k ≥ 1
that covers the values, with step 1. The draft still tells how large the values are; the user
widens each range to the column's public range (e.g. ages 0..120) before declaring it with
``--schema schema.json``.

Errors
------
A user's mistake is a one-line ``ParameterError``:
``<file>, row <N> (line <L>), column '<name>': <problem>`` (no ``line`` for Parquet), where the
problem is e.g. ``value '1.5' is not an integer``, ``the cell is empty``, ``value 40000 is beyond
the int16 range -32768..32767`` or ``value 0 is not allowed by field 'y' (low=-1, high=1,
step=2: one of -1, 1)``. The first offender in file order is reported (earliest row, then
leftmost column).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np

from ldp.core.errors import ParameterError
from ldp.core.file_format import check_keys, read_format
from ldp.core.schema import RECORD_DTYPE, Field, Schema

__all__ = [
    "DataPopulation",
    "load_data",
    "infer_schema",
    "schema_from_json",
    "parse_schema_json",
    "read_schema_file",
    "schema_to_json",
    "default_columns",
    "SchemaDraft",
    "ColumnRange",
    "draft_schema",
    "draft_range",
    "undeclared_schema_message",
    "SCHEMA_FORMAT",
]

INT16_LOW, INT16_HIGH = -(2**15), 2**15 - 1
_CHUNK_ROWS = 1 << 16
_PARQUET_SUFFIXES = (".parquet", ".pq")
_FIELD_KEYS = ("name", "length", "low", "high", "step", "columns")
_IDENTITY_TAG = b"ldp.datafile/v1\n"
SCHEMA_FORMAT = 1  # the schema-file layout schema_to_json writes and parse_schema_json reads
_SCHEMA_KEYS = ("format", "fields")
_REWRITE_SCHEMA = "write it again with this version's `ldp-sim schema infer FILE`, or set \"format\": 1 by hand"

PathLike = Union[str, "os.PathLike[str]"]
SchemaLike = Union[Schema, str, "os.PathLike[str]", Mapping[str, Any], Sequence[Mapping[str, Any]], None]


# --------------------------------------------------------------------------------------------
# Schema (de)serialization


def default_columns(schema: Schema) -> tuple[str, ...]:
    """The file columns a schema reads by default: ``x`` for a field of length 1, else ``x_0..``."""
    names: list[str] = []
    for f in schema:
        names.extend([f.name] if f.length == 1 else [f"{f.name}_{i}" for i in range(f.length)])
    return tuple(names)


def _require_int(where: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(f"{where}: {key!r} must be an integer, got {value!r}")
    return value


def parse_schema_json(data: Any) -> tuple[Schema, tuple[str, ...]]:
    """A schema and its file columns (one per schema column) from the schema-file format.

    Format ``SCHEMA_FORMAT`` (1) is ``{"format": 1, "fields": [...]}``: both keys, no other.
    Without ``format`` (files written before format 1: ``{"fields": [...]}``, or the bare list
    of ``Schema.to_json()``) the file is still read, deliberately, so that the schemas users
    already declared keep working (their populations keep their identity and ledgers); unknown
    keys are refused there too. Another ``format``, an unknown or missing key, or a wrong type is
    a one-line ParameterError naming the key (``ldp.core.file_format``).
    """
    if isinstance(data, Mapping):
        version = read_format(data, what="schema", version=SCHEMA_FORMAT, rewrite=_REWRITE_SCHEMA)
        required = _SCHEMA_KEYS if version is not None else ("fields",)
        check_keys(data, what="schema", version=SCHEMA_FORMAT, known=_SCHEMA_KEYS, required=required)
        items = data["fields"]
    else:
        items = data
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise ParameterError(f"schema key 'fields' must be a list of field objects, got {type(items).__name__}")
    fields: list[Field] = []
    columns: list[str] = []
    for k, item in enumerate(items):
        where = f"schema field #{k + 1}"
        if not isinstance(item, Mapping):
            raise ParameterError(f"{where}: must be an object with keys {list(_FIELD_KEYS)}, got {item!r}")
        if isinstance(item.get("name"), str):
            where = f"schema field {item['name']!r}"
        extra = sorted(set(item) - set(_FIELD_KEYS))
        if extra:
            raise ParameterError(f"{where}: unknown key(s) {extra}; allowed keys are {list(_FIELD_KEYS)}")
        if not isinstance(item.get("name"), str):
            raise ParameterError(f"{where}: needs a \"name\" string, got {item.get('name')!r}")
        kwargs = {key: _require_int(where, key, item[key]) for key in ("length", "low", "high", "step") if key in item}
        f = Field(item["name"], **kwargs)  # raises ParameterError naming the field
        fields.append(f)
        if "columns" in item:
            cols = item["columns"]
            if (
                isinstance(cols, (str, bytes))
                or not isinstance(cols, Sequence)
                or not all(isinstance(c, str) for c in cols)
                or len(cols) != f.length
            ):
                raise ParameterError(
                    f"{where}: \"columns\" must be a list of {f.length} column name(s), got {cols!r}"
                )
            columns.extend(cols)
        else:
            columns.extend(default_columns(Schema((f,))))
    schema = Schema(tuple(fields))
    _require_unique_columns(columns, "schema")
    return schema, tuple(columns)


def schema_from_json(data: Any) -> Schema:
    """The schema of the schema-file format (``{"fields": [...]}`` or ``Schema.to_json()``'s list)."""
    return parse_schema_json(data)[0]


def read_schema_file(path: PathLike) -> tuple[Schema, tuple[str, ...]]:
    """Read a JSON schema file: the schema and the file columns it reads."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ParameterError(f"schema file {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterError(f"schema file {str(p)!r} cannot be read: {_one_line(exc)}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParameterError(f"{p}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    try:
        return parse_schema_json(data)
    except ParameterError as exc:
        raise ParameterError(f"{p}: {exc}") from None


def schema_to_json(schema: Schema, columns: Sequence[str] | None = None) -> dict[str, Any]:
    """The schema-file format (``{"format": 1, "fields": [...]}``); ``columns`` are written per
    field only where they differ from the default."""
    cols = tuple(columns) if columns is not None else default_columns(schema)
    if len(cols) != schema.width:
        raise ParameterError(f"schema has {schema.width} columns, got {len(cols)} column names")
    out = []
    start = 0
    for f in schema:
        d: dict[str, Any] = {"name": f.name, "length": f.length, "low": f.low, "high": f.high, "step": f.step}
        mine = list(cols[start : start + f.length])
        if tuple(mine) != default_columns(Schema((f,))):
            d["columns"] = mine
        out.append(d)
        start += f.length
    return {"format": SCHEMA_FORMAT, "fields": out}


def _require_unique_columns(columns: Sequence[str], where: str) -> None:
    seen: set[str] = set()
    for c in columns:
        if c in seen:
            raise ParameterError(f"{where}: column {c!r} is used twice; each schema column needs its own file column")
        seen.add(c)


# --------------------------------------------------------------------------------------------
# Value checks (shared by CSV and Parquet)


@dataclass(frozen=True)
class _Bounds:
    """What one record column may hold: a declared field, or anything int16 (inference)."""

    low: int = INT16_LOW
    high: int = INT16_HIGH
    step: int = 1
    field: Field | None = None

    def problem(self, value: int) -> str:
        if self.field is None:
            return f"value {value} is beyond the int16 range {INT16_LOW}..{INT16_HIGH}"
        f = self.field
        if f.cardinality <= 8:
            allowed = "one of " + ", ".join(str(v) for v in f.values().tolist())
        elif f.step == 1:
            allowed = f"an integer in {f.low}..{f.high}"
        else:
            allowed = f"{f.low}..{f.high} in steps of {f.step}"
        return f"value {value} is not allowed by field {f.name!r} (low={f.low}, high={f.high}, step={f.step}: {allowed})"


def _bounds_for(schema: Schema) -> list[_Bounds]:
    return [_Bounds(f.low, f.high, f.step, f) for f in schema for _ in range(f.length)]


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


_Bad = tuple[int, str]  # (index in the chunk, problem)


def _check_numeric(a: np.ndarray, b: _Bounds) -> tuple[np.ndarray, _Bad | None]:
    """Integer, boolean or float values → (int64 values, first bad cell)."""
    if a.dtype == np.bool_:
        a = a.astype(np.int8)
    af = a.astype(np.float64, copy=False)
    # Exact for the range test: the bounds are small integers and float64 conversion is monotone.
    out_of_range = ~((af >= b.low) & (af <= b.high))  # NaN counts as out of range
    if a.dtype.kind == "f":
        not_integer = ~np.isfinite(af) | (af != np.floor(np.where(np.isfinite(af), af, 0.0)))
        bad = out_of_range | not_integer
    else:
        not_integer = None
        bad = out_of_range
    values = np.where(bad, float(b.low), af).astype(np.int64)  # exact: kept values fit int16
    if b.step > 1:
        bad = bad | ((values - b.low) % b.step != 0)
    if not bad.any():
        return values, None
    i = int(np.argmax(bad))
    if not_integer is not None and not_integer[i]:
        return values, (i, f"value {_show(a[i].item())} is not an integer")
    shown = a[i].item()
    if isinstance(shown, float):
        shown = int(shown)
    return values, (i, b.problem(shown))


def _check_strings(cells: Sequence[str], b: _Bounds) -> tuple[np.ndarray, _Bad | None]:
    """Text cells → (int64 values, first bad cell); a cell is read as ``int()`` reads it."""
    try:
        values = np.fromiter(map(int, cells), dtype=np.int64, count=len(cells))
    except (ValueError, OverflowError):
        pass
    else:
        return _check_numeric(values, b)
    for i, cell in enumerate(cells):
        text = cell.strip()
        if not text:
            return np.zeros(0, np.int64), (i, "the cell is empty; every cell must hold an integer")
        try:
            v = int(text)
        except ValueError:
            return np.zeros(0, np.int64), (i, f"value {_show(cell)} is not an integer")
        if not (b.low <= v <= b.high and (v - b.low) % b.step == 0):
            return np.zeros(0, np.int64), (i, b.problem(v))
    raise AssertionError("unreachable: numpy rejected a column that every cell of passes")  # pragma: no cover


def _first_bad(bads: Sequence[tuple[_Bad | None, int]]) -> tuple[int, int, str] | None:
    """(row index, column position, problem) of the earliest bad cell, ties to the leftmost column."""
    found = [(bad[0], pos, bad[1]) for bad, pos in bads if bad is not None]
    return min(found) if found else None


# --------------------------------------------------------------------------------------------
# CSV


@dataclass
class _Table:
    """What a load found: size, file digest, and (when read) the record matrix."""

    size: int
    digest: bytes
    matrix: np.ndarray | None
    stat: tuple[int, int]
    row_groups: tuple[int, ...] = ()  # Parquet: first row of each row group, then the total


def _stat(p: Path) -> tuple[int, int]:
    st = p.stat()
    return (st.st_size, st.st_mtime_ns)


def _csv_error(display: str, exc: Exception, line: int) -> ParameterError:
    return ParameterError(f"{display}, line {line}: malformed CSV: {_one_line(exc)}")


def _read_csv(
    p: Path, display: str, columns: tuple[str, ...] | None, bounds: list[_Bounds] | None
) -> tuple[tuple[str, ...], _Table]:
    """Parse and check a CSV file; ``columns`` None means every header column (inference)."""
    try:
        stat = _stat(p)
        data = p.read_bytes()
    except OSError as exc:
        raise ParameterError(f"data file {display!r} cannot be read: {_one_line(exc)}") from None
    digest = hashlib.sha256(data).digest()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParameterError(f"{display}: not UTF-8 text (byte {exc.start} cannot be decoded)") from None
    del data
    reader = csv.reader(io.StringIO(text, newline=""), strict=True, skipinitialspace=True)
    prev_line = 0
    header: list[str] | None = None
    try:
        for row in reader:
            if row:
                header = [h.strip() for h in row]
                break
            prev_line = reader.line_num
    except csv.Error as exc:
        raise _csv_error(display, exc, prev_line + 1) from None
    if header is None:
        raise ParameterError(f"{display}: the file is empty; a CSV data file needs a header row naming its columns")
    header_line = reader.line_num
    prev_line = header_line

    names = _choose_columns(display, header, columns, inferring=bounds is None)
    if bounds is None:
        bounds = [_Bounds() for _ in names]
    index = [header.index(c) for c in names]
    # tie-break on the file's column order: the leftmost offending cell of a row is reported
    order = sorted(range(len(names)), key=lambda k: index[k])
    position = {k: r for r, k in enumerate(order)}

    parts: list[np.ndarray] = []
    rows_seen = 0
    width = len(header)

    def flush(chunk: list[list[str]], lines: list[int]) -> None:
        nonlocal rows_seen
        block = np.empty((len(chunk), len(names)), dtype=RECORD_DTYPE)
        bads = []
        for k, (j, b) in enumerate(zip(index, bounds)):
            values, bad = _check_strings([r[j] for r in chunk], b)
            bads.append((bad, position[k]))
            if bad is None:
                block[:, k] = values
        first = _first_bad(bads)
        if first is not None:
            i, pos, problem = first
            col = names[order[pos]]
            raise ParameterError(f"{display}, row {rows_seen + i + 1} (line {lines[i]}), column {col!r}: {problem}")
        parts.append(block)
        rows_seen += len(chunk)

    chunk: list[list[str]] = []
    lines: list[int] = []
    blank = 0  # the first blank line after the header (allowed only at the end of the file)
    try:
        for row in reader:
            if not row:
                blank = blank or prev_line + 1
                prev_line = reader.line_num
                continue
            if blank:
                raise ParameterError(
                    f"{display}, line {blank}: a blank line between data rows (blank lines are allowed only "
                    f"at the end of the file)"
                )
            if len(row) != width:
                raise ParameterError(
                    f"{display}, row {rows_seen + len(chunk) + 1} (line {prev_line + 1}): has {len(row)} cell(s), "
                    f"the header has {width}"
                )
            chunk.append(row)
            lines.append(prev_line + 1)
            prev_line = reader.line_num
            if len(chunk) == _CHUNK_ROWS:
                flush(chunk, lines)
                chunk, lines = [], []
    except csv.Error as exc:
        raise _csv_error(display, exc, prev_line + 1) from None
    if chunk:
        flush(chunk, lines)
    if rows_seen == 0:
        raise ParameterError(f"{display}: the file has a header but no data rows")
    matrix = np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
    return names, _Table(size=rows_seen, digest=digest, matrix=matrix, stat=stat)


def _choose_columns(
    display: str, available: Sequence[str], columns: tuple[str, ...] | None, *, inferring: bool
) -> tuple[str, ...]:
    names = tuple(available) if columns is None else columns
    if not names:
        raise ParameterError(f"{display}: no columns to read")
    for c in names:
        count = list(available).count(c)
        if count == 0:
            shown = list(available) if len(available) <= 20 else [*available[:20], "..."]
            raise ParameterError(f"{display}: column {c!r} is missing; the file has columns {shown}")
        if count > 1:
            raise ParameterError(f"{display}: column {c!r} appears {count} times in the header; its cells are ambiguous")
    _require_unique_columns(names, display)
    if inferring:
        for c in names:
            if not c.isidentifier():
                raise ParameterError(
                    f"{display}: column {c!r} cannot be a field name (not an identifier); declare a schema "
                    f"whose field lists it in \"columns\", or choose other columns"
                )
    return names


# --------------------------------------------------------------------------------------------
# Parquet


def _pyarrow(display: str) -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ParameterError(
            f"{display}: reading Parquet needs pyarrow; install the parquet extra: pip install 'ldp-sim[parquet]'"
        ) from None
    return pa, pq


def _check_arrow(col: Any, b: _Bounds, pa: Any) -> tuple[np.ndarray, _Bad | None]:
    """One Arrow column (Array or ChunkedArray) → (int64 values, first bad cell)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    limit = len(col)
    null_bad: _Bad | None = None
    if col.null_count:
        limit = int(np.argmax(col.is_null().to_numpy(zero_copy_only=False)))
        null_bad = (limit, "the cell is empty (null); every cell must hold an integer")
    head = col.slice(0, limit)
    t = col.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        values, bad = _check_numeric(head.to_numpy(zero_copy_only=False), b)
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or str(t) == "string_view":
        values, bad = _check_strings(head.to_pylist(), b)
    elif limit:
        return np.zeros(0, np.int64), (0, f"value {_show(col[0].as_py())} is not an integer (the column holds {t})")
    else:
        values, bad = np.zeros(0, np.int64), None
    if bad is None and null_bad is not None:
        bad = null_bad
    return values, bad


def _parquet_file(p: Path, display: str) -> Any:
    pa, pq = _pyarrow(display)
    try:
        return pq.ParquetFile(p)
    except (pa.ArrowException, OSError) as exc:
        raise ParameterError(f"{display}: not a readable Parquet file: {_one_line(exc)}") from None


def _check_arrow_block(
    display: str, table: Any, names: Sequence[str], bounds: list[_Bounds], first_row: int, pa: Any
) -> np.ndarray:
    """Check one table / record batch (rows first_row+1.. of the file) → int16 block."""
    block = np.empty((table.num_rows, len(names)), dtype=RECORD_DTYPE)
    bads = []
    for k, (c, b) in enumerate(zip(names, bounds)):
        values, bad = _check_arrow(table.column(c), b, pa)
        bads.append((bad, k))
        if bad is None:
            block[:, k] = values
    first = _first_bad(bads)
    if first is not None:
        i, k, problem = first
        raise ParameterError(f"{display}, row {first_row + i + 1}, column {names[k]!r}: {problem}")
    return block


def _read_parquet(
    p: Path, display: str, columns: tuple[str, ...] | None, bounds: list[_Bounds] | None
) -> tuple[tuple[str, ...], _Table]:
    pa, _ = _pyarrow(display)
    try:
        stat = _stat(p)
        digest = _hash_file(p)
    except OSError as exc:
        raise ParameterError(f"data file {display!r} cannot be read: {_one_line(exc)}") from None
    with _parquet_file(p, display) as pf:
        return _scan_parquet(pf, display, columns, bounds, stat, digest, pa)


def _scan_parquet(
    pf: Any, display: str, columns: tuple[str, ...] | None, bounds: list[_Bounds] | None,
    stat: tuple[int, int], digest: bytes, pa: Any,
) -> tuple[tuple[str, ...], _Table]:
    available = pf.schema_arrow.names
    names = _choose_columns(display, available, columns, inferring=bounds is None)
    keep = bounds is None  # inference needs the values; a declared schema only needs them checked
    if bounds is None:
        bounds = [_Bounds() for _ in names]
    meta = pf.metadata
    starts = [0]
    for g in range(meta.num_row_groups):
        starts.append(starts[-1] + meta.row_group(g).num_rows)
    size = starts[-1]
    if size == 0:
        raise ParameterError(f"{display}: the file has no data rows")
    parts: list[np.ndarray] = []
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=_CHUNK_ROWS, columns=list(names), use_threads=False):
            block = _check_arrow_block(display, batch, names, bounds, row, pa)
            if keep:
                parts.append(block)
            row += batch.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise ParameterError(f"{display}: not a readable Parquet file: {_one_line(exc)}") from None
    if row != size:
        raise ParameterError(f"{display}: the file's metadata says {size} rows but {row} were read")
    matrix = np.concatenate(parts, axis=0) if keep else None
    return names, _Table(size=size, digest=digest, matrix=matrix, stat=stat, row_groups=tuple(starts))


def _hash_file(p: Path) -> bytes:
    h = hashlib.sha256()
    with p.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.digest()


# --------------------------------------------------------------------------------------------
# Population


def _is_parquet(p: Path) -> bool:
    if p.suffix.lower() in _PARQUET_SUFFIXES:
        return True
    if p.suffix.lower() == ".csv":
        return False
    try:
        with p.open("rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False


def _infer(names: Sequence[str], matrix: np.ndarray) -> Schema:
    fields = []
    for k, name in enumerate(names):
        col = matrix[:, k].astype(np.int64)
        low, high = int(col.min()), int(col.max())
        step = int(np.gcd.reduce(col - low)) if high > low else 1
        if high == low:  # a field needs low < high
            high, low = (low + 1, low) if low < INT16_HIGH else (high, high - 1)
        fields.append(Field(name, 1, low, high, step))
    return Schema(tuple(fields))


def _identity(digest: bytes, schema: Schema, columns: Sequence[str]) -> str:
    described = json.dumps({"schema": schema.to_json(), "columns": list(columns)}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(_IDENTITY_TAG + digest + b"\n" + described.encode()).hexdigest()


@dataclass(frozen=True)
class DataPopulation:
    """Users' records from a local CSV or Parquet file (one user per row, ids 0..n−1 in file order).

    ``identity`` is the SHA-256 (hex) of the file's bytes, the schema and the file columns read:
    the same data under the same schema gives the same identity (the ledger key), wherever the
    file lies. Build one with ``load_data``, which checks every value.

    ``schema_declared`` is False when ``load_data`` inferred the schema from the values: such a
    population may be used in this process, but its schema is a summary of the data (min, max,
    gcd), so it is never described to an aggregator (``require_declared_schema``; invariant I3
    of docs/design.md §2a). A population built by hand declares the schema it is given.
    """

    path: Path
    schema: Schema
    size: int
    identity: str
    columns: tuple[str, ...]  # the file column behind each schema column
    format: str  # "csv" or "parquet"
    schema_declared: bool = True
    _matrix: np.ndarray | None = field(default=None, repr=False, compare=False)
    _stat: tuple[int, int] | None = field(default=None, repr=False, compare=False)
    _row_groups: tuple[int, ...] = field(default=(), repr=False, compare=False)

    def require_declared_schema(self) -> None:
        """Raise ``ParameterError`` (``undeclared_schema_message``) unless the schema was declared.

        Called wherever a description of this data is built for an aggregator
        (``public_description``, ``ldp.local.shard.Shard.description``): an inferred schema is
        computed from the values and would leave before any charge (invariant I3).
        """
        if not self.schema_declared:
            raise ParameterError(undeclared_schema_message(self.path))

    def public_description(self) -> dict[str, Any]:
        """All the aggregator may learn: the declared schema and the number of users.

        Raises ``ParameterError`` for an inferred schema (``require_declared_schema``)."""
        self.require_declared_schema()
        return {"schema": self.schema.to_json(), "size": int(self.size)}

    def records(self, first_user: int, count: int) -> np.ndarray:
        """Records of users first_user .. first_user+count−1: int16, shape (count, schema.width)."""
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (first_user, count)):
            raise ParameterError(f"records(first_user, count) needs integers, got {first_user!r}, {count!r}")
        first_user, count = int(first_user), int(count)
        if first_user < 0 or count < 0 or first_user + count > self.size:
            raise ParameterError(
                f"users {first_user}..{first_user + count - 1} are outside the population 0..{self.size - 1}"
            )
        if self._matrix is None and not self._row_groups:
            self._reload()
        if self._matrix is not None:
            return self._matrix[first_user : first_user + count].copy()
        return self._read_rows(first_user, count)

    # -- internals --------------------------------------------------------------------------

    def _changed(self) -> ParameterError:
        return ParameterError(f"{self.path}: the file changed since it was loaded; load it again")

    def _reload(self) -> None:
        """A DataPopulation built by hand (or unpickled): load its file and check the identity."""
        again = load_data(self.path, self.schema, columns=self.columns)
        if again.identity != self.identity:
            raise self._changed()
        for name in ("_matrix", "_stat", "_row_groups"):
            object.__setattr__(self, name, getattr(again, name))

    def _read_rows(self, first: int, count: int) -> np.ndarray:
        if count == 0:
            return np.zeros((0, self.schema.width), dtype=RECORD_DTYPE)
        display = str(self.path)
        pa, _ = _pyarrow(display)
        try:
            if _stat(self.path) != self._stat:
                raise self._changed()
        except OSError as exc:
            raise ParameterError(f"data file {display!r} cannot be read: {_one_line(exc)}") from None
        starts = self._row_groups
        end = first + count
        groups = [g for g in range(len(starts) - 1) if starts[g] < end and starts[g + 1] > first]
        try:
            with _parquet_file(self.path, display) as pf:
                table = pf.read_row_groups(groups, columns=list(self.columns), use_threads=False)
        except (pa.ArrowException, OSError) as exc:
            raise ParameterError(f"{display}: not a readable Parquet file: {_one_line(exc)}") from None
        offset = first - starts[groups[0]]
        table = table.slice(offset, count)
        return _check_arrow_block(display, table, self.columns, _bounds_for(self.schema), first, pa)


def _resolve_schema(schema: SchemaLike) -> tuple[Schema | None, tuple[str, ...] | None]:
    if schema is None or isinstance(schema, Schema):
        return schema, None
    if isinstance(schema, (str, os.PathLike)):
        return read_schema_file(schema)
    return parse_schema_json(schema)


def _load(path: PathLike, schema: SchemaLike, columns: Sequence[str] | None) -> tuple[Path, str, Schema, tuple[str, ...], _Table, str]:
    if isinstance(path, (bytes, bytearray)) or not isinstance(path, (str, os.PathLike)):
        raise ParameterError(f"a data file path must be a string or a path, got {path!r}")
    p = Path(path).expanduser()
    display = str(p)
    if not p.exists():
        raise ParameterError(f"data file {display!r} does not exist")
    if not p.is_file():
        raise ParameterError(f"data file {display!r} is not a file")
    declared, schema_columns = _resolve_schema(schema)
    if columns is not None:
        if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
            raise ParameterError(f"columns must be a list of column names, got {columns!r}")
        columns = tuple(columns)
    else:
        columns = schema_columns
    if declared is not None:
        if columns is None:
            columns = default_columns(declared)
        if len(columns) != declared.width:
            raise ParameterError(
                f"the schema has {declared.width} column(s) {list(default_columns(declared))}, "
                f"got {len(columns)} column name(s) {list(columns)}"
            )
        bounds: list[_Bounds] | None = _bounds_for(declared)
    else:
        bounds = None
    fmt = "parquet" if _is_parquet(p) else "csv"
    reader = _read_parquet if fmt == "parquet" else _read_csv
    names, table = reader(p, display, columns, bounds)
    if declared is not None:
        final = declared
    else:
        assert table.matrix is not None  # a reader without a declared schema keeps the raw matrix
        final = _infer(names, table.matrix)
    return p, display, final, names, table, fmt


def load_data(path: PathLike, schema: SchemaLike = None, *, columns: Sequence[str] | None = None) -> DataPopulation:
    """Load and check users' records from a CSV or Parquet file.

    One user per data row, user ids 0..n−1 in file order; the records stay on the client and
    only ``DataPopulation.public_description()`` (the schema and the number of users) is shown
    to the aggregator. The file formats, the schema-file format and the inference rules are in
    the module docstring (``ldp.core.datafile``): CSV is UTF-8 with a header row; Parquet
    (``*.parquet``, ``*.pq`` or a file starting with ``PAR1``) needs pyarrow, the ``parquet``
    extra. Every value is checked; the first bad one is a ``ParameterError`` naming the file,
    row, column, value and what is allowed. The result's ``identity`` (the ledger key) is the
    SHA-256 of the file's bytes, the schema and the columns read.

    Parameters
    ----------
    path : str or os.PathLike
        The data file.
    schema : Schema, str, os.PathLike, mapping, sequence of mappings or None, default None
        A ``Schema``, a path to a JSON schema file, or its parsed JSON; None infers one
        (``infer_schema``: each column a field of length 1 with low = min, high = max,
        step = the gcd of the differences) for use in this process only: the result's
        ``schema_declared`` is False and no aggregator is ever told it
        (``DataPopulation.require_declared_schema``).
    columns : sequence of str, optional
        The file columns to read, one per schema column in order (default: the schema's
        ``columns`` or ``default_columns``); without a schema, the columns to infer fields from
        (default: all).

    Returns
    -------
    DataPopulation
        The checked records, with ``schema``, ``size``, ``identity``, ``schema_declared`` and
        ``records(first, count)``.

    Raises
    ------
    ParameterError
        A missing or unreadable file, a malformed schema, a missing column, or a bad value:
        ``<file>, row <N> (line <L>), column '<name>': <problem>``.

    Examples
    --------
    >>> import ldp, pathlib, tempfile
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = pathlib.Path(folder.name) / "users.csv"
    >>> _ = path.write_text("x,y\\n0,1\\n1,-1\\n1,1\\n")
    >>> data = ldp.load_data(path)  # schema inferred: y takes -1, 1 (step 2)
    >>> data.size, [(f.name, f.low, f.high, f.step) for f in data.schema]
    (3, [('x', 0, 1, 1), ('y', -1, 1, 2)])
    >>> data.records(0, 3).tolist()
    [[0, 1], [1, -1], [1, 1]]
    >>> _ = path.write_text("x,y\\n0,1\\n1,0\\n")
    >>> ldp.load_data(path, {"fields": [{"name": "x"}, {"name": "y", "low": -1, "high": 1, "step": 2}]})
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: .../users.csv, row 2 (line 3), column 'y': value 0 is not allowed by field 'y' (low=-1, high=1, step=2: one of -1, 1)
    >>> folder.cleanup()
    """
    p, _, final, names, table, fmt = _load(path, schema, columns)
    identity = _identity(table.digest, final, names)
    matrix = table.matrix if fmt == "csv" else None  # Parquet: records() reads row groups on demand
    if matrix is not None:
        matrix.setflags(write=False)
    return DataPopulation(
        path=p.resolve(),
        schema=final,
        size=table.size,
        identity=identity,
        columns=names,
        format=fmt,
        schema_declared=schema is not None,
        _matrix=matrix,
        _stat=table.stat,
        _row_groups=table.row_groups,
    )


def infer_schema(path: PathLike, columns: Sequence[str] | None = None) -> Schema:
    """A schema for the integer columns ``columns`` (default: all) of a CSV or Parquet file.

    Each column becomes a field of length 1 named like it: low = min, high = max, step = gcd of
    the differences. It summarizes the values, so it is for this process only; a schema to
    declare (and serve) is written by ``draft_schema`` and widened by the user.
    """
    return _load(path, None, columns)[2]


def undeclared_schema_message(path: PathLike) -> str:
    """The one-line refusal to serve a data file without a declared schema (invariant I3)."""
    shown = shlex.quote(str(path))
    return (
        f"the data file {str(path)!r} has no declared schema: a schema inferred from it would tell the aggregator "
        f"the min, max and step of every column before any ε is spent. Write a draft with "
        f"`ldp-sim schema infer {shown} > schema.json`, widen each range to the column's public range, "
        "and declare it with --schema schema.json (ClientConfig(schema_path=...) from Python)"
    )


@dataclass(frozen=True)
class ColumnRange:
    """What a column of the file holds: its min, max and the gcd of the differences (0: constant).

    Computed from the values: shown to the user who reviews a draft, never sent anywhere."""

    column: str
    low: int
    high: int
    step: int


@dataclass(frozen=True)
class SchemaDraft:
    """A schema for the user to review, widen and then declare (``draft_schema``).

    ``schema`` is the draft (one field per column, ranges widened by ``draft_range``, step 1);
    ``observed`` what each column holds (for the review, on the user's machine only).
    """

    path: Path
    rows: int
    schema: Schema
    columns: tuple[str, ...]
    observed: tuple[ColumnRange, ...]

    def to_json(self) -> dict[str, Any]:
        """The schema-file format (``schema_to_json``)."""
        return schema_to_json(self.schema, self.columns)

    def text(self) -> str:
        """The schema file, one field per line (easy to review and edit), ending in a newline."""
        fields = self.to_json()["fields"]
        return f'{{"format": {SCHEMA_FORMAT}, "fields": [\n' + ",\n".join("  " + json.dumps(f) for f in fields) + "\n]}\n"


def draft_range(low: int, high: int) -> tuple[int, int]:
    """The range a draft declares for values low..high: 0..2^k−1, or −(2^k−1)..2^k−1 when low < 0,
    for the smallest k ≥ 1 that holds them (clipped to int16).

    Why: the draft is a starting point the user may publish unchanged; unlike min..max it does
    not reveal the extremes (a one-row file's record), only their magnitude (k).

    >>> draft_range(37, 37), draft_range(1, 1), draft_range(-1, 1), draft_range(2007, 2009)
    ((0, 63), (0, 1), (-1, 1), (0, 2047))
    """
    k = max(1, (high if low >= 0 else max(-low, high)).bit_length())
    return (0 if low >= 0 else max(-(2**k - 1), INT16_LOW)), min(2**k - 1, INT16_HIGH)


def draft_schema(path: PathLike, columns: Sequence[str] | None = None) -> SchemaDraft:
    """A draft schema for the integer columns ``columns`` (default: all) of a CSV or Parquet file.

    What ``ldp-sim schema infer FILE`` writes, on the user's machine: each column a field of
    length 1 named like it, its range widened (``draft_range``) and step 1, so that the draft
    does not carry the data's min, max or gcd. The user reviews it against ``observed``, widens
    each range to the column's public range, and declares it (``--schema``). Every value is
    checked as ``load_data`` checks it (a bad cell is a ``ParameterError`` naming it).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = pathlib.Path(folder.name) / "one.csv"
    >>> _ = path.write_text("age,flag,income\\n37,1,52\\n")
    >>> draft = draft_schema(path)
    >>> [(f.name, f.low, f.high, f.step) for f in draft.schema]
    [('age', 0, 63, 1), ('flag', 0, 1, 1), ('income', 0, 63, 1)]
    >>> draft.observed[0]
    ColumnRange(column='age', low=37, high=37, step=0)
    >>> folder.cleanup()
    """
    p, _, _, names, table, _ = _load(path, None, columns)
    assert table.matrix is not None  # inference keeps the values (CSV and Parquet alike)
    fields: list[Field] = []
    observed: list[ColumnRange] = []
    for k, name in enumerate(names):
        col = table.matrix[:, k].astype(np.int64)
        low, high = int(col.min()), int(col.max())
        observed.append(ColumnRange(name, low, high, int(np.gcd.reduce(col - low))))
        fields.append(Field(name, 1, *draft_range(low, high)))
    return SchemaDraft(p, table.size, Schema(tuple(fields)), tuple(names), tuple(observed))
