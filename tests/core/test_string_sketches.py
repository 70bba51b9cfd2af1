"""Apple's sketches over an open domain of strings (``cms_string``, ``hcms_string``;
``ldp.core.sketches``, ``ldp.core.string_hashing``, ``ldp.core.string_column``): the fingerprint,
the 8-byte tabulation, the unchanged privacy audit, the estimator of candidate strings with its
variance, and the trust model (nothing the strings hold is in the users' public description).

Exact audits and probes are deterministic (no false alarms). Every statistical test is seeded and
states its false-alarm rate: the probability, were the code correct, that it would fail for a
fresh seed (ALPHA = 10^-6 per check, Bonferroni over its tests). Each is run on a broken variant
written here that it must catch: CMS flipping at ε instead of ε/2 (loss 2ε), a hash that reads 2
of the fingerprint's 8 bytes (caught by the probe, and by the estimate of a candidate whose
fingerprint shares those bytes with a frequent string), and the reference variance at small K.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats

from ldp.core.errors import ParameterError
from ldp.core.frequency_oracles import SymmetricUnaryEncoding
from ldp.core.query_specs import field_query, record_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.rng import RandomSource
from ldp.core.schema import Field, Schema
from ldp.core.sketches import (
    CountMeanSketch,
    HadamardCountMeanSketch,
    OpenDomainSketch,
    StringCountMeanSketch,
    StringHadamardCountMeanSketch,
    enumerated_sketch,
    hash_tables,
    key_tables,
    sketch_probe,
    verify_sketch,
)
from ldp.core.string_column import read_string_column, string_column
from ldp.core.string_hashing import FINGERPRINT_PERSON, fingerprint, fingerprint_schema, fingerprints, key_records, record_keys
from ldp.wire.codec import report_format

STRING_SKETCHES = [StringCountMeanSketch, StringHadamardCountMeanSketch]
ALPHA = 1e-6


# --- the fingerprint and the records ---


def test_the_fingerprint_is_personalized_blake2b_big_endian() -> None:
    for s in ("", "a", "😀", "naïve", "https://example.org/?q=1", "\ud800"):  # a lone surrogate passes through
        want = int.from_bytes(hashlib.blake2b(s.encode("utf-8", "surrogatepass"), digest_size=8, person=FINGERPRINT_PERSON).digest(), "big")
        assert fingerprint(s) == want
    assert fingerprints(["a", "b", "a"]).tolist() == [fingerprint("a"), fingerprint("b"), fingerprint("a")]
    assert fingerprint("é") != fingerprint("e\u0301")  # no normalization: code point for code point
    with pytest.raises(ParameterError, match="must be a string"):
        fingerprints(["a", 3])


def test_records_hold_the_key_exactly() -> None:
    keys = np.array([0, 1, 2**63, 2**64 - 1, 0x0123456789ABCDEF], dtype=np.uint64)
    rec = key_records(keys)
    assert rec.dtype == np.int16 and rec.shape == (5, 4)
    assert rec[0].tolist() == [-32768] * 4 and rec[3].tolist() == [32767] * 4
    np.testing.assert_array_equal(record_keys(rec), keys)
    np.testing.assert_array_equal(record_keys(rec.astype(np.float64)), keys)  # as the record query gives them


def test_tabulation_reads_every_byte_and_leaves_the_integer_tables_alone() -> None:
    R = StringCountMeanSketch(1.0, hashes=8, width=64, hash_seed=3)
    t = key_tables(3, 8, 64)
    assert t.shape == (8, 8, 256) and t.dtype == np.uint16 and int(t.max()) < 64
    key = 0x0102030405060708
    want = 0
    for b in range(8):
        want ^= int(t[5, b, (key >> (8 * b)) & 255])
    assert int(R.hash(np.array(5), np.array(key, dtype=np.uint64))) == want
    # the integer sketches' tables are their own stream, unchanged
    assert hash_tables(3, 8, 64).shape == (8, 2, 256)
    assert not np.array_equal(hash_tables(3, 8, 64), key_tables(3, 8, 64)[:, :2])


# --- exact privacy: the same structure as CMS and HCMS ---


@pytest.mark.parametrize("eps", [2.0**-6, 0.25, 1.0, 4.0, 12.0])
def test_structural_audit_passes_with_the_integer_kinds_loss(eps: float) -> None:
    """The loss of the string kinds is CMS's and HCMS's exactly: the report's law given h_j(y) is
    the same channel (the proof holds for any map to hash positions)."""
    for cls, base in ((StringCountMeanSketch, CountMeanSketch), (StringHadamardCountMeanSketch, HadamardCountMeanSketch)):
        audit = verify_sketch(cls(eps, hashes=64, width=32))
        assert audit.passed, audit
        assert audit.max_log_ratio == verify_sketch(base(eps, tuple(range(8)), hashes=64, width=32)).max_log_ratio
        assert sketch_probe(cls(eps, hashes=4, width=64, hash_seed=11)) == ""
        with pytest.raises(ParameterError, match="2\\^64 inputs"):
            enumerated_sketch(cls(eps, hashes=2, width=4))


@dataclass(frozen=True)
class StringCMSFlippingAtEpsilon(StringCountMeanSketch):
    """Coordinates flipped with 1/(1 + e^ε): the two that differ cost ε each, 2ε in all."""

    @property
    def channel(self) -> SymmetricUnaryEncoding:
        return SymmetricUnaryEncoding(2 * self.epsilon, tuple(float(i) for i in range(self.width)))


@dataclass(frozen=True)
class HashOfTwoBytes(StringCountMeanSketch):
    """Hashes the fingerprint's low 2 bytes only: fingerprints equal there collide in every row."""

    def hash(self, rows: np.ndarray, x: np.ndarray) -> np.ndarray:
        return super().hash(rows, np.asarray(x, dtype=np.uint64) & np.uint64(0xFFFF))


