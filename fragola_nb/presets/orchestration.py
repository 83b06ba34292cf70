"""Orchestration: agents that message each other along the routes of a flow.

``orchestrate(lead, participants, flow)`` gives each agent that may send (a *source*) a
``message_agent(id, message)`` tool limited to the agents its routes reach, and appends to
its instructions the list of those agents (name, id, description, tools). Calling the tool
runs a normal turn of the target (``target.user_message(message)``): its panel shows it, its
history keeps it, and its last answer's text is the tool's result.

>>> from fragola_nb.presets.orchestration import orchestrate
>>> team = orchestrate(lead, [lead, researcher, writer], [          # doctest: +SKIP
...     {"from": lead, "to": "*"},                  # lead -> researcher, writer
...     {"from": researcher, "to": writer, "bidirectional": True},
... ])
>>> await lead.user_message("Write a note on tides.")              # doctest: +SKIP
>>> print(team.graph())                                             # doctest: +SKIP
>>> team.remove()          # the tools and the added instructions go away   # doctest: +SKIP

The flow is a list of edges: ``{"from": A, "to": B}`` where each end is a participant (the
agent, or its name when no other participant has it), a list of them, or ``"*"`` (every
other participant); ``"bidirectional": True`` adds the way back. ``(A, B)`` is short for
``{"from": A, "to": B}``. The lead is a participant (added first if not listed).

Refused with an ``OrchestrationError`` (nothing is changed): duplicate participants, an edge
naming an agent that is not a participant, an agent messaging itself, a participant no edge
uses, a source that already has a ``message_agent`` tool.

What the model is told when a message cannot go through (the run goes on, as with any tool
result): an agent it may not reach, a target that is busy (generating, or waiting for a
person), a chain of messages deeper than ``max_depth`` or coming back to an agent that waits
for its own answer (A -> B -> A), a message vetoed by ``on_message``, a target whose turn
failed. Each message, delivered or not, is in ``orchestration.log``.

A fork of a source keeps its ``message_agent`` tool and routes (its messages are logged under
its own name); ``remove()`` takes the tool and the instructions off the sources and their
forks.
"""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from fragola_nb.base.errors import BadUsage, exception_text
from fragola_nb.base.render import escape
from fragola_nb.core.agent import Agent
from fragola_nb.core.context import AgentContext
from fragola_nb.core.state import AgentState
from fragola_nb.core.tools import Tool, tool

__all__ = [
    "MESSAGE_TOOL",
    "Orchestration",
    "OrchestrationError",
    "OrchestrationMessage",
    "Veto",
    "orchestrate",
]

MESSAGE_TOOL = "message_agent"
"""The name of the tool each source agent gets."""

Status = Literal["running", "answered", "waiting", "unfinished", "stopped", "vetoed", "refused",
                 "failed"]


class OrchestrationError(BadUsage):
    """``orchestrate(...)`` was given participants or a flow that cannot work; nothing was
    changed."""


@dataclass(frozen=True)
class Veto:
    """Returned by an ``on_message`` hook to refuse a message; the sender is told ``reason``."""

    reason: str


OnMessage = Callable[[Agent, Agent, str], "str | Veto | Awaitable[str | Veto | None] | None"]


@dataclass(frozen=True)
class OrchestrationMessage:
    """One ``message_agent`` call, in ``Orchestration.log`` (in the order they were sent).

    ``status``: ``running`` (the target's turn is under way), ``answered``, ``waiting`` (the
    target paused for a person: approve in its panel, then ``step()`` it), ``unfinished``
    (the target stopped or reached its step limit), ``stopped`` (the sender's run was stopped
    or interrupted before the message was sent, while ``on_message`` ran: the target never
    got it), ``vetoed`` (by ``on_message``),
    ``refused`` (not reachable, busy, too deep, a loop) or ``failed`` (the target's turn
    raised). ``result`` is what the sender's tool call was answered with.
    """

    source: Agent
    target: Agent | None
    message: str
    depth: int
    status: Status = "running"
    result: str = ""
    sent: str | None = None
    """The message as the target received it, when ``on_message`` rewrote it."""

    def line(self) -> str:
        target = self.target.name if self.target is not None else "?"
        said = _clip(self.sent if self.sent is not None else self.message)
        text = f"{'  ' * (self.depth - 1)}{self.source.name} → {target}: {said}"
        if self.status == "running":
            return f"{text}  (running)"
        return f"{text}  ⇒ [{self.status}] {_clip(self.result)}"


