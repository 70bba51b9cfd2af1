"""What every ε-local randomizer is (KLNRS Definitions 4.3 and 4.7), the exact integer arithmetic
its sampler uses, and the registry its kind is added to.

A ``Randomizer`` maps a query value u = g(z) to a report w. Each one declares ``epsilon``,
samples vectorized over users from per-user randomness, and exposes its probabilities
``log_prob(u, w)``. **Privacy is what the sampler does**: every finite-output randomizer
samples by comparing *integers* drawn from ``randomness.bits(draw)`` (uniform 64-bit words) with
integer cell boundaries, so each report's probability is an exact rational m/2^64 (or a product
of such). Each one exposes that realized distribution, ``realized(inputs) -> (outputs, masses,
denominator)`` with integer masses, and the integer cells of each draw, ``draw_cells(u)``;
``ldp.core.audit.verify_exact`` computes the privacy loss from the realized masses in exact
arithmetic, checks that ``log_prob`` is the log of them, and feeds the sampler the cell
boundaries to check that it really emits that table. ``log_prob`` returns the *realized* values,
and every estimator uses the realized probabilities, so estimates stay unbiased.

Exact randomized response (``rr_cells``): k categories at ε partition [0, 2^64) into a keep cell
of size A and k − 1 other cells of size B, A + (k−1)B = 2^64, B = ⌈2^64/(e^ε + k − 1)⌉. Then
A/B ≤ e^ε exactly, at every ε; for ε ≳ 44 the cells bottom out at B = 1 and the realized loss is
ln(2^64 − k + 1) < ε: the mechanism is *more* private than declared (the declared ε is what is
charged). ``pm_rr`` does the same on the 53-bit grid (realized loss capped at ln(2^53 − 1) ≈ 36.7).

The registry. Each mechanism family (``ldp.core.rr_mechanisms``, ``ldp.core.laplace``,
``ldp.core.plus_minus``, ``ldp.core.frequency_oracles``, ``ldp.core.mean_estimation``) adds its
kinds with ``@register_randomizer(kind, params=...)`` on the builder that makes the randomizer
from a spec, as query kinds do with ``@register_query``. The families import this module and
nothing imports them back: ``ldp.core.randomizers`` imports every family, so the registry it
reads (``randomizer_kinds``, ``RandomizerSpec``, ``LocalRandomizer``) is complete.
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction
from types import MappingProxyType
from typing import Any, ClassVar, Protocol

import numpy as np

from ldp.core.errors import ParameterError
from ldp.core.queries import Query, QuerySpec
from ldp.core.rng import Draws

__all__ = [
    "Randomizer",
    "Interval",
    "RandomizerKind",
    "SpecView",
    "register_randomizer",
    "registered_randomizers",
    "check_params",
    "kary_rr_probabilities",
    "rr_cells",
    "rr_draw",
    "SAMPLER_BLOCK",
    "rr_log",
    "ceil_share",
    "uniform_index",
    "uniform_index_masses",
    "uniform_index_starts",
    "member_mask",
    "first_bad",
    "row_indices",
    "TWO64",
    "TWO53",
    "LN2",
    "DECIMAL_PREC",
    "U64_MAX",
    "SHIFT_53",
]

TWO64 = 1 << 64
TWO53 = 1 << 53
LN2 = math.log(2.0)
DECIMAL_PREC = 80  # digits for Decimal exp/ln; every exact bound below keeps a 10^-78 margin
U64_MAX = np.uint64(TWO64 - 1)
SHIFT_53 = np.uint64(11)  # bits(draw) >> SHIFT_53: the top 53 bits of a draw


# --- exact integer arithmetic shared by the samplers ---


def _to_decimal_floor(x: float | Fraction | Decimal) -> Decimal:
    """x as a Decimal: exact for floats and Decimals, rounded *down* (80 digits) for Fractions.
    Rounding ε down only makes a cell computed from it more private."""
    if isinstance(x, Decimal):
        return x
    if isinstance(x, Fraction):
        with localcontext() as ctx:
            ctx.prec = DECIMAL_PREC
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
        ctx.prec = DECIMAL_PREC
        e = eps.exp()
        ctx.rounding = ROUND_FLOOR
        e_low = e - e.scaleb(-(DECIMAL_PREC - 2))
        denominator = e_low + (k - 1)
        ctx.rounding = ROUND_CEILING
        quotient = Decimal(total) / denominator
        return int(quotient.to_integral_value(rounding=ROUND_CEILING))


def uniform_index(bits: np.ndarray, m: int | np.ndarray) -> np.ndarray:
    """⌊X·m/2^64⌋ for uint64 draws X and 1 ≤ m < 2^32 (one m, or one per draw, broadcast),
    exactly (int64): an index in [0, m), value
    i from exactly ``uniform_index_masses(m)[i]`` draws (⌊2^64/m⌋ or ⌈2^64/m⌉; exactly uniform
    when m is a power of two). Two 32-bit halves: x·m's high word without a 128-bit product.
    The one way an index is drawn from a 64-bit draw (Subset Selection's picks, the sampled
    attribute of ``ldp.core.multidimensional``, the buckets of ``ldp.core.telemetry``).

    >>> uniform_index(np.array([0, 2**63, 2**64 - 1], dtype=np.uint64), 3).tolist()
    [0, 1, 2]
    """
    x = np.asarray(bits, dtype=np.uint64)
    m64 = np.asarray(m, dtype=np.uint64)
    s32 = np.uint64(32)
    high = (x >> s32) * m64  # < 2^64: both factors < 2^32
    low = ((x & np.uint64(0xFFFFFFFF)) * m64) >> s32
    return ((high + low) >> s32).astype(np.int64)


def uniform_index_starts(m: int) -> list[int]:
    """The first draw of each value of ``uniform_index``: ⌈i·2^64/m⌉."""
    return [-(-i * TWO64 // m) for i in range(m)]


def uniform_index_masses(m: int) -> list[int]:
    """How many of the 2^64 draws give each value of ``uniform_index``: ⌊2^64/m⌋ or ⌈2^64/m⌉
    (the exact law an audit uses)."""
    starts = uniform_index_starts(m) + [TWO64]
    return [starts[i + 1] - starts[i] for i in range(m)]


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


# Users per block in the samplers' element-wise passes: a block's few arrays (256 KiB each at 8
# bytes per user) stay in the L2 cache across the passes, which then cost a fraction of a pass
# over memory; the Python cost per block (≈ 1 µs per operation) is ≈ 0.03 ns per user and
# operation. The blocks change no number: every pass is element-wise.
SAMPLER_BLOCK = 1 << 15


def rr_draw(idx: np.ndarray, bits: np.ndarray, a: int, b: int) -> np.ndarray:
    """The reported index of exact RR: idx if X < A, else j + (j ≥ idx) with j = (X − A) // B.

    All uint64 integer operations, in blocks of ``SAMPLER_BLOCK`` users, without a branch per
    user: X − A wraps around for kept users (X < A), whose j + (j ≥ idx) is then replaced by idx
    as j − kept·(j − idx) (mod 2^64: exact whatever the wrapped j is).
    """
    x = np.asarray(bits, dtype=np.uint64)
    idx = np.asarray(idx, dtype=np.int64).view(np.uint64)  # inputs are indices ≥ 0
    a64 = np.uint64(a)
    if a + b == TWO64:  # k = 2: j is always 0, so a flip reports 1 − idx = idx XOR 1
        return (idx ^ (x >= a64)).view(np.int64)
    b64 = np.uint64(b)
    if x.ndim != 1 or idx.shape != x.shape:  # idx broadcast against the draws: one block
        return _rr_draw_block(x, idx, a64, b64, x - a64)
    out = np.empty(x.shape, dtype=np.uint64)
    for lo in range(0, len(x), SAMPLER_BLOCK):
        hi = lo + SAMPLER_BLOCK
        _rr_draw_block(x[lo:hi], idx[lo:hi], a64, b64, np.subtract(x[lo:hi], a64, out=out[lo:hi]))
    return out.view(np.int64)


def _rr_draw_block(x: np.ndarray, idx: np.ndarray, a64: np.uint64, b64: np.uint64, j: np.ndarray) -> np.ndarray:
    """``rr_draw`` on one block, in place in j, which holds X − A (wrapped): the reported index."""
    kept = x < a64
    j //= b64
    j += j >= idx
    step = j - idx
    step *= kept
    j -= step
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


def row_indices(rows: np.ndarray, reports: np.ndarray) -> np.ndarray:
    """The index of each report among an enumerated output's ``rows`` (float64; −1 for a report
    that is no row): how the exact audits' enumerated wrappers name a multi-column report."""
    keys = {r.tobytes(): i for i, r in enumerate(rows)}
    w = np.asarray(reports).astype(rows.dtype)
    return np.array([keys.get(r.tobytes(), -1) for r in w], dtype=np.float64)


