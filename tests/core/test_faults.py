"""Every way the model API can fail, streamed and not: the caller gets a documented error (or
the openai client's own retries succeed), the agent is idle with a valid history holding no
half-built reply, and the next call works.

``tests/robustness/test_errors_and_sync.py`` covers the error classes and a first example of
each failure; this file runs the whole matrix, the client's retries, and answers that are not
usable.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import openai
import pytest
import pytest_asyncio
from support.helpers import answered, asked, assert_recovers, user
from support.invariants import check_agent, loopback_http_client

from fragola_nb import (
    Agent,
    Fragola,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeout,
    tool,
)
from fragola_nb.models.scripted import (
    Raw,
    ScriptedModel,
    ScriptEntry,
    call,
    drop,
    fail,
    hang,
    raw,
    reply,
    tool_calls,
)

FAST_RETRY = {"retry-after-ms": "1"}  # openai ignores Retry-After: 0 and would wait ~0.5 s


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


MakeAgent = Callable[..., Agent]


@pytest_asyncio.fixture
async def make_agent(model: ScriptedModel) -> AsyncIterator[MakeAgent]:
    """``make_agent(stream, max_retries=0, timeout=5.0)``: an agent with the ``add`` tool on
    its own ``Fragola``; the HTTP clients are closed on this test's loop at teardown."""
    made: list[Fragola] = []

    def make(stream: bool, *, max_retries: int = 0, timeout: float = 5.0) -> Agent:
        fragola = Fragola(api_key="test-key", base_url=model.base_url,
                          max_retries=max_retries, timeout=timeout,
                          http_client=loopback_http_client())
        made.append(fragola)
        settings = {"stream": True} if stream else {}
        return fragola.agent("agent", tools=[add], model_settings=settings)

    yield make
    for fragola in made:
        await fragola.aclose()


# -- bodies the scripted model cannot make on its own -----------------------------------------


