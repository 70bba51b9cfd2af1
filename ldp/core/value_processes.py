"""A population's values over T periods, by a declared process: ``static``, ``churn`` and ``drift``.

Longitudinal collection (docs/longitudinal.md) asks the same users every period, and their values
may change between periods. This module is the experiment's side of that: it says *how* they
change, reproducibly, so that a simulation can host each period's values as one column of a data
file (``write_periods_csv``) and compare each period's estimate with that period's truth
(``period_marginals``).

Every value is a pure function of (seed, user id, period): the draws come from the project's
counter-based randomness, ``RandomSource(seed).for_request(STREAM, period, users)`` (ldp.core.rng),
so user 17's values are the same whether it is computed alone or among a million users, in one
shard or another. All three processes read the same period-0 draw, so they agree at period 0,
and ``churn(0)`` is ``static``.

Over k categories with a base distribution p (k ≥ 2):

- ``static``: every user's value is drawn once from p and never changes;
- ``churn(rate)``: each period after the first, each user independently, with probability
  ``rate``, redraws its value from p (the redraw may give the same value, so a fraction
  rate·(1 − Σ p_c²) actually changes); the marginal stays p at every period;
- ``drift(target)``: the marginal moves linearly from p (period 0) to ``target`` (period T − 1):
  f_t = (1 − s_t)·p + s_t·target with s_t = t/(T − 1) (s = 0 when T = 1). Each user keeps one
  uniform u for all periods and holds F_t^{-1}(u) at period t, the quantile coupling: a user
  changes only when a boundary of F_t crosses its u, and the values of all users stay in one
  order at every period (comonotone).

Exact integer cells (as in ldp.core.frequency_oracles): a draw is a 63-bit integer b (the top 63
bits of one AES block, uniform on [0, 2^63)), and the category is the number of boundaries
B_c ≤ b, with B_c = ⌊C_c·2^63⌋ computed in exact rationals from the cumulative sums C_c of the
floats given (p normalized by its exact sum, so the last boundary is exactly 2^63). So the
realized law of each category is (B_c − B_{c−1})/2^63, within 2^-63 of the declared one, and
``period_marginals`` returns exactly that realized law (rounded once to float64). A churn coin
is b < ⌊rate·2^63⌋ likewise.

Sources: the three processes are the usual scenarios of longitudinal LDP (a population whose
values are fixed, as RAPPOR's memoization assumes, Erlingsson, Pihur & Korolova, CCS 2014; values
that change for a few users at a time, or a distribution that drifts, as in Joseph, Roth, Ullman
& Waggoner, "Local differential privacy for evolving data", NeurIPS 2018). The quantile coupling
is the comonotone coupling (monotone rearrangement) of two laws on an ordered set, optimal for
costs convex in |x − y| (Villani, *Topics in Optimal Transportation*, 2003, ch. 2): users move to
neighbouring categories. It is not the coupling with the fewest changes (the maximal coupling
changes a user with probability the total variation between the two periods' laws, no more), so
``change_probabilities`` of a drift is at least that total variation, and more when mass crosses
several boundaries.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import ClassVar

import numpy as np

from ldp.core.errors import ParameterError, require_integer
from ldp.core.rng import RandomSource

__all__ = [
    "STREAM",
    "MAX_CATEGORIES",
    "ValueProcess",
    "Static",
    "Churn",
    "Drift",
    "PROCESSES",
    "value_process",
    "period_values",
    "period_marginals",
    "change_probabilities",
    "write_periods_csv",
]

STREAM = "records/value_process"  # the draws' stream: never shared with record generation or reports
MAX_CATEGORIES = 2**15  # a record value is int16 (ldp.core.schema.RECORD_DTYPE; MAX_CODES of a schema)
_BITS = 63  # a draw is b = (uint64 >> 1), uniform on [0, 2^63): a boundary of exactly 2^63 fits in uint64
_ONE = 1 << _BITS
_S1 = np.uint64(1)


def _distribution(name: str, values: object, k: int | None = None) -> tuple[float, ...]:
    """``values`` as a tuple of floats if it is a probability vector (finite, ≥ 0, sum 1 within
    1e-9; of length k when k is given, 2..2^15 otherwise), else a one-line ParameterError."""
    try:
        p = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a probability vector (numbers ≥ 0 summing to 1), got {values!r}") from None
    if p.ndim != 1:
        raise ParameterError(f"{name} must be a one-dimensional probability vector, got shape {p.shape}")
    if k is None and not 2 <= len(p) <= MAX_CATEGORIES:
        raise ParameterError(f"{name} must have k = 2..{MAX_CATEGORIES} entries (one per category), got k = {len(p)}")
    if k is not None and len(p) != k:
        raise ParameterError(f"{name} must have k = {k} entries (as many as p), got {len(p)}")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or abs(float(p.sum()) - 1.0) > 1e-9:
        raise ParameterError(f"{name} must be numbers ≥ 0 summing to 1 (within 1e-9), got sum {float(p.sum())!r} and min {float(p.min())!r}")
    return tuple(float(x) for x in p)


def _cumulative(p: Sequence[float]) -> list[Fraction]:
    """C_0 .. C_{k−2} of p, exactly, normalized by p's exact sum (so C_{k−1} would be exactly 1)."""
    exact = [Fraction(x) for x in p]
    total = sum(exact, Fraction(0))
    out, running = [], Fraction(0)
    for x in exact[:-1]:
        running += x
        out.append(running / total)
    return out


