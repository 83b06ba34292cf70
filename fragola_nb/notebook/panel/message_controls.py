"""What a message's own controls in the panel do: "fork from here" and "edit and run from here".

Each row of the panel (a message, with the tool results that answer its calls folded in) has
two small controls; each call with a result has a third. A click sends the message's index
(and the call's id); what is kept, what is edited and whether the run goes on is decided here,
through the agent's public API, never in the browser:

* **fork from here** on message ``i``: ``agent.fork(at=i)``, a fork holding the messages
  *before* ``i``. It stands where message ``i`` was about to be written: Step asks the model
  again (a new answer in place of an assistant message, new tool calls in place of a call),
  and the fork's message box puts another user message in place of a user message.
* **edit and run from here** on message ``i`` (or on one of its call's results): a fork that
  *keeps* message ``i`` and the results folded into its row (``agent.fork(at=end of the
  row)``), with the text typed in place of the message's (``fork.edit(i, content=...)``) or
  of the result (``fork.edit(j, result=...)``), which then runs on (``fork.step()``) when the
  model has something to answer: an edited user message or tool result. An edited final
  answer is kept, and the fork waits for the next message.

The parent is never changed. What the agent refuses (an index it cannot cut at, a message it
cannot edit) is said in one line in the panel, and a fork made before a refused edit is dropped
again, so the tree holds nothing half made; the editor keeps what was typed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import FragolaError
from fragola_nb.base.render import text_of, visible
from fragola_nb.notebook.panel.message_rows import disguised

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["NotHere", "fork_edited", "fork_here", "goes_on", "row_end", "source", "target_of"]


class NotHere(Exception):
    """A message's control that cannot be carried out (said in the panel as it is)."""


def index_of(agent: Agent, i: Any) -> int:
    """``i`` (sent by the browser) as the index of one of the agent's messages."""
    if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < agent.message_count:
        raise NotHere(f"message {i!r} is not in {agent.name!r}'s history "
                      f"({agent.message_count} messages): nothing was done")
    return i


def row_end(agent: Agent, index: int) -> int:
    """The index after message ``index`` and the tool results right after it (the ones its
    row shows folded into its calls): where a fork keeping that row is cut."""
    end = index + 1
    for message in agent.messages_since(end):
        if message.get("role") != "tool":
            break
        end += 1
    return end


def target_of(agent: Agent, index: int, call: str) -> int:
    """The message an edit of row ``index`` changes: the message itself, or (``call``) the
    tool result answering that call of it (``call`` as the row shows the id)."""
    if not call:
        return index
    for offset, message in enumerate(agent.messages_since(index + 1)):
        if message.get("role") != "tool":
            break
        if visible(str(message.get("tool_call_id", ""))) == call:
            return index + 1 + offset
    raise NotHere(f"no result of the call {call} follows message {index}: nothing was done")


def answered(message: dict[str, Any]) -> bool:
    """Whether ``message`` is a final answer (an assistant message without tool calls): a
    history ending with it has nothing for the model to answer."""
    return message.get("role") == "assistant" and not message.get("tool_calls")


def goes_on(agent: Agent) -> bool:
    """Whether the model has something to answer at the end of ``agent``'s history, so that
    an edit there runs on."""
    count = agent.message_count
    return bool(count) and not answered(agent.messages_since(count - 1)[0])


def source(agent: Agent, i: Any, call: str = "") -> dict[str, Any]:
    """What the editor of row ``i`` (or of its call's result) starts from: the text as it is
    stored (a textarea shows it as text), whether it holds direction or invisible characters
    (the editor says so), and whether a run follows the edit."""
    index = index_of(agent, i)
    target = target_of(agent, index, call)
    message = agent.messages_since(target)[0]
    text = text_of(message.get("content"))
    runs = not answered(agent.messages_since(row_end(agent, index) - 1)[0])
    return {"t": "source", "i": index, "call": call, "text": text, "flag": disguised(text),
            "runs": runs, "role": visible(str(message.get("role", "?")))}


def fork_here(agent: Agent, i: Any, name: str | None) -> Agent:
    """``agent.fork(name, at=i)``: the fork holding the messages before ``i``."""
    index = index_of(agent, i)
    try:
        return agent.fork(name, at=index, exact=True)
    except FragolaError as exc:
        raise NotHere(f"{type(exc).__name__}: {exc}") from None


def fork_edited(agent: Agent, i: Any, text: str, call: str, name: str | None) -> Agent:
    """The fork of "edit and run from here", edited, not yet run (see the module's
    docstring); a refused edit drops the fork again."""
    index = index_of(agent, i)
    target = target_of(agent, index, call)
    try:
        fork = agent.fork(name, at=row_end(agent, index), exact=True)
    except FragolaError as exc:
        raise NotHere(f"{type(exc).__name__}: {exc}") from None
    try:
        if fork.messages_since(target)[0].get("role") == "tool":
            fork.edit(target, result=text)
        else:
            fork.edit(target, content=text)
    except FragolaError as exc:
        fork.drop()  # the tree keeps nothing the person did not get
        raise NotHere(f"{type(exc).__name__}: {exc}") from None
    return fork
