"""``ldp-sim join`` as a real process (issue 29): it checks every option and reaches the teacher
before it asks the two private questions, accepts names in any script and typed category names,
and honours ``--connect-timeout`` against a listener that never answers.

The teacher's dashboard is a stand-in here (``http.server`` in a thread on 127.0.0.1: it serves a
CA and answers a seat request, recording what it got), so no class of processes is needed; the
classroom end to end is ``test_classroom_e2e.py``. No clock in any verdict: every wait on a
process is bounded generously (``WAIT_S``), and the timeout test asserts the message, not a time.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ldp.classroom.enrol import ca_fingerprint, name_problem, seat_proof
from ldp.classroom.lessons import SENSITIVE_QUESTION, TRAVEL, ClassPlan
from ldp.classroom.student import ask_answers, check_join
from ldp.core.errors import ParameterError
from tests.waits import PROCESS_WAIT_S

WAIT_S = PROCESS_WAIT_S  # the bound on every wait for a process: a hung run fails, a slow one passes
pytestmark = pytest.mark.timeout(2 * int(PROCESS_WAIT_S))  # a hang guard, above the waits it holds
TOKEN = "t" * 43
CA = b"-----BEGIN CERTIFICATE-----\nnot a real one\n-----END CERTIFICATE-----\n"
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8"}


def _join(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ldp", "join", *args], input=stdin, capture_output=True, text=True, encoding="utf-8", timeout=WAIT_S, env=ENV, check=False
    )


class _FakeDashboard:
    """GET /ca.pem and POST /seat, as the teacher's dashboard answers them; ``seats`` records
    every seat request's body. The seat's gRPC port is a closed one: the join then gives up."""

    def __init__(self) -> None:
        self.seats: list[dict[str, Any]] = []
        self.closed_port = _closed_port()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self._send(200, CA, "application/x-pem-file") if self.path == "/ca.pem" else self._send(404, b"{}", "application/json")

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.seats.append(body)
                answer = {"seat": 0, "seats": 2, "grpc_port": fake.closed_port, "plan": ClassPlan(2, 3, 4).to_json()}
                self._send(200, json.dumps(answer).encode(), "application/json")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def dashboard() -> Iterator[_FakeDashboard]:
    fake = _FakeDashboard()
    yield fake
    fake.close()


GOOD = ("--token", TOKEN, "--ca", ca_fingerprint(CA))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--token", TOKEN, "--ca", "00"), "--ca is the 32-hex-digit fingerprint"),
        (("--ca", ca_fingerprint(CA)), "give the class's token"),
        ((*GOOD, "--budget", "-1"), "--budget must be a finite ε > 0, got -1"),
        ((*GOOD, "--name", "bob\x1b[2J"), "no control or format characters"),
        ((*GOOD, "--connect-timeout", "0"), "--connect-timeout must be"),
    ],
    ids=["ca", "token", "budget", "name", "connect-timeout"],
)
def test_join_checks_every_option_before_asking_anything(dashboard: _FakeDashboard, args: tuple[str, ...], says: str) -> None:
    """A wrong join command is one line on stderr, exit 2, and the private questions were never
    asked (the old join asked both first: its stdout held the question)."""
    done = _join(dashboard.host, *args, stdin="y\n1\n")
    assert done.returncode == 2, done
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert SENSITIVE_QUESTION not in done.stdout, done.stdout
    assert dashboard.seats == []


def test_join_refuses_a_malformed_address_before_asking() -> None:
    done = _join("no-port-here", *GOOD, stdin="y\n1\n")
    assert done.returncode == 2 and "HOST:PORT is the dashboard's address" in done.stderr, done.stderr
    assert SENSITIVE_QUESTION not in done.stdout


def test_join_refuses_a_teacher_with_another_ca_before_asking(dashboard: _FakeDashboard) -> None:
    """Reaching the teacher and checking its CA come before the questions too."""
    done = _join(dashboard.host, "--token", TOKEN, "--ca", ca_fingerprint(b"another CA"), stdin="y\n1\n")
    assert done.returncode == 2 and "does not have the fingerprint" in done.stderr, done.stderr
    assert SENSITIVE_QUESTION not in done.stdout and dashboard.seats == []


@pytest.mark.parametrize("name", ["Zoë Ünïcode", "陈 Chen"])
def test_a_name_in_any_script_and_a_typed_category_name_join(dashboard: _FakeDashboard, name: str) -> None:
    """``Zoë Ünïcode`` and ``陈 Chen`` are names; ``bus`` typed at the prompt is the category
    'bus or train' (as in an ``--answers`` file). The seat request carries the name and a proof
    made with it; then the (closed) gRPC port makes the join give up within its --connect-timeout."""
    done = _join(dashboard.host, *GOOD, "--name", name, "--connect-timeout", "1", stdin="yes\nbus\n")
    assert SENSITIVE_QUESTION in done.stdout and "answer 1..4" not in done.stdout, done.stdout
    assert len(dashboard.seats) == 1, (done.stdout, done.stderr)
    body = dashboard.seats[0]
    assert body["name"] == name and body["proof"] == seat_proof(TOKEN, name, body["nonce"], body["commit"])
    assert f"joined as {name!r}, seat 0" in done.stdout
    assert done.returncode != 0 and "Traceback" not in done.stderr


def test_a_listener_that_never_answers_is_given_up_after_the_connect_timeout() -> None:
    """A socket that accepts and never answers: ``--connect-timeout 3`` is the bound the join
    names when it gives up (the old join waited the HTTP default of 20 s, then said 'timed out')."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        done = _join(f"127.0.0.1:{port}", *GOOD, "--connect-timeout", "3", stdin="y\n1\n")
    assert done.returncode == 2, done
    assert f"the dashboard at 127.0.0.1:{port} did not answer the request for the class CA within 3 s (--connect-timeout); giving up" in done.stderr, done.stderr
    assert SENSITIVE_QUESTION not in done.stdout


