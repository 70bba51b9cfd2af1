"""MASKED-PARITY's interactive learner at its sharpest: round 1 reads ALL of r through one
correlation query per user, round 2 is KLNRS §5.1's a-query (issue 28).

KLNRS §5.1 (the paper's LI, ``ldp.learners.masked_parity.learn_masked_parity_interactive``, kept
unchanged and marked faithful) spends round 1 on d disjoint groups, group j asking the bit query
g_j = 1[i = j ∧ b = 1 ∧ y = −1]: a user whose index i ≠ j answers noise, so each bit sees 1/d of its
group's signal and the learner needs Θ(d³ log d/ε²) users. Here every round-1 user answers about
the coordinate it holds, whatever it is.

The correlation query
---------------------
A user of round-1 group k answers, through binary randomized response (ε), the bit

    g^{(k)}(x, i, b, y) = 1[b = 1 ∧ y = v^{(k)}_i],        v^{(k)} ∈ {±1}^d public,

"does my label agree with the public sign vector at my index i" (``correlation_query``). With
s_j = (−1)^{r_j}, E[g^{(k)}] = ¼ + (1/(4d))·⟨v^{(k)}, s⟩ (b = 1 w.p. ½, i uniform, y = s_i there;
b = 0 is excluded, so the r = 0 / a-dependent b = 0 half adds nothing). The aggregator correlates:
with T_k the number of 1-reports of group k (m users each),

    X_j = Σ_k v^{(k)}_j T_k,   E[X_j] = m(p − q)·(K/(4d))·s_j = n₁(p − q)s_j/(4d),

p = e^ε/(1 + e^ε) (keep), q = 1 − p, n₁ = K·m, and r_j = 1[X_j < 0]. The vectors v^{(k)} are the
columns 1..d of the K × K Sylvester–Hadamard matrix, K = 2^⌈log₂(d+1)⌉ (``correlation_design``):
a balanced public design instead of an independent random vector per user. Its columns are
orthogonal and sum to 0, so the constant ¼ and the other coordinates cancel *exactly* in X_j with
equal groups; i.i.d. random vectors give the same mean and a variance larger by their own
randomness. It also keeps the round to K ≤ 2d requests (one per group), which matters over gRPC.
(The query language has no per-user random vector; a Hadamard design needs none.)

Round 2 asks m₂ fresh users the a-query of the learned r (KLNRS §5.1: E = a/2, threshold ¼).

Sample size (``correlation_hoeffding_users``; a Lemma 4.3-style guarantee)
-------------------------------------------------------------------------
X_j is a sum of n₁ independent terms of range 1, so by Hoeffding
Pr[bit j wrong] ≤ exp(−2(n₁(p−q)/(4d))²/n₁) = exp(−n₁(p − q)²/(8d²)); the round-2 mean is
(p − q)/4 from its threshold, so Pr[a wrong] ≤ exp(−m₂(p − q)²/8). A union bound over d + 1
decisions with β₁ + β₂ = β (β₁ = β·d²/(d² + 1) minimizes the total) gives success ≥ 1 − β with

    n₁ = K·⌈8d²c² ln(d/β₁)/K⌉,   m₂ = ⌈8c² ln(1/β₂)⌉,   c = 1/(p − q) = (e^ε + 1)/(e^ε − 1),

i.e. Θ(d² log(d/β)/ε²) users at small ε — a factor ≈ d fewer than the paper's LI, whose d groups
each carry 1/d of the signal. The log-log slope of d² ln(d/β₁) between d = 8 and 24 is ≈ 2.2
("≈ d^2.3" in the issue): it is d² log d, not a new exponent.

``correlation_plan`` / ``correlation_users_for`` size the learner by its predicted success instead
(normal approximation with continuity correction for X_j, averaged over a uniform target;
exact binomial tails for round 2), the way ``lni_plan`` sizes the one-round learner; the
separation sweep compares measured sizes with that prediction.

Can it be beaten? Not by more than a constant and the log factor, we believe: each record
carries its one coordinate s_i on the b = 1 half only (the b = 0 half is a parity of x, useless
without 2^d users), so learning s is estimating d signs each present in 1/(2d) of the records
under ε-LDP, for which the Assouad-type χ² argument of docs/theorem51.md (per user, the χ² summed
over the d one-coordinate flips is O((e^ε − 1)²/(d(e^ε + 1))) when the b = 1 half alone is used)
gives Ω(d²/ε²). That lower bound is a sketch for the b = 1 half, not proved here for every
interactive protocol (docs/learners.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.linalg import hadamard
from scipy.stats import binom, norm

from ldp.core.concepts import MaskedParityConcept
from ldp.core.errors import ParameterError, require_epsilon, require_probability
from ldp.core.learner_result import LearnerResult
from ldp.core.queries import QuerySpec
from ldp.core.query_specs import affine, conjunction, label_query, product
from ldp.core.randomizers import RandomizerSpec
from ldp.core.rr_mechanisms import BinaryRandomizedResponse
from ldp.learners.masked_parity import a_query, best_group_size, li_allocation, lni_success, smallest_users, users_in_range
from ldp.local.messages import SessionKind
from ldp.local.oracle import LROracle
from ldp.local.session import Request, Session

__all__ = [
    "correlation_design",
    "correlation_query",
    "CorrelationPlan",
    "correlation_success",
    "correlation_plan",
    "correlation_users_for",
    "correlation_hoeffding_users",
    "learn_masked_parity_correlation",
    "li_predicted_success",
    "li_users_for",
    "rr_keep_flip",
]


def _check_d(d: int) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 2 <= d <= 62:
        raise ParameterError(f"MASKED-PARITY needs an integer d in [2, 62], got d={d!r}")
    return int(d)


def rr_keep_flip(epsilon: float) -> tuple[float, float]:
    """(p, q): the realized keep and flip probabilities of binary RR at ε (what the users run):
    the one place the MASKED-PARITY learners, their plans and their law take them from."""
    rr = BinaryRandomizedResponse(require_epsilon(epsilon))
    return rr.keep_probability, rr.flip_probability


@lru_cache(maxsize=64)
def _design(d: int) -> np.ndarray:
    k = 1 << int(d).bit_length()  # the smallest power of two ≥ d + 1
    h = hadamard(k).astype(np.int64)[:, 1 : d + 1]
    h.setflags(write=False)
    return h


def correlation_design(d: int) -> np.ndarray:
    """The public sign vectors v^{(k)}, one row per round-1 group: columns 1..d of the K × K
    Sylvester–Hadamard matrix, K = 2^⌈log₂(d + 1)⌉ (the all-ones column 0 is left out).

    Columns are orthogonal (Σ_k v_j v_l = K·δ_jl) and sum to 0, so with equal groups the
    correlation X_j = Σ_k v^{(k)}_j T_k has mean n₁(p − q)s_j/(4d) exactly (module docstring)."""
    return _design(_check_d(d))


def correlation_query(v: Sequence[int] | np.ndarray) -> QuerySpec:
    """g(x, i, b, y) = 1[b = 1 ∧ y = v_i] ∈ {0, 1} for a public v ∈ {±1}^d: E = ¼ + ⟨v, s⟩/(4d).

    Written as 1[b = 1]·(1 + y·v_i)/2 with v_i = 2·1[i ∉ S] − 1, S = {j : v_j = −1} (a conjunction
    of "i ≠ j" literals; an empty S means v ≡ +1)."""
    v = np.asarray(v, dtype=np.int64)
    if v.ndim != 1 or not np.isin(v, (-1, 1)).all():
        raise ParameterError(f"correlation_query: v must be a ±1 vector, got {v.tolist()!r}")
    return _correlation_query(tuple(int(j) for j in np.flatnonzero(v == -1)))


@lru_cache(maxsize=4096)
def _correlation_query(minus: tuple[int, ...]) -> QuerySpec:
    """``correlation_query`` of the v whose −1 entries are ``minus``, remembered: a sweep asks the
    same K specs in thousands of trials, and building one cost more than a small trial's round."""
    if not minus:
        return conjunction(("b", 0, 1), ("y", 0, 1))
    sign_at_i = affine(conjunction(*[("i", 0, j, False) for j in minus]), 2.0, -1.0)
    return product(conjunction(("b", 0, 1)), affine(product(label_query(), sign_at_i), 0.5, 0.5))


