"""The worked example on real data (``ldp.simulations.real_data``, ``ldp-sim run real-data``).

The committed file carries its licence (CC0) next to it and loads under its declared schema; the
same users answer bit-identically in process and from loopback gRPC client processes hosting the
file; every estimate lies within 5 predicted sd of the truth (false alarm ≤ 36·5.7·10^-7 ≈ 2.1·10^-5
under the normal approximation), and a broken variant — ε = 4 reports debiased as if ε were 1 —
fails that check; the plot passes the readability rules; the CLI writes the table, CSV, JSON and a PNG.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ldp.core.datafile import load_data
from ldp.core.rng import derive_key_bytes
from ldp.core.rr_mechanisms import KaryRandomizedResponse
from ldp.learners.heavy_hitters import grr_frequency_variance
from ldp.simulations import real_data as rd
from ldp.simulations.reporting import captured_figures, figure_problems
from tests.waits import PROCESS_WAIT_S

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds


def test_the_data_file_is_licensed_and_loads_under_its_declared_schema() -> None:
    licence = (rd.DATA_DIR / "PENGUINS.md").read_text()
    assert "CC0 1.0 Universal" in licence and "palmerpenguins" in licence
    data = load_data(rd.DATA_DIR / "penguins.csv", rd.DATA_DIR / "penguins.schema.json")
    assert data.size == 342 and [f.name for f in data.schema] == ["species", "island", "bill_length", "bill_depth", "flipper_length", "body_mass", "sex", "year"]
    records = data.records(0, data.size)
    assert np.bincount(records[:, 0]).tolist() == [151, 68, 123]  # Adelie, Chinstrap, Gentoo
    assert data.public_description() == {"schema": data.schema.to_json(), "size": 342}  # all the aggregator sees


async def test_grpc_clients_hosting_the_file_answer_bit_identically_to_in_process() -> None:
    config = rd.Config(epsilons=(1.0,))
    data = load_data(config.data, config.schema)
    key = derive_key_bytes("real-data-test")
    runs = []
    for transport in ("inprocess", "grpc"):
        async with rd.data_oracle(config.data, config.schema, config.budget, key, transport, processes=2) as oracle:
            runs.append(await rd.run_on(oracle, data, config))
    (rows_a, raw_a), (rows_b, raw_b) = runs
    assert rows_a == rows_b
    for a, b in zip(raw_a[0], raw_b[0]):
        assert a.randomizer == b.randomizer and a.values.dtype == b.values.dtype
        assert a.values.tobytes() == b.values.tobytes() and np.array_equal(a.status, b.status)


async def test_estimates_are_within_five_sd_and_a_mismatched_epsilon_is_caught(tmp_path: Path) -> None:
    config = rd.Config(epsilons=(2.0, 4.0), transport="inprocess")
    data = load_data(config.data, config.schema)
    async with rd.data_oracle(config.data, config.schema, config.budget, derive_key_bytes("real-data", 1), "inprocess") as oracle:
        rows, raw = await rd.run_on(oracle, data, config)
    assert len(rows) == 2 * (9 + 9) and max(r["z"] for r in rows) < 5, [(r["statistic"], r["mechanism"], r["z"]) for r in rows]
    with captured_figures() as seen:  # the plot is readable (ldp.simulations.reporting's rules)
        rd.plot(rd.Result(config, data.size, tuple(rows), 0.0), tmp_path / "estimates.png")
    assert len(seen) == 1 and figure_problems(seen[0][1]) == []
    truths = {r["statistic"]: r["truth"] for r in rows if r["epsilon"] == 4.0}
    assert truths["Pr[species = Adelie]"] == pytest.approx(151 / 342) and truths["mean body mass (g)"] == pytest.approx(data.records(0, 342)[:, 5].mean())
    # Broken: the species reports of the ε = 4 request debiased with ε = 1's p and q.
    species = raw[1][0]
    wrong = KaryRandomizedResponse(1.0, (0.0, 1.0, 2.0)).frequencies(species.values)
    sd = np.sqrt([grr_frequency_variance(4.0, 3, truths[f"Pr[species = {s}]"]) / 342 for s in rd.FREQUENCY_FIELDS["species"]])
    z = np.abs(wrong - [truths[f"Pr[species = {s}]"] for s in rd.FREQUENCY_FIELDS["species"]]) / sd
    assert z.max() > 5


def test_the_cli_runs_it_over_grpc_and_writes_its_files(tmp_path: Path) -> None:
    out = tmp_path / "rd"
    args = [sys.executable, "-m", "ldp.cli.main", "run", "real-data", "--quick", "--out", str(out), "-o", "epsilons=2"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in out.iterdir()} == {"table.md", "estimates.csv", "result.json", "estimates.png"}
    result = json.loads((out / "result.json").read_text())
    assert result["users"] == 342 and result["config"]["transport"] == "grpc" and len(result["rows"]) == 18
    assert "client process(es) over loopback gRPC" in (out / "table.md").read_text() and "Piecewise" in proc.stdout
