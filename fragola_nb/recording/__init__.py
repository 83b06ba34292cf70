"""``Fragola.record`` and ``Fragola.replay``: real exchanges kept as JSON Lines, served again
offline over real HTTP.

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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai

from ..errors import BadUsage
from .recordfile import Appender, read_recording
from .replayer import DEFAULT_IGNORED, Replayer
from .transport import naming_agents, recording_through

if TYPE_CHECKING:
    from ..fragola import Fragola

__all__ = ["DEFAULT_IGNORED", "start_recording", "start_replay"]

REPLAY_KEY = "replay-offline"
"""The API key a replaying client sends its loopback server (it checks none)."""
_APPLIED = frozenset({"timeout", "max_retries"})
"""``openai.AsyncOpenAI`` options a replay applies; the others concern a real connection."""
_OWN = frozenset({"self", "api_key", "base_url", "client"})


def start_recording(
    cls: type[Fragola], path: str | os.PathLike[str], options: dict[str, Any]
) -> Fragola:
    """``cls(**options)``, every chat exchange of which is appended to ``path``."""
    for name in ("client", "http_client"):
        if options.get(name) is not None:
            raise BadUsage(
                f"Fragola.record cannot record through a {name}= you made (its requests do "
                "not pass through fragola_nb's transport): pass its settings instead "
                "(api_key=, base_url=, timeout=, default_headers=...)")
    configured = (options.get("api_key") or options.get("base_url")
                  or os.environ.get("OPENAI_API_KEY", "").strip()
                  or os.environ.get("OPENAI_BASE_URL", "").strip())
    if not configured:  # Fragola's own message would suggest running offline: not a recording
        raise BadUsage(
            "Fragola.record needs a model API to record: pass api_key= or set OPENAI_API_KEY "
            "(a local server needs only base_url= or OPENAI_BASE_URL); offline, replay a "
            "recording with Fragola.replay(path)")
    fragola = cls(**options)  # bad options fail before the file is touched
    fragola._model.wrap_http = recording_through(Appender(path))
    return fragola


def start_replay(
    cls: type[Fragola], path: str | os.PathLike[str], options: dict[str, Any]
) -> Fragola:
    """A ``cls`` on a scripted model answering from the recording at ``path``.

    Options: ``model`` (default: the model of the first recorded request), ``fallback``
    (``"demo"`` or a brain ``(request) -> item`` for requests not in the recording),
    ``ignore`` (request fields left out of the comparison besides ``stream_options``),
    ``chunk_delay`` (seconds between streamed chunks), the options ``cls`` takes itself
    (``stores``...), ``timeout`` and ``max_retries``. Options that only concern a real API
    connection (``api_key``, ``base_url``, ``default_headers``...) are accepted and unused,
    so the options of a ``Fragola.record`` call can be passed as they are.
    """
    from ..scripted import ScriptedModel

    options = dict(options)
    fallback = _fallback(options.pop("fallback", None))
    # More fields left out, never fewer: stream_options only asks for the usage chunk.
    ignore = (*DEFAULT_IGNORED, *_ignored(options.pop("ignore", ())))
    chunk_delay = options.pop("chunk_delay", 0.0)
    if isinstance(chunk_delay, bool) or not isinstance(chunk_delay, (int, float)) \
            or not chunk_delay >= 0:
        raise BadUsage(f"chunk_delay must be a number of seconds >= 0, got {chunk_delay!r}")
    own = {name: options.pop(name) for name in _own_options(cls) if name in options}
    applied = {name: options.pop(name) for name in _APPLIED if name in options}
    unknown = sorted(set(options) - _connection_options())
    if unknown:
        raise BadUsage(f"Fragola.replay does not take {', '.join(map(repr, unknown))}")
    where = Path(path)
    exchanges = read_recording(where)
    if own.get("model") is None:
        own["model"] = next((e.request["model"] for e in exchanges
                             if isinstance(e.request.get("model"), str)), None)
    replayer = Replayer(where.name, exchanges, ignore=ignore, fallback=fallback)
    server = ScriptedModel(brain=replayer, chunk_delay=float(chunk_delay),
                           model_name=own["model"] or "scripted")
    replayer.model = server
    try:
        fragola = cls(api_key=REPLAY_KEY, base_url=server.start().base_url, **own, **applied)
    except BaseException:
        server.stop()
        raise
    fragola._model.wrap_http = naming_agents
    fragola.scripted_model = server
    return fragola


def _fallback(value: Any) -> Callable[[dict[str, Any]], Any] | None:
    if value is None:
        return None
    if value == "demo":
        from ..scripted import demo_brain

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


def _own_options(cls: type[Fragola]) -> set[str]:
    """What ``cls`` takes by name besides the connection (``model``, ``stores``...)."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    return {p.name for p in parameters if p.kind is not p.VAR_KEYWORD} - _OWN


def _connection_options() -> set[str]:
    parameters = inspect.signature(openai.AsyncOpenAI.__init__).parameters
    return (set(parameters) | _OWN) - {"self"}