@dataclass(frozen=True)
class HCMSHashOfTwoBytes(StringHadamardCountMeanSketch):
    def hash(self, rows: np.ndarray, x: np.ndarray) -> np.ndarray:
        return super().hash(rows, np.asarray(x, dtype=np.uint64) & np.uint64(0xFFFF))


def test_the_audit_catches_the_broken_variants() -> None:
    for eps in (0.5, 1.0, 4.0):
        audit = verify_sketch(StringCMSFlippingAtEpsilon(eps, hashes=2, width=4))
        assert not audit.passed and audit.max_log_ratio == pytest.approx(2 * eps, rel=2**-6)
    assert "hash is not the tabulation's" in sketch_probe(HashOfTwoBytes(1.0, hashes=4, width=64))
    assert not verify_sketch(HashOfTwoBytes(1.0, hashes=4, width=64)).passed
    assert "Hadamard coefficient" in sketch_probe(HCMSHashOfTwoBytes(1.0, hashes=4, width=64))


# --- the estimator of candidate strings ---

WORDS = ["😀", "https://example.org/a", "naïve", "the", "❤️", "a b c", "日本", "x"]
COUNTS = np.array([1000, 400, 200, 150, 100, 80, 50, 20])  # a skewed population of n = 2000
ABSENT = ["never", "🦄"]


def _population() -> np.ndarray:
    return np.repeat(np.array(WORDS, dtype=object), COUNTS)


def _trials(make, strings: np.ndarray, candidates: list[str], trials: int, seed: int) -> np.ndarray:
    """One estimate of every candidate per trial; ``make(t)`` is trial t's sketch (its hash family)."""
    inputs = key_records(fingerprints(strings)).astype(np.float64)
    users = np.arange(len(strings))
    out = []
    for t in range(trials):
        R = make(t)
        reports = R.sample(R.check_inputs(inputs), RandomSource(seed).for_request("strings", t, users))
        out.append(R.estimate_counts(reports, candidates))
    return np.array(out)


