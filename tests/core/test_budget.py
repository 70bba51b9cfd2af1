"""The per-user ledger (KLNRS Def. 4.4): exact, conservative, refusals change nothing."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldp.core.budget import UNIT_BITS, Ledger, allowance_units, charge_units
from ldp.core.errors import ParameterError


def test_ten_charges_of_a_tenth_against_one():
    """Documented in ldp.core.budget: float 0.1 > 1/10, so the tenth charge is refused."""
    ledger = Ledger(0, 1, 1.0)
    outcomes = [bool(ledger.charge(np.array([0]), 0.1).accepted[0]) for _ in range(10)]
    assert outcomes == [True] * 9 + [False]
    assert Fraction(0.1) * 10 > 1  # the reason, exactly
    # eight charges of 0.125 (exact in binary) spend it all
    ledger = Ledger(0, 1, 1.0)
    assert all(ledger.charge(np.array([0]), 0.125).accepted[0] for _ in range(8))
    assert not ledger.charge(np.array([0]), 2.0**-30).accepted[0]


def test_units_round_conservatively():
    assert charge_units(0.1) == 28147497671066
    assert allowance_units(1.0) == 2**UNIT_BITS
    for eps in [0.1, 1 / 3, 2.0**-30, 0.7]:
        assert Fraction(charge_units(eps), 2**UNIT_BITS) >= Fraction(eps)
        assert Fraction(allowance_units(eps), 2**UNIT_BITS) <= Fraction(eps)


def test_refused_users_get_no_charge_and_others_pay():
    ledger = Ledger(100, 4, 1.0)
    ledger.charge(np.array([100, 101]), 0.75)
    result = ledger.charge(np.array([100, 101, 102, 103]), 0.5)
    assert result.accepted.tolist() == [False, False, True, True]
    assert ledger.spent().tolist() == [0.75, 0.75, 0.5, 0.5]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, -1.0, 5e-324, 1e-310, 1e308])
def test_invalid_charges_raise_and_leave_the_ledger_unchanged(bad):
    ledger = Ledger(0, 3, 1.0)
    ledger.charge(np.array([1]), 0.25)
    before = ledger.spent_units()
    with pytest.raises(ParameterError, match="epsilon"):
        ledger.charge(np.array([0, 1, 2]), bad)
    assert np.array_equal(ledger.spent_units(), before)


def test_users_outside_the_ledger_are_an_error():
    ledger = Ledger(10, 5, 1.0)
    with pytest.raises(ParameterError, match="10..14"):
        ledger.charge(np.array([9]), 0.1)


def test_repeated_user_in_one_call_pays_per_occurrence():
    ledger = Ledger(0, 1, 1.0)
    result = ledger.charge(np.array([0, 0, 0]), 0.5)
    assert result.accepted.tolist() == [True, True, False]


epsilons = st.one_of(
    st.floats(min_value=2.0**-30, max_value=4.0, allow_nan=False),
    st.sampled_from([0.1, 1 / 3, 0.5, 1.0, 2.0, 1.999999999, 2.000000001]),
)


@settings(max_examples=200, deadline=None)
@given(
    budget=st.sampled_from([0.5, 1.0, 1 / 3, 2.0, 2.0**-20]),
    requests=st.lists(st.tuples(st.lists(st.integers(0, 7), min_size=1, max_size=8), epsilons), max_size=40),
)
def test_no_user_ever_exceeds_its_budget(budget, requests):
    """Property (hypothesis): for any request sequence, accepted totals (exact Fractions of the
    floats charged) stay ≤ the budget, and each refusal was necessary."""
    ledger = Ledger(0, 8, budget)
    exact = [Fraction(0)] * 8
    for users, eps in requests:
        result = ledger.charge(np.array(users), eps)
        for user, ok in zip(users, result.accepted):
            if ok:
                exact[user] += Fraction(eps)
            else:  # refused: paying would have overspent in units (the conservative rule)
                assert Fraction(int(ledger.spent_units(np.array([user]))[0]) + charge_units(eps), 2**UNIT_BITS) > Fraction(
                    allowance_units(budget), 2**UNIT_BITS
                )
    assert all(total <= Fraction(budget) for total in exact)
