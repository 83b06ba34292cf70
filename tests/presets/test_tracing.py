"""Traces: ``fragola_nb.presets.tracing.instrument()`` with the real OpenTelemetry SDK.

Spans go to the SDK's ``InMemorySpanExporter``; agents run against the scripted model
(schema-checked by the ``model`` fixture), whose answers report deterministic usage
(``model.responses``). Parent/child links are checked by span ids, not by names.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from support.helpers import assert_valid_history, make_agent, make_fragola

from fragola_nb import BadUsage, ModelHTTPError, run_sync
from fragola_nb.core.tools import tool
from fragola_nb.models.scripted import ScriptedModel, call, fail, reply, tool_calls
from fragola_nb.models.scripted.refusals import check_refuse
from fragola_nb.presets.tracing import instrument, uninstrument


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(provider)
    try:
        yield exporter
    finally:
        uninstrument()
        provider.shutdown()


@pytest.fixture
def provider_and_exporter() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield provider, exporter
    finally:
        uninstrument()
        provider.shutdown()


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"boom: {reason}")


def by_name(exporter: InMemorySpanExporter) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        found.setdefault(span.name, []).append(span)
    return found


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_turn_is_one_agent_span_with_a_chat_span_per_model_call_and_a_tool_span(
    model: ScriptedModel, exporter: InMemorySpanExporter
) -> None:
    agent = make_agent(model, add, name="calc", description="Adds numbers.")
    model.push(tool_calls(call("add", {"a": 2, "b": 3}, id="c1")), reply("5"))

    await agent.user_message("2 + 3?")

    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == [
        "chat gpt-4o-mini", "execute_tool add", "chat gpt-4o-mini", "invoke_agent calc"]
    first, tool_span, second, turn = spans
    assert parent_of(turn) is None
    assert {parent_of(first), parent_of(tool_span), parent_of(second)} == {span_id(turn)}
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 1
    assert attrs(turn) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "server.address": "127.0.0.1",
        "server.port": int(model.base_url.split(":")[2].split("/")[0]),
        "gen_ai.agent.name": "calc",
        "gen_ai.agent.id": agent.id,
        "gen_ai.agent.description": "Adds numbers.",
        "gen_ai.request.model": "gpt-4o-mini",
        "fragola.outcome": "finished",
        "gen_ai.usage.input_tokens": agent.usage.prompt_tokens,
        "gen_ai.usage.output_tokens": agent.usage.completion_tokens,
    }
    for span, body in zip((first, second), model.responses, strict=True):
        assert span.kind == trace.SpanKind.CLIENT
        assert attrs(span)["gen_ai.operation.name"] == "chat"
        assert attrs(span)["gen_ai.request.model"] == "gpt-4o-mini"
        assert attrs(span)["gen_ai.response.model"] == body["model"]
        assert attrs(span)["gen_ai.response.id"] == body["id"]
        assert attrs(span)["gen_ai.usage.input_tokens"] == body["usage"]["prompt_tokens"]
        assert attrs(span)["gen_ai.usage.output_tokens"] == body["usage"]["completion_tokens"]
    assert attrs(first)["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert attrs(second)["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs(tool_span) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add two numbers.",
    }
    assert all(s.status.status_code == StatusCode.UNSET for s in spans)


async def test_contents_are_recorded_only_when_asked_and_never_the_api_key(
    model: ScriptedModel, provider_and_exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = provider_and_exporter
    agent = make_agent(model, add, instructions="Be brief.",
                       model_settings={"temperature": 0.2, "max_tokens": 50})
    instrument(provider)
    model.push(tool_calls(call("add", {"a": 1, "b": 1}, id="c1")), reply("2"))
    await agent.user_message("one plus one")
    quiet = exporter.get_finished_spans()
    assert not any(key.startswith(("gen_ai.input", "gen_ai.output.messages", "gen_ai.system_i",
                                   "gen_ai.tool.call.arg", "gen_ai.tool.call.res"))
                   for span in quiet for key in attrs(span))
    assert attrs(quiet[0])["gen_ai.request.temperature"] == 0.2
    assert attrs(quiet[0])["gen_ai.request.max_tokens"] == 50

    exporter.clear()
    instrument(provider, capture_content=True)
    model.push(tool_calls(call("add", {"a": 2, "b": 2}, id="c2")), reply("4"))
    await agent.user_message("two plus two")

    first, tool_span, second, _ = exporter.get_finished_spans()
    assert json.loads(attrs(first)["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be brief."}]
    assert json.loads(attrs(first)["gen_ai.input.messages"])[-1] == {
        "role": "user", "parts": [{"type": "text", "content": "two plus two"}]}
    assert json.loads(attrs(first)["gen_ai.output.messages"]) == [{
        "role": "assistant", "finish_reason": "tool_call",
        "parts": [{"type": "tool_call", "id": "c2", "name": "add", "arguments": {"a": 2, "b": 2}}],
    }]
    assert json.loads(attrs(tool_span)["gen_ai.tool.call.arguments"]) == {"a": 2, "b": 2}
    assert attrs(tool_span)["gen_ai.tool.call.result"] == "4"
    assert json.loads(attrs(second)["gen_ai.input.messages"])[-1] == {
        "role": "tool", "parts": [{"type": "tool_call_response", "id": "c2", "response": "4"}]}
    assert json.loads(attrs(second)["gen_ai.output.messages"]) == [{
        "role": "assistant", "finish_reason": "stop", "parts": [{"type": "text", "content": "4"}]}]
    everything = json.dumps([attrs(s) for s in quiet + exporter.get_finished_spans()])
    assert "test-key" not in everything  # make_fragola's api_key


async def test_a_model_error_ends_the_chat_and_turn_spans_as_errors_and_the_agent_goes_on(
    model: ScriptedModel, exporter: InMemorySpanExporter
) -> None:
    agent = make_agent(model)
    model.push(fail(500, "the server is down"))

    with pytest.raises(ModelHTTPError):
        await agent.user_message("hello")

    chat, turn = exporter.get_finished_spans()
    assert parent_of(chat) == span_id(turn)
    for span in (chat, turn):
        assert span.status.status_code == StatusCode.ERROR
        assert attrs(span)["error.type"] == "ModelHTTPError"
        assert "the server is down" in (span.status.description or "")
    assert "fragola.outcome" not in attrs(turn)
    assert [e.name for e in chat.events] == ["exception"]

    exporter.clear()
    model.push(reply("hi"))
    state = await agent.user_message("again")
    assert_valid_history(state.messages)
    assert [(s.name, s.status.status_code) for s in exporter.get_finished_spans()] == [
        ("chat gpt-4o-mini", StatusCode.UNSET), ("invoke_agent tester", StatusCode.UNSET)]


async def test_a_tool_that_raises_is_an_error_span_and_the_turn_finishes(
    model: ScriptedModel, provider_and_exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = provider_and_exporter
    agent = make_agent(model, explode)
    for capture, said in ((False, "ValueError"), (True, "ValueError: boom: the-argument")):
        instrument(provider, capture_content=capture)
        exporter.clear()
        model.push(tool_calls(call("explode", {"reason": "the-argument"}, id="c1")),
                   reply("it failed"))

        await agent.user_message("try it")

        spans = by_name(exporter)
        [tool_span] = spans["execute_tool explode"]
        [turn] = spans["invoke_agent tester"]
        assert tool_span.status.status_code == StatusCode.ERROR
        assert attrs(tool_span)["error.type"] == "ValueError"
        # Without captured contents, the error's text (which quotes the argument) stays out.
        assert tool_span.status.description == said
        [event] = tool_span.events
        assert dict(event.attributes or {})["exception.type"] == "ValueError"
        written = json.dumps([dict(e.attributes or {}) for s in exporter.get_finished_spans()
                              for e in s.events] + [s.status.description for s in spans[
                                  "execute_tool explode"]])
        assert ("the-argument" in written) is capture
        assert turn.status.status_code == StatusCode.UNSET
        assert attrs(turn)["fragola.outcome"] == "finished"


async def test_a_paused_turn_ends_its_span_and_the_resumed_step_is_a_new_span(
    model: ScriptedModel, exporter: InMemorySpanExporter
) -> None:
    guarded = tool(name="add", description="Add.", handler=lambda p: p["a"] + p["b"],
                   schema={"type": "object", "properties": {"a": {"type": "integer"},
                                                            "b": {"type": "integer"}}},
                   require_approval=True)
    agent = make_agent(model, guarded)
    model.push(tool_calls(call("add", {"a": 1, "b": 2}, id="c1")), reply("3"))

    await agent.user_message("1 + 2")
    [paused_chat, paused] = exporter.get_finished_spans()
    assert attrs(paused)["fragola.outcome"] == "paused"
    assert parent_of(paused_chat) == span_id(paused)

    exporter.clear()
    agent.approve("c1")
    await agent.step()

    tool_span, chat, resumed = exporter.get_finished_spans()
    assert (tool_span.name, chat.name, resumed.name) == (
        "execute_tool add", "chat gpt-4o-mini", "invoke_agent tester")
    assert {parent_of(tool_span), parent_of(chat)} == {span_id(resumed)}
    assert resumed.context is not None and paused.context is not None
    assert resumed.context.trace_id != paused.context.trace_id
    assert attrs(resumed)["fragola.outcome"] == "finished"


async def test_stop_sync_during_a_tool_ends_its_span_as_cancelled_and_the_turn_as_stopped(
    model: ScriptedModel, exporter: InMemorySpanExporter
) -> None:
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Never returns."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    agent = make_agent(model, wait_forever)
    model.push(tool_calls(call("wait_forever", {}, id="c1")))
    task = asyncio.create_task(agent.user_message("go"))
    await started.wait()
    agent.stop_sync()
    state = await task

    assert_valid_history(state.messages)
    spans = by_name(exporter)
    [tool_span] = spans["execute_tool wait_forever"]
    [turn] = spans["invoke_agent tester"]
    assert attrs(tool_span)["error.type"] == "CancelledError"
    assert tool_span.status.status_code == StatusCode.ERROR
    assert turn.status.status_code == StatusCode.UNSET
    assert attrs(turn)["fragola.outcome"] == "stopped"
    assert parent_of(tool_span) == span_id(turn)


async def test_concurrent_agents_each_get_their_own_turn_span_as_parent(
    model: ScriptedModel, exporter: InMemorySpanExporter
) -> None:
    both_running = asyncio.Barrier(2)

    @tool
    async def meet() -> str:
        """Waits for the other agent's tool."""
        await both_running.wait()
        return "met"

    fragola = make_fragola(model)
    first = fragola.agent(name="first", tools=[meet])
    second = fragola.agent(name="second", tools=[meet])
    model.push(tool_calls(call("meet", {})), tool_calls(call("meet", {})),
               reply("done"), reply("done"))

    await asyncio.gather(first.user_message("go"), second.user_message("go"))

    spans = exporter.get_finished_spans()
    turns = {attrs(s)["gen_ai.agent.name"]: s for s in spans if s.name.startswith("invoke")}
    assert set(turns) == {"first", "second"}
    children = {name: sorted(s.name for s in spans if parent_of(s) == span_id(turn))
                for name, turn in turns.items()}
    expected = ["chat gpt-4o-mini", "chat gpt-4o-mini", "execute_tool meet"]
    assert children == {"first": expected, "second": expected}
    assert turns["first"].context.trace_id != turns["second"].context.trace_id  # type: ignore[union-attr]


