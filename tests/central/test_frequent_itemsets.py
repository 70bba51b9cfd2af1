"""Private frequent itemset mining (CHS §4.1, Corollary 1): data generator, supports, samplers, an exact privacy
audit of the selection, range-independence, and the experiment's quick run.

Statistical tests are seeded; each states its false-alarm rate (the chance it fails on correct code), and each
runs a deliberately broken variant (the module's real source with one change, ``tests.central.mutants``) that
it must catch. The exact audit has no statistics: it records what the real selection passes to the mechanism
and computes that mechanism's output law exactly (closed form, or 1-D quadrature with error ≲ 1e-6).
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

import ldp.central.frequent_itemsets as fim
from ldp.central.frequent_itemsets import (
    ItemsetSupports,
    draw_unobserved,
    itemset_supports,
    max_laplace_of,
    planted_baskets,
    report_noisy_max_tail,
    select_frequent_itemset,
    universe_size,
)
from ldp.central.large_margin import lmm_distribution, report_noisy_max_distribution
from ldp.central.privacy_checks import max_log_ratio, symmetric_delta
from ldp.core.errors import ParameterError
from ldp.core.exponential_mechanism import exponential_probabilities
from tests.central.mutants import mutant_namespace
from tests.waits import PROCESS_WAIT_S

ROOT = Path(__file__).resolve().parents[2]


def _mutant(function: Callable[..., Any], old: str, new: str) -> dict[str, Any]:
    """The module's namespace with ``function`` recompiled from its real source, ``old`` → ``new``."""
    return mutant_namespace(fim, function, old, new)


# --- data: the generator and the supports ---


def test_planted_baskets_is_deterministic_with_exact_pattern_supports() -> None:
    args = (3000, 500, 6, 3, (400, 390, 100))
    a, b = planted_baskets(*args, zipf_exponent=0.5, seed=4), planted_baskets(*args, zipf_exponent=0.5, seed=4)
    assert a == b and a != planted_baskets(*args, zipf_exponent=0.5, seed=5)
    assert len(a) == 3000 and all(1 <= len(x) <= 6 and list(x) == sorted(set(x)) and x[-1] < 500 for x in a)
    sup = itemset_supports(a, 3)
    got = {tuple(int(v) for v in row): int(c) for row, c in zip(sup.itemsets, sup.counts)}
    assert [got[(0, 1, 2)], got[(3, 4, 5)], got[(6, 7, 8)]] == [400, 390, 100]  # planted exactly
    # noise never uses a pattern item: a basket holds all of a pattern or none of it
    assert all(len(set(x) & set(range(3 * j, 3 * j + 3))) in (0, 3) for x in a for j in range(3))
    with pytest.raises(ParameterError, match="pattern_counts must sum to at most n = 10"):
        planted_baskets(10, 500, 6, 3, (6, 5))
    with pytest.raises(ParameterError, match="active_items must be ≥ 12"):
        planted_baskets(10, 11, 6, 3, (1, 1))


def test_itemset_supports_counts_each_basket_once() -> None:
    sup = itemset_supports([(1, 2, 3), (3, 2, 2, 1), (1, 2), (), (5,)], 2)
    got = {tuple(int(v) for v in row): int(c) for row, c in zip(sup.itemsets, sup.counts)}
    assert got == {(1, 2): 3, (1, 3): 2, (2, 3): 2} and sup.n == 5  # (3,2,2,1) is the set {1,2,3}
    rng = np.random.default_rng(1)
    baskets = [tuple(rng.choice(9, size=rng.integers(0, 6))) for _ in range(200)]
    sup3 = itemset_supports(baskets, 3)
    brute = {c: sum(set(c) <= set(b) for b in baskets) for c in combinations(range(9), 3)}
    assert {tuple(int(v) for v in row): int(c) for row, c in zip(sup3.itemsets, sup3.counts)} == {c: k for c, k in brute.items() if k}
    assert universe_size(10**60, 3) == math.comb(10**60, 3)
    with pytest.raises(ParameterError, match="item ids must be integers ≥ 0"):
        itemset_supports([(1, -2)], 2)


# --- the samplers: the tail's maximum, report-noisy-max with a tail, the unobserved draw ---


