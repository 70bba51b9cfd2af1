"""The end of a class keeps the work (issue 29): pressing Enter at the end saves the class's record
— the dashboard's state as JSON, one row per lesson as CSV, each lesson's table as CSV — in
``--out`` (default: the current directory), says where, and only then stops the dashboard.

A real ``ldp-sim classroom`` with one real ``ldp-sim join`` on loopback (the helpers of
``test_classroom_abuse.py``); every wait is bounded (``WAIT_S``), none is a verdict.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from ldp.classroom.dashboard import ClassState
from ldp.classroom.lessons import ClassPlan
from ldp.classroom.teacher import Teacher
from ldp.core.errors import LDPError
from tests.classroom.test_classroom_abuse import WAIT_S, ended, start_student, start_teacher

pytestmark = pytest.mark.timeout(4 * int(WAIT_S))


async def test_enter_at_the_end_saves_the_record_says_where_then_stops(tmp_path: Path) -> None:
    out = tmp_path / "records"
    t = await start_teacher("--seats", "2", "--students", "1", "--pace", "0", "--wait", str(WAIT_S), "--out", str(out))
    student = None
    try:
        student = await start_student(t, tmp_path, "Zoë")
        final = await t.wait_state("the end of the lessons", lambda s: bool(s.get("finished")))
        assert not out.exists() or not list(out.iterdir())  # nothing saved before the teacher says so
        await t.type("")  # the end of the class
        code, said, err = await t.finish()
        assert code == 0 and "Traceback" not in err, err
        m = re.search(r"the class's record is saved: (\S+\.json) .*?, (\S+\.csv) \(one row per lesson\)", said)
        assert m is not None, said
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
