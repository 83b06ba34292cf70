"""The scripted model, driven through the real ``openai.AsyncOpenAI`` over loopback HTTP.

The ``model`` fixture checks all traffic against the official OpenAI schemas at teardown.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import time
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import openai
import pytest

from fragola_nb.models.scripted import (
    ScriptedModel,
    call,
    demo_brain,
    drop,
    fail,
    hang,
    raw,
    reply,
    tool_calls,
)

USER = [{"role": "user", "content": "Hi there"}]


async def ask(client: openai.AsyncOpenAI, **kwargs: Any) -> Any:
    kwargs.setdefault("messages", USER)
    return await client.chat.completions.create(model="gpt-test", **kwargs)


async def collect(stream: Any) -> list[Any]:
    return [chunk async for chunk in stream]


def assemble_tool_calls(chunks: list[Any]) -> dict[int, dict[str, str]]:
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or ():
                entry = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += tc.id or ""
                entry["name"] += (tc.function and tc.function.name) or ""
                entry["arguments"] += (tc.function and tc.function.arguments) or ""
    return calls


# -- replies and tool calls ----------------------------------------------------------------


@pytest.mark.asyncio
async def test_non_stream_reply_is_a_chat_completion(model, client):
    model.push(reply("Hello there, friend"))
    result = await ask(client)

    assert result.object == "chat.completion"
    assert result.model == "gpt-test"
    assert result.id == "chatcmpl-1"
    choice = result.choices[0]
    assert (choice.message.role, choice.message.content) == ("assistant", "Hello there, friend")
    assert choice.finish_reason == "stop"
    assert choice.message.tool_calls is None
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (2, 3)
    assert model.responses[0]["choices"][0]["message"]["content"] == "Hello there, friend"
    assert model.pending == 0


@pytest.mark.asyncio
async def test_stream_reply_arrives_in_pieces_and_reassembles(model, client):
    text = "Streaming is fun when it arrives in pieces."
    model.push(reply(text))
    chunks = await collect(await ask(client, stream=True, stream_options={"include_usage": True}))

    content = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert "".join(content) == text
    assert len(content) == -(-len(text) // 4)  # chunk_size=4
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == len(text.split())
    assert len({c.id for c in chunks}) == 1
    assert model.chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}


@pytest.mark.asyncio
async def test_chunk_delay_spreads_the_stream_over_time():
    delay = 0.05
    with ScriptedModel([reply("0123456789ab")], chunk_size=4, chunk_delay=delay) as slow:
        slow_client = slow.client()
        arrivals = []
        async for _ in await ask(slow_client, stream=True):
            arrivals.append(time.monotonic())
        await slow_client.close()
    # role + 3 content + finish chunks: the server waits `delay` before each of the last four,
    # and the first chunk is not held back until the end.
    assert len(arrivals) == 5
    assert arrivals[-1] - arrivals[0] >= 2 * delay


@pytest.mark.asyncio
async def test_several_tool_calls_at_once(model, client):
    model.push(tool_calls(call("get_weather", {"city": "Paris"}), call("get_time", {"tz": "CET"})))
    result = await ask(client)

    choice = result.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    got = [(t.id, t.type, t.function.name, t.function.arguments) for t in choice.message.tool_calls]
    assert got == [
        ("call_1", "function", "get_weather", '{"city": "Paris"}'),
        ("call_2", "function", "get_time", '{"tz": "CET"}'),
    ]


@pytest.mark.asyncio
async def test_several_tool_calls_streamed_assemble_by_index(model, client):
    model.push(
        tool_calls(
            call("search", {"query": "long enough to split"}, id="call_a"),
            call("lookup", {"key": 42}),
            content="Let me check.",
        )
    )
    chunks = await collect(await ask(client, stream=True))

    assert assemble_tool_calls(chunks) == {
        0: {"id": "call_a", "name": "search", "arguments": '{"query": "long enough to split"}'},
        1: {"id": "call_1", "name": "lookup", "arguments": '{"key": 42}'},
    }
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == "Let me check."
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    argument_pieces = [c for c in chunks if c.choices[0].delta.tool_calls]
    assert len(argument_pieces) > 4  # arguments really are streamed in pieces


@pytest.mark.asyncio
async def test_tool_call_ids_are_unique_across_requests(model, client):
    model.push(tool_calls(call("a", {})), tool_calls(call("b", {}), call("c", {})))
    first, second = await ask(client), await ask(client)
    ids = [t.id for r in (first, second) for t in r.choices[0].message.tool_calls]
    assert ids == ["call_1", "call_2", "call_3"]


@pytest.mark.asyncio
async def test_malformed_arguments_are_sent_verbatim(model, client):
    broken = '{"city": "Par'
    model.push(tool_calls(call("get_weather", broken)), tool_calls(call("get_weather", broken)))

    result = await ask(client)
    assert result.choices[0].message.tool_calls[0].function.arguments == broken
    streamed = assemble_tool_calls(await collect(await ask(client, stream=True)))
    assert streamed[0]["arguments"] == broken


# -- failures ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_fail_429_raises_rate_limit_error(model, client):
    model.push(fail(429, "Slow down, please", headers={"Retry-After": "0"}, code="rate_limit"))
    with pytest.raises(openai.RateLimitError, match="Slow down, please") as caught:
        await ask(client)
    assert caught.value.status_code == 429
    assert caught.value.code == "rate_limit"
    assert caught.value.type == "rate_limit_error"
    assert caught.value.response.headers["retry-after"] == "0"


@pytest.mark.asyncio
async def test_fail_500_raises_internal_server_error(model, client):
    model.push(fail(500, "The engine is on fire"))
    with pytest.raises(openai.InternalServerError, match="The engine is on fire") as caught:
        await ask(client)
    assert caught.value.type == "server_error"


@pytest.mark.asyncio
async def test_client_retries_consume_script_items(model):
    # Retry-After: 0 is ignored by openai (it backs off ~0.5 s); retry-after-ms is honoured.
    quick = {"retry-after-ms": "1"}
    model.push(fail(500, headers=quick), fail(429, headers=quick), reply("third time lucky"))
    retrying = model.client(max_retries=2)
    result = await ask(retrying)
    await retrying.close()
    assert result.choices[0].message.content == "third time lucky"
    assert len(model.requests) == 3


@pytest.mark.asyncio
async def test_hang_times_out_and_the_server_keeps_answering(model, client):
    model.push(hang(), reply("still here"))
    with pytest.raises(openai.APITimeoutError):
        await ask(client, timeout=0.2)
    result = await ask(client)
    assert result.choices[0].message.content == "still here"


@pytest.mark.asyncio
async def test_release_answers_every_hanging_request(model, client):
    def answer(request: dict[str, Any]) -> Any:
        return reply("released " + request["messages"][-1]["content"])

    model.push(hang(then=answer), hang(then=answer))
    tasks = [
        asyncio.create_task(ask(client, messages=[{"role": "user", "content": name}]))
        for name in ("one", "two")
    ]
    assert await asyncio.to_thread(model.wait_for_requests, 2)
    assert not any(task.done() for task in tasks)
    model.release()
    answers = [(await task).choices[0].message.content for task in tasks]
    assert answers == ["released one", "released two"]


@pytest.mark.asyncio
async def test_release_without_then_answers_504(model, client):
    model.push(hang())
    pending = asyncio.create_task(ask(client))
    assert await asyncio.to_thread(model.wait_for_requests, 1)
    model.release()
    with pytest.raises(openai.InternalServerError, match="hang released") as caught:
        await pending
    assert caught.value.status_code == 504


@pytest.mark.asyncio
async def test_timed_hang_answers_504(model, client):
    model.push(hang(0.05))
    with pytest.raises(openai.InternalServerError, match="hang timed out") as caught:
        await ask(client)
    assert caught.value.status_code == 504


@pytest.mark.asyncio
async def test_stop_closes_hanging_requests():
    scripted = ScriptedModel([hang()]).start()
    hanging_client = scripted.client()
    pending = asyncio.create_task(ask(hanging_client))
    assert await asyncio.to_thread(scripted.wait_for_requests, 1)
    await asyncio.wait_for(asyncio.to_thread(scripted.stop), timeout=5)
    with pytest.raises(openai.APIConnectionError):
        await pending
    await hanging_client.close()


@pytest.mark.asyncio
async def test_drop_raises_connection_error(model, client):
    model.push(drop(), reply("back"))
    with pytest.raises(openai.APIConnectionError):
        await ask(client)
    assert (await ask(client)).choices[0].message.content == "back"


@pytest.mark.asyncio
async def test_raw_malformed_json_escapes_as_a_json_decode_error(model, client):
    # openai 3.x parses a 200 JSON body without wrapping the failure in an openai error.
    model.push(raw(b"{not json"))
    with pytest.raises(json.JSONDecodeError):
        await ask(client)


@pytest.mark.asyncio
async def test_stream_cut_yields_the_sent_chunks_then_raises(model, client):
    model.push(reply("This stream will be cut short", stream_cut_after=3))
    received = []
    with pytest.raises(openai.APIConnectionError):
        async for chunk in await ask(client, stream=True):
            received.append(chunk.choices[0].delta.content)
    assert received == ["", "This", " str"]
    assert len(model.chunks) == 3


@pytest.mark.asyncio
async def test_stream_cut_is_ignored_without_streaming(model, client):
    model.push(reply("whole", stream_cut_after=1))
    assert (await ask(client)).choices[0].message.content == "whole"


def test_ignore_stream_answers_a_streaming_request_with_plain_json(model):
    model.push(reply("whole", ignore_stream=True),
               tool_calls(call("add", {"a": 1}, id="c1"), ignore_stream=True))
    connection = http.client.HTTPConnection("127.0.0.1", urlsplit(model.base_url).port)
    body = json.dumps({"model": "m", "messages": USER, "stream": True})
    answers = []
    for _ in range(2):
        connection.request("POST", "/v1/chat/completions", body=body,
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.getheader("Content-Type") == "application/json"
        answers.append(json.loads(response.read()))
    connection.close()
    assert model.chunks == []
    assert answers == model.responses
    assert answers[0]["choices"][0]["message"]["content"] == "whole"
    assert answers[1]["choices"][0]["message"]["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    ]


# -- script mechanics ----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_callable_items_see_the_request(model, client):
    model.push(lambda request: reply(request["messages"][-1]["content"].upper()))
    result = await ask(client, messages=[{"role": "user", "content": "shout this"}])
    assert result.choices[0].message.content == "SHOUT THIS"


@pytest.mark.asyncio
async def test_a_raising_callable_becomes_a_500(model, client):
    model.push(lambda request: request["nope"])
    with pytest.raises(openai.InternalServerError, match="script callable raised KeyError"):
        await ask(client)


@pytest.mark.asyncio
async def test_exhausted_script_fails_clearly(model):
    # One line with the fix, a 409 the client is told not to retry (not a 500 it retries).
    model.push(reply("only one"))
    async with model.client(max_retries=2) as client:
        await ask(client)
        with pytest.raises(openai.ConflictError) as caught:
            await ask(client)
    assert caught.value.body["message"] == (
        "the scripted model used all 1 scripted answer: re-run the cell that builds the "
        "script, or pass brain=demo_brain to ScriptedModel(...) to answer after it"
    )
    assert caught.value.code == "script_exhausted"
    assert len(model.requests) == 2  # not retried


@pytest.mark.asyncio
async def test_the_run_out_line_names_the_call_the_user_made() -> None:
    """``ScriptedModel()`` with no script once said "used all 0 scripted answers ... pass
    brain=demo_brain to Fragola.scripted(...)": a call the user never made. Each maker is
    named as the user called it, and an empty script says it has none."""
    from fragola_nb import Fragola

    with ScriptedModel() as bare:
        async with bare.client() as client:
            with pytest.raises(openai.ConflictError) as caught:
                await ask(client)
    assert caught.value.body["message"] == (
        "the scripted model has no scripted answer: give it a script, or pass "
        "brain=demo_brain to ScriptedModel(...) to answer every request")

    fragola = Fragola.scripted([reply("only one")])
    assert fragola.scripted_model is not None
    try:
        async with fragola.scripted_model.client() as client:
            await ask(client)
            with pytest.raises(openai.ConflictError) as caught:
                await ask(client)
    finally:
        fragola.scripted_model.stop()
    assert caught.value.body["message"] == (
        "the scripted model used all 1 scripted answer: re-run the cell that builds the "
        "script, or pass brain=demo_brain to Fragola.scripted(...) to answer after it")


@pytest.mark.asyncio
async def test_requests_are_recorded_as_sent(model, client):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    model.push(reply("a"), reply("b"))
    await ask(client, tools=tools, temperature=0.5)
    await ask(client, messages=[{"role": "system", "content": "Be brief"}, *USER], stream=True)

    assert model.requests[0] == {
        "messages": USER,
        "model": "gpt-test",
        "temperature": 0.5,
        "tools": tools,
    }
    assert model.requests[1]["stream"] is True
    assert model.requests[1]["messages"][0] == {"role": "system", "content": "Be brief"}


@pytest.mark.asyncio
async def test_wait_for_requests_waits_for_arrival(model, client):
    assert model.wait_for_requests(1, timeout=0.01) is False
    model.push(hang(then=reply("ok")))
    task = asyncio.create_task(ask(client))
    assert await asyncio.to_thread(model.wait_for_requests, 1)
    model.release()
    assert (await task).choices[0].message.content == "ok"


@pytest.mark.asyncio
async def test_two_hundred_concurrent_requests(model, client):
    def echo(request: dict[str, Any]) -> Any:
        return reply("echo " + request["messages"][-1]["content"])

    model.push(*[echo] * 200)

    async def one(i: int) -> str:
        messages = [{"role": "user", "content": f"message {i}"}]
        if i % 2:
            chunks = await collect(await ask(client, messages=messages, stream=True))
            return "".join(c.choices[0].delta.content or "" for c in chunks)
        return (await ask(client, messages=messages)).choices[0].message.content

    answers = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(200))), timeout=30)
    assert answers == [f"echo message {i}" for i in range(200)]
    assert model.pending == 0


@pytest.mark.asyncio
async def test_models_endpoint_and_unknown_paths(model, client):
    listed = await client.models.list()
    assert [m.id for m in listed.data] == ["scripted"]
    with pytest.raises(openai.NotFoundError, match="Invalid URL"):
        await client.embeddings.create(model="e", input="x")


def test_invalid_json_gets_400_and_streams_keep_the_connection(model):
    model.push(reply("kept alive"))
    connection = http.client.HTTPConnection("127.0.0.1", urlsplit(model.base_url).port)
    headers = {"Content-Type": "application/json"}
    connection.request("POST", "/v1/chat/completions", body=b"{not json", headers=headers)
    bad = connection.getresponse()
    assert bad.status == 400
    assert json.loads(bad.read())["error"]["type"] == "invalid_request_error"
    socket_before = connection.sock

    body = json.dumps({"model": "m", "messages": USER, "stream": True})
    connection.request("POST", "/v1/chat/completions", body=body, headers=headers)
    streamed = connection.getresponse()
    assert streamed.getheader("Transfer-Encoding") == "chunked"
    assert streamed.read().decode().endswith("data: [DONE]\n\n")
    assert connection.sock is socket_before  # same TCP connection both times
    connection.close()


# -- demo_brain ----------------------------------------------------------------------------

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city", "days"],
        },
    },
}
STOCK = {
    "type": "function",
    "function": {
        "name": "lookupStockPrice",
        "parameters": {"type": "object", "properties": {"symbol": {"type": "string"}}},
    },
}


def brain_args(request: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    item = demo_brain(request)
    (only,) = item.calls
    return only.name, json.loads(only.arguments)


def test_demo_brain_picks_the_tool_matching_the_user_words():
    request = {
        "messages": [{"role": "user", "content": "What's the weather in Paris for 3 days?"}],
        "tools": [STOCK, WEATHER],
    }
    assert brain_args(request) == ("get_weather", {"city": "Paris", "days": 3})


def test_demo_brain_splits_camel_case_and_prefers_quoted_text():
    request = {
        "messages": [{"role": "user", "content": 'Check the stock price of "ACME Corp"'}],
        "tools": [WEATHER, STOCK],
    }
    assert brain_args(request) == ("lookupStockPrice", {"symbol": "ACME Corp"})


def test_demo_brain_falls_back_to_a_word_for_string_arguments():
    request = {"messages": [{"role": "user", "content": "weather in lyon"}], "tools": [WEATHER]}
    assert brain_args(request) == ("get_weather", {"city": "lyon", "days": 0})


def test_demo_brain_replies_with_text_when_no_tool_matches():
    request = {"messages": [{"role": "user", "content": "Tell me a joke"}], "tools": [WEATHER]}
    assert demo_brain(request) == reply("(scripted model) You said: Tell me a joke")
    request["tool_choice"] = "none"
    request["messages"] = [{"role": "user", "content": "weather please"}]
    assert demo_brain(request) == reply("(scripted model) You said: weather please")


def test_demo_brain_generates_json_that_validates_against_the_schema():
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 0},
            "height": {"type": "number"},
            "member": {"type": "boolean"},
            "role": {"type": "string", "enum": ["admin", "user"]},
            "nickname": {"anyOf": [{"type": "null"}, {"type": "string"}]},
            "address": {"$ref": "#/$defs/Address"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "born": {"type": "string", "format": "date"},
        },
        "required": ["name", "age", "height", "member", "role", "nickname", "address", "tags"],
        "additionalProperties": False,
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "zip": {"type": ["integer", "null"]}},
                "required": ["city", "zip"],
                "additionalProperties": False,
            }
        },
    }
    request = {
        "messages": [
            {"role": "user", "content": "Extract: name is Ada, 36 years, 1.7 m, from London"}
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "Person", "schema": schema, "strict": True},
        },
    }
    data = json.loads(demo_brain(request).text)
    jsonschema.validate(data, schema)
    assert (data["name"], data["age"], data["height"]) == ("Ada", 36, 1.7)
    assert (data["role"], data["member"], data["address"]["zip"]) == ("admin", False, 0)
    assert data["address"]["city"] == "London"


def test_demo_brain_summarizes_tool_results_naming_each_tool():
    request = {
        "messages": [
            *USER,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "noon"}]},
        ],
        "tools": [WEATHER],
    }
    assert demo_brain(request).text == (
        "The tool get_weather returned: sunny. The tool get_time returned: noon."
    )


def test_demo_brain_echoes_multi_part_user_content():
    content = [
        {"type": "text", "text": "Look at"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "this"},
    ]
    request = {"messages": [{"role": "user", "content": content}]}
    assert demo_brain(request).text == "(scripted model) You said: Look at [image] this"


@pytest.mark.asyncio
async def test_demo_brain_drives_a_tool_round_trip_over_http(model, client):
    model.brain = demo_brain
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Rome for 2 days?"}]
    first = (await ask(client, messages=messages, tools=[WEATHER])).choices[0].message
    (tool_call,) = first.tool_calls
    assert json.loads(tool_call.function.arguments) == {"city": "Rome", "days": 2}

    messages.append(first.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": "warm"})
    second = await ask(client, messages=messages, tools=[WEATHER], stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in await collect(second))
    assert text == "The tool get_weather returned: warm."
