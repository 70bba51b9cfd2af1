"""Randomized response: binary (Warner 1965), k-ary (generalized RR), and ``record_rr`` (every
column of the record through k-ary RR with ε/width each: basic composition, KLNRS Claim 2.1) —
exact on 64-bit draws (``ldp.core.randomizer_base.rr_cells``).

Kinds registered here (``ldp.core.randomizer_base.register_randomizer``):

- ``binary_rr``   randomized response on a {0,1}-valued query (Warner 1965).
- ``kary_rr``     k-ary generalized randomized response over a query's finite values.
- ``record_rr``   every column of the record through k-ary randomized response with ε/width each:
                  the "randomize everything once" protocol.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import numpy as np

from ldp.core.errors import ParameterError, require_epsilon
from ldp.core.queries import Query
from ldp.core.randomizer_base import SAMPLER_BLOCK, TWO64, Randomizer, SpecView, register_randomizer, rr_cells, rr_draw, rr_log
from ldp.core.rng import Draws, each_chunk

__all__ = ["BinaryRandomizedResponse", "KaryRandomizedResponse", "RecordRandomizedResponse", "category_index"]


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
        # rr_draw at k = 2: flip (report 1 − u) iff X ≥ A, i.e. [u ≠ 0] XOR [X ≥ A], in
        # cache-sized blocks written straight into the report array.
        # the draw fused with the comparison (``each_chunk``): no word array written and read back
        a64 = np.uint64(self.cell_sizes[0])
        u = np.asarray(inputs)
        n = len(np.asarray(randomness.users))
        if u.shape != (n,):  # broadcast inputs: the formula as written
            return ((u != 0) ^ (randomness.bits(0) >= a64)).view(np.uint8)
        out = np.empty(n, dtype=np.bool_)

        def flip(words: np.ndarray, lo: int, hi: int) -> None:
            for start in range(lo, hi, SAMPLER_BLOCK):
                end = min(hi, start + SAMPLER_BLOCK)
                got = np.greater_equal(words[start - lo : end - lo], a64, out=out[start:end])
                got ^= u[start:end] != 0

        each_chunk(randomness, 0, flip)
        return out.view(np.uint8)

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        a, b = self.cell_sizes
        return np.where(np.asarray(u) == np.asarray(w), rr_log(a), rr_log(b))

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


def consecutive_integers(categories: tuple[float, ...]) -> bool:
    """Whether sorted, distinct ``categories`` are c, c+1, …, c+k−1 (then a value's index is its
    offset from c: no search, in the users' lookup and the estimator's count alike)."""
    return float(categories[0]).is_integer() and categories[-1] - categories[0] == len(categories) - 1


def category_index(kind: str, categories: tuple[float, ...], values: np.ndarray) -> np.ndarray:
    """The index of each value among the sorted, distinct ``categories`` (int64, shaped like
    ``values``), or a one-line ParameterError naming ``kind`` when a value is none of them.

    The users' input lookup of GRR and the frequency oracles. Consecutive integer categories
    (c, c+1, …; the usual case) are indexed by the offset v − c (no search: a binary search over
    k = 1024 categories costs ≈ 55 ns per value, the offset < 1 ns); up to 4 categories by
    comparisons; others by ``np.searchsorted``. A value is accepted iff the category at its index
    equals it, so every path gives the index of a category value and refuses the same values.

    Examples
    --------
    >>> category_index("kary_rr", (0.0, 1.0, 2.0, 3.0, 4.0, 5.0), np.array([5.0, 0.0, 3.0])).tolist()
    [5, 0, 3]
    >>> category_index("olh", (0.5, 2.0, 7.0), np.array([7.0, 0.5])).tolist()
    [2, 0]
    """
    k, low = len(categories), categories[0]
    v = np.asarray(values, dtype=np.float64)
    if k > 4 and consecutive_integers(categories):
        # consecutive integers (sorted, distinct): the index is the value's offset, no search, and
        # the category at an index is low + index (no k-entry array built per call: at k = 2^16
        # converting the tuple cost ≈ 2 ms, 20 ns a user of a 10^5-user batch)
        with np.errstate(invalid="ignore"):  # NaN/inf cast to some integer, then fail the check below
            idx = (v if low == 0 else v - low).astype(np.int64)  # v − 0 truncates like v (−0 too)
        np.clip(idx, 0, k - 1, out=idx)
        ok = (idx == v) if low == 0 else (idx + low == v)
    else:
        cats = np.asarray(categories)
        if k <= 4:  # a few comparisons beat a binary search: idx = #{categories below the value}
            idx = np.zeros(v.shape, dtype=np.int64)
            for c in cats[:-1]:
                idx += v > c
        else:
            idx = np.searchsorted(cats, v)
            np.minimum(idx, k - 1, out=idx)
        ok = cats[idx] == v
    if not ok.all():
        raise ParameterError(f"{kind}: an input is not one of the categories {categories[:8]}")
    return idx


def category_counts(reports: np.ndarray, categories: tuple[float, ...]) -> np.ndarray:
    """How many of ``reports`` equal each of the sorted ``categories`` (a report that is not a
    category counts for none): int64, shape (k,).

    Consecutive integer categories (c, c+1, …, c+k−1, the usual case) are counted with one
    ``np.bincount`` of ``report − c`` (no per-report search: GRR's estimator costs about what
    bincount costs); other categories go through ``np.searchsorted``. Both give the same counts.

    Examples
    --------
    >>> category_counts(np.array([0, 2, 2, 5, 1]), (0.0, 1.0, 2.0)).tolist()
    [1, 1, 2]
    >>> category_counts(np.array([0.5, 2.0, 2.0]), (0.5, 2.0)).tolist()
    [1, 2]
    """
    k = len(categories)
    low = categories[0]
    if consecutive_integers(categories):
        r_is_int = bool(np.issubdtype(reports.dtype, np.integer))
        if r_is_int:
            shifted = reports.astype(np.int64, copy=False) - int(low)
        else:
            values = reports.astype(np.float64, copy=False)
            with np.errstate(invalid="ignore"):  # NaN/inf cast to some integer, then fail the test below
                shifted = (values - low).astype(np.int64)  # truncation; the integral test below drops fractions
        lo, hi = (int(shifted.min()), int(shifted.max())) if shifted.size else (0, 0)
        if r_is_int and lo >= 0 and hi < k:  # every report is a category: no mask to build
            return np.bincount(shifted, minlength=k).astype(np.int64)
        keep = (shifted >= 0) & (shifted < k)
        if not r_is_int:
            keep &= values == shifted + low
        return np.bincount(shifted[keep], minlength=k).astype(np.int64)
    cats = np.asarray(categories, dtype=np.float64)
    r = reports.astype(np.float64, copy=False)
    idx = np.clip(np.searchsorted(cats, r), 0, k - 1)
    return np.bincount(idx[cats[idx] == r], minlength=k).astype(np.int64)


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
        cats = _category_values(self.categories)
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
        return category_index("kary_rr", self.categories, values)

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        a, b = self.cell_sizes
        idx = self._index(np.asarray(inputs, dtype=np.float64))
        out = rr_draw(idx, randomness.bits(0), a, b)
        if consecutive_integers(self.categories):  # category j is low + j: no k-entry array per call
            return (out + self.categories[0]).astype(np.float64, copy=False)
        return np.asarray(self.categories)[out]

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        a, b = self.cell_sizes
        return np.where(np.asarray(u) == np.asarray(w), rr_log(a), rr_log(b))

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
        r = np.asarray(reports).ravel()
        counts = np.zeros(self.k)
        if r.size:
            counts = category_counts(r, self.categories) / r.size
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


def _category_values(categories: object) -> tuple[float, ...]:
    """``categories`` as floats, or a one-line ParameterError naming them (issue 23, I6).

    A list, tuple or one-dimensional array of real numbers is accepted; a string, a scalar,
    None, a bool or a non-number element is refused here rather than surfacing as a builtin
    ``TypeError`` ("'int' object is not iterable") or as a string's characters read as values."""
    shown = repr(categories)[:80]
    if isinstance(categories, np.ndarray):
        if categories.ndim != 1:
            raise ParameterError(f"kary_rr categories must be a one-dimensional list of numbers, got an array of shape {categories.shape}")
        categories = categories.tolist()
    if not isinstance(categories, (list, tuple)):
        raise ParameterError(f"kary_rr categories must be a list or tuple of k ≥ 2 distinct numbers, got {shown}")
    for c in categories:
        if isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, float, np.integer, np.floating)):
            raise ParameterError(f"kary_rr categories must be numbers, got {c!r} in {shown}"[:300])
    try:
        return tuple(float(c) for c in categories)
    except OverflowError:  # an int past float's range
        raise ParameterError(f"kary_rr categories must be finite, got {shown}"[:300]) from None


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
            report = rr_draw(idx, randomness.bits(j), a, b)
            if step != 1:
                report *= step
            if low:
                report += low
            out[:, j] = report
        return out

    def log_prob(self, u: np.ndarray | float, w: np.ndarray | float) -> np.ndarray:
        cells = self.column_cells
        keep = np.array([rr_log(a) for a, _ in cells])
        other = np.array([rr_log(b) for _, b in cells])
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

