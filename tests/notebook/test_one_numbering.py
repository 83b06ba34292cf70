"""One numbering of messages in every view, the one the code uses (``state.messages[i]``,
``fork(at=i)``, ``edit(i)``: from 0), and a result edited by hand shown as edited in each.

One history, real runs (the official ``openai`` client against the scripted server)::

    #0 user "Add 20 and 10"   #1 assistant (calls add)   #2 tool "30"   #3 assistant

and a fork of it at message #3 whose result #2 a person replaced by "30." (the value typed).
Every view must call the result "#2" and mark it "edited by hand" in the fork only.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from support.helpers import add_tool, make_agent
from support.helpers import until_async as until

import fragola_nb
from fragola_nb import export_markdown, export_tree_html, export_tree_markdown
from fragola_nb.core.agent import Agent
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls
from fragola_nb.notebook.panel.view import AgentPanel
from fragola_nb.notebook.textviews import ForkTreeText, TurnTranscript
from fragola_nb.notebook.tree.view import node_of

NUMBER = '<span class="fragola-index">#{}</span> · {}'
EDITED = '<span class="fragola-edited">edited by hand</span>'


@pytest.fixture
async def branches(model: ScriptedModel) -> tuple[Agent, Agent]:
    agent = make_agent(model, add_tool(require_approval=False), name="trunk")
    model.push(tool_calls(call("add", {"a": 20, "b": 10})), reply("It is 30."))
    await agent.user_message("Add 20 and 10")
    fork = agent.fork("what-if", at=3)
    fork.edit(2, result="30.")
    model.push(reply("30."))  # a model that echoes the result: a line "30." alone
    await fork.step()
    return agent, fork


def test_the_panel_numbers_rows_and_results_as_the_history(branches: Any) -> None:
    _, fork = branches
    rows = AgentPanel(fork).rows
    assert [(row["i"], [c["ri"] for c in row["calls"]]) for row in rows] == [
        (0, []), (1, [2]), (3, [])]
    assert rows[1]["calls"][0]["state"] == "amended"  # "result edited by hand"
    assert rows[1]["calls"][0]["result"] == "30."  # the value typed, nothing added
    assert rows[2]["html"] == "<p>30.</p>\n"  # not an empty list item numbered 30

    turn = AgentPanel(fork, since=2)  # a turn panel: numbered as the agent's history
    assert [row["i"] for row in turn.rows] == [2, 3]


def test_the_static_copies_number_as_the_history(branches: Any) -> None:
    agent, fork = branches
    copy = AgentPanel(fork).html()
    assert [NUMBER.format(i, role) in copy for i, role in enumerate(
        ("user", "assistant", f"tool {EDITED}", "assistant"))] == [True] * 4
    turn = AgentPanel(fork, since=2).html()
    assert NUMBER.format(2, f"tool {EDITED}") in turn and ">#0<" not in turn
    assert EDITED not in AgentPanel(agent).html()
    assert NUMBER.format(2, "tool") in TurnTranscript(fork, since=2)._repr_html_()


def test_the_text_views_number_as_the_history(branches: Any) -> None:
    agent, fork = branches
    turn = repr_pretty(TurnTranscript(fork, since=1)).splitlines()[1:]
    assert turn == ['#1 [assistant calls add] {"a": 20, "b": 10}',
                    "#2 [tool add, edited by hand] 30.", "#3 [assistant] 30."]
    text = repr_pretty(fork)
    assert "#2 [tool add, edited by hand] 30." in text and "#3 [assistant] 30." in text
    assert "#2 [tool add] 30" in repr_pretty(agent)
    tree = ForkTreeText(agent).text()
    assert tree.splitlines()[1].endswith(", edited by hand: #2")
    assert "edited" not in tree.splitlines()[0]


def test_the_tree_says_where_a_fork_starts_and_what_was_edited(branches: Any) -> None:
    agent, fork = branches
    node = node_of(fork, 1)
    assert (node["at"], node["edited"]) == (3, "edited by hand: #2")
    assert node_of(agent, 0)["edited"] == ""
    assert fork.fork_at == 3 and fork.state.messages[:2] == agent.state.messages[:2]


def test_the_markdown_exports_number_as_the_history(branches: Any) -> None:
    agent, fork = branches
    text = export_markdown(fork)
    headings = [line for line in text.splitlines() if line.startswith("### ")]
    assert headings == ["### #0 · User", "### #1 · Assistant",
                        "### #2 · Result of add · *edited by hand*", "### #3 · Assistant"]
    # "30." alone would be an empty list item numbered 30 on GitHub: fenced, shown as typed
    assert text.endswith("### #3 · Assistant\n\n```text\n30.\n```\n")
    tree = export_tree_markdown(agent)
    assert "*Continues from message \\#2 (messages \\#0 to \\#1 are trunk's).*" in tree
    assert tree.count("edited by hand") == 1


def test_the_tree_html_export_numbers_as_the_history(branches: Any) -> None:
    agent, _ = branches
    page = export_tree_html(agent)
    assert page.count(EDITED) == 1
    fork_part = page[page.index("what-if"):]
    assert "continues from message #2 (messages #0 to #1 are trunk&#x27;s)" in fork_part.lower()
    assert NUMBER.format(2, f"tool {EDITED}") in fork_part
    assert "fork of" in fork_part and "at message #3" in fork_part


def test_the_branch_diff_numbers_as_the_history(branches: Any) -> None:
    agent, fork = branches
    diff = fragola_nb.diff(agent, fork)
    assert diff.common == 2 and [p.left_index for p in diff.pairs] == [2, 3]
    html = diff._repr_html_()
    assert f'{NUMBER.format(2, "tool")} · <span>call_1</span> {EDITED}' in html
    assert f'{NUMBER.format(2, "tool")} · <span>call_1</span></div>' in html  # the parent's


async def test_fork_notes_number_as_the_history(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool(require_approval=False), name="trunk")
    model.push(tool_calls(call("add", {"a": 20, "b": 10})), reply("It is 30."))
    await agent.user_message("Add 20 and 10")
    panel = AgentPanel(agent, namespace={})
    panel.do("fork_here", i=3)
    assert re.search(r"before message #3\b", panel.notice["text"])
    model.push(reply("30."))
    panel.do("rerun", i=1, call="call_1", text="30")  # the result of row #1's call: #2
    assert re.search(r"with message #2 edited\b", panel.notice["text"])
    edited = agent.forks[-1]
    await until(lambda: edited.status == "idle" and edited.message_count == 4)
    assert edited.state.messages[2]["content"] == "30"


def repr_pretty(obj: Any) -> str:
    from IPython.lib.pretty import pretty

    return str(pretty(obj))
