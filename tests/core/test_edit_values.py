"""What ``agent.edit`` and a user message may put in a history is checked before anything
changes: a tool result JSON cannot hold, content parts the role may not send, and a case's
``{name:spec}`` that its value cannot take are each one ``BadUsage``; the history is left as it
was and the next call works (its request checked against the official schema by the
``model`` fixture)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from support.helpers import answered, asked, make_agent, user

from fragola_nb import BadUsage
from fragola_nb.models.scripted import ScriptedModel, reply


def _history() -> list[dict[str, Any]]:
    return [user("Find x."), asked(("c1", "lookup", {"q": "x"})), answered("c1", "x found"),
            {"role": "assistant", "content": "Found."}]


def _circular() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


@pytest.mark.parametrize(("index", "kwargs", "why"), [
    (2, {"result": _circular()}, "JSON can hold .*Circular reference"),
    (2, {"result": math.nan}, "JSON can hold"),
    (2, {"result": {"inf": [math.inf]}}, "JSON can hold"),
    (2, {"result": {(1, 2): "tuple key"}}, "JSON can hold .*keys must be"),
    (2, {"result": _Unprintable()}, "JSON can hold .*RuntimeError: no text"),
    (2, {"result": 10 ** 5000}, "JSON can hold"),
    (0, {"content": [{"type": "bogus"}]}, "part 0 has the type 'bogus'; a user message"),
    (0, {"content": [{"type": "text"}]}, "part 0 of type 'text' needs a 'text' field"),
    (0, {"content": [{"type": "image_url", "image_url": {}}]}, "image_url.url"),
    (0, {"content": [{"type": "text", "text": "ok"}, "loose text"]}, "part 1 is a str"),
    (3, {"content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
     "an assistant message: part 0 has the type 'image_url'"),
])
async def test_an_edit_the_api_would_refuse_is_one_bad_usage_and_changes_nothing(
        model: ScriptedModel, index: int, kwargs: dict[str, Any], why: str) -> None:
    agent = make_agent(model, messages=_history())
    history = agent.conversation.history

    with pytest.raises(BadUsage, match=why):
        agent.edit(index, **kwargs)

    assert agent.conversation.history is history and agent.state.messages == _history()
    model.push(reply("still fine"))
    state = await agent.user_message("and now?")
    assert state.messages[-1] == {"role": "assistant", "content": "still fine"}


async def test_edits_the_api_takes_still_work(model: ScriptedModel) -> None:
    agent = make_agent(model, messages=_history())
    agent.edit(2, result={"x": [1, 2.5, None, True], "set": {3}})
    agent.edit(0, content=[{"type": "text", "text": "Find y."},
                           {"type": "image_url", "image_url": {"url": "https://x/y.png"}}])
    agent.edit(3, content=[{"type": "text", "text": "Found y."}])

    model.push(reply("ok"))
    await agent.user_message("go on")

    sent = model.requests[-1]["messages"]
    assert '"set": [3]' in sent[2]["content"] and sent[0]["content"][-1]["type"] == "image_url"


@pytest.mark.parametrize("content", [[{"type": "bogus"}], [{"type": "text", "text": 5}],
                                     [{"type": "input_audio", "input_audio": {"data": "x"}}]])
async def test_a_user_message_with_parts_a_user_cannot_send_is_refused_before_it_is_sent(
        model: ScriptedModel, content: list[dict[str, Any]]) -> None:
    agent = make_agent(model, messages=_history())

    with pytest.raises(BadUsage, match=r"content must be .*\(part 0 "):
        await agent.user_message(content)
    with pytest.raises(BadUsage, match="part 0"):
        agent.reset([user("x"), {"role": "assistant", "content": content}])

    assert agent.state.messages == _history() and model.requests == []


@pytest.mark.parametrize(("case", "why"), [
    ({"input": "Sum {x:>5}", "x": [1, 2]}, r"case 0: .*\{x:>5\} cannot be filled with the "
                                           r"case's list value: TypeError"),
    ({"input": "Price {x:.2f}", "x": "ten"}, r"\{x:.2f\} cannot be filled .*str value"),
    ({"input": "Odd {x:{y}}", "x": 1, "y": 2}, r"\{x:\{y\}\} cannot be filled"),
    ({"input": "Conv {x!z}", "x": 1}, r"conversion !z: write !r, !s or !a"),
    ({"input": "Bad {x}", "x": _Unprintable()}, r"\{x\} cannot be filled .*no text"),
])
async def test_a_case_whose_value_cannot_take_its_format_is_one_bad_usage_before_a_send(
        model: ScriptedModel, case: dict[str, Any], why: str) -> None:
    agent = make_agent(model)

    with pytest.raises(BadUsage, match=why):
        await agent.evaluate([case], progress=False)

    assert model.requests == [] and agent.state.messages == []
    model.push(reply("ok"))
    done = await agent.evaluate([{"input": "Sum {x:>5}!r{y!r}", "x": "ab", "y": [1]}],
                                progress=False)
    assert done[0].input == "Sum    ab!r[1]"
