"""Turns: user messages, steps, the step budget, status, outcome and reset."""

from __future__ import annotations

from typing import Any

import pytest
from support.helpers import answered, asked, assert_valid_history, make_agent, user

from fragola_nb import Agent, AgentState, BadUsage, tool
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls


def ticking_agent(model: ScriptedModel, /, **options: Any) -> tuple[Agent, list[int]]:
    """An agent with a ``tick`` tool, and the list of the numbers the tool was called with."""
    ticks: list[int] = []

    @tool
    def tick(n: int) -> str:
        """Count one tick."""
        ticks.append(n)
        return f"tick {n}"

    return make_agent(model, tick, **options), ticks


def ticks_then(n: int, *, start: int = 1) -> list[Any]:
    """``n`` model replies that each call ``tick`` once."""
    return [tool_calls(call("tick", {"n": i})) for i in range(start, start + n)]


# -- user_message and step ------------------------------------------------------------------


async def test_user_message_appends_the_message_and_the_reply(model: ScriptedModel) -> None:
    model.push(reply("The capital of France is Paris."))
    agent = make_agent(model)

    state = await agent.user_message("What is the capital of France?")

    assert isinstance(state, AgentState)
    assert state.messages == [
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "The capital of France is Paris."},
    ]
    assert state.messages[-1]["content"] == "The capital of France is Paris."
    assert (state.step_count, state.status, state.outcome) == (1, "idle", "finished")
    assert model.requests[0]["messages"] == state.messages[:1]
    assert agent.state == state


async def test_user_message_with_text_and_image_parts_reaches_the_request(
    model: ScriptedModel,
) -> None:
    parts = [
        {"type": "text", "text": "What is in this image?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/image.jpg"}},
    ]
    model.push(reply("A cat."))
    agent = make_agent(model)

    state = await agent.user_message(parts)

    assert model.requests[0]["messages"] == [{"role": "user", "content": parts}]
    assert state.messages[0] == {"role": "user", "content": parts}


@pytest.mark.parametrize(
    "content", [42, None, [], ["text"], [{"text": "no type"}], {"type": "text", "text": "x"}],
    ids=repr,
)
async def test_bad_content_is_bad_usage_and_changes_nothing(
    model: ScriptedModel, content: Any
) -> None:
    agent = make_agent(model, messages=[{"role": "user", "content": "earlier"}])
    before = agent.state

    with pytest.raises(BadUsage):
        await agent.user_message(content)

    assert agent.state == before
    assert model.requests == []


async def test_step_without_a_user_message_calls_the_model(model: ScriptedModel) -> None:
    seed = [
        {"role": "user", "content": "Tell me a joke."},
        {"role": "assistant", "content": "Why did the chicken"},
        {"role": "user", "content": "Go on."},
    ]
    model.push(reply("...cross the road?"))
    agent = make_agent(model, instructions="Be funny.", messages=seed)

    state = await agent.step()

    assert model.requests[0]["messages"] == [{"role": "system", "content": "Be funny."}, *seed]
    assert state.messages == [*seed, {"role": "assistant", "content": "...cross the road?"}]
    assert (state.step_count, state.outcome) == (1, "finished")


async def test_a_turn_runs_tools_until_a_final_answer(model: ScriptedModel) -> None:
    agent, ticks = ticking_agent(model)
    model.push(*ticks_then(2), reply("Ticked twice."))

    state = await agent.user_message("tick twice")

    assert ticks == [1, 2]
    assert state.messages == [
        user("tick twice"),
        asked(("call_1", "tick", {"n": 1})),
        answered("call_1", "tick 1"),
        asked(("call_2", "tick", {"n": 2})),
        answered("call_2", "tick 2"),
        {"role": "assistant", "content": "Ticked twice."},
    ]
    assert (state.step_count, state.outcome) == (3, "finished")
    assert [len(r["messages"]) for r in model.requests] == [1, 3, 5]


# -- the step budget ------------------------------------------------------------------------


async def test_the_default_budget_is_five_model_calls(model: ScriptedModel) -> None:
    agent, ticks = ticking_agent(model)
    model.push(*ticks_then(6))

    state = await agent.user_message("tick forever")

    assert len(model.requests) == 5
    assert (state.step_count, state.status, state.outcome) == (5, "idle", "step_limit")
    # The tool calls of the last model call still ran: the history is a valid request.
    assert ticks == [1, 2, 3, 4, 5]
    assert state.messages[-1] == {"role": "tool", "tool_call_id": "call_5", "content": "tick 5"}
    assert_valid_history(state.messages)


async def test_a_later_step_carries_on_after_the_step_limit(model: ScriptedModel) -> None:
    agent, ticks = ticking_agent(model, max_step=2)
    model.push(*ticks_then(2), reply("Done at last."))

    limited = await agent.user_message("tick")
    assert (limited.outcome, ticks) == ("step_limit", [1, 2])

    state = await agent.step()

    assert (state.step_count, state.outcome) == (3, "finished")
    assert model.requests[2]["messages"] == limited.messages
    assert state.messages == [*limited.messages,
                              {"role": "assistant", "content": "Done at last."}]


