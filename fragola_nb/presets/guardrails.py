"""Guardrails: checks that refuse a user message (or the model's reply) before it is used.

>>> def no_secrets(text):                                            # doctest: +SKIP
...     return "it holds an API key" if "sk-" in text else None
>>> rails = guardrail(agent, no_secrets)                             # doctest: +SKIP
>>> await agent.user_message("my key is sk-123")                     # doctest: +SKIP
GuardrailRejected: rejected by no_secrets: it holds an API key
>>> rails.remove()                                                   # doctest: +SKIP

A *guard* is a function (sync or async) of the message's text (``content`` parts: their
text, joined by newlines). It passes by returning ``None`` or ``True``; it fails by returning
a reason (a string), ``False`` (no reason), or a ``Rejection`` (a reason and, optionally, the
name to show instead of the guard's own). A guard that raises, or returns anything else,
fails too (closed, not open): the reason names the error's class and where it was raised,
never its text (``int(text)`` would quote the message); the error itself is ``.error``.
A reason is shown with its credentials redacted, by ``fragola_nb.base.redact``'s rule.

The guards run in order on each new user message, as the ``user_message`` listeners added
before ``guardrail()`` left it; the first that fails ends the turn **before any model call**
and ``user_message`` raises ``GuardrailRejected`` (``.guard``, ``.reason``, ``.role``,
``.refused``: the message). With ``check_replies=True`` they also see each reply of the model
before it is stored: a reply that fails is not stored and none of its tool calls runs.

``on_reject`` says what becomes of the refused message:

- ``"annotate"`` (the default): it stays in the history marked
  ``{"fragola_nb": {"rejected": {"guard": ..., "reason": ...}}}``, which the panel shows as
  "rejected by GUARD: REASON". A marked message is never sent to the model (neither is its
  mark: ``fragola_nb.base.checks.META``), so the next request is what it would have been without
  it. A refused reply is kept without its tool calls.
- ``"remove"``: nothing is stored (choose it when the message must not stay in the history
  or in a saved session, a pasted password say).

Either way the agent stays idle and usable, and the history a valid next request.

A message no guard passed is never sent: when ``stop_sync()`` (or a cancellation, or Ctrl-C)
stops the turn while a guard is deciding, or while a ``user_message`` listener added before
``guardrail()`` runs (the guards not started: the agent asks them, ``checks.ON_STOP``), the
message is kept marked
``{"rejected": {"guard": "guardrail", "reason": "stopped before the guards passed it"}}``
(``"annotate"``) or not stored at all (``"remove"``).

Forks: the guards are listeners of the agent, so a fork made after ``guardrail()`` (and the
forks ``agent.compare``/``agent.batch`` run on) keeps them; ``remove()`` takes them off the
agent and off the forks in its tree. ``agent.json(..., ignore_user_message_events=True)``
skips them, as it skips every ``user_message`` listener.
"""

from __future__ import annotations

import inspect
import os
import traceback
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fragola_nb.base.checks import META, ON_STOP, WITHHELD
from fragola_nb.base.checks import rejection_of as rejection_of  # where it lived before
from fragola_nb.base.errors import BadUsage, TurnRefused
from fragola_nb.base.redact import redact_text
from fragola_nb.base.render import text_of
from fragola_nb.core.events import AiMessageEvent, UserMessageEvent

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["Guard", "Guardrail", "GuardrailRejected", "OnReject", "Rejection", "guardrail"]

OnReject = Literal["annotate", "remove"]


@dataclass(frozen=True)
class Rejection:
    """What a guard returns to refuse a message: the ``reason`` and, optionally, the name to
    show (``guard``) instead of the guard function's own."""

    reason: str
    guard: str | None = None


Verdict = None | bool | str | Rejection
Guard = Callable[[str], Verdict | Awaitable[Verdict]]


class GuardrailRejected(TurnRefused):
    """A guard refused a message: the turn ended before any model call (for a user message)
    or before the reply was stored (``check_replies=True``).

    ``guard`` is the guard's name, ``reason`` why, ``role`` ``"user"`` or ``"assistant"``,
    and ``refused`` the message as it was refused (not stored with ``on_reject="remove"``).
    ``error`` is the exception of a guard that raised (else None); it is not chained, since
    a traceback would print its text, which may quote the message.
    The error's text never quotes the message, only the guard's reason."""

    def __init__(self, guard: str, reason: str, *, role: str, refused: dict[str, Any],
                 keep: dict[str, Any] | None, error: BaseException | None = None) -> None:
        super().__init__(f"rejected by {guard}: {reason}", keep=keep)
        self.guard = guard
        self.reason = reason
        self.role = role
        self.refused = refused
        self.error = error


