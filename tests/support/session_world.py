"""A small world of agents for the session and export tests: tools, listeners, a grown tree,
and ``snapshot``, which turns an agent into plain data to compare whole states."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pydantic

from fragola_nb import Agent, Fragola, Tool, create_store, tool
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls
from fragola_nb.sessions.save import listener_name

SECRET = "sk-test-SECRET-session-123"


class Transfer(pydantic.BaseModel):
    to: str
    amount: int


class RemoteArgs(pydantic.BaseModel):
    id: str


class Bank:
    """A transfer tool (needs approval) that records each run of its handler."""

    def __init__(self) -> None:
        self.runs: list[Transfer] = []

    def transfer(self, params: Transfer) -> str:
        self.runs.append(params)
        return f"sent {params.amount} to {params.to}"

    def tools(self) -> list[Tool]:
        return [
            tool(name="transfer", description="Send money.", schema=Transfer,
                 handler=self.transfer, require_approval=True),
            tool(name="remote", description="Runs elsewhere.", schema=RemoteArgs,
                 handler="dynamic"),
            add,
        ]


@tool
def add(x: int, y: int) -> int:
    """Add two numbers."""
    return x + y


class Log:
    """Listeners, bound methods: re-bound on load by ``__qualname__`` (``Log.tool_call``)."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def tool_call(self, event: Any) -> None:
        self.events.append(f"tool_call {event.name}")

    def status(self, event: Any) -> None:
        self.events.append(f"status {event.status}")

    def listeners(self) -> list[Any]:
        return [self.tool_call, self.status]


async def grow_tree(model: ScriptedModel, bank: Bank, log: Log) -> tuple[Fragola, Agent]:
    """A root that went on after three forks: one waiting on two calls, one with both calls
    decided (edited approval, injected result), one with a rejection and an open call."""
    fragola = Fragola(api_key=SECRET, base_url=model.base_url, max_retries=0,
                      stores=[create_store({"visits": 1}, "shared")])
    root = fragola.agent(
        name="teacher", description="Teaches sums.", instructions=["Be brief.", "Be kind."],
        use_developer_role=True, model_settings={"temperature": 0.2, "max_tokens": 50},
        tools=bank.tools(), stores=[create_store({"notes": ["first"]}, "notes")],
        max_step=7, reset_step_count_after_user_message=False,
    )
    root.on_tool_call(log.tool_call)
    root.on_status_change(log.status)
    model.push(tool_calls(call("add", {"x": 2, "y": 3}, id="a1")), reply("5"))
    await root.user_message("Add 2 and 3")
    waiting = root.fork("waiting")
    model.push(tool_calls(call("transfer", {"to": "bob", "amount": 5}, id="t1"),
                          call("remote", {"id": "r9"}, id="d1")))
    await waiting.user_message("Pay bob 5, then ask the remote")
    decided = waiting.fork("decided")
    decided.approve("t1", {"to": "carol", "amount": 7})
    decided.inject("d1", {"ok": True})
    rejected = waiting.fork("rejected")
    rejected.reject("t1", "too much")
    store = rejected.get_store("notes")
    assert store is not None
    store.set({"notes": ["first", "rejected"]})
    model.push(reply("Bye!"))
    await root.user_message("Bye")
    return fragola, root


def walk(root: Agent) -> list[Agent]:
    out, stack = [], [root]
    while stack:
        agent = stack.pop()
        out.append(agent)
        stack.extend(reversed(agent.forks))
    return out


def as_data(value: Any) -> Any:
    return value.model_dump() if isinstance(value, pydantic.BaseModel) else value


def snapshot(agent: Agent) -> dict[str, Any]:
    """Everything a session keeps of ``agent``, as plain data."""
    options = agent.options
    return {
        "id": agent.id,
        "fork_of": agent.fork_of,
        "parent": agent.parent.id if agent.parent else None,
        "fork_point": agent.fork_point,
        "fork_at": agent.fork_at,
        "forks": [fork.id for fork in agent.forks],
        "messages": agent.state.messages,
        "step_count": agent.step_count,
        "status": agent.status,
        "outcome": agent.state.outcome,
        "options": {
            "name": options.name, "description": options.description,
            "instructions": options.instructions,
            "use_developer_role": options.use_developer_role,
            "model_settings": options.model_settings, "max_step": options.max_step,
            "reset": options.reset_step_count_after_user_message,
            "tools": [t.name for t in options.tools],
        },
        "stores": {name: store.get() for name, store in agent.stores.items()},
        "pending": [
            (p.id, p.name, p.arguments, as_data(p.params), p.reason,
             None if p.decision is None
             else (p.decision.kind, as_data(p.decision.params), p.decision.text))
            for p in agent.state.pending
        ],
        "listeners": {event: [listener_name(fn) for fn in fns]
                      for event, fns in agent.deps.listeners._by_event.items() if fns},
    }


@functools.lru_cache(maxsize=1)
def valid_session_text() -> str:
    """A saved grown tree (made once, on its own scripted model and event loop)."""
    from fragola_nb.sessions import session_to_json

    async def make() -> str:
        with ScriptedModel() as model:
            _, root = await grow_tree(model, Bank(), Log())
            return session_to_json(root)

    return asyncio.run(make())
