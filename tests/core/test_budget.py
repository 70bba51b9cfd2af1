"""The per-user ledger (KLNRS Def. 4.4): exact, conservative, refusals change nothing."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ldp.core.budget as budget_module
from ldp.core.budget import NONCE_LIMIT, UNIT_BITS, Charge, Ledger, allowance_units, charge_units
from ldp.core.errors import LDPError, ParameterError


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


# -- exactness at the boundary, each check also run against a broken ledger ------------------

QUARTER = 2**46  # units of ε = 0.25 (exact in binary)


def check_exact_allowance_then_one_unit_more(make_ledger) -> None:
    """Budget 1.0 = 2^48 units exactly. Three charges of 0.25 and a fourth of 0.25 spend it to
    the last unit: accepted. A fourth of 0.25 + 2^-48 (one unit more) instead: refused."""
    assert charge_units(0.25 + 2.0**-48) == QUARTER + 1  # the float is exact: one unit more
    exact = make_ledger(0, 1, 1.0)
    for _ in range(4):
        assert exact.charge(np.array([0]), 0.25).accepted[0]
    assert int(exact.spent_units()[0]) == exact.allowance == 2**48
    over = make_ledger(0, 1, 1.0)
    for _ in range(3):
        assert over.charge(np.array([0]), 0.25).accepted[0]
    result = over.charge(np.array([0]), 0.25 + 2.0**-48)
    assert not result.accepted[0], "a charge one unit (2^-48) past the allowance was accepted"
    assert int(over.spent_units()[0]) == 3 * QUARTER and int(over.nonces()[0]) == 3
    # the same boundary through initial state, a range and a repeat in one call
    near = make_ledger(0, 3, 1.0, spent=np.array([2**48 - QUARTER, 2**48 - QUARTER + 1, 0]))
    assert near.charge(np.arange(3), 0.25).accepted.tolist() == [True, False, True]
    near = make_ledger(0, 1, 1.0, spent=np.array([2**48 - 2 * QUARTER + 1]))
    assert near.charge(np.array([0, 0]), 0.25).accepted.tolist() == [True, False]


class OneUnitTooGenerous(Ledger):
    """Broken: accepts when spent + units ≤ allowance + 1."""

    def _room(self, spent):
        return self.allowance + 1 - spent


def test_one_unit_past_the_allowance_is_refused():
    check_exact_allowance_then_one_unit_more(Ledger)


def test_the_one_unit_check_catches_a_ledger_one_unit_too_generous():
    with pytest.raises(AssertionError, match="one unit"):
        check_exact_allowance_then_one_unit_more(OneUnitTooGenerous)


def check_charges_round_up() -> None:
    """ε = 0.25 + 2^-54 (exact float) is more than 2^46 units: four exceed a budget of 1.0 by
    2^-52 in exact arithmetic, so the fourth must be refused (it is, if the charge rounds up)."""
    eps = 0.25 + 2.0**-54
    assert Fraction(eps) * 4 > 1
    ledger = Ledger(0, 1, 1.0)
    outcomes = [bool(ledger.charge(np.array([0]), eps).accepted[0]) for _ in range(4)]
    assert outcomes == [True, True, True, False], "a charge rounded down let the total exceed the budget"


def check_budgets_round_down() -> None:
    """Budget 1 + 2^-52 is 2^48 + 1/16 units: rounded down, 2^48. Charges of 0.25, 0.25, 0.25 and
    0.25 + 2^-50 (2^46 + 1/4 → 2^46 + 1 units) total 1 + 2^-50 > the budget: the last is refused
    (it is, if the budget rounds down to 2^48; rounded up to 2^48 + 1 it would fit)."""
    budget = 1.0 + 2.0**-52
    assert Fraction(0.25) * 3 + Fraction(0.25 + 2.0**-50) > Fraction(budget)
    ledger = Ledger(0, 1, budget)
    for _ in range(3):
        assert ledger.charge(np.array([0]), 0.25).accepted[0]
    assert not ledger.charge(np.array([0]), 0.25 + 2.0**-50).accepted[0], "a budget rounded up let the total exceed it"


def test_charges_round_up_and_budgets_round_down():
    check_charges_round_up()
    check_budgets_round_down()


def test_the_rounding_checks_catch_the_wrong_rounding(monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(budget_module, "charge_units", lambda eps: math.floor(Fraction(eps) * 2**UNIT_BITS))
        with pytest.raises(AssertionError, match="rounded down"):
            check_charges_round_up()
    with monkeypatch.context() as m:
        m.setattr(budget_module, "allowance_units", lambda eps: math.ceil(Fraction(eps) * 2**UNIT_BITS))
        with pytest.raises(AssertionError, match="rounded up"):
            check_budgets_round_down()


# -- nonces --------------------------------------------------------------------------------


def test_a_charge_returns_each_accepted_report_its_nonce():
    ledger = Ledger(10, 5, 1.0)
    first = ledger.charge(np.arange(10, 15), 0.5)
    assert first.nonces.dtype == np.uint64 and first.nonces.tolist() == [0] * 5
    assert first.users.dtype == np.int64 and first.users.tolist() == list(range(10, 15)) and first.span == (10, 15)
    second = ledger.charge(np.array([14, 11, 12]), 0.25)
    assert second.nonces.tolist() == [1, 1, 1] and second.span is None
    ledger.charge(np.array([12]), 0.25)
    third = ledger.charge(np.arange(10, 15), 0.5)  # 11, 12, 14 can no longer pay 0.5
    assert third.accepted.tolist() == [True, False, False, True, False]
    assert third.nonces.tolist() == [1, 1]
    assert ledger.nonces().tolist() == [2, 2, 3, 2, 2]
    assert ledger.nonces(np.array([12])).tolist() == [3]


def test_repeats_in_one_call_get_consecutive_nonces():
    ledger = Ledger(0, 3, 1.0)
    ledger.charge(np.array([1]), 0.5)
    result = ledger.charge(np.array([2, 1, 2, 1, 2, 0, 2]), 0.25)
    assert result.accepted.tolist() == [True, True, True, True, True, True, True]
    assert result.nonces.tolist() == [0, 1, 1, 2, 2, 0, 3]
    again = ledger.charge(np.array([2, 0, 2]), 0.25)
    assert again.accepted.tolist() == [False, True, False]
    assert again.nonces.tolist() == [1]


def test_a_charge_that_would_take_a_nonce_to_2_48_is_refused():
    ledger = Ledger(0, 3, 1.0, nonces=np.array([NONCE_LIMIT - 3, NONCE_LIMIT - 2, NONCE_LIMIT - 1]))
    result = ledger.charge(np.arange(3), 2.0**-30)
    assert result.accepted.tolist() == [True, True, False]
    assert result.nonces.tolist() == [NONCE_LIMIT - 3, NONCE_LIMIT - 2]
    assert ledger.spent_units().tolist() == [2**18, 2**18, 0]  # refused: counted as refused, not charged
    assert ledger.charge(np.array([0, 0, 1]), 2.0**-30).accepted.tolist() == [True, False, False]
    assert int(ledger.nonces().max()) == NONCE_LIMIT - 1
    assert not ledger.can_charge(np.arange(3), 2.0**-30).any()
    with pytest.raises(ParameterError, match="nonces"):
        Ledger(0, 1, 1.0, nonces=np.array([NONCE_LIMIT], dtype=np.uint64))


def reference_charge(spent, nonces, allowance, users, units):
    """Occurrence by occurrence, one user at a time: the definition."""
    accepted, used = [], []
    for u in users:
        ok = spent[u] + units <= allowance and nonces[u] + 1 < NONCE_LIMIT
        accepted.append(ok)
        if ok:
            used.append(nonces[u])
            spent[u] += units
            nonces[u] += 1
    return accepted, used


@settings(max_examples=200, deadline=None)
@given(
    budget=st.sampled_from([0.5, 1.0, 1 / 3, 2.0]),
    start=st.lists(st.integers(0, 3), min_size=6, max_size=6),
    requests=st.lists(
        st.tuples(st.one_of(st.lists(st.integers(0, 5), max_size=12), st.tuples(st.integers(0, 5), st.integers(0, 6))), epsilons),
        max_size=25,
    ),
)
def test_vectorized_charges_match_one_at_a_time(budget, start, requests):
    """Property: ranges, distinct ids and repeats give the reference's acceptances and nonces."""
    initial_nonces = np.array([NONCE_LIMIT - 1 - s for s in start])  # some users near the nonce limit
    ledger = Ledger(0, 6, budget, nonces=initial_nonces)
    spent, nonces = [0] * 6, initial_nonces.tolist()
    for users, eps in requests:
        if isinstance(users, tuple):
            users = list(range(users[0], min(6, users[0] + users[1])))
        result = ledger.charge(np.array(users, dtype=np.int64), eps)
        accepted, used = reference_charge(spent, nonces, ledger.allowance, users, charge_units(eps))
        assert result.accepted.tolist() == accepted
        assert result.nonces.tolist() == used
        assert ledger.spent_units().tolist() == spent
        assert ledger.nonces().tolist() == nonces


