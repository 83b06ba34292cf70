"""Static text and HTML forms the magics display where no widget can live.

In a plain IPython terminal (no kernel, so no widget frontend) the magics display these
objects: IPython prints their ``_repr_pretty_`` text, and a notebook renderer would use their
escaped ``_repr_html_``. They are snapshots, taken when made.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from IPython.display import display

from fragola_nb.base.checks import edited_by_hand
from fragola_nb.base.render import (
    EDITED_BY_HAND,
    conversation_html,
    escape,
    transcript_text,
    visible,
)
from fragola_nb.core.agent import Agent
from fragola_nb.core.usage import Usage

__all__ = ["AgentTable", "ForkTreeText", "TextLine", "TurnTranscript", "edited_words",
           "hand_edited", "say", "show", "walk"]


def show(obj: Any, **kwargs: Any) -> Any:
    """``IPython.display.display`` (untyped there); returns the handle for ``display_id``."""
    return display(obj, **kwargs)  # type: ignore[no-untyped-call]


class TextLine:
    """A line of plain text shown as a display of its own, replaced in place by ``update``
    (a note that would go stale as printed text). Only ``text/plain``, so nbconvert and GitHub
    show it as the cell's output text."""

    def __init__(self, text: str) -> None:
        self.text = visible(text)
        self._handle = show({"text/plain": self.text}, raw=True, display_id=True)

    def update(self, text: str) -> None:
        text = visible(text)
        if text != self.text and self._handle is not None:
            self.text = text
            self._handle.update({"text/plain": text}, raw=True)


def say(text: str, *, file: Any = None) -> None:
    """Print a note of ours, which may quote an agent's name or a model's arguments: its
    direction overrides and invisible characters written out (``render.visible``)."""
    print(visible(text), file=file)


class TurnTranscript:
    """The messages one ``%%fragola`` turn added to an agent."""

    def __init__(self, agent: Agent, since: int, usage: Usage | None = None) -> None:
        self.messages = agent.messages_since(since)
        self.since = since
        self.title = agent.name
        self.status = agent.status
        spent = usage.summary() if usage is not None else ""
        self.subtitle = (
            f"id {agent.id} · step {agent.step_count}/{agent.options.max_step}"
            f" · outcome {agent.outcome}" + (f" · this turn: {spent}" if spent else "")
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(visible(f"── {self.title} ({self.status}, {self.subtitle}) ──"))
        if self.messages:
            printer.text("\n" + transcript_text(self.messages, self.since))

    def _repr_html_(self) -> str:
        return conversation_html(
            self.messages, title=self.title, status=self.status, subtitle=self.subtitle,
            start=self.since,
        )


class AgentTable:
    """``%fragola_agents``: the agents bound to names in the user namespace."""

    COLUMNS = ("variable", "name", "id", "status", "messages", "fork_of")

    def __init__(self, named: Iterable[tuple[str, Agent]]) -> None:
        self.rows = [
            (var, visible(a.name), a.id, a.status, str(a.message_count), a.fork_of or "")
            for var, a in named
        ]

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        if not self.rows:
            printer.text("no agents in the namespace")
            return
        table = [self.COLUMNS, *self.rows]
        widths = [max(len(row[i]) for row in table) for i in range(len(self.COLUMNS))]
        printer.text("\n".join(
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in table
        ))

    def _repr_html_(self) -> str:
        if not self.rows:
            return "<p>no agents in the namespace</p>"
        head = "".join(f"<th>{c}</th>" for c in self.COLUMNS)
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>"
            for row in self.rows
        )
        # Its own scroll box, and cells that wrap: in a narrow notebook JupyterLab's fixed
        # table layout would cut the last columns off.
        return (
            '<div class="fragola-agents-box" style="overflow-x:auto;max-width:100%">'
            '<table class="fragola-agents" style="table-layout:auto;overflow-wrap:anywhere">'
            f"<tr>{head}</tr>{body}</table></div>"
        )


class ForkTreeText:
    """An agent's family as an indented tree (from its root), the agent itself marked."""

    def __init__(self, agent: Agent) -> None:
        self.lines = [
            ("  " * depth + ("└ " if depth else "") + visible(_node(node)), node is agent)
            for depth, node in walk(agent.root)
        ]

    def text(self) -> str:
        """The tree as plain text, the agent's line starred."""
        return "\n".join(("* " if me else "  ") + text for text, me in self.lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text())

    def _repr_html_(self) -> str:
        items = "".join(
            f"<div>{'<b>' if me else ''}{escape(text)}{'</b>' if me else ''}</div>"
            for text, me in self.lines
        )
        return f'<div class="fragola-tree-text" style="white-space:pre">{items}</div>'


def walk(node: Agent, depth: int = 0) -> Iterator[tuple[int, Agent]]:
    """``node`` and its forks, depth first, each with its depth below ``node``."""
    yield depth, node
    for child in node.forks:
        yield from walk(child, depth + 1)


def hand_edited(agent: Agent) -> list[int]:
    """The numbers of the messages ``agent.edit`` replaced in this branch (not the ones it
    shares with its parent, edited there)."""
    messages = agent.messages_since(0)
    edited = [i for i, message in enumerate(messages) if edited_by_hand(message)]
    if not edited or agent.parent is None:
        return edited
    theirs = agent.parent.messages_since(0)
    return [i for i in edited if i >= len(theirs) or theirs[i] is not messages[i]]


def edited_words(numbers: list[int]) -> str:
    """``hand_edited``'s numbers as a tree writes them: "edited by hand: #3, #5"."""
    return f"{EDITED_BY_HAND}: " + ", ".join(f"#{i}" for i in numbers) if numbers else ""


def _node(agent: Agent) -> str:
    added = agent.message_count - agent.fork_point
    since = f", +{added} since fork" if agent.parent is not None else ""
    edited = edited_words(hand_edited(agent))
    return (f"{agent.name} [{agent.id}] {agent.status}, {agent.message_count} messages{since}"
            + (f", {edited}" if edited else ""))
