"""Full RAPPOR (``ldp.core.rappor``): budgets against the paper and decode.R, exact audits of the
real samplers (by structure and by enumeration at small k) with broken variants caught, the
memo, the estimator, the decoder and the longitudinal attack.

Every statistical check is seeded (the draws are a pure function of the keys below), so each
outcome is fixed; the stated false-alarm rate is the chance that a correct implementation with
a fresh seed would fail it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from ldp.core.audit import verify_exact
from ldp.core.errors import ParameterError
from ldp.core.longitudinal import longitudinal_charges, memo_key
from ldp.core.rappor import (
    Rappor,
    ReportChannel,
    bloom_counts,
    cohorts,
    decode,
    decode_repeated,
    estimate_bloom,
    instantaneous_response,
    permanent_response,
)
from ldp.core.rng import RandomSource, derive_key_bytes, generator

PAPER = Rappor(k=128, h=2, m=64, f=0.5, p=0.5, q=0.75)


def _memo(*labels: object) -> bytes:
    return memo_key(derive_key_bytes("test-rappor", *labels))


# --- budgets: the paper's formulas, checked against the reference's worked vector and decode.R ---


def test_budgets_match_the_paper_and_decode_r() -> None:
    # reference §1.1 worked vector: q* = 0.6875, p* = 0.5625, ε1 = 1.0743, ε∞ = 4 ln 3
    qs, ps = PAPER.report_probabilities()
    assert (qs, ps) == (Fraction(11, 16), Fraction(9, 16))
    assert PAPER.epsilon_inf == pytest.approx(4 * math.log(3), abs=1e-15)
    assert PAPER.epsilon_1 == pytest.approx(1.0742858641667, abs=1e-12)
    # decode.R's ComputePrivacyGuarantees, transcribed: q2 = .5f(p+q) + (1-f)q, p2 likewise
    f, p, q, h = 0.3, 0.25, 0.8, 3
    q2, p2 = 0.5 * f * (p + q) + (1 - f) * q, 0.5 * f * (p + q) + (1 - f) * p
    R = Rappor(k=64, h=h, m=4, f=f, p=p, q=q)
    assert R.epsilon_1 == pytest.approx(h * math.log(q2 * (1 - p2) / (p2 * (1 - q2))), rel=1e-13)
    assert R.epsilon_inf == pytest.approx(2 * h * math.log((1 - 0.5 * f) / (0.5 * f)), rel=1e-13)
    # declared budgets are never below the realized losses (rounded up), and equal them when exact
    for r in (PAPER, R):
        assert r.permanent_loss <= r.epsilon_inf and r.single_report_loss <= r.epsilon_1
    assert PAPER.chunk_bits == 16 and PAPER.prr_probabilities() == (Fraction(3, 4), Fraction(1, 4))
    # the ledger's rule is longitudinal's: a string's first report ε1, its second ε∞ − ε1, then 0
    charges = longitudinal_charges(["a", "a", "a", "b"], PAPER.epsilon_inf, PAPER.epsilon_1)
    assert charges.sum() == pytest.approx(PAPER.epsilon_inf + PAPER.epsilon_1)


def test_cells_round_toward_each_other_and_the_broken_rounding_is_caught() -> None:
    R = Rappor(k=3, h=1, m=1, f=0.3, p=0.3, q=0.7, chunk=16)  # none of f/2, p, q is dyadic at 16 bits
    assert R.permanent_loss < R.epsilon_inf and R.single_report_loss < R.epsilon_1
    good = verify_exact(ReportChannel(R, ((0,), (1,), (2,))))
    assert good.passed, good

    class Outward(Rappor):  # the broken variant: IRR cells rounded away from each other
        @property
        def cells(self) -> tuple[int, int, int, int, int]:  # type: ignore[override]
            t1, t0, _, _, b = Rappor.cells.func(self)  # type: ignore[attr-defined]
            top = 1 << b
            return t1, t0, math.ceil(self.q * top), math.floor(self.p * top), b

    bad = Outward(k=3, h=1, m=1, f=0.3, p=0.3, q=0.7, chunk=16)
    assert bad.single_report_loss > bad.epsilon_1
    audit = verify_exact(ReportChannel(bad, ((0,), (1,), (2,))))
    assert not audit.passed and not audit.within_epsilon


# --- exact audits of the real samplers ---


@pytest.mark.parametrize(
    ("k", "h", "patterns"),
    [(3, 1, ((0,), (1,), (2,))), (4, 2, ((0, 1), (2, 3), (0, 2), (1,)))],
)
def test_one_report_and_the_prr_pass_the_exact_audit_at_their_bounds(k: int, h: int, patterns: tuple[tuple[int, ...], ...]) -> None:
    R = Rappor(k=k, h=h, m=1, f=0.5, p=0.5, q=0.75)
    one = verify_exact(ReportChannel(R, patterns))
    prr = verify_exact(ReportChannel(R, patterns, prr_only=True))
    assert one.passed and prr.passed and one.sampler_consistent and prr.sampler_consistent
    # two disjoint h-bit patterns differ in 2h bits: the bounds are reached exactly
    assert one.max_log_ratio == pytest.approx(R.epsilon_1, rel=1e-12)
    assert prr.max_log_ratio == pytest.approx(R.epsilon_inf, rel=1e-12)


def test_structure_equals_enumeration_for_every_pair() -> None:
    """The loss of a pair of strings is that of the bits where their patterns differ
    (``pair_loss``, any k); at small k it equals the enumerated table's worst ratio."""
    R = Rappor(k=4, h=2, m=2, f=0.5, p=0.25, q=0.75)
    strings = [f"s{i}" for i in range(12)]
    for cohort in range(2):
        pats = sorted({tuple(sorted(set(R.bloom(s, cohort)))) for s in strings})
        for i, a in enumerate(pats):
            for b in pats[i + 1 :]:
                x = next(s for s in strings if tuple(sorted(set(R.bloom(s, cohort)))) == a)
                y = next(s for s in strings if tuple(sorted(set(R.bloom(s, cohort)))) == b)
                audit = verify_exact(ReportChannel(R, (a, b)), check_sampler=False)
                assert audit.max_log_ratio == pytest.approx(R.pair_loss(x, y, cohort), rel=1e-12, abs=1e-12)
                assert R.pair_loss(x, y, cohort) <= R.epsilon_1
    # at the paper's k = 128 every pair's loss is within the bounds (2h bits at most)
    for x, y in zip(strings, strings[1:]):
        assert PAPER.pair_loss(x, y, 3) <= PAPER.epsilon_1
        assert PAPER.pair_loss(x, y, 3, periods=100) <= PAPER.epsilon_inf


