"""The parts of a panel that show text: message blocks, the streaming reply, errors; and the
small widget helpers the panel and the approval boxes share.

Messages go into HTML widgets of at most ``BLOCK_SIZE`` messages each, and the blocks into
groups of at most ``GROUP_SIZE``. Appending a message reads only that message from the agent
(``agent.messages_since``) and re-renders only the last block (from per-message HTML kept for
it); a new block changes the children of the last group only (a flat list of 100 blocks is
4 KB of widget ids sent again each time), and a new group comes every 2,500 messages. So one
more message costs the same at 5,000 messages as at 50: the browser receives one block, never
the whole history.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets  # type: ignore[import-untyped]

from ..render import escape, message_html, text_of, tool_names_of

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = [
    "BLOCK_SIZE", "GROUP_SIZE", "PANEL_CSS", "MessageBlocks", "StreamView", "button", "close_tree",
    "error_text", "html_widget",
]

BLOCK_SIZE = 50
GROUP_SIZE = 50

# The streaming parts flow inline as one text (ipywidgets lays boxes and HTML widgets out as
# flex boxes with margins: a part would start a new line). The last rules: approval buttons as
# wide as their label ("Approve edited arguments" was cut to "Approve edited a..."); disabled
# buttons grey with a not-allowed cursor (ipywidgets only fades them: a faded orange Stop
# looked clickable); the quiet notes beside the status and the buttons; and one
# "disconnected" mark per panel (ipywidgets puts a red broken-link icon on every widget without
# a kernel: a notebook reopened from its saved widget state showed nine of them in one panel,
# one per inner widget).
PANEL_CSS = """<style>
.fragola-panel{border:1px solid rgba(127,127,127,.3);border-radius:6px;padding:6px;gap:4px}
.fragola-panel .fragola-streaming{display:block;white-space:pre-wrap;word-break:break-word;
  opacity:.8}
.fragola-panel .fragola-stream-part,.fragola-panel .fragola-stream-part>.widget-html-content{
  display:inline;margin:0;padding:0}
