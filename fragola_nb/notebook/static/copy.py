"""A live view and its static copy, shown as two outputs: the copy is what a saved notebook
shows wherever the widget cannot draw.

A panel, a compare grid or a fork tree is a widget (``application/vnd.jupyter.widget-view+json``)
with an escaped HTML copy of what it shows. Kept in one output, the copy is lost wherever the
widget view wins and cannot draw: nbconvert's HTML picks the widget view of every model the
notebook's saved widget state holds (``jupyter nbconvert --execute`` saves it, and so does
JupyterLab with "Save Widget State Automatically"), and that view needs a CDN and anywidget's
module. So the magics show the two apart: the widget view (with its text form) in one output,
the copy in the next one (``text/html`` only), each replaced in place by ``update``.

Where the widget does not draw, the view's ``text/plain`` is shown instead: in JupyterLab, a
notebook someone else executed (a teacher's, shared) is *untrusted* until you trust it, and
shows each output's safe form: that text, and the copy. So the text says what the view is and
how to see it (``live_text``: "fragola_nb panel of 'calculator', 8 messages: run the cell, or
trust the notebook"), and the copy below it says what it is a copy of ("static copy of the
panel of 'calculator', 8 messages, as saved").

The copy hides itself beside its live view: its own CSS hides the output in a JupyterLab or
Notebook 7 output area that holds a live fragola_nb view, and ``panel.js`` empties it from the
page once the view draws (hidden text would still be found by a search or a screen reader).
The notebook file keeps it: nbconvert's HTML, a notebook opened without a kernel, nbviewer
and GitHub show the conversation.
"""

from __future__ import annotations

from typing import Any

from fragola_nb.base.render import escape, visible
from fragola_nb.notebook.textviews import show

__all__ = ["COPY_CLASS", "SEE_LIVE", "LiveDisplay", "copy_bundle", "live_text"]

SEE_LIVE = "run the cell, or trust the notebook"
"""How to see a view that shows as text: run its cell (a kernel draws it live), or trust the
notebook (JupyterLab then draws the views saved with it; see docs/panel.md)."""

COPY_CLASS = "fragola-static-copy"
# the live views' roots
LIVE = (".fragola-panel", ".fragola-compare", ".fragola-tree", ".fragola-eval")
_STYLE = (
    f"<style>.jp-OutputArea:has({', '.join(LIVE)}) .jp-OutputArea-child:has(.{COPY_CLASS})"
    "{display:none}</style>")


def live_text(what: str) -> str:
    """A live view's ``text/plain`` line: ``fragola_nb WHAT: run the cell, or trust the
    notebook`` (``what``: "panel of 'calculator', 8 messages"), its invisible characters
    written out."""
    return visible(f"fragola_nb {what}: {SEE_LIVE}")


def copy_bundle(html: str, line: str = "") -> dict[str, str]:
    """The static copy's output: ``html`` (escaped already) under a note saying what it is a
    copy of (from ``line``, the view's ``live_text``), and the rule that hides it."""
    what = line.removeprefix("fragola_nb ").removesuffix(f": {SEE_LIVE}")
    head = (f'<p class="fragola-static-note"><small>static copy of the {escape(what)}, as '
            "saved</small></p>" if what else "")
    return {"text/html": f'<div class="{COPY_CLASS}">{_STYLE}{head}{html}</div>'}


def _split(view: Any) -> tuple[dict[str, Any], dict[str, Any], str | None, str]:
    bundle = view._repr_mimebundle_()
    data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
    data = dict(data or {})
    line = str(data.get("text/plain", "")).split("\n", 1)[0]
    return data, dict(metadata or {}), data.pop("text/html", None), line


class LiveDisplay:
    """``view`` shown as two outputs (the widget, its static copy); ``update`` replaces both."""

    def __init__(self, view: Any) -> None:
        data, metadata, html, line = _split(view)
        self._view = show(data, raw=True, metadata=metadata, display_id=True)
        self._copy = show(copy_bundle(html, line), raw=True, display_id=True) \
            if html is not None else None

    def update(self, view: Any) -> None:
        data, metadata, html, line = _split(view)
        self._view.update(data, raw=True, metadata=metadata)
        if self._copy is not None and html is not None:
            self._copy.update(copy_bundle(html, line), raw=True)
