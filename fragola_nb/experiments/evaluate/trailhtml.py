"""The trajectory of an evaluation's cell in the static table (``htmlview``): each row's tool
calls as a compact, numbered list (``name(arguments) → result``, each shortened), then the
turns of a conversation, folded in a ``<details>`` so the matrix stays a matrix. Every text
is redacted (the credentials in use, should a model or a tool have echoed one) and escaped:
a model's or a tool's text is shown, never read as HTML."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fragola_nb.base.redact import redact_text
from fragola_nb.base.render import escape, text_of

if TYPE_CHECKING:
    from fragola_nb.experiments.evaluate.evalrow import EvalRow

__all__ = ["trail_html"]


SHORT = 120
"""Characters of an argument list, a result or a turn shown."""
CALLS = 40
"""Calls listed at most per row (the rest are counted)."""


def trail_html(rows: Sequence[EvalRow], known: frozenset[str]) -> str:
    """A ``<details>`` with the trajectory of ``rows`` (a cell's repeats), or "" when none of
    them called a tool or had more than one turn."""
    if not any(row.tool_calls or len(row.turns) > 1 for row in rows):
        return ""
    calls = sum(len(row.tool_calls) for row in rows)
    parts = [_row_html(row, known, len(rows) > 1) for row in rows]
    return (f'<details class="fx-eval-trail" style="text-align:left;white-space:normal">'
            f"<summary>{calls:,} tool call{'s' if calls != 1 else ''}</summary>"
            f"{''.join(parts)}</details>")


def _row_html(row: EvalRow, known: frozenset[str], repeats: bool) -> str:
    def short(value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                                default=str)
        text = " ".join(redact_text(text, known).split())  # hidden before it is cut
        return escape(text if len(text) <= SHORT else text[:SHORT - 1] + "…")

    items = [f"<li>{short(call.get('name'))}({short(call.get('arguments') or {})})"
             + ("" if call.get("result") is None else f" → {short(call['result'])}") + "</li>"
             for call in row.tool_calls[:CALLS]]
    if len(row.tool_calls) > CALLS:
        items.append(f"<li>… {len(row.tool_calls) - CALLS:,} more calls</li>")
    turns = [f"<li>user: {short(text_of(said))}"
             + (f" · agent: {short(row.answers[n])}" if n < len(row.answers)
                and row.answers[n] is not None else "") + "</li>"
             for n, said in enumerate(row.turns)] if len(row.turns) > 1 else []
    n = len(row.tool_calls)
    said = (f"repeat {row.repeat + 1}: " if repeats else "") + (
        f"{n} tool call{'s' if n != 1 else ''}, {row.model_calls} model call"
        f"{'s' if row.model_calls != 1 else ''}") + (f", ended: {row.ended}" if row.ended else "")
    return (f"<div>{escape(said)}</div>" + (f"<ol>{''.join(items)}</ol>" if items else "")
            + (f"<ul>{''.join(turns)}</ul>" if turns else ""))
