"""``export_html``: a run as one self-contained HTML file that opens without a kernel.

>>> export_html(agent, "run.html")        # the agent's whole fork tree, this agent selected
>>> export_html(comparison, "ab.html")    # the variants side by side
>>> export_html(batch_result, "rows.html")

Why one file with a script: a history of thousands of messages, a fork tree and a batch of
rows are browsed, not read top to bottom. Drawn as plain HTML, 5,000 messages (and each fork's
copy of the messages it shares) would be a page that takes seconds to open; so the page holds
the run as data and a small inline script (``htmlwindow.js``, ``htmlmessage.js``,
``htmlhistory.js`` and ``htmlexport.js``, joined) draws what is looked at: the messages of a
history near the screen (windowed: the page stays a few hundred elements at any length), a
fork from its fork point (what it shares with its parent folded behind a marker), a tool
call's arguments and result when it is opened, the history of the tree node clicked, the rows
a filter keeps; a history's own find searches every message, drawn or not.

What makes it safe to open, whatever a model, a tool or a person wrote:

- The data is built here, already safe to show: text with invisible controls written out as
  ``\\u202e`` (``render.visible``) and a lone surrogate (half an emoji) as its escape;
  assistant Markdown rendered by ``render.markdown_html`` (raw HTML escaped, images off, only
  web links); everything else is drawn by the script with ``textContent``.
- Credentials never reach the file: every string passes ``fragola_nb.base.redact``'s one rule with
  the credentials in use (the client's key, credential headers and fields of every agent's
  model settings) as known values; tool arguments are parsed first, so a field named
  ``api_key`` is hidden by its name. Model settings themselves are not written.
- The data sits in ``<script type="application/json">`` with ``<``, ``>``, ``&``, U+2028 and
  U+2029 written as JSON escapes, so no text can close the block or start markup.
- A Content-Security-Policy (``default-src 'none'``, the one inline script allowed by its
  hash, inline styles) forbids every network request: no script, font, image or link loads.

Open to more kinds: each kind is a type registered with ``register_kind`` (a function making
its ``{"kind": ...}`` data and one naming the agents it holds) and one view in
``htmlexport.js``. An agent's tree is this module's; ``fragola_nb.experiments`` registers
comparisons and batches (``experiments/pages.py``), so this layer never imports the one above.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.redact import redact_text, redacted
from fragola_nb.base.render import escape, markdown_html, text_of, visible
from fragola_nb.base.textfile import writable
from fragola_nb.core.agent import Agent
from fragola_nb.sessions.atomic import atomic_write, entry_path
from fragola_nb.sessions.export import branches, changed_instructions, subtitle

__all__ = ["Clean", "Data", "export_html", "register_kind"]

_HERE = Path(__file__).parent
_SCRIPTS = ("htmlwindow.js", "htmlmessage.js", "htmlhistory.js", "htmlexport.js")
# What may not appear as itself inside <script type="application/json">: "<" could close the
# block ("</script>") or open a comment; ">" and "&" for good measure; U+2028/9 end a line in
# older JavaScript. All are the same string once JSON.parse has read them.
_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                  "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_UNSAFE_RE = re.compile("[<>&\u2028\u2029]")

Data = dict[str, Any]


def export_html(obj: Any, path: str | os.PathLike[str] | None = None,
                *, title: str | None = None) -> str:
    """Write ``obj`` (an agent with its whole fork tree, a ``Comparison`` or a
    ``BatchResult``) as one HTML file that a browser opens from disk with no kernel and no
    network. Returns the page's text, as every export does, and writes it to ``path`` when
    one is given (to the file exactly as returned).

    Raises ``BadUsage`` for anything else, and for a path that cannot be written (a folder,
    a missing folder, no permission): nothing is written then.
    """
    build = _builder(obj)
    target = _target(path) if path is not None else None
    known = _known(obj)
    data = build(obj, Clean(known))
    page = _page(title if title is not None else str(data["title"]), data)
    if target is None:
        return page
    try:
        atomic_write(target, page, mode=0o644)
    except OSError as exc:
        raise BadUsage(f"export_html cannot write {str(target)!r}: {exc.strerror or exc}") from exc
    return page


# -- what can be exported ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Kind:
    type: type
    build: Callable[[Any, Clean], Data]  # the {"kind": ...} data the page's script draws
    agents: Callable[[Any], list[Agent]]  # whose credentials the page must hide


_KINDS: list[_Kind] = []


def register_kind(kind: type, build: Callable[[Any, Clean], Data],
                  agents: Callable[[Any], list[Agent]]) -> None:
    """Let ``export_html`` export objects of ``kind`` (a layer above this one registers its
    own: ``fragola_nb.experiments`` registers ``Comparison`` and ``BatchResult``)."""
    _KINDS[:] = [k for k in _KINDS if k.type is not kind]
    _KINDS.append(_Kind(kind, build, agents))


def _kind(obj: Any) -> _Kind | None:
    return next((kind for kind in _KINDS if isinstance(obj, kind.type)), None)


def _builder(obj: Any) -> Callable[[Any, Clean], Data]:
    kind = _kind(obj)
    if kind is not None:
        return kind.build
    raise BadUsage(
        f"export_html exports an Agent, a Comparison or a BatchResult, not "
        f"{type(obj).__name__}")


def _target(path: Any) -> Path:
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise BadUsage(f"export_html needs a file path (a str or a Path), not {path!r}")
    target = entry_path(path)
    if target.is_dir():
        raise BadUsage(f"export_html writes a file; {str(target)!r} is a folder")
    if not target.parent.is_dir():
        raise BadUsage(f"export_html cannot write {str(target)!r}: its folder does not exist")
    return target


def _agents_of(obj: Any) -> list[Agent]:
    kind = _kind(obj)
    return kind.agents(obj) if kind is not None else []


def _tree(root: Agent) -> list[Agent]:
    return [node for node, _, _ in branches(root)]


def _known(obj: Any) -> set[str]:
    """The credentials in use by the agents exported: hidden wherever they appear."""
    known: set[str] = set()
    for agent in _agents_of(obj):
        known |= agent.fragola.credentials(agent.options.model_settings)
    return known


class Clean:
    """Text as the page may hold it: no credential, controls and half emoji written out."""

    def __init__(self, known: Iterable[str]) -> None:
        self.known = frozenset(known)

    def text(self, value: Any) -> str:
        return writable(redact_text(visible(str(value)), self.known))

    def markdown(self, value: str) -> str:
        return markdown_html(writable(redact_text(value, self.known)))

    def arguments(self, arguments: Any) -> str:
        """Tool arguments as indented JSON, a field named like a credential hidden."""
        value = arguments
        if isinstance(arguments, str):
            try:
                value = json.loads(arguments)
            except (ValueError, RecursionError):
                return self.text(arguments)
        shown = redacted(value, self.known)
        return self.text(json.dumps(shown, indent=2, ensure_ascii=False, default=str))

    def message(self, message: dict[str, Any]) -> Data:
        """One message as the page's script draws it (short keys: 5,000 of them)."""
        from fragola_nb.base.checks import edited_by_hand, rejection_of

        role = str(message.get("role", "?"))
        out: Data = {"r": self.text(role)}
        if edited_by_hand(message):  # agent.edit put a person's text here
            out["ed"] = 1
        text = text_of(message.get("content"))
        if role == "assistant" and text:
            out["h"] = self.markdown(text)
        elif text:
            out["t"] = self.text(text)
        if role == "tool":
            out["id"] = self.text(message.get("tool_call_id", ""))
        calls = [{"id": self.text(call.get("id", "")),
                  "n": self.text((call.get("function") or {}).get("name", "?")),
                  "a": self.arguments((call.get("function") or {}).get("arguments", ""))}
                 for call in message.get("tool_calls") or ()]
        if calls:
            out["c"] = calls
        if message.get("refusal"):
            out["e"] = self.text(f"refused: {message['refusal']}")
        rejection = rejection_of(message)
        if rejection is not None:
            out["e"] = self.text(f"rejected by {rejection[0]}: {rejection[1]}")
        return out

    def messages(self, messages: Iterable[dict[str, Any]]) -> list[Data]:
        return [self.message(m) for m in messages]


