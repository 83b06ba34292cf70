"""Word differences between two answers, as the compare grid draws them, and ``LateDiffs``,
which compares long answers on a worker thread.

difflib takes about 70 ms for two answers of 60 KB (15,000 words each, measured), and the
columns of a comparison end within a fraction of a second of each other: compared in the
event loop as each column ended, seven answers held the kernel half a second, and the last
columns' final streamed text waited behind them. A short pair (``QUICK``) is compared at once.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from fragola_nb.base.render import visible

__all__ = ["QUICK", "SIMILAR", "LateDiffs", "diff_segments", "word_overlap"]

_WORDS = re.compile(r"^\s+|\S+\s*")  # a word with the spaces after it

SIMILAR = 0.5
"""Word differences are drawn only between answers sharing at least this share of their words
(``difflib``'s ratio): below it, the struck-out first answer and the new one interleave into
text nobody can read (two free answers of a real model share little), so the column shows
its answer as it is, with a note."""

QUICK = 8_000
"""Characters of a pair of answers compared at once, in the caller's thread (well under a
millisecond's work; a long pair goes to ``LateDiffs``' worker)."""

Compared = tuple[float, tuple[tuple[str, str], ...]]


def diff_segments(reference: str, text: str) -> list[list[str]]:
    """``text`` against ``reference``, word by word: ``[kind, text]`` pieces in reading order,
    kind ``same``, ``new`` (not in the reference) or ``gone`` (in the reference only)."""
    return [list(piece) for piece in compared(reference, text)[1]]


def word_overlap(reference: str, text: str) -> float:
    """How much of their words two answers share, 0 to 1 (1: the same words in order)."""
    return compared(reference, text)[0]


@functools.lru_cache(maxsize=256)
def compared(reference: str, text: str) -> Compared:
    """The overlap and the segments of ``text`` against ``reference`` (``diff_segments``)."""
    # Cached: the grid is redrawn on every change of any column, and each redraw would
    # diff every finished column against the first again.
    old, new = _WORDS.findall(reference), _WORDS.findall(text)
    segments: list[list[str]] = []
    # Words are matched without their spaces (a line break where the other had a space is
    # no difference), and shown with them.
    old_words, new_words = [w.strip() for w in old], [w.strip() for w in new]

    def add(kind: str, words: list[str]) -> None:
        piece = "".join(words)
        if not piece:
            return
        if segments and segments[-1][0] == kind:
            segments[-1][1] += piece
        else:
            segments.append([kind, piece])

    matcher = difflib.SequenceMatcher(None, old_words, new_words, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            add("same", new[j1:j2])
            continue
        if op in ("delete", "replace"):
            add("gone", old[i1:i2])
        if op in ("insert", "replace"):
            add("new", new[j1:j2])
    ratio = matcher.ratio() if old_words or new_words else 1.0
    return ratio, tuple((kind, visible(piece)) for kind, piece in segments)


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _worker() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:  # one thread: the comparisons queue, the event loop keeps its share
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fragola-worddiff")
        return _pool


class LateDiffs:
    """Pairs of answers compared without holding the event loop: ``get`` answers a pair's
    ``compared`` at once when it is short or known, else None, and ``ready`` is called (on
    the event loop that asked) once every pair asked for is known. With no event loop
    running, at once.

    >>> diffs = LateDiffs(lambda: None)
    >>> diffs.get("a b", "a c")[0]
    0.5
    """

    def __init__(self, ready: Callable[[], None]) -> None:
        self._ready = ready
        self._known: dict[tuple[str, str], Compared] = {}
        self._asked: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def get(self, reference: str, text: str, *, start: bool = True) -> Compared | None:
        """The pair compared, or None while it is not known (``start=False``: and not
        asked for either)."""
        if len(reference) + len(text) <= QUICK:
            return compared(reference, text)
        key = (reference, text)
        with self._lock:
            if key in self._known:
                return self._known[key]
            if key in self._asked or not start:
                return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop to come back to: compared now
            return compared(reference, text)
        with self._lock:
            self._asked.add(key)
        _worker().submit(self._compare, key, loop)
        return None

    def _compare(self, key: tuple[str, str], loop: asyncio.AbstractEventLoop) -> None:
        result = compared(*key)
        with self._lock:
            self._asked.discard(key)
            if len(self._known) >= 64:  # the pairs of a comparison run again and again
                self._known.clear()
            self._known[key] = result
            last = not self._asked  # one redraw for the lot: each is a large message
        if last and not loop.is_closed():
            loop.call_soon_threadsafe(self._ready)
