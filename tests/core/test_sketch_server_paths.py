"""The sketches' two servers (``SketchOracle.estimate_counts(method=...)``): through the rows of the
sketch, or through each report's entry at its row's h_j(x). Bit for bit the same estimates, for
every kind, candidate set and block size; ``"auto"`` takes the reports for a few candidates and
the rows for many; a report path reading the wrong entry is caught."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ldp.core import sketches
from ldp.core.errors import ParameterError
from ldp.core.rng import RandomSource
from ldp.core.sketches import CountMeanSketch, HadamardCountMeanSketch, StringCountMeanSketch, StringHadamardCountMeanSketch
from ldp.core.string_hashing import fingerprints, key_records

KINDS = [CountMeanSketch, HadamardCountMeanSketch]


def _reports(R: Any, n: int, k: int, seed: int = 0) -> np.ndarray:
    values = np.random.default_rng(seed).integers(0, k, n).astype(np.float64)
    return R.sample(values, RandomSource(seed).for_request("paths", 0, np.arange(n)))


@pytest.mark.parametrize("cls", KINDS)
@pytest.mark.parametrize(("hashes", "width", "n"), [(64, 32, 3_000), (1024, 256, 500), (4, 2, 200)])
def test_rows_and_reports_give_the_same_estimates(cls: Any, hashes: int, width: int, n: int) -> None:
    """Every category, a few, a repeated one; K·m from 8 to 2^18; fewer reports than rows."""
    k = 40
    R = cls(2.0, tuple(range(k)), hashes=hashes, width=width, hash_seed=3)
    reports = _reports(R, n, k)
    for cand in (None, np.array([5.0]), np.array([0.0, 39.0, 7.0, 7.0])):
        rows = R.estimate_counts(reports, cand, method="rows")
        by_report = R.estimate_counts(reports, cand, method="reports")
        assert np.array_equal(rows, by_report)
        assert np.array_equal(R.estimate_counts(reports, cand), rows)


@pytest.mark.parametrize("cls", KINDS)
def test_blocks_do_not_change_the_totals(cls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Work arrays of 7 entries (blocks of reports and of candidates) give the same integers."""
    R = cls(1.0, tuple(range(30)), hashes=128, width=64, hash_seed=9)
    reports = _reports(R, 1_000, 30, seed=2)
    want = R.estimate_counts(reports, method="rows")
    monkeypatch.setattr(sketches, "_BLOCK", 7)
    assert np.array_equal(R.estimate_counts(reports, method="reports"), want)


@pytest.mark.parametrize("cls", [StringCountMeanSketch, StringHadamardCountMeanSketch])
def test_the_string_kinds_too(cls: Any) -> None:
    words = np.array(["apple", "pear", "fig", "kiwi", "plum"] * 200, dtype=object)
    R = cls(3.0, hashes=256, width=64, hash_seed=5)
    inputs = R.check_inputs(key_records(fingerprints(words)))
    reports = R.sample(inputs, RandomSource(4).for_request("s", 0, np.arange(len(words))))
    cand = ["apple", "fig", "absent"]
    assert np.array_equal(R.estimate_counts(reports, cand, method="rows"), R.estimate_counts(reports, cand, method="reports"))


@pytest.mark.parametrize("cls", KINDS)
def test_auto_takes_the_reports_for_a_few_candidates_and_the_rows_for_many(cls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    R = cls(4.0, tuple(range(1024)), hashes=4096, width=1024, hash_seed=1)
    reports = _reports(R, 20_000, 1024)
    taken: list[str] = []
    real_reports, real_rows = cls._report_totals, cls._row_block
    monkeypatch.setattr(cls, "_report_totals", lambda self, *a: (taken.append("reports"), real_reports(self, *a))[1])
    monkeypatch.setattr(cls, "_row_block", lambda self, *a: (taken.append("rows"), real_rows(self, *a))[1])
    R.estimate_counts(reports, np.array([3.0]))
    assert taken == ["reports"]
    taken.clear()
    R.estimate_counts(reports)  # all 1,024 values of 20,000 reports: the rows
    assert taken and set(taken) == {"rows"}


def test_an_unknown_method_is_refused_in_one_line() -> None:
    R = CountMeanSketch(1.0, tuple(range(4)), hashes=4, width=4)
    with pytest.raises(ParameterError, match=r"cms: method must be one of \['auto', 'rows', 'reports'\], got 'fast'"):
        R.estimate_counts(_reports(R, 10, 4), method="fast")


@pytest.mark.parametrize("cls", KINDS)
def test_a_report_path_reading_the_next_entry_is_caught(cls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Broken variant: each report's entry read at h + 1 (mod m) instead of h."""
    R = cls(4.0, tuple(range(16)), hashes=64, width=32, hash_seed=2)
    reports = _reports(R, 2_000, 16)
    want = R.estimate_counts(reports, method="rows")
    real = cls._report_values
    monkeypatch.setattr(cls, "_report_values", lambda self, w, h: real(self, w, (h + 1) % self.width))
    assert not np.array_equal(R.estimate_counts(reports, method="reports"), want)
