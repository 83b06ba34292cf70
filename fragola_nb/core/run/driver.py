"""Driving a turn: the task around the run loop, stopping it, and settling the agent.

``drive`` runs one ``user_message``/``step``/``json`` call as a task (so ``stop_sync`` can
cancel it from anywhere). Everything that belongs to that one call lives in a ``Run`` the
agent's ``Conversation`` holds while the call is in flight (``conversation.run``): the
conversation and the run's ``RunDeps``, its budget and request settings, its task and loop,
the stop flags, the tool call whose handler runs now, and the async observers to wait for.
``settle`` ends every turn the same way, whatever ended it: unanswered calls answered
"cancelled", the outcome recorded, the status back to idle or waiting. It cannot fail
half-way: the status is set whatever happens, and a listener's error is raised only once the
state is complete.

An agent's status changes under its lock, so a ``stop()``/``stop_sync()`` from another
thread and a ``step()`` starting on the agent's loop never both act on one waiting agent.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import ListenerError
from fragola_nb.base.interrupt_ticker import kept_awake
from fragola_nb.core import probes
from fragola_nb.core.events import claim, release
from fragola_nb.core.run import loop as runloop
from fragola_nb.core.state import AgentState, Outcome
from fragola_nb.models.client.asking import CURRENT_AGENT

if TYPE_CHECKING:
    from fragola_nb.core.conversation import Conversation, RunDeps
    from fragola_nb.core.jsonshapes import Shape

__all__ = ["CURRENT_AGENT", "Run", "StopNow", "drive", "settle", "stop", "stop_sync"]


HOP_WAIT = 1.0
"""Seconds ``stop`` on a waiting agent waits for the agent's loop to settle it there before
settling it in the caller's thread (the loop is blocked, maybe by that very caller)."""


class StopNow(BaseException):
    """``stop_sync()`` called from inside the run it stops."""


@dataclass(eq=False)
class Run:
    """One ``user_message``/``step``/``json`` call in flight, on ``conversation`` (the
    agent's state) with ``deps`` (what it depends on)."""

    conversation: Conversation
    deps: RunDeps
    loop: asyncio.AbstractEventLoop
    budget: int
    settings: dict[str, Any]
    """Request settings of this call only (``agent.json``'s ``response_format``)."""
    shape: Shape | None = None
    """``agent.json``'s strategy: what else its requests carry, and its answer tool."""
    task: asyncio.Task[AgentState] | None = None
    began: bool = False
    """The task started, so it settles the agent itself however it ends."""
    stop_requested: bool = False
    """``stop()``: end at the next boundary."""
    stop_asked: bool = False
    """``stop()`` or ``stop_sync()`` was called during this call; unlike ``stop_requested``,
    kept once the turn settles (``agent.json`` does not go on with another strategy)."""
    cancel_requested: bool = False
    """``stop_sync()``: the task was cancelled; the call returns the state."""
    running_call: str | None = None
    """The id of the tool call whose handler (or ``tool_call`` listener) runs now."""
    observers: list[asyncio.Task[Any]] = field(default_factory=list)
    """Async observers fired during the call, awaited before it returns."""

    def release_observers(self) -> None:
        """A call that ended early (an error, cancellation, ``stop_sync()``) does not wait for
        its async observers. They go on as observers fired outside a call do, their errors
        logged."""
        tasks, self.observers = self.observers, []
        release(tasks)

    def add_observers(self, tasks: list[asyncio.Task[Any]]) -> None:
        claim(tasks)
        self.observers.extend(tasks)

    async def drain_observers(self) -> None:
        tasks, self.observers = self.observers, []
        if tasks:
            results = await asyncio.gather(*tasks, return_exceptions=True)
            for result in results:
                if isinstance(result, ListenerError):
                    raise result


async def drive(
    conv: Conversation,
    deps: RunDeps,
    start: Callable[[], Awaitable[None]] | None,
    budget: int,
    turn_settings: dict[str, Any] | None = None,
    *,
    resuming: bool,
    shape: Shape | None = None,
    runs: list[Run] | None = None,
) -> AgentState:
    """Run one call of an agent (its ``conv`` and ``deps``) to its end: ``start``
    (storing the user message, say), then the run loop within ``budget`` steps,
    ``turn_settings`` added to each request (and ``shape``'s additions, for ``agent.json``).
    ``runs`` gets the call's ``Run``, to read once the call has ended (``agent.json``: was a
    stop asked before a refusal?)."""
    loop = asyncio.get_running_loop()
    run = Run(conv, deps, loop, budget, dict(turn_settings or {}), shape)
    if runs is not None:
        runs.append(run)
    with conv.lock:
        conv.check_can_start(resuming=resuming)
        previous = conv.status
        conv.run = run
        conv.home_loop = weakref.ref(loop)
        try:
            conv.set_status("generating")
        except BaseException:
            # A status_change listener raised (or was interrupted) before anything ran: stay
            # as we were, usable.
            conv.status, conv.run = previous, None
            raise
    task = loop.create_task(turn(run, start))
    run.task = task
    try:
        with kept_awake():  # a Jupyter interrupt reaches a cell waiting on a silent server
            return await task
    except asyncio.CancelledError:
        if not run.began:
            # Cancelled before its first step, the turn did nothing, not even settle: the
            # agent would stay "generating" for good.
            settle(conv, "stopped")
        if run.cancel_requested and task.done():
            return conv.state()  # stop_sync(): the turn already settled
        raise
    finally:
        if conv.run is run:
            conv.run = None
        run.release_observers()


