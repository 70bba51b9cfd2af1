"""Every randomizer is ε-local (KLNRS Def. 4.3) as realized by its sampler; broken variants are caught.

Exact checks are deterministic (``verify_exact`` audits the integer distribution the sampler
emits; tests/core/test_realized_audit.py has the full ε matrix and the float-rounding variants).
Statistical checks are seeded; each states its false-alarm rate.
"""

import math
from dataclasses import dataclass

import numpy as np
import pytest

from ldp.core.audit import audit_epsilon, chi_square_fit, verify_declared, verify_exact
from ldp.core.errors import ParameterError
from ldp.core.laplace import DiscreteLaplaceRandomizer, LaplaceRandomizer
from ldp.core.plus_minus import PlusMinusRandomizedResponse, _pm_thresholds
from ldp.core.randomizer_base import TWO64, rr_cells, rr_draw, rr_log
from ldp.core.rng import RandomSource
from ldp.core.rr_mechanisms import BinaryRandomizedResponse, KaryRandomizedResponse, RecordRandomizedResponse

EPSILONS = [2.0**-10, 0.1, 0.5, 1.0, 2.0, 4.0, 8.0]


def all_randomizers(eps):
    return [
        BinaryRandomizedResponse(eps),
        KaryRandomizedResponse(eps, (0, 1, 2)),
        KaryRandomizedResponse(eps, tuple(range(16))),
        DiscreteLaplaceRandomizer(eps, 1.0),
        DiscreteLaplaceRandomizer(eps, 3.5),
        PlusMinusRandomizedResponse(eps, 1.0),
        PlusMinusRandomizedResponse(eps, 0.25),
        RecordRandomizedResponse(eps, (0, 0, -1), (1, 2, 1)),
        RecordRandomizedResponse(eps, (0, -1), (2, 1), (1, 2)),
    ]


@pytest.mark.parametrize("eps", EPSILONS)
def test_every_randomizer_passes_the_exact_check(eps):
    for R in all_randomizers(eps):
        audit = verify_exact(R)
        assert audit.passed, (R, audit)
        # and the declared ε is tight (no budget wasted): the loss reaches ε (discrete Laplace
        # keeps a 2^-12 relative slack to absorb its integer cells)
        assert audit.max_log_ratio >= eps * (1 - 2.0**-11), (R, audit)


def test_float_laplace_is_not_auditable():
    audit = verify_exact(LaplaceRandomizer(1.0, 1.0))
    assert not audit.passed and not audit.auditable and audit.method.startswith("not auditable: floats")
    # its *declared* density is 1-private (the claim holds; the floats it emits do not)
    assert verify_declared(LaplaceRandomizer(1.0, 1.0)).max_log_ratio == pytest.approx(1.0, rel=1e-9)


# --- deliberately broken variants: each must be caught by the exact check ---


@dataclass(frozen=True)
class UnderstatedRR(BinaryRandomizedResponse):
    """Declares ε but its cells (sampler and log_prob alike) are those of 1.1ε."""

    def _cell_epsilon(self):
        return 1.1 * self.epsilon


@dataclass(frozen=True)
class UnderstatedKary(KaryRandomizedResponse):
    """Samples honestly but declares the probabilities of 1.1ε (log_prob ≠ realized)."""

    def log_prob(self, u, w):
        e = 1.1 * self.epsilon
        norm = math.log(math.exp(e) + self.k - 1)
        return np.where(np.asarray(u) == np.asarray(w), e - norm, -norm)


@dataclass(frozen=True)
class UnderstatedPM(PlusMinusRandomizedResponse):
    """Thresholds (and magnitude) of 1.1ε under a declared ε."""

    @property
    def thresholds(self):
        return _pm_thresholds(1.1 * self.epsilon)


@dataclass(frozen=True)
class UnderstatedLaplace(LaplaceRandomizer):
    @property
    def scale(self) -> float:
        return 2.0 * self.bound / (1.1 * self.epsilon)


@dataclass(frozen=True)
class SwappedKary(KaryRandomizedResponse):
    """Declares keep and other probabilities swapped."""

    def log_prob(self, u, w):
        a, b = self.cell_sizes
        return np.where(np.asarray(u) == np.asarray(w), rr_log(b), rr_log(a))


