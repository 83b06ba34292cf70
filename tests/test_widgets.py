"""The notebook widgets in-process: panels, approvals, the fork tree, blocks and streaming.

Agents run against the scripted model (schema-checked by the ``model`` fixture); buttons are
clicked with ``Button.click()``, which runs the same handlers a browser's click does.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import comm
import ipywidgets as widgets
import pydantic
import pytest
from comm.base_comm import BaseComm
from helpers import make_fragola
from test_render import assert_inert

from fragola_nb import Fragola, ListenerError, Tool, create_store, tool
from fragola_nb.agent import Agent
from fragola_nb.notebook.blocks import BLOCK_SIZE, PANEL_CSS, StreamView
from fragola_nb.notebook.panel import AgentPanel
from fragola_nb.notebook.tree import ESM, ForkTree
from fragola_nb.scripted import ScriptedModel, call, fail, hang, reply, tool_calls
from fragola_nb.state import AgentState

API_KEY = "sk-test-DO-NOT-SHOW-4242"
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"


class AddArgs(pydantic.BaseModel):
    a: int
    b: int


def add_tool(*, require_approval: bool = True) -> Tool:
    return tool(name="add", description="Add two numbers.", schema=AddArgs,
                handler=lambda p: p.a + p.b, require_approval=require_approval)


def make_agent(model: ScriptedModel, *tools: Tool, **options: Any) -> Agent:
    fragola = Fragola(api_key=API_KEY, base_url=model.base_url, max_retries=0)
    return fragola.agent(name="tester", tools=list(tools), **options)


async def until(check: Callable[[], Any], timeout: float = 10.0) -> None:
    """Wait for observable state (the run a click started goes on in the background)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting for the widgets"
        await asyncio.sleep(0.01)


def every_widget(root: Any) -> Iterator[Any]:
    yield root
    for child in getattr(root, "children", ()):
        yield from every_widget(child)


def shown(panel: AgentPanel) -> str:
    return "".join(block.value for group in panel.messages.children for block in group.children)


def box(panel: AgentPanel, index: int = 0) -> Any:
    return list(panel.approvals.boxes.values())[index]


# -- the panel follows the agent --------------------------------------------------------------


async def test_panel_shows_each_message_as_it_is_added(model: ScriptedModel) -> None:
    agent = make_agent(model)
    panel = AgentPanel(agent)
    seen: list[tuple[int, int]] = []
    agent.on_after_state_update(lambda e: seen.append((panel.messages.count, agent.message_count)))
    model.push(reply("Hello **there**"))
    await agent.user_message("hi <you>")
    assert seen == [(1, 1), (2, 2)]
    html = shown(panel)
    assert html.index("hi &lt;you&gt;") < html.index("Hello <strong>there</strong>")
    assert "fragola-msg-user" in html and "fragola-msg-assistant" in html
    assert "steps <span class='fragola-steps'>1/5</span>" in panel.header.value
    assert "<b>tester</b>" in panel.header.value and agent.id in panel.header.value


async def test_status_badge_and_step_count_follow_the_run(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool(require_approval=False))
    panel = AgentPanel(agent)
    badges: list[tuple[str, tuple[str, ...]]] = []
    agent.on_status_change(lambda e: badges.append((e.status, panel.status_badge._dom_classes)))
    model.push(tool_calls(call("add", {"a": 2, "b": 3})), reply("5"))
    await agent.user_message("add")
    assert badges == [
        ("generating", ("fragola-status", "fragola-status-generating")),
        ("idle", ("fragola-status", "fragola-status-idle")),
    ]
    assert panel.status_badge.value == "idle"
    assert "2/5" in panel.header.value
    assert panel.stop_button.disabled and not panel.step_button.disabled


async def test_tool_calls_and_results_are_shown_collapsible(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool(require_approval=False))
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 2, "b": 3})), reply("It is 5."))
    await agent.user_message("add")
    html = shown(panel)
    assert '<details class="fragola-tool-call" data-call-id="call_1">' in html
    assert "calls <b>add</b>" in html and "&quot;a&quot;: 2" in html
    assert "result of <b>add</b></summary><div class=\"fragola-result-text\">5</div>" in html
    assert "Add two numbers." in panel.tools_box.value and "<b>add</b>" in panel.tools_box.value


