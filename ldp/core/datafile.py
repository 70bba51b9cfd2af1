"""Real data: users' records from a local CSV or Parquet file, the file as the user has it.

A client process may host real users instead of simulated ones: one user per data row, user ids
0..n−1 in file order. The records stay on the client; only ``DataPopulation.public_description()``
(the schema and the number of users) is shown to the aggregator.

Files
-----
* **CSV** (any name but ``*.parquet`` / ``*.pq``): UTF-8 text (a BOM is allowed), comma separated,
  standard quoting, a header row naming the columns. Blank lines are not rows: they are allowed
  only before the header and at the end of the file (so in a one-column file an empty cell is
  written ``""``, as Python's csv module and pandas write it). Columns the records do not use are
  ignored (but every row must have as many cells as the header).
* **Parquet** (``*.parquet``, ``*.pq``, or any file that starts with ``PAR1``): needs pyarrow, the
  ``parquet`` extra (``pip install 'ldp-sim[parquet]'``). Columns may be integer, boolean (0/1),
  floating point, decimal (read as float64), strings (read as a CSV cell is) or
  dictionary-encoded. ``records()`` reads only
  the row groups and columns it needs.

CSV and Parquet are read alike: a header name is stripped of surrounding spaces and put in
Unicode NFC form (in the file and in the schema's ``columns``), a text cell is read after
stripping its surrounding spaces, and an empty cell, a null and a float NaN are all a *missing*
value. So one schema reads a CSV file and its Parquet twin into the same records.

What a cell may hold, and what records hold, is the schema's declaration (the schema file of
``ldp.core.datafile_schema``): integers of any width (declared range and step), string
categories with their labels listed, floats with declared bounds and grid, a policy for values
out of range (refuse or clip) and for missing values (refuse, a category of their own, or drop
the user from the field's statistics). A schema of plain integer fields reads files exactly as
before these keys, with the same identity.

Rows are counted the way a person reads the file: **row N is the N-th data row, from 1** (the
header is not a row), i.e. user N−1. CSV errors also give the file's physical ``line``.

Inference, and why a served schema must be declared
---------------------------------------------------
Without a schema, ``load_data`` infers one for use in this process: every chosen column (default:
all, in file order) becomes a field of length 1 named like the column. A column of integers gets
low = min, high = max and step = the gcd of the differences (a ±1 label becomes low −1, high 1,
step 2; a constant column c becomes c..c+1, or c−1..c when c = 32767); values must fit int16.
A column none of whose cells is a number becomes a category field of its distinct labels, sorted.
Missing values are refused.

Such a schema is computed from the data's values: a one-row file ``37,1,52`` gives ranges
37..38, 1..2, 52..53, the whole record. The schema is public (the aggregator reads it in
``Ready`` before any ε is spent), so an inferred one must never be served (docs/design.md §2a,
invariant I3). A ``DataPopulation`` remembers whether its schema was declared
(``schema_declared``); ``public_description`` and ``require_declared_schema`` refuse an
inferred one with ``undeclared_schema_message``, and so do ``ClientConfig`` (a data file without
``schema_path``) and ``Shard.description``, the only way a description reaches the wire.

To write one: ``ldp-sim schema infer FILE > schema.json`` (``draft_schema``) runs on the user's
machine and writes a *draft* that does not copy the data's extremes: an integer column's range
is widened to 0..2^k−1 (or −(2^k−1)..2^k−1 when it holds negative values) for the smallest k ≥ 1
that covers the values, with step 1; a column of other numbers (or integers too wide for that)
becomes a float field on 0..2^k (or −2^k..2^k) with a decimal resolution of about a thousandth
of the range; a column of text becomes a category field that **lists the labels found in the
file** (they are data values: the user keeps only labels that are public knowledge and adds any
that may occur); a column with missing values declares ``"missing": "category"``. The draft still
tells how large the values are, and which labels and missing values occur; the user reviews it
before declaring it with ``--schema schema.json``.

Errors
------
A user's mistake is a one-line ``ParameterError``:
``<file>, row <N> (line <L>), column '<name>': <problem>`` (no ``line`` for Parquet), where the
problem is e.g. ``value '1.5' is not an integer``, ``the cell is empty; ...``, ``value 40000 is
beyond the int16 range -32768..32767``, ``value 0 is not allowed by field 'y' (low=-1, high=1,
step=2: one of -1, 1)`` or ``value 'Adelei' is not one of the 3 categories of field 'species':
'Adelie', 'Chinstrap', 'Gentoo'``. The first offender in file order is reported (earliest row,
then leftmost column). For a **served** file (``load_data(..., served=True)``, what a client
process hosting the file uses) no message names a cell's value: its text could reach the
aggregator's side (e.g. the log of a client placed by Ray), so it says ``the cell is not an
integer`` or ``the value is not ...`` with the file, row, column and what is allowed.
With ``load_data(..., lazy=True)`` (a client process hosting a shard of the users) a row's cells
are parsed and checked when ``records`` reads it, so each client checks its own rows, with the
same message the whole file's load gives for that row (issue 25).
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import math
import operator
import os
import shlex
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Union

import numpy as np

from ldp.core.datafile_schema import (
    INT16_HIGH,
    INT16_LOW,
    MAX_CODES,
    SCHEMA_FORMAT,
    ColumnSpec,
    DeclaredSchema,
    declared_from_schema,
    default_columns,
    inference_spec,
    one_line,
    parse_declaration,
    parse_schema_json,
    read_declaration,
    read_schema_file,
    require_unique_columns,
    schema_from_json,
    schema_to_json,
    show_value,
)
from ldp.core.errors import ParameterError
from ldp.core.schema import RECORD_DTYPE, Field, Schema

__all__ = [
    "DataPopulation",
    "load_data",
    "infer_schema",
    "schema_from_json",
    "parse_schema_json",
    "parse_declaration",
    "read_schema_file",
    "read_declaration",
    "schema_to_json",
    "default_columns",
    "ColumnSpec",
    "DeclaredSchema",
    "SchemaDraft",
    "ColumnRange",
    "draft_schema",
    "draft_range",
    "draft_grid",
    "field_name",
    "header_name",
    "is_parquet",
    "undeclared_schema_message",
    "SCHEMA_FORMAT",
]

_CHUNK_ROWS = 1 << 16
_PARQUET_SUFFIXES = (".parquet", ".pq")
_IDENTITY_TAG = b"ldp.datafile/v1\n"

PathLike = Union[str, "os.PathLike[str]"]
SchemaLike = Union[DeclaredSchema, Schema, str, "os.PathLike[str]", Mapping[str, Any], Sequence[Mapping[str, Any]], None]


class _Consumer(Protocol):
    """What a scan feeds: ``start(index)`` once the header is read (the chosen columns'
    positions in the file), then ``(first_row, lines or None, cells per chosen column)`` per chunk."""

    def start(self, index: Sequence[int]) -> None: ...

    def __call__(self, first: int, lines: Any, cols: list[Any]) -> None: ...  # lines: [i] → line, or None


def header_name(name: str) -> str:
    """A column's name as the readers compare it: stripped of surrounding spaces, Unicode NFC
    (so that a header typed with spaces, or a name in another normal form, reads alike in CSV,
    Parquet and the schema's ``columns``)."""
    return unicodedata.normalize("NFC", name.strip())


# --------------------------------------------------------------------------------------------
# Scanning a file: the chosen columns, chunk by chunk (CSV and Parquet)


@dataclass
class _Meta:
    """What a scan found besides the cells: size, file digest, stat, Parquet row groups."""

    size: int
    digest: bytes
    stat: tuple[int, int]
    row_groups: tuple[int, ...] = ()  # Parquet: first row of each row group, then the total


def _stat(p: Path) -> tuple[int, int]:
    st = p.stat()
    return (st.st_size, st.st_mtime_ns)


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
    require_unique_columns(names, display)
    if inferring:
        for c in names:
            if not c.isidentifier():
                raise ParameterError(
                    f"{display}: column {c!r} cannot be a field name (not an identifier); declare a schema "
                    f"whose field lists it in \"columns\", or choose other columns"
                )
    return names


def _csv_error(display: str, exc: Exception, line: int) -> ParameterError:
    return ParameterError(f"{display}, line {line}: malformed CSV: {one_line(exc)}")


def _csv_reader(text: str) -> Any:
    return csv.reader(io.StringIO(text, newline=""), strict=True, skipinitialspace=True)


def _csv_header(reader: Any, display: str) -> list[str]:
    prev_line = 0
    try:
        for row in reader:
            if row:
                return [header_name(h) for h in row]
            prev_line = reader.line_num
    except csv.Error as exc:
        raise _csv_error(display, exc, prev_line + 1) from None
    raise ParameterError(f"{display}: the file is empty; a CSV data file needs a header row naming its columns")


def _csv_rows_carefully(text: str, display: str, width: int, stop_row: int | None = None) -> int:
    """Walk the data rows one by one, tracking lines: raise the first structural error (a
    blank line between rows, a row of another width, malformed CSV) with its line; with
    ``stop_row``, return the line of that data row (0-based) instead."""
    reader = _csv_reader(text)
    _csv_header(reader, display)
    prev_line = reader.line_num
    rows = 0
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
            if rows == stop_row:
                return prev_line + 1
            if len(row) != width:
                raise ParameterError(f"{display}, row {rows + 1} (line {prev_line + 1}): has {len(row)} cell(s), the header has {width}")
            rows += 1
            prev_line = reader.line_num
    except csv.Error as exc:
        raise _csv_error(display, exc, prev_line + 1) from None
    return -1


class _CsvLines:
    """The physical line of each data row of a chunk, found only when an error names one (a
    careful walk of the file: quoted cells may span lines, blank lines may precede the header)."""

    def __init__(self, text: str, display: str, width: int, first: int) -> None:
        self.text, self.display, self.width, self.first = text, display, width, first

    def __getitem__(self, i: int) -> int:
        return _csv_rows_carefully(self.text, self.display, self.width, stop_row=self.first + i)


def _read_text(p: Path, display: str) -> tuple[tuple[int, int], bytes, bytes, str]:
    """A CSV file read whole: its stat (to notice a change later), the SHA-256 of its bytes (the
    data's identity), the bytes and their text (UTF-8, a BOM allowed); one-line errors naming
    the file."""
    try:
        stat = _stat(p)
        data = p.read_bytes()
    except OSError as exc:
        raise ParameterError(f"data file {display!r} cannot be read: {one_line(exc)}") from None
    digest = hashlib.sha256(data).digest()
    try:
        return stat, digest, data, data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParameterError(f"{display}: not UTF-8 text (byte {exc.start} cannot be decoded)") from None


def _scan_csv(
    p: Path, display: str, columns: tuple[str, ...] | None, inferring: bool, on_chunk: _Consumer
) -> tuple[tuple[str, ...], list[int], _Meta]:
    """Parse a CSV file; ``on_chunk(first_row, lines, cells per chosen column)`` per chunk of
    ``_CHUNK_ROWS`` rows. Returns the chosen names, their positions in the header, and the
    file's meta.

    Rows are read in C (``csv.reader`` through ``itertools.islice``); a chunk with anything
    unusual (a blank row, a row of another width, malformed CSV) is walked again row by row
    from the file's start for the exact error and line (``_csv_rows_carefully``)."""
    stat, digest, data, text = _read_text(p, display)
    del data  # the text is what is parsed: the bytes need not stay in memory
    reader = _csv_reader(text)
    header = _csv_header(reader, display)
    names = _choose_columns(display, header, columns, inferring=inferring)
    index = [header.index(c) for c in names]
    on_chunk.start(index)
    width = len(header)
    pick = [operator.itemgetter(j) for j in index]
    rows_seen = 0
    trailing_blank = False
    while True:
        try:
            chunk = list(itertools.islice(reader, _CHUNK_ROWS))
        except csv.Error:
            _csv_rows_carefully(text, display, width)
            raise AssertionError("unreachable: the careful walk raises the reader's error") from None  # pragma: no cover
        if not chunk:
            break
        if trailing_blank:  # rows after a blank line
            _csv_rows_carefully(text, display, width)  # raises: a blank line between data rows
        while chunk and not chunk[-1]:  # blank lines at the end of the file are no rows
            chunk.pop()
            trailing_blank = True
        if chunk and set(map(len, chunk)) != {width}:
            _csv_rows_carefully(text, display, width)  # raises: a blank line between rows, a short row
        if chunk:
            on_chunk(rows_seen, _CsvLines(text, display, width, rows_seen), [list(map(g, chunk)) for g in pick])
            rows_seen += len(chunk)
    if rows_seen == 0:
        raise ParameterError(f"{display}: the file has a header but no data rows")
    return names, index, _Meta(size=rows_seen, digest=digest, stat=stat)


@dataclass(frozen=True)
class _CsvLayout:
    """Where each data row of a CSV file lies, found without parsing its cells (``_csv_layout``)."""

    header_lines: int  # physical lines up to and including the header row
    width: int  # cells per row (the header's)
    index: tuple[int, ...]  # the chosen columns' positions in the header
    starts: np.ndarray  # byte offset of each data row, then the end of the last one (n + 1 values)


def _csv_layout(p: Path, display: str, columns: tuple[str, ...]) -> tuple[_Meta, _CsvLayout] | None:
    """Check a CSV file's bytes, header and columns and count its rows without parsing them.

    Only for a file whose data rows are one physical line each: no ``"`` after the header and
    every carriage return part of a CRLF (else None: the caller parses the whole file). Then a
    row is a line, so numpy finds the rows' byte offsets at memory speed. The whole file is
    still read, hashed (the identity, as ``_scan_csv`` hashes it) and decoded (a non-UTF-8 byte
    anywhere is an error), and a blank line between data rows is still an error
    (``_csv_rows_carefully`` names its line); the cells are parsed and checked by
    ``_read_csv_rows``, only for the rows asked for.
    """
    stat, digest, data, text = _read_text(p, display)
    reader = _csv_reader(text)
    header = _csv_header(reader, display)
    names = _choose_columns(display, header, columns, inferring=False)
    header_lines = reader.line_num
    if data.count(b"\r") != data.count(b"\r\n"):  # a lone CR ends a row for csv, not a line here
        return None
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(raw == 0x0A)  # each line's LF
    body = int(ends[header_lines - 1]) + 1 if header_lines <= len(ends) else len(data)
    if data.find(b'"', body) >= 0:  # a quoted cell may span lines: parse it all (the caller)
        return None
    ends = ends[header_lines:]
    if len(ends) == 0 or int(ends[-1]) != len(data) - 1:
        ends = np.append(ends, len(data))  # the last line has no LF
    starts = np.concatenate(([body], ends[:-1] + 1))
    cr = np.zeros(len(ends), dtype=bool)
    filled = ends > starts
    cr[filled] = raw[ends[filled] - 1] == 0x0D
    blank = ends - starts - cr == 0
    rows = np.flatnonzero(~blank)
    if len(rows) == 0:
        raise ParameterError(f"{display}: the file has a header but no data rows")
    n = int(rows[-1]) + 1  # blank lines at the end of the file are no rows
    if blank[:n].any():
        _csv_rows_carefully(text, display, len(header))  # raises: a blank line between data rows
        raise AssertionError("unreachable: the careful walk names the blank line")  # pragma: no cover
    last_end = int(ends[n - 1]) + (1 if int(ends[n - 1]) < len(data) else 0)
    offsets = np.append(starts[:n], last_end).astype(np.int64)
    offsets.setflags(write=False)
    index = tuple(header.index(c) for c in names)
    return _Meta(size=n, digest=digest, stat=stat), _CsvLayout(header_lines, len(header), index, offsets)


def _read_csv_rows(p: Path, display: str, layout: _CsvLayout, first: int, count: int, on_chunk: _Consumer) -> None:
    """Parse and check data rows first .. first+count−1 only, found by ``_csv_layout``:
    ``on_chunk(first_row, lines, cells per chosen column)`` per chunk of ``_CHUNK_ROWS`` rows,
    as ``_scan_csv`` calls it (one physical line per row, so a row's line is known)."""
    lo, hi = int(layout.starts[first]), int(layout.starts[first + count])
    try:
        with p.open("rb") as fh:
            fh.seek(lo)
            text = fh.read(hi - lo).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterError(f"data file {display!r} cannot be read: {one_line(exc)}") from None
    reader = _csv_reader(text)
    on_chunk.start(layout.index)
    pick = [operator.itemgetter(j) for j in layout.index]
    row = first
    line = layout.header_lines + first + 1
    while row < first + count:
        try:
            chunk = list(itertools.islice(reader, min(_CHUNK_ROWS, first + count - row)))
        except csv.Error as exc:
            raise _csv_error(display, exc, layout.header_lines + first + reader.line_num) from None
        if len(chunk) == 0:  # the bytes at the offsets are no longer these rows
            raise ParameterError(f"{display}: the file changed since it was loaded; load it again")
        if set(map(len, chunk)) != {layout.width}:
            i = next(i for i, r in enumerate(chunk) if len(r) != layout.width)
            raise ParameterError(f"{display}, row {row + i + 1} (line {line + i}): has {len(chunk[i])} cell(s), the header has {layout.width}")
        on_chunk(row, range(line, line + len(chunk)), [list(map(g, chunk)) for g in pick])
        row += len(chunk)
        line += len(chunk)


def _pyarrow(display: str) -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ParameterError(
            f"{display}: reading Parquet needs pyarrow; install the parquet extra: pip install 'ldp-sim[parquet]'"
        ) from None
    return pa, pq


def _parquet_file(p: Path, display: str) -> Any:
    pa, pq = _pyarrow(display)
    try:
        return pq.ParquetFile(p)
    except (pa.ArrowException, OSError) as exc:
        raise ParameterError(f"{display}: not a readable Parquet file: {one_line(exc)}") from None


def _parquet_names(pf: Any) -> tuple[list[str], list[str]]:
    """The file's column names as compared (``header_name``) and as stored."""
    stored = list(pf.schema_arrow.names)
    return [header_name(n) for n in stored], stored


def _scan_parquet(
    p: Path, display: str, columns: tuple[str, ...] | None, inferring: bool, on_chunk: _Consumer, read: bool = True
) -> tuple[tuple[str, ...], list[int], _Meta]:
    """Read a Parquet file's chosen columns in batches (``on_chunk`` as ``_scan_csv``); with
    ``read`` False only its identity, columns and row groups (``DataPopulation._read_rows``
    reads a slice's row groups later)."""
    pa, _ = _pyarrow(display)
    try:
        stat = _stat(p)
        digest = _hash_file(p)
    except OSError as exc:
        raise ParameterError(f"data file {display!r} cannot be read: {one_line(exc)}") from None
    with _parquet_file(p, display) as pf:
        available, stored = _parquet_names(pf)
        names = _choose_columns(display, available, columns, inferring=inferring)
        index = [available.index(c) for c in names]
        on_chunk.start(index)
        meta = pf.metadata
        starts = [0]
        for g in range(meta.num_row_groups):
            starts.append(starts[-1] + meta.row_group(g).num_rows)
        size = starts[-1]
        if size == 0:
            raise ParameterError(f"{display}: the file has no data rows")
        row = 0 if read else size
        try:
            for batch in pf.iter_batches(batch_size=_CHUNK_ROWS, columns=[stored[j] for j in index], use_threads=False) if read else ():
                on_chunk(row, None, [batch.column(k) for k in range(len(names))])
                row += batch.num_rows
        except (pa.ArrowException, OSError) as exc:
            raise ParameterError(f"{display}: not a readable Parquet file: {one_line(exc)}") from None
    if row != size:
        raise ParameterError(f"{display}: the file's metadata says {size} rows but {row} were read")
    return names, index, _Meta(size=size, digest=digest, stat=stat, row_groups=tuple(starts))


def _hash_file(p: Path) -> bytes:
    h = hashlib.sha256()
    with p.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.digest()


def is_parquet(p: Path) -> bool:
    """Whether ``p`` is read as Parquet: by its suffix (.parquet, .pq; .csv is CSV), else by its
    magic bytes (``PAR1``)."""
    if p.suffix.lower() in _PARQUET_SUFFIXES:
        return True
    if p.suffix.lower() == ".csv":
        return False
    try:
        with p.open("rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False


# --------------------------------------------------------------------------------------------
# Cells → records (an Arrow column; text cells go straight to ColumnSpec.encode_text)


def _arrow_column(col: Any, pa: Any) -> Any:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if pa.types.is_decimal(col.type):  # a database's NUMERIC column: read as float64
        col = col.cast(pa.float64())
    return col


def _is_text(t: Any, pa: Any) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or str(t) == "string_view")


def _is_number(t: Any, pa: Any) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t))


