"""``AgentPanel``: a live view of one agent, and the buttons that steer it.

The panel is a view: it subscribes to the agent's events and calls its public methods
(``step``, ``stop_sync``, ``reset``, ``fork``, and through its approval boxes ``approve``,
``reject``, ``inject``). Events may arrive in any thread (the kernel's loop or fragola_nb's
background loop); setting widget traits from there is fine.

    panel = AgentPanel(agent)            # the whole history
    panel = AgentPanel(agent, since=4)   # a turn panel: messages from index 4 on
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets  # type: ignore[import-untyped]

from ..errors import FragolaError
from ..events import transient
from ..render import CSS, conversation_html, escape
from .approvals import Approvals
from .blocks import (
    PANEL_CSS,
    MessageBlocks,
    StreamView,
    button,
    close_view,
    error_text,
    html_widget,
)
from .runner import launch

if TYPE_CHECKING:
    from ..agent import Agent
    from ..events import Subscription

__all__ = ["AgentPanel"]

_log = logging.getLogger("fragola_nb")

Handler = Callable[["AgentPanel", Any], None]

OUTCOME_NOTES = {"stopped": "stopped", "step_limit": "step budget used — Step goes on"}
"""What the header says, beside the status, about how the last run ended (``agent.outcome``);
nothing for a run that finished or paused (the badge and the messages say it), nor after an
error (the error box says it)."""
STATIC_OUTCOME_NOTES = {"stopped": "stopped", "step_limit": "step budget used"}
"""The same in the static HTML copy (nbconvert, GitHub), which has no Step button."""


def _observer(method: Handler) -> Handler:
    """A panel's listener: transient (not copied to forks nor saved in sessions), only for
    this panel's agent, and never raising: a view must not break the run it shows."""

    @functools.wraps(method)
    def listener(self: AgentPanel, event: Any) -> None:
        if self._detached or event.context.agent is not self.agent:
            return
        try:
            method(self, event)
        except Exception:
            _log.exception("fragola_nb: the panel of %s failed to update", self.agent.name)

    return transient(listener)


def _outcome_note(agent: Agent, notes: dict[str, str] = OUTCOME_NOTES) -> str:
    # agent.outcome, not agent.state: this runs on every event. A run going on makes the
    # last one's end old news.
    if agent.status == "generating" or agent.outcome is None:
        return ""
    return notes.get(agent.outcome, "")


