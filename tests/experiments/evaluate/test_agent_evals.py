"""Agent evaluations (issue 37): rows keep the fork's own trajectory, trajectory graders,
conversations of several turns, a simulated user, and approvals decided by ``decide=``;
against the scripted server, whose demo brain calls the tools a user's words name."""

from __future__ import annotations

from typing import Any

import pytest
from support.helpers import assert_valid_history, make_agent, user

from fragola_nb import Agent, BadUsage, Decision, SimulatedUser, tool
from fragola_nb.experiments.evaluate.evaluation import Evaluation
from fragola_nb.graders import (
    GradedRow,
    judge,
    max_model_calls,
    max_tool_calls,
    never_called,
    tool_args,
    tool_call_f1,
    tool_sequence,
)
from fragola_nb.models.scripted import ScriptedModel, demo_brain

TURNS = ["How warm is it in Oslo?", "How warm is it in Paris?", "What time is it in Oslo?"]


def temperature(city: str) -> str:
    """Current temperature of a city."""
    return f"12 degrees in {city}"


def clock(city: str) -> str:
    """What time it is in a city."""
    return f"10:00 in {city}"


def weather_agent(model: ScriptedModel, **options: Any) -> Agent:
    model.brain = demo_brain
    # The prefix holds a call of its own: a row's trajectory is the fork's calls only.
    prefix = [user("How warm is it in Rome?"),
              {"role": "assistant", "content": None, "tool_calls": [{
                  "id": "old", "type": "function",
                  "function": {"name": "temperature", "arguments": '{"city": "Rome"}'}}]},
              {"role": "tool", "tool_call_id": "old", "content": "20 degrees in Rome"},
              {"role": "assistant", "content": "20 degrees."}]
    return make_agent(model, tool(temperature, **options), tool(clock), name="wx",
                      messages=prefix)


async def test_a_row_keeps_its_own_tool_calls_with_results_and_its_model_calls(
        model: ScriptedModel, tmp_path: Any) -> None:
    agent = weather_agent(model)
    evaluation = await agent.evaluate(["How warm is it in Oslo?"], progress=False)
    (row,) = evaluation
    assert row.status == "done"
    assert row.tool_calls == ({"name": "temperature", "arguments": {"city": "Oslo"},
                               "result": "12 degrees in Oslo"},)
    assert row.model_calls == 2 and row.answers == (row.answer,) and row.ended is None
    table = evaluation.table()[0]
    assert (table["tool_calls"], table["model_calls"], table["ended"]) == (
        list(row.tool_calls), 2, None)
    again = Evaluation.load(evaluation.save(tmp_path / "run.json"))
    assert again[0].tool_calls == row.tool_calls and again[0].model_calls == 2
    assert again[0].answers == row.answers


async def test_trajectory_graders_over_a_conversation_of_three_turns(
        model: ScriptedModel) -> None:
    agent = weather_agent(model)
    seen: list[GradedRow] = []

    def whole(row: GradedRow) -> bool:
        seen.append(row)
        return len(row.answers) == 3

    graders = [
        tool_sequence(["temperature", "clock"]),
        tool_sequence(["temperature", "temperature", "clock"], mode="exact"),
        tool_sequence(["clock", "temperature"], mode="exact"),
        tool_sequence(["clock", "temperature", "temperature"], mode="any_order"),
        tool_sequence(["temperature"], mode="subset"),
        tool_sequence(["clock", "temperature", "search"], mode="subset"),
        tool_sequence(["clock"], mode="superset"),
        tool_args("temperature", nth=1, city="Paris"),
        tool_args("temperature", nth=2),
        never_called("clock"), never_called("search"),
        max_tool_calls(3), max_tool_calls(2), max_model_calls(6), max_model_calls(5),
        tool_call_f1(["temperature", "clock", "search"]),
        tool_call_f1([{"name": "temperature", "arguments": {"city": "Rome"}}]),
        whole]
    evaluation = await agent.evaluate([{"turns": TURNS}], graders=graders, progress=False)
    (row,) = evaluation
    assert row.status == "done" and row.ended == "all turns" and row.turns == tuple(TURNS)
    assert [c["name"] for c in row.tool_calls] == ["temperature", "temperature", "clock"]
    assert len(row.answers) == 3 and row.answer == row.answers[-1] and "10:00" in row.answer
    assert [(g.name, g.passed, g.reason) for g in row.grades] == [
        ("tool_sequence(['temperature', 'clock'])", True,
         "in_order matches (called: temperature, temperature, clock)"),
        ("tool_sequence(['temperature', 'temperature', 'clock'], mode='exact')", True,
         "exact matches (called: temperature, temperature, clock)"),
        ("tool_sequence(['clock', 'temperature'], mode='exact')", False,
         "exact does not match (called: temperature, temperature, clock)"),
        ("tool_sequence(['clock', 'temperature', 'temperature'], mode='any_order')", True,
         "any_order matches (called: temperature, temperature, clock)"),
        ("tool_sequence(['temperature'], mode='subset')", False,
         "subset does not match (called: temperature, temperature, clock)"),
        ("tool_sequence(['clock', 'temperature', 'search'], mode='subset')", True,
         "subset matches (called: temperature, temperature, clock)"),
        ("tool_sequence(['clock'], mode='superset')", True,
         "superset matches (called: temperature, temperature, clock)"),
        ("tool_args('temperature', nth=1, city='Paris')", True,
         "call 1 of 'temperature' has city='Paris'"),
        ("tool_args('temperature', nth=2)", False, "'temperature' was called 2 times"),
        ("never_called('clock')", False, "'clock' called (1 call)"),
        ("never_called('search')", True, "'search' never called"),
        ("max_tool_calls(3)", True, "3 tool calls <= 3"),
        ("max_tool_calls(2)", False, "3 tool calls > 2"),
        ("max_model_calls(6)", True, "6 model calls <= 6"),
        ("max_model_calls(5)", False, "6 model calls > 5"),
        ("tool_call_f1(['temperature', 'clock', 'search'])", True,
         "2 of 3 calls made expected, 2 of 3 expected made: F1 0.67"),
        ("tool_call_f1([{'name': 'temperature', 'arguments': {'city': 'Rome'}}])", False,
         "0 of 3 calls made expected, 0 of 1 expected made: F1 0.00"),
        ("whole", True, "")]
    assert row.grades[15].score == pytest.approx(2 / 3)
    assert seen[0].fork is row.fork and seen[0].model_calls == 6
    # the conversation is one fork: three user messages after the prefix, in order
    own = row.fork.messages_since(row.fork.fork_point)
    assert [m["content"] for m in own if m["role"] == "user"] == TURNS
    assert_valid_history(row.fork.state.messages)


