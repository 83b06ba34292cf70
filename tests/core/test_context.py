"""AgentContext: stores, tools, options, state, stop and instructions, seen from inside a run."""

from __future__ import annotations

from typing import Any

import pytest
from support.helpers import answered, asked, make_agent, make_fragola

from fragola_nb import (
    AgentContext,
    AgentState,
    InvalidToolDefinition,
    Tool,
    create_store,
    tool,
)
from fragola_nb.core.stores import Store
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls


def noop(name: str) -> Tool:
    return tool(name=name, description=f"The {name} tool.", handler=lambda: f"{name} ran")


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


# -- stores -------------------------------------------------------------------------------


async def test_get_store_prefers_the_agent_store_then_the_fragola_store(
    model: ScriptedModel,
) -> None:
    own = create_store({"where": "agent"}, "settings")
    shadowed = create_store({"where": "fragola"}, "settings")
    shared = create_store(0, "counter")
    late = create_store("late", "added-later")
    fragola = make_fragola(model, stores=[shadowed, shared])
    seen: dict[str, Store[Any] | None] = {}

    def look(params: Any, context: AgentContext) -> str:
        for name in ("settings", "counter", "added-later", "missing"):
            seen[name] = context.get_store(name)
        context.get_store("counter").update(lambda n: n + 1)  # type: ignore[union-attr]
        return "looked"

    agent = fragola.agent(name="tester", stores=[own],
                          tools=[tool(name="look", description="", handler=look)])
    fragola.add_store(late)
    model.push(tool_calls(call("look", {}, id="c1")), reply("ok"))

    await agent.user_message("look")

    assert seen == {"settings": own, "counter": shared, "added-later": late, "missing": None}
    assert shared.get() == 1
    assert agent.context.get_store("settings") is own


# -- tools --------------------------------------------------------------------------------


async def test_options_tools_lists_the_agent_tools(model: ScriptedModel) -> None:
    seen: list[list[str]] = []

    def inspect_tools(params: Any, context: AgentContext) -> str:
        seen.append([t.name for t in context.options.tools])
        return "ok"

    inspector = tool(name="inspect", description="", handler=inspect_tools)
    other = noop("other")
    model.push(tool_calls(call("inspect", {}, id="c1")), reply("done"))

    await make_agent(model, inspector, other).user_message("go")

    assert seen == [["inspect", "other"]]


async def test_update_tools_replaces_the_whole_list_for_the_next_request(
    model: ScriptedModel,
) -> None:
    first, second, third = noop("first"), noop("second"), noop("third")

    def swap(params: Any, context: AgentContext) -> str:
        context.update_tools([second, third])
        return "swapped"

    swapper = tool(name="swap", description="", handler=swap)
    model.push(tool_calls(call("swap", {}, id="c1")), reply("done"))
    agent = make_agent(model, swapper, first)

    await agent.user_message("go")

    assert model.requests[0]["tools"] == [swapper.definition, first.definition]
    assert model.requests[1]["tools"] == [second.definition, third.definition]
    assert agent.options.tools == [second, third]


async def test_tool_removes_itself_after_one_use(model: ScriptedModel) -> None:
    runs: list[str] = []

    def initialize_setup(params: Any, context: AgentContext) -> str:
        runs.append("setup")
        remaining = [t for t in context.options.tools if t.name != "initializeSetup"]
        context.update_tools(remaining)
        return "Setup complete."

    one_time = tool(name="initializeSetup", description="Runs once.", handler=initialize_setup)
    keeper = noop("keeper")
    model.push(
        tool_calls(call("initializeSetup", {}, id="c1")),
        tool_calls(call("initializeSetup", {}, id="c2")),
        reply("done"),
    )
    agent = make_agent(model, one_time, keeper)

    state = await agent.user_message("set up")

    assert runs == ["setup"]
    assert tool_names(model.requests[0]) == ["initializeSetup", "keeper"]
    assert tool_names(model.requests[1]) == ["keeper"]
    assert tool_names(model.requests[2]) == ["keeper"]
    # The model called it again anyway: it is now an unknown tool, and the run goes on.
    assert state.messages[2] == answered("c1", "Setup complete.")
    assert state.messages[4]["tool_call_id"] == "c2"
    assert "no tool named 'initializeSetup'" in state.messages[4]["content"]
    assert state.outcome == "finished"


