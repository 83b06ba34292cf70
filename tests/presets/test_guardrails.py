"""Guardrails on the scripted model behind the real ``openai`` client: a refused message ends
the turn before any model call, raises ``GuardrailRejected``, is kept marked (never sent) or
dropped, and the agent goes on; replies checked before they are stored; forks; undo."""

from __future__ import annotations

import asyncio
import json
import traceback
from typing import Any

import pydantic
import pytest
from support.helpers import answered, asked, assert_valid_history, make_agent, user

from fragola_nb import Fragola, tool
from fragola_nb.base.checks import META
from fragola_nb.base.errors import BadUsage, FragolaError, TurnRefused
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls
from fragola_nb.presets.guardrails import (
    Guardrail,
    GuardrailRejected,
    Rejection,
    guardrail,
    rejection_of,
)


def no_secrets(text: str) -> str | None:
    return "it holds an API key" if "sk-" in text else None


def short(text: str) -> bool:
    return len(text) < 40


async def on_topic(text: str) -> Rejection | None:
    await asyncio.sleep(0)  # an async guard (a classifier model, say)
    return Rejection("not about cooking", guard="topic") if "football" in text else None


def rejected(content: Any, guard: str, reason: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": content,
            "fragola_nb": {"rejected": {"guard": guard, "reason": reason}}}


async def test_a_rejected_message_ends_the_turn_before_any_model_call(
        model: ScriptedModel) -> None:
    agent = make_agent(model, instructions="Cook.")
    guardrail(agent, no_secrets, short, on_topic)
    model.push(reply("Boil it."))
    await agent.user_message("How long for an egg?")

    with pytest.raises(GuardrailRejected) as caught:
        await agent.user_message("my key is sk-live-123")

    assert len(model.requests) == 1  # the second turn called no model
    error = caught.value
    assert (error.guard, error.reason, error.role) == ("no_secrets", "it holds an API key", "user")
    assert str(error) == "rejected by no_secrets: it holds an API key"
    assert "sk-live" not in str(error)  # the message itself is never quoted
    assert isinstance(error, TurnRefused) and isinstance(error, FragolaError)
    assert error.refused == user("my key is sk-live-123")
    assert agent.status == "idle" and agent.outcome is None
    assert agent.state.messages == [
        user("How long for an egg?"), {"role": "assistant", "content": "Boil it."},
        # Kept to show what was refused, with the credential in it redacted.
        rejected("my key is [redacted]", "no_secrets", "it holds an API key"),
    ]
    assert "sk-live" not in json.dumps(agent.state.messages)


async def test_a_kept_rejected_message_has_its_credentials_redacted_in_every_part(
        model: ScriptedModel) -> None:
    agent = make_agent(model)
    guardrail(agent, lambda text: "refused")

    with pytest.raises(GuardrailRejected):
        await agent.user_message([
            {"type": "text", "text": "use Authorization: Bearer abcdefgh12345678 please"},
            {"type": "text", "text": "and token sk-proj-abcdefgh12345678"},
            {"type": "text", "text": "nothing secret here"}])

    kept = agent.state.messages[-1]["content"]
    assert [part["text"] for part in kept] == [
        "use Authorization: Bearer [redacted] please", "and token [redacted]",
        "nothing secret here"]


async def test_the_first_failing_guard_wins_and_each_kind_of_verdict_is_read(
        model: ScriptedModel) -> None:
    agent = make_agent(model)
    guardrail(agent, no_secrets, short, on_topic)

    with pytest.raises(GuardrailRejected) as too_long:
        await agent.user_message("football " * 10)  # fails `short` (False) before `topic`
    with pytest.raises(GuardrailRejected) as off_topic:
        await agent.user_message("football?")  # an async guard's Rejection, its own name

    assert (too_long.value.guard, too_long.value.reason) == ("short", "rejected")
    assert (off_topic.value.guard, off_topic.value.reason) == ("topic", "not about cooking")
    assert [rejection_of(m) for m in agent.state.messages] == [
        ("short", "rejected"), ("topic", "not about cooking")]
    assert model.requests == []


