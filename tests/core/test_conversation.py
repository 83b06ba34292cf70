"""An agent's state is one object, ``agent.conversation``, and what its turns depend on
another, ``agent.deps`` (issue 35): the agent reads and changes that one state (no second
copy), its methods tell the listeners as the run loop's own changes do, and a snapshot is
that state as a value."""

from __future__ import annotations

from typing import Any

from support.helpers import add_tool, make_agent

from fragola_nb.core.conversation import AgentSnapshot, Conversation, RunDeps
from fragola_nb.core.state import PendingCall
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls


async def test_the_agent_reads_its_one_conversation(model: ScriptedModel) -> None:
    model.push(reply("4"))
    agent = make_agent(model)
    assert isinstance(agent.conversation, Conversation) and isinstance(agent.deps, RunDeps)
    state = await agent.user_message("2 + 2?")
    conv = agent.conversation
    assert state.messages == conv.history.to_list() and agent.message_count == len(conv.history)
    assert (agent.status, agent.outcome, agent.step_count) == (conv.status, conv.outcome, 1)
    assert agent.usage is conv.usage and agent.usage.requests == 1
    assert agent.options is agent.deps.options and agent.fragola is agent.deps.fragola


async def test_its_methods_tell_the_listeners(model: ScriptedModel) -> None:
    agent = make_agent(model)
    heard: list[tuple[str, Any]] = []
    agent.on_after_state_update(lambda event: heard.append(("update", event.reason)))
    agent.on_status_change(lambda event: heard.append(("status", event.status)))
    conv = agent.conversation
    stored = conv.append({"role": "user", "content": "Hi"}, "user_message")
    conv.add_pending(PendingCall("c1", "add", {"a": 1}, {"a": 1}, "approval"))
    conv.set_status("waiting")
    conv.set_status("waiting")  # no change: no event
    assert stored == {"role": "user", "content": "Hi"}
    assert heard == [("update", "user_message"), ("update", "pending"), ("status", "waiting")]
    assert [p.id for p in agent.pending] == ["c1"] and agent.status == "waiting"


async def test_a_snapshot_is_that_state_as_a_value(model: ScriptedModel) -> None:
    model.push(tool_calls(call("add", {"a": 1, "b": 2}, id="c1")))
    agent = make_agent(model, add_tool())
    await agent.user_message("1 + 2?")
    snapshot = agent.snapshot()
    assert isinstance(snapshot, AgentSnapshot) and snapshot.history is agent.conversation.history
    other = make_agent(model, add_tool(), name="other")
    other.restore(snapshot)
    assert other.state == agent.state and other.conversation.pending == agent.conversation.pending
    other.reject("c1", "no")
    assert agent.conversation.pending["c1"].decision is None  # restored, not shared
