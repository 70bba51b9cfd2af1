"""Transparent ε-local randomizers (KLNRS Definitions 4.3 and 4.7), exact in the floats they emit.

A ``Randomizer`` maps a query value u = g(z) to a report w. Each one declares ``epsilon``,
samples vectorized over users from per-user randomness, and exposes its probabilities
``log_prob(u, w)``. **Privacy is what the sampler does**: every finite-output randomizer here
samples by comparing *integers* drawn from ``randomness.bits(draw)`` (uniform 64-bit words) with
integer cell boundaries, so each report's probability is an exact rational m/2^64 (or a product
of such). Each one exposes that realized distribution, ``realized(inputs) -> (outputs, masses,
denominator)`` with integer masses, and the integer cells of each draw, ``draw_cells(u)``;
``ldp.core.audit.verify_exact`` computes the privacy loss from the realized masses in exact
arithmetic, checks that ``log_prob`` is the log of them, and feeds the sampler the cell
boundaries to check that it really emits that table. ``log_prob`` returns the *realized* values,
and every estimator uses the realized probabilities, so estimates stay unbiased.

A ``LocalRandomizer`` is what a user actually runs: a registered query composed with a
randomizer, built from a JSON-able ``RandomizerSpec`` (what the aggregator sends). Privacy holds
for the composition because the randomizer is ε-private over *all* values its input can take and
``check_inputs`` enforces that domain before anything is charged: a finite randomizer refuses a
value that is not one of its categories, a bounded-interval randomizer clips to [−b, b], and
NaN/±inf are refused everywhere. ``LocalRandomizer.inputs(records)`` (evaluate + check, may
raise) and ``LocalRandomizer.sample(inputs, randomness)`` (never raises on checked inputs) are
separate so a client checks every user's input *before* charging, then samples the accepted ones.

Kinds:
- ``binary_rr``   randomized response on a {0,1}-valued query (Warner 1965).
- ``kary_rr``     k-ary generalized randomized response over a query's finite values.
- ``discrete_laplace``  Claim 4.1 on a public grid: randomized rounding, two-sided geometric
                  noise from a finite integer table, a clamped window — exact, floating-point safe.
- ``pm_rr``       ±b randomized response, unbiased for u (Duchi, Jordan & Wainwright 2013);
                  bounded, light-tailed, exact.
- ``record_rr``   every column of the record through k-ary randomized response with ε/width each
                  (basic composition, KLNRS Claim 2.1): the "randomize everything once" protocol.
- ``laplace``     g(u) + Lap(2b/ε) in floats, KLNRS Claim 4.1 as printed. **Not auditable and not
                  requestable by users** (``auditable = False``): its float outputs are open to
                  Mironov's (2012) attack — at ε = 1 most reports are floats the other input cannot
                  produce. Kept in process for paper-fidelity demonstrations only
                  (``LocalRandomizer.build(..., allow_unaudited=True)``).

Exact randomized response (``rr_cells``): k categories at ε partition [0, 2^64) into a keep cell
of size A and k − 1 other cells of size B, A + (k−1)B = 2^64, B = ⌈2^64/(e^ε + k − 1)⌉. Then
A/B ≤ e^ε exactly, at every ε; for ε ≳ 44 the cells bottom out at B = 1 and the realized loss is
ln(2^64 − k + 1) < ε: the mechanism is *more* private than declared (the declared ε is what is
charged). ``pm_rr`` does the same on the 53-bit grid (realized loss capped at ln(2^53 − 1) ≈ 36.7).
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction
from typing import Any, ClassVar, NamedTuple

import numpy as np

from ldp.core.errors import ParameterError, UnknownKindError, require_epsilon, require_positive_finite
from ldp.core.queries import Query, QuerySpec, make_query
from ldp.core.rng import Draws
from ldp.core.schema import Schema

__all__ = [
    "Randomizer",
    "BinaryRandomizedResponse",
    "KaryRandomizedResponse",
    "LaplaceRandomizer",
    "DiscreteLaplaceRandomizer",
    "PlusMinusRandomizedResponse",
    "RecordRandomizedResponse",
    "Interval",
    "RandomizerSpec",
    "LocalRandomizer",
    "randomizer_kinds",
    "kary_rr_probabilities",
    "rr_cells",
    "ceil_share",
    "TWO64",
    "TWO53",
]

TWO64 = 1 << 64
TWO53 = 1 << 53
_LN2 = math.log(2.0)
_DECIMAL_PREC = 80  # digits for Decimal exp/ln; every exact bound below keeps a 10^-78 margin
_U64_MAX = np.uint64(TWO64 - 1)
_S11 = np.uint64(11)


# --- exact integer arithmetic shared by the samplers ---


def _to_decimal_floor(x: float | Fraction | Decimal) -> Decimal:
    """x as a Decimal: exact for floats and Decimals, rounded *down* (80 digits) for Fractions.
    Rounding ε down only makes a cell computed from it more private."""
    if isinstance(x, Decimal):
        return x
    if isinstance(x, Fraction):
        with localcontext() as ctx:
            ctx.prec = _DECIMAL_PREC
            ctx.rounding = ROUND_FLOOR
            return Decimal(x.numerator) / Decimal(x.denominator)
    return Decimal(float(x))  # every float is a finite decimal: exact


@functools.lru_cache(maxsize=4096)
def ceil_share(total: int, epsilon: float | Fraction | Decimal, k: int) -> int:
    """An integer B ≥ total/(e^ε + k − 1): ⌈total/(e^ε + k − 1)⌉, computed rigorously.

    Decimal's exp is correctly rounded at 80 digits, so E = exp(ε) satisfies |E − e^ε| ≤ 5·10^-80·E.
    E·(1 − 10^-78) rounded down is then ≤ e^ε; adding k − 1 rounding down, dividing rounding up
    and taking the ceiling can only make B larger than the true ceiling (by one, in the
    measure-zero case that the true quotient lies within 10^-77 of an integer), never smaller.
    """
    eps = _to_decimal_floor(epsilon)
    with localcontext() as ctx:
        ctx.prec = _DECIMAL_PREC
        e = eps.exp()
        ctx.rounding = ROUND_FLOOR
        e_low = e - e.scaleb(-(_DECIMAL_PREC - 2))
        denominator = e_low + (k - 1)
        ctx.rounding = ROUND_CEILING
        quotient = Decimal(total) / denominator
        return int(quotient.to_integral_value(rounding=ROUND_CEILING))


@functools.lru_cache(maxsize=4096)
def rr_cells(epsilon: float | Fraction | Decimal, k: int) -> tuple[int, int]:
    """(A, B): the integer cells of exact k-ary randomized response at ε on 64-bit draws.

    [0, 2^64) is split into a keep cell of size A and k − 1 "other" cells of size B with
    A + (k−1)·B = 2^64 exactly, B = ⌈2^64/(e^ε + k − 1)⌉ (``ceil_share``), A = 2^64 − (k−1)·B.
    One draw X reports the true index if X < A, else the other index (X − A) // B (skipping the
    true one), so Pr[keep] = A/2^64 and Pr[each other] = B/2^64 exactly, for every ε.

    Proof that A/B ≤ e^ε: B ≥ 2^64/(e^ε + k − 1) ⇔ B·(e^ε + k − 1) ≥ 2^64 ⇔ e^ε·B ≥ 2^64 − (k−1)·B = A.
    And B/A ≤ 1 ≤ e^ε because A ≥ B (checked; it fails only for ε below ~2k²/2^64, where the
    64-bit grid cannot express the mechanism and a ParameterError is raised). Tightness: B is
    less than one above the real quotient, so A/B ≥ e^ε − (e^ε + k − 1)²/2^64·(1 + o(1)). For
    e^ε + k − 1 > 2^64 (ε ≳ 44.4) B = 1 and the realized loss is ln(2^64 − k + 1) < ε: more
    private than declared (the ledger still charges the declared ε).
    """
    if k < 2:
        raise ParameterError(f"randomized response needs k ≥ 2 categories, got k={k}")
    b = ceil_share(TWO64, epsilon, k)
    a = TWO64 - (k - 1) * b
    if a < b:
        raise ParameterError(
            f"randomized response over k={k} categories at ε={float(epsilon):.3g} is below the 2^-64 resolution of its draws; use a larger ε"
        )
    return a, b


def kary_rr_probabilities(epsilon: float | Fraction, k: int | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, q) of exact k-ary randomized response at ε, vectorized over k: p = A/2^64 (keep),
    q = B/2^64 (each other value), the *realized* probabilities of ``rr_cells`` (the ideal
    e^ε/(e^ε+k−1) and 1/(e^ε+k−1) up to 2^-64). The one place these are computed."""
    ks = np.asarray(k)
    cells = [rr_cells(epsilon, int(kk)) for kk in ks.ravel()]
    p = np.array([a / TWO64 for a, _ in cells], dtype=np.float64).reshape(ks.shape)
    q = np.array([b / TWO64 for _, b in cells], dtype=np.float64).reshape(ks.shape)
    return p, q


def _rr_draw(idx: np.ndarray, bits: np.ndarray, a: int, b: int) -> np.ndarray:
    """The reported index of exact RR: idx if X < A, else j + (j ≥ idx) with j = (X − A) // B.

    All uint64 integer operations; X − A wraps around for kept users, so it is masked to 0 there.
    """
    x = np.asarray(bits, dtype=np.uint64)
    idx = np.asarray(idx, dtype=np.int64).astype(np.uint64, copy=False)  # inputs are indices ≥ 0
    a64 = np.uint64(a)
    if a + b == TWO64:  # k = 2: j is always 0, so a flip reports 1 − idx = idx XOR 1
        return (idx ^ (x >= a64)).view(np.int64)
    keep = x < a64
    j = x - a64  # wraps for kept users; their j is overwritten below
    j //= np.uint64(b)
    j += j >= idx
    np.copyto(j, idx, where=keep)
    return j.view(np.int64)


def member_mask(values: np.ndarray, domain: np.ndarray) -> np.ndarray:
    """``np.isin(values, domain)``; for a small domain by equality passes (3× faster than isin's
    sort at 10^6 values, and no temporaries beyond the mask). The users' input check and the
    aggregator's report check (``ldp.wire.codec``) both use it."""
    if len(domain) > 8:
        return np.isin(values, domain)
    ok = np.zeros(values.shape, dtype=bool)
    for d in domain:
        ok |= values == d
    return ok


def _first_bad(values: np.ndarray, ok: np.ndarray) -> object:
    bad = np.asarray(values)[~np.asarray(ok, dtype=bool)]
    return bad.ravel()[0].item() if bad.size else None


