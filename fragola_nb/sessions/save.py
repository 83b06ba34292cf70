"""Saving a session: live agents turned into the file's document (see ``session``).

Each ``History`` node is written once, with its base named by index, exactly as forks share
it in memory; a node no agent holds any more (its owner was reset or edited since) keeps only
the messages its forks still see. A node made by ``agent.edit`` (``History.edited``) also
writes the messages it reads in place of its base's (``edits``): without them the loaded
agent would read the message as its parent does, not as it was shown to the model.
Listeners are named by ``__qualname__``; two different ones under one name could not be told
apart on load, so that is refused here.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable, Iterator
from typing import Any

import pydantic

from fragola_nb.base.errors import BadUsage, SessionError
from fragola_nb.base.redact import scrub
from fragola_nb.core.agent import Agent
from fragola_nb.core.conversation import AgentSnapshot
from fragola_nb.core.events import Listener, is_transient
from fragola_nb.core.fragola import Fragola
from fragola_nb.core.history import History
from fragola_nb.core.hooks import hook_keys
from fragola_nb.core.state import PendingCall
from fragola_nb.core.stores import Store
from fragola_nb.core.timing import call_timing
from fragola_nb.core.tools import serialize_result
from fragola_nb.core.usage import CallUsage
from fragola_nb.sessions.load import label
from fragola_nb.sessions.schema import FORMAT, VERSION

__all__ = ["document_of", "listener_name", "locate", "not_json"]

_log = logging.getLogger("fragola_nb")


def document_of(given: list[Agent], fragola: Fragola, *, listeners: bool) -> dict[str, Any]:
    """The document for the trees of ``given`` and the stores of ``fragola``."""
    return _Dump(listeners).document(given, fragola)


def not_json(value: Any) -> Any:
    raise TypeError(f"a {type(value).__name__} is not a JSON value (sessions hold JSON only)")


def locate(document: dict[str, Any]) -> str:
    """Where the first value that is not JSON sits, for the error message."""
    sections: list[tuple[str, Any]] = [("the Fragola stores", document["stores"])]
    for record in document["agents"]:
        sections += [(f"{label(record)} {key}", record[key])
                     for key in ("options", "stores", "pending")]
    sections += [(f"the messages of histories[{index}]", record) for index, record
                 in enumerate(document["histories"])]
    for where, value in sections:
        try:
            json.dumps(value, allow_nan=False, default=not_json)
        except (TypeError, ValueError, RecursionError):
            return f"in {where}: "
    return ""


class _Dump:
    """Turns live agents into the file's document."""

    def __init__(self, with_listeners: bool) -> None:
        self.with_listeners = with_listeners
        self.histories: dict[int, int] = {}  # id(History) -> index in self.nodes
        self.nodes: list[History] = []
        self.listener_names: dict[str, Listener] = {}

    def document(self, given: list[Agent], fragola: Fragola) -> dict[str, Any]:
        every = [agent for root in dict.fromkeys(a.root for a in given) for agent in _walk(root)]
        for agent in every:
            if agent.status == "generating":
                raise BadUsage(f"agent {agent.name!r} is generating: stop it or await its "
                               "turn before saving")
        if len({agent.id for agent in every}) != len(every):
            raise BadUsage("two agents share one id; a session needs unique ids")
        snapshots = {agent.id: agent.snapshot() for agent in every}
        records = [self.agent(agent, snapshots[agent.id]) for agent in every]
        held = {id(snapshot.history) for snapshot in snapshots.values()}
        return {
            "format": FORMAT,
            "version": VERSION,
            "stores": _stores(fragola.stores.values()),
            "histories": [self.history(node, id(node) in held) for node in self.nodes],
            "agents": records,
        }

    def history_ref(self, history: History) -> int:
        chain: list[History] = []
        node: History | None = history
        while node is not None and id(node) not in self.histories:
            chain.append(node)
            node = node.base
        for node in reversed(chain):
            self.histories[id(node)] = len(self.nodes)
            self.nodes.append(node)
        return self.histories[id(history)]

    def history(self, node: History, held: bool) -> dict[str, Any]:
        own = node.own
        if not held:  # no agent holds it any more (reset since): keep what forks see
            seen = max(n.base_length for n in self.nodes if n.base is node)
            own = own[: seen - node.base_length]
        base = None if node.base is None else self.histories[id(node.base)]
        record: dict[str, Any] = {"base": base, "base_length": node.base_length,
                                  "messages": list(own)}
        edits = node.edits
        if edits:
            record["edits"] = [{"index": index, "message": message}
                               for index, message in sorted(edits.items())]
        return record

    def agent(self, agent: Agent, snapshot: AgentSnapshot) -> dict[str, Any]:
        options = agent.options
        settings, removed = scrub(options.model_settings, "model_settings")
        for where in removed:
            _log.warning("fragola_nb: %s of agent %r was not saved (credentials are never "
                         "written to a session)", where, agent.name)
        return {
            "id": agent.id,
            # A dropped fork (``agent.drop()``) is saved as the root of its own tree.
            "fork_of": agent.parent.id if agent.parent is not None else None,
            "fork_point": agent.fork_point if agent.parent is not None else 0,
            # Where ``fork(at=...)`` cut the parent; a fork at the end has none (None).
            **({"fork_at": agent.fork_at}
               if agent.parent is not None and agent.fork_at is not None else {}),
            "history": self.history_ref(snapshot.history),
            "step_count": snapshot.step_count,
            "status": snapshot.status,
            "outcome": snapshot.outcome,
            "options": {
                "name": options.name,
                "description": options.description,
                "instructions": options.instructions,
                "use_developer_role": options.use_developer_role,
                "model_settings": settings,
                "max_step": options.max_step,
                "reset_step_count_after_user_message":
                    options.reset_step_count_after_user_message,
                "tools": [tool.name for tool in options.tools],
            },
            "stores": _stores(agent.stores.values()),
            "pending": [pending_record(call) for call in snapshot.pending.values()],
            "listeners": self.listeners(agent) if self.with_listeners else {},
            **({"hooks": [{"name": name, "hook": key} for (name, _), key
                          in zip(agent.hooks_used(), hook_keys(agent.hooks_used()),
                                 strict=True)]}
               if self.with_listeners and agent.hooks_used() else {}),
            **({"instruction_scopes": snapshot.scopes.as_dict()} if len(snapshot.scopes)
               else {}),
            **({"credentials_not_saved": removed} if removed else {}),
            **({"usage": [_call_usage(call) for call in agent.usage.calls]}
               if agent.usage.calls else {}),
            **({"tool_timings": [dataclasses.asdict(tool) for tool in agent.usage.tools]}
               if agent.usage.tools else {}),
        }

    def listeners(self, agent: Agent) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        # A hook's listeners are not saved: the hook is, and puts them on again on load.
        for event, fns in agent.own_listeners().items():
            for fn in fns:
                if is_transient(fn):
                    continue  # a notebook panel's listener: part of the view, not the agent
                name = listener_name(fn)
                known = self.listener_names.setdefault(name, fn)
                if known is not fn and known != fn:
                    raise SessionError(
                        f"session not saved: two different listeners are named {name!r}, so "
                        "they could not be told apart on load; give them distinct names "
                        "(def ...), or save with listeners=False")
                out.setdefault(event, []).append(name)
        return out


