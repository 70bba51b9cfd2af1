"""KMMS Thm 1.3, the private learner for disjunctions of ≤ k literals (ldp.central.disjunctions).

* The learner is the conjunction SetCoverLearner on complemented labels, literals negated. Its exact
  output law equals the law of the paper's disjunction form (cover the positives, h covers x when
  h(x) = 1, b_j from |S¹|), enumerated independently here, on every small database.
* Exact privacy audit: the whole output law on all 120 databases of 3 examples over d = 2 and all
  their replace-one neighbours; two broken variants caught.
* Utility at the documented size, seeded, with its false-alarm rate; two broken variants caught.
* The sample-complexity functions and the experiment plug-in (run as a real process).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import ldp.central.disjunctions as disjunctions
import ldp.central.set_cover as set_cover
from ldp.central.disjunctions import (
    DisjunctionHypothesis,
    ProductReferee,
    balanced_disjunction_target,
    disjunction_sample_complexity,
    disjunction_sample_complexity_explicit,
    disjunction_sequence_distribution,
    learn_disjunction,
    negate_literal,
)
from ldp.central.laplace_mechanism import laplace_cdf
from ldp.central.privacy_checks import max_log_ratio, symmetric_delta
from ldp.central.set_cover import learn_conjunction_set_cover, literal_values, set_cover_parameters
from ldp.core.errors import ParameterError
from ldp.core.rng import generator
from tests.central.mutants import mutant_namespace
from tests.waits import PROCESS_WAIT_S

ROOT = Path(__file__).resolve().parents[2]

# The audited instance: d = 2 variables, k = 1, α = β = 0.45 (T = ⌈2 ln(2/0.45)⌉ = 3), n = 3, (ε, δ) = (0.5, 0.1).
EPS, DELTA, ALPHA, BETA, K = 0.5, 0.1, 0.45, 0.45, 1
TYPES = [((a, b), c) for a in (0, 1) for b in (0, 1) for c in (0, 1)]  # (x, label): the 8 possible examples
DATABASES = list(itertools.combinations_with_replacement(range(8), 3))  # all 120 multisets of 3 examples

Law = Callable[..., dict[tuple[int, ...], float]]


def _xy(ms: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    return np.array([TYPES[i][0] for i in ms], dtype=np.uint8), np.array([TYPES[i][1] for i in ms], dtype=np.int8)


def _direct_disjunction_law(
    x: np.ndarray, y: np.ndarray, k: int, alpha: float, beta: float, epsilon: float, delta: float, eps_hat: float | None = None,
) -> dict[tuple[int, ...], float]:
    """The paper's disjunction form of SetCoverLearner, written out independently of the reduction.

    KMMS §3/§5 "straightforward modification" (reference spec K1): z1(h) = #{alive positives, h = 1},
    z0(h) = #{alive negatives, h = 1}, b_j = |S¹| + ⌊Lap(T/ε)⌋ − Δ, q(h) = min{z1 − b_j/k, −z0},
    h_j ~ exp(ε̂ q/2), delete every example with h_j(x) = 1. Exact over the floor-Laplace noise.
    ``eps_hat`` overrides ε̂, as in ``disjunction_sequence_distribution``.
    """
    prm = set_cover_parameters(k, alpha, beta, epsilon, delta)
    e_hat = prm["eps_hat"] if eps_hat is None else eps_hat
    scale = prm["lap_scale"]
    w = np.arange(-math.ceil(60 * scale), math.ceil(60 * scale) + 1)
    pw = laplace_cdf(w + 1.0, scale) - laplace_cdf(w.astype(np.float64), scale)
    one = literal_values(x) == 1
    out: dict[tuple[int, ...], float] = {}

    def rec(prefix: tuple[int, ...], alive: np.ndarray, prob: float) -> None:
        if len(prefix) == int(prm["T"]):
            out[prefix] = out.get(prefix, 0.0) + prob
            return
        pos, neg = alive & (y == 1), alive & (y == 0)
        z1 = one[pos].sum(0).astype(np.float64)
        z0 = one[neg].sum(0).astype(np.float64)
        b = (pos.sum() + w - prm["offset"]).astype(np.float64)[:, None]
        lw = e_hat / 2 * np.minimum(z1[None, :] - b / k, -z0[None, :])
        p = np.exp(lw - lw.max(axis=1, keepdims=True))
        step = pw @ (p / p.sum(axis=1, keepdims=True))
        for h in range(one.shape[1]):
            rec(prefix + (h,), alive & ~one[:, h], prob * step[h])

    rec((), np.ones(len(y), dtype=bool), 1.0)
    return out


def _laws(law: Law, **kw: object) -> dict[tuple[int, ...], np.ndarray]:
    dists = {ms: law(*_xy(ms), K, ALPHA, BETA, EPS, DELTA, **kw) for ms in DATABASES}
    keys = sorted(set().union(*dists.values()))
    return {ms: np.array([d.get(s, 0.0) for s in keys]) for ms, d in dists.items()}


def _audit(law: Law, **kw: object) -> tuple[float, float]:
    """(worst δ(ε), worst |ln P/P'|) over all 120 databases × all 24 replace-one neighbours each."""
    vec = _laws(law, **kw)
    worst_delta, worst_loss = 0.0, 0.0
    for ms in DATABASES:
        assert abs(vec[ms].sum() - 1) < 1e-9
        for i in range(3):
            for t in range(8):
                nb = tuple(sorted(ms[:i] + ms[i + 1 :] + (t,)))
                worst_delta = max(worst_delta, float(symmetric_delta(vec[ms], vec[nb], EPS)))
                worst_loss = max(worst_loss, max_log_ratio(vec[ms], vec[nb]))
    return worst_delta, worst_loss


def test_the_learner_is_the_papers_disjunction_form_exactly() -> None:
    """Thm 1.3's learner (the reduction) has the same output law as the disjunction form written out,
    on all 120 databases, at Claim 3.4's ε̂ and at a sharp ε̂ = 5 (where the laws are far from uniform);
    the reduction without the label complement (built from the real source) differs."""
    ns = mutant_namespace(disjunctions, disjunction_sequence_distribution, "xa, 1 - ya, k", "xa, ya, k")
    for eps_hat in (None, 5.0):
        direct = _laws(_direct_disjunction_law, eps_hat=eps_hat)
        reduced = _laws(disjunction_sequence_distribution, eps_hat=eps_hat)
        assert max(float(np.max(np.abs(direct[ms] - reduced[ms]))) for ms in DATABASES) < 1e-12
    broken = _laws(ns["disjunction_sequence_distribution"], eps_hat=5.0)
    assert max(float(np.max(np.abs(direct[ms] - broken[ms]))) for ms in DATABASES) > 0.5


def test_exact_privacy_audit_and_broken_variants_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Claim 3.4: (ε, δ) = (0.5, 0.1). Exact: δ(0.5) = 0 and the worst privacy loss is 0.0722 = 0.144·ε.

    Broken 1: selection at ε̂ = 10ε (5.0) instead of ε/(2 ln(e/δ)): δ(0.5) = 0.749 > 0.1.
    Broken 2: the non-private learner's elimination step (KMMS §1.1) carried into the private one: a
    literal that is 1 on a remaining negative gets weight e^{-5000·ε̂} (is dropped). A data-dependent
    hypothesis set, the very thing KMMS say a private learner cannot afford: δ(0.5) = 1, loss ∞.
    """
    worst_delta, worst_loss = _audit(disjunction_sequence_distribution)
    assert worst_delta == 0.0 and worst_loss == pytest.approx(0.0722, abs=5e-4)
    assert _audit(disjunction_sequence_distribution, eps_hat=10 * EPS)[0] > DELTA
    # in the complemented (conjunction) view, "1 on a negative" is z1 > 0: the literal would err on a positive
    ns = mutant_namespace(set_cover, set_cover.set_cover_sequence_distribution, "-z1[None, :])", "-z1[None, :]) - 1e4 * (z1[None, :] > 0)")
    monkeypatch.setattr(disjunctions, "set_cover_sequence_distribution", ns["set_cover_sequence_distribution"])
    eliminated = _audit(disjunction_sequence_distribution)
    assert eliminated[0] > DELTA and eliminated[1] == math.inf


# Documented size (docs/central_disjunctions.md): k = 4 literals over d = 64 variables, α = β = 0.1,
# ε = 0.5, δ = 1e-6, target balanced (Pr[c = 1] = 1/2), n = 8000 (2× the experiment's first success).
DOC_K, DOC_D, DOC_N = 4, 64, 8000
DOC = {"alpha": 0.1, "beta": 0.1, "epsilon": 0.5, "delta": 1e-6}
TRIALS, NEED = 20, 15


def _wins(learner: Callable[..., object], seed: int) -> int:
    wins = 0
    for t in range(TRIALS):
        rng = generator(seed, "test-disjunctions", t)
        ref = balanced_disjunction_target(DOC_K, DOC_D, rng)
        x, y = ref.sample(DOC_N, rng)
        res = learner(x, y, DOC_K, DOC["alpha"], DOC["beta"], DOC["epsilon"], DOC["delta"], rng)
        wins += ref.error(res.hypothesis) <= DOC["alpha"]  # type: ignore[attr-defined]
    return wins


def test_utility_at_the_documented_size_and_broken_variants_caught() -> None:
    """≥ 15 of 20 seeded runs reach exact error ≤ α. False alarm: if each run succeeded with only the
    PAC probability 1 − β = 0.9, P[Bin(20, 0.9) ≤ 14] = 1.1 %; at the measured rate (1.0) it is 0.
    Broken (built from the real source): labels not complemented, or literals not negated: ≤ 3 wins."""
    assert _wins(learn_disjunction, 7) >= NEED
    not_complemented = mutant_namespace(disjunctions, learn_disjunction, "(xa, 1 - ya, k,", "(xa, ya, k,")["learn_disjunction"]
    not_negated = mutant_namespace(disjunctions, learn_disjunction, "negate_literal(lit, d) for lit", "lit for lit")["learn_disjunction"]
    assert _wins(not_complemented, 7) <= 3
    assert _wins(not_negated, 7) <= 3


def test_same_draws_as_the_conjunction_learner_and_hypothesis_basics() -> None:
    rng = np.random.default_rng(5)
    ref = balanced_disjunction_target(2, 12, rng)
    x, y = ref.sample(3000, rng)
    dis = learn_disjunction(x, y, 2, 0.1, 0.1, 0.5, 1e-6, np.random.default_rng(9))
    con = learn_conjunction_set_cover(x, 1 - y, 2, 0.1, 0.1, 0.5, 1e-6, np.random.default_rng(9))
    assert dis.hypothesis.literals == tuple(negate_literal(v, 12) for v in con.hypothesis.literals)
    assert np.array_equal(dis.hypothesis.predict(x), 1 - con.hypothesis.predict(x))  # De Morgan
    assert dis.details["T"] == 12 and dis.n == 3000 and (dis.epsilon, dis.delta) == (0.5, 1e-6)
    h = DisjunctionHypothesis((0, 5), 3)  # x0 ∨ ¬x2
    assert h.describe() == "x0 ∨ ¬x2" and DisjunctionHypothesis((), 3).describe() == "FALSE"
    bits = np.array(list(itertools.product([0, 1], repeat=3)), dtype=np.uint8)
    assert h.predict(bits).tolist() == [int(b[0] == 1 or b[2] == 0) for b in bits]
    assert [negate_literal(v, 3) for v in range(6)] == [3, 4, 5, 0, 1, 2]
    with pytest.raises(ParameterError, match="only the values 0 and 1"):
        learn_disjunction(x, 2 * y, 2, 0.1, 0.1, 0.5, 1e-6, rng)
    with pytest.raises(ParameterError, match="shapes"):
        learn_disjunction(x, y[:-1], 2, 0.1, 0.1, 0.5, 1e-6, rng)


def test_product_referee_is_exact() -> None:
    """Balanced targets have Pr[c = 1] = 1/2 for every k; the exact error matches the full enumeration
    of {0,1}^6 with its product weights (x0 ∨ ¬x0 included: a tautology)."""
    rng = np.random.default_rng(11)
    for k in (1, 2, 4):
        assert balanced_disjunction_target(k, 16, rng).positive_rate() == pytest.approx(0.5, abs=1e-12)
    p_one = rng.random(6)
    bits = np.array(list(itertools.product([0, 1], repeat=6)), dtype=np.uint8)
    weight = np.prod(np.where(bits == 1, p_one, 1 - p_one), axis=1)
    ref = ProductReferee(DisjunctionHypothesis((1, 9), 6), p_one)
    for lits in [(), (1,), (1, 9), (0, 6), (2, 3, 10), (4, 11, 5)]:
        h = DisjunctionHypothesis(lits, 6)
        assert ref.error(h) == pytest.approx(float(weight @ (h.predict(bits) != ref.target.predict(bits))), abs=1e-12)


def test_sample_complexity_functions() -> None:
    """Thm 1.3 as written (constant 1): k ln d/(αε); Thm 3.2 with Prop 2.5's λ at Claim 3.4's ε̂."""
    assert disjunction_sample_complexity(1, 16, 0.1, 0.5) == pytest.approx(math.log(16) / 0.05, rel=1e-12)
    assert disjunction_sample_complexity(4, 64, 0.1, 0.5, constant=2) == pytest.approx(2 * 4 * math.log(64) / 0.05, rel=1e-12)
    eps_hat = 0.5 / (2 * math.log(math.e / 1e-6))
    lam = 2 / eps_hat * math.log(2 * 16 * 4 * 2 * math.log(20) / 0.1)
    expected = 2 * math.log(10) / 0.1 * (5 * math.log(2) + lam + math.log(2 / 0.1 * math.log(10)) / 0.5)
    assert disjunction_sample_complexity_explicit(2, 16, 0.1, 0.1, 0.5, 1e-6) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="epsilon in \\(0, 1\\)"):
        disjunction_sample_complexity_explicit(2, 16, 0.1, 0.1, 1.0, 1e-6)


def test_experiment_plugin_outputs_and_documented_command(tmp_path: Path) -> None:
    """The plug-in's files and readable figure (tiny config, in process), then the documented command
    ``python -m ldp.simulations.disjunctions --quick --out DIR`` as a real process."""
    from ldp.simulations import disjunctions as sim
    from ldp.simulations.reporting import captured_figures, figure_problems

    cfg = dataclasses.replace(sim.quick_config(0), distributions=("fair", "distractors"), ks=(2,), ds=(16,), epsilons=(0.5,),
                              ns=(500, 8000), trials=2)
    result = sim.run(cfg)
    with captured_figures() as figs:
        sim.write_outputs(result, tmp_path / "tiny")
    assert {p.name for p in (tmp_path / "tiny").iterdir()} == set(sim.EXPERIMENT.files)
    assert [problems for _, fig in figs if (problems := figure_problems(fig))] == []
    assert [r["first_success_n"] for r in result.first] == [8000, 8000] and len(result.rows) == 4
    assert sim.first_success([{"n": 1, "success": 1.0}, {"n": 2, "success": 0.5}], 0.1) is None
    with pytest.raises(ParameterError, match="distributions must be among"):
        sim.run(dataclasses.replace(cfg, distributions=("uniform",)))
    out = tmp_path / "quick"
    proc = subprocess.run([sys.executable, "-m", "ldp.simulations.disjunctions", "--quick", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 0, proc.stderr
    assert "first-success" in proc.stdout and (out / "first_success.csv").read_text().startswith("distribution,k,d,epsilon,first_success_n")
