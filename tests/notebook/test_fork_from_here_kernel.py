"""A message's "fork from here" and "edit and run from here", and the tree's diff of two ticked
nodes, in a real kernel, driven by the comm messages the browser sends
(``{"method": "custom", "content": {"do": ...}}`` for the panel's clicks, a state update for
the tree's boxes), with the scripted model behind the official openai client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.kernel_harness import Kernel
from support.panel_kernel import click, custom, rows, wait_sent

SETUP = """
from IPython.display import display
from fragola_nb import Fragola, tool
from fragola_nb.notebook.tree.view import ForkTree
from fragola_nb.models.scripted import call, reply, tool_calls

@tool
def weather(city: str) -> str:
    '''The weather in a city.

    Args:
        city: its name
    '''
    return "sunny in " + city

def brain(request):
    # answers what it was sent: the last tool result, else the last user message
    last = request["messages"][-1]
    if last["role"] == "tool":
        return reply("Answer from the result: " + last["content"])
    return reply("Answer to: " + last["content"])

server = Fragola.scripted([tool_calls(call("weather", {"city": "Rome"}))] + [brain] * 20
                          ).scripted_model
fragola = Fragola(api_key="sk-test", base_url=server.base_url, max_retries=0)
agent = fragola.agent(name="trunk", tools=[weather], messages=[
    {"role": "system", "content": "You are terse."}])
