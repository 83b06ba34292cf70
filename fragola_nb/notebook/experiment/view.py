"""``ExperimentView``: an experiment drawn live, and the panel of the fork a click picks.

The compare grid (``compare.view.CompareView``) and the evaluation's matrix
(``evaluate.view.EvalView``) are each a ``VBox`` of two parts: the drawing (``drawn``, an
anywidget that answers its page's ``hello``: ``LiveWidget``), and below it the ``branch``,
where the panel of the fork a click picks is shown (``show_fork``; a second pick replaces it).
Detaching the view detaches its panel and tells the page why (``detached``); closing it closes
every part. Without a kernel it shows as the experiment's own static table, under a line that
says what the live view is.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

import anywidget
import ipywidgets as widgets  # type: ignore[import-untyped]
import traitlets

from fragola_nb.base.render import visible
from fragola_nb.notebook.panel.view import AgentPanel
from fragola_nb.notebook.static.copy import live_text

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["ExperimentView", "LiveWidget"]


class LiveWidget(anywidget.AnyWidget):
    """A view that answers its page's ``hello``: a view reopened from a saved notebook gets
    no answer, and says it is read-only instead of offering what it cannot open. Its
    ``detached`` says why it no longer follows its experiment ("" while it does)."""

    detached = traitlets.Unicode("").tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.on_msg(self._on_view_message)

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("do") == "hello":
            self.send({"live": True})


class ExperimentView(widgets.VBox):  # type: ignore[misc]
    """``experiment`` drawn by ``drawn``, and the panel of the fork picked below it.
    ``kind`` names its CSS classes (``fragola-KIND`` on the drawing, ``fragola-KIND-view`` on
    the view)."""

    DETACHED = "this view no longer follows the experiment"
    """What the page says once the view is detached (``detach()`` without a reason)."""

    def __init__(self, experiment: Any, drawn: LiveWidget, *, kind: str,
                 namespace: Any = None) -> None:
        super().__init__()
        self.experiment = experiment
        self.drawn = drawn
        self.namespace = namespace  # where the panels bind forks (default: the notebook's)
        self.add_class(f"fragola-{kind}-view")
        drawn.add_class(f"fragola-{kind}")
        self.branch = widgets.VBox()
        self.panel: AgentPanel | None = None
        self.children = (drawn, self.branch)
        self._lock = threading.RLock()
        self._detached = False

    def detach(self, why: str = "") -> None:
        """Stop following the experiment; the drawing and the panel keep their last state."""
        with self._lock:
            if self._detached:
                return
            self._detached = True
            self._stop_following()
            self.drawn.detached = visible(why or self.DETACHED)
            if self.panel is not None:
                self.panel.detach()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # Widget.__del__ calls close, at exit too
            self.detach()
            self.drawn.close()
            self.branch.close()
            if self.panel is not None:
                self.panel.close()
        super().close()

    def show_fork(self, fork: Agent | None) -> None:
        """Show ``fork``'s panel below the drawing, in place of the one shown (None: none).
        Called under the view's lock."""
        if self.panel is not None:
            self.panel.close()
            self.panel = None
        if fork is not None:
            self.panel = AgentPanel(fork, namespace=self.namespace)
        self.branch.children = (self.panel,) if self.panel is not None else ()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # Beside the live view, the experiment's escaped static table (nbconvert, GitHub)
        # and its text under a line saying what the live view is.
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs) or {}
        data["text/plain"] = f"{live_text(self._what())}\n{self.experiment!r}"
        data["text/html"] = self.experiment._repr_html_()
        return data

    def _what(self) -> str:
        """What the live view is, for its text line: "compare grid of 'tutor', 2 variants"."""
        raise NotImplementedError

    def _stop_following(self) -> None:
        """Drop what follows the experiment (subscriptions, timers); under the lock."""
