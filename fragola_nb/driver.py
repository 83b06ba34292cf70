"""Driving a turn: the task around the run loop, stopping it, and settling the agent.

``drive`` runs one ``user_message``/``step``/``json`` call as a task (so ``stop_sync`` can
cancel it from anywhere), ``turn`` is that task (the start of the turn, then
``runloop.run``), and ``settle`` ends every turn the same way, whatever ended it: unanswered
calls answered "cancelled", the outcome recorded, the status back to idle or waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from . import runloop
from .errors import ListenerError
from .state import AgentState, Outcome

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["StopNow", "drive", "settle", "stop", "stop_sync"]


class StopNow(BaseException):
    """``stop_sync()`` called from inside the run it stops."""


async def drive(
    agent: Agent,
    start: Callable[[], Awaitable[None]] | None,
    budget: int,
    turn_settings: dict[str, Any] | None = None,
) -> AgentState:
    """Run one call of ``agent`` to its end: ``start`` (storing the user message, say), then
    the run loop within ``budget`` steps, ``turn_settings`` added to each request."""
    loop = asyncio.get_running_loop()
    agent._turn_settings = dict(turn_settings or {})
    agent._stop_requested = False
    agent._cancel_requested = False
    previous = agent._status
    agent._in_turn = True
    try:
        agent._set_status("generating")
    except BaseException:
        # A status_change listener raised (or was interrupted) before anything ran: stay
        # as we were, usable.
        agent._status, agent._in_turn = previous, False
        raise
    agent._turn_began = False
    task = loop.create_task(turn(agent, start, budget))
    agent._task, agent._task_loop = task, loop
    try:
        return await task
    except asyncio.CancelledError:
        if not agent._turn_began:
            # Cancelled before its first step, the turn did nothing, not even settle: the
            # agent would stay "generating" for good.
            settle(agent, "stopped")
        if agent._cancel_requested and task.done():
            return agent.state  # stop_sync(): the turn already settled
        raise
    finally:
        agent._task = agent._task_loop = None
        agent._in_turn = False
        agent._release_observers()


async def turn(
    agent: Agent, start: Callable[[], Awaitable[None]] | None, budget: int
) -> AgentState:
    agent._turn_began = True
    try:
        if start is not None:
            await start()
        outcome = await runloop.run(agent, budget)
    except StopNow:
        outcome = "stopped"
    except asyncio.CancelledError:
        settle(agent, "stopped")
        if agent._cancel_requested:
            return agent.state
        raise
    except BaseException:
        with contextlib.suppress(ListenerError):  # report the error that ended the turn
            settle(agent, None)
        raise
    settle(agent, outcome)
    await agent._drain_observers()
    return agent.state


def settle(agent: Agent, outcome: Outcome | None) -> None:
    """End a turn: answer what must be answered and leave a valid state.

    A listener that raises while the turn is settled does not stop the settling (that
    would leave the agent "generating" with calls unanswered); its error is raised once
    the state is complete.
    """
    error = repair(agent) if outcome != "paused" else None
    agent._turn_settings = {}
    agent._stop_requested = False
    agent._outcome = outcome
    try:
        agent._set_status("waiting" if outcome == "paused" else "idle")
    except ListenerError as exc:
        error = error or exc
    if error is not None:
        raise error


def repair(agent: Agent) -> BaseException | None:
    """Answer every unanswered call as cancelled; return the first listener error."""
    agent._pending.clear()
    error: BaseException | None = None
    for call in runloop.unanswered_calls(agent):
        try:
            agent._answer(call["id"], runloop.CANCELLED, "cancelled")
        except StopNow:
            pass  # stop_sync() from a listener while the turn already ends: nothing to stop
        except BaseException as exc:  # the answer is stored before listeners hear of it
            # KeyboardInterrupt too: stopping here would leave calls unanswered and the
            # agent "generating" for good; it is raised once the state is complete.
            error = error or exc
    return error


def stop(agent: Agent) -> None:
    """Finish the operation in flight, then return to idle (pending calls are cancelled)."""
    if agent._status == "generating":
        agent._stop_requested = True
    elif agent._status == "waiting":
        settle(agent, "stopped")


def stop_sync(agent: Agent) -> None:
    """Cancel the run at once, an HTTP request in flight included; the history is repaired
    and the interrupted ``user_message``/``step`` returns the state."""
    if agent._status == "waiting":
        settle(agent, "stopped")
    if agent._status != "generating":
        _end_wait_on_observers(agent)
        return
    agent._stop_requested = True
    task, loop = agent._task, agent._task_loop
    if task is None or loop is None or not agent._turn_began:
        # The turn has not begun: cancelled now, it would not even store the user message
        # that started it. Stopped at its first boundary, it keeps it and calls no model.
        return
    agent._cancel_requested = True
    if _running_in(loop) and asyncio.current_task() is task:
        raise StopNow()
    _cancel(task, loop)


def _end_wait_on_observers(agent: Agent) -> None:
    """A turn that settled still waits for its async observers before its call returns. A
    hung one would hold the call for good: stopping cancels that wait (and the observers);
    the state is already complete, its outcome kept."""
    task, loop = agent._task, agent._task_loop
    if task is None or loop is None or task.done() or not agent._turn_began:
        return
    if _running_in(loop) and asyncio.current_task() is task:
        return  # a listener of the settling itself: the call returns once it is done
    agent._cancel_requested = True
    _cancel(task, loop)


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
