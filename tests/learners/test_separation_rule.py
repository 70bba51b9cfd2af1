"""The separation sweep's success rule, plans and headline (issue 28), without running real learners
where a stand-in of known success does: the sweep's evaluation declares a learner of success 0.90
failing at 1 − β = 0.95 (the old "≥ 19 of 20", the broken variant, passes it 39 % of the time);
learners above ``simulate_users_max`` are planned, not simulated, and marked so; the bounds in
the headline are the formulas'; the first proven d is where the bound overtakes for good."""

from __future__ import annotations

import asyncio
import contextlib
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from ldp.learners.theorem51 import binary_kl
from ldp.simulations import separation as sep
from ldp.simulations.separation_table import proven_from, separation_ratios, summarize


def _coin(p: float):  # type: ignore[no-untyped-def]
    """A stand-in for ``_Trials.run``: trial t at n users succeeds with probability p, seeded by
    (n, t) (a run is a pure function of its key, as the real ones are)."""

    async def run(self: sep._Trials, learner: str, d: int, n: int, trial: int) -> tuple[float, None]:
        ok = np.random.default_rng([n, trial, 28]).random() < p
        return (0.0 if ok else 0.5), None

    return run


@pytest.mark.parametrize(("trials", "min_successes", "most_passes"), [(100, 99, 0.05)])
async def test_a_learner_of_success_090_fails_the_sweeps_rule(monkeypatch: pytest.MonkeyPatch, trials: int, min_successes: int, most_passes: float) -> None:
    """400 sizes (independent replicates) of a learner with true success 0.90 through the sweep's
    ``_evaluate``: passes ≤ 5 % of them (exact pass probability 0.0003 at T = 100: the check
    fails by chance with probability < 10^-9). Broken variant: the old rule (19 of 20 trials)
    passes Pr[Bin(20, 0.9) ≥ 19] = 0.39 of them, well above 5 %."""
    config = sep.Config(trials=trials, out=None)
    runs = sep._Trials(config, sep.in_process_oracle)
    assert runs.rule == {**runs.rule, "clopper_pearson": True, "min_successes": min_successes}
    monkeypatch.setattr(sep._Trials, "run", _coin(0.90))
    sizes = range(1_000, 1_400)
    passed = [(await sep._evaluate(runs, "LI", 8, n))["ok"] for n in sizes]
    assert np.mean(passed) <= most_passes
    old = sep._Trials(sep.Config(trials=20, out=None), sep.in_process_oracle)
    old.rule = {**old.rule, "min_successes": 19}  # the broken variant: ≥ 19 of 20
    passed_old = [(await sep._evaluate(old, "LI", 8, n))["ok"] for n in sizes]
    assert np.mean(passed_old) > 0.25  # exact 0.392; its 400-sample standard error is 0.024
    # and a learner that is good enough does pass: success 0.999 passes 99/100 w.p. 0.995
    monkeypatch.setattr(sep._Trials, "run", _coin(0.999))
    assert np.mean([(await sep._evaluate(runs, "LI", 8, n))["ok"] for n in range(2_000, 2_100)]) > 0.9


def test_the_rule_falls_back_to_all_trials_when_they_are_too_few() -> None:
    rule = sep.success_rule(sep.Config(trials=20, out=None))
    assert not rule["clopper_pearson"] and rule["min_successes"] == 20 and rule["trials_needed"] == 59
    assert rule["lower_bound"] == pytest.approx(0.05 ** (1 / 20))
    assert sep.success_rule(sep.Config(trials=59, out=None))["min_successes"] == 59


