"""Save a session (agents, their forks, stores, pending approvals) to one JSON file; load it.

>>> save_session("work.json", agent)                                  # doctest: +SKIP
>>> session = load_session("work.json", fragola, tools=[add], listeners=[log])  # doctest: +SKIP
>>> agent = session["calculator"]                                     # doctest: +SKIP

What is saved: every tree the given agents belong to (from its root, all forks), each agent's
id, ``fork_of``, ``fork_point``, ``fork_at``, messages (as the agent reads them, its
``edit()``s included), step count, status and outcome, options (tools by
name), own stores, pending calls with their decisions, listeners by ``__qualname__`` and usage
(each model call's reported tokens, so ``agent.usage`` and its cost come back); plus
the ``Fragola`` instance's stores. What is not: the API key and client (they stay with the
``Fragola`` you load into), credentials in model settings (any header, query or body value
whose name or text ``fragola_nb.base.redact`` takes for one: dropped, each logged as a warning and
its path listed in the agent's ``credentials_not_saved``; loading warns again), and code:
tools and listeners are re-bound by name from what ``load_session`` is given.

The file (``schema.FORMAT``, version 1) holds ``stores``, ``histories`` and ``agents``.
Histories are stored once each, as in memory: a fork's history names its parent's as ``base``
and keeps only its own messages, so a tree of forks costs no more than its messages; a history
``agent.edit`` made also holds the messages it reads in place of its base's (``edits``), so
the parent keeps the original and the fork its edit, as in memory. Files written before
``edits`` and ``fork_at`` existed load as they did (``fork_at`` None).
Writes are atomic (a temporary file in the same directory, flushed, fsynced, then renamed over
the old one); a failed save leaves the previous file as it was.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from fragola_nb.base.errors import BadUsage, SessionError
from fragola_nb.base.redact import redacted_texts
from fragola_nb.core.agent import Agent
from fragola_nb.core.events import Listener
from fragola_nb.core.fragola import Fragola
from fragola_nb.core.stores import Store
from fragola_nb.core.tools import Tool, check_tools
from fragola_nb.sessions.atomic import atomic_write, entry_path
from fragola_nb.sessions.load import build_agents, check_document
from fragola_nb.sessions.save import document_of, listener_name, locate, not_json
from fragola_nb.sessions.schema import parse_session

__all__ = ["Session", "load_session", "save_session", "session_from_json", "session_to_json"]

_log = logging.getLogger("fragola_nb")


class Session:
    """What ``load_session`` returns: the agents, parents before their forks.

    ``session[key]`` finds an agent by id, else by name (a name shared by two agents must be
    looked up by id); ``roots`` are the agents that are no fork.
    """

    def __init__(self, agents: Sequence[Agent]) -> None:
        self.agents: tuple[Agent, ...] = tuple(agents)

    @property
    def roots(self) -> tuple[Agent, ...]:
        return tuple(agent for agent in self.agents if agent.parent is None)

    @property
    def by_id(self) -> dict[str, Agent]:
        return {agent.id: agent for agent in self.agents}

    def __getitem__(self, key: str) -> Agent:
        for agent in self.agents:
            if agent.id == key:
                return agent
        named = [agent for agent in self.agents if agent.name == key]
        if len(named) == 1:
            return named[0]
        if named:
            ids = ", ".join(agent.id for agent in named)
            raise KeyError(f"{len(named)} agents are named {key!r}: use an id ({ids})")
        raise KeyError(f"no agent with the id or name {key!r}")

    def __iter__(self) -> Iterator[Agent]:
        return iter(self.agents)

    def __len__(self) -> int:
        return len(self.agents)

    def save(self, path: str | os.PathLike[str], **options: Any) -> Path:
        """``save_session(path, self.agents, ...)``."""
        return save_session(path, self.agents, **options)

    def __repr__(self) -> str:
        names = ", ".join(repr(agent.name) for agent in self.agents)
        return f"Session({len(self.agents)} agents: {names})"


# -- saving -----------------------------------------------------------------------------------

Agents = Agent | Session | Iterable[Agent]


def save_session(path: str | os.PathLike[str], agents: Agents, *,
                 fragola: Fragola | None = None, listeners: bool = True) -> Path:
    """Write the trees of ``agents`` (an agent, several, or a ``Session``) to ``path``.

    Every agent must be idle or waiting (``BadUsage`` while one is generating: stop it or
    await its turn). ``fragola`` is needed only when ``agents`` is empty (to save its stores).
    ``listeners=False`` saves no listener. Returns the path written.
    """
    target = entry_path(path)
    atomic_write(target, session_to_json(agents, fragola=fragola, listeners=listeners))
    return target


def session_to_json(agents: Agents, *, fragola: Fragola | None = None,
                    listeners: bool = True) -> str:
    """The text ``save_session`` writes; checked by the loader's own checks first, so a
    session that is written can be read (``SessionError`` otherwise)."""
    given = [agents] if isinstance(agents, Agent) else list(agents)
    if any(not isinstance(agent, Agent) for agent in given):
        raise BadUsage("save_session takes an Agent, a list of agents, or a Session")
    fragolas = {id(agent.fragola): agent.fragola for agent in given}
    if fragola is not None:
        fragolas[id(fragola)] = fragola
    if len(fragolas) != 1:
        raise BadUsage("save_session needs agents of one Fragola instance (or fragola=)")
    document = document_of(given, next(iter(fragolas.values())), listeners=listeners)
    # No credential in the file: a key a server quoted into a message, the credentials in use
    # (fragola_nb.base.inuse) and the known shapes, by text (settings are scrubbed by name).
    document = redacted_texts(document)
    try:
        text = json.dumps(document, ensure_ascii=True, allow_nan=False, indent=1,
                          default=not_json)
    except (TypeError, ValueError, RecursionError) as exc:
        raise SessionError(f"session not saved: {locate(document)}{exc}") from exc
    try:
        check_document(parse_session(text))
    except SessionError as exc:
        raise SessionError(f"session not saved, it could not be loaded back: {exc}") from None
    return text


# -- loading ----------------------------------------------------------------------------------

ListenerSpec = Mapping[str, Listener | None] | Iterable[Listener]


def load_session(path: str | os.PathLike[str], fragola: Fragola, *,
                 tools: Iterable[Tool] = (), listeners: ListenerSpec = (),
                 hooks: ListenerSpec = ()) -> Session:
    """Load the session at ``path`` into ``fragola`` (which brings the model and the key).

    ``tools`` are matched to the saved names by ``tool.name``; ``listeners`` by
    ``__qualname__`` (a list of functions), or given as ``{name: function}``, where ``None``
    drops a listener. Anything missing, and any file that is corrupted, truncated or not a
    possible state, raises ``SessionError`` before anything changes. The ``Fragola``'s stores
    get the saved values (a store it lacks is added). ``OSError`` if the file cannot be read.
    ``hooks`` (``agent.use``) are given like listeners, ``{name: hook}`` or a list matched by
    ``__qualname__``, and each is run again on the agent that had it.
    """
    data = Path(path).read_bytes()
    try:
        return session_from_json(data, fragola, tools=tools, listeners=listeners, hooks=hooks)
    except SessionError as exc:
        # The message names the file it is about (a notebook may load several).
        exc.args = (f"{os.fspath(path)}: {exc}", *exc.args[1:])
        raise


def session_from_json(data: bytes | str, fragola: Fragola, *, tools: Iterable[Tool] = (),
                      listeners: ListenerSpec = (), hooks: ListenerSpec = ()) -> Session:
    """``load_session`` from the file's text."""
    if not isinstance(fragola, Fragola):
        raise BadUsage("load_session needs the Fragola instance to load the agents into")
    document = parse_session(data)
    check_document(document)
    by_name = {tool.name: tool for tool in check_tools(tools)}
    agents = build_agents(document, fragola, by_name, _listener_map(listeners),
                          _listener_map(hooks))
    _report_not_saved(document)
    for saved in document["stores"]:
        store = fragola.get_store(saved["namespace"])
        if store is None:
            fragola.add_store(Store(saved["value"], saved["namespace"]))
        else:
            store.set(saved["value"])
    return Session(agents)


def _report_not_saved(document: dict[str, Any]) -> None:
    """Say which settings the file left out as credentials: requests may need them again."""
    for record in document["agents"]:
        paths = [" ".join(path.split()) for path in record.get("credentials_not_saved", ())]
        if paths:
            _log.warning("fragola_nb: agent %r was saved without %s (credentials are never "
                         "written to a session); set them again if its requests need them",
                         record["options"]["name"], ", ".join(paths))


def _listener_map(listeners: ListenerSpec) -> dict[str, Listener | None]:
    if isinstance(listeners, Mapping):
        for name, fn in listeners.items():
            if fn is not None and not callable(fn):
                raise BadUsage(f"listeners[{name!r}] must be a function or None")
        return dict(listeners)
    out: dict[str, Listener | None] = {}
    for fn in listeners:
        if not callable(fn):
            raise BadUsage(f"listeners takes functions, got {type(fn).__name__}")
        name = listener_name(fn)
        if out.setdefault(name, fn) != fn:
            raise BadUsage(f"two different listeners are named {name!r}: pass "
                           "listeners={name: function} instead")
    return out
