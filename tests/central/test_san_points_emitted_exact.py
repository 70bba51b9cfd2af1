"""Exact privacy of SanPoints (BNS §4.2, Fig. 9, Thm 4.6) *as the sampler runs*, by path enumeration.

``test_sanitizers.py`` audits a transcript model written in the test (its own loop over rounds, its own
masking of chosen points, its own α/2 and ε1); nothing ties it to ``san_points``. Here ``san_points`` itself
runs, with its randomness replaced by stand-ins that branch instead of drawing:

* ``choosing_mechanism(scores, m, α', ε', δ', rng)`` branches on ⊥ and every index with the exact law
  ``choosing_distribution(scores, m, α', ε')`` at the arguments the code passed (that this is the law the
  Choosing sampler emits is checked exactly in ``test_choosing_exact.py``);
* ``rng.laplace(loc, scale)`` is recorded (scale) and returns ``loc``: the released values are the counts
  plus independent Lap(scale) noise, whose privacy is accounted analytically below.

A depth-first search visits every execution path once. The output law of the released point *sequence* is
exact; a replacement moves ≤ 2 counts by 1, so with the recorded Laplace scale b the full output satisfies
δ_seq(ε) ≤ δ(ε) ≤ e^{2/b}·δ_seq(ε − 2/b). Checks, at α = 0.4 (5 rounds), ε = 1, δ = 0.1, m = the Choosing
minimum (17,102), on count vectors with points around the Choosing threshold and a 0/1 singleton:

* the upper bound on δ(ε) ≤ δ (measured 7.2e-11);
* the accounting of Thm 4.6 as the code runs: on every path at most ``rounds`` Choosing calls at
  (α/2, ε1, δ1) and at most ``rounds`` Laplace releases at scale 1/ε1 — 2·rounds mechanisms that advanced
  composition (δ' = δ/5) must bring to ≤ (ε, δ).

Broken variants (the real source, one change each) are caught by the accounting — neither moves δ(ε) above
δ on this family (measured 8e-11 and 2e-21), so δ alone would not: the Laplace count at scale 1/(2ε1), and
Choosing at α instead of α/2. Branches of probability < 1e-40 are not followed; their mass (≤ 1e-74 here)
is added to the bound. The exponent ``2/b`` uses the smallest recorded Laplace scale.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import ldp.central.sanitizers as san_module
from ldp.central.choosing import choosing_distribution
from ldp.central.privacy_checks import delta_at_epsilon
from ldp.central.sanitizers import san_points_parameters
from tests.central.mutants import mutant_namespace

ALPHA, BETA, EPS, DELTA = 0.4, 0.1, 1.0, 0.1
PRM = san_points_parameters(ALPHA, BETA, EPS, DELTA)
M = PRM.min_m
PRUNE = 1e-40
"""Branches below this probability are not followed; their mass is added to δ (so the bound stays rigorous)."""


class _Brancher:
    """Replays a prefix of branch choices, then takes the first branch; records branches and private steps."""

    def __init__(self, prefix: list[int]) -> None:
        self.prefix = prefix
        self.trace: list[tuple[list[tuple[Any, float]], int]] = []
        self.steps: list[tuple[Any, ...]] = []
        self.dropped: list[float] = []  # mass of the branches below PRUNE at each step

    def choose(self, options: list[tuple[Any, float]]) -> Any:
        self.dropped.append(sum(p for _, p in options if p < PRUNE))
        options = [(v, p) for v, p in options if p >= PRUNE]
        k = len(self.trace)
        idx = self.prefix[k] if k < len(self.prefix) else 0
        self.trace.append((options, idx))
        return options[idx][0]

    def laplace(self, loc: float = 0.0, scale: float = 1.0, size: Any = None) -> float:
        assert size is None
        self.steps.append(("laplace", float(scale)))
        return float(loc)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"san_points used rng.{name}; the path enumeration knows only laplace")


def _emitted(
    ns: dict[str, Any], counts: np.ndarray
) -> tuple[dict[tuple[int, ...], float], float, set[tuple[Any, ...]], int]:
    """(law of the released point sequence, pruned mass, private steps, most steps on one path) of ``san_points``."""
    x = np.repeat(np.arange(counts.size, dtype=np.int64), counts.astype(np.int64))
    saved = ns["choosing_mechanism"]
    current: list[_Brancher] = []

    def choosing_spy(scores: Any, m: int, alpha: float, epsilon: float, delta: float, rng: Any, k: int = 1) -> int | None:
        assert rng is current[0] and k == 1
        rng.steps.append(("choosing", float(alpha), float(epsilon), float(delta)))
        p_bot, probs = choosing_distribution(scores, m, alpha, epsilon)
        return current[0].choose([(None, p_bot)] + [(i, float(p)) for i, p in enumerate(probs)])  # type: ignore[no-any-return]

    ns["choosing_mechanism"] = choosing_spy
    law: dict[tuple[int, ...], float] = {}
    steps: set[tuple[Any, ...]] = set()
    most = 0
    pruned = 0.0
    try:
        stack: list[list[int]] = [[]]
        while stack:
            prefix = stack.pop()
            b = _Brancher(prefix)
            current[:] = [b]
            san = ns["san_points"](x, 8, ALPHA, BETA, EPS, DELTA, b)
            prob = math.prod(opts[i][1] for opts, i in b.trace)
            run = 1.0  # each branch point is new in exactly one run: count its dropped mass there
            for k, ((opts, i), lost) in enumerate(zip(b.trace, b.dropped)):
                if k >= len(prefix):
                    pruned += run * lost
                run *= opts[i][1]
            key = tuple(int(p) for p in san.points)
            law[key] = law.get(key, 0.0) + prob
            steps.update(b.steps)
            most = max(most, len(b.steps))
            chosen = [i for _, i in b.trace]
            for k in range(len(prefix), len(b.trace)):
                for alt in range(1, len(b.trace[k][0])):
                    stack.append(chosen[:k] + [alt])
    finally:
        ns["choosing_mechanism"] = saved
    assert abs(sum(law.values()) + pruned - 1.0) < 1e-9
    return law, pruned, steps, most


def _family() -> list[np.ndarray]:
    thr = int(ALPHA / 2 * M / 2)  # Choosing(α/2)'s ⊥ threshold (α/2)·m/2
    return [np.array([M - b1 - thr - s, b1, thr, s], dtype=float) for b1 in (thr - 300, thr + 300) for s in (0, 1)]


def _audit(ns: dict[str, Any], family: list[np.ndarray]) -> tuple[float, set[tuple[Any, ...]], int]:
    """(worst upper bound on δ(ε), private steps seen, most steps on a path) over replace-one neighbours."""
    worst, steps, most = 0.0, set(), 0
    for c in family:
        P, lost_p, s1, n1 = _emitted(ns, c)
        steps |= s1
        most = max(most, n1)
        for i in range(c.size):
            for j in range(c.size):
                if i == j or c[i] == 0:
                    continue
                c2 = c.copy()
                c2[i] -= 1
                c2[j] += 1
                Q, lost_q, s2, n2 = _emitted(ns, c2)
                steps |= s2
                most = max(most, n2)
                lap = {s[1] for s in steps if s[0] == "laplace"}
                shift = 2.0 / min(lap) if lap else 0.0  # two counts move by 1: density ratio ≤ e^{2/b}
                keys = sorted(set(P) | set(Q))
                p = np.array([P.get(k, 0.0) for k in keys])
                q = np.array([Q.get(k, 0.0) for k in keys])
                up = math.exp(shift) * max(float(delta_at_epsilon(p, q, EPS - shift)), float(delta_at_epsilon(q, p, EPS - shift)))
                up += lost_p + lost_q  # unexplored mass can only add this much
                worst = max(worst, up)
    return worst, steps, most


def _accounting_ok(steps: set[tuple[Any, ...]], most: int) -> bool:
    """Every step at (α/2, ε1, δ1) or Lap(1/ε1), ≤ 2·rounds per path, composing (advanced, δ' = δ/5) to ≤ (ε, δ)."""
    e1, d1 = PRM.epsilon1, PRM.delta1
    want = {("choosing", ALPHA / 2, e1, d1), ("laplace", 1.0 / e1)}
    if not steps <= want or most > 2 * PRM.rounds:
        return False
    k = 2 * PRM.rounds
    eps_total = math.sqrt(2 * k * math.log(5 / DELTA)) * e1 + 2 * k * e1 * e1
    return eps_total <= EPS and k * d1 + DELTA / 5 <= DELTA * (1 + 1e-12)


def _mutant(old: str, new: str) -> dict[str, Any]:
    """The module's namespace with ``san_points`` recompiled from its real source, ``old`` → ``new``."""
    return mutant_namespace(san_module, san_module.san_points, old, new)


def test_san_points_emitted_exact_privacy_and_accounting() -> None:
    assert M == 17_102 and PRM.rounds == 5
    worst, steps, most = _audit(vars(san_module), _family())
    assert worst <= DELTA
    assert worst <= 1e-9  # measured: SanPoints is far inside its δ here
    assert _accounting_ok(steps, most)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("rng.laplace(0.0, 1.0 / prm.epsilon1)", "rng.laplace(0.0, 0.5 / prm.epsilon1)"),
        ("choosing_mechanism(scores, m, alpha / 2.0,", "choosing_mechanism(scores, m, alpha,"),
    ],
)
def test_san_points_broken_variants_caught(old: str, new: str) -> None:
    worst, steps, most = _audit(_mutant(old, new), _family()[:2])
    assert worst <= DELTA  # neither breaks δ on this family (measured 8e-11 and 2e-21) ...
    assert not _accounting_ok(steps, most)  # ... but each overspends a step of Thm 4.6's accounting


def test_san_points_accounting_when_two_over_alpha_is_not_an_integer() -> None:
    """α = 0.45: 5 rounds run 10 mechanisms at (ε1, δ1). Sized for [RECON-M]'s 4/α = 8.9 mechanisms
    (the broken variant, recomputed below), the composed δ was 10·δ1 + δ/5 = 0.11 > δ = 0.1; sized
    for the k = 2⌈2/α⌉ = 10 that run, it is exactly δ, and ε stays inside."""
    recon_delta1 = 0.45 * DELTA / 5.0  # [RECON-M]'s δ1 = αδ/5
    assert 10 * recon_delta1 + DELTA / 5 > DELTA * 1.05
    prm = san_points_parameters(0.45, BETA, EPS, DELTA)
    k = 2 * prm.rounds
    assert k * prm.delta1 + DELTA / 5 <= DELTA * (1 + 1e-12)
