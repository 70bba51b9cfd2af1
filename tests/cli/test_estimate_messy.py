"""A messy file someone else wrote, end to end, through the command and through the API (issue 25).

The file (``tests.messy_data``): 10^6 rows, a header with spaces around its names, a Unicode
column name (``Körpermasse (g)``), a string category column with stray spaces, empty cells, and a
Parquet twin. It is written once per module; its schema is drafted by ``ldp-sim schema infer`` run
as a real process, then reviewed in the test as a user would (a coarser mass grid, wider ranges,
a missing-value policy per column). Then ``ldp-sim estimate`` runs as a real process:

- the species (string categories, 2 % empty) with ``"missing": "category"`` and ``"drop"``, the
  Unicode-named mass (``"drop"``) as frequencies, and the income (a wide integer drafted as a
  float grid, clipped) as a mean, each with ``--truth``: every estimate is within 4 sd of the
  truth. False-alarm rate: the run is seeded (deterministic); for an unlucky seed the chance of a
  false alarm is at most 2·(1 − Φ(4)) = 6.3e-5 per row, under 2e-3 over the ~28 rows checked;
- CSV and Parquet give bit-identical estimates for the same seed, and ``--processes 2`` the same
  as in process;
- the API on the column as a user reads it (pyarrow) gives the same estimates, bit for bit, where
  documented: the API refuses empty cells and says to map them to a category of their own
  (``ldp.core.column``), so a user fills them with the file's missing label; ``"drop"`` is the
  same records with the missing row left out (post-processing), so its rows are the API's first
  three. A mean on the Unicode column is refused by both, one line each: it has empty cells, and
  a mean over the users with a value is not offered (documented in ``estimate._linear_values``).

Broken variants caught: a "drop" that removed the users with an empty cell (frequencies among the
users with a value) is more than 4 sd off; intervals from a variance 100× too small miss the truth.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ldp
from ldp.core.datafile_schema import MISSING_LABEL
from tests.messy_data import LABELS, MASS_COLUMN, messy_columns, write_messy_csv, write_messy_parquet

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")
pq = pytest.importorskip("pyarrow.parquet")

pytestmark = pytest.mark.timeout(300)

LDP_SIM = str(Path(sys.executable).with_name("ldp-sim"))
N = 10**6
REACH = 4.0  # sd: see the module docstring's false-alarm rate
PROCESS_WAIT_S = 180.0  # each command's deadline: 10^6 rows read and randomized, on a busy 2-core box


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([LDP_SIM, *args], cwd=cwd, capture_output=True, text=True, encoding="utf-8", timeout=PROCESS_WAIT_S, env=env)


def _schema(draft: dict[str, Any], **edits: dict[str, Any]) -> dict[str, Any]:
    """The draft with some fields' keys replaced (the user's review)."""
    fields = [{**f, **edits.get(f["name"], {})} for f in draft["fields"]]
    return {**draft, "fields": fields}


@pytest.fixture(scope="module")
def messy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The 10^6-row CSV and its Parquet twin, the drafted schema and the reviewed ones."""
    d = tmp_path_factory.mktemp("messy")
    cols = messy_columns(N)
    write_messy_csv(d / "messy.csv", cols)
    write_messy_parquet(d / "messy.parquet", cols, row_group_size=250_000)
    done = _run(["schema", "infer", "messy.csv", "--out", "draft.json"], d)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    draft = json.loads((d / "draft.json").read_text(encoding="utf-8"))
    names = [f["name"] for f in draft["fields"]]
    assert names == ["species", "Körpermasse_g", "age", "income"], names  # the Unicode name kept, made an identifier
    assert draft["fields"][1]["columns"] == [MASS_COLUMN] and draft["fields"][0]["missing"] == "category"
    # The review: a public mass grid of 0.5 kg over 0..8 (a histogram, not 8001 draft values),
    # ages 0..120, incomes up to 10,000,000 clipped; empty species cells a category of their own
    # (reviewed.json) or dropped (dropped.json); empty masses dropped.
    review = {
        "Körpermasse_g": {"low": 0, "high": 8, "resolution": 0.5, "missing": "drop"},
        "age": {"high": 120},
        "income": {"high": 10_000_000, "out_of_range": "clip"},
    }
    for name, species in (("reviewed.json", {}), ("dropped.json", {"missing": "drop"})):
        schema = _schema(draft, **review, species=species)
        (d / name).write_text(json.dumps(schema, ensure_ascii=False), encoding="utf-8")
    return {"dir": d, "cols": cols}