def test_max_laplace_of_has_the_law_of_the_maximum() -> None:
    """KS test against P[max ≤ x] = F(x)^m. False alarm 1e-6 (the KS p-value threshold)."""
    m, b = 50, 2.0

    def cdf(x: np.ndarray) -> np.ndarray:
        F = np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0) / b), 1 - 0.5 * np.exp(-np.maximum(x, 0) / b))
        return F**m

    def p_value(ns: dict[str, Any]) -> float:
        rng = np.random.default_rng(21)
        draws = np.array([ns["max_laplace_of"](m, b, rng) for _ in range(4000)])
        return float(stats.kstest(draws, cdf).pvalue)

    assert p_value(vars(fim)) > 1e-6
    # Broken: the tail's maximum drawn as one Laplace (its size ignored) — caught.
    assert p_value(_mutant(max_laplace_of, "math.log(e) - math.log(m)", "math.log(e) - math.log(1)")) < 1e-6
    # A count past float range: the median of the max of m Laplaces is b·(ln m − ln(2 ln 2)).
    rng = np.random.default_rng(22)
    huge = 10**400
    med = float(np.median([max_laplace_of(huge, b, rng) for _ in range(401)]))
    assert med == pytest.approx(b * (math.log(huge) - math.log(2 * math.log(2))), abs=0.5 * b)  # Gumbel spread b: > 10σ


def test_report_noisy_max_tail_matches_the_law_over_the_whole_universe() -> None:
    """Counts (3, 2, 0) plus 5 tail items at 0, n = 1, ε = 1: the law is report-noisy-max over 8 explicit scores,
    scale 2/ε. Each of the 4 outcomes within 6σ: false alarm < 4·2e-9."""
    counts, tail, eps, N = np.array([3.0, 2.0, 0.0]), 5, 1.0, 20_000
    law = report_noisy_max_distribution(np.concatenate([counts, np.zeros(tail)]), 2.0 / eps)
    p = np.append(law[:3], law[3:].sum())

    def agrees(ns: dict[str, Any]) -> bool:
        rng = np.random.default_rng(23)
        draws = [ns["report_noisy_max_tail"](counts, 1, eps, rng, tail_size=tail) for _ in range(N)]
        freq = np.bincount([3 if d == fim.TAIL else d for d in draws], minlength=4) / N
        return bool(np.all(np.abs(freq - p) <= 6 * np.sqrt(p * (1 - p) / N)))

    assert agrees(vars(fim))
    # Broken: the whole tail as one Laplace (the universe's size lost) — caught.
    assert not agrees(_mutant(report_noisy_max_tail, "max_laplace_of(tail, scale, rng)", "max_laplace_of(1, scale, rng)"))
    # Broken: the textbook scale 1/(εn), not private for replace-one neighbours (test_large_margin) — caught.
    assert not agrees(_mutant(report_noisy_max_tail, "scale = 2.0 / (eps * nn)", "scale = 1.0 / (eps * nn)"))


def test_draw_unobserved_is_uniform_over_the_unobserved_itemsets() -> None:
    """Catalogue of 7 items, r = 2 (K = 21), 4 observed: chi-square over the 17 others, false alarm 1e-6."""
    sup = itemset_supports([(0, 1), (0, 1, 2), (5, 6)], 2)
    observed = {tuple(int(v) for v in row) for row in sup.itemsets}
    rest = [c for c in combinations(range(7), 2) if c not in observed]

    def p_value(ns: dict[str, Any]) -> float:
        rng = np.random.default_rng(24)
        draws = [ns["draw_unobserved"](sup, 7, rng) for _ in range(3400)]
        assert not observed & set(draws)
        return float(stats.chisquare([draws.count(c) for c in rest]).pvalue)

    assert p_value(vars(fim)) > 1e-6
    # Broken: the first unobserved itemset, always — caught.
    assert p_value(_mutant(draw_unobserved, "rest[int(rng.integers(len(rest)))]", "rest[0]")) < 1e-6
    # A huge catalogue (rejection path): items in range, distinct, never observed.
    rng = np.random.default_rng(25)
    big = planted_baskets(500, 100, 5, 3, (200,), seed=1)
    bsup = itemset_supports(big, 3)
    seen = {tuple(int(v) for v in row) for row in bsup.itemsets}
    for _ in range(50):
        d = draw_unobserved(bsup, 10**60, rng)
        assert len(set(d)) == 3 and list(d) == sorted(d) and d[-1] < 10**60 and d not in seen
    small = itemset_supports([(0, 1, 2)], 3)
    d = draw_unobserved(small, 4, rng)  # K = 4, one observed
    assert d in {(0, 1, 3), (0, 2, 3), (1, 2, 3)}
    with pytest.raises(ParameterError, match="no unobserved itemset"):
        draw_unobserved(small, 3, rng)


