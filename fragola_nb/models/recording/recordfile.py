"""The recording file: JSON Lines, a header line, then one exchange per line.

::

    {"fragola_nb_recording": 1, "fragola_nb": "0.1.0", "about": "..."}
    {"agent": "tutor", "status": 200, "request": {...}, "body": {...}}
    {"agent": "tutor", "status": 200, "request": {...}, "chunks": [{...}, {...}]}
    {"agent": "tutor", "status": 429, "request": {...}, "body": {"error": {...}}}

``request`` is the JSON body sent; the answer is ``body`` (a JSON body, any status), ``text``
(a body that was not JSON), or ``chunks`` (a streamed answer: each ``data:`` event's JSON, in
order; ``"cut": true`` when the stream ended before it was done). Headers are not kept;
every value is scrubbed with fragola_nb's one rule (:func:`fragola_nb.base.redact.redacted`), and
the credentials the request was sent with (its key...) are scrubbed wherever they appear.

Lines are appended under a lock, each in one ``write`` to a file opened for appending, so
agents recording at once (threads, or processes sharing the file) never interleave halves.
A file is written to only once its header says it is a recording. A last line cut short (a
crash in the middle of a write) is dropped before the next exchange is appended, so that one
starts on a line of its own and the file reads again; a last line that is whole JSON but
lacks its newline (an editor's) is kept, and a newline added. Any text a server sends is
written, half an emoji included (``fragola_nb.base.textfile``): it reads back the same.

A recording holds final answers only: a status from 200 to 599. An informational one (1xx) is
never written, and refused when read (replaying it would leave the client waiting for the
answer that follows it). An exchange nested more than ``MAX_DEPTH`` levels deep is not
written either (a warning says so) and is refused when read: replaying goes through it
recursively.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.redact import redacted
from fragola_nb.base.textfile import utf8

__all__ = ["FORMAT", "Appender", "Exchange", "read_recording"]

_log = logging.getLogger("fragola_nb")

FORMAT = 1
"""The version of the file format this fragola_nb writes and reads."""
HEADER_KEY = "fragola_nb_recording"
ABOUT = ("Recorded by fragola_nb's Fragola.record: one model exchange per line (request, then "
         "body or stream chunks); replay with Fragola.replay(path).")

_locks: dict[str, threading.Lock] = {}
_locks_lock = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    """One lock per file for the whole process, however many recorders write to it."""
    with _locks_lock:
        return _locks.setdefault(os.path.realpath(path), threading.Lock())


def _line(record: dict[str, Any]) -> bytes:
    # A lone surrogate a server sent as "\ud800" is written as that escape (``utf8``).
    return utf8(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")


def final_status(status: Any) -> TypeGuard[int]:
    """Whether ``status`` is one a recording can hold: a final HTTP status, 200-599 (a 1xx
    is informational: a client that gets one waits for the answer after it)."""
    return type(status) is int and 200 <= status <= 599


def _header() -> dict[str, Any]:
    from fragola_nb._version import __version__

    return {HEADER_KEY: FORMAT, "fragola_nb": __version__, "about": ABOUT}


class Appender:
    """Appends exchanges to one recording file, starting it with a header when it is new.

    An existing file is appended to only when it is a recording already (a ``BadUsage``
    otherwise: nothing of it is overwritten).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = _lock_for(self.path)
        with self._lock:
            try:
                started = self.path.stat().st_size > 0
            except FileNotFoundError:
                started = False
            except OSError as exc:
                raise BadUsage(f"cannot use the recording {self.path}: {exc.strerror}") from None
            if started:
                _read_header(self.path)
            else:
                self._write(b"")

    def append(self, record: dict[str, Any], secrets: Iterable[str] = ()) -> None:
        """Scrub ``record`` of credentials and append it as one line. ``secrets`` (the
        credentials the request was sent with) are replaced wherever they appear, whatever
        their shape: the rule knows only well-known shapes. A record whose status is not a
        final one (``final_status``) is not written: it is no answer to replay."""
        if not final_status(record.get("status")):
            return
        if _depth(record) > MAX_DEPTH:  # it could not be read back (nor scrubbed: recursive)
            _log.warning("fragola_nb: an exchange nested more than %d levels deep was not "
                         "recorded to %s; replaying that request will say it is not in the "
                         "recording", MAX_DEPTH, self.path)
            return
        # By the one rule's known values: in the request and in the answer (a server quoting
        # a key back), never a short key ("ollama") cut out of ordinary words.
        data = _line(redacted(record, secrets))
        with self._lock:
            self._write(data)

    def _write(self, data: bytes) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as exc:
            raise BadUsage(f"cannot write the recording {self.path}: {exc.strerror}") from None
        try:
            _lock_file(fd)  # released when fd is closed
            size = os.fstat(fd).st_size
            if size == 0:  # new, or emptied since: a reader needs the header
                data = _line(_header()) + data
            else:
                data = self._line_start(fd, size) + data
            view = memoryview(data)
            while view:  # a regular file takes it whole; the loop is for the rare short write
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    def _line_start(self, fd: int, size: int) -> bytes:
        """What makes the next line start on a line of its own, when the file's last line
        lacks its newline: a newline after a whole line of JSON; a line cut in the middle
        of its write is dropped (``b""``). The file is a recording (its header was read), and
        the lock keeps the other writers out while it is cut."""
        if _read_at(fd, size - 1, 1) == b"\n":
            return b""
        start, last = size, b""
        while start > 0:  # back from the end to the last newline, a block at a time
            step = min(1 << 16, start)
            start -= step
            block = _read_at(fd, start, step)
            last = block + last
            newline = block.rfind(b"\n")
            if newline >= 0:
                start += newline + 1
                last = last[newline + 1:]
                break
        try:
            json.loads(last)
            return b"\n"
        except (ValueError, RecursionError):
            pass
        if start == 0:  # the header itself: this is not a recording any more
            _read_header(self.path)
            raise BadUsage(f"cannot write the recording {self.path}: its first line is not "
                           "a whole header")
        os.ftruncate(fd, start)
        return b""


