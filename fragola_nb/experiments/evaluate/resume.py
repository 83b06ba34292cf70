"""The resume file of ``agent.evaluate(..., resume=PATH)``: JSON Lines, one run's rows.

The first line names the run (its cases' inputs, variants and graders); each finished row
(``done`` or ``failed``) is appended as it finishes, as ``EvalRow.record()`` (no fork, no
setting, no key), in one ``write``, ``fsync``'d::

    {"format": "fragola_nb.evaluation-resume/1", "cases": [...], "variants": [...], ...}
    {"case": 0, "input": "2 + 2?", "variant": "base", "repeat": 0, "status": "done", ...}

Run again with the same path, cases, variants and graders, the rows already done come back
from the file (``resumed``) and are not sent again; failed ones run again, as in
``agent.batch``. A file of other cases, variants or graders is refused (``BadUsage``), never
mixed in; more or fewer repeats are fine. A last line cut short by a crash is cut off; any
other line that is not a row is a ``BadUsage`` naming the line, the file left as it was. As
for batch: created readable by its owner only, a symbolic link refused, one run at a time
per file (an advisory lock). A label given to a row (``Evaluation.label``), during the run or
after it, is appended as the row again with its label, so a resume keeps it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.redact import redacted
from fragola_nb.base.textfile import utf8
from fragola_nb.core.usage import ModelPrice
from fragola_nb.experiments.batch.resume import open_resume, resume_path
from fragola_nb.experiments.evaluate.evalrow import EvalRow

__all__ = ["EvalResumeFile"]

FORMAT = "fragola_nb.evaluation-resume/1"


class EvalResumeFile:
    """An open resume file: ``rows`` holds its done rows by (case, variant, repeat)."""

    def __init__(self, path: Any, run: Mapping[str, Any], prices: Mapping[str, ModelPrice],
                 known: frozenset[str]) -> None:
        self.path = resume_path(path)
        self.known = known
        self.run = json.loads(json.dumps({"format": FORMAT, **run}, ensure_ascii=False))
        self._fd = open_resume(self.path, "an evaluation")
        try:
            self.rows = self._read(prices)
        except BaseException:
            os.close(self._fd)
            raise

    def _read(self, prices: Mapping[str, ModelPrice]) -> dict[tuple[int, str, int], EvalRow]:
        with os.fdopen(os.dup(self._fd), "rb") as file:
            data = file.read()
        advice = "pass another resume path, or delete the file to start over"
        if not data.strip():
            os.ftruncate(self._fd, 0)
            self._append(self.run)
            return {}
        complete = data.rfind(b"\n") + 1
        lines, tail = data[:complete].split(b"\n")[:-1], data[complete:]
        records = []
        for number, line in enumerate(lines, 1):
            try:
                records.append((number, json.loads(line)))
            except (ValueError, RecursionError):
                raise BadUsage(f"{self.path}, line {number}, is not JSON: {advice}") from None
        cut = False
        if tail.strip():
            try:
                records.append((len(lines) + 1, json.loads(tail)))
            except (ValueError, RecursionError):
                cut = True  # a crash in the middle of a write: that row runs again
        if not records or not isinstance(records[0][1], dict) \
                or records[0][1].get("format") != FORMAT:
            raise BadUsage(f"{self.path} is not an evaluation resume file: {advice}")
        header = records[0][1]
        written = redacted(self.run, self.known)  # as _append wrote it: a key in a case hidden
        for name in ("cases", "variants", "graders"):
            if header.get(name) != written[name]:
                raise BadUsage(f"{self.path} holds the rows of an evaluation with other "
                               f"{name}: {advice}")
        rows: dict[tuple[int, str, int], EvalRow] = {}
        for number, record in records[1:]:
            try:
                row = EvalRow.from_record(record, prices)
            except ValueError as exc:
                raise BadUsage(f"{self.path}, line {number}, is not an evaluation row "
                               f"({exc}): {advice}") from None
            key = (row.case, row.variant, row.repeat)
            if row.status == "done":
                rows[key] = row
            else:
                rows.pop(key, None)  # failed later: it runs again
        if cut:
            os.ftruncate(self._fd, complete)
        elif tail.strip():
            self._write(b"\n")  # a whole row without its newline: the next starts a line
        os.lseek(self._fd, 0, os.SEEK_END)
        return rows

    def write(self, row: EvalRow) -> None:
        """Append ``row``, on disk before this returns."""
        self._append(row.record())

    def relabel(self, row: EvalRow) -> None:
        """``row`` labelled (``Evaluation.label``), appended so that a resume keeps its label
        (the last line of a row is the one read back). After the run the file is opened
        again, and locked, for it; a file that is gone, or now holds another run's rows, is
        left alone."""
        if not row.finished:
            return
        if self._fd >= 0:  # the run is still writing it
            self.write(row)
            return
        if not self.path.is_file():
            return
        try:
            self._fd = open_resume(self.path, "an evaluation")
        except BadUsage as exc:
            raise BadUsage(f"label(...) cannot keep the label in the resume file: {exc}"
                           ) from None
        try:
            with os.fdopen(os.dup(self._fd), "rb") as file:
                file.seek(0)
                first = file.readline()
            try:
                header = json.loads(first)
            except (ValueError, RecursionError):
                return
            written = redacted(self.run, self.known)
            if isinstance(header, dict) and all(header.get(name) == written[name] for name in
                                                ("format", "cases", "variants", "graders")):
                self.write(row)
        finally:
            self.close()

    def _append(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(redacted(dict(record), self.known), ensure_ascii=False) + "\n"
        self._write(utf8(line))

    def _write(self, data: bytes) -> None:
        while data:
            data = data[os.write(self._fd, data):]
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def run_header(keys: Sequence[str], variants: Sequence[str],
               graders: Sequence[str]) -> dict[str, Any]:
    """What a resume file's first line says of its run."""
    return {"cases": list(keys), "variants": list(variants), "graders": list(graders)}
