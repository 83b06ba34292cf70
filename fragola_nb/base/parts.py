"""Content parts a message may hold, by its role, as the Chat Completions API takes them.

A message's content is a string or a non-empty list of parts; each part is a dict whose
``type`` is one the role may send, with the field of that name:

- ``user``: ``text`` (``"text": str``), ``image_url`` (``"image_url": {"url": str}``),
  ``input_audio`` (``"input_audio": {"data": str, "format": "wav" | "mp3"}``), ``file``
  (``"file": {...}``);
- ``assistant``: ``text``, ``refusal`` (``"refusal": str``);
- ``system``, ``developer``, ``tool``: ``text``.

A part of another kind (``{"type": "bogus"}``) or without its field would be stored and then
refused by the API on every later request: it is refused where it enters instead.

>>> parts_problem([{"type": "bogus"}], "user")
"part 0 has the type 'bogus'; a user message takes 'text', 'image_url', 'input_audio', 'file'"
"""

from __future__ import annotations

from typing import Any

__all__ = ["PART_KINDS", "a_message", "parts_problem"]

_TEXT: dict[str, type] = {"text": str}
PART_KINDS: dict[str, dict[str, type]] = {
    "user": {"text": str, "image_url": dict, "input_audio": dict, "file": dict},
    "assistant": {"text": str, "refusal": str},
    "system": _TEXT,
    "developer": _TEXT,
    "tool": _TEXT,
}
"""The part kinds each role's content may hold, with the type of the field named like it."""


def a_message(role: str) -> str:
    """``"a user message"``, ``"an assistant message"``."""
    return f"{'an' if role == 'assistant' else 'a'} {role} message"


def parts_problem(content: Any, role: str, kinds: dict[str, type] | None = None) -> str | None:
    """Why ``content`` is not a list of parts a ``role`` message may hold (of ``kinds`` when
    given), or None."""
    if not isinstance(content, list) or not content:
        return "not a non-empty list of parts"
    allowed = kinds if kinds is not None else PART_KINDS.get(role, _TEXT)
    for number, part in enumerate(content):
        problem = _part_problem(part, role, allowed)
        if problem is not None:
            return f"part {number} {problem}"
    return None


def _part_problem(part: Any, role: str, kinds: dict[str, type]) -> str | None:
    if not isinstance(part, dict):
        return f"is a {type(part).__name__}, not a dict"
    kind = part.get("type")
    if kind not in kinds:
        shown = repr(kind) if len(repr(kind)) <= 40 else repr(kind)[:39] + "…"
        return f"has the type {shown}; {a_message(role)} takes {', '.join(map(repr, kinds))}"
    if not isinstance(part.get(kind), kinds[kind]):
        return f"of type {kind!r} needs a {kind!r} field ({kinds[kind].__name__})"
    field: Any = part[kind]
    if kind == "image_url" and not isinstance(field.get("url"), str):
        return "of type 'image_url' needs image_url.url (a string)"
    if kind == "input_audio" and (not isinstance(field.get("data"), str)
                                  or field.get("format") not in ("wav", "mp3")):
        return "of type 'input_audio' needs input_audio.data and .format ('wav' or 'mp3')"
    return None
