"""``ForkTree``: an agent and all its forks as a tree; selecting a node shows that branch.

The tree itself is an anywidget (``TreeView``) whose view draws the synced ``nodes`` with
``textContent`` only (names come from users and models) and sets ``selected`` on a click.
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
from typing import TYPE_CHECKING, Any

import anywidget
import ipywidgets as widgets  # type: ignore[import-untyped]
import traitlets

from fragola_nb.base.render import escape, visible
from fragola_nb.core.branchdiff import diff
from fragola_nb.core.events import transient
from fragola_nb.notebook.diffview import DiffView
from fragola_nb.notebook.panel import AgentPanel
from fragola_nb.notebook.static_copy import live_text
from fragola_nb.notebook.textviews import ForkTreeText, edited_words, hand_edited, walk

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.events import Subscription

__all__ = ["ForkTree", "TreeView"]

_log = logging.getLogger("fragola_nb")

ESM = r"""
function row(node, selected, model) {
  const item = document.createElement("div");
  item.className = "fragola-tree-node" + (node.id === selected ? " fragola-tree-selected" : "");
  item.dataset.agentId = node.id;
  item.setAttribute("role", "treeitem");
  item.tabIndex = 0;
  item.style.paddingLeft = (4 + 18 * node.depth) + "px";
  const part = (cls, text) => {
    const span = document.createElement("span");
    span.className = cls;
    span.textContent = text;
    item.append(span);
    return span;
  };
  // compare: two ticked nodes show their diff (the kernel keeps the last two)
  const pick = document.createElement("input");
  pick.type = "checkbox";
  pick.className = "fragola-tree-pick";
  pick.checked = (model.get("picked") || []).includes(node.id);
  pick.title = "compare: tick two branches to see their diff";
  pick.setAttribute("aria-label", "compare " + node.name);
  pick.addEventListener("click", (e) => e.stopPropagation());
  pick.addEventListener("change", () => {
    const now = (model.get("picked") || []).filter((id) => id !== node.id);
    if (pick.checked) now.push(node.id);
    model.set("picked", now);
    model.save_changes();
  });
  item.append(pick);
  part("fragola-tree-name", (node.depth ? "\u2514 " : "") + node.name);
  part("fragola-tree-id", node.id);
  part("fragola-tree-count", node.messages + " msg");
  if (node.parent !== null) {
    part("fragola-tree-at", "at message #" + node.at).title = node.at > 0
      ? "holds its parent's messages #0 to #" + (node.at - 1) + ", then went on"
      : "holds none of its parent's messages";
    part("fragola-tree-added", "+" + node.added + " since fork");
  }
  if (node.edited) { // messages agent.edit replaced in this branch, by number
    part("fragola-tree-edited", node.edited).title =
      "messages of this branch a person edited (the model was sent the edited text alone)";
  }
  const status = String(node.status).replace(/[^a-z]/g, "");
  part("fragola-tree-status fragola-tree-status-" + status, status);
  const choose = () => { model.set("selected", node.id); model.save_changes(); };
  item.addEventListener("click", choose);
  item.addEventListener("keydown", (e) => {
    if (e.target !== item) return; // the checkbox's own keys
    // the tree keeps the keys it uses: arrows move between nodes, not between notebook cells
    const rows = [...item.parentElement.querySelectorAll(".fragola-tree-node")];
    const at = rows.indexOf(item);
    const go = (i) => { if (rows[i]) rows[i].focus(); };
    if (e.key === "Enter" || e.key === " ") choose();
    else if (e.key === "ArrowDown") go(at + 1);
    else if (e.key === "ArrowUp") go(at - 1);
    else if (e.key === "Home") go(0);
    else if (e.key === "End") go(rows.length - 1);
    else return;
    e.preventDefault();
    e.stopPropagation();
  });
  return item;
}

function render({ model, el }) {
  el.classList.add("fragola-tree");
  el.setAttribute("role", "tree");
  el.setAttribute("data-lm-suppress-shortcuts", "true"); // its keys are not notebook commands
  const draw = () => {
    const selected = model.get("selected");
    const active = document.activeElement;
    const focused = el.contains(active) ? active.dataset.agentId : null;
    el.replaceChildren(...(model.get("nodes") || []).map((n) => row(n, selected, model)));
    if (focused) {
      const again = [...el.children].find((c) => c.dataset.agentId === focused);
      if (again) again.focus();
    }
  };
  draw();
  model.on("change:nodes", draw);
  model.on("change:selected", draw);
  model.on("change:picked", draw);
  return () => {
    for (const name of ["nodes", "selected", "picked"]) model.off("change:" + name, draw);
  };
}

export default { render };
"""

# The last rule: ipywidgets marks every widget without a kernel with a red broken-link icon;
# a tree reopened from saved widget state keeps the one of the tree itself, not one per part.
CSS = """
.fragola-tree{font-family:var(--jp-content-font-family,system-ui,sans-serif);font-size:13px;
  color:var(--jp-ui-font-color1,#1f2328);min-width:0}
.fragola-tree-node{cursor:pointer;padding:2px 4px;border-radius:4px;display:flex;flex-wrap:wrap;
  gap:0 8px;min-width:0}
.fragola-tree-node:hover{background:rgba(127,127,127,.12)}
.fragola-tree-node:focus-visible{outline:2px solid var(--jp-brand-color1,#1d4ed8)}
.fragola-tree-selected{background:rgba(59,130,246,.18);font-weight:600}
.fragola-tree-name{unicode-bidi:isolate;overflow-wrap:anywhere;min-width:0}
.fragola-tree-id,.fragola-tree-count{font-family:var(--jp-code-font-family,monospace);
  overflow-wrap:anywhere}
.fragola-tree-edited{font-size:11px;border-radius:8px;padding:0 6px;
  background:rgba(124,58,237,.18)}
.fragola-tree-status{font-size:11px;border-radius:8px;padding:0 6px;color:#fff;background:#047857}
.fragola-tree-at{font-style:italic}
.fragola-tree-pick{margin:0 2px 0 0;align-self:center}
.fragola-tree-diff-head{display:flex;flex-wrap:wrap;gap:4px 8px;align-items:center;min-width:0;
  flex:1 1 auto;overflow-wrap:anywhere;font-size:13px;color:var(--jp-ui-font-color1,#1f2328)}
.fragola-tree-diff-head .widget-html-content{white-space:normal;overflow-wrap:anywhere}
.fragola-tree-compared .widget-hbox{flex-wrap:wrap;gap:4px}
.fragola-tree-diff{max-width:100%;min-width:0;overflow-x:auto}
.fragola-tree-status-generating{background:#1d4ed8}.fragola-tree-status-waiting{background:#b45309}
.fragola-fork-tree .jupyter-widgets-disconnected::before{display:none}
"""


class TreeView(anywidget.AnyWidget):
    """The drawn tree: ``nodes`` (id, name, parent, depth, messages, status, added) in
    depth-first order, and the ``selected`` agent id (set by the view on a click)."""

    _esm = ESM
    _css = CSS
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
