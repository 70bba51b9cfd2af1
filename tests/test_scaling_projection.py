"""benchmarks/scaling_projection.py (issue 27): the projection model, and the script as a process.

The model T(P, N) = F + r·(P − 1) + N·(max(c/P, a_s, (c + a_s)/K) + a_e), T_in(N) = F_in + N·b
is checked against values computed by hand — without overlap (a_s = 0, a_e = a: the code the
16-core machine ran, T = F + r·(P − 1) + N·(c/P + a)) and with it — and against the 16-core
machine's numbers quoted in docs/benchmarks.md. Two broken variants — the aggregator's per-user
work divided among the P processes too (Amdahl forgotten), and the overlapped phase taken as the
clients' alone (the aggregator and the cores forgotten) — are run on the same costs and the
hand-computed values reject them. The
process test runs ``--quick`` (10^3 … 10^5 users, 1–2 client processes on loopback) with every
wait bounded by ``tests.waits.PROCESS_WAIT_S``, and checks that the files are written and carry
the "projection" label. No timing is asserted: the measured costs are whatever the machine gives.
"""

from __future__ import annotations

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.waits import PROCESS_WAIT_S

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "scaling_projection.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scaling_projection", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module's string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


SP = _script()
# F = 10 ms, r = 1 ms, c = 20 ns, a = 2 ns, F_in = 5 ms, b = 15 ns.
COSTS = SP.Costs(0.010, 0.001, 20e-9, 2e-9, 0.005, 15e-9, startup_s=0.5, load_s_per_user=100e-9, client_bytes_per_user=50.0, client_fixed_bytes=2**26, aggregator_bytes_per_user=2.0)


def test_round_time_by_hand() -> None:
    # N = 10^8, P = 16: 0.010 + 0.001·15 + 10^8·(20e-9/16 + 2e-9) = 0.025 + 0.125 + 0.2 = 0.35 s
    assert SP.round_seconds(COSTS, 10**8, 16) == pytest.approx(0.35)
    # P = 1: 0.010 + 10^8·22e-9 = 2.21 s; in process: 0.005 + 1.5 = 1.505 s
    assert SP.round_seconds(COSTS, 10**8, 1) == pytest.approx(2.21)
    assert SP.in_process_seconds(COSTS, 10**8) == pytest.approx(1.505)


def test_projection_by_hand() -> None:
    p = SP.project(COSTS, 10**8, 16)
    assert p.round_s == pytest.approx(0.35)
    assert p.speedup_vs_in_process == pytest.approx(1.505 / 0.35)
    assert p.efficiency_vs_in_process == pytest.approx(1.505 / (16 * 0.35))  # 26.9 %
    assert p.efficiency_vs_one_process == pytest.approx(2.21 / (16 * 0.35))  # 39.5 %
    assert p.serial_share == pytest.approx((0.010 + 0.015 + 0.2) / 0.35)
    assert p.load_s == pytest.approx(0.5 + 10**8 / 16 * 100e-9)  # 1.125 s
    assert p.memory_gib == pytest.approx((16 * 2**26 + 10**8 * 52.0) / 2**30)
    assert "projection" in p.label
    one = SP.project(COSTS, 10**8, 1)
    assert one.efficiency_vs_one_process == pytest.approx(1.0)
    # The largest a for E_in(16) ≥ 70 %: (b/0.7 − c)/16 = (21.43 − 20)/16 ns = 0.0893 ns
    assert SP.serial_budget(COSTS, 16) == pytest.approx((15e-9 / 0.7 - 20e-9) / 16)
    # The largest a for E_1(16) ≥ 70 %: 0.3·20/(11.2 − 1) ns = 0.588 ns; at it, E_1 → 70 % as N → ∞
    budget = SP.serial_budget_one(COSTS, 16)
    assert budget == pytest.approx(0.3 * 20e-9 / 10.2)
    edge = SP.Costs(0.0, 0.0, 20e-9, budget, 0.0, 15e-9)
    assert SP.project(edge, 10**12, 16).efficiency_vs_one_process == pytest.approx(0.7)


def test_broken_model_is_caught() -> None:
    """The aggregator's per-user work spread over the P processes (no serial part)."""

    def broken(costs: object, n: int, processes: int) -> float:
        c = SP.Costs(**{**SP.asdict(costs), "aggregator_s_per_user": 0.0, "client_s_per_user": COSTS.client_s_per_user + COSTS.aggregator_s_per_user})
        return float(SP.round_seconds(c, n, processes))

    assert broken(COSTS, 10**8, 1) == pytest.approx(2.21)  # it agrees at P = 1 …
    assert broken(COSTS, 10**8, 16) != pytest.approx(0.35)  # … and the hand value rejects it at P = 16 (0.1625 s)


# The same costs with the reply streamed: a_e = 0.5 ns after the last part, a_s = 1.5 ns on parts.
STREAMED = SP.Costs(**{**SP.asdict(COSTS), "aggregator_after_s_per_user": 0.5e-9})


