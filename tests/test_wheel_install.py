"""The wheel a user installs works outside the repository.

``pip install .`` used to miss the penguins (``ldp-sim run real-data`` failed installed) and the
distribution was named after another project on PyPI. This test builds the wheel, checks what it
holds, installs it with its declared dependencies into a fresh virtual environment in a temporary
folder (nothing of the checkout on its path), and runs, from there, one experiment that reads
package data, one lab, ``python -m ldp`` and ``ldp-sim --version``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DISTRIBUTION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["name"]

pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("wheel")]


def _run(argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    # A clean environment: no PYTHONPATH pointing back at the checkout.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["MPLBACKEND"] = "Agg"
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel, the fresh venv's bin folder), built once for the module."""
    root = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools writes build/ and *.egg-info into the folder it builds, and in
    # the checkout that would rewrite, mid-run, the metadata other tests' processes read (make test
    # runs tests in parallel).
    source = root / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", ".venv*", "build", "*.egg-info", "results", "__pycache__", ".*cache", ".hypothesis"))
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(root / "dist"), str(source)], root, 600)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (root / "dist").glob("*.whl")
    env_dir = root / "env"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    pip = _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)], root, 800)
    assert pip.returncode == 0, pip.stderr[-3000:]
    return wheel, bin_dir


def test_the_distribution_name_is_not_taken_by_another_project() -> None:
    # `ldp` on PyPI is an agent framework (checked against the registry when the name was chosen);
    # `ldp-sim` was free, and matches the command.
    assert DISTRIBUTION == "ldp-sim"


def test_the_wheel_ships_the_package_data(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    assert wheel.name.startswith("ldp_sim-")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "ldp/simulations/data/penguins.csv", "ldp/simulations/data/penguins.schema.json", "ldp/simulations/data/PENGUINS.md",
        "ldp/simulations/labs/lab1_randomized_response.py", "ldp/experiment/registry.py", "ldp/py.typed", "ldp/__main__.py",
    ):
        assert needed in names, f"{needed} is not in {wheel.name}"
    assert any(n.startswith("ldp/classroom/static/") for n in names)
    # Nothing installs a top-level package with a generic name: the folder simulations/ installs as
    # ldp.simulations, and every importable top-level name of the wheel is ldp (issue 24).
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith((".dist-info", ".data"))}
    assert top == {"ldp"}, f"{wheel.name} installs top-level {sorted(top - {'ldp'})}"
    assert not any(n.startswith("simulations/") for n in names)
    (info,) = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    # The built-in experiments join through the entry point group a user's package would use.
    entry_points = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
    assert "[ldp_sim.experiments]" in entry_points and "real-data = ldp.simulations.real_data:EXPERIMENT" in entry_points


def test_the_installed_command_runs_an_experiment_on_package_data_and_a_lab(installed: tuple[Path, Path], tmp_path: Path) -> None:
    _, bin_dir = installed
    version = _run([str(bin_dir / "ldp-sim"), "--version"], tmp_path, 120)
    assert version.returncode == 0 and version.stdout.startswith("ldp-sim "), version.stderr
    assert "unknown" not in version.stdout  # the version is read from the installed distribution
    as_module = _run([str(bin_dir / "python"), "-m", "ldp", "--version"], tmp_path, 120)
    assert as_module.returncode == 0 and as_module.stdout == version.stdout, as_module.stderr
    real = _run([str(bin_dir / "ldp-sim"), "run", "real-data", "--quick", "--transport", "inprocess", "--out", str(tmp_path / "real")], tmp_path, 300)
    assert real.returncode == 0, real.stdout[-2000:] + real.stderr[-2000:]
    assert list((tmp_path / "real").glob("*.png")) and list((tmp_path / "real").glob("*.json"))
    lab = _run([str(bin_dir / "ldp-sim"), "lab", "1", "--quick", "--transport", "inprocess", "--out", str(tmp_path / "lab")], tmp_path, 300)
    assert lab.returncode == 0, lab.stdout[-2000:] + lab.stderr[-2000:]
    assert list((tmp_path / "lab").rglob("*.png"))
    listed = _run([str(bin_dir / "ldp-sim"), "list"], tmp_path, 120)
    assert listed.returncode == 0 and "real-data" in listed.stdout and "separation" in listed.stdout, listed.stdout + listed.stderr
    # no top-level `simulations` is importable from the installed environment
    generic = _run([str(bin_dir / "python"), "-c", "import importlib.util; print(importlib.util.find_spec('simulations'))"], tmp_path, 60)
    assert generic.returncode == 0 and generic.stdout.strip() == "None", generic.stdout + generic.stderr
