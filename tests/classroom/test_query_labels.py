"""Readable query labels on the dashboard (issue 29: "Query labels are raw expressions").

Lesson 4's learners ask their questions without a lesson's label; the dashboard used to show the
formula itself, e.g. ``(b=0) · (-0.5·((y) · ((-1)^<r_g,x>, r_g = …)) + 0.5)``. Each such request
now carries a plain-words label (``teacher.query_label``) and keeps the formula (``query``),
which the page shows as the label's title and on a smaller line under it. The state is built by
the real ``Teacher.round_started``; the page is rendered by headless Chromium (skipped without
one), every wait bounded; no clock in any verdict.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ldp.classroom.dashboard import ClassState, Dashboard
from ldp.classroom.lessons import ClassPlan
from ldp.classroom.teacher import Teacher, query_label, short_query
from ldp.core.randomizers import RandomizerSpec
from ldp.learners.masked_parity import a_query, a_query_family, bit_query
from ldp.learners.masked_parity_correlation import correlation_design, correlation_query
from ldp.local.messages import Assignment, RoundRequest, SessionKind, Users
from tests.classroom.browsers import browser

PLAN = ClassPlan(4, 3, 5)
WAIT_S = 120.0
FORMULA_SIGNS = ("·", "^", "∧", "≠", "r_g = …", "+ 0.5")  # what made the old labels formulas


def _learners_round(teacher: Teacher) -> list[dict[str, Any]]:
    """Lesson 4's questions as its learners ask them (no lesson labels), through ``round_started``."""
    queries = [correlation_query(v) for v in correlation_design(PLAN.d)[:3]] + [a_query([1, 0, 1, 0, 0]), a_query_family(0, 64), bit_query(2)]
    assignments = tuple(Assignment(k + 1, Users.of([k]), RandomizerSpec("binary_rr", q, 1.0)) for k, q in enumerate(queries))
    teacher.begin_step("Lesson 4 — interaction helps", "say")
    teacher.round_started(RoundRequest(1, SessionKind.INTERACTIVE, 0, assignments, last_round=True))
    requests: list[dict[str, Any]] = teacher.state.data["steps"][-1]["rounds"][-1]["requests"]
    return requests


def test_a_learners_question_is_labelled_in_words_and_keeps_its_formula() -> None:
    """Every label is words, not a formula (the broken variant — the label being ``short_query``,
    as before — fails on the first request: ``b=1 ∧ y=1``); the formula is still in ``query``."""
    teacher = Teacher(PLAN, "t" * 43, ClassState({"plan": PLAN.to_json()}), say=lambda line: None)
    requests = _learners_round(teacher)
    for req in requests:
        assert not any(sign in req["label"] for sign in FORMULA_SIGNS), req["label"]
        assert req["label"].endswith(("records)", "?")) and "your" in req["label"], req["label"]
        assert req["query"] and req["query"] != req["label"]
    labels = [r["label"] for r in requests]
    assert labels[1] == "does your label agree with your group's sign at your index i (− at i = 0, 2, 4, + elsewhere)? (only b = 1 records)"
    assert labels[3] == "does your label differ from the sign of the parity of x0 + x2? (only b = 0 records)"
    assert labels[4].startswith("does your label differ from the sign of your group's parity") and labels[4].endswith("(only b = 0 records)")
    assert labels[5] == "is your index i 2 and your label -1? (only b = 1 records)"
    assert requests[3]["query"] == "(b=0) · (-0.5·((y) · ((-1)^(x0+x2))) + 0.5)"  # the formula, kept
    assert [r["question"] for r in requests] == [""] * len(requests)  # no "a MASKED-PARITY question (product)"


def test_an_unknown_shape_falls_back_to_the_formula() -> None:
    """A query the describer does not know is shown as its formula, never mislabelled."""
    from ldp.core.query_specs import parity

    q = parity([0, 1])
    assert query_label(q) == short_query(q) == "(-1)^(x0+x1)"


async def test_the_page_shows_the_words_with_the_formula_smaller_under_them() -> None:
    """Chromium renders each learner's question as its words (bold, the formula as its title)
    with the formula on its own smaller line (``.formula``)."""
    if browser() is None:
        pytest.skip("no Chromium here (apt-get install chromium): the page was not rendered")
    teacher = Teacher(PLAN, "t" * 43, ClassState({"plan": PLAN.to_json()}), say=lambda line: None)
    requests = _learners_round(teacher)
    teacher.state.data["finished"] = True  # the page then stops listening: --dump-dom returns at load
    dash = Dashboard(teacher.state, token="t" * 43, ca_pem=b"", allocate=lambda r: {})
    port = await dash.start("127.0.0.1", 0)
    try:
        chrome = browser()
        assert chrome is not None
        proc = await asyncio.create_subprocess_exec(
            chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--dump-dom", f"http://127.0.0.1:{port}/",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )
        dom = (await asyncio.wait_for(proc.communicate(), WAIT_S))[0].decode(errors="replace")
    finally:
        await dash.stop()
    assert 'data-finished="yes"' in dom, dom[:2000]
    assert "does your label differ from the sign of the parity of x0 + x2? (only b = 0 records)</b>" in dom, dom[:4000]
    assert '<div class="formula">(b=0) · (-0.5·((y) · ((-1)^(x0+x2))) + 0.5)</div>' in dom
    assert dom.count('class="formula"') == len(requests)