async def test_removing_the_last_tool_sends_no_tools(model: ScriptedModel) -> None:
    def once(params: Any, context: AgentContext) -> str:
        context.update_tools([])
        return "gone"

    model.push(tool_calls(call("once", {}, id="c1")), reply("done"))

    await make_agent(model, tool(name="once", description="", handler=once)).user_message("go")

    assert tool_names(model.requests[0]) == ["once"]
    assert "tools" not in model.requests[1]


async def test_update_tools_in_before_model_invocation_applies_to_that_request(
    model: ScriptedModel,
) -> None:
    auth = create_store({"is_logged_in": False}, "auth")

    def login(params: Any, context: AgentContext) -> str:
        context.get_store("auth").set({"is_logged_in": True})  # type: ignore[union-attr]
        return "logged in"

    login_tool = tool(name="login", description="Log in.", handler=login)
    search, logout = noop("search"), noop("logout")
    agent = make_fragola(model).agent(name="tester", stores=[auth],
                                      tools=[login_tool, search, logout])
    configs: list[dict[str, Any]] = []

    @agent.on_before_model_invocation
    def choose_tools(event: Any) -> Any:
        configs.append(dict(event.config))
        if event.context.get_store("auth").get()["is_logged_in"]:
            event.context.update_tools([search, logout])
        else:
            event.context.update_tools([login_tool])
        return event.config

    model.push(tool_calls(call("login", {}, id="c1")), reply("welcome"))

    await agent.user_message("hi")

    assert model.requests[0]["tools"] == [login_tool.definition]
    assert model.requests[1]["tools"] == [search.definition, logout.definition]
    assert configs == [{"model": "gpt-4o-mini"}, {"model": "gpt-4o-mini"}]


# -- state --------------------------------------------------------------------------------


async def test_state_seen_from_a_handler(model: ScriptedModel) -> None:
    seen: list[AgentState] = []

    def peek(params: Any, context: AgentContext) -> str:
        seen.append(context.state)
        return "peeked"

    model.push(tool_calls(call("peek", {"a": 1}, id="c1")), reply("done"))
    agent = make_agent(model, tool(name="peek", description="", schema={"type": "object"},
                                   handler=peek))

    await agent.user_message("look")

    (state,) = seen
    assert state.status == "generating"
    assert state.step_count == 1
    assert state.pending == ()
    assert state.messages == [{"role": "user", "content": "look"},
                              asked(("c1", "peek", {"a": 1}))]


# -- stop ---------------------------------------------------------------------------------


async def test_stop_from_a_handler_saves_its_result_and_returns(model: ScriptedModel) -> None:
    later: list[str] = []

    def halt(params: Any, context: AgentContext) -> str:
        context.stop()
        return "saved before stopping"

    stopper = tool(name="halt", description="", handler=halt)
    other = tool(name="later", description="", handler=lambda: later.append("ran") or "ran")
    model.push(tool_calls(call("halt", {}, id="c1"), call("later", {}, id="c2")))
    agent = make_agent(model, stopper, other)

    state = await agent.user_message("go")

    assert later == []
    assert len(model.requests) == 1
    assert state.status == "idle"
    assert agent.status == "idle"
    assert state.outcome == "stopped"
    assert state.messages[2] == answered("c1", "saved before stopping")
    assert state.messages[3]["tool_call_id"] == "c2"
    assert "ancelled" in state.messages[3]["content"]

    model.push(reply("again"))
    after = await agent.user_message("continue")

    assert after.outcome == "finished"
    assert model.requests[1]["messages"] == [*state.messages,
                                             {"role": "user", "content": "continue"}]


