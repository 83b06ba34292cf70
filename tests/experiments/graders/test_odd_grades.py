"""A grader's odd answer never loses the result: every grade is made sane once, when it is made
(``Grade.__post_init__``, ``fragola_nb.experiments.graders.values``), on every path that grades
(``grade``, ``evaluate``, ``batch``, ``compare``, the judge, a resume file); one scale, 0 to 1,
for every score, a judge's own kept in ``raw_score``; what ``save`` writes, ``load`` reads."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import numpy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.helpers import make_agent

from fragola_nb import Fragola
from fragola_nb.experiments.evaluate.evalrow import EvalRow
from fragola_nb.experiments.evaluate.evaluation import Evaluation
from fragola_nb.graders import Grade, GradedRow, contains, grade, judge
from fragola_nb.models.scripted import ScriptedModel, demo_brain, reply

NONSENSE: list[tuple[Any, str]] = [
    (None, "passed=None is not True or False"),
    ("no", "passed='no' is not True or False"),
    (2, "passed=2 is not True or False"),
    ([True], "passed=[True] is not True or False"),
]


def row(answer: str | None = "an answer") -> GradedRow:
    from fragola_nb.core.usage import Usage

    return GradedRow(input="q", expected=None, answer=answer, fork=None, usage=Usage(),
                     seconds=0.1)


def graded(*graders: Any) -> tuple[Grade, ...]:
    return asyncio.run(grade(row(), list(graders)))


@pytest.mark.parametrize(("passed", "said"), NONSENSE)
def test_a_grade_whose_passed_is_nonsense_is_failed_saying_what_it_was(passed: Any,
                                                                        said: str) -> None:
    made = Grade("odd", passed, 0.9, "looked fine")

    assert made.passed is False and made.score == 0.9
    assert made.reason == f"{said} (looked fine)"
    assert Grade("odd", passed).reason == said


def test_sensible_values_are_taken_as_they_mean() -> None:
    assert Grade("x", 1).passed is True and Grade("x", 0).passed is False
    assert type(Grade("x", 1).passed) is bool
    assert Grade("x", numpy.bool_(True)).passed is True
    assert type(Grade("x", numpy.bool_(True)).passed) is bool
    assert Grade("x", numpy.int64(1), numpy.float32(0.5)) == Grade("x", True, 0.5)
    assert type(Grade("x", True, numpy.float64(0.25)).score) is float
    assert Grade("x", True, 1) == Grade("x", True, 1.0)
    assert Grade("x", True, reason=None).reason == ""


@pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf, 1.5, -0.1, "high", [1]])
def test_a_score_that_is_not_from_0_to_1_fails_the_grade_saying_so(score: Any) -> None:
    made = Grade("odd", True, score, "why")

    assert (made.passed, made.score) == (False, None)
    assert made.reason == f"score={score!r} is not a number from 0 to 1 (why)"


def test_a_raw_score_on_a_scale_is_a_score_from_0_to_1_and_made_once() -> None:
    four = Grade("judge", True, raw_score=4, scale=(1, 5))
    assert (four.score, four.raw_score, four.scale) == (0.75, 4.0, (1, 5))
    assert Grade("judge", True, raw_score=10, scale=(0, 10)).score == 1.0

    out = Grade("judge", True, reason="great", raw_score=9, scale=(1, 5))
    assert (out.passed, out.score, out.raw_score) == (False, None, 9.0)
    assert out.reason == "score 9 is outside the scale 1-5 (great)"
    again = Grade(out.name, out.passed, out.score, out.reason, raw_score=out.raw_score,
                  scale=out.scale)
    assert again == out  # made once: the reason is not said twice

    nan = Grade("judge", True, reason="x", raw_score=math.nan, scale=(1, 5))
    assert (nan.passed, nan.score, nan.raw_score) == (False, None, None)
    assert nan.reason == "score nan is not a number on the scale 1-5 (x)"
    bad = Grade("judge", True, raw_score=3, scale=(5, 1))
    assert (bad.passed, bad.scale) == (False, None)
    assert bad.reason == "scale=(5, 1) is not (low, high), two numbers, low below high"


def test_what_a_grader_returns_is_read_once_numpy_bool_and_odd_numbers_too() -> None:
    def numpy_yes(row: GradedRow) -> Any:
        return numpy.bool_(True)

    def numpy_no(row: GradedRow) -> Any:
        return numpy.array(1) == 2

    def big(row: GradedRow) -> float:
        return 3.7

    def nan(row: GradedRow) -> float:
        return math.nan

    def odd_grade(row: GradedRow) -> Grade:
        return Grade("", None, reason="unsure")

    assert graded(numpy_yes, numpy_no, big, nan, odd_grade) == (
        Grade("numpy_yes", True),
        Grade("numpy_no", False),
        Grade("big", False, reason="the grader returned 3.7, not a score from 0 to 1"),
        Grade("nan", False, reason="the grader returned nan, not a score from 0 to 1"),
        Grade("odd_grade", False, reason="passed=None is not True or False (unsure)"),
    )


def odd(row: GradedRow) -> Grade:
    """A grader giving each kind of nonsense in turn, by the answer's length."""
    passed = [None, "no", 1, numpy.bool_(True), True][len(row.answer or "") % 5]
    return Grade("odd", passed, math.nan if passed is None else 0.5, "said")


