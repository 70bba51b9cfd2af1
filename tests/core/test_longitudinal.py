"""Two-level longitudinal frequency oracles (``ldp.core.longitudinal``): parameters, exact audits,
memoization on the users' side, the estimator, the accounting, and the two memoization attacks.

False alarms. The exact audits and the parameter checks are deterministic (no false alarms). The
statistical tests are seeded (they pass or fail the same way on every run); the rates stated are
what a fresh seed would give: unbiasedness z-tests at 4.5σ per coordinate (Bonferroni over the
16 coordinates × 4 protocols: ≤ 4.4·10^-4), variance χ² bands at the [10^-5, 1 − 10^-5] quantiles
per coordinate (≤ 1.3·10^-3 over 64 coordinates), binomial and attack bounds at 4σ (≤ 6.3·10^-5
two-sided, ≤ 3.2·10^-5 one-sided, each).
Each family runs a deliberately broken variant it must catch.

"(verify)" items of the reference (shared/reference/longitudinal_and_multidimensional.md §1.2, §6):
the closed forms of p2/q2 are checked below against (a) this module's independent exact solve
(bisection on the exact composite ratio), (b) the reference's worked vectors and (c) the
expressions of multi-freq-ldpy 0.2.5 (the authors' implementation, long_freq_est/L_*.py), copied
literally. The paper's section numbers could not be checked (its text is not available offline);
nothing here depends on them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from ldp.core.audit import FixedRandomness, exp_bounds, log_ratio, verify_exact
from ldp.core.audit_structure import verify_structure
from ldp.core.errors import ParameterError
from ldp.core.frequency_oracles import HEAD_BITS, UnaryEncoding, unary_word, unary_word_draws
from ldp.core.longitudinal import (
    PROTOCOLS,
    LongitudinalOracle,
    OneReportChannel,
    RepeatedReports,
    decode_repeated,
    estimate_frequencies,
    frequency_variance,
    instantaneous_response,
    longitudinal_charges,
    memo_key,
    permanent_key,
    permanent_response,
)
from ldp.core.rng import RandomSource, derive_key_bytes, generator, life_key, prf_words
from ldp.core.rr_mechanisms import KaryRandomizedResponse

MEMO = memo_key(derive_key_bytes("test_longitudinal", 1))


# --- parameters: the reference's closed forms, worked vectors and the library's expressions ---


def _closed_forms(protocol: str, k: int, ei: float, e1: float) -> tuple[float, float]:
    """(p2, q2) by the reference's table (§1.2), written independently of the module."""
    a, b = math.exp(ei), math.exp(e1)
    if protocol == "l_grr":
        p2 = (a * b - 1) / (a * b + (k - 1) * a - (k - 1) * b - 1)
        return p2, (1 - p2) / (k - 1)
    if protocol == "l_sue":
        p2 = (math.sqrt(a * b) - 1) / ((math.sqrt(b) + 1) * (math.sqrt(a) - 1))
        return p2, 1 - p2
    if protocol == "l_osue":
        p2 = (a * b - 1) / ((b + 1) * (a - 1))
        return p2, 1 - p2
    a2 = 2 * a * (a + 1) * (b - 1)
    a1 = -3 * a * a * b + a * a - 2 * a * b + 2 * a + b + 1
    a0 = a * a - 1.5 * a * b + 1.5 * a - 1.5 * b + 0.5
    return 0.5, 2 * a0 / (-a1 + math.sqrt(a1 * a1 - 4 * a2 * a0))  # the small root, cancellation-free (§5)


