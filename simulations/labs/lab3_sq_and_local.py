# %% [markdown]
# # Lab 3 — SQ ↔ local: one learner, three oracles
#
# **Goals.** (1) Write a learner *once* against the statistical-query oracle SQ(g, τ)
# (KLNRS Definition 4.1) and run it on an exact oracle, a local one (users with ε-local
# randomizers, Lemma 4.3) and a trusted curator's (Laplace on sums). (2) See what the local model
# costs: users needed grow like b²·log(t/β)/(ε²τ²) locally, but only like b·t/(ε·τ) centrally.
#
# The learner: for a conjunction over {0,1}^d, a literal ℓ can be dropped iff
# Pr[ℓ false ∧ y = 1] is ≤ τ; one non-adaptive step of 2d queries at τ = α/(4d) learns to error ≤ α.

# %%
import matplotlib.pyplot as plt
import numpy as np

from ldp.core.concepts import ConjunctionConcept, ProductBernoulli, concept_class
from ldp.core.population import PopulationSpec
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.local.messages import SessionKind, Users
from ldp.local.session import Request, Session
from ldp.simulations.labs.common import QUICK, exercise, lab_result, open_oracle, out_dir, run, saved
from ldp.sq.bounds import central_users_needed, users_per_query
from ldp.sq.central_sq_oracle import CentralSQOracle
from ldp.sq.conjunction_learner import conjunction_queries, conjunction_tolerance, learn_conjunction
from ldp.sq.exact import ExactSQOracle
from ldp.sq.local_sq_oracle import LocalSQOracle

OUT = out_dir("lab3")
D, ALPHA, BETA, EPS = (3, 0.3, 0.1, 1.0) if QUICK else (4, 0.2, 0.05, 1.0)
cc = concept_class("conjunction", D)
target = ConjunctionConcept(((0, 1), (2, 0)))  # x_0 ∧ ¬x_2
tau = conjunction_tolerance(D, ALPHA)
t = 2 * D
local_n = t * users_per_query(1.0, EPS, tau, BETA, "pm_rr", queries=t)
central_n = central_users_needed(1.0, EPS, tau, BETA, queries=t)
print(f"d = {D}: {t} queries at τ = {tau:.4f}; local needs {local_n:,} users, central {central_n:,}")

# %% [markdown]
# ## 1. Same learner, three oracles

# %%
population = PopulationSpec(cc, target, local_n, budget=EPS, seed=3, distribution=ProductBernoulli(0.5))
referee = population.referee()


async def learn_everywhere():
    results = {}
    results["exact"] = await learn_conjunction(ExactSQOracle(population), D, ALPHA, BETA)
    central = PopulationSpec(cc, target, central_n, budget=EPS, seed=4, distribution=ProductBernoulli(0.5))
    results["central"] = await learn_conjunction(CentralSQOracle(central, EPS, max_queries=t, seed=5), D, ALPHA, BETA)
    async with open_oracle(population) as lr:
        local = LocalSQOracle(lr, EPS, schema=population.schema, adaptive=False)
        results["local"] = await learn_conjunction(local, D, ALPHA, BETA)
    return results


results = run(learn_everywhere())
for name, r in results.items():
    print(f"{name:>8}: hypothesis {r.hypothesis.literals}, error {referee.error(r.hypothesis):.4f} (α = {ALPHA}), user-answers {r.users:,}")
    assert referee.error(r.hypothesis) <= ALPHA

# %% [markdown]
# ## 2. Users needed against τ and ε

# %%
taus = np.geomspace(0.01, 0.2, 12)
fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
for eps, color in zip((0.5, 1.0, 2.0), ("C0", "C1", "C2")):  # one colour per ε: solid local, dashed central
    axes[0].loglog(taus, [t * users_per_query(1.0, eps, x, BETA, "pm_rr", queries=t) for x in taus], color=color, label=f"local ε={eps}")
    axes[0].loglog(taus, [central_users_needed(1.0, eps, x, BETA, queries=t) for x in taus], "--", color=color, label=f"central ε={eps}")
