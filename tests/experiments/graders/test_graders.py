"""Graders (``fragola_nb.graders``): each built-in passes and fails with a reason; callables sync
and async, returning each kind; a raising grader is a failed grade, its key redacted;
``tool_called`` on a real fork's history; the judge on the scripted model: a fixed score and
reason, its usage apart, no fork added."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pydantic
import pytest
from support.helpers import make_agent, make_fragola

from fragola_nb import Agent, BadUsage, Grade, GradedRow, tool, tree_usage
from fragola_nb.core.usage import CallUsage, ModelPrice, Usage
from fragola_nb.graders import (
    check_graders,
    contains,
    equals,
    grade,
    grader_name,
    json_schema,
    judge,
    max_cost,
    max_seconds,
    max_tokens,
    regex,
    tool_called,
    tool_calls_of,
)
from fragola_nb.models.scripted import ScriptedModel, call, demo_brain, reply, tool_calls

KEY = "sk-proj-abcdefgh12345678"


def row(answer: str | None, **fields: Any) -> GradedRow:
    """A row without a fork: what the answer checks need."""
    fields.setdefault("usage", Usage())
    return GradedRow(input=fields.pop("input", "q"), expected=fields.pop("expected", None),
                     answer=answer, fork=None, seconds=fields.pop("seconds", 1.0), **fields)


def one(answer: str | None, grader: Any, **fields: Any) -> Grade:
    grades = asyncio.run(grade(row(answer, **fields), [grader]))
    assert len(grades) == 1
    return grades[0]


def verdicts(answer: str | None, grader: Any, **fields: Any) -> tuple[bool, str]:
    got = one(answer, grader, **fields)
    return got.passed, got.reason


def test_contains_passes_in_any_case_and_fails_saying_what_is_missing() -> None:
    assert verdicts("The capital is paris.", contains("Paris")) == (
        True, "answer contains 'Paris'")
    assert verdicts("The capital is paris.", contains("Paris", case_sensitive=True)) == (
        False, "answer does not contain 'Paris'")
    assert verdicts(None, contains("Paris")) == (False, "no answer")
    assert one("x", contains("Paris")).name == "contains('Paris')"


def test_regex_searches_the_answer() -> None:
    assert verdicts("built in 1889", regex(r"\d{4}")) == (
        True, r"answer matches '\\d{4}' at '1889'")
    assert verdicts("built long ago", regex(r"\d{4}")) == (
        False, r"answer does not match '\\d{4}'")
    with pytest.raises(BadUsage, match="regular expression"):
        regex("(")


def test_equals_strips_a_string_and_reads_other_values_as_json() -> None:
    assert verdicts("  Paris\n", equals("Paris")) == (True, "answer equals 'Paris'")
    assert verdicts("Lyon", equals("Paris")) == (False, "answer is not 'Paris'")
    assert verdicts("4", equals(4)) == (True, "answer equals 4")
    assert verdicts('```json\n{"ok": true}\n```', equals({"ok": True}))[0] is True
    assert verdicts("four", equals(4)) == (False, "answer is not JSON, so not 4")


class City(pydantic.BaseModel):
    name: str
    population: int


def test_json_schema_with_a_pydantic_model() -> None:
    assert verdicts('{"name": "Oslo", "population": 700000}', json_schema(City)) == (
        True, "answer fits City")
    passed, reason = verdicts('{"name": "Oslo", "population": "many"}', json_schema(City))
    assert not passed and reason.startswith("answer does not fit City: population: ")
    passed, reason = verdicts("Oslo has 700000 people", json_schema(City))
    assert not passed and reason.startswith("answer is not JSON (JSONDecodeError: ")


def test_json_schema_with_a_dict_schema() -> None:
    schema = {"type": "object", "required": ["city"],
              "properties": {"city": {"type": "string"}}}
    assert json_schema(schema).__name__ == "json_schema(object)"
    assert verdicts('```json\n{"city": "Oslo"}\n```', json_schema(schema))[0] is True
    assert verdicts('{"town": "Oslo"}', json_schema(schema)) == (
        False, "answer does not fit object: (root): 'city' is a required property")
    with pytest.raises(BadUsage, match="pydantic model or a JSON Schema"):
        json_schema({"type": 12})


def test_the_limits_pass_within_and_fail_beyond_or_when_unknown() -> None:
    priced = Usage((CallUsage("m", 10, 20, 30),), prices={"m": ModelPrice(1.0, 1.0)})
    assert verdicts("a", max_tokens(30), usage=priced) == (True, "30 tokens <= 30")
    assert verdicts("a", max_tokens(29), usage=priced) == (False, "30 tokens > 29")
    unreported = Usage((CallUsage("m", reported=False),))
    assert verdicts("a", max_tokens(100), usage=unreported) == (
        False, "tokens unknown (1 calls without usage)")
    assert verdicts("a", max_cost(0.001), usage=priced) == (True, "$0.000030 <= $0.001")
    assert verdicts("a", max_cost(0.00001), usage=priced) == (False, "$0.000030 > $1e-05")
    assert verdicts("a", max_cost(1), usage=unreported)[0] is False
    assert verdicts("a", max_seconds(2), seconds=1.5) == (True, "1.50 s <= 2 s")
    assert verdicts("a", max_seconds(1), seconds=1.5) == (False, "1.50 s > 1 s")
    assert verdicts("a", max_seconds(1), seconds=None) == (False, "time unknown")
    for bad in (max_tokens, max_cost, max_seconds):
        with pytest.raises(BadUsage, match="number >= 0"):
            bad(-1)


def test_callables_sync_and_async_return_each_kind() -> None:
    def passes(row: GradedRow) -> bool:
        return True

    async def scores(row: GradedRow) -> float:
        await asyncio.sleep(0)
        return 0.25

    def skips(row: GradedRow) -> None:
        return None

    async def named_later(row: GradedRow) -> Grade:
        return Grade("", False, 0.1, "too long")

    def whole(row: GradedRow) -> int:
        return 1

    grades = asyncio.run(grade(row("a"), [passes, scores, skips, named_later, whole]))

    assert grades == (Grade("passes", True), Grade("scores", False, 0.25),
                      Grade("named_later", False, 0.1, "too long"), Grade("whole", True, 1.0))


def test_async_graders_run_concurrently_and_a_row_reads_by_key() -> None:
    asked = asyncio.Event()

    async def waits(row: GradedRow) -> bool:  # answered only while the other one runs
        await asyncio.wait_for(asked.wait(), 5)
        return True

    async def sets(row: GradedRow) -> bool:
        asked.set()
        return row["input"] == row.input == "q"

    assert asyncio.run(grade(row("a"), [waits, sets])) == (Grade("waits", True),
                                                           Grade("sets", True))
    with pytest.raises(KeyError):
        row("a")["grades"]


def test_a_grader_that_raises_or_returns_nonsense_is_a_failed_grade_with_its_key_redacted(
) -> None:
    def leaks(row: GradedRow) -> bool:
        raise RuntimeError(f"the grading API refused key {KEY}\nsecond line")

    async def leaks_later(row: GradedRow) -> bool:
        raise ValueError(f"Bearer {KEY}")

    grades = asyncio.run(grade(row(None), [leaks, leaks_later, lambda row: "yes"]))

    assert grades == (
        Grade("leaks", False, reason="RuntimeError: the grading API refused key "
                                     "[redacted] second line"),
        Grade("leaks_later", False, reason="ValueError: Bearer [redacted]"),
        Grade("<lambda>", False, reason="the grader returned str, not a Grade, a bool, a "
                                        "number or None"),
    )
    assert all(KEY not in g.reason for g in grades)


def test_check_graders_and_grader_name() -> None:
    assert check_graders(len) == (len,)
    graders = [contains("a"), len]
    assert check_graders(graders) == check_graders(g for g in graders) == tuple(graders)
    assert check_graders(None) == ()
    with pytest.raises(BadUsage, match="a grader must be a callable"):
        check_graders([contains("a"), "contains a"])
    with pytest.raises(BadUsage, match="graders must be a callable or a list"):
        check_graders("contains a")
    assert [grader_name(g) for g in (contains("a"), judge("good"), len, lambda row: 1)] == [
        "contains('a')", "judge", "len", "<lambda>"]


@pytest.fixture
def lookup_agent(model: ScriptedModel) -> Agent:
    lookup = tool(name="lookup", description="the temperature of a city",
                  handler=lambda city, unit="C": f"12 {unit} in {city}")
    return make_agent(model, lookup)


async def test_tool_called_reads_the_forks_own_calls(model: ScriptedModel,
                                                     lookup_agent: Agent) -> None:
    model.push(tool_calls(call("lookup", {"city": "Bergen"})), reply("12 C in Bergen"))
    await lookup_agent.user_message("Bergen?")  # before the fork: not the fork's own call
    fork = lookup_agent.fork()
    model.push(tool_calls(call("lookup", {"city": "Oslo", "unit": "C"})), reply("12 C in Oslo"))
    await fork.user_message("How warm is Oslo?")
    calls = tool_calls_of(fork)
    assert [(c["name"], c["arguments"]) for c in calls] == [
        ("lookup", {"city": "Oslo", "unit": "C"})]
    # each call with its result: the fork's own tool message for it
    assert calls[0]["result"] == fork.state.messages[-2]["content"]
    graded = GradedRow("How warm is Oslo?", None, "12 C in Oslo", fork, fork.usage, 0.5, calls)

    grades = await grade(graded, [tool_called("lookup"), tool_called("lookup", city="Oslo"),
                                  tool_called("lookup", city="Bergen"), tool_called("search")])

    assert [(g.name, g.passed, g.reason) for g in grades] == [
        ("tool_called('lookup')", True, "'lookup' was called"),
        ("tool_called('lookup', city='Oslo')", True, "'lookup' was called with city='Oslo'"),
        ("tool_called('lookup', city='Bergen')", False,
         "'lookup' was called, but not with city='Bergen' (arguments: "
         "{'city': 'Oslo', 'unit': 'C'})"),
        ("tool_called('search')", False, "'search' was not called (called: lookup)"),
    ]


async def test_the_judge_on_the_scripted_model_gives_a_fixed_score_apart_from_the_graded_usage(
        model: ScriptedModel) -> None:
    model.brain = demo_brain
    agent = make_agent(model, name="geo")
    fork = agent.fork("case")
    await fork.user_message("Which city is the capital of France?")
    answer = fork.state.messages[-1]["content"]
    graded = GradedRow("Which city is the capital of France?", "Paris", answer, fork,
                       fork.usage, 0.1, tool_calls_of(fork))
    before, tree_before, requests = fork.usage, tree_usage(agent), len(model.requests)
    rubric = 'The answer names "capital" and "France" and "Paris".'

    grades = await grade(graded, [judge(rubric), judge(rubric, threshold=4)])

    reason = ('scripted judge: 2 of 3 phrases of the rubric in the answer (found "capital", '
              '"France"; missing "Paris"): 1 + 2/3 × (5 - 1) = 3.67')
    judged = {"raw_score": 3.67, "scale": (1, 5)}  # 3.67 on 1-5: a score of (3.67 - 1) / 4
    assert grades == (Grade("judge", True, reason=reason, **judged),
                      Grade("judge", False, reason=reason, **judged))
    assert grades[0].score == pytest.approx(0.6675)
    assert all(g.usage is not None and g.usage.requests == 1 and g.usage.total_tokens > 0
               for g in grades)
    assert len(model.requests) == requests + 2
    assert fork.usage == before and tree_usage(agent) == tree_before
    assert agent.forks == (fork,) and fork.forks == ()
    system = model.requests[-1]["messages"][0]["content"]
    assert "[fragola_nb judge]" in system and rubric in system


async def test_the_judge_reads_the_expected_answer_and_honours_model_and_fragola(
        model: ScriptedModel) -> None:
    graded_model = ScriptedModel([reply("It is Lyon.")]).start()
    try:
        agent = make_agent(graded_model)
        await agent.user_message("Capital of France?")
        model.brain = demo_brain
        other = make_fragola(model, json_mode="tool")  # the verdict comes as a forced call
        graded = GradedRow("Capital of France?", "Paris", "It is Lyon.", agent, agent.usage,
                           0.1)

        [got] = await grade(graded, [judge("Correct?", model="judge-model", fragola=other,
                                           scale=(0, 10))])

        assert got == Grade("judge", False, 0, 'scripted judge: not the expected answer in the '
                            'answer (missing "Paris"): 0 + 0/1 × (10 - 0) = 0', raw_score=0,
                            scale=(0, 10))
        assert len(graded_model.requests) == 1  # the graded model was not asked again
        assert model.requests[-1]["model"] == "judge-model"
        assert model.requests[-1]["tool_choice"]["type"] == "function"
        assert "Expected answer:\nParis" in model.requests[-1]["messages"][-1]["content"]
    finally:
        graded_model.stop()


async def test_the_judge_fails_without_an_answer_or_on_a_score_outside_the_scale(
        model: ScriptedModel) -> None:
    agent = make_agent(model)
    model.push(reply('{"score": 9, "reason": "great"}'))
    graded = GradedRow("q", None, "an answer", agent, agent.usage, 0.1)

    grades = await grade(graded, [judge("good")])
    no_answer = await grade(dataclasses.replace(graded, answer=None), [judge("good")])

    assert grades == (Grade("judge", False, reason="score 9 is outside the scale 1-5 (great)",
                            raw_score=9, scale=(1, 5)),)
    assert grades[0].score is None
    assert no_answer == (Grade("judge", False, reason="no answer"),)
    assert len(model.requests) == 1
    with pytest.raises(BadUsage, match="low must be below high"):
        judge("good", scale=(5, 1))
    with pytest.raises(BadUsage, match="outside the scale"):
        judge("good", threshold=7)
    with pytest.raises(BadUsage, match="rubric"):
        judge("  ")
