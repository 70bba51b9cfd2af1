"""A column of strings from an open domain as users' records: their public 64-bit fingerprints.

What the open-domain sketches (``cms_string``, ``hcms_string``; ``ldp.core.sketches``) read. The
caller (``ldp.experiment.sketch_estimate``) is the data owner: it reads the column here, on the
users' side, and each user's record is the fingerprint of its string
(``ldp.core.string_hashing``: four int16 chunks). A ``StringColumn`` is a ``Holdings``
(``ldp.local.shard``): a ``Shard`` serves it in process, or it is written to a CSV file with its
declared schema for client processes (``write_csv``), which then hold the very same records.

The trust model (docs/design.md §2a, invariant I3; the "front door" of ``ldp.core.datafile``):
the schema these users describe is ``fingerprint_schema(name)``, the same for every column of
strings. Nothing computed from the strings — no label list, no count of distinct values, no
extreme — is in it, so it is safe to serve without a declared schema: unlike a category column
read without a schema (whose inferred labels are the data's values, and are refused outside the
data owner's process), a string column read here never publishes its values. The strings stay
in ``StringColumn.strings`` for the data owner's yardstick (``true_counts``: outside the
protocol); the candidates the server estimates come from the analyst, never from the data.

Reading a file (``read_string_column``) follows ``ldp.core.datafile``'s rules: CSV is UTF-8 (a
BOM allowed) with a header row, header names compared stripped and in NFC (``header_name``),
each cell stripped of surrounding spaces, a blank line is no row, an empty cell is missing;
Parquet (``*.parquet``, ``*.pq`` or a file starting with ``PAR1``) needs pyarrow and a string
column. A missing value is refused in one line naming how many and the first row (row N is the
N-th data row, user N−1).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ldp.core.column import column_values, held_records, holdings_identity
from ldp.core.datafile import header_name, is_parquet
from ldp.core.datafile_schema import one_line
from ldp.core.errors import ParameterError
from ldp.core.schema import Schema
from ldp.core.string_hashing import FINGERPRINT_CHUNKS, FINGERPRINT_HIGH, FINGERPRINT_LOW, fingerprint_schema, fingerprints, key_records

__all__ = ["StringColumn", "string_column", "read_string_column"]

_TAG = b"ldp.string-column/v1\n"


@dataclass(frozen=True)
class StringColumn:
    """Users holding one string each, as fingerprint records (module docstring): a ``Holdings``."""

    name: str
    strings: np.ndarray = field(repr=False, compare=False)  # the data owner's, for its yardstick only
    _records: np.ndarray = field(repr=False, compare=False)

    @property
    def schema(self) -> Schema:
        """``fingerprint_schema(name)``: public, and the same whatever the strings are."""
        return fingerprint_schema(self.name)

    @property
    def size(self) -> int:
        return int(len(self._records))

    @property
    def identity(self) -> str:
        """SHA-256 of the records and the schema (the ledger key, as ``ColumnData``'s)."""
        return holdings_identity(_TAG, self.schema, self._records)

    def records(self, first_user: int, count: int) -> np.ndarray:
        """Records of users first_user .. first_user+count−1: int16, shape (count, 4)."""
        return held_records(self._records, first_user, count)

    def true_counts(self, candidates: list[str]) -> np.ndarray:
        """How many users hold each candidate (the experimenter's yardstick, outside the protocol)."""
        counts: dict[str, int] = {}
        for s in self.strings.tolist():
            counts[s] = counts.get(s, 0) + 1
        return np.array([counts.get(c, 0) for c in candidates], dtype=np.int64)

    def pair_sum(self) -> float:
        """Σ_d N(d)(N(d) − 1) over the distinct strings (the sketch variance's family term; yardstick only)."""
        _, counts = np.unique(self.strings.astype(str), return_counts=True)
        c = counts.astype(np.float64)
        return float((c * (c - 1)).sum())

    def write_csv(self, folder: str | Path) -> tuple[Path, Path]:
        """``column.csv`` (columns name_0 .. name_3: the chunks) and its declared ``schema.json``
        (the fingerprint field), for client processes on this machine (``ldp.core.datafile``)."""
        folder = Path(folder)
        data, schema = folder / "column.csv", folder / "schema.json"
        header = ",".join(f"{self.name}_{j}" for j in range(FINGERPRINT_CHUNKS))
        np.savetxt(data, self._records, fmt="%d", delimiter=",", header=header, comments="")
        schema.write_text(json.dumps({"format": 1, "fields": [{"name": self.name, "length": FINGERPRINT_CHUNKS, "low": FINGERPRINT_LOW, "high": FINGERPRINT_HIGH}]}))
        return data, schema


def _field_name(name: str | None) -> str:
    return name if isinstance(name, str) and name.isidentifier() else "value"


def _refuse_missing(missing: np.ndarray, what: str) -> None:
    count = int(np.count_nonzero(missing))
    if count:
        first = int(np.argmax(missing)) + 1
        raise ParameterError(f"the {what} has {count} missing value(s), the first at row {first}: drop them, or map them to a string such as 'missing'")


def _of_strings(values: np.ndarray, name: str, what: str) -> StringColumn:
    strings = np.asarray(values, dtype=object)
    not_str = np.fromiter((not isinstance(s, str) for s in strings), dtype=bool, count=len(strings))
    if not_str.any():
        first = int(np.argmax(not_str))
        raise ParameterError(f"the {what} must hold strings (an open domain, by fingerprint); row {first + 1} holds a {type(strings[first]).__name__}")
    _refuse_missing(np.fromiter((s == "" for s in strings), dtype=bool, count=len(strings)), what)
    return StringColumn(name, strings, key_records(fingerprints(strings, what=f"a value of the {what}")))


def string_column(column: Any, name: str | None = None) -> StringColumn:
    """A numpy array, pandas Series or pyarrow Array of strings as fingerprint records.

    Raises
    ------
    ParameterError
        An empty or missing value, or a value that is not a string (one line: how many / which row)."""
    values, own = column_values(column)
    if values.dtype.kind == "S":
        raise ParameterError("the column holds bytes: decode them to str first")
    if values.dtype.kind not in "UO":
        raise ParameterError(f"the column holds {values.dtype} values: the sketch of an open domain takes strings (map numbers to str first)")
    return _of_strings(values.astype(object), _field_name(name or own), "column")


def _csv_cells(p: Path, display: str, column: str) -> list[str]:
    try:
        text = p.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise ParameterError(f"data file {display!r} cannot be read: {one_line(exc)}") from None
    except UnicodeDecodeError as exc:
        raise ParameterError(f"{display}: not UTF-8 text (byte {exc.start} cannot be decoded)") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header: list[str] = []
        for row in reader:
            if row:
                header = [header_name(h) for h in row]
                break
        if not header:
            raise ParameterError(f"{display}: no header row (a CSV data file names its columns in its first line)")
        want = header_name(column)
        if want not in header:
            raise ParameterError(f"{display}: no column {column!r} (columns: {', '.join(header[:12])}{', …' if len(header) > 12 else ''})")
        at = header.index(want)
        cells: list[str] = []
        for row in reader:
            if not row:
                continue  # a blank line is not a row
            if len(row) != len(header):
                raise ParameterError(f"{display}: row {len(cells) + 1} has {len(row)} cells, the header has {len(header)}")
            cells.append(row[at].strip())
    except csv.Error as exc:
        raise ParameterError(f"{display}: not a CSV file the reader accepts (line {reader.line_num}: {one_line(exc)})") from None
    return cells


def _parquet_cells(p: Path, display: str, column: str) -> list[Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ParameterError(f"{display} is a Parquet file: reading it needs pyarrow (pip install 'ldp-sim[parquet]')") from None
    try:
        pf = pq.ParquetFile(p)
        names = {header_name(n): n for n in pf.schema_arrow.names}
        want = header_name(column)
        if want not in names:
            raise ParameterError(f"{display}: no column {column!r} (columns: {', '.join(list(names)[:12])})")
        col = pf.read(columns=[names[want]]).column(0)
    except ParameterError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure: one line naming the file
        raise ParameterError(f"{display}: not a Parquet file pyarrow reads ({one_line(exc)})") from None
    t = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or str(t) == "string_view"):
        raise ParameterError(f"{display}: column {column!r} holds {t} values: the sketch of an open domain takes a string column")
    return [None if v is None else v.strip() for v in col.to_pylist()]


def read_string_column(path: str | Path, column: str) -> StringColumn:
    """The strings of one column of a CSV or Parquet file (module docstring), as fingerprint records.

    Raises
    ------
    ParameterError
        An unreadable file, no such column, a missing (empty) cell, a Parquet column that is
        not strings: one line naming the file, and the row where there is one."""
    if not isinstance(column, str) or not column.strip():
        raise ParameterError(f"the column must be a non-empty name, got {column!r}")
    p = Path(path)
    display = str(path)
    if not p.is_file():
        raise ParameterError(f"data file {display!r} does not exist or is not a file")
    cells: list[Any] = _parquet_cells(p, display, column) if is_parquet(p) else _csv_cells(p, display, column)
    if not cells:
        raise ParameterError(f"{display}: no data rows: the column needs at least one user")
    missing = np.fromiter((c is None or c == "" for c in cells), dtype=bool, count=len(cells))
    _refuse_missing(missing, f"column {column!r} of {display}")
    name = header_name(column)
    return _of_strings(np.array(cells, dtype=object), _field_name(name), f"column {column!r} of {display}")
