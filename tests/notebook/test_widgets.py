"""The notebook panel (one anywidget) and the fork tree, in-process.

Agents run against the scripted model (schema-checked by the ``model`` fixture). A control is
used through ``panel.do(action, **fields)``, the entry a browser's click reaches; where the
path from the browser matters, the message goes in through the widget's comm as a browser's
``model.send`` delivers it. What the kernel sends is read from a recording comm (the
third-party ``comm`` module is the process boundary between the kernel and the browser).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from support.comm_log import Wire, record_comms, stream_states
from support.helpers import AddArgs, add_tool, make_fragola
from support.helpers import panel_calls as calls
from support.helpers import until_async as until
from support.html_checks import assert_inert

from fragola_nb import Fragola, ListenerError, Tool, create_store, tool
from fragola_nb.core.agent import Agent
from fragola_nb.core.state import AgentState
from fragola_nb.models.scripted import ScriptedModel, call, fail, hang, reply, tool_calls
from fragola_nb.notebook.panel.message_rows import SHORT
from fragola_nb.notebook.panel.view import AgentPanel
from fragola_nb.notebook.stream import Stream
from fragola_nb.notebook.tree import view as tree_view
from fragola_nb.notebook.tree.view import ForkTree

ESM = (Path(tree_view.__file__).parent / "tree.js").read_text(encoding="utf-8")  # the tree's view

API_KEY = "sk-test-DO-NOT-SHOW-4242"
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
RLO, ZWSP = "\u202e", "\u200b"


def lookup_tool() -> Tool:
    return tool(name="lookup", description="Ask a person.", handler="dynamic")


def make_agent(model: ScriptedModel, *tools: Tool, **options: Any) -> Agent:
    fragola = Fragola(api_key=API_KEY, base_url=model.base_url, max_retries=0)
    return fragola.agent(name="tester", tools=list(tools), **options)




def texts(panel: AgentPanel) -> str:
    return "\n".join(row["html"] for row in panel.rows)


def from_browser(panel: Any, content: dict[str, Any]) -> None:
    """What reaches the kernel when the browser's view calls ``model.send(content)``."""
    panel.comm.handle_msg({"content": {"data": {"method": "custom", "content": content}},
                           "buffers": []})


# -- what the kernel sends ----------------------------------------------------------------------


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    """Every message the widgets made from here on send to the browser."""
    return record_comms(monkeypatch)


# -- the panel follows the agent ----------------------------------------------------------------


async def test_panel_shows_each_message_as_it_is_added(model: ScriptedModel) -> None:
    agent = make_agent(model)
    panel = AgentPanel(agent)
    seen: list[tuple[int, int]] = []
    agent.on_after_state_update(lambda e: seen.append((len(panel.rows), agent.message_count)))
    model.push(reply("Hello **there**"))
    await agent.user_message("hi <you>")
    assert seen == [(1, 1), (2, 2)]
    assert [(r["k"], r["i"], r["role"], r["html"]) for r in panel.rows] == [
        (0, 0, "user", '<div class="fragola-text">hi &lt;you&gt;</div>'),
        (1, 1, "assistant", "<p>Hello <strong>there</strong></p>\n"),
    ]
    assert panel.head["name"] == "tester" and panel.head["id"] == agent.id
    assert (panel.head["steps"], panel.head["max_step"]) == (1, 5)


async def test_status_and_steps_follow_the_run(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool(require_approval=False))
    panel = AgentPanel(agent)
    assert panel.strip == {"kind": "idle", "text": "ready"}
    seen: list[tuple[str, str, str]] = []
    agent.on_status_change(
        lambda e: seen.append((e.status, panel.head["status"], panel.strip["kind"])))
    model.push(tool_calls(call("add", {"a": 2, "b": 3})), reply("5"))
    await agent.user_message("add")
    assert seen == [("generating", "generating", "model"), ("idle", "idle", "finished")]
    assert panel.head["steps"] == 2 and panel.strip == {"kind": "finished", "text": "finished"}


async def test_a_tool_call_and_its_result_are_one_row(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool(require_approval=False))
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 2, "b": 3})), reply("It is 5."))
    await agent.user_message("add")
    assert [(r["role"], r["i"]) for r in panel.rows] == [
        ("user", 0), ("assistant", 1), ("assistant", 3)]  # message 2, the result, is folded
    assert calls(panel) == [{"id": "call_1", "name": "add", "args": "a=2, b=3",
                             "full": '{\n  "a": 2,\n  "b": 3\n}', "flag": False,
                             "state": "ran", "note": "", "result": "5"}]
    assert isinstance(panel.rows[1]["calls"][0]["ms"], int)  # the panel saw it run
    assert panel.tools == [{"name": "add", "about": "Add two numbers.", "dynamic": False,
                            "approval": False}]


async def test_a_failing_run_started_from_the_panel_shows_its_error(model: ScriptedModel) -> None:
    agent = make_agent(model, messages=[{"role": "user", "content": "go"}])
    panel = AgentPanel(agent)
    model.push(fail(500, "<b>boom</b>"))
    panel.do("step")
    await until(lambda: panel.notice and agent.status == "idle")
    assert panel.notice["kind"] == "error"
    assert panel.notice["text"].startswith("ModelHTTPError: ") and "<b>boom</b>" in panel.notice[
        "text"]  # text, drawn with textContent
    assert panel.strip["kind"] == "error"
    assert panel.strip["text"] == "failed"  # which error: the notice says it, once
    panel.show_error(ListenerError("listener <x> raised", event="ai_message"))
    assert panel.notice == {"kind": "error", "text": "ListenerError: listener <x> raised"}
    model.push(reply("fine"))
    panel.do("step")  # a new run clears the old error
    await until(lambda: agent.message_count == 2 and agent.status == "idle")
    assert panel.notice == {} and panel.strip == {"kind": "finished", "text": "finished"}


async def test_an_unknown_control_from_the_browser_is_shown_not_raised(
        model: ScriptedModel) -> None:
    panel = AgentPanel(make_agent(model))
    from_browser(panel, {"do": "explode"})
    assert panel.notice == {"kind": "error",
                            "text": "Refused: the panel has no control 'explode'"}
    from_browser(panel, {"do": "_refresh"})  # the panel's own methods are not controls
    assert panel.notice["text"] == "Refused: the panel has no control '_refresh'"


