"""``Comparison``: the result of ``agent.compare``, a mapping of variant name -> fork, with its
rows as data (``table``, ``to_pandas``), plain text and escaped static HTML.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from fragola_nb.base.redact import redacted_texts
from fragola_nb.base.render import escape, text_of, visible
from fragola_nb.experiments.graders.apply import passed_and_score
from fragola_nb.experiments.shared import answer_text, import_pandas, row_tokens, tool_call_texts

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["COLUMNS", "WATCHERS", "Comparison", "VariantRun", "Watcher"]

_log = logging.getLogger("fragola_nb")

COLUMNS = ("variant", "status", "answer", "tool_calls", "tokens", "seconds", "error")
"""The keys of a row of ``Comparison.table()``, in order."""


class Watcher(Protocol):
    """What the notebook layer registers in ``WATCHERS`` to show comparisons."""

    def started(self, comparison: Comparison) -> bool:
        """A comparison's forks are made and its variants about to run; whether it is now
        shown live."""

    def mimebundle(self, comparison: Comparison) -> dict[str, Any] | None:
        """How to display ``comparison`` (None: its plain text and static HTML)."""


WATCHERS: list[Watcher] = []
"""Registered by ``%load_ext fragola_nb``; the core never imports the notebook layer."""


# -- the comparison ----------------------------------------------------------------------------

@dataclass(eq=False)
class VariantRun:
    """How one variant's run goes. ``status``: queued, running, finished, waiting (paused for
    a person), step_limit, stopped, not_started (stopped first), budget (a budget spent,
    before it started or while it ran), failed, cancelled."""

    name: str
    fork: Agent
    status: str = "queued"
    error: str | None = None
    started: float | None = field(default=None, repr=False)
    ended: float | None = field(default=None, repr=False)
    repeat: int = 0
    """Which run of its variant this is (``compare(..., repeat=k)``: 0 to k - 1)."""
    grades: tuple[Any, ...] = ()
    """What ``compare(..., graders=...)``'s graders said of the run (``Grade`` values)."""

    @property
    def seconds(self) -> float | None:
        """Wall time of the run, to a millisecond (None before it starts)."""
        if self.started is None:
            return None
        return round((self.ended or time.monotonic()) - self.started, 3)

    @property
    def status_now(self) -> str:
        """``status``, except that a variant which waited and was resumed since (its calls
        decided in its panel) reads as its fork is now."""
        if self.status != "waiting" or self.fork.status == "waiting":
            return self.status
        if self.fork.status == "generating":
            return "running"
        return self.fork.outcome or "finished"

    def row(self) -> dict[str, Any]:
        fork, since = self.fork, self.fork.fork_point
        row: dict[str, Any] = {"variant": self.name, "status": self.status_now,
                               "answer": answer_text(fork, since),
                               "tool_calls": tool_call_texts(fork, since),
                               "tokens": row_tokens(fork.usage), "seconds": self.seconds,
                               "error": self.error}
        if self.grades:
            passed, score = passed_and_score(self.grades)
            row.update(repeat=self.repeat, passed=passed, score=score,
                       grades={g.name: {"passed": g.passed, "score": g.score,
                                        "reason": g.reason} for g in self.grades})
        elif self.repeat:
            row["repeat"] = self.repeat
        return row


