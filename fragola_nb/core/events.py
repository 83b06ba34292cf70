"""Agent events: one event object per call, listeners in registration order.

Mutating events carry a value a listener may change: it returns the value (changed or
replaced) and returning ``None`` keeps it as it was. Observers return nothing.

==========================  ========================================  =================
event                       attributes (all also have ``context``)     listener returns
==========================  ========================================  =================
``user_message``            ``message``                                ``message``
``before_step``             ``step``                                   -
``before_model_invocation`` ``config`` (request settings, ``model``)   ``config``
``model_chunk``             ``chunk``, ``content``, ``message``        -
``ai_message``              ``message``                                ``message``
``after_model_invocation``  ``message``, ``config``, ``usage``         -
``before_tool_call``        ``config`` (``tool``, ``params``, ...)     ``config``
``tool_call``               ``name``, ``params``, ``result``, ``id``   ``result``
                            (``error``, ``payload``)                   or a payload
``after_tool_call``         ``name``, ``params``, ``result``, ...      -
``after_step``              ``step``                                   -
``after_state_update``      ``reason``, ``message``                    -
``status_change``           ``status``, ``previous``                   -
``throttled``               ``seconds`` (the wait before a retry)      -
==========================  ========================================  =================
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from fragola_nb.base.checks import assistant_problem, user_problem
from fragola_nb.base.errors import BadUsage, InvalidListenerResult, ListenerError, TurnRefused
from fragola_nb.core.payloads import ToolCallPayload, payload_of, unpack

if TYPE_CHECKING:
    from fragola_nb.core.context import AgentContext
    from fragola_nb.core.tools import Tool
    from fragola_nb.core.usage import Usage

__all__ = [
    "EVENT_NAMES",
    "Listeners",
    "Subscription",
    "ToolCallConfig",
    "is_transient",
    "transient",
]


@dataclass
class Event:
    context: AgentContext


@dataclass
class UserMessageEvent(Event):
    message: dict[str, Any]


@dataclass
class StepEvent(Event):
    step: int


@dataclass
class ModelInvocationEvent(Event):
    config: dict[str, Any]


@dataclass(init=False)
class ModelChunkEvent(Event):
    """``chunk`` and ``message`` are built on first read (then kept): a listener that reads
    neither costs no model object and no message per chunk."""

    content: str
    """The text this chunk adds ("" when it adds none)."""

    def __init__(self, context: AgentContext, chunk: Callable[[], Any], content: str,
                 message: Callable[[], dict[str, Any]]) -> None:
        self.context = context
        self.content = content
        self._chunk: Any = chunk
        self._message: Any = message
        self._built = 0  # bit 1: chunk built, bit 2: message built

    @property
    def chunk(self) -> Any:
        """The ``openai`` ``ChatCompletionChunk`` as received."""
        if not self._built & 1:
            self._chunk, self._built = self._chunk(), self._built | 1
        return self._chunk

    @property
    def message(self) -> dict[str, Any]:
        """The assistant message assembled so far (a fresh dict each chunk)."""
        if not self._built & 2:
            self._message, self._built = self._message(), self._built | 2
        return self._message  # type: ignore[no-any-return]


@dataclass
class AiMessageEvent(Event):
    message: dict[str, Any]


@dataclass
class AfterModelInvocationEvent(Event):
    message: dict[str, Any]
    config: dict[str, Any]
    usage: Usage | None = None
    """This call's usage (one call: ``usage.total_tokens``, ``usage.cost``)."""


@dataclass
class ToolCallConfig:
    """What ``before_tool_call`` may change: set ``inject_response`` to skip the handler."""

    tool: Tool
    params: Any
    id: str
    arguments: dict[str, Any]
    inject_response: Any = None


@dataclass
class BeforeToolCallEvent(Event):
    config: ToolCallConfig


