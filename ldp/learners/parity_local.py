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

import math

import numpy as np
from scipy.stats import norm

from ldp.core.concepts import ParityConcept
from ldp.core.errors import ParameterError
from ldp.core.queries import QuerySpec, affine, label_query, parity, product
from ldp.core.randomizers import BinaryRandomizedResponse, RandomizerSpec
from ldp.local.messages import SessionKind
from ldp.local.oracle import LROracle
from ldp.local.session import Request, Session
from ldp.learners.results import LearnerResult
from ldp.sq.bounds import users_per_query

__all__ = ["correlation_query", "candidate_group", "learn_parity_local", "parity_local_lemma43_users"]


def correlation_query(r: np.ndarray) -> QuerySpec:
    """g_r(x, y) = 1[y = ⟨r, x⟩] ∈ {0, 1} for PARITY records (labels y ∈ {0, 1})."""
    signed_label = affine(label_query(), -2.0, 1.0)  # (−1)^y
    return affine(product(signed_label, parity(np.asarray(r, dtype=bool))), 0.5, 0.5)


def candidate_group(d: int, epsilon: float, beta: float = 0.1) -> int:
    """Users per candidate so that the best of 2^d candidates wins w.p. ≥ 1 − β (normal
    approximation: the gap is 1/2, each estimate off by < 1/4 w.p. ≥ 1 − β/2^d)."""
    p = 1.0 / (1.0 + math.exp(-epsilon))
    sigma2 = 1.0 / (4.0 * (2 * p - 1) ** 2)
    z = float(norm.isf(beta / 2.0 ** (d + 1)))
    return max(1, math.ceil(z * z * sigma2 / 0.25**2))


def _candidates(d: int, k: int, rng: np.random.Generator) -> np.ndarray:
    if d <= 24:
        ints = np.arange(2**d) if k >= 2**d else np.sort(rng.choice(2**d, size=k, replace=False))
        return ((ints[:, None] >> np.arange(d - 1, -1, -1)) & 1).astype(np.int64)
    return rng.integers(0, 2, (k, d))  # 2^d ≫ k: repeats are negligible


async def learn_parity_local(
    lr: LROracle,
    d: int,
    epsilon: float,
    rng: np.random.Generator,
    *,
    users: int | None = None,
    first_user: int = 0,
    beta: float = 0.1,
    max_candidates: int = 1 << 16,
    name: str = "parity-local",
) -> LearnerResult:
    """One NON_INTERACTIVE round: K candidates (as many as ``candidate_group`` users each allow,
    at most 2^d), each asked of its own group; output the candidate with the largest estimate."""
    available = lr.user_count - first_user
    n = available if users is None else int(users)
    if not 1 <= n <= available:
        raise ParameterError(f"users must be in [1, {available}], got {users}")
    u = candidate_group(min(d, 60), epsilon, beta)
    k = int(max(1, min(2.0**d, n // u, max_candidates)))
    m = n // k
    candidates = _candidates(d, k, rng)
    session = Session(lr, SessionKind.NON_INTERACTIVE, name=name)
    requests = [
        Request.of(range(first_user + c * m, first_user + (c + 1) * m), RandomizerSpec("binary_rr", correlation_query(candidates[c]), epsilon))
        for c in range(k)
    ]
    reports = await session.round(requests)
    rr = BinaryRandomizedResponse(epsilon)
    estimates = np.array([float(np.mean(rr.estimate(rep.values))) if len(rep.values) else 0.0 for rep in reports])
    best = int(np.argmax(estimates))
    return LearnerResult(
        ParityConcept(tuple(int(v) for v in candidates[best])),
        users=k * m,
        rounds=1,
        queries=k,
        epsilon=float(epsilon),
        details={"candidates": k, "group": m, "best_estimate": float(estimates[best]), "covers_all": bool(k >= 2**d)},
        algorithm="parity-local-SQ",
        model="local-non-interactive",
    )


def parity_local_lemma43_users(d: int, epsilon: float, beta: float) -> int:
    """Lemma 4.3 users for the 2^d correlation queries at τ < 1/4 (±1 randomized response)."""
    return int(2**d * users_per_query(1.0, epsilon, 0.95 / 4, beta, "pm_rr", queries=2**d))
