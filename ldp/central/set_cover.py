"""SetCoverLearner for conjunctions (KMMS §3, Claim 3.1, Thm 3.2, Claim 3.4, Thm 3.5).

Learns CONJ_{k,d} (AND of ≤ k literals over d Boolean variables) with H = the 2d literals:

    T = ⌈2k·ln(2/α)⌉ iterations; in iteration j:
      z1(h) = #{positives with h(x) = 0},  z0(h) = #{negatives with h(x) = 0}
      w_j = ⌊Lap(T/ε)⌋;  b_j = |S0| + w_j − Δ,  Δ = (T/ε)·ln(T/β)
      q(h) = min{ z0(h) − b_j/k , −z1(h) }
      h_j = ExpMech(ε̂) over H with q;  delete every example with h_j(x) = 0
    return h_1 ∧ … ∧ h_T                       (improper: up to T literals)

Privacy (KMMS Claim 3.4): with the exponential mechanism at ε̂ = ε/(2·ln(e/δ)) per iteration (Pr ∝
exp(ε̂ q/2)) and the Laplace noise at the full ε, the whole run is (ε,δ)-DP for ε ∈ (0,1), δ < 1/e.
``conservative=True`` halves both (the reference spec's switch if one distrusts the constant).
Utility (Thm 3.5): n = Õ(k·log d/(αε)). Natural logs throughout [ENG].

Data: ``x`` uint8 array (n, d) of bits, ``y`` int8 in {0,1}. Literal l < d is x_l, l ≥ d is ¬x_{l−d}.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ldp.central.laplace_mechanism import laplace_cdf
from ldp.core.errors import require_epsilon, require_integer, require_probability
from ldp.core.exponential_mechanism import exponential_mechanism
from ldp.core.learner_result import LearnerResult

__all__ = [
    "ConjunctionHypothesis",
    "set_cover_iterations",
    "set_cover_parameters",
    "literal_values",
    "learn_conjunction_set_cover",
    "set_cover_loop",
    "set_cover_sequence_distribution",
]


@dataclass(frozen=True)
class ConjunctionHypothesis:
    """AND of literals (l < d: x_l; l ≥ d: ¬x_{l−d}); the empty conjunction is constant 1."""

    literals: tuple[int, ...]
    n_vars: int

    def predict(self, x: np.ndarray) -> np.ndarray:
        xa = np.asarray(x, dtype=np.uint8)
        out = np.ones(xa.shape[0], dtype=bool)
        for lit in self.literals:
            out &= (xa[:, lit] == 1) if lit < self.n_vars else (xa[:, lit - self.n_vars] == 0)
        return out.astype(np.int8)

    def describe(self) -> str:
        names = [f"x{lit}" if lit < self.n_vars else f"¬x{lit - self.n_vars}" for lit in sorted(set(self.literals))]
        return " ∧ ".join(names) if names else "TRUE"


def set_cover_iterations(k: int, alpha: float) -> int:
    """T = ⌈2k·ln(2/α)⌉ (KMMS §3; natural log)."""
    return math.ceil(2 * require_integer("k", k, 1) * math.log(2 / require_probability("alpha", alpha, high=0.5)))


def set_cover_parameters(
    k: int, alpha: float, beta: float, epsilon: float, delta: float, conservative: bool = False,
    accounting: str = "claim34",
) -> dict[str, float]:
    """T, the Laplace scale T/ε, the offset Δ = (T/ε)ln(T/β) and ε̂ = ε/(2ln(e/δ)) (Claim 3.4).

    ``accounting="basic"`` [DERIVED, reference spec K1 "pure variant"]: Laplace at ε/2 (scale 2T/ε)
    and each selection at ε̂ = ε/(2T), so basic composition gives pure ε-DP for any ε > 0 (δ unused).
    ε̂ is always in the exp(ε̂·q/2) convention of the exponential mechanism.
    """
    if accounting == "basic":
        eps_b = require_epsilon(epsilon)
        T_b = set_cover_iterations(k, alpha)
        scale = 2 * T_b / eps_b
        return {"T": T_b, "lap_scale": scale, "offset": scale * math.log(T_b / require_probability("beta", beta, high=0.5)),
                "eps_hat": eps_b / (2 * T_b)}
    if accounting != "claim34":
        raise ValueError(f"accounting must be 'claim34' or 'basic'; got accounting={accounting!r}")
    eps = require_epsilon(epsilon)
    if eps >= 1:
        raise ValueError(f"KMMS Claim 3.4 needs epsilon in (0, 1); got epsilon={epsilon!r}")
    dlt = require_probability("delta", delta)
    if dlt >= 1 / math.e:
        raise ValueError(f"KMMS Claim 3.4 needs delta < 1/e; got delta={delta!r}")
    b = require_probability("beta", beta, high=0.5)
    T = set_cover_iterations(k, alpha)
    eps_lap = eps / 2 if conservative else eps
    eps_hat = eps / (2 * math.log(math.e / dlt)) / (2 if conservative else 1)
    return {"T": T, "lap_scale": T / eps_lap, "offset": T / eps_lap * math.log(T / b), "eps_hat": eps_hat}


def literal_values(x: np.ndarray) -> np.ndarray:
    """(n, 2d) array of literal values: [x, 1 − x]."""
    xa = np.asarray(x, dtype=np.uint8)
    return np.concatenate([xa, 1 - xa], axis=1)


def _qualities(lit: np.ndarray, y: np.ndarray, alive: np.ndarray, b: float, k: int) -> np.ndarray:
    zero = lit[alive] == 0
    ya = y[alive]
    z1 = zero[ya == 1].sum(0)
    z0 = zero[ya == 0].sum(0)
    return np.minimum(z0 - b / k, -z1.astype(np.float64))


def set_cover_loop(
    y: np.ndarray,
    k: int,
    prm: dict[str, float],
    rng: np.random.Generator,
    select: Callable[[np.ndarray, np.ndarray, float], tuple[object, np.ndarray]],
    form: str = "conjunction",
) -> list[object]:
    """The SetCoverLearner loop for any H and selection procedure (KMMS §3 algorithm box; §5 for OR).

    ``form="conjunction"`` (C ⊆ H^{∧k}): the examples to cover are the negatives, and h covers x when
    h(x) = 0. ``form="disjunction"`` (C ⊆ H^{∨k}, the "straightforward modification": complement labels
    and hypotheses): the examples to cover are the positives, and h covers x when h(x) = 1.
    Each iteration draws w_j = ⌊Lap(prm["lap_scale"])⌋, sets b_j = (#alive to cover) + w_j − prm["offset"]
    and calls ``select(alive, to_cover, b_j)``. ``select`` must pick h ∈ H by q(h) = min{c(h) − b_j/k, −p(h)}
    (c: alive examples to cover that h covers; p: alive other examples that h covers) and return
    (h, covers), covers[i] = h covers example i. Every covered example is deleted. Returns h_1 … h_T.
    """
    if form not in ("conjunction", "disjunction"):
        raise ValueError(f"form must be 'conjunction' or 'disjunction'; got form={form!r}")
    ya = np.asarray(y).astype(np.int8)
    to_cover = ya == (0 if form == "conjunction" else 1)
    alive = np.ones(ya.shape[0], dtype=bool)
    chosen: list[object] = []
    for _ in range(int(prm["T"])):
        w = math.floor(float(rng.laplace(0.0, prm["lap_scale"])))
        b = int(np.sum(to_cover & alive)) + w - prm["offset"]
        h, covers = select(alive.copy(), to_cover, b)
        chosen.append(h)
        alive &= ~np.asarray(covers, dtype=bool)
    return chosen


def learn_conjunction_set_cover(
    x: np.ndarray,
    y: np.ndarray,
    k: int,
    alpha: float,
    beta: float,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    conservative: bool = False,
) -> LearnerResult:
    """KMMS SetCoverLearner with literals and the exponential mechanism; (ε,δ)-DP by Claim 3.4."""
    prm = set_cover_parameters(k, alpha, beta, epsilon, delta, conservative)
    xa = np.asarray(x, dtype=np.uint8)
    ya = np.asarray(y).astype(np.int8)
    if xa.ndim != 2 or ya.shape != (xa.shape[0],):
        raise ValueError(f"x must be (n, d) and y (n,); got {xa.shape}, {ya.shape}")
    lit = literal_values(xa)

    def select(alive: np.ndarray, to_cover: np.ndarray, b: float) -> tuple[object, np.ndarray]:
        h = exponential_mechanism(_qualities(lit, ya, alive, b, k), prm["eps_hat"], rng)
        return int(h), lit[:, h] == 0

    chosen = [int(h) for h in set_cover_loop(ya, k, prm, rng, select)]  # type: ignore[call-overload]
    return LearnerResult(
        ConjunctionHypothesis(tuple(chosen), xa.shape[1]), xa.shape[0], float(epsilon), float(delta),
        "SetCoverLearner (KMMS Thm 3.5, Claim 3.4)", details={"T": prm["T"], "eps_hat": prm["eps_hat"]},
    )


def set_cover_sequence_distribution(
    x: np.ndarray,
    y: np.ndarray,
    k: int,
    alpha: float,
    beta: float,
    epsilon: float,
    delta: float,
    conservative: bool = False,
    eps_hat: float | None = None,
) -> dict[tuple[int, ...], float]:
    """Exact distribution of the selected literal sequence (h_1..h_T), for tiny instances.

    Sums over w_j = ⌊Lap⌋ exactly (P(w) = F(w+1) − F(w)) on ±60 scales (tail mass < e^{-60}).
    ``eps_hat`` overrides ε̂ (tests use it for a deliberately broken variant).
    """
    prm = set_cover_parameters(k, alpha, beta, epsilon, delta, conservative)
    e_hat = prm["eps_hat"] if eps_hat is None else eps_hat
    scale = prm["lap_scale"]
    W = np.arange(-math.ceil(60 * scale), math.ceil(60 * scale) + 1)
    pw = laplace_cdf(W + 1.0, scale) - laplace_cdf(W.astype(np.float64), scale)
    xa = np.asarray(x, dtype=np.uint8)
    ya = np.asarray(y).astype(np.int8)
    lit = literal_values(xa)
    T = int(prm["T"])
    out: dict[tuple[int, ...], float] = {}

    def rec(prefix: tuple[int, ...], alive: np.ndarray, prob: float) -> None:
        if len(prefix) == T:
            out[prefix] = out.get(prefix, 0.0) + prob
            return
        n0 = int(np.sum(ya[alive] == 0))
        zero = lit[alive] == 0
        ya_al = ya[alive]
        z1 = zero[ya_al == 1].sum(0).astype(np.float64)
        z0 = zero[ya_al == 0].sum(0).astype(np.float64)
        b = (n0 + W - prm["offset"]).astype(np.float64)[:, None]
        lw = e_hat / 2.0 * np.minimum(z0[None, :] - b / k, -z1[None, :])
        lw -= lw.max(axis=1, keepdims=True)
        probs = np.exp(lw)
        probs /= probs.sum(axis=1, keepdims=True)
        step = pw @ probs
        for h in range(lit.shape[1]):
            rec(prefix + (h,), alive & (lit[:, h] == 1), prob * step[h])

    rec((), np.ones(xa.shape[0], dtype=bool), 1.0)
    return out
