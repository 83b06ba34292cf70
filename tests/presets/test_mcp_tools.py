"""MCP tools against a real MCP server process (tests/mcp_servers/demo_server.py, written with
the official ``mcp`` package), over stdio and over Streamable HTTP on loopback, called from
agent turns on the scripted model."""

from __future__ import annotations

import asyncio
import io
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator

import psutil
import pytest
from support.helpers import (
    SERVER,
    STDIO,
    answered,
    asked,
    assert_valid_history,
    make_agent,
    servers_running,
    until,
    user,
)

from fragola_nb import BadUsage, InvalidToolDefinition, run_sync, tool
from fragola_nb.core.run.loop import INTERRUPTED
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls
from fragola_nb.presets.mcptools import MCPConnection, MCPConnectionError, mcp_tools

FAILED = "Error: the tool '{}' raised MCPToolError: "


@pytest.fixture
async def demo() -> AsyncIterator[MCPConnection]:
    connection = await mcp_tools(STDIO)
    try:
        yield connection
    finally:
        await connection.aclose()


@pytest.fixture
def http_url() -> Iterator[str]:
    """The demo server over Streamable HTTP on a free loopback port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, SERVER, "http", "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def listening() -> bool:
        assert process.poll() is None, "the HTTP server exited"
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        until(listening)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def test_the_servers_tools_are_listed_page_by_page_with_their_descriptions() -> None:
    paged = [*STDIO, "--page-size", "3", "--extra", "5"]
    async with await mcp_tools(paged) as connection:
        assert connection.names == [
            "add", "echo", "quiet", "fail", "die", "slow", "picture", "whoami",
            *(f"numbered_{n}" for n in range(5)),
        ]
        add = connection.tools[0]
        assert add.description == "Add two whole numbers."
        assert add.parameters["properties"] == {"a": {"title": "A", "type": "integer"},
                                                "b": {"title": "B", "type": "integer"}}
        quiet = connection.tools[2]
        assert quiet.description == "A tool of the MCP server 'demo'."
        assert connection.name == "demo"


async def test_an_agent_turn_calls_the_remote_tool(model: ScriptedModel,
                                                   demo: MCPConnection) -> None:
    agent = make_agent(model, *demo.tools)
    model.push(tool_calls(call("add", {"a": 2, "b": 3}, id="c1")), reply("5"))

    state = await agent.user_message("2 + 3?")

    assert state.messages == [
        user("2 + 3?"),
        asked(("c1", "add", {"a": 2, "b": 3})),
        answered("c1", "5"),
        {"role": "assistant", "content": "5"},
    ]
    sent = {t["function"]["name"]: t["function"] for t in model.requests[0]["tools"]}
    assert sent["add"]["parameters"]["required"] == ["a", "b"]
    assert sent["add"]["description"] == "Add two whole numbers."


async def test_arguments_are_checked_against_the_remote_schema_before_the_call(
        model: ScriptedModel, demo: MCPConnection) -> None:
    agent = make_agent(model, *demo.tools)
    model.push(tool_calls(call("add", {"a": "two"}, id="c1")), reply("sorry"))

    state = await agent.user_message("add")

    result = state.messages[2]["content"]
    assert result.startswith("Error: invalid arguments for add:")
    assert "'two' is not of type 'integer'" in result
    assert "'b' is a required property" in result
    assert state.outcome == "finished"


async def test_an_is_error_result_is_read_by_the_model_and_the_run_goes_on(
        model: ScriptedModel, demo: MCPConnection) -> None:
    agent = make_agent(model, *demo.tools)
    model.push(tool_calls(call("fail", {"message": "disk full"}, id="c1"),
                          call("echo", {"text": "still here"}, id="c2")), reply("noted"))

    state = await agent.user_message("try")

    assert state.messages[2:] == [
        answered("c1", FAILED.format("fail") + "fail failed on the MCP server 'demo': "
                 "Error executing tool fail: disk full"),
        answered("c2", "still here"),
        {"role": "assistant", "content": "noted"},
    ]


async def test_images_are_summarised_beside_the_text(model: ScriptedModel,
                                                     demo: MCPConnection) -> None:
    agent = make_agent(model, *demo.tools)
    model.push(tool_calls(call("picture", {}, id="c1")), reply("a pixel"))

    state = await agent.user_message("draw")

    assert state.messages[2] == answered(
        "c1", "a red pixel\n\n[image: image/png, about 66 bytes, not shown]")


async def test_a_server_that_dies_mid_call_becomes_a_tool_result_and_the_agent_goes_on(
        model: ScriptedModel) -> None:
    connection = await mcp_tools(STDIO)
    agent = make_agent(model, *connection.tools)
    model.push(tool_calls(call("die", {}, id="c1")), reply("it died"),
               tool_calls(call("add", {"a": 1, "b": 1}, id="c2")), reply("no server"))

    state = await agent.user_message("die")

    died = state.messages[2]["content"]
    assert died.startswith(FAILED.format("die") + "the connection to the MCP server ")
    assert "was lost during die" in died
    assert state.messages[-1] == {"role": "assistant", "content": "it died"}
    until(lambda: not servers_running())
    # The agent stays usable; its tool says the server is gone.
    state = await agent.user_message("add again")
    assert "MCPToolError" in state.messages[-2]["content"]
    assert state.outcome == "finished"
    assert_valid_history(state.messages)
    await connection.aclose()


async def test_a_call_that_takes_too_long_is_answered_with_the_timeout(
        model: ScriptedModel) -> None:
    async with await mcp_tools(STDIO, timeout=0.5) as connection:
        agent = make_agent(model, *connection.tools)
        model.push(tool_calls(call("slow", {"seconds": 30}, id="c1")), reply("too slow"),
                   tool_calls(call("echo", {"text": "ok"}, id="c2")), reply("fine"))

        state = await agent.user_message("wait")
        assert state.messages[2] == answered(
            "c1", FAILED.format("slow") + "the MCP server 'demo' did not answer "
            "slow within 0.5 s (the call may still run there)")
        # The connection still works after a timeout.
        state = await agent.user_message("again")
        assert state.messages[-2] == answered("c2", "ok")


async def test_approvals_apply_to_the_tools_named(model: ScriptedModel) -> None:
    async with await mcp_tools(STDIO, require_approval=["echo"]) as connection:
        agent = make_agent(model, *connection.tools)
        model.push(tool_calls(call("echo", {"text": "hi"}, id="c1"),
                              call("add", {"a": 1, "b": 2}, id="c2")), reply("done"))

        state = await agent.user_message("go")
        assert state.status == "waiting"
        assert [p.id for p in state.pending] == ["c1"]
        assert state.messages[-1] == answered("c2", "3")

        agent.approve("c1")
        state = await agent.step()
        assert state.messages[-2:] == [answered("c1", "hi"),
                                       {"role": "assistant", "content": "done"}]
    with pytest.raises(BadUsage, match="does not offer: nope"):
        await mcp_tools(STDIO, require_approval=["nope"])
    until(lambda: not servers_running())


async def test_filter_and_prefix_choose_and_rename_the_tools(model: ScriptedModel) -> None:
    async with await mcp_tools(STDIO, filter=lambda t: t.name in ("add", "echo"),
                               prefix="calc_", require_approval=True) as connection:
        assert connection.names == ["calc_add", "calc_echo"]
        agent = make_agent(model, *connection.tools)
        model.push(tool_calls(call("calc_add", {"a": 4, "b": 4}, id="c1")), reply("8"))
        state = await agent.user_message("4 + 4")
        agent.approve("c1")
        state = await agent.step()
        assert state.messages[2] == answered("c1", "8")


async def test_remove_from_takes_out_exactly_those_tools_and_close_ends_the_server(
        model: ScriptedModel) -> None:
    @tool
    def local() -> str:
        """Mine."""
        return "local"

    connection = await mcp_tools(STDIO)
    assert len(servers_running()) == 1
    agent = make_agent(model, local, *connection.tools)
    fork = agent.fork()

    connection.remove_from(agent, fork)
    assert [t.name for t in agent.options.tools] == ["local"]
    assert [t.name for t in fork.options.tools] == ["local"]
    connection.add_to(agent)
    assert [t.name for t in agent.options.tools] == ["local", *connection.names]

    await connection.aclose()
    assert connection.closed
    until(lambda: not servers_running())
    model.push(tool_calls(call("echo", {"text": "x"}, id="c1")), reply("closed"))
    state = await agent.user_message("echo")
    assert state.messages[2] == answered(
        "c1", FAILED.format("echo") + "echo cannot run: the connection to the MCP server "
        "'demo' is closed")
    await connection.aclose()  # again: nothing happens


def test_from_synchronous_code_with_run_sync(model: ScriptedModel) -> None:
    connection = run_sync(mcp_tools(STDIO))
    agent = make_agent(model, *connection.tools)
    model.push(tool_calls(call("echo", {"text": "sync"}, id="c1")), reply("ok"))
    state = run_sync(agent.user_message("echo"))
    assert state.messages[2] == answered("c1", "sync")
    connection.close()
    until(lambda: not servers_running())


async def test_streamable_http_with_headers_that_stay_out_of_the_repr(
        model: ScriptedModel, http_url: str) -> None:
    secret = "Bearer sk-live-0123456789abcdef"
    url = http_url + "?token=hunter22"
    async with await mcp_tools(url, headers={"Authorization": secret}) as connection:
        agent = make_agent(model, *connection.tools)
        model.push(tool_calls(call("whoami", {}, id="c1")), reply("you"))
        state = await agent.user_message("who am I?")
        assert state.messages[2] == answered("c1", secret)
        shown = repr(connection)
        assert "hunter22" not in shown and "sk-live" not in shown
        assert shown.startswith(
            f"MCPConnection(name='demo', server='{http_url}?token=[redacted]', open, tools=[")


async def test_a_servers_error_quoting_the_header_it_was_sent_hides_it(
        model: ScriptedModel, http_url: str) -> None:
    """Issue 21 B: a key of no well-known shape, sent as a header, quoted back in a tool's
    error, is hidden by value in the tool's result (and so in the history, sessions, spans)."""
    key = "corp-gw-7Q2xL9pZ4mN8"
    async with await mcp_tools(http_url, headers={"X-Api-Key": key}) as connection:
        agent = make_agent(model, *connection.tools)
        model.push(tool_calls(call("fail", {"message": f"key {key} refused"}, id="c1")),
                   reply("ok"))
        state = await agent.user_message("try")
    result = state.messages[2]["content"]
    assert key not in result and "key [redacted] refused" in result


