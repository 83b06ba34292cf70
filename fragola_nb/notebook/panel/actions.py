"""What the panel's controls do: each one a call to the agent's public API.

``Actions.do(name, fields)`` is what a click sends (``{"do": name, **fields}``). A decision on
a call that is already decided, or no longer pending, does nothing: a double-click is one
click. What cannot be done is said on the card or in the panel, and nothing changes:

    approve  id                   edit    id, args (JSON text)
    reject   id, reason           inject  id, text
    step     stop     reset       fork    name?, var?
    send     text                 bind    var
    fork_here  i, name?           rerun   i, text, call?, name?   (a message's controls,
    source     i, call?  (the text an editor starts from)          see :mod:`.message_controls`)

When the last pending call is decided, the run resumes (``agent.step()``), started by
:func:`~fragola_nb.notebook.runner.launch` so the kernel stays free for the next click. The
runs a control starts belong to the panel's turn (``runner.runs_of``), and the calls decided
by a click are remembered (:func:`clicked`), so a turn panel can say who decided each one.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import FragolaError
from fragola_nb.base.redact import redact_text
from fragola_nb.base.render import visible
from fragola_nb.notebook.panel import message_controls
from fragola_nb.notebook.runner import launch, runs_of

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.state import PendingCall
    from fragola_nb.notebook.panel.view import AgentPanel

__all__ = ["Actions", "clicked", "error_text"]

CARD_ACTIONS = ("approve", "edit", "reject", "inject")

_CLICKED: set[tuple[str, str]] = set()
"""(agent id, call id) of the calls decided by a click in a panel, whichever panel: the
agent's decision does not say who made it, and every view of the agent should say the same."""


def clicked(agent: Agent, call_id: str) -> bool:
    """Was this call of ``agent`` decided by a click on a panel's card (else in code)?"""
    return (agent.id, call_id) in _CLICKED


def error_text(exc: BaseException) -> str:
    """``ClassName: message``, with the cause when it says more (a ModelError's openai error),
    and any credential in them (a server that echoes the key it was sent) redacted. An openai
    error whose message ours already quotes ("Error code: 401 - Incorrect API key") is left
    out: the panel says a failure once (the cell's error keeps the chain, ``%tb``)."""
    text = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__
    said = re.sub(r"^Error code: \d+ - ", "", str(cause)) if cause is not None else ""
    if cause is not None and str(cause) not in text and said not in text:
        text += f"\ncaused by {type(cause).__name__}: {cause}"
    return redact_text(text)


class Refused(Exception):
    """A control's request that cannot be carried out; its message is shown as it is."""


def variable_for(name: str) -> str:
    """A Python name made of an agent's name: "geo fork-1" -> "geo_fork_1"."""
    var = re.sub(r"\W+", "_", name).strip("_") or "fork"
    if var[0].isdigit() or keyword.iskeyword(var):
        var = "fork_" + var
    return var


