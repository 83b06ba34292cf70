"""The wire: Chat Completions JSON and the HTTP/1.1 bytes that carry it.

Pure functions turn an :class:`Answer` (an assistant message with ids already assigned) into
the JSON objects OpenAI sends: ``chat.completion`` bodies, ``chat.completion.chunk`` stream
chunks and error bodies. Everything produced validates against the official
``CreateChatCompletionResponse`` / ``CreateChatCompletionStreamResponse`` schemas.
:class:`Handler` reads requests and writes those bytes; what to answer is decided by the
``ScriptedModel`` it serves (``server.model``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

from fragola_nb.base.textfile import utf8

__all__ = [
    "DONE",
    "LAST_CHUNK",
    "Answer",
    "Handler",
    "chunk_frame",
    "completion",
    "dumps",
    "error_body",
    "http_head",
    "sse_frames",
    "stream_chunks",
    "usage",
]

DONE = b"data: [DONE]\n\n"
# Terminates a `Transfer-Encoding: chunked` body, which lets the client reuse the connection.
LAST_CHUNK = b"0\r\n\r\n"


@dataclass(frozen=True)
class Answer:
    """An assistant message ready to send; ``tool_calls`` holds ``(id, name, arguments)``."""

    content: str | None
    tool_calls: tuple[tuple[str, str, str], ...] = ()

    @property
    def finish_reason(self) -> str:
        """``"tool_calls"`` when the message calls tools, else ``"stop"``."""
        return "tool_calls" if self.tool_calls else "stop"


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes (the server sends many of these, so skip whitespace)."""
    # A lone surrogate (half an emoji a replayed recording holds) goes as its JSON escape.
    return utf8(json.dumps(obj, separators=(",", ":"), ensure_ascii=False))


def _words(text: str) -> int:
    return len(text.split())


def _content_words(content: Any) -> int:
    if isinstance(content, str):
        return _words(content)
    if isinstance(content, list):
        return sum(_words(part.get("text") or "") for part in content if isinstance(part, dict))
    return 0


def usage(request: dict[str, Any], answer: Answer) -> dict[str, int]:
    """Deterministic, approximate token counts: one token per whitespace-separated word."""
    prompt = 0
    for message in request.get("messages") or ():
        if isinstance(message, dict):
            prompt += _content_words(message.get("content"))
            for tc in message.get("tool_calls") or ():
                fn = tc.get("function") if isinstance(tc, dict) else None
                if isinstance(fn, dict):
                    prompt += 1 + _words(str(fn.get("arguments") or ""))
    completion_tokens = _words(answer.content or "") + sum(
        1 + _words(args) for _, _, args in answer.tool_calls
    )
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt + completion_tokens,
    }


def completion(
    answer: Answer, *, id: str, created: int, model: str, usage: dict[str, int]
) -> dict[str, Any]:
    """A non-streaming ``chat.completion`` body."""
    message: dict[str, Any] = {"role": "assistant", "content": answer.content, "refusal": None}
    if answer.tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in answer.tool_calls
        ]
    return {
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": answer.finish_reason,
                "logprobs": None,
            }
        ],
        "usage": usage,
    }


def _pieces(text: str, size: int) -> Iterable[str]:
    return (text[i : i + size] for i in range(0, len(text), size))


