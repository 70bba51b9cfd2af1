"""Exact law of the RecConcave *sampler* (BNS §3.3, Fig. 5, Lemma 3.12) by enumerating its execution paths.

``test_learners.py`` audits ``rec_concave_distribution`` — a second, hand-written account of the recursion —
and links it to ``rec_concave`` only statistically (6σ + 1e-3 per cell over 20 000 draws), so a sampler
that ran a step at the wrong ε could hide behind that tolerance.

Here the sampler's own law is computed exactly. Its three sources of randomness are replaced by stand-ins
that, instead of drawing, *branch*: ``exponential_mechanism(scores, ε', rng)`` branches on every index with
its exact probability at the ε' the code passed; ``a_dist(scores, ε', δ', rng)`` on {best, ⊥} with the
exact pass probability of A_dist at (ε', δ') (its own law, audited in ``test_mechanisms.py``); and
``rng.integers(lo, hi)`` on every value, uniformly. A depth-first search over the branch choices visits
every execution path once; each path's probability is the product of its branches, and its output is
what the code returned. The result must equal ``rec_concave_distribution`` (to 1e-12), so the exact
(3Nε, 3Nδ) audit in ``test_learners.py`` is an audit of the sampler; and on a crafted neighbouring pair
(two near-tied maxima in different intervals, T = 64, N = 2) its δ at 3Nε is computed here directly.

The stand-ins also record the (ε', δ') of every private step on every path: Lemma 3.12 accounts each
level's steps at (ε, δ), so every recorded step must be exactly that.

Broken variants, each the real source with one constant changed, are caught by both checks: the final
exponential step at 2ε (its law is off the audited one by at most 5.4e-5 per cell, below the statistical
test's 1e-3 tolerance) and A_dist on the first partition at 2.5ε (off by 2.1e-4). On the crafted pair their
δ(3Nε) stays 0 like the sampler's (max log-ratio 0.519 and 0.562 against 0.515: the 3Nε budget of Lemma
3.12 is loose there), which is why the checks are per step and on the law, not on the end-to-end δ alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ldp.central.rec_concave as rc_module
from ldp.central.privacy_checks import symmetric_delta
from ldp.central.rec_concave import rec_concave_distribution
from ldp.central.stability import a_dist_pass_probability, top_two
from ldp.core.exponential_mechanism import exponential_probabilities
from tests.central.mutants import mutant_namespace

T, ALPHA, EPS, DELTA, N_LEVELS = 64, 0.25, 0.5, 0.01, 2


class _Brancher:
    """Replays a prefix of branch choices, then takes the first positive branch; records every branch."""

    def __init__(self, prefix: list[int]) -> None:
        self.prefix = prefix
        self.trace: list[tuple[list[tuple[Any, float]], int]] = []

    def choose(self, options: list[tuple[Any, float]]) -> Any:
        options = [(v, p) for v, p in options if p > 0.0]
        assert options, "a random step with no possible outcome"
        k = len(self.trace)
        idx = self.prefix[k] if k < len(self.prefix) else 0
        self.trace.append((options, idx))
        return options[idx][0]

    # generator stand-in: only ``integers`` is expected from rec_concave itself
    def integers(self, low: int, high: int) -> int:
        return int(self.choose([(v, 1.0 / (high - low)) for v in range(low, high)]))

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"rec_concave used rng.{name}; the path enumeration knows only integers")


def _emitted_law(ns: dict[str, Any], Q: np.ndarray, r: float) -> tuple[np.ndarray, set[tuple[str, float, float]]]:
    """Exact output law of ``ns['rec_concave'](Q, r, ALPHA, EPS, DELTA, N_LEVELS, rng)`` by path enumeration,
    and the (step, ε', δ') of every private step the code ran on any path."""
    saved = {k: ns[k] for k in ("exponential_mechanism", "a_dist")}
    current: list[_Brancher] = []
    steps: set[tuple[str, float, float]] = set()

    def em(scores: Any, epsilon: float, rng: Any, **kw: Any) -> int:
        assert rng is current[0]
        steps.add(("exponential_mechanism", float(epsilon) * 2 * kw.get("exponent_scale", 0.5), 0.0))
        p = exponential_probabilities(scores, epsilon, **kw)
        return int(current[0].choose(list(enumerate(p.tolist()))))

    def ad(scores: Any, epsilon: float, delta: float, rng: Any, **kw: Any) -> int | None:
        assert rng is current[0]
        steps.add(("a_dist", float(epsilon), float(delta)))
        i1, s1, s2 = top_two(scores, **kw)
        if not np.isfinite(s2):
            return i1
        p = float(a_dist_pass_probability(s1 - s2, epsilon, delta))
        return current[0].choose([(i1, p), (None, 1.0 - p)])  # type: ignore[no-any-return]

    ns["exponential_mechanism"], ns["a_dist"] = em, ad
    law = np.zeros(Q.size)
    try:
        stack: list[list[int]] = [[]]
        while stack:
            prefix = stack.pop()
            b = _Brancher(prefix)
            current[:] = [b]
            out = ns["rec_concave"](Q, r, ALPHA, EPS, DELTA, N_LEVELS, b)
            prob = 1.0
            for options, idx in b.trace:
                prob *= options[idx][1]
            law[int(out)] += prob
            chosen = [idx for _, idx in b.trace]
            for k in range(len(prefix), len(b.trace)):  # every alternative branch after the replayed prefix
                for alt in range(1, len(b.trace[k][0])):
                    stack.append(chosen[:k] + [alt])
    finally:
        ns.update(saved)
    return law, steps


def _thresh_quality(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Q(j) = #{i : 1[x_i < j] = y_i} for thresholds j = 0..T (BNS THRESH quality)."""
    j = np.arange(T + 1)[:, None]
    return ((x[None, :] < j) == (y[None, :] == 1)).sum(1).astype(float)