# -- the kinds ------------------------------------------------------------------------------


def _agent_data(agent: Agent, clean: Clean) -> Data:
    """The whole tree: each node with only the messages it adds (a fork's shared part is its
    parent's, by reference), so 20 forks of a long history do not repeat it 20 times."""
    nodes = []
    depth: dict[str, int] = {}
    for node, start, messages in branches(agent.root):
        parent = node.parent.id if node.parent is not None else None
        depth[node.id] = depth[parent] + 1 if parent is not None else 0
        instructions = changed_instructions(node)
        nodes.append({
            "id": clean.text(node.id), "name": clean.text(node.name),
            "parent": clean.text(parent) if parent is not None else None,
            "depth": depth[node.id], "start": start,
            # "fork of X at message N": X by name when its parent is in the tree.
            "fork_of": clean.text(node.parent.name if node.parent is not None
                                  else node.fork_of) if node.fork_of else None,
            "fork_point": node.fork_point, "status": clean.text(node.status),
            "about": clean.text(subtitle(node)),
            "instructions": clean.text(instructions) if instructions else None,
            "messages": clean.messages(messages[start:]),
        })
    return {"kind": "agent", "title": clean.text(agent.name), "selected": clean.text(agent.id),
            "nodes": nodes}


register_kind(Agent, _agent_data, lambda agent: _tree(agent.root))



# -- the page -------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _assets() -> tuple[str, str]:
    # One inline script (one hash in the policy), from its parts in the order they need each
    # other: the windowed list, a message, a history, the views.
    script = "\n".join((_HERE / name).read_text(encoding="utf-8") for name in _SCRIPTS)
    style = (_HERE / "htmlexport.css").read_text(encoding="utf-8")
    return script, style


def script_json(data: Any) -> str:
    """``data`` as JSON that can stand inside ``<script type="application/json">``."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return _SCRIPT_UNSAFE_RE.sub(lambda m: _SCRIPT_UNSAFE[m.group()], text)


def _page(title: str, data: Data) -> str:
    script, style = _assets()
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    policy = (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
              "base-uri 'none'; form-action 'none'")
    heading = escape(title)
    return writable(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<meta name=\"color-scheme\" content=\"light dark\">\n"
        "<meta name=\"referrer\" content=\"no-referrer\">\n"
        f"<title>{heading}</title>\n<style>{style}</style>\n</head>\n<body>\n"
        f"<header class=\"fx-head\"><h1>{heading}</h1>"
        f"<p class=\"fx-about\">fragola_nb export: {escape(data['kind'])}</p></header>\n"
        "<main id=\"fx-view\"><noscript>This page draws the run with its inline script; "
        "allow scripts for this file to browse it.</noscript></main>\n"
        f"<script type=\"application/json\" id=\"fx-data\">{script_json(data)}</script>\n"
        f"<script>{script}</script>\n</body>\n</html>\n"
    )