def _mean_and_variance_ok(est: np.ndarray, mean: np.ndarray, var: np.ndarray) -> tuple[bool, bool]:
    """Per candidate: a two-sided z-test of the mean and a two-sided χ² test of the variance, each
    at ALPHA/(4c) (Bonferroni over 2c tests, two sides): false-alarm rate ≤ ALPHA = 10^-6 in all."""
    trials, c = est.shape
    z = (est.mean(axis=0) - mean) / np.sqrt(var / trials)
    mean_ok = bool(np.abs(z).max() <= stats.norm.isf(ALPHA / (4 * c)))
    ratio = (trials - 1) * est.var(axis=0, ddof=1) / var
    df = trials - 1
    var_ok = bool((stats.chi2.ppf(ALPHA / (4 * c), df) <= ratio).all() and (ratio <= stats.chi2.isf(ALPHA / (4 * c), df)).all())
    return mean_ok, var_ok


@pytest.mark.parametrize("cls", STRING_SKETCHES)
@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_unbiased_over_the_hash_family_with_the_exact_variance(cls: type[OpenDomainSketch], eps: float) -> None:
    """Fresh public family every trial (hash_seed = t), strings the server never saw listed: each
    candidate's mean is its true count (0 for the absent ones) and its variance is
    ``candidate_count_variance``'s. K = 4 and a skewed population make the family's term large,
    so the reference's formula (without it) is rejected. False alarms ≤ 10^-6 each."""
    K, m = 4, 16
    cands = WORDS + ABSENT
    est = _trials(lambda t: cls(eps, hashes=K, width=m, hash_seed=t), _population(), cands, 300, seed=int(eps) + 20)
    R = cls(eps, hashes=K, width=m)
    truth = np.append(COUNTS, [0, 0]).astype(np.float64)
    pairs = float((COUNTS * (COUNTS - 1.0)).sum())
    var = R.candidate_count_variance(truth, float(COUNTS.sum()), pairs)
    np.testing.assert_allclose(var[:8], R.count_variance(COUNTS))
    assert _mean_and_variance_ok(est, truth, var) == (True, True)
    reference = R.reference_count_variance(np.append(truth, 0.0))[:-1]
    assert _mean_and_variance_ok(est, truth, reference)[1] is False


def _low16_twin(word: str) -> str:
    """A string whose fingerprint has the same low 16 bits as ``word``'s (found by search, deterministic)."""
    want = fingerprint(word) & 0xFFFF
    i = 0
    while fingerprint(f"twin{i}") & 0xFFFF != want:
        i += 1
    return f"twin{i}"


def test_the_statistical_check_catches_a_hash_of_two_bytes() -> None:
    """An absent candidate whose fingerprint shares its low 2 bytes with the most frequent string:
    the broken hash collides them in every row and estimates the absent one at ≈ 1000; the same
    check (10^-6) passes the real hash on the same draws."""
    twin = _low16_twin(WORDS[0])
    cands = [WORDS[0], twin]
    truth = np.array([COUNTS[0], 0.0])
    pairs = float((COUNTS * (COUNTS - 1.0)).sum())
    for cls, broken in ((StringCountMeanSketch, HashOfTwoBytes), (StringHadamardCountMeanSketch, HCMSHashOfTwoBytes)):
        var = cls(1.0, hashes=4, width=16).candidate_count_variance(truth, float(COUNTS.sum()), pairs)
        good = _trials(lambda t, c=cls: c(1.0, hashes=4, width=16, hash_seed=t), _population(), cands, 200, seed=31)
        bad = _trials(lambda t, c=broken: c(1.0, hashes=4, width=16, hash_seed=t), _population(), cands, 200, seed=31)
        assert _mean_and_variance_ok(good, truth, var)[0] is True
        assert _mean_and_variance_ok(bad, truth, var)[0] is False
        assert bad[:, 1].mean() > 500


# --- the spec, the wire, the trust model ---