def _read_at(fd: int, offset: int, count: int) -> bytes:
    os.lseek(fd, offset, os.SEEK_SET)
    data = b""
    while len(data) < count:
        more = os.read(fd, count - len(data))
        if not more:
            break
        data += more
    return data


def _lock_file(fd: int) -> None:
    """Wait for the other processes writing this file (an advisory lock; where there is
    none, Windows or a mount without locks, the thread lock alone is taken)."""
    try:
        import fcntl
    except ImportError:
        return
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_EX)


@dataclass(frozen=True)
class Exchange:
    """One recorded request and its answer, read back from line ``line`` of the file."""

    line: int
    agent: str | None
    request: dict[str, Any]
    status: int
    body: Any = None
    text: str | None = None
    chunks: tuple[Any, ...] | None = None
    cut: bool = False
    base_url: str | None = None  # written by Fragola.cached: the API it was sent to
    repeat: int | None = None  # written by Fragola.cached: the sample's repeat index
    request_hash: str | None = None  # written by Fragola.cached: the keyed hash of the real request


MAX_DEPTH = 200
"""The deepest nesting of arrays and objects a recorded exchange may have. A request or an
answer is a few levels deep (a tool's schema a few more); replaying one goes through it
recursively (scrubbing, comparing), which a file nested hundreds deep would overflow."""


