# %% [markdown]
# # Lab 4 — Interaction helps: MASKED-PARITY (KLNRS §5)
#
# **Goals.** (1) Run the sharpest *interactive* learner we have as a two-round local protocol:
# round 1 reads all of r through one *correlation* question per user, round 2 asks one question
# that depends on the r found and learns a. (2) Run the fair *non-interactive* learner, which must
# fix every question before any answer: it asks about a for *every* one of the 2^d candidate r's,
# spreading its users over them, and reads only the group of the r it estimates — so it needs
# about 60·2^d users at ε = 1 where the interactive one needs about d² log d. (3) See Theorem 5.1
# exactly: against an adversarial but valid SQ oracle, the candidate query sets leave a
# undetermined for the r's they miss — but the paper's "each query eliminates at most two (r, a)
# pairs" is false: 4 bit queries and one *bent* query determine every target (Parseval allows one
# query to separate < 1/(16τ²) r's, not one).

# %%
import matplotlib.pyplot as plt
import numpy as np

from ldp.core.audit import clopper_pearson
from ldp.core.concepts import concept_class
from ldp.core.learner_result import true_error
from ldp.core.population import PopulationSpec
from ldp.core.rng import generator
from ldp.learners.masked_parity import learn_masked_parity_lni, lni_plan, lni_users_for
from ldp.learners.masked_parity_correlation import correlation_design, correlation_plan, correlation_users_for, learn_masked_parity_correlation
from ldp.learners.theorem51 import (
    bent_query_set,
    lni_query_set,
    lni_users_lower_bound,
    parseval_separation_bound,
    separation_profile,
    theorem51_census,
)
from ldp.simulations.labs.common import QUICK, OracleFactory, exercise, lab_result, oracle_factory, out_dir, run, saved, track

OUT = out_dir("lab4")
D = 10  # where the gap shows at a lab's sizes: ≈ 12,000 users against ≈ 184,000 for 95 %
USERS = [4_000, 16_000, 64_000, 256_000]
GAP = 16_000  # the size where one learner almost always wins and the other almost never
TRIALS = 4 if QUICK else 10
EPS = 1.0
cc = concept_class("masked_parity", D)

# %% [markdown]
# ## 1. Interactive against non-interactive, same users, same ε
#
# The sharpest pair (`ldp.learners.masked_parity_correlation`, `ldp.learners.masked_parity`):
#
# - **the correlation learner** (interactive): round 1 splits its users into K groups (K = 16 at
#   d = 10); a user of group k answers, through randomized response, "does my label agree with the
#   public sign v^(k)_i at my index i?", 1[b = 1 ∧ y = v^(k)_i]. The v^(k) are columns of a
#   Hadamard matrix, so summing the groups' counts with signs v^(k)_j reads every bit r_j at once
#   from *every* round-1 user. Round 2 asks fresh users the a-question *of the r it found*.
# - **the fair one-round learner**: one round with the d bit questions and the a-question of every
#   one of the 2^d candidate r's (its users split evenly over them); it reads the group of the r
#   it estimates.
#
# Both get the same number of users (disjoint halves of one population) at the same ε = 1. Their
# plans predict their success (normal approximation, `correlation_plan`, `lni_plan`): we measure
# it over seeded trials and compare.

# %%
print(f"users for 95 % at ε = {EPS}: the correlation learner needs ≈ {correlation_users_for(D, EPS):,} at d = {D}, the one-round learner ≈ {lni_users_for(D, EPS):,}")
print(f"users each learner's plan predicts for 95 % success at ε = {EPS:g}, against d:")
print(f"{'d':>3} {'correlation (interactive)':>26} {'fair one-round':>15} {'one-round / interactive':>24}")
for d in (4, 6, 8, 10, 12, 14):
    inter, one = correlation_users_for(d, EPS), lni_users_for(d, EPS)
    print(f"{d:>3} {inter:>26,} {one:>15,} {one / inter:>23.0f}×")
