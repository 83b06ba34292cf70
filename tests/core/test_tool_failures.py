"""A tool call that cannot run, or whose result cannot be sent, becomes a tool message that says
so, and the run goes on; a call that ran is never recorded as "did not run"; listeners hear of
every call, failed ones included (issue 10, A.2-A.5 and A.7)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pydantic
import pytest
from support.helpers import answered, asked, assert_valid_history, make_agent, user
from support.invariants import check_agent

from fragola_nb import (
    InvalidArguments,
    InvalidToolDefinition,
    JsonModeError,
    SessionError,
    load_session,
    save_session,
    tool,
)
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls


def circular() -> list[Any]:
    loop: list[Any] = [1]
    loop.append(loop)
    return loop


UNSERIALIZABLE = {
    "tuple keys": ({(1, 2): "ok"}, "TypeError"),
    "a circular list": (circular(), "ValueError"),
}


def last_tool_message(messages: list[dict[str, Any]]) -> str:
    return str([m for m in messages if m["role"] == "tool"][-1]["content"])


async def run_one_call(model: ScriptedModel, agent: Any, arguments: Any = "{}") -> Any:
    model.push(tool_calls(call(agent.options.tools[0].name, arguments, id="c1")),
               reply("noted"))
    state = await agent.user_message("go")
    assert state.outcome == "finished"  # the run went on after the failed call
    assert state.messages[-1] == {"role": "assistant", "content": "noted"}
    assert model.requests[1]["messages"][-1] == state.messages[-2]  # the model read it
    check_agent(agent)
    return state


# -- A.2: results that cannot be serialized ---------------------------------------------------


@pytest.mark.parametrize("result, error", UNSERIALIZABLE.values(), ids=UNSERIALIZABLE.keys())
async def test_a_handler_result_that_cannot_be_serialized_is_an_error_the_model_reads(
    model: ScriptedModel, result: Any, error: str
) -> None:
    ran: list[bool] = []

    def handler() -> Any:
        ran.append(True)
        return result

    agent = make_agent(model, tool(name="odd", description="", handler=handler))

    state = await run_one_call(model, agent)

    assert ran == [True]
    text = last_tool_message(state.messages)
    assert text.startswith("Error: the result of odd could not be turned into JSON text")
    assert error in text
    assert "did not run" not in text


@pytest.mark.parametrize("result, error", UNSERIALIZABLE.values(), ids=UNSERIALIZABLE.keys())
async def test_an_injected_result_that_cannot_be_serialized_is_an_error_the_model_reads(
    model: ScriptedModel, result: Any, error: str
) -> None:
    agent = make_agent(model, tool(name="ask", description="", handler="dynamic"))
    model.push(tool_calls(call("ask", {}, id="c1")), reply("noted"))
    assert (await agent.user_message("go")).status == "waiting"

    agent.inject("c1", result)
    state = await agent.step()

    assert state.outcome == "finished"
    assert error in last_tool_message(state.messages)
    check_agent(agent)


async def test_a_tool_call_listener_result_that_cannot_be_serialized_is_reported_too(
    model: ScriptedModel,
) -> None:
    agent = make_agent(model, tool(name="fine", description="", handler=lambda: "fine"))
    agent.on_tool_call(lambda event: {(1,): "broken"})

    state = await run_one_call(model, agent)

    assert "could not be turned into JSON text" in last_tool_message(state.messages)


# -- A.3: argument strings Python's json cannot read ------------------------------------------

HOSTILE_ARGUMENTS = {
    "a 5,000-digit integer": '{"n": ' + "9" * 5000 + "}",
    "nesting past the recursion limit": '{"n": ' + "[" * 100_000 + "]" * 100_000 + "}",
}


@pytest.mark.parametrize("arguments", HOSTILE_ARGUMENTS.values(), ids=HOSTILE_ARGUMENTS.keys())
async def test_hostile_argument_strings_are_a_readable_tool_message(
    model: ScriptedModel, arguments: str
) -> None:
    ran: list[Any] = []
    agent = make_agent(model, tool(name="take", description="", handler=ran.append))

    state = await run_one_call(model, agent, arguments)

    assert ran == []
    text = last_tool_message(state.messages)
    assert text.startswith("Error: the arguments for take cannot be read")
    assert len(text) < 700  # the model reads what is wrong, not the 100,000 characters


@pytest.mark.parametrize("arguments", HOSTILE_ARGUMENTS.values(), ids=HOSTILE_ARGUMENTS.keys())
async def test_hostile_argument_strings_in_a_session_file_are_a_session_error(
    model: ScriptedModel, tmp_path: Any, arguments: str
) -> None:
    guarded = tool(name="guarded", description="", handler=lambda: "ok", require_approval=True)
    agent = make_agent(model, guarded)
    model.push(tool_calls(call("guarded", {}, id="c1")))
    await agent.user_message("go")
    path = save_session(tmp_path / "s.json", agent)
    document = json.loads(path.read_text())
    for history in document["histories"]:
        for message in history["messages"]:
            for made in message.get("tool_calls") or ():
                made["function"]["arguments"] = arguments
    path.write_text(json.dumps(document))

    with pytest.raises(SessionError):
        load_session(path, agent.fragola, tools=[guarded])


# -- A.4: validators that raise anything ------------------------------------------------------


class Login(pydantic.BaseModel):
    user: str

    @pydantic.field_validator("user")
    @classmethod
    def no_root(cls, value: str) -> str:
        if value == "root":
            raise PermissionError("root may not log in")
        return value


async def test_a_validator_raising_any_exception_is_an_invalid_arguments_result(
    model: ScriptedModel,
) -> None:
    ran: list[Any] = []
    login = tool(name="login", description="", schema=Login, handler=ran.append)
    agent = make_agent(model, login)

    state = await run_one_call(model, agent, {"user": "root"})

    assert ran == []
    text = last_tool_message(state.messages)
    assert text.startswith("Error: invalid arguments for login")
    assert "PermissionError: root may not log in" in text


async def test_approve_with_params_a_validator_refuses_raises_invalid_arguments(
    model: ScriptedModel,
) -> None:
    login = tool(name="login", description="", schema=Login, handler=lambda p: p.user,
                 require_approval=True)
    agent = make_agent(model, login)
    model.push(tool_calls(call("login", {"user": "guest"}, id="c1")), reply("in"))
    await agent.user_message("log in")

    with pytest.raises(InvalidArguments, match="PermissionError"):
        agent.approve("c1", {"user": "root"})

    assert agent.pending[0].decision is None  # nothing changed
    agent.approve("c1")
    state = await agent.step()
    assert state.messages[-2] == answered("c1", "guest")


async def test_a_json_schema_validator_meeting_deep_arguments_rejects_them(
    model: ScriptedModel,
) -> None:
    schema = {"type": "object", "properties": {"n": {"$ref": "#"}}}
    ran: list[Any] = []
    deep = tool(name="deep", description="", schema=schema, handler=ran.append, validate=True)
    agent = make_agent(model, deep)
    model.push(tool_calls(call("deep", _deep_json(500), id="c1")), reply("noted"))

    state = await agent.user_message("go")

    assert ran == []
    assert last_tool_message(state.messages).startswith("Error: invalid arguments for deep")
    assert state.outcome == "finished"


def _deep_json(depth: int) -> str:
    return '{"n": ' * depth + "{}" + "}" * depth


# -- A.5: $ref to nowhere -------------------------------------------------------------------


class Recorder(http.server.BaseHTTPRequestHandler):
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        Recorder.paths.append(self.path)
        body = json.dumps({"type": "integer"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def schema_server() -> Iterator[str]:
    """A server that would hand out a schema to anyone fetching it: it must see no request."""
    Recorder.paths = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("ref", ["#/$defs/missing", "#/properties/nope", "other.json"])
def test_a_ref_to_nowhere_is_refused_when_the_tool_is_made(ref: str) -> None:
    schema = {"type": "object", "properties": {"n": {"$ref": ref}}}
    with pytest.raises(InvalidToolDefinition, match="points nowhere"):
        tool(name="t", description="", schema=schema, handler=lambda p: p)


def test_a_remote_ref_is_refused_and_never_fetched(schema_server: str) -> None:
    schema = {"type": "object", "properties": {"n": {"$ref": f"{schema_server}/n.json"}}}

    with pytest.raises(InvalidToolDefinition, match="never fetches"):
        tool(name="t", description="", schema=schema, handler=lambda p: p, validate=True)

    assert Recorder.paths == []


async def test_agent_json_refuses_a_ref_to_nowhere(model: ScriptedModel) -> None:
    agent = make_agent(model)
    schema = {"type": "object", "properties": {"n": {"$ref": "#/$defs/gone"}}}
    with pytest.raises(JsonModeError, match="points nowhere"):
        await agent.json("give me n", schema)
    assert model.requests == []


async def test_refs_within_the_schema_still_validate(model: ScriptedModel) -> None:
    schema = {
        "type": "object",
        "$defs": {"count": {"type": "integer", "minimum": 0}},
        "properties": {"n": {"$ref": "#/$defs/count"}, "inner": {
            "$id": "https://example.com/inner", "$defs": {"s": {"type": "string"}},
            "type": "object", "properties": {"s": {"$ref": "#/$defs/s"}}}},
        "required": ["n"],
    }
    took: list[Any] = []
    count = tool(name="count", description="", schema=schema, handler=took.append, validate=True)
    agent = make_agent(model, count)
    model.push(tool_calls(call("count", {"n": -1}, id="c1"), call("count", {"n": 2}, id="c2")),
               reply("ok"))

    state = await agent.user_message("go")

    assert "n: -1 is less than the minimum of 0" in state.messages[2]["content"]
    assert took == [{"n": 2}]


# -- A.7: listeners hear of every call --------------------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def boom() -> None:
    raise RuntimeError("handler down")


FAILED_CALLS = {  # name, arguments sent, what event.params holds, what the error says
    "not JSON": ("add", '{"a": 1,', '{"a": 1,', "are not valid JSON"),
    "not an object": ("add", "[1, 2]", "[1, 2]", "must be a JSON object"),
    "invalid arguments": ("add", '{"a": "x", "b": 2}', {"a": "x", "b": 2},
                          "invalid arguments for add"),
    "unknown tool": ("nowhere", '{"q": 1}', {"q": 1}, "there is no tool named 'nowhere'"),
    "the handler raised": ("boom", "{}", {}, "RuntimeError: handler down"),
}


@pytest.mark.parametrize("name, arguments, params, said", FAILED_CALLS.values(),
                         ids=FAILED_CALLS.keys())
async def test_tool_call_and_after_tool_call_hear_of_failed_calls(
    model: ScriptedModel, name: str, arguments: str, params: Any, said: str
) -> None:
    agent = make_agent(model, add, tool(name="boom", description="", handler=boom))
    heard: list[tuple[str, str, Any, str | None]] = []
    agent.on_tool_call(lambda e: heard.append(("tool_call", e.name, e.params, e.error)))
    agent.on_after_tool_call(
        lambda e: heard.append(("after_tool_call", e.name, e.message["content"], e.error)))
    model.push(tool_calls(call(name, arguments, id="c1")), reply("noted"))

    state = await agent.user_message("go")

    stored = state.messages[2]["content"]
    assert said in stored
    assert heard == [("tool_call", name, params, stored),
                     ("after_tool_call", name, stored, stored)]
    assert state.outcome == "finished"
    assert_valid_history(state.messages)


async def test_a_call_that_ran_reports_no_error(model: ScriptedModel) -> None:
    agent = make_agent(model, add)
    errors: list[Any] = []
    agent.on_tool_call(lambda e: errors.append(e.error))
    agent.on_after_tool_call(lambda e: errors.append(e.error))
    model.push(tool_calls(call("add", {"a": 1, "b": 2}, id="c1")), reply("3"))

    await agent.user_message("go")

    assert errors == [None, None]


async def test_a_rejected_call_is_heard_with_the_rejection(model: ScriptedModel) -> None:
    guarded = tool(name="guarded", description="", handler=lambda: "ran", require_approval=True)
    agent = make_agent(model, guarded)
    heard: list[Any] = []
    agent.on_after_tool_call(lambda e: heard.append(e.error))
    model.push(tool_calls(call("guarded", {}, id="c1")), reply("ok"))
    await agent.user_message("go")

    agent.reject("c1", "not today")
    await agent.step()

    assert heard == ["The user rejected this call to guarded. Reason: not today"]


async def test_a_call_that_ran_keeps_its_result_when_a_tool_call_listener_raises(
    model: ScriptedModel,
) -> None:
    agent = make_agent(model, add)
    subscription = agent.on_tool_call(boom_listener)
    model.push(tool_calls(call("add", {"a": 1, "b": 2}, id="c1")))

    with pytest.raises(Exception, match="listener down"):
        await agent.user_message("go")

    assert agent.state.messages == [user("go"), asked(("c1", "add", {"a": 1, "b": 2})),
                                    answered("c1", "3")]
    subscription()
    check_agent(agent)


def boom_listener(event: Any) -> None:
    raise RuntimeError("listener down")
