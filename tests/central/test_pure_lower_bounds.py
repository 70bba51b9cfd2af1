"""BNS pure-DP lower bounds (ldp.central.pure_lower_bounds) and their experiment (simulations/pure_lower_bounds.py).

* The bound functions against values computed by hand from the statements (Lemma 4.15 / Thm 4.16,
  Lemma 5.7, the THRESH and k-point packings), the greedy packing count against a brute-force greedy
  run, and the packing identity 1 = K·p·e^{−ε·t} at the bound.
* A bound is a claim about EVERY pure learner, so a real pure learner falsifies a bound that is too
  large: the pure exponential mechanism succeeds at 8× the Lemma 5.7 bound (the broken constant 1/(αε)
  instead of 1/(8αε)), and fails below the true bound, as the theorem says it must.
* The k-point helpers: the exact sup over |Y| ≤ k against brute force; the packing copies separate by
  more than 2α (the variant without the +1 does not); the ERM is post-processing of the sanitization.
* The packing checked exactly on a real pure sanitizer (the Laplace histogram over all 2^d cells, in closed
  form): the closed form against a seeded Monte Carlo at d = 3; its exact m_90 lies above Thm 4.16's bound;
  the disjoint good sets share ≤ 1; ε-DP holds along the packing. Its Lap(1/ε) variant (2ε-DP under
  replace-one) breaks the ε-DP step of the chain and is caught.
* The experiment: its ``--quick`` run in process (files, readable figure, bound grows while the approximate
  m_90 stays flat) and ``python -m ldp.simulations.pure_lower_bounds --quick`` as a real process.

Privacy: nothing here adds a private mechanism. Thm 4.7's sanitizer is ``san_points`` (exactly audited in
test_san_points_emitted_exact.py) followed by sums of its released values, and ``kpoint_erm`` reads only a
released ``PointSanitization`` (the stability histogram, audited in test_sanitizers.py); both are
post-processing, which the signature test below pins.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ldp.central.pure_lower_bounds as plb
from ldp.central.point import learn_point_pure, random_point
from ldp.central.pure_lower_bounds import (
    kpoint_erm,
    kpoint_learner_lower_bound,
    kpoint_packing_log_size,
    kpoint_sanitizer_copies,
    kpoint_sanitizer_lower_bound,
    kpoint_sanitizer_sample_size,
    kpoint_set_error,
    laplace_histogram_m90,
    laplace_histogram_packing,
    laplace_interval_probability,
    packing_distance,
    point_sanitizer_lower_bound,
    sanitizer_lower_bound,
    threshold_learner_lower_bound,
)
from ldp.central.sanitizers import PointSanitization
from ldp.core.errors import ParameterError
from ldp.core.rng import generator
from tests.central.mutants import mutant_namespace
from tests.waits import PROCESS_WAIT_S

ROOT = Path(__file__).resolve().parents[2]


# --- the bound functions against hand-computed values ---


def test_lemma_415_thm_416_hand_values() -> None:
    """m ≥ ln(X_C(1−β))/(3αε): X_C = 2^8, α = β = 0.1, ε = 1 gives (8 ln 2 + ln 0.9)/0.3 = 18.1327."""
    assert sanitizer_lower_bound(8 * math.log(2), 0.1, 0.1, 1.0) == pytest.approx(18.13272, abs=1e-4)
    assert point_sanitizer_lower_bound(8, 0.1, 0.1, 1.0) == pytest.approx(18.13272, abs=1e-4)
    # d = 1024: (709.7827 − 0.1054)/0.3 = 2365.59; ε = 2 halves it, α = 0.05 doubles it
    assert point_sanitizer_lower_bound(1024, 0.1, 0.1, 1.0) == pytest.approx(2365.592, abs=1e-2)
    assert point_sanitizer_lower_bound(1024, 0.1, 0.1, 2.0) == pytest.approx(2365.592 / 2, abs=1e-2)
    assert point_sanitizer_lower_bound(1024, 0.05, 0.1, 1.0) == pytest.approx(2365.592 * 2, abs=1e-2)
    # the packing says nothing when X_C(1−β) ≤ 1
    assert sanitizer_lower_bound(0.0, 0.1, 0.1, 1.0) == 0.0
    with pytest.raises(ParameterError):
        sanitizer_lower_bound(1.0, 0.4, 0.1, 1.0)  # 3α > 1: S_x would need more than m copies


def test_lemma_57_and_threshold_packing_hand_values() -> None:
    """k = 1: |B| = 2^d − 1, m ≥ ln((2^d − 1)/2)/(8αε): d = 8 gives ln(127.5)/0.8 = 6.0601; THRESH has the same count."""
    assert kpoint_learner_lower_bound(8, 1, 0.1, 1.0) == pytest.approx(math.log(127.5) / 0.8, rel=1e-12)
    assert kpoint_learner_lower_bound(8, 1, 0.1, 1.0) == pytest.approx(6.0601, abs=1e-4)
    assert threshold_learner_lower_bound(8, 0.1, 1.0) == pytest.approx(6.0601, abs=1e-4)
    # d = 1024: (1024 ln 2 − ln 2)/0.8 = 886.36 (the 2^1024 − 1 is exact in integers)
    assert kpoint_learner_lower_bound(1024, 1, 0.1, 1.0) == pytest.approx(1023 * math.log(2) / 0.8, rel=1e-9)
    with pytest.raises(ParameterError):
        kpoint_learner_lower_bound(8, 1, 0.2, 1.0)  # α < 1/5 is needed: x0's mass 1 − 4α must exceed α


def test_packing_count_hand_values_and_brute_force_greedy() -> None:
    """|B| ≥ ⌈C(T,k)/R⌉, R = Σ_{j ≥ k/2} C(k,j)C(T−k,k−j): (6,2) → ⌈15/9⌉ = 2, (20,4) → ⌈4845/785⌉ = 7, k = 1 → T.
    The greedy of Lemma 5.7's proof, run for real on 12 points with k = 4, reaches at least the count and its
    sets meet pairwise in < k/2 points."""
    assert kpoint_packing_log_size(6, 2) == pytest.approx(math.log(2))
    assert kpoint_packing_log_size(20, 4) == pytest.approx(math.log(7))
    assert kpoint_packing_log_size(255, 1) == pytest.approx(math.log(255))
    T, k = 12, 4
    left = [frozenset(c) for c in itertools.combinations(range(T), k)]
    family: list[frozenset[int]] = []
    while left:
        Y = left[0]
        family.append(Y)
        left = [Z for Z in left if 2 * len(Z & Y) < k]
    assert all(2 * len(Y & Z) < k for Y, Z in itertools.combinations(family, 2))
    assert round(math.exp(kpoint_packing_log_size(T, k))) == 3  # ⌈495/201⌉
    assert len(family) >= 3
    with pytest.raises(ParameterError):
        kpoint_packing_log_size(5, 3)


def test_kpoint_sanitizer_bound_hand_value_and_packing_identity() -> None:
    """k = 1: (ln(255·0.9) − 1)/(2α) = 22.1795 at d = 8; at the bound the packing inequality is an equality."""
    assert kpoint_sanitizer_lower_bound(8, 1, 0.1, 0.1, 1.0) == pytest.approx((math.log(255 * 0.9) - 1) / 0.2, rel=1e-12)
    assert kpoint_sanitizer_lower_bound(8, 1, 0.1, 0.1, 1.0) == pytest.approx(22.1795, abs=1e-4)
    # t = ln(K p)/ε makes K·p·e^{−εt} = 1 exactly
    t = packing_distance(math.log(1e6), 0.5, 0.7)
    assert 1e6 * 0.5 * math.exp(-0.7 * t) == pytest.approx(1.0, rel=1e-12)
    # the order Ω(kd/(αε)): from d = 512 to 1024 the k = 4 bound grows by ≈ 2× (ln|B| ≈ linear in d)
    r = kpoint_sanitizer_lower_bound(1024, 4, 0.1, 0.1, 1.0) / kpoint_sanitizer_lower_bound(512, 4, 0.1, 0.1, 1.0)
    assert 1.95 < r < 2.05
    with pytest.raises(ParameterError, match="3k \\+ 1"):
        kpoint_sanitizer_lower_bound(2, 2, 0.1, 0.1, 1.0)  # 2^2 < 3·2 + 1


def test_packing_copies_separate_by_more_than_two_alpha() -> None:
    """t = ⌊2αm/h⌋ + 1 makes h·t/m > 2α for every m, k (h = ⌊k/2⌋ + 1); without the +1 it fails (broken variant)."""
    alpha = 0.1
    for m in range(1, 1500):
        for k in range(1, 7):
            h = k // 2 + 1
            assert h * kpoint_sanitizer_copies(m, k, alpha) > 2 * alpha * m
    broken = [(m, k) for m in range(1, 1500) for k in range(1, 7) if (k // 2 + 1) * math.floor(2 * alpha * m / (k // 2 + 1)) <= 2 * alpha * m]
    assert broken  # e.g. m = 100, k = 1: 20 copies give exactly 2α, not more
    assert kpoint_sanitizer_copies(100, 4, 0.1) == 7


def test_thm47_sample_size_is_sanpoints_at_alpha_over_k() -> None:
    """Theory-mode n of Thm 4.7's sanitizer: SanPoints' Choosing minimum at α/k (623,834 at k = 1, as pinned in docs/central.md)."""
    assert kpoint_sanitizer_sample_size(1, 0.1, 0.1, 1.0, 1e-6) == 623_834
    sizes = [kpoint_sanitizer_sample_size(k, 0.1, 0.1, 1.0, 1e-6) for k in (1, 2, 4)]
    assert sizes == sorted(sizes) and sizes[-1] == 5_614_004


# --- a real pure learner against the bound (and against a bound 8× too large) ---


def _pure_point_success(bits: int, m: int, trials: int, seed: int) -> float:
    rng = generator(seed, "test-pure-lower-bounds", bits, m)
    j = random_point(bits, rng)
    x0 = random_point(bits, rng, exclude=np.array([j], dtype=object))
    wins = 0
    for _ in range(trials):
        y = (rng.random(m) < 0.4).astype(np.int8)  # Lemma 5.7's D_Y at k = 1, α = 0.1: 4α on the target
        x = np.empty(m, dtype=object)
        x[:] = x0
        x[y == 1] = j
        wins += learn_point_pure(x, y, bits, 1.0, rng).hypothesis.point == j
    return wins / trials


def test_a_real_pure_learner_respects_the_bound_and_refutes_a_broken_one() -> None:
    """d = 256, α = 0.1, ε = 1: Lemma 5.7's bound is 220.9. Below it the theorem forbids success ≥ 3/4 on every
    target; the pure exponential mechanism indeed succeeds ≤ 0.5 of 40 seeded trials at m = 200. A "bound" with the
    constant 1/(αε) instead of 1/(8αε) (1,767) would claim every pure learner fails at m = 1,767, but the pure
    exponential mechanism succeeds in ≥ 36/40 trials there: the broken bound is refuted, the true one is not.
    False alarm: at m = 200 the exponential mechanism's selection has success ≈ 0.1 (measured m_90 ≈ 960), at m = 1,767
    ≈ 1.0; both seeded, binomial tails at these margins < 1e-6."""
    bound = kpoint_learner_lower_bound(256, 1, 0.1, 1.0)
    assert bound == pytest.approx(220.9, abs=0.1)
    assert _pure_point_success(256, 200, 40, 0) <= 0.5
    broken = 8 * bound
    assert _pure_point_success(256, math.floor(broken), 40, 1) >= 0.9


# --- the k-point helpers ---


def _san(points: list[int], freqs: list[float], m: int) -> PointSanitization:
    return PointSanitization(np.array(points, dtype=np.int64), np.array(freqs), m, 1.0, 1e-6, "test")


def test_kpoint_set_error_hand_value_and_brute_force() -> None:
    """x = [1,1,2,3], Est = {1: 0.6, 4: 0.1}: per-point errors +0.1, −0.25, −0.25, +0.1, so k = 1 → 0.25, k = 2 → 0.5.
    On random instances the closed form equals the max over all sets of ≤ k points; summing |errors| (broken) does not."""
    x = np.array([1, 1, 2, 3])
    san = _san([1, 4], [0.6, 0.1], 4)
    assert kpoint_set_error(x, san, 1) == pytest.approx(0.25)
    assert kpoint_set_error(x, san, 2) == pytest.approx(0.5)
    rng = np.random.default_rng(3)
    broken_differs = False
    for _ in range(30):
        x = rng.integers(0, 6, size=20)
        pts = np.sort(rng.choice(8, size=4, replace=False))
        san = _san(list(pts), list(rng.random(4) * 0.4), 20)
        freq = {v: np.mean(x == v) for v in range(8)}
        est = dict(zip(pts.tolist(), san.frequencies.tolist()))
        e = {v: est.get(v, 0.0) - freq[v] for v in range(8)}
        for k in (1, 2, 3):
            brute = max(abs(sum(e[v] for v in Y)) for r in range(1, k + 1) for Y in itertools.combinations(range(8), r))
            assert kpoint_set_error(x, san, k) == pytest.approx(brute, abs=1e-12)
            broken_differs |= not math.isclose(sum(sorted(map(abs, e.values()))[-k:]), brute, abs_tol=1e-12)
    assert broken_differs


def test_kpoint_erm_is_post_processing_of_the_sanitization() -> None:
    """ERM over |Z| ≤ k: the ≤ k points with the largest positive f̂(z,1) − f̂(z,0) (pairs 2z + y). It takes the released
    sanitization and k only: no data, no generator (so it adds no privacy cost to the audited stability histogram)."""
    # z = 3: 0.30 − 0.05; z = 5: 0.20; z = 7: 0.1 − 0.4 < 0; z = 9: 0.25
    san = _san([7, 6, 11, 15, 14, 19], [0.30, 0.05, 0.20, 0.1, 0.4, 0.25], 100)
    assert kpoint_erm(san, 2) == frozenset({3, 9})
    assert kpoint_erm(san, 3) == frozenset({3, 5, 9})
    assert kpoint_erm(san, 5) == frozenset({3, 5, 9})  # z = 7 scores negative: never added
    assert list(inspect.signature(kpoint_erm).parameters) == ["san", "k"]


# --- the packing, exactly, on the pure Laplace histogram ---


def test_laplace_histogram_packing_closed_form_against_monte_carlo() -> None:
    """d = 3, m = 40, α = 0.1, ε = 1 (c = 12 copies): P_self = (1 − e^{−2})^8 = 0.3122 by hand, and 200,000 seeded draws
    of the Laplace histogram on S_x and on S_x0 match the closed forms within 5 s.e. (false alarm < 1e-6 per check)."""
    r = laplace_histogram_packing(3, 40, 0.1, 1.0)
    assert r.copies == 12 and math.exp(r.log_self) == pytest.approx((1 - math.exp(-2)) ** 8, rel=1e-12)
    assert math.exp(laplace_interval_probability(1.0, 3.0, 2.0)) == pytest.approx(0.5 * (math.exp(-0.5) - math.exp(-1.5)), rel=1e-12)
    assert math.exp(laplace_interval_probability(-1.0, 3.0, 2.0)) == pytest.approx(1 - 0.5 * math.exp(-0.5) - 0.5 * math.exp(-1.5), rel=1e-12)
    rng = np.random.default_rng(11)
    n, t = 200_000, 4.0  # m = 40 records, αm = 4
    noise = rng.laplace(0.0, 2.0, size=(n, 8))
    s_x = np.zeros(8)
    s_x[0], s_x[1] = 12, 28  # cell 0 = x, cell 1 = x0
    s_x0 = np.zeros(8)
    s_x0[1] = 40
    good = lambda est: np.all(np.abs(est - s_x) <= t, axis=1)  # noqa: E731 - G(x): every cell within αm of S_x
    for db, log_p in ((s_x, r.log_self), (s_x0, r.log_cross)):
        p = math.exp(log_p)
        hat = float(np.mean(good(db + noise)))
        assert abs(hat - p) <= 5 * math.sqrt(p * (1 - p) / n)


def test_pure_laplace_histogram_obeys_thm416_and_its_lap_one_variant_breaks_the_chain() -> None:
    """For d = 8 … 4096: the pure histogram's exact m_90 is ≥ the Thm 4.16 bound (6.0–8.6×); at ⌊bound⌋ its success is
    e^{−134} or less; the disjoint G(x) share ≤ 1 (ln Σ ≤ 0); and P_cross ≥ e^{−εc}·P_self along the packing (ε-DP).
    Lap(1/ε) (a 2ε-DP histogram under replace-one, recompiled from the real source) breaks the last step: −42 at d = 8."""
    for d in (8, 64, 256, 1024, 4096):
        bound = point_sanitizer_lower_bound(d, 0.1, 0.1, 1.0)
        m90 = laplace_histogram_m90(d, 0.1, 0.1, 1.0)
        assert 6.0 <= m90 / bound <= 8.7
        assert laplace_histogram_packing(d, m90, 0.1, 1.0).log_self >= math.log(0.9) > laplace_histogram_packing(d, m90 - 1, 0.1, 1.0).log_self
        assert laplace_histogram_packing(d, math.floor(bound), 0.1, 1.0).log_self <= -133
    assert laplace_histogram_m90(8, 0.1, 0.1, 1.0) == 156
    mutant = mutant_namespace(plb, plb.laplace_histogram_packing, "b = 2.0 / eps", "b = 1.0 / eps")["laplace_histogram_packing"]

    def slack(fn: object, m: int) -> float:
        r = fn(8, m, 0.1, 1.0)  # type: ignore[operator]
        return float(r.log_cross - (r.log_self - 1.0 * r.copies))

    for m in range(10, 400):
        r = laplace_histogram_packing(8, m, 0.1, 1.0)
        assert r.log_sum <= 0.0 and slack(laplace_histogram_packing, m) >= 0.0
    assert min(slack(mutant, m) for m in range(10, 400)) < -40


# --- the experiment ---


def test_experiment_quick_in_process(tmp_path: Path) -> None:
    """``--quick`` in process (the same config ``ldp-sim run pure-lower-bounds --quick`` builds): the six files, readable
    figures, each bound grows ≥ 100× from 8 to 1024 bits while the approximate m_90 stays within 1.5× (POINT learner,
    POINT sanitizer, 4-POINT learner and sanitizer), any pure algorithm needs more than the approximate one at 1024
    bits (not THRESH: RecConcave's m_90 ≈ 3,300 exceeds 886 there), and the pure exponential mechanism lies above its bound."""
    from ldp.simulations import pure_lower_bounds as sim
    from ldp.simulations.reporting import captured_figures, figure_problems

    with captured_figures() as figs:
        result = sim.main(["--quick", "--out", str(tmp_path / "quick")])
    assert {p.name for p in (tmp_path / "quick").iterdir()} == set(sim.EXPERIMENT.files)
    assert [problems for _, fig in figs if (problems := figure_problems(fig))] == []
    by = {(r["task"], r["k"], r["bits"]): r for r in result.rows}
    for task, k in (("POINT learner", 1), ("POINT sanitizer", 1), ("k-POINT learner", 4), ("k-POINT sanitizer", 4)):
        lo, hi = by[(task, k, 8)], by[(task, k, 1024)]
        assert hi["pure_bound"] > 100 * lo["pure_bound"]
        assert hi["approx_m90"] <= 1.5 * lo["approx_m90"]
        assert hi["bound_over_approx"] > 1
    for task in ("POINT learner", "THRESH learner"):
        assert all(r["pure_m90"] >= r["pure_bound"] for (t, _, _), r in by.items() if t == task)
    assert all(r["log_sum_at_m90"] <= 0 and r["dp_slack_at_m90"] >= 0 and r["m90_over_bound"] > 1 for r in result.packing)
    refused = {(r["k"], r["n"]) for r in result.kpoint if r["trials"] == 0}
    assert refused == {(2, 650_000), (4, 650_000), (4, 1_900_000)}  # below SanPoints' minimum at α/k
    assert all(r["sanpoints_max_error"] <= result.config.alpha for r in result.kpoint if r["trials"])
    with pytest.raises(ParameterError, match="tasks must be among"):
        sim.run(dataclasses.replace(result.config, tasks=("CONJ learner",)))


def test_quick_run_as_a_process(tmp_path: Path) -> None:
    """The documented command ``python -m ldp.simulations.pure_lower_bounds --quick --out DIR`` as a real process."""
    from ldp.simulations import pure_lower_bounds as sim

    out = tmp_path / "quick"
    proc = subprocess.run([sys.executable, "-m", "ldp.simulations.pure_lower_bounds", "--quick", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 0, proc.stderr
    assert "Thm 4.7" in proc.stdout
    assert (out / "bounds.csv").read_text().startswith("task,k,bits,result,pure_bound")
    assert {p.name for p in out.iterdir()} == set(sim.EXPERIMENT.files)
