"""HRS PrivLearn: private data release for monotone-conjunction counting queries via learning thresholds
(Hardt–Rothblum–Servedio, SODA 2012: Figure 1 threshold oracle, Figure 2 PrivLearn, Lemmas 4.1–4.5,
Theorem 4.10).

Queries q ∈ {0,1}^d (monotone conjunctions); a record u ∈ {0,1}^d satisfies q iff u_i = 1 for every i with
q_i = 1; f^D(q) = fraction of records satisfying q.

**The data is touched only through** ``answer(queries) -> estimates``: one call with the b distinct queries
(rows of a uint8 array) returning estimates of f^D. The central default (:func:`central_answer`) adds
Lap(b/(εn)) to each (Lemma 4.1: b Laplace mechanisms at ε/b each ⇒ ε-DP). A local-model implementation
can be plugged in (e.g. disjoint user groups through an SQ oracle): everything else is post-processing.

PrivLearn (practical mode, reference spec §B3/B5; privacy does not depend on these choices, Lemma 4.4):
  k = ⌈3/α⌉ thresholds t_i = i/(k+1); q_1..q_b ~ G drawn before seeing data (sampling-only learner, so
  Theorem 4.10's b_total = 2·b_iter noise scale); threshold oracle TO(D, α/7): label 1 if A_q ≥ t + 2α/21,
  0 if A_q ≤ t − 2α/21, ⊥ otherwise (one noisy A_q per *distinct* q, reused across thresholds — the
  budget counts distinct queries, fixing the paper's per-call count, see spec §0);
  per threshold: if < γ/2 of the labels are non-⊥, return the constant t_i (HRS step 3c); else learn a
  degree-≤a polynomial threshold function (PTF) over the monotone monomials of the labelled queries;
  combine by the counting rule h(q) = t_c, c = #{i : h_i(q) = 1}.

Learners (``learner=``):
  ``"lp"`` (default, the paper's, HRS Theorem 5.10): the linear program for a degree-a PTF consistent
  with the labelled sample, solved with HiGHS in its soft-margin form min Σ s_j s.t.
  y_j·⟨w, φ(q_j)⟩ ≥ 1 − s_j, s ≥ 0. When a consistent PTF exists (realizable: e.g. on B_k with a ≥ k, or
  under the event Γ of Lemma 4.3 with a ≥ the PTF degree of f_t^D) the optimum is 0 and the output *is*
  a consistent hypothesis, so Theorem 5.10's VC sample bound and Lemma 4.5 apply; when it is not (label
  noise outside Γ, degree too low) the LP still returns the minimum-hinge-loss PTF.
  ``"ridge"`` (named alternative): ridge least squares on ±1 labels. Cheaper, but not an ERM for the PTF
  class: it may return an *inconsistent* hypothesis on a realizable sample, so Lemma 4.8 (each h_i
  γ/k-accurate) is not guaranteed. Privacy is unaffected (post-processing).

Also here: the Claim 5.4 / Cor 5.5 / Lemma 5.3 Chebyshev PTF construction (a certificate that f_t^D
has a low-degree PTF on B_k) and the paper-mode parameter calculator (eqs. 6–8, Theorems 3.9 / 4.10).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.polynomial import chebyshev as npcheb
from scipy.optimize import linprog

from ldp.core.errors import require_epsilon, require_integer, require_positive_finite, require_probability

__all__ = [
    "AnswerFn",
    "LEARNERS",
    "conjunction_counts",
    "central_answer",
    "ThresholdOracle",
    "monomial_features",
    "PTFFit",
    "fit_ptf_lp",
    "fit_ptf_ridge",
    "HRSRelease",
    "priv_learn",
    "chebyshev_step",
    "chebyshev_step_degree",
    "lemma53_ptf",
    "PaperParameters",
    "paper_parameters",
]

AnswerFn = Callable[[np.ndarray], np.ndarray]
LEARNERS = ("lp", "ridge")


def conjunction_counts(db: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Exact f^D(q) for monotone conjunctions: mean over records of ∏_{i: q_i=1} u_i."""
    u = np.asarray(db, dtype=np.uint8)
    q = np.asarray(queries, dtype=np.uint8)
    # record satisfies q iff no i with q_i = 1 and u_i = 0
    viol = (q.astype(np.int32) @ (1 - u.astype(np.int32)).T) > 0  # (b, n)
    return 1.0 - viol.mean(axis=1)