def _boundaries(cumulative: Sequence[Fraction]) -> np.ndarray:
    """B_c = ⌊C_c·2^63⌋ as uint64: category c holds the draws b with B_{c−1} ≤ b < B_c."""
    return np.array([math.floor(c * _ONE) for c in cumulative], dtype=np.uint64)


def _category(draws: np.ndarray, boundaries: np.ndarray) -> np.ndarray:
    """The number of boundaries ≤ each draw: its category (int64)."""
    return np.searchsorted(boundaries, draws, side="right").astype(np.int64)


def _law(boundaries: np.ndarray) -> np.ndarray:
    """The realized law of ``_category``: (B_c − B_{c−1})/2^63, with B_{−1} = 0 and B_{k−1} = 2^63."""
    edges = [0, *(int(b) for b in boundaries), _ONE]
    return np.array([float(Fraction(b - a, _ONE)) for a, b in zip(edges, edges[1:])])


def _draws(seed: int, period: int, users: np.ndarray, draw: int = 0) -> np.ndarray:
    """The 63-bit draws of ``users`` for ``period`` (the counter) and ``draw`` (the index)."""
    return RandomSource(seed).for_request(STREAM, period, users).bits(draw) >> _S1


@dataclass(frozen=True)
class ValueProcess:
    """How a population's values over k categories evolve over periods (the base class).

    Parameters
    ----------
    p : sequence of float
        The base distribution over categories 0..k−1 (k = len(p), 2 ≤ k ≤ 2^15): numbers ≥ 0
        summing to 1 within 1e-9; the cells are exact rationals of the floats given.
    """

    kind: ClassVar[str] = ""
    p: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "p", _distribution(f"{self.kind}: p", self.p))

    @property
    def k(self) -> int:
        return len(self.p)

    def boundaries(self, period: int, periods: int) -> np.ndarray:
        """The k − 1 cell boundaries (uint64, of 2^63) of the period's law."""
        return _boundaries(_cumulative(self.p))

    def marginals(self, periods: int) -> np.ndarray:
        """(periods, k): the realized law of each period's value (see the module docstring)."""
        return np.stack([_law(self.boundaries(t, periods)) for t in range(periods)])

    def values(self, users: np.ndarray, periods: int, seed: int) -> np.ndarray:
        """(len(users), periods) int64: each user's value at each period."""
        raise NotImplementedError

    def change_probabilities(self, periods: int) -> np.ndarray:
        """(periods − 1,): Pr[a user's value at t + 1 differs from its value at t], exactly."""
        raise NotImplementedError