# -- approvals ------------------------------------------------------------------------------------


async def test_approve_resumes_the_run_in_the_same_panel(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("three"))
    await agent.user_message("add")
    assert panel.strip == {"kind": "waiting", "text": "1 call needs your decision"}
    assert panel.cards == [{
        "id": "call_1", "raw_id": "call_1", "name": "add", "dynamic": False,
        "args": "a=1, b=2", "full": '{\n  "a": 1,\n  "b": 2\n}',
        "flag": False, "decided": "", "error": "",
    }]
    assert calls(panel)[0]["state"] == "asked"
    panel.do("approve", id="call_1")
    await until(lambda: agent.status == "idle")
    assert [m["role"] for m in agent.state.messages] == ["user", "assistant", "tool", "assistant"]
    assert [(c["state"], c["result"]) for c in calls(panel)] == [("ran", "3")]
    assert "three" in texts(panel)
    assert panel.cards == [] and panel.head["status"] == "idle" and panel.notice == {}


async def test_edited_arguments_are_validated_before_approval(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("done"))
    await agent.user_message("add")
    assert json.loads(panel.cards[0]["full"]) == {"a": 1, "b": 2}
    for wrong, says in [
        ("{not json", "the arguments are not valid JSON: "),
        ("[1, 2]", "the arguments must be a JSON object, not list"),
        ('{"a": "one", "b": 2}', "InvalidArguments: invalid arguments for add"),
        ('{"a": 1, "b": 2, "c": 3}', "c: not in the arguments add takes (a, b); remove them"),
    ]:
        panel.do("edit", id="call_1", args=wrong)
        assert says in panel.cards[0]["error"], wrong
        assert agent.status == "waiting" and agent.pending[0].decision is None
        assert panel.cards[0]["decided"] == "" and panel.notice == {}
    panel.do("edit", id="call_1", args='{"a": 20, "b": 22}')
    assert panel.cards[0]["error"] == ""
    assert panel.cards[0]["decided"] == "approved with edited arguments"
    await until(lambda: agent.status == "idle")
    assert agent.state.messages[2]["content"] == (
        '(The user edited the arguments before this call ran: {"a": 20, "b": 22})\n42')
    # (the note's exact text: test_panel_rows.py::test_an_edited_call_notes_the_edit)
    assert [c["state"] for c in calls(panel)] == ["edited"]
    assert calls(panel)[0]["note"].startswith('{"a": 20, "b": 22}')


async def test_reject_with_a_reason_tells_the_model(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("ok, I won't"))
    await agent.user_message("add")
    panel.do("reject", id="call_1", reason="   ")
    assert panel.cards[0]["error"] == "write a reason first: the model reads it"
    assert agent.pending[0].decision is None
    panel.do("reject", id="call_1", reason="not <now>")
    assert panel.cards[0]["decided"] == "rejected: not <now>"
    await until(lambda: agent.status == "idle")
    assert agent.state.messages[2]["content"] == (
        "The user rejected this call to add. Reason: not <now>")
    assert [(c["state"], c["note"]) for c in calls(panel)] == [("rejected", "not <now>")]


async def test_inject_a_result_by_hand_for_a_dynamic_tool(model: ScriptedModel) -> None:
    agent = make_agent(model, lookup_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("lookup", {"q": "x"})), reply("thanks"))
    await agent.user_message("look it up")
    assert panel.cards[0]["dynamic"] is True
    panel.do("approve", id="call_1")  # nothing to run: said on the card
    assert panel.cards[0]["error"] == "lookup has no handler to run: answer it by hand"
    panel.do("inject", id="call_1", text="")
    assert panel.cards[0]["error"] == (
        "type the result first: the model reads it as the tool's answer")
    assert agent.pending[0].decision is None
    panel.do("inject", id="call_1", text="the answer <is> 7")
    await until(lambda: agent.status == "idle")
    assert agent.state.messages[2]["content"] == "the answer <is> 7"
    assert [(c["state"], c["result"]) for c in calls(panel)] == [
        ("injected", "the answer <is> 7")]


async def test_each_pending_call_is_decided_on_its_own(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 2}),
                          call("add", {"a": 3, "b": 3})), reply("done"))
    await agent.user_message("add thrice")
    assert [c["id"] for c in panel.cards] == ["call_1", "call_2", "call_3"]
    panel.do("reject", id="call_2", reason="no")
    panel.do("approve", id="call_1")
    await asyncio.sleep(0)  # would let a launched run start: nothing was launched
    assert agent.status == "waiting" and len(model.requests) == 1
    assert [c["decided"] for c in panel.cards] == ["approved", "rejected: no", ""]
    assert panel.strip == {"kind": "waiting", "text": "1 call needs your decision"}
    panel.do("approve", id="call_2")  # already decided: one click was one decision
    assert [c["decided"] for c in panel.cards] == ["approved", "rejected: no", ""]
    assert panel.cards[1]["error"] == "" and panel.notice == {}
    panel.do("inject", id="call_3", text="six")
    await until(lambda: agent.status == "idle")
    assert [m.get("content") for m in agent.state.messages[2:5]] == [
        "2", "The user rejected this call to add. Reason: no", "six"]
    assert [c["state"] for c in calls(panel)] == ["ran", "rejected", "injected"]


async def test_a_double_approve_is_one_decision(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("three"))
    await agent.user_message("add")
    panel.do("approve", id="call_1")
    panel.do("approve", id="call_1")  # a double-click, before the run goes on
    await until(lambda: agent.status == "idle")
    panel.do("approve", id="call_1")  # and a late one, once the call is answered
    assert panel.notice == {} and panel.cards == []
    assert len(model.requests) == 2 and agent.message_count == 4
    assert [c["state"] for c in calls(panel)] == ["ran"]


async def test_step_with_undecided_calls_names_them(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 2}),
                          call("add", {"a": 3, "b": 3})))
    await agent.user_message("add thrice")
    panel.do("approve", id="call_2")
    panel.do("step")
    assert panel.notice == {"kind": "error",
                            "text": "decide these calls first: add (call_1), add (call_3)"}
    await asyncio.sleep(0)
    assert agent.status == "waiting" and len(model.requests) == 1