def central_answer(db: np.ndarray, epsilon: float, budget: int, rng: np.random.Generator) -> AnswerFn:
    """Central default: each of ≤ ``budget`` distinct queries gets f^D(q) + Lap(budget/(ε·n)). ε-DP (Lemma 4.1)."""
    eps = require_epsilon(epsilon)
    b = require_integer("budget", budget, 1)
    u = np.asarray(db, dtype=np.uint8)
    n = u.shape[0]
    used = [0]

    def answer(queries: np.ndarray) -> np.ndarray:
        q = np.asarray(queries, dtype=np.uint8)
        if used[0] + q.shape[0] > b:
            raise ValueError(f"query budget exhausted: {used[0]} + {q.shape[0]} distinct queries > budget {b}")
        used[0] += q.shape[0]
        return conjunction_counts(u, q) + rng.laplace(0.0, b / (eps * n), size=q.shape[0])

    return answer


class ThresholdOracle:
    """TO(D, α, b) (HRS Figure 1) with the budget counted over *distinct* queries (Lemma 4.1).

    Noisy values are fetched in batches through ``answer`` and reused for every threshold.
    """

    def __init__(self, answer: AnswerFn, alpha: float, budget: int) -> None:
        self._answer = answer
        self.alpha = float(alpha)
        self.budget = require_integer("budget", budget, 1)
        self._cache: dict[bytes, float] = {}

    def prefetch(self, queries: np.ndarray) -> None:
        """Fetch A_q for every distinct q not yet cached, in one ``answer`` call."""
        q = np.asarray(queries, dtype=np.uint8)
        new = [kk for kk in dict.fromkeys(row.tobytes() for row in q) if kk not in self._cache]
        if not new:
            return
        if len(self._cache) + len(new) > self.budget:
            raise ValueError(f"threshold oracle budget of {self.budget} distinct queries exceeded")
        rows = np.stack([np.frombuffer(kk, dtype=np.uint8) for kk in new])
        vals = np.asarray(self._answer(rows), dtype=np.float64)
        self._cache.update(zip(new, vals.tolist()))

    def values(self, queries: np.ndarray) -> np.ndarray:
        """The noisy answers A_q (fetched if needed)."""
        self.prefetch(queries)
        return np.array([self._cache[row.tobytes()] for row in np.asarray(queries, dtype=np.uint8)])

    def query(self, queries: np.ndarray, t: float) -> np.ndarray:
        """Labels 1 / 0 / −1 (⊥) for each query at threshold t (bands ±2α/3)."""
        a = self.values(queries)
        out = np.full(a.shape, -1, dtype=np.int8)
        out[a >= t + 2 * self.alpha / 3] = 1
        out[a <= t - 2 * self.alpha / 3] = 0
        return out

    @property
    def distinct_queries(self) -> int:
        return len(self._cache)


def monomial_features(queries: np.ndarray, degree: int) -> np.ndarray:
    """All monotone monomials of degree ≤ ``degree`` of the query bits (including the constant)."""
    q = np.asarray(queries, dtype=np.float64)
    cols = [np.ones(q.shape[0])]
    for a in range(1, degree + 1):
        for S in itertools.combinations(range(q.shape[1]), a):
            cols.append(np.prod(q[:, S], axis=1))
    return np.stack(cols, axis=1)


@dataclass(frozen=True)
class PTFFit:
    """A learned PTF h(q) = 1{⟨w, φ(q)⟩ > 0} and how many training examples it gets wrong."""

    weights: tuple[float, ...]
    training_errors: int

    @property
    def consistent(self) -> bool:
        """True iff h agrees with every training label (what Theorem 5.10's learner must output)."""
        return self.training_errors == 0


def _errors(phi: np.ndarray, labels: np.ndarray, w: np.ndarray) -> int:
    return int(np.sum(((phi @ w) > 0) != (labels == 1)))


