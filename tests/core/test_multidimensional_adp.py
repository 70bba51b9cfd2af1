"""RS+FD[ADP] (``ldp.core.multidimensional``, ``variant="adp"``): each attribute runs RS+FD[GRR] or
RS+FD[OUE-z], whichever has the smaller approximate variance at its (ε_in, k, d) (Arcolezi et al.,
CIKM 2021; multi-freq-ldpy's ``RSpFD_ADP_Client``).

- **the choice is the variance formulas'**: on a grid of (d, ε, k), including both crossovers (the
  choice is not monotone in k at ε ≳ 3), against the formulas written here from the reference
  (shared/reference/longitudinal_and_multidimensional.md §2.3), and **(verify)** the closed-form
  V* is the module's exact ``frequency_variance`` at f = 0 with the realized π, p*, q*;
- **exact privacy**: ``verify_exact`` on the whole-record channel of a mixed choice (one attribute
  OUE-z, one GRR): loss ≤ ε, and the real sampler emits the audited table; the ``rsfd`` kind charges
  the spec's ε, at or above the realized loss (also with ``paper_epsilon``);
- **a broken ADP (choice inverted) is caught** by a variance check: Σ_r z_r² over R = 200 seeded
  repetitions, z_r the error of f̂ for category 0 in units of the honest ADP's exact sd, must lie in
  the χ²_R band [10^-5, 1 − 10^-5]. f̂ is a sum of n independent Bernoullis (fixed population), so
  z_r is N(0, 1) up to the CLT at n = 4000: false alarm ≈ 2·10^-5 per attribute, 4·10^-5 in all.
  The inverted choice has 3.1–3.3× the variance, Σ z² ≈ 620 against the band's top ≈ 290.

Deterministic apart from that test (seeded). Over gRPC: tests/wire/test_multidimensional_adp_grpc.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pytest
from scipy import stats

from ldp.core.audit import verify_exact
from ldp.core.errors import ParameterError
from ldp.core.multidimensional import (
    RandomSamplingFakeData,
    RecordChannel,
    amplified_epsilon,
    rsfd_adp_choice,
    rsfd_approximate_variance,
)
from ldp.core.query_specs import record_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import RandomSource
from ldp.core.schema import Field, Schema


def _attrs(*ks: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(range(k)) for k in ks)


def _v_star(variant: str, eps: float, k: int, d: int) -> float:
    """The reference's V* (§2.3) at f = 0, n = 1, written independently: d²σ(1 − σ)/(p − q)²."""
    e = math.exp(eps)
    if variant == "grr":
        p = e / (e + k - 1)
        q = (1 - p) / (k - 1)
        sigma = (q + (d - 1) / k) / d
    else:
        p, q = 0.5, 1 / (e + 1)
        sigma = q
    return d * d * sigma * (1 - sigma) / (p - q) ** 2


GRID_EPS = (0.1, 0.5, 1.0, 2.0, 3.0, 4.0, 8.0)


@pytest.mark.parametrize("d", [2, 3, 5, 10])
def test_the_choice_is_the_smaller_approximate_variance(d: int) -> None:
    for eps in GRID_EPS:
        for k in range(2, 130):
            vg, vo = _v_star("grr", eps, k, d), _v_star("oue-z", eps, k, d)
            assert rsfd_approximate_variance("grr", eps, k, d) == pytest.approx(vg, rel=1e-12)
            assert rsfd_approximate_variance("oue-z", eps, k, d) == pytest.approx(vo, rel=1e-12)
            assert rsfd_adp_choice(eps, k, d) == ("grr" if vg <= vo else "oue-z"), (eps, k, d)


def test_both_crossovers_are_found() -> None:
    """d = 2: at ε = 1 GRR up to k = 9, OUE-z from 10 (GRR's ratio of variances at k = 9 and 10
    straddles 1); at ε = 4 OUE-z at k ≤ 10 (uniform fakes cost more than OUE-z's q-noise), GRR
    from 11 on, and OUE-z again at large k (≥ ~ e^ε·3: the one-attribute rule)."""
    row = lambda eps: [rsfd_adp_choice(eps, k, 2) for k in range(2, 300)]  # noqa: E731
    one = row(1.0)
    assert one[: 9 - 1] == ["grr"] * 8 and set(one[10 - 2 :]) == {"oue-z"}
    assert _v_star("grr", 1.0, 9, 2) <= _v_star("oue-z", 1.0, 9, 2) < _v_star("grr", 1.0, 10, 2)
    four = row(4.0)
    first_grr = four.index("grr") + 2
    last_grr = len(four) - 1 - four[::-1].index("grr") + 2
    assert first_grr == 11 and 100 < last_grr < 299
    assert set(four[: first_grr - 2]) == {"oue-z"} and set(four[first_grr - 2 : last_grr - 1]) == {"grr"} and set(four[last_grr - 1 :]) == {"oue-z"}


