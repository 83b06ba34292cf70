"""The resume file of ``agent.batch(..., resume=PATH)``: finished rows as JSON Lines.

One line per finished input (``done`` or ``failed``), appended as it finishes, written with a
single ``write`` and ``fsync``'d, so a crash loses at most the line being written::

    {"index": 3, "input": "3 + 3?", "status": "done", "answer": "6", "error": null,
     "usage": [{"model": "gpt-4o-mini", "prompt_tokens": 20, ...}], "seconds": 0.41}

(``usage`` lists the fork's model calls, as ``agent.usage.calls`` holds them.)

Read back, a line is keyed by its index *and* its input: a file written for other inputs is
refused, never mixed in (rows past the end of a shorter list are left alone). A later line
for the same index wins (an input that failed, run again). Nothing is cut off or appended
before the whole file is known to be this batch's: every line a row, the inputs the same.
Then a last line cut short by a crash (no newline at its end, the start of a row that is not
JSON) is ignored and cut off before anything is appended; a whole row that only lacks its
newline (an editor's) is kept, and the next row starts on a line of its own. Anything else
there, like a line that is not a row, or token counts that are negative or larger than
``2**53 - 1``, is a ``BadUsage`` naming the file and the line, the file left as it was.
Any text a model sends is written, half an emoji included (``fragola_nb.base.textfile``): it
reads back the same. The rows hold the
input, the answer, the error (already redacted, see ``comparison.error_line``), the usage and
the time: no settings, no headers, no key. The file is created readable by its owner only,
and a symbolic link at ``PATH`` is refused rather than followed. While a batch runs, it holds
an advisory lock on the file: a second batch given the same path is refused (``BadUsage``).
``~`` in ``PATH`` is the home folder.

To read the rows yourself: ``[json.loads(line) for line in open(PATH)]`` (later lines for an
index replace earlier ones), or ``pandas.read_json(PATH, lines=True)``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.redact import redact_text, redacted_texts
from fragola_nb.base.textfile import utf8
from fragola_nb.core.timing import tool_read_back
from fragola_nb.core.usage import ModelPrice, Usage, call_read_back
from fragola_nb.experiments.batch.result import BatchRow
from fragola_nb.experiments.shared import row_tokens

__all__ = ["ResumeFile", "open_resume", "resume_path"]

_ROW_START = b'{"index": '
"""How every line ``write`` makes begins: a cut line that does not is not one of ours."""


def resume_path(path: Any) -> Path:
    """``resume=``'s path, checked (a str or a ``Path``, not empty), ``~`` expanded."""
    if not isinstance(path, (str, os.PathLike)) or isinstance(os.fspath(path), bytes):
        raise BadUsage(f"resume= takes a file path (a str or a pathlib.Path), got "
                       f"{type(path).__name__}")
    if not os.fspath(path).strip():
        raise BadUsage("resume= takes a file path, got an empty string")
    return Path(os.path.abspath(os.path.expanduser(path)))