def test_kinds_build_from_a_spec_over_the_fingerprint_field_and_travel_the_wire_format() -> None:
    schema = fingerprint_schema("url")
    data = string_column(np.array(["a", "b", "a", "c"] * 500, dtype=object))
    records = data.records(0, data.size)
    for kind, cls in (("cms_string", StringCountMeanSketch), ("hcms_string", StringHadamardCountMeanSketch)):
        spec = RandomizerSpec(kind, record_query(), 4.0, {"hashes": 256, "width": 64, "hash_seed": 3})
        local = LocalRandomizer.build(spec, schema)
        assert isinstance(local.randomizer, cls) and local.epsilon == 4.0
        reports = local.apply(records, RandomSource(0).for_request(kind, 0, np.arange(data.size)))
        est = local.randomizer.estimate_counts(reports, ["a", "b", "zzz"])  # type: ignore[attr-defined]
        assert abs(est[0] - 1000) < 250 and abs(est[1] - 500) < 250 and abs(est[2]) < 250
        fmt = report_format(spec, schema)
        assert fmt.problem == "" and fmt.width == reports.shape[1] and fmt.first_outside(reports) is None
    with pytest.raises(ParameterError, match="fingerprint field"):
        LocalRandomizer.build(RandomizerSpec("cms_string", record_query(), 1.0), Schema((Field("x", 1, 0, 9),)))
    with pytest.raises(ParameterError):
        LocalRandomizer.build(RandomizerSpec("hcms_string", field_query("url", 0), 1.0), schema)
    with pytest.raises(ParameterError, match="unknown params"):
        LocalRandomizer.build(RandomizerSpec("cms_string", record_query(), 1.0, {"rows": 4}), schema)


def test_bad_inputs_get_one_line_errors() -> None:
    R = StringHadamardCountMeanSketch(1.0, hashes=4, width=8)
    with pytest.raises(ParameterError, match="candidate strings"):
        R.estimate_counts(np.zeros((1, 3), dtype=np.uint16))
    with pytest.raises(ParameterError, match="candidate strings"):
        R.estimate_counts(np.zeros((1, 3), dtype=np.uint16), "abc")
    with pytest.raises(ParameterError, match="open domain"):
        R.frequencies(np.zeros((1, 3), dtype=np.uint16))
    with pytest.raises(ParameterError, match="no categories"):
        StringCountMeanSketch(1.0, (0.0, 1.0))
    with pytest.raises(ParameterError, match="fingerprint chunk"):
        R.check_inputs(np.array([[0.5, 0, 0, 0]]))
    with pytest.raises(ParameterError, match="missing"):
        string_column(np.array(["a", None, "b"], dtype=object))
    with pytest.raises(ParameterError, match="must hold strings"):
        string_column(np.array(["a", 3], dtype=object))
    with pytest.raises(ParameterError, match="holds int64"):
        string_column(np.arange(3))


def test_the_public_description_holds_nothing_of_the_strings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Two columns of different strings describe the same schema (the trust model: a column of
    strings read without a schema never publishes its values), while a file read back gives the
    same records as the array."""
    a = string_column(np.array(["secret-1", "secret-2"] * 10, dtype=object))
    b = string_column(np.array(["other"] * 7, dtype=object))
    assert a.schema == b.schema == fingerprint_schema("value")
    assert "secret" not in repr(a) and "secret" not in str(a.schema)
    path = tmp_path / "w.csv"
    path.write_text("id,word\n" + "".join(f"{i}, {w} \n" for i, w in enumerate(["secret-1", "secret-2"] * 10)), encoding="utf-8")
    c = read_string_column(path, "word")
    np.testing.assert_array_equal(c.records(0, c.size), a.records(0, a.size))  # cells stripped, as ldp.core.datafile reads them
    path.write_text("id,word\n1,x\n2,\n", encoding="utf-8")
    with pytest.raises(ParameterError, match="1 missing value\\(s\\), the first at row 2"):
        read_string_column(path, "word")


def test_the_benchmark_runs_as_a_process() -> None:
    """``python benchmarks/string_sketches.py`` (docs/sketches.md), a small run as a real process."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, str(root / "benchmarks" / "string_sketches.py"), "--n", "3000", "--trials", "2", "--reps", "1", "--hashes", "64", "--width", "32"]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| CMS string | 1 |" in done.stdout and "| HCMS integer |" in done.stdout and "string ÷ integer users/s" in done.stdout
