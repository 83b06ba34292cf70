"""Script items: what the scripted model does with one request.

Each request to a :class:`~fragola_nb.models.scripted.ScriptedModel` consumes the next item of its
script. Items are plain frozen dataclasses, made with the small functions below::

    ScriptedModel([
        tool_calls(call("get_weather", {"city": "Paris"})),
        reply("It is sunny in Paris."),
        fail(429, "slow down", headers={"Retry-After": "0"}),
    ])

A script entry may also be a callable ``(request: dict) -> Item``, evaluated when the request
arrives, to answer depending on what was sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Drop",
    "Fail",
    "Hang",
    "Item",
    "Raw",
    "Recorded",
    "Reply",
    "ScriptEntry",
    "ToolCall",
    "ToolCalls",
    "call",
    "drop",
    "fail",
    "hang",
    "raw",
    "recorded",
    "reply",
    "resolve",
    "tool_calls",
]

Headers = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Reply:
    """An assistant text message, ``finish_reason="stop"``. Made by :func:`reply`."""

    text: str
    stream_cut_after: int | None = None
    ignore_stream: bool = False


@dataclass(frozen=True)
class ToolCall:
    """One function tool call; ``arguments`` is the exact wire string. Made by :func:`call`."""

    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True)
class ToolCalls:
    """An assistant message with tool calls, ``finish_reason="tool_calls"``."""

    calls: tuple[ToolCall, ...]
    content: str | None = None
    stream_cut_after: int | None = None
    ignore_stream: bool = False


@dataclass(frozen=True)
class Fail:
    """An HTTP error with an OpenAI-style error body. Made by :func:`fail`."""

    status: int
    message: str
    type: str
    code: str | None = None
    headers: Headers = ()


@dataclass(frozen=True)
class Hang:
    """Hold the request unanswered. Made by :func:`hang`."""

    seconds: float | None = None
    then: ScriptEntry | None = None


@dataclass(frozen=True)
class Drop:
    """Close the connection without any response. Made by :func:`drop`."""


@dataclass(frozen=True)
class Raw:
    """Send exactly these body bytes. Made by :func:`raw`."""

    body: bytes
    status: int = 200
    headers: Headers = ()


@dataclass(frozen=True)
class Recorded:
    """A response sent again as it was recorded (``Fragola.replay``). Made by :func:`recorded`.

    ``chunks`` (JSON values) makes it a ``200`` event stream of those chunks, in order,
    ended by ``data: [DONE]`` when ``done`` (else cut off, as a dropped connection is);
    otherwise ``body`` (a JSON value) or ``text`` is the whole response, with ``status``.
    """

    status: int = 200
    body: Any = None
    text: str | None = None
    chunks: tuple[Any, ...] | None = None
    done: bool = True
    headers: Headers = ()


Item = Reply | ToolCalls | Fail | Hang | Drop | Raw | Recorded
ScriptEntry = Item | Callable[[dict[str, Any]], Item]


def reply(
    text: str, *, stream_cut_after: int | None = None, ignore_stream: bool = False
) -> Reply:
    """Answer with an assistant message whose content is ``text``.

    ``stream_cut_after=N``: when the request streams, send N chunks (the first one is the
    ``role`` chunk) and then close the connection abruptly, without ending the chunked body and
    without ``data: [DONE]``. With openai 3.x the client's ``async for`` over the stream yields
    those N chunks and then raises :class:`openai.APIConnectionError` (httpx reports an
    incomplete chunked read). Non-streaming requests ignore it.

    ``ignore_stream=True``: answer a streaming request with a plain ``chat.completion`` JSON
    body, as servers that do not implement streaming do.
    """
    return Reply(text, stream_cut_after, ignore_stream)


def call(name: str, arguments: Mapping[str, Any] | str, *, id: str | None = None) -> ToolCall:
    """One tool call for :func:`tool_calls`.

    A mapping is JSON-encoded; a string is sent verbatim, so tests can send malformed or
    truncated arguments. ``id`` defaults to ``call_1``, ``call_2``, ... numbered per server in
    the order the calls are sent.
    """
    wire = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return ToolCall(name, wire, id)


def tool_calls(
    *calls: ToolCall,
    content: str | None = None,
    stream_cut_after: int | None = None,
    ignore_stream: bool = False,
) -> ToolCalls:
    """Answer with an assistant message carrying ``calls`` (several at once is fine).

    ``stream_cut_after`` and ``ignore_stream`` work as in :func:`reply`.
    """
    if not calls:
        raise ValueError("tool_calls() needs at least one call(...)")
    return ToolCalls(tuple(calls), content, stream_cut_after, ignore_stream)


# Mirrors the `type` the OpenAI API puts in its error bodies, so code that branches on it
# sees realistic values.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def fail(
    status: int,
    message: str | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    type: str | None = None,
    code: str | None = None,
) -> Fail:
    """Answer with HTTP ``status`` and ``{"error": {"message", "type", "param", "code"}}``.

    ``type`` defaults to what OpenAI sends for that status (``"server_error"`` for 5xx).
    The openai client maps the status to its exception classes (429 ->
    ``RateLimitError``, 5xx -> ``InternalServerError``, ...); its ``str()`` contains ``message``.
    A client with ``max_retries > 0`` retries 408/409/429/5xx, each attempt consuming the next
    script item; it ignores ``Retry-After: 0`` (backing off ~0.5 s) but honours
    ``retry-after-ms``.
    """
    default_type = "server_error" if status >= 500 else _ERROR_TYPES.get(status, "api_error")
    return Fail(
        status=status,
        message=message if message is not None else f"scripted failure (HTTP {status})",
        type=type or default_type,
        code=code,
        headers=tuple((headers or {}).items()),
    )


def hang(seconds: float | None = None, *, then: ScriptEntry | None = None) -> Hang:
    """Leave the request unanswered until :meth:`ScriptedModel.release`, or ``seconds``.

    Once released (or timed out) the request is answered with ``then``, or a 504 error when
    ``then`` is None. :meth:`ScriptedModel.stop` closes a hanging connection without answering.
    A hanging request never blocks other requests; if the client gives up (timeout,
    cancellation) the server notices the closed connection and ends the handler. With a client
    timeout openai raises ``APITimeoutError`` (after retrying, if ``max_retries > 0``).
    """
    return Hang(seconds, then)


def drop() -> Drop:
    """Close the connection without a response (openai raises ``APIConnectionError``)."""
    return Drop()


def raw(body: bytes | str, *, status: int = 200, headers: Mapping[str, str] | None = None) -> Raw:
    """Send exactly ``body`` (``Content-Type: application/json`` unless given in ``headers``).

    With openai 3.x a 200 JSON body that does not parse (``raw(b"{not json")``) escapes from
    ``chat.completions.create`` as a bare :class:`json.JSONDecodeError`, not an openai error.
    """
    data = body.encode() if isinstance(body, str) else bytes(body)
    return Raw(data, status, tuple((headers or {}).items()))


def recorded(
    *,
    status: int = 200,
    body: Any = None,
    text: str | None = None,
    chunks: Iterable[Any] | None = None,
    done: bool = True,
    headers: Mapping[str, str] | None = None,
) -> Recorded:
    """Send a recorded response again: a JSON ``body`` (or a ``text`` body) with ``status``,
    or ``chunks`` streamed exactly (each one ``data: <chunk JSON>``), whatever was asked::

        recorded(chunks=[{"object": "chat.completion.chunk", ...}, ...])
        recorded(status=429, body={"error": {"message": "slow down", ...}})
    """
    frozen = None if chunks is None else tuple(chunks)
    return Recorded(status, body, text, frozen, done, tuple((headers or {}).items()))


def resolve(entry: ScriptEntry | None, request: dict[str, Any]) -> Item:
    """Evaluate a script entry for ``request``: call callables; problems become a 500 item."""
    try:
        while callable(entry):
            entry = entry(request)
    except Exception as exc:  # the test sees a 500 naming the error, not a dead connection
        return fail(500, f"scripted model: script callable raised {exc!r}")
    if not isinstance(entry, (Reply, ToolCalls, Fail, Hang, Drop, Raw, Recorded)):
        return fail(500, f"scripted model: not a script item: {entry!r}")
    return entry
