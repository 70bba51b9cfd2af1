"""Private learner for disjunctions of at most k literals (KMMS Thm 1.3; Thm 3.5, DISJ part).

KMMS (Kaplan, Mansour, Matias, Stemmer, ICML 2019) prove Theorem 1.3 with one sentence: "our
technique extends to disjunctions of literals in a straightforward way". §3 says the same of the
generic construction ("for readability we focus on conjunctions; the extension to disjunction is
straightforward"), and §5 names it "a straightforward modification to algorithm SetCoverLearner
[that] yields an algorithm for learning classes of the form C ⊆ H^{∨k}". There is no other
algorithm: Theorem 1.3's learner is SetCoverLearner in its disjunction form over H = the 2d
literals with the exponential mechanism as the selection, accounted by Claim 3.4 — the learner of
Theorem 3.5 for DISJ_{k,d}.

That disjunction form is *exactly* the conjunction learner run on the complemented labels, its
output negated (De Morgan: ∨ l_i = ¬ ∧ ¬l_i, and ¬ maps the 2d literals onto themselves):

* complementing the labels maps the positives (the examples the disjunction form must cover) onto
  the negatives (the ones the conjunction form covers), and the negated literal ¬h covers x in the
  conjunction form (¬h(x) = 0) exactly when h covers x in the disjunction form (h(x) = 1);
* so every count z1, z0, the noisy b_j (now from |S¹|), every quality q(h), every exponential-
  mechanism probability and every deletion of one run is that of the other, draw for draw;
* complementing labels is a bijection of databases that keeps "differ in one entry", so the
  conjunction learner's (ε,δ) (Claim 3.4) carries over unchanged, and error_D(∨ h_j, c) =
  error_D(∧ ¬h_j, ¬c), so its utility (Claim 3.1, Thm 3.2/3.5) carries over too, with ¬c ∈ CONJ_{k,d}.

Hence :func:`learn_disjunction` is a thin learner over
``ldp.central.set_cover.learn_conjunction_set_cover`` (no second copy of the loop), and
:func:`disjunction_sequence_distribution` is the push-forward of the conjunction learner's exact
output law. ``tests/central/test_disjunctions.py`` checks that the two runs agree draw for draw, and
audits the output law exactly on all small neighbouring databases.

Literals are indexed as in ``ldp.central.set_cover``: l < d is x_l, l ≥ d is ¬x_{l−d}.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldp.central.set_cover import (
    learn_conjunction_set_cover,
    set_cover_parameters,
    set_cover_sequence_distribution,
)
from ldp.core.errors import ParameterError, require_epsilon, require_integer, require_probability
from ldp.core.learner_result import LearnerResult

__all__ = [
    "DisjunctionHypothesis",
    "ProductReferee",
    "negate_literal",
    "learn_disjunction",
    "disjunction_sequence_distribution",
    "disjunction_sample_complexity",
    "disjunction_sample_complexity_explicit",
    "balanced_disjunction_target",
]


def negate_literal(literal: int, n_vars: int) -> int:
    """The index of ¬l: x_j ↔ ¬x_j, i.e. l + d for l < d and l − d for l ≥ d.

    Parameters
    ----------
    literal : int
        A literal index in [0, 2d).
    n_vars : int
        d, the number of Boolean variables.

    Returns
    -------
    int
        The index of the negated literal.
    """
    d = require_integer("n_vars", n_vars, 1)
    lit = require_integer("literal", literal, 0, 2 * d - 1)
    return lit + d if lit < d else lit - d


@dataclass(frozen=True)
class DisjunctionHypothesis:
    """OR of literals (l < d: x_l; l ≥ d: ¬x_{l−d}); the empty disjunction is constant 0."""

    literals: tuple[int, ...]
    n_vars: int

    def predict(self, x: np.ndarray) -> np.ndarray:
        """h(x) ∈ {0, 1} for each row of the (n, d) bit array ``x``, as int8."""
        xa = np.asarray(x, dtype=np.uint8)
        out = np.zeros(xa.shape[0], dtype=bool)
        for lit in set(self.literals):
            out |= (xa[:, lit] == 1) if lit < self.n_vars else (xa[:, lit - self.n_vars] == 0)
        return out.astype(np.int8)

    def describe(self) -> str:
        """E.g. "x0 ∨ ¬x3"; "FALSE" for the empty disjunction."""
        names = [f"x{lit}" if lit < self.n_vars else f"¬x{lit - self.n_vars}" for lit in sorted(set(self.literals))]
        return " ∨ ".join(names) if names else "FALSE"

    def to_json(self) -> dict[str, Any]:
        return {"kind": "disjunction", "literals": [int(v) for v in self.literals], "n_vars": int(self.n_vars)}


def _check_sample(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    xa = np.asarray(x)
    ya = np.asarray(y)
    if xa.ndim != 2 or ya.shape != (xa.shape[0],):
        raise ParameterError(f"x must be an (n, d) bit array and y n labels; got shapes {xa.shape} and {ya.shape}")
    if not (np.all((xa == 0) | (xa == 1)) and np.all((ya == 0) | (ya == 1))):
        raise ParameterError("x and y must hold only the values 0 and 1")
    return xa.astype(np.uint8), ya.astype(np.int8)


def learn_disjunction(
    x: np.ndarray,
    y: np.ndarray,
    k: int,
    alpha: float,
    beta: float,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    conservative: bool = False,
) -> LearnerResult:
    """KMMS Thm 1.3: (ε,δ)-DP (α,β)-PAC learner for DISJ_{k,d} with Õ(k·log d/(αε)) examples.

    SetCoverLearner in its disjunction form (cover the positives with literals that are 1 on them
    and on essentially no negative) over the 2d literals, exponential-mechanism selection at
    ε̂ = ε/(2 ln(e/δ)) (Claim 3.4). Run as the conjunction learner on the complemented labels with
    every selected literal negated: the same algorithm draw for draw (module docstring).

    Parameters
    ----------
    x : numpy.ndarray
        (n, d) array of bits, the examples.
    y : numpy.ndarray
        n labels in {0, 1}.
    k : int
        The target has at most k literals.
    alpha, beta : float
        Accuracy and confidence, in (0, 1/2).
    epsilon, delta : float
        The privacy of the whole run; Claim 3.4 needs ε ∈ (0, 1) and δ < 1/e.
    rng : numpy.random.Generator
        The curator's randomness (Laplace noises and selections).
    conservative : bool
        Halve the Laplace ε and ε̂ (``set_cover.set_cover_parameters``).

    Returns
    -------
    LearnerResult
        A ``DisjunctionHypothesis`` of T = ⌈2k·ln(2/α)⌉ literals (improper: ∨ of up to T literals).
    """
    xa, ya = _check_sample(x, y)
    conj = learn_conjunction_set_cover(xa, 1 - ya, k, alpha, beta, epsilon, delta, rng, conservative)
    d = xa.shape[1]
    lits = tuple(negate_literal(lit, d) for lit in conj.hypothesis.literals)
    return LearnerResult(
        DisjunctionHypothesis(lits, d), xa.shape[0], float(epsilon), float(delta),
        "SetCoverLearner, disjunction form (KMMS Thm 1.3 / 3.5, Claim 3.4)", details=dict(conj.details),
    )


def disjunction_sequence_distribution(
    x: np.ndarray,
    y: np.ndarray,
    k: int,
    alpha: float,
    beta: float,
    epsilon: float,
    delta: float,
    conservative: bool = False,
    eps_hat: float | None = None,
) -> dict[tuple[int, ...], float]:
    """Exact law of the literal sequence (h_1 … h_T) that :func:`learn_disjunction` outputs.

    The push-forward, under literal negation, of the conjunction learner's exact law on the
    complemented labels (``set_cover.set_cover_sequence_distribution``); tiny instances only.

    Parameters
    ----------
    x, y : numpy.ndarray
        The sample, as for :func:`learn_disjunction`.
    k : int
        Target size bound.
    alpha, beta, epsilon, delta : float
        As for :func:`learn_disjunction`.
    conservative : bool
        As for :func:`learn_disjunction`.
    eps_hat : float or None
        Overrides ε̂ (tests use it for a deliberately broken variant).

    Returns
    -------
    dict
        Literal sequence → probability.
    """
    xa, ya = _check_sample(x, y)
    d = xa.shape[1]
    law = set_cover_sequence_distribution(xa, 1 - ya, k, alpha, beta, epsilon, delta, conservative, eps_hat)
    return {tuple(negate_literal(lit, d) for lit in seq): p for seq, p in law.items()}


def disjunction_sample_complexity(k: int, n_vars: int, alpha: float, epsilon: float, constant: float = 1.0) -> float:
    """KMMS Thm 1.3 as written: n = Õ(k·log d/(αε)), here C·k·ln(d)/(αε) with C = ``constant``.

    The theorem gives no constant, and its footnote 1 says the Õ hides logarithmic factors in
    α, β, ε, δ and k; C = 1 and the natural log are this function's choice [ENG]. For the
    factors made explicit see :func:`disjunction_sample_complexity_explicit`.

    Parameters
    ----------
    k : int
        Literals in the target (≥ 1).
    n_vars : int
        d, the number of Boolean variables (≥ 2).
    alpha, epsilon : float
        Accuracy in (0, 1/2) and privacy ε.
    constant : float
        C, the constant the theorem leaves implicit.

    Returns
    -------
    float
        The sample size.
    """
    return constant * require_integer("k", k, 1) * math.log(require_integer("n_vars", n_vars, 2)) / (
        require_probability("alpha", alpha, high=0.5) * require_epsilon(epsilon))


def disjunction_sample_complexity_explicit(
    k: int, n_vars: int, alpha: float, beta: float, epsilon: float, delta: float, constant: float = 1.0,
) -> float:
    """KMMS Thm 3.2 with Prop 2.5's λ at Claim 3.4's ε̂: the Õ of Thm 1.3/3.5 with its logs written out.

    n = C·(k·ln(1/α)/α)·(VC(H)·ln k + λ + (1/ε)·ln((k/β)·ln(1/α))), where
    H = the 2d literals, VC(H) = ⌊log₂(2d)⌋ (an upper bound: |H| = 2d), ε̂ = ε/(2 ln(e/δ)) and
    λ = (2/ε̂)·ln(|H|·4k·ln(2/α)/β) (Prop 2.5 at failure β/(4k log(2/α)) per selection, as Thm 3.2
    asks). Thm 3.2 is a Θ(·) with no constant; C = ``constant`` (default 1) and natural logs [ENG].

    Parameters
    ----------
    k : int
        Literals in the target (≥ 1).
    n_vars : int
        d, the number of Boolean variables (≥ 1).
    alpha, beta : float
        Accuracy and confidence, in (0, 1/2).
    epsilon, delta : float
        Privacy, as Claim 3.4 takes them (ε < 1, δ < 1/e).
    constant : float
        C, the constant Thm 3.2 leaves implicit.

    Returns
    -------
    float
        The sample size.
    """
    kk = require_integer("k", k, 1)
    d = require_integer("n_vars", n_vars, 1)
    eps_hat = set_cover_parameters(kk, alpha, beta, epsilon, delta)["eps_hat"]
    lam = 2 / eps_hat * math.log(2 * d * 4 * kk * math.log(2 / alpha) / beta)
    vc = math.floor(math.log2(2 * d))
    return constant * kk * math.log(1 / alpha) / alpha * (vc * math.log(kk) + lam + math.log(kk / beta * math.log(1 / alpha)) / epsilon)


def _all_false(literals: tuple[int, ...] | set[int], p_one: np.ndarray) -> float:
    """Pr[every literal is 0] for independent bits with Pr[x_j = 1] = p_one[j]."""
    d = len(p_one)
    pos = np.zeros(d, dtype=bool)
    neg = np.zeros(d, dtype=bool)
    for lit in literals:
        if lit < d:
            pos[lit] = True
        else:
            neg[lit - d] = True
    per_var = np.where(pos & neg, 0.0, np.where(pos, 1 - p_one, np.where(neg, p_one, 1.0)))
    return float(np.prod(per_var))


@dataclass(frozen=True)
class ProductReferee:
    """A disjunction target under a product distribution on {0,1}^d; exact error of a disjunction.

    ``p_one[j]`` = Pr[x_j = 1], independent bits. For disjunctions A (hypothesis) and B (target),
    Pr[A ≠ B] = P₀(A) + P₀(B) − 2·P₀(A ∪ B), P₀(L) = Pr[every literal of L is 0] = Π_j Pr[the
    literals of L on x_j are all 0] (0 when L holds both x_j and ¬x_j): exact, no test sample.
    """

    target: DisjunctionHypothesis
    p_one: np.ndarray

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """n examples x ~ D (uint8 bits) and their labels c(x) (int8)."""
        x = (rng.random((require_integer("n", n, 1), len(self.p_one))) < self.p_one).astype(np.uint8)
        return x, self.target.predict(x)

    def positive_rate(self) -> float:
        """Pr[c(x) = 1]: the error of the constant-0 hypothesis."""
        return 1.0 - _all_false(self.target.literals, self.p_one)

    def error(self, hypothesis: DisjunctionHypothesis) -> float:
        """Pr_D[h(x) ≠ c(x)], exactly."""
        a, b = set(hypothesis.literals), set(self.target.literals)
        return _all_false(a, self.p_one) + _all_false(b, self.p_one) - 2 * _all_false(a | b, self.p_one)


def balanced_disjunction_target(k: int, n_vars: int, rng: np.random.Generator, distractor_rate: float = 0.5) -> ProductReferee:
    """A random disjunction of k literals on k distinct variables, under a product distribution
    that makes it positive with probability exactly 1/2.

    Each target literal is 1 with probability p = 1 − 2^{−1/k} (so Pr[c = 0] = (1 − p)^k = 1/2); each
    of the other d − k bits is 1 with probability ``distractor_rate``. Under the uniform distribution
    a k-literal disjunction is 1 with probability 1 − 2^{−k} (0.94 for k = 4), and the constant-1
    hypothesis would already have error ≤ α = 0.1: nothing to learn. Here both constants have error
    1/2 for every k [ENG].

    With fair distractor bits (0.5) every literal off the target is 1 on half the negatives, so the
    selection's margin is ≈ n/4 whatever k is. With ``distractor_rate = 1/(2k)`` the literal x_j of a
    distractor is 1 on a 1/(2k) share of every class: its quality min{z1 − b/k, −z0} trails the target
    literals' 0 by only ≈ n/(4k) (it covers half the 1/k share of positives SetCoverLearner asks for,
    and as many negatives), the regime in which the k of Thm 1.3's k·log d/(αε) shows [ENG].

    Parameters
    ----------
    k : int
        Literals in the target, 1 ≤ k ≤ d.
    n_vars : int
        d, the number of Boolean variables.
    rng : numpy.random.Generator
        The experiment's randomness (which variables, which signs).
    distractor_rate : float
        Pr[x_j = 1] of every variable off the target, in (0, 1).

    Returns
    -------
    ProductReferee
        The target and its distribution.
    """
    d = require_integer("n_vars", n_vars, 1)
    kk = require_integer("k", k, 1, d)
    rate = require_probability("distractor_rate", distractor_rate)
    var = rng.choice(d, kk, replace=False)
    negated = rng.random(kk) < 0.5
    lits = tuple(int(v + d) if s else int(v) for v, s in zip(var, negated))
    p = 1.0 - 2.0 ** (-1.0 / kk)
    p_one = np.full(d, rate)
    p_one[var] = np.where(negated, 1.0 - p, p)  # the literal ¬x_v is 1 when x_v = 0
    return ProductReferee(DisjunctionHypothesis(lits, d), p_one)
