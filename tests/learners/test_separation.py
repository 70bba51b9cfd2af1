"""The separation experiment end to end on a tiny configuration, through a custom oracle factory."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import replace

import pytest

from ldp.core.errors import LDPError, ParameterError
from ldp.local.oracle import InProcessLROracle
from ldp.simulations.separation import Config, main, run


async def test_tiny_run_writes_every_output_and_uses_the_factory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    made = []

    @contextlib.asynccontextmanager
    async def factory(spec):  # type: ignore[no-untyped-def]
        made.append(spec.size)
        yield InProcessLROracle(spec, shards=2)

    config = Config(
        trials=3,
        seed_count=1,
        cap=20_000,
        resolution=1.5,
        masked_d=(2,),
        learners=("LI-corr", "LI", "LNI", "LNI-shared", "LNI-b", "central-A*", "central-occam", "local-parity"),
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
    for name in ("result.json", "users_needed.csv", "summary.csv", "separation.csv", "curves.csv", "table.md", "separation.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert json.loads((tmp_path / "result.json").read_text())["rows"][0]["learner"] == "LI-corr"
    assert "Thm 3.8" in result["table"] and "Lemma 4.3" in result["table"] and "Thm 3.7" in result["table"]
    # every size the search tried carries k/T and its Clopper–Pearson interval; the bracket meets the resolution
    li = rows[("LI", 2)]
    assert li["last_failing"] < li["users_needed"] <= 1.5 * li["last_failing"]
    low, high = li["ci"]
    assert 0.0 <= low <= li["successes"] / li["trials"] <= high <= 1.0
    # the headline: the sharpest learners side by side with the three bounds for any one-round protocol
    (q,) = result["ratios"]
    assert q["d"] == 2 and set(q["bounds"]) == {"BH", "KL", "TV"} and q["LI_learner"] in ("LI-corr", "LI")
    assert not result["rule"]["clopper_pearson"] and "too few for a 95% lower bound" in result["table"]  # 3 trials: all must succeed
    # --render rebuilds the same table from result.json alone
    from ldp.simulations.separation import render

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
    # the same with trials side by side: the error itself, not an ExceptionGroup, stops the run
    served = 0
    failing.lanes = 2  # type: ignore[attr-defined]
    with pytest.raises(LDPError, match="shard 1/2"):
        await run(config, failing)
    assert "shard 1/2" in json.loads((tmp_path / "partial.json").read_text())["stopped_by"]


def test_clopper_pearson_matches_the_exact_binomial_tails() -> None:
    """The interval's ends are where the binomial tail probabilities equal 2.5 %: checked against
    scipy's binomtest (an independent implementation); a normal-approximation interval (the
    broken variant) would give [1, 1] at 20/20 and is refused here."""
    from scipy.stats import binomtest

    from ldp.core.audit import clopper_pearson

    for k, t in ((0, 20), (19, 20), (20, 20), (7, 13), (1, 3)):
        low, high = clopper_pearson(k, t)
        ref = binomtest(k, t).proportion_ci(confidence_level=0.95, method="exact")
        assert abs(low - ref.low) < 1e-9 and abs(high - ref.high) < 1e-9
    assert clopper_pearson(20, 20)[0] < 0.84  # not [1, 1]


def test_growth_tells_a_power_from_an_exponential() -> None:
    from ldp.simulations.separation import growth

    cubic = [{"d": d, "users_needed": 100 * d**3} for d in (2, 4, 8, 16, 24)]
    doubling = [{"d": d, "users_needed": 60 * 2**d} for d in (2, 4, 8, 16, 24)]
    g, h = growth(cubic), growth(doubling)
    assert g is not None and h is not None
    assert abs(g["loglog_slope"] - 3) < 1e-9 and g["loglog_r2"] > g["log2_per_d_r2"]
    assert abs(h["log2_per_d"] - 1) < 1e-9 and h["log2_per_d_r2"] > h["loglog_r2"]
    assert growth(cubic[:2]) is None


class _Lanes:
    """An in-process oracle factory that serves ``lanes`` populations at once (as
    ``GrpcOracleFactory`` does with one cluster per lane) and records how many overlapped."""

    def __init__(self, lanes: int) -> None:
        self.lanes = lanes
        self.serving = 0
        self.most = 0

    @contextlib.asynccontextmanager
    async def __call__(self, spec):  # type: ignore[no-untyped-def]
        self.serving += 1
        self.most = max(self.most, self.serving)
        assert self.serving <= self.lanes
        try:
            await asyncio.sleep(0)  # a real load awaits the clients: let the other trials start
            yield InProcessLROracle(spec, shards=2)
        finally:
            self.serving -= 1


async def test_parallel_trials_give_the_sequential_results_bit_for_bit() -> None:
    """Trials of one size run side by side (``parallel_trials``) read their errors in trial order,
    so early stopping, k/T, the intervals, the curves and the table are those of one trial at a
    time. The broken variant (errors read in completion order, here: reversed within a batch)
    changes where a size stops and is told apart."""
    config = Config(
        trials=6, cap=8192, resolution=1.5, masked_d=(2, 4), learners=("LI", "LNI", "local-parity"), local_parity_d=(4,),
        curve_d=2, curve_users=(300, 3000), curve_trials=3, point_bits=(), out=None, parallel_trials=3,
    )
    sequential = await run(replace(config, parallel_trials=1))
    lanes = _Lanes(3)
    parallel = await run(config, lanes)
    assert lanes.most == 3  # the parallel path ran
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    assert strip(parallel["rows"]) == strip(sequential["rows"]) and parallel["curves"] == sequential["curves"]
    assert parallel["table"] == sequential["table"]
    assert any(e["stopped_early"] for r in parallel["rows"] for e in r["evaluations"])  # the stopping rule was exercised

    # broken: a batch's errors read as they complete (reversed) → a different stopping point
    import ldp.simulations.separation as sep

    original = sep._Trials.run

    async def reversed_batches(self, learner, d, n, trial):  # type: ignore[no-untyped-def]
        width = self.width(learner, n)
        base = trial - trial % width
        mirrored = base + (min(base + width, self.config.trials) - 1 - (trial - base))
        return await original(self, learner, d, n, mirrored)

    sep._Trials.run = reversed_batches  # type: ignore[method-assign]
    try:
        broken = await run(config, _Lanes(3))
    finally:
        sep._Trials.run = original  # type: ignore[method-assign]
    assert strip(broken["rows"]) != strip(sequential["rows"])


def test_parallel_settings_are_checked() -> None:
    with pytest.raises(ParameterError, match="parallel_trials"):
        Config(parallel_trials=0)
    with pytest.raises(ParameterError, match="parallel_users"):
        Config(parallel_users=1.5)  # type: ignore[arg-type]


async def test_parallel_trials_over_grpc_lanes_equal_one_trial_at_a_time_in_process() -> None:
    """Over gRPC, two lanes (two clusters of one client process each) serve two trials at once;
    rows, curves and table equal the in-process sequential run's: records and reports are a
    function of (seed, user), whatever the transport, the process count or the overlap."""
    from ldp.wire.launcher import grpc_oracle_factory

    config = Config(
        trials=4, cap=4096, resolution=2.0, masked_d=(2, 4), learners=("LI", "LNI"), curve_d=2, curve_users=(256,), curve_trials=2,
        point_bits=(), out=None, parallel_trials=2,
    )
    in_process = await run(replace(config, parallel_trials=1))
    async with grpc_oracle_factory(1) as factory:
        over_grpc = await run(config, factory)
        assert factory.lanes == 2 and factory.clusters == 2  # the run asked for a second lane, and used it
        assert factory.populations > 20  # counted over both clusters
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    assert strip(over_grpc["rows"]) == strip(in_process["rows"]) and over_grpc["curves"] == in_process["curves"]
    assert over_grpc["table"] == in_process["table"]


def test_group_values_slice_equals_the_mask_over_answered_users() -> None:
    """LNI reads one a-group of up to 10^8 a-users: a slice when the whole range answered, the
    mask over answered ids otherwise; both give the same reports (the mask is the reference)."""
    import numpy as np

    from ldp.core.query_specs import label_query
    from ldp.core.randomizers import RandomizerSpec
    from ldp.learners.masked_parity import _group_values
    from ldp.local.messages import Users
    from ldp.local.oracle import Reports

    spec = RandomizerSpec("binary_rr", label_query(), 1.0)
    values = np.random.default_rng(0).integers(0, 2, 1000).astype(np.uint8)
    everyone = Reports(0, spec, Users.range(500, 1500), np.zeros(1000, dtype=np.uint8), values)
    status = np.zeros(1000, dtype=np.uint8)
    status[::7] = 1  # some refused: the mask path
    some = Reports(0, spec, Users.range(500, 1500), status, values[status == 0])
    for reports in (everyone, some):
        answered = reports.answered_users
        for lo, hi in ((500, 1500), (600, 610), (400, 520), (1490, 1700), (1600, 1700), (700, 650)):
            reference = reports.values[(answered >= lo) & (answered < hi)]
            assert np.array_equal(_group_values(reports, lo, hi), reference), (lo, hi)