def test_memoized_reports_stay_within_eps_inf_and_the_unmemoized_variant_is_caught() -> None:
    R = Rappor(k=2, h=1, m=1, f=0.5, p=0.25, q=0.75)  # ε1 = 2 ln(5/3) ≈ 1.02, ε∞ = 2 ln 3 ≈ 2.20
    pats = ((0,), (1,))
    memo2 = verify_exact(ReportChannel(R, pats, periods=2))  # the sampler fed its cell boundaries
    assert memo2.passed and memo2.sampler_consistent, memo2
    memo6 = verify_exact(ReportChannel(R, pats, periods=6), check_sampler=False)
    assert memo6.passed and memo6.max_log_ratio < R.epsilon_inf
    # broken: f used per report without memoization — 3 reports already lose 3·ε1 > ε∞
    broken = verify_exact(ReportChannel(R, pats, periods=3, memoized=False), check_sampler=False)
    assert not broken.passed
    assert broken.max_log_ratio == pytest.approx(3 * R.single_report_loss, rel=1e-12)


# --- the memo and the cohorts ---


def test_prr_is_memoized_per_user_and_string_and_independent_of_batching() -> None:
    memo = _memo("memo")
    users = np.arange(4000, dtype=np.int64)
    strings = [f"v{u % 7}" for u in users]
    c = cohorts(memo, users, PAPER)
    a = permanent_response(memo, users, strings, c, PAPER)
    rev = slice(None, None, -1)
    b = permanent_response(memo, users[rev], strings[rev], c[rev], PAPER)[rev]  # another order
    half = permanent_response(memo, users[:1000], strings[:1000], c[:1000], PAPER)  # another batch
    assert np.array_equal(a, b) and np.array_equal(a[:1000], half)
    assert np.array_equal(c[:1000], cohorts(memo, users[:1000], PAPER))
    src = RandomSource(4)
    whole = instantaneous_response(a, src.for_request("irr", 0, users), PAPER)
    assert np.array_equal(whole[:1000], instantaneous_response(a[:1000], src.for_request("irr", 0, users[:1000]), PAPER))
    assert not np.array_equal(whole, instantaneous_response(a, src.for_request("irr", 1, users), PAPER))  # a new report: new coins
    # a new string, a new question or a new memo key: fresh coins
    other = permanent_response(memo, users, [s + "!" for s in strings], c, PAPER)
    asked = permanent_response(memo, users, strings, c, PAPER, question="another")
    for fresh in (other, asked, permanent_response(_memo("other"), users, strings, c, PAPER)):
        assert not np.array_equal(a, fresh)


