"""The SQ experiments run end to end in quick mode and write all their outputs."""

from __future__ import annotations

from pathlib import Path

from scipy import stats

import ldp.simulations.sq_local as sq_local
import ldp.simulations.sq_sample_complexity as sq_sample_complexity


def test_sq_local_quick(tmp_path: Path) -> None:
    result = sq_local.main(["--quick", "--seed", "2", "--out", str(tmp_path)])
    for name in ("result.json", "distances.csv", "outputs.png", "table.md"):
        assert (tmp_path / name).stat().st_size > 0
    assert all(row["within"] for row in result.rows)


def test_sq_sample_complexity_quick(tmp_path: Path) -> None:
    result = sq_sample_complexity.main(["--quick", "--out", str(tmp_path)])
    for name in ("result.json", "users.csv", "users.png", "table.md"):
        assert (tmp_path / name).stat().st_size > 0
    outcomes: dict[tuple, bool] = {}
    for row in result.rows:
        assert row["local_per_query_exact"] <= row["local_per_query_bound"]
        assert row["central_exact"] <= row["central_bound"]
        for key in ("local_max_error", "central_max_error"):
            if row[key] is not None:  # the sweeps share their default point: count each run once
                outcomes[(key, row["t"], row["tolerance"], row["epsilon"])] = row[key] > row["tolerance"]
    runs, failures = len(outcomes), sum(outcomes.values())
    # Each run is within τ with probability ≥ 1 − β (β = 0.05), independently (its own seed), so
    # more than `allowed` failures has probability ≤ 1e-3 under the guarantee: the false-alarm rate.
    beta = 0.05
    allowed = next(m for m in range(runs + 1) if stats.binom.sf(m, runs, beta) <= 1e-3)
    assert runs >= 4 and failures <= allowed, (failures, runs)
    # the scaling: local total grows like t·log t, central like t (for large t) — local/central grows.
    t_rows = [r for r in result.rows if r["sweep"] == "t"]
    ratios = [r["local_total_bound"] / r["central_bound"] for r in t_rows]
    assert ratios[-1] > ratios[0]
