"""MASKED-PARITY's strongest one-round learner we built: ONE query per user that serves both the
r part and the a part (issue 28).

The fair one-round learner (``ldp.learners.masked_parity.learn_masked_parity_lni``) spends d
groups on the bit queries of KLNRS §5.1 (Θ(d³) users: each bit group hears 1/d of its users'
signal) and the rest on the a-queries of the 2^d candidates. Two observations make it cheaper:

* r can be read non-adaptively by the correlation query of
  ``ldp.learners.masked_parity_correlation`` (its round 1 does not depend on any reply): a user
  of design group k answers 1[b = 1 ∧ y = v^{(k)}_i], E = ¼ + ⟨v^{(k)}, s⟩/(4d), s = (−1)^r.
* That query looks at the b = 1 half of the records only, and the a-query of candidate r_c,
  1[b = 0 ∧ y ≠ (−1)^{⟨r_c, x⟩}], at the b = 0 half only. The two events are disjoint, so their
  sum P + Q = 1 − (1 − P)(1 − Q) is again a {0, 1} query (``shared_query``) — one binary
  randomized response per user with ε carries both.

So every user serves both parts. Users are numbered u = first, …, first + N − 1 (N = K·m, K the
Hadamard design's size): user u's design group is (u − first) mod K (strided), its candidate is
its block in ``user_parity_groups(N, 2^d)`` (contiguous, the ``user_parity`` family), so each
candidate's block is spread evenly over the K design groups. Its query's mean is

    E[g] = ½ + ⟨v^{(k)}, s⟩/(4d)             (candidate ≠ target's r: the b = 0 half adds ¼),
    E[g] = ¼ + a/2 + ⟨v^{(k)}, s⟩/(4d)       (candidate = r).

The aggregator reads r from X_j = Σ_k v^{(k)}_j (T_k − ½·N_k) (as the correlation learner does,
with all N users instead of round 1's n₁), then a from the block of the estimated r̂: the count
of its 1-reports against the midpoint of its two expectations given ŝ = (−1)^{r̂}. Every user
answers one fixed query once: ε-LDP and NON_INTERACTIVE (one round, every randomizer fixed before
any reply; the per-user query is a ``user_parity`` family, KLNRS Def. 4.4). A candidate block with
no users (N < 2^d) leaves a to a coin.

Users needed: max(the r part, the a part) instead of their sum. The a part is ≈ 60 users per
candidate at ε = 1 for 95 %, as in the fair learner, so from d ≈ 14 on the two learners cost about
the same (≈ 60·2^d: the fair learner is near-optimal where the a part dominates, and the
lower bound of docs/theorem51.md says no one-round learner beats 6.67·2^d); below, the shared
query saves the fair learner's Θ(d³) bit groups: 14,592 against 73,728 predicted at d = 8.

Prediction (``shared_success``): the normal approximation of the correlation learner's bit
decisions (continuity-corrected, averaged over a uniform target) with the variance of a report
around ½, times the exact binomial tails of the a decision with the target's block size (the
⟨v, s⟩ terms of a block spread evenly over the design groups cancel).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.stats import binom, norm

from ldp.core.concepts import MaskedParityConcept, bits_to_int
from ldp.core.errors import ParameterError, require_probability
from ldp.core.learner_result import LearnerResult
from ldp.core.queries import QuerySpec, user_parity_groups
from ldp.core.query_specs import affine, product
from ldp.core.randomizers import RandomizerSpec
from ldp.learners.masked_parity import a_query_family, smallest_users, users_in_range
from ldp.learners.masked_parity_correlation import correlation_design, correlation_query, rr_keep_flip
from ldp.local.messages import SessionKind
from ldp.local.oracle import LROracle
from ldp.local.session import Request, Session

__all__ = [
    "shared_query",
    "SharedPlan",
    "shared_success",
    "shared_plan",
    "shared_users_for",
    "learn_masked_parity_lni_shared",
    "shared_estimate_r",
    "shared_result",
]


def _check_d(d: int) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 2 <= d <= 62:
        raise ParameterError(f"MASKED-PARITY needs an integer d in [2, 62], got d={d!r}")
    return int(d)


def shared_query(v: np.ndarray, start: int, count: int) -> QuerySpec:
    """g = 1[b = 1 ∧ y = v_i] + 1[b = 0 ∧ y ≠ (−1)^{⟨r(u), x⟩}] for a public v ∈ {±1}^d, r(u) the
    candidate of user u in the ``user_parity`` family over users start..start+count−1.

    The two events are disjoint (b = 1 against b = 0), so the sum is the {0, 1} query
    1 − (1 − P)(1 − Q), written with ``product`` and ``affine`` only (the query language has
    no sum)."""
    return _shared_query(tuple(int(x) for x in np.asarray(v).ravel()), int(start), int(count))


@lru_cache(maxsize=4096)
def _shared_query(v: tuple[int, ...], start: int, count: int) -> QuerySpec:
    """``shared_query``, remembered: the trials of a size ask the same K specs, and building one
    (each builder serializes its children) cost more than a small trial's round."""
    both_missed = product(affine(correlation_query(np.asarray(v)), -1.0, 1.0), affine(a_query_family(start, count), -1.0, 1.0))
    return affine(both_missed, -1.0, 1.0)


