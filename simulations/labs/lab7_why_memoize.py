# %% [markdown]
# # Lab 7 — Why Chrome memoized: the same question every day
#
# **Goals.** Chrome's RAPPOR (Erlingsson, Pihur & Korolova, CCS 2014) asks every browser the same
# question every day. (1) Watch what an aggregator learns about one user when it asks the same
# question day after day *without* memoization: every day is a fresh ε1-report, the users'
# ledger grows by ε1 a day until it refuses, and the aggregator's decoder closes in on each
# user's value. (2) Watch the same with RAPPOR's **memoization**: the user draws a *permanent*
# randomized response (PRR) once, at ε∞, and every day sends a fresh randomization of it (the
# instantaneous randomized response, IRR, ε1 a report). In ldp the PRR never leaves her side: it
# is recomputed from a secret memo key only her client holds, so the same value always gives the
# same PRR, even after a restart. Her ledger stays at ε∞, and the decoder never does
# better than one ε∞ report allows, however many days it collects. (3) See that the population's
# frequencies are estimated about as well either way, day by day.
#
# Each user holds one of k = 8 values (the 3 bits of her x, read as a number: think "which of 8
# home pages"), uniform over the 8. Both halves of the population send one ε1 = 1 report a day:
# - *without memoization*: `kary_rr` at ε1 (k-ary randomized response), a fresh coin each day;
# - *with memoization*: `l_grr` at ε∞ = 2 with ε1 = 1 (L-GRR, `ldp.core.longitudinal`: the PRR
#   is k-ary RR at ε∞, the IRR is calibrated so one report is exactly ε1-LDP).
#
# Every user's budget is 20. The ledger charges `kary_rr` ε1 per report; it charges `l_grr` ε∞ for
# a user's first report of a question and 2^-30 (the least it takes, to advance her coins) for
# every later one (docs/longitudinal.md, "What the ledger charges when the kinds are asked in rounds").

# %%
import inspect
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from ldp.core.audit import clopper_pearson, log_ratio
from ldp.core.budget import UNIT_BITS, allowance_units, charge_units
from ldp.core.concepts import concept_class
from ldp.core.frequency_oracles import support_probabilities
from ldp.core.longitudinal import MEMO_REPEAT_EPSILON, LongitudinalOracle, frequency_variance, instantaneous_response, memo_key, permanent_response
from ldp.core.population import PopulationSpec
from ldp.core.queries import make_query
from ldp.core.query_specs import prefix_index
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import RandomSource, derive_key_bytes, generator
from ldp.core.value_processes import change_probabilities, period_values, value_process
from ldp.local.messages import SessionKind
from ldp.local.oracle import LROracle
from ldp.local.session import Request, Session
from ldp.simulations.labs.common import QUICK, exercise, lab_result, open_oracle, out_dir, run, saved, track

OUT = out_dir("lab7")
DAYS = 30 if QUICK else 100  # T: the days the aggregator asks
USERS = 3_000 if QUICK else 10_000  # users per arm
BUDGET, EPS_INF, EPS_1 = 20.0, 2.0, 1.0
UNIT = 2.0**UNIT_BITS  # ledger units per ε
QUESTION = prefix_index(3, list(range(7)))  # the 3 bits of x as a number 0..7 (7 = "none of 0..6" = 111)

cc = concept_class("parity", 3)  # records (x, y) with x uniform on {0,1}^3; the label is not used
spec = PopulationSpec(cc, cc.random_target(generator(7, "lab7-target")), 3 * USERS, budget=BUDGET, seed=7)
RECORDS = spec.records(0, spec.size)  # the experiment's copy: it owns the records and measures against them


