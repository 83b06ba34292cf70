"""Errors (misuse, API failures, raising listeners) and running calls from synchronous code."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import openai
import pytest
from support.helpers import (
    answered,
    asked,
    assert_recovers,
    assert_valid_history,
    make_agent,
    make_fragola,
    user,
)

import fragola_nb
from fragola_nb import (
    Agent,
    AgentState,
    BadUsage,
    FragolaError,
    JsonModeError,
    ListenerError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeout,
    run_sync,
    tool,
)
from fragola_nb.models.scripted import ScriptedModel, call, drop, fail, hang, raw, reply, tool_calls


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


# -- the error classes ----------------------------------------------------------------------


def test_error_classes_are_importable_from_the_package() -> None:
    assert fragola_nb.FragolaError is FragolaError
    assert issubclass(BadUsage, FragolaError)
    assert issubclass(JsonModeError, FragolaError)
    assert issubclass(ListenerError, FragolaError)
    for error in (ModelHTTPError, ModelTimeout, ModelConnectionError, ModelResponseError):
        assert issubclass(error, ModelError)
    assert issubclass(ModelError, FragolaError)
    # Step limits and failing tools are not errors; nothing here is a BadUsage by accident.
    assert not issubclass(ModelError, BadUsage)
    assert not issubclass(ListenerError, BadUsage)


# -- misuse ---------------------------------------------------------------------------------


async def _misuse_user_message(agent: Agent) -> None:
    await agent.user_message(3.14)  # type: ignore[arg-type]


async def _misuse_step(agent: Agent) -> None:
    await agent.step(by=-2)


async def _misuse_approve(agent: Agent) -> None:
    agent.approve("no-such-call")


async def _misuse_reject(agent: Agent) -> None:
    agent.reject("no-such-call", "no")


async def _misuse_inject(agent: Agent) -> None:
    agent.inject("no-such-call", "result")


async def _misuse_event(agent: Agent) -> None:
    agent.on("no_such_event", print)


async def _misuse_listener(agent: Agent) -> None:
    agent.on_ai_message("not callable")  # type: ignore[arg-type]


async def _misuse_reset(agent: Agent) -> None:
    agent.reset("start over")  # type: ignore[arg-type]


async def _misuse_instructions(agent: Agent) -> None:
    agent.set_instructions(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "misuse",
    [_misuse_user_message, _misuse_step, _misuse_approve, _misuse_reject, _misuse_inject,
     _misuse_event, _misuse_listener, _misuse_reset, _misuse_instructions],
    ids=lambda f: f.__name__.removeprefix("_misuse_"),
)
async def test_misuse_raises_bad_usage_and_changes_nothing(
    model: ScriptedModel, misuse: Callable[[Agent], Any]
) -> None:
    model.push(reply("hello"))
    agent = make_agent(model, instructions="Be kind.")
    await agent.user_message("hi")
    before = (agent.state, agent.instructions)

    with pytest.raises(BadUsage):
        await misuse(agent)

    assert (agent.state, agent.instructions) == before
    assert len(model.requests) == 1


# -- API failures ---------------------------------------------------------------------------


def history_is_valid(agent: Agent) -> None:
    assert_valid_history(agent.state.messages)


@pytest.mark.parametrize("status", [500, 429, 400])
async def test_http_errors_raise_model_http_error(model: ScriptedModel, status: int) -> None:
    model.push(fail(status, f"scripted {status}"))
    agent = make_agent(model)

    with pytest.raises(ModelHTTPError) as caught:
        await agent.user_message("hi")

    error = caught.value
    assert isinstance(error, ModelError)
    assert isinstance(error, FragolaError)
    assert error.status_code == status
    assert f"scripted {status}" in str(error)
    assert isinstance(error.__cause__, openai.APIStatusError)
    assert error.__cause__.status_code == status
    await assert_recovers(agent, model, [user("hi")], history_is_valid)


async def test_no_answer_within_the_timeout_raises_model_timeout(model: ScriptedModel) -> None:
    model.push(hang())
    agent = make_fragola(model, timeout=0.5).agent("tester")

    with pytest.raises(ModelTimeout) as caught:
        await agent.user_message("hi")

    assert isinstance(caught.value.__cause__, openai.APITimeoutError)
    await assert_recovers(agent, model, [user("hi")], history_is_valid)


async def test_a_dropped_connection_raises_model_connection_error(model: ScriptedModel) -> None:
    model.push(drop())
    agent = make_agent(model)

    with pytest.raises(ModelConnectionError) as caught:
        await agent.user_message("hi")

    assert isinstance(caught.value.__cause__, openai.APIConnectionError)
    await assert_recovers(agent, model, [user("hi")], history_is_valid)


async def test_a_body_that_is_not_json_raises_model_response_error(model: ScriptedModel) -> None:
    model.push(raw(b"{not json"))
    agent = make_agent(model)

    with pytest.raises(ModelResponseError) as caught:
        await agent.user_message("hi")

    # The openai client parses the body with json.loads and lets its ValueError through, so
    # the cause is that ValueError (there is no openai exception to keep).
    assert isinstance(caught.value.__cause__, ValueError)
    await assert_recovers(agent, model, [user("hi")], history_is_valid)


async def test_json_that_is_not_a_completion_raises_model_response_error(
    model: ScriptedModel,
) -> None:
    model.push(raw(b'{"object": "nothing"}'))
    agent = make_agent(model)

    with pytest.raises(ModelResponseError, match="no choices"):
        await agent.user_message("hi")

    await assert_recovers(agent, model, [user("hi")], history_is_valid)


async def test_a_stream_cut_midway_leaves_no_half_built_reply(model: ScriptedModel) -> None:
    model.push(reply("a long answer that never arrives whole", stream_cut_after=3))
    agent = make_agent(model, model_settings={"stream": True})

    with pytest.raises(ModelConnectionError):
        await agent.user_message("hi")

    await assert_recovers(agent, model, [user("hi")], history_is_valid)


async def test_a_failure_after_a_tool_call_keeps_the_answered_call(model: ScriptedModel) -> None:
    model.push(tool_calls(call("add", {"a": 2, "b": 3})), fail(503))
    agent = make_agent(model, add)

    with pytest.raises(ModelHTTPError):
        await agent.user_message("2 + 3?")

    await assert_recovers(agent, model, [
        user("2 + 3?"),
        asked(("call_1", "add", {"a": 2, "b": 3})),
        answered("call_1", "5"),
    ], history_is_valid)
    assert agent.state.step_count == 2


# -- raising listeners ----------------------------------------------------------------------


def boom(event: Any) -> None:
    raise ValueError("listener exploded")


async def test_a_raising_tool_call_listener_raises_listener_error(model: ScriptedModel) -> None:
    model.push(tool_calls(call("add", {"a": 1, "b": 1})))
    agent = make_agent(model, add)
    agent.on_tool_call(boom)

    with pytest.raises(ListenerError) as caught:
        await agent.user_message("1 + 1?")

    error = caught.value
    assert error.event == "tool_call"
    assert isinstance(error.__cause__, ValueError)
    assert "listener exploded" in str(error)
    state = agent.state
    assert state.status == "idle"
    # The call whose listener failed is answered (cancelled), so the history is a valid request.
    assert state.messages[-1]["role"] == "tool"
    assert state.messages[-1]["tool_call_id"] == "call_1"
    assert_valid_history(state.messages)


async def test_a_raising_listener_before_the_request_keeps_the_user_message(
    model: ScriptedModel,
) -> None:
    agent = make_agent(model)
    unsubscribe = agent.on_before_model_invocation(boom)

    with pytest.raises(ListenerError) as caught:
        await agent.user_message("hi")

    assert caught.value.event == "before_model_invocation"
    assert model.requests == []
    unsubscribe()
    await assert_recovers(agent, model, [user("hi")], history_is_valid)


async def test_a_raising_async_listener_raises_listener_error(model: ScriptedModel) -> None:
    model.push(reply("hello"))
    agent = make_agent(model)

    @agent.on_ai_message
    async def check(event: Any) -> None:
        raise RuntimeError("async listener exploded")

    with pytest.raises(ListenerError) as caught:
        await agent.user_message("hi")

    assert isinstance(caught.value.__cause__, RuntimeError)
    assert agent.status == "idle"
    assert_valid_history(agent.state.messages)


@pytest.mark.parametrize("when", ["generating", "idle"])
async def test_a_raising_status_change_listener_leaves_the_agent_usable(
    model: ScriptedModel, when: str
) -> None:
    model.push(reply("hello"))
    agent = make_agent(model)

    def explode_on(event: Any) -> None:
        if event.status == when:
            raise ValueError(f"no {when} allowed")

    unsubscribe = agent.on_status_change(explode_on)

    with pytest.raises(ListenerError) as caught:
        await agent.user_message("hi")

    assert caught.value.event == "status_change"
    assert agent.status == "idle"
    if when == "generating":  # raised before the turn began: nothing ran
        assert (agent.state.messages, model.requests) == ([], [])
        assert model.pending == 1  # the unused "hello" answers the next call
    else:
        assert agent.state.messages[-1] == {"role": "assistant", "content": "hello"}
        model.push(reply("hello"))
    unsubscribe()
    state = await agent.user_message("again")
    assert state.outcome == "finished"
    assert state.messages[-2:] == [{"role": "user", "content": "again"},
                                   {"role": "assistant", "content": "hello"}]


async def test_a_raising_state_listener_on_tool_results_leaves_a_valid_history(
    model: ScriptedModel,
) -> None:
    # The listener raises on the first result, and again on the "cancelled" answer that
    # repairs the second call: the agent must still end idle with every call answered.
    model.push(tool_calls(call("add", {"a": 1, "b": 2}), call("add", {"a": 3, "b": 4})))
    agent = make_agent(model, add)

    @agent.on_after_state_update
    def refuse_tool_results(event: Any) -> None:
        if event.message and event.message["role"] == "tool":
            raise ValueError("no tool results, please")

    with pytest.raises(ListenerError) as caught:
        await agent.user_message("1 + 2?")

    assert caught.value.event == "after_state_update"
    assert agent.status == "idle"
    assert_valid_history(agent.state.messages)


# -- sync use -------------------------------------------------------------------------------


def test_run_sync_from_plain_synchronous_code(model: ScriptedModel) -> None:
    model.push(tool_calls(call("add", {"a": 20, "b": 22})), reply("42"))
    agent = make_agent(model, add)

    state = run_sync(agent.user_message("20 + 22?"))

    assert isinstance(state, AgentState)
    assert state.messages[-1] == {"role": "assistant", "content": "42"}
    assert (state.status, state.outcome) == ("idle", "finished")


async def test_run_sync_inside_a_running_event_loop(model: ScriptedModel) -> None:
    threads: list[str] = []

    @tool
    def where() -> str:
        """Which thread runs this."""
        threads.append(threading.current_thread().name)
        return "here"

    model.push(tool_calls(call("where", {})), reply("done"), reply("and again"))
    agent = make_agent(model, where)
    asyncio.get_running_loop()  # this test's own loop is running and blocked below

    state = run_sync(agent.user_message("where?"))
    # The same agent then works on this loop too (one openai client per loop).
    after = await agent.step()

    assert state.outcome == "finished"
    assert threads == ["fragola_nb-loop"]
    assert threads[0] != threading.current_thread().name
    assert after.messages[-1] == {"role": "assistant", "content": "and again"}


def test_run_sync_raises_the_calls_error(model: ScriptedModel) -> None:
    model.push(fail(500))
    agent = make_agent(model)

    with pytest.raises(ModelHTTPError):
        run_sync(agent.user_message("hi"))

    assert agent.status == "idle"
    assert agent.state.messages == [{"role": "user", "content": "hi"}]


def test_run_sync_timeout_cancels_the_call_and_leaves_a_valid_agent(
    model: ScriptedModel,
) -> None:
    model.push(tool_calls(call("add", {"a": 1, "b": 1})), hang())
    agent = make_agent(model, add)

    with pytest.raises(TimeoutError):
        run_sync(agent.user_message("1 + 1?"), timeout=0.5)

    state = agent.state
    assert (state.status, state.outcome) == ("idle", "stopped")
    assert state.messages[0] == {"role": "user", "content": "1 + 1?"}
    assert state.messages[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "2"}
    assert_valid_history(state.messages)
    model.push(reply("2"))
    assert run_sync(agent.step()).messages[-1] == {"role": "assistant", "content": "2"}