@dataclass(frozen=True)
class SharedPlan:
    """How the shared learner spends n users: ``groups`` = K design groups of ``m`` users
    (``users`` = K·m; the n − K·m < K left over are not asked)."""

    d: int
    n: int
    groups: int
    m: int
    predicted_success: float

    @property
    def users(self) -> int:
        return self.groups * self.m


def _bit_miss(d: int, p: float, q: float, n: np.ndarray) -> np.ndarray:
    """Pr[r_j wrong] (normal approximation, continuity-corrected, uniform target): X_j has mean
    ±n(p − q)/(4d) and variance ≈ n(¼ − (p − q)²/(16d)) (a report's rate is
    ½ + (p − q)⟨v, s⟩/(4d), and E⟨v, s⟩² = d over uniform s)."""
    n = np.asarray(n, dtype=np.float64)
    mu = n * (p - q) / (4 * d)
    sd = np.sqrt(np.maximum(n * (0.25 - (p - q) ** 2 / (16 * d)), 1e-300))
    miss = 0.5 * (norm.sf((mu + 0.5) / sd) + norm.sf((mu - 0.5) / sd))
    return np.where(n > 0, miss, 0.5)


def _a_miss(p: float, q: float, m: np.ndarray) -> np.ndarray:
    """Exact Pr[a wrong] for a block of m users (uniform a): T ~ Bin(m, q + (p − q)(¼ + a/2)),
    a = 1[T > m(q + (p − q)/2)]; an empty block is a coin."""
    m = np.asarray(m, dtype=np.int64)
    thr = np.floor(m * (q + (p - q) / 2))
    miss = 0.5 * (binom.sf(thr, m, q + (p - q) / 4) + binom.cdf(thr, m, q + 3 * (p - q) / 4))
    return np.where(m > 0, miss, 0.5)


def shared_success(d: int, epsilon: float, users: int) -> float:
    """Predicted Pr[exact target] of ``learn_masked_parity_lni_shared`` with ``users`` = K·m
    users: (1 − bit miss)^d times the a decision of the target's block (blocks of ⌊N/2^d⌋ or
    one more, as ``user_parity_groups`` splits them), averaged over a uniform target."""
    d = _check_d(d)
    p, q = rr_keep_flip(epsilon)
    base, extra = divmod(int(users), 2**d)
    big = extra / 2.0**d
    a_ok = big * (1 - float(_a_miss(p, q, np.asarray(base + 1)))) + (1 - big) * (1 - float(_a_miss(p, q, np.asarray(base))))
    return float((1 - float(_bit_miss(d, p, q, np.asarray(users)))) ** d * a_ok)


@lru_cache(maxsize=4096)
def shared_plan(n: int, d: int, epsilon: float) -> SharedPlan:
    """K = 2^⌈log₂(d + 1)⌉ groups of m = ⌊n/K⌋ users: no free choice, every user serves both parts."""
    d = _check_d(d)
    n = int(n)
    k = 1 << d.bit_length()
    if n < k:
        raise ParameterError(f"the shared one-round learner needs ≥ K = {k} users at d={d} (one per design group), got {n}")
    m = n // k
    return SharedPlan(d, n, k, m, shared_success(d, float(epsilon), k * m))


def shared_users_for(d: int, epsilon: float, success: float = 0.95) -> int:
    """The smallest n (to 0.5 %) whose ``shared_plan`` predicts ``success``."""
    d = _check_d(d)
    target = require_probability("success", success)
    return smallest_users(lambda n: shared_plan(n, d, epsilon).predicted_success, 1 << d.bit_length(), target)


