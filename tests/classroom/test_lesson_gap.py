"""Lesson 4 shows the gap at the class's defaults (issue 29: "Lesson 3 (interaction helps) shows
no gap" — the guide's lesson 4).

At the old defaults (d = 4, 400 machine users) a class of 5 gave each learner too few users for
the interactive learner (predicted 0.86 even with user ranges, 0.78 in whole seats), and a class
of 6 was on the edge. ``ldp-sim classroom``'s defaults now are d = 5 and 1000 machine users: for
every class of 5 to 30 students both learners get the same users (user ranges of the same seats),
where the interactive learner's predicted success is ≥ 0.9 and the one-round learner's ≤ 0.5.
The predictions are the learners' own plans (``correlation_plan``, ``lni_plan``), numbers rather
than statistics; the lesson itself runs in process (``InProcessLROracle`` over the class's
MASKED-PARITY users, as tests/classroom/test_lessons.py does). A class too small for the gap is
told so on the dashboard and no learner runs. No clock in any verdict.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import pytest

from ldp.classroom.dashboard import ClassState
from ldp.classroom.lessons import ClassPlan, class_target
from ldp.classroom.teacher import GAP_INTERACTIVE, GAP_ONE_ROUND, Teacher, parity_lesson_size, smallest_class_for_gap
from ldp.cli.classroom_commands import add_classroom_arguments
from ldp.core.concepts import concept_class
from ldp.core.population import PopulationSpec
from ldp.local.oracle import InProcessLROracle

TOKEN = "class-token-gap"


def _defaults() -> ClassPlan:
    """The plan ``ldp-sim classroom`` builds with no options (its parser's defaults)."""
    ns = add_classroom_arguments(argparse.ArgumentParser()).parse_args([])
    return ClassPlan(ns.seats, ns.machine_users, ns.d)


def _lesson(plan: ClassPlan, students: int) -> tuple[dict[str, Any], list[int]]:
    """Lesson 4 for ``students`` connected seats 0..students−1: its step, and for each round
    the oracle was asked, one past the last user it asked."""
    teacher = Teacher(plan, TOKEN, ClassState({"plan": plan.to_json()}), say=lambda line: None)
    cc = concept_class("masked_parity", plan.d)
    oracle = InProcessLROracle(PopulationSpec(cc, class_target(TOKEN, plan.d), plan.size, budget=4.0, seed=3))
    asked: list[int] = []
    run_round = oracle.run_round

    async def counted(request: Any) -> Any:
        asked.append(max((a.users.stop if a.users.ids is None else int(a.users.ids.max()) + 1) for a in request.assignments))
        return await run_round(request)

    oracle.run_round = counted  # type: ignore[method-assign]
    teacher.oracle = oracle  # type: ignore[assignment]
    teacher.connected_seats = lambda: list(range(students))  # type: ignore[method-assign]

    async def no_ledgers() -> None:
        return None

    teacher.update_budgets = no_ledgers  # type: ignore[method-assign]
    asyncio.run(teacher.lesson_masked_parity())
    step: dict[str, Any] = teacher.state.data["steps"][-1]
    return step, asked


def test_the_classroom_defaults_are_the_plans_defaults() -> None:
    plan = _defaults()
    assert (plan.machine_users, plan.d) == (ClassPlan().machine_users, ClassPlan().d) == (1000, 5)


@pytest.mark.parametrize("students", [5, 6, 30])
def test_at_the_defaults_the_lesson_shows_the_gap(students: int) -> None:
    """Equal users for both learners, within the connected seats; interactive ≥ 0.9 and one
    round ≤ 0.5 predicted (5 students: 2,502 users each, 0.948 against 0.362; 6 and 30: 2,538,
    0.950 against 0.366). The broken variant, the old defaults (d = 4, 400 machine users), fails
    this at 5 students (``test_the_old_defaults_did_not_show_it``)."""
    plan = _defaults()
    size = parity_lesson_size(plan, students)
    assert size.interactive >= GAP_INTERACTIVE and size.one_round <= GAP_ONE_ROUND, size
    step, asked = _lesson(plan, students)
    shown = step["result"]
    assert "too_small" not in shown, shown["text"]
    assert shown["interactive"]["users"] == shown["one_round"]["users"] == size.users
    assert 2 * size.users <= students * plan.per_seat and max(asked) <= 2 * size.users  # both within the class's seats
    assert shown["interactive"]["predicted_success"] >= 0.9 >= 0.5 >= shown["one_round"]["predicted_success"]
    assert len(asked) == 3  # the interactive learner's two rounds, the one-round learner's one


def test_the_old_defaults_did_not_show_it() -> None:
    """The check above catches the old defaults: a class of 5 at d = 4 and 400 machine users
    gives each learner 1,002 users, where the interactive learner is predicted 0.86 (< 0.9)."""
    size = parity_lesson_size(ClassPlan(40, 400, 4), 5)
    assert size.users == 1002 and size.interactive < GAP_INTERACTIVE and not size.shows_gap


def test_a_class_too_small_is_told_so_and_runs_no_learner() -> None:
    """3 students at the defaults (1,501 users each: interactive 0.82 predicted): the dashboard's
    result says so plainly, with the class size that shows the gap, and no round is asked (the
    old lesson ran both learners, who then both mostly failed)."""
    plan = _defaults()
    assert smallest_class_for_gap(plan) == 4
    step, asked = _lesson(plan, 3)
    text = step["result"]["text"]
    assert step["result"]["too_small"] and text.startswith("this class is too small to show the gap")
    assert "it shows from 4 students" in text and "82%" in text and "The learners were not run" in text
    assert asked == []


def test_a_class_whose_plan_never_shows_it_says_more_machine_users() -> None:
    plan = ClassPlan(40, 20, 5)  # 40 × 21 users: never the 2,538 each the interactive learner needs
    assert smallest_class_for_gap(plan) is None
    step, asked = _lesson(plan, 40)
    assert "more --machine-users" in step["result"]["text"] and asked == []
