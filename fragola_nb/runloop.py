"""The run loop, a visible state machine.

One turn (a ``user_message`` or ``step`` call) moves through these states::

    ANSWER_TOOLS ──(a call needs a person)──────────────▶ paused      (status "waiting")
        │  every call of the last assistant message answered
        ▼
    budget left? ──no──────────────────────────────────▶ step_limit  (status "idle")
        │ yes
        ▼
    CALL_MODEL ──(reply without tool calls)────────────▶ finished    (status "idle")
        │  reply with tool calls
        └──────────▶ ANSWER_TOOLS

``stop()`` ends the turn at the next boundary (``stopped``); ``stop_sync()``, cancellation,
a model error or a listener error end it at once, and ``repair`` answers every tool call left
unanswered so the history is always a valid next request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import BadUsage
from .events import (
    AfterModelInvocationEvent,
    AfterToolCallEvent,
    AiMessageEvent,
    BeforeToolCallEvent,
    ModelChunkEvent,
    ModelInvocationEvent,
    StepEvent,
    ToolCallConfig,
    ToolCallEvent,
)
from .schemas import ArgumentsRejected
from .state import Outcome, PendingCall
from .tools import Tool, serialize_result

if TYPE_CHECKING:
    from .agent import Agent

CANCELLED = "Cancelled: this tool call did not run because the run was stopped."


async def run(agent: Agent, budget: int) -> Outcome:
    """Drive one turn of ``agent`` with at most ``budget`` model calls."""
    calls_made = 0
    while True:
        # A stop() asked for while answering wins over a pause: the turn ends "stopped",
        # idle, and settling answers the calls still pending with a cancelled result.
        if unanswered_calls(agent):
            if await answer_tools(agent) and not agent._stop_requested:
                return "paused"
        if agent._stop_requested:
            return "stopped"
        if calls_made >= budget:
            return "step_limit"
        step = agent._step_count + 1
        await emit(agent, "before_step", StepEvent(agent.context, step))
        message = await call_model(agent)
        if message is None:
            return "stopped"
        agent._step_count += 1
        calls_made += 1
        if not message.get("tool_calls"):
            await emit(agent, "after_step", StepEvent(agent.context, step))
            return "stopped" if agent._stop_requested else "finished"
        paused = await answer_tools(agent)
        await emit(agent, "after_step", StepEvent(agent.context, step))
        if paused and not agent._stop_requested:
            return "paused"


async def emit(agent: Agent, name: str, event: Any) -> Any:
    if agent._listeners.has(name):
        return await agent._listeners.emit(name, event)
    return event


async def call_model(agent: Agent) -> dict[str, Any] | None:
    """Build the request, call the model, store and announce the assistant message."""
    config: dict[str, Any] = {"model": agent.fragola.model, **agent.options.model_settings}
    config.update(agent._turn_settings)
    if agent._listeners.has("before_model_invocation"):
        event = await emit(agent, "before_model_invocation",
                           ModelInvocationEvent(agent.context, dict(config)))
        config = event.config
        if not isinstance(config, Mapping):
            raise BadUsage(
                "a before_model_invocation listener must return the config dict (or None "
                f"to keep it), not a {type(config).__name__}"
            )
    if agent._stop_requested:
        return None  # a listener stopped the run before the request went out
    request = dict(config)
    request["messages"] = agent._request_messages()
    tools = agent.options.tools
    if tools:
        request["tools"] = [t.definition for t in tools]
    on_chunk = _chunk_forwarder(agent) if agent._listeners.has("model_chunk") else None
    message = await agent.fragola._model.complete(request, on_chunk)
    if agent._listeners.has("ai_message"):
        message = (await emit(agent, "ai_message", AiMessageEvent(agent.context, message))).message
    agent._append(message, "ai_message")
    await emit(agent, "after_model_invocation",
               AfterModelInvocationEvent(agent.context, message, config))
    return message


def _chunk_forwarder(agent: Agent) -> Any:
    async def forward(chunk: Any, content: str, partial: dict[str, Any]) -> None:
        await agent._listeners.emit(
            "model_chunk", ModelChunkEvent(agent.context, chunk, content, partial)
        )

    return forward


def last_tool_calls(agent: Agent) -> tuple[list[dict[str, Any]], set[str]]:
    """The tool calls of the last assistant message, and the ids already answered."""
    history = agent._history
    answered: set[str] = set()
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        role = message.get("role")
        if role == "tool":
            answered.add(message.get("tool_call_id", ""))
            continue
        if role == "assistant":
            return list(message.get("tool_calls") or ()), answered
        return [], answered
    return [], answered


def unanswered_calls(agent: Agent) -> list[dict[str, Any]]:
    calls, answered = last_tool_calls(agent)
    return [c for c in calls if c.get("id") not in answered]


async def answer_tools(agent: Agent) -> bool:
    """Answer each unanswered call of the last assistant message, in order.

    Returns True when at least one call waits for a person or an outside result.
    """
    for call in unanswered_calls(agent):
        call_id = call["id"]
        if agent._stop_requested:
            agent._answer(call_id, CANCELLED, "cancelled")
            agent._pending.pop(call_id, None)
            continue
        pending = agent._pending.get(call_id)
        if pending is not None:
            if pending.decision is None:
                continue
            await _carry_out(agent, pending)
            continue
        await _first_look(agent, call)
    return any(p.decision is None for p in agent._pending.values())


async def _first_look(agent: Agent, call: dict[str, Any]) -> None:
    """A call seen for the first time: check it, then run it or pause on it."""
    function = call.get("function") or {}
    name = function.get("name", "")
    call_id = call["id"]
    tool = agent.tool_named(name)
    if tool is None:
        known = ", ".join(t.name for t in agent.options.tools) or "none"
        agent._answer(call_id, f"Error: there is no tool named {name!r}. Tools: {known}.")
        return
    arguments, problem = parse_arguments(function.get("arguments"))
    if problem is not None:
        agent._answer(call_id, f"Error: the arguments for {name} {problem}")
        return
    try:
        params = tool.parse_arguments(arguments)
    except ArgumentsRejected as exc:
        agent._answer(call_id, f"Error: invalid arguments for {name}:\n{exc}\nFix them and retry.")
        return
    try:
        needs_person = tool.needs_approval(params, agent.context)
    except Exception as exc:
        agent._answer(call_id, _failure(f"the approval rule of {name!r}", exc))
        return
    if needs_person:
        agent._add_pending(PendingCall(call_id, name, params, arguments, "approval"))
        return
    await _execute(agent, tool, call_id, params, arguments)


async def _carry_out(agent: Agent, pending: PendingCall) -> None:
    """Act on a person's decision for a paused call."""
    decision = pending.decision
    assert decision is not None
    del agent._pending[pending.id]
    if decision.kind == "reject":
        reason = f" Reason: {decision.text}" if decision.text else ""
        agent._answer(pending.id, f"The user rejected this call to {pending.name}.{reason}")
        return
    if decision.kind == "inject":
        await _finish(agent, pending.name, pending.id, pending.params, decision.text)
        return
    tool = agent.tool_named(pending.name)
    if tool is None:
        agent._answer(pending.id, f"Error: the tool {pending.name!r} was removed before it ran.")
        return
    if decision.params is None:
        await _execute(agent, tool, pending.id, pending.params, pending.arguments)
        return
    # The model will read this result against the arguments it sent: say they were changed,
    # so the history stays an exact record of what ran.
    edited = serialize_result(decision.params)
    note = f"(The user edited the arguments before this call ran: {edited})"
    await _execute(agent, tool, pending.id, decision.params, pending.arguments, note)


