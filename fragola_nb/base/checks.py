"""Checking what a user, a listener or a session hands an agent: messages, content,
instructions.

A history must always be a valid next request: whatever enters it (``messages=``,
``reset(messages)``, a ``user_message`` or ``ai_message`` listener's result) is checked here
first, so the run loop and the settling of a turn can read it without defending every field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.marks import FACTS, META, edited_by_hand, rejection_of
from fragola_nb.base.parts import parts_problem
from fragola_nb.base.surrogates import first_lone_surrogate

__all__ = [
    "FACTS",
    "META",
    "ON_STOP",
    "ROLES",
    "assistant_problem",
    "check_content",
    "check_messages",
    "edited_by_hand",
    "history_problem",
    "kept_problem",
    "message_problem",
    "normalize_instructions",
    "rejection_of",
    "sent",
    "user_problem",
    "withheld",
]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
CONTENT_HINT = (
    "a string or a non-empty list of parts such as "
    '{"type": "text", "text": ...} or {"type": "image_url", "image_url": {...}}'
)


def normalize_instructions(instructions: str | list[str] | None) -> str | None:
    if instructions is None or isinstance(instructions, str):
        refuse_half_emoji(instructions, "instructions")
        return instructions
    if isinstance(instructions, (list, tuple)) and all(isinstance(i, str) for i in instructions):
        refuse_half_emoji(list(instructions), "instructions")
        return "\n".join(instructions)
    raise BadUsage("instructions must be a string, a list of strings, or None")


def _parts_ok(content: Any, role: str = "user") -> bool:
    return parts_problem(content, role) is None


def check_content(content: Any) -> str | list[dict[str, Any]]:
    """A user message's content: a string or parts of the kinds a user sends
    (``fragola_nb.base.parts``), with no lone surrogate (half an emoji, which no request can
    carry: refused here rather than stored unsendable)."""
    if not isinstance(content, str):
        problem = parts_problem(content, "user")
        if problem is not None:
            raise BadUsage(f"content must be {CONTENT_HINT} ({problem})")
    refuse_half_emoji(content, "content")
    return content  # type: ignore[no-any-return]


def refuse_half_emoji(value: Any, what: str) -> None:
    """A ``BadUsage`` when ``value``, text a person gives (a user message, an edited message
    or result, an injected result, a rejection's reason, edited arguments, instructions),
    holds half an emoji (a lone surrogate): refused, never stored mended, as the text of a
    model or a tool is (``fragola_nb.base.surrogates``)."""
    try:
        half = first_lone_surrogate(value)
    except RecursionError:  # circular or too deep: the value's own check says so
        return
    if half is not None:
        raise BadUsage(f"{what} holds half an emoji, a lone surrogate ('{half}'), which no "
                       "request can carry: replace it before sending the text")


def _kind(value: Any) -> str:
    return type(value).__name__


def user_problem(message: Any) -> str | None:
    """Why ``message`` cannot be stored as a user message, or None."""
    return _role_problem(message, "user", "a user message")


def assistant_problem(message: Any) -> str | None:
    """Why ``message`` cannot be stored as the model's reply, or None."""
    return _role_problem(message, "assistant", "the model's reply")


def _role_problem(message: Any, role: str, what: str) -> str | None:
    if not isinstance(message, dict):
        return f"{what} must be a message dict, not a {_kind(message)}"
    if message.get("role") != role:
        return f"{what} must keep the role {role!r}, not {message.get('role')!r}"
    return message_problem(message)


def message_problem(message: Any) -> str | None:
    """Why ``message`` is not a Chat Completions message that can be sent back, or None."""
    if not isinstance(message, dict):
        return f"not a message dict but a {_kind(message)}"
    role = message.get("role")
    if role not in ROLES:
        return f"the role {role!r} is not one of {', '.join(sorted(ROLES))}"
    content = message.get("content")
    if role in ("system", "developer", "user", "tool"):
        if not isinstance(content, str) and not _parts_ok(content, role):
            return (f"the content of a {role} message must be {CONTENT_HINT} "
                    f"({parts_problem(content, role)})")
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            return "a tool message needs the tool_call_id (a string) of the call it answers"
    if role == "function" and not isinstance(message.get("name"), str):
        return "a function message needs a name"
    if role == "assistant":
        return _assistant_fields(message)
    return None


def _assistant_fields(message: dict[str, Any]) -> str | None:
    content, calls = message.get("content"), message.get("tool_calls")
    if content is not None and not isinstance(content, str) \
            and not _parts_ok(content, "assistant"):
        return ("the content of an assistant message must be text, a list of parts, or None "
                f"({parts_problem(content, 'assistant')})")
    refusal = message.get("refusal")
    if refusal is not None and not isinstance(refusal, str):
        return "the refusal of an assistant message must be text or None"
    if calls is None:
        return None
    if not isinstance(calls, list):
        return f"tool_calls must be a list of tool call dicts, not a {_kind(calls)}"
    seen: set[str] = set()
    for index, call in enumerate(calls):
        where = f"tool_calls[{index}]"
        if not isinstance(call, dict):
            return f"{where} is not a tool call dict but a {_kind(call)}"
        call_id, function = call.get("id"), call.get("function")
        if not isinstance(call_id, str) or not call_id or call_id in seen:
            return f"{where} needs a unique id (a non-empty string), got {call_id!r:.60}"
        seen.add(call_id)
        if call.get("type", "function") != "function":
            return f"{where} has the type {call.get('type')!r}; only 'function' is sent"
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) \
                or not function["name"]:
            return f"{where} needs a function with a name"
        if not isinstance(function.get("arguments"), str):
            return f"{where}'s function.arguments must be a string (JSON text)"
    return None


