"""Tools: definitions, schemas, handlers, results, and errors that go back to the model."""

from __future__ import annotations

import json
from typing import Any, Literal

import pydantic
import pydantic.v1
import pytest
from support.helpers import answered, asked, make_agent

from fragola_nb import (
    AgentContext,
    BadUsage,
    InvalidToolDefinition,
    Tool,
    tool,
)
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls


class AddArgs(pydantic.BaseModel):
    x: int
    y: int = pydantic.Field(default=0, description="Added to x.")


class AddArgsV1(pydantic.v1.BaseModel):
    x: int
    y: int = 0


# -- definitions --------------------------------------------------------------------------


def test_tool_with_a_pydantic_schema_defines_a_function_for_the_model() -> None:
    add = tool(name="add", description="Add two numbers.", schema=AddArgs,
               handler=lambda params: params.x + params.y)

    assert add.name == "add"
    assert add.definition == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": AddArgs.model_json_schema(),
        },
    }


def test_tool_without_a_schema_takes_an_empty_object() -> None:
    ping = tool(name="ping", description="Ping.", handler=lambda: "pong")

    assert ping.definition["function"]["parameters"] == {"type": "object", "properties": {}}


def test_decorator_builds_the_schema_from_signature_and_docstring() -> None:
    @tool
    def convert(amount: float, currency: str = "EUR", exact: bool = False) -> str:
        """Convert an amount of money.

        A longer explanation that is not part of the summary.

        Args:
            amount: How much to convert.
            currency: The target currency,
                as an ISO 4217 code.

        Returns:
            The converted amount.
        """
        return f"{amount} {currency}"

    function = convert.definition["function"]
    assert function["name"] == "convert"
    assert function["description"] == "Convert an amount of money."
    parameters = function["parameters"]
    assert parameters["type"] == "object"
    assert parameters["required"] == ["amount"]
    props = parameters["properties"]
    assert set(props) == {"amount", "currency", "exact"}
    assert props["amount"]["type"] == "number"
    assert props["amount"]["description"] == "How much to convert."
    assert props["currency"]["type"] == "string"
    assert props["currency"]["default"] == "EUR"
    assert props["currency"]["description"] == "The target currency, as an ISO 4217 code."
    assert props["exact"] == {"default": False, "title": "Exact", "type": "boolean"}


def test_decorator_with_options_sets_name_and_description() -> None:
    @tool(name="look-up", description="Find a word.")
    async def lookup(word: str) -> str:
        """Ignored summary."""
        return word

    assert lookup.name == "look-up"
    assert lookup.description == "Find a word."
    assert lookup.definition["function"]["parameters"]["required"] == ["word"]


def test_decorator_reads_typed_docstring_args_and_optional_types() -> None:
    @tool()
    def pick(limit: int | None = None, mode: Literal["fast", "slow"] = "fast") -> str:
        """Pick something.

        Args:
            limit (int, optional): At most
                this many.
            mode (str): How to pick.
        """
        return mode

    function = pick.definition["function"]
    assert function["description"] == "Pick something."
    props = function["parameters"]["properties"]
    assert props["limit"]["description"] == "At most this many."
    assert props["limit"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert props["mode"]["enum"] == ["fast", "slow"]
    assert props["mode"]["description"] == "How to pick."
    assert "required" not in function["parameters"]


def test_decorated_function_without_docstring_has_no_description() -> None:
    @tool
    def bare(a: int) -> int:
        return a

    assert bare.description == ""
    assert "description" not in bare.definition["function"]


def test_decorator_leaves_context_out_of_the_schema() -> None:
    @tool
    def remember(note: str, context: AgentContext) -> str:
        """Remember a note."""
        return note

    assert set(remember.parameters["properties"]) == {"note"}
    assert remember.parameters["required"] == ["note"]


def test_decorator_refuses_star_args_and_kwargs() -> None:
    with pytest.raises(InvalidToolDefinition, match=r"\*args"):
        @tool
        def total(*numbers: int) -> int:
            return sum(numbers)

    with pytest.raises(InvalidToolDefinition):
        @tool
        def options(**settings: str) -> str:
            return ""


@pytest.mark.parametrize(
    "name", ["", "has space", "dot.name", "slash/name", "naïve", "a" * 65, "emoji🙂"]
)
def test_names_breaking_openai_rule_are_refused(name: str) -> None:
    with pytest.raises(InvalidToolDefinition, match="OpenAI"):
        tool(name=name, description="", handler=lambda: None)
    with pytest.raises(InvalidToolDefinition):
        tool(name=name)(lambda: None)


@pytest.mark.parametrize("name", ["a", "A-b_9", "a" * 64])
def test_names_within_openai_rule_are_accepted(name: str) -> None:
    assert tool(name=name, description="", handler=lambda: None).name == name


def test_invalid_tool_definition_is_bad_usage() -> None:
    assert issubclass(InvalidToolDefinition, BadUsage)


def test_two_tools_with_one_name_on_an_agent_are_refused(model: ScriptedModel) -> None:
    first = tool(name="same", description="", handler=lambda: 1)
    second = tool(name="same", description="", handler=lambda: 2)

    with pytest.raises(InvalidToolDefinition, match="same"):
        make_agent(model, first, second)


def test_update_tools_refuses_duplicate_names_and_changes_nothing(model: ScriptedModel) -> None:
    first = tool(name="same", description="", handler=lambda: 1)
    second = tool(name="same", description="", handler=lambda: 2)
    agent = make_agent(model, first)

    with pytest.raises(InvalidToolDefinition, match="same"):
        agent.context.update_tools([first, second])

    assert agent.options.tools == [first]


# -- raw JSON Schema ----------------------------------------------------------------------

ID_SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}


