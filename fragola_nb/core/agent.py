"""``Agent``: one conversation with a model, its tools, listeners, stores and forks."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any

from fragola_nb.base.checks import (
    check_content,
    check_messages,
    refuse_half_emoji,
    sent,
)
from fragola_nb.base.errors import BadUsage, InvalidArguments
from fragola_nb.core import facade, forking, limits
from fragola_nb.core import instructions as _instructions
from fragola_nb.core import options as _options
from fragola_nb.core.context import AgentContext, AgentOptions
from fragola_nb.core.conversation import AgentSnapshot, Conversation, RunDeps
from fragola_nb.core.events import (
    StateUpdateEvent,
)
from fragola_nb.core.history import History
from fragola_nb.core.hooks import Hook
from fragola_nb.core.listening import Listening
from fragola_nb.core.run import driver
from fragola_nb.core.run.start import user_message_start
from fragola_nb.core.schemas import ArgumentsRejected
from fragola_nb.core.state import AgentState, Decision, Outcome, PendingCall, Status
from fragola_nb.core.stores import Store, deep_copy, index_stores
from fragola_nb.core.tools import Tool
from fragola_nb.core.usage import Usage

if TYPE_CHECKING:
    from fragola_nb.core.facade import BatchResult, Comparison, Evaluation, RayBackend
    from fragola_nb.core.fragola import Fragola
    from fragola_nb.core.jsonmode import JsonResult
    from fragola_nb.core.limits import Budget

__all__ = ["Agent"]


class Agent(Listening):
    """An agent, made with ``fragola.agent(...)``.

    >>> state = await agent.user_message("What is 2 + 3?")      # doctest: +SKIP
    >>> state.messages[-1]["content"]                            # doctest: +SKIP
    '5'
    """

    def __init__(
        self,
        fragola: Fragola,
        options: AgentOptions,
        *,
        messages: Sequence[dict[str, Any]] = (),
        stores: Sequence[Store[Any]] = (),
    ) -> None:
        self.context = AgentContext(self)
        self.deps = RunDeps(fragola, options, self.context)
        """What this agent's turns depend on: its Fragola instance, options, listeners, hooks
        and probes (``fragola_nb.core.conversation``)."""
        self.conversation = Conversation(self.deps, History(check_messages(messages)),
                                         index_stores(stores))
        """This agent's state: history, status, pending calls, step count, usage..."""
        self.id: str = uuid.uuid4().hex[:8]
        self.fork_of: str | None = None
        self.parent: Agent | None = None
        self.fork_point = 0
        """How many messages this agent inherited from its parent when forked."""
        self.fork_at: int | None = None
        """Where ``fork(at=...)`` left the parent: the index into the parent's messages of
        the first one this fork does not hold (None for a fork at the end)."""
        self._forks: list[Agent] = []
        self._fork_names = itertools.count(1)
        self._experiments: dict[Callable[[bool], None], str] = {}
        """The ``compare``/``batch`` calls running on this agent's forks: each one's stopper
        and what it is ("batch of 40 inputs"). ``stop()`` calls each stopper with ``False``
        (let what runs finish), ``stop_sync()`` with ``True`` (cancel at once)."""

    # -- reading ----------------------------------------------------------------------------

    @property
    def fragola(self) -> Fragola:
        return self.deps.fragola

    @fragola.setter
    def fragola(self, fragola: Fragola) -> None:
        self.deps.fragola = fragola

    @property
    def options(self) -> AgentOptions:
        return self.deps.options

    @options.setter
    def options(self, options: AgentOptions) -> None:
        self.deps.options = options

    @property
    def name(self) -> str:
        return self.deps.options.name

    @property
    def description(self) -> str:
        return self.deps.options.description

    @property
    def instructions(self) -> _instructions.Instructions | None:
        """The unscoped instructions, a ``str`` (None when the agent has none, scoped or
        not), callable as upstream's ``instructions(scope=None)``: ``agent.instructions("*")``
        is every scope merged (what the model is sent), ``agent.instructions("lang")`` one
        scope's. ``instructions_for(scope)`` reads the same whatever is set."""
        return _instructions.shown(self.conversation)

    @property
    def system_prompt(self) -> str | None:
        """The system (or developer) message the model is sent: the unscoped instructions,
        then each scope's in sorted scope order; None when there are none."""
        return self.deps.system_prompt(self.conversation.scopes)

    def instructions_for(self, scope: str | None = None) -> str | None:
        """The unscoped instructions (``None``), one scope's, or ``"*"``: every scope merged
        (what the model is sent)."""
        return _instructions.read(self.conversation, scope)

    @property
    def model(self) -> str:
        return self.deps.model

    @property
    def status(self) -> Status:
        return self.conversation.status

    @property
    def step_count(self) -> int:
        return self.conversation.step_count

    @property
    def state(self) -> AgentState:
        """A snapshot: ``messages`` (a new list; the dicts are shared, do not mutate them),
        ``step_count``, ``status``, ``pending`` and the last run's ``outcome``."""
        return self.conversation.state()

    @property
    def outcome(self) -> Outcome | None:
        """``agent.state.outcome``: how the last run ended, without copying the history."""
        return self.conversation.outcome

    @property
    def message_count(self) -> int:
        """``len(agent.state.messages)``, without copying the history."""
        return len(self.conversation.history)

    @property
    def pending(self) -> tuple[PendingCall, ...]:
        """``agent.state.pending`` (the calls the run paused on, decided or not), without
        copying the history."""
        return tuple(self.conversation.pending.values())

    def messages_since(self, index: int) -> list[dict[str, Any]]:
        """``agent.state.messages[index:]``, costing what it returns rather than the history's
        length: a view that already shows the first ``index`` messages reads only the new ones.

        >>> agent.messages_since(agent.message_count - 1)   # the last message   # doctest: +SKIP
        """
        history = self.conversation.history
        return [history[i] for i in range(*slice(index, None).indices(len(history)))]

    @property
    def usage(self) -> Usage:
        """Tokens, requests and cost of the model calls this agent made (not its parent's
        before a fork, nor its forks': ``fragola_nb.tree_usage`` sums a tree). ``reset()``
        keeps it: the tokens were spent.

        >>> agent.usage.total_tokens, agent.usage.cost              # doctest: +SKIP
        (1234, 0.000415)
        """
        return self.conversation.usage

    @property
    def forks(self) -> tuple[Agent, ...]:
        """The agents forked from this one, oldest first."""
        return tuple(self._forks)

    @property
    def root(self) -> Agent:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    @property
    def stores(self) -> dict[str, Store[Any]]:
        """This agent's own stores by namespace (the Fragola instance's are not included)."""
        return dict(self.conversation.stores)

    def get_store(self, namespace: str) -> Store[Any] | None:
        return self.conversation.stores.get(namespace) or self.fragola.get_store(namespace)

    def tool_named(self, name: str) -> Tool | None:
        return self.deps.tool_named(name)

    # -- turns ------------------------------------------------------------------------------

    async def user_message(
        self, content: str | list[dict[str, Any]], *, by: int | None = None,
        budget: Budget | None = None,
    ) -> AgentState:
        """Append a user message and run until a final answer, a pause, or the step budget.

        ``budget`` (a ``Budget``) caps what this call spends on model calls: once spent,
        nothing more is sent and the turn ends with outcome ``"budget"``.

        >>> state = await agent.user_message("Hi", budget=Budget(tokens=500))  # doctest: +SKIP
        """
        message = {"role": "user", "content": check_content(content)}
        limits.check_budget(budget)
        conv = self.conversation
        await self.deps.hooks.ready()
        conv.check_can_start(resuming=False)
        steps = conv.steps_allowed(by, after_user_message=True)
        with limits.spending(budget, fragola=self.fragola, models=[self.model]):
            return await driver.drive(conv, self.deps, user_message_start(conv, message),
                                      steps, resuming=False)

    async def step(self, *, by: int | None = None, budget: Budget | None = None
                   ) -> AgentState:
        """Run without a new user message; also resumes a paused agent. ``budget`` as for
        ``user_message``."""
        limits.check_budget(budget)
        conv = self.conversation
        await self.deps.hooks.ready()
        conv.check_can_start(resuming=True)
        if self.system_prompt is None and not sent(conv.history.to_list()):
            # The request would hold no message at all (none, or only notes such as rejected
            # messages, which are never sent), which the API always refuses.
            raise BadUsage(f"agent {self.name!r} has no message to send: use user_message()")
        steps = conv.steps_allowed(by, after_user_message=False)
        with limits.spending(budget, fragola=self.fragola, models=[self.model]):
            return await driver.drive(conv, self.deps, None, steps, resuming=True)

    async def json(
        self, message: str, schema: Any, *, ignore_user_message_events: bool = False,
        json_mode: str | None = None,
    ) -> JsonResult[Any]:
        """Ask for structured output matching ``schema`` (a pydantic model or JSON Schema).

        ``json_mode`` (default: the Fragola's, ``"auto"``) is how the server is asked:
        ``"json_schema"``, ``"json_object"`` or ``"tool"``; ``"auto"`` falls back from one to
        the next when a server refuses one, and the Fragola remembers what worked per model.
        See ``fragola_nb.core.jsonshapes``."""
        from fragola_nb.core.jsonmode import run_json

        return await run_json(self.conversation, message, schema, ignore_user_message_events,
                              json_mode)

    # -- experiments ------------------------------------------------------------------------

    async def compare(
        self,
        message: str,
        variants: Mapping[str, Mapping[str, Any]],
        concurrency: int = 4,
        *,
        graders: Any = (),
        repeat: int = 1,
        budget: Budget | None = None,
    ) -> Comparison:
        """Run ``message`` once per variant, each on a fork named after it, concurrently.

        ``variants`` maps a name to overrides of ``instructions``, ``model``,
        ``model_settings`` and ``tools``; see ``fragola_nb.experiments.compare.run``.
        ``repeat=k`` runs each variant k times; ``graders`` grade each run (rows gain
        ``passed``, ``score`` and ``grades``). ``budget`` (a ``Budget``) meters all the
        variants together: once spent, no variant starts.
        """
        return await facade.compare(self, message, variants, concurrency, graders=graders,
                                 repeat=repeat, budget=budget)

    async def batch(
        self,
        inputs: Iterable[Any],
        concurrency: int = 8,
        *,
        resume: str | PathLike[str] | None = None,
        progress: bool = True,
        backend: str | RayBackend = "local",
        graders: Any = (),
        repeat: int = 1,
        budget: Budget | None = None,
    ) -> BatchResult:
        """Send each input (a string, or a list of content parts) with ``user_message`` on
        a fresh fork of this agent, at most ``concurrency`` at once; this agent's history is
        the shared prefix, and the agent itself is left as it was.

        Returns a ``BatchResult``: one row per input, in input order (``input``, ``answer``,
        ``error``, ``status``, ``tokens``, ``seconds``, ``fork``; the forks are kept by the rows,
        not in the fork tree). A failed input is a row with its error. ``stop()`` starts
        nothing more, ``stop_sync()`` also stops the running inputs: the rows come back, the
        finished ones kept. ``resume=PATH`` appends each finished row to a JSON Lines file and
        skips the inputs it already answered when run again. ``progress`` shows a tqdm bar.
        ``repeat=k`` runs each input k times (k rows side by side, ``row.repeat`` 0 to k - 1);
        ``graders`` (see ``fragola_nb.graders``) grade each finished row once all have run:
        rows gain ``grades``, ``passed`` and ``score``.

        ``backend="ray"`` (or ``RayBackend(address=..., workers=...)``) runs the inputs on Ray
        workers, ``concurrency`` at once on each, and gives the same rows: see
        ``fragola_nb.experiments.ray.backend`` (``pip install "fragola_nb[ray]"``).

        ``budget`` (a ``Budget``) meters the whole batch: once spent no input starts, and
        the inputs left unfinished are rows ``"not run"`` with error ``"not run: budget"``.

        >>> result = await agent.batch(["2 + 2?", "3 + 3?"], resume="rows.jsonl")  # doctest: +SKIP
        >>> result.answers, result.failed                                # doctest: +SKIP
        (['4', '6'], 0)

        See ``fragola_nb.experiments.batch.run``.
        """
        return await facade.batch(self, inputs, concurrency, resume=resume, progress=progress,
                               backend=backend, graders=graders, repeat=repeat,
                               budget=budget)

    async def evaluate(
        self,
        cases: Any,
        variants: Mapping[str, Mapping[str, Any]] | None = None,
        graders: Any = (),
        *,
        repeat: int = 1,
        concurrency: int = 8,
        resume: str | PathLike[str] | None = None,
        budget: Budget | None = None,
        progress: bool = True,
        decide: Callable[[PendingCall], Any] | None = None,
        backend: str | RayBackend = "local",
    ) -> Evaluation:
        """Run every case on every variant ``repeat`` times, each on its own fork, and grade
        each answer: the verdict of a prompt experiment.

        ``cases``: strings, dicts (``input``, optional ``expected``, other keys filling
        ``{name}`` in the input and read by graders) or a pandas DataFrame. ``variants`` as
        ``compare`` takes them (default: this agent as it is, named ``"base"``). ``graders``:
        those of ``fragola_nb.graders`` or any callable ``(row) -> Grade | bool | float |
        None``. ``resume``, ``stop()``/``stop_sync()`` and interrupts as for ``batch``;
        ``budget`` caps the whole call.

        A case may give ``turns`` (user messages sent in order to one fork) or ``user`` (a
        ``SimulatedUser``) instead of ``input``. ``decide(call)`` decides the calls that wait
        for approval (a ``Decision``, True, False, or None to leave the row ``"waiting"``).
        ``backend="ray"`` runs the rows on Ray workers, as ``batch`` does.

        >>> from fragola_nb.graders import contains
        >>> evaluation = await agent.evaluate(["Capital of France?"],
        ...                                   graders=[contains("Paris")])  # doctest: +SKIP
        >>> evaluation.summary()[0]["pass_rate"]                            # doctest: +SKIP
        1.0

        Returns an ``Evaluation``; see ``fragola_nb.experiments.evaluate.run``.
        """
        return await facade.evaluate(self, cases, variants, graders, repeat=repeat,
                                  concurrency=concurrency, resume=resume, budget=budget,
                                  progress=progress, decide=decide, backend=backend)

    # -- stopping ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Finish the operation in flight, then return to idle (pending calls are cancelled).
        A ``compare``/``batch`` running on this agent starts nothing more and keeps what is
        done."""
        for stopper in list(self._experiments):
            stopper(False)
        driver.stop(self.conversation)

    def stop_sync(self) -> None:
        """Cancel the run at once, an HTTP request in flight included; the history is repaired
        and the interrupted ``user_message``/``step`` returns the state. A call whose run has
        ended but which still waits for an async observer returns too (the observer is
        cancelled). A ``compare``/``batch`` running on this agent is cancelled the same way,
        keeping what is done."""
        for stopper in list(self._experiments):
            stopper(True)
        driver.stop_sync(self.conversation)

    # -- decisions on pending calls ---------------------------------------------------------

    def approve(self, call_id: str, params: Any = None) -> None:
        """Let a paused call run, with ``params`` replacing the model's arguments if given:
        a dict validated like the model's, or an instance of the tool's pydantic model;
        anything invalid raises ``InvalidArguments`` and changes nothing."""
        pending = self._undecided(call_id)
        if pending.reason == "dynamic":
            raise BadUsage(f"{pending.name} is a dynamic tool: answer it with inject(id, result)")
        refuse_half_emoji(params, "approve(params=...)")
        parsed = None
        if params is not None:
            tool = self.tool_named(pending.name)
            if tool is None:
                raise BadUsage(f"the tool {pending.name!r} is no longer on this agent")
            if isinstance(params, dict):
                try:
                    parsed = tool.parse_arguments(params)
                except ArgumentsRejected as exc:
                    raise InvalidArguments(f"invalid arguments for {pending.name}:\n{exc}") from exc
            elif isinstance(params, getattr(tool.schema, "model", ())):
                parsed = params  # an instance of the tool's own model is already validated
            else:
                # Anything else would reach the handler unchecked and fail there instead.
                raise InvalidArguments(
                    f"edited arguments for {pending.name} must be a dict of arguments (or an "
                    f"instance of the tool's schema model), got {type(params).__name__}"
                )
        self._decide(pending, Decision("approve", params=parsed))

    def reject(self, call_id: str, reason: str = "") -> None:
        """Refuse a paused call; the model is told, with ``reason``."""
        pending = self._undecided(call_id)
        refuse_half_emoji(str(reason), "reject(reason=...)")
        self._decide(pending, Decision("reject", text=str(reason)))

    def inject(self, call_id: str, result: Any) -> None:
        """Answer a paused call (dynamic or awaiting approval) with ``result`` by hand: a
        value, or a ``ToolCallPayload`` (a failed one reaches the model as its error line)."""
        pending = self._undecided(call_id)
        refuse_half_emoji(result, "inject(result=...)")
        self._decide(pending, Decision("inject", text=result))

    def _undecided(self, call_id: str) -> PendingCall:
        pending = self.conversation.pending.get(call_id)
        if pending is None:
            ids = ", ".join(self.conversation.pending) or "none"
            raise BadUsage(f"no pending tool call with id {call_id!r} (pending: {ids})")
        if pending.decision is not None:
            raise BadUsage(f"tool call {call_id!r} is already decided ({pending.decision.kind})")
        return pending

    def _decide(self, pending: PendingCall, decision: Decision) -> None:
        self.conversation.add_pending(dataclasses.replace(pending, decision=decision))

    # -- history and options ----------------------------------------------------------------

    def reset(self, messages: Sequence[dict[str, Any]] | None = None) -> None:
        """Clear the history (or replace it with ``messages``, checked like the agent's
        ``messages=``) and the step count; pending calls are dropped."""
        history = History(check_messages(() if messages is None else messages))
        conv = self.conversation
        with conv.lock:
            if conv.status == "generating":
                raise BadUsage(f"agent {self.name!r} is generating: stop it before reset()")
            conv.history = history
            conv.pending.clear()
            conv.step_count = 0
            conv.outcome = None
            conv.set_status("idle")
        conv.observe("after_state_update", StateUpdateEvent(self.context, "reset"))

    def reset_step_count(self) -> None:
        self.conversation.step_count = 0

    def set_instructions(self, instructions: str | list[str] | None,
                         scope: str | None = None) -> None:
        """Set the unscoped instructions, or those of ``scope`` (None clears them); ``"*"``
        cannot be set. See ``fragola_nb.core.instructions``."""
        _instructions.write(self.conversation, instructions, scope)

    def remove_instructions(self, scope: str) -> bool:
        """Take a scope's instructions away; True when it had some."""
        return _instructions.remove(self.conversation, scope)

    # -- at run time: hooks, stores, options --------------------------------------------------

    def use(self, hook: Hook, name: str | None = None) -> Agent:
        """Put ``hook`` on this agent: ``hook(agent)`` registers listeners (and more) and may
        return a function that undoes it; an async hook starts as a task. Returns the agent.
        See ``fragola_nb.core.hooks``."""
        self.deps.hooks.use(self, hook, name)
        return self

    def has_hook(self, name: str) -> bool:
        return self.deps.hooks.has(name)

    def remove_hook(self, name: str) -> bool:
        """Take the hook named ``name`` off: the listeners it registered on this agent, then
        its dispose function. False when there is no such hook."""
        return self.deps.hooks.remove(self, name)

    def dispose(self) -> None:
        """Take every hook off, the last put on first (one still starting is cancelled)."""
        self.deps.hooks.dispose(self)

    async def hooks_ready(self) -> None:
        """Wait for the async hooks still starting (a turn waits for them by itself)."""
        await self.deps.hooks.ready()

    def add_store(self, store: Store[Any]) -> None:
        """Give this agent one more store (a namespace it does not have yet)."""
        _options.add_store(self.conversation, store)

    def remove_store(self, namespace: str) -> bool:
        """Take the store ``namespace`` off this agent; False when it had none."""
        return self.conversation.stores.pop(namespace, None) is not None

    def set_options(self, **changes: Any) -> None:
        """Change options at run time (``instructions``, ``description``, ``model_settings``,
        ``max_step``, ...), checked as ``fragola.agent`` checks them; only when idle."""
        _options.set_options(self.conversation, changes)

    # -- fork -------------------------------------------------------------------------------

    def fork(self, name: str | None = None, at: int | None = None, *,
             exact: bool = False) -> Agent:
        """A new agent that starts where this one is and goes on independently.

        ``at`` (a message index, negative from the end) starts it earlier, holding the
        messages before ``at`` (shared, not copied); ``fork_at`` records it. A cut inside a
        tool call's answers moves back to the assistant message that made the calls, with a
        warning (``exact=True``: a ``BadUsage`` instead); see ``fragola_nb.core.forking``.

        A ``name`` one of this agent's forks already has gets the first free suffix
        (``plain``, then ``plain-2``, ``plain-3``): two compares on one agent, or a fork
        named twice, leave branches a tree can tell apart by name (a compare's columns and
        ``comparison[...]`` keep the variant's own name)."""
        child = self.detached_fork(self._free_fork_name(name or f"{self.name}-fork"
                                                f"{next(self._fork_names)}"), at, exact)
        child.parent = self
        self._forks.append(child)
        # Views of the tree (a fork tree widget) learn of the new branch from the parent. A
        # listener that raises fails the fork: nothing is left in the tree that fork() did
        # not return (the listeners are told again, of a drop, so a view does not keep it).
        try:
            self.conversation.observe("after_state_update",
                                      StateUpdateEvent(self.context, "fork"))
        except BaseException:
            self._forks.remove(child)
            child.parent = None
            with contextlib.suppress(Exception):
                self.conversation.observe("after_state_update",
                                          StateUpdateEvent(self.context, "drop"))
            raise
        return child

    def _free_fork_name(self, name: str) -> str:
        taken = {fork.name for fork in self._forks}
        free, n = name, 2
        while free in taken:
            free, n = f"{name}-{n}", n + 1
        return free

    def detached_fork(self, name: str | None = None, at: int | None = None,
                      exact: bool = False) -> Agent:
        """A fork that is in no tree (``parent`` None), and that no listener hears of:
        ``fork`` puts one in this agent's tree; ``agent.batch`` runs its inputs on these."""
        conv, deps = self.conversation, self.deps
        if conv.status == "generating":
            raise BadUsage(f"agent {self.name!r} is generating: fork it when the turn ends")
        cut, _ = forking.cut(conv, at, exact)
        own = deps.options
        options = copy.copy(own)
        options.name = name or f"{own.name}-fork{next(self._fork_names)}"
        options.model_settings = deep_copy(own.model_settings)
        options.tools = list(own.tools)
        child = Agent(deps.fragola, options,
                      stores=[s.clone() for s in conv.stores.values()])
        child_conv = child.conversation
        child_conv.history = conv.history.fork(cut)
        child_conv.step_count = conv.step_count
        # child_conv.usage stays at zero: a fork counts its own calls, not its parent's.
        if cut is None:
            child_conv.status, child_conv.outcome = conv.status, conv.outcome
            child_conv.pending = dict(conv.pending)
        # else: idle, and the pending calls (of the last message) stay behind the cut.
        deps.hooks.clone_into(self, child)  # the listeners, and the hooks they belong to
        child_conv.scopes = conv.scopes.copy()
        child.fork_of, child.fork_point = self.id, len(child_conv.history)
        child.fork_at = cut
        return child

    # -- what sessions and Ray rebuild an agent from ----------------------------------------

    def snapshot(self) -> AgentSnapshot:
        """What this agent holds besides its options, tools and stores: its history (shared,
        not copied), step count, status, outcome, usage, pending calls and scoped
        instructions. A session file is written from it; ``restore`` puts one back."""
        return self.conversation.snapshot()

    def restore(self, snapshot: AgentSnapshot) -> None:
        """Put a ``snapshot`` back on this agent (a loaded session, a batch row a Ray worker
        ran): it then reads and goes on as the agent the snapshot was taken of."""
        self.conversation.restore(snapshot)

    def adopt(self, fork: Agent) -> None:
        """Put ``fork``, an agent in no tree (a loaded session's), in this agent's tree as
        its latest fork; automatic fork names go on from the number of forks."""
        if fork.parent is not None:
            raise BadUsage(f"agent {fork.name!r} is already a fork of {fork.parent.name!r}")
        fork.fork_of, fork.parent = self.id, self
        self._forks.append(fork)
        self._fork_names = itertools.count(len(self._forks) + 1)

    def own_listeners(self) -> dict[str, list[Any]]:
        """The listeners put on with ``on`` (not by a hook), by event: a session saves these,
        and a hook is saved by name and puts its own on again."""
        return self.deps.hooks.listeners_of_its_own(self.deps.listeners)

    def hooks_used(self) -> list[tuple[str | None, Hook]]:
        """The hooks ``use`` put on, in order, each with the name it was given."""
        return self.deps.hooks.names()

    @property
    def experiments(self) -> tuple[str, ...]:
        """What runs on this agent's forks now (``"batch of 40 inputs"``): ``stop()``
        reaches them, and the panel's Stop button shows while there is one."""
        return tuple(self._experiments.values())

    def experiment_began(self, stopper: Callable[[bool], None], what: str) -> None:
        """A ``compare``/``batch`` started on this agent's forks: ``stop()`` calls
        ``stopper(False)`` (let what runs finish), ``stop_sync()`` ``stopper(True)``; views
        (the panel's Stop button) learn of it from ``after_state_update``."""
        self._experiments[stopper] = what
        self.conversation.observe("after_state_update",
                                  StateUpdateEvent(self.context, "experiment"))

    def experiment_ended(self, stopper: Callable[[bool], None]) -> None:
        if self._experiments.pop(stopper, None) is not None:
            self.conversation.observe("after_state_update",
                                      StateUpdateEvent(self.context, "experiment"))

    def edit(self, index: int, content: Any = None, *, result: Any = None) -> None:
        """Replace a user/assistant text (``content``) or a tool message's ``result`` in this
        agent's own history, noted in the message, before ``step()``/``user_message`` runs
        on from it. The parent and other forks keep the message as it was (it is shared,
        never changed in place); see ``fragola_nb.core.forking``.

        >>> branch = agent.fork(at=2)                                 # doctest: +SKIP
        >>> branch.edit(1, content="Say it in French.")               # doctest: +SKIP
        """
        forking.edit(self.conversation, index, content, result,
                     (content is not None, result is not None))

    def drop(self) -> None:
        """Take this fork, with its own forks, out of its parent's tree.

        ``parent.forks`` holds every fork so the tree can be drawn and saved; a branch you no
        longer want is dropped with this, and once nothing else refers to it, it is freed.
        The dropped agent still works on its own, as the root of its own tree (``parent`` is
        None, ``fork_of`` still names where it came from, its history is unchanged).

        >>> for variant in variants:                                  # doctest: +SKIP
        ...     trial = agent.fork(variant)
        ...     answers[variant] = (await trial.user_message(q)).messages[-1]["content"]
        ...     trial.drop()
        """
        parent = self.parent
        if parent is None:
            raise BadUsage(f"agent {self.name!r} is not a fork (or was already dropped)")
        if self.conversation.status == "generating":
            raise BadUsage(f"agent {self.name!r} is generating: drop it when the turn ends")
        parent._forks.remove(self)
        self.parent = None
        # The parent's views (a fork tree widget) redraw without the branch.
        parent.conversation.observe("after_state_update",
                                    StateUpdateEvent(parent.context, "drop"))

    # -- events -----------------------------------------------------------------------------

    def _repr_html_(self) -> str:
        """The conversation as escaped HTML (nbconvert, GitHub, a notebook without widgets)."""
        from fragola_nb.base.render import conversation_html

        fork = f" · fork of {self.fork_of}" if self.fork_of else ""
        conv = self.conversation
        pending = f" · {len(conv.pending)} pending" if conv.pending else ""
        return conversation_html(
            conv.history.to_list(),
            title=self.name,
            status=conv.status,
            subtitle=f"id {self.id} · model {self.model} · "
            f"step {conv.step_count}/{self.options.max_step}{fork}{pending}",
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        from fragola_nb.base.render import transcript_text

        printer.text(repr(self))
        history = self.conversation.history
        if not cycle and len(history):
            printer.text("\n" + transcript_text(history.to_list()))

    def __repr__(self) -> str:
        fork = f", fork_of={self.fork_of!r}" if self.fork_of else ""
        return (
            f"Agent(name={self.name!r}, id={self.id!r}, model={self.model!r}, "
            f"status={self.conversation.status!r}, "
            f"messages={len(self.conversation.history)}{fork})"
        )


