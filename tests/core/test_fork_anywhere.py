"""``agent.fork(at=...)`` and ``agent.edit``: branch from any message, change it, run on."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from support.helpers import answered, asked, assert_valid_history, make_agent, user

from fragola_nb import Agent, BadUsage, tool
from fragola_nb.base.checks import FACTS, edited_by_hand
from fragola_nb.models.scripted import call, hang, reply, tool_calls


def _lookup(q: str) -> str:
    """Look ``q`` up."""
    return f"{q} found"


lookup = tool(_lookup, name="lookup")


def _history() -> list[dict[str, Any]]:
    """0 user, 1 calls c1+c2, 2-3 their answers, 4 answer, 5 user, 6 answer."""
    return [
        user("Find x and y."),
        asked(("c1", "lookup", {"q": "x"}), ("c2", "lookup", {"q": "y"})),
        answered("c1", "x found"),
        answered("c2", "y found"),
        {"role": "assistant", "content": "Both found."},
        user("Thanks. Now z?"),
        {"role": "assistant", "content": "z is unknown."},
    ]


def test_fork_at_holds_the_messages_before_it_and_shares_them(model):
    agent = make_agent(model, lookup, messages=_history())
    parent = agent.state.messages

    early = agent.fork("early", at=5)
    late = agent.fork(at=-1)

    assert early.state.messages == parent[:5]
    assert late.state.messages == parent[:6]
    # Shared, not copied: the very same dicts, and the fork's history views its parent's.
    assert all(a is b for a, b in zip(early.state.messages, parent, strict=False))
    early_history = early.conversation.history
    assert early_history._base is agent.conversation.history and early_history._own == []
    assert (early.fork_at, early.fork_point, late.fork_at) == (5, 5, 6)
    assert agent.fork().fork_at is None and agent.fork(at=7).fork_at is None
    assert agent.state.messages == parent and len(parent) == 7


def test_fork_at_out_of_range_or_not_an_index_is_one_bad_usage(model):
    agent = make_agent(model, messages=[user("hi")])
    for at in (2, -2, "1", 1.0, True):
        with pytest.raises(BadUsage, match=r"\bat\b"):
            agent.fork(at=at)  # type: ignore[arg-type]
    assert agent.forks == ()
    assert agent.fork(at=0).state.messages == [] and agent.fork(at=-1).state.messages == []


@pytest.mark.parametrize("at", [2, 3])
def test_a_cut_inside_tool_answers_moves_back_and_says_so(model, at):
    agent = make_agent(model, lookup, messages=_history())

    with pytest.warns(UserWarning, match="inside the tool calls of messages\\[1\\]"):
        fork = agent.fork(at=at)

    assert fork.fork_at == 1
    assert fork.state.messages == _history()[:1]
    assert_valid_history(fork.state.messages)


def test_exact_refuses_a_cut_inside_tool_answers(model):
    agent = make_agent(model, lookup, messages=_history())
    with pytest.raises(BadUsage, match=r"messages\[1\].*at=1"):
        agent.fork(at=3, exact=True)
    assert agent.forks == ()
    # A clean cut is taken as asked, exact or not (after the last answer: 4).
    assert agent.fork(at=4, exact=True).fork_at == 4


async def test_fork_at_leaves_pending_calls_behind(model):
    gated = tool(_lookup, name="lookup", require_approval=True)
    agent = make_agent(model, gated, messages=[user("go")])
    model.push(tool_calls(call("lookup", {"q": "x"}, id="c9")))
    await agent.user_message("look x up")
    assert agent.status == "waiting"

    at_end, earlier = agent.fork(), agent.fork(at=1)

    assert [p.id for p in at_end.pending] == ["c9"] and at_end.status == "waiting"
    assert earlier.pending == () and earlier.status == "idle"
    assert earlier.state.messages == [user("go")]


async def _generating(model: Any) -> tuple[Agent, asyncio.Task[Any]]:
    """An agent on ``_history()`` whose turn "more" waits on the model (status "generating")."""
    agent = make_agent(model, messages=_history())
    model.push(hang())
    turn = asyncio.create_task(agent.user_message("more"))
    while agent.status != "generating":
        await asyncio.sleep(0.01)
    return agent, turn


async def test_fork_while_generating_is_refused_as_today(model):
    agent, turn = await _generating(model)
    with pytest.raises(BadUsage, match="generating"):
        agent.fork(at=1)
    agent.stop_sync()
    await turn


async def test_edit_a_tool_result_reaches_the_model_and_leaves_the_parent(model):
    agent = make_agent(model, lookup, messages=_history())
    before = agent.state.messages
    fork = agent.fork("what-if", at=4)

    fork.edit(3, result={"y": "not found"})

    edited = fork.state.messages[3]
    # Exactly the value given; that a person typed it is kept beside it, not in it.
    assert edited == {"role": "tool", "tool_call_id": "c2",
                      "content": json.dumps({"y": "not found"}), FACTS: {"edited": True}}
    assert edited_by_hand(edited) and not edited_by_hand(before[3])
    assert agent.state.messages == before and before[3] == answered("c2", "y found")
    assert fork.state.messages[2] is before[2]  # the others are still shared

    model.push(reply("y is missing."))
    state = await fork.step()

    sent = model.requests[-1]["messages"]
    # The model is sent the value as typed, and nothing of the facts beside it.
    assert sent[3] == {"role": "tool", "tool_call_id": "c2", "content": '{"y": "not found"}'}
    assert all(FACTS not in message for message in sent)
    assert state.messages[3] == edited
    assert state.messages[-1] == {"role": "assistant", "content": "y is missing."}
    assert_valid_history(state.messages)
    assert agent.state.messages == before


async def test_edit_a_user_text_then_run_on(model):
    agent = make_agent(model, lookup, messages=_history())
    sibling = agent.fork(at=6)
    fork = agent.fork(at=6)

    fork.edit(-1, content="Now w?")
    model.push(reply("w is 4."))
    await fork.step()

    assert model.requests[-1]["messages"][-1] == {"role": "user", "content": "Now w?"}
    assert fork.state.messages[5] == {"role": "user", "content": "Now w?",
                                      FACTS: {"edited": True}}
    assert sibling.state.messages[5] == user("Thanks. Now z?")
    assert agent.state.messages[5] == user("Thanks. Now z?")


def test_edit_on_the_parent_does_not_reach_forks_made_before(model):
    agent = make_agent(model, messages=_history())
    fork = agent.fork()
    agent.edit(0, content="Find w.")
    assert fork.state.messages[0] == user("Find x and y.")
    assert agent.state.messages[0]["content"] == "Find w."
    later = agent.fork(at=1)
    assert later.state.messages == [agent.state.messages[0]]


@pytest.mark.parametrize(("index", "kwargs", "why"), [
    (9, {"content": "x"}, "out of range"),
    (-8, {"content": "x"}, "out of range"),
    (2, {"content": "x"}, "is a tool message"),
    (0, {"result": "x"}, "not a tool message"),
    (0, {}, "one of content= .* or result="),
    (0, {"content": "x", "result": "y"}, "one of content="),
    (0, {"content": 5}, "content must be"),
])
def test_bad_edits_are_one_bad_usage_and_change_nothing(model, index, kwargs, why):
    agent = make_agent(model, lookup, messages=_history())
    history = agent.conversation.history
    with pytest.raises(BadUsage, match=why):
        agent.edit(index, **kwargs)
    assert agent.conversation.history is history and agent.state.messages == _history()


def test_system_messages_are_not_edited(model):
    agent = make_agent(model, messages=[{"role": "system", "content": "Be brief."}, user("hi")])
    with pytest.raises(BadUsage, match="system message"):
        agent.edit(0, content="Be long.")


async def test_edit_while_generating_is_refused(model):
    agent, turn = await _generating(model)
    with pytest.raises(BadUsage, match="generating"):
        agent.edit(0, content="changed")
    agent.stop_sync()
    await turn
    assert agent.state.messages[0] == user("Find x and y.")