async def test_spans_nest_under_the_callers_span_and_another_agents_turn_under_the_tool(
    model: ScriptedModel, provider_and_exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = provider_and_exporter
    instrument(provider)
    fragola = make_fragola(model)
    helper = fragola.agent(name="helper")

    @tool
    async def ask_helper(question: str) -> str:
        """Ask the helper agent."""
        state = await helper.user_message(question)
        return str(state.messages[-1]["content"])

    lead = fragola.agent(name="lead", tools=[ask_helper])
    model.push(tool_calls(call("ask_helper", {"question": "why?"}, id="c1")),
               reply("because"), reply("the helper says: because"))

    with provider.get_tracer("test").start_as_current_span("my workflow") as outer:
        await lead.user_message("ask the helper")

    spans = by_name(exporter)
    [lead_turn] = spans["invoke_agent lead"]
    [tool_span] = spans["execute_tool ask_helper"]
    [helper_turn] = spans["invoke_agent helper"]
    assert parent_of(lead_turn) == outer.get_span_context().span_id
    assert parent_of(tool_span) == span_id(lead_turn)
    assert parent_of(helper_turn) == span_id(tool_span)
    assert {s.context.trace_id for s in exporter.get_finished_spans()  # type: ignore[union-attr]
            } == {outer.get_span_context().trace_id}


async def test_a_streamed_answer_reports_its_model_and_usage(
    model: ScriptedModel, exporter: InMemorySpanExporter
) -> None:
    agent = make_agent(model, model_settings={"stream": True})
    model.push(reply("streamed"))

    await agent.user_message("stream it")

    chat = by_name(exporter)["chat gpt-4o-mini"][0]
    last = model.chunks[-1]
    assert attrs(chat)["gen_ai.response.model"] == last["model"]
    assert attrs(chat)["gen_ai.usage.output_tokens"] == last["usage"]["completion_tokens"]


async def test_agent_json_is_a_turn_whose_chat_asks_for_json(
    model: ScriptedModel, exporter: InMemorySpanExporter
) -> None:
    agent = make_agent(model)
    model.push(reply('{"answer": 4}'))
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}},
              "required": ["answer"], "additionalProperties": False}

    result = await agent.json("2 + 2 as JSON", schema, json_mode="json_schema")

    assert result.data == {"answer": 4}
    chat, turn = exporter.get_finished_spans()
    assert attrs(chat)["gen_ai.output.type"] == "json"
    assert parent_of(chat) == span_id(turn)


