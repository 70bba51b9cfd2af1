"""The one-round MASKED-PARITY learners at their sufficient statistic: each group's count of
1-reports drawn from its exact law, instead of every user's record, coins and report.

Both one-round learners read their users only through counts of 1-reports:

* the fair learner (``ldp.learners.masked_parity.learn_masked_parity_lni``) through the count of
  each of its d bit groups and of the a-group of the estimated r;
* the shared learner (``ldp.learners.masked_parity_shared.learn_masked_parity_lni_shared``)
  through the count T_k of each of its K design groups and the count in the estimated r's block.

Its users hold i.i.d. records (x uniform in {0,1}^d, i uniform in [0, d), b uniform,
y = c_{r,a}(x, i, b); ``ldp.core.population``), and each answers one fixed {0,1} query g through
binary randomized response with the *realized* keep and flip probabilities p = A/2^64 and
q = B/2^64 (``BinaryRandomizedResponse``). So one user's report is Bernoulli(q + (p − q)·E[g]),
independent of every other user's, and a group of m users whose query has mean μ sends
Binomial(m, q + (p − q)μ) 1-reports. The means, over the records (KLNRS §5.1):

* bit query g_j = 1[i = j ∧ b = 1 ∧ y = −1]: μ = r_j/(2d);
* a-query of candidate r_c, 1[b = 0 ∧ y ≠ (−1)^{⟨r_c, x⟩}]: μ = a/2 if r_c = r, else ¼
  (⟨r ⊕ r_c, x⟩ is a fair coin);
* shared query of design group k and candidate block c: μ = ¼ + ⟨v^{(k)}, s⟩/(4d) plus the a-query's
  mean (the two events are disjoint), s = (−1)^r.

For the shared learner the users of a design group fall into the target's block (their own
mean) and the others (one mean): their two counts are independent binomials, T_k is their sum.
The block of an estimate r̂ ≠ r is read after T_k: given the others' count, which of them sent
the 1-reports is uniform, so the block's share of design group k is hypergeometric. Each
learner's output — the same decision functions (``lni_result``, ``shared_estimate_r``,
``shared_result``) applied to counts with the protocol's joint law — therefore has exactly the
law of the protocol's output, in O(d + K) draws per trial instead of n records, PRF calls and
reports. (The protocol and this twin are not bit-identical: the same law, other draws.)

What it is not: a protocol. No record is made, nothing is charged, no report is sent, and it
says nothing about privacy — the protocol's privacy is the sampler's (docs/privacy_audit.md).
The separation sweep uses it only for the one-round learners' cells too large to run through the
protocol in its time (``simulations/separation.py``, ``protocol_users_max``), and marks them
"(law)"; ``benchmarks/separation_cell.py`` runs any such cell through the protocol, and
tests/learners/test_masked_parity_law.py checks the twins against the protocol's law.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ldp.core.concepts import MaskedParityConcept, bits_to_int
from ldp.core.errors import ParameterError
from ldp.core.learner_result import LearnerResult
from ldp.learners.masked_parity import lni_estimate_r, lni_plan, lni_result
from ldp.learners.masked_parity_correlation import correlation_design, rr_keep_flip
from ldp.learners.masked_parity_shared import shared_estimate_r, shared_plan, shared_result

__all__ = ["learn_masked_parity_lni_from_law", "learn_masked_parity_lni_shared_from_law", "block_bounds", "block_in_design_groups"]


def block_bounds(count: int, candidates: int, c: int) -> tuple[int, int]:
    """Candidate c's users [lo, hi) (offsets from the first user) in ``user_parity_groups(count,
    candidates)``, without its 2^d + 1 boundaries (at d = 24 they are 134 MB)."""
    base, extra = divmod(int(count), int(candidates))
    return c * base + min(c, extra), (c + 1) * base + min(c + 1, extra)


def block_in_design_groups(lo: int, hi: int, groups: int) -> np.ndarray:
    """How many of the offsets lo, …, hi − 1 fall in each design group k = offset mod ``groups``."""
    k = np.arange(groups, dtype=np.int64)

    def below(x: int) -> np.ndarray:  # #{u < x : u ≡ k (mod groups)}
        return np.maximum(0, (x - k + groups - 1) // groups)

    return below(hi) - below(lo)


def _target(target: MaskedParityConcept, d: int) -> tuple[np.ndarray, int]:
    if not isinstance(target, MaskedParityConcept) or len(target.r) != d or target.a not in (0, 1):
        raise ParameterError(f"the learners' law needs a MASKED-PARITY target with d = {d} bits, got {target!r}")
    return np.asarray(target.r, dtype=np.int64), int(target.a)


def _rate(p: float, q: float, mean: np.ndarray | float) -> np.ndarray:
    """Pr[report 1] of binary RR (realized p, q) on a {0, 1} input of mean ``mean``; clipped only
    against float rounding past [0, 1]."""
    return np.clip(q + (p - q) * np.asarray(mean, dtype=np.float64), 0.0, 1.0)


def learn_masked_parity_lni_from_law(
    target: MaskedParityConcept, d: int, epsilon: float, users: int, rng: np.random.Generator, law: np.random.Generator
) -> LearnerResult:
    """The fair one-round learner (``learn_masked_parity_lni``) on ``users`` users whose data
    follow ``target``, with its counts drawn from their exact law (module docstring).

    Parameters
    ----------
    target : MaskedParityConcept
        c_{r,a}: the users' labels (the analyst never reads it; only the law does).
    d, epsilon, users :
        As ``learn_masked_parity_lni``: sized by ``lni_plan(users, d, epsilon)``.
    rng : numpy.random.Generator
        The learner's own coin (a, when the estimated r's group is empty), as in the protocol.
    law : numpy.random.Generator
        The draws that stand in for the users' records and randomized responses.

    Returns
    -------
    LearnerResult
        As the protocol's, ``details["simulation"] = "law"``.
    """
    r_true, a_true = _target(target, d)
    plan = lni_plan(int(users), d, float(epsilon))
    p, q = rr_keep_flip(epsilon)
    ones = law.binomial(plan.m_bit, _rate(p, q, r_true / (2 * d)))
    bits = (ones / plan.m_bit - q) / (p - q) if plan.m_bit else np.zeros(d)
    r = lni_estimate_r(bits)
    lo, hi = block_bounds(plan.a_users, 2**d, int(bits_to_int(r)))
    size = hi - lo if plan.a_users else 0
    a_estimate = None
    if size:
        mean = a_true / 2 if np.array_equal(r, r_true) else 0.25
        a_estimate = (int(law.binomial(size, _rate(p, q, mean))) / size - q) / (p - q)
    result = lni_result(plan, bits, r, size, a_estimate, epsilon, rng)
    return replace(result, details={**result.details, "simulation": "law"})


def learn_masked_parity_lni_shared_from_law(
    target: MaskedParityConcept, d: int, epsilon: float, users: int, rng: np.random.Generator, law: np.random.Generator
) -> LearnerResult:
    """The shared one-round learner (``learn_masked_parity_lni_shared``) on ``users`` users whose
    data follow ``target``, with its counts drawn from their exact law: per design group k, the
    target block's users and the others as two binomials; the block of a wrong estimate r̂ as the
    hypergeometric share of the others' 1-reports (module docstring). Parameters and return as
    ``learn_masked_parity_lni_from_law``."""
    r_true, a_true = _target(target, d)
    plan = shared_plan(int(users), d, float(epsilon))
    design = correlation_design(d)
    p, q = rr_keep_flip(epsilon)
    groups, total = plan.groups, plan.users
    per_group = np.full(groups, plan.m, dtype=np.int64)  # users first + k, first + k + K, …: m each
    c_true = int(bits_to_int(r_true))
    in_target = block_in_design_groups(*block_bounds(total, 2**d, c_true), groups)
    others = per_group - in_target
    s = 1 - 2 * r_true
    correlation = (design @ s) / (4 * d)  # ⟨v^{(k)}, s⟩/(4d), exact in binary floating point
    target_ones = law.binomial(in_target, _rate(p, q, 0.25 + correlation + a_true / 2))
    other_ones = law.binomial(others, _rate(p, q, 0.5 + correlation))
    correlations, r = shared_estimate_r(target_ones + other_ones, per_group, design)
    c = int(bits_to_int(r))
    if c == c_true:
        sizes, ones = in_target, int(target_ones.sum())
    else:  # r̂'s block lies among the others: the share of their 1-reports that fell in it
        sizes = block_in_design_groups(*block_bounds(total, 2**d, c), groups)
        ones = int(sum(law.hypergeometric(int(t), int(n - t), int(m)) if m else 0 for t, n, m in zip(other_ones, others, sizes)))
    result = shared_result(plan, design, correlations, r, sizes, ones, epsilon, rng)
    return replace(result, details={**result.details, "simulation": "law"})
