"""Mean estimation (Duchi et al. = ``pm_rr``, Piecewise, Hybrid): exact privacy of what the
samplers emit, unbiasedness and variance, the users' side, and gRPC = in process.

- The exact audit (``verify_exact``: realized integer masses, a rigorous e^ε, the sampler fed its
  own cell boundaries) passes from ε = 2^-10 to 1024, and catches broken variants: cells computed
  from the float ideal (rounded down: A/B > e^ε), a sampler whose window is off by one cell from its
  table, a Hybrid whose Duchi part runs at the wrong ε (wrong p), a declared log_prob that is the
  ideal instead of the realized one. These checks are deterministic (no false alarm).
- The statistical tests are seeded; each |z| > 5 check has a false-alarm rate ≈ 5.7·10^-7 under the
  normal approximation (n = 2·10^5 bounded reports), below 2·10^-5 for the whole file. Each is
  shown to fail on a broken variant written here (a forgotten factor 2 in the estimator: biased;
  a variance formula missing the t² term).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldp.core.audit import verify_exact
from ldp.core.errors import ParameterError
from ldp.core.mean_estimation import (
    HybridRandomizer,
    PiecewiseRandomizer,
    duchi_variance,
    from_unit_interval,
    hybrid_variance,
    piecewise_cells,
    piecewise_variance,
    unit_interval_query,
)
from ldp.core.plus_minus import PlusMinusRandomizedResponse
from ldp.core.randomizer_base import TWO64
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec, randomizer_kinds
from ldp.core.rng import RandomSource
from ldp.core.schema import Field, Schema

pytestmark = pytest.mark.timeout(60)

KINDS = {"piecewise": PiecewiseRandomizer, "hybrid": HybridRandomizer}
Z_LIMIT = 5.0  # two-sided normal tail 5.7e-7 per check


# --- exact privacy ---


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("epsilon", [2.0**-10, 0.25, 1.0, 4.0, 16.0, 45.0, 1024.0])
def test_the_exact_audit_passes_and_is_tight(kind: str, epsilon: float) -> None:
    R = KINDS[kind](epsilon, 1.0)
    audit = verify_exact(R)
    assert audit.passed, audit
    assert audit.sampler_consistent is True and audit.normalization_error == 0.0
    # Tight below the 64-bit cap: the realized loss is ε up to a part in 10^12; above it
    # (ε ≳ 44) the cells bottom out at B = 1 and the mechanism is more private than declared.
    if epsilon <= 16:
        assert audit.max_log_ratio / epsilon > 1 - 1e-9
    else:
        assert audit.max_log_ratio < epsilon


@pytest.mark.parametrize("steps", [2, 16, 256])
def test_the_audit_passes_at_other_grid_sizes_and_bounds(steps: int) -> None:
    for R in (PiecewiseRandomizer(0.7, 3.5, steps), HybridRandomizer(2.5, 0.25, steps)):
        assert verify_exact(R).passed


def test_the_cells_obey_their_identity_and_ratio() -> None:
    for eps in (2.0**-20, 0.5, 3.0, 30.0):
        R = PiecewiseRandomizer(eps, 1.0)
        a, b, leftover = R.masses
        assert R.window * a + R.k * b + leftover == TWO64 and 0 <= leftover < R.window
        assert a > b and a <= math.exp(eps) * b * (1 + 1e-15)


class FloatCells(PiecewiseRandomizer):
    """Broken: B = ⌊2^64/(W·e^ε + K)⌋ from the float ideal (rounded down, not rigorously up)."""

    @property
    def masses(self) -> tuple[int, int, int]:
        k, w = self.k, self.window
        b = int(TWO64 / (w * math.exp(self.epsilon) + k))
        a = (TWO64 - k * b) // w
        return a, b, TWO64 - w * a - k * b


class OffByOneWindow(PiecewiseRandomizer):
    """Broken: the sampler's window starts one cell later than its table's."""

    def sample(self, inputs, randomness):  # type: ignore[no-untyped-def]
        shifted = np.clip(np.asarray(inputs, dtype=np.float64) + 2.0 * self.bound / self.k, -self.bound, self.bound)
        return super().sample(shifted, randomness)


class WrongDuchi(HybridRandomizer):
    """Broken: the Duchi part runs at 2ε (a wrong p) inside a mechanism that declares ε."""

    @property
    def duchi(self) -> PlusMinusRandomizedResponse:
        return PlusMinusRandomizedResponse(2 * self.epsilon, self.bound)


class IdealLogProb(PiecewiseRandomizer):
    """Broken: declares the ideal probabilities e^ε/(W e^ε + K), 1/(W e^ε + K), not the realized."""

    def log_prob(self, u, w):  # type: ignore[no-untyped-def]
        k0, _ = self._rounding(u)
        j = self._cell_of(w)
        inside = (j >= k0) & (j < k0 + self.window)
        z = self.window * math.exp(self.epsilon) + self.k
        return np.where(inside, self.epsilon - math.log(z), -math.log(z))


def test_the_audit_catches_the_broken_variants() -> None:
    floor = verify_exact(FloatCells(0.5, 1.0), check_sampler=False)
    assert not floor.passed and not floor.within_epsilon and floor.max_log_ratio > 0.5
    shifted = verify_exact(OffByOneWindow(1.0, 1.0))
    assert not shifted.passed and shifted.sampler_consistent is False, shifted
    wrong = verify_exact(WrongDuchi(1.0, 1.0))
    assert not wrong.passed and wrong.max_log_ratio > 1.9, wrong
    ideal = verify_exact(IdealLogProb(1.0, 1.0), check_sampler=False)
    assert not ideal.passed and ideal.log_prob_error > 1e-12
    # and the correct ones pass on the same settings
    assert verify_exact(PiecewiseRandomizer(0.5, 1.0)).passed and verify_exact(HybridRandomizer(1.0, 1.0)).passed


def test_an_epsilon_beyond_the_grid_is_refused() -> None:
    """A − B ≈ ε·2^64/N must be ≥ 1: never a problem for a requestable ε (≥ 2^-30), but the cell
    function itself refuses an ε its grid cannot express rather than return A = B."""
    assert piecewise_cells(2.0**-30, 1 << 16, 1 << 16)[0] > piecewise_cells(2.0**-30, 1 << 16, 1 << 16)[1]
    with pytest.raises(ParameterError, match="below the 2\\^-64 resolution"):
        piecewise_cells(1e-18, 1 << 16, 1 << 16)


# --- unbiasedness and variance (seeded) ---


def _moments(R, u: float) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """Exact (mean, variance, 4th central moment) of R's report on u, from its realized table."""
    outputs, masses, denominator = R.realized(np.array([u]))
    p = np.array([float(m) for m in np.asarray(masses[0]).ravel()]) / float(denominator)
    mean = float(np.sum(p * outputs))
    var = float(np.sum(p * (outputs - mean) ** 2))
    return mean, var, float(np.sum(p * (outputs - mean) ** 4))


