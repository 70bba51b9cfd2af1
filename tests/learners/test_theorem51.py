"""KLNRS Theorem 5.1, corrected (ldp.learners.theorem51; docs/theorem51.md).

The paper's proof step "each non-adaptive query eliminates at most two (r, a) pairs" is false:
one query separates (r, 0) from (r, 1) for every r with |f̂_g(r)| > 2τ, and Parseval allows fewer
than 1/(16τ²) such r, not one. The bent query attains it. These tests check the exact Fourier
profile against enumeration, refute the paper's counting (d = 4) and its theorem (d = 16), check
the Parseval bound and the direct local lower bound, and catch deliberately broken variants.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.linalg import hadamard

import ldp.learners.theorem51 as t51
from ldp.core.concepts import MaskedParityConcept, concept_class
from ldp.core.errors import ParameterError
from ldp.core.queries import QuerySpec, make_query
from ldp.core.query_specs import affine, bent, conjunction, label_query, parity, product
from ldp.learners.masked_parity import a_query, bit_query
from ldp.learners.theorem51 import (
    all_masked_parities,
    bent_query,
    bent_query_set,
    determined,
    lni_query_set,
    lni_users_lower_bound,
    nasq_queries_lower_bound,
    parseval_separation_bound,
    query_expectations,
    run_against_adversary,
    separation_profile,
    theorem51_census,
    walsh_hadamard,
)

TAU4 = 0.9 / (4 * 4)  # 0.05625: fine enough for the bit queries at d = 4 (gap 1/8 > 2τ)


def _random_queries(d: int, rng: np.random.Generator, count: int) -> list[QuerySpec]:
    """Random [0,1]-valued queries: a conjunction of random literals on x (and sometimes i or b)
    times 1[y ≠ ±(−1)^{⟨m,x⟩}] or a label literal, sometimes rescaled into [1/4, 3/4]."""
    out = []
    for k in range(count):
        bits = rng.choice(d, size=int(rng.integers(1, d + 1)), replace=False)
        literals: list[tuple[str, int, int]] = [("x", int(j), int(rng.integers(0, 2))) for j in bits]
        if k % 3 == 1:
            literals.append(("i", 0, int(rng.integers(0, d))))
        if k % 3 == 2:
            literals.append(("b", 0, int(rng.integers(0, 2))))
        mask = rng.integers(0, 2, d).astype(bool)
        sign = float(rng.choice([-0.5, 0.5]))
        label_part = affine(product(label_query(), parity(mask)), sign, 0.5) if k % 2 == 0 else conjunction(("y", 0, 1))
        q = product(conjunction(*literals), label_part)
        out.append(affine(q, 0.5, 0.25) if k % 4 == 3 else q)
    return out


def _families(d: int) -> list[QuerySpec]:
    """Bit queries, a-queries (asymmetric masks, so a wrong bit order shows), the bent query,
    random [0,1] queries and two [−1,1] sign queries."""
    rng = np.random.default_rng(d)
    masks = [(1,) + (0,) * (d - 1), (1, 1) + (0,) * (d - 2), tuple(int(v) for v in rng.integers(0, 2, d))]
    return (
        [bit_query(j) for j in range(d)]
        + [a_query(m) for m in masks]
        + [bent_query()]
        + _random_queries(d, rng, 6)
        + [product(label_query(), parity(np.array(masks[0], dtype=bool))), product(label_query(), bent())]
    )


def _profile_mismatch(d: int, queries: list[QuerySpec]) -> float:
    """Largest |profile − enumeration| over E_{r,a}[g], f̂ = E_{r,0} − E_{r,1} and C_g."""
    concepts, values = query_expectations(d, queries)
    profile = separation_profile(d, queries)
    fourier_concepts, fourier_values = profile.table()
    assert fourier_concepts == concepts
    e0, e1 = values[0::2].T, values[1::2].T  # (q, 2^d): rows 2r + a
    return float(
        max(
            np.abs(fourier_values - values).max(),
            np.abs(profile.fourier - (e0 - e1)).max(),
            np.abs(profile.constant - ((e0 + e1) / 2).mean(axis=1)).max(),  # B_g averages to 0 over r
        )
    )


# --- (a) the Fourier profile is the enumeration ---


@pytest.mark.parametrize("d", [2, 4])
def test_fourier_profile_equals_enumeration(d: int) -> None:
    assert t51._schema(d) == concept_class("masked_parity", d).schema
    assert _profile_mismatch(d, _families(d)) < 1e-12


def test_walsh_hadamard_is_the_sylvester_hadamard_transform() -> None:
    rng = np.random.default_rng(0)
    v = rng.normal(size=(3, 16))
    assert np.allclose(walsh_hadamard(v), v @ hadamard(16).T)
    assert np.allclose(walsh_hadamard(walsh_hadamard(v)) / 16, v)  # H·H = n·I
    x = t51.index_bits(4)
    beta = (x[:, 0] & x[:, 2]) ^ (x[:, 1] & x[:, 3])
    assert np.allclose(np.abs(walsh_hadamard(1.0 - 2.0 * beta)) / 16, 0.25)  # bent: every |coefficient| 2^{−d/2}
    with pytest.raises(ParameterError, match="power-of-2"):
        walsh_hadamard(np.ones(12))


# --- (e) broken transforms are caught by (a) ---


def _bit_reversed(n: int) -> np.ndarray:
    bits = n.bit_length() - 1
    return np.array([int(format(k, f"0{bits}b")[::-1], 2) for k in range(n)])


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(lambda v, wht: wht(v) * v.shape[-1], id="no-normalization"),
        pytest.param(lambda v, wht: wht(v)[..., _bit_reversed(v.shape[-1])], id="wrong-bit-order"),
        pytest.param(lambda v, wht: np.abs(wht(v)), id="lost-sign"),
    ],
)
def test_a_broken_walsh_hadamard_is_caught(monkeypatch: pytest.MonkeyPatch, broken) -> None:
    correct = t51.walsh_hadamard
    monkeypatch.setattr(t51, "walsh_hadamard", lambda v: broken(np.asarray(v, dtype=np.float64), correct))
    assert _profile_mismatch(4, _families(4)) > 1e-3


# --- (b) the paper's counting step is false: d = 4 ---


async def test_four_bit_queries_and_one_bent_query_determine_every_target_at_d4() -> None:
    d, queries = 4, bent_query_set(4)
    # 2τ < 1/8, the gap of every query here; τ < 2^{−8/3}: this refutes the proof step, not the
    # theorem's statement (that is d = 16 below).
    assert len(queries) == 5 and 2 * TAU4 < 1 / 8 and TAU4 < 2.0 ** (-2 * d / 3)
    enumerated = query_expectations(d, queries)  # independent of the Fourier code
    outcomes = await theorem51_census(d, queries, TAU4, table=enumerated)
    assert len(outcomes) == 32
    assert sum(o.a_undetermined for o in outcomes) == 0
    assert all(o.version_space == (o.target,) for o in outcomes)  # every target learned exactly
    for o in outcomes:  # the midpoint adversary's answers are valid
        truth = enumerated[1][all_masked_parities(d).index(o.target)]
        assert np.all(np.abs(o.answers - truth) <= TAU4 * (1 + 1e-9))
    # The paper's own oracle (answer C_g when valid) fares no better for the adversary.
    paper = await theorem51_census(d, queries, TAU4, adversary="paper", table=enumerated)
    assert sum(o.a_undetermined for o in paper) == 0
    # Without the bent query every a is open: it is the one query doing all the work.
    bits_only = await theorem51_census(d, queries[:d], TAU4, table=query_expectations(d, queries[:d]))
    assert sum(o.a_undetermined for o in bits_only) == 32
    # The paper's rationale ("each query eliminates at most two (r, a) pairs"): the one query on
    # the b = 0 half settles a for ≤ 1 of 16 r, leaving ≥ 2(2^d − 1) = 30 targets open. Measured: 0.
    assert 2 * (2**d - 1) == 30
    report = determined(d, queries, TAU4)
    assert report.a_undetermined_targets == 0 and report.learns_every_target and report.r_method == "pairwise"
    assert report.separated.tolist() == [0, 0, 0, 0, 16]


# --- (e) the paper's rule, written out, predicts 30 and is refuted ---


def _paper_rule_undetermined(d: int, queries: list[QuerySpec], tau: float) -> int:
    """The false rule as a census: each query separates at most ONE r (its best one)."""
    profile = separation_profile(d, queries)
    settled = {int(np.argmax(np.abs(f))) for f in profile.fourier if np.abs(f).max() > 2 * tau * (1 + 1e-9)}
    return 2 * (2**d - len(settled))


async def test_the_papers_one_r_per_query_rule_is_refuted_by_the_exact_census() -> None:
    d = 4
    queries = bent_query_set(d)
    exact = sum(o.a_undetermined for o in await theorem51_census(d, queries, TAU4))
    assert _paper_rule_undetermined(d, queries, TAU4) == 30
    assert exact == 0 != _paper_rule_undetermined(d, queries, TAU4)
    # The rule is right for the a-query family (the LNI (a) census), so the check discriminates.
    for k in (1, 5, 11):
        candidates = [tuple(int(b) for b in np.binary_repr(v, d)) for v in range(0, 16, 16 // k)][:k]
        family = lni_query_set(d, candidates)
        census = sum(o.a_undetermined for o in await theorem51_census(d, family, TAU4))
        assert census == _paper_rule_undetermined(d, family, TAU4) == 2 * (2**d - k)


async def test_midpoint_adversary_is_at_least_as_strong_as_the_papers_and_matches_determined() -> None:
    d = 4
    rng = np.random.default_rng(7)
    queries = lni_query_set(d, [(1, 0, 1, 1), (0, 1, 1, 0)]) + _random_queries(d, rng, 5)
    for tau in (0.02, TAU4, 0.1):
        table = query_expectations(d, queries)
        midpoint = await theorem51_census(d, queries, tau, table=table)
        paper = await theorem51_census(d, queries, tau, adversary="paper", table=table)
        mid_open = {o.target for o in midpoint if o.a_undetermined}
        assert {o.target for o in paper if o.a_undetermined} <= mid_open
        report = determined(d, queries, tau)
        assert mid_open == {MaskedParityConcept(tuple(t51.index_bits(d, [r])[0].tolist()), a) for r in np.flatnonzero(~report.a_determined) for a in (0, 1)}
        for o in midpoint:
            truth = table[1][all_masked_parities(d).index(o.target)]
            assert np.all(np.abs(o.answers - truth) <= tau * (1 + 1e-9))  # always a valid oracle
    single = await run_against_adversary(MaskedParityConcept((1, 0, 1, 1), 1), queries, TAU4)
    assert not single.a_undetermined and single.adversary == "midpoint"
    with pytest.raises(ParameterError, match="adversary"):
        await theorem51_census(d, queries, TAU4, adversary="constant")


# --- (c) the theorem as stated is false: d = 16 ---


def test_seventeen_queries_learn_every_target_at_d16_with_tau_above_the_theorems() -> None:
    d, tau = 16, 9e-4
    assert tau >= 2.0 ** (-2 * d / 3)  # the theorem's hypothesis on τ holds
    queries = bent_query_set(d)
    assert len(queries) == 17 < 2**d - 1  # the theorem claims more than 2^16 − 1 are needed
    profile = separation_profile(d, queries)
    assert np.allclose(np.abs(profile.fourier[-1]), 2.0**-9)  # bent: |f̂(r)| = 2^{−d/2−1} for every r
    assert 2.0**-9 > 2 * tau and 1 / (2 * d) > 2 * tau
    report = determined(d, queries, tau, profile)
    assert report.r_method == "coordinate certificate"
    assert report.a_determined.all() and report.r_determined.all() and report.learns_every_target
    assert report.a_undetermined_targets == 0 and report.separated[-1] == 2**d
    # Independent of the certificate: against the midpoint adversary, random targets' version
    # spaces over all 2^17 concepts are the target alone.
    e = np.stack([profile.expectations(0).T, profile.expectations(1).T], axis=1).reshape(2 ** (d + 1), -1)
    rng = np.random.default_rng(16)
    for row in rng.choice(2 ** (d + 1), size=12, replace=False):
        r, a = divmod(int(row), 2)
        e0, e1 = e[2 * r], e[2 * r + 1]
        answers = np.where(np.abs(e0 - e1) <= 2 * tau * (1 + 1e-9), (e0 + e1) / 2, e[row])
        consistent = np.flatnonzero(np.all(np.abs(e - answers) <= tau * (1 + 1e-9), axis=1))
        assert consistent.tolist() == [row]
    # Drop the bent query and no a is determined; drop a bit query and r is not certified.
    assert not determined(d, queries[:-1], tau, separation_profile(d, queries[:-1])).a_determined.any()
    partial = queries[1:]
    assert not determined(d, partial, tau, separation_profile(d, partial)).r_determined.any()
    # At 2τ just above the bit gap 1/(2d) = 1/32 nothing certifies r any more.
    assert not determined(d, queries, 1 / 64 * 1.001, profile).r_determined.any()
    # The corrected bound is consistent: it asks for at least 1 query here.
    assert nasq_queries_lower_bound(d, tau) == 1 <= len(queries)


@pytest.mark.parametrize("tau", [0.03, 0.06, 1 / 16, 0.07, 0.2])
def test_the_coordinate_certificate_is_sound_and_sharp_at_d4(tau: float) -> None:
    """The large-d r-certificate agrees with the exact pairwise check where both apply."""
    d = 4
    rng = np.random.default_rng(11)
    for queries in (bent_query_set(d), [bit_query(j) for j in range(d)], bent_query_set(d)[1:] + _random_queries(d, rng, 4)):
        profile = separation_profile(d, queries)
        certified = t51._coordinate_certificate(profile, tau)
        exact = t51._pairwise_r_determined(profile, tau)
        assert not certified or exact.all()
        if len(queries) == d and all(q == bit_query(j) for j, q in enumerate(queries)):
            assert certified == (2 * tau < 1 / (2 * d)) == exact.all()  # bits alone: both exact


# --- (d) Parseval: fewer than 1/(16τ²) separated r per [0,1] query; bent is extremal ---


@pytest.mark.parametrize("tau", [0.005, 0.02, 0.04, TAU4, 0.1, 0.2])
def test_parseval_bound_holds_for_every_query_family(tau: float) -> None:
    d = 4
    rng = np.random.default_rng(int(tau * 1e4))
    queries = _families(d) + _random_queries(d, rng, 12) + [a_query(r) for r in t51.index_bits(d)]
    schema = concept_class("masked_parity", d).schema
    profile = separation_profile(d, queries)
    separated = profile.separated(tau).sum(axis=1)
    for k, q in enumerate(queries):
        vals = make_query(q, schema).values()
        length = float(vals.max() - vals.min())
        assert np.sum(profile.fourier[k] ** 2) <= length**2 / 4 + 1e-12  # Parseval
        assert separated[k] <= parseval_separation_bound(tau, length), (k, q)
        assert separated[k] * (2 * tau) ** 2 < length**2 / 4 or separated[k] == 0


@pytest.mark.parametrize("d", [2, 4, 6, 8])
def test_the_bent_query_attains_the_parseval_bound(d: int) -> None:
    profile = separation_profile(d, [bent_query()])
    edge = 2.0 ** (-d / 2 - 2)  # bent separates every r iff τ < 2^{−d/2−2}
    just_below = edge * 0.999
    assert int(profile.separated(just_below).sum()) == 2**d == parseval_separation_bound(just_below)
    assert int(profile.separated(edge).sum()) == 0
    assert math.isclose(float(np.sum(profile.fourier**2)), 0.25)  # Parseval with equality


def test_parseval_separation_bound_values() -> None:
    assert parseval_separation_bound(1 / 8) == 3  # 1/(16τ²) = 4 exactly: strictly fewer
    assert parseval_separation_bound(1 / 16) == 15
    assert parseval_separation_bound(TAU4) == 19
    assert parseval_separation_bound(0.25) == 0
    assert parseval_separation_bound(0.25, value_range=2.0) == 3  # [−1,1]: < 1/(4τ²)
    assert parseval_separation_bound(9e-4) == 77160
    assert nasq_queries_lower_bound(16, 2.0 ** (-32 / 3)) == 1  # vacuous at the theorem's τ
    assert nasq_queries_lower_bound(16, 1 / 64) == 258  # k = 256 − 1 = 255 per query: ⌈65536/255⌉
    assert nasq_queries_lower_bound(16, 1 / 64) >= 16 * (1 / 64) ** 2 * 2**16  # q ≥ 16τ²·2^d
    for bad in (0, -0.1, float("nan"), float("inf")):
        with pytest.raises(ParameterError):
            parseval_separation_bound(bad)
    with pytest.raises(ParameterError, match="1/4"):
        nasq_queries_lower_bound(4, 0.3)


# --- (f) the direct local lower bound ---


def test_lni_users_lower_bound_value() -> None:
    constant = 4 * math.log(5) / (math.e - 1) ** 2
    assert round(constant, 4) == 2.1804
    n = lni_users_lower_bound(16, 1.0, 0.05)
    assert n == math.ceil(constant * 2**16) == 142898
    assert round(n / 2**16, 2) == 2.18
    assert [lni_users_lower_bound(d, 1.0, 0.05) for d in (2, 4, 8)] == [9, 35, 559]
    assert lni_users_lower_bound(8, 2.0, 0.05) < lni_users_lower_bound(8, 1.0, 0.05) < lni_users_lower_bound(8, 1.0, 0.01)
    for kwargs in ({"beta": 0.25}, {"beta": 0.3}, {"beta": 0.0}, {"epsilon": 0.0}, {"epsilon": float("nan")}, {"d": 0}):
        args = {"d": 8, "epsilon": 1.0, "beta": 0.05} | kwargs
        with pytest.raises(ParameterError):
            lni_users_lower_bound(**args)


def _chi2_per_r(profile: t51.SeparationProfile, epsilon: float, k: int) -> np.ndarray:
    """χ²(M_{r,0} ‖ M_{r,1}) for every r, for the ε-local randomizer 'report 1 w.p. q + (p − q)g(z)'
    (p = e^ε/(1+e^ε), q = 1 − p) of a [0,1]-valued query g: M_{r,a}(1) = q + (p − q)E_{r,a}[g]."""
    p = math.exp(epsilon) / (1 + math.exp(epsilon))
    q = 1 - p
    m0 = q + (p - q) * profile.expectations(0)[k]
    m1 = q + (p - q) * profile.expectations(1)[k]
    return (m0 - m1) ** 2 / m1 + (m0 - m1) ** 2 / (1 - m1)


@pytest.mark.parametrize("epsilon", [0.25, 0.5, 1.0])
def test_per_user_chi2_summed_over_r_is_at_most_the_local_bound(epsilon: float) -> None:
    """The key step of the direct local bound: for ONE fixed ε-local randomizer,
    Σ_r χ²(M_{r,0}‖M_{r,1}) ≤ (e^ε − 1)²/4 — and an r-dependent choice (interaction) breaks it."""
    d = 4
    queries = _families(d)[:-2] + _random_queries(d, np.random.default_rng(3), 8)  # the [0,1] ones
    profile = separation_profile(d, queries)
    bound = math.expm1(epsilon) ** 2 / 4
    sums = [float(_chi2_per_r(profile, epsilon, k).sum()) for k in range(len(queries))]
    assert max(sums) <= bound
    assert max(sums) > 0.05 * bound  # not vacuous: the bent and a-queries carry real information
    # Interaction: user r's randomizer is the a-query for r itself (it learned r first). (At large
    # ε the binary channel saturates and (e^ε − 1)²/4 is loose: this is a small-ε statement.)
    own = separation_profile(d, [a_query(r) for r in t51.index_bits(d)])
    adaptive = sum(float(_chi2_per_r(own, epsilon, r)[r]) for r in range(2**d))
    assert adaptive > bound


def test_the_papers_oracle_is_kept_and_its_docstring_no_longer_asserts_the_false_step() -> None:
    import ldp.sq.adversarial as adversarial

    doc = adversarial.__doc__ or ""
    assert hasattr(adversarial, "AdversarialSQOracle")
    assert "false" in doc and "ldp.learners.theorem51" in doc and "docs/theorem51.md" in doc
    assert "false" in (t51.__doc__ or "") and "1/(16τ²)" in (t51.__doc__ or "")
