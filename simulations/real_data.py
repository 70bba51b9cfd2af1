"""A worked example on real data: frequencies and means of the Palmer penguins (CC0), estimated
from ε-LDP reports of client processes that host the file, compared with the truth.

Data: ``simulations/data/penguins.csv`` (342 penguins, CC0; source, licence and encoding in
``simulations/data/PENGUINS.md``), declared by ``penguins.schema.json`` with *public, a priori*
ranges (body mass 2000–7000 g, flipper 150–250 mm, bill 30.0–65.0 mm): the aggregator learns
only that schema and the number of users, never a record (``DataPopulation.public_description``).
Each row is one user. Over gRPC (the default) ``processes`` client processes each host their
share of the file (``ldp.wire.launcher.spawn_clients`` with a ``ClientConfig`` holding the data
path, the users' budget and the report key, on the users' side) and answer over loopback;
``transport="inprocess"`` runs the same shards in this process (``ldp.local.data_oracle.DataLROracle``) — with the
same report key the reports are bit-identical (tests/cli/test_real_data.py).

Per ε, one NON_INTERACTIVE session asks every user, each once per request:
- frequencies of species, island and sex through ``kary_rr`` (GRR; ``KaryRandomizedResponse.
  frequencies``), predicted sd √(Σ Var)/n from ``grr_frequency_variance``;
- means of body mass, flipper length and bill length through Duchi et al.'s mechanism (``pm_rr``),
  ``piecewise`` and ``hybrid`` (``ldp.core.mean_estimation``) on ``unit_interval_query`` (the
  field mapped onto [−1, 1]), predicted sd √(Σ_i Var(u_i))/n from each randomizer's exact
  ``variance``, mapped back to the field's unit.

Budget: a user answers 3 + 3·3 = 12 requests per ε, so each user spends 12·Σε in all (the client's
``budget``). That is a comparison of mechanisms on the same users, not a deployment plan: a real
collection would split ε over fewer questions or split the users. The truth and the predicted sd
use the records: they are the experimenter's yardstick, computed outside the protocol.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ldp.core.datafile import DataPopulation, load_data
from ldp.core.errors import ParameterError
from ldp.core.mean_estimation import from_unit_interval, unit_interval_query
from ldp.core.query_specs import field_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import derive_key_bytes
from ldp.core.rr_mechanisms import KaryRandomizedResponse
from ldp.experiment import ExperimentResult, Simulation
from ldp.learners.heavy_hitters import grr_frequency_variance
from ldp.local.data_oracle import DataLROracle
from ldp.local.messages import SessionKind
from ldp.local.oracle import LROracle, Reports
from ldp.local.session import Request, Session
from ldp.simulations.reporting import data_ticks, markdown_table, new_figure, save_figure, write_csv, write_json
from ldp.wire.data_clients import data_oracle

__all__ = [
    "Config",
    "Result",
    "quick_config",
    "DataLROracle",
    "data_oracle",
    "run",
    "run_on",
    "write_outputs",
    "FREQUENCY_FIELDS",
    "MEAN_FIELDS",
    "MEAN_KINDS",
    "DEFAULT_OUT",
    "COLUMNS",
    "report",
    "EXPERIMENT",
]

DATA_DIR = Path(__file__).resolve().parent / "data"
DEFAULT_OUT = "results/real-data"
FREQUENCY_FIELDS: dict[str, tuple[str, ...]] = {
    "species": ("Adelie", "Chinstrap", "Gentoo"),
    "island": ("Biscoe", "Dream", "Torgersen"),
    "sex": ("female", "male", "not recorded"),
}
MEAN_FIELDS: dict[str, tuple[str, float]] = {  # field → (unit, scale to that unit)
    "body_mass": ("g", 1.0),
    "flipper_length": ("mm", 1.0),
    "bill_length": ("mm", 0.1),
}
MEAN_KINDS = ("pm_rr", "piecewise", "hybrid")  # pm_rr is Duchi et al.'s 1-D mechanism
KIND_NAMES = {"pm_rr": "Duchi (pm_rr)", "piecewise": "Piecewise", "hybrid": "Hybrid"}
COLUMNS = ("ε", "statistic", "mechanism", "truth", "estimate", "error", "predicted sd", "|error|/sd")


@dataclass(frozen=True)
class Config:
    """``epsilons``: ε per request; ``transport``: "grpc" (client processes) or "inprocess";
    ``processes``: client processes over gRPC; ``seed``: the users' report key is derived from it
    (reproducible runs); ``data``/``schema``: the file and its declared schema (client processes
    serve only a declared one: a schema inferred from the file would publish its min and max,
    invariant I3 of docs/design.md §2a)."""

    epsilons: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    transport: str = "grpc"
    processes: int = 2
    seed: int = 0
    data: str = str(DATA_DIR / "penguins.csv")
    schema: str = str(DATA_DIR / "penguins.schema.json")
    out: str = DEFAULT_OUT

    def __post_init__(self) -> None:
        if self.transport not in ("grpc", "inprocess"):
            raise ParameterError(f"real-data: transport must be 'grpc' or 'inprocess', got {self.transport!r}")
        if not self.epsilons:
            raise ParameterError("real-data: give at least one ε (-o epsilons=1,4)")

    @property
    def budget(self) -> float:
        """What each user spends in all: 12 requests per ε."""
        return requests_per_epsilon() * float(sum(self.epsilons))


def quick_config(seed: int = 0, out: str = DEFAULT_OUT) -> Config:
    return Config(epsilons=(1.0, 4.0), seed=seed, out=out)


def requests_per_epsilon() -> int:
    return len(FREQUENCY_FIELDS) + len(MEAN_FIELDS) * len(MEAN_KINDS)


# --- the users: the file, hosted in process or by client processes ---
# ``DataLROracle`` (the shards in process) and ``data_oracle`` (client processes on loopback, or
# those shards) are the library's (ldp.local.data_oracle, ldp.wire.data_clients): imported above.


# --- the experiment ---


def _field_range(data: DataPopulation, name: str) -> tuple[int, int]:
    f = data.schema.field(name)
    return f.low, f.high


def requests_for(data: DataPopulation, epsilon: float) -> list[tuple[str, str, RandomizerSpec]]:
    """(statistic, mechanism, spec) of the 12 requests of one ε."""
    out: list[tuple[str, str, RandomizerSpec]] = []
    for name in FREQUENCY_FIELDS:
        out.append((name, "kary_rr", RandomizerSpec("kary_rr", field_query(name), epsilon)))
    for name in MEAN_FIELDS:
        low, high = _field_range(data, name)
        for kind in MEAN_KINDS:
            out.append((name, kind, RandomizerSpec(kind, unit_interval_query(name, low, high), epsilon)))
    return out


def _rows_for(data: DataPopulation, records: np.ndarray, epsilon: float, asked: Sequence[tuple[str, str, RandomizerSpec]], reports: Sequence[Reports]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    n = len(records)
    for (name, kind, spec), rep in zip(asked, reports):
        answered = rep.answered_users
        if len(answered) != n:
            raise ParameterError(f"real-data: {n - len(answered)} users did not answer {name}/{kind} ({rep.counts()}; {'; '.join(rep.errors)})")
        local = LocalRandomizer.build(spec, data.schema)
        if kind == "kary_rr":
            R = local.randomizer
            assert isinstance(R, KaryRandomizedResponse)
            estimates = R.frequencies(rep.values)
            truth_values = records[:, data.schema.column(name)]
            for j, label in enumerate(FREQUENCY_FIELDS[name]):
                truth = float(np.mean(truth_values == R.categories[j]))
                sd = math.sqrt(grr_frequency_variance(epsilon, R.k, truth) / n)
                rows.append(dict(epsilon=epsilon, statistic=f"Pr[{name} = {label}]", mechanism="GRR (kary_rr)", truth=truth, estimate=float(estimates[j]), sd=sd))
            continue
        low, high = _field_range(data, name)
        unit, scale = MEAN_FIELDS[name]
        inputs = local.inputs(records)  # the experimenter's yardstick: the users' true inputs
        estimate = float(from_unit_interval(np.mean(local.randomizer.estimate(rep.values)), low, high)) * scale
        truth = float(from_unit_interval(np.mean(inputs), low, high)) * scale
        sd = math.sqrt(float(np.sum(local.randomizer.variance(inputs)))) / n * (high - low) / 2.0 * scale
        rows.append(dict(epsilon=epsilon, statistic=f"mean {name.replace('_', ' ')} ({unit})", mechanism=KIND_NAMES[kind], truth=truth, estimate=estimate, sd=sd))
    for row in rows:
        row["error"] = row["estimate"] - row["truth"]
        row["z"] = abs(row["error"]) / row["sd"]
    return rows


async def run_on(oracle: LROracle, data: DataPopulation, config: Config) -> tuple[list[dict[str, Any]], list[list[Reports]]]:
    """Every ε's session on ``oracle``: the table rows and the raw reports (for equivalence tests)."""
    records = data.records(0, data.size)
    rows: list[dict[str, Any]] = []
    raw: list[list[Reports]] = []
    for epsilon in config.epsilons:
        asked = requests_for(data, epsilon)
        session = Session(oracle, SessionKind.NON_INTERACTIVE, name=f"real-data ε={epsilon:g}")
        reports = await session.round([Request.of(range(data.size), spec) for _, _, spec in asked])
        raw.append(reports)
        rows += _rows_for(data, records, epsilon, asked, reports)
    return rows, raw