@dataclass(frozen=True)
class CorrelationPlan:
    """How the correlation learner spends n users: ``groups`` = K round-1 groups of ``m`` users
    (n₁ = K·m), then ``m2`` round-2 users; ``predicted_success`` is ``correlation_success``."""

    d: int
    n: int
    groups: int
    m: int
    m2: int
    predicted_success: float

    @property
    def n1(self) -> int:
        return self.groups * self.m

    @property
    def users(self) -> int:
        return self.n1 + self.m2


def _bit_miss(d: int, p: float, q: float, n1: np.ndarray) -> np.ndarray:
    """Normal approximation (continuity-corrected) of Pr[r_j wrong], averaged over r_j and over
    a uniform target: X_j has mean ±μ, μ = n₁(p − q)/(4d), and variance Σ_k m·w_k(1 − w_k) with
    w_k = q + (p − q)(¼ + ⟨v^{(k)}, s⟩/(4d)); over uniform s, E[w(1 − w)] = w₀(1 − w₀) − (p−q)²/(16d),
    w₀ = q + (p − q)/4. s_j = +1 errs when X_j ≤ −1, s_j = −1 when X_j ≥ 0."""
    n1 = np.asarray(n1, dtype=np.float64)
    w0 = q + (p - q) / 4
    var = n1 * (w0 * (1 - w0) - (p - q) ** 2 / (16 * d))
    mu = n1 * (p - q) / (4 * d)
    with np.errstate(divide="ignore", invalid="ignore"):
        sd = np.sqrt(np.maximum(var, 1e-300))
        miss = 0.5 * (norm.sf((mu + 0.5) / sd) + norm.sf((mu - 0.5) / sd))
    return np.where(n1 > 0, miss, 0.5)


