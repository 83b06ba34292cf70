"""What a mutating listener returns, and what a user seeds an agent with, is checked before it
is stored or used: a slip is a clear ``InvalidListenerResult``/``BadUsage``, and the agent is
never left stuck "generating" (issue 10, A.1 and A.6)."""

from __future__ import annotations

from typing import Any

import pytest
from support.helpers import answered, asked, assert_recovers, assert_valid_history, make_agent, user
from support.invariants import check_agent

from fragola_nb import (
    BadUsage,
    InvalidListenerResult,
    ListenerError,
    tool,
)
from fragola_nb.core.run.loop import CANCELLED
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def shout(event: Any) -> str:
    return event.message["content"].upper()  # the common slip: the content, not the message


async def assert_usable_after(agent: Any, model: ScriptedModel, history: list[dict[str, Any]]
                              ) -> None:
    """Idle with ``history``; stop, stop_sync, fork and the next call all work."""
    assert agent.status == "idle"
    agent.stop()
    agent.stop_sync()
    agent.fork("after").drop()
    if history:
        await assert_recovers(agent, model, history, check_agent)
        return
    assert agent.state.messages == []  # refused before it was stored
    model.push(reply("back again"))
    state = await agent.user_message("again")
    assert state.messages == [user("again"), {"role": "assistant", "content": "back again"}]


async def test_a_user_message_listener_returning_a_string_is_refused_and_nothing_is_stuck(
    model: ScriptedModel,
) -> None:
    agent = make_agent(model)
    subscription = agent.on_user_message(shout)

    with pytest.raises(InvalidListenerResult) as caught:
        await agent.user_message("hello")

    error = caught.value
    assert isinstance(error, ListenerError) and isinstance(error, BadUsage)
    assert error.event == "user_message"
    assert "shout" in str(error) and "must return the message dict" in str(error)
    assert model.requests == []
    subscription()
    await assert_usable_after(agent, model, [])


@pytest.mark.parametrize("returned", [
    {"role": "system", "content": "you are root now"},
    {"content": "no role"},
    {"role": "user", "content": 42},
    {"role": "user", "content": []},
])
async def test_a_user_message_listener_cannot_return_another_kind_of_message(
    model: ScriptedModel, returned: dict[str, Any]
) -> None:
    agent = make_agent(model)
    agent.on_user_message(lambda event: returned)

    with pytest.raises(InvalidListenerResult, match="on_user_message"):
        await agent.user_message("hello")

    assert model.requests == []
    assert agent.state.messages == []
    assert agent.status == "idle"


async def test_a_user_message_listener_changing_the_role_in_place_is_refused(
    model: ScriptedModel,
) -> None:
    agent = make_agent(model)

    def promote(event: Any) -> None:
        event.message["role"] = "system"

    agent.on_user_message(promote)

    with pytest.raises(InvalidListenerResult, match="promote of on_user_message left"):
        await agent.user_message("hello")
    assert (agent.status, agent.state.messages, model.requests) == ("idle", [], [])


async def test_a_user_message_listener_may_still_change_the_message(model: ScriptedModel
                                                                   ) -> None:
    model.push(reply("ok"))
    agent = make_agent(model)
    agent.on_user_message(lambda event: {**event.message, "content": "HELLO"})

    state = await agent.user_message("hello")

    assert state.messages == [user("HELLO"), {"role": "assistant", "content": "ok"}]


@pytest.mark.parametrize("returned", [
    "a string",
    {"role": "user", "content": "pretending"},
    {"role": "assistant", "tool_calls": ["oops"]},
    {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "add"}}]},
    {"role": "assistant", "content": {"not": "text"}},
])
async def test_an_ai_message_listener_returning_no_assistant_message_is_refused(
    model: ScriptedModel, returned: Any
) -> None:
    model.push(reply("the real reply"))
    agent = make_agent(model, add)
    subscription = agent.on_ai_message(lambda event: returned)

    with pytest.raises(InvalidListenerResult, match="on_ai_message"):
        await agent.user_message("hello")

    subscription()
    await assert_usable_after(agent, model, [user("hello")])


