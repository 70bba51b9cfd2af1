"""No private name is imported across modules in ``ldp/`` and ``simulations/`` (issue 24).

A name that starts with one underscore is its module's own business: another module that imports
it (``from ldp.wire.aggregator import _Connection``) or reaches into a module for it
(``import ldp.core.budget as budget; budget._units``) breaks the day the owner renames it, and
hides a missing public API. The walk is static (``ast``): every ``from X import _name`` where X is
a module of this repository (relative imports resolved), and every ``m._name`` where ``m`` is a
name bound to one of its modules by an import. Attribute access on objects (``obj._connections``)
is not decidable statically and is not checked here: the public hooks of ``GrpcAggregator``
(docs/design.md §3) exist so that nobody needs it.

The broken variant: ``test_the_walk_finds_every_kind_of_private_import`` runs the same walk on a
synthetic module that commits each kind of violation, and on one that does none.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ldp", "simulations")
GENERATED = ("ldp/wire/v1/",)  # grpcio-tools output (make proto): not ours to name


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] == "simulations":  # installed as ldp.simulations (pyproject's package-dir)
        parts.insert(0, "ldp")
    return ".".join(parts)


def _is_module(dotted: str) -> bool:
    """True when ``dotted`` names a module or package of this repository."""
    parts = dotted.split(".")
    if parts[:2] == ["ldp", "simulations"]:  # the folder simulations/ (pyproject's package-dir)
        parts = parts[1:]
    base = ROOT.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _ours(dotted: str) -> bool:
    return dotted.split(".", 1)[0] in PACKAGES


def _private_module_outside(dotted: str, importer: str) -> bool:
    """True when ``dotted`` passes through a private module (``ldp.core._validate``) and
    ``importer`` is outside the package that holds it (inside, it is that package's own)."""
    parts = dotted.split(".")
    for i, part in enumerate(parts[1:], start=1):
        if _private(part):
            return not importer.startswith(".".join(parts[:i]) + ".")
    return False


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module an ``ImportFrom`` names (relative imports resolved against ``module``)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def private_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """Every private name ``module`` takes from another module of this repository, as
    ``'module:line: what'`` lines (empty when there is none)."""
    tree = ast.parse(source)
    found: list[str] = []
    aliases: dict[str, str] = {}  # local name -> one of our modules it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source_module = _resolve(node, module, is_package)
            if not _ours(source_module) or source_module == module:
                continue
            for alias in node.names:
                if _private(alias.name) or _private_module_outside(source_module, module):
                    found.append(f"{module}:{node.lineno}: from {source_module} import {alias.name}")
                elif _is_module(f"{source_module}.{alias.name}"):
                    aliases[alias.asname or alias.name] = f"{source_module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if not _ours(alias.name):
                    continue
                if _private_module_outside(alias.name, module):
                    found.append(f"{module}:{node.lineno}: import {alias.name}")
                if alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name):
            target = aliases.get(node.value.id)
            if target is not None and target != module:
                found.append(f"{module}:{node.lineno}: {node.value.id}.{node.attr} (of {target})")
    return found


def _tree_violations() -> list[str]:
    found: list[str] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(GENERATED):
                continue
            found += private_imports(path.read_text(encoding="utf-8"), _module_name(path), path.name == "__init__.py")
    return found


def test_no_private_name_is_imported_across_modules() -> None:
    found = _tree_violations()
    assert found == [], "private names imported across modules (make them public, or add a public hook):\n" + "\n".join(found)


BROKEN = '''
from ldp.wire.aggregator import GrpcAggregator, _Connection
from ldp.core._validate import check
from . import _helper
from .sibling import _twin
import ldp.core.budget as budget
from ldp.core import audit
import ldp.core._hidden

units = budget._units(3)
audit._check(units)
'''

CLEAN = '''
from ldp.wire.aggregator import GrpcAggregator
from ldp.core import audit
import numpy as np
from numpy import _globals
from . import sibling


class Mine:
    def __init__(self) -> None:
        self._own = audit.clopper_pearson
        np._private_but_not_ours = 1

    def __repr__(self) -> str:
        return self.__class__.__name__
'''


def test_the_walk_finds_every_kind_of_private_import() -> None:
    """The broken variant: each kind of violation in a synthetic module is found, and a module
    that only uses public names (and its own privates, and other libraries') passes."""
    found = private_imports(BROKEN, "ldp.wire.synthetic")
    assert [line.split(": ", 1)[1] for line in found] == [
        "from ldp.wire.aggregator import _Connection",
        "from ldp.core._validate import check",
        "from ldp.wire import _helper",
        "from ldp.wire.sibling import _twin",
        "import ldp.core._hidden",
        "budget._units (of ldp.core.budget)",
        "audit._check (of ldp.core.audit)",
    ], found
    assert private_imports(CLEAN, "ldp.wire.synthetic") == []


@pytest.mark.parametrize(
    ("module", "is_package", "level", "name", "expected"),
    [
        ("ldp.wire.aggregator", False, 1, "codec", "ldp.wire.codec"),
        ("ldp.wire", True, 1, "codec", "ldp.wire.codec"),
        ("ldp.wire.aggregator", False, 2, "core", "ldp.core"),
        ("ldp.wire.aggregator", False, 1, None, "ldp.wire"),
    ],
)
def test_relative_imports_resolve(module: str, is_package: bool, level: int, name: str | None, expected: str) -> None:
    node = ast.ImportFrom(module=name, names=[ast.alias("x")], level=level)
    assert _resolve(node, module, is_package) == expected
