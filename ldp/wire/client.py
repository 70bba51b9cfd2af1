"""A client process: hosts one shard of users and answers the aggregator's rounds.

What: reads its ``ClientConfig`` (its users' data, budget, report key, ledger store and seal key)
from the users' side — a file or standard input, written by whoever runs it, never the
aggregator — and prepares its shard: the users of its claim K/M (sub-shard j/P) of its own data,
records ready and ledgers open. Then it connects to an aggregator (retrying with backoff while
it is not up yet), says Hello with its claim, checks that the range in Welcome is the one it
computed itself, declares its public description in Ready (schema, number of users, budget),
and answers every round with ``Shard.answer`` — validated before any charge, ledger charged (and
committed, on disk first when durable) before the reply leaves, users over budget refused, a
second round of a non-interactive session refused. A ``Load`` carries a population sealed by the
experiment; the client opens it with its seal key, checks the range, and hosts it (ledgers of
data it has seen continue), or reports the failure in ``Ready.error`` and holds no users until
the next Load.
Guarantees: only reports, refusal bitmaps and ledger units ever leave the process, never a record,
seed or key (tests/wire/test_privacy_wire.py, tests/wire/test_hostile_aggregator.py); exits
cleanly with a one-line message when the aggregator sends Close (code 0), turns it away or its
configuration is wrong (code 2), or disappears / cannot be reached (code 1) — no hang, no traceback.
Source: docs/design.md §2a–3; KLNRS Definition 4.4 (budgets enforced by the user's side).

Usage: ``python -m ldp.wire.client --connect HOST:PORT --config FILE|- --shard K/M [--sub j/P]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from typing import Callable

import grpc
import numpy as np

from ldp.core.errors import LDPError, ParameterError
from ldp.local.messages import RoundReply, RoundRequest
from ldp.local.shard import Holdings, Shard
from ldp.wire import codec
from ldp.wire.aggregator import ShardClaim, shard_range
from ldp.wire.client_config import ClientConfig
from ldp.wire.v1 import aggregator_pb2 as pb
from ldp.wire.v1 import aggregator_pb2_grpc as pb_grpc

__all__ = ["run_client", "main", "parse_fraction", "EXIT_CLOSED", "EXIT_LOST", "EXIT_REJECTED"]

EXIT_CLOSED = 0  # the aggregator said Close: normal end
EXIT_LOST = 1  # the aggregator could not be reached, or vanished mid-stream
EXIT_REJECTED = 2  # turned away (protocol version, overlapping shard) or bad arguments


def _client_options() -> list[tuple[str, object]]:
    # Reconnect quickly while the aggregator is starting (gRPC's own default backoff starts at 1 s
    # and grows to 120 s); keepalive stays off (docs/design.md §3).
    return codec.channel_options() + [
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 2000),
    ]


def _round_error(request_parts: list[pb.RoundRequest], message: str) -> RoundReply:
    head = request_parts[0]
    return RoundReply(int(head.session_id), int(head.round), error=message)


async def _watch_parent(parent_pid: int) -> None:
    """Return when the launching process is gone (so a killed launcher leaves no orphan)."""
    while os.getppid() == parent_pid:
        await asyncio.sleep(0.5)


async def run_client(
    address: str,
    claim: ShardClaim,
    config: ClientConfig,
    *,
    connect_timeout_s: float = 60.0,
    answer_delay_s: float = 0.0,
    protocol_version: int = codec.PROTOCOL_VERSION,
    say: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True),
    exit_with_parent: int | None = None,
) -> int:
    """Serve one shard until the aggregator closes; returns an exit code (EXIT_*).

    ``answer_delay_s`` delays every reply (fault injection for deadline tests only);
    ``protocol_version`` may be overridden only to test that a mismatch is turned away.
    """
    name = f"{socket.gethostname()}:{os.getpid()}"
    try:
        users = _UsersSide(config, claim)  # records and ledgers are ready before connecting
    except (LDPError, OSError) as exc:
        say(f"ldp client {claim.key}: cannot host its users: {exc}")
        return EXIT_REJECTED
    async with grpc.aio.insecure_channel(address, options=_client_options()) as channel:
        try:
            await asyncio.wait_for(channel.channel_ready(), connect_timeout_s)
        except asyncio.TimeoutError:
            say(f"ldp client {claim.key}: cannot reach the aggregator at {address} after {connect_timeout_s:g} s; giving up")
            return EXIT_LOST
        call = pb_grpc.AggregatorStub(channel).Connect()
        watcher = asyncio.ensure_future(_watch_parent(exit_with_parent)) if exit_with_parent else None
        try:
            body = asyncio.ensure_future(_serve(call, claim, users, name, answer_delay_s, protocol_version, say))
            waiters = {body} | ({watcher} if watcher else set())
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            if body in done:
                return body.result()
            body.cancel()
            say(f"ldp client {claim.key}: the launching process is gone; exiting")
            return EXIT_LOST
        except grpc.aio.AioRpcError as exc:
            say(f"ldp client {claim.key}: lost the aggregator at {address} ({exc.code().name}: {exc.details()}); exiting")
            return EXIT_LOST
        finally:
            if watcher is not None:
                watcher.cancel()
            call.cancel()
            users.store.close()  # every charge is already committed; this compacts a durable ledger


async def _serve(
    call: grpc.aio.StreamStreamCall,
    claim: ShardClaim,
    users: _UsersSide,
    name: str,
    answer_delay_s: float,
    protocol_version: int,
    say: Callable[[str], None],
) -> int:
    await call.write(
        pb.ClientMessage(
            hello=pb.Hello(
                protocol_version=protocol_version,
                shard_index=claim.index,
                shard_count=claim.count,
                sub_index=claim.sub_index,
                sub_count=claim.sub_count,
                client_name=name,
            )
        )
    )
    first = await call.read()
    if first is grpc.aio.EOF or first is None:
        say(f"ldp client {claim.key}: the aggregator ended the stream before Welcome; exiting")
        return EXIT_LOST
    if first.WhichOneof("kind") == "close":
        say(f"ldp client {claim.key}: turned away by the aggregator: {first.close.reason}")
        return EXIT_REJECTED
    if first.WhichOneof("kind") != "welcome":
        say(f"ldp client {claim.key}: protocol error: expected Welcome, got {first.WhichOneof('kind')}; exiting")
        return EXIT_REJECTED
    welcome = first.welcome
    shard = users.shard
    assert shard is not None
    if (welcome.first_user, welcome.user_count) != (shard.first_user, shard.count):
        reason = (
            f"the aggregator assigned users {welcome.first_user}+{welcome.user_count}, but claim {claim.key} of this client's "
            f"{shard.data.size} users is {shard.first_user}..{shard.stop - 1}"
        )
        await call.write(pb.ClientMessage(ready=pb.Ready(error=reason)))
        say(f"ldp client {claim.key}: refusing: {reason}")
        return EXIT_REJECTED
    await call.write(pb.ClientMessage(ready=users.ready(0)))
    parts: dict[tuple[int, int], list[pb.RoundRequest]] = {}
    while True:
        msg = await call.read()
        if msg is grpc.aio.EOF:
            say(f"ldp client {claim.key}: the aggregator ended the stream without Close; exiting")
            return EXIT_LOST
        if msg is None:  # undecodable bytes: the message is dropped, the client stays up
            say(f"ldp client {claim.key}: ignored a message that does not decode")
            continue
        kind = msg.WhichOneof("kind")
        if kind == "close":
            say(f"ldp client {claim.key}: the aggregator closed the connection: {msg.close.reason}")
            return EXIT_CLOSED
        if kind == "load":
            parts.clear()  # unfinished requests belong to the old population
            ready = users.load(msg.load)
            await call.write(pb.ClientMessage(ready=ready))
            if ready.error:
                say(f"ldp client {claim.key}: cannot load the new population: {ready.error}")
            continue
        current = users.shard
        if kind == "ledger_query":
            first_user, units = (current.first_user, current.ledger.spent_units()) if current is not None else (0, np.zeros(0, dtype=np.int64))
            for m in codec.encode_ledger(msg.ledger_query.query_id, first_user, units):
                await call.write(m)
            continue
        if kind != "round":
            continue  # unknown or out-of-place message: ignore (forward compatible)
        key = (msg.round.session_id, msg.round.round)
        parts.setdefault(key, []).append(msg.round)
        if not msg.round.final:
            continue
        if current is None:
            reply = _round_error(parts.pop(key), "this client holds no users (its last Load failed)")
        else:
            reply = _answer(current, parts.pop(key))
        if answer_delay_s > 0:
            await asyncio.sleep(answer_delay_s)
        for m in codec.encode_reply(reply):
            await call.write(m)


class _UsersSide:
    """The client's users: its configuration, its ledger store, and the shard it hosts now."""

    def __init__(self, config: ClientConfig, claim: ShardClaim) -> None:
        self.config = config
        self.claim = claim
        self.store = config.open_store()
        self.shard: Shard | None = self._host(config.holdings())

    def _host(self, data: Holdings) -> Shard:
        lo, hi = shard_range(data.size, self.claim)
        if hi <= lo:
            raise ParameterError(f"shard {self.claim.key} holds no users of data with {data.size} users")
        return self.config.shard(data, lo, hi - lo, self.store)

    def ready(self, load_id: int) -> pb.Ready:
        shard = self.shard
        assert shard is not None
        return pb.Ready(
            load_id=load_id,
            first_user=shard.first_user,
            user_count=shard.count,
            budget=shard.budget,
            description_json=json.dumps(shard.description().to_json()),
        )

    def load(self, load: pb.Load) -> pb.Ready:
        """Host the population sealed in a Load (or say why not: the process stays up)."""
        self.shard = None  # free the old records before generating the new ones
        try:
            spec = self.config.open_sealed(load.sealed_population)
            lo, hi = shard_range(spec.size, self.claim)
            if (load.first_user, load.user_count) != (lo, hi - lo):
                raise ParameterError(
                    f"the Load names users {load.first_user}+{load.user_count}, but claim {self.claim.key} of the sealed population is {lo}..{hi - 1}"
                )
            self.shard = self._host(spec)
        except Exception as exc:  # noqa: BLE001 - a bad blob or a failed generation is reported, not fatal
            return pb.Ready(load_id=load.load_id, first_user=load.first_user, user_count=load.user_count, error=f"{type(exc).__name__}: {exc}")
        return self.ready(load.load_id)


