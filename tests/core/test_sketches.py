"""Apple's Count Mean Sketch and Hadamard Count Mean Sketch (``ldp.core.sketches``): exact privacy,
the paper's estimator with its variance, the spec and wire path.

Exact audits are deterministic (no false alarms). Every statistical test is seeded and states its
false-alarm rate: the probability, were the code correct, that it would fail for a fresh seed.
Each check runs a broken variant written here that it must catch: CMS flipping with probability
1/(1 + e^ε) (twice the loss), an HCMS coin at 2ε, samplers that read a draw twice, an estimator
without the collision correction or with HCMS's scale, and the reference's variance formula (which
omits the hash family's term) at small K.

The "(verify)" items of the reference (longitudinal_and_multidimensional.md §4.1) checked here:
c_ε = (e^{ε/2} + 1)/(e^{ε/2} − 1) for CMS and (e^ε + 1)/(e^ε − 1) for HCMS (the realized scales are
within the cells' rounding, relative 2^-12), the flip probabilities 1/(1 + e^{ε/2}) and 1/(1 + e^ε), the per-report loss ε
of both, the estimator (m/(m−1))·((1/K)Σ_ℓ M[ℓ, h_ℓ(x)] − n/m) with its unbiasedness, and the
variance: the reference's formulas hold when the hash family's term is negligible (large K) and
fail at small K and a skewed population, where the exact form of ``count_variance`` holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ldp.core.audit import verify_exact
from ldp.core.errors import ParameterError
from ldp.core.fourier import walsh_hadamard
from ldp.core.frequency_oracles import SymmetricUnaryEncoding, frequency_estimates, frequency_variance
from ldp.core.query_specs import field_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import Draws, RandomSource
from ldp.core.rr_mechanisms import BinaryRandomizedResponse
from ldp.core.schema import Field, Schema
from ldp.core.sketches import (
    CountMeanSketch,
    HadamardCountMeanSketch,
    OffsetDraws,
    SketchOracle,
    enumerated_sketch,
    sketch_probe,
    verify_sketch,
)
from ldp.wire.codec import report_format

SKETCHES = [CountMeanSketch, HadamardCountMeanSketch]
ALPHA = 1e-6  # the false-alarm rate of each statistical check below (Bonferroni over its tests)


# --- broken variants ---


@dataclass(frozen=True)
class CMSFlippingAtEpsilon(CountMeanSketch):
    """Each coordinate flipped with probability 1/(1 + e^ε) (the HCMS coin's) instead of 1/(1 + e^{ε/2}):
    the two coordinates that differ then cost ε each, 2ε in all."""

    @property
    def channel(self) -> SymmetricUnaryEncoding:
        return SymmetricUnaryEncoding(2 * self.epsilon, tuple(float(i) for i in range(self.width)))


@dataclass(frozen=True)
class HCMSCoinAtTwoEpsilon(HadamardCountMeanSketch):
    @property
    def coin(self) -> BinaryRandomizedResponse:
        return BinaryRandomizedResponse(2 * self.epsilon)


@dataclass(frozen=True)
class CMSReadingDrawZeroTwice(CountMeanSketch):
    """The row j and the first word of flips both from draw 0: a coin drawn twice."""

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        return super().sample(inputs, _Repeat(randomness))


class _Repeat:
    """Draw 1 is draw 0 again (what a missing offset does)."""

    def __init__(self, inner: Draws) -> None:
        self.inner, self.users = inner, inner.users

    def bits(self, draw: int = 0) -> np.ndarray:
        return self.inner.bits(0 if draw == 1 else draw)

    def uniform(self, draw: int = 0) -> np.ndarray:
        return self.inner.uniform(draw)


@dataclass(frozen=True)
class HCMSIndexFromTheRowDraw(HadamardCountMeanSketch):
    """l from draw 0, the row's draw: l is then a function of j."""

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        return super().sample(inputs, _Repeat(randomness))


# --- exact privacy ---


@pytest.mark.parametrize("eps", [2.0**-6, 0.25, 1.0, 4.0, 12.0, 45.0])
def test_enumerated_exact_audit_passes_and_equals_the_structural_loss(eps: float) -> None:
    """verify_exact, unchanged, on every report of small sketches (K ∈ {1, 2, 4}, m ∈ {2, 4}):
    the loss ≤ ε exactly, rows sum exactly, log_prob is the realized log, and the sampler fed its
    cell boundaries emits the table; the loss equals ``verify_sketch``'s, computed by structure."""
    for cls in SKETCHES:
        for K, m in ((1, 4), (2, 4), (4, 2)):
            R = cls(eps, (0.0, 1.0, 2.0, 7.0), hashes=K, width=m, hash_seed=11)
            audit = verify_exact(enumerated_sketch(R))
            assert audit.passed and audit.sampler_consistent is True, (R, audit)
            structure = verify_sketch(R)
            assert structure.passed, (R, structure)
            assert audit.max_log_ratio == pytest.approx(structure.max_log_ratio, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_structural_audit_passes_and_is_tight_at_the_papers_size(eps: float) -> None:
    """K = 65,536 hashes, m = 1,024, k = 2^16 categories (Apple's example size): no enumeration
    possible; the loss is ε up to the cells' rounding (≥ (1 − 2^-7)ε), never above."""
    for cls in SKETCHES:
        R = cls(eps, tuple(range(1 << 16)), hashes=1 << 16, width=1024, hash_seed=1)
        audit = verify_sketch(R)
        assert audit.passed and audit.sampler_consistent is True, audit
        assert eps * (1 - 2**-7) <= audit.max_log_ratio <= eps


def test_the_flip_probabilities_and_scales_are_the_papers() -> None:
    """(verify) CMS flips each coordinate w.p. 1/(1 + e^{ε/2}), HCMS its one bit w.p. 1/(1 + e^ε);
    c_ε = (e^{ε/2}+1)/(e^{ε/2}−1) and (e^ε+1)/(e^ε−1): the realized values, within the cells' grid."""
    for eps in (0.5, 1.0, 4.0, 8.0):
        cms = CountMeanSketch(eps, tuple(range(8)), hashes=4, width=16)
        b = cms.channel.chunk_bits
        flip = cms.channel.thresholds[1] / 2**b
        assert flip == pytest.approx(1 / (1 + math.exp(eps / 2)), abs=2.0**-b)
        e2 = math.exp(eps / 2)
        assert float(cms.scale()) == pytest.approx((e2 + 1) / (e2 - 1), rel=2.0**-12)
        hcms = HadamardCountMeanSketch(eps, tuple(range(8)), hashes=4, width=16)
        a, bb = hcms.coin.cell_sizes
        assert bb / 2**64 == pytest.approx(1 / (1 + math.exp(eps)), rel=1e-12)
        assert float(hcms.scale()) == pytest.approx((math.exp(eps) + 1) / (math.exp(eps) - 1), rel=1e-12)


def test_audits_catch_the_broken_privacy_variants() -> None:
    """Flipping CMS's coordinates with 1/(1 + e^ε) doubles the loss; an HCMS coin at 2ε doubles it;
    both are refused by the structural audit and by enumeration. Samplers that read a draw twice
    are caught by the probe (and, for CMS, by the enumerated sampler check)."""
    for eps in (0.5, 1.0, 4.0):
        cms = CMSFlippingAtEpsilon(eps, tuple(range(5)), hashes=2, width=4)
        audit = verify_sketch(cms)
        assert not audit.passed and not audit.within_epsilon
        assert audit.max_log_ratio == pytest.approx(2 * eps, rel=2**-6)
        assert not verify_exact(enumerated_sketch(cms)).passed
        hcms = HCMSCoinAtTwoEpsilon(eps, tuple(range(5)), hashes=2, width=4)
        assert not verify_sketch(hcms).passed and not verify_exact(enumerated_sketch(hcms)).passed
        assert verify_sketch(hcms).max_log_ratio == pytest.approx(2 * eps, rel=1e-9)
    shared = CMSReadingDrawZeroTwice(1.0, tuple(range(5)), hashes=4, width=64)
    assert "SUE channel" in sketch_probe(shared) and not verify_sketch(shared).passed
    small = CMSReadingDrawZeroTwice(1.0, tuple(range(5)), hashes=2, width=4)
    assert verify_exact(enumerated_sketch(small)).sampler_consistent is False
    tied = HCMSIndexFromTheRowDraw(1.0, tuple(range(5)), hashes=4, width=64)
    assert "(j, l)" in sketch_probe(tied) and not verify_sketch(tied).passed
    for cls in SKETCHES:  # and the correct ones pass the same probe
        assert sketch_probe(cls(1.0, tuple(range(5)), hashes=4, width=64)) == ""


# --- the estimator ---

COUNTS = np.array([1000, 400, 200, 150, 100, 80, 50, 20])  # a skewed population of n = 2000


def _inputs(counts: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(counts), dtype=np.float64), counts)


def _trials(make, counts: np.ndarray, trials: int, seed: int, estimate=None) -> np.ndarray:
    """One estimate of every count per trial; ``make(t)`` gives trial t's sketch (its hash family)."""
    inputs = _inputs(counts)
    users = np.arange(len(inputs))
    out = []
    for t in range(trials):
        R = make(t)
        reports = R.sample(inputs, RandomSource(seed).for_request("sketch", t, users))
        out.append(R.estimate_counts(reports) if estimate is None else estimate(R, reports))
    return np.array(out)


def _mean_and_variance_ok(est: np.ndarray, mean: np.ndarray, var: np.ndarray) -> tuple[bool, bool]:
    """Per category: a two-sided z-test of the mean and a two-sided χ² test of the variance, each at
    ALPHA/(4k) (Bonferroni): false-alarm rate ≤ ALPHA = 10^-6 in all."""
    trials, k = est.shape
    z = (est.mean(axis=0) - mean) / np.sqrt(var / trials)
    mean_ok = bool(np.abs(z).max() <= stats.norm.isf(ALPHA / (4 * k)))
    ratio = (trials - 1) * est.var(axis=0, ddof=1) / var
    df = trials - 1
    var_ok = bool((stats.chi2.ppf(ALPHA / (4 * k), df) <= ratio).all() and (ratio <= stats.chi2.isf(ALPHA / (4 * k), df)).all())
    return mean_ok, var_ok


@pytest.mark.parametrize("cls", SKETCHES)
@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_unbiased_over_the_hash_family_with_the_exact_variance(cls: type[SketchOracle], eps: float) -> None:
    """Fresh public hash family every trial (hash_seed = t): the mean is the true count and the
    variance is ``count_variance``'s. K = 4 and a skewed population make the hash family's term
    large: the reference's formula (no such term) is rejected there. False alarms ≤ 10^-6 each."""
    K, m = 4, 16
    est = _trials(lambda t: cls(eps, tuple(range(8)), hashes=K, width=m, hash_seed=t), COUNTS, 300, seed=int(eps))
    R = cls(eps, tuple(range(8)), hashes=K, width=m)
    assert _mean_and_variance_ok(est, COUNTS, R.count_variance(COUNTS)) == (True, True)
    assert _mean_and_variance_ok(est, COUNTS, R.reference_count_variance(COUNTS))[1] is False


@pytest.mark.parametrize("cls", SKETCHES)
def test_unbiased_given_one_family_with_the_conditional_variance(cls: type[SketchOracle]) -> None:
    """One public family (what a deployment has): over the users' draws the estimate has exactly the
    mean and variance of ``conditional_moments`` (the family's collision bias included). 10^-6."""
    make = lambda t: cls(1.0, tuple(range(8)), hashes=8, width=16, hash_seed=3)  # noqa: E731
    est = _trials(make, COUNTS, 300, seed=9)
    mean, var = make(0).conditional_moments(COUNTS)
    assert _mean_and_variance_ok(est, mean, var) == (True, True)


def _without_the_collision_correction(R: SketchOracle, reports: np.ndarray) -> np.ndarray:
    """(1/K)Σ_ℓ M[ℓ, h_ℓ(x)] as the count: the n/m of other values' collisions left in."""
    m = R.width
    return R.estimate_counts(reports) * (m - 1) / m + len(reports) / m


def _cms_with_hcms_scale(R: SketchOracle, reports: np.ndarray) -> np.ndarray:
    """CMS's sketch built with c at ε instead of ε/2 (the two c_ε swapped)."""
    wrong = 1 / math.tanh(R.epsilon / 2)
    m, n = R.width, len(reports)
    s = R.estimate_counts(reports) * (m - 1) / m + n / m  # S(x)
    c = float(R.scale())
    ones = (s - n / 2) / (c / 2) / 2 + n / 2  # O(x)
    return (m / (m - 1)) * ((wrong / 2) * (2 * ones - n) + n / 2 - n / m)


def test_the_statistical_checks_catch_broken_estimators() -> None:
    for cls in SKETCHES:
        est = _trials(lambda t, cls=cls: cls(1.0, tuple(range(8)), hashes=4, width=16, hash_seed=t), COUNTS, 300, seed=4, estimate=_without_the_collision_correction)
        assert _mean_and_variance_ok(est, COUNTS, cls(1.0, tuple(range(8)), hashes=4, width=16).count_variance(COUNTS))[0] is False
    est = _trials(lambda t: CountMeanSketch(1.0, tuple(range(8)), hashes=4, width=16, hash_seed=t), COUNTS, 300, seed=5, estimate=_cms_with_hcms_scale)
    assert _mean_and_variance_ok(est, COUNTS, CountMeanSketch(1.0, tuple(range(8)), hashes=4, width=16).count_variance(COUNTS))[0] is False


def test_at_large_k_the_references_variance_is_the_exact_one() -> None:
    """(verify) The reference's CMS and HCMS variances are the exact ones without the hash family's
    term, which vanishes as K grows: at K = 65,536 they agree to 1 % for every value, even the
    heaviest, of a Zipf population of 10^6."""
    w = 1.0 / np.arange(1, 1025) ** 1.1
    counts = np.floor(w / w.sum() * 10**6)
    for cls in SKETCHES:
        R = cls(4.0, tuple(range(1024)), hashes=1 << 16, width=1024)
        np.testing.assert_allclose(R.count_variance(counts), R.reference_count_variance(counts), rtol=0.01)
        n = counts.sum()
        np.testing.assert_allclose(R.frequency_variance(counts / n, int(n)), R.count_variance(counts) / n**2)
        small = cls(4.0, tuple(range(1024)), hashes=2, width=1024)
        assert (small.count_variance(counts) > 2 * small.reference_count_variance(counts)).all()


@pytest.mark.parametrize("cls", SKETCHES)
def test_the_blocked_server_is_the_papers_matrix(cls: type[SketchOracle], monkeypatch: pytest.MonkeyPatch) -> None:
    """``estimate_counts`` (integer row sums, blocked, no K × m matrix) equals the paper's server on
    the materialized sketch (``sketch_matrix``, then ``counts_from_sketch``), for any candidates,
    and does not depend on the block size."""
    R = cls(2.0, tuple(range(40)), hashes=32, width=64, hash_seed=2)
    inputs = np.random.default_rng(0).integers(0, 40, 5000).astype(np.float64)
    reports = R.sample(inputs, RandomSource(1).for_request("sketch", 0, np.arange(5000)))
    M = R.sketch_matrix(reports)
    np.testing.assert_allclose(R.estimate_counts(reports), R.counts_from_sketch(M, 5000), rtol=1e-9, atol=1e-6)
    pick = np.array([3.0, 17.0, 39.0])
    np.testing.assert_allclose(R.estimate_counts(reports, pick), R.counts_from_sketch(M, 5000, pick), rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(R.frequencies(reports), R.estimate_counts(reports) / 5000)
    whole = R.estimate_counts(reports)
    for block in (64, 1000):
        monkeypatch.setattr("ldp.core.sketches._BLOCK", block)
        np.testing.assert_array_equal(R.estimate_counts(reports), whole)


def test_hadamard_sanity() -> None:
    """H_m H_mᵀ = m·I (the transform the HCMS server applies); and with no flips (ε = 1024: the
    flip cell is 1/2^64) the transformed row of m reports, one per index l, is K·c·m at h_j(x) and
    0 elsewhere: the exact bucket histogram times K, as the reference says."""
    for m in (2, 16, 256):
        H = walsh_hadamard(np.eye(m, dtype=np.int64))
        np.testing.assert_array_equal(H @ H.T, m * np.eye(m, dtype=np.int64))
    R = HadamardCountMeanSketch(1024.0, tuple(range(8)), hashes=4, width=16, hash_seed=5)
    m = R.width
    row = np.uint64(2 << 62)  # j = 2 (the top two bits of draw 0)
    bits = {0: np.full(m, row, dtype=np.uint64), 1: np.arange(m, dtype=np.uint64) << np.uint64(60), 2: np.zeros(m, dtype=np.uint64)}
    from ldp.core.audit import FixedRandomness

    reports = R.sample(np.full(m, 5.0), FixedRandomness(bits, m))
    M = R.sketch_matrix(reports)
    want = np.zeros(m)
    want[int(R.hash(np.array(2), np.array(5)))] = R.hashes * float(R.scale()) * m
    np.testing.assert_allclose(M[2], want)
    assert not M[[0, 1, 3]].any()


# --- the users' randomness, the spec, the wire ---


def test_reports_depend_only_on_the_users_draws() -> None:
    """The same users get the same reports however they are batched, and the public hash seed is
    the only thing the aggregator needs: two instances with the same seed estimate identically."""
    for cls in SKETCHES:
        R = cls(1.0, tuple(range(30)), hashes=64, width=32, hash_seed=9)
        inputs = np.random.default_rng(1).integers(0, 30, 1000).astype(np.float64)
        users = np.arange(1000)
        source = RandomSource(4)
        whole = R.sample(inputs, source.for_request("s", 0, users))
        parts = np.concatenate([R.sample(inputs[s], source.for_request("s", 0, users[s])) for s in (slice(0, 333), slice(333, 1000))])
        np.testing.assert_array_equal(whole, parts)
        twin = cls(1.0, tuple(range(30)), hashes=64, width=32, hash_seed=9)
        np.testing.assert_array_equal(R.estimate_counts(whole), twin.estimate_counts(whole))
        assert isinstance(OffsetDraws(source.for_request("s", 0, users), 1).bits(0), np.ndarray)


SCHEMA = Schema((Field("x", 1, 0, 999),))


def test_kinds_build_from_a_spec_and_travel_the_wire_format() -> None:
    records = (np.arange(4000) % 7).reshape(-1, 1).astype(np.int16)
    for kind, cls in (("cms", CountMeanSketch), ("hcms", HadamardCountMeanSketch)):
        spec = RandomizerSpec(kind, field_query("x", 0), 4.0, {"hashes": 256, "width": 64, "hash_seed": 3})
        local = LocalRandomizer.build(spec, SCHEMA)
        assert isinstance(local.randomizer, cls) and local.epsilon == 4.0
        reports = local.apply(records, RandomSource(0).for_request(kind, 0, np.arange(4000)))
        est = frequency_estimates(local.randomizer, reports)
        assert est.shape == (1000,) and abs(est[:7].sum() - 1.0) < 0.35
        fmt = report_format(spec, SCHEMA)
        assert fmt.problem == "" and fmt.width == reports.shape[1] and fmt.first_outside(reports) is None
        assert audit_passes(local.randomizer)


def audit_passes(R: SketchOracle) -> bool:
    return verify_sketch(R).passed


def test_bad_parameters_get_one_line_errors() -> None:
    q = field_query("x", 0)
    with pytest.raises(ParameterError, match="unknown params"):
        LocalRandomizer.build(RandomizerSpec("cms", q, 1.0, {"rows": 4}), SCHEMA)
    with pytest.raises(ParameterError, match="width must be a power of 2"):
        LocalRandomizer.build(RandomizerSpec("hcms", q, 1.0, {"width": 100}), SCHEMA)
    with pytest.raises(ParameterError, match="hashes"):
        CountMeanSketch(1.0, (0, 1), hashes=0)
    with pytest.raises(ParameterError, match="hash_seed"):
        HadamardCountMeanSketch(1.0, (0, 1), hash_seed=-1)
    R = CountMeanSketch(1.0, (0, 1), hashes=4, width=8)
    with pytest.raises(ParameterError, match="rows of 3 bytes"):
        R.estimate_counts(np.zeros((2, 5), dtype=np.uint8))
    with pytest.raises(ParameterError, match="names row"):
        R.estimate_counts(np.array([[0, 9, 0]], dtype=np.uint8))
    with pytest.raises(ParameterError, match="j < 4"):
        HadamardCountMeanSketch(1.0, (0, 1), hashes=4, width=8).estimate_counts(np.array([[4, 0, 1]], dtype=np.uint16))
    # the support-based formula does not apply to a sketch: the generic function asks the oracle
    assert np.array_equal(frequency_variance(R, 0.1, 100), R.frequency_variance(0.1, 100))


def test_the_benchmark_runs_as_a_process(tmp_path: Path) -> None:
    """``python benchmarks/sketches.py`` (docs/sketches.md), a small run as a real process: it prints
    the table and writes the CSV, the PNG and the markdown table (pure-LDP skipped: --no-peers)."""
    import csv
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, str(root / "benchmarks" / "sketches.py"), "--ks", "16", "--epsilons", "4", "--ns", "2000",
           "--hashes", "64", "--width", "32", "--budget", "0.05", "--no-peers", "--out", str(tmp_path), "--markdown", str(tmp_path / "t.md")]  # fmt: skip
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "CMS / HCMS" in done.stdout and "wrote" in done.stdout
    rows = list(csv.DictReader((tmp_path / "sketches.csv").open(encoding="utf-8")))
    assert [r["protocol"] for r in rows] == ["CMS", "HCMS"] and all(float(r["ldp_mse_over_theory"]) > 0 for r in rows)
    assert (tmp_path / "sketches.png").stat().st_size > 0 and "| 16 | 4 |" in (tmp_path / "t.md").read_text(encoding="utf-8")


def test_the_docs_example_runs() -> None:
    """The Python block of docs/sketches.md, run as written (in a fresh interpreter)."""
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    block = re.search(r"```python\n(.*?)```", (root / "docs" / "sketches.md").read_text(encoding="utf-8"), re.S)
    assert block is not None
    done = subprocess.run([sys.executable, "-c", block.group(1) + "\nprint(counts.round())"], cwd=root, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().startswith("[")