def _crafted_pair() -> tuple[np.ndarray, np.ndarray, float]:
    """Two near-tied maxima in different intervals (pos@10, neg@11, pos@40, neg@41), one example replaced."""
    c = 30
    x = np.array([10] * c + [11] * c + [40] * c + [41] * c)
    y = np.array([1] * c + [0] * c + [1] * c + [0] * c, dtype=np.int8)
    x2, y2 = x.copy(), y.copy()
    x2[3], y2[3] = 40, 1
    return _thresh_quality(x, y), _thresh_quality(x2, y2), float(4 * c)


def _mutant(old: str, new: str) -> dict[str, Any]:
    """The module's namespace with ``rec_concave`` recompiled from its real source, ``old`` → ``new``."""
    return mutant_namespace(rc_module, rc_module.rec_concave, old, new)


def test_rec_concave_sampler_law_is_the_audited_one_and_private() -> None:
    Q, Q2, r = _crafted_pair()
    (P, steps), (P2, steps2) = _emitted_law(vars(rc_module), Q, r), _emitted_law(vars(rc_module), Q2, r)
    # Lemma 3.12's accounting: every private step of every level runs at (ε, δ) — or (ε, 0) for ExpMech.
    assert steps | steps2 == {("exponential_mechanism", EPS, 0.0), ("a_dist", EPS, DELTA)}
    assert P.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(P, rec_concave_distribution(Q, r, ALPHA, EPS, DELTA, N_LEVELS), rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(P2, rec_concave_distribution(Q2, r, ALPHA, EPS, DELTA, N_LEVELS), rtol=1e-9, atol=1e-14)
    assert float(symmetric_delta(P, P2, 3 * N_LEVELS * EPS)) <= 3 * N_LEVELS * DELTA  # BNS Lemma 3.12


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("exponential_mechanism(q[cand], eps, rng)", "exponential_mechanism(q[cand], 2 * eps, rng)"),
        ("a_dist(_interval_max(Qp, A), eps, dlt, rng)", "a_dist(_interval_max(Qp, A), 2.5 * eps, dlt, rng)"),
    ],
)
def test_rec_concave_broken_sampler_is_caught(old: str, new: str) -> None:
    Q, _, r = _crafted_pair()
    P, steps = _emitted_law(_mutant(old, new), Q, r)
    assert abs(P.sum() - 1.0) < 1e-12
    assert steps != {("exponential_mechanism", EPS, 0.0), ("a_dist", EPS, DELTA)}  # a step overspends
    assert not np.allclose(P, rec_concave_distribution(Q, r, ALPHA, EPS, DELTA, N_LEVELS), rtol=1e-6, atol=1e-9)
