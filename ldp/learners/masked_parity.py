"""MASKED-PARITY (KLNRS §5): learnable by a 2-round interactive local protocol, not by a
non-interactive one without exponentially many users.

c_{r,a}(x, i, b) = (−1)^{⟨r,x⟩+a} if b = 0, (−1)^{r_i} if b = 1; x uniform in {0,1}^d, i uniform in
[0, d−1], b uniform (records: x, i, b, y with y ∈ {−1, +1}). KLNRS take d a power of 2 so that i
is log d bits of a uniform string; here i is a field with d values, so any d ≥ 2 works (the
separation sweep uses d = 20 and 24).

Learners
--------
* ``learn_masked_parity_sq(oracle)`` — the adaptive SQ learner of §5.1, against any ``SQOracle``.
  Through ``ldp.sq.local_sq_oracle.LocalSQOracle(adaptive=True)`` it *is* the interactive local protocol of
  Theorem 4.8 / Lemma 4.3 (fresh users per query).
  Step 1: g_j = 1[i = j ∧ b = 1 ∧ y = −1], j < d, tolerance τ < 1/(4d): E[g_j] = r_j/(2d)
  (the paper prints "1/2^d"; it is 1/(2d)), so r_j = 1[answer > 1/(4d)].
  Step 2: g_d = 1[b = 0 ∧ y ≠ (−1)^{⟨r,x⟩}], τ < 1/4: E[g_d] = a/2, so a = 1[answer > 1/4].
* ``learn_masked_parity_interactive(lr, d, ε)`` (LI) — the same protocol written directly against
  an ``LROracle`` for a *given* number of users n (what the separation search varies): round 1
  asks d disjoint groups of m1 users for g_j through binary randomized response, round 2 asks m2
  fresh users for g_d. The thresholds are 1/(4d) and 1/4, so group sizes are split
  m1 : m2 = d² : 1 (equal signal-to-noise per decision): m1 = ⌊n·d²/(d³+1)⌋. Users needed:
  Θ(d³ log d/ε²). Faithful to §5.1 and kept as printed; the sharper interactive learner, one
  correlation query per user in round 1 (Θ(d² log d/ε²) users), is
  ``ldp.learners.masked_parity_correlation.learn_masked_parity_correlation``.
* ``learn_masked_parity_lni(lr, d, ε, rng)`` (LNI) — the fair one-round learner, the strongest
  non-interactive one we know: one round of the d bit queries and the a-query of *every* one of
  the 2^d candidates r (``a_query_family``: one request, users split evenly over the candidates),
  sized by ``lni_plan``, which picks the bit-group size that maximizes the predicted success.
  Only the a-group of the estimated r is read, so each group needs only the margin of one
  decision: ≈ 60 users per candidate for 95 % at ε = 1, n ≈ 60·2^d at large d. Putting all the
  a-users on a single bent query instead (``ldp.learners.theorem51.bent_query``) costs the same:
  its correlation with each parity is 2^{−d/2}, so it needs 2^d times the users of one group.
* ``learn_masked_parity_lni_record`` (LNI-b) — a *generic release*, not a witness of the
  separation: every user randomizes its whole record once (``record_rr``: k-ary RR per column
  with ε/(d+3)), and the aggregator reads r and a off unbiased product estimators. r_j comes
  from the (i, y) marginal (2 columns); a needs E[y·(−1)^{⟨r,x⟩}] = (−1)^a/2 (r ≠ 0), a product over
  |r| + 1 columns scaled by 1/(p−q)^{|r|+1} with p − q ≈ ε/(2(d+3)): users needed
  ≈ (2(d+3)/ε)^{2(|r|+1)}, i.e. d^{Θ(d)}. It fails already at d = 2 and 4, where LNI succeeds
  with about a thousand users, because it splits ε over d + 3 columns — its failure says nothing
  about interaction.

Why every non-interactive learner needs ≈ 2^d users (KLNRS Theorem 5.1, corrected; the derivation
is in docs/theorem51.md and ``ldp.learners.theorem51``). The paper argues that each non-adaptive
query "correlates beyond τ with at most one r"; that is false for τ < 1/4 (a bent query
correlates 2^{−d/2} with every parity, and at d = 16 seventeen queries at τ = 9·10^-4 ≥ 2^{−2d/3}
learn every target). What is true: a query separates (r, 0) from (r, 1) for fewer than 1/(16τ²)
vectors r (Parseval), and for a local randomizer the sum over r of the χ² divergences between
(r, 0) and (r, 1) is at most (e^ε − 1)²/4 per user. A non-interactive protocol's users answer
randomizers fixed in advance, so Bretagnolle–Huber over the 2^d vectors gives
n ≥ 4·2^d·ln(1/(4β))/(e^ε − 1)² (``ldp.learners.theorem51.lni_users_lower_bound``). An
interactive protocol escapes it: round 2's randomizer depends on r.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.stats import norm

from ldp.core.concepts import MaskedParityConcept, bits_to_int, concept_class
from ldp.core.errors import ParameterError
from ldp.core.learner_result import LearnerResult
from ldp.core.queries import QuerySpec, user_parity_groups
from ldp.core.query_specs import affine, conjunction, label_query, parity, product, record_query, user_parity
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rr_mechanisms import BinaryRandomizedResponse, RecordRandomizedResponse
from ldp.core.schema import Schema
from ldp.local.messages import SessionKind
from ldp.local.oracle import LROracle, Reports
from ldp.local.session import Request, Session
from ldp.sq.bounds import users_per_query
from ldp.sq.sq_oracle import SQOracle

__all__ = [
    "bit_query",
    "a_query",
    "learn_masked_parity_sq",
    "learn_masked_parity_interactive",
    "a_query_family",
    "learn_masked_parity_lni",
    "learn_masked_parity_lni_record",
    "li_allocation",
    "LNIPlan",
    "lni_plan",
    "lni_success",
    "lni_estimate_r",
    "lni_result",
    "best_group_size",
    "lni_users_for",
    "li_lemma43_users",
    "lni_lemma43_users",
    "TOLERANCE_MARGIN",
]

TOLERANCE_MARGIN = 0.95
"""The SQ learner asks with τ = margin/(4d) and margin/4 (strictly below the paper's bounds)."""


# The query specs below are remembered (lru_cache): a sweep asks the same few specs in thousands
# of trials, and building one (each builder serializes its children) cost more than the small
# trials' rounds themselves. A QuerySpec is immutable by contract, so one object serves them all.


def bit_query(j: int) -> QuerySpec:
    """g_j(x, i, b, y) = 1[i = j ∧ b = 1 ∧ y = −1]; E[g_j] = r_j/(2d)."""
    return _bit_query(int(j))


def _plain_int(*values: object) -> bool:
    """Integers (numpy's too, never bool), cached as Python ints; anything else is not remembered."""
    return all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in values)


