"""The agent's cheap read-only views (``message_count``, ``pending``, ``outcome``,
``messages_since``) say what ``agent.state`` says, at every event of a run with tool calls and
approvals, and on forks.
"""

from __future__ import annotations

from typing import Any

import pydantic
from support.helpers import make_fragola, user

from fragola_nb import tool
from fragola_nb.core.agent import Agent
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls


class AddArgs(pydantic.BaseModel):
    a: int
    b: int


def make_agent(model: ScriptedModel, name: str = "viewed") -> Agent:
    add = tool(name="add", description="Add.", schema=AddArgs, handler=lambda p: p.a + p.b,
               require_approval=lambda p, c: p.a > 1)
    return make_fragola(model).agent(name, tools=[add], messages=[user("start")])


def views_match_state(agent: Agent) -> None:
    state = agent.state
    assert agent.message_count == len(state.messages)
    assert agent.pending == state.pending
    assert agent.outcome == state.outcome
    count = len(state.messages)
    for index in (0, 1, count - 1, count, count + 3, -1, -2, -count - 5):
        since = agent.messages_since(index)
        assert since == state.messages[index:]
        assert all(a is b for a, b in zip(since, state.messages[index:], strict=True))


def check_at_every_event(agent: Agent) -> list[str]:
    seen: list[str] = []

    def check(event: Any) -> None:
        views_match_state(event.context.agent)
        seen.append(getattr(event, "reason", None) or event.status)

    agent.on_after_state_update(check)
    agent.on_status_change(check)
    return seen


async def test_views_match_the_state_through_calls_approvals_and_forks(
    model: ScriptedModel,
) -> None:
    agent = make_agent(model)
    seen = check_at_every_event(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 2})))
    paused = await agent.user_message("add twice")
    assert paused.outcome == "paused" and len(agent.pending) == 1
    assert agent.pending[0].decision is None
    views_match_state(agent)
    agent.approve(agent.pending[0].id)
    assert agent.pending[0].decision is not None
    fork = agent.fork("branch")  # forked while paused: it inherits the decided call
    views_match_state(fork)
    model.push(reply("4 and 2"))
    await agent.step()
    assert agent.pending == () and agent.message_count == 6
    views_match_state(agent)
    views_match_state(fork)  # the parent went on: the fork sees what it saw
    assert fork.message_count == 4 and len(fork.pending) == 1
    model.push(reply("branch answer"), reply("again"))
    await fork.step()
    await fork.user_message("more")
    views_match_state(fork)
    assert fork.messages_since(fork.fork_point) == [
        {"role": "tool", "tool_call_id": "call_2", "content": "4"},
        {"role": "assistant", "content": "branch answer"},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": "again"},
    ]
    views_match_state(fork.fork("deeper"))  # a fork of a fork
    agent.reset()
    views_match_state(agent)
    assert {"pending", "tool_result", "ai_message", "fork", "reset", "waiting", "idle"} <= set(seen)

