"""The widgets in a real kernel, driven the way a browser drives them: comm messages for
clicks, edits and the tree's selection, while the kernel is idle between cells.

One kernel serves the whole module (starting one costs seconds); each test builds its own
agent and panel, and ``kernel.find`` picks the newest widget with a class, i.e. this test's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kernel_harness import Kernel
from test_render import assert_inert

API_KEY = "sk-kernel-NEVER-SHOWN-777"

SETUP = f"""
from IPython.display import display
from fragola_nb import Fragola, tool
from fragola_nb.notebook.panel import AgentPanel
from fragola_nb.notebook.tree import ForkTree
from fragola_nb.scripted import call, hang, reply, tool_calls

@tool(require_approval=True)
def add(a: int, b: int) -> int:
    '''Add two numbers.'''
    return a + b

def scripted_agent(name, *script, server_options=None, **options):
    # The scripted model, reached with an explicit key that must never reach a widget.
    server = Fragola.scripted(list(script), **(server_options or {{}})).scripted_model
    fragola = Fragola(api_key={API_KEY!r}, base_url=server.base_url, max_retries=0)
    fragola.server = server
    return fragola.agent(name=name, **options)
"""


@pytest.fixture(scope="module")
def kernel() -> Iterator[Kernel]:
    with Kernel() as running:
        running.execute(SETUP)
        yield running


def shown(kernel: Kernel) -> str:
    """The HTML of the message blocks of the newest panel, as the browser has it."""
    groups = kernel.state("fragola-messages")["children"]
    return "".join(
        kernel.widgets[block.removeprefix("IPY_MODEL_")]["value"]
        for group in groups
        for block in kernel.widgets[group.removeprefix("IPY_MODEL_")]["children"]
    )


def test_approve_by_click_resumes_the_run(kernel: Kernel) -> None:
    shown_cell = kernel.execute(
        "agent = scripted_agent('calc', tool_calls(call('add', {'a': 1, 'b': 2})), "
        "reply('The sum is 3.'), tools=[add])\n"
        "panel = AgentPanel(agent)\ndisplay(panel)"
    )
    (bundle,) = shown_cell.data
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "<b>calc</b>" in bundle["text/html"]  # the static fallback for nbconvert/GitHub
    result = kernel.execute("state = await agent.user_message('add 1 and 2')\n"
                            "print(state.status)")
    assert result.stdout.strip() == "waiting"  # the cell ended: the controls are shown
    assert "fragola-status-waiting" in kernel.state("fragola-status")["_dom_classes"]
    assert "fragola-call-call_1" in kernel.state("fragola-approval")["_dom_classes"]
    kernel.click("fragola-approve")
    kernel.wait_for("agent.status == 'idle' and len(agent.state.messages) == 4")
    kernel.drain()
    html = shown(kernel)
    assert 'result of <b>add</b></summary><div class="fragola-result-text">3</div>' in html
    assert "The sum is 3." in html
    assert kernel.state("fragola-status")["value"] == "idle"
    assert "2/5" in kernel.state("fragola-header")["value"]
    assert kernel.state("fragola-approvals")["children"] == []


def test_edited_arguments_wrong_then_right(kernel: Kernel) -> None:
    kernel.execute(
        "agent = scripted_agent('editor', tool_calls(call('add', {'a': 1, 'b': 2})), "
        "reply('done'), tools=[add])\n"
        "panel = AgentPanel(agent)\ndisplay(panel)\n"
        "await agent.user_message('add')"
    )
    assert json.loads(kernel.state("fragola-args-edit")["value"]) == {"a": 1, "b": 2}
    kernel.set_value("fragola-args-edit", '{"a": "one", "b": 2}')
    kernel.click("fragola-edit-approve")
    kernel.wait_for("panel.approvals.boxes['call_1'].error.value != ''")
    kernel.drain()
    assert "InvalidArguments" in kernel.state("fragola-approval-error")["value"]
    assert kernel.eval("[agent.status, agent.state.pending[0].decision is None]") == [
        "waiting", True]
    kernel.set_value("fragola-args-edit", '{"a": 40, "b": 2}')
    kernel.click("fragola-edit-approve")
    kernel.wait_for("agent.status == 'idle' and len(agent.state.messages) == 4")
    assert kernel.eval("agent.state.messages[2]['content']") == (
        '(The user edited the arguments before this call ran: {"a": 40, "b": 2})\n42')


def test_reject_with_a_typed_reason_and_inject_a_typed_result(kernel: Kernel) -> None:
    kernel.execute(
        "agent = scripted_agent('two', tool_calls(call('add', {'a': 1, 'b': 2}), "
        "call('add', {'a': 3, 'b': 4})), reply('noted'), tools=[add])\n"
        "panel = AgentPanel(agent)\ndisplay(panel)\n"
        "await agent.user_message('add twice')"
    )
    kernel.set_value("fragola-reason", "too <risky>", nth=-2)
    kernel.click("fragola-reject", nth=-2)
    kernel.wait_for("panel.approvals.boxes['call_1'].decision.value != ''")
    assert kernel.eval("agent.status") == "waiting"  # the other call is still undecided
    kernel.set_value("fragola-inject-text", "99", nth=-1)
    kernel.click("fragola-inject", nth=-1)
    kernel.wait_for("agent.status == 'idle' and len(agent.state.messages) == 5")
    assert kernel.eval("[m['content'] for m in agent.state.messages[2:4]]") == [
        "The user rejected this call to add. Reason: too <risky>", "99"]
    kernel.drain()
    assert "Reason: too &lt;risky&gt;" in shown(kernel)


def test_stop_during_a_hanging_request(kernel: Kernel) -> None:
    kernel.execute(
        "agent = scripted_agent('hanger', hang(), messages=[{'role': 'user', 'content': 'hi'}])\n"
        "panel = AgentPanel(agent)\ndisplay(panel)"
    )
    kernel.click("fragola-step")  # the run starts on the kernel's loop; the kernel stays idle
    kernel.wait_for("agent.status == 'generating' and len(agent.fragola.server.requests) == 1")
    kernel.drain()
    badge = kernel.state("fragola-status")
    assert "fragola-status-generating" in badge["_dom_classes"]
    assert kernel.state("fragola-step")["disabled"] is True
    kernel.click("fragola-stop")
    kernel.wait_for("agent.status == 'idle'")
    kernel.drain()
    badge = kernel.state("fragola-status")
    assert badge["value"] == "idle" and "fragola-status-idle" in badge["_dom_classes"]
    assert kernel.eval("agent.state.messages") == [{"role": "user", "content": "hi"}]


def test_fork_from_the_panel_and_select_a_tree_node(kernel: Kernel) -> None:
    kernel.execute(
        "agent = scripted_agent('trunk', reply('first'), reply('in the branch'))\n"
        "await agent.user_message('start')\n"
        "tree = ForkTree(agent)\ndisplay(tree)"
    )
    root_id = kernel.eval("agent.id")
    assert kernel.state("fragola-tree")["selected"] == root_id
    kernel.set_value("fragola-fork-name", "branch-b")
    kernel.click("fragola-fork")
    kernel.wait_for("tree.panel.agent.name == 'branch-b'")
    kernel.execute("await tree.panel.agent.user_message('only here')")
    kernel.drain()
    view = kernel.state("fragola-tree")
    fork_id = kernel.eval("tree.panel.agent.id")
    assert view["selected"] == fork_id
    assert [(n["name"], n["parent"], n["messages"], n["added"]) for n in view["nodes"]] == [
        ("trunk", None, 2, 2), ("branch-b", root_id, 4, 2)]
    assert "<b>branch-b</b>" in kernel.state("fragola-header")["value"]
    kernel.send_state(kernel.find("fragola-tree"), {"selected": root_id})  # a click on a node
    kernel.wait_for("tree.panel.agent is agent")
    kernel.drain()
    assert "<b>trunk</b>" in kernel.state("fragola-header")["value"]
    assert "only here" not in shown(kernel)


def test_the_reply_streams_into_the_panel_in_batches(kernel: Kernel) -> None:
    kernel.execute(
        "words = ' '.join(f'word{i}' for i in range(60))\n"
        "agent = scripted_agent('streamer', reply(words), model_settings={'stream': True},\n"
        "                       server_options={'chunk_size': 8, 'chunk_delay': 0.01})\n"
        "panel = AgentPanel(agent)\ndisplay(panel)\n"
        "await agent.user_message('talk')"
    )
    kernel.drain()
    parts = kernel.state("fragola-streaming")["children"]  # one part: a short reply
    (part_id,) = [ref.removeprefix("IPY_MODEL_") for ref in parts]
    values = [m["content"]["data"]["state"]["value"] for m in kernel.iopub_log
              if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == part_id
              and "value" in m["content"]["data"].get("state", {})]
    partial = [v for v in values if v]
    assert partial and len(partial) < 40, values  # it showed, batched: ~60 chunks, fewer updates
    assert values[-1] == ""  # cleared once the message was stored
    assert "word59" in shown(kernel)


def test_no_key_and_no_live_markup_in_anything_the_kernel_sent(kernel: Kernel) -> None:
    kernel.drain()
    sent: list[dict[str, Any]] = [
        m["content"] for m in kernel.iopub_log
        if m["msg_type"] in ("comm_open", "comm_msg", "display_data", "update_display_data",
                             "execute_result", "stream")
    ]
    assert sent and API_KEY not in json.dumps(sent)
    html_states = [s for s in kernel.widgets.values() if s.get("_model_name") == "HTMLModel"]
    assert len(html_states) > 20
    for state in html_states:
        assert_inert(state["value"])