await agent.user_message("weather in Rome?")    # 1 user, 2 call, 3 result, 4 answer
await agent.user_message("and tomorrow?")       # 5 user, 6 answer
tree = ForkTree(agent, namespace=globals())
display(tree)
"""

BEFORE = ["You are terse.", "weather in Rome?", None, "sunny in Rome",
          "Answer from the result: sunny in Rome", "and tomorrow?", "Answer to: and tomorrow?"]


@pytest.fixture
def kernel() -> Iterator[Kernel]:
    with Kernel() as running:
        running.execute(SETUP)
        yield running


def contents(kernel: Kernel, agent: str) -> list[Any]:
    return list(kernel.eval(f"[m.get('content') for m in {agent}.state.messages]"))


def test_fork_from_here_then_edit_a_result_and_a_question_and_run(kernel: Kernel) -> None:
    root = str(kernel.eval("tree.panel.model_id"))
    # "fork from here" on the assistant answer 6: a fork of 0..5 (Step asks again)
    click(kernel, root, do="fork_here", i=6)
    kernel.wait_for("tree.panel.agent is not agent")
    assert kernel.eval("[tree.panel.agent.fork_at, tree.panel.agent.message_count, "
                       "tree.panel.agent.status]") == [6, 6, "idle"]
    assert kernel.eval("trunk_fork1 is tree.panel.agent")  # bound, like Fork's
    fork1 = str(kernel.eval("tree.panel.model_id"))
    click(kernel, fork1, do="step")
    kernel.wait_for("trunk_fork1.status == 'idle' and trunk_fork1.message_count == 7")
    assert contents(kernel, "trunk_fork1")[6] == "Answer to: and tomorrow?"
    assert contents(kernel, "agent") == BEFORE  # the parent untouched
    kernel.drain()
    nodes = kernel.state("fragola-tree")["nodes"]
    assert [(n["name"], n["at"], n["messages"]) for n in nodes] == [
        ("trunk", None, 7), ("trunk-fork1", 6, 7)]

    # "edit and run" on the weather call's result (row 2): the editor gets the stored text
    kernel.send_state(kernel.find("fragola-tree"), {"selected": kernel.eval("agent.id")})
    kernel.wait_for("tree.panel.agent is agent")
    root = str(kernel.eval("tree.panel.model_id"))
    start = len(kernel.iopub_log)
    click(kernel, root, do="source", i=2, call="call_1")
    (source,) = wait_sent(kernel, lambda: [m for m in custom(kernel, root, start)
                                           if m["t"] == "source"])
    assert source == {"t": "source", "i": 2, "call": "call_1", "text": "sunny in Rome",
                      "flag": False, "runs": True, "role": "tool"}
    hostile = "snow \u202egnp.exe <img src=x onerror=alert(1)>"
    click(kernel, root, do="rerun", i=2, call="call_1", text=hostile)
    kernel.wait_for("tree.panel.agent.name == 'trunk-fork2'")
    kernel.wait_for("trunk_fork2.status == 'idle' and trunk_fork2.message_count == 5")
    assert kernel.eval("trunk_fork2.fork_at") == 4  # kept the call and its result
    # the result is the text typed, and the model was shown that alone; "edited by hand"
    # is beside it (the row's state, the tree's node)
    assert contents(kernel, "trunk_fork2")[3:] == [hostile, "Answer from the result: " + hostile]
    assert kernel.eval("trunk_fork2.state.messages[3]['fragola_nb_facts']") == {"edited": True}
    assert [m for m in custom(kernel, root, start) if m["t"] == "edited"] == [
        {"t": "edited", "i": 2, "call": "call_1", "ok": True}]
    fork2 = str(kernel.eval("tree.panel.model_id"))
    click(kernel, fork2, do="hello")
    shown = wait_sent(kernel, lambda: rows(kernel, fork2))
    sent = json.dumps(shown, ensure_ascii=False)
    assert "\u202e" not in sent and "snow \\\\u202egnp.exe" in sent  # written out
    assert all("<img" not in row["html"] for row in shown)  # text, or escaped HTML
    assert [call["state"] for row in shown for call in row["calls"]] == ["amended"]
    nodes = kernel.state("fragola-tree")["nodes"]
    assert [(n["name"], n["edited"]) for n in nodes] == [
        ("trunk", ""), ("trunk-fork1", ""), ("trunk-fork2", "edited by hand: #3")]

    # "edit and run" on the user message 5: the edited question is answered
    kernel.send_state(kernel.find("fragola-tree"), {"selected": kernel.eval("agent.id")})
    kernel.wait_for("tree.panel.agent is agent")
    root = str(kernel.eval("tree.panel.model_id"))
    click(kernel, root, do="rerun", i=5, text="and next week?")
    kernel.wait_for("tree.panel.agent.name == 'trunk-fork3'")
    kernel.wait_for("trunk_fork3.status == 'idle' and trunk_fork3.message_count == 7")
    assert contents(kernel, "trunk_fork3")[5:] == ["and next week?", "Answer to: and next week?"]
    assert contents(kernel, "agent") == BEFORE


def test_an_edit_the_agent_refuses_is_one_line_and_leaves_no_fork(kernel: Kernel) -> None:
    root = str(kernel.eval("tree.panel.model_id"))
    start = len(kernel.iopub_log)
    click(kernel, root, do="rerun", i=0, text="Be verbose.")  # the system message
    kernel.wait_for("panel_notice := tree.panel.notice")
    notice = kernel.eval("tree.panel.notice")
    assert notice["kind"] == "error" and "\n" not in notice["text"]
    assert notice["text"].startswith("BadUsage: messages[0] is a system message")
    assert kernel.eval("[len(agent.forks), tree.panel.agent is agent]") == [0, True]
    assert [m for m in custom(kernel, root, start) if m["t"] == "edited"] == [
        {"t": "edited", "i": 0, "call": "", "ok": False}]  # the editor keeps the text
    assert kernel.eval("tree.panel.strip['kind']") == "finished"  # the agent did not fail
    assert contents(kernel, "agent") == BEFORE


def test_two_ticked_nodes_show_their_diff_escaped(kernel: Kernel) -> None:
    kernel.execute("other = agent.fork('<b>other</b>\\u202e', at=5)\n"
                   "await other.user_message('<script>alert(2)</script>')")
    tree = kernel.find("fragola-tree")
    ids = kernel.eval("[agent.id, other.id]")
    kernel.send_state(tree, {"picked": ids})  # what ticking both boxes sends
    kernel.wait_for("len(tree.compared.children) == 2")
    head = str(kernel.eval("tree.compared.children[0].children[0].value"))
    # the diff's paged view: the pairs of fragola_nb.diff as data, drawn as text
    assert kernel.eval("type(tree.compared.children[1]).__name__") == "DiffView"
    assert kernel.eval("tree.compared.children[1].rows == __import__('fragola_nb.notebook."
                       "diff.view', fromlist=['_']).rows_of(__import__('fragola_nb')"
                       ".diff(agent, other))") is True
    sent = str(kernel.eval("__import__('json').dumps(tree.compared.children[1].get_state(), "
                           "ensure_ascii=False)"))
    assert "<script>alert(2)</script>" in sent  # as text: the view sets textContent only
    assert "\u202e" not in sent
    assert json.loads(sent)["head"]["names"][1] == "<b>other</b>\\u202e"  # written out
    assert "&lt;b&gt;other&lt;/b&gt;\\u202e" in head and "\u202e" not in head
    # a third tick keeps the last two; unticking closes the diff
    kernel.execute("third = agent.fork('third')")
    kernel.send_state(tree, {"picked": [*ids, kernel.eval("third.id")]})
    kernel.wait_for("tree.view.picked == [other.id, third.id]")
    kernel.send_state(tree, {"picked": []})
    kernel.wait_for("tree.compared.children == ()")
