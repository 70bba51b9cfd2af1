"""``make test`` runs the suite with pytest-xdist (``-n auto --dist loadgroup``, tests/conftest.py).

Checked on a small suite in a temporary folder, run as ``make test`` runs it, with two workers:
a module-scoped fixture is built once even though the other tests are spread over both workers,
and a ``timeout`` mark (a hang guard) is doubled under xdist. The broken variant — plain
``--dist load``, which sends each test wherever a worker is free — builds the fixture twice, and the
same check sees it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from tests.waits import PROCESS_WAIT_S

pytest_plugins = ["pytester"]

SHARED = '''
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(7)


@pytest.fixture(scope="module")
def shared():
    with open(os.environ["BUILT"], "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")


@pytest.mark.parametrize("i", range(12))
def test_uses_shared(shared, i, request):
    assert request.node.get_closest_marker("timeout").args[0] == 14  # doubled under two workers
    Path(os.environ["RAN"], f"shared-{i}").write_text(os.environ["PYTEST_XDIST_WORKER"])
'''

ALONE = '''
import os
from pathlib import Path

import pytest


@pytest.mark.parametrize("i", range(12))
def test_alone(i):
    Path(os.environ["RAN"], f"alone-{i}").write_text(os.environ["PYTEST_XDIST_WORKER"])
'''


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, dist: str) -> tuple[list[str], set[str]]:
    """(the workers that built the fixture, one entry a build; the workers that ran any test)."""
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text(encoding="utf-8"))
    tests = pytester.mkdir("tests")
    (tests / "test_shared.py").write_text(SHARED)
    (tests / "test_alone.py").write_text(ALONE)
    built, ran = pytester.path / f"built-{dist}.txt", pytester.mkdir(f"ran-{dist}")
    monkeypatch.setenv("BUILT", str(built))
    monkeypatch.setenv("RAN", str(ran))
    result = pytester.runpytest_subprocess("-n", "2", "--dist", dist, "-p", "no:cacheprovider", "tests", timeout=PROCESS_WAIT_S)
    result.assert_outcomes(passed=24)
    return built.read_text().split(), {p.read_text() for p in ran.iterdir()}


def test_make_tests_scheduler_builds_a_module_fixture_once(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    built, workers = _run(pytester, monkeypatch, "loadgroup")
    assert workers == {"gw0", "gw1"}  # the run was parallel: both workers ran tests
    assert len(built) == 1, built


def test_the_broken_variant_builds_it_on_both_workers(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain load balancing is what the scheduler exists to avoid; the check above must see it.
    (Which tests go where is up to timing: over 12 tests, both workers get some of the shared
    module's tests unless one worker runs 12 of them before the other starts one.)"""
    built, _ = _run(pytester, monkeypatch, "load")
    assert sorted(built) == ["gw0", "gw1"], built


def test_hypothesis_has_no_per_example_deadline() -> None:
    assert settings().deadline is None  # a wall-clock assert otherwise (200 ms)
