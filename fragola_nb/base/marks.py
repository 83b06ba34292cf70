"""Marks a message may carry beside what the model reads: ``META`` (kept, never sent) and
``FACTS`` (sent, less this key), and what views read from them. No imports: every layer,
``render`` included, reads these without loading the checks (``checks`` re-exports them)."""

from __future__ import annotations

from typing import Any

__all__ = ["FACTS", "META", "edited_by_hand", "rejection_of"]

META = "fragola_nb"
"""A message may carry this key: a dict of facts for people and views, such as a guardrail's
``{"rejected": {"guard": "no_secrets", "reason": "..."}}``. A message that carries it stays
in the history (the panel, ``agent.state``, session files show it) but is never sent to the
model: it is a note beside the conversation, not part of it."""
FACTS = "fragola_nb_facts"
"""A message that *is* sent may carry this key: a dict of facts about it for people and
views, such as ``{"edited": True}`` on a message ``agent.edit`` replaced by what a person
typed. The message goes to the model as it is, less this key (``sent`` leaves it out of the
request's copy); the history, ``agent.state``, session files and exports keep it."""


def edited_by_hand(message: Any) -> bool:
    """Whether ``message`` is one ``agent.edit`` replaced (its ``FACTS`` say ``edited``)."""
    facts = message.get(FACTS) if isinstance(message, dict) else None
    return isinstance(facts, dict) and facts.get("edited") is True


def rejection_of(message: dict[str, Any]) -> tuple[str, str] | None:
    """``(guard, reason)`` when ``message`` was kept marked as rejected (by a guardrail,
    ``fragola_nb.guardrail``), else None."""
    meta = message.get(META)
    rejected = meta.get("rejected") if isinstance(meta, dict) else None
    if not isinstance(rejected, dict):
        return None
    return str(rejected.get("guard", "?")), str(rejected.get("reason", ""))
