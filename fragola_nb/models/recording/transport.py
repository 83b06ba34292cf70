"""The HTTP seam of record and replay: a transport that keeps each chat exchange as it went
over the wire, and a request hook that tells the replaying server which agent is asking.

A ``ModelClient`` makes one ``openai`` client per event loop; ``ModelClient.wrap_http`` lets
each get its own transport here, wrapped around the HTTP client fragola_nb would have used
(so its TLS context, limits, timeouts and proxies apply unchanged).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import quote

import httpx2
import openai

from fragola_nb.base.redact import credentials_in
from fragola_nb.models.client.asking import CURRENT_AGENT
from fragola_nb.models.recording.recordfile import Appender

__all__ = ["AGENT_HEADER", "chat_body", "credentials_of", "exchanged", "naming_agents",
           "recording_through", "sse_chunks"]

AGENT_HEADER = "X-Fragola-Agent"
"""Sent to the replaying server only: the name of the agent sending the request (quoted)."""
_UNSENT = frozenset({"content-encoding", "content-length", "transfer-encoding"})


def recording_through(appender: Appender) -> Callable[[httpx2.AsyncClient], httpx2.AsyncClient]:
    """A ``ModelClient.wrap_http`` that records every chat exchange to ``appender``."""

    def wrap(http: httpx2.AsyncClient) -> httpx2.AsyncClient:
        return openai.DefaultAsyncHttpxClient(transport=RecordingTransport(http, appender))

    return wrap


def naming_agents(http: httpx2.AsyncClient) -> httpx2.AsyncClient:
    """A ``ModelClient.wrap_http`` that names the sending agent in a header (for replay)."""

    async def name(request: httpx2.Request) -> None:
        agent = CURRENT_AGENT.get(None)
        if agent is not None:
            request.headers[AGENT_HEADER] = quote(agent)

    http.event_hooks = {**http.event_hooks, "request": [*http.event_hooks["request"], name]}
    return http


def sse_chunks(data: bytes) -> tuple[list[Any], bool]:
    """The JSON of each ``data:`` event of an event stream, and whether ``[DONE]`` came.
    Comments and events that are not JSON are not chunks; a last event without its blank
    line (the stream was cut in it) is left out."""
    chunks: list[Any] = []
    done = False
    events = data.decode(errors="replace").replace("\r\n", "\n").split("\n\n")
    for event in events[:-1]:
        payload = "\n".join(line[5:].removeprefix(" ") for line in event.split("\n")
                            if line.startswith("data:"))
        if payload == "[DONE]":
            done = True
        elif payload:
            try:
                chunks.append(json.loads(payload))
            except ValueError:
                continue
    return chunks, done


def _json_or_text(content: bytes) -> dict[str, Any]:
    try:
        return {"body": json.loads(content)}
    except ValueError:  # an error page from a proxy, say: kept as it was
        return {"text": content.decode(errors="replace")}


class RecordingTransport(httpx2.AsyncBaseTransport):
    """Sends each request through ``http`` and appends each chat exchange to ``appender``:
    the request's JSON body, then the response's body or, for a stream, its chunks when the
    stream ends (the client reads them as they come, not after). Nothing of the headers."""

    def __init__(self, http: httpx2.AsyncClient, appender: Appender) -> None:
        self._http = http
        self._appender = appender

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        sent = await chat_body(request)
        if sent is None:
            return await self._http.send(request, stream=True)
        secrets = credentials_of(request.headers, request.url, sent)
        record = {"agent": CURRENT_AGENT.get(None), "request": sent}
        return await exchanged(self._http, request, record,
                               lambda done: self._appender.append(done, secrets))

    async def aclose(self) -> None:
        await self._http.aclose()


async def chat_body(request: httpx2.Request) -> dict[str, Any] | None:
    """The JSON body of a chat completion request; None for any other request."""
    if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
        return None
    try:
        sent = json.loads(await request.aread())
    except ValueError:
        return None
    return sent if isinstance(sent, dict) else None


async def exchanged(http: httpx2.AsyncClient, request: httpx2.Request, record: dict[str, Any],
                    keep: Callable[[dict[str, Any]], None]) -> httpx2.Response:
    """Send ``request`` through ``http``; ``keep`` gets ``record`` with the answer once it is
    whole: its status, then its body or, for a stream, its chunks when the stream ends (the
    client reads them as they come, not after) or is closed (``"cut"`` when not done)."""
    response = await http.send(request, stream=True)
    record = {"agent": record.get("agent"), "status": response.status_code, **record}
    # What the client gets is the decoded body: the encoding headers no longer apply.
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _UNSENT]
    extensions = {k: v for k, v in response.extensions.items() if k != "network_stream"}
    if "text/event-stream" in response.headers.get("content-type", ""):
        return httpx2.Response(response.status_code, headers=headers,
                               stream=_Tee(response, record, keep), extensions=extensions)
    try:
        content = await response.aread()
    finally:
        await response.aclose()
    keep({**record, **_json_or_text(content)})
    return httpx2.Response(response.status_code, headers=headers, content=content,
                           extensions=extensions)


def credentials_of(headers: httpx2.Headers, url: httpx2.URL, body: Any) -> set[str]:
    """The credentials a request is sent with (its key, in ``Authorization``, a header of
    the user's, a query parameter such as ``key=``, a body field such as ``extra_body``'s
    ``access_token``), without their scheme: a server may quote one back in what it answers
    (a 422's ``"input"``)."""
    return credentials_in(headers, url.params, body)


class _Tee(httpx2.AsyncByteStream):
    """Passes a stream's bytes on as they come, and records its chunks once it ends (or is
    closed before its end: then what came, marked ``cut``)."""

    def __init__(self, response: httpx2.Response, record: dict[str, Any],
                 write: Callable[[dict[str, Any]], None]) -> None:
        self._response = response
        self._record = record
        self._write = write
        self._seen: list[bytes] = []
        self._written = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._response.aiter_bytes():
            self._seen.append(piece)
            yield piece
        self._finish(cut=False)

    async def aclose(self) -> None:
        try:
            await self._response.aclose()
        finally:
            self._finish(cut=True)

    def _finish(self, *, cut: bool) -> None:
        if self._written:
            return
        self._written = True
        chunks, done = sse_chunks(b"".join(self._seen))
        record = {**self._record, "chunks": chunks}
        if cut and not done:
            record["cut"] = True
        self._write(record)
