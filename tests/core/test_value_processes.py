"""Declared value processes over periods (ldp.core.value_processes, issue 26): each period's
marginal, each process's change rate, the drift's coupling, sharding invariance, validation, and
the data file they write.

Seeded. Each statistical check states its false-alarm rate (two-sided, per check, for a correct
process); every check is also run on a broken variant written here, which it catches.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ldp.core.datafile import load_data
from ldp.core.errors import ParameterError
from ldp.core.rng import RandomSource
from ldp.core.value_processes import (
    STREAM,
    Churn,
    Drift,
    ValueProcess,
    change_probabilities,
    period_marginals,
    period_values,
    value_process,
    write_periods_csv,
)

P = (0.55, 0.25, 0.15, 0.05)
TARGET = (0.1, 0.2, 0.3, 0.4)
N, T, SEED = 20_000, 6, 11
ALPHA = 1e-3  # false-alarm rate of each check on a correct process
Z = float(stats.norm.isf(ALPHA / 2))  # 3.29

PROCESSES = {
    "static": value_process("static", P),
    "churn": value_process("churn", P, rate=0.2),
    "drift": value_process("drift", P, target=TARGET),
}


def _marginals_fit(values: np.ndarray, marginals: np.ndarray) -> bool:
    """χ² goodness of fit of every period's counts to its law, each at ALPHA."""
    n, k = len(values), marginals.shape[1]
    for t in range(values.shape[1]):
        counts = np.bincount(values[:, t], minlength=k)
        if stats.chisquare(counts, n * marginals[t]).pvalue < ALPHA:
            return False
    return True


def _change_rates_fit(values: np.ndarray, expected: np.ndarray) -> bool:
    """The fraction of users whose value changes between t and t + 1, against its exact
    probability: a binomial z-test per transition, each at ALPHA (exact equality when it is 0)."""
    changed = (values[:, 1:] != values[:, :-1]).sum(axis=0)
    n = len(values)
    for x, q in zip(changed, expected):
        if q == 0:
            if x != 0:
                return False
        elif abs(x - n * q) > Z * np.sqrt(n * q * (1 - q)):
            return False
    return True


def _comonotone(values: np.ndarray) -> bool:
    """Every two users' value sequences are ordered the same way at every period (the quantile
    coupling): sorted by their sum, every period's column is non-decreasing."""
    ordered = values[np.lexsort((values.sum(axis=1),))]
    return bool(np.all(np.diff(ordered, axis=0) >= 0))


@pytest.mark.parametrize("kind", sorted(PROCESSES))
def test_each_periods_marginal_and_change_rate_match_the_declared_law(kind: str) -> None:
    process = PROCESSES[kind]
    values = period_values(process, N, T, SEED)
    assert values.shape == (N, T) and values.dtype == np.int64 and values.min() >= 0 and values.max() < 4
    marginals = period_marginals(process, T)
    assert marginals.shape == (T, 4) and np.allclose(marginals.sum(axis=1), 1.0)
    assert _marginals_fit(values, marginals)
    assert _change_rates_fit(values, change_probabilities(process, T))


def test_the_declared_laws_and_change_rates() -> None:
    """static and churn keep p; drift interpolates p → target linearly; the realized cells are
    within 2^-63 of the declared floats. Churn changes rate·(1 − Σp²); static never."""
    for kind in ("static", "churn"):
        assert np.allclose(period_marginals(PROCESSES[kind], T), np.tile(P, (T, 1)), atol=1e-15)
    s = np.arange(T)[:, None] / (T - 1)
    assert np.allclose(period_marginals(PROCESSES["drift"], T), (1 - s) * np.array(P) + s * np.array(TARGET), atol=1e-15)
    assert np.allclose(change_probabilities(PROCESSES["churn"], T), 0.2 * (1 - sum(x * x for x in P)), atol=1e-15)
    assert np.array_equal(change_probabilities(PROCESSES["static"], T), np.zeros(T - 1))
    # drift: a linear path moves the same mass each period, and no more than its total variation
    drift = change_probabilities(PROCESSES["drift"], T)
    tv_step = 0.5 * np.abs(np.array(P) - np.array(TARGET)).sum() / (T - 1)
    assert np.allclose(drift, drift[0]) and drift[0] >= tv_step - 1e-15
    assert period_marginals(PROCESSES["drift"], 1).tolist() == [list(P)]  # T = 1: the period-0 law


