"""Issue 25: hooks, scoped instructions, stores and options at run time, tool call payloads,
as Fragola 0.1.1 (the upstream head) has them: ``agent.use``/``removeHook``/``dispose``,
``setInstructions(text, scope)``/``instructions("*")``, ``setOptions``/``addStore``, and
``ToolCallPayload`` on ``tool_call`` events and in ``injectConfig``."""

from __future__ import annotations

import asyncio
from typing import Any

import pydantic
import pytest
from support.helpers import answered, broken, make_agent, make_fragola, weather

from fragola_nb import BadUsage, ToolCallPayload, create_store, tool
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls


class City(pydantic.BaseModel):
    city: str


remote = tool(name="remote", description="Answered by hand.", schema=City, handler="dynamic")


def system_of(request: dict[str, Any]) -> Any:
    first = request["messages"][0]
    return first["content"] if first["role"] in ("system", "developer") else None


def uppercase(agent: Any) -> None:
    """A hook: every reply in capitals."""
    agent.on_ai_message(lambda event: {**event.message,
                                       "content": event.message["content"].upper()})


# -- hooks ------------------------------------------------------------------------------------


async def test_a_hook_registers_listeners_that_remove_hook_takes_off_and_nothing_else(
        model: ScriptedModel) -> None:
    agent = make_agent(model)
    heard: list[str] = []
    agent.on_ai_message(lambda event: heard.append(event.message["content"]))
    assert agent.use(uppercase, name="upper") is agent
    assert agent.has_hook("upper")

    model.push(reply("hello"), reply("again"))
    assert (await agent.user_message("hi")).messages[-1]["content"] == "HELLO"

    assert agent.remove_hook("upper") is True
    assert not agent.has_hook("upper")
    assert (await agent.user_message("hi")).messages[-1]["content"] == "again"
    assert heard == ["hello", "again"]  # the agent's own listener stayed
    assert agent.remove_hook("upper") is False


def test_remove_hook_calls_what_the_hook_returned_once(model: ScriptedModel) -> None:
    agent = make_agent(model)
    undone: list[str] = []

    def scoped(agent: Any) -> Any:
        agent.set_instructions("Be kind.", scope="kind")
        return lambda: (agent.remove_instructions("kind"), undone.append("kind"))

    agent.use(scoped, name="kind")
    assert agent.instructions_for("kind") == "Be kind."
    agent.remove_hook("kind")
    assert agent.instructions_for("kind") is None and undone == ["kind"]


def test_hook_names_are_unique_and_a_hook_must_be_a_function(model: ScriptedModel) -> None:
    agent = make_agent(model)
    agent.use(uppercase, name="upper")
    with pytest.raises(BadUsage, match="already has a hook named 'upper'"):
        agent.use(uppercase, name="upper")
    with pytest.raises(BadUsage, match="a hook is a function of the agent"):
        agent.use("upper")  # type: ignore[arg-type]
    with pytest.raises(BadUsage, match="returns None or a function"):
        agent.use(lambda agent: 42, name="bad")
    assert not agent.has_hook("bad")


async def test_an_async_hook_starts_as_a_task_and_the_turn_waits_for_it(
        model: ScriptedModel) -> None:
    agent = make_fragola(model).agent("a")
    started = asyncio.Event()

    async def slow(agent: Any) -> None:
        await asyncio.sleep(0.05)
        agent.set_instructions("From the hook.", scope="slow")
        started.set()

    agent.use(slow, name="slow")
    assert agent.has_hook("slow") and not started.is_set()
    model.push(reply("ok"))
    await agent.user_message("hi")
    assert started.is_set()
    assert system_of(model.requests[0]) == "From the hook."


async def test_dispose_removes_every_hook_and_cancels_one_not_started(
        model: ScriptedModel) -> None:
    agent = make_agent(model)
    ran: list[str] = []

    async def never(agent: Any) -> None:
        await asyncio.sleep(0)
        agent.on_ai_message(lambda event: ran.append("never"))

    agent.use(uppercase, name="upper")
    agent.use(uppercase)  # unnamed: dispose() still takes it off
    agent.use(never, name="never")
    agent.dispose()
    await asyncio.sleep(0.01)
    assert not agent.has_hook("upper") and not agent.has_hook("never")
    model.push(reply("quiet"))
    assert (await agent.user_message("hi")).messages[-1]["content"] == "quiet"
    assert ran == []


async def test_a_fork_inherits_hooks_and_removes_them_on_its_own(model: ScriptedModel) -> None:
    agent = make_agent(model)
    agent.use(uppercase, name="upper")
    branch = agent.fork("branch")
    assert branch.has_hook("upper")

    assert branch.remove_hook("upper")
    assert agent.has_hook("upper")  # the parent keeps it
    model.push(reply("parent"), reply("fork"))
    assert (await agent.user_message("hi")).messages[-1]["content"] == "PARENT"
    assert (await branch.user_message("hi")).messages[-1]["content"] == "fork"


# -- scoped instructions ----------------------------------------------------------------------


