# %% [markdown]
# # Lab 2 — Budgets and composition: the users say no
#
# **Goals.** (1) Composition (KLNRS Claim 2.1): k answers at ε_1..ε_k cost ε_1+…+ε_k. (2) In the
# local model the *user* enforces the budget (Definition 4.4): an aggregator that keeps asking is
# refused, user by user, and a refused user sends nothing and pays nothing. (3) Exact arithmetic:
# why ten charges of 0.1 do not fit in a budget of 1.0.

# %%
from fractions import Fraction

import matplotlib.pyplot as plt
import numpy as np

from ldp.core.budget import Ledger, charge_units
from ldp.core.concepts import MaskedParityConcept, concept_class
from ldp.core.population import PopulationSpec
from ldp.core.query_specs import field_query
from ldp.core.randomizers import RandomizerSpec
from ldp.local.messages import SessionKind
from ldp.local.session import Request, Session
from ldp.simulations.labs.common import QUICK, exercise, lab_result, open_oracle, out_dir, run, saved

OUT = out_dir("lab2")
USERS = 2_000 if QUICK else 20_000

# %% [markdown]
# ## 1. An over-asking aggregator
# Users have a budget ε = 1. The aggregator asks everyone the same question again and again,
# with ε = 0.3 each time, hoping to average the noise away.

# %%
spec = PopulationSpec(concept_class("masked_parity", 4), MaskedParityConcept((1, 0, 1, 1), 1), USERS, budget=1.0, seed=2)


async def over_ask(rounds=6, eps=0.3):
    answered = []
    async with open_oracle(spec) as oracle:
        session = Session(oracle, SessionKind.INTERACTIVE, name="greedy aggregator")
        for _ in range(rounds):
            (rep,) = await session.round([Request.of(range(USERS), RandomizerSpec("binary_rr", field_query("b"), eps))])
            answered.append(rep.counts())
    return answered


answered = run(over_ask())
for k, counts in enumerate(answered, 1):
    print(f"round {k}: answered {counts['answered']:>6}, refused {counts['refused']:>6}")
assert answered[3]["answered"] == 0, "the fourth request at 0.3 would exceed ε = 1"

fig, ax = plt.subplots(figsize=(6, 3), layout="constrained")
ax.bar(range(1, len(answered) + 1), [c["answered"] for c in answered], label="answered")
ax.bar(range(1, len(answered) + 1), [c["refused"] for c in answered], bottom=[c["answered"] for c in answered], label="refused")
ax.set_xlabel("round (ε = 0.3 each)")
ax.set_ylabel("users")
ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)  # outside: the bars fill the axes
fig.savefig(OUT / "lab2_refusals.png", dpi=120)
saved(OUT / "lab2_refusals.png")

# %% [markdown]
# ## 2. Exact arithmetic
# The ledger counts in units of 2^-48, rounding every charge **up** and the budget **down**.

# %%
ledger = Ledger(0, 1, 1.0)
decisions = [bool(ledger.charge(np.array([0]), 0.1).accepted[0]) for _ in range(10)]
print("ten charges of 0.1 against 1.0:", decisions)
print("the float 0.1 is exactly", Fraction(0.1), "> 1/10; one charge costs", charge_units(0.1), "units")
# The lab's result (ldp-sim lab 2 / ldp-sim run lab2 print it; ExperimentResult.to_json() is its JSON).
RESULT = lab_result(
    "Lab 2 — an over-asking aggregator",
    ("round", "answered", "refused"),
    [(k, c["answered"], c["refused"]) for k, c in enumerate(answered, 1)],
    notes=f"{USERS:,} users with a budget ε = 1 each, asked at ε = 0.3 per round; ten charges of 0.1 against 1.0: "
    f"{sum(decisions)} accepted (the ledger rounds each charge up, the budget down)",
    figures=[OUT / "lab2_refusals.png"],
)

# %% [markdown]
# ## Exercises
# 1. Which ε per question lets the aggregator ask exactly 8 times? Why is 0.125 safe and 0.1 not?
# 2. Split a budget of 1 as ε/k over k questions and average: how does the error of one estimated
#    fraction change with k? (Answer: it grows roughly like sqrt(k) — composition does not pay.)

# %%
if exercise("ask 8 times with ε = 0.125 and check nobody is refused"):
    ledger = Ledger(0, 3, 1.0)
    print("  accepted:", [bool(ledger.charge(np.arange(3), 0.125).accepted.all()) for _ in range(8)])
    assert not ledger.charge(np.arange(3), 2.0**-30).accepted.any()
