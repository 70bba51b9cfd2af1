"""Report-noisy-max: the noise scale the sampler REALLY uses must make it ε-DP (replace-one neighbours).

A planted bug — ``report_noisy_max`` drawing Lap(1/(εn)) instead of Lap(2/(εn)) — survived the suite,
because the exact privacy check in ``test_large_margin.py`` feeds ``report_noisy_max_distribution`` a
scale written in the test, never the one the sampler draws with.

Here the check is tied to the code: a stand-in for the generator records every ``laplace`` call made
during real runs of the mechanism, the test replays each output as argmax(scores + recorded noise), and
the privacy loss is computed exactly (quadrature, ``report_noisy_max_distribution``) at the recorded
scale, in count units, over replace-one neighbours (one score down 1/n, another up 1/n). No statistics:
every check is deterministic. The broken variant (a copy with the textbook scale) must fail the same
audit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldp.central.large_margin import report_noisy_max, report_noisy_max_distribution
from ldp.central.privacy_checks import max_log_ratio

# Count vectors (K = 3): ties, near-ties, clear winners. Their replace-one neighbours are generated below.
_BASES = ([0, 0, 0], [1, 0, 0], [1, 1, 0], [2, 1, 0], [3, 0, 0], [4, 4, 4], [6, 5, 0], [10, 2, 1])


class _LaplaceSpy:
    """Stands in for the ``np.random.Generator`` given to the mechanism.

    ``laplace`` is forwarded to a seeded generator and every call is recorded as (loc, scale, draw). Any
    other use of the generator fails loudly: the exact model below assumes the only randomness is Laplace
    noise added to the scores.
    """

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self.calls: list[tuple[float, float, np.ndarray]] = []

    def laplace(self, loc=0.0, scale=1.0, size=None):
        draw = self._rng.laplace(loc, scale, size)
        self.calls.append((float(loc), float(scale), np.asarray(draw, dtype=np.float64)))
        return draw

    def __getattr__(self, name: str):
        raise AssertionError(f"the mechanism used rng.{name}; the exact Laplace model does not cover it")


def _recorded_scale(mechanism, n: int, eps: float) -> float:
    """Run ``mechanism(scores, n, ε, rng)`` on every base vector (scores = counts/n) and return the Laplace
    scale it drew with, after checking that the run is exactly argmax_i(f_i + Lap(s)) with one independent
    Laplace(0, s) draw per score and the same s for every database (so one fixed-scale model covers it)."""
    scales = set()
    for seed, counts in enumerate(_BASES):
        f = np.asarray(counts, dtype=np.float64) / n
        spy = _LaplaceSpy(seed)
        out = mechanism(f, n, eps, spy)
        assert len(spy.calls) == 1, f"expected one vector of Laplace noise, got {len(spy.calls)} calls"
        loc, scale, draw = spy.calls[0]
        assert loc == 0.0 and draw.shape == f.shape
        assert out == int(np.argmax(f + draw)), "output is not argmax(scores + the recorded noise)"
        scales.add(scale)
    assert len(scales) == 1, f"data-dependent noise scale {sorted(scales)}"
    return scales.pop()


def _worst_log_ratio(count_scale: float) -> float:
    """Exact max_w |ln P(w) − ln P'(w)| of argmax(c + Lap(count_scale)) over the bases and every
    replace-one neighbour (c_i − 1, c_j + 1)."""
    worst = 0.0
    for counts in _BASES:
        c = np.asarray(counts, dtype=np.float64)
        p = report_noisy_max_distribution(c, count_scale)
        for i in range(c.size):
            for j in range(c.size):
                if i != j:
                    c2 = c.copy()
                    c2[i] -= 1
                    c2[j] += 1
                    worst = max(worst, max_log_ratio(p, report_noisy_max_distribution(c2, count_scale)))
    return worst


def _audit(mechanism, n: int, eps: float) -> float:
    """Exact privacy loss of what ``mechanism`` really does: the recorded scale s in score units is the
    scale n·s in count units (scores are counts/n)."""
    return _worst_log_ratio(_recorded_scale(mechanism, n, eps) * n)


def _rnm_textbook_scale(scores, n: int, epsilon: float, rng) -> int:
    """``report_noisy_max`` with the planted bug: Lap(1/(εn)) — valid only for add/remove neighbours and
    monotone counts, not for replace-one neighbours, where two scores move in opposite directions."""
    f = np.asarray(scores, dtype=np.float64).ravel()
    return int(np.argmax(f + rng.laplace(0.0, 1.0 / (epsilon * n), size=f.shape)))


def test_distribution_used_by_the_audit_is_exact() -> None:
    """The quadrature against closed forms. K = 2: c_1 + L_1 > c_2 + L_2 with Δ = c_1 − c_2 ≥ 0 has
    probability 1 − ½·e^(−Δ/b)·(1 + Δ/(2b)) (the difference of two Lap(b) has density
    (1 + |t|/b)·e^(−|t|/b)/(4b)). K = 3 with equal counts: 1/3 each."""
    for b in (0.5, 1.0, 2.0, 4.0):
        for delta in (0.0, 0.3, 1.0, 2.5, 7.0):
            p = report_noisy_max_distribution([delta, 0.0], b)
            exact = 1.0 - 0.5 * math.exp(-delta / b) * (1.0 + delta / (2.0 * b))
            assert p[0] == pytest.approx(exact, abs=1e-8)
            assert p.sum() == pytest.approx(1.0, abs=1e-12)
        assert report_noisy_max_distribution([1.0, 1.0, 1.0], b) == pytest.approx([1 / 3] * 3, abs=1e-9)


@pytest.mark.parametrize("n, eps", [(20, 0.5), (100, 1.0), (1000, 2.0)])
def test_report_noisy_max_real_scale_is_eps_dp_and_textbook_scale_is_caught(n: int, eps: float) -> None:
    real = _audit(report_noisy_max, n, eps)
    assert real <= eps + 1e-6  # measured 0.8964·ε at ε = 1 (scale 2/ε in count units)
    # The planted bug, run through the same audit, must be rejected (measured 1.89·ε at ε = 1).
    broken = _audit(_rnm_textbook_scale, n, eps)
    assert broken > eps + 0.1 * eps, f"the audit failed to catch Lap(1/(εn)): loss {broken} vs ε = {eps}"


def test_audit_sees_the_scale_of_the_real_sampler(monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit reads the scale from the real code path, not from a constant: making the real
    ``report_noisy_max`` run at twice its ε (its ε validator patched to double the value, so it draws
    Lap(1/(εn))) halves the recorded scale, and the same audit rejects it."""
    from ldp.central import large_margin

    n, eps = 100, 1.0
    honest = _recorded_scale(report_noisy_max, n, eps)
    real_check = large_margin.require_epsilon
    monkeypatch.setattr(large_margin, "require_epsilon", lambda e: 2.0 * real_check(e))
    assert _recorded_scale(report_noisy_max, n, eps) == pytest.approx(honest / 2.0, rel=1e-12)
    assert _audit(report_noisy_max, n, eps) > eps + 0.1 * eps
