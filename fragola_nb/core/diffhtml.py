"""The HTML of a ``BranchDiff``: two branches side by side, changes first.

Plain HTML with a ``<style>`` (no script, no widget), so it shows in JupyterLab, in the fork
tree, in nbconvert and on GitHub alike. Every text comes from a model, a tool or a person: it
is escaped by ``render.escape``, which also writes out bidi overrides and zero-width
characters, so ``file\u202egnp.exe`` cannot pass for ``fileexe.png`` in a diff meant to show
what changed. Words are marked with ``<ins>``/``<del>``. Colours are JupyterLab's theme
variables (light and dark).

At thousands of messages the changes stay in sight: a line on top counts the pairs of each
kind; every run of ``FOLD_AT`` or more identical messages is folded into one line ("… 750
identical messages", a ``<details>`` that unfolds on a click, each message once with both
its numbers); a "changes only" box hides the identical ones. It holds the rows of at most
``STATIC_ROWS`` messages, those that differ first (a fold past that says it is not in this
copy, and a line counts the pairs that differ left out); the live view of a notebook with the
extension loaded (``fragola_nb.notebook.diff.view``) pages through every pair. The browser lays
out only the rows in sight (``content-visibility: auto``, folded runs not at all).
Columns share the width (``minmax(0, 1fr)``) and long tokens wrap, so it reads at 700 px.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from fragola_nb.base.checks import edited_by_hand
from fragola_nb.base.render import EDITED_BY_HAND, text_of
from fragola_nb.base.render import escape as _escape
from fragola_nb.base.textfile import writable

if TYPE_CHECKING:
    from fragola_nb.core.branchdiff import BranchDiff, DiffPair, Kind, Message
    from fragola_nb.core.usage import Usage

__all__ = ["CSS", "FOLD_AT", "MAX_CHARS", "SAME_CHARS", "STATIC_ROWS", "branch_diff_html",
           "message_text", "runs", "where"]

FOLD_AT = 3
"""Identical pairs in a row from which they are folded into one line."""
MAX_CHARS = 6_000
"""Characters of one message shown; the count of the rest is said after it."""
SAME_CHARS = 1_000
"""Characters shown of a message both sides hold alike (nothing in it differs)."""
STATIC_ROWS = 300
"""Messages' rows in the static HTML, the pairs that differ first: JupyterLab parses a cell's
``text/html`` again after each change of the notebook (its table of contents looks for
headings), so a big one holds the page each time (a second for the 4,795 pairs of two
5,000-message branches, measured). The live view (``fragola_nb.notebook.diff.view``) pages
through every pair."""

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
.fragola-diff-head>div,.fragola-diff-note,.fragola-diff-role{min-width:0;overflow-wrap:anywhere}
.fragola-diff-meta{font-weight:400;font-size:12px;color:var(--fd-quiet)}
.fragola-diff-note{font-size:12px;color:var(--fd-quiet);padding:3px 0}
.fragola-diff-counts{display:flex;flex-wrap:wrap;gap:2px 12px;align-items:center;padding:4px 0;
font-size:12px;overflow-wrap:anywhere}
.fragola-diff-count{padding:0 6px;border-radius:0 8px 8px 0;background:var(--fd-bg2);
border-left:3px solid var(--fd-line)}
.fragola-diff-count-changed{border-left-color:#d97706}
.fragola-diff-count-only-left,.fragola-diff-count-only-right{border-left-color:#2563eb}
.fragola-diff-toggle{cursor:pointer;white-space:nowrap}
.fragola-diff-body{max-height:32em;overflow:auto;border:1px solid var(--fd-line);padding:2px 4px}
.fragola-diff-row{border-bottom:1px dashed var(--fd-line);padding:3px 0;
content-visibility:auto;contain-intrinsic-size:auto 3.5em}
.fragola-diff-same{grid-template-columns:minmax(0,1fr)}
.fragola-diff-fold>summary{cursor:pointer;font-size:12px;color:var(--fd-quiet);padding:3px 0;
border-bottom:1px dashed var(--fd-line);overflow-wrap:anywhere}
.fragola-diff-fold[open]>summary{font-weight:600}
.fragola-diff:has(.fragola-diff-only:checked) .fragola-diff-fold,
.fragola-diff:has(.fragola-diff-only:checked) .fragola-diff-same{display:none}
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

_KINDS: tuple[tuple[Kind, str], ...] = (
    ("changed", "changed"), ("only-left", "only in {left}"), ("only-right", "only in {right}"))


def message_text(message: Message) -> str:
    """What a person compares in a message: its text, then each tool call with its
    arguments (``→ name {"q": "x"}``); for a tool message, the result."""
    lines = [text_of(message.get("content"))] if message.get("content") is not None else []
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        lines.append(f"→ {function.get('name', '?')} {function.get('arguments', '')}")
    return "\n".join(lines)



def escape(text: Any) -> str:
    """``render.escape``, half a surrogate pair (half an emoji a model sent, which UTF-8
    cannot hold: a page with one could not be sent to the browser) written out as
    ``\\udXXX`` (``textfile.writable``)."""
    return _escape(writable(str(text)))


def _text(text: str, limit: int = MAX_CHARS) -> str:
    if len(text) <= limit:
        return escape(text)
    return f"{escape(text[:limit])}… ({len(text) - limit:,} more characters)"


def _cell(message: Message | None, index: str | None, marked: str | None = None,
          limit: int = MAX_CHARS) -> str:
    if message is None or index is None:
        return '<div class="fragola-diff-cell fragola-diff-empty"></div>'
    role = str(message.get("role", "?"))
    # the message's number: its index in that branch's history, as every view counts
    what = f'<span class="fragola-index">{index}</span> · {escape(role)}'
    if role == "tool":
        what += f" · <span>{escape(message.get('tool_call_id', ''))}</span>"
    if edited_by_hand(message):
        what += f' <span class="fragola-edited">{EDITED_BY_HAND}</span>'
    body = marked if marked is not None else _text(message_text(message), limit)
    return (f'<div class="fragola-diff-cell fragola-diff-{escape(role)}" data-index="{index}">'
            f'<div class="fragola-diff-role">{what}</div>'
            f'<div class="fragola-diff-text">{body}</div></div>')


def _number(index: int | None) -> str | None:
    return None if index is None else f"#{index}"


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
    if pair.kind == "same":  # alike on both sides: once, with both numbers
        number = f"#{pair.left_index}" if pair.left_index == pair.right_index else (
            f"#{pair.left_index} ↔ #{pair.right_index}")
        cells = _cell(pair.left, number, limit=SAME_CHARS)
    elif pair.kind == "changed":
        cells = (_cell(pair.left, _number(pair.left_index), _marked(pair, "left"))
                 + _cell(pair.right, _number(pair.right_index), _marked(pair, "right")))
    else:
        cells = (_cell(pair.left, _number(pair.left_index))
                 + _cell(pair.right, _number(pair.right_index)))
    return (f'<div class="fragola-diff-row fragola-diff-{pair.kind}" data-kind="{pair.kind}">'
            f"{cells}</div>")


def runs(pairs: Sequence[DiffPair]) -> Iterator[tuple[bool, Sequence[DiffPair]]]:
    """The pairs in order, as ``(folded, pairs)``: each run of ``FOLD_AT`` or more identical
    pairs folded, the others one by one."""
    start = 0
    while start < len(pairs):
        end = start
        while end < len(pairs) and pairs[end].kind == "same":
            end += 1
        if end - start >= FOLD_AT:
            yield True, pairs[start:end]
        else:
            end = max(end, start + 1)
            yield from ((False, pairs[i:i + 1]) for i in range(start, end))
        start = end


def where(pairs: Sequence[DiffPair]) -> str:
    """The numbers of a run of pairs: ``#3–#9``, or ``#3–#9 ↔ #4–#10`` when they differ."""
    first, last = pairs[0], pairs[-1]
    said = f"#{first.left_index}–#{last.left_index}"
    if first.left_index != first.right_index:
        said += f" ↔ #{first.right_index}–#{last.right_index}"
    return said


