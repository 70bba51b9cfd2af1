"""The classroom's lessons without a class of processes: lesson 3 (lab 4 run by the class) with
the sharpest pair of learners, and every lesson's result in the experiments' type.

The lesson runs against an in-process LR oracle over the class's MASKED-PARITY users (the
30-student end-to-end run over TLS is ``test_classroom_e2e.py``); the seats are said connected and
the ledger read-out is skipped, which the lesson needs no more than the dashboard does.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ldp.classroom.dashboard import ClassState
from ldp.classroom.lessons import ClassPlan, class_target
from ldp.classroom.teacher import Teacher
from ldp.core.concepts import concept_class
from ldp.core.population import PopulationSpec
from ldp.experiment import ExperimentResult
from ldp.learners import masked_parity_correlation
from ldp.learners.masked_parity import learn_masked_parity_interactive, lni_plan
from ldp.learners.masked_parity_correlation import correlation_plan, correlation_users_for, li_predicted_success
from ldp.local.oracle import InProcessLROracle

PLAN = ClassPlan(seats=32, machine_users=400, d=6)
STUDENTS = 30
TOKENS = [f"class-token-{k}" for k in range(20)]  # 20 classes, each with its own target (derived from its token)


def _teacher(token: str, students: int = STUDENTS, plan: ClassPlan = PLAN) -> Teacher:
    teacher = Teacher(plan, token, ClassState({"plan": plan.to_json()}), say=lambda line: None)
    cc = concept_class("masked_parity", plan.d)
    teacher.oracle = InProcessLROracle(PopulationSpec(cc, class_target(token, plan.d), plan.size, budget=4.0, seed=7))  # type: ignore[assignment]
    teacher.connected_seats = lambda: list(range(students))  # type: ignore[method-assign]

    async def no_ledgers() -> None:
        return None

    teacher.update_budgets = no_ledgers  # type: ignore[method-assign]
    return teacher


def _lesson(token: str) -> tuple[ExperimentResult, dict[str, Any]]:
    teacher = _teacher(token)
    result = asyncio.run(teacher.lesson_masked_parity())
    return result, teacher.state.data["steps"][-1]["result"]


def test_the_lesson_gives_both_learners_the_users_where_the_gap_shows() -> None:
    """Both learners get n users: as many as the interactive one needs for 95 % (3,798 at d = 6,
    as user ranges: the halves may split a seat), at most half the class each. At that n the
    plans predict the gap (numbers, not a statistic): the correlation learner ≥ 95 %, the fair
    one-round ≤ 50 %, and the paper's LI (the lesson's learner before) < 50 % too."""
    n = correlation_users_for(PLAN.d, 1.0)
    assert n == 3798 <= STUDENTS * PLAN.per_seat // 2
    result, shown = _lesson(TOKENS[0])
    assert shown["interactive"]["users"] == shown["one_round"]["users"] == n
    assert correlation_plan(n, PLAN.d, 1.0).predicted_success >= 0.95 > 0.5 >= lni_plan(n, PLAN.d, 1.0).predicted_success
    assert li_predicted_success(n, PLAN.d, 1.0) < 0.5
    assert result.columns == ("learner", "rounds", "users", "r", "a", "right", "predicted success")
    assert [row[:3] for row in result.rows] == [("interactive (correlation)", 2, n), ("one round (fair)", 1, n)]
    assert result.notes == shown["text"] and result.title.startswith("Lesson 4 — interaction helps")


def _wins(tokens: list[str]) -> tuple[int, int]:
    interactive = one_round = 0
    for token in tokens:
        _, shown = _lesson(token)
        interactive += shown["interactive"]["right"]
        one_round += shown["one_round"]["right"]
    return interactive, one_round


def test_over_twenty_classes_the_interactive_learner_wins_and_the_one_round_learner_mostly_fails() -> None:
    """20 classes (seeded tokens, so seeded targets and records): the interactive learner learns
    the target in ≥ 16 (predicted success 0.951: a false alarm when Binomial(20, 0.951) < 16, about
    2·10⁻³), the one-round learner in ≤ 12 (predicted 0.27: Binomial(20, 0.27) > 12 about 4·10⁻⁴)."""
    interactive, one_round = _wins(TOKENS)
    assert interactive >= 16 and one_round <= 12, (interactive, one_round)


def test_the_check_catches_the_papers_learner_in_the_lesson(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broken variant: the lesson with the paper's LI in place of the correlation learner
    (predicted success 0.34 at these users) fails the check above (it would pass it with
    probability Binomial(20, 0.34) ≥ 16, about 3·10⁻⁵)."""

    async def paper_li(lr: Any, d: int, epsilon: float, *, users: int, first_user: int) -> Any:
        return await learn_masked_parity_interactive(lr, d, epsilon, users=users, first_user=first_user)

    monkeypatch.setattr(masked_parity_correlation, "learn_masked_parity_correlation", paper_li)
    interactive, _ = _wins(TOKENS)
    assert interactive < 16, interactive


def test_a_lessons_result_has_no_undefined_number() -> None:
    """An interval from one report is undefined: None in the lesson's table, so the dashboard's
    strict JSON (no NaN) carries it."""
    step = {"title": "Lesson 1 — randomized response", "result": {"text": "one report"}}
    result = Teacher._lesson_result(step, ("answer", "estimate", "low"), [("yes", 0.5, float("nan"))])
    assert result.rows == (("yes", 0.5, None),)
    json.dumps(result.to_json(), allow_nan=False)


def test_run_lessons_keeps_each_lessons_result_and_the_class_record() -> None:
    """``run_lessons`` collects what each lesson returns; the record (one row per lesson: its title
    and the line the dashboard showed) is printed at the end and put in the dashboard's state."""
    lines: list[str] = []
    teacher = _teacher(TOKENS[0])
    teacher.say = lines.append

    def lesson(k: int) -> Any:
        async def run() -> ExperimentResult:
            step = teacher.begin_step(f"Lesson {k}", "say")
            step["result"] = {"text": f"result {k}"}
            return Teacher._lesson_result(step, ("k",), [(k,)])

        return run

    teacher.lesson_sensitive, teacher.lesson_histogram, teacher.lesson_over_asking, teacher.lesson_masked_parity = (lesson(k) for k in range(4))  # type: ignore[method-assign]

    async def go_on(what: str) -> None:
        return None

    asyncio.run(teacher.run_lessons(go_on))
    record = teacher.state.data["record"]
    assert [ExperimentResult.from_json(r).rows for r in record["lessons"]] == [((k,),) for k in range(4)]
    assert [tuple(row.values()) for row in record["summary"]["rows"]] == [(f"Lesson {k}", f"result {k}") for k in range(4)]
    assert teacher.state.data["finished"] and "   Lesson 3: result 3" in lines[-1]
    json.dumps(teacher.state.snapshot(), allow_nan=False)
