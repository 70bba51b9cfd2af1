"""docs/quickstart.md ("the frequencies of a column in five minutes", issue 25): every ```python
block runs, in order, in one namespace, as a reader would paste them; a block that raises fails
the test with the block's number. A page with no block (or a block the regex misses) fails too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "quickstart.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)

pytestmark = pytest.mark.timeout(180)


def blocks() -> list[str]:
    return BLOCK.findall(PAGE.read_text())


def test_the_page_has_python_blocks() -> None:
    assert len(blocks()) == PAGE.read_text().count("```python") >= 5


def test_every_python_block_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__quickstart__"}
    for k, code in enumerate(blocks(), 1):
        try:
            exec(compile(code, f"{PAGE.name} block {k}", "exec"), namespace)  # noqa: S102 - the page's own code
        except Exception as exc:  # noqa: BLE001 - name the block that failed
            pytest.fail(f"docs/quickstart.md block {k} raised {type(exc).__name__}: {exc}")
    printed = capsys.readouterr().out
    assert "95 % interval" in printed and "grr" in printed
