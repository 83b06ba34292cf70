"""The rows of ``agent.batch``: ``BatchRow`` (one input) and ``BatchResult`` (all of them, in
input order), with counts, total usage, ``to_pandas()`` and plain and escaped-HTML forms."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, overload

from fragola_nb.base.redact import redact_text, redacted_texts
from fragola_nb.base.render import escape, text_of
from fragola_nb.core.usage import Usage
from fragola_nb.experiments.graders.base import Grade
from fragola_nb.experiments.shared import import_pandas

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["BatchResult", "BatchRow", "RowStatus"]

RowStatus = Literal["done", "failed", "stopped", "not run"]
"""``done``: a final answer; ``failed``: an error (``error`` says which); ``stopped``:
``stop_sync()`` or a cancellation ended it while it ran; ``not run``: the batch was stopped
before it started."""

SHOWN_ROWS = 20
"""Rows in the HTML table; the rest are counted."""
SHOWN_CHARS = 160


@dataclass(frozen=True)
class BatchRow:
    """One input of a batch and what became of it.

    ``answer`` is the fork's last assistant text (None without one); ``error`` is one line, or
    None when the input was answered; ``usage`` is the fork's ``agent.usage``, ``tokens`` its
    ``total_tokens`` (None when a call's server sent no usage); ``fork`` is the agent the
    input ran on (dropped from the fork tree; None for a row read back from a resume file,
    ``resumed=True``). ``row["answer"]`` reads a
    field too, as the row dicts of ``Comparison.table()`` do.
    """

    index: int
    input: str | list[dict[str, Any]]
    answer: str | None
    error: str | None
    status: RowStatus
    tokens: int | None = None
    seconds: float | None = None
    fork: Agent | None = field(default=None, repr=False, compare=False)
    usage: Usage | None = field(default=None, repr=False)
    resumed: bool = False
    repeat: int = 0
    """Which run of its input this is (``batch(..., repeat=k)``: 0 to k - 1)."""
    grades: tuple[Grade, ...] = ()
    """What ``batch(..., graders=...)``'s graders said of the row."""
    passed: bool | None = None
    """Every grade passed (None without graders, or for a row that did not finish)."""
    score: float | None = None
    """The mean of the grades' scores (a grade without one: 1 passed, 0 not)."""
    talk: Any = field(default=None, repr=False, compare=False)
    """How the input's conversation went (a ``conversation.Talk``): ``evaluate`` on Ray
    reads its rows' from here."""

    def __getitem__(self, name: str) -> Any:
        if name not in _FIELDS:
            raise KeyError(name)
        return getattr(self, name)

    def as_dict(self) -> dict[str, Any]:
        """The row's fields as a dict (``fork`` is the agent itself, not a copy)."""
        return {name: getattr(self, name) for name in _FIELDS}


_FIELDS = tuple(f.name for f in dataclasses.fields(BatchRow))


class BatchResult(Sequence[BatchRow]):
    """What ``agent.batch`` returns: one ``BatchRow`` per input, in input order.

    >>> result = await agent.batch(["2 + 2?", "3 + 3?"])      # doctest: +SKIP
    >>> [row.answer for row in result]                         # doctest: +SKIP
    ['4', '6']
    >>> result.done, result.failed, result.usage.total_tokens  # doctest: +SKIP
    (2, 0, 52)
    """

    def __init__(self, rows: Sequence[BatchRow], *, seconds: float, stopped: bool) -> None:
        self._rows = tuple(rows)
        self.seconds = seconds
        """Wall time of the call."""
        self.stopped = stopped
        """The batch was stopped (``stop()``, ``stop_sync()``) before every input ran."""

    @overload
    def __getitem__(self, index: int) -> BatchRow: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[BatchRow]: ...

    def __getitem__(self, index: int | slice) -> BatchRow | Sequence[BatchRow]:
        return self._rows[index]

    def __len__(self) -> int:
        return len(self._rows)

    def _count(self, status: RowStatus) -> int:
        return sum(1 for row in self._rows if row.status == status)

    @property
    def done(self) -> int:
        """Inputs answered (those read back from a resume file included)."""
        return self._count("done")

    @property
    def failed(self) -> int:
        """Inputs that ended with an error."""
        return self._count("failed")

    @property
    def unfinished(self) -> int:
        """Inputs stopped while they ran, or never started."""
        return len(self._rows) - self.done - self.failed

    @property
    def answers(self) -> list[str | None]:
        return [row.answer for row in self._rows]

    @property
    def errors(self) -> dict[int, str]:
        """The error of each row that has one, by input index."""
        return {row.index: row.error for row in self._rows if row.error is not None}

    @property
    def usage(self) -> Usage:
        """Tokens, requests and cost of every row (a resumed row's as its file says)."""
        return sum((row.usage for row in self._rows if row.usage is not None), Usage())

    def to_pandas(self) -> Any:
        """The rows as a ``pandas.DataFrame``, one per input, indexed by input position:
        columns input, answer, error, status, tokens, seconds, fork (and repeat, passed and
        score when the batch had repeats or graders)."""
        pandas = import_pandas("BatchResult.to_pandas()")
        columns = ["input", "answer", "error", "status", "tokens", "seconds", "fork"]
        if any(row.repeat for row in self._rows):
            columns.insert(1, "repeat")
        if any(row.grades for row in self._rows):
            columns[-1:-1] = ["passed", "score"]
        data = redacted_texts([[getattr(row, name) for name in columns] for row in self._rows])
        # Whole numbers, <NA> where unknown (not floats with NaN).
        return pandas.DataFrame(data, columns=columns).astype({"tokens": "Int64"})

    def summary(self) -> str:
        """``"3 inputs: 2 done, 1 failed; 120 tokens; 1.4 s"``."""
        parts = [f"{self.done} done", f"{self.failed} failed"]
        parts += [f"{count} {status}" for status in ("stopped", "not run")
                  if (count := self._count(status))]
        graded = [row for row in self._rows if row.passed is not None]
        if graded:
            parts.append(f"{sum(1 for row in graded if row.passed)}/{len(graded)} passed")
        usage = self.usage.summary() or "no model calls"
        count = len(self._rows)
        inputs = f"{count} input" + ("" if count == 1 else "s")
        return f"{inputs}: {', '.join(parts)}; {usage}; {self.seconds:.1f} s"

    def __repr__(self) -> str:
        return f"BatchResult({self.summary()})"

    def _repr_html_(self) -> str:
        """A summary and the first rows as an escaped table (model text is never HTML)."""
        shown = self._rows[:SHOWN_ROWS]
        # No error column when no row shown has one: a narrow notebook needs the room.
        errors = any(row.error for row in shown)
        names = ("#", "input", "answer", "error", "tokens", "s")
        keep = [i for i in range(len(names)) if errors or names[i] != "error"]
        head = "".join(f"<th>{names[i]}</th>" if i in (0, 4, 5)  # text heads sit over their text
                       else f'<th style="text-align:left">{names[i]}</th>' for i in keep)
        body = []
        for row in shown:
            cells = [str(row.index), _short(text_of(row.input)), _short(row.answer or ""),
                     _short(row.error or ""),
                     " ".join(filter(None, ("" if row.tokens is None else f"{row.tokens:,}",
                                            "" if row.usage is None else row.usage.cached_note))),
                     "" if row.seconds is None else f"{row.seconds:.2f}"]
            # numbers never break inside ("0.\n01"); a text cell may break a long word (a
            # URL) anywhere rather than push the last columns out of sight, but takes room for
            # a short word first ("question 0" was cut to "questio|n 0" at 700 px)
            body.append("<tr>" + "".join(
                f'<td style="white-space:nowrap">{escape(cells[i])}</td>' if i in (0, 4, 5)
                else f'<td style="{_TEXT_CELL}">{escape(cells[i])}</td>'
                for i in keep) + "</tr>")
        more = len(self._rows) - SHOWN_ROWS
        tail = f"<p>… {more:,} more rows (to_pandas() has them all)</p>" if more > 0 else ""
        # Cells wrap and the table scrolls in its own box: JupyterLab's fixed table layout
        # would cut the last columns (tokens, seconds) off in a narrow notebook.
        return (f'<div class="fragola-batch" style="overflow-x:auto;max-width:100%">'
                f"<p><b>BatchResult</b> · {escape(self.summary())}</p>"
                '<table style="table-layout:auto">'
                f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody>"
                f"</table>{tail}</div>")


_TEXT_CELL = "overflow-wrap:anywhere;min-width:6em;text-align:left"


def _short(text: str) -> str:
    text = " ".join(redact_text(text).split())  # before it is cut: no half key is left
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"
