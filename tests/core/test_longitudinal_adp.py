"""L-ADP (``ldp.core.longitudinal.choose_longitudinal`` and the kind ``l_adp``): per question, L-GRR
or L-OSUE, whichever has the smaller approximate variance V* at (k, ε∞, ε1) (Arcolezi et al. 2022,
ALLOMFREE's adaptive choice; multi-freq-ldpy's ``L_ADP_Client``).

- **the choice is the variance formulas'**: on a grid of k, ε∞ and ε1/ε∞, against V* written here
  from the reference's closed forms (shared/reference/longitudinal_and_multidimensional.md §1.2);
  every row has one crossover k* (L-GRR below, L-OSUE from k* on), found and checked on both sides;
- **(verify)** V* is this module's exact ``frequency_variance(0, 1, oracle)`` on the realized
  cells, within their grid;
- **a broken L-ADP (choice inverted) is caught** by a variance check: Σ_r z_r² over R = 200 seeded
  repetitions (a fresh memo key per repetition: PRR and IRR both redrawn), z_r the error of f̂ for
  value 0 in units of the honest choice's exact sd, must lie in the χ²_R band [10^-5, 1 − 10^-5].
  f̂ is a sum of n = 4000 independent Bernoullis, so z_r is N(0, 1) up to the CLT: false alarm
  ≈ 2·10^-5 per configuration, 4·10^-5 for the two;
- **the kind ``l_adp``** is built as the chosen kind (equal randomizers, the same memo label) and is
  charged as it: ε∞ once per question, whichever of the two names asks it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ldp.core.budget import charge_units
from ldp.core.errors import ParameterError
from ldp.core.longitudinal import (
    MEMO_REPEAT_EPSILON,
    LongitudinalOracle,
    approximate_variance,
    choose_longitudinal,
    estimate_frequencies,
    frequency_variance,
    instantaneous_response,
    memo_key,
    permanent_response,
)
from ldp.core.queries import QuerySpec
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import RandomSource, derive_key_bytes
from ldp.local.messages import SessionKind, Status
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session
from tests.wire.wire_helpers import population


def _v_star(protocol: str, k: int, ei: float, e1: float) -> float:
    """The reference's V* (§1.2) at n = 1, f = 0, in e^ε as the paper writes it."""
    a, b = math.exp(ei), math.exp(e1)
    if protocol == "l_grr":
        p1 = a / (a + k - 1)
        q1 = (1 - p1) / (k - 1)
        p2 = (a * b - 1) / (a * b + (k - 1) * a - (k - 1) * b - 1)
        q2 = (1 - p2) / (k - 1)
    else:
        p1, q1 = 0.5, 1 / (a + 1)
        p2 = (a * b - 1) / ((b + 1) * (a - 1))
        q2 = 1 - p2
    q_s = q1 * p2 + (1 - q1) * q2
    return q_s * (1 - q_s) / ((p1 - q1) ** 2 * (p2 - q2) ** 2)


KS = (2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32, 64, 128, 256, 1024, 4096, 1 << 16)
ROWS = [(ei, r * ei) for ei in (0.5, 1.0, 2.0, 4.0, 8.0) for r in (0.25, 0.5, 0.75, 0.95)]


@pytest.mark.parametrize(("ei", "e1"), ROWS)
def test_the_choice_is_the_smaller_v_star_with_one_crossover(ei: float, e1: float) -> None:
    choices = []
    for k in KS:
        vg, vo = _v_star("l_grr", k, ei, e1), _v_star("l_osue", k, ei, e1)
        assert approximate_variance("l_grr", k, ei, e1) == pytest.approx(vg, rel=1e-9)
        assert approximate_variance("l_osue", k, ei, e1) == pytest.approx(vo, rel=1e-9)
        choices.append(choose_longitudinal(k, ei, e1))
        assert choices[-1] == ("l_grr" if vg <= vo else "l_osue"), (k, ei, e1)
    # one crossover, both sides present: L-GRR at k = 2, L-OSUE at k = 2^16, no switch back
    assert choices[0] == "l_grr" and choices[-1] == "l_osue"
    star = choices.index("l_osue")
    assert set(choices[:star]) == {"l_grr"} and set(choices[star:]) == {"l_osue"}
    # and at integer resolution: the last L-GRR k and the first L-OSUE k straddle equal variances
    k_star = next(k for k in range(2, KS[star] + 1) if choose_longitudinal(k, ei, e1) == "l_osue")
    assert _v_star("l_grr", k_star - 1, ei, e1) <= _v_star("l_osue", k_star - 1, ei, e1)
    assert _v_star("l_grr", k_star, ei, e1) > _v_star("l_osue", k_star, ei, e1)