def _library_forms(protocol: str, k: int, eps_perm: float, eps_1: float) -> float:
    """multi-freq-ldpy 0.2.5's own expressions (long_freq_est/L_GRR.py, L_OSUE.py, L_OUE.py), verbatim."""
    if protocol == "l_grr":
        p1 = np.exp(eps_perm) / (np.exp(eps_perm) + k - 1)
        q1 = (1 - p1) / (k - 1)
        return float((q1 - np.exp(eps_1) * p1) / ((-p1 * np.exp(eps_1)) + k * q1 * np.exp(eps_1) - q1 * np.exp(eps_1) - p1 * (k - 1) + q1))
    if protocol == "l_osue":
        return float((1 - np.exp(eps_1 + eps_perm)) / (np.exp(eps_1) - np.exp(eps_perm) - np.exp(eps_1 + eps_perm) + 1))
    assert protocol == "l_oue"
    return float(
        (
            (
                -1.11803398874989
                * np.sqrt(
                    0.1 * np.exp(eps_1) + 0.05 * np.exp(2 * eps_1) + 0.3 * np.exp(eps_perm) + 0.45 * np.exp(2 * eps_perm) - np.exp(eps_1 + eps_perm)
                    - 0.7 * np.exp(eps_1 + 2 * eps_perm) + 0.3 * np.exp(2 * eps_1 + eps_perm) + 0.45 * np.exp(2.0 * eps_1 + 2.0 * eps_perm) + 0.05
                )
                - 0.25 * np.exp(eps_1) - 0.25 * np.exp(eps_perm) + 0.75 * np.exp(eps_1 + eps_perm) - 0.25
            )
            * np.exp(-eps_perm)
        )
        / (np.exp(eps_1) - 1.0)
    )


def _grid(o: LongitudinalOracle) -> float:
    """The IRR cells' resolution: the realized p2/q2 are within it of the real-valued solution."""
    return 2.0 ** -o.second_round_cells[2]


def test_worked_vectors_of_the_reference() -> None:
    """ε∞ = 4, ε1 = 1 (reference §1.2): L-GRR (k = 10) p1, q1, p2, q2; the unary ones' p2 or q2."""
    o = LongitudinalOracle("l_grr", 10, 4.0, 1.0)
    got = [float(x) for x in o.first_round() + o.second_round()]
    assert got == pytest.approx([0.858486, 0.015724, 0.239957, 0.084449], abs=1e-6)
    want = {"l_sue": (0, 0.660793), "l_oue": (1, 0.141584), "l_osue": (0, 0.739680)}
    for protocol, (which, value) in want.items():
        o = LongitudinalOracle(protocol, 10, 4.0, 1.0)
        assert float(o.second_round()[which]) == pytest.approx(value, abs=1e-6 + _grid(o))


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("ei", "e1"), [(1.0, 0.5), (4.0, 1.0), (4.0, 2.0), (2.0, 1.9), (8.0, 0.25)])
def test_closed_forms_agree_with_the_exact_solve(protocol: str, ei: float, e1: float) -> None:
    """The module solves each (p2, q2) by bisection on the exact composite ratio; the reference's
    closed forms and the library's expressions must land on the same real number (to the grid)."""
    if protocol == "l_oue" and _closed_forms(protocol, 8, ei, e1)[1] < 0:
        with pytest.raises(ParameterError, match="q2 would be negative"):
            LongitudinalOracle(protocol, 8, ei, e1)
        return
    o = LongitudinalOracle(protocol, 8, ei, e1)
    p2, q2 = (float(x) for x in o.second_round())
    cp2, cq2 = _closed_forms(protocol, 8, ei, e1)
    tol = 4 * _grid(o) + 1e-12
    assert p2 == pytest.approx(cp2, abs=tol) and q2 == pytest.approx(cq2, abs=tol)
    if protocol == "l_grr":
        assert _library_forms(protocol, 8, ei, e1) == pytest.approx(cp2, rel=1e-9)
    elif protocol == "l_osue":
        assert _library_forms(protocol, 8, ei, e1) == pytest.approx(cp2, rel=1e-9)
    elif protocol == "l_oue":
        assert _library_forms(protocol, 8, ei, e1) == pytest.approx(cq2, rel=1e-7)