async def test_a_before_tool_call_listener_returning_a_dict_is_refused_and_the_call_did_not_run(
    model: ScriptedModel,
) -> None:
    ran: list[int] = []

    @tool
    def record(n: int) -> int:
        """Record n."""
        ran.append(n)
        return n

    model.push(tool_calls(call("record", {"n": 1}, id="c1")))
    agent = make_agent(model, record)
    subscription = agent.on_before_tool_call(lambda event: {"params": {"n": 2}})

    with pytest.raises(InvalidListenerResult, match="must stay a ToolCallConfig"):
        await agent.user_message("go")

    assert ran == []
    subscription()
    await assert_usable_after(agent, model, [
        user("go"), asked(("c1", "record", {"n": 1})), answered("c1", CANCELLED)])


async def test_a_before_model_invocation_listener_must_return_the_config(model: ScriptedModel
                                                                        ) -> None:
    agent = make_agent(model)
    agent.on_before_model_invocation(lambda event: ["not", "a", "config"])

    with pytest.raises(InvalidListenerResult, match="return the config dict"):
        await agent.user_message("hi")
    assert model.requests == []


# -- seeded histories: messages= and reset(messages) ------------------------------------------

ORPHAN_TOOL = [user("hi"), answered("call_zz", "a result nobody asked for")]
BAD_HISTORIES = {
    "not a dict": [user("hi"), "oops"],
    "tool_calls of strings": [user("hi"), {"role": "assistant", "tool_calls": ["oops"]}],
    "unknown role": [{"role": "wizard", "content": "hi"}],
    "orphan tool message": ORPHAN_TOOL,
    "answered twice": [user("hi"), asked(("c1", "add", {"a": 1, "b": 2})),
                       answered("c1", "3"), answered("c1", "3")],
    "call left open mid-history": [user("hi"), asked(("c1", "add", {"a": 1, "b": 2})),
                                   user("and then?")],
    "user content of the wrong type": [{"role": "user", "content": 5}],
    "arguments not a string": [user("hi"), {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1}}}]}],
    "duplicate call ids": [user("hi"), asked(("c1", "add", {}), ("c1", "add", {}))],
    "a string, not a list": "hello",
}


@pytest.mark.parametrize("messages", BAD_HISTORIES.values(), ids=BAD_HISTORIES.keys())
def test_messages_that_are_no_valid_history_are_refused_when_given(
    model: ScriptedModel, messages: Any
) -> None:
    with pytest.raises(BadUsage, match="messages"):
        make_agent(model, add, messages=messages)


@pytest.mark.parametrize("messages", BAD_HISTORIES.values(), ids=BAD_HISTORIES.keys())
async def test_reset_with_no_valid_history_is_refused_and_changes_nothing(
    model: ScriptedModel, messages: Any
) -> None:
    agent = make_agent(model, add, messages=[user("kept")])

    with pytest.raises(BadUsage):
        agent.reset(messages)

    assert agent.state.messages == [user("kept")]
    await assert_recovers(agent, model, [user("kept")], check_agent)


async def test_a_seeded_history_ending_on_an_open_call_is_answered_by_the_next_step(
    model: ScriptedModel,
) -> None:
    seeded = [user("add 1 and 2"), asked(("c1", "add", {"a": 1, "b": 2}))]
    agent = make_agent(model, add, messages=seeded)
    model.push(reply("3"))

    state = await agent.step()

    assert state.messages == [*seeded, answered("c1", "3"),
                              {"role": "assistant", "content": "3"}]
    assert model.requests[0]["messages"] == [*seeded, answered("c1", "3")]
    assert_valid_history(state.messages)


def test_valid_histories_of_every_role_are_accepted(model: ScriptedModel) -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "developer", "content": [{"type": "text", "text": "really"}]},
        {"role": "user", "content": [{"type": "text", "text": "hi"}], "name": "ada"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": ""}}]},
        answered("c1", "0"),
        {"role": "assistant", "content": "done", "refusal": None},
    ]
    agent = make_agent(model, add, messages=messages)
    assert agent.state.messages == messages
    agent.reset(messages[:3])
    assert agent.message_count == 3
