"""``ToolCallPayload``: a tool call's outcome in upstream Fragola's terms.

Fragola (0.1.1) describes what a tool call came to as a payload, ``{success, data, error?,
isValidationError?}``, rather than as an exception; its ``tool_call`` listeners receive one
and ``injectConfig`` takes one. This port keeps its own terms too (``event.result`` and
``event.error``, the text the model reads), so the payload is a *view* of them and a way to
set them:

- ``event.payload`` on ``tool_call`` / ``after_tool_call`` events;
- a ``tool_call`` listener may return a payload (or set ``event.payload``);
- ``agent.inject(id, payload)``, ``config.inject_response = payload`` and a handler that
  returns a payload are read the same way.

A failed payload reaches the model as the one clear line of text a failure always gives it
(``"Error: ..."``), never as the payload's fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fragola_nb.base.errors import exception_text

__all__ = ["ToolCallPayload", "failure_text", "payload_of", "unpack"]

@dataclass(frozen=True)
class ToolCallPayload:
    """What a tool call came to: ``success`` with its ``data``, or a failure with ``error``.

    >>> ToolCallPayload(True, {"temp": 21})                                  # doctest: +SKIP
    >>> ToolCallPayload(False, None, error=TimeoutError("no answer"))        # doctest: +SKIP
    """

    success: bool
    data: Any
    error: Any = None
    """For a failure: what went wrong (an exception or a text); None for a success."""
    is_validation_error: bool = False
    """True when the model's arguments were refused before the handler ran."""


def failure_text(payload: ToolCallPayload) -> str:
    """The one line the model reads for a failed payload: ``"Error: ..."``."""
    error = payload.error
    if isinstance(error, BaseException):
        return f"Error: {exception_text(error)}"
    said = error if error is not None else payload.data
    if isinstance(said, str) and said.strip():
        return said if said.startswith("Error") else f"Error: {said}"
    return "Error: the tool call failed"


def unpack(result: Any, error: str | None) -> tuple[Any, str | None]:
    """``(result, error)`` in this port's terms: a payload becomes its data (a success) or
    its failure text (both result and error); anything else is left as it is."""
    if not isinstance(result, ToolCallPayload):
        return result, error
    if result.success:
        return result.data, None
    text = failure_text(result)
    return text, text


def payload_of(result: Any, error: str | None, validation: bool = False) -> ToolCallPayload:
    """The payload for an event's ``result`` and ``error``; ``validation``: the run loop
    refused the arguments before the handler ran (upstream's validation errors: not JSON,
    not an object, or rejected by the tool's schema), as it said where it refused them."""
    if error is None:
        return ToolCallPayload(True, result)
    return ToolCallPayload(False, result, error=error, is_validation_error=validation)
