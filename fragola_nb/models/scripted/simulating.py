"""How the demo brain plays a simulated user (``fragola_nb.SimulatedUser``): fixed and
explainable.

A request is a simulated user's when its system message holds ``[fragola_nb simulated
user]``. The goal is read from that message; its **phrases** are its quoted parts (in
``"double quotes"``, curly quotes or backticks), or the goal itself when it quotes nothing.
The simulated user says the phrases one per turn, in order (turn n: the n-th phrase; it
counts its own earlier messages), and once every phrase is said it answers ``[done]``.

>>> simulated_reply("Ask \\"How warm is it in Oslo?\\" then \\"And in Paris?\\"", 1)
'And in Paris?'
>>> simulated_reply("Ask \\"How warm is it in Oslo?\\"", 1)
'[done]'
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["DONE", "OPENING", "USER_MARKER", "simulated_reply", "simulated_request"]

USER_MARKER = "[fragola_nb simulated user]"
"""In a simulated user's system message (``fragola_nb.experiments.simuser`` writes it)."""
DONE = "[done]"
"""What a simulated user answers when its goal is met."""
OPENING = "(The conversation begins: write your first message to the assistant.)"
"""The simulated user's first user message (then: each of the assistant's replies)."""
_GOAL = re.compile(r"\nYour goal:\n(.*?)\n\n", re.DOTALL)
_QUOTED = re.compile(r'"([^"\n]+)"|\u201c([^\u201d\n]+)\u201d|`([^`\n]+)`')


def simulated_request(messages: list[dict[str, Any]]) -> str | None:
    """The simulated user's next message, or None when ``messages`` are not its request."""
    system = next((m.get("content") for m in messages
                   if m.get("role") in ("system", "developer")), None)
    if not isinstance(system, str) or USER_MARKER not in system:
        return None
    goal = _GOAL.search(system)
    said = sum(1 for m in messages if m.get("role") == "assistant")
    return simulated_reply(goal.group(1) if goal else "", said)


def simulated_reply(goal: str, said: int) -> str:
    """Turn ``said + 1``'s message for ``goal``, by the rule in the module's docstring."""
    phrases = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(goal)]
    if not phrases:
        phrases = [goal.strip()] if goal.strip() else []
    return phrases[said] if said < len(phrases) else DONE
