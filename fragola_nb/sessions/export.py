"""Conversations as Markdown and standalone HTML, for teaching material.

>>> print(export_markdown(agent))                     # doctest: +SKIP
>>> export_html(agent, "lesson.html")                 # doctest: +SKIP
>>> export_tree_markdown(agent.root, "branches.md")   # doctest: +SKIP

An agent's history is its branch from the root, so exporting a fork exports that branch. The
tree exports list the root's conversation, then each fork's messages after the point it
shares with its parent.

Everything is inert. HTML comes from ``fragola_nb.render`` (every string escaped, raw HTML and
images off) inside a page whose Content-Security-Policy forbids scripts and remote loads.
In Markdown, names and titles are backslash-escaped; message text is kept as Markdown only
when no renderer could make markup from it (no ``<``, no image, only http(s)/mailto links),
otherwise it is fenced, like tool arguments and results always are.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..render import (
    CSS,
    conversation_html,
    escape,
    message_html,
    messages_html,
    pretty_arguments,
    text_of,
)
from ..render import tool_names_of as _tool_names
from .atomic import atomic_write, entry_path

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["export_html", "export_markdown", "export_tree_html", "export_tree_markdown"]

Messages = list[dict[str, Any]]
# Inline text (names, titles) escapes what Markdown gives meaning to mid-line; "-", "/" and
# "." only matter at the start of a line, which inline text never is.
_PUNCTUATION = re.compile(r"([\\`*_\[\]<>!|~#&])")
# Outside code, text that a renderer might turn into markup: "<" (raw HTML, autolinks), "!["
# (images), a script scheme. Links are also judged on markdown-it's parse (entities decoded).
_RISKY = re.compile(r"<|!\[|(?i:\b(java|vb|live)script\s*:|\bdata\s*:\s*\w+/)")
_END = "fragola-end-of-message"
_SAFE_SCHEMES = frozenset({"", "http", "https", "mailto"})


def export_markdown(agent: Agent, path: str | os.PathLike[str] | None = None, *,
                    title: str | None = None) -> str:
    """The agent's conversation (its branch from the root) as Markdown; written to ``path``
    when given. Returns the text."""
    messages = agent.state.messages
    lines = [f"# {_inline(title or agent.name)}", "", _about(agent, len(messages)), ""]
    if agent.instructions:
        lines += ["## Instructions", "", _fence(agent.instructions, "text"), ""]
    lines += ["## Conversation", ""]
    lines += _messages_markdown(messages, 0, {})
    return _written(path, "\n".join(lines).rstrip() + "\n")


def export_html(agent: Agent, path: str | os.PathLike[str] | None = None, *,
                title: str | None = None) -> str:
    """The agent's conversation as a standalone HTML page (escaped, no script can run)."""
    messages = agent.state.messages
    if agent.instructions:
        role = "developer" if agent.options.use_developer_role else "system"
        messages = [{"role": role, "content": agent.instructions}, *messages]
    body = conversation_html(messages, title=title or agent.name, status=agent.status,
                             subtitle=_subtitle(agent))
    return _written(path, _page(title or agent.name, body))


def export_tree_markdown(agent: Agent, path: str | os.PathLike[str] | None = None, *,
                         title: str | None = None) -> str:
    """Every branch of ``agent``'s tree: the root's conversation, then what each fork adds."""
    root = agent.root
    lines = [f"# {_inline(title or root.name)}", ""]
    for node, start, messages in _branches(root):
        lines += [f"## {_inline(node.name)}", "", _about(node, len(messages)), ""]
        instructions = _changed_instructions(node)
        if instructions:
            lines += ["Instructions:", "", _fence(instructions, "text"), ""]
        if start:
            lines += [f"*Continues after message {start} of "
                      f"{_inline(node.parent.name if node.parent else '')}.*", ""]
        added = messages[start:]
        names = _tool_names(messages[:start])
        lines += _messages_markdown(added, start, names) if added else ["*No new messages.*", ""]
    return _written(path, "\n".join(lines).rstrip() + "\n")


