"""The panel in a real kernel, driven the way a browser drives it: the view's clicks are comm
messages (``{"method": "custom", "content": {"do": ...}}``, what anywidget's ``model.send``
puts on the wire), the tree's selection a state update, sent while the kernel is idle between
cells; what the browser gets is read from iopub.

One kernel serves the whole module (starting one costs seconds); each test builds its own
agent and panel, named ``agent`` and ``panel`` in the kernel.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.comm_log import stream_states
from support.html_checks import assert_inert
from support.kernel_harness import Kernel
from support.panel_kernel import click, custom, rows, wait_sent

API_KEY = "sk-kernel-NEVER-SHOWN-777"
SCRIPT = "<script>alert(1)</script>"

SETUP = f"""
from IPython.display import display
from fragola_nb import Fragola, tool
from fragola_nb.notebook.panel.view import AgentPanel
from fragola_nb.notebook.tree.view import ForkTree
from fragola_nb.models.scripted import call, hang, reply, tool_calls

@tool(require_approval=True)
def add(a: int, b: int) -> int:
    '''Add two numbers.'''
    return a + b

lookup = tool(name="lookup", description="Ask a person.", handler="dynamic")

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


def show_panel(kernel: Kernel, code: str) -> str:
    """Run ``code`` (which makes ``agent``), then show ``panel``; the panel's comm id."""
    kernel.execute(code + "\npanel = AgentPanel(agent)\ndisplay(panel)")
    return str(kernel.eval("panel.model_id"))


def traits(kernel: Kernel, comm_id: str) -> dict[str, Any]:
    """The panel's synced traits as the browser has them."""
    kernel.drain()
    return kernel.widgets[comm_id]


def test_approve_by_click_resumes_the_run(kernel: Kernel) -> None:
    kernel.execute(
        "agent = scripted_agent('calc', tool_calls(call('add', {'a': 1, 'b': 2})), "
        f"reply('The sum is 3. {SCRIPT}'), tools=[add])"
    )
    shown_cell = kernel.execute("panel = AgentPanel(agent)\ndisplay(panel)")
    (bundle,) = shown_cell.data
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "<b>calc</b>" in bundle["text/html"]  # the static fallback for nbconvert/GitHub
    panel = str(kernel.eval("panel.model_id"))
    result = kernel.execute("state = await agent.user_message('add 1 and 2')\n"
                            "print(state.status)")
    assert result.stdout.strip() == "waiting"  # the cell ended: the cards are shown
    state = traits(kernel, panel)
    assert state["strip"] == {"kind": "waiting", "text": "1 call needs your decision"}
    assert [(c["raw_id"], c["decided"]) for c in state["cards"]] == [("call_1", "")]
    click(kernel, panel, do="approve", id="call_1")
    kernel.wait_for("agent.status == 'idle' and agent.message_count == 4")
    state = traits(kernel, panel)
    assert state["cards"] == [] and state["head"]["status"] == "idle"
    assert state["head"]["steps"] == 2 and state["strip"]["kind"] == "finished"
    shown = rows(kernel, panel)
    assert [(r["i"], r["role"]) for r in shown] == [(0, "user"), (1, "assistant"),
                                                    (3, "assistant")]
    assert [(c["name"], c["state"], c["result"]) for c in shown[1]["calls"]] == [
        ("add", "ran", "3")]
    assert shown[2]["html"] == "<p>The sum is 3. &lt;script&gt;alert(1)&lt;/script&gt;</p>\n"


def test_a_hello_gets_every_row_at_once(kernel: Kernel) -> None:
    panel = show_panel(kernel, "agent = scripted_agent('greeter', reply('hi back'))\n"
                               "await agent.user_message('hi')")
    start = len(kernel.iopub_log)
    click(kernel, panel, do="hello")  # a new view, or a reloaded page
    (answer,) = wait_sent(kernel, lambda: custom(kernel, panel, start))
    assert answer == {"t": "rows", "reset": True, "total": 2, "rows": rows(kernel, panel),
                      "stream": "", "stopped": False}
    assert [r["role"] for r in answer["rows"]] == ["user", "assistant"]


