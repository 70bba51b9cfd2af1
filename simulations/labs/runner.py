"""Run a lab in a terminal the way a notebook shows it: its narrative between its outputs.

A lab is a jupytext "percent" script: a ``# %% [markdown]`` cell holds narrative (every line a
comment), a ``# %%`` cell holds code. ``python -m ldp.simulations.labs.labN_...`` runs the code and
skips the narrative (it is comments); a notebook shows both. ``python -m ldp.simulations.labs.runner
LAB [--result FILE.json]`` (what ``ldp-sim lab N`` starts, through the lab's experiment,
``ldp.simulations.labs.experiments``) shows both in a terminal: it splits the script into cells,
prints each markdown cell as rich Markdown and executes each code cell, in order, in one module
namespace (as a kernel would), so every explanation appears right before the output it explains;
``--result`` writes the lab's ``RESULT`` (its table and figures) there as JSON.

The split is a small parser of the percent format, so running a lab needs no jupytext (a test
dependency only; the tests check that this parser and jupytext cut every lab into the same cells).

The labs' switches are environment variables, read by ``ldp.simulations.labs.common`` with
``env_switch``: ``LDP_QUICK`` (default off) and ``LDP_SOLUTIONS`` (default on) take 1/0,
true/false, yes/no or on/off; anything else is an error rather than silently the default.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.markdown import Markdown

__all__ = ["Cell", "env_switch", "split_cells", "run_lab", "write_result", "main"]

_ON = {"1", "true", "yes", "on"}
_OFF = {"0", "false", "no", "off"}
_MARKER = re.compile(r"^# %%(?P<rest>.*)$")
_KIND = re.compile(r"\[(?P<kind>markdown|md|raw)\]")


def env_switch(name: str, default: bool, environ: Mapping[str, str] | None = None) -> bool:
    """The on/off switch ``name`` from the environment; ``default`` when unset or empty.

    Raises ValueError (naming the variable and the accepted values) for any other value, so a typo
    such as ``LDP_QUICK=ture`` is reported instead of quietly running at full size.
    """
    raw = (os.environ if environ is None else environ).get(name, "")
    value = raw.strip().lower()
    if not value:
        return default
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ValueError(f"{name} must be 1 or 0 (or true/false, yes/no, on/off), got {raw!r}")


@dataclass(frozen=True)
class Cell:
    """One cell of a percent script: ``kind`` is "markdown", "code" or "raw"; ``line`` is the file's
    line number of the cell's first source line (tracebacks point into the lab file)."""

    kind: str
    source: str
    line: int


def _uncomment(line: str) -> str:
    if line.startswith("# "):
        return line[2:]
    return line[1:] if line.startswith("#") else line


def split_cells(text: str) -> list[Cell]:
    """The cells of a jupytext percent script, in order; cells with nothing but blank lines are dropped."""
    cells: list[Cell] = []
    kind, first = "code", 1  # text before the first marker is a code cell
    body: list[str] = []

    def close() -> None:
        while body and not body[-1].strip():
            body.pop()
        if kind == "markdown":
            lines = [_uncomment(line) for line in body]
        else:
            lines = list(body)
        if any(line.strip() for line in lines):
            cells.append(Cell(kind, "\n".join(lines), first))

    for number, line in enumerate(text.splitlines(), 1):
        marker = _MARKER.match(line)
        if marker is None:
            body.append(line)
            continue
        close()
        found = _KIND.search(marker.group("rest"))
        kind = "code" if found is None else ("raw" if found.group("kind") == "raw" else "markdown")
        first, body = number + 1, []
    close()
    return cells


def _console() -> Console:
    from rich.console import Console  # rich is imported when a lab runs, not with env_switch

    console = Console()
    if not console.is_terminal:  # piped or captured: no terminal width, keep the narrative readable
        console = Console(width=100)
    return console


def _print_markdown(console: Console, markdown: Markdown) -> None:
    console.print()
    if console.is_terminal:
        console.print(markdown)
    else:  # a file or a pipe: no padding to the console's width at the end of every line
        with console.capture() as captured:
            console.print(markdown)
        console.file.write("\n".join(line.rstrip() for line in captured.get().splitlines()) + "\n")
        console.file.flush()
    console.print()


def run_lab(path: Path | str, console: Console | None = None) -> dict[str, Any]:
    """Execute the lab at ``path`` cell by cell, printing its markdown cells with rich; returns
    the namespace its cells ran in (``RESULT`` there is the lab's ``ExperimentResult``).

    The code cells run in one fresh module named ``__main__`` (as ``python -m`` would run the lab),
    installed in ``sys.modules`` while they run; an exception in a cell propagates with a traceback
    into the lab file (a failing lab is a bug, not a user mistake).
    """
    from rich.markdown import Markdown

    path = Path(path)
    console = console or _console()
    module = types.ModuleType("__main__")
    module.__file__ = str(path)
    previous = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        for cell in split_cells(path.read_text(encoding="utf-8")):
            if cell.kind == "markdown":
                sys.stdout.flush()
                _print_markdown(console, Markdown(cell.source))
            elif cell.kind == "code":
                code = compile("\n" * (cell.line - 1) + cell.source, str(path), "exec")
                exec(code, module.__dict__)  # noqa: S102 - the lab's own code, as `python -m` would run it
                sys.stdout.flush()
    finally:
        if previous is not None:
            sys.modules["__main__"] = previous
    return module.__dict__


def write_result(namespace: Mapping[str, Any], path: Path | str) -> None:
    """Write the lab's ``RESULT`` (an ``ExperimentResult``, ``common.lab_result``) to ``path`` as
    JSON, for the process that started the lab (``ldp.simulations.labs.experiments.Lab``)."""
    from ldp.experiment.protocol import ExperimentResult

    result = namespace.get("RESULT")
    if not isinstance(result, ExperimentResult):
        raise TypeError(f"the lab defines no RESULT = lab_result(...) (got {type(result).__name__})")
    Path(path).write_text(json.dumps(result.to_json(), indent=1), encoding="utf-8")


def lab_path(lab: str) -> Path:
    """A lab's file from its path (``….py``) or its module name (``ldp.simulations.labs.lab2_budgets``)."""
    if lab.endswith(".py"):
        return Path(lab)
    spec = importlib.util.find_spec(lab)
    if spec is None or spec.origin is None:
        raise ValueError(f"no lab module {lab!r}")
    return Path(spec.origin)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    result_path = None
    if len(args) == 3 and args[1] == "--result":
        args, result_path = args[:1], args[2]
    if len(args) != 1:
        print("usage: python -m ldp.simulations.labs.runner (LAB.py | ldp.simulations.labs.labN_name) [--result FILE.json]", file=sys.stderr)
        return 2
    try:
        path = lab_path(args[0])
    except (ValueError, ImportError) as exc:
        print(f"runner: error: {exc}", file=sys.stderr)
        return 2
    if not path.is_file():
        print(f"runner: error: no lab file {str(path)!r}", file=sys.stderr)
        return 2
    try:
        namespace = run_lab(path)
        if result_path is not None:
            write_result(namespace, result_path)
    except KeyboardInterrupt:  # Ctrl-C: the lab's `async with` blocks have closed; no traceback
        from ldp.wire.launcher import quiet_grpc_after_interrupt

        quiet_grpc_after_interrupt()
        return 130  # (`ldp-sim lab` says "interrupted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
