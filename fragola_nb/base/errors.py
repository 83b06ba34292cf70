"""Every error fragola_nb raises, grouped by what the caller does next.

::

    FragolaError                  root: catch this to catch everything of ours
    ├── BadUsage                  misuse of the API: fix the calling code
    │   ├── InvalidToolDefinition     a tool name, schema or handler that cannot work
    │   └── InvalidArguments          edited tool arguments that fail the tool's schema
    ├── ModelError                the model API failed: retry later or change the request
    │   ├── ModelHTTPError            the API answered with an HTTP error status
    │   ├── ModelTimeout              no answer in time
    │   ├── ModelConnectionError      the connection failed or dropped
    │   └── ModelResponseError        an answer that is not a usable completion
    ├── ListenerError             an event listener raised: fix the listener
    │   └── InvalidListenerResult     a mutating listener returned (or left) a value that is
    │                                 not what the event carries; also a ``BadUsage``
    ├── JsonModeError             ``agent.json`` got no parseable JSON or the API failed
    ├── TurnRefused               a listener refused the user message or the model's reply
    │                             (``fragola_nb.presets.guardrails.GuardrailRejected``): turn ended
    └── SessionError              a session file cannot be loaded or saved: it is corrupted,
                                  truncated or hostile, names a tool or listener not given to
                                  ``load_session``, or holds a value that is not JSON

A ``ModelError`` keeps the ``openai`` exception as its ``__cause__``, or whatever else the
client raised (a body that is not JSON escapes it as a bare ``json.JSONDecodeError``),
redacted in place before it is chained (``fragola_nb.base.redact.redact_exception``, with the
request's credentials as known values; an ``openai`` error's ``request`` and ``response``
are replaced by redacted copies): the chain stays whole for ``%tb`` and logs, and a key a
server echoed back is not in it. It has
no cause when fragola_nb itself found the fault: a stream that ends before its
``finish_reason`` (``ModelConnectionError``), a choice with no message, or fields that could
not be sent back in the next request (``ModelResponseError``: content that is not text, a
tool call without a unique id or a name, arguments that are not a string).

Whatever is raised, even ``KeyboardInterrupt`` or cancellation in the middle of a run, the
agent is left idle with a complete, valid history (every tool call answered, no half-built
reply), so the next call works.

Reaching the step budget is not an error (see ``AgentState.outcome == "step_limit"``), and a
tool that fails does not raise either: its error goes back to the model as the tool's result.

In IPython and Jupyter, an error of ours raised in a cell is shown as its class and message
(IPython's ``_render_traceback_`` hook); ``%tb`` then shows the full traceback and chain.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = [
    "BadUsage",
    "FragolaError",
    "InvalidArguments",
    "InvalidListenerResult",
    "InvalidToolDefinition",
    "JsonModeError",
    "ListenerError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelTimeout",
    "SessionError",
    "TurnRefused",
]


def exception_text(exc: BaseException) -> str:
    """``"PermissionError: root may not log in"``: how a caught exception reads in a tool
    result or an error message, even when its own ``__str__`` raises."""
    try:
        said = str(exc)
    except Exception:
        said = "(its message could not be read)"
    return f"{type(exc).__name__}: {said}"


class ShortTraceback(BaseException):
    """Mixed into our exceptions: shown in one line in IPython and Jupyter."""

    @property
    def _render_traceback_(self) -> Callable[[], list[str]]:
        """IPython's hook for an exception's own traceback. IPython shows our error, as it is
        raised in a cell, as its class and message, not 60-80 lines through the run loop and
        the ``openai`` client. The hook is there only while this error is the one being
        handled: shown again later (``%tb``, ``%tb verbose``), IPython prints its own full
        traceback with the chain (``__cause__``). Nothing of IPython is imported here."""
        if sys.exc_info()[1] is not self:
            raise AttributeError("_render_traceback_")  # hasattr() is False: IPython's own
        return self._short_traceback

    def _short_traceback(self) -> list[str]:
        from fragola_nb.base.render import (
            visible,  # the message may quote a model, a tool or a person
        )

        return [visible(f"{type(self).__name__}: {self}"), "(%tb shows the full traceback)"]


class FragolaError(ShortTraceback, Exception):
    """Root of every error fragola_nb raises."""


class BadUsage(FragolaError):
    """The API was used in a way it does not support; nothing was changed."""


class InvalidToolDefinition(BadUsage):
    """A tool cannot be made: bad name, broken schema, duplicate name, or bad handler."""


class InvalidArguments(BadUsage):
    """Arguments given by hand (``agent.approve(id, params=...)``) fail the tool's schema."""


class ModelError(FragolaError):
    """The model API call failed. ``__cause__`` holds the ``openai`` exception."""


class ModelHTTPError(ModelError):
    """The API answered with an HTTP error status (``status_code``)."""

    def __init__(self, message: str, *, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class ModelTimeout(ModelError):
    """The API did not answer within the client's timeout."""


class ModelConnectionError(ModelError):
    """The connection to the API failed or dropped (also mid-stream)."""


class ModelResponseError(ModelError):
    """The API answered, but not with a usable chat completion."""


class ListenerError(FragolaError):
    """An event listener raised; ``__cause__`` holds its exception, ``event`` names the event."""

    def __init__(self, message: str, *, event: str) -> None:
        super().__init__(message)
        self.event = event


class InvalidListenerResult(ListenerError, BadUsage):
    """A mutating listener returned (or changed the event's value into) something the event
    cannot carry on with: a ``user_message`` listener returning a string instead of the
    message dict, a ``before_tool_call`` listener returning a dict instead of the config.
    Nothing of it was stored. It is both a ``ListenerError`` (a listener is at fault) and a
    ``BadUsage`` (the calling code must change)."""


class JsonModeError(FragolaError):
    """``agent.json`` could not produce parseable JSON, or the API failed."""


class TurnRefused(FragolaError):
    """A ``user_message`` or ``ai_message`` listener refused the message (a guardrail): the
    turn ends at once, before any model call (or any further one), and this error reaches the
    caller as it is, not wrapped in a ``ListenerError``.

    ``keep`` is the message stored in place of the refused one, marked with a ``fragola_nb``
    key (``fragola_nb.base.checks.META``) so that it is never sent to the model; None stores
    nothing. Either way the history stays a valid next request."""

    def __init__(self, message: str, *, keep: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.keep = keep


class SessionError(FragolaError):
    """A session could not be saved or loaded; nothing was changed (the previous file, the
    ``Fragola`` instance). The message says what is wrong and where."""
