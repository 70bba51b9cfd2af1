"""Every `ldp-sim` bad input is one line `ldp-sim: error: ...` naming the value and what is
allowed, exit code 2, no traceback, and nothing starts (no hang).

The table runs in process (``ldp.cli.main.main(argv)``): every case fails during validation,
before any aggregator, client process or experiment starts. A handful go through the real entry
points (``python -m ldp.cli.main`` and the ``ldp-sim`` script) to prove the same holds there.
Placeholders in arguments ({tmp}, {spec}, {file}, ...) are files made once per module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ldp.cli import main as cli
from ldp.cli import run as run_cli
from tests.waits import PROCESS_WAIT_S

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

# Base command lines that would finish fast should a bad value slip through.
RUN = ["run", "rr-demo", "--transport", "inprocess", "--users", "1000"]
SERVE = ["serve", "--bind", "127.0.0.1:0", "rr-demo", "--users", "100", "--wait", "1"]
CLIENTS = ["clients", "--connect", "127.0.0.1:9", "--connect-timeout", "1"]
CLIENTS_SPEC = [*CLIENTS, "--population", "{spec}"]
POP = ["population", "rr-demo", "--users", "100", "--seed", "1"]
LAB = ["lab", "1", "--transport", "inprocess", "--quick"]

EPS = "budget epsilon must be a finite number > 0 and ≤ 1024"
USERS = "the number of users must be"
SEED = "the seed must be"
DEADLINE = "the round deadline must be a finite number of seconds in (0, 10^6]"
WAIT = "the wait for client processes must be a finite number of seconds in [0, 10^6]"
TIMEOUT = "the connect timeout must be a finite number of seconds in (0, 10^6]"
PROCS = "--processes must be ≥ 1 and ≤"

# Issue 23 (items 5 and 6, invariant I6): also run through the real command, one process each.
ISSUE_23: list[tuple[list[str], str]] = [
    # --- clients: a spec file from another version (issue 23, I6): the key is named ---
    ([*CLIENTS, "--population", "{spec_unknown_key}"], "unknown population spec keys ['colour'] (format 1 has ['format', 'concept_class'"),
    ([*CLIENTS, "--population", "{spec_missing_key}"], "the population spec has no 'seed' key (format 1 needs"),
    ([*CLIENTS, "--population", "{spec_string_size}"], "population spec key 'size' must be an integer, got '100'"),
    ([*CLIENTS, "--population", "{spec_format_2}"], "population spec key 'format' is 2; this version of ldp reads format 1"),
    ([*CLIENTS, "--population", "{spec_format_text}"], "population spec key 'format' is '1'"),
    ([*CLIENTS, "--population", "{spec_short_target}"], "population spec key 'target': a parity target in dimension d = 4 needs 4 bits, got 3"),
    ([*CLIENTS, "--population", "{spec_target_text_bit}"], "population spec key 'target' (parity) key 'r' must be a list of 0s and 1s"),
    ([*CLIENTS, "--population", "{spec_distribution_key}"], "population spec key 'distribution' (product_bernoulli) has unknown keys ['q']"),
    # --- clients: shards that cannot be (issue 23, item 6) ---
    ([*CLIENTS_SPEC, "--shard", "3/2"], "needs 0 ≤ K < M"),
    ([*CLIENTS_SPEC, "--shard", "0/4294967296"], "a shard is K/M with 0 ≤ K < M < 2^32"),
    ([*CLIENTS_SPEC, "--shard", "0/200"], "--shard 0/200 with --processes 1 leaves 1 client process(es) without users (e.g. 0/200) of the 100"),
    ([*CLIENTS_SPEC, "--shard", "0/50", "--processes", "3"], "--shard 0/50 with --processes 3 leaves 1 client process(es) without users"),
    # --- numbers at the edges of their types ---
    ([*RUN, "--deadline", "1e-400"], DEADLINE),
    ([*RUN, "--users", "1e400"], USERS),
    ([*RUN, "--seed", "1e400"], SEED),
    (["lab", "1e400"], "the lab number must be"),
    # --- experiment options with no upper limit ran forever: the bound lives in the experiment's Config ---
    (["run", "separation", "--transport", "inprocess", "-o", "trials=99999999999999999999"], "separation: trials must be an integer in [1, 10,000], got 99999999999999999999"),
    (["run", "separation", "--transport", "inprocess", "-o", "cap=2000000000000"], "separation: cap must be an integer in [1, 1,099,511,627,776], got 2000000000000"),
    (["run", "separation", "--transport", "inprocess", "-o", "seed=-1"], "separation: seed must be an integer in [0, 2^64), got -1"),
    # --- classroom ports: refused in one line, not a gRPC bind warning and a class without an aggregator ---
    *[(["classroom", "--bind", "127.0.0.1", flag, value], f"argument {flag}: a port must be an integer in 0..65535 (0: any free port), got {shown}")
      for flag, value, shown in (("--port", "99999", "99999"), ("--port", "-1", "-1"), ("--port", "65536", "65536"), ("--port", "80.5", "'80.5'"), ("--http-port", "70000", "70000"))],
    # --- a declared schema file of another format (issue 23, I6): the key is named ---
    *[([*CLIENTS, "--data", "{csv}", "--schema", f"{{{name}}}", "--budget", "1"], fragment) for name, fragment in (
        ("schema_format_2", "schema key 'format' is 2; this version of ldp reads format 1"),
        ("schema_format_text", "schema key 'format' is '1'"),
        ("schema_unknown_key", "unknown schema keys ['colour'] (format 1 has ['format', 'fields'])"),
        ("schema_missing_fields", "the schema has no 'fields' key (format 1 needs ['format', 'fields'])"),
        ("schema_fields_text", "schema key 'fields' must be a list of field objects, got str"),
    )],
]

CASES: list[tuple[list[str], str]] = [
    # --- run: ε ---
    *[([*RUN, "--epsilon", v], EPS) for v in ("0", "-1", "nan", "inf", "abc", "1e-300", "2000", "1e309", "")],
    ([*RUN, "--epsilon=-inf"], EPS),
    ([*RUN, "--epsilon"], "expected one argument"),
    # --- run: --users ---
    *[([*RUN, "--users", v], USERS) for v in ("0", "-1", "abc", "1.5", "10^12", "2e12", "nan", "inf", "1099511627777")],
    (["run", "rr-demo", "--users", "3", "--transport", "inprocess"], "rr-demo needs at least 4 users"),
    (["run", "rr-demo", "--users", "1000000000000", "--transport", "inprocess"], "cannot host 1000000000000 users on this machine"),
    (["run", "rr-demo", "--users", "1099511627776"], "cannot host 1099511627776 users on this machine"),
    (["run", "separation", "--users", "100"], "--users does not apply to separation"),
    # --- run: --seed, --deadline ---
    *[([*RUN, "--seed", v], SEED) for v in ("-1", "abc", "18446744073709551616", "1.5", "nan")],
    *[([*RUN, "--deadline", v], DEADLINE) for v in ("0", "-1", "nan", "inf", "abc", "1e7", "-0")],
    # --- run: --processes, --transport ---
    *[([*RUN, "--processes", v], PROCS) for v in ("0", "-1", "100000000", "1e9")],
    ([*RUN, "--processes", "abc"], "--processes must be an integer ≥ 1"),
    ([*RUN, "--processes", "2.5"], "--processes must be an integer ≥ 1"),
    (["run", "rr-demo", "--users", "10", "--processes", "11"], "--processes must be in [1, users = 10]"),
    ([*RUN, "--transport", "tcp"], "invalid choice: 'tcp'"),
    (["run", "pure-vs-approximate", "--transport", "grpc"], "runs in process only"),
    (["run", "pure-vs-approximate", "--epsilon", "1"], "--epsilon does not apply to pure-vs-approximate"),
    # --- run: -o options ---
    ([*RUN, "-o", "trials"], "expected KEY=VALUE"),
    ([*RUN, "-o", "=3"], "expected KEY=VALUE"),
    ([*RUN, "-o", "two words=3"], "must be a setting's name"),
    ([*RUN, "-o", "trials=2"], "rr-demo takes no -o options"),
    (["run", "separation", "--transport", "inprocess", "-o", "no_such=1"], "unknown option 'no_such'"),
    (["run", "separation", "--transport", "inprocess", "-o", "trials=many"], "option trials='many': expected int"),
    (["run", "separation", "--transport", "inprocess", "-o", "trials=2", "-o", "trials=3"], "-o trials=... is given more than once"),
    # --- run: names, --out, argparse's own mistakes ---
    (["run", "no-such-experiment"], "unknown experiment 'no-such-experiment'"),
    (["run"], "the following arguments are required: experiment"),
    ([*RUN, "--out", "{file}/sub"], "cannot create the --out directory"),
    ([*RUN, "--out", "{file}"], "is not a directory"),
    ([*RUN, "--out", ""], "--out must name a directory"),
    ([*RUN, "--bogus"], "unrecognized arguments: --bogus"),
    ([*RUN, "--quick=yes"], "ignored explicit argument 'yes'"),
    # --- serve ---
    *[(["serve", "--bind", v, "rr-demo"], "expected HOST:PORT") for v in ("nonsense", ":80", "127.0.0.1:99999", "127.0.0.1:abc", "127.0.0.1:-1")],
    (["serve", "rr-demo"], "the following arguments are required: --bind"),
    *[([*SERVE, "--wait", v], WAIT) for v in ("-1", "nan", "inf", "abc", "1e7")],
    ([*SERVE, "--epsilon", "0"], EPS),
    ([*SERVE, "--deadline", "0"], DEADLINE),
    ([*SERVE, "--users", "0"], USERS),
    ([*SERVE, "--seed", "-1"], SEED),
    ([*SERVE, "--out", "{file}/sub"], "cannot create the --out directory"),
    (["serve", "--bind", "127.0.0.1:0", "no-such-experiment"], "unknown experiment 'no-such-experiment'"),
    # --- clients: what the users hold ---
    (["clients", "--population", "{spec}"], "the following arguments are required: --connect"),
    (["clients", "--connect", "nonsense", "--population", "{spec}"], "expected HOST:PORT"),
    (CLIENTS, "one of the arguments"),
    ([*CLIENTS_SPEC, "--data", "{csv}"], "not allowed with argument"),
    ([*CLIENTS, "--population", "{tmp}/missing.json"], "the population spec '{tmp}/missing.json' does not exist"),
    ([*CLIENTS, "--population", "{dir}"], "is a directory, not a file"),
    ([*CLIENTS, "--population", ""], "the population spec must name a file"),
    ([*CLIENTS, "--population", "{bad_json}"], "is not valid JSON"),
    ([*CLIENTS, "--population", "{list_json}"], "malformed population spec"),
    ([*CLIENTS, "--data", "{tmp}/missing.csv", "--budget", "1"], "the data file '{tmp}/missing.csv' does not exist"),
    ([*CLIENTS, "--data", "{dir}", "--budget", "1"], "is a directory, not a file"),
    ([*CLIENTS, "--data", "{csv}"], "needs its users' budget"),
    ([*CLIENTS, "--data", "{csv}", "--budget", "1", "--schema", "{tmp}/missing.json"], "the schema file '{tmp}/missing.json' does not exist"),
    ([*CLIENTS_SPEC, "--key-file", "{tmp}/missing.key"], "the key file '{tmp}/missing.key' does not exist"),
    ([*CLIENTS_SPEC, "--key-file", "{short_key}"], "a report key has 32 bytes, got 5"),
    ([*CLIENTS_SPEC, "--ledger", "{tmp}/nodir/ledger.sqlite"], "the ledger's directory"),
    ([*CLIENTS_SPEC, "--ledger", "{dir}"], "is a directory"),
    ([*CLIENTS_SPEC, "--ledger", "{file}/ledger.sqlite"], "the ledger's directory"),
    ([*CLIENTS_SPEC, "--ledger", ""], "the ledger must name a file"),
    # --- clients and serve: TLS, enrolment, standby ---
    ([*CLIENTS_SPEC, "--tls", "{tmp}/no-pki"], "is not a directory"),
    ([*CLIENTS_SPEC, "--token-file", "{file}"], "need --tls DIR"),
    ([*CLIENTS_SPEC, "--tls", "{dir}"], "--tls needs --client-name NAME"),
    ([*CLIENTS, "--seal-key-file", "{tmp}/missing.key"], "cannot read the seal key file"),
    ([*CLIENTS, "--seal-key-file", "{short_key}"], "must hold exactly 32 bytes"),
    ([*SERVE, "--tls", "{tmp}/no-pki"], "is not a directory"),
    # --- clients: numbers ---
    *[([*CLIENTS_SPEC, "--processes", v], PROCS) for v in ("0", "-3", "100000000")],
    ([*CLIENTS_SPEC, "--processes", "abc"], "--processes must be an integer ≥ 1"),
    *[([*CLIENTS_SPEC, "--connect-timeout", v], TIMEOUT) for v in ("0", "-5", "nan", "inf", "abc", "1e9")],
    *[([*CLIENTS_SPEC, "--budget", v], EPS) for v in ("0", "nan", "abc", "2000", "-1")],
    ([*CLIENTS_SPEC, "--shard", "1/1"], "needs 0 ≤ K < M"),
    ([*CLIENTS_SPEC, "--shard=-1/2"], "needs 0 ≤ K < M"),
    ([*CLIENTS_SPEC, "--shard", "0/0"], "needs 0 ≤ K < M"),
    ([*CLIENTS_SPEC, "--shard", "a/b"], "must look like K/M"),
    ([*CLIENTS_SPEC, "--shard", "2"], "must look like K/M"),
    ([*CLIENTS_SPEC, "--shard", "0/2/3"], "must look like K/M"),
    *ISSUE_23,
    # --- population ---
    (POP, "say where to write the spec: --out SPEC.json"),
    ([*POP, "--out", "{dir}"], "is a directory; name a file"),
    ([*POP, "--out", "{tmp}/nodir/spec.json"], "its directory {tmp}/nodir does not exist"),
    ([*POP, "--out", "{file}/spec.json"], "does not exist"),
    ([*POP, "--out", ""], "--out must name a file"),
    (["population", "separation", "--out", "{tmp}/s.json"], "separation has no single population"),
    (["population", "no-such-experiment", "--out", "{tmp}/s.json"], "unknown experiment 'no-such-experiment'"),
    ([*POP, "--users", "0", "--out", "{tmp}/s.json"], USERS),
    ([*POP, "--seed", "-5", "--out", "{tmp}/s.json"], SEED),
    ([*POP, "--epsilon", "inf", "--out", "{tmp}/s.json"], EPS),
    # --- lab ---
    (["lab", "0"], "the lab number must be ≥ 1"),
    (["lab", "abc"], "the lab number must be an integer"),
    (["lab", "99", "--transport", "inprocess"], "there is no lab 99"),
    (["lab"], "the following arguments are required: number"),
    ([*LAB, "--processes", "0"], PROCS),
    ([*LAB, "--processes", "100000000"], PROCS),
    ([*LAB, "--transport", "carrier-pigeon"], "invalid choice: 'carrier-pigeon'"),
    ([*LAB, "--out", "{file}/figs"], "cannot create the --out directory"),
    ([*LAB, "--out", "{file}"], "is not a directory"),
    # --- list and the command itself ---
    (["list", "extra"], "unrecognized arguments: extra"),
    ([], "the following arguments are required: command"),
    (["nosuch"], "invalid choice: 'nosuch'"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("bad_inputs")
    (tmp / "afile").write_text("not a directory")
    (tmp / "adir").mkdir()
    (tmp / "bad.json").write_text("{ not json")
    (tmp / "list.json").write_text("[1, 2]")
    (tmp / "short.key").write_bytes(b"12345")
    (tmp / "users.csv").write_text("x,y\n0,1\n1,0\n")
    spec = tmp / "spec.json"
    assert cli.main(["population", "rr-demo", "--users", "100", "--seed", "1", "--out", str(spec)]) == 0
    variants: dict[str, dict[str, Any]] = {  # the spec as another version (or a hand edit) might have written it
        "spec_unknown_key": {"colour": "blue"},
        "spec_missing_key": {"seed": None},
        "spec_string_size": {"size": "100"},
        "spec_format_2": {"format": 2},
        "spec_format_text": {"format": "1"},
        "spec_short_target": {"target": {"kind": "parity", "r": [1, 0, 1]}},
        "spec_target_text_bit": {"target": {"kind": "parity", "r": [1, 0, "1", 1]}},
        "spec_distribution_key": {"distribution": {"kind": "product_bernoulli", "p": 0.3, "q": 1}},
    }
    schema_variants: dict[str, Any] = {  # the schema file as another version (or a hand edit) might have written it
        "schema_format_2": {"format": 2, "fields": [{"name": "x"}, {"name": "y"}]},
        "schema_format_text": {"format": "1", "fields": [{"name": "x"}, {"name": "y"}]},
        "schema_unknown_key": {"format": 1, "fields": [{"name": "x"}, {"name": "y"}], "colour": "blue"},
        "schema_missing_fields": {"format": 1},
        "schema_fields_text": {"format": 1, "fields": "x,y"},
    }
    paths = {}
    for name, data in schema_variants.items():
        paths[name] = str(tmp / f"{name}.json")
        Path(paths[name]).write_text(json.dumps(data))
    for name, change in variants.items():
        data = json.loads(spec.read_text())
        for key, value in change.items():
            if value is None:
                data.pop(key)
            else:
                data[key] = value
        paths[name] = str(tmp / f"{name}.json")
        Path(paths[name]).write_text(json.dumps(data))
    return {**paths,
        "tmp": str(tmp), "file": str(tmp / "afile"), "dir": str(tmp / "adir"), "bad_json": str(tmp / "bad.json"),
        "list_json": str(tmp / "list.json"), "short_key": str(tmp / "short.key"), "csv": str(tmp / "users.csv"), "spec": str(spec),
    }  # fmt: skip


def _fill(text: str, files: dict[str, str]) -> str:
    return text.format(**files) if "{" in text else text


def _main(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exc:  # argparse's own mistakes
        return int(exc.code or 0)


def _one_clear_line(code: int, err: str, fragment: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ldp-sim: error: "), err
    assert fragment in lines[0], (fragment, err)


def test_the_table_is_large() -> None:
    assert len(CASES) >= 80
    assert len({tuple(argv) for argv, _ in CASES}) == len(CASES)  # no duplicate cases


@pytest.mark.parametrize("argv, fragment", CASES, ids=[" ".join(a) or "(none)" for a, _ in CASES])
def test_bad_input_is_one_clear_line(argv: list[str], fragment: str, files: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(files["tmp"])  # a default output directory, should one be made, lands here
    code = _main([_fill(a, files) for a in argv])
    out, err = capsys.readouterr()
    _one_clear_line(code, err, _fill(fragment, files))


def test_bad_inputs_start_nothing(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """A refused `clients` or `run` leaves no child process (nothing was spawned)."""
    from tests.wire.proc_helpers import children_of

    before = set(children_of(os.getpid()))
    for argv in ([*CLIENTS_SPEC, "--processes", "100000000"], [*RUN, "--deadline", "-1"], ["run", "rr-demo", "--users", "1000000000000"]):
        assert _main([_fill(a, files) for a in argv]) == 2
    capsys.readouterr()
    assert set(children_of(os.getpid())) <= before


def test_a_memory_error_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], files: dict[str, str]) -> None:
    def exhausted(ns: object, console: object) -> int:
        raise MemoryError

    monkeypatch.setattr(run_cli, "run_standalone", exhausted)
    code = _main(["run", "pure-vs-approximate", "--out", files["tmp"] + "/pva"])
    _one_clear_line(code, capsys.readouterr().err, "not enough memory for the experiment's users in one process")

    monkeypatch.setattr(run_cli, "_population", exhausted)
    code = _main(["population", "rr-demo", "--users", "5000", "--out", files["tmp"] + "/p.json"])
    err = capsys.readouterr().err
    _one_clear_line(code, err, "not enough memory for 5000 users in one process")
    assert "more client processes or machines" in err


def test_an_output_directory_is_created(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    out = Path(files["tmp"]) / "new" / "deeper"
    assert _main(["run", "rr-demo", "--transport", "inprocess", "--users", "400", "--out", str(out)]) == 0
    assert out.is_dir()
    capsys.readouterr()


def test_a_valid_run_with_friendly_numbers_passes(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """1e3 users and 1_000 are integers; ε = 1024 is the limit, inclusive (rr-demo asks ε/8 .. ε,
    so its smallest budget is 8 · 2^-30)."""
    for users, eps in (("1e3", "1024"), ("1_000", str(2.0**-27))):
        assert _main(["run", "rr-demo", "--transport", "inprocess", "--users", users, "--epsilon", eps, "--out", files["tmp"]]) == 0
    assert "Randomized response of one bit: 1000 users" in capsys.readouterr().out


# --- the real entry points: the same single line, from a fresh interpreter ---

@pytest.mark.parametrize("argv, fragment", ISSUE_23, ids=[" ".join(a) for a, _ in ISSUE_23])
def test_issue_23_cases_through_the_real_command(argv: list[str], fragment: str, files: dict[str, str]) -> None:
    """The cases issue 23 added, each through `python -m ldp.cli.main` in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-m", "ldp.cli.main", *[_fill(a, files) for a in argv]], capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=files["tmp"])
    _one_clear_line(proc.returncode, proc.stderr, _fill(fragment, files))


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~170 interpreters on a loaded machine; each has its own PROCESS_WAIT_S limit, a hang guard
def test_the_whole_table_through_the_real_command(files: dict[str, str]) -> None:
    """Every case of the table as a real `ldp-sim` process (slow: ~170 interpreters): one line,
    exit code 2, no traceback. Run with `pytest -m slow`."""
    import concurrent.futures

    script = Path(sys.executable).parent / "ldp-sim"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "ldp.cli.main"]

    def one(case: tuple[list[str], str]) -> str:
        argv, fragment = case
        proc = subprocess.run([*command, *[_fill(a, files) for a in argv]], capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=files["tmp"])
        try:
            _one_clear_line(proc.returncode, proc.stderr, _fill(fragment, files))
        except AssertionError:
            return f"{' '.join(argv)} -> exit {proc.returncode}: {proc.stderr.strip()[-400:]}"
        return ""

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        failures = [f for f in pool.map(one, CASES) if f]
    assert not failures, "\n".join(failures)

