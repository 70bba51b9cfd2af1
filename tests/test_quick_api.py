"""The short API (issue 25): ``ldp.frequencies``, ``ldp.mean``, ``ldp.heavy_hitters``.

- Coverage: over 200 seeded repetitions the true frequency lies inside the reported 95 % interval
  at a rate consistent with 95 %; broken variants (intervals from a wrong variance) are caught.
- Same result both ways: in process and over loopback gRPC (``processes=2``), bit for bit.
- Columns: numpy, pyarrow (pandas when installed), strings, declared categories; bad columns are
  one-line ``ParameterError``s.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ldp
from ldp.core.column import GRID, frequency_column, mean_column
from ldp.core.errors import ParameterError
from ldp.core.schema import Field
from ldp.experiment.estimate import Estimates, choose_frequency_oracle

REPS = 200
LOW, HIGH = 181, 199  # acceptance band for the number of covering intervals out of REPS


def _binomial_tail(n: int, p: float, low: int, high: int) -> float:
    """Pr[X < low or X > high] for X ~ Binomial(n, p), exactly."""
    return sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1) if k < low or k > high)


def test_the_band_has_a_small_false_alarm_rate() -> None:
    # X = how many of 200 independent 95 % intervals cover: X ~ Bin(200, 0.95) when the intervals
    # are right. Rejecting outside [181, 199] is a false alarm with probability 0.27 %.
    assert _binomial_tail(REPS, 0.95, LOW, HIGH) < 0.003


def _covered(sd_of: Callable[[Estimates, int], float], users: int = 5000, k: int = 4, epsilon: float = 1.0) -> int:
    """How many of REPS seeded runs cover the true frequency of category r mod k with
    estimate ± 1.96·sd_of(result, j) (one category per run: the runs are independent)."""
    rng = np.random.default_rng(25)
    p = np.arange(k, 0, -1) / (k * (k + 1) / 2)
    hits = 0
    for r in range(REPS):
        column = rng.choice(k, size=users, p=p)
        result = ldp.frequencies(column, epsilon, seed=r, categories=list(range(k)))
        j = r % k
        truth = float(np.mean(column == j))
        hits += abs(result.estimates[j] - truth) <= 1.959963984540054 * sd_of(result, j)
    return hits


def test_coverage_is_95_percent() -> None:
    assert LOW <= _covered(lambda r, j: r.sd[j]) <= HIGH


def test_coverage_with_olh_and_many_categories() -> None:
    assert LOW <= _covered(lambda r, j: r.sd[j], users=4000, k=40, epsilon=2.0) <= HIGH


def test_a_wrong_variance_is_caught() -> None:
    # the variance of a non-private estimate, f(1 − f)/n: it forgets the randomizer's noise
    assert _covered(lambda r, j: math.sqrt(max(r.estimates[j] * (1 - r.estimates[j]), 1e-12) / r.users)) < LOW
    # four times the right variance: intervals twice too wide cover every time
    assert _covered(lambda r, j: 2 * r.sd[j]) > HIGH


def test_same_result_in_process_and_over_grpc() -> None:
    colours = np.random.default_rng(1).choice(["red", "green", "blue"], size=3000)
    here = ldp.frequencies(colours, 1.0, seed=7)
    there = ldp.frequencies(colours, 1.0, seed=7, processes=2)
    assert here.estimates == there.estimates and here.labels == there.labels == ("blue", "green", "red")
    assert there.transcript["rounds"][0]["requests"][0]["answered"] == 3000
    ages = np.random.default_rng(2).integers(0, 100, size=2000)
    assert ldp.mean(ages, 1.0, bounds=(0, 100), seed=3).estimates == ldp.mean(ages, 1.0, bounds=(0, 100), seed=3, processes=2).estimates


def test_seed_none_draws_a_fresh_key() -> None:
    """Two runs with fresh keys give different estimates. With 2 categories and 1,000 users the
    two runs' counts were equal about 2 % of the time (the estimates depend on the counts only):
    32 categories of 8,000 users make all 32 counts agree with probability far below 10^-30."""
    x = np.arange(8000) % 32
    assert ldp.frequencies(x, seed=None).estimates != ldp.frequencies(x, seed=None).estimates
    assert ldp.frequencies(x, seed=4).estimates == ldp.frequencies(x, seed=4).estimates


def test_result_fields_and_table() -> None:
    result = ldp.frequencies(np.array(["a", "b", "a", "c"] * 2500), 1.0, seed=0, truth=True)
    assert result.oracle == "grr" and result.kind == "kary_rr" and result.epsilon == 1.0 and result.users == 10_000
    assert result.truth == (0.5, 0.25, 0.25)
    assert all(lo < e < hi for e, lo, hi in zip(result.estimates, result.low, result.high))
    assert "95 % interval" in str(result) and len(result.rows()) == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.epsilon = 2.0  # type: ignore[misc]  # frozen


def test_estimator_choice_post_processes_the_same_reports() -> None:
    # the default reads the MI estimate, bit for bit; any other name is a function of it (same seed, same reports)
    from ldp.core.frequency_oracles import project_simplex

    x = np.repeat(np.arange(4), [400, 300, 200, 100])
    kw: dict[str, Any] = dict(oracle="grr", seed=3, categories=list(range(12)))  # 8 empty categories: MI goes negative
    mi = ldp.frequencies(x, 1.0, **kw)
    assert mi.estimator == "mi" and "estimator" not in mi.as_dict() and min(mi.estimates) < 0
    assert ldp.frequencies(x, 1.0, estimator="mi", **kw) == mi
    sub = ldp.frequencies(x, 1.0, estimator="norm_sub", **kw)
    assert np.array_equal(np.asarray(sub.estimates), project_simplex(np.asarray(mi.estimates)))
    assert sub.sd == mi.sd and sub.as_dict()["estimator"] == "norm_sub" and "grr, norm_sub" in str(sub)
    for name in ("ibu", "mle", "norm_mul", "norm_cut", "norm_hyb"):
        est = np.asarray(ldp.frequencies(x, 1.0, estimator=name, **kw).estimates)
        assert est.min() >= 0 and abs(est.sum() - 1) < 1e-9, name


def test_auto_picks_the_smallest_exact_variance() -> None:
    # Wang et al. 2017 §5: GRR wins when k − 2 < 3e^ε; a large k goes to a hashing/subset oracle
    assert choose_frequency_oracle(Field("v", 1, 0, 3), 1.0) == "kary_rr"
    assert choose_frequency_oracle(Field("v", 1, 0, 999), 1.0) in ("olh", "hadamard_response")


def test_mean_on_floats_and_clip() -> None:
    x = np.random.default_rng(5).normal(50.0, 10.0, size=20_000)
    r = ldp.mean(np.clip(x, 0, 100), 2.0, bounds=(0.0, 100.0), seed=1, truth=True)
    assert r.low[0] < r.truth[0] < r.high[0]  # type: ignore[index]
    assert abs(r.truth[0] - np.clip(x, 0, 100).mean()) <= 100 / GRID  # type: ignore[index]  # the grid's rounding
    with pytest.raises(ParameterError, match=r"not within the bounds .* first at row"):
        ldp.mean(x, bounds=(40, 60))
    assert ldp.mean(x, bounds=(40, 60), out_of_range="clip", seed=0).users == 20_000


def test_heavy_hitters() -> None:
    words = np.array(["the"] * 500 + ["a"] * 300 + [f"w{i}" for i in range(200)])
    top = ldp.heavy_hitters(words, 2.0, k=2, seed=0)
    assert top.labels == ("the", "a") and top.estimates[0] > top.estimates[1]


def test_column_kinds() -> None:
    pa = pytest.importorskip("pyarrow")
    values = ["x", "y", "y", "z"] * 300
    want = ldp.frequencies(np.array(values), seed=2).estimates
    assert ldp.frequencies(pa.array(values), seed=2).estimates == want
    assert ldp.frequencies(pa.chunked_array([values[:600], values[600:]]), seed=2).estimates == want
    with pytest.raises(ParameterError, match=r"1 missing value\(s\), the first at row 3"):
        ldp.frequencies(pa.array(["x", "y", None, "x"]))
    data = frequency_column(np.array([3, 5, 9, 3]))  # the data file rule: min..max by the gcd step
    assert data.labels == (3, 5, 7, 9) and not data.declared
    assert frequency_column(np.array(["b", "a"]), categories=["b", "a", "c"]).labels == ("b", "a", "c")
    assert mean_column(np.array([1, 2]), (0, 10)).kind == "values"


def test_pandas_series() -> None:
    pd = pytest.importorskip("pandas")
    s = pd.Series(["x", "y", "y", "z"] * 300, name="letter")
    r = ldp.frequencies(s, seed=2)
    assert r.column == "letter" and r.estimates == ldp.frequencies(np.array(s.tolist()), seed=2).estimates
    with pytest.raises(ParameterError, match="missing"):
        ldp.frequencies(pd.Series(["x", None, "y"]))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ldp.frequencies(np.array([1.5, 2.5])), "floats: frequencies need categories"),
        (lambda: ldp.frequencies(np.array([0.0, math.nan])), "1 missing or non-finite value"),
        (lambda: ldp.frequencies(np.array(["a", "b"]), categories=["a"]), "at least two distinct"),
        (lambda: ldp.frequencies(np.array(["a", "q"]), categories=["a", "b"]), "1 value\\(s\\) of the column are not one of the 2 declared categories, the first at row 2"),
        (lambda: ldp.frequencies(np.array([0, 70000])), "beyond int16"),
        (lambda: ldp.frequencies(np.array([0, 1]), oracle="rappor"), "oracle must be 'auto' or one of grr, oue"),
        (lambda: ldp.frequencies(np.array([0, 1]), epsilon=0), "epsilon must be a finite number > 0"),
        (lambda: ldp.frequencies(np.array([0, 1]), processes=0), "processes must be"),
        (lambda: ldp.frequencies(np.zeros((2, 2), dtype=int)), "one-dimensional"),
        (lambda: ldp.frequencies(np.array([], dtype=int)), "empty"),
        (lambda: ldp.mean(np.array([1, 2]), bounds=(5, 1)), "lo < hi"),
        (lambda: ldp.mean(np.array(["a"]), bounds=(0, 1)), "needs numbers"),
        (lambda: ldp.mean(np.array([1]), bounds=(0, 2), out_of_range="wrap"), "out_of_range must be"),
        (lambda: ldp.heavy_hitters(np.array([0, 1]), k=0), "k must be an integer ≥ 1"),
        (lambda: ldp.frequencies(np.array([0, 1]), estimator="em"), "estimator must be one of mi, ibu, mle, base_pos, norm, norm_mul, norm_cut, norm_sub, base_cut, norm_hyb, got 'em'"),
    ],
)
def test_bad_input_is_one_line(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ParameterError, match=message) as info:
        call()
    assert "\n" not in str(info.value)
