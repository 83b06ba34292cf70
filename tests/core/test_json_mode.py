"""``agent.json``: structured output with a pydantic model or a raw JSON Schema."""

from __future__ import annotations

import json
from typing import Any

import openai
import pydantic
import pydantic.v1
import pytest
from support.helpers import make_fragola

from fragola_nb import JsonModeError, JsonResult, ModelError
from fragola_nb.models.scripted import fail, reply


class User(pydantic.BaseModel):
    name: str
    age: int
    tags: list[str]


USER_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}

PROMPT = "Extract info from: John Doe is 30 years old and likes skiing and coding."
JOHN = {"name": "John Doe", "age": 30, "tags": ["skiing", "coding"]}


async def test_pydantic_schema_sends_a_strict_json_schema_and_returns_an_instance(model):
    model.push(reply(json.dumps(JOHN)))
    agent = make_fragola(model).agent("extractor", instructions="Extract data.")

    result = await agent.json(PROMPT, schema=User)

    assert isinstance(result, JsonResult)
    assert result.success is True
    assert result.error is None
    assert result.data == User(name="John Doe", age=30, tags=["skiing", "coding"])
    assert isinstance(result.data, User)
    (request,) = model.requests
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "User",
            "strict": True,
            "schema": {
                "type": "object",
                "title": "User",
                "properties": {
                    "name": {"title": "Name", "type": "string"},
                    "age": {"title": "Age", "type": "integer"},
                    "tags": {"title": "Tags", "type": "array", "items": {"type": "string"}},
                },
                "required": ["name", "age", "tags"],
                "additionalProperties": False,
            },
        },
    }
    assert request["messages"] == [
        {"role": "system", "content": "Extract data."},
        {"role": "user", "content": PROMPT},
    ]


async def test_question_and_answer_are_kept_in_the_history(model):
    model.push(reply(json.dumps(JOHN)))
    agent = make_fragola(model).agent("extractor")

    result = await agent.json(PROMPT, schema=User)

    expected = [
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "content": json.dumps(JOHN)},
    ]
    assert result.state.messages == expected
    assert agent.state.messages == expected
    assert agent.status == "idle"


async def test_response_format_is_for_that_call_only(model):
    model.push(reply(json.dumps(JOHN)), reply("You are welcome."))
    agent = make_fragola(model).agent("extractor", model_settings={"temperature": 0})

    await agent.json(PROMPT, schema=User)
    await agent.user_message("Thanks!")

    assert "response_format" in model.requests[0]
    assert "response_format" not in model.requests[1]
    assert model.requests[1]["temperature"] == 0
    assert agent.options.model_settings == {"temperature": 0}


@pytest.mark.parametrize("schema", [USER_SCHEMA, json.dumps(USER_SCHEMA)], ids=["dict", "string"])
async def test_raw_json_schema_returns_dict_data(model, schema):
    model.push(reply('{"name": "Ada", "age": 36}'))
    agent = make_fragola(model).agent("extractor")

    result = await agent.json("Ada is 36.", schema=schema)

    assert result.success is True
    assert result.data == {"name": "Ada", "age": 36}
    assert type(result.data) is dict
    response_format = model.requests[0]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["schema"] == USER_SCHEMA


async def test_json_not_matching_a_pydantic_schema_is_a_failed_result(model):
    model.push(reply('{"name": "John", "age": "thirty", "tags": []}'))
    agent = make_fragola(model).agent("extractor")

    result = await agent.json(PROMPT, schema=User)

    assert result.success is False
    assert result.data is None
    assert "age" in result.error
    assert result.state.messages[-1] == {
        "role": "assistant",
        "content": '{"name": "John", "age": "thirty", "tags": []}',
    }


async def test_json_not_matching_a_raw_schema_is_a_failed_result(model):
    model.push(reply('{"name": "Ada"}'))
    agent = make_fragola(model).agent("extractor")

    result = await agent.json("Ada is 36.", schema=USER_SCHEMA)

    assert result.success is False
    assert result.data is None
    assert "'age' is a required property" in result.error


async def test_text_that_is_not_json_raises_json_mode_error(model):
    model.push(reply("Sorry, I cannot do that."))
    agent = make_fragola(model).agent("extractor")

    with pytest.raises(JsonModeError, match="not JSON"):
        await agent.json(PROMPT, schema=User)

    assert agent.status == "idle"
    assert agent.state.messages == [
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "content": "Sorry, I cannot do that."},
    ]


async def test_api_failure_raises_json_mode_error_caused_by_the_openai_error(model):
    model.push(fail(500, "the server melted"))
    agent = make_fragola(model).agent("extractor")

    with pytest.raises(JsonModeError) as caught:
        await agent.json(PROMPT, schema=User)

    chain: list[BaseException] = []
    error: BaseException | None = caught.value
    while error is not None:
        chain.append(error)
        error = error.__cause__
    assert any(isinstance(e, ModelError) for e in chain)
    assert any(isinstance(e, openai.InternalServerError) for e in chain)
    assert "the server melted" in str(caught.value)
    assert agent.status == "idle"
    # the question stays; the next call works
    assert agent.state.messages == [{"role": "user", "content": PROMPT}]
    model.push(reply("Hello."))
    state = await agent.user_message("Hi")
    assert state.messages[-1] == {"role": "assistant", "content": "Hello."}


