"""``Fragola.record``, ``Fragola.replay`` and ``Fragola.cached``: real exchanges kept as JSON
Lines, served again offline over real HTTP (or, cached, answered from the file when asked
again: :mod:`.cache`).

A teacher records a lesson once, with a key::

    fragola = Fragola.record("lesson.jsonl", model="gpt-4o-mini")   # as Fragola(...)

and students run the same cells offline, without a key::

    fragola = Fragola.replay("lesson.jsonl")

Recording wraps the transport of each HTTP client fragola_nb makes (one per event loop), so
what is kept is what went over the wire (:mod:`.recordfile` has the format). Replaying runs
the package's scripted model on loopback with a brain that answers from the file
(:mod:`.replayer`), so the ``openai`` client, its streaming and its errors all run for real.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import openai

from fragola_nb.base.errors import BadUsage
from fragola_nb.models.recording.cache import REPEAT_INDEX, Cache, caching_through
from fragola_nb.models.recording.recordfile import Appender, read_recording
from fragola_nb.models.recording.replayer import DEFAULT_IGNORED, Replayer
from fragola_nb.models.recording.transport import naming_agents, recording_through
from fragola_nb.models.scripted import ScriptedModel

__all__ = ["DEFAULT_IGNORED", "REPEAT_INDEX", "Replay", "cacher", "check_recording", "recorder",
           "start_replay"]

REPLAY_KEY = "replay-offline"
"""The API key a replaying client sends its loopback server (it checks none)."""
_APPLIED = frozenset({"timeout", "max_retries"})
"""``openai.AsyncOpenAI`` options a replay applies; the others concern a real connection."""
_OWN = frozenset({"self", "api_key", "base_url", "client"})


Wrap = Callable[[httpx2.AsyncClient], httpx2.AsyncClient]
"""What ``ModelClient.wrap_http`` takes: each HTTP client made, wrapped."""


def check_recording(options: dict[str, Any], what: str = "Fragola.record") -> None:
    """Refuse what ``Fragola.record(path, **options)`` (or ``what``: ``Fragola.cached``)
    cannot record (before any file is made)."""
    for name in ("client", "http_client"):
        if options.get(name) is not None:
            raise BadUsage(
                f"{what} cannot record through a {name}= you made (its requests do "
                "not pass through fragola_nb's transport): pass its settings instead "
                "(api_key=, base_url=, timeout=, default_headers=...)")
    configured = (options.get("api_key") or options.get("base_url")
                  or os.environ.get("OPENAI_API_KEY", "").strip()
                  or os.environ.get("OPENAI_BASE_URL", "").strip())
    if not configured:  # Fragola's own message would suggest running offline: not a recording
        raise BadUsage(
            f"{what} needs a model API to record: pass api_key= or set OPENAI_API_KEY "
            "(a local server needs only base_url= or OPENAI_BASE_URL); offline, replay a "
            "recording with Fragola.replay(path)")


def recorder(path: str | os.PathLike[str]) -> Wrap:
    """The HTTP wrapping that appends every chat exchange to ``path``."""
    return recording_through(Appender(path))


def cacher(path: str | os.PathLike[str]) -> Wrap:
    """The HTTP wrapping that answers from the cache file ``path`` and appends to it
    (:mod:`.cache`); a ``BadUsage`` when ``path`` is not a recording."""
    return caching_through(Cache(path))


@dataclass(frozen=True)
class Replay:
    """A scripted model answering from a recording, and what a ``Fragola`` on it is made with."""

    server: ScriptedModel
    options: dict[str, Any]  # api_key, base_url, and the options given that a Fragola takes
    wrap_http: Wrap = naming_agents  # tells the server which agent asks


def start_replay(path: str | os.PathLike[str], options: dict[str, Any],
                 own: set[str]) -> Replay:
    """A scripted model answering from the recording at ``path``, started; ``own`` names the
    options the ``Fragola`` takes by name besides its connection (``model``, ``stores``...).

    Options: ``model`` (default: the model of the first recorded request), ``fallback``
    (``"demo"`` or a brain ``(request) -> item`` for requests not in the recording),
    ``ignore`` (request fields left out of the comparison besides ``stream_options``),
    ``chunk_delay`` (seconds between streamed chunks), the options ``cls`` takes itself
    (``stores``...), ``timeout`` and ``max_retries``. Options that only concern a real API
    connection (``api_key``, ``base_url``, ``default_headers``...) are accepted and unused,
    so the options of a ``Fragola.record`` call can be passed as they are.
    """
    options = dict(options)
    fallback = _fallback(options.pop("fallback", None))
    # More fields left out, never fewer: stream_options only asks for the usage chunk.
    ignore = (*DEFAULT_IGNORED, *_ignored(options.pop("ignore", ())))
    chunk_delay = options.pop("chunk_delay", 0.0)
    if isinstance(chunk_delay, bool) or not isinstance(chunk_delay, (int, float)) \
            or not chunk_delay >= 0:
        raise BadUsage(f"chunk_delay must be a number of seconds >= 0, got {chunk_delay!r}")
    own_given = {name: options.pop(name) for name in own - _OWN if name in options}
    applied = {name: options.pop(name) for name in _APPLIED if name in options}
    unknown = sorted(set(options) - _connection_options())
    if unknown:
        raise BadUsage(f"Fragola.replay does not take {', '.join(map(repr, unknown))}")
    where = Path(path)
    exchanges = read_recording(where)
    if own_given.get("model") is None:
        own_given["model"] = next((e.request["model"] for e in exchanges
                             if isinstance(e.request.get("model"), str)), None)
    replayer = Replayer(where.name, exchanges, ignore=ignore, fallback=fallback)
    server = ScriptedModel(brain=replayer, chunk_delay=float(chunk_delay),
                           model_name=own_given["model"] or "scripted")
    replayer.model = server
    return Replay(server, {"api_key": REPLAY_KEY, "base_url": server.start().base_url,
                           **own_given, **applied})


def _fallback(value: Any) -> Callable[[dict[str, Any]], Any] | None:
    if value is None:
        return None
    if value == "demo":
        from fragola_nb.models.scripted import demo_brain

        return demo_brain
    if callable(value):
        return value  # type: ignore[no-any-return]
    raise BadUsage(f"fallback must be 'demo', a brain (request) -> item, or None, not {value!r}")


def _ignored(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise BadUsage(f"ignore must be a list of request field names, not {value!r}")
    names = tuple(value)
    if not all(isinstance(name, str) for name in names):
        raise BadUsage(f"ignore must be a list of request field names, not {value!r}")
    return names


def _connection_options() -> set[str]:
    parameters = inspect.signature(openai.AsyncOpenAI.__init__).parameters
    return (set(parameters) | _OWN) - {"self"}