async def test_step_names_undecided_calls_as_visible_text(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 1}, id=f"call{RLO}1")))
    await agent.user_message("add")
    panel.do("step")
    assert panel.notice["text"].startswith("decide these calls first: add (call")
    assert RLO not in panel.notice["text"], "a call id from the model reached the notice raw"


# -- the controls ---------------------------------------------------------------------------------


async def test_stop_cancels_a_hanging_request(model: ScriptedModel) -> None:
    agent = make_agent(model, messages=[{"role": "user", "content": "wait"}])
    panel = AgentPanel(agent)
    model.push(hang())
    panel.do("step")
    await until(lambda: len(model.requests) == 1)
    assert panel.head["status"] == "generating"
    assert panel.strip["kind"] == "model" and panel.strip["text"] == f"calling {agent.model}…"
    panel.do("reset")  # the browser greys it out; sent anyway, it says why
    assert panel.notice == {"kind": "error",
                            "text": "the agent is generating: stop it before a reset"}
    panel.do("stop")
    await until(lambda: agent.status == "idle")
    assert panel.strip == {"kind": "stopped", "text": "stopped"}
    assert agent.state.messages == [{"role": "user", "content": "wait"}]


@pytest.mark.parametrize("experiment", ["batch", "compare"])
async def test_stop_reaches_a_batch_or_compare_running_on_the_agents_forks(
    model: ScriptedModel, experiment: str
) -> None:
    # The agent itself stays idle while its forks run: the strip says what runs, and Stop
    # (enabled by head["experiment"]) ends it, keeping what finished.
    agent = make_agent(model)
    panel = AgentPanel(agent)
    model.brain = lambda request: hang()
    running = asyncio.ensure_future(
        agent.batch(["one", "two"], progress=False) if experiment == "batch"
        else agent.compare("hi", {"a": {}, "b": {}}))
    await until(lambda: len(model.requests) == 2)
    assert agent.status == "idle"
    what = "batch of 2 inputs" if experiment == "batch" else "compare of 2 variants"
    assert panel.head["experiment"] == what
    assert panel.strip == {"kind": "experiment", "text": f"{what} running on forks — Stop ends it"}
    panel.do("stop")
    result = await asyncio.wait_for(running, 10)
    assert len(result) == 2 and panel.notice == {}
    assert panel.head["experiment"] == "" and panel.strip["kind"] != "experiment"
    model.release()


async def test_the_header_says_how_the_last_run_ended(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool(require_approval=False), max_step=1)
    panel = AgentPanel(agent)
    seen: list[tuple[str, str, str]] = []  # (status, strip kind, strip text) at each change
    agent.on_status_change(
        lambda e: seen.append((e.status, panel.strip["kind"], panel.strip["text"])))
    model.push(tool_calls(call("add", {"a": 1, "b": 2})))
    await agent.user_message("add")  # one model call allowed: the tool runs, then it ends
    assert agent.outcome == "step_limit"
    static = panel.html()  # the static form says it too, without the button it lacks
    assert "· step budget used" in static and "Step goes on" not in static
    model.push(hang())
    panel.do("step")
    await until(lambda: len(model.requests) == 2)
    panel.do("stop")
    await until(lambda: agent.status == "idle")
    assert agent.outcome == "stopped" and "· stopped" in panel.html()
    model.push(reply("done"))
    panel.do("step")
    await until(lambda: agent.status == "idle" and agent.outcome == "finished")
    calling = ("generating", "model", f"calling {agent.model}…")
    assert seen == [
        calling,
        ("idle", "step_limit", "step budget used — Step goes on"),
        calling,  # a new run: the last one's end is old news
        ("idle", "stopped", "stopped"),
        calling,
        ("idle", "finished", "finished"),
    ]
    assert "stopped" not in panel.html()


async def test_reset_is_refused_unless_idle_and_empties_a_full_panel(
        model: ScriptedModel, wire: Wire) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 2})))
    await agent.user_message("add")
    panel.do("reset")
    assert panel.notice == {"kind": "error",
                            "text": "the agent is waiting: stop it before a reset"}
    assert agent.message_count == 2 and len(panel.rows) == 2
    panel.do("stop")
    wire.clear()
    panel.do("reset")
    assert agent.message_count == 0 and panel.rows == [] and panel.cards == []
    assert {"t": "rows", "reset": True, "rows": []} in wire.custom("rows")  # the browser too
    assert panel.notice == {"kind": "note", "text": "'tester' reset: no messages, step count 0"}
    assert panel.head["steps"] == 0 and panel.strip == {"kind": "idle", "text": "ready"}
    model.push(reply("again"))
    await agent.user_message("new start")
    assert [(r["k"], r["i"], r["role"]) for r in panel.rows] == [
        (0, 0, "user"), (1, 1, "assistant")]
    assert "new start" in texts(panel) and "add" not in texts(panel)


async def test_fork_binds_a_fresh_variable_and_never_overwrites_one(model: ScriptedModel) -> None:
    agent = make_agent(model)
    namespace: dict[str, Any] = {"branch_b": "keep me"}
    panel = AgentPanel(agent, namespace=namespace)
    forked: list[Agent] = []
    panel.on_fork = forked.append
    model.push(reply("root reply"))
    await agent.user_message("hi")
    panel.do("fork", name="branch <b>")
    fork = namespace["branch_b_2"]  # `branch_b` was taken: a name of its own
    assert namespace["branch_b"] == "keep me"
    assert fork.name == "branch <b>" and fork.fork_of == agent.id and forked == [fork]
    assert panel.notice == {"kind": "note", "text": "forked 'branch <b>', bound to `branch_b_2` "
                                                    "(%%fragola branch_b_2 talks to it)"}
    panel.do("fork")  # no name: the agent's default, bound to a variable made of it
    default = forked[-1]
    assert default.name == "tester-fork1" and namespace["tester_fork1"] is default
    panel.do("fork", name="again", var="mine")
    assert namespace["mine"] is forked[-1] and forked[-1].name == "again"
    fork_panel = AgentPanel(fork)
    model.push(reply("fork reply"))
    await fork.user_message("only in the fork")
    assert "only in the fork" in texts(fork_panel) and "only in the fork" not in texts(panel)
    assert len(panel.rows) == 2