def test_tool_call_f1_edges_and_bad_settings() -> None:
    from fragola_nb.core.usage import Usage

    def row(*names: str) -> GradedRow:
        return GradedRow(input="q", expected=None, answer="a", fork=None, usage=Usage(),
                         seconds=None, tool_calls=tuple({"name": n, "arguments": {}}
                                                        for n in names))

    assert tool_call_f1([])(row()).score == 1.0
    assert tool_call_f1([])(row("a")).score == 0.0
    assert tool_call_f1(["a"])(row()).score == 0.0
    assert tool_call_f1(["a", "a", "b"])(row("a", "b")).score == pytest.approx(0.8)
    assert tool_call_f1(["a"])(row("a", "a", "a")).passed is True  # F1 = 0.5
    for bad in (lambda: tool_sequence("a"), lambda: tool_sequence(["a"], mode="all"),
                lambda: tool_args("a", nth=-1), lambda: never_called(),
                lambda: max_tool_calls(-1), lambda: tool_call_f1("a"),
                lambda: tool_call_f1([{"arguments": {}}]), lambda: judge("x", trajectory=1)):
        with pytest.raises(BadUsage):
            bad()


async def test_a_judge_with_trajectory_true_also_reads_the_calls(model: ScriptedModel) -> None:
    agent = weather_agent(model)
    rubric = 'The agent passed a "city" to its tool.'
    evaluation = await agent.evaluate(["How warm is it in Oslo?"], graders=[
        judge(rubric), judge(rubric, trajectory=True)], progress=False)
    (row,) = evaluation
    # the judge's 1 and 5 on its (1, 5) scale are 0 and 1 on the 0..1 scale of every score
    assert [(g.passed, g.score, g.raw_score, g.scale) for g in row.grades] == [
        (False, 0.0, 1.0, (1, 5)), (True, 1.0, 5.0, (1, 5))]
    asked = [r for r in model.requests if "[fragola_nb judge]" in str(r["messages"][0])]
    shown = [m["content"] for r in asked for m in r["messages"] if m["role"] == "user"]
    assert sum('1. temperature({"city": "Oslo"}) -> 12 degrees in Oslo' in s
               for s in shown) == 1
    assert row.judge_usage is not None and row.judge_usage.requests == 2
    assert row.model_calls == 2  # the judges' calls are counted apart