def _a_miss(p: float, q: float, m2: np.ndarray) -> np.ndarray:
    """Exact Pr[a wrong] for round 2 (uniform a): a = 1[T/m₂ > q + (p − q)/4], T ~ Bin(m₂, q + (p − q)a/2)."""
    m2 = np.asarray(m2, dtype=np.int64)
    thr = np.floor(m2 * (q + (p - q) / 4))
    miss = 0.5 * (binom.sf(thr, m2, q) + binom.cdf(thr, m2, q + (p - q) / 2))
    return np.where(m2 > 0, miss, 0.5)


def correlation_success(d: int, epsilon: float, m: np.ndarray | int, m2: np.ndarray | int) -> np.ndarray:
    """Predicted Pr[exact target] of ``learn_masked_parity_correlation`` with K groups of m users
    and m₂ round-2 users, over a uniform target: (1 − Pr[bit wrong])^d · (1 − Pr[a wrong]).

    The d correlations share the reports but have orthogonal weights, so they are uncorrelated
    up to the O(1/d²) spread of w_k: the product is the prediction the tests check."""
    d = _check_d(d)
    p, q = rr_keep_flip(epsilon)
    n1 = np.asarray(m, dtype=np.int64) * (1 << d.bit_length())
    return np.asarray((1 - _bit_miss(d, p, q, n1)) ** d * (1 - _a_miss(p, q, np.asarray(m2))))


@lru_cache(maxsize=4096)
def correlation_plan(n: int, d: int, epsilon: float) -> CorrelationPlan:
    """The split of n users (K·m + m₂ ≤ n, m₂ ≥ 1) that maximizes ``correlation_success``.

    The a decision needs ≈ 8c² ln(1/β₂) users whatever d is (a few hundred at ε = 1), so almost
    all users go to round 1; users left over by the multiple of K go to round 2."""
    d = _check_d(d)
    n = int(n)
    k = 1 << d.bit_length()
    if n < k + 1:
        raise ParameterError(f"the correlation learner needs ≥ K + 1 = {k + 1} users at d={d} (one per group and one for a), got {n}")
    per_group, predicted = best_group_size(n, k, lambda m, rest: correlation_success(d, epsilon, m, rest))
    return CorrelationPlan(d, n, k, per_group, n - k * per_group, predicted)


def correlation_users_for(d: int, epsilon: float, success: float = 0.95) -> int:
    """The smallest n (to 0.5 %) whose ``correlation_plan`` predicts ``success``."""
    d = _check_d(d)
    target = require_probability("success", success)
    return smallest_users(lambda n: correlation_plan(n, d, epsilon).predicted_success, (1 << d.bit_length()) + 1, target)


def correlation_hoeffding_users(d: int, epsilon: float, beta: float) -> tuple[int, int]:
    """(n₁, m₂): users that GUARANTEE success ≥ 1 − β on every target (Hoeffding + union bound).

    n₁ = K·⌈8d²c² ln(d/β₁)/K⌉, m₂ = ⌈8c² ln(1/β₂)⌉ with c = (e^ε + 1)/(e^ε − 1) (realized
    1/(p − q)), β₁ = β·d²/(d² + 1), β₂ = β − β₁ (module docstring). The counterpart of
    ``li_lemma43_users`` for the paper's LI."""
    d = _check_d(d)
    b = require_probability("beta", beta)
    p, q = rr_keep_flip(epsilon)
    c2 = 1.0 / (p - q) ** 2
    k = 1 << d.bit_length()
    b1 = b * d * d / (d * d + 1)
    b2 = b - b1
    n1 = k * math.ceil(8 * d * d * c2 * math.log(d / b1) / k)
    m2 = math.ceil(8 * c2 * math.log(1 / b2))
    return n1, m2


