"""Multidimensional frequency estimation: SPL, SMP and RS+FD over records of d categorical
attributes, built on the exact frequency oracles (``kary_rr``, ``oue``, ``sue``, ``olh``).

A record is x = (x_1, …, x_d), attribute j taking one of k_j categories. Sources: Arcolezi,
Couchot, Al Bouna & Xiao, "Random Sampling Plus Fake Data: Multidimensional Frequency Estimates
With Local Differential Privacy", ACM CIKM 2021 (arXiv 2109.07269), for RS+FD and its baselines;
Wang et al., ICDE 2019, and Nguyên et al. 2016 for SMP. docs/multidimensional.md says which to pick.

Randomizer kinds ``spl``, ``smp``, ``rsfd`` over the ``record`` query (each schema column an
attribute): ``RecordProtocolRandomizer``, reports as fixed-width uint16 rows (``report_layout``,
``encode_reports``, ``decode_reports``; the end of this module).

Protocols (``epsilon`` is always the loss of the **whole record**: what a ledger charges):

- ``SplitBudget`` (SPL): every attribute through its oracle at ε_j = ε/d (the largest double
  with d·ε_j ≤ ε exactly), all d reports sent.
- ``SampleOne`` (SMP): the user draws j uniformly on its own draw 0 and sends (j, R_j(x_j)) at
  the full ε. j is disclosed.
- ``RandomSamplingFakeData`` (RS+FD, variants ``grr``, ``oue-z``, ``oue-r``, ``adp``): the user
  draws j on its own draw 0; attribute j is sent through the oracle at the inner budget ε_in,
  every other attribute l carries fake data drawn without looking at the record (``grr``: a
  uniform category; ``oue-z``: OUE of the all-zero vector, each bit 1 w.p. q*; ``oue-r``: OUE of a
  uniform category). d values are sent, no index. ``adp`` (RS+FD[ADP]) runs each attribute as
  ``grr`` or ``oue-z``, whichever has the smaller approximate variance at (ε_in, k_l, d)
  (``rsfd_adp_choice``): a function of public parameters only, fixed before any record is read.

The sampled attribute's index is ⌊X·d/2^64⌋ of the user's draw 0 (exact 64×32-bit multiply-high,
``uniform_index``): cell j has ⌈(j+1)2^64/d⌉ − ⌈j·2^64/d⌉ draws, so π_j = that/2^64 exactly
(1/d up to 2^-64); the estimators use the realized π_j, φ, p*, q*. No argument of ``sample``
names the index: the aggregator cannot choose it.

Privacy, per whole record (proof sketches; ``RecordChannel`` + ``ldp.core.audit.verify_exact``
check each exactly by enumerating the realized channel at small k and d):

- SPL. Attribute j's report uses its own draws, so Pr[w|x] = Π_j Pr_j[w_j|x_j] and the record's
  loss is Σ_j loss_j ≤ Σ_j ε_j ≤ ε (each oracle's realized loss ≤ its ε_j, its own exact audit;
  Σ ε_j ≤ ε in exact rationals, ``attribute_epsilons``). Tight: x, x′ differing everywhere.
- SMP. Pr[(j, w)|x] = π_j·Pr_j[w|x_j], π_j independent of x, so the ratio for x, x′ is
  Pr_j[w|x_j]/Pr_j[w|x′_j] ≤ e^{ε}: ε-LDP. Not protected: which attribute was sent.
- RS+FD. With r_j(y_j|x_j) = Pr_j[y_j|x_j]/F_j(y_j) (F_j the fake law, data-independent),
  Pr[y|x] = (Π_l F_l(y_l))·Σ_j π_j r_j(y_j|x_j), so
  Pr[y|x]/Pr[y|x′] = Σ_j π_j r_j(y_j|x_j) / Σ_j π_j r_j(y_j|x′_j) ≤ max_j Pr_j[y_j|x_j]/Pr_j[y_j|x′_j] ≤ e^{ε_in}:
  the record's loss is at most ε_in, **and exactly ε_in** for GRR and OUE-z when x and x′ differ
  in every attribute (y_j = x_j ≠ x′_j for every j: each term has ratio p/q, resp. the bit
  ratio). So ``RandomSamplingFakeData(epsilon=ε)`` uses ε_in = ε.
  *The paper's amplified budget (verify, settled here).* The paper runs the sampled attribute at
  ε′ = ln(d(e^ε − 1) + 1) (``amplified_epsilon``) and states ε-LDP. Enumeration shows what that
  means: for records differing in **one** attribute j, equal k, the worst ratio is
  (r⁺ + (d−1) r⁻)/(d r⁻) = (e^{ε′} + d − 1)/d = e^ε (the paper's bound); for whole records it is
  e^{ε′} > e^ε; and with unequal k_j even the one-attribute loss of RS+FD[GRR] exceeds ε
  (tests/core/test_multidimensional.py). ``RandomSamplingFakeData.paper(ε, …)`` builds the paper's
  parameters with ``epsilon`` = ε′, the honest whole-record charge; ``attribute_epsilon`` is the
  paper's ε.

Estimators (unbiased per attribute, exact variance for a fixed population):

- SPL: each oracle's f̂ = (C/n − q*)/(p* − q*) at ε_j (``frequency_estimates``), its exact
  variance (``frequency_variance``).
- SMP: the same over the n_j users who sent j; unbiased given n_j > 0, and
  Var[f̂ | n_j] = V_FO(f, n_j) + f(1 − f)(n − n_j)/(n_j(n − 1)) (the FO noise plus the
  hypergeometric noise of which users were sampled).
- RS+FD: E[C_v/n] = π_j(q* + (p* − q*)f_v) + (1 − π_j)φ_v with φ_v the fake's support
  probability of v (grr: its uniform cell mass u_v; oue-z: q*; oue-r: u_v p* + (1 − u_v) q*), so
  f̂_v = (C_v/n − π_j q* − (1 − π_j)φ_v)/(π_j(p* − q*)); at π_j = 1/d, u_v = 1/k it is the paper's
  [dkC/n − (d−1) − qk]/[k(p−q)] (GRR), d(C/n − q)/(p−q) (OUE-z),
  [dkC/n − qk − (d−1)(qk + p − q)]/[k(p−q)] (OUE-r) (checked in the tests). Each user's support
  indicator is Bernoulli(s_1) or Bernoulli(s_0), s_b = π_j(q* + b(p* − q*)) + (1 − π_j)φ_v,
  independently, so Var f̂_v = [f s_1(1 − s_1) + (1 − f) s_0(1 − s_0)]/(n π_j² (p* − q*)²).

RS+FD[ADP] (the paper's adaptive variant; multi-freq-ldpy's ``RSpFD_ADP_Client``): per attribute,
GRR if V*_GRR ≤ V*_OUE-z, else OUE-z, with the approximate variances (f = 0, π = 1/d, n = 1, the
ideal p, q at the attribute's ε_in, which is the paper's amplified ε′)
V*_GRR = d²σ(1 − σ)/(p − q)², σ = (q + (d − 1)/k)/d, and V*_OUE-z = d²q(1 − q)/(p − q)²
(``rsfd_approximate_variance``). *Checked (verify):* these are this module's exact
``frequency_variance`` at f = 0 with the realized π, p*, q* (to 1e-9 relative for GRR, 2e-3 for
OUE-z, whose bits are drawn on a b-bit grid; the tests; the choice uses the ideal V*, as the paper),
and the paper's library's ``VAR_RSpFD_GRR`` / ``VAR_RSpFD_UE_zero``; the tie goes to GRR, as
there. The choice is not monotone in k: at ε_in ≥ ~3 OUE-z wins at small k (GRR's uniform fakes
cost more than OUE-z's q-noise), GRR in the middle, OUE-z again at large k (docs/multidimensional.md).
Privacy is unchanged: each attribute's real and fake laws are those of its variant, so the
proof above (any oracle and fake per attribute) and the same ``RecordChannel`` audit apply.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from ldp.core.errors import ParameterError, require_epsilon
from ldp.core.frequency_oracles import (
    FrequencyOracle,
    OptimizedLocalHashing,
    OptimizedUnaryEncoding,
    SymmetricUnaryEncoding,
    UnaryEncoding,
    frequency_estimates,
    frequency_variance,
    support_probabilities,
    unary_draws,
    unary_word,
)
from ldp.core.queries import Query
from ldp.core.randomizer_base import TWO64, Randomizer, SpecView, register_randomizer, uniform_index, uniform_index_masses, uniform_index_starts
from ldp.core.rng import HIGH_HALF, MAX_DRAWS, Draws, UserRandomness, block_pairs, draw_blocks
from ldp.core.rr_mechanisms import KaryRandomizedResponse, category_counts

__all__ = [
    "ORACLES",
    "RSFD_VARIANTS",
    "MultiReports",
    "MultidimensionalProtocol",
    "DrawBlock",
    "draws_used",
    "SplitBudget",
    "SampleOne",
    "RandomSamplingFakeData",
    "RecordChannel",
    "amplified_epsilon",
    "rsfd_approximate_variance",
    "rsfd_adp_choice",
    "attribute_epsilon",
    "build_oracle",
    "one_attribute_loss",
    "RECORD_ORACLES",
    "RecordProtocolRandomizer",
    "report_layout",
    "encode_reports",
    "decode_reports",
]

ORACLES = ("grr", "oue", "sue", "olh")
RSFD_VARIANTS = ("grr", "oue-z", "oue-r", "adp")
_MAX_AUDIT_CELLS = 1 << 16  # RecordChannel: inputs × outputs of the enumerated table


# --- exact helpers ---


def amplified_epsilon(epsilon: float, d: int) -> float:
    """ε′ = ln(d(e^ε − 1) + 1): the inner budget the RS+FD paper gives the sampled attribute
    (Arcolezi et al. 2021, §4). It is the record's loss, not ε (module docstring).

    >>> round(amplified_epsilon(1.0, 2), 3), round(amplified_epsilon(1.0, 10), 3)
    (1.49, 2.9)
    """
    return math.log1p(d * math.expm1(epsilon))


def attribute_epsilon(inner: float, d: int) -> float:
    """ln(1 + (e^{ε_in} − 1)/d): the paper's guarantee for records differing in one attribute
    (equal k_j), the inverse of ``amplified_epsilon``."""
    return math.log1p(math.expm1(inner) / d)


def rsfd_approximate_variance(variant: str, epsilon: float, k: int, d: int) -> float:
    """V*: the approximate variance of RS+FD's f̂_v for one user (n = 1) at f_v = 0, π = 1/d, with
    the ideal p, q of the sampled attribute's oracle at ``epsilon`` (its inner budget, the paper's
    ε′): d²σ(1 − σ)/(p − q)², σ = (q + (d − 1)φ)/d, φ = 1/k (grr), q (oue-z), q + (p − q)/k (oue-r).

    Arcolezi et al. 2021 (CIKM), the variance of §4; multi-freq-ldpy's ``Variance_RSpFD``. Written
    with t = e^{−ε} so that every ε up to 2^10 is finite: GRR p = 1/(1 + (k − 1)t), q = t·p; OUE
    p = 1/2, q = t/(1 + t).

    >>> round(rsfd_approximate_variance("grr", 1.0, 2, 2), 4), round(rsfd_approximate_variance("oue-z", 1.0, 2, 2), 4)
    (4.4327, 14.7308)
    """
    eps = require_epsilon(epsilon)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 2:
        raise ParameterError(f"rs+fd: k must be an integer ≥ 2, got {k!r}")
    if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
        raise ParameterError(f"rs+fd: d must be an integer ≥ 1, got {d!r}")
    t = math.exp(-eps)
    if variant == "grr":
        p = 1.0 / (1.0 + (k - 1) * t)
        q, phi = t * p, 1.0 / k
    elif variant in ("oue-z", "oue-r"):
        p, q = 0.5, t / (1.0 + t)
        phi = q if variant == "oue-z" else q + (p - q) / k
    else:
        raise ParameterError(f"rs+fd: approximate variance of variant grr, oue-z or oue-r, got {variant!r}")
    sigma = (q + (d - 1) * phi) / d
    return d * d * sigma * (1 - sigma) / (p - q) ** 2


def rsfd_adp_choice(epsilon: float, k: int, d: int) -> str:
    """RS+FD[ADP]'s variant for one attribute of k categories among d at inner budget ``epsilon``:
    'grr' if V*_GRR ≤ V*_OUE-z (``rsfd_approximate_variance``; the tie to GRR, as the paper's
    library), else 'oue-z'. Public parameters only: never a record.

    >>> [rsfd_adp_choice(1.0, k, 2) for k in (2, 9, 10)], rsfd_adp_choice(4.0, 2, 2)
    (['grr', 'grr', 'oue-z'], 'oue-z')
    """
    return "grr" if rsfd_approximate_variance("grr", epsilon, k, d) <= rsfd_approximate_variance("oue-z", epsilon, k, d) else "oue-z"


def build_oracle(kind: str, epsilon: float, categories: Sequence[float]) -> Randomizer:
    """The frequency oracle ``kind`` ∈ ``ORACLES`` ('grr' is ``kary_rr``) at ε over the categories."""
    cats = tuple(float(c) for c in categories)
    if kind == "grr":
        return KaryRandomizedResponse(epsilon, cats)
    if kind == "oue":
        return OptimizedUnaryEncoding(epsilon, cats)
    if kind == "sue":
        return SymmetricUnaryEncoding(epsilon, cats)
    if kind == "olh":
        return OptimizedLocalHashing(epsilon, cats)
    raise ParameterError(f"multidimensional: oracle must be one of {list(ORACLES)}, got {kind!r}")


def draws_used(R: Randomizer) -> int:
    """How many draw indices (0, 1, …) R's sampler reads per report."""
    if isinstance(R, UnaryEncoding):
        return unary_draws(R.k, R.chunk_bits)
    if isinstance(R, OptimizedLocalHashing):
        return R.l + 1
    if isinstance(R, KaryRandomizedResponse):
        return 1
    raise ParameterError(f"multidimensional: no draw count for {type(R).__name__}")