@dataclass(frozen=True)
class HalfScaleLaplace(LaplaceRandomizer):
    """Scale b/ε instead of 2b/ε: forgets that a replaced value moves by 2b."""

    @property
    def scale(self) -> float:
        return self.bound / self.epsilon


@dataclass(frozen=True)
class HalfSensitivityDiscreteLaplace(DiscreteLaplaceRandomizer):
    """Noise table of ratio e^{−ε/c} instead of e^{−ε/(2c)}: forgets that a replaced value moves by 2b."""

    @property
    def _table(self):
        from ldp.core.laplace import _noise_table

        return _noise_table(2 * self.epsilon, self.steps, self.SLACK, self._extension() // 2)


@dataclass(frozen=True)
class ClampedWithoutTailsDiscreteLaplace(DiscreteLaplaceRandomizer):
    """Declares the interior cell at the window's ends too (forgets the clamped tail mass)."""

    def log_prob(self, u, w):
        k0, f53 = self._rounding(u)
        m = np.rint(np.asarray(w, dtype=np.float64) / self.grid).astype(np.int64)
        t = self._table
        cell = lambda k: t.cells[np.clip(m - k + t.half_width, 0, 2 * t.half_width)].astype(np.float64)  # noqa: E731
        f = f53.astype(np.float64)
        return np.log((2.0**53 - f) * cell(k0) + f * cell(np.minimum(k0 + 1, self.steps))) - 117 * math.log(2)


@pytest.mark.parametrize("eps", EPSILONS)
def test_broken_variants_are_caught_by_the_exact_check(eps):
    broken = [
        HalfSensitivityDiscreteLaplace(eps, 1.0),
        ClampedWithoutTailsDiscreteLaplace(eps, 1.0),
        UnderstatedRR(eps),
        UnderstatedKary(eps, (0, 1, 2, 3)),
        UnderstatedPM(eps, 1.0),
        SwappedKary(eps, (0, 1, 2)),
    ]
    for R in broken:
        assert not verify_exact(R).passed, R
    # the float Laplace variants are "caught" trivially (not auditable); their declarations are wrong too
    for R in (UnderstatedLaplace(eps, 1.0), HalfScaleLaplace(eps, 1.0)):
        assert not verify_exact(R).passed and not verify_declared(R).within_epsilon, R


def test_laplace_half_scale_loss_is_twice_epsilon():
    audit = verify_declared(HalfScaleLaplace(1.0, 1.0))
    assert audit.max_log_ratio == pytest.approx(2.0, rel=1e-9)


def test_understated_cells_lose_exactly_their_real_epsilon():
    audit = verify_exact(UnderstatedRR(1.0))
    assert not audit.within_epsilon and audit.max_log_ratio == pytest.approx(1.1, rel=1e-12)


# --- statistical audit: the samplers do what the probabilities say ---

N = 100_000
ALPHA = 1e-6  # false-alarm rate per audit: Pr[ε_lcb > ε | ε-private sampler] ≤ 1e-6


@pytest.mark.parametrize(
    "R,u,u2",
    [
        (BinaryRandomizedResponse(1.0), 1, 0),
        (KaryRandomizedResponse(2.0, (0, 1, 2, 3)), 0, 1),
        (PlusMinusRandomizedResponse(1.0, 1.0), 1.0, -1.0),
        (LaplaceRandomizer(2.0, 1.0), 1.0, -1.0),
        (DiscreteLaplaceRandomizer(2.0, 1.0), 1.0, -1.0),
        (DiscreteLaplaceRandomizer(2.0, 1.0, steps=1), 1.0, -1.0),
    ],
)
def test_statistical_audit_passes_honest_samplers(R, u, u2):
    audit = audit_epsilon(R, u, u2, n=N, alpha=ALPHA, seed=11)
    assert audit.passed, audit
    # and it is not vacuous: the lower bound comes reasonably close to ε
    assert audit.epsilon_lower_bound > 0.7 * R.epsilon, audit


@pytest.mark.parametrize("eps", [1.0, 2.0, 4.0])
def test_statistical_audit_catches_understated_epsilon(eps):
    """Power: ε·1.1 at N = 1e5, α = 1e-6 is detected (reference §4b measured ≥ 0.99 power)."""
    for R, u, u2 in [(UnderstatedRR(eps), 1, 0), (UnderstatedPM(eps, 1.0), 1.0, -1.0)]:
        audit = audit_epsilon(R, u, u2, n=N, alpha=ALPHA, seed=12)
        assert not audit.passed, (R, audit)


@dataclass(frozen=True)
class SamplerUnderstatedRR(BinaryRandomizedResponse):
    """Declares honest cells and probabilities for ε but samples with the cells of 1.1ε:
    only a check of the *sampler* can see this."""

    def sample(self, inputs, randomness):
        a, b = rr_cells(1.1 * self.epsilon, 2)
        return rr_draw((np.asarray(inputs) != 0).astype(np.int64), randomness.bits(0), a, b).astype(np.uint8)


def test_sampler_that_disagrees_with_its_declared_probabilities_is_caught():
    R = SamplerUnderstatedRR(1.0)
    assert verify_declared(R).within_epsilon  # the declaration is fine...
    audit = verify_exact(R)  # ...the sampler is not: it does not emit its table
    assert not audit.passed and audit.sampler_consistent is False, audit
    assert not audit_epsilon(R, 1, 0, n=N, alpha=ALPHA, seed=13).passed
    assert not chi_square_fit(R, 1, n=N, alpha=ALPHA, seed=13).passed


@pytest.mark.parametrize(
    "R,u",
    [
        (BinaryRandomizedResponse(0.5), 1),
        (KaryRandomizedResponse(1.0, (0, 1, 2, 3, 4)), 3),
        (PlusMinusRandomizedResponse(0.5, 2.0), 0.7),
        (LaplaceRandomizer(1.0, 1.0), 0.3),
        (DiscreteLaplaceRandomizer(1.0, 1.0), 0.3),
        (DiscreteLaplaceRandomizer(0.25, 2.0), -1.9),
        (DiscreteLaplaceRandomizer(16.0, 1.0, steps=1), 0.4),
    ],
)
def test_samplers_fit_their_declared_distribution(R, u):
    fit = chi_square_fit(R, u, n=N, alpha=ALPHA, seed=21)  # false-alarm rate 1e-6
    assert fit.passed, fit


# --- unbiased estimators ---


@pytest.mark.parametrize(
    "R,u",
    [
        (BinaryRandomizedResponse(0.5), 1.0),
        (KaryRandomizedResponse(1.0, (-1, 0, 2)), 2.0),
        (PlusMinusRandomizedResponse(0.5, 2.0), -0.7),
        (LaplaceRandomizer(1.0, 1.0), 0.3),
        (DiscreteLaplaceRandomizer(1.0, 1.0), 0.37),
    ],
)
def test_estimators_are_unbiased_with_the_stated_variance(R, u):
    n = 200_000
    randomness = RandomSource(31).for_request("t", 1, np.arange(n))
    est = R.estimate(R.sample(np.full(n, u), randomness))
    var = float(R.variance(u))
    # mean within 6 standard errors: false-alarm rate ≈ 2e-9
    assert abs(est.mean() - u) < 6 * math.sqrt(var / n)
    assert est.var() == pytest.approx(var, rel=0.05)


@pytest.mark.parametrize("eps", [1.0, 40.0])
def test_estimators_use_the_realized_probabilities(eps):
    """At ε = 40 the ideal keep probability e^ε/(e^ε+1) and the realized A/2^64 differ by far more
    than float rounding; the estimator must invert the realized one to stay unbiased."""
    R = BinaryRandomizedResponse(eps)
    a, b = R.cell_sizes
    p, q = a / TWO64, b / TWO64
    for u in (0.0, 1.0):
        expected_w = p * u + q * (1 - u)  # E[w] under the realized distribution
        assert float(R.estimate(np.array([1.0]))[0]) * expected_w + float(R.estimate(np.array([0.0]))[0]) * (1 - expected_w) == pytest.approx(u, abs=1e-9)
    K = KaryRandomizedResponse(eps, (0, 1, 2, 5))
    for i, u in enumerate(K.categories):
        pk, qk = K.keep_probability, K.other_probability
        expected = sum((pk if j == i else qk) * float(K.estimate(np.array([c]))[0]) for j, c in enumerate(K.categories))
        assert expected == pytest.approx(u, abs=1e-6)


def test_kary_frequencies_are_vectorized_and_unbiased():
    R = KaryRandomizedResponse(2.0, (0, 1, 2, 3))
    n = 200_000
    x = np.repeat([0.0, 1.0, 3.0, 3.0], n // 4)
    freq = R.frequencies(R.sample(x, RandomSource(4).for_request("t", 1, np.arange(n))))
    np.testing.assert_allclose(freq, [0.25, 0.25, 0.0, 0.5], atol=0.02)
    np.testing.assert_allclose(R.frequencies(np.array([])), (0 - R.other_probability) / (R.keep_probability - R.other_probability))


def test_record_rr_column_frequencies_are_unbiased():
    R = RecordRandomizedResponse(3.0, (0, 0), (1, 3))
    n = 100_000
    x = np.stack([np.zeros(n, int), np.full(n, 2)], axis=1)
    reports = R.sample(x, RandomSource(3).for_request("t", 1, np.arange(n)))
    freq = R.column_frequencies(reports, 1)
    assert freq[2] == pytest.approx(1.0, abs=0.05)
    assert np.abs(freq[[0, 1, 3]]).max() < 0.05


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 0.0, -0.5, 5e-324, 1e308, "x"])
def test_invalid_epsilon_is_rejected_with_a_clear_message(bad):
    with pytest.raises(ParameterError, match="epsilon"):
        BinaryRandomizedResponse(bad)


