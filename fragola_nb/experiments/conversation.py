"""Conversations in an evaluation: a case's ``turns`` or its ``SimulatedUser``, sent to one
fork, and the tools that need approval decided by ``evaluate(..., decide=...)``.

``converse(fork, script)`` runs one case's conversation on its fork and says how it went
(``Talk``): each turn is a ``user_message`` on the same fork; a turn that pauses on a call
is decided by ``script.decide`` (``approve``, ``reject``, ``edit`` or answer by hand, as a
``fragola_nb.Decision``) and resumed with ``step()``, else the conversation ends
``"waiting"`` with the fork waiting (never hangs). The same code runs on a Ray worker.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.render import text_of
from fragola_nb.core.state import Decision, PendingCall
from fragola_nb.core.usage import CallUsage

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.state import AgentState
    from fragola_nb.experiments.simuser import SimulatedUser

__all__ = ["Decide", "Script", "Talk", "answers_of", "converse", "run_item"]

Decide = Callable[[PendingCall], Any]
"""``decide(call)`` for a call waiting for approval: a ``Decision`` (``Decision("approve")``,
``Decision("approve", params={...})`` to edit, ``Decision("reject", text=reason)``,
``Decision("inject", text=result)`` to answer by hand), ``True`` (approve), ``False``
(reject), or ``None`` (leave it waiting: the row ends ``"waiting"``); sync or async."""


@dataclass(frozen=True)
class Script:
    """What one case says to its fork: ``turns`` (user messages, in order) or a ``user``
    playing the user; ``decide`` for the calls that wait for approval."""

    turns: tuple[Any, ...] = ()
    user: SimulatedUser | None = None
    decide: Decide | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Talk:
    """How a conversation went: the last turn's state, why it ended, the turns sent, and the
    simulated user's own calls (counted apart, as a judge's are)."""

    state: AgentState | None
    ended: str | None
    turns: tuple[Any, ...] = ()
    user_calls: tuple[CallUsage, ...] = ()


def answers_of(fork: Agent) -> tuple[str | None, ...]:
    """Each turn's reply in ``fork``'s own messages: the last assistant text before the next
    user message (None for a turn without one)."""
    answers: list[str | None] = []
    for message in fork.messages_since(fork.fork_point):
        role = message.get("role")
        if role == "user":
            answers.append(None)
        elif role == "assistant" and answers:
            answers[-1] = text_of(message.get("content")) or None
    return tuple(answers)


async def turn(fork: Agent, content: Any, decide: Decide | None) -> AgentState:
    """One user message, and the approvals it waits on decided while ``decide`` decides
    (at most ``max_step`` rounds of decisions: a model that asks forever stops)."""
    state = await fork.user_message(content)
    rounds = 0
    while state.outcome == "paused" and decide is not None and rounds < fork.options.max_step:
        rounds += 1
        for call in [c for c in fork.pending if c.decision is None]:
            said = decide(call)
            if inspect.isawaitable(said):
                said = await said
            if said is None:
                return state
            _apply(fork, call, said)
        if any(c.decision is None for c in fork.pending):
            return state  # a dynamic call left undecided
        state = await fork.step()
    return state


def _apply(fork: Agent, call: PendingCall, said: Any) -> None:
    if said is True:
        said = Decision("approve")
    elif said is False:
        said = Decision("reject", text="rejected by decide")
    if not isinstance(said, Decision):
        raise BadUsage(f"decide() returns a Decision, True, False or None, not "
                       f"{type(said).__name__}")
    if said.kind == "approve":
        fork.approve(call.id, said.params)
    elif said.kind == "reject":
        fork.reject(call.id, said.text or "")
    else:
        fork.inject(call.id, said.text)


async def converse(fork: Agent, script: Script) -> Talk:
    """Run ``script`` on ``fork`` (see the module's docstring)."""
    if script.user is not None:
        return await script.user.talk(fork, script.decide)
    state = None
    for number, content in enumerate(script.turns):
        state = await turn(fork, content, script.decide)
        if state.outcome != "finished":
            ended = "waiting" if state.outcome == "paused" else "failed"
            return Talk(state, ended if len(script.turns) > 1 or ended == "waiting" else None,
                        script.turns[:number + 1])
    return Talk(state, "all turns" if len(script.turns) > 1 else None, script.turns)


async def run_item(fork: Agent, item: Any) -> Talk:
    """A batch's input on its fork: one ``user_message``, or a ``Script``'s conversation."""
    if isinstance(item, Script):
        return await converse(fork, item)
    return Talk(await fork.user_message(item), None, (item,))
