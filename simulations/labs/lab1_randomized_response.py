# %% [markdown]
# # Lab 1 — Randomized response and debiasing
#
# **Goals.** (1) See an ε-local randomizer (KLNRS Definition 4.3) at work: every user flips a
# coin before answering, so no single answer means much. (2) Debias the answers into an unbiased
# estimate of a fraction. (3) Measure the estimate's spread against ε and compare it with the
# formula sd = sqrt(p·q/n)/(p − q), p = e^ε/(e^ε+1), q = 1 − p.
#
# Run headless with `python -m ldp.simulations.labs.lab1_randomized_response`, or open it as a
# notebook (jupytext / VS Code percent cells). `LDP_QUICK=1` makes it fast.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from ldp.core.audit import verify_exact
from ldp.core.query_specs import field_query
from ldp.core.randomizers import RandomizerSpec
from ldp.core.rr_mechanisms import BinaryRandomizedResponse
from ldp.local.messages import SessionKind, Users
from ldp.local.session import Request, Session
from ldp.simulations.labs.common import QUICK, exercise, lab_result, open_oracle, out_dir, run, saved, track
from ldp.simulations.randomized_response import population, referee

OUT = out_dir("lab1")
USERS = 10_000 if QUICK else 50_000
REPEATS = 100 if QUICK else 120  # the measured sd is itself an estimate: see its sampling error below
EPSILONS = [0.25, 0.5, 1.0, 2.0, 4.0]

# %% [markdown]
# ## 1. One randomizer, exactly
# The randomizer keeps the true bit with probability p = e^ε/(e^ε+1). Its privacy loss is the
# largest log-ratio log p(w|u) − log p(w|u′): the exact audit computes it over every input and output.

# %%
R = BinaryRandomizedResponse(1.0)
print(f"p(keep) = {R.keep_probability:.4f}; exact audit: {verify_exact(R)}")

# %% [markdown]
# ## 2. Many users, one round
# Each user answers once with ε; the aggregator sees only the noisy bits. For every ε we repeat
# the round R times on fresh users and take the sd of the R errors. That sd is itself an estimate:
# from R normal errors its relative sampling error is about 1/sqrt(2(R − 1)), so compare the
# measured/predicted ratio with 1 ± 2 of those, not with 1 exactly.

# %%
spec = population(USERS * REPEATS * len(EPSILONS), p=0.3, seed=1, budget=4.0)
truth = referee(spec)


async def measure():
    rows = []
    async with open_oracle(spec) as oracle:
        start = 0
        for eps in track(EPSILONS, "randomized response over ε"):
            R = BinaryRandomizedResponse(eps)
            errors = []
            for _ in range(REPEATS):
                users = Users.range(start, start + USERS)
                start += USERS
                session = Session(oracle, SessionKind.NON_INTERACTIVE, name=f"lab1 eps={eps}")
                (rep,) = await session.round([Request(users, RandomizerSpec("binary_rr", field_query("x"), eps))])
                errors.append(R.estimate(rep.values).mean() - truth(users.start, users.stop))
            p = R.keep_probability
            predicted = math.sqrt(p * (1 - p) / USERS) / (2 * p - 1)
            rows.append((eps, float(np.std(errors, ddof=1)), predicted))
    return rows


rows = run(measure())
REL_SE = 1 / math.sqrt(2 * (REPEATS - 1))  # relative sampling error of a sd estimated from REPEATS errors
print(f"n = {USERS:,} users per round, R = {REPEATS} rounds per ε: the measured sd has a sampling error of ±{REL_SE:.1%}")
print(f"{'ε':>6} {'measured sd':>12} {'± its error':>12} {'predicted sd':>13} {'measured/predicted':>19}")
for eps, measured, predicted in rows:
    print(f"{eps:>6g} {measured:>12.5f} {measured * REL_SE:>12.5f} {predicted:>13.5f} {measured / predicted:>19.2f}")
print(f"agreement: ratios within 1 ± 2·{REL_SE:.3f} = [{1 - 2 * REL_SE:.2f}, {1 + 2 * REL_SE:.2f}] (about 1 in 20 falls outside by chance)")
assert all(abs(measured / predicted - 1) < 4 * REL_SE for _, measured, predicted in rows)

# %%
fig, ax = plt.subplots(figsize=(5, 3.5))
measured = np.array([r[1] for r in rows])
ax.errorbar(EPSILONS, measured, yerr=2 * REL_SE * measured, fmt="o", capsize=3, label=f"measured sd ± 2 sampling errors (R = {REPEATS})")
grid = np.geomspace(min(EPSILONS), max(EPSILONS), 50)
p = 1 / (1 + np.exp(-grid))
ax.plot(grid, np.sqrt(p * (1 - p) / USERS) / (2 * p - 1), "-", label="sqrt(pq/n)/(p−q)")
ax.set_xscale("log")
ax.set_yscale("log")
# Explicit ticks: the ε we measured on x; 1-2-5 steps on y, as plain decimals, no minor labels.
ax.set_xticks(EPSILONS, [f"{e:g}" for e in EPSILONS])
ax.xaxis.set_minor_locator(NullLocator())
ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
ax.yaxis.set_minor_locator(NullLocator())
ax.set_xlabel("ε")
ax.set_ylabel(f"sd of the estimate, n = {USERS:,}")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(OUT / "lab1_sd_vs_epsilon.png", dpi=120)
saved(OUT / "lab1_sd_vs_epsilon.png")
# The lab's result (ldp-sim lab 1 / ldp-sim run lab1 print it; ExperimentResult.to_json() is its JSON).
RESULT = lab_result(
    "Lab 1 — the estimate's sd against ε",
    ("ε", "measured sd", "± its error", "predicted sd", "measured/predicted"),
    [(eps, round(m, 5), round(m * REL_SE, 5), round(pred, 5), round(m / pred, 3)) for eps, m, pred in rows],
    notes=f"n = {USERS:,} users per round, R = {REPEATS} rounds per ε; predicted sd = sqrt(pq/n)/(p − q), p = e^ε/(e^ε + 1); "
    f"ratios within 1 ± 2·{REL_SE:.3f} about 19 times in 20",
    figures=[OUT / "lab1_sd_vs_epsilon.png"],
)

# %% [markdown]
# ## Exercises
# 1. For small ε the sd grows like 2/(ε·sqrt(n)). Derive it from the formula (hint: p − q ≈ ε/2).
# 2. How many users does ε = 0.25 need to match the accuracy that ε = 2 reaches with n users?

# %%
if exercise("users needed at ε = 0.25 to match ε = 2 with n users"):
    def sd_factor(eps):
        p = 1 / (1 + math.exp(-eps))
        return math.sqrt(p * (1 - p)) / (2 * p - 1)

    ratio = (sd_factor(0.25) / sd_factor(2.0)) ** 2
    print(f"  n(ε=0.25) / n(ε=2) = {ratio:.1f}: the price of privacy is quadratic in 1/ε")
    assert 60 < ratio < 120
