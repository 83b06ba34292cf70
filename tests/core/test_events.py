"""Agent events: every event fires in order, mutators change what is stored and sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel
from support.helpers import answered, asked, make_fragola, user

from fragola_nb import (
    EVENT_NAMES,
    AgentContext,
    BadUsage,
    ListenerError,
    Subscription,
    ToolCallConfig,
    tool,
)
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls


class AddParams(BaseModel):
    a: int
    b: int


def add_tool(calls: list[Any] | None = None) -> Any:
    def handler(params: AddParams) -> int:
        if calls is not None:
            calls.append(params)
        return params.a + params.b

    return tool(name="add", description="Add two numbers.", schema=AddParams, handler=handler)


def one_tool_turn(model: ScriptedModel) -> None:
    model.push(tool_calls(call("add", {"a": 1, "b": 2}, id="call_add")), reply("It is 3."))


ONE_TOOL_TURN_HISTORY = [
    user("What is 1 + 2?"),
    asked(("call_add", "add", {"a": 1, "b": 2})),
    answered("call_add", "3"),
    {"role": "assistant", "content": "It is 3."},
]


async def test_every_event_fires_in_order_for_a_turn_with_one_tool_call(model):
    one_tool_turn(model)
    agent = make_fragola(model).agent("calc", tools=[add_tool()])
    seen: list[str] = []
    for name in EVENT_NAMES:
        agent.on(name, lambda event, name=name: seen.append(name))

    state = await agent.user_message("What is 1 + 2?")

    assert seen == [
        "status_change",
        "user_message",
        "after_state_update",
        # first model call, answered with a tool call
        "before_step",
        "before_model_invocation",
        "ai_message",
        "after_state_update",
        "after_model_invocation",
        "before_tool_call",
        "tool_call",
        "after_state_update",
        "after_tool_call",
        "after_step",
        # second model call, the final answer
        "before_step",
        "before_model_invocation",
        "ai_message",
        "after_state_update",
        "after_model_invocation",
        "after_step",
        "status_change",
    ]
    assert state.messages == ONE_TOOL_TURN_HISTORY
    assert state.status == "idle"


def test_event_list_matches_the_contract():
    assert set(EVENT_NAMES) == {
        "user_message",
        "before_step",
        "before_model_invocation",
        "model_chunk",
        "ai_message",
        "after_model_invocation",
        "before_tool_call",
        "tool_call",
        "after_tool_call",
        "after_step",
        "after_state_update",
        "status_change",
        "throttled",  # fragola_nb's own: a 429 waited out (not in the TypeScript SDK)
    }


async def test_observer_events_carry_their_fields(model):
    one_tool_turn(model)
    agent = make_fragola(model).agent("calc", tools=[add_tool()])
    statuses: list[tuple[str, str]] = []
    updates: list[tuple[str, Any]] = []
    steps: list[tuple[str, int]] = []
    after_tool: list[tuple[str, Any, Any, str, dict[str, Any]]] = []
    after_model: list[tuple[dict[str, Any], str]] = []
    agent.on_status_change(lambda e: statuses.append((e.previous, e.status)))
    agent.on_after_state_update(lambda e: updates.append((e.reason, e.message)))
    agent.on_before_step(lambda e: steps.append(("before", e.step)))
    agent.on_after_step(lambda e: steps.append(("after", e.step)))
    agent.on_after_tool_call(
        lambda e: after_tool.append((e.name, e.params, e.result, e.id, e.message))
    )
    agent.on_after_model_invocation(lambda e: after_model.append((e.message, e.config["model"])))

    await agent.user_message("What is 1 + 2?")

    assert statuses == [("idle", "generating"), ("generating", "idle")]
    assert updates == [
        ("user_message", ONE_TOOL_TURN_HISTORY[0]),
        ("ai_message", ONE_TOOL_TURN_HISTORY[1]),
        ("tool_result", ONE_TOOL_TURN_HISTORY[2]),
        ("ai_message", ONE_TOOL_TURN_HISTORY[3]),
    ]
    assert steps == [("before", 1), ("after", 1), ("before", 2), ("after", 2)]
    assert after_tool == [("add", AddParams(a=1, b=2), 3, "call_add", ONE_TOOL_TURN_HISTORY[2])]
    assert after_model == [
        (ONE_TOOL_TURN_HISTORY[1], "gpt-4o-mini"),
        (ONE_TOOL_TURN_HISTORY[3], "gpt-4o-mini"),
    ]


async def test_every_listener_gets_one_event_object_with_the_context(model):
    one_tool_turn(model)
    agent = make_fragola(model).agent("calc", tools=[add_tool()])
    contexts: dict[str, list[Any]] = {}

    def record(name: str) -> Any:
        def listener(*args: Any, **kwargs: Any) -> None:
            assert kwargs == {}
            assert len(args) == 1
            contexts.setdefault(name, []).append(args[0].context)

        return listener

    for name in EVENT_NAMES:
        agent.on(name, record(name))
    await agent.user_message("What is 1 + 2?")

    assert set(contexts) == set(EVENT_NAMES) - {"model_chunk", "throttled"}  # no stream, no 429
    for received in contexts.values():
        for context in received:
            assert isinstance(context, AgentContext)
            assert context.agent is agent


async def test_user_message_listener_changes_what_is_stored_and_sent(model):
    model.push(reply("Hello."))
    agent = make_fragola(model).agent("bot", instructions="Be brief.")
    seen: list[dict[str, Any]] = []

    @agent.on_user_message
    def redact(event):
        seen.append(event.message)
        return {"role": "user", "content": event.message["content"].replace("secret", "[redacted]")}

    state = await agent.user_message("my secret is 42")

    assert seen == [user("my secret is 42")]
    assert state.messages == [
        user("my [redacted] is 42"),
        {"role": "assistant", "content": "Hello."},
    ]
    assert model.requests[0]["messages"] == [
        {"role": "system", "content": "Be brief."},
        user("my [redacted] is 42"),
    ]


async def test_before_model_invocation_listener_changes_the_request_settings(model):
    model.push(reply("Hi."), reply("Hi again."))
    agent = make_fragola(model).agent("bot", model_settings={"temperature": 0.9})
    configs: list[dict[str, Any]] = []

    @agent.on_before_model_invocation
    def cooler(event):
        configs.append(dict(event.config))
        return {**event.config, "temperature": 0.1}

    await agent.user_message("hi")
    cooler()  # unsubscribe: the next request goes out with the agent's own settings
    await agent.user_message("hi again")

    assert configs == [{"model": "gpt-4o-mini", "temperature": 0.9}]
    assert model.requests[0]["temperature"] == 0.1
    assert model.requests[1]["temperature"] == 0.9
    assert agent.options.model_settings == {"temperature": 0.9}


async def test_before_model_invocation_in_place_change_with_none_returned_is_kept(model):
    model.push(reply("Hi."))
    agent = make_fragola(model).agent("bot")

    @agent.on_before_model_invocation
    def set_seed(event):
        event.config["seed"] = 7  # returns None: the (changed) config is kept

    await agent.user_message("hi")

    assert model.requests[0]["seed"] == 7
    assert agent.options.model_settings == {}


async def test_ai_message_listener_changes_the_stored_message(model):
    model.push(reply("I am sure it is 3."), reply("Fine."))
    agent = make_fragola(model).agent("bot")

    @agent.on_ai_message
    def soften(event):
        return {**event.message, "content": event.message["content"].replace("sure", "fairly sure")}

    state = await agent.user_message("1 + 2?")
    assert state.messages == [
        user("1 + 2?"),
        {"role": "assistant", "content": "I am fairly sure it is 3."},
    ]
    await agent.user_message("ok")
    # the changed message is also what the model is shown next time
    assert model.requests[1]["messages"][1] == {
        "role": "assistant",
        "content": "I am fairly sure it is 3.",
    }


async def test_ai_message_listener_changing_tool_calls_changes_what_runs(model):
    model.push(tool_calls(call("add", {"a": 1, "b": 2}, id="c1")), reply("done"))
    calls: list[AddParams] = []
    agent = make_fragola(model).agent("calc", tools=[add_tool(calls)])

    @agent.on_ai_message
    def rewrite(event):
        if event.message.get("tool_calls"):
            (tc,) = event.message["tool_calls"]
            function = {**tc["function"], "arguments": '{"a": 10, "b": 20}'}
            return {**event.message, "tool_calls": [{**tc, "function": function}]}
        return None

    state = await agent.user_message("add")

    assert calls == [AddParams(a=10, b=20)]
    assert state.messages[1:3] == [
        asked(("c1", "add", {"a": 10, "b": 20})),
        answered("c1", "30"),
    ]


async def test_listener_returning_none_keeps_every_value(model):
    one_tool_turn(model)
    agent = make_fragola(model).agent("calc", tools=[add_tool()])
    for name in EVENT_NAMES:
        agent.on(name, lambda event: None)

    state = await agent.user_message("What is 1 + 2?")

    assert state.messages == ONE_TOOL_TURN_HISTORY
    assert "temperature" not in model.requests[0]


async def test_before_tool_call_sees_validated_params_and_can_inject_a_response(model):
    one_tool_turn(model)
    calls: list[AddParams] = []
    agent = make_fragola(model).agent("calc", tools=[add_tool(calls)])
    configs: list[ToolCallConfig] = []

    @agent.on_before_tool_call
    def inject(event):
        configs.append(event.config)
        assert event.config.params == AddParams(a=1, b=2)  # the model instance the handler gets
        event.config.inject_response = "forty-two"
        return event.config

    state = await agent.user_message("What is 1 + 2?")

    assert calls == []  # the handler was skipped
    (config,) = configs
    assert config.tool.name == "add"
    assert config.id == "call_add"
    assert config.arguments == {"a": 1, "b": 2}
    assert state.messages[2] == answered("call_add", "forty-two")
    assert model.requests[1]["messages"][-1] == state.messages[2]


async def test_before_tool_call_inject_response_without_returning_is_kept(model):
    one_tool_turn(model)
    calls: list[AddParams] = []
    agent = make_fragola(model).agent("calc", tools=[add_tool(calls)])

    @agent.on_before_tool_call
    async def inject(event):
        event.config.inject_response = {"sum": "unknown"}

    state = await agent.user_message("What is 1 + 2?")

    assert calls == []
    assert state.messages[2] == answered("call_add", '{"sum": "unknown"}')


async def test_before_tool_call_can_replace_the_params_the_handler_receives(model):
    one_tool_turn(model)
    calls: list[AddParams] = []
    agent = make_fragola(model).agent("calc", tools=[add_tool(calls)])

    @agent.on_before_tool_call
    def double(event):
        params = event.config.params
        event.config.params = AddParams(a=params.a * 2, b=params.b * 2)
        return event.config

    state = await agent.user_message("What is 1 + 2?")

    assert calls == [AddParams(a=2, b=4)]
    assert state.messages[2] == answered("call_add", "6")


async def test_tool_call_listener_changes_the_stored_tool_message(model):
    one_tool_turn(model)
    agent = make_fragola(model).agent("calc", tools=[add_tool()])
    seen: list[tuple[str, Any, Any, str]] = []

    @agent.on_tool_call
    def annotate(event):
        seen.append((event.name, event.params, event.result, event.id))
        return f"{event.result} (checked)"

    state = await agent.user_message("What is 1 + 2?")

    assert seen == [("add", AddParams(a=1, b=2), 3, "call_add")]
    assert state.messages == [
        *ONE_TOOL_TURN_HISTORY[:2],
        answered("call_add", "3 (checked)"),
        ONE_TOOL_TURN_HISTORY[3],
    ]
    assert model.requests[1]["messages"][-1] == state.messages[2]


async def test_sync_and_async_listeners_run_in_registration_order(model):
    model.push(reply("x"))
    agent = make_fragola(model).agent("bot")
    order: list[str] = []

    def first(event):
        order.append("first")
        return {**event.message, "content": event.message["content"] + "1"}

    async def second(event):
        await asyncio.sleep(0)  # really suspends: the next listener still waits its turn
        order.append("second")
        return {**event.message, "content": event.message["content"] + "2"}

    def third(event):
        order.append("third")
        return {**event.message, "content": event.message["content"] + "3"}

    agent.on_ai_message(first)
    agent.on_ai_message(second)
    agent.on_ai_message(third)
    state = await agent.user_message("go")

    assert order == ["first", "second", "third"]
    # each mutator saw the previous one's value
    assert state.messages[-1] == {"role": "assistant", "content": "x123"}


async def test_async_observer_is_awaited_before_the_run_goes_on(model):
    model.push(reply("one"), reply("two"))
    agent = make_fragola(model).agent("bot")
    order: list[str] = []

    @agent.on_after_model_invocation
    async def slow_observer(event):
        await asyncio.sleep(0)
        order.append(f"observed {event.message['content']}")

    @agent.on_before_model_invocation
    def before(event):
        order.append("request")

    await agent.user_message("a")
    await agent.user_message("b")
    assert order == ["request", "observed one", "request", "observed two"]


async def test_decorator_form_returns_a_subscription_that_unsubscribes(model):
    model.push(
        tool_calls(call("add", {"a": 1, "b": 1}, id="c1")),
        reply("2"),
        tool_calls(call("add", {"a": 2, "b": 2}, id="c2")),
        reply("4"),
    )
    agent = make_fragola(model).agent("calc", tools=[add_tool()])
    names: list[str] = []

    @agent.on_tool_call
    def record(event):
        names.append(event.id)

    assert isinstance(record, Subscription)
    state = await agent.user_message("1 + 1")
    assert names == ["c1"]
    assert state.messages[2] == answered("c1", "2")

    record()
    await agent.user_message("2 + 2")
    assert names == ["c1"]


async def test_unsubscribing_one_listener_keeps_the_others(model):
    model.push(reply("a"), reply("b"))
    agent = make_fragola(model).agent("bot")
    calls: list[str] = []
    first = agent.on_ai_message(lambda e: calls.append("first"))
    agent.on_ai_message(lambda e: calls.append("second"))

    await agent.user_message("1")
    first.unsubscribe()
    first()  # unsubscribing twice is harmless
    await agent.user_message("2")

    assert calls == ["first", "second", "second"]


def test_on_unknown_event_raises_bad_usage(model):
    agent = make_fragola(model).agent("bot")
    with pytest.raises(BadUsage, match="unknown event 'tool_called'"):
        agent.on("tool_called", lambda e: None)
    with pytest.raises(BadUsage):
        agent.on("unknown", lambda e: None)


def test_on_with_a_non_callable_raises_bad_usage(model):
    agent = make_fragola(model).agent("bot")
    with pytest.raises(BadUsage):
        agent.on_tool_call("not a function")  # type: ignore[arg-type]


async def test_update_tools_in_before_model_invocation_applies_to_that_request(model):
    model.push(tool_calls(call("add", {"a": 2, "b": 3}, id="c1")), reply("5"))
    agent = make_fragola(model).agent("calc")

    @agent.on_before_model_invocation
    def offer_add(event):
        event.context.update_tools([add_tool()])

    state = await agent.user_message("2 + 3")

    assert [t["function"]["name"] for t in model.requests[0]["tools"]] == ["add"]
    assert state.messages[2] == answered("c1", "5")


async def test_an_async_observer_that_raises_ends_the_turn_with_listener_error(model):
    model.push(reply("hello"))
    agent = make_fragola(model).agent("observed")

    async def broken(event: Any) -> None:
        raise RuntimeError("observer broke")

    agent.on_after_state_update(broken)
    with pytest.raises(ListenerError, match="observer broke") as caught:
        await agent.user_message("hi")
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert agent.status == "idle"
    assert agent.state.messages == [
        user("hi"),
        {"role": "assistant", "content": "hello"},
    ]


async def test_off_removes_an_inherited_listener_from_the_fork_only(model):
    model.push(reply("parent"), reply("fork"))
    agent = make_fragola(model).agent("parent")
    seen: list[str] = []

    def log(event: Any) -> None:
        seen.append(event.context.agent.name)

    agent.on_ai_message(log)
    fork = agent.fork("child")
    fork.off("ai_message", log)
    await agent.user_message("one")
    await fork.user_message("two")
    assert seen == ["parent"]
    with pytest.raises(BadUsage):
        fork.off("no_such_event", log)


def test_transient_listeners_stay_with_their_agent_when_forked(model):
    from fragola_nb.core.events import is_transient, transient

    agent = make_fragola(model).agent("viewed")

    def view(event: Any) -> None:
        pass

    def kept(event: Any) -> None:
        pass

    agent.on_status_change(transient(view))
    agent.on_status_change(kept)
    assert is_transient(view) and not is_transient(kept)
    fork = agent.fork()
    assert fork.deps.listeners._by_event["status_change"] == [kept]
    assert agent.deps.listeners._by_event["status_change"] == [view, kept]


async def test_an_async_observer_cancelled_before_it_starts_leaves_no_unawaited_coroutine(
    model,
):
    import asyncio
    import gc
    import warnings

    agent = make_fragola(model).agent("observed")

    async def observe(event):
        await asyncio.sleep(0)

    agent.on_after_state_update(observe)
    agent.reset()  # schedules the observer as a task...
    task = next(t for t in asyncio.all_tasks() if t is not asyncio.current_task())
    task.cancel()  # ...cancelled before it ever runs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        del task
        gc.collect()
    assert [w for w in caught if "never awaited" in str(w.message)] == []