def _arrow_texts(col: Any) -> np.ndarray:
    """A string column's cells as an object array (None for a null), through its dictionary:
    a category column of 10^6 rows has a handful of distinct labels to convert."""
    enc = col.dictionary_encode()
    labels = enc.dictionary.to_pylist()
    table = np.array([*labels, None], dtype=object)
    idx = enc.indices.fill_null(len(labels)).to_numpy(zero_copy_only=False)
    return table[idx]


def _encode_arrow(col: Any, spec: ColumnSpec, quote: bool, pa: Any) -> tuple[np.ndarray, int, tuple[int, str] | None]:
    col = _arrow_column(col, pa)
    t = col.type
    null = col.is_null().to_numpy(zero_copy_only=False) if col.null_count else None
    if _is_number(t, pa):
        filled = col.fill_null(False if pa.types.is_boolean(t) else 0) if null is not None else col
        codes, kept, bad = spec.encode_numbers(filled.to_numpy(zero_copy_only=False), null, quote)
    elif _is_text(t, pa):
        codes, kept, bad = spec.encode_text(_arrow_texts(col), None, quote)
    elif len(col):
        what = {"integer": "an integer", "float": "a number", "category": "a category"}[spec.type]
        first = int(np.argmin(null)) if null is not None else 0
        head = f"value {show_value(col[first].as_py())}" if quote else "the cell"
        return np.zeros(0, np.int64), 0, (first, f"{head} is not {what} (the column holds {t})")
    else:
        return np.zeros(0, np.int64), 0, None
    if bad is not None and null is not None and null[bad[0]] and bad[1].startswith("the cell is empty;"):
        bad = (bad[0], "the cell is empty (null);" + bad[1][len("the cell is empty;"):])
    return codes, kept, bad