def test_the_prompt_reads_category_names_numbers_and_unique_words() -> None:
    lines = iter(["y\n", "b\n", "bus\n"])  # 'b' is ambiguous (bike, bus): asked again
    written: list[str] = []
    answers = ask_answers(lambda: next(lines), written.append)
    assert (answers.sensitive, TRAVEL[answers.travel]) == (1, "bus or train")
    assert any("got 'b'" in w for w in written)
    for typed, category in (("Train", "bus or train"), ("walk", "walked"), ("4", "car"), ("  BIKE ", "bike")):
        feed = iter(["n\n", typed + "\n"])
        assert TRAVEL[ask_answers(feed.__next__, written.append).travel] == category


def test_names_of_any_script_pass_control_characters_do_not() -> None:
    assert name_problem("Zoë Ünïcode") == name_problem("陈 Chen") == name_problem("<b>markup</b> is text") == ""
    for bad in ("bob\x1b[2J", "a\u202eb", "", " lead", "x" * 41):
        assert name_problem(bad), bad
    base = dict(host="127.0.0.1:8000", token=TOKEN, token_file=None, ca="0" * 32, budget=4.0, connect_timeout=5.0)
    assert check_join(argparse.Namespace(**base, name="陈 Chen")).name == "陈 Chen"
    with pytest.raises(ParameterError, match="--name"):
        check_join(argparse.Namespace(**base, name="a\u202eb"))


def test_the_printed_join_command_works_whatever_the_token(dashboard: _FakeDashboard) -> None:
    """The invariant: the join command the teacher prints is accepted by ``ldp-sim join`` exactly
    as printed. It broke in CI: a token that begins with ``-`` (one in 64 of ``token_urlsafe``)
    was read as an option, every student exited with argparse's error, and the teacher waited its
    whole ``--wait`` for nobody. Here the printed command of such a token joins (the seat request
    carries a proof made with it); the naive ``--token TOKEN`` of the same token is the broken
    variant, refused before anything is reached."""
    from ldp.classroom.teacher import join_command

    token = "-m2UsOPWqtegUvSbQegL_0R9Z6kmPcFxofSTZmEC8eo"  # the token of the failed CI run
    printed = join_command(dashboard.host, token, ca_fingerprint(CA)).split()
    assert printed[:2] == ["ldp-sim", "join"]
    done = _join(*printed[2:], "--name", "ann", "--connect-timeout", "1", stdin="y\n1\n")
    assert "expected one argument" not in done.stderr and len(dashboard.seats) == 1, done.stderr
    body = dashboard.seats[0]
    assert body["proof"] == seat_proof(token, "ann", body["nonce"], body["commit"])
    naive = _join(dashboard.host, "--token", token, "--ca", ca_fingerprint(CA), "--name", "bob", "--connect-timeout", "1", stdin="y\n1\n")
    assert naive.returncode == 2 and "argument --token: expected one argument" in naive.stderr, naive.stderr
    assert len(dashboard.seats) == 1


def test_a_fresh_token_never_begins_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """``token_text`` redraws a token that begins with ``-``: a drawn ``-…`` is never returned
    (the patched source gives two, then a good one), and 5,000 real draws hold none (the broken
    variant, ``token_urlsafe`` as it is, passes that with probability (63/64)^5000 ≈ 5·10^-35)."""
    import secrets

    from ldp.wire import tls

    tokens = [tls.token_text() for _ in range(5000)]
    assert not [t for t in tokens if t.startswith("-")] and {len(t) for t in tokens} == {43}
    drawn = iter(["-" + "a" * 42, "-" + "b" * 42, "c" * 43])
    monkeypatch.setattr(secrets, "token_urlsafe", lambda n: next(drawn))
    assert tls.token_text() == "c" * 43