def test_edited_arguments_wrong_then_right(kernel: Kernel) -> None:
    panel = show_panel(kernel, "agent = scripted_agent('editor', tool_calls(call('add', "
                               "{'a': 1, 'b': 2})), reply('done'), tools=[add])\n"
                               "await agent.user_message('add')")
    (card,) = traits(kernel, panel)["cards"]
    assert json.loads(card["full"]) == {"a": 1, "b": 2}
    click(kernel, panel, do="edit", id="call_1", args='{"a": "one", "b": 2}')
    kernel.wait_for("panel.cards[0]['error'] != ''")
    (card,) = traits(kernel, panel)["cards"]
    assert card["error"].startswith("InvalidArguments: ") and card["decided"] == ""
    assert kernel.eval("[agent.status, agent.pending[0].decision is None]") == [
        "waiting", True]
    click(kernel, panel, do="edit", id="call_1", args='{"a": 40, "b": 2}')
    kernel.wait_for("agent.status == 'idle' and agent.message_count == 4")
    assert kernel.eval("agent.state.messages[2]['content']") == (
        '(The user edited the arguments before this call ran: {"a": 40, "b": 2})\n42')
    kernel.drain()
    assert [c["state"] for r in rows(kernel, panel) for c in r["calls"]] == ["edited"]


def test_reject_with_a_typed_reason_and_inject_a_typed_result(kernel: Kernel) -> None:
    panel = show_panel(kernel, "agent = scripted_agent('two', tool_calls(call('add', "
                               "{'a': 1, 'b': 2}), call('lookup', {'q': 'x'})), "
                               "reply('noted'), tools=[add, lookup])\n"
                               "await agent.user_message('add, then ask')")
    click(kernel, panel, do="reject", id="call_1", reason="too <risky>")
    kernel.wait_for("panel.cards[0]['decided'] != ''")
    assert kernel.eval("agent.status") == "waiting"  # the other call is still undecided
    assert [c["decided"] for c in traits(kernel, panel)["cards"]] == [
        "rejected: too <risky>", ""]
    click(kernel, panel, do="inject", id="call_2", text="99")
    kernel.wait_for("agent.status == 'idle' and agent.message_count == 5")
    assert kernel.eval("[m['content'] for m in agent.state.messages[2:4]]") == [
        "The user rejected this call to add. Reason: too <risky>", "99"]
    kernel.drain()
    assert [(c["state"], c["note"], c["result"]) for r in rows(kernel, panel)
            for c in r["calls"]] == [
        ("rejected", "too <risky>", "The user rejected this call to add. Reason: too <risky>"),
        ("injected", "", "99")]


def test_stop_during_a_hanging_request(kernel: Kernel) -> None:
    panel = show_panel(
        kernel, "agent = scripted_agent('hanger', hang(), "
                "messages=[{'role': 'user', 'content': 'hi'}])")
    click(kernel, panel, do="step")  # the run starts on the kernel's loop; the kernel stays idle
    kernel.wait_for("agent.status == 'generating' and len(agent.fragola.server.requests) == 1")
    state = traits(kernel, panel)
    assert state["head"]["status"] == "generating" and state["strip"]["kind"] == "model"
    click(kernel, panel, do="stop")
    kernel.wait_for("agent.status == 'idle'")
    state = traits(kernel, panel)
    assert state["head"]["status"] == "idle"
    assert state["strip"] == {"kind": "stopped", "text": "stopped"}
    assert kernel.eval("agent.state.messages") == [{"role": "user", "content": "hi"}]


def test_fork_from_the_panel_and_select_a_tree_node(kernel: Kernel) -> None:
    kernel.execute(
        "agent = scripted_agent('trunk', reply('first'), reply('in the branch'))\n"
        "await agent.user_message('start')\n"
        "tree = ForkTree(agent)\ndisplay(tree)"
    )
    root_id = kernel.eval("agent.id")
    assert kernel.state("fragola-tree")["selected"] == root_id
    click(kernel, kernel.eval("tree.panel.model_id"), do="fork", name="branch-b")
    kernel.wait_for("tree.panel.agent.name == 'branch-b'")
    assert kernel.eval("branch_b is tree.panel.agent")  # bound in the notebook
    kernel.execute("await tree.panel.agent.user_message('only here')")
    kernel.drain()
    view = kernel.state("fragola-tree")
    fork_id = kernel.eval("tree.panel.agent.id")
    assert view["selected"] == fork_id
    assert [(n["name"], n["parent"], n["messages"], n["added"]) for n in view["nodes"]] == [
        ("trunk", None, 2, 2), ("branch-b", root_id, 4, 2)]
    fork_panel = kernel.eval("tree.panel.model_id")
    assert traits(kernel, fork_panel)["head"]["name"] == "branch-b"
    assert "only here" in "".join(r["html"] for r in rows(kernel, fork_panel))
    kernel.send_state(kernel.find("fragola-tree"), {"selected": root_id})  # a click on a node
    kernel.wait_for("tree.panel.agent is agent")
    root_panel = kernel.eval("tree.panel.model_id")
    assert traits(kernel, root_panel)["head"]["name"] == "trunk"
    click(kernel, root_panel, do="hello")
    wait_sent(kernel, lambda: rows(kernel, root_panel))
    assert "only here" not in "".join(r["html"] for r in rows(kernel, root_panel))


