"""A budget over a whole batch or compare: once spent, no input or variant starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.helpers import make_fragola
from support.invariants import check_agent

from fragola_nb import BadUsage, Budget, SimulatedUser
from fragola_nb.models.scripted import ScriptedModel, demo_brain


async def test_a_batch_budget_leaves_the_rest_not_run(model: ScriptedModel, tmp_path: Path
                                                      ) -> None:
    model.brain = demo_brain
    fragola = make_fragola(model)
    agent = fragola.agent("batcher")
    inputs = [f"question {i}" for i in range(5)]
    rows = tmp_path / "rows.jsonl"

    result = await agent.batch(inputs, concurrency=1, progress=False, resume=rows,
                               budget=Budget(tokens=1))

    assert [row.status for row in result] == ["done"] + ["not run"] * 4
    assert [row.error for row in result][1:] == ["not run: budget"] * 4
    assert len(model.requests) == 1
    check_agent(agent)
    # The rows the budget left were not written: resumed without it, only they are sent.
    again = await agent.batch(inputs, concurrency=2, progress=False, resume=rows)
    assert [row.status for row in again] == ["done"] * 5
    assert len(model.requests) == 5
    await fragola.aclose()


async def test_a_fragola_budget_holds_across_a_batch(model: ScriptedModel) -> None:
    model.brain = demo_brain
    fragola = make_fragola(model, budget=Budget(tokens=1))
    agent = fragola.agent("batcher")

    result = await agent.batch(["a", "b", "c"], concurrency=1, progress=False)

    assert [row.status for row in result] == ["done", "not run", "not run"]
    assert len(model.requests) == 1
    await fragola.aclose()


async def test_a_compare_budget_starts_no_variant_once_spent(model: ScriptedModel) -> None:
    model.brain = demo_brain
    fragola = make_fragola(model)
    agent = fragola.agent("comparer")
    variants = {"a": {}, "b": {"instructions": "Be brief."}, "c": {}}

    comparison = await agent.compare("hello", variants, concurrency=1, budget=Budget(tokens=1))

    rows = comparison.table()
    assert [row["status"] for row in rows] == ["finished", "budget", "budget"]
    assert all(row["error"].startswith("not run: budget (budget spent: ") for row in rows[1:])
    assert len(model.requests) == 1
    await fragola.aclose()


async def test_a_usd_budget_on_a_variant_without_a_price_makes_nothing(model: ScriptedModel
                                                                       ) -> None:
    fragola = make_fragola(model, model="gpt-4o-mini")
    agent = fragola.agent("comparer")
    variants = {"known": {}, "odd": {"model": "no-such-model-xyz"}}

    with pytest.raises(BadUsage, match="'no-such-model-xyz' has no known price"):
        await agent.compare("hello", variants, budget=Budget(usd=0.01))
    with pytest.raises(BadUsage, match="no known price"):
        await fragola.agent("b", model_settings={"model": "no-such-model-xyz"}).batch(
            ["x"], progress=False, budget=Budget(usd=0.01))

    assert agent.forks == () and model.requests == []
    await fragola.aclose()


async def test_a_usd_budget_with_a_simulated_user_without_a_price_makes_nothing(
        model: ScriptedModel) -> None:
    # checked up front, as a judge's model is: not a failed row each, once calls were paid
    fragola = make_fragola(model, model="gpt-4o-mini")
    agent = fragola.agent("evaluator")
    cases = [{"user": SimulatedUser('Ask "hi"', model="no-such-model-xyz")}, "plain"]

    with pytest.raises(BadUsage, match="'no-such-model-xyz' has no known price"):
        await agent.evaluate(cases, progress=False, budget=Budget(usd=0.01))

    assert agent.forks == () and model.requests == []
    await fragola.aclose()