def first_bad(values: np.ndarray, ok: np.ndarray) -> object:
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
                raise ParameterError(f"{self.kind}: input {first_bad(v, finite)!r} is not a finite number")
            return np.clip(v, domain.low, domain.high)
        ok = member_mask(v, np.asarray(domain))
        if not ok.all():
            shown = ", ".join(f"{x:g}" for x in np.asarray(domain)[:8]) + (", ..." if len(domain) > 8 else "")
            raise ParameterError(f"{self.kind}: input {first_bad(v, ok)!r} is not in its domain {{{shown}}}")
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


def rr_log(mass: int, bits: int = 64) -> float:
    return math.log(mass) - bits * LN2


# --- the registry: each family adds its kinds with ``@register_randomizer`` ---


class SpecView(Protocol):
    """What a builder reads of the spec it builds from (a ``ldp.core.randomizers.RandomizerSpec``).

    A protocol, so the families need not import the module that imports them all."""

    @property
    def kind(self) -> str: ...

    @property
    def query(self) -> QuerySpec: ...

    @property
    def epsilon(self) -> float: ...

    @property
    def params(self) -> Mapping[str, Any]: ...


Builder = Callable[[SpecView, Query], Randomizer]


@dataclass(frozen=True)
class RandomizerKind:
    """A registered randomizer kind.

    Attributes
    ----------
    name : str
        The kind, as a ``RandomizerSpec`` names it.
    build : callable
        ``build(spec, query) -> Randomizer``: the randomizer of a checked spec over a query bound to
        the users' schema. It never sees a ``params`` name outside ``params``: ``check_params``
        refuses them first, for every kind, so a parameter nobody reads (a typo, a newer
        aggregator's option) is never ignored silently (docs/security.md, I4).
    params : frozenset of str
        The names of the ``params`` it reads.
    module : str
        The family module that registered it.
    record_input : bool
        Its input is the whole record (width = the schema's width), not a scalar.
    requestable : bool
        Whether users build it on request; False for float ``laplace`` (open to Mironov's attack,
        in-process paper-fidelity demonstrations only: ``LocalRandomizer.build(..., allow_unaudited=True)``).
    """

    name: str
    build: Builder
    params: frozenset[str]
    module: str
    record_input: bool = False
    requestable: bool = True


