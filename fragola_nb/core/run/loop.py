"""The run loop, a visible state machine.

One turn (a ``user_message`` or ``step`` call) moves through these states::

    ANSWER_TOOLS ──(a call needs a person)──────────────▶ paused      (status "waiting")
        │  every call of the last assistant message answered
        ▼
    budget left? ──no──────────────────────────────────▶ step_limit  (status "idle")
        │ yes
        ▼
    money/tokens/time left? ──no───────────────────────▶ budget      (status "idle")
        │ yes  (fragola_nb.core.limits: every Budget in force)
        ▼
    CALL_MODEL ──(reply without tool calls)────────────▶ finished    (status "idle")
        │  reply with tool calls
        └──────────▶ ANSWER_TOOLS

Money, tokens and time are asked again just before each try of the request goes out, after
its waits (a rate limit's turn, a retry's backoff): spent meanwhile, nothing is sent and the
turn ends ``budget`` too (``limits.check_send``).

``stop()`` ends the turn at the next boundary (``stopped``); ``stop_sync()``, cancellation,
a model error or a listener error end it at once, and ``repair`` answers every tool call left
unanswered so the history is always a valid next request.
"""

from __future__ import annotations

import asyncio
import collections
import json
import time
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import TurnRefused, exception_text
from fragola_nb.base.surrogates import mended
from fragola_nb.core import limits, probes
from fragola_nb.core.events import (
    AfterModelInvocationEvent,
    AfterToolCallEvent,
    AiMessageEvent,
    BeforeToolCallEvent,
    ModelChunkEvent,
    ModelInvocationEvent,
    StepEvent,
    ThrottledEvent,
    ToolCallConfig,
    ToolCallEvent,
)
from fragola_nb.core.jsonshapes import NOT_RUN, RECEIVED
from fragola_nb.core.schemas import ArgumentsRejected
from fragola_nb.core.state import Outcome, PendingCall
from fragola_nb.core.timing import ToolTiming
from fragola_nb.core.tools import Tool, serialize_result
from fragola_nb.core.usage import CallUsage, Usage
from fragola_nb.models.client.reported import Exchange
from fragola_nb.models.recording.cache import HITS_ONLY, NotCached

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from fragola_nb.core.conversation import RunDeps
    from fragola_nb.core.run.driver import Run

REJECTED = "The user rejected this call to "
"""How the answer to a rejected call begins (then the tool's name, "." and the reason)."""
EDITED = "(The user edited the arguments before this call ran: "
"""How the note on a call run with edited arguments begins (then the arguments and ")")."""
CANCELLED = "Cancelled: this tool call did not run because the run was stopped."
STOP_PASSES = 4
"""The most passes of the event loop a tool call waits for a stop already under way (see
``_stopped_before_start``: one while nothing else is due): twice what the longest known path
(Jupyter's interrupt) takes."""
INTERRUPTED = ("Cancelled: the run was stopped while this tool call ran; it did not finish, "
               "and what it did is unknown.")