@pytest.mark.parametrize("schema", [ID_SCHEMA, json.dumps(ID_SCHEMA)])
def test_json_schema_string_or_dict_is_sent_as_parameters(schema: Any) -> None:
    act = tool(name="act", description="Act.", schema=schema, handler=lambda p: p)

    assert act.parameters == ID_SCHEMA


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "nope"}}},
        '{"type": "object", "properties": {"a": {"type": "nope"}}}',
        '{"type": "object", "properties": ',
        "not json at all",
        '["type", "object"]',
        {"type": "string"},
    ],
)
def test_broken_json_schema_is_refused_when_the_tool_is_made(schema: Any) -> None:
    with pytest.raises(InvalidToolDefinition):
        tool(name="act", description="", schema=schema, handler=lambda p: p)


def test_unsupported_schema_kind_is_refused() -> None:
    with pytest.raises(InvalidToolDefinition):
        tool(name="act", description="", schema=42, handler=lambda p: p)


async def test_json_schema_arguments_are_passed_through_unvalidated(
    model: ScriptedModel,
) -> None:
    seen: list[Any] = []
    act = tool(name="act", description="", schema=json.dumps(ID_SCHEMA),
               handler=lambda params: seen.append(params) or "done")
    model.push(tool_calls(call("act", {"id": 5, "extra": True}, id="c1")), reply("ok"))

    state = await make_agent(model, act).user_message("go")

    assert seen == [{"id": 5, "extra": True}]
    assert state.messages[2] == answered("c1", "done")
    assert state.outcome == "finished"


async def test_json_schema_with_validate_true_checks_arguments(model: ScriptedModel) -> None:
    seen: list[Any] = []
    act = tool(name="act", description="", schema=ID_SCHEMA, validate=True,
               handler=lambda params: seen.append(params) or "done")
    model.push(
        tool_calls(call("act", {"id": 5}, id="c1")),
        tool_calls(call("act", {"id": "five"}, id="c2")),
        reply("ok"),
    )

    state = await make_agent(model, act).user_message("go")

    assert seen == [{"id": "five"}]
    error = state.messages[2]["content"]
    assert state.messages[2]["tool_call_id"] == "c1"
    assert "id" in error and "string" in error
    assert state.messages[4] == answered("c2", "done")
    assert state.outcome == "finished"


# -- pydantic schemas ---------------------------------------------------------------------


@pytest.mark.parametrize("schema", [AddArgs, AddArgsV1], ids=["pydantic", "pydantic.v1"])
async def test_pydantic_handler_receives_the_validated_model_instance(
    model: ScriptedModel, schema: Any
) -> None:
    seen: list[Any] = []

    def add(params: Any) -> int:
        seen.append(params)
        return params.x + params.y

    adder = tool(name="add", description="Add.", schema=schema, handler=add)
    model.push(tool_calls(call("add", {"x": "2", "y": 3}, id="c1")), reply("5"))

    state = await make_agent(model, adder).user_message("2 + 3?")

    assert seen == [schema(x=2, y=3)]
    assert isinstance(seen[0], schema)
    assert state.messages == [
        {"role": "user", "content": "2 + 3?"},
        asked(("c1", "add", {"x": "2", "y": 3})),
        answered("c1", "5"),
        {"role": "assistant", "content": "5"},
    ]
    assert model.requests[0]["tools"] == [adder.definition]