def test_l_grr_calibrations() -> None:
    """The published L-GRR p2 solves the binary-style ratio (p1p2 + q1q2)/(p1q2 + q1p2) = e^{ε1}; the
    exact k-ary composite loss is then below ε1 for k > 2 (reference example: 0.9196 at ε∞ = 4,
    ε1 = 1, k = 10) and equal at k = 2. 'tight' solves the exact ratio instead."""
    o = LongitudinalOracle("l_grr", 10, 4.0, 1.0)
    (p1, q1), (p2, q2) = o.first_round(), o.second_round()
    assert float((p1 * p2 + q1 * q2) / (p1 * q2 + q1 * p2)) == pytest.approx(math.e, rel=1e-12)
    assert o.single_report_loss == pytest.approx(0.9196, abs=1e-4)
    assert LongitudinalOracle("l_grr", 2, 4.0, 1.0).single_report_loss == pytest.approx(1.0, abs=1e-12)
    tight = LongitudinalOracle("l_grr", 10, 4.0, 1.0, "tight")
    assert tight.single_report_loss == pytest.approx(1.0, abs=1e-12) and tight.single_report_loss <= 1.0
    assert tight.second_round()[0] > p2  # less noise for the same ε1


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("l_grr", 4, 1.0, 1.0), "epsilon_1 < epsilon_inf"),
        (("l_grr", 4, 1.0, 2.0), "epsilon_1 < epsilon_inf"),
        (("l_oue", 4, 1.0, 0.9), "q2 would be negative"),
        (("l_rappor", 4, 2.0, 1.0), "one of"),
        (("l_grr", 1, 2.0, 1.0), r"k must be|in \[2, 2\^16\]"),
        (("l_grr", 4, float("nan"), 1.0), "epsilon_inf"),
        (("l_grr", 4, 2.0, 1.0, "exact"), "calibration"),
    ],
)
def test_refusals(args: tuple, match: str) -> None:
    """Infeasible or invalid parameters raise one ParameterError line instead of bad probabilities."""
    with pytest.raises(ParameterError, match=match) as info:
        LongitudinalOracle(*args)
    assert "\n" not in str(info.value)


# --- exact audits of the realized samplers ---


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize(("ei", "e1"), [(1.0, 0.5), (4.0, 2.0), (6.0, 0.5)])
def test_one_report_channel_exact(protocol: str, k: int, ei: float, e1: float) -> None:
    """(a) One report's realized loss ≤ ε1: every report enumerated, exact masses, the real samplers
    fed their cell boundaries (``verify_exact``, unchanged)."""
    o = LongitudinalOracle(protocol, k, ei, e1)
    audit = verify_exact(OneReportChannel(o))
    assert audit.passed, audit
    assert audit.max_log_ratio == pytest.approx(o.single_report_loss, abs=1e-12)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("k", [2, 16, 1024, 1 << 16])
def test_exact_by_structure_at_any_k(protocol: str, k: int) -> None:
    """At any k: the one-report ratio (L-GRR: the composite k-ary RR's p_s/q_s; unary: the two-bit
    channel) ≤ e^{ε1}, and the PRR — the ε∞ oracle's own sampler — passes its audit (b)."""
    for ei in (1.0, 4.0):
        o = LongitudinalOracle(protocol, k, ei, ei / 2)
        assert o.single_report_ratio <= exp_bounds(ei / 2)[0]
        assert o.permanent_ratio <= exp_bounds(ei)[0]
        assert o.single_report_loss >= (1 - 2**-7) * (ei / 2) or protocol == "l_grr"  # tight, except the published L-GRR
        R = o.permanent_oracle
        if isinstance(R, UnaryEncoding):
            audit = verify_structure(R) if k <= 1024 else None
        else:
            audit = verify_exact(R, check_inputs=4) if k <= 16 else None
        assert audit is None or (audit.passed and audit.max_log_ratio == pytest.approx(o.permanent_loss, abs=1e-12))