async def test_a_broken_remote_schema_names_the_tool_and_filter_can_leave_it_out() -> None:
    broken = [*STDIO, "--broken-schema"]
    with pytest.raises(InvalidToolDefinition) as caught:
        await mcp_tools(broken)
    assert str(caught.value).startswith(
        "the tool 'broken' of the MCP server 'demo': the JSON Schema is broken: ")
    until(lambda: not servers_running())
    async with await mcp_tools(broken, filter=lambda t: t.name != "broken") as connection:
        assert "broken" not in connection.names


async def test_a_server_that_cannot_start_is_one_clear_error() -> None:
    with pytest.raises(MCPConnectionError, match="could not connect to the MCP server "
                       "no-such-mcp-server --flag: "):
        await mcp_tools(["no-such-mcp-server", "--flag"])
    with pytest.raises(MCPConnectionError, match="did not answer within 1"):
        await mcp_tools([sys.executable, "-c", "import time; time.sleep(60)"],
                        connect_timeout=1)


@pytest.mark.parametrize(("server", "options", "message"), [
    ("server.py", {}, "server must be a Streamable HTTP URL"),
    ([], {}, "server must be a command"),
    (STDIO, {"headers": {"a": "b"}}, "headers= are for an MCP server reached by URL"),
    ("http://127.0.0.1:1/mcp", {"env": {"a": "b"}}, "env= is for a command"),
])
async def test_bad_arguments_are_refused(server: object, options: dict[str, object],
                                         message: str) -> None:
    with pytest.raises(BadUsage, match=message):
        await mcp_tools(server, **options)  # type: ignore[arg-type]