@dataclass(frozen=True)
class Interval:
    """A closed real interval [low, high]: the input domain of a randomizer on a bounded query."""

    low: float
    high: float


class Randomizer(ABC):
    """An ε-local randomizer R: U → W over query values (KLNRS Definition 4.3).

    Besides ``sample`` and ``log_prob``, a finite-output randomizer exposes what the audit needs
    to check the sampler rather than a claim (see ``ldp.core.audit.verify_exact``):

    - ``realized(inputs) -> (outputs, masses, denominator)``: Pr[R(u) = w] = masses[i, j] /
      denominator, integers (uint64 or Python-int object arrays), exactly what ``sample`` emits;
    - ``draw_cells(u)``: for each draw index the sampler reads (0, 1, ...), the sorted uint64 starts
      of the cells of [0, 2^64) on which its output is constant;
    - ``audit_inputs()``: inputs whose worst case is the worst case of the whole input domain;
    - ``factors()``: the independent factors of a product mechanism (``record_rr``), else None.
    """

    kind: ClassVar[str]
    epsilon: float
    report_dtype: ClassVar[type[np.generic]] = np.float64
    continuous: ClassVar[bool] = False
    auditable: ClassVar[bool] = True  # False: float outputs, no exact realized distribution (laplace)

    @abstractmethod
    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        """One report per user: inputs[k] is user k's (checked) query value."""

    @abstractmethod
    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        """log Pr[R(u) = w] as realized by ``sample`` (log-density for continuous W), broadcast."""

    @abstractmethod
    def input_domain(self) -> np.ndarray | Interval:
        """Every value a user's input can take: a finite array, or an interval."""

    @property
    def input_width(self) -> int:
        """Coordinates per input: 1 for scalar randomizers, the record width for ``record_rr``."""
        return 1

    def check_inputs(self, values: np.ndarray) -> np.ndarray:
        """The inputs this randomizer will sample from, or a ParameterError naming a bad value.

        Finite domain: every value must be one of its elements. Interval [−b, b]: NaN/±inf are
        refused and the rest clipped into the interval (a query that exceeds its declared bound
        cannot break privacy). Called before any charge; ``sample`` never raises on its output.
        """
        v = np.asarray(values, dtype=np.float64)
        if v.ndim != 1:
            raise ParameterError(f"{self.kind} takes scalar inputs (width 1); got an array of shape {v.shape}")
        domain = self.input_domain()
        if isinstance(domain, Interval):
            finite = np.isfinite(v)
            if not finite.all():
                raise ParameterError(f"{self.kind}: input {_first_bad(v, finite)!r} is not a finite number")
            return np.clip(v, domain.low, domain.high)
        ok = member_mask(v, np.asarray(domain))
        if not ok.all():
            shown = ", ".join(f"{x:g}" for x in np.asarray(domain)[:8]) + (", ..." if len(domain) > 8 else "")
            raise ParameterError(f"{self.kind}: input {_first_bad(v, ok)!r} is not in its domain {{{shown}}}")
        return v

    def output_domain(self) -> np.ndarray | None:
        """The finite output set, or None when W is continuous."""
        return None

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        """Per-report unbiased estimates of the input: E[estimate(R(u))] = u."""
        raise NotImplementedError(f"{type(self).__name__} has no unbiased per-report estimator")

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        """Var[estimate(R(u))], the exact per-report variance of the unbiased estimator."""
        raise NotImplementedError(f"{type(self).__name__} has no unbiased per-report estimator")

    # --- the realized distribution (finite outputs) ---

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """(outputs, masses, denominator): Pr[sample(u_i) = outputs[j]] = masses[i, j]/denominator."""
        raise NotImplementedError(f"{type(self).__name__} does not expose a realized distribution")

    def draw_cells(self, u: float) -> list[np.ndarray]:
        """Per draw index, the uint64 starts of the cells (first 0) on which ``sample(u)`` is constant."""
        raise NotImplementedError(f"{type(self).__name__} does not expose its draw cells")

    def audit_inputs(self) -> np.ndarray:
        """Inputs containing the worst case of the whole domain (the finite domain itself)."""
        domain = self.input_domain()
        if isinstance(domain, Interval):
            raise NotImplementedError(f"{type(self).__name__} must say which inputs contain its worst case")
        return np.asarray(domain)

    def consistency_inputs(self, count: int) -> np.ndarray:
        """A few inputs on which the audit feeds the sampler its cell boundaries."""
        inputs = self.audit_inputs()
        if len(inputs) <= count:
            return inputs
        return inputs[np.unique(np.linspace(0, len(inputs) - 1, count).round().astype(np.int64))]

    def factors(self) -> list[Randomizer] | None:
        """The independent factors of a product mechanism (each with its own draws), or None."""
        return None

    def realized_extremes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """(inputs, outputs, hi, lo, denominator): per output, the largest and smallest realized
        mass over ``audit_inputs()``. Dense by default; structured randomizers override it."""
        inputs = self.audit_inputs()
        outputs, masses, denominator = self.realized(inputs)
        return inputs, outputs, masses.max(axis=0), masses.min(axis=0), denominator

    def realized_column(self, inputs: np.ndarray, j: int) -> np.ndarray:
        """Realized masses of output j for each input (used to name the worst pair)."""
        return self.realized(inputs)[1][:, j]


def _rr_log(mass: int, bits: int = 64) -> float:
    return math.log(mass) - bits * _LN2


@dataclass(frozen=True)
class BinaryRandomizedResponse(Randomizer):
    """Randomized response on u ∈ {0, 1}: report u w.p. A/2^64, else 1 − u (``rr_cells``, k = 2).

    Warner (1965), exact on 64-bit draws: one draw X per report, keep if X < A. Reports are
    uint8 bits.

    Privacy: A/B ≤ e^ε exactly (``rr_cells``), at every ε — the keep probability never rounds to
    1 (B ≥ 1), so no report is impossible under either input.
    Estimator: (w − q)/(p − q) with the realized p = A/2^64, q = B/2^64; variance pq/(p − q)².

    Parameters
    ----------
    epsilon : float
        ε, a finite number in [2^-30, 2^10].

    Raises
    ------
    ParameterError
        ``epsilon`` is not a finite number in [2^-30, 2^10].

    Examples
    --------
    >>> import ldp
    >>> rr = ldp.BinaryRandomizedResponse(1.0)
    >>> round(rr.keep_probability, 6), round(rr.flip_probability, 6)  # e/(1 + e), 1/(1 + e)
    (0.731059, 0.268941)
    >>> sum(rr.cell_sizes) == 2**64
    True
    >>> ldp.verify_exact(rr).passed  # the realized loss is ≤ ε, exactly
    True
    """

    epsilon: float
    kind: ClassVar[str] = "binary_rr"
    report_dtype: ClassVar[type[np.generic]] = np.uint8

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        self.cell_sizes  # noqa: B018  (validates)

    def _cell_epsilon(self) -> float | Fraction:
        return self.epsilon

    @property
    def cell_sizes(self) -> tuple[int, int]:
        """(A, B): keep and flip cells of [0, 2^64)."""
        return rr_cells(self._cell_epsilon(), 2)

    @property
    def keep_probability(self) -> float:
        return self.cell_sizes[0] / TWO64

    @property
    def flip_probability(self) -> float:
        return self.cell_sizes[1] / TWO64

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        # _rr_draw at k = 2, in two vectorized passes: flip (report 1 − u) iff X ≥ A.
        a, _ = self.cell_sizes
        flip = randomness.bits(0) >= np.uint64(a)
        return ((np.asarray(inputs) != 0) ^ flip).view(np.uint8)

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        a, b = self.cell_sizes
        return np.where(np.asarray(u) == np.asarray(w), _rr_log(a), _rr_log(b))

    def input_domain(self) -> np.ndarray:
        return np.array([0.0, 1.0])

    def output_domain(self) -> np.ndarray:
        return np.array([0.0, 1.0])

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        a, b = self.cell_sizes
        u = np.asarray(inputs, dtype=np.float64).ravel()
        masses = np.where(u[:, None] == self.output_domain()[None, :], np.uint64(a), np.uint64(b)).astype(np.uint64)
        return self.output_domain(), masses, TWO64

    def draw_cells(self, u: float) -> list[np.ndarray]:
        return [np.array([0, self.cell_sizes[0]], dtype=np.uint64)]

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        """Per-report unbiased estimates of the input bit: E[estimate(R(u))] = u.

        (w − q)/(p − q) with the *realized* p = A/2^64 and q = B/2^64 (so the estimate stays
        unbiased, whatever the rounding of the cells); variance pq/(p − q)² (``variance``). The
        mean over users estimates the fraction of users whose input is 1.

        Parameters
        ----------
        reports : numpy.ndarray
            Reports w ∈ {0, 1} (e.g. ``Reports.values``).

        Returns
        -------
        numpy.ndarray
            float64, one estimate per report: (w − q)/(p − q).

        Examples
        --------
        >>> import ldp, numpy as np
        >>> from ldp.core.rng import RandomSource
        >>> rr = ldp.BinaryRandomizedResponse(1.0)
        >>> rr.estimate(np.array([0, 1])).round(4).tolist()
        [-0.582, 1.582]
        >>> users = np.arange(100_000)
        >>> bits = (users % 4 == 0).astype(float)  # a quarter of the users hold 1
        >>> reports = rr.sample(bits, RandomSource(0).for_request("demo", 0, users))
        >>> bool(abs(rr.estimate(reports).mean() - 0.25) < 0.02)
        True
        """
        a, b = self.cell_sizes
        return (np.asarray(reports, dtype=np.float64) - b / TWO64) / ((a - b) / TWO64)

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        """Var[estimate(R(u))] = pq/(p − q)², the same for both inputs.

        Parameters
        ----------
        u : numpy.ndarray or float
            Inputs (only their shape matters).

        Returns
        -------
        numpy.ndarray
            float64, shaped like ``u``.

        Examples
        --------
        >>> import ldp
        >>> round(float(ldp.BinaryRandomizedResponse(1.0).variance(0.0)), 4)
        0.9207
        """
        a, b = self.cell_sizes
        p, q, gap = a / TWO64, b / TWO64, (a - b) / TWO64
        return np.broadcast_to(p * q / gap**2, np.shape(u)).astype(np.float64)


