"""A lower bound on the users EVERY sequentially interactive ε-LDP protocol needs to learn
MASKED-PARITY_d (issue 28): Fano's inequality plus the mutual-information capacity of one ε-LDP
report.

MASKED-PARITY_d (KLNRS §5): records z = (x, i, b), x uniform in {0,1}^d, i uniform in [0, d−1],
b uniform; label c_{r,a}(z) = (−1)^{⟨r,x⟩+a} if b = 0, (−1)^{r_i} if b = 1. Every record carries
information about r: the b = 1 half one coordinate r_i, the b = 0 half a masked parity of r.

Theorem (docs/theorem51.md, "Any interactive protocol needs …"). Let α < 1/4, β ∈ (0, ½). Any
sequentially interactive ε-LDP protocol (each user reports once, through an ε-local randomizer
that may depend on every earlier report and on public randomness) whose output has error ≤ α
with probability ≥ 1 − β on every target — or on average over a uniform target — uses

    n ≥ F(d, α, β) / min(C(ε), ln 2)                                   (``li_users_lower_bound``)

users, where

* C(ε) = ln((1 − e^{−ε})/ε) + ε·e^ε/(e^ε − 1) − 1 bounds I(X; Z) for any ε-local randomizer
  X → Z and any input law (``ldp_information_capacity``; ε²/8 + O(ε⁴) at small ε, 0.1233 nats at
  ε = 1, where binary randomized response on a fair bit carries 0.1109);
* F = ln M − h(β) − β ln(M − 1), M = 2^{d+1}, when α < 1/8 + 1/(4d) (the output then names the
  target: distinct concepts are ≥ 1/4 + 1/(2d) apart, ``masked_parity_distance``); for larger
  α < 1/4, F = (1 − β)·ln(M/N) − ln 2 with N the number of concepts a successful output can leave
  open (``decoding_list_size``, the distance-based Fano inequality).

Proof in four steps: (1) success names the target (or a list of N); (2) Fano:
I(V; transcript) ≥ F for the target V uniform over the 2^{d+1} concepts; (3) chain rule over the
reports, and given the earlier reports user t's record is still drawn from P_V, so
V → X_t → Z_t is a Markov chain and I(V; Z_t | Z_{<t}) ≤ I(X_t; Z_t | Z_{<t}) ≤ C(ε) (and
≤ H(label) ≤ ln 2); (4) sum over n users. Sources: Fano's inequality (Cover & Thomas, Elements of
Information Theory, 2nd ed., Thm 2.10.1); its distance-based form (Duchi & Wainwright 2013,
"Distance-based and continuum Fano inequalities", arXiv:1311.2669, Cor. 1); the chain rule for
sequentially interactive ε-LDP protocols (Duchi, Jordan & Wainwright 2018, JASA 113(521),
§2–3); C(ε) by convexity of t ln t on each output's likelihood-ratio interval [l, l·e^ε]
(docs/theorem51.md, step 3 of this section; proved there, checked in
tests/learners/test_interactive_lower_bound.py).

What it does NOT show: the bound is Θ(d/ε²) (≈ 5.3·(d + 1) users at ε = 1), while the correlation
learner (``ldp.learners.masked_parity_correlation``) needs Θ(d² log(d/β)/ε²). Mutual information
cannot see that each record's one revealed coordinate is diluted 1/d among the d coordinates (one
report can carry almost C(ε) nats about r either way), so whether interaction can beat d² log d
stays open here, by a factor of about d·log d (docs/learners.md).
"""

from __future__ import annotations

import math

import numpy as np

from ldp.core.errors import ParameterError, require_epsilon, require_probability

__all__ = [
    "masked_parity_distance",
    "decoding_radius",
    "decoding_list_size",
    "fano_information_needed",
    "ldp_information_capacity",
    "per_report_information_bound",
    "li_users_lower_bound",
]


def _check_d(d: int, where: str) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ParameterError(f"{where}: d must be an integer ≥ 1, got {d!r}")
    return int(d)


