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
        bisect=1,
        masked_d=(2,),
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
    config = Config(trials=2, cap=4096, bisect=1, masked_d=(2, 4), learners=("LI", "LNI-a"), curve_users=(), point_bits=(), out=str(tmp_path))
    with pytest.raises(LDPError, match="shard 1/2"):
        await run(config, failing, log=lines.append)
    partial = json.loads((tmp_path / "partial.json").read_text())
    assert partial["rows"] and "shard 1/2" in partial["stopped_by"]
    assert any("partial.json" in line for line in lines)
