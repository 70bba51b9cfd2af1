"""The short API for an open string domain: the frequencies of candidate strings, by Apple's sketches.

>>> import ldp, numpy as np
>>> rng = np.random.default_rng(0)
>>> emoji = np.array(["😂", "❤️", "👍", "🙏"], dtype=object)[rng.choice(4, 50_000, p=[0.5, 0.3, 0.15, 0.05])]
>>> result = ldp.sketch_frequencies(emoji, ["😂", "🙏", "🦄"], epsilon=4.0, seed=0, truth=True)
>>> result.labels, result.truth
(('😂', '🙏', '🦄'), (0.49944, 0.05036, 0.0))
>>> all(lo < t < hi for t, lo, hi in zip(result.truth, result.low, result.high))
True

Apple's deployment (Apple Differential Privacy Team, "Learning with Privacy at Scale", 2017): each
user holds a string the server does not know in advance; the user hashes it and randomizes the
hash through the Count Mean Sketch (``cms``) or the Hadamard Count Mean Sketch (``hcms``); the
server estimates the counts of the candidate strings it names afterwards. Here (docs/sketches.md):

- **The users' side** (the caller, as data owner: ``ldp.core.string_column``): each user's record
  is its string's public 64-bit fingerprint (``ldp.core.string_hashing``). The users' public
  description is one fingerprint field, the same for every column: nothing computed from the
  strings is published (no label list, unlike a category column inferred without a schema), so
  the served path (``processes=P``) needs no declared schema.
- **One round**: every user answers once at ε (``cms_string`` / ``hcms_string`` over the
  ``record`` query, charged to its ledger before the report leaves), with the public ``hashes``
  (K), ``width`` (m) and ``hash_seed`` of the tabulation family.
- **The server**: N̂(x) for each candidate string (``SketchOracle.estimate_counts``); the
  candidates come from the analyst, never from the data. Estimates are frequencies N̂(x)/n.

Intervals. f̂ ± 1.96·sd with sd² the reference variance at the plug-in N(x) = clip(N̂(x), 0, n)
(``reference_count_variance``: collisions independent across users). It leaves out the hash
family's term (m − 1)/(K·m²)·Σ_{d≠x} N(d)(N(d) − 1) (``count_variance``), which needs the
population's counts; it is at most n²/(K·m) and small when no value holds a large share of
the users or K is large (at the defaults K = 4,096, m = 1,024 and n = 10^5 with every share
≤ 10 %, under 1 % of the variance at ε = 4). ``truth=True`` adds the true frequencies.

``oracle="auto"`` picks the sketch with the smaller per-user variance n·Var Z at this ε (CMS:
(c² − 1)/4 at ε/2's c; HCMS: c² at ε's): CMS at every ε (its m bits per report cost bandwidth:
m/8 bytes against HCMS's 6).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ldp.core.errors import LDPError, ParameterError, require_epsilon, require_integer
from ldp.core.query_specs import record_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.sketches import MAX_HASHES, MAX_WIDTH, SketchOracle
from ldp.core.string_column import StringColumn, read_string_column, string_column
from ldp.experiment.estimate import Z95, Estimates, report_key
from ldp.local.blocking import run
from ldp.local.data_oracle import DataLROracle
from ldp.local.messages import SessionKind
from ldp.local.oracle import LROracle
from ldp.local.session import Request, Session

__all__ = [
    "SKETCH_ORACLES",
    "DEFAULT_HASHES",
    "DEFAULT_WIDTH",
    "MAX_CANDIDATES",
    "sketch_frequencies",
    "estimate_file_sketch",
    "sketch_spec",
    "choose_sketch",
    "check_candidates",
    "candidate_list",
]

SKETCH_ORACLES: dict[str, str] = {"cms": "cms_string", "hcms": "hcms_string"}
DEFAULT_HASHES = 4096  # K: 16 MiB of tables (Apple's 65,536 would take 256 MiB); see the module docstring
DEFAULT_WIDTH = 1024  # m: Apple's
MAX_CANDIDATES = 1 << 16


def check_candidates(candidates: Any) -> list[str]:
    """The analyst's candidate strings as a list, or one line saying what is wrong: not a list of
    strings, empty, an empty string, a repeat, or more than ``MAX_CANDIDATES``."""
    if isinstance(candidates, (str, bytes)) or candidates is None:
        raise ParameterError(f"candidates must be a list of strings (the values to estimate), got {candidates!r}"[:200])
    try:
        items = list(candidates)
    except TypeError:
        raise ParameterError(f"candidates must be a list of strings, got {type(candidates).__name__}") from None
    if not items:
        raise ParameterError("candidates: give at least one string to estimate")
    for i, c in enumerate(items):
        if not isinstance(c, str) or not c:
            raise ParameterError(f"candidates: each must be a non-empty string; candidate {i + 1} is {c!r}"[:200])
    if len(items) > MAX_CANDIDATES:
        raise ParameterError(f"candidates: at most {MAX_CANDIDATES}, got {len(items)}")
    seen: set[str] = set()
    for c in items:
        if c in seen:
            raise ParameterError(f"candidates: {c!r} is listed twice"[:200])
        seen.add(c)
    return items


def candidate_list(text: str) -> list[str]:
    """``--candidates FILE_OR_COMMA_LIST``: an existing file is read (UTF-8, one candidate per line,
    surrounding spaces stripped, blank lines skipped); anything else is a comma-separated list
    (each item stripped). A name that looks like a file (a path separator or a .txt/.csv/.lst
    suffix, no comma) but is not one is refused, so a typo is not estimated as a string."""
    p = Path(text)
    if "," not in text and p.is_file():
        try:
            lines = p.read_text(encoding="utf-8-sig").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ParameterError(f"--candidates: the file {text!r} cannot be read as UTF-8 text ({type(exc).__name__})") from None
        items = [s.strip() for s in lines if s.strip()]
        if not items:
            raise ParameterError(f"--candidates: the file {text!r} lists no candidate (one per line)")
        return check_candidates(items)
    if "," not in text and ("/" in text or "\\" in text or p.suffix.lower() in (".txt", ".csv", ".lst")):
        raise ParameterError(f"--candidates: no such file {text!r} (give a file with one candidate per line, or a comma-separated list)")
    items = [s.strip() for s in text.split(",")]
    if any(not s for s in items):
        raise ParameterError(f"--candidates: an empty item in the list {text!r} (a comma-separated list of non-empty strings)"[:200])
    return check_candidates(items)


def _per_user_variance(kind: str, epsilon: float, width: int) -> float:
    R = _sketch(kind, epsilon, 1, width, 0)
    c = float(R.scale())
    return (c * c - 1) / 4 if kind == "cms_string" else c * c


def choose_sketch(epsilon: float, width: int = DEFAULT_WIDTH) -> str:
    """The kind with the smaller per-user variance at ε (module docstring)."""
    return min(SKETCH_ORACLES.values(), key=lambda kind: _per_user_variance(kind, epsilon, width))


def _sketch(kind: str, epsilon: float, hashes: int, width: int, hash_seed: int) -> SketchOracle:
    from ldp.core.sketches import StringCountMeanSketch, StringHadamardCountMeanSketch

    cls = StringCountMeanSketch if kind == "cms_string" else StringHadamardCountMeanSketch
    return cls(epsilon, (), hashes, width, hash_seed)


def sketch_spec(name: str, epsilon: float, oracle: str = "auto", hashes: int = DEFAULT_HASHES, width: int = DEFAULT_WIDTH, hash_seed: int = 0) -> RandomizerSpec:
    """The request every user answers: ``cms_string`` or ``hcms_string`` over the ``record`` query
    of its fingerprint field ``name``, with the public K, m and ``hash_seed`` (checked here, in one line)."""
    epsilon = require_epsilon(epsilon)
    hashes = require_integer("hashes", hashes, 1, MAX_HASHES, f"[1, {MAX_HASHES}] (a power of 2)")
    width = require_integer("width", width, 2, MAX_WIDTH, f"[2, {MAX_WIDTH}] (a power of 2)")
    hash_seed = require_integer("hash_seed", hash_seed, 0, (1 << 64) - 1, "[0, 2^64)")
    if not isinstance(oracle, str) or (oracle != "auto" and oracle not in SKETCH_ORACLES and oracle not in SKETCH_ORACLES.values()):
        raise ParameterError(f"sketch: oracle must be 'auto', 'cms' or 'hcms', got {oracle!r}")
    kind = choose_sketch(epsilon, width) if oracle == "auto" else SKETCH_ORACLES.get(oracle, oracle)
    _sketch(kind, epsilon, hashes, width, hash_seed)  # powers of 2: the sketch's own one-line refusal, before any user is asked
    return RandomizerSpec(kind, record_query(), epsilon, {"hashes": hashes, "width": width, "hash_seed": hash_seed})


async def _ask(oracle: LROracle, spec: RandomizerSpec, column: str, candidates: list[str], truth: StringColumn | None) -> Estimates:
    """One NON_INTERACTIVE round: every user answers ``spec`` once; the server estimates the candidates."""
    session = Session(oracle, SessionKind.NON_INTERACTIVE, name="sketch")
    n = oracle.user_count
    (rep,) = await session.round([Request.of(range(n), spec)])
    transcript = session.transcript.to_json()
    answered = len(rep.answered_users)
    if answered != len(rep.status):
        raise LDPError(f"{column}: {len(rep.status) - answered} users did not answer ({rep.counts()}; {'; '.join(rep.errors)})")
    description = oracle.description
    assert description is not None
    R = LocalRandomizer.build(spec, description.schema).randomizer  # what each user ran, rebuilt from the public schema
    assert isinstance(R, SketchOracle)
    counts = R.estimate_counts(rep.values, candidates)
    plug = np.clip(counts, 0.0, answered)
    var = R.reference_count_variance(np.append(plug, max(0.0, answered - float(plug.sum()))))[:-1]
    sd = np.sqrt(var) / answered
    f = counts / answered
    true = None if truth is None else tuple(float(t) for t in truth.true_counts(candidates) / truth.size)
    short = {v: k for k, v in SKETCH_ORACLES.items()}[spec.kind]
    learner = {"hashes": R.hashes, "width": R.width, "hash_seed": R.hash_seed, "candidates": len(candidates),
               "variance": "reference (the hash family's term left out; docs/sketches.md)"}
    return Estimates(
        "sketch", column, short, spec.kind, spec.epsilon, answered, tuple(candidates), tuple(float(x) for x in f),
        tuple(float(x) for x in f - Z95 * sd), tuple(float(x) for x in f + Z95 * sd), tuple(float(x) for x in sd),
        transcript, true, method="sketch", learner=learner,
    )


async def _ask_strings(data: StringColumn, spec: RandomizerSpec, candidates: list[str], key: bytes, processes: int | None, truth: bool) -> Estimates:
    """The column's users in process (one shard), or hosted by ``processes`` client processes that
    read the fingerprint file ``data`` writes (its schema is the public fingerprint field)."""
    if processes is None:
        return await _ask(DataLROracle(data, spec.epsilon, key), spec, data.name, candidates, data if truth else None)
    from ldp.wire.data_clients import launch_data  # the gRPC transport, imported only when asked for

    with tempfile.TemporaryDirectory(prefix="ldp-strings-") as folder:
        path, schema = data.write_csv(folder)
        async with launch_data(path, schema, budget=spec.epsilon, key=key, processes=processes, loaded=data) as oracle:
            return await _ask(oracle, spec, data.name, candidates, data if truth else None)


def _check_processes(processes: int | None) -> int | None:
    if processes is None:
        return None
    from ldp.wire.launcher import check_processes

    return check_processes(processes)


def sketch_frequencies(
    column: Any,
    candidates: Sequence[str],
    epsilon: float = 1.0,
    *,
    oracle: str = "auto",
    hashes: int = DEFAULT_HASHES,
    width: int = DEFAULT_WIDTH,
    hash_seed: int = 0,
    processes: int | None = None,
    seed: int | None = None,
    truth: bool = False,
) -> Estimates:
    """The frequency of each candidate string among the users' strings, by Apple's sketches under ε-LDP.

    The column's strings are an open domain: nothing about them is declared or published, each
    user's report is the sketch of its string's fingerprint, and the server estimates only the
    ``candidates`` the analyst names (module docstring).

    Parameters
    ----------
    column : numpy array, pandas Series or pyarrow Array / ChunkedArray
        One non-empty string per user, no missing value.
    candidates : sequence of str
        The strings to estimate (distinct, non-empty; at most 65,536): chosen by the analyst,
        absent ones included (their estimates are near 0).
    epsilon : float, default 1.0
        Each user's ε: one report each, charged to its ledger before it leaves.
    oracle : str, default "auto"
        ``cms`` (Count Mean Sketch: m bits per report), ``hcms`` (Hadamard: one bit and two
        indices), or ``auto`` (the smaller variance: ``choose_sketch``).
    hashes, width : int, default 4096, 1024
        K hash functions and the sketch's width m (powers of 2; K ≤ 65,536, m ≤ 32,768). Public.
    hash_seed : int, default 0
        Seeds the public tabulation family (fresh seed, fresh family; the estimate is unbiased
        over it). Public.
    processes, seed, truth
        As for ``ldp.frequencies``: client processes over loopback gRPC (bit-identical), the
        users' report key from ``seed``, the true frequencies (outside the protocol).

    Returns
    -------
    Estimates
        ``task`` "sketch", ``labels`` the candidates in the given order, ``estimates`` (N̂/n,
        unbiased, may be negative), 95 % intervals and sd (module docstring), ``learner`` (K, m,
        hash_seed).

    Raises
    ------
    ParameterError
        A column that is not strings or has a missing value, bad candidates, ε, oracle, K, m,
        hash_seed or processes (one line).

    Examples
    --------
    >>> import ldp, numpy as np
    >>> words = np.array(["the"] * 6000 + ["a"] * 3000 + [f"w{i}" for i in range(1000)], dtype=object)
    >>> result = ldp.sketch_frequencies(words, ["the", "a", "zebra"], epsilon=4.0, oracle="hcms", seed=1)
    >>> result.labels, result.kind, [round(f, 1) for f in result.estimates]
    (('the', 'a', 'zebra'), 'hcms_string', [0.6, 0.3, 0.0])
    """
    cands = check_candidates(candidates)
    processes = _check_processes(processes)
    data = string_column(column)
    spec = sketch_spec(data.name, epsilon, oracle, hashes, width, hash_seed)
    return run(_ask_strings(data, spec, cands, report_key(seed), processes, truth))  # type: ignore[no-any-return]


def estimate_file_sketch(
    path: str | Path,
    column: str,
    candidates: Sequence[str],
    epsilon: float,
    *,
    oracle: str = "auto",
    hashes: int = DEFAULT_HASHES,
    width: int = DEFAULT_WIDTH,
    hash_seed: int = 0,
    processes: int | None = None,
    seed: int | None = None,
    truth: bool = False,
) -> Estimates:
    """``ldp-sim estimate --task sketch``: ``sketch_frequencies`` of one string column of a CSV or
    Parquet file (``read_string_column``; no schema: the column's values are never declared nor
    published). For the same seed, bit-identical to ``sketch_frequencies`` on the same strings."""
    cands = check_candidates(candidates)
    processes = _check_processes(processes)
    spec_check = sketch_spec("value", epsilon, oracle, hashes, width, hash_seed)  # every parameter, before the file is read
    data = read_string_column(path, column)
    spec = RandomizerSpec(spec_check.kind, spec_check.query, spec_check.epsilon, spec_check.params)
    return run(_ask_strings(data, spec, cands, report_key(seed), processes, truth))  # type: ignore[no-any-return]