axes[0].set_title(f"against τ (β = {BETA})", fontsize=9)
axes[0].set_xlabel("τ")
axes[0].set_ylabel(f"users for t = {t} queries")
axes[0].legend(fontsize=7)
epsilons = np.geomspace(0.1, 4, 12)
axes[1].loglog(epsilons, [t * users_per_query(1.0, e, tau, BETA, "pm_rr", queries=t) for e in epsilons], label="local (±b RR)")
axes[1].loglog(epsilons, [t * users_per_query(1.0, e, tau, BETA, "discrete_laplace", queries=t) for e in epsilons], label="local (discrete Laplace)")
axes[1].loglog(epsilons, [central_users_needed(1.0, e, tau, BETA, queries=t) for e in epsilons], "--", label="central")
axes[1].set_title(f"against ε (τ = {tau:.4f}, β = {BETA})", fontsize=9)
axes[1].set_xlabel("ε")
axes[1].set_ylabel(f"users for t = {t} queries")
axes[1].legend(fontsize=7)
fig.tight_layout()
fig.savefig(OUT / "lab3_users_needed.png", dpi=120)
saved(OUT / "lab3_users_needed.png")
# The lab's result (ldp-sim lab 3 / ldp-sim run lab3 print it; ExperimentResult.to_json() is its JSON).
RESULT = lab_result(
    "Lab 3 — one learner, three SQ oracles",
    ("oracle", "hypothesis", "true error", "user-answers"),
    [(name, str(r.hypothesis.literals), round(referee.error(r.hypothesis), 4), r.users) for name, r in results.items()],
    notes=f"the conjunction learner at d = {D}, α = {ALPHA}, β = {BETA}, ε = {EPS}: {t} queries at τ = {tau:.4f}; "
    f"the local oracle needs {local_n:,} users, the central one {central_n:,}",
    figures=[OUT / "lab3_users_needed.png"],
)

# %% [markdown]
# ## Exercises
# 1. Measure the slope of local users against τ from simulated runs: ask one of the learner's
#    queries of R fresh groups of n users each (±b randomized response, ε = 1) for several n,
#    fit log(sd of the answers) against log n, and turn that slope s into d log n / d log τ
#    (users needed for a tolerance τ ∝ the answers' sd). Compare with the bound's slope on the
#    plot. Which term of b²·log(t/β)/(ε²τ²) does it come from? And the slope against ε?
# 2. Why can the local oracle not reuse a user for two queries here, and what would it cost to
#    do so instead (hint: `LocalSQOracle(mode="budget_split")` gives each query ε/t)?

# %%
GROUP_SIZES = [100, 400, 1_600, 6_400]  # n: users per answer
GROUPS = 100 if QUICK else 400  # R: answers (fresh groups) per n


async def answer_spread(query) -> list[float]:
    """The sd, over GROUPS fresh groups of n users, of the local answer to ``query``, per n in GROUP_SIZES.

    One round with one request per n (every user asked once, with ε): the answer of a group is
    the mean of its members' unbiased reports, as LocalSQOracle computes it.
    """
    big = PopulationSpec(cc, target, GROUPS * sum(GROUP_SIZES), budget=EPS, seed=33, distribution=ProductBernoulli(0.5))
    starts = np.cumsum([0] + [GROUPS * n for n in GROUP_SIZES])
    async with open_oracle(big) as lr:
        session = Session(lr, SessionKind.NON_INTERACTIVE, name="lab3 slope")
        spec = RandomizerSpec("pm_rr", query, EPS)
        replies = await session.round([Request(Users.range(int(a), int(a + GROUPS * n)), spec) for a, n in zip(starts, GROUP_SIZES)])
    sds = []
    for n, reply in zip(GROUP_SIZES, replies):
        unbiased = LocalRandomizer.build(reply.randomizer, big.schema).randomizer.estimate(np.asarray(reply.values, dtype=np.float64))
        sds.append(float(np.std(unbiased.reshape(GROUPS, n).mean(axis=1), ddof=1)))
    return sds


if exercise("measure the local slope against τ from simulated runs"):
    sds = run(answer_spread(conjunction_queries(D)[0]))
    s, _ = np.polyfit(np.log(GROUP_SIZES), np.log(sds), 1)
    # Each log sd from R answers has sampling sd ≈ 1/sqrt(2(R − 1)); through the least-squares fit
    # that gives the slope s a standard error σ_s, and 1/s (the slope of n against τ) σ_s/s².
    x = np.log(GROUP_SIZES)
    se_s = (1 / np.sqrt(2 * (GROUPS - 1))) / np.sqrt(np.sum((x - x.mean()) ** 2))
    measured, se = 1 / s, se_s / s**2
    formula = np.polyfit(np.log(taus), np.log([users_per_query(1.0, EPS, tau_, BETA, "pm_rr", queries=t) for tau_ in taus]), 1)[0]
    print(f"  R = {GROUPS} groups per n; sd of the answers: " + ", ".join(f"n = {n:,}: {sd:.4f}" for n, sd in zip(GROUP_SIZES, sds)))
    print(f"  measured d log sd / d log n = {s:.3f} ± {se_s:.3f}, so d log n / d log τ = {measured:.2f} ± {se:.2f}")
    print(f"  theory: −2, i.e. s = −1/2 (the 1/τ² of the bound; the bound's own slope on the plot is {formula:.2f});"
          f" tolerance: s within ±3 standard errors = ±{3 * se_s:.3f} of −1/2 (a correct simulation falls outside about 3 times in 1,000)")
    assert abs(s + 0.5) < 3 * se_s
