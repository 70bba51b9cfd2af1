"""Privacy audits of ε-local randomizers: exact (of the realized sampler) and statistical.

``verify_exact(R)`` audits **what the sampler emits**, not what ``log_prob`` claims. Every
auditable finite-output randomizer exposes its realized distribution as integers
(``R.realized(inputs) -> (outputs, masses, denominator)``, ``R.realized_extremes()``) and the
integer cells of each of its random draws (``R.draw_cells(u)``). The audit

1. computes the largest privacy loss max_w max_{u,u′} p(w|u)/p(w|u′) from the realized masses
   over ``R.audit_inputs()`` (inputs whose worst case is the domain's worst case) as an exact
   ratio of integers — for a product mechanism (``R.factors()``, record_rr) the product of the
   per-factor worst ratios, which is exactly the product mechanism's worst ratio — and compares
   it with e^ε rigorously: e^ε is an 80-digit correctly rounded Decimal, and the audit passes
   only if the ratio is ≤ e^ε·(1 − 10^-60) (a conservative margin: an undecidable case fails).
   An output with mass 0 under one input and > 0 under another is an infinite loss;
2. checks that every realized row sums *exactly* to its denominator;
3. checks that the declared ``log_prob`` is the log of the realized masses (relative 10^-12) —
   2 and 3 on every audit input when the table has ≤ 2^20 entries, else on the sampler-check inputs;
4. checks that the sampler emits that table (sampler consistency): for a few inputs it enumerates
   every combination of cells of every draw, feeds ``sample`` a test-double randomness whose
   ``bits(draw)`` are each cell's first value, last value (the next boundary − 1) and middle,
   requires the same output at all three, and requires the masses it accumulates (product of the
   cell sizes, per output) to equal ``realized`` exactly. A product mechanism's sampler is also
   checked column by column against its factors' samplers on the same bits.

``ExactAudit.passed`` requires all four. The float ``laplace`` randomizer (``auditable = False``)
has no realized table: ``verify_exact`` returns an audit with ``passed = False`` and method
"not auditable: floats", carrying the declared density's supremum for information.
``verify_declared(R)`` is the old check of the *declared* probabilities only (kept for the
paper-fidelity float Laplace and for lessons about declarations).

The statistical audit checks the sampler with seeded randomness (KLNRS Def. 4.3 is about what the
code does):

- ``epsilon_lower_bound``: from N reports on input u and N on u′, count a distinguishing event E
  (by default the Neyman–Pearson optimal one computed from ``log_prob``) and return
  ε_lcb = ln(CP_lower(k₁/N) / CP_upper(k₂/N)) with Clopper–Pearson bounds at level α. If the
  sampler is ε-private, Pr[ε_lcb > ε] ≤ α (the false-alarm rate).
- ``chi_square_fit``: χ² goodness of fit of ``sample`` against ``log_prob``; the statistic is
  compared with the α-quantile of χ²_df.

These follow the practices of LDP-Auditor and DP-Sniper (Ding et al. 2018, "Detecting violations of differential privacy"; Bichsel et al. 2021, "DP-Sniper").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from ldp.core.errors import ParameterError, require_integer, require_probability
from ldp.core.laplace import LaplaceRandomizer
from ldp.core.randomizer_base import TWO64, Interval, Randomizer
from ldp.core.rng import RandomSource

__all__ = [
    "ExactAudit",
    "structure_audit",
    "verify_exact",
    "verify_declared",
    "realized_loss",
    "FixedRandomness",
    "sampler_table",
    "RELATIVE_TOLERANCE",
    "clopper_pearson",
    "EpsilonAudit",
    "epsilon_lower_bound",
    "audit_epsilon",
    "ChiSquareAudit",
    "chi_square_fit",
    "sample_reports",
    "exp_bounds",
    "log_ratio",
]

RELATIVE_TOLERANCE = 1e-12
GRID_INPUTS = 129
GRID_OUTPUTS = 4001
EXP_DIGITS = 80
EXP_MARGIN = Fraction(1, 10**60)
MAX_CELL_TUPLES = 1 << 23  # sampler-consistency enumeration budget per input
MAX_CHECK_INPUTS = 1 << 20  # verify_exact's check_inputs: more is capped by the table size anyway
MAX_AUDIT_SAMPLES = 10**8  # audit_epsilon's n per input: ~1.6 GB of float64 inputs and reports


# --- argument checks: a user's mistake is a one-line ParameterError naming it (issue 23, I6) ---


def _require_randomizer(R: object, where: str) -> Randomizer:
    """``R`` if it is a ``Randomizer``, else a ParameterError (not an AttributeError from inside)."""
    if not isinstance(R, Randomizer):
        raise ParameterError(
            f"{where}: R must be a randomizer (e.g. ldp.BinaryRandomizedResponse(1.0) or LocalRandomizer.randomizer), "
            f"got {type(R).__name__} {R!r}"[:300]
        )
    return R


def _require_input(R: Randomizer, name: str, u: object) -> float | np.ndarray:
    """``u`` if it is one input R can take (a number in its domain; a record of ``input_width``
    numbers for ``record_rr``), else a ParameterError naming ``name``. An input outside an
    interval domain is refused rather than clipped: the audit would measure another input."""
    width = R.input_width
    shown = repr(u)[:80]
    allowed = "a number" if width == 1 else f"a list of {width} numbers (one record)"
    if width == 1:
        if isinstance(u, (bool, np.bool_)) or not isinstance(u, (int, float, np.integer, np.floating)):
            raise ParameterError(f"audit_epsilon: {name} must be {allowed} in the input domain of {R.kind}, got {shown}")
        try:
            values = np.array([float(u)])
        except OverflowError:
            raise ParameterError(f"audit_epsilon: {name} must be a finite number, got {shown}") from None
    else:
        values = np.asarray(u) if isinstance(u, (list, tuple, np.ndarray)) else np.empty(0)
        if values.shape != (width,) or values.dtype.kind not in "iuf":
            raise ParameterError(f"audit_epsilon: {name} must be {allowed}, got {shown}")
        values = values[None, :]
    try:
        checked = R.check_inputs(values)
    except ParameterError as exc:
        raise ParameterError(f"audit_epsilon: {name} = {shown} is not an input of the randomizer: {exc}") from None
    if not np.array_equal(checked, values):  # an interval domain clips: refuse instead
        domain = R.input_domain()
        raise ParameterError(f"audit_epsilon: {name} must be in the input domain [{domain.low:g}, {domain.high:g}] of {R.kind}, got {shown}")  # type: ignore[union-attr]
    return u if width > 1 else float(u)  # type: ignore[arg-type, return-value]


# --- test double: randomness whose bits we choose ---


class FixedRandomness:
    """A ``UserRandomness`` stand-in: ``bits(draw)`` returns the uint64 array given for that draw
    (zeros for draws not given); ``uniform(draw)`` follows the contract (2k+1)·2^-53, k = bits >> 12."""

    def __init__(self, bits: Mapping[int, np.ndarray], n: int | None = None) -> None:
        self._bits = {int(d): np.asarray(b, dtype=np.uint64) for d, b in bits.items()}
        size = n if n is not None else (len(next(iter(self._bits.values()))) if self._bits else 0)
        self.users = np.arange(size, dtype=np.int64)

    def bits(self, draw: int = 0) -> np.ndarray:
        got = self._bits.get(int(draw))
        return np.zeros(len(self.users), dtype=np.uint64) if got is None else got.copy()

    def uniform(self, draw: int = 0) -> np.ndarray:
        return ((self.bits(draw) >> np.uint64(12)).astype(np.float64) * 2.0 + 1.0) * (2.0**-53)


# --- exact comparison with e^ε ---


def exp_bounds(epsilon: float) -> tuple[Fraction, Fraction]:
    """(lower, upper) rational bounds on e^ε with a 10^-60 relative margin each way."""
    with localcontext() as ctx:
        ctx.prec = EXP_DIGITS
        e = Fraction(Decimal(epsilon).exp())  # correctly rounded: within 10^-79 relative
    return e * (1 - EXP_MARGIN), e * (1 + EXP_MARGIN)


def log_ratio(r: Fraction) -> float:
    """ln r for a positive rational r, correctly rounded to double (80-digit Decimal logarithms);
    negative for r < 1. The one exact logarithm of a ratio here (audits, the longitudinal and
    RAPPOR losses)."""
    with localcontext() as ctx:
        ctx.prec = EXP_DIGITS
        return float(Decimal(r.numerator).ln() - Decimal(r.denominator).ln())


def _as_float(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype != object else np.array([float(v) for v in a.ravel()], dtype=np.float64).reshape(a.shape)


@dataclass(frozen=True)
class _Worst:
    ratio: Fraction | None  # None: infinite
    column: int
    hi_input: object
    lo_input: object
    output: object


def _worst_ratio(R: Randomizer) -> _Worst:
    """The largest realized max_u p(w|u) / min_u p(w|u) over outputs w, as an exact fraction."""
    inputs, outputs, hi, lo, _ = R.realized_extremes()
    hi_i, lo_i = np.asarray(hi), np.asarray(lo)
    zero_lo = (lo_i == 0) & (hi_i != 0)
    if zero_lo.any():
        j = int(np.nonzero(zero_lo)[0][0])
        ratio: Fraction | None = None
    else:
        hf, lf = _as_float(hi_i), _as_float(lo_i)
        with np.errstate(divide="ignore", invalid="ignore"):
            approx = np.where(hf > 0, hf / np.where(lf > 0, lf, 1.0), 1.0)
        top = approx.max()
        candidates = np.nonzero(approx >= top * (1 - 1e-9))[0]  # float ratios are within 1e-15
        best = max((Fraction(int(hi_i[j]), int(lo_i[j])), int(j)) for j in candidates if int(hi_i[j]) > 0) if top > 0 else (Fraction(1), 0)
        ratio, j = best
    column = np.asarray(R.realized_column(inputs, j))
    return _Worst(ratio, j, _item(inputs[int(np.argmax(_as_float(column)))]), _item(inputs[int(np.argmin(_as_float(column)))]), _item(outputs[j]))


def _item(v: np.ndarray | float) -> object:
    arr = np.asarray(v)
    return arr.item() if arr.ndim == 0 else tuple(arr.tolist())


def realized_loss(R: Randomizer) -> tuple[float, bool]:
    """(max realized privacy loss as a float, whether it is ≤ ε with the rigorous comparison)."""
    audit = verify_exact(R, check_sampler=False)
    return audit.max_log_ratio, audit.within_epsilon


# --- the sampler-consistency check ---


def sampler_table(R: Randomizer, u: object, outputs: np.ndarray) -> tuple[np.ndarray, int, bool, bool]:
    """The distribution ``R.sample`` emits on input u, computed from its declared draw cells.

    Returns (masses, denominator, constant, complete): masses[j] (Python ints) is the number of
    draw tuples in [0, 2^64)^draws whose output is ``outputs[j]``, denominator = 2^(64·draws);
    ``constant`` says whether the sampler gave the same output at the first, middle and last value
    of every cell tuple; ``complete`` whether every output it gave is in ``outputs``."""
    cells = [np.asarray(c, dtype=np.uint64) for c in R.draw_cells(u)]  # type: ignore[arg-type]
    for c in cells:
        if len(c) == 0 or int(c[0]) != 0 or (len(c) > 1 and not np.all(c[1:] > c[:-1])):
            raise ValueError(f"{type(R).__name__}.draw_cells must be strictly increasing uint64 starts beginning at 0")
    ends = [np.concatenate([c[1:] - np.uint64(1), [np.uint64(TWO64 - 1)]]).astype(np.uint64) for c in cells]
    d = len(cells)
    outer = [np.arange(len(c)) for c in cells[:-1]]
    combos = np.stack([g.ravel() for g in np.meshgrid(*outer, indexing="ij")], axis=1) if outer else np.zeros((1, 0), dtype=np.int64)
    last, last_end = cells[-1], ends[-1]
    n_last = len(last)
    flat_out = np.asarray(outputs, dtype=np.float64).ravel()
    order = np.argsort(flat_out, kind="stable")
    sorted_out = flat_out[order]
    masses = np.zeros(len(flat_out), dtype=object)
    constant, complete = True, True
    inputs = _repeat(u, n_last)
    for combo in combos:
        pick = {i: (cells[i][combo[i]], ends[i][combo[i]]) for i in range(d - 1)}
        first = {i: np.full(n_last, s, dtype=np.uint64) for i, (s, _) in pick.items()}
        final = {i: np.full(n_last, e, dtype=np.uint64) for i, (_, e) in pick.items()}
        mid = {i: np.full(n_last, s + (e - s) // np.uint64(2), dtype=np.uint64) for i, (s, e) in pick.items()}
        first[d - 1], final[d - 1], mid[d - 1] = last, last_end, last + (last_end - last) // np.uint64(2)
        out_first = np.asarray(R.sample(inputs, FixedRandomness(first, n_last)), dtype=np.float64)
        out_final = np.asarray(R.sample(inputs, FixedRandomness(final, n_last)), dtype=np.float64)
        out_mid = np.asarray(R.sample(inputs, FixedRandomness(mid, n_last)), dtype=np.float64)
        constant &= bool(np.array_equal(out_first, out_final) and np.array_equal(out_first, out_mid))
        pos = np.clip(np.searchsorted(sorted_out, out_first), 0, len(sorted_out) - 1)
        found = sorted_out[pos] == out_first
        complete &= bool(found.all())
        index = order[pos[found]]
        weight = math.prod(int(ends[i][combo[i]]) - int(cells[i][combo[i]]) + 1 for i in range(d - 1))
        if n_last == 1:
            if found.all():
                masses[index[0]] += weight * TWO64
            continue
        size = ((last_end - last) + np.uint64(1))[found]  # every cell < 2^64 when there are ≥ 2
        lo = np.zeros(len(flat_out), dtype=np.uint64)
        hi = np.zeros(len(flat_out), dtype=np.uint64)
        np.add.at(lo, index, size & np.uint64(0xFFFFFFFF))
        np.add.at(hi, index, size >> np.uint64(32))
        masses = masses + (hi.astype(object) * (1 << 32) + lo.astype(object)) * weight
    return masses, 1 << (64 * d), constant, complete


def _repeat(u: object, n: int) -> np.ndarray:
    arr = np.asarray(u)
    return np.repeat(arr[None, ...], n, axis=0) if arr.ndim else np.full(n, float(arr))


def _consistent(R: Randomizer, inputs: np.ndarray) -> tuple[bool, str]:
    outputs, masses, denominator = R.realized(inputs)
    for i, u in enumerate(inputs):
        if math.prod(len(c) for c in R.draw_cells(u)) > MAX_CELL_TUPLES:
            continue
        try:
            emitted, emitted_den, constant, complete = sampler_table(R, u, outputs)
        except ValueError as exc:
            return False, str(exc)
        if not constant:
            return False, f"sample({_item(u)}) is not constant on its declared cells"
        if not complete:
            return False, f"sample({_item(u)}) emits a report outside its realized outputs"
        row = np.asarray(masses[i]).astype(object)
        same = (emitted * denominator) == (row * emitted_den)
        if not np.all(same):
            j = int(np.nonzero(~same.astype(bool))[0][0])
            return False, f"sample({_item(u)}) emits {_item(outputs[j])} with mass {emitted[j]}/{emitted_den}, its table says {row[j]}/{denominator}"
    return True, "sampler emits its realized table"


def _product_consistent(R: Randomizer, factors: list[Randomizer], n: int = 512, seed: int = 0) -> tuple[bool, str]:
    """Column j of the product sampler on bits(j) equals factor j's sampler on the same bits."""
    rng = np.random.default_rng(seed)
    cols = [np.asarray(F.input_domain()) for F in factors]
    x = np.stack([c[rng.integers(0, len(c), n)] for c in cols], axis=1)
    bits = {}
    for j, F in enumerate(factors):
        starts = np.asarray(F.draw_cells(cols[j][0])[0], dtype=np.uint64)
        edges = np.concatenate([starts, starts[1:] - np.uint64(1), [np.uint64(TWO64 - 1)]])
        pick = rng.integers(0, 2, n).astype(bool)
        bits[j] = np.where(pick, edges[rng.integers(0, len(edges), n)], rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64))
    out = np.asarray(R.sample(x, FixedRandomness(bits, n)))
    for j, F in enumerate(factors):
        col = np.asarray(F.sample(x[:, j].astype(np.float64), FixedRandomness({0: bits[j]}, n)), dtype=np.float64)
        if not np.array_equal(out[:, j].astype(np.float64), col):
            return False, f"column {j} of the product sampler disagrees with its factor's sampler"
    return True, "product sampler = its factors' samplers"


