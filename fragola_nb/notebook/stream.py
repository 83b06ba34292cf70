"""The reply as it streams, sent to the browser at most once per ``interval`` seconds.

A chunk arriving sooner is kept and flushed by a timer on the event loop it came from (the
trailing flush), so the last text always shows even when the stream pauses; a chunk arriving
when that flush is overdue (a loop too busy to run the timer) shows at once.

Only what is new is sent (``{"add": piece}``), so an update costs the same at the end of a
long reply as at its start; a text that does not go on from what was sent is sent whole
(``{"text": text}``).

Several replies in one view (the compare grid's columns) stream through a ``StreamGroup``: the
news of every column goes out in one message, at most once per interval, so a grid of eight
columns sends what one panel sends, and never a column's whole text again. A reply of the group
ends (``Stream.end``) in those messages too: its last text in the next, its clear in the one
after, never a message of its own (eight columns ending together sent sixteen).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["GROUP_INTERVAL", "Pacer", "Stream", "StreamGroup"]

GROUP_INTERVAL = 0.08
"""Seconds between two messages of a ``StreamGroup`` at least (12.5 a second): a compare grid
draws eight columns' news in each, about 35 ms, and a shorter pace leaves the page no time
between them (the grid fell further behind at 50 and 60 ms; issue 26)."""


class Stream:
    """One reply as it streams, sent through ``send`` at most once per ``interval`` seconds.

    >>> sent = []
    >>> stream = Stream(sent.append)
    >>> stream.feed("Once upon")
    >>> sent
    [{'text': 'Once upon', 'stopped': False}]
    """

    interval = 0.06
    """Seconds between two updates at least: at most 17 a second, so the text on screen is
    about 80 ms behind the kernel (a turn panel streaming 5,000 tokens a second, issue 26;
    50 ms took the panel to 27 comm messages in its busiest second, near the ~30 allowed)."""

    def __init__(self, send: Callable[[dict[str, Any]], None],
                 text_of: Callable[[Any], str] = str, *,
                 paced_by: Pacer | None = None, lock: threading.RLock | None = None) -> None:
        self._send = send
        self._text_of = text_of  # the partial reply -> the text shown (only when sent)
        self._group = paced_by  # when set, the group decides when the text goes
        # one lock for a group: its flush holds it while it shows every column; a view's own
        # (``lock``) when what it sends may carry the stream (a panel's outbox)
        self._lock = paced_by.lock if paced_by is not None else lock or threading.RLock()
        self._latest: Any = None
        self._received = False  # something came since the last send
        self.sent = ""  # the text the browser has
        self.stopped = False
        # a grouped reply ending (``end``): "text", its last text is to go; "clear", its clear
        self.ending: str | None = None
        self.ended_with = ""  # the whole text of the reply that ended last (``end``)
        self._sent_at = 0.0
        self._timer: asyncio.TimerHandle | None = None

    @property
    def text(self) -> str:
        """The text shown now, or about to be."""
        with self._lock:
            return self._text_of(self._latest) if self._received else self.sent

    @contextlib.contextmanager
    def held(self) -> Iterator[tuple[str, bool]]:
        """The text the views have (``sent``: not what is received and not yet sent) and
        whether it is stopped, held still while inside: a new view's hello carries that
        text, and the next ``add`` goes on from it, never repeating what the hello held."""
        with self._lock:
            yield self.sent, self.stopped

    def feed(self, partial: Any) -> None:
        """Show ``partial``, the whole partial reply so far (made text only when sent)."""
        with self._lock:
            if self.stopped:  # a new reply: the stopped one goes
                self.clear()
            if self.ending:  # a new reply before the last one's end went: that end now
                self.flush()
                self.clear()
            self.ended_with = ""
            self._latest, self._received = partial, True
            if self._group is not None:
                self._group.due()
                return
            wait = self._sent_at + self.interval - time.monotonic()
            if wait <= 0:
                self._cancel_timer()
                self._show()
            elif self._timer is None:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:  # no loop: the next chunk or flush() shows it
                    return
                self._timer = loop.call_later(wait, self.flush)

    def flush(self) -> None:
        """Show the text received so far now (an ending reply: its last text, else its
        clear)."""
        with self._lock:
            self._timer = None
            if self._received:
                self._show()
                if self.ending:
                    self.ending = "clear"
            elif self.ending == "clear":
                self.clear()

    def finish(self) -> None:
        """The reply is complete and about to be stored: its last text goes now, whatever the
        pace, a small message ahead of the stored rows (a large one the page takes longer to
        draw: a 120 KB reply showed 60-90 ms later than its last text). A reply's end is
        the one update outside the pace: at most one a reply."""
        with self._lock:
            if self._received:
                self._cancel_timer()
                self._show()

    def end(self) -> None:
        """The reply is complete and stored, in a group: its last text goes with the group's
        next message, and its clear with the one after (the view draws the stored reply in
        its place meanwhile). Alone, as ``finish`` then ``clear``."""
        with self._lock:
            if self._group is None:
                self.finish()
                self.clear()
            elif self.ending is None and (self._received or self.sent or self.stopped):
                self.ending = "text" if self._received else "clear"
                self.ended_with = self.text
                self._group.due()

    def clear(self) -> None:
        """The message is stored, or a new run starts: no streamed text."""
        with self._lock:
            if self.cleared():
                self._send({"text": "", "stopped": False})

    def cleared(self) -> bool:
        """As ``clear``, sending nothing: whether the views show text to clear, which the
        caller clears its own way (a panel: in the message that brings the stored reply)."""
        with self._lock:
            self._cancel_timer()
            had = bool(self.sent) or self.stopped
            self._latest, self._received, self.sent = None, False, ""
            self.stopped = False
            self.ending = None
            return had

    def stop(self) -> None:
        """The run was stopped: the partial text stays, marked as not saved."""
        with self._lock:
            self._cancel_timer()
            if not self.text:
                self.clear()
                return
            self.stopped = True
            self._show()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _show(self) -> None:
        text, sent = self.text, self.sent
        self._received = False
        if text == sent and not self.stopped:
            # nothing new (a reply's first chunk may hold no text): no message, and the
            # pace is not spent on it (its first text would wait a whole interval)
            return
        self._sent_at = time.monotonic()
        if sent and text.startswith(sent):
            message = {"add": text[len(sent):]}
        else:
            message = {"text": text}
        self.sent = text
        self._send({**message, "stopped": self.stopped})


class Pacer:
    """Runs ``action`` at most once per ``interval`` seconds (``Stream.interval`` unless
    given): ``due()`` runs it now, or when the interval is up (a timer on the event loop it
    was called from); with no loop running, now.

    >>> ran = []
    >>> pacer = Pacer(lambda: ran.append(1))
    >>> pacer.due()
    >>> ran
    [1]
    """

    def __init__(self, action: Callable[[], None] | None = None,
                 lock: threading.RLock | None = None, *,
                 interval: float | None = None) -> None:
        self._interval = interval
        self._action = action
        self.lock = lock or threading.RLock()  # the view's own, when it runs under one
        self._sent_at = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def due(self) -> None:
        """Something changed: run now, or at the end of the interval (the trailing run)."""
        with self.lock:
            wait = self._sent_at + self.interval - time.monotonic()
            if wait <= 0:
                self._cancel_timer()
                self.flush()
            elif self._timer is None:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:  # no loop to run it later: now
                    self.flush()
                    return
                self._timer = loop.call_later(wait, self.flush)

    @property
    def waiting(self) -> bool:
        """Whether a run is due when the interval is up (its timer is set)."""
        return self._timer is not None

    @property
    def interval(self) -> float:
        """Seconds between two runs at least."""
        return Stream.interval if self._interval is None else self._interval

    @interval.setter
    def interval(self, seconds: float) -> None:
        self._interval = seconds

    def restart(self) -> None:
        """Count the interval from now, as after a run: a change within it waits for its end
        rather than running at once."""
        with self.lock:
            self._sent_at = time.monotonic()

    def cancel(self) -> None:
        """Forget a run that is due (no trailing run)."""
        with self.lock:
            self._cancel_timer()

    def flush(self) -> None:
        """Run now."""
        with self.lock:
            self._cancel_timer()
            self._sent_at = time.monotonic()
            self._run()

    def _run(self) -> None:
        if self._action is not None:
            self._action()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class StreamGroup(Pacer):
    """The streams of several replies shown in one view, sent together: ``send`` gets
    ``{name: message}`` (each message as ``Stream`` makes it) at most once per ``interval``
    seconds (``GROUP_INTERVAL``: longer than a single reply's, as the view draws every column's
    news each time), however many replies stream at once. A clear or a stop goes at once, on
    its own; a reply's end (``Stream.end``) goes with the group's messages.

    >>> sent = []
    >>> group = StreamGroup(sent.append, ["a", "b"])
    >>> group["a"].feed("one")
    >>> sent
    [{'a': {'text': 'one', 'stopped': False}}]
    """

    def __init__(self, send: Callable[[dict[str, dict[str, Any]]], None], names: Iterable[str],
                 text_of: Callable[[Any], str] = str,
                 lock: threading.RLock | None = None, *,
                 interval: float = GROUP_INTERVAL) -> None:
        super().__init__(lock=lock, interval=interval)
        self._send = send
        self._news: dict[str, dict[str, Any]] = {}
        self._flushing = False
        self._sent = False  # the last flush sent a message
        self._streams = {name: Stream(functools.partial(self._collect, name), text_of,
                                      paced_by=self) for name in names}

    def __getitem__(self, name: str) -> Stream:
        return self._streams[name]

    def __contains__(self, name: object) -> bool:
        return name in self._streams

    def get(self, name: str) -> Stream | None:
        return self._streams.get(name)

    def _run(self) -> None:  # what every stream received so far, in one message
        self._flushing = True
        try:
            for stream in self._streams.values():
                stream.flush()
        finally:
            self._flushing = False
        self._send_news()
        if any(stream.ending for stream in self._streams.values()):
            self.due()  # a clear to go with the next message

    def send_ends(self) -> None:
        """The last texts of the replies ending, now: a large message is about to go, and
        they go ahead of it."""
        with self.lock:
            if any(stream.ending == "text" for stream in self._streams.values()):
                self.flush()

    @contextlib.contextmanager
    def held(self) -> Iterator[dict[str, str]]:
        """The text the views have of each stream, held still while inside (a new view's
        hello carries them; the next message goes on from them)."""
        with self.lock:
            yield {name: stream.sent for name, stream in self._streams.items()}

    def _collect(self, name: str, message: dict[str, Any]) -> None:
        before = self._news.get(name)
        if before is not None and "add" in message:  # two adds, or a text then an add
            key = "add" if "add" in before else "text"
            message = {**message, key: before[key] + message["add"]}
            if key == "text":
                del message["add"]
        self._news[name] = message
        if not self._flushing:
            self._send_news()

    def flush(self) -> None:
        with self.lock:
            last = self._sent_at
            self._sent = False
            super().flush()
            if not self._sent:  # nothing went: the pace is not spent
                self._sent_at = last

    def _send_news(self) -> None:
        news, self._news = self._news, {}
        if news:
            self._sent = True
            self._send(news)
