"""Theorem 3.7 learner: scores (WHT and histogram forms) against brute force, the exact output
probabilities against the exponential mechanism's definition, privacy on neighbouring databases,
the sampler against the exact distribution, and learning under label noise."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import chisquare

from ldp.central.privacy_checks import max_log_ratio
from ldp.core.concepts import ParityConcept, Referee, concept_class
from ldp.core.exponential_mechanism import exponential_log_probabilities
from ldp.core.learner_result import true_error
from ldp.core.population import PopulationSpec, generate_records
from ldp.core.rng import generator
from ldp.learners.occam import (
    class_size,
    learn_occam,
    occam_hypothesis,
    occam_output_probabilities,
    occam_sample_size,
    occam_scores,
    walsh_hadamard,
)


def _brute_scores(name: str, d: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.array([-(occam_hypothesis(name, d, k).predict(x) != y).sum() for k in range(class_size(name, d))], dtype=float)


def test_walsh_hadamard_against_definition() -> None:
    rng = np.random.default_rng(0)
    v = rng.normal(size=16)
    h = np.array([[(-1) ** bin(r & x).count("1") for x in range(16)] for r in range(16)])
    assert np.allclose(walsh_hadamard(v), h @ v)


@pytest.mark.parametrize("name, d", [("parity", 5), ("point", 4), ("threshold", 4), ("conjunction", 3)])
def test_scores_match_brute_force(name: str, d: int) -> None:
    rng = np.random.default_rng(d)
    x = rng.integers(0, 2, (40, d))
    y = rng.integers(0, 2, 40)  # arbitrary labels: no concept fits (agnostic)
    assert np.array_equal(occam_scores(name, d, x, y), _brute_scores(name, d, x, y))


@pytest.mark.parametrize("name, d", [("parity", 3), ("threshold", 3), ("conjunction", 2)])
def test_output_probabilities_follow_the_definition(name: str, d: int) -> None:
    """Pr[h] = exp(ε q(z,h)/2)/Σ exp(ε q(z,h')/2) with q = −#misclassified, computed from scratch."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 2, (12, d))
    y = rng.integers(0, 2, 12)
    eps = 0.7
    q = _brute_scores(name, d, x, y)
    weights = np.array([math.exp(eps * s / 2) for s in q])
    assert np.allclose(occam_output_probabilities(name, d, x, y, eps), weights / weights.sum(), rtol=1e-12, atol=0)


def test_exponential_mechanism_is_eps_dp_on_all_neighbours() -> None:
    """PARITY_2, n = 3: every database of labelled examples and every neighbour (one example replaced)."""
    d, eps = 2, 1.0
    domain = [(x, y) for x in itertools.product((0, 1), repeat=d) for y in (0, 1)]

    def worst_ratio(scale: float) -> float:
        def dist(db):  # type: ignore[no-untyped-def]
            scores = occam_scores("parity", d, np.array([e[0] for e in db]), np.array([e[1] for e in db]))
            return np.exp(exponential_log_probabilities(scores, eps, exponent_scale=scale))

        worst = 0.0
        for db in itertools.product(domain, repeat=3):
            p = dist(db)
            for i, other in itertools.product(range(3), domain):
                worst = max(worst, max_log_ratio(p, dist(db[:i] + (other,) + db[i + 1 :])))
        return worst

    assert 0 < worst_ratio(0.5) <= eps + 1e-12  # exp(ε q / 2Δ): ε-DP (Theorem 3.6)
    assert worst_ratio(1.0) > eps + 1e-3  # broken: exp(ε q / Δ) is only 2ε-DP, and the check sees it


def test_sampler_matches_exact_probabilities() -> None:
    """χ² goodness of fit, false-alarm rate 10^-4."""
    d, eps = 3, 0.5
    rng = np.random.default_rng(2)
    x = rng.integers(0, 2, (10, d))
    y = rng.integers(0, 2, 10)
    probs = occam_output_probabilities("parity", d, x, y, eps)
    sampler = generator(3, "occam-sampler")
    counts = np.zeros(2**d)
    for _ in range(20_000):
        h = learn_occam("parity", d, x, y, eps, sampler).hypothesis
        counts[int("".join(map(str, h.r)), 2)] += 1
    assert chisquare(counts, probs * counts.sum()).pvalue > 1e-4


@pytest.mark.parametrize("name", ["parity", "point", "threshold", "conjunction"])
def test_learns_with_label_noise_within_theorem_3_7(name: str) -> None:
    """With the Theorem 3.7 sample size for α = 0.1, β = 0.1 and 10% label noise, the error is
    ≤ OPT + α = 0.1 + 0.1 in ≥ 9 of 10 seeded trials (the theorem's guarantee)."""
    d = {"parity": 10, "point": 6, "threshold": 8, "conjunction": 5}[name]
    eps, alpha, beta, noise = 1.0, 0.1, 0.1, 0.1
    cc = concept_class(name, d)
    n = occam_sample_size(class_size(name, d), eps, alpha, beta)
    good = 0
    for trial in range(10):
        target = cc.random_target(generator(4, name, trial))
        spec = PopulationSpec(cc, target, size=n, seed=trial, label_noise=noise)
        rec = generate_records(spec, 0, n)
        res = learn_occam(name, d, rec[:, :d], rec[:, d], eps, generator(5, name, trial))
        good += true_error(spec.referee(), res.hypothesis) <= noise + alpha + 1e-12
    assert good >= 9


def test_parity_scores_at_d20_are_fast() -> None:
    d = 20
    rng = np.random.default_rng(6)
    r = rng.integers(0, 2, d)
    x = rng.integers(0, 2, (3000, d))
    y = (x @ r) & 1
    res = learn_occam("parity", d, x, y, 1.0, generator(6, "fast"))
    assert Referee(concept_class("parity", d), ParityConcept(tuple(int(v) for v in r))).error(res.hypothesis) == 0.0
