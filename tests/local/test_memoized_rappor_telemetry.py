"""Full RAPPOR (``rappor``) and Microsoft's memoized telemetry (``dbitflip_pm``,
``alpha_one_bit_mean``) asked in rounds, answered by a ``Shard`` (issue 26).

The invariants, each through the door a round uses (sessions on an LR oracle; over gRPC in
tests/wire/test_rappor_telemetry_grpc.py):

- **every report is what the public functions compute** from the memo key derived from the
  *long-term* report key (``memo_key``) and the ledger's nonces: RAPPOR's IRR (nonce t: round t's
  fresh coins) of the PRR of the user's string in the user's cohort; dBitFlipPM's and α-rounded
  1BitMean's memoized reports under ``memo_subkey(memo, "kind " + memo_label)`` (the same every
  round: they have no per-report coin);
- **the charge**: a user's first report of a label costs ε, every later one 2^-30; without a
  memo key (no shard) sampling is refused;
- **what the memo protects**: T = 100 rounds of an unchanged bit are decoded no better than one
  ε∞ report allows; broken variants with the permanent coins redrawn per report are decoded
  nearly always.

Seeded and deterministic except the attacks, whose false-alarm rate is stated there.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldp.core import rappor as rappor_mod
from ldp.core import telemetry
from ldp.core.budget import charge_units
from ldp.core.errors import LDPError, ParameterError
from ldp.core.longitudinal import MEMO_REPEAT_EPSILON, memo_key
from ldp.core.queries import QuerySpec
from ldp.core.query_specs import field_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rappor import Rappor, cohorts, decode_repeated, instantaneous_response, permanent_response
from ldp.core.rng import RandomSource, UserRandomness
from ldp.core.telemetry import AlphaRoundedOneBitMean, DBitFlip, DBitFlipPM, memo_subkey
from ldp.local.messages import SessionKind, Status
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session
from tests.wire.wire_helpers import population

# 13 values: which of 12 candidate 4-bit prefixes of x a user holds, or none of them
PREFIX = QuerySpec("prefix_index", {"field": "x", "length": 4, "candidates": list(range(12))})
OTHER = QuerySpec("prefix_index", {"field": "x", "length": 3, "candidates": list(range(8))})
SPECS = {
    "rappor": RandomizerSpec("rappor", PREFIX, 2.0, {"k": 16, "h": 2, "m": 4}),
    "dbitflip_pm": RandomizerSpec("dbitflip_pm", PREFIX, 1.0, {"d": 3}),
    "alpha_one_bit_mean": RandomizerSpec("alpha_one_bit_mean", PREFIX, 1.0, {"s": 4}),
}


def _expected(spec, r: RandomizerSpec, users: np.ndarray, nonces: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    """What an honest shard must report, from the public functions and the long-term key."""
    local = LocalRandomizer.build(r, spec.concept_class.schema)
    R = local.randomizer
    values = local.inputs(spec.records(0, spec.size)[users], None)
    long_term = spec.report_key()
    memo = memo_key(long_term)
    if r.kind == "rappor":
        P = R.rappor  # type: ignore[attr-defined]
        strings = [R.strings[i] for i in np.searchsorted(np.asarray(R.categories), values)]  # type: ignore[attr-defined]
        c = cohorts(memo, users, P)
        prr = permanent_response(memo, users, strings, c, P, R.question)  # type: ignore[attr-defined]
        return R.join(instantaneous_response(prr, UserRandomness(long_term, users, nonces), P), c)  # type: ignore[attr-defined]
    key = memo_subkey(memo, "kind " + R.memo_label)  # type: ignore[attr-defined]
    if r.kind == "dbitflip_pm":
        buckets = np.searchsorted(np.asarray(R.categories), values)  # type: ignore[attr-defined]
        return R.pack(DBitFlipPM(DBitFlip(r.epsilon, 13, 3), key).report(users, buckets))  # type: ignore[attr-defined]
    return AlphaRoundedOneBitMean(r.epsilon, 12, 4, key).report(users, values.astype(np.int64))


async def _rounds(oracle: InProcessLROracle, specs: list[RandomizerSpec], users: np.ndarray):  # type: ignore[no-untyped-def]
    out = []
    for r in specs:
        (rep,) = await Session(oracle, SessionKind.NON_INTERACTIVE, name=r.kind).round([Request.of(users, r)])
        out.append(rep)
    return out


@pytest.mark.parametrize("kind", sorted(SPECS))
async def test_every_report_is_what_the_public_functions_compute_from_the_memo_key(kind: str) -> None:
    spec = population(n=400, budget=8.0)
    users = np.arange(spec.size)
    reps = await _rounds(InProcessLROracle(spec), [SPECS[kind]] * 3, users)
    for t, rep in enumerate(reps):
        assert (rep.status == Status.ANSWERED).all()
        assert np.array_equal(rep.values, _expected(spec, SPECS[kind], users, np.full(spec.size, t)))
    # RAPPOR draws a fresh IRR every round; the telemetry kinds repeat their memoized report
    assert np.array_equal(reps[0].values, reps[1].values) == (kind != "rappor")


@pytest.mark.parametrize("kind", sorted(SPECS))
async def test_the_first_report_costs_epsilon_and_every_later_one_the_minimum(kind: str) -> None:
    r = SPECS[kind]
    spec = population(n=200, budget=r.epsilon + 0.5)
    oracle = InProcessLROracle(spec)
    users = np.arange(spec.size)
    await _rounds(oracle, [r] * 5, users)
    assert (np.asarray(oracle.ledger_spent_units()) == charge_units(r.epsilon) + 4 * charge_units(MEMO_REPEAT_EPSILON)).all()
    # 0.5 left: the paid question still answers; another question (another query) is refused
    other = RandomizerSpec(r.kind, OTHER, r.epsilon, r.params)
    paid, new = await _rounds(oracle, [r, other], users)
    assert (paid.status == Status.ANSWERED).all() and (new.status == Status.REFUSED).all()


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_sampling_without_the_users_memo_key_is_refused(kind: str) -> None:
    local = LocalRandomizer.build(SPECS[kind], population(n=10).concept_class.schema)
    with pytest.raises(LDPError, match=f"{kind}: a memoized report needs the users' memo key"):
        local.randomizer.sample(np.zeros(3), RandomSource(0).for_request("x", 0, np.arange(3)))


def test_the_spec_epsilon_rules() -> None:
    """RAPPOR: without f, f comes from ε (the paper's 0.5 at ε∞ = 4 ln 3, h = 2); with f, ε must be
    its ε∞, else one line names both. The realized PRR ratio never exceeds e^ε."""
    schema = population(n=10).concept_class.schema
    paper = Rappor(128, 2, 64, 0.5, 0.5, 0.75)
    built = LocalRandomizer.build(RandomizerSpec("rappor", PREFIX, paper.epsilon_inf), schema).randomizer
    assert built.rappor == paper  # type: ignore[attr-defined]
    for eps in (0.1, 1.0, 3.0):
        R = LocalRandomizer.build(RandomizerSpec("rappor", PREFIX, eps, {"h": 3}), schema).randomizer.rappor  # type: ignore[attr-defined]
        assert R.permanent_loss <= eps and R.permanent_loss > eps - 1e-6  # as close as the 2^-32 grid allows
    with pytest.raises(ParameterError, match=r"rappor: the spec's epsilon=1.0 is not the ε∞ .* = 4.39444915467243\d* of f=0.5, h=2"):
        LocalRandomizer.build(RandomizerSpec("rappor", PREFIX, 1.0, {"f": 0.5}), schema)
    assert telemetry.value_grid("alpha_one_bit_mean", np.array([-1.0, -0.5, 1.0])) == (-1.0, 0.5, 4)  # a subset of a grid is fine
    with pytest.raises(ParameterError, match="alpha_one_bit_mean needs a query whose values lie on an evenly spaced grid"):
        telemetry.value_grid("alpha_one_bit_mean", np.array([0.0, 1.0, 2.5]))
    with pytest.raises(ParameterError, match="must divide"):
        LocalRandomizer.build(RandomizerSpec("alpha_one_bit_mean", PREFIX, 1.0, {"s": 5}), schema)
    with pytest.raises(ParameterError, match="sampled buckets d"):
        LocalRandomizer.build(RandomizerSpec("dbitflip_pm", PREFIX, 1.0, {"d": 14}), schema)


# --- what the memo protects: T = 100 rounds of one bit ---

BIT = field_query("x", 0)  # Bernoulli(0.3) per user: two values, "0" and "1"


def _balanced(guess: np.ndarray, truth: np.ndarray) -> float:
    """The mean over the two values of the per-value accuracy: for any decoder of an ε-LDP
    transcript it is at most e^ε/(e^ε + 1), whatever the prior (Σ_x P(g = x | x) ≤ e^ε·Σ_x P(g = x | x'))."""
    return float(np.mean([(guess[truth == v] == v).mean() for v in (0, 1)]))


async def _attack(kind: str, spec, asked: RandomizerSpec, T: int, memoized: bool = True) -> float:  # type: ignore[no-untyped-def]
    users = np.arange(spec.size)
    local = LocalRandomizer.build(asked, spec.concept_class.schema)
    truth = local.inputs(spec.records(0, spec.size), None).astype(np.int64)
    reps = await _rounds(InProcessLROracle(spec), [asked] * T, users)
    R = local.randomizer
    if kind == "rappor":
        bits_c = [R.split(rep.values) for rep in reps]  # type: ignore[attr-defined]
        counts = np.zeros((spec.size, R.rappor.k), dtype=np.int64)  # type: ignore[attr-defined]
        for b, _ in bits_c:
            counts += np.unpackbits(b, axis=1, count=R.rappor.k)  # type: ignore[attr-defined]
        guess = decode_repeated(counts, T, bits_c[0][1], R.strings, R.rappor, memoized=memoized)  # type: ignore[attr-defined]
    else:  # dbitflip_pm, k = d = 2: the vote of each bucket's bits
        votes = np.zeros((spec.size, 2))
        for rep in reps:
            j, b = R.unpack(rep.values)  # type: ignore[attr-defined]
            np.add.at(votes, (np.repeat(users, 2), j.ravel()), 2.0 * b.ravel() - 1.0)
        guess = (votes[:, 1] > votes[:, 0]).astype(np.int64)
    return _balanced(guess, truth)


@pytest.mark.parametrize("kind", ["rappor", "dbitflip_pm"])
async def test_what_the_memo_protects_over_100_rounds_and_the_unmemoized_variant_is_decoded(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """ε = 1 on one bit of x, 2000 users (≈ 600 with x0 = 1), T = 100 rounds. Memoized, the whole
    transcript is ε-LDP (RAPPOR: post-processing of the PRR; dBitFlipPM: one report repeated), so
    the balanced accuracy is ≤ e/(e + 1) = 0.731; its sd ≤ 0.5·sqrt(0.25/1300 + 0.25/500) ≤ 0.014,
    and the test allows 4.5 sd (false alarm < 10^-5). Broken variants (the permanent coins keyed
    anew each report): RAPPOR's PRR per report, dBitFlip's sample and bits per report; the same
    decoders are right for more than 0.9 of each value's users."""
    spec = population(n=2000, budget=2.0)
    asked = RandomizerSpec("rappor", BIT, 1.0, {"k": 8, "h": 1, "m": 2, "p": 0.125, "q": 0.875}) if kind == "rappor" else RandomizerSpec("dbitflip_pm", BIT, 1.0, {"d": 2})
    bound = math.e / (math.e + 1)
    memoized = await _attack(kind, spec, asked, 100)
    print(f"{kind} T = 100: balanced accuracy {memoized:.4f} against the ε bound {bound:.4f}")
    assert memoized < bound + 4.5 * 0.014
    fresh = iter(range(1 << 30))
    if kind == "rappor":
        real = rappor_mod.permanent_response

        def per_report(memo, users, strings, c, R, question=""):  # type: ignore[no-untyped-def]
            return real(memo, users, strings, c, R, f"{question}|report {next(fresh)}")

        monkeypatch.setattr(rappor_mod, "permanent_response", per_report)
    else:
        real_key = telemetry.memo_subkey

        def per_report_key(memo, purpose):  # type: ignore[no-untyped-def]
            return real_key(memo, f"{purpose}|report {next(fresh)}")

        monkeypatch.setattr(telemetry, "memo_subkey", per_report_key)
    broken = await _attack(kind, spec, asked, 100, memoized=False)  # the decoder for that channel
    print(f"{kind} without memoization: {broken:.4f}")
    assert broken > 0.9


def test_the_aggregators_estimates_from_one_round_are_unbiased() -> None:
    """One round of each kind through the randomizers' own estimators, 100000 seeded users:
    alpha_one_bit_mean's mean and dbitflip_pm's frequencies within 5 sd of the truth (false alarm
    < 10^-5 each); rappor's decoder detects the common value. Broken variant: 1BitMean of the
    value rounded down to the grid (no α) is off by ≈ 11 sd, and the same check refuses it."""
    schema = population(n=10).concept_class.schema
    n = 100_000
    users = np.arange(n)
    values = (np.arange(n) % 13 < 7).astype(np.float64) * (np.arange(n) % 13)  # 0 (7 in 13), 1..6
    draws = UserRandomness(bytes(32), users, 0, memo_key(bytes(32)))
    alpha = LocalRandomizer.build(SPECS["alpha_one_bit_mean"], schema).randomizer
    sd = telemetry.OneBitMean(1.0, 12.0).magnitude / math.sqrt(n)

    def close(bits: np.ndarray) -> bool:
        return abs(alpha.mean(bits) - values.mean()) < 5 * sd  # type: ignore[attr-defined]

    assert close(alpha.sample(values, draws))
    assert not close(telemetry.OneBitMean(1.0, 12.0).sample(4.0 * (values // 4), RandomSource(1).for_request("down", 0, users)))
    dbf = LocalRandomizer.build(SPECS["dbitflip_pm"], schema).randomizer
    freq = dbf.frequencies(dbf.sample(values, draws))  # type: ignore[attr-defined]
    truth = np.bincount(values.astype(np.int64), minlength=13) / n
    sds = np.sqrt(dbf.oracle.frequency_variance(truth * n))  # type: ignore[attr-defined]
    assert (np.abs(freq - truth) < 5 * sds).all()
    rap = LocalRandomizer.build(RandomizerSpec("rappor", PREFIX, 4.0, {"k": 32, "m": 8}), schema).randomizer
    decoded = rap.decode(rap.sample(values, draws))  # type: ignore[attr-defined]
    assert decoded.detected[0] and decoded.frequencies[0] > 0.3
