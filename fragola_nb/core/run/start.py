"""How a turn that sends a user message begins: the ``user_message`` listeners, then the
message stored (or, refused by a guardrail, what it left in its place)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from fragola_nb.base.checks import ON_STOP, withheld
from fragola_nb.base.errors import TurnRefused
from fragola_nb.core.events import UserMessageEvent
from fragola_nb.core.run.driver import StopNow

if TYPE_CHECKING:
    from fragola_nb.core.conversation import Conversation

__all__ = ["user_message_start"]


def user_message_start(
    conv: Conversation, message: dict[str, Any], *, events: bool = True
) -> Callable[[], Awaitable[None]]:
    """The ``start`` of ``driver.drive`` for a user message: the ``user_message`` listeners
    hear it (unless ``events`` is False), then it is stored and the step count reset if the
    options say so."""
    deps = conv.deps

    def keep(message: dict[str, Any]) -> None:
        if deps.options.reset_step_count_after_user_message:
            conv.step_count = 0
        conv.append(message, "user_message")

    async def start() -> None:
        nonlocal message
        listeners = deps.listeners
        if events and listeners.has("user_message"):
            event = UserMessageEvent(deps.context, message)
            try:
                await listeners.emit("user_message", event)
            except TurnRefused as refused:  # a guardrail: no step, no model call
                conv.keep_refused(refused, "user")
                raise
            except (StopNow, asyncio.CancelledError, KeyboardInterrupt):
                # stop_sync(), cancellation or Ctrl-C while a listener ran: the user message
                # that started the turn is kept, with the changes of the listeners that
                # finished. A guardrail stopped before it passed the message leaves a
                # marked copy (never sent) or, with on_reject="remove", nothing to keep;
                # so does one that had not started yet (the stop landed in a listener
                # added before it): a message no guard passed is never sent.
                for listener in listeners.of("user_message"):
                    settle = getattr(listener, ON_STOP, None)
                    if settle is not None:
                        settle(event)
                if not withheld(event.message):
                    keep(event.message)
                raise
            message = event.message
        keep(message)

    return start