async def test_a_failing_run_started_from_the_panel_shows_its_error(model: ScriptedModel) -> None:
    agent = make_agent(model, messages=[{"role": "user", "content": "go"}])
    panel = AgentPanel(agent)
    model.push(fail(500, "<b>boom</b>"))
    panel.step_button.click()
    await until(lambda: panel.error_box.value and agent.status == "idle")
    assert panel.error_box.value.startswith("ModelHTTPError: ")
    assert "&lt;b&gt;boom&lt;/b&gt;" in panel.error_box.value
    assert "fragola-error" in panel.error_box._dom_classes
    panel.show_error(ListenerError("listener <x> raised", event="ai_message"))
    assert panel.error_box.value == "ListenerError: listener &lt;x&gt; raised"
    model.push(reply("fine"))
    panel.step_button.click()  # a new run clears the old error
    await until(lambda: agent.message_count == 2)
    assert panel.error_box.value == ""


# -- approvals --------------------------------------------------------------------------------


async def test_approve_by_click_resumes_the_run_in_the_same_panel(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("three"))
    await agent.user_message("add")
    assert agent.status == "waiting" and panel.status_badge.value == "waiting"
    approval = box(panel)
    assert "fragola-approval" in approval._dom_classes
    assert "fragola-call-call_1" in approval._dom_classes
    assert 'data-call-id="call_1"' in approval.header.value
    assert "<b>add</b>" in approval.header.value and "&quot;a&quot;: 1" in approval.header.value
    approval.approve.click()
    await until(lambda: agent.status == "idle")
    assert [m["role"] for m in agent.state.messages] == ["user", "assistant", "tool", "assistant"]
    assert "result of <b>add</b>" in shown(panel) and "three" in shown(panel)
    assert panel.approvals.children == () and panel.status_badge.value == "idle"


async def test_edited_arguments_are_validated_before_approval(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("done"))
    await agent.user_message("add")
    approval = box(panel)
    assert json.loads(approval.args_edit.value) == {"a": 1, "b": 2}
    for wrong, says in [("{not json", "not valid JSON"), ("[1, 2]", "must be a JSON object"),
                        ('{"a": "one", "b": 2}', "InvalidArguments: invalid arguments for add")]:
        approval.args_edit.value = wrong
        approval.edit_approve.click()
        assert says in approval.error.value
        assert agent.status == "waiting" and agent.state.pending[0].decision is None
        assert not approval.approve.disabled
    approval.args_edit.value = '{"a": 20, "b": 22}'
    approval.edit_approve.click()
    assert approval.error.value == ""
    await until(lambda: agent.status == "idle")
    assert agent.state.messages[2]["content"] == (
        '(The user edited the arguments before this call ran: {"a": 20, "b": 22})\n42')


async def test_reject_with_a_reason_tells_the_model(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("ok, I won't"))
    await agent.user_message("add")
    box(panel).reason.value = "not <now>"
    box(panel).reject.click()
    await until(lambda: agent.status == "idle")
    assert agent.state.messages[2]["content"] == (
        "The user rejected this call to add. Reason: not <now>")
    assert "Reason: not &lt;now&gt;" in shown(panel)


async def test_inject_a_result_by_hand_for_a_dynamic_tool(model: ScriptedModel) -> None:
    lookup = tool(name="lookup", description="Ask a person.", handler="dynamic")
    agent = make_agent(model, lookup)
    panel = AgentPanel(agent)
    model.push(tool_calls(call("lookup", {"q": "x"})), reply("thanks"))
    await agent.user_message("look it up")
    approval = box(panel)
    assert "dynamic" in approval.header.value
    assert approval.approve.disabled and approval.edit_approve.disabled
    assert approval.approve not in list(every_widget(approval))
    approval.inject_text.value = "the answer <is> 7"
    approval.inject.click()
    await until(lambda: agent.status == "idle")
    assert agent.state.messages[2]["content"] == "the answer <is> 7"


async def test_each_pending_call_is_decided_on_its_own(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 2}),
                          call("add", {"a": 3, "b": 3})), reply("done"))
    await agent.user_message("add thrice")
    assert [b.call_id for b in panel.approvals.boxes.values()] == ["call_1", "call_2", "call_3"]
    box(panel, 1).reason.value = "no"
    box(panel, 1).reject.click()
    box(panel, 0).approve.click()
    await asyncio.sleep(0)  # nothing was launched: one call is still undecided
    assert agent.status == "waiting" and len(model.requests) == 1
    assert box(panel, 1).decision.value == "<i>rejected: no</i>" and box(panel, 1).reject.disabled
    assert box(panel, 0).decision.value == "<i>approved</i>"
    box(panel, 1).approve.click()  # already decided: said, nothing changes
    assert "already decided" in box(panel, 1).error.value
    box(panel, 2).inject_text.value = "six"
    box(panel, 2).inject.click()
    await until(lambda: agent.status == "idle")
    assert [m.get("content") for m in agent.state.messages[2:5]] == [
        "2", "The user rejected this call to add. Reason: no", "six"]