@pytest.mark.parametrize("schema", [AddArgs, AddArgsV1], ids=["pydantic", "pydantic.v1"])
async def test_pydantic_validation_error_goes_back_to_the_model(
    model: ScriptedModel, schema: Any
) -> None:
    calls: list[Any] = []
    adder = tool(name="add", description="Add.", schema=schema,
                 handler=lambda params: calls.append(params) or params.x + params.y)
    model.push(
        tool_calls(call("add", {"x": "many"}, id="c1")),
        tool_calls(call("add", {"y": 1}, id="c2")),
        tool_calls(call("add", {"x": 1}, id="c3")),
        reply("1"),
    )

    state = await make_agent(model, adder).user_message("add")

    assert calls == [schema(x=1)]
    wrong_type = state.messages[2]
    missing = state.messages[4]
    assert wrong_type["tool_call_id"] == "c1"
    assert wrong_type["content"].startswith("Error")
    assert "x" in wrong_type["content"] and "integer" in wrong_type["content"]
    assert missing["tool_call_id"] == "c2"
    assert "x" in missing["content"] and "required" in missing["content"].lower()
    assert state.messages[6] == answered("c3", "1")
    assert len(model.requests) == 4
    assert model.requests[1]["messages"][-1] == wrong_type
    assert state.outcome == "finished"


# -- handlers -----------------------------------------------------------------------------


def sync_both(params: Any, context: AgentContext) -> str:
    assert isinstance(context, AgentContext)
    return f"both:{params['n']}:{context.agent.name}"


async def async_both(params: Any, context: AgentContext) -> str:
    assert isinstance(context, AgentContext)
    return f"both:{params['n']}:{context.agent.name}"


def sync_params(params: Any) -> str:
    return f"params:{params['n']}"


async def async_params(params: Any) -> str:
    return f"params:{params['n']}"


def sync_none() -> str:
    return "none"


async def async_none() -> str:
    return "none"


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (sync_both, "both:7:tester"),
        (async_both, "both:7:tester"),
        (sync_params, "params:7"),
        (async_params, "params:7"),
        (sync_none, "none"),
        (async_none, "none"),
        (lambda params, context: f"lambda:{params['n']}", "lambda:7"),
    ],
    ids=["sync(params,context)", "async(params,context)", "sync(params)", "async(params)",
         "sync()", "async()", "lambda(params,context)"],
)
async def test_handler_shapes_sync_and_async(
    model: ScriptedModel, handler: Any, expected: str
) -> None:
    counter = tool(name="count", description="", schema={"type": "object"}, handler=handler)
    model.push(tool_calls(call("count", {"n": 7}, id="c1")), reply("ok"))

    state = await make_agent(model, counter).user_message("go")

    assert state.messages[2] == answered("c1", expected)


async def test_decorated_tool_is_called_with_keyword_arguments_and_context(
    model: ScriptedModel,
) -> None:
    seen: list[Any] = []

    @tool
    async def scale(value: int, factor: int = 2, *, context: AgentContext) -> int:
        """Scale a value."""
        seen.append((value, factor, context))
        return value * factor

    model.push(
        tool_calls(call("scale", {"value": 4}, id="c1"), call("scale", {"value": "3",
                                                                        "factor": 5}, id="c2")),
        reply("done"),
    )
    agent = make_agent(model, scale)

    state = await agent.user_message("scale")

    assert seen == [(4, 2, agent.context), (3, 5, agent.context)]
    assert state.messages[2:4] == [answered("c1", "8"), answered("c2", "15")]


async def test_decorated_tool_without_context_gets_only_its_fields(model: ScriptedModel) -> None:
    @tool
    def greet(name: str) -> str:
        """Greet someone."""
        return f"Hello, {name}!"

    model.push(tool_calls(call("greet", {"name": "Ada"}, id="c1")), reply("done"))

    state = await make_agent(model, greet).user_message("greet Ada")

    assert state.messages[2] == answered("c1", "Hello, Ada!")


async def test_definitions_sent_to_the_model(model: ScriptedModel) -> None:
    @tool
    def greet(name: str) -> str:
        """Greet someone."""
        return name

    adder = tool(name="add", description="Add.", schema=AddArgs, handler=lambda p: 0)
    model.push(reply("hi"))

    await make_agent(model, greet, adder).user_message("hello")

    sent = model.requests[0]["tools"]
    assert sent == [greet.definition, adder.definition]
    assert sent[0] == {
        "type": "function",
        "function": {
            "name": "greet",
            "description": "Greet someone.",
            "parameters": {
                "type": "object",
                "title": "greet_arguments",
                "properties": {"name": {"title": "Name", "type": "string"}},
                "required": ["name"],
            },
        },
    }


async def test_agent_without_tools_sends_no_tools_key(model: ScriptedModel) -> None:
    model.push(reply("hi"))

    await make_agent(model).user_message("hello")

    assert "tools" not in model.requests[0]