def masked_parity_distance(d: int, hamming: int, same_a: bool) -> float:
    """Pr_z[c_{r,a}(z) ≠ c_{r',a'}(z)] under the uniform record law, from H = |r ⊕ r'| and a = a'.

    Parameters
    ----------
    d : int
        The dimension of r (d ≥ 1).
    hamming : int
        The Hamming distance between r and r', in [0, d].
    same_a : bool
        Whether a = a'.

    Returns
    -------
    float
        0 for the same concept; ½ for r = r', a ≠ a' (they disagree on the whole b = 0 half);
        ¼ + H/(2d) for r ≠ r', whatever a and a' are (the b = 0 labels are a non-constant parity
        apart, so they disagree on half of the b = 0 half; the b = 1 labels disagree where
        r_i ≠ r'_i). So distinct concepts are at least ¼ + 1/(2d) apart.

    Examples
    --------
    >>> masked_parity_distance(8, 1, same_a=True), masked_parity_distance(8, 0, same_a=False)
    (0.3125, 0.5)
    """
    d = _check_d(d, "masked_parity_distance")
    if isinstance(hamming, bool) or not isinstance(hamming, (int, np.integer)) or not 0 <= hamming <= d:
        raise ParameterError(f"masked_parity_distance: hamming must be an integer in [0, {d}], got {hamming!r}")
    if hamming == 0:
        return 0.0 if same_a else 0.5
    return 0.25 + int(hamming) / (2 * d)


def decoding_radius(d: int, alpha: float) -> int:
    """The largest Hamming distance |r ⊕ r'| between a target and a concept that an output of
    error ≤ α against the target can also be within α of.

    Parameters
    ----------
    d : int
        The dimension of r.
    alpha : float
        The error allowed, in (0, ¼).

    Returns
    -------
    int
        t = the largest H ≥ 1 with ¼ + H/(2d) ≤ 2α, or 0 when there is none (α < 1/8 + 1/(4d)):
        two concepts within α of one output are within 2α of each other (triangle inequality);
        at 2α < ½ they share a when r = r' (``masked_parity_distance``).

    Examples
    --------
    >>> decoding_radius(16, 0.1), decoding_radius(16, 0.2)
    (0, 4)
    """
    d = _check_d(d, "decoding_radius")
    a = require_probability("alpha", alpha, low=0.0, high=0.25)
    # ¼ + H/(2d) ≤ 2α  ⇔  H ≤ d(4α − ½); exact for the float α given (no rounding of the bound up).
    return max(0, min(d, math.floor(d * (4 * a - 0.5) + 1e-12)))


def decoding_list_size(d: int, alpha: float) -> int:
    """N: the most concepts (r', a') that a successful output (error ≤ α against (r, a)) can
    leave open, i.e. the concepts within 2α of the target.

    Parameters
    ----------
    d : int
        The dimension of r.
    alpha : float
        The error allowed, in (0, ¼).

    Returns
    -------
    int
        1 + 2·Σ_{k=1}^{t} C(d, k), t = ``decoding_radius(d, α)`` (both a for each r' ≠ r).

    Examples
    --------
    >>> decoding_list_size(16, 0.1), decoding_list_size(4, 0.2)
    (1, 9)
    """
    t = decoding_radius(d, alpha)
    return 1 + 2 * sum(math.comb(int(d), k) for k in range(1, t + 1))


def _binary_entropy(p: float) -> float:
    return float(-(p * math.log(p) if p > 0 else 0.0) - ((1 - p) * math.log(1 - p) if p < 1 else 0.0))


def fano_information_needed(d: int, beta: float, alpha: float = 0.1) -> float:
    """The mutual information (nats) between a uniform target (r, a) and the transcript that any
    learner with error ≤ α w.p. ≥ 1 − β must have (Fano).

    Parameters
    ----------
    d : int
        The dimension of r.
    beta : float
        The failure probability allowed, in (0, ½).
    alpha : float
        The error allowed, in (0, ¼); default 0.1 (the separation sweep's).

    Returns
    -------
    float
        With M = 2^{d+1} and N = ``decoding_list_size(d, α)``: ln M − h(β) − β·ln(M − 1) when
        N = 1 (Fano, Cover & Thomas Thm 2.10.1, with h the binary entropy in nats), else
        (1 − β)·ln(M/N) − ln 2 (Duchi & Wainwright 2013, Cor. 1). Floored at 0.

    Examples
    --------
    >>> round(fano_information_needed(24, 0.05), 4)
    16.2637
    """
    d = _check_d(d, "fano_information_needed")
    b = require_probability("beta", beta, low=0.0, high=0.5)
    n_list = decoding_list_size(d, alpha)
    log_m = (d + 1) * math.log(2)
    if n_list == 1:
        # H(V | V̂) ≤ h(Pe) + Pe·ln(M − 1), increasing in Pe on [0, 1 − 1/M] ∋ β: so Pe ≤ β suffices.
        need = log_m - _binary_entropy(b) - b * math.log(2.0 ** (d + 1) - 1)
    else:
        need = (1 - b) * (log_m - math.log(n_list)) - math.log(2)
    return max(0.0, need)


