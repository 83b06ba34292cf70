"""``agent.json`` on servers without structured outputs: ``json_mode`` "json_object", "tool",
and "auto" falling back when a server refuses one (issue 13).

The scripted model plays the servers: ``model.refuse`` answers as llama-cpp-python's server
does for ``json_schema`` (HTTP 500, naming the field), as LM Studio does for ``json_object``
(HTTP 400).
Every request it sees is checked against the official request schema at teardown.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pydantic
import pytest
from support.helpers import assert_valid_history, make_fragola, until_async, user
from support.invariants import check_agent

from fragola_nb import BadUsage, Fragola, JsonModeError, tool
from fragola_nb.core.jsonshapes import NOT_RUN, RECEIVED
from fragola_nb.models.scripted import ScriptedModel, call, fail, hang, reply, tool_calls
from fragola_nb.models.scripted.refusals import check_refuse, refusal


class Person(pydantic.BaseModel):
    name: str
    age: int


PROMPT = "Ada Lovelace is 36."
ADA = {"name": "Ada Lovelace", "age": 36}


def strict_person() -> dict[str, Any]:
    from openai.lib._pydantic import to_strict_json_schema

    return to_strict_json_schema(Person)


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: the city
    """
    return city


def refusing(model: ScriptedModel, *what: str) -> ScriptedModel:
    model.refuse = check_refuse(what)
    return model


# -- json_object --------------------------------------------------------------------------------