async def test_bind_refuses_bad_names_and_other_objects(model: ScriptedModel) -> None:
    agent = make_agent(model)
    namespace: dict[str, Any] = {"taken": 5}
    panel = AgentPanel(agent, namespace=namespace)
    for bad in ("", "1abc", "class", "a-b"):
        panel.do("bind", var=bad)
        assert panel.notice == {"kind": "error",
                                "text": f"{bad!r} is not a Python variable name"}
    panel.do("bind", var="taken")
    assert panel.notice == {"kind": "error",
                            "text": "`taken` already holds a int: choose another name"}
    assert namespace == {"taken": 5}
    panel.do("bind", var="me")
    assert namespace["me"] is agent
    assert panel.notice == {"kind": "note", "text": "'tester' is bound to `me`"}
    panel.do("bind", var="me")  # the same agent again: fine
    assert panel.notice["kind"] == "note"


async def test_send_runs_a_turn_in_the_same_panel(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    panel.do("send", text="  ")
    assert panel.notice == {"kind": "error", "text": "write a message first"}
    assert agent.message_count == 0
    model.push(reply("hello <you>"))
    panel.do("send", text="hi <there>")
    await until(lambda: agent.status == "idle" and agent.message_count == 2)
    assert panel.notice == {}
    assert [r["html"] for r in panel.rows] == [
        '<div class="fragola-text">hi &lt;there&gt;</div>', "<p>hello &lt;you&gt;</p>\n"]
    model.push(tool_calls(call("add", {"a": 1, "b": 2})))
    panel.do("send", text="add")
    await until(lambda: agent.status == "waiting")
    panel.do("send", text="more")
    assert panel.notice == {"kind": "error", "text": "the agent waits on tool calls: decide "
                                                     "them (or Stop) first"}
    panel.do("stop")
    model.push(hang())
    panel.do("send", text="wait")
    await until(lambda: len(model.requests) == 3)
    panel.do("send", text="and more")
    assert panel.notice == {"kind": "error",
                            "text": "the agent is running: wait for it, or Stop it"}
    panel.do("stop")
    await until(lambda: agent.status == "idle")
    assert [m["content"] for m in agent.state.messages if m["role"] == "user"] == [
        "hi <there>", "add", "wait"]


async def test_detach_freezes_the_view(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 2})))
    await agent.user_message("add")
    assert panel.detached == ""
    panel.detach()
    panel.detach("a second detach changes nothing")
    assert panel.detached == "this panel no longer follows the agent"
    panel.do("approve", id="call_1")
    assert agent.pending[0].decision is None
    assert panel.notice == {"kind": "note", "text": "this panel is detached (this panel no "
                                                    "longer follows the agent): nothing was done"}
    agent.reject("call_1", "later")
    assert panel.cards[0]["decided"] == ""  # the view keeps its last state
    assert len(panel.rows) == 2


def test_detached_says_why_as_text(model: ScriptedModel) -> None:
    panel = AgentPanel(make_agent(model))
    panel.detach(f"replaced by {SCRIPT}{RLO}")
    assert panel.detached == f"replaced by {SCRIPT}\\u202e"  # drawn with textContent


async def test_stores_are_shown_and_refreshed(model: ScriptedModel) -> None:
    store = create_store({"visits": 0}, "counter")
    agent = Fragola(api_key=API_KEY, base_url=model.base_url).agent(name="s", stores=[store])
    panel = AgentPanel(agent)
    assert panel.stores == [{"name": "counter", "value": '{\n  "visits": 0\n}'}]
    store.update(lambda v: {"visits": v["visits"] + 1})
    assert panel.stores == [{"name": "counter", "value": '{\n  "visits": 1\n}'}]
    panel.detach()
    store.set({"visits": 9})
    assert panel.stores == [{"name": "counter", "value": '{\n  "visits": 1\n}'}]


# -- turn panels ----------------------------------------------------------------------------------


async def test_a_turn_panel_shows_messages_from_since(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool(require_approval=False))
    model.push(tool_calls(call("add", {"a": 1, "b": 1})))
    await agent.user_message("first", by=1)  # stops after the tool ran: budget used
    panel = AgentPanel(agent, since=2)
    model.push(reply("two"))
    await agent.step()
    assert [(r["k"], r["i"], r["role"]) for r in panel.rows] == [
        (0, 2, "tool"), (1, 3, "assistant")]
    assert calls(panel) == [{"id": "call_1", "name": "tool", "args": "", "full": "",
                             "flag": False, "state": "ran", "note": "", "result": "2"}]
    assert panel.head["turn"] is True and panel.since == 2
    assert "two" in texts(panel) and "first" not in texts(panel)
    assert "first" not in panel._repr_mimebundle_()["text/html"]


async def test_a_finished_turn_panel_keeps_its_turn_when_the_agent_is_reset(
        model: ScriptedModel, wire: Wire) -> None:
    agent = make_agent(model)
    model.push(reply("one"), reply("two"))
    await agent.user_message("first")
    earlier = AgentPanel(agent, since=0)
    later = AgentPanel(agent, since=2)
    await agent.user_message("second")
    kept = earlier.rows, later.rows
    assert [len(rows) for rows in kept] == [4, 2]
    wire.clear()
    agent.reset()
    assert (earlier.rows, later.rows) == kept
    why = "the agent's history was reset or replaced; this panel keeps the turn as it was"
    assert earlier.detached == later.detached == why
    assert not any(m.get("reset") for m in wire.custom("rows"))  # the browsers keep them too
    model.push(reply("three"))
    await agent.user_message("after the reset")
    assert (earlier.rows, later.rows) == kept
    whole = AgentPanel(agent)  # a whole-history panel follows the new history
    assert [r["role"] for r in whole.rows] == ["user", "assistant"]


