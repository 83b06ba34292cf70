"""``agent.batch`` as a user meets it: resume paths given in ways people write them (not a path,
``~``), one resume file shared by two batches at once, rows in input order whatever order
they finish in, the summary of one input, and ``to_pandas`` keeping tokens whole (unknown as
NA) for a batch and a comparison."""
from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest
from support.helpers import assert_valid_history, make_agent, user

from fragola_nb import BadUsage
from fragola_nb.models.scripted import Item, ScriptedModel, hang, reply


def echo(request: dict[str, Any]) -> Item:
    """Answers with the last user text; ``slow`` waits for ``model.release()`` first."""
    text = str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])
    if "slow" in text:
        return hang(then=reply(f"late: {text}"))
    return reply(f"answer to {text}")


async def wait_for_requests(model: ScriptedModel, n: int) -> None:
    assert await asyncio.to_thread(model.wait_for_requests, n), f"{n} request(s) never came"


async def test_a_resume_path_that_is_not_a_path_is_bad_usage(model: ScriptedModel,
                                                             tmp_path: Path) -> None:
    model.brain = echo
    agent = make_agent(model)
    for wrong in (5, b"rows.jsonl", ["rows.jsonl"], ""):
        with pytest.raises(BadUsage, match="resume= takes a file path"):
            await agent.batch(["a"], resume=wrong, progress=False)  # type: ignore[arg-type]
    assert model.requests == [] and agent.status == "idle"


async def test_a_resume_path_may_start_with_the_home_folder(
        model: ScriptedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model.brain = echo
    monkeypatch.setenv("HOME", str(tmp_path))
    agent = make_agent(model)
    result = await agent.batch(["a"], resume="~/rows.jsonl", progress=False)
    assert result.answers == ["answer to a"]
    [line] = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert json.loads(line)["answer"] == "answer to a"


async def test_two_batches_on_one_resume_file_at_once_the_second_is_refused(
        model: ScriptedModel, tmp_path: Path) -> None:
    model.brain = echo
    path = tmp_path / "rows.jsonl"
    first, second = make_agent(model, name="one"), make_agent(model, name="two")
    running = asyncio.ensure_future(first.batch(["slow a", "b"], concurrency=1, resume=path,
                                                progress=False))
    await wait_for_requests(model, 1)

    with pytest.raises(BadUsage, match="is the resume file of a batch still running"):
        await second.batch(["slow a", "b"], resume=str(path), progress=False)
    assert second.status == "idle" and len(model.requests) == 1

    model.release()
    result = await running
    assert result.answers == ["late: slow a", "answer to b"]
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["index"], r["status"]) for r in rows] == [(0, "done"), (1, "done")]
    # Once the first has ended, the file is free: the second reads its rows back.
    again = await second.batch(["slow a", "b"], resume=path, progress=False)
    assert [row.resumed for row in again] == [True, True] and len(model.requests) == 2


async def test_rows_come_back_in_input_order_whatever_order_they_finish_in(
        model: ScriptedModel) -> None:
    delays = {f"q{i}": random.Random(i).random() * 0.02 for i in range(200)}

    def brain(request: dict[str, Any]) -> Item:
        text = str(request["messages"][-1]["content"])
        return hang(delays[text], then=reply(f"answer to {text}"))

    model.brain = brain
    agent = make_agent(model, name="calc")
    result = await agent.batch((f"q{i}" for i in range(200)), concurrency=50, progress=False)

    assert [row.index for row in result] == list(range(200))
    assert result.answers == [f"answer to q{i}" for i in range(200)]
    assert result.done == 200 and agent.state.messages == [] and agent.forks == ()
    for row in result[:3]:
        assert row.fork is not None
        assert_valid_history(row.fork.state.messages)
        assert row.fork.state.messages[0] == user(row.input)  # type: ignore[arg-type]


async def test_the_summary_counts_one_input_in_the_singular(model: ScriptedModel) -> None:
    model.brain = echo
    agent = make_agent(model)
    one = await agent.batch(["a"], progress=False)
    assert repr(one).startswith("BatchResult(1 input: 1 done, 0 failed; ")
    none = await agent.batch([], progress=False)
    assert repr(none).startswith("BatchResult(0 inputs: 0 done, 0 failed; no model calls")


async def test_to_pandas_keeps_tokens_whole_with_unknown_as_na(model: ScriptedModel) -> None:
    from fragola_nb.models.scripted import raw

    # The first input's server reports no usage: its tokens are unknown, the others stay ints.
    model.brain = echo
    model.push(raw(json.dumps({"id": "c", "object": "chat.completion", "created": 0,
                               "model": "m", "choices": [{
                                   "index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": "x"}}]})))
    agent = make_agent(model)
    frame = (await agent.batch(["b", "c"], progress=False, concurrency=1)).to_pandas()
    assert str(frame["tokens"].dtype) == "Int64"
    assert frame["tokens"].isna().tolist() == [True, False] and int(frame["tokens"][1]) > 0
    comparison = await agent.compare("go", {"a": {}, "b": {}})
    assert str(comparison.to_pandas()["tokens"].dtype) == "Int64"
