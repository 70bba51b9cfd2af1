"""The SQ experiments run end to end in quick mode and write all their outputs."""

from __future__ import annotations

from pathlib import Path

import simulations.sq_local as sq_local
import simulations.sq_sample_complexity as sq_sample_complexity


def test_sq_local_quick(tmp_path: Path) -> None:
    result = sq_local.main(["--quick", "--seed", "2", "--out", str(tmp_path)])
    for name in ("result.json", "distances.csv", "outputs.png", "table.md"):
        assert (tmp_path / name).stat().st_size > 0
    assert all(row["within"] for row in result.rows)


def test_sq_sample_complexity_quick(tmp_path: Path) -> None:
    result = sq_sample_complexity.main(["--quick", "--out", str(tmp_path)])
    for name in ("result.json", "users.csv", "users.png", "table.md"):
        assert (tmp_path / name).stat().st_size > 0
    for row in result.rows:
        assert row["local_per_query_exact"] <= row["local_per_query_bound"]
        assert row["central_exact"] <= row["central_bound"]
        for key in ("local_max_error", "central_max_error"):
            assert row[key] is None or row[key] <= row["tolerance"]
    # the scaling: local total grows like t·log t, central like t (for large t) — local/central grows.
    t_rows = [r for r in result.rows if r["sweep"] == "t"]
    ratios = [r["local_total_bound"] / r["central_bound"] for r in t_rows]
    assert ratios[-1] > ratios[0]