def test_a_turn_panel_keeps_its_turn_through_fragola_reset(model: ScriptedModel) -> None:
    shell = InteractiveShell.instance()
    shell.extension_manager.load_extension("fragola_nb")
    try:
        ext = shell._fragola_nb
        ext.widgets = True  # as in a kernel: live panels
        fragola = Fragola(api_key=API_KEY, base_url=model.base_url, max_retries=0)
        agent = shell.user_ns["agent"] = fragola.agent(name="a")
        model.push(reply("one"), reply("two"))
        shell.run_cell("%%fragola\nfirst", store_history=False)
        [first] = ext.views
        shell.run_cell("%%fragola\nsecond", store_history=False)
        [second] = ext.views  # the first one was detached: a newer panel follows the agent
        assert (first.since, second.since) == (0, 2)
        kept = [[r["html"] for r in p.rows] for p in (first, second)]
        assert kept[1] == ['<div class="fragola-text">second</div>', "<p>two</p>\n"]
        shell.run_cell("%fragola_reset", store_history=False)
        assert agent.message_count == 0
        assert [[r["html"] for r in p.rows] for p in (first, second)] == kept
        assert second.detached != "" and first.detached == "a newer panel follows this agent"
    finally:
        shell.extension_manager.unload_extension("fragola_nb")
        shell.reset(new_session=False)


# -- the fork tree --------------------------------------------------------------------------------


async def test_fork_tree_nodes_and_selection(model: ScriptedModel) -> None:
    root = make_agent(model)
    model.push(reply("a"), reply("b"))
    await root.user_message("one")
    left = root.fork("left")
    await left.user_message("two")
    namespace: dict[str, Any] = {}
    tree = ForkTree(left, namespace=namespace)
    assert tree.view.selected == left.id and tree.panel is not None and tree.panel.agent is left
    assert "fragola-tree" in tree.view._dom_classes
    assert tree.view.nodes == [
        {"id": root.id, "name": "tester", "parent": None, "depth": 0, "messages": 2,
         "status": "idle", "added": 2, "at": None, "edited": ""},
        {"id": left.id, "name": "left", "parent": root.id, "depth": 1, "messages": 4,
         "status": "idle", "added": 2, "at": 2, "edited": ""},  # left after the parent's 2
    ]
    tree.view.selected = root.id  # what the view's click does (model.set + save_changes)
    assert tree.panel.agent is root and tree.branch.children == (tree.panel,)
    tree.view.selected = "no-such-agent"
    assert tree.view.selected == root.id and tree.panel.agent is root
    tree.panel.do("fork", name="right")  # a fork from the tree's panel joins the tree, selected
    right = root.forks[1]
    assert namespace == {"right": right}
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


