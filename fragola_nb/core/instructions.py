"""Scoped instructions: named parts of an agent's system prompt that come and go on their own.

Fragola (0.1.1) lets a hook or a listener add its own part of the instructions under a scope
(``setInstructions(text, scope)``) and take it away again (``removeInstructions(scope)``)
without touching the agent's own instructions or another scope's. What the model is sent as
the system (or developer) message is the merge: the unscoped instructions first, then each
scope's text in sorted scope order, one per line. ``"*"`` names that merge, so it cannot be
set or removed.

>>> agent.set_instructions("Answer in French.", scope="lang")   # doctest: +SKIP
>>> agent.instructions_for("*")                                  # doctest: +SKIP
'Be brief.\\nAnswer in French.'

The unscoped instructions stay ``agent.options.instructions`` (and ``agent.instructions``),
so everything that read or set them before scopes existed reads and sets the same text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from fragola_nb.base.checks import normalize_instructions
from fragola_nb.base.errors import BadUsage

if TYPE_CHECKING:
    from fragola_nb.core.conversation import Conversation

__all__ = ["ALL", "Instructions", "Scopes", "merged", "read", "remove", "shown", "write"]

ALL = "*"
"""The scope that names every scope merged: read only."""


class Scopes:
    """The scoped parts of one agent's instructions (a fork gets a copy)."""

    __slots__ = ("_texts",)

    def __init__(self, texts: Mapping[str, str] | None = None) -> None:
        self._texts: dict[str, str] = dict(texts or {})

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._texts))

    def __len__(self) -> int:
        return len(self._texts)

    def get(self, scope: str) -> str | None:
        return self._texts.get(scope)

    def set(self, scope: str, text: str | None) -> None:
        if text is None:
            self._texts.pop(scope, None)
        else:
            self._texts[scope] = text

    def pop(self, scope: str) -> bool:
        return self._texts.pop(scope, None) is not None

    def copy(self) -> Scopes:
        return Scopes(self._texts)

    def as_dict(self) -> dict[str, str]:
        """The scopes in sorted order: how sessions save them."""
        return {scope: self._texts[scope] for scope in self}


class Instructions(str):
    """What ``agent.instructions`` gives: the unscoped text, as the attribute always gave it
    (a ``str``: compared, printed, saved as one), which can also be called as upstream's
    ``instructions(scope?)``: ``agent.instructions("*")`` is every scope merged,
    ``agent.instructions("lang")`` one scope's, ``agent.instructions()`` the unscoped text.

    Why a callable string: ``agent.instructions`` was an attribute before scopes existed
    (``agent.instructions == "Be brief."``, ``is None`` when unset) and upstream's name for
    reading a scope is ``instructions(scope)``; both keep working. An agent with neither
    unscoped nor scoped instructions still gives ``None``; ``instructions_for(scope)`` reads
    a scope whatever is set."""

    _conv: Conversation

    def __call__(self, scope: str | None = None) -> str | None:
        return read(self._conv, scope)

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        # Pickled, copied or deep-copied as the plain text: never the agent it reads from.
        return str, (str(self),)


def shown(conv: Conversation) -> Instructions | None:
    """``agent.instructions``: the unscoped text as an ``Instructions`` (an empty one when
    only scopes are set, so that ``agent.instructions("*")`` reads them); None when the
    agent has no instructions at all."""
    unscoped = conv.deps.options.instructions
    if unscoped is None and not len(conv.scopes):
        return None
    text = Instructions(unscoped or "")
    text._conv = conv
    return text


def merged(unscoped: str | None, scopes: Scopes) -> str | None:
    """What the model is sent: the unscoped text, then each scope's in sorted scope order
    (empty ones left out), one per line; None when there is nothing to send."""
    parts = [unscoped] if unscoped else []
    parts += [text for scope in scopes if (text := scopes.get(scope))]
    return "\n".join(parts) if parts else None


def _scope(scope: object, doing: str) -> str:
    if not isinstance(scope, str) or not scope:
        raise BadUsage(f"an instructions scope is a non-empty string, got {scope!r}")
    if scope == ALL:
        raise BadUsage(f"'*' names every scope merged: it cannot be {doing}")
    return scope


def write(conv: Conversation, text: str | list[str] | None, scope: str | None) -> None:
    """``agent.set_instructions``: the unscoped instructions, or one scope's (None clears)."""
    normalized = normalize_instructions(text)
    if scope is None:
        conv.deps.options.instructions = normalized
    else:
        conv.scopes.set(_scope(scope, "set"), normalized)


def read(conv: Conversation, scope: str | None) -> str | None:
    """``agent.instructions_for``: the unscoped text, one scope's, or ``"*"`` the merge."""
    if scope is None:
        return conv.deps.options.instructions
    if scope == ALL:
        return merged(conv.deps.options.instructions, conv.scopes)
    if not isinstance(scope, str) or not scope:
        raise BadUsage(f"an instructions scope is a non-empty string, got {scope!r}")
    return conv.scopes.get(scope)


def remove(conv: Conversation, scope: str) -> bool:
    """``agent.remove_instructions``: True when the scope was there."""
    return conv.scopes.pop(_scope(scope, "removed"))
