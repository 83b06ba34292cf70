"""Issue 25's gaps: the payload ``after_tool_call`` hears is the outcome the ``tool_call``
listeners left (what the model reads), ``is_validation_error`` is a flag the run loop sets
where it refuses arguments (never guessed from a text), ``mcp_hook`` with a real MCP server,
and tracing as a hook of one agent (``fragola_nb.presets.tracing.tracing_hook``)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.helpers import (
    STDIO,
    answered,
    broken,
    make_agent,
    make_fragola,
    servers_running,
    until_async,
    weather,
)

from fragola_nb import BadUsage, ToolCallPayload, tool, tracing_hook
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls
from fragola_nb.presets.hooks import mcp_hook


@tool
def stale(city: str) -> ToolCallPayload:
    """Fails with a text that reads like the run loop's own validation texts."""
    return ToolCallPayload(False, None, error=f"the arguments for stale ({city}) are too old")


# -- the payload after the tool_call listeners ------------------------------------------------


async def test_a_listener_that_fails_a_success_is_a_failure_after(model: ScriptedModel) -> None:
    agent = make_agent(model, weather)
    after: list[ToolCallPayload] = []
    agent.on_tool_call(lambda event: ToolCallPayload(False, None, error=ValueError("closed")))
    agent.on_after_tool_call(lambda event: after.append(event.payload))
    model.push(tool_calls(call("weather", {"city": "Oslo"}, id="c1")), reply("done"))
    state = await agent.user_message("go")

    assert state.messages[2] == answered("c1", "Error: ValueError: closed")
    assert after[0].success is False
    assert after[0].error == "Error: ValueError: closed"
    assert after[0].is_validation_error is False


async def test_a_listener_that_mends_a_failure_is_a_success_after(model: ScriptedModel) -> None:
    agent = make_agent(model, broken)
    after: list[Any] = []

    def from_cache(event: Any) -> ToolCallPayload | None:
        return ToolCallPayload(True, "cached: sunny") if event.error else None

    agent.on_tool_call(from_cache)
    agent.on_after_tool_call(lambda event: after.append((event.payload, event.error)))
    model.push(tool_calls(call("broken", {"city": "Oslo"}, id="c1")), reply("done"))
    state = await agent.user_message("go")

    assert state.messages[2] == answered("c1", "cached: sunny")
    assert after == [(ToolCallPayload(True, "cached: sunny"), None)]


# -- is_validation_error: a flag, not a reading of the text -----------------------------------


async def test_a_failure_whose_text_reads_like_validation_is_not_one(
        model: ScriptedModel) -> None:
    agent = make_agent(model, stale, weather)
    after: list[ToolCallPayload] = []
    agent.on_after_tool_call(lambda event: after.append(event.payload))
    model.push(tool_calls(call("stale", {"city": "Oslo"}, id="c1")), reply("done"))
    state = await agent.user_message("go")

    assert state.messages[2]["content"] == "Error: the arguments for stale (Oslo) are too old"
    assert (after[0].success, after[0].is_validation_error) == (False, False)

    # A listener's failure worded as the run loop words a refusal is not one either.
    agent.on_tool_call(lambda event: ToolCallPayload(
        False, None, error="invalid arguments for weather: the city is closed"))
    model.push(tool_calls(call("weather", {"city": "Oslo"}, id="c2")), reply("done"))
    await agent.user_message("again")
    assert after[1].error == "Error: invalid arguments for weather: the city is closed"
    assert after[1].is_validation_error is False


async def test_refused_arguments_are_validation_errors_before_and_after_listeners(
        model: ScriptedModel) -> None:
    agent = make_agent(model, weather)
    during: list[ToolCallPayload] = []
    after: list[ToolCallPayload] = []
    agent.on_tool_call(lambda event: during.append(event.payload))
    agent.on_after_tool_call(lambda event: after.append(event.payload))
    model.push(tool_calls(call("weather", {"town": "Oslo"}, id="c1"),
                          call("weather", "{not json", id="c2"),
                          call("weather", "[1, 2]", id="c3")), reply("done"))
    await agent.user_message("go")

    assert [p.is_validation_error for p in during] == [True, True, True]
    assert [p.is_validation_error for p in after] == [True, True, True]

    # A listener that answers a refused call with a success clears the flag with the error.
    agent.on_tool_call(lambda event: ToolCallPayload(True, "guessed: Oslo"))
    model.push(tool_calls(call("weather", {"town": "Oslo"}, id="c4")), reply("done"))
    await agent.user_message("again")
    assert after[-1] == ToolCallPayload(True, "guessed: Oslo")


# -- mcp_hook with a real MCP server ----------------------------------------------------------



def tool_names(agent: Any) -> list[str]:
    return [t.name for t in agent.options.tools]