async def test_fork_tree_has_a_static_text_and_html_form(model: ScriptedModel) -> None:
    model.push(reply("hello <b>there</b>"))
    agent = make_fragola(model).agent("root")
    await agent.user_message("hi")
    agent.fork("branch <i>")
    tree = ForkTree(agent)
    bundle = tree._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith(  # what it is, and how to see it live
        "fragola_nb fork tree of 'root', 2 agents: run the cell, or trust the notebook\n")
    assert "root [" in bundle["text/plain"] and "branch <i> [" in bundle["text/plain"]
    assert "branch &lt;i&gt;" in bundle["text/html"] and "<i>" not in bundle["text/html"]
    assert "hello &lt;b&gt;there&lt;/b&gt;" in bundle["text/html"]
    tree.close()


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
  contains() { return false; }
}
globalThis.document = { createElement: () => new El(), activeElement: null };
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
    assert "textContent" in ESM


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the view's ESM")
def test_the_tree_view_draws_nodes_and_selects_on_click(tmp_path: Any) -> None:
    (tmp_path / "tree.mjs").write_text(ESM)
    (tmp_path / "draw.mjs").write_text(FAKE_DOM)
    state = {"selected": "a1", "nodes": [
        {"id": "a1", "name": IMG, "parent": None, "depth": 0, "messages": 2, "status": "idle",
         "added": 2},
        {"id": "b2", "name": "fork", "parent": "a1", "depth": 1, "messages": 5,
         "status": "waiting", "added": 3, "at": 2, "edited": "edited by hand: #3"}]}
    out = subprocess.run(
        ["node", str(tmp_path / "draw.mjs"), str(tmp_path / "tree.mjs"), json.dumps(state)],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout
    drawn = json.loads(out)
    assert drawn["root"] == "fragola-tree" and drawn["saved"] == ["b2"]
    assert drawn["nodes"] == [
        ["fragola-tree-node", "a1", f"{IMG}a12 msgidle"],
        ["fragola-tree-node fragola-tree-selected", "b2",
         "\u2514 forkb25 msgat message #2+3 since forkedited by hand: #3waiting"],
    ]


# -- long histories and streaming -----------------------------------------------------------------


def history(count: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
            for i in range(count)]


async def test_a_turn_sends_the_same_bytes_at_5050_messages_as_at_50(
        model: ScriptedModel, wire: Wire) -> None:
    """Everything the kernel sends for one turn (rows, traits, stream): a history sent again,
    or any list that grows with it, would make a turn cost more the longer the notebook."""
    sent = {}
    for count in (50, 5_050):
        agent = make_agent(model, messages=history(count))
        panel = AgentPanel(agent)
        wire.clear()
        model.push(reply("the reply"))
        await agent.user_message("one more")
        sent[count] = sum(s.size for s in wire.log)
        rows = [r for m in wire.custom("rows") for r in m["rows"]]
        assert [r["i"] for r in rows] == [count, count + 1]  # the new rows only
        panel.close()
    assert sent[50] > 0
    assert sent[5_050] <= sent[50] * 1.1, sent


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
        assert panel is None or "It is three." in texts(panel)
        return agent.handed_out, len(events)

    without, _ = await handed_out(with_panel=False)  # what the run itself reads
    with_panel, events = await handed_out(with_panel=True)
    assert events > 10
    assert with_panel - without <= 2 * events  # the last message shown and the new ones


async def test_streaming_is_batched_and_sends_only_new_text(
        model: ScriptedModel, wire: Wire) -> None:
    agent = make_agent(model, model_settings={"stream": True})
    panel = AgentPanel(agent)
    text = " ".join(f"w{i}" for i in range(150))  # ~600 characters, one per chunk
    model.chunk_size, model.chunk_delay = 1, 0.002
    model.push(reply(text))
    wire.clear()
    started = time.monotonic()
    await agent.user_message("stream please")
    elapsed = time.monotonic() - started
    sent = [(s.at, s.data["content"]) for s in wire.log
            if isinstance(s.data, dict) and s.data.get("method") == "custom"]
    at = {id(message): t for t, message in sent}
    # what the view shows: stream messages, and the panel's paced rows messages carrying it
    states = stream_states([message for _, message in sent])
    pieces = [(at[id(m)], shown, m) for shown, m in states if shown]
    assert len(pieces) >= 3, "the reply should show while it streams"
    assert len(pieces) <= elapsed / Stream.interval + 2
    times = [t for t, _, _ in pieces]
    for t in times:  # one per interval in any second (17 at 60 ms), and the reply's end
        assert sum(1 for u in times if t <= u < t + 1) <= round(1 / Stream.interval) + 2
    assert all(text.startswith(shown) for _, shown, _ in pieces)
    # only what is new: the text goes once (whole only in a message that carries it whole)
    carried = sum(len(m.get("text", "") + m.get("add", "") + m.get("stream", ""))
                  for _, _, m in pieces)
    assert carried < 1.25 * len(text), (carried, len(text))
    assert max(len(m.get("add", "")) for _, _, m in pieces) < len(text) / 2
    # the end: its last text first, on its own (nothing else waited), then the message that
    # brings the stored reply clears the stream (never both on screen, nor neither)
    (last, ended), (cleared, stored) = states[-2], states[-1]
    assert last == text and ended["t"] == "stream"
    assert cleared == "" and stored["t"] == "rows"
    assert any(text in row["html"] for row in stored["rows"])
    assert panel.stream_text == "" and text in texts(panel)


def test_the_stream_sends_the_last_text_after_a_pause() -> None:
    async def scenario() -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []
        stream = Stream(sent.append)
        stream.feed("one")
        stream.feed("one two")  # too soon: kept for the trailing flush
        stream.feed("one two <three>")
        assert sent == [{"text": "one", "stopped": False}]
        await until(lambda: len(sent) == 2, timeout=2)
        stream.clear()
        return sent

    assert asyncio.run(scenario()) == [
        {"text": "one", "stopped": False},
        {"add": " two <three>", "stopped": False},
        {"text": "", "stopped": False},
    ]


def test_the_stream_shows_an_overdue_text_without_waiting_for_its_timer() -> None:
    async def scenario() -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []
        stream = Stream(sent.append)
        stream.feed("one")
        stream.feed("one two")  # too soon: a flush is due in `interval`
        time.sleep(stream.interval * 1.5)  # the loop is busy (chunks come in without a pause)
        stream.feed("one two three")  # the flush is overdue: shown now
        return sent

    assert asyncio.run(scenario()) == [
        {"text": "one", "stopped": False}, {"add": " two three", "stopped": False}]


def test_a_finished_reply_sends_its_last_text_at_once_and_only_once() -> None:
    async def scenario() -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []
        stream = Stream(sent.append)
        stream.feed("one")
        stream.feed("one two")  # too soon: a trailing flush is due
        stream.finish()  # the end does not wait for the pace: it goes ahead of the rows
        assert sent == [{"text": "one", "stopped": False}, {"add": " two", "stopped": False}]
        stream.finish()  # nothing new: nothing sent
        await asyncio.sleep(stream.interval * 2)  # and the trailing flush was called off
        return sent

    assert len(asyncio.run(scenario())) == 2


def test_a_stream_that_does_not_go_on_is_sent_whole_and_a_stop_keeps_it() -> None:
    sent: list[dict[str, Any]] = []
    stream = Stream(sent.append)
    stream.interval = 0  # every piece shows (outside a loop there is no timer)
    for piece in ("a", "ab", "abc", "xyz", "xyz!"):
        stream.feed(piece)
    stream.stop()
    assert sent == [
        {"text": "a", "stopped": False}, {"add": "b", "stopped": False},
        {"add": "c", "stopped": False}, {"text": "xyz", "stopped": False},
        {"add": "!", "stopped": False}, {"add": "", "stopped": True},  # kept, marked
    ]
    assert stream.text == "xyz!"


async def test_a_new_view_says_hello_and_gets_everything_once(
        model: ScriptedModel, wire: Wire) -> None:
    agent = make_agent(model, add_tool(require_approval=False))
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 2, "b": 3})), reply("It is 5."))
    await agent.user_message("add")
    wire.clear()
    from_browser(panel, {"do": "hello"})
    assert wire.custom() == [{"t": "rows", "reset": True, "total": 3, "rows": json.loads(
        json.dumps(panel.rows)), "stream": "", "stopped": False}]


async def test_a_view_saying_hello_mid_stream_never_gets_a_piece_twice(
        model: ScriptedModel, wire: Wire) -> None:
    # The hello carries the streamed text the views have; text received but not yet sent
    # (the 80 ms throttle) comes in the next add, once. (It came in both: "word1 wordword2".)
    text = " ".join(f"word{i}" for i in range(120))
    model.chunk_size, model.chunk_delay = 4, 0.004  # ~0.7 s: sent in throttled pieces
    agent = make_agent(model, model_settings={"stream": True})
    panel = AgentPanel(agent)
    from_browser(panel, {"do": "hello"})
    chunks = 0

    def hello_now_and_then(event: Any) -> None:
        nonlocal chunks
        chunks += 1
        if chunks in (5, 40, 90):  # a new view opens while the reply streams
            from_browser(panel, {"do": "hello"})

    agent.on_model_chunk(hello_now_and_then)
    model.push(reply(text))
    wire.clear()
    await agent.user_message("talk")
    states = stream_states(wire.custom())  # a hello's rows message carries the stream
    seen = [shown for shown, _ in states]
    hellos = sum(1 for _, message in states if message.get("reset"))
    assert hellos == 3 and chunks > 90
    assert all(text.startswith(s) for s in seen), [s for s in seen if not text.startswith(s)]
    # most of it streamed (the last piece may be replaced by the stored message at once)
    assert len(max(seen, key=len)) > len(text) // 2 and seen[-1] == ""


# -- safe display ---------------------------------------------------------------------------------

HOSTILE_TEXT = (f"{SCRIPT} {IMG} [bad](javascript:alert(3)) [good](https://example.com) "
                f"file{RLO}gnp.exe zero{ZWSP}width " + "x" * 5_000)


