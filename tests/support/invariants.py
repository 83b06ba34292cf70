"""History checks shared by the fault, random-play, concurrency and interruption tests (and a
cheap HTTP client for their agents).

What every agent must satisfy whenever no call of it is running::

    check_agent(agent)          # status, history, pending calls, schema
    before = snapshot(agent)    # ... act on another agent ...
    assert snapshot(agent) == before
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from fragola_nb import Agent
from support.openai_schema import validate_request

__all__ = [
    "Snapshot",
    "check_agent",
    "check_history",
    "loopback_http_client",
    "snapshot",
    "unanswered_calls",
]

STORED_ROLES = frozenset({"user", "assistant", "tool"})


def unanswered_calls(messages: list[dict[str, Any]]) -> list[str]:
    """Ids of the tool calls of the last assistant message that no tool message answers."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] == "assistant":
            answered = {m["tool_call_id"] for m in messages[index + 1 :]}
            return [c["id"] for c in messages[index].get("tool_calls") or ()
                    if c["id"] not in answered]
        if messages[index]["role"] != "tool":
            return []
    return []


def check_history(messages: list[dict[str, Any]], *, open_calls: tuple[str, ...] = ()) -> None:
    """Roles in a valid order and every tool call answered exactly once.

    A tool message answers a call of the assistant message right before its group, once; no
    other message comes until all of that message's calls are answered, except at the very end,
    where exactly ``open_calls`` (the calls an agent waits on) may still be open. A non-empty
    history is a valid ``CreateChatCompletionRequest`` as it stands.
    """
    roles = [m.get("role") for m in messages]
    assert set(roles) <= STORED_ROLES, f"unexpected roles in the history: {roles}"
    open_ids: list[str] = []
    for position, message in enumerate(messages):
        if message["role"] == "tool":
            call_id = message["tool_call_id"]
            assert call_id in open_ids, (
                f"message {position} answers {call_id!r}, which is not an open call "
                f"(open: {open_ids})"
            )
            open_ids.remove(call_id)
            continue
        assert not open_ids, f"calls {open_ids} unanswered before message {position}: {message}"
        if message["role"] == "assistant":
            open_ids = [c["id"] for c in message.get("tool_calls") or ()]
            assert len(set(open_ids)) == len(open_ids), f"duplicate call ids in {message}"
            assert message.get("content") is not None or open_ids, f"empty reply {message}"
    assert sorted(open_ids) == sorted(open_calls), (
        f"open calls at the end: {open_ids}, expected exactly {list(open_calls)}"
    )
    if messages:
        validate_request({"model": "m", "messages": messages})


def check_agent(agent: Agent) -> None:
    """An agent at rest: idle with every call answered, or waiting on exactly its pending
    calls (the last assistant message's unanswered ones)."""
    state = agent.state
    assert state.status in ("idle", "waiting"), f"{agent.name} is {state.status}"
    if state.status == "idle":
        assert state.pending == (), f"{agent.name} is idle with pending {state.pending}"
        check_history(state.messages)
    else:
        # Decided calls stay pending (and unanswered) until step() carries the decisions out.
        pending = tuple(p.id for p in state.pending)
        assert pending, f"{agent.name} is waiting on nothing"
        check_history(state.messages, open_calls=pending)


@dataclass(frozen=True)
class Snapshot:
    """Everything of an agent that an action on another agent must leave alone; the message
    dicts are deep-copied so a change made in place to a shared dict is caught too."""

    messages: list[dict[str, Any]]
    status: str
    step_count: int
    pending: tuple[tuple[str, str, str | None], ...]
    stores: dict[str, Any]


def snapshot(agent: Agent) -> Snapshot:
    state = agent.state
    return Snapshot(
        messages=copy.deepcopy(state.messages),
        status=state.status,
        step_count=state.step_count,
        pending=tuple(
            (p.id, p.name, p.decision.kind if p.decision else None) for p in state.pending
        ),
        stores={name: copy.deepcopy(s.get()) for name, s in agent.stores.items()},
    )


def loopback_http_client(**options: Any) -> Any:
    """An HTTP client for ``Fragola(http_client=...)`` on the scripted model's plain-HTTP
    loopback: no TLS, so no certificate store to load (about 0.15 s for every client made
    otherwise). One event loop only: it is closed with its ``Fragola``."""
    import openai

    return openai.DefaultAsyncHttpxClient(verify=False, **options)
