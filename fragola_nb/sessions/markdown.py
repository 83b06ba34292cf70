"""A conversation's messages as Markdown that no message can reshape.

The transcript's own structure is its headings (``### #1 · Assistant``: a message's number is
its index in the history, as ``state.messages[i]``, ``fork(at=i)`` and every view count), the
``Calls **name**:`` lines before tool arguments, and the notes in italics (``*Continues from
message #4 ...*``).
A message must never produce any of them, nor markup, nor leave something open that swallows
what follows. So a message body is kept as Markdown (readable: emphasis, lists, code) only
when markdown-it finds in it nothing but paragraphs, lists, quotes, code and safe links, and
no line outside its code even looks like a heading or a transcript line to a laxer renderer
(``#2`` with no space, a lone ``===``/``---`` underline, ``Calls **``...); otherwise it goes
in a fence that its text cannot close (longer than any run of backticks in it).

Everything written is first made visible: line endings become ``\\n`` (a lone ``\\r`` is a
line break to Markdown), and control and bidirectional formatting characters (U+202E and
friends, which reorder what a reader sees) are written as ``\\u202e``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from fragola_nb.base.checks import edited_by_hand
from fragola_nb.base.render import (
    EDITED_BY_HAND,
    empty_numbered_items,
    markdown_html,
    pretty_arguments,
    text_of,
    visible,
)
from fragola_nb.base.render import tool_names_of as _tool_names

__all__ = ["MarkdownText", "fence", "inline", "messages_markdown"]

Messages = list[dict[str, Any]]
# Inline text (names, titles) escapes what Markdown gives meaning to mid-line; "-", "/" and
# "." only matter at the start of a line, which inline text never is; "$" starts math on
# GitHub (a cost: "$0.0012").
_PUNCTUATION = re.compile(r"([\\`*_\[\]<>!|~#&$])")
# Outside code, text that a renderer might turn into markup: "<" (raw HTML, autolinks), "!["
# (images), a script scheme. Links are also judged on markdown-it's parse (entities decoded).
_RISKY = re.compile(r"<|!\[|(?i:\b(java|vb|live)script\s*:|\bdata\s*:\s*\w+/)")
# A line some renderer could take for a heading, an underline or a line of the transcript.
_STRUCTURAL = re.compile(
    r"[ \t>]*(?:#|[=-]+[ \t]*$|Calls \*\*|\*(?:Continues |No new messages|agent )"
    r"|Instructions:)")
_BLOCKS_KEPT = frozenset({
    "paragraph_open", "paragraph_close", "inline", "bullet_list_open", "bullet_list_close",
    "ordered_list_open", "ordered_list_close", "list_item_open", "list_item_close",
    "blockquote_open", "blockquote_close", "fence", "code_block",
})
_END = "fragola-end-of-message"
_SAFE_SCHEMES = frozenset({"", "http", "https", "mailto"})


def inline(text: Any) -> str:
    """One line of literal text: every Markdown punctuation character backslash-escaped."""
    return _PUNCTUATION.sub(r"\\\1", " ".join(visible(str(text)).split()))


def fence(text: str, info: str) -> str:
    """A fenced code block that ``text`` cannot close (the fence outruns its backticks)."""
    text = visible(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    marks = "`" * max(3, longest + 1)
    return f"{marks}{info}\n{text}\n{marks}"


def messages_markdown(messages: Messages, start: int, names: dict[str, str]) -> list[str]:
    """The lines for ``messages``, numbered from ``start`` (the first one's index in its
    history); ``names`` maps the tool call ids of earlier messages to tool names."""
    names = _tool_names(messages, dict(names))
    lines: list[str] = []
    for number, message in enumerate(messages, start):
        role = str(message.get("role", "?"))
        text = visible(text_of(message.get("content")))
        edited = f" · *{EDITED_BY_HAND}*" if edited_by_hand(message) else ""
        if role == "tool":
            name = names.get(str(message.get("tool_call_id", "")), "tool")
            lines += [f"### #{number} · Result of {inline(name)}{edited}", "",
                      fence(text, "text"), ""]
            continue
        lines += [f"### #{number} · {inline(role.capitalize())}{edited}", ""]
        if text:
            lines += [text if _renders_safely(text) else fence(text, "text"), ""]
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            lines += [f"Calls **{inline(function.get('name', '?'))}**:", "",
                      fence(pretty_arguments(function.get("arguments", "")), "json"), ""]
    return lines


@lru_cache(maxsize=1)
def _parser() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark")
    md.validateLink = lambda url: True  # type: ignore[method-assign]  # judge schemes below
    return md


def _renders_safely(text: str) -> bool:
    """True when ``text`` (made ``visible``) shows as itself under any Markdown renderer: no
    heading, rule, HTML tag, image or script link, no line like the transcript's own, and
    nothing left open (a fence, a quote) that would swallow what follows.

    Code (spans and blocks) is shown as text by every renderer, so a ``<`` there is fine;
    anywhere else it is a reason to fence the message, whatever markdown-it makes of it.
    """
    env: dict[str, Any] = {}
    tokens = _parser().parse(f"{text}\n\n{_END}\n", env)
    code = {line for token in tokens if token.type in ("fence", "code_block") and token.map
            for line in range(*token.map)}
    if any(_STRUCTURAL.match(line) for number, line in enumerate(text.split("\n"))
           if number not in code):
        return False
    if env.get("references"):  # a link definition would apply to other messages too
        return False
    if empty_numbered_items(tokens):  # "30." alone: an empty item of a list, no 30 shown
        return False
    if [t.type for t in tokens[-3:]] != ["paragraph_open", "inline", "paragraph_close"] or (
        tokens[-2].content != _END or tokens[-2].level != 1
    ):
        return False
    for token in tokens:
        if token.type not in _BLOCKS_KEPT:
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


_HEADING = re.compile(r"<(/?)h([1-6])>")


class MarkdownText(str):
    """An export's Markdown: a ``str`` (written, printed, compared as such) that a notebook
    shows compactly. Rendered as Markdown, an export is a tower of H1/H2 blocks, two or
    three screens each; here it is drawn in a bounded box that scrolls, its headings bold
    lines of text size (the file keeps its headings). ``print()`` shows the source."""

    __slots__ = ()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        # markdown_html escapes raw HTML, drops images and refuses unsafe links; the export
        # itself fenced any message that could make markup.
        body = _HEADING.sub(_small_heading, markdown_html(str(self)))
        lines = self.count("\n") + 1
        return (
            '<div class="fragola-export" style="max-width:100%">'
            '<div class="fragola-export-about" style="font-size:12px;margin:0 0 2px">'
            f"Markdown export, {lines:,} lines, drawn compact here (the text keeps its "
            "headings; print() shows it)</div>"
            '<div class="fragola-export-box" style="max-height:24em;overflow:auto;'
            "border:1px solid var(--jp-border-color1,#bbb);border-radius:4px;"
            'padding:2px 10px;font-size:13px;overflow-wrap:anywhere">'
            f"{body}</div></div>")


def _small_heading(match: re.Match[str]) -> str:
    if match.group(1):
        return "</p>"
    level = match.group(2)
    return (f'<p class="fragola-export-h{level}" role="heading" aria-level="{level}" '
            'style="font-weight:700;font-size:13px;margin:.6em 0 .2em">')
