"""Fork anywhere and edit a fork: where ``agent.fork(at=...)`` may cut, and ``agent.edit``.

A fork made at message ``at`` holds the messages before it, sharing them with its parent
(``History.fork(at)``: O(1), nothing copied). The cut must leave a history the agent can go
on from: a cut between an assistant message with tool calls and its last answer would leave
calls answered in part, so it moves back to that assistant message (the model is asked
again) and says so; ``exact=True`` refuses instead, for a caller that wants that very index.

``edit`` replaces one text or tool result in an agent's own history before it runs on. The
message is never changed in place (the parent and the other forks share it): a new history
over the old one holds the replacement (``History.edited``). The new content is exactly what
was given, the value the model is then sent; that a person wrote it is a fact kept beside it
(``checks.FACTS``: ``{"edited": True}``), which views show ("edited by hand"), sessions and
forks keep, and requests leave out. A note in the text itself would reach the model, which
may quote it, and would change the value being tried ("30" is no longer "30").
"""

from __future__ import annotations

import copy
import warnings
from typing import TYPE_CHECKING, Any

from fragola_nb.base.checks import FACTS, META, check_content
from fragola_nb.base.errors import BadUsage
from fragola_nb.core.editcheck import check_edit
from fragola_nb.core.events import StateUpdateEvent
from fragola_nb.core.history import History
from fragola_nb.core.tools import serialize_result

if TYPE_CHECKING:
    from fragola_nb.core.conversation import Conversation

__all__ = ["cut", "edit"]


def _index(value: Any, length: int, what: str, *, end_ok: bool) -> int:
    """``value`` as an index from 0, negative ones counted from the end; BadUsage if not."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadUsage(f"{what} must be a whole number (a message index), got {value!r:.60}")
    top = length if end_ok else length - 1
    index = value + length if value < 0 else value
    if not 0 <= index <= top:
        span = f"-{length}..{top}" if length else "0" if end_ok else "nothing (no messages)"
        raise BadUsage(f"{what}={value} is out of range: the history holds {length} "
                       f"message(s), so {what} can be {span}")
    return index


def _open_calls_at(history: History, at: int) -> int | None:
    """The index of the assistant message whose tool calls a cut before ``at`` would leave
    answered in part (or not at all), or None when the cut is clean."""
    back = at - 1
    while back >= 0 and history[back].get("role") == "tool":
        back -= 1
    if back < 0 or not history[back].get("tool_calls"):
        return None
    calls = {call.get("id") for call in history[back]["tool_calls"]}
    answered = {history[i].get("tool_call_id") for i in range(back + 1, at)}
    return None if calls <= answered else back


def cut(conv: Conversation, at: Any, exact: bool) -> tuple[int | None, str | None]:
    """Where a fork of an agent (its ``conv``) at ``at`` starts: ``(index, note)``; the
    index is None for a fork at the end (today's ``fork()``, pending calls and all), the note
    says why the cut moved (None when it did not). Costs what the tool answers before ``at``
    number."""
    history = conv.history
    length = len(history)
    if at is None:
        return None, None
    index = _index(at, length, "at", end_ok=True)
    if index == length:
        return None, None
    back = _open_calls_at(history, index)
    if back is None:
        return index, None
    why = (f"at={at} falls inside the tool calls of messages[{back}] (an assistant message "
           "whose calls are not all answered before it)")
    if exact:
        raise BadUsage(f"{why}: a fork there would hold calls without their answers; fork "
                       f"at={back} (before the calls) or after the last answer instead")
    note = f"{why}, so the fork starts at {back}, before that message (the model is asked again)"
    warnings.warn(f"fragola_nb: {note}", UserWarning, stacklevel=4)
    return back, note


def edit(conv: Conversation, index: Any, content: Any, result: Any, given: tuple[bool, bool]
         ) -> None:
    """``agent.edit``: check, then put the edited copy of one message in a new history."""
    has_content, has_result = given
    if conv.status == "generating":
        raise BadUsage(f"agent {conv.deps.name!r} is generating: edit it when the turn ends")
    if has_content == has_result:
        raise BadUsage("edit() takes one of content= (a user/assistant text) or result= "
                       "(a tool message's result)")
    history = conv.history
    where = _index(index, len(history), "index", end_ok=False)
    old = history[where]
    role = old.get("role")
    if role not in ("user", "assistant", "tool"):
        raise BadUsage(f"messages[{where}] is a {role} message: only user, assistant and tool "
                       "messages can be edited (instructions are set with set_instructions)")
    if META in old:
        raise BadUsage(f"messages[{where}] is a note beside the conversation (never sent to "
                       "the model): there is nothing to edit")
    check_edit(where, role, content, result, has_result)
    new = copy.copy(old)  # the other keys (tool_calls, tool_call_id, name) are kept
    if role == "tool":
        if not has_result:
            raise BadUsage(f"messages[{where}] is a tool message: change its result with "
                           "edit(index, result=...)")
        new["content"] = serialize_result(result)
    else:
        if not has_content:
            raise BadUsage(f"messages[{where}] is a {role} message, not a tool message: "
                           "change its text with edit(index, content=...)")
        new["content"] = check_content(content)
    facts = old.get(FACTS)
    new[FACTS] = {**(facts if isinstance(facts, dict) else {}), "edited": True}
    conv.history = history.edited(where, new)
    conv.observe("after_state_update", StateUpdateEvent(conv.deps.context, "edit", new))
