"""The worker side of ``agent.batch(..., backend="ray")``: what a Ray worker is sent, and the
actor that runs inputs there.

A ``Definition`` is everything a worker needs to run the batch's inputs as the notebook
would: the agent's snapshot as a session document (options, instructions, the history
prefix, stores, listener and hook names; credentials in model settings left out by the
session's own rule), its tools, listeners and hooks (pickled by Ray's cloudpickle: functions
of an importable module by import path, others by value; the hooks are put on again when the
snapshot loads), and a ``Recipe`` for the worker's own ``Fragola``.
No API key is ever in it: a worker's ``Fragola`` reads ``OPENAI_API_KEY`` (and any other
credential) from the worker's environment.

``BatchWorker`` is the actor class (made remote by ``raybackend``; nothing here imports
Ray). Each actor builds its ``Fragola`` and loads the snapshot once, then runs the chunks of
inputs it is given on its own event loop, at most ``concurrency`` at once, and yields one
``RowReport`` per input as it finishes (a Ray streaming generator), so the notebook's rows
and progress bar advance input by input.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import time
from asyncio import FIRST_COMPLETED
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fragola_nb.core.fragola import Fragola
from fragola_nb.core.timing import ToolTiming
from fragola_nb.core.usage import CallUsage
from fragola_nb.experiments.conversation import Talk, run_item
from fragola_nb.experiments.shared import answer_text, error_line, talk_status

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.events import Listener
    from fragola_nb.core.hooks import Hook
    from fragola_nb.core.tools import Tool
    from fragola_nb.models.client import RateLimit

__all__ = ["BatchWorker", "Definition", "Recipe", "RowReport"]


@dataclass(frozen=True)
class Recipe:
    """How a worker makes its ``Fragola``: the user's ``factory``, else a scripted model
    with the same brain and manner (``scripted``), else ``Fragola(model, base_url=...,
    **options)`` with the key from the worker's environment."""

    model: str
    base_url: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    json_mode: str = "auto"
    json_found: Mapping[str, str] = field(default_factory=dict)
    prices: Mapping[str, Any] = field(default_factory=dict)
    scripted: Mapping[str, Any] | None = None
    factory: Callable[[], Fragola] | None = None
    rate_limit: RateLimit | None = None
    """This worker's share of the Fragola's rate limit."""

    def make(self) -> Fragola:
        if self.factory is not None:
            made = self.factory()
            if not isinstance(made, Fragola):
                raise TypeError(f"RayBackend(fragola=...) must return a Fragola, got "
                                f"{type(made).__name__}")
            return made
        if self.scripted is not None:
            fragola = Fragola.scripted(model=self.model, prices=dict(self.prices),
                                       rate_limit=self.rate_limit, **self.scripted)
        else:
            fragola = Fragola(self.model, base_url=self.base_url, prices=dict(self.prices),
                              json_mode=self.json_mode, rate_limit=self.rate_limit,
                              **self.options)
        fragola.json_modes = self.json_found
        return fragola


@dataclass(frozen=True)
class Definition:
    """What every worker of one batch is sent (once, through Ray's object store)."""

    session: str
    """The agent's snapshot, as ``session_to_json`` writes it."""
    tools: tuple[Tool, ...]
    listeners: Mapping[str, Listener]
    recipe: Recipe
    name: str
    """The agent's name: the worker's forks are named ``NAME-batchINDEX`` as locally."""
    hooks: Mapping[str, Hook] = field(default_factory=dict)
    """The agent's hooks (``agent.use``), under the keys its session document names them
    by: a hook's listeners are saved as the hook, so loading needs the hook itself."""


@dataclass(frozen=True)
class RowReport:
    """One input, as its worker saw it end: the row's fields and the fork's state, from
    which the notebook rebuilds ``row.fork`` on its own ``Fragola``."""

    index: int
    status: str
    answer: str | None = None
    error: str | None = None
    seconds: float | None = None
    calls: tuple[CallUsage, ...] = ()
    messages: tuple[dict[str, Any], ...] | None = None
    """The fork's own messages (after the prefix); None when no fork was made."""
    step_count: int = 0
    agent_status: str = "idle"
    outcome: str | None = None
    pending: tuple[dict[str, Any], ...] = ()
    """Calls waiting for a person (session records, see ``sessions.dump``)."""
    stores: tuple[tuple[str, Any], ...] = ()
    """The fork's own stores' values, by namespace, as its tools left them."""
    tools: tuple[ToolTiming, ...] = ()
    """The tool calls that ran on the worker, timed (``fork.usage.tools``): with ``calls``,
    the row's turn can be drawn as a timeline in the notebook as a local one is."""
    ended: str | None = None
    """Why a conversation ended (``evaluate``'s ``turns`` and ``SimulatedUser`` cases)."""
    turns: tuple[Any, ...] = ()
    user_calls: tuple[CallUsage, ...] = ()
    """A simulated user's own calls, counted apart."""


