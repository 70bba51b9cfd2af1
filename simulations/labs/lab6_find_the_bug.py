# %% [markdown]
# # Lab 6 — Find the privacy bug
#
# **Goals.** A randomizer's privacy claim is a statement about numbers we can check. Here is
# unary encoding (each user sends a k-bit vector, bit u kept as 1 with probability p, every other
# bit set to 1 with probability q): with p = 1/2, q = 1/(e^ε + 1) it is ε-local ("OUE",
# Wang et al. 2017). A colleague's version keeps the true bit with the *wrong* probability.
# Expose it twice: with the exact audit (from the declared probabilities) and with the
# statistical audit (from samples alone, as if you could not read the code).

# %%
import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from ldp.core.audit import epsilon_lower_bound
from ldp.core.rng import RandomSource
from ldp.simulations.labs.common import QUICK, exercise, lab_result, out_dir, saved

OUT = out_dir("lab6")
N = 50_000 if QUICK else 400_000
ALPHA = 1e-6


@dataclass(frozen=True)
class UnaryEncoding:
    """Optimized unary encoding over k categories: report bit j = 1 w.p. p if j = u, q otherwise."""

    epsilon: float
    k: int
    keep: float | None = None  # None: the correct p = 1/2

    @property
    def p(self) -> float:
        return 0.5 if self.keep is None else self.keep

    @property
    def q(self) -> float:
        return 1.0 / (math.exp(self.epsilon) + 1.0)

    def sample(self, u: np.ndarray, seed: int) -> np.ndarray:
        n = len(u)
        randomness = RandomSource(seed).for_request("lab6", 1, np.arange(n))
        coins = np.stack([randomness.uniform(j) for j in range(self.k)], axis=1)
        threshold = np.where(np.arange(self.k)[None, :] == u[:, None], self.p, self.q)
        return (coins < threshold).astype(np.uint8)

    def log_prob(self, u: int, w: np.ndarray) -> float:
        probs = np.where(np.arange(self.k) == u, self.p, self.q)
        return float(np.sum(np.where(w == 1, np.log(probs), np.log1p(-probs))))

    def exact_max_log_ratio(self) -> float:
        """Enumerate all inputs pairs and all 2^k outputs."""
        outputs = ((np.arange(2**self.k)[:, None] >> np.arange(self.k)) & 1).astype(np.uint8)
        logp = np.array([[self.log_prob(u, w) for w in outputs] for u in range(self.k)])
        return float((logp.max(axis=0) - logp.min(axis=0)).max())


EPS, K = 1.0, 4
honest = UnaryEncoding(EPS, K)
buggy = UnaryEncoding(EPS, K, keep=0.6)  # "keep the true bit a bit more often: more accurate!"

# %% [markdown]
# ## 1. The exact audit
# The exact audit enumerates every pair of inputs and all 2^k outputs and reports the largest
# log-ratio log p(w|u) − log p(w|u′). Here it is on the *honest* randomizer; auditing the
# colleague's version is exercise 1.

# %%
def verdict(loss: float) -> str:
    """OK when the exact loss is within the declared ε (up to float rounding), else VIOLATION."""
    return "OK" if loss <= EPS * (1 + 1e-12) else "VIOLATION"


honest_loss = honest.exact_max_log_ratio()
print(f"honest: max log-ratio {honest_loss:.4f} vs declared ε = {EPS} → {verdict(honest_loss)}")

# %% [markdown]
# ## 2. The statistical audit (black box)
# Distinguishing event for inputs u = 0 vs u′ = 1: "bit 0 is 1 and bit 1 is 0". Count it in N
# reports from each input; the Clopper–Pearson bounds give a lower confidence bound on ε that
# exceeds the true loss with probability at most α = 1e-6.

# %%
def audit(R, seed=3):
    w0 = R.sample(np.zeros(N, dtype=np.int64), seed)
    w1 = R.sample(np.ones(N, dtype=np.int64), seed + 1)
    event = lambda w: (w[:, 0] == 1) & (w[:, 1] == 0)  # noqa: E731
    return epsilon_lower_bound(int(event(w0).sum()), int(event(w1).sum()), N, ALPHA)


results = {name: audit(R) for name, R in [("honest", honest), ("buggy", buggy)]}
for name, lcb in results.items():
    print(f"{name:>6}: ε_lcb = {lcb:.3f} (declared {EPS}) → {'flagged' if lcb > EPS else 'not flagged'}")
assert results["buggy"] > EPS >= results["honest"]

fig, ax = plt.subplots(figsize=(4.5, 3))
ax.bar(list(results), list(results.values()))
ax.axhline(EPS, color="k", linestyle="--", label="declared ε")
ax.set_xlabel(f"randomizer (N = {N:,} reports per input)")
ax.set_ylabel("ε lower confidence bound")
ax.legend()
fig.tight_layout()
fig.savefig(OUT / "lab6_audit.png", dpi=120)
saved(OUT / "lab6_audit.png")
# The lab's result (ldp-sim lab 6 / ldp-sim run lab6 print it; ExperimentResult.to_json() is its JSON).
# The black-box audit only: the buggy randomizer's exact loss is exercise 1's answer, and the
# result is printed whether or not the solutions are shown.
RESULT = lab_result(
    "Lab 6 — two randomizers audited (black box)",
    ("randomizer", f"ε lower bound (N = {N:,}, α = {ALPHA:g})", "verdict"),
    [(name, round(results[name], 3), "flagged" if results[name] > EPS else "not flagged") for name in ("honest", "buggy")],
    notes=f"two unary encodings (k = {K}) that declare ε = {EPS}; the honest one's exact max log-ratio is {honest_loss:.4f}; "
    "the black-box bound exceeds the true loss with probability ≤ α",
    figures=[OUT / "lab6_audit.png"],
)

# %% [markdown]
# ## Exercises
# 1. Audit the colleague's version exactly: is it ε-local for the ε it declares? What is its true
#    ε? Derive it in closed form from p and q (which output w and which pair u, u′ give the
#    largest ratio?) and check your formula against the exact audit.
# 2. How small can N be before the statistical audit stops catching it at α = 1e-6?

# %%
if exercise("audit the buggy randomizer exactly and compute its true privacy loss"):
    buggy_loss = buggy.exact_max_log_ratio()
    print(f"  buggy: max log-ratio {buggy_loss:.4f} vs declared ε = {EPS} → {verdict(buggy_loss)}")
    # The worst output sets bit u and clears bit u′: its ratio is [p(1 − q)]/[q(1 − p)] (the other
    # k − 2 bits cancel). With p = 1/2 that is (1 − q)/q = e^ε; with p = 0.6 it is larger.
    p, q = buggy.p, buggy.q
    true_eps = math.log(p * (1 - q) / (q * (1 - p)))
    print(f"  true ε = ln(p(1−q)/(q(1−p))) with p = {p}, q = 1/(e^ε + 1) = {q:.4f}: {true_eps:.4f}")
    assert abs(true_eps - buggy_loss) < 1e-9 and verdict(buggy_loss) == "VIOLATION"
