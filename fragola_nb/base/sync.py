"""Running a call to completion from synchronous code, in a notebook or a plain script.

Every call runs on one background event loop owned by fragola_nb, in a daemon thread, and the
caller's thread waits for it. This works the same whether the caller's thread already runs an
event loop (Jupyter) or not, without patching asyncio. Ctrl-C (``KeyboardInterrupt``) while
waiting cancels the call, which leaves the agent idle with a valid history, then re-raises.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import inspect
import threading
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

from fragola_nb.base.errors import BadUsage

__all__ = ["run_sync"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The shared background loop, started on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=_serve, args=(loop,), name="fragola_nb-loop", daemon=True
            )
            thread.start()
            _loop, _thread = loop, thread
            atexit.register(_shut_down, loop, thread)
        return _loop


def _shut_down(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """At exit, end the background loop as ``asyncio.run`` ends its own: async generators
    closed (each event loop's HTTP client closes with them), then the loop, so no socket or
    transport is left for the interpreter to warn about."""
    if loop.is_closed() or not thread.is_alive():
        return
    try:
        asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result(5)
    except Exception:  # a hung close: exit anyway
        pass
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    if not thread.is_alive():
        loop.close()


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    # asyncio lets a KeyboardInterrupt or SystemExit raised by a task (a tool handler that
    # raises it) escape run_forever. That would end this thread, and every later call would
    # wait forever on a loop that no longer runs. The task has stored the exception, so the
    # waiting caller receives it from its future; the loop just goes on.
    while True:
        try:
            loop.run_forever()
            return
        except (KeyboardInterrupt, SystemExit):
            continue


def run_sync(awaitable: Awaitable[T], *, timeout: float | None = None) -> T:
    """Run ``awaitable`` to completion and return its result.

    >>> state = run_sync(agent.user_message("Hello"))      # doctest: +SKIP

    Not from a sync tool handler or listener of a call that ``run_sync`` itself runs: that
    code runs on the loop ``run_sync`` would wait for, so it could never finish. Make such a
    tool ``async`` and ``await`` the call instead (``BadUsage`` says so).
    """
    if threading.current_thread() is _thread:
        _close(awaitable)
        raise BadUsage(
            "run_sync() was called from code running on fragola_nb's own loop (a sync tool "
            "or listener of a call run by run_sync), which it would wait for forever: make "
            "that tool or listener async and `await` the call instead")
    finished = threading.Event()
    # Made before the call is handed over, so a Ctrl-C at any point from here on has a future
    # to cancel; the loop checks it before it starts the call.
    future: concurrent.futures.Future[T] = concurrent.futures.Future()
    handed_over = False
    try:
        background_loop().call_soon_threadsafe(_start, awaitable, future, finished)
        handed_over = True
        return future.result(timeout)
    except KeyboardInterrupt:
        _cancel_and_wait(future, finished, 10 if handed_over else 1)
        if not finished.is_set():
            _close(awaitable)  # interrupted before the loop was reached: it never ran
        raise
    except concurrent.futures.TimeoutError:
        _cancel_and_wait(future, finished, 10)
        raise TimeoutError(f"run_sync: the call did not finish within {timeout} s") from None


def _start(awaitable: Awaitable[T], future: concurrent.futures.Future[T],
           finished: threading.Event) -> None:
    """On the background loop: run the call as a task tied to ``future``, unless the
    caller already gave up on it."""
    if future.cancelled():
        _close(awaitable)
        finished.set()
        return

    async def runner() -> T:
        try:
            return await awaitable
        finally:
            finished.set()

    task = asyncio.get_running_loop().create_task(runner())
    task.add_done_callback(lambda done: _pass_outcome(done, future))
    # A cancel from the caller's thread reaches the task on its loop.
    future.add_done_callback(
        lambda f: f.cancelled() and task.get_loop().call_soon_threadsafe(task.cancel))


def _pass_outcome(task: asyncio.Task[T], future: concurrent.futures.Future[T]) -> None:
    # The future stays pending while the task runs (so the caller can cancel it); it is
    # marked running only now, to take the task's outcome.
    if task.cancelled():
        future.cancel()
    elif not future.set_running_or_notify_cancel():
        return  # the caller cancelled it meanwhile
    elif task.exception() is not None:
        future.set_exception(task.exception())
    else:
        future.set_result(task.result())


def _close(awaitable: Awaitable[Any]) -> None:
    """Close a coroutine that will never run, so Python does not warn it was never awaited."""
    if inspect.iscoroutine(awaitable):
        coroutine: Coroutine[Any, Any, Any] = awaitable
        coroutine.close()


def _cancel_and_wait(future: concurrent.futures.Future[Any], finished: threading.Event,
                     seconds: float) -> None:
    # Cancelling delivers CancelledError inside the run, which repairs the history; wait for
    # that repair so the caller sees a valid agent when the exception reaches it.
    future.cancel()
    finished.wait(seconds)