# -- refunds and the pending list ------------------------------------------------------------


def check_refund_restores(make_ledger) -> None:
    """Each kind of charge (a range, distinct ids, repeats with refusals), refunded alone, and
    then all three in reverse order: spent units, nonces and the pending list as before."""
    kinds = [(np.arange(1, 5), 0.5), (np.array([5, 0, 3]), 0.25), (np.array([2, 2, 2, 0]), 0.25)]
    for subset in [[0], [1], [2], [0, 1, 2]]:
        ledger = make_ledger(0, 6, 1.0, journal=True)
        kept = ledger.charge(np.arange(6), 0.25)
        before = (ledger.spent_units(), ledger.nonces())
        charges = [ledger.charge(*kinds[k]) for k in subset]
        assert ledger.pending() == [kept, *charges]
        for charge in reversed(charges):
            ledger.refund(charge)
        assert np.array_equal(ledger.spent_units(), before[0]), "refund left spent units changed"
        assert np.array_equal(ledger.nonces(), before[1]), "refund left nonces changed"
        assert ledger.pending() == [kept]


class RefundForgetsNonces(Ledger):
    """Broken: a refund that gives back the budget but not the nonces."""

    def refund(self, charge):
        kept = self._nonces.copy()
        super().refund(charge)
        self._nonces[:] = kept


