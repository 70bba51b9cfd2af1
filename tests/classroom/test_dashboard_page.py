"""The dashboard's page as a projector shows it (issue 29): large type, rounds oldest first, OUE
reports as bits, an event list numbered past 9, lessons numbered as in docs/classroom.md, rounds
named in plain words, and intervals of fractions drawn on the 0–1 axis with a word on why they
can leave it.

The state is built by the real ``Teacher`` methods (``begin_step``, ``round_started``,
``on_reply``) with synthetic requests and replies, so the JSON checked is the one the class would
serve; the page is then rendered by headless Chromium (``--dump-dom``; skipped without one) and
screenshotted at 1024×768 and 1920×1080 (kept under ``LDP_CLASSROOM_SHOTS`` when set, to look at).
No clock in any verdict: every wait on Chromium is bounded generously.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldp.classroom.dashboard import ClassState, Dashboard
from ldp.classroom.lessons import ClassPlan, sensitive_spec, travel_oue_spec
from ldp.classroom.teacher import Seat, Teacher
from ldp.core.randomizers import LocalRandomizer
from ldp.core.rng import RandomSource
from ldp.local.messages import Assignment, Result, RoundReply, RoundRequest, SessionKind, Users
from tests.classroom.browsers import browser

WAIT_S = 120.0
PLAN = ClassPlan(4, 3, 4)
STATIC = Path(__file__).resolve().parents[2] / "ldp" / "classroom" / "static"


def _request(session: int, rnd: int, rid: int, spec: Any, last: bool = True) -> RoundRequest:
    users = [PLAN.student_user(s) for s in range(3)]
    return RoundRequest(session, SessionKind.INTERACTIVE, rnd, (Assignment(rid, Users.of(users), spec),), last_round=last)


def _class() -> Teacher:
    """A teacher's state after lesson 1 (one round), lesson 2 (OUE, one report per student, all
    agreeing: the old zero-width interval) and lesson 4's two rounds of one interactive session,
    with 12 events."""
    teacher = Teacher(PLAN, "t" * 43, ClassState({"plan": PLAN.to_json(), "join": "ldp-sim join …"}), say=lambda line: None)
    for seat, name in enumerate(("Zoë Ünïcode", "陈 Chen", "a very long student name that goes on and on")):
        teacher._seats[seat] = Seat(name, f"{seat:032x}", "0" * 64, "127.0.0.1", idle_since=None, connected=True)  # noqa: SLF001 - as allocate gives them
        teacher.state.data["students"][str(seat)] = {"seat": seat, "name": name, "spent": 1.0, "machine_spent": 0.0, "budget": 4.0, "connected": True}
    for k in range(12):
        teacher.state.event(f"event {k + 1}")
    teacher.begin_step("Lesson 1 — randomized response", "say")
    teacher._labels = ["yes"]  # noqa: SLF001 - what Teacher.round sets before a lesson's round
    teacher.round_started(_request(1, 0, 11, sensitive_spec(1.0)))
    _reply(teacher, 11, [np.uint8(1), np.uint8(0), np.uint8(1)])
    teacher.begin_step("Lesson 2 — a histogram", "say")
    oue = LocalRandomizer.build(travel_oue_spec(1.0), PLAN.schema).randomizer
    row = oue.sample(np.array([3.0]), RandomSource(0).for_request("page", 0, np.arange(1)))[0]
    teacher._labels = ["OUE"]  # noqa: SLF001
    teacher.round_started(_request(2, 0, 21, travel_oue_spec(1.0)))
    _reply(teacher, 21, [row, row, row])
    teacher.begin_step("Lesson 3 — the ledger says no", "say")
    teacher.begin_step("Lesson 4 — interaction helps", "say")
    teacher.round_started(_request(3, 0, 31, sensitive_spec(1.0), last=False))
    teacher.round_started(_request(3, 1, 32, sensitive_spec(1.0)))
    return teacher


def _reply(teacher: Teacher, rid: int, values: list[Any]) -> None:
    for seat, v in enumerate(values):
        result = Result(rid, np.asarray([v]), np.zeros(1, dtype=bool))
        teacher.on_reply(f"{seat}/{PLAN.seats}", RoundReply(0, 0, (result,)))


def test_the_state_names_rounds_in_plain_words_and_lessons_as_the_guide_does() -> None:
    """Lessons numbered 1–4 as in docs/classroom.md (the old dashboard: "Lesson 1", "Lesson 2",
    an unnumbered "The ledger says no", "Lesson 3"); a round is "question k of lesson L"; an OUE
    chip is the bits the student's terminal shows; the events are numbered over the class."""
    state = _class().state.snapshot()
    steps = state["steps"]
    assert [s["lesson"] for s in steps] == [1, 2, 3, 4]
    assert [s["title"].split(" —")[0] for s in steps] == ["Lesson 1", "Lesson 2", "Lesson 3", "Lesson 4"]
    guide = (Path(__file__).resolve().parents[2] / "docs" / "classroom.md").read_text(encoding="utf-8")
    assert re.findall(r"^### ([1-4])\. ", guide, flags=re.M) == ["1", "2", "3", "4"]
    assert [r["title"] for r in steps[3]["rounds"]] == ["question 1 of lesson 4", "question 2 of lesson 4: chosen from the answers to question 1"]
    chips = steps[1]["rounds"][0]["requests"][0]["chips"]
    assert [c["value"] for c in chips] == [chips[0]["value"]] * 3 and re.fullmatch(r"bits [01]{4}", chips[0]["value"]), chips
    est = steps[1]["rounds"][0]["requests"][0]["estimate"]
    assert all(h - lo > 0.1 for lo, h in zip(est["low"], est["high"])) and est["bounds"] == [0.0, 1.0]
    assert [e["n"] for e in state["events"]] == list(range(1, 13))