def test_cohorts_and_prr_bits_have_their_laws() -> None:
    """Seeded z-tests at 5 standard deviations (false alarm ≈ 6·10^-7 each)."""
    memo = _memo("laws")
    n = 40_000
    users = np.arange(n, dtype=np.int64)
    c = cohorts(memo, users, PAPER)
    counts = np.bincount(c, minlength=PAPER.m)
    assert np.all(np.abs(counts - n / 64) < 5 * math.sqrt(n / 64))
    prr = np.unpackbits(permanent_response(memo, users, ["x"] * n, c, PAPER), axis=1).astype(bool)
    pos = np.array([PAPER.bloom("x", int(j)) for j in c])
    own = np.zeros_like(prr)
    own[np.arange(n)[:, None], pos] = True
    for mask, rate in ((own, 0.75), (~own, 0.25)):
        x = prr[mask]
        assert abs(x.mean() - rate) < 5 * math.sqrt(rate * (1 - rate) / x.size)


def test_bloom_estimates_are_unbiased_within_their_sd() -> None:
    """t̂ per (cohort, bit) against the true fraction: the largest |z| over m·k = 512 cells stays
    below 4.5 (false alarm ≈ 512 · 6.8·10^-6 ≈ 0.35%). Broken: the estimator without the PRR's
    f (q* − p* replaced by q − p) fails the same test (|z| ≈ 7 here)."""
    R = Rappor(k=64, h=2, m=8, f=0.5, p=0.5, q=0.75)
    n = 60_000
    users = np.arange(n, dtype=np.int64)
    strings = [f"s{u % 5}" for u in users]
    memo = _memo("unbiased")
    c = cohorts(memo, users, R)
    y = instantaneous_response(permanent_response(memo, users, strings, c, R), RandomSource(3).for_request("irr", 0, users), R)
    counts, N = bloom_counts(y, c, R)
    t, sd = estimate_bloom(counts, N, R)
    truth = np.zeros((R.m, R.k))
    for j in range(R.m):
        for s in set(strings):
            share = np.mean([strings[u] == s for u in np.nonzero(c == j)[0]])
            for i in set(R.bloom(s, j)):
                truth[j, i] += share
    assert np.max(np.abs(t - truth) / sd) < 4.5
    no_f = (counts / N[:, None] - 0.5) / (0.75 - 0.5)  # broken: ignores the PRR
    assert np.max(np.abs(no_f - truth) / sd) > 4.5  # the same test fails it


# --- the decoder ---