def completion(*choices: Any) -> Raw:
    """A 200 JSON body shaped like a completion, with these ``choices`` as they are."""
    body = {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": list(choices)}
    return raw(json.dumps(body))


def message_choice(**message: Any) -> dict[str, Any]:
    return {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", **message}}


def sse(*choices: Any, done: bool = True) -> Raw:
    """A 200 event stream with one chunk per entry of ``choices`` (a dict is the chunk's one
    choice; anything else is the chunk's ``choices`` as it is), then ``data: [DONE]`` unless
    ``done=False``."""
    frames = []
    for choice in choices:
        chunk = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 0,
                 "model": "m", "choices": choice if not isinstance(choice, dict) else [choice]}
        frames.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    if done:
        frames.append(b"data: [DONE]\n\n")
    return raw(b"".join(frames), headers={"Content-Type": "text/event-stream"})


def delta(finish_reason: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"index": 0, "delta": fields, "finish_reason": finish_reason}


def call_part(index: Any = 0, **fields: Any) -> dict[str, Any]:
    return {"index": index, **fields}


# -- the fault matrix ---------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """One failure: the script item for a non-streamed and a streamed request, the error the
    caller must get and its ``__cause__`` (None when fragola_nb itself found the problem)."""

    name: str
    item: Callable[[bool], ScriptEntry]
    error: type[ModelError]
    cause: type[BaseException] | None
    timeout: float = 5.0
    modes: tuple[bool, ...] = (False, True)


def _either(plain: ScriptEntry, streamed: ScriptEntry) -> Callable[[bool], ScriptEntry]:
    return lambda stream: streamed if stream else plain


FAULTS = [
    Fault("http_429_with_retry_header",
          lambda _: fail(429, "slow down", headers={"Retry-After": "1", **FAST_RETRY}),
          ModelHTTPError, openai.RateLimitError),
    Fault("http_500", lambda _: fail(500), ModelHTTPError, openai.InternalServerError),
    Fault("http_503", lambda _: fail(503, "overloaded"), ModelHTTPError,
          openai.InternalServerError),
    Fault("http_500_html_body",
          lambda _: raw(b"<html>Bad gateway</html>", status=500,
                        headers={"Content-Type": "text/html"}),
          ModelHTTPError, openai.InternalServerError),
    Fault("request_timeout", lambda _: hang(), ModelTimeout, openai.APITimeoutError,
          timeout=1.0),
    Fault("connection_dropped",
          _either(drop(), reply("a reply cut in the middle", stream_cut_after=3)),
          ModelConnectionError, openai.APIConnectionError),
    Fault("connection_dropped_inside_a_tool_call",
          lambda _: tool_calls(call("add", {"a": 1, "b": 2}), stream_cut_after=3),
          ModelConnectionError, openai.APIConnectionError, modes=(True,)),
    Fault("body_that_cannot_be_decoded",  # said to be gzip, and it is not
          lambda _: raw(b"not gzip at all",
                        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}),
          ModelConnectionError, openai.APIConnectionError),
    Fault("malformed_json_body",  # streamed, the client parses each `data:` event itself
          _either(raw(b"{not json"),
                  raw(b"data: {not json\n\n", headers={"Content-Type": "text/event-stream"})),
          ModelResponseError, json.JSONDecodeError),
    Fault("sse_stream_ends_before_done",
          lambda _: sse(delta(role="assistant", content="half a rep"), done=False),
          ModelConnectionError, None, modes=(True,)),
    # Streamed, the three below are a server that answered a streaming request with one body.
    Fault("body_cut_short",
          lambda _: raw(b'{"id": "chatcmpl-x", "object": "chat.completion", "choices": [{"ind'),
          ModelResponseError, json.JSONDecodeError),
    Fault("choice_with_no_message",
          _either(completion({"index": 0, "finish_reason": "stop"}),
                  sse({"index": 0, "finish_reason": "stop"})),
          ModelResponseError, None),
    Fault("no_choices", lambda _: completion(), ModelResponseError, None),
    Fault("plain_text_body",  # not JSON, and not said to be: the client hands back the text
          lambda _: raw(b"upstream says hello", headers={"Content-Type": "text/plain"}),
          ModelResponseError, None),
    Fault("error_body_with_status_200",
          lambda _: raw(json.dumps({"error": {"message": "model not loaded", "code": 503}})),
          ModelResponseError, None),
    Fault("json_nested_too_deeply",  # the JSON parser gives up with a RecursionError
          _either(raw(b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
                  raw(b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n",
                      headers={"Content-Type": "text/event-stream"})),
          ModelResponseError, RecursionError),
    Fault("json_that_is_not_an_object",
          _either(raw(b"[1, 2]"),
                  raw(b"data: 5\n\ndata: [DONE]\n\n",
                      headers={"Content-Type": "text/event-stream"})),
          ModelResponseError, None),
]

# Answers that parse but could not be stored: each would make every later request invalid.
UNUSABLE = {
    "choices_not_a_list": _either(
        raw(json.dumps({"id": "x", "object": "chat.completion", "choices": "nope"})),
        sse("nope", delta("stop", content="x"))),
    "choice_is_null": _either(completion(None), sse([None], delta("stop", content="x"))),
    "message_is_a_string": _either(
        completion({"index": 0, "finish_reason": "stop", "message": "hello"}),
        sse({"index": 0, "finish_reason": "stop", "delta": "hello"})),
    "content_not_text": _either(
        completion(message_choice(content=5)),
        sse(delta(role="assistant", content=5), delta("stop"))),
    "refusal_not_text": _either(
        completion(message_choice(content="x", refusal=["no"])),
        sse(delta(role="assistant", refusal=["no"]), delta("stop"))),
    "tool_calls_not_a_list": _either(
        completion(message_choice(tool_calls="add")),
        sse(delta(role="assistant", tool_calls="add"), delta("tool_calls"))),
    "tool_call_is_null": _either(
        completion(message_choice(tool_calls=[None])),
        sse(delta(role="assistant", tool_calls=[None]), delta("tool_calls"))),
    "tool_call_without_id": _either(
        completion(message_choice(tool_calls=[
            {"type": "function", "function": {"name": "add", "arguments": "{}"}}])),
        sse(delta(role="assistant", tool_calls=[
            call_part(function={"name": "add", "arguments": "{}"})]), delta("tool_calls"))),
    "tool_call_id_not_text": _either(
        completion(message_choice(tool_calls=[
            {"id": 7, "type": "function", "function": {"name": "add", "arguments": "{}"}}])),
        sse(delta(role="assistant", tool_calls=[
            call_part(id=7, function={"name": "add", "arguments": "{}"})]),
            delta("tool_calls"))),
    "tool_call_without_name": _either(
        completion(message_choice(tool_calls=[
            {"id": "c1", "type": "function", "function": {"arguments": "{}"}}])),
        sse(delta(role="assistant", tool_calls=[
            call_part(id="c1", function={"arguments": "{}"})]), delta("tool_calls"))),
    "tool_call_without_function": _either(
        completion(message_choice(tool_calls=[{"id": "c1", "type": "function"}])),
        sse(delta(role="assistant", tool_calls=[call_part(id="c1")]), delta("tool_calls"))),
    "arguments_not_a_string": _either(
        completion(message_choice(tool_calls=[
            {"id": "c1", "type": "function",
             "function": {"name": "add", "arguments": {"a": 1, "b": 2}}}])),
        sse(delta(role="assistant", tool_calls=[
            call_part(id="c1", function={"name": "add", "arguments": {"a": 1}})]),
            delta("tool_calls"))),
    "two_calls_with_one_id": _either(
        completion(message_choice(tool_calls=[
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}},
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}])),
        sse(delta(role="assistant", tool_calls=[
            call_part(0, id="c1", function={"name": "add", "arguments": "{}"}),
            call_part(1, id="c1", function={"name": "add", "arguments": "{}"})]),
            delta("tool_calls"))),
}
# Streamed only: a tool call delta is placed by its index.
STREAM_ONLY = {"tool_call_delta_without_index"}
UNUSABLE["tool_call_delta_without_index"] = _either(
    completion(),
    sse(delta(role="assistant", tool_calls=[
        call_part(None, id="c1", function={"name": "add", "arguments": "{}"})]),
        delta("tool_calls")),
)


def fault_params() -> list[Any]:
    return [
        pytest.param(fault, stream, id=f"{fault.name}-{'stream' if stream else 'plain'}")
        for fault in FAULTS
        for stream in fault.modes
    ]


@pytest.mark.parametrize(("fault", "stream"), fault_params())
async def test_a_fault_on_the_first_request_raises_and_leaves_only_the_user_message(
    model: ScriptedModel, make_agent: MakeAgent, fault: Fault, stream: bool
) -> None:
    model.push(fault.item(stream))
    agent = make_agent(stream, timeout=fault.timeout)

    with pytest.raises(fault.error) as caught:
        await agent.user_message("hi")

    if fault.cause is None:
        assert caught.value.__cause__ is None
    else:
        assert isinstance(caught.value.__cause__, fault.cause)
    assert len(model.requests) == 1
    await assert_recovers(agent, model, [user("hi")], check_agent)


@pytest.mark.parametrize(("fault", "stream"), fault_params())
async def test_a_fault_after_a_tool_round_keeps_the_answered_calls(
    model: ScriptedModel, make_agent: MakeAgent, fault: Fault, stream: bool
) -> None:
    model.push(tool_calls(call("add", {"a": 2, "b": 3})), fault.item(stream))
    agent = make_agent(stream, timeout=fault.timeout)

    with pytest.raises(fault.error):
        await agent.user_message("2 + 3?")

    assert agent.step_count == 1  # the failed model call is not counted
    await assert_recovers(agent, model, [
        user("2 + 3?"),
        asked(("call_1", "add", {"a": 2, "b": 3})),
        answered("call_1", "5"),
    ], check_agent)


async def test_a_stream_that_stalls_mid_reply_times_out(
    model: ScriptedModel, make_agent: MakeAgent
) -> None:
    # The headers and the first chunk arrive at once, then nothing within the timeout.
    model.chunk_delay = 5.0
    model.push(reply("one two three four five six seven eight"))
    agent = make_agent(True, timeout=1.0)

    with pytest.raises(ModelTimeout) as caught:
        await agent.user_message("hi")

    assert isinstance(caught.value.__cause__, openai.APITimeoutError)
    model.chunk_delay = 0.0
    await assert_recovers(agent, model, [user("hi")], check_agent)


@pytest.mark.parametrize(("shape", "stream"), [
    pytest.param(shape, stream, id=f"{shape}-{'stream' if stream else 'plain'}")
    for shape in sorted(UNUSABLE)
    for stream in (False, True)
    if stream or shape not in STREAM_ONLY
])
async def test_an_answer_that_could_not_be_sent_back_is_a_model_response_error(
    model: ScriptedModel, make_agent: MakeAgent, shape: str, stream: bool
) -> None:
    model.push(UNUSABLE[shape](stream))
    agent = make_agent(stream)

    with pytest.raises(ModelResponseError):
        await agent.user_message("hi")

    await assert_recovers(agent, model, [user("hi")], check_agent)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_stream_with_its_finish_reason_but_no_done_is_a_complete_reply(
    model: ScriptedModel, make_agent: MakeAgent, stream: bool
) -> None:
    # Only [DONE] is missing: every chunk of the reply and its finish_reason arrived, so the
    # reply is whole and is kept (a cut before the finish_reason is an error, above).
    model.push(
        sse(delta(role="assistant", content="all "), delta(content="here"), delta("stop"),
            done=False) if stream else completion(message_choice(content="all here"))
    )
    agent = make_agent(stream)

    state = await agent.user_message("hi")

    assert state.messages == [user("hi"), {"role": "assistant", "content": "all here"}]
    check_agent(agent)


# -- truncated tool arguments are the model's mistake, not an API error --------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_truncated_tool_arguments_are_reported_to_the_model_and_the_run_goes_on(
    model: ScriptedModel, make_agent: MakeAgent, stream: bool
) -> None:
    truncated = '{"a": 2, "b'
    model.push(
        tool_calls(call("add", truncated), call("add", {"a": 2, "b": 3})),
        reply("Let me retry."),
    )
    agent = make_agent(stream)

    state = await agent.user_message("2 + 3?")

    assert state.outcome == "finished"
    calls = state.messages[1]["tool_calls"]
    assert calls[0]["function"]["arguments"] == truncated  # kept as the model sent it
    failed, answered = state.messages[2], state.messages[3]
    assert failed["tool_call_id"] == "call_1"
    assert failed["content"].startswith("Error: the arguments for add are not valid JSON")
    assert repr(truncated) in failed["content"]
    assert answered == {"role": "tool", "tool_call_id": "call_2", "content": "5"}
    assert state.messages[-1] == {"role": "assistant", "content": "Let me retry."}
    # The model saw its own truncated call and the error about it.
    assert model.requests[1]["messages"] == state.messages[:-1]
    check_agent(agent)


# -- the openai client's own retries -------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_retries_of_the_openai_client_recover_from_transient_failures(
    model: ScriptedModel, make_agent: MakeAgent, stream: bool
) -> None:
    model.push(
        fail(429, "slow down", headers=FAST_RETRY),
        fail(503, headers=FAST_RETRY),
        fail(500, headers=FAST_RETRY),
        reply("made it"),
    )
    agent = make_agent(stream, max_retries=3)

    state = await agent.user_message("hi")

    assert state.messages == [user("hi"), {"role": "assistant", "content": "made it"}]
    assert (state.outcome, state.step_count) == ("finished", 1)  # one model call, 4 requests
    assert [r["messages"] for r in model.requests] == [[user("hi")]] * 4
    check_agent(agent)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_retries_also_cover_a_dropped_connection_and_a_timeout(
    model: ScriptedModel, make_agent: MakeAgent, stream: bool
) -> None:
    # No retry header here, so the client backs off by itself (about half a second each).
    model.push(drop(), hang(), reply("made it"))
    agent = make_agent(stream, max_retries=2, timeout=1.0)

    state = await agent.user_message("hi")

    assert state.messages[-1] == {"role": "assistant", "content": "made it"}
    assert len(model.requests) == 3


@pytest.mark.parametrize("max_retries", [0, 1, 2])
async def test_max_retries_is_how_many_times_the_client_tries_again(
    model: ScriptedModel, make_agent: MakeAgent, max_retries: int
) -> None:
    model.push(*[fail(503, headers=FAST_RETRY)] * (max_retries + 1), reply("unreached"))
    agent = make_agent(False, max_retries=max_retries)

    with pytest.raises(ModelHTTPError) as caught:
        await agent.user_message("hi")

    assert caught.value.status_code == 503
    assert len(model.requests) == max_retries + 1
    assert model.pending == 1
    await assert_recovers_with_the_pushed_reply(agent, "unreached")


async def assert_recovers_with_the_pushed_reply(agent: Agent, text: str) -> None:
    state = await agent.step()
    assert state.messages == [user("hi"), {"role": "assistant", "content": text}]
    check_agent(agent)


async def test_a_client_error_is_not_retried(
    model: ScriptedModel, make_agent: MakeAgent
) -> None:
    model.push(fail(400, "bad request"), reply("unreached"))
    agent = make_agent(False, max_retries=3)

    with pytest.raises(ModelHTTPError) as caught:
        await agent.user_message("hi")

    assert caught.value.status_code == 400
    assert len(model.requests) == 1
    await assert_recovers_with_the_pushed_reply(agent, "unreached")


async def test_a_half_streamed_reply_is_never_replayed_by_a_retry(
    model: ScriptedModel, make_agent: MakeAgent
) -> None:
    # The response had begun, so the client does not retry: the caller decides.
    model.push(reply("a reply cut in the middle", stream_cut_after=3), reply("second try"))
    agent = make_agent(True, max_retries=3)

    with pytest.raises(ModelConnectionError):
        await agent.user_message("hi")

    assert len(model.requests) == 1
    await assert_recovers_with_the_pushed_reply(agent, "second try")


async def test_retries_are_configured_per_fragola_instance(
    model: ScriptedModel, make_agent: MakeAgent
) -> None:
    patient = make_agent(False, max_retries=2)
    hasty = make_agent(False, max_retries=0)
    model.push(fail(503, headers=FAST_RETRY), reply("patient got it"),
               fail(503, headers=FAST_RETRY), reply("hasty's next call"))

    assert (await patient.user_message("hi")).messages[-1]["content"] == "patient got it"
    with pytest.raises(ModelHTTPError):
        await hasty.user_message("hi")

    assert len(model.requests) == 3
    await assert_recovers_with_the_pushed_reply(hasty, "hasty's next call")


# -- every field of a streamed chunk, of any type -----------------------------------------

FULL_CHUNK: dict[str, Any] = {
    "id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 0, "model": "m",
    "system_fingerprint": "fp", "service_tier": "default", "usage": None,
    "choices": [{
        "index": 0, "logprobs": None, "finish_reason": None,
        "delta": {"role": "assistant", "content": "Adding.", "refusal": None, "tool_calls": [
            {"index": 0, "id": "c1", "type": "function",
             "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]},
    }],
}
CHUNK_FIELDS = [
    ("id",), ("object",), ("created",), ("model",), ("system_fingerprint",), ("service_tier",),
    ("usage",), ("choices",), ("choices", 0), ("choices", 0, "index"),
    ("choices", 0, "logprobs"), ("choices", 0, "finish_reason"), ("choices", 0, "delta"),
    ("choices", 0, "delta", "role"), ("choices", 0, "delta", "content"),
    ("choices", 0, "delta", "refusal"), ("choices", 0, "delta", "tool_calls"),
    ("choices", 0, "delta", "tool_calls", 0), ("choices", 0, "delta", "tool_calls", 0, "index"),
    ("choices", 0, "delta", "tool_calls", 0, "id"),
    ("choices", 0, "delta", "tool_calls", 0, "type"),
    ("choices", 0, "delta", "tool_calls", 0, "function"),
    ("choices", 0, "delta", "tool_calls", 0, "function", "name"),
    ("choices", 0, "delta", "tool_calls", 0, "function", "arguments"),
]
ANY_TYPE = [None, 0, 7, -1, 1.5, True, "", "text", [], [None], {}, {"_fields_set": [1]}]


def with_field(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    chunk = json.loads(json.dumps(FULL_CHUNK))
    holder = chunk
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = value
    return chunk


def stream_of(*chunks: dict[str, Any]) -> Raw:
    """A 200 event stream of these whole chunks, then ``data: [DONE]``."""
    frames = [b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks]
    return raw(b"".join([*frames, b"data: [DONE]\n\n"]),
               headers={"Content-Type": "text/event-stream"})


@pytest.mark.parametrize("path", CHUNK_FIELDS, ids=lambda path: ".".join(map(str, path)))
async def test_a_streamed_chunk_field_of_any_type_is_a_reply_or_a_model_response_error(
    model: ScriptedModel, make_agent: MakeAgent, path: tuple[Any, ...]
) -> None:
    # With a model_chunk listener, so that the chunk is also built as a ChatCompletionChunk.
    model.brain = lambda request: reply("3")  # answers the request after the tool round
    last = {**FULL_CHUNK, "choices": [delta("tool_calls")]}
    for value in ANY_TYPE:
        agent = make_agent(True)
        heard: list[str] = []
        agent.on_model_chunk(lambda event, heard=heard: heard.append(repr(event.chunk)))
        model.push(stream_of(with_field(path, value), last))
        try:
            await agent.user_message("1 + 2?")
        except ModelResponseError:
            assert agent.state.messages == [user("1 + 2?")], value
        else:
            assert heard, value
        check_agent(agent)
