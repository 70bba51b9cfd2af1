"""The multidimensional kinds over gRPC on the real data path: client processes serving their own
CSV file with its declared schema (``ldp.launch_data``) answer ``spl``, ``smp`` and ``rsfd`` bit
for bit as the in-process ``DataLROracle`` does (reports, refusals, ledgers), and the untrusted
aggregator checks each report's fixed-width row (``report_columns`` / ``report_domains``)
before it keeps a client's answer (issue 26)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ldp.core import multidimensional  # noqa: F401  (registers spl, smp, rsfd in this process)
from ldp.core.budget import charge_units
from ldp.core.datafile import load_data
from ldp.local.data_oracle import DataLROracle
from ldp.local.messages import SessionKind, Status
from ldp.local.oracle import LROracle
from ldp.local.session import Request, Session
from ldp.wire.codec import Expected, ReplyCheck, report_format
from ldp.wire.data_clients import launch_data
from ldp.wire.v1 import aggregator_pb2 as pb
from tests.local.test_multidimensional_kinds import KEY, spec, write_penguins
from tests.waits import PROCESS_WAIT_S

pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds


async def _script(oracle: LROracle) -> list:  # type: ignore[type-arg]
    """Two rounds of the three kinds over overlapping users, then a round that users who spent
    their budget are refused."""
    n = oracle.user_count
    out = []
    s = Session(oracle, SessionKind.INTERACTIVE, name="multidimensional")
    out += await s.round([Request.of(range(0, n // 2), spec("spl", 1.0, oracle="oue")), Request.of(np.arange(n // 2, n)[::-1], spec("smp", 1.0))])
    out += await s.round([Request.of(np.arange(0, n, 3), spec("rsfd", 1.0, variant="oue_r")), Request.of(np.arange(1, n, 3), spec("rsfd", 1.0, paper_epsilon=0.25))])
    # budget 2.5: users asked twice (1.0 + 1.0) have 0.5 left and are refused 0.75, the others answer
    out += await Session(oracle, SessionKind.NON_INTERACTIVE, name="last").round([Request.of(range(n), spec("smp", 0.75, oracle="sue"))])
    return out


async def test_multidimensional_reports_over_grpc_on_a_data_file_are_bit_identical(tmp_path: Path) -> None:
    path = tmp_path / "penguins.csv"
    write_penguins(path, 1501)
    schema = path.with_suffix(".schema.json")
    data = load_data(path, schema)
    local = DataLROracle(data, budget=2.5, key=KEY, shards=3)
    reference = await _script(local)
    statuses = reference[-1].status
    assert (statuses == Status.REFUSED).any() and (statuses == Status.ANSWERED).any()
    async with launch_data(path, schema, budget=2.5, key=KEY, processes=2) as oracle:
        got = await _script(oracle)
        ledger = np.asarray(await oracle.ledger_spent_units())
    assert len(got) == len(reference)
    for a, b in zip(reference, got):
        assert a.randomizer == b.randomizer and np.array_equal(a.status, b.status)
        assert a.values.dtype == b.values.dtype == np.uint16 and np.array_equal(a.values, b.values)
    shards = sorted(local._shards.values(), key=lambda s: s.first_user)  # noqa: SLF001 - the reference users' ledgers
    assert np.array_equal(ledger, np.concatenate([s.ledger.spent_units() for s in shards]))
    assert set(ledger.tolist()) == {2 * charge_units(1.0), charge_units(1.0) + charge_units(0.75)}  # the spec's ε per report


def _check(r, schema, values: np.ndarray) -> str:  # type: ignore[no-untyped-def]
    check = ReplyCheck("c0", 1, 1, [Expected(7, len(values), report_format(r, schema))])
    result = pb.Result(
        request_id=7, user_count=len(values), refused=np.packbits(np.zeros(len(values), dtype=bool)).tobytes(),
        dtype=values.dtype.newbyteorder("<").str, width=values.shape[1], values=values.tobytes(),
    )
    check.add(pb.RoundReply(session_id=1, round=1, results=[result]))
    return "; ".join(check.failures)


def test_the_aggregator_checks_the_report_rows(tmp_path: Path) -> None:
    """k = 3, 3, 2, 4. RS+FD[GRR]: 4 columns, column a an index < k_a; SPL[OUE]: each attribute's
    packed byte with its padding bits zero; SMP: [index < 4, value < 4]. Broken variants — an
    index past k_a, a padding bit set, an attribute index 4, a row one column short, another
    dtype — are refused."""
    write_penguins(tmp_path / "p.csv", 10)
    schema = load_data(tmp_path / "p.csv", tmp_path / "p.schema.json").schema
    u16 = np.uint16
    assert _check(spec("rsfd"), schema, np.array([[2, 2, 1, 3], [0, 0, 0, 0]], dtype=u16)) == ""
    assert "outside" in _check(spec("rsfd"), schema, np.array([[2, 2, 2, 3]], dtype=u16))  # female has 2 categories
    assert _check(spec("rsfd"), schema, np.array([[2, 2, 1]], dtype=u16)) != ""
    assert _check(spec("rsfd"), schema, np.array([[2, 2, 1, 3]], dtype=np.int16)) != ""
    assert _check(spec("spl", oracle="oue"), schema, np.array([[0b11100000, 0b10100000, 0b01000000, 0b11110000]], dtype=u16)) == ""
    assert _check(spec("spl", oracle="oue"), schema, np.array([[0b11110000, 0b10100000, 0b01000000, 0b11110000]], dtype=u16)) != ""
    assert _check(spec("spl", oracle="oue"), schema, np.array([[0b11100000, 0b10100000, 0b01000000, 256]], dtype=u16)) != ""
    assert _check(spec("smp"), schema, np.array([[3, 3], [0, 2]], dtype=u16)) == ""
    assert "outside" in _check(spec("smp"), schema, np.array([[4, 0]], dtype=u16))