print(f"round 1 at d = {D}: K = {correlation_design(D).shape[0]} groups, one public sign vector each")


async def trial(factory: OracleFactory, n: int, t: int) -> tuple[float, float]:
    """Both learners on disjoint halves of one population of 2n users: their true errors."""
    target = cc.random_target(generator(4, "lab4-target", n, t))
    spec = PopulationSpec(cc, target, 2 * n, budget=EPS, seed=1000 + t)
    async with factory(spec) as lr:  # over gRPC: the lab's one cluster of client processes, spec loaded into it
        interactive = await learn_masked_parity_correlation(lr, D, EPS, users=n, first_user=0)
        one_round = await learn_masked_parity_lni(lr, D, EPS, generator(4, "lab4-lni", n, t), users=n, first_user=n)
    referee = spec.referee()
    return true_error(referee, interactive.hypothesis), true_error(referee, one_round.hypothesis)


async def curves():
    out = {"interactive": [], "one-round": []}
    async with oracle_factory() as factory:
        for n in track(USERS, f"both learners, {TRIALS} trials per size"):
            errors = np.array([await trial(factory, n, t) for t in range(TRIALS)])
            for column, learner in enumerate(out):
                out[learner].append((int(np.sum(errors[:, column] == 0)), float(np.mean(errors[:, column]))))
    return out


measured = run(curves())
predicted = {
    "interactive": [correlation_plan(n, D, EPS).predicted_success for n in USERS],
    "one-round": [lni_plan(n, D, EPS).predicted_success for n in USERS],
}
# A success rate from T trials is uncertain: the exact 95 % Clopper–Pearson interval
# (ldp.core.audit.clopper_pearson, α = 0.025 per side) says how uncertain.
intervals = {learner: [clopper_pearson(won, TRIALS) for won, _ in points] for learner, points in measured.items()}
print(f"measured at d = {D}, ε = {EPS:g}, T = {TRIALS} seeded trials per learner and size:")
print(f"{'learner':>12} {'users n':>8} {'exact target (won/T)':>21} {'95 % interval':>15} {'predicted':>10} {'mean true error':>16}")
for learner, points in measured.items():
    for n, (won, err), (lo, hi), pred in zip(USERS, points, intervals[learner], predicted[learner]):
        print(f"{learner:>12} {n:>8,} {f'{won}/{TRIALS} = {won / TRIALS:.2f}':>21} {f'[{lo:.2f}, {hi:.2f}]':>15} {pred:>10.2f} {err:>16.3f}")
print("exact target: the fraction of trials whose hypothesis is the target; predicted: the plan's success probability;"
      " mean true error: the hypothesis's error on the population, averaged over the trials")
if QUICK:
    print(f"(quick mode: with T = {TRIALS} trials the intervals are wide; the full lab runs more trials)")
gap = USERS.index(GAP)
assert measured["interactive"][gap][0] >= 0.75 * TRIALS and measured["one-round"][gap][0] <= 0.5 * TRIALS, measured

fig, ax = plt.subplots(figsize=(5.5, 3.5))
grid = np.geomspace(min(USERS), max(USERS), 40).astype(int)
for (learner, points), color, shift in zip(measured.items(), ("C0", "C1"), (0.94, 1.06)):
    plan = correlation_plan if learner == "interactive" else lni_plan
    ax.semilogx(grid, [plan(int(n), D, EPS).predicted_success for n in grid], "-", color=color, alpha=0.6, label=f"{learner}: predicted")
    rate = np.array([won / TRIALS for won, _ in points])
    bars = np.array(intervals[learner]).T  # rows: lower, upper; the learners' bars drawn side by side (shift)
    ax.errorbar([n * shift for n in USERS], rate, yerr=[rate - bars[0], bars[1] - rate], fmt="o", capsize=3, color=color,
                label=f"{learner}: measured, {TRIALS} trials (95 % CP)")
    ax.set_xscale("log")
