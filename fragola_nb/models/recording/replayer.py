"""Serving a recording: the scripted model's brain during ``Fragola.replay``.

A request gets a recorded answer when its body equals a recorded request's, both scrubbed of
credentials and without the fields in ``ignore`` (``stream_options`` by default: it only asks
for a usage chunk, and the chunks are served as they were recorded, whatever it asks). The
same request recorded more than once gets its answers in the recorded order (a retried
error, then the answer), and again from the first when it is sent once more (a cell run
twice). Any other request fails with HTTP 409 and one line naming the agent, the closest
recorded request and the first message that differs, unless a ``fallback`` brain answers it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from fragola_nb.base.redact import redact_text, redacted
from fragola_nb.models.recording.recordfile import Exchange
from fragola_nb.models.recording.transport import AGENT_HEADER
from fragola_nb.models.scripted.items import Item, Recorded, fail

if TYPE_CHECKING:
    from fragola_nb.models.scripted import ScriptedModel

__all__ = ["DEFAULT_IGNORED", "MISMATCH_CODE", "Replayer"]

DEFAULT_IGNORED = ("stream_options",)
MISMATCH_CODE = "replay_mismatch"
EXCERPT = 60
# Recorded errors are sent again with these, so the client's retries (the ones the recording
# holds the answers to) come at once instead of after its back-off.
_ERROR_HEADERS = {"retry-after-ms": "1"}


class Replayer:
    """Answers a request from ``exchanges`` (see the module); ``model`` is the server it
    answers for, read for the agent's name a request carries in its headers."""

    def __init__(self, name: str, exchanges: Iterable[Exchange], *, ignore: Iterable[str],
                 fallback: Callable[[dict[str, Any]], Any] | None) -> None:
        self.name = name
        self.ignore = frozenset(ignore)
        self.fallback = fallback
        self.model: ScriptedModel | None = None
        self._answers: dict[str, list[Exchange]] = {}
        for exchange in exchanges:
            self._answers.setdefault(self._key(exchange.request), []).append(exchange)
        self._served: dict[str, int] = {}
        self._lock = threading.Lock()  # the server answers each connection in a thread

    def _comparable(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in redacted(dict(request)).items() if k not in self.ignore}

    def _key(self, request: Mapping[str, Any]) -> str:
        return json.dumps(self._comparable(request), sort_keys=True, separators=(",", ":"))

    def __call__(self, request: dict[str, Any]) -> Any:
        key = self._key(request)
        with self._lock:
            answers = self._answers.get(key)
            if answers:
                served = self._served.get(key, 0)
                self._served[key] = served + 1
        if answers:
            return _item(answers[served % len(answers)])
        if self.fallback is not None:
            return self.fallback(request)
        return fail(409, self._mismatch(request), code=MISMATCH_CODE,
                    headers={"x-should-retry": "false"})

    def _agent(self, request: dict[str, Any]) -> str | None:
        if self.model is None:
            return None
        requests, headers = list(self.model.requests), list(self.model.headers)
        for sent, sent_headers in zip(requests, headers, strict=False):
            if sent is request:  # the server keeps each request's headers beside it
                value = sent_headers.get(AGENT_HEADER.lower())
                return unquote(value) if value else None
        return None

    def _mismatch(self, request: dict[str, Any]) -> str:
        agent = self._agent(request)
        who = f"agent {agent!r}" if agent is not None else "an agent"
        sent = self._comparable(request)
        recorded = [(e, self._comparable(e.request)) for answers in self._answers.values()
                    for e in answers[:1]]
        if not recorded:
            why = "the recording holds no exchanges"
        else:
            exchange, closest = max(recorded, key=lambda pair: _likeness(sent, pair[1]))
            why = f"{_difference(sent, closest)} (closest: line {exchange.line})"
        return (f"replay of {self.name}: {who} sent a request that is not in the recording: "
                f"{why}; record it again, or pass fallback='demo' to Fragola.replay")


def _item(exchange: Exchange) -> Item:
    error = exchange.status >= 400
    return Recorded(exchange.status, exchange.body, exchange.text, exchange.chunks,
                    not exchange.cut, tuple(_ERROR_HEADERS.items()) if error else ())


def _messages(request: Mapping[str, Any]) -> list[Any]:
    messages = request.get("messages")
    return list(messages) if isinstance(messages, list) else []


def _common(sent: list[Any], recorded: list[Any]) -> int:
    count = 0
    for mine, theirs in zip(sent, recorded, strict=False):
        if mine != theirs:
            break
        count += 1
    return count


def _likeness(sent: dict[str, Any], recorded: dict[str, Any]) -> tuple[int, int, float, int]:
    """More messages in common from the start, then at the same places, then a first
    differing message more alike, then more fields alike."""
    mine, theirs = _messages(sent), _messages(recorded)
    common = _common(mine, theirs)
    placed = sum(1 for a, b in zip(mine, theirs, strict=False) if a == b)
    alike = 0.0
    if common < min(len(mine), len(theirs)):
        alike = SequenceMatcher(None, _excerpt(mine[common]), _excerpt(theirs[common])).ratio()
    fields = sum(1 for k in sent.keys() | recorded.keys() if sent.get(k) == recorded.get(k))
    return common, placed, alike, fields


def _difference(sent: dict[str, Any], recorded: dict[str, Any]) -> str:
    mine, theirs = _messages(sent), _messages(recorded)
    index = _common(mine, theirs)
    if index < len(mine) and index < len(theirs):
        return (f"messages[{index}] ({_role(mine[index])}) differs: sent "
                f"{_excerpt(mine[index])}, recorded {_excerpt(theirs[index])}")
    if index < len(mine):
        return (f"no recorded request goes on with messages[{index}] "
                f"({_role(mine[index])}) {_excerpt(mine[index])}")
    if index < len(theirs):
        return (f"the recorded request goes on with messages[{index}] "
                f"({_role(theirs[index])}) {_excerpt(theirs[index])}")
    fields = sorted(k for k in sent.keys() | recorded.keys() if sent.get(k) != recorded.get(k))
    name = fields[0] if fields else "?"
    return (f"the messages are the same, field {name!r} differs: sent {_field(sent, name)}, "
            f"recorded {_field(recorded, name)}")


def _field(request: dict[str, Any], name: str) -> str:
    return _short(request[name]) if name in request else "nothing"


def _role(message: Any) -> str:
    return str(message.get("role")) if isinstance(message, dict) else "not a message"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(redact_text(text).split())  # before it is cut: no half key is left
    return repr(text if len(text) <= EXCERPT else text[: EXCERPT - 1] + "…")


def _excerpt(message: Any) -> str:
    if not isinstance(message, dict):
        return _short(message)
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        functions = [c.get("function") or {} for c in calls if isinstance(c, dict)]
        said = "; ".join(f"{f.get('name')}({f.get('arguments')})" for f in functions)
        return f"calls {_short(said)}"
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return _short(content) if content is not None else "(no content)"

