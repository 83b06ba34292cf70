"""``stop_sync()`` while an experiment grades: a judge whose server never answers is cancelled
at once (not left to the client's 10-minute timeout), in evaluate, batch and compare; and a
judge on a model without a price under a usd budget is refused before anything is sent."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from support.helpers import make_fragola, until_async
from support.invariants import check_agent

from fragola_nb import Agent, BadUsage, Budget
from fragola_nb.graders import contains, judge
from fragola_nb.models.scripted import ScriptedModel, hang, reply

JUDGE_MARK = "[fragola_nb judge]"  # in every judge's system prompt


def judged_requests(model: ScriptedModel) -> list[dict[str, Any]]:
    return [r for r in model.requests if JUDGE_MARK in str(r["messages"][0].get("content"))]


def hanging_judge(request: dict[str, Any]) -> Any:
    """The runs are answered; the judge's request hangs until the server stops."""
    if JUDGE_MARK in str(request["messages"][0].get("content")):
        return hang()
    return reply("Paris")


async def stopped_while_judging(model: ScriptedModel, agent: Agent,
                                start: Callable[[], Awaitable[Any]]) -> Any:
    task = asyncio.ensure_future(start())
    await until_async(lambda: judged_requests(model), timeout=30)
    agent.stop_sync()
    # Without the stop reaching the judge, this waits for the client's timeout (10 minutes).
    return await asyncio.wait_for(task, 60)


async def test_stop_sync_cancels_a_hanging_judge_of_an_evaluation(model: ScriptedModel
                                                                 ) -> None:
    model.brain = hanging_judge
    fragola = make_fragola(model)
    agent = fragola.agent("graded")

    evaluation = await stopped_while_judging(model, agent, lambda: agent.evaluate(
        ["Capital of France?"], graders=[contains("Paris"), judge("Says \"Paris\".")],
        progress=False))

    [row] = list(evaluation)
    assert row.status == "stopped" and not row.finished  # runs again on resume
    assert evaluation.stopped and len(judged_requests(model)) == 1
    check_agent(agent)
    await fragola.aclose()


async def test_stop_sync_cancels_a_hanging_judge_of_a_batch(model: ScriptedModel) -> None:
    model.brain = hanging_judge
    fragola = make_fragola(model)
    agent = fragola.agent("graded")

    result = await stopped_while_judging(model, agent, lambda: agent.batch(
        ["a", "b"], graders=[judge("Says \"Paris\".")], concurrency=1, progress=False))

    assert [row.status for row in result] == ["done", "done"]  # the runs finished
    assert [row.grades for row in result] == [(), ()] and result.stopped
    assert len(judged_requests(model)) == 1  # the second row's judge never started
    check_agent(agent)
    await fragola.aclose()


async def test_stop_sync_cancels_a_hanging_judge_of_a_compare(model: ScriptedModel) -> None:
    model.brain = hanging_judge
    fragola = make_fragola(model)
    agent = fragola.agent("graded")

    comparison = await stopped_while_judging(model, agent, lambda: agent.compare(
        "Capital of France?", {"a": {}}, graders=[judge("Says \"Paris\".")]))

    [row] = comparison.table()
    assert row["status"] == "stopped" and "graded" in row["error"]
    check_agent(agent)
    await fragola.aclose()


@pytest.mark.parametrize("experiment", ["evaluate", "batch", "compare"])
async def test_a_judge_on_an_unpriced_model_under_a_usd_budget_is_refused_up_front(
        model: ScriptedModel, experiment: str) -> None:
    model.brain = lambda request: reply("Paris")
    fragola = make_fragola(model, model="gpt-4o-mini")
    agent = fragola.agent("graded")
    graders = [judge("Says \"Paris\".", model="no-such-judge-xyz")]
    budget = Budget(usd=1)
    calls = {
        "evaluate": lambda: agent.evaluate(["q"], graders=graders, budget=budget,
                                           progress=False),
        "batch": lambda: agent.batch(["q"], graders=graders, budget=budget, progress=False),
        "compare": lambda: agent.compare("q", {"a": {}}, graders=graders, budget=budget),
    }

    with pytest.raises(BadUsage, match="'no-such-judge-xyz' has no known price"):
        await calls[experiment]()

    assert model.requests == [] and agent.forks == ()
    await fragola.aclose()
