"""Usage counted from what a server reports, as a user meets it: streams whose chunks report
usage oddly (or not at all), ``stream_options`` the user sets, a stopped stream, an answer
that cannot be stored, a session reloaded and continued.

Against the scripted model behind the real ``openai`` client. (The main cases of usage and
cost: tests/core/test_usage.py; recording and replay at their edges:
tests/models/test_recording_files_and_keys.py.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from support.helpers import make_fragola

from fragola_nb import ModelResponseError, load_session, save_session
from fragola_nb.core.usage import CallUsage
from fragola_nb.models.scripted import ScriptedModel, reply
from fragola_nb.models.scripted.items import recorded


def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any
          ) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o-mini",
            "choices": choices, **extra}


async def test_a_stream_keeps_the_last_usage_that_reads_as_counts() -> None:
    counts = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    running = {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}
    api = ScriptedModel([
        # running counts on each chunk (vLLM's continuous usage), then the final ones
        recorded(chunks=[chunk({"role": "assistant", "content": "hi"}, usage=running),
                         chunk({}, "stop", usage=counts)]),
        # the real usage chunk, then a trailing chunk with usage null, then a broken one
        recorded(chunks=[chunk({"role": "assistant", "content": "hi"}), chunk({}, "stop"),
                         chunk(None, usage=counts), chunk(None, usage=None),
                         chunk(None, usage={"prompt_tokens": "7"})]),
        # usage null on every chunk: unknown, never zero
        recorded(chunks=[chunk({"role": "assistant", "content": "hi"}, usage=None),
                         chunk({}, "stop", usage=None)]),
    ]).start()
    try:
        agent = make_fragola(api, model="gpt-4o-mini").agent(
            "s", model_settings={"stream": True})
        for _ in range(3):
            await agent.user_message("Hi.")
        calls = agent.usage.calls
        assert [(c.prompt_tokens, c.completion_tokens, c.reported) for c in calls] == [
            (7, 3, True), (7, 3, True), (0, 0, False)]
        assert agent.usage.cost is None and agent.usage.unreported == 1
    finally:
        api.stop()


async def test_stream_options_set_by_the_user_are_sent_and_no_count_is_made_up(
    model: ScriptedModel,
) -> None:
    model.push(reply("Hello there."))
    agent = make_fragola(model, model="gpt-4o-mini").agent(
        "s", model_settings={"stream": True, "stream_options": {"include_usage": False}})
    await agent.user_message("Hi.")
    assert model.requests[-1]["stream_options"] == {"include_usage": False}
    usage = agent.usage
    assert (usage.requests, usage.unreported, usage.total_tokens, usage.cost) == (1, 1, 0, None)
    # The summary does not claim "0 tokens" when no count is known.
    assert usage.summary() == "1 call without usage"


async def test_stream_options_are_not_sent_when_a_turn_does_not_stream(
    model: ScriptedModel,
) -> None:
    # OpenAI refuses stream_options without stream: settings that stream, turned off for one
    # turn (a compare variant, a listener), must not break that turn.
    model.push(reply("Plain."), reply("Streamed."))
    agent = make_fragola(model, model="gpt-4o-mini").agent("s", model_settings={
        "stream": True, "stream_options": {"include_usage": True}})
    plain = agent.fork("plain")
    plain.on_before_model_invocation(lambda event: {**event.config, "stream": False})
    await plain.user_message("Hi.")
    await agent.user_message("Hi.")
    assert model.requests[0]["stream"] is False
    assert "stream_options" not in model.requests[0]
    assert model.requests[1]["stream_options"] == {"include_usage": True}
    assert plain.usage.requests == agent.usage.requests == 1
    assert plain.usage.unreported == agent.usage.unreported == 0


async def test_a_session_reloaded_and_continued_counts_on(
    model: ScriptedModel, tmp_path: Path
) -> None:
    model.push(reply("One."), reply("Two."), reply("Three."))
    fragola = make_fragola(model, model="gpt-4o-mini")
    agent = fragola.agent("a")
    await agent.user_message("First.")
    trial = agent.fork("trial")
    await trial.user_message("Second.")
    save_session(tmp_path / "s.json", agent)
    before = [dataclass_tuple(c) for c in agent.usage.calls]

    session = load_session(tmp_path / "s.json", make_fragola(model, model="gpt-4o-mini"))
    again = session["a"]
    assert [dataclass_tuple(c) for c in again.usage.calls] == before
    await again.user_message("Third.")
    assert again.usage.requests == 2
    assert again.usage.total_tokens == before[0][3] + model.responses[-1]["usage"]["total_tokens"]
    assert session["trial"].usage.requests == 1


def dataclass_tuple(call: CallUsage) -> tuple[Any, ...]:
    return (call.model, call.prompt_tokens, call.completion_tokens, call.total_tokens,
            call.cached_tokens, call.reported)


async def test_a_stream_stopped_mid_way_counts_as_a_call_without_usage() -> None:
    api = ScriptedModel([reply("word " * 400)], chunk_size=4, chunk_delay=0.005).start()
    try:
        agent = make_fragola(api, model="gpt-4o-mini").agent(
            "s", model_settings={"stream": True})
        seen: list[Any] = []

        def on_chunk(event: Any) -> None:
            seen.append(event)
            if len(seen) == 3:
                asyncio.get_running_loop().call_soon(agent.stop_sync)

        agent.on_model_chunk(on_chunk)
        state = await agent.user_message("Talk.")
        assert state.outcome == "stopped"
        assert (agent.usage.requests, agent.usage.unreported, agent.usage.cost) == (1, 1, None)
    finally:
        api.stop()


async def test_an_answer_that_cannot_be_stored_still_counts_its_reported_usage(
    model: ScriptedModel,
) -> None:
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None,
                "tool_calls": [{"type": "function", "function": {"name": "f",
                                                                 "arguments": "{}"}}]}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}}
    api = ScriptedModel([recorded(body=body)]).start()
    try:
        agent = make_fragola(api, model="gpt-4o-mini").agent("s")
        with pytest.raises(ModelResponseError):
            await agent.user_message("Hi.")
        assert (agent.usage.requests, agent.usage.total_tokens) == (1, 13)
    finally:
        api.stop()