@lru_cache(maxsize=1024)
def _bit_query(j: int) -> QuerySpec:
    return conjunction(("i", 0, j), ("b", 0, 1), ("y", 0, -1))


def a_query(r: Sequence[int] | np.ndarray) -> QuerySpec:
    """g_d^{(r)} = 1[b = 0 ∧ y ≠ (−1)^{⟨r,x⟩}] ∈ {0,1}; E = a/2 if r is the target's vector, else 1/4."""
    mask = np.asarray(r, dtype=bool)
    if mask.ndim != 1:
        return _a_query.__wrapped__(mask)  # the builder refuses it (nothing remembered)
    return _a_query(tuple(bool(v) for v in mask))


@lru_cache(maxsize=4096)
def _a_query(mask: tuple[bool, ...] | np.ndarray) -> QuerySpec:
    return product(conjunction(("b", 0, 0)), affine(product(label_query(), parity(np.asarray(mask, dtype=bool))), -0.5, 0.5))


def _check_d(d: int) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 2 <= d <= 62:
        raise ParameterError(f"MASKED-PARITY needs an integer d in [2, 62], got d={d!r}")
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


def users_in_range(lr: LROracle, users: int | None, first_user: int) -> int:
    """How many users a MASKED-PARITY learner asks: ``users`` (default: every user from
    ``first_user`` on), refused in one line unless in [1, users the oracle has from there]."""
    available = lr.user_count - first_user
    n = available if users is None else int(users)
    if not 1 <= n <= available:
        raise ParameterError(f"users must be in [1, {available}] (users {first_user}.. of {lr.user_count}), got {users}")
    return n


