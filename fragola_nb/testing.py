"""Test doubles for programs written with fragola_nb: the scripted model and its items.

>>> from fragola_nb.testing import ScriptedModel, call, reply, tool_calls
>>> model = ScriptedModel([tool_calls(call("add", {"a": 1, "b": 2})), reply("3")])

``ScriptedModel`` is a real, OpenAI-compatible HTTP server on loopback that answers each
request with the next item of its script (``reply``, ``tool_calls`` of ``call``\\ s, ``fail``,
``hang``, ``drop``, ``raw``), then, given ``brain=demo_brain``, deterministically from the
request. It lives in ``fragola_nb.models.scripted``; this is its public face.
"""

from __future__ import annotations

import types

from fragola_nb.models.scripted import (
    SCRIPT_HEADER,
    AgentScript,
    Drop,
    Fail,
    Hang,
    Item,
    Raw,
    Reply,
    ScriptedModel,
    ScriptEntry,
    ToolCall,
    ToolCalls,
    call,
    demo_brain,
    drop,
    fail,
    hang,
    raw,
    reply,
    tool_calls,
)

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


# Each exported class and function says this face as its module (what ``help``, reprs and
# tracebacks print; pickle finds it here by name).
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, (type, types.FunctionType)):
        _value.__module__ = __name__
del _name, _value
