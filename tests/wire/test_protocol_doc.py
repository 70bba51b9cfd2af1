"""docs/protocol.md describes the protocol that proto/ldp/wire/v1/aggregator.proto defines.

Every message of the .proto appears in the doc's message block as ``Name{...}``, with every one of
its fields named inside its braces (oneof wrappers excepted), and the doc names no message or
field that does not exist. A renamed or added field fails this test until the doc follows.
"""

from __future__ import annotations

import re
from pathlib import Path

from ldp.wire.v1 import aggregator_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]
WRAPPERS = {"ClientMessage", "ServerMessage"}  # oneof envelopes, described by the arrows instead


def message_block() -> str:
    text = (ROOT / "docs" / "protocol.md").read_text()
    section = text.split("## Messages", 1)[1]
    return section.split("```", 2)[1]


def documented() -> dict[str, str]:
    """Message name → the text between its braces (outermost), from the doc's block."""
    block = message_block()
    out: dict[str, str] = {}
    for match in re.finditer(r"\b([A-Z][A-Za-z]+)\{", block):
        depth, start = 1, match.end()
        k = start
        while depth and k < len(block):
            depth += {"{": 1, "}": -1}.get(block[k], 0)
            k += 1
        out.setdefault(match.group(1), block[start : k - 1])
    return out


def test_every_message_and_field_is_documented() -> None:
    docs = documented()
    for name, descriptor in pb.DESCRIPTOR.message_types_by_name.items():
        if name in WRAPPERS:
            continue
        assert name in docs, f"docs/protocol.md does not show message {name}"
        for field in descriptor.fields:
            assert re.search(rf"\b{field.name}\b", docs[name]), f"{name}.{field.name} is missing from docs/protocol.md"


def test_the_doc_names_only_real_messages() -> None:
    real = set(pb.DESCRIPTOR.message_types_by_name)
    assert set(documented()) <= real, set(documented()) - real


def test_the_session_rules_match_the_code() -> None:
    from ldp.local.messages import SessionKind

    proto_text = (ROOT / "proto" / "ldp" / "wire" / "v1" / "aggregator.proto").read_text()
    for kind in SessionKind:
        assert f"{kind.value} {kind.name.lower().replace('_', '-')}" in proto_text
    doc = (ROOT / "docs" / "protocol.md").read_text()
    assert "a second round of a non-interactive session" in doc