@pytest.mark.parametrize("protocol", ["l_oue", "l_sue"])
def test_irr_sampler_structure_at_large_k(protocol: str) -> None:
    """At k = 1024 the real IRR sampler emits bit j = 1[X_j < S1 if PRR bit j else S0], X_j laid
    out as ``unary_word`` says (top 16 bits in block ⌊j/8⌋, the rest, if any, in the fallback
    stream), with every X_j at or next to a threshold for a third of the users and tying its top 16
    bits for another."""
    o = LongitudinalOracle(protocol, 1024, 4.0, 2.0)
    keep, other, b = o.second_round_cells
    n = 256
    rng = np.random.default_rng(3)
    prr_bits = rng.integers(0, 2, (n, o.k)).astype(bool)
    chunks = rng.integers(0, 1 << b, (n, o.k), dtype=np.uint64)
    t = np.where(prr_bits, keep, other).astype(np.uint64)
    edge = t - rng.integers(0, 2, (n, o.k), dtype=np.uint64)
    r = b - HEAD_BITS
    tie = ((t >> np.uint64(r)) << np.uint64(r)) | (chunks & np.uint64((1 << r) - 1))
    chunks[: n // 3] = edge[: n // 3]
    chunks[n // 3 : 2 * n // 3] = tie[n // 3 : 2 * n // 3]
    words = {d: unary_word(d, o.k, b, lambda j: chunks[:, j]) for d in unary_word_draws(o.k, b)}
    y = instantaneous_response(np.packbits(prr_bits, axis=1), FixedRandomness(words, n), o)
    want = chunks < np.where(prr_bits, keep, other).astype(np.uint64)
    assert np.array_equal(np.unpackbits(y, axis=1, count=o.k).astype(bool), want)


@pytest.mark.parametrize(("ei", "e1", "periods"), [(2.0, 1.0, 3), (1.0, 0.5, 3), (4.0, 2.0, 4)])
def test_repeated_reports_bounded_by_eps_inf_and_the_unmemoized_variant_is_caught(ei: float, e1: float, periods: int) -> None:
    """(b) T reports of one value, all enumerated (k^T outputs, T + 1 draws): ≤ ε∞ when the PRR is
    memoized. Broken: a PRR redrawn for every report — its loss is ≈ T·ε1 > ε∞, and the audit fails."""
    o = LongitudinalOracle("l_grr", 3, ei, e1, "tight")
    good = verify_exact(RepeatedReports(o, periods, True))
    assert good.passed and good.max_log_ratio <= o.permanent_loss + 1e-12
    broken = verify_exact(RepeatedReports(o, periods, False))
    assert not broken.passed and not broken.within_epsilon
    assert broken.max_log_ratio == pytest.approx(periods * o.single_report_loss, rel=1e-9)  # fresh PRRs compose


@dataclass(frozen=True)
class _WrongIRRCells(LongitudinalOracle):
    """Broken: the IRR cells rounded the wrong way (one grid step toward less noise)."""

    @property
    def second_round_cells(self) -> tuple[int, int, int]:
        keep, other, b = super().second_round_cells
        if not self.unary:
            return keep + (self.k - 1), other - 1, b
        return (keep, other - 1, b) if self.protocol == "l_oue" else (keep + 1, other - 1, b)


@dataclass(frozen=True)
class _WrongPRRCells(LongitudinalOracle):
    """Broken: the PRR's cells rounded down (B = ⌊2^64/(e^ε∞ + k − 1)⌋, as the float code would)."""

    @property
    def permanent_oracle(self):  # type: ignore[no-untyped-def, override]
        good = KaryRandomizedResponse(self.epsilon_inf, tuple(float(i) for i in range(self.k)))
        a, b = good.cell_sizes

        @dataclass(frozen=True)
        class Floor(KaryRandomizedResponse):
            @property
            def cell_sizes(self) -> tuple[int, int]:
                return a + (self.k - 1), b - 1

        return Floor(self.epsilon_inf, good.categories)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_irr_cells_rounded_the_wrong_way_are_caught(protocol: str) -> None:
    o = _WrongIRRCells(protocol, 2, 4.0, 2.0, "tight")
    audit = verify_exact(OneReportChannel(o))
    assert not audit.within_epsilon and not audit.passed


def test_prr_cells_rounded_the_wrong_way_are_caught() -> None:
    """(b) is the PRR channel's audit (every report of one value is post-processing of it): the
    real PRR passes at ε∞, PRR cells rounded down fail it, exactly."""
    assert verify_exact(LongitudinalOracle("l_grr", 3, 2.0, 1.0).permanent_oracle).passed
    broken = _WrongPRRCells("l_grr", 3, 2.0, 1.0, "tight")
    audit = verify_exact(broken.permanent_oracle)
    assert not audit.within_epsilon and not audit.passed  # by 2^-61 relative: only exact arithmetic sees it
    assert broken.permanent_ratio > exp_bounds(2.0)[1]  # the module's own accounting sees it too


def test_a_sampler_that_disagrees_with_its_table_is_caught() -> None:
    """Broken: an IRR whose keep test is X ≤ A instead of X < A (off by one at the boundary)."""

    @dataclass(frozen=True)
    class OffByOne(RepeatedReports):
        def sample(self, inputs: np.ndarray, randomness):  # type: ignore[no-untyped-def, override]
            shifted = FixedRandomness({d: randomness.bits(d) - (randomness.bits(d) > 0).astype(np.uint64) for d in range(2)}, len(randomness.users))
            return super().sample(inputs, shifted)

    audit = verify_exact(OffByOne(LongitudinalOracle("l_grr", 3, 2.0, 1.0), 1, True))
    assert audit.sampler_consistent is False and not audit.passed


# --- memoization on the users' side ---


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_prr_is_a_pure_function_of_key_user_and_value(protocol: str) -> None:
    """Same (memo key, user, value): the same PRR, from a fresh oracle object too (a restart); the
    IRR changes with the report's nonce. A new value, question or key: an independent PRR."""
    o = LongitudinalOracle(protocol, 16, 2.0, 1.0)
    users = np.arange(4000, dtype=np.int64)
    values = users % 16
    a = permanent_response(MEMO, users, values, o)
    again = permanent_response(memo_key(derive_key_bytes("test_longitudinal", 1)), users.copy(), values.copy(), LongitudinalOracle(protocol, 16, 2.0, 1.0))
    assert np.array_equal(a, again)
    assert not np.array_equal(a, permanent_response(MEMO, users, values, o, question="another"))
    assert not np.array_equal(a, permanent_response(memo_key(derive_key_bytes("test_longitudinal", 2)), users, values, o))
    src = RandomSource(1)
    y0 = instantaneous_response(a, src.for_request("reports", 0, users), o)
    y1 = instantaneous_response(a, src.for_request("reports", 1, users), o)
    assert not np.array_equal(y0, y1)


def test_prrs_of_distinct_values_are_independent() -> None:
    """L-OUE's PRR bits j ∉ {3, 5} of value 3 and of value 5 agree at rate q1² + (1 − q1)² when
    their coins are independent; the broken variant (the counter ignores the value: one coin for
    every value) makes them agree always. Binomial 4σ band (false alarm ≤ 6.3·10^-5)."""
    o = LongitudinalOracle("l_oue", 16, 1.0, 0.5)
    users = np.arange(20000, dtype=np.int64)
    rest = [j for j in range(16) if j not in (3, 5)]

    def agree(a: np.ndarray, b: np.ndarray) -> float:
        return float((np.unpackbits(a, axis=1, count=16)[:, rest] == np.unpackbits(b, axis=1, count=16)[:, rest]).mean())

    three, five = (permanent_response(MEMO, users, np.full(len(users), v), o) for v in (3, 5))
    q1 = float(o.first_round()[1])
    want = q1 * q1 + (1 - q1) ** 2
    assert abs(agree(three, five) - want) <= 4 * math.sqrt(want * (1 - want) / (len(users) * len(rest)))
    from ldp.core.rng import UserRandomness

    key = permanent_key(MEMO, o)
    shared = [o.permanent_oracle.sample(np.full(len(users), float(v)), UserRandomness(key, users, 0)) for v in (3, 5)]
    assert agree(*shared) == 1.0


def test_keys_are_domain_separated() -> None:
    """The memo key is not the report key nor any life key; the PRR key is neither, and its words
    differ from the report stream's at the same (user, counter)."""
    report = derive_key_bytes("test_longitudinal", "report")
    memo = memo_key(report)
    o = LongitudinalOracle("l_grr", 4, 2.0, 1.0)
    prr = permanent_key(memo, o)
    salted = life_key(report, b"\x01" * 16)
    assert len({report, memo, prr, salted, life_key(report, None)}) == 4  # life_key(·, None) is the report key
    assert permanent_key(memo, o) != permanent_key(memo, LongitudinalOracle("l_grr", 4, 3.0, 1.0))
    users = np.arange(64)
    assert not np.array_equal(prf_words(prr, users, 1, 0), prf_words(report, users, 1, 0))
    with pytest.raises(ParameterError):
        memo_key(b"short")


# --- the estimator: unbiased, with its exact variance ---


@pytest.mark.parametrize("periods", [1, 5])
def test_estimator_unbiased_with_its_exact_variance(periods: int) -> None:
    """R = 300 repetitions on a fixed population (n = 4000, k = 16, ε∞ = 2, ε1 = 1.5, a fresh memo
    key per repetition): per coordinate, the mean of f̂ within 4.5σ of f and (R − 1)s²/Var inside
    the [10^-5, 1 − 10^-5] quantiles of χ²_{R−1} (Bonferroni over 16 × 4 coordinates: ≤ 1.3·10^-3).
    ``periods`` = 5: the mean of 5 periods' estimates of the same memoized population, whose
    variance keeps the PRR's floor (``frequency_variance(periods=5)``). Broken: the naive variance
    of a 5-period mean (one period's ÷ 5, as if the periods were independent; ≥ 1.5× too small
    here) is caught."""
    k, n, reps = 16, 4000, 300
    counts = np.bincount(generator(3, "population").integers(0, k, n), minlength=k)
    f = counts / n
    values = np.repeat(np.arange(k), counts)
    users = np.arange(n, dtype=np.int64)
    lo, hi = stats.chi2.ppf(1e-5, reps - 1), stats.chi2.isf(1e-5, reps - 1)
    for protocol in PROTOCOLS:
        o = LongitudinalOracle(protocol, k, 2.0, 1.5)
        est = np.empty((reps, k))
        for r in range(reps):
            prr = permanent_response(memo_key(derive_key_bytes("unbiased", periods, r)), users, values, o)
            est[r] = np.mean([estimate_frequencies(instantaneous_response(prr, RandomSource(r).for_request("irr", t, users), o), o) for t in range(periods)], axis=0)
        var = frequency_variance(f, n, o, periods=periods)
        z = (est.mean(axis=0) - f) / np.sqrt(var / reps)
        assert np.abs(z).max() < 4.5, (protocol, z)
        s2 = est.var(axis=0, ddof=1)
        stat = (reps - 1) * s2 / var
        assert ((lo <= stat) & (stat <= hi)).all(), (protocol, stat / (reps - 1))
        if periods > 1:
            naive = (reps - 1) * s2 / (frequency_variance(f, n, o, periods=1) / periods)
            assert (naive > hi).any(), (protocol, naive / (reps - 1))


# --- accounting ---


def test_longitudinal_charges() -> None:
    charges = longitudinal_charges([3, 3, 3, 5, 3, 7, 7], 4.0, 1.0)
    assert charges.tolist() == [1.0, 3.0, 0.0, 1.0, 0.0, 1.0, 3.0]
    assert charges.sum() == 4.0 + 1.0 + 4.0  # value 3: ε∞, value 5 (once): ε1, value 7: ε∞
    assert longitudinal_charges([], 4.0, 1.0).size == 0
    assert longitudinal_charges(["a"] * 100, 4.0, 1.0).sum() == 4.0  # any number of reports of one value
    with pytest.raises(ParameterError, match="epsilon_1 < epsilon_inf"):
        longitudinal_charges([1], 1.0, 1.0)


# --- the attacks ---


def _attack(o: LongitudinalOracle, users: int, periods: int, memoized: bool, seed: int) -> tuple[float, float]:
    """(accuracy of the optimal decoder of a uniform unchanged value from T reports, its bound)."""
    ids = np.arange(users, dtype=np.int64)
    values = generator(seed, "values").integers(0, o.k, users)
    memo = memo_key(derive_key_bytes("attack", seed))
    src = RandomSource(seed)
    prr = permanent_response(memo, ids, values, o)
    reports = []
    for t in range(periods):
        p = prr if memoized else permanent_response(memo, ids, values, o, question=f"period {t}")  # broken: a new PRR per report
        reports.append(instantaneous_response(p, src.for_request("reports", t, ids), o))
    acc = float((decode_repeated(reports, o, generator(seed, "ties")) == values).mean())
    return acc, math.exp(o.epsilon_inf) / (math.exp(o.epsilon_inf) + o.k - 1)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_attack_unchanged_value_over_100_periods(protocol: str) -> None:
    """(1) T = 100 periods of an unchanged value, 20,000 users, k = 16, ε∞ = 4, ε1 = 2: the optimal
    decoder's accuracy ≤ e^ε∞/(e^ε∞ + k − 1) + 4σ (one-sided, false alarm ≤ 3.2·10^-5; L-GRR
    attains the bound). Broken: without memoization the same decoder is right ≥ 99% of the time."""
    o = LongitudinalOracle(protocol, 16, 4.0, 2.0)
    acc, bound = _attack(o, 20000, 100, True, seed=11)
    assert acc <= bound + 4 * math.sqrt(bound * (1 - bound) / 20000), (acc, bound)
    if protocol == "l_grr":
        assert acc >= bound - 4 * math.sqrt(bound * (1 - bound) / 20000)  # the decoder is optimal: the bound is reached
    broken, _ = _attack(o, 4000, 100, False, seed=11)
    assert broken >= 0.99


def test_attack_changing_value() -> None:
    """(2) Users report v1 for 50 periods, then v2 for 50 (v1, v2 uniform and independent, k = 4,
    ε∞ = 4, ε1 = 2, L-GRR). The ledger's charge is 2ε∞ when v1 ≠ v2. The aggregator, knowing when
    the change happened (the change is not protected), decodes the pair at accuracy ≈ p1²: above
    what one ε∞ over the pair would allow (e^ε∞/(e^ε∞ + k² − 1)), below the charge's bound
    e^{2ε∞}/(e^{2ε∞} + k² − 1). It also tells who changed from who did not far better than
    always answering "changed" (right for 75 % of users at k = 4).
    One-sided 4σ checks (false alarm ≤ 3.2·10^-5 each)."""
    o = LongitudinalOracle("l_grr", 4, 4.0, 2.0)
    n, half = 20000, 50
    ids = np.arange(n, dtype=np.int64)
    rng = generator(21, "pairs")
    v1, v2 = rng.integers(0, o.k, n), rng.integers(0, o.k, n)
    memo = memo_key(derive_key_bytes("change", 21))
    prr1, prr2 = permanent_response(memo, ids, v1, o), permanent_response(memo, ids, v2, o)  # v1 = v2: the same PRR
    src = RandomSource(21)
    first = [instantaneous_response(prr1, src.for_request("reports", t, ids), o) for t in range(half)]
    second = [instantaneous_response(prr2, src.for_request("reports", half + t, ids), o) for t in range(half)]
    g1, g2 = decode_repeated(first, o, generator(21, "ties", 1)), decode_repeated(second, o, generator(21, "ties", 2))
    pair = float(((g1 == v1) & (g2 == v2)).mean())
    se = math.sqrt(pair * (1 - pair) / n)
    e, k2 = math.exp(4.0), o.k**2
    one_eps_inf, charged = e / (e + k2 - 1), e * e / (e * e + k2 - 1)
    assert pair > one_eps_inf + 4 * se  # one ε∞ cannot cover a change of value
    assert pair <= charged + 4 * se
    changed = v1 != v2
    said = g1 != g2
    assert float((said == changed).mean()) > 0.85  # when it changed: learned, not protected
    for a, b in zip(v1[:50], v2[:50]):
        total = longitudinal_charges([a] * half + [b] * half, 4.0, 2.0).sum()
        assert total == (8.0 if a != b else 4.0)


def _two_report_laws(o: LongitudinalOracle, a: int, b: int) -> tuple[list[list[Fraction]], list[list[Fraction]]]:
    """Exact laws of two memoized L-GRR reports (o1, o2) when the user's values are (a, a) — one
    PRR, read twice — and (a, b) — two PRRs, drawn independently — each through a fresh IRR."""
    p1, q1 = o.first_round()
    p2, q2 = o.second_round()

    def prr(y: int, v: int) -> Fraction:
        return p1 if y == v else q1

    def irr(out: int, y: int) -> Fraction:
        return p2 if out == y else q2

    k = o.k
    same = [[sum(prr(y, a) * irr(r, y) * irr(s, y) for y in range(k)) for s in range(k)] for r in range(k)]
    first = [sum(prr(y, a) * irr(r, y) for y in range(k)) for r in range(k)]
    second = [sum(prr(y, b) * irr(s, y) for y in range(k)) for s in range(k)]
    changed = [[first[r] * second[s] for s in range(k)] for r in range(k)]
    return same, changed


def test_a_change_of_value_leaks_its_pattern_beyond_the_per_value_charges() -> None:
    """RAPPOR's longitudinal statement is per value: every report of one value is ε∞-LDP. What it
    does not cover, exactly (two L-GRR reports, k = 16, ε∞ = 1, ε1 = 0.9, "tight"): an unchanged
    value (a, a) against a change (a, b). Read with the same PRR twice, the reports agree far more
    often than two independent PRRs can make them, so the pair of sequences is told apart at a loss
    of 2.67 — above ε∞ (what ``longitudinal_charges`` sums for (a, a)), above 2ε1 = 1.8 (its sum
    for (a, b)), and above ε∞ + ε1. So no per-value or per-report sum of charges bounds a
    memoized collection whose values may change; the bound that holds is T·ε_IRR (given every
    PRR, whose law does not depend on the data, the T IRRs are independent ε_IRR-LDP reports),
    which this meets (2.67 ≤ 2·4.62). Why ldp keys a question's PRRs to one value for the life of
    the data (docs/longitudinal.md). Exact rationals; the logs to 1e-12."""
    o = LongitudinalOracle("l_grr", 16, 1.0, 0.9, "tight")
    same, changed = _two_report_laws(o, 0, 1)
    loss = max(float(log_ratio(same[r][s] / changed[r][s])) for r in range(o.k) for s in range(o.k))
    p2, q2 = o.second_round()
    eps_irr = float(log_ratio(p2 / q2))
    charged_same = longitudinal_charges([0, 0], 1.0, 0.9).sum()
    charged_change = longitudinal_charges([0, 1], 1.0, 0.9).sum()
    assert (charged_same, charged_change) == pytest.approx((1.0, 1.8))
    assert loss == pytest.approx(2.669, abs=1e-3)
    assert loss > max(charged_same, charged_change) + 0.8 and loss > 1.0 + 0.9
    assert loss <= 2 * eps_irr + 1e-12  # T·ε_IRR holds
    # The channel itself is right: each report alone is ε1-LDP, and one value's reports are ε∞-LDP.
    assert o.single_report_loss <= 0.9 + 1e-12 and o.permanent_loss <= 1.0 + 1e-12
    # Without the shared PRR (a fresh PRR per report: the broken "no memo" channel) the pair (a, a)
    # would be two independent reports, and the loss against (a, b) falls to at most 2·ε1.
    _, fresh_same = _two_report_laws(o, 0, 0)
    fresh = max(float(log_ratio(fresh_same[r][s] / changed[r][s])) for r in range(o.k) for s in range(o.k))
    assert fresh <= 2 * 0.9 + 1e-12 < loss
