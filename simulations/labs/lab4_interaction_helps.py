# %% [markdown]
# # Lab 4 — Interaction helps: MASKED-PARITY (KLNRS §5)
#
# **Goals.** (1) Run the two-round learner of §5.1 as an *interactive* local protocol: round 1
# learns r from the b = 1 half (queries g_j, E[g_j] = r_j/(2d) — the paper's "1/2^d" is a typo),
# round 2 asks one question that depends on r and learns a. (2) Run an honest *non-interactive*
# learner that must fix every question before any answer: it can only ask about a for the
# candidate r's it can afford. (3) See Theorem 5.1 exactly: against an adversarial but valid SQ
# oracle, a non-adaptive query set of size < 2^d − 1 leaves a undetermined for some targets.

# %%
import asyncio

import matplotlib.pyplot as plt
import numpy as np

from ldp.core.concepts import concept_class
from ldp.core.population import PopulationSpec
from ldp.core.rng import generator
from ldp.learners.masked_parity import learn_masked_parity_interactive, learn_masked_parity_lni_candidates
from ldp.learners.results import true_error
from ldp.learners.theorem51 import lni_query_set, theorem51_census
from simulations.labs.common import QUICK, exercise, open_oracle, out_dir, saved, track

OUT = out_dir("lab4")
D = 8
USERS = [4_000, 16_000, 64_000] if QUICK else [4_000, 16_000, 64_000, 256_000]
TRIALS = 2 if QUICK else 5
EPS = 1.0
cc = concept_class("masked_parity", D)

# %% [markdown]
# ## 1. Interactive against non-interactive, same users, same ε

# %%


async def trial(learner: str, n: int, t: int) -> float:
    target = cc.random_target(generator(4, "lab4-target", t))
    spec = PopulationSpec(cc, target, n, budget=EPS, seed=1000 + t)
    async with open_oracle(spec) as lr:
        if learner == "interactive":
            result = await learn_masked_parity_interactive(lr, D, EPS)
        else:
            result = await learn_masked_parity_lni_candidates(lr, D, EPS, generator(4, "lab4-lni", n, t))
    return true_error(spec.referee(), result.hypothesis)


async def curves():
    out = {}
    for learner in ("interactive", "non-interactive"):
        out[learner] = [float(np.mean([await trial(learner, n, t) for t in range(TRIALS)])) for n in track(USERS, learner)]
    return out


errors = asyncio.run(curves())
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
# ## 2. Theorem 5.1, exactly (d = 4)
# Fix a non-adaptive query set: the d bit queries and an a-query for K candidate r's. Run it for
# every target (r, a) against the adversarial oracle and count the targets whose a stays open.

# %%
d = 4
tau = 1 / (4 * d) * 0.9
rows = []
for k in (1, 4, 8, 15, 16):
    candidates = [tuple(int(b) for b in np.binary_repr(v, d)) for v in range(k)]
    outcomes = asyncio.run(theorem51_census(d, lni_query_set(d, candidates), tau))
    undetermined = sum(o.a_undetermined for o in outcomes)
    rows.append((k, len(outcomes), undetermined))
    print(f"K = {k:>2} candidates ({d + k} queries): a undetermined for {undetermined} of {len(outcomes)} targets")
assert rows[-1][2] == 0 and rows[0][2] > 0

# %% [markdown]
# ## Exercises
# 1. Why does the interactive learner need only ~d·n_0 users while the non-interactive one needs
#    an a-query per candidate r — 2^d of them?
# 2. From the census: how many targets stay undetermined with K candidates? (Each a-query can
#    settle a for at most one r: expect 2·(2^d − K).)

# %%
if exercise("check the census against 2·(2^d − K)"):
    for k, total, undetermined in rows:
        print(f"  K = {k:>2}: measured {undetermined}, predicted {2 * (2**d - k)}")
        assert undetermined == 2 * (2**d - k)