# -- the buttons ------------------------------------------------------------------------------


async def test_stop_button_cancels_a_hanging_request(model: ScriptedModel) -> None:
    agent = make_agent(model, messages=[{"role": "user", "content": "wait"}])
    panel = AgentPanel(agent)
    model.push(hang())
    panel.step_button.click()
    await until(lambda: len(model.requests) == 1)
    assert panel.status_badge.value == "generating" and not panel.stop_button.disabled
    assert panel.step_button.disabled and panel.reset_button.disabled
    panel.reset_button.click()  # disabled in a browser; called anyway it says why
    assert panel.error_box.value.startswith("BadUsage: ")
    panel.stop_button.click()
    await until(lambda: agent.status == "idle")
    assert "fragola-status-idle" in panel.status_badge._dom_classes
    assert agent.state.messages == [{"role": "user", "content": "wait"}]


async def test_the_header_says_how_the_last_run_ended(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool(require_approval=False), max_step=1)
    panel = AgentPanel(agent)
    assert "fragola-outcome" in panel.outcome_note._dom_classes
    assert panel.outcome_note in panel.children[1].children  # beside the status badge
    seen: list[tuple[str, str]] = []  # (status, the note) at each status change
    agent.on_status_change(lambda e: seen.append((e.status, panel.outcome_note.value)))
    model.push(tool_calls(call("add", {"a": 1, "b": 2})))
    await agent.user_message("add")  # one model call allowed: the tool runs, then it ends
    assert agent.outcome == "step_limit"
    static = panel.html()  # the static form says it too, without the button it lacks
    assert "· step budget used" in static and "Step goes on" not in static
    model.push(hang())
    panel.step_button.click()
    await until(lambda: len(model.requests) == 2)
    panel.stop_button.click()
    await until(lambda: agent.status == "idle")
    assert agent.outcome == "stopped" and "· stopped" in panel.html()
    model.push(reply("done"))
    panel.step_button.click()
    await until(lambda: agent.status == "idle" and agent.outcome == "finished")
    assert seen == [
        ("generating", ""),
        ("idle", "step budget used — Step goes on"),
        ("generating", ""),  # a new run: the last one's end is old news
        ("idle", "stopped"),
        ("generating", ""),
        ("idle", ""),  # finished: the badge and the reply say it
    ]
    assert "stopped" not in panel.html()


async def test_the_outcome_note_is_text(model: ScriptedModel) -> None:
    agent = make_agent(model, messages=[{"role": "user", "content": "hi"}])
    panel = AgentPanel(agent)
    model.push(hang())
    panel.step_button.click()
    await until(lambda: len(model.requests) == 1)
    agent.stop_sync()
    await until(lambda: agent.status == "idle")
    assert panel.outcome_note.value == "stopped"
    assert not panel.outcome_note.description_allow_html
    assert_inert(panel.outcome_note.value)


async def test_reset_button_clears_the_panel(model: ScriptedModel) -> None:
    agent = make_agent(model)
    panel = AgentPanel(agent)
    model.push(reply("one"))
    await agent.user_message("hi")
    panel.reset_button.click()
    assert agent.message_count == 0 and panel.messages.children == ()
    assert "0/5" in panel.header.value
    model.push(reply("again"))
    await agent.user_message("new start")
    assert "new start" in shown(panel) and "one" not in shown(panel)


async def test_fork_button_shows_the_fork_panel(model: ScriptedModel) -> None:
    agent = make_agent(model)
    panel = AgentPanel(agent)
    model.push(reply("root reply"))
    await agent.user_message("hi")
    panel.fork_name.value = "branch <b>"
    panel.fork_button.click()
    (fork_panel,) = panel.forks_box.children
    fork = fork_panel.agent
    assert fork.name == "branch <b>" and fork.fork_of == agent.id
    assert "<b>branch &lt;b&gt;</b>" in fork_panel.header.value
    model.push(reply("fork reply"))
    await fork.user_message("only in the fork")
    assert "only in the fork" in shown(fork_panel)
    assert "only in the fork" not in shown(panel) and panel.messages.count == 2


