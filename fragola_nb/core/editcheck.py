"""What ``agent.edit`` may put in a message, checked before anything changes.

A new text must be one the API takes for that role: a string, or content parts of the kinds
the role may send (``fragola_nb.base.parts``; an assistant's only ``text``, as the edit's note
is a text part), each with its fields. A new tool result must be a value JSON can hold, as the
model reads it (``serialize_result``): no circular reference, no NaN or infinity, no key JSON
cannot name. Anything else is a ``BadUsage`` saying why, and the history is left as it was.
"""

from __future__ import annotations

import json
from typing import Any

from fragola_nb.base.checks import refuse_half_emoji
from fragola_nb.base.errors import BadUsage, exception_text
from fragola_nb.base.parts import PART_KINDS, a_message, parts_problem
from fragola_nb.core.tools import serialize_result

__all__ = ["check_edit"]

_EDITED_KINDS: dict[str, dict[str, type]] = {"user": PART_KINDS["user"],
                                             "assistant": {"text": str}}
"""What an edited text may hold: an assistant's refusal part cannot sit beside the edit's
note (a text part)."""


def check_edit(where: int, role: str, content: Any, result: Any, has_result: bool) -> None:
    """A ``BadUsage`` when ``content`` (for a ``role`` message) or ``result`` (for a tool
    message) cannot be put at ``messages[where]``; nothing is changed either way. (A value
    given for the wrong kind of message is ``edit``'s own error.)"""
    if role == "tool" and has_result:
        _check_result(where, result)
    elif role in _EDITED_KINDS and not has_result and isinstance(content, list):
        problem = parts_problem(content, role, _EDITED_KINDS[role])
        if problem is not None:
            raise BadUsage(f"edit(content=...) for messages[{where}], {a_message(role)}: "
                           f"{problem}")


def _check_result(where: int, result: Any) -> None:
    """``result`` as the model would read it, JSON that any reader takes (no NaN), and no
    half an emoji: typed by a person, it is refused as ``edit(content=...)`` refuses it."""
    refuse_half_emoji(result, f"edit(result=...) for messages[{where}]")
    try:
        text = serialize_result(result)
        if not isinstance(result, str):
            json.dumps(json.loads(text), allow_nan=False)
    except RecursionError:
        raise BadUsage(f"edit(result=...) for messages[{where}]: the value is nested too "
                       "deeply for JSON") from None
    except Exception as exc:  # circular, a key JSON cannot name, NaN, a __str__ that raises
        raise BadUsage(f"edit(result=...) for messages[{where}] takes a value JSON can hold "
                       f"(a string, a number, a list or dict of them...): "
                       f"{exception_text(exc)}") from None