def _estimate(messy: dict[str, Any], data: str, schema: str, column: str, out: str, *extra: str) -> dict[str, Any]:
    """``ldp-sim estimate`` as a real process, seeded, with --truth: its result.json, and the
    wall time from the command's start to its table (``seconds`` in result.json: file to table)."""
    d = messy["dir"]
    started = time.perf_counter()
    done = _run(["estimate", "--data", data, "--schema", schema, "--column", column, "--epsilon", "1", "--seed", "7", "--truth", "-o", out, *extra], d)
    wall = time.perf_counter() - started
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert f"{N} users (" in done.stdout and "truth" in done.stdout
    result = json.loads((d / out / "result.json").read_text(encoding="utf-8"))
    print(f"\n{data} {column} {' '.join(extra) or 'in process'}: {result['seconds']:.2f} s file to table, {wall:.2f} s wall (the command)")
    return result


def _rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    (one,) = result["results"]
    return one["rows"]  # type: ignore[no-any-return]


def _estimates(result: dict[str, Any]) -> list[float]:
    return [row["estimate"] for row in _rows(result)]


def _within_reach(rows: list[dict[str, Any]], truth: list[float] | None = None, shrink: float = 1.0) -> bool:
    """Every estimate within REACH sd of the truth (the reported one, or ``truth``); ``shrink``
    divides the sd (a broken variant's too-narrow intervals)."""
    truths = truth if truth is not None else [row["truth"] for row in rows]
    return all(abs(row["estimate"] - t) <= REACH * row["sd"] / shrink for row, t in zip(rows, truths, strict=True))


@pytest.fixture(scope="module")
def species(messy: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The species column, "missing": "category": from the CSV, its Parquet twin, and the CSV
    over 2 client processes."""
    return {
        "csv": _estimate(messy, "messy.csv", "reviewed.json", "species", "species-csv"),
        "parquet": _estimate(messy, "messy.parquet", "reviewed.json", "species", "species-parquet"),
        "grpc": _estimate(messy, "messy.csv", "reviewed.json", "species", "species-grpc", "--processes", "2"),
    }


def test_species_with_a_missing_category_is_within_reach_of_the_truth(messy: dict[str, Any], species: dict[str, dict[str, Any]]) -> None:
    rows = _rows(species["csv"])
    assert [row["label"] for row in rows] == [*LABELS, MISSING_LABEL]
    code = messy["cols"]["code"]
    assert [row["truth"] for row in rows] == [float(np.mean(code == j)) for j in range(4)]  # shares of all 10^6 users
    assert all(row["users"] == N for row in rows) and _within_reach(rows)
    assert not _within_reach(rows, shrink=10.0)  # broken variant: a variance 100× too small


def test_csv_parquet_and_two_processes_give_bit_identical_estimates(species: dict[str, dict[str, Any]]) -> None:
    assert _estimates(species["csv"]) == _estimates(species["parquet"]) == _estimates(species["grpc"])
    assert [r["sd"] for r in _rows(species["csv"])] == [r["sd"] for r in _rows(species["grpc"])]
    assert "2 client process(es) over loopback gRPC" in species["grpc"]["note"] and "in process" in species["csv"]["note"]


def test_the_api_on_the_column_a_user_reads_gives_the_same_estimates(messy: dict[str, Any], species: dict[str, dict[str, Any]]) -> None:
    """The API refuses empty cells (one line, documented) and says to map them to a category of
    their own: filled with the file's missing label, the same records, the same seed, the same
    estimates as the command, bit for bit."""
    column = pq.read_table(messy["dir"] / "messy.parquet", columns=["species"]).column("species")
    with pytest.raises(ldp.ParameterError, match=r"has 20\d\d\d missing value\(s\).*map them to a category"):
        ldp.frequencies(column, 1.0, seed=7)
    filled = pc.fill_null(column.cast(pa.string()), MISSING_LABEL)
    api = ldp.frequencies(filled, 1.0, categories=[*LABELS, MISSING_LABEL], seed=7, truth=True)
    rows = _rows(species["csv"])
    assert list(api.estimates) == [row["estimate"] for row in rows] and list(api.sd) == [row["sd"] for row in rows]
    assert list(api.labels) == [row["label"] for row in rows] and list(api.truth or ()) == [row["truth"] for row in rows]


def test_drop_leaves_the_missing_row_out_and_keeps_every_user(messy: dict[str, Any], species: dict[str, dict[str, Any]]) -> None:
    """"drop": the same records as "category" (every row a user, I3), the missing row left out
    as post-processing: the three estimates are the category run's (hence the API's) first three,
    shares of all 10^6 users. Broken variant: frequencies among the users with a value only (a
    drop that removed the rows) are more than 4 sd from these estimates."""
    dropped = _estimate(messy, "messy.csv", "dropped.json", "species", "species-drop")
    rows = _rows(dropped)
    assert [row["label"] for row in rows] == LABELS and all(row["users"] == N for row in rows)
    assert _estimates(dropped) == _estimates(species["csv"])[:3] and _within_reach(rows)
    code = messy["cols"]["code"]
    among_present = [float(np.mean(code[code < 3] == j)) for j in range(3)]
    assert not _within_reach(rows, among_present)


def test_the_unicode_column_frequencies_drop_its_empty_cells(messy: dict[str, Any]) -> None:
    """The Unicode-named mass on its reviewed 0.5 kg grid, from the Parquet twin (whose header
    has a trailing space): 17 rows, the empty cells' row left out; within reach of the truth."""
    result = _estimate(messy, "messy.parquet", "reviewed.json", MASS_COLUMN, "mass")
    rows = _rows(result)
    assert [row["label"] for row in rows] == [0.5 * j for j in range(17)] and rows[0]["column"] == MASS_COLUMN
    mass = messy["cols"]["mass"]
    grid = np.rint(mass / 0.5)  # ties to even, as the reader rounds
    assert [row["truth"] for row in rows] == [float(np.mean(grid == j)) for j in range(17)]
    assert _within_reach(rows)
    assert MASS_COLUMN in (messy["dir"] / "mass" / "table.md").read_text(encoding="utf-8")


