"""Every ``ldp-sim`` subcommand is built the same way (``ldp.cli.main.COMMANDS``): its ``--help``
has a description and at least one example, and ``main`` dispatches through the table.

Each ``--help`` runs as a real process. The checker is shown to catch a help page without a
description and one without an example (the broken variants). Deterministic: no clock.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ldp.cli.main import COMMANDS
from tests.waits import PROCESS_WAIT_S

LDP_SIM = Path(sys.executable).with_name("ldp-sim")


def help_problems(name: str, text: str) -> list[str]:
    """What the ``--help`` page of ``ldp-sim NAME`` lacks: a description between the usage and the
    arguments, and an ``example:`` section whose lines are ``ldp-sim NAME ...`` commands."""
    problems = []
    head = text.split("\n\n")
    body = [block for block in head[1:] if not block.startswith(("positional arguments:", "options:", "example:", "  "))]
    if not body or len(" ".join(body).split()) < 8:
        problems.append("no description")
    _, sep, examples = text.partition("\nexample:\n")
    lines = [line.strip() for line in examples.splitlines() if line.strip()]
    if not sep or not lines:
        problems.append("no example")
    elif not all(line.startswith(f"ldp-sim {name}") for line in lines):
        problems.append(f"an example that is not an `ldp-sim {name}` command: {lines}")
    return problems


@pytest.mark.parametrize("name", [c.name for c in COMMANDS])
def test_every_subcommand_help_has_a_description_and_an_example(name: str) -> None:
    out = subprocess.run([str(LDP_SIM), name, "--help"], capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert out.returncode == 0, out.stderr
    assert help_problems(name, out.stdout) == [], out.stdout


def test_main_dispatches_through_the_table() -> None:
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names))
    assert all(callable(c.add_arguments) and callable(c.run) for c in COMMANDS), COMMANDS
    assert {"run", "serve", "clients", "certs", "population", "list", "schema", "lab", "classroom", "join"} <= set(names)


def test_the_checker_catches_a_page_without_description_or_example() -> None:
    good = "usage: ldp-sim list [-h]\n\nList the experiments that ldp-sim run knows, built-in or plug-in.\n\noptions:\n  -h, --help  help\n\nexample:\n  ldp-sim list\n"
    assert help_problems("list", good) == []
    no_description = "usage: ldp-sim list [-h]\n\noptions:\n  -h, --help  help\n\nexample:\n  ldp-sim list\n"
    assert help_problems("list", no_description) == ["no description"]
    no_example = "usage: ldp-sim list [-h]\n\nList the experiments that ldp-sim run knows, built-in or plug-in.\n\noptions:\n  -h, --help  help\n"
    assert help_problems("list", no_example) == ["no example"]
    wrong_example = good.replace("  ldp-sim list\n", "  ldp-sim run rr-demo\n")
    assert help_problems("list", wrong_example) and "not an `ldp-sim list` command" in help_problems("list", wrong_example)[0]
