"""Exact privacy audit of the Choosing Mechanism (BNS §4.1, Fig. 8, Lemma 4.4) *as the code emits it*.

A planted bug — the exponential step drawn at ``exp(ε·q/2)`` instead of ``exp(ε·q/4)`` — survived the
suite: ``test_mechanisms.py`` audits :func:`choosing_distribution`, a formula written beside the sampler,
never the weights :func:`choosing_mechanism` draws with.

Here the law is read off the sampler itself. A stand-in generator hands ``choosing_mechanism`` a chosen
Laplace draw and records the scale it asked for; a stand-in for ``gumbel_argmax`` records the log-weights
it is given and returns a chosen index. From that, with no statistics:

* Pr[⊥] = F_Lap(t*) at the recorded scale, where t* (the draw below which the code answers ⊥) is found by
  bisection on the draw handed in, so the threshold α·m/2 − max q is the code's, not the test's;
* Pr[f] = (1 − Pr[⊥]) · softmax(recorded log-weights)[j], where f is the index the code returns when the
  stand-in picks j (every j is tried).

Everything is kept in log space (tails near e^−100 stay exact). The audit runs over replace-one neighbours
(one count −1, another +1, possibly a fresh element) of structured count vectors summing to m = the
Lemma 4.4 minimum: few large counts around and far above the ⊥ threshold α·m/2, filled up with ties or
singletons. Lemma 4.4's proof composes Lap(4/ε) on a sensitivity-1 maximum (ε/4) with ExpMech(ε/2) over
G(S) (ε/2), so on outputs that both neighbours can emit the exact loss must be ≤ 3ε/4 (measured 0.500ε at ε = 1 and 2),
and the exponential step alone (the law given ⊤, when G(S) is unchanged) ≤ ε/2 (measured 0.500ε). The
broken variant, built from the real source with ``eps / 4.0`` → ``eps / 2.0``, measures 1.000ε for both:
both checks catch it. Its overall loss reaches ε but not beyond (to rounding): the two factors ``e^{ε/2}``
of the score and of the normaliser need the decreasing count to carry the normaliser, which then keeps the
⊤ probability from rising — so a check at ε alone could not catch it; the proof's per-step budgets can.
Exact δ(ε) on this family: ≤ 2e-9 for both (the fresh-element event is negligible at the minimum m).
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import ldp.central.choosing as choosing_module
from ldp.central.choosing import choosing_distribution, choosing_min_sample_size
from ldp.central.privacy_checks import delta_at_epsilon
from tests.central.mutants import mutant_namespace

ALPHA, DELTA = 0.4, 1e-3


class _Stub:
    """Stands in for both the generator and ``gumbel_argmax``: fixed Laplace draw, fixed pick, all recorded."""

    def __init__(self) -> None:
        self.noise = 0.0
        self.pick = 0
        self.laplace_calls: list[tuple[float, float]] = []
        self.log_weights: np.ndarray | None = None

    def laplace(self, loc: float = 0.0, scale: float = 1.0, size: object = None) -> float:
        assert size is None, "the exact model assumes one scalar Laplace draw"
        self.laplace_calls.append((float(loc), float(scale)))
        return float(loc) + self.noise

    def gumbel_argmax(self, log_weights: np.ndarray, rng: object) -> int:
        assert rng is self
        self.log_weights = np.array(log_weights, dtype=np.float64)
        return self.pick

    def __getattr__(self, name: str) -> object:  # any other randomness breaks the exact model: fail loudly
        raise AssertionError(f"choosing_mechanism used rng.{name}; the exact model knows only laplace")


def _mutant_namespace(old: str, new: str) -> dict[str, Any]:
    """The module's namespace with ``choosing_mechanism`` recompiled from its real source, ``old`` → ``new``."""
    return mutant_namespace(choosing_module, choosing_module.choosing_mechanism, old, new)


def _log_laplace_cdf(t: float, scale: float) -> tuple[float, float]:
    """(ln Pr[Lap(scale) < t], ln Pr[Lap(scale) ≥ t]) without cancellation."""
    z = t / scale
    if z < 0:
        return math.log(0.5) + z, math.log1p(-0.5 * math.exp(z))
    return math.log1p(-0.5 * math.exp(-z)), math.log(0.5) - z


def _emitted_log_law(ns: dict[str, object] | ModuleType, scores: np.ndarray, m: int, eps: float) -> dict[object, float]:
    """ln Pr of every output (``None`` = ⊥, else an index) of ``ns.choosing_mechanism`` on ``scores``."""
    ns_dict = vars(ns) if isinstance(ns, ModuleType) else ns
    stub = _Stub()
    saved = ns_dict["gumbel_argmax"]
    ns_dict["gumbel_argmax"] = stub.gumbel_argmax
    try:
        mech = ns_dict["choosing_mechanism"]
        assert callable(mech)

        def run(noise: float, pick: int = 0) -> int | None:
            stub.noise, stub.pick, stub.log_weights = noise, pick, None
            return mech(scores, m, ALPHA, eps, DELTA, stub)  # type: ignore[no-any-return]

        big = 1e6
        if run(big) is None:  # G(S) empty: ⊥ for every draw
            assert run(-big) is None
            return {None: 0.0}
        assert run(-big) is None
        lo, hi = -big, big  # run(lo) is ⊥, run(hi) is not: bisect the code's own threshold
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if mid in (lo, hi):
                break
            if run(mid) is None:
                lo = mid
            else:
                hi = mid
        scales = {s for _, s in stub.laplace_calls}
        assert len(scales) == 1, "one Laplace scale expected"
        log_bot, log_top = _log_laplace_cdf(hi, scales.pop())
        run(big)
        lw = stub.log_weights
        assert lw is not None
        mx = float(lw.max())
        log_soft = lw - (mx + math.log(float(np.exp(lw - mx).sum())))
        law: dict[object, float] = {None: log_bot}
        for j in range(lw.size):
            out = run(big, j)
            assert out is not None and out not in law
            law[out] = log_top + float(log_soft[j])
        return law
    finally:
        ns_dict["gumbel_argmax"] = saved


