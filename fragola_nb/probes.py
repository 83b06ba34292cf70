"""Where instrumentation watches a turn: the seams ``fragola_nb.tracing`` plugs into.

Three places of a turn accept a probe: the whole turn (``driver.turn``), each model call
(``runloop.call_model``) and each tool handler that runs (``runloop._execute``). Each is a
context manager entered in the turn's own task, so what it makes current (an OpenTelemetry
span) is current for the code inside (a tool's own spans nest under it) and never leaks into
another agent's turn. Exceptions pass through it: a probe sees them and must re-raise.

No probe is installed by default, and the core imports nothing for it: a seam then costs
one global read. ``install`` swaps the probe (``fragola_nb.tracing.instrument`` calls it).
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .agent import Agent
    from .model_client.reported import Exchange, ModelReply

__all__ = ["ModelCall", "Probe", "ToolRun", "install", "installed", "model_call", "tool_run",
           "turn"]


@dataclass
class ModelCall:
    """One model call as the probe sees it: the request sent, what the server said while
    answering (``exchange``: usage, response model and id, also when the call fails), and
    the reply once it came (set by the run loop before the seam is left)."""

    request: dict[str, Any]
    exchange: Exchange
    reply: ModelReply | None = None


@dataclass
class ToolRun:
    """One tool handler run: the tool's name, the call id, the arguments the model sent,
    and the handler's ``result`` once it returned (set by the run loop)."""

    name: str
    id: str
    arguments: dict[str, Any]
    result: Any = None


class Probe(Protocol):
    def turn(self, agent: Agent) -> AbstractContextManager[object]: ...

    def model_call(self, agent: Agent, call: ModelCall) -> AbstractContextManager[object]: ...

    def tool_run(self, agent: Agent, run: ToolRun) -> AbstractContextManager[object]: ...


_probe: Probe | None = None


def install(probe: Probe | None) -> Probe | None:
    """Make ``probe`` watch every agent's turns from now on (None: no probe); return the
    one it replaces."""
    global _probe
    previous, _probe = _probe, probe
    return previous


def installed() -> Probe | None:
    return _probe


def turn(agent: Agent) -> AbstractContextManager[object]:
    probe = _probe
    return contextlib.nullcontext() if probe is None else probe.turn(agent)


def model_call(agent: Agent, call: ModelCall) -> AbstractContextManager[object]:
    probe = _probe
    return contextlib.nullcontext() if probe is None else probe.model_call(agent, call)


def tool_run(agent: Agent, run: ToolRun) -> AbstractContextManager[object]:
    probe = _probe
    return contextlib.nullcontext() if probe is None else probe.tool_run(agent, run)