def _encode(cells: Any, spec: ColumnSpec, quote: bool) -> tuple[np.ndarray, int, tuple[int, str] | None]:
    if isinstance(cells, list):
        return spec.encode_text(cells, None, quote)
    import pyarrow as pa  # an Arrow column: pyarrow was imported by the scan

    return _encode_arrow(cells, spec, quote, pa)


class _Encoder:
    """Check and encode chunks of the chosen columns; the first bad cell is the error."""

    def __init__(self, display: str, names: Sequence[str] | None, specs: Sequence[ColumnSpec], quote: bool, keep: bool) -> None:
        self.display, self.specs, self.quote, self.keep = display, list(specs), quote, keep
        self.names = list(names) if names is not None else []
        self.order = list(range(len(self.specs)))
        self.parts: list[np.ndarray] = []
        self.missing = [0] * len(self.specs)

    def start(self, index: Sequence[int]) -> None:
        """Ties between columns of one row go to the leftmost in the file."""
        self.order = list(index)

    def __call__(self, first: int, lines: Any, cols: list[Any]) -> None:
        n = len(cols[0]) if cols else 0
        block = np.empty((n, len(self.names)), dtype=RECORD_DTYPE)
        bads = []
        kept = []
        for k, (cells, spec) in enumerate(zip(cols, self.specs)):
            codes, count, bad = _encode(cells, spec, self.quote)
            if bad is not None:
                bads.append((bad[0], self.order[k], k, bad[1]))
            else:
                block[:, k] = codes
                kept.append(count)
        if bads:
            i, _, k, problem = min(bads)
            where = f"row {first + i + 1}" + (f" (line {lines[i]})" if lines is not None else "")
            raise ParameterError(f"{self.display}, {where}, column {self.names[k]!r}: {problem}")
        for k, count in enumerate(kept):
            self.missing[k] += count
        if self.keep:
            self.parts.append(block)

    def matrix(self) -> np.ndarray:
        return np.concatenate(self.parts, axis=0) if len(self.parts) != 1 else self.parts[0]