async def test_detach_freezes_the_view(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 2})))
    await agent.user_message("add")
    assert panel.detached_note.value == ""
    panel.detach()
    assert box(panel).approve.disabled and panel.step_button.disabled
    # the grey controls say why, beside them
    assert panel.detached_note.value == "detached: this panel no longer follows the agent"
    assert panel.detached_note in panel.button_row.children
    agent.reject("call_1", "later")
    assert box(panel).decision.value == ""  # the view keeps its last state
    assert panel.messages.count == 2


def test_detached_says_why_as_text(model: ScriptedModel) -> None:
    panel = AgentPanel(make_agent(model))
    panel.detach(f"replaced by {SCRIPT}")
    panel.detach("a second detach changes nothing")
    assert panel.detached_note.value == (
        "detached: replaced by &lt;script&gt;alert(1)&lt;/script&gt;")


async def test_disabled_panel_buttons_look_disabled(model: ScriptedModel) -> None:
    # ipywidgets only fades a disabled button: a faded orange Stop looked clickable.
    rule = re.search(r"\.fragola-panel \.jupyter-button:disabled\{([^}]*)\}", PANEL_CSS)
    assert rule is not None
    assert "cursor:not-allowed" in rule[1] and "background-color:" in rule[1]
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    assert panel.stop_button.disabled and not panel.step_button.disabled  # idle
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("3"))
    await agent.user_message("add")
    assert not panel.stop_button.disabled  # waiting: Stop cancels the pending call
    box(panel).approve.click()
    assert box(panel).approve.disabled and box(panel).reject.disabled  # decided
    await until(lambda: agent.status == "idle")
    assert panel.stop_button.disabled


async def test_stores_are_shown_and_refreshed(model: ScriptedModel) -> None:
    store = create_store({"visits": 0}, "counter")
    agent = Fragola(api_key=API_KEY, base_url=model.base_url).agent(name="s", stores=[store])
    panel = AgentPanel(agent)
    assert "<b>counter</b>" in panel.stores_box.value
    assert "&quot;visits&quot;: 0" in panel.stores_box.value
    store.update(lambda v: {"visits": v["visits"] + 1})
    assert "&quot;visits&quot;: 1" in panel.stores_box.value
    panel.detach()
    store.set({"visits": 9})
    assert "&quot;visits&quot;: 1" in panel.stores_box.value


# -- the fork tree ----------------------------------------------------------------------------


async def test_fork_tree_nodes_and_selection(model: ScriptedModel) -> None:
    root = make_agent(model)
    model.push(reply("a"), reply("b"))
    await root.user_message("one")
    left = root.fork("left")
    await left.user_message("two")
    tree = ForkTree(left)
    assert tree.view.selected == left.id and tree.panel is not None and tree.panel.agent is left
    assert "fragola-tree" in tree.view._dom_classes
    assert tree.view.nodes == [
        {"id": root.id, "name": "tester", "parent": None, "depth": 0, "messages": 2,
         "status": "idle", "added": 2},
        {"id": left.id, "name": "left", "parent": root.id, "depth": 1, "messages": 4,
         "status": "idle", "added": 2},
    ]
    tree.view.selected = root.id  # what the view's click does (model.set + save_changes)
    assert tree.panel.agent is root and tree.branch.children == (tree.panel,)
    tree.view.selected = "no-such-agent"
    assert tree.view.selected == root.id and tree.panel.agent is root
    tree.panel.fork_name.value = "right"
    tree.panel.fork_button.click()  # a fork from the tree's panel joins the tree, selected
    right = root.forks[1]
    assert tree.view.selected == right.id and tree.panel.agent is right
    assert [n["name"] for n in tree.view.nodes] == ["tester", "left", "right"]
    deeper = left.fork("deeper")  # made elsewhere (a turn panel, code): shown at once
    assert [(n["name"], n["depth"]) for n in tree.view.nodes] == [
        ("tester", 0), ("left", 1), ("deeper", 2), ("right", 1)]
    model.push(reply("c"))
    await deeper.user_message("three")
    assert tree.view.nodes[2]["messages"] == 6 and tree.view.nodes[2]["added"] == 2
    tree.detach()  # the tree keeps its last state
    model.push(reply("d"))
    await deeper.user_message("four")
    tree.view.selected = left.id
    assert tree.view.nodes[2]["messages"] == 6 and tree.panel.agent is right


