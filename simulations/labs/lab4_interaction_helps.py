# %% [markdown]
# # Lab 4 — Interaction helps: MASKED-PARITY (KLNRS §5)
#
# **Goals.** (1) Run the two-round learner of §5.1 as an *interactive* local protocol: round 1
# learns r from the b = 1 half (queries g_j, E[g_j] = r_j/(2d) — the paper's "1/2^d" is a typo),
# round 2 asks one question that depends on r and learns a. (2) Run an honest *non-interactive*
# learner that must fix every question before any answer: it asks about a for *every* one of
# the 2^d candidate r's, spreading its users over them, and reads only the group of the r it
# estimates — so it needs about 60·2^d users at ε = 1 where the interactive one needs ~d³. (3) See Theorem 5.1 exactly: against an adversarial but valid SQ
# oracle, the candidate query sets leave a undetermined for the r's they miss — but the paper's
# "each query eliminates at most two (r, a) pairs" is false: 4 bit queries and one *bent* query
# determine every target (Parseval allows one query to separate < 1/(16τ²) r's, not one).

# %%
import matplotlib.pyplot as plt
import numpy as np

from ldp.core.concepts import concept_class
from ldp.core.learner_result import true_error
from ldp.core.population import PopulationSpec
from ldp.core.rng import generator
from ldp.learners.masked_parity import learn_masked_parity_interactive, learn_masked_parity_lni
from ldp.learners.theorem51 import (
    bent_query_set,
    lni_query_set,
    lni_users_lower_bound,
    parseval_separation_bound,
    separation_profile,
    theorem51_census,
)
from ldp.simulations.labs.common import QUICK, exercise, open_oracle, out_dir, run, saved, track

OUT = out_dir("lab4")
D = 8
USERS = [4_000, 16_000, 64_000] if QUICK else [4_000, 16_000, 64_000, 256_000]
TRIALS = 2 if QUICK else 5
EPS = 1.0
cc = concept_class("masked_parity", D)

# %% [markdown]
# ## 1. Interactive against non-interactive, same users, same ε
#
# At d = 8 expect the two to cost about the same: the one-round learner pays ≈ 60 users for each
# of the 2^d = 256 candidates, the interactive one ≈ d³ log d for the bits of r, and those are
# still comparable. The gap opens once 2^d outgrows d³: the full sweep (`make separation`,
# docs/learners.md) measures the one-round learner at 8× the interactive one at d = 16, 64× at
# d = 20 and more than 41× at d = 24.

# %%


async def trial(learner: str, n: int, t: int) -> float:
    target = cc.random_target(generator(4, "lab4-target", t))
    spec = PopulationSpec(cc, target, n, budget=EPS, seed=1000 + t)
    async with open_oracle(spec) as lr:
        if learner == "interactive":
            result = await learn_masked_parity_interactive(lr, D, EPS)
        else:
            result = await learn_masked_parity_lni(lr, D, EPS, generator(4, "lab4-lni", n, t))
    return true_error(spec.referee(), result.hypothesis)


async def curves():
    out = {}
    for learner in ("interactive", "non-interactive"):
        out[learner] = [float(np.mean([await trial(learner, n, t) for t in range(TRIALS)])) for n in track(USERS, learner)]
    return out


errors = run(curves())
for learner, errs in errors.items():
    print(f"{learner:>16}: " + "  ".join(f"n={n:,}: {e:.3f}" for n, e in zip(USERS, errs)))

fig, ax = plt.subplots(figsize=(5, 3.5))
for learner, errs in errors.items():
    ax.semilogx(USERS, errs, "o-", label=learner)
ax.axhline(0.25, color="k", linestyle=":", label="1/4: r right, a guessed")
ax.set_xticks(USERS, [f"{n:,}" for n in USERS])
ax.minorticks_off()
ax.set_xlabel("users")
ax.set_ylabel(f"mean true error (d = {D})")
ax.legend()
fig.tight_layout()
fig.savefig(OUT / "lab4_error_vs_users.png", dpi=120)
saved(OUT / "lab4_error_vs_users.png")

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
# 1. Why does the interactive learner need only ~d·n_0 users while the non-interactive one needs
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