_CHAIN: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "fragola_nb_orchestration_chain", default=())
"""The ids of the agents whose ``message_agent`` call waits for an answer in this task (the
target's turn is a task made here, so it sees the chain and extends it)."""


class Orchestration:
    """What ``orchestrate`` returns: the routes, the ``log`` of messages, ``graph()``, and
    ``remove()`` (also on leaving a ``with`` block)."""

    def __init__(self, lead: Agent, participants: tuple[Agent, ...],
                 routes: dict[Agent, tuple[Agent, ...]], on_message: OnMessage | None,
                 max_depth: int) -> None:
        self.lead = lead
        self.participants = participants
        self.routes = routes
        """Each source agent and the agents it may message, in participant order."""
        self.on_message = on_message
        self.max_depth = max_depth
        self._log: list[OrchestrationMessage] = []
        self._tools: dict[Agent, Tool] = {}
        self._added: dict[Agent, tuple[str | None, str]] = {}
        """Each source's instructions before, and the text appended to them."""
        self.removed = False

    @property
    def log(self) -> tuple[OrchestrationMessage, ...]:
        return tuple(self._log)

    # -- setting up and undoing -------------------------------------------------------------

    def _install(self) -> None:
        blocks = {source: _instructions_block(targets) for source, targets in self.routes.items()}
        for source, targets in self.routes.items():
            message_tool = self._make_tool(source, targets)
            source.context.update_tools([*source.options.tools, message_tool])
            self._tools[source] = message_tool
            before = source.options.instructions
            source.set_instructions(f"{before}\n\n{blocks[source]}" if before else blocks[source])
            self._added[source] = (before, blocks[source])

    def remove(self) -> None:
        """Take the ``message_agent`` tools off the sources (and their forks) and the added
        text out of their instructions. Calls again do nothing."""
        if self.removed:
            return
        self.removed = True
        for source, message_tool in self._tools.items():
            before, block = self._added[source]
            for agent in _tree(source):
                if any(t is message_tool for t in agent.options.tools):
                    agent.context.update_tools(
                        [t for t in agent.options.tools if t is not message_tool])
                agent.set_instructions(_without(agent.options.instructions, before, block))

    def __enter__(self) -> Orchestration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    # -- the tool ---------------------------------------------------------------------------

    def _make_tool(self, source: Agent, targets: tuple[Agent, ...]) -> Tool:
        schema = {
            "type": "object",
            "properties": {
                "id": {"type": "string", "enum": [t.id for t in targets],
                       "description": "The id of the agent to message"},
                "message": {"type": "string", "description": "The message to send"},
            },
            "required": ["id", "message"],
            "additionalProperties": False,
        }

        async def handler(params: dict[str, Any], context: AgentContext) -> str:
            return await self._send(context.agent, targets, params)

        made: Tool = tool(
            name=MESSAGE_TOOL, schema=schema, handler=handler,
            description="Send a message to another agent and get its answer. Agents: "
            + ", ".join(f"{t.name} (id {t.id})" for t in targets) + ".")
        return made

    async def _send(self, sender: Agent, targets: tuple[Agent, ...],
                    params: dict[str, Any]) -> str:
        index = len(self._log)
        try:
            return await self._deliver(sender, targets, params)
        except BaseException:
            # stop_sync(), a cancellation or Ctrl-C anywhere in the delivery (an async
            # on_message awaited, say): an entry left "running" would say so for good.
            if index < len(self._log) and self._log[index].status == "running":
                record = self._log[index]
                target = record.target.name if record.target is not None else "the target"
                self._log[index] = dataclasses.replace(
                    record, status="stopped",
                    result=f"Stopped: the run was stopped before the message was sent to "
                           f"{target}.")
            raise

    async def _deliver(self, sender: Agent, targets: tuple[Agent, ...],
                       params: dict[str, Any]) -> str:
        message = params.get("message")
        wanted = params.get("id")
        target = _find(targets, wanted)
        chain = _CHAIN.get()
        record = OrchestrationMessage(sender, target, str(message), len(chain) + 1)
        index = len(self._log)
        self._log.append(record)

        def end(status: Status, result: str, sent: str | None = None) -> str:
            self._log[index] = dataclasses.replace(record, status=status, result=result,
                                                   sent=sent)
            return result

        refusal = self._refusal(sender, targets, target, wanted, message, chain)
        if refusal is not None or target is None:
            return end("refused", refusal or "Error: no such agent.")
        sent: str | None = None
        if self.on_message is not None:
            try:
                verdict = self.on_message(sender, target, str(message))
                if inspect.isawaitable(verdict):
                    verdict = await verdict
            except Exception as exc:
                return end("failed", f"Error: not sent: the on_message hook raised "
                                     f"{exception_text(exc)}")
            if isinstance(verdict, Veto):
                return end("vetoed", f"Not sent: the message to {target.name} was refused: "
                                     f"{verdict.reason}")
            if isinstance(verdict, str):
                sent = verdict
            elif verdict is not None:
                return end("failed", "Error: not sent: the on_message hook returned a "
                           f"{type(verdict).__name__}, not a message string, a Veto or None")
        token = _CHAIN.set((*chain, sender.id))
        try:
            state = await target.user_message(sent if sent is not None else str(message))
        except Exception as exc:
            return end("failed", f"Error: {target.name} could not answer: "
                                 f"{exception_text(exc)}", sent)
        except BaseException:
            end("unfinished", f"Stopped: the run was stopped while {target.name} answered.",
                sent)
            raise
        finally:
            _CHAIN.reset(token)
        status, result = _outcome(target, state)
        return end(status, result, sent)

    def _refusal(self, sender: Agent, targets: tuple[Agent, ...], target: Agent | None,
                 wanted: Any, message: Any, chain: tuple[str, ...]) -> str | None:
        if self.removed:
            return "Error: this orchestration was removed: message_agent no longer works."
        if not isinstance(message, str) or not message.strip():
            return "Error: message must be a non-empty string."
        if target is None:
            if wanted in (sender.id, sender.name):
                return f"Error: {sender.name} cannot message itself."
            reachable = ", ".join(f"{t.name} (id {t.id})" for t in targets)
            return f"Error: no agent with id {wanted!r} is reachable. Reachable: {reachable}."
        if target.id in chain or target is sender:
            names = {a.id: a.name for a in self.participants}
            loop = " → ".join([*(names.get(i, i) for i in chain), sender.name, target.name])
            return (f"Error: not sent: {target.name} is waiting for the answer to its own "
                    f"message ({loop}); answer it instead of messaging back.")
        if len(chain) + 1 > self.max_depth:
            return (f"Error: not sent: this message would be {len(chain) + 1} messages deep "
                    f"(max_depth={self.max_depth}); answer without messaging further.")
        if target.status != "idle":
            doing = ("waiting for a person to decide on its tool calls"
                     if target.status == "waiting" else "generating")
            return f"Error: not sent: {target.name} is busy ({doing}); try again later."
        return None

    # -- views ------------------------------------------------------------------------------

    def graph(self) -> str:
        """The routes as text, with how many messages went each way::

            lead (lead) → researcher [2], writer [1]
            researcher → writer [0]
        """
        counts: dict[tuple[str, str], int] = {}
        for entry in self._log:
            if entry.target is not None:
                key = (entry.source.id, entry.target.id)
                counts[key] = counts.get(key, 0) + 1
        lines = []
        for source, targets in self.routes.items():
            reach = ", ".join(f"{t.name} [{counts.get((source.id, t.id), 0)}]" for t in targets)
            lines.append(f"{self._label(source)} → {reach}")
        return "\n".join(lines)

    def transcript(self) -> str:
        """Who messaged whom, in order, nested by depth, each with its result."""
        return "\n".join(entry.line() for entry in self._log) or "(no messages yet)"

    def _label(self, agent: Agent) -> str:
        return f"{agent.name} (lead)" if agent is self.lead else agent.name

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"{self!r}\n{self.graph()}\n\n{self.transcript()}")

    def _repr_html_(self) -> str:
        # escaped, direction and zero-width controls written out (a name "file\u202egnp.exe"
        # would otherwise turn the rest of its line around), long words wrapped
        body = escape(f"{self.graph()}\n\n{self.transcript()}")
        return (f"<div style='overflow-wrap:anywhere'><b>{escape(repr(self))}</b>"
                f"<pre style='white-space:pre-wrap;overflow-wrap:anywhere'>{body}</pre></div>")

    def __repr__(self) -> str:
        state = ", removed" if self.removed else ""
        return (f"Orchestration(lead={self.lead.name!r}, participants={len(self.participants)}, "
                f"messages={len(self._log)}{state})")


