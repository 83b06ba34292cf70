"""What a panel sends while a run goes on, paced (issue 34).

A long turn changes a panel a few times a step: a row is added, the call's time and then its
result patch it, the status strip says "calling", "running add", "calling" again, the header
counts a step and its tokens. Each was a comm message of its own (about 2 ms of a busy kernel
each, 8 a step) and the header counted the turn's usage over every call each time. The
``Outbox`` keeps them and sends, at most once per ``INTERVAL``, the rows that changed
(each once, as it is then) and the header (made then, once) and the strip, in one message:
the rows message carries their values (``state``, which ``panel.js`` sets on its model, as a
state update would), a state update goes alone when no row changed (two comm messages a
paced update were one too many: each costs a busy kernel about a millisecond). The first
change after a quiet interval goes at once; the last one of a burst goes when the interval is
up (the trailing flush, on the event loop). The panel flushes
it itself when the status changes, so a run's start and end show at once.

The streamed reply rides along too. Each step of a fast turn streamed its call ("→ add(...)"),
then its last text and its clear as the reply was stored: two or three messages a step outside
the pace (issue 34). While the outbox waits, what the stream would send waits with it, and
its message carries the stream whole as the kernel has it (``stream``, ``stopped``; a
``rows`` message with them replaces the view's streamed text); the clear of a stored reply
always goes in the message that brings its row, so the view never shows both, nor neither.
So does what streams just after an update that brought rows, within its interval: in a fast
run, the next step's call streamed in a message of its own right after each paced update (as
many messages as the updates themselves; issue 34); it goes with the next one now (``burst``).
A stream alone (a long reply, nothing else changing) goes as before: its new text only, paced.

While the outbox waits, the panel does not even read what a run adds: a step's state updates
only mark it unread, and the outbox's update reads the messages added since (``catch_up``),
making their rows in one go. Reading them a step at a time, each in an event of its own, was
the larger part of what a panel cost a long fast turn (issue 34). What a person does, a status
change, and what reads the rows (``panel.rows``, a new view, the waterfall, the static copy)
read them first.

The traits keep their values in the kernel as they are set (``panel.strip`` is current); only
what goes on the wire waits.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from fragola_nb.notebook.stream import Pacer

__all__ = ["INTERVAL", "PACED", "Outbox"]

_log = logging.getLogger("fragola_nb")

PACED = frozenset({"head", "strip"})
"""The traits whose updates go with the outbox."""

INTERVAL = 0.15
"""Seconds between two updates of the outbox at least (about 7 a second). A fast run's rows
come in bursts that no one reads row by row; each update costs the kernel its message and the
page a draw of the rows, a layout and a paint. At the stream's pace (60 ms) the page of a
200-step turn drew 70 frames in 1.2 s, and took the kernel's CPU from it on a 2-core machine
(issue 34). The first change after a quiet interval still goes at once, and a reply streaming
alone keeps the stream's pace."""


class Outbox:
    """Rows and trait updates of one panel, sent together, paced. ``send`` sends a custom
    message, ``send_state`` the named traits, ``make_head`` sets the ``head`` trait,
    ``streamed`` says the streamed text the views are to have and whether it is stopped,
    ``state`` the named traits' values as the widget's state holds them (a rows message
    carries them: one message, not two), ``catch_up`` makes what the view put off while the
    outbox waited (a fast turn's rows: made in one go when they go)."""

    def __init__(self, send: Callable[[dict[str, Any]], None],
                 send_state: Callable[[list[str]], None], make_head: Callable[[], None],
                 lock: threading.RLock,
                 streamed: Callable[[], tuple[str, bool]] = lambda: ("", False),
                 state: Callable[[list[str]], dict[str, Any]] = lambda keys: {},
                 catch_up: Callable[[], None] = lambda: None) -> None:
        self._send, self._send_state, self._make_head = send, send_state, make_head
        self._state = state
        self._catch_up = catch_up
        self._streamed = streamed
        self._pacer = Pacer(self.run, lock, interval=INTERVAL)
        self._rows: dict[int, dict[str, Any]] = {}  # by position: each row once, as it is
        self._keys: set[str] = set()
        self._head = False  # the header is to be made
        self._stream = False  # the streamed text goes with the next message
        self._running = False
        self._rows_at = float("-inf")  # when rows went last (``burst``)

    @property
    def waiting(self) -> bool:
        """Whether something waits for the end of the interval (what changes now goes with
        it)."""
        return self._pacer.waiting

    def burst(self) -> bool:
        """Whether rows went less than an interval ago: a run's steps come fast, and what
        streams now goes with the next update rather than on its own."""
        return time.monotonic() - self._rows_at < self._pacer.interval

    def stream(self, *, due: bool = True) -> None:
        """The streamed text changed: the next message carries it whole. ``due=False``: the
        rows that go with it come next (a stored reply's), and make the outbox due."""
        self._stream = True
        if due:
            self._due()

    def rows(self, rows: list[dict[str, Any]]) -> None:
        """Rows added or changed."""
        for row in rows:
            self._rows[row["k"]] = row
        self._due()

    def trait(self, key: str) -> None:
        """A paced trait changed (its value is sent as it is when the outbox goes)."""
        self._keys.add(key)
        self._due()

    def head(self) -> None:
        """The header's counts changed: made when the outbox goes."""
        self._head = True
        self._due()

    def flush(self) -> None:
        """Send what waits now."""
        self._pacer.flush()

    def drop_rows(self) -> None:
        """The history was replaced: the rows waiting are of the old one."""
        self._rows.clear()

    def cancel(self) -> None:
        """Send nothing more of what waits (a detached panel keeps what it showed)."""
        self._pacer.cancel()
        self._rows.clear()
        self._head = False
        self._stream = False

    def _due(self) -> None:
        if not self._running:  # while it goes, what changes goes with it
            self._pacer.due()

    def run(self) -> None:
        if self._running:  # a flush from within (a view detached as it caught up)
            return
        self._running = True
        try:
            self._catch_up()
            rows, self._rows = self._rows, {}
            stream, self._stream = self._stream, False
            if self._head:
                self._head = False
                self._make_head()
            keys, self._keys = self._keys, set()
            if rows or stream:
                message: dict[str, Any] = {"t": "rows", "rows": list(rows.values())}
                if stream:
                    message["stream"], message["stopped"] = self._streamed()
                if keys:  # one message, not two (panel.js sets them on its model)
                    message["state"] = self._state(sorted(keys))
                self._send(message)
                if rows:
                    self._rows_at = time.monotonic()
            elif keys:
                self._send_state(sorted(keys))
        except Exception:  # from the pace's timer too: a view must not break the run
            _log.exception("fragola_nb: a panel failed to update")
        finally:
            self._running = False