# --- exact privacy audit of the selection on small neighbouring transaction databases ---

N_AUDIT, EPS, DELTA, CATALOGUE, R = 300, 1.0, 0.05, 4, 2
TYPES = [tuple(c) for k in range(4) for c in combinations(range(CATALOGUE), k)]  # the 15 baskets of ≤ 3 items
UNIVERSE = list(combinations(range(CATALOGUE), R))  # K = 6
SPIED = {"lmm": "large_margin_mechanism", "em": "exponential_mechanism", "rnm": "report_noisy_max_tail"}


def _database(hist: dict[tuple[int, ...], int]) -> list[tuple[int, ...]]:
    """N_AUDIT baskets: ``hist`` of basket types, the rest empty."""
    out = [b for b, c in hist.items() for _ in range(c)]
    return out + [()] * (N_AUDIT - len(out))


FAMILY: list[dict[tuple[int, ...], int]] = [  # ties, sparse data (count-1 itemsets next to unobserved ones), gaps around LMM's n·T(1) ≈ 123
    {},
    {(0, 1): 1, (2, 3): 1},
    {(0, 1): 130, (2, 3): 3},
    {(0, 1): 124, (1, 3): 1},
    {(0, 1, 2): 60, (0, 1): 60, (1, 3): 2},
    {(0, 1, 2): 100, (1, 2, 3): 100},
    {(0, 1): 150, (2, 3): 30, (0, 2, 3): 5},
    {(0, 1): 100, (2, 3): 100},
]


def _law(ns: dict[str, Any], baskets: list[tuple[int, ...]], mechanism: str) -> np.ndarray:
    """Exact law over UNIVERSE of ``ns``'s selection on ``baskets``, at the arguments it really passes.

    The selection runs once with its mechanism replaced by a spy that records the call (and then runs the
    real mechanism, so the selection goes on as usual); the law is computed at those arguments. A tail
    output is a uniform unobserved itemset (``draw_unobserved``, checked above), so the tail's mass is
    spread evenly over the K − L unobserved itemsets.
    """
    name = SPIED[mechanism]
    real = ns[name]
    rec: dict[str, Any] = {}

    def spy(scores: Any, *args: Any, **kw: Any) -> Any:
        rec.update(scores=np.array(scores, dtype=np.float64), args=args, kw=kw)
        return real(scores, *args, **kw)

    ns[name] = spy
    try:
        sup: ItemsetSupports = ns["itemset_supports"](baskets, R)
        ns["select_frequent_itemset"](sup, CATALOGUE, mechanism, EPS, DELTA, np.random.default_rng(0))
    finally:
        ns[name] = real
    s, a, kw = rec["scores"], rec["args"], rec["kw"]
    tail, tail_score = int(kw.get("tail_size", 0)), float(kw.get("tail_score", 0.0))
    full = np.concatenate([s, np.full(tail, tail_score)])
    if mechanism == "lmm":  # large_margin_mechanism(f, n, ε, δ, rng, tail_size=…, tail_score=…, max_steps=…)
        n, eps, dlt = a[0], a[1], a[2]
        p, _ = lmm_distribution(full, n, eps, dlt, grid_points=20_001)
    elif mechanism == "em":  # exponential_mechanism(counts, ε, rng, …)
        extra = {k: kw[k] for k in ("sensitivity", "exponent_scale") if k in kw}
        p = exponential_probabilities(full, a[0], **extra)
    else:  # report_noisy_max_tail(f, n, ε, rng, …): Lap(2/(εn)) on f, i.e. Lap(2/ε) on n·f
        n, eps = a[0], a[1]
        p = report_noisy_max_distribution(n * full, 2.0 / eps, grid_points=40_001)
    law = dict.fromkeys(UNIVERSE, 0.0)
    for row, pi in zip(sup.itemsets, p[: s.size]):
        law[tuple(int(v) for v in row)] = float(pi)
    unobserved = [u for u in UNIVERSE if u not in {tuple(int(v) for v in row) for row in sup.itemsets}]
    for u in unobserved:
        law[u] = float(p[s.size :].sum()) / len(unobserved)
    return np.array([law[u] for u in UNIVERSE])