async def test_mcp_hook_offers_the_servers_tools_until_remove_hook_closes_it(
        model: ScriptedModel) -> None:
    assert servers_running() == []
    agent = make_agent(model, weather)
    agent.use(mcp_hook(STDIO, filter=lambda t: t.name in ("add", "echo")), name="demo")
    assert agent.has_hook("demo")

    model.push(tool_calls(call("add", {"a": 2, "b": 3}, id="c1")), reply("5"))
    state = await agent.user_message("2 + 3?")  # the turn waits for the hook to connect
    assert tool_names(agent) == ["weather", "add", "echo"]
    assert [t["function"]["name"] for t in model.requests[0]["tools"]] == [
        "weather", "add", "echo"]
    assert state.messages[2] == answered("c1", "5")  # the server's tool ran
    assert len(servers_running()) == 1

    assert agent.remove_hook("demo") is True
    assert tool_names(agent) == ["weather"]  # taken off at once
    await until_async(lambda: servers_running() == [])  # and the connection it opened closed
    model.push(reply("no tools"))
    await agent.user_message("again")
    assert [t["function"]["name"] for t in model.requests[-1]["tools"]] == ["weather"]


async def test_dispose_closes_every_mcp_hook(model: ScriptedModel) -> None:
    agent = make_agent(model)
    agent.use(mcp_hook(STDIO, filter=lambda t: t.name == "add", prefix="one_"), name="one")
    agent.use(mcp_hook(STDIO, filter=lambda t: t.name == "echo", prefix="two_"))  # unnamed
    await agent.hooks_ready()
    assert sorted(tool_names(agent)) == ["one_add", "two_echo"]  # in the order they connect
    assert len(servers_running()) == 2

    agent.dispose()
    assert tool_names(agent) == [] and not agent.has_hook("one")
    await until_async(lambda: servers_running() == [])


async def test_an_mcp_hook_removed_while_it_connects_leaves_no_server(
        model: ScriptedModel) -> None:
    agent = make_agent(model)
    agent.use(mcp_hook(STDIO), name="demo")
    await until_async(lambda: len(servers_running()) == 1)  # the server is starting
    agent.remove_hook("demo")
    await until_async(lambda: servers_running() == [])
    assert tool_names(agent) == []


# -- tracing as a hook of one agent -----------------------------------------------------------


def turns_traced(exporter: InMemorySpanExporter) -> list[str]:
    """The agents whose turns have a span, in the order the turns ended (then forgotten)."""
    spans = exporter.get_finished_spans()
    exporter.clear()
    return [str(span.attributes["gen_ai.agent.name"]) for span in spans
            if span.name.startswith("invoke_agent ") and span.attributes]


async def test_tracing_hook_traces_its_agent_and_its_forks_alone(model: ScriptedModel) -> None:
    from fragola_nb.core import probes

    assert probes.installed() is None  # no instrument(): every span below is the hook's
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    fragola = make_fragola(model)
    traced = fragola.agent("traced", tools=[weather])
    other = fragola.agent("other")
    traced.use(tracing_hook(provider), name="trace")

    model.push(tool_calls(call("weather", {"city": "Oslo"}, id="c1")), reply("sunny"),
               reply("hello"))
    await traced.user_message("weather in Oslo?")
    await other.user_message("hi")
    spans = exporter.get_finished_spans()
    turn = next(span for span in spans if span.name == "invoke_agent traced")
    assert turn.context is not None
    inside = [span.name for span in spans if span.parent is not None
              and span.parent.span_id == turn.context.span_id]
    assert inside == ["chat gpt-4o-mini", "execute_tool weather", "chat gpt-4o-mini"]
    assert all("gen_ai.input.messages" not in (span.attributes or {}) for span in spans)
    assert turns_traced(exporter) == ["traced"]  # not the other agent's turn

    branch = traced.fork("branch")
    model.push(reply("from the fork"), reply("from the parent"))
    await branch.user_message("hi")
    await traced.user_message("hi")
    assert turns_traced(exporter) == ["branch", "traced"]

    assert branch.remove_hook("trace") is True  # the fork alone stops
    model.push(reply("quiet fork"), reply("still traced"))
    await branch.user_message("hi")
    await traced.user_message("hi")
    assert turns_traced(exporter) == ["traced"]

    assert traced.remove_hook("trace") is True
    model.push(reply("quiet"))
    await traced.user_message("hi")
    assert turns_traced(exporter) == []
    provider.shutdown()


def test_tracing_hook_checks_its_settings_when_made() -> None:
    with pytest.raises(BadUsage, match="capture_content must be True or False"):
        tracing_hook(capture_content="yes")  # type: ignore[arg-type]
    with pytest.raises(BadUsage, match="must be an OpenTelemetry TracerProvider"):
        tracing_hook(object())  # type: ignore[arg-type]
