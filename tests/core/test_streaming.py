"""Streaming: ``model_settings={"stream": True}`` sends chunks through ``model_chunk`` and stores
the same message as a request without streaming."""

from __future__ import annotations

import itertools
import json
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionChunk
from support.helpers import answered, asked, make_fragola, user
from support.openai_schema import validate_chunk

from fragola_nb import ModelError, tool
from fragola_nb.models.scripted import call, raw, reply, tool_calls

STREAM = {"stream": True}


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


@tool
def get_time(city: str) -> str:
    """Local time in a city."""
    return f"Noon in {city}"


async def test_text_chunks_add_up_to_the_stored_message(model):
    text = "The capital of France is Paris, a city on the Seine."
    model.push(reply(text))
    agent = make_fragola(model).agent("bot", model_settings=STREAM)
    pieces: list[str] = []
    partials: list[dict[str, Any]] = []
    chunks: list[Any] = []

    @agent.on_model_chunk
    def collect(event):
        pieces.append(event.content)
        partials.append(event.message)
        chunks.append(event.chunk)

    state = await agent.user_message("Capital of France?")

    assert model.requests[0]["stream"] is True
    assert "".join(pieces) == text
    assert [p for p in pieces if p] == [text[i : i + 4] for i in range(0, len(text), 4)]
    assert all(isinstance(c, ChatCompletionChunk) for c in chunks)
    # every chunk of the reply, not the usage chunk that ends the stream (choices: [])
    assert model.chunks[-1]["choices"] == [] and model.chunks[-1]["usage"]
    assert len(chunks) == len(model.chunks) - 1
    # each partial message holds the text so far, ending with the whole reply
    so_far = ""
    for piece, partial in zip(pieces, partials, strict=True):
        so_far += piece
        assert partial == {"role": "assistant", "content": so_far}
    assert state.messages == [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": text},
    ]


async def test_chunks_arrive_between_the_request_and_the_ai_message(model):
    model.push(reply("Hello there"))
    agent = make_fragola(model).agent("bot", model_settings=STREAM)
    order: list[str] = []
    for name in ("before_model_invocation", "model_chunk", "ai_message",
                 "after_model_invocation"):
        agent.on(name, lambda event, name=name: order.append(name))

    await agent.user_message("hi")

    # model_chunk is heard for each chunk of the reply, not the usage chunk (choices: [])
    chunk_count = len([c for c in model.chunks if c["choices"]])
    assert chunk_count > 2 and chunk_count == len(model.chunks) - 1
    assert order == [
        "before_model_invocation",
        *["model_chunk"] * chunk_count,
        "ai_message",
        "after_model_invocation",
    ]


async def test_tool_call_argument_deltas_show_the_growing_call(model):
    model.push(
        tool_calls(call("get_weather", {"city": "Buenos Aires"}, id="call_w")),
        reply("Sunny."),
    )
    agent = make_fragola(model).agent("bot", tools=[get_weather], model_settings=STREAM)
    arguments_seen: list[str] = []
    first_message_done = False

    @agent.on_model_chunk
    def watch(event):
        if not first_message_done and event.message.get("tool_calls"):
            (tc,) = event.message["tool_calls"]
            assert tc["id"] == "call_w"
            assert tc["function"]["name"] == "get_weather"
            arguments_seen.append(tc["function"]["arguments"])

    @agent.on_ai_message
    def done(event):
        nonlocal first_message_done
        first_message_done = True

    state = await agent.user_message("Weather in Buenos Aires?")

    final = '{"city": "Buenos Aires"}'
    assert arguments_seen[0] == ""  # the header delta: id and name, no arguments yet
    assert arguments_seen[-1] == final
    # every step is a prefix of the next: the call grows chunk by chunk
    assert all(b.startswith(a) for a, b in itertools.pairwise(arguments_seen))
    assert len(set(arguments_seen)) > 3
    assert state.messages == [
        {"role": "user", "content": "Weather in Buenos Aires?"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_w",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": final},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_w", "content": "Sunny in Buenos Aires"},
        {"role": "assistant", "content": "Sunny."},
    ]


