"""``ldp-sim schema infer FILE [--out F] [--columns A,B]``: a draft of a data file's declared schema,
written on the users' machine for them to review and widen before ``clients --data FILE --schema
S.json`` (invariant I3, docs/design.md §2a).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ldp.cli.argtypes import existing_file, output_file
from ldp.cli.command import Command
from ldp.core.errors import ParameterError

if TYPE_CHECKING:
    from ldp.core.datafile import ColumnRange
    from ldp.core.datafile_schema import ColumnSpec

__all__ = ["SCHEMA"]


def _schema_arguments(schema: argparse.ArgumentParser) -> None:
    """`ldp-sim schema infer FILE [--out F] [--columns A,B]` (invariant I3, docs/design.md §2a)."""
    sub = schema.add_subparsers(dest="schema_command", required=True, metavar="infer")
    infer = sub.add_parser(
        "infer",
        help="a draft schema of FILE's columns, written on this machine for you to review and widen",
        description=(
            "Write a draft schema of a CSV or Parquet data file (one field per column), on this machine. "
            "The schema you declare with `clients --data FILE --schema S.json` is public: the aggregator reads it "
            "before any ε is spent. The draft does not copy your data's min, max or step (an integer column's range is "
            "widened to 0..2^k-1, or -(2^k-1)..2^k-1, step 1; other numbers get a float grid on 0..2^k or -2^k..2^k), "
            "but it still tells their magnitude: widen each range to the column's public range before you declare it. "
            "A text column becomes a category field that LISTS THE LABELS FOUND IN YOUR FILE: they are data values, so keep "
            "only labels that are public knowledge and add any that may occur. A column with empty cells declares "
            "\"missing\": \"category\" (or choose \"refuse\" or \"drop\")."
        ),
    )
    infer.add_argument("file", type=existing_file("the data file"), metavar="FILE", help="a CSV or Parquet file of the users' records")
    infer.add_argument("--out", metavar="F", default=None, help="write the draft to F (default: standard output)")
    infer.add_argument("--columns", metavar="A,B,...", default=None, help="the columns to describe, in order (default: all)")


def _num(x: float) -> str:
    """A number as a person writes it: 1048576, 0.001, 3750.5 (never 1.04858e+06)."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _review_line(seen: ColumnRange, spec: ColumnSpec) -> str:
    """One column of the review note: what the file holds (shown here only) and the draft."""
    gaps = f", {seen.missing} empty cell(s) -> \"missing\": \"{spec.missing}\"" if seen.missing else ""
    if seen.kind == "category":
        shown = ", ".join(repr(c) for c in seen.categories[:6]) + (", ..." if len(seen.categories) > 6 else "")
        return (
            f"  {seen.column}: {len(seen.categories)} label(s) {shown}{gaps} -> draft category field LISTING THEM "
            "(copied from your file: keep only public labels)"
        )
    f = spec.field()
    if seen.kind == "integer":
        step = "one value" if seen.step == 0 else f"step {seen.step}"
        found = f"values {seen.low}..{seen.high} ({step})"
    else:
        found = f"numbers {_num(seen.low)}..{_num(seen.high)}"
    if spec.type == "float":
        return (
            f"  {seen.column}: {found}{gaps} -> draft float {_num(spec.low)}..{_num(spec.high)}, "
            f"resolution {_num(spec.step)} (values rounded to it)"
        )
    if spec.coded:
        return f"  {seen.column}: {found}{gaps} -> draft {spec.low}..{spec.high} (records hold 0..{f.high})"
    return f"  {seen.column}: {found}{gaps} -> draft {f.low}..{f.high}"


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
        "ldp-sim schema: the draft does not copy your values' min, max or step (ranges 0..2^k-1 or -(2^k-1)..2^k-1, step 1,",
        "ldp-sim schema: or a float grid on 0..2^k), but it tells their magnitude; a category field lists the labels found",
        "ldp-sim schema: in your file. Your values (shown here only) and the draft:",
    ]
    for seen, spec in zip(draft.observed, draft.declaration.specs):
        lines.append(_review_line(seen, spec))
    lines.append(
        "ldp-sim schema: widen each range to what the column may publicly hold (e.g. ages 0..120), set a step > 1 only where "
        "that is public knowledge, keep only public labels, choose each \"missing\" and \"out_of_range\" policy "
        "(docs: ldp.core.datafile_schema), then declare it: "
        f"ldp-sim clients --data {ns.file} --schema {'schema.json' if ns.out is None else ns.out} ..."
    )
    print("\n".join(lines), file=sys.stderr, flush=True)
    return 0


SCHEMA = Command(
    "schema", "write a draft schema of a data file (integers, floats, categories, missing values), to review before `clients --schema`",
    "Draft the declared schema of a CSV or Parquet data file on this machine; review it and widen each range to what the column "
    "may publicly hold before `clients --data FILE --schema S.json`.",
    ("ldp-sim schema infer users.csv --out schema.json",),
    _schema_arguments, _schema,
)