def _fold(pairs: Sequence[DiffPair], inside: bool) -> str:
    line = f"… {len(pairs):,} identical messages ({where(pairs)})"
    if not inside:  # past the static copy's budget: the line alone
        return (f'<div class="fragola-diff-fold fragola-diff-note" data-count="{len(pairs)}">'
                f"{line}, not in this static copy</div>")
    return (f'<details class="fragola-diff-fold" data-count="{len(pairs)}"><summary>{line}'
            f'</summary>{"".join(_row(pair) for pair in pairs)}</details>')


def _body(diff: BranchDiff, most: int) -> str:
    """The rows, changes first: every pair that differs while ``most`` allows, then the
    identical runs' contents while the rest of it does (a fold past it says so)."""
    budget = most - (len(diff.pairs) - diff.count("same"))
    out, shown = [], 0
    for folded, run in runs(diff.pairs):
        if folded:
            inside = len(run) <= budget
            budget -= len(run) if inside else 0
            out.append(_fold(run, inside))
        elif shown < most:
            shown += 1
            out.append(_row(run[0]))
    left = len(diff.pairs) - diff.count("same") - shown
    if left > 0:
        out.append(f'<div class="fragola-diff-note fragola-diff-more">… {left:,} more pairs '
                   "that differ, not in this static copy (the live view in a notebook with "
                   "<code>%load_ext fragola_nb</code> pages through every one; "
                   "<code>diff.pairs</code> holds them)</div>")
    return "".join(out)


