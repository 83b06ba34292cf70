"""``ModelClient``: the ``openai.AsyncOpenAI`` client(s) of one ``Fragola``, one per event
loop, and one request sent through it, its failures turned into ``ModelError`` subclasses."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import os
import ssl
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx2
import openai

from fragola_nb.base.errors import (
    BadUsage,
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeout,
)
from fragola_nb.base.inuse import remember
from fragola_nb.base.redact import (
    credentials_in,
    hidden,
    is_secret_name,
    redact_exception,
    redact_text,
)
from fragola_nb.models.client.ratelimit import (
    Limiter,
    NotSent,
    RateLimit,
    check_rate_limit,
    estimate_tokens,
    retry_delay,
)
from fragola_nb.models.client.reply import ChunkCallback, message_from_response, read_stream
from fragola_nb.models.client.reported import CACHE_HEADER, Exchange, ModelReply
from fragola_nb.models.client.request import (
    UNSENDABLE,
    asking_usage,
    body_and_options,
    checked_base_url,
    checked_key,
    headers_problem,
    sendable,
)

__all__ = ["NO_KEY", "ModelClient", "SendCheck", "ThrottleCallback"]

ThrottleCallback = Callable[[float], Awaitable[None]]
"""Told the seconds a request waits before retrying after a 429."""
SendCheck = Callable[[], None]
"""Called just before each try of a request is sent, after every wait (its turn under the
rate limit, a retry's backoff or ``Retry-After``): it raises to send nothing (a budget spent
meanwhile)."""

OFFLINE_CODES = frozenset({"script_exhausted", "replay_mismatch"})
"""Error codes of the package's own offline servers (a script that ran out, a request not in
a recording): their message is the whole line the user needs, said without the HTTP status
that would make it read like a failure of a real API."""
STREAM_CLASS: Any = openai.AsyncStream[object]  # streamed chunks come back as plain dicts
UNSET_OPTIONS: dict[str, Any] = dict.fromkeys(("headers", "timeout", "post_parser"),
                                              openai.NOT_GIVEN)
"""Request options left to the client, given as the client's own "not given": its request
options otherwise deep-copy a new ``NotGiven`` default for each of them at every request."""
NO_KEY = "no-key"
"""The API key sent to a base URL given without one: local servers (Ollama, vLLM, LM Studio,
llama.cpp) take any key."""


_ASKING: contextvars.ContextVar[Exchange | None] = contextvars.ContextVar(
    "fragola_nb_asking", default=None)
"""The exchange of the request this task is sending (``ModelClient.reply`` sets it)."""


async def _heard_cache(response: httpx2.Response) -> None:
    """A response hook: note on the exchange being sent that the cache answered it."""
    exchange = _ASKING.get()
    if exchange is not None and response.headers.get(CACHE_HEADER) == "hit":
        exchange.cached = True


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default TLS context, made once per process and shared by every client made
    here: loading the certificate store costs 60-150 ms, and a script that calls
    ``asyncio.run`` per turn gets a new client (for its new event loop) every turn."""
    return httpx2.create_ssl_context()


@dataclass
class _LoopClient:
    client: openai.AsyncOpenAI
    closer: AsyncGenerator[None, None]  # closes it when the loop shuts down


@dataclass(frozen=True)
class ClientSettings:
    """What a ``ModelClient`` was made with, for making one like it elsewhere (a Ray worker)."""

    given_client: bool  # client= or http_client= was given: a live object, not made again
    api_key: str | None  # as it was given or read from OPENAI_API_KEY; NO_KEY for none
    base_url: str | None  # None: the API's own
    options: dict[str, Any]  # the other openai.AsyncOpenAI options (a copy)
    rate_limit: RateLimit | None = None  # Fragola(rate_limit=...)