async def test_learners_above_simulate_users_max_are_planned_and_marked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """d = 4 with simulate_users_max = 3,000: the correlation learner (plan ≈ 1,500 users) is simulated, the paper's LI and the fair LNI (plans > 3,000) are planned: they appear in the
    summary and the table as "(planned)", never as searches."""
    config = sep.Config(trials=60, seed_count=1, masked_d=(4,), learners=("LI-corr", "LI", "LNI"), simulate_users_max=3_000,
                        curve_users=(), point_bits=(), out=str(tmp_path))  # fmt: skip
    result = await sep.run(config)
    assert {r["learner"] for r in result["rows"]} == {"LI-corr"}
    planned = {e["learner"]: e for e in result["summary"] if e["source"] == "planned"}
    assert set(planned) == {"LI", "LNI"} and planned["LNI"]["users_needed"] == sep.LEARNERS["LNI"].plan(config, 4)  # type: ignore[misc]
    assert "(planned)" in result["table"] and (tmp_path / "summary.csv").read_text().count(",4,planned,") == 2
    (corr,) = result["rows"]
    assert corr["users_needed"] > corr["last_failing"] and corr["successes"] >= 59  # 60 trials: only 60/60 passes


async def test_one_round_learners_past_protocol_users_max_are_drawn_from_their_law_and_marked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """d = 4 with protocol_users_max = 3,000 and a cap of 4,000: the fair LNI (plan 6,840) draws
    its counts from their exact law (no oracle is opened for it) and is searched past the cap (no
    process holds its users); the correlation learner (plan ≈ 1,561) runs the protocol, one
    oracle per trial. The table and the per-seed rows mark the law cell "(law)". ``evaluate_cell``
    runs the law cell through the protocol unless asked for the law."""
    opened: list[int] = []

    @contextlib.asynccontextmanager
    async def factory(spec):  # type: ignore[no-untyped-def]
        opened.append(spec.size)
        async with sep.in_process_oracle(spec) as lr:
            yield lr

    config = sep.Config(trials=60, seed_count=1, masked_d=(4,), learners=("LI-corr", "LNI"), protocol_users_max=3_000, cap=4_000, curve_users=(),
                        point_bits=(), central_parity_d=(), occam_d=(), local_parity_d=(), out=str(tmp_path))  # fmt: skip
    result = await sep.run(config, factory)
    rows = {r["learner"]: r for r in result["rows"]}
    assert rows["LNI"]["simulation"] == "law" and rows["LI-corr"]["simulation"] == "protocol"
    assert rows["LNI"]["users_needed"] > config.cap >= max(opened)
    assert len(opened) == sum(e["trials"] for e in rows["LI-corr"]["evaluations"])  # every oracle opened was LI-corr's
    lni = next(e for e in result["summary"] if e["learner"] == "LNI")
    assert lni["simulation"] == "law" and f"{rows['LNI']['users_needed']:,} (law)" in result["table"]
    assert f"{rows['LI-corr']['users_needed']:,} (law)" not in result["table"]
    opened.clear()
    cell = await sep.evaluate_cell(replace(config, trials=5), factory, "LNI", 4, 3_500)
    assert cell["trials"] == 5 and opened == [3_500] * 5
    opened.clear()
    await sep.evaluate_cell(replace(config, trials=5), factory, "LNI", 4, 3_500, law=True)
    assert opened == []


def _bh(d: int) -> int:
    return math.ceil(4 * 2**d * math.log(1 / 0.2) / math.expm1(1.0) ** 2)


