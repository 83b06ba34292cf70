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
    from fragola_nb.core.conversation import RunDeps
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
_NOTHING = contextlib.nullcontext()
"""A seam no probe watches (``nullcontext`` holds no state: one serves every turn)."""


def install(probe: Probe | None) -> Probe | None:
    """Make ``probe`` watch every agent's turns from now on (None: no probe); return the
    one it replaces."""
    global _probe
    previous, _probe = _probe, probe
    return previous


def installed() -> Probe | None:
    return _probe


def attach(deps: RunDeps, probe: Probe) -> None:
    """Make ``probe`` watch the turns of the agent ``deps`` belongs to (``agent.deps``; and
    those of forks made from now on); a hook running now owns it (see
    ``fragola_nb.core.hooks``)."""
    deps.hooks.note_probe(probe)  # first: a hook already taken off attaches nothing
    deps.probes = (*deps.probes, probe)


def detach(deps: RunDeps, probe: Probe) -> bool:
    """Stop ``probe`` watching (once, where attached twice); False when it was not."""
    own = list(deps.probes)
    for index, attached in enumerate(own):
        if attached is probe:
            del own[index]
            deps.probes = tuple(own)
            return True
    return False


def _watching(deps: RunDeps) -> tuple[Probe, ...]:
    own = deps.probes
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


def _seam(deps: RunDeps, enter: Callable[[Probe], AbstractContextManager[object]]
          ) -> AbstractContextManager[object]:
    """``enter`` of every probe watching the agent, nested; nothing when none watches."""
    found = _watching(deps)
    if not found:
        return _NOTHING
    return enter(found[0]) if len(found) == 1 else _all([enter(p) for p in found])


def turn(deps: RunDeps) -> AbstractContextManager[object]:
    return _seam(deps, lambda probe: probe.turn(deps.context.agent))


def model_call(deps: RunDeps, call: ModelCall) -> AbstractContextManager[object]:
    return _seam(deps, lambda probe: probe.model_call(deps.context.agent, call))


def tool_run(deps: RunDeps, run: ToolRun) -> AbstractContextManager[object]:
    return _seam(deps, lambda probe: probe.tool_run(deps.context.agent, run))