# --- the exact audit ---


@dataclass(frozen=True)
class ExactAudit:
    """The largest realized privacy loss and where: p(w|u)/p(w|u′) at (u, u′, w), and the checks.

    ``max_log_ratio`` is ln of the exact worst ratio (inf when a report is impossible under some
    input but not another); ``within_epsilon`` is the rigorous comparison of that ratio with e^ε.
    """

    epsilon: float
    max_log_ratio: float
    argmax: tuple[object, ...]
    method: str
    normalization_error: float = 0.0  # max over rows |Σ masses − denominator| / denominator (0: exact)
    within_epsilon: bool = True
    log_prob_error: float = 0.0  # max |declared − ln realized| / max(1, |ln realized|)
    sampler_consistent: bool | None = None  # None: not checked
    detail: str = ""
    auditable: bool = True

    @property
    def passed(self) -> bool:
        """Realized loss ≤ ε (exactly), rows sum exactly, log_prob declares the realized values,
        and (when checked) the sampler emits its realized table."""
        return (
            self.auditable
            and self.within_epsilon
            and self.normalization_error == 0.0
            and self.log_prob_error <= RELATIVE_TOLERANCE
            and self.sampler_consistent is not False
        )

    @property
    def loss_over_epsilon(self) -> float:
        return self.max_log_ratio / self.epsilon