@dataclass(frozen=True)
class Result:
    config: Config
    users: int
    rows: tuple[dict[str, Any], ...]
    seconds: float


async def run(config: Config) -> Result:
    """Load the file, host it (``config.transport``), run every ε, return the rows."""
    started = time.perf_counter()
    data = load_data(config.data, config.schema)
    key = derive_key_bytes("real-data", config.seed)
    async with data_oracle(config.data, config.schema, config.budget, key, config.transport, config.processes) as oracle:
        rows, _ = await run_on(oracle, data, config)
    return Result(config, data.size, tuple(rows), time.perf_counter() - started)


# --- outputs ---


def cells(row: dict[str, Any]) -> tuple[str, ...]:
    return (
        f"{row['epsilon']:g}",
        row["statistic"],
        row["mechanism"],
        f"{row['truth']:.4g}",
        f"{row['estimate']:.4g}",
        f"{row['error']:+.3g}",
        f"{row['sd']:.3g}",
        f"{row['z']:.2f}",
    )


def caption(result: Result) -> str:
    c = result.config
    zs = np.array([r["z"] for r in result.rows])
    return (
        f"{result.users} penguins (CC0), one user each, hosted from {Path(c.data).name} by "
        f"{c.processes} {'client process(es) over loopback gRPC' if c.transport == 'grpc' else 'in-process shard(s)'}; "
        f"ε ∈ {{{', '.join(f'{e:g}' for e in c.epsilons)}}} per request, {requests_per_epsilon()} requests per ε "
        f"(each user spends {c.budget:g} in all). {int(np.sum(zs <= 1.96))} of {len(zs)} estimates lie within 1.96 predicted sd "
        f"of the truth (≈ 95 % expected); largest |error|/sd {zs.max():.2f}."
    )