@dataclass
class Arm:
    """Users asked one question every day. The aggregator builds the randomizer from the public
    schema, to read the reports; ``values`` (each user's true value, as an index) is the
    experiment's yardstick, computed from the records, never sent."""

    name: str
    users: range
    asked: RandomizerSpec
    randomizer: Any = field(init=False)  # KaryRandomizedResponse or the memoized l_grr: .categories, .frequencies
    categories: np.ndarray = field(init=False)
    values: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.randomizer = LocalRandomizer.build(self.asked, spec.concept_class.schema).randomizer
        self.categories = np.asarray(self.randomizer.categories)
        truth = make_query(self.asked.query, spec.concept_class.schema).evaluate(RECORDS[self.users.start : self.users.stop])
        self.values = np.searchsorted(self.categories, truth)

    @property
    def k(self) -> int:
        return len(self.categories)

    def truth(self, part: slice = slice(None)) -> np.ndarray:
        """The true fraction of (a part of) the arm's users holding each value."""
        return np.bincount(self.values[part], minlength=self.k) / len(self.values[part])


MEMO = Arm("with memoization", range(0, USERS), RandomizerSpec("l_grr", QUESTION, EPS_INF, {"epsilon_1": EPS_1, "calibration": "tight"}))
PLAIN = Arm("without", range(USERS, 2 * USERS), RandomizerSpec("kary_rr", QUESTION, EPS_1))  # (users [2n, 3n): exercise 1)
K = MEMO.k
BOUND = math.exp(EPS_INF) / (math.exp(EPS_INF) + K - 1)  # Pr[PRR = v]: the best any decoder does for a uniform v
print(f"{2 * USERS:,} users, k = {K} values, budget {BUDGET:g} each; one ε1 = {EPS_1:g} report a day for {DAYS} days")
print(f"PRR bound e^ε∞/(e^ε∞ + k − 1) = {BOUND:.4f} at ε∞ = {EPS_INF:g}; one report alone: e^ε1/(e^ε1 + k − 1) = {math.exp(EPS_1) / (math.exp(EPS_1) + K - 1):.4f}")


# %% [markdown]
# ## 1. The same question, day after day
#
# Every day is one session: one round, both halves asked (30 days with `LDP_QUICK`, else 100).
# After each day the lab reads
#
# - **the ledger**: every user's spent ε, read from the users' side (the experiment asks the
#   shards out of band; the aggregator could compute it too, from what it asked and who refused);
# - **the decoder**: the aggregator's best guess of each user's value from all her reports so
#   far: the value she reported most often, ties broken at random. For both arms this is the
#   maximum-likelihood guess (the likelihood of v grows with the number of reports of v;
#   `ldp.core.longitudinal.decode_repeated` is the same rule, all days at once);
# - **the frequency estimate** of the values from that day's reports alone, and its error
#   (root mean square over the values) against the truth.

# %%
def most_reported(counts: np.ndarray, ties: np.ndarray) -> np.ndarray:
    """Each row's most reported value (index); among equals, the one with the largest ``ties``
    (uniform numbers of the aggregator's own: a tie broken uniformly at random)."""
    best = counts == counts.max(axis=1, keepdims=True)
    return np.argmax(np.where(best, ties, -1.0), axis=1)


async def ledger_units(oracle: LROracle) -> np.ndarray:
    """Every user's spent budget in exact ledger units (2^-48 ε), in user order, from the users'
    side: in process the shards' ledgers, over gRPC a ledger query to the client processes."""
    spent = oracle.ledger_spent_units()  # type: ignore[attr-defined]
    if inspect.isawaitable(spent):
        spent = await spent
    return np.asarray(spent, dtype=np.int64)


@dataclass
class Days:
    """What the lab saw of one arm, day by day."""

    spent: list[np.ndarray] = field(default_factory=list)  # ledger units of each user
    answered: list[int] = field(default_factory=list)
    correct: list[int] = field(default_factory=list)  # users the decoder got right so far
    error: list[float] = field(default_factory=list)  # RMS error of the day's frequency estimate
    reports: list[np.ndarray] = field(default_factory=list)  # each user's report (value index), −1 if none

    @property
    def accuracy(self) -> list[float]:
        return [c / len(self.spent[0]) for c in self.correct]


