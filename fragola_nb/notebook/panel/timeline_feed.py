"""A turn panel's waterfall sent as it grows (issue 34): what changed, paced.

A long turn adds a bar or two a step; the view already has the others. While a run goes on,
the waterfall (``timeline.timeline_shown``) is made at most once per interval and the view gets
a ``{"t": "timeline", "from": k, "bars": [...], ...}`` message: the bars from position ``k`` on
(the ones it does not have) and the waterfall's other fields, which are its totals (small, and
they change with every call). ``panel.js`` joins them to the bars it has. When the run ends
(or pauses, or the panel is synced or detached) the whole waterfall becomes the ``timeline``
trait, the widget state a saved notebook keeps: the views get its last bars that way, in the
trait's update, not also in a message of new bars just before it (two messages holding them,
at the end of every turn).

The first interval counts from the panel's making (``Pacer.restart``): a turn shorter than it
gets its waterfall once, in the trait at its end, not also a message of its first bar or two
just after it starts (issue 34: a message each turn that said nothing lasting).

The interval is ``EVERY`` (four updates a second), or longer when making the waterfall takes
longer: at least ``SHARE`` times what the last one cost, so however long the turn, making it
takes at most about 1/``SHARE`` (1%) of the kernel's time. (The rows, the header and the strip go
at the stream's pace: they say what is happening; the waterfall sums up where the time went.)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from fragola_nb.notebook.stream import Pacer

__all__ = ["EVERY", "SHARE", "TimelineFeed"]

_log = logging.getLogger("fragola_nb")

SHARE = 100
"""The interval is at least this many times the cost of the last waterfall made (a make lays
out every call again: a few ms at 400 calls)."""
EVERY = 0.25
"""Seconds between two makes of a running turn's waterfall at least: a make lays out every call
of the turn again, so at the stream's pace (60 ms) a long fast turn paid for updates a person
does not need (issue 34)."""


class TimelineFeed:
    """Makes the waterfall with ``make`` when due and sends what the view lacks with
    ``send``; ``settle()`` makes it now and returns it whole."""

    def __init__(self, make: Callable[[], dict[str, Any]],
                 send: Callable[[dict[str, Any]], None], lock: threading.RLock) -> None:
        self._make = make
        self._send = send
        self._pacer = Pacer(self._run, lock, interval=EVERY)
        self._pacer.restart()  # the first bars wait for the interval too (see above)
        self._sent: list[dict[str, Any]] = []  # the bars the views have
        self.shown: dict[str, Any] = {}
        """The waterfall as it was made last."""
        self.stopped = False
        self._settling = False  # making it for the trait: the trait's update carries it

    def due(self) -> None:
        """A call ended: the waterfall changed (made now, or when the interval is up)."""
        if not self.stopped:
            self._pacer.due()

    def settle(self) -> dict[str, Any]:
        """Make the waterfall now; the whole of it, for the trait (whose update brings the
        views what they lack: it is not sent here)."""
        if not self.stopped:
            self._settling = True
            try:
                self._pacer.flush()
            finally:
                self._settling = False
        return self.shown

    def stop(self) -> None:
        """No more updates (a detached panel keeps what it shows)."""
        self.stopped = True
        self._pacer.cancel()

    def hello(self) -> dict[str, Any]:
        """The whole waterfall, for a view that has none of it."""
        self._sent = list(self.shown.get("bars", ()))
        return {**self.shown, "t": "timeline", "from": 0, "bars": self._sent}

    def _run(self) -> None:
        try:
            began = time.perf_counter()
            shown = self._make()
            self._pacer.interval = max(EVERY, SHARE * (time.perf_counter() - began))
            self._show(shown)
        except Exception:  # a view must not break the run it shows
            _log.exception("fragola_nb: a panel's timeline failed to update")

    def _show(self, shown: dict[str, Any]) -> None:
        bars: list[dict[str, Any]] = list(shown.get("bars", ()))
        sent = self._sent
        keep = len(sent) if bars[:len(sent)] == sent else 0  # bars placed before: all again
        if shown == self.shown and keep == len(sent):
            return
        self.shown, self._sent = shown, bars
        if not self._settling:
            self._send({**shown, "t": "timeline", "from": keep, "bars": bars[keep:]})
