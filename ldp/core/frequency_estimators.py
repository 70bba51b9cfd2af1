"""Frequency estimators beside matrix inversion: Iterative Bayesian Update, the closed-form MLE of
randomized-response-type channels, and the consistency post-processing of Wang et al. (2020).

Everything here is post-processing of what the aggregator already holds (the reports' support
counts, or equivalently the unbiased matrix-inversion estimate), so none of it costs privacy.
Every function is pure and deterministic (no randomness, a fixed iteration order).

The channel. A frequency oracle's report *supports* categories with realized probabilities
(p*, q*) (``ldp.core.frequency_oracles.support_probabilities``). Its matrix-inversion (MI)
estimate is f̂ = (C/n − q*)/(p* − q*) (``frequency_estimates``: the one MI, called here, never
rewritten). From f̂ the support fractions come back as C/n = q* + (p* − q*)·f̂, and their
normalization ô = C/ΣC satisfies, in expectation, ô = A·f with the k × k *symmetric channel*

    A[y, v] = p′ if y = v else q′,    p′ = p*/(p* + (k − 1)q*),  q′ = q*/(p* + (k − 1)q*),

column-stochastic (p′ + (k − 1)q′ = 1). For k-ary randomized response (GRR) this is exactly
its transition matrix (``rr_cells``: A + (k − 1)B = 2^64, so p* + (k − 1)q* = 1) and ô is the
histogram of the reports: the likelihood below is the exact multinomial one. For the other oracles
(OUE, SUE, OLH, Hadamard Response, Subset Selection) a report supports several categories, and the
same formula is the *pseudo-likelihood* of multi-freq-ldpy (Arcolezi et al.; reference §3.2): its
fixed point is consistent (E ô = A f) but it is not the likelihood of the bit vectors themselves.

Estimators (``ESTIMATORS``, chosen by name with ``estimator_spec`` / ``estimate``):

- ``mi``  matrix inversion, unbiased, may be negative and need not sum to 1 (Wang, Blocki, Li &
  Jha 2017).
- ``ibu``  Iterative Bayesian Update (Agrawal & Aggarwal, PODS 2001; ElSalamouny & Palamidessi,
  EuroS&P 2020; used for LDP by Arcolezi et al.): EM for the multinomial likelihood of ô,
  θ^{t+1}_v = θ^t_v · Σ_y ô_y A[y, v] / (A θ^t)_y from θ^0 uniform, stopped when
  max_v |θ^{t+1}_v − θ^t_v| < tol (default 1e-12) or after max_iter (default 10 000)
  iterations, whichever comes first (``ibu_run`` says which). Iterates stay on the simplex.
  Accelerated by SQUAREM (Varadhan & Roland 2008) to the same fixed point (``ibu_run``).
- ``mle``  the maximum of Σ_y ô_y ln(q′ + (p′ − q′)θ_y) over the simplex, in closed form
  (``mle_symmetric``; the KKT derivation is in its docstring). multi-freq-ldpy's helper cites
  Pinzón et al., "Estimating the true distribution of data collected with randomized response"
  (AAAI); the reference marks that citation (verify). We could not read that paper here, so the
  formula rests on our own derivation, checked by a brute-force grid argmax of the likelihood
  in tests/core/test_frequency_estimators.py, not on the citation.
- Consistency post-processing (Wang, Lopuhaä-Zwakenberg, Li, Škorić & Li, "Locally
  differentially private frequency estimation with consistency", NDSS 2020, arXiv 1905.08320),
  applied to the MI estimate: ``base_pos``, ``norm``, ``norm_mul``, ``norm_cut``, ``norm_sub``,
  and the two with a significance threshold θ = Φ⁻¹(1 − α/k)·σ (``cut_threshold``), which need the
  number of reports n: ``base_cut`` and ``norm_hyb`` (the latter from the authors' code);
  ``post_pos`` clips *query answers* (subset sums), not the vector, so it is a function of the
  queries (``post_pos``) and not a vector estimator: on one-category queries it is ``base_pos``.

``norm_sub`` *is* ``project_simplex`` (``ldp.core.frequency_oracles``): Norm-Sub is
f′ = max(f̂ + δ, 0) with the scalar δ making Σf′ = 1, and the Euclidean projection onto the simplex
has exactly that form, max(f̂ − τ, 0) (Duchi et al. 2008); Σ max(f̂ + δ, 0) is strictly increasing
in δ wherever it is positive, so δ = −τ is the same number. ``norm_sub`` calls ``project_simplex``.
The authors' code (vvv214/LDP_Protocols, post-process/norm_sub.py) iterates "zero the negatives,
add the missing mass to the positive ones"; it agrees with the projection whenever
Σ max(f̂, 0) ≥ 1 (always for GRR, whose MI estimate sums to 1), and differs otherwise (it never
lifts an entry it zeroed): we follow the paper's definition.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import Protocol

import numpy as np

from ldp.core.errors import ParameterError
from ldp.core.frequency_oracles import frequency_estimates, project_simplex, support_probabilities
from ldp.core.randomizer_base import Randomizer

__all__ = [
    "SymmetricChannel",
    "IBUResult",
    "EstimatorSpec",
    "EstimatorCompute",
    "ESTIMATORS",
    "IBU_TOL",
    "IBU_MAX_ITER",
    "BASE_CUT_ALPHA",
    "symmetric_channel",
    "channel_of",
    "observed_distribution",
    "ibu",
    "ibu_run",
    "mle_symmetric",
    "base_pos",
    "post_pos",
    "norm",
    "norm_mul",
    "norm_cut",
    "norm_sub",
    "cut_threshold",
    "base_cut",
    "norm_hyb",
    "estimator_spec",
    "estimate",
    "estimate_frequencies",
]

IBU_TOL = 1e-12  # multi-freq-ldpy's default stopping tolerance (max absolute change)
IBU_MAX_ITER = 10_000  # and its default iteration cap
BASE_CUT_ALPHA = 0.05  # Base-Cut / Norm-Hyb significance level (the authors' code; cut_threshold)


# --- the channel ---


@dataclass(frozen=True)
class SymmetricChannel:
    """The k × k channel A[y, v] = p if y = v else q, with p + (k − 1)q = 1 (module docstring).

    Its products cost O(k): A θ = q·Σθ + (p − q)θ, and A is symmetric, so Aᵀ r = A r.
    """

    k: int
    p: float
    q: float

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, (int, np.integer)) or self.k < 2:
            raise ParameterError(f"a channel needs k ≥ 2 categories, got k={self.k!r}")
        if not (0.0 <= self.q < self.p <= 1.0) or abs(self.p + (self.k - 1) * self.q - 1.0) > 1e-9:
            raise ParameterError(f"a symmetric channel needs 0 ≤ q < p ≤ 1 with p + (k − 1)q = 1, got p={self.p!r}, q={self.q!r}, k={self.k}")

    def apply(self, theta: np.ndarray) -> np.ndarray:
        """A θ (also Aᵀ θ: A is symmetric)."""
        return self.q * theta.sum() + (self.p - self.q) * theta

    def matrix(self) -> np.ndarray:
        """The dense k × k matrix (for small k and tests)."""
        return np.full((self.k, self.k), self.q) + (self.p - self.q) * np.eye(self.k)


def symmetric_channel(p_star: float | Fraction, q_star: float | Fraction, k: int) -> SymmetricChannel:
    """The column-stochastic channel of support probabilities (p*, q*) over k categories:
    p′ = p*/(p* + (k − 1)q*), q′ = q*/(p* + (k − 1)q*), computed exactly when given Fractions.

    Parameters
    ----------
    p_star, q_star : float or Fraction
        Pr[a report supports x | u = x] and | u ≠ x (``support_probabilities``), p* > q* ≥ 0.
    k : int
        The number of categories.

    Examples
    --------
    >>> c = symmetric_channel(0.5, 0.25, 3)  # OUE-like: p* + 2q* = 1 already
    >>> c.p, c.q
    (0.5, 0.25)
    """
    if not 0 <= q_star < p_star:
        raise ParameterError(f"support probabilities need 0 ≤ q* < p*, got p*={float(p_star)!r}, q*={float(q_star)!r}")
    if isinstance(p_star, Fraction) and isinstance(q_star, Fraction):
        total = p_star + (k - 1) * q_star
        return SymmetricChannel(k, float(p_star / total), float(q_star / total))
    total_f = float(p_star) + (k - 1) * float(q_star)
    return SymmetricChannel(k, float(p_star) / total_f, float(q_star) / total_f)


def channel_of(R: Randomizer) -> SymmetricChannel:
    """The symmetric channel of a frequency oracle or of ``kary_rr`` (its exact transition matrix
    for GRR), from its realized ``support_probabilities``."""
    p_star, q_star = support_probabilities(R)
    k = int(R.k)  # type: ignore[attr-defined]  # every frequency oracle has k
    return symmetric_channel(p_star, q_star, k)


def observed_distribution(f_mi: np.ndarray, p_star: float | Fraction, q_star: float | Fraction) -> np.ndarray:
    """ô = C/ΣC recovered from the MI estimate: C/n = q* + (p* − q*)·f̂ (an affine map, exact up
    to rounding; rounding's −1e-17 at a zero count is clipped to 0).

    Examples
    --------
    >>> observed_distribution(np.array([1.0, 0.2, -0.2]), 0.5, 0.25).round(12).tolist()
    [0.5, 0.3, 0.2]
    """
    p, q = float(p_star), float(q_star)
    f = _finite_vector(f_mi, "observed_distribution")
    s = np.maximum(q + (p - q) * f, 0.0)
    total = s.sum()
    if not total > 0:
        raise ParameterError("observed_distribution: no report supports any category (all support counts are 0)")
    return s / total


# --- Iterative Bayesian Update ---


@dataclass(frozen=True)
class IBUResult:
    """``ibu_run``'s answer: the estimate, the iterations run, and whether the stopping rule
    max_v |θ^{t+1}_v − θ^t_v| < tol was met before ``max_iter``."""

    estimate: np.ndarray
    iterations: int
    converged: bool


def ibu_run(
    observed: np.ndarray,
    channel: SymmetricChannel | np.ndarray,
    *,
    tol: float = IBU_TOL,
    max_iter: int = IBU_MAX_ITER,
    accelerate: bool = True,
) -> IBUResult:
    """Iterative Bayesian Update (Agrawal & Aggarwal, PODS 2001, EM reconstruction; ElSalamouny &
    Palamidessi, EuroS&P 2020): the multinomial MLE of the inputs' distribution θ given the
    observed output distribution ô of a channel A[y, v] = Pr[y | v].

    θ^0 = uniform; the EM map F(θ)_v = θ_v · Σ_y ô_y A[y, v] / (A θ)_y. Stops at the first EM
    update with max_v |F(θ)_v − θ_v| < ``tol`` (returning F(θ)), or after ``max_iter`` updates.
    Deterministic: the same inputs give the same bits. Each iterate is non-negative and sums to 1
    (Σ_v θ_v A[y, v]/(Aθ)_y = 1 for every y, and Σô = 1).

    *Why accelerate.* EM converges linearly, at a rate set by the fraction of missing information,
    which is close to 1 for a noisy channel: for GRR at k = 16, ε = 1, n = 10^5 plain EM needs more
    than 10^4 updates to reach a step of 1e-12 (it stops at the cap, 1e-6 from the MLE), and at
    k = 1024 it stays capped far from it. With ``accelerate`` (the default) the same map F is
    extrapolated by SQUAREM (Varadhan & Roland, "Simple and globally convergent methods for
    accelerating the convergence of any EM algorithm", Scand. J. Statist. 35(2), 2008): every third
    update starts from an extrapolation of two EM updates, stepped back until it lies strictly inside
    the simplex (EM never leaves a face, so a point off the open simplex would lead to a wrong fixed
    point) and kept only if the likelihood did not drop. It converges to the same fixed point, with
    the same stopping rule on an EM update, in hundreds of updates instead of ≥ 10^4 (GRR, n = 10^5:
    135 at k = 16, ε = 1; 925 at k = 1024, ε = 1, where plain EM is capped 0.04 from the MLE; the
    timings are in docs/estimators.md).
    ``accelerate=False`` is the plain iteration above (multi-freq-ldpy's), unchanged bit for bit.

    Parameters
    ----------
    observed : numpy.ndarray
        ô, shape (m,): non-negative, summing to 1 (``observed_distribution`` for a frequency oracle).
    channel : SymmetricChannel or numpy.ndarray
        A ``SymmetricChannel`` (O(k) per iteration) or a dense (m, k) column-stochastic matrix.
    tol : float, default 1e-12
        The stopping tolerance on the largest absolute change (multi-freq-ldpy's default).
    max_iter : int, default 10 000
        The most EM updates (SQUAREM's extrapolations are not counted; each cycle runs 3 updates).
    accelerate : bool, default True
        SQUAREM-accelerated EM (the same fixed point); False: the plain EM iteration.

    Returns
    -------
    IBUResult
        The estimate (shape (k,)), the iterations run and ``converged``.

    Examples
    --------
    >>> c = symmetric_channel(0.5, 0.25, 3)
    >>> r = ibu_run(np.array([0.5, 0.3, 0.2]), c)
    >>> r.converged, r.estimate.round(6).tolist()  # the closed-form MLE (``mle_symmetric``)
    (True, [0.875, 0.125, 0.0])
    """
    o = _distribution(observed, "ibu: observed")
    if not (isinstance(tol, (int, float)) and tol > 0 and math.isfinite(tol)):
        raise ParameterError(f"ibu: tol must be a finite number > 0, got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ParameterError(f"ibu: max_iter must be an integer ≥ 1, got {max_iter!r}")
    if isinstance(channel, SymmetricChannel):
        if len(o) != channel.k:
            raise ParameterError(f"ibu: {len(o)} observed outputs for a channel over k={channel.k}")
        k = channel.k
        forward: Callable[[np.ndarray], np.ndarray] = channel.apply
        backward: Callable[[np.ndarray], np.ndarray] = channel.apply  # symmetric: Aᵀ = A
    else:
        A = np.asarray(channel, dtype=np.float64)
        if A.ndim != 2 or A.shape[0] != len(o) or not np.isfinite(A).all() or (A < 0).any():
            raise ParameterError(f"ibu: the channel must be a non-negative ({len(o)}, k) matrix, got shape {A.shape}")
        if np.abs(A.sum(axis=0) - 1.0).max() > 1e-9:
            raise ParameterError("ibu: the channel's columns A[:, v] = Pr[· | v] must each sum to 1")
        if (A[o > 0].sum(axis=1) == 0).any():
            raise ParameterError("ibu: an observed output has probability 0 under every input of the channel")
        k = A.shape[1]
        forward, backward = A.__matmul__, A.T.__matmul__
    support = o > 0  # outputs never observed add nothing (0 · anything/0 is taken as 0)
    theta = np.full(k, 1.0 / k)
    if accelerate:
        return _ibu_squarem(o, support, theta, forward, backward, float(tol), int(max_iter))
    for t in range(1, int(max_iter) + 1):
        predicted = forward(theta)
        ratio = np.zeros_like(o)
        np.divide(o, predicted, out=ratio, where=support)
        nxt = theta * backward(ratio)
        if np.abs(nxt - theta).max() < tol:
            return IBUResult(nxt, t, True)
        theta = nxt
    return IBUResult(theta, int(max_iter), False)


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """Σ a_i·b_i by numpy's own pairwise sum, not BLAS: the same bits whatever BLAS library and
    thread count the machine has. A BLAS ``ddot`` on vectors of 2^16 runs threaded, and OpenBLAS
    leaves its workers spinning after it returns: the GRR client measured 30 ns a user of process
    CPU time before SQUAREM's dot products at k = 2^16 and 53–79 ns after them."""
    return float(np.add.reduce(a * b))


def _ibu_squarem(
    o: np.ndarray,
    support: np.ndarray,
    theta: np.ndarray,
    forward: Callable[[np.ndarray], np.ndarray],
    backward: Callable[[np.ndarray], np.ndarray],
    tol: float,
    max_iter: int,
) -> IBUResult:
    """IBU's EM map F accelerated by SQUAREM (Varadhan & Roland, Scand. J. Statist. 35(2), 2008,
    the S3 step length), with the two safeguards that keep it on EM's path to EM's fixed point.

    One cycle from θ0: θ1 = F(θ0), θ2 = F(θ1), r = θ1 − θ0, v = θ2 − θ1 − r, α = −‖r‖/‖v‖
    (at most −1, at least −step_max: Varadhan & Roland's adaptive bound, ×4 when reached, ÷4 after a
    failed step), θ′ = θ0 − 2αr + α²v (Σθ′ = 1: r and v sum to 0). *Step back to the simplex:*
    while some θ′_v ≤ 0, α ← (α − 1)/2 (α = −1 gives θ′ = θ2 > 0), because EM never leaves a face
    of the simplex (a zero stays 0, a negative stays negative), so an extrapolation off the open
    simplex would converge to a wrong point (without it, at GRR k = 1024, ε = 1: hundreds of negative
    values, 1e-3 from the MLE; tests/core/test_frequency_estimators.py).
    Then θ_new = F(θ′), kept only if its log-likelihood Σ_y ô_y ln (Aθ)_y is at least θ0's (else θ2:
    global monotonicity, as EM). Every F evaluation counts as one iteration against ``max_iter``,
    and the stopping rule is IBU's: stop at the first F evaluation with max_v |F(θ)_v − θ_v| < tol,
    returning F(θ).
    """
    every = bool(support.all())

    def em(t: np.ndarray) -> np.ndarray:
        pred = forward(t)
        if every:
            return t * backward(o / pred)
        ratio = np.zeros_like(o)
        np.divide(o, pred, out=ratio, where=support)
        return t * backward(ratio)

    def loglik(t: np.ndarray) -> float:
        return _dot(o[support], np.log(forward(t)[support]))

    done = 0
    ll0 = loglik(theta)
    step_max = 1.0  # |α| ≤ step_max, grown ×4 when the step reaches it, shrunk ÷4 after a failed one
    while True:
        t1 = em(theta)
        done += 1
        if np.abs(t1 - theta).max() < tol:
            return IBUResult(t1, done, True)
        if done == max_iter:
            return IBUResult(t1, done, False)
        t2 = em(t1)
        done += 1
        if np.abs(t2 - t1).max() < tol:
            return IBUResult(t2, done, True)
        if done == max_iter:
            return IBUResult(t2, done, False)
        r = t1 - theta
        v = t2 - t1 - r
        vv = _dot(v, v)
        alpha = max(min(-math.sqrt(_dot(r, r) / vv), -1.0), -step_max) if vv > 0 else -1.0
        at_max = alpha == -step_max
        ext = theta - 2.0 * alpha * r + alpha * alpha * v
        for _ in range(60):  # step back toward θ2 until strictly inside the simplex
            if alpha == -1.0 or ext.min() > 0:
                break
            alpha = (alpha - 1.0) / 2.0
            ext = theta - 2.0 * alpha * r + alpha * alpha * v
        if alpha == -1.0 or not ext.min() > 0:
            ext = t2
        nxt = em(ext)
        done += 1
        if np.abs(nxt - ext).max() < tol:
            return IBUResult(nxt, done, True)
        ll = loglik(nxt)
        if not ll >= ll0:  # not an ascent from θ0: keep the plain EM iterate (also catches a nan)
            nxt, ll = t2, loglik(t2)
            step_max = max(1.0, step_max / 4.0)
        elif at_max:
            step_max *= 4.0
        if done == max_iter:
            return IBUResult(nxt, done, False)
        theta, ll0 = nxt, ll


def ibu(
    observed: np.ndarray, channel: SymmetricChannel | np.ndarray, *, tol: float = IBU_TOL, max_iter: int = IBU_MAX_ITER, accelerate: bool = True
) -> np.ndarray:
    """``ibu_run``'s estimate alone (same parameters)."""
    return ibu_run(observed, channel, tol=tol, max_iter=max_iter, accelerate=accelerate).estimate


# --- closed-form MLE of a symmetric channel ---


def mle_symmetric(observed: np.ndarray, channel: SymmetricChannel) -> np.ndarray:
    """The maximum-likelihood θ of a symmetric (GRR-type) channel, in closed form.

    Maximize L(θ) = Σ_y ô_y ln(q + (p − q)θ_y) over the simplex, p + (k − 1)q = 1.
    *Derivation (our check of the reference's §3.3).* L is concave, so the KKT conditions are
    sufficient: ô_y(p − q)/(q + (p − q)θ_y) = λ where θ_y > 0, and ô_y(p − q)/q ≤ λ where θ_y = 0.
    On the support S (k − K values, ô-mass s = Σ_{y∈S} ô_y), q + (p − q)θ_y = ô_y(p − q)/λ; summing
    over S with Σ_S θ = 1 gives (k − K)q + (p − q) = s(p − q)/λ, and (k − K)q + p − q = 1 − Kq, so
    λ = s(p − q)/(1 − Kq) and

        θ_y = [ô_y(1 − Kq) − s q] / [s(p − q)]   on S,   0 off S.

    The zero condition reads ô_y(1 − Kq) ≤ s q: the zeros are the smallest ô. Algorithm: sort ô
    ascending; from K = 0, s = 1, while q·s > (1 − Kq)·ô_(K), drop it (s −= ô_(K), K += 1). This
    is the formula of multi-freq-ldpy's MLE helper (which cites Pinzón et al., AAAI: not verified
    here, module docstring). When every MI estimate is positive, K = 0 and θ = (ô − q)/(p − q) = MI.

    Parameters
    ----------
    observed : numpy.ndarray
        ô, shape (k,), non-negative, summing to 1.
    channel : SymmetricChannel
        The channel (``channel_of`` / ``symmetric_channel``).

    Returns
    -------
    numpy.ndarray
        θ, shape (k,): non-negative, summing to 1.

    Examples
    --------
    >>> mle_symmetric(np.array([0.5, 0.3, 0.2]), symmetric_channel(0.5, 0.25, 3)).round(12).tolist()
    [0.875, 0.125, 0.0]
    """
    o = _distribution(observed, "mle")
    if len(o) != channel.k:
        raise ParameterError(f"mle: {len(o)} observed outputs for a channel over k={channel.k}")
    p, q, k = channel.p, channel.q, channel.k
    order = np.argsort(o, kind="stable")
    K, s = 0, 1.0
    while K < k - 1 and q * s > (1.0 - K * q) * o[order[K]]:  # at least one value keeps mass
        s -= o[order[K]]
        K += 1
    theta = np.zeros(k)
    keep = order[K:]
    theta[keep] = (o[keep] * (1.0 - K * q) - s * q) / (s * (p - q))
    return theta / theta.sum()  # Σθ = 1 in exact arithmetic; this removes the rounding


# --- consistency post-processing (Wang et al., NDSS 2020) ---


def base_pos(f: np.ndarray) -> np.ndarray:
    """Base-Pos: f′_v = max(f̂_v, 0) (Wang et al. 2020). Non-negative; need not sum to 1.

    >>> base_pos(np.array([0.7, 0.5, -0.2])).tolist()
    [0.7, 0.5, 0.0]
    """
    return np.maximum(_finite_vector(f, "base_pos"), 0.0)


def post_pos(f: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Post-Pos: each query's answer from the raw estimates, clipped at 0 (Wang et al. 2020).

    The vector f̂ is left unchanged; a query is a subset of categories (a row of 0/1 weights), and
    its answer max(Σ_{v in the subset} f̂_v, 0). On the one-category queries it is ``base_pos``.

    Parameters
    ----------
    f : numpy.ndarray
        The raw (MI) estimates, shape (k,).
    queries : numpy.ndarray
        Shape (m, k): row i holds query i's 0/1 (or any) weights.

    Examples
    --------
    >>> post_pos(np.array([0.7, 0.5, -0.2]), np.array([[1, 0, 1], [0, 0, 1]])).round(12).tolist()
    [0.5, 0.0]
    """
    v = _finite_vector(f, "post_pos")
    Q = np.asarray(queries, dtype=np.float64)
    if Q.ndim != 2 or Q.shape[1] != len(v):
        raise ParameterError(f"post_pos: queries must be an (m, {len(v)}) array of weights, got shape {Q.shape}")
    return np.maximum(Q @ v, 0.0)


def norm(f: np.ndarray) -> np.ndarray:
    """Norm (additive): f′_v = f̂_v + (1 − Σ_u f̂_u)/k (Wang et al. 2020). Sums to 1 and keeps
    E f′ = E f̂ when E Σf̂ = 1 (unbiased); may stay negative.

    >>> norm(np.array([0.6, 0.3, -0.1, 0.4])).round(12).tolist()
    [0.55, 0.25, -0.15, 0.35]
    """
    v = _finite_vector(f, "norm")
    return v + (1.0 - v.sum()) / len(v)


def norm_mul(f: np.ndarray) -> np.ndarray:
    """Norm-Mul: f′ = γ·max(f̂, 0), γ making Σf′ = 1 (Wang et al. 2020; the "clip and
    renormalize" of multi-freq-ldpy's MI helper). If no estimate is positive, the uniform
    distribution (the authors' code would divide by 0).

    >>> (norm_mul(np.array([0.6, 0.3, -0.1, 0.4])) * 13).round(12).tolist()
    [6.0, 3.0, 0.0, 4.0]
    """
    pos = base_pos(f)
    total = pos.sum()
    return pos / total if total > 0 else np.full(len(pos), 1.0 / len(pos))


def norm_cut(f: np.ndarray) -> np.ndarray:
    """Norm-Cut (Wang et al. 2020), as in the authors' code (vvv214/LDP_Protocols,
    post-process/norm_cut.py): negatives become 0; then, largest first, estimates are kept until
    their running total first exceeds 1 (the crossing one kept), the smaller ones become 0, and
    the kept ones are rescaled to sum to 1. If the positive total never exceeds 1, every positive
    estimate is kept and rescaled (Norm-Mul). (verify) The reference notes that the paper's prose
    may differ from the code in the rescale step; its text was not available to us. The authors'
    code rescales negatives too in the never-exceeds branch; we zero them first (a distribution).

    >>> (norm_cut(np.array([0.6, 0.5, 0.2, -0.3])) * 11).round(12).tolist()
    [6.0, 5.0, 0.0, 0.0]
    """
    pos = base_pos(f)
    order = np.argsort(-pos, kind="stable")  # largest first; ties: the lower category
    running = np.cumsum(pos[order])
    crossing = np.flatnonzero(running > 1.0)
    kept = np.zeros(len(pos), dtype=bool)
    kept[order[: crossing[0] + 1] if len(crossing) else order] = True
    out = np.where(kept, pos, 0.0)
    total = out.sum()
    return out / total if total > 0 else np.full(len(pos), 1.0 / len(pos))


def norm_sub(f: np.ndarray) -> np.ndarray:
    """Norm-Sub (Wang et al. 2020): f′ = max(f̂ + δ, 0), the scalar δ making Σf′ = 1. It is the
    Euclidean projection onto the simplex, ``project_simplex`` (module docstring), which this calls.

    >>> norm_sub(np.array([0.6, 0.5, 0.2, -0.3])).round(12).tolist()
    [0.5, 0.4, 0.1, 0.0]
    """
    return project_simplex(_finite_vector(f, "norm_sub"))


def cut_threshold(k: int, n: int, p_star: float | Fraction, q_star: float | Fraction, alpha: float = BASE_CUT_ALPHA) -> float:
    """Base-Cut's threshold θ = Φ⁻¹(1 − α/k)·σ (Wang et al., NDSS 2020, §"Base-Cut": a one-sided
    test of f_v = 0 at level α/k for each of the k values, Bonferroni-corrected so that all k true
    zeros survive together with probability ≥ 1 − α under the normal approximation).

    σ is the sd of one MI estimate *at f_v = 0*, σ² = V* = q*(1 − q*)/(n(p* − q*)²) (the reference's
    §3.4 and the "approximate variance" of Wang et al. 2017; the authors' code computes the same,
    var = q(1 − q)/(p − q)² for n·f, in vvv214/LDP_Protocols post-process/post_processing.py). It is
    the null hypothesis' variance, which is what a significance threshold needs, and it is exact at
    f_v = 0 for every support-based oracle (GRR, OUE, SUE, OLH, HR, SS: a user not holding v
    supports it with probability q*, ``frequency_variance`` at f = 0). The default α = 0.05 is the
    authors' code's (0.05/domain there); the reference marks the paper's value (verify), and we
    could not read the NDSS text here, so the default rests on their code.

    Parameters
    ----------
    k : int
        The number of categories (the Bonferroni count d′).
    n : int
        The number of reports.
    p_star, q_star : float or Fraction
        The oracle's support probabilities (``support_probabilities``).
    alpha : float, default 0.05
        The family-wise significance level, 0 < α < 1.

    Examples
    --------
    >>> round(cut_threshold(16, 10_000, 0.5, 0.25), 6)  # Φ⁻¹(1 − 0.05/16) = 2.734, σ = 0.0173
    0.047361
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ParameterError(f"cut_threshold: k must be an integer ≥ 1, got {k!r}")
    _check_n(n, "cut_threshold")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise ParameterError(f"cut_threshold: alpha must be in (0, 1), got {alpha!r}")
    p, q = float(p_star), float(q_star)
    if not 0 <= q < p <= 1:
        raise ParameterError(f"cut_threshold: support probabilities need 0 ≤ q* < p* ≤ 1, got p*={p!r}, q*={q!r}")
    sigma = math.sqrt(q * (1.0 - q) / (n * (p - q) ** 2))
    return NormalDist().inv_cdf(1.0 - alpha / int(k)) * sigma


def base_cut(f: np.ndarray, threshold: float) -> np.ndarray:
    """Base-Cut (Wang et al., NDSS 2020): f′_v = f̂_v if f̂_v > θ, else 0, with θ = ``cut_threshold``
    (only estimates significantly above 0 are kept). Non-negative for θ ≥ 0; need not sum to 1.
    θ → ∞ zeroes everything, θ = 0 is ``base_pos``.

    >>> base_cut(np.array([0.7, 0.05, 0.3, -0.05]), 0.1).tolist()
    [0.7, 0.0, 0.3, 0.0]
    """
    v = _finite_vector(f, "base_cut")
    if not (isinstance(threshold, (int, float, np.floating)) and threshold >= 0):
        raise ParameterError(f"base_cut: the threshold must be a number ≥ 0, got {threshold!r}")
    return np.where(v > threshold, v, 0.0)


def norm_hyb(f: np.ndarray, threshold: float) -> np.ndarray:
    """Norm-Hyb, as in the authors' code (vvv214/LDP_Protocols, post-process/norm_hyb.py; it is
    in their repository but not among the ten methods of the NDSS 2020 text, which we could not
    read: the definition is the code's, reference §3.4 (verify)). Norm-Sub restricted to the
    estimates at or below the Base-Cut threshold; the significant ones are left as they are.

    θ = min(1, ``threshold``). The estimates > θ are fixed. Then repeat: set every estimate ≤ 0 to 0
    (for good: it is never adjusted again), and add (1 − total)/m to each of the m estimates in
    (0, θ]; stop when the total is 1 (to 1e-12) and nothing is negative. This ends within k + 1
    rounds (each round that zeroes something removes it from the m adjustable ones).

    *Corner case.* If no adjustable estimate remains while the total is not 1 (for example every
    estimate is either > θ or ≤ 0, and the fixed ones do not sum to 1), the authors' code stops and
    returns a vector that is not a distribution. We then return ``norm_sub`` of it (the simplex
    projection, which moves the fixed estimates too), so the output is always a distribution.

    >>> norm_hyb(np.array([0.6, 0.3, 0.05, 0.1, -0.1]), 0.2).round(12).tolist()
    [0.6, 0.3, 0.025, 0.075, 0.0]
    """
    v = _finite_vector(f, "norm_hyb")
    if not (isinstance(threshold, (int, float, np.floating)) and threshold >= 0):
        raise ParameterError(f"norm_hyb: the threshold must be a number ≥ 0, got {threshold!r}")
    theta = min(1.0, float(threshold))
    est = v.copy()
    fixed = est > theta
    for _ in range(len(est) + 2):
        if abs(est.sum() - 1.0) <= 1e-12 and est.min() >= 0:
            return est
        zero = est <= 0
        est[zero] = 0.0
        change = ~fixed & ~zero
        m = int(change.sum())
        if m == 0:
            break
        est[change] += (1.0 - est.sum()) / m
    if abs(est.sum() - 1.0) <= 1e-12 and est.min() >= 0:
        return est
    return norm_sub(est)


# --- the registry ---


class EstimatorCompute(Protocol):
    """An estimator's computation: (MI estimate f̂, support probabilities p*, q*, and the number of
    reports n, which only the ``needs_n`` estimators read) → the estimate."""

    def __call__(self, f: np.ndarray, p_star: float | Fraction, q_star: float | Fraction, n: int | None = None, /) -> np.ndarray: ...


@dataclass(frozen=True)
class EstimatorSpec:
    """One estimator: its name, what it computes from (MI estimate f̂, support probabilities p*, q*,
    and n), whether its output is a distribution (non-negative, sums to 1), whether it is unbiased,
    and whether it needs the number of reports n (Base-Cut's and Norm-Hyb's threshold σ ∝ 1/√n)."""

    name: str
    compute: EstimatorCompute
    consistent: bool
    unbiased: bool
    summary: str
    needs_n: bool = False


def _ibu_from_mi(f: np.ndarray, p: float | Fraction, q: float | Fraction, n: int | None = None) -> np.ndarray:
    return ibu(observed_distribution(f, p, q), symmetric_channel(p, q, len(f)))


def _mle_from_mi(f: np.ndarray, p: float | Fraction, q: float | Fraction, n: int | None = None) -> np.ndarray:
    return mle_symmetric(observed_distribution(f, p, q), symmetric_channel(p, q, len(f)))


def _base_cut_from_mi(f: np.ndarray, p: float | Fraction, q: float | Fraction, n: int | None = None) -> np.ndarray:
    return base_cut(f, cut_threshold(len(f), _check_n(n, "base_cut"), p, q))


def _norm_hyb_from_mi(f: np.ndarray, p: float | Fraction, q: float | Fraction, n: int | None = None) -> np.ndarray:
    return norm_hyb(f, cut_threshold(len(f), _check_n(n, "norm_hyb"), p, q))


def _only(post: Callable[[np.ndarray], np.ndarray]) -> EstimatorCompute:
    def compute(f: np.ndarray, p: float | Fraction, q: float | Fraction, n: int | None = None) -> np.ndarray:
        return post(f)

    compute.__name__ = post.__name__
    return compute


ESTIMATORS: dict[str, EstimatorSpec] = {
    s.name: s
    for s in (
        EstimatorSpec("mi", _only(lambda f: np.asarray(f, dtype=np.float64)), False, True, "matrix inversion: unbiased, may be negative"),
        EstimatorSpec("ibu", _ibu_from_mi, True, False, "Iterative Bayesian Update (EM, SQUAREM-accelerated), tol 1e-12, ≤ 10 000 updates"),
        EstimatorSpec("mle", _mle_from_mi, True, False, "closed-form MLE of the symmetric channel"),
        EstimatorSpec("base_pos", _only(base_pos), False, False, "negatives to 0"),
        EstimatorSpec("norm", _only(norm), False, True, "additive shift to sum 1 (may stay negative)"),
        EstimatorSpec("norm_mul", _only(norm_mul), True, False, "negatives to 0, then rescale to sum 1"),
        EstimatorSpec("norm_cut", _only(norm_cut), True, False, "keep the largest until the total passes 1, rescale"),
        EstimatorSpec("norm_sub", _only(norm_sub), True, False, "subtract a constant and clip at 0: the simplex projection"),
        EstimatorSpec("base_cut", _base_cut_from_mi, False, False, "estimates not significantly above 0 (Bonferroni, α = 0.05) to 0", needs_n=True),
        EstimatorSpec("norm_hyb", _norm_hyb_from_mi, True, False, "Norm-Sub on the estimates at or below Base-Cut's threshold only", needs_n=True),
    )
}


def estimator_spec(name: str) -> EstimatorSpec:
    """The registered estimator called ``name``; ParameterError naming the allowed ones."""
    if not isinstance(name, str) or name not in ESTIMATORS:
        raise ParameterError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {name!r}")
    return ESTIMATORS[name]


def estimate(name: str, f_mi: np.ndarray, p_star: float | Fraction, q_star: float | Fraction, n: int | None = None) -> np.ndarray:
    """Estimator ``name`` applied to the MI estimate f̂ of an oracle with support probabilities
    (p*, q*) from ``n`` reports. ``n`` is required by the ``needs_n`` estimators (``base_cut``,
    ``norm_hyb``: ParameterError without it) and ignored by the others. ``"mi"`` returns f̂ itself
    (the same bits)."""
    spec = estimator_spec(name)
    f = np.asarray(f_mi, dtype=np.float64)
    if spec.needs_n:
        _check_n(n, name)
    return f if name == "mi" else spec.compute(f, p_star, q_star, n)


def estimate_frequencies(R: Randomizer, reports: np.ndarray, estimator: str = "mi") -> np.ndarray:
    """The frequencies of a frequency oracle's (or ``kary_rr``'s) reports by the named estimator:
    the MI estimate ``frequency_estimates(R, reports)``, then ``estimate`` (with n = the number of
    reports, ``len(reports)``).

    Examples
    --------
    >>> import ldp
    >>> from ldp.core.rng import RandomSource
    >>> rr = ldp.KaryRandomizedResponse(1.0, (0, 1, 2, 3))
    >>> inputs = np.repeat([0.0, 1.0, 2.0, 3.0], [6000, 3000, 1000, 0])
    >>> reports = rr.sample(inputs, RandomSource(0).for_request("demo", 0, np.arange(10_000)))
    >>> f = estimate_frequencies(rr, reports, "mle")
    >>> bool(f.min() >= 0 and abs(f.sum() - 1) < 1e-12 and np.abs(f - [0.6, 0.3, 0.1, 0]).max() < 0.05)
    True
    >>> estimate_frequencies(rr, reports, "base_cut").round(2).tolist()  # the absent value cut to 0
    [0.61, 0.27, 0.12, 0.0]
    """
    spec = estimator_spec(estimator)  # refuse an unknown name before any work
    f = frequency_estimates(R, reports)
    if spec.name == "mi":
        return f
    p_star, q_star = support_probabilities(R)
    return estimate(spec.name, f, p_star, q_star, n=len(reports))


# --- checks ---


def _finite_vector(f: np.ndarray, what: str) -> np.ndarray:
    v = np.asarray(f, dtype=np.float64)
    if v.ndim != 1 or v.size == 0 or not np.isfinite(v).all():
        raise ParameterError(f"{what}: needs a non-empty 1-d vector of finite estimates, got shape {v.shape}")
    return v


def _check_n(n: object, what: str) -> int:
    if n is None:
        raise ParameterError(f"{what} needs the number of reports n (its threshold's σ depends on it): pass n=")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ParameterError(f"{what}: the number of reports n must be an integer ≥ 1, got {n!r}")
    return int(n)


def _distribution(o: np.ndarray, what: str) -> np.ndarray:
    v = _finite_vector(o, what)
    if (v < 0).any() or abs(v.sum() - 1.0) > 1e-9:
        raise ParameterError(f"{what} must be a distribution (non-negative, summing to 1), got sum {v.sum():.6g}, min {v.min():.3g}")
    return v
