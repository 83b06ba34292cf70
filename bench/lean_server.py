"""A lean OpenAI-compatible Chat Completions server for the benchmarks (stdlib only).

It runs in its own process (``python bench/lean_server.py``) so its CPU is not counted
against the client being measured, speaks HTTP/1.1 with keep-alive on loopback, records
nothing but a request counter, and answers deterministically from the request:

* the first user message says the workload, e.g. ``"bench steps=5"``; ``n`` is the number of
  ``tool`` messages in the request;
* while ``n < steps`` it answers one call of ``add`` with ``{"x": n}`` (id ``call_<n>``);
* then a short final answer, ``"The total is <n>."``.

``stream: true`` answers Server-Sent Events, chunked the way OpenAI chunks them (a role
chunk, the tool call's name then its arguments, or one chunk per word, then the finish
chunk carrying ``usage``, then ``[DONE]``). Usage is sent with every answer, streamed or
not, so every client parses the same bytes whatever ``stream_options`` it asks for.

A reply of a given length, paced like a model, is asked for with
``"bench tokens=2000 rate=200"`` (2,000 one-word chunks at 200 per second, streamed).

It prints ``PORT <n>`` on stdout once listening and exits when its stdin closes (the
benchmark holds the other end), so it never outlives the run that started it.
``GET /stats`` answers ``{"requests": N, "streamed": M}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys

CREATED = 1_700_000_000
MODEL = "bench-model"
WORKLOAD = re.compile(r"(steps|tokens|rate)=(\d+)")
DONE = b"data: [DONE]\n\n"
DUMP = os.environ.get("BENCH_DUMP")  # a file to append each request body to (debugging)

requests_served = 0
streams_served = 0


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _first_user_text(messages: list[dict]) -> str:
    for message in messages:
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def answer(request: dict) -> tuple[str | None, list[tuple[str, str, str]], dict[str, int]]:
    """(content, tool calls as (id, name, arguments), workload) for one request."""
    messages = request.get("messages") or []
    workload = {k: int(v) for k, v in WORKLOAD.findall(_first_user_text(messages))}
    n = sum(1 for m in messages if m.get("role") == "tool")
    if "tokens" in workload:
        return " ".join(f"w{i}" for i in range(workload["tokens"])), [], workload
    if n < workload.get("steps", 0):
        return None, [(f"call_{n}", "add", f'{{"x":{n}}}')], workload
    return f"The total is {n}.", [], workload


def _usage(request: dict) -> dict[str, int]:
    prompt = len(request.get("messages") or ()) * 10
    return {"prompt_tokens": prompt, "completion_tokens": 8, "total_tokens": prompt + 8}


def completion_body(request: dict) -> bytes:
    content, calls, _ = answer(request)
    message: dict = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": name, "arguments": args}}
            for i, name, args in calls
        ]
    return _dumps({
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": CREATED,
        "model": MODEL,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": "tool_calls" if calls else "stop",
        }],
        "usage": _usage(request),
    })


def stream_chunks(request: dict) -> tuple[list[bytes], float]:
    """The SSE frames of one streamed answer, and the pause between frames (seconds)."""
    content, calls, workload = answer(request)
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": CREATED,
            "model": MODEL}

    def chunk(delta: dict, finish: str | None = None, **extra: object) -> bytes:
        body = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                     "finish_reason": finish}], **extra}
        return b"data: " + _dumps(body) + b"\n\n"

    frames: list[bytes] = []
    if calls:
        for index, (call_id, name, args) in enumerate(calls):
            first = {"index": index, "id": call_id, "type": "function",
                     "function": {"name": name, "arguments": ""}}
            delta: dict = {"tool_calls": [first]}
            if index == 0:
                delta = {"role": "assistant", "content": None, **delta}
            frames.append(chunk(delta))
            frames.append(chunk({"tool_calls": [{"index": index,
                                                 "function": {"arguments": args}}]}))
        finish = "tool_calls"
    else:
        frames.append(chunk({"role": "assistant", "content": ""}))
        words = (content or "").split(" ")
        for i, word in enumerate(words):
            frames.append(chunk({"content": word if i == 0 else " " + word}))
        finish = "stop"
    frames.append(chunk({}, finish, usage=_usage(request)))
    frames.append(DONE)
    rate = workload.get("rate", 0)
    return frames, (1.0 / rate if rate else 0.0)


def _head(status: str, content_type: str, length: int | None) -> bytes:
    size = b"content-length: %d\r\n" % length if length is not None else (
        b"transfer-encoding: chunked\r\n")
    return (b"HTTP/1.1 " + status.encode() + b"\r\ncontent-type: " + content_type.encode()
            + b"\r\n" + size + b"x-request-id: req_bench\r\n\r\n")


class Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.busy: asyncio.Task | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.busy is None:
            self._serve()

    def _serve(self) -> None:
        assert self.transport is not None
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1").split("\r\n")
            method, path, _ = head[0].split(" ", 2)
            headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            close = headers.get("connection", "").lower() == "close"
            if method == "GET" and path.endswith("/stats"):
                payload = _dumps({"requests": requests_served, "streamed": streams_served})
                self.transport.write(_head("200 OK", "application/json", len(payload)) + payload)
            elif method == "POST" and path.endswith("/chat/completions"):
                paced = self._chat(json.loads(body))
                if paced is not None:  # answer the rest of the buffer once the pacing ends
                    self.busy = asyncio.get_running_loop().create_task(self._paced(*paced))
                    return
            else:
                payload = _dumps({"error": {"message": f"no route {method} {path}",
                                            "type": "invalid_request_error"}})
                self.transport.write(_head("404 Not Found", "application/json", len(payload))
                                     + payload)
            if close:
                self.transport.close()
                return

    def _chat(self, request: dict) -> tuple[list[bytes], float] | None:
        global requests_served, streams_served
        requests_served += 1
        streams_served += 1 if request.get("stream") else 0
        if DUMP:
            with open(DUMP, "a") as f:
                f.write(json.dumps(request, sort_keys=True) + "\n")
        assert self.transport is not None
        if not request.get("stream"):
            payload = completion_body(request)
            self.transport.write(_head("200 OK", "application/json", len(payload)) + payload)
            return None
        frames, pause = stream_chunks(request)
        if pause:
            return frames, pause
        payload = b"".join(frames)
        self.transport.write(_head("200 OK", "text/event-stream", len(payload)) + payload)
        return None

    async def _paced(self, frames: list[bytes], pause: float) -> None:
        assert self.transport is not None
        self.transport.write(_head("200 OK", "text/event-stream", None))
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i, frame in enumerate(frames):
            if self.transport.is_closing():
                return
            self.transport.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            delay = start + (i + 1) * pause - loop.time()  # a steady rate, not drifting
            if delay > 0:
                await asyncio.sleep(delay)
        self.transport.write(b"0\r\n\r\n")
        self.busy = None
        self._serve()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.busy is not None:
            self.busy.cancel()


async def main() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Connection, "127.0.0.1", 0, backlog=2048)
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    stdin_closed = loop.create_future()

    def on_stdin() -> None:
        if not sys.stdin.buffer.read1(4096) and not stdin_closed.done():  # type: ignore[attr-defined]
            stdin_closed.set_result(None)

    loop.add_reader(sys.stdin.fileno(), on_stdin)
    async with server:
        await stdin_closed


if __name__ == "__main__":
    asyncio.run(main())
