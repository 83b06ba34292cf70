"""Keeping the event loop awake while a call waits, so that a Jupyter interrupt gets through.

ipykernel runs an async cell as a task of its own loop, and its SIGINT handler answers an
interrupt by scheduling that task's cancellation with Tornado's ``add_callback``. Called on
the loop's own thread, that is a ``call_soon``, which does not wake a loop asleep in
``select``: while every request waits on a silent server, the interrupt would wait too, for
good with a server that hangs (ipython/ipykernel#881). A loop that wakes now and then lets it
through.

``kept_awake()`` holds one ticker per loop, shared by every call in flight on it (a batch of
hundreds of agents wakes its loop 4 times a second, not 400), only on the main thread:
signals are handled there, and a loop in another thread (``run_sync``'s) has no interrupt to
let through.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

__all__ = ["TICK", "kept_awake"]

TICK = 0.25
"""Seconds between wake-ups: how long an interrupt may wait at most."""

class _Ticker:
    """Wakes its loop every ``TICK`` seconds until cancelled: a timer that sets itself again
    (a task sleeping in a loop did the same, at the cost of a task made and cancelled per
    turn)."""

    __slots__ = ("_cancelled", "_handle", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._cancelled = False
        self._handle = loop.call_later(TICK, self._tick)

    def _tick(self) -> None:
        self._handle = self._loop.call_later(TICK, self._tick)

    def cancel(self) -> None:
        self._cancelled = True
        self._handle.cancel()

    def cancelled(self) -> bool:
        return self._cancelled

    def done(self) -> bool:
        return self._cancelled


_tickers: dict[asyncio.AbstractEventLoop, tuple[int, _Ticker]] = {}
"""The loops kept awake, with how many calls hold each and its ticker."""


@contextlib.contextmanager
def kept_awake() -> Iterator[None]:
    """While inside, the running loop (on the main thread) wakes every ``TICK`` seconds."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    holders, ticker = _tickers.get(loop, (0, None))
    if ticker is None or ticker.done():
        holders, ticker = 0, _Ticker(loop)
    _tickers[loop] = (holders + 1, ticker)
    try:
        yield
    finally:
        holders, ticker = _tickers.pop(loop, (1, ticker))
        if holders > 1:
            _tickers[loop] = (holders - 1, ticker)
        else:
            ticker.cancel()