.fragola-approval{border:1px dashed #d97706;border-radius:4px;padding:4px;margin:2px 0}
.fragola-approval-error{color:#b91c1c;white-space:pre-wrap}
.fragola-stores pre,.fragola-approval pre{white-space:pre-wrap;word-break:break-word;margin:2px 0}
.fragola-approval .jupyter-button{width:auto;align-self:flex-start;
  min-width:var(--jp-widgets-inline-width-short,148px)}
.fragola-panel .jupyter-button:disabled{background-color:var(--jp-layout-color3,#ccc);
  color:var(--jp-ui-font-color2,#555);cursor:not-allowed;box-shadow:none;opacity:.7}
.fragola-panel .fragola-outcome,.fragola-panel .fragola-detached{font-style:italic;
  color:var(--jp-ui-font-color2,#555);margin-left:8px;white-space:nowrap}
.fragola-panel .jupyter-widgets-disconnected::before,
.fragola-fork-tree .jupyter-widgets-disconnected::before{display:none}
</style>"""


def button(description: str, css_class: str, style: str = "") -> Any:
    """A ``widgets.Button`` with a CSS class (what the tests and the browser find it by)."""
    widget = widgets.Button(description=description, button_style=style)
    widget.add_class(css_class)
    return widget


def html_widget(css_class: str) -> Any:
    """An empty ``widgets.HTML`` with a CSS class."""
    widget = widgets.HTML()
    widget.add_class(css_class)
    return widget


def error_text(exc: BaseException) -> str:
    """``ClassName: message``, with the cause when it says more (a ModelError's openai error)."""
    text = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__
    if cause is not None and str(cause) not in text:
        text += f"\ncaused by {type(cause).__name__}: {cause}"
    return text


def close_tree(widget: Any) -> None:
    """Close a widget, its children and their layouts (their comms go away in the kernel
    and in the browser), for views that are replaced."""
    for child in getattr(widget, "children", ()):
        close_tree(child)
    for part in (getattr(widget, "layout", None), getattr(widget, "style", None)):
        if isinstance(part, widgets.Widget):
            part.close()
    widget.close()


def close_view(view: Any) -> None:
    """Detach a panel or tree and close all its widgets. Never raises: ``Widget.__del__``
    calls ``close``, at interpreter exit too."""
    with contextlib.suppress(Exception):
        view.detach()
        for child in view.children:
            close_tree(child)


class MessageBlocks(widgets.VBox):  # type: ignore[misc]
    """A conversation as HTML blocks of ``BLOCK_SIZE`` messages, from index ``start`` on,
    ``GROUP_SIZE`` blocks to a group (a VBox of class ``fragola-block-group``)."""

    def __init__(self, start: int = 0) -> None:
        super().__init__()
        self.add_class("fragola-messages")
        self.start = start
        self._lock = threading.RLock()
        self._groups: list[tuple[Any, list[Any]]] = []  # (VBox, its HTML blocks), the last growing
        self._clear()

    def _clear(self) -> None:
        self._shown = self.start  # index of the next message to render
        self._last: dict[str, Any] | None = None  # the last message rendered (by identity)
        self._names: dict[str, str] = {}  # tool call id -> tool name, from the calls shown
        self._looked_back = self.start == 0  # the calls made before start were named
        self._tail: list[str] = []  # the HTML of each message of the last block
        old, self._groups = self._groups, []
        self.children = ()
        for group, _ in old:
            close_tree(group)

    @property
    def count(self) -> int:
        """How many messages are shown."""
        return self._shown - self.start

    @property
    def blocks(self) -> tuple[Any, ...]:
        """The HTML blocks, in order."""
        return tuple(block for _, blocks in self._groups for block in blocks)

    def update(self, agent: Agent) -> None:
        """Show ``agent``'s history, reading and rendering only the messages it gained since
        the last update. A history that shrank or was replaced (``agent.reset``) is rendered
        again from scratch."""
        with self._lock:
            if self._last is None:
                fresh = agent.messages_since(self._shown)
            else:  # the last message shown, read again: is it still the same history?
                fresh = agent.messages_since(self._shown - 1)
                if fresh and fresh[0] is self._last:
                    del fresh[0]
                else:
                    self._clear()
                    fresh = agent.messages_since(self._shown)
            if fresh:
                self._render(agent, fresh)

    def _render(self, agent: Agent, fresh: list[dict[str, Any]]) -> None:
        grown: list[tuple[Any, list[Any]]] = []  # the groups given a new block
        for index, message in enumerate(fresh, self._shown):
            if not self._groups or len(self._tail) >= BLOCK_SIZE:
                if self._groups:
                    self._write()  # the full block keeps its final HTML
                if not self._groups or len(self._groups[-1][1]) >= GROUP_SIZE:
                    group = widgets.VBox()
                    group.add_class("fragola-block-group")
                    self._groups.append((group, []))
                    self.children = tuple(g for g, _ in self._groups)
                block = widgets.HTML()
                block.add_class("fragola-block")
                self._groups[-1][1].append(block)
                if not grown or grown[-1] is not self._groups[-1]:
                    grown.append(self._groups[-1])
                self._tail = []
            if message.get("role") == "tool" and not self._looked_back:
                self._look_back(agent, message)
            tool_names_of([message], self._names)
            self._tail.append(message_html(message, self._names, index))
        self._write()
        for group, blocks in grown:  # one children update per group, not one per block
            group.children = tuple(blocks)
        self._shown, self._last = self._shown + len(fresh), fresh[-1]

    def _look_back(self, agent: Agent, message: dict[str, Any]) -> None:
        """A tool result shown may answer a call made before ``start``: name the calls made
        before it, once, and only when a result needs it."""
        if str(message.get("tool_call_id", "")) not in self._names:
            self._looked_back = True
            before = tool_names_of(agent.messages_since(0)[: self.start])
            self._names = {**before, **self._names}

    def _write(self) -> None:
        block = self._groups[-1][1][-1]
        block.value = f'<div class="fragola-conversation">{"".join(self._tail)}</div>'


class StreamView(widgets.VBox):  # type: ignore[misc]
    """The reply as it streams, escaped, updated at most once per ``interval`` seconds.

    A chunk arriving sooner is kept and flushed by a timer on the event loop it came from
    (the trailing flush), so the last text always shows even when the stream pauses; a chunk
    arriving when that flush is overdue (a loop too busy to run the timer) shows at once.

    The text is shown in parts (HTML widgets of class ``fragola-stream-part``, laid out inline
    as one text). Once the last part shows ``part_size`` characters it is left as it is and
    the text after it goes to a new part, so an update sends the last part, not the whole
    reply: it costs the same at the end of a long reply as at its start.
    """

    interval = 0.08  # at most 12.5 updates a second
    part_size = 1_000

    def __init__(self) -> None:
        super().__init__()
        self.add_class("fragola-streaming")
        self._lock = threading.RLock()
        self._text = ""  # the text received
        self._frozen = ""  # the text of the parts before the last, never sent again
        self._last = ""  # the text the last part shows
        self._parts: list[Any] = [self._new_part("")]
        self.children = tuple(self._parts)
        self._dirty = False
        self._sent_at = 0.0
        self._timer: asyncio.TimerHandle | None = None

    @property
    def html(self) -> str:
        """What the parts show, joined."""
        return "".join(part.value for part in self._parts)

    def feed(self, message: dict[str, Any]) -> None:
        """Show the partial assistant ``message`` (a model_chunk event's ``message``)."""
        text = text_of(message.get("content"))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            text += f"\n→ {function.get('name') or ''}({function.get('arguments') or ''})"
        with self._lock:
            self._text, self._dirty = text, True
            wait = self._sent_at + self.interval - time.monotonic()
            if wait <= 0:
                self._cancel_timer()
                self._show()
            elif self._timer is None:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:  # no loop: the next chunk or flush() shows it
                    return
                self._timer = loop.call_later(wait, self.flush)

    def flush(self) -> None:
        """Show the text received so far now."""
        with self._lock:
            self._timer = None
            if self._dirty:
                self._show()

    def clear(self) -> None:
        """The message is stored (or the run ended): the blocks show it now."""
        with self._lock:
            self._cancel_timer()
            self._text, self._dirty = "", False
            self._restart()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _new_part(self, text: str) -> Any:
        part = widgets.HTML(escape(text))  # the text goes with the widget's opening
        part.add_class("fragola-stream-part")
        return part

    def _restart(self) -> None:
        """Back to one empty part (the first, kept for the next reply). The browser applies
        each change as it comes: dropping the other parts first would show the first part
        alone, and emptying it first the others alone. So with more than one part the view
        is emptied first; every state shown on the way is empty, never a piece of the text."""
        self._frozen = self._last = ""
        extra, self._parts = self._parts[1:], self._parts[:1]
        if extra:
            self.children = ()
        if self._parts[0].value:
            self._parts[0].value = ""
        if extra:
            self.children = tuple(self._parts)
            for part in extra:
                close_tree(part)

    def _show(self) -> None:
        self._dirty, self._sent_at = False, time.monotonic()
        text = self._text
        if not text.startswith(self._frozen):  # not the same reply going on: start again
            self._restart()
        tail, last = text[len(self._frozen):], self._last
        if (len(last) >= self.part_size and len(tail) > len(last) and tail.startswith(last)
                and not last.endswith("\r")):  # "\r" and "\n" in two parts: two line breaks
            self._frozen += last
            self._last = tail[len(last):]
            self._parts.append(self._new_part(self._last))
            self.children = tuple(self._parts)
        else:
            self._last = tail
            piece = escape(tail)
            if self._parts[-1].value != piece:
                self._parts[-1].value = piece