def test_the_stylesheet_is_sized_for_a_projector() -> None:
    """Body text ≥ 18 px (it was 15 px, tables 13 px), headings ≥ 1.4 em; nothing smaller than 0.8 em."""
    css = (STATIC / "style.css").read_text(encoding="utf-8")
    body = re.search(r"body \{[^}]*font: (\d+)px", css)
    assert body is not None and int(body.group(1)) >= 18
    for sel in (r"header h1", r"\nh2", r"\.step h3"):
        m = re.search(sel + r" \{[^}]*font-size: ([\d.]+)em", css)
        assert m is not None and float(m.group(1)) >= 1.4, sel
    assert min(float(x) for x in re.findall(r"font-size: ([\d.]+)em", css)) >= 0.8


async def _render(url: str, tmp: Path) -> tuple[str, dict[str, Path]]:
    chrome = browser()
    assert chrome is not None
    common = [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"]
    dom = await asyncio.create_subprocess_exec(*common, "--dump-dom", url, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    text = (await asyncio.wait_for(dom.communicate(), WAIT_S))[0].decode(errors="replace")
    shots = {}
    for size in ("1024,768", "1920,1080"):
        shot = tmp / f"dashboard-{size.replace(',', 'x')}.png"
        pic = await asyncio.create_subprocess_exec(*common, f"--screenshot={shot}", f"--window-size={size}", url, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        await asyncio.wait_for(pic.wait(), WAIT_S)
        shots[size] = shot
    return text, shots


async def test_the_page_in_a_browser(tmp_path: Path) -> None:
    """Chromium renders the state: rounds oldest first, bits on the chips, the events numbered
    12 down to 1 (an <ol> with each item's value), the note on estimates outside 0–1."""
    if browser() is None:
        pytest.skip("no Chromium here (apt-get install chromium): the page was not rendered")
    teacher = _class()
    teacher.state.data["finished"] = True  # the page then stops listening: --dump-dom returns at load
    dash = Dashboard(teacher.state, token="t" * 43, ca_pem=b"", allocate=lambda r: {})
    port = await dash.start("127.0.0.1", 0)
    try:
        dom, shots = await _render(f"http://127.0.0.1:{port}/", tmp_path)
    finally:
        await dash.stop()
    assert 'data-finished="yes"' in dom, dom[:2000]
    first, second = dom.index("Question 1 of lesson 4"), dom.index("Question 2 of lesson 4")
    assert first < second  # oldest first (the old page put round 2 above round 1)
    assert "session 3" not in dom and "round 0" not in dom
    assert re.search(r"Zoë Ünïcode: bits [01]{4}", dom), dom[:3000]
    values = [int(v) for v in re.findall(r'<li value="(\d+)"', dom)]
    assert values == list(range(12, 0, -1)), values
    assert "The bars are clipped at 0 and 1" in dom
    keep = os.environ.get("LDP_CLASSROOM_SHOTS")
    for shot in shots.values():
        assert shot.exists() and shot.stat().st_size > 10_000
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, keep)