async def run(run: Run) -> Outcome:
    """Drive one turn of ``agent`` with at most ``run.budget`` model calls."""
    conv, deps = run.conversation, run.deps
    calls_made = 0
    look = True  # calls of the last assistant message may be unanswered (a turn resumed)
    while True:
        # A stop() asked for while answering wins over a pause: the turn ends "stopped",
        # idle, and settling answers the calls still pending with a cancelled result.
        if look and conv.unanswered_calls():
            if await answer_tools(run) and not run.stop_requested:
                return "paused"
        if run.stop_requested:
            return "stopped"
        if calls_made >= run.budget:
            return "step_limit"
        spent = limits.spent_reason(deps.fragola, deps.model)
        if spent is not None and not deps.fragola.answers_from_cache:
            conv.spent = spent
            return "budget"
        step = conv.step_count + 1
        if deps.listeners.has("before_step"):  # no event built when nobody listens
            await emit(deps, "before_step", StepEvent(deps.context, step))
        # Spent, on Fragola.cached: a call its file answers costs nothing and is made; one it
        # would send is not (NotCached), and the turn ends "budget" as above.
        hits_only = HITS_ONLY.set(spent is not None)
        try:
            message = await call_model(run)
        except NotCached:  # spent before the call, or while it waited its turn
            conv.spent = spent or limits.spent_reason(deps.fragola, deps.model)
            return "budget"
        except limits.BudgetSpent as spent_meanwhile:  # while the request waited its turn
            conv.spent = spent_meanwhile.reason
            return "budget"
        finally:
            HITS_ONLY.reset(hits_only)
        if message is None:
            return "stopped"
        conv.step_count += 1
        calls_made += 1
        if not message.get("tool_calls"):
            if deps.listeners.has("after_step"):
                await emit(deps, "after_step", StepEvent(deps.context, step))
            return "stopped" if run.stop_requested else "finished"
        answer = run.shape.answer_call(deps, message) if run.shape is not None else None
        if answer is not None:
            # agent.json's answer tool: the arguments are the answer. Every call of the
            # message is answered here, in order; the others did not run.
            for call in message["tool_calls"]:
                if call["id"] == answer["id"]:
                    conv.answer(call["id"], RECEIVED)
                else:
                    conv.answer(call["id"], NOT_RUN, "cancelled")
            if deps.listeners.has("after_step"):
                await emit(deps, "after_step", StepEvent(deps.context, step))
            return "finished"
        paused = await answer_tools(run)
        if deps.listeners.has("after_step"):
            await emit(deps, "after_step", StepEvent(deps.context, step))
        if paused and not run.stop_requested:
            return "paused"
        # With nothing pending, every call is answered; else one may have been decided
        # while another ran (a person approving it meanwhile), or a stop cancels them.
        look = bool(conv.pending)


async def emit(deps: RunDeps, name: str, event: Any) -> Any:
    if deps.listeners.has(name):
        return await deps.listeners.emit(name, event)
    return event


async def call_model(run: Run) -> dict[str, Any] | None:
    """Build the request, call the model, count its usage, store and announce the assistant
    message."""
    conv, deps = run.conversation, run.deps
    config: dict[str, Any] = {"model": deps.fragola.model, **deps.options.model_settings}
    config.update(run.settings)
    if deps.listeners.has("before_model_invocation"):
        event = await emit(deps, "before_model_invocation",
                           ModelInvocationEvent(deps.context, dict(config)))
        config = event.config  # checked by emit: a mapping
    if run.stop_requested:
        return None  # a listener stopped the run before the request went out
    request = dict(config)
    request["messages"] = conv.request_messages()
    tools = deps.options.tools
    if tools:
        request["tools"] = [t.definition for t in tools]
    if run.shape is not None:
        request = run.shape.dress(deps, request)
    on_chunk = _chunk_forwarder(deps) if deps.listeners.has("model_chunk") else None
    exchange = Exchange()
    seen = probes.ModelCall(request, exchange)
    clock = _Clock()
    model = str(request.get("model") or "")
    try:
        with probes.model_call(deps, seen):
            # Checked as each try goes out: the model the request names (a listener may have
            # switched it) priced under a usd budget, and no budget spent while it waited
            # (once spent, on Fragola.cached, only hits are answered: the cache sends nothing).
            reply = seen.reply = await deps.fragola._model.reply(
                request, on_chunk, exchange, _throttle_teller(deps),
                lambda: _check_send(deps, model))
    except BaseException:
        # A stream cut or stopped half-way, or an answer that cannot be stored, still cost
        # tokens once the server began to answer: a call, with its usage if it said any
        # (else unknown, and the cost None). An HTTP error or no connection cost nothing.
        if exchange.answered:
            cut = Usage((_call_usage(request, exchange.usage, clock, exchange,
                                    deps.fragola.offline),),
                        deps.fragola.prices)
            conv.usage += cut
            limits.count(deps.fragola, cut)
        raise
    message = reply.message
    # Counted at once: the tokens are spent whatever the listeners below do.
    usage = Usage((_call_usage(request, reply.usage, clock, exchange,
                                       deps.fragola.offline),), deps.fragola.prices)
    conv.usage += usage
    limits.count(deps.fragola, usage)
    if deps.listeners.has("ai_message"):
        try:
            event = await emit(deps, "ai_message", AiMessageEvent(deps.context, message))
        except TurnRefused as refused:  # a guardrail: the reply is not stored, nothing runs
            conv.keep_refused(refused, "assistant")
            raise
        message = event.message
    message = conv.append(message, "ai_message")  # as stored: the calls run from it
    if deps.listeners.has("after_model_invocation"):
        await emit(deps, "after_model_invocation",
                   AfterModelInvocationEvent(deps.context, message, config, usage))
    return message


