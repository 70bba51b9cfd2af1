"""The one-import API: ``import ldp`` is light, every exported name resolves, and the package
docstring's example runs (doctest) — so the README's tour cannot silently rot."""

from __future__ import annotations

import doctest
import subprocess
import sys

import pytest

import ldp
from tests.waits import PROCESS_WAIT_S


@pytest.mark.parametrize("name", sorted(set(ldp.__all__) - {"__version__"}))
def test_every_exported_name_resolves(name: str) -> None:
    assert getattr(ldp, name) is not None
    assert name in dir(ldp)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ldp.nope  # noqa: B018


def test_import_ldp_loads_no_transport_and_no_heavy_library() -> None:
    """A broken variant (eager imports in ldp/__init__.py) would load grpc and scipy here."""
    code = "import sys, ldp; print(sorted(m for m in ('grpc', 'scipy', 'matplotlib', 'ldp.wire.launcher', 'ldp.core.randomizers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def test_the_package_docstring_example_runs() -> None:
    failures, tried = doctest.testmod(ldp, verbose=False, raise_on_error=False)
    assert tried >= 8 and failures == 0


async def test_run_works_inside_a_running_event_loop() -> None:
    """As in a notebook: a loop is running, and ``ldp.run`` still returns the result."""

    async def answer() -> int:
        return 42

    assert ldp.run(answer()) == 42