def test_static_never_changes_and_drift_only_moves_along_quantiles() -> None:
    static = period_values(PROCESSES["static"], N, T, SEED)
    assert np.all(static == static[:, :1])
    drift = period_values(PROCESSES["drift"], N, T, SEED)
    assert _comonotone(drift)
    # towards a target heavier on high categories, each user's value only rises
    assert np.all(np.diff(drift, axis=1) >= 0)


def test_all_processes_share_period_zero_and_churn_zero_is_static() -> None:
    firsts = [period_values(p, 1000, 3, SEED)[:, 0] for p in PROCESSES.values()]
    assert all(np.array_equal(firsts[0], f) for f in firsts)
    assert np.array_equal(period_values(value_process("churn", P, rate=0.0), 1000, T, SEED), period_values(PROCESSES["static"], 1000, T, SEED))


@pytest.mark.parametrize("kind", sorted(PROCESSES))
def test_a_users_values_do_not_depend_on_who_else_is_computed(kind: str) -> None:
    process = PROCESSES[kind]
    full = period_values(process, 1000, T, SEED)
    assert np.array_equal(period_values(process, 1000, T, SEED, users=np.arange(500, 1000)), full[500:])
    assert np.array_equal(period_values(process, 1000, T, SEED, users=[999, 3, 500]), full[[999, 3, 500]])
    assert not np.array_equal(period_values(process, 1000, T, SEED + 1), full)  # the seed matters
    # Broken variant: draws keyed by the position in the batch, not by the user id
    broken = _positional(process)(np.arange(500, 1000))
    assert not np.array_equal(broken, full[500:])
    assert np.array_equal(_positional(process)(np.arange(1000)), full)  # same as the real one on the full batch


def _positional(process: ValueProcess) -> Callable[[np.ndarray], np.ndarray]:
    return lambda users: process.values(np.arange(len(users), dtype=np.int64), T, SEED)


# ---- broken variants, each caught by the check that the real process passes ----------------------------


def _churn_one_coin(process: Churn, n: int, periods: int, seed: int) -> np.ndarray:
    """Broken churn: every user redraws on the same coin (user 0's) each period."""
    users = np.arange(n, dtype=np.int64)
    out = period_values(process, n, 1, seed).repeat(periods, axis=1)
    cell = np.uint64(process.coin_cell)
    bounds = process.boundaries(0, periods)
    for t in range(1, periods):
        coin = (RandomSource(seed).for_request(STREAM, t, users[:1]).bits(0) >> np.uint64(1))[0] < cell
        fresh = np.searchsorted(bounds, RandomSource(seed).for_request(STREAM, t, users).bits(1) >> np.uint64(1), side="right")
        out[:, t] = fresh if coin else out[:, t - 1]
    return out


def _drift_fresh_u(process: Drift, n: int, periods: int, seed: int) -> np.ndarray:
    """Broken drift: a new uniform each period (right marginals, no coupling)."""
    users = np.arange(n, dtype=np.int64)
    cols = [np.searchsorted(process.boundaries(t, periods), RandomSource(seed).for_request(STREAM, t, users).bits(0) >> np.uint64(1), side="right") for t in range(periods)]
    return np.stack(cols, axis=1)


def _drift_off_by_one(process: Drift, n: int, periods: int, seed: int) -> np.ndarray:
    """Broken drift: interpolates with s = t/T (never reaches the target)."""
    return Drift(process.p, process.target).values(np.arange(n, dtype=np.int64), periods + 1, seed)[:, :periods]


def _static_redrawn(process: ValueProcess, n: int, periods: int, seed: int) -> np.ndarray:
    """Broken static: each period's value drawn afresh from p."""
    users = np.arange(n, dtype=np.int64)
    bounds = process.boundaries(0, periods)
    return np.stack([np.searchsorted(bounds, RandomSource(seed).for_request(STREAM, t, users).bits(0) >> np.uint64(1), side="right") for t in range(periods)], axis=1)


