"""A local attempt at PARITY: correlation statistical queries over candidate parities.

The natural SQ learner for PARITY asks, for candidate vectors r', the correlation query
g_{r'}(x, y) = 1[y = ⟨r', x⟩]: E[g_{r'}] = 1 when r' is the target, 1/2 for every other r'. Through
Lemma 4.3 each query gets its own group of users answering with binary randomized response, all in
one non-interactive round (adaptivity would not help: after any answers the remaining candidates
are still pairwise orthogonal). The aggregator outputs the candidate with the largest estimate.

Why it fails: the parities are pairwise uncorrelated under the uniform distribution, so a query
with tolerance τ < 1/2 rules out at most one candidate whatever it is — the SQ dimension of PARITY
is 2^d, and any SQ learner needs ~2^d queries (Blum et al. 1994; KLNRS §4 and Kearns 1998). In the
local model (Lemma 4.4) that is ≥ 2^d·Ω(log d/ε²) users, versus O(d/(εα)) for the curator's
Gaussian elimination (Algorithm A*). With fewer users this learner can only afford K < 2^d
candidates (a data-independent random set) and is right with probability ≈ K/2^d; its error is
1/2 otherwise.
"""

from __future__ import annotations

import numpy as np

from ldp.core.concepts import ParityConcept, int_to_bits
from ldp.core.errors import ParameterError
from ldp.core.learner_result import LearnerResult
from ldp.core.queries import QuerySpec, user_parity_candidate
from ldp.core.query_specs import affine, label_query, parity, product, user_parity
from ldp.core.randomizers import RandomizerSpec
from ldp.core.rr_mechanisms import BinaryRandomizedResponse
from ldp.local.messages import SessionKind
from ldp.local.oracle import LROracle
from ldp.local.session import Request, Session
from ldp.sq.bounds import users_per_query

__all__ = ["correlation_query", "correlation_family", "learn_parity_local", "parity_local_lemma43_users"]


def correlation_query(r: np.ndarray) -> QuerySpec:
    """g_r(x, y) = 1[y = ⟨r, x⟩] ∈ {0, 1} for PARITY records (labels y ∈ {0, 1})."""
    signed_label = affine(label_query(), -2.0, 1.0)  # (−1)^y
    return affine(product(signed_label, parity(np.asarray(r, dtype=bool))), 0.5, 0.5)


def correlation_family(start: int, count: int) -> QuerySpec:
    """``correlation_query`` for every candidate at once: users start..start+count−1 are split
    evenly into 2^d groups and group c asks g_{r_c}, r_c the binary expansion of c (``user_parity``)."""
    signed_label = affine(label_query(), -2.0, 1.0)
    return affine(product(signed_label, user_parity(start, count)), 0.5, 0.5)


async def learn_parity_local(
    lr: LROracle,
    d: int,
    epsilon: float,
    rng: np.random.Generator,
    *,
    users: int | None = None,
    first_user: int = 0,
    name: str = "parity-local",
) -> LearnerResult:
    """One NON_INTERACTIVE round: the n users split evenly over all 2^d candidates (one request,
    ``correlation_family``); output the candidate whose group's estimate is largest (ties and
    candidates with no users: broken by ``rng``). With n < 2^d only the first n candidates are
    asked, and the learner is right with probability about n/2^d."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 1 <= d <= 30:
        raise ParameterError(f"the local PARITY learner enumerates 2^d candidate estimates: d must be an integer in [1, 30], got {d!r}")
    available = lr.user_count - first_user
    n = available if users is None else int(users)
    if not 1 <= n <= available:
        raise ParameterError(f"users must be in [1, {available}], got {users}")
    session = Session(lr, SessionKind.NON_INTERACTIVE, name=name)
    (rep,) = await session.round([Request.of(range(first_user, first_user + n), RandomizerSpec("binary_rr", correlation_family(first_user, n), epsilon))])
    answered = rep.answered_users
    candidate = user_parity_candidate(answered - first_user, n, 2**d)
    estimates = BinaryRandomizedResponse(epsilon).estimate(rep.values)
    sums = np.bincount(candidate, weights=estimates, minlength=2**d)
    sizes = np.bincount(candidate, minlength=2**d)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(sizes > 0, sums / np.maximum(sizes, 1), -np.inf)
    ties = np.flatnonzero(means == means.max())
    best = int(ties[rng.integers(0, len(ties))]) if len(ties) > 1 else int(ties[0])
    r = int_to_bits(best, d)
    return LearnerResult(
        ParityConcept(tuple(int(v) for v in r)),
        users=n,
        rounds=1,
        queries=2**d,
        epsilon=float(epsilon),
        details={"candidates_asked": int(min(n, 2**d)), "group": n // 2**d, "best_estimate": float(means[best]), "covers_all": bool(n >= 2**d)},
        algorithm="parity-local-SQ",
        model="local-non-interactive",
    )


def parity_local_lemma43_users(d: int, epsilon: float, beta: float) -> int:
    """Lemma 4.3 users for the 2^d correlation queries at τ < 1/4 (±1 randomized response)."""
    return int(2**d * users_per_query(1.0, epsilon, 0.95 / 4, beta, "pm_rr", queries=2**d))