async def test_a_stdio_server_starts_where_sys_stderr_has_no_file_descriptor(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # As in a Jupyter kernel, where sys.stderr writes to the cell.
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    async with await mcp_tools(STDIO) as connection:
        assert "echo" in connection.names


async def test_stop_sync_during_a_call_returns_at_once_and_the_connection_goes_on(
        model: ScriptedModel, demo: MCPConnection) -> None:
    agent = make_agent(model, *demo.tools)
    model.push(tool_calls(call("slow", {"seconds": 60}, id="c1")),
               tool_calls(call("echo", {"text": "after"}, id="c2")), reply("fine"))
    calling = asyncio.Event()
    agent.on_before_tool_call(lambda event: calling.set())

    turn = asyncio.create_task(agent.user_message("wait"))
    await calling.wait()
    # A stop before the tool starts cancels it unrun; this one comes once it runs.
    while agent.conversation.run is None or agent.conversation.run.running_call != "c1":
        await asyncio.sleep(0.01)
    started = time.monotonic()
    agent.stop_sync()
    state = await turn

    assert time.monotonic() - started < 5
    assert state.messages[2] == answered("c1", INTERRUPTED)
    state = await agent.user_message("again")
    assert state.messages[-2] == answered("c2", "after")


LEFT_OPEN = """
import asyncio, sys, psutil
from fragola_nb import mcp_tools, run_sync

async def main():
    server = await mcp_tools(sys.argv[1:])
    print(server.names[0])

asyncio.run(main())                   # an asyncio.run script
other = run_sync(mcp_tools(sys.argv[1:]))  # and run_sync's loop
print(" ".join(str(child.pid) for child in psutil.Process().children(recursive=True)
               if "demo_server.py" in " ".join(child.cmdline())), flush=True)
"""


def test_a_script_that_ends_without_aclose_is_silent_and_leaves_no_server() -> None:
    """Connections left open when a script ends (no aclose) are closed at exit, each from
    the task that holds it: no anyio traceback ("exit cancel scope in a different task"),
    and no server process left behind."""
    result = subprocess.run([sys.executable, "-c", LEFT_OPEN, *STDIO], capture_output=True,
                            text=True, timeout=120)

    assert result.returncode == 0, result.stderr[-3000:]
    name, pids = result.stdout.splitlines()
    assert name == "add" and len(pids.split()) == 2
    assert "Traceback" not in result.stderr and "cancel scope" not in result.stderr, \
        result.stderr
    deadline = time.monotonic() + 10
    left = [int(pid) for pid in pids.split()]
    while left and time.monotonic() < deadline:
        left = [pid for pid in left if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.1)
    assert left == []