async def test_an_annotated_message_is_never_sent_and_the_agent_goes_on(
        model: ScriptedModel) -> None:
    agent = make_agent(model, instructions="Cook.")
    guardrail(agent, no_secrets)
    with pytest.raises(GuardrailRejected):
        await agent.user_message("sk-abc: store it")
    model.push(reply("Salt the water."))

    state = await agent.user_message("And pasta?")

    # The request (checked against OpenAI's schema at teardown) holds neither the refused
    # message nor its mark.
    assert model.requests[0]["messages"] == [
        {"role": "system", "content": "Cook."}, user("And pasta?")]
    assert state.messages == [
        rejected("sk-abc: store it", "no_secrets", "it holds an API key"),
        user("And pasta?"), {"role": "assistant", "content": "Salt the water."}]
    assert state.outcome == "finished"


async def test_remove_keeps_nothing_of_the_refused_message(model: ScriptedModel) -> None:
    agent = make_agent(model)
    guardrail(agent, no_secrets, on_reject="remove")
    model.push(reply("Hi."))
    await agent.user_message("hello")

    with pytest.raises(GuardrailRejected) as caught:
        await agent.user_message("sk-abc")

    assert caught.value.refused == user("sk-abc")
    assert agent.state.messages == [user("hello"), {"role": "assistant", "content": "Hi."}]
    model.push(reply("Again."))
    assert (await agent.user_message("still there?")).outcome == "finished"
    assert model.requests[1]["messages"][-1] == user("still there?")


async def test_a_guard_that_raises_or_answers_nonsense_fails_closed(
        model: ScriptedModel) -> None:
    def broken(text: str) -> None:
        int(text)  # raises, quoting the message

    agent = make_agent(model)
    rails = guardrail(agent, broken)
    with pytest.raises(GuardrailRejected) as raised:
        await agent.user_message("my key is opaque-7Q2xL9pZ4mN8")
    rails.remove()
    guardrail(agent, lambda text: {"ok": True})  # type: ignore[arg-type, return-value]
    with pytest.raises(GuardrailRejected) as nonsense:
        await agent.user_message("hi")

    line = broken.__code__.co_firstlineno + 1
    assert raised.value.reason == (
        f"the guard raised ValueError in broken (test_guardrails.py, line {line})")
    # The guard's error quotes the message: it is kept as .error, neither chained nor shown.
    assert isinstance(raised.value.error, ValueError)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    shown = "".join(traceback.format_exception(raised.value))
    assert "The above exception" not in shown and "During handling" not in shown
    said = "".join(traceback.format_exception_only(raised.value))
    assert "opaque-7Q2xL9pZ4mN8" not in said and "my key is" not in said
    assert "opaque" not in json.dumps(agent.state.messages[-1][META])
    assert nonsense.value.guard == "guard #1"
    assert nonsense.value.reason.startswith("the guard returned a dict; a guard returns None")
    assert model.requests == []
    assert agent.status == "idle"


async def test_replies_are_checked_before_they_are_stored_and_their_calls_never_run(
        model: ScriptedModel) -> None:
    ran: list[int] = []

    class Amount(pydantic.BaseModel):
        amount: int

    pay = tool(name="pay", description="Pay.", schema=Amount,
               handler=lambda p: ran.append(p.amount))

    def no_promises(text: str) -> str | None:
        return "promises a refund" if "refund" in text else None

    agent = make_agent(model, pay)
    guardrail(agent, no_promises, check_replies=True)
    model.push(tool_calls(call("pay", {"amount": 5}, id="c1"), content="Sure, a refund!"))

    with pytest.raises(GuardrailRejected) as caught:
        await agent.user_message("I want my money back")

    assert caught.value.role == "assistant"
    assert caught.value.refused["tool_calls"][0]["id"] == "c1"
    assert ran == []
    messages = agent.state.messages
    assert messages == [user("I want my money back"),
                        rejected("Sure, a refund!", "no_promises", "promises a refund",
                                 "assistant")]
    assert_valid_history(messages)
    model.push(reply("Let me check with a person."))
    state = await agent.user_message("well?")
    assert model.requests[1]["messages"] == [user("I want my money back"), user("well?")]
    assert state.messages[-1] == {"role": "assistant", "content": "Let me check with a person."}