def orchestrate(
    lead: Agent,
    participants: Sequence[Agent],
    flow: Sequence[Any],
    *,
    on_message: OnMessage | None = None,
    max_depth: int = 3,
) -> Orchestration:
    """Let ``participants`` message each other along ``flow``; see the module docstring.

    ``on_message(source, target, message)`` (sync or async) sees each message before it is
    sent: it returns ``None`` to send it as is, a string to send instead, or ``Veto(reason)``
    to refuse it (the sender is told the reason). ``max_depth`` bounds a chain of messages
    (lead → researcher → writer is 2 deep).
    """
    if not isinstance(lead, Agent):
        raise OrchestrationError(f"the lead must be an Agent, got {type(lead).__name__}")
    members = _participants(lead, participants)
    routes = _routes(members, flow)
    used = {a for source, targets in routes.items() for a in (source, *targets)}
    unused = [a for a in members if a not in used]
    if unused:
        raise OrchestrationError(
            "every participant must be in the flow (directly or by '*'); unused: "
            + ", ".join(_who(a, lead) for a in unused))
    for source in routes:
        if source.tool_named(MESSAGE_TOOL) is not None:
            raise OrchestrationError(
                f"{source.name!r} already has a tool named {MESSAGE_TOOL!r} (is it in another "
                "orchestration? remove() that one first)")
    if on_message is not None and not callable(on_message):
        raise OrchestrationError("on_message must be a function (source, target, message)")
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
        raise OrchestrationError(f"max_depth must be a whole number >= 1, got {max_depth!r}")
    orchestration = Orchestration(lead, members, routes, on_message, max_depth)
    orchestration._install()
    return orchestration