def _walk(root: Agent) -> Iterator[Agent]:
    """The tree from ``root``, parents before forks, forks oldest first."""
    stack = [root]
    while stack:
        agent = stack.pop()
        yield agent
        stack.extend(reversed(agent.forks))


def _stores(stores: Iterable[Store[Any]]) -> list[dict[str, Any]]:
    return [{"namespace": store.namespace, "value": store.get()} for store in stores]


def _call_usage(call: CallUsage) -> dict[str, Any]:
    cached = {"cached": True} if call.cached else {}  # its cost stays out once loaded
    if call.offline:  # the scripted model or a replay: not paid either
        cached["offline"] = True
    if not call.reported:
        return {"model": call.model, "reported": False, **cached, **call_timing(call)}
    record = {"model": call.model, "prompt_tokens": call.prompt_tokens,
              "completion_tokens": call.completion_tokens, "total_tokens": call.total_tokens}
    if call.cached_tokens:
        record["cached_tokens"] = call.cached_tokens
    return {**record, **cached, **call_timing(call)}


def pending_record(call: PendingCall) -> dict[str, Any]:
    decision = call.decision
    made: dict[str, Any] | None = None
    if decision is not None and decision.kind == "approve":
        made = {"kind": "approve", "params": _params_json(decision.params)}
    elif decision is not None and decision.kind == "reject":
        made = {"kind": "reject", "reason": decision.text or ""}
    elif decision is not None:
        result: Any = decision.text
        try:
            json.dumps(result, allow_nan=False)
        except (TypeError, ValueError):
            result = serialize_result(result)  # the very text the model will be sent
        made = {"kind": "inject", "result": result}
    return {"id": call.id, "name": call.name, "arguments": call.arguments,
            "reason": call.reason, "decision": made}


def _params_json(params: Any) -> dict[str, Any] | None:
    """Edited arguments as the JSON object ``tool.parse_arguments`` takes back."""
    if params is None or isinstance(params, dict):
        return params
    if isinstance(params, pydantic.BaseModel):
        return params.model_dump(mode="json", by_alias=True)
    if hasattr(params, "json") and hasattr(params, "dict"):  # a pydantic.v1 model
        value = json.loads(params.json(by_alias=True))
        if isinstance(value, dict):
            return value
    raise SessionError(f"session not saved: edited arguments of type "
                       f"{type(params).__name__} cannot be written as JSON")


def listener_name(listener: Listener) -> str:
    """The name a listener is saved and re-bound under: its ``__qualname__``."""
    name = getattr(listener, "__qualname__", None)
    return name if isinstance(name, str) else type(listener).__qualname__
