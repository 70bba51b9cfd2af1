"""pyproject.toml's package list names every package the wheel must ship (issue 24).

The list is explicit because ``package-dir`` installs the folder simulations/ as ``ldp.simulations``
(setuptools' discovery cannot map one subpackage to another folder), and setuptools silently leaves
out a package the list forgets. This test derives the packages from the folders (each one with an
``__init__.py``) and compares; it is shown to catch a new package that the list forgets (the
broken variant). The wheel itself is checked by tests/test_wheel_install.py.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def packages_on_disk(root: Path, package_dir: dict[str, str]) -> set[str]:
    """Every package under ldp/ and under each package-dir folder, by its installed name."""
    folders = {"ldp": "ldp", **package_dir}
    found = set()
    for name, folder in folders.items():
        base = root / folder
        for init in base.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rel = init.parent.relative_to(base).parts
            found.add(".".join((name, *rel)))
    return found


def test_the_package_list_names_every_package() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, package_dir = set(setuptools["packages"]), dict(setuptools["package-dir"])
    assert package_dir == {"ldp.simulations": "simulations"}
    on_disk = packages_on_disk(ROOT, package_dir)
    assert listed == on_disk, f"add to [tool.setuptools] packages: {sorted(on_disk - listed)}; no such package: {sorted(listed - on_disk)}"
    assert all(name == "ldp" or name.startswith("ldp.") for name in listed)  # no top-level package with a generic name


def test_the_comparison_catches_a_forgotten_package(tmp_path: Path) -> None:
    for folder in ("ldp", "ldp/core", "sims", "sims/labs", "sims/labs/new_part"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    listed = {"ldp", "ldp.core", "ldp.simulations", "ldp.simulations.labs"}
    on_disk = packages_on_disk(tmp_path, {"ldp.simulations": "sims"})
    assert on_disk - listed == {"ldp.simulations.labs.new_part"}
