"""The world of the evaluation tests: a scripted model's ``brain`` that answers with its
instructions' mood and the question, ``eval_agent`` (an agent with a ``forecast`` tool and a
short history, on that brain), ``VARIANTS`` (calm and loud) and ``KEY``, the key ``leak``
answers with. Shared by tests/experiments/evaluate/test_evaluate.py and test_eval_noise.py.
"""

from __future__ import annotations

from typing import Any

from fragola_nb import Agent
from fragola_nb.models.scripted import Item, ScriptedModel, call, reply, tool_calls
from support.helpers import make_agent, user

KEY = "sk-proj-evalkey0123456789abc"


def system_text(request: dict[str, Any]) -> str:
    return " ".join(str(m["content"]) for m in request["messages"] if m["role"] == "system")


def last_user(request: dict[str, Any]) -> str:
    return str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


def brain(request: dict[str, Any]) -> Item:
    """Answers with its instructions' mood and the question; ``weather`` calls a tool; ``leak``
    answers with the API key; ``flaky`` passes every other time it is asked."""
    text, mood = last_user(request), system_text(request)
    if request["messages"][-1]["role"] == "tool":
        return reply(f"{mood}: it is sunny")
    if "weather" in text:
        return tool_calls(call("forecast", {"city": "Oslo"}))
    if "leak" in text:
        return reply(f"the key is {KEY}")
    if "flaky" in text:
        brain.asked = getattr(brain, "asked", 0) + 1  # type: ignore[attr-defined]
        return reply("right" if brain.asked % 2 else "wrong")  # type: ignore[attr-defined]
    return reply(f"{mood}: {text}")


def eval_agent(model: ScriptedModel, **options: Any) -> Agent:
    from fragola_nb import tool

    model.brain = brain
    forecast = tool(name="forecast", description="", handler=lambda city: f"sun in {city}")
    options.setdefault("instructions", "calm")
    return make_agent(model, forecast, name="ev", messages=[user("hi"), {
        "role": "assistant", "content": "hello"}], **options)


VARIANTS = {"calm": {"instructions": "calm"}, "loud": {"instructions": "LOUD"}}
