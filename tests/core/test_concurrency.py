"""Hundreds of agents, and forks of one agent, running at once on one event loop against one
scripted model: every run finishes, no history ever holds another agent's message, stores
scoped to an agent stay scoped, and a listener or handler that raises is reported clearly and
leaves its agent valid.

The scripted model answers from what each request holds (the tag in its last user message),
so an answer can only carry the tag of the conversation that asked for it: a message in the
wrong history shows up as a foreign tag.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx2
import pytest
import pytest_asyncio
from support.invariants import check_agent, loopback_http_client

from fragola_nb import Agent, Fragola, ListenerError, create_store, tool
from fragola_nb.models.scripted import Item, ScriptedModel, call, reply, tool_calls
from fragola_nb.models.scripted.brain import text_of

TAG = re.compile(r"\btag-[\w-]+")


def brain(request: dict[str, Any]) -> Item:
    """Call ``note`` with the tag of the last user message, then sum up the tool result."""
    messages = request["messages"]
    asked = next(text_of(m["content"]) for m in reversed(messages) if m["role"] == "user")
    tag = TAG.findall(asked)[-1]
    if messages[-1]["role"] == "user":
        return tool_calls(call("note", {"tag": tag}), content=f"Noting {tag}.")
    return reply(f"All done for {tag}: {messages[-1]['content']}")


@tool
async def note(tag: str, context: Any) -> str:
    """Note a tag in the agent's own store and in the shared tally."""
    mine = context.get_store("mine")
    await asyncio.sleep(0)  # let the other agents run in between
    mine.update(lambda v: {**v, "calls": v["calls"] + 1, "seen": [*v["seen"], tag]})
    context.get_store("total").update(lambda n: n + 1)
    return f"noted {tag}, note {mine.get()['calls']} of this agent"


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    """One scripted model answering with ``brain``, several chunks a streamed reply.

    Unlike conftest's ``model``, it does not schema-check its traffic at teardown, which
    takes seconds for a thousand requests: ``check_agent`` validates each agent's final
    history, and every request an agent sent held a prefix of it.
    """
    with ScriptedModel(brain=brain, chunk_size=8) as scripted:
        yield scripted


@pytest_asyncio.fixture
async def fragola(model: ScriptedModel) -> AsyncIterator[Fragola]:
    """One Fragola (one HTTP client) for every agent, with a shared ``total`` store.

    The client keeps up to 100 connections open, so the agents' requests queue for a free
    connection instead of opening and closing hundreds (openai keeps only 100 alive by
    default), and its timeout allows for a busy CI machine.
    """
    limits = httpx2.Limits(max_connections=100, max_keepalive_connections=100)
    shared = Fragola(model="m", api_key="test-key", base_url=model.base_url, max_retries=0,
                     timeout=60, http_client=loopback_http_client(limits=limits),
                     stores=[create_store(0, "total")])
    yield shared
    await shared.aclose()


def make_agent(fragola: Fragola, tag: str, *, stream: bool) -> Agent:
    return fragola.agent(
        tag, tools=[note], model_settings={"stream": True} if stream else {},
        stores=[create_store({"tag": tag, "calls": 0, "seen": []}, "mine")],
    )


def tags_in(message: dict[str, Any]) -> set[str]:
    return set(TAG.findall(json.dumps(message)))


def assert_only_own_messages(agent: Agent, tag: str, *, since: int = 0) -> None:
    """Every message from ``since`` on mentions ``tag`` and no other tag (a tool result
    written by fragola_nb itself, such as a cancelled call, may mention none)."""
    for message in agent.state.messages[since:]:
        found = tags_in(message)
        assert found == {tag} or (message["role"] == "tool" and not found), (
            f"{tag}'s history holds {message}"
        )