async def ask_every_day(arms: list[Arm], days: int, seed: int) -> dict[str, Days]:
    rng = generator(seed, "lab7-decoder")  # the aggregator's own coins, for the ties
    seen = {arm.name: Days() for arm in arms}
    counts = {arm.name: np.zeros((len(arm.users), arm.k), dtype=np.int32) for arm in arms}
    # one tie-break per user and value, drawn once: the same reports always give the same guess
    ties = {arm.name: rng.random((len(arm.users), arm.k)) for arm in arms}
    async with open_oracle(spec) as oracle:
        for day in track(range(1, days + 1), "days"):
            session = Session(oracle, SessionKind.NON_INTERACTIVE, name=f"lab7 day {day}")
            replies = await session.round([Request.of(arm.users, arm.asked) for arm in arms])
            spent = await ledger_units(oracle)
            for arm, rep in zip(arms, replies):
                got = seen[arm.name]
                who = rep.answered_users - arm.users.start
                reported = np.full(len(arm.users), -1, dtype=np.int64)
                reported[who] = np.searchsorted(arm.categories, rep.values)
                counts[arm.name][who, reported[who]] += 1
                estimate = arm.randomizer.frequencies(rep.values) if len(who) else np.full(arm.k, np.nan)
                got.spent.append(spent[arm.users.start : arm.users.stop])
                got.answered.append(len(who))
                got.correct.append(int((most_reported(counts[arm.name], ties[arm.name]) == arm.values).sum()))
                got.error.append(float(np.sqrt(np.mean((estimate - arm.truth()) ** 2))))
                got.reports.append(reported)
    return seen


def daily_sd(arm: Arm, part: slice = slice(None)) -> float:
    """RMS over the values of the sd of one day's estimate from (a part of) the arm's users:
    Var f̂_v = [f p(1 − p) + (1 − f) q(1 − q)]/(n (p − q)²), (p, q) the realized support
    probabilities of one report (for l_grr the composite channel, PRR then IRR)."""
    f, n = arm.truth(part), len(arm.values[part])
    p, q = (float(x) for x in support_probabilities(arm.randomizer))
    return float(np.sqrt(np.mean((f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * (p - q) ** 2))))


def interval(correct: int, n: int) -> str:
    lo, hi = clopper_pearson(correct, n)
    return f"[{lo:.3f}, {hi:.3f}]"


SEEN = run(ask_every_day([MEMO, PLAIN], DAYS, seed=7))
memo, plain = SEEN[MEMO.name], SEEN[PLAIN.name]
refused = [d for d, a in enumerate(plain.answered, 1) if a < USERS]
FIRST_REFUSED = refused[0] if refused else None
ANSWERED_DAYS = FIRST_REFUSED - 1 if FIRST_REFUSED else DAYS
print(f"{'':>4} │ {'ledger: mean ε spent':^21} │ {'users answered':^15} │ {'decoder accuracy':^17} │ {'RMS error of the day':^20}")
print(f"{'day':>4} │ {'memoized':>10} {'plain':>10} │ {'memoized':>8} {'plain':>6} │ {'memoized':>8} {'plain':>8} │ {'memoized':>9} {'plain':>10}")
for d in sorted({1, 2, 5, 10, ANSWERED_DAYS, DAYS} | ({FIRST_REFUSED} if FIRST_REFUSED else set())):
    i = d - 1
    print(
        f"{d:>4} │ {memo.spent[i].mean() / UNIT:>10.6f} {plain.spent[i].mean() / UNIT:>10.4f} │ {memo.answered[i]:>8,} {plain.answered[i]:>6,} │ "
        f"{memo.accuracy[i]:>8.4f} {plain.accuracy[i]:>8.4f} │ {memo.error[i]:>9.4f} {'—' if math.isnan(plain.error[i]) else f'{plain.error[i]:.4f}':>10}"
    )