# A DOM stand-in just big enough for the view: setting innerHTML fails the test.
FAKE_DOM = """
class El {
  constructor() { this.children = []; this.dataset = {}; this.style = {}; this.on = {};
    this.className = ""; this.text = "";
    this.classList = { add: (c) => { this.className = (this.className + " " + c).trim(); } }; }
  set textContent(t) { this.text = String(t); }
  get textContent() { return this.text + this.children.map((c) => c.textContent).join(""); }
  set innerHTML(v) { throw new Error("innerHTML"); }
  append(...c) { this.children.push(...c); } replaceChildren(...c) { this.children = c; }
  setAttribute() {} addEventListener(k, f) { this.on[k] = f; }
}
globalThis.document = { createElement: () => new El() };
const { default: view } = await import(process.argv[2]);
const state = JSON.parse(process.argv[3]), handlers = {}, saved = [];
const model = { get: (k) => state[k], set: (k, v) => { state[k] = v; },
  save_changes: () => { saved.push(state.selected); handlers["change:selected"](); },
  on: (e, f) => { handlers[e] = f; }, off: () => {} };
const el = new El();
view.render({ model, el });
el.children[1].on.click();
console.log(JSON.stringify({ root: el.className, saved, nodes: el.children.map(
  (c) => [c.className, c.dataset.agentId, c.textContent]) }));
"""


def test_the_tree_view_draws_with_text_only() -> None:
    assert "innerHTML" not in ESM and "insertAdjacentHTML" not in ESM


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the view's ESM")
def test_the_tree_view_draws_nodes_and_selects_on_click(tmp_path: Any) -> None:
    (tmp_path / "tree.mjs").write_text(ESM)
    (tmp_path / "draw.mjs").write_text(FAKE_DOM)
    state = {"selected": "a1", "nodes": [
        {"id": "a1", "name": IMG, "parent": None, "depth": 0, "messages": 2, "status": "idle",
         "added": 2},
        {"id": "b2", "name": "fork", "parent": "a1", "depth": 1, "messages": 5,
         "status": "waiting", "added": 3}]}
    out = subprocess.run(
        ["node", str(tmp_path / "draw.mjs"), str(tmp_path / "tree.mjs"), json.dumps(state)],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout
    drawn = json.loads(out)
    assert drawn["root"] == "fragola-tree" and drawn["saved"] == ["b2"]
    assert drawn["nodes"] == [
        ["fragola-tree-node", "a1", f"{IMG}a12 msgidle"],
        ["fragola-tree-node fragola-tree-selected", "b2", "\u2514 forkb25 msg+3 since forkwaiting"],
    ]


# -- long histories and streaming -------------------------------------------------------------


def history(count: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
            for i in range(count)]


async def sent_per_turn(model: ScriptedModel, count: int) -> tuple[int, int]:
    """Characters of HTML sent to the browser for one turn (two messages) after ``count``."""
    agent = make_agent(model, messages=history(count))
    panel = AgentPanel(agent)
    assert len(panel.messages.blocks) == -(-count // BLOCK_SIZE)
    sent: list[int] = []

    def watch(block: Any) -> None:
        block.observe(lambda change: sent.append(len(change["new"])), names="value")

    def watch_group(group: Any) -> None:
        for block in group.children:
            watch(block)
        group.observe(
            lambda change: [watch(b) for b in change["new"] if b not in change["old"]],
            names="children")

    for group in panel.messages.children:
        watch_group(group)
    panel.messages.observe(
        lambda change: [watch_group(g) for g in change["new"] if g not in change["old"]],
        names="children")
    model.push(reply("the reply"))
    await agent.user_message("one more")
    return sum(sent), len(shown(panel))


async def test_appending_costs_the_same_at_5000_messages_as_at_50(model: ScriptedModel) -> None:
    small, _ = await sent_per_turn(model, 75)  # both tails hold 25 messages
    large, whole = await sent_per_turn(model, 5025)
    assert small > 0
    assert large <= small * 1.1  # the same work: only the last block is sent again
    assert large < whole / 50


class CountingReads(Agent):
    """An agent that counts the messages it hands out, whole histories (``state``) included."""

    handed_out = 0

    @property
    def state(self) -> AgentState:
        state = super().state
        self.handed_out += len(state.messages)
        return state

    def messages_since(self, index: int) -> list[dict[str, Any]]:
        messages = super().messages_since(index)
        self.handed_out += len(messages)
        return messages


async def test_a_panel_reads_only_the_messages_an_event_adds(model: ScriptedModel) -> None:
    """Every event refreshes the panel: reading the 5,000 messages each time would make each
    one cost more the longer the conversation."""

    async def handed_out(with_panel: bool) -> tuple[int, int]:
        agent = make_agent(model, add_tool(), messages=history(5_000),
                           model_settings={"stream": True})
        agent.__class__ = CountingReads
        events: list[Any] = []
        for name in ("after_state_update", "status_change", "model_chunk", "after_step"):
            agent.on(name, events.append)
        panel = AgentPanel(agent) if with_panel else None
        agent.handed_out = 0  # building the panel reads the history once: not per event
        model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("It is three."))
        await agent.user_message("add")
        agent.approve(agent.pending[0].id)
        await agent.step()
        assert panel is None or "It is three." in shown(panel)
        return agent.handed_out, len(events)

    without, _ = await handed_out(with_panel=False)  # what the run itself reads
    with_panel, events = await handed_out(with_panel=True)
    assert events > 10
    assert with_panel - without <= 2 * events  # the last message shown and the new ones


class RecordingComm(BaseComm):  # type: ignore[misc]
    """The kernel's comm to the browser, keeping the size of every message it would send."""

    sizes: ClassVar[list[int]] = []

    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None,
                    buffers: Any = None, **keys: Any) -> None:
        self.sizes.append(len(json.dumps([data, metadata], default=str)))