async def test_batch_and_compare_keep_their_result_whatever_a_grader_gives(
        model: ScriptedModel) -> None:
    model.brain = lambda request: reply("x" * len(request["messages"][-1]["content"]))
    agent = make_agent(model)

    result = await agent.batch(["a", "bb", "ccc", "dddd", "eeeee"], graders=[odd],
                               progress=False)
    compared = await agent.compare("ab", {"one": {}, "two": {}}, graders=[odd])

    assert [r.passed for r in result] == [False, True, True, True, False]
    assert [r.grades[0].reason for r in result] == [
        "passed='no' is not True or False (said)", "said", "said", "said",
        "passed=None is not True or False; score=nan is not a number from 0 to 1 (said)"]
    assert [r.score for r in result] == [0.5, 0.5, 0.5, 0.5, 0.0]
    assert "3/5 passed" in repr(result)
    assert result.to_pandas()["passed"].tolist() == [False, True, True, True, False]
    assert [run.grades[0].passed for run in compared.runs.values()] == [True, True]
    assert [row["passed"] for row in compared.table()] == [True, True]


async def test_an_evaluation_with_odd_grades_shows_saves_and_loads_them(
        model: ScriptedModel, tmp_path: Path) -> None:
    model.brain = lambda request: reply("x" * len(request["messages"][-1]["content"]))
    agent = make_agent(model)

    evaluation = await agent.evaluate(["a", "bb", "ccc", "dddd", "eeeee"], graders=[odd],
                                      progress=False, resume=tmp_path / "r.jsonl")
    path = evaluation.save(tmp_path / "e.json")
    again = Evaluation.load(path)
    resumed = await agent.evaluate(["a", "bb", "ccc", "dddd", "eeeee"], graders=[odd],
                                   progress=False, resume=tmp_path / "r.jsonl")

    assert [r.passed for r in evaluation] == [False, True, True, True, False]
    assert evaluation.summary()[0]["pass_rate"] == 0.6
    assert evaluation.summary()[0]["mean_score"] == 0.4
    assert "base 60% passed" in repr(evaluation)
    assert "passed=None is not True or False" in json.dumps(evaluation.table())
    assert again.table() == evaluation.table() == resumed.table()
    assert all(r.resumed for r in resumed)
    assert "NaN" not in path.read_text() + (tmp_path / "r.jsonl").read_text()