def open_resume(path: Path, what: str) -> int:
    """A resume file opened for reading and appending (made readable by its owner only, a
    symbolic link refused) and locked for this run of ``what`` ("a batch"): two runs writing
    the same rows would send every input twice and interleave their lines."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        why = "it is a symbolic link" if os.path.islink(path) else exc.strerror
        raise BadUsage(f"cannot use {path} as {what} resume file: {why}") from None
    try:
        import fcntl
    except ImportError:  # Windows: no advisory lock; the file still takes whole lines
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise BadUsage(f"{path} is the resume file of {what} still running: wait for it, or "
                       "pass another resume path") from None
    except OSError:  # a file system without locks (some network mounts): go on
        pass
    return fd


def _same(value: Any) -> Any:
    """``value`` as it reads back from JSON: a list of parts compares with its copy, and a
    text holding the two halves of an emoji as two characters with the one they make."""
    return json.loads(json.dumps(value))


class ResumeFile:
    """An open resume file: ``rows`` holds what it already had (done rows, by index);
    ``write`` appends a finished row."""

    def __init__(self, path: str | os.PathLike[str], inputs: Sequence[Any],
                 prices: Mapping[str, ModelPrice]) -> None:
        self.prices = prices
        """To price the calls of the rows read back, as ``agent.usage`` would."""
        self.path = resume_path(path)
        try:
            keys = [_same(item) for item in inputs]
        except (TypeError, ValueError) as exc:
            raise BadUsage(f"resume= needs inputs that are JSON text or parts: {exc}") from None
        self._fd = open_resume(self.path, "a batch")
        try:
            self.rows = self._read(keys)
        except BaseException:
            os.close(self._fd)
            raise

    def _read(self, keys: list[Any]) -> dict[int, BatchRow]:
        """The done rows of the file, by index. The file is changed only once all of it is
        known to be this batch's (see the module): a user's file given by mistake is refused
        as it is, never cut."""
        with os.fdopen(os.dup(self._fd), "rb") as file:
            data = file.read()
        complete = data.rfind(b"\n") + 1
        lines = data[:complete].split(b"\n")[:-1]
        tail = data[complete:]
        self._newline = b""  # written before the next row when the last one lacks its own
        cut = False
        found: list[tuple[int, BatchRow]] = []
        for number, line in enumerate(lines, 1):
            if line.strip():
                found.append((number, self._row(line, number)))
        if tail.strip():
            number = len(lines) + 1
            if _cut_row(tail):
                cut = True  # a crash in the middle of a write: that row runs again
            else:
                found.append((number, self._row(tail, number)))
                self._newline = b"\n"
        rows: dict[int, BatchRow] = {}
        for number, row in found:
            if row.index >= len(keys):
                continue  # a longer list ran here before: its first inputs are checked
            if keys[row.index] != row.input and redacted_texts(keys[row.index]) == row.input:
                continue  # written with a credential redacted: which one, none can say; again
            if keys[row.index] != row.input:
                raise BadUsage(
                    f"{self.path} holds the rows of other inputs (line {number}: input "
                    f"{row.index} there is {_shown(row.input)}, here "
                    f"{_shown(keys[row.index])}): pass another resume path for these inputs, "
                    "or delete the file to start over")
            if row.status == "done":
                rows[row.index] = row
            else:
                rows.pop(row.index, None)  # failed later: it runs again
        if cut:  # ours, all of it: the cut line is dropped, the next row starts a line
            os.ftruncate(self._fd, complete)
        os.lseek(self._fd, 0, os.SEEK_END)
        return rows

    def _row(self, line: bytes, number: int) -> BatchRow:
        problem = "pass another resume path, or delete the file to start over"
        try:
            obj = json.loads(line)
            index, item, status = obj["index"], obj["input"], obj["status"]
            answer, error, seconds = obj["answer"], obj["error"], obj["seconds"]
            usage = obj["usage"]
            ok = (type(index) is int and index >= 0 and status in ("done", "failed")
                  and (isinstance(item, str) or isinstance(item, list))
                  and isinstance(answer, (str, type(None)))
                  and isinstance(error, (str, type(None)))
                  and isinstance(seconds, (int, float, type(None)))
                  and isinstance(usage, (list, type(None))))
            # Rows written before tool timings were kept have no "tools" (nor call timings).
            tools = obj.get("tools", [])
            ok = ok and isinstance(tools, list)
            counts = None if not ok or usage is None else Usage(
                tuple(call_read_back(call) for call in usage), self.prices,
                tuple(tool_read_back(tool) for tool in tools))
        except RecursionError:
            ok, problem = False, "it is nested too deeply; " + problem
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            ok = False
            if str(exc).startswith(("a call's", "a tool call's")):  # the read_back reason
                problem = f"{exc}; {problem}"
        if not ok:
            raise BadUsage(f"{self.path}, line {number}, is not a row of a batch resume file: "
                           f"{problem}")
        return BatchRow(index=index, input=item, answer=answer, error=error, status=status,
                        tokens=None if counts is None else row_tokens(counts),
                        seconds=seconds, usage=counts, resumed=True)

    def write(self, row: BatchRow) -> None:
        """Append ``row`` as one line, on disk before this returns."""
        usage = None if row.usage is None else [dataclasses.asdict(c) for c in row.usage.calls]
        tools = [] if row.usage is None else [dataclasses.asdict(t) for t in row.usage.tools]
        record = {"index": row.index, "input": row.input, "status": row.status,
                  "answer": row.answer, "error": row.error, "usage": usage,
                  "seconds": row.seconds, **({"tools": tools} if tools else {})}
        # No credential in the file: the credentials in use and the known shapes, by text.
        line = json.dumps(redacted_texts(record), ensure_ascii=False) + "\n"
        data, self._newline = self._newline + utf8(line), b""
        while data:  # one write on a local file; the loop covers a short write
            data = data[os.write(self._fd, data):]
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


def _cut_row(tail: bytes) -> bool:
    """Whether ``tail``, a last line without its newline, is a row ``write`` was cut in the
    middle of: the start of a row that is not JSON (yet). A line of anything else, JSON or
    not, is not ours to cut."""
    if not (tail.startswith(_ROW_START) or _ROW_START.startswith(tail)):
        return False
    try:
        json.loads(tail)
    except RecursionError:
        return False
    except ValueError:
        return True
    return False


def _shown(value: Any) -> str:
    text = redact_text(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    return repr(text if len(text) <= 60 else text[:59] + "…")