@dataclass(frozen=True)
class Static(ValueProcess):
    """Every user's value drawn once from p, unchanged at every period."""

    kind: ClassVar[str] = "static"

    def values(self, users: np.ndarray, periods: int, seed: int) -> np.ndarray:
        first = _category(_draws(seed, 0, users), self.boundaries(0, periods))
        return np.repeat(first[:, None], periods, axis=1)

    def change_probabilities(self, periods: int) -> np.ndarray:
        return np.zeros(max(periods - 1, 0))


@dataclass(frozen=True)
class Churn(ValueProcess):
    """Each period after the first, each user independently redraws from p with probability
    ``rate`` (its own coin: draw 0 of the period; the new value: draw 1).

    Parameters
    ----------
    p : sequence of float
        The base distribution (also every period's marginal: redrawing from p keeps p).
    rate : float
        The redraw probability, in [0, 1]; a fraction rate·(1 − Σ p_c²) of users changes.
    """

    kind: ClassVar[str] = "churn"
    rate: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        rate = self.rate
        if isinstance(rate, (str, bytes, bool)) or not isinstance(rate, (int, float, np.integer, np.floating)) or not 0.0 <= float(rate) <= 1.0:
            raise ParameterError(f"churn: rate must be a number in [0, 1] (the probability that a user redraws its value each period), got {rate!r}")
        object.__setattr__(self, "rate", float(rate))

    @property
    def coin_cell(self) -> int:
        """⌊rate·2^63⌋: a user redraws when its 63-bit coin is below it (exactly rate·2^63/2^63 up to 2^-63)."""
        return math.floor(Fraction(self.rate) * _ONE)

    def values(self, users: np.ndarray, periods: int, seed: int) -> np.ndarray:
        bounds = self.boundaries(0, periods)
        out = np.empty((len(users), periods), dtype=np.int64)
        out[:, 0] = _category(_draws(seed, 0, users), bounds)
        cell = np.uint64(self.coin_cell)
        for t in range(1, periods):
            redraw = _draws(seed, t, users, 0) < cell
            fresh = _category(_draws(seed, t, users, 1), bounds)
            out[:, t] = np.where(redraw, fresh, out[:, t - 1])
        return out

    def change_probabilities(self, periods: int) -> np.ndarray:
        law = [Fraction(int(b) - int(a), _ONE) for a, b in zip([0, *self.boundaries(0, periods)], [*self.boundaries(0, periods), _ONE])]
        same = sum((x * x for x in law), Fraction(0))
        return np.full(max(periods - 1, 0), float(Fraction(self.coin_cell, _ONE) * (1 - same)))


@dataclass(frozen=True)
class Drift(ValueProcess):
    """The marginal moves linearly from p (period 0) to ``target`` (period T − 1); each user keeps
    one 63-bit draw (period 0's, draw 0) and holds F_t^{-1} of it at period t.

    Parameters
    ----------
    p : sequence of float
        The law at period 0.
    target : sequence of float
        The law at the last period: k numbers ≥ 0 summing to 1.
    """

    kind: ClassVar[str] = "drift"
    target: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "target", _distribution("drift: target", self.target, self.k))

    def boundaries(self, period: int, periods: int) -> np.ndarray:
        s = Fraction(period, periods - 1) if periods > 1 else Fraction(0)
        mixed = [(1 - s) * a + s * b for a, b in zip(_cumulative(self.p), _cumulative(self.target))]
        return _boundaries(mixed)

    def values(self, users: np.ndarray, periods: int, seed: int) -> np.ndarray:
        u = _draws(seed, 0, users)  # one draw per user for all periods: the quantile coupling
        return np.stack([_category(u, self.boundaries(t, periods)) for t in range(periods)], axis=1)

    def change_probabilities(self, periods: int) -> np.ndarray:
        """The measure of the draws whose category differs between t and t + 1, in integers: on
        each interval between consecutive boundaries of either period, both categories are fixed."""
        out = []
        for t in range(periods - 1):
            a, b = self.boundaries(t, periods), self.boundaries(t + 1, periods)
            cuts = sorted({0, _ONE, *(int(x) for x in a), *(int(x) for x in b)})
            changed = 0
            for lo, hi in zip(cuts, cuts[1:]):
                probe = np.array([lo], dtype=np.uint64)
                if _category(probe, a)[0] != _category(probe, b)[0]:
                    changed += hi - lo
            out.append(float(Fraction(changed, _ONE)))
        return np.array(out)


