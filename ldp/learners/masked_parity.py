"""MASKED-PARITY (KLNRS §5): learnable by a 2-round interactive local protocol, not by a
non-interactive one without exponentially many users.

c_{r,a}(x, i, b) = (−1)^{⟨r,x⟩+a} if b = 0, (−1)^{r_i} if b = 1; x uniform in {0,1}^d, i uniform in
[0, d−1], b uniform (records: x, i, b, y with y ∈ {−1, +1}).

Learners
--------
* ``learn_masked_parity_sq(oracle)`` — the adaptive SQ learner of §5.1, against any ``SQOracle``.
  Through ``ldp.sq.local.LocalSQOracle(adaptive=True)`` it *is* the interactive local protocol of
  Theorem 4.8 / Lemma 4.3 (fresh users per query).
  Step 1: g_j = 1[i = j ∧ b = 1 ∧ y = −1], j < d, tolerance τ < 1/(4d): E[g_j] = r_j/(2d)
  (the paper prints "1/2^d"; it is 1/(2d)), so r_j = 1[answer > 1/(4d)].
  Step 2: g_d = 1[b = 0 ∧ y ≠ (−1)^{⟨r,x⟩}], τ < 1/4: E[g_d] = a/2, so a = 1[answer > 1/4].
* ``learn_masked_parity_interactive(lr, d, ε)`` — the same protocol written directly against an
  ``LROracle`` for a *given* number of users n (what the separation search varies): round 1 asks d
  disjoint groups of m1 users for g_j through binary randomized response, round 2 asks m2 fresh
  users for g_d. The thresholds are 1/(4d) and 1/4, so group sizes are split m1 : m2 = d² : 1
  (equal signal-to-noise per decision): m1 = ⌊n·d²/(d³+1)⌋. Users needed: Θ(d³/ε²) (times log d).
* ``learn_masked_parity_lni_candidates`` (LNI (a)) — one non-interactive round that fixes every
  query in advance: the d bit queries plus the a-query g_d^{(r')} for K candidate vectors r',
  each on its own group. K is as large as the population affords (a group of ``a_query_group``
  users per candidate after the bit groups); candidates are a uniformly random, data-independent
  set. If the estimated r is a candidate, a is read from its group; otherwise a is a fair coin.
  It learns only once K = 2^d, i.e. with ≈ (d³ + 2^d)·m users: exponential in d.
* ``learn_masked_parity_lni_record`` (LNI (b)) — every user randomizes its whole record once
  (``record_rr``: k-ary RR per column with ε/(d+3)); the aggregator then computes unbiased
  estimates of anything it likes by inverting the per-column channels. r_j comes from the
  (i, y) marginal: E[y·1[i=j]] = (−1)^{r_j}/(2d) when r ≠ 0 (2 columns); a needs E[y·(−1)^{⟨r,x⟩}] = (−1)^a/2 (r ≠ 0), a product over
  |r| + 1 columns whose unbiased estimator is scaled by 1/(p−q)^{|r|+1} with
  p − q = tanh(ε/(2(d+3))) ≈ ε/(2(d+3)): users needed ≈ (2(d+3)/ε)^{2(|r|+1)}, i.e. d^{Θ(d)}.

Why the non-interactive learners fail (Theorem 5.1): a query fixed before any answer cannot
depend on r, and on the b = 0 half the 2^{d+1} concepts are ± orthogonal parities: a query g
correlates (beyond τ) with c_{r,·} for at most one r, so each non-adaptive query rules out at most
the two pairs (r, 0), (r, 1). Learning a therefore takes ≥ 2^d − 1 queries, i.e. (Lemma 4.3 /
Lemma 4.4) exponentially many users. LNI (a) pays for all of them; LNI (b) spreads ε over the
record, and the information about a sits in a (d+2)-column interaction whose signal decays like
(ε/(d+3))^{|r|+1}. Both output a coin for a below that — error ≈ 1/4 on average (1/2 on the b = 0
half).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy.stats import norm

from ldp.core.concepts import MaskedParityConcept, concept_class
from ldp.core.errors import ParameterError
from ldp.core.queries import QuerySpec, affine, conjunction, label_query, parity, product, record_query
from ldp.core.schema import Schema
from ldp.core.randomizers import BinaryRandomizedResponse, LocalRandomizer, RandomizerSpec, RecordRandomizedResponse
from ldp.local.messages import SessionKind
from ldp.local.oracle import LROracle
from ldp.local.session import Request, Session
from ldp.learners.results import LearnerResult
from ldp.sq.bounds import users_per_query
from ldp.sq.oracle import SQOracle

__all__ = [
    "bit_query",
    "a_query",
    "learn_masked_parity_sq",
    "learn_masked_parity_interactive",
    "learn_masked_parity_lni_candidates",
    "learn_masked_parity_lni_record",
    "li_allocation",
    "lni_candidates_plan",
    "a_query_group",
    "li_lemma43_users",
    "lni_lemma43_users",
    "TOLERANCE_MARGIN",
]

TOLERANCE_MARGIN = 0.95
"""The SQ learner asks with τ = margin/(4d) and margin/4 (strictly below the paper's bounds)."""


def bit_query(j: int) -> QuerySpec:
    """g_j(x, i, b, y) = 1[i = j ∧ b = 1 ∧ y = −1]; E[g_j] = r_j/(2d)."""
    return conjunction(("i", 0, int(j)), ("b", 0, 1), ("y", 0, -1))


def a_query(r: Sequence[int] | np.ndarray) -> QuerySpec:
    """g_d^{(r)} = 1[b = 0 ∧ y ≠ (−1)^{⟨r,x⟩}] ∈ {0,1}; E = a/2 if r is the target's vector, else 1/4."""
    mask = np.asarray(r, dtype=bool)
    return product(conjunction(("b", 0, 0)), affine(product(label_query(), parity(mask)), -0.5, 0.5))


def _check_d(d: int) -> int:
    if d < 2 or d & (d - 1):
        raise ParameterError(f"MASKED-PARITY needs d a power of 2 and ≥ 2 (KLNRS §5), got d={d}")
    return int(d)


def _concept(r: np.ndarray, a: int) -> MaskedParityConcept:
    return MaskedParityConcept(tuple(int(v) for v in r), int(a))


# --- the adaptive SQ learner (§5.1) ---


async def learn_masked_parity_sq(
    oracle: SQOracle, d: int, *, confidence: float = 0.99, margin: float = TOLERANCE_MARGIN
) -> LearnerResult:
    """KLNRS §5.1 against any SQ oracle: two adaptive steps (d queries at τ = margin/(4d), then one
    at τ = margin/4). Exact with probability ≥ ``confidence`` (each step gets √confidence)."""
    d = _check_d(d)
    if not 0.0 < margin < 1.0:
        raise ParameterError(f"margin must be in (0, 1) so that τ < 1/(4d), got {margin}")
    step_conf = math.sqrt(confidence)
    users0, steps0, queries0 = oracle.users_used, oracle.steps, oracle.queries_asked
    bits = await oracle.ask([bit_query(j) for j in range(d)], margin / (4 * d), step_conf)
    r = (bits > 1.0 / (4 * d)).astype(np.int64)
    (a_answer,) = await oracle.ask([a_query(r)], margin / 4, step_conf)
    a = int(a_answer > 0.25)
    return LearnerResult(
        _concept(r, a),
        users=oracle.users_used - users0,
        rounds=oracle.steps - steps0,
        queries=oracle.queries_asked - queries0,
        epsilon=float(getattr(oracle, "epsilon", math.inf)),
        details={"bit_answers": bits.tolist(), "a_answer": float(a_answer)},
        algorithm="masked-parity-SQ",
        model="sq",
    )


# --- direct local protocols for a given number of users ---


def li_allocation(n: int, d: int) -> tuple[int, int]:
    """(m1, m2): users per round-1 group (d groups) and for round 2; m1 : m2 ≈ d² : 1."""
    d = _check_d(d)
    if n < d + 1:
        raise ParameterError(f"the interactive MASKED-PARITY learner needs ≥ d + 1 = {d + 1} users, got {n}")
    m1 = max(1, (n * d * d) // (d**3 + 1))
    while d * m1 + 1 > n:
        m1 -= 1
    return m1, n - d * m1


def _users(lr: LROracle, users: int | None, first_user: int) -> int:
    available = lr.user_count - first_user
    n = available if users is None else int(users)
    if not 1 <= n <= available:
        raise ParameterError(f"users must be in [1, {available}] (users {first_user}.. of {lr.user_count}), got {users}")
    return n


def _rr_mean(values: np.ndarray, epsilon: float) -> float:
    if len(values) == 0:
        return 0.0
    return float(np.mean(BinaryRandomizedResponse(epsilon).estimate(values)))


async def learn_masked_parity_interactive(
    lr: LROracle, d: int, epsilon: float, *, users: int | None = None, first_user: int = 0, name: str = "masked-parity-LI"
) -> LearnerResult:
    """The §5.1 learner as a 2-round INTERACTIVE local protocol over ``users`` users (binary RR, ε each).

    Each user answers exactly one query, once, with ε (so the protocol is ε-LDP per user).
    """
    d = _check_d(d)
    n = _users(lr, users, first_user)
    m1, m2 = li_allocation(n, d)
    session = Session(lr, SessionKind.INTERACTIVE, name=name)
    first = [
        Request.of(range(first_user + j * m1, first_user + (j + 1) * m1), RandomizerSpec("binary_rr", bit_query(j), epsilon))
        for j in range(d)
    ]
    reports = await session.round(first, last=False)
    bits = np.array([_rr_mean(rep.values, epsilon) for rep in reports])
    r = (bits > 1.0 / (4 * d)).astype(np.int64)
    start = first_user + d * m1
    (rep2,) = await session.round([Request.of(range(start, start + m2), RandomizerSpec("binary_rr", a_query(r), epsilon))], last=True)
    a_est = _rr_mean(rep2.values, epsilon)
    a = int(a_est > 0.25)
    return LearnerResult(
        _concept(r, a),
        users=n,
        rounds=2,
        queries=d + 1,
        epsilon=float(epsilon),
        details={"m1": m1, "m2": m2, "bit_estimates": bits.tolist(), "a_estimate": a_est},
        algorithm="masked-parity-LI",
        model="local-interactive",
    )


def a_query_group(d: int, epsilon: float, beta: float = 0.1) -> int:
    """Users per query group that make a binary-RR decision at margin 1/4 fail w.p. ≤ β/(d + 2^d)
    (normal approximation; the per-report estimator has variance ≤ 1/(4(p−q)²))."""
    d = _check_d(d)
    p = 1.0 / (1.0 + math.exp(-epsilon))
    sigma2 = 1.0 / (4.0 * (2 * p - 1) ** 2)
    z = float(norm.isf(beta / (2.0 * (d + 2.0**d))))
    return max(1, math.ceil(z * z * sigma2 / 0.25**2))


def lni_candidates_plan(n: int, d: int, epsilon: float, beta: float = 0.1) -> tuple[int, int, int]:
    """(K, m_bit, m_a) for LNI (a): K candidates, d bit groups of m_bit, K a-groups of m_a.

    With unit u = ``a_query_group``: K = min(2^d, ⌊n/u⌋ − d³) (at least 1), then the n users are
    split d² : 1 between each bit group and each a-group (as in the interactive learner).
    """
    d = _check_d(d)
    if n < d + 1:
        raise ParameterError(f"LNI (a) needs ≥ d + 1 = {d + 1} users, got {n}")
    u = a_query_group(d, epsilon, beta)
    k = int(min(2**d, max(1, n // u - d**3)))
    unit = n // (d**3 + k)
    if unit >= 1:
        m_bit, m_a = d * d * unit, unit
    else:  # fewer users than weights: one a-group of ≥ 1, the rest to the bits
        k, m_a = 1, 1
        m_bit = max(1, (n - 1) // d)
    while d * m_bit + k * m_a > n:
        m_bit -= 1
    return k, m_bit, m_a


def _candidates(d: int, k: int, rng: np.random.Generator) -> np.ndarray:
    if k >= 2**d:
        ints = np.arange(2**d)
    else:
        ints = np.sort(rng.choice(2**d, size=k, replace=False))
    return ((ints[:, None] >> np.arange(d - 1, -1, -1)) & 1).astype(np.int64)


async def learn_masked_parity_lni_candidates(
    lr: LROracle,
    d: int,
    epsilon: float,
    rng: np.random.Generator,
    *,
    users: int | None = None,
    first_user: int = 0,
    beta: float = 0.1,
    name: str = "masked-parity-LNI-a",
) -> LearnerResult:
    """LNI (a): one NON_INTERACTIVE round of d bit queries + a-queries for K fixed candidates."""
    d = _check_d(d)
    n = _users(lr, users, first_user)
    k, m_bit, m_a = lni_candidates_plan(n, d, epsilon, beta)
    candidates = _candidates(d, k, rng)  # chosen before any reply: data-independent
    requests = [
        Request.of(range(first_user + j * m_bit, first_user + (j + 1) * m_bit), RandomizerSpec("binary_rr", bit_query(j), epsilon))
        for j in range(d)
    ]
    start = first_user + d * m_bit
    requests += [
        Request.of(range(start + c * m_a, start + (c + 1) * m_a), RandomizerSpec("binary_rr", a_query(candidates[c]), epsilon))
        for c in range(k)
    ]
    session = Session(lr, SessionKind.NON_INTERACTIVE, name=name)
    reports = await session.round(requests)
    bits = np.array([_rr_mean(rep.values, epsilon) for rep in reports[:d]])
    r = (bits > 1.0 / (4 * d)).astype(np.int64)
    hit = np.flatnonzero(np.all(candidates == r[None, :], axis=1))
    if hit.size:
        a_est = _rr_mean(reports[d + int(hit[0])].values, epsilon)
        a, how = int(a_est > 0.25), "candidate"
    else:
        a_est, a, how = None, int(rng.integers(0, 2)), "coin"
    return LearnerResult(
        _concept(r, a),
        users=d * m_bit + k * m_a,
        rounds=1,
        queries=d + k,
        epsilon=float(epsilon),
        details={"candidates": k, "m_bit": m_bit, "m_a": m_a, "a_from": how, "a_estimate": a_est, "bit_estimates": bits.tolist()},
        algorithm="masked-parity-LNI-a",
        model="local-non-interactive",
    )


def _unbiased_indicator(reports_col: np.ndarray, value: int, p: float, q: float) -> np.ndarray:
    """Per-report unbiased estimate of 1[z_col = value] under k-ary RR: (1[w = value] − q)/(p − q)."""
    return ((reports_col == value).astype(np.float64) - q) / (p - q)


async def learn_masked_parity_lni_record(
    lr: LROracle,
    d: int,
    epsilon: float,
    rng: np.random.Generator,
    *,
    users: int | None = None,
    first_user: int = 0,
    name: str = "masked-parity-LNI-b",
) -> LearnerResult:
    """LNI (b): every user sends its whole record once through ``record_rr`` (ε/(d+3) per column);
    r_j and a are then read off unbiased product estimators (see the module docstring)."""
    d = _check_d(d)
    n = _users(lr, users, first_user)
    session = Session(lr, SessionKind.NON_INTERACTIVE, name=name)
    spec = RandomizerSpec("record_rr", record_query(), epsilon)
    (rep,) = await session.round([Request.of(range(first_user, first_user + n), spec)])
    w = np.asarray(rep.values, dtype=np.int64)
    randomizer = LocalRandomizer.build(spec, _schema(lr, d)).randomizer
    assert isinstance(randomizer, RecordRandomizedResponse)
    eps_c = randomizer.column_epsilon
    col_i, col_y = d, d + 2
    p2, q2 = randomizer.column_probabilities(col_y)  # the realized probabilities of each column
    pd_, qd_ = randomizer.column_probabilities(col_i)  # b is not needed: averaging over it costs no bias and saves a column inverse
    scale = p2 - q2  # E[report] = (p−q)·value for a ±1-valued column under binary RR
    # r_j: E[y·1[i=j]] = ((−1)^{r_j} + 1[r=0]·(−1)^a)/(2d) (the b = 0 half averages out unless
    # r = 0): two columns, so the estimator is scaled by 1/((p_i−q_i)(p−q)) only.
    y_hat = w[:, col_y].astype(np.float64) / scale
    bits = np.array([float(np.mean(_unbiased_indicator(w[:, col_i], j, pd_, qd_) * y_hat)) * 2 * d for j in range(d)])
    # The estimate of bit j has mean −1 when r_j = 1, and +1, +2 or 0 when r_j = 0 (r ≠ 0; r = 0,
    # a = 0; r = 0, a = 1): the threshold is the midpoint of −1 and the nearest of those, 0.
    r = (bits < -0.5).astype(np.int64)
    # a: E[y·(−1)^{⟨r,x⟩}] = (−1)^a/2 when r ≠ 0 (the b = 1 half averages out over x), and
    # (−1)^a/2 + 1/2 when r = 0; an unbiased estimator multiplies |r| + 1 column inverses.
    support = np.flatnonzero(r)
    signs = w[:, col_y].astype(np.float64) / scale
    if support.size:
        signs = signs * np.prod(1.0 - 2.0 * w[:, support], axis=1) / scale**support.size
    a_est = float(np.mean(signs))
    threshold = 0.0 if support.size else 0.5
    a = int(a_est < threshold)
    return LearnerResult(
        _concept(r, a),
        users=n,
        rounds=1,
        queries=1,
        epsilon=float(epsilon),
        details={
            "column_epsilon": eps_c,
            "bit_estimates": bits.tolist(),
            "a_estimate": a_est,
            "a_estimator_scale": float(scale ** -(support.size + 1)),
        },
        algorithm="masked-parity-LNI-b",
        model="local-non-interactive",
    )


def _schema(lr: LROracle, d: int) -> Schema:
    """The MASKED-PARITY record schema (from the oracle's population when it has one)."""
    population = getattr(lr, "population", None)
    if population is not None:
        return population.schema
    return concept_class("masked_parity", d).schema


# --- Lemma 4.3 bounds (explicit constants from ldp.sq.bounds, ±1 randomized response) ---


def li_lemma43_users(d: int, epsilon: float, beta: float, margin: float = TOLERANCE_MARGIN) -> int:
    """Users the §5.1 learner needs through Lemma 4.3 (n_0 per query, fresh users; β/2 per step)."""
    step1 = users_per_query(1.0, epsilon, margin / (4 * d), beta / 2, "pm_rr", queries=d) * d
    step2 = users_per_query(1.0, epsilon, margin / 4, beta / 2, "pm_rr", queries=1)
    return int(step1 + step2)


def lni_lemma43_users(d: int, epsilon: float, beta: float, margin: float = TOLERANCE_MARGIN) -> int:
    """Users the non-adaptive algorithm with all 2^d candidates needs through Lemma 4.3."""
    t = d + 2**d
    return int(
        d * users_per_query(1.0, epsilon, margin / (4 * d), beta, "pm_rr", queries=t)
        + 2**d * users_per_query(1.0, epsilon, margin / 4, beta, "pm_rr", queries=t)
    )
