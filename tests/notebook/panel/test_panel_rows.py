"""The panel's rows: one row per message, each tool result folded into the call it answers,
with a state saying how the call ended (asked, ran, error, rejected, edited, injected,
cancelled); and the Markdown fast path the rows use.

The outcomes are brought about the way a notebook does (the scripted model, the panel's
controls) and compared as whole data.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from support.helpers import AddArgs, add_tool
from support.helpers import panel_calls as calls
from support.helpers import until_async as until

from fragola_nb import Fragola, Tool, tool
from fragola_nb.base.render import _markdown, markdown_html, visible
from fragola_nb.core.agent import Agent
from fragola_nb.core.run.loop import CANCELLED, INTERRUPTED
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls
from fragola_nb.notebook.panel.message_rows import Rows
from fragola_nb.notebook.panel.view import AgentPanel


def make_agent(model: ScriptedModel, *tools: Tool) -> Agent:
    fragola = Fragola(api_key="test-key", base_url=model.base_url, max_retries=0)
    return fragola.agent(name="rows", tools=list(tools))




def shown_call(call_id: str, name: str, args: str, full: str, state: str, result: str,
               note: str = "") -> dict[str, Any]:
    return {"id": call_id, "name": name, "args": args, "full": full, "flag": False,
            "state": state, "note": note, "result": result}


ADD_1_2 = ("a=1, b=2", '{\n  "a": 1,\n  "b": 2\n}')


# -- building rows --------------------------------------------------------------------------------


def test_a_result_patches_the_row_of_its_call() -> None:
    rows = Rows(start=0)
    asked = {"role": "assistant", "content": "Let me *add*.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}]}
    added, patched = rows.add([{"role": "user", "content": "add <it>"}, asked])
    assert (len(added), patched) == (2, [])
    added, patched = rows.add([{"role": "tool", "tool_call_id": "c1", "content": "1"},
                               {"role": "assistant", "content": "It is 1."}])
    assert [r["k"] for r in added] == [2] and patched == [1]  # the result made no row
    assert rows.rows == [
        {"k": 0, "i": 0, "role": "user", "html": '<div class="fragola-text">add &lt;it&gt;</div>',
         "calls": []},
        {"k": 1, "i": 1, "role": "assistant", "html": "<p>Let me <em>add</em>.</p>\n",
         "calls": [{"id": "c1", "name": "add", "args": "a=1", "full": '{\n  "a": 1\n}',
                    "flag": False, "state": "ran", "note": "", "result": "1", "ms": None,
                    "ri": 2}]},
        {"k": 2, "i": 3, "role": "assistant", "html": "<p>It is 1.</p>\n", "calls": []},
    ]
    assert rows.count == 4


def test_a_result_answering_a_call_before_since_gets_its_own_row() -> None:
    rows = Rows(start=2)
    added, patched = rows.add([
        {"role": "tool", "tool_call_id": "c1", "content": "2"},
        {"role": "tool", "tool_call_id": "c2", "content": CANCELLED},
        {"role": "assistant", "content": "two"},
    ])
    assert patched == [] and added == rows.rows
    assert rows.rows == [
        {"k": 0, "i": 2, "role": "tool", "html": "", "calls": [
            {"id": "c1", "name": "tool", "args": "", "full": "", "flag": False, "state": "ran",
             "note": "", "result": "2", "ms": None, "ri": 2}]},
        {"k": 1, "i": 3, "role": "tool", "html": "", "calls": [
            {"id": "c2", "name": "tool", "args": "", "full": "", "flag": False,
             "state": "cancelled", "note": "", "result": CANCELLED, "ms": None,
             "ri": 3}]},
        {"k": 2, "i": 4, "role": "assistant", "html": "<p>two</p>\n", "calls": []},
    ]


def test_a_call_is_flagged_whatever_the_json_escaping_of_its_arguments() -> None:
    rows = Rows(start=0)
    for n, arguments in enumerate(['{"f": "a\u202eb"}', '{"f": "a\\u202eb"}']):
        rows.add([{"role": "assistant", "tool_calls": [
            {"id": f"c{n}", "type": "function",
             "function": {"name": "read", "arguments": arguments}}]}])
    assert [row["calls"][0]["full"] for row in rows.rows] == ['{\n  "f": "a\\u202eb"\n}'] * 2
    assert [row["calls"][0]["flag"] for row in rows.rows] == [True, True]


# -- each outcome, as a notebook brings it about --------------------------------------------------


async def test_a_call_that_ran_and_calls_that_failed(model: ScriptedModel) -> None:
    def broken(params: AddArgs) -> int:
        raise RuntimeError("disk <full>")

    failing = tool(name="broken", description="Fails.", schema=AddArgs, handler=broken)
    agent = make_agent(model, add_tool(require_approval=False), failing)
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 2}), call("nope", {}),
                          call("add", {"a": "one", "b": 2}), call("broken", {"a": 1, "b": 2})),
               reply("done"))
    await agent.user_message("go")
    results = [m["content"] for m in agent.state.messages[2:6]]
    assert calls(panel) == [
        shown_call("call_1", "add", *ADD_1_2, "ran", "3"),
        shown_call("call_2", "nope", "", "{}", "error", results[1]),
        shown_call("call_3", "add", 'a="one", b=2', '{\n  "a": "one",\n  "b": 2\n}', "error",
                   results[2]),
        shown_call("call_4", "broken", *ADD_1_2, "error", results[3]),
    ]
    assert all(text.startswith("Error") for text in results[1:])


async def test_a_rejected_call_notes_the_reason(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool(require_approval=True))
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("ok"))
    await agent.user_message("go")
    assert calls(panel) == [shown_call("call_1", "add", *ADD_1_2, "asked", "")]
    panel.do("reject", id="call_1", reason="not <now>")
    await until(lambda: agent.status == "idle")
    assert calls(panel) == [shown_call(
        "call_1", "add", *ADD_1_2, "rejected",
        "The user rejected this call to add. Reason: not <now>", note="not <now>")]


async def test_an_edited_call_notes_the_edit(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool(require_approval=True))
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("ok"))
    await agent.user_message("go")
    panel.do("edit", id="call_1", args='{"a": 20, "b": 22}')
    await until(lambda: agent.status == "idle")
    result = agent.state.messages[2]["content"]
    assert result == '(The user edited the arguments before this call ran: {"a": 20, "b": 22})\n42'
    assert calls(panel) == [shown_call("call_1", "add", *ADD_1_2, "edited", result,
                                       note='{"a": 20, "b": 22}')]


async def test_a_result_edited_afterwards_is_edited_and_the_parent_still_ran(
    model: ScriptedModel,
) -> None:
    agent = make_agent(model, add_tool(require_approval=False))
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("3"))
    await agent.user_message("go")
    fork = agent.fork("what-if", at=3)  # before the answer: the model will read the edit
    fork.edit(2, result="41")  # what "edit and run from here" on the result does
    # the result is 41 as typed; that it was typed is the call's state, not in its text
    assert calls(AgentPanel(fork)) == [shown_call(
        "call_1", "add", *ADD_1_2, "amended", "41", note="")]
    assert calls(AgentPanel(agent)) == [shown_call("call_1", "add", *ADD_1_2, "ran", "3")]


async def test_an_edited_text_is_marked_and_every_row_has_its_message_number(
    model: ScriptedModel,
) -> None:
    agent = make_agent(model, add_tool(require_approval=False))
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("3"))
    await agent.user_message("go")
    fork = agent.fork("what-if")
    fork.edit(0, content="30.")
    rows = AgentPanel(fork).rows
    # i: the message's index (state.messages[i]); ri: its call's result's; edited by hand
    assert [(row["i"], row["role"], row.get("edited", False),
             [call["ri"] for call in row["calls"]]) for row in rows] == [
        (0, "user", True, []), (1, "assistant", False, [2]), (3, "assistant", False, [])]
    assert rows[0]["html"] == '<div class="fragola-text">30.</div>'
    assert "edited" not in AgentPanel(agent).rows[0]


async def test_a_result_typed_by_hand_is_injected(model: ScriptedModel) -> None:
    lookup = tool(name="lookup", description="Ask a person.", handler="dynamic")
    agent = make_agent(model, lookup, add_tool(require_approval=True))
    panel = AgentPanel(agent)
    model.push(tool_calls(call("lookup", {"q": "x"}), call("add", {"a": 1, "b": 2})),
               reply("thanks"))
    await agent.user_message("go")
    panel.do("inject", id="call_1", text="seven")
    panel.do("inject", id="call_2", text="3, I promise")  # a tool with a handler, by hand
    await until(lambda: agent.status == "idle")
    assert calls(panel) == [
        shown_call("call_1", "lookup", 'q="x"', '{\n  "q": "x"\n}', "injected", "seven"),
        shown_call("call_2", "add", *ADD_1_2, "injected", "3, I promise"),
    ]


async def test_calls_stopped_while_waiting_are_cancelled(model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool(require_approval=True))
    panel = AgentPanel(agent)
    model.push(tool_calls(call("add", {"a": 1, "b": 2}), call("add", {"a": 3, "b": 4})))
    await agent.user_message("go")
    panel.do("approve", id="call_1")  # one decided, one not: Stop cancels both
    panel.do("stop")
    assert agent.status == "idle"
    assert calls(panel) == [
        shown_call("call_1", "add", *ADD_1_2, "cancelled", CANCELLED),
        shown_call("call_2", "add", "a=3, b=4", '{\n  "a": 3,\n  "b": 4\n}', "cancelled",
                   CANCELLED),
    ]


async def test_a_call_stopped_while_it_ran_says_so(model: ScriptedModel) -> None:
    started = asyncio.Event()

    async def forever(params: AddArgs) -> int:
        started.set()
        await asyncio.Event().wait()
        return 0

    slow = tool(name="slow", description="Never ends.", schema=AddArgs, handler=forever)
    agent = make_agent(model, slow)
    panel = AgentPanel(agent)
    model.push(tool_calls(call("slow", {"a": 1, "b": 2})))
    run = asyncio.ensure_future(agent.user_message("go"))
    await asyncio.wait_for(started.wait(), 10)
    assert panel.strip["kind"] == "tool" and panel.strip["text"] == "running slow"
    panel.do("stop")
    await asyncio.wait_for(run, 10)
    assert calls(panel) == [shown_call("call_1", "slow", *ADD_1_2, "cancelled", INTERRUPTED,
                                       note="stopped while it ran")]


# -- the Markdown fast path -----------------------------------------------------------------------


def slow_path(text: str) -> str:
    return str(_markdown().render(visible(text)))


@given(st.text(alphabet=st.characters(blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85"
                                      "\u2028\u2029")))
def test_the_markdown_fast_path_never_changes_one_line(text: str) -> None:
    assert markdown_html(text) == slow_path(text)


@given(st.text())
@example("two spaces  \nmake a line break")
@example("a line\n    indented")
def test_the_markdown_fast_path_never_changes_the_output(text: str) -> None:
    assert markdown_html(text) == slow_path(text)
