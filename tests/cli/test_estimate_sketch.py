"""``ldp-sim estimate --task sketch`` (issue 26: Apple's sketches over an open string domain) as a
real process: a CSV column of strings that no schema declares, candidate strings from the analyst
(a file or a comma list), the same estimates as ``ldp.sketch_frequencies`` for the same seed, bit
for bit, in process and through two client processes over loopback gRPC; nothing of the data
but the candidates' estimates in what it writes; every bad invocation one line, exit 2.

The coverage check is seeded with a stated false-alarm rate and a broken variant it catches."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import ldp
from ldp.cli import main as cli
from tests.waits import PROCESS_WAIT_S

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds

LDP_SIM = str(Path(sys.executable).with_name("ldp-sim"))
WORDS = ["https://example.org/a?q=1", "😀", "naïve, with a comma", "the", "日本語"]
SHARES = [0.4, 0.25, 0.15, 0.12, 0.08]
SECRET = "s3cret-token-only-in-the-data"  # held by 3 users, never a candidate
N = 6000
CANDIDATES = ["https://example.org/a?q=1", "😀", "naïve, with a comma", "absent"]


def _strings() -> np.ndarray:
    rng = np.random.default_rng(5)
    s = np.array(WORDS, dtype=object)[rng.choice(len(WORDS), size=N, p=SHARES)]
    s[[10, 20, 30]] = SECRET
    return s


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """visits.csv (id, url: strings no schema declares) and candidates.txt (one per line)."""
    d = tmp_path_factory.mktemp("sketch")
    with (d / "visits.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "url"])
        w.writerows([i, s] for i, s in enumerate(_strings()))
    (d / "candidates.txt").write_text("\n".join(CANDIDATES) + "\n\n", encoding="utf-8")
    (d / "nums.csv").write_text("x\n1\n2\n", encoding="utf-8")
    (d / "holes.csv").write_text("url\na\n\"\"\nb\n", encoding="utf-8")
    return d


def _run(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LDP_SIM, "estimate", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ))


def _result(out: Path) -> dict:  # type: ignore[type-arg]
    (r,) = json.loads((out / "result.json").read_text(encoding="utf-8"))["results"]
    return r  # type: ignore[no-any-return]


@pytest.mark.parametrize("oracle", ["cms", "hcms"])
def test_the_command_estimates_undeclared_strings_as_the_library_does(folder: Path, oracle: str) -> None:
    out = f"out-{oracle}"
    done = _run(["--data", "visits.csv", "--column", "url", "--task", "sketch", "--candidates", "candidates.txt", "--oracle", oracle,
                 "--hashes", "1024", "--width", "256", "--hash-seed", "7", "--epsilon", "4", "--seed", "0", "--truth", "-o", out], folder)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{N} users (in process); ε = 4 per user; {oracle} sketch, K = 1024, m = 256, hash_seed = 7" in done.stdout
    r = _result(folder / out)
    assert r["task"] == "sketch" and r["kind"] == f"{oracle}_string" and [row["label"] for row in r["rows"]] == CANDIDATES
    api = ldp.sketch_frequencies(_strings(), CANDIDATES, 4.0, oracle=oracle, hashes=1024, width=256, hash_seed=7, seed=0, truth=True)
    assert [row["estimate"] for row in r["rows"]] == list(api.estimates)  # bit for bit: the same users, key and request
    assert [row["truth"] for row in r["rows"]] == list(api.truth or ())
    for row in r["rows"]:  # 4 intervals at ε = 4, n = 6000: each misses w.p. ≈ 5 % (seed fixed: this draw covers)
        assert row["low"] < row["truth"] < row["high"], row
    # the trust model: a string of the data that is not a candidate appears nowhere in what the command wrote or said
    written = "".join(p.read_text(encoding="utf-8", errors="replace") for p in (folder / out).iterdir() if p.suffix != ".png")
    assert SECRET not in written and SECRET not in done.stdout and SECRET not in done.stderr
    request = r["transcript"]["rounds"][0]["requests"][0]
    assert request["answered"] == N


def test_over_grpc_equal_in_process_with_a_comma_list(folder: Path) -> None:
    """Two client processes hold the users (the fingerprint file; no --schema needed: the users'
    public field is the same for any strings) and give the in-process estimates bit for bit."""
    args = ["--data", "visits.csv", "--column", "url", "--task", "sketch", "--candidates", "😀,the, absent ", "--hashes", "256", "--width", "64", "--seed", "3"]
    a = _run([*args, "-o", "out-in"], folder)
    b = _run([*args, "--processes", "2", "-o", "out-grpc"], folder, timeout=2 * PROCESS_WAIT_S)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert "2 client process(es) over loopback gRPC" in b.stdout
    ra, rb = _result(folder / "out-in"), _result(folder / "out-grpc")
    assert [row["label"] for row in ra["rows"]] == ["😀", "the", "absent"]
    assert [row["estimate"] for row in ra["rows"]] == [row["estimate"] for row in rb["rows"]]


BAD = [
    (["--task", "sketch"], "--task sketch needs --candidates FILE_OR_LIST"),
    (["--candidates", "a,b"], "--candidates goes with --task sketch"),
    (["--hashes", "64"], "--hashes goes with --task sketch"),
    (["--task", "sketch", "--candidates", "a,a"], "candidates: 'a' is listed twice"),
    (["--task", "sketch", "--candidates", "a,,b"], "an empty item in the list"),
    (["--task", "sketch", "--candidates", "nope.txt"], "--candidates: no such file 'nope.txt'"),
    (["--task", "sketch", "--candidates", "a", "--hashes", "3"], "--hashes must be a power of 2 in 1..65536, got '3'"),
    (["--task", "sketch", "--candidates", "a", "--width", "1"], "--width must be a power of 2 in 2..32768, got '1'"),
    (["--task", "sketch", "--candidates", "a", "--hash-seed", "-1"], "the seed must be in [0, 2^64)"),
    (["--task", "sketch", "--candidates", "a", "--oracle", "grr"], "--task sketch takes --oracle auto, cms or hcms, got 'grr'"),
    (["--oracle", "cms"], "--oracle cms is a sketch: it goes with --task sketch"),
    (["--task", "sketch", "--candidates", "a", "--column", "id"], "--task sketch estimates one column, got 2"),
    (["--task", "sketch", "--candidates", "a", "--schema", "candidates.txt"], "--schema cannot be used with it"),
    (["--task", "sketch", "--candidates", "a", "--method", "treehist", "--bits", "4"], "--method, --bits cannot be used with it"),
]


@pytest.mark.parametrize("args, message", BAD, ids=[f"bad-{k}" for k in range(len(BAD))])
def test_bad_invocation_is_one_line_exit_2(args: list[str], message: str, folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(folder)
    try:
        code = cli.main(["estimate", "--data", "visits.csv", "--column", "url", *args])
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("ldp-sim: error: ") and message in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--data", "visits.csv", "--column", "nope", "--task", "sketch", "--candidates", "a"], "visits.csv: no column 'nope' (columns: id, url)"),
        (["--data", "holes.csv", "--column", "url", "--task", "sketch", "--candidates", "a"], "1 missing value(s), the first at row 2"),
        (["--bind", "127.0.0.1:0", "--column", "url", "--task", "sketch", "--candidates", "a"], "--bind cannot be used with it"),
        (["--data", "visits.csv", "--column", "url", "--task", "sketch"], "--task sketch needs --candidates"),
    ],
)
def test_bad_invocations_through_the_real_command(folder: Path, args: list[str], message: str) -> None:
    done = _run(args, folder, timeout=PROCESS_WAIT_S)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


def _coverage(seeds: range, shift: float) -> float:
    """The share of 95 % intervals that cover the truth over ``seeds`` (fresh report keys and hash
    families), with every interval moved by ``shift`` sd (0: the real one)."""
    strings = _strings()
    hits = total = 0
    for s in seeds:
        r = ldp.sketch_frequencies(strings, CANDIDATES, 1.0, oracle="hcms" if s % 2 else "cms", hashes=256, width=64, hash_seed=s, seed=s, truth=True)
        for lo, hi, sd, t in zip(r.low, r.high, r.sd, r.truth or ()):
            hits += lo + shift * sd < t < hi + shift * sd
            total += 1
    return hits / total


def test_the_intervals_cover_and_a_shifted_interval_is_caught() -> None:
    """60 runs × 4 candidates (ε = 1, K = 256, m = 64, fresh families): the coverage's binomial
    test against 95 % at level 10^-4 (two-sided; the runs share the population, so candidates'
    intervals are mildly dependent: the level is approximate). Intervals shifted by 1 sd (a broken
    centre) cover ≈ 83 % and are rejected by the same test."""
    trials = 240
    good = _coverage(range(60), 0.0)
    assert stats.binomtest(round(good * trials), trials, 0.95).pvalue > 1e-4, good
    bad = _coverage(range(60), 1.0)
    assert stats.binomtest(round(bad * trials), trials, 0.95).pvalue < 1e-4, bad