def _check_send(deps: RunDeps, model: str) -> None:
    """``limits.check_send`` as a try goes out; on ``Fragola.cached``, a budget spent (before
    the call or while it waited its turn) leaves only hits: the cache answers them at no
    cost and raises ``NotCached`` for a miss, nothing sent."""
    if HITS_ONLY.get():
        return
    try:
        limits.check_send(deps.fragola, model)
    except limits.BudgetSpent:
        if not deps.fragola.answers_from_cache:
            raise
        HITS_ONLY.set(True)  # undone by run()'s reset of the call's own setting


class _Clock:
    """When something started: the wall-clock time a timeline is drawn from, and the
    monotonic one its duration is measured with (the wall clock may jump)."""

    def __init__(self) -> None:
        self.started, self.counter = time.time(), time.perf_counter()

    def seconds(self, until: float | None = None) -> float:
        return max(0.0, (time.perf_counter() if until is None else until) - self.counter)


def _call_usage(request: dict[str, Any], reported: dict[str, int] | None, clock: _Clock,
                exchange: Exchange, offline: bool = False) -> CallUsage:
    """The call's usage, under the model it asked for (the name prices are given for), and
    its timing (``fragola_nb.core.timing``): an answer that came in one piece (not streamed) has
    its time to first token equal to its duration. ``offline``: the scripted model or a replay
    answered (nothing paid)."""
    model = str(request.get("model") or "")
    seconds = clock.seconds()
    ttft = None if exchange.first_at is None else min(seconds, clock.seconds(exchange.first_at))
    if exchange.pieces == 1:
        ttft = seconds
    if reported is None:
        return CallUsage(model, reported=False, started=clock.started, ttft=ttft,
                         seconds=seconds, cached=exchange.cached, offline=offline)
    return CallUsage(model, reported["prompt_tokens"], reported["completion_tokens"],
                     reported["total_tokens"], reported["cached_tokens"], True, clock.started,
                     ttft, seconds, exchange.cached, offline)


def _throttle_teller(deps: RunDeps) -> Callable[[float], Awaitable[None]]:
    async def tell(seconds: float) -> None:
        await emit(deps, "throttled", ThrottledEvent(deps.context, seconds))

    return tell


def _chunk_forwarder(deps: RunDeps) -> Any:
    emit_chunk, context = deps.listeners.emit, deps.context  # bound once: called per chunk

    async def forward(chunk: Callable[[], Any], content: str,
                      partial: Callable[[], dict[str, Any]]) -> None:
        # Half an emoji in a chunk reaches views as U+FFFD, as it is stored (``History``).
        await emit_chunk("model_chunk", ModelChunkEvent(context, chunk, mended(content), partial))

    return forward


async def answer_tools(run: Run) -> bool:
    """Answer each unanswered call of the last assistant message, in order.

    Returns True when at least one call waits for a person or an outside result.
    """
    conv = run.conversation
    for call in conv.unanswered_calls():
        call_id = call["id"]
        if run.stop_requested:
            conv.answer(call_id, CANCELLED, "cancelled")
            conv.pending.pop(call_id, None)
            continue
        pending = conv.pending.get(call_id)
        if pending is not None:
            if pending.decision is None:
                continue
            await _carry_out(run, pending)
            continue
        await _first_look(run, call)
    return bool(conv.pending) and any(p.decision is None for p in conv.pending.values())


