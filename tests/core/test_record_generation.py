"""Record generation is bit-identical to its first implementation.

``generate_records`` writes features and labels straight into the output (``Uniform.sample_into``)
and computes parities by XOR instead of an int64 matrix product (``ParityConcept.predict``,
``MaskedParityConcept.predict``): about 3× faster. Records of a seeded population are part of
every quoted result, so they must not change by a single bit: this file keeps the previous
implementation verbatim (``_old_*``) and compares on several classes, seeds, label noise and user
ranges that cross chunk boundaries. Deterministic: no false alarms. Each comparison is shown to
catch a difference by a deliberately broken variant (one flipped label; x read least significant
bit first).
"""

from __future__ import annotations

import numpy as np
import pytest

from ldp.core import population as population_module
from ldp.core.concepts import (
    ConjunctionConcept,
    MaskedParityConcept,
    ParityConcept,
    PointMixture,
    ProductBernoulli,
    Uniform,
    concept_class,
)
from ldp.core.population import RECORD_CHUNK, PopulationSpec, generate_records
from ldp.core.rng import RandomSource, Streams, generator
from ldp.core.schema import RECORD_DTYPE

# --- the previous implementation, verbatim (population.py and concepts.py before the rewrite) ---


def _old_uniform_sample(schema, randomness) -> np.ndarray:  # type: ignore[no-untyped-def]
    out = np.empty((len(randomness.users), schema.width - schema.fields[-1].length), dtype=np.int16)
    column = draw = 0
    for f in schema.fields[:-1]:
        if f.cardinality == 2:
            for lo in range(0, f.length, 64):
                take = min(64, f.length - lo)
                bits = np.unpackbits(randomness.bits(draw).astype(">u8").view(np.uint8).reshape(-1, 8), axis=1, count=take)
                out[:, column : column + take] = f.low + f.step * bits
                draw += 1
                column += take
            continue
        for _ in range(f.length):
            out[:, column] = f.low + f.step * np.minimum((randomness.uniform(draw) * f.cardinality).astype(np.int64), f.cardinality - 1)
            draw += 1
            column += 1
    return out