def export_tree_html(agent: Agent, path: str | os.PathLike[str] | None = None, *,
                     title: str | None = None) -> str:
    """``export_tree_markdown`` as a standalone HTML page."""
    root = agent.root
    sections = []
    for node, start, messages in _branches(root):
        note = (f"<p><small>continues after message {start} of "
                f"{escape(node.parent.name if node.parent else '')}</small></p>" if start else "")
        body = messages_html(messages[start:], start, _tool_names(messages[:start]))
        instructions = _changed_instructions(node)
        if instructions:
            role = "developer" if node.options.use_developer_role else "system"
            body = message_html({"role": role, "content": instructions}) + body
        sections.append(f'<section class="fragola-conversation"><h2>{escape(node.name)}</h2>'
                        f"<p><small>{escape(_subtitle(node))}</small></p>{note}{body}</section>")
    heading = f"<h1>{escape(title or root.name)}</h1>"
    return _written(path, _page(title or root.name, CSS + heading + "".join(sections)))


# -- pieces -----------------------------------------------------------------------------------


def _branches(root: Agent) -> Iterator[tuple[Agent, int, Messages]]:
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


def _changed_instructions(agent: Agent) -> str | None:
    """The agent's instructions when a root has them or a fork changed them, else None."""
    # A prompt experiment compares branches by their instructions: show each change.
    if agent.parent is not None and agent.instructions == agent.parent.instructions:
        return None
    return agent.instructions or None


def _subtitle(agent: Agent) -> str:
    fork = f" · fork of {agent.fork_of} at message {agent.fork_point}" if agent.fork_of else ""
    return (f"agent {agent.name} · id {agent.id} · model {agent.model} · "
            f"step {agent.step_count} of {agent.options.max_step}{fork}")


def _about(agent: Agent, count: int) -> str:
    return f"*{_inline(_subtitle(agent))} · {count} messages*"


def _messages_markdown(messages: Messages, start: int, names: dict[str, str]) -> list[str]:
    names = _tool_names(messages, dict(names))
    lines: list[str] = []
    for number, message in enumerate(messages, start + 1):
        role = str(message.get("role", "?"))
        text = text_of(message.get("content"))
        if role == "tool":
            name = names.get(str(message.get("tool_call_id", "")), "tool")
            lines += [f"### {number} · Result of {_inline(name)}", "", _fence(text, "text"), ""]
            continue
        lines += [f"### {number} · {_inline(role.capitalize())}", ""]
        if text:
            lines += [text if _renders_safely(text) else _fence(text, "text"), ""]
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            lines += [f"Calls **{_inline(function.get('name', '?'))}**:", "",
                      _fence(pretty_arguments(function.get("arguments", "")), "json"), ""]
    return lines


def _inline(text: Any) -> str:
    """One line of literal text: every Markdown punctuation character backslash-escaped."""
    return _PUNCTUATION.sub(r"\\\1", " ".join(str(text).split()))


def _fence(text: str, info: str) -> str:
    """A fenced code block that ``text`` cannot close (the fence outruns its backticks)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


@lru_cache(maxsize=1)
def _parser() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark")
    md.validateLink = lambda url: True  # type: ignore[method-assign]  # judge schemes below
    return md


def _renders_safely(text: str) -> bool:
    """True when Markdown renderers make no HTML tag, image or script link from ``text``, and
    it leaves nothing open (a fence, a quote) that would swallow what follows.

    Code (spans and blocks) is shown as text by every renderer, so a ``<`` there is fine;
    anywhere else it is a reason to fence the message, whatever markdown-it makes of it.
    """
    env: dict[str, Any] = {}
    tokens = _parser().parse(f"{text}\n\n{_END}\n", env)
    if env.get("references"):  # a link definition would apply to other messages too
        return False
    if [t.type for t in tokens[-3:]] != ["paragraph_open", "inline", "paragraph_close"] or (
        tokens[-2].content != _END or tokens[-2].level != 1
    ):
        return False
    for token in tokens:
        if token.type == "html_block":
            return False
        for inner in token.children or ():
            if inner.type in ("html_inline", "image"):
                return False
            if inner.type == "text" and _RISKY.search(inner.content):
                return False
            href = inner.attrGet("href") if inner.type == "link_open" else None
            if href is not None and urlsplit(str(href)).scheme.lower() not in _SAFE_SCHEMES:
                return False
    return True


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" "
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{escape(title)}</title>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def _written(path: str | os.PathLike[str] | None, text: str) -> str:
    if path is not None:
        atomic_write(entry_path(path), text, mode=0o644)
    return text