def test_invalid_parameters_name_the_parameter():
    with pytest.raises(ParameterError, match="bound b"):
        LaplaceRandomizer(1.0, -2.0)
    with pytest.raises(ParameterError, match="k ≥ 2"):
        KaryRandomizedResponse(1.0, (3,))
    with pytest.raises(ParameterError, match="k ≥ 2"):
        KaryRandomizedResponse(1.0, (1, 1))


@pytest.mark.parametrize("eps,steps", [(0.1, None), (1.0, None), (8.0, None), (16.0, 1), (16.0, 2), (13.0, 4)])
def test_discrete_laplace_reports_never_reveal_which_inputs_could_have_made_them(eps, steps):
    """The floating-point canary (reference §4f, Mironov 2012): every report drawn from input −b
    or +b lies on the public grid, inside the public window, and has positive *realized*
    probability under every other grid input — so no report rules an input out (this is where the
    old float geometric failed for steps ≤ 4 at ε ≥ 12.5)."""
    R = DiscreteLaplaceRandomizer(eps, 1.0, steps)
    grid = R.output_domain()
    _, _, hi, lo, _ = R.realized_extremes()
    assert (lo > 0).all()  # every report has positive mass under every input
    for u in (-1.0, 1.0):
        w = R.sample(np.full(20_000, u), RandomSource(5).for_request("reach", int(u > 0), np.arange(20_000)))
        assert np.isin(w, grid).all()
        inputs = R.audit_inputs()[:: max(1, len(R.audit_inputs()) // 16)]
        assert np.isfinite(R.log_prob(inputs[:, None], np.unique(w)[None, :])).all()


def test_discrete_laplace_parameters_are_validated():
    with pytest.raises(ParameterError, match="power of two"):
        DiscreteLaplaceRandomizer(1.0, 1.0, steps=3)
    with pytest.raises(ParameterError, match="ε ≤ 16"):
        DiscreteLaplaceRandomizer(20.0, 1.0)
    # (ε, steps) that cannot be made exact are refused at construction, with what would work
    with pytest.raises(ParameterError, match="cannot be made exact.*steps from 1 to"):
        DiscreteLaplaceRandomizer(1.0, 1.0, steps=2**20)
    with pytest.raises(ParameterError, match="no steps works at this ε"):
        DiscreteLaplaceRandomizer(2.0**-17, 1.0)
