"""``ldp-sim estimate`` (issue 25) as a real process: the flags the docs show, in process and with
``--processes 2``; its outputs; the same estimates as the API (``ldp.frequencies``, ``ldp.mean``)
for the same seed, bit for bit, in process and over gRPC; every bad flag or file one line, exit 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ldp
from ldp.cli import main as cli
from tests.waits import PROCESS_WAIT_S

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

LDP_SIM = str(Path(sys.executable).with_name("ldp-sim"))
N = 3000


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """users.csv (colour 0..3, age 18..89), its declared schema, and a file with a bad cell."""
    d = tmp_path_factory.mktemp("estimate")
    rng = np.random.default_rng(0)
    colour, age = rng.choice(4, size=N, p=[0.4, 0.3, 0.2, 0.1]), rng.integers(18, 90, size=N)
    (d / "users.csv").write_text("colour,age\n" + "".join(f"{c},{a}\n" for c, a in zip(colour, age)))
    schema = {"format": 1, "fields": [{"name": "colour", "low": 0, "high": 3}, {"name": "age", "low": 0, "high": 120}]}
    (d / "schema.json").write_text(json.dumps(schema))
    (d / "bad.csv").write_text("colour,age\n1,20\nblue,30\n")
    return d


def _run(args: list[str], cwd: Path, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LDP_SIM, "estimate", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ))


def _estimates(out: Path) -> list[list[float]]:
    return [[row["estimate"] for row in r["rows"]] for r in json.loads((out / "result.json").read_text())["results"]]


def _column(folder: Path, name: str) -> np.ndarray:
    return np.loadtxt(folder / "users.csv", delimiter=",", skiprows=1, dtype=np.int64)[:, ["colour", "age"].index(name)]


def test_frequencies_in_process_as_the_api(folder: Path) -> None:
    done = _run(["--data", "users.csv", "--column", "colour", "--epsilon", "1", "--seed", "0", "--truth", "-o", "out-a"], folder)
    assert done.returncode == 0, done.stderr
    assert "95 % interval" in done.stdout and "truth" in done.stdout and f"{N} users (in process); ε = 1 per user" in done.stdout
    out = folder / "out-a"
    assert {p.name for p in out.iterdir()} >= {"estimates.csv", "result.json", "table.md", "estimates.png"}
    api = ldp.frequencies(_column(folder, "colour"), 1.0, seed=0)
    assert _estimates(out) == [list(api.estimates)]  # bit for bit: the same Question, key and users
    assert (out / "estimates.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "truth" in (out / "estimates.csv").read_text().splitlines()[0]


def test_mean_over_two_processes_as_the_api_over_grpc(folder: Path) -> None:
    done = _run(["--data", "users.csv", "--schema", "schema.json", "--column", "age", "--task", "mean", "--processes", "2", "--seed", "3", "-o", "out-b"], folder)
    assert done.returncode == 0, done.stderr
    assert "2 client process(es) over loopback gRPC" in done.stdout and "truth" not in done.stdout
    ages = _column(folder, "age")
    for processes in (None, 2):
        api = ldp.mean(ages, 1.0, bounds=(0, 120), seed=3, processes=processes)
        assert _estimates(folder / "out-b") == [list(api.estimates)]


def test_frequencies_over_grpc_equal_in_process(folder: Path) -> None:
    args = ["--data", "users.csv", "--schema", "schema.json", "--column", "colour", "--seed", "5"]
    assert _run([*args, "-o", "out-c"], folder).returncode == 0
    assert _run([*args, "--processes", "2", "-o", "out-d"], folder).returncode == 0
    assert _estimates(folder / "out-c") == _estimates(folder / "out-d") == [list(ldp.frequencies(_column(folder, "colour"), seed=5, processes=2).estimates)]


def test_several_columns_split_the_budget(folder: Path) -> None:
    done = _run(["--data", "users.csv", "--column", "colour", "--column", "age", "--task", "heavy-hitters", "--top", "3", "--epsilon", "2", "--seed", "1", "-o", "out-e"], folder)
    assert done.returncode == 0, done.stderr
    assert "split equally over 2 columns (ε = 1 each)" in done.stdout
    result = json.loads((folder / "out-e" / "result.json").read_text())
    assert [len(r["rows"]) for r in result["results"]] == [3, 3] and "split equally" in result["note"]
    assert [r["epsilon"] for r in result["results"]] == [1.0, 1.0]


def test_bind_serves_remote_clients_that_hold_the_file(folder: Path) -> None:
    """``--bind`` holds no file: remote ``ldp-sim clients --data`` hold the users (each wait bounded)."""
    server = subprocess.Popen(
        [LDP_SIM, "estimate", "--bind", "127.0.0.1:0", "--schema", "schema.json", "--users", str(N), "--column", "colour", "--wait", "60", "-o", "out-f"],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert server.stdout is not None
        first = server.stdout.readline()  # the listening line, printed and flushed once bound
        assert first.startswith("ldp-sim estimate: listening on 127.0.0.1:"), first
        address = first.split()[4]
        clients = subprocess.run(
            [LDP_SIM, "clients", "--connect", address, "--data", "users.csv", "--schema", "schema.json", "--budget", "1", "--processes", "2", "--connect-timeout", "30"],
            cwd=folder, capture_output=True, text=True, timeout=PROCESS_WAIT_S,
        )
        out, err = server.communicate(timeout=PROCESS_WAIT_S)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=PROCESS_WAIT_S)
    assert server.returncode == 0 and clients.returncode == 0, (err, clients.stderr)
    assert f"remote client processes, aggregator on {address}" in out
    rows = json.loads((folder / "out-f" / "result.json").read_text())["results"][0]["rows"]
    assert [row["label"] for row in rows] == [0, 1, 2, 3] and rows[0]["users"] == N
    truth = np.bincount(_column(folder, "colour"), minlength=4) / N
    assert all(row["low"] - 0.05 < t < row["high"] + 0.05 for row, t in zip(rows, truth))  # loose: the clients' own key


# Every bad flag or file: one line ``ldp-sim: error: ...``, exit 2 (run in process: nothing starts).
BAD: list[tuple[list[str], str]] = [
    (["--column", "colour"], "one of the arguments --data --bind is required"),
    (["--data", "users.csv", "--bind", "127.0.0.1:0", "--column", "colour"], "not allowed with argument --data"),
    (["--bind", "127.0.0.1", "--column", "colour"], "expected HOST:PORT"),
    (["--bind", "127.0.0.1:0", "--column", "colour", "--users", "10"], "--bind needs --schema S"),
    (["--bind", "127.0.0.1:0", "--column", "colour", "--schema", "schema.json"], "--bind needs --schema S (the declared schema the clients serve) and --users N"),
    (["--bind", "127.0.0.1:0", "--column", "colour", "--schema", "schema.json", "--users", "10", "--truth"], "--truth cannot be used with it"),
    (["--bind", "127.0.0.1:0", "--column", "colour", "--schema", "schema.json", "--users", "0"], "the number of users must be"),
    (["--bind", "127.0.0.1:0", "--column", "colour", "--schema", "schema.json", "--users", "10", "--wait", "-1"], "the wait for client processes must be"),
    (["--data", "users.csv", "--column", "colour", "--users", "10"], "--users goes with --bind"),
    (["--data", "users.csv"], "the following arguments are required: --column"),
    (["--data", "missing.csv", "--column", "colour"], "the data file 'missing.csv' does not exist"),
    (["--data", ".", "--column", "colour"], "is a directory, not a file"),
    (["--data", "users.csv", "--column", "colour", "--epsilon", "0"], "--epsilon must be a finite number > 0"),
    (["--data", "users.csv", "--column", "colour", "--epsilon", "nan"], "--epsilon must be a finite number > 0"),
    (["--data", "users.csv", "--column", "colour", "--task", "median"], "invalid choice: 'median'"),
    (["--data", "users.csv", "--column", "colour", "--oracle", "rappor"], "invalid choice: 'rappor'"),
    (["--data", "users.csv", "--column", "colour", "--processes", "0"], "--processes must be ≥ 1"),
    (["--data", "users.csv", "--column", "colour", "--processes", "two"], "--processes must be an integer"),
    (["--data", "users.csv", "--column", "colour", "--seed", "-1"], "the seed must be in [0, 2^64)"),
    (["--data", "users.csv", "--column", "colour", "--top", "0"], "--top must be an integer ≥ 1"),
    (["--data", "users.csv", "--column", "colour", "--schema", "nope.json"], "the schema file 'nope.json' does not exist"),
    (["--data", "users.csv", "--column", "shoe"], "column"),
    (["--data", "users.csv", "--column", "colour", "--column", "colour"], "a column is named twice"),
    (["--data", "users.csv", "--column", "colour", "--processes", "2"], "schema"),
    (["--data", "users.csv", "--column", "colour", "--oracle", "duchi"], "frequencies: oracle must be 'auto' or one of grr"),
    (["--data", "users.csv", "--column", "age", "--task", "mean", "--oracle", "olh"], "mean: oracle must be 'auto' or one of duchi"),
    (["--data", "users.csv", "--column", "colour", "-o", "users.csv"], "is not a directory (a file of that name exists)"),
    (["--data", "bad.csv", "--column", "colour"], "bad.csv, row 2 (line 3), column 'colour'"),
    (["--data", "users.csv", "--column", "age", "--task", "heavy-hitters", "--method", "treehist"], "--method treehist needs --bits B"),
    (["--data", "users.csv", "--column", "age", "--task", "heavy-hitters", "--bits", "7"], "--bits goes with --method pem or treehist"),
    (["--data", "users.csv", "--column", "age", "--method", "pem", "--bits", "7"], "method 'pem' finds heavy hitters: it goes with task 'heavy-hitters', not 'frequencies'"),
    (["--data", "users.csv", "--column", "age", "--column", "colour", "--task", "heavy-hitters", "--method", "treehist", "--bits", "7"], "reads one column of integers, got 2 columns"),
    (["--data", "users.csv", "--column", "age", "--task", "heavy-hitters", "--method", "treehist", "--bits", "6"], "value(s) do not fit in bits=6 (integers 0..63)"),
    (["--data", "users.csv", "--column", "age", "--task", "heavy-hitters", "--method", "treehist", "--bits", "63"], "--bits must be an integer in 1..62"),
    (["--data", "users.csv", "--column", "age", "--task", "heavy-hitters", "--method", "bloom"], "invalid choice: 'bloom'"),
    (["--data", "users.csv", "--column", "age", "--task", "heavy-hitters", "--method", "treehist", "--bits", "7", "--oracle", "duchi"], "takes oracle 'auto', 'grr', 'olh', 'hr', 'oue' or 'sue', got 'duchi'"),
    (["--bind", "127.0.0.1:0", "--column", "age", "--schema", "schema.json", "--users", "10", "--task", "heavy-hitters", "--method", "pem", "--bits", "7"], "with --bind use --method oracle"),
]


@pytest.mark.parametrize("args, message", BAD, ids=[f"bad-{k}" for k in range(len(BAD))])
def test_bad_flag_or_file_is_one_line_exit_2(args: list[str], message: str, folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(folder)
    try:
        code = cli.main(["estimate", *args])
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("ldp-sim: error: ") and message in err and "Traceback" not in err


def test_bad_flags_through_the_real_command(folder: Path) -> None:
    for args, message in (BAD[0], BAD[12], BAD[-1]):
        done = _run(args, folder, timeout=PROCESS_WAIT_S)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


@pytest.fixture(scope="module")
def visits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pages.csv: 20,000 users, page ids 0..4095 (12 bits); four planted pages hold 15/12/10/8 %."""
    d = tmp_path_factory.mktemp("visits")
    rng = np.random.default_rng(11)
    page = rng.integers(0, 4096, 20_000)
    u = rng.random(20_000)
    for lo, hi, planted in ((0.0, 0.15, 1234), (0.15, 0.27, 777), (0.27, 0.37, 4000), (0.37, 0.45, 42)):
        page[(u >= lo) & (u < hi)] = planted
    (d / "pages.csv").write_text("page\n" + "".join(f"{p}\n" for p in page))
    return d


