"""The conversation as rows for the panel's front end: one row per message, tool results
folded into the call they answer.

A row is plain data the browser draws with ``textContent`` (names, arguments, results) and one
field of HTML, ``html``, which only our renderers produce (escaped text, or Markdown with raw
HTML off). Rows are built once, when their message arrives; a tool result changes the row of
the call it answers (a *patch*), so appending a message costs the same at 20,000 messages as at
20: the kernel sends the new or changed rows, never the history.

    rows = Rows(start=0)
    added, patched = rows.add(messages, start_index)

Each call in a row has a ``state``: ``asked`` (no answer yet), ``ran``, ``error``,
``rejected``, ``edited``, ``amended``, ``injected`` (answered by hand) or ``cancelled``, with
a ``note`` (the reason, the edit) and, when the panel saw it run, ``ms``. ``edited`` is a call
run with edited arguments (``runloop.EDITED``, the note holds them); ``amended`` a result
edited afterwards by ``agent.edit`` (its message's ``checks.FACTS`` say so; the panel says
``RESULT_EDITED``): both differ from what the model asked for or the tool returned, which is
what the row must not hide. A user or assistant text ``agent.edit`` replaced has ``edited``
set on its row (the panel's "edited by hand" badge).

A row's ``i`` is the message's index in the history, the number ``state.messages[i]``,
``fork(at=i)`` and ``edit(i)`` take, and the one every view shows; a call's ``ri`` is the
index of the tool message that answered it.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import Any

from fragola_nb.base.checks import edited_by_hand, rejection_of
from fragola_nb.base.render import markdown_html, pretty_arguments, text_of, visible
from fragola_nb.core.run.loop import CANCELLED, EDITED, INTERRUPTED, REJECTED

__all__ = ["RESULT_EDITED", "SHORT", "CallFacts", "Rows", "compact", "disguised", "short"]

SHORT = 120
"""Characters of arguments or result shown on a call's one line."""
RESULT_EDITED = "result edited by hand, not what the tool returned"
"""How the panel labels an ``amended`` call, one whose result ``agent.edit`` replaced
(its message's ``checks.FACTS``); panel.js writes the same words."""

