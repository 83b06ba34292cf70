"""A scripted, OpenAI-compatible Chat Completions endpoint for tests and offline demos.

It is a real HTTP server on loopback, so the real ``openai`` client talks to it over real
HTTP, JSON and SSE. Each request consumes the next script item::

    from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls

    with ScriptedModel([tool_calls(call("add", {"a": 1, "b": 2})), reply("3")]) as model:
        client = model.client()  # openai.AsyncOpenAI, max_retries=0
        ...

``ScriptedModel(brain=demo_brain)`` answers deterministically once the script runs out (its
rules: ``fragola_nb.models.scripted.brain``). ``Fragola.scripted().script(agent, [...])`` gives one
agent its own rewindable script (an :class:`AgentScript`) while the others keep the brain.
"""

from __future__ import annotations

from fragola_nb.models.scripted.brain import demo_brain
from fragola_nb.models.scripted.items import (
    Drop,
    Fail,
    Hang,
    Item,
    Raw,
    Reply,
    ScriptEntry,
    ToolCall,
    ToolCalls,
    call,
    drop,
    fail,
    hang,
    raw,
    reply,
    tool_calls,
)
from fragola_nb.models.scripted.scripts import SCRIPT_HEADER, AgentScript
from fragola_nb.models.scripted.server import ScriptedModel

__all__ = [
    "SCRIPT_HEADER",
    "AgentScript",
    "Drop",
    "Fail",
    "Hang",
    "Item",
    "Raw",
    "Reply",
    "ScriptEntry",
    "ScriptedModel",
    "ToolCall",
    "ToolCalls",
    "call",
    "demo_brain",
    "drop",
    "fail",
    "hang",
    "raw",
    "reply",
    "tool_calls",
]