class Actions:
    def __init__(self, panel: AgentPanel) -> None:
        self.panel = panel

    @property
    def agent(self) -> Agent:
        return self.panel.agent

    def do(self, action: str, fields: dict[str, Any]) -> None:
        method = getattr(self, f"_{action}", None)
        if action.startswith("_") or method is None:
            raise Refused(f"the panel has no control {action!r}")
        if self.panel._detached:
            self.panel.note(f"this panel is detached ({self.panel.detached}): nothing was done")
            return
        if action in CARD_ACTIONS:
            self._card(action, method, fields)
            return
        try:
            method(**fields)
        except (Refused, FragolaError, ValueError, TypeError) as exc:
            if isinstance(exc, Refused):
                self.panel.notice = {"kind": "error", "text": visible(str(exc))}
            else:
                self.panel.show_error(exc)

    # -- approval cards --------------------------------------------------------------------------

    def _card(self, action: str, method: Any, fields: dict[str, Any]) -> None:
        call_id = str(fields.pop("id", ""))
        pending = next((p for p in self.agent.pending if p.id == call_id), None)
        if pending is None or pending.decision is not None:
            return  # decided already (a second click) or answered: nothing to do
        _CLICKED.add((self.agent.id, call_id))  # before the decision's event is heard
        try:
            method(pending, **fields)
        except (Refused, FragolaError, ValueError, TypeError) as exc:
            _CLICKED.discard((self.agent.id, call_id))
            text = str(exc) if isinstance(exc, Refused) else error_text(exc)
            self.panel.set_card_error(call_id, text)
            return
        self.panel.set_card_error(call_id, "")
        self.panel.sync_now()
        pending_now = self.agent.pending
        if pending_now and all(p.decision is not None for p in pending_now):
            self._launch(self.agent.step)  # the last one: go on

    def _launch(self, start: Callable[[], Awaitable[Any]]) -> None:
        """Start a run that belongs to this panel's turn, without blocking the kernel."""
        with runs_of(self.panel):  # the task copies the context: the run is the panel's
            launch(start, on_error=self.panel.show_error)

    def _approve(self, pending: PendingCall) -> None:
        if pending.reason == "dynamic":
            raise Refused(f"{pending.name} has no handler to run: answer it by hand")
        self.agent.approve(pending.id)

    def _edit(self, pending: PendingCall, args: str = "") -> None:
        if pending.reason == "dynamic":
            raise Refused(f"{pending.name} has no handler to run: answer it by hand")
        try:
            params = json.loads(args)
        except json.JSONDecodeError as exc:
            raise Refused(f"the arguments are not valid JSON: {exc}") from None
        if not isinstance(params, dict):
            raise Refused(f"the arguments must be a JSON object, not {type(params).__name__}")
        tool = self.agent.tool_named(pending.name)
        if tool is not None:
            properties = tool.parameters.get("properties")
            known: dict[str, Any] = properties if isinstance(properties, dict) else {}
            extra = sorted(set(params) - set(known)) if known else []
            if extra and tool.parameters.get("additionalProperties") is not True:
                takes = ", ".join(str(key) for key in known) or "none"
                raise Refused(f"{', '.join(extra)}: not in the arguments {pending.name} takes "
                              f"({takes}); remove them")
        self.agent.approve(pending.id, params=params)

    def _reject(self, pending: PendingCall, reason: str = "") -> None:
        if not reason.strip():
            raise Refused("write a reason first: the model reads it")
        self.agent.reject(pending.id, reason.strip())

    def _inject(self, pending: PendingCall, text: str = "") -> None:
        if not text.strip():
            raise Refused("type the result first: the model reads it as the tool's answer")
        self.agent.inject(pending.id, text)

    # -- the controls ----------------------------------------------------------------------------

    def _step(self) -> None:
        agent = self.agent
        if agent.status == "generating":
            raise Refused("the agent is running: Stop it, or wait")
        undecided = [p for p in agent.pending if p.decision is None]
        if undecided:
            names = ", ".join(f"{p.name} ({p.id})" for p in undecided)
            raise Refused(f"decide these calls first: {names}")
        self.panel.notice = {}
        self._launch(agent.step)

    def _stop(self) -> None:
        # Returns at once; the run settles and the events say so. A compare or batch on the
        # agent's forks is stopped the same way, keeping what finished.
        if self.agent.status != "idle" or self.agent.experiments:
            self.agent.stop_sync()

    def _reset(self) -> None:
        status = self.agent.status
        if status != "idle":
            raise Refused(f"the agent is {status}: stop it before a reset")
        self.agent.reset()
        self.panel.note(f"{self.agent.name!r} reset: no messages, step count 0")

    def _send(self, text: str = "") -> None:
        agent = self.agent
        if not text.strip():
            raise Refused("write a message first")
        if agent.status == "waiting":
            raise Refused("the agent waits on tool calls: decide them (or Stop) first")
        if agent.status == "generating":
            raise Refused("the agent is running: wait for it, or Stop it")
        self.panel.notice = {}
        self._launch(lambda: agent.user_message(text))

    def _fork(self, name: str = "", var: str = "") -> None:
        fork = self.agent.fork(name.strip() or None)
        bound = self._bind_agent(fork, var.strip() or variable_for(fork.name), fresh=True)
        shown = self.panel.on_fork(fork) if self.panel.on_fork is not None else None
        (shown or self.panel).note(f"forked {fork.name!r}, bound to `{bound}` "
                                   f"(%%fragola {bound} talks to it)")

    # -- a message's controls (see .message_controls: what is kept, edited, run) ------------

    def _fork_here(self, i: Any = None, name: str = "") -> None:
        try:
            fork = message_controls.fork_here(self.agent, i, name.strip() or None)
        except message_controls.NotHere as exc:
            raise Refused(str(exc)) from None
        self._show_fork(fork, f"forked {fork.name!r} before message #{fork.fork_at}")

    def _source(self, i: Any = None, call: str = "") -> None:
        """Not a change: the editor of a message asks for the text it starts from."""
        try:
            self.panel.send(message_controls.source(self.agent, i, str(call)))
        except message_controls.NotHere as exc:
            self.panel.send({"t": "source", "i": i, "call": call, "failed": True})
            raise Refused(str(exc)) from None

    def _rerun(self, i: Any = None, text: str = "", call: str = "", name: str = "") -> None:
        reply = {"t": "edited", "i": i, "call": call, "ok": False}
        if self.agent.status == "generating":
            self.panel.send(reply)
            raise Refused("the agent is running: wait for it, or Stop it, then edit")
        try:
            fork = message_controls.fork_edited(self.agent, i, str(text), str(call),
                                        name.strip() or None)
        except message_controls.NotHere as exc:
            self.panel.send(reply)  # the editor keeps the text; the notice says why
            raise Refused(str(exc)) from None
        self.panel.send({**reply, "ok": True})
        runs = message_controls.goes_on(fork)
        # a call's result: its own number
        edited = message_controls.target_of(self.agent, i, str(call))
        shown = self._show_fork(fork, f"forked {fork.name!r} with message #{edited} edited"
                                + (", running on" if runs else " (it waits for your message)"))
        if runs:
            target = shown or self.panel
            with runs_of(target):  # a run of the fork's panel, when one shows it
                launch(fork.step, on_error=target.show_error)

    def _show_fork(self, fork: Agent, what: str) -> AgentPanel | None:
        """Bind a fork made by a click to a fresh variable, show it (the tree selects it) and
        say so; the panel that shows it now, if another one does."""
        bound = self._bind_agent(fork, variable_for(fork.name), fresh=True)
        shown = self.panel.on_fork(fork) if self.panel.on_fork is not None else None
        where = "" if shown is not None else f"; %fragola_panel {bound} shows it"
        (shown or self.panel).note(f"{what}, bound to `{bound}` "
                                   f"(%%fragola {bound} talks to it{where})")
        return shown

    def _bind(self, var: str = "") -> None:
        bound = self._bind_agent(self.agent, var.strip(), fresh=False)
        self.panel.note(f"{self.agent.name!r} is bound to `{bound}`")

    def _bind_agent(self, agent: Agent, var: str, *, fresh: bool) -> str:
        ns = self._namespace()
        if not var.isidentifier() or keyword.iskeyword(var):
            raise Refused(f"{var!r} is not a Python variable name")
        if fresh:  # a new fork gets a name of its own: never replaces a variable
            base, n = var, 2
            while var in ns:
                var, n = f"{base}_{n}", n + 1
        elif var in ns and ns[var] is not agent:
            raise Refused(f"`{var}` already holds a {type(ns[var]).__name__}: "
                          "choose another name")
        ns[var] = agent
        return var

    def _namespace(self) -> MutableMapping[str, Any]:
        if self.panel.namespace is not None:
            return self.panel.namespace
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None:
            raise Refused("no notebook to bind a variable in")
        return shell.user_ns  # type: ignore[no-any-return]
