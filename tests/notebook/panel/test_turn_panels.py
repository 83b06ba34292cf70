"""Issue 27 (a teacher after Run All), in-process, against the scripted model behind the
official openai client: a turn panel keeps its own turn whatever runs later on the agent; a
decided approval card stays, saying who decided; repeated fork names get a suffix while a
compare's columns keep the variant's name; a failed call is said once in the panel.

The browser and kernel sides (Run All of the lesson notebooks) are in
``tests/browser/test_browser_guide_turns.py``.
"""

from __future__ import annotations

from typing import Any

from support.helpers import add_tool
from support.helpers import until_async as until

from fragola_nb import Fragola, Tool, tool
from fragola_nb.core.agent import Agent
from fragola_nb.models.scripted import ScriptedModel, call, fail, reply, tool_calls
from fragola_nb.notebook.panel.view import AgentPanel

API_KEY = "sk-test-issue27-DO-NOT-SHOW"


def make_agent(model: ScriptedModel, *tools: Tool, **options: Any) -> Agent:
    fragola = Fragola(api_key=API_KEY, base_url=model.base_url, max_retries=0)
    return fragola.agent(name="converter", tools=list(tools), **options)


def contents(panel: AgentPanel) -> str:
    return "\n".join(row["html"] for row in panel.rows)


# -- 1. a turn panel shows its own turn, for good ---------------------------------------------


async def test_a_later_turn_run_in_code_does_not_land_in_an_earlier_turn_panel(
        model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool(require_approval=False))
    panel = AgentPanel(agent, since=0)  # what a %%fragola cell shows, before its run
    model.push(tool_calls(call("add", {"a": 30, "b": 0})))
    await agent.user_message("What is 30 degrees?", by=1)  # the cell's turn: step budget
    ended = dict(panel.head), dict(panel.strip), panel.rows
    assert ended[0]["steps"] == 1 and ended[1]["kind"] == "step_limit"

    model.push(reply("86 F"), reply("6.21 miles"))
    await agent.step(by=1)  # the next cell goes on in code: a later run, not this panel's
    await agent.user_message("And how many miles is 10 km?")
    assert agent.step_count == 1 and agent.state.outcome == "finished"

    assert panel.rows == ended[2]
    assert "10 km" not in contents(panel) and "86 F" not in contents(panel)
    assert panel.head == ended[0] and panel.strip["kind"] == "step_limit"
    assert panel.strip["text"] == "step budget used"  # its Step is off: not "Step goes on"
    assert panel.detached.startswith("its turn ended; a later run of converter")
    static = panel._repr_mimebundle_()["text/html"]  # nbconvert's copy, as the turn ended
    assert "steps 1/" in static and "10 km" not in static and "step budget used" in static
    whole = AgentPanel(agent)  # %fragola_panel follows the agent
    assert "10 km" in contents(whole)


async def test_a_waiting_turn_panel_follows_its_turn_through_approvals_in_code(
        model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool())
    panel = AgentPanel(agent, since=0)
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("three"))
    await agent.user_message("add")
    agent.approve("call_1")  # the "decide in code" cell
    await agent.step()  # resumes the paused turn: still this panel's
    assert not panel.detached and "three" in contents(panel)
    assert panel.head["status"] == "idle" and panel.strip["kind"] == "finished"


async def test_runs_started_by_the_panels_own_controls_stay_in_it(model: ScriptedModel) -> None:
    agent = make_agent(model)
    panel = AgentPanel(agent, since=0)
    model.push(reply("one"), reply("two"))
    await agent.user_message("first")
    panel.do("send", text="second, typed in the panel")
    await until(lambda: agent.message_count == 4 and agent.status == "idle")
    assert not panel.detached and "two" in contents(panel)
    other = AgentPanel(agent, since=agent.message_count)  # another turn panel of the agent
    model.push(reply("three"))
    other.do("send", text="third, typed in the other panel")
    await until(lambda: agent.message_count == 6 and agent.status == "idle")
    assert "three" in contents(other) and not other.detached
    assert "three" not in contents(panel) and panel.detached


# -- 4. a decided card stays, saying who decided ----------------------------------------------


async def test_decided_cards_stay_in_the_turn_panel_with_who_decided(
        model: ScriptedModel) -> None:
    agent = make_agent(model, add_tool(), tool(name="lookup", description="Ask a person.",
                                               handler="dynamic"))
    panel = AgentPanel(agent, since=0)
    model.push(tool_calls(call("add", {"a": 1, "b": 1}, id="c_code"),
                          call("add", {"a": 2, "b": 2}, id="c_click"),
                          call("add", {"a": 3, "b": 3}, id="c_no"),
                          call("lookup", {}, id="c_hand")),
               reply("done"))
    await agent.user_message("four calls")
    assert panel.decisions == []
    agent.approve("c_code")
    panel.do("approve", id="c_click")
    agent.reject("c_no", "not <now>")
    panel.do("inject", id="c_hand", text="by hand")
    await until(lambda: agent.status == "idle")
    assert panel.cards == []
    assert [(d["id"], d["kind"], d["text"]) for d in panel.decisions] == [
        ("c_code", "approve", "approved in code"),
        ("c_click", "approve", "approved by a click"),
        ("c_no", "reject", "rejected in code: not <now>"),  # text: the view draws textContent
        ("c_hand", "inject", "answered by hand"),
    ]
    assert panel.decisions[0]["name"] == "add" and panel.decisions[0]["args"] == "a=1, b=1"


# -- 5. forks named alike -----------------------------------------------------------------------


async def test_a_repeated_fork_name_gets_a_suffix_and_compare_keeps_variant_names(
        model: ScriptedModel) -> None:
    agent = make_agent(model)
    assert [agent.fork("plain").name, agent.fork("plain").name, agent.fork("plain").name] == [
        "plain", "plain-2", "plain-3"]
    assert agent.fork("plain-2").name == "plain-2-2"
    tutor = make_agent(model)
    variants = {"terse": {"instructions": "be brief"}, "kind": {"instructions": "be kind"}}
    model.push(reply("a"), reply("b"), reply("c"), reply("d"))
    first = await tutor.compare("hi", variants)
    second = await tutor.compare("hi", variants)
    assert [fork.name for fork in tutor.forks] == ["terse", "kind", "terse-2", "kind-2"]
    assert list(second) == ["terse", "kind"]  # the variant's name, as the user wrote it
    assert second["terse"].name == "terse-2" and first["terse"].name == "terse"
    assert [row["variant"] for row in second.table()] == ["terse", "kind"]


# -- 6. a failed call is said once in the panel -------------------------------------------------


async def test_a_401_is_said_once_in_the_panel(model: ScriptedModel) -> None:
    agent = make_agent(model)
    panel = AgentPanel(agent, since=0)
    model.push(fail(401, "Incorrect API key provided", type="invalid_request_error",
                    code="invalid_api_key"))
    try:
        await agent.user_message("hi")
    except Exception as exc:  # what the %%fragola cell raises again, as its error
        panel.show_error(exc)
    else:
        raise AssertionError("a 401 must fail the call")
    assert panel.strip == {"kind": "error", "text": "failed"}
    assert panel.notice["kind"] == "error"
    assert panel.notice["text"].count("Incorrect API key provided") == 1
    assert API_KEY not in panel.notice["text"]