class DrawBlock:
    """Draws ``base``, ``base + 1``, … of every user's randomness, for the users in ``rows``
    (all when None): an attribute's own block of draws. The values are the users' own; only the
    draw index moves (``bits(i)`` is the record randomness's ``bits(base + i)``)."""

    def __init__(self, randomness: Draws, base: int, rows: np.ndarray | None = None) -> None:
        self.base = base
        self.rows = rows
        if rows is not None and isinstance(randomness, UserRandomness):
            # compute only the selected users' draws (the same words: a draw is a function of
            # (key, user, counter, index), not of who else is in the batch)
            counters = randomness.counters
            randomness = UserRandomness(randomness.key, randomness.users[rows], counters if np.ndim(counters) == 0 else np.asarray(counters)[rows])
            self.rows = None
        self.inner = randomness

    @property
    def users(self) -> np.ndarray:
        users = self.inner.users
        return users if self.rows is None else users[self.rows]

    def bits(self, draw: int = 0) -> np.ndarray:
        b = self.inner.bits(self.base + draw)
        return b if self.rows is None else b[self.rows]

    def uniform(self, draw: int = 0) -> np.ndarray:
        u = self.inner.uniform(self.base + draw)
        return u if self.rows is None else u[self.rows]

    def block_matrix(self, first: int, count: int, rows: slice | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Whole blocks, forwarded (``ldp.core.rng.draw_blocks``): the inner object's fast path."""
        if self.rows is None:
            return draw_blocks(self.inner, self.base + first, count, rows, out)
        return draw_blocks(self.inner, self.base + first, count)[np.asarray(self.rows)[slice(None) if rows is None else rows]]

    def pair_blocks(self, rows: np.ndarray, draws: np.ndarray) -> np.ndarray:
        """Chosen (user, block) pairs, forwarded (``ldp.core.rng.block_pairs``)."""
        r = np.asarray(rows, dtype=np.int64)
        return block_pairs(self.inner, r if self.rows is None else np.asarray(self.rows)[r], np.asarray(draws, dtype=np.int64) + self.base)


@dataclass(frozen=True)
class MultiReports:
    """What the users send. ``columns[j]``: attribute j's reports in its oracle's format, one per
    user (SPL, RS+FD) or one per user who sampled j, in user order (SMP); ``sampled``: SMP's
    disclosed index of each user (None otherwise); ``n``: the number of users."""

    columns: tuple[np.ndarray, ...]
    n: int
    sampled: np.ndarray | None = None


# --- the protocols ---


@dataclass(frozen=True)
class _Protocol:
    epsilon: float
    attributes: tuple[tuple[float, ...], ...]
    kind: ClassVar[str] = "multidimensional"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        attrs = tuple(tuple(sorted(float(c) for c in a)) for a in self.attributes)
        if len(attrs) < 2:
            raise ParameterError(f"{self.kind}: needs d ≥ 2 attributes, got d={len(attrs)}")
        object.__setattr__(self, "attributes", attrs)

    @property
    def d(self) -> int:
        return len(self.attributes)

    @property
    def ks(self) -> tuple[int, ...]:
        return tuple(len(a) for a in self.attributes)

    def check_records(self, records: np.ndarray) -> np.ndarray:
        """Records as an (n, d) float array, every value one of its attribute's categories."""
        x = np.asarray(records, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ParameterError(f"{self.kind}: records must be an (n, {self.d}) array, got shape {x.shape}")
        for j, cats in enumerate(self.attributes):
            ok = np.isin(x[:, j], np.asarray(cats))
            if not ok.all():
                raise ParameterError(f"{self.kind}: attribute {j} value {x[~ok, j][0].item()!r} is not one of its categories {cats[:8]}")
        return x

    def _index_masses(self) -> list[int]:
        return uniform_index_masses(self.d)


@dataclass(frozen=True)
class SplitBudget(_Protocol):
    """SPL: every attribute through ``oracle`` at ε/d, all d reports sent (module docstring).

    >>> spl = SplitBudget(1.0, ((0, 1), (0, 1, 2)))
    >>> [round(e, 6) for e in spl.attribute_epsilons()], sum(map(Fraction, spl.attribute_epsilons())) <= 1
    ([0.5, 0.5], True)
    """

    oracle: str = "grr"
    kind: ClassVar[str] = "spl"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.oracles  # noqa: B018  (validates)
        if sum(draws_used(R) for R in self.oracles) > MAX_DRAWS:
            raise ParameterError(f"spl: the record needs more than {MAX_DRAWS} draws; use fewer or smaller attributes")

    def attribute_epsilons(self) -> list[float]:
        """ε_j: the largest double with d·ε_j ≤ ε in exact rationals (the float ε/d may round up)."""
        e = self.epsilon / self.d
        if Fraction(e) * self.d > Fraction(self.epsilon):
            e = float(np.nextafter(e, 0.0))
        return [e] * self.d

    @cached_property
    def oracles(self) -> tuple[Randomizer, ...]:
        return tuple(build_oracle(self.oracle, e, cats) for e, cats in zip(self.attribute_epsilons(), self.attributes))

    @cached_property
    def bases(self) -> list[int]:
        """The first draw of each attribute's block."""
        out, at = [], 0
        for R in self.oracles:
            out.append(at)
            at += draws_used(R)
        return out

    def sample(self, records: np.ndarray, randomness: Draws) -> MultiReports:
        x = self.check_records(records)
        cols = tuple(R.sample(x[:, j], DrawBlock(randomness, b)) for j, (R, b) in enumerate(zip(self.oracles, self.bases)))
        return MultiReports(cols, len(x))

    def frequencies(self, reports: MultiReports) -> list[np.ndarray]:
        """Unbiased f̂ per attribute (each oracle's estimator at its ε_j)."""
        return [frequency_estimates(R, c) for R, c in zip(self.oracles, reports.columns)]

    def frequency_variance(self, f: Sequence[np.ndarray], n: int) -> list[np.ndarray]:
        """The exact variance of each f̂_j for n users at true frequencies f_j."""
        return [frequency_variance(R, fj, n) for R, fj in zip(self.oracles, f)]


@dataclass(frozen=True)
class SampleOne(_Protocol):
    """SMP: each user draws j (its draw 0) and sends (j, R_j(x_j)) at the full ε."""

    oracle: str = "grr"
    kind: ClassVar[str] = "smp"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.oracles  # noqa: B018  (validates)
        if 1 + sum(draws_used(R) for R in self.oracles) > MAX_DRAWS:
            raise ParameterError(f"smp: the record needs more than {MAX_DRAWS} draws; use fewer or smaller attributes")

    @cached_property
    def oracles(self) -> tuple[Randomizer, ...]:
        return tuple(build_oracle(self.oracle, self.epsilon, cats) for cats in self.attributes)

    @cached_property
    def bases(self) -> list[int]:
        """The first draw of each attribute's block; draw 0 is the sampled index."""
        out, at = [], 1  # draw 0: the sampled index
        for R in self.oracles:
            out.append(at)
            at += draws_used(R)
        return out

    def sampled_index(self, randomness: Draws) -> np.ndarray:
        """Each user's own attribute index, from its draw 0."""
        return uniform_index(randomness.bits(0), self.d)

    def sample(self, records: np.ndarray, randomness: Draws) -> MultiReports:
        x = self.check_records(records)
        j = self.sampled_index(randomness)
        cols = []
        for a, (R, b) in enumerate(zip(self.oracles, self.bases)):
            rows = np.flatnonzero(j == a)
            cols.append(R.sample(x[rows, a], DrawBlock(randomness, b, rows)))
        return MultiReports(tuple(cols), len(x), j)

    def frequencies(self, reports: MultiReports) -> list[np.ndarray]:
        """Unbiased f̂ per attribute from the n_j users who sent it (needs n_j ≥ 1)."""
        empty = [a for a, c in enumerate(reports.columns) if len(c) == 0]
        if empty:
            raise ParameterError(f"smp: no user sent attribute {empty[0]} (n_j = 0); collect from more users")
        return [frequency_estimates(R, c) for R, c in zip(self.oracles, reports.columns)]

    def frequency_variance(self, f: Sequence[np.ndarray], counts: Sequence[int], n: int) -> list[np.ndarray]:
        """Var[f̂_j | n_j] = V_FO(f_j, n_j) + f_j(1 − f_j)(n − n_j)/(n_j(n − 1)), ``counts`` = n_j."""
        out = []
        for R, fj, m in zip(self.oracles, f, counts):
            fj = np.asarray(fj, dtype=np.float64)
            out.append(frequency_variance(R, fj, m) + fj * (1 - fj) * (n - m) / (m * max(n - 1, 1)))
        return out


@dataclass(frozen=True)
class RandomSamplingFakeData(_Protocol):
    """RS+FD (Arcolezi et al. 2021): attribute j (the user's draw 0) through GRR or OUE at
    ``epsilon``, every other attribute fake data; ``variant`` ∈ ``RSFD_VARIANTS`` ('adp': each
    attribute's own variant, ``variants``).

    ``epsilon`` is the sampled attribute's budget and the whole record's exact loss (module
    docstring); ``paper`` builds the paper's amplified parameters.

    >>> rs = RandomSamplingFakeData.paper(1.0, ((0, 1), (0, 1)), "grr")
    >>> round(rs.epsilon, 4), round(rs.attribute_epsilon, 4)  # charged, the paper's ε
    (1.4899, 1.0)
    """

    variant: str = "grr"
    kind: ClassVar[str] = "rs+fd"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.variant not in RSFD_VARIANTS:
            raise ParameterError(f"rs+fd: variant must be one of {list(RSFD_VARIANTS)}, got {self.variant!r}")
        for R, F in zip(self.oracles, self.fake_oracles):
            if isinstance(F, UnaryEncoding) and F.thresholds[1] != R.thresholds[1]:  # type: ignore[attr-defined]
                raise ParameterError("rs+fd: the OUE-z fake's bit law differs from the oracle's q*")  # pragma: no cover - same ε, same grid
        if self.bases[-1][1] + self._fake_draws(self.d - 1) > MAX_DRAWS:
            raise ParameterError(f"rs+fd: the record needs more than {MAX_DRAWS} draws; use fewer or smaller attributes")

    @classmethod
    def paper(cls, epsilon: float, attributes: Sequence[Sequence[float]], variant: str = "grr") -> RandomSamplingFakeData:
        """The paper's RS+FD for its ε: the sampled attribute at ε′ = ``amplified_epsilon``(ε, d),
        which is also this object's ``epsilon``: the whole record's loss, what is charged."""
        attrs = tuple(tuple(a) for a in attributes)
        return cls(amplified_epsilon(require_epsilon(epsilon), len(attrs)), attrs, variant)

    @property
    def attribute_epsilon(self) -> float:
        """The paper's per-attribute ε (records differing in one attribute, equal k_j)."""
        return attribute_epsilon(self.epsilon, self.d)

    @cached_property
    def variants(self) -> tuple[str, ...]:
        """Each attribute's variant: ``variant`` itself, or for 'adp' ``rsfd_adp_choice`` at
        (``epsilon``, k_a, d), fixed when the protocol is built (public parameters only)."""
        if self.variant == "adp":
            return tuple(rsfd_adp_choice(self.epsilon, k, self.d) for k in self.ks)
        return (self.variant,) * self.d

    @cached_property
    def oracles(self) -> tuple[Randomizer, ...]:
        return tuple(build_oracle("grr" if v == "grr" else "oue", self.epsilon, cats) for v, cats in zip(self.variants, self.attributes))

    @cached_property
    def fake_oracles(self) -> tuple[Randomizer | None, ...]:
        """The OUE that draws the fake bits: OUE-z's over k + 1 categories (its input is the extra
        one, whose bit is dropped: every kept bit is 1 w.p. q*), OUE-r's the oracle itself."""
        out: list[Randomizer | None] = []
        for v, R, cats in zip(self.variants, self.oracles, self.attributes):
            if v == "grr":
                out.append(None)
            elif v == "oue-r":
                out.append(R)
            else:
                out.append(OptimizedUnaryEncoding(self.epsilon, cats + (cats[-1] + 1.0,)))
        return tuple(out)

    def _fake_draws(self, a: int) -> int:
        F = self.fake_oracles[a]
        return (0 if F is None else draws_used(F)) + (0 if self.variants[a] == "oue-z" else 1)

    @cached_property
    def bases(self) -> list[tuple[int, int]]:
        """(first real draw, first fake draw) of each attribute; draw 0 is the sampled index."""
        out, at = [], 1
        for a, R in enumerate(self.oracles):
            out.append((at, at + draws_used(R)))
            at += draws_used(R) + self._fake_draws(a)
        return out

    def sampled_index(self, randomness: Draws) -> np.ndarray:
        """Each user's own attribute index, from its draw 0 (never sent)."""
        return uniform_index(randomness.bits(0), self.d)

    def fake(self, a: int, x: np.ndarray, randomness: Draws) -> np.ndarray:
        """Attribute a's fake reports for the users of ``randomness`` (a ``DrawBlock`` at a's
        fake draws). ``x`` is their true value of a, passed only so that a broken variant can be
        written and caught (the tests): the fake never reads it."""
        cats = np.asarray(self.attributes[a])
        k = len(cats)
        if self.variants[a] == "grr":
            return cats[uniform_index(randomness.bits(0), k)]
        F = self.fake_oracles[a]
        assert isinstance(F, UnaryEncoding)
        if self.variants[a] == "oue-r":
            return F.sample(cats[uniform_index(randomness.bits(0), k)], DrawBlock(randomness, 1))
        packed = F.sample(np.full(len(randomness.users), float(F.categories[-1])), randomness)
        out = packed[:, : (k + 7) // 8].copy()
        if k % 8:
            out[:, -1] &= np.uint8((0xFF << (8 - k % 8)) & 0xFF)  # drop the extra category's bit
        return out

    def sample(self, records: np.ndarray, randomness: Draws) -> MultiReports:
        x = self.check_records(records)
        j = self.sampled_index(randomness)
        cols = []
        for a, (R, (b_real, b_fake)) in enumerate(zip(self.oracles, self.bases)):
            real, fake = np.flatnonzero(j == a), np.flatnonzero(j != a)
            got_real = R.sample(x[real, a], DrawBlock(randomness, b_real, real))
            got_fake = self.fake(a, x[fake, a], DrawBlock(randomness, b_fake, fake))
            col = np.empty((len(x),) + got_real.shape[1:], dtype=got_real.dtype)
            col[real], col[fake] = got_real, got_fake
            cols.append(col)
        return MultiReports(tuple(cols), len(x))

    # --- the estimator ---

    def index_probability(self, a: int) -> Fraction:
        """π_a: the realized probability that a user samples attribute a."""
        return Fraction(self._index_masses()[a], TWO64)

    def fake_support(self, a: int) -> np.ndarray:
        """φ_v: the probability that attribute a's fake report supports each category, exactly
        realized (grr: its uniform cell mass; oue-z: q*; oue-r: u_v p* + (1 − u_v) q*)."""
        p, q = support_probabilities(self.oracles[a])
        u = [Fraction(m, TWO64) for m in uniform_index_masses(self.ks[a])]
        if self.variants[a] == "grr":
            return np.array([float(x) for x in u])
        if self.variants[a] == "oue-z":
            return np.full(self.ks[a], float(q))
        return np.array([float(x * p + (1 - x) * q) for x in u])

    def support_counts(self, a: int, column: np.ndarray) -> np.ndarray:
        """C_v: how many of attribute a's reports support each category."""
        R = self.oracles[a]
        if isinstance(R, FrequencyOracle):
            return R.support_counts(column)
        return category_counts(np.asarray(column), self.attributes[a])

    def frequencies(self, reports: MultiReports) -> list[np.ndarray]:
        """Unbiased f̂_v = (C_v/n − π q* − (1 − π)φ_v)/(π(p* − q*)) per attribute (module docstring)."""
        n = reports.n
        if n == 0:
            raise ParameterError("rs+fd: no reports to estimate from")
        out = []
        for a, col in enumerate(reports.columns):
            p, q = (float(v) for v in support_probabilities(self.oracles[a]))
            pi = float(self.index_probability(a))
            out.append((self.support_counts(a, col) / n - pi * q - (1 - pi) * self.fake_support(a)) / (pi * (p - q)))
        return out

    def frequency_variance(self, f: Sequence[np.ndarray], n: int) -> list[np.ndarray]:
        """Var f̂_v = [f s_1(1 − s_1) + (1 − f) s_0(1 − s_0)]/(n π² (p* − q*)²), exactly, for a
        fixed population of n users at true frequencies f (module docstring)."""
        out = []
        for a, fa in enumerate(f):
            p, q = (float(v) for v in support_probabilities(self.oracles[a]))
            pi = float(self.index_probability(a))
            phi = self.fake_support(a)
            s1, s0 = pi * p + (1 - pi) * phi, pi * q + (1 - pi) * phi
            fa = np.asarray(fa, dtype=np.float64)
            out.append((fa * s1 * (1 - s1) + (1 - fa) * s0 * (1 - s0)) / (n * pi**2 * (p - q) ** 2))
        return out


MultidimensionalProtocol = SplitBudget | SampleOne | RandomSamplingFakeData


# --- the exact audit over whole records (small k and d) ---


def _attribute_table(R: Randomizer) -> tuple[list[bytes], list[list[Fraction]]]:
    """R's report alphabet (each report row as bytes, in enumeration order) and its realized
    Pr[w | category] as Fractions, from R's own realized integer masses."""
    if isinstance(R, KaryRandomizedResponse):
        cats = np.asarray(R.categories)
        outputs, masses, den = R.realized(cats)
        keys = [np.asarray([v]).tobytes() for v in outputs]
    elif isinstance(R, UnaryEncoding):
        from ldp.core.audit_structure import enumerated  # the audit layer (scipy): only when an audit asks

        E = enumerated(R)
        _, masses, den = E.realized(np.asarray(R.categories))
        ints = np.arange(1 << R.k, dtype=np.int64)
        rows = np.packbits(((ints[:, None] >> np.arange(R.k)[None, :]) & 1).astype(bool), axis=1)
        keys = [r.tobytes() for r in rows]
    else:
        raise ParameterError(f"RecordChannel enumerates grr, oue and sue attributes, not {type(R).__name__}")
    return keys, [[Fraction(int(m), den) for m in row] for row in masses]


def _report_key(R: Randomizer, row: np.ndarray) -> bytes:
    if isinstance(R, KaryRandomizedResponse):
        return np.asarray([float(row)]).tobytes()
    return np.asarray(row, dtype=np.uint8).tobytes()


class _Layout:
    """The randomness a protocol reads, presented to ``verify_exact`` as one virtual draw per
    independent integer: a GRR or index draw is itself; a unary encoding's word is c chunks, and
    chunk i of its word w is virtual draw ``chunks[(w, i)]`` (the top b bits of it), so that
    every virtual draw's cells are intervals (as ``ldp.core.audit_structure`` does for one
    oracle). ``starts[v](x)``: virtual draw v's cell starts for record x."""

    def __init__(self) -> None:
        self.direct: dict[int, int] = {}  # real draw -> virtual draw
        self.chunked: dict[int, tuple[int, int, int, list[int]]] = {}  # real draw -> (b, k, its index in the unary layout, virtual draws of the k bits)
        self.starts: list[Any] = []

    def add(self, starts: Any) -> int:
        self.starts.append(starts)
        return len(self.starts) - 1


class _VirtualDraws:
    """A Draws whose real draw d is assembled from the audit's virtual draws (``_Layout``)."""

    def __init__(self, layout: _Layout, virtual: Draws) -> None:
        self.layout, self.virtual = layout, virtual
        self.users = virtual.users

    def bits(self, draw: int = 0) -> np.ndarray:
        if draw in self.layout.direct:
            return self.virtual.bits(self.layout.direct[draw])
        b, k, word, per_bit = self.layout.chunked[draw]
        return unary_word(word, k, b, lambda j: self.virtual.bits(per_bit[j]) >> np.uint64(64 - b))

    def uniform(self, draw: int = 0) -> np.ndarray:  # pragma: no cover - the samplers read bits only
        raise NotImplementedError


@dataclass(frozen=True)
class RecordChannel(Randomizer):
    """A protocol seen by ``ldp.core.audit.verify_exact`` over whole records: input i is the
    i-th record of the product of the attributes' categories, output j the j-th whole report
    (SPL, RS+FD: a tuple of d reports; SMP: (attribute, report)). ``realized`` is the channel
    composed from each oracle's own realized masses by the module docstring's formulas (the
    proof); ``draw_cells`` and ``sample`` feed the protocol's **real sampler** every cell of
    every draw, so ``verify_exact`` checks that the sampler emits that channel, and computes the
    whole record's exact worst ratio against e^ε. Small k and d only (≤ 2^16 table cells).
    """

    protocol: Any
    kind: ClassVar[str] = "record channel"

    def __post_init__(self) -> None:
        if len(self.records) * len(self.report_keys) > _MAX_AUDIT_CELLS:
            raise ParameterError(f"RecordChannel: {len(self.records)} records × {len(self.report_keys)} reports is too many to enumerate")

    @property
    def epsilon(self) -> float:  # type: ignore[override]
        return float(self.protocol.epsilon)

    # the enumeration

    @cached_property
    def records(self) -> np.ndarray:
        """Every record, in input order (the product of the attributes' categories)."""
        grids = np.meshgrid(*[np.asarray(c) for c in self.protocol.attributes], indexing="ij")
        return np.stack([g.ravel() for g in grids], axis=1)

    def _reals(self) -> tuple[Randomizer, ...]:
        return tuple(self.protocol.oracles)

    @cached_property
    def tables(self) -> list[tuple[list[bytes], list[list[Fraction]]]]:
        """Per attribute: its report alphabet and realized Pr[w | category]."""
        return [_attribute_table(R) for R in self._reals()]

    def _fake_laws(self) -> list[list[Fraction]]:
        P = self.protocol
        out = []
        for a, (keys, table) in enumerate(self.tables):
            u = [Fraction(m, TWO64) for m in uniform_index_masses(P.ks[a])]
            if P.variants[a] == "grr":
                out.append(u)
            elif P.variants[a] == "oue-r":
                out.append([sum((u[c] * table[c][w] for c in range(len(u))), Fraction(0)) for w in range(len(keys))])
            else:
                R = self._reals()[a]
                assert isinstance(R, UnaryEncoding)
                q = R.bit_probabilities()[1]
                out.append([q ** bin(w).count("1") * (1 - q) ** (R.k - bin(w).count("1")) for w in range(len(keys))])
        return out

    @cached_property
    def report_keys(self) -> list[tuple[int, ...]]:
        """Every whole report as a tuple of per-attribute report indices (SMP: (a, w))."""
        sizes = [len(t[0]) for t in self.tables]
        if isinstance(self.protocol, SampleOne):
            return [(a, w) for a, s in enumerate(sizes) for w in range(s)]
        grids = np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij")
        return [tuple(int(v) for v in row) for row in np.stack([g.ravel() for g in grids], axis=1)]

    @cached_property
    def channel(self) -> list[list[Fraction]]:
        """Pr[whole report | record] for every record and report, exactly (the proof's formula)."""
        P = self.protocol
        tables = self.tables
        cat_index = [{c: i for i, c in enumerate(cats)} for cats in P.attributes]
        pis = [Fraction(m, TWO64) for m in uniform_index_masses(P.d)]
        fakes = self._fake_laws() if isinstance(P, RandomSamplingFakeData) else None
        rows = []
        for rec in self.records:
            xi = [cat_index[a][float(v)] for a, v in enumerate(rec)]
            row = []
            for key in self.report_keys:
                if isinstance(P, SampleOne):
                    a, w = key
                    row.append(pis[a] * tables[a][1][xi[a]][w])
                elif isinstance(P, SplitBudget):
                    row.append(math.prod((tables[a][1][xi[a]][w] for a, w in enumerate(key)), start=Fraction(1)))
                else:
                    assert fakes is not None
                    total = Fraction(0)
                    for j in range(P.d):
                        term = pis[j] * tables[j][1][xi[j]][key[j]]
                        for a in range(P.d):
                            if a != j:
                                term *= fakes[a][key[a]]
                        total += term
                    row.append(total)
            rows.append(row)
        return rows

    # Randomizer's audit interface

    def input_domain(self) -> np.ndarray:
        return np.arange(len(self.records), dtype=np.float64)

    def output_domain(self) -> np.ndarray:
        return np.arange(len(self.report_keys), dtype=np.float64)

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        table = self.channel
        den = max(f.denominator for row in table for f in row)
        idx = np.asarray(inputs, dtype=np.float64).ravel().astype(np.int64)
        masses = np.empty((len(idx), len(self.report_keys)), dtype=object)
        for i, r in enumerate(idx):
            masses[i] = [int(f * den) for f in table[r]]
        return self.output_domain(), masses, den

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        table = self.channel
        uu, ww = np.broadcast_arrays(np.asarray(u, dtype=np.int64), np.asarray(w, dtype=np.int64))
        flat = [table[int(a)][int(b)] for a, b in zip(uu.ravel(), ww.ravel())]
        with np.errstate(divide="ignore"):
            return np.array([math.log(f) if f > 0 else -math.inf for f in flat]).reshape(uu.shape)

    @cached_property
    def layout(self) -> _Layout:
        """The virtual draws: index draw, then each attribute's real (and fake) blocks."""
        P = self.protocol
        L = _Layout()
        cat_index = [{c: i for i, c in enumerate(cats)} for cats in P.attributes]
        records = self.records

        def unary(base: int, R: UnaryEncoding, attribute: int, role: str) -> None:
            b = R.chunk_bits
            t_in, t_out = R.thresholds
            shift = 64 - b
            per_bit = []
            for bit in range(R.k):

                def starts(u: float, bit: int = bit) -> np.ndarray:
                    xi = cat_index[attribute][float(records[int(u)][attribute])]
                    if role == "real":
                        t = {t_in if bit == xi else t_out}
                    elif role == "fake-z":
                        t = {t_out} if bit < R.k - 1 else set()  # the extra category's bit is dropped
                    else:  # oue-r: the fake value is any category
                        t = {t_in, t_out}
                    return np.array([0] + sorted(x << shift for x in t), dtype=np.uint64)

                per_bit.append(L.add(starts))
            for w in range(unary_draws(R.k, b)):  # bit j's X_j sits where ``unary_word`` puts it
                L.chunked[base + w] = (b, R.k, w, per_bit)  # block w's low half, read as bits(base + w)
                L.chunked[base + w + HIGH_HALF] = (b, R.k, w + HIGH_HALF, per_bit)  # its high half (``draw_blocks``)

        def direct(draw: int, starts: Any) -> None:
            L.direct[draw] = L.add(starts)

        index_starts = np.array(uniform_index_starts(P.d), dtype=np.uint64)
        if not isinstance(P, SplitBudget):
            direct(0, lambda u: index_starts)
        bases = P.bases
        for a, R in enumerate(P.oracles):
            base = bases[a][0] if isinstance(P, RandomSamplingFakeData) else bases[a]
            if isinstance(R, UnaryEncoding):
                unary(base, R, a, "real")
            else:
                direct(base, lambda u, a=a, R=R: np.asarray(R.draw_cells(float(records[int(u)][a]))[0], dtype=np.uint64))
            if isinstance(P, RandomSamplingFakeData):
                fb = bases[a][1]
                k_starts = np.array(uniform_index_starts(P.ks[a]), dtype=np.uint64)
                if P.variants[a] != "oue-z":
                    direct(fb, lambda u, s=k_starts: s)
                F = P.fake_oracles[a]
                if P.variants[a] == "oue-r":
                    assert isinstance(F, UnaryEncoding)
                    unary(fb + 1, F, a, "fake-r")
                elif P.variants[a] == "oue-z":
                    assert isinstance(F, UnaryEncoding)
                    unary(fb, F, a, "fake-z")
        return L

    def draw_cells(self, u: float) -> list[np.ndarray]:
        return [s(u) for s in self.layout.starts]

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        P = self.protocol
        records = self.records[np.asarray(inputs, dtype=np.float64).astype(np.int64)]
        reports = P.sample(records, _VirtualDraws(self.layout, randomness))
        tables = self.tables
        lookup = [{k: i for i, k in enumerate(t[0])} for t in tables]
        keys = {k: i for i, k in enumerate(self.report_keys)}
        out = np.empty(len(records), dtype=np.float64)
        if isinstance(P, SampleOne):
            seen = np.zeros(P.d, dtype=np.int64)
            for i, a in enumerate(reports.sampled):  # type: ignore[union-attr]
                a = int(a)
                out[i] = keys[(a, lookup[a][_report_key(P.oracles[a], reports.columns[a][seen[a]])])]
                seen[a] += 1
            return out
        for i in range(len(records)):
            out[i] = keys[tuple(lookup[a][_report_key(P.oracles[a], reports.columns[a][i])] for a in range(P.d))]
        return out


def one_attribute_loss(channel: RecordChannel) -> float:
    """The largest ln Pr[w|x]/Pr[w|x′] over records x, x′ that differ in exactly one attribute
    (the paper's neighbouring notion for RS+FD), exactly computed then rounded to a double."""
    table = channel.channel
    records = channel.records
    worst = Fraction(1)
    for i in range(len(records)):
        for j in range(len(records)):
            if int((records[i] != records[j]).sum()) != 1:
                continue
            for a, b in zip(table[i], table[j]):
                if b == 0:
                    if a > 0:
                        return math.inf
                    continue
                worst = max(worst, a / b)
    return math.log(worst.numerator) - math.log(worst.denominator)


# --- the randomizer kinds ``spl``, ``smp`` and ``rsfd`` over the ``record`` query ---
#
# A report is one fixed-width row of uint16 (docs/multidimensional.md, "As randomizer kinds"),
# so that the wire's format check (``ldp.wire.codec.report_format``: ``report_columns`` and
# ``report_domains``) refuses a malformed one. Attribute a's block: GRR, 1 column, the index of
# the reported category among a's sorted categories (0..k_a − 1); OUE/SUE, a's packed bit row
# (⌈k_a/8⌉ bytes, the last's padding bits zero). SPL and RS+FD: the d blocks side by side (RS+FD
# sends no index). SMP: column 0 the disclosed index j, then j's block, zero-padded to the widest
# block (the check that the padding and j's values fit j is ``decode_reports``'s, as the wire's
# domains are per column, not per j; with equal k_a the wire's check is already exact).

RECORD_ORACLES = ("grr", "oue", "sue")  # olh's hashed (seed, y) reports are not a uint16 row


def _block(R: Randomizer) -> tuple[np.ndarray, ...]:
    """The allowed values of each column of one attribute's report block."""
    if isinstance(R, KaryRandomizedResponse):
        return (np.arange(len(R.categories)),)
    assert isinstance(R, UnaryEncoding)
    return tuple(np.arange(256) if d is None else np.asarray(d) for d in R.report_domains())


def report_layout(protocol: MultidimensionalProtocol) -> tuple[np.ndarray, ...]:
    """Per report column, the values it may take (sorted): what ``report_domains`` gives the wire."""
    blocks = [_block(R) for R in protocol.oracles]
    if not isinstance(protocol, SampleOne):
        return tuple(c for b in blocks for c in b)
    width = max(len(b) for b in blocks)
    cols = [np.unique(np.concatenate([b[c] if c < len(b) else np.zeros(1, dtype=np.int64) for b in blocks])) for c in range(width)]
    return (np.arange(protocol.d), *cols)


def _encode_block(R: Randomizer, cats: tuple[float, ...], column: np.ndarray) -> np.ndarray:
    if isinstance(R, KaryRandomizedResponse):
        return np.searchsorted(np.asarray(cats), np.asarray(column, dtype=np.float64)).astype(np.uint16)[:, None]
    return np.asarray(column, dtype=np.uint8).reshape(len(column), -1).astype(np.uint16)


def encode_reports(protocol: MultidimensionalProtocol, reports: MultiReports) -> np.ndarray:
    """The users' rows (uint16, ``report_layout``'s width) of the protocol's ``MultiReports``."""
    blocks = [_block(R) for R in protocol.oracles]
    parts = [_encode_block(R, cats, col) for R, cats, col in zip(protocol.oracles, protocol.attributes, reports.columns)]
    if not isinstance(protocol, SampleOne):
        return np.concatenate(parts, axis=1) if parts else np.zeros((reports.n, 0), dtype=np.uint16)
    assert reports.sampled is not None
    out = np.zeros((reports.n, 1 + max(len(b) for b in blocks)), dtype=np.uint16)
    out[:, 0] = reports.sampled
    for a, part in enumerate(parts):
        out[np.flatnonzero(reports.sampled == a), 1 : 1 + part.shape[1]] = part
    return out


def decode_reports(protocol: MultidimensionalProtocol, rows: np.ndarray) -> MultiReports:
    """The ``MultiReports`` of the rows an aggregator received: what the estimators read
    (``protocol.frequencies``). Refuses (ParameterError, one line) a row of the wrong width, a
    value outside its column's domain, or an SMP row whose block does not fit its attribute."""
    w = np.asarray(rows)
    layout = report_layout(protocol)
    if w.ndim != 2 or w.shape[1] != len(layout):
        raise ParameterError(f"{protocol.kind}: reports must be rows of {len(layout)} values, got shape {w.shape}")
    blocks = [_block(R) for R in protocol.oracles]

    def check(values: np.ndarray, domains: Sequence[np.ndarray], where: str) -> None:
        for c, dom in enumerate(domains):
            bad = ~np.isin(values[:, c], dom)
            if bad.any():
                raise ParameterError(f"{protocol.kind}: report {where} column {c} holds {values[bad, c][0].item()!r}, outside {dom.tolist()[:8]}")

    def column(a: int, block: np.ndarray) -> np.ndarray:
        R = protocol.oracles[a]
        if isinstance(R, KaryRandomizedResponse):
            return np.asarray(protocol.attributes[a])[block[:, 0].astype(np.int64)]
        return block.astype(np.uint8)

    if isinstance(protocol, SampleOne):
        check(w[:, :1], layout[:1], "index")
        j = w[:, 0].astype(np.int64)
        cols = []
        for a, b in enumerate(blocks):
            rows_a = w[j == a]
            check(rows_a[:, 1 : 1 + len(b)], b, f"of attribute {a}")
            if (rows_a[:, 1 + len(b) :] != 0).any():
                raise ParameterError(f"{protocol.kind}: a report of attribute {a} has nonzero padding past its {len(b)} columns")
            cols.append(column(a, rows_a[:, 1 : 1 + len(b)]))
        return MultiReports(tuple(cols), len(w), j)
    check(w, layout, "")
    cols, at = [], 0
    for a, b in enumerate(blocks):
        cols.append(column(a, w[:, at : at + len(b)]))
        at += len(b)
    return MultiReports(tuple(cols), len(w))


@dataclass(frozen=True)
class RecordProtocolRandomizer(Randomizer):
    """A multidimensional protocol as a randomizer of whole records (kinds ``spl``, ``smp``,
    ``rsfd``): input a record of d columns, output one uint16 row (``report_layout``).

    ``epsilon`` is what the ledger charges (the spec's ε); the protocol's own ``epsilon``, its
    whole record's realized loss (module docstring), is ≤ it: equal, except for ``rsfd`` with
    ``paper_epsilon``, whose ε′ may be below the spec's. The sampled index is the user's own
    draw 0 (the protocol's ``sample``); nothing in the spec names it.
    """

    epsilon: float
    protocol: Any
    kind: ClassVar[str] = "multidimensional"
    report_dtype: ClassVar[type[np.generic]] = np.uint16

    def __post_init__(self) -> None:
        if Fraction(float(self.protocol.epsilon)) > Fraction(self.epsilon):
            raise ParameterError(f"{self.protocol.kind}: the record's loss {self.protocol.epsilon!r} exceeds the charged ε={self.epsilon!r}")  # pragma: no cover - the builder refuses first

    @property
    def input_width(self) -> int:
        return int(self.protocol.d)

    @property
    def report_columns(self) -> int:
        return len(self.report_domains())

    def report_domains(self) -> tuple[np.ndarray | None, ...]:
        return report_layout(self.protocol)

    def input_domain(self) -> np.ndarray:
        grids = np.meshgrid(*[np.asarray(c) for c in self.protocol.attributes], indexing="ij")
        if math.prod(self.protocol.ks) > 4096:
            raise ParameterError(f"{self.protocol.kind}: the record domain has {math.prod(self.protocol.ks)} > 4096 points; enumerate a smaller schema")
        return np.stack([g.ravel() for g in grids], axis=1)

    def check_inputs(self, values: np.ndarray) -> np.ndarray:
        return self.protocol.check_records(values)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        return encode_reports(self.protocol, self.protocol.sample(inputs, randomness))

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        raise NotImplementedError(f"{self.protocol.kind}: the exact channel is RecordChannel(protocol).channel (small k and d)")

    def frequencies(self, rows: np.ndarray) -> list[np.ndarray]:
        """Unbiased f̂ per attribute from the rows the aggregator received."""
        return list(self.protocol.frequencies(decode_reports(self.protocol, rows)))


def _record_attributes(spec: SpecView, query: Query) -> tuple[tuple[float, ...], ...]:
    """Each column of the users' schema as an attribute: its finite values are the categories."""
    if query.name != "record":
        raise ParameterError(f"{spec.kind} randomizes whole records; use the 'record' query, got {spec.query.name!r}")
    low, high, step = query.schema.column_bounds()
    return tuple(tuple(float(v) for v in range(int(lo), int(hi) + 1, int(st))) for lo, hi, st in zip(low, high, step))


def _choice(spec: SpecView, name: str, default: str, allowed: Sequence[str]) -> str:
    value = spec.params.get(name, default)
    if isinstance(value, str):
        value = value.replace("_", "-")
    if value not in allowed:
        raise ParameterError(f"{spec.kind}: {name} must be one of {list(allowed)}, got {value!r}")
    return str(value)


@register_randomizer("spl", params=("oracle",), record_input=True)
@register_randomizer("smp", params=("oracle",), record_input=True)
def build_split_or_sample(spec: SpecView, query: Query) -> Randomizer:
    """``spl`` (ε/d per attribute) or ``smp`` (one own-sampled attribute at ε) over the ``record``
    query; ``oracle`` ∈ ``RECORD_ORACLES`` (default grr)."""
    attrs = _record_attributes(spec, query)
    oracle = _choice(spec, "oracle", "grr", RECORD_ORACLES)
    cls = SplitBudget if spec.kind == "spl" else SampleOne
    return RecordProtocolRandomizer(spec.epsilon, cls(spec.epsilon, attrs, oracle))


@register_randomizer("rsfd", params=("variant", "paper_epsilon"), record_input=True)
def build_rsfd(spec: SpecView, query: Query) -> Randomizer:
    """``rsfd`` over the ``record`` query; ``variant`` ∈ grr, oue-z, oue-r (or oue_z, oue_r), or
    adp (RS+FD[ADP]: each attribute grr or oue-z by ``rsfd_adp_choice`` at the inner budget, k_a
    and d; the schema's public bounds fix it, no record does).

    Without ``paper_epsilon`` the sampled attribute runs at the spec's ε, the whole record's
    exact loss. With ``paper_epsilon`` = the paper's per-attribute ε it runs at the paper's
    ε′ = ln(d(e^ε − 1) + 1) (``amplified_epsilon``), which is the record's loss: refused unless
    ε′ ≤ the spec's ε, which is what is charged."""
    attrs = _record_attributes(spec, query)
    variant = _choice(spec, "variant", "grr", RSFD_VARIANTS)
    paper = spec.params.get("paper_epsilon")
    inner = spec.epsilon
    if paper is not None:
        if isinstance(paper, bool) or not isinstance(paper, int | float):
            raise ParameterError(f"rsfd: paper_epsilon must be a number, got {paper!r}")
        inner = amplified_epsilon(require_epsilon(float(paper)), len(attrs))
        if inner > spec.epsilon:
            raise ParameterError(
                f"rsfd: paper_epsilon={paper!r} over d={len(attrs)} attributes runs at ε′ = ln(d(e^ε − 1) + 1) = {inner!r}, "
                f"the whole record's loss, above the spec's ε={spec.epsilon!r}; ask for ε ≥ {inner!r}"
            )
    return RecordProtocolRandomizer(spec.epsilon, RandomSamplingFakeData(inner, attrs, variant))
