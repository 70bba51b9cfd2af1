"""Real data from CSV / Parquet files: round trips, inference, identity, and precise errors."""

import json
import shutil
import sys

import numpy as np
import pytest

from ldp.core import datafile
from ldp.core.datafile import (
    DataPopulation,
    default_columns,
    infer_schema,
    load_data,
    parse_schema_json,
    read_schema_file,
    schema_from_json,
    schema_to_json,
)
from ldp.core.errors import LDPError, ParameterError
from ldp.core.schema import RECORD_DTYPE, Field, Schema

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

SCHEMA = Schema((Field("x", 3, 0, 1), Field("y", 1, -1, 1, 2)))
SCHEMA_JSON = {"fields": [{"name": "x", "length": 3, "low": 0, "high": 1}, {"name": "y", "low": -1, "high": 1, "step": 2}]}


def sample(n=50, seed=0):
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.integers(0, 2, (n, 3)), rng.choice([-1, 1], n)]).astype(RECORD_DTYPE)


def write_csv(path, header, rows):
    path.write_text(",".join(header) + "\n" + "".join(",".join(str(v) for v in r) + "\n" for r in rows))
    return path


def write_parquet(path, columns, row_group_size=None):
    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)
    return path


def error_of(fn, *args, **kwargs):
    with pytest.raises(ParameterError) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg and isinstance(info.value, LDPError)
    return msg


# ---------------------------------------------------------------------------- round trips


def test_csv_declared_schema_round_trip(tmp_path):
    data = sample()
    path = write_csv(tmp_path / "d.csv", default_columns(SCHEMA), data)
    pop = load_data(path, SCHEMA)
    assert isinstance(pop, DataPopulation) and pop.format == "csv"
    assert pop.size == len(data) and pop.schema == SCHEMA and pop.path == path.resolve()
    recs = pop.records(0, pop.size)
    assert recs.dtype == RECORD_DTYPE and recs.shape == (len(data), 4)
    assert np.array_equal(recs, data)
    # the same through a schema file and through its parsed JSON
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA_JSON))
    for declared in (tmp_path / "s.json", str(tmp_path / "s.json"), SCHEMA_JSON, SCHEMA.to_json()):
        again = load_data(path, declared)
        assert again.schema == SCHEMA and again.identity == pop.identity
        assert np.array_equal(again.records(0, again.size), data)


def test_csv_explicit_columns_any_order_and_extra_columns(tmp_path):
    data = sample(20)
    header = ["id", "label", "b", "a", "c", "note"]
    rows = [[i, r[3], r[1], r[0], r[2], "hello world"] for i, r in enumerate(data)]
    path = write_csv(tmp_path / "d.csv", header, rows)
    spec = {"fields": [{"name": "x", "length": 3, "columns": ["a", "b", "c"]}, {"name": "y", "low": -1, "high": 1, "step": 2, "columns": ["label"]}]}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    by_file = load_data(path, tmp_path / "s.json")
    by_arg = load_data(path, SCHEMA, columns=["a", "b", "c", "label"])
    for pop in (by_file, by_arg):
        assert pop.columns == ("a", "b", "c", "label")
        assert np.array_equal(pop.records(0, 20), data)
    assert by_file.identity == by_arg.identity
    assert read_schema_file(tmp_path / "s.json") == (SCHEMA, ("a", "b", "c", "label"))
    assert schema_to_json(SCHEMA, ("a", "b", "c", "label")) == {
        "format": 1,
        "fields": [
            {"name": "x", "length": 3, "low": 0, "high": 1, "step": 1, "columns": ["a", "b", "c"]},
            {"name": "y", "length": 1, "low": -1, "high": 1, "step": 2, "columns": ["label"]},
        ]
    }
    assert parse_schema_json(schema_to_json(SCHEMA, ("a", "b", "c", "label"))) == (SCHEMA, ("a", "b", "c", "label"))


def test_csv_inferred_schema(tmp_path):
    rows = [[0, -1, 3, 7, 5, -32768], [1, 1, 9, 7, 5, 32767], [1, -1, 0, 7, 4, 0], [0, 1, 6, 7, 5, 1]]
    path = write_csv(tmp_path / "d.csv", ["bit", "label", "threes", "const", "pair", "wide"], rows)
    schema = infer_schema(path)
    assert schema == Schema(
        (
            Field("bit", 1, 0, 1, 1),
            Field("label", 1, -1, 1, 2),  # a ±1 label
            Field("threes", 1, 0, 9, 3),
            Field("const", 1, 7, 8, 1),  # a constant column still makes a valid field
            Field("pair", 1, 4, 5, 1),
            Field("wide", 1, -32768, 32767, 1),
        )
    )
    pop = load_data(path)
    assert pop.schema == schema and np.array_equal(pop.records(0, 4), np.array(rows))
    assert infer_schema(path, columns=["label", "bit"]) == Schema((Field("label", 1, -1, 1, 2), Field("bit")))
    assert load_data(path, columns=["label"]).records(0, 4).ravel().tolist() == [-1, 1, -1, 1]
    # an inferred schema, written out, declares the same population
    assert load_data(path, schema_to_json(schema)).identity == pop.identity