@dataclass
class ToolCallEvent(Event):
    name: str
    params: Any
    """What the handler received; for a call that could not run, the arguments as sent (a
    dict, or the raw string when it is not a JSON object)."""
    result: Any
    id: str
    error: str | None = None
    """None when the handler ran (or a result was injected); otherwise the text that answers
    the call instead (unknown tool, invalid arguments, the handler raised, rejected)."""
    is_validation_error: bool = False
    """True when the run loop refused the model's arguments before the handler ran (not
    JSON, not an object, or rejected by the tool's schema): said where it refused them,
    never read back from ``error``'s text. Only meaningful while ``error`` is set."""

    def __post_init__(self) -> None:
        self._take(self.result, self.error)

    def _take(self, result: Any, error: str | None) -> None:
        if isinstance(result, ToolCallPayload):
            self.is_validation_error = result.is_validation_error and not result.success
        self.result, self.error = unpack(result, error)

    @property
    def payload(self) -> ToolCallPayload:
        """``result`` and ``error`` as upstream's ``ToolCallPayload``; setting it (or
        returning one from the listener) sets them, the outcome included: a listener turns
        a success into a failure, or the reverse, with a payload."""
        return payload_of(self.result, self.error, self.is_validation_error)

    @payload.setter
    def payload(self, payload: ToolCallPayload) -> None:
        self._take(payload, None)


@dataclass
class AfterToolCallEvent(Event):
    name: str
    params: Any
    result: Any
    id: str
    message: dict[str, Any] = field(default_factory=dict)
    """The tool message stored in the history."""
    error: str | None = None
    """As ``tool_call``'s once its listeners ran: None when the call, as finally answered,
    succeeded."""
    is_validation_error: bool = False
    """As ``tool_call``'s once its listeners ran."""

    def __post_init__(self) -> None:
        if isinstance(self.result, ToolCallPayload):
            self.is_validation_error = (self.result.is_validation_error
                                        and not self.result.success)
        self.result, self.error = unpack(self.result, self.error)

    @property
    def payload(self) -> ToolCallPayload:
        """``result`` and ``error`` as upstream's ``ToolCallPayload``: the outcome the
        ``tool_call`` listeners left, which is what the model reads."""
        return payload_of(self.result, self.error, self.is_validation_error)


@dataclass
class StateUpdateEvent(Event):
    reason: str
    """One of ``user_message``, ``ai_message``, ``tool_result``, ``cancelled``, ``reset``,
    ``pending`` (a call paused or decided), ``fork`` (a fork was made of this agent: it is
    ``agent.forks[-1]``), ``drop`` (a fork was dropped), ``experiment`` (an
    ``agent.compare``/``agent.batch`` on its forks began or ended), ``edit`` (``agent.edit``
    replaced a message of this agent's history: ``message`` is the new one; the length is
    unchanged, so a view that reads only the messages after the ones it has must read the
    history again)."""
    message: dict[str, Any] | None = None


@dataclass
class StatusChangeEvent(Event):
    status: str
    previous: str


@dataclass
class ThrottledEvent(Event):
    """The model API answered 429 (too many requests): the request is sent again in
    ``seconds`` (its ``Retry-After``, or a backoff). Not a failure until the retries are
    spent (``Fragola(max_retries=...)``)."""

    seconds: float


def _config_problem(config: Any) -> str | None:
    if isinstance(config, Mapping):
        return None
    return f"the request settings must be a dict, not a {type(config).__name__}"


def _tool_config_problem(config: Any) -> str | None:
    if isinstance(config, ToolCallConfig):
        return None
    return (f"event.config must stay a ToolCallConfig, not a {type(config).__name__} (set "
            "event.config.params or .inject_response instead)")


@dataclass(frozen=True)
class Mutable:
    """What a mutating event lets a listener change: the attribute, how to describe it, and
    the check its value must pass after each listener (returned or changed in place)."""

    attr: str
    what: str
    problem: Callable[[Any], str | None] | None = None
    settle: Callable[[Any], None] | None = None
    """Called with the event after each listener: ``tool_call`` reads a returned payload."""