_KINDS: dict[str, RandomizerKind] = {}


def register_randomizer(kind: str, *, params: Iterable[str] = (), record_input: bool = False, requestable: bool = True) -> Callable[[Builder], Builder]:
    """Decorator: register ``kind``, built by the decorated ``build(spec, query)`` (stack one per
    kind when a builder serves several).

    Parameters
    ----------
    kind : str
        The name a ``RandomizerSpec`` uses.
    params : iterable of str, default ()
        The ``params`` names the builder reads; every other name is refused (``check_params``).
    record_input : bool, default False
        The randomizer takes the whole record (``record_rr``).
    requestable : bool, default True
        False: refused unless ``allow_unaudited=True`` (float ``laplace``).

    Raises
    ------
    ValueError
        ``kind`` is already registered (two families claiming one name is a programming error).
    """

    def decorate(build: Builder) -> Builder:
        if kind in _KINDS:
            raise ValueError(f"randomizer kind {kind!r} is already registered")
        _KINDS[kind] = RandomizerKind(kind, build, frozenset(params), build.__module__, record_input, requestable)
        return build

    return decorate


def registered_randomizers() -> Mapping[str, RandomizerKind]:
    """The kinds registered so far, read-only. ``ldp.core.randomizers`` imports every family, so
    read it through ``randomizer_kinds`` / ``randomizer_params`` there to see them all."""
    return MappingProxyType(_KINDS)


def check_params(kind: str, params: Any) -> None:
    """Refuse params that the registered ``kind`` does not declare (one line: the names and what
    is allowed), and params that are not a mapping."""
    if not isinstance(params, Mapping):
        raise ParameterError(f"randomizer {kind!r}: params must be a mapping (a dict), got {type(params).__name__} {params!r}")
    allowed = _KINDS[kind].params
    unknown = sorted(repr(k) if not isinstance(k, str) else k for k in params if k not in allowed)
    if unknown:
        raise ParameterError(
            f"randomizer {kind!r}: unknown params {unknown[:8]}{' ...' if len(unknown) > 8 else ''}; "
            f"allowed: {sorted(allowed) if allowed else 'none'}"
        )