@pytest.mark.parametrize(("eps", "ks"), [(1.0, (2, 3, 16)), (3.0, (2, 3)), (4.0, (2, 12, 64))])
def test_v_star_is_the_modules_exact_variance_at_f_zero(eps: float, ks: tuple[int, ...]) -> None:
    """(verify) The closed-form V* equals ``frequency_variance`` (exact, realized π, p*, q*) at
    f = 0, n = 1, for the variant ADP chose and the other: to 1e-9 relative for GRR (64-bit
    cells), 2e-3 for OUE-z (its bits are drawn on a b-bit grid, b ≥ 16, tight to (1 − 2^-7)ε)."""
    for variant, rel in (("grr", 1e-9), ("oue-z", 2e-3)):
        P = RandomSamplingFakeData(eps, _attrs(*ks), variant)
        exact = P.frequency_variance([np.zeros(k) for k in ks], 1)
        for a, k in enumerate(ks):
            assert exact[a] == pytest.approx(np.full(k, rsfd_approximate_variance(variant, eps, k, len(ks))), rel=rel)
    adp = RandomSamplingFakeData(eps, _attrs(*ks), "adp")
    assert adp.variants == tuple(rsfd_adp_choice(eps, k, len(ks)) for k in ks)


def test_the_choice_reads_no_record() -> None:
    """``variants`` is fixed at construction from (ε, k's, d): the same for any records sampled."""
    P = RandomSamplingFakeData(3.0, _attrs(2, 3), "adp")
    before = P.variants
    users = np.arange(50)
    for x in (np.zeros((50, 2)), np.column_stack([users % 2, users % 3]).astype(float)):
        P.sample(x, RandomSource(0).for_request("t", 0, users))
        assert P.variants == before == ("oue-z", "grr")


def test_refusals() -> None:
    with pytest.raises(ParameterError, match="rs\\+fd: approximate variance of variant grr, oue-z or oue-r, got 'adp'"):
        rsfd_approximate_variance("adp", 1.0, 2, 2)
    with pytest.raises(ParameterError, match="k must be an integer ≥ 2, got 1"):
        rsfd_adp_choice(1.0, 1, 2)


# --- exact privacy of the whole record ---


@pytest.mark.parametrize(("eps", "ks", "want"), [(3.0, (2, 3), ("oue-z", "grr")), (1.0, (2, 3), ("grr", "grr")), (4.0, (2, 2), ("oue-z", "oue-z"))])
def test_whole_record_audit_of_adp(eps: float, ks: tuple[int, ...], want: tuple[str, ...]) -> None:
    """``verify_exact`` on the channel over whole records, the real sampler fed every cell of every
    draw (index, each attribute's oracle, each fake): loss ≤ ε and tight to the oracles' grid."""
    P = RandomSamplingFakeData(eps, _attrs(*ks), "adp")
    assert P.variants == want
    audit = verify_exact(RecordChannel(P), check_inputs=4)
    assert audit.passed and audit.sampler_consistent is True, audit
    assert 0.99 * eps <= audit.max_log_ratio <= eps


@dataclass(frozen=True)
class _InvertedADP(RandomSamplingFakeData):
    """Broken: ADP's choice inverted (the variant with the larger approximate variance)."""

    @cached_property
    def variants(self) -> tuple[str, ...]:
        return tuple("oue-z" if v == "grr" else "grr" for v in super().variants)


def test_an_inverted_choice_is_caught_by_its_variance() -> None:
    ks, n, reps = (2, 32), 4000, 200
    attrs = _attrs(*ks)
    rng = np.random.default_rng(1)
    x = np.stack([rng.integers(0, k, n) for k in ks], axis=1).astype(np.float64)
    f = [np.bincount(x[:, a].astype(np.int64), minlength=k) / n for a, k in enumerate(ks)]
    honest = RandomSamplingFakeData(1.0, attrs, "adp")
    assert honest.variants == ("grr", "oue-z")
    sd = [np.sqrt(v[0]) for v in honest.frequency_variance(f, n)]
    lo, hi = stats.chi2.ppf([1e-5, 1 - 1e-5], reps)

    def chi2(P: RandomSamplingFakeData) -> np.ndarray:
        s = np.zeros(len(ks))
        for r in range(reps):
            est = P.frequencies(P.sample(x, RandomSource(7).for_request("adp", r, np.arange(n))))
            s += [((e[0] - fa[0]) / sd_a) ** 2 for e, fa, sd_a in zip(est, f, sd)]
        return s

    good = chi2(honest)
    assert ((lo < good) & (good < hi)).all(), (good, lo, hi)
    broken = chi2(_InvertedADP(1.0, attrs, "adp"))
    assert (broken > hi).all(), (broken, hi)


# --- the ``rsfd`` kind with variant="adp" ---

SCHEMA = Schema((Field("a", 1, 0, 1), Field("b", 1, 0, 2)))  # k = 2, 3


def _spec(eps: float, **params: object) -> RandomizerSpec:
    return RandomizerSpec("rsfd", record_query(), eps, {"variant": "adp", **params})


@pytest.mark.parametrize(("eps", "paper"), [(3.0, None), (1.0, None), (amplified_epsilon(1.5, 2), 1.5)])
def test_the_kind_charges_its_epsilon_and_chooses_at_the_inner_budget(eps: float, paper: float | None) -> None:
    local = LocalRandomizer.build(_spec(eps, **({} if paper is None else {"paper_epsilon": paper})), SCHEMA)
    P = local.randomizer.protocol  # type: ignore[attr-defined]
    inner = eps if paper is None else amplified_epsilon(paper, 2)
    assert local.epsilon == eps and P.epsilon == inner
    assert P.variants == tuple(rsfd_adp_choice(inner, k, 2) for k in (2, 3))
    audit = verify_exact(RecordChannel(P), check_sampler=False)
    assert audit.passed and audit.max_log_ratio <= eps