ax.set_xticks(USERS, [f"{n:,}" for n in USERS])
ax.minorticks_off()
ax.set_ylim(-0.05, 1.05)
ax.set_xlabel(f"users per learner (d = {D}, ε = {EPS:g})")
ax.set_ylabel("Pr[exact target]")
ax.legend(fontsize=7, loc="lower right")
fig.tight_layout()
fig.savefig(OUT / "lab4_success_vs_users.png", dpi=120)
saved(OUT / "lab4_success_vs_users.png")
# The lab's result (ldp-sim lab 4 / ldp-sim run lab4 print it; ExperimentResult.to_json() is its JSON).
RESULT = lab_result(
    f"Lab 4 — interaction helps (MASKED-PARITY, d = {D})",
    ("learner", "users per learner", "trials", "exact target", "95 % interval", "predicted success", "mean true error"),
    [
        (learner, n, TRIALS, round(won / TRIALS, 2), f"[{lo:.2f}, {hi:.2f}]", round(pred, 3), round(err, 3))
        for learner, points in measured.items()
        for n, (won, err), (lo, hi), pred in zip(USERS, points, intervals[learner], predicted[learner])
    ],
    notes=f"the correlation learner (2 rounds) against the fair one-round learner at ε = {EPS:g}; "
    f"exact target: the fraction of {TRIALS} seeded trials whose hypothesis is the target, with its exact 95 % "
    "Clopper–Pearson interval; predicted success: the learner's plan (normal approximation); "
    "mean true error: the hypothesis's error on the population, averaged over the trials; users for 95 %: "
    f"{correlation_users_for(D, EPS):,} (interactive) against {lni_users_for(D, EPS):,} (one round)",
    figures=[OUT / "lab4_success_vs_users.png"],
)

# %% [markdown]
# ## 2. Theorem 5.1, exactly (d = 4) — and where the paper goes wrong
# Fix a non-adaptive query set and run it for every target (r, a) against the strongest valid SQ
# adversary (the *midpoint* adversary: when a query's values for (r, 0) and (r, 1) are within 2τ,
# answer their midpoint — valid for both, so that query says nothing about a). Count the targets
# whose a stays open.
#
# **(a) The candidate family**: the d bit queries and an a-query for K candidate r's. An a-query
# separates (r, 0) from (r, 1) only for its own r, so a stays open for the 2(2^d − K) others.

# %%
d = 4
tau = 1 / (4 * d) * 0.9
rows = []
for k in (1, 4, 8, 15, 16):
    candidates = [tuple(int(b) for b in np.binary_repr(v, d)) for v in range(k)]
    outcomes = run(theorem51_census(d, lni_query_set(d, candidates), tau))
    undetermined = sum(o.a_undetermined for o in outcomes)
    rows.append((k, len(outcomes), undetermined))
    print(f"K = {k:>2} candidates ({d + k} queries): a undetermined for {undetermined} of {len(outcomes)} targets")
assert rows[-1][2] == 0 and rows[0][2] > 0

# %% [markdown]
# **(b) The bent family**: the paper's proof claims *every* non-adaptive query "eliminates at most
# two (r, a) pairs", so 5 queries would leave ≥ 2(2^d − 1) = 30 targets open. That is false.
# Write E_{r,a}[g] = C_g + B_g(r) + ½(−1)^a f̂_g(r): the gap between (r, 0) and (r, 1) is the
# Walsh coefficient f̂_g(r) of f_g(x) = E_i[h_g(x,i,0)], h_g = (g(·,+1) − g(·,−1))/2. For
# g_bent = 1[b = 0 ∧ y ≠ (−1)^{β(x)}], β(x) = x_0x_2 + x_1x_3 (a bent function), |f̂(r)| = 2^{−d/2−1}
# = 1/8 for EVERY r — above 2τ = 0.1125. One query separates all 16 r's.

