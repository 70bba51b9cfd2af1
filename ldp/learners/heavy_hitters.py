"""Heavy hitters over a large domain {0,1}^d by prefix extending (PEM), an interactive local protocol.

PEM — Wang, Li, Jha, "Locally differentially private heavy hitter identification" (IEEE TDSC
2021; arXiv 1708.06674, 2017), §IV — run against an ``LROracle`` as an INTERACTIVE session in
which **every user answers once**: the users are split into g disjoint groups (a public, seeded
permutation, so a file sorted by value does not bias any group), and group i answers round i.

Round i looks at prefixes of length ℓ_i = min(d, s0 + i·η), s0 = ⌈log2 k⌉. Its candidate set is
every ℓ_1-bit prefix in round 1, and afterwards the top-k prefixes of round i − 1, each extended
by the ℓ_i − ℓ_{i−1} next bits in every way (≤ k·2^η candidates). Each user of group i reports,
through the project's exact k-ary randomized response (``kary_rr``, the frequency oracle), which
candidate its own prefix is, or "none" (query ``prefix_index``: values 0..m, m = number of
candidates). The aggregator estimates every candidate's frequency with the unbiased GRR
estimator f̂_j = (share of reports j − q)/(p − q) (``KaryRandomizedResponse.frequencies``, realized
p and q) and keeps the top k (ties: the lower candidate position, so the run is deterministic).
``oracle="olh"``, ``"oue"``, ... runs a frequency oracle of ``ldp.core.frequency_oracles`` in each
round instead, estimated by its ``frequency_estimates`` (better than GRR when m − 1 ≥ 3e^ε).
The last round's top k at full length d are the heavy hitters, with their frequency estimates.

Privacy: each user runs one ε-LDP randomizer once (its ledger is charged ε once); the candidate
sets depend on earlier rounds' reports only, so the protocol is ε-LDP (KLNRS Def. 4.4,
interactive). The randomizer's input depends only on the user's own record.

Accuracy: GRR over m + 1 categories at ε has per-user variance
(e^ε + m − 1)/(e^ε − 1)² (``grr_frequency_variance``); a heavy hitter of frequency f is found at
round i w.h.p. when f exceeds the (k+1)-th prefix frequency by a few sd, sd² = that variance
divided by the round's n/g users. docs/mean_and_heavy_hitters.md measures the sizes at which
planted heavy hitters are recovered (d = 20, k = 4: all of 10 seeds from n = 25,000 at ε = 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldp.core.errors import LDPError, ParameterError, require_epsilon, require_integer
from ldp.core.queries import user_parity_groups
from ldp.core.query_specs import prefix_index
from ldp.core.randomizer_base import kary_rr_probabilities
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rr_mechanisms import KaryRandomizedResponse
from ldp.local.messages import SessionKind
from ldp.local.oracle import LROracle
from ldp.local.session import Request, Session

__all__ = [
    "PEMLevel",
    "HeavyHitters",
    "pem_lengths",
    "pem_groups",
    "extend_candidates",
    "estimate_frequencies",
    "top_k",
    "grr_frequency_variance",
    "learn_heavy_hitters_pem",
]


@dataclass(frozen=True)
class PEMLevel:
    """One round of PEM: prefix length, candidate count, users asked and answered, the top prefixes
    kept (as integers of ``length`` bits) and their frequency estimates."""

    length: int
    candidates: int
    users: int
    answered: int
    top: tuple[int, ...]
    estimates: tuple[float, ...]


@dataclass(frozen=True)
class HeavyHitters:
    """What ``learn_heavy_hitters_pem`` found: the top-k values of the d-bit field (bit 0 the most
    significant) with their estimated frequencies, and the protocol's consumption."""

    items: tuple[int, ...]
    frequencies: tuple[float, ...]
    levels: tuple[PEMLevel, ...]
    users: int
    rounds: int
    epsilon: float
    bits: int

    def summary(self) -> dict[str, object]:
        return {
            "items": list(self.items),
            "frequencies": list(self.frequencies),
            "users": self.users,
            "rounds": self.rounds,
            "epsilon": self.epsilon,
            "levels": [{"length": lv.length, "candidates": lv.candidates, "users": lv.users, "answered": lv.answered} for lv in self.levels],
        }


