"""Loading a session: the checks a schema cannot express, then the agents, built in full.

``check_document`` refuses anything a live agent could not be in: histories that are not a
forest (each based on an earlier one, never past its end), an edit of a message a history
does not read from its base, agents sharing a history, a ``fork_of`` that names nobody or
loops, a ``fork_at`` that is not the fork's ``fork_point``, a tool message answering no
call, a call left unanswered before the last reply (both judged on the messages as the
agent reads them, edits applied), pending calls that are not exactly the open calls of a
waiting agent (same names, same arguments), two stores under one namespace.
``build_agents`` then re-binds tools and listeners by name; a missing one is reported before
any agent exists, and nothing outside the new agents is touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from fragola_nb.base.errors import SessionError
from fragola_nb.core.agent import Agent
from fragola_nb.core.context import AgentOptions
from fragola_nb.core.conversation import AgentSnapshot
from fragola_nb.core.events import Listener
from fragola_nb.core.history import History
from fragola_nb.core.hooks import Hook
from fragola_nb.core.instructions import Scopes
from fragola_nb.core.run.loop import parse_arguments
from fragola_nb.core.schemas import ArgumentsRejected
from fragola_nb.core.state import Decision, PendingCall
from fragola_nb.core.stores import Store
from fragola_nb.core.timing import TIMING_FIELDS, ToolTiming
from fragola_nb.core.usage import CallUsage, Usage
from fragola_nb.models.client import settings_problem

if TYPE_CHECKING:
    from fragola_nb.core.fragola import Fragola
    from fragola_nb.core.tools import Tool

__all__ = ["build_agents", "check_document", "label"]


def _fail(message: str) -> NoReturn:
    raise SessionError(f"invalid session file: {message}")


def label(record: dict[str, Any]) -> str:
    return f"agent {record['options']['name']!r} (id {record['id']})"


def check_document(document: dict[str, Any]) -> None:
    """Raise ``SessionError`` unless ``document`` (already schema-valid) is a possible state."""
    histories = document["histories"]
    lengths: list[int] = []
    for index, record in enumerate(histories):
        base, start = record["base"], record["base_length"]
        if base is None and start:
            _fail(f"histories[{index}] has a base_length but no base")
        if base is not None and base >= index:
            _fail(f"histories[{index}] must be based on an earlier history, not {base}")
        if base is not None and start > lengths[base]:
            _fail(f"histories[{index}] starts after message {start} of histories[{base}], "
                  f"which holds only {lengths[base]}")
        _check_edits(record.get("edits", ()), start, index)
        lengths.append(start + len(record["messages"]))
    agents = document["agents"]
    by_id: dict[str, dict[str, Any]] = {}
    used: set[int] = set()
    for record in agents:
        if record["id"] in by_id:
            _fail(f"two agents have the id {record['id']!r}")
        if record["history"] >= len(histories):
            _fail(f"{label(record)} names histories[{record['history']}], which does not exist")
        if record["history"] in used:
            _fail(f"{label(record)} shares histories[{record['history']}] with another agent")
        used.add(record["history"])
        by_id[record["id"]] = record
    needed: set[int] = set()
    for index in used:
        node: int | None = index
        while node is not None and node not in needed:
            needed.add(node)
            node = histories[node]["base"]
    if len(needed) != len(histories):
        unused = sorted(set(range(len(histories))) - needed)
        _fail(f"histories {unused} belong to no agent")
    _check_tree(agents, by_id, histories)
    _check_stores(document["stores"], "the Fragola stores")
    # The messages each agent will read, edits and all: checked as it will see them.
    nodes = _history_nodes(histories)
    for record in agents:
        _check_agent(record, nodes[record["history"]].to_list())


def _check_edits(edits: Any, start: int, index: int) -> None:
    """An edit replaces a message this history reads from its base (``History.edited``):
    its index lies below ``base_length``, and one index is edited once."""
    seen: set[int] = set()
    for edit in edits:
        if edit["index"] >= start:
            _fail(f"histories[{index}] edits message {edit['index']}, which is not one of "
                  f"the {start} it reads from its base")
        if edit["index"] in seen:
            _fail(f"histories[{index}] edits message {edit['index']} twice")
        seen.add(edit["index"])


def _check_tree(agents: list[dict[str, Any]], by_id: dict[str, dict[str, Any]],
                histories: list[dict[str, Any]]) -> None:
    listed: set[str] = set()
    for record in agents:
        parent_id = record["fork_of"]
        if parent_id is None:
            if record["fork_point"]:
                _fail(f"{label(record)} is no fork but has a fork_point")
        elif parent_id not in by_id:
            _fail(f"{label(record)} is a fork of {parent_id!r}, which is not in the file")
        elif parent_id not in listed:
            seen, node = {record["id"]}, by_id[parent_id]
            while node["fork_of"] is not None and node["id"] not in seen:
                seen.add(node["id"])
                node = by_id.get(node["fork_of"], {"fork_of": None, "id": ""})
            if node["id"] in seen:
                _fail(f"fork_of makes a cycle through {label(record)}")
            _fail(f"{label(record)} is listed before its parent {parent_id!r}")
        else:
            history = histories[record["history"]]
            if (history["base"] == by_id[parent_id]["history"]
                    and history["base_length"] != record["fork_point"]):
                _fail(f"{label(record)} has fork_point {record['fork_point']} but shares "
                      f"{history['base_length']} messages with its parent")
        fork_at = record.get("fork_at")
        if fork_at is not None and (parent_id is None or fork_at != record["fork_point"]):
            _fail(f"{label(record)} has fork_at {fork_at} but "
                  + ("is no fork" if parent_id is None
                     else f"holds {record['fork_point']} of its parent's messages"))
        listed.add(record["id"])


def _check_stores(stores: list[dict[str, Any]], where: str) -> None:
    names = [store["namespace"] for store in stores]
    if len(set(names)) != len(names):
        _fail(f"{where} use one namespace twice")


def _open_calls(messages: list[dict[str, Any]], who: str) -> dict[str, dict[str, Any]]:
    """The unanswered calls of the last assistant message; any other gap is an error."""
    open_calls: dict[str, dict[str, Any]] = {}
    opened_at = -1
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            if open_calls.pop(message["tool_call_id"], None) is None:
                _fail(f"{who}: message {index} answers tool call "
                      f"{message['tool_call_id']!r}, which is not an open call of the "
                      "assistant message before it")
            continue
        if open_calls:
            _fail(f"{who}: tool call(s) {', '.join(map(repr, open_calls))} of message "
                  f"{opened_at} are never answered")
        if message["role"] == "assistant":
            calls = message.get("tool_calls") or []
            open_calls = {call["id"]: call for call in calls}
            opened_at = index
            if len(open_calls) != len(calls):
                _fail(f"{who}: message {index} has two tool calls with one id")
    return open_calls


def _check_hooks(hooks: list[dict[str, Any]], who: str) -> None:
    """One agent cannot have two hooks of one name (``agent.use`` refuses it): refused here,
    before any hook runs, rather than half-way through putting them on again."""
    names = [saved["name"] for saved in hooks if saved["name"] is not None]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        _fail(f"{who} lists the hook {twice[0]!r} twice")


def _check_agent(record: dict[str, Any], messages: list[dict[str, Any]]) -> None:
    who = label(record)
    problem = settings_problem(record["options"]["model_settings"])
    if problem:
        _fail(f"{who}: {problem}")
    _check_stores(record["stores"], f"the stores of {who}")
    _check_hooks(record.get("hooks", ()), who)
    open_calls = _open_calls(messages, who)
    pending = record["pending"]
    waiting = record["status"] == "waiting"
    if waiting != (record["outcome"] == "paused"):
        _fail(f"{who}: status {record['status']!r} does not go with outcome "
              f"{record['outcome']!r}")
    if not waiting:
        if pending:
            _fail(f"{who} is idle but has pending calls")
        return
    ids = [call["id"] for call in pending]
    if not pending or len(set(ids)) != len(ids) or set(ids) != set(open_calls):
        _fail(f"{who}: the pending calls {ids} are not the open tool calls "
              f"{list(open_calls)} of its last assistant message")
    for call in pending:
        function = open_calls[call["id"]]["function"]
        arguments, problem = parse_arguments(function["arguments"])
        if function["name"] != call["name"] or problem or arguments != call["arguments"]:
            _fail(f"{who}: pending call {call['id']!r} differs from the call the model made")
        if call["reason"] == "dynamic" and (call["decision"] or {}).get("kind") == "approve":
            _fail(f"{who}: pending call {call['id']!r} is dynamic and cannot be approved")


# -- building ---------------------------------------------------------------------------------


def missing_names(document: dict[str, Any], tools: Mapping[str, Tool],
                  listeners: Mapping[str, Listener | None],
                  hooks: Mapping[str, Hook | None] | None = None) -> str:
    """What the caller must still pass to load this document ("" when nothing)."""
    need_tools: dict[str, list[str]] = {}
    need_listeners: dict[str, list[str]] = {}
    need_hooks: dict[str, list[str]] = {}
    for record in document["agents"]:
        for saved in record.get("hooks", ()):
            if _hook_key(saved, hooks or {}) is None:
                need_hooks.setdefault(saved["name"] or saved["hook"], []).append(
                    repr(record["options"]["name"]))
        names = [*record["options"]["tools"], *(call["name"] for call in record["pending"])]
        for name in dict.fromkeys(names):
            if name not in tools:
                need_tools.setdefault(name, []).append(record["options"]["name"])
        for event, fns in record["listeners"].items():
            for name in fns:
                if name not in listeners:
                    need_listeners.setdefault(name, []).append(
                        f"on_{event} of {record['options']['name']!r}")
    parts = [f"tool {name!r} (agents {', '.join(map(repr, dict.fromkeys(who)))})"
             for name, who in need_tools.items()]
    parts += [f"listener {name!r} ({', '.join(dict.fromkeys(who))})"
              for name, who in need_listeners.items()]
    parts += [f"hook {name!r} (agents {', '.join(dict.fromkeys(who))})"
              for name, who in need_hooks.items()]
    return "; ".join(parts)


def _hook_key(saved: dict[str, Any], hooks: Mapping[str, Hook | None]) -> str | None:
    """Where ``hooks`` holds a saved hook: under its name, else its ``__qualname__``."""
    for key in (saved["name"], saved["hook"]):
        if key is not None and key in hooks:
            return str(key)
    return None


def _history_nodes(histories: list[dict[str, Any]]) -> list[History]:
    nodes: list[History] = []
    for record in histories:
        # The same sharing ``History.fork`` sets up, and ``History.edited``'s replacements.
        base = nodes[record["base"]] if record["base"] is not None else None
        edits = {edit["index"]: edit["message"] for edit in record.get("edits") or ()}
        nodes.append(History.linked(record["messages"], base, record["base_length"], edits))
    return nodes


def pending_call(call: dict[str, Any], tool: Tool, who: str) -> PendingCall:
    decision = call["decision"]
    try:
        params = tool.parse_arguments(call["arguments"])
        made: Decision | None = None
        if decision is not None and decision["kind"] == "approve":
            edited = decision["params"]
            made = Decision("approve", params=None if edited is None
                            else tool.parse_arguments(edited))
        elif decision is not None:
            made = Decision(decision["kind"], text=decision.get("reason", decision.get("result")))
    except ArgumentsRejected as exc:
        raise SessionError(f"invalid session file: {who}: the arguments of pending call "
                           f"{call['id']!r} no longer fit the tool {tool.name!r}:\n{exc}") from exc
    return PendingCall(call["id"], call["name"], params, call["arguments"], call["reason"], made)


def _call_usage(record: dict[str, Any]) -> CallUsage:
    # The timing fields a file holds (an older file: none, the call's timing is unknown).
    started, ttft, seconds = (record.get(name) for name in TIMING_FIELDS)
    cached, offline = record.get("cached") is True, record.get("offline") is True
    if record.get("reported") is False:
        return CallUsage(record["model"], 0, 0, 0, 0, False, started, ttft, seconds, cached,
                         offline)
    return CallUsage(record["model"], record["prompt_tokens"], record["completion_tokens"],
                     record["total_tokens"], record.get("cached_tokens", 0), True, started,
                     ttft, seconds, cached, offline)


def build_agents(document: dict[str, Any], fragola: Fragola, tools: Mapping[str, Tool],
                 listeners: Mapping[str, Listener | None],
                 hooks: Mapping[str, Hook | None] | None = None) -> list[Agent]:
    """The agents of a checked ``document``, linked into their trees; each saved hook is
    run again on its agent once the trees are built."""
    hooks = hooks or {}
    missing = missing_names(document, tools, listeners, hooks)
    if missing:
        raise SessionError(f"load_session needs what the session names: {missing}. Pass them "
                           "as tools=[...], listeners={name: function} and "
                           "hooks={name: hook}")
    nodes = _history_nodes(document["histories"])
    by_id: dict[str, Agent] = {}
    for record in document["agents"]:
        options = record["options"]
        agent = Agent(
            fragola,
            AgentOptions(**{**options, "tools": [tools[name] for name in options["tools"]]}),
            stores=[Store(store["value"], store["namespace"]) for store in record["stores"]],
        )
        agent.id, agent.fork_of, agent.fork_point = record["id"], None, record["fork_point"]
        agent.fork_at = record.get("fork_at")  # older files: None, as a fork at the end
        agent.restore(AgentSnapshot(
            history=nodes[record["history"]],
            step_count=record["step_count"], status=record["status"],
            outcome=record["outcome"],
            usage=Usage(tuple(_call_usage(call) for call in record.get("usage", ())),
                        fragola.prices,  # priced as the Fragola loaded into prices
                        tuple(ToolTiming(**tool) for tool in record.get("tool_timings", ()))),
            pending={call["id"]: pending_call(call, tools[call["name"]], label(record))
                     for call in record["pending"]},
            scopes=Scopes(record.get("instruction_scopes", {}))))
        for event, names in record["listeners"].items():
            for name in names:
                listener = listeners[name]
                if listener is not None:  # mapped to None: dropped on purpose
                    agent.on(event, listener)
        if record["fork_of"] is not None:
            # In the saved order; automatic fork names go on from the number of forks.
            by_id[record["fork_of"]].adopt(agent)
        by_id[agent.id] = agent
    for record in document["agents"]:
        for saved in record.get("hooks", ()):
            hook = hooks[str(_hook_key(saved, hooks))]
            if hook is not None:  # mapped to None: dropped on purpose
                by_id[record["id"]].use(hook, saved["name"])
    return list(by_id.values())