def _old_predict(target, features: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    if isinstance(target, ParityConcept):
        return ((features[:, : len(target.r)] @ np.asarray(target.r, dtype=np.int64)) & 1).astype(np.int16)
    if isinstance(target, MaskedParityConcept):
        d = len(target.r)
        r = np.asarray(target.r, dtype=np.int64)
        x, i, b = features[:, :d].astype(np.int64), features[:, d].astype(np.int64), features[:, d + 1]
        masked = (x @ r + target.a) & 1
        revealed = r[i]
        bit = np.where(b == 0, masked, revealed)
        return (1 - 2 * bit).astype(np.int16)
    return target.predict(features)  # unchanged classes


def _old_chunk(spec: PopulationSpec, first_user: int, count: int, *, sample=None, predict=_old_predict) -> np.ndarray:  # type: ignore[no-untyped-def]
    users = np.arange(first_user, first_user + count, dtype=np.int64)
    source = RandomSource(seed=int(spec.seed))
    randomness = source.for_request(Streams.RECORDS, 0, users)
    if isinstance(spec.distribution, Uniform):
        features = (sample or _old_uniform_sample)(spec.schema, randomness)
    else:
        features = spec.distribution.sample(spec.schema, randomness, spec.target)
    labels = predict(spec.target, features).astype(np.int64)
    if spec.label_noise > 0:
        flip = source.for_request(Streams.RECORDS, 1, users).uniform(0) < spec.label_noise
        label_field = spec.schema.fields[-1]
        flipped = -labels if label_field.low == -1 else 1 - labels
        labels = np.where(flip, flipped, labels)
    return np.concatenate([features, labels[:, None]], axis=1).astype(RECORD_DTYPE)


def old_generate_records(spec: PopulationSpec, first_user: int, count: int, **kw) -> np.ndarray:  # type: ignore[no-untyped-def]
    if count <= RECORD_CHUNK:
        return _old_chunk(spec, first_user, count, **kw)
    out = np.empty((count, spec.schema.width), dtype=RECORD_DTYPE)
    for lo in range(0, count, RECORD_CHUNK):
        hi = min(count, lo + RECORD_CHUNK)
        out[lo:hi] = _old_chunk(spec, first_user + lo, hi - lo, **kw)
    return out


# --- the comparisons ---


def _spec(name: str, d: int, seed: int, size: int, **kw) -> PopulationSpec:  # type: ignore[no-untyped-def]
    cc = concept_class(name, d)
    return PopulationSpec(cc, cc.random_target(generator(seed, "records-test", name, d)), size=size, seed=seed, **kw)


CASES = [
    ("masked_parity", 2, {}),
    ("masked_parity", 5, {"label_noise": 0.2}),
    ("masked_parity", 20, {}),
    ("masked_parity", 24, {}),
    ("masked_parity", 62, {}),
    ("parity", 3, {}),
    ("parity", 16, {"label_noise": 0.1}),
    ("parity", 70, {}),  # x spans two 64-bit draws
    ("parity", 130, {}),
    ("threshold", 10, {}),
    ("conjunction", 12, {"label_noise": 0.3}),
]


@pytest.mark.parametrize(("name", "d", "extra"), CASES)
def test_records_are_bit_identical_to_the_previous_implementation(name: str, d: int, extra: dict) -> None:  # type: ignore[type-arg]
    for seed in (0, 7, 2**63 + 5):
        spec = _spec(name, d, seed, 3 * RECORD_CHUNK, **extra)
        for first, count in ((0, 1000), (RECORD_CHUNK - 17, RECORD_CHUNK + 40), (5, 0)):
            new = generate_records(spec, first, count)
            old = old_generate_records(spec, first, count)
            assert new.dtype == old.dtype == RECORD_DTYPE and new.shape == old.shape
            assert np.array_equal(new, old), (name, d, seed, first, count)


def test_other_distributions_are_bit_identical() -> None:
    """Distributions without their own ``sample_into`` go through ``sample`` and a copy."""
    point = concept_class("point", 6)
    target = point.random_target(generator(1, "p"))
    bern = concept_class("parity", 9)
    for spec in (
        PopulationSpec(point, target, size=5000, seed=3, distribution=PointMixture(0.3)),
        PopulationSpec(bern, bern.random_target(generator(2, "q")), size=5000, seed=4, distribution=ProductBernoulli(0.2), label_noise=0.1),
    ):
        assert np.array_equal(generate_records(spec, 100, 4000), old_generate_records(spec, 100, 4000))


def test_the_comparison_catches_a_changed_record() -> None:
    """Broken variants: x read least significant bit first, or one label flipped, are caught."""
    spec = _spec("masked_parity", 20, 0, 5000)
    new = generate_records(spec, 0, 5000)

    def lsb_first(schema, randomness):  # type: ignore[no-untyped-def]
        out = _old_uniform_sample(schema, randomness)
        out[:, :20] = out[:, :20][:, ::-1]
        return out

    assert not np.array_equal(new, old_generate_records(spec, 0, 5000, sample=lsb_first))

    def one_wrong(target, features):  # type: ignore[no-untyped-def]
        labels = _old_predict(target, features).copy()
        labels[1234] = -labels[1234]
        return labels

    assert not np.array_equal(new, old_generate_records(spec, 0, 5000, predict=one_wrong))


def test_parity_predict_matches_the_matrix_product_on_any_integers() -> None:
    """The XOR form equals (x @ r) & 1 for every integer dtype and any values (not only 0/1),
    and takes the product otherwise (floats: a TypeError, as before); MASKED-PARITY likewise,
    for both values of a."""
    rng = np.random.default_rng(5)
    r = tuple(int(v) for v in rng.integers(0, 2, 30))
    for dtype in (np.int16, np.int64, np.uint8, np.int8, np.uint32, np.bool_):
        x = rng.integers(-300 if np.issubdtype(dtype, np.signedinteger) else 0, 300, (2000, 33)).astype(dtype)
        assert np.array_equal(ParityConcept(r).predict(x), _old_predict(ParityConcept(r), x))
        assert ParityConcept(r).predict(x).dtype == np.int16
    with pytest.raises(TypeError):
        ParityConcept(r).predict(np.ones((3, 30)))
    x = rng.integers(0, 2, (3000, 32)).astype(np.int16)
    x[:, 30] = rng.integers(0, 30, 3000)
    for a in (0, 1):
        target = MaskedParityConcept(r, a)
        assert np.array_equal(target.predict(x), _old_predict(target, x))
    assert np.array_equal(ParityConcept((0,) * 30).predict(x), np.zeros(3000, dtype=np.int16))
    assert np.array_equal(ConjunctionConcept(((0, 1),)).predict(x), (x[:, 0] == 1).astype(np.int16))


def test_generation_is_faster_than_the_previous_implementation() -> None:
    """Not a timing assertion on a shared machine (that would be flaky): the new path must not
    build the int64 copy of x that dominated the old one; checked by the memory it allocates."""
    import tracemalloc

    spec = _spec("masked_parity", 24, 1, RECORD_CHUNK)
    generate_records(spec, 0, RECORD_CHUNK)  # warm caches (cipher contexts, imports)
    peaks = []
    for gen in (generate_records, old_generate_records):
        tracemalloc.start()
        gen(spec, 0, RECORD_CHUNK)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[0] < 0.5 * peaks[1], peaks
    assert population_module.RECORD_CHUNK == RECORD_CHUNK