def pem_lengths(bits: int, k: int, step: int) -> list[int]:
    """ℓ_1 < ℓ_2 < ... < ℓ_g = d: ℓ_i = min(d, ⌈log2 k⌉ + i·η) (PEM's prefix lengths)."""
    start = max(0, math.ceil(math.log2(k))) if k > 1 else 0
    out = []
    length = start
    while length < bits:
        length = min(bits, length + step)
        out.append(length)
    return out


def pem_groups(users: int, rounds: int, seed: int, first_user: int = 0) -> list[np.ndarray]:
    """The users of each round: a seeded permutation of first_user..first_user+users−1 split into
    ``rounds`` groups as evenly as possible (``user_parity_groups``), each sorted."""
    perm = np.random.default_rng(seed).permutation(users).astype(np.int64) + first_user
    bounds = user_parity_groups(users, rounds)
    return [np.sort(perm[bounds[i] : bounds[i + 1]]) for i in range(rounds)]


def grr_frequency_variance(epsilon: float, categories: int, frequency: float = 0.0) -> float:
    """Per-user variance of GRR's unbiased frequency estimate with the realized p, q:
    (q(1 − q) + f(p − q)(1 − p − q))/(p − q)² (Wang et al., USENIX Security 2017, Eq. 3 with f)."""
    p, q = (float(v) for v in kary_rr_probabilities(epsilon, categories))
    return (q * (1 - q) + frequency * (p - q) * (1 - p - q)) / (p - q) ** 2


def extend_candidates(top: np.ndarray, extra: int) -> np.ndarray:
    """Every prefix of ``top`` followed by each of the 2^extra next-bit patterns, in order:
    c·2^extra + s, s = 0..2^extra − 1 (the candidates of the next round)."""
    return (np.asarray(top, dtype=np.int64)[:, None] * (1 << extra) + np.arange(1 << extra, dtype=np.int64)[None, :]).ravel()


def estimate_frequencies(reports: np.ndarray, epsilon: float, candidates: int) -> np.ndarray:
    """Unbiased estimates of the fraction of a group's users whose prefix is each candidate, from
    their ``kary_rr`` reports over the m + 1 values 0..m (m = "none"): GRR's (share − q)/(p − q)."""
    oracle = KaryRandomizedResponse(epsilon, tuple(float(v) for v in range(candidates + 1)))
    return oracle.frequencies(reports)[:candidates]