async def test_a_reply_that_passes_goes_on_with_its_tool_calls(model: ScriptedModel) -> None:
    class Amount(pydantic.BaseModel):
        amount: int

    pay = tool(name="pay", description="Pay.", schema=Amount, handler=lambda p: p.amount * 2)
    agent = make_agent(model, pay)
    guardrail(agent, no_secrets, check_replies=True)
    model.push(tool_calls(call("pay", {"amount": 5}, id="c1")), reply("Paid 10."))

    state = await agent.user_message("pay 5")

    assert state.messages == [user("pay 5"), asked(("c1", "pay", {"amount": 5})),
                              answered("c1", "10"), {"role": "assistant", "content": "Paid 10."}]


async def test_remove_takes_the_guards_off_the_agent_and_its_forks(
        model: ScriptedModel) -> None:
    agent = make_agent(model)
    rails = guardrail(agent, no_secrets, check_replies=True)
    fork = agent.fork("trial")
    with pytest.raises(GuardrailRejected):
        await fork.user_message("sk-1")  # a fork keeps its parent's guards

    rails.remove()
    model.push(reply("ok"), reply("ok"))
    await agent.user_message("sk-2")
    await fork.user_message("sk-3")

    assert [m["messages"][-1] for m in model.requests] == [user("sk-2"), user("sk-3")]
    assert "removed" in repr(rails)
    assert isinstance(rails, Guardrail)


async def test_content_parts_are_checked_by_their_text(model: ScriptedModel) -> None:
    agent = make_agent(model)
    guardrail(agent, no_secrets, on_reject="remove")
    parts = [{"type": "text", "text": "look"}, {"type": "text", "text": "sk-999"}]

    with pytest.raises(GuardrailRejected):
        await agent.user_message(parts)

    assert agent.state.messages == []


def test_bad_arguments_are_one_clear_line() -> None:
    fragola = Fragola.scripted()
    agent = fragola.agent(name="a")
    with pytest.raises(BadUsage, match="at least one guard"):
        guardrail(agent)
    with pytest.raises(BadUsage, match="guard #2 must be a function"):
        guardrail(agent, no_secrets, "no_secrets")  # type: ignore[arg-type]
    with pytest.raises(BadUsage, match="on_reject must be 'annotate' or 'remove'"):
        guardrail(agent, no_secrets, on_reject="drop")  # type: ignore[arg-type]
    with pytest.raises(BadUsage, match="takes an Agent first"):
        guardrail(no_secrets, no_secrets)  # type: ignore[arg-type]
    assert not agent.deps.listeners.has("user_message")  # nothing half-installed


async def test_a_saved_session_keeps_the_mark_and_the_loaded_agent_does_not_send_it(
        model: ScriptedModel, tmp_path: Any) -> None:
    from fragola_nb import load_session, save_session

    agent = make_agent(model, name="kept")
    guardrail(agent, no_secrets)
    with pytest.raises(GuardrailRejected):
        await agent.user_message("sk-1")
    save_session(tmp_path / "s.json", agent, listeners=False)

    session = load_session(tmp_path / "s.json", make_agent(model).fragola)
    again = session["kept"]
    model.push(reply("hello"))
    state = await again.user_message("hi")

    assert state.messages[0] == rejected("sk-1", "no_secrets", "it holds an API key")
    assert model.requests[0]["messages"] == [user("hi")]


def test_a_marked_message_that_would_break_the_request_is_refused() -> None:
    agent = Fragola.scripted().agent(name="a")
    call_message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        "fragola_nb": {"rejected": {"guard": "g", "reason": "r"}}}
    with pytest.raises(BadUsage, match=r"messages\[0\] is marked 'fragola_nb' \(never sent\)"):
        agent.reset([call_message, answered("c1", "x")])
    assert agent.state.messages == []


async def test_step_after_only_rejected_messages_is_a_usage_error_not_an_empty_request(
        model: ScriptedModel) -> None:
    agent = make_agent(model)
    guardrail(agent, no_secrets)
    with pytest.raises(GuardrailRejected):
        await agent.user_message("sk-1")

    with pytest.raises(BadUsage, match="has no message to send: use user_message"):
        await agent.step()

    assert model.requests == [] and agent.status == "idle"


