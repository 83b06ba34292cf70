"""Conversations as Markdown and standalone HTML, for teaching material.

(``export_html``, a run to browse in one file with its script, is ``htmlexport``.)

>>> print(export_markdown(agent))                     # doctest: +SKIP
>>> export_tree_html(agent, "branches.html")          # doctest: +SKIP
>>> export_tree_markdown(agent.root, "branches.md")   # doctest: +SKIP

An agent's history is its branch from the root, so exporting a fork exports that branch. The
tree exports list the root's conversation, then each fork's messages after the point it
shares with its parent.

Everything is inert. HTML comes from ``fragola_nb.base.render`` (every string escaped, raw HTML and
images off) inside a page whose Content-Security-Policy forbids scripts and remote loads.
In Markdown (``markdown``), names and titles are backslash-escaped; message text is kept as
Markdown only when no renderer could make markup or a line of the transcript from it (no
heading, no ``<``, no image, only http(s)/mailto links), otherwise it is fenced, like tool
arguments and results always are; control and bidi characters are written as ``\\uXXXX``,
and so is half an emoji a model sent (a lone surrogate, which UTF-8 cannot hold).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fragola_nb.base.redact import redact_text
from fragola_nb.base.render import (
    CSS,
    escape,
    message_html,
    messages_html,
)
from fragola_nb.base.render import tool_names_of as _tool_names
from fragola_nb.base.textfile import writable
from fragola_nb.sessions.atomic import atomic_write, entry_path
from fragola_nb.sessions.markdown import MarkdownText, fence, inline, messages_markdown

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["branches", "changed_instructions", "export_markdown", "export_tree_html",
           "export_tree_markdown", "subtitle"]

Messages = list[dict[str, Any]]


def export_markdown(agent: Agent, path: str | os.PathLike[str] | None = None, *,
                    title: str | None = None) -> str:
    """The agent's conversation (its branch from the root) as Markdown; written to ``path``
    when given. Returns the text (a ``str``; a notebook shows it in a compact scrolling box,
    ``print()`` shows the source)."""
    messages = agent.state.messages
    lines = [f"# {inline(title or agent.name)}", "", _about(agent, len(messages)), ""]
    if agent.instructions:
        lines += ["## Instructions", "", fence(agent.instructions, "text"), ""]
    lines += ["## Conversation", ""]
    lines += messages_markdown(messages, 0, {})
    return MarkdownText(_written(path, "\n".join(lines).rstrip() + "\n"))


def export_tree_markdown(agent: Agent, path: str | os.PathLike[str] | None = None, *,
                         title: str | None = None) -> str:
    """Every branch of ``agent``'s tree: the root's conversation, then what each fork adds."""
    root = agent.root
    lines = [f"# {inline(title or root.name)}", ""]
    for node, start, messages in branches(root):
        lines += [f"## {inline(node.name)}", "", _about(node, len(messages)), ""]
        instructions = changed_instructions(node)
        if instructions:
            lines += ["Instructions:", "", fence(instructions, "text"), ""]
        if start:
            lines += [f"*{inline(_continues(node, start))}.*", ""]
        added = messages[start:]
        names = _tool_names(messages[:start])
        lines += messages_markdown(added, start, names) if added else ["*No new messages.*", ""]
    return MarkdownText(_written(path, "\n".join(lines).rstrip() + "\n"))


def export_tree_html(agent: Agent, path: str | os.PathLike[str] | None = None, *,
                     title: str | None = None) -> str:
    """``export_tree_markdown`` as a standalone HTML page."""
    root = agent.root
    sections = []
    for node, start, messages in branches(root):
        note = f"<p><small>{escape(_continues(node, start))}</small></p>" if start else ""
        body = messages_html(messages[start:], start, _tool_names(messages[:start]))
        instructions = changed_instructions(node)
        if instructions:
            role = "developer" if node.options.use_developer_role else "system"
            body = message_html({"role": role, "content": instructions}) + body
        sections.append(f'<section class="fragola-conversation"><h2>{escape(node.name)}</h2>'
                        f"<p><small>{escape(subtitle(node))}</small></p>{note}{body}</section>")
    heading = f"<h1>{escape(title or root.name)}</h1>"
    return _written(path, _page(title or root.name, CSS + heading + "".join(sections)))


# -- pieces -----------------------------------------------------------------------------------


def branches(root: Agent) -> Iterator[tuple[Agent, int, Messages]]:
    """Each agent of the tree (parents first), where its own part starts, its messages."""
    stack: list[tuple[Agent, Messages]] = [(root, [])]  # with the parent's messages
    while stack:
        node, inherited = stack.pop()
        messages = node.state.messages
        # The messages shared with the parent, by identity: a reset breaks the sharing.
        limit = min(node.fork_point, len(messages), len(inherited))
        start = 0
        while start < limit and messages[start] is inherited[start]:
            start += 1
        yield node, start, messages
        stack.extend((fork, messages) for fork in reversed(node.forks))


def changed_instructions(agent: Agent) -> str | None:
    """The agent's instructions when a root has them or a fork changed them, else None."""
    # A prompt experiment compares branches by their instructions: show each change.
    if agent.parent is not None and agent.instructions == agent.parent.instructions:
        return None
    return agent.instructions or None


def subtitle(agent: Agent) -> str:
    fork = f" · fork of {agent.fork_of} at message #{agent.fork_point}" if agent.fork_of else ""
    # The model calls this agent made (a fork's own, not its parent's), with the cost known.
    summary = agent.usage.summary()
    usage = f" · {summary}" if summary else ""
    return (f"agent {agent.name} · id {agent.id} · model {agent.model} · "
            f"step {agent.step_count} of {agent.options.max_step}{fork}{usage}")


def _continues(node: Agent, start: int) -> str:
    """Where a branch's own messages start: numbered as in its history (``#start``)."""
    parent = node.parent.name if node.parent else ""
    shared = "#0" if start == 1 else f"#0 to #{start - 1}"
    return f"Continues from message #{start} (messages {shared} are {parent}'s)"


def _about(agent: Agent, count: int) -> str:
    return f"*{inline(subtitle(agent))} · {count} messages*"


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" "
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{escape(title)}</title>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def _written(path: str | os.PathLike[str] | None, text: str) -> str:
    """``text`` as it can be written (half an emoji a model sent, a lone surrogate, as its
    ``\\udXXX`` escape: ``fragola_nb.base.textfile``), written to ``path`` when given. The text
    returned is the file's, and can be written by the caller's own ``open`` too."""
    text = writable(redact_text(text))  # a key a server quoted, the credentials in use
    if path is not None:
        atomic_write(entry_path(path), text, mode=0o644)
    return text
