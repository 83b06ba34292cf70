"""The trajectory of an evaluation's row, as the matrix's cell detail shows it: the fork's own
tool calls as a compact list (``name(arguments) → result``, each shortened), then the turns of
a conversation (what the user said, what the agent replied), with why it ended and the model
calls. Plain data; the view sets it with ``textContent`` only."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fragola_nb.base.render import text_of
from fragola_nb.experiments.evaluate.evalrow import EvalRow

__all__ = ["CALLS", "SHORT", "trajectory_detail"]

SHORT = 120
"""Characters of an argument list, a result or a turn in the detail."""
CALLS = 40
"""Calls listed at most (the rest are counted)."""


def _short(value: Any, shown: Callable[[Any], str]) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                            default=str)
    text = " ".join(shown(text).split())  # shown before it is cut: no half key is left
    return text if len(text) <= SHORT else text[:SHORT - 1] + "…"


def trajectory_detail(row: EvalRow, shown: Callable[[Any], str]) -> dict[str, Any]:
    """``{"calls", "more", "turns", "ended", "model_calls", "user_calls"}`` for ``row``;
    every text passed through ``shown`` (credentials hidden, text made safe to show)."""
    calls = [{"name": shown(call.get("name")),
              "arguments": _short(call.get("arguments") or {}, shown),
              "result": None if call.get("result") is None else _short(call["result"], shown)}
             for call in row.tool_calls[:CALLS]]
    turns = []
    if row.turns:
        for number, said in enumerate(row.turns):
            reply = row.answers[number] if number < len(row.answers) else None
            turns.append({"user": _short(text_of(said), shown),
                          "reply": None if reply is None else _short(reply, shown)})
    return {"calls": calls, "more": max(0, len(row.tool_calls) - CALLS), "turns": turns,
            "ended": row.ended, "model_calls": row.model_calls,
            "user_calls": None if row.user_usage is None else row.user_usage.requests}
