"""``ldp-sim estimate --data FILE --column NAME --epsilon E``: the frequencies, mean or heavy hitters
of a file's columns under ε-LDP, with 95 % intervals, as a table, CSV, JSON and a plot.

It asks ``ldp.experiment.estimate.estimate_file`` (the short API's own code: for the same seed,
``ldp.frequencies(column, seed=S)`` and this command give bit-identical estimates). In process
by default; ``--processes P`` runs P client processes over loopback gRPC, each hosting its share
of the file's users (a declared ``--schema`` is then required: invariant I3, docs/design.md §2a).
``--bind HOST:PORT --schema S --users N`` holds no file: it is the aggregator alone, and remote
``ldp-sim clients --connect HOST:PORT --data FILE --schema S --budget E`` hold the users
(``estimate_served``).
Several ``--column`` split the budget equally: each user spends ε in all, ε/m per column, and the
output says so. The true values appear only with ``--truth`` (the experimenter's yardstick).
``--task sketch --candidates FILE_OR_LIST`` reads one column of *any* strings (an open domain,
undeclared) and estimates the frequencies of the analyst's candidate strings by Apple's sketches
(``--oracle cms|hcms``, ``--hashes K``, ``--width M``, ``--hash-seed N``;
``ldp.experiment.sketch_estimate.estimate_file_sketch``, the same as ``ldp.sketch_frequencies``):
the users publish only their fingerprints' field, so no ``--schema`` is needed, even with ``--processes``.
Source: issues 25, 26.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ldp.cli.argtypes import epsilon_type, existing_file, host_port, output_directory, process_count, seconds_type, seed_value, user_count
from ldp.cli.command import Command, say, stdout_console

__all__ = ["ESTIMATE", "estimate_command", "write_outputs", "DEFAULT_OUT"]

DEFAULT_OUT = "results/estimate"
ORACLE_CHOICES = ("auto", "grr", "oue", "olh", "hr", "ss", "sue", "duchi", "piecewise", "hybrid", "cms", "hcms")


def _top(text: str) -> int:
    from ldp.cli.argtypes import integer_text

    k = integer_text(text, "--top", " ≥ 1")
    if k < 1:
        raise argparse.ArgumentTypeError(f"--top must be an integer ≥ 1, got {text!r}")
    return k


def _bits(text: str) -> int:
    from ldp.cli.argtypes import integer_text

    b = integer_text(text, "--bits", " in 1..62")
    if not 1 <= b <= 62:
        raise argparse.ArgumentTypeError(f"--bits must be an integer in 1..62, got {text!r}")
    return b


def _power_of_two(flag: str, low: int, high: int) -> Any:
    def parse(text: str) -> int:
        from ldp.cli.argtypes import integer_text

        v = integer_text(text, flag, f" (a power of 2 in {low}..{high})")
        if not low <= v <= high or v & (v - 1):
            raise argparse.ArgumentTypeError(f"{flag} must be a power of 2 in {low}..{high}, got {text!r}")
        return v

    return parse


def _arguments(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--data", type=existing_file("the data file"), metavar="FILE", help="a CSV or Parquet file, one user per row")
    where.add_argument("--bind", type=host_port, metavar="HOST:PORT", help="no file here: listen for remote `ldp-sim clients --connect HOST:PORT --data FILE` (needs --schema, --users)")
    p.add_argument("--column", action="append", required=True, metavar="NAME", help="a column to estimate (repeat for several: the budget is split equally)")
    p.add_argument("--epsilon", type=epsilon_type("--epsilon"), default=1.0, metavar="E", help="each user's total ε (default 1)")
    p.add_argument(
        "--task", choices=("frequencies", "mean", "heavy-hitters", "sketch"), default="frequencies",
        help="what to estimate (default frequencies); sketch: the frequencies of --candidates strings in a column of any strings (Apple's sketches)",
    )
    p.add_argument(
        "--oracle", choices=ORACLE_CHOICES, default="auto",
        help="frequency oracle (grr oue olh hr ss sue), mean mechanism (duchi piecewise hybrid) or sketch (cms hcms); auto: the smallest exact variance",
    )
    p.add_argument("--candidates", metavar="FILE_OR_LIST", help="with --task sketch: the strings to estimate, a file (one per line) or a comma-separated list")
    p.add_argument("--hashes", type=_power_of_two("--hashes", 1, 1 << 16), metavar="K", help="with --task sketch: hash functions, the sketch's rows (a power of 2; default 4096)")
    p.add_argument("--width", type=_power_of_two("--width", 2, 1 << 15), metavar="M", help="with --task sketch: the sketch's width (a power of 2 ≥ 2; default 1024)")
    p.add_argument("--hash-seed", type=seed_value, metavar="N", help="with --task sketch: the public seed of the hash family (default 0)")
    p.add_argument("--top", type=_top, default=10, metavar="K", help="heavy hitters: how many (default 10)")
    p.add_argument(
        "--method", choices=("oracle", "pem", "treehist", "treehist-1round"), default="oracle",
        help="heavy hitters: oracle (the top K of one frequency oracle over the column's categories; default), "
        "or pem / treehist / treehist-1round (a prefix protocol over integers 0..2^B-1: needs --bits B; "
        "treehist-1round: one non-interactive round, each user drawing its own level, OLH only)",
    )
    p.add_argument("--bits", type=_bits, metavar="B", help="with --method pem, treehist or treehist-1round: the declared bit width of the column's integers (1..62)")
    p.add_argument("--processes", type=process_count, metavar="P", help="run P client processes over loopback gRPC (needs --schema); default: in process")
    p.add_argument("--schema", type=existing_file("the schema file"), metavar="S", help="the declared schema (JSON, `ldp-sim schema infer FILE` then reviewed); default: inferred, in process only")
    p.add_argument("--truth", action="store_true", help="also show the true values (computed from the file, outside the protocol)")
    p.add_argument("-o", "--out", default=DEFAULT_OUT, metavar="DIR", help=f"where to write estimates.csv, result.json, table.md, estimates.png (default {DEFAULT_OUT})")
    p.add_argument("--users", type=user_count, metavar="N", help="with --bind: how many users the remote clients hold")
    p.add_argument("--wait", type=seconds_type("the wait for client processes", zero=True), default=600.0, metavar="S", help="with --bind: seconds to wait for the clients (default 600)")
    p.add_argument("--seed", type=seed_value, metavar="N", help="derive the users' report key from N (reproducible); default: a fresh secret key")


def _cells(row: dict[str, Any], truth: bool) -> tuple[str, ...]:
    cells = (row["column"], str(row["label"]), row["oracle"], f"{row['epsilon']:g}", f"{row['estimate']:.4g}", f"[{row['low']:.4g}, {row['high']:.4g}]", f"{row['sd']:.3g}")
    return cells + ((f"{row['truth']:.4g}",) if truth else ())


def _headers(truth: bool) -> tuple[str, ...]:
    return ("column", "category", "oracle", "ε", "estimate", "95 % interval", "sd") + (("truth",) if truth else ())


def caption(results: list[Any], epsilon: float, users: int, where: str) -> str:
    """One line: the users, where they ran, and the budget and how it was split."""
    m = len(results)
    split = f"ε = {epsilon:g} per user" + (f", split equally over {m} columns (ε = {epsilon / m:g} each)" if m > 1 else "")
    return f"{users} users ({where}); {split}; each estimate ± 1.96 sd from the oracle's exact variance."


def write_outputs(results: list[Any], out: Path, note: str, truth: bool, seconds: float) -> list[Path]:
    """estimates.csv, result.json, table.md and estimates.png in ``out``."""
    from ldp.simulations.reporting import markdown_table, write_csv, write_json

    rows = [row for r in results for row in r.rows()]
    columns = ["column", "task", "oracle", "epsilon", "users", "label", "estimate", "low", "high", "sd"] + (["truth"] if truth else [])
    files = [
        write_csv(out / "estimates.csv", rows, columns),
        write_json(out / "result.json", {"note": note, "seconds": seconds, "results": [r.as_dict() for r in results]}),
    ]
    (out / "table.md").write_text(note + "\n\n" + markdown_table(_headers(truth), [_cells(row, truth) for row in rows]) + "\n", encoding="utf-8")  # ε and Unicode column names, whatever the locale
    files.append(out / "table.md")
    files.append(plot(results, out / "estimates.png", truth))
    return files


def plot(results: list[Any], path: Path, truth: bool) -> Path:
    """One panel per column: each category's (or the mean's) estimate with its 95 % interval,
    and the truth as a cross when asked for."""
    from ldp.simulations.reporting import new_figure, save_figure

    fig, axes = new_figure(len(results), width=max(4.8, min(9.0, 0.5 * max(len(r.labels) for r in results) + 2.5)), height=4.2)
    for ax, r in zip(axes, results):
        x = list(range(len(r.labels)))
        err = [[e - lo for e, lo in zip(r.estimates, r.low)], [hi - e for e, hi in zip(r.estimates, r.high)]]
        ax.errorbar(x, r.estimates, yerr=err, fmt="o", capsize=3, label="estimate ± 95 %")
        if truth and r.truth is not None:
            ax.plot(x, r.truth, "x", color="black", label="truth")
        ax.set_xticks(x, [str(v) for v in r.labels], rotation=45 if len(x) > 6 else 0)
        ax.set_xlabel("category" if r.task != "mean" else "column")
        ax.set_ylabel("mean" if r.task == "mean" else "frequency")
        ax.set_title(f"{r.column}: {r.task}, ε = {r.epsilon:g} ({r.oracle}), {r.users} users", fontsize=9)
        ax.legend(fontsize=8)
    save_figure(fig, path)
    return path


def estimate_command(ns: argparse.Namespace) -> int:
    from ldp.core.errors import ParameterError
    from ldp.experiment.estimate import estimate_file, estimate_served

    console = stdout_console()
    line = say(console)
    sketch_flags = [flag for flag, given in (("--candidates", ns.candidates is not None), ("--hashes", ns.hashes is not None), ("--width", ns.width is not None), ("--hash-seed", ns.hash_seed is not None)) if given]
    if ns.task != "sketch" and sketch_flags:
        raise ParameterError(f"{', '.join(sketch_flags)} go{'es' if len(sketch_flags) == 1 else ''} with --task sketch (the frequencies of candidate strings)")
    if ns.task == "sketch":
        return _sketch_command(ns, console, line)
    if ns.oracle in ("cms", "hcms"):
        raise ParameterError(f"--oracle {ns.oracle} is a sketch: it goes with --task sketch")
    if ns.method != "oracle" and ns.bits is None:
        raise ParameterError(f"--method {ns.method} needs --bits B, the declared bit width of the column's integers (1..62; every value in 0..2^B-1)")
    if ns.method == "oracle" and ns.bits is not None:
        raise ParameterError("--bits goes with --method pem or treehist or treehist-1round (heavy hitters of integers of a declared bit width)")
    if ns.bind is None and ns.users is not None:
        raise ParameterError("--users goes with --bind (remote clients); with --data the file says how many users")
    if ns.bind is not None:
        refused = [flag for flag, given in (("--processes", ns.processes is not None), ("--truth", ns.truth), ("--seed", ns.seed is not None)) if given]
        if refused:
            raise ParameterError(f"--bind serves remote clients, which hold the data and their own report key: {', '.join(refused)} cannot be used with it")
        if ns.method != "oracle":
            raise ParameterError(f"--method {ns.method} runs its rounds on users the command loads itself (--data FILE); with --bind use --method oracle")
        if ns.schema is None or ns.users is None:
            raise ParameterError("--bind needs --schema S (the declared schema the clients serve) and --users N (how many users they hold)")
    output_directory(ns.out)  # before any work: a bad -o is one line
    started = time.perf_counter()
    if ns.bind is not None:
        bound: list[str] = []

        def listening(address: str) -> None:
            bound.append(address)  # printed on stdout and flushed: scripts (and tests) read the port from this line
            print(f"ldp-sim estimate: listening on {address} for {ns.users} users", flush=True)

        results = estimate_served(ns.bind, ns.schema, ns.users, ns.column, ns.epsilon, task=ns.task, oracle=ns.oracle, top=ns.top, wait_s=ns.wait, on_listening=listening)
        where = f"remote client processes, aggregator on {bound[0]}"
    else:
        results = estimate_file(
            ns.data, ns.column, ns.epsilon, task=ns.task, schema=ns.schema, oracle=ns.oracle, processes=ns.processes, seed=ns.seed, truth=ns.truth, top=ns.top,
            method=ns.method, bits=ns.bits,
        )
        where = "in process" if ns.processes is None else f"{ns.processes} client process(es) over loopback gRPC"
    seconds = time.perf_counter() - started
    note = caption(results, ns.epsilon, results[0].users, where)
    from rich.table import Table

    how = f", {ns.method} over {ns.bits} bits" if ns.method != "oracle" else ""
    table = Table(title=f"{ns.task}{how} of {Path(ns.data).name if ns.data else 'the remote users'} ({seconds:.2f} s)")
    for h in _headers(ns.truth):
        table.add_column(h)
    for r in results:
        for row in r.rows():
            table.add_row(*_cells(row, ns.truth))
    console.print(table)
    line(note)
    files = write_outputs(results, Path(ns.out), note, ns.truth, seconds)
    line("wrote " + ", ".join(str(f) for f in files))
    return 0


def _sketch_command(ns: argparse.Namespace, console: Any, line: Any) -> int:
    """``--task sketch``: the frequencies of the candidate strings in one column of any strings
    (``ldp.experiment.sketch_estimate.estimate_file_sketch``, the API's own code)."""
    from ldp.core.errors import ParameterError
    from ldp.experiment.sketch_estimate import DEFAULT_HASHES, DEFAULT_WIDTH, candidate_list, estimate_file_sketch

    if ns.candidates is None:
        raise ParameterError("--task sketch needs --candidates FILE_OR_LIST: the strings to estimate (a file, one per line, or a comma-separated list)")
    refused = [flag for flag, given in (
        ("--bind", ns.bind is not None), ("--schema", ns.schema is not None), ("--method", ns.method != "oracle"), ("--bits", ns.bits is not None),
    ) if given]
    if refused:
        raise ParameterError(
            f"--task sketch reads one column of any strings from --data FILE and publishes only their fingerprints' field: "
            f"{', '.join(refused)} cannot be used with it"
        )
    if len(ns.column) != 1:
        raise ParameterError(f"--task sketch estimates one column, got {len(ns.column)} (--column {' --column '.join(ns.column)})")
    if ns.oracle not in ("auto", "cms", "hcms"):
        raise ParameterError(f"--task sketch takes --oracle auto, cms or hcms, got {ns.oracle!r}")
    candidates = candidate_list(ns.candidates)
    output_directory(ns.out)  # before any work: a bad -o is one line
    started = time.perf_counter()
    result = estimate_file_sketch(
        ns.data, ns.column[0], candidates, ns.epsilon, oracle=ns.oracle, hashes=ns.hashes or DEFAULT_HASHES, width=ns.width or DEFAULT_WIDTH,
        hash_seed=ns.hash_seed or 0, processes=ns.processes, seed=ns.seed, truth=ns.truth,
    )
    seconds = time.perf_counter() - started
    where = "in process" if ns.processes is None else f"{ns.processes} client process(es) over loopback gRPC"
    learner = result.learner or {}
    note = (
        f"{result.users} users ({where}); ε = {ns.epsilon:g} per user; {result.oracle} sketch, K = {learner.get('hashes')}, m = {learner.get('width')}, "
        f"hash_seed = {learner.get('hash_seed')}; each estimate ± 1.96 sd from the sketch's variance without the hash family's term (docs/sketches.md)."
    )
    from rich.table import Table

    table = Table(title=f"sketch of {Path(ns.data).name}, {len(candidates)} candidate(s) ({seconds:.2f} s)")
    for h in _headers(ns.truth):
        table.add_column(h)
    for row in result.rows():
        table.add_row(*_cells(row, ns.truth))
    console.print(table)
    line(note)
    files = write_outputs([result], Path(ns.out), note, ns.truth, seconds)
    line("wrote " + ", ".join(str(f) for f in files))
    return 0


ESTIMATE = Command(
    "estimate", "frequencies, mean, heavy hitters or candidate strings' frequencies (sketch) of a data file's column under ε-LDP",
    "Estimate the frequencies (or mean, or heavy hitters) of the columns of a CSV or Parquet file from ε-LDP reports of its users "
    "(one per row), in process or through client processes over loopback gRPC, with 95 % intervals from the oracle's exact variance. "
    "Writes a table, estimates.csv, result.json and estimates.png.",
    (
        "ldp-sim estimate --data users.csv --column colour --epsilon 1 --seed 0",
        "ldp-sim estimate --data users.csv --schema schema.json --column age --task mean --processes 2",
        "ldp-sim estimate --bind 0.0.0.0:50051 --schema schema.json --users 100000 --column colour   # remote `ldp-sim clients --connect` hold the file",
        "ldp-sim estimate --data visits.csv --column url --task sketch --candidates candidates.txt --epsilon 4 --seed 0",
    ),
    _arguments, estimate_command,
)