def _databases(m: int, eps: float) -> list[np.ndarray]:
    """Count vectors summing to m: up to three large counts (around and far above α·m/2), rest ties/singletons."""
    thr = ALPHA * m / 2
    tops = sorted({max(1, int(thr + d)) for d in (-8, -2, 0, 1, 3, 10)} | {m // 2})
    out = []
    for c1 in tops:
        for c2 in (0, 1, c1 - 1, c1):
            for fill in (1, c1, max(1, c1 - 1)):
                if c2 > c1 or c1 + c2 > m:
                    continue
                rest = m - c1 - c2
                k, r = divmod(rest, fill)
                v = [c1] + ([c2] if c2 else []) + [fill] * k + ([r] if r else [])
                out.append(np.array(v + [0], dtype=np.float64))  # a fresh element that a neighbour may fill
    return out


def _neighbours(v: np.ndarray) -> list[np.ndarray]:
    """Replace-one: one unit moves from one element to another (one representative per distinct count)."""
    reps = [int(np.flatnonzero(v == c)[0]) for c in np.unique(v)]
    out = []
    for i in reps:
        for j in reps:
            if i != j and v[i] >= 1:
                w = v.copy()
                w[i] -= 1
                w[j] += 1
                out.append(w)
    return out


def _audit(ns: dict[str, object] | ModuleType, eps: float) -> tuple[float, float, float]:
    """(pure loss on common outputs, loss of the law given ⊤ when G(S) is unchanged, δ(ε)) over the family."""
    m = choosing_min_sample_size(ALPHA, eps, DELTA)
    cache: dict[bytes, dict[object, float]] = {}

    def law(v: np.ndarray) -> dict[object, float]:
        key = v.tobytes()
        if key not in cache:
            cache[key] = _emitted_log_law(ns, v, m, eps)
        return cache[key]

    pure = cond = dlt = 0.0
    for v in _databases(m, eps):
        for w in _neighbours(v):
            p, q = law(v), law(w)
            common = [o for o in p if o in q]
            pure = max(pure, max(abs(p[o] - q[o]) for o in common))
            if set(p) == set(q) and len(p) > 1:
                lp_top = math.log(-math.expm1(p[None]))
                lq_top = math.log(-math.expm1(q[None]))
                cond = max(cond, max(abs((p[o] - lp_top) - (q[o] - lq_top)) for o in p if o is not None))
            outs = list(set(p) | set(q))
            pp = np.array([math.exp(p[o]) if o in p else 0.0 for o in outs])
            qq = np.array([math.exp(q[o]) if o in q else 0.0 for o in outs])
            dlt = max(dlt, float(delta_at_epsilon(pp, qq, eps)), float(delta_at_epsilon(qq, pp, eps)))
    return pure, cond, dlt


@pytest.mark.parametrize("eps", [1.0, 2.0])
def test_choosing_emitted_law_exact_privacy_and_mutant_caught(eps: float) -> None:
    pure, cond, dlt = _audit(choosing_module, eps)
    assert pure <= 0.75 * eps + 1e-9, f"Choosing loses {pure / eps:.3f}ε on common outputs (> 3ε/4)"
    assert cond <= 0.5 * eps + 1e-9, f"its exponential step loses {cond / eps:.3f}ε (> ε/2)"
    assert dlt <= DELTA
    assert pure > 0.45 * eps  # the audit's family reaches the hard cases (measured 0.500ε)

    ns = _mutant_namespace("eps / 4.0 * q[good]", "eps / 2.0 * q[good]")  # broken: exp(ε·q/2)
    m_pure, m_cond, _ = _audit(ns, eps)
    assert m_pure > 0.75 * eps + 0.1 * eps and m_cond > 0.5 * eps + 0.3 * eps


def test_choosing_distribution_matches_emitted_law() -> None:
    """The analysis helper ``choosing_distribution`` (used by the other exact checks) is the sampler's law."""
    eps = 1.0
    m = choosing_min_sample_size(ALPHA, eps, DELTA)
    for v in _databases(m, eps)[::7]:
        law = _emitted_log_law(choosing_module, v, m, eps)
        p_bot, probs = choosing_distribution(v, m, ALPHA, eps)
        assert math.isclose(math.exp(law[None]), p_bot, rel_tol=1e-9, abs_tol=1e-300)
        emitted = np.zeros(v.size)
        for o, lp in law.items():
            if o is not None:
                emitted[int(o)] = math.exp(lp)  # type: ignore[call-overload]
        np.testing.assert_allclose(emitted, probs, rtol=1e-9, atol=1e-300)
    # Broken helper (exp(ε·q/2)) is told apart from the sampler on the same vectors.
    v = _databases(m, eps)[0]
    law = _emitted_log_law(choosing_module, v, m, eps)
    good = v >= 1
    p_bot, _ = choosing_distribution(v, m, ALPHA, eps)
    broken = np.zeros(v.size)
    lw = eps / 2.0 * v[good]
    broken[good] = (1 - p_bot) * np.exp(lw - lw.max()) / np.exp(lw - lw.max()).sum()
    emitted = np.array([math.exp(law[i]) if i in law else 0.0 for i in range(v.size)])
    assert not np.allclose(emitted, broken, rtol=1e-6, atol=0.0)
