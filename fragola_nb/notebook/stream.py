"""The reply as it streams, sent to the browser at most once per ``interval`` seconds.

A chunk arriving sooner is kept and flushed by a timer on the event loop it came from (the
trailing flush), so the last text always shows even when the stream pauses; a chunk arriving
when that flush is overdue (a loop too busy to run the timer) shows at once.

Only what is new is sent (``{"add": piece}``), so an update costs the same at the end of a
long reply as at its start; a text that does not go on from what was sent is sent whole
(``{"text": text}``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Stream"]


class Stream:
    interval = 0.08  # at most 12.5 updates a second

    def __init__(self, send: Callable[[dict[str, Any]], None],
                 text_of: Callable[[Any], str] = str) -> None:
        self._send = send
        self._text_of = text_of  # the partial reply -> the text shown (only when sent)
        self._lock = threading.RLock()
        self._latest: Any = None
        self._received = False  # something came since the last send
        self.sent = ""  # the text the browser has
        self.stopped = False
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
            self._latest, self._received = partial, True
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
        """Show the text received so far now."""
        with self._lock:
            self._timer = None
            if self._received:
                self._show()

    def clear(self) -> None:
        """The message is stored, or a new run starts: no streamed text."""
        with self._lock:
            self._cancel_timer()
            had = bool(self.sent) or self.stopped
            self._latest, self._received, self.sent = None, False, ""
            self.stopped = False
            if had:
                self._send({"text": "", "stopped": False})

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
        self._sent_at = time.monotonic()
        text, sent = self.text, self.sent
        self._received = False
        if sent and text.startswith(sent):
            message = {"add": text[len(sent):]}
        else:
            message = {"text": text}
        self.sent = text
        self._send({**message, "stopped": self.stopped})
