"""Test-wide setup.

``ldp-sim clients`` with ``--data`` or ``--key-file`` keeps the users' ledger durable by default
in the user's state directory (invariant I2, docs/design.md §4). No test may write there, and no
test may find another's ledger: every test, and every process it starts (they inherit the
environment), gets its own empty state directory through ``LDP_STATE_DIR``.

Hypothesis: no per-example deadline by default. Its default (200 ms) is a wall-clock assert, which
a loaded machine or a parallel run (``make test`` runs pytest-xdist) fails however right the code
is; a test that wants a hang guard sets its own ``deadline``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("ldp", deadline=None)
settings.load_profile("ldp")


@pytest.fixture(autouse=True)
def _private_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("LDP_STATE_DIR", str(tmp_path_factory.mktemp("ldp-state")))
    yield


# A module-scoped fixture — a Ray cluster, a class of 30 students, a built wheel, a cluster of
# client processes — is built by every worker that runs one of its module's tests.
_MODULE_FIXTURE = re.compile(r"""\bscope\s*=\s*["']module["']""")
_GROUP = re.compile(r"""xdist_group\(\s*(?:name\s*=\s*)?["']([^"']+)["']""")


@pytest.hookimpl(optionalhook=True)  # (an xdist hook: pytest without xdist must not reject it)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` (``make test``): each test file that defines a module-scoped fixture
    is one unit, run on one worker in file order, so the fixture is built once; the files that
    name an ``xdist_group`` are one unit per name; every other test goes alone to whichever worker
    is free. (xdist's own loadgroup reads ``xdist_group`` marks through the test ids, which pytest
    9.2 no longer lets it rename: pytest-xdist issue #1386. Here a file's mark groups the whole file.)"""
    if config.getvalue("dist") != "loadgroup":
        return None  # xdist's own scheduler
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    root = config.rootpath
    units: dict[str, str] = {}  # test file → its unit, for the files that stay on one worker
    for path in (root / "tests").rglob("test_*.py"):
        text, name = path.read_text(encoding="utf-8"), path.relative_to(root).as_posix()
        if group := _GROUP.search(text):
            units[name] = "group " + group[1]
        elif _MODULE_FIXTURE.search(text):
            units[name] = name

    class ModuleFixtureScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return units.get(nodeid.split("::", 1)[0], nodeid)

    return ModuleFixtureScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, a test's ``timeout`` mark (pytest-timeout: a guard against hangs, never
    a claim about speed) is doubled: each worker, and the client processes its test starts, share
    the cores with the other workers, so a test may take up to twice its serial time without
    hanging. (The ini default, 300 s, is left as it is.)"""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) < 2:
        return
    for item in items:
        mark = item.get_closest_marker("timeout")
        if mark is not None and mark.args and isinstance(mark.args[0], int | float) and mark.args[0] > 0:
            item.add_marker(pytest.mark.timeout(2 * mark.args[0], *mark.args[1:], **mark.kwargs), append=False)