def _audit(ns: dict[str, Any], mechanism: str, family: list[dict[tuple[int, ...], int]] = FAMILY) -> tuple[float, float]:
    """(worst pure loss max |ln P − ln P'|, worst symmetric δ(ε)) over every replace-one neighbour of the family."""
    pure = dlt = 0.0
    for hist in family:
        db = _database(hist)
        p = _law(ns, db, mechanism)
        for old in {b for b in db}:
            i = db.index(old)
            for new in TYPES:
                if new == old:
                    continue
                q = _law(ns, [*db[:i], new, *db[i + 1 :]], mechanism)
                pure = max(pure, max_log_ratio(p, q))
                dlt = max(dlt, float(symmetric_delta(p, q, EPS)))
    return pure, dlt


def test_exact_privacy_of_the_itemset_selection_and_broken_variants_caught() -> None:
    """Claims: LMM (ε, δ)-DP (CHS Thm 2), EM and report-noisy-max ε-DP, at ε = 1, δ = 0.05, n = 300, K = 6.

    Measured, exact loss ÷ claim: LMM δ(ε)/δ = 0 (its pure loss is 0.723ε, not a claim: LMM is conservative
    here); EM 1.000 (tight: two counts move by one in opposite directions); report-noisy-max 1.000 (to the
    quadrature's 3e-7). Broken variants (measured): universe cut to the observed itemsets: δ(ε) = 0.63 (LMM),
    0.55 (EM), 0.54 (report-noisy-max), pure loss ∞; LMM on counts: δ(ε) = 0.50; EM at exp(ε·count): 2.000ε.
    """
    lmm_pure, lmm_delta = _audit(vars(fim), "lmm")
    assert lmm_delta <= DELTA and lmm_pure <= EPS
    em_pure, _ = _audit(vars(fim), "em")
    assert em_pure <= EPS + 1e-9
    rnm_pure, _ = _audit(vars(fim), "rnm")
    assert rnm_pure <= EPS + 1e-6
    sparse = [FAMILY[1]]
    sel = select_frequent_itemset
    # Broken: the universe cut down to the observed itemsets (no tail) — a count-1 itemset's output
    # probability drops to 0 on the neighbour that removes it: δ(ε) = 0.5, infinite pure loss.
    _, d = _audit(_mutant(sel, "tail_size=tail, tail_score=0.0, max_steps", "tail_size=0, tail_score=0.0, max_steps"), "lmm", sparse)
    assert d > DELTA
    pure, _ = _audit(_mutant(sel, "exponential_mechanism(counts, eps, rng, tail_size=tail", "exponential_mechanism(counts, eps, rng, tail_size=0"), "em", sparse)
    assert pure > EPS
    pure, _ = _audit(_mutant(sel, "report_noisy_max_tail(f, n, eps, rng, tail_size=tail", "report_noisy_max_tail(f, n, eps, rng, tail_size=0"), "rnm", sparse)
    assert pure > EPS
    # Broken: LMM fed support counts instead of frequencies (sensitivity n, not 1/n) — its margin test
    # passes at a gap of one basket, so the selection flips between neighbours.
    _, d = _audit(_mutant(sel, "large_margin_mechanism(f, n,", "large_margin_mechanism(counts, n,"), "lmm", FAMILY[-1:])
    assert d > DELTA
    # Broken: the exponential mechanism at exp(ε·count), the textbook form without the 1/2 — loss 2ε.
    pure, _ = _audit(_mutant(sel, "exponential_mechanism(counts, eps, rng,", "exponential_mechanism(counts, eps, rng, exponent_scale=1.0,"), "em")
    assert pure > 1.5 * EPS  # measured 2.000ε