async def hostile_views(model: ScriptedModel) -> tuple[AgentPanel, ForkTree]:
    shady = tool(name="shady", description=SCRIPT + RLO, schema=AddArgs,
                 handler=lambda p: IMG + RLO, require_approval=lambda p, c: p.a == 1)
    asker = tool(name="asker", description=IMG, handler="dynamic")
    store = create_store({"note": SCRIPT + ZWSP, IMG: 1}, f"ns{IMG}")
    fragola = Fragola(api_key=API_KEY, base_url=model.base_url, max_retries=0)
    agent = fragola.agent(name=IMG + RLO, tools=[shady, asker], stores=[store],
                          instructions=SCRIPT + ZWSP, model_settings={"stream": True})
    model.push(tool_calls(call("shady", {"a": 2, "b": 0}), content=HOSTILE_TEXT),
               tool_calls(call("asker", {"q": HOSTILE_TEXT})))
    panel = AgentPanel(agent)
    await agent.user_message(HOSTILE_TEXT)  # pauses on the second call
    panel.show_error(RuntimeError(SCRIPT + RLO))
    panel.do("inject", id="call_2", text="")  # a card error
    panel.detach(f"gone {SCRIPT}{RLO}")
    return panel, ForkTree(agent.fork(f"fork {SCRIPT}{RLO}"))


CODE_TRAITS = {"_esm", "_css"}  # the views' code, not data


def strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every (key path, string) in ``value``, keys included."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in CODE_TRAITS:
                continue
            yield f"{path}.{key}", str(key)
            yield from strings(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for n, item in enumerate(value):
            yield from strings(item, f"{path}[{n}]")


LINK = re.compile(r"<a\s([^>]*)>")


def assert_safe_html(html: str) -> None:
    assert_inert(html)
    assert "<script" not in html and "<img" not in html
    for attrs in LINK.findall(html):
        href = re.search(r'href="([^"]*)"', attrs)
        assert href is not None and re.match(r"(https?://|mailto:)", href[1]), attrs
        assert 'target="_blank"' in attrs and 'rel="noopener noreferrer"' in attrs, attrs


async def test_hostile_text_never_reaches_the_browser_live(
        model: ScriptedModel, wire: Wire) -> None:
    """Text fields are drawn with textContent, so "<script>" in them is text; what must never
    get through: a bidi override or zero-width character (written \\u202e), markup or an
    unsafe link in an ``html`` field, or a 5,000-character token on a one-line field."""
    panel, tree = await hostile_views(model)
    states = [panel.get_state(), tree.view.get_state()]
    sent = [s.data for s in wire.log]
    found_html = found_escaped = 0
    for path, text in strings([states, sent]):
        if path.endswith((".edit", ".raw_id")):
            continue  # the edit box's JSON: see the test of its own below; raw_id: an id
        assert RLO not in text and ZWSP not in text, (path, text[:200])
        if path.endswith(".html"):
            assert_safe_html(text)
            found_html += 1
            found_escaped += "&lt;script&gt;" in text
        if path.endswith(".args"):
            assert len(text) <= SHORT, path
    assert found_html and found_escaped
    html = "".join(r["html"] for r in panel.rows)
    assert '<a href="https://example.com" target="_blank" rel="noopener noreferrer">good</a>' in (
        html)
    assert "[bad](javascript:alert(3))" in html  # refused: stays text
    assert "file\\u202egnp.exe zero\\u200bwidth" in html
    assert panel.head["name"] == IMG + "\\u202e"
    assert panel.notice == {"kind": "error", "text": f"RuntimeError: {SCRIPT}\\u202e"}
    assert panel.detached == f"gone {SCRIPT}\\u202e"
    assert tree.view.nodes[1]["name"] == f"fork {SCRIPT}\\u202e"  # drawn with textContent
    assert "x" * 5_000 in html  # cut on one line only, never lost


async def test_hostile_text_in_the_text_html_fallback_is_escaped(model: ScriptedModel) -> None:
    panel, tree = await hostile_views(model)
    for bundle in (panel._repr_mimebundle_(), tree._repr_mimebundle_()):
        html = bundle["text/html"]
        assert_safe_html(html)
        assert RLO not in html and ZWSP not in html
        assert RLO not in bundle["text/plain"]
    assert "&lt;script&gt;" in panel._repr_mimebundle_()["text/html"]


async def test_the_edit_box_json_holds_no_raw_bidi_or_zero_width(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    model.push(tool_calls(call("add", {"a": 1, "b": 2, "note": f"x{RLO}y{ZWSP}"})))
    await agent.user_message("add")
    panel = AgentPanel(agent)
    edit = panel.cards[0]["full"]
    assert json.loads(edit)["note"] == f"x{RLO}y{ZWSP}"  # the same arguments when sent back
    assert RLO not in edit and ZWSP not in edit


@pytest.mark.parametrize(("hidden", "flagged"), [(RLO, True), (ZWSP, True), ("", False)])
async def test_the_card_flags_arguments_that_hide_characters(
        model: ScriptedModel, hidden: str, flagged: bool) -> None:
    agent = make_agent(model, lookup_tool())
    model.push(tool_calls(call("lookup", {"file": f"report{hidden}gnp.exe"})))
    await agent.user_message("look")
    panel = AgentPanel(agent)
    assert panel.cards[0]["flag"] is flagged
    assert (f"report{hidden}gnp.exe" in panel.cards[0]["full"]) is not flagged


async def test_no_api_key_in_any_widget_state_or_message(
        model: ScriptedModel, wire: Wire) -> None:
    panel, tree = await hostile_views(model)
    everything = json.dumps([
        panel.get_state(), tree.view.get_state(), panel._repr_mimebundle_(),
        tree._repr_mimebundle_(), [s.data for s in wire.log]], default=str)
    assert len(wire.log) > 10 and API_KEY not in everything


async def test_the_text_html_fallback_holds_the_conversation_and_the_error(
        model: ScriptedModel) -> None:
    agent = make_agent(model)
    panel = AgentPanel(agent)
    model.push(reply(f"answer {SCRIPT}"))
    await agent.user_message("question")
    panel.show_error(RuntimeError("it <broke>"))
    bundle = panel._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == panel.model_id
    # what it is and how to see it live: what an untrusted notebook shows in its place
    assert bundle["text/plain"] == (
        "fragola_nb panel of 'tester', 2 messages: run the cell, or trust the notebook")
    html = bundle["text/html"]
    assert_inert(html)
    assert "question" in html and "answer &lt;script&gt;" in html
    assert "fragola-status-idle" in html
    assert '<div class="fragola-error">RuntimeError: it &lt;broke&gt;</div>' in html


@pytest.mark.parametrize("reason", ["approval", "dynamic"])
async def test_panel_of_a_paused_agent_shows_its_cards_at_once(
    model: ScriptedModel, reason: str
) -> None:
    handler: Any = "dynamic" if reason == "dynamic" else (lambda p: 0)
    kind = tool(name="t", description="", schema=AddArgs, handler=handler,
                require_approval=reason == "approval")
    agent = make_agent(model, kind)
    model.push(tool_calls(call("t", {"a": 1, "b": 2})))
    await agent.user_message("go")
    panel = AgentPanel(agent)  # made while waiting: e.g. %fragola_panel after the cell ended
    assert [(c["raw_id"], c["dynamic"]) for c in panel.cards] == [
        ("call_1", reason == "dynamic")]
    assert panel.strip == {"kind": "waiting", "text": "1 call needs your decision"}
    panel.do("stop")  # stopping a waiting agent cancels its pending calls
    assert agent.status == "idle" and panel.cards == []
    assert [c["state"] for c in calls(panel)] == ["cancelled"]


async def test_panel_listeners_are_not_copied_to_forks_nor_saved(
        model: ScriptedModel, tmp_path: Any) -> None:
    from fragola_nb import load_session, save_session

    model.push(reply("hello"))
    agent = make_fragola(model).agent("viewed")
    panel = AgentPanel(agent)
    await agent.user_message("hi")
    fork = agent.fork("branch")
    assert not any(fork.deps.listeners.has(name) for name in (
        "after_state_update", "status_change", "model_chunk", "before_tool_call",
        "after_tool_call", "after_step", "before_step", "after_model_invocation"))
    path = save_session(tmp_path / "s.json", agent)
    session = load_session(path, Fragola(api_key="test-key", base_url=model.base_url))
    assert [a.name for a in session.agents] == ["viewed", "branch"]
    panel.detach()


# -- a long history shown at once ---------------------------------------------------------------


def test_a_long_history_renders_its_markdown_when_a_view_draws_it(
        model: ScriptedModel, wire: Wire) -> None:
    """A panel of 20,000 messages renders the Markdown of its last ones only; the view asks
    for the rows it draws. Nothing is sent before a view says hello, and the hello's rows
    come in several messages (one huge message holds the browser's main thread)."""
    from fragola_nb.notebook.panel.view import EAGER, HELLO_CHUNK

    count = 5_000
    messages = [{"role": "user" if i % 2 == 0 else "assistant",
                 "content": f"message **{i}**"} for i in range(count)]
    agent = make_agent(model, messages=messages)
    panel = AgentPanel(agent)
    assert wire.custom() == []  # no view yet: nothing to send
    rows = panel.rows
    waiting = [r["k"] for r in rows if r.get("md")]
    assert waiting and waiting[-1] < count - EAGER  # the last ones are rendered
    assert rows[-1]["html"] == "<p>message <strong>4999</strong></p>\n"
    assert rows[1]["text"] == "message **1**" and rows[1]["html"] == ""

    from_browser(panel, {"do": "hello"})
    hello = wire.custom("rows")
    assert len(hello) == -(-count // HELLO_CHUNK) and hello[0]["reset"]
    assert hello[0]["total"] == count and "stream" in hello[0]
    assert not any("reset" in m or "stream" in m for m in hello[1:])
    # the newest rows first, so the view shows the end of the conversation at once
    assert hello[0]["rows"][-1]["k"] == count - 1
    assert sorted(r["k"] for m in hello for r in m["rows"]) == list(range(count))

    wire.clear()
    from_browser(panel, {"do": "render", "ks": [1, 3, 2, "x", 99_999]})
    (sent,) = wire.custom("rows")
    assert [(r["k"], r["html"]) for r in sent["rows"]] == [
        (1, "<p>message <strong>1</strong></p>\n"), (3, "<p>message <strong>3</strong></p>\n")]
    assert "md" not in panel.rows[1] and "text" not in panel.rows[1]
    wire.clear()
    from_browser(panel, {"do": "render", "ks": [1, 3]})  # asked twice: nothing more to do
    assert wire.custom() == []


def test_the_static_copy_of_a_long_history_holds_its_last_messages(
        model: ScriptedModel) -> None:
    from fragola_nb.notebook.panel.view import STATIC_LIMIT

    agent = make_agent(model, messages=history(STATIC_LIMIT + 40))
    page = AgentPanel(agent).html()
    assert f"message {STATIC_LIMIT + 39}<" in page and "message 39<" not in page
    assert "message 40<" in page and "40 earlier messages are not in this static copy" in page


async def test_an_error_that_echoes_the_key_shows_it_redacted(model: ScriptedModel) -> None:
    """A server that repeats the key it was sent in its error message: the panel's notice,
    strip and static copy show the error without the key."""
    agent = make_agent(model)
    panel = AgentPanel(agent)
    model.push(fail(401, f"Incorrect API key provided: {API_KEY}"))
    panel.do("send", text="hi")
    await until(lambda: panel.notice.get("kind") == "error")
    shown = json.dumps([panel.notice, panel.strip, panel.html()])
    assert "Incorrect API key provided: [redacted]" in panel.notice["text"]
    assert API_KEY not in shown and "DO-NOT-SHOW" not in shown


async def test_a_card_error_stays_through_a_refresh_whatever_the_call_id(
        model: ScriptedModel) -> None:
    """A refused decision's message stays on its card while other events refresh the panel,
    also for a call id holding a character the panel writes out (cards key on the raw id)."""
    agent = make_agent(model, add_tool())
    model.push(tool_calls(call("add", {"a": 1, "b": 2}, id=f"call{RLO}1")))
    await agent.user_message("add")
    panel = AgentPanel(agent)
    panel.do("reject", id=f"call{RLO}1", reason="  ")
    assert panel.cards[0]["error"] == "write a reason first: the model reads it"
    panel.sync_now()  # what any later event does
    assert panel.cards[0]["error"] == "write a reason first: the model reads it"
    assert panel.cards[0]["id"] == "call\\u202e1" and panel.cards[0]["raw_id"] == f"call{RLO}1"
