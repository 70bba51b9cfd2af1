"""`make demo`: the main job, quick (about a minute on 2 cores).

1. Randomized response: the debiased estimate of a fraction for ε ∈ {0.25, 0.5, 1, 2}, 10^5 users each.
2. The separations, measured (quick mode): users needed to learn MASKED-PARITY interactively
   (LI) and by the fair one-round learner (LNI), with 95 % intervals, and PARITY by a trusted
   curator (A*, Occam) and by a local attempt, at d ≤ 12: the quick version cannot show the
   exponential LNI/LI gap (it starts at d ≈ 16; `make separation` runs d ≤ 24). Writes
   results/demo/separation/{table.md, separation.png, ...}; the full sweep writes results/separation.

Every table it prints is saved under ``--out`` (default ``results/demo``), as markdown, CSV and
JSON, and the paths are printed:

- ``randomized_response/``: ``table.md``, ``estimates.csv``, ``result.json`` and
  ``estimates.png`` (``randomized_response.write_rows``, what ``python -m
  ldp.simulations.randomized_response --out DIR`` writes);
- ``separation/``: what the separation writes (``table.md``, the CSVs, ``result.json``,
  ``separation.png``) and the compact table printed here, ``demo_summary.md``, ``.csv`` and ``.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from rich import box
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ldp.local.oracle import InProcessLROracle
from ldp.simulations import randomized_response, separation
from ldp.simulations.reporting import markdown_table, write_csv, write_json

OUT = Path("results/demo")  # the README's promise: the demo never overwrites a full run's results/<experiment>


def summary_table(result: dict) -> Table:
    """The separation result as a compact table that fits 80 columns (the full one is table.md)."""
    c = result["config"]
    table = Table(
        title=f"Users needed: error ≤ {c['alpha']} in ≥ {1 - c['beta']:.0%} of {c['trials']} trials, ε = {c['epsilon']:g}",
        caption=Text(separation.SUMMARY_CAPTION + "\n" + separation.QUICK_CAPTION),  # Text: "[min–max]" is words, not rich markup
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for col in separation.SUMMARY_COLUMNS:
        table.add_column(col, justify="left" if col in ("class", "learner", "model") else "right", no_wrap=True, min_width=3 if col == "d" else None)
    for row in separation.summary_rows(result):
        table.add_row(*row, style="red" if row[4].startswith(">") else None)
    return table


def write_summary(result: dict, out: Path) -> tuple[Path, ...]:
    """The compact table ``summary_table`` prints, saved in ``out`` as ``demo_summary.md`` (as
    printed: title, rows, caption), ``demo_summary.csv`` and ``demo_summary.json``; their paths.

    In the printed table a class is named on its first row only; in the CSV and JSON every row
    names its class, so that each row reads alone.
    """
    table = summary_table(result)
    title, caption = str(table.title), str(table.caption)
    columns = list(separation.SUMMARY_COLUMNS)
    printed = separation.summary_rows(result)
    records, family = [], ""
    for row in printed:
        family = row[0] or family
        records.append(dict(zip(columns, (family, *row[1:]))))
    out.mkdir(parents=True, exist_ok=True)
    (out / "demo_summary.md").write_text(f"# {title}\n\n" + markdown_table(columns, printed) + f"\n\n{caption}\n", encoding="utf-8")
    write_csv(out / "demo_summary.csv", records, columns)
    write_json(out / "demo_summary.json", {"title": title, "caption": caption, "columns": columns, "rows": records})
    return tuple(out / f"demo_summary.{ext}" for ext in ("md", "csv", "json"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ldp.simulations.demo", description="make demo: randomized response and the separations, quick")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where every table and figure is saved (default {OUT})")
    args = parser.parse_args(argv)
    console = Console()
    out = args.out / "separation"

    spec = randomized_response.population(100_000 * len(randomized_response.EPSILONS), seed=0)
    rows = asyncio.run(randomized_response.run(InProcessLROracle(spec), randomized_response.EPSILONS, randomized_response.referee(spec)))
    console.print(randomized_response.table(rows))
    saved = randomized_response.write_rows(rows, args.out / "randomized_response")
    console.print("saved: " + "   ".join(str(path) for path in saved), soft_wrap=True)

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task("separation (quick): starting", total=None)
        result = asyncio.run(
            separation.run(separation.quick_config(seed=0, out=str(out)), log=lambda line: bar.update(task, description=f"separation: {line.strip()}"))
        )
    console.print(summary_table(result))
    saved = write_summary(result, out)
    console.print("saved: " + "   ".join(str(path) for path in saved), soft_wrap=True)
    console.print(f"\nplot: [bold]{out / 'separation.png'}[/bold]   table: {out / 'table.md'}   ({result['seconds']} s)", soft_wrap=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