async def turn(run: Run, start: Callable[[], Awaitable[None]] | None) -> AgentState:
    with probes.turn(run.deps):  # a tracing span of the whole turn (fragola_nb.presets.tracing)
        return await _turn(run, start)


async def _turn(run: Run, start: Callable[[], Awaitable[None]] | None) -> AgentState:
    conv = run.conversation
    CURRENT_AGENT.set(run.deps.name)
    run.began = True
    try:
        if start is not None:
            await start()
        outcome = await runloop.run(run)
    except StopNow:
        outcome = "stopped"
    except asyncio.CancelledError:
        settle(conv, "stopped")
        if run.cancel_requested:
            return conv.state()
        raise
    except BaseException as exc:
        try:
            settle(conv, None)
        except BaseException as late:
            if not isinstance(late, ListenerError):
                raise  # an interrupt while settling wins; the state is complete either way
            exc.add_note(f"fragola_nb: while the turn ended, {late}")
        raise
    settle(conv, outcome)
    await run.drain_observers()
    return conv.state()


def settle(conv: Conversation, outcome: Outcome | None) -> None:
    """End a turn: answer what must be answered and leave a valid state.

    Nothing here can leave the agent "generating": a listener that raises while the turn is
    settled (or an interrupt) does not stop the settling; the first such error is raised once
    the state is complete.
    """
    run = conv.run
    error: BaseException | None = None
    try:
        if outcome != "paused":
            error = repair(conv, run.running_call if run is not None else None)
    except BaseException as exc:  # pragma: no cover - repair catches what it can meet
        error = exc
    finally:
        if run is not None:
            run.stop_requested = False
            run.running_call = None
        conv.outcome = outcome
        try:
            conv.set_status("waiting" if outcome == "paused" else "idle")
        except BaseException as exc:  # the status is set before listeners hear of it
            error = error or exc
    if error is not None:
        raise error


def repair(conv: Conversation, running: str | None = None) -> BaseException | None:
    """Answer every unanswered call as cancelled (``running``, whose handler was
    interrupted, says so); return the first listener error."""
    conv.pending.clear()
    error: BaseException | None = None
    for call in conv.unanswered_calls():
        text = runloop.INTERRUPTED if call["id"] == running else runloop.CANCELLED
        try:
            conv.answer(call["id"], text, "cancelled")
        except StopNow:
            pass  # stop_sync() from a listener while the turn already ends: nothing to stop
        except BaseException as exc:  # the answer is stored before listeners hear of it
            # KeyboardInterrupt too: stopping here would leave calls unanswered and the
            # agent "generating" for good; it is raised once the state is complete.
            error = error or exc
    return error


def stop(conv: Conversation) -> None:
    """Finish the operation in flight, then return to idle (pending calls are cancelled)."""
    run = conv.run
    if conv.status == "generating" and run is not None:
        run.stop_requested = run.stop_asked = True
    elif conv.status == "waiting":
        _stop_waiting(conv)


def stop_sync(conv: Conversation) -> None:
    """Cancel the run at once, an HTTP request in flight included; the history is repaired
    and the interrupted ``user_message``/``step`` returns the state."""
    if conv.status == "waiting":
        _stop_waiting(conv)
    run = conv.run
    if conv.status != "generating" or run is None:
        if run is not None:
            _end_wait_on_observers(run)
        return
    run.stop_requested = run.stop_asked = True
    task = run.task
    if task is None or not run.began:
        # The turn has not begun: cancelled now, it would not even store the user message
        # that started it. Stopped at its first boundary, it keeps it and calls no model.
        return
    run.cancel_requested = True
    if _running_in(run.loop) and asyncio.current_task() is task:
        raise StopNow()
    _cancel(task, run.loop)


def _stop_waiting(conv: Conversation) -> None:
    """Cancel a waiting agent's pending calls and make it idle, on the agent's own loop when
    that loop runs in another thread (where its ``step()`` would start), else here; the
    agent's lock keeps a ``step()`` starting meanwhile from acting on the same calls."""

    def settle_if_waiting() -> None:
        with conv.lock:
            if conv.status == "waiting":
                settle(conv, "stopped")

    home = conv.home_loop() if conv.home_loop is not None else None
    if home is not None and home.is_running() and not _running_in(home):
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def on_loop() -> None:
            try:
                settle_if_waiting()
                done.set_result(None)
            except BaseException as exc:
                done.set_exception(exc)

        try:
            home.call_soon_threadsafe(on_loop)
        except RuntimeError:  # closed meanwhile
            pass
        else:
            try:
                done.result(HOP_WAIT)
                return
            except concurrent.futures.TimeoutError:
                pass  # the loop is blocked (maybe by this thread's caller): settle here
    settle_if_waiting()


def _end_wait_on_observers(run: Run) -> None:
    """A turn that settled still waits for its async observers before its call returns. A
    hung one would hold the call for good: stopping cancels that wait (and the observers);
    the state is already complete, its outcome kept."""
    task = run.task
    if task is None or task.done() or not run.began:
        return
    if _running_in(run.loop) and asyncio.current_task() is task:
        return  # a listener of the settling itself: the call returns once it is done
    run.cancel_requested = True
    _cancel(task, run.loop)


def _running_in(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _cancel(task: asyncio.Task[AgentState], loop: asyncio.AbstractEventLoop) -> None:
    if _running_in(loop):
        task.cancel()
    else:
        loop.call_soon_threadsafe(task.cancel)