ENTRY_CASES = [
    (["run", "rr-demo", "--deadline", "0"], DEADLINE),
    (["clients", "--connect", "127.0.0.1:9", "--population", "{spec}", "--processes", "100000000"], PROCS),
    (["serve", "--bind", "127.0.0.1:0", "rr-demo", "--wait", "-1"], WAIT),
    (["clients", "--connect", "127.0.0.1:9", "--population", "{spec}", "--connect-timeout", "nan"], TIMEOUT),
    (["run", "rr-demo", "--out", "{file}/sub"], "cannot create the --out directory"),
    (["run", "rr-demo", "--users", "1000000000000"], "cannot host 1000000000000 users"),
    (["run", "rr-demo", "--epsilon", "nan"], EPS),
    (["lab", "0"], "the lab number must be ≥ 1"),
]


@pytest.mark.parametrize("argv, fragment", ENTRY_CASES, ids=[" ".join(a) for a, _ in ENTRY_CASES])
def test_bad_input_through_python_m(argv: list[str], fragment: str, files: dict[str, str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "ldp.cli.main", *[_fill(a, files) for a in argv]], capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=files["tmp"])
    _one_clear_line(proc.returncode, proc.stderr, _fill(fragment, files))


def test_bad_input_through_the_console_script(files: dict[str, str]) -> None:
    script = Path(sys.executable).parent / "ldp-sim"
    if not script.exists():
        pytest.skip("the ldp-sim script is not installed next to this interpreter")
    env = dict(os.environ, COLUMNS="40")  # a narrow terminal must not wrap the line
    proc = subprocess.run([str(script), "run", "rr-demo", "--users", "10^12"], capture_output=True, text=True, timeout=PROCESS_WAIT_S, env=env, cwd=files["tmp"])
    _one_clear_line(proc.returncode, proc.stderr, "the number of users must be an integer in [1, 2^40]")