print(f"predicted sd of one day's estimate (RMS over the values): memoized {daily_sd(MEMO):.4f}, plain {daily_sd(PLAIN):.4f}")
if FIRST_REFUSED:
    print(f"without memoization the ledger refuses from day {FIRST_REFUSED}: {USERS - plain.answered[FIRST_REFUSED - 1]:,} of {USERS:,} users refused"
          f" (each had spent {plain.spent[FIRST_REFUSED - 2].max() / UNIT:g} of {BUDGET:g})")
for arm in (MEMO, PLAIN):
    got = SEEN[arm.name]
    print(f"day {DAYS}, {arm.name}: decoder accuracy {got.accuracy[-1]:.4f}, 95 % interval {interval(got.correct[-1], USERS)}"
          f" (PRR bound {BOUND:.4f}); ledger {got.spent[-1].mean() / UNIT:.9f} ε")

# %% [markdown]
# ## 2. The picture
#
# Left, the ledger: the plain user pays ε1 every day until her budget is spent; the memoized user
# pays ε∞ once. Middle, the decoder: on day 1 both arms are decoded equally well (one ε1 report
# each: L-GRR's single report is *distributed exactly as* k-ary RR at ε1, so no single day tells
# the arms apart). Then the plain arm's accuracy climbs for as long as its users answer, while
# the memoized arm's stops at the PRR's bound: after enough days the decoder reads the PRR
# exactly, and the PRR is right with probability e^ε∞/(e^ε∞ + k − 1). Right, each day's
# frequency estimate: equally useful in both arms, as long as there are reports.

# %%
day = np.arange(1, DAYS + 1)
colors = {MEMO.name: "tab:blue", PLAIN.name: "tab:red"}
fig, (ax_l, ax_d, ax_f) = plt.subplots(1, 3, figsize=(13, 3.8), layout="constrained")
for arm in (MEMO, PLAIN):
    ax_l.plot(day, [s.mean() / UNIT for s in SEEN[arm.name].spent], "-", color=colors[arm.name], label=arm.name)
ax_l.axhline(BUDGET, color="k", linestyle="--", linewidth=1, label=f"budget {BUDGET:g}")
if FIRST_REFUSED:
    ax_l.axvline(FIRST_REFUSED, color="tab:red", linestyle=":", linewidth=1, label=f"refused from day {FIRST_REFUSED}")
ax_l.set_xlabel("day")
ax_l.set_ylabel("ledger: ε spent per user")
ax_l.set_ylim(0, BUDGET * 1.15)
ax_l.legend(fontsize=8, loc="center right")
for arm in (MEMO, PLAIN):
    got = SEEN[arm.name]
    band = np.array([clopper_pearson(c, USERS) for c in got.correct])
    ax_d.plot(day, got.accuracy, "-", color=colors[arm.name], label=arm.name)
    ax_d.fill_between(day, band[:, 0], band[:, 1], color=colors[arm.name], alpha=0.25, linewidth=0)
ax_d.axhline(BOUND, color="k", linestyle="--", linewidth=1, label=f"PRR bound {BOUND:.3f}")
ax_d.axhline(1 / K, color="gray", linestyle=":", linewidth=1, label=f"guessing: 1/k = {1 / K:.3f}")
ax_d.set_xlabel("day")
ax_d.set_ylabel("decoder accuracy (95 % band)")
ax_d.set_ylim(0, 1)
ax_d.legend(fontsize=8, loc="upper left")
for arm in (MEMO, PLAIN):
    ax_f.plot(day, SEEN[arm.name].error, ".", color=colors[arm.name], label=arm.name)
