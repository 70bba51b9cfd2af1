"""The simulations as ``ldp-sim run`` experiments: separation, sq-local, sq-sample-complexity,
pure-vs-approximate, sanitization, rr-demo, real-data, and geometry.

What: thin adapters from the CLI's ``ExperimentArgs`` (``--seed``, ``--epsilon``, ``--quick``,
``--out``, ``-o key=value`` for any field of the simulation's ``Config``) to each simulation's
own ``run``, and from its result to an ``ExperimentResult`` (a table, notes, the files written).

- ``separation`` and ``sq-local`` take an oracle factory (mode ``"factory"``): many populations,
  each served in process or by one cluster of gRPC client processes that every new population
  is loaded into.
- ``sq-sample-complexity``, ``pure-vs-approximate``, ``sanitization`` and ``geometry`` never use the LR oracle
  (central model, exact computations): in process only.
- ``rr-demo``: ``ldp.cli.experiments.rr_demo`` (the worked example there), with its table also
  written as files.
- ``real-data``: ``simulations.real_data``, a CC0 data file hosted by client processes it spawns on
  loopback (mode ``"standalone"``: the data, not a population spec, is the users').

Files go to ``--out``, else ``results/<experiment name>`` (``separation --quick``: ``results/demo/separation``).

Guarantee: importing this module is cheap — the simulation modules (and scipy, matplotlib) are
imported only when their experiment runs, so ``ldp-sim list`` and the client processes stay light.
Source: docs/design.md §5; the simulations' own docstrings.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from ldp.cli import experiments
from ldp.cli.experiments import ExperimentArgs, ExperimentResult, OracleFactory, apply_options, register_experiment
from ldp.local.oracle import LROracle

__all__: list[str] = []  # registration only


def _files(out: Path, names: tuple[str, ...]) -> tuple[Path, ...]:
    return tuple(out / n for n in names if (out / n).exists())


# --- rr-demo (computed by ldp.cli.experiments.rr_demo): its table, also as files ---


async def rr_demo(oracle: LROracle, args: ExperimentArgs) -> ExperimentResult:
    """``ldp.cli.experiments.rr_demo`` (randomized response of a bit, estimate vs truth per ε),
    with its table also written as table.md, estimates.csv, result.json and estimates.png to
    ``--out`` (default ``results/rr-demo``)."""
    from simulations import randomized_response as rr

    result = await experiments.rr_demo(oracle, args)
    return dataclasses.replace(result, files=rr.write_demo_outputs(result, Path(args.out or rr.DEMO_OUT)))


register_experiment(
    "rr-demo",
    rr_demo,
    experiments.rr_demo_population,
    description="randomized response of a bit: estimate vs truth per ε",
    default_users=100_000,
)


# --- separation (KLNRS §3.2, §5) ---


async def separation(factory: OracleFactory, args: ExperimentArgs) -> ExperimentResult:
    """Users needed per learner and d (``simulations.separation.run``), one population per trial."""
    from simulations import separation as sep

    out = args.out or ("results/demo/separation" if args.quick else "results/separation")
    config = sep.quick_config(args.seed, out) if args.quick else sep.Config(seed=args.seed, out=out)
    config = apply_options(dataclasses.replace(config, epsilon=args.epsilon), args.options)
    # One log line per (learner, d) row and one per error curve: that is the bar's unit.
    total = sum(len(sep.LEARNERS[name].dims(config)) for name in config.learners)
    total += sum(1 for name in ("LI", "LNI", "LNI-b") if name in config.learners and config.curve_users)
    done = 0

    def log(line: str) -> None:
        nonlocal done
        done += 1
        args.log(line)
        args.progress(done, total)

    args.progress(0, total)
    result = await sep.run(config, factory, log=log)
    table = result["table"]
    head, _, curves = table.partition("\nMean error against users")
    notes = head.split("\n\n", 1)[0] + "\n" + sep.SUMMARY_CAPTION
    if curves:
        notes += "\n\nMean error against users" + curves.rstrip()
    return ExperimentResult(
        f"Users needed: LNI ⊊ LI (MASKED-PARITY) and local ⊊ central (PARITY), {result['seconds']} s",
        sep.SUMMARY_COLUMNS,
        sep.summary_rows(result),
        files=tuple(Path(f) for f in result.get("files", ())),
        notes=notes,
    )


register_experiment(
    "separation",
    separation,
    description="users needed vs d with 95 % intervals: LI against the fair LNI on MASKED-PARITY (d ≤ 24), central/local PARITY",
    default_users=None,
    needs_factory=True,
    takes_options=True,
)


# --- sq-local (KLNRS Lemmas 4.4, 4.5) ---


async def sq_local(factory: OracleFactory, args: ExperimentArgs) -> ExperimentResult:
    """Direct runs on users (through the factory) vs the SQ-backed simulation (in the aggregator)."""
    from simulations import sq_local as sq
    from simulations.reporting import format_rows

    config = sq.quick_config(args.seed) if args.quick else sq.Config(seed=args.seed)
    config = apply_options(dataclasses.replace(config, epsilon=args.epsilon), args.options)
    out = Path(args.out or sq.DEFAULT_OUT)
    started = time.perf_counter()
    rows, hists = [], {}
    args.progress(0, len(sq.ALGORITHMS))
    for k, name in enumerate(sq.ALGORITHMS):
        row, hist = await sq.measure(config, name, factory)
        rows.append(row)
        hists[name] = hist
        args.log(f"{name}: TV(direct, simulated) = {row['distance']:.4f} (β + allowance = {config.beta + row['allowance']:.4f})")
        args.progress(k + 1, len(sq.ALGORITHMS))
    result = sq.Result(config, tuple(rows), hists, time.perf_counter() - started)
    sq.write_outputs(result, out)
    return ExperimentResult(
        "Local → SQ simulation (KLNRS Lemmas 4.4, 4.5): direct (users) vs SQBackedLROracle",
        tuple(c.header for c in sq.COLUMNS),
        tuple(format_rows(result.rows, sq.COLUMNS)),
        files=_files(out, ("result.json", "distances.csv", "table.md", "outputs.png")),
        notes=sq.caption(result),
    )


register_experiment(
    "sq-local",
    sq_local,
    description="local algorithms on users vs simulated from SQ answers (TV distance ≤ β + noise)",
    default_users=None,
    needs_factory=True,
    default_epsilon=2.0,
    takes_options=True,
)


# --- in-process only: no LR oracle ---


def sq_sample_complexity(args: ExperimentArgs) -> ExperimentResult:
    """Users to answer t SQs within τ, local vs central (exact computations + in-process runs)."""
    from simulations import sq_sample_complexity as sc
    from simulations.reporting import format_rows

    config = sc.quick_config(args.seed) if args.quick else sc.Config(seed=args.seed)
    config = apply_options(config, args.options)
    out = Path(args.out or sc.DEFAULT_OUT)
    result = sc.run(config)
    sc.write_outputs(result, out)
    return ExperimentResult(
        f"SQ sample complexity, local vs central ({result.seconds:.1f} s)",
        tuple(c.header for c in sc.COLUMNS),
        tuple(format_rows(result.rows, sc.COLUMNS)),
        files=_files(out, ("result.json", "users.csv", "table.md", "users.png")),
        notes=sc.caption(result),
    )


def pure_vs_approximate(args: ExperimentArgs) -> ExperimentResult:
    """m_90 of POINT_d / THRESH_d learners, pure vs approximate central DP."""
    from simulations import pure_vs_approximate as pva

    config = pva.quick_config(args.seed) if args.quick else pva.Config(seed=args.seed)
    config = apply_options(config, args.options)
    out = Path(args.out or pva.DEFAULT_OUT)
    result = pva.run(config)
    pva.write_outputs(result, out)
    return ExperimentResult(
        f"Users needed (m_90): pure vs approximate central DP ({result.seconds:.1f} s)",
        pva.TABLE_HEADERS,
        tuple(pva.table_rows(result)),
        files=_files(out, ("result.json", "m90.csv", "table.md", "m90.png")),
        notes=f"α = {config.alpha}, β = {config.beta}, ε = {config.epsilon}, δ = {config.delta:g}; {config.trials} trials per point",
    )


register_experiment(
    "sq-sample-complexity",
    sq_sample_complexity,
    description="users for t SQs within τ: local vs central (no LR oracle)",
    default_users=None,
    uses_oracle=False,
    default_epsilon=None,
    takes_options=True,
)
register_experiment(
    "pure-vs-approximate",
    pure_vs_approximate,
    description="POINT_d/THRESH_d learners, pure vs approximate central DP (no LR oracle)",
    default_users=None,
    uses_oracle=False,
    default_epsilon=None,
    takes_options=True,
)


def sanitization(args: ExperimentArgs) -> ExperimentResult:
    """Sanitization error vs d: BNS sanitizers and the stability histogram beside local GRR (in process)."""
    from simulations import sanitization as san

    config = san.quick_config(args.seed) if args.quick else san.Config(seed=args.seed)
    config = apply_options(config, args.options)
    out = Path(args.out or san.DEFAULT_OUT)
    result = san.run(config)
    san.write_outputs(result, out)
    return ExperimentResult(
        f"Sanitization error vs d: central sanitizers and local GRR ({result.seconds:.1f} s)",
        san.TABLE_HEADERS,
        tuple(san.table_rows(result)),
        files=_files(out, ("result.json", "errors.csv", "table.md", "errors.png")),
        notes=f"α = {config.alpha}, ε = {config.epsilon}, δ = {config.delta:g}; {config.trials} trials per cell",
    )


register_experiment(
    "sanitization",
    sanitization,
    description="POINT_d/THRESH_d sanitization error vs d: BNS sanitizers vs local GRR (no LR oracle)",
    default_users=None,
    uses_oracle=False,
    default_epsilon=None,
    takes_options=True,
)


# --- real-data: a CC0 file hosted by loopback client processes (no population spec) ---


def real_data(args: ExperimentArgs) -> ExperimentResult:
    """Frequencies and means of the Palmer penguins (``simulations.real_data``): client processes
    host the file on the users' side and answer over loopback gRPC (``-o transport=inprocess`` runs
    the same shards in process); table.md, estimates.csv, result.json and estimates.png."""
    import asyncio

    from simulations import real_data as rd

    config = rd.quick_config(args.seed) if args.quick else rd.Config(seed=args.seed)
    config = apply_options(config, args.options)
    out = Path(args.out or config.out)
    result = asyncio.run(rd.run(config))
    rd.write_outputs(result, out)
    return ExperimentResult(
        f"Real data (Palmer penguins, CC0): LDP estimates vs truth ({result.seconds:.1f} s)",
        rd.COLUMNS,
        tuple(rd.cells(r) for r in result.rows),
        files=_files(out, ("result.json", "estimates.csv", "table.md", "estimates.png")),
        notes=rd.caption(result),
    )


register_experiment(
    "real-data",
    real_data,
    description="real data (CC0 penguins file) hosted by loopback gRPC clients: GRR frequencies, Duchi/Piecewise/Hybrid means vs truth",
    default_users=None,
    uses_oracle=False,
    default_epsilon=None,
    takes_options=True,
)


# --- geometry (KMMS Thm 4.7, 5.1): central model, in process only ---


def geometry(args: ExperimentArgs) -> ExperimentResult:
    """Exact error against n of the convex k-gon and union-of-polygons learners (KMMS §4–5)."""
    from simulations import geometry as geo

    config = geo.quick_config(args.seed) if args.quick else geo.Config(seed=args.seed)
    config = apply_options(config, args.options)
    out = Path(args.out or geo.DEFAULT_OUT)
    result = geo.run(config)
    geo.write_outputs(result, out)
    return ExperimentResult(
        f"Convex k-gons and unions of polygons (KMMS Thm 4.7, 5.1): exact error against n ({result.seconds:.1f} s)",
        geo.TABLE_HEADERS,
        tuple(geo.table_rows(result)),
        files=_files(out, ("result.json", "errors.csv", "table.md", "errors.png", "polygons.png")),
        notes=f"grid {{0..{config.d}}}², α = {config.alpha}, β = {config.beta}, δ = {config.delta:g}; {config.trials} trials per point",
    )


register_experiment(
    "geometry",
    geometry,
    description="convex k-gon / union-of-polygons learners (KMMS): exact error against n, next to Thm 4.7 (no LR oracle)",
    default_users=None,
    uses_oracle=False,
    default_epsilon=None,
    takes_options=True,
)
