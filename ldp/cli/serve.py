"""``ldp-sim serve --bind HOST:PORT EXPERIMENT [...]``: the aggregator side alone. It waits until
client processes (started with ``ldp-sim clients``, possibly on other machines) hold every user,
runs the experiment, prints its table and sends Close; ``--tls DIR [--token-file F]`` admits
enrolled clients only (docs/security.md). An experiment without an LR oracle runs here, in process.

The experiment (which owns the seeds and the ground truth) runs in this process: the aggregator
learns the population's description only, or for an experiment over many populations relays
them sealed (``--seal-key-file``; docs/design.md §2a). See docs/protocol.md.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from rich.console import Console

from ldp.cli.argtypes import existing_dir, existing_file, host_port, seconds_type
from ldp.cli.command import Command, stdout_console
from ldp.cli.run import add_experiment_arguments, awaited, experiment_args, print_result, run_standalone
from ldp.core.errors import ParameterError
from ldp.experiment import Experiment, ExperimentArgs, ExperimentResult, get_experiment

__all__ = ["SERVE", "serve_tls"]


def _serve_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--bind", type=host_port, required=True, help="HOST:PORT to listen on (port 0: any free port)")
    add_experiment_arguments(serve)
    serve.add_argument("--wait", type=seconds_type("the wait for client processes", zero=True), default=600.0, help="seconds to wait for client processes (default 600)")
    serve.add_argument("--seal-key-file", metavar="F", help="experiments over many populations: the key that seals them (created if missing; give the clients a copy)")
    serve.add_argument("--tls", type=existing_dir("the --tls directory"), metavar="DIR", help="serve over TLS with DIR from `ldp-sim certs`: only enrolled clients (their certificates) may claim shards")
    serve.add_argument("--token-file", type=existing_file("the token file"), metavar="F", help="with --tls: enrol clients by this shared token instead of certificates")


async def _echo_events(aggregator: Any, console: Console) -> None:
    """Print the aggregator's connect/disconnect events as they happen (until cancelled)."""
    seen = 0
    while True:
        for event in aggregator.events[seen:]:
            console.print(event, markup=False, highlight=False)
        seen = len(aggregator.events)
        await asyncio.sleep(0.2)


def serve_tls(ns: argparse.Namespace) -> Any:
    """``serve --tls DIR`` (mTLS) or ``--tls DIR --token-file F`` (token mode) as the library builds
    it (``ldp.wire.tls.server_tls``, the same object ``GrpcAggregator(tls=...)`` takes); None for a
    plaintext aggregator. A token without TLS is refused: it would travel in the clear, and nobody
    would be asked for it (docs/security.md, I4)."""
    if ns.tls is None:
        if ns.token_file is not None:
            raise ParameterError("--token-file needs --tls DIR: a token is checked only over TLS (serve --tls DIR --token-file F)")
        return None
    from ldp.wire.tls import server_tls

    return server_tls(ns.tls, ns.token_file)  # files read now: a missing or unsafe one is one line before binding


async def _serve(ns: argparse.Namespace, console: Console) -> int:
    """The aggregator side (with the experiment, which owns the seeds and the ground truth)."""
    tls = serve_tls(ns)  # before anything else: a bad --tls/--token-file is one line, and nothing binds
    return await _serve_with(ns, console, tls)


def _what_is_served(ns: argparse.Namespace, exp: Experiment, args: ExperimentArgs) -> tuple[Any, bytes | None]:
    """(the population's description, None) for one population, or (None, the seal key) for an
    experiment over many populations, which the standby clients receive sealed."""
    from ldp.wire.sealed import seal_key_file

    if exp.shape != "factory":
        return exp.population(args).description(), None  # the aggregator learns the description only
    if ns.seal_key_file is None:
        raise ParameterError(
            f"{exp.name} runs many populations: serve it with --seal-key-file F (created if missing) and start the clients "
            "on standby with a copy of F: ldp-sim clients --connect HOST:PORT --seal-key-file F"
        )
    return None, seal_key_file(ns.seal_key_file, create=True)


def _listening_line(address: str, description: Any, tls: Any) -> str:
    """What ``serve`` prints once bound: scripts (and tests) read the port from it; over TLS it says
    which clients it admits, so a mismatch is easy to spot."""
    what = f"{description.size} users" if description is not None else "standby clients (sealed populations)"
    mode = ""
    if tls is not None:
        mode = " over TLS, admitting clients with the enrolment token" if tls.token is not None else " over TLS, admitting clients with a certificate from its CA"
    return f"ldp-sim serve: listening on {address} for {what}{mode}"


async def _run_served(ns: argparse.Namespace, aggregator: Any, exp: Experiment, args: ExperimentArgs, seal_key: bytes | None) -> ExperimentResult:
    """The experiment against the clients that hold the users (or host the sealed populations)."""
    from ldp.wire.aggregator import GrpcLROracle
    from ldp.wire.factory import RemoteOracleFactory

    if seal_key is not None:
        return await awaited(exp.run(RemoteOracleFactory(aggregator, seal_key, wait_s=ns.wait), args))
    await aggregator.wait_for_shards(ns.wait)
    await asyncio.sleep(0.3)  # let the last connect event print before the table
    return await awaited(exp.run(GrpcLROracle(aggregator), args))


async def _serve_with(ns: argparse.Namespace, console: Console, tls: Any) -> int:
    from ldp.wire.aggregator import GrpcAggregator

    exp, args = experiment_args(ns, lambda done, total: None)
    description, seal_key = _what_is_served(ns, exp, args)
    aggregator = GrpcAggregator(description, ns.bind, tls=tls)
    await aggregator.start()
    echo = asyncio.ensure_future(_echo_events(aggregator, console))
    try:
        # Printed on stdout and flushed: scripts (and tests) read the port from this line.
        print(_listening_line(aggregator.address, description, tls), flush=True)
        start = time.perf_counter()
        result = await _run_served(ns, aggregator, exp, args, seal_key)
        echo.cancel()
        print_result(console, result, time.perf_counter() - start)
    except BaseException as exc:
        echo.cancel()
        # The clients learn that the run failed (they exit 3), with the reason in one line.
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        await aggregator.close(f"the experiment failed: {reason}", failed=True)
        raise
    echo.cancel()
    await aggregator.close("the experiment is over")
    return 0


def serve_command(ns: argparse.Namespace) -> int:
    """`ldp-sim serve`. An experiment without an LR oracle runs here, in process: nothing to serve."""
    console = stdout_console()
    if get_experiment(ns.experiment).shape == "standalone":
        serve_tls(ns)  # still, --token-file without --tls (or a bad file) is refused, as for any serve
        console.print(f"{ns.experiment} uses no LR oracle: it runs here, in process, and needs no client", markup=False, highlight=False)
        return run_standalone(ns, console)
    # What gRPC writes on stderr that no handler sees (a connection refused during the TLS
    # handshake, grpcio's traceback for a call cut as it began or at the loop's end) is said in
    # words (ldp.wire.grpc_stderr), as a refused enrolment is in the events.
    from ldp.wire.grpc_stderr import grpc_stderr_in_words

    with grpc_stderr_in_words("ldp-sim serve: "):
        return asyncio.run(_serve(ns, console))


SERVE = Command(
    "serve", "run the aggregator for remote client processes",
    "Run the aggregator side of EXPERIMENT alone: wait until client processes (`ldp-sim clients`, here or on other machines) hold "
    "every user, run it, print the table and close. Experiments over many populations need --seal-key-file.",
    ("ldp-sim serve --bind 0.0.0.0:50051 rr-demo --users 100000",),
    _serve_arguments, serve_command,
)
