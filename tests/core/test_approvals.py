"""Dynamic tools and human approval: pausing, deciding (approve/reject/inject), resuming."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
from support.helpers import answered, asked, make_agent, user

from fragola_nb import (
    Agent,
    AgentContext,
    AgentState,
    BadUsage,
    Decision,
    InvalidArguments,
    PendingCall,
    Tool,
    tool,
)
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls

USER = user("go")


class RemoteArgs(pydantic.BaseModel):
    id: str


class Transfer(pydantic.BaseModel):
    to: str
    amount: int


class Ledger:
    """A transfer tool that records every run of its handler."""

    def __init__(self) -> None:
        self.runs: list[Transfer] = []

    def handler(self, params: Transfer) -> str:
        self.runs.append(params)
        return f"sent {params.amount} to {params.to}"

    def tool(self, require_approval: Any = True) -> Tool:
        return tool(name="transfer", description="Send money.", schema=Transfer,
                    handler=self.handler, require_approval=require_approval)


def remote_tool() -> Tool:
    return tool(name="remoteAction", description="Runs remotely.", schema=RemoteArgs,
                handler="dynamic")


async def paused_on_a_transfer(model: ScriptedModel, to: str = "bob", amount: int = 5
                               ) -> tuple[Agent, Ledger, AgentState]:
    """An agent paused on one call ``c1`` that needs approval: a transfer of ``amount`` to
    ``to``. Returns the agent, the ledger of its transfer tool, and the paused state."""
    ledger = Ledger()
    agent = make_agent(model, ledger.tool())
    model.push(tool_calls(call("transfer", {"to": to, "amount": amount}, id="c1")))
    return agent, ledger, await agent.user_message("go")


# -- on_before_tool_call injection --------------------------------------------------------


async def test_injected_response_answers_a_dynamic_tool_without_pausing(
    model: ScriptedModel,
) -> None:
    agent = make_agent(model, remote_tool())
    seen_params: list[Any] = []

    @agent.on_before_tool_call
    async def run_remotely(event: Any) -> Any:
        if event.config.tool.name == "remoteAction":
            seen_params.append(event.config.params)
            event.config.inject_response = json.dumps({"remote": event.config.params.id})
        return event.config

    model.push(tool_calls(call("remoteAction", {"id": "x1"}, id="c1")), reply("done"))

    state = await agent.user_message("go")

    assert seen_params == [RemoteArgs(id="x1")]
    assert state.outcome == "finished"
    assert state.status == "idle"
    assert state.messages == [
        USER,
        asked(("c1", "remoteAction", {"id": "x1"})),
        answered("c1", '{"remote": "x1"}'),
        {"role": "assistant", "content": "done"},
    ]


async def test_injected_response_skips_a_local_handler(model: ScriptedModel) -> None:
    ledger = Ledger()
    agent = make_agent(model, ledger.tool(require_approval=False))

    def fake(event: Any) -> None:
        event.config.inject_response = "pretend it was sent"  # changed in place, None returned

    agent.on_before_tool_call(fake)
    model.push(tool_calls(call("transfer", {"to": "bob", "amount": 5}, id="c1")), reply("ok"))

    state = await agent.user_message("go")

    assert ledger.runs == []
    assert state.messages[2] == answered("c1", "pretend it was sent")


# -- dynamic tools ------------------------------------------------------------------------


async def test_dynamic_tool_without_injection_pauses_until_inject(model: ScriptedModel) -> None:
    agent = make_agent(model, remote_tool())
    model.push(tool_calls(call("remoteAction", {"id": "x1"}, id="c1")))

    paused = await agent.user_message("go")

    assert paused.status == "waiting"
    assert agent.status == "waiting"
    assert paused.outcome == "paused"
    assert paused.pending == (
        PendingCall(id="c1", name="remoteAction", params=RemoteArgs(id="x1"),
                    arguments={"id": "x1"}, reason="dynamic"),
    )
    assert paused.messages == [USER, asked(("c1", "remoteAction", {"id": "x1"}))]
    assert len(model.requests) == 1

    agent.inject("c1", {"status": "ok"})
    assert agent.state.pending[0].decision == Decision("inject", text={"status": "ok"})
    model.push(reply("remote done"))
    resumed = await agent.step()

    assert resumed.status == "idle"
    assert resumed.outcome == "finished"
    assert resumed.pending == ()
    assert resumed.messages == [
        USER,
        asked(("c1", "remoteAction", {"id": "x1"})),
        answered("c1", '{"status": "ok"}'),
        {"role": "assistant", "content": "remote done"},
    ]
    assert model.requests[1]["messages"] == resumed.messages[:3]


async def test_dynamic_tool_cannot_be_approved(model: ScriptedModel) -> None:
    agent = make_agent(model, remote_tool())
    model.push(tool_calls(call("remoteAction", {"id": "x1"}, id="c1")))
    await agent.user_message("go")

    with pytest.raises(BadUsage, match="inject"):
        agent.approve("c1")

    assert agent.state.pending[0].decision is None


async def test_dynamic_tool_with_invalid_arguments_does_not_pause(model: ScriptedModel) -> None:
    agent = make_agent(model, remote_tool())
    model.push(tool_calls(call("remoteAction", {"id": 3}, id="c1")), reply("sorry"))

    state = await agent.user_message("go")

    assert state.outcome == "finished"
    assert state.messages[2]["content"].startswith("Error")
    assert "id" in state.messages[2]["content"]


# -- approval -----------------------------------------------------------------------------


async def test_require_approval_pauses_before_the_handler(model: ScriptedModel) -> None:
    agent, ledger, paused = await paused_on_a_transfer(model)

    assert ledger.runs == []
    assert paused.status == "waiting"
    assert paused.outcome == "paused"
    assert paused.pending == (
        PendingCall(id="c1", name="transfer", params=Transfer(to="bob", amount=5),
                    arguments={"to": "bob", "amount": 5}, reason="approval"),
    )

    agent.approve("c1")
    assert ledger.runs == []  # deciding does not run anything; step() does
    model.push(reply("sent"))
    resumed = await agent.step()

    assert ledger.runs == [Transfer(to="bob", amount=5)]
    assert resumed.outcome == "finished"
    assert resumed.status == "idle"
    assert resumed.messages == [
        USER,
        asked(("c1", "transfer", {"to": "bob", "amount": 5})),
        answered("c1", "sent 5 to bob"),
        {"role": "assistant", "content": "sent"},
    ]


async def test_approval_predicate_decides_per_call(model: ScriptedModel) -> None:
    ledger = Ledger()
    asked_rule: list[tuple[Any, Any]] = []

    def large(params: Transfer, context: AgentContext) -> bool:
        asked_rule.append((params, context))
        return params.amount > 100

    agent = make_agent(model, ledger.tool(require_approval=large))
    model.push(tool_calls(call("transfer", {"to": "ann", "amount": 500}, id="big"),
                          call("transfer", {"to": "bob", "amount": 5}, id="small")))

    paused = await agent.user_message("go")

    assert asked_rule == [(Transfer(to="ann", amount=500), agent.context),
                          (Transfer(to="bob", amount=5), agent.context)]
    # The call that needs no approval ran at once; only the large one waits.
    assert ledger.runs == [Transfer(to="bob", amount=5)]
    assert paused.status == "waiting"
    assert [(p.id, p.reason) for p in paused.pending] == [("big", "approval")]
    assert paused.messages[2:] == [answered("small", "sent 5 to bob")]

    agent.approve("big")
    model.push(reply("both sent"))
    resumed = await agent.step()

    assert ledger.runs == [Transfer(to="bob", amount=5), Transfer(to="ann", amount=500)]
    assert resumed.messages[2:] == [
        answered("small", "sent 5 to bob"),
        answered("big", "sent 500 to ann"),
        {"role": "assistant", "content": "both sent"},
    ]


async def test_approval_predicate_that_raises_is_reported_to_the_model(
    model: ScriptedModel,
) -> None:
    ledger = Ledger()

    def broken_rule(params: Transfer, context: AgentContext) -> bool:
        raise LookupError("no limits configured")

    agent = make_agent(model, ledger.tool(require_approval=broken_rule))
    model.push(tool_calls(call("transfer", {"to": "bob", "amount": 5}, id="c1")), reply("hm"))

    state = await agent.user_message("go")

    assert ledger.runs == []
    assert state.outcome == "finished"
    assert state.messages[2]["content"].startswith("Error")
    assert "no limits configured" in state.messages[2]["content"]


async def test_approve_with_edited_arguments(model: ScriptedModel) -> None:
    agent, ledger, _ = await paused_on_a_transfer(model, amount=5000)

    agent.approve("c1", params={"to": "bob", "amount": "50"})
    model.push(reply("sent 50"))
    state = await agent.step()

    assert ledger.runs == [Transfer(to="bob", amount=50)]
    assert isinstance(ledger.runs[0], Transfer)
    # The model is told its arguments were changed, so the history stays an exact record.
    assert state.messages[2] == answered(
        "c1", '(The user edited the arguments before this call ran: {"to": "bob", "amount": 50})'
        "\nsent 50 to bob")
    # What the model asked for stays in the history as it asked it.
    assert state.messages[1] == asked(("c1", "transfer", {"to": "bob", "amount": 5000}))


@pytest.mark.parametrize(
    "edited",
    [{"to": "bob", "amount": "lots"}, {"amount": 5}, {"to": "bob", "amount": None}],
)
async def test_invalid_edited_arguments_raise_and_change_nothing(
    model: ScriptedModel, edited: dict[str, Any]
) -> None:
    agent, ledger, before = await paused_on_a_transfer(model)

    with pytest.raises(InvalidArguments) as raised:
        agent.approve("c1", params=edited)

    assert isinstance(raised.value, BadUsage)
    assert "transfer" in str(raised.value)
    after = agent.state
    assert after.status == "waiting"
    assert after.pending == before.pending
    assert after.pending[0].decision is None
    assert after.messages == before.messages

    # Still decidable, and stepping without a decision runs nothing.
    assert (await agent.step()).status == "waiting"
    assert ledger.runs == []
    agent.approve("c1")
    model.push(reply("ok"))
    await agent.step()
    assert ledger.runs == [Transfer(to="bob", amount=5)]


async def test_edited_arguments_must_be_a_dict_or_the_tools_own_model(
    model: ScriptedModel,
) -> None:
    agent, ledger, _ = await paused_on_a_transfer(model)

    for wrong in ("amount=6", ["bob", 6], RemoteArgs(id="bob")):
        with pytest.raises(InvalidArguments, match="transfer"):
            agent.approve("c1", params=wrong)
        assert agent.state.pending[0].decision is None

    agent.approve("c1", params=Transfer(to="carol", amount=6))
    model.push(reply("ok"))
    await agent.step()

    assert ledger.runs == [Transfer(to="carol", amount=6)]


async def test_edited_arguments_follow_the_tool_schema_kind(model: ScriptedModel) -> None:
    received: list[Any] = []

    @tool(require_approval=True)
    def book(city: str, nights: int = 1) -> str:
        """Book a hotel."""
        received.append((city, nights))
        return f"{nights} nights in {city}"

    strict = tool(name="strict", description="", require_approval=True, validate=True,
                  schema={"type": "object", "properties": {"n": {"type": "integer"}}},
                  handler=lambda params: received.append(params) or "strict ran")
    loose = tool(name="loose", description="", require_approval=True,
                 schema={"type": "object", "properties": {"n": {"type": "integer"}}},
                 handler=lambda params: received.append(params) or "loose ran")
    agent = make_agent(model, book, strict, loose)
    model.push(tool_calls(call("book", {"city": "Rome"}, id="c1"),
                          call("strict", {"n": 1}, id="c2"),
                          call("loose", {"n": 1}, id="c3")))
    await agent.user_message("go")

    with pytest.raises(InvalidArguments, match="nights"):
        agent.approve("c1", params={"city": "Oslo", "nights": "many"})
    with pytest.raises(InvalidArguments):
        agent.approve("c2", params={"n": "two"})
    agent.approve("c1", params={"city": "Oslo", "nights": "3"})
    agent.approve("c2", params={"n": 2})
    agent.approve("c3", params={"n": "not checked"})
    model.push(reply("booked"))
    state = await agent.step()

    assert received == [("Oslo", 3), {"n": 2}, {"n": "not checked"}]
    edited = "(The user edited the arguments before this call ran: {}"
    assert state.messages[2:5] == [
        answered("c1", edited.format('{"city": "Oslo", "nights": 3})\n3 nights in Oslo')),
        answered("c2", edited.format('{"n": 2})\nstrict ran')),
        answered("c3", edited.format('{"n": "not checked"})\nloose ran')),
    ]


async def test_reject_tells_the_model_why(model: ScriptedModel) -> None:
    agent, ledger, _ = await paused_on_a_transfer(model, to="eve", amount=9)

    agent.reject("c1", "Eve is not a known payee")
    model.push(reply("I did not send it."))
    state = await agent.step()

    assert ledger.runs == []
    rejection = state.messages[2]
    assert rejection["role"] == "tool"
    assert rejection["tool_call_id"] == "c1"
    assert "Eve is not a known payee" in rejection["content"]
    assert "reject" in rejection["content"]
    assert model.requests[1]["messages"][-1] == rejection
    assert state.outcome == "finished"


async def test_inject_answers_an_approval_call_by_hand(model: ScriptedModel) -> None:
    agent, ledger, _ = await paused_on_a_transfer(model)

    agent.inject("c1", "Sent by hand from the bank app.")
    model.push(reply("ok"))
    state = await agent.step()

    assert ledger.runs == []
    assert state.messages[2] == answered("c1", "Sent by hand from the bank app.")


async def test_several_pending_calls_are_decided_independently(model: ScriptedModel) -> None:
    ledger = Ledger()
    lookups: list[str] = []
    lookup = tool(name="lookup", description="", handler=lambda: lookups.append("ran") or "ok")
    agent = make_agent(model, ledger.tool(), lookup)
    model.push(tool_calls(
        call("transfer", {"to": "a", "amount": 1}, id="ca"),
        call("transfer", {"to": "b", "amount": 2}, id="cb"),
        call("lookup", {}, id="cl"),
        call("transfer", {"to": "c", "amount": 3}, id="cc"),
    ))

    first = await agent.user_message("go")

    assert lookups == ["ran"]
    assert [p.id for p in first.pending] == ["ca", "cb", "cc"]
    assert first.messages[2:] == [answered("cl", "ok")]

    agent.approve("ca")
    second = await agent.step()

    # Only the decided call ran; the others still wait, and the model was not called.
    assert ledger.runs == [Transfer(to="a", amount=1)]
    assert second.status == "waiting"
    assert [(p.id, p.decision) for p in second.pending] == [("cb", None), ("cc", None)]
    assert len(model.requests) == 1

    agent.reject("cb", "too small to bother")
    agent.inject("cc", {"sent": False})
    model.push(reply("one sent, one rejected, one by hand"))
    final = await agent.step()

    assert ledger.runs == [Transfer(to="a", amount=1)]
    assert lookups == ["ran"]
    assert final.status == "idle"
    assert final.pending == ()
    rejection = final.messages[4]
    assert "too small to bother" in rejection["content"]
    assert final.messages == [
        USER,
        asked(("ca", "transfer", {"to": "a", "amount": 1}),
              ("cb", "transfer", {"to": "b", "amount": 2}),
              ("cl", "lookup", {}),
              ("cc", "transfer", {"to": "c", "amount": 3})),
        answered("cl", "ok"),
        answered("ca", "sent 1 to a"),
        answered("cb", rejection["content"]),
        answered("cc", '{"sent": false}'),
        {"role": "assistant", "content": "one sent, one rejected, one by hand"},
    ]
    assert model.requests[1]["messages"] == final.messages[:-1]



async def test_a_call_approved_while_another_runs_runs_in_the_same_turn(
    model: ScriptedModel,
) -> None:
    """A person approves the waiting call while the next call of the same reply runs (a
    panel's button): the turn runs it too before it asks the model again."""
    ledger = Ledger()
    agent = make_agent(model, ledger.tool(),
                       tool(name="lookup", description="",
                            handler=lambda: agent.approve("ca") or "ok"))
    model.push(tool_calls(call("transfer", {"to": "a", "amount": 1}, id="ca"),
                          call("lookup", {}, id="cl")))
    model.push(reply("done"))

    state = await agent.user_message("go")

    assert ledger.runs == [Transfer(to="a", amount=1)]
    assert (state.status, state.outcome, state.pending) == ("idle", "finished", ())
    assert state.messages[2:] == [answered("cl", "ok"), answered("ca", "sent 1 to a"),
                                  {"role": "assistant", "content": "done"}]
    assert model.requests[1]["messages"] == state.messages[:-1]

async def test_deciding_an_unknown_or_decided_call_is_bad_usage(model: ScriptedModel) -> None:
    agent, ledger, _ = await paused_on_a_transfer(model)

    for decide in (agent.approve, agent.reject, lambda i: agent.inject(i, "x")):
        with pytest.raises(BadUsage, match="no-such-id"):
            decide("no-such-id")

    agent.approve("c1")
    for decide in (agent.approve, agent.reject, lambda i: agent.inject(i, "x")):
        with pytest.raises(BadUsage, match="already decided"):
            decide("c1")
    assert agent.state.pending[0].decision == Decision("approve")

    model.push(reply("ok"))
    await agent.step()
    with pytest.raises(BadUsage):
        agent.reject("c1", "too late")
    assert ledger.runs == [Transfer(to="bob", amount=5)]


async def test_user_message_while_waiting_is_bad_usage(model: ScriptedModel) -> None:
    agent, _, before = await paused_on_a_transfer(model)

    with pytest.raises(BadUsage, match="waiting"):
        await agent.user_message("never mind")

    assert agent.state.messages == before.messages
    assert agent.status == "waiting"
    assert len(model.requests) == 1


async def test_stop_while_waiting_cancels_pending_calls(model: ScriptedModel) -> None:
    ledger = Ledger()
    agent = make_agent(model, ledger.tool(), remote_tool())
    model.push(tool_calls(call("transfer", {"to": "bob", "amount": 5}, id="c1"),
                          call("remoteAction", {"id": "r"}, id="c2")))
    await agent.user_message("go")
    agent.approve("c1")  # decided but not yet run: stop() cancels it too

    agent.stop()

    state = agent.state
    assert ledger.runs == []
    assert state.status == "idle"
    assert state.outcome == "stopped"
    assert state.pending == ()
    assert [m["tool_call_id"] for m in state.messages[2:]] == ["c1", "c2"]
    assert all("ancelled" in m["content"] for m in state.messages[2:])

    model.push(reply("fresh start"))
    after = await agent.user_message("something else")

    assert after.outcome == "finished"
    assert model.requests[1]["messages"] == [*state.messages,
                                             {"role": "user", "content": "something else"}]


# -- forks --------------------------------------------------------------------------------


async def test_forks_of_a_paused_agent_never_run_an_undecided_call(
    model: ScriptedModel,
) -> None:
    agent, ledger, paused = await paused_on_a_transfer(model)

    fork = agent.fork("what-if")
    assert fork.status == "waiting"
    assert fork.state.pending == paused.pending

    still = await fork.step()
    assert still.status == "waiting"
    assert still.outcome == "paused"
    assert (await agent.step()).status == "waiting"
    assert ledger.runs == []
    assert len(model.requests) == 1

    fork.approve("c1")
    assert agent.state.pending[0].decision is None
    model.push(reply("sent in the fork"))
    done = await fork.step()

    assert ledger.runs == [Transfer(to="bob", amount=5)]
    assert done.status == "idle"
    assert done.messages[2:] == [answered("c1", "sent 5 to bob"),
                                 {"role": "assistant", "content": "sent in the fork"}]
    parent = agent.state
    assert parent.status == "waiting"
    assert parent.pending == paused.pending
    assert parent.pending[0].decision is None
    assert parent.messages == paused.messages

    # The parent decides on its own, differently.
    agent.reject("c1", "not in this branch")
    model.push(reply("not sent"))
    rejected = await agent.step()

    assert ledger.runs == [Transfer(to="bob", amount=5)]
    assert "not in this branch" in rejected.messages[2]["content"]
    assert fork.state.messages == done.messages


async def test_stopping_a_waiting_fork_leaves_the_parent_waiting(model: ScriptedModel) -> None:
    agent = make_agent(model, remote_tool())
    model.push(tool_calls(call("remoteAction", {"id": "x"}, id="c1")))
    paused = await agent.user_message("go")
    fork = agent.fork()

    fork.stop()

    assert fork.status == "idle"
    assert fork.state.pending == ()
    assert agent.status == "waiting"
    assert agent.state.pending == paused.pending
    assert agent.state.messages == paused.messages
