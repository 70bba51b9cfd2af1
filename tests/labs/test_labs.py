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
