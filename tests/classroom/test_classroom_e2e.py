"""A class of 30 scripted ``ldp-sim join`` processes on loopback, end to end, with the real
``ldp-sim classroom`` (TLS, token enrolment, dashboard), watched over SSE and in headless Chromium.

One run (module fixture) serves every test here: the class joins, the four scripted lessons run,
then — while the teacher still serves the dashboard — Chromium loads it; then the teacher ends the
class and every student exits 0. Three students carry a small budget (1.5), so their own ledgers
refuse the second question onwards; everyone refuses the teacher's ε = 2 over-asking.
Measured here (printed, never asserted: a loaded machine is slow, not wrong): the whole run,
and the time from a student's report leaving its process (the time its terminal line carries)
to the dashboard's SSE update that shows it. Every wait is bounded by a generous deadline
(WAIT_S) on an event — a line, a state — so a slow run passes and a hung one fails.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest

from ldp.classroom.lessons import ClassPlan, estimate_reports, sensitive_spec
from ldp.classroom.teacher import parity_lesson_size
from ldp.learners.masked_parity_correlation import correlation_design, correlation_users_for
from tests.classroom.browsers import browser

PYTHON = sys.executable
STUDENTS = 30
LOW_BUDGET = {3, 13, 23}  # these students' own budget is 1.5
PLAN = ClassPlan(seats=32, machine_users=120, d=4)  # lesson 4 shows the gap from 20 students at d = 4 (parity_lesson_size)
WAIT_S = 900.0  # the bound on each wait for the class (a hung run fails; a slow one passes)
pytestmark = pytest.mark.timeout(3 * int(WAIT_S))


@dataclass
class ClassRun:
    elapsed: float = 0.0
    join_command: str = ""
    teacher_code: int | None = None
    teacher_out: str = ""
    student_codes: list[int] = field(default_factory=list)
    student_errs: list[str] = field(default_factory=list)
    snapshots: list[tuple[float, dict[str, Any]]] = field(default_factory=list)  # (time received, snapshot)
    transcripts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # student index -> rounds
    seats: dict[int, int] = field(default_factory=dict)  # student index -> seat
    cpu_seconds: float = 0.0  # user + system CPU of the teacher and the 30 students until the lessons ended
    dom: str = ""
    screenshot: Path | None = None
    browser_seconds: float = 0.0

    final: dict[str, Any] = field(default_factory=dict)  # the state when the last lesson ended


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (/proc/PID/stat fields 14 and 15)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _answers(i: int) -> dict[str, Any]:
    return {"sensitive": "y" if i % 3 == 0 else "n", "travel": 1 + i % 4}


async def _read_until(stream: asyncio.StreamReader, pattern: str, timeout_s: float, sink: list[str]) -> re.Match[str]:
    end = time.monotonic() + timeout_s
    while True:
        try:
            line = await asyncio.wait_for(stream.readline(), max(0.1, end - time.monotonic()))
        except TimeoutError:
            raise AssertionError(f"no line matching {pattern!r} within {timeout_s:g} s; the teacher said:\n" + "".join(sink)) from None
        if not line:
            raise AssertionError("the teacher ended early:\n" + "".join(sink))
        sink.append(line.decode(errors="replace"))
        m = re.search(pattern, sink[-1])
        if m:
            return m


async def _students_said(students: list[asyncio.subprocess.Process]) -> str:
    """The students' exit codes and the ends of their output (each stopped first if still running):
    the diagnosis when the class does not start. Identical outputs are shown once, with a count."""
    said: dict[str, list[int]] = {}
    for i, p in enumerate(students):
        if p.returncode is None:
            p.kill()
        out, err = await asyncio.wait_for(p.communicate(), WAIT_S)
        text = f"exit {p.returncode}; stdout: ...{out.decode(errors='replace')[-600:]!r}; stderr: ...{err.decode(errors='replace')[-1500:]!r}"
        said.setdefault(text, []).append(i)
    return "the students said:\n" + "\n".join(f"students {who}: {text}" for text, who in said.items())


async def _watch(url: str, run: ClassRun, stop: asyncio.Event) -> None:
    async with aiohttp.ClientSession() as http, http.get(url + "/events") as r:
        data = None
        while not stop.is_set():
            line = (await r.content.readline()).decode()
            if not line:
                return
            if line.startswith("data: "):
                data = json.loads(line[6:])
            elif line == "\n" and data is not None:
                run.snapshots.append((time.time(), data))
                data = None


async def _run_class(tmp: Path) -> ClassRun:
    run = ClassRun()
    start = time.monotonic()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    teacher = await asyncio.create_subprocess_exec(
        PYTHON, "-m", "ldp.cli.main", "classroom", "--host", "127.0.0.1", "--bind", "127.0.0.1", "--port", "0", "--http-port", "0",
        "--seats", str(PLAN.seats), "--machine-users", str(PLAN.machine_users), "--d", str(PLAN.d),
        "--students", str(STUDENTS), "--pace", "0", "--wait", str(WAIT_S), "--out", str(tmp / "records"),  # the record saved at the end
        # 30 students on one machine (loopback) hold 30 seats from one address; the ledger
        # deadline is generous, so a loaded machine never marks an honest student silent; so is
        # the seat timeout, so a student whose machine takes long between its seat and its
        # connection is not turned away.
        "--seats-per-address", str(PLAN.seats), "--ledger-deadline", str(WAIT_S), "--round-deadline", str(WAIT_S), "--seat-timeout", str(WAIT_S),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
    )
    out: list[str] = []
    students: list[asyncio.subprocess.Process] = []
    stop = asyncio.Event()
    watcher = None
    try:
        assert teacher.stdout is not None and teacher.stdin is not None
        m = await _read_until(teacher.stdout, r"(ldp-sim join (\S+) --token (\S+) --ca (\S+))", WAIT_S, out)
        run.join_command, host = m.group(1), m.group(2)
        url = f"http://{host}"
        watcher = asyncio.ensure_future(_watch(url, run, stop))
        args = run.join_command.split()[2:]
        for i in range(STUDENTS):
            answers = tmp / f"answers{i}.json"
            answers.write_text(json.dumps(_answers(i)))
            budget = "1.5" if i in LOW_BUDGET else "4"
            students.append(
                await asyncio.create_subprocess_exec(
                    PYTHON, "-m", "ldp.cli.main", "join", *args, "--name", f"student{i:02d}", "--budget", budget,
                    "--answers", str(answers), "--transcript", str(tmp / f"t{i}.jsonl"), "--connect-timeout", str(WAIT_S),
                    stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
                )
            )
        try:
            await _read_until(teacher.stdout, r"Lesson 4", WAIT_S, out)
        except AssertionError as exc:  # the class never started: what the students said tells why
            raise AssertionError(f"{exc}\n{await _students_said(students)}") from None
        end = time.monotonic() + WAIT_S
        while not (run.snapshots and run.snapshots[-1][1].get("finished")):
            assert time.monotonic() < end, "the lessons did not finish in time:\n" + "".join(out)
            await asyncio.sleep(0.05)
        run.elapsed = time.monotonic() - start
        run.cpu_seconds = sum(_cpu_seconds(p.pid) for p in [teacher, *students])
        async with aiohttp.ClientSession() as http, http.get(url + "/state") as r:
            run.final = await r.json()
        (tmp / "final.json").write_text(json.dumps(run.final, indent=1))
        if os.environ.get("LDP_CLASSROOM_STATE"):  # keep the final state for a look
            shutil.copy(tmp / "final.json", os.environ["LDP_CLASSROOM_STATE"])
        # During the run (the teacher still serves the dashboard): a real browser loads it.
        chrome = browser()
        if chrome is not None:
            t0 = time.monotonic()
            shot = tmp / "dashboard.png"
            # --dump-dom prints the DOM at the load event: the page has rendered the snapshot it was
            # served with by then (its SSE stream stays open, so a virtual-time budget never ends).
            common = [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"]
            dom = await asyncio.create_subprocess_exec(*common, "--dump-dom", url + "/", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
            run.dom = (await asyncio.wait_for(dom.communicate(), WAIT_S))[0].decode(errors="replace")
            pic = await asyncio.create_subprocess_exec(*common, f"--screenshot={shot}", "--window-size=1400,1500", url + "/", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
            await asyncio.wait_for(pic.wait(), WAIT_S)
            run.screenshot = shot if shot.exists() else None
            run.browser_seconds = time.monotonic() - t0
        teacher.stdin.write(b"\nend\n")  # end the class, confirmed
        await teacher.stdin.drain()
        rest = await asyncio.wait_for(teacher.stdout.read(), WAIT_S)
        out.append(rest.decode(errors="replace"))
        run.teacher_code = await asyncio.wait_for(teacher.wait(), WAIT_S)
        for s in students:
            _, err = await asyncio.wait_for(s.communicate(), WAIT_S)
            run.student_codes.append(int(s.returncode if s.returncode is not None else -1))
            run.student_errs.append(err.decode(errors="replace"))
    finally:
        stop.set()
        if watcher is not None:
            watcher.cancel()
        for p in [teacher, *students]:
            if p.returncode is None:
                p.kill()
                await p.wait()
        run.teacher_out = "".join(out)
    for i in range(STUDENTS):
        path = tmp / f"t{i}.jsonl"
        run.transcripts[i] = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    for seat, s in run.final["students"].items():
        run.seats[int(s["name"].removeprefix("student"))] = int(seat)
    return run


@pytest.fixture(scope="module")
def class_run(tmp_path_factory: pytest.TempPathFactory) -> ClassRun:
    return asyncio.run(_run_class(tmp_path_factory.mktemp("classroom")))


def _step(run: ClassRun, title: str) -> dict[str, Any]:
    (step,) = [s for s in run.final["steps"] if s["title"].startswith(title)]
    return step


def test_thirty_students_join_and_the_lessons_run_end_to_end(class_run: ClassRun):
    run = class_run
    print(
        f"\n30-student classroom: lessons finished {run.elapsed:.1f} s after the teacher started, using {run.cpu_seconds:.1f} CPU-seconds "
        f"(teacher + 30 students; {os.cpu_count()} cores here, load average {os.getloadavg()[0]:.1f}); browser {run.browser_seconds:.1f} s"
    )
    assert run.teacher_code == 0, run.teacher_out
    assert run.student_codes == [0] * STUDENTS, [e for e in run.student_errs if e][:3]
    final = run.final
    assert final["joined"] == STUDENTS and len(final["students"]) == STUDENTS
    assert sorted(run.seats.values()) == list(range(STUDENTS))
    titles = [s["title"] for s in final["steps"]]
    assert [t.split(" —")[0] for t in titles] == ["Lesson 1", "Lesson 2", "Lesson 3", "Lesson 4"]  # as docs/classroom.md numbers them
    # The run's wall and CPU time are printed above, not asserted (docs/classroom.md, "Measured").
    assert not [e for e in final["events"] if "did not report its ledger" in e["text"]]  # no honest student marked silent
    # What each student's terminal says was sent is what the dashboard received from that seat.
    (req,) = _step(run, "Lesson 1")["rounds"][0]["requests"]
    shown = {c["seat"]: c["value"] for c in req["chips"]}
    sent = {}
    for i, rounds in run.transcripts.items():
        (entry,) = [e for e in rounds if str(e.get("request_id")) == req["id"]]
        sent[run.seats[i]] = entry["student"]["sent"]
    assert shown == sent and len(sent) == STUDENTS
    # The dashboard's estimate is the debiased estimate of exactly those reports.
    est = estimate_reports(sensitive_spec(1.0), PLAN.schema, np.array([sent[s] for s in sorted(sent)], dtype=np.uint8), label="yes")
    assert est is not None and req["estimate"]["n"] == STUDENTS
    assert math.isclose(req["estimate"]["values"][0], est.values[0], abs_tol=1e-12)
    assert math.isclose(req["estimate"]["low"][0], est.low[0], abs_tol=1e-12) and math.isclose(req["estimate"]["high"][0], est.high[0], abs_tol=1e-12)
    assert 10 / 30 == pytest.approx(sum(_answers(i)["sensitive"] == "y" for i in range(STUDENTS)) / STUDENTS)


def test_every_student_refuses_what_exceeds_their_own_budget(class_run: ClassRun):
    run = class_run
    over = _step(run, "Lesson 3 — the ledger says no")
    (req,) = over["rounds"][0]["requests"]
    assert req["epsilon"] == 2.0 and req["refused"] == STUDENTS and req["answered"] == 0
    assert over["result"]["refused"] == STUDENTS
    for i, rounds in run.transcripts.items():
        budget = 1.5 if i in LOW_BUDGET else 4.0
        spent = 0.0
        for e in rounds:
            if "student" not in e:
                continue
            # Refused exactly when this request would take the student past their own budget.
            assert e["student"]["refused"] == (spent + e["epsilon"] > budget + 1e-9), (i, e, spent)
            if not e["student"]["refused"]:
                spent += e["epsilon"]
                assert e["student"]["spent"] <= budget + 1e-9
        assert spent <= budget
        # The dashboard's budget column reads the same ledger.
        entry = run.final["students"][str(run.seats[i])]
        assert entry["budget"] == budget and entry["spent"] == pytest.approx(spent, abs=1e-9)
    low = [run.final["students"][str(run.seats[i])]["spent"] for i in LOW_BUDGET]
    assert low == [1.0, 1.0, 1.0]  # lesson 1 only: the histogram's ε = 1 would exceed 1.5


def test_interaction_is_shown_live_round_two_asks_about_round_ones_r(class_run: ClassRun):
    step = _step(class_run, "Lesson 4")
    rounds = step["rounds"]
    first, second = rounds[0], rounds[1]
    assert not first["last"] and second["last"] and first["session"] == second["session"]
    # The correlation learner (the sharpest interactive one): round 1 is one request per group of
    # its public Hadamard design (K = 8 at d = 4), each a question about the coordinate a user holds.
    assert len(first["requests"]) == correlation_design(PLAN.d).shape[0] == 8
    assert all("i≠" in r["query"] or "b=1 ∧ y=1" in r["query"] for r in first["requests"]), [r["query"] for r in first["requests"]]
    # Both learners get the same users: as many as the interactive one needs for 95 %, at most half the class each (user ranges).
    users = step["result"]["interactive"]["users"]
    assert users == step["result"]["one_round"]["users"] == min(STUDENTS * PLAN.per_seat // 2, correlation_users_for(PLAN.d, 1.0)) == parity_lesson_size(PLAN, STUDENTS).users
    assert sum(r["asked"] for r in first["requests"]) + second["requests"][0]["asked"] <= users
    r_found = step["result"]["interactive"]["r"]
    terms = "+".join(f"x{j}" for j, bit in enumerate(r_found) if bit == "1") or "0"
    assert f"(-1)^({terms})" in second["requests"][0]["query"]  # the second question depends on the first round's r
    one_round = rounds[2]
    assert one_round["last"] and one_round["session"] != first["session"]
    assert set(step["result"]) >= {"truth", "interactive", "one_round"}
    histogram = _step(class_run, "Lesson 2")
    grr, other = histogram["rounds"]
    # Every request of lesson 2 is answered in time by all but the small-budget students.
    assert [(r["answered"], r["refused"], r["missing"]) for r in grr["requests"]] == [(STUDENTS - 3, 3, 0)]
    if histogram["result"]["other"] == "oue":
        assert [(r["answered"], r["refused"], r["missing"]) for r in other["requests"]] == [(STUDENTS - 3, 3, 0)]
    assert histogram["result"]["grr_width"] > 0 and histogram["result"]["other_width"] > 0


def test_the_class_record_holds_each_lessons_typed_result(class_run: ClassRun):
    """Each lesson returns an ``ExperimentResult`` (the type of every experiment and lab): the
    class's record in the dashboard's state has one row per lesson, its line the dashboard showed."""
    from ldp.experiment import ExperimentResult

    record = class_run.final["record"]
    lessons = [ExperimentResult.from_json(r) for r in record["lessons"]]
    titles = [s["title"] for s in class_run.final["steps"]]
    assert [r.title for r in lessons] == titles
    assert [r.notes for r in lessons] == [s["result"]["text"] for s in class_run.final["steps"]]
    assert [tuple(row.values()) for row in record["summary"]["rows"]] == [(r.title, r.notes) for r in lessons]
    parity = lessons[-1]
    assert parity.columns[0] == "learner" and [row[0] for row in parity.rows] == ["interactive (correlation)", "one round (fair)"]
    assert lessons[2].rows == ((2.0, STUDENTS, 0, STUDENTS, 0, 0),)  # ε asked, students asked, answered, refused, missing, error


def test_time_from_a_students_report_to_the_dashboard_update(class_run: ClassRun):
    """Seconds from the moment a student's process produced its lesson-1 report (its terminal
    line's time) to the SSE snapshot that first shows it, over the 30 students."""
    run = class_run
    (req,) = _step(run, "Lesson 1")["rounds"][0]["requests"]
    latencies = []
    for i, rounds in run.transcripts.items():
        (entry,) = [e for e in rounds if str(e.get("request_id")) == req["id"]]
        seat = run.seats[i]
        seen = None
        for t, snap in run.snapshots:
            steps = [s for s in snap["steps"] if s["title"].startswith("Lesson 1")]
            if steps and steps[0]["rounds"] and any(c["seat"] == seat for c in steps[0]["rounds"][0]["requests"][0]["chips"]):
                seen = t
                break
        assert seen is not None
        latencies.append(seen - entry["time"])
    lat = np.array(latencies)
    print(f"\nanswer → dashboard update (SSE) over {len(lat)} students: median {1000 * np.median(lat):.1f} ms, 90th percentile {1000 * np.quantile(lat, 0.9):.1f} ms, max {1000 * lat.max():.1f} ms")
    assert (lat > -0.01).all()  # same clock: nothing is seen before it is sent (an order, not a duration)