async def test_agent_json_is_guarded_too(model: ScriptedModel) -> None:
    agent = make_agent(model)
    guardrail(agent, no_secrets, on_reject="remove")
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    with pytest.raises(GuardrailRejected, match="rejected by no_secrets"):
        await agent.json("count the keys in sk-1", schema)

    assert model.requests == [] and agent.state.messages == []
    model.push(reply('{"n": 2}'))
    assert (await agent.json("count to two", schema)).data == {"n": 2}


async def test_a_batch_runs_each_input_through_the_guards(model: ScriptedModel) -> None:
    agent = make_agent(model)
    guardrail(agent, no_secrets)
    model.push(reply("fine"))

    result = await agent.batch(["hello", "sk-1"], concurrency=1, progress=False)

    assert result.answers[0] == "fine" and result.failed == 1
    assert "rejected by no_secrets: it holds an API key" in str(result[1].error)
    assert len(model.requests) == 1 and agent.state.messages == []


@pytest.mark.parametrize("on_reject", ["annotate", "remove"])
async def test_stop_sync_while_a_guard_decides_never_lets_the_unchecked_message_be_sent(
        model: ScriptedModel, on_reject: Any) -> None:
    deciding = asyncio.Event()

    async def slow_classifier(text: str) -> None:
        deciding.set()
        await asyncio.Event().wait()  # a classifier model that has not answered yet

    agent = make_agent(model)
    rails = guardrail(agent, slow_classifier, on_reject=on_reject)
    task = asyncio.create_task(agent.user_message("my password is hunter2-unchecked"))
    await asyncio.wait_for(deciding.wait(), 5)
    agent.stop_sync()
    state = await asyncio.wait_for(task, 5)

    assert state.status == "idle"
    assert state.outcome == "stopped"
    if on_reject == "annotate":
        assert state.messages == [rejected("my password is hunter2-unchecked", "guardrail",
                                           "stopped before the guards passed it")]
    else:
        assert state.messages == []
    rails.remove()
    model.push(reply("hi"))
    await agent.user_message("hello")
    assert model.requests[0]["messages"] == [user("hello")]
    assert "hunter2" not in json.dumps(model.requests)


@pytest.mark.parametrize("on_reject", ["annotate", "remove"])
async def test_stop_sync_in_a_listener_added_before_the_guards_never_lets_the_message_be_sent(
        model: ScriptedModel, on_reject: Any) -> None:
    """The guards have not started when the stop lands: the message no guard passed is kept
    marked (or nothing), and no later turn sends it."""
    waiting = asyncio.Event()

    async def enrich(event: Any) -> None:  # a listener put on before guardrail()
        waiting.set()
        await asyncio.Event().wait()

    agent = make_agent(model)
    agent.on_user_message(enrich)
    rails = guardrail(agent, no_secrets, on_reject=on_reject)
    task = asyncio.create_task(agent.user_message("my key is sk-unchecked-123456"))
    await asyncio.wait_for(waiting.wait(), 5)
    agent.stop_sync()
    state = await asyncio.wait_for(task, 5)

    assert state.status == "idle" and state.outcome == "stopped"
    if on_reject == "annotate":
        assert state.messages == [rejected("my key is [redacted]", "guardrail",
                                           "stopped before the guards passed it")]
    else:
        assert state.messages == []
    agent.off("user_message", enrich)
    rails.remove()
    model.push(reply("hi"))
    await agent.user_message("hello")
    assert model.requests[0]["messages"] == [user("hello")]
    assert "unchecked" not in json.dumps(model.requests)


async def test_a_stop_after_the_guards_passed_keeps_the_message_as_it_was(
        model: ScriptedModel) -> None:
    waiting = asyncio.Event()

    async def after(event: Any) -> None:  # put on after guardrail(): the guards passed it
        waiting.set()
        await asyncio.Event().wait()

    agent = make_agent(model)
    guardrail(agent, no_secrets)
    agent.on_user_message(after)
    task = asyncio.create_task(agent.user_message("a fine question"))
    await asyncio.wait_for(waiting.wait(), 5)
    agent.stop_sync()
    state = await asyncio.wait_for(task, 5)
    assert state.messages == [user("a fine question")]
