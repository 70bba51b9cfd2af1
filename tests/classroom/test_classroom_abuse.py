"""I5, a classroom that one student cannot break: every abuse as a real attack on the real
``ldp-sim classroom`` (a process on loopback) through its real endpoints and commands.

Each test names the broken variant it fails on (docs/classroom.md, "What one student cannot do"):

- markup in a student's name or error text — ``<!--<script>``, ``</script>``, ``<img onerror>`` —
  is shown as text and app.js still runs, in headless Chromium (skips without it; .ci/run installs
  it). Broken variant: the inline state escaped only ``</`` (the old ``_index``): app.js never
  loads — shown on the same page, in the same browser, by ``test_the_old_inline_escaping_breaks_the_page``;
- one student asking for every seat gets one; an honest ``join`` still gets a seat; a claim over
  gRPC without the seat's secret is refused. Broken variant: no per-address limit (all 6 seats
  taken, the honest student "the class is full") or no secret check (the squatter admitted);
- a seat nobody connects to expires; the teacher removes a seat from the console. Broken variant:
  no expiry (the wait for "free again" fails at its deadline);
- a student that ignores ledger queries is asked once, then skipped. Broken variant: the teacher
  asking every shard after every round (7 queries, 30 s each, the old ``update_budgets``);
- the token never crosses the plain-HTTP port. Broken variant: the join command, token and all,
  in the state (the old ``info["join"]``) or the QR code of it (the old ``/qr.svg``);
- malformed input to any endpoint gets a 4xx with a message. Broken variant: ``request.json()``
  (deep JSON: RecursionError, HTTP 500 and a traceback);
- ``classroom --port`` in use is one line; a normal shutdown with ``--linger`` is quiet.

No test reads a clock for a verdict: every wait is bounded generously (``WAIT_S``) on an event.
"""

from __future__ import annotations

import asyncio
import html
import io
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest

from ldp.classroom import dashboard as dashboard_module
from ldp.classroom.dashboard import CSP, ClassState, Dashboard, SeatRequest
from ldp.classroom.enrol import seat_commit, seat_proof
from tests.classroom.browsers import browser

PYTHON = sys.executable
HOSTILE = str(Path(__file__).with_name("hostile_student.py"))
WAIT_S = 600.0  # the bound on every wait: a hung run fails, a slow one passes
pytestmark = pytest.mark.timeout(4 * int(WAIT_S))
NAMES = ["<!--<script>", "</script><!--", "<img src=x onerror=alert(1)>"]
ERROR_TEXT = "<!--<script></script><img src=x onerror=document.title='pwned'>"
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