def structure_audit(epsilon: float, ratio: Fraction, core: ExactAudit, what: str, problem: str) -> ExactAudit:
    """An audit by structure: the realized loss is ln ``ratio``, the worst likelihood ratio of the
    channel the sampler really uses (exact cells), compared with e^ε rigorously; ``core`` is the
    exact audit of that inner channel (its argmax, normalization and log_prob errors and sampler
    check are carried over), and ``problem`` is what a probe of the real sampler found ('' when it
    draws as the structure says). The sketches' and ``treehist_prefix``'s audits."""
    return ExactAudit(
        epsilon,
        log_ratio(ratio),
        core.argmax,
        f"by structure: {what}; {core.method}",
        core.normalization_error,
        ratio <= exp_bounds(epsilon)[0],
        core.log_prob_error,
        bool(core.sampler_consistent) and not problem,
        "; ".join(x for x in (core.detail, problem) if x),
    )


def _row_sum_error(masses: np.ndarray, denominator: int) -> float:
    m = np.asarray(masses)
    if m.dtype == object:
        sums = [sum(int(v) for v in row) for row in m]
    else:
        m = m.astype(np.uint64)
        lo = (m & np.uint64(0xFFFFFFFF)).sum(axis=1, dtype=np.uint64)
        hi = (m >> np.uint64(32)).sum(axis=1, dtype=np.uint64)
        sums = [(int(h) << 32) + int(lo_) for h, lo_ in zip(hi.tolist(), lo.tolist())]
    return max(abs(s - denominator) / denominator for s in sums)