def test_csv_lenient_spelling(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(b'\xef\xbb\xbf x , "y"\r\n 1 ,+1\r\n"0",-1\r\n\r\n\r\n')  # BOM, CRLF, spaces, quotes, trailing blank lines
    pop = load_data(path)
    assert pop.columns == ("x", "y") and pop.size == 2
    assert pop.records(0, 2).tolist() == [[1, 1], [0, -1]]


@pytest.mark.parametrize("row_group_size", [None, 7])
def test_parquet_declared_and_inferred_round_trip(tmp_path, row_group_size):
    data = sample(60)
    cols = {name: data[:, k] for k, name in enumerate(default_columns(SCHEMA))}
    path = write_parquet(tmp_path / "d.parquet", cols, row_group_size)
    pop = load_data(path, SCHEMA)
    assert pop.format == "parquet" and pop.size == 60 and pop.schema == SCHEMA
    assert np.array_equal(pop.records(0, 60), data)
    inferred = load_data(path)
    assert inferred.schema == Schema(tuple(Field(n) for n in ("x_0", "x_1", "x_2")) + (Field("y", 1, -1, 1, 2),))
    assert np.array_equal(inferred.records(0, 60), data)


def test_parquet_column_types(tmp_path):
    path = write_parquet(
        tmp_path / "t.parquet",
        {
            "i8": pa.array([0, 1, 1], pa.int8()),
            "u64": pa.array([3, 5, 7], pa.uint64()),
            "b": pa.array([True, False, True]),
            "f": pa.array([-1.0, 1.0, 1.0]),
            "s": pa.array([" 2", "4", "6"]),
            "d": pa.array(["1", "0", "1"]).dictionary_encode(),
        },
    )
    pop = load_data(path)
    assert pop.records(0, 3).tolist() == [[0, 3, 1, -1, 2, 1], [1, 5, 0, 1, 4, 0], [1, 7, 1, 1, 6, 1]]
    assert pop.schema.field("u64") == Field("u64", 1, 3, 7, 2)
    assert pop.schema.field("f") == Field("f", 1, -1, 1, 2)


def test_parquet_by_magic_bytes_whatever_the_suffix(tmp_path):
    path = write_parquet(tmp_path / "d.bin", {"y": np.array([-1, 1, 1])})
    assert load_data(path).format == "parquet"


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_records_slices_equal_the_full_load(tmp_path, kind):
    data = sample(101, seed=3)
    names = default_columns(SCHEMA)
    if kind == "csv":
        path = write_csv(tmp_path / "d.csv", names, data)
    else:
        path = write_parquet(tmp_path / "d.parquet", {n: data[:, k] for k, n in enumerate(names)}, row_group_size=10)
    pop = load_data(path, SCHEMA)
    full = pop.records(0, pop.size)
    assert np.array_equal(full, data)
    for first, count in [(0, 1), (9, 2), (10, 10), (13, 40), (95, 6), (100, 1), (50, 0), (0, 101)]:
        part = pop.records(first, count)
        assert part.dtype == RECORD_DTYPE and part.shape == (count, SCHEMA.width)
        assert np.array_equal(part, full[first : first + count])
    part = pop.records(np.int64(3), np.int64(4))
    part[:] = 9  # a copy: the population is unchanged
    assert np.array_equal(pop.records(3, 4), data[3:7])
    for first, count in [(-1, 2), (100, 2), (0, 102), (5, -1)]:
        assert "outside the population 0..100" in error_of(pop.records, first, count)
    assert "needs integers" in error_of(pop.records, 1.0, 2)


def test_parquet_records_read_only_the_needed_row_groups(tmp_path, monkeypatch):
    data = sample(100)
    names = default_columns(SCHEMA)
    path = write_parquet(tmp_path / "d.parquet", {**{n: data[:, k] for k, n in enumerate(names)}, "other": np.arange(100)}, row_group_size=10)
    pop = load_data(path, SCHEMA)
    calls = []
    original = pq.ParquetFile.read_row_groups

    def spy(self, row_groups, columns=None, **kw):
        calls.append((list(row_groups), list(columns)))
        return original(self, row_groups, columns=columns, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", spy)
    assert np.array_equal(pop.records(25, 20), data[25:45])
    assert calls == [([2, 3, 4], list(names))]


# ---------------------------------------------------------------------------- public view and identity


def test_public_description_is_schema_and_size_only(tmp_path):
    path = write_csv(tmp_path / "d.csv", default_columns(SCHEMA), sample(12))
    desc = load_data(path, SCHEMA).public_description()
    assert set(desc) == {"schema", "size"} and desc["size"] == 12
    assert schema_from_json(desc["schema"]) == SCHEMA
    assert str(tmp_path) not in json.dumps(desc)


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_identity_stable_and_sensitive_to_one_byte(tmp_path, kind):
    data = sample(30)
    names = default_columns(SCHEMA)
    if kind == "csv":
        path = write_csv(tmp_path / "d.csv", names, data)
    else:
        path = write_parquet(tmp_path / "d.parquet", {n: data[:, k] for k, n in enumerate(names)})
    pop = load_data(path, SCHEMA)
    assert len(pop.identity) == 64 and int(pop.identity, 16) >= 0
    assert load_data(path, SCHEMA).identity == pop.identity
    moved = tmp_path / "elsewhere" / path.name
    moved.parent.mkdir()
    shutil.copy(path, moved)
    assert load_data(moved, SCHEMA).identity == pop.identity  # the data, not where it lies
    # another schema over the same bytes is another population
    wider = Schema((Field("x", 3, 0, 1), Field("y", 1, -1, 1, 1)))
    assert load_data(path, wider).identity != pop.identity
    # one byte changed → another identity
    raw = bytearray(path.read_bytes())
    if kind == "csv":
        k = raw.index(b"\n") + 1  # first data byte: a 0 or a 1
        raw[k] = ord("1") if raw[k] == ord("0") else ord("0")
        changed = tmp_path / "c.csv"
        changed.write_bytes(bytes(raw))
        assert load_data(changed, SCHEMA).identity != pop.identity
    else:
        raw[-5] ^= 1  # inside the footer length: flipping any byte changes the hash (the file may no longer parse)
        changed = tmp_path / "c.parquet"
        changed.write_bytes(bytes(raw))
        try:
            assert load_data(changed, SCHEMA).identity != pop.identity
        except ParameterError as exc:
            assert str(changed) in str(exc)
        # a changed value in a rewritten file
        data2 = data.copy()
        data2[0, 0] = 1 - data2[0, 0]
        other = write_parquet(tmp_path / "o.parquet", {n: data2[:, k] for k, n in enumerate(names)})
        assert load_data(other, SCHEMA).identity != pop.identity


def test_hand_built_population_checks_its_file(tmp_path):
    data = sample(10)
    path = write_csv(tmp_path / "d.csv", default_columns(SCHEMA), data)
    pop = load_data(path, SCHEMA)
    bare = DataPopulation(pop.path, pop.schema, pop.size, pop.identity, pop.columns, pop.format)
    assert bare == pop and np.array_equal(bare.records(2, 3), data[2:5])
    data[0, 0] = 1 - data[0, 0]
    write_csv(path, default_columns(SCHEMA), data)
    stale = DataPopulation(pop.path, pop.schema, pop.size, pop.identity, pop.columns, pop.format)
    assert "changed since it was loaded" in error_of(stale.records, 0, 1)
    assert np.array_equal(pop.records(0, 1), sample(10)[:1])  # a loaded CSV keeps the records it checked


def test_parquet_file_changed_after_load(tmp_path):
    data = sample(10)
    cols = {n: data[:, k] for k, n in enumerate(default_columns(SCHEMA))}
    path = write_parquet(tmp_path / "d.parquet", cols)
    pop = load_data(path, SCHEMA)
    write_parquet(path, {**cols, "extra": np.arange(10)})
    msg = error_of(pop.records, 0, 1)
    assert str(path) in msg and "changed since it was loaded" in msg


# ---------------------------------------------------------------------------- CSV errors


def test_csv_errors_name_file_row_line_and_column(tmp_path):
    def bad(rows, *args, **kwargs):
        path = write_csv(tmp_path / "bad.csv", ["a", "b", "y"], rows)
        return error_of(load_data, path, *args, **kwargs), str(path)

    declared = Schema((Field("a"), Field("b"), Field("y", 1, -1, 1, 2)))
    msg, path = bad([[0, 1, 1], [1, "1.5", -1]])
    assert msg == f"{path}, row 2 (line 3), column 'b': value '1.5' is not an integer"
    msg, path = bad([[0, 1, 1], [1, 0, 1], [1, "", -1]])
    assert msg.startswith(f"{path}, row 3 (line 4), column 'b': the cell is empty")
    msg, path = bad([[0, 1, 1], [1, 40000, -1]])
    assert msg == f"{path}, row 2 (line 3), column 'b': value 40000 is beyond the int16 range -32768..32767"
    msg, path = bad([[0, 1, 1], [1, 10**30, -1]])
    assert msg.startswith(f"{path}, row 2 (line 3), column 'b': value {10**30} is beyond the int16 range")
    msg, path = bad([[0, 1, 1], [1, 0, 0]], declared)
    assert msg == (
        f"{path}, row 2 (line 3), column 'y': value 0 is not allowed by field 'y' "
        "(low=-1, high=1, step=2: one of -1, 1)"
    )
    msg, path = bad([[0, 1, 1], [2, 0, 1]], declared)
    assert msg.startswith(f"{path}, row 2 (line 3), column 'a': value 2 is not allowed by field 'a' (low=0, high=1, step=1")
    wide = Schema((Field("a", 1, 0, 100, 5), Field("b"), Field("y", 1, -1, 1, 2)))
    msg, path = bad([[5, 1, 1], [7, 0, 1]], wide)
    assert msg.endswith("column 'a': value 7 is not allowed by field 'a' (low=0, high=100, step=5: 0..100 in steps of 5)")
    # the first offender in file order: earliest row, then leftmost column
    msg, path = bad([[0, 1, 1], [1, 0, "x"], [9, "z", 1]], declared)
    assert msg.startswith(f"{path}, row 2 (line 3), column 'y': value 'x'")
    msg, path = bad([[0, 1, 1], [1, "?", 5]], declared)
    assert msg.startswith(f"{path}, row 2 (line 3), column 'b'")
    # cells the records do not use are not checked
    assert load_data(write_csv(tmp_path / "ok.csv", ["a", "note"], [[1, "n/a"], [0, "1.5"]]), columns=["a"]).size == 2


def test_csv_missing_and_unusable_columns(tmp_path):
    path = write_csv(tmp_path / "d.csv", ["x_0", "x_1", "label"], [[0, 1, 1]])
    msg = error_of(load_data, path, SCHEMA)
    assert msg == f"{path}: column 'x_2' is missing; the file has columns ['x_0', 'x_1', 'label']"
    msg = error_of(load_data, path, columns=["x_0", "nope"])
    assert str(path) in msg and "'nope' is missing" in msg
    msg = error_of(load_data, path, SCHEMA, columns=["x_0", "x_1", "label"])
    assert "the schema has 4 column(s)" in msg
    spaced = write_csv(tmp_path / "s.csv", ["my col"], [[1]])
    msg = error_of(load_data, spaced)
    assert str(spaced) in msg and "'my col' cannot be a field name" in msg
    dup = write_csv(tmp_path / "dup.csv", ["a", "a"], [[1, 0]])
    assert "column 'a' appears 2 times" in error_of(load_data, dup)
    assert load_data(spaced, Schema((Field("v"),)), columns=["my col"]).records(0, 1).tolist() == [[1]]


def test_csv_line_numbers_follow_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(datafile, "_CHUNK_ROWS", 4)  # errors in later chunks keep global numbers
    lines = ["\n", "a,note\n"] + [f'{i % 2},"two\nlines"\n' if i == 2 else f"{i % 2},x\n" for i in range(12)]
    lines[2 + 9] = "1.25,x\n"
    path = tmp_path / "d.csv"
    path.write_text("".join(lines))
    msg = error_of(load_data, path, columns=["a"])
    # data row 10 is user 9; a blank first line and a two-line quoted cell put it on line 13
    assert msg == f"{path}, row 10 (line 13), column 'a': value '1.25' is not an integer"


def test_csv_malformed_files(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b\n1,0\n1\n")
    assert error_of(load_data, path) == f"{path}, row 2 (line 3): has 1 cell(s), the header has 2"
    path.write_text("a,b\n1,0\n\n1,1\n")
    assert error_of(load_data, path).startswith(f"{path}, line 3: a blank line between data rows")
    path.write_text("")
    assert error_of(load_data, path).startswith(f"{path}: the file is empty")
    path.write_text("a,b\n")
    assert error_of(load_data, path) == f"{path}: the file has a header but no data rows"
    path.write_bytes(b"a\n\xff\n")
    assert error_of(load_data, path).startswith(f"{path}: not UTF-8 text")
    path.write_text('a,b\n1,"0\n')
    assert error_of(load_data, path).startswith(f"{path}, line 2: malformed CSV")
    missing = tmp_path / "nope.csv"
    assert error_of(load_data, missing) == f"data file {str(missing)!r} does not exist"
    assert "is not a file" in error_of(load_data, tmp_path)


# ---------------------------------------------------------------------------- Parquet errors


def test_parquet_errors_name_file_row_and_column(tmp_path):
    def bad(cols, *args, row_group_size=3):
        path = write_parquet(tmp_path / "bad.parquet", cols, row_group_size)
        return error_of(load_data, path, *args), str(path)

    ok = np.array([0, 1, 0, 1, 1, 0, 1])
    msg, path = bad({"a": ok, "b": pa.array([1, 0, 1, 0, None, 1, 1])})
    assert msg.startswith(f"{path}, row 5, column 'b': the cell is empty (null)")
    msg, path = bad({"a": ok, "b": np.array([1, 0, 1, 0, 1, 0.5, 1])})
    assert msg == f"{path}, row 6, column 'b': value 0.5 is not an integer"
    msg, path = bad({"a": ok, "b": np.array([1, 0, 1, 0, 1, np.nan, 1])})
    assert msg == f"{path}, row 6, column 'b': value nan is not an integer"
    msg, path = bad({"a": ok, "b": np.array([1, 0, 1, 0, 1, 0, 70000])})
    assert msg == f"{path}, row 7, column 'b': value 70000 is beyond the int16 range -32768..32767"
    msg, path = bad({"a": ok, "b": pa.array([1, 0, 1, 0, 1, 0, 2**64 - 1], pa.uint64())})
    assert msg == f"{path}, row 7, column 'b': value {2**64 - 1} is beyond the int16 range -32768..32767"
    msg, path = bad({"a": ok, "b": pa.array(["1", "0", "1", "one", "1", "0", "1"])})
    assert msg == f"{path}, row 4, column 'b': value 'one' is not an integer"
    msg, path = bad({"a": ok, "b": pa.array([1.5] * 7)})
    assert msg == f"{path}, row 1, column 'b': value 1.5 is not an integer"
    msg, path = bad({"a": ok, "b": pa.array([b"\x01"] * 7)})
    assert msg.startswith(f"{path}, row 1, column 'b': value b'\\x01' is not an integer (the column holds binary)")
    declared = Schema((Field("a"), Field("b", 1, -1, 1, 2)))
    msg, path = bad({"a": ok, "b": np.array([1, -1, 1, 0, 1, -1, 1])}, declared)
    assert msg == f"{path}, row 4, column 'b': value 0 is not allowed by field 'b' (low=-1, high=1, step=2: one of -1, 1)"
    msg, path = bad({"a": np.array([0, 1, 0, 1, 2, 0, 1]), "b": np.array([1, -1, 1, 0, 1, -1, 1])}, declared)
    assert msg.startswith(f"{path}, row 4, column 'b'")  # earliest row across columns and row groups
    msg, path = bad({"a": ok}, declared)
    assert msg == f"{path}: column 'b' is missing; the file has columns ['a']"


def test_parquet_unreadable_and_without_pyarrow(tmp_path, monkeypatch):
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"this is not parquet at all")
    msg = error_of(load_data, junk)
    assert msg.startswith(f"{junk}: not a readable Parquet file")
    path = write_parquet(tmp_path / "d.parquet", {"y": np.array([-1, 1])})
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow → ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    msg = error_of(load_data, path)
    assert msg == f"{path}: reading Parquet needs pyarrow; install the parquet extra: pip install 'ldp-sim[parquet]'"
    assert load_data(write_csv(tmp_path / "d.csv", ["y"], [[1], [-1]])).size == 2  # CSV needs no pyarrow


# ---------------------------------------------------------------------------- schema files


def test_schema_file_errors(tmp_path):
    path = tmp_path / "s.json"
    cases = [
        ({"fields": [{"name": "x", "lenght": 3}]}, "schema field 'x': unknown key(s) ['lenght']"),
        ({"fields": [{"name": "x", "high": 1.5}]}, "schema field 'x': 'high' must be an integer, got 1.5"),
        ({"fields": [{"name": "x", "high": True}]}, "'high' must be an integer"),
        ({"fields": [{"length": 2}]}, 'schema field #1: needs a "name" string'),
        ({"fields": [{"name": "x", "length": 2, "columns": ["a"]}]}, '"columns" must be a list of 2 column name(s)'),
        ({"fields": [{"name": "x", "columns": ["a"]}, {"name": "y", "columns": ["a"]}]}, "column 'a' is used twice"),
        ({"fields": [{"name": "x", "low": 2, "high": 1}]}, "need -32768 ≤ low < high < 32768"),
        ({"fields": [{"name": "x"}, {"name": "x"}]}, "names must be unique"),
        ({"fields": []}, "at least one field"),
        ({"felds": []}, "unknown schema keys ['felds'] (format 1 has ['format', 'fields'])"),
        ({}, "the schema has no 'fields' key (format 1 needs ['fields'])"),
        ("x", "schema key 'fields' must be a list of field objects, got str"),
    ]
    for data, expected in cases:
        path.write_text(json.dumps(data))
        msg = error_of(read_schema_file, path)
        assert msg.startswith(f"{path}: ") and expected in msg, (data, msg)
        assert expected in error_of(schema_from_json, data)
    path.write_text('{"fields": [')
    assert error_of(read_schema_file, path).startswith(f"{path}: not valid JSON (line 1")
    csv_path = write_csv(tmp_path / "d.csv", ["x"], [[1]])
    path.write_text(json.dumps({"fields": [{"name": "x", "lenght": 3}]}))
    assert "unknown key(s) ['lenght']" in error_of(load_data, csv_path, path)
    assert "does not exist" in error_of(read_schema_file, tmp_path / "none.json")


def test_schema_json_defaults_and_default_columns():
    assert schema_from_json({"fields": [{"name": "z"}]}) == Schema((Field("z", 1, 0, 1, 1),))
    assert default_columns(SCHEMA) == ("x_0", "x_1", "x_2", "y")
    assert schema_from_json(SCHEMA_JSON) == SCHEMA
    assert schema_from_json(schema_to_json(SCHEMA)) == SCHEMA
    assert "columns" not in json.dumps(schema_to_json(SCHEMA))


# ---------------------------------------------------------------------------- I3: a served schema is declared

ONE_ROW = [[37, 1, 52]]  # the one-row file: an inferred schema is the whole record
FIVE_ROWS = [[37, 1, 51], [41, 2, 3], [29, 1, 27], [53, 2, 12], [43, 1, 30]]  # odd ages, incomes in multiples of 3


@pytest.mark.parametrize("rows", [ONE_ROW, FIVE_ROWS], ids=["one-row", "five-rows"])
def test_an_inferred_schema_serves_nobody(tmp_path, rows):
    """In process a practitioner may infer; every way towards an aggregator refuses it (I3)."""
    from ldp.local.shard import Shard
    from ldp.wire.client_config import ClientConfig

    path = write_csv(tmp_path / "d.csv", ["age", "kids", "income"], rows)
    inferred = load_data(path)
    assert not inferred.schema_declared and inferred.records(0, len(rows)).tolist() == rows  # usable here
    if rows is ONE_ROW:  # what would have left: 37..38, 1..2, 52..53
        assert [(f.low, f.high) for f in inferred.schema] == [(37, 38), (1, 2), (52, 53)]
    expected = datafile.undeclared_schema_message(path)
    assert "ldp-sim schema infer" in expected and "--schema schema.json" in expected and "\n" not in expected
    assert error_of(inferred.public_description) == expected
    assert error_of(inferred.require_declared_schema) == expected
    shard = Shard(inferred, 0, len(rows), budget=1.0)  # an in-process shard answers...
    assert error_of(shard.description).startswith(f"the data file {str(inferred.path)!r} has no declared schema")  # ...but describes nothing
    assert error_of(ClientConfig, data_path=str(path), budget=1.0) == datafile.undeclared_schema_message(str(path))

    draft = datafile.draft_schema(path)
    declared = load_data(path, draft.to_json())
    assert declared.schema_declared and declared.schema == draft.schema
    assert declared.public_description() == {"schema": draft.schema.to_json(), "size": len(rows)}
    assert Shard(declared, 0, len(rows), budget=1.0).description().to_json() == {"size": len(rows), "schema": draft.schema.to_json()}
    # The draft copies no column's min, max or step: no field equals the exact inference.
    assert not any(d == e for d, e in zip(draft.schema, inferred.schema))
    # Broken variant the comparison catches: the inferred schema, described.
    assert all(d == e for d, e in zip(inferred.schema, infer_schema(path)))


def test_draft_schema_reports_the_values_and_drafts_a_ladder(tmp_path):
    path = write_csv(tmp_path / "d.csv", ["age", "kids", "income"], FIVE_ROWS)
    draft = datafile.draft_schema(path)
    assert draft.rows == 5 and draft.columns == ("age", "kids", "income") and draft.path == path.resolve()
    assert draft.observed == (
        datafile.ColumnRange("age", 29, 53, 2),  # what the user reviews: all ages odd...
        datafile.ColumnRange("kids", 1, 2, 1),
        datafile.ColumnRange("income", 3, 51, 3),  # ...incomes in multiples of 3
    )
    assert [(f.name, f.length, f.low, f.high, f.step) for f in draft.schema] == [
        ("age", 1, 0, 63, 1), ("kids", 1, 0, 3, 1), ("income", 1, 0, 63, 1),  # what the aggregator would see
    ]
    assert parse_schema_json(json.loads(draft.text())) == (draft.schema, draft.columns)
    assert draft.text().count("\n") == 5  # one field per line
    # columns= picks and orders
    assert [f.name for f in datafile.draft_schema(path, ["income", "age"]).schema] == ["income", "age"]
    wide = write_parquet(tmp_path / "d.parquet", {"neg": np.array([-5, 3, 0]), "top": np.array([0, 32767, 1])})
    assert [(f.low, f.high) for f in datafile.draft_schema(wide).schema] == [(-7, 7), (0, 32767)]
    # a column of numbers with one word is a mistake, not a category: the word is named
    mixed = write_csv(tmp_path / "bad.csv", ["a"], [[1], ["x"], [2]])
    assert error_of(datafile.draft_schema, mixed) == f"{mixed}, row 2 (line 3), column 'a': value 'x' is not an integer"


def test_draft_range_depends_on_the_magnitude_only():
    """Property over every int16 pair (sampled, seeded): the draft holds the values, has the
    ladder form, and two columns of the same sign and bit length get the same draft."""
    rng = np.random.default_rng(7)
    lows = rng.integers(-(2**15), 2**15, 20_000)
    highs = np.minimum(lows + rng.integers(0, 2**16, 20_000), 2**15 - 1)
    for low, high in zip(lows.tolist(), highs.tolist()):
        a, b = datafile.draft_range(low, high)
        assert a <= low <= high <= b
        assert b == min(2 ** b.bit_length() - 1, 2**15 - 1) and b >= 1
        assert a == 0 if low >= 0 else a in (-b, -(2**15))
        magnitude = (high if low >= 0 else max(-low, high)).bit_length()
        same = (0, max(1, 2 ** (magnitude - 1))) if low >= 0 else (-max(1, 2 ** (magnitude - 1)), 0)
        assert datafile.draft_range(*same) == (a, b)
    assert [datafile.draft_range(*r) for r in [(0, 0), (1, 1), (-1, 1), (-32768, 32767), (32767, 32767), (-32768, -32768)]] == [
        (0, 1), (0, 1), (-1, 1), (-32768, 32767), (0, 32767), (-32768, 32767)
    ]


# ---------------------------------------------------------------------------- schema files: the format key (issue 23, I6)

FORMAT_CASES = [  # the schema file as another version or a hand edit might have it → the refusal, naming the key
    ({"format": 2, "fields": SCHEMA_JSON["fields"]}, "schema key 'format' is 2; this version of ldp reads format 1 (write it again with this version's `ldp-sim schema infer FILE`"),
    ({"format": "1", "fields": SCHEMA_JSON["fields"]}, "schema key 'format' is '1'; this version of ldp reads format 1"),
    ({"format": True, "fields": SCHEMA_JSON["fields"]}, "schema key 'format' is True"),
    ({"format": 1.0, "fields": SCHEMA_JSON["fields"]}, "schema key 'format' is 1.0"),
    ({"format": None, "fields": SCHEMA_JSON["fields"]}, "schema key 'format' is None"),
    ({"format": 1}, "the schema has no 'fields' key (format 1 needs ['format', 'fields'])"),
    ({"format": 1, "fields": SCHEMA_JSON["fields"], "colour": "blue"}, "unknown schema keys ['colour'] (format 1 has ['format', 'fields'])"),
    ({"fields": SCHEMA_JSON["fields"], "colour": "blue"}, "unknown schema keys ['colour']"),  # unversioned: unknown keys refused too
    ({"format": 1, "fields": {"x": 1}}, "schema key 'fields' must be a list of field objects, got dict"),
    ({"format": 1, "fields": [{"name": "x", "low": "0"}]}, "schema field 'x': 'low' must be an integer, got '0'"),
]


@pytest.mark.parametrize("data, expected", FORMAT_CASES, ids=[e[:40] for _, e in FORMAT_CASES])
def test_a_schema_file_of_another_format_is_refused_naming_the_key(tmp_path, data, expected):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    msg = error_of(read_schema_file, path)
    assert msg.startswith(f"{path}: ") and expected in msg, msg
    assert expected in error_of(parse_schema_json, data)
    csv_path = write_csv(tmp_path / "d.csv", ["x_0", "x_1", "x_2", "y"], sample(4).tolist())
    assert expected in error_of(load_data, csv_path, path)  # what `clients --data F --schema S` reads


def test_a_schema_file_written_before_format_1_is_still_read_with_the_same_identity(tmp_path):
    """Deliberate backward compatibility (as PopulationSpec does): a schema file without "format"
    ({"fields": [...]}, or the bare list Schema.to_json writes) is the unversioned layout and is
    read as before; the population it declares keeps its identity, so its users' ledgers go on."""
    csv_path = write_csv(tmp_path / "d.csv", ["x_0", "x_1", "x_2", "y"], sample(20).tolist())
    written = schema_to_json(SCHEMA)
    assert written["format"] == 1 and parse_schema_json(written) == (SCHEMA, default_columns(SCHEMA))
    versions = {"format 1": written, "no format": {"fields": written["fields"]}, "bare list": SCHEMA.to_json()}
    identities = set()
    for name, data in versions.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        pop = load_data(csv_path, path)
        assert pop.schema == SCHEMA, name
        identities.add(pop.identity)
    assert len(identities) == 1


def test_every_schema_writer_writes_format_1(tmp_path):
    """schema_to_json, the draft `ldp-sim schema infer` prints, and the shipped penguins schema."""
    from simulations import real_data

    csv_path = write_csv(tmp_path / "d.csv", ["a", "b"], [[37, 1], [2, 0]])
    draft = datafile.draft_schema(csv_path)
    assert json.loads(draft.text())["format"] == 1 and draft.to_json()["format"] == 1
    assert parse_schema_json(json.loads(draft.text()))[0] == draft.schema
    shipped = json.loads((real_data.DATA_DIR / "penguins.schema.json").read_text())
    assert shipped["format"] == datafile.SCHEMA_FORMAT == 1


def test_the_format_check_is_what_refuses(monkeypatch):
    """Broken variant: a reader that ignores "format" (read_format returning None) accepts a
    format-2 file, and the refusal above is gone; with the check back it is refused again."""
    future = {"format": 2, "fields": SCHEMA_JSON["fields"]}
    from ldp.core import file_format

    monkeypatch.setattr(file_format, "read_format", lambda data, **kw: None)
    assert parse_schema_json(future)[0] == SCHEMA  # the broken reader takes another version's file
    monkeypatch.undo()
    assert "schema key 'format' is 2" in error_of(parse_schema_json, future)


SCHEMA_LIST_CASES = [  # Schema.from_json: the public description's list (the wire), never a builtin error
    (None, "a schema is a list of field objects, got NoneType"),
    ({"fields": []}, "a schema is a list of field objects, got dict"),
    (["x"], "schema field #1 must be an object"),
    ([{"name": "x", "lenght": 2}], "schema field #1: unknown keys ['lenght']"),
    ([{"low": 0}], "schema field #1 has no 'name' key"),
    ([{"name": 5}], "field name must be an identifier, got 5"),
    ([{"name": "x", "high": "1"}], "field 'x': high must be an integer, got '1'"),
    ([{"name": "x", "length": 1.0}], "field 'x': length must be an integer, got 1.0"),
]


@pytest.mark.parametrize("data, expected", SCHEMA_LIST_CASES, ids=[e[:40] for _, e in SCHEMA_LIST_CASES])
def test_schema_from_json_refuses_with_one_line(data, expected):
    assert expected in error_of(Schema.from_json, data)
    assert Schema.from_json(SCHEMA.to_json()) == SCHEMA


# ---------------------------------------------------------------------------- lazy: a shard's rows only (issue 25)

LAZY_SCHEMA = {"fields": [{"name": "a", "low": 0, "high": 9}, {"name": "s", "type": "category", "categories": ["p", "q"], "missing": "category"}]}


def _lazy_files(tmp_path):
    """The same 7 users written as CSV in the ways a row may end, and as Parquet in row groups."""
    a = [3, 1, 4, 1, 5, 9, 2]
    s = ["p", "q", "", " q ", "p", "", "q"]
    body = [f"{x},{y}" for x, y in zip(a, s)]
    files = {
        "lf.csv": "a,s\n" + "\n".join(body) + "\n",
        "crlf.csv": "a,s\r\n" + "\r\n".join(body) + "\r\n",
        "bom_no_final_lf.csv": "\ufeffa,s\n" + "\n".join(body),
        "blank_lines_around.csv": "\n\n a , s \n" + "\n".join(body) + "\n\n\r\n",
        "quoted_header.csv": '"a","s\nt"\n' + "\n".join(body) + "\n",  # the header spans two lines
        "quoted_cells.csv": "a,s\n" + "\n".join(f'{x},"{y}"' for x, y in zip(a, s)) + "\n",  # parsed whole
        "lone_cr.csv": "a,s\r" + "\r".join(body) + "\r",  # parsed whole
    }
    paths = []
    for name, text in files.items():
        (tmp_path / name).write_bytes(text.encode("utf-8"))
        paths.append(tmp_path / name)
    write_parquet(tmp_path / "groups.parquet", {"a": a, "s": pa.array([None if v == "" else v for v in s])}, row_group_size=3)
    return [*paths, tmp_path / "groups.parquet"]


def test_lazy_loading_reads_every_slice_as_the_whole_file_does(tmp_path):
    for path in _lazy_files(tmp_path):
        columns = ["a", "s\nt"] if path.name == "quoted_header.csv" else None
        whole = load_data(path, LAZY_SCHEMA, columns=columns, served=True)
        lazy = load_data(path, LAZY_SCHEMA, columns=columns, served=True, lazy=True)
        assert (lazy.size, lazy.identity) == (whole.size, whole.identity) == (7, whole.identity), path.name
        all_rows = whole.records(0, 7)
        for first in range(7):
            for count in range(7 - first + 1):
                assert np.array_equal(lazy.records(first, count), all_rows[first : first + count]), (path.name, first, count)


def test_lazy_loading_caught_a_layout_one_row_off(tmp_path, monkeypatch):
    """Broken variant: row offsets one row late (the first row skipped) fail the comparison."""
    real = datafile._csv_layout

    def late(*args):
        found = real(*args)
        if found is None:  # a file parsed whole
            return None
        meta, layout = found
        starts = np.append(layout.starts[1:], layout.starts[-1])
        return meta, datafile._CsvLayout(layout.header_lines, layout.width, layout.index, starts)

    monkeypatch.setattr(datafile, "_csv_layout", late)
    with pytest.raises(AssertionError):
        test_lazy_loading_reads_every_slice_as_the_whole_file_does(tmp_path)


def test_lazy_loading_checks_only_the_rows_read_with_the_same_errors(tmp_path):
    """Each client checks its own rows: a bad cell (row 5) or a short row (row 6) outside the
    slice is not read; inside it, the error is the whole file's, word for word."""
    for name, bad, expected in (
        ("cell.csv", "11,p", "row 5 (line 6), column 'a': the value is not allowed by field 'a'"),
        ("short.csv", "5", "row 5 (line 6): has 1 cell(s), the header has 2"),
    ):
        path = tmp_path / name
        path.write_text(f"a,s\n1,p\n2,q\n3,p\n4,q\n{bad}\n6,q\n")
        whole = error_of(load_data, path, LAZY_SCHEMA, served=True)
        assert whole.startswith(f"{path}, {expected}") and "11" not in whole.replace(str(path), ""), whole
        lazy = load_data(path, LAZY_SCHEMA, served=True, lazy=True)
        assert lazy.size == 6 and lazy.records(0, 4).ravel().tolist() == [1, 0, 2, 1, 3, 0, 4, 1]
        assert lazy.records(5, 1).ravel().tolist() == [6, 1]
        assert error_of(lazy.records, 2, 3) == error_of(lazy.records, 4, 1) == whole
    assert "lazy" in error_of(lazy.missing_counts)


def test_lazy_loading_still_refuses_what_the_whole_file_decides(tmp_path):
    """A blank line between rows, a byte that is not UTF-8, no rows, a missing column: at load."""
    cases = {
        "blank.csv": b"a,s\n1,p\n\n2,q\n",
        "latin1.csv": b"a,s\n1,p\n2,q\xe9\n",
        "empty.csv": b"a,s\n\n\n",
        "column.csv": b"a,t\n1,p\n",
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        expected = error_of(load_data, tmp_path / name, LAZY_SCHEMA, served=True)
        assert error_of(load_data, tmp_path / name, LAZY_SCHEMA, served=True, lazy=True) == expected, name


def test_a_lazy_file_changed_after_loading_is_refused(tmp_path):
    path = write_csv(tmp_path / "d.csv", ["a", "s"], [[1, "p"], [2, "q"]])
    lazy = load_data(path, LAZY_SCHEMA, served=True, lazy=True)
    write_csv(path, ["a", "s"], [[1, "p"], [2, "q"], [3, "p"]])
    assert "changed since it was loaded" in error_of(lazy.records, 0, 2)


def test_a_client_process_reads_only_its_shards_rows(tmp_path):
    """``ClientConfig.from_json`` (a client process) loads lazily; a config built in the launcher
    (``ldp-sim clients``' own check of the file) reads every row."""
    from ldp.wire.client_config import ClientConfig

    path = tmp_path / "d.csv"
    path.write_text("a,s\n1,p\n11,q\n")
    (tmp_path / "s.json").write_text(json.dumps(LAZY_SCHEMA))
    built = ClientConfig(data_path=str(path), schema_path=str(tmp_path / "s.json"), budget=1.0)
    assert "row 2 (line 3)" in error_of(built.holdings)
    child = ClientConfig.loads(built.dumps())
    assert child.shard_rows_only and not built.shard_rows_only and child == built
    data = child.holdings()
    assert data.size == 2 and data.records(0, 1).ravel().tolist() == [1, 0]
    assert "row 2 (line 3)" in error_of(data.records, 1, 1)