def _check_sample(phi: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(phi, dtype=np.float64)
    y = np.asarray(labels)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"phi must be (m, F) and labels (m,); got phi {x.shape}, labels {y.shape}")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError(f"labels must be 0/1 (⊥ removed); got values {sorted(set(np.unique(y).tolist()))}")
    return x, y


def fit_ptf_lp(phi: np.ndarray, labels: np.ndarray) -> PTFFit:
    """The LP learner of HRS Theorem 5.10: a PTF consistent with the sample if one exists.

    Solves min Σ_j s_j s.t. y_j·⟨w, φ_j⟩ ≥ 1 − s_j, s ≥ 0 (y = ±1, w free) with HiGHS. If some w has
    y_j⟨w, φ_j⟩ > 0 for all j, a rescaling gives margin ≥ 1, so the optimum is 0 and the returned w is
    consistent (the paper's feasibility LP); otherwise it minimizes the hinge loss.
    Raises ``RuntimeError`` naming HiGHS's status if the solver fails.
    """
    x, y01 = _check_sample(phi, labels)
    m, f = x.shape
    if m == 0:
        return PTFFit(tuple([0.0] * f), 0)
    y = np.where(y01 == 1, 1.0, -1.0)
    a_ub = sp.hstack([sp.csr_matrix(-(y[:, None] * x)), -sp.identity(m, format="csr")], format="csr")
    c = np.concatenate([np.zeros(f), np.ones(m)])
    bounds = [(None, None)] * f + [(0.0, None)] * m
    res = linprog(c, A_ub=a_ub, b_ub=-np.ones(m), bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError(f"HiGHS failed on the PTF LP (m={m}, F={f}): status {res.status}, {res.message}")
    w = np.asarray(res.x[:f])
    return PTFFit(tuple(float(v) for v in w), _errors(x, y01, w))


def fit_ptf_ridge(phi: np.ndarray, labels: np.ndarray, ridge: float = 1e-3) -> PTFFit:
    """Named alternative: ridge least squares on ±1 labels, w = (ΦᵀΦ + λI)⁻¹Φᵀy.

    No consistency guarantee (not an ERM for PTFs): even on a realizable sample it may err.
    """
    x, y01 = _check_sample(phi, labels)
    lam = require_positive_finite("ridge", ridge)
    y = np.where(y01 == 1, 1.0, -1.0)
    w = np.linalg.solve(x.T @ x + lam * np.eye(x.shape[1]), x.T @ y)
    return PTFFit(tuple(float(v) for v in w), _errors(x, y01, w))


@dataclass(frozen=True)
class HRSRelease:
    """The synopsis: per-threshold PTF weights (or a constant), evaluated by the counting rule.

    ``learner`` names the PTF learner; ``training_errors[i]`` is how many labelled queries h_i gets
    wrong (0 everywhere ⇔ every h_i is a consistent hypothesis, as Theorem 5.10 requires).
    """

    thresholds: tuple[float, ...]
    weights: tuple[tuple[float, ...], ...]
    degree: int
    constant: float | None
    learner: str = "lp"
    training_errors: tuple[int, ...] = ()
    labelled: tuple[int, ...] = ()

    def estimate(self, queries: np.ndarray) -> np.ndarray:
        """h(q) = t_c, c = #{i : h_i(q) = 1}, t_0 = 0 (or the constant of step 3c)."""
        q = np.asarray(queries, dtype=np.uint8)
        if self.constant is not None:
            return np.full(q.shape[0], self.constant)
        phi = monomial_features(q, self.degree)
        c = np.zeros(q.shape[0], dtype=np.int64)
        for w in self.weights:
            c += (phi @ np.asarray(w)) > 0
        t = np.concatenate([[0.0], np.asarray(self.thresholds)])
        return t[c]

    def predict(self, queries: np.ndarray) -> np.ndarray:
        return self.estimate(queries)

    def describe(self) -> str:
        if self.constant is not None:
            return f"HRS release: constant {self.constant:.3f}"
        bad = sum(1 for e in self.training_errors if e)
        return (
            f"HRS release: {len(self.weights)} degree-{self.degree} PTFs ({self.learner}), counting rule; "
            f"{bad} inconsistent with their sample"
        )


def priv_learn(
    answer: AnswerFn | None,
    n_vars: int,
    alpha: float,
    gamma: float,
    b_iter: int,
    rng: np.random.Generator,
    sample_queries: Callable[[int, np.random.Generator], np.ndarray],
    degree: int = 2,
    ridge: float = 1e-3,
    learner: str = "lp",
) -> tuple[HRSRelease, ThresholdOracle]:
    """HRS PrivLearn (Figure 2, Theorem 4.10, practical mode). Returns the release and the oracle used.

    ``answer`` is the only data access (≤ b_iter distinct queries); build the central one with
    ``central_answer(db, ε, 2·b_iter, rng)`` (Theorem 4.10 noise scale 2·b_iter/(εn)) or a local one
    with ``ldp.learners.hrs_local``. ``sample_queries(b, rng)`` draws the public query sample q_1..q_b ~ G.
    ``learner`` is "lp" (HRS Thm 5.10, default) or "ridge" (alternative, see the module docstring).
    Privacy: that of ``answer`` (everything else is post-processing, Lemma 4.4).
    """
    a = require_probability("alpha", alpha, high=0.5)
    g = require_probability("gamma", gamma, high=0.5)
    bi = require_integer("b_iter", b_iter, 1)
    deg = require_integer("degree", degree, 1)
    if learner not in LEARNERS:
        raise ValueError(f"learner must be one of {LEARNERS}; got learner={learner!r}")
    if answer is None:
        raise ValueError("answer must be a callable; build the central one with central_answer(db, ε, 2·b_iter, rng)")
    k = math.ceil(3 / a)
    ts = tuple((i + 1) / (k + 1) for i in range(k))
    to = ThresholdOracle(answer, a / 7, bi)
    Q = np.asarray(sample_queries(bi, rng), dtype=np.uint8)
    if Q.ndim != 2 or Q.shape[1] != n_vars:
        raise ValueError(f"sample_queries must return a (b_iter, n_vars={n_vars}) 0/1 array; got shape {Q.shape}")
    to.prefetch(Q)
    phi = monomial_features(Q, deg)
    weights: list[tuple[float, ...]] = []
    errors: list[int] = []
    labelled: list[int] = []
    for t in ts:
        lab = to.query(Q, t)
        ok = lab >= 0
        if ok.mean() < g / 2:
            return HRSRelease(ts, tuple(), deg, constant=t, learner=learner), to
        fit = fit_ptf_lp(phi[ok], lab[ok]) if learner == "lp" else fit_ptf_ridge(phi[ok], lab[ok], ridge)
        weights.append(fit.weights)
        errors.append(fit.training_errors)
        labelled.append(int(ok.sum()))
    return HRSRelease(ts, tuple(weights), deg, None, learner, tuple(errors), tuple(labelled)), to


# --- Chebyshev PTF construction (HRS Claim 5.4, Corollary 5.5, Lemma 5.3) ---


def chebyshev_step_degree(k: int, eps: float) -> int:
    """deg s = ⌈√k⌉·⌈log2(1/ε)⌉ (Claim 5.4)."""
    kk = require_integer("k", k, 1)
    e = require_probability("eps", eps, high=0.5)
    return math.ceil(math.sqrt(kk)) * math.ceil(math.log2(1 / e))


def chebyshev_step(k: int, eps: float, j: np.ndarray) -> np.ndarray:
    """s(j) = (C_r((j/k)(1+1/k)) / C_r(1+1/k))^{⌈log2(1/ε)⌉}, r = ⌈√k⌉ (HRS Claim 5.4).

    Guarantee (Claim 5.4): s(k) = 1 and |s(j)| ≤ ε for integers 0 ≤ j ≤ k−1; a univariate polynomial
    of degree ``chebyshev_step_degree(k, ε)``.
    """
    kk = require_integer("k", k, 1)
    e = require_probability("eps", eps, high=0.5)
    r = math.ceil(math.sqrt(kk))
    p = math.ceil(math.log2(1 / e))
    coef = np.zeros(r + 1)
    coef[r] = 1.0
    x = np.asarray(j, dtype=np.float64) / kk * (1 + 1 / kk)
    return (npcheb.chebval(x, coef) / npcheb.chebval(1 + 1 / kk, coef)) ** p


def lemma53_ptf(db: np.ndarray, queries: np.ndarray, t: float, k: int) -> np.ndarray:
    """A(q) − (⌈tn⌉ − 1/2), A(q) = Σ_{u∈D} s(k − Σ_{i: u_i=0} q_i) with ε = 1/(3n) (Cor 5.5, Lemma 5.3).

    Guarantee (Lemma 5.3): on B_k = {q : |q| ≤ k}, its sign is f_t^D(q) = 1{f^D(q) ≥ t} (> 0 ⇔ 1);
    it is a polynomial in q of degree ⌈√k⌉·⌈log2(3n)⌉. Raises ``ValueError`` for queries outside B_k.
    """
    u = np.asarray(db, dtype=np.int64)
    q = np.asarray(queries, dtype=np.int64)
    kk = require_integer("k", k, 1)
    if np.any(q.sum(axis=1) > kk):
        raise ValueError(f"queries must lie in B_k (|q| ≤ k={kk}); got max |q| = {int(q.sum(axis=1).max())}")
    if not 0.0 <= t <= 1.0:
        raise ValueError(f"t must lie in [0, 1]; got t={t!r}")
    n = u.shape[0]
    level = kk - q @ (1 - u).T  # (b, n): L(q) = k − Σ_{i: u_i = 0} q_i
    a = chebyshev_step(kk, 1.0 / (3 * n), level).sum(axis=1)
    return a - (math.ceil(t * n - 1e-12) - 0.5)


# --- paper-mode parameters (HRS eqs. 6–8, Theorems 3.9 and 4.10) ---


@dataclass(frozen=True)
class PaperParameters:
    """Paper-mode constants of HRS PrivLearn; ``n_required`` is eq. (8). Never run at these sizes."""

    k: int
    gamma_prime: float
    beta_prime: float
    n_prime: float
    b_base: float
    b_iter: float
    b_total: float
    n_required: float
    n_laplace_all: float


def paper_parameters(
    alpha: float,
    beta: float,
    gamma: float,
    epsilon: float,
    log_q: float,
    n_features: int,
    theorem: str = "4.10",
) -> PaperParameters:
    """HRS eqs. (6)–(8): k = ⌈3/α⌉, γ' = γ/k, β' = β/(6k), n' = 4410·log|Q|/α²,
    b_base = (4/γ')(F·log2(12/γ') + log2(2/β')) (realizable PAC bound for the PTF class of VC
    dimension F = ``n_features``, spec §B5), b_iter = 100·b_base·ln(1/β')/γ, b_total = 2·b_iter
    (Theorem 4.10) or 2k·b_iter (Theorem 3.9), n ≥ 210·b_total·ln(10·b_total/β)/(εα).
    ``log_q`` is ln|Q|. ``n_laplace_all`` = |Q|·ln(|Q|/β)/(εα), Laplace on every query, for comparison.
    """
    a = require_probability("alpha", alpha, high=0.5)
    b = require_probability("beta", beta, high=0.5)
    g = require_probability("gamma", gamma, high=0.5)
    eps = require_epsilon(epsilon)
    lq = require_positive_finite("log_q", log_q)
    f = require_integer("n_features", n_features, 1)
    if theorem not in ("4.10", "3.9"):
        raise ValueError(f"theorem must be '4.10' or '3.9'; got theorem={theorem!r}")
    k = math.ceil(3 / a)
    gp, bp = g / k, b / (6 * k)
    n_prime = 4410 * lq / a**2
    b_base = (4 / gp) * (f * math.log2(12 / gp) + math.log2(2 / bp))
    b_iter = 100 * b_base * math.log(1 / bp) / g
    b_total = 2 * b_iter if theorem == "4.10" else 2 * k * b_iter
    n_req = 210 * b_total * math.log(10 * b_total / b) / (eps * a)
    size_q = math.exp(lq)
    return PaperParameters(k, gp, bp, n_prime, b_base, b_iter, b_total, n_req, size_q * math.log(size_q / b) / (eps * a))
