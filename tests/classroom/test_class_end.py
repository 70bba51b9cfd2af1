"""The end of a class keeps the work (issue 29): as soon as the lessons end, the class's record is
saved — the dashboard's state as JSON, one row per lesson as CSV, each lesson's table as CSV, each
lesson's charts as PNG — in ``--out`` (default: the current directory), and the teacher is told
where, while the dashboard stays up. Enter then asks for a confirmation; ``end`` (or a second
Enter) closes the dashboard.

A real ``ldp-sim classroom`` with one real ``ldp-sim join`` on loopback (the helpers of
``test_classroom_abuse.py``); every wait is bounded (``WAIT_S``), none is a verdict. The broken
variant it catches: an end that closes at the first Enter (the process exits, so the dashboard's
/state after the confirmation prompt fails), or a record saved only at the end (no files while the
dashboard is up).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from ldp.classroom.dashboard import ClassState
from ldp.classroom.lessons import ClassPlan
from ldp.classroom.teacher import Console, Teacher
from ldp.core.errors import LDPError
from tests.classroom.test_classroom_abuse import WAIT_S, ended, start_student, start_teacher

pytestmark = pytest.mark.timeout(4 * int(WAIT_S))

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


async def test_the_record_is_saved_at_once_and_the_dashboard_stays_until_confirmed(tmp_path: Path) -> None:
    out = tmp_path / "records"
    t = await start_teacher("--seats", "2", "--students", "1", "--pace", "0", "--wait", str(WAIT_S), "--out", str(out))
    student = None
    try:
        student = await start_student(t, tmp_path, "Zoë")
        final = await t.wait_state("the end of the lessons", lambda s: bool(s.get("finished")))
        # Saved with no key pressed, and said where.
        m = await t.wait_out(r"the class's record is saved: (\S+\.json) .*?, (\S+\.csv) \(one row per lesson\).*?; its charts: ([^\n]+)")
        json_path, csv_path = Path(m.group(1)), Path(m.group(2))
        assert json_path.parent == out and csv_path.parent == out
        saved = json.loads(json_path.read_text(encoding="utf-8"))
        assert saved["finished"] and [s["title"] for s in saved["steps"]] == [s["title"] for s in final["steps"]]
        assert saved["record"] == final["record"] and t.token not in json_path.read_text(encoding="utf-8")
        rows = list(csv.reader(csv_path.open(encoding="utf-8")))
        assert rows[0] == ["lesson", "title", "result"] and [r[0] for r in rows[1:]] == ["1", "2", "3", "4"]
        tables = sorted(out.glob("class-record-*-lesson-*.csv"))
        assert len(tables) == 4
        assert next(csv.reader(tables[0].open(encoding="utf-8")))[0] == "answer"
        # One PNG per lesson that has a chart: lessons 1 and 2 ask the students and estimate.
        charts = sorted(out.glob("class-record-*-lesson-*.png"))
        assert [c.name for c in charts] == m.group(3).strip().split(", ")
        assert {"1.png", "2.png"} <= {c.name.split("-lesson-")[1] for c in charts}
        assert all(c.read_bytes()[:8] == PNG_MAGIC and c.stat().st_size > 1000 for c in charts)
        assert (await t.state())["finished"]  # the dashboard still answers
        # One Enter asks; it does not close.
        await t.type("")
        await t.wait_out(r"end the class and close the dashboard\? type `end` \(or press Enter again\)")
        assert (await t.state())["finished"] and t.proc.returncode is None
        await t.type("end")  # the confirmation
        code, said, err = await t.finish()
        assert code == 0 and "Traceback" not in err, err
        assert (await ended(student))[0] == 0
    finally:
        t.kill()
        if student is not None and student.returncode is None:
            student.kill()


def test_a_record_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    teacher = Teacher(ClassPlan(2, 3, 4), "t" * 43, ClassState({}), say=lambda line: None)
    blocker = tmp_path / "a file"
    blocker.write_text("not a directory")
    with pytest.raises(LDPError, match="cannot save the class's record in .*choose another --out"):
        teacher.save_record(blocker / "sub")
    assert [p.name for p in teacher.save_record(tmp_path / "ok", stamp="x")] == ["class-record-x.json", "class-record-x.csv"]


async def test_the_console_help_names_the_confirmation() -> None:
    """``help`` tells the teacher how the class ends; ``end`` before the end is one line, not the end."""
    said: list[str] = []
    console = Console(Teacher(ClassPlan(2, 3, 4), "t" * 43, ClassState({}), say=lambda line: None), said.append)
    await console.command("help")
    assert "`end`" in said[-1] and "closes the dashboard" in said[-1]
    await console.command("end")
    assert "once the lessons are over" in said[-1]


def test_a_class_that_does_not_fill_says_where_joining_stopped() -> None:
    """``ldp-sim classroom --students N`` that gives up says how many seats the dashboard gave,
    how many connected, and the aggregator's last refusals: a teacher sees whether the students
    never reached the dashboard, reached it but not the gRPC port, or were turned away."""
    from types import SimpleNamespace

    from ldp.classroom.dashboard import SeatRequest

    teacher = Teacher(ClassPlan(4, 3, 4), "t" * 43, ClassState({}), say=lambda line: None)
    teacher.aggregator = SimpleNamespace(shards=[], events=[])  # type: ignore[assignment]
    nobody = teacher.join_shortfall(3, 60)
    assert nobody.startswith("only 0 of 3 students joined within 60 s: 0 seats given on the dashboard, 0 connected")
    assert "no student's machine asked the dashboard for a seat" in nobody
    teacher.allocate(SeatRequest("ann", "n1", "c1", "10.0.0.5"))
    teacher.allocate(SeatRequest("bob", "n2", "c2", "10.0.0.6"))
    unreached = teacher.join_shortfall(3, 60)
    assert "2 seats given on the dashboard, 0 connected" in unreached and "have not reached the aggregator's port" in unreached
    teacher.aggregator.events.append("rejected a client at ipv4:10.0.0.6:5000: seat 1 belongs to another student: this connection does not carry its secret")
    refused = teacher.join_shortfall(3, 60)
    assert "1 connection was refused; the last: rejected a client at ipv4:10.0.0.6:5000: seat 1 belongs to another student" in refused
    assert "have not reached" not in refused
