"""How ``agent.json`` asks a server for structure: three strategies, one way to read the answer.

- ``json_schema``: structured outputs, ``response_format: {"type": "json_schema", ...}``
  (OpenAI, Ollama, vLLM, LM Studio).
- ``json_object``: ``response_format: {"type": "json_object", "schema": SCHEMA}`` (llama.cpp
  and others read the ``schema`` field and constrain the answer with a grammar), and the schema
  in the instructions of the request, for servers that ignore the field.
- ``tool``: one tool whose parameters are the schema, with a forced ``tool_choice``; its
  arguments are the answer. The call stays in the history, answered with ``RECEIVED``, so the
  history is a valid next request.

Only the request changes: the agent's instructions and tools are left as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import BadUsage, ModelError, ModelHTTPError

if TYPE_CHECKING:
    from fragola_nb.core.conversation import RunDeps

__all__ = ["FALLBACKS", "JSON_MODES", "NOT_RUN", "RECEIVED", "Shape", "check_json_mode", "refuses"]

JSON_MODES = ("auto", "json_schema", "json_object", "tool")
"""How ``agent.json`` asks for structure; ``auto`` tries the other three in this order."""

FALLBACKS = {"json_schema": "json_object", "json_object": "tool"}
"""``json_mode="auto"``: the strategy tried when a server refuses one."""

RECEIVED = "Received: this call was the structured answer."
"""The tool result stored for the ``tool`` strategy's call."""
NOT_RUN = "Not run: the structured answer came in the same message."
"""The result stored for any other call the model made beside the answer."""

REFUSAL_STATUSES = frozenset({400, 404, 415, 422, 501})


def check_json_mode(mode: Any) -> str:
    if mode not in JSON_MODES:
        raise BadUsage(f"json_mode must be one of {', '.join(map(repr, JSON_MODES))}, "
                       f"got {mode!r}")
    return str(mode)


@dataclass(frozen=True)
class Shape:
    """One strategy for one schema: what it adds to each request of the turn."""

    mode: str
    schema: dict[str, Any]
    """The JSON Schema asked for (strict, for a pydantic model)."""
    name: str
    response_format: dict[str, Any] | None = None
    """The ``json_schema`` strategy's ``response_format``, made by the caller."""

    def settings(self, deps: RunDeps) -> dict[str, Any]:
        """Request settings of the turn (checked by ``before_model_invocation`` listeners)."""
        if self.mode == "json_schema":
            return {"response_format": self.response_format}
        if self.mode == "json_object":
            return {"response_format": {"type": "json_object", "schema": self.schema}}
        return {"tool_choice": {"type": "function", "function": {"name": self.tool_name(deps)}}}

    def tool_name(self, deps: RunDeps) -> str:
        """The schema's name, unless one of the agent's tools has it."""
        taken = {tool.name for tool in deps.options.tools}
        name = self.name
        while name in taken:
            name = f"json_{name}"[:64]
        return name

    def dress(self, deps: RunDeps, request: dict[str, Any]) -> dict[str, Any]:
        """What the request carries besides the settings: the schema in the instructions
        (``json_object``) or the answer tool (``tool``)."""
        if self.mode == "json_object":
            return {**request, "messages": _instructed(request["messages"], self.schema)}
        if self.mode == "tool":
            tool = {"type": "function", "function": {
                "name": self.tool_name(deps),
                "description": "Give your answer: the arguments of this call are the answer.",
                "parameters": self.schema,
            }}
            return {**request, "tools": [*request.get("tools", ()), tool]}
        return request

    def answer_call(self, deps: RunDeps, message: dict[str, Any]) -> dict[str, Any] | None:
        """The ``tool`` strategy's call in ``message``, if the model made it."""
        if self.mode != "tool":
            return None
        name = self.tool_name(deps)
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            if function.get("name") == name:
                return dict(call)
        return None



def _instructed(messages: list[dict[str, Any]], schema: dict[str, Any]) -> list[dict[str, Any]]:
    note = ("Answer with one JSON object and nothing else. It must match this JSON Schema:\n"
            + json.dumps(schema, ensure_ascii=False))
    first = messages[0] if messages else None
    if first is not None and first.get("role") in ("system", "developer") \
            and isinstance(first.get("content"), str):
        return [{**first, "content": f"{first['content']}\n\n{note}"}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


def refuses(exc: ModelError, mode: str) -> bool:
    """Whether ``exc`` is a server refusing ``mode`` itself (not the schema, not the
    messages): an HTTP 400, 404, 415, 422 or 501 that names the request field the strategy
    sets, or an HTTP 500 that names both the field and the strategy (llama-cpp-python's server
    reports its request validation errors as 500s). OpenAI's "Invalid schema for
    response_format" is about the schema: no fallback."""
    if not isinstance(exc, ModelHTTPError):
        return False
    text = str(exc).lower()
    if "invalid schema" in text:
        return False
    if exc.status_code == 500:
        return "response_format" in text and mode in text
    return exc.status_code in REFUSAL_STATUSES and ("response_format" in text or mode in text)
