"""The committed generated code is what the .proto files produce (``make proto`` is not stale)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ldp.wire import codegen

pytestmark = pytest.mark.timeout(60)


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    fresh = codegen.generate(tmp_path)
    committed = codegen.generated_files()
    assert [p.name for p in fresh] == [p.name for p in committed], "generated file set differs: run `make proto`"
    assert {p.name for p in fresh} >= {"aggregator_pb2.py", "aggregator_pb2_grpc.py"}
    for new, old in zip(fresh, committed):
        assert new.read_bytes() == old.read_bytes(), f"{old} is stale: run `make proto` and commit the result"


def test_generated_imports_are_absolute() -> None:
    from ldp.wire.v1 import aggregator_pb2_grpc

    text = Path(aggregator_pb2_grpc.__file__).read_text()
    assert "from ldp.wire.v1 import aggregator_pb2" in text