ax_f.axhline(daily_sd(PLAIN), color="k", linestyle="--", linewidth=1, label="predicted sd of one day")
ax_f.set_xlabel("day")
ax_f.set_ylabel("frequency estimate: RMS error")
ax_f.set_ylim(0, 3 * daily_sd(PLAIN))
ax_f.legend(fontsize=8, loc="upper right")
fig.savefig(OUT / "lab7_memoization.png", dpi=120)
saved(OUT / "lab7_memoization.png")
# The lab's result (ldp-sim lab 7 / ldp-sim run lab7 print it; ExperimentResult.to_json() is its JSON).
RESULT = lab_result(
    f"Lab 7 — the same question for {DAYS} days, with and without memoization",
    ("arm", "days answered", "ledger ε after the last day", f"decoder accuracy, day {DAYS}", "95 % interval", "PRR bound", "mean RMS error of a day"),
    [
        (
            arm.name,
            sum(a == USERS for a in SEEN[arm.name].answered),
            round(float(SEEN[arm.name].spent[-1].mean() / UNIT), 9),
            round(SEEN[arm.name].accuracy[-1], 4),
            interval(SEEN[arm.name].correct[-1], USERS),
            round(BOUND, 4),
            round(float(np.mean([e for e, a in zip(SEEN[arm.name].error, SEEN[arm.name].answered) if a])), 4),
        )
        for arm in (MEMO, PLAIN)
    ],
    notes=f"{USERS:,} users per arm, k = {K} uniform values, budget {BUDGET:g}; one ε1 = {EPS_1:g} report a day: "
    f"kary_rr (without) or l_grr at ε∞ = {EPS_INF:g} (with memoization, calibration tight); "
    f"without memoization the ledger refuses from day {FIRST_REFUSED}",
    figures=[OUT / "lab7_memoization.png"],
)

# %% [markdown]
# ## Exercises
# 1. Ask a *coarser* question with memoization: the first 2 bits of x (k = 4 values), with the
#    same ε∞ = 2 and ε1 = 1, every day for the same number of days, to fresh users. Predict the
#    decoder's accuracy on the last day before you run it, then measure it. Why can T reports of
#    one memoized value never be decoded better than one ε∞ report?
# 2. A memoized user's ledger after T days, *exactly*: what does it read in ledger units
#    (2^-48 ε)? Check your formula against the ledger. With her budget of 20, for how many days
#    could she keep answering?
# 3. Average each arm's daily frequency estimates over the days the plain arm answered. Does the
#    error of the mean of D days shrink like 1/√D in both arms? Predict each arm's error, then
#    measure it over 10 cohorts of users.
# 4. When the value *changes*: users whose values churn between days (`ldp.core.value_processes`).
#    From two reports, how often does the aggregator tell whether a user's value changed, with
#    fresh `kary_rr` reports, and with one memo shared across the change (the PRR of each value)?
#    Predict, measure, and read the exact loss of the pair (a, a) against (a, b). Why does ldp ask
#    each period as its own question?


# %%
if exercise("predict, then measure, the decoder's accuracy for k = 4 with memoization"):
    COARSE = Arm("k = 4", range(2 * USERS, 3 * USERS), RandomizerSpec("l_grr", prefix_index(2, [0, 1, 2]), EPS_INF, {"epsilon_1": EPS_1, "calibration": "tight"}))
    bound4 = math.exp(EPS_INF) / (math.exp(EPS_INF) + COARSE.k - 1)
    print(f"  predicted: e^ε∞/(e^ε∞ + k − 1) = e^2/(e^2 + 3) = {bound4:.4f} at most, whatever the number of days")
    coarse = run(ask_every_day([COARSE], DAYS, seed=8))[COARSE.name]
    sd4 = math.sqrt(bound4 * (1 - bound4) / USERS)
    print(f"  measured on day {DAYS}: {coarse.accuracy[-1]:.4f}, 95 % interval {interval(coarse.correct[-1], USERS)} ({USERS:,} users; sd ≤ {sd4:.4f})")
    print("  Why: each report is IRR(PRR), and the IRR's coins do not depend on the value v. So all T reports")
    print("  together are a function of the PRR and of coins independent of v: post-processing of one ε∞-LDP")
    print("  report, which cannot reveal more than it. For any decoder g and values v ≠ v′: Pr[g = v | v] ≤ e^ε∞ Pr[g = v | v′].")
    print("  Average over the k − 1 values v′ ≠ v, sum over v (Σ_v Pr[g = v | v′] = 1) and solve: for a uniform v,")
    print("  Pr[g right] ≤ e^ε∞/(e^ε∞ + k − 1). The most reported value reaches it: after a few days it is the PRR.")
    print(f"  It depends on ε∞ and k only: {bound4:.4f} at k = 4, {BOUND:.4f} at k = 8; not on ε1, not on T.")
    # A correct lab exceeds the bound by 4.5 sd with probability < 10^-5 (one-sided normal tail);
    # it falls 4.5 sd below it only if the decoder has not yet found the PRRs (T ≥ 30 days here).
    assert abs(coarse.accuracy[-1] - bound4) <= 4.5 * sd4, (coarse.accuracy[-1], bound4)