class Guardrail:
    """What ``guardrail()`` returns: the guards on one agent, and how to take them off."""

    def __init__(self, agent: Agent, guards: tuple[Guard, ...], on_reject: OnReject,
                 check_replies: bool) -> None:
        self.agent = agent
        self.guards = guards
        self.on_reject: OnReject = on_reject
        self.check_replies = check_replies
        self.removed = False
        names = ",".join(_name(guard, n) for n, guard in enumerate(guards, 1))

        async def check_user_message(event: UserMessageEvent) -> None:
            try:
                await self._check(event.message, "user")
            except Exception:
                raise
            except BaseException:
                # stop_sync(), a cancellation or Ctrl-C before the guards passed the message:
                # what is kept in its place is never sent (marked), or nothing (remove).
                self._withhold(event)
                raise
            _passed(event).add(id(self))

        def stopped(event: UserMessageEvent) -> None:
            """The turn stopped in any ``user_message`` listener (one added before these
            guards too): unless these guards passed the message, keep it never sent."""
            if id(self) not in _passed(event):
                self._withhold(event)

        async def check_ai_message(event: AiMessageEvent) -> None:
            await self._check(event.message, "assistant")

        # The name a saved session gives the listeners (``save_session``).
        check_user_message.__qualname__ = f"guardrail[{names}].user_message"
        check_ai_message.__qualname__ = f"guardrail[{names}].ai_message"
        setattr(check_user_message, ON_STOP, stopped)  # read by the agent (checks.ON_STOP)
        self._listeners: dict[str, Callable[[Any], Awaitable[None]]] = {
            "user_message": check_user_message}
        if check_replies:
            self._listeners["ai_message"] = check_ai_message
        for event, listener in self._listeners.items():
            agent.on(event, listener)

    def __getstate__(self) -> dict[str, Any]:
        # Pickled with the agent's listeners when a batch runs on Ray workers: the guards
        # go, not the agent they were put on (each worker's agent is its own).
        return {**self.__dict__, "agent": None}

    async def _check(self, message: dict[str, Any], role: str) -> None:

        text = text_of(message.get("content"))
        for number, guard in enumerate(self.guards, 1):
            name = _name(guard, number)
            cause: BaseException | None = None
            try:
                verdict: Any = guard(text)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
            except Exception as exc:  # fails closed: a broken guard lets nothing through
                verdict, cause = _raised(exc), exc
            failed = _failure(verdict, name)
            if failed is None:
                continue
            shown, reason = failed
            reason = redact_text(reason, self._known())
            keep = self._marked(message, shown, reason) if self.on_reject == "annotate" else None
            # Not chained: a traceback would print the guard's error, which may quote the
            # message (int(text)); it stays reachable as .error.
            raise GuardrailRejected(shown, reason, role=role, refused=message, keep=keep,
                                    error=cause) from None

    def _withhold(self, event: UserMessageEvent) -> None:
        """Leave in ``event.message`` what may be kept of a message these guards did not
        pass: a marked copy (never sent), or ``WITHHELD`` (nothing stored) with "remove".
        A message already marked or withheld (by another guard) is left as it is."""
        message = event.message
        if isinstance(message, dict) and META in message:
            return
        event.message = (self._marked(message, "guardrail", STOPPED)
                         if self.on_reject == "annotate" else {META: dict(WITHHELD)})

    def _known(self) -> set[str]:
        """The credentials the agent sends (its key...): a reason quoting one hides it."""
        agent: Agent | None = self.agent  # None once pickled for a Ray worker
        if agent is None:
            return set()
        try:
            return agent.fragola.credentials(agent.options.model_settings)
        except Exception:  # a client made by hand that says nothing of its key: shapes only
            return set()

    def _marked(self, message: dict[str, Any], guard: str, reason: str) -> dict[str, Any]:
        kept = {key: value for key, value in message.items() if key != "tool_calls"}
        # What a guard refused is often a pasted key: the kept copy (shown in panels, saved
        # in sessions) has every credential in its text redacted, by fragola_nb.base.redact's rule
        # (the agent's own key, of whatever shape, included).
        known = self._known()
        content = kept.get("content")
        if isinstance(content, str):
            kept["content"] = redact_text(content, known)
        elif isinstance(content, list):
            kept["content"] = [
                {**part, "text": redact_text(part["text"], known)}
                if isinstance(part, dict) and isinstance(part.get("text"), str) else part
                for part in content]
        kept[META] = {"rejected": {"guard": guard, "reason": redact_text(reason, known)}}
        return kept

    def remove(self) -> None:
        """Take the guards off the agent and off the forks in its tree that inherited them
        (agents that no longer have them are left as they are)."""
        for agent in _tree(self.agent):
            for event, listener in self._listeners.items():
                agent.off(event, listener)
        self.removed = True

    def __repr__(self) -> str:
        names = ", ".join(_name(guard, n) for n, guard in enumerate(self.guards, 1))
        state = ", removed" if self.removed else ""
        return (f"Guardrail(agent={self.agent.name!r}, guards=[{names}], "
                f"on_reject={self.on_reject!r}, check_replies={self.check_replies}{state})")


