"""The short API: the frequencies, mean or heavy hitters of one column under ε-LDP, in one call.

>>> import ldp, numpy as np
>>> colours = np.random.default_rng(0).choice(["red", "green", "blue"], size=10_000, p=[0.5, 0.3, 0.2])
>>> print(ldp.frequencies(colours, epsilon=1.0, seed=0))  # doctest: +ELLIPSIS
frequencies of value: 10000 users, ε = 1 (grr), ...
category  estimate  95 % interval
blue      0.2...

The caller plays two roles at once (docs/design.md §2a): the *data owner*, whose column becomes
the users' records in this process (``ldp.core.column``), and the *experiment*, which owns the
seed and launches the client processes. Everything in between is the same users' side as the
rest of the project: each user is a row of a ``Shard`` with its ledger (charged ε before its
report leaves), its budget (exactly ε: one report each) and its exact sampler keyed by the
report key; the aggregator's side sees only reports and the public description. With
``processes=P`` the same records are written to a CSV file with its declared schema and hosted
by P client processes over loopback gRPC (``ldp.wire.data_clients.launch_data``): for the same
seed, the reports, hence the estimates, are bit-identical to the in-process run.

``ldp-sim estimate --data FILE --column NAME`` (``ldp.cli.estimate``) asks the same ``Question``
through ``estimate_file``: one way to do it, so the command and the API agree bit for bit.

Estimates and intervals
-----------------------
- Frequencies: the frequency oracle's unbiased estimate f̂(x) = (C(x)/n − q*)/(p* − q*) with
  its exact variance Var f̂(x) = [f p*(1 − p*) + (1 − f) q*(1 − q*)]/(n (p* − q*)²) at the
  realized p*, q* (Wang, Blocki, Li & Jha 2017; ``ldp.core.frequency_oracles``), evaluated at
  the plug-in f = clip(f̂, 0, 1); the 95 % interval is f̂ ± 1.96·sd (normal approximation:
  f̂ is a sum of n independent bounded terms). tests/test_quick_api.py measures its coverage.
  ``estimator=`` other than ``"mi"`` (``ldp.core.frequency_estimators``: IBU, MLE, the
  consistency post-processing of Wang et al. 2020) replaces the estimate by a function of it and
  keeps the MI's sd, so its interval is the MI's width around a biased estimate (not a measured
  coverage); docs/estimators.md gives each one's bias and variance.
- ``oracle="auto"`` picks the oracle whose exact variance at f = 1/k is the smallest among GRR
  (``kary_rr``), OLH and Hadamard Response, and also OUE and Subset Selection when k ≤ 256
  (their reports are k bits; Wang et al. 2017 §5: GRR wins exactly when k − 2 < 3e^ε).
- Means: the mechanism's unbiased report on the column mapped onto [−1, 1] (Duchi et al.,
  Piecewise, Hybrid: ``ldp.core.mean_estimation``); sd = √(max_t Var(t)/n), the largest exact
  variance over inputs t ∈ [−1, 1] (the users' inputs are unknown to the aggregator), so the
  interval is conservative. ``oracle="auto"`` picks the smallest worst-case variance.
- A file's declared field (``estimate_file``): rows are labelled by what each record value
  stands for (a category's label, a float grid's or a wide integer's value, ``"(missing)"`` for
  the missing slot); a ``"missing": "drop"`` field's slot is estimated with the rest and its row
  left out (post-processing), the other rows staying shares of all n users.
- Heavy hitters: the k categories with the largest frequency estimates (the column's domain is
  at most 2^15 categories). For integers of a declared bit width ``bits`` (a domain of 2^d
  values), ``method="pem"``, ``"treehist"`` or ``"treehist-1round"`` (one non-interactive
  round, each user drawing its own level) runs that prefix protocol
  (``ldp.learners.heavy_hitters``, ``ldp.learners.treehist``) on the same users, each
  answering once; the intervals are f̂ ± 1.96·sd with the exact variance over the last level's
  users, at the last level's candidate count (docs/treehist.md).
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ldp.core.column import ColumnData, column_values, frequency_column, held_records, holdings_identity, mean_column
from ldp.core.errors import LDPError, ParameterError, require_epsilon, require_integer
from ldp.core.frequency_estimators import estimate as post_estimate
from ldp.core.frequency_estimators import estimator_spec
from ldp.core.frequency_oracles import frequency_estimates, frequency_variance, support_probabilities
from ldp.core.mean_estimation import from_unit_interval, unit_interval_query
from ldp.core.prefix_reports import TreeHistPrefix
from ldp.core.query_specs import field_query, prefix_index, record_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import derive_key_bytes, secret_key
from ldp.core.schema import RECORD_DTYPE, Field, Schema
from ldp.learners.heavy_hitters import learn_heavy_hitters_pem
from ldp.learners.treehist import learn_heavy_hitters_treehist, learn_heavy_hitters_treehist_1round
from ldp.local.blocking import run
from ldp.local.data_oracle import DataLROracle
from ldp.local.messages import SessionKind
from ldp.local.oracle import LROracle, Reports
from ldp.local.session import Request, Session
from ldp.local.shard import Holdings

__all__ = [
    "Estimates",
    "Question",
    "frequencies",
    "mean",
    "heavy_hitters",
    "HEAVY_HITTER_METHODS",
    "BitColumn",
    "bit_column",
    "estimate_file",
    "estimate_served",
    "frequency_question",
    "mean_question",
    "ask",
    "choose_frequency_oracle",
    "choose_mean_oracle",
    "report_key",
    "FREQUENCY_ORACLES",
    "MEAN_ORACLES",
    "TASKS",
    "Z95",
]

TASKS = ("frequencies", "mean", "heavy-hitters")
# the short names the API and the command take → the registered randomizer kinds
FREQUENCY_ORACLES: dict[str, str] = {"grr": "kary_rr", "oue": "oue", "olh": "olh", "hr": "hadamard_response", "ss": "subset_selection", "sue": "sue"}
MEAN_ORACLES: dict[str, str] = {"duchi": "pm_rr", "piecewise": "piecewise", "hybrid": "hybrid"}
Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile
_SMALL_K = 256  # OUE and SS reports are k bits: auto considers them up to this k
_KEY_LABEL = "ldp.estimate"


def report_key(seed: int | None) -> bytes:
    """The users' report key: derived from ``seed`` (reproducible: the same seed, the same
    reports, in process or over gRPC), or a fresh secret for ``None``."""
    if seed is None:
        return secret_key()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ParameterError(f"seed must be an integer or None, got {seed!r}")
    return derive_key_bytes(_KEY_LABEL, int(seed))


def _short(kind: str) -> str:
    names = {v: k for k, v in {**FREQUENCY_ORACLES, **MEAN_ORACLES}.items()}
    return names.get(kind, kind)


# --- what is asked ---


@dataclass(frozen=True)
class Question:
    """One column asked of every user: the task, the users' field, the randomizer and how its
    estimate is read (labels for frequencies; for a mean, the field's range and the map
    ``offset + factor·v`` from field units to the caller's). ``left_out``: record values whose
    rows are estimated like any other but not reported (the missing slot of a ``"missing":
    "drop"`` field, ``ldp.core.datafile_schema``: post-processing)."""

    task: str
    column: str
    field: Field
    kind: str
    epsilon: float
    labels: tuple[Any, ...] = ()
    offset: float = 0.0
    factor: float = 1.0
    top: int = 10
    left_out: tuple[int, ...] = ()
    estimator: str = "mi"

    @property
    def spec(self) -> RandomizerSpec:
        if self.task == "mean":
            return RandomizerSpec(self.kind, unit_interval_query(self.field.name, self.field.low, self.field.high), self.epsilon)
        return RandomizerSpec(self.kind, field_query(self.field.name), self.epsilon)

    @property
    def oracle(self) -> str:
        return _short(self.kind)


def _one_field_schema(f: Field) -> Schema:
    return Schema((f,))


def choose_frequency_oracle(f: Field, epsilon: float) -> str:
    """The kind with the smallest exact variance at f = 1/k for this field and ε (module docstring)."""
    k = f.cardinality
    kinds = ["kary_rr", "olh", "hadamard_response"] + (["oue", "subset_selection"] if k <= _SMALL_K else [])
    schema = _one_field_schema(f)
    best: tuple[float, str] | None = None
    for kind in kinds:
        try:
            R = LocalRandomizer.build(RandomizerSpec(kind, field_query(f.name), epsilon), schema).randomizer
        except LDPError:  # e.g. an oracle that does not take this k
            continue
        v = float(frequency_variance(R, 1.0 / k, 1))
        if best is None or v < best[0] * (1 - 1e-9):  # a tie keeps the earlier (more compact) one
            best = (v, kind)
    assert best is not None
    return best[1]


def _mean_worst_variance(kind: str, epsilon: float) -> float:
    schema = _one_field_schema(Field("t", 1, -1, 1))
    R = LocalRandomizer.build(RandomizerSpec(kind, unit_interval_query("t", -1, 1), epsilon), schema).randomizer
    return float(np.max(R.variance(np.linspace(-1.0, 1.0, 401))))


def choose_mean_oracle(epsilon: float) -> str:
    """The mean mechanism with the smallest worst-case exact variance over inputs in [−1, 1]."""
    return min(MEAN_ORACLES.values(), key=lambda kind: _mean_worst_variance(kind, epsilon))


def _kind(oracle: str, table: dict[str, str], what: str) -> str:
    if not isinstance(oracle, str):
        raise ParameterError(f"{what}: oracle must be 'auto' or one of {', '.join(table)}, got {oracle!r}")
    if oracle in table:
        return table[oracle]
    if oracle in table.values():
        return oracle
    raise ParameterError(f"{what}: oracle must be 'auto' or one of {', '.join(table)}, got {oracle!r}")


def frequency_question(
    column: str, f: Field, epsilon: float, oracle: str = "auto", labels: Sequence[Any] | None = None, task: str = "frequencies", top: int = 10,
    left_out: Sequence[int] = (), estimator: str = "mi",
) -> Question:
    """Ask every user's ``f`` through a frequency oracle (``"auto"``: ``choose_frequency_oracle``);
    the rows of the record values in ``left_out`` are not reported; the answer is read by
    ``estimator`` (``ldp.core.frequency_estimators.ESTIMATORS``; default the unbiased MI)."""
    epsilon = require_epsilon(epsilon)
    estimator = estimator_spec(estimator).name  # an unknown name: one line listing the allowed ones
    kind = choose_frequency_oracle(f, epsilon) if oracle == "auto" else _kind(oracle, FREQUENCY_ORACLES, task)
    rows = tuple(labels) if labels is not None else tuple(f.values().tolist())
    return Question(task, column, f, kind, epsilon, rows, top=top, left_out=tuple(left_out), estimator=estimator)


def mean_question(column: str, f: Field, epsilon: float, oracle: str = "auto", offset: float = 0.0, factor: float = 1.0) -> Question:
    """Ask every user's ``f`` (values in [f.low, f.high]) through a mean mechanism."""
    epsilon = require_epsilon(epsilon)
    kind = choose_mean_oracle(epsilon) if oracle == "auto" else _kind(oracle, MEAN_ORACLES, "mean")
    return Question("mean", column, f, kind, epsilon, offset=offset, factor=factor)


# --- the result ---


@dataclass(frozen=True)
class Estimates:
    """The answer to one ``Question``: estimates, 95 % intervals, the oracle and the transcript.

    Parameters
    ----------
    task, column : str
        ``frequencies``, ``mean``, ``heavy-hitters`` or ``sketch``; the column's name.
    oracle, kind : str
        The oracle's short name (``grr``, ``olh``, ``hybrid``, ...) and its randomizer kind.
    epsilon : float
        What each user spent on this column.
    users : int
        How many users answered.
    labels : tuple
        Row j's category (the column's name for a mean).
    estimates, low, high, sd : tuple of float
        Per row: the unbiased estimate, its 95 % interval and its standard deviation.
    transcript : dict
        The session's (rounds, requests, ε, counts: never a record or a report).
    truth : tuple of float, optional
        The true values, only when asked for (the experimenter's yardstick, computed from the
        records outside the protocol).
    estimator : str
        How frequencies were read (``ldp.core.frequency_estimators``; default ``mi``).
    method : str
        How heavy hitters were found: ``oracle`` (the top k of a frequency oracle over the
        listed categories; every other task too), ``pem`` or ``treehist`` (a prefix protocol
        over a declared bit width, ``heavy_hitters``), or ``sketch`` (Apple's CMS or HCMS over
        an open domain of strings, read at the analyst's candidates:
        ``ldp.experiment.sketch_estimate.sketch_frequencies``).
    learner : dict, optional
        For ``pem`` and ``treehist``: the learner's summary (every level's prefix length,
        candidates, users, and for TreeHist its threshold τ and z), public like the transcript.

    Examples
    --------
    >>> import ldp, numpy as np
    >>> result = ldp.frequencies(np.array([0, 1, 1, 1] * 500), epsilon=2.0, seed=0)
    >>> result.labels, result.users, result.transcript["rounds"][0]["requests"][0]["answered"]
    ((0, 1), 2000, 2000)
    >>> print(result)  # doctest: +ELLIPSIS
    frequencies of value: 2000 users, ε = 2 (grr), estimate ± 1.96 sd
    category  estimate  95 % interval
    0         0.2...
    """

    task: str
    column: str
    oracle: str
    kind: str
    epsilon: float
    users: int
    labels: tuple[Any, ...]
    estimates: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    sd: tuple[float, ...]
    transcript: dict[str, Any] = field(repr=False, compare=False)
    truth: tuple[float, ...] | None = None
    estimator: str = "mi"
    method: str = "oracle"
    learner: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def rows(self) -> list[dict[str, Any]]:
        """One dict per row: column, task, label, estimate, low, high, sd (and truth)."""
        out = []
        for j, label in enumerate(self.labels):
            row = {"column": self.column, "task": self.task, "oracle": self.oracle, "epsilon": self.epsilon, "users": self.users,
                   "label": label, "estimate": self.estimates[j], "low": self.low[j], "high": self.high[j], "sd": self.sd[j]}
            if self.truth is not None:
                row["truth"] = self.truth[j]
            out.append(row)
        return out

    def as_dict(self) -> dict[str, Any]:
        out = {"task": self.task, "column": self.column, "oracle": self.oracle, "kind": self.kind, "epsilon": self.epsilon,
               "users": self.users, "rows": self.rows(), "transcript": self.transcript}
        if self.estimator != "mi":  # the default's dict is unchanged
            out["estimator"] = self.estimator
        if self.method != "oracle":  # likewise
            out["method"] = self.method
            out["learner"] = self.learner
        return out

    def __str__(self) -> str:
        read = ("" if self.estimator == "mi" else f", {self.estimator}") + ("" if self.method == "oracle" else f", {self.method}")
        head = f"{self.task} of {self.column}: {self.users} users, ε = {self.epsilon:g} ({self.oracle}{read}), estimate ± 1.96 sd"
        width = max([len("category")] + [len(str(v)) for v in self.labels])
        lines = [head, f"{'category' if self.task != 'mean' else 'column':<{width}}  estimate  95 % interval" + ("  truth" if self.truth is not None else "")]
        for j, label in enumerate(self.labels):
            line = f"{str(label):<{width}}  {self.estimates[j]:<8.4g}  [{self.low[j]:.4g}, {self.high[j]:.4g}]"
            if self.truth is not None:
                line += f"  {self.truth[j]:.4g}"
            lines.append(line)
        return "\n".join(lines)


# --- asking: one NON_INTERACTIVE session, one round, every question to every user ---


async def ask(oracle: LROracle, questions: Sequence[Question], truth: Holdings | None = None, name: str = "estimate") -> list[Estimates]:
    """Ask every user every question in one round and read each answer (module docstring).

    ``truth``: the users' records, to add the true values (the experimenter's yardstick)."""
    session = Session(oracle, SessionKind.NON_INTERACTIVE, name=name)
    n = oracle.user_count
    reports = await session.round([Request.of(range(n), q.spec) for q in questions])
    transcript = session.transcript.to_json()
    description = oracle.description
    assert description is not None
    records = truth.records(0, truth.size) if truth is not None else None
    return [_read(q, rep, description.schema, transcript, records, truth) for q, rep in zip(questions, reports)]


def _read(q: Question, rep: Reports, schema: Schema, transcript: dict[str, Any], records: np.ndarray | None, truth: Holdings | None) -> Estimates:
    n = len(rep.answered_users)
    if n != len(rep.status):
        raise LDPError(f"{q.column}: {len(rep.status) - n} users did not answer ({rep.counts()}; {'; '.join(rep.errors)})")
    R = LocalRandomizer.build(q.spec, schema).randomizer  # what each user ran, rebuilt from the public schema
    values = records[:, schema.column(q.field.name)] if records is not None else None
    if q.task == "mean":
        lo, hi = q.field.low, q.field.high
        unit = float(np.mean(R.estimate(rep.values)))
        sd_unit = math.sqrt(_mean_worst_variance(q.kind, q.epsilon) / n)
        est = q.offset + q.factor * float(from_unit_interval(unit, lo, hi))
        sd = abs(q.factor) * sd_unit * (hi - lo) / 2.0
        true = None if values is None else (q.offset + q.factor * float(np.mean(values.astype(np.float64))),)
        return Estimates(q.task, q.column, q.oracle, q.kind, q.epsilon, n, (q.column,), (est,), (est - Z95 * sd,), (est + Z95 * sd,), (sd,), transcript, true)
    f = np.asarray(frequency_estimates(R, rep.values), dtype=np.float64)
    sd_all = np.sqrt(frequency_variance(R, np.clip(f, 0.0, 1.0), n))
    if q.estimator != "mi":  # post-processing of the MI estimate; sd stays the MI's (module docstring)
        f = post_estimate(q.estimator, f, *support_probabilities(R), n=n)
    cats = q.field.values()
    true_all = None if values is None else np.array([np.mean(values == c) for c in cats])
    # a "drop" field's missing slot is estimated with the rest (the oracle's k) and left out here;
    # the other rows stay shares of all n users, as the truth below
    order = np.flatnonzero(~np.isin(cats, np.asarray(q.left_out, dtype=np.int64)))
    if q.task == "heavy-hitters":
        order = order[np.lexsort((order, -f[order]))][: q.top]  # largest first; ties: the lower category
    pick = order.tolist()
    return Estimates(
        q.task, q.column, q.oracle, q.kind, q.epsilon, n,
        tuple(q.labels[j] for j in pick), tuple(float(f[j]) for j in pick),
        tuple(float(f[j] - Z95 * sd_all[j]) for j in pick), tuple(float(f[j] + Z95 * sd_all[j]) for j in pick),
        tuple(float(sd_all[j]) for j in pick), transcript,
        None if true_all is None else tuple(float(true_all[j]) for j in pick), q.estimator,
    )


async def _ask_column(data: ColumnData, question: Question, key: bytes, processes: int | None, truth: bool) -> Estimates:
    """The column's users, in process (one shard) or hosted by ``processes`` client processes."""
    budget = question.epsilon
    if processes is None:
        (result,) = await ask(DataLROracle(data, budget, key), [question], data if truth else None)
        return result
    from ldp.wire.data_clients import launch_data  # the gRPC transport, imported only when asked for

    with tempfile.TemporaryDirectory(prefix="ldp-column-") as folder:
        path, schema = data.write_csv(folder)  # the data owner's own file: only its clients read it
        async with launch_data(path, schema, budget=budget, key=key, processes=processes, loaded=data) as oracle:
            (result,) = await ask(oracle, [question], data if truth else None)
    return result


def _run(coroutine: Any) -> Any:
    return run(coroutine)  # ldp.run: a script or a notebook alike


def _check_processes(processes: int | None) -> int | None:
    if processes is None:
        return None
    from ldp.wire.launcher import check_processes

    return check_processes(processes)


def frequencies(
    column: Any,
    epsilon: float = 1.0,
    *,
    oracle: str = "auto",
    categories: Sequence[Any] | None = None,
    processes: int | None = None,
    seed: int | None = None,
    truth: bool = False,
    estimator: str = "mi",
) -> Estimates:
    """The frequency of each category of ``column`` under ε-LDP, with 95 % intervals.

    >>> import ldp, numpy as np
    >>> result = ldp.frequencies(np.array(["a", "b", "a", "c"] * 2500), epsilon=1.0)
    >>> print(result)  # doctest: +SKIP

    Each element is one user, who randomizes its value once (a ``Shard``: ledger, budget ε,
    exact sampler); the estimates are the oracle's unbiased ones and the intervals come from
    its exact variance (module docstring).

    Parameters
    ----------
    column : numpy array, pandas Series or pyarrow Array / ChunkedArray
        One value per user: strings, booleans or integers (categories), no missing value.
    epsilon : float, default 1.0
        Each user's ε: one report each, charged to its ledger before it leaves.
    oracle : str, default "auto"
        ``auto`` (the smallest exact variance, module docstring), ``grr``, ``oue``, ``olh``,
        ``hr``, ``ss`` or ``sue``.
    categories : sequence, optional
        The domain, declared: every value must be one of them, and categories absent from the
        column get estimates too. Default: the sorted distinct strings, or for integers
        min..max by their gcd step (computed from the data: fine here, in the data owner's
        process; a served deployment must declare it, ``ldp-sim clients --schema S``).
    processes : int, optional
        Run the same through this many client processes over loopback gRPC; default in process.
    seed : int, optional
        Derives the users' report key: the same seed gives the same estimates, bit for bit, in
        process, over gRPC and through ``ldp-sim estimate``. Default: a fresh secret key.
    truth : bool, default False
        Also give the true frequencies (the caller's yardstick; outside the protocol).
    estimator : str, default "mi"
        How the reports are read (``ldp.core.frequency_estimators``, docs/estimators.md): ``mi``
        (matrix inversion: unbiased, may be negative), ``ibu``, ``mle``, or the consistency
        post-processing ``base_pos``, ``norm``, ``norm_mul``, ``norm_cut``, ``norm_sub``: each is
        post-processing of the MI estimate (no privacy cost), all but ``norm`` biased; ``sd``
        and the intervals stay the MI estimate's, centred on the chosen estimate.

    Returns
    -------
    Estimates
        ``labels``, ``estimates``, ``low``/``high`` (95 %), ``sd``, ``oracle``, ``epsilon``,
        ``transcript``; ``str(result)`` is a table.

    Raises
    ------
    ParameterError
        A bad column (missing values, floats, too many categories), ε, oracle or processes.

    Examples
    --------
    >>> result = ldp.frequencies(np.array(["a", "b", "a", "c"] * 2500), epsilon=1.0, seed=0, truth=True)
    >>> result.oracle, result.labels, result.truth
    ('grr', ('a', 'b', 'c'), (0.5, 0.25, 0.25))
    >>> all(lo < t < hi for t, lo, hi in zip(result.truth, result.low, result.high))
    True
    """
    processes = _check_processes(processes)
    data = frequency_column(column, categories)
    question = frequency_question(data.name, data.field, epsilon, oracle, data.labels, estimator=estimator)
    return _run(_ask_column(data, question, report_key(seed), processes, truth))  # type: ignore[no-any-return]


def heavy_hitters(
    column: Any,
    epsilon: float = 1.0,
    *,
    k: int = 10,
    oracle: str = "auto",
    categories: Sequence[Any] | None = None,
    processes: int | None = None,
    seed: int | None = None,
    truth: bool = False,
    method: str = "oracle",
    bits: int | None = None,
) -> Estimates:
    """The ``k`` most frequent values of ``column`` under ε-LDP, with their 95 % intervals.

    ``method="oracle"`` (default): ``frequencies`` read for its top k, the k largest estimates,
    largest first (ties: the earlier category); the domain is listed (≤ 2^15 categories).

    For a domain too large to list, the values are integers of a declared bit width ``bits``
    (0 .. 2^bits − 1, bit 0 the most significant) and an interactive prefix protocol finds them,
    each user answering once at ε (one charge):

    - ``method="pem"``: PEM (Wang, Li & Jha, TDSC 2021;
      ``ldp.learners.heavy_hitters.learn_heavy_hitters_pem``, η = 2 bits per round): always
      the k best prefixes, so k values, noise included when fewer are frequent;
    - ``method="treehist"``: TreeHist (Bassily, Nissim, Stemmer & Thakurta, NeurIPS 2017;
      ``ldp.learners.treehist.learn_heavy_hitters_treehist``, one bit per level, beam
      max(k, 32), β = 0.05): the values whose estimates pass the noise-calibrated threshold
      z·sd at every level, at most k of them; possibly none (docs/treehist.md);
    - ``method="treehist-1round"``: the same TreeHist in one NON-interactive round
      (``ldp.learners.treehist.learn_heavy_hitters_treehist_1round``): every user draws its own
      level from its own randomness and sends one OLH report of its prefix of that length
      (``treehist_prefix``), and the server descends the tree from those reports; the aggregator
      does not choose who answers which level (``oracle`` ``auto`` or ``olh`` only).

    All run on the same records as ``oracle``, in process or in ``processes`` client
    processes over gRPC (bit for bit the same); which users answer at which level is a public
    partition, seeded from ``seed`` through a one-way hash (the aggregator's choice, never the
    users' report key). ``oracle="auto"`` is OLH there (its variance does not grow with the
    candidate count, which changes every level).

    Parameters
    ----------
    column : numpy array, pandas Series or pyarrow Array / ChunkedArray
        One category per user (as for ``frequencies``); for ``pem``/``treehist``, one integer in
        0 .. 2^bits − 1 per user.
    epsilon : float, default 1.0
        Each user's ε (one report each).
    k : int, default 10
        How many values to return (TreeHist: at most), ≥ 1; PEM: ≤ 1023 and ≤ 2^(bits − 1).
    oracle, categories, processes, seed, truth
        As for ``frequencies`` (``categories`` only with ``oracle``; ``oracle`` one of ``grr``,
        ``olh``, ``hr``, ``oue``, ``sue`` for the prefix methods).
    method : str, default "oracle"
        ``oracle``, ``pem``, ``treehist`` or ``treehist-1round`` (above).
    bits : int, optional
        The declared bit width of the values, 1..62: required by ``pem`` and ``treehist``,
        refused by ``oracle``. Public (it is the users' schema): declare it, do not compute it
        from the data.

    Returns
    -------
    Estimates
        The top rows, largest estimate first: labels (integers for ``pem``/``treehist``),
        unbiased estimates from the last level's users with their exact sd and 95 % intervals,
        ``method``, ``learner`` (every level: length, candidates, users; TreeHist's thresholds).

    Raises
    ------
    ParameterError
        As ``frequencies``; a bad ``k``, ``method`` or ``bits``; a value that is not an
        integer of ``bits`` bits (one line: how many, the first row and value, what is allowed).

    Examples
    --------
    >>> import ldp, numpy as np
    >>> words = np.array(["the"] * 500 + ["a"] * 300 + [f"w{i}" for i in range(200)])
    >>> ldp.heavy_hitters(words, epsilon=2.0, k=2, seed=0).labels
    ('the', 'a')
    >>> ids = np.random.default_rng(0).integers(0, 2**20, size=50_000)  # 20-bit values, 2 planted
    >>> ids[:15_000], ids[15_000:25_000] = 0xBEEF0, 0x12345
    >>> ldp.heavy_hitters(ids, epsilon=2.0, method="treehist", bits=20, seed=0).labels
    (782064, 74565)
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ParameterError(f"k must be an integer ≥ 1, got {k!r}")
    if not isinstance(method, str) or method not in HEAVY_HITTER_METHODS:
        raise ParameterError(f"heavy_hitters: method must be one of {', '.join(HEAVY_HITTER_METHODS)}, got {method!r}")
    processes = _check_processes(processes)
    if method == "oracle":
        if bits is not None:
            raise ParameterError(f"heavy_hitters: bits={bits!r} is for method 'pem' or 'treehist' (or 'treehist-1round'); method 'oracle' reads the listed categories (categories=)")
        data = frequency_column(column, categories)
        question = frequency_question(data.name, data.field, epsilon, oracle, data.labels, task="heavy-hitters", top=int(k))
        return _run(_ask_column(data, question, report_key(seed), processes, truth))  # type: ignore[no-any-return]
    if categories is not None:
        raise ParameterError(f"heavy_hitters: method {method!r} reads integers of a declared bit width (bits=), not categories=")
    return _prefix_heavy_hitters(bit_column(column, bits, method), epsilon, int(k), oracle, processes, seed, truth, method)


def _prefix_heavy_hitters(held: BitColumn, epsilon: float, k: int, oracle: str, processes: int | None, seed: int | None, truth: bool, method: str) -> Estimates:
    """PEM or TreeHist on a ``BitColumn`` (``heavy_hitters`` and ``estimate_file``'s one path)."""
    epsilon = require_epsilon(epsilon)
    # Subset selection is not offered: its reports are sets over a fixed k, and a level's k changes.
    if oracle not in ("auto", "grr", "olh", "hr", "oue", "sue"):
        raise ParameterError(f"heavy_hitters: method {method!r} takes oracle 'auto', 'grr', 'olh', 'hr', 'oue' or 'sue', got {oracle!r} ('auto' is OLH)")
    kind = "olh" if oracle == "auto" else _kind(oracle, FREQUENCY_ORACLES, f"heavy_hitters (method {method!r})")
    if method == "treehist-1round" and kind != "olh":  # its report is evaluated at candidates chosen afterwards
        raise ParameterError(f"heavy_hitters: method 'treehist-1round' takes oracle 'auto' or 'olh' (a report evaluated at any candidate afterwards), got {oracle!r}")
    if method == "pem" and k > 2 ** (held.bits - 1):  # PEM starts at ⌈log2 k⌉ bits: there must be a round after it
        raise ParameterError(f"heavy_hitters: method 'pem' needs k ≤ 2^(bits − 1) = {2 ** (held.bits - 1)}, got k={k} with bits={held.bits}")
    plan = _PrefixPlan(method, kind, epsilon, k, _levels_seed(seed))
    return _run(_ask_prefix(held, plan, report_key(seed), processes, truth))  # type: ignore[no-any-return]


# --- heavy hitters of a declared bit width: PEM and TreeHist on the column's users ---

HEAVY_HITTER_METHODS = ("oracle", "pem", "treehist", "treehist-1round")
TREEHIST_BEAM = 32  # the most prefixes TreeHist keeps per level, unless k is larger
_BITS_TAG = b"ldp.column.bits/v1\n"
_LEVELS_LABEL = "ldp.heavy_hitters.levels"


@dataclass(frozen=True)
class BitColumn:
    """A column of integers 0 .. 2^bits − 1 as users' records: one {0,1} field of ``bits``
    columns, bit 0 the most significant (the layout of ``prefix_index``, PEM and TreeHist).
    A ``Holdings`` for ``Shard``, written for client processes by ``write_csv``; it keeps the
    values for the caller's truth (the data owner's, outside the protocol)."""

    name: str
    bits: int
    values: np.ndarray = field(repr=False, compare=False)
    _records: np.ndarray = field(repr=False, compare=False)

    @property
    def schema(self) -> Schema:
        return Schema((Field(self.name, self.bits, 0, 1),))

    @property
    def size(self) -> int:
        return int(len(self._records))

    @property
    def identity(self) -> str:
        """SHA-256 of the records and the schema (the ledger key, as ``ColumnData``'s)."""
        return holdings_identity(_BITS_TAG, self.schema, self._records)

    def records(self, first_user: int, count: int) -> np.ndarray:
        """Records of users first_user .. first_user+count−1: int16 0/1, shape (count, bits)."""
        return held_records(self._records, first_user, count)

    def write_csv(self, folder: str | Path) -> tuple[Path, Path]:
        """``column.csv`` (columns name_0 .. name_{bits−1}) and its declared ``schema.json``."""
        folder = Path(folder)
        data, schema = folder / "column.csv", folder / "schema.json"
        header = ",".join(f"{self.name}_{j}" for j in range(self.bits))
        np.savetxt(data, self._records, fmt="%d", delimiter=",", header=header, comments="")
        schema.write_text(json.dumps({"format": 1, "fields": [{"name": self.name, "length": self.bits, "low": 0, "high": 1}]}))
        return data, schema


def bit_column(column: Any, bits: int | None, method: str = "treehist") -> BitColumn:
    """The column's integers as ``bits``-bit records (``BitColumn``), or one line saying why not:
    ``bits`` missing or out of 1..62, a column that is not integers, a value outside 0..2^bits − 1."""
    if bits is None:
        raise ParameterError(f"heavy_hitters: method {method!r} needs bits=B, the declared bit width of the values (1..62; every value an integer in 0..2^B − 1)")
    bits = require_integer(f"heavy_hitters: bits (method {method!r})", bits, 1, 62)
    values, own = column_values(column)
    if values.dtype.kind not in "iu":
        raise ParameterError(f"heavy_hitters: method {method!r} reads integers 0..2^{bits} − 1, got a column of {values.dtype} values (map each value to an integer id first)")
    top = 1 << bits
    bad = values >= top if values.dtype.kind == "u" else (values < 0) | (values >= top)
    count = int(np.count_nonzero(bad))
    if count:
        first = int(np.argmax(bad))
        raise ParameterError(
            f"heavy_hitters: {count} value(s) do not fit in bits={bits} (integers 0..{top - 1}), the first {values[first]} at row {first + 1}"
        )
    values = values.astype(np.int64)
    records = np.empty((len(values), bits), dtype=RECORD_DTYPE)
    for j in range(bits):  # column by column: no (n, bits) int64 temporary
        records[:, j] = (values >> (bits - 1 - j)) & 1
    name = own if isinstance(own, str) and own.isidentifier() else "value"
    return BitColumn(name, bits, values, records)


def _levels_seed(seed: int | None) -> int:
    """The seed of the public partition of users into levels: a one-way hash of the
    experiment's ``seed`` under its own label (so the aggregator that gets it cannot derive the
    report key from it), or a fresh one."""
    raw = secret_key() if seed is None else derive_key_bytes(_LEVELS_LABEL, int(seed))
    return int.from_bytes(raw[:8], "big") >> 1


@dataclass(frozen=True)
class _PrefixPlan:
    method: str
    kind: str
    epsilon: float
    k: int
    seed: int


async def _learn_prefix(lr: LROracle, data: BitColumn, plan: _PrefixPlan, truth: bool) -> Estimates:
    """Run PEM or TreeHist over ``lr`` and read the result as ``Estimates`` (module docstring):
    the sd of each estimate is the oracle's exact ``frequency_variance`` at the plug-in f over
    the last level's users, rebuilt on the public schema with the last level's candidate count."""
    found: Any
    if plan.method == "treehist-1round":  # the users draw their levels: no partition seed
        found = await learn_heavy_hitters_treehist_1round(lr, bits=data.bits, epsilon=plan.epsilon, beam=max(plan.k, TREEHIST_BEAM), field=data.name, name="heavy-hitters")
    elif plan.method == "treehist":
        found = await learn_heavy_hitters_treehist(
            lr, bits=data.bits, epsilon=plan.epsilon, beam=max(plan.k, TREEHIST_BEAM), field=data.name, seed=plan.seed, name="heavy-hitters", oracle=plan.kind
        )
    else:
        found = await learn_heavy_hitters_pem(lr, bits=data.bits, k=plan.k, epsilon=plan.epsilon, field=data.name, seed=plan.seed, name="heavy-hitters", oracle=plan.kind)
    items, freq = list(found.items)[: plan.k], np.asarray(found.frequencies[: plan.k], dtype=np.float64)
    if items and plan.method == "treehist-1round":  # Var f̂ over the n_t reports of the last level, plus which users drew it
        last = found.levels[-1]
        R1 = LocalRandomizer.build(RandomizerSpec("treehist_prefix", record_query(), plan.epsilon, {"bits": data.bits, "step": 1, "field": data.name}), data.schema).randomizer
        assert isinstance(R1, TreeHistPrefix)
        sd = np.sqrt(np.asarray(R1.frequency_variance(np.clip(freq, 0.0, 1.0), last.answered, found.users), dtype=np.float64)).reshape(-1)
    elif items:  # something returned: the last level ran
        last = found.levels[-1]
        spec = RandomizerSpec(plan.kind, prefix_index(data.bits, range(last.candidates), data.name), plan.epsilon)
        R = LocalRandomizer.build(spec, data.schema).randomizer
        sd = np.sqrt(np.asarray(frequency_variance(R, np.clip(freq, 0.0, 1.0), last.answered), dtype=np.float64)).reshape(-1)
    else:
        sd = np.zeros(0)
    true = tuple(float(np.mean(data.values == v)) for v in items) if truth else None
    # users who answered (and were charged): in one round all of them, whatever levels the descent read
    answered = found.users if plan.method == "treehist-1round" else sum(lv.answered for lv in found.levels)
    return Estimates(
        "heavy-hitters", data.name, _short(plan.kind), plan.kind, plan.epsilon, answered,
        tuple(int(v) for v in items), tuple(float(v) for v in freq),
        tuple(float(v) for v in freq - Z95 * sd), tuple(float(v) for v in freq + Z95 * sd), tuple(float(v) for v in sd),
        lr.transcript.to_json(), true, "mi", plan.method, found.summary(),
    )


async def _ask_prefix(data: BitColumn, plan: _PrefixPlan, key: bytes, processes: int | None, truth: bool) -> Estimates:
    """The column's users in process (one shard), or hosted by ``processes`` client processes
    that read the file ``data`` writes (as ``_ask_column``): the same reports, bit for bit."""
    if processes is None:
        return await _learn_prefix(DataLROracle(data, plan.epsilon, key), data, plan, truth)
    from ldp.wire.data_clients import launch_data  # the gRPC transport, imported only when asked for

    with tempfile.TemporaryDirectory(prefix="ldp-bits-") as folder:
        path, schema = data.write_csv(folder)
        async with launch_data(path, schema, budget=plan.epsilon, key=key, processes=processes, loaded=data) as oracle:
            return await _learn_prefix(oracle, data, plan, truth)


def mean(
    column: Any,
    epsilon: float = 1.0,
    *,
    bounds: tuple[float, float],
    oracle: str = "auto",
    out_of_range: str = "refuse",
    processes: int | None = None,
    seed: int | None = None,
    truth: bool = False,
) -> Estimates:
    """The mean of a numeric ``column`` with values in the declared ``bounds``, under ε-LDP.

    >>> import ldp, numpy as np
    >>> ages = np.random.default_rng(1).integers(18, 90, size=100_000)
    >>> result = ldp.mean(ages, epsilon=1.0, bounds=(0, 120))

    Parameters
    ----------
    column : numpy array, pandas Series or pyarrow Array / ChunkedArray
        One number per user, no missing value.
    epsilon : float, default 1.0
        Each user's ε (one report each).
    bounds : (lo, hi)
        The declared range of the values (public: never computed from the data). Integer
        bounds on an integer column are exact; other values are rounded to a grid of
        ``ldp.core.column.GRID`` steps over the range (an error ≤ (hi − lo)/32768).
    oracle : str, default "auto"
        ``auto`` (the smallest worst-case variance), ``duchi``, ``piecewise`` or ``hybrid``.
    out_of_range : str, default "refuse"
        A value outside ``bounds``: ``refuse`` (one line naming how many and the first row) or ``clip``.
    processes, seed, truth
        As for ``frequencies``.

    Returns
    -------
    Estimates
        One row: the estimate, its conservative 95 % interval (worst-case exact variance), sd.

    Examples
    --------
    >>> result = ldp.mean(ages, epsilon=1.0, bounds=(0, 120), seed=0)
    >>> bool(result.low[0] < ages.mean() < result.high[0]), result.oracle
    (True, 'hybrid')
    """
    processes = _check_processes(processes)
    data = mean_column(column, bounds, out_of_range)
    assert data.bounds is not None
    lo, hi = data.bounds
    offset, factor = (0.0, 1.0) if data.kind == "values" else (lo, (hi - lo) / data.field.high)
    question = mean_question(data.name, data.field, epsilon, oracle, offset, factor)
    return _run(_ask_column(data, question, report_key(seed), processes, truth))  # type: ignore[no-any-return]


# --- a data file's columns (ldp-sim estimate) ---


def estimate_file(
    path: str | Path,
    columns: Sequence[str],
    epsilon: float,
    *,
    task: str = "frequencies",
    schema: str | Path | None = None,
    oracle: str = "auto",
    processes: int | None = None,
    seed: int | None = None,
    truth: bool = False,
    top: int = 10,
    method: str = "oracle",
    bits: int | None = None,
) -> list[Estimates]:
    """``ldp-sim estimate``: each of ``columns`` of a CSV/Parquet file asked of every user, ε
    split equally across them (each user spends ``epsilon`` in all, ε/m per column), in one
    round; in process, or through ``processes`` client processes that read the file (a
    declared ``schema`` is then required: invariant I3). A mean's range is the schema field's
    low..high (declared, or inferred from the data in process).

    Heavy hitters with ``method="pem"`` or ``"treehist"`` (``heavy_hitters``): one column of
    integers 0..2^bits − 1, ``bits`` declared; the file is read here and its users answer as
    ``heavy_hitters``'s (in process, or ``processes`` client processes reading the column's bits,
    whose declared schema is ``bits`` wide: no ``schema`` is needed for them)."""
    from ldp.core.datafile import load_data

    epsilon = require_epsilon(epsilon)
    processes = _check_processes(processes)
    if not isinstance(method, str) or method not in HEAVY_HITTER_METHODS:
        raise ParameterError(f"method must be one of {', '.join(HEAVY_HITTER_METHODS)}, got {method!r}")
    if method != "oracle":
        return [_file_prefix_heavy_hitters(path, columns, epsilon, task, schema, oracle, processes, seed, truth, top, method, bits)]
    if bits is not None:
        raise ParameterError(f"bits={bits!r} is for method 'pem' or 'treehist' (or 'treehist-1round'; heavy hitters of integers of a declared bit width)")
    if processes is not None and schema is None:  # served users need a declared schema (invariant I3)
        from ldp.core.datafile import undeclared_schema_message

        raise ParameterError(undeclared_schema_message(path))
    if task not in TASKS:  # before the file is read
        raise ParameterError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    data = load_data(path, schema) if schema is not None else load_data(path, columns=list(dict.fromkeys(columns)))
    questions = _questions(data, columns, epsilon, task, oracle, top)
    key = report_key(seed)

    async def go() -> list[Estimates]:
        if processes is None:
            return await ask(DataLROracle(data, epsilon, key), questions, data if truth else None)
        from ldp.wire.data_clients import launch_data

        assert schema is not None  # checked before the file was read
        async with launch_data(path, schema, budget=epsilon, key=key, processes=processes, loaded=data) as lr:
            return await ask(lr, questions, data if truth else None)

    results: list[Estimates] = _run(go())
    return results


def _file_prefix_heavy_hitters(
    path: str | Path, columns: Sequence[str], epsilon: float, task: str, schema: str | Path | None, oracle: str,
    processes: int | None, seed: int | None, truth: bool, top: int, method: str, bits: int | None,
) -> Estimates:
    """``estimate_file`` with ``method`` pem or treehist: the one column's integers as bits."""
    from ldp.core.datafile import load_data

    if task != "heavy-hitters":
        raise ParameterError(f"method {method!r} finds heavy hitters: it goes with task 'heavy-hitters', not {task!r}")
    if len(columns) != 1:
        raise ParameterError(f"method {method!r} reads one column of integers, got {len(columns)} columns ({', '.join(columns)})")
    if bits is None:  # before the file is read
        bit_column(np.zeros(0, dtype=np.int64), bits, method)
    name = columns[0]
    data = load_data(path, schema) if schema is not None else load_data(path, columns=[name])
    labels = data.labels(name)
    if labels is not None:
        raise ParameterError(f"method {method!r} reads integers 0..2^bits − 1; column {name!r} holds categories ({', '.join(labels[:5])}{', …' if len(labels) > 5 else ''}): map each to an integer id first")
    spec_field = data.schema.field(name)  # record values are low, low + step, ..., high: position j stands for values(name)[j]
    recs = np.asarray(data.records(0, data.size)[:, data.schema.column(name)], dtype=np.int64)
    values = np.asarray(data.values(name))[(recs - spec_field.low) // spec_field.step]
    if values.dtype.kind == "f":  # an integer field's values come as a float grid when it declares a missing slot
        if not np.all(np.isfinite(values)) or not np.all(values == np.round(values)):
            raise ParameterError(f"method {method!r} reads integers 0..2^bits − 1; column {name!r} has a missing or non-integer value")
        values = values.astype(np.int64)
    held = bit_column(values, bits, method)
    if name.isidentifier():
        held = replace(held, name=name)
    return _prefix_heavy_hitters(held, epsilon, top, oracle, processes, seed, truth, method)


def _questions(data: Any, columns: Sequence[str], epsilon: float, task: str, oracle: str, top: int) -> list[Question]:
    """One question per column, each at ε/m (the budget split equally across the m columns)."""
    if task not in TASKS:
        raise ParameterError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    if not columns:
        raise ParameterError("give at least one column (--column NAME)")
    if len(set(columns)) != len(columns):
        raise ParameterError(f"a column is named twice: {list(columns)}")
    share = epsilon / len(columns)
    questions = []
    for name in columns:
        f = _field_of(data, name)
        if task == "mean":
            offset, factor = _linear_values(data, f, name)
            questions.append(mean_question(name, f, share, oracle, offset, factor))
        else:
            questions.append(frequency_question(name, f, share, oracle, _labels(data, f), task=task, top=top, left_out=_dropped_slot(data, f)))
    return questions


@dataclass(frozen=True)
class _Declaration:
    """A schema file read without its data (``estimate_served``): the same reading interface as
    a ``DataPopulation`` (schema, columns, labels, values)."""

    schema: Schema
    columns: tuple[str, ...]
    spec: Any

    def labels(self, name: str) -> Any:
        return self.spec(name).labels

    def values(self, name: str) -> Any:
        return self.spec(name).values()


def estimate_served(
    bind: str,
    schema: str | Path,
    users: int,
    columns: Sequence[str],
    epsilon: float,
    *,
    task: str = "frequencies",
    oracle: str = "auto",
    top: int = 10,
    wait_s: float = 600.0,
    on_listening: Any = None,
) -> list[Estimates]:
    """``ldp-sim estimate --bind HOST:PORT``: the aggregator alone, for remote client processes
    (``ldp-sim clients --connect HOST:PORT --data FILE --schema S --budget E``) that hold the
    ``users`` users; it knows only the declared ``schema`` and ``users`` (their public
    description), waits up to ``wait_s`` for the clients to cover every user, asks the same
    questions as ``estimate_file`` and sends Close. ``on_listening(address)`` is called once bound."""
    from ldp.core.datafile import read_declaration
    from ldp.core.population import PopulationDescription

    epsilon = require_epsilon(epsilon)
    declared = read_declaration(schema)
    data = _Declaration(declared.schema, tuple(declared.columns), declared.spec)
    questions = _questions(data, columns, epsilon, task, oracle, top)

    async def go() -> list[Estimates]:
        from ldp.wire.aggregator import GrpcAggregator, GrpcLROracle

        aggregator = GrpcAggregator(PopulationDescription(users, declared.schema), bind)
        await aggregator.start()
        try:
            if on_listening is not None:
                on_listening(aggregator.address)
            await aggregator.wait_for_shards(wait_s)
            results = await ask(GrpcLROracle(aggregator), questions)
        except BaseException as exc:
            reason = " ".join(str(exc).split())[:300] or type(exc).__name__
            await aggregator.close(f"the experiment failed: {reason}", failed=True)  # the clients learn why (they exit 3)
            raise
        await aggregator.close("the experiment is over")
        return results

    results: list[Estimates] = _run(go())
    return results


def _labels(data: Any, f: Field) -> tuple[Any, ...]:
    """What each record value of ``f`` stands for: a category field's declared labels (the
    last may be the missing-value slot), else the declared values (a float grid's or a wide
    integer's, whose records are indices; the missing slot is ``MISSING_LABEL``), else the
    field's values."""
    from ldp.core.datafile_schema import MISSING_LABEL

    labels_of = getattr(data, "labels", None)
    labels = labels_of(f.name) if callable(labels_of) else None
    if labels is not None:
        return tuple(labels)
    values_of = getattr(data, "values", None)
    values = np.asarray(values_of(f.name)) if callable(values_of) else f.values()
    if len(values) != f.cardinality:
        values = f.values()
    integral = values.dtype.kind in "iu" or getattr(getattr(data, "spec", lambda _: None)(f.name), "type", None) == "integer"
    return tuple(MISSING_LABEL if v != v else (int(v) if integral else v) for v in values.tolist())


def _dropped_slot(data: Any, f: Field) -> tuple[int, ...]:
    """The missing slot of a ``"missing": "drop"`` field (its rows are left out of the estimates,
    docs/security.md), or () for any other field."""
    spec_of = getattr(data, "spec", None)
    spec = spec_of(f.name) if callable(spec_of) else None
    slot = getattr(spec, "missing_slot", None) if getattr(spec, "missing", None) == "drop" else None
    return () if slot is None else (int(slot),)


def _linear_values(data: Any, f: Field, column: str) -> tuple[float, float]:
    """(offset, factor) with value = offset + factor·(record value): the identity for integers,
    the declared grid for a float field. A category, or a missing-value slot, has no mean."""
    values_of = getattr(data, "values", None)
    if not callable(values_of):
        return 0.0, 1.0
    values = np.asarray(values_of(f.name))
    if values.dtype.kind not in "iuf" or len(values) != f.cardinality:
        raise ParameterError(f"column {column!r} is a category field: a mean needs numbers (an integer or float field)")
    values = values.astype(np.float64)
    grid = f.values().astype(np.float64)
    if not np.isfinite(values).all():
        raise ParameterError(
            f"column {column!r} keeps a missing-value slot (\"missing\": \"category\" or \"drop\"): a mean needs every user "
            "to hold a number (\"missing\": \"refuse\", on a file without empty cells)"
        )
    factor = (values[-1] - values[0]) / (grid[-1] - grid[0])
    offset = values[0] - factor * grid[0]
    if not np.allclose(values, offset + factor * grid, rtol=1e-9, atol=1e-9 * max(1.0, float(np.abs(values).max()))):
        raise ParameterError(f"column {column!r}: its values are not evenly spaced, so their mean is not a mean of the records")
    return float(offset), float(factor)


def _field_of(data: Any, column: str) -> Field:
    """The schema field read from file column ``column`` (a field of length 1): the field of
    that name, or the one the file column was read into."""
    position = 0
    columns = tuple(getattr(data, "columns", ()))
    for f in data.schema:
        if f.name == column or column in columns[position : position + f.length]:
            if f.length != 1:
                raise ParameterError(f"column {column!r} is part of field {f.name!r} of length {f.length}: ask a field of length 1")
            return f  # type: ignore[no-any-return]
        position += f.length
    raise ParameterError(f"column {column!r} is not in the data (fields: {[f.name for f in data.schema]})")
