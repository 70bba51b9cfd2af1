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
audit = verify_exact(R)
u, u_prime, w = audit.argmax  # where the largest ratio p(w|u)/p(w|u′) is attained
print(f"binary randomized response at ε = {audit.epsilon:g}: keeps the true bit with p = {R.keep_probability:.4f}")
print(f"  largest privacy loss ln p(w|u)/p(w|u′) = {audit.max_log_ratio:.4f}, at report w = {w:g} for input u = {u:g} against u′ = {u_prime:g}")
print(f"  exact audit ({audit.method}): {'passed' if audit.passed else 'FAILED'} — the loss is {'within' if audit.within_epsilon else 'above'} ε = {audit.epsilon:g}")

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
# 1. For small ε the sd grows like 1/(ε·sqrt(n)). Derive it from the formula (hints: p ≈ 1/2 + ε/4,
#    so p·q ≈ 1/4 and p − q ≈ ε/2), and check it against the predicted sd in the table at ε = 0.25.
# 2. How many users does ε = 0.25 need to match the accuracy that ε = 2 reaches with n users?
#    The small-ε rule says (2/0.25)² = 64 times as many. Is that right? If not, why not?


# %%
def sd_factor(eps: float) -> float:
    """sqrt(n) × the estimate's sd: sqrt(p·q)/(p − q), p = e^ε/(e^ε + 1), q = 1 − p."""
    p = 1 / (1 + math.exp(-eps))
    return math.sqrt(p * (1 - p)) / (2 * p - 1)


if exercise("derive the small-ε rule and check it at ε = 0.25"):
    # p = 1/(1 + e^−ε) = 1/2 + ε/4 + O(ε³): p·q = 1/4 − (ε/4)² ≈ 1/4, p − q = 2p − 1 ≈ ε/2,
    # so sd = sqrt(pq/n)/(p − q) ≈ (1/2)/(ε/2)/sqrt(n) = 1/(ε·sqrt(n)).
    n = USERS
    exact_sd, rule = sd_factor(0.25) / math.sqrt(n), 1 / (0.25 * math.sqrt(n))
    print(f"  at ε = 0.25, n = {n:,}: sqrt(pq/n)/(p − q) = {exact_sd:.5f}, 1/(ε·sqrt(n)) = {rule:.5f} ({rule / exact_sd - 1:+.1%})")
    assert abs(rule / exact_sd - 1) < 0.01

# %%
if exercise("users needed at ε = 0.25 to match ε = 2 with n users"):
    # Exactly, sd_factor(ε)² = p·q/(p − q)² = e^ε/(e^ε − 1)² = 1/(4·sinh²(ε/2)): the small-ε rule
    # 1/ε² is its first term, good at ε = 0.25 but not at ε = 2, where 4·sinh²(1) = 5.52 > ε² = 4.
    ratio = (sd_factor(0.25) / sd_factor(2.0)) ** 2
    exact = (math.exp(0.25) / (math.exp(0.25) - 1) ** 2) / (math.exp(2.0) / (math.exp(2.0) - 1) ** 2)
    print(f"  n(ε=0.25) / n(ε=2) = sd²(0.25)/sd²(2) = {ratio:.1f}, not (2/0.25)² = 64:")
    print("  the exact variance factor is p·q/(p − q)² = e^ε/(e^ε − 1)² = 1/(4·sinh²(ε/2)):")
    for eps in (0.25, 2.0):
        print(f"    ε = {eps:g}: e^ε/(e^ε − 1)² = {sd_factor(eps) ** 2:.4f}, the small-ε rule 1/ε² = {1 / eps**2:.4f}")
    print(f"  1/ε² is right at ε = 0.25 but overstates the variance at ε = 2 by {(1 / 4) / sd_factor(2.0) ** 2:.2f}×"
          f" (ε = 2 is not small): the ratio is {sd_factor(0.25) ** 2:.3f}/{sd_factor(2.0) ** 2:.4f} = {ratio:.1f}, not 16/0.25 = 64")
    assert abs(ratio - exact) < 1e-9 and 85 < ratio < 90