# --------------------------------------------------------------------------------------------
# Observing columns (inference and drafts): what kind of cells, their range, labels, gaps


@dataclass
class _Seen:
    """What one column's cells hold so far (merged chunk by chunk)."""

    missing: int = 0
    numbers: int = 0
    whole: bool = True  # every number an integer within int64
    low: Any = None
    high: Any = None
    base: int | None = None  # the first integer seen: the gcd is of the differences to it
    gcd: int = 0
    labels: set[str] = field(default_factory=set)
    texts: int = 0  # cells that are not numbers

    def add_numbers(self, v: np.ndarray) -> None:
        if v.dtype.kind == "f":
            nan = np.isnan(v)
            self.missing += int(nan.sum())
            v = v[~nan]
            if len(v) and not (np.isfinite(v).all() and (v == np.floor(v)).all() and np.abs(v).max() < 2.0**63):
                self.whole = False
            elif len(v):
                v = v.astype(np.int64)
        if not len(v):
            return
        self.numbers += len(v)
        lo, hi = v.min().item(), v.max().item()
        self.low = lo if self.low is None else min(self.low, lo)
        self.high = hi if self.high is None else max(self.high, hi)
        if self.whole and v.dtype.kind in "iu":
            if self.base is None:
                self.base = int(v[0])
            diffs = np.abs(v.astype(np.float64) - self.base)
            if diffs.max() < 2.0**62:
                self.gcd = math.gcd(self.gcd, int(np.gcd.reduce(v.astype(np.int64) - self.base)))

    def add_texts(self, cells: Sequence[str | None]) -> None:
        vals = [c.strip() for c in cells if c is not None and c.strip()]
        self.missing += len(cells) - len(vals)
        for parse, dtype in ((int, np.int64), (float, np.float64)):
            try:
                self.add_numbers(np.fromiter(map(parse, vals), dtype=dtype, count=len(vals)))
                return
            except (ValueError, OverflowError):
                continue
        numbers = []
        for c in vals:
            try:
                numbers.append(float(c))
            except ValueError:
                self.texts += 1
                if len(self.labels) <= MAX_CODES:
                    self.labels.add(c)
        if numbers:
            self.add_numbers(np.array(numbers, dtype=np.float64))

    @property
    def is_category(self) -> bool:
        return self.texts > 0 and self.numbers == 0