def li_predicted_success(n: int, d: int, epsilon: float) -> float:
    """Predicted Pr[exact target] of the paper's LI (``learn_masked_parity_interactive``, faithful
    to KLNRS §5.1) with n users: d bit groups of m₁ and an a-group of m₂ (``li_allocation``).

    The same normal approximation as ``lni_success``, which scores a one-round learner whose
    target's a-group has m₂ users: with a_users = m₂·2^d every candidate group has exactly m₂."""
    d = _check_d(d)
    m1, m2 = li_allocation(int(n), d)
    return float(lni_success(d, float(epsilon), m1, m2 * 2**d))


def li_users_for(d: int, epsilon: float, success: float = 0.95) -> int:
    """The smallest n (to 0.5 %) whose ``li_predicted_success`` reaches ``success``: the paper's
    LI sized by the same rule as ``correlation_users_for``, for a like-for-like comparison."""
    d = _check_d(d)
    target = require_probability("success", success)
    return smallest_users(lambda n: li_predicted_success(n, d, epsilon), d + 1, target)


async def learn_masked_parity_correlation(
    lr: LROracle,
    d: int,
    epsilon: float,
    *,
    users: int | None = None,
    first_user: int = 0,
    name: str = "masked-parity-LI-correlation",
) -> LearnerResult:
    """The correlation learner as a 2-round INTERACTIVE local protocol over ``users`` users.

    Round 1: K groups of m users (``correlation_plan``), group k asks ``correlation_query(v^{(k)})``
    through binary RR; r_j = 1[Σ_k v^{(k)}_j T_k < 0]. Round 2: m₂ fresh users answer the §5.1
    a-query of the learned r; a = 1[debiased mean > ¼]. Each user answers one query once with ε,
    so the protocol is ε-LDP per user. Works against any ``LROracle`` (in process or gRPC).

    Returns a ``LearnerResult`` with ``details``: m, groups, m2, predicted_success, the
    correlations X_j and the a estimate.
    """
    d = _check_d(d)
    n = users_in_range(lr, users, first_user)
    plan = correlation_plan(n, d, float(epsilon))
    design = correlation_design(d)
    session = Session(lr, SessionKind.INTERACTIVE, name=name)
    first = [
        Request.of(range(first_user + k * plan.m, first_user + (k + 1) * plan.m), RandomizerSpec("binary_rr", correlation_query(design[k]), epsilon))
        for k in range(plan.groups)
    ]
    reports = await session.round(first, last=False)
    counts = np.array([int(np.count_nonzero(np.asarray(rep.values))) for rep in reports], dtype=np.int64)
    answered = np.array([len(rep.values) for rep in reports], dtype=np.int64)
    # Centre each group at its target-free mean w₀ = q + (p − q)/4 per answer. With every group
    # complete, answered @ design is exactly 0 (the columns sum to 0), so X_j is the integer
    # Σ_k v_j T_k the prediction is about; a group short of answers (users over budget) is still
    # centred, so the constant ¼ does not leak into X_j.
    p, q = rr_keep_flip(epsilon)
    correlations = counts @ design - (q + (p - q) / 4) * (answered @ design)
    r = (correlations < 0).astype(np.int64)
    start = first_user + plan.n1
    (rep2,) = await session.round([Request.of(range(start, start + plan.m2), RandomizerSpec("binary_rr", a_query(r), epsilon))], last=True)
    a_est = float(np.mean(BinaryRandomizedResponse(epsilon).estimate(np.asarray(rep2.values)))) if len(rep2.values) else 0.0
    a = int(a_est > 0.25)
    return LearnerResult(
        MaskedParityConcept(tuple(int(v) for v in r), a),
        users=plan.users,
        rounds=2,
        queries=plan.groups + 1,
        epsilon=float(epsilon),
        details={
            "groups": plan.groups,
            "m": plan.m,
            "m2": plan.m2,
            "predicted_success": plan.predicted_success,
            "correlations": correlations.tolist(),
            "answered": answered.tolist(),
            "a_estimate": a_est,
        },
        algorithm="masked-parity-LI-correlation",
        model="local-interactive",
    )