async def test_the_system_message_is_the_merge_of_every_scope(model: ScriptedModel) -> None:
    agent = make_fragola(model).agent("a", instructions="Be brief.")
    agent.set_instructions("Answer in French.", scope="zlang")
    agent.set_instructions("You are a pirate.", scope="role")

    assert agent.instructions == "Be brief."  # today's attribute: the unscoped text
    assert agent.instructions_for() == "Be brief."
    assert agent.instructions_for("role") == "You are a pirate."
    merged = "Be brief.\nYou are a pirate.\nAnswer in French."
    assert agent.instructions_for("*") == merged == agent.system_prompt
    assert agent.context.system_prompt == merged
    assert agent.context.instructions("*") == merged

    model.push(reply("ok"))
    await agent.user_message("hi")
    assert system_of(model.requests[0]) == merged

    assert agent.remove_instructions("role") is True
    assert agent.remove_instructions("role") is False
    assert agent.system_prompt == "Be brief.\nAnswer in French."


def test_the_star_scope_cannot_be_set_or_removed(model: ScriptedModel) -> None:
    agent = make_agent(model)
    with pytest.raises(BadUsage, match="'\\*' names every scope merged: it cannot be set"):
        agent.set_instructions("x", scope="*")
    with pytest.raises(BadUsage, match="cannot be removed"):
        agent.remove_instructions("*")
    with pytest.raises(BadUsage, match="cannot be set"):
        agent.context.set_instructions("x", scope="*")


async def test_scopes_alone_send_a_system_message_and_forks_copy_them(
        model: ScriptedModel) -> None:
    agent = make_fragola(model).agent("a")
    agent.set_instructions("Only a scope.", scope="s")
    branch = agent.fork()
    branch.set_instructions("Fork only.", scope="t")
    assert agent.options.instructions is None and agent.instructions == ""  # unscoped: none
    assert agent.system_prompt == "Only a scope."
    assert branch.system_prompt == "Only a scope.\nFork only."
    model.push(reply("ok"))
    await agent.user_message("hi")
    assert system_of(model.requests[0]) == "Only a scope."


# -- stores and options at run time ----------------------------------------------------------


def test_a_store_added_after_a_fork_is_not_seen_by_the_parent(model: ScriptedModel) -> None:
    agent = make_agent(model)
    branch = agent.fork()
    branch.add_store(create_store({"n": 1}, "notes"))
    assert branch.get_store("notes") is not None
    assert agent.get_store("notes") is None
    with pytest.raises(BadUsage, match="two stores share the namespace 'notes'"):
        branch.context.add_store(create_store({}, "notes"))
    assert branch.remove_store("notes") is True
    assert branch.get_store("notes") is None and branch.remove_store("notes") is False


async def test_set_options_changes_the_next_request_checked_as_at_creation(
        model: ScriptedModel) -> None:
    agent = make_fragola(model).agent("a", instructions="Old.")
    agent.set_options(instructions=["New.", "Two lines."], max_step=2,
                      model_settings={"temperature": 0}, description="changed")
    assert (agent.options.max_step, agent.description) == (2, "changed")
    model.push(reply("ok"))
    await agent.user_message("hi")
    assert system_of(model.requests[0]) == "New.\nTwo lines."
    assert model.requests[0]["temperature"] == 0

    with pytest.raises(BadUsage, match="max_step must be a whole number >= 1"):
        agent.set_options(max_step=0, description="not made either")
    assert agent.description == "changed"
    with pytest.raises(BadUsage, match="set_options cannot change 'name'"):
        agent.set_options(name="b")


async def test_set_options_is_refused_while_waiting(model: ScriptedModel) -> None:
    agent = make_agent(model, remote)
    model.push(tool_calls(call("remote", {"city": "Oslo"}, id="c1")))
    await agent.user_message("go")
    with pytest.raises(BadUsage, match="is waiting: change its options when it is idle"):
        agent.set_options(max_step=3)


# -- tool call payloads -----------------------------------------------------------------------


async def test_tool_call_events_carry_a_payload(model: ScriptedModel) -> None:
    agent = make_agent(model, weather, broken)
    seen: list[ToolCallPayload] = []
    agent.on_after_tool_call(lambda event: seen.append(event.payload))
    model.push(tool_calls(call("weather", {"city": "Oslo"}, id="c1"),
                          call("broken", {"city": "Oslo"}, id="c2"),
                          call("weather", {"town": "Oslo"}, id="c3")), reply("done"))
    state = await agent.user_message("go")

    assert seen[0] == ToolCallPayload(True, "sunny in Oslo")
    assert (seen[1].success, seen[1].is_validation_error) == (False, False)
    assert "TimeoutError: no answer from the station" in seen[1].error
    assert (seen[2].success, seen[2].is_validation_error) == (False, True)
    assert state.messages[3]["content"] == seen[1].error  # the model's text is unchanged


async def test_a_listener_may_answer_with_a_payload(model: ScriptedModel) -> None:
    agent = make_agent(model, weather)
    errors: list[Any] = []
    agent.on_tool_call(lambda event: ToolCallPayload(False, None, error=ValueError("closed")))
    agent.on_after_tool_call(lambda event: errors.append(event.result))
    model.push(tool_calls(call("weather", {"city": "Oslo"}, id="c1")), reply("done"))
    state = await agent.user_message("go")
    assert state.messages[2] == answered("c1", "Error: ValueError: closed")
    assert errors == ["Error: ValueError: closed"]


