"""The agent's listeners and its experiments (``agent.compare``, ``agent.batch``): a listener
that raises as an experiment starts leaves nothing behind, one that raises as it ends keeps
its rows, a fork refused by a listener leaves no fork, and a batch tells the agent's
listeners only that it began and ended."""
from __future__ import annotations

from typing import Any

import pytest
from support.helpers import make_agent

from fragola_nb.base.errors import ListenerError
from fragola_nb.models.scripted import Item, ScriptedModel, reply


def echo(request: dict[str, Any]) -> Item:
    """Answers with the last user text."""
    text = str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])
    return reply(f"answer to {text}")


def raising(event: Any) -> None:
    raise RuntimeError("this listener is broken")


@pytest.mark.parametrize("reason", ["fork", "experiment"])
async def test_compare_and_batch_leave_nothing_when_a_listener_raises_as_they_start(
        model: ScriptedModel, reason: str) -> None:
    model.brain = echo
    agent = make_agent(model, name="base")

    def broken(event: Any) -> None:
        if event.reason == reason:
            raise RuntimeError("this listener is broken")

    subscription = agent.on_after_state_update(broken)
    with pytest.raises(ListenerError, match="this listener is broken"):
        await agent.compare("go", {"a": {}, "b": {}})
    assert agent.forks == () and agent.experiments == () and agent.status == "idle"
    if reason == "fork":  # a batch's forks are in no tree: no fork event to fail on
        assert (await agent.batch(["a"], progress=False)).answers == ["answer to a"]
        model.requests.clear()
    else:
        with pytest.raises(ListenerError, match="this listener is broken"):
            await agent.batch(["a", "b"], progress=False)
    assert agent.forks == () and agent.experiments == () and model.requests == []

    subscription.unsubscribe()  # fixed: the agent works as before
    comparison = await agent.compare("go", {"a": {}})
    assert comparison.table()[0]["answer"] == "answer to go"
    assert (await agent.batch(["b"], progress=False)).answers == ["answer to b"]


async def test_a_listener_raising_as_an_experiment_ends_keeps_its_rows(
        model: ScriptedModel, caplog: pytest.LogCaptureFixture) -> None:
    model.brain = echo
    agent = make_agent(model, name="base")
    began: list[str] = []

    def on_end(event: Any) -> None:
        if event.reason == "experiment":
            began.append("x")
            if len(began) % 2 == 0:  # the second "experiment" event: the end
                raise RuntimeError("broken at the end")

    agent.on_after_state_update(on_end)
    comparison = await agent.compare("go", {"a": {}})
    assert comparison.table()[0]["answer"] == "answer to go"
    result = await agent.batch(["b"], progress=False)
    assert result.answers == ["answer to b"] and agent.experiments == ()
    assert "broken at the end" in caplog.text


def test_fork_that_raises_for_a_listener_leaves_no_fork_behind(model: ScriptedModel) -> None:
    agent = make_agent(model)
    agent.on_after_state_update(raising)
    with pytest.raises(ListenerError):
        agent.fork("a")
    assert agent.forks == ()


async def test_a_batch_tells_the_agents_listeners_only_that_it_began_and_ended(
        model: ScriptedModel) -> None:
    # Its forks are in no tree: a listener counting the agent's forks hears no fork or drop
    # per input; each fork's own messages are heard as any fork's.
    model.brain = echo
    agent = make_agent(model, name="base")
    heard: list[tuple[str, str]] = []
    agent.on_after_state_update(lambda e: heard.append((e.context.agent.name, e.reason)))
    result = await agent.batch(["a", "b", "c"], progress=False)
    assert result.answers == ["answer to a", "answer to b", "answer to c"]
    assert heard.count(("base", "experiment")) == 2
    assert not [h for h in heard if h[1] in ("fork", "drop")]
    assert sorted(name for name, reason in heard if reason == "ai_message") == [
        "base-batch0", "base-batch1", "base-batch2"]
    assert agent.forks == () and all(row.fork.fork_of == agent.id for row in result)
