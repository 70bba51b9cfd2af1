"""How every ``ldp-sim`` subcommand is built: a ``Command`` spec (help line, description, examples,
``add_arguments(parser)`` and ``run(ns)`` → exit code), listed in ``ldp.cli.main.COMMANDS``.

The handlers print through ``stdout_console`` (rich), so a piped run keeps its table rows whole.
Source: issue 24 ("One CLI package").
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console

__all__ = ["Command", "stdout_console", "say"]


@dataclass(frozen=True)
class Command:
    """One ``ldp-sim`` subcommand: its help line, description and examples (``--help``), how its
    arguments are declared (``add_arguments(parser)``) and its handler (``run(ns)`` → exit code;
    user mistakes raise ``LDPError``, which ``ldp.cli.main.main`` prints in one line, exit 2)."""

    name: str
    help: str
    summary: str
    examples: tuple[str, ...]
    add_arguments: Callable[[argparse.ArgumentParser], object]
    run: Callable[[argparse.Namespace], int]

    @property
    def description(self) -> str:
        return textwrap.fill(self.summary, width=100)


def stdout_console() -> Console:
    """The console the handlers print on: standard output, 200 columns wide when piped to a file
    (no terminal width to respect: table rows stay whole)."""
    console = Console(stderr=False)
    if not console.is_terminal:
        console = Console(stderr=False, width=200)
    return console


def say(console: Console) -> Callable[[str], None]:
    """A line printer on ``console`` that reads no markup (file names may hold brackets)."""
    return lambda line: console.print(line, markup=False, highlight=False)