@dataclass(frozen=True)
class KaryRandomizedResponse(Randomizer):
    """k-ary generalized randomized response over ``categories`` (k ≥ 2 distinct values).

    One 64-bit draw X: report the true category if X < A, else the ((X − A) // B)-th of the
    other k − 1 (``rr_cells``): Pr[keep] = A/2^64, Pr[each other] = B/2^64, A/B ≤ e^ε exactly.
    The report is the category *value*. Estimator of u: the frequency estimator
    f̂_j = (1[w=c_j] − q)/(p − q) with the realized p, q, combined as Σ c_j f̂_j.

    Parameters
    ----------
    epsilon : float
        ε, a finite number in [2^-30, 2^10].
    categories : tuple of float
        The k ≥ 2 distinct finite values an input can take (stored sorted).

    Raises
    ------
    ParameterError
        An invalid ``epsilon``; fewer than 2 distinct or non-finite categories; or an ε so small
        for this k that the 2^-64 grid cannot express the mechanism (``rr_cells``).

    Examples
    --------
    >>> import ldp
    >>> rr = ldp.KaryRandomizedResponse(2.0, (2, 0, 1))
    >>> rr.categories, rr.k
    ((0.0, 1.0, 2.0), 3)
    >>> round(rr.keep_probability, 4), round(rr.other_probability, 4)  # e^2/(e^2 + 2), 1/(e^2 + 2)
    (0.787, 0.1065)
    >>> ldp.KaryRandomizedResponse(1.0, (1, 1))
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: kary_rr needs k ≥ 2 distinct categories, got k=2: (1.0, 1.0)
    """

    epsilon: float
    categories: tuple[float, ...]
    kind: ClassVar[str] = "kary_rr"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        self._validate_categories()

    def _validate_categories(self) -> None:
        cats = tuple(float(c) for c in self.categories)
        if len(cats) < 2 or len(set(cats)) != len(cats):
            raise ParameterError(f"kary_rr needs k ≥ 2 distinct categories, got k={len(cats)}: {cats[:8]}")
        if any(not math.isfinite(c) for c in cats):
            raise ParameterError(f"kary_rr categories must be finite, got {cats[:8]}")
        object.__setattr__(self, "categories", tuple(sorted(cats)))
        self.cell_sizes  # noqa: B018  (validates)

    def _cell_epsilon(self) -> float | Fraction:
        return self.epsilon

    @property
    def k(self) -> int:
        return len(self.categories)

    @property
    def cell_sizes(self) -> tuple[int, int]:
        """(A, B): the keep cell and each of the k − 1 other cells of [0, 2^64)."""
        return rr_cells(self._cell_epsilon(), self.k)

    @property
    def keep_probability(self) -> float:
        return self.cell_sizes[0] / TWO64

    @property
    def other_probability(self) -> float:
        return self.cell_sizes[1] / TWO64

    def _pq_gap(self) -> tuple[float, float, float]:
        a, b = self.cell_sizes
        return a / TWO64, b / TWO64, (a - b) / TWO64

    def _index(self, values: np.ndarray) -> np.ndarray:
        cats = np.asarray(self.categories)
        if self.k <= 4:  # a few comparisons beat a binary search: idx = #{categories below the value}
            idx = np.zeros(len(values), dtype=np.int64)
            for c in cats[:-1]:
                idx += values > c
        else:
            idx = np.searchsorted(cats, values)
            np.minimum(idx, self.k - 1, out=idx)
        if not (cats[idx] == values).all():
            raise ParameterError(f"kary_rr: an input is not one of the categories {self.categories[:8]}")
        return idx

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        a, b = self.cell_sizes
        idx = self._index(np.asarray(inputs, dtype=np.float64))
        return np.asarray(self.categories)[_rr_draw(idx, randomness.bits(0), a, b)]

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        a, b = self.cell_sizes
        return np.where(np.asarray(u) == np.asarray(w), _rr_log(a), _rr_log(b))

    def input_domain(self) -> np.ndarray:
        return np.asarray(self.categories)

    def output_domain(self) -> np.ndarray:
        return np.asarray(self.categories)

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        a, b = self.cell_sizes
        u = np.asarray(inputs, dtype=np.float64).ravel()
        cats = self.output_domain()
        masses = np.where(u[:, None] == cats[None, :], np.uint64(a), np.uint64(b)).astype(np.uint64)
        return cats, masses, TWO64

    def draw_cells(self, u: float) -> list[np.ndarray]:
        a, b = self.cell_sizes
        return [np.array([0] + [a + j * b for j in range(self.k - 1)], dtype=np.uint64)]

    def frequencies(self, reports: np.ndarray) -> np.ndarray:
        """Unbiased estimates of the fraction of users in each category (KOV 2014), vectorized.

        f̂_j = (fraction of reports equal to c_j − q)/(p − q), with the realized p and q. A report
        that is not a category counts for none.

        Parameters
        ----------
        reports : numpy.ndarray
            Reports (category values).

        Returns
        -------
        numpy.ndarray
            float64, shape (k,): one estimate per category, in ``categories`` order; they sum
            to 1 (up to rounding) but may be negative.

        Examples
        --------
        >>> import ldp, numpy as np
        >>> from ldp.core.rng import RandomSource
        >>> rr = ldp.KaryRandomizedResponse(2.0, (0, 1, 2))
        >>> inputs = np.repeat([0.0, 1.0, 2.0], [20_000, 30_000, 50_000])
        >>> reports = rr.sample(inputs, RandomSource(0).for_request("demo", 0, np.arange(100_000)))
        >>> bool(np.abs(rr.frequencies(reports) - [0.2, 0.3, 0.5]).max() < 0.02)
        True
        """
        p, q, gap = self._pq_gap()
        r = np.asarray(reports, dtype=np.float64).ravel()
        counts = np.zeros(self.k)
        if r.size:
            cats = np.asarray(self.categories)
            idx = np.clip(np.searchsorted(cats, r), 0, self.k - 1)
            hit = cats[idx] == r
            counts = np.bincount(idx[hit], minlength=self.k) / r.size
        return (counts - q) / gap

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        """Per-report unbiased estimates of the input value: E[estimate(R(u))] = u.

        Σ_j c_j (1[w=c_j] − q)/(p − q) = (w − q Σ c)/(p − q), with the realized p and q.

        Parameters
        ----------
        reports : numpy.ndarray
            Reports (category values).

        Returns
        -------
        numpy.ndarray
            float64, one estimate per report.

        Examples
        --------
        >>> import ldp, numpy as np
        >>> from ldp.core.rng import RandomSource
        >>> rr = ldp.KaryRandomizedResponse(2.0, (0, 1, 2))
        >>> inputs = np.repeat([0.0, 1.0, 2.0], [20_000, 30_000, 50_000])  # mean 1.3
        >>> reports = rr.sample(inputs, RandomSource(0).for_request("demo", 0, np.arange(100_000)))
        >>> bool(abs(rr.estimate(reports).mean() - 1.3) < 0.03)
        True
        """
        p, q, gap = self._pq_gap()
        cats = np.asarray(self.categories)
        # Σ_j c_j (1[w=c_j] − q)/(p − q) = (w − q Σ c)/(p − q)
        return (np.asarray(reports, dtype=np.float64) - q * cats.sum()) / gap

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        p, q, gap = self._pq_gap()
        cats = np.asarray(self.categories)
        u = np.asarray(u, dtype=np.float64)
        mean_w = p * u + q * (cats.sum() - u)
        second = p * u**2 + q * ((cats**2).sum() - u**2)
        return (second - mean_w**2) / gap**2


@dataclass(frozen=True)
class _ColumnRR(KaryRandomizedResponse):
    """One column of ``record_rr``: k-ary RR whose cells use the exact rational ε/width (it may
    be below the 2^-30 floor of a requestable ε, so ε is not re-validated)."""

    exact_epsilon: Fraction = Fraction(0)
    kind: ClassVar[str] = "record_rr column"

    def __post_init__(self) -> None:
        self._validate_categories()

    def _cell_epsilon(self) -> Fraction:
        return self.exact_epsilon


@dataclass(frozen=True)
class LaplaceRandomizer(Randomizer):
    """R(u) = u + η, η ~ Lap(2b/ε), for u ∈ [−b, b] (KLNRS Claim 4.1) — **in floats: not auditable,
    not requestable by users.**

    Privacy of the real-valued mechanism: log p(w|u) − log p(w|u′) = (|w−u′| − |w−u|)/(2b/ε) ≤ ε.
    The float sampler (inverse CDF on the 2^-53 grid) does not emit that distribution: its outputs
    are not on a public grid, and Mironov's (2012) attack applies — at ε = 1, 83% of its reports
    are floats the other input cannot produce. ``auditable = False``: ``LocalRandomizer.build``
    refuses it unless ``allow_unaudited=True`` (in-process paper-fidelity demonstrations only),
    and ``verify_exact`` reports it as not auditable. Use ``discrete_laplace`` (same noise shape,
    exact) or ``pm_rr``.
    Estimator: w itself (unbiased), variance 2(2b/ε)^2.
    """

    epsilon: float
    bound: float
    kind: ClassVar[str] = "laplace"
    continuous: ClassVar[bool] = True
    auditable: ClassVar[bool] = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "bound", require_positive_finite("bound b", self.bound))

    @property
    def scale(self) -> float:
        return 2.0 * self.bound / self.epsilon

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        centred = randomness.uniform(0) - 0.5  # never exactly 0: uniforms are odd multiples of 2^-53
        noise = -self.scale * np.sign(centred) * np.log1p(-2.0 * np.abs(centred))
        return np.asarray(inputs, dtype=np.float64) + noise

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        """The declared density of the real-valued mechanism (not of the floats the sampler emits)."""
        return -math.log(2.0 * self.scale) - np.abs(np.asarray(w, dtype=np.float64) - np.asarray(u, dtype=np.float64)) / self.scale

    def input_domain(self) -> Interval:
        return Interval(-self.bound, self.bound)

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        return np.asarray(reports, dtype=np.float64)

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        return np.broadcast_to(2.0 * self.scale**2, np.shape(u)).astype(np.float64)


# --- discrete Laplace: the noise table ---


class _NoiseTable(NamedTuple):
    """Integer cells G(z), z ∈ [−T, T], of the two-sided geometric noise (sum exactly 2^64)."""

    a: float  # −ln α′ = ε(1 − η)/(2c)
    alpha: float  # α′
    window: int  # W
    half_width: int  # T = W + c
    cells: np.ndarray  # uint64, G(z) at index z + T
    boundaries: np.ndarray  # uint64, cumulative sums of cells, the final 2^64 excluded (2T entries)
    upper: np.ndarray  # uint64, U[d] = Σ_{z=d}^{T} G(z) for d = 0..T
    lower: np.ndarray  # uint64, L[d] = Σ_{z=−T}^{−d} G(z) for d = 0..T
    mean: float  # E[Z] under the table (≈ 0; the leftover makes it asymmetric by ≤ 2^-64·T²)
    variance: float  # Var Z under the table