PROCESSES: dict[str, type[ValueProcess]] = {cls.kind: cls for cls in (Static, Churn, Drift)}


def value_process(kind: str, p: Sequence[float], **params: object) -> ValueProcess:
    """A declared process by name, from the registry ``PROCESSES``.

    Parameters
    ----------
    kind : str
        ``"static"``, ``"churn"`` or ``"drift"``.
    p : sequence of float
        The base distribution over categories 0..k−1.
    **params
        ``rate`` for churn, ``target`` for drift; nothing for static.

    Returns
    -------
    ValueProcess
        ``Static``, ``Churn`` or ``Drift``.

    Raises
    ------
    ParameterError
        An unknown kind, a parameter the kind does not take, or a bad value (one line each).

    Examples
    --------
    >>> value_process("churn", [0.5, 0.5], rate=0.2)
    Churn(p=(0.5, 0.5), rate=0.2)
    >>> value_process("churn", [0.5, 0.5], rate=2)
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: churn: rate must be a number in [0, 1] (the probability that a user redraws its value each period), got 2
    """
    cls = PROCESSES.get(kind)
    if cls is None:
        raise ParameterError(f"value process must be one of {sorted(PROCESSES)}, got {kind!r}")
    allowed = {"static": set(), "churn": {"rate"}, "drift": {"target"}}[kind]
    extra = sorted(set(params) - allowed)
    if extra:
        raise ParameterError(f"value process {kind!r} takes {sorted(allowed) or 'no parameters'} besides p, got {extra}")
    return cls(p, **params)  # type: ignore[arg-type]


def _periods(periods: object) -> int:
    return require_integer("periods", periods, 1, 1 << 20)


def period_values(process: ValueProcess, n: int, periods: int, seed: int, *, users: object = None) -> np.ndarray:
    """Every user's value at every period.

    Parameters
    ----------
    process : ValueProcess
        ``Static``, ``Churn`` or ``Drift`` (``value_process``).
    n : int
        The population's size, ≥ 1: users 0..n−1.
    periods : int
        T ≥ 1.
    seed : int
        The experiment's seed (``RandomSource``), in [0, 2^64).
    users : array of int, optional
        Compute only these users (ids in [0, n)); their rows equal those of the full array,
        whatever else is computed (counter-based draws: sharding invariance).

    Returns
    -------
    numpy.ndarray
        int64, shape (len(users) or n, periods), values in 0..k−1.

    Examples
    --------
    >>> drift = value_process("drift", [0.9, 0.1], target=[0.1, 0.9])
    >>> values = period_values(drift, 1000, 3, seed=7)
    >>> values.shape, values.mean(axis=0).round(2).tolist()  # the share of category 1: 0.1 → 0.5 → 0.9
    ((1000, 3), [0.11, 0.52, 0.9])
    >>> bool((period_values(drift, 1000, 3, seed=7, users=[5, 999]) == values[[5, 999]]).all())
    True
    """
    n = require_integer("n (users)", n, 1)
    periods = _periods(periods)
    ids = np.arange(n, dtype=np.int64) if users is None else np.asarray(users, dtype=np.int64).ravel()
    if len(ids) and (ids.min() < 0 or ids.max() >= n):
        raise ParameterError(f"users must be ids in [0, {n}), got {int(ids.min())}..{int(ids.max())}")
    return process.values(ids, periods, seed)


