"""Budgets: once money, tokens or time run out, nothing more is sent and the turn ends
with outcome "budget", its history a valid next request.

The scripted model reports one token per word (``fragola_nb.models.scripted.wire.usage``), so
the counts here are small and exact; the requests the server received are counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.helpers import make_fragola
from support.invariants import check_agent

from fragola_nb import BadUsage, Budget, Fragola, load_session, save_session
from fragola_nb.core.tools import tool
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls

PRICED = {"scripted": {"input": 1_000_000.0, "output": 1_000_000.0}}  # $1 a token


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def adding(times: int) -> list[Any]:
    return [tool_calls(call("add", {"a": i, "b": 1}, id=f"c{i}")) for i in range(times)]


async def test_a_tokens_budget_ends_the_turn_before_the_next_call(model: ScriptedModel
                                                                  ) -> None:
    model.push(*adding(3), reply("unreached"), reply("later"))
    fragola = make_fragola(model)
    agent = fragola.agent("adder", tools=[add])

    state = await agent.user_message("add things", budget=Budget(tokens=1))

    assert len(model.requests) == 1  # the call in flight finished; nothing more was sent
    assert (state.outcome, state.status, state.step_count) == ("budget", "idle", 1)
    assert state.spent is not None and state.spent.startswith("budget spent: ")
    assert state.spent.endswith(" of 1 tokens")
    assert state.messages[-1]["role"] == "tool"  # the call's tool ran and was answered
    check_agent(agent)
    # The budget was this call's only: the next one goes on, and says nothing was spent.
    again = await agent.user_message("go on")
    assert again.outcome == "step_limit" or again.outcome == "finished"
    assert again.spent is None
    await fragola.aclose()


async def test_a_budget_that_holds_changes_nothing(model: ScriptedModel) -> None:
    model.push(*adding(1), reply("done"))
    fragola = make_fragola(model)
    agent = fragola.agent("adder", tools=[add])

    state = await agent.user_message("add", budget=Budget(tokens=10_000, seconds=60))

    assert (state.outcome, len(model.requests)) == ("finished", 2)
    await fragola.aclose()


async def test_a_fragola_budget_covers_every_agent_and_fork(model: ScriptedModel) -> None:
    model.push(reply("one two three"), reply("unreached"))
    fragola = make_fragola(model, budget=Budget(tokens=1))
    first = fragola.agent("first")
    await first.user_message("hello")
    fork = first.fork("again")
    other = fragola.agent("other")

    for agent in (fork, other):
        state = await agent.user_message("more")
        assert (state.outcome, state.spent) == ("budget", fragola.meter and fragola.meter.spent)
        check_agent(agent)
    assert len(model.requests) == 1
    assert fragola.meter is not None and fragola.meter.tokens == model.responses[0]["usage"][
        "total_tokens"]
    await fragola.aclose()


async def test_a_step_budget_and_a_seconds_budget_of_zero_send_nothing(model: ScriptedModel
                                                                        ) -> None:
    model.push(reply("unreached"))
    fragola = make_fragola(model)
    agent = fragola.agent("idle")

    state = await agent.user_message("hi", budget=Budget(seconds=0))
    assert (state.outcome, state.messages) == ("budget", [{"role": "user", "content": "hi"}])
    assert state.spent is not None and "seconds" in state.spent
    state = await agent.step(budget=Budget(seconds=0))
    assert state.outcome == "budget"
    assert model.requests == []
    await fragola.aclose()


async def test_a_usd_budget_counts_the_priced_cost(model: ScriptedModel) -> None:
    model.push(*adding(2), reply("unreached"))
    fragola = make_fragola(model, prices=PRICED, model="scripted")
    agent = fragola.agent("adder", tools=[add])

    state = await agent.user_message("add", budget=Budget(usd=0.5))

    assert state.outcome == "budget" and len(model.requests) == 1
    assert state.spent is not None and state.spent.startswith("budget spent: $")
    await fragola.aclose()


async def test_a_usd_budget_on_a_model_without_a_price_is_refused_before_sending(
    model: ScriptedModel,
) -> None:
    model.push(reply("unreached"))
    fragola = make_fragola(model, model="no-such-model-xyz")
    agent = fragola.agent("unpriced")

    with pytest.raises(BadUsage, match="'no-such-model-xyz' has no known price"):
        await agent.user_message("hi", budget=Budget(usd=1))
    with pytest.raises(BadUsage, match="no known price"):
        make_fragola(model, model="no-such-model-xyz", budget=Budget(usd=1))
    assert model.requests == [] and agent.state.messages == []
    await fragola.aclose()


@pytest.mark.parametrize("bad", [
    {"tokens": -1}, {"tokens": 1.5}, {"usd": "1"}, {"seconds": float("nan")}, {"usd": True}, {},
])
def test_a_budget_that_makes_no_sense_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(BadUsage, match="Budget"):
        Budget(**bad)


async def test_budget_must_be_a_budget(model: ScriptedModel) -> None:
    fragola = make_fragola(model)
    with pytest.raises(BadUsage, match="budget must be a Budget"):
        await fragola.agent("a").user_message("hi", budget=100)  # type: ignore[arg-type]
    assert model.requests == []


def test_a_scripted_fragola_with_an_unpriced_usd_budget_starts_no_server() -> None:
    import threading

    before = threading.active_count()
    with pytest.raises(BadUsage, match="'scripted' has no known price"):
        Fragola.scripted(budget=Budget(usd=1))
    assert threading.active_count() == before
    Fragola.scripted(budget=Budget(usd=1), prices=PRICED).scripted_model.stop()  # type: ignore[union-attr]


async def test_an_agent_whose_turn_the_budget_ended_is_saved_and_loaded(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    model.push(reply("unreached"))
    fragola = make_fragola(model)
    agent = fragola.agent("saved")
    await agent.user_message("hi", budget=Budget(seconds=0))

    path = save_session(tmp_path / "s.json", agent)
    loaded = load_session(path, fragola)

    assert loaded.agents[0].state.outcome == "budget"
    assert loaded.agents[0].state.messages == agent.state.messages
    await fragola.aclose()
