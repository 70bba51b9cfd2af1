"""Exact privacy audit of the Large Margin Mechanism (CHS Algorithm 1, Theorem 2) at the parameters the
sampler *really* uses.

``test_large_margin.py`` audits ``lmm_distribution``, a quadrature written beside the sampler with the noise
scales 3/ε, 6/ε, 12/ε and the exponential step exp(n·ε·f/6) typed in again; the only link to
``large_margin_mechanism`` is a statistical comparison on scores whose top item wins almost surely, so a
sampler whose exponential step ran at ε instead of ε/3 would pass it.

Here every run of the sampler goes through stand-ins that record what it draws with: the generator's
``laplace`` calls (the scale of the noisy maximum, of G and of the Z_ℓ) and the arguments given to
``exponential_mechanism`` (its ε, its exponent scale and the scores, whose ratio to f is the sensitivity
scaling n). The exact law is then computed at *those* parameters by 1-D quadrature over W = L₁ − G (the margin
test passes at ℓ iff Z_ℓ < W + n(f⁽¹⁾ − f⁽ℓ⁺¹⁾ − T(ℓ)), as in ``lmm_distribution``; error ≲ 1e-9), and
audited over replace-one neighbours (one count −1, another +1) of K = 3 histograms of n = 300 records at
ε = 1, δ = 0.05:

* δ(ε) ≤ δ (CHS Theorem 2; measured 0 to rounding on this family — LMM is conservative);
* the exponential step over all K items (ℓ = K) loses ≤ ε/3, its share of the budget (measured ε/3);
* the law's pure loss ≤ ε (measured 0.556ε). This is not the theorem (LMM is (ε, δ)-DP) but holds on this
  family, where the margin test never flips with non-negligible probability.

Broken variants, each the real source with one constant changed, must fail: the exponential step at ε
instead of ε/3 (step 1.00ε, pure loss 1.22ε — its δ(ε) stays ≈ 1e-16, so δ(ε) alone would not catch it)
and the step with ``exponent_scale=1`` (step 0.67ε). A noisy maximum at Lap(1/ε) instead of Lap(3/ε) moves
the pure loss only to 0.558ε; it is caught by the parameter check (the recorded scales must be 3/ε, 6/ε,
12/ε). No statistics: the stand-ins only record, so the audit is deterministic.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ldp.central.large_margin as lmm_module
from ldp.central.laplace_mechanism import laplace_cdf
from ldp.central.large_margin import lmm_T
from ldp.central.privacy_checks import max_log_ratio, symmetric_delta
from ldp.core.exponential_mechanism import exponential_probabilities
from tests.central.mutants import mutant_namespace

N, EPS, DELTA = 300, 1.0, 0.05


class _Recorder:
    """Generator stand-in: forwards ``laplace`` to a seeded generator and records (scale, size) of each call."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self.laplace_calls: list[tuple[float, float, Any]] = []

    def laplace(self, loc: float = 0.0, scale: float = 1.0, size: Any = None) -> Any:
        self.laplace_calls.append((float(loc), float(scale), size))
        return self._rng.laplace(loc, scale, size)

    def __getattr__(self, name: str) -> Any:  # gumbel etc.: used by the exponential step, forwarded
        return getattr(self._rng, name)


def _emitted_parameters(ns: dict[str, Any], f: np.ndarray) -> dict[str, float]:
    """Run ``ns['large_margin_mechanism']`` once and read off its noise scales and exponential-step law."""
    em_calls: list[dict[str, Any]] = []
    real_em = ns["exponential_mechanism"]

    def em_spy(scores: Any, epsilon: float, rng: Any, **kw: Any) -> int:
        em_calls.append({"scores": np.array(scores, dtype=np.float64), "epsilon": float(epsilon), **kw})
        return int(real_em(scores, epsilon, rng, **kw))

    ns["exponential_mechanism"] = em_spy
    try:
        rec = _Recorder(7)
        ns["large_margin_mechanism"](f, N, EPS, DELTA, rec)
    finally:
        ns["exponential_mechanism"] = real_em
    calls = rec.laplace_calls
    assert len(calls) >= 3 and calls[0][2] is None and calls[1][2] is None
    assert all(c[0] == 0.0 for c in calls)
    bz = {c[1] for c in calls[2:]}
    assert len(bz) == 1, "one scale for every Z_ℓ"
    (em,) = em_calls
    fs = np.sort(f)[::-1][: em["scores"].size]
    mult = em["scores"] / fs
    assert np.allclose(mult, mult[0]), "exponential-step scores must be a fixed multiple of f"
    assert em.get("tail_size", 0) == 0 and "sensitivity" not in em
    # Pr ∝ exp(exponent_scale · ε_em · scores) = exp(rate · f)
    rate = em.get("exponent_scale", 0.5) * em["epsilon"] * float(mult[0])
    return {"b1": calls[0][1], "b2": calls[1][1], "bz": bz.pop(), "rate": rate}