def turn(tag: str, call_id: str, note: int = 1) -> list[dict[str, Any]]:
    """What one ``user_message(f"I am {tag}")`` leaves in the history."""
    result = f"noted {tag}, note {note} of this agent"
    return [
        {"role": "user", "content": f"I am {tag}"},
        {"role": "assistant", "content": f"Noting {tag}.", "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "note", "arguments": json.dumps({"tag": tag})}}]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
        {"role": "assistant", "content": f"All done for {tag}: {result}"},
    ]


async def test_hundreds_of_agents_at_once_each_keep_their_own_conversation(
    model: ScriptedModel, fragola: Fragola
) -> None:
    tags = [f"tag-{n}" for n in range(300)]
    agents = [make_agent(fragola, tag, stream=n % 3 == 0) for n, tag in enumerate(tags)]

    states = await asyncio.gather(
        *(agent.user_message(f"I am {tag}") for agent, tag in zip(agents, tags, strict=True))
    )

    assert len(model.requests) == 600
    call_ids = set()
    for agent, tag, state in zip(agents, tags, states, strict=True):
        assert (state.status, state.outcome, state.step_count) == ("idle", "finished", 2)
        check_agent(agent)
        assert_only_own_messages(agent, tag)
        call_id = state.messages[1]["tool_calls"][0]["id"]
        call_ids.add(call_id)
        assert state.messages == turn(tag, call_id)
        assert agent.stores["mine"].get() == {"tag": tag, "calls": 1, "seen": [tag]}
    assert len(call_ids) == 300
    assert fragola.get_store("total").get() == 300


async def test_forks_of_one_agent_run_at_once_beside_it_without_mixing(
    model: ScriptedModel, fragola: Fragola
) -> None:
    root = make_agent(fragola, "tag-root", stream=True)
    await root.user_message("I am tag-root")
    forks = [root.fork(f"tag-fork-{n}") for n in range(100)]
    shared = root.state.messages

    # The root goes on too, while its forks run.
    states = await asyncio.gather(
        root.user_message("I am tag-root-again"),
        *(fork.user_message(f"I am {fork.name}") for fork in forks),
    )

    assert len(model.requests) == 2 + 2 * 101
    root_state, fork_states = states[0], states[1:]
    assert root_state.messages[:4] == shared
    assert_only_own_messages(root, "tag-root-again", since=4)
    assert root.stores["mine"].get()["seen"] == ["tag-root", "tag-root-again"]
    for fork, state in zip(forks, fork_states, strict=True):
        assert (state.status, state.outcome) == ("idle", "finished")
        check_agent(fork)
        assert fork.fork_point == 4
        assert state.messages[:4] == shared  # the very same messages, untouched
        assert all(a is b for a, b in zip(state.messages[:4], shared, strict=True))
        assert_only_own_messages(fork, fork.name, since=4)
        call_id = state.messages[5]["tool_calls"][0]["id"]
        # The fork's store started as a copy of the root's, with the root's first note.
        assert state.messages[4:] == turn(fork.name, call_id, note=2)
        assert fork.stores["mine"].get() == {"tag": "tag-root", "calls": 2,
                                              "seen": ["tag-root", fork.name]}
    assert fragola.get_store("total").get() == 1 + 101


# -- listeners and handlers that raise, among many healthy agents ------------------------


def _sync_listener_raises(agent: Agent) -> Callable[[], None]:
    def refuse(event: Any) -> None:
        raise ValueError("sync listener refuses")

    return agent.on_ai_message(refuse)


def _async_listener_raises(agent: Agent) -> Callable[[], None]:
    async def refuse(event: Any) -> None:
        await asyncio.sleep(0)
        raise ValueError("async listener refuses")

    return agent.on_before_tool_call(refuse)


def _async_observer_raises(agent: Agent) -> Callable[[], None]:
    async def refuse(event: Any) -> None:
        await asyncio.sleep(0)
        if event.message and event.message["role"] == "tool":
            raise ValueError("async observer refuses")

    return agent.on_after_state_update(refuse)


def _status_listener_raises(agent: Agent) -> Callable[[], None]:
    def refuse(event: Any) -> None:
        if event.status == "idle":
            raise ValueError("status listener refuses")

    return agent.on_status_change(refuse)


FAULTY_LISTENERS = {
    "ai_message": _sync_listener_raises,
    "before_tool_call": _async_listener_raises,
    "after_state_update": _async_observer_raises,
    "status_change": _status_listener_raises,
}


@tool
async def shaky(tag: str) -> str:
    """A handler that fails."""
    await asyncio.sleep(0)
    raise RuntimeError(f"shaky broke for {tag}")


def _shaky_brain(request: dict[str, Any]) -> Item:
    if request["messages"][-1]["role"] == "user" and "shaky" in request["messages"][-1]["content"]:
        tag = TAG.findall(request["messages"][-1]["content"])[-1]
        return tool_calls(call("shaky", {"tag": tag}))
    return brain(request)


async def test_raising_listeners_and_handlers_are_reported_and_leave_every_agent_valid(
    model: ScriptedModel, fragola: Fragola
) -> None:
    model.brain = _shaky_brain
    kinds = [*FAULTY_LISTENERS, "handler", "healthy"]
    agents, unsubscribe = [], []
    for n in range(48):
        kind = kinds[n % len(kinds)]
        agent = make_agent(fragola, f"tag-{kind}-{n}", stream=n % 12 < 6)  # each kind both ways
        agent.options.tools.append(shaky)
        agents.append((agent, kind))
        if kind in FAULTY_LISTENERS:
            unsubscribe.append(FAULTY_LISTENERS[kind](agent))

    results = await asyncio.gather(
        *(a.user_message(f"I am {a.name}" + (" shaky" if kind == "handler" else ""))
          for a, kind in agents),
        return_exceptions=True,
    )

    for (agent, kind), result in zip(agents, results, strict=True):
        check_agent(agent)
        assert agent.status == "idle"
        assert_only_own_messages(agent, agent.name)
        if kind in FAULTY_LISTENERS:
            assert isinstance(result, ListenerError), (kind, result)
            assert result.event == kind
            assert "refuses" in str(result)
            assert isinstance(result.__cause__, ValueError)
        else:
            assert not isinstance(result, BaseException), (kind, result)
            assert result.outcome == "finished"
        if kind == "handler":
            error = result.messages[2]["content"]
            assert error == (f"Error: the tool 'shaky' raised RuntimeError: "
                             f"shaky broke for {agent.name}")

    # Without the faulty listeners, every agent carries on from where it was left.
    for off in unsubscribe:
        off()
    model.brain = brain
    again = await asyncio.gather(*(a.user_message(f"Again {a.name}") for a, _ in agents))
    for (agent, _), state in zip(agents, again, strict=True):
        assert state.outcome == "finished"
        check_agent(agent)
        assert_only_own_messages(agent, agent.name)
