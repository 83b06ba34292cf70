"""The HTML of a ``BranchDiff``: two branches side by side, changed words marked.

Plain HTML with a ``<style>`` (no widget), so it shows in JupyterLab, nbconvert and GitHub
alike. Every text comes from a model, a tool or a person: it is escaped by
``render.escape``, which also writes out bidi overrides and zero-width characters, so
``file\u202egnp.exe`` cannot pass for ``fileexe.png`` in a diff meant to show what changed.
Words are marked with ``<ins>``/``<del>``. Colours are JupyterLab's theme variables (light
and dark); the pairs scroll in a box of bounded height, and a diff of thousands of messages
shows the first ``MAX_PAIRS`` pairs and says how many more there are. Columns share the
width (``minmax(0, 1fr)``) and long tokens wrap, so it reads at 700 px.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fragola_nb.base.checks import edited_by_hand
from fragola_nb.base.render import EDITED_BY_HAND
from fragola_nb.base.render import escape as _escape
from fragola_nb.base.textfile import writable

if TYPE_CHECKING:
    from fragola_nb.core.branchdiff import BranchDiff, DiffPair, Message
    from fragola_nb.core.usage import Usage

__all__ = ["CSS", "MAX_CHARS", "MAX_PAIRS", "branch_diff_html"]

MAX_PAIRS = 1_000
"""Pairs shown; the count of the rest is said below them."""
MAX_CHARS = 6_000
"""Characters of one message shown; the count of the rest is said after it."""

CSS = """<style>
.fragola-diff{--fd-text:var(--jp-ui-font-color1,#1f2328);--fd-quiet:var(--jp-ui-font-color2,#57606a);
--fd-bg:var(--jp-layout-color1,#fff);--fd-bg2:var(--jp-layout-color2,#f1f3f5);
--fd-line:var(--jp-border-color2,#d0d7de);--fd-code:var(--jp-code-font-family,ui-monospace,monospace);
box-sizing:border-box;max-width:100%;min-width:0;color:var(--fd-text);background:var(--fd-bg);
font-family:var(--jp-content-font-family,system-ui,sans-serif);font-size:13px;line-height:1.45}
.fragola-diff *{box-sizing:border-box}
.fragola-diff-head,.fragola-diff-row{display:grid;gap:6px;
grid-template-columns:minmax(0,1fr) minmax(0,1fr)}
.fragola-diff-head{font-weight:600;padding:4px 0;border-bottom:1px solid var(--fd-line)}
.fragola-diff-head>div,.fragola-diff-note{overflow-wrap:anywhere}
.fragola-diff-meta{font-weight:400;font-size:12px;color:var(--fd-quiet)}
.fragola-diff-note{font-size:12px;color:var(--fd-quiet);padding:3px 0}
.fragola-diff-body{max-height:32em;overflow:auto;border:1px solid var(--fd-line);padding:2px 4px}
.fragola-diff-row{border-bottom:1px dashed var(--fd-line);padding:3px 0}
.fragola-diff-cell{min-width:0;border-left:3px solid var(--fd-line);padding:1px 6px}
.fragola-diff-changed .fragola-diff-cell{border-left-color:#d97706}
.fragola-diff-only-left .fragola-diff-cell:first-child,
.fragola-diff-only-right .fragola-diff-cell:last-child{border-left-color:#2563eb}
.fragola-diff-empty{border-left-color:transparent;background:var(--fd-bg2)}
.fragola-diff-role{font-size:11px;font-weight:600;text-transform:uppercase;color:var(--fd-quiet)}
.fragola-diff-role span{text-transform:none}
.fragola-diff-role .fragola-index{font-family:var(--fd-code);font-weight:400}
.fragola-diff-role .fragola-edited{color:var(--fd-text);padding:0 5px;border-radius:8px;
background:rgba(124,58,237,.2)}
.fragola-diff-text{white-space:pre-wrap;overflow-wrap:anywhere;margin:0;font-family:inherit}
.fragola-diff-tool .fragola-diff-text,.fragola-diff-calls{font-family:var(--fd-code);font-size:12px}
.fragola-diff ins{background:rgba(16,185,129,.28);text-decoration:none;color:inherit}
.fragola-diff del{background:rgba(239,68,68,.28);text-decoration:line-through;color:inherit}
</style>"""


def escape(text: Any) -> str:
    """``render.escape``, half a surrogate pair (half an emoji a model sent, which UTF-8
    cannot hold: a page with one could not be sent to the browser) written out as
    ``\\udXXX`` (``textfile.writable``)."""
    return _escape(writable(str(text)))


def _text(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return escape(text)
    return f"{escape(text[:MAX_CHARS])}… ({len(text) - MAX_CHARS:,} more characters)"


def _cell(message: Message | None, index: int | None, marked: str | None = None) -> str:
    if message is None:
        return '<div class="fragola-diff-cell fragola-diff-empty"></div>'
    from fragola_nb.core.branchdiff import message_text

    role = str(message.get("role", "?"))
    # the message's number: its index in that branch's history, as every view counts
    what = f'<span class="fragola-index">#{index}</span> · {escape(role)}'
    if role == "tool":
        what += f" · <span>{escape(message.get('tool_call_id', ''))}</span>"
    if edited_by_hand(message):
        what += f' <span class="fragola-edited">{EDITED_BY_HAND}</span>'
    body = marked if marked is not None else _text(message_text(message))
    return (f'<div class="fragola-diff-cell fragola-diff-{escape(role)}" data-index="{index}">'
            f'<div class="fragola-diff-role">{what}</div>'
            f'<div class="fragola-diff-text">{body}</div></div>')


def _marked(pair: DiffPair, side: str) -> str:
    """One side of a changed pair: its words, the other side's left out, its own marked."""
    tag, drop = ("del", "+") if side == "left" else ("ins", "-")
    out, shown = [], 0
    for op, text in pair.words:
        if op == drop:
            continue
        if shown >= MAX_CHARS:
            out.append("… (more)")
            break
        shown += len(text)
        out.append(f"<{tag}>{escape(text)}</{tag}>" if op != "=" else escape(text))
    return "".join(out)


def _row(pair: DiffPair) -> str:
    if pair.kind == "changed":
        left = _cell(pair.left, pair.left_index, _marked(pair, "left"))
        right = _cell(pair.right, pair.right_index, _marked(pair, "right"))
    else:
        left, right = _cell(pair.left, pair.left_index), _cell(pair.right, pair.right_index)
    return (f'<div class="fragola-diff-row fragola-diff-{pair.kind}" data-kind="{pair.kind}">'
            f"{left}{right}</div>")


def _spent(usage: Usage | None, seconds: float | None) -> str:
    if usage is None:
        return ""
    time = f" · {seconds:.2f} s" if seconds is not None else ""
    return (f'<div class="fragola-diff-meta">after the common part: {usage.requests} call(s), '
            f"{usage.total_tokens:,} tokens{time}</div>")


def branch_diff_html(diff: BranchDiff) -> str:
    """``diff`` as a self-contained, escaped HTML block."""
    heads = "".join(
        f"<div>{escape(name)} <span class='fragola-diff-meta'>({length:,} messages)</span>"
        f"{_spent(usage, seconds)}</div>"
        for name, length, usage, seconds in zip(diff.names, diff.lengths, diff.usage,
                                                diff.seconds, strict=True))
    rows = "".join(_row(pair) for pair in diff.pairs[:MAX_PAIRS])
    more = len(diff.pairs) - MAX_PAIRS
    tail = (f'<div class="fragola-diff-note">… {more:,} more pairs not shown</div>'
            if more > 0 else "")
    if not diff.pairs:
        rows = '<div class="fragola-diff-note">No difference after the common part.</div>'
    return (f'{CSS}<div class="fragola-diff"><div class="fragola-diff-head">{heads}</div>'
            f'<div class="fragola-diff-note">{diff.common:,} message(s) in common, then '
            f"{len(diff.pairs):,} pair(s): {diff.count('changed')} changed, "
            f"{diff.count('only-left')} only left, {diff.count('only-right')} only right"
            f'</div><div class="fragola-diff-body">{rows}{tail}</div></div>')