def _end_error_factor(a: float, c: int) -> float:
    """max over 0 ≤ j ≤ 2c of (j + 1)·α′^j: the end cells' summed floor errors relative to the
    smallest end mass (the function is log-concave in j; its maximum is near j = 1/a − 1)."""
    top = 2 * c
    star = 1.0 / a - 1.0 if a > 0 else float(top)
    candidates = {0, top, min(top, max(0, math.floor(star))), min(top, max(0, math.ceil(star)))}
    return max((j + 1) * math.exp(-a * j) for j in candidates)


@functools.lru_cache(maxsize=1024)
def _dl_extension_or_none(epsilon: float, steps: int, slack: float, max_lambda: float, min_lambda: float, max_table: int) -> int | None:
    c = steps
    a = epsilon * (1.0 - slack) / (2 * c)
    x = epsilon * slack / 4.0
    if not x > 0 or not a > 0:
        return None
    ln64 = 64.0 * _LN2
    ln_n0 = ln64 + math.log(math.tanh(a / 2.0))
    end_factor = _end_error_factor(a, c)
    t_interior = math.floor((ln_n0 - math.log(1.01 / x)) / a) + 1
    t_end = math.floor((ln64 - math.log1p(math.exp(-a)) - math.log(1.01 * end_factor / x)) / a)
    e = min(math.floor(max_lambda * 2 * c / epsilon), t_interior - 2 * c, t_end - 2 * c, max_table - 2 * c)

    def ok(e: int) -> bool:
        t = 2 * c + e
        n_int = math.exp(ln_n0 - a * (t - 1))
        n_end = math.exp(ln64 - a * t - math.log1p(math.exp(-a)))
        return 1.01 / n_int <= x and 1.01 * end_factor / n_end <= x

    while e >= 1 and not ok(e):  # guards the closed forms against float rounding
        e -= 1
    if e < 1 or e * epsilon / (2 * c) < min_lambda:
        return None
    return e


def dl_window_extension(epsilon: float, steps: int, slack: float, max_lambda: float, min_lambda: float, max_table: int) -> int:
    """e = W − c for discrete Laplace at (ε, c): the largest integer with λ = eε/(2c) ≤ max_lambda,
    T = 2c + e ≤ max_table, and both exactness conditions (``DiscreteLaplaceRandomizer``):

        interior:  1.01 / N(T − 1) ≤ εη/4,   N(z) = 2^64·tanh(a/2)·α′^|z|  (the ideal cell masses),
        ends:      1.01 · max_{0≤j≤2c} (j+1)α′^j / N_end ≤ εη/4,   N_end = 2^64·α′^T/(1 + α′).

    Raises ParameterError when the largest such e gives λ < min_lambda (or e < 1)."""
    e = _dl_extension_or_none(epsilon, steps, slack, max_lambda, min_lambda, max_table)
    if e is None:
        good = [2**p for p in range(21) if _dl_extension_or_none(epsilon, 2**p, slack, max_lambda, min_lambda, max_table) is not None]
        hint = (
            "no steps works at this ε (use pm_rr)"
            if not good
            else f"steps from {good[0]} to {good[-1]} work at this ε" if len(good) > 1 else f"steps={good[0]} works at this ε"
        )
        raise ParameterError(
            f"discrete_laplace cannot be made exact at ε={epsilon:g} with steps={steps}: its report window "
            f"would reach fewer than {min_lambda:g} noise scales 2b/ε past ±b within 64-bit cells and a noise table "
            f"of ≤ {max_table} cells per side; {hint}"
        )
    return e


@functools.lru_cache(maxsize=4)  # up to ~50 MB each at the 2^20 cap
def _noise_table(epsilon: float, steps: int, slack: float, extension: int) -> _NoiseTable:
    """The integer cells: G(z) = ⌊2^64·π′(z)⌋ for |z| < T, G(±T) = ⌊2^64·α′^T/(1+α′)⌋ (the tail
    beyond ±T, inclusive), π′(z) = tanh(a/2)·α′^|z|; the leftover L = 2^64 − ΣG (0 ≤ L ≤ 2T+1)
    is given out as +1 to the L cells nearest 0 (z = 0, 1, −1, 2, ...), so every cell is within 1
    of its ideal mass (lumping up to 2T + 1 onto G(0) would break the slack at small ε).

    π′(z) is computed in 128-bit fixed point (v_{z+1} = ⌊v_z·⌊α′·2^128⌋/2^128⌋ from 80-digit
    Decimal constants): after ≤ 2^20 steps the absolute error on 2^64·π′(z) is < 2^-32.
    """
    c = steps
    t = 2 * c + extension
    p = 128
    with localcontext() as ctx:
        ctx.prec = _DECIMAL_PREC
        a = Decimal(epsilon) * (1 - Decimal(slack)) / (2 * c)
        alpha = (-a).exp()
        ctx.rounding = ROUND_FLOOR
        rho = int((alpha * (1 << p)).to_integral_value(ROUND_FLOOR))
        v = int(((1 - alpha) / (1 + alpha) * (1 << (64 + p))).to_integral_value(ROUND_FLOOR))
        tail = int(((-a * t).exp() / (1 + alpha) * TWO64).to_integral_value(ROUND_FLOOR))
    half = [0] * (t + 1)
    for z in range(t):
        half[z] = v >> p
        v = (v * rho) >> p
    half[t] = tail
    full = half[:0:-1] + half  # z = −T..T
    leftover = TWO64 - sum(full)
    if not 0 <= leftover <= 2 * t + 1:  # pragma: no cover - guarded by the error analysis
        raise AssertionError(f"discrete_laplace table: leftover {leftover} outside [0, {2 * t + 1}]")
    order = np.empty(2 * t + 1, dtype=np.int64)
    order[0] = t
    order[1::2] = t + np.arange(1, t + 1)
    order[2::2] = t - np.arange(1, t + 1)
    cells = np.array(full, dtype=np.uint64)
    cells[order[:leftover]] += np.uint64(1)
    boundaries = np.cumsum(cells[:-1], dtype=np.uint64)
    upper = np.cumsum(cells[t:][::-1], dtype=np.uint64)[::-1].copy()
    lower = np.cumsum(cells[: t + 1], dtype=np.uint64)[::-1].copy()
    support = np.arange(-t, t + 1, dtype=np.float64)
    prob = cells.astype(np.float64) / 2.0**64
    mean = float((support * prob).sum())
    return _NoiseTable(float(a), float(alpha), c + extension, t, cells, boundaries, upper, lower, mean, float((support**2 * prob).sum() - mean**2))