async def test_json_object_sends_the_schema_in_the_field_and_in_the_instructions_of_the_request(
    model: ScriptedModel,
) -> None:
    model.push(reply(json.dumps(ADA)))
    agent = make_fragola(model, json_mode="json_object").agent("x", instructions="Extract.")

    result = await agent.json(PROMPT, Person)

    assert result.success and result.data == Person(**ADA)
    assert result.json_mode == "json_object"
    (request,) = model.requests
    assert request["response_format"] == {"type": "json_object", "schema": strict_person()}
    system = request["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("Extract.\n\nAnswer with one JSON object")
    assert json.dumps(strict_person()) in system["content"]
    # Only the request carries the note: the agent's instructions and history are untouched.
    assert agent.options.instructions == "Extract."
    assert result.state.messages == [user(PROMPT), {"role": "assistant",
                                                    "content": json.dumps(ADA)}]


async def test_json_object_without_instructions_adds_a_system_message_to_the_request_only(
    model: ScriptedModel,
) -> None:
    model.push(reply(json.dumps(ADA)))
    agent = make_fragola(model).agent("x")

    result = await agent.json(PROMPT, Person, json_mode="json_object")

    assert result.success
    messages = model.requests[0]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "JSON Schema" in messages[0]["content"]
    assert [m["role"] for m in agent.state.messages] == ["user", "assistant"]


async def test_developer_instructions_carry_the_note_in_their_own_role(
    model: ScriptedModel,
) -> None:
    model.push(reply(json.dumps(ADA)))
    agent = make_fragola(model).agent("x", instructions="Extract.", use_developer_role=True)

    await agent.json(PROMPT, Person, json_mode="json_object")

    first = model.requests[0]["messages"][0]
    assert first["role"] == "developer" and first["content"].startswith("Extract.\n\n")


# -- tool ---------------------------------------------------------------------------------------


async def test_tool_forces_one_call_whose_arguments_are_the_answer(model: ScriptedModel) -> None:
    model.push(tool_calls(call("Person", ADA, id="call_ada")))
    agent = make_fragola(model).agent("x", instructions="Extract.", tools=[lookup])

    result = await agent.json(PROMPT, Person, json_mode="tool")

    assert result.success and result.data == Person(**ADA) and result.json_mode == "tool"
    (request,) = model.requests
    assert request["tool_choice"] == {"type": "function", "function": {"name": "Person"}}
    names = [t["function"]["name"] for t in request["tools"]]
    assert names == ["lookup", "Person"]
    assert request["tools"][1]["function"]["parameters"] == strict_person()
    assert "response_format" not in request
    # The call is answered, so the history is a valid next request; the tool is not kept.
    assert result.state.messages[1:] == [
        {"role": "assistant", "tool_calls": [{"id": "call_ada", "type": "function", "function": {
            "name": "Person", "arguments": json.dumps(ADA)}}]},
        {"role": "tool", "tool_call_id": "call_ada", "content": RECEIVED},
    ]
    assert result.state.outcome == "finished"
    assert [t.name for t in agent.options.tools] == ["lookup"]
    check_agent(agent)
    model.push(reply("You are welcome."))
    state = await agent.user_message("Thanks")
    assert state.outcome == "finished"
    assert [t["function"]["name"] for t in model.requests[1]["tools"]] == ["lookup"]
    assert "tool_choice" not in model.requests[1]


async def test_tool_answer_beside_another_call_runs_only_the_answer(model: ScriptedModel) -> None:
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Note something.

        Args:
            text: what to note
        """
        ran.append(text)
        return "noted"

    model.push(tool_calls(call("note", {"text": "x"}, id="c1"),
                          call("Person", ADA, id="c2")))
    agent = make_fragola(model).agent("x", tools=[note])

    result = await agent.json(PROMPT, Person, json_mode="tool")

    assert result.success and ran == []
    assert_valid_history(result.state.messages)
    answers = {m["tool_call_id"]: m["content"] for m in result.state.messages
               if m["role"] == "tool"}
    assert answers == {"c1": NOT_RUN, "c2": RECEIVED}
    assert [m["tool_call_id"] for m in result.state.messages[2:]] == ["c1", "c2"]


async def test_tool_name_steps_aside_for_an_agent_tool_of_the_same_name(
    model: ScriptedModel,
) -> None:
    @tool(name="Person")
    def person(name: str) -> str:
        """Find a person.

        Args:
            name: who
        """
        return name

    model.push(tool_calls(call("json_Person", ADA)))
    agent = make_fragola(model).agent("x", tools=[person])

    result = await agent.json(PROMPT, Person, json_mode="tool")

    assert result.success
    assert model.requests[0]["tool_choice"]["function"]["name"] == "json_Person"


async def test_tool_mode_reads_a_json_text_answer_from_a_server_that_ignores_tool_choice(
    model: ScriptedModel,
) -> None:
    model.push(reply(json.dumps(ADA)))
    agent = make_fragola(model).agent("x")

    result = await agent.json(PROMPT, Person, json_mode="tool")

    assert result.success and result.data == Person(**ADA)


async def test_tool_mode_streams(model: ScriptedModel) -> None:
    model.push(tool_calls(call("Person", ADA)))
    agent = make_fragola(model).agent("x", model_settings={"stream": True})

    result = await agent.json(PROMPT, Person, json_mode="tool")

    assert result.success and result.data == Person(**ADA)
    assert model.requests[0]["stream"] is True


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "tool"])
async def test_every_strategy_validates_the_same_way(model: ScriptedModel, mode: str) -> None:
    wrong = {"name": "Ada", "age": "thirty-six"}
    model.push(tool_calls(call("Person", wrong)) if mode == "tool" else reply(json.dumps(wrong)))
    agent = make_fragola(model).agent("x")

    result = await agent.json(PROMPT, Person, json_mode=mode)

    assert result.success is False and result.data is None and result.json_mode == mode
    assert "age" in (result.error or "")


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "tool"])
async def test_every_strategy_raises_json_mode_error_on_text_that_is_not_json(
    model: ScriptedModel, mode: str
) -> None:
    model.push(tool_calls(call("Person", "{not json")) if mode == "tool"
               else reply("{not json"))
    agent = make_fragola(model).agent("x")

    with pytest.raises(JsonModeError, match="not JSON"):
        await agent.json(PROMPT, Person, json_mode=mode)
    check_agent(agent)


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "tool"])
async def test_the_demo_brain_answers_every_strategy(mode: str) -> None:
    fragola = Fragola.scripted()
    try:
        result = await fragola.agent("x").json(PROMPT, Person, json_mode=mode)
        assert result.success and result.data == Person(**ADA)
    finally:
        await fragola.aclose()


# -- auto ---------------------------------------------------------------------------------------


async def test_auto_falls_back_to_json_object_once_and_remembers_it(model: ScriptedModel) -> None:
    refusing(model, "json_schema")
    model.push(reply(json.dumps(ADA)), reply(json.dumps({"name": "Alan", "age": 41})))
    fragola = make_fragola(model)
    agent = fragola.agent("x", instructions="Extract.")

    result = await agent.json(PROMPT, Person)

    assert result.success and result.json_mode == "json_object"
    assert [r.get("response_format", {}).get("type") for r in model.requests] == [
        "json_schema", "json_object"]
    # The same turn went on: one user message, stored once, and the same messages sent.
    assert model.requests[0]["messages"][1:] == model.requests[1]["messages"][1:] == [user(PROMPT)]
    assert result.state.messages == [user(PROMPT), {"role": "assistant",
                                                    "content": json.dumps(ADA)}]
    assert fragola.json_modes == {fragola.model: "json_object"}

    again = await fragola.agent("y").json("Alan Turing is 41.", Person)

    assert again.data == Person(name="Alan", age=41)
    assert model.requests[2]["response_format"]["type"] == "json_object"
    assert len(model.requests) == 3


async def test_auto_goes_on_to_the_tool_when_json_object_is_refused_too(
    model: ScriptedModel,
) -> None:
    refusing(model, "json_schema", "json_object")
    model.push(tool_calls(call("Person", ADA)))
    fragola = make_fragola(model)

    result = await fragola.agent("x").json(PROMPT, Person)

    assert result.success and result.json_mode == "tool"
    assert len(model.requests) == 3
    assert fragola.json_modes == {fragola.model: "tool"}


async def test_stop_while_a_refused_request_is_in_flight_sends_no_other_strategy(
    model: ScriptedModel,
) -> None:
    refused = refusal({"response_format": {"type": "json_schema"}}, frozenset({"json_schema"}))
    model.push(hang(then=refused), reply(json.dumps(ADA)))
    fragola = make_fragola(model)
    agent = fragola.agent("x")
    asked = asyncio.create_task(agent.json(PROMPT, Person))
    await until_async(lambda: len(model.requests) == 1)

    agent.stop()
    model.release()

    with pytest.raises(JsonModeError, match="HTTP 500"):
        await asked
    assert len(model.requests) == 1  # stop() asked for no further request
    assert agent.status == "idle" and agent.state.messages == [user(PROMPT)]
    assert fragola.json_modes == {fragola.model: "json_object"}  # the refusal is remembered
    check_agent(agent)


async def test_auto_remembers_per_model(model: ScriptedModel) -> None:
    refusing(model, "json_schema")
    model.push(reply(json.dumps(ADA)))
    fragola = make_fragola(model)
    await fragola.agent("x").json(PROMPT, Person)
    model.refuse = frozenset()
    model.push(reply(json.dumps(ADA)))

    other = fragola.agent("y", model_settings={"model": "another-model"})
    result = await other.json(PROMPT, Person)

    assert result.json_mode == "json_schema"
    assert fragola.json_modes == {fragola.model: "json_object", "another-model": "json_schema"}


async def test_a_server_that_refuses_every_strategy_is_one_clear_error_and_nothing_is_lost(
    model: ScriptedModel,
) -> None:
    refusing(model, "json_schema", "json_object", "tool_choice")
    agent = make_fragola(model).agent("x")

    with pytest.raises(JsonModeError) as caught:
        await agent.json(PROMPT, Person)

    message = str(caught.value)
    assert message.startswith("the model API failed during agent.json (tool)")
    assert "\n" not in message
    assert len(model.requests) == 3
    assert agent.state.messages == [user(PROMPT)]
    check_agent(agent)
    model.refuse = frozenset()
    model.push(reply("fine"))
    assert (await agent.user_message("hello")).outcome == "finished"


async def test_an_explicit_json_mode_does_not_fall_back(model: ScriptedModel) -> None:
    refusing(model, "json_schema")
    fragola = make_fragola(model, json_mode="json_schema")

    with pytest.raises(JsonModeError, match="HTTP 500") as caught:
        await fragola.agent("x").json(PROMPT, Person)

    # The server's validation error spans lines: the user reads one; the whole body stays on
    # the chained openai exception.
    assert "\n" not in str(caught.value)
    assert "1 validation error: {'type': 'literal_error'" in str(caught.value)
    api_error = caught.value.__cause__.__cause__
    assert api_error.body["message"].startswith("1 validation error:\n")
    assert len(model.requests) == 1
    assert fragola.json_modes == {}


@pytest.mark.parametrize("failure", [
    fail(400, "Invalid schema for response_format 'Person': 'required' is required"),
    fail(400, "This model's maximum context length is 8192 tokens"),
    fail(500, "response_format went wrong inside the server"),
    fail(500, "json_schema: out of memory while compiling the grammar"),
    fail(429, "Rate limit reached"),
])
async def test_auto_does_not_fall_back_on_errors_that_are_not_a_refusal(
    model: ScriptedModel, failure: Any
) -> None:
    model.push(failure)
    fragola = make_fragola(model)

    with pytest.raises(JsonModeError):
        await fragola.agent("x").json(PROMPT, Person)

    assert len(model.requests) == 1
    assert fragola.json_modes == {}


async def test_auto_with_a_refusing_demo_model_gives_the_same_answer() -> None:
    fragola = Fragola.scripted(refuse={"json_schema"})
    try:
        result = await fragola.agent("x").json(PROMPT, Person)
        assert result.success and result.data == Person(**ADA)
        assert result.json_mode == "json_object"
    finally:
        await fragola.aclose()


# -- checks -------------------------------------------------------------------------------------


def test_an_unknown_json_mode_is_refused_where_it_is_given(model: ScriptedModel) -> None:
    with pytest.raises(BadUsage, match="json_mode must be one of"):
        make_fragola(model, json_mode="grammar")


async def test_an_unknown_json_mode_for_one_call_is_refused_before_anything_is_sent(
    model: ScriptedModel,
) -> None:
    agent = make_fragola(model).agent("x")
    with pytest.raises(BadUsage, match="json_mode must be one of"):
        await agent.json(PROMPT, Person, json_mode="strict")
    assert model.requests == [] and agent.state.messages == []


async def test_an_unknown_json_mode_set_on_the_fragola_by_hand_is_refused_before_anything_is_sent(
    model: ScriptedModel,
) -> None:
    fragola = make_fragola(model)
    fragola.json_mode = "json-object"
    agent = fragola.agent("x")
    with pytest.raises(BadUsage, match="json_mode must be one of"):
        await agent.json(PROMPT, Person)
    assert model.requests == [] and agent.state.messages == []


def test_an_unknown_refusal_is_refused() -> None:
    with pytest.raises(ValueError, match="refuse takes"):
        ScriptedModel(refuse={"grammar"})


def test_the_cell_magic_takes_a_json_mode() -> None:
    from IPython.core.error import UsageError

    from fragola_nb.notebook.cellargs import parse_options

    assert parse_options("tutor --json Person --json-mode tool").json_mode == "tool"
    assert parse_options("tutor --json Person").json_mode is None
    with pytest.raises(UsageError, match="--json-mode goes with --json"):
        parse_options("tutor --json-mode tool")
    with pytest.raises(UsageError, match="--json-mode takes one of"):
        parse_options("tutor --json Person --json-mode grammar")


def llama_cpp_tool_stream(name: str, pieces: list[str]) -> Any:
    """A forced tool call streamed as llama-cpp-python's server streams it: every delta
    repeats the call's id, type and whole name (and the legacy ``function_call``)."""
    from fragola_nb.models.scripted import raw

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                "model": "x", "choices": [{"index": 0, "finish_reason": finish,
                                           "logprobs": None, "delta": delta}]}
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    frames = [chunk({"role": "assistant", "content": None, "function_call": None,
                     "tool_calls": None})]
    for piece in pieces:
        part = {"name": name, "arguments": piece}
        frames.append(chunk({"role": None, "content": None, "function_call": part,
                             "tool_calls": [{"index": 0, "id": f"call__0_{name}",
                                             "type": "function", "function": part}]}))
    frames.append(chunk({"role": None, "content": None, "function_call": None,
                         "tool_calls": None}, "tool_calls"))
    return raw(b"".join([*frames, b"data: [DONE]\n\n"]),
               headers={"Content-Type": "text/event-stream"})


async def test_a_streamed_call_whose_every_delta_repeats_the_name_is_one_call(
    model: ScriptedModel,
) -> None:
    model.push(llama_cpp_tool_stream("Person", ['{"', 'name', '": "Ada Lovelace", ',
                                                '"age": 36}']))
    agent = make_fragola(model).agent("x", model_settings={"stream": True})

    result = await agent.json(PROMPT, Person, json_mode="tool")

    assert result.success and result.data == Person(**ADA)
    (call,) = result.state.messages[1]["tool_calls"]
    assert call == {"id": "call__0_Person", "type": "function", "function": {
        "name": "Person", "arguments": '{"name": "Ada Lovelace", "age": 36}'}}
    assert len(model.requests) == 1