async def test_several_tool_calls_in_one_stream_are_assembled(model):
    model.push(
        tool_calls(
            call("get_weather", {"city": "Paris"}, id="call_1"),
            call("get_time", {"city": "Paris"}, id="call_2"),
            call("get_weather", {"city": "Lima"}, id="call_3"),
            content="Checking.",
        ),
        reply("Done."),
    )
    agent = make_fragola(model).agent("bot", tools=[get_weather, get_time],
                                      model_settings=STREAM)

    state = await agent.user_message("Paris weather and time, Lima weather")

    assert state.messages[1] == {
        "content": "Checking.",
        **asked(("call_1", "get_weather", {"city": "Paris"}),
                ("call_2", "get_time", {"city": "Paris"}),
                ("call_3", "get_weather", {"city": "Lima"})),
    }
    assert state.messages[2:5] == [
        answered("call_1", "Sunny in Paris"),
        answered("call_2", "Noon in Paris"),
        answered("call_3", "Sunny in Lima"),
    ]


def sse(chunks: list[dict[str, Any]]) -> bytes:
    frames = [f"data: {json.dumps(c)}\n\n" for c in chunks]
    return ("".join(frames) + "data: [DONE]\n\n").encode()


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def part(index: int, **fields: Any) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, **fields}]}


async def test_interleaved_tool_call_deltas_are_assembled_by_index(model):
    # Deltas for two calls interleaved, the second index first: a stream a server may send.
    chunks = [
        chunk({"role": "assistant", "content": None}),
        chunk(part(1, id="call_b", type="function",
                   function={"name": "get_time", "arguments": ""})),
        chunk(part(0, id="call_a", type="function",
                   function={"name": "get_weather", "arguments": '{"ci'})),
        chunk(part(1, function={"arguments": '{"city": '})),
        chunk(part(0, function={"arguments": 'ty": "Oslo"}'})),
        chunk(part(1, function={"arguments": '"Rome"}'})),
        chunk({}, "tool_calls"),
    ]
    for body in chunks:
        validate_chunk(body)
    model.push(
        raw(sse(chunks), headers={"Content-Type": "text/event-stream"}),
        reply("Done."),
    )
    agent = make_fragola(model).agent("bot", tools=[get_weather, get_time],
                                      model_settings=STREAM)

    state = await agent.user_message("Oslo weather, Rome time")

    assert state.messages[1:4] == [
        asked(("call_a", "get_weather", {"city": "Oslo"}),
              ("call_b", "get_time", {"city": "Rome"})),
        answered("call_a", "Sunny in Oslo"),
        answered("call_b", "Noon in Rome"),
    ]


def weather_script() -> list[Any]:
    return [
        tool_calls(call("get_weather", {"city": "Paris"}, id="call_p"), content="Let me look."),
        tool_calls(
            call("get_time", {"city": "Paris"}, id="call_t"),
            call("get_weather", {"city": "Oslo"}, id="call_o"),
        ),
        reply("Paris is sunny at noon; so is Oslo."),
        reply(""),
    ]


async def test_streamed_history_equals_the_history_without_streaming(model):
    fragola = make_fragola(model)
    plain = fragola.agent("plain", tools=[get_weather, get_time])
    streamed = fragola.agent("streamed", tools=[get_weather, get_time], model_settings=STREAM)

    model.push(*weather_script())
    await plain.user_message("Weather and time in Paris?")
    await plain.user_message("And nothing else?")
    model.push(*weather_script())
    await streamed.user_message("Weather and time in Paris?")
    await streamed.user_message("And nothing else?")

    assert [r.get("stream") for r in model.requests] == [None] * 4 + [True] * 4
    assert streamed.state.messages == plain.state.messages
    assert len(plain.state.messages) == 9
    assert plain.state.messages[-1] == {"role": "assistant", "content": ""}
    # what each request sent was the same too
    for plain_request, streamed_request in zip(model.requests[:4], model.requests[4:], strict=True):
        assert streamed_request["messages"] == plain_request["messages"]


async def test_usage_chunk_with_no_choices_is_ignored(model):
    model.push(reply("Counted."))
    agent = make_fragola(model).agent(
        "bot", model_settings={"stream": True, "stream_options": {"include_usage": True}}
    )
    contents: list[str] = []
    agent.on_model_chunk(lambda e: contents.append(e.content))

    state = await agent.user_message("count")

    assert model.chunks[-1]["choices"] == []  # the server did send a usage chunk
    assert "".join(contents) == "Counted."
    assert state.messages[-1] == {"role": "assistant", "content": "Counted."}