@pytest.mark.parametrize("method", ["treehist", "pem"])
def test_heavy_hitters_of_a_files_integers_by_a_prefix_protocol(visits: Path, method: str) -> None:
    """``ldp-sim estimate --task heavy-hitters --method treehist|pem --bits 12`` as documented
    (docs/treehist.md): the four planted pages, in process and over two client processes (bit for
    bit the same), as ``ldp.heavy_hitters(column, method=, bits=)`` finds them. TreeHist returns
    only what passes its threshold, and here exactly the planted set; PEM returns ``--top``
    values. Seeded (``--seed 3``): the same reports every run. For an unseeded run TreeHist's
    union bound puts a miss or an extra at ≤ β = 0.05, far less at these margins (the planted
    pages are ≥ 7 sd above its threshold at 20,000 users, ε = 4)."""
    import ldp

    args = ["--data", "pages.csv", "--column", "page", "--task", "heavy-hitters", "--method", method, "--bits", "12", "--epsilon", "4", "--seed", "3", "--top", "4"]
    here = _run([*args, "-o", f"out-{method}"], visits, timeout=PROCESS_WAIT_S)
    served = _run([*args, "--processes", "2", "-o", f"out-{method}-2"], visits, timeout=PROCESS_WAIT_S)
    assert here.returncode == 0 and served.returncode == 0, (here.stderr, served.stderr)
    assert f"heavy-hitters, {method} over 12 bits of pages.csv" in here.stdout
    rows = json.loads((visits / f"out-{method}" / "result.json").read_text())["results"][0]["rows"]
    assert sorted(row["label"] for row in rows) == [42, 777, 1234, 4000], rows
    assert _estimates(visits / f"out-{method}") == _estimates(visits / f"out-{method}-2")
    page = np.loadtxt(visits / "pages.csv", skiprows=1, dtype=np.int64)
    api = ldp.heavy_hitters(page, 4.0, k=4, seed=3, method=method, bits=12)
    assert list(api.labels) == [row["label"] for row in rows] and list(api.estimates) == [row["estimate"] for row in rows]
