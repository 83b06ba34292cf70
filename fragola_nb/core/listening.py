"""An agent's ``on``/``off`` and its ``on_<event>`` shortcuts, one per event of ``EVENTS``.

Each returns a ``Subscription`` (call it to unsubscribe) and works as a decorator::

    @agent.on_tool_call
    def log(event): ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fragola_nb.base.errors import BadUsage
from fragola_nb.core.events import EVENTS, Listener, Subscription

if TYPE_CHECKING:
    from fragola_nb.core.conversation import RunDeps

__all__ = ["Listening"]


class Listening:
    """The listener methods of ``Agent``."""

    deps: RunDeps

    def on(self, event: str, listener: Listener) -> Subscription:
        """Subscribe ``listener`` to ``event`` (one of ``EVENT_NAMES``)."""
        _check_event(event)
        deps = self.deps
        subscription = deps.listeners.add(event, listener)
        try:
            deps.hooks.note(event, listener)  # put on by a hook that is running: the hook's
        except BadUsage:  # by a hook already taken off: nobody would own it
            deps.listeners.remove(event, listener)
            raise
        return subscription

    def off(self, event: str, listener: Listener) -> None:
        """Remove ``listener`` (or the ``Subscription`` that ``on_*`` returned) from ``event``
        on this agent (a fork's copy included: each agent holds its own list, so this is how
        a fork drops an inherited listener)."""
        _check_event(event)
        if isinstance(listener, Subscription):
            listener = listener.listener
        self.deps.listeners.remove(event, listener)

    def on_user_message(self, listener: Listener) -> Subscription:
        return self.on("user_message", listener)

    def on_before_step(self, listener: Listener) -> Subscription:
        return self.on("before_step", listener)

    def on_before_model_invocation(self, listener: Listener) -> Subscription:
        return self.on("before_model_invocation", listener)

    def on_model_chunk(self, listener: Listener) -> Subscription:
        return self.on("model_chunk", listener)

    def on_ai_message(self, listener: Listener) -> Subscription:
        return self.on("ai_message", listener)

    def on_after_model_invocation(self, listener: Listener) -> Subscription:
        return self.on("after_model_invocation", listener)

    def on_before_tool_call(self, listener: Listener) -> Subscription:
        return self.on("before_tool_call", listener)

    def on_tool_call(self, listener: Listener) -> Subscription:
        return self.on("tool_call", listener)

    def on_after_tool_call(self, listener: Listener) -> Subscription:
        return self.on("after_tool_call", listener)

    def on_after_step(self, listener: Listener) -> Subscription:
        return self.on("after_step", listener)

    def on_after_state_update(self, listener: Listener) -> Subscription:
        return self.on("after_state_update", listener)

    def on_status_change(self, listener: Listener) -> Subscription:
        return self.on("status_change", listener)

    def on_throttled(self, listener: Listener) -> Subscription:
        return self.on("throttled", listener)


def _check_event(event: str) -> None:
    if event not in EVENTS:
        raise BadUsage(f"unknown event {event!r}; events: {', '.join(EVENTS)}")
