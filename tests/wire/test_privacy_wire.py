"""No record ever crosses the wire: capture every byte the client processes send during a full
session and look for the sentinel users' records in every encoding a leak could take.

The sentinels are users whose records hold d = 48 feature bits plus a label: 49 int16 values,
unique in the population with overwhelming probability (2^-48 per pair), and drawn by the clients
themselves from the population spec — exactly as every other record."""

from __future__ import annotations

import numpy as np
import pytest

from ldp.core.population import generate_records
from ldp.core.queries import QuerySpec
from ldp.local.messages import SessionKind
from ldp.local.session import Request, Session
from ldp.wire.launcher import launch_local
from ldp.wire.v1 import aggregator_pb2 as pb
from tests.wire.wire_helpers import BIT0, population, rr, scripted_sessions

pytestmark = pytest.mark.timeout(90)


def _encodings(record: np.ndarray) -> dict[str, bytes]:
    x = record[:-1]
    return {
        "int16": record.astype("<i2").tobytes(),
        "uint8": record.astype(np.uint8).tobytes(),
        "int64": record.astype("<i8").tobytes(),
        "float64": record.astype("<f8").tobytes(),
        "packed bits": np.packbits(x.astype(np.uint8)).tobytes(),
        "text": "".join(str(int(v)) for v in x).encode(),
        "json": ", ".join(str(int(v)) for v in x).encode(),
    }


async def test_no_record_crosses_the_wire() -> None:
    n = 4000
    spec = population(n=n, d=48, budget=1024.0, seed=1234)
    sentinels = [0, 1, 1999, 2000, n - 1]
    records = np.concatenate([generate_records(spec, u, 1) for u in sentinels])
    captured: list[bytes] = []
    async with launch_local(spec, processes=2, capture=captured) as oracle:
        await scripted_sessions(oracle)
        s = Session(oracle, SessionKind.INTERACTIVE)
        # Every randomizer kind, on everybody including the sentinels.
        await s.round(
            [
                Request.of(range(n), rr(0.5, QuerySpec("record"), "record_rr")),
                Request.of(range(n), rr(0.25, BIT0, "discrete_laplace")),
                Request.of(range(n), rr(0.25, QuerySpec("parity", {"mask": [1] * 48}), "binary_rr")),
            ]
        )
        await oracle.ledger_spent_units()
        session_bytes = list(captured)
        # Control: the search does find a record when one is sent (record_rr with ε = 1000 keeps
        # every column w.p. 1 − 10^-9, so its report *is* the record).
        captured.clear()
        (control,) = await s.round([Request.of(sentinels, rr(1000.0, QuerySpec("record"), "record_rr"))])
        np.testing.assert_array_equal(control.values, records)
        assert all(_encodings(r)["int16"] in b"".join(captured) for r in records)
    captured = session_bytes
    assert len(captured) > 10
    kinds = {pb.ClientMessage.FromString(m).WhichOneof("kind") for m in captured}
    assert kinds == {"hello", "ready", "reply", "ledger"}
    wire = b"\x00".join(captured)
    assert len(wire) > 8 * n  # the reports really are in there
    for user, record in zip(sentinels, records):
        for name, pattern in _encodings(record).items():
            assert pattern not in wire, f"user {user}'s record appears on the wire ({name} encoding)"
