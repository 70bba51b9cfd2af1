"""``ldp-sim schema infer FILE [--out F] [--columns A,B]``: a draft of a data file's declared schema,
written on the users' machine for them to review and widen before ``clients --data FILE --schema
S.json`` (invariant I3, docs/design.md §2a).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ldp.cli.argtypes import existing_file, output_file
from ldp.cli.command import Command
from ldp.core.errors import ParameterError

__all__ = ["SCHEMA"]


def _schema_arguments(schema: argparse.ArgumentParser) -> None:
    """`ldp-sim schema infer FILE [--out F] [--columns A,B]` (invariant I3, docs/design.md §2a)."""
    sub = schema.add_subparsers(dest="schema_command", required=True, metavar="infer")
    infer = sub.add_parser(
        "infer",
        help="a draft schema of FILE's integer columns, written on this machine for you to review and widen",
        description=(
            "Write a draft schema of a CSV or Parquet data file (one field per column), on this machine. "
            "The schema you declare with `clients --data FILE --schema S.json` is public: the aggregator reads it "
            "before any ε is spent. The draft does not copy your data's min, max or step (each range is widened to "
            "0..2^k-1, or -(2^k-1)..2^k-1, around the values, step 1), but it still tells their magnitude: widen "
            "each range to the column's public range before you declare it."
        ),
    )
    infer.add_argument("file", type=existing_file("the data file"), metavar="FILE", help="a CSV or Parquet file of the users' records")
    infer.add_argument("--out", metavar="F", default=None, help="write the draft to F (default: standard output)")
    infer.add_argument("--columns", metavar="A,B,...", default=None, help="the columns to describe, in order (default: all)")


def _schema(ns: argparse.Namespace) -> int:
    """`ldp-sim schema infer`: the draft (``ldp.core.datafile.draft_schema``) to --out or stdout,
    and on stderr a review note with the values it was drawn from (this terminal only: the
    inference never leaves the user's machine)."""
    from ldp.core.datafile import draft_schema

    columns = None if ns.columns is None else [c.strip() for c in ns.columns.split(",")]
    if ns.out is not None:
        output_file(ns.out)
    draft = draft_schema(ns.file, columns)
    text = draft.text()
    if ns.out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        try:
            Path(ns.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ParameterError(f"cannot write --out {ns.out}: {exc.strerror}") from None
    where = "standard output" if ns.out is None else ns.out
    rows = f"{draft.rows} row{'s' if draft.rows != 1 else ''}"
    lines = [
        f"ldp-sim schema: wrote a draft schema of {len(draft.observed)} column(s) of {ns.file} ({rows}) to {where}.",
        "ldp-sim schema: review it before you declare it: the schema is public, the aggregator reads it before any ε is spent.",
        "ldp-sim schema: the draft does not copy your values' min, max or step (ranges 0..2^k-1 or -(2^k-1)..2^k-1, step 1),",
        "ldp-sim schema: but it tells their magnitude. Your values (shown here only) and the draft:",
    ]
    for seen, f in zip(draft.observed, draft.schema):
        step = "one value" if seen.step == 0 else f"step {seen.step}"
        lines.append(f"  {seen.column}: values {seen.low}..{seen.high} ({step}) -> draft {f.low}..{f.high}")
    lines.append(
        "ldp-sim schema: widen each range to what the column may publicly hold (e.g. ages 0..120), set a step > 1 only where "
        f"that is public knowledge, then declare it: ldp-sim clients --data {ns.file} --schema {'schema.json' if ns.out is None else ns.out} ..."
    )
    print("\n".join(lines), file=sys.stderr, flush=True)
    return 0


SCHEMA = Command(
    "schema", "write a draft schema of a data file, to review and widen before `clients --schema`",
    "Draft the declared schema of a CSV or Parquet data file on this machine; review it and widen each range to what the column "
    "may publicly hold before `clients --data FILE --schema S.json`.",
    ("ldp-sim schema infer users.csv --out schema.json",),
    _schema_arguments, _schema,
)