# -- results ------------------------------------------------------------------------------


class Point(pydantic.BaseModel):
    x: int
    y: int


class PointV1(pydantic.v1.BaseModel):
    x: int
    y: int


@pytest.mark.parametrize(
    ("result", "content"),
    [
        ("plain text", "plain text"),
        ('{"already": "json"}', '{"already": "json"}'),
        ("", ""),
        (42, "42"),
        (2.5, "2.5"),
        (True, "true"),
        (False, "false"),
        (None, "null"),
        ([1, "a", None], '[1, "a", null]'),
        ({"a": 1, "b": [True]}, '{"a": 1, "b": [true]}'),
        (Point(x=1, y=2), '{"x": 1, "y": 2}'),
        (PointV1(x=1, y=2), '{"x": 1, "y": 2}'),
        ([Point(x=0, y=0)], '[{"x": 0, "y": 0}]'),
    ],
    ids=lambda v: type(v).__name__,
)
async def test_results_are_sent_as_strings_or_json(
    model: ScriptedModel, result: Any, content: str
) -> None:
    give = tool(name="give", description="", handler=lambda: result)
    model.push(tool_calls(call("give", {}, id="c1")), reply("ok"))

    state = await make_agent(model, give).user_message("go")

    assert state.messages[2] == answered("c1", content)
    assert model.requests[1]["messages"][-1] == answered("c1", content)


# -- errors go back to the model ----------------------------------------------------------


def counting_adder() -> tuple[Tool, list[Any]]:
    runs: list[Any] = []
    adder = tool(name="add", description="Add.", schema=AddArgs,
                 handler=lambda params: runs.append(params) or params.x + params.y)
    return adder, runs


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"x": 1', ["not valid JSON", '{"x": 1']),
        ("[1, 2]", ["JSON object", "list"]),
        ('"x"', ["JSON object", "str"]),
        ("null", ["JSON object"]),
    ],
    ids=["truncated", "array", "string", "null"],
)
async def test_unusable_arguments_are_reported_and_the_run_goes_on(
    model: ScriptedModel, arguments: str, expected: list[str]
) -> None:
    adder, runs = counting_adder()
    model.push(tool_calls(call("add", arguments, id="c1")), reply("sorry"))

    state = await make_agent(model, adder).user_message("add")

    assert runs == []
    tool_message = state.messages[2]
    assert tool_message["tool_call_id"] == "c1"
    assert tool_message["content"].startswith("Error")
    assert "add" in tool_message["content"]
    for text in expected:
        assert text in tool_message["content"]
    assert model.requests[1]["messages"][-1] == tool_message
    assert state.messages[-1] == {"role": "assistant", "content": "sorry"}
    assert state.outcome == "finished"
    assert state.status == "idle"


async def test_unknown_tool_is_reported_and_the_run_goes_on(model: ScriptedModel) -> None:
    adder, runs = counting_adder()
    model.push(
        tool_calls(call("subtract", {"x": 1}, id="c1"), call("add", {"x": 1}, id="c2")),
        reply("1"),
    )

    state = await make_agent(model, adder).user_message("go")

    assert runs == [AddArgs(x=1)]
    unknown = state.messages[2]
    assert unknown["tool_call_id"] == "c1"
    assert unknown["content"].startswith("Error")
    assert "'subtract'" in unknown["content"] and "add" in unknown["content"]
    assert state.messages[3] == answered("c2", "1")
    assert state.outcome == "finished"


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_handler_exception_is_reported_and_the_run_goes_on(
    model: ScriptedModel, is_async: bool
) -> None:
    def explode() -> None:
        raise ValueError("the disk is on fire")

    async def explode_async() -> None:
        raise ValueError("the disk is on fire")

    broken = tool(name="broken", description="",
                  handler=explode_async if is_async else explode)
    model.push(tool_calls(call("broken", {}, id="c1")), reply("it failed"))

    state = await make_agent(model, broken).user_message("go")

    content = state.messages[2]["content"]
    assert content.startswith("Error")
    assert "broken" in content
    assert "ValueError" in content and "the disk is on fire" in content
    assert state.messages[-1] == {"role": "assistant", "content": "it failed"}
    assert len(model.requests) == 2
    assert state.outcome == "finished"


async def test_empty_arguments_string_means_no_arguments(model: ScriptedModel) -> None:
    ping = tool(name="ping", description="", handler=lambda params: f"got {params!r}")
    model.push(tool_calls(call("ping", "", id="c1")), reply("ok"))

    state = await make_agent(model, ping).user_message("go")

    assert state.messages[2] == answered("c1", "got {}")