async def test_a_simulated_user_talks_until_done_and_its_calls_are_counted_apart(
        model: ScriptedModel) -> None:
    agent = weather_agent(model)
    goal = 'Ask "How warm is it in Oslo?" and then "What time is it in Oslo?"'
    evaluation = await agent.evaluate(
        [{"user": SimulatedUser(goal), "expected": "10:00"},
         {"user": SimulatedUser(goal, max_turns=1)}],
        graders=[tool_sequence(["temperature", "clock"], mode="exact")], progress=False)
    done, cut = evaluation
    assert done.ended == "user done" and done.turns == ("How warm is it in Oslo?",
                                                        "What time is it in Oslo?")
    assert done.passed is True and len(done.answers) == 2 and "10:00" in done.answer
    assert done.model_calls == 4 and done.user_usage is not None
    assert done.user_usage.requests == 3  # two messages, then "[done]"
    assert cut.ended == "max turns" and cut.turns == ("How warm is it in Oslo?",)
    assert cut.passed is False and cut.user_usage.requests == 1
    own = done.fork.messages_since(done.fork.fork_point)
    assert [m["content"] for m in own if m["role"] == "user"] == list(done.turns)
    # the title's one total is what summary() says was paid: the simulated user's calls too
    paid = evaluation.usage + done.user_usage + cut.user_usage
    assert evaluation.summary()[0]["cost_text"] == paid.cost_text()
    assert f"{paid.total_tokens:,} tokens, {paid.cost_text()}" in repr(evaluation)


async def test_approvals_are_decided_by_decide_or_the_row_ends_waiting(
        model: ScriptedModel) -> None:
    agent = weather_agent(model, require_approval=True)
    case = ["How warm is it in Oslo?"]
    waiting = (await agent.evaluate(case, progress=False))[0]
    assert waiting.ended == "waiting" and waiting.status == "failed"
    assert waiting.error is not None and waiting.error.startswith("waiting: temperature")
    assert waiting.fork is not None and waiting.fork.status == "waiting"
    answers = {}
    for name, decide in {"approve": lambda call: True,
                         "edit": lambda call: Decision("approve", params={"city": "Bergen"}),
                         "reject": lambda call: Decision("reject", text="not today"),
                         "inject": lambda call: Decision("inject", text="-3 degrees")}.items():
        row = (await agent.evaluate(case, graders=[max_tool_calls(1)], progress=False,
                                    decide=decide))[0]
        assert row.status == "done" and row.ended is None and row.passed, name
        answers[name] = row.tool_calls[0]["result"]
    assert answers["approve"] == "12 degrees in Oslo"
    assert answers["edit"].endswith("12 degrees in Bergen")
    assert "not today" in answers["reject"] and answers["inject"] == "-3 degrees"

    async def later(call: Any) -> None:
        return None

    row = (await agent.evaluate(case, progress=False, decide=later))[0]
    assert row.ended == "waiting"
    with pytest.raises(BadUsage, match="decide must be a callable"):
        await agent.evaluate(case, progress=False, decide="yes")


async def test_bad_conversation_cases_are_one_clear_error(model: ScriptedModel) -> None:
    agent = weather_agent(model)
    for cases, text in (([{"turns": []}], "'turns' is empty"),
                        ([{"turns": "hi"}], "'turns' is a list"),
                        ([{"input": "a", "turns": ["b"]}],
                         "one of 'input', 'turns' and 'user', not 'input' and 'turns'"),
                        ([{"user": "be a user"}], "'user' is a SimulatedUser")):
        with pytest.raises(BadUsage, match=text):
            await agent.evaluate(cases, progress=False)
    with pytest.raises(BadUsage, match="backend must be"):
        await agent.evaluate(["hi"], progress=False, backend="cluster")
    with pytest.raises(BadUsage, match="max_turns"):
        SimulatedUser("g", max_turns=0)
    assert not model.requests


async def test_the_static_table_shows_each_cells_trajectory_escaped(
        model: ScriptedModel, tmp_path: Any) -> None:
    """The static table (``_repr_html_``: a saved notebook, an evaluation loaded from a
    file) folds each cell's trajectory under its marks: the fork's own calls with their
    arguments and results, and a conversation's turns; a tool's text is escaped, not HTML."""
    model.brain = demo_brain
    hostile = tool(name="temperature", description="Current temperature of a city.",
                   handler=lambda args: f"<img src=x onerror=alert(1)> in {args['city']}",
                   schema={"type": "object", "properties": {"city": {"type": "string"}}})
    agent = make_agent(model, hostile, tool(clock), name="wx")
    cases = ["How warm is it in Oslo?", {"turns": TURNS[1:]}, "hello"]
    evaluation = await agent.evaluate(cases, progress=False)
    for shown in (evaluation, Evaluation.load(evaluation.save(tmp_path / "run.json"))):
        page = shown._repr_html_()
        assert "<img" not in page
        assert page.count('<details class="fx-eval-trail"') == 2  # "hello" called no tool
        assert ("<li>temperature({&quot;city&quot;: &quot;Oslo&quot;}) → &lt;img src=x "
                "onerror=alert(1)&gt; in Oslo</li>") in page
        assert "<li>clock({&quot;city&quot;: &quot;Oslo&quot;}) → 10:00 in Oslo</li>" in page
        assert "<summary>2 tool calls</summary>" in page
        assert "1 tool call, 2 model calls" in page
        assert "<li>user: What time is it in Oslo? · agent: " in page
