"""``CompareView``: a comparison as a side-by-side grid, one column per variant, live.

The grid is one anywidget (``CompareGrid``, ``compare.js``/``compare.css``) drawing the synced
``columns`` with ``textContent`` only. Each column has the variant's status, its answer (as it
streams, then, for every column but the first, as word-level differences from the first
column's answer, computed with ``difflib`` (``worddiff``; long answers on a worker thread, the
answer shown as it is meanwhile), when the two share at least half their words
(``SIMILAR``); else as it is, with a note; a toggle in the grid's header shows every answer
plain), its tool calls, tokens and seconds, and its
error. A click on a column's header sets ``selected``; the Python side then shows that fork's
``AgentPanel`` below the grid (a second click closes it).

While a column streams, its new text goes to the grid as a custom message (``{"t": "stream",
"cols": {name: {"add": piece}}}``, every column's news in one message at most 12.5 times a
second: ``StreamGroup``), never as the whole ``columns`` again: eight long replies would
otherwise resend every column's text on each update, over Jupyter's iopub data rate limit.
``columns`` holds no text for a streaming column, nor, until the comparison is done, for a
column that ended with the text it streamed (``kept``: the page keeps that text as its
answer); its redraws are paced too (``Pacer``). A new view asks (its hello) and gets every
streaming or kept column's text as it is now. A column's last streamed text goes ahead of any
redraw, and the comparison's end sends every answer and word diff in ``columns``.

The view follows the comparison (``Comparison.subscribe``) and each fork's events; it decides
nothing. ``cell.CompareWatcher`` shows it for ``await agent.compare(...)`` in a cell
and for a ``Comparison`` displayed later.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import traitlets

from fragola_nb.base.render import text_of, visible
from fragola_nb.core.events import transient
from fragola_nb.experiments.compare.comparison import Comparison, VariantRun
from fragola_nb.notebook.compare.worddiff import (
    SIMILAR,
    LateDiffs,
    compared,
    diff_segments,
    word_overlap,
)
from fragola_nb.notebook.experiment.view import ExperimentView, LiveWidget
from fragola_nb.notebook.panel import view_data
from fragola_nb.notebook.stream import GROUP_INTERVAL, Pacer, StreamGroup

if TYPE_CHECKING:
    from fragola_nb.core.events import Subscription

__all__ = ["SIMILAR", "CompareGrid", "CompareView", "column", "diff_segments", "word_overlap"]

_log = logging.getLogger("fragola_nb")
_HERE = Path(__file__).parent
ENDED = ("finished", "waiting", "step_limit", "stopped", "not_started", "budget", "failed",
         "cancelled")
CUT = ("stopped", "cancelled")
"""Ends that may cut a reply short: its streamed text is kept on show."""


def column(run: VariantRun, streamed: str, reference: str | None, *,
           diffs: LateDiffs | None = None, start: bool = True) -> dict[str, Any]:
    """What one column shows. ``streamed``: the reply streaming now; ``reference``: the first
    column's final answer (None for the first column, or while it is not final); ``diffs``:
    where the answer is compared with it (without it, at once; with it, the column shows its
    answer as it is until the comparison is known, and ``start=False`` starts no long one)."""
    row = run.row()
    status = row["status"]
    answer = row["answer"] or ""
    final = status in ENDED
    diff = None
    apart = False  # too unlike the first column's answer to be read as differences from it
    if final and reference is not None and answer:
        known = compared(reference, answer) if diffs is None else \
            diffs.get(reference, answer, start=start)
        if known is not None and known[0] >= SIMILAR:
            diff = [list(piece) for piece in known[1]]
        elif known is not None:
            apart = True
    note = ""
    if status == "waiting":
        note = "waiting for your decision: open its panel (click the name) to approve"
    shown = streamed if streamed and not final else answer
    if status in CUT and streamed:  # as the panel does: what had streamed stays, marked
        shown, note = streamed, "stopped mid-reply: this text was not saved"
    return {
        "name": visible(run.name), "status": status,
        "answer": visible(shown),
        "streaming": bool(streamed) and not final, "kept": False, "diff": diff, "apart": apart,
        "calls": [visible(call) for call in row["tool_calls"]],
        "tokens": row["tokens"], "cached": run.fork.usage.cached_note,
        "seconds": row["seconds"] if final else None,
        "error": visible(row["error"] or ""), "note": note,
    }


class CompareGrid(LiveWidget):
    """The drawn grid: ``columns`` (see ``column``), ``title`` (agent, message, done) and the
    ``selected`` variant (set by the view on a header click; "" for none)."""

    _esm = _HERE / "compare.js"
    _css = _HERE / "compare.css"
    columns = traitlets.List(traitlets.Dict()).tag(sync=True)
    title = traitlets.Dict().tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)



class CompareView(ExperimentView):
    """The grid of ``comparison`` and, below it, the panel of the variant clicked."""

    DETACHED = "this grid no longer follows the comparison"

    def __init__(self, comparison: Comparison, *, namespace: Any = None) -> None:
        grid = CompareGrid()
        super().__init__(comparison, grid, kind="compare", namespace=namespace)
        self.comparison, self.grid = comparison, grid
        # under the view's lock: a flush that sends and a redraw that reads the texts never
        # take two locks in opposite orders
        self._streams = StreamGroup(self._streamed, comparison, view_data.streamed_text, self._lock)
        # Redraws as often as streamed text at most: eight columns ending together would
        # each send every column's text several times (the message stored, the status, the
        # run's end), megabytes the page draws one after the other.
        self._redraw = Pacer(lambda: self._guarded("update", self.refresh), self._lock,
                             interval=GROUP_INTERVAL)
        # long answers are compared on a worker thread: a column drawn before its diff is
        # known shows its answer as it is, and the grid is drawn again once it is
        self._diffs = LateDiffs(lambda: self._guarded("update", self._redraw.due))
        self.grid.on_msg(self._on_hello)
        self._subscriptions: list[Subscription] = []
        for run in comparison.runs.values():
            fork = run.fork
            self._subscriptions += [fork.on_model_chunk(self._on_chunk),
                                    fork.on_after_state_update(self._on_change),
                                    fork.on_status_change(self._on_change)]
        comparison.subscribe(self._on_run)
        self.grid.observe(self._on_selected, names="selected")
        self.refresh()

    def refresh(self) -> None:
        """Send every column as it is now."""
        with self._lock:
            if self._detached:
                return
            comparison = self.comparison
            runs = list(comparison.runs.values())
            first = runs[0]
            reference = (first.row()["answer"] or "") if first.status_now in ENDED else None
            # the columns that end: their last streamed text goes ahead of this redraw (the
            # page shows it at once, then keeps it as the answer the redraw brings)
            self._streams.send_ends()
            with self._streams.held() as sent:
                # long answers are compared once every column has ended: while columns
                # stream, the worker would slow the kernel's sending of their texts
                columns = [column(run, sent[run.name], None if i == 0 else reference,
                                  diffs=self._diffs, start=comparison.done)
                           for i, run in enumerate(runs)]
            for run, col in zip(runs, columns, strict=True):
                # A streaming column's text is the stream messages' (a new view gets it on
                # its hello): every redraw would send every streaming column's text again.
                if col["streaming"]:
                    col["answer"] = ""
                # So is the answer of a column that ended while others go on, when it is the
                # text it streamed (``kept``: the page keeps that text as the answer): eight
                # columns ending sent every finished answer again in each redraw, megabytes
                # ahead of the last columns' final text. The comparison's end sends them all.
                ended = self._streams[run.name].ended_with
                if not comparison.done and ended and col["answer"] == ended and \
                        col["status"] in ENDED:
                    col["answer"], col["kept"] = "", True
            self.grid.columns = columns
            self.grid.title = {"agent": visible(comparison.agent.name),
                               "message": visible(text_of(comparison.message)),
                               "done": comparison.done}

    def streamed(self, name: str) -> str:
        """The text of variant ``name``'s reply as it streams ("" when none streams), as the
        views have it (``view.streamed("plain")``)."""
        with self._streams.held() as sent:
            return sent.get(name, "")

    def _stop_following(self) -> None:
        for subscription in self._subscriptions:
            subscription.unsubscribe()

    def _what(self) -> str:
        count = len(self.comparison)
        return (f"compare grid of {self.comparison.agent.name!r}, {count} "
                f"variant{'s' if count != 1 else ''}")

    # -- events (views never raise into the run they show) -----------------------------------------

    def _guarded(self, what: str, action: Any) -> None:
        try:
            with self._lock:
                if not self._detached:
                    action()
        except Exception:
            _log.exception("fragola_nb: the compare grid failed to %s", what)

    def _variant_of(self, fork: Any) -> str | None:
        """The variant ``fork`` runs: its column's name (a fork's own name may have a suffix,
        ``plain-2``, when its parent has a fork of that name already)."""
        return next((run.name for run in self.comparison.runs.values() if run.fork is fork),
                    None)

    @transient
    def _on_chunk(self, event: Any) -> None:
        stream = self._streams.get(self._variant_of(event.context.agent) or "")
        if stream is not None:
            self._guarded("stream", lambda: stream.feed(event.message))

    @transient
    def _on_change(self, event: Any) -> None:
        stream = self._streams.get(self._variant_of(event.context.agent) or "")
        if getattr(event, "reason", None) == "ai_message" and stream is not None:
            # The last text goes with the next paced stream message, then its clear: the
            # stored reply's redraw may come before either (the page keeps the text it has
            # when the stored answer goes on from it).
            self._guarded("stream", stream.end)
        # paced while the comparison runs; a fork going on after it (an approval) is drawn now
        self._guarded("update", self._redraw.flush if self.comparison.done else self._redraw.due)

    def _streamed(self, news: dict[str, dict[str, Any]]) -> None:
        cols = {visible(name): message for name, message in news.items()}
        self._guarded("stream", lambda: self.grid.send({"t": "stream", "cols": cols}))

    def _on_hello(self, _widget: Any, content: Any, _buffers: Any) -> None:
        # A new view has ``columns`` as last set: the streaming texts as they are now (not
        # those of the replies ending: their columns hold them).
        if isinstance(content, dict) and content.get("do") == "hello":
            def send() -> None:
                with self._streams.held() as sent:
                    cols = {visible(name): {"text": text} for name, text in sent.items()
                            if text and not self._streams[name].ending}
                    runs = self.comparison.runs.values()
                    for run, col in zip(runs, self.grid.columns, strict=False):
                        if col.get("kept"):  # an answer the columns leave out
                            cols[col["name"]] = {"text": self._streams[run.name].ended_with}
                    if cols:
                        self.grid.send({"t": "stream", "cols": cols})
            self._guarded("stream", send)

    def _on_run(self, run: VariantRun | None) -> None:
        if run is not None and run.status in ENDED and run.status not in CUT:
            self._guarded("stream", self._streams[run.name].end)
        # the comparison's end is drawn now: whoever awaited it reads the grid next
        self._guarded("update", self._redraw.due if run is not None else self._redraw.flush)

    def _on_selected(self, change: dict[str, Any]) -> None:
        with self._lock:
            if not self._detached:
                self.show_fork(self._fork_shown_as(change["new"]) if change["new"] else None)

    def _fork_shown_as(self, shown_name: str) -> Any:
        """The fork of the column headed ``shown_name``: the grid sends the name as it shows
        it (``visible``), which differs from the variant's name when it holds a control or
        bidirectional character."""
        for name, run in self.comparison.runs.items():
            if visible(name) == shown_name:
                return run.fork
        return None