_DISGUISE = re.compile("[\u061c\u200b\u200e\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
# what the run loop writes for a rejected call, and for one run with edited arguments
_REJECTED = re.compile(re.escape(REJECTED) + r".*?\.(?: Reason: (?P<why>.*))?\Z", re.S)


def disguised(text: str) -> bool:
    """Whether ``text`` holds direction controls or zero-width characters (which can make it
    read as something else: "file\\u202egnp.exe" shows as "fileexe.png")."""
    return bool(_DISGUISE.search(text))


def short(text: str, limit: int = SHORT) -> str:
    """``text`` on one line, visible, cut to ``limit`` characters."""
    line = " ".join(visible(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def compact(arguments: Any) -> str:
    """Arguments on one line, as a call reads: ``a=1, b="x"``."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, TypeError, RecursionError):
            return str(arguments)
    if isinstance(arguments, dict):
        return ", ".join(
            f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in arguments.items()
        )
    return json.dumps(arguments, ensure_ascii=False, default=str)


@dataclass
class CallFacts:
    """What the panel saw of a call while it was live (the history alone does not say)."""

    decision: str | None = None  # "inject" when a person typed the result
    error: str | None = None  # event.error of the answered call
    started: float | None = None
    ms: int | None = None


@dataclass
class Rows:
    """The rows of the messages from index ``start`` on."""

    start: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, CallFacts] = field(default_factory=dict)
    count: int = 0
    """Messages read so far (a tool result folded into its call has no row of its own)."""
    _where: dict[str, tuple[int, int]] = field(default_factory=dict)  # call id -> row, call

    def clear(self) -> None:
        self.rows.clear()
        self._where.clear()
        self.count = 0

    def add(self, messages: list[dict[str, Any]], lazy_before: int = 0,
            ) -> tuple[list[dict[str, Any]], list[int]]:
        """Rows for ``messages`` (the next ones of the history): the new rows, and the
        positions of older rows that changed (a result reached their call).

        An assistant message before index ``lazy_before`` gets its Markdown rendered later
        (:meth:`render`, when a view draws it): its row carries ``text`` and ``md``."""
        added: list[dict[str, Any]] = []
        patched: list[int] = []
        for message in messages:
            index = self.start + self.count
            self.count += 1
            if message.get("role") == "tool":
                where = self._where.get(str(message.get("tool_call_id", "")))
                if where is not None:
                    self._answer(where, message, index)
                    if where[0] < len(self.rows) - len(added) and where[0] not in patched:
                        patched.append(where[0])
                    continue
            row = self._row(message, index, len(self.rows), lazy=index < lazy_before)
            self.rows.append(row)
            added.append(row)
        return added, patched

    def refresh_call(self, call_id: str) -> int | None:
        """Show the facts learnt of ``call_id`` since its row was made; its row's position."""
        where = self._where.get(call_id)
        if where is None:
            return None
        call = self.rows[where[0]]["calls"][where[1]]
        facts = self.facts.get(call_id)
        if facts is not None and facts.ms is not None:
            call["ms"] = facts.ms
        return where[0]

    def render(self, positions: list[int]) -> list[dict[str, Any]]:
        """Render the Markdown of the rows at ``positions`` that wait for it; those rows."""
        done = []
        for position in positions:
            row = self.rows[position] if 0 <= position < len(self.rows) else None
            if row is not None and row.get("md"):
                row["html"] = markdown_html(row.pop("text"))
                del row["md"]
                done.append(row)
        return done

    def _row(self, message: dict[str, Any], index: int, position: int, *,
             lazy: bool = False) -> dict[str, Any]:
        role = str(message.get("role", "?"))
        text = text_of(message.get("content"))
        row: dict[str, Any] = {"k": position, "i": index, "role": visible(role), "html": "",
                               "calls": []}
        if edited_by_hand(message) and role != "tool":
            row["edited"] = True
        if role == "assistant":
            if lazy and text:  # visible text now, Markdown once a view draws it
                row["text"], row["md"] = visible(text), True
            else:
                row["html"] = markdown_html(text) if text else ""
            if message.get("refusal"):
                row["refusal"] = visible(str(message["refusal"]))
            for n, call in enumerate(message.get("tool_calls") or ()):
                function = call.get("function") or {}
                call_id = str(call.get("id", ""))
                arguments = function.get("arguments", "")
                raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
                pretty = pretty_arguments(arguments)  # made once: shown, and checked
                row["calls"].append({
                    "id": visible(call_id), "name": visible(str(function.get("name", "?"))),
                    "args": short(compact(arguments)),
                    "full": visible(pretty),
                    "flag": disguised(raw + pretty)
                    or disguised(str(function.get("name", ""))),
                    "state": "asked", "note": "", "result": "", "ms": None, "ri": None,
                })
                self._where[call_id] = (position, n)
        elif role == "tool":  # the answer to a call made before this panel's first message
            row["calls"].append({
                "id": visible(str(message.get("tool_call_id", ""))), "name": "tool",
                "args": "", "full": "", "flag": False, "state": "ran", "note": "",
                "result": visible(text), "ms": None, "ri": index,
            })
            self._set_state(row["calls"][0], str(message.get("tool_call_id", "")), text,
                            edited_by_hand(message))
        else:
            row["html"] = f'<div class="fragola-text">{html.escape(visible(text))}</div>'
        rejection = rejection_of(message)
        if rejection is not None:  # kept by a guardrail, never sent: drawn with textContent
            row["rejected"] = visible(f"rejected by {rejection[0]}: {rejection[1]}")
        return row

    def _answer(self, where: tuple[int, int], message: dict[str, Any], index: int) -> None:
        call = self.rows[where[0]]["calls"][where[1]]
        text = text_of(message.get("content"))
        call["result"], call["ri"] = visible(text), index
        self._set_state(call, str(message.get("tool_call_id", "")), text,
                        edited_by_hand(message))

    def _set_state(self, call: dict[str, Any], call_id: str, text: str, edited: bool) -> None:
        facts = self.facts.get(call_id, CallFacts())
        rejected = _REJECTED.match(text)
        if edited:  # edited by hand after it ran: wins over how it ended
            state, note = "amended", ""  # panel.js labels it RESULT_EDITED's words
        elif text in (CANCELLED, INTERRUPTED):
            state, note = "cancelled", "stopped while it ran" if text == INTERRUPTED else ""
        elif rejected:
            state, note = "rejected", rejected.group("why") or ""
        elif facts.decision == "inject":
            state, note = "injected", ""
        elif EDITED in text:
            edit = text[text.index(EDITED) + len(EDITED):].split("\n", 1)[0]
            state, note = "edited", edit.removesuffix(")")
        elif facts.error is not None or text.startswith("Error:"):
            state, note = "error", ""
        else:
            state, note = "ran", ""
        call["state"], call["note"] = state, visible(note)
        call["ms"] = facts.ms