async def _first_look(run: Run, call: dict[str, Any]) -> None:
    """A call seen for the first time: check it, then run it or pause on it.

    A call that cannot run (an unknown tool, arguments that are not JSON or fail the schema,
    an approval rule that raised) is answered with what went wrong, so the model can correct
    itself; ``tool_call`` and ``after_tool_call`` hear of it with ``event.error`` set.
    """
    conv, deps = run.conversation, run.deps
    function = call["function"]
    name = function["name"]
    call_id = call["id"]
    arguments, problem = parse_arguments(function["arguments"])
    raw = function["arguments"] if problem is not None else arguments
    tool = deps.tool_named(name)
    if tool is None:
        known = ", ".join(t.name for t in deps.options.tools) or "none"
        error = f"Error: there is no tool named {name!r}. Tools: {known}."
        await _finish(run, name, call_id, raw, error, error=error)
        return
    if problem is not None:
        error = f"Error: the arguments for {name} {problem}"
        await _finish(run, name, call_id, raw, error, error=error, validation=True)
        return
    try:
        params = tool.parse_arguments(arguments)
    except ArgumentsRejected as exc:
        error = f"Error: invalid arguments for {name}:\n{exc}\nFix them and retry."
        await _finish(run, name, call_id, arguments, error, error=error,
                      validation=True)
        return
    try:
        needs_person = tool.needs_approval(params, deps.context)
    except Exception as exc:
        error = _failure(f"the approval rule of {name!r}", exc)
        await _finish(run, name, call_id, params, error, error=error)
        return
    if needs_person:
        conv.add_pending(PendingCall(call_id, name, params, arguments, "approval"))
        return
    await _execute(run, tool, call_id, params, arguments)


async def _carry_out(run: Run, pending: PendingCall) -> None:
    """Act on a person's decision for a paused call."""
    conv, deps = run.conversation, run.deps
    decision = pending.decision
    assert decision is not None
    del conv.pending[pending.id]
    if decision.kind == "reject":
        reason = f" Reason: {decision.text}" if decision.text else ""
        text = f"{REJECTED}{pending.name}.{reason}"
        await _finish(run, pending.name, pending.id, pending.params, text, error=text)
        return
    if decision.kind == "inject":
        await _finish(run, pending.name, pending.id, pending.params, decision.text)
        return
    tool = deps.tool_named(pending.name)
    if tool is None:
        error = f"Error: the tool {pending.name!r} was removed before it ran."
        await _finish(run, pending.name, pending.id, pending.params, error, error=error)
        return
    if decision.params is None:
        await _execute(run, tool, pending.id, pending.params, pending.arguments)
        return
    # The model will read this result against the arguments it sent: say they were changed,
    # so the history stays an exact record of what ran.
    note = f"{EDITED}{_text(decision.params)})"
    await _execute(run, tool, pending.id, decision.params, pending.arguments, note)


async def _execute(
    run: Run,
    tool: Tool,
    call_id: str,
    params: Any,
    arguments: dict[str, Any],
    note: str | None = None,
) -> None:
    conv, deps = run.conversation, run.deps
    config = ToolCallConfig(tool=tool, params=params, id=call_id, arguments=arguments)
    if deps.listeners.has("before_tool_call"):
        event = await emit(deps, "before_tool_call", BeforeToolCallEvent(deps.context, config))
        config = event.config  # checked by emit: a ToolCallConfig
    error = None
    if config.inject_response is not None:
        result: Any = config.inject_response
    elif tool.is_dynamic:
        conv.add_pending(PendingCall(call_id, tool.name, config.params, arguments, "dynamic"))
        return
    else:
        if await _stopped_before_start(run):
            conv.answer(call_id, CANCELLED, "cancelled")
            return
        run.running_call = call_id  # from here on, a stop means "interrupted", not "did not run"
        clock = _Clock()
        try:
            with probes.tool_run(deps, seen := probes.ToolRun(tool.name, call_id, arguments)):
                result = seen.result = await tool.invoke(config.params, deps.context)
        except Exception as exc:
            result = error = _failure(f"the tool {tool.name!r}", exc)
        finally:  # timed however it ended (an interrupted call ran too, for that long)
            conv.usage += Usage(tools=(ToolTiming(tool.name, call_id, clock.started,
                                                    clock.seconds()),))
    await _finish(run, tool.name, call_id, config.params, result, note=note, error=error)


