"""``ldp.heavy_hitters(..., method="pem" | "treehist", bits=B)``: the prefix protocols through the short API.

- Planted values (PEM's four of tests/learners/test_heavy_hitters.py, 15/12/10/8 % of a 20-bit
  domain, the rest uniform) are found by both methods at n = 10^5, ε = 4, each user charged once.
- TreeHist returns nothing else, and the check catches a threshold off by a factor 10 either
  way (too high: planted values missed; too low: noise returned) and records written least
  significant bit first (the planted values come back bit-reversed).
- In process and over gRPC (2 client processes) the results are bit-identical.
- Bad input (no bits, a value that does not fit, a float column, ...) is one line.

Error rates (TreeHist at these sizes: OLH at ε = 4 over the n/20 = 5,000 users of a level,
sd ≈ √(4e^4/(e^4 − 1)^2/5000) ≈ 0.004 for a value nobody holds; z = Φ⁻¹(1 − 0.05/M),
M = 2 + 19·32·2 = 1218, so z ≈ 3.94 and τ ≈ 0.016):

- a miss needs a planted value (f ≥ 0.08, sd ≤ 0.006) to fall below τ at one of 20 levels:
  ≤ 4·20·Φ(−10) ≈ 10^-21;
- a value returned beside the planted ones needs one of the ≤ 64 last-level candidates that
  nobody holds (the uniform rest: ≈ 0.55·n/2^20 ≈ 0.05 users per value) to reach τ: ≤ 64·Φ(−z)
  = 64·0.05/1218 ≈ 2.6·10^-3 (normal approximation).

So ``test_treehist_finds_exactly_the_planted_values`` fails wrongly with probability < 3·10^-3
for a random seed (a fixed seed here: it passes or fails the same every run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ldp
import ldp.learners.treehist as th
from ldp.core.errors import ParameterError
from ldp.experiment.estimate import bit_column
from tests.learners.test_heavy_hitters import PLANTED

BITS = 20
N = 100_000
EPS = 4.0


def planted_values(n: int, bits: int, planted: dict[int, float], seed: int) -> np.ndarray:
    """n integers of ``bits`` bits: each planted value in its share of the rows, the rest uniform; shuffled."""
    rng = np.random.default_rng(seed)
    counts = [int(round(f * n)) for f in planted.values()]
    values = np.concatenate([np.repeat(np.array(list(planted), dtype=np.int64), counts), rng.integers(0, 2**bits, n - sum(counts))])
    rng.shuffle(values)
    return values


@pytest.fixture(scope="module")
def values() -> np.ndarray:
    return planted_values(N, BITS, PLANTED, seed=11)


def _within(result: ldp.Estimates, sds: float = 5.0) -> bool:
    """Every estimate within ``sds`` of its exact sd of the true frequency (truth=True)."""
    assert result.truth is not None
    return all(abs(e - t) <= sds * max(s, 1e-12) for e, t, s in zip(result.estimates, result.truth, result.sd))


def test_treehist_finds_exactly_the_planted_values(values: np.ndarray) -> None:
    result = ldp.heavy_hitters(values, EPS, method="treehist", bits=BITS, seed=3, truth=True)
    assert set(result.labels) == set(PLANTED), result.learner
    assert list(result.estimates) == sorted(result.estimates, reverse=True)  # largest first
    assert _within(result)
    assert result.method == "treehist" and result.oracle == "olh" and result.task == "heavy-hitters"
    assert result.users == N  # every user answered once, at one level
    learner = result.learner
    assert learner is not None and learner["rounds"] == BITS
    assert learner["z"] == pytest.approx(th.union_bound_z(0.05, BITS, 32, 1))  # β = 0.05, beam 32, one bit per level
    assert all(0 < lv["threshold"] < min(PLANTED.values()) / 2 for lv in learner["levels"])  # τ = z·sd_t, well below the planted
    assert result.as_dict()["method"] == "treehist" and "treehist" in str(result)


def test_pem_finds_the_planted_values_on_the_same_data(values: np.ndarray) -> None:
    result = ldp.heavy_hitters(values, EPS, k=4, method="pem", bits=BITS, seed=3, truth=True)
    assert set(result.labels) == set(PLANTED) and result.method == "pem" and result.users == N
    assert _within(result)


def test_the_check_catches_a_threshold_off_by_a_factor(values: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    z = th.union_bound_z
    # too high (τ·10 ≈ 0.16): the planted values are pruned, recall drops
    monkeypatch.setattr(th, "union_bound_z", lambda *a: 10 * z(*a))
    high = ldp.heavy_hitters(values, EPS, method="treehist", bits=BITS, seed=3)
    assert set(high.labels) != set(PLANTED)
    # too low (τ/10 ≈ 0.0016, 0.4 sd): prefixes nobody holds pass, and the run returns noise
    monkeypatch.setattr(th, "union_bound_z", lambda *a: z(*a) / 10)
    low = ldp.heavy_hitters(values, EPS, method="treehist", bits=BITS, seed=3)
    assert set(low.labels) != set(PLANTED) and len(low.labels) == 10


def test_the_check_catches_records_in_the_wrong_bit_order(values: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    """A data path that writes bit 0 as the least significant: the tree then reads the values
    reversed, and the planted set is not what comes back."""
    import ldp.experiment.estimate as est

    def reversed_bits(column: Any, bits: int | None, method: str = "treehist") -> est.BitColumn:
        right = bit_column(column, bits, method)
        return est.BitColumn(right.name, right.bits, right.values, right.records(0, right.size)[:, ::-1].copy())

    monkeypatch.setattr(est, "bit_column", reversed_bits)
    wrong = ldp.heavy_hitters(values, EPS, method="treehist", bits=BITS, seed=3)
    assert len(wrong.labels) == len(PLANTED) and set(wrong.labels) != set(PLANTED)


@pytest.mark.parametrize("method", ["treehist", "pem"])
def test_grpc_is_bit_identical_to_in_process(method: str) -> None:
    planted = {0b1010_1100_0011: 0.25, 0b0101_0000_1111: 0.2}
    values = planted_values(20_000, 12, planted, seed=2)
    here = ldp.heavy_hitters(values, EPS, k=2, method=method, bits=12, seed=5)
    there = ldp.heavy_hitters(values, EPS, k=2, method=method, bits=12, seed=5, processes=2)
    assert (here.labels, here.estimates, here.sd, here.users) == (there.labels, there.estimates, there.sd, there.users)
    assert here.learner == there.learner  # every level: candidates, users, thresholds
    assert set(here.labels) == set(planted)


def test_bits_records_are_most_significant_bit_first() -> None:
    data = bit_column(np.array([0b101, 0b011, 0]), 3)
    assert data.records(0, 3).tolist() == [[1, 0, 1], [0, 1, 1], [0, 0, 0]]
    assert data.schema.fields[0].length == 3 and data.name == "value"


def test_nothing_frequent_returns_nothing() -> None:
    values = np.random.default_rng(0).integers(0, 2**16, size=20_000)
    result = ldp.heavy_hitters(values, 1.0, method="treehist", bits=16, seed=1)
    assert result.labels == () and result.estimates == () and result.learner is not None and result.learner["rounds"] < 16
    assert result.users < 20_000  # the later levels' users were never asked


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ldp.heavy_hitters(np.array([0, 1]), method="treehist"), r"method 'treehist' needs bits=B, the declared bit width of the values \(1..62"),
        (lambda: ldp.heavy_hitters(np.array([0, 1]), method="pem"), "method 'pem' needs bits=B"),
        (lambda: ldp.heavy_hitters(np.array([0, 1]), method="treehist", bits=0), r"bits \(method 'treehist'\) must be an integer in \[1, 62\], got 0"),
        (lambda: ldp.heavy_hitters(np.array([0, 1]), method="treehist", bits=63), r"must be an integer in \[1, 62\], got 63"),
        (lambda: ldp.heavy_hitters(np.array([0, 1]), method="treehist", bits=8.0), r"must be an integer in \[1, 62\], got 8.0"),  # type: ignore[arg-type]
        (lambda: ldp.heavy_hitters(np.array([3, 256, 7, 300]), method="treehist", bits=8), r"2 value\(s\) do not fit in bits=8 \(integers 0..255\), the first 256 at row 2"),
        (lambda: ldp.heavy_hitters(np.array([3, -1]), method="pem", bits=8), r"1 value\(s\) do not fit in bits=8 \(integers 0..255\), the first -1 at row 2"),
        (lambda: ldp.heavy_hitters(np.array([0.5, 1.0]), method="treehist", bits=8), "reads integers 0..2\\^8 − 1, got a column of float64 values"),
        (lambda: ldp.heavy_hitters(np.array(["a", "b"]), method="treehist", bits=8), "reads integers"),
        (lambda: ldp.heavy_hitters(np.array([0, 1]), method="sketch"), "method must be one of oracle, pem, treehist, treehist-1round, got 'sketch'"),
        (lambda: ldp.heavy_hitters(np.array([0, 1]), bits=8), "bits=8 is for method 'pem' or 'treehist'"),
        (lambda: ldp.heavy_hitters(np.array([0, 1]), method="treehist", bits=8, categories=[0, 1]), "not categories="),
        (lambda: ldp.heavy_hitters(np.array([0, 1]), method="treehist", bits=8, oracle="ss"), "takes oracle 'auto', 'grr', 'olh', 'hr', 'oue' or 'sue', got 'ss'"),
        (lambda: ldp.heavy_hitters(np.array([0, 1]), method="treehist", bits=8, oracle="rappor"), "takes oracle 'auto', 'grr', 'olh', 'hr', 'oue' or 'sue', got 'rappor'"),
        (lambda: ldp.heavy_hitters(np.array([0, 1]), k=8, method="pem", bits=3), r"method 'pem' needs k ≤ 2\^\(bits − 1\) = 4, got k=8 with bits=3"),
        (lambda: ldp.heavy_hitters(np.array([0, 1]), method="treehist", bits=8, epsilon=-1), "epsilon must be"),
    ],
)
def test_bad_input_is_one_line(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(ParameterError, match=message) as info:
        call()
    assert "\n" not in str(info.value)

