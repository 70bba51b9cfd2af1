"""The HRS threshold oracle's own budget (HRS Figure 1, Lemma 4.1) is cumulative over distinct queries.

A planted bug — ``ThresholdOracle.prefetch`` checking each batch against the budget (``len(new) > budget``)
instead of the running total — survived the suite: every test hands the oracle ``central_answer`` with the
same budget, and ``central_answer`` refuses the (b+1)-th query itself, so the oracle's check was never the
one that fired.

Here the oracle is given an ``answer`` with **no** budget of its own (exact counts plus Lap(b/(εn)) noise,
recording every row it is asked), so only the oracle can refuse. A fixed schedule of batches crosses the
budget in its second batch. The privacy loss of what was released is computed exactly, as in
``test_hrs.py``: Lap(b/(εn)) answers to the set A of distinct queries answered lose
max_{D~D'} Σ_{q∈A} |f^D(q) − f^{D'}(q)| · εn/b, maximised over every database of n = 3 records over
d = 3 bits and all its replace-one neighbours. The oracle must keep it ≤ ε (measured: 1.00ε, 4 distinct
queries answered) and must refuse *before* the over-budget rows reach ``answer``. The broken variant —
the real ``prefetch`` source with the cumulative test made per-batch — answers all 8 distinct queries (7
of them non-constant) and loses 1.75ε: the test catches it.
"""

from __future__ import annotations

import inspect
import itertools
import textwrap

import numpy as np
import pytest

import ldp.central.hrs as hrs_module
from ldp.central.hrs import ThresholdOracle, conjunction_counts

D, N, EPS, BUDGET = 3, 3, 1.0, 4
RECORDS = np.array(list(itertools.product([0, 1], repeat=D)), dtype=np.uint8)
QUERIES = RECORDS.copy()  # all 8 monotone conjunctions over 3 variables


def _worst_loss(answered: np.ndarray) -> float:
    """Exact privacy loss (in units of ε) of Lap(b/(εn)) answers to ``answered``, over all replace-one pairs."""
    if answered.size == 0:
        return 0.0
    worst = 0.0
    for db in itertools.combinations_with_replacement(range(len(RECORDS)), N):
        f = conjunction_counts(RECORDS[list(db)], answered)
        for i in range(N):
            for r in range(len(RECORDS)):
                db2 = list(db)
                db2[i] = r
                worst = max(worst, float(np.abs(f - conjunction_counts(RECORDS[db2], answered)).sum()))
    return worst * EPS * N / BUDGET


def _run_schedule() -> tuple[np.ndarray, list[bool]]:
    """Drive a ``ThresholdOracle`` with an unbudgeted answer; return the distinct rows answered and refusals."""
    rng = np.random.default_rng(30)
    db = RECORDS[[0, 3, 7]]
    asked: list[np.ndarray] = []

    def answer(q: np.ndarray) -> np.ndarray:  # no budget of its own: only the oracle can refuse
        asked.append(np.array(q, dtype=np.uint8))
        return conjunction_counts(db, q) + rng.laplace(0.0, BUDGET / (EPS * N), size=q.shape[0])

    to = ThresholdOracle(answer, 0.1, BUDGET)
    schedule = [QUERIES[[1, 2, 3]], QUERIES[[4, 5, 6, 4]], QUERIES[[3, 2, 1, 1]], QUERIES[[7]], QUERIES[[0]]]
    refused = []
    for batch in schedule:
        try:
            to.query(batch, 0.5)
            refused.append(False)
        except ValueError as err:
            assert "budget" in str(err)
            refused.append(True)
    rows = np.unique(np.concatenate(asked), axis=0) if asked else np.zeros((0, D), dtype=np.uint8)
    assert sum(len(a) for a in asked) == len(rows), "a distinct query was sent to answer twice"
    assert to.distinct_queries == len(rows)
    return rows, refused


def _non_cumulative_prefetch() -> object:
    """The real ``ThresholdOracle.prefetch`` recompiled with the budget checked per batch (the mutant)."""
    src = textwrap.dedent(inspect.getsource(ThresholdOracle.prefetch))
    old = "len(self._cache) + len(new) > self.budget"
    assert src.count(old) == 1, "mutation site not found"
    ns = dict(vars(hrs_module))
    exec(compile(src.replace(old, "len(new) > self.budget"), hrs_module.__file__, "exec"), ns)  # noqa: S102
    return ns["prefetch"]


def test_threshold_oracle_budget_is_cumulative_and_refuses_before_answer() -> None:
    rows, refused = _run_schedule()
    # batch 2 would make 6 distinct > 4: refused whole; batch 3 repeats (free); batch 4 is the 4th; batch 5 the 5th.
    assert refused == [False, True, False, False, True]
    assert len(rows) == BUDGET
    loss = _worst_loss(rows)
    assert loss <= EPS + 1e-12
    assert loss == pytest.approx(1.0 * EPS)  # the budget is spent exactly


def test_threshold_oracle_non_cumulative_mutant_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ThresholdOracle, "prefetch", _non_cumulative_prefetch())
    rows, refused = _run_schedule()
    assert refused == [False, False, False, False, False]  # every batch fits the budget on its own
    assert len(rows) == 8
    loss = _worst_loss(rows)
    assert loss > EPS  # the harness above fails this variant
    assert loss == pytest.approx(1.75 * EPS)
