"""``agent.compare`` as a user meets it, with the compare grid's kernel side: ``stop()`` while
a variant runs, a variant that is not there, names that hold newlines or bidi characters (the
text form, a click on a column), and the agent's listener hearing each fork once."""
from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from support.helpers import make_agent

from fragola_nb import Comparison
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
