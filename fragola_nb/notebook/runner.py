"""Starting agent runs from the notebook without blocking the kernel.

A click on Approve or Step arrives while the kernel is idle; the run it starts must not block
the kernel (the next click, Stop, must get through). ``launch`` starts it as a task on the
event loop running in this thread (the kernel's), or on fragola_nb's background loop when no
loop runs here, and reports a failure to ``on_error`` instead of losing it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from typing import Any

from ..sync import background_loop

__all__ = ["launch"]

_running: set[Any] = set()


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