async def _stopped_before_start(run: Run) -> bool:
    """Whether the run was stopped before this tool starts; the last moment to not run it.

    From the model's reply to here the turn may never pause (sync listeners, a sync tool
    next): a stop that reaches it through the event loop (Jupyter's interrupt and asyncio's
    Ctrl-C cancel the cell's task with a callback, ``stop_sync()`` from another thread or
    from an async observer cancels the turn's task) would only land at the tool's first
    await, or after a sync tool has done its work: a transfer made after the person pressed
    Stop. A few passes of the loop first let what is already under way act: a cancellation
    is raised here, and a ``stop()`` is seen in ``stop_requested``. A pass runs the callbacks
    scheduled before it, and a stop may take a few hops: ipykernel's SIGINT handler schedules
    a callback that completes a future whose done-callback (the next pass) cancels the cell;
    ``stop_sync()`` from a thread, or an observer's task, is one.

    A hop is a callback due now, in the loop's queue of ready callbacks before the next pass
    (a thread's ``call_soon_threadsafe``, a Python signal handler's callback, a done
    future's callbacks, a task's next step); a signal or a message heard through the
    selector becomes one in the first pass, whose poll of the selector takes no time. So
    once a pass leaves nothing else due, no stop is on its way and the tool starts: one pass
    in the usual case, at most ``STOP_PASSES`` (all of them on a loop whose queue is not
    known, such as uvloop's)."""
    # The callbacks due now: asyncio's own loops keep them in ``_ready`` and have no public
    # way to ask; on another loop, every pass is taken.
    ready = getattr(run.loop, "_ready", None)
    if not isinstance(ready, collections.deque):
        ready = None
    for _ in range(STOP_PASSES):
        await asyncio.sleep(0)
        if run.stop_requested:
            return True
        if ready is not None and not ready:
            return False
    return False


async def _finish(
    run: Run, name: str, call_id: str, params: Any, result: Any, *,
    note: str | None = None, error: str | None = None, validation: bool = False,
) -> None:
    """Store the answer to a call and tell ``tool_call`` (which may change the result) and
    ``after_tool_call``. A call that ran keeps its result in the history whatever happens to
    the ``tool_call`` listeners (one raises, the run is cancelled meanwhile): then the result
    as it was before them is stored.

    ``validation``: the arguments were refused before the handler ran (said here, where it
    is known, rather than read back from the error's text). ``after_tool_call`` hears the
    outcome the ``tool_call`` listeners left (a payload may turn a success into a failure
    or the reverse), so its ``payload`` says what the model reads."""
    deps = run.deps
    if deps.listeners.has("tool_call"):
        event = ToolCallEvent(deps.context, name, params, result, call_id, error,
                              is_validation_error=validation)
        try:
            event = await emit(deps, "tool_call", event)
        except BaseException:
            _store(run, name, call_id, result, note)
            raise
        result, error, validation = event.result, event.error, event.is_validation_error
    message = _store(run, name, call_id, result, note)
    if deps.listeners.has("after_tool_call"):
        await emit(deps, "after_tool_call",
                   AfterToolCallEvent(deps.context, name, params, result, call_id, message,
                                      error, is_validation_error=validation))


def _store(run: Run, name: str, call_id: str, result: Any, note: str | None
           ) -> dict[str, Any]:
    conv = run.conversation
    try:
        content = serialize_result(result)
    except Exception as exc:  # a circular value, keys that are not strings, too deep...
        content = (f"Error: the result of {name} could not be turned into JSON text "
                   f"({type(exc).__name__}: {exc})")
    run.running_call = None
    return conv.answer(call_id, f"{note}\n{content}" if note else content)


def _text(value: Any) -> str:
    try:
        return serialize_result(value)
    except Exception:
        return repr(value)[:500]


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """The model's arguments string as a dict, or a message saying what is wrong with it."""
    if raw is None or raw == "":
        return {}, None
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        return {}, f"are not valid JSON ({exc.msg} at position {exc.pos}): {raw[:200]!r}"
    except (ValueError, RecursionError) as exc:
        # A number of more than 4,300 digits, or nesting deeper than Python's recursion limit.
        return {}, f"cannot be read ({type(exc).__name__}: {str(exc)[:200]}): {raw[:200]!r}"
    if not isinstance(value, dict):
        return {}, f"must be a JSON object, got {type(value).__name__}: {str(raw)[:200]!r}"
    return value, None


def _failure(what: str, exc: BaseException) -> str:
    return f"Error: {what} raised {exception_text(exc)}"