# %%
if exercise("the memoized ledger after T days, exactly, and how long her budget lasts"):
    first, repeat = charge_units(EPS_INF), charge_units(MEMO_REPEAT_EPSILON)
    formula = first + (DAYS - 1) * repeat
    print(f"  measured after day {DAYS}: {int(memo.spent[-1].min()):,} units for every memoized user (max {int(memo.spent[-1].max()):,})")
    print(f"  formula: ε∞ once, then 2^-30 a day: {first:,} + ({DAYS} − 1)·{repeat:,} = {formula:,} units")
    print(f"  = {formula / UNIT:.12f} ε: a little more than ε∞ = {EPS_INF:g}, far from {DAYS}·ε1 = {DAYS * EPS_1:g}")
    days_possible = 1 + (allowance_units(BUDGET) - first) // repeat
    print(f"  her budget lasts 1 + ({BUDGET:g} − {EPS_INF:g})·2^30 = {days_possible:,} days (about {days_possible / 365.25 / 1e6:.0f} million years);")
    print(f"  the plain user's: {BUDGET:g}/{EPS_1:g} = {allowance_units(BUDGET) // charge_units(EPS_1)} days, so she is refused on day {FIRST_REFUSED}")
    assert (memo.spent[-1] == formula).all() and days_possible == 1 + 18 * 2**30
    assert FIRST_REFUSED == allowance_units(BUDGET) // charge_units(EPS_1) + 1

# %%
if exercise("average D days of estimates: predict each arm's error, then measure it over 10 cohorts"):
    D, COHORTS = ANSWERED_DAYS, 10
    size = USERS // COHORTS
    # Each cohort's k estimates sum to 1: k − 1 free errors each; a RMS over m free errors has a
    # relative sampling error of about 1/sqrt(2m).
    rel = 1 / math.sqrt(2 * COHORTS * (K - 1))
    print(f"  D = {D} days, {COHORTS} cohorts of {size:,} users per arm; RMS over values and cohorts (± {rel:.0%} sampling error)")
    ratios = {}
    for arm in (MEMO, PLAIN):
        errors, variances = [], []
        for c in range(COHORTS):
            part = slice(c * size, (c + 1) * size)
            daily = [arm.randomizer.frequencies(arm.categories[r[part][r[part] >= 0]]) for r in SEEN[arm.name].reports[:D]]
            errors.append(np.mean(daily, axis=0) - arm.truth(part))
            if arm is MEMO:  # one PRR per user under all D reports: the PRR's share of the variance stays
                variances.append(frequency_variance(arm.truth(part), size, arm.randomizer.oracle, periods=D))
            else:  # D independent days
                variances.append(np.full(arm.k, daily_sd(arm, part) ** 2 / D))
        measured, predicted = float(np.sqrt(np.mean(np.square(errors)))), float(np.sqrt(np.mean(variances)))
        one_day = float(np.sqrt(np.mean([daily_sd(arm, slice(c * size, (c + 1) * size)) ** 2 for c in range(COHORTS)])))
        ratios[arm.name] = measured / predicted
        print(f"  {arm.name:>16}: one day's sd {one_day:.4f}; the mean of {D} days: predicted {predicted:.4f}"
              f" ({one_day / predicted:.1f}× smaller, 1/√D would be {math.sqrt(D):.1f}×), measured {measured:.4f} (ratio {measured / predicted:.2f})")
    print("  Without memoization the D days are independent: the variance falls as 1/D. With it, every day")
    print("  re-randomizes the same PRR: averaging removes the IRR's noise but never the PRR's, a floor of")
    print("  (p2 − q2)²·r(1 − r) per user (frequency_variance(..., periods=D)). The analyst, like the attacker,")
    print("  cannot average ε∞ away; the population's estimate each day is as good as the plain one.")
    # a correct lab: each ratio within 1 ± 4 sampling errors (about 1 in 10^4 outside)
    assert all(abs(r - 1) < 4 * rel for r in ratios.values()), ratios

