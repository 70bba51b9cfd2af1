"""RS+FD[ADP] (``rsfd`` with ``variant="adp"``) over gRPC on the real data path: client processes
serving their own CSV file answer bit for bit as the in-process ``DataLROracle`` does (reports,
refusals, ledgers), as tests/wire/test_multidimensional_grpc.py checks for the other variants.
At ε = 2.8 over the penguins schema (k = 3, 3, 2, 4, d = 4) ADP mixes its variants (OUE-z, OUE-z,
OUE-z, GRR), so both report blocks cross the wire in one row (issue 26)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ldp.core import multidimensional  # noqa: F401  (registers rsfd in this process)
from ldp.core.budget import charge_units
from ldp.core.datafile import load_data
from ldp.core.randomizers import LocalRandomizer
from ldp.local.data_oracle import DataLROracle
from ldp.local.messages import SessionKind, Status
from ldp.local.oracle import LROracle
from ldp.local.session import Request, Session
from ldp.wire.data_clients import launch_data
from tests.local.test_multidimensional_kinds import KEY, spec, write_penguins
from tests.waits import PROCESS_WAIT_S

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds


async def _script(oracle: LROracle) -> list:  # type: ignore[type-arg]
    """Round 1: even users at ε = 2.8 (mixed variants), odd users at 2.1 with the paper's ε = 1
    (ε′ = 2.07); round 2 at 2.0 with budget 4.5: the even users are refused, the odd answer."""
    n = oracle.user_count
    s = Session(oracle, SessionKind.INTERACTIVE, name="rsfd-adp")
    out = await s.round([Request.of(np.arange(0, n, 2), spec("rsfd", 2.8, variant="adp")), Request.of(np.arange(1, n, 2)[::-1], spec("rsfd", 2.1, variant="adp", paper_epsilon=1.0))])
    out += await s.round([Request.of(range(n), spec("rsfd", 2.0, variant="adp"))])
    return out


async def test_rsfd_adp_over_grpc_on_a_data_file_is_bit_identical(tmp_path: Path) -> None:
    path = tmp_path / "penguins.csv"
    write_penguins(path, 1201)
    schema = path.with_suffix(".schema.json")
    data = load_data(path, schema)
    assert LocalRandomizer.build(spec("rsfd", 2.8, variant="adp"), data.schema).randomizer.protocol.variants == ("oue-z", "oue-z", "oue-z", "grr")  # type: ignore[attr-defined]
    local = DataLROracle(data, budget=4.5, key=KEY, shards=3)
    reference = await _script(local)
    statuses = reference[-1].status
    assert (statuses[0::2] == Status.REFUSED).all() and (statuses[1::2] == Status.ANSWERED).all()
    async with launch_data(path, schema, budget=4.5, key=KEY, processes=2) as oracle:
        got = await _script(oracle)
        ledger = np.asarray(await oracle.ledger_spent_units())
    assert len(got) == len(reference)
    for a, b in zip(reference, got):
        assert a.randomizer == b.randomizer and np.array_equal(a.status, b.status)
        assert a.values.dtype == b.values.dtype == np.uint16 and np.array_equal(a.values, b.values)
    shards = sorted(local._shards.values(), key=lambda s: s.first_user)  # noqa: SLF001 - the reference users' ledgers
    assert np.array_equal(ledger, np.concatenate([s.ledger.spent_units() for s in shards]))
    assert ledger[0::2].tolist() == [charge_units(2.8)] * len(ledger[0::2])  # the spec's ε, per report
    assert ledger[1::2].tolist() == [charge_units(2.1) + charge_units(2.0)] * len(ledger[1::2])