def write_outputs(result: Result, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    rows = [dict(r) for r in result.rows]
    files = [
        write_json(out / "result.json", {"config": asdict(result.config), "users": result.users, "seconds": result.seconds, "rows": rows}),
        write_csv(out / "estimates.csv", rows, ["epsilon", "statistic", "mechanism", "truth", "estimate", "error", "sd", "z"]),
    ]
    (out / "table.md").write_text(caption(result) + "\n\n" + markdown_table(COLUMNS, [cells(r) for r in result.rows]) + "\n")
    files.append(out / "table.md")
    files.append(plot(result, out / "estimates.png"))
    return files


def plot(result: Result, path: Path) -> Path:
    """Left: mean body mass per mechanism against ε (± 1.96 predicted sd) and the truth; right:
    the species frequencies against ε, with their truths."""
    fig, (left, right) = new_figure(2, width=5.8, height=4.6)
    eps = sorted({r["epsilon"] for r in result.rows})
    offsets = {name: 0.9 + 0.1 * k for k, name in enumerate(KIND_NAMES.values())}
    truth_mass = None
    for name in KIND_NAMES.values():
        rows = [r for r in result.rows if r["statistic"].startswith("mean body mass") and r["mechanism"] == name]
        x = [r["epsilon"] * offsets[name] for r in rows]
        left.errorbar(x, [r["estimate"] for r in rows], yerr=[1.96 * r["sd"] for r in rows], marker="o", capsize=3, linestyle="-", label=name)
        truth_mass = rows[0]["truth"]
    if truth_mass is not None:
        left.axhline(truth_mass, color="black", linewidth=1, linestyle=":")
        left.annotate(f"dotted: truth {truth_mass:,.0f} g", xy=(0.98, 0.02), xycoords="axes fraction", ha="right", fontsize=8)
    left.set_xscale("log")
    data_ticks(left.xaxis, eps)
    left.set_xlabel("ε per request")
    left.set_ylabel("mean body mass (g), estimate ± 1.96 sd")
    left.set_title(f"Means: {result.users} users, three mechanisms")
    left.legend(fontsize=8)
    for j, label in enumerate(FREQUENCY_FIELDS["species"]):
        rows = [r for r in result.rows if r["statistic"] == f"Pr[species = {label}]"]
        line = right.errorbar([r["epsilon"] * (0.93 + 0.07 * j) for r in rows], [r["estimate"] for r in rows], yerr=[1.96 * r["sd"] for r in rows], marker="s", capsize=3, label=f"{label} (truth {rows[0]['truth']:.3f})")
        right.axhline(rows[0]["truth"], color=line[0].get_color(), linewidth=1, linestyle=":")
    right.annotate("dotted: truth", xy=(0.02, 0.02), xycoords="axes fraction", fontsize=8)
    right.set_xscale("log")
    data_ticks(right.xaxis, eps)
    right.set_xlabel("ε per request")
    right.set_ylabel("Pr[species], GRR estimate ± 1.96 sd")
    right.set_title("Frequencies: species")
    right.legend(fontsize=8)
    save_figure(fig, path)
    return path


def report(result: Result, config: Config) -> ExperimentResult:
    """``ldp-sim run real-data``'s table: one row per (ε, statistic)."""
    return ExperimentResult(f"Real data (Palmer penguins, CC0): LDP estimates vs truth ({result.seconds:.1f} s)", COLUMNS, tuple(cells(r) for r in result.rows), notes=caption(result))


# The entry point ldp_sim.experiments: real-data (pyproject.toml). It uses no LR oracle of the CLI's:
# run() spawns the client processes that host the file's shards (in process with -o transport=inprocess).
EXPERIMENT = Simulation.of(
    __name__, "real-data", "real data (CC0 penguins file) hosted by loopback gRPC clients: GRR frequencies, Duchi/Piecewise/Hybrid means vs truth",
    files=("result.json", "estimates.csv", "table.md", "estimates.png"),
)


def main(argv: list[str] | None = None) -> Result:
    from ldp.simulations.reporting import print_table, simulation_main

    def show(result: Result) -> None:
        print_table("Real data (Palmer penguins): LDP estimates vs truth", COLUMNS, [cells(r) for r in result.rows])
        print(caption(result))

    return simulation_main(argv, EXPERIMENT, description=__doc__.splitlines()[0], quick_help="two values of ε (1 and 4)", show=show)


if __name__ == "__main__":
    main()