async def _execute(
    agent: Agent,
    tool: Tool,
    call_id: str,
    params: Any,
    arguments: dict[str, Any],
    note: str | None = None,
) -> None:
    config = ToolCallConfig(tool=tool, params=params, id=call_id, arguments=arguments)
    if agent._listeners.has("before_tool_call"):
        event = await emit(agent, "before_tool_call", BeforeToolCallEvent(agent.context, config))
        config = event.config
    if config.inject_response is not None:
        result: Any = config.inject_response
    elif tool.is_dynamic:
        agent._add_pending(PendingCall(call_id, tool.name, config.params, arguments, "dynamic"))
        return
    else:
        try:
            result = await tool.invoke(config.params, agent.context)
        except Exception as exc:
            result = _failure(f"the tool {tool.name!r}", exc)
    await _finish(agent, tool.name, call_id, config.params, result, note)


async def _finish(
    agent: Agent, name: str, call_id: str, params: Any, result: Any, note: str | None = None
) -> None:
    if agent._listeners.has("tool_call"):
        event = await emit(agent, "tool_call", ToolCallEvent(agent.context, name, params,
                                                             result, call_id))
        result = event.result
    content = serialize_result(result)
    message = agent._answer(call_id, f"{note}\n{content}" if note else content)
    await emit(agent, "after_tool_call",
               AfterToolCallEvent(agent.context, name, params, result, call_id, message))


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """The model's arguments string as a dict, or a message saying what is wrong with it."""
    if raw is None or raw == "":
        return {}, None
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        return {}, f"are not valid JSON ({exc.msg} at position {exc.pos}): {raw[:200]!r}"
    if not isinstance(value, dict):
        return {}, f"must be a JSON object, got {type(value).__name__}: {raw[:200]!r}"
    return value, None


def _failure(what: str, exc: BaseException) -> str:
    return f"Error: {what} raised {type(exc).__name__}: {exc}"
