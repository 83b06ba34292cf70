"""What a panel shows, as the plain data its view draws: the header, the status strip, the
approval cards, the tools and the stores of an agent, and the text of a streamed reply.

Every string in it is made visible (``render.visible``): the view draws them as text, and a
bidi control or a zero-width character shows as its ``\\uXXXX`` escape.
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, Any

from fragola_nb.base.render import text_of, visible
from fragola_nb.notebook.panel.message_rows import compact, disguised, short

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.state import Decision, PendingCall
    from fragola_nb.core.usage import Usage

__all__ = ["OUTCOME_TEXT", "card", "decision", "head", "stores", "streamed_text", "strip", "tools",
           "usage_shown"]

OUTCOME_TEXT = {"stopped": "stopped", "step_limit": "step budget used — Step goes on",
                "finished": "finished", "budget": "budget spent"}


def head(agent: Agent, *, model: str, usage: Usage | dict[str, Any], turn: bool,
         ) -> dict[str, Any]:
    """``usage``: the agent's (a panel of the agent) or the turn's (a turn panel), or it as
    ``usage_shown`` made it."""
    parent = agent.parent
    return {
        "name": visible(agent.name), "id": visible(agent.id), "model": visible(model),
        "fork_of": visible(agent.fork_of or ""),
        "fork_of_name": visible(parent.name if parent is not None else ""),
        "instructions": visible(agent.instructions or ""),
        "steps": agent.step_count, "max_step": agent.options.max_step,
        "status": agent.status, "turn": turn,
        "usage": usage if isinstance(usage, dict) else usage_shown(usage),
        "experiment": " and ".join(agent.experiments),  # Stop reaches it
    }


def usage_shown(usage: Usage) -> dict[str, Any]:
    """The counts, the cost (None when unknown) and ``text``, the short line the header
    draws ("1,234 tokens · $0.0012"; empty before the first model call)."""
    return {**usage.as_dict(), "text": usage.summary()}


def strip(agent: Agent, *, model: str, running: tuple[str, float] | None, since: float,
          error: str, retry_at: float | None = None) -> dict[str, Any]:
    """What is happening and what needs the person. ``running``: the tool running and since
    when; ``since``: when the model call began (the view adds the seconds); ``retry_at``:
    when a request the API throttled (429) is sent again (the view counts down to it)."""
    status = agent.status
    if status == "generating":
        left = None if retry_at is None else retry_at - time.time()
        if running is None and left is not None and left > 0:
            return {"kind": "throttled", "text": f"throttled, retrying in {math.ceil(left)} s",
                    "until": retry_at, "after": f"calling {visible(model)}…", "t0": since}
        if running is not None:
            return {"kind": "tool", "text": f"running {visible(running[0])}", "t0": running[1]}
        return {"kind": "model", "text": f"calling {visible(model)}…", "t0": since}
    if status == "waiting":
        undecided = [p for p in agent.pending if p.decision is None]
        if not undecided:
            return {"kind": "waiting", "text": "every call is decided — Step goes on"}
        n = len(undecided)
        calls = "1 call needs" if n == 1 else f"{n} calls need"
        return {"kind": "waiting", "text": f"{calls} your decision"}
    if agent.experiments:
        what = " and ".join(agent.experiments)
        return {"kind": "experiment", "text": f"{what} running on forks — Stop ends it"}
    if error:  # the notice below says which error, once; the cell's error stays too
        return {"kind": "error", "text": "failed"}
    outcome = agent.outcome
    if outcome is None:
        return {"kind": "idle", "text": "ready"}
    return {"kind": outcome, "text": OUTCOME_TEXT.get(outcome, outcome)}


def card(call: PendingCall, error: str = "") -> dict[str, Any]:
    """The approval card of a pending call (``raw_id`` is the id sent back, never drawn)."""
    arguments = json.dumps(call.arguments, indent=2, ensure_ascii=False, default=str)
    return {
        "id": visible(call.id), "raw_id": call.id, "name": visible(call.name),
        "dynamic": call.reason == "dynamic",
        "args": short(compact(call.arguments)),
        # shown, and the edit box's start: \u202e in a JSON string reads back as the same
        # character
        "full": visible(arguments),
        "flag": disguised(arguments) or disguised(call.name) or disguised(call.id),
        "decided": decided(call.decision), "error": error,
    }


def decision(call: PendingCall, *, clicked: bool) -> dict[str, Any]:
    """A decided call as its card keeps it once answered: ``text`` says what was decided and
    by whom ("approved by a click", "approved in code", "rejected in code: why", "answered
    by hand"); ``kind`` is approve, edit, reject or inject."""
    made = call.decision
    assert made is not None
    by = "by a click" if clicked else "in code"
    if made.kind == "approve":
        kind = "approve" if made.params is None else "edit"
        text = ("approved " if made.params is None else "approved with edited arguments ") + by
    elif made.kind == "reject":
        kind, text = "reject", f"rejected {by}" + (f": {visible(made.text)}" if made.text else "")
    else:
        kind, text = "inject", "answered by hand" if clicked else "answered in code"
    return {"id": visible(call.id), "name": visible(call.name),
            "args": short(compact(call.arguments)), "kind": kind, "text": text}


def decided(decision: Decision | None) -> str:
    if decision is None:
        return ""
    if decision.kind == "approve":
        return "approved with edited arguments" if decision.params is not None else "approved"
    if decision.kind == "reject":
        return "rejected" + (f": {visible(decision.text)}" if decision.text else "")
    return "injected"


def tools(agent: Agent) -> list[dict[str, Any]]:
    return [{"name": visible(tool.name), "about": visible(tool.description or ""),
             "dynamic": tool.is_dynamic, "approval": tool.require_approval is not False}
            for tool in agent.options.tools]


def stores(agent: Agent) -> list[dict[str, Any]]:
    shown = []
    for namespace, store in agent.stores.items():
        try:
            value = json.dumps(store.get(), indent=2, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            value = repr(store.get())
        shown.append({"name": visible(namespace), "value": visible(value)})
    return shown


def streamed_text(message: Any) -> str:
    """A partial assistant message as the stream block shows it: its text, then its calls."""
    text = text_of(message.get("content"))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        text += f"\n→ {function.get('name') or ''}({function.get('arguments') or ''})"
    return visible(text)