class AgentPanel(widgets.VBox):  # type: ignore[misc]
    """Header (name, id, model, status badge, steps), messages, the streaming reply,
    approval controls, Stop/Step/Reset/Fork, tools and stores of one agent."""

    def __init__(self, agent: Agent, since: int | None = None) -> None:
        super().__init__()
        self.agent = agent
        self.since = since
        self.on_fork: Callable[[Agent], None] | None = None
        """Called with a fork made by the Fork button (a ForkTree sets it); when None the
        fork's panel is shown inside this one."""
        self._lock = threading.RLock()
        self._detached = False
        self.add_class("fragola-panel")
        self.header = html_widget("fragola-header")
        self.status_badge = html_widget("fragola-status")
        self.outcome_note = html_widget("fragola-outcome")
        self._status_class = ""
        self.error_box = html_widget("fragola-error")
        self.messages = MessageBlocks(since or 0)
        self.streaming = StreamView()
        self.approvals = Approvals(agent, self.show_error)
        self.stop_button = button("Stop", "fragola-stop", "warning")
        self.step_button = button("Step", "fragola-step")
        self.reset_button = button("Reset", "fragola-reset")
        self.fork_name = widgets.Text(placeholder="fork name (optional)")
        self.fork_name.add_class("fragola-fork-name")
        self.fork_button = button("Fork", "fragola-fork")
        self.tools_box = html_widget("fragola-tools")
        self.stores_box = html_widget("fragola-stores")
        self.detached_note = html_widget("fragola-detached")
        self.forks_box = widgets.VBox()
        self.forks_box.add_class("fragola-forks")
        self.stop_button.on_click(self._stop)
        self.step_button.on_click(self._step)
        self.reset_button.on_click(self._reset)
        self.fork_button.on_click(self._fork)
        self.button_row = widgets.HBox([
            self.stop_button, self.step_button, self.reset_button, self.fork_name,
            self.fork_button, self.detached_note,  # the note says why they are grey
        ])
        self.children = (
            widgets.HTML(CSS + PANEL_CSS),
            widgets.HBox([self.header, self.status_badge, self.outcome_note]),
            self.error_box, self.messages, self.streaming, self.approvals,
            self.button_row, self.tools_box, self.stores_box, self.forks_box,
        )
        self._subscriptions: list[Subscription] = [
            agent.on_after_state_update(self._on_state_update),
            agent.on_status_change(self._on_status_change),
            agent.on_model_chunk(self._on_model_chunk),
            agent.on_after_step(self._on_after_step),
        ]
        self._store_unsubscribes = [
            store.on_change(self._on_store_change) for store in agent.stores.values()
        ]
        self.sync_now()

    # -- the API the magics use -------------------------------------------------------------

    def detach(self, why: str = "this panel no longer follows the agent") -> None:
        """Stop following the agent; the view keeps its last state, its controls disabled,
        and says ``detached: why`` beside them."""
        with self._lock:
            if self._detached:
                return
            self._detached = True
            self.detached_note.value = escape(f"detached: {why}")
            for subscription in self._subscriptions:
                subscription.unsubscribe()
            for unsubscribe in self._store_unsubscribes:
                unsubscribe()
            self.streaming.flush()
            self.approvals.freeze()
            for control in (self.stop_button, self.step_button, self.reset_button,
                            self.fork_name, self.fork_button):
                control.disabled = True

    def close(self) -> None:
        """Detach, and close every widget of the panel (for a view that is replaced)."""
        close_view(self)
        super().close()

    def show_error(self, exc: BaseException) -> None:
        """Show ``exc`` readably (class name, message, cause), escaped."""
        self.error_box.value = escape(error_text(exc))

    def sync_now(self) -> None:
        """Show everything as it is now, the streamed text included."""
        self.streaming.flush()
        self._refresh()

    # -- events -----------------------------------------------------------------------------

    @_observer
    def _on_state_update(self, event: Any) -> None:
        if event.reason == "ai_message":
            self.streaming.clear()  # the stored message replaces the streamed text
        self._refresh()

    @_observer
    def _on_status_change(self, event: Any) -> None:
        if event.status == "generating":
            self.error_box.value = ""  # a new run: the last error is old news
        else:
            self.streaming.clear()
        self._refresh()

    @_observer
    def _on_model_chunk(self, event: Any) -> None:
        self.streaming.feed(event.message)

    @_observer
    def _on_after_step(self, event: Any) -> None:
        self._refresh()

    def _on_store_change(self, value: Any) -> None:
        try:
            self._render_stores()
        except Exception:  # a store's set() must not fail because of its view
            _log.exception("fragola_nb: the panel of %s failed to show a store", self.agent.name)

    # -- rendering --------------------------------------------------------------------------

    def _refresh(self) -> None:
        # Runs on every event: it reads the agent's cheap views (counts, status, pending, the
        # new messages), never agent.state, whose copy of the history grows with it.
        with self._lock:
            agent = self.agent
            self.messages.update(agent)
            fork = f" · fork of {escape(agent.fork_of)}" if agent.fork_of else ""
            self.header.value = (
                f"<b>{escape(agent.name)}</b> <code>{escape(agent.id)}</code> · model "
                f"{escape(agent.model)} · steps <span class='fragola-steps'>"
                f"{agent.step_count}/{agent.options.max_step}</span>{fork}"
            )
            status = agent.status
            if self._status_class != f"fragola-status-{status}":
                if self._status_class:
                    self.status_badge.remove_class(self._status_class)
                self._status_class = f"fragola-status-{status}"
                self.status_badge.add_class(self._status_class)
            self.status_badge.value = escape(status)
            self.outcome_note.value = escape(_outcome_note(agent))
            if not self._detached:
                self.stop_button.disabled = status == "idle"
                for control in (self.step_button, self.reset_button, self.fork_button):
                    control.disabled = status == "generating"
            self.approvals.sync()
            self.tools_box.value = self._tools_html()
            self._render_stores()

    def _tools_html(self) -> str:
        items = []
        for tool in self.agent.options.tools:
            flag = " (dynamic)" if tool.is_dynamic else ""
            flag += " (needs approval)" if tool.require_approval is not False else ""
            about = f" — {escape(tool.description)}" if tool.description else ""
            items.append(f"<li><b>{escape(tool.name)}</b>{flag}{about}</li>")
        listed = "".join(items)
        return f"<details><summary>tools ({len(items)})</summary><ul>{listed}</ul></details>"

    def _render_stores(self) -> None:
        parts = []
        for namespace, store in self.agent.stores.items():
            try:
                value = json.dumps(store.get(), indent=2, ensure_ascii=False, default=str)
            except (TypeError, ValueError):
                value = repr(store.get())
            parts.append(f"<div><b>{escape(namespace)}</b><pre>{escape(value)}</pre></div>")
        self.stores_box.value = (
            f"<details open><summary>stores ({len(parts)})</summary>{''.join(parts)}</details>"
            if parts else ""
        )

    # -- buttons ----------------------------------------------------------------------------

    def _stop(self, _: Any) -> None:
        if self.agent.status != "idle":
            self.agent.stop_sync()  # returns at once; the run settles and the events say so

    def _step(self, _: Any) -> None:
        self.error_box.value = ""
        launch(self.agent.step, on_error=self.show_error)

    def _reset(self, _: Any) -> None:
        try:
            self.agent.reset()
        except FragolaError as exc:
            self.show_error(exc)

    def _fork(self, _: Any) -> None:
        try:
            fork = self.agent.fork(self.fork_name.value.strip() or None)
        except FragolaError as exc:
            self.show_error(exc)
            return
        self.fork_name.value = ""
        if self.on_fork is not None:
            self.on_fork(fork)
        else:
            self.forks_box.children = (*self.forks_box.children, AgentPanel(fork))

    # -- outside a live notebook ------------------------------------------------------------

    def html(self) -> str:
        """The shown messages as standalone escaped HTML (nbconvert, GitHub)."""
        agent = self.agent
        note = _outcome_note(agent, STATIC_OUTCOME_NOTES)
        note = f" · {note}" if note else ""
        return conversation_html(
            agent.messages_since(self.since or 0), title=agent.name, status=agent.status,
            subtitle=f"id {agent.id} · model {agent.model} · "
            f"steps {agent.step_count}/{agent.options.max_step}{note}",
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs) or {}
        data["text/plain"] = repr(self)
        data["text/html"] = self.html()
        return data

    def __repr__(self) -> str:
        since = f", since={self.since}" if self.since else ""
        return f"AgentPanel({self.agent!r}{since})"