def test_a_mean_of_the_unicode_column_with_empty_cells_is_one_line_both_ways(messy: dict[str, Any]) -> None:
    """Documented: a mean needs every user to hold a number; neither side imputes one."""
    done = _run(["estimate", "--data", "messy.csv", "--schema", "reviewed.json", "--column", MASS_COLUMN, "--task", "mean", "--seed", "7", "-o", "no-mean"], messy["dir"])
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"column '{MASS_COLUMN}' keeps a missing-value slot" in done.stderr
    column = pq.read_table(messy["dir"] / "messy.parquet").column(f"{MASS_COLUMN} ")
    with pytest.raises(ldp.ParameterError, match=r"missing or non-finite value\(s\)"):
        ldp.mean(column, 1.0, bounds=(0, 8), seed=7)


def test_a_mean_of_the_wide_integer_column_csv_parquet_and_api(messy: dict[str, Any]) -> None:
    """Income (multiples of 1000 up to 5,999,000; drafted as a float grid of resolution 1000,
    reviewed to 0..10^7, out-of-range values clipped): a mean within reach of the truth, the same from both twins, and the
    API's on the column in thousands (its documented exact case: integers within int16, integer
    bounds) times 1000.0, bit for bit: the same records 0..10000 and the same reports."""
    a = _estimate(messy, "messy.csv", "reviewed.json", "income", "income-csv", "--task", "mean")
    b = _estimate(messy, "messy.parquet", "reviewed.json", "income", "income-parquet", "--task", "mean")
    (row,) = _rows(a)
    assert _estimates(a) == _estimates(b) and row["truth"] == pytest.approx(float(np.mean(messy["cols"]["income"])), rel=1e-12) and _within_reach([row])
    thousands = pq.read_table(messy["dir"] / "messy.parquet", columns=["income"]).column("income").to_numpy() // 1000
    api = ldp.mean(thousands, 1.0, bounds=(0, 10_000), seed=7)
    assert api.oracle == row["oracle"] and row["estimate"] == 1000.0 * api.estimates[0]
    assert row["sd"] == pytest.approx(1000.0 * api.sd[0], rel=1e-12)


def test_the_table_csv_json_and_png_are_written(messy: dict[str, Any], species: dict[str, dict[str, Any]]) -> None:
    out = messy["dir"] / "species-csv"
    assert (out / "estimates.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    header, *lines = (out / "estimates.csv").read_text(encoding="utf-8").splitlines()
    assert header.split(",")[-1] == "truth" and len(lines) == 4 and MISSING_LABEL in lines[-1]
    table = (out / "table.md").read_text(encoding="utf-8")
    assert f"{N} users (in process); ε = 1 per user" in table and all(label in table for label in [*LABELS, MISSING_LABEL])
    assert species["csv"]["results"][0]["transcript"]["rounds"][0]["requests"][0]["answered"] == N