def test_population_spec_round_trips(files: dict[str, str]) -> None:
    """The fixture's spec is a real one (so the `clients` cases fail for the reason named), and
    `ldp-sim population` writes its format version."""
    data = json.loads(Path(files["spec"]).read_text())
    assert data["size"] == 100 and data["seed"] == 1 and data["format"] == 1


def test_the_separation_bound_lives_in_its_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """The upper bounds are the experiment's (simulations.separation.Config), not the CLI's: the
    Python API refuses the same values. Broken variant: a Config with no upper limit on trials
    accepts 10^20 trials (the run that never ends); with the limit it is refused in one line."""
    import dataclasses

    from ldp.core.errors import ParameterError
    from simulations import separation

    with pytest.raises(ParameterError, match=r"separation: trials must be an integer in \[1, 10,000\], got 100000000000000000000"):
        separation.Config(trials=10**20)
    for name, most in separation.INTEGER_LIMITS.items():
        separation.Config(**{name: most, **({"cap": most} if name == "start_users" else {})})  # the bound itself is allowed
        with pytest.raises(ParameterError, match=f"separation: {name} must be an integer in"):
            separation.Config(**{name: most + 1})
    assert dataclasses.replace(separation.quick_config(), trials=3).trials == 3
    monkeypatch.setitem(separation.INTEGER_LIMITS, "trials", 2**200)  # the broken variant: no upper limit to speak of
    assert separation.Config(trials=10**20).trials == 10**20