def test_overlapped_round_time_by_hand() -> None:
    assert (STREAMED.streamed_s_per_user, STREAMED.after_s_per_user) == (pytest.approx(1.5e-9), pytest.approx(0.5e-9))
    # P = 16 on 16 cores: max(20/16, 1.5, 21.5/16) = 1.5 ns (the aggregator) + 0.5 → 0.025 + 0.2 s
    assert SP.round_seconds(STREAMED, 10**8, 16) == pytest.approx(0.225)
    assert SP.project(STREAMED, 10**8, 16).bound == "aggregator"
    # P = 8: max(2.5, 1.5, 1.34375) = 2.5 ns (the clients) + 0.5 → 0.017 + 0.3 s
    assert SP.round_seconds(STREAMED, 10**8, 8) == pytest.approx(0.317)
    assert SP.project(STREAMED, 10**8, 8).bound == "clients"
    # P = 1: 0.010 + 10^8·(20 + 0.5) ns = 2.06 s; E_1(16) = 2.06/(16·0.225) = 57.2 %
    assert SP.round_seconds(STREAMED, 10**8, 1) == pytest.approx(2.06)
    assert SP.project(STREAMED, 10**8, 16).efficiency_vs_one_process == pytest.approx(2.06 / (16 * 0.225))
    assert SP.project(STREAMED, 10**8, 16).serial_share == pytest.approx((0.025 + 0.05) / 0.225)
    # On this machine's 2 cores, 2 clients and the aggregator: max(10, 1.5, 21.5/2) = 10.75 ns (the cores)
    assert SP.round_seconds(STREAMED, 10**8, 2, cores=2) == pytest.approx(0.011 + 1.125)
    # The budgets with a_s, m = max(1.25, 1.5, 1.34375) = 1.5 ns: E_1(16) ≥ 70 % needs
    # a_e ≤ (20 − 11.2·1.5)/10.2 ns = 0.314 ns; E_in(16) ≥ 70 %, a_e ≤ 15/11.2 − 1.5 < 0 (none)
    assert SP.serial_budget_one(STREAMED, 16) == pytest.approx((20e-9 - 11.2 * 1.5e-9) / 10.2)
    assert SP.serial_budget(STREAMED, 16) == pytest.approx(15e-9 / 11.2 - 1.5e-9)
    edge = SP.Costs(0.0, 0.0, 20e-9, 1.5e-9 + SP.serial_budget_one(STREAMED, 16), 0.0, 15e-9, aggregator_after_s_per_user=SP.serial_budget_one(STREAMED, 16))
    assert SP.project(edge, 10**12, 16).efficiency_vs_one_process == pytest.approx(0.7)


def test_broken_overlap_is_caught() -> None:
    """The overlapped phase taken as the clients' alone, c/P: the aggregator's a_s forgotten."""

    def broken(costs: object, n: int, processes: int) -> float:
        return float(costs.fixed_s + costs.per_process_s * (processes - 1) + n * (costs.client_s_per_user / processes + costs.after_s_per_user))  # type: ignore[attr-defined]

    assert broken(STREAMED, 10**8, 1) == pytest.approx(2.06)  # it agrees at P = 1 …
    assert broken(STREAMED, 10**8, 16) != pytest.approx(0.225)  # … and the hand value rejects it at P = 16 (0.2 s)


def test_sixteen_core_check() -> None:
    """The model with the 16-core machine's costs (docs/benchmarks.md, 10^8 users): c + a from its
    one-process round (2.935 s), a = 2.7 ns: T(14) = 10^8·(26.65 ns/14 + 2.7 ns) = 0.4604 s
    against 0.522 s measured, E_in = 2.538/(14·0.4604) = 39.4 % against 35 %."""
    check = SP.sixteen_core_check()
    row14 = next(r for r in check["rows"] if r["processes"] == 14)
    assert row14["predicted_s"] == pytest.approx(0.46036, rel=1e-4)
    assert row14["measured_s"] == 0.522
    assert row14["predicted_efficiency"] == pytest.approx(2.538 / (14 * 0.46036), rel=1e-4)
    assert row14["measured_efficiency"] == pytest.approx(0.347, abs=1e-3)
    # The least-squares fit reproduces its own data closely and puts a above the profile's 2.7 ns.
    assert check["fitted"]["aggregator_s_per_user"] > SP.SIXTEEN_CORE_AGGREGATOR_S_PER_USER


def test_quick_run_as_a_process(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--reps", "3", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=ROOT, check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "projection" in out.stdout.lower()
    md = (tmp_path / "scaling_projection.md").read_text(encoding="utf-8")
    assert md.startswith("**Projection from per-process costs measured on a 2-core machine** — not a measurement.")
    assert "T(2) predicted" in md and "16-core machine" in md
    with (tmp_path / "scaling_projection.csv").open(encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == SP.FIELDS
        rows = list(reader)
    assert {(int(r["n"]), int(r["processes"])) for r in rows} == {(n, p) for n in SP.PROJECT_SIZES for p in SP.PROJECT_PROCESSES}
    assert all(r["label"] == SP.LABEL and float(r["round_s"]) > 0 for r in rows)
    assert (tmp_path / "scaling_projection.png").stat().st_size > 10_000
    assert (tmp_path / "scaling_projection.json").is_file()


@pytest.mark.parametrize("script", [SCRIPT, SCRIPT.with_name("reply_parts.py")], ids=["scaling_projection", "reply_parts"])
def test_too_few_repetitions_is_one_line(script: Path, tmp_path: Path) -> None:
    """Both projection benchmarks take their options from ``scaling.bench_arguments``."""
    out = subprocess.run(
        [sys.executable, str(script), "--quick", "--reps", "2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=ROOT, check=False,
    )
    assert out.returncode == 2
    assert "--reps must be ≥ 3" in out.stderr and "Traceback" not in out.stderr
    assert not any(tmp_path.iterdir())