def _depth(value: Any) -> int:
    """How deeply ``value`` nests arrays and objects (counted without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = (item.values() if isinstance(item, dict)
                    else item if isinstance(item, list) else None)
        if children is None:
            continue
        deepest = max(deepest, level)
        if level <= MAX_DEPTH:  # deeper is too deep already: no need to go on
            stack.extend((child, level + 1) for child in children)
    return deepest


def _fail(path: Path, number: int, problem: str) -> BadUsage:
    return BadUsage(f"the recording {path}, line {number}: {problem}")


def _parse(path: Path, number: int, raw: bytes) -> Any:
    try:
        return json.loads(raw.decode())
    except UnicodeDecodeError:
        raise _fail(path, number, "is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        problem = f"is not JSON ({exc.msg} at column {exc.colno})"
        raise _fail(path, number, problem) from None
    except ValueError as exc:  # a number too long to read, say
        raise _fail(path, number, f"is not usable JSON ({exc})") from None
    except RecursionError:
        raise _fail(path, number, "is not usable JSON (it is nested too deeply)") from None


def _read_header(path: Path) -> None:
    try:
        with path.open("rb") as file:
            first = file.readline().removeprefix(b"\xef\xbb\xbf")
    except OSError as exc:
        raise BadUsage(f"cannot read the recording {path}: {exc.strerror}") from None
    try:
        data = path.read_bytes() if HEADER_KEY.encode() not in first else first
    except OSError:
        data = first
    _check_header(path, _first_line(path, first, data), data)


def _first_line(path: Path, first: bytes, data: bytes) -> Any:
    """The header line's JSON (None when blank); a first line that is not JSON in a file
    that is something else (a saved session) says what it is."""
    if not first.strip():
        return None
    try:
        return _parse(path, 1, first)
    except BadUsage:
        if _what_else(data):
            return None
        raise


def _check_header(path: Path, header: Any, data: bytes = b"") -> None:
    if not isinstance(header, dict) or HEADER_KEY not in header:
        raise _fail(path, 1, "is not the header of a Fragola.record recording"
                    + _what_else(data))
    version = header[HEADER_KEY]
    if version != FORMAT:
        newer = (isinstance(version, int) and not isinstance(version, bool)
                 and version > FORMAT)
        hint = f" (it was made by fragola_nb {_shown(header.get('fragola_nb'))}: upgrade " \
               "fragola_nb to read it)" if newer else ""
        raise _fail(path, 1, f"has format {_shown(version)}; this fragola_nb reads format "
                             f"{FORMAT}{hint}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _what_else(data: bytes) -> str:
    """What a file that is not a recording is, when that can be told: ``" (...)"`` or ""."""
    if not data.strip():
        return " (the file is empty: nothing was recorded into it)"
    if not data.lstrip().startswith(b"{") or not data.rstrip().endswith(b"}"):
        return ""
    try:
        whole = json.loads(data)
    except (ValueError, RecursionError):  # JSON Lines, or not JSON: the lines say what is wrong
        return ""
    if not isinstance(whole, dict):
        return ""
    if whole.get("format") == "fragola_nb.session":
        return " (it is a saved session: load it with load_session)"
    if "cells" in whole and "nbformat" in whole:
        return " (it is a notebook)"
    return ""


def _exchange(path: Path, number: int, entry: Any) -> Exchange:
    if not isinstance(entry, dict):
        raise _fail(path, number, "is not a JSON object")
    if _depth(entry) > MAX_DEPTH:
        raise _fail(path, number, f"is nested too deeply (more than {MAX_DEPTH} levels) to be "
                                  "an exchange")
    request, status, agent = entry.get("request"), entry.get("status"), entry.get("agent")
    if not isinstance(request, dict):
        raise _fail(path, number, "has no 'request' object")
    if type(status) is int and 100 <= status <= 199:
        raise _fail(path, number, f"has the informational status {status}, not an answer (a "
                                  "recording holds final answers: 200-599)")
    if not final_status(status):
        raise _fail(path, number, "has no HTTP 'status' (a whole number 200-599)")
    if agent is not None and not isinstance(agent, str):
        raise _fail(path, number, "has an 'agent' that is not a string")
    chunks, text = entry.get("chunks"), entry.get("text")
    if chunks is not None and not isinstance(chunks, list):
        raise _fail(path, number, "has 'chunks' that are not a list")
    if text is not None and not isinstance(text, str):
        raise _fail(path, number, "has a 'text' that is not a string")
    if chunks is None and text is None and "body" not in entry:
        raise _fail(path, number, "has no answer ('body', 'text' or 'chunks')")
    base_url, repeat = entry.get("base_url"), entry.get("repeat")
    if base_url is not None and not isinstance(base_url, str):
        raise _fail(path, number, "has a 'base_url' that is not a string")
    if repeat is not None and (type(repeat) is not int or repeat < 0):
        raise _fail(path, number, "has a 'repeat' that is not a whole number >= 0")
    hashed = entry.get("request_hash")  # another's, or none: the cache reads the request instead
    return Exchange(number, agent, request, status, entry.get("body"), text,
                    None if chunks is None else tuple(chunks), entry.get("cut") is True,
                    base_url, repeat, hashed if isinstance(hashed, str) else None)


def read_recording(path: str | os.PathLike[str], *, torn: bool = False) -> list[Exchange]:
    """The exchanges of a recording, in file order; a ``BadUsage`` naming the file (and the
    line) when it is missing, unreadable or not a recording. With ``torn``, a last line cut
    short (no newline, not JSON: a killed writer's) is left out, as the next append drops it."""
    where = Path(path)
    try:
        data = where.read_bytes().removeprefix(b"\xef\xbb\xbf")  # an editor's UTF-8 BOM
    except OSError as exc:
        hint = " (make one with Fragola.record)" if isinstance(exc, FileNotFoundError) else ""
        raise BadUsage(f"cannot read the recording {where}: {exc.strerror}{hint}") from None
    lines = data.split(b"\n")
    _check_header(where, _first_line(where, lines[0], data), data)
    exchanges = []
    for number, raw in enumerate(lines[1:], 2):
        if not raw.strip():
            continue
        try:
            entry = _parse(where, number, raw)
        except BadUsage as exc:
            if number < len(lines):
                raise
            if torn:
                continue
            raise BadUsage(f"{exc}; it has no newline at its end: cut short while it was "
                           "written? Recording onto the file again drops it") from None
        exchanges.append(_exchange(where, number, entry))
    return exchanges
