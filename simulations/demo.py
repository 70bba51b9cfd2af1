"""`make demo`: the main job, quick (about a minute on 2 cores).

1. Randomized response: the debiased estimate of a fraction for ε ∈ {0.25, 0.5, 1, 2}, 10^5 users each.
2. The separations, measured (quick mode): users needed to learn MASKED-PARITY interactively
   (LI) and non-interactively (LNI-a, LNI-b), and PARITY by a trusted curator (A*, Occam) and by
   a local attempt — LNI ⊊ LI ⊊ CNI. Writes results/separation/{table.md, separation.png, ...}.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from rich.console import Console
from rich import box
from rich.table import Table
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ldp.local.oracle import InProcessLROracle
from simulations import randomized_response, separation


MODEL = {"local interactive": "LI", "local non-interactive": "LNI", "central": "CNI"}
CLASS = {"masked_parity": "MASKED-PARITY", "parity": "PARITY"}


def summary_table(result: dict) -> Table:
    """The separation result as a compact table that fits 80 columns (the full one is table.md)."""
    c = result["config"]
    table = Table(
        title=f"Users needed for error ≤ {c['alpha']} in ≥ {1 - c['beta']:.0%} of {c['trials']} trials (ε = {c['epsilon']})",
        caption="users: needed for error ≤ α; ÷ bound: users / (Lemma 4.3 local, Thm 3.8 A*, Thm 3.7 Occam); red: failed at the cap",
        box=box.SIMPLE_HEAD,
    )
    for col in ("class", "learner", "model", "d", "users", "error", "÷ bound"):
        table.add_column(col, justify="left" if col in ("class", "learner", "model") else "right", no_wrap=True, min_width=3 if col == "d" else None)
    previous = None
    for row in result["rows"]:
        family = CLASS.get(row["family"], row["family"])
        shown, previous = ("" if family == previous else family), family
        needed = f"{row['users_needed']:,}" if row["users_needed"] else f"> {c['cap']:,}"
        ratio = f"{row['measured_over_bound']:.3f}" if row["measured_over_bound"] else "—"
        style = "red" if row["users_needed"] is None else None
        table.add_row(
            shown, row["learner"], MODEL.get(row["model"], row["model"]), str(row["d"]),
            needed, f"{row['mean_error']:.3f}", ratio, style=style,
        )
    return table


def main(argv: list[str] | None = None) -> int:
    console = Console()
    out = Path("results/separation")

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
