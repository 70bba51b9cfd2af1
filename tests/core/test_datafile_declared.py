"""Declared data, and the file as the user has it (issue 25): typed schema fields, CSV and
Parquet read alike, missing values, errors that never quote a served file's cells.

The messy file is written here, as someone else would have it: a header with spaces around its
names, a Unicode column name that is not an identifier, a string category column with stray
spaces, empty cells in three columns, 10^6 rows, and a Parquet twin (dictionary-encoded labels,
nulls, NaN, a trailing space in one column name). Both read into the same records. Broken
variants: a Parquet reader that keeps the header names as stored (the behaviour before this
issue) loses the twin's columns; a reader that quotes a served file's values is caught by the
no-value check; a "drop" that removed rows would change the public description.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ldp.core import datafile
from ldp.core.datafile import DataPopulation, load_data
from ldp.core.datafile_schema import MAX_CODES, MISSING_LABEL, ColumnSpec, parse_declaration
from ldp.core.errors import LDPError, ParameterError
from ldp.core.schema import Field
from tests.messy_data import LABELS, messy_columns, write_messy_csv, write_messy_parquet
from tests.waits import PROCESS_WAIT_S

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

MESSY_SCHEMA = {"format": 1, "fields": [
    {"name": "species", "type": "category", "categories": LABELS, "missing": "category", "columns": [" species "]},
    {"name": "mass", "type": "float", "low": 2.5, "high": 6.5, "resolution": 0.01, "missing": "drop", "columns": ["Körpermasse (g)"]},
    {"name": "age", "low": 0, "high": 120, "missing": "category"},
    {"name": "income", "low": 0, "high": 5_000_000, "step": 1000, "out_of_range": "clip"},
]}


def error_of(fn, *args, **kwargs):
    with pytest.raises(ParameterError) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg and isinstance(info.value, LDPError)
    return msg


def expected_records(cols) -> np.ndarray:
    """The records the declaration defines, computed independently of the reader."""
    sp = cols["code"]
    mass = np.where(np.isnan(cols["mass"]), 401, np.rint((np.nan_to_num(cols["mass"]) - 2.5) / 0.01))
    age = np.where(np.isnan(cols["age"]), 121, np.nan_to_num(cols["age"]))
    income = np.minimum(cols["income"], 5_000_000) // 1000
    return np.column_stack([sp, mass, age, income]).astype(np.int16)


@pytest.fixture(scope="module")
def million(tmp_path_factory):
    folder = tmp_path_factory.mktemp("million")
    cols = messy_columns(10**6)
    write_messy_csv(folder / "messy.csv", cols)
    write_messy_parquet(folder / "messy.parquet", cols, row_group_size=250_000)
    (folder / "schema.json").write_text(json.dumps(MESSY_SCHEMA, ensure_ascii=False), encoding="utf-8")
    return folder, cols


def test_a_messy_million_row_file_and_its_parquet_twin_read_alike(million):
    folder, cols = million
    a = load_data(folder / "messy.csv", folder / "schema.json")
    b = load_data(folder / "messy.parquet", folder / "schema.json")
    assert a.size == b.size == 10**6
    records = a.records(0, a.size)
    assert np.array_equal(records, b.records(0, b.size))
    assert np.array_equal(records, expected_records(cols))
    assert a.schema == b.schema and a.public_description() == b.public_description()
    assert [(f.name, f.low, f.high) for f in a.schema] == [("species", 0, 3), ("mass", 0, 401), ("age", 0, 121), ("income", 0, 5000)]
    missing = {"species": int((cols["code"] == 3).sum()), "Körpermasse (g)": int(np.isnan(cols["mass"]).sum()),
               "age": int(np.isnan(cols["age"]).sum()), "income": 0}
    assert a.missing_counts() == b.missing_counts() == missing
    assert a.labels("species") == (*LABELS, MISSING_LABEL) and a.labels("mass") is None
    assert a.values("mass")[0] == 2.5 and a.values("mass")[400] == 6.5 and np.isnan(a.values("mass")[401])
    assert a.columns == b.columns == ("species", "Körpermasse (g)", "age", "income")
    assert b.records(249_990, 20).tolist() == records[249_990:250_010].tolist()  # across a row group


def test_broken_variant_a_parquet_reader_that_keeps_names_as_stored_loses_the_twin(tmp_path, monkeypatch):
    """Before this issue Parquet names were not stripped: the same schema could not read the twin."""
    cols = messy_columns(50)
    write_messy_parquet(tmp_path / "t.parquet", cols)
    assert load_data(tmp_path / "t.parquet", MESSY_SCHEMA).size == 50
    monkeypatch.setattr(datafile, "_parquet_names", lambda pf: (list(pf.schema_arrow.names), list(pf.schema_arrow.names)))
    assert "column 'Körpermasse (g)' is missing" in error_of(load_data, tmp_path / "t.parquet", MESSY_SCHEMA)


def test_unicode_names_compare_in_nfc(tmp_path):
    decomposed = "Ko\u0308rper"  # "Körper" with a combining diaeresis
    (tmp_path / "u.csv").write_text(f"{decomposed}\n1\n0\n", encoding="utf-8")
    data = load_data(tmp_path / "u.csv", {"fields": [{"name": "k", "columns": ["Körper"]}]})
    assert data.records(0, 2).ravel().tolist() == [1, 0]


# ---------------------------------------------------------------------------- typed fields


def test_integers_of_any_width_are_stored_as_their_index(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text("ts\n1700000000000\n1700000003000\n1700000001000\n")
    schema = {"fields": [{"name": "ts", "low": 1_700_000_000_000, "high": 1_700_000_010_000, "step": 1000}]}
    data = load_data(path, schema)
    assert data.schema.field("ts") == Field("ts", 1, 0, 10, 1)
    assert data.records(0, 3).ravel().tolist() == [0, 3, 1]
    assert data.values("ts")[3] == 1_700_000_003_000
    pq.write_table(pa.table({"ts": pa.array([1_700_000_000_000, 1_700_000_003_000, 1_700_000_001_000], pa.uint64())}), tmp_path / "w.parquet")
    assert load_data(tmp_path / "w.parquet", schema).records(0, 3).tolist() == data.records(0, 3).tolist()
    too_wide = {"fields": [{"name": "ts", "low": 0, "high": 10**12}]}
    msg = error_of(load_data, path, too_wide)
    assert "a record holds at most 32768 per column" in msg and "declare a step of at least" in msg
    assert "10**12" not in msg and f"{MAX_CODES}" in msg


def test_a_plain_schema_keeps_its_values_and_identity(tmp_path):
    """Fields with only the keys of before are stored as values; the identity hashes nothing new."""
    path = tmp_path / "p.csv"
    path.write_text("x,y\n1,-1\n0,1\n")
    plain = load_data(path, {"fields": [{"name": "x"}, {"name": "y", "low": -1, "high": 1, "step": 2}]})
    assert plain.specs == () and plain.records(0, 2).tolist() == [[1, -1], [0, 1]]
    typed = load_data(path, {"fields": [{"name": "x", "out_of_range": "clip"}, {"name": "y", "low": -1, "high": 1, "step": 2}]})
    assert typed.schema == plain.schema and typed.identity != plain.identity  # another declaration, another ledger


def test_floats_round_to_the_grid_and_clip_or_refuse(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text("v\n0.04\n0.05\n0.96\n-3\n7.5\ninf\n")
    clip = {"fields": [{"name": "v", "type": "float", "low": 0, "high": 1, "resolution": 0.1, "out_of_range": "clip"}]}
    assert load_data(path, clip).records(0, 6).ravel().tolist() == [0, 0, 10, 0, 10, 10]  # 0.05 → 0.0 (ties to even)
    refuse = {"fields": [{"name": "v", "type": "float", "low": 0, "high": 1, "resolution": 0.1}]}
    msg = error_of(load_data, path, refuse)
    assert msg == (f"{path}, row 4 (line 5), column 'v': value -3.0 is not a number in 0..1 (field 'v', resolution 0.1) "
                   "(a schema may declare \"out_of_range\": \"clip\")")


def test_missing_values_refuse_category_or_drop_and_drop_keeps_the_user_count(tmp_path):
    """I3: "drop" keeps every row a user, so the public description does not depend on which
    cells are missing. Broken variant: a drop that removed rows changes what the aggregator reads."""
    rows_a = ["3", "", "5", "", "7"]
    rows_b = ["3", "4", "5", "6", ""]  # one empty cell instead of two
    descriptions = []
    for rows, name in ((rows_a, "a"), (rows_b, "b")):
        path = tmp_path / f"{name}.csv"
        path.write_text("age,k\n" + "".join(f"{r},1\n" for r in rows))
        assert error_of(load_data, path, {"fields": [{"name": "age", "high": 9}]}, columns=["age"]).startswith(f"{path}, row {rows.index('') + 1} (line {rows.index('') + 2}), column 'age': the cell is empty")
        data = load_data(path, {"fields": [{"name": "age", "high": 9, "missing": "drop"}], "format": 1}, columns=["age"])
        assert data.size == 5 and data.missing_counts() == {"age": rows.count("")}
        assert data.records(0, 5).ravel().tolist() == [int(r) if r else 10 for r in rows]  # slot 10
        descriptions.append(data.public_description())
    assert descriptions[0] == descriptions[1]
    dropped = [{"schema": d["schema"], "size": 5 - rows.count("")} for d, rows in zip(descriptions, (rows_a, rows_b))]
    assert dropped[0] != dropped[1]  # the broken variant: the count of missing cells would leave


def test_categories_as_text_from_any_parquet_type(tmp_path):
    pq.write_table(pa.table({"code": pa.array([1, 2, None, 1], pa.int32())}), tmp_path / "c.parquet")
    schema = {"fields": [{"name": "code", "type": "category", "categories": ["1", "2"], "missing": "category"}]}
    data = load_data(tmp_path / "c.parquet", schema)
    assert data.records(0, 4).ravel().tolist() == [0, 1, 2, 0] and data.labels("code") == ("1", "2", MISSING_LABEL)


def test_inference_reads_a_text_column_as_categories(tmp_path):
    path = tmp_path / "i.csv"
    path.write_text("island,x\nDream,1\nBiscoe,0\nDream,1\n")
    data = load_data(path)
    assert not data.schema_declared and data.labels("island") == ("Biscoe", "Dream")
    assert data.records(0, 3).tolist() == [[1, 1], [0, 0], [1, 1]]


def test_declarations_round_trip_through_the_schema_file():
    declared = parse_declaration(MESSY_SCHEMA)
    again = parse_declaration(json.loads(json.dumps(declared.to_json())))
    assert again == declared and not declared.plain
    assert declared.spec("mass") == ColumnSpec("mass", "float", 2.5, 6.5, 0.01, missing="drop")


# ---------------------------------------------------------------------------- a served file's errors never quote a cell

SERVED_CASES = [  # (file name, file text or Parquet columns, schema fields, what the message says, the value that must not leak)
    ("i.csv", "a\n1\n1.5\n", [{"name": "a"}], "row 2 (line 3), column 'a': the cell is not an integer", "1.5"),
    ("r.csv", "a\n1\n7\n", [{"name": "a"}], "row 2 (line 3), column 'a': the value is not allowed by field 'a'", "7"),
    ("g.csv", "a\n0\n33\n", [{"name": "a", "high": 40, "step": 20}], "the value is not allowed by field 'a' (low=0, high=40, step=20", "33"),
    ("b.csv", "a\n1\n" + "9" * 30 + "\n", [{"name": "a"}], "row 2 (line 3), column 'a': the value is not allowed", "9" * 30),
    ("c.csv", "s\nAdelie\nAdelei\n", [{"name": "s", "type": "category", "categories": LABELS}],
     "column 's': the cell is not one of the 3 categories of field 's': 'Adelie', 'Chinstrap', 'Gentoo'", "Adelei"),
    ("f.csv", "v\n0.5\nabc\n", [{"name": "v", "type": "float", "high": 1, "resolution": 0.5}], "the cell is not a number", "abc"),
    ("o.csv", "v\n0.5\n12.25\n", [{"name": "v", "type": "float", "high": 1, "resolution": 0.5}], "the value is not a number in 0..1", "12.25"),
    ("p.parquet", {"a": [1, 0, 42]}, [{"name": "a"}], "row 3, column 'a': the value is not allowed", "42"),
    ("q.parquet", {"a": [0.0, 2.5]}, [{"name": "a", "high": 3}], "row 2, column 'a': the cell is not an integer", "2.5"),
    ("s.parquet", {"s": ["Gentoo", "Gentooo"]}, [{"name": "s", "type": "category", "categories": LABELS}], "row 2, column 's': the cell is not one of", "Gentooo"),
    ("t.parquet", {"a": [b"\x01secret"]}, [{"name": "a"}], "row 1, column 'a': the cell is not an integer (the column holds binary)", "secret"),
]


@pytest.mark.parametrize("name, content, fields, says, value", SERVED_CASES, ids=[c[0] for c in SERVED_CASES])
def test_a_served_file_error_names_the_cell_never_its_value(tmp_path, name, content, fields, says, value):
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content)
    else:
        pq.write_table(pa.table(content), path)
    schema = {"format": 1, "fields": fields}
    served = error_of(load_data, path, schema, served=True)
    assert served.startswith(f"{path}, row ") and says in served and value not in served.removeprefix(str(path)), served
    # Broken variant: the same reader for this process only (served=False) quotes the value,
    # and the check above would catch it.
    local = error_of(load_data, path, schema)
    assert value in local.removeprefix(str(path)), local


def test_a_hand_built_served_population_rereads_without_quoting(tmp_path):
    path = tmp_path / "h.parquet"
    pq.write_table(pa.table({"a": [1, 0, 1]}), path)
    data = load_data(path, {"fields": [{"name": "a"}]}, served=True)
    hand = DataPopulation(data.path, data.schema, data.size, data.identity, data.columns, data.format, served=True)
    assert hand.records(0, 3).ravel().tolist() == [1, 0, 1] and hand.served


# ---------------------------------------------------------------------------- the draft, through the real command


def test_schema_infer_drafts_every_kind_and_says_what_it_copied(tmp_path):
    """`ldp-sim schema infer` on the messy file: a category listing the labels found (and the
    note says they were copied from the file), a float grid for the masses, the Unicode column
    listed in "columns", "missing": "category" where cells are empty; declared as drafted, the
    CSV and its Parquet twin read alike."""
    import subprocess
    import sys
    from pathlib import Path

    cols = messy_columns(2000, seed=3)
    write_messy_csv(tmp_path / "m.csv", cols)
    write_messy_parquet(tmp_path / "m.parquet", cols)
    ldp_sim = str(Path(sys.executable).parent / "ldp-sim")
    proc = subprocess.run([ldp_sim, "schema", "infer", str(tmp_path / "m.csv"), "--out", str(tmp_path / "s.json")], capture_output=True, timeout=PROCESS_WAIT_S)
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert "LISTING THEM (copied from your file: keep only public labels)" in err
    fields = {f["name"]: f for f in json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))["fields"]}
    assert fields["species"] == {"name": "species", "length": 1, "type": "category", "categories": LABELS, "missing": "category"}
    mass = fields["Körpermasse_g"]
    assert mass["type"] == "float" and (mass["low"], mass["high"], mass["resolution"]) == (0.0, 8.0, 0.001)
    assert mass["columns"] == ["Körpermasse (g)"] and mass["missing"] == "category"
    assert fields["age"] == {"name": "age", "length": 1, "low": 0, "high": 127, "step": 1, "missing": "category"}
    assert fields["income"] == {"name": "income", "length": 1, "type": "float", "low": 0, "high": 8389000, "resolution": 1000}
    a = load_data(tmp_path / "m.csv", tmp_path / "s.json")
    b = load_data(tmp_path / "m.parquet", tmp_path / "s.json")
    assert np.array_equal(a.records(0, a.size), b.records(0, b.size)) and a.missing_counts() == b.missing_counts()
    # the draft copies no numeric extreme: 0..127 and 0..8 hold ages 0..99 and masses 2.7..6.3
    assert (fields["age"]["high"], mass["high"]) != (int(np.nanmax(cols["age"])), float(np.nanmax(cols["mass"])))


def test_an_integer_column_written_as_floats_reads_as_its_parquet_twin(tmp_path):
    """pandas writes an integer column with gaps as 3.0, "", 5.0 (CSV) or float64 with NaN
    (Parquet): both read as the integers; a fraction is still refused, naming the cell as written."""
    (tmp_path / "p.csv").write_text("n,k\n3.0,1\n,1\n5.0,1\n")
    pq.write_table(pa.table({"n": [3.0, float("nan"), 5.0]}), tmp_path / "p.parquet")
    schema = {"fields": [{"name": "n", "high": 9, "missing": "category"}]}
    csv_records = load_data(tmp_path / "p.csv", schema, columns=["n"]).records(0, 3)
    assert csv_records.ravel().tolist() == [3, 10, 5]
    assert load_data(tmp_path / "p.parquet", schema).records(0, 3).tolist() == csv_records.tolist()
    (tmp_path / "q.csv").write_text("n\n3.0\n2.5\n")
    assert error_of(load_data, tmp_path / "q.csv").endswith("row 2 (line 3), column 'n': value '2.5' is not an integer")