async def test_with_reset_each_user_message_gets_a_fresh_budget(model: ScriptedModel) -> None:
    agent, _ = ticking_agent(model, max_step=2)
    model.push(*ticks_then(2), *ticks_then(2, start=3))

    first = await agent.user_message("one")
    second = await agent.user_message("two")

    assert (first.step_count, first.outcome) == (2, "step_limit")
    assert (second.step_count, second.outcome) == (2, "step_limit")
    assert len(model.requests) == 4
    assert_valid_history(second.messages)


async def test_with_reset_each_step_call_gets_max_step_calls(model: ScriptedModel) -> None:
    agent, _ = ticking_agent(model, max_step=2)
    model.push(*ticks_then(4), reply("finally"))

    first = await agent.user_message("go")
    second = await agent.step()
    third = await agent.step()

    # step() does not reset step_count; it counts every model call of the turn.
    assert [s.step_count for s in (first, second, third)] == [2, 4, 5]
    assert [s.outcome for s in (first, second, third)] == ["step_limit", "step_limit", "finished"]


async def test_without_reset_the_budget_is_the_agents_lifetime(model: ScriptedModel) -> None:
    agent, ticks = ticking_agent(model, max_step=3, reset_step_count_after_user_message=False)
    model.push(tool_calls(call("tick", {"n": 1})), reply("one"), *ticks_then(1, start=2))

    first = await agent.user_message("first")
    second = await agent.user_message("second")
    third = await agent.user_message("third")

    assert (first.step_count, first.outcome) == (2, "finished")
    # One call was left: the model called a tool, the tool ran, the budget ran out.
    assert (second.step_count, second.outcome) == (3, "step_limit")
    assert ticks == [1, 2]
    # Nothing left: the message is stored, the model is not called.
    assert (third.step_count, third.outcome) == (3, "step_limit")
    assert len(model.requests) == 3
    assert third.messages[-1] == {"role": "user", "content": "third"}
    assert_valid_history(third.messages)

    agent.reset_step_count()
    model.push(*ticks_then(1, start=3), reply("three"))
    state = await agent.step()

    assert (state.step_count, state.outcome) == (2, "finished")
    assert ticks == [1, 2, 3]
    assert model.requests[3]["messages"] == third.messages


async def test_without_reset_step_also_uses_the_lifetime_budget(model: ScriptedModel) -> None:
    model.push(reply("a"), reply("b"))
    agent = make_agent(model, max_step=1, reset_step_count_after_user_message=False)

    await agent.user_message("hi")
    state = await agent.step()

    assert (state.step_count, state.outcome) == (1, "step_limit")
    assert len(model.requests) == 1


async def test_by_replaces_the_budget_for_one_call(model: ScriptedModel) -> None:
    agent, _ = ticking_agent(model, max_step=1)
    model.push(*ticks_then(4), reply("done"))

    wide = await agent.user_message("go", by=3)
    narrow = await agent.step(by=1)
    default = await agent.step()

    assert [s.step_count for s in (wide, narrow, default)] == [3, 4, 5]
    assert [s.outcome for s in (wide, narrow, default)] == ["step_limit", "step_limit",
                                                            "finished"]


async def test_by_overrides_an_exhausted_lifetime_budget(model: ScriptedModel) -> None:
    model.push(reply("a"), reply("b"))
    agent = make_agent(model, max_step=1, reset_step_count_after_user_message=False)
    await agent.user_message("hi")

    state = await agent.step(by=1)

    assert (state.step_count, state.outcome) == (2, "finished")


async def test_by_zero_makes_no_model_call(model: ScriptedModel) -> None:
    agent = make_agent(model)

    state = await agent.user_message("just store this", by=0)
    again = await agent.step(by=0)

    assert model.requests == []
    assert state.messages == [{"role": "user", "content": "just store this"}]
    assert (state.step_count, state.status, state.outcome) == (0, "idle", "step_limit")
    assert again == state


async def test_step_first_answers_tool_calls_left_open_in_the_history(
    model: ScriptedModel,
) -> None:
    seed = [user("tick"), asked(("c9", "tick", {"n": 9}))]
    agent, ticks = ticking_agent(model, messages=seed)

    state = await agent.step(by=0)

    assert ticks == [9]
    assert state.messages == [*seed, answered("c9", "tick 9")]
    assert model.requests == []


@pytest.mark.parametrize("by", [-1, "2", True, 1.5], ids=repr)
async def test_a_bad_by_is_bad_usage_and_changes_nothing(model: ScriptedModel, by: Any) -> None:
    agent = make_agent(model, messages=[{"role": "user", "content": "hi"}])
    before = agent.state

    with pytest.raises(BadUsage):
        await agent.user_message("more", by=by)
    with pytest.raises(BadUsage):
        await agent.step(by=by)

    assert agent.state == before
    assert model.requests == []