# %%
bent_set = bent_query_set(d)  # 4 bit queries + 1 bent query
bent_outcomes = run(theorem51_census(d, bent_set, tau))
bent_open = sum(o.a_undetermined for o in bent_outcomes)
exact = sum(o.version_space == (o.target,) for o in bent_outcomes)
profile = separation_profile(d, bent_set)
print(f"bit queries + bent query ({len(bent_set)} queries): a undetermined for {bent_open} of {len(bent_outcomes)} targets")
print(f"  targets learned exactly: {exact} of {len(bent_outcomes)}; the paper's counting predicts ≥ {2 * (2**d - 1)} open")
print(f"  bent query: |f̂(r)| = {np.abs(profile.fourier[-1]).min():.4f} for every r (2τ = {2 * tau:.4f})")
assert bent_open == 0 and exact == len(bent_outcomes)

# %% [markdown]
# **Why: Parseval.** Σ_r f̂_g(r)² = E_x[f_g(x)²] ≤ ‖h_g‖∞² ≤ 1/4 for a query with values in [0,1],
# and separating r needs |f̂_g(r)| > 2τ: one query separates *fewer than 1/(16τ²)* vectors r
# (`parseval_separation_bound`), not one. The a-queries put all their weight on one r; the bent
# query spreads it evenly and meets the bound. So a non-adaptive learner needs q > 16τ²·2^d queries
# (vacuous at the paper's τ = 2^{−2d/3} for d > 12: at d = 16, 17 queries with τ = 9·10^{−4} learn
# every target). In the local model the exponential gap survives, proved directly: a
# non-interactive ε-LDP learner needs n ≥ 4·2^d·ln(1/(4β))/(e^ε − 1)² users (docs/theorem51.md).

# %%
print(f"Parseval: one [0,1] query separates at most {parseval_separation_bound(tau)} r's at τ = {tau}")
print(f"non-interactive local learners need n ≥ {lni_users_lower_bound(D, EPS, 0.05):,} users at d = {D}, ε = {EPS}, β = 0.05")

# %% [markdown]
# ## Exercises
# 1. Why does the interactive learner need only ~d² log d users while the non-interactive one needs
#    an a-query per candidate r — 2^d of them? (And why can't it use one bent-like query instead?
#    Hint: its answer must be estimated from noisy reports to within 2^{−d/2−2}.)
# 2. From the census (a): how many targets stay undetermined with K candidates? (Each *a-query*
#    settles a for exactly one r: expect 2·(2^d − K). This is a property of the a-queries, not a
#    law for every query — see (b).)
# 3. For the bent query, count the r it separates at several τ and compare with the Parseval bound
#    1/(16τ²). Where does it stop separating anything, and why is the bound attained there?

# %%
if exercise("check the census against 2·(2^d − K)"):
    for k, _total, undetermined in rows:
        print(f"  K = {k:>2}: measured {undetermined}, predicted {2 * (2**d - k)}")
        assert undetermined == 2 * (2**d - k)

# %%
if exercise("count the r's the bent query separates against the Parseval bound 1/(16τ²)"):
    edge = 2.0 ** (-d / 2 - 2)  # |f̂| = 2^{−d/2−1} > 2τ iff τ < 2^{−d/2−2} = 1/16
    for t in (0.02, 0.05, tau, edge * 0.999, edge, 0.1):
        count = int(profile.separated(t)[-1].sum())
        bound = parseval_separation_bound(t)
        print(f"  τ = {t:.5f}: bent separates {count:>2} of {2**d} r's; Parseval allows < 1/(16τ²) = {1 / (16 * t * t):7.2f}, i.e. ≤ {bound}")
        assert count <= bound
    assert int(profile.separated(edge * 0.999)[-1].sum()) == parseval_separation_bound(edge * 0.999) == 2**d
