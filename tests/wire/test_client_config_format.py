"""The client configuration file (format 1) and the per-life report key (invariant I1).

- ``ClientConfig`` JSON carries ``"format": 1``; a file of another version (no format, another
  format, an unknown key, a value of the wrong type) is refused with the key's name, in one line,
  by the API and by ``python -m ldp.wire.client``.
- ``key_salt``: None draws one fresh salt per process life; b"" is the experiment vouching (the
  seeded key as is: bit-identical to the in-process oracle); the life key is HKDF-SHA256 of the
  long-term key and the salt, and a broken ``life_key`` that ignores the salt is caught.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from ldp.core.errors import ParameterError
from ldp.core.queries import QuerySpec
from ldp.core.randomizers import RandomizerSpec
from ldp.core.rng import KEY_BYTES, SALT_BYTES, life_key, new_life_salt
from ldp.local.messages import SessionKind
from ldp.local.oracle import InProcessLROracle
from ldp.local.session import Request, Session
from ldp.local.shard import Shard
from ldp.wire.client_config import FORMAT, ClientConfig
from tests.waits import PROCESS_WAIT_S
from tests.wire.wire_helpers import population

SPEC = population(n=200, budget=2.0, seed=5)


def _good() -> dict:
    return ClientConfig(population=SPEC, budget=1.0).to_json()


def test_a_configuration_round_trips_with_its_format() -> None:
    data = _good()
    assert data["format"] == FORMAT == 1 and data["key_salt"] is None
    assert ClientConfig.from_json(data) == ClientConfig(population=SPEC, budget=1.0)
    vouched = ClientConfig(population=SPEC, key_salt=b"")
    assert ClientConfig.loads(vouched.dumps()).key_salt == b""


BAD = [
    (lambda d: d.pop("format"), "no 'format' key"),
    (lambda d: d.update(format=2), "key 'format' is 2; this version of ldp reads format 1"),
    (lambda d: d.update(format="1"), "key 'format' is '1'"),
    (lambda d: d.update(format=True), "key 'format' is True"),
    (lambda d: d.update(extra=1), "unknown client configuration keys ['extra']"),
    (lambda d: d.update(budget="1.0"), "key 'budget' must be a number or null, got str"),
    (lambda d: d.update(budget=True), "key 'budget' must be a number or null, got bool"),
    (lambda d: d.update(population=[1]), "key 'population' must be an object or null, got list"),
    (lambda d: d.update(data_path=3), "key 'data_path' must be a string or null, got int"),
    (lambda d: d.update(ledgers=None), "key 'ledgers' must be a string, got NoneType"),
    (lambda d: d.update(report_key=12), "key 'report_key' must be a base64 string or null, got int"),
    (lambda d: d.update(key_salt="AAAA"), "a key salt has 16 bytes (or 0: the experiment vouches), got 3"),
    (lambda d: d.update(key_salt="%%"), "key_salt must be base64"),
]


@pytest.mark.parametrize(("edit", "message"), BAD, ids=[m for _, m in BAD])
def test_a_configuration_of_another_version_is_refused_naming_the_key(edit, message) -> None:
    data = _good()
    edit(data)
    with pytest.raises(ParameterError) as info:
        ClientConfig.loads(json.dumps(data))
    assert message in str(info.value)


def test_the_client_process_says_which_key_in_one_line() -> None:
    data = _good()
    data["budget"] = "plenty"
    proc = subprocess.run(
        [sys.executable, "-m", "ldp.wire.client", "--connect", "127.0.0.1:9", "--config", "-"], input=json.dumps(data).encode(), capture_output=True, timeout=PROCESS_WAIT_S
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "key 'budget' must be a number or null" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_life_keys() -> None:
    key = bytes(range(KEY_BYTES))
    a, b = new_life_salt(), new_life_salt()
    assert len(a) == SALT_BYTES and a != b
    assert life_key(key, None) == life_key(key, b"") == key  # the experiment vouches: the key as is
    assert life_key(key, a) == life_key(key, a) != life_key(key, b)
    assert len(life_key(key, a)) == KEY_BYTES and life_key(key, a) != key
    # RFC 5869 HKDF-SHA256 with this salt and info, computed by the standard library's HMAC.
    import hashlib
    import hmac

    prk = hmac.new(a, key, hashlib.sha256).digest()
    okm = hmac.new(prk, b"ldp.rng report key of one process life v1" + b"\x01", hashlib.sha256).digest()
    assert life_key(key, a) == okm


def test_a_process_life_has_one_salt_and_a_vouched_config_matches_the_oracle() -> None:
    fresh = ClientConfig(population=SPEC)
    assert fresh.life_salt() == ClientConfig(population=SPEC).life_salt()  # one per process life
    assert len(fresh.life_salt()) == SALT_BYTES
    assert ClientConfig(population=SPEC, key_salt=b"").life_salt() == b""


def _reports(shard: Shard) -> np.ndarray:
    from ldp.local.messages import Assignment, RoundRequest, Users

    spec = RandomizerSpec("binary_rr", QuerySpec("field", {"field": "x", "index": 0}), 1.0)
    reply = shard.answer(RoundRequest(1, SessionKind.NON_INTERACTIVE, 0, (Assignment(1, Users.range(0, shard.count), spec),)))
    return np.asarray(reply.results[0].values)


async def test_salts_change_the_coins_and_an_empty_salt_keeps_the_oracles_reports() -> None:
    """The same users, the same nonces: reports under two fresh salts are independent (agreement
    of two ε = 1 binary RR reports of the same bit: p² + (1−p)² ≈ 0.607, sd ≤ 0.035 over 200
    users, band ±0.25 = 7 sd: false alarm < 1e-11); the vouched salt gives the in-process
    oracle's reports bit for bit. Broken variant: the same salt twice agrees on every user."""
    vouched = _reports(ClientConfig(population=SPEC, key_salt=b"").shard(SPEC, 0, SPEC.size, ClientConfig(population=SPEC).open_store()))
    (oracle,) = await Session(InProcessLROracle(SPEC), SessionKind.NON_INTERACTIVE).round(
        [Request.of(range(SPEC.size), RandomizerSpec("binary_rr", QuerySpec("field", {"field": "x", "index": 0}), 1.0))]
    )
    assert np.array_equal(vouched, oracle.values)
    one, two = (_reports(Shard(SPEC, 0, SPEC.size, key_salt=new_life_salt())) for _ in range(2))
    p = np.e / (1 + np.e)
    assert abs(float(np.mean(one == two)) - (p * p + (1 - p) ** 2)) < 0.25
    salt = new_life_salt()
    same = [_reports(Shard(SPEC, 0, SPEC.size, key_salt=salt)) for _ in range(2)]
    assert float(np.mean(same[0] == same[1])) == 1.0  # what a repeated life would do