# --- building from a spec (the users' side: ``LocalRandomizer.build``) ---


@register_randomizer("binary_rr")
def build_binary(spec: SpecView, query: Query) -> Randomizer:
    """``binary_rr`` over a {0,1}-valued query."""
    values = query.values()
    if values is None or not set(values.tolist()) <= {0.0, 1.0}:
        raise ParameterError(f"binary_rr needs a {{0,1}}-valued query; {spec.query.name!r} takes values {None if values is None else values.tolist()[:8]}")
    return BinaryRandomizedResponse(spec.epsilon)


@register_randomizer("kary_rr")
def build_kary(spec: SpecView, query: Query) -> Randomizer:
    """``kary_rr`` over the query's finite values (a constant query gets a dummy second category)."""
    values = query.values()
    if values is None:
        raise ParameterError(f"kary_rr needs a query with a small finite set of values; {spec.query.name!r} has none")
    if len(values) < 2:
        values = np.array([values[0], values[0] + 1.0])  # a constant query: add a dummy category
    return KaryRandomizedResponse(spec.epsilon, tuple(values.tolist()))


@register_randomizer("record_rr", record_input=True)
def build_record(spec: SpecView, query: Query) -> Randomizer:
    """``record_rr`` over the ``record`` query: one k-ary RR per column of the schema."""
    if query.name != "record":
        raise ParameterError(f"record_rr randomizes whole records; use the 'record' query, got {spec.query.name!r}")
    low, high, step = query.schema.column_bounds()
    return RecordRandomizedResponse(spec.epsilon, tuple(low.tolist()), tuple(high.tolist()), tuple(step.tolist()))
