"""Safe text and HTML forms of a conversation, for panels, ``_repr_html_`` and exports.

Every string that comes from a model, a tool or a person is escaped. Assistant text is
rendered as Markdown by markdown-it with raw HTML switched off and images disabled (an image
would make the browser fetch a URL the model chose), so ``<script>`` and
``<img onerror=...>`` always show as text. Characters that would change what a reader sees
without being seen (bidi overrides that make "file\u202egnp.exe" read "fileexe.png",
zero-width spaces, control characters) are written out as ``\u202e``. A credential is never
shown: ``visible``, which every form here and every view uses, redacts the known shapes and
the credentials in use (``fragola_nb.base.redact``, ``fragola_nb.base.inuse``).
"""

from __future__ import annotations

import html
import itertools
import json
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from fragola_nb.base.inuse import in_use
from fragola_nb.base.marks import edited_by_hand, rejection_of
from fragola_nb.base.redact import redact_text

__all__ = [
    "CSS",
    "EDITED_BY_HAND",
    "conversation_html",
    "empty_numbered_items",
    "markdown_html",
    "message_html",
    "messages_html",
    "text_of",
    "transcript_text",
    "visible",
]

CSS = """<style>
.fragola-conversation{font-family:var(--jp-content-font-family,system-ui,sans-serif);font-size:13px;line-height:1.45}
.fragola-msg{border-left:3px solid #bbb;margin:4px 0;padding:2px 8px}
.fragola-msg-user{border-color:#3b82f6}.fragola-msg-assistant{border-color:#10b981}
.fragola-msg-tool{border-color:#f59e0b}.fragola-msg-system,.fragola-msg-developer{border-color:#8b5cf6}
.fragola-msg{min-width:0;overflow-wrap:anywhere}
.fragola-role{font-size:11px;font-weight:600;text-transform:uppercase;color:var(--jp-ui-font-color2,#555)}
.fragola-index{font-family:var(--jp-code-font-family,monospace);font-weight:400;text-transform:none}
.fragola-edited{font-weight:600;text-transform:none;padding:0 5px;border-radius:8px;background:rgba(124,58,237,.18)}
.fragola-text{white-space:pre-wrap;overflow-wrap:anywhere;margin:2px 0}
.fragola-md p{margin:2px 0}
.fragola-md pre{overflow-x:auto;max-width:100%}
.fragola-tool-call summary,.fragola-tool-result summary{cursor:pointer;color:var(--jp-ui-font-color1,#444)}
.fragola-args,.fragola-result-text{white-space:pre-wrap;overflow-wrap:anywhere;background:rgba(127,127,127,.08);padding:4px;margin:2px 0;font-family:var(--jp-code-font-family,monospace);font-size:12px}
.fragola-error{color:var(--jp-error-color1,#b91c1c);white-space:pre-wrap;overflow-wrap:anywhere}
.fragola-status{display:inline-block;border-radius:8px;padding:0 7px;font-size:11px;color:#fff;background:#6b7280}
.fragola-status-generating{background:#2563eb}.fragola-status-waiting{background:#d97706}.fragola-status-idle{background:#059669}
</style>"""


EDITED_BY_HAND = "edited by hand"
"""How every view marks a message ``agent.edit`` replaced (``checks.edited_by_hand``): the
panel, the exports, the static copies, the diff and the tree write these words."""

# C0/C1 controls but tab and newline, bidi embeddings/overrides/isolates/marks, line and
# paragraph separators, and zero-width characters that hide text (not the joiners U+200C/D,
# which emoji and several scripts need); and half an emoji, a lone surrogate, which no
# browser message (UTF-8) can carry.
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028-\u202e"
                        "\u2060-\u2069\ufeff\ud800-\udfff]")


def visible(text: str) -> str:
    """``text`` as it may be shown: every credential in it redacted (by
    ``fragola_nb.base.redact``'s rule, the credentials in use included: a key a server quoted
    back), ``\\n`` line endings and every invisible control written as ``\\uXXXX``.

    A short text is made once for the credentials in use (``_visible_short``): a view writes
    the same names, roles and models again at every update (issue 34)."""
    if len(text) <= SHORT_MEMO:
        return _visible_short(text, in_use())
    return _visible(text)


SHORT_MEMO = 200
"""Texts up to this length are made visible once per set of credentials in use."""


@lru_cache(maxsize=4096)
def _visible_short(text: str, credentials: frozenset[str]) -> str:
    """``_visible(text)``, remembered; ``credentials`` (``inuse.in_use()``, the same object
    until one is added) is in the key, so a key learnt later is redacted from then on."""
    return _visible(text)


