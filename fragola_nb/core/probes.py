"""Where instrumentation watches a turn: the seams ``fragola_nb.presets.tracing`` plugs into.

Three places of a turn accept a probe: the whole turn (``driver.turn``), each model call
(``runloop.call_model``) and each tool handler that runs (``runloop._execute``). Each is a
context manager entered in the turn's own task, so what it makes current (an OpenTelemetry
span) is current for the code inside (a tool's own spans nest under it) and never leaks into
another agent's turn. Exceptions pass through it: a probe sees them and must re-raise.

No probe is installed by default, and the core imports nothing for it: a seam then costs
one global read and one attribute read. ``install`` swaps the probe that watches every agent
(``fragola_nb.presets.tracing.instrument`` calls it); ``attach`` gives one agent a probe of its own
(``fragola_nb.presets.tracing.tracing_hook``), which watches that agent's turns, in addition to the
installed one, and its forks' (a hook attaching it owns it: ``remove_hook`` detaches it, on
a fork from that fork alone).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.models.client.reported import Exchange, ModelReply

__all__ = ["ModelCall", "Probe", "ToolRun", "attach", "detach", "install", "installed",
           "model_call", "tool_run", "turn"]


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


def attach(agent: Agent, probe: Probe) -> None:
    """Make ``probe`` watch ``agent``'s turns (and those of forks made from now on); a hook
    running now owns it (see ``fragola_nb.core.hooks``)."""
    agent._hooks.note_probe(probe)  # first: a hook already taken off attaches nothing
    agent._probes = (*agent._probes, probe)


def detach(agent: Agent, probe: Probe) -> bool:
    """Stop ``probe`` watching ``agent`` (once, where attached twice); False when it was not."""
    own = list(agent._probes)
    for index, attached in enumerate(own):
        if attached is probe:
            del own[index]
            agent._probes = tuple(own)
            return True
    return False


def _watching(agent: Agent) -> tuple[Probe, ...]:
    own: tuple[Probe, ...] = agent._probes
    probe = _probe
    if probe is None:
        return own
    return (probe, *own) if own else (probe,)


@contextlib.contextmanager
def _all(managers: list[AbstractContextManager[object]]) -> Iterator[object]:
    with contextlib.ExitStack() as stack:
        for manager in managers:
            stack.enter_context(manager)
        yield None


def _seam(agent: Agent, enter: Callable[[Probe], AbstractContextManager[object]]
          ) -> AbstractContextManager[object]:
    """``enter`` of every probe watching ``agent``, nested; nothing when none watches."""
    found = _watching(agent)
    if not found:
        return contextlib.nullcontext()
    return enter(found[0]) if len(found) == 1 else _all([enter(p) for p in found])


def turn(agent: Agent) -> AbstractContextManager[object]:
    return _seam(agent, lambda probe: probe.turn(agent))


def model_call(agent: Agent, call: ModelCall) -> AbstractContextManager[object]:
    return _seam(agent, lambda probe: probe.model_call(agent, call))


def tool_run(agent: Agent, run: ToolRun) -> AbstractContextManager[object]:
    return _seam(agent, lambda probe: probe.tool_run(agent, run))
