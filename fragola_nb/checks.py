"""Checking what a user hands an agent: its messages, a message's content, instructions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import BadUsage

__all__ = ["ROLES", "check_content", "check_messages", "normalize_instructions"]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def normalize_instructions(instructions: str | list[str] | None) -> str | None:
    if instructions is None or isinstance(instructions, str):
        return instructions
    if isinstance(instructions, (list, tuple)) and all(isinstance(i, str) for i in instructions):
        return "\n".join(instructions)
    raise BadUsage("instructions must be a string, a list of strings, or None")


def check_content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and all(
        isinstance(part, dict) and isinstance(part.get("type"), str) for part in content
    ):
        return content
    raise BadUsage(
        "content must be a string or a non-empty list of parts such as "
        '{"type": "text", "text": ...} or {"type": "image_url", "image_url": {...}}'
    )


def check_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise BadUsage("messages must be a list of Chat Completions message dicts")
    out = list(messages)
    for index, message in enumerate(out):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise BadUsage(
                f"messages[{index}] is not a message dict with a role "
                f"({', '.join(sorted(ROLES))}): {message!r:.120}"
            )
    return out