class Comparison(Mapping[str, "Agent"]):
    """The forks of one ``agent.compare`` call by variant name, in variant order.

    >>> comparison["short"].state.messages[-1]["content"]     # doctest: +SKIP
    >>> [row["answer"] for row in comparison.table()]        # doctest: +SKIP
    """

    def __init__(self, agent: Agent, message: Any, runs: list[VariantRun]) -> None:
        self.agent = agent
        self.message = message
        self.runs = {run.name: run for run in runs}
        self.done = False
        """True once ``compare`` has returned (or was interrupted)."""
        self._observers: list[Any] = []

    def __getitem__(self, name: str) -> Agent:
        run = self.runs.get(name) if isinstance(name, str) else None
        if run is None:
            raise KeyError(f"no variant {name!r} in this comparison; its variants are "
                           f"{', '.join(map(repr, self.runs))}")
        return run.fork

    def __iter__(self) -> Iterator[str]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    def table(self) -> list[dict[str, Any]]:
        """One row per variant: variant, status, answer (the fork's last assistant text, or
        None), tool_calls (``name(arguments)`` strings), tokens, seconds, error (one line, or
        None). Read from the forks now, so a waiting fork resumed later shows its answer.
        With ``graders``, also passed, score and grades (name -> passed, score, reason); with
        ``repeat``, one row per run of a variant (``name``, ``name#2``...) and its repeat.
        No credential (``fragola_nb.base.redact``): its repr and HTML are made from it."""
        return list(redacted_texts([run.row() for run in self.runs.values()]))

    def to_pandas(self) -> Any:
        """``table()`` as a ``pandas.DataFrame`` (needs ``pip install fragola_nb[pandas]``)."""
        pandas = import_pandas("Comparison.to_pandas()")
        rows = self.table()
        extra = [key for key in ("repeat", "passed", "score", "grades")
                 if any(key in row for row in rows)]
        frame = pandas.DataFrame(rows, columns=[*COLUMNS, *extra])
        return frame.astype({"tokens": "Int64"})  # whole numbers, <NA> where unknown

    # -- for views ------------------------------------------------------------------------------

    def subscribe(self, observer: Any) -> None:
        """Call ``observer(run)`` whenever a variant's status changes (``run`` None: the
        comparison ended). Observers must not raise; errors are logged."""
        self._observers.append(observer)

    def start(self, run: VariantRun) -> None:
        run.status, run.started = "running", time.monotonic()
        self.notify(run)

    def update(self, run: VariantRun, status: str, error: str | None) -> None:
        run.status, run.error = status, error
        if run.started is not None and run.ended is None:
            run.ended = time.monotonic()
        self.notify(run)

    def notify(self, run: VariantRun | None) -> None:
        for observer in list(self._observers):
            try:
                observer(run)
            except Exception:
                _log.exception("fragola_nb: a compare view failed to update")

    # -- display --------------------------------------------------------------------------------

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        # The live grid when the notebook layer is loaded; else None, and IPython uses
        # __repr__ and _repr_html_.
        for watcher in list(WATCHERS):
            bundle = watcher.mimebundle(self)
            if bundle is not None:
                return bundle
        return None

    def __repr__(self) -> str:
        # The message and the names on one line each, so no text can pass for a row.
        lines = [f"Comparison of {len(self)} variant(s) on {self.agent.name!r}: "
                 f"{_short(_one_line(text_of(self.message)), 80)}"]
        for row, run in zip(self.table(), self.runs.values(), strict=True):
            facts = [row["status"]]
            if row["tokens"] is not None:
                facts.append(f"{row['tokens']} tokens")
            if run.fork.usage.cached_note:
                facts.append(run.fork.usage.cached_note)
            if row["seconds"] is not None:
                facts.append(f"{row['seconds']:.2f} s")
            if row["tool_calls"]:
                facts.append("calls " + ", ".join(_short(c, 60) for c in row["tool_calls"]))
            lines.append(f"- {_short(_one_line(row['variant']), 80)} ({'; '.join(facts)})")
            text = _note(row)
            if text:
                lines.append("    " + _short(text, 300).replace("\n", "\n    "))
        return visible("\n".join(lines))

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
        body = []
        for row, run in zip(self.table(), self.runs.values(), strict=True):
            waits = _note(row) if row["status"] == "waiting" else ""
            tokens = "" if row["tokens"] is None else str(row["tokens"])
            cells = [row["variant"], row["status"], row["answer"] or waits,
                     "\n".join(row["tool_calls"]),
                     " ".join(filter(None, (tokens, run.fork.usage.cached_note))),
                     "" if row["seconds"] is None else f"{row['seconds']:.2f}",
                     row["error"] or ""]
            body.append("<tr>" + "".join(
                f'<td style="white-space:pre-wrap;overflow-wrap:anywhere;'
                f'vertical-align:top;text-align:left">{escape(cell)}</td>'
                for cell in cells) + "</tr>")
        caption = escape(f"{self.agent.name}: {_short(text_of(self.message), 200)}")
        return (f'<table class="fragola-comparison"><caption style="text-align:left">'
                f"{caption}</caption><thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(body)}</tbody></table>")


def _note(row: dict[str, Any]) -> str:
    """The answer, else what the row says instead (its error, that it waits)."""
    if row["error"]:
        return f"error: {row['error']}"
    if row["status"] == "waiting":
        return ("waiting for a decision on its tool call(s): approve/reject them in its "
                f"panel (or comparison[{row['variant']!r}].approve(id)), then step()")
    return row["answer"] or ""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