def _answer(shard: Shard, request_parts: list[pb.RoundRequest]) -> RoundReply:
    """The shard's reply; a malformed request or an unexpected failure becomes an error reply."""
    try:
        request: RoundRequest = codec.decode_request(request_parts)
    except (LDPError, ValueError, RecursionError) as exc:
        return _round_error(request_parts, f"malformed round request: {exc}")
    try:
        return shard.answer(request)
    except Exception as exc:  # noqa: BLE001 - the process must stay up and say what went wrong
        return _round_error(request_parts, f"the shard failed to answer: {type(exc).__name__}: {exc}")


def parse_fraction(text: str, what: str = "shard") -> tuple[int, int]:
    """'K/M' → (K, M) with 0 ≤ K < M."""
    try:
        k, m = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} must look like K/M (e.g. 0/2), got {text!r}") from None
    if not 0 <= k < m:
        raise argparse.ArgumentTypeError(f"{what} K/M needs 0 ≤ K < M, got {text!r}")
    return k, m


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ldp.wire.client", description="Host one shard of users for an ldp aggregator.")
    parser.add_argument("--connect", required=True, help="aggregator address HOST:PORT")
    parser.add_argument("--config", required=True, help="the users' side configuration (ClientConfig JSON): a file, or - for standard input")
    parser.add_argument("--shard", type=parse_fraction, default=(0, 1), help="machine shard K/M (default 0/1)")
    parser.add_argument("--sub", type=lambda t: parse_fraction(t, "sub-shard"), default=(0, 1), help="process j/P on this machine (default 0/1)")
    parser.add_argument("--connect-timeout", type=float, default=60.0, help="seconds to keep retrying while the aggregator is not up")
    parser.add_argument("--answer-delay", type=float, default=0.0, help=argparse.SUPPRESS)  # fault injection (tests)
    parser.add_argument("--protocol-version", type=int, default=codec.PROTOCOL_VERSION, help=argparse.SUPPRESS)  # tests
    parser.add_argument("--exit-with-parent", action="store_true", help="exit when the launching process dies")
    args = parser.parse_args(argv)
    claim = ShardClaim(args.shard[0], args.shard[1], args.sub[0], args.sub[1])
    try:
        config = ClientConfig.loads(sys.stdin.read() if args.config == "-" else open(args.config, encoding="utf-8").read())
    except (LDPError, OSError) as exc:
        print(f"ldp client {claim.key}: bad configuration: {exc}", file=sys.stderr, flush=True)
        return EXIT_REJECTED
    try:
        return asyncio.run(
            run_client(
                args.connect,
                claim,
                config,
                connect_timeout_s=args.connect_timeout,
                answer_delay_s=args.answer_delay,
                protocol_version=args.protocol_version,
                exit_with_parent=os.getppid() if args.exit_with_parent else None,
            )
        )
    except KeyboardInterrupt:
        print(f"ldp client {claim.key}: interrupted; exiting", file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