def test_the_checks_catch_the_broken_variants() -> None:
    churn, drift, static = PROCESSES["churn"], PROCESSES["drift"], PROCESSES["static"]
    assert isinstance(churn, Churn) and isinstance(drift, Drift)
    expected = change_probabilities(churn, T)
    # one coin for all: each period's change fraction is 0 or 1 − Σp², never 0.2·(1 − Σp²)
    assert not _change_rates_fit(_churn_one_coin(churn, N, T, SEED), expected)
    # a fresh u per period: its marginals are right, but users change far more often, out of order
    fresh = _drift_fresh_u(drift, N, T, SEED)
    assert _marginals_fit(fresh, period_marginals(drift, T))
    assert not _change_rates_fit(fresh, change_probabilities(drift, T)) and not _comonotone(fresh)
    measured = (fresh[:, 1:] != fresh[:, :-1]).mean()
    assert measured > 2 * change_probabilities(drift, T).max()
    # s = t/T: the last period's law is off by (p − target)/T
    assert not _marginals_fit(_drift_off_by_one(drift, N, T, SEED), period_marginals(drift, T))
    # static redrawn every period: its marginals are right, but it changes
    redrawn = _static_redrawn(static, N, T, SEED)
    assert _marginals_fit(redrawn, period_marginals(static, T))
    assert not _change_rates_fit(redrawn, change_probabilities(static, T))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: value_process("static", [1.0]), "k = 2..32768"),
        (lambda: value_process("static", [0.5, 0.6]), "summing to 1"),
        (lambda: value_process("static", [1.5, -0.5]), "numbers ≥ 0"),
        (lambda: value_process("static", [[0.5, 0.5]]), "one-dimensional"),  # type: ignore[list-item]
        (lambda: value_process("churn", P, rate=1.5), "rate must be a number in [0, 1]"),
        (lambda: value_process("churn", P, rate=float("nan")), "rate must be a number in [0, 1]"),
        (lambda: value_process("churn", P, rate=True), "rate must be a number in [0, 1]"),
        (lambda: value_process("drift", P, target=[0.5, 0.5]), "target must have k = 4 entries"),
        (lambda: value_process("drift", P), "target must have k = 4 entries"),
        (lambda: value_process("wobble", P), "value process must be one of ['churn', 'drift', 'static']"),
        (lambda: value_process("static", P, rate=0.1), "takes no parameters"),
        (lambda: period_values(PROCESSES["static"], 10, 0, 1), "periods must be an integer in [1"),
        (lambda: period_values(PROCESSES["static"], 0, 3, 1), "n (users) must be an integer"),
        (lambda: period_values(PROCESSES["static"], 10, 3, 1, users=[10]), "users must be ids in [0, 10)"),
    ],
)
def test_bad_declarations_are_refused_in_one_line(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ParameterError) as info:
        make()
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_written_file_has_one_declared_column_per_period(tmp_path: Path) -> None:
    values = period_values(PROCESSES["churn"], 50, 4, SEED)
    data, schema = write_periods_csv(tmp_path, values, k=4)
    assert data.read_text().splitlines()[0] == "v0,v1,v2,v3"
    declared = json.loads(schema.read_text())
    assert declared == {"format": 1, "fields": [{"name": f"v{t}", "low": 0, "high": 3} for t in range(4)]}
    loaded = load_data(data, schema)
    assert loaded.size == 50 and [f.name for f in loaded.schema.fields] == ["v0", "v1", "v2", "v3"]
    with pytest.raises(ParameterError, match="categories 0..2"):
        write_periods_csv(tmp_path, values, k=3) if values.max() == 3 else write_periods_csv(tmp_path, values + 3, k=3)
    with pytest.raises(ParameterError, match="shape"):
        write_periods_csv(tmp_path, values[:, 0], k=4)


def test_the_documented_example_runs() -> None:
    """docs/longitudinal.md, "Values that change: a declared process": its code block, as printed."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "longitudinal.md").read_text(encoding="utf-8")
    section = page.split("## Values that change: a declared process", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    scope: dict[str, object] = {}
    exec(block.group(1), scope)  # noqa: S102 - the page's own example
    assert np.asarray(scope["values"]).shape == (3000, 12)
    assert np.allclose(np.asarray(scope["changes"]), 0.122, atol=1e-12)