def test_decoder_finds_the_top_candidates_and_rejects_absent_ones() -> None:
    """Zipf(1.1) over 30 listed strings, 5% of users hold unlisted strings, 20 listed decoys
    nobody holds; n = 2·10^5, k = 128, h = 2, m = 8. Bonferroni at α = 0.05 over the 50
    candidates: a decoy is detected in about 5% of seeds (the false-alarm rate of the last
    assertion on the decoys). Broken: decoding with the wrong f (0.25 for 0.5) fails that assertion."""
    R = Rappor(k=128, h=2, m=8, f=0.5, p=0.5, q=0.75)
    n = 200_000
    listed = [f"site-{i}" for i in range(30)]
    decoys = [f"decoy-{i}" for i in range(20)]
    w = 1.0 / np.arange(1, 31) ** 1.1
    w /= w.sum()
    rng = generator(5, "rappor decoder")
    held = np.array(listed, dtype=object)[rng.choice(30, n, p=w)]
    unlisted = rng.random(n) < 0.05
    held[unlisted] = np.array([f"other-{i}" for i in range(200)], dtype=object)[rng.integers(0, 200, int(unlisted.sum()))]
    users = np.arange(n, dtype=np.int64)
    memo = _memo("decoder")
    c = cohorts(memo, users, R)
    y = instantaneous_response(permanent_response(memo, users, list(held), c, R), RandomSource(5).for_request("irr", 0, users), R)
    counts, N = bloom_counts(y, c, R)
    out = decode(counts, N, listed + decoys, R)
    truth = np.array([(held == s).mean() for s in listed] + [0.0] * 20)
    assert out.detected[:5].all()
    assert not out.detected[30:].any()
    top = np.argmax(truth)
    assert abs(out.frequencies[top] - truth[top]) < 0.02
    wrong = decode(counts, N, listed + decoys, Rappor(k=128, h=2, m=8, f=0.25, p=0.5, q=0.75))
    assert wrong.detected[30:].any()  # the decoy assertion above fails: it detects all 20 here


# --- the longitudinal attack ---


def test_t100_reports_of_one_value_decode_no_better_than_eps_inf_allows() -> None:
    """2000 users each hold one of 10 candidates (uniform) and send T = 100 reports. The optimal
    decoder (``decode_repeated``) is bounded by e^ε∞/(e^ε∞ + 9) = 0.9 for memoized reports; the
    broken variant (a fresh PRR every period) is decoded far above it. Seeded; the memoized
    accuracy is far below the bound (margin > 10 sd), so the false-alarm rate is negligible."""
    R = Rappor(k=128, h=2, m=4, f=0.5, p=0.5, q=0.75)
    cands = [f"c{i}" for i in range(10)]
    n, T = 2000, 100
    users = np.arange(n, dtype=np.int64)
    truth = generator(9, "attack").integers(0, 10, n)
    strings = [cands[v] for v in truth]
    memo = _memo("attack")
    c = cohorts(memo, users, R)
    prr = permanent_response(memo, users, strings, c, R)
    src = RandomSource(9)
    acc = {}
    for memoized in (True, False):
        counts = np.zeros((n, R.k), dtype=np.int64)
        for t in range(T):
            base = prr if memoized else permanent_response(memo, users, strings, c, R, question=f"period {t}")
            counts += np.unpackbits(instantaneous_response(base, src.for_request("irr", t, users), R), axis=1, count=R.k)
        acc[memoized] = float((decode_repeated(counts, T, c, cands, R, memoized=memoized) == truth).mean())
    bound = math.exp(R.epsilon_inf) / (math.exp(R.epsilon_inf) + 9)
    assert acc[True] + 4 * math.sqrt(0.25 / n) < bound
    assert acc[False] > bound + 4 * math.sqrt(0.25 / n)  # the bound's assertion fails on it


def test_parameter_errors_are_one_line() -> None:
    for kwargs in (dict(p=0.75, q=0.5), dict(f=0.0), dict(f=1.0), dict(k=1), dict(h=0), dict(m=0), dict(chunk=8)):
        args = dict(k=16, h=2, m=2, f=0.5, p=0.5, q=0.75) | kwargs
        with pytest.raises(ParameterError) as e:
            Rappor(**args)  # type: ignore[arg-type]
        assert "\n" not in str(e.value)
    R = Rappor(k=4, h=1, m=1, f=0.5, p=0.5, q=0.75)
    with pytest.raises(ParameterError, match="at most 0.8"):
        decode(np.zeros((1, 4), dtype=np.int64), np.array([10]), [f"c{i}" for i in range(4)], R)
