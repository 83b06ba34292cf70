"""A budget holds across every wait before a send: a request that waited for its turn under a
``RateLimit``, or for a retry after a 429, sends nothing once the budget was spent meanwhile;
and a usd budget holds for the model the request names when it goes out (one a listener
switched to), nothing sent when that model has no price."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.helpers import make_fragola
from support.invariants import check_agent

from fragola_nb import BadUsage, Budget, Fragola, RateLimit
from fragola_nb.models.scripted import ScriptedModel, fail, reply

PRICED = {"scripted": {"input": 1_000_000.0, "output": 1_000_000.0}}  # $1 a token


async def test_requests_waiting_on_a_rate_limit_send_nothing_once_the_budget_is_spent(
        model: ScriptedModel) -> None:
    model.brain = lambda request: reply("one two three four five")
    # One request every 2 s: the second waits its turn while the first spends the budget.
    fragola = make_fragola(model, rate_limit=RateLimit(rpm=30))
    agent = fragola.agent("batcher")

    result = await agent.batch(["a", "b", "c"], concurrency=3, progress=False,
                               budget=Budget(tokens=1))

    assert len(model.requests) == 1
    assert [row.status for row in result] == ["done", "not run", "not run"]
    check_agent(agent)
    await fragola.aclose()


async def test_a_retry_waiting_out_a_429_sends_nothing_once_the_budget_is_spent(
        model: ScriptedModel) -> None:
    def brain(request: dict[str, Any]) -> Any:
        if request["messages"][-1]["content"] == "slow":
            return fail(429, "slow down", headers={"retry-after-ms": "1500"})
        return reply("spent it all")

    model.brain = brain
    fragola = Fragola(api_key="test-key", base_url=model.base_url, max_retries=3,
                      budget=Budget(tokens=1))
    waiting, spender = fragola.agent("waiting"), fragola.agent("spender")
    heard: list[float] = []
    waiting.on_throttled(lambda event: heard.append(event.seconds))

    async def spend_while_it_waits() -> None:
        while not heard:  # the 429 was heard: the retry now waits 1.5 s
            await asyncio.sleep(0.01)
        await spender.user_message("go")

    state, _ = await asyncio.gather(waiting.user_message("slow"), spend_while_it_waits())

    assert state.outcome == "budget" and state.spent is not None
    assert [r["messages"][-1]["content"] for r in model.requests] == ["slow", "go"]
    check_agent(waiting)
    await fragola.aclose()


async def test_a_listener_switching_to_an_unpriced_model_under_a_usd_budget_is_refused(
        model: ScriptedModel) -> None:
    model.push(reply("unreached"))
    fragola = make_fragola(model, prices=PRICED, model="scripted")
    agent = fragola.agent("switcher")
    agent.on_before_model_invocation(lambda event: {**event.config,
                                                    "model": "no-such-model-xyz"})

    with pytest.raises(BadUsage, match="'no-such-model-xyz' has no known price"):
        await agent.user_message("hi", budget=Budget(usd=1))

    assert model.requests == []
    check_agent(agent)
    agent.off("before_model_invocation", agent.own_listeners()["before_model_invocation"][0])
    assert (await agent.step(budget=Budget(usd=1))).outcome == "finished"
    await fragola.aclose()


async def test_a_fragola_usd_budget_holds_for_a_switched_model_too(model: ScriptedModel
                                                                   ) -> None:
    model.push(reply("unreached"))
    fragola = make_fragola(model, prices=PRICED, model="scripted",
                           budget=Budget(usd=1))
    agent = fragola.agent("json", model_settings={})
    agent.on_before_model_invocation(lambda event: {**event.config, "model": "gpt-unknown-1"})

    with pytest.raises(BadUsage, match="'gpt-unknown-1' has no known price"):
        await agent.user_message("hi")
    assert model.requests == []
    await fragola.aclose()