# -- status and outcome ---------------------------------------------------------------------


async def test_status_is_generating_during_a_turn_and_idle_around_it(
    model: ScriptedModel,
) -> None:
    seen: list[tuple[str, str]] = []

    @tool
    def look(context: Any) -> str:
        """Look at the status."""
        seen.append(("tool", context.state.status))
        return "ok"

    model.push(tool_calls(call("look", {})), reply("done"))
    agent = make_agent(model, look)
    agent.on_before_model_invocation(lambda event: seen.append(("model", agent.status)))
    assert agent.state.status == "idle"

    state = await agent.user_message("look")

    assert seen == [("model", "generating"), ("tool", "generating"), ("model", "generating")]
    assert state.status == agent.status == "idle"


async def test_status_change_events_come_in_order(model: ScriptedModel) -> None:
    agent, _ = ticking_agent(model)
    model.push(tool_calls(call("tick", {"n": 1})), reply("done"), reply("again"))
    changes: list[tuple[str, str]] = []
    agent.on_status_change(lambda event: changes.append((event.previous, event.status)))

    await agent.user_message("first")
    await agent.step()

    assert changes == [("idle", "generating"), ("generating", "idle")] * 2


async def test_outcome_is_none_before_the_first_run(model: ScriptedModel) -> None:
    model.push(reply("hi"))
    agent = make_agent(model)
    assert agent.state.outcome is None

    await agent.user_message("hello")

    assert agent.state.outcome == "finished"


async def test_a_second_call_while_generating_is_bad_usage(model: ScriptedModel) -> None:
    errors: list[BaseException] = []
    agent: Agent

    @tool
    async def nested() -> str:
        """Try to start another turn."""
        for attempt in (agent.user_message("again"), agent.step()):
            try:
                await attempt
            except BadUsage as exc:
                errors.append(exc)
        return "tried"

    model.push(tool_calls(call("nested", {})), reply("done"))
    agent = make_agent(model, nested)

    state = await agent.user_message("go")

    assert [type(e) for e in errors] == [BadUsage, BadUsage]
    assert "generating" in str(errors[0])
    assert state.outcome == "finished"
    assert len(model.requests) == 2
    assert_valid_history(state.messages)


# -- reset ----------------------------------------------------------------------------------


async def test_reset_clears_the_history_and_the_step_count(model: ScriptedModel) -> None:
    model.push(reply("one"), reply("two"))
    agent = make_agent(model, instructions="Be brief.")
    await agent.user_message("first")

    agent.reset()

    assert agent.state == AgentState(messages=[], step_count=0, status="idle")
    await agent.user_message("second")
    assert model.requests[1]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "second"},
    ]


async def test_reset_with_messages_seeds_the_new_history(model: ScriptedModel) -> None:
    model.push(reply("one"), reply("Sure."))
    agent = make_agent(model)
    await agent.user_message("first")
    seed = [{"role": "user", "content": "Let's start over."}]

    agent.reset(seed)

    assert agent.state.messages == seed
    state = await agent.step()
    assert model.requests[1]["messages"] == seed
    assert state.messages == [*seed, {"role": "assistant", "content": "Sure."}]


def test_reset_with_bad_messages_is_bad_usage_and_changes_nothing(model: ScriptedModel) -> None:
    agent = make_agent(model, messages=[{"role": "user", "content": "keep me"}])
    before = agent.state

    with pytest.raises(BadUsage):
        agent.reset([{"content": "no role"}])

    assert agent.state == before


async def test_reset_step_count_keeps_the_history(model: ScriptedModel) -> None:
    agent, _ = ticking_agent(model, max_step=2)
    model.push(*ticks_then(2))
    limited = await agent.user_message("go")

    agent.reset_step_count()

    assert agent.state.step_count == 0
    assert agent.state.messages == limited.messages


async def test_reset_while_generating_is_bad_usage_and_changes_nothing(
    model: ScriptedModel,
) -> None:
    attempts: list[tuple[AgentState, BaseException | None, AgentState]] = []
    agent: Agent

    @tool
    def meddle() -> str:
        """Try to reset mid-turn."""
        before = agent.state
        error: BaseException | None = None
        try:
            agent.reset([{"role": "user", "content": "hijack"}])
        except BadUsage as exc:
            error = exc
        attempts.append((before, error, agent.state))
        return "tried"

    model.push(tool_calls(call("meddle", {})), reply("done"))
    agent = make_agent(model, meddle)

    state = await agent.user_message("go")

    [(before, error, after)] = attempts
    assert isinstance(error, BadUsage)
    assert after == before
    assert after.status == "generating"
    assert state.messages[0] == {"role": "user", "content": "go"}
    assert state.outcome == "finished"
    assert_valid_history(state.messages)