def _log_prob_error(declared: np.ndarray, masses: np.ndarray, denominator: int) -> float:
    with np.errstate(divide="ignore"):
        realized = np.log(_as_float(masses)) - math.log(denominator)
    declared = np.asarray(declared, dtype=np.float64)
    both_inf = np.isneginf(realized) & np.isneginf(declared)
    with np.errstate(invalid="ignore"):
        err = np.abs(declared - realized) / np.maximum(1.0, np.abs(realized))
    err = np.where(both_inf, 0.0, err)
    err = np.where(np.isnan(err), np.inf, err)
    return float(err.max()) if err.size else 0.0


def verify_exact(R: Randomizer, *, check_sampler: bool = True, check_inputs: int = 8) -> ExactAudit:
    """Exact privacy audit of the distribution R's sampler really emits (see module doc).

    It audits **what the sampler emits**, not what ``log_prob`` claims:

    1. the largest privacy loss max_w max_{u,u′} p(w|u)/p(w|u′), from the realized integer
       masses over ``R.audit_inputs()``, as an exact ratio of integers (for a product mechanism,
       ``R.factors()``, the product of the per-factor worst ratios), compared rigorously with
       e^ε: the audit passes only if the ratio is ≤ e^ε·(1 − 10^-60) (an undecidable case
       fails); an output with mass 0 under one input and > 0 under another is an infinite loss;
    2. every realized row sums *exactly* to its denominator;
    3. the declared ``log_prob`` is the log of the realized masses (relative 10^-12);
    4. (``check_sampler``) the sampler emits that table: ``sample`` is fed the first, middle
       and last value of every combination of its draw cells and must give the same output at
       all three, with masses equal to ``realized`` exactly.

    ``ExactAudit.passed`` requires all four. The float ``laplace`` randomizer
    (``auditable = False``) has no realized table: the audit has ``passed = False`` and method
    "not auditable: floats", carrying the declared density's supremum for information.

    Parameters
    ----------
    R : Randomizer
        The randomizer to audit (e.g. ``LocalRandomizer.randomizer``).
    check_sampler : bool, default True
        Run the sampler-consistency check (step 4).
    check_inputs : int, default 8
        How many inputs the sampler check uses, an integer in [2, 2^20] (fewer for very large
        tables); steps 2–3 run on them too, and on every audit input when the table has ≤ 2^20
        entries.

    Returns
    -------
    ExactAudit
        ``max_log_ratio`` (ln of the exact worst ratio), ``argmax`` (u, u′, w), ``within_epsilon``,
        the check results and ``passed``.

    Raises
    ------
    ParameterError
        ``R`` is not a ``Randomizer``, ``check_sampler`` is not a bool, or ``check_inputs`` is
        not an integer in [2, 2^20] (one line naming the argument).

    Examples
    --------
    >>> import ldp
    >>> audit = ldp.verify_exact(ldp.BinaryRandomizedResponse(1.0))
    >>> audit.passed, audit.max_log_ratio, audit.argmax  # worst case: report 1 from u = 1 vs u = 0
    (True, 1.0, (1.0, 0.0, 1.0))
    >>> from ldp.core.laplace import LaplaceRandomizer
    >>> audit = ldp.verify_exact(LaplaceRandomizer(1.0, bound=1.0))
    >>> audit.passed, audit.method
    (False, 'not auditable: floats (continuous float outputs have no exact realized distribution; declared-density supremum 1)')
    """
    _require_randomizer(R, "verify_exact")
    if not isinstance(check_sampler, (bool, np.bool_)):
        raise ParameterError(f"verify_exact: check_sampler must be True or False, got {check_sampler!r}"[:300])
    check_inputs = require_integer("verify_exact: check_inputs", check_inputs, 2, MAX_CHECK_INPUTS, "[2, 2^20]")
    if not R.auditable or R.continuous:
        return _not_auditable(R)
    factors = R.factors()
    parts = factors if factors else [R]
    ratio, argmax = _worst_product(parts)
    lower, _ = exp_bounds(R.epsilon)
    within = ratio is not None and ratio <= lower
    loss = math.inf if ratio is None else log_ratio(ratio)
    norm_err, lp_err = 0.0, 0.0
    consistent: bool | None = None
    details = []
    for F in parts:
        f_norm, f_lp, ok, why = _table_checks(F, check_inputs, check_sampler)
        norm_err, lp_err = max(norm_err, f_norm), max(lp_err, f_lp)
        if ok is not None:
            consistent = ok if consistent is None else consistent and ok
        if why:
            details.append(why)
    if factors:
        lp_err = max(lp_err, _product_log_prob_error(R, factors))
        if check_sampler:
            ok, why = _product_consistent(R, factors)
            consistent = bool(consistent) and ok
            if not ok:
                details.append(why)
    method = f"realized masses, exact{' (product of ' + str(len(parts)) + ' factors)' if factors else ''}"
    return ExactAudit(
        R.epsilon,
        loss,
        tuple(argmax) if factors else argmax[0],  # type: ignore[arg-type]
        method,
        norm_err,
        within,
        lp_err,
        consistent,
        "; ".join(details),
    )


