"""What each request sends of the history: read anew where the history was replaced (an edit,
a reset, a restore, a fork), and only what was added since where it only grew.

A request reuses what the last one sent of the same history (``Conversation.request_messages``):
these tests change the history in each way there is between two requests, and check that the
request sends it as it is now.
"""

from __future__ import annotations

from typing import Any

from support.helpers import answered, asked, make_agent, user

from fragola_nb import tool
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def last_sent(model: ScriptedModel) -> list[dict[str, Any]]:
    return model.requests[-1]["messages"]


async def test_each_step_sends_the_history_as_it_grew(model: ScriptedModel) -> None:
    agent = make_agent(model, add, instructions="Be brief.")
    model.push(tool_calls(call("add", {"a": 1, "b": 2}, id="c1")),
               tool_calls(call("add", {"a": 3, "b": 4}, id="c2")), reply("3 and 7"))

    state = await agent.user_message("add")

    system = {"role": "system", "content": "Be brief."}
    first, second = asked(("c1", "add", {"a": 1, "b": 2})), asked(("c2", "add", {"a": 3, "b": 4}))
    assert [request["messages"] for request in model.requests] == [
        [system, user("add")],
        [system, user("add"), first, answered("c1", "3")],
        [system, user("add"), first, answered("c1", "3"), second, answered("c2", "7")],
    ]
    assert state.messages[-1] == {"role": "assistant", "content": "3 and 7"}


async def test_an_edit_between_two_requests_is_sent(model: ScriptedModel) -> None:
    agent = make_agent(model)
    model.push(reply("hi"), reply("again"))
    await agent.user_message("hello")

    agent.edit(0, content="good morning")  # same length, message 0 replaced
    await agent.user_message("and now?")

    assert last_sent(model) == [user("good morning"), {"role": "assistant", "content": "hi"},
                                user("and now?")]


async def test_a_reset_and_a_restore_between_requests_are_sent(model: ScriptedModel) -> None:
    agent = make_agent(model)
    model.push(reply("one"), reply("two"), reply("three"))
    await agent.user_message("first")
    before = agent.snapshot()

    agent.reset([user("elsewhere"), {"role": "assistant", "content": "so?"}])
    await agent.user_message("second")
    assert last_sent(model) == [user("elsewhere"), {"role": "assistant", "content": "so?"},
                                user("second")]

    agent.restore(before)  # as long as the history the reset replaced, with other messages
    await agent.user_message("third")
    assert last_sent(model) == [user("first"), {"role": "assistant", "content": "one"},
                                user("third")]


async def test_a_fork_and_its_parent_each_send_their_own_history(model: ScriptedModel) -> None:
    agent = make_agent(model)
    model.push(reply("one"), reply("parent"), reply("fork"))
    await agent.user_message("start")
    fork = agent.fork("other", at=1)

    await agent.user_message("on the parent")
    assert last_sent(model) == [user("start"), {"role": "assistant", "content": "one"},
                                user("on the parent")]
    await fork.user_message("on the fork")
    assert last_sent(model) == [user("start"), user("on the fork")]
