"""The session file's format: its JSON Schema, strict parsing, and what is never written.

A session file is read with the standard ``json`` module and nothing else: no pickle, no
``eval``, no import of a name found in the file. The text must be UTF-8 JSON without ``NaN``,
``Infinity`` or numbers too large to be finite; the document must match ``SCHEMA`` (objects
the format defines refuse unknown keys, ``__class__`` and friends included). Values the
format leaves free (message fields other than the ones it names, store values, model
settings) are plain data, never interpreted. Semantic checks follow in ``restore``.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

from fragola_nb.base.errors import SessionError
from fragola_nb.core.events import EVENT_NAMES

__all__ = ["FORMAT", "SCHEMA", "VERSION", "parse_session"]

FORMAT = "fragola_nb.session"
VERSION = 1
MAX_INT = 2**53 - 1  # the largest integer every JSON reader keeps exactly

_count = {"type": "integer", "minimum": 0, "maximum": MAX_INT}
_text = {"type": "string"}
_name = {"type": "string", "minLength": 1}
_id = {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}
# Message fields and model settings are open (the API grows), but named like Python keywords
# arguments the API takes: lowercase words, no "__class__"-style dunder.
_field_names = {"pattern": "^[a-z][a-z0-9_]{0,63}$"}


def _strict(properties: dict[str, Any], *optional: str) -> dict[str, Any]:
    """An object with exactly these keys (all required but ``optional``)."""
    return {
        "type": "object",
        "properties": properties,
        "required": [key for key in properties if key not in optional],
        "additionalProperties": False,
    }


_TOOL_CALL = {
    "type": "object",
    "required": ["id", "function"],
    "properties": {
        "id": _name,
        "type": _text,
        "function": {
            "type": "object",
            "required": ["name", "arguments"],
            "properties": {"name": _text, "arguments": _text},
        },
    },
}
_PART = {"type": "object", "required": ["type"], "properties": {"type": _text}}
MESSAGE = {
    "type": "object",
    "required": ["role"],
    "propertyNames": _field_names,
    "properties": {
        "role": {"enum": ["assistant", "developer", "function", "system", "tool", "user"]},
        "content": {"type": ["string", "null", "array"], "items": _PART},
        "tool_calls": {"type": "array", "items": _TOOL_CALL},
        "tool_call_id": _name,
        "name": _text,
    },
    "if": {"properties": {"role": {"const": "tool"}}},
    "then": {"required": ["tool_call_id"]},
}
_STORES = {"type": "array", "items": _strict({"namespace": _name, "value": {}})}
_DECISION = {
    "oneOf": [
        {"type": "null"},
        _strict({"kind": {"const": "approve"}, "params": {"type": ["object", "null"]}}),
        _strict({"kind": {"const": "reject"}, "reason": _text}),
        _strict({"kind": {"const": "inject"}, "result": {}}),
    ]
}
_PENDING = _strict({
    "id": _name,
    "name": _text,
    "arguments": {"type": "object"},
    "reason": {"enum": ["approval", "dynamic"]},
    "decision": _DECISION,
})
_OPTIONS = _strict({
    "name": _name,
    "description": _text,
    "instructions": {"type": ["string", "null"]},
    "use_developer_role": {"type": "boolean"},
    "model_settings": {"type": "object", "propertyNames": _field_names},
    "max_step": {**_count, "minimum": 1},
    "reset_step_count_after_user_message": {"type": "boolean"},
    "tools": {"type": "array", "items": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
              "uniqueItems": True},
})
# One model call's usage (``fragola_nb.core.usage.CallUsage``): the counts the server reported, or
# ``"reported": false`` when it reported none; ``"cached": true`` when Fragola.cached's file
# answered it; and its timing (``fragola_nb.core.timing``), the fields that are known (older
# files have none).
_seconds = {"type": "number", "minimum": 0}
_TIMING = {"started": _seconds, "ttft": _seconds, "seconds": _seconds}
# answered from Fragola.cached's file, or offline (the scripted model, a replay): not paid for
_CACHED = {"cached": {"const": True}, "offline": {"const": True}}
_CALL_USAGE = {
    "oneOf": [
        _strict({"model": _text, "prompt_tokens": _count, "completion_tokens": _count,
                 "total_tokens": _count, "cached_tokens": _count, **_CACHED, **_TIMING},
                "cached_tokens", "cached", "offline", *_TIMING),
        _strict({"model": _text, "reported": {"const": False}, **_CACHED, **_TIMING},
                "cached", "offline", *_TIMING),
    ]
}
# One tool call that ran, timed (``fragola_nb.core.timing.ToolTiming``).
_TOOL_TIMING = _strict({"name": _text, "call_id": _text, "started": _seconds,
                        "seconds": _seconds})
_AGENT = _strict({
    "id": _id,
    "fork_of": {"oneOf": [{"type": "null"}, _id]},
    "fork_point": _count,
    "history": _count,
    "step_count": _count,
    "status": {"enum": ["idle", "waiting"]},
    "outcome": {"enum": [None, "finished", "paused", "step_limit", "stopped", "budget"]},
    "options": _OPTIONS,
    "stores": _STORES,
    "pending": {"type": "array", "items": _PENDING},
    "listeners": {
        "type": "object",
        "propertyNames": {"enum": list(EVENT_NAMES)},
        "additionalProperties": {"type": "array", "items": _name},
    },
    # Written only when something was left out: the paths (never the values) of the model
    # settings that ``fragola_nb.base.redact`` took for credentials. Older files have none.
    "credentials_not_saved": {"type": "array", "items": {"type": "string", "maxLength": 1000}},
    # Issue 25 (older files have neither): the hooks ``agent.use`` put on, run again on load
    # (their listeners are not in "listeners"), and the scoped instructions by scope.
    "hooks": {"type": "array", "items": _strict({"name": {"oneOf": [{"type": "null"}, _name]},
                                                  "hook": _name})},
    "instruction_scopes": {"type": "object",
                           "propertyNames": {"minLength": 1, "not": {"const": "*"}},
                           "additionalProperties": _text},
    # The model calls this agent made, oldest first (``agent.usage``); written when there are
    # any. Older files have none: their agents load with no usage.
    "usage": {"type": "array", "items": _CALL_USAGE},
    # The tool calls this agent ran, with their durations (``agent.usage.tools``); written
    # when there are any. Older files have none.
    "tool_timings": {"type": "array", "items": _TOOL_TIMING},
    # Where ``fork(at=...)`` cut the parent (``agent.fork_at``), for a fork made earlier than
    # the end. Older files have none: their forks load with ``fork_at`` None.
    "fork_at": _count,
}, "credentials_not_saved", "usage", "hooks", "instruction_scopes", "tool_timings", "fork_at")
_HISTORY = _strict({
    "base": {"oneOf": [{"type": "null"}, _count]},
    "base_length": _count,
    "messages": {"type": "array", "items": MESSAGE},
    # Messages of the base this history reads in their place (``agent.edit``, by index from
    # the start of the conversation). Older files have none.
    "edits": {"type": "array", "items": _strict({"index": _count, "message": MESSAGE})},
}, "edits")
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    **_strict({
        "format": {"const": FORMAT},
        "version": {"const": VERSION},
        "stores": _STORES,
        "histories": {"type": "array", "items": _HISTORY},
        "agents": {"type": "array", "items": _AGENT},
    }),
}


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    # Built on first use: importing jsonschema costs seconds (its format checkers), and
    # ``import fragola_nb`` should not pay that for a session it may never load.
    import jsonschema

    # "integer" means a Python int: JSON Schema would take 3.0, not a count we can use.
    types = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
    )
    validator = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        jsonschema.Draft202012Validator, type_checker=types
    )
    return validator(SCHEMA)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON number")


def parse_session(data: bytes | str) -> dict[str, Any]:
    """The document in ``data``, checked against ``SCHEMA``, or ``SessionError``."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        document = json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise SessionError(f"not a session file: the text is not UTF-8 ({exc.reason})") from exc
    except RecursionError as exc:
        raise SessionError("not a session file: the JSON is nested too deeply") from exc
    except ValueError as exc:  # JSONDecodeError, a huge integer, NaN, Infinity
        raise SessionError(f"not a session file: invalid or truncated JSON ({exc})") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise SessionError(f'not a session file: no "format": "{FORMAT}" at the top')
    version = document.get("version")
    if version != VERSION or isinstance(version, bool):
        raise SessionError(
            f"session format version {version!r} is not supported "
            f"(this fragola_nb reads version {VERSION})"
        )
    try:
        from jsonschema.exceptions import best_match

        error = best_match(_validator().iter_errors(document))
    except RecursionError as exc:
        raise SessionError("not a session file: the JSON is nested too deeply") from exc
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "(top)"
        raise SessionError(f"invalid session file at {where}: {error.message[:300]}")
    return document
