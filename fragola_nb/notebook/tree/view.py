"""``ForkTree``: an agent and all its forks as a tree; selecting a node shows that branch.

The tree itself is an anywidget (``TreeView``, ``tree.js``/``tree.css``) whose view draws the
synced ``nodes`` with ``textContent`` only (names come from users and models) and sets
``selected`` on a click.
Below it, the Python side shows the selected agent's :class:`AgentPanel`.

    tree = ForkTree(agent)     # the tree of agent.root, with agent selected
    tree.select(fork)          # what a click on fork's node does
    tree.compare(agent, fork)  # what ticking two nodes' boxes does: their diff, shown between

A fork's node says where it left its parent ("at message #7": it holds the parent's messages
#0 to #6, ``fork.fork_at``, numbered as every view and ``state.messages[i]`` number them), and
which of its messages a person edited ("edited by hand: #3"). Ticking the boxes of two nodes
shows ``fragola_nb.diff(a, b)``'s paged view (``DiffView``: text only; the names in the line
above it escaped here) between the tree and the branch's panel, redrawn as either branch goes on;
unticking one closes it.
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

from fragola_nb.base.render import escape, visible
from fragola_nb.core.branchdiff import diff
from fragola_nb.core.events import transient
from fragola_nb.notebook.diff.view import DiffView
from fragola_nb.notebook.panel.view import AgentPanel
from fragola_nb.notebook.static.copy import live_text
from fragola_nb.notebook.textviews import ForkTreeText, edited_words, hand_edited, walk

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.events import Subscription

__all__ = ["ForkTree", "TreeView"]

_log = logging.getLogger("fragola_nb")

_HERE = Path(__file__).parent


class TreeView(anywidget.AnyWidget):
    """The drawn tree: ``nodes`` (id, name, parent, depth, messages, status, added) in
    depth-first order, and the ``selected`` agent id (set by the view on a click)."""

    _esm = _HERE / "tree.js"
    _css = _HERE / "tree.css"
    nodes = traitlets.List(traitlets.Dict()).tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    picked = traitlets.List(traitlets.Unicode()).tag(sync=True)
    """The ids of the nodes ticked to compare (the view adds and removes; two show a diff)."""


def node_of(agent: Agent, depth: int) -> dict[str, Any]:
    count = agent.message_count
    return {
        # the name as text the browser cannot reorder (a bidi override shows as \u202e)
        "id": agent.id, "name": visible(agent.name), "parent": agent.fork_of, "depth": depth,
        "messages": count, "status": agent.status, "added": count - agent.fork_point,
        "at": (agent.fork_point if agent.fork_at is None else agent.fork_at)
        if agent.parent is not None else None,
        "edited": edited_words(hand_edited(agent)),
    }


class ForkTree(widgets.VBox):  # type: ignore[misc]
    """The tree of ``agent.root`` and every fork, and the selected branch's panel below."""

    def __init__(self, agent: Agent, *, namespace: Any = None) -> None:
        super().__init__()
        self.agent = agent
        self.namespace = namespace  # where the panels bind forks (default: the notebook's)
        self.add_class("fragola-fork-tree")
        self.view = TreeView()
        self.view.add_class("fragola-tree")
        self.branch = widgets.VBox()
        self.branch.add_class("fragola-tree-branch")
        self.compared = widgets.VBox()  # the diff of the two ticked nodes, when two are
        self.compared.add_class("fragola-tree-compared")
        self._compared_as: tuple[str, str, int, int] | None = None  # what it was drawn of
        self.panel: AgentPanel | None = None
        self.agents: dict[str, Agent] = {}
        self._subscriptions: list[Subscription] = []
        self._lock = threading.RLock()
        self._detached = False
        self.children = (self.view, self.compared, self.branch)
        self.refresh()
        self.view.observe(self._on_selected, names="selected")
        self.view.observe(self._on_picked, names="picked")
        self.select(agent)

    @property
    def selected(self) -> Agent | None:
        return self.agents.get(self.view.selected)

    def select(self, agent: Agent | str) -> None:
        """Show that agent's branch (an agent of this tree, or its id)."""
        self.view.selected = agent if isinstance(agent, str) else agent.id

    def compare(self, a: Agent | str, b: Agent | str) -> None:
        """Show the diff of two agents of this tree (or ids), as ticking their nodes does."""
        self.view.picked = [x if isinstance(x, str) else x.id for x in (a, b)]

    def refresh(self) -> None:
        """Redraw the nodes, following forks made since (also called on every event)."""
        with self._lock:
            if self._detached:
                return
            nodes: list[dict[str, Any]] = []
            for depth, agent in walk(self.agent.root):
                if agent.id not in self.agents:
                    self._watch(agent)
                nodes.append(node_of(agent, depth))
            self.view.nodes = nodes
            self._show_diff()

    def detach(self) -> None:
        """Stop following the agents; the tree and the panel keep their last state."""
        with self._lock:
            self._detached = True
            for subscription in self._subscriptions:
                subscription.unsubscribe()
            self._subscriptions.clear()
            if self.panel is not None:
                self.panel.detach()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # Next to the live view, a static tree (and the selected branch) for nbconvert/GitHub.
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs) or {}
        text = ForkTreeText(self.selected or self.agent)
        line = live_text(f"fork tree of {self.agent.root.name!r}, {len(text.lines)} "
                         f"agent{'s' if len(text.lines) != 1 else ''}")
        data["text/plain"] = f"{line}\n{text.text()}"
        data["text/html"] = text._repr_html_() + (self.panel.html() if self.panel else "")
        return data

    def close(self) -> None:
        """Detach, and close the tree's widgets and the shown panel."""
        with contextlib.suppress(Exception):  # Widget.__del__ calls close, at exit too
            self.detach()
            self.view.close()
            self.branch.close()
            if self.panel is not None:
                self.panel.close()
        super().close()

    def _watch(self, agent: Agent) -> None:
        self.agents[agent.id] = agent
        self._subscriptions += [
            agent.on_after_state_update(self._changed), agent.on_status_change(self._changed),
        ]

    @transient  # the view's listener: not copied to forks nor saved in sessions
    def _changed(self, event: Any) -> None:
        try:
            self.refresh()
        except Exception:  # a view must not break the run it shows
            _log.exception("fragola_nb: the fork tree failed to update")

    def _on_selected(self, change: dict[str, Any]) -> None:
        with self._lock:
            if self._detached:
                return
            agent = self.agents.get(change["new"])
            if agent is None:
                self.refresh()  # a fork made elsewhere since the last event?
                agent = self.agents.get(change["new"])
            if agent is None:  # not an agent of this tree: keep showing the current branch
                if self.panel is not None:
                    self.view.selected = self.panel.agent.id
                return
            if self.panel is not None and self.panel.agent is agent:
                return
            if self.panel is not None:
                self.panel.close()
            self.panel = AgentPanel(agent, namespace=self.namespace)
            self.panel.on_fork = self._forked
            self.branch.children = (self.panel,)

    def _on_picked(self, change: dict[str, Any]) -> None:
        picked = list(change["new"])
        if len(picked) > 2:  # a third tick: the two ticked last are compared
            self.view.picked = picked[-2:]
            return
        with self._lock:
            if not self._detached:
                self._show_diff()

    def _show_diff(self) -> None:
        """Draw the diff of the two ticked agents (again only when either changed)."""
        pair = [self.agents.get(id_) for id_ in self.view.picked]
        a, b = pair if len(pair) == 2 else (None, None)
        if a is None or b is None:
            if self._compared_as is not None:
                self._compared_as = None
                self._replace_diff(())
            return
        key = (a.id, b.id, a.message_count, b.message_count)
        if key == self._compared_as:
            return
        self._compared_as = key
        try:
            view: Any = DiffView(diff(a, b))
        except Exception as exc:  # shown where the diff would be, as text
            view = widgets.HTML(f"<pre>{escape(f'{type(exc).__name__}: {exc}')}</pre>")
        head = widgets.HTML(
            f"<span>diff of <b>{escape(visible(a.name))}</b> [{escape(a.id)}] and "
            f"<b>{escape(visible(b.name))}</b> [{escape(b.id)}]</span>")
        head.add_class("fragola-tree-diff-head")
        close = widgets.Button(description="close diff", tooltip="untick both nodes")
        close.add_class("fragola-tree-diff-close")
        close.on_click(lambda _: setattr(self.view, "picked", []))
        view.add_class("fragola-tree-diff")
        self._replace_diff((widgets.HBox((head, close)), view))

    def _replace_diff(self, children: tuple[Any, ...]) -> None:
        old, self.compared.children = self.compared.children, children
        for box in old:  # their models would stay in the kernel and the page
            for part in getattr(box, "children", ()):
                part.close()
            box.close()

    def _forked(self, fork: Agent) -> AgentPanel | None:
        self.refresh()
        self.select(fork)
        return self.panel  # the fork's panel, which says what the fork was bound to