async def test_a_stream_cut_short_raises_and_keeps_a_valid_history(model):
    model.push(reply("This reply is cut off in the middle", stream_cut_after=3))
    agent = make_fragola(model).agent("bot", model_settings=STREAM)
    pieces: list[str] = []
    agent.on_model_chunk(lambda e: pieces.append(e.content))

    with pytest.raises(ModelError) as caught:
        await agent.user_message("Tell me something.")

    assert isinstance(caught.value.__cause__, openai.APIConnectionError)
    # the role chunk and two pieces of text arrived before the cut
    assert "".join(pieces) == "This rep"
    assert agent.status == "idle"
    assert agent.state.messages == [{"role": "user", "content": "Tell me something."}]
    model.push(reply("Second try."))
    state = await agent.step()
    assert state.messages[-1] == {"role": "assistant", "content": "Second try."}


# -- odd servers -----------------------------------------------------------------------------


def choices_chunk(*choices: dict[str, Any]) -> dict[str, Any]:
    return {**chunk({}), "choices": list(choices)}


def choice(index: int, delta: dict[str, Any], finish_reason: str | None = None
           ) -> dict[str, Any]:
    return {"index": index, "delta": delta, "finish_reason": finish_reason}


def two_choices_streamed() -> list[dict[str, Any]]:
    """``n=2``: both choices interleaved, one chunk holding both with choice 1 first."""
    return [
        choices_chunk(choice(0, {"role": "assistant", "content": ""})),
        choices_chunk(choice(1, {"role": "assistant", "content": ""})),
        choices_chunk(choice(1, {"content": "Bonjour"})),
        choices_chunk(choice(0, {"content": "Hello"})),
        choices_chunk(choice(1, {"content": " monde"}), choice(0, {"content": " world"})),
        choices_chunk(choice(1, {}, "stop")),
        choices_chunk(choice(0, {}, "stop")),
    ]


def two_choices_plain() -> bytes:
    """The same reply unstreamed, choice 1 listed first."""
    return json.dumps({
        "id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
        "choices": [
            {"index": 1, "finish_reason": "stop",
             "message": {"role": "assistant", "content": "Bonjour monde"}},
            {"index": 0, "finish_reason": "stop",
             "message": {"role": "assistant", "content": "Hello world"}},
        ],
    }).encode()


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_with_n_2_only_choice_0_is_kept_and_heard(model, stream):
    chunks = two_choices_streamed()
    for body in chunks:
        validate_chunk(body)
    model.push(raw(sse(chunks), headers={"Content-Type": "text/event-stream"}) if stream
               else raw(two_choices_plain()))
    agent = make_fragola(model).agent("bot", model_settings={"stream": stream, "n": 2})
    heard: list[tuple[str, dict[str, Any]]] = []
    agent.on_model_chunk(lambda e: heard.append((e.content, e.message)))

    state = await agent.user_message("Greet me")

    assert state.messages == [user("Greet me"), {"role": "assistant", "content": "Hello world"}]
    if stream:  # the chunks of choice 1 alone are not heard: they change nothing of the reply
        assert heard == [
            ("", {"role": "assistant", "content": ""}),
            ("Hello", {"role": "assistant", "content": "Hello"}),
            (" world", {"role": "assistant", "content": "Hello world"}),
            ("", {"role": "assistant", "content": "Hello world"}),
        ]


