"""Orchestration: agents messaging each other through ``message_agent`` on the scripted model.

Each agent gets its own answers with ``fragola.script(agent, [...])``; every request the
scripted server received is checked against OpenAI's schema at teardown.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from support.helpers import answered, asked, assert_valid_history, until_async, user
from support.openai_schema import validate_request

from fragola_nb import Agent, Fragola, tool
from fragola_nb.models.scripted import call, fail, hang, reply, tool_calls
from fragola_nb.presets.orchestration import (
    MESSAGE_TOOL,
    OrchestrationError,
    Veto,
    orchestrate,
)


@pytest_asyncio.fixture
async def fragola() -> AsyncIterator[Fragola]:
    made = Fragola.scripted()
    try:
        yield made
    finally:
        await made.aclose()
    assert made.scripted_model is not None
    for request in made.scripted_model.requests:
        validate_request(request)


@tool
def search(query: str) -> str:
    """Search the notes."""
    return f"notes on {query}"


def team(fragola: Fragola) -> tuple[Agent, Agent, Agent]:
    lead = fragola.agent("lead", "Plans the work.", "You lead the team.")
    researcher = fragola.agent("researcher", "Finds facts.", "You research.", tools=[search])
    writer = fragola.agent("writer", "Writes short notes.")
    return lead, researcher, writer


def send(target: Agent, message: str, id: str = "m1") -> Any:
    return tool_calls(call(MESSAGE_TOOL, {"id": target.id, "message": message}, id=id))


def tool_result(agent: Agent, call_id: str) -> str:
    for message in agent.state.messages:
        if message["role"] == "tool" and message["tool_call_id"] == call_id:
            return str(message["content"])
    raise AssertionError(f"no answer to {call_id}")


# -- a message is a turn of the target --------------------------------------------------------

async def test_a_message_runs_the_targets_turn_and_its_answer_is_the_result(
        fragola: Fragola) -> None:
    lead, researcher, writer = team(fragola)
    orchestration = orchestrate(lead, [lead, researcher, writer],
                                [{"from": lead, "to": [researcher, writer]}])
    fragola.script(lead, [send(researcher, "What causes tides?"), reply("The Moon, mostly.")])
    fragola.script(researcher, [reply("The Moon's gravity.")])

    state = await lead.user_message("Explain tides.")

    assert state.messages == [
        user("Explain tides."),
        asked(("m1", MESSAGE_TOOL, {"id": researcher.id, "message": "What causes tides?"})),
        answered("m1", "The Moon's gravity."),
        {"role": "assistant", "content": "The Moon, mostly."},
    ]
    assert researcher.state.messages == [
        user("What causes tides?"), {"role": "assistant", "content": "The Moon's gravity."}]
    assert writer.state.messages == []
    assert [(m.source, m.target, m.status, m.result) for m in orchestration.log] == [
        (lead, researcher, "answered", "The Moon's gravity.")]


async def test_the_sources_request_lists_the_reachable_agents_and_keeps_its_instructions(
        fragola: Fragola) -> None:
    lead, researcher, writer = team(fragola)
    orchestrate(lead, [lead, researcher, writer], [{"from": lead, "to": "*"}])
    fragola.script(lead, [reply("ok")])

    await lead.user_message("hi")

    assert fragola.scripted_model is not None
    request = fragola.scripted_model.requests[-1]
    system = request["messages"][0]
    assert system["role"] == "system"
    assert system["content"] == (
        "You lead the team.\n\n<orchestration>\n"
        "You are part of a team of agents. To ask one of them, call the message_agent tool "
        "with its id and your message: its answer is the result.\n"
        "Agents you can message:\n"
        f"- researcher (id {researcher.id}): Finds facts. Tools: search (Search the notes.)\n"
        f"- writer (id {writer.id}): Writes short notes.\n"
        "</orchestration>")
    [definition] = [t for t in request["tools"] if t["function"]["name"] == MESSAGE_TOOL]
    assert definition["function"]["parameters"]["properties"]["id"]["enum"] == [
        researcher.id, writer.id]
    # A one-way flow: the targets cannot message anyone, and their instructions are theirs.
    assert researcher.tool_named(MESSAGE_TOOL) is None
    assert researcher.instructions == "You research."
    assert writer.instructions is None


def test_the_flow_forms_give_the_routes(fragola: Fragola) -> None:
    lead, researcher, writer = team(fragola)

    star = orchestrate(lead, [researcher, writer], [("lead", "*")])
    assert star.participants == (lead, researcher, writer)  # the lead is added first
    assert star.routes == {lead: (researcher, writer)}
    star.remove()

    both = orchestrate(lead, [lead, researcher, writer], [
        {"from": lead, "to": researcher},
        {"from": "researcher", "to": "writer", "bidirectional": True},
    ])
    assert both.routes == {lead: (researcher,), researcher: (writer,), writer: (researcher,)}
    assert both.graph() == ("lead (lead) → researcher [0]\n"
                            "researcher → writer [0]\n"
                            "writer → researcher [0]")
    both.remove()

    everyone = orchestrate(lead, [lead, researcher, writer], [{"from": "*", "to": "*"}])
    assert everyone.routes == {lead: (researcher, writer), researcher: (lead, writer),
                               writer: (lead, researcher)}
    everyone.remove()

    back = orchestrate(lead, [lead, researcher, writer],
                       [{"from": lead, "to": "*", "bidirectional": True}])
    assert back.routes == {lead: (researcher, writer), researcher: (lead,), writer: (lead,)}


# -- refused set-ups ----------------------------------------------------------------------------

def bad_setups(lead: Agent, researcher: Agent, writer: Agent, stranger: Agent
               ) -> list[tuple[list[Any], list[Any], str]]:
    return [
        ([lead, researcher, researcher], [(lead, "*")],
         rf"'researcher' \(id {researcher.id}\) is listed twice"),
        ([lead, researcher], [(lead, stranger)],
         rf"flow\[0\]: 'stranger' \(id {stranger.id}\) is not among the participants"),
        ([lead, researcher], [(lead, researcher), (researcher, researcher)],
         r"flow\[1\]: 'researcher' cannot message itself"),
        ([lead, researcher, writer], [(lead, researcher)],
         rf"every participant must be in the flow .*; unused: 'writer' \(id {writer.id}\)"),
        ([lead, researcher], [], "flow is empty"),
        ([lead, researcher], [{"from": lead, "too": researcher}],
         r"flow\[0\]: unknown key\(s\) \['too'\]"),
        ([lead, researcher], [(lead, "nobody")], r"flow\[0\]: no participant is named 'nobody'"),
        ([lead, researcher], [lead], r"flow\[0\]: an edge is"),
        ([lead, "researcher"], [(lead, "*")], "participants must be agents, got a str"),
        ([lead], [(lead, "*")], "at least two participants"),
    ]


@pytest.mark.parametrize("case", range(10))
def test_a_setup_that_cannot_work_is_one_clear_error_and_changes_nothing(
        fragola: Fragola, case: int) -> None:
    lead, researcher, writer = team(fragola)
    stranger = fragola.agent("stranger")
    participants, flow, error = bad_setups(lead, researcher, writer, stranger)[case]
    before = [(a.instructions, list(a.options.tools)) for a in (lead, researcher, writer)]

    with pytest.raises(OrchestrationError, match=error):
        orchestrate(lead, participants, flow)

    assert [(a.instructions, list(a.options.tools)) for a in (lead, researcher, writer)] == before


def test_an_agent_in_two_orchestrations_and_bad_options_are_refused(fragola: Fragola) -> None:
    lead, researcher, writer = team(fragola)
    orchestrate(lead, [lead, researcher], [(lead, researcher)])
    with pytest.raises(OrchestrationError, match="'lead' already has a tool named "
                                                 "'message_agent'"):
        orchestrate(lead, [lead, writer], [(lead, writer)])
    with pytest.raises(OrchestrationError, match="max_depth must be a whole number >= 1"):
        orchestrate(writer, [writer, researcher], [(writer, researcher)], max_depth=0)
    twin = fragola.agent("writer")
    with pytest.raises(OrchestrationError, match="2 participants are named 'writer'"):
        orchestrate(researcher, [researcher, writer, twin], [("researcher", "writer")])
    assert writer.tool_named(MESSAGE_TOOL) is None


# -- what the model is told when a message cannot go through --------------------------------

async def test_a_message_to_an_agent_out_of_reach_or_to_itself_is_a_readable_result(
        fragola: Fragola) -> None:
    lead, researcher, writer = team(fragola)
    orchestration = orchestrate(lead, [lead, researcher, writer],
                                [(lead, researcher), (researcher, writer)])
    fragola.script(lead, [
        tool_calls(call(MESSAGE_TOOL, {"id": writer.id, "message": "hi"}, id="far"),
                   call(MESSAGE_TOOL, {"id": lead.id, "message": "hi"}, id="self")),
        reply("done")])

    state = await lead.user_message("go")

    assert tool_result(lead, "far") == (f"Error: no agent with id {writer.id!r} is reachable. "
                                        f"Reachable: researcher (id {researcher.id}).")
    assert tool_result(lead, "self") == "Error: lead cannot message itself."
    assert state.outcome == "finished"
    assert_valid_history(state.messages)
    assert writer.state.messages == [] and researcher.state.messages == []
    assert [m.status for m in orchestration.log] == ["refused", "refused"]


async def test_a_loop_back_to_a_waiting_agent_is_refused_and_the_chain_goes_on(
        fragola: Fragola) -> None:
    lead, researcher, _ = team(fragola)
    orchestration = orchestrate(lead, [lead, researcher],
                                [{"from": lead, "to": researcher, "bidirectional": True}])
    fragola.script(lead, [send(researcher, "Find tides."), reply("Tides: the Moon.")])
    fragola.script(researcher, [send(lead, "What do you mean?", id="back"),
                                reply("The Moon.")])

    state = await lead.user_message("go")

    assert tool_result(researcher, "back") == (
        "Error: not sent: lead is waiting for the answer to its own message "
        "(lead → researcher → lead); answer it instead of messaging back.")
    assert tool_result(lead, "m1") == "The Moon."
    assert state.messages[-1] == {"role": "assistant", "content": "Tides: the Moon."}
    assert [(m.source.name, m.depth, m.status) for m in orchestration.log] == [
        ("lead", 1, "answered"), ("researcher", 2, "refused")]
    assert orchestration.transcript() == (
        "lead → researcher: Find tides.  ⇒ [answered] The Moon.\n"
        "  researcher → lead: What do you mean?  ⇒ [refused] Error: not sent: lead is waiting "
        "for the answer to its own message (lead → rese…")
    for agent in (lead, researcher):
        assert agent.status == "idle"
        assert_valid_history(agent.state.messages)


async def test_a_chain_deeper_than_max_depth_is_refused(fragola: Fragola) -> None:
    lead, researcher, writer = team(fragola)
    orchestration = orchestrate(lead, [lead, researcher, writer],
                                [(lead, researcher), (researcher, writer)], max_depth=1)
    fragola.script(lead, [send(researcher, "Find it."), reply("done")])
    fragola.script(researcher, [send(writer, "Write it.", id="deep"), reply("found")])

    await lead.user_message("go")

    assert tool_result(researcher, "deep") == (
        "Error: not sent: this message would be 2 messages deep (max_depth=1); answer "
        "without messaging further.")
    assert writer.state.messages == []
    assert tool_result(lead, "m1") == "found"
    assert [m.status for m in orchestration.log] == ["answered", "refused"]


async def test_a_target_whose_turn_fails_is_a_readable_result_and_stays_usable(
        fragola: Fragola) -> None:
    lead, researcher, _ = team(fragola)
    orchestration = orchestrate(lead, [lead, researcher], [(lead, researcher)])
    fragola.script(lead, [send(researcher, "Find tides."), reply("Sorry, no answer.")])
    fragola.script(researcher, [fail(500, "the model is down"), reply("back again")])

    state = await lead.user_message("go")

    result = tool_result(lead, "m1")
    assert result.startswith("Error: researcher could not answer: ModelHTTPError: ")
    assert "the model is down" in result
    assert state.outcome == "finished"
    assert orchestration.log[0].status == "failed"
    assert researcher.status == "idle"
    assert researcher.state.messages == [user("Find tides.")]
    again = await researcher.step()
    assert again.messages[-1] == {"role": "assistant", "content": "back again"}


async def test_a_target_that_pauses_for_approval_is_told_and_can_be_resumed(
        fragola: Fragola) -> None:
    lead, researcher, _ = team(fragola)
    careful = tool(name="publish", description="Publish a note.", schema=None,
                   handler=lambda: "published", require_approval=True)
    researcher.context.update_tools([*researcher.options.tools, careful])
    orchestration = orchestrate(lead, [lead, researcher], [(lead, researcher)])
    fragola.script(lead, [send(researcher, "Publish it."), reply("It is waiting."),
                          send(researcher, "And now?", id="m2"), reply("ok")])
    fragola.script(researcher, [tool_calls(call("publish", {}, id="p1")), reply("Published.")])

    await lead.user_message("go")

    assert tool_result(lead, "m1") == ("researcher is waiting for a person to decide on its "
                                       "tool call(s) (publish); its answer is not available "
                                       "yet.")
    assert orchestration.log[0].status == "waiting"
    assert researcher.status == "waiting"

    await lead.user_message("again")  # the target is busy: the lead is told

    assert tool_result(lead, "m2") == ("Error: not sent: researcher is busy (waiting for a "
                                       "person to decide on its tool calls); try again later.")
    researcher.approve("p1")
    resumed = await researcher.step()
    assert resumed.messages[-1] == {"role": "assistant", "content": "Published."}


async def test_stopping_the_sender_stops_the_target_and_both_histories_stay_valid(
        fragola: Fragola) -> None:
    lead, researcher, _ = team(fragola)
    orchestration = orchestrate(lead, [lead, researcher], [(lead, researcher)])
    fragola.script(lead, [send(researcher, "Take your time."), reply("after")])
    fragola.script(researcher, [hang(), reply("later")])
    turn = asyncio.create_task(lead.user_message("go"))
    await until_async(lambda: researcher.status == "generating"
                      and orchestration.log and orchestration.log[0].status == "running")

    lead.stop_sync()
    state = await turn

    assert state.outcome == "stopped"
    assert state.messages[-1]["role"] == "tool"
    assert orchestration.log[0].status == "unfinished"
    await until_async(lambda: researcher.status == "idle")
    assert researcher.state.messages == [user("Take your time.")]
    for agent in (lead, researcher):
        assert_valid_history(agent.state.messages)
    assert (await lead.step()).messages[-1] == {"role": "assistant", "content": "after"}


# -- the on_message hook --------------------------------------------------------------------

@pytest.mark.parametrize("how", ["stop_sync", "cancel"])
async def test_stopping_the_sender_while_an_async_on_message_runs_ends_its_entry(
        fragola: Fragola, how: str) -> None:
    """The sender stopped (stop_sync, or its call cancelled: Jupyter's interrupt) while an
    async on_message hook is awaited: the message is never sent, and its log entry ends
    "stopped" instead of staying "running" for good."""
    lead, researcher, _ = team(fragola)
    entered = asyncio.Event()

    async def slow_review(source: Agent, target: Agent, message: str) -> None:
        entered.set()
        await asyncio.Event().wait()

    orchestration = orchestrate(lead, [lead, researcher], [(lead, researcher)],
                                on_message=slow_review)
    fragola.script(lead, [send(researcher, "Check this."), reply("after")])
    turn = asyncio.create_task(lead.user_message("go"))
    await asyncio.wait_for(entered.wait(), 10)

    if how == "stop_sync":
        lead.stop_sync()
        assert (await turn).outcome == "stopped"
    else:
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn

    [entry] = orchestration.log
    assert entry.status == "stopped"
    assert entry.result == "Stopped: the run was stopped before the message was sent to " \
                           "researcher."
    assert "[stopped]" in orchestration.transcript()
    assert researcher.state.messages == [] and researcher.status == "idle"
    assert lead.status == "idle"
    assert_valid_history(lead.state.messages)
    orchestration.remove()
    assert (await lead.step()).messages[-1] == {"role": "assistant", "content": "after"}


async def test_on_message_can_rewrite_veto_or_fail(fragola: Fragola) -> None:
    lead, researcher, writer = team(fragola)
    seen: list[tuple[str, str, str]] = []

    async def hook(source: Agent, target: Agent, message: str) -> str | Veto | None:
        seen.append((source.name, target.name, message))
        if "secret" in message:
            return Veto("no secrets leave the lead")
        if message == "boom":
            raise ValueError("the hook broke")
        return f"From {source.name}: {message}" if target is researcher else None

    orchestration = orchestrate(lead, [lead, researcher, writer], [(lead, "*")],
                                on_message=hook)
    fragola.script(lead, [
        tool_calls(call(MESSAGE_TOOL, {"id": researcher.id, "message": "Find tides."}, id="a"),
                   call(MESSAGE_TOOL, {"id": writer.id, "message": "Write."}, id="b"),
                   call(MESSAGE_TOOL, {"id": writer.id, "message": "the secret"}, id="c"),
                   call(MESSAGE_TOOL, {"id": writer.id, "message": "boom"}, id="d")),
        reply("done")])
    fragola.script(researcher, [reply("found")])
    fragola.script(writer, [reply("written")])

    await lead.user_message("go")

    assert researcher.state.messages[0] == user("From lead: Find tides.")
    assert writer.state.messages == [user("Write."), {"role": "assistant", "content": "written"}]
    assert tool_result(lead, "c") == ("Not sent: the message to writer was refused: no "
                                      "secrets leave the lead")
    assert tool_result(lead, "d") == ("Error: not sent: the on_message hook raised "
                                      "ValueError: the hook broke")
    assert [(m.status, m.sent) for m in orchestration.log] == [
        ("answered", "From lead: Find tides."), ("answered", None), ("vetoed", None),
        ("failed", None)]
    assert len(seen) == 4


# -- undoing it ---------------------------------------------------------------------------------

async def test_remove_takes_off_the_tool_and_the_instructions_from_the_sources_and_forks(
        fragola: Fragola) -> None:
    lead, researcher, writer = team(fragola)
    own = list(lead.options.tools)
    orchestration = orchestrate(lead, [lead, researcher, writer],
                                [{"from": lead, "to": "*", "bidirectional": True}])
    message_tool = lead.tool_named(MESSAGE_TOOL)
    assert message_tool is not None
    fork = lead.fork("draft")
    assert fork.tool_named(MESSAGE_TOOL) is message_tool

    orchestration.remove()
    orchestration.remove()  # again: nothing more to do

    for agent, instructions in ((lead, "You lead the team."), (fork, "You lead the team."),
                                (researcher, "You research."), (writer, None)):
        assert agent.instructions == instructions
        assert agent.tool_named(MESSAGE_TOOL) is None
    assert lead.options.tools == own
    assert researcher.options.tools == [search]
    # A stale copy of the tool (a session, a list kept aside) tells the model it is gone.
    result = await message_tool.invoke({"id": researcher.id, "message": "hi"}, lead.context)
    assert result == "Error: this orchestration was removed: message_agent no longer works."
    assert researcher.state.messages == []
    # The agents can be orchestrated again.
    with orchestrate(lead, [lead, writer], [(lead, writer)]) as again:
        assert again.routes == {lead: (writer,)}
    assert lead.instructions == "You lead the team."


async def test_a_fork_of_a_source_messages_under_its_own_name(fragola: Fragola) -> None:
    lead, researcher, _ = team(fragola)
    orchestration = orchestrate(lead, [lead, researcher], [(lead, researcher)])
    fork = lead.fork("draft")
    fragola.script(fork, [send(researcher, "From the fork."), reply("ok")])
    fragola.script(researcher, [reply("heard")])

    await fork.user_message("go")

    assert tool_result(fork, "m1") == "heard"
    assert lead.state.messages == []
    assert [(m.source, m.target) for m in orchestration.log] == [(fork, researcher)]
    assert orchestration.graph() == "lead (lead) → researcher [0]"  # the fork is not the lead


def test_the_views_escape_what_the_agents_said(fragola: Fragola) -> None:
    lead, researcher, _ = team(fragola)
    orchestration = orchestrate(lead, [lead, researcher], [(lead, researcher)])
    assert orchestration.transcript() == "(no messages yet)"
    assert repr(orchestration) == "Orchestration(lead='lead', participants=2, messages=0)"
    researcher.options.name = "<b>researcher</b>"

    shown = orchestration._repr_html_()

    assert "&lt;b&gt;researcher&lt;/b&gt;" in shown
    assert "<b>researcher</b>" not in shown



def test_remove_keeps_what_was_changed_in_the_instructions_since(fragola: Fragola) -> None:
    lead, researcher, writer = team(fragola)
    orchestration = orchestrate(lead, [lead, researcher, writer],
                                [(lead, researcher), ("*", writer)])
    assert orchestration.routes == {lead: (researcher, writer), researcher: (writer,)}
    lead.set_instructions(f"{lead.instructions}\nBe brief.")
    researcher.set_instructions("Something else entirely.")

    orchestration.remove()

    assert lead.instructions == "You lead the team.\nBe brief."
    assert researcher.instructions == "Something else entirely."
    assert writer.instructions is None


async def test_stopping_the_target_answers_the_sender_and_its_run_goes_on(
        fragola: Fragola) -> None:
    lead, researcher, _ = team(fragola)
    orchestration = orchestrate(lead, [lead, researcher], [(lead, researcher)])
    fragola.script(lead, [send(researcher, "Take your time."), reply("It stopped.")])
    fragola.script(researcher, [hang()])
    turn = asyncio.create_task(lead.user_message("go"))
    await until_async(lambda: researcher.status == "generating")

    researcher.stop_sync()  # its panel's Stop button
    state = await turn

    assert tool_result(lead, "m1") == "researcher was stopped before answering."
    assert state.messages[-1] == {"role": "assistant", "content": "It stopped."}
    assert orchestration.log[0].status == "unfinished"
    assert researcher.status == "idle"