def _law(f: np.ndarray, prm: dict[str, float]) -> np.ndarray:
    """Exact Pr[I = i] of LMM with the recorded parameters (quadrature over W = L₁ − G, as lmm_distribution)."""
    b1, b2, bz, rate = prm["b1"], prm["b2"], prm["bz"], prm["rate"]
    K = f.size
    order = np.argsort(-f, kind="stable")
    fs = f[order]
    w = np.linspace(-80.0 * max(b1, b2), 80.0 * max(b1, b2), 20_001)
    dens = (b1 * np.exp(-np.abs(w) / b1) - b2 * np.exp(-np.abs(w) / b2)) / (2.0 * (b1 * b1 - b2 * b2))
    dens = dens / dens.sum()
    c = N * (fs[0] - fs[1:] - lmm_T(np.arange(1, K, dtype=np.float64), N, EPS, DELTA))
    survive = np.ones_like(w)
    p_sorted = np.zeros(K)
    for r in range(1, K + 1):
        if r < K:
            pr = laplace_cdf(w + c[r - 1], bz)
            p_ell = float(np.sum(dens * survive * pr))
            survive = survive * (1.0 - pr)
        else:
            p_ell = float(np.sum(dens * survive))
        # exp(rate·f) = exponential_probabilities(f, ε=rate, exponent_scale=1)
        p_sorted[:r] += p_ell * exponential_probabilities(fs[:r], rate, exponent_scale=1.0)
    out = np.zeros(K)
    out[order] = p_sorted
    return out


def _family() -> list[np.ndarray]:
    """K = 3 histograms of N records: ties, near-ties, and gaps around the margin threshold n·T(1) ≈ 123."""
    out = []
    for g1 in (0, 1, 2, 5, 60, 120, 125, 150):
        for g2 in (0, 1, 30):
            c1 = (N + 2 * g1 + g2) // 3 + 1
            c2 = c1 - g1
            c3 = N - c1 - c2
            if 0 <= c3 <= c2:
                out.append(np.array([c1, c2, c3], dtype=float))
    return out


def _audit(ns: dict[str, Any]) -> tuple[float, float, float]:
    """(worst pure loss, worst symmetric δ(ε), worst loss of the exponential step over all K items) on the family."""
    pure = dlt = stage = 0.0
    for c in _family():
        pp = _emitted_parameters(ns, c / N)
        p = _law(c / N, pp)
        for i in range(3):
            for j in range(3):
                if i == j or c[i] == 0:
                    continue
                c2 = c.copy()
                c2[i] -= 1
                c2[j] += 1
                qp = _emitted_parameters(ns, c2 / N)
                q = _law(c2 / N, qp)
                pure = max(pure, max_log_ratio(p, q))
                dlt = max(dlt, float(symmetric_delta(p, q, EPS)))
                em_p = exponential_probabilities(c / N, pp["rate"], exponent_scale=1.0)
                em_q = exponential_probabilities(c2 / N, qp["rate"], exponent_scale=1.0)
                stage = max(stage, max_log_ratio(em_p, em_q))
    return pure, dlt, stage


def _mutant(old: str, new: str) -> dict[str, Any]:
    """The module's namespace with ``large_margin_mechanism`` recompiled from its real source, ``old`` → ``new``."""
    return mutant_namespace(lmm_module, lmm_module.large_margin_mechanism, old, new)


def test_lmm_emitted_parameters_are_the_audited_ones() -> None:
    prm = _emitted_parameters(vars(lmm_module), np.array([150.0, 30.0, 20.0]) / N)
    expected = {"b1": 3.0 / EPS, "b2": 6.0 / EPS, "bz": 12.0 / EPS, "rate": N * EPS / 6.0}
    assert prm == pytest.approx(expected)
    broken = _mutant("rng.laplace(0.0, 3.0 / eps)", "rng.laplace(0.0, 1.0 / eps)")  # noisy max at Lap(1/ε)
    assert _emitted_parameters(broken, np.array([150.0, 30.0, 20.0]) / N) != pytest.approx(expected)


def test_lmm_exact_privacy_of_emitted_law_and_mutants_caught() -> None:
    pure, dlt, stage = _audit(vars(lmm_module))
    assert dlt <= DELTA  # CHS Theorem 2
    assert stage <= EPS / 3 + 1e-9  # the exponential step's share (measured ε/3)
    assert pure <= EPS  # holds on this family (measured 0.556ε), not a theorem: LMM is (ε, δ)-DP
    # Broken: the exponential step at ε instead of ε/3 (measured: stage 1.00ε, pure 1.22ε, δ(ε) ≈ 1e-16).
    m_pure, _, m_stage = _audit(_mutant("eps / 3.0, rng", "eps, rng"))
    assert m_stage > EPS / 3 + 0.5 * EPS and m_pure > EPS
    # Broken: the step at ε/3 with exponent_scale=1, i.e. exp(n·ε·f/3) (measured: stage 0.67ε, pure 0.89ε).
    _, _, m2_stage = _audit(_mutant("eps / 3.0, rng, tail_size", "eps / 3.0, rng, exponent_scale=1.0, tail_size"))
    assert m2_stage > EPS / 3 + 0.2 * EPS
