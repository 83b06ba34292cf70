"""``agent.json`` against the real llama.cpp server (llama-cpp-python), which refuses
structured outputs: every strategy that it supports, and "auto" finding one.

SmolLM2-135M is tiny, so the tests assert what the grammar guarantees (a valid instance of
the schema) and what fragola_nb does (requests, history, the next turn), not the model's
judgement.
"""

from __future__ import annotations

import pydantic
import pytest

from fragola_nb import Fragola, JsonModeError
from fragola_nb.core.jsonshapes import RECEIVED

SETTINGS = {"temperature": 0, "max_tokens": 80}


class Person(pydantic.BaseModel):
    name: str
    age: int


def check_valid_history(messages: list[dict]) -> None:
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            open_calls.remove(message["tool_call_id"])
        else:
            assert not open_calls
            open_calls = {c["id"] for c in message.get("tool_calls") or ()}
    assert not open_calls


async def test_json_object_is_the_local_default_and_gives_a_valid_instance(local: Fragola) -> None:
    agent = local.agent("extractor", instructions="Extract the person.", model_settings=SETTINGS)

    result = await agent.json("Ada Lovelace is 36 years old.", Person)

    assert local.json_mode == "json_object"
    assert result.success, result.error
    assert isinstance(result.data, Person) and result.json_mode == "json_object"
    stored = result.state.messages[-1]
    assert stored["role"] == "assistant"
    assert Person.model_validate_json(stored["content"]) == result.data


async def test_auto_meets_the_refusal_of_json_schema_and_falls_back_once(local: Fragola) -> None:
    fragola = Fragola.local(json_mode="auto", max_retries=0, timeout=120)
    try:
        assert fragola.local_server is not None and local.local_server is not None
        assert fragola.base_url == local.base_url  # the same server, reused
        agent = fragola.agent("auto", model_settings=SETTINGS)

        result = await agent.json("Grace Hopper is 85 years old.", Person)

        assert result.success, result.error
        assert result.json_mode == "json_object"
        assert fragola.json_modes == {agent.model: "json_object"}
        assert [m["role"] for m in result.state.messages] == ["user", "assistant"]

        again = await agent.json("Alan Turing is 41 years old.", Person)
        assert again.success and again.json_mode == "json_object"
    finally:
        await fragola.aclose()
    assert local.local_server.running  # the session's handle keeps the server


async def test_an_explicit_json_schema_is_one_clear_error_and_the_agent_goes_on(
    local: Fragola,
) -> None:
    agent = local.agent("strict", model_settings=SETTINGS)

    with pytest.raises(JsonModeError) as caught:
        await agent.json("Ada is 36.", Person, json_mode="json_schema")

    assert "response_format" in str(caught.value) and "\n" not in str(caught.value)
    assert [m["role"] for m in agent.state.messages] == ["user"]
    state = await agent.user_message("Say hello.")
    assert state.outcome == "finished" and state.messages[-1]["content"]


async def test_tool_strategy_is_a_forced_call_and_the_next_turn_works(local: Fragola) -> None:
    agent = local.agent("tooled", instructions="Extract the person.", model_settings=SETTINGS)

    result = await agent.json("Ada Lovelace is 36 years old.", Person, json_mode="tool")

    assert result.success, result.error
    assert isinstance(result.data, Person) and result.json_mode == "tool"
    call_message, answer = result.state.messages[-2:]
    (call,) = call_message["tool_calls"]
    assert call["function"]["name"] == "Person"
    assert answer == {"role": "tool", "tool_call_id": call["id"], "content": RECEIVED}
    check_valid_history(result.state.messages)
    # The history with a tool call is a request the server (and SmolLM2's template) accepts.
    state = await agent.user_message("Thank you. Say goodbye.")
    assert state.outcome == "finished"
    assert isinstance(state.messages[-1]["content"], str) and state.messages[-1]["content"]


@pytest.mark.parametrize("mode", ["json_object", "tool"])
async def test_streamed_json_gives_the_same_answer(local: Fragola, mode: str) -> None:
    plain = local.agent("plain", model_settings=SETTINGS)
    streamed = local.agent("streamed", model_settings={**SETTINGS, "stream": True})
    chunks: list[str] = []
    streamed.on_model_chunk(lambda event: chunks.append(event.content or ""))

    one = await plain.json("Ada Lovelace is 36 years old.", Person, json_mode=mode)
    two = await streamed.json("Ada Lovelace is 36 years old.", Person, json_mode=mode)

    assert one.success and two.success
    assert one.data == two.data
    assert len(chunks) > 1