def smallest_users(predicted_success: Callable[[int], float], start: int, target: float) -> int:
    """The smallest n ≥ ``start`` (to 0.5 %) with ``predicted_success(n) ≥ target``: doubling
    from ``start``, then bisection (the plans' success rises with n). Shared by every learner's
    ``*_users_for``, so their sizes are found by one rule and compare like for like."""
    lo = hi = start
    while predicted_success(hi) < target:
        lo, hi = hi, hi * 2
    while hi > lo * 1.005 + 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if predicted_success(mid) < target else (lo, mid)
    return hi


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
    n = users_in_range(lr, users, first_user)
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


def a_query_family(start: int, count: int) -> QuerySpec:
    """The a-query g_d^{(r)} for *every* r at once: users start..start+count−1 are split evenly
    into 2^d groups and group c asks g_d^{(r_c)}, r_c the binary expansion of c (``user_parity``)."""
    if _plain_int(start, count):
        return _a_query_family(int(start), int(count))
    return _a_query_family.__wrapped__(start, count)  # the builder refuses it (nothing remembered)


@lru_cache(maxsize=1024)
def _a_query_family(start: int, count: int) -> QuerySpec:
    return product(conjunction(("b", 0, 0)), affine(product(label_query(), user_parity(start, count)), -0.5, 0.5))


def _rr_sd(epsilon: float, mean: float) -> float:
    """Standard deviation of one debiased binary-RR report of a {0,1} value with mean ``mean``."""
    p = math.exp(epsilon) / (1.0 + math.exp(epsilon))
    w = (1.0 - p) + (2.0 * p - 1.0) * mean  # Pr[report 1]
    return math.sqrt(w * (1.0 - w)) / (2.0 * p - 1.0)


def _miss(margin: float, m: np.ndarray, sd: float) -> np.ndarray:
    """Normal approximation of Pr[mean of m reports lands past the threshold at ``margin``]."""
    m = np.asarray(m, dtype=np.float64)
    with np.errstate(divide="ignore"):
        z = np.where(m > 0, margin * np.sqrt(m) / sd, 0.0)
    return np.asarray(norm.sf(z))


@dataclass(frozen=True)
class LNIPlan:
    """How the fair one-round learner spends n users: d bit groups of ``m_bit`` users, then the
    remaining ``a_users`` split evenly over all 2^d candidate a-groups (``user_parity_groups``);
    ``predicted_success`` is the normal-approximation success probability the split maximizes."""

    d: int
    n: int
    m_bit: int
    a_users: int
    predicted_success: float

    @property
    def users(self) -> int:
        return self.d * self.m_bit + self.a_users