def period_marginals(process: ValueProcess, periods: int) -> np.ndarray:
    """The exact (realized) law of the value at each period.

    Parameters
    ----------
    process : ValueProcess
        The declared process.
    periods : int
        T ≥ 1.

    Returns
    -------
    numpy.ndarray
        (periods, k) float64: the truth an estimate of period t is compared with (p for static
        and churn; the interpolation for drift), each cell within 2^-63 of the declared law.

    Examples
    --------
    >>> period_marginals(value_process("drift", [1.0, 0.0], target=[0.0, 1.0]), 3).tolist()
    [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]]
    """
    return process.marginals(_periods(periods))


def change_probabilities(process: ValueProcess, periods: int) -> np.ndarray:
    """The exact probability that a user's value changes between t and t + 1.

    Parameters
    ----------
    process : ValueProcess
        The declared process.
    periods : int
        T ≥ 1.

    Returns
    -------
    numpy.ndarray
        (periods − 1,) float64: 0 for static, rate·(1 − Σ p_c²) for churn, the mass the
        quantile coupling moves for drift.

    Examples
    --------
    >>> change_probabilities(value_process("churn", [0.5, 0.5], rate=0.2), 3).tolist()
    [0.1, 0.1]
    """
    return process.change_probabilities(_periods(periods))


def write_periods_csv(folder: str | Path, values: np.ndarray, *, k: int, name: str = "v") -> tuple[Path, Path]:
    """Each period's values as one column, ``{name}0 .. {name}{T−1}``, in ``folder/periods.csv``,
    and their declared schema (format 1; each column an integer field, low 0, high k − 1) in
    ``folder/periods.schema.json``: what ``ldp-sim clients --data`` and ``launch_data`` host.

    ``k`` is declared, not read off the values: a served schema is public before any ε is spent
    (invariant I3, ldp.core.datafile_schema), so its range must not depend on the data.
    Each period is its own field, hence its own question (docs/longitudinal.md).

    Parameters
    ----------
    folder : str or Path
        An existing folder.
    values : numpy.ndarray
        (users, periods) integers in 0..k−1 (``period_values``).
    k : int
        The number of categories, declared (2..2^15).
    name : str, default "v"
        The columns' prefix (an identifier).

    Returns
    -------
    tuple of Path
        The CSV file and its schema file.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> data, schema = write_periods_csv(folder, np.array([[0, 1], [2, 2]]), k=3)
    >>> data.read_text().splitlines()
    ['v0,v1', '0,1', '2,2']
    >>> schema.read_text()
    '{"format": 1, "fields": [{"name": "v0", "low": 0, "high": 2}, {"name": "v1", "low": 0, "high": 2}]}'
    """
    values = np.asarray(values)
    if values.ndim != 2 or values.shape[0] < 1 or values.shape[1] < 1 or values.dtype.kind not in "iu":
        raise ParameterError(f"values must be an integer array of shape (users, periods), got {values.dtype} of shape {values.shape}")
    k = require_integer("k (categories)", k, 2, MAX_CATEGORIES)
    if not name.isidentifier():
        raise ParameterError(f"name must be an identifier (the columns are name0, name1, ...), got {name!r}")
    if values.min() < 0 or values.max() >= k:
        raise ParameterError(f"values must be categories 0..{k - 1} (k = {k}): some are outside")
    folder = Path(folder)
    data, schema = folder / "periods.csv", folder / "periods.schema.json"
    header = ",".join(f"{name}{t}" for t in range(values.shape[1]))
    np.savetxt(data, values, fmt="%d", delimiter=",", header=header, comments="")
    fields = [{"name": f"{name}{t}", "low": 0, "high": k - 1} for t in range(values.shape[1])]
    schema.write_text(json.dumps({"format": 1, "fields": fields}))
    return data, schema
