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
nothing. ``compare_cell.CompareWatcher`` shows it for ``await agent.compare(...)`` in a cell
and for a ``Comparison`` displayed later.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
import ipywidgets as widgets  # type: ignore[import-untyped]
import traitlets

from fragola_nb.base.render import text_of, visible
from fragola_nb.core.events import transient
from fragola_nb.experiments.compare.comparison import Comparison, VariantRun
from fragola_nb.notebook import shown
from fragola_nb.notebook.panel import AgentPanel
from fragola_nb.notebook.static_copy import live_text
from fragola_nb.notebook.stream import GROUP_INTERVAL, Pacer, StreamGroup
from fragola_nb.notebook.worddiff import SIMILAR, LateDiffs, compared, diff_segments, word_overlap

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


class LiveWidget(anywidget.AnyWidget):
    """A view that answers its page's ``hello``: a view reopened from a saved notebook gets
    no answer, and says it is read-only instead of offering what it cannot open."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.on_msg(self._on_view_message)

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("do") == "hello":
            self.send({"live": True})


class CompareGrid(LiveWidget):
    """The drawn grid: ``columns`` (see ``column``), ``title`` (agent, message, done) and the
    ``selected`` variant (set by the view on a header click; "" for none)."""

    _esm = _HERE / "compare.js"
    _css = _HERE / "compare.css"
    columns = traitlets.List(traitlets.Dict()).tag(sync=True)
    title = traitlets.Dict().tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    detached = traitlets.Unicode("").tag(sync=True)



class CompareView(widgets.VBox):  # type: ignore[misc]
    """The grid of ``comparison`` and, below it, the panel of the variant clicked."""

    def __init__(self, comparison: Comparison, *, namespace: Any = None) -> None:
        super().__init__()
        self.comparison = comparison
        self.namespace = namespace
        self.add_class("fragola-compare-view")
        self.grid = CompareGrid()
        self.grid.add_class("fragola-compare")
        self.branch = widgets.VBox()
        self.panel: AgentPanel | None = None
        self.children = (self.grid, self.branch)
        self._lock = threading.RLock()
        self._detached = False
        # under the view's lock: a flush that sends and a redraw that reads the texts never
        # take two locks in opposite orders
        self._streams = StreamGroup(self._streamed, comparison, shown.streamed_text, self._lock)
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

    def detach(self, why: str = "this grid no longer follows the comparison") -> None:
        with self._lock:
            if self._detached:
                return
            self._detached = True
            for subscription in self._subscriptions:
                subscription.unsubscribe()
            self.grid.detached = visible(why)
            if self.panel is not None:
                self.panel.detach()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # Widget.__del__ calls close, at exit too
            self.detach()
            self.grid.close()
            self.branch.close()
            if self.panel is not None:
                self.panel.close()
        super().close()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # Beside the live grid, the static table (nbconvert, GitHub) and the plain text.
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs) or {}
        count = len(self.comparison)
        line = live_text(f"compare grid of {self.comparison.agent.name!r}, {count} "
                         f"variant{'s' if count != 1 else ''}")
        data["text/plain"] = f"{line}\n{self.comparison!r}"
        data["text/html"] = self.comparison._repr_html_()
        return data

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
            if self._detached:
                return
            if self.panel is not None:
                self.panel.close()
                self.panel = None
            fork = self._fork_shown_as(change["new"]) if change["new"] else None
            if fork is not None:
                self.panel = AgentPanel(fork, namespace=self.namespace)
            self.branch.children = (self.panel,) if self.panel is not None else ()

    def _fork_shown_as(self, shown_name: str) -> Any:
        """The fork of the column headed ``shown_name``: the grid sends the name as it shows
        it (``visible``), which differs from the variant's name when it holds a control or
        bidirectional character."""
        for name, run in self.comparison.runs.items():
            if visible(name) == shown_name:
                return run.fork
        return None