def test_the_headline_bounds_are_the_formulas_and_the_proof_starts_where_they_overtake() -> None:
    """Synthetic summary: the bounds recomputed here from their formulas (β = 0.05, ε = 1); the
    worst seed of the interactive learner is what the bound must exceed; "proven from" is the
    first d after which every d is proven (a d proven below an unproven one does not count)."""
    rows: list[dict[str, Any]] = [
        {"learner": "LI-corr", "family": "masked_parity", "model": "local interactive", "d": d, "seed": s, "users_needed": n, "last_failing": n // 2}
        for d, ns in ((8, (900, 1_000, 2_000)), (12, (20_000, 30_000, 40_000)), (16, (30_000, 40_000, 50_000))) for s, n in enumerate(ns)
    ]  # fmt: skip
    planned = [{"learner": "LNI", "family": "masked_parity", "model": "local non-interactive", "d": 16, "planned": 4_000_000}]
    summary = summarize(rows, planned)
    corr16 = next(e for e in summary if e["learner"] == "LI-corr" and e["d"] == 16)
    assert (corr16["users_needed"], corr16["users_min"], corr16["users_max"]) == (40_000, 30_000, 50_000)
    ratios = separation_ratios(summary, 1.0, 0.05)
    kl = 4 * 0.9 * math.log(19) / math.expm1(1.0) ** 2
    for q in ratios:
        d = q["d"]
        assert q["bounds"] == {"BH": _bh(d), "KL": math.ceil(2**d * kl), "TV": math.ceil(2**d * kl * (math.e + 1) / 2)}
        assert q["bounds"]["KL"] == math.ceil(4 * 2**d * binary_kl(0.05, 0.95) / math.expm1(1.0) ** 2)
        assert q["LI_worst"] == max(r["users_needed"] for r in rows if r["d"] == d)
    by_d = {q["d"]: q for q in ratios}
    # TV at d = 8 is 1,709 < 2,000 (not proven); d = 12: 27,340 < 40,000 (not); d = 16: 437,430 > 50,000
    assert [by_d[d]["proven"]["TV"] for d in (8, 12, 16)] == [False, False, True]
    assert proven_from(ratios) == {"BH": 16, "KL": 16, "TV": 16}
    assert by_d[16]["LNI"] == 4_000_000 and by_d[16]["LNI_source"] == "planned" and by_d[16]["ratio"] == pytest.approx(100.0)
    # a proven d below an unproven one does not start the proof
    rows[0]["users_needed"] = rows[1]["users_needed"] = rows[2]["users_needed"] = 100
    assert proven_from(separation_ratios(summarize(rows, planned), 1.0, 0.05))["TV"] == 16


def test_the_point_rows_are_judged_by_the_sweeps_rule_not_by_a_fraction() -> None:
    """The central POINT baselines pass a size by the same rule as the local rows (99 of 100 at
    β = 0.05: the Clopper–Pearson bound), not by ``pure_vs_approximate``'s own "≥ 95 of 100".
    Broken variant: the fraction rule (``point_min_successes=None``), run on the same seeded
    trials, needs fewer users: the rule's 120 against 96 for the exponential mechanism at 8 bits."""
    from ldp.simulations import pure_vs_approximate as pva

    config = sep.Config(point_bits=(8,), point_trials=100, out=None)
    rows = {r["learner"]: r for r in sep.central_point_baselines(config)}
    fraction = pva.run(pva.Config(point_bits=(8,), threshold_bits=(), alpha=config.alpha, beta=config.beta, epsilon=config.epsilon,
                                  trials=100, include_lmm=False, seed=config.seed))
    by_fraction = {r["learner"]: r["m90"] for r in fraction.rows}
    assert sep.success_rule(sep.Config(trials=100, out=None))["min_successes"] == 99
    assert rows["central-EM"]["users_needed"] > by_fraction["pure"], (rows["central-EM"], by_fraction)
    assert rows["central-Adist"]["users_needed"] >= by_fraction["A_dist"]


def test_the_table_names_the_point_rows_rule() -> None:
    """The per-search table says what the POINT rows passed by: "≥ 99 of 100" (the sweep's rule at
    their number of trials), not the fraction "≥ 95% of 100" it printed before. Broken variant:
    that old label is absent from the table, and it is not the rule."""
    config = sep.Config(learners=("central-occam",), occam_d=(4,), trials=10, point_bits=(8,), point_trials=100, curve_users=(), out=None)
    result = asyncio.run(sep.run(config))
    rule = f"≥ {sep.success_rule(sep.Config(trials=100, out=None))['min_successes']} of 100"
    point_lines = [line for line in result["table"].splitlines() if line.startswith("| point |")]
    assert len(point_lines) == 2 and all(f"| {rule} |" in line for line in point_lines), point_lines
    assert rule == "≥ 99 of 100" and "≥ 95% of 100" not in result["table"]