async def test_an_agent_json_fallback_is_one_turn_span_per_strategy_tried(
    model: ScriptedModel, exporter: InMemorySpanExporter
) -> None:
    model.refuse = check_refuse(("json_schema",))  # as llama-cpp-python's server does
    model.push(reply('{"answer": 4}'))
    agent = make_agent(model)

    result = await agent.json("2 + 2 as JSON", {
        "type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]})

    assert result.json_mode == "json_object"
    turns = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert [(attrs(t).get("error.type"), attrs(t).get("fragola.outcome")) for t in turns] == [
        ("ModelHTTPError", None), (None, "finished")]


async def test_a_listener_that_raises_ends_the_turn_span_as_an_error(
    model: ScriptedModel, exporter: InMemorySpanExporter
) -> None:
    agent = make_agent(model)

    @agent.on_ai_message
    def broken(event: Any) -> None:
        raise RuntimeError("listener bug")

    model.push(reply("hi"))
    with pytest.raises(Exception, match="listener bug"):
        await agent.user_message("hello")

    chat, turn = exporter.get_finished_spans()
    assert chat.status.status_code == StatusCode.UNSET  # the model call itself succeeded
    assert attrs(turn)["error.type"] == "ListenerError"


async def test_uninstrument_stops_tracing_and_a_second_instrument_replaces_the_first(
    model: ScriptedModel, provider_and_exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = provider_and_exporter
    other = InMemorySpanExporter()
    other_provider = TracerProvider()
    other_provider.add_span_processor(SimpleSpanProcessor(other))
    agent = make_agent(model)
    instrument(other_provider)
    instrument(provider)
    model.push(reply("one"), reply("two"))
    await agent.user_message("one")
    uninstrument()
    uninstrument()  # already off: nothing to do
    await agent.user_message("two")

    assert [s.name for s in exporter.get_finished_spans()] == [
        "chat gpt-4o-mini", "invoke_agent tester"]
    assert other.get_finished_spans() == ()


def test_bad_arguments_are_one_line_errors() -> None:
    with pytest.raises(BadUsage, match="tracer_provider must be an OpenTelemetry"):
        instrument("jaeger")  # type: ignore[arg-type]
    with pytest.raises(BadUsage, match="capture_content must be True or False"):
        instrument(capture_content="yes")  # type: ignore[arg-type]


async def test_stop_and_the_step_limit_end_the_turn_span_with_their_outcome(
    model: ScriptedModel, exporter: InMemorySpanExporter
) -> None:
    @tool
    def halt(context: Any) -> str:
        """Stops the run after this call."""
        context.stop()
        return "halting"

    stopping = make_agent(model, halt, name="stopping")
    limited = make_agent(model, add, name="limited", max_step=1)
    model.push(tool_calls(call("halt", {}, id="c1")),
               tool_calls(call("add", {"a": 1, "b": 1}, id="c2")))

    await stopping.user_message("stop soon")
    await limited.user_message("add")

    turns = {attrs(s)["gen_ai.agent.name"]: s for s in exporter.get_finished_spans()
             if s.name.startswith("invoke_agent")}
    assert {name: attrs(span)["fragola.outcome"] for name, span in turns.items()} == {
        "stopping": "stopped", "limited": "step_limit"}
    assert all(span.status.status_code == StatusCode.UNSET for span in turns.values())


def test_a_keyboard_interrupt_in_a_handler_ends_the_tool_and_turn_spans_as_errors(
    model: ScriptedModel, exporter: InMemorySpanExporter
) -> None:
    def interrupt() -> str:
        raise KeyboardInterrupt

    agent = make_agent(model, tool(name="interrupt", description="Ctrl-C.", handler=interrupt))
    model.push(tool_calls(call("interrupt", {}, id="c1")))

    async def main() -> Any:
        try:
            return await agent.user_message("go")
        finally:
            await agent.fragola.aclose()

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(main())

    chat, tool_span, turn = exporter.get_finished_spans()
    assert (chat.name, tool_span.name) == ("chat gpt-4o-mini", "execute_tool interrupt")
    assert parent_of(tool_span) == span_id(turn)
    assert attrs(tool_span)["error.type"] == attrs(turn)["error.type"] == "KeyboardInterrupt"
    assert turn.status.status_code == StatusCode.ERROR
    assert agent.status == "idle"
    assert_valid_history(agent.state.messages)


def test_instrument_without_a_provider_uses_the_global_one_even_when_set_later(
    tmp_path: Any,
) -> None:
    script = tmp_path / "traced.py"
    script.write_text(
        "import asyncio\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import "
        "InMemorySpanExporter\n"
        "from fragola_nb import Fragola\n"
        "from fragola_nb.models.scripted import reply\n"
        "from fragola_nb.presets.tracing import instrument\n"
        "instrument()\n"
        "exporter = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(provider)\n"
        "fragola = Fragola.scripted([reply('hi')])\n"
        "asyncio.run(fragola.agent(name='late').user_message('hello'))\n"
        "print([span.name for span in exporter.get_finished_spans()])\n"
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.strip() == "['chat scripted', 'invoke_agent late']"


def test_a_turn_run_by_run_sync_is_a_child_of_the_callers_span(
    model: ScriptedModel, provider_and_exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = provider_and_exporter
    instrument(provider)
    agent = make_agent(model)
    model.push(reply("hi"))

    with provider.get_tracer("test").start_as_current_span("a cell") as cell:
        run_sync(agent.user_message("hello"))  # the turn runs on fragola_nb's own loop

    chat, turn = exporter.get_finished_spans()[:2]
    assert parent_of(turn) == cell.get_span_context().span_id
    assert parent_of(chat) == span_id(turn)