class _Observer:
    """A scan's consumer that observes the chosen columns (``_Seen`` each)."""

    def __init__(self) -> None:
        self.seen: list[_Seen] = []

    def start(self, index: Sequence[int]) -> None:
        self.seen = [_Seen() for _ in index]

    def __call__(self, first: int, lines: Sequence[int] | None, cols: list[Any]) -> None:
        for s, cells in zip(self.seen, cols):
            if isinstance(cells, list):
                s.add_texts(cells)
                continue
            import pyarrow as pa

            col = _arrow_column(cells, pa)
            s.missing += col.null_count
            if _is_number(col.type, pa):
                v = col.drop_null().to_numpy(zero_copy_only=False)
                s.add_numbers(v.astype(np.int8) if v.dtype == np.bool_ else v)
            elif _is_text(col.type, pa):
                s.add_texts([c for c in _arrow_texts(col).tolist() if c is not None])
            # another type: the encoding pass names it


def _resolve_schema(schema: SchemaLike, columns: Sequence[str] | None) -> DeclaredSchema | None:
    if schema is None:
        return None
    if isinstance(schema, DeclaredSchema):
        declared = schema
    elif isinstance(schema, Schema):
        declared = declared_from_schema(schema)
    elif isinstance(schema, (str, os.PathLike)):
        declared = read_declaration(schema)
    else:
        declared = parse_declaration(schema)
    if columns is not None:
        if len(columns) != declared.schema.width:
            raise ParameterError(
                f"the schema has {declared.schema.width} column(s) {list(default_columns(declared.schema))}, "
                f"got {len(columns)} column name(s) {list(columns)}"
            )
        declared = DeclaredSchema(declared.schema, tuple(columns), declared.specs)
    return declared


def _check_path(path: Any) -> tuple[Path, str]:
    if isinstance(path, (bytes, bytearray)) or not isinstance(path, (str, os.PathLike)):
        raise ParameterError(f"a data file path must be a string or a path, got {path!r}")
    p = Path(path).expanduser()
    display = str(p)
    if not p.exists():
        raise ParameterError(f"data file {display!r} does not exist")
    if not p.is_file():
        raise ParameterError(f"data file {display!r} is not a file")
    return p, display


@dataclass
class _Loaded:
    path: Path
    fmt: str
    declared: DeclaredSchema
    meta: _Meta
    matrix: np.ndarray | None
    missing: tuple[int, ...]
    lazy: bool = False  # no cell read yet: records() parses and checks the rows it is asked for
    csv: _CsvLayout | None = None  # a lazy CSV's rows (``_csv_layout``)


def _scan(p: Path, display: str, fmt: str, columns: tuple[str, ...] | None, inferring: bool, on_chunk: _Consumer) -> tuple[tuple[str, ...], list[int], _Meta]:
    scan = _scan_parquet if fmt == "parquet" else _scan_csv
    return scan(p, display, columns, inferring, on_chunk)


def _observe(path: PathLike, columns: Sequence[str] | None, identifiers: bool = True) -> tuple[Path, str, str, tuple[str, ...], list[_Seen], _Meta]:
    """First pass of inference and drafts: what each chosen column holds (``identifiers``:
    refuse a column whose name cannot be a field's)."""
    p, display = _check_path(path)
    cols = _columns_arg(columns)
    fmt = "parquet" if is_parquet(p) else "csv"
    observer = _Observer()
    names, _, meta = _scan(p, display, fmt, cols, identifiers, observer)
    return p, display, fmt, names, observer.seen, meta


def field_name(column: str, taken: Sequence[str] = ()) -> str:
    """A field name (an identifier) for a file column: other characters become ``_``
    (``"Körpermasse (g)"`` → ``"Körpermasse_g"``), a leading digit gets ``c_``, and a name in
    ``taken`` gets a suffix ``_2``, ``_3`` …; the draft then lists the column in ``columns``."""
    name = "_".join("".join(ch if (ch + "a").isidentifier() or ch.isalnum() else " " for ch in column).split()) or "column"
    if not name.isidentifier():
        name = "c_" + name
    base, k = name, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


def _columns_arg(columns: Sequence[str] | None) -> tuple[str, ...] | None:
    if columns is None:
        return None
    if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
        raise ParameterError(f"columns must be a list of column names, got {columns!r}")
    return tuple(header_name(c) for c in columns)


def _load(path: PathLike, schema: SchemaLike, columns: Sequence[str] | None, quote: bool, lazy: bool = False) -> _Loaded:
    p, display = _check_path(path)
    cols = _columns_arg(columns)
    declared = _resolve_schema(schema, cols)
    fmt = "parquet" if is_parquet(p) else "csv"
    if lazy and declared is not None:  # the file's identity, columns and rows; no cell yet
        if fmt == "parquet":
            _, _, meta = _scan_parquet(p, display, declared.columns, False, _Encoder(display, declared.columns, [], quote, keep=False), read=False)
            return _Loaded(p, fmt, declared, meta, None, (), lazy=True)
        found = _csv_layout(p, display, declared.columns)
        if found is not None:
            return _Loaded(p, fmt, declared, found[0], None, (), lazy=True, csv=found[1])
        # else a quoted cell may span lines: the whole file is parsed below, as without lazy
    if declared is None:
        # inference: observe (kinds, ranges, labels), then check every cell as the inferred
        # schema's spec reads it (integers: anything int16, with the int16 message)
        _, _, _, names, seen, _ = _observe(p, cols)
        specs = [_inferred_spec(display, n, s) for n, s in zip(names, seen)]
        checking = [inference_spec() if s.type == "integer" else s for s in specs]
        columns_read: tuple[str, ...] | None = names
    else:
        checking = declared.column_specs()
        columns_read = declared.columns
    encoder = _Encoder(display, columns_read, checking, quote, keep=fmt == "csv")
    names, _, meta = _scan(p, display, fmt, columns_read, declared is None, encoder)
    if declared is None:
        fields = []
        final_specs = []
        for name, s, spec in zip(names, seen, specs):
            if spec.type == "integer":
                low, high = int(s.low), int(s.high)
                step = s.gcd if high > low else 1
                if high == low:  # a field needs low < high
                    high, low = (low + 1, low) if low < INT16_HIGH else (high, high - 1)
                f = Field(name, 1, low, high, step)
                spec = ColumnSpec.plain(f)
            else:
                f = spec.field()
            fields.append(f)
            final_specs.append(spec)
        declared = DeclaredSchema(Schema(tuple(fields)), tuple(names), tuple(final_specs))
    matrix = encoder.matrix() if fmt == "csv" else None
    return _Loaded(p, fmt, declared, meta, matrix, tuple(encoder.missing))


