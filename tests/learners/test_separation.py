"""The separation experiment end to end on a tiny configuration, through a custom oracle factory."""

from __future__ import annotations

import contextlib
import json

import pytest

from ldp.core.errors import LDPError
from ldp.local.oracle import InProcessLROracle
from simulations.separation import Config, main, run


async def test_tiny_run_writes_every_output_and_uses_the_factory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    made = []

    @contextlib.asynccontextmanager
    async def factory(spec):  # type: ignore[no-untyped-def]
        made.append(spec.size)
        yield InProcessLROracle(spec, shards=2)

    config = Config(
        trials=3,
        cap=20_000,
        resolution=1.5,
        masked_d=(2,),
        learners=("LI", "LNI", "LNI-b", "central-A*", "central-occam", "local-parity"),
        central_parity_d=(8, 16),
        occam_d=(4,),
        local_parity_d=(4,),
        curve_d=2,
        curve_users=(500, 5_000),
        curve_trials=2,
        point_bits=(8, 64),
        point_trials=20,
        out=str(tmp_path),
    )
    result = await run(config, factory)
    assert made  # local learners went through the factory
    rows = {(r["learner"], r["d"]): r for r in result["rows"]}
    assert rows[("LI", 2)]["status"] == "ok" and rows[("central-A*", 16)]["status"] == "ok"
    assert rows[("LNI-b", 2)]["status"] == "> cap"
    for name in ("result.json", "users_needed.csv", "curves.csv", "table.md", "separation.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert json.loads((tmp_path / "result.json").read_text())["rows"][0]["learner"] == "LI"
    assert "Thm 3.8" in result["table"] and "Lemma 4.3" in result["table"] and "Thm 3.7" in result["table"]
    # every size the search tried carries k/T and its Clopper–Pearson interval; the bracket meets the resolution
    li = rows[("LI", 2)]
    assert li["last_failing"] < li["users_needed"] <= 1.5 * li["last_failing"]
    low, high = li["ci"]
    assert 0.0 <= low <= li["successes"] / li["trials"] <= high <= 1.0
    assert rows[("LNI", 2)]["lni_lower_bound"] > 0 and result["ratios"][0]["d"] == 2
    # --render rebuilds the same table from result.json alone
    from simulations.separation import render

    assert render(tmp_path)["table"] == result["table"]
    # the central POINT baselines (BNS): A_dist's users do not grow with d, the pure learner's do
    em, adist = rows[("central-EM", 64)]["users_needed"], rows[("central-Adist", 64)]["users_needed"]
    assert em > rows[("central-EM", 8)]["users_needed"] and adist <= 1.2 * rows[("central-Adist", 8)]["users_needed"]


def test_main_has_the_documented_flags() -> None:
    import pytest

    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0


async def test_a_run_that_stops_keeps_the_rows_it_finished(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A lost cluster (here: a factory that fails at its 30th population) stops the run with the
    error, and the finished rows are written to partial.json, named in the log."""
    served = 0

    @contextlib.asynccontextmanager
    async def failing(spec):  # type: ignore[no-untyped-def]
        nonlocal served
        served += 1
        if served == 30:
            raise LDPError("shard 1/2 (users 500..999) disconnected before answering session 1 round 0")
        yield InProcessLROracle(spec)

    lines: list[str] = []
    config = Config(trials=2, cap=4096, resolution=2.0, masked_d=(2, 4), learners=("LI", "LNI"), curve_users=(), point_bits=(), out=str(tmp_path))
    with pytest.raises(LDPError, match="shard 1/2"):
        await run(config, failing, log=lines.append)
    partial = json.loads((tmp_path / "partial.json").read_text())
    assert partial["rows"] and "shard 1/2" in partial["stopped_by"]
    assert any("partial.json" in line for line in lines)


def test_clopper_pearson_matches_the_exact_binomial_tails() -> None:
    """The interval's ends are where the binomial tail probabilities equal 2.5 %: checked against
    scipy's binomtest (an independent implementation); a normal-approximation interval (the
    broken variant) would give [1, 1] at 20/20 and is refused here."""
    from scipy.stats import binomtest

    from simulations.separation import clopper_pearson

    for k, t in ((0, 20), (19, 20), (20, 20), (7, 13), (1, 3)):
        low, high = clopper_pearson(k, t)
        ref = binomtest(k, t).proportion_ci(confidence_level=0.95, method="exact")
        assert abs(low - ref.low) < 1e-9 and abs(high - ref.high) < 1e-9
    assert clopper_pearson(20, 20)[0] < 0.84  # not [1, 1]


def test_growth_tells_a_power_from_an_exponential() -> None:
    from simulations.separation import growth

    cubic = [{"d": d, "users_needed": 100 * d**3} for d in (2, 4, 8, 16, 24)]
    doubling = [{"d": d, "users_needed": 60 * 2**d} for d in (2, 4, 8, 16, 24)]
    g, h = growth(cubic), growth(doubling)
    assert g is not None and h is not None
    assert abs(g["loglog_slope"] - 3) < 1e-9 and g["loglog_r2"] > g["log2_per_d_r2"]
    assert abs(h["log2_per_d"] - 1) < 1e-9 and h["log2_per_d_r2"] > h["loglog_r2"]
    assert growth(cubic[:2]) is None