@pytest.mark.parametrize("calibration", ["paper", "tight"])
@pytest.mark.parametrize(("k", "ei", "e1"), [(2, 1.0, 0.5), (10, 4.0, 1.0), (16, 2.0, 1.0), (256, 4.0, 2.0), (1024, 8.0, 6.0)])
def test_v_star_is_the_modules_exact_variance(calibration: str, k: int, ei: float, e1: float) -> None:
    """(verify) The closed forms give the realized cells' exact variance at f = 0, n = 1: L-GRR to
    1e-6 (64-bit cells), L-OSUE to 2e-2 (its IRR on a b-bit grid, b ≥ 16, tight to (1 − 2^-7)ε1).
    'tight' L-GRR has the smaller V* wherever k > 2 (its p2 solves the exact ratio)."""
    for protocol, rel in (("l_grr", 1e-6), ("l_osue", 2e-2)):
        exact = float(frequency_variance(0.0, 1, LongitudinalOracle(protocol, k, ei, e1, calibration)))
        assert exact == pytest.approx(approximate_variance(protocol, k, ei, e1, calibration), rel=rel)
    if k > 2:
        assert approximate_variance("l_grr", k, ei, e1, "tight") < approximate_variance("l_grr", k, ei, e1, "paper")


def test_refusals_in_one_line() -> None:
    with pytest.raises(ParameterError, match=r"protocol must be one of \['l_grr', 'l_osue'\], got 'l_oue'"):
        approximate_variance("l_oue", 4, 2.0, 1.0)
    with pytest.raises(ParameterError, match="needs epsilon_1 < epsilon_inf"):
        choose_longitudinal(4, 1.0, 1.0)
    with pytest.raises(ParameterError, match=r"k must be .*\[2, 2\^16\]"):
        choose_longitudinal(1, 2.0, 1.0)
    with pytest.raises(ParameterError, match="calibration must be one of"):
        choose_longitudinal(4, 2.0, 1.0, "loose")


def _inverted(k: int, ei: float, e1: float) -> str:
    """Broken L-ADP: the protocol with the larger V*."""
    return "l_osue" if choose_longitudinal(k, ei, e1) == "l_grr" else "l_grr"


@pytest.mark.parametrize(("k", "want"), [(2, "l_grr"), (64, "l_osue")])
def test_an_inverted_choice_is_caught_by_its_variance(k: int, want: str) -> None:
    ei, e1, n, reps = 2.0, 1.0, 4000, 200
    assert choose_longitudinal(k, ei, e1) == want
    users = np.arange(n)
    values = np.random.default_rng(k).integers(0, k, n)
    f0 = float(np.mean(values == 0))
    sd = math.sqrt(float(frequency_variance(f0, n, LongitudinalOracle(want, k, ei, e1))))
    lo, hi = stats.chi2.ppf([1e-5, 1 - 1e-5], reps)

    def chi2(protocol: str) -> float:
        o = LongitudinalOracle(protocol, k, ei, e1)
        s = 0.0
        for r in range(reps):
            prr = permanent_response(memo_key(derive_key_bytes("l_adp", r)), users, values, o)
            y = instantaneous_response(prr, RandomSource(3).for_request("irr", r, users), o)
            s += ((estimate_frequencies(y, o)[0] - f0) / sd) ** 2
        return s

    assert lo < chi2(want) < hi
    assert chi2(_inverted(k, ei, e1)) > hi


# --- the kind ``l_adp`` ---

PREFIX = QuerySpec("prefix_index", {"field": "x", "length": 4, "candidates": list(range(12))})  # 13 values


@pytest.mark.parametrize(("ei", "want"), [(1.0, "l_osue"), (8.0, "l_grr")])
def test_the_kind_is_the_chosen_kind(ei: float, want: str) -> None:
    schema = population(n=10).concept_class.schema
    adp = LocalRandomizer.build(RandomizerSpec("l_adp", PREFIX, ei, {"epsilon_1": ei / 2}), schema)
    chosen = LocalRandomizer.build(RandomizerSpec(want, PREFIX, ei, {"epsilon_1": ei / 2}), schema)
    assert choose_longitudinal(13, ei, ei / 2) == want
    assert adp.randomizer == chosen.randomizer and type(adp.randomizer) is type(chosen.randomizer)
    assert adp.randomizer.memo_label == chosen.randomizer.memo_label  # type: ignore[attr-defined]
    assert adp.epsilon == chosen.epsilon == ei


async def test_the_kind_is_charged_as_the_chosen_kind() -> None:
    """l_adp, the kind it chose, l_adp again, on one question: ε∞ once, then the repeat charge
    (one memo label: the same PRRs, a repeat, not a new question)."""
    spec = population(n=300, budget=1.5)
    oracle = InProcessLROracle(spec)
    users = np.arange(spec.size)
    for kind in ("l_adp", "l_osue", "l_adp"):
        (rep,) = await Session(oracle, SessionKind.NON_INTERACTIVE, name=kind).round([Request.of(users, RandomizerSpec(kind, PREFIX, 1.0, {"epsilon_1": 0.5}))])
        assert (rep.status == Status.ANSWERED).all()  # a new question would cost ε∞ again: 2 > 1.5, refused
    assert (np.asarray(oracle.ledger_spent_units()) == charge_units(1.0) + 2 * charge_units(MEMO_REPEAT_EPSILON)).all()