def _settle_payload(event: Any) -> None:
    """A ``tool_call`` listener returned (or left) a ``ToolCallPayload``: read it."""
    if isinstance(event.result, ToolCallPayload):
        event.payload = event.result


# name -> (event class, what a listener may change, or None for an observer)
EVENTS: dict[str, tuple[type[Event], Mutable | None]] = {
    "user_message": (UserMessageEvent, Mutable("message", "the message dict", user_problem)),
    "before_step": (StepEvent, None),
    "before_model_invocation": (
        ModelInvocationEvent, Mutable("config", "the config dict", _config_problem)),
    "model_chunk": (ModelChunkEvent, None),
    "ai_message": (AiMessageEvent, Mutable("message", "the message dict", assistant_problem)),
    "after_model_invocation": (AfterModelInvocationEvent, None),
    "before_tool_call": (
        BeforeToolCallEvent, Mutable("config", "event.config", _tool_config_problem)),
    "tool_call": (ToolCallEvent, Mutable("result", "the result (or a ToolCallPayload)",
                                         settle=_settle_payload)),
    "after_tool_call": (AfterToolCallEvent, None),
    "after_step": (StepEvent, None),
    "after_state_update": (StateUpdateEvent, None),
    "status_change": (StatusChangeEvent, None),
    "throttled": (ThrottledEvent, None),
}
EVENT_NAMES = tuple(EVENTS)
REFUSABLE = frozenset({"user_message", "ai_message"})
"""Events whose listener may raise ``TurnRefused`` to end the turn (guardrails:
``fragola_nb.presets.guardrails``)."""

Listener = Callable[[Any], Any]
L = TypeVar("L", bound=Callable[..., Any])


def transient(listener: L) -> L:
    """Mark ``listener`` as part of a live view (a notebook panel), not of the agent.

    A transient listener is not copied to forks and not saved in sessions. On a method, mark
    the function in the class body; bound methods read the mark through to it.
    """
    target: Any = getattr(listener, "__func__", listener)
    target.__fragola_transient__ = True
    return listener


def is_transient(listener: Listener) -> bool:
    return bool(getattr(listener, "__fragola_transient__", False))


class Subscription:
    """Returned by ``agent.on_*``: call it (or ``.unsubscribe()``) to remove the listener."""

    __slots__ = ("_listeners", "event", "listener")

    def __init__(self, listeners: Listeners, event: str, listener: Listener) -> None:
        self._listeners = listeners
        self.event = event
        self.listener = listener

    def unsubscribe(self) -> None:
        self._listeners.remove(self.event, self.listener)

    __call__ = unsubscribe

    def __repr__(self) -> str:
        name = getattr(self.listener, "__qualname__", repr(self.listener))
        return f"Subscription(on_{self.event}, {name})"