async def learn_masked_parity_lni_shared(
    lr: LROracle,
    d: int,
    epsilon: float,
    rng: np.random.Generator,
    *,
    users: int | None = None,
    first_user: int = 0,
    name: str = "masked-parity-LNI-shared",
) -> LearnerResult:
    """The shared one-round learner: ONE NON_INTERACTIVE round, K requests (design group k: users
    first + k, first + k + K, …), each user answering ``shared_query`` once through binary RR (ε).

    r_j = 1[X_j < 0], X_j = Σ_k v^{(k)}_j (T_k − ½N_k); a from the block of the estimated r
    (its 1-reports against the midpoint of their expectations under a = 0 and a = 1 given ŝ), a
    coin from ``rng`` when that block has no users. ``details``: m, groups, predicted_success,
    the correlations, the block size and how a was read.
    """
    d = _check_d(d)
    n = users_in_range(lr, users, first_user)
    plan = shared_plan(n, d, float(epsilon))
    design = correlation_design(d)
    k_groups, total = plan.groups, plan.users
    requests = [
        Request.of(range(first_user + k, first_user + total, k_groups), RandomizerSpec("binary_rr", shared_query(design[k], first_user, total), epsilon))
        for k in range(k_groups)
    ]
    session = Session(lr, SessionKind.NON_INTERACTIVE, name=name)
    reports = await session.round(requests)  # every query fixed before any reply: data-independent
    counts = np.array([int(np.count_nonzero(np.asarray(rep.values))) for rep in reports], dtype=np.int64)
    answered = np.array([len(rep.values) for rep in reports], dtype=np.int64)
    correlations, r = shared_estimate_r(counts, answered, design)
    bounds = user_parity_groups(total, 2**d)
    c = int(bits_to_int(r))
    lo, hi = first_user + int(bounds[c]), first_user + int(bounds[c + 1])
    ones = 0
    sizes = np.zeros(k_groups, dtype=np.int64)
    for k, rep in enumerate(reports):
        ids = rep.answered_users
        inside = (ids >= lo) & (ids < hi)
        sizes[k] = int(np.count_nonzero(inside))
        ones += int(np.count_nonzero(np.asarray(rep.values)[inside]))
    return shared_result(plan, design, correlations, r, sizes, ones, epsilon, rng)


def shared_estimate_r(counts: np.ndarray, answered: np.ndarray, design: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(X, r): X_j = Σ_k v^{(k)}_j (T_k − ½N_k) from the 1-reports T_k of the N_k answers of design
    group k, and r_j = 1[X_j < 0].

    Centred at ½ per answer (the rate of a report is q + (p − q)(½ + ⟨v, s⟩/(4d)) outside the
    target's block): with complete groups ``answered @ design`` is 0 and X_j is the integer Σ v T."""
    correlations = np.asarray(counts, dtype=np.int64) @ design - 0.5 * (np.asarray(answered, dtype=np.int64) @ design)
    return correlations, (correlations < 0).astype(np.int64)


def shared_result(
    plan: SharedPlan, design: np.ndarray, correlations: np.ndarray, r: np.ndarray, block_sizes: np.ndarray, ones: int, epsilon: float, rng: np.random.Generator
) -> LearnerResult:
    """The shared learner's hypothesis from what it read: r, and a = 1[ones > midpoint] from the
    ``ones`` 1-reports of the estimated r's block (``block_sizes[k]`` of its users in design group
    k), the midpoint being Σ_k block_sizes[k]·(q + (p − q)(½ + ⟨v^{(k)}, ŝ⟩/(4d))) — halfway
    between the block's expected 1-reports under a = 0 and a = 1 given ŝ = (−1)^{r̂}; a coin from
    ``rng`` for an empty block. Shared by the protocol (``learn_masked_parity_lni_shared``) and its
    twin at the sufficient statistic (``ldp.learners.masked_parity_law``): one rule for both."""
    d = plan.d
    p, q = rr_keep_flip(epsilon)
    s_hat = 1 - 2 * np.asarray(r, dtype=np.int64)
    midpoint = 0.0
    for k, size in enumerate(np.asarray(block_sizes, dtype=np.int64).tolist()):
        # E[g] in the block = ¼ + a/2 + ⟨v, s⟩/(4d): the midpoint of a = 0 and a = 1 is ½ + ⟨v, ŝ⟩/(4d)
        midpoint += size * (q + (p - q) * (0.5 + float(design[k] @ s_hat) / (4 * d)))
    block = int(np.sum(block_sizes))
    if block:
        a, how = int(ones > midpoint), "block"
    else:
        a, how = int(rng.integers(0, 2)), "coin"  # fewer users than candidates: no one was asked about r̂
    return LearnerResult(
        MaskedParityConcept(tuple(int(v) for v in r), a),
        users=plan.users,
        rounds=1,
        queries=plan.groups,
        epsilon=float(epsilon),
        details={
            "groups": plan.groups,
            "m": plan.m,
            "predicted_success": plan.predicted_success,
            "correlations": np.asarray(correlations).tolist(),
            "block_size": block,
            "block_ones": int(ones),
            "block_midpoint": midpoint,
            "a_from": how,
        },
        algorithm="masked-parity-LNI-shared",
        model="local-non-interactive",
    )