# -- checking the participants and the flow ----------------------------------------------------

def _participants(lead: Agent, participants: Sequence[Agent]) -> tuple[Agent, ...]:
    if isinstance(participants, (str, bytes)) or not isinstance(participants, Iterable):
        raise OrchestrationError("participants must be a list of agents")
    members = list(participants)
    for item in members:
        if not isinstance(item, Agent):
            raise OrchestrationError(
                f"participants must be agents, got a {type(item).__name__}: {item!r}")
    if lead not in members:
        members.insert(0, lead)
    seen: set[str] = set()
    for item in members:
        if item.id in seen:
            raise OrchestrationError(f"{item.name!r} (id {item.id}) is listed twice in "
                                     "participants")
        seen.add(item.id)
    if len(members) < 2:
        raise OrchestrationError("an orchestration needs at least two participants")
    return tuple(members)


def _routes(members: tuple[Agent, ...], flow: Sequence[Any]) -> dict[Agent, tuple[Agent, ...]]:
    if isinstance(flow, (str, bytes, Mapping)) or not isinstance(flow, Iterable):
        raise OrchestrationError('flow must be a list of edges such as {"from": a, "to": b}')
    edges = list(flow)
    if not edges:
        raise OrchestrationError('flow is empty: give edges such as {"from": lead, "to": "*"}')
    reach: dict[Agent, list[Agent]] = {}

    def link(source: Agent, target: Agent) -> None:
        if target is not source and target not in reach.setdefault(source, []):
            reach[source].append(target)

    for index, edge in enumerate(edges):
        sources, targets, both, wild = _edge(members, edge, index)
        for source in sources:
            for target in targets:
                if target is source and not wild:
                    raise OrchestrationError(f"flow[{index}]: {source.name!r} cannot message "
                                             "itself")
                link(source, target)
                if both:
                    link(target, source)
    order = {agent: i for i, agent in enumerate(members)}
    return {source: tuple(sorted(reach[source], key=order.__getitem__))
            for source in sorted(reach, key=order.__getitem__) if reach[source]}