def stream_chunks(
    answer: Answer,
    *,
    id: str,
    created: int,
    model: str,
    chunk_size: int,
    usage: dict[str, int] | None,
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed answer, in order.

    A role chunk, the content in ``chunk_size``-character pieces, each tool call (a header
    delta with id and name, then its argument pieces), a final chunk with ``finish_reason``,
    and, when ``usage`` is given (``stream_options.include_usage``), a last chunk with
    ``choices: []`` and the usage. Like OpenAI, a message without text starts with
    ``content: null`` rather than ``""``.
    """
    size = max(1, chunk_size)
    head = {"id": id, "object": "chat.completion.chunk", "created": created, "model": model}
    # OpenAI puts `"usage": null` on every chunk when usage was asked for.
    extra: dict[str, Any] = {"usage": None} if usage is not None else {}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return {**head, "choices": [choice], **extra}

    first_content = "" if answer.content is not None or not answer.tool_calls else None
    out = [chunk({"role": "assistant", "content": first_content})]
    out.extend(chunk({"content": piece}) for piece in _pieces(answer.content or "", size))
    for index, (cid, name, args) in enumerate(answer.tool_calls):
        header = {"name": name, "arguments": ""}
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {"index": index, "id": cid, "type": "function", "function": header}
                    ]
                }
            )
        )
        out.extend(
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(args, size)
        )
    out.append(chunk({}, answer.finish_reason))
    if usage is not None:
        out.append({**head, "choices": [], "usage": usage})
    return out


def error_body(message: str, type: str, code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": type, "param": None, "code": code}}


def http_head(status: int, headers: Iterable[tuple[str, str]]) -> bytes:
    """A response status line and headers, ready to prepend to the body."""
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Status"
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines.extend(f"{name}: {value}" for name, value in headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunk_frame(data: bytes) -> bytes:
    """One ``Transfer-Encoding: chunked`` frame."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse_frames(chunks: Iterable[Any], *, done: bool = True) -> list[bytes]:
    """The ``Transfer-Encoding: chunked`` frames of an event stream of ``chunks``, one
    ``data: <JSON>`` event each; ``done`` ends it (``data: [DONE]``, then the last chunk),
    else it just stops, as a stream cut off does."""
    frames = [chunk_frame(b"data: %s\n\n" % dumps(chunk)) for chunk in chunks]
    if done:  # with the last event: one write less when the frames are sent apart
        end = chunk_frame(DONE) + LAST_CHUNK
        frames[-1:] = [frames[-1] + end] if frames else [end]
    return frames


class Handler(BaseHTTPRequestHandler):
    """Serves one keep-alive connection; ``server.model`` decides what chat requests get."""

    protocol_version = "HTTP/1.1"
    # Small writes (stream chunks) must leave at once, not wait for Nagle/delayed-ACK (40 ms).
    disable_nagle_algorithm = True
    server: Any

    def setup(self) -> None:
        super().setup()
        self.server.model._track(self.connection, True)

    def finish(self) -> None:
        self.server.model._track(self.connection, False)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: no request log on stderr."""

    def do_POST(self) -> None:
        """Route any request; unknown paths get an OpenAI-style 404."""
        try:
            self._route()
        except OSError:  # the client hung up mid-response
            self.close_connection = True

    do_GET = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_POST

    def _route(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True  # the unread body would desync the connection
            self._error(411, "chunked request bodies are not supported; send Content-Length")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            self._error(400, "invalid Content-Length header")
            return
        body = self.rfile.read(length) if length > 0 else b""
        if self.command == "POST" and path == "/v1/chat/completions":
            try:
                request = json.loads(body)
            except ValueError as exc:
                self._error(400, f"We could not parse the JSON body of your request. ({exc})")
                return
            if not isinstance(request, dict):
                self._error(400, "The request body must be a JSON object.")
                return
            self.server.model._chat(self, request)
        elif self.command == "GET" and path == "/v1/models":
            model = {"id": self.server.model.model_name, "object": "model", "created": 0}
            self.send(200, dumps({"object": "list", "data": [{**model, "owned_by": "fragola_nb"}]}))
        else:
            self._error(404, f"Invalid URL ({self.command} {self.path})", "unknown_url")

    def _error(self, status: int, message: str, code: str | None = None) -> None:
        self.send(status, dumps(error_body(message, "invalid_request_error", code)))

    def send(self, status: int, body: bytes, headers: Iterable[tuple[str, str]] = ()) -> None:
        """Send a whole response in one write (``Content-Type`` defaults to JSON)."""
        extra = [(k, v) for k, v in headers if k.lower() != "content-length"]
        base = [("Content-Length", str(len(body)))]
        if not any(k.lower() == "content-type" for k, _ in extra):
            base.append(("Content-Type", "application/json"))
        if self.close_connection:
            base.append(("Connection", "close"))
        self.wfile.write(http_head(status, base + extra) + body)

    def stream(self, frames: list[bytes], delay: float, stopping: threading.Event) -> None:
        """Send an SSE response made of chunked ``frames``, ``delay`` seconds apart."""
        head = http_head(
            200,
            [
                ("Content-Type", "text/event-stream; charset=utf-8"),
                ("Cache-Control", "no-cache"),
                ("Transfer-Encoding", "chunked"),
            ],
        )
        if delay <= 0 or len(frames) < 2:
            self.wfile.write(head + b"".join(frames))  # one syscall: cheap for benchmarks
            return
        self.wfile.write(head + frames[0])
        for frame in frames[1:]:
            if stopping.wait(delay):  # stop() must not wait for a slow stream
                self.close_connection = True
                return
            self.wfile.write(frame)
