"""``model_settings`` reach the wire as ``chat.completions.create()`` would send them.

fragola_nb sends through the client's ``post()`` (see ``fragola_nb.models.client``), so what
``create()`` does with its keyword arguments is done here: body fields go into the JSON body,
``extra_headers``/``extra_query``/``extra_body``/``timeout`` become request options, and what
``create()`` would refuse is refused before anything is sent.
"""

from __future__ import annotations

import time
from typing import Any

import pydantic
import pytest
from support.helpers import make_fragola

from fragola_nb import Agent, BadUsage, Fragola, ModelTimeout
from fragola_nb.core.events import ModelInvocationEvent
from fragola_nb.models.scripted import ScriptedModel, hang, reply


def make_agent(model: ScriptedModel, **settings: Any) -> Agent:
    return make_fragola(model).agent("a", model_settings=settings)


async def test_body_fields_and_request_options_go_where_create_puts_them(
    model: ScriptedModel,
) -> None:
    model.push(reply("hi"))
    agent = make_agent(
        model, temperature=0.25, seed=7, metadata={"lesson": "1"},
        extra_headers={"X-Trace": "trace-7", "X-Api-Key": "sk-extra"},
        extra_query={"tenant": "t1"},
        extra_body={"custom_field": [1, 2]},
    )
    await agent.user_message("hello")

    body = model.requests[0]
    assert body["temperature"] == 0.25 and body["seed"] == 7
    assert body["metadata"] == {"lesson": "1"}
    assert body["custom_field"] == [1, 2]  # extra_body is merged into the JSON body
    assert not {"extra_headers", "extra_query", "extra_body", "timeout"} & body.keys()
    assert model.headers[0]["x-trace"] == "trace-7"
    assert model.headers[0]["authorization"] == "Bearer [redacted]"  # sent, not recorded
    assert model.headers[0]["x-api-key"] == "[redacted]"
    assert "test-key" not in str(model.headers) and "sk-extra" not in str(model.headers)
    assert model.targets[0] == "/v1/chat/completions?tenant=t1"


async def test_the_request_is_the_body_create_would_send(model: ScriptedModel) -> None:
    # the same agent request through the official create() and through fragola_nb
    model.push(reply("one"), reply("two"))
    agent = make_agent(model, temperature=0, stop=["END"], max_completion_tokens=20)
    await agent.user_message("same request")
    sent = dict(model.requests[0])
    async with agent.fragola._model.client() as client:
        await client.chat.completions.create(**sent)
    assert model.requests[1] == sent
    assert model.headers[1].keys() == model.headers[0].keys()


async def test_a_per_request_timeout_ends_a_hanging_call(model: ScriptedModel) -> None:
    model.push(hang(), reply("after the timeout"))
    agent = make_agent(model, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(ModelTimeout):
        await agent.user_message("are you there?")
    assert time.monotonic() - started < 5
    model.release()
    state = await agent.step()
    assert state.messages[-1]["content"] == "after the timeout"


def test_unknown_settings_are_refused_by_name_when_the_agent_is_made(
    model: ScriptedModel,
) -> None:
    fragola = Fragola(api_key="test-key", base_url=model.base_url)
    with pytest.raises(BadUsage, match=r"'temprature'.*extra_body"):
        fragola.agent("a", model_settings={"temprature": 0.2})
    with pytest.raises(BadUsage, match="messages"):
        fragola.agent("a", model_settings={"messages": []})


async def test_a_setting_added_by_a_listener_is_checked_before_sending(
    model: ScriptedModel,
) -> None:
    model.push(reply("fine"))
    agent = make_agent(model)
    add_typo = True

    @agent.on_before_model_invocation
    def tweak(event: ModelInvocationEvent) -> dict[str, Any]:
        if add_typo:
            return {**event.config, "max_token": 5}
        return event.config

    with pytest.raises(BadUsage, match="'max_token'"):
        await agent.user_message("hello")
    assert model.requests == []  # nothing went out
    assert agent.state.messages == [{"role": "user", "content": "hello"}]
    add_typo = False
    state = await agent.step()
    assert state.messages[-1] == {"role": "assistant", "content": "fine"}


async def test_a_pydantic_class_as_response_format_points_to_json_mode(
    model: ScriptedModel,
) -> None:
    class City(pydantic.BaseModel):
        name: str

    fragola = Fragola(api_key="test-key", base_url=model.base_url)
    with pytest.raises(BadUsage, match=r"agent\.json"):
        fragola.agent("a", model_settings={"response_format": City})
    agent = fragola.agent("b", model_settings={"response_format": {"type": "json_object"}})
    model.push(reply('{"name": "Oslo"}'))
    await agent.user_message("a city, as JSON")
    assert model.requests[0]["response_format"] == {"type": "json_object"}


async def test_a_listener_returning_something_else_than_the_config_is_told_so(
    model: ScriptedModel,
) -> None:
    model.push(reply("fine"))
    agent = make_agent(model)
    wrong = agent.on_before_model_invocation(lambda event: event)  # the event, not its config
    with pytest.raises(BadUsage, match="return the config dict"):
        await agent.user_message("hello")
    assert model.requests == []
    agent.off("before_model_invocation", wrong)
    state = await agent.step()
    assert state.messages[-1] == {"role": "assistant", "content": "fine"}


class Extracted(pydantic.BaseModel):
    city: str
    population: int


async def test_the_request_transform_post_skips_would_change_nothing_sent(
    model: ScriptedModel,
) -> None:
    # create() runs every body through the openai client's maybe_transform; fragola_nb posts
    # the body as it is. That is lossless only while the transform is an identity on what
    # fragola_nb sends: checked here on requests of every shape it makes, so that an openai
    # release adding an alias or a format to a Chat Completions field fails this test.
    from openai._utils import maybe_transform
    from openai.types.chat import completion_create_params as params

    from fragola_nb import tool
    from fragola_nb.models.scripted import call, tool_calls

    @tool(require_approval=True)
    def add(x: int, y: int) -> int:
        """Add two numbers."""
        return x + y

    agent = make_fragola(model).agent(
        "wide", instructions=["Be exact.", "Use tools."], use_developer_role=True, tools=[add],
        model_settings={"temperature": 0.5, "seed": 1, "stop": ["END"], "metadata": {"k": "v"},
                        "max_completion_tokens": 50, "tool_choice": "auto",
                        "parallel_tool_calls": True, "user": "teacher-1"},
    )
    model.push(tool_calls(call("add", {"x": 1, "y": 2}), content="Adding."), reply("3"))
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
    await agent.user_message([{"type": "text", "text": "look"}, image])
    agent.approve(agent.pending[0].id, {"x": 1, "y": 2})
    await agent.step()
    streaming = agent.fork("streaming")
    streaming.options.model_settings.update(stream=True, stream_options={"include_usage": True})
    model.push(tool_calls(call("add", {"x": 2, "y": 2})))
    await streaming.user_message("again")
    streaming.reject(streaming.pending[0].id, "no")
    model.push(reply("fine"))
    await streaming.step()
    model.push(reply('{"city": "Oslo", "population": 700000}'),
               reply('{"city": "Oslo", "population": 700000}'))
    await agent.json("a city", Extracted)
    await agent.json("a city", {"type": "object", "properties": {"city": {"type": "string"}}})

    assert len(model.requests) == 6
    for body in model.requests:
        shape = (params.CompletionCreateParamsStreaming if body.get("stream")
                 else params.CompletionCreateParamsNonStreaming)
        assert maybe_transform(body, shape) == body
