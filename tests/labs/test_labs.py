"""Every lab runs headless in quick mode, with solutions, and saves its figures."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

LABS = sorted(p.stem for p in (Path(__file__).parents[2] / "simulations" / "labs").glob("lab*.py"))


def test_there_are_at_least_six_labs():
    assert len(LABS) >= 6, LABS


@pytest.mark.parametrize("lab", LABS)
def test_lab_runs_in_quick_mode(lab, tmp_path):
    env = dict(os.environ, LDP_QUICK="1", LDP_LAB_OUT=str(tmp_path), MPLBACKEND="Agg")
    proc = subprocess.run(
        [sys.executable, "-m", f"simulations.labs.{lab}"], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert list(tmp_path.rglob("*.png")), "a lab saves at least one figure"
    assert "[exercise]" in proc.stdout


@pytest.mark.parametrize("lab", LABS[:1])
def test_solutions_switch_hides_solutions(lab, tmp_path):
    env = dict(os.environ, LDP_QUICK="1", LDP_SOLUTIONS="0", LDP_LAB_OUT=str(tmp_path), MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-m", f"simulations.labs.{lab}"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "your turn" in proc.stdout


def test_ldp_sim_lab_runs_a_lab_over_grpc_client_processes(tmp_path):
    """The classroom way: `ldp-sim lab 2 --quick` with 2 client processes on loopback; the lab's
    numbers are the in-process ones (same seed), its figure is saved and its path printed."""
    cmd = [sys.executable, "-m", "ldp.cli.main", "lab", "2", "--quick", "--processes", "2", "--out", str(tmp_path / "g")]
    grpc_run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert grpc_run.returncode == 0, grpc_run.stdout[-2000:] + grpc_run.stderr[-3000:]
    assert "2 client process(es) over gRPC" in grpc_run.stdout
    assert f"figure saved: {tmp_path / 'g' / 'lab2' / 'lab2_refusals.png'}" in grpc_run.stdout
    local = subprocess.run(cmd[:-2] + ["--transport", "inprocess", "--out", str(tmp_path / "i")], capture_output=True, text=True, timeout=120)
    assert local.returncode == 0, local.stderr[-3000:]
    rounds = lambda out: [line for line in out.splitlines() if line.startswith("round ")]  # noqa: E731
    assert rounds(grpc_run.stdout) == rounds(local.stdout) and len(rounds(local.stdout)) == 6


def test_ldp_sim_lab_rejects_an_unknown_lab():
    proc = subprocess.run([sys.executable, "-m", "ldp.cli.main", "lab", "99"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "there is no lab 99; labs are [1, 2, 3, 4, 5, 6]" in proc.stderr
