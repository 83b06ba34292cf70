"""``agent.compare`` and ``agent.batch`` at their edges, as a user meets them, with the compare
grid's kernel side: stops, odd names, the resume file shared by two batches, paths given in
ways people write them, listeners that raise as an experiment starts or ends."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.helpers import assert_valid_history, make_agent, user

from fragola_nb import BadUsage, Comparison
from fragola_nb.base.errors import ListenerError
from fragola_nb.experiments.compare.comparison import WATCHERS
from fragola_nb.models.scripted import Item, ScriptedModel, hang, reply
from fragola_nb.notebook.compare.view import CompareView
from fragola_nb.notebook.panel.view import AgentPanel


def echo(request: dict[str, Any]) -> Item:
    """Answers with the last user text; ``slow`` waits for ``model.release()`` first."""
    text = str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])
    if "slow" in text:
        return hang(then=reply(f"late: {text}"))
    return reply(f"answer to {text}")


async def wait_for_requests(model: ScriptedModel, n: int) -> None:
    assert await asyncio.to_thread(model.wait_for_requests, n), f"{n} request(s) never came"


# -- compare -------------------------------------------------------------------------------------

async def test_stop_lets_a_running_variant_finish_and_its_answer_is_a_finished_row(
        model: ScriptedModel) -> None:
    model.brain = echo
    agent = make_agent(model, name="base")
    task = asyncio.ensure_future(agent.compare("slow one", {"a": {}, "b": {}}, concurrency=1))
    await wait_for_requests(model, 1)
    agent.stop()
    model.release()
    comparison = await task

    rows = comparison.table()
    # The reply in flight was the final answer: not "stopped before a final answer".
    assert (rows[0]["status"], rows[0]["answer"], rows[0]["error"]) == (
        "finished", "late: slow one", None)
    assert (rows[1]["status"], rows[1]["error"]) == ("not_started", "stopped before it started")
    assert agent.status == "idle" and len(model.requests) == 1
    assert "- a (finished" in repr(comparison)


async def test_a_missing_variant_is_a_key_error_naming_the_variants(
        model: ScriptedModel) -> None:
    model.brain = echo
    agent = make_agent(model)
    comparison = await agent.compare("go", {"short": {}, "long": {}})

    with pytest.raises(KeyError, match="no variant 'nope' in this comparison; its variants "
                                       "are 'short', 'long'"):
        comparison["nope"]
    assert "short" in comparison and "nope" not in comparison and 3 not in comparison
    assert ["x"] not in comparison  # unhashable: not a variant, no TypeError
    assert comparison.get("nope") is None and len(comparison) == 2
    assert list(comparison) == ["short", "long"]


async def test_the_text_form_keeps_one_line_per_variant_whatever_the_names_hold(
        model: ScriptedModel) -> None:
    model.brain = echo
    agent = make_agent(model, name="base")
    comparison = await agent.compare("two\nlines \u202e", {"evil\n- fake (finished)": {}})

    lines = repr(comparison).splitlines()
    assert lines[0] == "Comparison of 1 variant(s) on 'base': two lines \\u202e"
    assert lines[1].startswith("- evil - fake (finished) (finished; ")
    assert all(line.startswith("    ") for line in lines[2:])  # the answer, indented
    assert "\u202e" not in repr(comparison)


async def test_a_listener_of_the_agent_hears_each_fork_once(model: ScriptedModel) -> None:
    model.brain = echo
    agent = make_agent(model, name="base")
    heard: Counter[tuple[str, str]] = Counter()
    agent.on_user_message(lambda event: heard.update([(event.context.agent.name, "user")]))
    agent.on_ai_message(lambda event: heard.update([(event.context.agent.name, "ai")]))

    await agent.compare("go", {"a": {}, "b": {}})

    assert heard == {("a", "user"): 1, ("b", "user"): 1, ("a", "ai"): 1, ("b", "ai"): 1}
    assert agent.state.messages == []


async def test_a_click_on_a_column_whose_name_holds_a_bidi_character_opens_its_panel(
        model: ScriptedModel) -> None:
    model.brain = echo
    agent = make_agent(model)
    views: list[CompareView] = []

    class Watch:
        def started(self, comparison: Comparison) -> None:
            views.append(CompareView(comparison))

        def mimebundle(self, comparison: Comparison) -> None:
            return None

    watcher = Watch()
    WATCHERS.append(watcher)
    try:
        comparison = await agent.compare("go", {"file\u202egnp.exe": {}, "plain": {}})
    finally:
        WATCHERS.remove(watcher)
    [view] = views
    try:
        shown = view.grid.columns[0]["name"]
        assert "\u202e" not in shown
        view.grid.selected = shown  # what the grid sends on a click: the name as shown
        [panel] = view.branch.children
        assert isinstance(panel, AgentPanel) and panel.agent is comparison["file\u202egnp.exe"]
    finally:
        view.close()


# -- batch ---------------------------------------------------------------------------------------

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


# -- a listener of the agent that raises on the events of the experiment's start -------------------

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