def top_k(frequencies: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k largest estimates, largest first; ties go to the lower position."""
    f = np.asarray(frequencies, dtype=np.float64)
    return np.lexsort((np.arange(len(f)), -f))[:k]


def _oracle_frequencies(lr: LROracle, spec: RandomizerSpec, reports: np.ndarray, candidates: int) -> np.ndarray:
    """Frequency estimates from another oracle's reports: the randomizer rebuilt from the spec on
    the users' public schema (what each user ran), then ``frequency_estimates``."""
    from ldp.core.frequency_oracles import frequency_estimates  # only when another oracle is asked for

    description = lr.description
    if description is None:
        raise ParameterError(f"PEM with oracle {spec.kind!r} needs the users' schema (the oracle has no public description)")
    randomizer = LocalRandomizer.build(spec, description.schema).randomizer
    return np.asarray(frequency_estimates(randomizer, reports), dtype=np.float64)[:candidates]


async def learn_heavy_hitters_pem(
    lr: LROracle,
    *,
    bits: int,
    k: int,
    epsilon: float,
    step: int = 2,
    field: str = "x",
    users: int | None = None,
    first_user: int = 0,
    seed: int = 0,
    name: str = "pem",
    oracle: str = "kary_rr",
) -> HeavyHitters:
    """The top-k values of a d-bit {0,1} field by PEM over ``lr`` (INTERACTIVE, one report per user).

    Parameters
    ----------
    lr : LROracle
        The users; their schema has a {0,1} field ``field`` of at least ``bits`` bits.
    bits : int
        d, the prefix length of the final round (the field's first d bits), 1..62.
    k : int
        How many heavy hitters, 1..1024 (with 2^step, at most 4095 candidates per round).
    epsilon : float
        ε: each user answers one ``kary_rr`` at ε, once.
    step : int, default 2
        η, the bits added per round (the rounds are ⌈(d − ⌈log2 k⌉)/η⌉).
    field : str, default "x"
        The field.
    users : int, optional
        How many users (default: all from ``first_user``).
    first_user : int, default 0
        The first user id.
    seed : int, default 0
        Seed of the public permutation that assigns users to rounds.
    name : str, default "pem"
        The session's name in the transcript.
    oracle : str, default "kary_rr"
        The frequency oracle of every round: ``kary_rr`` (GRR, this module's estimator), or a kind
        of ``ldp.core.frequency_oracles`` (``oue``, ``olh``, ``adaptive_fo``, ...), estimated by its
        ``frequency_estimates`` (built on the users' schema, as the users build it).

    Returns
    -------
    HeavyHitters
        ``items`` (the top-k values, best first), ``frequencies`` (their estimates from the last
        round's group), one ``PEMLevel`` per round.

    Raises
    ------
    ParameterError
        A parameter out of range, or more candidates than a query can carry.

    Examples
    --------
    >>> import ldp
    >>> from ldp.learners.heavy_hitters import learn_heavy_hitters_pem
    >>> cc = ldp.concept_class("point", 10)  # x ∈ {0,1}^10; 30 % of users hold the point 1011001110
    >>> from ldp.core.concepts import PointConcept, PointMixture
    >>> population = ldp.PopulationSpec(cc, PointConcept((1, 0, 1, 1, 0, 0, 1, 1, 1, 0)), size=20_000, budget=2.0, distribution=PointMixture(0.3))
    >>> found = ldp.run(learn_heavy_hitters_pem(ldp.InProcessLROracle(population), bits=10, k=1, epsilon=2.0, step=2))
    >>> found.items, found.rounds, [lv.length for lv in found.levels]
    ((718,), 5, [2, 4, 6, 8, 10])
    >>> 0.25 < found.frequencies[0] < 0.36  # 0.3 + 0.7/1024
    True
    """
    bits = require_integer("PEM: bits", bits, 1, 62)
    k = require_integer("PEM: k", k, 1, 1024)
    step = require_integer("PEM: step", step, 1, 12)
    epsilon = require_epsilon(epsilon)
    if k * 2**step >= 4096:
        raise ParameterError(f"PEM: k·2^step = {k * 2**step} candidates per round; a prefix_index query carries at most 4095 (lower k or step)")
    available = lr.user_count - first_user
    n = available if users is None else int(users)
    if not 1 <= n <= available:
        raise ParameterError(f"PEM: users must be in [1, {available}] (users {first_user}.. of {lr.user_count}), got {users}")
    lengths = pem_lengths(bits, k, step)
    first_length = lengths[0]
    if 2**first_length >= 4096:
        raise ParameterError(f"PEM: the first round would have 2^{first_length} candidates; lower k or step")
    if n < len(lengths):
        raise ParameterError(f"PEM needs at least one user per round ({len(lengths)} rounds), got {n} users")
    groups = pem_groups(n, len(lengths), seed, first_user)
    session = Session(lr, SessionKind.INTERACTIVE, name=name)
    candidates = np.arange(2**first_length, dtype=np.int64)
    previous = 0
    levels: list[PEMLevel] = []
    top = candidates[:0]
    estimates = np.zeros(0)
    for i, length in enumerate(lengths):
        if i:
            candidates = extend_candidates(top, length - previous)
        m = len(candidates)
        spec = RandomizerSpec(oracle, prefix_index(length, candidates, field), epsilon)
        (reports,) = await session.round([Request.of(groups[i], spec)], last=i == len(lengths) - 1)
        if not len(reports.values):  # nothing to estimate from: say why rather than return noise
            raise LDPError(f"PEM round {i}: none of its {len(groups[i])} users answered ({reports.counts()}; {'; '.join(reports.errors) or 'over budget?'})")
        freq = estimate_frequencies(reports.values, epsilon, m) if oracle == "kary_rr" else _oracle_frequencies(lr, spec, reports.values, m)
        order = top_k(freq, k)
        top, estimates = candidates[order], freq[order]
        levels.append(PEMLevel(length, m, len(groups[i]), int(len(reports.values)), tuple(int(v) for v in top), tuple(float(v) for v in estimates)))
        previous = length
    return HeavyHitters(
        tuple(int(v) for v in top),
        tuple(float(v) for v in estimates),
        tuple(levels),
        users=n,
        rounds=len(lengths),
        epsilon=float(epsilon),
        bits=bits,
    )
