"""An agent's state as one object, and what its runs depend on as another.

``Conversation`` is everything one agent holds that a turn changes: the history, the status
and the last outcome, the pending calls, the step count, the usage, why a budget ended the
last turn, the scoped instructions, the stores, and the call in flight. ``RunDeps`` is what a
turn reads but does not change: the Fragola instance, the options, the listeners, the hooks,
the probes, and the ``AgentContext`` its events and tools are handed.

``Agent`` holds one of each (``agent.conversation``, ``agent.deps``) and delegates to them;
the run loop and the driver (``fragola_nb.core.run``) work on these two objects alone. The
methods below are what those modules used to do by reaching into the agent: store a message
and tell its listeners (``append``, ``answer``), note a pending call (``add_pending``),
change the status with its event (``set_status``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import weakref
from typing import TYPE_CHECKING, Any

from fragola_nb.base.checks import kept_problem, sent
from fragola_nb.base.errors import BadUsage, TurnRefused
from fragola_nb.core.events import Listeners, StateUpdateEvent, StatusChangeEvent
from fragola_nb.core.history import History
from fragola_nb.core.hooks import Hooks
from fragola_nb.core.instructions import Scopes, merged
from fragola_nb.core.state import AgentState, Outcome, PendingCall, Status
from fragola_nb.core.usage import Usage

if TYPE_CHECKING:
    from fragola_nb.core.context import AgentContext, AgentOptions
    from fragola_nb.core.fragola import Fragola
    from fragola_nb.core.probes import Probe
    from fragola_nb.core.run.driver import Run
    from fragola_nb.core.stores import Store
    from fragola_nb.core.tools import Tool

__all__ = ["AgentSnapshot", "Conversation", "RunDeps"]


@dataclasses.dataclass(frozen=True)
class AgentSnapshot:
    """A conversation's state as a value (``agent.snapshot()``): what a session file keeps
    and a Ray worker sends back, put on an agent by ``agent.restore``. Not a copy of the
    history: it shares it (a ``History`` never changes in place)."""

    history: History
    step_count: int
    status: Status
    outcome: Outcome | None
    usage: Usage
    pending: dict[str, PendingCall]
    scopes: Scopes


class RunDeps:
    """What an agent's turns depend on and do not change: ``fragola``, ``options``,
    ``listeners``, ``hooks``, ``probes`` (those watching this agent alone) and ``context``
    (what events and tools are handed)."""

    __slots__ = ("context", "fragola", "hooks", "listeners", "options", "probes")

    def __init__(self, fragola: Fragola, options: AgentOptions, context: AgentContext) -> None:
        self.fragola = fragola
        self.options = options
        self.context = context
        self.listeners = Listeners()
        self.hooks = Hooks()
        self.probes: tuple[Probe, ...] = ()

    @property
    def name(self) -> str:
        return self.options.name

    @property
    def model(self) -> str:
        return str(self.options.model_settings.get("model", self.fragola.model))

    def tool_named(self, name: str) -> Tool | None:
        for item in self.options.tools:
            if item.name == name:
                return item
        return None

    def system_prompt(self, scopes: Scopes) -> str | None:
        return merged(self.options.instructions, scopes)


class Conversation:
    """One agent's state: ``history``, ``status``, ``outcome``, ``pending`` (by call id),
    ``step_count``, ``usage``, ``spent`` (why a budget ended the last turn), ``scopes``,
    ``stores``; ``run`` is the call in flight (``fragola_nb.core.run.driver``), ``lock`` is
    held while the status changes hands, ``home_loop`` is the loop of the last call."""

    __slots__ = ("_sent", "deps", "history", "home_loop", "lock", "outcome", "pending", "run",
                 "scopes", "spent", "status", "step_count", "stores", "usage")

    def __init__(self, deps: RunDeps, history: History, stores: dict[str, Store[Any]]) -> None:
        self.deps = deps
        """Where the listeners told of each change are, and the context they are handed."""
        self.history = history
        self.stores = stores
        self.step_count = 0
        self.status: Status = "idle"
        self.outcome: Outcome | None = None
        self.spent: str | None = None
        self.pending: dict[str, PendingCall] = {}
        self.usage = Usage()
        self.scopes = Scopes()
        self.run: Run | None = None
        self.home_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self.lock = threading.RLock()
        self._sent: tuple[History, int, list[dict[str, Any]]] | None = None
        """The history the last request was made from, its length then, and what it sent of
        it: a ``History`` only grows, so the next request reads only what was added."""

    def state(self) -> AgentState:
        """``agent.state``: a snapshot (``messages`` a new list of the shared dicts)."""
        return AgentState(
            messages=self.history.to_list(),
            step_count=self.step_count,
            status=self.status,
            pending=tuple(self.pending.values()),
            outcome=self.outcome,
            spent=self.spent if self.outcome == "budget" else None,
        )

    def snapshot(self) -> AgentSnapshot:
        """This state as a value: the history shared, the pending calls and scopes copied."""
        return AgentSnapshot(self.history, self.step_count, self.status, self.outcome,
                             self.usage, dict(self.pending), self.scopes.copy())

    def restore(self, snapshot: AgentSnapshot) -> None:
        """Put ``snapshot`` back (a loaded session, a batch row a Ray worker ran); refused
        while a call runs."""
        with self.lock:
            if self.status == "generating":
                raise BadUsage(f"agent {self.deps.name!r} is generating: restore it when the "
                               "turn ends")
            self.history = snapshot.history
            self.step_count, self.status = snapshot.step_count, snapshot.status
            self.outcome, self.usage = snapshot.outcome, snapshot.usage
            self.pending = dict(snapshot.pending)
            self.scopes = snapshot.scopes.copy()

    # -- changes, each told to the listeners ---------------------------------------------------

    def append(self, message: dict[str, Any], reason: str) -> dict[str, Any]:
        """Store ``message``; return it as stored (half an emoji mended: ``History``)."""
        message = self.history.append(message)
        deps = self.deps
        if deps.listeners.has("after_state_update"):
            self.observe("after_state_update", StateUpdateEvent(deps.context, reason, message))
        return message

    def answer(self, call_id: str, content: str, reason: str = "tool_result") -> dict[str, Any]:
        """Store the answer to the tool call ``call_id``."""
        return self.append({"role": "tool", "tool_call_id": call_id, "content": content},
                           reason)

    def add_pending(self, pending: PendingCall) -> None:
        """Store a call the run pauses on, or its new decision."""
        self.pending[pending.id] = pending
        self.observe("after_state_update", StateUpdateEvent(self.deps.context, "pending"))

    def observe(self, name: str, event: Any) -> None:
        """Fire an observer event from synchronous code. Async listeners run as tasks; during
        a call they are awaited before the call returns, so their errors are raised."""
        tasks = self.deps.listeners.emit_nowait(name, event)
        run = self.run
        if tasks and run is not None:
            run.add_observers(tasks)

    def set_status(self, status: Status) -> None:
        """Change the status; ``status_change`` listeners hear of a change."""
        previous, self.status = self.status, status
        deps = self.deps
        if previous != status and deps.listeners.has("status_change"):
            self.observe("status_change", StatusChangeEvent(deps.context, status, previous))

    def keep_refused(self, refused: TurnRefused, role: str) -> None:
        """Store what a ``user_message``/``ai_message`` listener left in place of the message
        it refused (``refused.keep``, never sent), if anything and if it can be stored."""
        if refused.keep is None:
            return
        problem = kept_problem(refused.keep, role)
        if problem is not None:
            refused.add_note(f"fragola_nb: nothing was stored in its place: {problem}")
            return
        self.append(refused.keep, "user_message" if role == "user" else "ai_message")

    # -- reading ------------------------------------------------------------------------------

    def check_can_start(self, *, resuming: bool) -> None:
        """Refuse a call while another runs, or a new user message while calls wait."""
        name = self.deps.name
        if self.status == "generating":
            raise BadUsage(f"agent {name!r} is already generating: await that call or stop it")
        if self.status == "waiting" and not resuming:
            raise BadUsage(
                f"agent {name!r} is waiting on {len(self.pending)} pending tool call(s): "
                "approve/reject/inject them and call step(), or stop() to cancel them"
            )

    def steps_allowed(self, by: int | None, *, after_user_message: bool) -> int:
        """How many model calls a call may make (``by``, else what ``max_step`` leaves)."""
        if by is not None:
            if isinstance(by, bool) or not isinstance(by, int) or by < 0:
                raise BadUsage(f"by must be a whole number >= 0, got {by!r}")
            return by
        options = self.deps.options
        if options.reset_step_count_after_user_message:
            return options.max_step
        # A lifetime budget: a user message does not reset the count.
        return max(options.max_step - self.step_count, 0)

    def last_tool_calls(self) -> tuple[list[dict[str, Any]], set[str]]:
        """The tool calls of the last assistant message, and the ids already answered."""
        history = self.history
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

    def request_messages(self) -> list[dict[str, Any]]:
        """What a request sends: the system (or developer) message, then the history but
        the notes beside it (``checks.META``)."""
        history, held = self.history, self._sent
        if held is not None and held[0] is history:
            kept, length = held[2], len(history)
            if length > held[1]:
                kept += sent(history.since(held[1]))
        else:
            kept, length = sent(history.to_list()), len(history)
        self._sent = (history, length, kept)
        messages = kept.copy()
        deps = self.deps
        system_prompt = deps.system_prompt(self.scopes)
        if system_prompt is not None:
            role = "developer" if deps.options.use_developer_role else "system"
            messages.insert(0, {"role": role, "content": system_prompt})
        return messages

    def unanswered_calls(self) -> list[dict[str, Any]]:
        calls, answered = self.last_tool_calls()
        return [c for c in calls if c.get("id") not in answered]
