"""``stop()`` and ``stop_sync()``: the run ends, the call returns the state, the history stays a
valid next request."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from support.helpers import answered, asked, make_fragola, user

from fragola_nb import Agent, AgentState, tool
from fragola_nb.core.run.loop import CANCELLED, INTERRUPTED
from fragola_nb.models.scripted import ScriptedModel, call, hang, reply, tool_calls


async def wait_for_requests(model: ScriptedModel, n: int) -> None:
    assert await asyncio.to_thread(model.wait_for_requests, n), f"{n} request(s) never came"


def two_calls(model: ScriptedModel) -> None:
    """One model reply calling ``first`` then ``second``; nothing after it in the script, so a
    further model call would fail the test (the script is exhausted)."""
    model.push(tool_calls(call("first", {}, id="c1"), call("second", {}, id="c2")))


FIRST_CALL = asked(("c1", "first", {}))
TWO_CALLS = asked(("c1", "first", {}), ("c2", "second", {}))


def two_calls_answered(first: str, second: str) -> list[dict[str, Any]]:
    """The history of a turn on ``two_calls``: "go", the calls, and these two answers."""
    return [user("go"), TWO_CALLS, answered("c1", first), answered("c2", second)]


def stuck_in_first(model: ScriptedModel) -> tuple[Agent, asyncio.Event, list[str]]:
    """An agent on ``two_calls`` whose ``first`` handler waits until it is cancelled:
    ``started`` is set once it waits, and ``cleaned_up`` records that its ``finally`` ran."""
    two_calls(model)
    started = asyncio.Event()
    cleaned_up: list[str] = []

    async def slow() -> str:
        started.set()
        try:
            await asyncio.Event().wait()  # never set: only cancellation ends it
        finally:
            cleaned_up.append("first")
        return "unreachable"

    first = tool(name="first", description="", handler=slow)
    second = tool(name="second", description="", handler=lambda: "two")
    return make_fragola(model).agent("bot", tools=[first, second]), started, cleaned_up


def assert_stopped_before_any_request(model: ScriptedModel, state: AgentState, text: str
                                      ) -> None:
    """The run stopped with only the user message ``text`` stored and nothing sent."""
    assert model.requests == []
    assert state.messages == [user(text)]
    assert state.status == "idle"
    assert state.outcome == "stopped"


# -- stop(): graceful ----------------------------------------------------------------------


async def test_stop_from_a_tool_handler_saves_its_result_and_cancels_the_rest(model):
    two_calls(model)
    ran: list[str] = []

    @tool
    def first(context) -> str:
        """Stops the run."""
        ran.append("first")
        context.stop()
        return "first done"

    @tool
    def second() -> str:
        """Never runs."""
        ran.append("second")
        return "second done"

    agent = make_fragola(model).agent("bot", tools=[first, second])
    state = await agent.user_message("go")

    assert ran == ["first"]
    assert state.messages == two_calls_answered("first done", CANCELLED)
    assert "cancelled" in CANCELLED.lower()
    assert state.status == "idle"
    assert state.outcome == "stopped"
    assert len(model.requests) == 1
    assert agent.state.messages == state.messages


async def test_stop_from_an_on_tool_call_listener(model):
    two_calls(model)
    ran: list[str] = []
    first = tool(name="first", description="", handler=lambda: ran.append("first") or "one")
    second = tool(name="second", description="", handler=lambda: ran.append("second") or "two")
    agent = make_fragola(model).agent("bot", tools=[first, second])

    @agent.on_tool_call
    def stop_after_first(event):
        if event.name == "first":
            agent.stop()  # the docs' pattern: stop once this tool resolves

    state = await agent.user_message("go")

    assert ran == ["first"]
    assert state.messages == two_calls_answered("one", CANCELLED)
    assert agent.status == "idle"
    assert len(model.requests) == 1


async def test_stop_during_a_model_call_keeps_its_reply_and_runs_no_tool(model):
    model.push(hang(then=tool_calls(call("first", {}, id="c1"))))
    ran: list[str] = []
    first = tool(name="first", description="", handler=lambda: ran.append("first") or "one")
    agent = make_fragola(model).agent("bot", tools=[first])

    task = asyncio.create_task(agent.user_message("go"))
    await wait_for_requests(model, 1)
    agent.stop()
    model.release()
    state = await task

    assert ran == []
    assert state.messages == [
        user("go"),
        FIRST_CALL,
        answered("c1", CANCELLED),
    ]
    assert state.status == "idle"
    assert len(model.requests) == 1


async def test_stop_in_before_model_invocation_sends_nothing(model):
    agent = make_fragola(model).agent("bot")
    agent.on_before_model_invocation(lambda event: event.context.stop())

    state = await agent.user_message("hello")

    assert model.requests == []
    assert state.messages == [user("hello")]
    assert state.status == "idle"


async def test_stop_on_a_waiting_agent_cancels_the_pending_call(model):
    model.push(tool_calls(call("first", {}, id="c1")))
    first = tool(name="first", description="", handler=lambda: "one", require_approval=True)
    agent = make_fragola(model).agent("bot", tools=[first])
    await agent.user_message("go")
    assert agent.status == "waiting"

    agent.stop()

    assert agent.status == "idle"
    assert agent.state.pending == ()
    assert agent.state.messages == [
        user("go"),
        FIRST_CALL,
        answered("c1", CANCELLED),
    ]


async def test_stop_on_an_idle_agent_is_a_no_op(model):
    model.push(tool_calls(call("first", {}, id="c1")), reply("done"))
    first = tool(name="first", description="", handler=lambda: "one")
    agent = make_fragola(model).agent("bot", tools=[first])

    agent.stop()
    agent.stop_sync()

    assert agent.status == "idle"
    assert agent.state.messages == []
    # nothing is left over to stop the next run
    state = await agent.user_message("go")
    assert state.outcome == "finished"
    assert state.messages == [
        user("go"),
        FIRST_CALL,
        answered("c1", "one"),
        {"role": "assistant", "content": "done"},
    ]


# -- stop_sync(): at once ------------------------------------------------------------------


async def test_stop_sync_during_a_hanging_request_returns_at_once(model):
    model.push(hang())
    agent = make_fragola(model).agent("bot", instructions="Be brief.")

    task = asyncio.create_task(agent.user_message("hello"))
    await wait_for_requests(model, 1)
    assert agent.status == "generating"
    started = time.monotonic()
    agent.stop_sync()
    state = await asyncio.wait_for(task, timeout=5)

    assert time.monotonic() - started < 1.0
    assert state.status == "idle"
    assert state.outcome == "stopped"
    assert state.messages == [user("hello")]

    model.push(reply("Hi!"))
    state = await agent.user_message("are you there?")
    assert state.messages == [
        user("hello"),
        user("are you there?"),
        {"role": "assistant", "content": "Hi!"},
    ]
    assert model.requests[1]["messages"] == [
        {"role": "system", "content": "Be brief."},
        user("hello"),
        user("are you there?"),
    ]


async def test_stop_sync_from_another_thread_during_a_hanging_request(model):
    # What a kernel interrupt or a widget callback on another thread does.
    model.push(hang())
    agent = make_fragola(model).agent("bot")

    task = asyncio.create_task(agent.user_message("hello"))

    def interrupt() -> None:
        assert model.wait_for_requests(1)
        agent.stop_sync()

    await asyncio.to_thread(interrupt)
    state = await asyncio.wait_for(task, timeout=1.0)

    assert state.status == "idle"
    assert state.messages == [user("hello")]
    model.push(reply("back"))
    state = await agent.step()
    assert state.messages == [user("hello"), {"role": "assistant", "content": "back"}]


async def test_stop_sync_in_before_model_invocation_stops_before_the_request(model):
    agent = make_fragola(model).agent("bot")
    banned = True

    @agent.on_before_model_invocation
    def moderate(event):
        if banned:
            agent.stop_sync()
        raise AssertionError("stop_sync() returned inside the run it stops")

    state = await agent.user_message("let me in")

    assert_stopped_before_any_request(model, state, "let me in")


async def test_stop_sync_in_before_model_invocation_after_a_tool_round(model):
    model.push(tool_calls(call("first", {}, id="c1")))
    first = tool(name="first", description="", handler=lambda: "one")
    agent = make_fragola(model).agent("bot", tools=[first])

    @agent.on_before_model_invocation
    async def second_call_is_banned(event):
        if event.context.state.step_count == 1:
            event.context.agent.stop_sync()

    state = await agent.user_message("go")

    assert len(model.requests) == 1
    assert state.messages == [
        user("go"),
        FIRST_CALL,
        answered("c1", "one"),
    ]
    assert state.status == "idle"


async def test_stop_sync_while_a_slow_async_tool_runs_cancels_that_call(model):
    agent, started, cleaned_up = stuck_in_first(model)

    task = asyncio.create_task(agent.user_message("go"))
    await started.wait()
    agent.stop_sync()
    state = await asyncio.wait_for(task, timeout=1.0)

    assert cleaned_up == ["first"]
    assert state.messages == two_calls_answered(INTERRUPTED, CANCELLED)
    assert state.status == "idle"
    assert len(model.requests) == 1


async def test_stop_sync_from_inside_a_tool_handler_cancels_that_call(model):
    two_calls(model)

    @tool
    def first(context) -> str:
        """Stops at once."""
        context.agent.stop_sync()
        return "never returned"

    second = tool(name="second", description="", handler=lambda: "two")
    agent = make_fragola(model).agent("bot", tools=[first, second])

    state = await agent.user_message("go")

    assert state.messages == two_calls_answered(INTERRUPTED, CANCELLED)
    assert state.status == "idle"


# -- cancellation from outside -------------------------------------------------------------


async def test_cancelling_the_awaiting_task_during_a_request(model):
    model.push(hang())
    agent = make_fragola(model).agent("bot")

    task = asyncio.create_task(agent.user_message("hello"))
    await wait_for_requests(model, 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert agent.status == "idle"
    assert agent.state.messages == [user("hello")]
    model.push(reply("still here"))
    state = await agent.user_message("again")
    assert state.messages[-1] == {"role": "assistant", "content": "still here"}
    assert model.requests[1]["messages"] == [user("hello"), user("again")]


async def test_cancelling_the_awaiting_task_during_a_tool_call(model):
    agent, started, _ = stuck_in_first(model)

    task = asyncio.create_task(agent.user_message("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert agent.status == "idle"
    assert agent.state.messages == two_calls_answered(INTERRUPTED, CANCELLED)
    model.push(reply("ok"))
    state = await agent.step()
    assert state.messages[-1] == {"role": "assistant", "content": "ok"}
    assert model.requests[1]["messages"] == state.messages[:-1]


async def test_stop_sync_in_a_user_message_listener_keeps_the_user_message(model):
    agent = make_fragola(model).agent("bot")

    @agent.on_user_message
    def moderate(event):
        agent.stop_sync()

    state = await agent.user_message("hello")

    assert_stopped_before_any_request(model, state, "hello")


async def test_stop_sync_while_an_async_user_message_listener_waits_keeps_the_message(model):
    agent = make_fragola(model).agent("bot")
    started = asyncio.Event()

    @agent.on_user_message
    async def slow_moderation(event):
        started.set()
        await asyncio.Event().wait()  # a moderation call that never answers
        return {**event.message, "content": "moderated"}

    task = asyncio.create_task(agent.user_message("hello"))
    await started.wait()
    agent.stop_sync()
    state = await asyncio.wait_for(task, timeout=1.0)

    assert model.requests == []
    assert state.messages == [user("hello")]  # as sent: the listener never finished
    assert state.status == "idle"
    model.push(reply("hi"))
    slow_moderation()
    state = await agent.step()
    assert model.requests[0]["messages"] == [user("hello")]
    assert state.messages[-1] == {"role": "assistant", "content": "hi"}


async def test_stop_sync_in_a_later_user_message_listener_keeps_earlier_changes(model):
    agent = make_fragola(model).agent("bot")
    agent.on_user_message(lambda e: {**e.message, "content": "[redacted]"})
    agent.on_user_message(lambda e: agent.stop_sync())

    state = await agent.user_message("my password is hunter2")

    assert state.messages == [user("[redacted]")]
    assert model.requests == []


# -- while streaming -----------------------------------------------------------------------


async def test_stop_sync_in_a_model_chunk_listener_drops_the_partial_reply(model):
    model.push(reply("A reply long enough to arrive in many chunks."))
    agent = make_fragola(model).agent("bot", model_settings={"stream": True})
    pieces: list[str] = []

    @agent.on_model_chunk
    def cut(event):
        pieces.append(event.content)
        if len(pieces) == 3:
            agent.stop_sync()

    state = await agent.user_message("talk")

    assert len(pieces) == 3
    assert state.messages == [user("talk")]
    assert state.status == "idle"
    model.push(reply("again"))
    state = await agent.step()
    assert state.messages == [user("talk"), {"role": "assistant", "content": "again"}]


async def test_stop_in_a_model_chunk_listener_keeps_the_whole_reply_and_runs_no_tool(model):
    model.push(tool_calls(call("first", {}, id="c1"), content="Let me call a tool."))
    ran: list[str] = []
    first = tool(name="first", description="", handler=lambda: ran.append("first") or "one")
    agent = make_fragola(model).agent("bot", tools=[first], model_settings={"stream": True})
    agent.on_model_chunk(lambda event: agent.stop())

    state = await agent.user_message("go")

    assert ran == []
    assert state.messages == [
        user("go"),
        {**FIRST_CALL, "content": "Let me call a tool."},
        answered("c1", CANCELLED),
    ]
    assert len(model.requests) == 1


async def test_stop_sync_in_an_observer_that_also_hears_the_cancelled_answers(model):
    # The listener calls stop_sync() again when settling the turn stores the cancelled
    # answers: the run is already stopping, so that second call must change nothing.
    two_calls(model)
    first = tool(name="first", description="", handler=lambda: "one")
    second = tool(name="second", description="", handler=lambda: "two")
    agent = make_fragola(model).agent("bot", tools=[first, second])

    @agent.on_after_state_update
    def stop_after_any_tool_message(event):
        if event.message is not None and event.message["role"] == "tool":
            agent.stop_sync()

    state = await agent.user_message("go")

    assert state.messages == two_calls_answered("one", CANCELLED)
    assert agent.status == "idle"
    model.push(reply("fine"))
    stop_after_any_tool_message()
    state = await agent.step()
    assert state.messages[-1] == {"role": "assistant", "content": "fine"}


@pytest.mark.parametrize("from_thread", [False, True], ids=["same_loop", "other_thread"])
async def test_stop_sync_ends_a_call_held_by_a_hung_async_observer(model, from_thread):
    # The run has finished and settled; its call waits for its async observers, one of which
    # never ends. stop_sync() ends that wait: the observer is cancelled, the outcome kept.
    model.push(reply("done"))
    agent = make_fragola(model).agent("bot")
    hanging, cancelled = asyncio.Event(), []

    async def hang_on_the_reply(event):
        if event.message is not None and event.message["role"] == "assistant":
            hanging.set()
            try:
                await asyncio.Event().wait()  # never set: only cancellation ends it
            except asyncio.CancelledError:
                cancelled.append(event.message["content"])
                raise

    subscription = agent.on_after_state_update(hang_on_the_reply)
    task = asyncio.create_task(agent.user_message("hi"))
    await asyncio.wait_for(hanging.wait(), timeout=5)
    while agent.status != "idle":  # settled: only the observer holds the call now
        await asyncio.sleep(0)
    assert not task.done()

    if from_thread:
        await asyncio.to_thread(agent.stop_sync)
    else:
        agent.stop_sync()
    state = await asyncio.wait_for(task, timeout=5)

    assert cancelled == ["done"]
    assert state.outcome == "finished" and state.status == "idle"
    assert state.messages == [user("hi"), {"role": "assistant", "content": "done"}]
    subscription()
    model.push(reply("again"))
    state = await agent.user_message("more")
    assert state.messages[-1] == {"role": "assistant", "content": "again"}
