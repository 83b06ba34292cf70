"""Half an emoji (a lone surrogate, which no request can carry) never bricks an agent: text
that enters a history from a model, a tool or a file is stored with U+FFFD in its place;
text a person types (a user message, an edit of a message or a result, an injected result, a
rejection's reason, edited arguments, instructions) holding one is refused, nothing stored.
After each, the history is a valid next request and the next call is sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.helpers import make_fragola
from support.invariants import check_agent

from fragola_nb import Agent, BadUsage, load_session, save_session, tool
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls

HALF = "half \ud83d of an emoji"
MENDED = "half \ufffd of an emoji"


@tool
def echo(text: str) -> str:
    """Say the text back, with half an emoji after it."""
    return text + " \udc00"


async def next_call_works(agent: Agent, model: ScriptedModel) -> None:
    """The history is valid and encodable, and the next request goes out and is answered."""
    check_agent(agent)
    json.dumps(agent.state.messages, ensure_ascii=False).encode("utf-8")  # strict UTF-8
    sent = len(model.requests)
    model.push(reply("still here"))
    state = await agent.user_message("and now?")
    assert state.outcome == "finished" and len(model.requests) == sent + 1
    assert state.messages[-1]["content"] == "still here"


@pytest.mark.parametrize("settings", [{}, {"stream": True}], ids=["plain", "streamed"])
async def test_a_reply_with_half_an_emoji_is_stored_mended(model: ScriptedModel,
                                                           settings: dict[str, Any]) -> None:
    model.push(reply(HALF))
    agent = make_fragola(model).agent("a", model_settings=settings)
    shown: list[str] = []
    agent.on_model_chunk(lambda event: shown.append(event.content))

    state = await agent.user_message("hi")

    assert state.messages[-1] == {"role": "assistant", "content": MENDED}
    if settings:  # what a view is told while it streams, too
        assert "".join(shown) == MENDED
    await next_call_works(agent, model)


async def test_tool_arguments_and_a_tool_result_with_half_an_emoji_are_stored_mended(
        model: ScriptedModel) -> None:
    model.push(tool_calls(call("echo", {"text": HALF}, id="c1")), reply("done"))
    agent = make_fragola(model).agent("a", tools=[echo])

    state = await agent.user_message("echo it")

    asked, answered = state.messages[1], state.messages[2]
    arguments = asked["tool_calls"][0]["function"]["arguments"]
    assert arguments.encode("utf-8") and json.loads(arguments) == {"text": HALF}  # as sent
    assert answered == {"role": "tool", "tool_call_id": "c1", "content": MENDED + " \ufffd"}
    await next_call_works(agent, model)


async def test_a_user_message_with_half_an_emoji_is_refused_and_nothing_stored(
        model: ScriptedModel) -> None:
    agent = make_fragola(model).agent("a")
    for content in (HALF, [{"type": "text", "text": HALF}]):
        with pytest.raises(BadUsage, match=r"lone surrogate \('\\ud83d'\)"):
            await agent.user_message(content)
    assert agent.state.messages == [] and model.requests == []
    await next_call_works(agent, model)


async def test_an_injected_result_and_an_edit_a_person_types_are_refused_alike(
        model: ScriptedModel) -> None:
    """One rule for text a person types: ``edit(content=...)``, ``edit(result=...)`` and
    ``inject`` refuse half an emoji with the same BadUsage, nothing changed."""
    asking = tool(name="ask_person", description="Ask a person.", handler="dynamic",
                  schema={"type": "object", "properties": {"text": {"type": "string"}}})
    model.push(tool_calls(call("ask_person", {"text": "hi"}, id="c1")), reply("thanks"))
    agent = make_fragola(model).agent("a", tools=[asking])
    await agent.user_message("ask")

    for result in (HALF, {"note": HALF}, [HALF]):
        with pytest.raises(BadUsage, match=r"^inject\(result=...\) holds half an emoji, a "
                                           r"lone surrogate \('\\ud83d'\)"):
            agent.inject("c1", result)
    assert agent.state.pending[0].decision is None  # refused: still waiting
    agent.inject("c1", "fine")
    state = await agent.step()
    assert state.messages[2]["content"] == "fine"

    before = agent.state.messages
    with pytest.raises(BadUsage, match=r"^content holds half an emoji, a lone surrogate"):
        agent.edit(0, content=HALF)
    for result in (HALF, {HALF: 1}):
        with pytest.raises(BadUsage, match=r"^edit\(result=...\) for messages\[2\] holds "
                                           r"half an emoji, a lone surrogate"):
            agent.edit(2, result=result)
    assert agent.state.messages == before
    await next_call_works(agent, model)


async def test_a_rejection_edited_arguments_and_instructions_with_half_an_emoji_are_refused(
        model: ScriptedModel) -> None:
    needs = tool(name="delete", description="Delete a file.", handler=lambda path: "done",
                 schema={"type": "object", "properties": {"path": {"type": "string"}}},
                 require_approval=True)
    model.push(tool_calls(call("delete", {"path": "a"}, id="c1")), reply("ok"))
    fragola = make_fragola(model)
    agent = fragola.agent("a", tools=[needs])
    await agent.user_message("delete a")
    with pytest.raises(BadUsage, match=r"^reject\(reason=...\) holds half an emoji"):
        agent.reject("c1", HALF)
    with pytest.raises(BadUsage, match=r"^approve\(params=...\) holds half an emoji"):
        agent.approve("c1", {"path": HALF})
    assert agent.state.pending[0].decision is None
    for instructions in (HALF, ["be brief", HALF]):
        with pytest.raises(BadUsage, match=r"^instructions holds half an emoji"):
            agent.set_instructions(instructions)
        with pytest.raises(BadUsage, match=r"^instructions holds half an emoji"):
            fragola.agent("b", instructions=instructions)
    with pytest.raises(BadUsage, match=r"^instructions holds half an emoji"):
        agent.set_instructions(HALF, scope="tone")
    assert agent.instructions_for("*") is None
    agent.reject("c1", "not that one")
    state = await agent.step()
    assert state.outcome == "finished"
    await next_call_works(agent, model)


async def test_a_listener_reply_and_given_messages_are_mended(model: ScriptedModel) -> None:
    model.push(reply("fine"))
    fragola = make_fragola(model)
    agent = fragola.agent("a", messages=[{"role": "user", "content": HALF},
                                         {"role": "assistant", "content": "ok"}])
    agent.on_ai_message(lambda event: {**event.message, "content": HALF})
    assert agent.state.messages[0]["content"] == MENDED

    state = await agent.user_message("again")

    assert state.messages[-1]["content"] == MENDED
    agent.off("ai_message", agent.own_listeners()["ai_message"][0])
    agent.reset([{"role": "user", "content": HALF}])
    assert agent.state.messages == [{"role": "user", "content": MENDED}]
    await next_call_works(agent, model)


async def test_a_session_file_holding_half_an_emoji_loads_mended(model: ScriptedModel,
                                                                 tmp_path: Path) -> None:
    model.push(reply("fine"))
    fragola = make_fragola(model)
    agent = fragola.agent("saved")
    await agent.user_message("hi")
    path = save_session(tmp_path / "s.json", agent)
    # A file an older version wrote, holding the reply as the server sent it.
    path.write_text(path.read_text().replace('"fine"', json.dumps(HALF)))

    loaded = load_session(path, fragola)["saved"]

    assert loaded.state.messages[-1]["content"] == MENDED
    await next_call_works(loaded, model)


def test_half_an_emoji_in_a_key_is_mended_too() -> None:
    """A key is text that goes out in every request as well: mended like a value."""
    from fragola_nb.base.surrogates import mended

    message = {"role": "tool", "tool_call_id": "c1", "content": "ok", "note\ud83d": "kept"}
    stored = mended(message)
    assert list(stored) == ["role", "tool_call_id", "content", "note\ufffd"]
    assert json.dumps(stored, ensure_ascii=False).encode()  # sendable now
    assert message["note\ud83d"] == "kept"  # the given dict is not changed
    whole = {"role": "user", "content": "fine"}
    assert mended(whole) is whole
