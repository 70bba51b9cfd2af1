# %% [markdown]
# # Lab 5 — The trusted curator: PARITY, central against local (KLNRS §3.2, Corollary 4.6)
#
# **Goals.** (1) Run the central private learner for PARITY (Algorithm A: output ⊥ w.p. 1/2,
# keep each example w.p. ε/4, solve the linear system over GF(2), output a uniform solution;
# amplified to A* by Theorem 3.8): it learns with about linearly many examples in d.
# (2) Run an honest local attempt (correlation queries (−1)^{⟨m,x⟩+y} for candidate parities m,
# Lemma 4.3): every candidate needs its own users, and there are 2^d of them. PARITY is not SQ
# learnable, hence not locally learnable (Theorem 4.8): LI ⊊ CNI.

# %%
import matplotlib.pyplot as plt
import numpy as np

from ldp.core.concepts import concept_class
from ldp.core.learner_result import true_error
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.rng import generator
from ldp.learners.parity import PackedExamples, a_star_sample_size, algorithm_a_star
from ldp.learners.parity_local import learn_parity_local
from ldp.simulations.labs.common import QUICK, exercise, lab_result, oracle_factory, out_dir, run, saved, track

OUT = out_dir("lab5")
EPS, ALPHA, BETA = 1.0, 0.1, 0.1
TRIALS = 3 if QUICK else 10
CENTRAL_D = [8, 16, 32, 64] if QUICK else [8, 16, 32, 64, 128, 256]
LOCAL_D = [4, 8, 12] if QUICK else [4, 6, 8, 10, 12, 14]
LOCAL_USERS = 100_000 if QUICK else 400_000


def population(d: int, n: int, t: int) -> PopulationSpec:
    cc = concept_class("parity", d)
    return PopulationSpec(cc, cc.random_target(generator(5, "lab5-target", d, t)), n, budget=EPS, seed=500 + t)


# %% [markdown]
# ## 1. The curator sees the records: A* with n = 60·d examples

# %%
central = {}
for d in track(CENTRAL_D, "central A*"):
    n = 60 * d
    errs = []
    for t in range(TRIALS):
        spec = population(d, n, t)
        examples = PackedExamples.from_records(generate_records(spec, 0, n))
        result = algorithm_a_star(examples, EPS, BETA, generator(5, "lab5-a-star", d, t))
        errs.append(true_error(spec.referee(), result.hypothesis))
    central[d] = (n, float(np.mean(errs)), sum(e <= ALPHA for e in errs))
    print(
        f"central A*  d = {d:>3}: n = {n:>6,}, error ≤ α in {central[d][2]}/{TRIALS} trials, mean error {central[d][1]:.3f}"
        f" (Theorem 3.8 bound: n = {a_star_sample_size(d, EPS, ALPHA, BETA):,})"
    )

# %% [markdown]
# ## 2. The users keep their records: correlation queries through local randomizers

# %%


async def local_errors():
    out = {}
    # Over gRPC one cluster of client processes serves every (d, trial) population, each loaded into it.
    async with oracle_factory() as factory:
        for d in track(LOCAL_D, "local attempt"):
            errs = []
            for t in range(TRIALS):
                spec = population(d, LOCAL_USERS, t)
                async with factory(spec) as lr:
                    result = await learn_parity_local(lr, d, EPS, generator(5, "lab5-local", d, t))
                errs.append(true_error(spec.referee(), result.hypothesis))
            out[d] = float(np.mean(errs))
            print(f"local       d = {d:>3}: n = {LOCAL_USERS:,}, mean error {out[d]:.3f}")
    return out


local = run(local_errors())

fig, ax = plt.subplots(figsize=(5.5, 3.5))
ax.semilogx(list(central), [e for _, e, _ in central.values()], "o-", base=2, label="central A* (n = 60·d)")
ax.semilogx(list(local), list(local.values()), "s-", base=2, label=f"local attempt (n = {LOCAL_USERS:,})")
ax.axhline(0.5, color="k", linestyle=":", label="1/2: a random guess")
ticks = sorted(set(central) | set(local))
ax.set_xticks(ticks, [str(d) for d in ticks])  # the d we ran, not powers of 2
ax.minorticks_off()
ax.set_xlabel("d")
ax.set_ylabel("mean true error")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(OUT / "lab5_central_vs_local.png", dpi=120)
saved(OUT / "lab5_central_vs_local.png")
# A* may fail with probability β per trial (⊥ in every iteration, or too few kept examples).
assert all(successes >= TRIALS - 1 for _, _, successes in central.values()) and local[max(LOCAL_D)] > 0.25
# The lab's result (ldp-sim lab 5 / ldp-sim run lab5 print it; ExperimentResult.to_json() is its JSON).
RESULT = lab_result(
    "Lab 5 — PARITY: central against local",
    ("model", "d", "users", "mean true error", f"trials with error ≤ α = {ALPHA}"),
    [("central A*", d, n, round(err, 3), wins) for d, (n, err, wins) in central.items()]
    + [("local attempt", d, LOCAL_USERS, round(err, 3), "") for d, err in local.items()],
    notes=f"ε = {EPS}, {TRIALS} trials each; central A*: n = 60·d examples suffice; the local attempt: the users' answers say "
    "nothing about r past small d (1/2: a guess)",
    figures=[OUT / "lab5_central_vs_local.png"],
)

# %% [markdown]
# ## Exercises
# 1. The local attempt spends n_0 users per candidate m. How many users would it need at d = 32?
# 2. Algorithm A outputs ⊥ with probability 1/2 on *every* input. Why is that coin needed for
#    privacy (Lemma 3.2)? What goes wrong on a database that no parity fits?

# %%
if exercise("users the local attempt needs at d = 32 (Lemma 4.3 with 2^d candidate queries)"):
    from ldp.learners.parity_local import parity_local_lemma43_users

    for d in (8, 16, 32):
        print(f"  d = {d:>2}: {parity_local_lemma43_users(d, EPS, BETA):.3g} users (central A*: {a_star_sample_size(d, EPS, ALPHA, BETA):,})")