def lni_success(d: int, epsilon: float, m_bit: np.ndarray | int, a_users: np.ndarray | int) -> np.ndarray:
    """Predicted Pr[exact target] of the fair LNI learner (normal approximation, uniform target):
    every bit decision right (E[g_j] ∈ {0, 1/(2d)}, threshold 1/(4d)) times the a decision of the
    target's own group right (E ∈ {0, 1/2}, threshold 1/4; a group of 0 users is a coin)."""
    m_bit = np.asarray(m_bit, dtype=np.float64)
    a_users = np.asarray(a_users, dtype=np.int64)
    bit_miss = 0.5 * (_miss(1 / (4 * d), m_bit, _rr_sd(epsilon, 0.0)) + _miss(1 / (4 * d), m_bit, _rr_sd(epsilon, 1 / (2 * d))))
    base, extra = np.divmod(a_users, 2**d)
    big = extra / 2.0**d  # fraction of candidates with one user more

    def a_miss(m: np.ndarray) -> np.ndarray:
        miss = 0.5 * (_miss(0.25, m, _rr_sd(epsilon, 0.0)) + _miss(0.25, m, _rr_sd(epsilon, 0.5)))
        return np.where(m > 0, miss, 0.5)

    a_ok = big * (1 - a_miss(base + 1)) + (1 - big) * (1 - a_miss(base))
    return (1 - bit_miss) ** d * a_ok


@lru_cache(maxsize=4096)
def lni_plan(n: int, d: int, epsilon: float) -> LNIPlan:
    """The split of n users that maximizes ``lni_success``: the strongest sizing of the fair
    one-round learner we derived (its only free choice is m_bit; all users are used).

    Only one a-group is ever read (the estimated r's), so unlike a union bound over all d + 2^d
    decisions, the a-groups need only the per-decision margin: m_a ≈ 16 σ² z² with σ² ≤ 1.17 at
    ε = 1 — about 60 users per candidate for 95 % at ε = 1, i.e. n ≈ 60·2^d at large d."""
    d = _check_d(d)
    n = int(n)
    if n < d + 1:
        raise ParameterError(f"the one-round MASKED-PARITY learner needs ≥ d + 1 = {d + 1} users, got {n}")
    per_group, predicted = best_group_size(n, d, lambda m, rest: lni_success(d, epsilon, m, rest))
    return LNIPlan(d, n, per_group, n - d * per_group, predicted)