def ldp_information_capacity(epsilon: float) -> float:
    """C(ε) = ln((1 − e^{−ε})/ε) + ε·e^ε/(e^ε − 1) − 1: I(X; Z) ≤ C(ε) for every ε-local
    randomizer X → Z and every law of X.

    Parameters
    ----------
    epsilon : float
        The privacy parameter ε.

    Returns
    -------
    float
        C(ε) in nats. Proof (docs/theorem51.md): I(X; Z) = Σ_w M(w)·E_x[φ(L_x(w))] with
        φ(t) = t ln t, M the output law and L_x(w) = Q(w|x)/M(w); for each w the L_x(w) have mean 1
        and lie in [l, l·e^ε] (ε-LDP), so by convexity E_x φ ≤ the chord at 1,
        g(l) = ln l + (1 − l)·εe^ε/(e^ε − 1), maximal at l* = (1 − e^{−ε})/ε. C(ε) = ε²/8 + O(ε⁴),
        the information binary randomized response carries about a fair bit to second order.

    Examples
    --------
    >>> round(ldp_information_capacity(1.0), 6)
    0.123302
    """
    eps = require_epsilon(epsilon)
    one_minus = -math.expm1(-eps)  # 1 − e^{−ε}, exact at tiny ε and no overflow at ε = 2^10
    if eps < 1e-2:
        # The two terms cancel to ±ε/2 and ln(·) of a number near 1 loses digits (relative error
        # ≈ 10^{−16}/ε²), so use the series there: ε²/8 − ε⁴/576 + ε⁶/22680 + O(ε⁸).
        return eps**2 / 8 - eps**4 / 576 + eps**6 / 22680
    return math.log(one_minus / eps) + (eps / one_minus - 1)


def per_report_information_bound(epsilon: float) -> float:
    """min(C(ε), ln 2): the most one ε-LDP report can tell about the target of MASKED-PARITY,
    whatever was asked and whatever the earlier reports were.

    Parameters
    ----------
    epsilon : float
        The privacy parameter ε.

    Returns
    -------
    float
        Nats. ln 2 because the record's only target-dependent part is its ±1 label
        (I(V; Z) ≤ I(V; X) = I(V; y | x, i, b) ≤ ln 2); it binds from ε ≈ 2.45, where C(ε) = ln 2.

    Examples
    --------
    >>> per_report_information_bound(20.0) == math.log(2)
    True
    """
    return min(ldp_information_capacity(epsilon), math.log(2))


def li_users_lower_bound(d: int, epsilon: float, beta: float, alpha: float = 0.1) -> int:
    """Users every sequentially interactive ε-LDP protocol needs to learn MASKED-PARITY_d to
    error ≤ α with probability ≥ 1 − β: ⌈F(d, α, β) / min(C(ε), ln 2)⌉.

    Parameters
    ----------
    d : int
        The dimension of r (d ≥ 1; the paper's power-of-two d only serves to write i in bits).
    epsilon : float
        Each user's privacy parameter ε (one report per user).
    beta : float
        The failure probability allowed, in (0, ½).
    alpha : float
        The error allowed, in (0, ¼); default 0.1. Below 1/8 + 1/(4d) success names the target.

    Returns
    -------
    int
        The bound (``fano_information_needed`` over ``per_report_information_bound``; module
        docstring and docs/theorem51.md for the proof). It is Θ(d/ε²) at small ε: about
        5.3·(d + 1) users at ε = 1, β = 0.05 — far below the correlation learner's Θ(d² log d/ε²).

    Examples
    --------
    >>> [li_users_lower_bound(d, 1.0, 0.05) for d in (8, 16, 24)]
    [47, 90, 132]
    """
    need = fano_information_needed(d, beta, alpha)
    return math.ceil(need / per_report_information_bound(epsilon))
