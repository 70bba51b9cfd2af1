"""Every bad data file and bad schema file gives one line and exit 2, through the real command.

Each case writes a file someone could hand a client (a CSV or Parquet file, a schema file) and
runs ``ldp-sim clients --data F --schema S`` (the file is *served*: its errors name the file,
row, column and what is allowed, never a cell's value, invariant I3) or ``ldp-sim schema infer F``
(the draft on the user's own machine: its errors may quote the value). Every process runs on
127.0.0.1 with a deadline (the clients never get as far as connecting: port 9 is never
dialled). ``BAD_INPUTS`` is the count the issue asks for.

Broken variant: ``test_the_one_line_check_catches_a_traceback`` feeds the same check the output
of a command that fails with a traceback, and the check refuses it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.waits import PROCESS_WAIT_S

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

LDP_SIM = str(Path(sys.executable).parent / "ldp-sim")
DEADLINE_S = PROCESS_WAIT_S  # a hang guard on a process, never a speed claim
CATS = ["Adelie", "Chinstrap", "Gentoo"]


def _fields(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"format": 1, "fields": list(fields)}


X = {"name": "x", "high": 9}
SP = {"name": "sp", "type": "category", "categories": CATS}
V = {"name": "v", "type": "float", "low": 0, "high": 10, "resolution": 0.5}

# (id, data file name, its content: text, bytes, or Parquet columns; the schema (None: schema
#  infer); what the line says; a value that must not appear (served files), or None)
DATA_CASES: list[tuple[str, str, Any, Any, str, str | None]] = [
    # the file itself
    ("empty file", "d.csv", "", _fields(X), "the file is empty", None),
    ("header only", "d.csv", "x\n", _fields(X), "the file has a header but no data rows", None),
    ("not UTF-8", "d.csv", b"x\n\xff\n", _fields(X), "not UTF-8 text", None),
    ("malformed quotes", "d.csv", 'x,y\n1,"2\n', _fields(X), "line 2: malformed CSV", None),
    ("short row", "d.csv", "x,y\n1,2\n3\n", _fields(X), "row 2 (line 3): has 1 cell(s), the header has 2", None),
    ("blank line between rows", "d.csv", "x,y\n1,2\n\n3,4\n", _fields(X), "line 3: a blank line between data rows", None),
    ("column missing", "d.csv", "y\n1\n", _fields(X), "column 'x' is missing; the file has columns ['y']", None),
    ("column twice after stripping", "d.csv", "x, x \n1,2\n", _fields(X), "column 'x' appears 2 times in the header", None),
    ("not Parquet", "d.parquet", b"PAR0 not parquet", _fields(X), "not a readable Parquet file", None),
    # integers
    ("not an integer", "d.csv", "x\n1\n2.5\n", _fields(X), "row 2 (line 3), column 'x': the cell is not an integer", "2.5"),
    ("integer out of range", "d.csv", "x\n1\n17\n", _fields(X), "the value is not allowed by field 'x' (low=0, high=9", "17"),
    ("integer off the step", "d.csv", "x\n0\n35\n", _fields({"name": "x", "high": 100, "step": 20}), "the value is not allowed by field 'x' (low=0, high=100, step=20", "35"),
    ("integer beyond int64", "d.csv", "x\n1\n" + "8" * 25 + "\n", _fields(X), "row 2 (line 3), column 'x': the value is not allowed", "8" * 25),
    ("wide integer out of range", "d.csv", "x\n1000000\n2000000\n", _fields({"name": "x", "low": 1_000_000, "high": 1_030_000, "step": 10}),
     "the value is not an integer in 1000000..1030000 in steps of 10", "2000000"),
    ("empty cell refused", "d.csv", "x,y\n1,1\n,1\n", _fields(X), "row 2 (line 3), column 'x': the cell is empty", None),
    # categories
    ("unknown category", "d.csv", "sp\nAdelie\nAdelei\n", _fields(SP), "the cell is not one of the 3 categories of field 'sp'", "Adelei"),
    ("empty category refused", "d.csv", "sp,y\nGentoo,1\n ,1\n", _fields(SP), "row 2 (line 3), column 'sp': the cell is empty", None),
    # floats
    ("not a number", "d.csv", "v\n1.5\nlots\n", _fields(V), "row 2 (line 3), column 'v': the cell is not a number", "lots"),
    ("float out of range", "d.csv", "v\n1.5\n12.75\n", _fields(V), "the value is not a number in 0..10 (field 'v', resolution 0.5)", "12.75"),
    ("float infinite", "d.csv", "v\n1.5\n-inf\n", _fields(V), "row 2 (line 3), column 'v': the value is not a number in 0..10", "inf"),
    # Parquet cells
    ("Parquet null refused", "d.parquet", {"x": [1, None]}, _fields(X), "row 2, column 'x': the cell is empty (null)", None),
    ("Parquet fraction", "d.parquet", {"x": [1.0, 2.25]}, _fields(X), "row 2, column 'x': the cell is not an integer", "2.25"),
    ("Parquet NaN refused", "d.parquet", {"x": [1.0, float("nan")]}, _fields(X), "row 2, column 'x': the cell is not an integer", "nan"),
    ("Parquet unknown category", "d.parquet", {"sp": ["Gentoo", "Gentu"]}, _fields(SP), "row 2, column 'sp': the cell is not one of", "Gentu"),
    ("Parquet binary column", "d.parquet", {"x": [b"\x01hidden"]}, _fields(X), "row 1, column 'x': the cell is not an integer (the column holds binary)", "hidden"),
]
SCHEMA_CASES: list[tuple[str, str, Any, Any, str, str | None]] = [  # the line names the schema file
    ("schema not JSON", "d.csv", "x\n1\n", "{", "not valid JSON (line 1", None),
    ("unknown type", "d.csv", "x\n1\n", _fields({"name": "x", "type": "text"}), "'type' must be one of ['integer', 'category', 'float'], got 'text'", None),
    ("category without labels", "d.csv", "x\n1\n", _fields({"name": "x", "type": "category"}), 'type "category" needs "categories"', None),
    ("category twice", "d.csv", "x\n1\n", _fields({"name": "x", "type": "category", "categories": ["a", "a"]}), "categories must be unique, got 'a' twice", None),
    ("category with spaces", "d.csv", "x\n1\n", _fields({"name": "x", "type": "category", "categories": ["a ", "b"]}), "has surrounding spaces", None),
    ("category one label", "d.csv", "x\na\n", _fields({"name": "x", "type": "category", "categories": ["a"]}), "a category field needs at least 2 values", None),
    ("missing label taken", "d.csv", "x\na\n", _fields({"name": "x", "type": "category", "categories": ["a", "(missing)"], "missing": "category"}), "is the missing slot's label", None),
    ("float without resolution", "d.csv", "x\n1\n", _fields({"name": "x", "type": "float", "high": 2}), 'type "float" needs "resolution"', None),
    ("resolution not dividing", "d.csv", "x\n1\n", _fields({"name": "x", "type": "float", "high": 1, "resolution": 0.3}), "resolution 0.3 must divide high − low = 1", None),
    ("float grid too fine", "d.csv", "x\n1\n", _fields({"name": "x", "type": "float", "high": 1, "resolution": 1e-5}), "a record holds at most 32768 per column: declare a coarser resolution", None),
    ("integer range too wide", "d.csv", "x\n1\n", _fields({"name": "x", "high": 10**9}), "a record holds at most 32768 per column: declare a step of at least 30519", None),
    ("key of another type", "d.csv", "x\n1\n", _fields({"name": "x", "resolution": 1}), "key(s) ['resolution'] do not apply to type 'integer'", None),
    ("bad missing policy", "d.csv", "x\n1\n", _fields({"name": "x", "missing": "skip"}), "'missing' must be one of ['refuse', 'category', 'drop'], got 'skip'", None),
    ("bad out_of_range policy", "d.csv", "x\n1\n", _fields({"name": "x", "out_of_range": "wrap"}), "'out_of_range' must be one of ['refuse', 'clip'], got 'wrap'", None),
    ("out_of_range on a category", "d.csv", "x\n1\n", _fields({**SP, "out_of_range": "clip"}), "key(s) ['out_of_range'] do not apply to type 'category'", None),
    ("low not a number", "d.csv", "x\n1\n", _fields({"name": "x", "type": "float", "low": "0", "resolution": 1}), "'low' must be a finite number, got '0'", None),
    ("unknown key", "d.csv", "x\n1\n", _fields({"name": "x", "categorys": ["a"]}), "unknown key(s) ['categorys']", None),
]
DRAFT_CASES: list[tuple[str, str, Any, Any, str, str | None]] = [  # schema infer, on the user's own machine: values may be quoted
    ("draft: a word among numbers", "d.csv", "x\n1\nseven\n3\n", None, "row 2 (line 3), column 'x': value 'seven' is not an integer", None),
    ("draft: a column with no value", "d.csv", "x,y\n,1\n,2\n", None, "column 'x' has no value in any row", None),
    ("draft: unreadable Parquet", "d.pq", b"junk", None, "not a readable Parquet file", None),
]
CASES = DATA_CASES + SCHEMA_CASES + DRAFT_CASES
BAD_INPUTS = len(CASES)


def _write(folder: Path, name: str, content: Any) -> Path:
    path = folder / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        pq.write_table(pa.table(content), path)
    return path


def _argv(folder: Path, case: tuple[str, str, Any, Any, str, str | None]) -> list[str]:
    _, name, content, schema, _, _ = case
    data = _write(folder, name, content)
    if schema is None:
        return [LDP_SIM, "schema", "infer", str(data)]
    schema_path = folder / "schema.json"
    schema_path.write_text(schema if isinstance(schema, str) else json.dumps(schema), encoding="utf-8")
    return [LDP_SIM, "clients", "--connect", "127.0.0.1:9", "--data", str(data), "--schema", str(schema_path), "--budget", "1"]


def check_one_line(rc: int, out: str, err: str, path: str, says: str, value: str | None) -> None:
    """The refusal: exit 2, nothing on stdout, one line on stderr naming the file and the
    problem, no traceback, and (served) not the value."""
    assert rc == 2, (rc, err)
    assert out == "" and err.count("\n") == 1 and err.startswith("ldp-sim: error: "), err
    assert "Traceback" not in err and path in err and says in err, err
    if value is not None:
        assert value not in err.replace(path, ""), err


def test_every_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "LDP_STATE_DIR": str(tmp_path / "state")}
    runs = []
    for k, case in enumerate(CASES):
        folder = tmp_path / f"case{k}"
        folder.mkdir()
        runs.append((case, folder, _argv(folder, case)))
    for start in range(0, len(runs), 8):  # a few at a time: the machine is shared
        batch = [(case, folder, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)) for case, folder, argv in runs[start : start + 8]]
        for case, folder, proc in batch:
            out, err = proc.communicate(timeout=DEADLINE_S)
            named = folder / ("schema.json" if case in SCHEMA_CASES else case[1])
            check_one_line(proc.returncode, out.decode(), err.decode(), str(named), case[4], case[5])
    assert BAD_INPUTS == 45


def test_the_one_line_check_catches_a_traceback() -> None:
    """Broken variant: a command that dies with a traceback (exit 1, many lines) is refused by
    the same check, and so is a served refusal that quotes the value."""
    proc = subprocess.run([sys.executable, "-c", "raise ValueError('x')"], capture_output=True, timeout=DEADLINE_S)
    with pytest.raises(AssertionError):
        check_one_line(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), "", "x", None)
    quoted = "ldp-sim: error: d.csv, row 2 (line 3), column 'x': value 17 is not allowed by field 'x'\n"
    with pytest.raises(AssertionError):
        check_one_line(2, "", quoted, "d.csv", "column 'x'", "17")
