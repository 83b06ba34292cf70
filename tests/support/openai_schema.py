"""Validate Chat Completions bodies against the official OpenAI JSON schemas.

``tests/schemas/chat-completions.schema.json`` is a copy of the official request, response and
stream-chunk schemas (JSON Schema 2020-12, definitions under ``$defs``). The validators are
built once, at import::

    validate_request(model.requests[0])   # raises SchemaMismatch with a readable message
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

__all__ = ["SchemaMismatch", "validate_chunk", "validate_request", "validate_response"]

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "chat-completions.schema.json"
_URI = "urn:openai:chat-completions"


class SchemaMismatch(AssertionError):
    """A body does not validate against its OpenAI schema."""


def _validators() -> dict[str, Draft202012Validator]:
    contents = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    resource = Resource.from_contents(contents, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource(_URI, resource)
    names = (
        "CreateChatCompletionRequest",
        "CreateChatCompletionResponse",
        "CreateChatCompletionStreamResponse",
    )
    return {
        name: Draft202012Validator({"$ref": f"{_URI}#/$defs/{name}"}, registry=registry)
        for name in names
    }


_VALIDATORS = _validators()


def _check(name: str, body: Any) -> None:
    errors: list[ValidationError] = list(_VALIDATORS[name].iter_errors(body))
    if not errors:
        return
    error = best_match(errors)
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    shown = json.dumps(body, indent=1, default=repr)
    if len(shown) > 2000:
        shown = shown[:2000] + "\n..."
    raise SchemaMismatch(
        f"not a valid {name}: at {where}: {error.message} ({len(errors)} error(s) in all)\n{shown}"
    )


def validate_request(body: dict[str, Any]) -> None:
    """Raise :class:`SchemaMismatch` unless ``body`` is a valid CreateChatCompletionRequest."""
    _check("CreateChatCompletionRequest", body)


def validate_response(body: Any) -> None:
    """Raise :class:`SchemaMismatch` unless ``body`` is a valid CreateChatCompletionResponse."""
    _check("CreateChatCompletionResponse", body)


def validate_chunk(body: Any) -> None:
    """Raise :class:`SchemaMismatch` unless ``body`` is a valid stream chunk."""
    _check("CreateChatCompletionStreamResponse", body)
