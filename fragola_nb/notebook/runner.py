"""Starting agent runs from the notebook without blocking the kernel.

A click on Approve or Step arrives while the kernel is idle; the run it starts must not block
the kernel (the next click, Stop, must get through). ``launch`` starts it as a task on the
event loop running in this thread (the kernel's), or on fragola_nb's background loop when no
loop runs here, and reports a failure to ``on_error`` instead of losing it.

``runs_of(view)`` marks the runs started inside it as that view's (a ``%%fragola`` cell's
turn, a panel's Step): the task a run starts in copies the context, so the view's status
listener, called from the run, reads ``started_by()`` and tells its own runs from a later
turn started elsewhere.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from fragola_nb.base.sync import background_loop

__all__ = ["launch", "runs_of", "started_by"]

_running: set[Any] = set()
_STARTED_BY: contextvars.ContextVar[object | None] = contextvars.ContextVar(
    "fragola_nb_started_by", default=None)


@contextlib.contextmanager
def runs_of(view: object | None) -> Iterator[None]:
    """The runs started inside belong to ``view`` (see the module's docstring)."""
    token = _STARTED_BY.set(view)
    try:
        yield
    finally:
        _STARTED_BY.reset(token)


def started_by() -> object | None:
    """The view whose ``runs_of`` the current run was started in, if any."""
    return _STARTED_BY.get()


def launch(
    start: Callable[[], Awaitable[Any]],
    *,
    on_error: Callable[[BaseException], None],
    on_done: Callable[[Any], None] | None = None,
) -> asyncio.Future[Any] | concurrent.futures.Future[Any]:
    """Run ``start()`` in the background; call ``on_done(result)`` or ``on_error(exc)``."""

    async def run() -> Any:
        try:
            result = await start()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # shown in the panel; nothing is raised into the kernel
            on_error(exc)
            return None
        if on_done is not None:
            on_done(result)
        return result

    future: asyncio.Future[Any] | concurrent.futures.Future[Any]
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        future = asyncio.run_coroutine_threadsafe(run(), background_loop())
    else:
        future = loop.create_task(run())
    _running.add(future)  # a task nobody references may be collected mid-run
    future.add_done_callback(_running.discard)
    return future
