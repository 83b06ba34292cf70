"""Hooks: a preset put on an agent in one call, and taken off again in one call.

Fragola (0.1.1) packages reusable behaviour as a hook: a function that receives the agent,
registers listeners (and tools, scoped instructions, stores...) and may return a function
that undoes what it did. ``agent.use(hook, name=None)`` runs it; the listeners it registers
on that agent are remembered as its own, so ``agent.remove_hook(name)`` takes those off (and
nothing else) and then calls its dispose function; ``agent.dispose()`` removes every hook.

A hook may be ``async``: it then starts as a task on the running loop, and a turn waits for
the hooks still starting before it calls the model (``await agent.hooks_ready()`` waits by
hand). A hook removed before it finished starting is cancelled.

A fork inherits its parent's hooks as it inherits listeners (a copy: the same listener
functions, now the fork's, which ``fork.remove_hook(name)`` takes off the fork alone); the
dispose function stays with the agent the hook ran on. A hook still starting (async) starts
again on a fork made meanwhile, except on the forks it makes itself while it starts: those
get what it has put on so far (its setup is never re-entered by its own forks, which would
fork again, without end). A hook taken off (by itself, while it starts) can put nothing more
on: a listener or probe it registers after that is a ``BadUsage``. ``dispose()`` takes every
hook off and runs every undo, then raises one ``ListenerError`` naming those that raised.

A session saves each hook under its key (``hook_keys``: its name, else its ``__qualname__``,
``#2``, ``#3``... for a second and third unnamed hook of one ``__qualname__``, as a factory
makes them) and ``load_session(..., hooks=...)`` runs it again on load.

>>> def shout(agent):                                              # doctest: +SKIP
...     agent.on_ai_message(lambda event: {**event.message,
...                                        "content": event.message["content"].upper()})
>>> agent.use(shout, name="shout")                                 # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import BadUsage, ListenerError, exception_text
from fragola_nb.core import probes
from fragola_nb.core.events import EVENTS, Listener, Listeners, is_transient

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.probes import Probe

__all__ = ["Hook", "Hooks", "hook_keys", "hook_name", "preset"]

Hook = Callable[["Agent"], Any]
"""A hook: called with the agent; returns None or a dispose function (sync or async)."""

_log = logging.getLogger("fragola_nb")


@dataclass(eq=False)
class _Entry:
    hook: Hook
    name: str | None
    owner: Hooks
    listeners: list[tuple[str, Listener]] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    """The probes it attached (``probes.attach``: ``fragola_nb.presets.tracing.tracing_hook``)."""
    dispose: Callable[[], Any] | None = None
    task: asyncio.Task[Any] | None = None


_installing: contextvars.ContextVar[_Entry | None] = contextvars.ContextVar(
    "fragola_nb_installing_hook", default=None)
"""The hook running now (in this task), to which the listeners it registers belong."""


def hook_name(hook: Hook) -> str:
    """The name a session saves an unnamed hook under: its ``__qualname__``."""
    name = getattr(hook, "__qualname__", None)
    return name if isinstance(name, str) else type(hook).__qualname__


def hook_keys(used: list[tuple[str | None, Hook]]) -> list[str]:
    """The key each of ``used`` (``agent.hooks_used()``) is saved and given back under: its
    name, else its ``__qualname__``, with ``#2``, ``#3``... for the second and third unnamed
    hook of one ``__qualname__`` (two hooks a factory made), so none stands for another."""
    keys: list[str] = []
    seen: dict[str, int] = {}
    for name, hook in used:
        if name is not None:
            keys.append(name)
            continue
        base = hook_name(hook)
        seen[base] = seen.get(base, 0) + 1
        keys.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return keys


class Hooks:
    """The hooks of one agent, in the order they were put on."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: list[_Entry] = []

    def names(self) -> list[tuple[str | None, Hook]]:
        return [(entry.name, entry.hook) for entry in self._entries]

    def has(self, name: str) -> bool:
        return any(entry.name == name for entry in self._entries)

    def note(self, event: str, listener: Listener) -> None:
        """A listener was put on this agent: it belongs to the hook running now, if any (a
        hook already taken off cannot put one on: a ``BadUsage``, the listener taken off)."""
        entry = self._running_here()
        if entry is not None:
            if entry not in self._entries:
                raise BadUsage(self._gone(entry, f"a {event} listener"))
            entry.listeners.append((event, listener))

    def note_probe(self, probe: Probe) -> None:
        """A probe was attached to this agent: it belongs to the hook running now, if any."""
        entry = self._running_here()
        if entry is not None:
            if entry not in self._entries:
                raise BadUsage(self._gone(entry, "a probe"))
            entry.probes.append(probe)

    def _running_here(self) -> _Entry | None:
        entry = _installing.get()
        return entry if entry is not None and entry.owner is self else None

    @staticmethod
    def _gone(entry: _Entry, what: str) -> str:
        return (f"hook {entry.name or hook_name(entry.hook)!r} was taken off while it started: "
                f"it cannot put {what} on any more (nothing was put on)")

    def owned(self) -> set[tuple[str, int]]:
        """The listeners the hooks put on, as ``(event, id(listener))``."""
        return {(event, id(fn)) for entry in self._entries for event, fn in entry.listeners}

    def use(self, agent: Agent, hook: Hook, name: str | None) -> None:
        if not callable(hook):
            raise BadUsage(f"a hook is a function of the agent, got {type(hook).__name__}")
        if name is not None and (not isinstance(name, str) or not name):
            raise BadUsage(f"a hook's name is a non-empty string, got {name!r}")
        if name is not None and self.has(name):
            raise BadUsage(f"agent {agent.name!r} already has a hook named {name!r}: "
                           f"remove_hook({name!r}) first, or use another name")
        entry = _Entry(hook, name, self)
        self._entries.append(entry)
        token = _installing.set(entry)
        try:
            out = hook(agent)
        except BaseException:
            self._take_off(agent, entry)
            raise
        finally:
            _installing.reset(token)
        if inspect.isawaitable(out):
            self._start(agent, entry, out)
        else:
            self._settle(agent, entry, out)

    def _settle(self, agent: Agent, entry: _Entry, out: Any) -> None:
        if out is not None and not callable(out):
            self._take_off(agent, entry)
            raise BadUsage(f"hook {hook_name(entry.hook)} returned a {type(out).__name__}: a "
                           "hook returns None or a function that undoes it")
        entry.dispose = out

    def _start(self, agent: Agent, entry: _Entry, awaitable: Any) -> None:
        async def start() -> None:
            _installing.set(entry)  # this task's own context: the hook's listeners are its
            try:
                self._settle(agent, entry, await awaitable)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                entry.task = None  # done: taking it off must not cancel this very task
                # Nobody awaits a hook's start: say so, and leave nothing of it behind.
                _log.error("fragola_nb: hook %s of agent %r failed to start: %s",
                           hook_name(entry.hook), agent.name, exc)
                self._take_off(agent, entry)

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(start())
            return
        entry.task = loop.create_task(start())
        entry.task.add_done_callback(lambda _: setattr(entry, "task", None))
        if inspect.iscoroutine(awaitable):
            entry.task.add_done_callback(lambda _: awaitable.close())

    async def ready(self) -> None:
        """Wait for the hooks still starting."""
        tasks = [entry.task for entry in self._entries if entry.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def remove(self, agent: Agent, name: str) -> bool:
        for entry in self._entries:
            if entry.name == name:
                self._take_off(agent, entry, dispose=True)
                return True
        return False

    def dispose(self, agent: Agent) -> None:
        """Take every hook off, the last first, and run every undo; then one
        ``ListenerError`` naming the hooks whose undo raised (the first as its cause)."""
        failed: list[tuple[_Entry, Exception]] = []
        for entry in reversed(list(self._entries)):
            try:
                self._take_off(agent, entry, dispose=True)
            except Exception as exc:  # the others are taken off all the same
                failed.append((entry, exc))
        if failed:
            said = "; ".join(f"{entry.name or hook_name(entry.hook)!r} ({exception_text(exc)})"
                             for entry, exc in failed)
            raise ListenerError(f"dispose() took every hook off agent {agent.name!r}, but the "
                                f"undo of {len(failed)} raised: {said}",
                                event="dispose") from failed[0][1]

    def _take_off(self, agent: Agent, entry: _Entry, *, dispose: bool = False) -> None:
        if entry in self._entries:
            self._entries.remove(entry)
        if entry.task is not None:
            entry.task.cancel()  # not started yet: it never will
        for event, listener in entry.listeners:
            agent.deps.listeners.remove(event, listener)
        for probe in entry.probes:
            probes.detach(agent.deps, probe)
        undo, entry.dispose = entry.dispose, None
        if dispose and undo is not None:
            result = undo()
            if inspect.isawaitable(result):
                _finish(result)

    def clone_into(self, parent: Agent, child: Agent) -> None:
        """Give a fork its parent's listeners and hooks (see the module's docstring)."""
        child.deps.listeners = parent.deps.listeners.copy()
        child.deps.probes = parent.deps.probes
        making = _installing.get()  # a hook forking its agent while it starts
        for entry in self._entries:
            if entry.task is not None and entry is not making:
                # Still starting: it starts on the fork too. Not on a fork it makes itself
                # while it starts: that one gets what it has put on so far (below), or each
                # fork would start it again, and it would fork again, without end.
                child.deps.hooks.use(child, entry.hook, entry.name)
                continue
            kept = [(event, fn) for event, fn in entry.listeners if not is_transient(fn)]
            child.deps.hooks.adopt(_Entry(entry.hook, entry.name, child.deps.hooks, kept,
                                          list(entry.probes)))

    def adopt(self, entry: _Entry) -> None:
        """Keep ``entry``, a hook's copy made for a fork (``clone_into``)."""
        self._entries.append(entry)

    def listeners_of_its_own(self, listeners: Listeners) -> dict[str, list[Listener]]:
        """The listeners not put on by a hook: what a session saves as listeners."""
        owned = self.owned()
        return {event: [fn for fn in fns if (event, id(fn)) not in owned]
                for event, fns in ((name, listeners.of(name)) for name in EVENTS)}


def preset(make: Callable[..., Any], *args: Any, **kwargs: Any) -> Hook:
    """Today's presets as hooks, their own code unchanged: ``agent.use(preset(guardrail,
    no_secrets, on_reject="remove"), name="guard")`` calls ``guardrail(agent, no_secrets,
    on_reject="remove")`` and undoes it with the returned handle's ``remove()``; likewise
    ``lead.use(preset(orchestrate, [lead, writer], flow))``."""
    if not callable(make):
        raise BadUsage(f"preset() takes a preset such as guardrail, got {type(make).__name__}")

    def hook(agent: Agent) -> Callable[[], Any] | None:
        handle = make(agent, *args, **kwargs)
        remove = getattr(handle, "remove", None)
        return remove if callable(remove) else None

    hook.__qualname__ = f"preset({getattr(make, '__name__', type(make).__name__)})"
    return hook


def _finish(awaitable: Any) -> None:
    """Run an async dispose function: as a task on the running loop, else to completion."""

    async def run() -> None:
        try:
            await awaitable
        except Exception as exc:
            _log.error("fragola_nb: a hook's dispose function raised %s", exc)

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(run())
        return
    task = loop.create_task(run())
    _pending.add(task)
    task.add_done_callback(_pending.discard)


_pending: set[asyncio.Task[Any]] = set()