async def test_user_message_listeners_run_by_default(model):
    model.push(reply(json.dumps(JOHN)))
    agent = make_fragola(model).agent("extractor")
    seen: list[str] = []

    @agent.on_user_message
    def tag(event):
        seen.append(event.message["content"])
        return {**event.message, "content": "[moderated] " + event.message["content"]}

    await agent.json(PROMPT, schema=User, ignore_user_message_events=False)

    assert seen == [PROMPT]
    assert model.requests[0]["messages"][-1] == {
        "role": "user",
        "content": "[moderated] " + PROMPT,
    }
    assert agent.state.messages[0] == {"role": "user", "content": "[moderated] " + PROMPT}


async def test_ignore_user_message_events_skips_those_listeners(model):
    model.push(reply(json.dumps(JOHN)))
    agent = make_fragola(model).agent("extractor")
    seen: list[str] = []
    other_events: list[str] = []

    @agent.on_user_message
    def tag(event):
        seen.append(event.message["content"])
        return {**event.message, "content": "[moderated]"}

    agent.on_ai_message(lambda e: other_events.append("ai_message"))

    result = await agent.json(PROMPT, schema=User, ignore_user_message_events=True)

    assert seen == []
    assert other_events == ["ai_message"]  # only the user message events are skipped
    assert result.success is True
    assert model.requests[0]["messages"][-1] == {"role": "user", "content": PROMPT}
    assert agent.state.messages[0] == {"role": "user", "content": PROMPT}


@pytest.mark.parametrize(
    "schema",
    [
        "{not json",
        '{"type": "object", "properties": {"age": {"type": "integr"}}}',
        {"type": "object", "required": "name"},
        42,
    ],
    ids=["not-json", "unknown-type", "bad-required", "not-a-schema"],
)
async def test_a_broken_schema_raises_json_mode_error_before_any_request(model, schema):
    agent = make_fragola(model).agent("extractor")

    with pytest.raises(JsonModeError):
        await agent.json(PROMPT, schema=schema)

    assert model.requests == []
    assert agent.state.messages == []
    assert agent.status == "idle"


class Opaque:
    """A type pydantic accepts as a field but cannot describe in JSON Schema."""


class Unschemable(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    value: Opaque


async def test_a_pydantic_model_without_a_json_schema_raises_json_mode_error(model):
    agent = make_fragola(model).agent("extractor")

    with pytest.raises(JsonModeError, match="unusable schema") as caught:
        await agent.json(PROMPT, schema=Unschemable)

    assert isinstance(caught.value.__cause__, pydantic.PydanticUserError)
    assert model.requests == []
    assert agent.state.messages == []


async def test_json_data_of_nested_models(model):
    class Address(pydantic.BaseModel):
        city: str

    class Person(pydantic.BaseModel):
        name: str
        address: Address

    model.push(reply('{"name": "Ada", "address": {"city": "London"}}'))
    agent = make_fragola(model).agent("extractor")

    result: JsonResult[Any] = await agent.json("Ada lives in London.", schema=Person)

    assert result.data == Person(name="Ada", address=Address(city="London"))
    schema = model.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["name", "address"]


async def test_json_mode_while_streaming(model):
    model.push(reply(json.dumps(JOHN)))
    agent = make_fragola(model).agent("extractor", model_settings={"stream": True})
    pieces: list[str] = []
    agent.on_model_chunk(lambda e: pieces.append(e.content))

    result = await agent.json(PROMPT, schema=User)

    assert result.success is True
    assert result.data == User(**JOHN)
    assert "".join(pieces) == json.dumps(JOHN)
    assert model.requests[0]["stream"] is True
    assert model.requests[0]["response_format"]["type"] == "json_schema"


class LegacyUser(pydantic.v1.BaseModel):
    name: str
    age: int


async def test_pydantic_v1_schema_is_sent_non_strict_and_returns_an_instance(model):
    model.push(reply(json.dumps({"name": "Ada", "age": 36})))
    agent = make_fragola(model).agent("extractor")
    result = await agent.json("Ada is 36", schema=LegacyUser)
    assert result.success and isinstance(result.data, LegacyUser)
    assert (result.data.name, result.data.age) == ("Ada", 36)
    response_format = model.requests[0]["response_format"]
    assert response_format["json_schema"]["strict"] is False
    assert response_format["json_schema"]["schema"]["required"] == ["name", "age"]


async def test_pydantic_v1_schema_mismatch_is_a_failed_result(model):
    model.push(reply(json.dumps({"name": "Ada", "age": "old"})))
    result = await make_fragola(model).agent("extractor").json("Ada", schema=LegacyUser)
    assert not result.success and "age" in (result.error or "")
