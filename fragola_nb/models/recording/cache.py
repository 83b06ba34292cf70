"""``Fragola.cached``: a record-through cache. A request made before is answered from the
file; any other is sent for real and its answer appended, in the format of ``Fragola.record``
(:mod:`.recordfile`), so ``Fragola.replay`` reads a cache file and ``Fragola.cached`` a
recording.

The key of a request: the API's base URL (its scheme, host, port and path, no credentials;
a server on this machine is keyed without its port, as local servers take a free one),
the JSON body (model, messages, tools, settings such as ``temperature``) as it was sent,
``stream_options`` aside (it only asks for the usage chunk), and the repeat index
(``REPEAT_INDEX``): ``agent.evaluate(..., repeat=3)`` sets 0, 1, 2, so three samples are
paid for once each and then replayed. ``stream`` is part of the body: a streamed
and a plain answer are different wire answers, each cached on its own.

A line of the file holds the key's base URL and repeat index beside the request; a line
written by ``Fragola.record`` holds neither: it answers at any base URL, and the same
request recorded again answers repeat 1, 2... in file order. Only whole answers are kept
(HTTP 200, a stream that was not cut): an error is sent again next time. A hit is served at
once, streamed as it was recorded, with the header ``x-fragola-cache: hit`` that tells the
model client (``CallUsage.cached``).

Two requests with the same key at once: the second waits for the first's answer and is
then a hit (if the first fails, the second is sent for real). Other processes append to the
same file safely (:class:`.recordfile.Appender`); what they add is seen by a new
``Fragola.cached``.

The body in the key is the real one, not the scrubbed one the file holds: two requests that
differ only by a credential (a key-shaped string in a message, an ``extra_body`` token) are
two keys, never one answer for both. The file holds no credential for it: each line it
writes has ``"request_hash"``, an HMAC-SHA256 of the real body under a random secret of the
cache's (``"<secret in hex>.<digest in hex>"``; the first line's secret is used by every
later writer, so a new cache reads the keys back). A line without one (written by
``Fragola.record``, or by an older fragola_nb) is keyed by its request when nothing in it
was scrubbed; one that holds ``[redacted]`` cannot say which request it answered, so it
answers none (the request is sent again and kept with its key), and ``Fragola.replay``
still reads it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import hashlib
import hmac
import json
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx2
import openai

from fragola_nb.base.redact import REDACTED, redacted
from fragola_nb.models.client.asking import CURRENT_AGENT
from fragola_nb.models.client.ratelimit import NotSent
from fragola_nb.models.client.reported import CACHE_HEADER
from fragola_nb.models.recording.recordfile import Appender, Exchange, read_recording
from fragola_nb.models.recording.replayer import DEFAULT_IGNORED
from fragola_nb.models.recording.transport import chat_body, credentials_of, exchanged

__all__ = ["HITS_ONLY", "REPEAT_INDEX", "Cache", "NotCached", "caching_through"]

REPEAT_INDEX: contextvars.ContextVar[int] = contextvars.ContextVar(
    "fragola_nb_repeat_index", default=0)
"""Which sample of a repeated run this task makes (0 for the first): part of the cache key,
so ``repeat=3`` makes three real calls and then replays all three. ``evaluate``, ``batch``
and ``compare`` set it per run."""

HITS_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "fragola_nb_hits_only", default=False)
"""Set by the run loop for a call made once a budget is spent: a hit is still answered (it
costs nothing), a miss is not sent (``NotCached``)."""


class NotCached(NotSent):
    """A request the cache cannot answer while only hits may be (``HITS_ONLY``): nothing was
    sent. A ``NotSent`` (a ``BaseException``, as the run loop's own stop is, so that the
    openai client neither retries it nor wraps it): the rate limiter gets the request's
    tokens back, and the run loop ends the turn with outcome ``"budget"``."""


Key = tuple[str | None, str, int]  # base URL (None: any), keyed hash of the request, repeat


def request_text(request: Mapping[str, Any]) -> str:
    """A request body as the part of the key it is, ``stream_options`` aside."""
    comparable = {k: v for k, v in dict(request).items() if k not in DEFAULT_IGNORED}
    return json.dumps(comparable, sort_keys=True, separators=(",", ":"))


def keyed(secret: bytes, text: str) -> str:
    """The HMAC-SHA256 of a request's text under the cache's ``secret``, in hex."""
    return hmac.new(secret, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def _stored_key(exchange: Exchange) -> tuple[bytes, str] | None:
    """The secret and the digest a line was written with (``"request_hash"``), when it has both."""
    secret, _, digest = (exchange.request_hash or "").partition(".")
    try:
        return (bytes.fromhex(secret), digest) if secret and len(digest) == 64 else None
    except ValueError:
        return None


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def base_url_of(url: httpx2.URL) -> str:
    """The API a chat request goes to: its URL without ``/chat/completions``, query and
    user info (where credentials may be). A server on this machine is keyed without its port
    (``http://loopback/v1``): a local model server starts on a free port each time
    (``Fragola.local``), and a lesson's cache must still answer it."""
    path = url.path.removesuffix("/chat/completions")
    if url.host in LOOPBACK_HOSTS:
        return f"{url.scheme}://loopback{path}"
    return f"{url.scheme}://{url.netloc.decode('ascii')}{path}"


def _whole(exchange: Exchange) -> bool:
    return exchange.status == 200 and not exchange.cut and exchange.text is None


class Cache:
    """The answers of one cache file, by key, and the requests in flight (one per key).

    A file that is not a recording, or has a broken line, is a ``BadUsage`` naming the file
    and the line, and is left as it is; a last line cut short (a kernel killed while it
    wrote) is left out, and dropped when the next answer is appended.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        exists = self.path.is_file() and self.path.stat().st_size > 0
        exchanges = read_recording(self.path, torn=True) if exists else []
        self._appender = Appender(self.path)  # after reading: a broken file stays untouched
        self._lock = threading.Lock()  # transports of several event loops share the cache
        self._answers: dict[Key, Exchange] = {}
        self._flying: dict[Key, concurrent.futures.Future[None]] = {}
        stored = [_stored_key(exchange) for exchange in exchanges]
        self.secret = next((pair[0] for pair in stored if pair is not None), os.urandom(16))
        self._secrets = list(dict.fromkeys([self.secret] + [p[0] for p in stored if p]))
        seen: dict[tuple[str | None, str], int] = {}
        for exchange, pair in zip(exchanges, stored, strict=True):
            if not _whole(exchange):
                continue
            if pair is not None:
                digest = pair[1]
            else:  # no key written: its request says which one it answers, unless scrubbed
                text = request_text(exchange.request)
                if REDACTED in text:
                    continue
                digest = keyed(self.secret, text)
            found = (exchange.base_url, digest)
            repeat = exchange.repeat if exchange.repeat is not None else seen.get(found, 0)
            seen[found] = max(seen.get(found, 0), repeat + 1)
            self._answers.setdefault((*found, repeat), exchange)  # the first answer kept

    def __len__(self) -> int:
        return len(self._answers)

    def key_of(self, base_url: str, request: Mapping[str, Any], repeat: int) -> Key:
        """The key of a request as it is sent (with the credentials it holds)."""
        return base_url, keyed(self.secret, request_text(request)), repeat

    def claim(self, key: Key, request: Mapping[str, Any] | None = None
              ) -> Exchange | concurrent.futures.Future[None] | None:
        """The answer to ``key`` (or to ``request`` under a key another writer of the file
        used); else the future of the same request in flight, to wait for; else None, and
        the caller sends it and must ``settle`` it."""
        others = [] if request is None else [
            (key[0], keyed(secret, request_text(request)), key[2])
            for secret in self._secrets[1:]]
        with self._lock:
            for each in (key, *others):
                found = self._answers.get(each) or self._answers.get((None, *each[1:]))
                if found is not None:
                    return found
            flying = self._flying.get(key)
            if flying is not None:
                return flying
            self._flying[key] = concurrent.futures.Future()
            return None

    def settle(self, key: Key, record: dict[str, Any] | None, secrets: set[str]) -> None:
        """The answer to a claimed ``key`` came (``record``, appended when whole) or failed
        (None): the requests waiting for it go on."""
        try:
            if record is not None:
                self._keep(key, redacted(record, secrets))
        finally:
            with self._lock:
                flying = self._flying.pop(key, None)
            if flying is not None and not flying.done():
                flying.set_result(None)

    def _keep(self, key: Key, record: dict[str, Any]) -> None:
        chunks = record.get("chunks")
        exchange = Exchange(0, record.get("agent"), record["request"], record["status"],
                            record.get("body"), record.get("text"),
                            None if chunks is None else tuple(chunks),
                            record.get("cut") is True, key[0], key[2])
        if not _whole(exchange):  # an error, or a stream cut: asked again next time
            return
        self._appender.append({**record, "base_url": key[0], "repeat": key[2],
                               "request_hash": f"{self.secret.hex()}.{key[1]}"})
        with self._lock:
            self._answers.setdefault(key, exchange)


def caching_through(cache: Cache) -> Callable[[httpx2.AsyncClient], httpx2.AsyncClient]:
    """A ``ModelClient.wrap_http`` that answers from ``cache`` and fills it."""

    def wrap(http: httpx2.AsyncClient) -> httpx2.AsyncClient:
        return openai.DefaultAsyncHttpxClient(transport=CachingTransport(http, cache))

    return wrap


class CachingTransport(httpx2.AsyncBaseTransport):
    """Answers a chat request from the cache, or sends it through ``http`` and keeps the
    answer; any other request is sent as it is."""

    def __init__(self, http: httpx2.AsyncClient, cache: Cache) -> None:
        self._http = http
        self._cache = cache

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        sent = await chat_body(request)
        if sent is None:
            return await self._http.send(request, stream=True)
        secrets = credentials_of(request.headers, request.url, sent)
        key = self._cache.key_of(base_url_of(request.url), sent, REPEAT_INDEX.get())
        while True:
            found = self._cache.claim(key, sent)
            if isinstance(found, Exchange):
                return _served(found)
            if found is None:
                if HITS_ONLY.get():  # a budget is spent: only what costs nothing is answered
                    self._cache.settle(key, None, secrets)
                    raise NotCached(key[1][:80])
                break
            # Shielded: a waiter cancelled must not cancel the future the others wait on.
            await asyncio.shield(asyncio.wrap_future(found))
        record = {"agent": CURRENT_AGENT.get(None), "request": sent}
        try:
            return await exchanged(self._http, request, record,
                                   lambda done: self._cache.settle(key, done, secrets))
        except BaseException:
            self._cache.settle(key, None, secrets)
            raise

    async def aclose(self) -> None:
        await self._http.aclose()


def _served(exchange: Exchange) -> httpx2.Response:
    """A recorded answer as the API sent it: its chunks as an event stream, or its body."""
    if exchange.chunks is not None:
        events = [f"data: {json.dumps(chunk)}\n\n" for chunk in exchange.chunks]
        return httpx2.Response(200, headers={"content-type": "text/event-stream",
                                             CACHE_HEADER: "hit"},
                               content="".join([*events, "data: [DONE]\n\n"]).encode())
    return httpx2.Response(200, headers={"content-type": "application/json",
                                         CACHE_HEADER: "hit"},
                           content=json.dumps(exchange.body).encode())