@pytest.mark.parametrize("said", ["NaN", "Infinity", "-Infinity", "1e999"])
async def test_a_judge_that_answers_a_score_that_is_no_number_fails_and_saves_and_resumes(
        model: ScriptedModel, tmp_path: Path, said: str) -> None:
    agent = make_agent(model)
    model.push(reply("an answer"), reply(f'{{"score": {said}, "reason": "fine"}}'))

    evaluation = await agent.evaluate(["q"], graders=[judge("good")], progress=False,
                                      resume=tmp_path / "r.jsonl")
    again = Evaluation.load(evaluation.save(tmp_path / "e.json"))
    resumed = await agent.evaluate(["q"], graders=[judge("good")], progress=False,
                                   resume=tmp_path / "r.jsonl")

    [got] = evaluation[0].grades
    assert (got.passed, got.score, got.raw_score, got.scale) == (False, None, None, (1, 5))
    assert got.reason.startswith("score ") and got.reason.endswith(
        " is not a number on the scale 1-5 (fine)")
    assert again.table() == evaluation.table() == resumed.table()
    assert len(model.requests) == 2  # the resumed row was not sent again


async def test_one_scale_for_score_a_judge_keeps_its_raw_score(model: ScriptedModel,
                                                                tmp_path: Path) -> None:
    model.brain = demo_brain
    agent = Fragola(api_key="k", base_url=model.base_url, max_retries=0).agent("geo")
    rubric = 'Names "capital" and "France" and "Paris".'

    evaluation = await agent.evaluate(
        ["Which city is the capital of France?", "The capital of France is Paris."],
        graders=[contains("France"), judge(rubric)], progress=False)
    again = Evaluation.load(evaluation.save(tmp_path / "e.json"))

    judged = [r.grade("judge") for r in evaluation]
    assert [(g.raw_score, g.scale) for g in judged if g] == [(3.67, (1, 5)), (5.0, (1, 5))]
    assert [r.score for r in evaluation] == pytest.approx([(1 + 2.67 / 4) / 2, 1.0])
    assert evaluation.summary()[0]["mean_score"] == pytest.approx(((1 + 2.67 / 4) / 2 + 1) / 2)
    shown = evaluation.table()[1]["grades"]["judge"]
    assert (shown["passed"], shown["score"], shown["raw_score"], shown["scale"]) == (
        True, 1.0, 5.0, [1, 5])
    assert [r.grades for r in again] == [r.grades for r in evaluation]


ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8), st.sampled_from([numpy.bool_(True), numpy.bool_(False),
                                          numpy.float64(0.5), numpy.int64(1), [1], {"a": 1}]))


@st.composite
def odd_grades(draw: st.DrawFn) -> Grade:
    scale = draw(st.one_of(st.none(), st.tuples(ODD_VALUES, ODD_VALUES), ODD_VALUES))
    return Grade(draw(st.text(max_size=8)), draw(ODD_VALUES), draw(ODD_VALUES),
                 draw(st.one_of(st.text(max_size=20), ODD_VALUES)),
                 raw_score=draw(ODD_VALUES), scale=scale)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(grades=st.lists(odd_grades(), max_size=4), answer=st.one_of(st.none(), st.text()))
def test_any_grade_a_grader_makes_saves_and_loads_back_as_it_was(
        tmp_path: Path, grades: list[Grade], answer: str | None) -> None:
    names = [g.name for g in grades]
    made = EvalRow(case=0, input="q", variant="base", status="done", answer=answer,
                   grades=tuple(grades), seconds=0.5)
    evaluation = Evaluation([made], variants=["base"], graders=names, repeat=1)
    assert all(type(g.passed) is bool for g in grades)
    assert all(g.score is None or 0 <= g.score <= 1 for g in grades)

    again = Evaluation.load(evaluation.save(tmp_path / "e.json"))

    assert again[0].grades == made.grades and again.table() == evaluation.table()
    assert repr(again) == repr(evaluation) and again.summary() == evaluation.summary()
    assert made.score is None or 0 <= made.score <= 1


@settings(max_examples=300, deadline=None)
@given(made=odd_grades())
def test_a_grade_is_made_sane_once_made_again_it_is_the_same(made: Grade) -> None:
    again = Grade(made.name, made.passed, made.score, made.reason, raw_score=made.raw_score,
                  scale=made.scale)

    assert again == made and repr(again) == repr(made)
    assert type(made.passed) is bool and isinstance(made.reason, str)
    assert made.score is None or (type(made.score) is float and 0 <= made.score <= 1)
    assert made.raw_score is None or math.isfinite(made.raw_score)