@dataclass
class Teacher:
    """A running ``ldp-sim classroom``: its output as it comes, its dashboard, its join command."""

    proc: asyncio.subprocess.Process
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    readers: list[asyncio.Task[None]] = field(default_factory=list)
    url: str = ""
    host: str = ""
    token: str = ""
    join_args: list[str] = field(default_factory=list)  # HOST:PORT --token T --ca F
    students: list[tuple[str, asyncio.subprocess.Process]] = field(default_factory=list)  # started by start_student

    async def students_said(self) -> str:
        """What every student process started for this class said (a failed wait shows it: a
        student that could not join says why only on its own output). A student still running
        is stopped first, so that its pipes end; bounded by WAIT_S."""
        said = []
        for name, p in self.students:
            if p.returncode is None:
                p.kill()
            if p.stdout is None or p.stderr is None or p.stdout.at_eof():  # already read by ended()
                said.append(f"--- student {name} (exit {p.returncode}): read by the test")
                continue
            out, err = await asyncio.wait_for(p.communicate(), WAIT_S)
            said.append(f"--- student {name} (exit {p.returncode}):\n{(out + err).decode(errors='replace')}")
        return "\n".join(said)

    async def exited(self, why: str) -> AssertionError:
        """The teacher is gone: an error that says its exit, its output and every student's."""
        await asyncio.wait_for(asyncio.gather(*self.readers), WAIT_S)
        return AssertionError(f"{why}; the teacher exited ({self.proc.returncode}):\n{''.join(self.out)}\n{''.join(self.err)}\n{await self.students_said()}")

    async def wait_out(self, pattern: str) -> re.Match[str]:
        for _ in range(int(WAIT_S * 10)):
            m = re.search(pattern, "".join(self.out))
            if m:
                return m
            if self.proc.returncode is not None and not any(not r.done() for r in self.readers):
                break
            await asyncio.sleep(0.1)
        raise AssertionError(f"the teacher never said {pattern!r}:\n{''.join(self.out)}\n{''.join(self.err)}")

    async def state(self) -> dict[str, Any]:
        if self.proc.returncode is not None:  # say why, instead of a refused connection
            raise await self.exited("no dashboard")
        try:
            async with aiohttp.ClientSession() as http, http.get(self.url + "/state") as r:
                data: dict[str, Any] = await r.json()
                return data
        except aiohttp.ClientConnectionError as e:  # the teacher went away between the check and the call
            await asyncio.wait_for(self.proc.wait(), WAIT_S)
            raise await self.exited(f"the dashboard refused ({e})") from e

    async def wait_state(self, what: str, ok: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        for _ in range(int(WAIT_S * 5)):
            snap = await self.state()
            if ok(snap):
                return snap
            await asyncio.sleep(0.2)
        raise AssertionError(f"the dashboard never showed {what}: {json.dumps(snap)[:3000]}\n{await self.students_said()}")

    async def type(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def finish(self) -> tuple[int, str, str]:
        """Wait (bounded) for the teacher to exit; its code, stdout and stderr."""
        code = await asyncio.wait_for(self.proc.wait(), WAIT_S)
        await asyncio.wait_for(asyncio.gather(*self.readers), WAIT_S)
        return code, "".join(self.out), "".join(self.err)

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()


async def _pump(stream: asyncio.StreamReader | None, sink: list[str]) -> None:
    assert stream is not None
    while line := await stream.readline():
        sink.append(line.decode(errors="replace"))


async def start_teacher(*args: str) -> Teacher:
    proc = await asyncio.create_subprocess_exec(
        PYTHON, "-m", "ldp.cli.main", "classroom", "--host", "127.0.0.1", "--bind", "127.0.0.1", "--port", "0", "--http-port", "0",
        # A loaded machine is slow, not missing: rounds and seats wait WAIT_S (a test's own
        # --seat-timeout, later in args, wins).
        "--machine-users", "10", "--d", "4", "--round-deadline", str(WAIT_S), "--seat-timeout", str(WAIT_S),
        "--out", tempfile.mkdtemp(prefix="ldp-classroom-records-"), *args,  # the record saved at the end: not in the repository
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENV,
    )
    t = Teacher(proc)
    t.readers = [asyncio.ensure_future(_pump(proc.stdout, t.out)), asyncio.ensure_future(_pump(proc.stderr, t.err))]
    m = await t.wait_out(r"ldp-sim join (\S+) --token (\S+) --ca (\S+)")
    t.host, t.token = m.group(1), m.group(2)
    t.url = f"http://{t.host}"
    t.join_args = [m.group(1), "--token", m.group(2), "--ca", m.group(3)]
    return t


async def start_student(t: Teacher, tmp: Path, name: str, *, hostile: tuple[str, str] | None = None) -> asyncio.subprocess.Process:
    answers = tmp / f"answers-{secrets.token_hex(4)}.json"
    answers.write_text(json.dumps({"sensitive": "y", "travel": 2}))
    join = [*t.join_args, "--name", name, "--answers", str(answers), "--connect-timeout", str(WAIT_S)]
    cmd = [PYTHON, HOSTILE, *hostile, "--", *join] if hostile else [PYTHON, "-m", "ldp.cli.main", "join", *join]
    p = await asyncio.create_subprocess_exec(*cmd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENV)
    t.students.append((name, p))
    return p


async def ended(p: asyncio.subprocess.Process) -> tuple[int, str]:
    out, err = await asyncio.wait_for(p.communicate(), WAIT_S)
    return int(p.returncode if p.returncode is not None else -1), (out + err).decode(errors="replace")


def seat_body(token: str, name: str, secret: str | None = None) -> dict[str, str]:
    nonce, commit = secrets.token_hex(16), seat_commit(secret or secrets.token_hex(32))
    return {"name": name, "nonce": nonce, "commit": commit, "proof": seat_proof(token, name, nonce, commit)}


# --- markup, in the real browser --------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._in_title = tag == "title"

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False


def page_problems(dom: str, texts: list[str]) -> list[str]:
    """What is wrong with the dashboard as Chromium rendered it ([] when nothing is): app.js ran
    (it stamps data-version on <body>), every hostile text is shown as text, and none became markup."""
    problems = []
    if not re.search(r'<body[^>]* data-version="\d+"', dom):
        problems.append("app.js did not run (no data-version on <body>)")
    for text in texts:
        if html.escape(text, quote=False) not in dom:
            problems.append(f"not shown as text: {text!r}")
    tags = _Tags()
    tags.feed(dom)
    if "img" in tags.tags:
        problems.append("an <img> element was injected")
    if tags.title != "ldp classroom":
        problems.append(f"the title changed: {tags.title!r}")
    return problems


async def chromium(url: str, shot: Path | None = None) -> str:
    """The DOM Chromium renders at the load event (and a screenshot)."""
    chrome = browser()
    assert chrome is not None
    common = [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"]
    dom = await asyncio.create_subprocess_exec(*common, "--dump-dom", url, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    text = (await asyncio.wait_for(dom.communicate(), WAIT_S))[0].decode(errors="replace")
    if shot is not None:
        pic = await asyncio.create_subprocess_exec(*common, f"--screenshot={shot}", "--window-size=1400,1100", url, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        await asyncio.wait_for(pic.wait(), WAIT_S)
    return text


needs_browser = pytest.mark.skipif(browser() is None, reason="no Chromium here (apt-get install chromium; .ci/run installs it): the page was not checked in a browser")


@needs_browser
async def test_markup_from_students_is_shown_as_text_and_the_page_still_runs(tmp_path: Path):
    """Three students named with markup, one of whose machines answers every round with an error
    text full of markup: after the lessons, Chromium shows every text as text, app.js renders the
    final state, nothing is injected, and the page carries the Content-Security-Policy."""
    t = await start_teacher("--seats", "4", "--seats-per-address", "4", "--students", "3", "--pace", "0", "--wait", str(WAIT_S))
    students = []
    try:
        students.append(await start_student(t, tmp_path, NAMES[0]))
        students.append(await start_student(t, tmp_path, NAMES[1], hostile=("error-text", ERROR_TEXT)))
        students.append(await start_student(t, tmp_path, NAMES[2]))
        final = await t.wait_state("the end of the lessons", lambda s: bool(s.get("finished")))
        assert {s["name"] for s in final["students"].values()} == set(NAMES)
        assert any(ERROR_TEXT in e["text"] for e in final["events"])  # the error text reached the state, verbatim
        async with aiohttp.ClientSession() as http, http.get(t.url + "/") as r:
            assert r.headers["Content-Security-Policy"] == CSP and r.headers["X-Content-Type-Options"] == "nosniff"
            page = await r.text()
            assert "<script>" not in page.split("<body>")[1].replace('<script id="initial-state" type="application/json">', "")  # no inline script to allow
        shot = Path(os.environ.get("LDP_CLASSROOM_ABUSE_SCREENSHOT") or tmp_path / "abuse.png")
        dom = await chromium(t.url + "/", shot)
        assert page_problems(dom, [*NAMES, ERROR_TEXT]) == [], dom[:3000]
        assert 'data-finished="yes"' in dom and shot.stat().st_size > 10_000
        await t.type("")  # the end of the class
        await t.type("end")  # confirmed
        code, _, err = await t.finish()
        assert code == 0 and "Traceback" not in err, err
        for s in students:
            await ended(s)
    finally:
        t.kill()
        for s in students:
            if s.returncode is None:
                s.kill()


@needs_browser
async def test_the_old_inline_escaping_breaks_the_page(monkeypatch: pytest.MonkeyPatch):
    """The same page check on the same hostile state, served by the real ``Dashboard``: with
    ``inline_json`` it passes; with the escaping the classroom had (only ``</``), Chromium never
    runs app.js — which is what the check above would catch."""
    state = ClassState({"plan": {"seats": 2}, "join": "ldp-sim join 127.0.0.1:1 --token TOKEN --ca F"})
    state.data["students"]["0"] = {"seat": 0, "name": NAMES[0], "spent": 0.0, "machine_spent": 0.0, "budget": 4.0, "connected": True}
    state.event(f"{NAMES[0]}'s machine refused the round: {ERROR_TEXT}")

    def allocate(request: SeatRequest) -> dict[str, Any]:
        raise AssertionError("no seat in this test")

    async def problems() -> list[str]:
        dash = Dashboard(state, token="t" * 43, ca_pem=b"", allocate=allocate)
        port = await dash.start("127.0.0.1", 0)
        try:
            return page_problems(await chromium(f"http://127.0.0.1:{port}/"), [NAMES[0], ERROR_TEXT])
        finally:
            await dash.stop()

    assert await problems() == []
    monkeypatch.setattr(dashboard_module, "inline_json", lambda data: dashboard_module._dumps(data).replace("</", "<\\/"))
    assert "app.js did not run (no data-version on <body>)" in await problems()


# --- seats -------------------------------------------------------------------------------------


async def test_one_student_cannot_take_the_seats_of_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The attack of issue 23: an enrolled student asks for every seat with fresh nonces (from
    127.0.0.2, another machine on loopback); then claims seats over gRPC directly. One seat is
    all they get; an honest ``ldp-sim join`` (from 127.0.0.1) still joins."""
    from ldp.classroom import student
    from ldp.classroom.lessons import ClassPlan

    t = await start_teacher("--seats", "6", "--students", "1", "--pace", "0", "--wait", str(WAIT_S))
    honest = None
    try:
        answers = []
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))) as http:
            for _ in range(6):
                async with http.post(t.url + "/seat", json=seat_body(t.token, "greedy")) as r:
                    answers.append((r.status, await r.json()))
        assert answers[0][0] == 200 and answers[0][1]["seat"] == 0
        assert [s for s, _ in answers[1:]] == [409] * 5, answers
        assert all("already holds seat 0" in a["error"] and "one student, one seat" in a["error"] for _, a in answers[1:])
        # Seats given by the dashboard are useless without their secret: the greedy student claims
        # seat 1 (given to nobody) and seat 0 (theirs, but the secret is not sent) over gRPC.
        async with aiohttp.ClientSession() as http, http.get(t.url + "/ca.pem") as r:
            ca_pem = await r.read()
        plan = ClassPlan.from_json((await t.state())["class"]["plan"])
        grpc_port = (await t.state())["class"]["grpc_port"]
        for seat, why in ((1, "was not given to anyone"), (0, "belongs to another student")):
            # A modified client skips the seat request and claims the seat with a secret of its own.
            monkeypatch.setattr(student, "_fetch", lambda *a, _seat=seat, **k: (ca_pem, {"seat": _seat, "grpc_port": grpc_port, "plan": plan.to_json()}))
            ns = types.SimpleNamespace(host=t.host, token=t.token, token_file=None, ca=t.join_args[-1], name="greedy", budget=4.0, transcript=None, connect_timeout=WAIT_S)
            out = io.StringIO()
            squatter = asyncio.ensure_future(student.join(ns, student.Answers(1, 0), out))
            for _ in range(int(WAIT_S * 5)):  # refused (the task ends), or admitted (the broken variant: it joins)
                if squatter.done() or (await t.state()).get("joined"):
                    break
                await asyncio.sleep(0.2)
            assert squatter.done(), f"a claim without the seat's secret was admitted: {out.getvalue()}"
            assert squatter.result() != 0 and why in out.getvalue(), out.getvalue()
        # The honest student joins, and the lesson runs with them.
        honest = await start_student(t, tmp_path, "honest")
        final = await t.wait_state("the end of the lessons", lambda s: bool(s.get("finished")))
        seats = {s["name"]: s for s in final["students"].values()}
        assert seats["honest"]["connected"] and seats["honest"]["seat"] == 1
        await t.type("")
        await t.type("end")  # the end of the class, confirmed
        code, _, err = await t.finish()
        assert code == 0 and "Traceback" not in err, err
        assert (await ended(honest))[0] == 0
    finally:
        t.kill()
        if honest is not None and honest.returncode is None:
            honest.kill()


async def test_a_seat_nobody_uses_expires_and_the_teacher_removes_a_seat(tmp_path: Path):
    """A seat asked for and never connected is free again after --seat-timeout; the teacher's
    ``remove N`` (the console, on the terminal that holds the class's keys) closes that student's
    connection and frees the seat; ``seats`` lists who holds what."""
    t = await start_teacher("--seats", "2", "--seats-per-address", "2", "--seat-timeout", "2", "--wait", str(WAIT_S))
    student = None
    try:
        async with aiohttp.ClientSession() as http, http.post(t.url + "/seat", json=seat_body(t.token, "ghost")) as r:
            assert r.status == 200 and (await r.json())["seat"] == 0
        # (Not "wait until the seat shows, then until it goes": on a loaded machine 2 s may pass first.)
        snap = await t.wait_state("the ghost's seat freed", lambda s: any("seat 0 (ghost) is free again" in e["text"] for e in s["events"]))
        assert not snap["students"]
        student = await start_student(t, tmp_path, "ada")
        snap = await t.wait_state("ada connected", lambda s: s.get("joined") == 1)
        (seat,) = [s["seat"] for s in snap["students"].values() if s["name"] == "ada"]
        await t.type("seats")
        await t.wait_out(rf"seat {seat}: 'ada' from 127\.0\.0\.1, connected")
        await t.type("remove 7")
        await t.wait_out(r"seat 7 is not taken")
        await t.type(f"remove {seat}")
        await t.wait_out(rf"removed seat {seat} \(ada\); its connection is closed")
        code, said = await ended(student)
        assert "the teacher removed this seat" in said and "Traceback" not in said, said
        snap = await t.wait_state("ada's seat freed", lambda s: not s["students"])
        assert any(f"the teacher removed seat {seat} (ada)" in e["text"] for e in snap["events"])
        t.proc.stdin.close()  # type: ignore[union-attr]  # end of input: the teacher's console ends the class
        code, _, err = await t.finish()
        assert "Traceback" not in err, err
    finally:
        t.kill()
        if student is not None and student.returncode is None:
            student.kill()


# --- a student who ignores ledger queries; a quiet shutdown ------------------------------------


async def test_a_student_who_ignores_ledger_queries_is_asked_once_and_the_shutdown_is_quiet(tmp_path: Path):
    """Two honest students and one whose machine ignores every ledger query: the silent one is
    asked once (the first update, one deadline), marked "no answer" and never asked again; the
    honest ones' budgets are shown after every round. Then --linger ends the class with an SSE
    stream open: exit 0, and nothing on stderr (no CancelledError traceback)."""
    count = tmp_path / "ledger-queries.txt"
    t = await start_teacher(
        "--seats", "3", "--seats-per-address", "3", "--students", "3", "--pace", "0", "--linger", "3", "--ledger-deadline", "15", "--wait", str(WAIT_S)
    )
    students = []
    final: dict[str, Any] = {}

    async def watch() -> None:
        async with aiohttp.ClientSession() as http, http.get(t.url + "/events") as r:
            async for line in r.content:
                if line.startswith(b"data: "):
                    final.update(json.loads(line[6:]))

    watcher = asyncio.ensure_future(watch())
    try:
        students.append(await start_student(t, tmp_path, "ann"))
        students.append(await start_student(t, tmp_path, "silent", hostile=("silent-ledger", str(count))))
        students.append(await start_student(t, tmp_path, "bob"))
        code, out, err = await t.finish()
        assert code == 0, out + err
        assert err == "", err  # quiet: no traceback, no CancelledError, no log line
        codes = [(await ended(s))[0] for s in students]
        assert codes == [0, 0, 0]
        assert final.get("finished"), final
        assert len(count.read_text().splitlines()) == 1  # asked once, then skipped (the old teacher: once per round)
        (silent,) = [s for s in final["students"].values() if s["name"] == "silent"]
        assert silent["ledger"] == "no answer"
        assert [e["text"] for e in final["events"] if "did not report its ledger" in e["text"]] == ["silent's machine did not report its ledger within 15 s: not asked again"]
        honest = [s for s in final["students"].values() if s["name"] != "silent"]
        assert len(honest) == 2 and all(s["ledger"] == "ok" and 3.0 <= s["spent"] <= 4.0 for s in honest), honest  # read from their ledgers after the lessons
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        t.kill()
        for s in students:
            if s.returncode is None:
                s.kill()


# --- the token; malformed input; the ports -------------------------------------------------------


async def test_the_token_never_crosses_the_plain_http_port(tmp_path: Path):
    """Everything the dashboard serves over plain HTTP, with a student joined, holds no token
    (the page shows the join command with ``--token TOKEN``: the terminal has the real one)."""
    t = await start_teacher("--seats", "3", "--seats-per-address", "3", "--wait", str(WAIT_S))
    student = None
    try:
        student = await start_student(t, tmp_path, "ada")
        async with aiohttp.ClientSession() as http:
            await t.wait_state("ada connected", lambda s: s.get("joined") == 1)
            bodies = {}
            for path in ("/", "/state", "/app.js", "/style.css", "/ca.pem", "/qr.svg"):
                async with http.get(t.url + path) as r:
                    bodies[path] = await r.text()
                    assert r.status == (404 if path == "/qr.svg" else 200), path
            async with http.get(t.url + "/events") as r:
                bodies["/events"] = (await r.content.readuntil(b"\n\n")).decode()
        assert "ada" in bodies["/state"] and "--token TOKEN" in bodies["/state"]
        for path, body in bodies.items():
            assert t.token not in body, path
        # Done: end the class without running its lessons (end of input would start them, and a
        # student gone meanwhile would hold each round for its --round-deadline).
        t.proc.terminate()
        await t.finish()
    finally:
        t.kill()
        if student is not None and student.returncode is None:
            student.kill()


def _raw_http(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


async def test_every_endpoint_answers_malformed_input_with_a_4xx_and_a_message():
    """A seeded fuzz of every endpoint (every method on every path, bodies that are deep, huge,
    binary, of every JSON type, fields of every wrong type; raw bytes that are no HTTP; garbage on
    the gRPC port): every answer is a 4xx with a message, and the teacher prints no traceback."""
    t = await start_teacher("--seats", "3", "--wait", str(WAIT_S))
    try:
        rng = np.random.default_rng(23)
        good = seat_body(t.token, "ada")
        bodies: list[bytes] = [
            b"[" * 2000 + b"]" * 2000, b'{"a":[' * 400 + b"1" + b"]}" * 400, b"[" * 100_000,  # deep (within the 4 KiB cap), and too big
            b"", b"null", b"1e999999", b"NaN", b'"name"', b"[]", b"{}", b"\xff\xfe\x00garbage", b'{"name": "\xff"}',
            json.dumps({**good, "proof": "0" * 64}).encode(), json.dumps({**good, "nonce": "x"}).encode(),
            json.dumps({**good, "commit": "Z" * 64}).encode(), json.dumps({**good, "name": ""}).encode(),
            json.dumps({**good, "name": "a" * 41}).encode(), json.dumps({**good, "name": "a\u202eb"}).encode(),
            *(json.dumps({**good, key: bad}).encode() for key in ("name", "nonce", "commit", "proof") for bad in (None, 1, [], {}, True, [[[["deep"]]]])),
            *(bytes(rng.integers(0, 256, int(n), dtype=np.uint8)) for n in rng.integers(1, 4000, 12)),
        ]
        statuses = []
        async with aiohttp.ClientSession() as http:
            for body in bodies:
                async with http.post(t.url + "/seat", data=body, headers={"Content-Type": "application/json"}) as r:
                    answer = await r.json(content_type=None) if r.status != 413 else {"error": await r.text()}
                    statuses.append(r.status)
                    assert 400 <= r.status < 500 and answer.get("error"), (body[:60], r.status, answer)
            for method in ("GET", "PUT", "DELETE", "PATCH"):
                async with http.request(method, t.url + "/seat") as r:
                    assert r.status == 405 and await r.text()
            for method in ("POST", "PUT", "DELETE"):
                for path in ("/", "/state", "/events", "/ca.pem", "/app.js"):
                    async with http.request(method, t.url + path, data=b"{}") as r:
                        assert r.status == 405 and await r.text(), (method, path)
            for path in ("/../../etc/passwd", "/static/../cli.py", "/%00", "/seat/x", "/" + "a" * 5000):
                async with http.get(t.url + path) as r:
                    assert 400 <= r.status < 500 and await r.text(), (path, r.status)
            async with http.get(t.url + "/state?x=" + "%" * 100 + "&y=\u202e") as r:  # a query string is ignored
                assert r.status == 200
        port = int(t.host.rsplit(":", 1)[1])
        for raw in (b"\x16\x03\x01\x00\xa5garbage\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"GET /" + b"x" * 70_000 + b" HTTP/1.1\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"y" * 70_000 + b"\r\n\r\n", b"POST /seat HTTP/1.1\r\nContent-Length: -5\r\n\r\n", bytes(rng.integers(0, 256, 500, dtype=np.uint8))):
            answer = await asyncio.to_thread(_raw_http, port, raw)
            status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.") else 400  # no answer at all: the connection was dropped
            assert 400 <= status < 500, (raw[:40], answer[:200])
        grpc_port = (await t.state())["class"]["grpc_port"]
        for raw in (b"garbage\r\n\r\n", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(200), bytes(rng.integers(0, 256, 1000, dtype=np.uint8))):
            with socket.create_connection(("127.0.0.1", grpc_port), timeout=WAIT_S) as s:
                s.sendall(raw)
        async with aiohttp.ClientSession() as http, http.get(t.url + "/state") as r:  # still serving
            assert r.status == 200
        print(f"\nfuzzed POST /seat with {len(bodies)} bodies: statuses {sorted(set(statuses))}")
        t.proc.stdin.close()  # type: ignore[union-attr]
        code, out, err = await t.finish()
        assert "Traceback" not in out + err and "RecursionError" not in out + err, err
    finally:
        t.kill()


def test_a_busy_classroom_port_is_one_line():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = subprocess.run(
            [PYTHON, "-m", "ldp.cli.main", "classroom", "--bind", "127.0.0.1", "--host", "127.0.0.1", "--port", str(port), "--http-port", "0", "--students", "1"],
            capture_output=True, text=True, timeout=WAIT_S, env=ENV,
        )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{port}" in lines[0] and "--port" in lines[0], r.stderr


@pytest.mark.parametrize(("flag", "value"), [("--seats-per-address", "0"), ("--seat-timeout", "nan"), ("--ledger-deadline", "-1"), ("--round-deadline", "inf")])
def test_bad_classroom_options_are_one_line(flag: str, value: str):
    r = subprocess.run(
        [PYTHON, "-m", "ldp.cli.main", "classroom", "--bind", "127.0.0.1", "--host", "127.0.0.1", "--port", "0", "--http-port", "0", flag, value],
        capture_output=True, text=True, timeout=WAIT_S, env=ENV,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr and flag in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