def guardrail(agent: Agent, *guards: Guard, on_reject: OnReject = "annotate",
              check_replies: bool = False) -> Guardrail:
    """Check each new user message of ``agent`` (and its replies, with ``check_replies``)
    with ``guards`` before it is used; see the module's docstring. Returns a ``Guardrail``
    whose ``remove()`` takes the guards off again.

    >>> rails = guardrail(agent, no_secrets, on_topic, on_reject="remove")  # doctest: +SKIP
    """
    from fragola_nb.core.agent import Agent

    if not isinstance(agent, Agent):
        raise BadUsage(f"guardrail() takes an Agent first, got {type(agent).__name__}")
    if not guards:
        raise BadUsage("guardrail() needs at least one guard: a function of the message text")
    for number, guard in enumerate(guards, 1):
        if not callable(guard):
            raise BadUsage(f"guard #{number} must be a function of the message text, got "
                           f"{type(guard).__name__}")
    if on_reject not in ("annotate", "remove"):
        raise BadUsage(f"on_reject must be 'annotate' or 'remove', got {on_reject!r}")
    if not isinstance(check_replies, bool):
        raise BadUsage(f"check_replies must be True or False, got {check_replies!r}")
    return Guardrail(agent, guards, on_reject, check_replies)


STOPPED = "stopped before the guards passed it"
"""The reason a message is kept marked with when its turn was stopped while a guard decided."""


_PASSED = "_fragola_nb_guards_passed"


def _passed(event: UserMessageEvent) -> set[int]:
    """The ids of the ``Guardrail``s that passed this event's message (kept on the event:
    one turn's event, gone with it)."""
    found = event.__dict__.get(_PASSED)
    if found is None:
        found = event.__dict__[_PASSED] = set()
    return found


def _raised(exc: Exception) -> str:
    """A raising guard's reason: the error's class and where it was raised, not its text
    (which may quote the message: ``int(text)``'s ``invalid literal ... 'my key is ...'``)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return f"the guard raised {type(exc).__name__}"
    last = frames[-1]
    return (f"the guard raised {type(exc).__name__} in {last.name} "
            f"({os.path.basename(last.filename)}, line {last.lineno})")


def _failure(verdict: Any, name: str) -> tuple[str, str] | None:
    """``(guard name, reason)`` when ``verdict`` fails the message, else None."""
    if verdict is None or verdict is True:
        return None
    if verdict is False:
        return name, "rejected"
    if isinstance(verdict, Rejection):
        return verdict.guard or name, str(verdict.reason) or "rejected"
    if isinstance(verdict, str):
        return name, verdict or "rejected"
    return name, (f"the guard returned a {type(verdict).__name__}; a guard returns None or "
                  "True to pass, a reason (str), False or a Rejection to refuse")


def _name(guard: Any, number: int) -> str:
    name = getattr(guard, "__name__", None)
    if not isinstance(name, str) or not name.isidentifier():  # a lambda, a partial
        name = type(guard).__name__ if not inspect.isfunction(guard) else None
        if name in (None, "partial", "function"):
            return f"guard #{number}"
    return str(name)


def _tree(agent: Agent) -> Iterator[Agent]:
    yield agent
    for fork in agent.forks:
        yield from _tree(fork)
