"""Invariant I3 through the commands a user runs: nothing computed from the data's values leaves
before a charge; the public description is the schema the user declared.

Real processes: ``ldp-sim schema infer`` writes a draft on the user's machine, and ``ldp-sim
clients --data`` connects to a fake aggregator (``tests/wire/hostile.py``, which speaks the
.proto and keeps every byte it receives) on 127.0.0.1. Files of one and five rows (the issue's
``37,1,52``; odd ages and incomes in multiples of 3) are refused without ``--schema`` before
anything connects, and once the draft is declared, ``Ready.description_json`` carries exactly
that schema, nothing computed from the values (no field equals the exact min/max/gcd
inference). Broken variant: with the guards removed, a client describes the inferred schema,
and the same check catches it. Every wait has a deadline; no clock is asserted.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ldp.core import datafile
from ldp.core.datafile import infer_schema, parse_schema_json
from ldp.core.population import PopulationDescription
from ldp.wire.aggregator import ShardClaim
from ldp.wire.client import EXIT_CLOSED, EXIT_REJECTED, run_client
from ldp.wire.client_config import ClientConfig
from ldp.wire.v1 import aggregator_pb2 as pb
from tests.waits import PROCESS_WAIT_S
from tests.wire.hostile import HostileAggregator

pytestmark = pytest.mark.timeout(120)

LDP_SIM = str(Path(sys.executable).parent / "ldp-sim")
HEADER = "age,kids,income\n"
FILES = {
    "one-row": [[37, 1, 52]],  # an inferred schema would be this whole record
    "five-rows": [[37, 1, 51], [41, 2, 3], [29, 1, 27], [53, 2, 12], [43, 1, 30]],  # step 2 ages, step 3 incomes
}
DRAFTS = {"one-row": [(0, 63, 1), (0, 1, 1), (0, 63, 1)], "five-rows": [(0, 63, 1), (0, 3, 1), (0, 63, 1)]}  # (low, high, step)


def _write(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.csv"
    path.write_text(HEADER + "".join(",".join(map(str, r)) + "\n" for r in FILES[name]))
    return path


async def _ldp_sim(*args: str, timeout_s: float = 60.0) -> tuple[int, str, str]:
    """Run ``ldp-sim ARGS`` without blocking the fake aggregator's event loop; (rc, out, err)."""
    proc = await asyncio.create_subprocess_exec(LDP_SIM, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def leaked_columns(description: dict[str, Any], data: Path) -> list[str]:
    """The described fields that are computed from the values: equal to the exact inference
    (low = min, high = max, step = gcd; a constant c as c..c+1) of the file's column."""
    exact = {f.name: f for f in infer_schema(data)}
    described = PopulationDescription.from_json(description).schema
    return [f.name for f in described if exact.get(f.name) == f]


@pytest.mark.parametrize("name", FILES)
async def test_schema_infer_writes_a_draft_for_the_user_to_review(tmp_path: Path, name: str) -> None:
    data = _write(tmp_path, name)
    rc, out, err = await _ldp_sim("schema", "infer", str(data))
    assert rc == 0 and "Traceback" not in err, err
    schema, columns = parse_schema_json(json.loads(out))
    assert columns == ("age", "kids", "income")
    assert [(f.low, f.high, f.step) for f in schema] == DRAFTS[name]
    assert leaked_columns({"size": len(FILES[name]), "schema": schema.to_json()}, data) == []
    # The note, on stderr only: the schema is public, what the user's values are, what to do.
    assert "the schema is public" in err and "widen each range" in err and "--schema" in err
    age = datafile.draft_schema(data).observed[0]
    assert f"age: values {age.low}..{age.high}" in err
    rc, out2, err2 = await _ldp_sim("schema", "infer", str(data), "--out", str(tmp_path / "schema.json"))
    assert rc == 0 and out2 == "" and (tmp_path / "schema.json").read_text() == out
    rc, _, err3 = await _ldp_sim("schema", "infer", str(data), "--columns", "age,nope")
    assert rc == 2 and err3.count("\n") == 1 and "column 'nope' is missing" in err3 and "Traceback" not in err3


@pytest.mark.parametrize("name", FILES)
async def test_a_data_file_without_a_schema_is_refused_before_anything_connects(tmp_path: Path, name: str) -> None:
    data = _write(tmp_path, name)
    async with HostileAggregator() as agg:
        rc, out, err = await _ldp_sim("clients", "--connect", agg.address, "--data", str(data), "--budget", "1", "--connect-timeout", "5")
        assert agg.peers.empty()  # not even a Hello reached the aggregator
    assert rc == 2 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == f"ldp-sim: error: {datafile.undeclared_schema_message(str(data))}"
    assert f"ldp-sim schema infer {data} > schema.json" in err


async def _describe(agg: HostileAggregator, n: int) -> tuple[dict[str, Any], list[pb.ClientMessage]]:
    """Accept one client, welcome it, read its Ready; close the run. (description, messages)."""
    peer = await agg.accept()
    ready = await peer.handshake(0, n)
    await peer.send(pb.ServerMessage(close=pb.Close(reason="done")))
    sent = [pb.ClientMessage.FromString(b) for b in peer.received]
    assert not ready.error and (ready.first_user, ready.user_count, ready.budget) == (0, n, 1.0)
    return json.loads(ready.description_json), sent


@pytest.mark.parametrize("name", FILES)
async def test_the_declared_draft_is_exactly_what_ready_carries(tmp_path: Path, name: str) -> None:
    data, schema_file = _write(tmp_path, name), tmp_path / "schema.json"
    assert (await _ldp_sim("schema", "infer", str(data), "--out", str(schema_file)))[0] == 0
    n = len(FILES[name])
    async with HostileAggregator() as agg:
        client = asyncio.ensure_future(
            _ldp_sim("clients", "--connect", agg.address, "--data", str(data), "--schema", str(schema_file), "--budget", "1", "--connect-timeout", "30")
        )
        description, sent = await _describe(agg, n)
        rc, _, err = await client
    assert rc == EXIT_CLOSED, err
    declared = parse_schema_json(json.loads(schema_file.read_text()))[0]
    assert description == {"size": n, "schema": declared.to_json()}  # the file, field for field
    assert leaked_columns(description, data) == []
    # Everything before the first round: Hello (claim, protocol, host:pid) and this Ready.
    assert [m.WhichOneof("kind") for m in sent] == ["hello", "ready"]


@pytest.mark.parametrize("name", FILES)
async def test_a_description_built_from_the_inferred_schema_is_caught(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Broken variants. The user declares the draft, but the client loads the file without it
    (``load_data`` patched): the shard's guard refuses to describe it and nothing connects. With
    that guard removed too, the inferred schema leaves in Ready, and ``leaked_columns`` names
    every column."""
    data, schema_file = _write(tmp_path, name), tmp_path / "schema.json"
    schema_file.write_text(datafile.draft_schema(data).text())
    config = ClientConfig(data_path=str(data), schema_path=str(schema_file), budget=1.0)
    real_load = datafile.load_data
    monkeypatch.setattr(datafile, "load_data", lambda path, schema=None, **kw: real_load(path, **kw))  # drops the schema
    said: list[str] = []
    async with HostileAggregator() as agg:
        code = await asyncio.wait_for(run_client(agg.address, ShardClaim(0, 1), config, connect_timeout_s=5, say=said.append), 30)
        assert code == EXIT_REJECTED and agg.peers.empty()
    assert "has no declared schema" in said[0]

    monkeypatch.setattr(datafile.DataPopulation, "require_declared_schema", lambda self: None)
    n = len(FILES[name])
    async with HostileAggregator() as agg:
        client = asyncio.ensure_future(run_client(agg.address, ShardClaim(0, 1), config, connect_timeout_s=30, say=said.append))
        description, _ = await _describe(agg, n)
        assert await asyncio.wait_for(client, PROCESS_WAIT_S) == EXIT_CLOSED
    assert description == PopulationDescription(n, infer_schema(data)).to_json()
    assert leaked_columns(description, data) == ["age", "kids", "income"]  # the check catches it
    if name == "one-row":  # the whole record, 37, 1, 52, read off the lows
        assert [f["low"] for f in description["schema"]] == FILES[name][0]


def _pre_charge_errors(data: Any, specs: list[Any]) -> list[list[str]]:
    """For each user alone and each spec: the error text its one-user request gets (before any
    charge: an error charges nothing), or "" when it is answered."""
    from ldp.local.messages import Assignment, RoundRequest, SessionKind, Users
    from ldp.local.shard import Shard

    out = []
    for user in range(data.size):
        shard = Shard(data, 0, data.size, budget=1000.0)  # never the reason for a refusal here
        texts = []
        for session, spec in enumerate(specs):
            reply = shard.answer(RoundRequest(session + 1, SessionKind.NON_INTERACTIVE, 0, (Assignment(7, Users(user, user + 1), spec),)))
            texts.append(reply.error or reply.results[0].error)
        out.append(texts)
    return out


def test_no_error_before_a_charge_depends_on_a_record(tmp_path: Path) -> None:
    """The audit of what leaves before a charge, as a property: every kind on queries whose
    value sets are small, large (``product``: no finite set), huge-scaled, per-field and whole-
    record, asked of each user alone, gets the same error text (or none) for every record of a
    file under its declared schema. An error that depended on a record would be a free bit.
    Broken variant: records outside what the described schema says (a description narrower than
    the data) make the answer depend on the record, and the comparison catches it."""
    from ldp.core.datafile import DataPopulation, load_data
    from ldp.core.query_specs import affine, field_query, product, record_query
    from ldp.core.randomizers import RandomizerSpec, randomizer_kinds
    from ldp.core.schema import Field, Schema

    data_path = _write(tmp_path, "five-rows")
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(datafile.draft_schema(data_path).text())
    data = load_data(data_path, schema_file)
    queries = [
        field_query("kids"), field_query("age"), product(field_query("age"), field_query("income")),
        affine(product(field_query("age"), field_query("income")), 1e150), record_query(),
        product(field_query("age"), field_query("income"), field_query("kids")),  # 16384 values: "no finite set"
    ]
    specs = [RandomizerSpec(kind, q, 0.5) for kind in randomizer_kinds() for q in queries]
    errors = _pre_charge_errors(data, specs)
    assert all(e == errors[0] for e in errors[1:])
    assert 0 < sum(1 for e in errors[0] if e) < len(specs)  # some refused, some answered: both kinds seen

    narrow = Schema((Field("age", 1, 0, 63), Field("kids", 1, 0, 1), Field("income", 1, 0, 63)))  # kids = 2 is outside
    broken = DataPopulation(data.path, narrow, data.size, data.identity + "-broken", data.columns, data.format)
    object.__setattr__(broken, "_matrix", data.records(0, data.size))
    bad = _pre_charge_errors(broken, [RandomizerSpec("kary_rr", field_query("kids"), 0.5)])
    assert bad[0] != bad[1]  # user 1 (kids = 2) is refused, user 0 answered: caught