def test_the_reply_streams_into_the_panel_in_batches(kernel: Kernel) -> None:
    panel = show_panel(
        kernel,
        "words = ' '.join(f'word{i}' for i in range(60))\n"
        "agent = scripted_agent('streamer', reply(words), model_settings={'stream': True},\n"
        "                       server_options={'chunk_size': 8, 'chunk_delay': 0.01})")
    kernel.execute("await agent.user_message('talk')")
    # the stream messages, and the panel's paced rows messages that carry the stream
    states = stream_states(custom(kernel, panel))
    pieces = [m for shown, m in states if shown]
    chunks = kernel.eval("len(agent.fragola.server.chunks)")
    assert pieces and len(pieces) < chunks / 2, (len(pieces), chunks)  # batched
    words = " ".join(f"word{i}" for i in range(60))
    assert all(words.startswith(shown) for shown, _ in states)
    carried = sum(len(m.get("text", "") + m.get("add", "") + m.get("stream", "")) for m in pieces)
    assert carried < 1.25 * len(words), (carried, len(words))  # only what is new, once
    assert states[-2][0] == words  # the last text, then the stored reply's rows clear it
    assert states[-1][0] == "" and states[-1][1]["t"] == "rows"
    assert "word59" in rows(kernel, panel)[-1]["html"]


def test_no_key_and_no_live_markup_in_anything_the_kernel_sent(kernel: Kernel) -> None:
    panel = show_panel(kernel, f"agent = scripted_agent('{SCRIPT}', reply('{SCRIPT} "
                               f"[x](javascript:alert(2))'), tools=[add])\n"
                               f"await agent.user_message('<img src=x onerror=alert(3)>')")
    kernel.drain()
    sent: list[dict[str, Any]] = [
        m["content"] for m in kernel.iopub_log
        if m["msg_type"] in ("comm_open", "comm_msg", "display_data", "update_display_data",
                             "execute_result", "stream")
    ]
    assert sent and API_KEY not in json.dumps(sent)
    html = [row["html"] for m in sent if m.get("data", {}).get("method") == "custom"
            for row in m["data"]["content"].get("rows", ())]
    html += [m["data"]["text/html"] for m in sent if "text/html" in m.get("data", {})]
    assert len(html) > 10 and any("&lt;script&gt;" in h for h in html)
    for text in html:
        assert_inert(text)
        assert "<script" not in text and "<img" not in text
    assert traits(kernel, panel)["head"]["name"] == SCRIPT  # text, drawn with textContent


def test_a_batch_bar_of_a_hostile_agent_name_sends_it_only_escaped(kernel: Kernel) -> None:
    """tqdm's notebook bar draws its label as HTML: the agent's name (any text) reaches the
    front end escaped from the bar's first state on, never as markup for a moment."""
    start = len(kernel.iopub_log)
    kernel.execute("agent = scripted_agent('<img src=x onerror=alert(7)>b', reply('hi'),"
                   " reply('hi'))\nresult = await agent.batch(['a', 'b'])")
    kernel.drain()
    labels = [str(m["content"]["data"]["state"].get("value", ""))
              for m in kernel.iopub_log[start:]
              if m["msg_type"] in ("comm_open", "comm_msg")
              and "state" in m["content"].get("data", {})]
    named = [label for label in labels if "alert(7)" in label]
    assert named, labels  # the bar's label was sent
    for label in named:
        assert "<img" not in label and "&lt;img" in label, label
    assert kernel.eval("result.done") == 2