async def test_with_n_2_streamed_tool_calls_of_other_choices_are_not_spliced_in(model):
    def calls(index: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
        return choice(index, {"tool_calls": [
            {"index": 0, "id": call_id, "type": "function",
             "function": {"name": name, "arguments": arguments}}]})

    def more(index: int, arguments: str) -> dict[str, Any]:
        return choice(index, {"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]})

    chunks = [
        choices_chunk(choice(0, {"role": "assistant", "content": None}),
                      choice(1, {"role": "assistant", "content": None})),
        choices_chunk(calls(1, "call_b", "get_time", '{"ci')),
        choices_chunk(calls(0, "call_a", "get_weather", '{"ci')),
        choices_chunk(more(1, 'ty": "Rome"}'), more(0, 'ty": "Oslo"}')),
        choices_chunk(choice(1, {}, "tool_calls"), choice(0, {}, "tool_calls")),
    ]
    for body in chunks:
        validate_chunk(body)
    model.push(raw(sse(chunks), headers={"Content-Type": "text/event-stream"}), reply("Sunny."))
    agent = make_fragola(model).agent("bot", tools=[get_weather, get_time],
                                      model_settings={"stream": True, "n": 2})

    state = await agent.user_message("Oslo weather")

    assert state.messages[1:3] == [
        asked(("call_a", "get_weather", {"city": "Oslo"})),
        answered("call_a", "Sunny in Oslo"),
    ]


@pytest.mark.parametrize("listening", [False, True], ids=["quiet", "listening"])
async def test_a_server_that_ignores_stream_true_is_heard_as_one_chunk(model, listening):
    # Some servers answer a streaming request with a plain completion: the reply is kept as if
    # it had been streamed, and a model_chunk listener hears it as one whole chunk.
    def script(ignore_stream: bool) -> list[Any]:
        return [
            tool_calls(call("get_weather", {"city": "Oslo"}, id="call_o"), content="Looking.",
                       ignore_stream=ignore_stream),
            reply("Sunny in Oslo.", ignore_stream=ignore_stream),
        ]

    fragola = make_fragola(model)
    model.push(*script(False))
    expected = await fragola.agent("plain", tools=[get_weather]).user_message("Oslo?")
    model.push(*script(True))
    agent = fragola.agent("bot", tools=[get_weather], model_settings=STREAM)
    heard: list[Any] = []
    if listening:
        agent.on_model_chunk(lambda e: heard.append(e))

    state = await agent.user_message("Oslo?")

    assert [r.get("stream") for r in model.requests] == [None, None, True, True]
    assert model.chunks == []  # the server never streamed
    assert state.messages == expected.messages
    assert state.messages[-1] == {"role": "assistant", "content": "Sunny in Oslo."}
    if listening:
        assert [(e.content, e.message) for e in heard] == [
            ("Looking.", state.messages[1]), ("Sunny in Oslo.", state.messages[3])]
        first = heard[0].chunk
        assert isinstance(first, ChatCompletionChunk)
        assert first.choices[0].delta.content == "Looking."
        assert first.choices[0].delta.tool_calls[0].function.name == "get_weather"
        assert first.choices[0].finish_reason == "tool_calls"
        assert heard[1].chunk.choices[0].finish_reason == "stop"


async def test_a_stream_labelled_as_json_is_still_read_as_a_stream(model):
    model.push(raw(sse([chunk({"role": "assistant", "content": "Str"}), chunk({"content": "eam"}),
                        chunk({}, "stop")]), headers={"Content-Type": "application/json"}))
    agent = make_fragola(model).agent("bot", model_settings=STREAM)
    pieces: list[str] = []
    agent.on_model_chunk(lambda e: pieces.append(e.content))

    state = await agent.user_message("hi")

    assert pieces == ["Str", "eam", ""]
    assert state.messages[-1] == {"role": "assistant", "content": "Stream"}


PRIVATE_KEYS = ["_fields_set", "_BaseModel__cls", "_private"]


@pytest.mark.parametrize("key", PRIVATE_KEYS)
async def test_chunks_holding_keys_the_chunk_model_cannot_take_still_reach_a_listener(model, key):
    # openai's ChatCompletionChunk.construct(**chunk) breaks on some such keys, at any depth.
    odd = {key: [1]}
    chunks = [
        {**chunk({"role": "assistant", "content": ""}), **odd},
        chunk({"content": "Hel", **odd}),
        {**chunk({}), "choices": [{**choice(0, {"content": "lo"}), **odd}]},
        chunk(part(0, id="call_a", type="function",
                   function={"name": "get_weather", "arguments": "", **odd}, **odd)),
        chunk(part(0, function={"arguments": '{"city": "Oslo"}'})),
        {**chunk({}, "tool_calls"), "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                              "total_tokens": 2, **odd}},
    ]
    model.push(raw(sse(chunks), headers={"Content-Type": "text/event-stream"}), reply("Sunny."))
    agent = make_fragola(model).agent("bot", tools=[get_weather], model_settings=STREAM)
    heard: list[Any] = []
    agent.on_model_chunk(lambda e: heard.append(e.chunk))

    state = await agent.user_message("Oslo?")

    assert state.messages[1] == {"content": "Hello",
                                 **asked(("call_a", "get_weather", {"city": "Oslo"}))}
    # the second reply's usage chunk (choices: []) is not a chunk of the reply
    assert len(heard) == len(chunks) + len(model.chunks) - 1
    assert all(isinstance(c, ChatCompletionChunk) for c in heard)
    assert [c.choices[0].delta.content for c in heard[:3]] == ["", "Hel", "lo"]
    assert heard[3].choices[0].delta.tool_calls[0].function.name == "get_weather"