def best_group_size(n: int, groups: int, success: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> tuple[int, float]:
    """The users per group m ∈ [1, (n − 1) // groups] that maximizes ``success(m, n − groups·m)``.

    The split of n users between ``groups`` equal groups and the rest, as the one-round and the
    correlation learners plan it: a geometric grid of ≤ 400 sizes, then every size (or ≤ 400 of
    them) between the grid's best's neighbours. ``success`` is vectorized over both arrays.

    Returns
    -------
    (m, predicted success) : tuple[int, float]
    """
    top = (n - 1) // groups
    grid = np.unique(np.concatenate([np.geomspace(1, top, num=min(top, 400)).astype(np.int64), [1, top]]))
    best = int(np.argmax(success(grid, n - groups * grid)))
    lo, hi = int(grid[max(best - 1, 0)]), int(grid[min(best + 1, len(grid) - 1)])
    fine = np.arange(lo, hi + 1, max(1, (hi - lo) // 400), dtype=np.int64)
    fine_success = success(fine, n - groups * fine)
    k = int(np.argmax(fine_success))
    return int(fine[k]), float(fine_success[k])


def lni_users_for(d: int, epsilon: float, success: float = 0.95) -> int:
    """The smallest n (to 1 %) whose ``lni_plan`` predicts ``success``: the prediction the
    measured search is compared with."""
    lo, hi = d + 1, d + 1
    while lni_plan(hi, d, epsilon).predicted_success < success:
        lo, hi = hi, hi * 2
    while hi > lo * 1.01 + 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if lni_plan(mid, d, epsilon).predicted_success < success else (lo, mid)
    return hi


def _group_values(reports: Reports, lo: int, hi: int) -> np.ndarray:
    """The answered reports of users lo..hi−1 of one request (a slice when a range of users was
    asked and all of them answered: no id array or mask over the 10^7–10^8 a-users)."""
    asked = reports.asked
    if asked.ids is None and len(reports.values) == len(asked):  # everyone answered, in user order
        return reports.values[max(lo, asked.start) - asked.start : max(min(hi, asked.stop), asked.start) - asked.start]
    answered = reports.answered_users
    return reports.values[(answered >= lo) & (answered < hi)]


async def learn_masked_parity_lni(
    lr: LROracle,
    d: int,
    epsilon: float,
    rng: np.random.Generator,
    *,
    users: int | None = None,
    first_user: int = 0,
    name: str = "masked-parity-LNI",
) -> LearnerResult:
    """The fair one-round learner: ONE non-interactive round of the d bit queries and the a-query
    of *every* candidate r (``a_query_family``), sized by ``lni_plan``; a is read from the group of
    the estimated r. Every user answers one query once with ε."""
    d = _check_d(d)
    n = users_in_range(lr, users, first_user)
    plan = lni_plan(n, d, float(epsilon))
    requests = [
        Request.of(range(first_user + j * plan.m_bit, first_user + (j + 1) * plan.m_bit), RandomizerSpec("binary_rr", bit_query(j), epsilon))
        for j in range(d)
    ]
    start = first_user + d * plan.m_bit
    if plan.a_users:
        requests.append(Request.of(range(start, start + plan.a_users), RandomizerSpec("binary_rr", a_query_family(start, plan.a_users), epsilon)))
    session = Session(lr, SessionKind.NON_INTERACTIVE, name=name)
    reports = await session.round(requests)  # every query fixed before any reply: data-independent
    bits = np.array([_rr_mean(rep.values, epsilon) for rep in reports[:d]])
    r = lni_estimate_r(bits)
    c = int(bits_to_int(r))  # the candidate whose user_parity group asked about this r
    bounds = user_parity_groups(plan.a_users, 2**d)
    group = _group_values(reports[d], start + int(bounds[c]), start + int(bounds[c + 1])) if plan.a_users else np.zeros(0)
    return lni_result(plan, bits, r, len(group), _rr_mean(group, epsilon) if len(group) else None, epsilon, rng)


def lni_estimate_r(bit_estimates: np.ndarray) -> np.ndarray:
    """r_j = 1[estimate of E[g_j] > 1/(4d)] (E[g_j] = r_j/(2d)): the fair learner's bit decisions."""
    bit_estimates = np.asarray(bit_estimates, dtype=np.float64)
    return (bit_estimates > 1.0 / (4 * len(bit_estimates))).astype(np.int64)


def lni_result(
    plan: LNIPlan, bits: np.ndarray, r: np.ndarray, group_size: int, a_estimate: float | None, epsilon: float, rng: np.random.Generator
) -> LearnerResult:
    """The fair one-round learner's hypothesis from what it read: r (``lni_estimate_r`` of the bit
    estimates ``bits``) and a = 1[estimate of E[g_d] > 1/4] over the ``group_size`` users of r's
    a-group, or a coin from ``rng`` when that group is empty (``a_estimate`` None). Shared by the
    protocol (``learn_masked_parity_lni``) and its twin at the sufficient statistic
    (``ldp.learners.masked_parity_law``), so both decide by one rule."""
    if group_size:
        a, how = int(float(a_estimate) > 0.25), "group"  # type: ignore[arg-type]
    else:
        a, how = int(rng.integers(0, 2)), "coin"  # fewer users than candidates: no one was asked about r
    return LearnerResult(
        _concept(r, a),
        users=plan.users,
        rounds=1,
        queries=plan.d + 2**plan.d,
        epsilon=float(epsilon),
        details={
            "m_bit": plan.m_bit,
            "a_users": plan.a_users,
            "group_size": int(group_size),
            "predicted_success": plan.predicted_success,
            "a_from": how,
            "a_estimate": None if not group_size else float(a_estimate),  # type: ignore[arg-type]
            "bit_estimates": np.asarray(bits, dtype=np.float64).tolist(),
        },
        algorithm="masked-parity-LNI",
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
    n = users_in_range(lr, users, first_user)
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