WITHHELD = {"withheld": True}
"""The ``META`` a listener (a guardrail) leaves as the message when the turn is stopped before
the message was passed and nothing may be stored (``on_reject="remove"``)."""


ON_STOP = "_fragola_nb_on_stop"
"""A ``user_message`` listener (a guardrail's) may carry this attribute: a function of the
``UserMessageEvent``, called by the agent when the turn is stopped (``stop_sync()``, a
cancellation, Ctrl-C) while the listeners run, whichever listener it landed in, even one that
runs before it. It leaves in ``event.message`` what may be kept: a guard that has not passed
the message yet replaces it by a marked copy (never sent) or ``WITHHELD``. Without it, a stop
in a listener added before ``guardrail()`` would keep a message no guard checked, and the next
turn would send it."""


def withheld(message: Any) -> bool:
    """True when ``message`` is the ``WITHHELD`` stand-in: store nothing in its place."""
    return isinstance(message, dict) and message.get(META) == WITHHELD


def sent(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages a request carries: all but those marked with ``META``, each without its
    ``FACTS`` (a copy then: the history keeps them)."""
    return [{k: v for k, v in message.items() if k != FACTS} if FACTS in message else message
            for message in messages if META not in message]


def kept_problem(message: Any, role: str) -> str | None:
    """Why ``message`` cannot be stored in place of a refused ``role`` message
    (``TurnRefused.keep``), or None."""
    problem = _role_problem(message, role, f"the {role} message kept in place of the refused one")
    if problem is not None:
        return problem
    if not isinstance(message.get(META), dict):
        return f"the kept message must carry a {META!r} dict (or it would be sent)"
    if message.get("tool_calls"):
        return "the kept message cannot hold tool calls (nothing would answer them)"
    return None


def history_problem(messages: Sequence[Any]) -> str | None:
    """Why ``messages`` is not a history the agent can go on from, or None.

    Each message must be valid on its own, and every ``tool`` message must answer, once, a
    call of the assistant message it follows (with only tool messages between). Calls of the
    last assistant message may stay unanswered: the next ``step()`` answers them.
    """
    open_calls: set[str] = set()
    opened_at = -1
    for index, message in enumerate(messages):
        problem = message_problem(message)
        if problem is not None:
            return f"messages[{index}]: {problem}: {message!r:.120}"
        role = message["role"]
        if META in message and (role == "tool" or message.get("tool_calls")):
            return (f"messages[{index}] is marked {META!r} (never sent) but is a tool message "
                    "or holds tool calls, which the messages sent would then lack")
        if role == "tool":
            call_id = message["tool_call_id"]
            if call_id not in open_calls:
                return (f"messages[{index}] is a tool message for {call_id!r}, which answers no "
                        "open call of the assistant message before it")
            open_calls.discard(call_id)
            continue
        if open_calls:
            waiting = ", ".join(sorted(open_calls))
            return (f"messages[{index}] comes after messages[{opened_at}], whose tool call(s) "
                    f"{waiting} are unanswered: answer each with a tool message first")
        if role == "assistant":
            open_calls = {call["id"] for call in message.get("tool_calls") or ()}
            opened_at = index
    return None


def check_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` as a new list, or ``BadUsage`` saying what makes it no valid history."""
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise BadUsage("messages must be a list of Chat Completions message dicts")
    out = list(messages)
    problem = history_problem(out)
    if problem is not None:
        raise BadUsage(problem)
    return out
