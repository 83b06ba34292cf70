"""Builders shared by the core tests: a Fragola on the scripted model, and stored messages.

    agent = make_agent(model, lookup, instructions="Be brief.")
    model.push(tool_calls(call("lookup", {"q": "x"}, id="c1")), reply("found"))
    state = await agent.user_message("go")
    assert state.messages == [
        user("go"),
        asked(("c1", "lookup", {"q": "x"})),
        answered("c1", "x found"),
        {"role": "assistant", "content": "found"},
    ]
    assert_valid_history(state.messages)
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pydantic
import pytest

from fragola_nb import Agent, Fragola, ModelHTTPError, Tool, tool
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls

if TYPE_CHECKING:
    import psutil

__all__ = [
    "answered",
    "asked",
    "assert_recovers",
    "assert_valid_history",
    "make_agent",
    "make_fragola",
    "until",
    "user",
]


def make_fragola(model: ScriptedModel, /, **options: Any) -> Fragola:
    """A Fragola that talks to ``model`` and never retries (a scripted failure fails at once)."""
    return Fragola(api_key="test-key", base_url=model.base_url, max_retries=0, **options)


def make_agent(model: ScriptedModel, /, *tools: Tool, name: str = "tester", **options: Any
               ) -> Agent:
    """An agent with ``tools`` on its own :func:`make_fragola`; ``options`` go to ``agent()``."""
    return make_fragola(model).agent(name=name, tools=list(tools), **options)


def user(text: str) -> dict[str, Any]:
    """The stored user message for ``text``."""
    return {"role": "user", "content": text}


def asked(*calls: tuple[str, str, Any]) -> dict[str, Any]:
    """The stored assistant message for ``(id, name, arguments)`` calls."""
    return {
        "role": "assistant",
        "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for call_id, name, args in calls
        ],
    }


def answered(call_id: str, content: str) -> dict[str, Any]:
    """The stored tool message answering ``call_id``."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def assert_valid_history(messages: list[dict[str, Any]]) -> None:
    """Every assistant tool call is answered, by id, before any other message follows.

    (``invariants.check_history`` is the stricter check of the fault and random-play tests.)
    """
    open_ids: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_ids, f"unexpected tool message {message}"
            open_ids.remove(message["tool_call_id"])
            continue
        assert not open_ids, f"tool calls {open_ids} unanswered before {message}"
        if message["role"] == "assistant":
            open_ids = [c["id"] for c in message.get("tool_calls") or ()]
    assert not open_ids, f"tool calls {open_ids} unanswered at the end"


async def assert_recovers(agent: Agent, model: ScriptedModel, history: list[dict[str, Any]],
                          check: Callable[[Agent], None]) -> None:
    """After a failure: idle with exactly ``history``, and the next call sends that history
    and works. ``check`` (``invariants.check_agent``, or a history check) runs before and after
    that call."""
    check(agent)
    state = agent.state
    assert state.status == "idle"
    assert state.messages == history
    sent = len(model.requests)
    model.push(reply("back again"))

    retried = await agent.step()

    assert model.requests[sent]["messages"] == history
    assert retried.messages == [*history, {"role": "assistant", "content": "back again"}]
    assert retried.outcome == "finished"
    check(agent)


def until(check: Callable[[], Any], timeout: float = 20) -> None:
    """Wait for observable state that another thread or a kernel brings about, never a sleep
    of a guessed length; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


async def until_async(check: Callable[[], Any], timeout: float = 10.0) -> None:
    """``until`` for a test running on an event loop: the loop goes on (the run a panel's
    click started runs on it) while it waits."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def model_error(agent: Agent, text: str, fragola: Fragola, server: Any
                      ) -> pytest.ExceptionInfo[ModelHTTPError]:
    """Send ``text``: the turn fails with a :class:`ModelHTTPError` (``pytest.raises``'s
    answer is returned); then, failed or not, close ``fragola`` and the test ``server``."""
    try:
        with pytest.raises(ModelHTTPError) as raised:
            await agent.user_message(text)
    finally:
        await fragola.aclose()
        server.close()
    return raised


def panel_calls(panel: Any) -> list[dict[str, Any]]:
    """Every call shown in a panel's rows, without the timing (which varies) and the number
    of its result's message (``ri``, checked where numbers are the point)."""
    return [{k: v for k, v in c.items() if k not in ("ms", "ri")}
            for row in panel.rows for c in row["calls"]]


# -- tools and MCP servers more than one test file uses ------------------------------------------

class AddArgs(pydantic.BaseModel):
    a: int
    b: int


def add_tool(*, require_approval: bool = True) -> Tool:
    """``add(a, b)``, asking for approval unless told not to."""
    return tool(name="add", description="Add two numbers.", schema=AddArgs,
                handler=lambda p: p.a + p.b, require_approval=require_approval)


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def broken(city: str) -> str:
    """Always fails."""
    raise TimeoutError("no answer from the station")


SERVER = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "demo_server.py")
STDIO = [sys.executable, SERVER, "stdio"]


def servers_running() -> list[psutil.Process]:
    """The demo servers this test process started (and that still run)."""
    import psutil  # in the "test" extra only: imported by the tests that use it

    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if SERVER in child.cmdline() and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


@tool
def add(x: int) -> int:
    """Add one."""
    return x + 1


def steps_brain(steps: int) -> Callable[[dict[str, Any]], Any]:
    """A scripted model's brain for a turn of ``steps`` tool steps: a call of ``add`` (with
    the number of results so far) while the request holds fewer results, then "all done"."""

    def brain(request: dict[str, Any]) -> Any:
        done = sum(1 for m in request["messages"] if m["role"] == "tool")
        return tool_calls(call("add", {"x": done})) if done < steps else reply("all done")

    return brain