async def test_a_turn_sends_the_same_bytes_at_5050_messages_as_at_50(
    model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Everything the panel sends for a turn, not only the blocks' HTML: the turn starts a new
    block, and a list of every block sent again would grow with the history. (5,050: a new
    block in a group that has others, as at 50; a new group comes once per 2,500 messages.)"""
    monkeypatch.setattr(comm, "create_comm", RecordingComm)  # ipywidgets opens comms with it
    monkeypatch.setattr(RecordingComm, "sizes", [])
    sent = {}
    for count in (50, 5_050):
        agent = make_agent(model, messages=history(count))
        panel = AgentPanel(agent)
        RecordingComm.sizes.clear()
        model.push(reply("the reply"))
        await agent.user_message("one more")
        sent[count] = sum(RecordingComm.sizes)
        assert len(panel.messages.blocks) == count // BLOCK_SIZE + 1
        panel.close()
    assert sent[50] > 0
    assert sent[5_050] <= sent[50] * 1.1, sent


async def test_a_turn_panel_shows_messages_from_since(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool(require_approval=False))
    model.push(tool_calls(call("add", {"a": 1, "b": 1})))
    await agent.user_message("first", by=1)  # stops after the tool ran: budget used
    panel = AgentPanel(agent, since=2)
    model.push(reply("two"))
    await agent.step()
    html = shown(panel)
    assert "first" not in html and 'data-index="2"' in html
    assert "result of <b>add</b>" in html  # named from a call made before `since`
    assert "two" in html and panel.messages.count == 2
    assert "first" not in panel._repr_mimebundle_()["text/html"]


def watch_stream(view: StreamView) -> list[tuple[float, str]]:
    """Every update the view sends, with when: (time, the HTML it shows then)."""
    updates: list[tuple[float, str]] = []

    def watch(part: Any) -> None:
        part.observe(lambda c: updates.append((time.monotonic(), view.html)), names="value")

    for part in view.children:
        watch(part)
    view.observe(lambda c: [watch(p) for p in c["new"] if p not in c["old"]], names="children")
    return updates


async def test_streaming_updates_are_batched(model: ScriptedModel) -> None:
    agent = make_agent(model, model_settings={"stream": True})
    panel = AgentPanel(agent)
    updates = watch_stream(panel.streaming)
    text = " ".join(f"w{i}" for i in range(150))  # ~600 characters, one per chunk
    model.chunk_size, model.chunk_delay = 1, 0.002
    model.push(reply(text))
    started = time.monotonic()
    await agent.user_message("stream please")
    elapsed = time.monotonic() - started
    shows = [(t, v) for t, v in updates if v]
    assert len(shows) >= 3, "the reply should show while it streams"
    assert len(shows) <= 20 * elapsed + 2
    for t, _ in shows:  # never more than ~12 in any one second
        assert sum(1 for u, _ in shows if t <= u < t + 1) <= 13
    assert updates[-1][1] == ""  # cleared once the message is stored
    assert text in shown(panel)


async def test_stream_view_flushes_the_last_text_after_a_pause() -> None:
    view = StreamView()
    view.feed({"content": "one"})
    view.feed({"content": "one two"})  # too soon: kept for the trailing flush
    view.feed({"content": "one two <three>"})
    assert view.html == "one"
    await until(lambda: "three" in view.html, timeout=2)
    assert view.html == "one two &lt;three&gt;"
    view.clear()
    assert view.html == ""


async def test_stream_view_shows_an_overdue_text_without_waiting_for_its_timer() -> None:
    view = StreamView()
    view.feed({"content": "one"})
    view.feed({"content": "one two"})  # too soon: a flush is due in `interval`
    time.sleep(view.interval * 1.5)  # the loop is busy (chunks come in without a pause)
    view.feed({"content": "one two three"})  # the flush is overdue: shown now
    assert view.html == "one two three"


def test_a_long_streamed_reply_sends_only_its_last_part_again() -> None:
    view = StreamView()
    view.interval = 0  # every chunk shows (outside a loop there is no timer)
    view.part_size = 100
    sent: list[str] = []  # every text sent to the browser: updates and new parts

    def watch(part: Any) -> None:
        part.observe(lambda c: sent.append(c["new"]), names="value")

    def new_parts(change: dict[str, Any]) -> None:
        for part in change["new"]:
            if part not in change["old"]:
                sent.append(part.value)  # a new part is opened with its text
                watch(part)

    watch(view.children[0])
    view.observe(new_parts, names="children")
    text = "".join(f"<{i}> " for i in range(100))  # 490 characters
    for end in range(7, len(text) + 1, 7):  # 7 characters a chunk
        view.feed({"content": text[:end]})
    assert view.html == html.escape(text) and len(view.children) == 5
    assert len(sent) == 70  # one per chunk
    assert max(len(html.unescape(value)) for value in sent) < 100 + 7  # never the whole text
    view.feed({"content": "another reply"})  # not the same text going on: starts again
    assert view.html == "another reply" and len(view.children) == 1
    view.feed({"content": "x" * 99 + "\r"})
    view.feed({"content": "x" * 99 + "\r\ny"})  # never "\r" and "\n" in two parts
    view.feed({"content": "x" * 99 + "\r\nyz"})
    # (shown as the browser reads it: a "\r\n" is one line break, as HTML parsing makes it)
    assert [part.value for part in view.children] == ["x" * 99 + "\ny", "z"]
    view.clear()
    assert view.html == "" and len(view.children) == 1


def test_clearing_a_long_stream_never_shows_a_piece_of_it() -> None:
    # The browser applies each change as it comes. Dropping the later parts first would show
    # the first part alone for a moment (the text shrinks to its first 10 characters), and
    # emptying the first part first would show the later ones alone (not even its beginning).
    view = StreamView()
    view.interval, view.part_size = 0, 10
    text = "abcdefghij" * 5

    def stream() -> list[str]:
        for end in range(5, len(text) + 1, 5):
            view.feed({"content": text[:end]})
        assert len(view.children) == 5 and view.html == text
        states: list[str] = []  # what the browser shows after each change, in order

        def record(change: Any = None) -> None:
            states.append("".join(part.value for part in view.children))

        for part in view.children:
            part.observe(record, names="value")
        view.observe(record, names="children")
        return states

    states = stream()
    view.clear()
    assert states and set(states) == {""}
    states = stream()
    view.feed({"content": "another reply"})  # a new reply starts over
    assert states[-1] == "another reply" and set(states[:-1]) == {""}


# -- safe display -----------------------------------------------------------------------------


async def hostile_views(model: ScriptedModel) -> tuple[AgentPanel, ForkTree]:
    shady = tool(name="shady", description=SCRIPT, schema=AddArgs,
                 handler=lambda p: IMG, require_approval=lambda p, c: p.a == 1)
    store = create_store({"note": SCRIPT, IMG: 1}, f"ns{IMG}")
    fragola = Fragola(api_key=API_KEY, base_url=model.base_url, max_retries=0)
    agent = fragola.agent(name=IMG, tools=[shady], stores=[store])
    model.push(tool_calls(call("shady", {"a": 2, "b": 0}), content=SCRIPT),
               tool_calls(call("shady", {"a": 1, "b": 2, "c": SCRIPT})))
    panel = AgentPanel(agent)
    await agent.user_message(f"{SCRIPT} {IMG}")  # pauses on the second call
    panel.show_error(RuntimeError(SCRIPT))
    return panel, ForkTree(agent.fork(f"fork {SCRIPT}"))


async def test_hostile_text_is_escaped_in_every_widget(model: ScriptedModel) -> None:
    panel, tree = await hostile_views(model)
    for widget in [*every_widget(panel), *every_widget(tree)]:
        assert not getattr(widget, "description_allow_html", False)
        if isinstance(widget, widgets.HTML):
            assert_inert(widget.value)
    escaped_script, escaped_img = "&lt;script&gt;alert(1)", "&lt;img src=x onerror=alert(2)&gt;"
    assert escaped_img in panel.header.value  # the agent's name
    assert escaped_script in shown(panel)  # the user message and the reply
    assert f"result-text\">{escaped_img}" in shown(panel)  # a tool result
    assert escaped_script in box(panel).header.value  # a tool argument
    assert escaped_script in panel.stores_box.value and escaped_img in panel.stores_box.value
    assert escaped_script in panel.tools_box.value  # a tool description
    assert escaped_script in panel.error_box.value
    assert tree.panel is not None and escaped_script in tree.panel.header.value  # a fork name
    assert tree.view.nodes[1]["name"] == f"fork {SCRIPT}"  # data, drawn with textContent


async def test_no_api_key_in_any_widget_state(model: ScriptedModel) -> None:
    panel, tree = await hostile_views(model)
    bundle = json.dumps(panel._repr_mimebundle_())
    states = [w.get_state() for w in [*every_widget(panel), *every_widget(tree)]]
    assert API_KEY not in json.dumps(states, default=str) and API_KEY not in bundle


async def test_the_text_html_fallback_holds_the_conversation(model: ScriptedModel) -> None:
    agent = make_agent(model)
    panel = AgentPanel(agent)
    model.push(reply(f"answer {SCRIPT}"))
    await agent.user_message("question")
    bundle = panel._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == panel.model_id
    assert bundle["text/plain"].startswith("AgentPanel(Agent(name='tester'")
    html = bundle["text/html"]
    assert_inert(html)
    assert "question" in html and "answer &lt;script&gt;" in html
    assert "fragola-status-idle" in html


@pytest.mark.parametrize("reason", ["approval", "dynamic"])
async def test_panel_of_a_paused_agent_shows_its_controls_at_once(
    model: ScriptedModel, reason: str
) -> None:
    handler: Any = "dynamic" if reason == "dynamic" else (lambda p: 0)
    kind = tool(name="t", description="", schema=AddArgs, handler=handler,
                require_approval=reason == "approval")
    agent = make_agent(model, kind)
    model.push(tool_calls(call("t", {"a": 1, "b": 2})))
    await agent.user_message("go")
    panel = AgentPanel(agent)  # made while waiting: e.g. %fragola_panel after the cell ended
    assert [b.call_id for b in panel.approvals.boxes.values()] == ["call_1"]
    assert panel.status_badge.value == "waiting" and not panel.stop_button.disabled
    panel.stop_button.click()  # stopping a waiting agent cancels its pending calls
    assert agent.status == "idle" and panel.approvals.children == ()


async def test_panel_listeners_are_not_copied_to_forks_nor_saved(model, tmp_path):
    from fragola_nb import load_session, save_session

    model.push(reply("hello"))
    agent = make_fragola(model).agent("viewed")
    panel = AgentPanel(agent)
    await agent.user_message("hi")
    fork = agent.fork("branch")
    assert not any(fork._listeners.has(name) for name in ("after_state_update", "model_chunk"))
    path = save_session(tmp_path / "s.json", agent)
    session = load_session(path, Fragola(api_key="test-key", base_url=model.base_url))
    assert [a.name for a in session.agents] == ["viewed", "branch"]
    panel.detach()


async def test_fork_tree_has_a_static_text_and_html_form(model):
    model.push(reply("hello <b>there</b>"))
    agent = make_fragola(model).agent("root")
    await agent.user_message("hi")
    agent.fork("branch <i>")
    tree = ForkTree(agent)
    bundle = tree._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "root [" in bundle["text/plain"] and "branch <i> [" in bundle["text/plain"]
    assert "branch &lt;i&gt;" in bundle["text/html"] and "<i>" not in bundle["text/html"]
    assert "hello &lt;b&gt;there&lt;/b&gt;" in bundle["text/html"]
    tree.close()