# %%
if exercise("when the value changes: predict, then measure, how well two reports tell that it changed"):
    # Library level (the users' side simulated by the experiment): churn(0.5) over the lab's k
    # uniform values and days; each pair of consecutive days is one trial of "did it change?".
    process = value_process("churn", [1 / K] * K, rate=0.5)
    ids = np.arange(USERS, dtype=np.int64)
    held = period_values(process, USERS, DAYS, seed=26)  # (users, days), indices 0..k−1
    moved = held[:, 1:] != held[:, :-1]
    print(f"  churn(0.5) over k = {K} uniform values, {USERS:,} users, {DAYS} days: {moved.size:,} pairs of days,"
          f" changed {moved.mean():.4f} (exactly {change_probabilities(process, 2)[0]:.4f} = 0.5·(1 − 1/k))")
    o, source, memo_k = MEMO.randomizer.oracle, RandomSource(26), memo_key(derive_key_bytes("lab7-change", 26))
    reports = {  # each arm's report of every user on every day (value indices); each arm its own coins
        "fresh kary_rr at ε1": np.stack([np.searchsorted(PLAIN.categories, PLAIN.randomizer.sample(PLAIN.categories[held[:, t]].astype(np.float64), source.for_request("lab7/fresh", t, ids))) for t in range(DAYS)], axis=1),
        "one memo, a PRR per value": np.stack([instantaneous_response(permanent_response(memo_k, ids, held[:, t], o, "v"), source.for_request("lab7/irr memo", t, ids), o) for t in range(DAYS)], axis=1),
        "each day its own question": np.stack([instantaneous_response(permanent_response(memo_k, ids, held[:, t], o, f"v, day {t}"), source.for_request("lab7/irr daily", t, ids), o) for t in range(DAYS)], axis=1),
    }
    # Exact predictions. Every channel here is symmetric and the values uniform, so the pair's law
    # depends only on whether the two reports are equal: "equal ⇒ unchanged" is the best test, and
    # its balanced accuracy (Pr[equal | unchanged] + Pr[differ | changed])/2 the best any aggregator gets.
    (p2, q2), (ps, qs) = o.second_round(), o.support_probabilities()
    pf, qf = support_probabilities(PLAIN.randomizer)
    def equal(p: Fraction, q: Fraction) -> tuple[Fraction, Fraction]:
        """Pr[equal | unchanged], Pr[equal | changed] of two independent reports, each (p, q)."""
        return p * p + (K - 1) * q * q, 2 * p * q + (K - 2) * q * q
    exact = {"fresh kary_rr at ε1": equal(pf, qf), "one memo, a PRR per value": (p2 * p2 + (K - 1) * q2 * q2, equal(ps, qs)[1]), "each day its own question": equal(ps, qs)}
    bound2 = math.exp(2 * EPS_1) / (1 + math.exp(2 * EPS_1))
    print(f"  {'':>26} Pr[equal | unchanged]  Pr[equal | changed]  balanced accuracy of \"equal ⇒ unchanged\"")
    for name, seen in reports.items():
        eq = seen[:, 1:] == seen[:, :-1]
        rates = (float(eq[~moved].mean()), float(eq[moved].mean()))
        want = tuple(float(x) for x in exact[name])
        acc, acc_want = (rates[0] + 1 - rates[1]) / 2, (want[0] + 1 - want[1]) / 2
        print(f"  measured {name:>26}: {rates[0]:.4f} (predicted {want[0]:.4f})  {rates[1]:.4f} ({want[1]:.4f})  {acc:.4f} (predicted {acc_want:.4f})")
        # a correct lab: each proportion within 4.5 binomial sd of its exact prediction (two-sided,
        # 7·10^-6 each, 6 checks: < 5·10^-5); fresh reports never beat the 2ε1 bound
        for m, w, n in zip(rates, want, ((~moved).sum(), moved.sum())):
            assert abs(m - w) <= 4.5 * math.sqrt(w * (1 - w) / n), (name, m, w)
        assert acc_want <= bound2
    # The exact loss of the pair (a, a) against (a, b) with one memo: one PRR read twice against
    # two PRRs, both ways (tests/core/test_longitudinal.py::test_a_change_of_value_leaks_its_pattern_beyond_the_per_value_charges)
    def pair_loss(lo: LongitudinalOracle) -> tuple[float, float]:
        """max |ln Pr[r, s | a, a]/Pr[r, s | a, b]| over the report pairs, exactly; and ε_IRR."""
        (a1, b1), (a2, b2) = lo.first_round(), lo.second_round()
        def prr(y: int, v: int) -> Fraction:
            return a1 if y == v else b1
        def irr(r: int, y: int) -> Fraction:
            return a2 if r == y else b2
        m = range(lo.k)
        first, second = ([sum(prr(y, v) * irr(r, y) for y in m) for r in m] for v in (0, 1))
        ratios = [Fraction(sum(prr(y, 0) * irr(r, y) * irr(s, y) for y in m)) / (first[r] * second[s]) for r in m for s in m]
        return max(max(log_ratio(x), -log_ratio(x)) for x in ratios), log_ratio(a2 / b2)
    loss, eps_irr = pair_loss(o)
    test_loss, _ = pair_loss(LongitudinalOracle("l_grr", 16, 1.0, 0.9, "tight"))
    ratio = {name: float(exact[name][0] / exact[name][1]) for name in exact}
    print(f"  fresh reports stay under the 2ε1 bound e^2ε1/(1 + e^2ε1) = {bound2:.4f}; each day's report, alone, is ε1-LDP in every arm.")
    print(f"  One memo across the change: equal reports are {ratio['one memo, a PRR per value']:.2f}× likelier when the value stayed (fresh:")
    print(f"  {ratio['fresh kary_rr at ε1']:.2f}×, a day per question: {ratio['each day its own question']:.2f}×). Exact loss of (a, a) against (a, b): {loss:.4f} here, against")
    print(f"  charges of ε∞ = {EPS_INF:g} for (a, a) and 2ε1 = {2 * EPS_1:g} for (a, b); at k = 16, ε∞ = 1, ε1 = 0.9 it is {test_loss:.4f},")
    print("  above both (1 and 1.8): no sum of per-value charges bounds it in general, only T·ε_IRR")
    print(f"  (here 2 × {eps_irr:.4f}). So ldp asks each period as its own question: a PRR per day, charged")
    print("  ε∞ a day, whose pairs are two independent reports, as the last row measures.")
    assert test_loss > max(1.0, 2 * 0.9) and loss <= 2 * eps_irr + 1e-12