def _visible(text: str) -> str:
    text = redact_text(text).replace("\r\n", "\n").replace("\r", "\n")
    return _INVISIBLE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def escape(text: Any) -> str:
    """``text`` for HTML: escaped, its invisible controls made visible (``visible``)."""
    return html.escape(visible(str(text)), quote=True)


_SAFE_LINK = re.compile(r"(?i)^(https?://|mailto:)")


@lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    md.enable(["table", "strikethrough"])
    # Only web and mail links become links (javascript:, data:, file: and relative paths,
    # which would navigate JupyterLab itself, stay text); they open in a new tab that cannot
    # reach back to this page.
    md.validateLink = lambda url: bool(_SAFE_LINK.match(url.strip()))  # type: ignore[method-assign]

    def link_open(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("target", "_blank")
        tokens[idx].attrSet("rel", "noopener noreferrer")
        return str(renderer.renderToken(tokens, idx, options, env))

    md.add_render_rule("link_open", link_open)
    return md


# Text without any of these is one paragraph of plain text in Markdown (a fast path: a panel
# of 5,000 messages renders each once).
_MARKDOWN_SIGNS = re.compile(
    r"[\\`*_\[\]<>&#|~!=+:-]|\n\s*\n|^\s|\d[.)]|\s\Z|^\s*$|[ \t]\n|\n[ \t]|\t")


def markdown_html(text: str) -> str:
    """Markdown to HTML with raw HTML escaped, images off, unsafe links refused and invisible
    controls made visible. A line that is only a number and a dot ("30.") stays that text:
    Markdown reads it as an empty item of a list numbered from 30, which shows no 30."""
    text = visible(text)
    if not _MARKDOWN_SIGNS.search(text):
        return f"<p>{html.escape(text, quote=False).replace(chr(34), '&quot;')}</p>\n"
    md = _markdown()
    env: dict[str, Any] = {}
    tokens = md.parse(text, env)
    empty = empty_numbered_items(tokens)
    if empty:
        lines = text.split("\n")
        for line in empty:  # "30." -> "30\.", which Markdown shows as "30."
            lines[line] = _LONE_NUMBER.sub(r"\1\\\2", lines[line])
        env = {}
        tokens = md.parse("\n".join(lines), env)
    return str(md.renderer.render(tokens, md.options, env))


_LONE_NUMBER = re.compile(r"(\d{1,9})([.)])([ \t]*)$")


def empty_numbered_items(tokens: Sequence[Any]) -> list[int]:
    """The source lines of the ordered-list items with nothing in them (markdown-it's
    tokens): a line such as "30." alone, which a reader means as the number 30."""
    lines = []
    for token, after in itertools.pairwise(tokens):
        if (token.type == "list_item_open" and after.type == "list_item_close"
                and token.info and token.map):  # info: the item's number (ordered lists)
            lines.append(token.map[0])
    return lines


def text_of(content: Any) -> str:
    """The readable text of a message's ``content`` (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict):
                parts.append(str(part))
            elif isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif part.get("type") == "image_url":
                url = (part.get("image_url") or {}).get("url", "")
                parts.append(f"[image: {url[:80]}]")
            else:
                parts.append(f"[{part.get('type', 'part')}]")
        return "\n".join(parts)
    return str(content)


def pretty_arguments(arguments: Any) -> str:
    """Tool-call arguments as indented JSON when they parse, else as sent."""
    if not isinstance(arguments, str):
        return json.dumps(arguments, indent=2, ensure_ascii=False, default=str)
    try:
        parsed = json.loads(arguments)
    except (ValueError, TypeError, RecursionError):  # not JSON, or JSON Python cannot read
        return arguments
    return _flat_json(parsed) or json.dumps(parsed, indent=2, ensure_ascii=False)


_SCALARS = (str, int, float, bool, type(None))


def _flat_json(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)`` for a non-empty object of scalars
    (most tool calls' arguments), written with the C encoder, which ``indent`` turns off: a
    third of the time (issue 34: the panel writes every call's arguments). "" otherwise."""
    if not isinstance(value, dict) or not value or not all(
            isinstance(v, _SCALARS) for v in value.values()):
        return ""
    return "{\n" + ",\n".join(f"  {_ENCODE(k)}: {_ENCODE(v)}" for k, v in value.items()) + "\n}"


_ENCODE = json.JSONEncoder(ensure_ascii=False).encode


def message_html(message: dict[str, Any], tool_names: dict[str, str] | None = None,
                 index: int | None = None) -> str:
    """One message as escaped HTML. ``tool_names`` maps tool call ids to tool names; with
    ``index`` (the message's in its history) the role line starts with its number, ``#3``."""
    role = str(message.get("role", "?"))
    attrs = f' data-index="{index}"' if index is not None else ""
    number = f'<span class="fragola-index">#{index}</span> · ' if index is not None else ""
    badge = (f' <span class="fragola-edited">{EDITED_BY_HAND}</span>'
             if edited_by_hand(message) else "")
    body: list[str] = []
    text = text_of(message.get("content"))
    if role == "assistant":
        if text:
            body.append(f'<div class="fragola-md">{markdown_html(text)}</div>')
        if message.get("refusal"):
            body.append(f'<div class="fragola-error">refused: {escape(message["refusal"])}</div>')
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            name = escape(function.get("name", "?"))
            args = escape(pretty_arguments(function.get("arguments", "")))
            body.append(
                f'<details class="fragola-tool-call" data-call-id="{escape(call.get("id", ""))}">'
                f"<summary>calls <b>{name}</b></summary>"
                f'<div class="fragola-args">{args}</div></details>'
            )
    elif role == "tool":
        call_id = str(message.get("tool_call_id", ""))
        name = escape((tool_names or {}).get(call_id, "tool"))
        body.append(
            f'<details class="fragola-tool-result" open data-call-id="{escape(call_id)}">'
            f"<summary>result of <b>{name}</b></summary>"
            f'<div class="fragola-result-text">{escape(text)}</div></details>'
        )
    else:
        body.append(f'<div class="fragola-text">{escape(text)}</div>')
    rejection = rejection_of(message)
    if rejection is not None:  # kept by a guardrail, never sent
        body.append(f'<div class="fragola-error">rejected by {escape(rejection[0])}: '
                    f'{escape(rejection[1])}</div>')
    return (
        f'<div class="fragola-msg fragola-msg-{escape(role)}"{attrs}>'
        f'<div class="fragola-role">{number}{escape(role)}{badge}</div>{"".join(body)}</div>'
    )


def tool_names_of(messages: Iterable[dict[str, Any]],
                  names: dict[str, str] | None = None) -> dict[str, str]:
    """Tool call id -> tool name, from the assistant messages given (added to ``names``)."""
    names = {} if names is None else names
    for message in messages:
        for call in message.get("tool_calls") or ():
            names[str(call.get("id", ""))] = str((call.get("function") or {}).get("name", "?"))
    return names


def messages_html(messages: Sequence[dict[str, Any]], start: int = 0,
                  tool_names: dict[str, str] | None = None) -> str:
    names = tool_names_of(messages, dict(tool_names or {}))
    return "".join(message_html(m, names, start + i) for i, m in enumerate(messages))


def conversation_html(
    messages: Sequence[dict[str, Any]],
    *,
    title: str = "",
    status: str | None = None,
    subtitle: str = "",
    start: int = 0,
) -> str:
    """A standalone, escaped HTML block of a conversation (with its own CSS); ``start`` is
    the index of its first message in the agent's history (each is numbered)."""
    badge = (
        f' <span class="fragola-status fragola-status-{escape(status)}">{escape(status)}</span>'
        if status else ""
    )
    head = f"<div><b>{escape(title)}</b>{badge} <small>{escape(subtitle)}</small></div>"
    return (
        f'{CSS}<div class="fragola-conversation">{head}{messages_html(messages, start)}</div>'
    )


def transcript_text(messages: Sequence[dict[str, Any]], start: int = 0) -> str:
    """A plain-text transcript (for terminals and ``_repr_pretty_``), each message's lines
    starting with its number (``start`` is the first one's index in its history)."""
    names = tool_names_of(messages)
    lines: list[str] = []
    for index, message in enumerate(messages, start):
        role = str(message.get("role", "?"))
        edited = f", {EDITED_BY_HAND}" if edited_by_hand(message) else ""
        if role == "tool":
            name = names.get(str(message.get("tool_call_id", "")), "tool")
            lines.append(f"#{index} [tool {name}{edited}] {text_of(message.get('content'))}")
            continue
        text = text_of(message.get("content"))
        if text:
            lines.append(f"#{index} [{role}{edited}] {text}")
        rejection = rejection_of(message)
        if rejection is not None:
            lines.append(f"#{index} [{role} rejected by {rejection[0]}] {rejection[1]}")
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            lines.append(f"#{index} [{role} calls {function.get('name', '?')}] "
                         f"{function.get('arguments', '')}")
    # A terminal reorders bidi overrides and obeys escape sequences too.
    return visible("\n".join(lines))