def _edge(members: tuple[Agent, ...], edge: Any, index: int
          ) -> tuple[list[Agent], list[Agent], bool, bool]:
    """The sources, the targets, whether the edge goes both ways, and whether an end is
    ``"*"`` (which leaves out each source itself)."""
    where = f"flow[{index}]"
    if isinstance(edge, Mapping):
        unknown = set(edge) - {"from", "to", "bidirectional"}
        if unknown:
            raise OrchestrationError(f"{where}: unknown key(s) {sorted(map(str, unknown))}; "
                                     "an edge has 'from', 'to' and 'bidirectional'")
        if "from" not in edge or "to" not in edge:
            raise OrchestrationError(f"{where}: an edge needs 'from' and 'to'")
        both = edge.get("bidirectional", False)
        if not isinstance(both, bool):
            raise OrchestrationError(f"{where}: bidirectional must be True or False")
        source, target = edge["from"], edge["to"]
    elif isinstance(edge, (tuple, list)) and len(edge) == 2:
        (source, target), both = edge, False
    else:
        raise OrchestrationError(
            f'{where}: an edge is {{"from": a, "to": b}} or (a, b), got {edge!r}')
    wild = any(isinstance(v, str) and v == "*" for v in (source, target))
    return _ends(members, source, where), _ends(members, target, where), both, wild


def _ends(members: tuple[Agent, ...], value: Any, where: str) -> list[Agent]:
    if isinstance(value, str) and value == "*":
        return list(members)
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise OrchestrationError(f"{where}: an empty list of agents")
    return [_member(members, v, where) for v in values]


def _member(members: tuple[Agent, ...], value: Any, where: str) -> Agent:
    if isinstance(value, Agent):
        if value in members:
            return value
        raise OrchestrationError(f"{where}: {value.name!r} (id {value.id}) is not among the "
                                 "participants")
    if isinstance(value, str):
        named = [a for a in members if a.name == value]
        if len(named) == 1:
            return named[0]
        if named:
            raise OrchestrationError(f"{where}: {len(named)} participants are named "
                                     f"{value!r}: use the agents themselves")
        raise OrchestrationError(f"{where}: no participant is named {value!r}")
    raise OrchestrationError(f"{where}: expected an agent, a participant's name or '*', got "
                             f"{type(value).__name__}")


# -- helpers ----------------------------------------------------------------------------------

def _instructions_block(targets: tuple[Agent, ...]) -> str:
    lines = ["<orchestration>",
             "You are part of a team of agents. To ask one of them, call the "
             f"{MESSAGE_TOOL} tool with its id and your message: its answer is the result.",
             "Agents you can message:"]
    for target in targets:
        description = _one_line(target.description) or "(no description)"
        tools = [t for t in target.options.tools if t.name != MESSAGE_TOOL]
        tools_text = "; ".join(
            f"{t.name} ({_one_line(t.description)})" if t.description else t.name for t in tools)
        lines.append(f"- {target.name} (id {target.id}): {description}"
                     + (f" Tools: {tools_text}" if tools_text else ""))
    lines.append("</orchestration>")
    return "\n".join(lines)


def _without(current: str | None, before: str | None, block: str) -> str | None:
    """``current`` instructions without the block ``orchestrate`` appended."""
    if current is None or block not in current:
        return current  # replaced since: nothing of ours is left
    if current == (f"{before}\n\n{block}" if before else block):
        return before
    return current.replace(f"\n\n{block}", "", 1).replace(block, "", 1)


def _tree(agent: Agent) -> list[Agent]:
    out, todo = [], [agent]
    while todo:
        node = todo.pop()
        out.append(node)
        todo.extend(node.forks)
    return out


def _find(targets: tuple[Agent, ...], wanted: Any) -> Agent | None:
    for target in targets:
        if wanted == target.id:
            return target
    named = [t for t in targets if t.name == wanted]
    return named[0] if len(named) == 1 else None


def _outcome(target: Agent, state: AgentState) -> tuple[Status, str]:
    text = _answer_text(state)
    if state.outcome == "paused":
        names = ", ".join(sorted({p.name for p in state.pending}))
        return "waiting", (f"{target.name} is waiting for a person to decide on its tool "
                           f"call(s) ({names}); its answer is not available yet.")
    if state.outcome == "finished":
        return "answered", text or f"({target.name} answered with no text)"
    why = {"step_limit": "reached its step limit",
           "budget": "ran out of budget"}.get(str(state.outcome), "was stopped")
    return "unfinished", f"{target.name} {why} before answering." + (
        f" Its last words: {text}" if text else "")


def _answer_text(state: AgentState) -> str:
    last = state.last_message
    if last is None or last.get("role") != "assistant":
        return ""
    content = last.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _clip(text: str, size: int = 80) -> str:
    text = _one_line(text)
    return text if len(text) <= size else text[: size - 1] + "…"


def _who(agent: Agent, lead: Agent) -> str:
    return f"{agent.name!r} (id {agent.id}{', the lead' if agent is lead else ''})"
