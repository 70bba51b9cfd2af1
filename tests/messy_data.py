"""The messy file of issue 25, as someone else would have written it: shared by the tests that
read it (tests/core/test_datafile_declared.py) and run it end to end (tests/cli/test_estimate_messy.py).

A header with spaces around its names, a Unicode column name that is not an identifier, a string
category column with stray spaces and empty cells, numbers with gaps, and a Parquet twin
(dictionary-encoded labels, nulls, NaN, a trailing space in one column name).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["LABELS", "MASS_COLUMN", "messy_columns", "write_messy_csv", "write_messy_parquet"]

LABELS = ["Adelie", "Chinstrap", "Gentoo"]
MASS_COLUMN = "Körpermasse (g)"  # the Unicode column name, as the CSV header holds it (in quotes)


def messy_columns(n: int, seed: int = 1) -> dict[str, np.ndarray]:
    """n users' values: species (code 3 = missing, 2 %), mass (NaN 3 %), age (NaN 1 %), income
    (multiples of 1000 up to 5,999,000, no gap)."""
    rng = np.random.default_rng(seed)
    code = np.where(rng.random(n) < 0.02, 3, rng.integers(0, 3, n))  # 3: missing
    species = np.array([*LABELS, None], dtype=object)[code]
    mass = np.round(rng.uniform(2.7, 6.3, n), 2)
    mass[rng.random(n) < 0.03] = np.nan
    age = rng.integers(0, 100, n).astype(np.float64)
    age[rng.random(n) < 0.01] = np.nan
    income = rng.integers(0, 6000, n) * 1000  # some above a declared 5,000,000: clipped
    return {"code": code, "species": species, "mass": mass, "age": age, "income": income}


def write_messy_csv(path: str | Path, cols: dict[str, np.ndarray]) -> None:
    """The CSV as a spreadsheet exports it: spaces around header names and some labels."""
    sp = ["" if s is None else (f" {s} " if i % 7 == 0 else s) for i, s in enumerate(cols["species"].tolist())]
    ms = ["" if m != m else repr(m) for m in cols["mass"].tolist()]
    ag = ["" if a != a else str(int(a)) for a in cols["age"].tolist()]
    inc = list(map(str, cols["income"].tolist()))
    with open(path, "w", encoding="utf-8") as f:
        f.write(f' species ,"{MASS_COLUMN}", age ,income\n')
        f.write("\n".join(map(",".join, zip(sp, ms, ag, inc))) + "\n")


def write_messy_parquet(path: str | Path, cols: dict[str, np.ndarray], row_group_size: int | None = None) -> None:
    """The Parquet twin: dictionary-encoded labels with nulls, NaN for a missing mass, nulls in
    an int64 age, and header names with stray spaces of their own."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({
        "species": pa.array(cols["species"].tolist()).dictionary_encode(),
        f"{MASS_COLUMN} ": pa.array(cols["mass"]),  # NaN, not null: pandas' way of writing a gap
        " age": pa.array(cols["age"], from_pandas=True).cast(pa.int64()),  # nulls
        "income": pa.array(cols["income"]),
    }), path, row_group_size=row_group_size)
