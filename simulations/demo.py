"""`make demo`: the main job, quick (about a minute on 2 cores).

1. Randomized response: the debiased estimate of a fraction for ε ∈ {0.25, 0.5, 1, 2}, 10^5 users each.
2. The separations, measured (quick mode): users needed to learn MASKED-PARITY interactively
   (LI) and by the fair one-round learner (LNI), with 95 % intervals, and PARITY by a trusted
   curator (A*, Occam) and by a local attempt, at d ≤ 12: the quick version cannot show the
   exponential LNI/LI gap (it starts at d ≈ 16; `make separation` runs d ≤ 24). Writes
   results/demo/separation/{table.md, separation.png, ...}; the full sweep writes results/separation.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from rich import box
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ldp.local.oracle import InProcessLROracle
from ldp.simulations import randomized_response, separation


def summary_table(result: dict) -> Table:
    """The separation result as a compact table that fits 80 columns (the full one is table.md)."""
    c = result["config"]
    table = Table(
        title=f"Users needed: error ≤ {c['alpha']} in ≥ {1 - c['beta']:.0%} of {c['trials']} trials, ε = {c['epsilon']:g}",
        caption=separation.SUMMARY_CAPTION + "\n" + separation.QUICK_CAPTION,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for col in separation.SUMMARY_COLUMNS:
        table.add_column(col, justify="left" if col in ("class", "learner", "model") else "right", no_wrap=True, min_width=3 if col == "d" else None)
    for row in separation.summary_rows(result):
        table.add_row(*row, style="red" if row[4].startswith(">") else None)
    return table


def main(argv: list[str] | None = None) -> int:
    console = Console()
    out = Path("results/demo/separation")

    spec = randomized_response.population(100_000 * len(randomized_response.EPSILONS), seed=0)
    rows = asyncio.run(randomized_response.run(InProcessLROracle(spec), randomized_response.EPSILONS, randomized_response.referee(spec)))
    console.print(randomized_response.table(rows))

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task("separation (quick): starting", total=None)
        result = asyncio.run(
            separation.run(separation.quick_config(seed=0, out=str(out)), log=lambda line: bar.update(task, description=f"separation: {line.strip()}"))
        )
    console.print(summary_table(result))
    console.print(f"\nplot: [bold]{out / 'separation.png'}[/bold]   table: {out / 'table.md'}   ({result['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
