"""Which agent is asking: the name of the agent whose turn makes a request.

A request does not carry it; the run loop (``fragola_nb.core.run.driver``) sets it for each turn,
and a recording names the agent that sent each request (``fragola_nb.models.recording``). Each
turn is a task of its own, so the value never leaks into the caller.
"""

from __future__ import annotations

import contextvars

__all__ = ["CURRENT_AGENT"]

CURRENT_AGENT: contextvars.ContextVar[str] = contextvars.ContextVar("fragola_nb_current_agent")
"""The name of the agent whose turn runs in this task."""