async def test_stop_from_a_listener_ends_the_turn_after_the_model_call(
    model: ScriptedModel,
) -> None:
    model.push(reply("first"), reply("unused"))
    agent = make_agent(model)
    agent.on_ai_message(lambda event: event.context.stop())

    state = await agent.user_message("hi")

    assert state.outcome == "stopped"
    assert state.status == "idle"
    assert state.messages == [{"role": "user", "content": "hi"},
                              {"role": "assistant", "content": "first"}]
    assert len(model.requests) == 1


async def test_stop_in_a_handler_wins_over_a_pause_in_the_same_message(
    model: ScriptedModel,
) -> None:
    guarded_runs: list[str] = []
    guarded = tool(name="guarded", description="", require_approval=True,
                   handler=lambda: guarded_runs.append("ran") or "ran")

    def halt(params: Any, context: AgentContext) -> str:
        context.stop()
        return "stopped here"

    model.push(tool_calls(call("guarded", {}, id="c1"), call("halt", {}, id="c2")))
    agent = make_agent(model, guarded, tool(name="halt", description="", handler=halt))

    state = await agent.user_message("go")

    assert guarded_runs == []
    assert state.status == "idle"
    assert state.outcome == "stopped"
    assert state.pending == ()
    assert state.messages[2] == answered("c2", "stopped here")
    assert state.messages[3]["tool_call_id"] == "c1"
    assert "ancelled" in state.messages[3]["content"]

    model.push(reply("fine"))
    assert (await agent.user_message("next")).outcome == "finished"


# -- instructions -------------------------------------------------------------------------


async def test_set_instructions_changes_the_next_system_message(model: ScriptedModel) -> None:
    def rewrite(params: Any, context: AgentContext) -> str:
        context.set_instructions(["Be terse.", "Answer in French."])
        return "rewritten"

    model.push(tool_calls(call("rewrite", {}, id="c1")), reply("Oui."), reply("Bonjour"))
    agent = make_agent(model, tool(name="rewrite", description="", handler=rewrite),
                       instructions="Be helpful.")

    await agent.user_message("hi")
    agent.context.set_instructions(None)
    await agent.user_message("again")

    first, second, third = (r["messages"] for r in model.requests)
    assert first == [{"role": "system", "content": "Be helpful."},
                     {"role": "user", "content": "hi"}]
    assert second[0] == {"role": "system", "content": "Be terse.\nAnswer in French."}
    assert second[1:] == [*first[1:], asked(("c1", "rewrite", {})),
                          answered("c1", "rewritten")]
    assert third[0] == {"role": "user", "content": "hi"}
    assert all(m["role"] != "system" for m in agent.state.messages)


async def test_set_instructions_keeps_the_developer_role(model: ScriptedModel) -> None:
    model.push(reply("ok"))
    agent = make_agent(model, use_developer_role=True)
    agent.context.set_instructions("Use the developer role.")

    await agent.user_message("hi")

    assert model.requests[0]["messages"][0] == {"role": "developer",
                                                "content": "Use the developer role."}


def test_context_is_bound_to_its_agent(model: ScriptedModel) -> None:
    agent = make_agent(model, noop("a"))
    fork = agent.fork()

    fork.context.update_tools([])

    assert fork.context.agent is fork
    assert [t.name for t in agent.context.options.tools] == ["a"]
    assert fork.options.tools == []


@pytest.mark.parametrize("bad", [["not a tool"], [None]])
def test_update_tools_refuses_what_is_not_a_tool(model: ScriptedModel, bad: list[Any]) -> None:
    agent = make_agent(model, noop("a"))

    with pytest.raises(InvalidToolDefinition):
        agent.context.update_tools(bad)

    assert [t.name for t in agent.options.tools] == ["a"]