class Listeners:
    """The listeners of one agent, by event name. A fork gets a copy."""

    __slots__ = ("_by_event",)

    def __init__(self) -> None:
        self._by_event: dict[str, list[Listener]] = {name: [] for name in EVENTS}

    def add(self, event: str, listener: Listener) -> Subscription:
        if not callable(listener):
            raise BadUsage(f"on_{event} takes a function, got {type(listener).__name__}")
        self._by_event[event].append(listener)
        return Subscription(self, event, listener)

    def remove(self, event: str, listener: Listener) -> None:
        listeners = self._by_event[event]
        if listener in listeners:
            listeners.remove(listener)

    def has(self, event: str) -> bool:
        return bool(self._by_event[event])

    def of(self, event: str) -> list[Listener]:
        """The listeners of ``event`` now, in the order they run (a copy)."""
        return list(self._by_event[event])

    def copy(self) -> Listeners:
        other = Listeners()
        other._by_event = {
            name: [fn for fn in fns if not is_transient(fn)] for name, fns in self._by_event.items()
        }
        return other

    async def emit(self, name: str, event: Event) -> Event:
        """Call every listener in order; a mutator's return value replaces the value, which
        is checked after each listener, so a slip is named before anything uses it."""
        mutable = EVENTS[name][1]
        for listener in list(self._by_event[name]):
            try:
                result = listener(event)
                if inspect.isawaitable(result):
                    result = await result
            except Exception as exc:
                if isinstance(exc, TurnRefused) and name in REFUSABLE:
                    raise  # a guardrail ended the turn: the caller gets the refusal itself
                raise _listener_error(name, listener, exc) from exc
            if mutable is None:
                continue
            if result is not None:
                setattr(event, mutable.attr, result)
            if mutable.settle is not None:
                mutable.settle(event)
            problem = mutable.problem and mutable.problem(getattr(event, mutable.attr))
            if problem:
                raise _result_error(name, listener, mutable, problem, returned=result is not None)
        return event

    def emit_nowait(self, name: str, event: Event) -> list[asyncio.Task[Any]]:
        """For observers fired from synchronous code.

        Sync listeners run now. An async listener becomes a task on the running loop (or runs
        to completion when no loop runs); the tasks are returned so a turn can wait for them
        and report a listener that raised as a ``ListenerError``.
        """
        tasks: list[asyncio.Task[Any]] = []
        for listener in list(self._by_event[name]):
            try:
                result = listener(event)
            except Exception as exc:
                raise _listener_error(name, listener, exc) from exc
            if inspect.isawaitable(result):
                task = _schedule(name, listener, result)
                if task is not None:
                    tasks.append(task)
        return tasks


def _listener_error(name: str, listener: Listener, exc: Exception) -> ListenerError:
    who = getattr(listener, "__qualname__", repr(listener))
    return ListenerError(
        f"listener {who} of on_{name} raised {type(exc).__name__}: {exc}", event=name
    )


def _result_error(name: str, listener: Listener, mutable: Mutable, problem: str, *,
                  returned: bool) -> InvalidListenerResult:
    who = getattr(listener, "__qualname__", repr(listener))
    how = "returned a value that cannot be used" if returned else "left a value that cannot be used"
    return InvalidListenerResult(
        f"listener {who} of on_{name} {how}: {problem}. A listener of on_{name} must return "
        f"{mutable.what} (changed or replaced), or None to keep it", event=name)


_background: set[asyncio.Task[Any]] = set()
_claimed: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
_log = logging.getLogger("fragola_nb")


def claim(tasks: list[asyncio.Task[Any]]) -> None:
    """Mark observer tasks whose errors a turn will raise, so they are not logged too."""
    _claimed.update(tasks)


def release(tasks: list[asyncio.Task[Any]]) -> None:
    """Give back claimed observer tasks that no turn will await: their errors are logged."""
    for task in tasks:
        _claimed.discard(task)
        if task.done():
            _settled(task)  # it already settled while claimed, so nothing was logged then


def _schedule(name: str, listener: Listener, awaitable: Any) -> asyncio.Task[Any] | None:
    async def run() -> None:
        try:
            await awaitable
        except Exception as exc:
            raise _listener_error(name, listener, exc) from exc

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(run())
        return None
    task = loop.create_task(run())
    _background.add(task)  # keep a reference until done, or the task may be collected
    task.add_done_callback(_settled)
    if inspect.iscoroutine(awaitable):
        # Cancelled before it started (a run stopped at once), the listener's coroutine was
        # never awaited: close it, or Python warns about it when it is collected.
        task.add_done_callback(lambda _: awaitable.close())
    return task


def _settled(task: asyncio.Task[Any]) -> None:
    _background.discard(task)
    if not task.cancelled() and task.exception() is not None and task not in _claimed:
        # Outside a turn nobody awaits this task: say what happened rather than drop it.
        _log.error("%s", task.exception())