def _sliding(x: np.ndarray, width: int, op: np.ufunc) -> np.ndarray:
    """op (np.maximum / np.minimum) over every window x[i : i + width] (van Herk / Gil–Werman, O(n))."""
    n = len(x)
    if width == 1:
        return x.copy()
    pad = np.uint64(0) if op is np.maximum else _U64_MAX
    blocks = -(-n // width)
    padded = np.full(blocks * width, pad, dtype=x.dtype)
    padded[:n] = x
    grid = padded.reshape(blocks, width)
    prefix = op.accumulate(grid, axis=1).ravel()
    suffix = op.accumulate(grid[:, ::-1], axis=1)[:, ::-1].ravel()
    i = np.arange(n - width + 1)
    return op(suffix[i], prefix[i + width - 1])


@dataclass(frozen=True)
class DiscreteLaplaceRandomizer(Randomizer):
    """Laplace on a grid with every report probability an exact integer/2^117.

    Claim 4.1 made floating-point safe (Mironov 2012; Canonne, Kamath & Steinke 2020; KLNRS
    Claim 4.1).

    For u ∈ [−b, b], grid step r = b/c with c = ``steps`` (a power of two, default ≈ 32ε):

    1. randomized rounding: u/r = k0 + f, k = k0 + 1[X53 < F], F = round(f·2^53), X53 the top 53
       bits of draw 0, so k ∈ [−c, c] and E[r·k] = u up to r·2^-54;
    2. noise Z ∈ [−T, T] from a finite integer table (``_noise_table``): one 64-bit draw X
       (draw 1) lands in cell z of sizes G(z) summing to exactly 2^64 (np.searchsorted on the
       uint64 boundaries), G ≈ 2^64·π′ with π′ the two-sided geometric of ratio
       α′ = e^{−ε(1−η)/(2c)}, η = 2^-12; the end cells ±T hold the tails beyond them;
    3. report w = r·clamp(k + Z, −W, W), T = W + c, W = c + e, e = ``dl_window_extension``.

    Exactness. For k, k′ ∈ [−c, c] and every m ∈ [−W, W], Pr[m | k] is G(m − k) for |m| < W
    (|m − k| ≤ T − 1) and a sum S(d) = Σ_{z ≥ d} G(z), d = W ∓ k ∈ [T − 2c, T], at m = ±W. The ideal
    masses have ratio ≤ α′^{−2c} = e^{ε(1−η)} (interior: the geometric ratio; ends: tails
    α′^d/(1+α′)). Each realized cell is within 1(+2^-32) of its ideal mass N(z), so an interior
    ratio is at most e^{ε(1−η)}·(1+x)/(1−x) with x = 1.01/N(T−1), and an end ratio with
    x = 1.01·max_j (j+1)α′^j / N_end (j + 1 cells summed, j ≤ 2c). The window is chosen so that
    x ≤ εη/4, hence (1+x)/(1−x) ≤ 1 + 4x ≤ e^{εη} and every realized ratio is ≤ e^ε. Step 1
    is a mixture over k ∈ {k0, k0+1}, and a mixture's ratio never exceeds its worst component's,
    so rounding F only moves the bias. ``ldp.core.audit.verify_exact`` confirms all of this from
    the integers. The realized loss is ≈ ε(1 − η) — tight within 2^-12 relative.

    Window: e is the largest integer with λ = eε/(2c) ≤ 20 meeting both conditions and
    T ≤ 2^20 cells per side (memory and build time a client must spend); (ε, steps) for which
    λ < 8 are refused in ``__post_init__`` with a ParameterError (before any charge): that is ε
    below ≈ 2^-16 at steps = 1, steps ≳ 2^12·ε for small ε (table size), and steps = 1 at ε > 15.
    The default steps is always accepted for ε ∈ [2^-16, 16]. ε > 16 is refused (64-bit cells
    cannot hold a useful window there).

    Clamp bias (``clamp_bias_bound``): |E[w] − u| ≤ r·(α′^{W−c+1}/(1 − α′²) + 2(T+1)²/2^64 + 2^-54)
    ≈ (b/ε)·e^{−λ}: ≤ 2·10^-9·b/ε at λ = 20, ≤ 3.4·10^-4·b/ε at λ = 8.
    Estimator: w. Variance: r²(f(1−f) + Var Z) (clamping only shrinks it).

    Parameters
    ----------
    epsilon : float
        ε, a finite number in [2^-30, 16].
    bound : float
        b > 0, finite: inputs are clipped to [−b, b] (``check_inputs``).
    steps : int, optional
        c, grid steps per bound: a power of two in [1, 2^20]; None: 2^round(log2(32ε)) within
        [1, 2^20].

    Raises
    ------
    ParameterError
        An invalid ``epsilon`` or ``bound``; ε > 16; ``steps`` not a power of two in [1, 2^20];
        or (ε, steps) whose window would reach fewer than 8 noise scales (λ < 8).

    Examples
    --------
    >>> import ldp
    >>> dl = ldp.DiscreteLaplaceRandomizer(1.0, bound=1.0)
    >>> dl.steps, dl.grid, dl.tail_lambda  # c = 32, reports on the grid r = b/c, λ = 20
    (32, 0.03125, 20.0)
    >>> audit = ldp.verify_exact(dl)
    >>> audit.passed, round(audit.max_log_ratio, 4)  # ≈ ε(1 − 2^-12)
    (True, 0.9998)
    >>> ldp.DiscreteLaplaceRandomizer(1.0, 1.0, steps=3)
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: discrete_laplace: steps must be a power of two in [1, 2^20], got 3
    """

    epsilon: float
    bound: float
    steps: int | None = None  # c, a power of two; None: 2^round(log2(32ε)) within [1, 2^20]
    kind: ClassVar[str] = "discrete_laplace"

    MAX_EPSILON: ClassVar[float] = 16.0
    SLACK: ClassVar[float] = 2.0**-12  # η
    MAX_LAMBDA: ClassVar[float] = 20.0
    MIN_LAMBDA: ClassVar[float] = 8.0
    MAX_TABLE: ClassVar[int] = 2**20  # T ≤ this

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "bound", require_positive_finite("bound b", self.bound))
        if self.epsilon > self.MAX_EPSILON:
            raise ParameterError(f"discrete_laplace supports ε ≤ {self.MAX_EPSILON:g} (64-bit noise cells cannot hold its report window beyond); got ε = {self.epsilon!r}")
        if self.steps is None:
            object.__setattr__(self, "steps", 2 ** min(20, max(0, round(math.log2(32.0 * self.epsilon)))))
        c = self.steps
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 1 <= c <= 2**20 or c & (c - 1):
            raise ParameterError(f"discrete_laplace: steps must be a power of two in [1, 2^20], got {c!r}")
        object.__setattr__(self, "steps", int(c))
        self._table  # noqa: B018  (refuses (ε, steps) that cannot be made exact, before any charge)

    @property
    def c(self) -> int:
        """c, the number of grid steps per bound (``steps`` after construction, never None)."""
        assert self.steps is not None  # __post_init__ sets it
        return self.steps

    def _extension(self) -> int:
        return dl_window_extension(self.epsilon, self.c, self.SLACK, self.MAX_LAMBDA, self.MIN_LAMBDA, self.MAX_TABLE)

    @property
    def _table(self) -> _NoiseTable:
        return _noise_table(self.epsilon, self.c, self.SLACK, self._extension())

    @property
    def grid(self) -> float:
        """r = b/c: the report spacing."""
        return self.bound / self.c

    @property
    def alpha(self) -> float:
        """α′ = e^{−ε(1−η)/(2c)}: the noise table's geometric ratio."""
        return self._table.alpha

    @property
    def window(self) -> int:
        """W: reports are r·m for integers |m| ≤ W."""
        return self._table.window

    @property
    def table_half_width(self) -> int:
        """T = W + c: the noise table covers z ∈ [−T, T]."""
        return self._table.half_width

    @property
    def tail_lambda(self) -> float:
        """λ = (W − c)·ε/(2c): how many noise scales 2b/ε the window reaches past ±b."""
        return (self.window - self.c) * self.epsilon / (2 * self.c)

    @property
    def noise_scale(self) -> float:
        """r/a = 2b/(ε(1−η)): the Laplace scale whose MGF dominates r·Z's."""
        return self.grid / self._table.a

    @property
    def clamp_probability_bound(self) -> float:
        """An upper bound on Pr[k + Z > W − 1 + 1] (clamped at the top, any input; the bottom is the
        same): α′^{W−c+1}/(1+α′) plus the table's cell errors (T + 1)·1.01/2^64."""
        a, t = self._table.a, self.table_half_width
        return math.exp(-a * (self.window - self.c + 1)) / (1.0 + self.alpha) + (t + 1) * 1.01 / 2.0**64

    @property
    def clamp_bias_bound(self) -> float:
        """|E[w] − u| ≤ r·(α′^{W−c+1}/(1−α′²) + 2(T+1)²/2^64 + 2^-54): clamping, the table's cell
        errors (at most 1.01 per cell, over |z| ≤ T) and the 2^-53 rounding of F."""
        a, t = self._table.a, self.table_half_width
        overshoot = math.exp(-a * (self.window - self.c + 1)) / -math.expm1(-2.0 * a)
        return self.grid * (overshoot + 2.0 * (t + 1) ** 2 / 2.0**64 + 2.0**-54)

    def _rounding(self, u: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        """(k0, F): u/r = k0 + f, F = round(f·2^53) ∈ [0, 2^53]; k0 ∈ [−c, c−1]."""
        c = self.c
        x = np.clip(np.nan_to_num(np.asarray(u, dtype=np.float64) / self.grid), -c, c)  # type: ignore[call-overload]
        k0 = np.minimum(np.floor(x), c - 1)  # type: ignore[operator]  # u = +b: k0 = c − 1, f = 1
        f = x - k0
        return k0.astype(np.int64), np.rint(f * 2.0**53).astype(np.int64)

    def _pmk(self, k: np.ndarray, m: np.ndarray) -> np.ndarray:
        """Pr[m | k]·2^64 (uint64) for k ∈ [−c, c], m ∈ [−W, W], broadcast."""
        t = self._table
        w_, h = t.window, t.half_width
        k = np.asarray(k, dtype=np.int64)
        m = np.asarray(m, dtype=np.int64)
        interior = t.cells[np.clip(m - k + h, 0, 2 * h)]
        up = t.upper[np.clip(w_ - k, 0, h)]
        low = t.lower[np.clip(w_ + k, 0, h)]
        return np.where(m >= w_, up, np.where(m <= -w_, low, interior))

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        t = self._table
        k0, f53 = self._rounding(inputs)
        x53 = (randomness.bits(0) >> _S11).astype(np.int64)
        k = k0 + (x53 < f53)
        z = np.searchsorted(t.boundaries, np.asarray(randomness.bits(1), dtype=np.uint64), side="right").astype(np.int64) - t.half_width
        m = np.clip(k + z, -t.window, t.window)
        return m * self.grid

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        """log of the realized ((2^53 − F)·Pr[m|k0] + F·Pr[m|k0+1]) / 2^117 (−inf off the grid)."""
        k0, f53 = self._rounding(u)
        w = np.asarray(w, dtype=np.float64)
        m = np.rint(w / self.grid)
        on_grid = (np.abs(m) <= self.window) & (m * self.grid == w)
        m = np.where(on_grid, m, 0).astype(np.int64)
        p0 = self._pmk(k0, m).astype(np.float64)
        p1 = self._pmk(np.minimum(k0 + 1, self.c), m).astype(np.float64)
        f = f53.astype(np.float64)
        with np.errstate(divide="ignore"):
            logp = np.log((2.0**53 - f) * p0 + f * p1) - 117 * _LN2
        return np.where(on_grid, logp, -np.inf)

    def input_domain(self) -> Interval:
        return Interval(-self.bound, self.bound)

    def output_domain(self) -> np.ndarray:
        return np.arange(-self.window, self.window + 1) * self.grid

    def audit_inputs(self) -> np.ndarray:
        """The grid points k·r, k ∈ [−c, c]: every input's distribution is a mixture of two of these."""
        return np.arange(-self.c, self.c + 1) * self.grid

    def consistency_inputs(self, count: int) -> np.ndarray:
        """Points between grid points first (so that draw 0 matters), both ends, 0."""
        c, r, b = self.c, self.grid, self.bound
        pts = [-b + 0.5 * r, b, -b, b - r / 3.0, 0.0, 0.3 * r, (c // 2 + 0.75) * r, -(c // 3 + 0.125) * r]  # type: ignore[operator]
        return np.clip(np.array(pts[: max(1, count)], dtype=np.float64), -b, b)

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Masses over 2^64 (uint64) when every input is a grid point, else over 2^117 (Python ints)."""
        u = np.asarray(inputs, dtype=np.float64).ravel()
        k0, f53 = self._rounding(u)
        ms = np.arange(-self.window, self.window + 1)
        outputs = ms * self.grid
        if np.all((f53 == 0) | (f53 == TWO53)):
            return outputs, self._pmk((k0 + (f53 == TWO53))[:, None], ms[None, :]), TWO64
        p0 = self._pmk(k0[:, None], ms[None, :]).astype(object)
        p1 = self._pmk(np.minimum(k0 + 1, self.c)[:, None], ms[None, :]).astype(object)
        f = f53.astype(object)[:, None]
        return outputs, (TWO53 - f) * p0 + f * p1, TWO53 * TWO64

    def draw_cells(self, u: float) -> list[np.ndarray]:
        _, f53 = self._rounding(np.array([u]))
        f = int(f53[0])
        first = [0] if f in (0, TWO53) else [0, f << 11]
        return [np.array(first, dtype=np.uint64), np.concatenate([[np.uint64(0)], self._table.boundaries]).astype(np.uint64)]

    def realized_extremes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """Per output m, the max and min of Pr[m | k]·2^64 over k ∈ [−c, c], in O(T): interior
        m sees the window G[m−c .. m+c] (sliding max/min), the ends the suffix sums S(W−c .. W+c)."""
        t = self._table
        c, w_, h = self.c, t.window, t.half_width
        size = 2 * c + 1  # type: ignore[operator]
        hi_window = _sliding(t.cells, size, np.maximum)  # index i: cells[i .. i + 2c]
        lo_window = _sliding(t.cells, size, np.minimum)
        ms = np.arange(-w_ + 1, w_)
        start = ms - c + h  # type: ignore[operator]
        hi = np.empty(2 * w_ + 1, dtype=np.uint64)
        lo = np.empty(2 * w_ + 1, dtype=np.uint64)
        hi[1:-1], lo[1:-1] = hi_window[start], lo_window[start]
        top = t.upper[w_ - c : w_ + c + 1]  # type: ignore[operator]
        bottom = t.lower[w_ - c : w_ + c + 1]  # type: ignore[operator]
        hi[-1], lo[-1], hi[0], lo[0] = top.max(), top.min(), bottom.max(), bottom.min()
        return self.audit_inputs(), self.output_domain(), hi, lo, TWO64

    def realized_column(self, inputs: np.ndarray, j: int) -> np.ndarray:
        k0, f53 = self._rounding(inputs)
        return self._pmk(k0 + (f53 == TWO53), np.asarray(j - self.window, dtype=np.int64))

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        """Per-report estimates of the input: the report w itself.

        Unbiased up to the clamp bias, |E[w] − u| ≤ ``clamp_bias_bound`` ≈ (b/ε)·e^{−λ}.

        Parameters
        ----------
        reports : numpy.ndarray
            Reports w = r·m on the grid.

        Returns
        -------
        numpy.ndarray
            float64, the reports unchanged.

        Examples
        --------
        >>> import ldp, numpy as np
        >>> from ldp.core.rng import RandomSource
        >>> dl = ldp.DiscreteLaplaceRandomizer(1.0, bound=1.0)
        >>> reports = dl.sample(np.full(100_000, 0.3), RandomSource(0).for_request("demo", 0, np.arange(100_000)))
        >>> bool(abs(dl.estimate(reports).mean() - 0.3) < 0.05)  # Var w ≈ 2(2b/ε)² = 8 per report
        True
        """
        return np.asarray(reports, dtype=np.float64)

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        """r²(f(1−f) + Var Z), Var Z of the table, ignoring the clamped tail."""
        k0, f53 = self._rounding(u)
        f = f53 / 2.0**53
        return self.grid**2 * (f * (1 - f) + self._table.variance)


# --- ±b randomized response ---


@functools.lru_cache(maxsize=4096)
def _pm_thresholds(epsilon: float) -> tuple[int, int]:
    """(T_lo, T_hi): T_lo = ⌈2^53/(e^ε + 1)⌉ (``ceil_share``), T_hi = 2^53 − T_lo, so T_hi/T_lo ≤ e^ε."""
    t_lo = ceil_share(TWO53, epsilon, 2)
    t_hi = TWO53 - t_lo
    if t_hi <= t_lo:
        raise ParameterError(f"pm_rr at ε={epsilon:g} is below the 2^-53 resolution of its draws")
    return t_lo, t_hi


@dataclass(frozen=True)
class PlusMinusRandomizedResponse(Randomizer):
    """±b randomized response for u ∈ [−b, b] (Duchi, Jordan & Wainwright 2013), exact on the
    53-bit grid.

    X53 = bits(0) >> 11 is uniform on [0, 2^53). Report +M if X53 < T(u), else −M, with
    T(u) = clip(T_lo + ⌊frac(u)·(T_hi − T_lo) + 1/2⌋, T_lo, T_hi), frac(u) = (u + b)/(2b),
    T_lo = ⌈2^53/(e^ε+1)⌉, T_hi = 2^53 − T_lo, and M = b·2^53/(T_hi − T_lo).
    Privacy: every Pr[+M | u] = T(u)/2^53 and Pr[−M | u] = (2^53 − T(u))/2^53 lies in
    [T_lo, T_hi]/2^53 by the clip (float arithmetic on integers < 2^53 is exact), so every
    ratio is ≤ T_hi/T_lo ≤ e^ε exactly (``ceil_share``), at every ε: M never overflows (at
    ε ≥ 36.8, T_lo = 1 and the realized loss is ln(2^53 − 1) ≈ 36.7 < ε).
    Unbiased: E[w] = M·(2T(u) − 2^53)/2^53 = u up to 3M·2^-53 (T(u) is within 1.5 of
    T_lo + frac(u)·(T_hi − T_lo), float rounding of frac included);
    variance M² − E[w]² ≤ M² (bounded reports, sub-Gaussian averages).
    """

    epsilon: float
    bound: float
    kind: ClassVar[str] = "pm_rr"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        object.__setattr__(self, "bound", require_positive_finite("bound b", self.bound))
        _pm_thresholds(self.epsilon)

    @property
    def thresholds(self) -> tuple[int, int]:
        """(T_lo, T_hi) on the 2^53 grid."""
        return _pm_thresholds(self.epsilon)

    @property
    def magnitude(self) -> float:
        """M = b·2^53/(T_hi − T_lo) ≈ b(e^ε+1)/(e^ε−1)."""
        t_lo, t_hi = self.thresholds
        return self.bound * 2.0**53 / (t_hi - t_lo)

    def _threshold(self, u: np.ndarray | float) -> np.ndarray:
        """T(u) ∈ [T_lo, T_hi] (int64): Pr[+M | u] = T(u)/2^53."""
        t_lo, t_hi = self.thresholds
        b = self.bound
        # t_lo + floor((clip(x) + b)/(2b)·(t_hi − t_lo) + 0.5), clipped to [t_lo, t_hi]: the same
        # float operations in the same order, in place (one array instead of six).
        given = np.array(u, dtype=np.float64, copy=True)
        x = np.nan_to_num(given.reshape(-1), copy=False)  # 1-D, so the in-place ufuncs also take a scalar
        np.clip(x, -b, b, out=x)
        x += b
        x /= 2.0 * b
        x *= float(t_hi - t_lo)
        x += 0.5
        np.floor(x, out=x)
        x += t_lo
        np.clip(x, t_lo, t_hi, out=x)
        t = x.astype(np.int64).reshape(given.shape)
        return t if t.ndim else t[()]

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        plus = (randomness.bits(0) >> _S11).astype(np.int64) < self._threshold(inputs)
        return np.where(plus, self.magnitude, -self.magnitude)

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        t = self._threshold(u).astype(np.float64)
        w = np.asarray(w, dtype=np.float64)
        with np.errstate(divide="ignore"):
            return np.where(w > 0, np.log(t), np.log(2.0**53 - t)) - 53 * _LN2

    def input_domain(self) -> Interval:
        return Interval(-self.bound, self.bound)

    def output_domain(self) -> np.ndarray:
        return np.array([-self.magnitude, self.magnitude])

    def audit_inputs(self) -> np.ndarray:
        """A grid with both ends and their neighbours: T(u) is non-decreasing in u (every step is
        monotone), so its extremes over [−b, b] are at u = ±b."""
        b = self.bound
        grid = np.linspace(-b, b, 129)
        return np.unique(np.concatenate([grid, [np.nextafter(-b, 0.0), np.nextafter(b, 0.0)]]))

    def consistency_inputs(self, count: int) -> np.ndarray:
        b = self.bound
        return np.array([-b, b, 0.0, 0.3 * b, -0.77 * b, b / 3.0, np.nextafter(b, 0.0), -b / 7.0][: max(1, count)])

    def realized(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        t = self._threshold(np.asarray(inputs, dtype=np.float64).ravel())
        return self.output_domain(), np.stack([TWO53 - t, t], axis=1).astype(np.uint64), TWO53

    def draw_cells(self, u: float) -> list[np.ndarray]:
        t = int(self._threshold(u))
        return [np.array([0] if t in (0, TWO53) else [0, t << 11], dtype=np.uint64)]

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        return np.asarray(reports, dtype=np.float64)

    def variance(self, u: np.ndarray | float) -> np.ndarray:
        t = self._threshold(u).astype(np.float64)
        mean = self.magnitude * (2.0 * t - 2.0**53) / 2.0**53
        return self.magnitude**2 - mean**2


@dataclass(frozen=True)
class RecordRandomizedResponse(Randomizer):
    """Every column j of the record through exact k_j-ary RR with ε/width (basic composition).

    Input and output: rows of ``width`` integers, column j in {low_j, low_j+step_j, ..., high_j}.
    Column j reads draw j only (one 64-bit word) and uses ``rr_cells`` at the exact rational
    ε/width (a Fraction, rounded *down* to 80 digits — the float ε/width can round up), so the
    product of the column ratios, the record's privacy loss, is ≤ e^{width·ε/width} = e^ε exactly.
    ``log_prob`` sums the realized per-column log-probabilities; ``factors()`` gives the columns
    (a product mechanism: the audit multiplies the per-column worst ratios).
    """

    epsilon: float
    low: tuple[int, ...]
    high: tuple[int, ...]
    step: tuple[int, ...] | None = None  # None: all 1
    kind: ClassVar[str] = "record_rr"
    report_dtype: ClassVar[type[np.generic]] = np.int16

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon))
        if len(self.low) != len(self.high) or not self.low:
            raise ParameterError("record_rr needs equal-length, non-empty low and high bounds")
        if any(h <= lo for lo, h in zip(self.low, self.high)):
            raise ParameterError("record_rr: every column needs high > low")
        if self.step is None:
            object.__setattr__(self, "step", (1,) * len(self.low))
        if len(self.step) != len(self.low) or any(s < 1 or (h - lo) % s for lo, h, s in zip(self.low, self.high, self.step)):  # type: ignore[arg-type]
            raise ParameterError("record_rr: every column needs a step ≥ 1 that divides high − low")
        self.column_cells  # noqa: B018  (validates)

    @property
    def width(self) -> int:
        return len(self.low)

    @property
    def input_width(self) -> int:
        return self.width

    @property
    def column_epsilon(self) -> float:
        """ε/width as a float (for display; the cells use ``exact_column_epsilon``)."""
        return self.epsilon / self.width

    @property
    def exact_column_epsilon(self) -> Fraction:
        return Fraction(self.epsilon) / self.width

    @property
    def column_cells(self) -> list[tuple[int, int]]:
        """(A_j, B_j) per column."""
        eps = self.exact_column_epsilon
        return [rr_cells(eps, int(k)) for k in self._k()]

    def column_probabilities(self, column: int) -> tuple[float, float]:
        """Realized (p, q) of one column: keep A/2^64, each other value B/2^64."""
        a, b = self.column_cells[column]
        return a / TWO64, b / TWO64

    def _k(self) -> np.ndarray:
        return (np.asarray(self.high, dtype=np.int64) - np.asarray(self.low, dtype=np.int64)) // self._step() + 1

    def _step(self) -> np.ndarray:
        return np.asarray(self.step, dtype=np.int64)

    def column_values(self, column: int) -> np.ndarray:
        return np.arange(self.low[column], self.high[column] + 1, self._step()[column])

    def check_inputs(self, values: np.ndarray) -> np.ndarray:
        x = np.asarray(values)
        if x.ndim != 2 or x.shape[1] != self.width:
            raise ParameterError(f"record_rr takes records of width {self.width}; got an array of shape {x.shape}")
        if x.dtype.kind in "iu":  # records: integer comparisons, no float copy of the records
            low, high, step = (np.asarray(v, dtype=np.int64) for v in (self.low, self.high, self._step()))
            ok = (x >= low) & (x <= high)
            if (step != 1).any():
                ok &= (x - low) % step == 0
        else:
            xf = x.astype(np.float64)
            low_f, high_f, step_f = (np.asarray(v, dtype=np.float64) for v in (self.low, self.high, self._step()))
            with np.errstate(invalid="ignore"):
                ok = np.isfinite(xf) & (xf >= low_f) & (xf <= high_f) & (np.mod(xf - low_f, step_f) == 0)
        if not ok.all():
            i, j = map(int, np.argwhere(~ok)[0])
            raise ParameterError(
                f"record_rr: column {j} value {x[i, j].item()!r} is not in {{{self.low[j]}, {self.low[j] + self._step()[j]}, ..., {self.high[j]}}}"
            )
        # Checked integers are passed on as they are (the records' own dtype: no int64 copy).
        return x if x.dtype.kind in "iu" else x.astype(np.int64)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        x = np.asarray(inputs)
        out = np.empty(x.shape, dtype=self.report_dtype)
        for j, (a, b) in enumerate(self.column_cells):  # one 64-bit draw per column
            low, step = int(self.low[j]), int(self._step()[j])
            idx = x[:, j].astype(np.int64)
            if low:
                idx -= low
            if step != 1:
                idx //= step
            report = _rr_draw(idx, randomness.bits(j), a, b)
            if step != 1:
                report *= step
            if low:
                report += low
            out[:, j] = report
        return out

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        cells = self.column_cells
        keep = np.array([_rr_log(a) for a, _ in cells])
        other = np.array([_rr_log(b) for _, b in cells])
        per_column = np.where(np.asarray(u) == np.asarray(w), keep, other)
        return per_column.sum(axis=-1)

    def input_domain(self) -> np.ndarray:
        sizes = self._k()
        if int(np.prod(sizes)) > 4096:
            raise ParameterError(f"record_rr: the record domain has {int(np.prod(sizes))} > 4096 points; enumerate a smaller schema")
        grids = np.meshgrid(*[self.column_values(j) for j in range(self.width)], indexing="ij")
        return np.stack([g.ravel() for g in grids], axis=1)

    def output_domain(self) -> np.ndarray:
        return self.input_domain()

    def factors(self) -> list[Randomizer]:
        """Column j as exact k_j-ary RR at ε/width (reading draw 0 where the record reads draw j)."""
        eps = self.exact_column_epsilon
        return [_ColumnRR(float(eps), tuple(self.column_values(j).tolist()), exact_epsilon=eps) for j in range(self.width)]

    def column_frequencies(self, reports: np.ndarray, column: int) -> np.ndarray:
        """Unbiased estimates of the fraction of users with each value of one column."""
        a, b = self.column_cells[column]
        values = self.column_values(column)
        counts = (np.asarray(reports)[:, column][:, None] == values[None, :]).mean(axis=0)
        return (counts - b / TWO64) / ((a - b) / TWO64)


# --- specs: what travels on the wire, and how a user builds what it runs ---


@dataclass(frozen=True)
class RandomizerSpec:
    """A randomizer by kind, query and ε; JSON-able: what the aggregator sends the users.

    The *client* derives the ε it charges from this spec through the randomizer it builds,
    never from a separate field. Construction refuses what no user would run (see Raises); the
    users' side checks everything again (``LocalRandomizer.build``): this is for the
    aggregator's programmer, not a privacy guarantee.

    Parameters
    ----------
    kind : str
        A registered randomizer kind (``randomizer_kinds()``): ``"binary_rr"``, ``"kary_rr"``,
        ``"discrete_laplace"``, ``"pm_rr"``, ``"record_rr"``, or ``"laplace"`` (not requestable
        by users: in-process paper-fidelity demonstrations only).
    query : QuerySpec
        The query g whose value the randomizer takes, e.g. ``field_query("x", 0)``.
    epsilon : float
        ε, a finite real in [2^-30, 2^10] (``require_epsilon``); stored as a float.
    params : mapping, default {}
        Kind-specific parameters, e.g. ``{"steps": 16}`` for ``discrete_laplace``.

    Raises
    ------
    UnknownKindError
        An unregistered kind (the message lists the kinds).
    ParameterError
        A kind that is not a string, a query that is not a ``QuerySpec``, an invalid ε, or
        params that are not a mapping.

    Examples
    --------
    >>> import ldp
    >>> spec = ldp.RandomizerSpec("binary_rr", ldp.field_query("x", 0), epsilon=1)
    >>> spec.epsilon, spec.to_json()["query"]
    (1.0, {'name': 'field', 'params': {'field': 'x', 'index': 0}})
    >>> ldp.RandomizerSpec.from_json(spec.to_json()) == spec
    True
    >>> ldp.RandomizerSpec("binary_rr", ldp.field_query("x", 0), epsilon=0)
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: randomizer 'binary_rr': epsilon must be a finite number > 0, got 0.0
    >>> ldp.RandomizerSpec("gaussian", ldp.field_query("x", 0), epsilon=1)
    Traceback (most recent call last):
    ...
    ldp.core.errors.UnknownKindError: unknown randomizer kind 'gaussian'; registered kinds are [...]
    """

    kind: str
    query: QuerySpec
    epsilon: float
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refuse at construction what no user would run: an unregistered kind (UnknownKindError
        listing the kinds), a query that is not a ``QuerySpec``, an ε that is not a finite real in
        [2^-30, 2^10] (``require_epsilon``; stored as a float), params that are not a mapping.
        The users' side checks everything again (``LocalRandomizer.build``): this is for the
        aggregator's programmer, not a privacy guarantee."""
        if not isinstance(self.kind, str):
            raise ParameterError(f"randomizer kind must be a string (one of {randomizer_kinds()}), got {self.kind!r}")
        if self.kind not in _BUILDERS:
            raise UnknownKindError(f"unknown randomizer kind {self.kind!r}; registered kinds are {randomizer_kinds()}")
        if not isinstance(self.query, QuerySpec):
            raise ParameterError(
                f"randomizer {self.kind!r}: query must be a QuerySpec (e.g. field_query('x', 0)), got {type(self.query).__name__} {self.query!r}"
            )
        if isinstance(self.epsilon, (bool, str, bytes)) or not isinstance(self.epsilon, (int, float, np.integer, np.floating, Fraction, Decimal)):
            raise ParameterError(f"randomizer {self.kind!r}: epsilon must be a finite real number in [2^-30, 2^10], got {self.epsilon!r}")
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon, name=f"randomizer {self.kind!r}: epsilon"))
        if not isinstance(self.params, Mapping):
            raise ParameterError(f"randomizer {self.kind!r}: params must be a mapping (a dict), got {type(self.params).__name__} {self.params!r}")

    @classmethod
    def unchecked(cls, kind: Any, query: Any, epsilon: Any, params: Any = None) -> RandomizerSpec:
        """A spec built *without* the construction checks: what the wire codec decodes (an
        aggregator's request, validated by the users' side when ``LocalRandomizer.build`` builds
        it) and what tests send to prove that the users' side refuses what a hostile or buggy
        aggregator could send. Never use it to get around a check anywhere else."""
        spec = object.__new__(cls)
        for name, value in (("kind", kind), ("query", query), ("epsilon", epsilon), ("params", {} if params is None else params)):
            object.__setattr__(spec, name, value)
        return spec

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "query": self.query.to_json(), "epsilon": self.epsilon, "params": dict(self.params)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RandomizerSpec:
        try:
            return cls(str(data["kind"]), QuerySpec.from_json(data["query"]), float(data["epsilon"]), dict(data.get("params", {})))
        except UnknownKindError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise ParameterError(f"malformed randomizer spec {data!r}: {exc}") from None


def _build_binary(spec: RandomizerSpec, query: Query) -> Randomizer:
    values = query.values()
    if values is None or not set(values.tolist()) <= {0.0, 1.0}:
        raise ParameterError(f"binary_rr needs a {{0,1}}-valued query; {spec.query.name!r} takes values {None if values is None else values.tolist()[:8]}")
    return BinaryRandomizedResponse(spec.epsilon)


def _build_kary(spec: RandomizerSpec, query: Query) -> Randomizer:
    values = query.values()
    if values is None:
        raise ParameterError(f"kary_rr needs a query with a small finite set of values; {spec.query.name!r} has none")
    if len(values) < 2:
        values = np.array([values[0], values[0] + 1.0])  # a constant query: add a dummy category
    return KaryRandomizedResponse(spec.epsilon, tuple(values.tolist()))


def _build_laplace(spec: RandomizerSpec, query: Query) -> Randomizer:
    return LaplaceRandomizer(spec.epsilon, query.bound if query.bound > 0 else 1.0)


def _build_discrete_laplace(spec: RandomizerSpec, query: Query) -> Randomizer:
    steps = spec.params.get("steps")
    return DiscreteLaplaceRandomizer(spec.epsilon, query.bound if query.bound > 0 else 1.0, None if steps is None else steps)


def _build_pm(spec: RandomizerSpec, query: Query) -> Randomizer:
    return PlusMinusRandomizedResponse(spec.epsilon, query.bound if query.bound > 0 else 1.0)


def _build_record(spec: RandomizerSpec, query: Query) -> Randomizer:
    if query.name != "record":
        raise ParameterError(f"record_rr randomizes whole records; use the 'record' query, got {spec.query.name!r}")
    low, high, step = query.schema.column_bounds()
    return RecordRandomizedResponse(spec.epsilon, tuple(low.tolist()), tuple(high.tolist()), tuple(step.tolist()))


def _build_mean(spec: RandomizerSpec, query: Query) -> Randomizer:
    from ldp.core.mean_estimation import HybridRandomizer, PiecewiseRandomizer  # imports this module

    make = PiecewiseRandomizer if spec.kind == "piecewise" else HybridRandomizer
    return make(spec.epsilon, query.bound if query.bound > 0 else 1.0, spec.params.get("steps"))


def _build_frequency(spec: RandomizerSpec, query: Query) -> Randomizer:
    from ldp.core.frequency_oracles import build_frequency_oracle  # imports this module

    return build_frequency_oracle(spec, query)


_BUILDERS = {
    "binary_rr": _build_binary,
    "kary_rr": _build_kary,
    "laplace": _build_laplace,
    "discrete_laplace": _build_discrete_laplace,
    "pm_rr": _build_pm,
    "record_rr": _build_record,
    "piecewise": _build_mean,  # ldp.core.mean_estimation (Wang et al. 2019)
    "hybrid": _build_mean,
    "oue": _build_frequency,  # ldp.core.frequency_oracles (Wang et al. 2017; Acharya et al. 2019)
    "sue": _build_frequency,
    "olh": _build_frequency,
    "hadamard_response": _build_frequency,
    "subset_selection": _build_frequency,
    "adaptive_fo": _build_frequency,
}
_RECORD_KINDS = frozenset({"record_rr"})  # kinds whose input is a whole record (width = schema width)
_UNAUDITED_KINDS = frozenset({"laplace"})


def randomizer_kinds() -> list[str]:
    """The registered randomizer kinds, sorted: the names a ``RandomizerSpec`` may use.

    ``laplace`` is listed but not requestable by users (``LocalRandomizer.build`` refuses it
    unless ``allow_unaudited=True``: its float outputs are open to Mironov's attack).

    Returns
    -------
    list of str
        The kinds, in alphabetical order.

    Examples
    --------
    >>> import ldp
    >>> ldp.randomizer_kinds()
    ['adaptive_fo', 'binary_rr', 'discrete_laplace', 'hadamard_response', 'hybrid', 'kary_rr', 'laplace', 'olh', 'oue', 'piecewise', 'pm_rr', 'record_rr', 'subset_selection', 'sue']
    """
    return sorted(_BUILDERS)


@dataclass(frozen=True)
class LocalRandomizer:
    """R = randomizer ∘ query: the ε-local randomizer a user runs on its own record.

    Built and validated on the user's side from a ``RandomizerSpec``; ``epsilon`` is the
    randomizer's declared ε, which is what the user's ledger charges. Use it in two steps so
    nothing is charged for a report that cannot be made: ``inputs(records)`` evaluates the query
    and checks every value (may raise ParameterError), then, after charging the users whose
    inputs were accepted, ``sample(inputs, randomness)`` (never raises on checked inputs).
    Privacy holds for the composition because the randomizer is ε-private over *all* values its
    input can take and ``check_inputs`` enforces that domain before anything is charged.

    Parameters
    ----------
    spec : RandomizerSpec
        The spec it was built from.
    query : Query
        The validated query, bound to the users' schema.
    randomizer : Randomizer
        The validated randomizer.

    Examples
    --------
    Build one with ``LocalRandomizer.build`` (not the constructor, which checks nothing):

    >>> import ldp
    >>> schema = ldp.concept_class("parity", 3).schema
    >>> local = ldp.LocalRandomizer.build(ldp.RandomizerSpec("kary_rr", ldp.parity([0, 1]), 1.0), schema)
    >>> local.randomizer, local.epsilon, local.report_width
    (KaryRandomizedResponse(epsilon=1.0, categories=(-1.0, 1.0)), 1.0, 1)
    """

    spec: RandomizerSpec
    query: Query
    randomizer: Randomizer

    @classmethod
    def build(cls, spec: RandomizerSpec, schema: Schema, *, allow_unaudited: bool = False) -> LocalRandomizer:
        """Validate a spec against a schema and build what the user runs.

        Refuses (ParameterError): a kind whose sampler is not auditable (float ``laplace``)
        unless ``allow_unaudited`` (in-process paper-fidelity demonstrations only — never for
        requests from an aggregator); a query whose width is not the randomizer's input width;
        a finite query with values outside a finite randomizer's domain. Everything in the spec
        is checked again here (ε, the kind, the query against the schema), so a spec decoded
        from the wire without checks is refused just the same.

        Parameters
        ----------
        spec : RandomizerSpec
            The randomizer kind, query and ε.
        schema : Schema
            The users' record schema (the query is validated against it).
        allow_unaudited : bool, default False
            Accept a kind whose sampler is not auditable (float ``laplace``).

        Returns
        -------
        LocalRandomizer
            The validated composition; its ``epsilon`` is what a charge costs.

        Raises
        ------
        ParameterError
            An invalid ε, query or parameters, or any refusal above.
        UnknownKindError
            An unregistered randomizer or query kind.

        Examples
        --------
        >>> import ldp
        >>> schema = ldp.concept_class("parity", 3).schema
        >>> ldp.LocalRandomizer.build(ldp.RandomizerSpec("binary_rr", ldp.label_query(), 0.5), schema).epsilon
        0.5
        >>> ldp.LocalRandomizer.build(ldp.RandomizerSpec("binary_rr", ldp.parity([0]), 1.0), schema)
        Traceback (most recent call last):
        ...
        ldp.core.errors.ParameterError: binary_rr needs a {0,1}-valued query; 'parity' takes values [-1.0, 1.0]
        >>> ldp.LocalRandomizer.build(ldp.RandomizerSpec("laplace", ldp.label_query(), 1.0), schema)
        Traceback (most recent call last):
        ...
        ldp.core.errors.ParameterError: randomizer 'laplace' is not auditable: ... request 'discrete_laplace'
        """
        epsilon = require_epsilon(spec.epsilon)
        try:
            builder = _BUILDERS[spec.kind]
        except KeyError:
            raise UnknownKindError(f"unknown randomizer kind {spec.kind!r}; registered kinds are {randomizer_kinds()}") from None
        if spec.kind in _UNAUDITED_KINDS and not allow_unaudited:
            raise ParameterError(
                f"randomizer {spec.kind!r} is not auditable: float Laplace is kept in process for paper fidelity "
                "(open to Mironov's attack); request 'discrete_laplace'"
            )
        query = make_query(spec.query, schema)
        if spec.kind not in _RECORD_KINDS and query.width != 1:
            raise ParameterError(f"randomizer {spec.kind!r} takes scalar inputs (width 1); query {spec.query.name!r} has width {query.width}")
        spec = RandomizerSpec(spec.kind, spec.query, epsilon, spec.params)
        randomizer = builder(spec, query)
        if not randomizer.auditable and not allow_unaudited:  # a subclass registered later
            raise ParameterError(f"randomizer {spec.kind!r} is not auditable; it can only run in process with allow_unaudited=True")
        if randomizer.input_width != query.width:
            raise ParameterError(
                f"randomizer {spec.kind!r} takes inputs of width {randomizer.input_width}; query {spec.query.name!r} has width {query.width}"
            )
        values = query.values() if randomizer.input_width == 1 else None
        domain = randomizer.input_domain() if values is not None else None
        if values is not None and isinstance(domain, np.ndarray):
            outside = values[~np.isin(values, domain)]
            if outside.size:
                raise ParameterError(f"randomizer {spec.kind!r}: query {spec.query.name!r} can take {outside[0]!r}, which is not in its domain {domain.tolist()[:8]}")
        return cls(spec, query, randomizer)

    @property
    def epsilon(self) -> float:
        return self.randomizer.epsilon

    @property
    def report_dtype(self) -> type[np.generic]:
        return self.randomizer.report_dtype

    @property
    def report_width(self) -> int:
        return self.query.width

    def inputs(self, records: np.ndarray, users: np.ndarray | None = None) -> np.ndarray:
        """The randomizer's inputs g(z_i), checked by ``randomizer.check_inputs``.

        A bad value is a ParameterError naming it; bounded inputs are clipped to [−b, b]:
        privacy must not depend on the query keeping its word. Call it for all users *before*
        charging any.

        Parameters
        ----------
        records : numpy.ndarray
            The users' records, shape (n, schema.width).
        users : numpy.ndarray, optional
            The rows' user ids (a per-user family such as ``user_parity`` needs them).

        Returns
        -------
        numpy.ndarray
            The checked inputs, one per row (rows of the record width for ``record_rr``).

        Raises
        ------
        ParameterError
            A value outside the randomizer's domain, NaN or ±inf, or missing user ids for a
            per-user family.

        Examples
        --------
        >>> import ldp, numpy as np
        >>> schema = ldp.concept_class("parity", 3).schema
        >>> local = ldp.LocalRandomizer.build(ldp.RandomizerSpec("kary_rr", ldp.parity([0, 1]), 1.0), schema)
        >>> local.inputs(np.array([[1, 0, 1, 0], [0, 0, 1, 1]], dtype=np.int16)).tolist()
        [-1.0, 1.0]
        """
        return self.randomizer.check_inputs(self.query.evaluate(records, users))

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        """Each user's report from its checked input (``inputs``); does not raise on those.

        Parameters
        ----------
        inputs : numpy.ndarray
            Checked inputs, from ``inputs``.
        randomness : Draws
            The users' draws (``UserRandomness``: one per user, in the rows' order).

        Returns
        -------
        numpy.ndarray
            One report per user, of the randomizer's report dtype.

        Examples
        --------
        >>> import ldp, numpy as np
        >>> from ldp.core.rng import RandomSource
        >>> schema = ldp.concept_class("parity", 3).schema
        >>> local = ldp.LocalRandomizer.build(ldp.RandomizerSpec("binary_rr", ldp.label_query(), 1.0), schema)
        >>> randomness = RandomSource(0).for_request("demo", 0, np.arange(3))
        >>> reports = local.sample(local.inputs(np.array([[0, 0, 0, 1]] * 3, dtype=np.int16)), randomness)
        >>> reports.dtype, set(reports.tolist()) <= {0, 1}
        (dtype('uint8'), True)
        """
        return self.randomizer.sample(inputs, randomness).astype(self.report_dtype, copy=False)

    def apply(self, records: np.ndarray, randomness: Draws) -> np.ndarray:
        """Each user's report: R(z_i) for every row of ``records`` (``inputs`` then ``sample``).

        The rows belong to ``randomness.users``. Nothing is charged here: a client charges
        between ``inputs`` and ``sample``.

        Parameters
        ----------
        records : numpy.ndarray
            The users' records, shape (n, schema.width).
        randomness : Draws
            The users' draws; ``randomness.users`` are the rows' user ids.

        Returns
        -------
        numpy.ndarray
            One report per row.

        Raises
        ------
        ParameterError
            A query value outside the randomizer's domain (``inputs``).

        Examples
        --------
        >>> import ldp, numpy as np
        >>> from ldp.core.rng import RandomSource
        >>> schema = ldp.concept_class("parity", 3).schema
        >>> local = ldp.LocalRandomizer.build(ldp.RandomizerSpec("kary_rr", ldp.parity([0, 1]), 1.0), schema)
        >>> records = np.array([[1, 0, 1, 0], [0, 0, 1, 1]], dtype=np.int16)
        >>> randomness = RandomSource(0).for_request("demo", 0, np.arange(2))
        >>> bool((local.apply(records, randomness) == local.sample(local.inputs(records), randomness)).all())
        True
        """
        return self.sample(self.inputs(records, np.asarray(randomness.users, dtype=np.int64)), randomness)
