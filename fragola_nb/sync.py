"""Running a call to completion from synchronous code, in a notebook or a plain script.

Every call runs on one background event loop owned by fragola_nb, in a daemon thread, and the
caller's thread waits for it. This works the same whether the caller's thread already runs an
event loop (Jupyter) or not, without patching asyncio. Ctrl-C (``KeyboardInterrupt``) while
waiting cancels the call, which leaves the agent idle with a valid history, then re-raises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The shared background loop, started on first use."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=_serve, args=(loop,), name="fragola_nb-loop", daemon=True
            )
            thread.start()
            _loop = loop
        return _loop


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
    """
    finished = threading.Event()

    async def runner() -> T:
        try:
            return await awaitable
        finally:
            finished.set()

    future = asyncio.run_coroutine_threadsafe(runner(), background_loop())
    try:
        return future.result(timeout)
    except KeyboardInterrupt:
        _cancel_and_wait(future, finished)
        raise
    except concurrent.futures.TimeoutError:
        _cancel_and_wait(future, finished)
        raise TimeoutError(f"run_sync: the call did not finish within {timeout} s") from None


def _cancel_and_wait(future: concurrent.futures.Future[Any], finished: threading.Event) -> None:
    # Cancelling delivers CancelledError inside the run, which repairs the history; wait for
    # that repair so the caller sees a valid agent when the exception reaches it.
    future.cancel()
    finished.wait(10)