class BatchWorker:
    """A Ray actor running inputs of one batch (see the module's docstring)."""

    def __init__(self, definition: Definition, concurrency: int) -> None:
        from fragola_nb.sessions import session_from_json

        self.fragola = definition.recipe.make()
        session = session_from_json(definition.session, self.fragola,
                                    tools=definition.tools, listeners=definition.listeners,
                                    hooks=definition.hooks)
        self.base: Agent = session.agents[0]
        self.name = definition.name
        self.concurrency = concurrency
        self.running: dict[int, Agent] = {}
        self.stopping = False
        self._gate: asyncio.Semaphore | None = None

    def ready(self) -> int:
        """The worker's process id, once its ``Fragola`` and snapshot are ready."""
        return os.getpid()

    async def run(self, chunk: list[tuple[int, Any]]) -> AsyncIterator[list[RowReport]]:
        """Run ``(index, input)`` pairs, yielding the reports of those that finished since
        the last yield (one by one when inputs are slow, a few at a time when they are
        quick: each yield is a Ray object, which costs more than a scripted answer)."""
        if self._gate is None:  # made on the actor's own loop
            self._gate = asyncio.Semaphore(self.concurrency)
        gate = self._gate
        tasks = [asyncio.ensure_future(self._one(gate, index, item)) for index, item in chunk]
        try:
            waiting = set(tasks)
            while waiting:
                done, waiting = await asyncio.wait(waiting, return_when=FIRST_COMPLETED)
                yield [task.result() for task in tasks if task in done]
        finally:  # cancelled (ray.cancel, a stopped batch): nothing is left running
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _one(self, gate: asyncio.Semaphore, index: int, item: Any) -> RowReport:
        async with gate:
            if self.stopping:
                return RowReport(index, "not run")
            started = time.perf_counter()
            fork: Agent | None = None
            talk: Talk | None = None
            error: str | None
            try:
                fork = self.base.detached_fork(f"{self.name}-batch{index}")
                self.running[index] = fork
                talk = await run_item(fork, item)
            except Exception as exc:
                status, error = "failed", error_line(exc)
            else:
                status, error = talk_status(fork, talk)
            finally:
                self.running.pop(index, None)
            return report(index, fork, status, error, time.perf_counter() - started, talk)

    async def stop(self, at_once: bool) -> None:
        """``agent.stop()`` (``at_once=False``) or ``stop_sync()`` in the notebook: start
        nothing more; at once, also stop the inputs running (their rows say "stopped")."""
        self.stopping = True
        if at_once:
            for fork in list(self.running.values()):
                fork.stop_sync()


def report(index: int, fork: Agent | None, status: str, error: str | None,
           seconds: float, talk: Talk | None = None) -> RowReport:
    if fork is None:
        return RowReport(index, status, error=error, seconds=seconds)
    talk = talk or Talk(None, None)
    from fragola_nb.sessions.save import pending_record

    return RowReport(
        index, status, answer_text(fork, fork.fork_point), error, seconds,
        calls=fork.usage.calls, messages=tuple(fork.messages_since(fork.fork_point)),
        step_count=fork.step_count, agent_status=fork.status, outcome=fork.outcome,
        pending=tuple(pending_record(call) for call in fork.pending),
        stores=tuple((name, store.get()) for name, store in fork.stores.items()
                     if _picklable(store.get())),
        tools=fork.usage.tools, ended=talk.ended, turns=talk.turns, user_calls=talk.user_calls)


def _picklable(value: Any) -> bool:
    """A value a report can carry (one that cannot stays on the worker, and the fork made in
    the notebook keeps the prefix's value)."""
    try:
        pickle.dumps(value)
    except Exception:
        return False
    return True
