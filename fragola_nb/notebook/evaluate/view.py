"""``EvalView``: an ``Evaluation`` as a live matrix, cases down, variants across.

The matrix is one anywidget (``EvalMatrix``, ``evaluation.js``/``evaluation.css``). It gets
compact data: ``cases`` (each case's input, shortened, sent once), ``cells`` (one small list
per case × variant: a letter per repeat, the mean score, the change against a baseline) and
``head`` (per variant: its name and the lines under it, written by the kernel: pass rate,
cost, rows left; see ``htmlview.head_facts``). The JavaScript draws only the rows in sight (a
1,000-case evaluation is 1,000 rows), with ``textContent`` only, and filters them (failed
only, changed only).

The view follows the evaluation (``Evaluation.subscribe``): a row that changes is counted
(``live.LiveTally``), and at most every ``INTERVAL`` seconds the view sends the cells of
the rows that changed, as one ``{"do": "patch", "cells": [[index, cell], ...], "flags":
[[index, flags or null], ...]}`` message, and the head from the counters: an update costs
what changed, not the rows that exist. At the end (and on a diff or a label) everything is
worked out afresh and sent whole, the verdicts with it. A click on a
cell sets ``selected`` (case, variant, repeat); the view then shows that row's answer,
error, grades and trajectory (``detail``; ``trajectory``) and, below the matrix, the
panel of the fork it ran on. It decides nothing. ``cell.EvalWatcher`` shows it for
``await agent.evaluate(...)``.

>>> view = EvalView(evaluation)        # doctest: +SKIP
>>> view.matrix.cells[0]               # doctest: +SKIP
['pf', 0.5, '']
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import traitlets

from fragola_nb.base.redact import redact_text
from fragola_nb.base.render import text_of, visible
from fragola_nb.experiments.evaluate.evalrow import EvalRow
from fragola_nb.experiments.evaluate.evaluation import Evaluation
from fragola_nb.experiments.graders.base import Grade
from fragola_nb.notebook.evaluate import verdicts as verdict_view
from fragola_nb.notebook.evaluate.live import (
    STATS_EVERY,
    LiveTally,
    cell_marks,
    head_data,
    matrix_cells,
)
from fragola_nb.notebook.evaluate.trajectory import trajectory_detail
from fragola_nb.notebook.experiment.view import ExperimentView, LiveWidget

__all__ = ["INTERVAL", "EvalMatrix", "EvalView", "cell_marks", "matrix_cells"]

_log = logging.getLogger("fragola_nb")
_HERE = Path(__file__).parent

INTERVAL = 0.1
"""Seconds between two updates of the matrix while rows finish (at most 10 a second)."""

SHORT = 160  # characters of a case's input in its row (the whole input is in the detail)


class EvalMatrix(LiveWidget):
    """The drawn matrix: ``head``, ``cases``, ``cells`` (see ``matrix_cells``), the
    ``selected`` cell ``[case, variant index, repeat]`` and its ``detail``."""

    _esm = _HERE / "evaluation.js"
    _css = _HERE / "evaluation.css"
    head = traitlets.Dict().tag(sync=True)
    cases = traitlets.List(traitlets.Unicode()).tag(sync=True)
    cells = traitlets.List(traitlets.List()).tag(sync=True)
    selected = traitlets.List(traitlets.Int()).tag(sync=True)
    detail = traitlets.Dict().tag(sync=True)
    verdicts = traitlets.Dict().tag(sync=True)  # verdicts.verdict_data
    flags = traitlets.Dict().tag(sync=True)  # verdicts.matrix_flags


class EvalView(ExperimentView):
    """The matrix of ``evaluation`` and, below it, the panel of the cell clicked."""

    DETACHED = "this matrix no longer follows the evaluation"

    def __init__(self, evaluation: Evaluation, *, namespace: Any = None) -> None:
        matrix = EvalMatrix()
        super().__init__(evaluation, matrix, kind="eval", namespace=namespace)
        self.evaluation, self.matrix = evaluation, matrix
        self._sent_at = self._stats_at = 0.0
        self._patched = False  # cells sent as patches since the last whole matrix
        self._ended = evaluation.done  # shown after its end: everything at once
        self._tally = LiveTally(evaluation)
        self._timer: asyncio.TimerHandle | None = None
        known = evaluation.known
        firsts: dict[int, EvalRow] = {}
        for row in evaluation:
            firsts.setdefault(row.case, row)
        self.matrix.cases = [visible(_short(redact_text(text_of(firsts[c].input), known)))
                             if c in firsts else "" for c in range(max(firsts, default=-1) + 1)]
        evaluation.subscribe(self._on_row)
        self.matrix.observe(self._on_selected, names="selected")
        self.matrix.on_msg(self._on_label)
        self.refresh()

    def refresh(self) -> None:
        """Send everything whole: at the run's end from the counters (equal to a fresh
        working-out: tests/notebook/test_eval_live.py), its tests right after; on a diff
        or a label worked out afresh from every row (while rows finish, ``_update`` sends
        what changed)."""
        with self._lock:
            self._cancel_timer()
            if self._detached:
                return
            evaluation = self.evaluation
            ended = not self._ended and evaluation.done and evaluation.baseline is None
            later = self._tests_later() if ended else None
            self._ended = self._ended or evaluation.done
            if ended:
                cells, flags, verdicts, head = self._tally.whole(self.matrix.cells,
                                                                 self.matrix.flags)
            else:
                self._tally.take()  # the counters follow the rows the fresh figures read
                lines = evaluation.summary()  # once: the title and the head read it
                cells, flags = matrix_cells(evaluation), verdict_view.matrix_flags(evaluation)
                verdicts = verdict_view.verdict_data(evaluation, lines)
                head = head_data(evaluation, lines, evaluation.overview(lines))
            # patched in place while it ran: equal values would not be sent; the end sends all
            whole = [key for key, value in (("cells", cells), ("flags", flags))
                     if self._patched and value == getattr(self.matrix, key)]
            self._patched = False
            self._sent_at = time.monotonic()  # after the figures: INTERVAL between sends
            with self.matrix.hold_sync():  # one message for them all
                self.matrix.cells = cells
                self.matrix.flags = flags
                self.matrix.verdicts = verdicts
                self.matrix.head = head
            if whole:
                self.matrix.send_state(whole)
            if later is not None:
                later.call_soon(self._draw_tests)
            elif ended and len(evaluation.variants) > 1:
                self._draw_tests()

    def _tests_later(self) -> asyncio.AbstractEventLoop | None:
        # The run's tests (permutation tests, about 0.3 s at 1,000 cases) are drawn right
        # after ``evaluate`` returns, from the loop, not before it returns (see
        # docs/evaluation-view.md). Without a loop, or a view made later: at once.
        if len(self.evaluation.variants) < 2:
            return None
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            return None

    def _draw_tests(self) -> None:
        try:
            with self._lock:
                if not self._detached:  # the intervals drawn stay: the same rows
                    self.matrix.verdicts = {**self.matrix.verdicts,
                                            "lines": verdict_view.verdict_lines(self.evaluation)}
        except Exception:
            _log.exception("fragola_nb: the evaluation matrix failed to draw its verdicts")

    def _update(self) -> None:
        # Paced, while rows finish: the cells of the rows that changed (a ``patch``
        # message), the head from the counters; the intervals at most every STATS_EVERY s.
        with self._lock:
            evaluation = self.evaluation
            if evaluation.done or evaluation.baseline is not None:
                self.refresh()
                return
            self._cancel_timer()
            if self._detached:
                return
            cells, flags = self._tally.take()
            lines = self._tally.lines()
            head = head_data(evaluation, lines, self._tally.title(lines))
            now = time.monotonic()
            matrix = self.matrix
            for at, cell in cells.items():  # in place: a page that opens later gets these
                matrix.cells[at] = cell
            for at, flag in flags.items():
                if flag is None:
                    matrix.flags.pop(str(at), None)
                else:
                    matrix.flags[str(at)] = flag
            self._sent_at, self._patched = now, True
            if cells:
                matrix.send({"do": "patch", "cells": [[at, c] for at, c in cells.items()],
                             "flags": [[at, f] for at, f in flags.items()]})
            with matrix.hold_sync():
                matrix.head = head
                if now >= self._stats_at + STATS_EVERY:
                    self._stats_at = now
                    matrix.verdicts = {"intervals": self._tally.intervals(), "lines": []}

    def _stop_following(self) -> None:
        self._cancel_timer()

    def _what(self) -> str:
        return (f"evaluation matrix, {self.evaluation.cases} cases × "
                f"{len(self.evaluation.variants)} variants")

    # -- updates, coalesced (views never raise into the run they show) ------------------------

    def _on_row(self, index: int | None) -> None:
        try:
            if index is None:  # the end, or a diff: at once
                self.refresh()
            else:
                with self._lock:  # a row: counted at the next update, paced
                    self._tally.changed(index)
                    if self._timer is None:
                        self._soon()
        except Exception:
            _log.exception("fragola_nb: the evaluation matrix failed to update")

    def _soon(self) -> None:
        with self._lock:
            if self._detached or self._timer is not None:
                return
            wait = self._sent_at + INTERVAL - time.monotonic()
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop here: no timer to flush later, so send now
                wait = 0
            if wait <= 0:
                self._update()
            else:
                self._timer = loop.call_later(wait, self._update)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # -- a click on a cell ------------------------------------------------------------------------

    def _on_selected(self, change: dict[str, Any]) -> None:
        with self._lock:
            if self._detached:
                return
            row = self._row_at(change["new"])
            self.matrix.detail = self._detail(row) if row is not None else {}
            self.show_fork(row.fork if row is not None else None)

    def _on_label(self, _widget: Any, content: Any, _buffers: Any) -> None:
        # ✓ / ✗ and a note in a cell's detail: the evaluation labels the row, the view shows it
        try:
            asked = verdict_view.label_message(self.evaluation, content)
            if asked is None or self._detached:
                return
            index, passed, note = asked
            row = self.evaluation.label(index, passed, note)
            with self._lock:
                if list(self.matrix.selected) == [row.case, self.evaluation.variants.index(
                        row.variant), row.repeat]:
                    self.matrix.detail = self._detail(row)
        except Exception:
            _log.exception("fragola_nb: the evaluation matrix failed to set a label")

    def _row_at(self, where: list[int]) -> EvalRow | None:
        if len(where) != 3 or not 0 <= where[1] < len(self.evaluation.variants):
            return None
        rows = self.evaluation.cell(where[0], self.evaluation.variants[where[1]])
        return next((row for row in rows if row.repeat == where[2]), None)

    def _detail(self, row: EvalRow) -> dict[str, Any]:
        known = self.evaluation.known

        def shown(text: Any) -> str:
            return visible(redact_text(str(text), known))

        note = ("" if row.fork is not None else
                "no fork to open: this row was read back from a file" if row.resumed else
                "no fork yet: the row has not run")
        return {"input": shown(text_of(row.input)), "variant": shown(row.variant),
                "repeat": row.repeat, "status": row.status, "passed": row.passed,
                "answer": shown(row.answer or ""), "error": shown(row.error or ""),
                "grades": [{"name": shown(g.name), "passed": g.passed,
                            "score": None if g.score is None else round(g.score, 3),
                            **_raw(g), "reason": shown(g.reason or "")} for g in row.grades],
                "note": note, "trajectory": trajectory_detail(row, shown),
                "finished": row.finished,
                "label": None if row.label is None else {"passed": row.label.passed,
                                                         "note": shown(row.label.note)}}


def _raw(grade: Grade) -> dict[str, str]:
    """A judge's own score on its scale, as the detail shows it: ``{"raw": "4 of 1-5"}``."""
    if grade.raw_score is None or grade.scale is None:
        return {}
    low, high = grade.scale
    return {"raw": f"{grade.raw_score:g} of {low:g}-{high:g}"}


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SHORT else text[: SHORT - 1] + "…"