class ModelClient:
    """Owns the ``openai.AsyncOpenAI`` client(s) of one ``Fragola`` instance.

    A client made here is made per event loop: its connection pool belongs to the loop it was
    first used on, and notebooks, ``run_sync`` and scripts that call ``asyncio.run`` per turn
    use more than one loop. It is closed when its loop shuts down (``asyncio.run`` and
    ``asyncio.Runner`` close async generators before they close the loop), so no socket
    outlives its loop. A client passed in by the user is used as it is, and never closed here.

    The key is ``api_key``, else ``OPENAI_API_KEY``; the base URL is ``base_url``, else
    ``OPENAI_BASE_URL``. A base URL without a key (a local server) is sent ``NO_KEY``.
    """

    def __init__(
        self,
        *,
        client: openai.AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        options: dict[str, Any] | None = None,
        rate_limit: RateLimit | None = None,
    ) -> None:
        self._given = client
        self.rate_limit = check_rate_limit(rate_limit)
        self._limiter = None if rate_limit is None else Limiter(rate_limit)
        self._options = dict(options or {})
        for name in ("default_headers", "default_query"):  # ours: a later change is not sent
            if isinstance(self._options.get(name), Mapping):
                self._options[name] = dict(self._options[name])
        problem = headers_problem(self._options.get("default_headers") or {}, "default_headers")
        if problem:
            raise BadUsage(problem)
        for option, variable in (("organization", "OPENAI_ORG_ID"),
                                 ("project", "OPENAI_PROJECT_ID")):  # sent as headers too
            value = self._options.get(option) or os.environ.get(variable)
            if isinstance(value, str) and (value != value.strip() or not sendable(value)):
                raise BadUsage(f"{option} (or {variable}) {UNSENDABLE}, or space around it")
        self._base_url = (checked_base_url(base_url, "base_url")
                          or checked_base_url(os.environ.get("OPENAI_BASE_URL"),
                                               "OPENAI_BASE_URL"))
        self._api_key = (checked_key(api_key or None, "api_key")
                         or checked_key(os.environ.get("OPENAI_API_KEY"), "OPENAI_API_KEY"))
        if client is None and not self._api_key:
            if not self._base_url:
                raise BadUsage(
                    "no API key: pass api_key= or set OPENAI_API_KEY (a local server needs only "
                    "base_url= or OPENAI_BASE_URL), or run offline with Fragola.scripted() / "
                    "Fragola.from_env()"
                )
            self._api_key = NO_KEY
        if client is None and "http_client" not in self._options:
            _tls_context()  # now, not inside the first request's event loop step
        # Not weak: a loop's client refers to the loop (through its sockets), so a weak key
        # would never go. Entries leave when their loop shuts down (or is found closed).
        self._per_loop: dict[asyncio.AbstractEventLoop, _LoopClient] = {}
        self.wrap_http: Callable[[httpx2.AsyncClient], httpx2.AsyncClient] | None = None
        """Given the HTTP client made for a new ``openai`` client, the one to use instead
        (``fragola_nb.models.recording`` wraps its transport to see every exchange)."""
        # Its own, read once: the key and the options are fixed (default_headers and
        # default_query copied above, so what is sent is what was read here).
        self._own_credentials = frozenset(credentials_in(
            {"api_key": self._api_key}, self._options.get("default_headers"),
            self._options.get("default_query")))
        self._tool_credentials: dict[int, tuple[object, frozenset[str]]] = {}
        self.credentials()  # known before any server can quote them back

    def settings(self) -> ClientSettings:
        """What this client was made with (``ClientSettings``)."""
        return ClientSettings(self._given is not None or "http_client" in self._options,
                              self._api_key, self._base_url, dict(self._options),
                              self.rate_limit)

    @property
    def base_url(self) -> str:
        if self._given is not None:
            return str(self._given.base_url)
        return self._base_url or "https://api.openai.com/v1"

    def client(self) -> openai.AsyncOpenAI:
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        held = self._per_loop.get(loop)
        if held is None:
            held = self._per_loop[loop] = self._open(loop)
        return held.client

    def _open(self, loop: asyncio.AbstractEventLoop) -> _LoopClient:
        for old in [old for old in self._per_loop if old.is_closed()]:
            # Closed by hand (loop.close()) without shutting down its async generators: its
            # client cannot be closed any more; dropping it lets its sockets be collected.
            del self._per_loop[old]
        options = dict(self._options)
        ours = "http_client" not in options  # the user's own http_client is theirs to close
        if ours:
            http: httpx2.AsyncClient = openai.DefaultAsyncHttpxClient(verify=_tls_context())
            if self.wrap_http is not None:  # Fragola.record/replay: one transport per client
                http = self.wrap_http(http)
                # Only a wrapping of ours (Fragola.cached) says "hit"; a server cannot.
                http.event_hooks = {**http.event_hooks,
                                    "response": [*http.event_hooks["response"], _heard_cache]}
            options["http_client"] = http
        client = openai.AsyncOpenAI(api_key=self._api_key, base_url=self._base_url, **options)
        closer = self._close_with(loop, client, ours)
        # Run it to its yield now: that registers it with the running loop, whose shutdown
        # (asyncio.run, asyncio.Runner) then closes it. No task is left pending for that.
        try:
            closer.asend(None).send(None)
        except StopIteration:
            pass
        return _LoopClient(client, closer)

    async def _close_with(
        self, loop: asyncio.AbstractEventLoop, client: openai.AsyncOpenAI, ours: bool
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            held = self._per_loop.get(loop)
            if held is not None and held.client is client:
                del self._per_loop[loop]
            if ours:
                await client.close()

    async def aclose(self) -> None:
        """Close the client made for the running loop (with an ``http_client`` given in the
        options, that one too)."""
        held = self._per_loop.pop(asyncio.get_running_loop(), None)
        if held is not None:
            await held.closer.aclose()
            await held.client.close()

    async def complete(
        self, request: dict[str, Any], on_chunk: ChunkCallback | None = None
    ) -> dict[str, Any]:
        """Send one request; return the assistant message as a Chat Completions dict
        (``reply`` gives the usage as well)."""
        return (await self.reply(request, on_chunk)).message

    async def reply(
        self, request: dict[str, Any], on_chunk: ChunkCallback | None = None,
        exchange: Exchange | None = None, on_throttle: ThrottleCallback | None = None,
        before_send: SendCheck | None = None,
    ) -> ModelReply:
        """Send one request; return the assistant message and the usage the server reported.

        ``on_chunk(chunk, content, partial)`` is awaited for each streamed chunk that carries
        choice 0, with the chunk as an ``openai`` ``ChatCompletionChunk`` (built only when
        there is a callback); a plain answer to a streaming request is one such chunk. A
        streaming request asks for usage (``stream_options``) unless it sets its own.
        ``exchange``, when given, learns whether the server began to answer and the usage it
        reported, also when this raises or is cancelled half-way. A request waits for its
        turn under the rate limit, and failures are retried as ``ratelimit`` says;
        ``on_throttle(seconds)`` is awaited before waiting out a 429; ``before_send()`` is
        called before each try goes out, after its waits, and what it raises is raised as it
        is, nothing sent.
        """
        if exchange is None:
            exchange = Exchange()
        asking = _ASKING.set(exchange)  # for _heard_cache, called inside the post below
        try:
            return await self._send(request, on_chunk, exchange, (on_throttle, before_send))
        finally:
            _ASKING.reset(asking)

    async def _send(self, request: dict[str, Any], on_chunk: ChunkCallback | None,
                    exchange: Exchange,
                    told: tuple[ThrottleCallback | None, SendCheck | None]) -> ModelReply:
        body, options = body_and_options(asking_usage(request))
        client = self.client()
        sent = (options, body)  # headers, query and extra_json in the options
        self._sent_credentials(body, options)
        retried = [0]
        try:
            return await self._paced(client, body, options, on_chunk, exchange, told,
                                     retried)
        except openai.APITimeoutError as exc:
            self._hide_credentials(exc, sent)
            raise ModelTimeout(f"the model API did not answer in time: {exc}") from exc
        except openai.APIConnectionError as exc:
            if not isinstance(exc.__cause__, httpx2.LocalProtocolError):
                self._hide_credentials(exc, sent)
                raise ModelConnectionError(f"connection to the model API failed: {exc}") from exc
            # A header the request could not be sent with: raised below, unchained.
        except openai.APIStatusError as exc:
            said = _one_line(self._unquoted(exc, sent))
            if _error_code(exc) not in OFFLINE_CODES:
                said = f"the model API answered HTTP {exc.status_code}: {said}"
            if retried[0]:
                said += f" (after {retried[0]} {'retry' if retried[0] == 1 else 'retries'})"
            self._hide_credentials(exc, sent)
            raise ModelHTTPError(said, status_code=exc.status_code) from exc
        except openai.APIResponseValidationError as exc:
            self._hide_credentials(exc, sent)
            raise ModelResponseError(f"the model API's answer was not valid: {exc}") from exc
        except UnicodeEncodeError as exc:
            if exc.encoding != "ascii":  # the JSON body, not a header
                raise BadUsage(
                    f"the request could not be encoded ({exc.reason}): does a message hold a "
                    "lone surrogate, such as '\\ud800'?") from exc
            # A header value that is not ASCII: raised below, unchained.
        except (openai.OpenAIError, ValueError) as exc:
            # A body that is not JSON surfaces as a ValueError from the client's parser.
            self._hide_credentials(exc, sent)
            raise ModelResponseError(f"the model API's answer was not usable: {exc}") from exc
        except RecursionError as exc:
            raise ModelResponseError(
                "the model API's answer is nested too deeply to be read") from exc
        # Only a key from openai's key provider gets here; the exceptions of the HTTP library
        # quote the whole header, so none is chained (this is raised outside the except).
        raise BadUsage(f"a request header (the API key?) {UNSENDABLE}")

    async def _paced(
        self, client: openai.AsyncOpenAI, body: dict[str, Any], options: Any,
        on_chunk: ChunkCallback | None, exchange: Exchange,
        told: tuple[ThrottleCallback | None, SendCheck | None], retried: list[int],
    ) -> ModelReply:
        """Send ``body``, waiting for its turn under the rate limit, and retry what may be
        retried (``openai``'s own retries are off: a 429 must be heard, and each try paced)."""
        tries: Any = {**UNSET_OPTIONS, **options, "max_retries": 0}  # openai's RequestOptions
        on_throttle, before_send = told
        limiter = self._limiter
        estimate = estimate_tokens(body) if limiter is not None else 0
        while True:
            if limiter is not None:
                wait = limiter.reserve(estimate)
                if wait > 0:
                    await asyncio.sleep(wait)
            if before_send is not None:
                try:
                    before_send()  # after the waits: a budget may have been spent meanwhile
                except BaseException:
                    if limiter is not None:
                        limiter.settle(estimate, 0)  # not sent: its tokens come back
                    raise
            try:
                if body.get("stream"):
                    stream = await client.post("/chat/completions", body=body, cast_to=object,
                                               options=tries, stream=True,
                                               stream_cls=STREAM_CLASS)
                    exchange.answered = True
                    reply = await read_stream(stream, on_chunk, exchange)
                else:
                    data = await client.post("/chat/completions", body=body, cast_to=object,
                                             options=tries)
                    exchange.answered = True
                    exchange.saw(data)  # its usage read once, there
                    reply = ModelReply(message_from_response(data), exchange.usage)
            except NotSent:  # refused before it went out (a cache's miss): tokens back
                if limiter is not None:
                    limiter.settle(estimate, 0)
                raise
            except (openai.APIStatusError, openai.APIConnectionError) as exc:
                delay = self._retry(exc, exchange, client.max_retries, retried[0])
                if delay is None:
                    raise
                retried[0] += 1
                if on_throttle is not None and getattr(exc, "status_code", None) == 429:
                    await on_throttle(delay)
                await asyncio.sleep(delay)
                continue
            if limiter is not None and exchange.usage is not None:
                limiter.settle(estimate, exchange.usage["total_tokens"])
            return reply

    @staticmethod
    def _retry(exc: openai.APIError, exchange: Exchange, most: int, done: int
               ) -> float | None:
        if exchange.answered or done >= most:  # a reply half-read is never sent again
            return None
        if isinstance(exc, openai.APIStatusError):
            return retry_delay(exc.status_code, exc.response.headers, done)
        if isinstance(exc.__cause__, httpx2.LocalProtocolError):
            return None  # a header that cannot be sent will not be sent by trying again
        return retry_delay(None, None, done)

    def _hide_credentials(self, exc: BaseException, sent: tuple[Any, ...]) -> None:
        """Redact, in place, the exception about to be chained into ours and all it chains:
        its message and body (a server that echoes the key it was sent, a 422 quoting
        ``extra_body``), and, on an ``openai`` error, its ``response`` and ``request``,
        replaced by copies whose headers and content are redacted (the request carried the
        key in ``Authorization``). The chain stays whole for ``%tb`` and logs, with no
        credential of this request in it."""
        known = self.credentials(*(value for value in sent if isinstance(value, Mapping)))
        for link in _links(exc):
            if isinstance(link, (openai.APIError, httpx2.HTTPStatusError, httpx2.RequestError)):
                _redact_http(link, known)
        redact_exception(exc, known)

    def _unquoted(self, exc: openai.APIStatusError, sent: tuple[Any, ...]) -> str:
        """What the server said, without the credentials it may quote back (a proxy might,
        whole): the key, and credential headers and query values, the client's own
        (``default_headers``, ``default_query``) and the request's (``extra_headers``,
        ``extra_query``, ``extra_body``...)."""
        given = [value for value in sent if isinstance(value, Mapping)]
        # By fragola_nb.base.redact's rule for known values: a short key ("ollama") is left in
        # ordinary words ("ollama pull llama3.2"), never cut out of them.
        return redact_text(_error_text(exc), self.credentials(*given))

    def _sent_credentials(self, body: dict[str, Any], options: dict[str, Any]) -> None:
        """Remember what ``credentials(options, body)`` finds in a request about to go out
        (its messages left out), for less: the client's own were remembered when it was made
        (a given client's key is read again: it may have been changed), and each tool
        definition is read once (a ``Tool`` is immutable: its definition is the same object
        in every request)."""
        rest = {key: value for key, value in body.items() if key not in ("messages", "tools")}
        if options.keys() - {"security"}:  # headers, query, extra_json (security is ours)
            found = credentials_in({k: v for k, v in options.items() if k != "security"}, rest)
        else:
            found = credentials_in(rest)
        tools = body.get("tools")
        if isinstance(tools, list):
            memo = self._tool_credentials
            for definition in tools:
                held = memo.get(id(definition))
                if held is None or held[0] is not definition:
                    if len(memo) >= 1024:  # tools made per turn: forget the old ones
                        memo.clear()
                    held = memo[id(definition)] = (definition,
                                                   frozenset(credentials_in([definition])))
                found |= held[1]
        elif tools is not None:
            found |= credentials_in({"tools": tools})
        if self._given is not None and isinstance(self._given.api_key, str):
            found.add(self._given.api_key)
        found.discard(NO_KEY)
        if found:
            remember(found)

    def credentials(self, *sent: Mapping[str, Any]) -> set[str]:
        """The credentials this client sends (its key, credential headers and query values of
        its options) and those in ``sent`` (a request's headers, query, body): what a server
        may quote back, to be hidden by value wherever fragola_nb shows or writes text."""
        known = credentials_in(*sent)
        known |= self._own_credentials
        known.discard(NO_KEY)
        if self._given is not None and isinstance(self._given.api_key, str):
            known.add(self._given.api_key)
        remember(known)  # the one place every writer and view asks (fragola_nb.base.inuse)
        return known


def _links(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it chains, cause or context (a suppressed context too)."""
    found: list[BaseException] = []
    stack = [exc]
    while stack:
        current = stack.pop()
        if all(current is not seen for seen in found):
            found.append(current)
            stack += [link for link in (current.__cause__, current.__context__) if link]
    return found


def _redact_http(exc: BaseException, known: set[str]) -> None:
    """Replace the ``request`` and ``response`` an HTTP error keeps by redacted copies."""
    with contextlib.suppress(Exception):  # a request not set: httpx raises RuntimeError
        request = exc.request  # type: ignore[attr-defined]
        if isinstance(request, httpx2.Request):
            exc.request = _redacted_request(request, known)  # type: ignore[attr-defined]
    response = getattr(exc, "response", None)
    if isinstance(response, httpx2.Response):
        with contextlib.suppress(Exception):
            exc.response = _redacted_response(response, known)  # type: ignore[attr-defined]


def _redacted_headers(headers: httpx2.Headers, known: set[str]) -> list[tuple[str, str]]:
    return [(name, hidden(value) if is_secret_name(name) else redact_text(value, known))
            for name, value in headers.multi_items()]


def _redacted_request(request: httpx2.Request, known: set[str]) -> httpx2.Request:
    try:
        content = redact_text(request.content.decode("utf-8", "replace"), known).encode()
    except httpx2.RequestNotRead:  # a streamed upload: nothing of it kept
        content = b""
    return httpx2.Request(request.method, redact_text(str(request.url), known),
                          headers=_redacted_headers(request.headers, known), content=content)


def _redacted_response(response: httpx2.Response, known: set[str]) -> httpx2.Response:
    try:
        content = redact_text(response.text, known).encode()
    except httpx2.ResponseNotRead:
        content = b""
    headers = [(name, value) for name, value in _redacted_headers(response.headers, known)
               if name.lower() not in ("content-length", "content-encoding")]
    try:
        request: httpx2.Request | None = _redacted_request(response.request, known)
    except RuntimeError:  # a response made without its request
        request = None
    return httpx2.Response(response.status_code, headers=headers, content=content,
                           request=request)


def _one_line(text: str, limit: int = 2000) -> str:
    """A server's error text as one line (a validation error or a traceback spans many), at
    most ``limit`` characters; the whole body stays on the chained ``openai`` exception."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _error_code(exc: openai.APIStatusError) -> object:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        return body.get("code") or (error.get("code") if isinstance(error, dict) else None)
    return None


def _error_text(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if message:
            return str(message)
    return exc.message