def test_refund_restores_exactly():
    check_refund_restores(Ledger)


def test_the_refund_check_catches_a_refund_that_keeps_nonces():
    with pytest.raises(AssertionError, match="nonces"):
        check_refund_restores(RefundForgetsNonces)


def test_refund_only_the_most_recent_uncommitted_charge():
    ledger = Ledger(0, 3, 1.0, journal=True)
    older = ledger.charge(np.arange(3), 0.25)
    newer = ledger.charge(np.array([1]), 0.25)
    state = (ledger.spent_units(), ledger.nonces())
    with pytest.raises(LDPError, match="most recent"):
        ledger.refund(older)  # user 1 was charged again since
    assert np.array_equal(ledger.spent_units(), state[0]) and np.array_equal(ledger.nonces(), state[1])
    ledger.refund(newer)
    with pytest.raises(LDPError, match="pending"):
        ledger.refund(newer)  # twice
    ledger.mark_committed()
    assert ledger.pending() == []
    with pytest.raises(LDPError, match="pending"):
        ledger.refund(older)  # committed: its reports may have left
    forged = Charge(np.array([True]), older.units, np.array([0], dtype=np.uint64), np.array([0]))
    with pytest.raises(LDPError):
        ledger.refund(forged)


def test_a_standalone_ledger_keeps_no_history_but_refunds_the_latest():
    ledger = Ledger(0, 4, 1.0)
    for _ in range(3):
        charge = ledger.charge(np.arange(4), 0.25)
    assert ledger.pending() == []
    ledger.refund(charge)
    assert ledger.nonces().tolist() == [2] * 4 and ledger.spent_units().tolist() == [2 * QUARTER] * 4
    with pytest.raises(LDPError, match="most recent"):
        ledger.refund(charge)


def test_initial_state_is_validated_and_copied():
    spent = np.array([5, 0], dtype=np.int64)
    ledger = Ledger(0, 2, 1.0, spent=spent, nonces=np.array([1, 2], dtype=np.uint64))
    spent[0] = 99
    assert ledger.spent_units().tolist() == [5, 0] and ledger.nonces().tolist() == [1, 2]
    with pytest.raises(ParameterError, match="spent"):
        Ledger(0, 2, 1.0, spent=np.array([1, -1]))
    with pytest.raises(ParameterError, match="spent"):
        Ledger(0, 2, 1.0, spent=np.array([1.5, 0.0]))
    with pytest.raises(ParameterError, match="nonces"):
        Ledger(0, 2, 1.0, nonces=np.array([0]))