async def test_inject_accepts_a_payload(model: ScriptedModel) -> None:
    agent = make_agent(model, remote)
    failures: list[ToolCallPayload] = []
    agent.on_after_tool_call(lambda event: failures.append(event.payload))
    model.push(tool_calls(call("remote", {"city": "Oslo"}, id="c1"),
                          call("remote", {"city": "Rome"}, id="c2")), reply("done"))
    await agent.user_message("go")
    agent.inject("c1", ToolCallPayload(True, {"temp": 21}))
    agent.inject("c2", ToolCallPayload(False, None, error="the station is down"))
    state = await agent.step()

    assert state.messages[2] == answered("c1", '{"temp": 21}')
    assert state.messages[3] == answered("c2", "Error: the station is down")
    assert failures[0] == ToolCallPayload(True, {"temp": 21})
    assert failures[1].success is False and failures[1].error == "Error: the station is down"


# -- sessions ---------------------------------------------------------------------------------


def test_a_session_saves_hooks_by_name_and_scopes_and_runs_the_hooks_again_on_load(
        model: ScriptedModel, tmp_path: Any) -> None:
    from fragola_nb import SessionError, load_session, save_session

    agent = make_agent(model)
    agent.use(uppercase, name="upper")
    agent.set_instructions("Be kind.", scope="kind")
    branch = agent.fork("branch")
    path = save_session(tmp_path / "s.json", agent)

    with pytest.raises(SessionError, match="hook 'upper'"):
        load_session(path, make_fragola(model))
    root, fork = load_session(path, make_fragola(model), hooks={"upper": uppercase}).agents
    assert (root.has_hook("upper"), fork.has_hook("upper")) == (True, True)
    assert fork.name == branch.name and fork.system_prompt == "Be kind."
    # The hook's listener was saved as the hook, not as a listener too: it is on once.
    assert len(root.deps.listeners._by_event["ai_message"]) == 1


# -- today's presets as hooks -----------------------------------------------------------------


async def test_guardrail_as_a_hook_is_taken_off_by_remove_hook(model: ScriptedModel) -> None:
    from fragola_nb.core.hooks import preset
    from fragola_nb.presets.guardrails import GuardrailRejected, Rejection, guardrail

    def no_football(text: str) -> Rejection | None:
        return Rejection("not about cooking") if "football" in text else None

    agent = make_agent(model)
    agent.use(preset(guardrail, no_football, on_reject="remove"), name="topic")
    branch = agent.fork()
    with pytest.raises(GuardrailRejected):
        await agent.user_message("football scores?")
    with pytest.raises(GuardrailRejected):
        await branch.user_message("football scores?")  # the fork inherited the hook

    agent.remove_hook("topic")
    model.push(reply("2-1"))
    assert (await agent.user_message("football scores?")).messages[-1]["content"] == "2-1"
    assert len(model.requests) == 1


async def test_orchestrate_as_a_hook_adds_the_message_tool_until_removed(
        model: ScriptedModel) -> None:
    from fragola_nb.core.hooks import preset
    from fragola_nb.presets.orchestration import MESSAGE_TOOL, orchestrate

    fragola = make_fragola(model)
    lead, writer = fragola.agent("lead"), fragola.agent("writer")
    lead.use(preset(orchestrate, [lead, writer], [("lead", "writer")]), name="team")
    assert lead.tool_named(MESSAGE_TOOL) is not None
    lead.remove_hook("team")
    assert lead.tool_named(MESSAGE_TOOL) is None and lead.instructions is None


def test_agent_instructions_is_the_text_and_callable_as_upstreams_instructions() -> None:
    import copy
    import pickle

    from fragola_nb import Fragola

    fragola = Fragola.scripted()
    plain = fragola.agent(name="plain")
    assert plain.instructions is None  # nothing set: as before scopes existed
    agent = fragola.agent(name="tutor", instructions="Be brief.")
    assert agent.instructions == "Be brief." and isinstance(agent.instructions, str)
    agent.set_instructions("Answer in French.", scope="lang")
    agent.set_instructions("Say please.", scope="manners")
    assert agent.instructions() == "Be brief."
    assert agent.instructions("lang") == "Answer in French."
    assert agent.instructions("*") == "Be brief.\nAnswer in French.\nSay please."  # by scope
    assert agent.instructions("*") == agent.system_prompt == agent.instructions_for("*")
    only_scoped = fragola.agent(name="scoped")
    only_scoped.set_instructions("Be kind.", scope="tone")
    assert only_scoped.instructions == "" and only_scoped.instructions("*") == "Be kind."
    # Saved, pickled or copied, it is the plain text, never the agent behind it.
    for copied in (pickle.loads(pickle.dumps(agent.instructions)),
                   copy.deepcopy(agent.instructions), copy.copy(agent.instructions)):
        assert copied == "Be brief." and not callable(copied)