def _not_auditable(R: Randomizer) -> ExactAudit:
    """The audit of a float randomizer: not passed, with its declared density's supremum."""
    declared = verify_declared(R)
    return ExactAudit(
        R.epsilon,
        declared.max_log_ratio,
        declared.argmax,
        "not auditable: floats (continuous float outputs have no exact realized distribution; "
        f"declared-density supremum {declared.max_log_ratio:.6g})",
        within_epsilon=False,
        auditable=False,
    )


def _worst_product(parts: list[Randomizer]) -> tuple[Fraction | None, list[object]]:
    """The product of the factors' exact worst ratios (None: infinite) and each one's (u, u′, w)."""
    ratio: Fraction | None = Fraction(1)
    argmax: list[object] = []
    for F in parts:
        worst = _worst_ratio(F)
        argmax.append((worst.hi_input, worst.lo_input, worst.output))
        ratio = None if ratio is None or worst.ratio is None else ratio * worst.ratio
    return ratio, argmax


def _table_checks(F: Randomizer, check_inputs: int, check_sampler: bool) -> tuple[float, float, bool | None, str]:
    """Steps 2–4 of ``verify_exact`` on one factor: (row-sum error, log_prob error, sampler
    consistent or None when not checked, why not)."""
    n_out = len(F.output_domain())  # type: ignore[arg-type]
    pts = F.consistency_inputs(max(2, min(check_inputs, (1 << 20) // max(1, n_out))))
    rows = [pts]
    if len(F.audit_inputs()) * n_out <= 1 << 20:  # every worst-case input too, when the table is small
        rows.append(F.audit_inputs())
    norm_err, lp_err = 0.0, 0.0
    for inputs in rows:
        outputs, masses, denominator = F.realized(inputs)
        norm_err = max(norm_err, _row_sum_error(masses, denominator))
        lp_err = max(lp_err, _log_prob_error(F.log_prob(inputs[:, None], outputs[None, :]), masses, denominator))
    if not check_sampler:
        return norm_err, lp_err, None, ""
    ok, why = _consistent(F, pts)
    return norm_err, lp_err, ok, "" if ok else why


def _product_log_prob_error(R: Randomizer, factors: list[Randomizer], n: int = 256, seed: int = 1) -> float:
    """Declared log_prob of random (record, report) pairs vs the sum of the factors' realized logs."""
    rng = np.random.default_rng(seed)
    cols = [np.asarray(F.input_domain()) for F in factors]
    u = np.stack([c[rng.integers(0, len(c), n)] for c in cols], axis=1)
    w = np.stack([c[rng.integers(0, len(c), n)] for c in cols], axis=1)
    w[0], w[1] = u[0], np.array([c[(np.searchsorted(c, u[1, j]) + 1) % len(c)] for j, c in enumerate(cols)])
    realized = np.zeros(n)
    for j, F in enumerate(factors):
        outputs, masses, denominator = F.realized(cols[j])
        i_u, i_w = np.searchsorted(cols[j], u[:, j]), np.searchsorted(outputs, w[:, j])
        realized += np.log(_as_float(masses[i_u, i_w])) - math.log(denominator)
    declared = np.asarray(R.log_prob(u, w), dtype=np.float64)
    return float((np.abs(declared - realized) / np.maximum(1.0, np.abs(realized))).max())


# --- the declared-probability check (claims only) ---


def _log_prob_matrix(R: Randomizer, inputs: np.ndarray, outputs: np.ndarray) -> np.ndarray:
    if inputs.ndim == 2:  # record randomizers: rows are inputs and outputs
        return np.stack([R.log_prob(inputs, w[None, :]) for w in outputs], axis=1)
    return np.asarray(R.log_prob(inputs[:, None], outputs[None, :]), dtype=np.float64)  # (inputs, outputs)


def _max_ratio_finite(R: Randomizer, inputs: np.ndarray, outputs: np.ndarray) -> tuple[float, tuple[object, object, object]]:
    logp = _log_prob_matrix(R, inputs, outputs)
    hi, lo = logp.argmax(axis=0), logp.argmin(axis=0)
    spread = logp[hi, np.arange(logp.shape[1])] - logp[lo, np.arange(logp.shape[1])]
    j = int(spread.argmax())
    return float(spread[j]), (_item(inputs[hi[j]]), _item(inputs[lo[j]]), _item(outputs[j]))


def verify_declared(R: Randomizer) -> ExactAudit:
    """The *declared* privacy loss: max log p(w|u) − log p(w|u′) from ``log_prob`` (a claim, not
    the sampler). Finite domains are enumerated; an interval of inputs is gridded (endpoints
    included); continuous outputs (Laplace) use the analytic supremum and a dense grid."""
    domain = R.input_domain()
    outputs = R.output_domain()
    if isinstance(domain, Interval):
        inputs = np.linspace(domain.low, domain.high, GRID_INPUTS)
        if outputs is not None:
            ratio, arg = _max_ratio_finite(R, inputs, outputs)
            return ExactAudit(R.epsilon, ratio, arg, "declared: interval inputs (endpoints included) × finite outputs", within_epsilon=ratio <= R.epsilon * (1 + RELATIVE_TOLERANCE))
        spread = max(abs(domain.low), abs(domain.high))
        scale = getattr(R, "scale", spread)
        ws = np.linspace(domain.low - 12 * scale, domain.high + 12 * scale, GRID_OUTPUTS)
        grid_ratio, arg = _max_ratio_finite(R, inputs, ws)
        analytic = _analytic_supremum(R, domain)
        ratio = max(grid_ratio, analytic)
        return ExactAudit(
            R.epsilon, ratio, arg, f"declared: analytic supremum {analytic:.6g}; dense grid {grid_ratio:.6g}", within_epsilon=ratio <= R.epsilon * (1 + RELATIVE_TOLERANCE)
        )
    assert outputs is not None, "a finite input domain needs a finite output domain"
    inputs, outs = np.asarray(domain), np.asarray(outputs)
    ratio, arg = _max_ratio_finite(R, inputs, outs)
    norm = float(np.abs(np.exp(_log_prob_matrix(R, inputs, outs)).sum(axis=1) - 1.0).max())
    return ExactAudit(R.epsilon, ratio, arg, "declared: full enumeration", 0.0 if norm <= 1e-9 else norm, ratio <= R.epsilon * (1 + RELATIVE_TOLERANCE))


def _analytic_supremum(R: Randomizer, domain: Interval) -> float:
    """sup log-ratio for translation families with Laplace density: |u − u′|max / scale."""
    if isinstance(R, LaplaceRandomizer):
        return (domain.high - domain.low) / R.scale
    raise NotImplementedError(f"no analytic privacy-loss supremum for {type(R).__name__}")


# --- statistical audit ---


def clopper_pearson(k: int, n: int, alpha: float = 0.025) -> tuple[float, float]:
    """Two one-sided (1 − α) Clopper–Pearson bounds on a binomial proportion from k of n.

    Together they are the exact two-sided (1 − 2α) interval: the default α = 0.025 gives the 95 %
    interval the separation experiment reports (Clopper & Pearson, Biometrika 26, 1934).
    """
    from scipy import stats  # only the statistical audits need scipy: the exact ones (ε-bounds, ratios) stay light

    k, n = int(k), int(n)
    lower = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    upper = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return lower, upper


def sample_reports(R: Randomizer, u: float | np.ndarray, n: int, seed: int, request: int) -> np.ndarray:
    """n reports of R on the same input u, one per simulated user, from per-user randomness."""
    users = np.arange(n, dtype=np.int64)
    randomness = RandomSource(seed).for_request("audit", request, users)
    inputs = np.repeat(np.asarray(u)[None, ...], n, axis=0) if np.ndim(u) else np.full(n, float(u))
    return R.sample(inputs, randomness)


@dataclass(frozen=True)
class EpsilonAudit:
    epsilon: float
    epsilon_lower_bound: float
    hits_u: int
    hits_u_prime: int
    n: int
    alpha: float

    @property
    def passed(self) -> bool:
        """True unless the samples prove (at level α) that the privacy loss exceeds ε."""
        return self.epsilon_lower_bound <= self.epsilon


def epsilon_lower_bound(k1: int, k2: int, n: int, alpha: float) -> float:
    """ε_lcb = ln(CP_lower(k1/n) / CP_upper(k2/n)); −inf when k1 = 0."""
    lower1, _ = clopper_pearson(k1, n, alpha)
    _, upper2 = clopper_pearson(k2, n, alpha)
    return -math.inf if lower1 == 0.0 else math.log(lower1 / upper2)


def best_event(R: Randomizer, u: float, u_prime: float) -> Callable[[np.ndarray], np.ndarray]:
    """The Neyman–Pearson event for (u, u′): the outputs whose declared ratio is within 10^-6 of
    the largest (any fixed event gives a valid bound; this one is the most powerful)."""
    outputs = R.output_domain()
    if outputs is not None:
        ratio = R.log_prob(u, outputs) - R.log_prob(u_prime, outputs)
        top = float(np.max(ratio))
        chosen = outputs[ratio >= top - 1e-6 * max(1.0, abs(top))]
        return lambda w: np.isin(w, chosen)
    # Laplace-type: the ratio is maximal (and flat) beyond u on the side away from u′.
    if u >= u_prime:
        return lambda w: np.asarray(w) >= u
    return lambda w: np.asarray(w) <= u


def audit_epsilon(
    R: Randomizer,
    u: float,
    u_prime: float,
    n: int = 100_000,
    alpha: float = 1e-6,
    seed: int = 0,
    event: Callable[[np.ndarray], np.ndarray] | None = None,
) -> EpsilonAudit:
    """Statistical lower bound on R's ε from n samples on u and n on u′ (false alarm ≤ α).

    From N reports on input u and N on u′ (seeded simulated users), count a distinguishing
    event E (by default the Neyman–Pearson optimal one computed from ``log_prob``) and return
    ε_lcb = ln(CP_lower(k₁/N) / CP_upper(k₂/N)) with Clopper–Pearson bounds at level α. If the
    sampler is ε-private, Pr[ε_lcb > ε] ≤ α (the false-alarm rate). This checks the sampler, not
    a claim (KLNRS Def. 4.3 is about what the code does), in the manner of LDP-Auditor and
    DP-Sniper.

    Parameters
    ----------
    R : Randomizer
        The randomizer to audit.
    u, u_prime : float
        The two inputs to distinguish: each in R's input domain (a record of ``input_width``
        numbers for ``record_rr``); a value outside an interval domain is refused, not clipped.
    n : int, default 100_000
        Reports per input, an integer in [1, 10^8].
    alpha : float, default 1e-6
        The level of the Clopper–Pearson bounds (the false-alarm rate), in (0, 1).
    seed : int, default 0
        Seed of the simulated users' randomness, an integer in [0, 2^64).
    event : callable, optional
        ``event(reports) -> bool array``: the distinguishing event; default ``best_event``.

    Returns
    -------
    EpsilonAudit
        ``epsilon_lower_bound``, the event counts ``hits_u`` and ``hits_u_prime``, and
        ``passed`` (True unless the samples prove, at level α, a loss above ε).

    Raises
    ------
    ParameterError
        An argument outside what is listed above (one line naming it).

    Examples
    --------
    >>> import ldp
    >>> audit = ldp.audit_epsilon(ldp.BinaryRandomizedResponse(1.0), 1.0, 0.0, n=20_000)
    >>> audit.passed, round(audit.epsilon_lower_bound, 3)  # a lower bound, close to ε = 1
    (True, 0.921)
    """
    _require_randomizer(R, "audit_epsilon")
    u, u_prime = _require_input(R, "u", u), _require_input(R, "u_prime", u_prime)  # type: ignore[assignment]  # a record for record_rr
    n = require_integer("audit_epsilon: n (reports per input)", n, 1, MAX_AUDIT_SAMPLES, "[1, 10^8]")
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise ParameterError(f"audit_epsilon: alpha must be a number in (0, 1), got {alpha!r}"[:300])
    alpha = require_probability("audit_epsilon: alpha", alpha)
    seed = require_integer("audit_epsilon: seed", seed, 0, (1 << 64) - 1, "[0, 2^64)")
    if event is not None and not callable(event):
        raise ParameterError(f"audit_epsilon: event must be a function of the reports, got {event!r}"[:300])
    event = event or best_event(R, u, u_prime)
    k1 = int(np.sum(event(sample_reports(R, u, n, seed, 1))))
    k2 = int(np.sum(event(sample_reports(R, u_prime, n, seed, 2))))
    return EpsilonAudit(R.epsilon, epsilon_lower_bound(k1, k2, n, alpha), k1, k2, n, alpha)


@dataclass(frozen=True)
class ChiSquareAudit:
    statistic: float
    df: int
    critical: float
    alpha: float

    @property
    def passed(self) -> bool:
        return self.statistic <= self.critical


def chi_square_fit(R: Randomizer, u: float, n: int = 100_000, alpha: float = 1e-6, seed: int = 0) -> ChiSquareAudit:
    """χ² goodness of fit of n samples of R(u) against exp(log_prob(u, ·)).

    Finite outputs: one cell per output. Continuous outputs: 40 cells between the 0.5 % and
    99.5 % points plus two tail cells, cell probabilities by numerical integration of the density.
    Cells with expected count < 5 are merged into their neighbour.
    """
    w = sample_reports(R, u, n, seed, 3)
    outputs = R.output_domain()
    if outputs is not None:
        probs = np.exp(R.log_prob(u, outputs))
        index = {float(o): i for i, o in enumerate(np.asarray(outputs, dtype=np.float64))}
        observed = np.bincount([index.get(float(x), -1) + 1 for x in np.asarray(w, dtype=np.float64)], minlength=len(outputs) + 1)[1:].astype(np.float64)
    else:
        scale = getattr(R, "scale", 1.0)
        edges = np.linspace(u - 5 * scale, u + 5 * scale, 41)
        fine = np.linspace(edges[0], edges[-1], 40 * 400 + 1)
        density = np.exp(R.log_prob(u, fine))
        cdf = np.concatenate([[0.0], np.cumsum((density[1:] + density[:-1]) / 2 * np.diff(fine))])
        inner = np.diff(cdf[::400])
        tail = (1.0 - inner.sum()) / 2
        probs = np.concatenate([[tail], inner, [tail]])
        observed = np.histogram(w, bins=np.concatenate([[-np.inf], edges, [np.inf]]))[0].astype(np.float64)
    expected = probs * n
    observed, expected = _merge_small(observed, expected)
    stat = float(np.sum((observed - expected) ** 2 / expected))
    df = len(expected) - 1
    from scipy import stats

    return ChiSquareAudit(stat, df, float(stats.chi2.isf(alpha, df)), alpha)


def _merge_small(observed: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    obs, exp = list(observed), list(expected)
    k = 0
    while k < len(exp) and len(exp) > 2:
        if exp[k] < 5:
            j = k + 1 if k + 1 < len(exp) else k - 1
            exp[j] += exp[k]
            obs[j] += obs[k]
            del exp[k], obs[k]
            k = max(0, min(k, j) - 1)  # recheck the merged cell and its left neighbour
        else:
            k += 1
    return np.array(obs), np.array(exp)