def test_a_real_browser_shows_the_estimate(class_run: ClassRun):
    if browser() is None:
        pytest.skip("no Chromium here (apt-get install chromium; .ci/run installs it): the dashboard's page was not checked in a browser")
    run = class_run
    assert run.dom, "Chromium printed no DOM"
    (req,) = _step(run, "Lesson 1")["rounds"][0]["requests"]
    est = req["estimate"]
    want = f"yes: {est['values'][0]:.3f} [{est['low'][0]:.3f}, {est['high'][0]:.3f}]"
    m = re.search(rf'id="est-{req["id"]}-0"[^>]*>([^<]*)<', run.dom)
    assert m is not None, run.dom[:2000]
    assert m.group(1) == want
    assert 'data-finished="yes"' in run.dom  # the page rendered the final state
    assert f"{STUDENTS} joined" in run.dom
    assert run.screenshot is not None and run.screenshot.stat().st_size > 10_000
    keep = os.environ.get("LDP_CLASSROOM_SCREENSHOT")
    if keep:
        shutil.copy(run.screenshot, keep)


def test_join_rejects_bad_arguments_with_one_line():
    r = subprocess.run([PYTHON, "-m", "ldp.cli.main", "join", "127.0.0.1:9", "--token", "t" * 43, "--ca", "xyz", "--answers", "/nonexistent"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "answers file" in r.stderr and "Traceback" not in r.stderr


def test_classroom_refuses_a_busy_dashboard_port_with_one_line():
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = subprocess.run(
            [PYTHON, "-m", "ldp.cli.main", "classroom", "--bind", "127.0.0.1", "--host", "127.0.0.1", "--port", "0", "--http-port", str(port), "--students", "1"],
            capture_output=True, text=True, timeout=300,
        )
    assert r.returncode == 2 and "cannot serve the dashboard" in r.stderr and "Traceback" not in r.stderr