def _z_scores(R, u: float, n: int, seed: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(z of the mean of the per-report estimates against u, z of their sample variance against
    R.variance(u)), with the exact fourth moment for the latter."""
    reports = R.sample(np.full(n, u), RandomSource(seed).for_request("mean", 0, np.arange(n)))
    est = R.estimate(reports)
    var = float(R.variance(np.array([u]))[0])
    _, _, mu4 = _moments(R, u)
    z_mean = (est.mean() - u) / math.sqrt(var / n)
    z_var = (est.var() - var) / math.sqrt(max(mu4 - var**2, 1e-300) / n)
    return float(z_mean), float(z_var)


class HalfScale(PiecewiseRandomizer):
    """Broken: a forgotten factor 2 in the estimator (α = b·2^64/((A − B)WK)): biased towards 0."""

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        return super().estimate(reports) / 2.0


class NoTSquared(PiecewiseRandomizer):
    """Broken: a variance formula without its t² term (Wang et al.'s worst case drops it at t = 0)."""

    def variance(self, u):  # type: ignore[no-untyped-def]
        return super().variance(u) - np.asarray(u, dtype=np.float64) ** 2 / math.expm1(self.epsilon / 2)


@pytest.mark.parametrize("kind", ["piecewise", "hybrid", "pm_rr"])
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_reports_are_unbiased_with_the_stated_variance(kind: str, epsilon: float) -> None:
    R = KINDS[kind](epsilon, 1.0) if kind in KINDS else PlusMinusRandomizedResponse(epsilon, 1.0)
    for k, u in enumerate((-1.0, -0.3, 0.7 + 1e-3)):  # the last one between two levels
        z_mean, z_var = _z_scores(R, u, 200_000, seed=10 * k + int(4 * epsilon))
        assert abs(z_mean) < Z_LIMIT and abs(z_var) < Z_LIMIT, (kind, epsilon, u, z_mean, z_var)


def test_the_statistical_checks_catch_the_broken_variants() -> None:
    z_mean, _ = _z_scores(HalfScale(2.0, 1.0), 0.7, 200_000, seed=3)
    assert abs(z_mean) > Z_LIMIT
    _, z_var = _z_scores(NoTSquared(2.0, 1.0), -1.0, 200_000, seed=3)
    assert abs(z_var) > Z_LIMIT


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_variance_formula_is_the_realized_tables(kind: str) -> None:
    for epsilon in (0.3, 1.0, 6.0):
        R = KINDS[kind](epsilon, 2.0)
        for u in (-2.0, -0.77, 0.0, 0.123, 2.0):
            mean, var, _ = _moments(R, u)
            assert mean == pytest.approx(u, abs=1e-9)
            assert float(R.variance(u)) == pytest.approx(var, rel=1e-9)


def test_realized_variances_match_wang_et_al_at_the_default_grid() -> None:
    """Within 1 % of the continuous mechanisms' (Wang et al. 2019, Lemmas 2 and 4) for ε ≤ 4 at
    K = 1024; the Duchi part is ``pm_rr`` itself (within 10^-9 of Duchi et al.'s variance)."""
    for epsilon in (0.25, 1.0, 2.0, 4.0):
        for t in (-1.0, 0.0, 0.5):
            pm = float(PiecewiseRandomizer(epsilon, 1.0).variance(t)) / float(piecewise_variance(t, epsilon))
            hm = float(HybridRandomizer(epsilon, 1.0).variance(t)) / float(hybrid_variance(t, epsilon))
            du = float(PlusMinusRandomizedResponse(epsilon, 1.0).variance(np.array([t]))[0]) / float(duchi_variance(t, epsilon))
            assert abs(pm - 1) < 0.01 and abs(hm - 1) < 0.01 and abs(du - 1) < 1e-9, (epsilon, t, pm, hm, du)
    # Hybrid's worst case is below both parts' worst cases at ε = 2 (its point, Wang et al. §III-C).
    worst = {name: max(float(f(t, 2.0)) for t in np.linspace(-1, 1, 41)) for name, f in
             (("pm", piecewise_variance), ("duchi", duchi_variance), ("hybrid", hybrid_variance))}  # fmt: skip
    assert worst["hybrid"] < min(worst["pm"], worst["duchi"])


# --- the users' side: specs, queries, inputs ---

SCHEMA = Schema((Field("age", 1, 18, 90), Field("y", 1, -1, 1, 2)))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_spec_builds_on_a_bounded_field(kind: str) -> None:
    assert kind in randomizer_kinds()
    local = LocalRandomizer.build(RandomizerSpec(kind, unit_interval_query("age", 18, 90), 1.0, {"steps": 64}), SCHEMA)
    assert isinstance(local.randomizer, KINDS[kind]) and local.randomizer.bound == 1.0 and local.randomizer.steps == 64
    records = np.array([[18, 1], [54, -1], [90, 1]], dtype=np.int16)
    np.testing.assert_allclose(local.inputs(records), [-1.0, 0.0, 1.0])
    assert float(from_unit_interval(0.0, 18, 90)) == 54.0
    with pytest.raises(ParameterError, match=f"{kind}: steps must be a power of two"):
        LocalRandomizer.build(RandomizerSpec(kind, unit_interval_query("age", 18, 90), 1.0, {"steps": 48}), SCHEMA)
    with pytest.raises(ParameterError, match="not a finite number"):
        local.randomizer.check_inputs(np.array([0.1, np.nan]))
    np.testing.assert_array_equal(local.randomizer.check_inputs(np.array([-3.0, 0.5, 7.0])), [-1.0, 0.5, 1.0])


def test_unit_interval_query_refuses_an_empty_range() -> None:
    with pytest.raises(ParameterError, match="low < high"):
        unit_interval_query("age", 5, 5)


# --- over gRPC: bit-identical to in process ---


async def test_grpc_reports_are_bit_identical_to_in_process() -> None:
    import ldp
    from ldp.wire.launcher import launch_local
    from tests.wire.wire_helpers import Outcome, assert_identical, ledger_of

    d = 8
    cc = ldp.concept_class("masked_parity", d)
    spec = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "target")), size=4000, budget=3.0, seed=5)

    async def script(oracle: ldp.LROracle) -> Outcome:
        query = unit_interval_query("i", 0, d - 1)  # i is uniform on 0..7: mean 0 on [−1, 1]
        session = ldp.Session(oracle, ldp.SessionKind.INTERACTIVE)
        reports = await session.round([ldp.Request.of(range(0, 4000), ldp.RandomizerSpec(kind, query, 1.0)) for kind in ("pm_rr", "piecewise", "hybrid")])
        reports += await session.round([ldp.Request.of(range(0, 4000, 3), ldp.RandomizerSpec("piecewise", query, 0.5, {"steps": 32}))])
        return Outcome(reports, await ledger_of(oracle))

    reference = await script(ldp.InProcessLROracle(spec))
    for r in reference.reports[:3]:  # every user answered; the estimate is near 0 (5 sd, false alarm 6e-7)
        assert len(r.values) == 4000 and abs(r.values.mean()) < 5 * math.sqrt(6.0 / 4000)
    async with launch_local(spec, processes=2) as oracle:
        assert_identical(reference, await script(oracle))