def _spent(usage: Usage | None, seconds: float | None) -> str:
    if usage is None:
        return ""
    time = f" · {seconds:.2f} s" if seconds is not None else ""
    return (f'<div class="fragola-diff-meta">after the common part: {usage.requests} call(s), '
            f"{usage.total_tokens:,} tokens{time}</div>")


def _counts(diff: BranchDiff) -> str:
    """The line on top: how many pairs of each kind, and the "changes only" box."""
    left, right = (escape(name) for name in diff.names)
    differ = len(diff.pairs) - diff.count("same")
    kinds = "".join(
        f'<span class="fragola-diff-count fragola-diff-count-{kind}" data-count='
        f'"{diff.count(kind)}">{diff.count(kind):,} {label.format(left=left, right=right)}'
        "</span>" for kind, label in _KINDS)
    toggle = ('<label class="fragola-diff-toggle"><input type="checkbox" class='
              f'"fragola-diff-only"> changes only ({differ:,})</label>' if differ else "")
    return (f'<div class="fragola-diff-counts"><span class="fragola-diff-total" data-differ='
            f'"{differ}">{diff.common:,} message(s) in common, then {len(diff.pairs):,} '
            f"pair(s): {differ:,} differ</span>{kinds}"
            f'<span class="fragola-diff-count fragola-diff-count-same" data-count='
            f'"{diff.count("same")}">{diff.count("same"):,} identical</span>{toggle}</div>')


def branch_diff_html(diff: BranchDiff, most: int = STATIC_ROWS) -> str:
    """``diff`` as a self-contained, escaped HTML block of at most ``most`` messages' rows."""
    heads = "".join(
        f"<div>{escape(name)} <span class='fragola-diff-meta'>({length:,} messages)</span>"
        f"{_spent(usage, seconds)}</div>"
        for name, length, usage, seconds in zip(diff.names, diff.lengths, diff.usage,
                                                diff.seconds, strict=True))
    rows = _body(diff, most)
    if not diff.pairs:
        rows = '<div class="fragola-diff-note">No difference after the common part.</div>'
    return (f'{CSS}<div class="fragola-diff"><div class="fragola-diff-head">{heads}</div>'
            f'{_counts(diff)}<div class="fragola-diff-body">{rows}</div></div>')
