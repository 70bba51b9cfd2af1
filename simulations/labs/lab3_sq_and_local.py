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
from ldp.simulations.labs.common import QUICK, exercise, lab_result, open_oracle, out_dir, run, saved
from ldp.sq.bounds import central_users_needed, users_per_query
from ldp.sq.central_sq_oracle import CentralSQOracle
from ldp.sq.conjunction_learner import conjunction_tolerance, learn_conjunction
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
# 1. From the plot, read the slope of local users against τ and against ε. Which term of
#    b²·log(t/β)/(ε²τ²) does each slope come from?
# 2. Why can the local oracle not reuse a user for two queries here, and what would it cost to
#    do so instead (hint: `LocalSQOracle(mode="budget_split")` gives each query ε/t)?

# %%
if exercise("measure the local slope against τ"):
    ns = [users_per_query(1.0, EPS, x, BETA, "pm_rr", queries=t) for x in taus]
    slope = np.polyfit(np.log(taus), np.log(ns), 1)[0]
    print(f"  slope d log n / d log τ = {slope:.2f} (theory: −2)")
    assert -2.2 < slope < -1.8
