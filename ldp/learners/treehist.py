"""TreeHist: heavy hitters of a {0,1}^d field by a prefix tree with noise-calibrated pruning.

Bassily, Nissim, Stemmer & Thakurta, "Practical Locally Private Heavy Hitters" (NeurIPS 2017;
arXiv 1707.04982), the TreeHist protocol (its second protocol,
Bitstogram, is not built here).

Protocol, as run here against an ``LROracle`` in an INTERACTIVE session (the driver of
``ldp.learners.heavy_hitters``: no new query, randomizer or wire message):

1. The n users are split into L disjoint groups G_1..G_L (L = ⌈d/ℓ⌉ levels of ℓ = ``step`` bits;
   the paper's ℓ = 1) by a public seeded permutation (``pem_groups``): **each user answers at one
   level, once**, with the full ε.
2. Level t looks at prefixes of length min(d, t·ℓ). Its candidates are every ℓ-bit prefix at
   t = 1, afterwards the children (each kept prefix extended by ℓ bits in every way,
   ``extend_candidates``) of the prefixes kept at level t − 1.
3. A user of G_t reports, through an exact frequency oracle of the project (default ``olh``;
   ``hadamard_response``, ``oue``, ``kary_rr`` ...), which candidate its own prefix is, or "none"
   (query ``prefix_index``). The aggregator estimates every candidate's frequency with the
   oracle's unbiased estimator f̂ = (C/n_t − q*)/(p* − q*) at the realized (p*, q*)
   (``frequency_estimates``), which estimates the candidate's frequency in the whole population
   (the groups are a uniform partition: the paper's scaling by n/|G_t|).
4. It keeps the children whose estimate reaches the level's threshold τ_t (below), at most
   ``beam`` of them (the largest; ties: the lower candidate position). Nothing kept: the run
   stops and the users of the later levels are never asked (nor charged).
5. The prefixes kept at the last level (length d) are the heavy hitters, with their estimates
   from G_L (the paper's option of reusing the last group; no final group is reserved).

Threshold. τ_t = z·sd_t, sd_t² = q*(1 − q*)/(n_t(p* − q*)²) the exact variance of one estimate of
a prefix nobody holds (``frequency_variance`` at f = 0, n_t = the users who answered), and
z = Φ⁻¹(1 − β/M), M = 2^ℓ + (L − 1)·beam·2^ℓ the most estimates a run can make: by a union bound
(normal approximation) a run keeps any prefix of true frequency 0 with probability ≤ β. At small
ε, OLH's n_t·sd_t² ≈ 4/ε², so in counts τ ≈ (2z/ε)·√(nL), z ≈ √(2 ln(M/β)): the paper's
η = Θ((1/ε)·√(n L log(·/β))) (§4.2 of the reference; the paper's exact constant and log factor are
marked "(verify)" there and are not relied on: this threshold is calibrated by the realized
variance instead). ``threshold=`` sets τ (a frequency, every level) by hand.

How it differs from PEM (``ldp.learners.heavy_hitters.learn_heavy_hitters_pem``, Wang, Li & Jha
2021). Both are interactive prefix-extension protocols in which each user answers once at ε, and
this module reuses PEM's partition, candidate extension, ``prefix_index`` query and ranking. PEM
answers "the top k": it needs k, starts at ⌈log2 k⌉ bits, adds η bits per round and keeps
exactly the k best prefixes whatever their estimates, so it always returns k values, noise
included. TreeHist answers "every value above a frequency": it needs no k, starts at the root
with one bit per level (``step``), and keeps only children that clear a noise-calibrated
threshold (the beam only bounds the work), so it returns a variable number of values (none when
nothing is frequent) with the guarantee above; a false alarm needs a prefix to pass z·sd.

Privacy. Each user runs one ε-LDP randomizer once, on its own record (its ledger is charged ε
once; the protocol's charge is one ε per user). The candidate sets depend only on earlier
groups' reports, so the protocol is ε-LDP (KLNRS Def. 4.4, interactive). Who answers at which
level is a public function of ``seed``, independent of the data: it is the aggregator's choice in
this driver. ``learn_heavy_hitters_treehist_1round`` is the NON-INTERACTIVE version (KLNRS
Def. 4.4, LNI) in which each user draws its own level (the paper's random split): one request
``treehist_prefix`` (``ldp.core.prefix_reports``) to everyone, and the same descent and pruning on
the server, from each level's reports only. An aggregator that asks one user at two
levels gets the second answer only if that user's ledger has ε left: with a budget of ε it is
refused (no report, no charge); with 2ε it is charged twice (tests/learners/test_treehist.py).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from ldp.core.errors import LDPError, ParameterError, require_epsilon, require_integer
from ldp.core.frequency_oracles import frequency_estimates, frequency_variance
from ldp.core.population import PopulationDescription
from ldp.core.prefix_reports import PREFIX_ORACLES, TreeHistPrefix, prefix_lengths
from ldp.core.query_specs import prefix_index, record_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.schema import Schema
from ldp.learners.heavy_hitters import extend_candidates, pem_groups, top_k
from ldp.local.messages import SessionKind
from ldp.local.oracle import LROracle
from ldp.local.session import Request, Session

__all__ = [
    "TreeHistLevel",
    "TreeHistResult",
    "treehist_lengths",
    "union_bound_z",
    "level_estimates",
    "prune",
    "learn_heavy_hitters_treehist",
    "learn_heavy_hitters_treehist_1round",
]

MAX_CANDIDATES = 4095  # what one prefix_index query carries


@dataclass(frozen=True)
class TreeHistLevel:
    """One level: prefix length, candidates asked about, users asked and answered, the threshold
    τ (a frequency), the sd of one estimate at frequency 0, and the prefixes kept with their
    estimates (as integers of ``length`` bits, largest estimate first)."""

    length: int
    candidates: int
    users: int
    answered: int
    threshold: float
    sd: float
    kept: tuple[int, ...]
    estimates: tuple[float, ...]


@dataclass(frozen=True)
class TreeHistResult:
    """What ``learn_heavy_hitters_treehist`` found: the values of the d-bit field (bit 0 the most
    significant) whose estimates passed every level, with their estimates from the last group."""

    items: tuple[int, ...]
    frequencies: tuple[float, ...]
    levels: tuple[TreeHistLevel, ...]
    users: int
    epsilon: float
    bits: int
    z: float

    @property
    def rounds(self) -> int:
        """Levels actually run (fewer than planned when a level kept nothing)."""
        return len(self.levels)

    def summary(self) -> dict[str, object]:
        return {
            "items": list(self.items),
            "frequencies": list(self.frequencies),
            "users": self.users,
            "rounds": self.rounds,
            "epsilon": self.epsilon,
            "z": self.z,
            "levels": [
                {"length": lv.length, "candidates": lv.candidates, "users": lv.users, "answered": lv.answered, "threshold": lv.threshold, "kept": len(lv.kept)}
                for lv in self.levels
            ],
        }


def treehist_lengths(bits: int, step: int) -> list[int]:
    """The prefix length of each level: ℓ, 2ℓ, ..., d (the last one min(d, L·ℓ)).

    >>> treehist_lengths(10, 4)
    [4, 8, 10]
    """
    return list(prefix_lengths(bits, step))


def union_bound_z(beta: float, levels: int, beam: int, step: int) -> float:
    """z = Φ⁻¹(1 − β/M), M = 2^ℓ + (L − 1)·beam·2^ℓ: the one-sided normal quantile that keeps a
    prefix of frequency 0 anywhere in the run with probability ≤ β (union bound).

    >>> round(union_bound_z(0.05, 20, 4, 1), 2)  # M = 2 + 19·8 = 154
    3.41
    """
    m = (1 << step) + (levels - 1) * beam * (1 << step)
    return NormalDist().inv_cdf(1.0 - beta / m)


def level_estimates(spec: RandomizerSpec, schema: Schema, reports: np.ndarray, candidates: int) -> tuple[np.ndarray, float]:
    """The unbiased frequency estimate of every candidate and the sd of one estimate at frequency 0.

    The randomizer is rebuilt from the spec on the users' public schema (what each user ran);
    the estimates are its ``frequency_estimates`` (realized p*, q*), the sd
    √``frequency_variance``(f = 0, n = the reports). The last category ("none") is dropped.
    """
    randomizer = LocalRandomizer.build(spec, schema).randomizer
    freq = np.asarray(frequency_estimates(randomizer, reports), dtype=np.float64)[:candidates]
    sd = float(np.sqrt(frequency_variance(randomizer, 0.0, len(reports))))
    return freq, sd


def prune(frequencies: np.ndarray, threshold: float, beam: int) -> np.ndarray:
    """Positions of the estimates ≥ ``threshold``, largest first (ties: the lower position), at
    most ``beam`` of them.

    >>> prune(np.array([0.1, 0.3, 0.02, 0.3]), 0.05, 2).tolist()
    [1, 3]
    """
    order = top_k(frequencies, len(frequencies))
    return order[np.asarray(frequencies, dtype=np.float64)[order] >= threshold][:beam]


async def _descend(
    lengths: list[int],
    z: float,
    threshold: float | None,
    beam: int,
    level: Callable[[int, int, np.ndarray], Awaitable[tuple[np.ndarray, float, int, int]]],
) -> tuple[tuple[int, ...], tuple[float, ...], tuple[TreeHistLevel, ...]]:
    """The server's descent both TreeHists share: level t's candidates (the 2^ℓ first prefixes,
    then the children of the prefixes kept at t − 1, ``extend_candidates``) estimated by
    ``level(t, length, candidates)`` → (frequencies, sd, users, answered), pruned at
    τ_t = z·sd_t (or ``threshold``) to at most ``beam`` (``prune``; nothing kept from a level no
    one answered). A level that keeps nothing ends the descent, with no items.

    Returns (items, their frequencies, the levels run)."""
    candidates = np.arange(2 ** lengths[0], dtype=np.int64)
    kept, estimates = candidates[:0], np.zeros(0)
    levels: list[TreeHistLevel] = []
    previous = 0
    for t, length in enumerate(lengths):
        if t:
            candidates = extend_candidates(kept, length - previous)
        freq, sd, users, answered = await level(t, length, candidates)
        tau = z * sd if threshold is None else float(threshold)
        order = prune(freq, tau, beam) if answered else np.zeros(0, dtype=np.int64)
        kept, estimates = candidates[order], freq[order]
        levels.append(TreeHistLevel(length, len(candidates), users, answered, tau, sd, tuple(int(v) for v in kept), tuple(float(v) for v in estimates)))
        previous = length
        if not len(kept):  # nothing frequent: the later levels are not run (interactive: their users are never asked)
            break
    if len(levels) < len(lengths):
        return (), (), tuple(levels)
    return tuple(int(v) for v in kept), tuple(float(v) for v in estimates), tuple(levels)


def _checked(
    lr: LROracle, bits: int, beam: int, step: int, epsilon: float, beta: float, threshold: float | None, users: int | None, first_user: int
) -> tuple[int, int, int, float, PopulationDescription, int]:
    """Both drivers' parameter checks (one line each): (bits, beam, step, ε, the users' public
    description, n)."""
    bits = require_integer("TreeHist: bits", bits, 1, 62)
    beam = require_integer("TreeHist: beam", beam, 1, 1024)
    step = require_integer("TreeHist: step", step, 1, 12)
    epsilon = require_epsilon(epsilon)
    if not (isinstance(beta, (int, float)) and 0.0 < float(beta) < 1.0):
        raise ParameterError(f"TreeHist: beta must be a probability in (0, 1), got {beta!r}")
    if threshold is not None and not (isinstance(threshold, (int, float)) and math.isfinite(threshold)):
        raise ParameterError(f"TreeHist: threshold must be a finite frequency, got {threshold!r}")
    description = lr.description
    if description is None:
        raise ParameterError("TreeHist needs the users' public schema (the oracle has no public description)")
    available = lr.user_count - first_user
    n = available if users is None else int(users)
    if not 1 <= n <= available:
        raise ParameterError(f"TreeHist: users must be in [1, {available}] (users {first_user}.. of {lr.user_count}), got {users}")
    return bits, beam, step, epsilon, description, n


async def learn_heavy_hitters_treehist(
    lr: LROracle,
    *,
    bits: int,
    epsilon: float,
    beam: int = 32,
    step: int = 1,
    beta: float = 0.05,
    threshold: float | None = None,
    field: str = "x",
    users: int | None = None,
    first_user: int = 0,
    seed: int = 0,
    name: str = "treehist",
    oracle: str = "olh",
) -> TreeHistResult:
    """The frequent values of a d-bit {0,1} field by TreeHist over ``lr`` (INTERACTIVE, one report per user).

    Parameters
    ----------
    lr : LROracle
        The users; their schema has a {0,1} field ``field`` of at least ``bits`` bits.
    bits : int
        d, the length of the values (the field's first d bits), 1..62.
    epsilon : float
        ε: each user answers one frequency-oracle report at ε, once.
    beam : int, default 32
        The most prefixes kept per level (the paper's top-w pruning); 1..1024, beam·2^step ≤ 4095.
    step : int, default 1
        ℓ, the bits added per level (the paper's 1); L = ⌈d/ℓ⌉ levels.
    beta : float, default 0.05
        The false-alarm budget of the threshold: the probability that a prefix of frequency 0 is
        kept anywhere in the run (normal approximation, union bound), in (0, 1).
    threshold : float, optional
        τ, a frequency, at every level instead of z·sd_t.
    field : str, default "x"
        The field.
    users : int, optional
        How many users (default: all from ``first_user``).
    first_user : int, default 0
        The first user id.
    seed : int, default 0
        Seed of the public permutation that assigns users to levels.
    name : str, default "treehist"
        The session's name in the transcript.
    oracle : str, default "olh"
        The frequency oracle of every level: ``olh``, ``hadamard_response``, ``oue``, ``sue``,
        ``kary_rr``, ``adaptive_fo`` (``ldp.core.frequency_oracles``), estimated by its
        ``frequency_estimates`` on the users' schema.

    Returns
    -------
    TreeHistResult
        ``items`` (largest estimate first; possibly none), ``frequencies`` (their estimates from
        the last group), one ``TreeHistLevel`` per level run, ``z``.

    Raises
    ------
    ParameterError
        A parameter out of range, too many candidates for a query, or a population without a
        public schema.
    LDPError
        A level none of whose users answered.

    Examples
    --------
    >>> import ldp
    >>> from ldp.core.concepts import PointConcept, PointMixture
    >>> cc = ldp.concept_class("point", 10)  # 30 % of users hold the point 1011001110
    >>> population = ldp.PopulationSpec(cc, PointConcept((1, 0, 1, 1, 0, 0, 1, 1, 1, 0)), size=50_000, budget=2.0, distribution=PointMixture(0.3))
    >>> found = ldp.run(learn_heavy_hitters_treehist(ldp.InProcessLROracle(population), bits=10, epsilon=2.0, beam=4))
    >>> found.items, found.rounds
    ((718,), 10)
    >>> 0.25 < found.frequencies[0] < 0.36
    True
    """
    bits, beam, step, epsilon, description, n = _checked(lr, bits, beam, step, epsilon, beta, threshold, users, first_user)
    if beam * 2**step > MAX_CANDIDATES:
        raise ParameterError(
            f"TreeHist: beam·2^step = {beam * 2**step} candidates per level; a prefix_index query carries at most {MAX_CANDIDATES} (lower beam or step)"
        )
    lengths = treehist_lengths(bits, step)
    if n < len(lengths):
        raise ParameterError(f"TreeHist needs at least one user per level ({len(lengths)} levels), got {n} users")
    z = union_bound_z(float(beta), len(lengths), beam, step)
    groups = pem_groups(n, len(lengths), seed, first_user)
    session = Session(lr, SessionKind.INTERACTIVE, name=name)

    async def level(t: int, length: int, candidates: np.ndarray) -> tuple[np.ndarray, float, int, int]:
        # one round per level, asked only once the earlier levels have named its candidates
        spec = RandomizerSpec(oracle, prefix_index(length, candidates, field), epsilon)
        (reports,) = await session.round([Request.of(groups[t], spec)], last=t == len(lengths) - 1)
        if not len(reports.values):  # nothing to estimate from: say why rather than return noise
            raise LDPError(
                f"TreeHist level {t + 1}: none of its {len(groups[t])} users answered ({reports.counts()}; {'; '.join(reports.errors) or 'over budget?'})"
            )
        freq, sd = level_estimates(spec, description.schema, reports.values, len(candidates))
        return freq, sd, len(groups[t]), int(len(reports.values))

    items, frequencies, levels = await _descend(lengths, z, threshold, beam, level)
    return TreeHistResult(items, frequencies, levels, users=n, epsilon=float(epsilon), bits=bits, z=z)


async def learn_heavy_hitters_treehist_1round(
    lr: LROracle,
    *,
    bits: int,
    epsilon: float,
    beam: int = 32,
    step: int = 1,
    beta: float = 0.05,
    threshold: float | None = None,
    field: str = "x",
    users: int | None = None,
    first_user: int = 0,
    name: str = "treehist-1round",
    oracle: str = "olh",
) -> TreeHistResult:
    """TreeHist in ONE NON-INTERACTIVE round: every user draws its own level (the paper's random
    split of the users across the tree's levels) and reports once; the server descends the tree.

    Bassily, Nissim, Stemmer & Thakurta, "Practical Locally Private Heavy Hitters" (NeurIPS 2017;
    arXiv 1707.04982), TreeHist with the users split across the levels at random. One request
    ``treehist_prefix`` (``ldp.core.prefix_reports``) goes to every user, fixed before any reply:
    a non-interactive protocol (KLNRS Def. 4.4, LNI), where ``learn_heavy_hitters_treehist`` is
    interactive (each level's candidates come from the earlier levels' reports, and the
    aggregator assigns the levels). Each user draws its level t from its own draw (uniform over
    the L levels on the exact integer grid of ``uniform_index``) and sends (t, the OLH report of
    its (t+1)ℓ-bit prefix): one charge of ε, made before the report leaves; the level is a function
    of the user's secret draws only, fresh for every request, and no request names it.

    The server then runs the same descent as the interactive version, from the reports alone:
    level t's candidates (the 2^ℓ prefixes, then the children of the prefixes kept at t − 1,
    ``extend_candidates``) are estimated from the n_t reports that drew t only
    (``TreeHistPrefix.estimates``: f̂ = (C/n_t − 1/g)/(p* − 1/g)), and pruned with the
    same threshold τ_t = z·sd_t, z = ``union_bound_z``(β, L, beam, ℓ), and ``prune`` (at most
    ``beam``). A level that keeps nothing ends the descent; every user has answered (and been
    charged) already. No candidate limit applies (the candidates never travel): beam ≤ 1024.

    Parameters
    ----------
    lr : LROracle
        The users; their schema has a {0,1} field ``field`` of at least ``bits`` bits.
    bits, epsilon, beam, step, beta, threshold, field, users, first_user
        As ``learn_heavy_hitters_treehist`` (no ``seed``: nobody but the users picks a level).
    name : str, default "treehist-1round"
        The session's name in the transcript.
    oracle : str, default "olh"
        The inner oracle: ``olh`` (the one whose report is evaluated at any candidate afterwards).

    Returns
    -------
    TreeHistResult
        As ``learn_heavy_hitters_treehist``; each level's ``users`` and ``answered`` are the
        reports that drew it (random, ≈ n/L), ``rounds`` the levels descended.

    Raises
    ------
    ParameterError
        A parameter out of range, another oracle, or a population without a public schema.
    LDPError
        No user answered.

    Examples
    --------
    >>> import ldp
    >>> from ldp.core.concepts import PointConcept, PointMixture
    >>> cc = ldp.concept_class("point", 10)  # 30 % of users hold the point 1011001110
    >>> population = ldp.PopulationSpec(cc, PointConcept((1, 0, 1, 1, 0, 0, 1, 1, 1, 0)), size=50_000, budget=2.0, distribution=PointMixture(0.3))
    >>> found = ldp.run(learn_heavy_hitters_treehist_1round(ldp.InProcessLROracle(population), bits=10, epsilon=2.0, beam=4))
    >>> found.items, found.rounds
    ((718,), 10)
    >>> 0.25 < found.frequencies[0] < 0.36
    True
    """
    if oracle not in PREFIX_ORACLES:
        raise ParameterError(f"TreeHist (one round): oracle must be one of {list(PREFIX_ORACLES)} (a report evaluated at any candidate afterwards), got {oracle!r}")
    bits, beam, step, epsilon, description, n = _checked(lr, bits, beam, step, epsilon, beta, threshold, users, first_user)
    lengths = treehist_lengths(bits, step)
    z = union_bound_z(float(beta), len(lengths), beam, step)
    spec = RandomizerSpec("treehist_prefix", record_query(), epsilon, {"bits": bits, "step": step, "field": field})
    randomizer = LocalRandomizer.build(spec, description.schema).randomizer  # what each user runs, on the public schema
    assert isinstance(randomizer, TreeHistPrefix)
    session = Session(lr, SessionKind.NON_INTERACTIVE, name=name)
    (reports,) = await session.round([Request.of(range(first_user, first_user + n), spec)], last=True)
    if not len(reports.values):
        raise LDPError(f"TreeHist (one round): none of the {n} users answered ({reports.counts()}; {'; '.join(reports.errors) or 'over budget?'})")
    by_level = randomizer.split_levels(reports.values)  # checked once; level t's rows only are read at level t

    async def level(t: int, length: int, candidates: np.ndarray) -> tuple[np.ndarray, float, int, int]:
        freq, sd, n_t = randomizer.estimates(by_level[t], candidates)  # the reports that drew t
        return freq, sd, n_t, n_t

    items, frequencies, levels = await _descend(lengths, z, threshold, beam, level)
    return TreeHistResult(items, frequencies, levels, users=int(len(reports.values)), epsilon=float(epsilon), bits=bits, z=z)
