"""Approval controls: one box per pending tool call, each decided on its own.

A box offers what the agent's public methods allow: ``approve`` (as the model asked, or with
edited arguments, which the agent validates), ``reject`` with a reason, ``inject`` a result by
hand. When the last pending call is decided from here, the run resumes with ``agent.step()``,
started by :func:`~fragola_nb.notebook.runner.launch` so the kernel stays free.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets  # type: ignore[import-untyped]

from ..errors import FragolaError
from ..render import escape, pretty_arguments
from .blocks import button, close_tree, error_text, html_widget
from .runner import launch

if TYPE_CHECKING:
    from ..agent import Agent
    from ..state import Decision, PendingCall

__all__ = ["ApprovalBox", "Approvals"]


def _line(*children: Any) -> Any:
    return widgets.HBox(list(children))


class ApprovalBox(widgets.VBox):  # type: ignore[misc]
    """The controls for one pending call (class ``fragola-approval`` and
    ``fragola-call-<id>``; the header carries ``data-call-id``)."""

    def __init__(self, agent: Agent, pending: PendingCall, on_decided: Callable[[], None]) -> None:
        super().__init__()
        self.agent, self.call_id, self._on_decided = agent, pending.id, on_decided
        self.add_class("fragola-approval")
        self.add_class("fragola-call-" + re.sub(r"[^A-Za-z0-9_-]", "_", pending.id))
        dynamic = pending.reason == "dynamic"
        why = "waits for a result (dynamic tool)" if dynamic else "needs your approval"
        arguments = json.dumps(pending.arguments, indent=2, ensure_ascii=False, default=str)
        self.header = widgets.HTML(
            f'<div data-call-id="{escape(pending.id)}"><b>{escape(pending.name)}</b> '
            f"<code>{escape(pending.id)}</code> {why}</div>"
            f'<pre class="fragola-args">{escape(pretty_arguments(pending.arguments))}</pre>'
        )
        self.approve = button("Approve", "fragola-approve", "success")
        self.args_edit = widgets.Textarea(value=arguments, rows=min(arguments.count("\n") + 1, 8))
        self.args_edit.add_class("fragola-args-edit")
        self.edit_approve = button("Approve edited arguments", "fragola-edit-approve")
        self.reason = widgets.Text(placeholder="reason for rejecting")
        self.reason.add_class("fragola-reason")
        self.reject = button("Reject", "fragola-reject", "danger")
        self.inject_text = widgets.Textarea(placeholder="the tool's result, typed by hand")
        self.inject_text.add_class("fragola-inject-text")
        self.inject = button("Inject result", "fragola-inject")
        self.error = html_widget("fragola-approval-error")
        self.decision = html_widget("fragola-approval-decision")
        for control in (self.approve, self.edit_approve, self.reject, self.inject):
            control.tooltip = f"{control.description}: {pending.id}"
        self.approve.on_click(lambda _: self._decide(lambda: agent.approve(self.call_id)))
        self.edit_approve.on_click(lambda _: self._decide(self._approve_edited))
        self.reject.on_click(
            lambda _: self._decide(lambda: agent.reject(self.call_id, self.reason.value))
        )
        self.inject.on_click(
            lambda _: self._decide(lambda: agent.inject(self.call_id, self.inject_text.value))
        )
        rows = [self.header]
        if not dynamic:  # a dynamic tool has no handler to approve: only a result by hand
            rows += [self.approve, _line(self.args_edit, self.edit_approve)]
        rows += [_line(self.reason, self.reject), _line(self.inject_text, self.inject),
                 self.error, self.decision]
        self.children = rows
        self.controls = (self.approve, self.args_edit, self.edit_approve, self.reason,
                         self.reject, self.inject_text, self.inject)
        if dynamic:  # never shown: disabled, and their comms closed so nothing finds them
            for unused in (self.approve, self.args_edit, self.edit_approve):
                unused.disabled = True
                close_tree(unused)

    def _approve_edited(self) -> None:
        try:
            params = json.loads(self.args_edit.value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the arguments are not valid JSON: {exc}") from None
        if not isinstance(params, dict):
            raise ValueError(f"the arguments must be a JSON object, not {type(params).__name__}")
        self.agent.approve(self.call_id, params=params)

    def _decide(self, act: Callable[[], None]) -> None:
        try:
            act()
        except (FragolaError, ValueError) as exc:  # nothing changed: say why, keep the controls
            self.error.value = escape(error_text(exc))
            return
        self.error.value = ""
        self._on_decided()

    def show_decision(self, decision: Decision | None) -> None:
        if decision is None:
            return
        what = {"approve": "approved", "reject": "rejected", "inject": "result injected"}
        text = what[decision.kind]
        if decision.kind == "approve" and decision.params is not None:
            text += " with edited arguments"
        if decision.kind == "reject" and decision.text:
            text += f": {decision.text}"
        self.decision.value = f"<i>{escape(text)}</i>"
        self.disable()

    def disable(self) -> None:
        for control in self.controls:
            control.disabled = True


class Approvals(widgets.VBox):  # type: ignore[misc]
    """The approval boxes of an agent's pending calls (class ``fragola-approvals``)."""

    def __init__(self, agent: Agent, on_error: Callable[[BaseException], None]) -> None:
        super().__init__()
        self.add_class("fragola-approvals")
        self.agent, self._on_error = agent, on_error
        self.boxes: dict[str, ApprovalBox] = {}
        self._lock = threading.RLock()
        self._frozen = False

    def sync(self) -> None:
        """Match the boxes to ``agent.pending``: new calls get a box, decided ones show
        their decision, answered ones go away."""
        with self._lock:
            pending = self.agent.pending
            ids, added = [p.id for p in pending], False
            for call in pending:
                box = self.boxes.get(call.id)
                if box is None:
                    box = self.boxes[call.id] = ApprovalBox(self.agent, call, self._decided)
                    added = True
                    if self._frozen:
                        box.disable()
                box.show_decision(call.decision)
            if added or list(self.boxes) != ids:  # new calls, or some were answered
                answered = [box for i, box in self.boxes.items() if i not in ids]
                self.boxes = {i: self.boxes[i] for i in ids}
                self.children = tuple(self.boxes.values())
                for box in answered:
                    close_tree(box)

    def _decided(self) -> None:
        self.sync()
        pending = self.agent.pending
        if pending and all(p.decision is not None for p in pending):
            launch(self.agent.step, on_error=self._on_error)  # the last one: resume the run

    def freeze(self) -> None:
        """Disable every control (the panel was detached)."""
        with self._lock:
            self._frozen = True
            for box in self.boxes.values():
                box.disable()