# --- range independence (CHS Cor. 1 / Remark 1) ---


def test_lmm_is_range_independent_where_em_and_noisy_max_are_not() -> None:
    """Same data (f_max = 700/4000, margin 672 counts at ℓ* = 4 > n·T(4) = 451), K = C(|I|, 3) from 10^11 to 10^449.

    LMM: near-max in ≥ 27 of 30 runs at each K (measured 30/30; if its rate is ≥ 0.99, P[< 27 of 30] < 3e-3 per K);
    EM: exact closed form; report-noisy-max: ≤ 3 of 30 at K = 10^449 (it needs a Laplace maximum below 700 among
    10^449: probability < 1e-100). Broken LMM (scan capped at ℓ = 2 < ℓ*, so it falls back to the exponential
    mechanism at ε/3 over all K): range-dependent, caught.
    """
    baskets = planted_baskets(4000, 2000, 6, 3, (700, 690, 680, 670), 0.5, seed=0)
    sup = itemset_supports(baskets, 3)
    rng = np.random.default_rng(31)

    def near_max(mech: str, catalogue: int, **kw: Any) -> int:
        return sum(select_frequent_itemset(sup, catalogue, mech, 1.0, 1e-6, rng, **kw).count >= 670 for _ in range(30))

    for lg in (4, 150):
        assert near_max("lmm", 10**lg) >= 27
        K = universe_size(10**lg, 3)
        em = exponential_probabilities(sup.counts.astype(float), 1.0, tail_size=K - sup.counts.size)
        em_near = float(em[:-1][sup.counts >= 670].sum())
        assert em_near > 0.999 if lg == 4 else em_near < 1e-100
    assert near_max("rnm", 10**4) >= 27 and near_max("rnm", 10**150) <= 3
    assert near_max("lmm", 10**150, max_steps=2) <= 3  # broken: caught


# --- validation and the experiment ---


def test_selection_validation_one_clear_line() -> None:
    sup = itemset_supports([(0, 1), (5, 9)], 2)
    rng = np.random.default_rng(0)
    with pytest.raises(ParameterError, match="mechanism must be one of lmm, em, rnm; got 'gumbel'"):
        select_frequent_itemset(sup, 10, "gumbel", 1.0, 1e-6, rng)
    with pytest.raises(ParameterError, match="catalogue_size must exceed every item id; got 9 with item 9"):
        select_frequent_itemset(sup, 9, "em", 1.0, 1e-6, rng)
    with pytest.raises(ParameterError, match="delta"):
        select_frequent_itemset(sup, 10, "lmm", 1.0, 0.0, rng)
    with pytest.raises(ParameterError, match="catalogue_size must be an integer ≥ 3, got 2"):
        select_frequent_itemset(itemset_supports([()], 3), 2, "em", 1.0, 1e-6, rng)


def test_experiment_quick_run_writes_readable_outputs(tmp_path: Path) -> None:
    import dataclasses

    from ldp.simulations import frequent_itemsets as exp
    from ldp.simulations.reporting import captured_figures, figure_problems

    result = exp.run(dataclasses.replace(exp.quick_config(0), catalogue_log10=(4, 150), trials=10))
    with captured_figures() as figs:
        exp.write_outputs(result, tmp_path / "in-process")
    assert [problems for _, fig in figs if (problems := figure_problems(fig))] == []
    by = {(r["data"], r["catalogue_log10"], r["mechanism"]): r for r in result.rows}
    assert by[("above", 150, "lmm")]["near_max"] == 1.0 and by[("above", 150, "em")]["em_exact_gap"] == pytest.approx(700 / 4000)
    assert by[("below", 150, "lmm")]["lmm_passed"] == 0.0 and result.data["below"]["theorem3_applies"] is False
    # the documented command, as a real process
    out = tmp_path / "cli"
    proc = subprocess.run([sys.executable, "-m", "ldp.simulations.frequent_itemsets", "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in out.iterdir()} == {"result.json", "itemsets.csv", "table.md", "itemsets.png"}
    assert "log10 K" in (out / "table.md").read_text() and (out / "itemsets.png").stat().st_size > 10_000