def _inferred_spec(display: str, name: str, s: _Seen) -> ColumnSpec:
    """The spec inference reads a column with: a category of its sorted labels, or integers."""
    if not s.is_category:
        return inference_spec()
    labels = tuple(sorted(s.labels))
    if len(labels) > MAX_CODES:
        raise ParameterError(f"{display}: column {name!r} has more than {MAX_CODES} distinct labels, more than a category field holds")
    if len(labels) < 2:
        raise ParameterError(f"{display}: column {name!r} holds one label only; declare its categories in a schema")
    return ColumnSpec(name, "category", 0, len(labels) - 1, 1, labels)


def _identity(digest: bytes, declared: DeclaredSchema) -> str:
    described: dict[str, Any] = {"schema": declared.schema.to_json(), "columns": list(declared.columns)}
    extra = declared.identity_json()
    if extra is not None:  # a plain schema hashes exactly what it did before typed fields
        described["declared"] = extra
    text = json.dumps(described, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(_IDENTITY_TAG + digest + b"\n" + text.encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# Population


@dataclass(frozen=True)
class DataPopulation:
    """Users' records from a local CSV or Parquet file (one user per row, ids 0..n−1 in file order).

    ``identity`` is the SHA-256 (hex) of the file's bytes, the schema and the file columns read
    (and, for a schema with typed fields, their declarations): the same data under the same
    schema gives the same identity (the ledger key), wherever the file lies. Build one with
    ``load_data``, which checks every value.

    ``schema_declared`` is False when ``load_data`` inferred the schema from the values: such a
    population may be used in this process, but its schema is a summary of the data (min, max,
    gcd, labels), so it is never described to an aggregator (``require_declared_schema``;
    invariant I3 of docs/design.md §2a). A population built by hand declares the schema it is
    given. ``specs`` holds each field's declaration (``ColumnSpec``; empty: every field a plain
    integer field of ``schema``); ``served`` is True for a file a client hosts (no error about it
    names a cell's value).
    """

    path: Path
    schema: Schema
    size: int
    identity: str
    columns: tuple[str, ...]  # the file column behind each schema column
    format: str  # "csv" or "parquet"
    schema_declared: bool = True
    specs: tuple[ColumnSpec, ...] = ()
    served: bool = False
    _matrix: np.ndarray | None = field(default=None, repr=False, compare=False)
    _stat: tuple[int, int] | None = field(default=None, repr=False, compare=False)
    _row_groups: tuple[int, ...] = field(default=(), repr=False, compare=False)
    _missing: tuple[int, ...] = field(default=(), repr=False, compare=False)
    _lazy: bool = field(default=False, repr=False, compare=False)  # load_data(lazy=True): rows checked as read
    _csv: _CsvLayout | None = field(default=None, repr=False, compare=False)  # a lazy CSV's row offsets

    @property
    def declaration(self) -> DeclaredSchema:
        """The declared schema: the public ``schema``, the file columns and each field's spec."""
        if not self.specs:
            return declared_from_schema(self.schema, self.columns)
        return DeclaredSchema(self.schema, self.columns, self.specs)

    def spec(self, field_name: str) -> ColumnSpec:
        """How field ``field_name``'s cells became record values (``ColumnSpec``)."""
        return self.declaration.spec(field_name)

    def labels(self, field_name: str) -> tuple[str, ...] | None:
        """The label of each record value 0..k of a category field, in record order (the last
        is ``"(missing)"`` when the field keeps missing values); None for a numeric field.

        The labels are declared in the schema file, so they are public; they are not sent in
        the public description (the aggregator reads the schema's integer ranges).

        >>> import ldp, pathlib, tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> path = pathlib.Path(folder.name) / "birds.csv"
        >>> _ = path.write_text("species\\nGentoo\\nAdelie\\n\\n")
        >>> data = ldp.load_data(path, {"fields": [{"name": "species", "type": "category",
        ...     "categories": ["Adelie", "Gentoo"], "missing": "category"}]})
        >>> data.labels("species"), data.records(0, 2).ravel().tolist()
        (('Adelie', 'Gentoo', '(missing)'), [1, 0])
        >>> folder.cleanup()
        """
        return self.spec(field_name).labels

    def values(self, field_name: str) -> np.ndarray:
        """What each record value of field ``field_name`` stands for, in record order
        (``ColumnSpec.values``: integers, the float grid with NaN for the missing slot, or labels)."""
        return self.spec(field_name).values()

    def missing_counts(self) -> dict[str, int]:
        """The number of missing cells kept per file column (fields that declare ``"missing":
        "category"`` or ``"drop"``), counted when the file was loaded.

        For the data owner only: these counts are computed from the data and are never part of
        the public description (invariant I3); the number of users is the number of rows
        whatever is missing."""
        if self._lazy:
            raise ParameterError(f"{self.path}: loaded with lazy=True, so its cells were not all read; load it without lazy to count missing cells")
        counts = self._missing or (0,) * len(self.columns)
        return {c: int(n) for c, n in zip(self.columns, counts)}

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
        if self._matrix is None and not self._row_groups and self._csv is None:
            self._reload()
        if self._matrix is not None:
            return self._matrix[first_user : first_user + count].copy()
        if self._csv is not None:
            return self._read_csv(first_user, count)
        return self._read_rows(first_user, count)

    # -- internals --------------------------------------------------------------------------

    def _changed(self) -> ParameterError:
        return ParameterError(f"{self.path}: the file changed since it was loaded; load it again")

    def _reload(self) -> None:
        """A DataPopulation built by hand (or unpickled): load its file and check the identity."""
        again = load_data(self.path, self.declaration, served=self.served)
        if again.identity != self.identity:
            raise self._changed()
        for name in ("_matrix", "_stat", "_row_groups", "_missing"):
            object.__setattr__(self, name, getattr(again, name))

    def _read_csv(self, first: int, count: int) -> np.ndarray:
        """A lazy CSV's rows first .. first+count−1, parsed and checked now (``_read_csv_rows``)."""
        assert self._csv is not None
        if count == 0:
            return np.zeros((0, self.schema.width), dtype=RECORD_DTYPE)
        display = str(self.path)
        try:
            if _stat(self.path) != self._stat:
                raise self._changed()
        except OSError as exc:
            raise ParameterError(f"data file {display!r} cannot be read: {one_line(exc)}") from None
        encoder = _Encoder(display, self.columns, self.declaration.column_specs(), not self.served, keep=True)
        _read_csv_rows(self.path, display, self._csv, first, count, encoder)
        return encoder.matrix()

    def _read_rows(self, first: int, count: int) -> np.ndarray:
        if count == 0:
            return np.zeros((0, self.schema.width), dtype=RECORD_DTYPE)
        display = str(self.path)
        pa, _ = _pyarrow(display)
        try:
            if _stat(self.path) != self._stat:
                raise self._changed()
        except OSError as exc:
            raise ParameterError(f"data file {display!r} cannot be read: {one_line(exc)}") from None
        starts = self._row_groups
        end = first + count
        groups = [g for g in range(len(starts) - 1) if starts[g] < end and starts[g + 1] > first]
        try:
            with _parquet_file(self.path, display) as pf:
                available, stored = _parquet_names(pf)
                index = [available.index(c) for c in self.columns]
                table = pf.read_row_groups(groups, columns=[stored[j] for j in index], use_threads=False)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise ParameterError(f"{display}: not a readable Parquet file: {one_line(exc)}") from None
        table = table.slice(first - starts[groups[0]], count)
        encoder = _Encoder(display, self.columns, self.declaration.column_specs(), not self.served, keep=True)
        encoder.start(index)
        encoder(first, None, [table.column(k) for k in range(len(self.columns))])
        return encoder.matrix()


def load_data(
    path: PathLike, schema: SchemaLike = None, *, columns: Sequence[str] | None = None, served: bool = False, lazy: bool = False
) -> DataPopulation:
    """Load and check users' records from a CSV or Parquet file.

    One user per data row, user ids 0..n−1 in file order; the records stay on the client and
    only ``DataPopulation.public_description()`` (the schema and the number of users) is shown
    to the aggregator. The file formats and the inference rules are in the module docstring
    (``ldp.core.datafile``), the schema file's in ``ldp.core.datafile_schema``: CSV is UTF-8
    with a header row; Parquet (``*.parquet``, ``*.pq`` or a file starting with ``PAR1``) needs
    pyarrow, the ``parquet`` extra. Every value is checked; the first bad one is a
    ``ParameterError`` naming the file, row, column and what is allowed (and the value, unless
    ``served``). The result's ``identity`` (the ledger key) is the SHA-256 of the file's bytes,
    the schema and the columns read.

    Parameters
    ----------
    path : str or os.PathLike
        The data file.
    schema : DeclaredSchema, Schema, str, os.PathLike, mapping, sequence of mappings or None
        A path to a JSON schema file, its parsed JSON, a ``Schema`` (plain integer fields) or a
        ``DeclaredSchema``; None (the default) infers one for use in this process only: the
        result's ``schema_declared`` is False and no aggregator is ever told it
        (``DataPopulation.require_declared_schema``).
    columns : sequence of str, optional
        The file columns to read, one per schema column in order (default: the schema's
        ``columns`` or ``default_columns``); without a schema, the columns to infer fields from
        (default: all).
    served : bool, default False
        True for a file a client process hosts (``ClientConfig``): no error names a cell's value.
    lazy : bool, default False
        True (with a declared schema; ignored without one, since inference reads every cell):
        read now only what the whole file decides (its identity, columns and number of rows,
        and for CSV its UTF-8 text and blank lines), and parse and check a row's cells only when
        ``records(first, count)`` asks for it: what a client process hosting a shard of the
        users needs (``ClientConfig.holdings``). A bad cell outside the rows asked for is not
        found; ``missing_counts()`` is refused. A CSV file with a quote character in its data
        rows, or a carriage return outside a CRLF, is parsed whole (a row may span lines).

    Returns
    -------
    DataPopulation
        The checked records, with ``schema``, ``size``, ``identity``, ``schema_declared``,
        ``records(first, count)``, ``labels(field)``, ``values(field)`` and ``missing_counts()``.

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
    if not isinstance(served, bool):
        raise ParameterError(f"served must be True or False, got {served!r}")
    if not isinstance(lazy, bool):
        raise ParameterError(f"lazy must be True or False, got {lazy!r}")
    loaded = _load(path, schema, columns, quote=not served, lazy=lazy)
    declared = loaded.declared
    matrix = loaded.matrix  # Parquet: None, records() reads row groups on demand
    if matrix is not None:
        matrix.setflags(write=False)
    return DataPopulation(
        path=loaded.path.resolve(),
        schema=declared.schema,
        size=loaded.meta.size,
        identity=_identity(loaded.meta.digest, declared),
        columns=declared.columns,
        format=loaded.fmt,
        schema_declared=schema is not None,
        specs=() if declared.plain else declared.specs,
        served=served,
        _matrix=matrix,
        _stat=loaded.meta.stat,
        _row_groups=loaded.meta.row_groups,
        _missing=loaded.missing,
        _lazy=loaded.lazy,
        _csv=loaded.csv,
    )


def infer_schema(path: PathLike, columns: Sequence[str] | None = None) -> Schema:
    """A schema for the columns ``columns`` (default: all) of a CSV or Parquet file.

    Each column becomes a field of length 1 named like it: integers get low = min, high = max,
    step = gcd of the differences; text columns a category of their sorted labels. It summarizes
    the values, so it is for this process only; a schema to declare (and serve) is written by
    ``draft_schema`` and reviewed by the user.
    """
    return _load(path, None, columns, quote=True).declared.schema


def undeclared_schema_message(path: PathLike) -> str:
    """The one-line refusal to serve a data file without a declared schema (invariant I3)."""
    shown = shlex.quote(str(path))
    return (
        f"the data file {str(path)!r} has no declared schema: a schema inferred from it would tell the aggregator "
        f"the min, max and step of every column before any ε is spent. Write a draft with "
        f"`ldp-sim schema infer {shown} > schema.json`, widen each range to the column's public range, "
        "and declare it with --schema schema.json (ClientConfig(schema_path=...) from Python)"
    )


# --------------------------------------------------------------------------------------------
# Drafts (`ldp-sim schema infer`)


@dataclass(frozen=True)
class ColumnRange:
    """What a column of the file holds: for integers its min, max and the gcd of the differences
    (0: constant); for other numbers (``kind`` "float") its min and max (step 0); for text
    (``kind`` "category") the labels found; and the number of missing cells.

    Computed from the values: shown to the user who reviews a draft, never sent anywhere."""

    column: str
    low: Any
    high: Any
    step: int
    kind: str = "integer"
    missing: int = 0
    categories: tuple[str, ...] = ()


@dataclass(frozen=True)
class SchemaDraft:
    """A schema for the user to review, widen and then declare (``draft_schema``).

    ``schema`` is the draft's public schema, ``specs`` each field's declaration (ranges widened
    by ``draft_range`` / ``draft_grid``, labels as found), ``observed`` what each column holds
    (for the review, on the user's machine only).
    """

    path: Path
    rows: int
    schema: Schema
    columns: tuple[str, ...]
    observed: tuple[ColumnRange, ...]
    specs: tuple[ColumnSpec, ...] = ()

    @property
    def declaration(self) -> DeclaredSchema:
        """The draft as a ``DeclaredSchema``."""
        if not self.specs:
            return declared_from_schema(self.schema, self.columns)
        return DeclaredSchema(self.schema, self.columns, self.specs)

    def to_json(self) -> dict[str, Any]:
        """The schema-file format (``DeclaredSchema.to_json``)."""
        return self.declaration.to_json()

    def text(self) -> str:
        """The schema file, one field per line (easy to review and edit), ending in a newline."""
        fields = self.to_json()["fields"]
        return f'{{"format": {SCHEMA_FORMAT}, "fields": [\n' + ",\n".join("  " + json.dumps(f, ensure_ascii=False) for f in fields) + "\n]}\n"


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


def draft_grid(low: float, high: float, integral: bool = False) -> tuple[float, float, float]:
    """The float grid a draft declares for numbers in low..high: 0..2^k, or −2^k..2^k when
    low < 0, for the smallest integer k with 2^k ≥ max(|low|, |high|) (k ≥ 0 when ``integral``),
    at the decimal resolution 10^m that puts 1,001 to 10,001 points on 0..2^k (at least 1
    when ``integral``); when 10^m > 1, 2^k is rounded up to a multiple of it.

    Like ``draft_range``, it tells the values' magnitude only, never their extremes.

    >>> draft_grid(0.12, 97.5), draft_grid(-3.0, 0.4), draft_grid(40000, 2_000_000, integral=True)
    ((0.0, 128.0, 0.1), (-4.0, 4.0, 0.001), (0.0, 2098000.0, 1000.0))
    """
    magnitude = max(abs(float(low)), abs(float(high)))
    k = math.ceil(math.log2(magnitude)) if magnitude > 0 else 0
    if integral:
        k = max(k, 0)
    while 2.0**k < magnitude:  # guard log2's rounding
        k += 1
    top = 2.0**k
    resolution = float(f"{10.0 ** (math.floor(math.log10(top)) - 3):.0e}")
    if integral:
        resolution = max(resolution, 1.0)
    if resolution > 1:  # 2^k is then no multiple of 10^m: round the range up to one
        top = math.ceil(top / resolution) * resolution
    return (0.0 if low >= 0 else -top), top, resolution


def _draft_spec(display: str, column: str, name: str, s: _Seen) -> ColumnSpec:
    """The declaration a draft writes for a column (see the module docstring)."""
    missing = "category" if s.missing else "refuse"
    slot = 1 if s.missing else 0
    if s.is_category:
        labels = tuple(sorted(s.labels))
        if len(labels) + slot > MAX_CODES - 1 or len(s.labels) > MAX_CODES:
            raise ParameterError(
                f"{display}: column {column!r} has more than {MAX_CODES - 2} distinct labels: more than a category field "
                "holds; leave it out (--columns) or declare it by hand"
            )
        if len(labels) == 1:
            missing = "category"  # a field needs two values: the label and the missing slot
        return ColumnSpec(name, "category", 0, len(labels) - 1, 1, labels, missing=missing)
    if s.numbers == 0:
        raise ParameterError(f"{display}: column {column!r} has no value in any row; leave it out (--columns) or declare it by hand")
    if s.whole:
        low, high = int(s.low), int(s.high)
        if INT16_LOW <= low and high <= INT16_HIGH:
            a, b = draft_range(low, high)
            if not slot or b - a + 1 + slot <= MAX_CODES:
                return ColumnSpec(name, "integer", a, b, 1, missing=missing)
        grid = draft_grid(low, high, integral=True)
        return ColumnSpec(name, "float", int(grid[0]), int(grid[1]), int(grid[2]), missing=missing)
    low_f, high_f, res = draft_grid(float(s.low), float(s.high))
    return ColumnSpec(name, "float", low_f, high_f, res, missing=missing)


def draft_schema(path: PathLike, columns: Sequence[str] | None = None) -> SchemaDraft:
    """A draft schema for the columns ``columns`` (default: all) of a CSV or Parquet file.

    What ``ldp-sim schema infer FILE`` writes, on the user's machine: each column a field of
    length 1 named like it (a column whose name is not an identifier must be left out, or
    declared by hand with ``columns``). Integer columns get a range widened by ``draft_range``
    and step 1; other numbers (and integers too wide for int16) a float grid
    (``draft_grid``); text a category field listing the labels found (data values: the user
    reviews them); a column with missing values ``"missing": "category"``. The draft does not
    carry the data's min, max or gcd. The user reviews it against ``observed``, widens each range
    to the column's public range, and declares it (``--schema``). Every value is checked as
    ``load_data`` checks it under the draft (a bad cell is a ``ParameterError`` naming it).

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
    ColumnRange(column='age', low=37, high=37, step=0, kind='integer', missing=0, categories=())
    >>> folder.cleanup()
    """
    p, display, _, names, seen, meta = _observe(path, columns, identifiers=False)
    field_names: list[str] = []
    for n in names:
        field_names.append(n if n.isidentifier() and n not in field_names else field_name(n, field_names))
    specs = tuple(_draft_spec(display, n, f, s) for n, f, s in zip(names, field_names, seen))
    fields = tuple(s.field() for s in specs)
    declared = DeclaredSchema(Schema(fields), tuple(names), specs)
    _load(p, declared, None, quote=True)  # every cell checked as the draft reads it
    observed = []
    for n, s in zip(names, seen):
        if s.is_category:
            observed.append(ColumnRange(n, 0, len(s.labels) - 1, 1, "category", s.missing, tuple(sorted(s.labels))))
        elif s.whole:
            observed.append(ColumnRange(n, int(s.low), int(s.high), s.gcd, "integer", s.missing))
        else:
            observed.append(ColumnRange(n, float(s.low), float(s.high), 0, "float", s.missing))
    plain = declared.plain
    return SchemaDraft(p, meta.size, declared.schema, tuple(names), tuple(observed), () if plain else specs)
